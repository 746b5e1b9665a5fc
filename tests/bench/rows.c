/*
 * rows.c — what a table's size costs a step of row-sparse tables on a
 * shard: pull + push of BATCH random rows (ps_store_rows_read, then
 * ps_store_apply_rows with Adagrad) from a table already fed FILL distinct
 * ids spread over 2^40, against the same from a table of 10^5 rows (every
 * row stored after its warm-up), in one run. Two stores in temporary
 * directories, rows of DIM floats; each timed round is ROUNDS pulls and
 * pushes of fresh random ids (for the large table: half among the stored
 * rows, half new; for the small one: any of its 10^5). Prints rows/s for
 * each table, the ratio, the stores' sizes and this process's peak RSS.
 *
 * With REOPENS above 0, the large table's store is then closed and opened
 * again REOPENS times, taking turns without and with its pages mapped
 * ahead (ps_store_opts.map_ahead_max), each time timing the open, a pull
 * of BATCH random stored rows and a pull + push of the same rows, with
 * this process's minor page faults in each: what a restarted shard's
 * first steps cost.
 *
 * Usage: rows [FILL] [BATCH] [ROUNDS] [DIM] [REOPENS]
 *        (defaults 2000000 10000 20 16 0)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "model.h"
#include "ps/store.h"
#include "rng.h"

#define VAR 0

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* n ascending unique ids into ids (n ≤ what draw gives distinct). */
static size_t sorted_unique(uint64_t *ids, size_t n)
{
    size_t u = 0;

    qsort(ids, n, sizeof *ids, cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (u == 0 || ids[i] != ids[u - 1])
            ids[u++] = ids[i];
    return u;
}

static struct ps_store *open_table(const char *dir, uint64_t rows,
                                   uint32_t dim,
                                   const struct hc_optim_conf *c,
                                   const struct ps_store_opts *o)
{
    static struct hc_block b0 = {1, 0, 1, 0, 0, 0, 0};
    static uint64_t elems[1] = {1};
    static uint32_t blocks[1] = {1};
    struct hc_layout l = {1, 4086, 1, &b0, 1, elems, blocks};
    struct ps_table t = {VAR, dim, rows,
                         {HC_INIT_RANDOM_UNIFORM, {-0.05f, 0.05f, 0, 0}}};
    struct ps_store_def d = {.signature = 1, .layout = &l, .optim = c,
                             .tables = &t, .n_tables = 1, .seed = 3};
    struct ps_store *s = NULL;

    if (ps_store_open(dir, o, &s) != HC_OK ||
        ps_store_init(s, &d, NULL) != HC_OK) {
        fprintf(stderr, "rows: %s\n", hc_err_msg());
        exit(1);
    }
    return s;
}

/* One pull + push of ids[0 .. n): rows read, gradients = rows · 0.1. */
static void step(struct ps_store *s, const struct hc_optim_conf *c,
                 const uint64_t *ids, size_t n, uint32_t dim, float *buf)
{
    struct ps_rows r = {VAR, n, ids, buf, 1.0f};

    if (ps_store_rows_read(s, VAR, ids, n, buf, NULL) != HC_OK ||
        ps_store_apply_rows(s, c, NULL, 0, &r, 1, NULL, 0, NULL) != HC_OK) {
        fprintf(stderr, "rows: %s\n", hc_err_msg());
        exit(1);
    }
    (void)dim;
}

/* This process's anonymous resident memory (/proc/self/status RssAnon),
 * MiB; -1 when it cannot be read. The store's pages are file-backed. */
static long rss_anon_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;

    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib < 0 ? -1 : kib / 1024;
}

