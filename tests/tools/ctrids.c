/*
 * ctrids.c — what the click-through reader (worker/data_ctr.h) makes of a
 * file, for comparing with another reader (tests/bench/torch_ctr.py
 * --dump, in tests/integration/ctr_ids.sh) and for timing it.
 *
 *   ctrids [--format criteo|libsvm] [--input-dim D] [--workers N] [--batch B]
 *          [--batches K] [--index CACHE] [--shuffle SEED] [--time] FILE
 *
 * Prints, for every line of every worker's part in worker order (worker k
 * of N, batch after batch of B): the label, the num floats (%.9g) and the
 * cat ids, space-separated, one line a sample. --time prints instead one
 * line: samples, seconds, samples/s, reading every batch and discarding it;
 * with --batches K, only each worker's first K batches (the cost of
 * opening: with --index, the index cache of data_ctr.h). --shuffle SEED
 * reads epoch 0's shuffled order of that seed (data_ctr.h, *Order*)
 * instead of file order.
 */
#include "worker/data_ctr.h"
#include "clock.h"
#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    struct wk_ctr_opts o = { .format = WK_CTR_CRITEO, .input_dim = 1u << 20 };
    struct wk_ctr *c;
    const char *path = NULL;
    int workers = 1, B = 512, timing = 0, rv = HC_OK, max_batches = -1;
    long long samples = 0;
    double t0 = hc_now_s();
    float *label, *num;
    int64_t *cat;

    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";

        if (strcmp(argv[i], "--format") == 0 && ++i < argc) {
            if (wk_ctr_format_parse(v, &o.format) != HC_OK) {
                fprintf(stderr, "ctrids: %s\n", hc_err_msg());
                return 2;
            }
        } else if (strcmp(argv[i], "--input-dim") == 0 && ++i < argc) {
            o.input_dim = strtoull(v, NULL, 0);
        } else if (strcmp(argv[i], "--workers") == 0 && ++i < argc) {
            workers = atoi(v);
        } else if (strcmp(argv[i], "--batches") == 0 && ++i < argc) {
            max_batches = atoi(v);
        } else if (strcmp(argv[i], "--batch") == 0 && ++i < argc) {
            B = atoi(v);
        } else if (strcmp(argv[i], "--index") == 0 && ++i < argc) {
            o.index_path = v;
        } else if (strcmp(argv[i], "--shuffle") == 0 && ++i < argc) {
            o.shuffle = 1;
            o.seed = strtoull(v, NULL, 0);
        } else if (strcmp(argv[i], "--time") == 0) {
            timing = 1;
        } else if (argv[i][0] != '-' && path == NULL) {
            path = argv[i];
        } else {
            fprintf(stderr, "usage: ctrids [--format criteo|libsvm] "
                    "[--input-dim D] [--workers N] [--batch B] "
                    "[--batches K] [--index CACHE] [--shuffle SEED] "
                    "[--time] FILE\n");
            return 2;
        }
    }
    if (path == NULL || B < 1) {
        fprintf(stderr, "ctrids: a file and a batch ≥ 1 are needed\n");
        return 2;
    }
    if ((rv = wk_ctr_open(path, &o, &c)) != HC_OK) {
        fprintf(stderr, "ctrids: %s\n", hc_err_msg());
        return 1;
    }
    label = malloc((size_t)B * sizeof *label);
    num = malloc((size_t)B * (size_t)wk_ctr_n_num(c) * sizeof *num);
    cat = malloc((size_t)B * (size_t)wk_ctr_n_cat(c) * sizeof *cat);
    if (!label || !num || !cat) {
        fprintf(stderr, "ctrids: no memory for a batch of %d\n", B);
        return 1;
    }
    for (int k = 0; k < workers && rv == HC_OK; k++) {
        int nb = wk_ctr_n_batches(c, workers, k, B);

        if (max_batches >= 0 && nb > max_batches)
            nb = max_batches;
        if (nb == 0) {
            rv = wk_ctr_part(c, workers, k, &(long long){ 0 },
                             &(long long){ 0 });
            break;
        }
        for (int b = 0; b < nb && rv == HC_OK; b++) {
            int n;

            rv = wk_ctr_batch(c, workers, k, 0, b, B, label, num, cat, &n);
            samples += n;
            for (int i = 0; i < n && !timing; i++) {
                printf("%g", label[i]);
                for (int j = 0; j < wk_ctr_n_num(c); j++)
                    printf(" %.9g", num[i * wk_ctr_n_num(c) + j]);
                for (int j = 0; j < wk_ctr_n_cat(c); j++)
                    printf(" %lld",
                           (long long)cat[i * wk_ctr_n_cat(c) + j]);
                putchar('\n');
            }
        }
    }
    if (rv != HC_OK) {
        fprintf(stderr, "ctrids: %s\n", hc_err_msg());
        return 1;
    }
    if (timing) {
        double s = hc_now_s() - t0;

        printf("ctrids: %lld samples in %.3f s (opening included, index "
               "%s): %.0f samples/s\n", samples, s,
               wk_ctr_index_cached(c) ? "from its cache" : "built",
               (double)samples / s);
    }
    wk_ctr_close(c);
    free(label);
    free(num);
    free(cat);
    return 0;
}
