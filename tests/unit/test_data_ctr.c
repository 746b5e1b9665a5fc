/*
 * test_data_ctr.c — the click-through readers (worker/data_ctr.h): small
 * Criteo and libsvm files written into a temporary directory and read
 * back; empty fields, CRLF and a last line without newline; row ids
 * against the documented rule computed here on its own (and a few fixed
 * ids, so a change of the rule on both sides still fails); the split —
 * worker k of n over all k reads every line exactly once, and a batch
 * asked for out of order (a restart) equals the one read in sequence;
 * every malformed line refused with its file and line; the streamed data
 * set of a model's inputs (worker/ctr_inputs.h) read by parts as training
 * reads it, its rows and line numbers right across index blocks; the
 * shuffled epoch order — each line once, per epoch, mixed across blocks,
 * the same for 1 and 2 workers and after reopening mid-epoch, file order
 * when switched off, for files under a block, a window and with a
 * partial last block; the order's and the split's arithmetic, which the
 * reader reads by, checked for 2^32 + 1,000 and 2^40 + 3 lines.
 */
#include "cu.h"
#include "worker/ctr_inputs.h"
#include "worker/data_ctr.h"
#include "err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmp[256];

static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", tmp, name);
    f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* The documented rule, written again here: splitmix64's output function
 * of key = field · 2^33 + (empty ? 2^32 : value), mod input_dim. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t want_id(int f, uint32_t v, int empty, uint64_t dim)
{
    uint64_t key = (uint64_t)f << 33 | (empty ? 1ull << 32 : v);

    return dim >= (26ull << 33) ? (int64_t)key : (int64_t)(mix(key) % dim);
}

/* A Criteo line: label, I1…I13 from ints (INT64_MIN: empty), C1…C26 from
 * cats (-1: empty). */
static void criteo_line(char *out, size_t len, int label,
                        const long long *ints, const long long *cats)
{
    size_t n = (size_t)snprintf(out, len, "%d", label);

    for (int j = 0; j < 13; j++)
        n += ints[j] == INT64_MIN
                 ? (size_t)snprintf(out + n, len - n, "\t")
                 : (size_t)snprintf(out + n, len - n, "\t%lld", ints[j]);
    for (int j = 0; j < 26; j++)
        n += cats[j] < 0 ? (size_t)snprintf(out + n, len - n, "\t")
                         : (size_t)snprintf(out + n, len - n, "\t%08llx",
                                            cats[j]);
    snprintf(out + n, len - n, "\n");
}

static void test_criteo_parse(void)
{
    const uint64_t dim = 1000003;
    long long ints[13], cats[26];
    char text[4096], l1[1024], l2[1024], l3[1024];
    float label[4], num[4 * 13];
    int64_t cat[4 * 26];
    struct wk_ctr_opts o = { .format = WK_CTR_CRITEO, .input_dim = dim };
    struct wk_ctr *c;
    int n;

    for (int j = 0; j < 13; j++)
        ints[j] = j * 10;
    ints[1] = -2;                       /* negative: as 0 */
    ints[5] = INT64_MIN;                /* empty: 0 */
    ints[2] = WK_CTR_LOG1P_SMALL - 1;   /* the reader's table's last */
    ints[3] = WK_CTR_LOG1P_SMALL;       /* and past it: log1p itself */
    ints[4] = 123456789012ll;
    for (int j = 0; j < 26; j++)
        cats[j] = (long long)(0x01000193u * (unsigned)(j + 1));
    cats[3] = -1;                       /* empty: its own id */
    criteo_line(l1, sizeof l1, 1, ints, cats);
    for (int j = 0; j < 13; j++)
        ints[j] = INT64_MIN;
    for (int j = 0; j < 26; j++)
        cats[j] = -1;
    criteo_line(l2, sizeof l2, 0, ints, cats);
    strcpy(l2 + strlen(l2) - 1, "\r\n");
    /* upper-case hex, CRLF, and a last line without newline */
    snprintf(l3, sizeof l3, "1\t5%s\t68FD1E64%s",
             "\t\t\t\t\t\t\t\t\t\t\t\t",
             "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t");
    snprintf(text, sizeof text, "%s%s%s", l1, l2, l3);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(write_file("a.tsv", text), &o, &c),
                          HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_lines(c), 3);
    CU_ASSERT_EQUAL(wk_ctr_n_num(c), 13);
    CU_ASSERT_EQUAL(wk_ctr_n_cat(c), 26);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_read(c, 0, 4, label, num, cat, &n), HC_OK);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_EQUAL(label[0], 1.0f);
    CU_ASSERT_EQUAL(label[1], 0.0f);
    CU_ASSERT_EQUAL(label[2], 1.0f);
    for (int j = 0; j < 13; j++) {
        double x = j == 2 ? WK_CTR_LOG1P_SMALL - 1
                 : j == 3 ? WK_CTR_LOG1P_SMALL
                 : j == 4 ? 123456789012.0 : j * 10.0;
        float want = j == 1 || j == 5 ? 0.0f : (float)log1p(x);

        CU_ASSERT_EQUAL(num[j], want);
        CU_ASSERT_EQUAL(num[13 + j], 0.0f);
    }
    CU_ASSERT_EQUAL(num[26], (float)log1p(5.0));
    for (int j = 0; j < 26; j++) {
        uint32_t v = 0x01000193u * (unsigned)(j + 1);

        CU_ASSERT_EQUAL(cat[j], want_id(j, v, j == 3, dim));
        CU_ASSERT_EQUAL(cat[26 + j], want_id(j, 0, 1, dim));
        CU_ASSERT(cat[j] >= 0 && cat[j] < (int64_t)dim);
    }
    CU_ASSERT_EQUAL(cat[52], want_id(0, 0x68fd1e64u, 0, dim));
    CU_ASSERT_EQUAL(cat[53], want_id(1, 0, 1, dim));
    wk_ctr_close(c);
    /* a power-of-two input_dim (the reader masks): the rule's ids */
    o.input_dim = 1u << 23;
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(write_file("a.tsv", text), &o, &c),
                          HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_read(c, 0, 4, label, num, cat, &n), HC_OK);
    for (int j = 0; j < 26; j++)
        CU_ASSERT_EQUAL(cat[j], want_id(j, 0x01000193u * (unsigned)(j + 1),
                                        j == 3, 1u << 23));
    CU_ASSERT_EQUAL(cat[52], want_id(0, 0x68fd1e64u, 0, 1u << 23));
    wk_ctr_close(c);
}

/* Ids fixed once from the rule (by a separate Python one-liner), so a
 * change of the rule in the reader and in this test together still fails. */
