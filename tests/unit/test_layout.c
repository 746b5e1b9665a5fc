/*
 * test_layout.c — the block → shard layout: exact assignments of small
 * cases worked out by hand, the invariants (every element exactly once,
 * flat offsets, local indices, balance within one block) over a table of
 * variable sizes and shard counts, determinism of the layout and its hash,
 * and the argument errors.
 */
#include "cu.h"
#include "err.h"
#include "layout.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VARS 8

/* Check every invariant of l built from sizes; returns the failures. */
static int check_invariants(const struct hc_layout *l, const size_t *sizes,
                            int n_vars)
{
    uint64_t elems[64] = {0}, flat = 0, total = 0, lo = UINT64_MAX, hi = 0;
    uint32_t blocks[64] = {0};
    size_t b = 0;
    int bad = 0;

    if (l->n_shards > 64)
        return 1;
    for (int v = 0; v < n_vars; v++) {
        uint64_t off = 0;           /* blocks of v tile [0, size) in order */
        for (; b < l->n_blocks && l->blocks[b].var == (uint32_t)v; b++) {
            const struct hc_block *k = &l->blocks[b];
            bad += k->offset != off;
            bad += k->flat != flat + off;
            bad += k->length < 1 || k->length > l->block_elems;
            bad += k->length < l->block_elems && off + k->length != sizes[v];
            bad += k->shard >= (uint32_t)l->n_shards;
            if (k->shard < 64) {
                bad += k->local != blocks[k->shard];
                blocks[k->shard]++;
                elems[k->shard] += k->length;
            }
            off += k->length;
        }
        bad += off != sizes[v];
        flat += sizes[v];
        total += sizes[v];
    }
    bad += b != l->n_blocks;
    bad += l->total != total;
    for (int s = 0; s < l->n_shards; s++) {
        bad += l->shard_elems[s] != elems[s];
        bad += l->shard_blocks[s] != blocks[s];
        lo = elems[s] < lo ? elems[s] : lo;
        hi = elems[s] > hi ? elems[s] : hi;
    }
    bad += hi - lo > l->block_elems;    /* balance within one block */
    return bad;
}

static void test_exact_small(void)
{
    /* sizes {5, 3}, 2 shards, blocks of 2: lengths 2,2,1 | 2,1 are taken
     * as v0@0 v0@2 v1@0 (length 2) then v0@4 v1@2 (length 1). */
    static const size_t sizes[] = {5, 3};
    static const struct hc_block want[] = {
        {.var = 0, .offset = 0, .length = 2, .shard = 0, .flat = 0, .local = 0},
        {.var = 0, .offset = 2, .length = 2, .shard = 1, .flat = 2, .local = 0},
        {.var = 0, .offset = 4, .length = 1, .shard = 1, .flat = 4, .local = 1},
        {.var = 1, .offset = 0, .length = 2, .shard = 0, .flat = 5, .local = 1},
        {.var = 1, .offset = 2, .length = 1, .shard = 1, .flat = 7, .local = 2},
    };
    struct hc_layout l;

    CU_ASSERT_EQUAL_FATAL(hc_layout_build(sizes, 2, 2, 2, &l), HC_OK);
    CU_ASSERT_EQUAL_FATAL(l.n_blocks, 5);
    for (size_t b = 0; b < 5; b++) {
        CU_ASSERT_EQUAL(l.blocks[b].var, want[b].var);
        CU_ASSERT_EQUAL(l.blocks[b].offset, want[b].offset);
        CU_ASSERT_EQUAL(l.blocks[b].length, want[b].length);
        CU_ASSERT_EQUAL(l.blocks[b].shard, want[b].shard);
        CU_ASSERT_EQUAL(l.blocks[b].flat, want[b].flat);
        CU_ASSERT_EQUAL(l.blocks[b].local, want[b].local);
    }
    CU_ASSERT_EQUAL(l.total, 8);
    CU_ASSERT_EQUAL(l.shard_elems[0], 4);
    CU_ASSERT_EQUAL(l.shard_elems[1], 4);
    CU_ASSERT_EQUAL(l.shard_blocks[0], 2);
    CU_ASSERT_EQUAL(l.shard_blocks[1], 3);
    CU_ASSERT_EQUAL(check_invariants(&l, sizes, 2), 0);
    hc_layout_free(&l);
    hc_layout_free(&l);         /* safe twice */
    CU_ASSERT_PTR_NULL(l.blocks);
}

