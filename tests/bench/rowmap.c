/*
 * rowmap.c — what a click-through step's de-duplication costs the worker:
 * hc_rowmap_build (common/rowmap.h) of a batch of BATCH × 26 ids, drawn
 * Zipf(1.05)-like over a table of 2^23 rows (the click-through benches'
 * input_dim), for 1 and 2 shards; ROUNDS builds on one reused map, each
 * of fresh ids (drawing them is not timed). Prints µs a build and the
 * unique ids of the last batch for each shard count.
 *
 * Usage: rowmap [BATCH] [ROUNDS]   (defaults 512 400)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "err.h"
#include "rng.h"
#include "rowmap.h"

#define FIELDS 26
#define TABLE_ROWS (1ull << 23)

static double cpu_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* n ids: ranks drawn with P(rank ≥ r) ≈ r^(−0.05) (a Zipf-like head and
 * long tail), each rank hashed to a row so hot ids scatter. */
static void draw(uint64_t *ids, size_t n, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        double u = ((double)(hc_splitmix64(state) >> 11) + 1.0) /
                   9007199254740993.0;     /* (0, 1] */
        uint64_t rank = (uint64_t)pow(u, -1.0 / 0.05);

        ids[i] = hc_mix64(rank) % TABLE_ROWS;
    }
}

int main(int argc, char **argv)
{
    int batch = argc > 1 ? atoi(argv[1]) : 512;
    int rounds = argc > 2 ? atoi(argv[2]) : 400;
    size_t n;
    uint64_t *ids;

    if (batch < 1 || rounds < 1) {
        fprintf(stderr, "usage: rowmap [BATCH] [ROUNDS]\n");
        return 2;
    }
    n = (size_t)batch * FIELDS;
    if (!(ids = malloc(n * sizeof *ids))) {
        fprintf(stderr, "rowmap: out of memory for %zu ids\n", n);
        return 1;
    }
    for (uint32_t shards = 1; shards <= 2; shards++) {
        struct hc_rowmap m = {0};
        uint64_t state = 1;
        double t = 0;

        for (int r = 0; r < rounds; r++) {
            double t0;

            draw(ids, n, &state);
            t0 = cpu_now();
            if (hc_rowmap_build(&m, 3, ids, n, shards, TABLE_ROWS) != HC_OK) {
                fprintf(stderr, "rowmap: %s\n", hc_err_msg());
                return 1;
            }
            t += cpu_now() - t0;
        }
        printf("rowmap: %zu ids on %u shard(s): %.1f us a build (%d builds), "
               "%zu unique ids in the last\n", n, shards, 1e6 * t / rounds,
               rounds, m.n_unique);
        hc_rowmap_free(&m);
    }
    free(ids);
    return 0;
}