static void test_hash_fixed(void)
{
    static const struct { int f; uint32_t v; int empty; uint64_t dim;
                          int64_t id; } t[] = {
        { 0, 0x68fd1e64u, 0, 1000003, 831258 },
        { 5, 0, 1, 1000003, 907093 },
        { 25, 0xffffffffu, 0, 1000003, 629213 },
        { 13, 0x0b153874u, 0, 1000003, 672256 },
        { 0, 0x68fd1e64u, 0, 1u << 20, 748661 },
        { 13, 0x0b153874u, 0, 1u << 20, 33995 },
        { 25, 0xffffffffu, 0, 26ull << 33, (25ll << 33) + 0xffffffffll },
        { 25, 0, 1, 1ull << 62, (25ll << 33) + (1ll << 32) },
        { 7, 0x12345678u, 0, 1, 0 },
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        CU_ASSERT_EQUAL(wk_ctr_cat_id(t[i].f, t[i].v, t[i].empty, t[i].dim),
                        t[i].id);
        CU_ASSERT_EQUAL(want_id(t[i].f, t[i].v, t[i].empty, t[i].dim),
                        t[i].id);
    }
}

/* N lines whose C1 holds the line number (label its parity), read in
 * exact-id mode. */
#define N_LINES 5000

static const char *numbered_n(int n)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/numbered_%d.tsv", tmp, n);
    f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%d\t%d\t\t\t\t\t\t\t\t\t\t\t\t\t%08x", i % 2, i, i);
        for (int j = 1; j < 26; j++)
            fputs("\t", f);
        fputs("\n", f);
    }
    fclose(f);
    return path;
}

static const char *numbered_file(void)
{
    return numbered_n(N_LINES);
}

static void test_split_cover(void)
{
    static const int ns[] = { 1, 2, 3, 7, 64 }, Bs[] = { 1, 100, 1024, 3000 };
    struct wk_ctr_opts o = { .format = WK_CTR_CRITEO,
                             .input_dim = WK_CTR_EXACT_DIM };
    struct wk_ctr *c;
    unsigned char *seen = calloc(N_LINES, 1);
    float *label = malloc(3000 * sizeof *label);
    float *num = malloc(3000 * 13 * sizeof *num);
    int64_t *cat = malloc(3000 * 26 * sizeof *cat);

    CU_ASSERT_PTR_NOT_NULL_FATAL(seen && label && num && cat);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(numbered_file(), &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_lines(c), N_LINES);
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof Bs / sizeof Bs[0]; b++) {
            int n = ns[a], B = Bs[b], bad = 0;
            long long total = 0;

            memset(seen, 0, N_LINES);
            for (int k = 0; k < n; k++) {
                long long first, count, next;
                int nb = wk_ctr_n_batches(c, n, k, B), got;

                CU_ASSERT_EQUAL(wk_ctr_part(c, n, k, &first, &count), HC_OK);
                CU_ASSERT(count == N_LINES / n || count == N_LINES / n + 1);
                CU_ASSERT_EQUAL(nb, (int)((count + B - 1) / B));
                next = first;
                for (int q = 0; q < nb; q++) {
                    CU_ASSERT_EQUAL_FATAL(wk_ctr_batch(c, n, k, 0, q, B,
                                                       label, num, cat, &got),
                                          HC_OK);
                    CU_ASSERT_EQUAL(got, q < nb - 1 ? B
                                                    : (int)(count - q * B));
                    for (int i = 0; i < got; i++) {
                        long long line = cat[i * 26] & 0xffffffffll;

                        bad += line != next++ || seen[line]++ ||
                               num[i * 13] != (float)log1p((double)line) ||
                               label[i] != (float)(line % 2);
                    }
                    total += got;
                }
                CU_ASSERT_EQUAL(wk_ctr_batch(c, n, k, 0, nb, B, label, num,
                                             cat, &got), HC_OK);
                CU_ASSERT_EQUAL(got, 0);                 /* past the end */
            }
            CU_ASSERT_EQUAL(total, N_LINES);
            CU_ASSERT_EQUAL(bad, 0);
            for (int i = 0; i < N_LINES; i++)
                bad += seen[i] != 1;
            CU_ASSERT_EQUAL(bad, 0);
        }
    wk_ctr_close(c);
    free(seen);
    free(label);
    free(num);
    free(cat);
}

/* A restarted worker asks for (epoch, batch) directly, on a fresh reader
 * or after reading elsewhere: the same lines as reading in sequence. */
static void test_resume(void)
{
    struct wk_ctr_opts o = { .format = WK_CTR_CRITEO,
                             .input_dim = WK_CTR_EXACT_DIM };
    struct wk_ctr *a, *b;
    enum { B = 97, N = 3, K = 1 };
    float la[B], lb[B], na[B * 13], nb_[B * 13];
    int64_t ca[B * 26], cb[B * 26];
    int nb, ga, gb, diff = 0;
    const char *path = numbered_file();

    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &a), HC_OK);
    nb = wk_ctr_n_batches(a, N, K, B);
    CU_ASSERT_EQUAL_FATAL(nb, 18);      /* 1666 lines / 97 */
    for (int epoch = 0; epoch < 2; epoch++)
        for (int q = 0; q < nb; q++) {
            /* b: a fresh reader per batch, or one that jumps around */
            int q2 = (q * 7 + 3) % nb;

            CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &b), HC_OK);
            CU_ASSERT_EQUAL(wk_ctr_batch(b, N, K, epoch + 5, q2, B, lb, nb_,
                                         cb, &gb), HC_OK);
            CU_ASSERT_EQUAL(wk_ctr_batch(b, N, K, epoch + 5, q, B, lb, nb_,
                                         cb, &gb), HC_OK);
            CU_ASSERT_EQUAL(wk_ctr_batch(a, N, K, epoch, q, B, la, na, ca,
                                         &ga), HC_OK);
            CU_ASSERT_EQUAL(ga, gb);
            diff += memcmp(la, lb, (size_t)ga * sizeof *la) != 0 ||
                    memcmp(na, nb_, (size_t)ga * 13 * sizeof *na) != 0 ||
                    memcmp(ca, cb, (size_t)ga * 26 * sizeof *ca) != 0;
            wk_ctr_close(b);
        }
    CU_ASSERT_EQUAL(diff, 0);
    /* the first line of worker 1 of 3's batch 5: 1666 + 5 · 97 */
    CU_ASSERT_EQUAL(wk_ctr_batch(a, N, K, 0, 5, B, la, na, ca, &ga), HC_OK);
    CU_ASSERT_EQUAL(ca[0] & 0xffffffffll, 1666 + 5 * 97);
    wk_ctr_close(a);
}

/* The lines of epoch's positions [0, N) read `chunk` at a time into
 * order (N); 1 when each line came once with its own values. */
static int epoch_order(struct wk_ctr *c, int epoch, int chunk,
                       long long *order)
{
    const long long N = wk_ctr_lines(c);
    float *label = malloc((size_t)chunk * sizeof *label);
    float *num = malloc((size_t)chunk * 13 * sizeof *num);
    int64_t *cat = malloc((size_t)chunk * 26 * sizeof *cat);
    unsigned char *seen = calloc((size_t)N, 1);
    int ok = label && num && cat && seen, got;

    for (long long p = 0; ok && p < N; p += chunk) {
        ok = wk_ctr_read_epoch(c, epoch, p, chunk, label, num, cat, &got) ==
                 HC_OK && got == (N - p < chunk ? (int)(N - p) : chunk);
        for (int i = 0; ok && i < got; i++) {
            long long line = cat[i * 26] & 0xffffffffll;

            ok = line < N && !seen[line]++ && label[i] == (float)(line % 2) &&
                 num[i * 13] == (float)log1p((double)line);
            order[p + i] = line;
        }
    }
    free(label);
    free(num);
    free(cat);
    free(seen);
    return ok;
}

