/*
 * fuzz_cluster.c — libFuzzer target: the cluster file / TF_CONFIG parser
 * (common/cluster*.c). The input is the JSON text; the last byte, when it
 * is '\x01', asks to apply a --task flag too, and its result is printed as
 * `hetps check-config` does (to /dev/null).
 */
#include <stdio.h>

#include "fuzz.h"
#include "cluster.h"
#include "err.h"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    devnull = fopen("/dev/null", "w");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct hc_diag diag;     /* 8 KiB+: not on the stack */
    struct hc_cluster c;

    if (hc_cluster_parse((const char *)data, size, "fuzz", &c, &diag) != HC_OK) {
        hc_diag_print(&diag, devnull);
        return 0;
    }
    if (hc_cluster_set_task(&c, "worker:1", "--task", &diag) == HC_OK)
        hc_cluster_set_mode(&c, "ssp:3", "--mode");
    hc_cluster_print(&c, devnull);
    hc_cluster_free(&c);
    return 0;
}
