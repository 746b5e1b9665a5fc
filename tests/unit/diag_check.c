/*
 * diag_check.c — see diag_check.h.
 */
#include "diag_check.h"

#include <stdio.h>
#include <string.h>

int hp_diag_has(const struct hc_diag *d, const char *a, const char *b)
{
    int i, n = d->n < HC_DIAG_MAX ? d->n : HC_DIAG_MAX;

    for (i = 0; i < n; i++)
        if (strstr(d->msg[i], a) && (!b || strstr(d->msg[i], b)))
            return 1;
    return 0;
}

int hp_note_has(const struct hc_diag *d, const char *a)
{
    int i;

    for (i = 0; i < d->n_note; i++)
        if (strstr(d->note[i], a))
            return 1;
    return 0;
}

void hp_diag_show(const char *what, const struct hc_diag *d)
{
    printf("\n  for %s got %d message(s):\n", what, d->n);
    hc_diag_print(d, stdout);
}