/* The shuffled order: for files of one line, under a block, one block,
 * a partial last block, past a window: a permutation every epoch, read
 * in any chunking; another one next epoch (and another seed); lines of
 * a batch from many blocks (not a block's run); workers 0 and 1 of 2 put
 * together equal 1 worker; a fresh reader asked a mid-epoch batch gets
 * the same lines; shuffle 0 is file order. */
static void test_shuffle_order(void)
{
    static const int sizes[] = { 1, 700, 1024, 5000, 16 * 1024 + 1,
                                 40000 };
    enum { B = 300 };
    float label[B], num[B * 13];
    int64_t cat[B * 26];

    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        const int N = sizes[t];
        const char *path = numbered_n(N);
        struct wk_ctr_opts o = { .format = WK_CTR_CRITEO,
                                 .input_dim = WK_CTR_EXACT_DIM,
                                 .shuffle = 1, .seed = 42 };
        struct wk_ctr *c, *r;
        long long *e0 = malloc((size_t)N * sizeof *e0);
        long long *e0b = malloc((size_t)N * sizeof *e0b);
        long long *e1 = malloc((size_t)N * sizeof *e1);
        int moved = 0, differ = 0, split_bad = 0, got;

        CU_ASSERT_PTR_NOT_NULL_FATAL(e0 && e0b && e1);
        CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
        CU_ASSERT_TRUE(epoch_order(c, 0, 1000, e0));
        CU_ASSERT_TRUE(epoch_order(c, 1, 1000, e1));
        CU_ASSERT_TRUE(epoch_order(c, 0, 77, e0b));   /* back, other chunks */
        for (int i = 0; i < N; i++) {
            moved += e0[i] != i;
            differ += e0[i] != e1[i];
            split_bad += e0[i] != e0b[i];
        }
        CU_ASSERT_EQUAL(split_bad, 0);
        if (N > 1) {
            CU_ASSERT(moved > N / 2);
            CU_ASSERT(differ > N / 2);
        }
        if (N >= 40000) {       /* the first 1,024 positions' blocks */
            unsigned char blk[64] = { 0 };
            int distinct = 0;

            for (int i = 0; i < 1024; i++)
                distinct += !blk[e0[i] / 1024]++;
            CU_ASSERT(distinct >= 8);
            distinct = 0;   /* the blocks are permuted too: the first
                               window's lines come from past its run */
            for (int i = 0; i < 16 * 1024; i++)
                distinct += e0[i] >= 16 * 1024;
            CU_ASSERT(distinct > 0);
        }
        /* 2 workers' parts, batch by batch, put together: e0 */
        split_bad = 0;
        for (int k = 0, at = 0; k < 2; k++) {
            int nb = wk_ctr_n_batches(c, 2, k, B);

            for (int q = 0; N >= 2 && q < nb; q++) {
                CU_ASSERT_EQUAL_FATAL(wk_ctr_batch(c, 2, k, 0, q, B, label,
                                                   num, cat, &got), HC_OK);
                for (int i = 0; i < got; i++)
                    split_bad += (cat[i * 26] & 0xffffffffll) != e0[at++];
            }
        }
        CU_ASSERT_EQUAL(split_bad, 0);
        /* a restarted worker: a fresh reader, worker 1 of 2's middle batch
         * of epoch 1 */
        if (N >= 2) {
            long long first, count;
            int q;

            CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &r), HC_OK);
            CU_ASSERT_EQUAL(wk_ctr_part(r, 2, 1, &first, &count), HC_OK);
            q = wk_ctr_n_batches(r, 2, 1, B) / 2;
            CU_ASSERT_EQUAL(wk_ctr_batch(r, 2, 1, 1, q, B, label, num, cat,
                                         &got), HC_OK);
            CU_ASSERT(got >= 1);
            split_bad = 0;
            for (int i = 0; i < got; i++)
                split_bad += (cat[i * 26] & 0xffffffffll) !=
                             e1[first + (long long)q * B + i];
            CU_ASSERT_EQUAL(split_bad, 0);
            wk_ctr_close(r);
        }
        /* another seed: another order */
        o.seed = 43;
        CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &r), HC_OK);
        CU_ASSERT_TRUE(epoch_order(r, 0, 1000, e0b));
        differ = 0;
        for (int i = 0; i < N; i++)
            differ += e0[i] != e0b[i];
        if (N > 1)
            CU_ASSERT(differ > N / 2);
        wk_ctr_close(r);
        /* shuffle off: file order, every epoch */
        o.shuffle = 0;
        CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &r), HC_OK);
        CU_ASSERT_TRUE(epoch_order(r, 3, 1000, e0b));
        moved = 0;
        for (int i = 0; i < N; i++)
            moved += e0b[i] != i;
        CU_ASSERT_EQUAL(moved, 0);
        wk_ctr_close(r);
        wk_ctr_close(c);
        free(e0);
        free(e0b);
        free(e1);
    }
}

/* The index cache: written, then loaded (the same batches); rebuilt when
 * the data file changed or the cache is corrupt, torn or garbage; a cache
 * that cannot be written leaves the reader working. */
