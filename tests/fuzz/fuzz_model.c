/*
 * fuzz_model.c — libFuzzer target: the model file parser (common/model*.c).
 * The input is the JSON text; a model that parses is initialised too
 * (every variable's initial values), so its shapes and sizes are used as a
 * worker would use them.
 */
#include <stdlib.h>

#include "fuzz.h"
#include "err.h"
#include "model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct hc_model m;
    float *params;

    if (hc_model_parse((const char *)data, size, "fuzz", &m) != HC_OK)
        return 0;
    if (m.n_params > (64u << 20))   /* the reference model has 55 k */
        return 0;
    params = malloc((m.n_params + 1) * sizeof *params);
    if (params)
        hc_model_init_params(&m, params);
    free(params);
    return 0;
}
