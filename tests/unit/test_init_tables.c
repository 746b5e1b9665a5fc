/*
 * test_init_tables.c — worker/init_tables.h's reading of --initial-weights
 * for a model with a table, from a .npy directory: the dense variables
 * into params, the table's NAME.ids.npy and NAME.rows.npy checked in full
 * before anything is sent, each bad file refused naming the file and what
 * is wrong. (Sending: tests/integration/initial_rows.sh.)
 */
#include "cu.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "model.h"
#include "npy.h"
#include "worker/init_tables.h"

static const char model_json[] =
    "{\"name\": \"it\", \"seed\": 3,"
    " \"inputs\": [{\"name\": \"categorical\", \"shape\": [2],"
    " \"dtype\": \"int64\"}],"
    " \"layers\": [{\"type\": \"embedding\", \"name\": \"embedding\","
    " \"input_dim\": 100, \"output_dim\": 4, \"inputs\": \"categorical\"},"
    " {\"type\": \"flatten\"}, {\"type\": \"dense\", \"name\": \"out\","
    " \"units\": 1, \"activation\": \"sigmoid\"}],"
    " \"loss\": \"binary_crossentropy\", \"optimizer\": \"adagrad\"}";

/* The directory's table files: n ids (as given) and rows of `dim`; the
 * rows as uint64 when rows_u64 (a wrong dtype); no rows file when
 * rows_n < 0; else rows_n rows. */
static void write_table(const char *dir, const uint64_t *ids, size_t n,
                        long rows_n, size_t dim, int rows_u64)
{
    char path[512];
    float rows[16 * 8];
    uint64_t rows64[16 * 8] = {0};
    size_t shape[2] = {n, dim};
    int fd;

    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        rows[i] = 0.5f * (float)i;
    snprintf(path, sizeof path, "%s/embedding", dir);
    mkdir(path, 0755);
    fd = open(path, O_RDONLY | O_DIRECTORY);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(hc_npy_write_u64_at(fd, "embeddings.ids.npy", "ids",
                                        shape, 1, ids), HC_OK);
    unlink(strcat(path, "/embeddings.rows.npy"));
    if (rows_n >= 0) {
        shape[0] = (size_t)rows_n;
        CU_ASSERT_EQUAL(rows_u64
                            ? hc_npy_write_u64_at(fd, "embeddings.rows.npy",
                                                  "rows", shape, 2, rows64)
                            : hc_npy_write_f32_at(fd, "embeddings.rows.npy",
                                                  "rows", shape, 2, rows),
                        HC_OK);
    }
    close(fd);
}

static void test_npy_checks(void)
{
    static const uint64_t good[3] = {2, 7, 99}, big[3] = {2, 7, 100},
                          twice[3] = {2, 7, 7}, back[3] = {2, 9, 7};
    const struct {
        const uint64_t *ids;
        long rows_n;
        size_t dim;
        int rows_u64, rv;
        const char *frag;
    } t[] = {
        {good, 3, 4, 0, HC_OK, NULL},
        {big, 3, 4, 0, HC_ERR_DATA,
         "embeddings.ids.npy: id 100 at position 2 is not below table "
         "embedding/embeddings's input_dim 100"},
        {twice, 3, 4, 0, HC_ERR_DATA, "id 7 at position 2 is repeated"},
        {back, 3, 4, 0, HC_ERR_DATA, "id 7 at position 2 is below the one "
                                     "before"},
        {good, 3, 4, 1, HC_ERR_DATA, "embeddings.rows.npy: array of dtype "
                                     "<u8; the rows of table "
                                     "embedding/embeddings are float32"},
        {good, 3, 3, 0, HC_ERR_MISMATCH, "embeddings.rows.npy has shape (3, "
                                         "3); the rows of table "
                                         "embedding/embeddings are (n, 4)"},
        {good, 2, 4, 0, HC_ERR_MISMATCH, "holds 2 rows but"},
        {good, -1, 4, 0, HC_ERR_NOTFOUND, "embeddings.rows.npy: No such file"},
    };
    struct hc_model m;
    char dir[256], path[512];
    float *params, kernel[8], bias = 0.25f;
    size_t kshape[2] = {8, 1}, bshape[1] = {1};

    CU_ASSERT_EQUAL_FATAL(hc_model_parse(model_json, strlen(model_json),
                                         "test model", &m), HC_OK);
    CU_ASSERT_FATAL(wk_model_has_tables(&m));
    params = calloc(m.n_params + 1, sizeof *params);
    CU_ASSERT_FATAL(params != NULL);
    hp_tmpdir(dir, sizeof dir);
    for (int i = 0; i < 8; i++)
        kernel[i] = (float)i - 3.5f;
    snprintf(path, sizeof path, "%s/out", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/out/kernel.npy", dir);
    CU_ASSERT_EQUAL(hc_npy_write_f32(path, kshape, 2, kernel), HC_OK);
    snprintf(path, sizeof path, "%s/out/bias.npy", dir);
    CU_ASSERT_EQUAL(hc_npy_write_f32(path, bshape, 1, &bias), HC_OK);
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct wk_init_tables *it = NULL;
        int rv;

        write_table(dir, t[k].ids, 3, t[k].rows_n, t[k].dim, t[k].rows_u64);
        rv = wk_init_tables_open(&m, dir, params, &it);
        CU_ASSERT_EQUAL(rv, t[k].rv);
        if (t[k].frag && !strstr(hc_err_msg(), t[k].frag))
            printf("\n  case %zu: \"%s\" lacks \"%s\"\n", k, hc_err_msg(),
                   t[k].frag);
        CU_ASSERT(!t[k].frag || strstr(hc_err_msg(), t[k].frag) != NULL);
        CU_ASSERT_EQUAL(it != NULL, rv == HC_OK);
        if (rv == HC_OK) {
            /* The dense variables read into params, the table not. */
            CU_ASSERT_EQUAL(m.n_params, 9);
            CU_ASSERT_EQUAL(memcmp(params + hc_model_var_offset(&m, 1),
                                   kernel, sizeof kernel), 0);
            CU_ASSERT_EQUAL(params[hc_model_var_offset(&m, 2)], bias);
        }
        wk_init_tables_close(it);
    }
    free(params);
    hp_rmtree(dir);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("init_tables", NULL, NULL);

    CU_add_test(s, "a .npy directory: dense variables read; ids past "
                "input_dim, repeated, out of order, rows of another dtype, "
                "width or count, no rows file refused by name",
                test_npy_checks);
}