static void test_table(void)
{
    static const struct {
        size_t sizes[MAX_VARS];
        int n_vars, n_shards;
        uint32_t block;
        size_t n_blocks;
        uint64_t shard_elems[4];    /* first shards, hand-computed */
    } t[] = {
        /* fashion_cnn: 13 full blocks of dense/kernel alternate (7 / 6),
         * then 832, 288, 32, 10 all go to the lighter shard 1. */
        {{288, 32, 54080, 10}, 4, 2, 4096, 17, {28672, 25738}},
        {{288, 32, 54080, 10}, 4, 1, 4096, 17, {54410}},
        {{288, 32, 54080, 10}, 4, 3, 4096, 17, {20480, 17216, 16714}},
        {{288, 32, 54080, 10}, 4, 4, 1024, 56, {14144, 13600, 13344, 13322}},
        {{10}, 1, 3, 4, 3, {4, 4, 2}},
        {{3}, 1, 4, 4096, 1, {3, 0, 0, 0}},
        {{3, 2}, 2, 2, 1, 5, {3, 2}},
        {{4096, 4096, 4096}, 3, 2, 4096, 3, {8192, 4096}},
        {{100352, 128, 1280, 10}, 4, 2, 4096, 28, {51200, 50570}},
        {{1, 1, 1, 1, 1, 1, 1}, 7, 3, 8, 7, {3, 2, 2}},
        {{7, 7, 7}, 3, 2, 3, 9, {11, 10}},
        {{1000003}, 1, 4, 65536, 16, {262144, 262144, 262144, 213571}},
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct hc_layout l;
        int rv = hc_layout_build(t[i].sizes, t[i].n_vars, t[i].n_shards,
                                 t[i].block, &l);
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        CU_ASSERT_EQUAL(l.n_shards, t[i].n_shards);
        CU_ASSERT_EQUAL(l.block_elems, t[i].block);
        CU_ASSERT_EQUAL(l.n_blocks, t[i].n_blocks);
        for (int s = 0; s < t[i].n_shards && s < 4; s++)
            if (l.shard_elems[s] != t[i].shard_elems[s]) {
                printf("\n  row %zu shard %d: %llu elements, want %llu\n", i,
                       s, (unsigned long long)l.shard_elems[s],
                       (unsigned long long)t[i].shard_elems[s]);
                CU_FAIL("shard elements");
            }
        CU_ASSERT_EQUAL(check_invariants(&l, t[i].sizes, t[i].n_vars), 0);
        hc_layout_free(&l);
    }
}

/* Invariants over many generated cases (a fixed LCG, so deterministic). */
static void test_generated(void)
{
    uint64_t rng = 12345;
    int failures = 0;

    for (int c = 0; c < 300; c++) {
        size_t sizes[MAX_VARS];
        struct hc_layout l;
        int n_vars, n_shards;
        uint32_t block;

        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        n_vars = 1 + (int)(rng >> 33) % MAX_VARS;
        n_shards = 1 + (int)(rng >> 40) % 9;
        block = 1 + (uint32_t)(rng >> 50) % 700;
        for (int v = 0; v < n_vars; v++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            sizes[v] = 1 + (rng >> 33) % 5000;
        }
        if (hc_layout_build(sizes, n_vars, n_shards, block, &l) != HC_OK) {
            failures++;
            continue;
        }
        failures += check_invariants(&l, sizes, n_vars) != 0;
        hc_layout_free(&l);
    }
    CU_ASSERT_EQUAL(failures, 0);
}

static void test_determinism_and_hash(void)
{
    static const size_t sizes[] = {288, 32, 54080, 10};
    static const size_t other[] = {288, 32, 54080, 11};
    struct hc_layout a, b, c;

    CU_ASSERT_EQUAL_FATAL(hc_layout_build(sizes, 4, 3, 1000, &a), HC_OK);
    CU_ASSERT_EQUAL_FATAL(hc_layout_build(sizes, 4, 3, 1000, &b), HC_OK);
    CU_ASSERT_EQUAL(a.n_blocks, b.n_blocks);
    CU_ASSERT_EQUAL(memcmp(a.blocks, b.blocks, a.n_blocks * sizeof *a.blocks),
                    0);
    CU_ASSERT_EQUAL(hc_layout_hash(&a), hc_layout_hash(&b));
    hc_layout_free(&b);

    /* Any change of shards, block size or sizes changes the hash. */
    CU_ASSERT_EQUAL_FATAL(hc_layout_build(sizes, 4, 2, 1000, &c), HC_OK);
    CU_ASSERT_NOT_EQUAL(hc_layout_hash(&a), hc_layout_hash(&c));
    hc_layout_free(&c);
    CU_ASSERT_EQUAL_FATAL(hc_layout_build(sizes, 4, 3, 1001, &c), HC_OK);
    CU_ASSERT_NOT_EQUAL(hc_layout_hash(&a), hc_layout_hash(&c));
    hc_layout_free(&c);
    CU_ASSERT_EQUAL_FATAL(hc_layout_build(other, 4, 3, 1000, &c), HC_OK);
    CU_ASSERT_NOT_EQUAL(hc_layout_hash(&a), hc_layout_hash(&c));
    hc_layout_free(&c);

    /* The hash is FNV-1a over the fields as documented: recompute it. */
    {
        uint64_t h = 0xcbf29ce484222325ull;
        uint64_t fields[2] = {3, 1000};
        for (int f = 0; f < 2; f++)
            for (int i = 0; i < 4; i++) {
                h ^= (fields[f] >> (8 * i)) & 0xff;
                h *= 0x100000001b3ull;
            }
        for (size_t k = 0; k < a.n_blocks; k++) {
            uint64_t v[4] = {a.blocks[k].var, a.blocks[k].offset,
                             a.blocks[k].length, a.blocks[k].shard};
            int w[4] = {4, 8, 4, 4};
            for (int f = 0; f < 4; f++)
                for (int i = 0; i < w[f]; i++) {
                    h ^= (v[f] >> (8 * i)) & 0xff;
                    h *= 0x100000001b3ull;
                }
        }
        CU_ASSERT_EQUAL(hc_layout_hash(&a), h);
    }
    hc_layout_free(&a);
}

