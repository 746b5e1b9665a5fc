/*
 * fuzz_npy.c — libFuzzer target: the .npy reader (common/npy.c, used by
 * worker/eval.c's wk_load_npy). The input is the file dense/kernel.npy of
 * a model with one Dense(3) layer over 4 inputs (kernel (4, 3), bias (3,));
 * the bias file is a fixed good one, so the kernel is read first and, when
 * it is good, the bias after it.
 */
#include <sys/stat.h>

#include "fuzz.h"
#include "fuzz_util.inc"
#include "err.h"
#include "worker/eval.h"
#include "model.h"
#include "npy.h"

static struct hc_model model;
static float params[64];

static const char model_json[] =
    "{\"name\": \"fz\", \"input_shape\": [4], \"layers\": [{\"type\": "
    "\"dense\", \"name\": \"dense\", \"units\": 3}], \"loss\": "
    "\"sparse_categorical_crossentropy\", \"optimizer\": {\"type\": \"sgd\", "
    "\"learning_rate\": 0.1}}";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const float bias[3] = { 1, 2, 3 };
    const size_t shape[1] = { 3 };
    char path[512];

    (void)argc;
    (void)argv;
    if (hc_model_parse(model_json, sizeof model_json - 1, "fuzz", &model) != HC_OK ||
        model.n_params > sizeof params / sizeof params[0]) {
        fprintf(stderr, "fuzz_npy: model: %s\n", hc_err_msg());
        abort();
    }
    snprintf(path, sizeof path, "%s/dense", fz_dir());
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/dense/bias.npy", fz_dir());
    if (hc_npy_write_f32(path, shape, 1, bias) != HC_OK) {
        fprintf(stderr, "fuzz_npy: %s\n", hc_err_msg());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_write("dense/kernel.npy", data, size);
    wk_load_npy(&model, fz_dir(), params);
    return 0;
}