static void test_index_cache(void)
{
    enum { B = 50 };
    float l0[B], l1[B], n0[B * 13], n1[B * 13];
    int64_t c0[B * 26], c1[B * 26];
    char idx[512], nowhere[512];
    struct wk_ctr_opts o = { .format = WK_CTR_CRITEO, .input_dim = 1000,
                             .index_path = idx };
    struct wk_ctr *c;
    const char *path = numbered_file();
    int g0, g1;
    FILE *f;

    snprintf(idx, sizeof idx, "%s/numbered.idx", tmp);
    remove(idx);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_index_cached(c), 0);
    CU_ASSERT_EQUAL(wk_ctr_batch(c, 3, 2, 0, 30, B, l0, n0, c0, &g0), HC_OK);
    CU_ASSERT_EQUAL(g0, B);
    wk_ctr_close(c);

    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_index_cached(c), 1);
    CU_ASSERT_EQUAL(wk_ctr_lines(c), N_LINES);
    CU_ASSERT_EQUAL(wk_ctr_batch(c, 3, 2, 0, 30, B, l1, n1, c1, &g1), HC_OK);
    CU_ASSERT_EQUAL(g1, g0);
    CU_ASSERT(memcmp(c0, c1, sizeof c0) == 0 && memcmp(n0, n1, sizeof n0) == 0
              && memcmp(l0, l1, sizeof l0) == 0);
    wk_ctr_close(c);

    /* a flipped offset: the CRC refuses it, the pass rebuilds it */
    f = fopen(idx, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, -5, SEEK_END);
    fputc(0x5a, f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_index_cached(c), 0);
    CU_ASSERT_EQUAL(wk_ctr_batch(c, 3, 2, 0, 30, B, l1, n1, c1, &g1), HC_OK);
    CU_ASSERT(memcmp(c0, c1, sizeof c0) == 0);
    wk_ctr_close(c);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_index_cached(c), 1);            /* rewritten */
    wk_ctr_close(c);

    /* other options (libsvm) do not take this cache, and rewrite it */
    o.format = WK_CTR_LIBSVM;
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_index_cached(c), 0);
    wk_ctr_close(c);
    o.format = WK_CTR_CRITEO;
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_index_cached(c), 0);
    wk_ctr_close(c);

    /* the data file grows: the cache no longer matches */
    f = fopen(path, "ab");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("1\t1\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t"
          "\t\t\t\t\t\t\t\t\t\t\t\t\n", f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_index_cached(c), 0);
    CU_ASSERT_EQUAL(wk_ctr_lines(c), N_LINES + 1);
    wk_ctr_close(c);

    /* garbage in the cache's place; a cache that cannot be written */
    f = fopen(idx, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("HPCTRIDX", f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_index_cached(c), 0);
    CU_ASSERT_EQUAL(wk_ctr_lines(c), N_LINES + 1);
    wk_ctr_close(c);
    snprintf(nowhere, sizeof nowhere, "%s/no/such/dir.idx", tmp);
    o.index_path = nowhere;
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_index_cached(c), 0);
    CU_ASSERT_EQUAL(wk_ctr_batch(c, 1, 0, 0, 0, B, l1, n1, c1, &g1), HC_OK);
    CU_ASSERT_EQUAL(g1, B);
    wk_ctr_close(c);
}

static void test_libsvm(void)
{
    struct wk_ctr_opts o = { .format = WK_CTR_LIBSVM, .input_dim = 100 };
    struct wk_ctr *c;
    float label[3], num[3 * 4];
    int64_t cat[3 * 4];
    int n;
    const char *path = write_file("a.svm", "1 3:0.5 7 99:-2e1\n"
                                           "-1\t4:1 5:2 6:3 8:4\r\n"
                                           "+1\n");

    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_n_cat(c), 4);                 /* widest line */
    CU_ASSERT_EQUAL(wk_ctr_n_num(c), 4);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_read(c, 0, 3, label, num, cat, &n), HC_OK);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_EQUAL(label[0], 1.0f);
    CU_ASSERT_EQUAL(label[1], 0.0f);
    CU_ASSERT_EQUAL(label[2], 1.0f);
    CU_ASSERT_EQUAL(cat[0], 3);
    CU_ASSERT_EQUAL(num[0], 0.5f);
    CU_ASSERT_EQUAL(cat[1], 7);
    CU_ASSERT_EQUAL(num[1], 1.0f);
    CU_ASSERT_EQUAL(cat[2], 99);
    CU_ASSERT_EQUAL(num[2], -20.0f);
    CU_ASSERT_EQUAL(cat[3], 0);                          /* padding */
    CU_ASSERT_EQUAL(num[3], 0.0f);
    CU_ASSERT_EQUAL(cat[7], 8);
    CU_ASSERT_EQUAL(num[7], 4.0f);
    for (int j = 0; j < 4; j++)
        CU_ASSERT(cat[8 + j] == 0 && num[8 + j] == 0.0f);
    wk_ctr_close(c);

    o.width = 6;
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_n_cat(c), 6);
    wk_ctr_close(c);
    o.width = 3;
    CU_ASSERT_EQUAL(wk_ctr_open(path, &o, &c), HC_ERR_DATA);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "a.svm:2: 4 features, more "
                                  "than the width 3"));
}

/* Each malformed file: its error names the file and line. */
static void test_refusals(void)
{
    static const char *const good =
        "0\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13\t"
        "00000001\t00000002\t00000003\t00000004\t00000005\t00000006\t"
        "00000007\t00000008\t00000009\t0000000a\t0000000b\t0000000c\t"
        "0000000d\t0000000e\t0000000f\t00000010\t00000011\t00000012\t"
        "00000013\t00000014\t00000015\t00000016\t00000017\t00000018\t"
        "00000019\t0000001a\n";
    static const struct {
        enum wk_ctr_format fmt;
        const char *bad;        /* line 2; "%s" sub the good line's parts */
        const char *want;
    } t[] = {
        { WK_CTR_CRITEO, "1\t2\t3\n", "x.txt:2: 3 tab-separated field(s); a "
          "Criteo line has 40" },
        { WK_CTR_CRITEO, "\n", "x.txt:2: 1 tab-separated field(s)" },
        { WK_CTR_CRITEO, "2\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13"
          "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n",
          "x.txt:2: label is not 0 or 1: '2'" },
        { WK_CTR_CRITEO, "0\t1\t2\t3\t4\t5\t6.5\t7\t8\t9\t10\t11\t12\t13"
          "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n",
          "x.txt:2: I6 is not an integer: '6.5'" },
        { WK_CTR_CRITEO, "0\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t"
          "\t\t\t\t\t\t\t\t\t\t\t\t\t\t0000zz00\t\t\n",
          "x.txt:2: C24 is not 8 hex digits: '0000zz00'" },
        { WK_CTR_CRITEO, "0\t\t\t\t\t\t\t\t\t\t\t\t\t\tabc\t\t\t\t\t\t\t"
          "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n",
          "x.txt:2: C1 is not 8 hex digits: 'abc'" },
        /* bytes 0x89 (a tab with the high bit set: "É" in UTF-8, 0xC3
         * 0x89) are no tabs: the field count is right, the field bad */
        { WK_CTR_CRITEO, "0\t\t\t\t\t\t\t\t\t\t\t\t\t\t\xc3\x89\xc3\x89"
          "\xc3\x89\xc3\x89\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t"
          "\t\t\n",
          "x.txt:2: C1 is not 8 hex digits: '\xc3\x89" },
        /* a byte 0x08 just after a tab is no tab either (a borrow from
         * the tab's byte into the next would make it one) */
        { WK_CTR_CRITEO, "0\t\t\t\t\t\t\t\t\t\t\t\t\t\t\x08\x08" "000000\t\t\t"
          "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n",
          "x.txt:2: C1 is not 8 hex digits" },
        { WK_CTR_LIBSVM, "1 3:1 x:2\n",
          "x.txt:2: feature id is not an integer: 'x:2'" },
        { WK_CTR_LIBSVM, "1 3:1 -4:2\n",
          "x.txt:2: feature id -4 outside [0, input_dim 1000)" },
        { WK_CTR_LIBSVM, "1 1000:1\n",
          "x.txt:2: feature id 1000 outside [0, input_dim 1000)" },
        { WK_CTR_LIBSVM, "1 3:abc\n",
          "x.txt:2: feature value is not a finite number: '3:abc'" },
        { WK_CTR_LIBSVM, "1 3:\n", "x.txt:2: feature value is not a number" },
        { WK_CTR_LIBSVM, "1 3:1e999\n", "not a finite number" },
        { WK_CTR_LIBSVM, "0.5 3:1\n",
          "x.txt:2: label is not 0, 1, -1 or +1: '0.5'" },
        { WK_CTR_LIBSVM, "  \n", "x.txt:2: empty line" },
    };
    float label[2], num[2 * 40];
    int64_t cat[2 * 40];
    char text[2048];

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct wk_ctr_opts o = { .format = t[i].fmt, .input_dim = 1000 };
        struct wk_ctr *c;
        int n = -1, rv;

        snprintf(text, sizeof text, "%s%s%s",
                 t[i].fmt == WK_CTR_CRITEO ? good : "1 1:1 2:1\n", t[i].bad,
                 t[i].fmt == WK_CTR_CRITEO ? good : "0 5\n");
        CU_ASSERT_EQUAL_FATAL(wk_ctr_open(write_file("x.txt", text), &o, &c),
                              HC_OK);
        rv = wk_ctr_read(c, 0, 2, label, num, cat, &n);
        CU_ASSERT_EQUAL(rv, HC_ERR_DATA);
        CU_ASSERT_EQUAL(n, 1);              /* the good line before it */
        if (strstr(hc_err_msg(), t[i].want) == NULL)
            fprintf(stderr, "\ncase %zu: got '%s', want '%s'\n", i,
                    hc_err_msg(), t[i].want);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), t[i].want));
        /* the reader goes on: the line after it reads */
        CU_ASSERT_EQUAL(wk_ctr_read(c, 2, 1, label, num, cat, &n), HC_OK);
        CU_ASSERT_EQUAL(n, 1);
        wk_ctr_close(c);
    }
}