/* A variable of size 0 is a row-sparse table: no blocks, the others laid
 * out as without it; a model of tables alone has no blocks at all. */
static void test_tables(void)
{
    static const size_t with[] = {10, 0, 5}, table[] = {0};
    struct hc_layout l;

    CU_ASSERT_EQUAL_FATAL(hc_layout_build(with, 3, 2, 4, &l), HC_OK);
    CU_ASSERT_EQUAL(l.n_blocks, 5);
    CU_ASSERT_EQUAL(l.total, 15);
    for (size_t b = 0; b < l.n_blocks; b++)
        CU_ASSERT_NOT_EQUAL(l.blocks[b].var, 1);
    CU_ASSERT_EQUAL(l.blocks[3].var, 2);
    CU_ASSERT_EQUAL(l.blocks[3].flat, 10);
    hc_layout_free(&l);
    CU_ASSERT_EQUAL_FATAL(hc_layout_build(table, 1, 3, 4096, &l), HC_OK);
    CU_ASSERT_EQUAL(l.n_blocks, 0);
    CU_ASSERT_EQUAL(l.shard_blocks[0] + l.shard_blocks[1] +
                    l.shard_blocks[2], 0);
    hc_layout_free(&l);
}

static void test_errors(void)
{
    static const size_t ok[] = {10, 20};
    static const size_t huge[] = {SIZE_MAX, 2};
    static const size_t many[] = {(size_t)1 << 40};
    static const struct {
        const size_t *sizes;
        int n_vars, n_shards;
        uint32_t block;
        int rv;
        const char *want;
    } t[] = {
        {ok, 2, 0, 4096, HC_ERR_INVAL,
         "layout: 0 parameter-server shards; need 1 to 4096"},
        {ok, 2, -1, 4096, HC_ERR_INVAL, "-1 parameter-server shards"},
        {ok, 2, 5000, 4096, HC_ERR_INVAL, "5000 parameter-server shards"},
        {ok, 2, 2, 0, HC_ERR_INVAL, "layout: block size 0"},
        {ok, 0, 2, 4096, HC_ERR_INVAL, "layout: 0 variables"},
        {NULL, 2, 2, 4096, HC_ERR_INVAL, "layout: 2 variables"},
        {huge, 2, 2, 4096, HC_ERR_LIMIT, "sizes overflow 64 bits"},
        {many, 1, 2, 1, HC_ERR_LIMIT,
         "layout: 1099511627776 blocks of 1 elements are too many; use a "
         "larger block size"},
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct hc_layout l;
        memset(&l, 0xAB, sizeof l);
        int rv = hc_layout_build(t[i].sizes, t[i].n_vars, t[i].n_shards,
                                 t[i].block, &l);
        if (rv != t[i].rv || !strstr(hc_err_msg(), t[i].want))
            printf("\n  row %zu: rv %d: %s\n", i, rv, hc_err_msg());
        CU_ASSERT_EQUAL(rv, t[i].rv);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), t[i].want));
        CU_ASSERT_PTR_NULL(l.blocks);       /* *out zeroed on error */
        hc_layout_free(&l);
    }
    CU_ASSERT_EQUAL(hc_layout_build(ok, 2, 2, 4096, NULL), HC_ERR_INVAL);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("layout", NULL, NULL);

    CU_add_test(s, "exact small layout", test_exact_small);
    CU_add_test(s, "row-sparse tables have no blocks", test_tables);
    CU_add_test(s, "table of sizes and shards", test_table);
    CU_add_test(s, "generated cases", test_generated);
    CU_add_test(s, "determinism and hash", test_determinism_and_hash);
    CU_add_test(s, "errors", test_errors);
}
