/*
 * fault.c — the fault points of fault.h: HETPS_FAULT read at each point
 * (points are on rare paths, such as a create), a named one kills the
 * process with SIGKILL, as an operator's `kill -9` or the OOM killer
 * would.
 */
#include "fault.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"

/* `list` (comma-separated) holds `point` as a whole item. */
static int listed(const char *list, const char *point)
{
    size_t n = strlen(point);

    for (const char *p = list; (p = strstr(p, point)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return 1;
    return 0;
}

void ps_fault_point(const char *point)
{
    const char *armed = getenv("HETPS_FAULT");

    if (!armed || !*armed || !listed(armed, point))
        return;
    hc_warn("fault point %s (HETPS_FAULT): killing this process with SIGKILL",
            point);
    hc_sleep_s(0.2);
    raise(SIGKILL);
}