static void test_open_errors(void)
{
    struct wk_ctr_opts o = { .format = WK_CTR_CRITEO, .input_dim = 10 };
    struct wk_ctr *c = NULL;
    long long first, count;
    float label[1], num[13];
    int64_t cat[26];
    int n;
    enum wk_ctr_format f;
    char path[512];

    snprintf(path, sizeof path, "%s/missing.tsv", tmp);
    CU_ASSERT_EQUAL(wk_ctr_open(path, &o, &c), HC_ERR_NOTFOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "missing.tsv: cannot open"));
    CU_ASSERT_EQUAL(wk_ctr_open(write_file("empty.tsv", ""), &o, &c),
                    HC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "empty.tsv: no lines"));
    o.input_dim = 0;
    CU_ASSERT_EQUAL(wk_ctr_open(path, &o, &c), HC_ERR_INVAL);
    o.input_dim = 10;
    o.format = (enum wk_ctr_format)7;
    CU_ASSERT_EQUAL(wk_ctr_open(path, &o, &c), HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "criteo, libsvm"));
    CU_ASSERT_EQUAL(wk_ctr_format_parse("csv", &f), HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "'csv' (supported: criteo, "
                                  "libsvm)"));
    CU_ASSERT_EQUAL(wk_ctr_format_parse("libsvm", &f), HC_OK);
    CU_ASSERT_EQUAL(f, WK_CTR_LIBSVM);
    o.format = WK_CTR_LIBSVM;
    o.width = WK_CTR_WIDTH_MAX + 1;
    CU_ASSERT_EQUAL(wk_ctr_open(path, &o, &c), HC_ERR_INVAL);

    o = (struct wk_ctr_opts){ .format = WK_CTR_CRITEO, .input_dim = 10 };
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(write_file("two.tsv", "0\n0\n"), &o,
                                      &c), HC_OK);
    CU_ASSERT_EQUAL(wk_ctr_part(c, 3, 0, &first, &count), HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "2 line(s) cannot be split "
                                  "across 3 workers"));
    CU_ASSERT_EQUAL(wk_ctr_part(c, 2, 2, &first, &count), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_ctr_n_batches(c, 2, 0, 0), 0);
    CU_ASSERT_EQUAL(wk_ctr_batch(c, 2, 0, -1, 0, 1, label, num, cat, &n),
                    HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_ctr_batch(c, 2, 0, 0, 0, 0, label, num, cat, &n),
                    HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_ctr_read(c, -1, 1, label, num, cat, &n),
                    HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_ctr_read(c, 2, 1, label, num, cat, &n), HC_OK);
    CU_ASSERT_EQUAL(n, 0);
    wk_ctr_close(c);

    /* a line longer than WK_CTR_LINE_MAX is refused at open */
    {
        char *big = malloc(WK_CTR_LINE_MAX + 16);

        CU_ASSERT_PTR_NOT_NULL_FATAL(big);
        memcpy(big, "0\n", 2);
        memset(big + 2, 'x', WK_CTR_LINE_MAX + 1);
        memcpy(big + 2 + WK_CTR_LINE_MAX + 1, "\n", 2);
        CU_ASSERT_EQUAL(wk_ctr_open(write_file("long.tsv", big), &o, &c),
                        HC_ERR_DATA);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "long.tsv:2: line of "));
        free(big);
    }
}

/* A Criteo file of odd lines for the streamed set: line i (from 0) has
 * label i % 2, I1 = i (empty when i % 5 == 3), an 18-digit I2 on line 7,
 * C1 = i in hex (upper case on odd lines), C2 empty when i % 3 == 0;
 * CRLF ends every fourth line, the last ends without a newline; line
 * `bad` (from 1; 0: none) has a C3 that is not hex. */
#define S_LINES 3000
static const char *odd_file(const char *name, int bad)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", tmp, name);
    f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < S_LINES; i++) {
        fprintf(f, "%d\t", i % 2);
        if (i % 5 != 3)
            fprintf(f, "%d", i);
        fprintf(f, "\t%s", i == 7 ? "999999999999999999" : "");
        for (int j = 2; j < 13; j++)
            fputs("\t", f);
        fprintf(f, i % 2 ? "\t%08X" : "\t%08x", (unsigned)i);
        fprintf(f, "\t%s", i % 3 ? "0000abcd" : "");
        fprintf(f, "\t%s", i + 1 == bad ? "0000abcz" : "");
        for (int j = 3; j < 26; j++)
            fputs("\t", f);
        if (i + 1 < S_LINES)
            fputs(i % 4 == 1 ? "\r\n" : "\n", f);
    }
    fclose(f);
    return path;
}

/* The two-input model the streamed set feeds: numeric (13) first, then
 * categorical (26 ids) over a table of collision-free ids. */
