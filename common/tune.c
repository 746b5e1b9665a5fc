/*
 * tune.c — process-wide settings (see tune.h).
 */
#include "tune.h"

#include <malloc.h>

void hc_tune_process(void)
{
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 16 << 20);
}
