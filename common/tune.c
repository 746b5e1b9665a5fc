/*
 * tune.c — process-wide settings (see tune.h).
 */
#include "tune.h"

#include <malloc.h>

void hc_tune_process(void)
{
    /* Up to 1 GiB: a push of an 80 MB model to one shard is one 80 MB
     * message, faulted in afresh on every step if it were mmapped. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 16 << 20);
}