static void ctr_model(struct hc_model *m)
{
    const char *json =
        "{\"name\": \"s\", \"inputs\": [{\"name\": \"numeric\", \"shape\": "
        "[13]}, {\"name\": \"categorical\", \"shape\": [26], \"dtype\": "
        "\"int64\"}], \"layers\": [{\"type\": \"embedding\", \"name\": "
        "\"embedding\", \"input_dim\": 223338299392, \"output_dim\": 2, "
        "\"inputs\": \"categorical\"}, {\"type\": "
        "\"GlobalAveragePooling1D\", \"name\": \"pooled\"}, {\"type\": "
        "\"concatenate\", \"inputs\": [\"pooled\", \"numeric\"]}, "
        "{\"type\": \"dense\", \"units\": 1, \"activation\": \"sigmoid\"}],"
        " \"loss\": \"binary_crossentropy\", \"optimizer\": \"sgd\"}";

    if (hc_model_parse(json, strlen(json), "s", m) != HC_OK)
        printf("\n  %s\n", hc_err_msg());
}

/* Sample i's row (numeric then the ids' bytes) as the file says. */
static int row_right(const float *row, int32_t y, int i)
{
    int64_t c1, c2, c3;
    float i1 = i % 5 == 3 ? 0.0f : (float)log1p((double)i);
    float i2 = i == 7 ? (float)log1p(999999999999999999.0) : 0.0f;

    memcpy(&c1, row + 13, sizeof c1);
    memcpy(&c2, row + 13 + 2, sizeof c2);
    memcpy(&c3, row + 13 + 4, sizeof c3);
    return y == i % 2 && row[0] == i1 && row[1] == i2 && row[2] == 0.0f &&
           c1 == (int64_t)want_id(0, (uint32_t)i, 0, WK_CTR_EXACT_DIM) &&
           c2 == want_id(1, 0xabcd, i % 3 == 0, WK_CTR_EXACT_DIM) &&
           c3 == want_id(2, 0, 1, WK_CTR_EXACT_DIM);
}

/* The streamed set as training reads it: no rows held; 3 workers' parts
 * by position, batches asked out of order, cover every line once with
 * its values; a malformed line deep in the file (past two index blocks)
 * refused when its batch is read, naming file and line, the batches
 * before it read. */
static void test_streamed(void)
{
    static struct hc_model m;
    struct wk_dataset d;
    struct wk_shard sh;
    enum { B = 100, K = 3 };
    static float x[B * (13 + 52)];
    int32_t y[B];
    static unsigned char seen[S_LINES];
    int wrong = 0, n, rv;
    char spec[600];

    ctr_model(&m);
    m.file_order = 1;           /* "shuffle": false; shuffled below */
    snprintf(spec, sizeof spec, "criteo:%s", odd_file("odd.tsv", 0));
    CU_ASSERT_EQUAL_FATAL(wk_ctr_inputs_load(spec, "--data", &m, &d), HC_OK);
    CU_ASSERT_PTR_NULL(d.x);
    CU_ASSERT_PTR_NULL(d.y);
    CU_ASSERT_PTR_NOT_NULL(d.src.read);
    CU_ASSERT_EQUAL(d.n, S_LINES);
    CU_ASSERT_EQUAL(d.c, 13 + 52);
    for (int k = 0; k < K; k++) {
        int nb;

        CU_ASSERT_EQUAL_FATAL(wk_shard_init_for(&sh, &d, K, k, 1), HC_OK);
        CU_ASSERT_PTR_NULL(sh.order);
        CU_ASSERT_EQUAL(sh.first, k * S_LINES / K);
        nb = wk_shard_n_batches(&sh, B);
        for (int q = 0; q < nb; q++) {
            int b = (q * 7 + 3) % nb;       /* nb = 10: every b once */

            CU_ASSERT_EQUAL(wk_shard_batch(&sh, q % 2, b, B, &d, x, y, &n),
                            HC_OK);
            for (int i = 0; i < n; i++) {
                int line = sh.first + b * B + i;

                seen[line]++;
                wrong += !row_right(x + (size_t)i * d.c, y[i], line);
            }
        }
        wk_shard_free(&sh);
    }
    CU_ASSERT_EQUAL(wrong, 0);
    for (int i = 0; i < S_LINES; i++)
        wrong += seen[i] != 1;
    CU_ASSERT_EQUAL(wrong, 0);
    /* evaluation's read, cut at the end */
    CU_ASSERT_EQUAL(wk_data_batch(&d, S_LINES - 3, B, x, y), 3);
    CU_ASSERT(row_right(x + 2 * d.c, y[2], S_LINES - 1));
    wk_data_free(&d);

    /* shuffled (the default): the parts cover every line once, rows right,
     * not in file order; evaluation still reads the file in order */
    ctr_model(&m);
    CU_ASSERT_EQUAL(m.file_order, 0);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_inputs_load(spec, "--data", &m, &d), HC_OK);
    memset(seen, 0, sizeof seen);
    for (int k = 0, moved = 0; k < K; k++) {
        int nb;

        CU_ASSERT_EQUAL_FATAL(wk_shard_init_for(&sh, &d, K, k, 1), HC_OK);
        nb = wk_shard_n_batches(&sh, B);
        for (int q = 0; q < nb; q++) {
            CU_ASSERT_EQUAL(wk_shard_batch(&sh, 1, q, B, &d, x, y, &n),
                            HC_OK);
            for (int i = 0; i < n; i++) {
                int64_t c1;

                memcpy(&c1, x + (size_t)i * d.c + 13, sizeof c1);
                c1 &= 0xffffffffll;
                if (c1 >= S_LINES) {
                    wrong++;
                    continue;
                }
                seen[c1]++;
                moved += c1 != sh.first + q * B + i;
                wrong += !row_right(x + (size_t)i * d.c, y[i], (int)c1);
            }
        }
        wk_shard_free(&sh);
        if (k == K - 1)
            CU_ASSERT(moved > S_LINES / 2);
    }
    CU_ASSERT_EQUAL(wrong, 0);
    for (int i = 0; i < S_LINES; i++)
        wrong += seen[i] != 1;
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(wk_data_batch(&d, 5, 1, x, y), 1);
    CU_ASSERT(row_right(x, y[0], 5));
    wk_data_free(&d);
    m.file_order = 1;

    snprintf(spec, sizeof spec, "criteo:%s", odd_file("odd_bad.tsv", 2900));
    CU_ASSERT_EQUAL_FATAL(wk_ctr_inputs_load(spec, "--data", &m, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_shard_init_for(&sh, &d, 2, 1, 1), HC_OK);
    /* part 1 is lines [1500, 3000): batch 13 holds lines 2801…2900 */
    CU_ASSERT_EQUAL(wk_shard_batch(&sh, 0, 12, B, &d, x, y, &n), HC_OK);
    CU_ASSERT_EQUAL(n, B);
    rv = wk_shard_batch(&sh, 0, 13, B, &d, x, y, &n);
    CU_ASSERT_EQUAL(rv, HC_ERR_DATA);
    CU_ASSERT_EQUAL(n, 0);
    if (!strstr(hc_err_msg(), "odd_bad.tsv:2900: C3 is not 8 hex digits"))
        printf("\n  got \"%s\"\n", hc_err_msg());
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(),
                                  "odd_bad.tsv:2900: C3 is not 8 hex digits"));
    CU_ASSERT_EQUAL(wk_data_batch(&d, 2850, B, x, y), -HC_ERR_DATA);
    wk_shard_free(&sh);
    wk_data_free(&d);

    /* shuffled: the window holding the bad line refuses it, named */
    m.file_order = 0;
    CU_ASSERT_EQUAL_FATAL(wk_ctr_inputs_load(spec, "--data", &m, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_shard_init_for(&sh, &d, 1, 0, 1), HC_OK);
    rv = wk_shard_batch(&sh, 0, 0, B, &d, x, y, &n);
    CU_ASSERT_EQUAL(rv, HC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(),
                                  "odd_bad.tsv:2900: C3 is not 8 hex digits"));
    wk_shard_free(&sh);
    wk_data_free(&d);
}

