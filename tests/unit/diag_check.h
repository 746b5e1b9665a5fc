/*
 * diag_check.h — looking into a cluster reader's diagnostics (struct
 * hc_diag), for the tests of the cluster file, TF_CONFIG and the resolvers
 * (test_cluster.c, test_resolve.c). Linked into every unit program.
 */
#ifndef HP_TEST_DIAG_CHECK_H
#define HP_TEST_DIAG_CHECK_H

#include "cluster.h"

/* 1 when one stored message of d holds both a and b (b may be NULL). */
int hp_diag_has(const struct hc_diag *d, const char *a, const char *b);

/* 1 when one note of d holds a. */
int hp_note_has(const struct hc_diag *d, const char *a);

/* Print d's messages under "for WHAT", to show why a check failed. */
void hp_diag_show(const char *what, const struct hc_diag *d);

#endif
