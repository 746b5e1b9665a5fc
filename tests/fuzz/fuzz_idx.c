/*
 * fuzz_idx.c — libFuzzer target: the IDX readers (worker/data.c), plain
 * and gzip. The input is split in two files at the position its first two
 * bytes give (little-endian, modulo the rest's length): an images file and
 * a labels file, loaded together; the images file is also loaded alone.
 */
#include "fuzz.h"
#include "fuzz_util.inc"
#include "worker/data.h"
#include "err.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wk_dataset d;
    char images[512];
    size_t cut;

    if (size < 2)
        return 0;
    cut = ((size_t)data[0] | (size_t)data[1] << 8) % (size - 1);
    data += 2;
    size -= 2;
    snprintf(images, sizeof images, "%s", fz_write("images", data, cut));
    if (wk_data_load_images(images, &d) == HC_OK)
        wk_data_free(&d);
    if (wk_data_load(images, fz_write("labels", data + cut, size - cut),
                     &d) == HC_OK) {
        wk_data_check_classes(&d, 10);
        wk_data_free(&d);
    }
    return 0;
}