/* A wide libsvm file (width 2,000: 24 KB a parsed line) shuffles in
 * windows of one block (W shrunk to keep a window under its bytes): 3,000
 * lines, three windows, the last partial, each line once with its own
 * features, not in file order, the same read again. */
static void test_shuffle_wide(void)
{
    enum { N = 3000, W = 2000, CH = 250 };
    struct wk_ctr_opts o = { .format = WK_CTR_LIBSVM, .input_dim = 1 << 20,
                             .width = W, .shuffle = 1, .seed = 9 };
    struct wk_ctr *c;
    float *label = malloc(CH * sizeof *label);
    float *num = malloc((size_t)CH * W * sizeof *num);
    int64_t *cat = malloc((size_t)CH * W * sizeof *cat);
    static unsigned char seen[N];
    static int64_t first[N];
    char path[512];
    int bad = 0, moved = 0, got;
    FILE *f;

    CU_ASSERT_PTR_NOT_NULL_FATAL(label && num && cat);
    snprintf(path, sizeof path, "%s/wide.svm", tmp);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f = fopen(path, "wb"));
    for (int i = 0; i < N; i++)
        fprintf(f, "%d %d:%d 7\n", i % 2, i + 1, i % 100);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(path, &o, &c), HC_OK);
    for (int pass = 0; pass < 2; pass++)
        for (int p = 0; p < N; p += CH) {
            CU_ASSERT_EQUAL_FATAL(wk_ctr_read_epoch(c, 4, p, CH, label, num,
                                                    cat, &got), HC_OK);
            CU_ASSERT_EQUAL(got, CH);
            for (int i = 0; i < got; i++) {
                int64_t line = cat[(size_t)i * W] - 1;

                if (line < 0 || line >= N) {
                    bad++;
                    continue;
                }
                bad += num[(size_t)i * W] != (float)(line % 100) ||
                       cat[(size_t)i * W + 1] != 7 ||
                       cat[(size_t)i * W + 2] != 0 ||
                       label[i] != (float)(line % 2);
                if (pass == 0) {
                    bad += seen[line]++ != 0;
                    moved += line != p + i;
                    first[p + i] = line;
                } else {
                    bad += first[p + i] != line;
                }
            }
        }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(moved > N / 2);
    wk_ctr_close(c);
    free(label);
    free(num);
    free(cat);
}

/* The model's "shuffle": true by default, false kept, anything else
 * refused by name. */
static void test_shuffle_key(void)
{
    const char *head = "{\"name\": \"s\", \"input_shape\": [4], "
                       "\"layers\": [{\"type\": \"dense\", \"units\": 1}], "
                       "\"loss\": \"mse\", \"optimizer\": \"sgd\"";
    static const struct { const char *tail; int rv, file_order; } t[] = {
        { "}", HC_OK, 0 },
        { ", \"shuffle\": true}", HC_OK, 0 },
        { ", \"shuffle\": false}", HC_OK, 1 },
        { ", \"shuffle\": 0}", HC_ERR_CONFIG, 0 },
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        static struct hc_model m;
        char json[512];

        snprintf(json, sizeof json, "%s%s", head, t[i].tail);
        if (hc_model_parse(json, strlen(json), "s", &m) != t[i].rv)
            printf("\n  %s: %s\n", json, hc_err_msg());
        CU_ASSERT_EQUAL(hc_model_parse(json, strlen(json), "s", &m),
                        t[i].rv);
        if (t[i].rv == HC_OK) {
            CU_ASSERT_EQUAL(m.file_order, t[i].file_order);
        } else {
            CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "\"shuffle\""));
        }
    }
}

/* The file lines of window w's positions of o's epoch into lines (W ·
 * 1024), through its blocks and shuffle (data_ctr.h's wk_ctr_window);
 * returns its size, or −1 when the window is not what its start and the
 * next one's say or a line repeats or is outside the file. */
static int window_lines(const struct wk_ctr_order *o, long long w,
                        long long *lines)
{
    int64_t blocks[WK_CTR_WINDOW];
    static int32_t perm[WK_CTR_WINDOW * WK_CTR_INDEX_EVERY];
    static unsigned char hit[WK_CTR_WINDOW * WK_CTR_INDEX_EVERY];
    long long start = wk_ctr_window_start(o, w);
    int rows, nw = wk_ctr_window(o, w, blocks, perm, &rows);

    if (nw < 1 || nw > WK_CTR_WINDOW ||
        wk_ctr_window_start(o, w + 1) != start + rows)
        return -1;
    memset(hit, 0, sizeof hit);
    for (int i = 0; i < rows; i++) {
        int32_t r = perm[i];

        if (r < 0 || r >= rows || hit[r]++)
            return -1;
        lines[i] = blocks[r / WK_CTR_INDEX_EVERY] * WK_CTR_INDEX_EVERY +
                   r % WK_CTR_INDEX_EVERY;
        if (lines[i] < 0 || lines[i] >= o->n_lines)
            return -1;
    }
    return rows;
}

/* The reader reads what the order's arithmetic says: every position of a
 * shuffled 40,000-line file (a partial last block, 3 windows) is the line
 * window_lines computes. */
static void test_order_is_read(void)
{
    enum { N = 40000 };
    struct wk_ctr_opts o = { .format = WK_CTR_CRITEO,
                             .input_dim = WK_CTR_EXACT_DIM,
                             .shuffle = 1, .seed = 42 };
    struct wk_ctr_order ord;
    struct wk_ctr *c;
    long long *read = malloc(N * sizeof *read);
    long long *lines = malloc(WK_CTR_WINDOW * WK_CTR_INDEX_EVERY *
                              sizeof *lines);
    long long p = 0;
    int bad = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(read && lines);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_open(numbered_n(N), &o, &c), HC_OK);
    CU_ASSERT_FATAL(epoch_order(c, 2, 777, read));
    CU_ASSERT_EQUAL_FATAL(wk_ctr_order_init(&ord, N, 42, WK_CTR_WINDOW),
                          HC_OK);
    wk_ctr_order_epoch(&ord, 2);
    for (long long w = 0; p < N && !bad; w++) {
        int rows = window_lines(&ord, w, lines);

        bad += rows < 1;
        for (int i = 0; i < rows; i++)
            bad += lines[i] != read[p++];
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(p, N);
    wk_ctr_order_free(&ord);
    wk_ctr_close(c);
    free(read);
    free(lines);
}