static long minor_faults(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* The large table's store closed and opened again `times` times, without
 * and with its pages mapped ahead in turn: the open, then a pull of batch
 * random stored rows and a pull + push of them, timed, faults counted. */
static void reopen_rounds(const char *dir, int times, uint32_t dim,
                          const struct hc_optim_conf *c, const uint64_t *stored,
                          uint64_t n_stored, uint64_t *ids, size_t batch,
                          float *buf, uint64_t *st)
{
    for (int k = 0; k < times; k++) {
        struct ps_store_opts o = {.map_ahead_max = k % 2
                                      ? 0 : PS_STORE_MAP_AHEAD_OFF};
        struct ps_store *s;
        double t0 = hc_now_s(), t_open, t_pull, t_step;
        long f0, f_pull, f_step;
        size_t n;

        s = open_table(dir, 1ull << 40, dim, c, &o);
        t_open = hc_now_s() - t0;
        for (size_t i = 0; i < batch; i++)
            ids[i] = stored[hc_splitmix64(st) % n_stored];
        n = sorted_unique(ids, batch);
        f0 = minor_faults();
        t0 = hc_now_s();
        if (ps_store_rows_read(s, VAR, ids, n, buf, NULL) != HC_OK) {
            fprintf(stderr, "rows: %s\n", hc_err_msg());
            exit(1);
        }
        t_pull = hc_now_s() - t0;
        f_pull = minor_faults() - f0;
        f0 = minor_faults();
        t0 = hc_now_s();
        step(s, c, ids, n, dim, buf);
        t_step = hc_now_s() - t0;
        f_step = minor_faults() - f0;
        printf("  reopened, %s: open %.0f ms (%llu MiB mapped ahead); pull "
               "%.1f ms (%ld faults), then pull + push %.1f ms (%ld faults)\n",
               k % 2 ? "mapped ahead" : "not mapped ahead", 1e3 * t_open,
               (unsigned long long)(ps_store_mapped_ahead(s) >> 20),
               1e3 * t_pull, f_pull, 1e3 * t_step, f_step);
        ps_store_close(s);
    }
}

static double du_mib(const char *dir)
{
    char path[600];
    struct stat st;

    snprintf(path, sizeof path, "%s/data.mdb", dir);
    return stat(path, &st) == 0 ? (double)st.st_blocks * 512 / 1048576 : 0;
}

int main(int argc, char **argv)
{
    uint64_t fill = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
    size_t batch = argc > 2 ? strtoul(argv[2], NULL, 10) : 10000;
    int rounds = argc > 3 ? atoi(argv[3]) : 20;
    uint32_t dim = argc > 4 ? (uint32_t)atoi(argv[4]) : 16;
    int reopens = argc > 5 ? atoi(argv[5]) : 0;
    struct hc_optim_conf c;
    char big_dir[] = "/tmp/hetps-bench-rows-XXXXXX";
    char small_dir[] = "/tmp/hetps-bench-rows-XXXXXX";
    uint64_t *ids, *stored, st = 99, n_stored = 0;
    float *buf;
    struct ps_store *big, *small;
    double t0, t_big = 0, t_small = 0;
    struct rusage ru;

    if (batch < 2 || rounds < 1 || dim < 1 || fill < batch || reopens < 0) {
        fprintf(stderr, "usage: rows [FILL] [BATCH] [ROUNDS] [DIM] "
                "[REOPENS]\n");
        return 2;
    }
    hc_log_set_level(HC_LOG_WARN);
    hc_optim_defaults(HC_OPT_ADAGRAD, &c);
    ids = malloc(batch * sizeof *ids);
    stored = malloc(fill * sizeof *stored);
    buf = malloc(batch * dim * sizeof *buf);
    if (!ids || !stored || !buf || !mkdtemp(big_dir) || !mkdtemp(small_dir))
        return 1;
    big = open_table(big_dir, 1ull << 40, dim, &c, NULL);
    small = open_table(small_dir, 100000, dim, &c, NULL);

    /* Fill: FILL distinct ids pushed in batches; the small table whole. */
    t0 = hc_now_s();
    while (n_stored < fill) {
        size_t n = fill - n_stored < batch ? (size_t)(fill - n_stored) : batch;

        for (size_t i = 0; i < n; i++)
            ids[i] = hc_splitmix64(&st) >> 24;
        n = sorted_unique(ids, n);
        step(big, &c, ids, n, dim, buf);
        memcpy(stored + n_stored, ids, n * sizeof *ids);
        n_stored += n;
    }
    for (uint64_t lo = 0; lo < 100000; lo += batch) {
        size_t n = 100000 - lo < batch ? (size_t)(100000 - lo) : batch;

        for (size_t i = 0; i < n; i++)
            ids[i] = lo + i;
        step(small, &c, ids, n, dim, buf);
    }
    printf("rows: filled %llu rows of %u (2^40 table) and 100000 in %.1f s\n",
           (unsigned long long)n_stored, dim, hc_now_s() - t0);

    /* Timed rounds, the tables taking turns. */
    for (int r = 0; r < rounds; r++) {
        size_t n;

        for (size_t i = 0; i < batch; i++)
            ids[i] = i % 2 ? stored[hc_splitmix64(&st) % n_stored]
                           : hc_splitmix64(&st) >> 24;
        n = sorted_unique(ids, batch);
        t0 = hc_now_s();
        step(big, &c, ids, n, dim, buf);
        t_big += hc_now_s() - t0;
        for (size_t i = 0; i < batch; i++)
            ids[i] = hc_splitmix64(&st) % 100000;
        n = sorted_unique(ids, batch);
        t0 = hc_now_s();
        step(small, &c, ids, n, dim, buf);
        t_small += hc_now_s() - t0;
    }
    getrusage(RUSAGE_SELF, &ru);
    printf("rows: pull + push of %zu random rows (Adagrad, dim %u), %d "
           "rounds:\n", batch, dim, rounds);
    printf("  2^40 table fed %llu ids: %.0f rows/s (%.1f ms a round), "
           "store %.0f MiB\n", (unsigned long long)n_stored,
           batch * rounds / t_big, 1e3 * t_big / rounds, du_mib(big_dir));
    printf("  10^5 table:              %.0f rows/s (%.1f ms a round), "
           "store %.0f MiB\n", batch * rounds / t_small,
           1e3 * t_small / rounds, du_mib(small_dir));
    printf("  large / small: %.2f; peak RSS %ld MiB, RssAnon %ld MiB\n",
           t_small / t_big, ru.ru_maxrss / 1024, rss_anon_mib());
    ps_store_close(big);
    ps_store_close(small);
    reopen_rounds(big_dir, reopens, dim, &c, stored, n_stored, ids, batch,
                  buf, &st);
    {
        char cmd[200];

        snprintf(cmd, sizeof cmd, "rm -rf %s %s", big_dir, small_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "rows: could not remove %s\n", cmd + 7);
    }
    free(ids);
    free(stored);
    free(buf);
    return 0;
}