/* Files past 2^32 lines, as numbers (no such file is written): the order
 * of N = 2^32 + 1000 lines (2^22 + 1 blocks, the last of 1,000 lines)
 * puts every block once; its windows start where their blocks' lines
 * add up to, the last ends at N; sampled windows — the first, the one
 * holding the partial block, the last, positions past 2^32 — hold each
 * of their lines once, all below N; the next epoch's order differs. The
 * split of 2^40 + 3 lines over 7 workers covers them with parts whose
 * batches of 1 pass 2^31; batch indices past 2^31 read nothing. */
static void test_order_past_2_32(void)
{
    const long long N = (1ll << 32) + 1000, nb = (N + 1023) / 1024;
    const long long n_win = (nb + WK_CTR_WINDOW - 1) / WK_CTR_WINDOW;
    struct wk_ctr_order o;
    unsigned char *seen = calloc((size_t)(nb + 7) / 8, 1);
    long long *lines = malloc(WK_CTR_WINDOW * WK_CTR_INDEX_EVERY *
                              sizeof *lines);
    long long part_w = -1, at = 0, first, count, next = 0, sum = 0;
    int64_t b0[64];
    int bad = 0, differ = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(seen && lines);
    CU_ASSERT_EQUAL_FATAL(wk_ctr_order_init(&o, N, 7, WK_CTR_WINDOW), HC_OK);
    wk_ctr_order_epoch(&o, 3);
    for (long long i = 0; i < nb; i++) {
        int64_t b = o.bperm[i];

        bad += b < 0 || b >= nb || (seen[b / 8] >> (b % 8) & 1);
        if (b >= 0 && b < nb)
            seen[b / 8] |= (unsigned char)(1u << (b % 8));
        if (b == nb - 1)
            part_w = i / WK_CTR_WINDOW;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(o.part_at >= 0, 1);
    CU_ASSERT_EQUAL(part_w, o.part_at / WK_CTR_WINDOW);
    /* each window's start: the lines of the blocks before it */
    for (long long w = 0; w < n_win && !bad; w++) {
        bad += wk_ctr_window_start(&o, w) != at;
        for (long long i = w * WK_CTR_WINDOW;
             i < (w + 1) * WK_CTR_WINDOW && i < nb; i++)
            at += o.bperm[i] == nb - 1 ? 1000 : 1024;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(at, N);
    CU_ASSERT_EQUAL(wk_ctr_window_start(&o, n_win), N);
    CU_ASSERT_EQUAL(wk_ctr_window_of(&o, N - 1), n_win - 1);
    {
        const long long ws[] = { 0, part_w, n_win - 1,
                                 wk_ctr_window_of(&o, (1ll << 32) + 5),
                                 wk_ctr_window_of(&o, 3000000000ll) };

        for (size_t t = 0; t < sizeof ws / sizeof ws[0]; t++) {
            long long s0 = wk_ctr_window_start(&o, ws[t]);
            long long s1 = wk_ctr_window_start(&o, ws[t] + 1);

            CU_ASSERT_EQUAL(window_lines(&o, ws[t], lines), s1 - s0);
            CU_ASSERT_EQUAL(wk_ctr_window_of(&o, s0), ws[t]);
            CU_ASSERT_EQUAL(wk_ctr_window_of(&o, s1 - 1), ws[t]);
        }
    }
    memcpy(b0, o.bperm, sizeof b0);
    wk_ctr_order_epoch(&o, 4);
    for (int i = 0; i < 64; i++)
        differ += o.bperm[i] != b0[i];
    CU_ASSERT(differ > 32);
    wk_ctr_order_free(&o);
    CU_ASSERT_EQUAL(wk_ctr_order_init(&o, (1ll << 62) + 1, 7, 16),
                    HC_ERR_INVAL);
    wk_ctr_order_free(&o);

    /* the split of 2^40 + 3 lines over 7 workers */
    for (int k = 0; k < 7; k++) {
        CU_ASSERT_EQUAL(wk_ctr_split((1ll << 40) + 3, 7, k, "big", &first,
                                     &count), HC_OK);
        CU_ASSERT_EQUAL(first, next);
        CU_ASSERT(count == ((1ll << 40) + 3) / 7 ||
                  count == ((1ll << 40) + 3) / 7 + 1);
        CU_ASSERT(wk_ctr_batches_of(count, 1) > 2147483647ll);
        CU_ASSERT_EQUAL(wk_ctr_batches_of(count, 512), (count + 511) / 512);
        next = first + count;
        sum += count;
    }
    CU_ASSERT_EQUAL(sum, (1ll << 40) + 3);
    CU_ASSERT_EQUAL(wk_ctr_split(5, 6, 0, "big", &first, &count),
                    HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_ctr_split(0, 1, 0, "big", &first, &count),
                    HC_ERR_INVAL);
    {
        struct wk_ctr_opts op = { .format = WK_CTR_CRITEO,
                                  .input_dim = WK_CTR_EXACT_DIM,
                                  .shuffle = 1, .seed = 1 };
        struct wk_ctr *c;
        float label[1], num[13];
        int64_t cat[26];
        int got = -1;

        CU_ASSERT_EQUAL_FATAL(wk_ctr_open(numbered_n(700), &op, &c), HC_OK);
        CU_ASSERT_EQUAL(wk_ctr_batch(c, 1, 0, 0, 1ll << 40, 1 << 30, label,
                                     num, cat, &got), HC_OK);
        CU_ASSERT_EQUAL(got, 0);
        wk_ctr_close(c);
    }
    free(seen);
    free(lines);
}

static int suite_init(void)
{
    hp_tmpdir(tmp, sizeof tmp);
    return 0;
}

static int suite_clean(void)
{
    hp_rmtree(tmp);
    return 0;
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("data_ctr", suite_init, suite_clean);

    CU_add_test(s, "Criteo lines, empty fields, CRLF", test_criteo_parse);
    CU_add_test(s, "row ids fixed by the rule", test_hash_fixed);
    CU_add_test(s, "worker k of n covers every line once", test_split_cover);
    CU_add_test(s, "a batch read out of order equals it in order",
                test_resume);
    CU_add_test(s, "the shuffled epoch order", test_shuffle_order);
    CU_add_test(s, "the reader reads the order's arithmetic",
                test_order_is_read);
    CU_add_test(s, "order and split past 2^32 lines, as numbers",
                test_order_past_2_32);
    CU_add_test(s, "a wide file shuffled in windows of one block",
                test_shuffle_wide);
    CU_add_test(s, "the model's shuffle switch", test_shuffle_key);
    CU_add_test(s, "the index cache", test_index_cache);
    CU_add_test(s, "libsvm lines, padding, width", test_libsvm);
    CU_add_test(s, "malformed lines refused with file and line",
                test_refusals);
    CU_add_test(s, "open, split and argument errors", test_open_errors);
    CU_add_test(s, "the streamed set of a model's inputs, by parts",
                test_streamed);
}
