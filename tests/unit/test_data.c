/*
 * test_data.c — IDX loading and sharding: small IDX files written plain and
 * gzipped into a temporary directory and read back, with their labels or
 * without (prediction); every malformed file checked for its message; shards disjoint and complete with Keras's
 * partial last batch; the per-epoch shuffle deterministic per (seed, epoch,
 * shard) and different across epochs; and, where Debian's Fashion-MNIST is
 * installed, the real test set. Several inputs: .npy arrays named by
 * input packed into one row per sample, in the model's order, rows kept
 * whole by shards; each refusal read by message. A streamed set past
 * 2^31 and 2^32 samples (as numbers, through a source that records what
 * it is asked): the parts, the last batch, the shards' 32-bit place and
 * the bound on metrics that hold every output.
 */
#include "cu.h"
#include "worker/data.h"
#include "worker/eval.h"
#include "err.h"
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmp[256];

/* An IDX file: magic, dims, then `len` bytes of body from `body`. */
static void write_idx(const char *name, int gz, uint32_t magic,
                      const uint32_t *dims, int ndims,
                      const unsigned char *body, size_t len)
{
    unsigned char hdr[16];
    char path[512];
    size_t n = 0;

    snprintf(path, sizeof path, "%s/%s", tmp, name);
    for (int i = -1; i < ndims; i++) {
        uint32_t v = i < 0 ? magic : dims[i];
        hdr[n++] = (unsigned char)(v >> 24);
        hdr[n++] = (unsigned char)(v >> 16);
        hdr[n++] = (unsigned char)(v >> 8);
        hdr[n++] = (unsigned char)v;
    }
    if (gz) {
        gzFile f = gzopen(path, "wb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(gzwrite(f, hdr, (unsigned)n), (int)n);
        if (len)
            CU_ASSERT_EQUAL(gzwrite(f, body, (unsigned)len), (int)len);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(fwrite(hdr, 1, n, f), n);
        if (len)
            CU_ASSERT_EQUAL(fwrite(body, 1, len, f), len);
        fclose(f);
    }
}

static void write_raw(const char *name, const void *bytes, size_t len)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", tmp, name);
    f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    if (len)
        CU_ASSERT_EQUAL(fwrite(bytes, 1, len, f), len);
    fclose(f);
}

static const char *in_tmp(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", tmp, name);
    return buf;
}

/* 5 images of 3 x 2 and their labels 0, 1, 2, 0, 1. */
#define N_IMG 5
static unsigned char pixels[N_IMG * 6];
static const unsigned char labels[N_IMG] = {0, 1, 2, 0, 1};
static const uint32_t img_dims[3] = {N_IMG, 3, 2};
static const uint32_t lbl_dims[1] = {N_IMG};

static void write_pair(const char *images, int gz_images, const char *labs,
                       int gz_labels)
{
    write_idx(images, gz_images, 0x803, img_dims, 3, pixels, sizeof pixels);
    write_idx(labs, gz_labels, 0x801, lbl_dims, 1, labels, sizeof labels);
}

static void check_small(const struct wk_dataset *d)
{
    int bad = 0;

    CU_ASSERT_EQUAL(d->n, N_IMG);
    CU_ASSERT_EQUAL(d->h, 3);
    CU_ASSERT_EQUAL(d->w, 2);
    CU_ASSERT_EQUAL(d->c, 1);
    CU_ASSERT_EQUAL(d->n_classes, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d->x);
    for (int i = 0; i < N_IMG * 6; i++)
        bad += d->x[i] != (float)(pixels[i] / 255.0);
    for (int i = 0; i < N_IMG; i++)
        bad += d->y[i] != labels[i];
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_load_small(void)
{
    static const struct { int gz_images, gz_labels; } t[] = {
        {0, 0}, {1, 1}, {1, 0}, {0, 1},
    };
    char ip[512], lp[512];

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct wk_dataset d;
        write_pair("img", t[i].gz_images, "lbl", t[i].gz_labels);
        int rv = wk_data_load(in_tmp("img", ip, sizeof ip),
                              in_tmp("lbl", lp, sizeof lp), &d);
        if (rv != HC_OK)
            printf("\n  row %zu: %s\n", i, hc_err_msg());
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        check_small(&d);
        CU_ASSERT_STRING_EQUAL(d.images_path, ip);
        CU_ASSERT_STRING_EQUAL(d.labels_path, lp);
        CU_ASSERT_EQUAL(d.x[0], 0.0f);
        CU_ASSERT_EQUAL(d.x[N_IMG * 6 - 1], 1.0f);     /* pixel 255 */
        CU_ASSERT_EQUAL(wk_data_check_classes(&d, 3), HC_OK);
        CU_ASSERT_EQUAL(wk_data_check_classes(&d, 2), HC_ERR_DATA);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "labels file"));
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), ": label 2 of sample 2 "
                                      "is not below the model's 2 classes"));
        wk_data_free(&d);
        CU_ASSERT_PTR_NULL(d.x);
        wk_data_free(&d);
    }
}

static void test_load_dir(void)
{
    struct wk_dataset d;
    char sub[512];

    /* train: images gzipped, labels plain (the plain name is found). */
    write_pair("train-images-idx3-ubyte.gz", 1, "train-labels-idx1-ubyte", 0);
    CU_ASSERT_EQUAL_FATAL(wk_data_load_dir(tmp, "train", &d), HC_OK);
    check_small(&d);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.images_path,
                                  "/train-images-idx3-ubyte.gz"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d.labels_path, "/train-labels-idx1-ubyte"));
    wk_data_free(&d);

    /* "test" is t10k; a trailing slash on the directory is fine. */
    write_pair("t10k-images-idx3-ubyte.gz", 1, "t10k-labels-idx1-ubyte.gz", 1);
    snprintf(sub, sizeof sub, "%s/", tmp);
    CU_ASSERT_EQUAL_FATAL(wk_data_load_dir(sub, "test", &d), HC_OK);
    check_small(&d);
    CU_ASSERT_PTR_NULL(strstr(d.images_path, "//"));
    wk_data_free(&d);

    CU_ASSERT_EQUAL(wk_data_load_dir(tmp, "valid", &d), HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "data set \"valid\": use "
                                  "\"train\" or \"t10k\""));
    snprintf(sub, sizeof sub, "%s/nothing", tmp);
    CU_ASSERT_EQUAL(wk_data_load_dir(sub, "train", &d), HC_ERR_NOTFOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "/nothing has no "
                                  "train-images-idx3-ubyte(.gz); install "
                                  "Debian's dataset-fashion-mnist"));
    CU_ASSERT_PTR_NULL(d.x);
}

/* Write the gzip of an images file cut to half its compressed size. */
static void write_cut_gz(void)
{
    char path[512];
    struct stat st;

    write_idx("cut.gz", 1, 0x803, img_dims, 3, pixels, sizeof pixels);
    in_tmp("cut.gz", path, sizeof path);
    CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
    CU_ASSERT_EQUAL_FATAL(truncate(path, st.st_size / 2 + 10), 0);
}

/* Copy s into buf with every '@' replaced by the temporary directory. */
static void expand_tmp(const char *s, char *buf, size_t len)
{
    size_t n = 0;

    for (; *s && n + strlen(tmp) + 1 < len; s++) {
        if (*s == '@') {
            memcpy(buf + n, tmp, strlen(tmp));
            n += strlen(tmp);
        } else {
            buf[n++] = *s;
        }
    }
    buf[n] = '\0';
}

/* A gzipped images file whose trailer's length field is wrong. */
static void write_bad_trailer(void)
{
    static const unsigned char zero[4] = {0, 0, 0, 0};
    char path[512];
    FILE *f;

    write_idx("trailer.gz", 1, 0x803, img_dims, 3, pixels, sizeof pixels);
    f = fopen(in_tmp("trailer.gz", path, sizeof path), "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fseek(f, -4, SEEK_END), 0);
    CU_ASSERT_EQUAL(fwrite(zero, 1, 4, f), 4);
    fclose(f);
}

static void test_bad_files(void)
{
    static const unsigned char junk[] = {0x12, 0x34, 0x56, 0x78, 0, 0, 0, 5};
    static const unsigned char short_hdr[] = {0, 0, 8, 3, 0, 0};
    static const uint32_t d0[3] = {0, 3, 2}, drow[3] = {N_IMG, 0, 2};
    static const uint32_t l4[1] = {4}, d2[2] = {N_IMG, 6};
    unsigned char long_body[N_IMG * 6 + 3];
    static const struct {
        const char *images, *labels;    /* names in tmp */
        int rv;
        const char *want;               /* "@" stands for the tmp dir */
    } t[] = {
        {"none", "lbl", HC_ERR_NOTFOUND,
         "images file @/none: cannot open: No such file or directory"},
        {"img", "none", HC_ERR_NOTFOUND, "labels file @/none: cannot open"},
        {"empty", "lbl", HC_ERR_DATA, "images file @/empty is empty"},
        {"short_hdr", "lbl", HC_ERR_DATA,
         "images file @/short_hdr: truncated header: expected 16 bytes, "
         "got 6"},
        {"junk", "lbl", HC_ERR_DATA,
         "images file @/junk is not an IDX file (magic 0x12345678, expected "
         "0x00000803)"},
        {"lbl", "lbl", HC_ERR_DATA,
         "images file @/lbl is an IDX labels file (magic 0x00000801), "
         "expected images (magic 0x00000803); are the images and labels "
         "files swapped?"},
        {"img", "img", HC_ERR_DATA,
         "labels file @/img is an IDX images file (magic 0x00000803), "
         "expected labels (magic 0x00000801)"},
        {"dims2", "lbl", HC_ERR_DATA,
         "images file @/dims2 has 2 dimensions (magic 0x00000802); expected "
         "3 (magic 0x00000803): (N, rows, cols)"},
        {"float", "lbl", HC_ERR_DATA,
         "images file @/float holds IDX element type 0x0d (magic "
         "0x00000d03); expected unsigned bytes"},
        {"short_body", "lbl", HC_ERR_DATA,
         "images file @/short_body is truncated: expected 30 bytes of data "
         "after the header, got 29"},
        {"cut.gz", "lbl", HC_ERR_DATA, "images file @/cut.gz is truncated: "
         "expected 30 bytes of data after the header, got "},
        {"trailer.gz", "lbl", HC_ERR_DATA, "images file @/trailer.gz: "
         "corrupt gzip data: incorrect length check"},
        {"img", "short_lbl", HC_ERR_DATA,
         "labels file @/short_lbl is truncated: expected 5 bytes of data "
         "after the header, got 2"},
        {"long_body", "lbl", HC_ERR_DATA,
         "images file @/long_body has trailing bytes after the 5 samples "
         "its header announces"},
        {"img", "lbl4", HC_ERR_DATA,
         "images file @/img holds 5 images but labels file @/lbl4 holds 4 "
         "labels; they must be a matching pair"},
        {"zero", "lbl", HC_ERR_DATA,
         "images file @/zero holds no samples (N = 0)"},
        {"norows", "lbl", HC_ERR_DATA,
         "images file @/norows: images of 0 x 2 pixels are empty"},
    };
    char ip[512], lp[512], want[1024];

    write_pair("img", 0, "lbl", 1);
    write_raw("empty", "", 0);
    write_raw("short_hdr", short_hdr, sizeof short_hdr);
    write_raw("junk", junk, sizeof junk);
    write_idx("dims2", 0, 0x802, d2, 2, pixels, sizeof pixels);
    write_idx("float", 1, 0xd03, img_dims, 3, pixels, sizeof pixels);
    write_idx("short_body", 0, 0x803, img_dims, 3, pixels,
              sizeof pixels - 1);
    write_cut_gz();
    write_bad_trailer();
    write_idx("short_lbl", 0, 0x801, lbl_dims, 1, labels, 2);
    memcpy(long_body, pixels, sizeof pixels);
    memset(long_body + sizeof pixels, 0, 3);
    write_idx("long_body", 1, 0x803, img_dims, 3, long_body,
              sizeof long_body);
    write_idx("lbl4", 0, 0x801, l4, 1, labels, 4);
    write_idx("zero", 0, 0x803, d0, 3, NULL, 0);
    write_idx("norows", 0, 0x803, drow, 3, NULL, 0);

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct wk_dataset d;
        expand_tmp(t[i].want, want, sizeof want);
        hc_err_clear();
        int rv = wk_data_load(in_tmp(t[i].images, ip, sizeof ip),
                              in_tmp(t[i].labels, lp, sizeof lp), &d);
        if (rv != t[i].rv || !strstr(hc_err_msg(), want))
            printf("\n  row %zu: rv %d: %s\n  wanted: %s\n", i, rv,
                   hc_err_msg(), want);
        CU_ASSERT_EQUAL(rv, t[i].rv);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), want));
        CU_ASSERT_PTR_NULL(d.x);        /* *out zeroed on error */
        CU_ASSERT_EQUAL(d.n, 0);
        /* The images alone: the same error where the images file is at
         * fault, none where only the labels are. */
        hc_err_clear();
        rv = wk_data_load_images(ip, &d);
        if (strcmp(t[i].images, "img") == 0) {
            CU_ASSERT_EQUAL(rv, HC_OK);
            CU_ASSERT_EQUAL(d.n, N_IMG);
            wk_data_free(&d);
            continue;
        }
        if (rv != t[i].rv || !strstr(hc_err_msg(), want))
            printf("\n  row %zu, images only: rv %d: %s\n  wanted: %s\n", i,
                   rv, hc_err_msg(), want);
        CU_ASSERT_EQUAL(rv, t[i].rv);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), want));
        CU_ASSERT_PTR_NULL(d.x);
    }
}

/* An images file without its labels (prediction). */
static void test_load_images(void)
{
    struct wk_dataset d, both;
    char ip[512], lp[512], sub[512], path[WK_DATA_PATH_MAX];
    float x[2 * 6];
    int32_t y[2] = {-7, -7};

    write_pair("img", 1, "lbl", 0);
    CU_ASSERT_EQUAL_FATAL(wk_data_load_images(in_tmp("img", ip, sizeof ip),
                                              &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_data_load(ip, in_tmp("lbl", lp, sizeof lp),
                                       &both), HC_OK);
    CU_ASSERT_EQUAL(d.n, N_IMG);
    CU_ASSERT(d.h == 3 && d.w == 2 && d.c == 1);
    CU_ASSERT_PTR_NULL(d.y);
    CU_ASSERT_EQUAL(d.n_classes, 0);
    CU_ASSERT_STRING_EQUAL(d.images_path, ip);
    CU_ASSERT_STRING_EQUAL(d.labels_path, "");
    CU_ASSERT_EQUAL(memcmp(d.x, both.x, N_IMG * 6 * sizeof *d.x), 0);
    CU_ASSERT_EQUAL(wk_data_check_classes(&d, 1), HC_OK);
    /* Eval batches: pixels copied, labels left alone. */
    CU_ASSERT_EQUAL(wk_data_batch(&d, 3, 5, x, y), 2);
    CU_ASSERT_EQUAL(memcmp(x, both.x + 3 * 6, sizeof x), 0);
    CU_ASSERT(y[0] == -7 && y[1] == -7);
    CU_ASSERT_EQUAL(wk_data_batch(&both, 3, 5, x, NULL), 2);
    wk_data_free(&d);
    wk_data_free(&both);

    /* A directory's images without labels beside them. */
    snprintf(sub, sizeof sub, "%s/alone", tmp);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
    write_idx("alone/t10k-images-idx3-ubyte", 0, 0x803, img_dims, 3, pixels,
              sizeof pixels);
    CU_ASSERT_EQUAL(wk_data_dir_paths(sub, "test", path, NULL), HC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(path, "/alone/t10k-images-idx3-ubyte"));
    CU_ASSERT_EQUAL(wk_data_dir_paths(sub, "test", path, lp),
                    HC_ERR_NOTFOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "t10k-labels-idx1-ubyte"));
    CU_ASSERT_EQUAL(wk_data_dir_paths(sub, "valid", path, NULL),
                    HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_data_load_images(NULL, &d), HC_ERR_INVAL);
}

/* ---- shards ------------------------------------------------------------------ */

/* A synthetic data set of n 1 x 2 images: x = (i, −i), y = i. */
static void make_set(struct wk_dataset *d, int n)
{
    memset(d, 0, sizeof *d);
    d->n = n;
    d->h = 1;
    d->w = 2;
    d->c = 1;
    d->x = malloc((size_t)n * 2 * sizeof *d->x);
    d->y = malloc((size_t)n * sizeof *d->y);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d->x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d->y);
    for (int i = 0; i < n; i++) {
        d->x[2 * i] = (float)i;
        d->x[2 * i + 1] = (float)-i;
        d->y[i] = i;
    }
    snprintf(d->images_path, sizeof d->images_path, "synthetic");
}

static void test_shards_cover(void)
{
    static const struct { int n, k, batch; } t[] = {
        {10, 3, 4}, {1000, 7, 64}, {1000, 1, 1000}, {5, 5, 2},
        {1001, 4, 33}, {64, 2, 32}, {1, 1, 1},
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct wk_dataset d;
        int *seen, bad = 0, total = 0;
        float *x = malloc((size_t)t[i].batch * 2 * sizeof *x);
        int32_t *y = malloc((size_t)t[i].batch * sizeof *y);

        make_set(&d, t[i].n);
        seen = calloc((size_t)t[i].n, sizeof *seen);
        CU_ASSERT_FATAL(seen && x && y);
        for (int k = 0; k < t[i].k; k++) {
            struct wk_shard s;
            CU_ASSERT_EQUAL_FATAL(wk_shard_init(&s, t[i].n, t[i].k, k, 99),
                                  HC_OK);
            int want_n = t[i].n / t[i].k + (k < t[i].n % t[i].k);
            CU_ASSERT_EQUAL(s.n, want_n);
            int nb = wk_shard_n_batches(&s, t[i].batch);
            CU_ASSERT_EQUAL(nb, (want_n + t[i].batch - 1) / t[i].batch);
            for (int b = 0; b < nb; b++) {
                int got = -1;

                CU_ASSERT_EQUAL(wk_shard_batch(&s, 3, b, t[i].batch, &d, x, y,
                                               &got), HC_OK);
                int want = b < nb - 1 ? t[i].batch
                                      : want_n - (nb - 1) * t[i].batch;
                CU_ASSERT_EQUAL(got, want);
                for (int j = 0; j < got; j++) {
                    bad += y[j] % t[i].k != k;          /* strided */
                    bad += x[2 * j] != (float)y[j];
                    bad += x[2 * j + 1] != (float)-y[j];
                    seen[y[j]]++;
                }
                total += got > 0 ? got : 0;
            }
            int past = -1;

            CU_ASSERT_EQUAL(wk_shard_batch(&s, 3, nb, t[i].batch, &d, x, y,
                                           &past), HC_OK);
            CU_ASSERT_EQUAL(past, 0);
            wk_shard_free(&s);
        }
        for (int j = 0; j < t[i].n; j++)
            bad += seen[j] != 1;                /* disjoint and complete */
        if (bad)
            printf("\n  row %zu: %d bad samples\n", i, bad);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(total, t[i].n);
        free(seen);
        free(x);
        free(y);
        wk_data_free(&d);
    }
}

/* The order of epoch e of shard s: its labels, batch by batch. */
static void epoch_order(struct wk_shard *s, int epoch,
                        const struct wk_dataset *d, int32_t *order)
{
    float x[2 * 16];
    int got, at = 0;

    for (int b = 0; wk_shard_batch(s, epoch, b, 16, d, x, order + at,
                                   &got) == HC_OK && got > 0; b++)
        at += got;
    CU_ASSERT_EQUAL(at, s->n);
}

static void test_shuffle(void)
{
    enum { N = 500 };
    struct wk_dataset d;
    struct wk_shard a, b, c;
    static int32_t e0[N], e1[N], e2[N], again[N];
    int moved = 0;

    make_set(&d, N);
    CU_ASSERT_EQUAL_FATAL(wk_shard_init(&a, N, 1, 0, 7), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_shard_init(&b, N, 1, 0, 7), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_shard_init(&c, N, 1, 0, 8), HC_OK);

    epoch_order(&a, 0, &d, e0);
    epoch_order(&a, 1, &d, e1);
    epoch_order(&a, 2, &d, e2);
    for (int i = 0; i < N; i++)
        moved += e0[i] != i;
    CU_ASSERT(moved > N / 2);                           /* shuffled */
    CU_ASSERT_NOT_EQUAL(memcmp(e0, e1, sizeof e0), 0);  /* per epoch */
    CU_ASSERT_NOT_EQUAL(memcmp(e1, e2, sizeof e0), 0);

    epoch_order(&b, 2, &d, again);          /* straight to epoch 2 */
    CU_ASSERT_EQUAL(memcmp(e2, again, sizeof e2), 0);
    epoch_order(&b, 0, &d, again);          /* and back */
    CU_ASSERT_EQUAL(memcmp(e0, again, sizeof e0), 0);
    epoch_order(&c, 0, &d, again);          /* another seed */
    CU_ASSERT_NOT_EQUAL(memcmp(e0, again, sizeof e0), 0);

    /* Each epoch is a permutation. */
    {
        static int count[N];
        int bad = 0;
        memset(count, 0, sizeof count);
        for (int i = 0; i < N; i++)
            count[e1[i]]++;
        for (int i = 0; i < N; i++)
            bad += count[i] != 1;
        CU_ASSERT_EQUAL(bad, 0);
    }
    wk_shard_free(&a);
    wk_shard_free(&b);
    wk_shard_free(&c);

    /* Two shards of one set shuffle differently (different streams). */
    CU_ASSERT_EQUAL_FATAL(wk_shard_init(&a, N, 2, 0, 7), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_shard_init(&b, N, 2, 1, 7), HC_OK);
    epoch_order(&a, 0, &d, e0);
    epoch_order(&b, 0, &d, e1);
    moved = 0;
    for (int i = 0; i < N / 2; i++)
        moved += e0[i] / 2 != e1[i] / 2;
    CU_ASSERT(moved > N / 4);
    wk_shard_free(&a);
    wk_shard_free(&b);
    wk_data_free(&d);
}

/* "shuffle": false (file_order): each epoch the shard's strided samples
 * in order, 0, k, 2k, … for shard 0 of k. */
static void test_file_order(void)
{
    enum { N = 101 };
    struct wk_dataset d;
    struct wk_shard s;
    static int32_t e0[N], e3[N];
    int bad = 0;

    make_set(&d, N);
    CU_ASSERT_EQUAL_FATAL(wk_shard_init(&s, N, 2, 1, 7), HC_OK);
    s.file_order = 1;
    epoch_order(&s, 0, &d, e0);
    epoch_order(&s, 3, &d, e3);
    for (int i = 0; i < s.n; i++)
        bad += e0[i] != 1 + 2 * i || e3[i] != e0[i];
    CU_ASSERT_EQUAL(s.n, N / 2);
    CU_ASSERT_EQUAL(bad, 0);
    wk_shard_free(&s);
    wk_data_free(&d);
}

/* The documented shuffle (data.h), recomputed independently. */
static void test_shuffle_documented(void)
{
    static const struct {
        int n, k, index;
        uint64_t seed;
        int epoch, len;
        int32_t want[10];
    } t[] = {
        {10, 1, 0, 7, 0, 10, {5, 0, 4, 3, 1, 2, 6, 9, 7, 8}},
        {10, 1, 0, 7, 1, 10, {6, 3, 8, 9, 0, 1, 7, 4, 5, 2}},
        {11, 3, 2, 5, 4, 3, {8, 5, 2}},
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct wk_dataset d;
        struct wk_shard s;
        int32_t order[16];
        make_set(&d, t[i].n);
        CU_ASSERT_EQUAL_FATAL(wk_shard_init(&s, t[i].n, t[i].k, t[i].index,
                                            t[i].seed), HC_OK);
        CU_ASSERT_EQUAL_FATAL(s.n, t[i].len);
        epoch_order(&s, t[i].epoch, &d, order);
        CU_ASSERT_EQUAL(memcmp(order, t[i].want,
                               (size_t)t[i].len * sizeof *order), 0);
        wk_shard_free(&s);
        wk_data_free(&d);
    }
}

static void test_shard_errors(void)
{
    static const struct {
        int n, k, index;
        const char *want;
    } t[] = {
        {0, 1, 0, "data shard: the data set holds 0 samples"},
        {10, 0, 0, "data shard 0 of 0: need 0 <= index < shards"},
        {10, 3, 3, "data shard 3 of 3: need 0 <= index < shards"},
        {10, 3, -1, "data shard -1 of 3"},
        {4, 5, 0, "data shard 0 of 5: 4 samples leave some shards empty; "
                  "use at most 4 workers"},
    };
    struct wk_dataset d, other;
    struct wk_shard s;
    float x[8];
    int32_t y[4];
    int n;

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        CU_ASSERT_EQUAL(wk_shard_init(&s, t[i].n, t[i].k, t[i].index, 1),
                        HC_ERR_INVAL);
        if (!strstr(hc_err_msg(), t[i].want))
            printf("\n  row %zu: %s\n", i, hc_err_msg());
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), t[i].want));
        CU_ASSERT_PTR_NULL(s.order);
    }

    make_set(&d, 10);
    make_set(&other, 11);
    CU_ASSERT_EQUAL_FATAL(wk_shard_init(&s, 10, 2, 1, 1), HC_OK);
    n = -1;
    CU_ASSERT_EQUAL(wk_shard_batch(&s, 0, 0, 0, &d, x, y, &n), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "bad batch request"));
    CU_ASSERT_EQUAL(wk_shard_batch(&s, -1, 0, 4, &d, x, y, &n), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_shard_batch(&s, 0, -1, 4, &d, x, y, &n), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_shard_slice(&s, 0, -1, 4, &d, x, y, &n), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_shard_batch(&s, 0, 0, 4, &other, x, y, &n),
                    HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "data shard: made for 10 "
                                  "samples but the data set synthetic holds "
                                  "11"));
    CU_ASSERT_EQUAL(wk_shard_batch(&s, 0, 1, 4, &d, x, y, &n), HC_OK);
    CU_ASSERT_EQUAL(n, 1);                                      /* 5 = 4+1 */
    wk_shard_free(&s);

    /* wk_data_batch: file order, cut at the end. */
    CU_ASSERT_EQUAL(wk_data_batch(&d, 8, 4, x, y), 2);
    CU_ASSERT_EQUAL(y[0], 8);
    CU_ASSERT_EQUAL(y[1], 9);
    CU_ASSERT_EQUAL(x[2], 9.0f);
    CU_ASSERT_EQUAL(wk_data_batch(&d, 10, 4, x, y), 0);
    CU_ASSERT_EQUAL(wk_data_batch(&d, 0, 3, x, y), 3);
    CU_ASSERT_EQUAL(y[2], 2);
    wk_data_free(&d);
    wk_data_free(&other);
}

/* A streamed source that reads nothing but records where it was asked:
 * the counts past 2^31 checked as numbers, no file written. */
static long long asked_start;
static int asked_count, asked_epoch;

static int fake_read(void *ctx, long long start, int count, float *x,
                     int32_t *y)
{
    (void)ctx;
    (void)x;
    (void)y;
    asked_epoch = -1;
    asked_start = start;
    asked_count = count;
    return HC_OK;
}

static int fake_read_epoch(void *ctx, int epoch, long long start, int count,
                           float *x, int32_t *y)
{
    int rv = fake_read(ctx, start, count, x, y);

    asked_epoch = epoch;
    return rv;
}

/* floor(k · N / K), independently of data.c's arithmetic. */
static long long part_of(long long N, int K, int k)
{
    return (long long)((__int128)k * N / K);
}

static void test_streamed_counts(void)
{
    static const struct {
        long long N;
        int K, B;
    } t[] = {
        {(1LL << 32) + 1000, 3, 512},
        {(1LL << 32) + 1000, 1, 1},         /* a part past 2^32 batches */
        {(1LL << 40) + 3, 7, 100000},
        {4400000000LL, 2, 7},               /* Criteo Terabyte's size */
    };
    struct wk_dataset d;
    struct wk_shard s;
    float x[4];
    int32_t y[4];
    int n;

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        long long next = 0;

        memset(&d, 0, sizeof d);
        d.n = t[i].N;
        snprintf(d.images_path, sizeof d.images_path, "big.tsv");
        d.src = (struct wk_data_source){ .read = fake_read,
                                         .read_epoch = fake_read_epoch };
        for (int k = 0; k < t[i].K; k++) {
            long long nb, last;

            CU_ASSERT_EQUAL_FATAL(wk_shard_init_for(&s, &d, t[i].K, k, 1),
                                  HC_OK);
            CU_ASSERT_PTR_NULL(s.order);
            CU_ASSERT_EQUAL(s.n_total, t[i].N);
            CU_ASSERT_EQUAL(s.first, part_of(t[i].N, t[i].K, k));
            CU_ASSERT_EQUAL(s.first, next);           /* parts adjoin */
            CU_ASSERT_EQUAL(s.n, part_of(t[i].N, t[i].K, k + 1) - s.first);
            next = s.first + s.n;
            nb = wk_shard_n_batches(&s, t[i].B);
            CU_ASSERT_EQUAL(nb, (s.n + t[i].B - 1) / t[i].B);
            last = s.n - (nb - 1) * t[i].B;
            /* the last batch: its positions past 2^31, its size */
            CU_ASSERT_EQUAL(wk_shard_batch(&s, 2, nb - 1, t[i].B, &d, x, y,
                                           &n), HC_OK);
            CU_ASSERT_EQUAL(n, last);
            CU_ASSERT_EQUAL(asked_epoch, 2);
            CU_ASSERT_EQUAL(asked_start, s.first + (nb - 1) * t[i].B);
            CU_ASSERT_EQUAL(asked_count, last);
            n = -1;
            CU_ASSERT_EQUAL(wk_shard_batch(&s, 2, nb, t[i].B, &d, x, y, &n),
                            HC_OK);
            CU_ASSERT_EQUAL(n, 0);                    /* past the end */
            /* the shards' 32-bit place: refused only past 2^32 − 1
             * batches, naming the file, the batch size and the count */
            if (nb > 4294967295LL) {
                char want[160];

                CU_ASSERT_EQUAL(wk_shard_check_place(&s, t[i].B, "big.tsv"),
                                HC_ERR_LIMIT);
                snprintf(want, sizeof want, "big.tsv: worker %d of %d's "
                         "part holds %lld samples, %lld batches of %d", k,
                         t[i].K, s.n, nb, t[i].B);
                if (!strstr(hc_err_msg(), want))
                    printf("\n  %s\n", hc_err_msg());
                CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), want));
                CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "at least 2"));
                CU_ASSERT_EQUAL(wk_shard_check_place(&s, 2, "big.tsv"), HC_OK);
            } else {
                CU_ASSERT_EQUAL(wk_shard_check_place(&s, t[i].B, "big.tsv"),
                                HC_OK);
            }
            wk_shard_free(&s);
        }
        CU_ASSERT_EQUAL(next, t[i].N);              /* every line once */
        /* evaluation reads in file order past 2^31 */
        CU_ASSERT_EQUAL(wk_data_batch(&d, t[i].N - 3, 4, x, y), 3);
        CU_ASSERT_EQUAL(asked_epoch, -1);
        CU_ASSERT_EQUAL(asked_start, t[i].N - 3);
        CU_ASSERT_EQUAL(wk_data_batch(&d, t[i].N, 4, x, y), 0);
    }

    /* exactly 2^32 batches: one past the place's count */
    memset(&d, 0, sizeof d);
    d.n = 1LL << 33;
    d.src.read = fake_read;
    CU_ASSERT_EQUAL_FATAL(wk_shard_init_for(&s, &d, 1, 0, 1), HC_OK);
    CU_ASSERT_EQUAL(wk_shard_check_place(&s, 2, "f"), HC_ERR_LIMIT);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "4294967296 batches of 2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "at least 3"));
    CU_ASSERT_EQUAL(wk_shard_check_place(&s, 3, "f"), HC_OK);
    wk_shard_free(&s);

    /* a shuffled shard (a set loaded whole) indexes in 32 bits: refused */
    CU_ASSERT_EQUAL(wk_shard_init(&s, 1LL << 31, 2, 0, 1), HC_ERR_LIMIT);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "2147483648 samples"));
    CU_ASSERT_PTR_NULL(s.order);
}

/* Metrics and predictions hold every output: a bound named, not an
 * allocation of gigabytes that fails (or worse, succeeds). */
static void test_eval_bound(void)
{
    struct wk_dataset d;
    struct hc_model m;

    memset(&d, 0, sizeof d);
    memset(&m, 0, sizeof m);
    snprintf(d.images_path, sizeof d.images_path, "val.tsv");
    d.n = WK_EVAL_HELD_MAX;
    CU_ASSERT_EQUAL(WK_EVAL_HELD_MAX, 268435456LL);
    CU_ASSERT_EQUAL(wk_eval_held_fits(&d, "predict"), HC_OK);
    d.n = 4400000000LL;
    CU_ASSERT_EQUAL(wk_eval_held_fits(&d, "predict"), HC_ERR_LIMIT);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "val.tsv: 4400000000 "
                                  "samples; predict holds every sample's "
                                  "outputs at once, at most 268435456"));
    /* accuracy alone streams: no bound */
    m.n_metrics = 1;
    m.metrics[0].kind = HC_EM_ACCURACY;
    CU_ASSERT_EQUAL(wk_evaluate_metrics_fit(&m, &d), HC_OK);
    m.n_metrics = 2;
    m.metrics[1].kind = HC_EM_AUC;
    CU_ASSERT_EQUAL(wk_evaluate_metrics_fit(&m, &d), HC_ERR_LIMIT);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "val.tsv"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "metrics other than "
                                  "accuracy"));
    d.n = WK_EVAL_HELD_MAX + 1;
    CU_ASSERT_EQUAL(wk_evaluate_metrics_fit(&m, &d), HC_ERR_LIMIT);
    d.n = WK_EVAL_HELD_MAX;
    CU_ASSERT_EQUAL(wk_evaluate_metrics_fit(&m, &d), HC_OK);
}

static void test_fashion_mnist(void)
{
    static const int32_t first[5] = {9, 2, 1, 1, 6};
    struct wk_dataset d;
    int hist[10] = {0}, bad = 0;
    char path[512];

    snprintf(path, sizeof path, "%st10k-labels-idx1-ubyte.gz",
             WK_DATA_DEFAULT_DIR);
    if (access(path, R_OK) != 0)
        HP_SKIP("no Fashion-MNIST data");
    if (wk_data_load_dir(NULL, "t10k", &d) != HC_OK)
        printf("\n  %s\n", hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(d.n, 10000);
    CU_ASSERT_EQUAL(d.h, 28);
    CU_ASSERT_EQUAL(d.w, 28);
    CU_ASSERT_EQUAL(d.c, 1);
    CU_ASSERT_EQUAL(d.n_classes, 10);
    CU_ASSERT_EQUAL(wk_data_check_classes(&d, 10), HC_OK);
    for (int i = 0; i < d.n; i++) {
        if (d.y[i] < 0 || d.y[i] > 9)
            bad++;
        else
            hist[d.y[i]]++;
    }
    for (int c = 0; c < 10; c++)
        CU_ASSERT_EQUAL(hist[c], 1000);
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(d.y[i], first[i]);     /* ankle boot, pullover … */
    for (size_t i = 0; i < (size_t)d.n * 28 * 28; i++)
        bad += !(d.x[i] >= 0.0f && d.x[i] <= 1.0f);
    CU_ASSERT_EQUAL(bad, 0);
    wk_data_free(&d);
}

/* TMP/name: a float32 .npy of shape (n, d) with value base + 10·i + k at
 * row i, column k. */
static void write_f32(const char *name, int n, int d, float base)
{
    size_t shape[2] = {(size_t)n, (size_t)d};
    float *v = malloc((size_t)n * d * sizeof *v);
    char path[512];

    CU_ASSERT_FATAL(v != NULL);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < d; k++)
            v[i * d + k] = base + 10.0f * i + k;
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    CU_ASSERT_EQUAL_FATAL(hc_npy_write_f32(path, shape, 2, v), HC_OK);
    free(v);
}

/* TMP/name: int64 labels 0 … n − 1, an .npy written by hand (version
 * 1.0, a header padded to 128 bytes). */
static void write_labels(const char *name, int n)
{
    char path[512], hdr[128];
    int len;
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", tmp, name);
    memset(hdr, ' ', sizeof hdr);
    len = snprintf(hdr, sizeof hdr, "\x93NUMPY\x01%c%c%c{'descr': '<i8', "
                   "'fortran_order': False, 'shape': (%d,), }", 0, 118, 0,
                   n);
    hdr[len] = ' ';
    hdr[127] = '\n';
    f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fwrite(hdr, 1, sizeof hdr, f);
    for (int64_t i = 0; i < n; i++)
        fwrite(&i, sizeof i, 1, f);
    fclose(f);
}

/* in with each '@' replaced by the temporary directory, into out. */
static void at_tmp(const char *in, char *out, size_t len)
{
    size_t at = 0;

    out[0] = '\0';
    for (; *in && at + 300 < len; in++)
        at += (size_t)(*in == '@' ? snprintf(out + at, len - at, "%s", tmp)
                                  : snprintf(out + at, len - at, "%c", *in));
}

static void test_inputs(void)
{
    static const char *const names[] = {"image", "vector"};
    struct wk_dataset d;
    struct wk_shard sh;
    char spec[2048];
    float row[7 * 3];
    int32_t y[3];
    int n;

    write_f32("img.npy", 5, 4, 0);          /* (5, 4): 2×2 images flat */
    write_f32("vec.npy", 5, 3, 1000);
    write_f32("vec4.npy", 4, 3, 1000);
    write_labels("y.npy", 5);
    snprintf(spec, sizeof spec, "vector=%s/vec.npy,image=%s/img.npy,%s/y.npy",
             tmp, tmp, tmp);
    n = wk_data_load_inputs(spec, names, 2, 1, "--data", &d);
    if (n)
        printf("\n    %s", hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(n, HC_OK);
    CU_ASSERT_EQUAL(d.n, 5);
    CU_ASSERT_EQUAL(d.c, 7);
    CU_ASSERT_EQUAL(d.n_inputs, 2);
    CU_ASSERT_STRING_EQUAL(d.inputs[0].name, "image");
    CU_ASSERT_EQUAL(d.inputs[0].off, 0);
    CU_ASSERT_EQUAL(d.inputs[0].w, 4);
    CU_ASSERT_STRING_EQUAL(d.inputs[1].name, "vector");
    CU_ASSERT_EQUAL(d.inputs[1].off, 4);
    CU_ASSERT_EQUAL(d.inputs[1].w, 3);
    CU_ASSERT_EQUAL(d.x[2 * 7 + 1], 21.0f);     /* image of sample 2 */
    CU_ASSERT_EQUAL(d.x[2 * 7 + 4], 1020.0f);   /* its vector */
    CU_ASSERT_EQUAL(d.y[4], 4);
    /* A shuffled shard's rows keep each sample's image, vector and
     * label together. */
    CU_ASSERT_EQUAL_FATAL(wk_shard_init(&sh, d.n, 2, 1, 9), HC_OK);
    CU_ASSERT_EQUAL(wk_shard_batch(&sh, 0, 0, 3, &d, row, y, &n), HC_OK);
    CU_ASSERT_EQUAL(n, 2);
    for (int i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(row[i * 7], 10.0f * y[i]);
        CU_ASSERT_EQUAL(row[i * 7 + 4], 1000.0f + 10.0f * y[i]);
        CU_ASSERT_EQUAL(y[i] % 2, 1);
    }
    wk_shard_free(&sh);
    wk_data_free(&d);
    /* One input, named as the model names it. */
    snprintf(spec, sizeof spec, "vector=%s/vec.npy,%s/y.npy", tmp, tmp);
    CU_ASSERT_EQUAL(wk_data_load_inputs(spec, names + 1, 1, 1, "--data",
                                        &d), HC_OK);
    CU_ASSERT_EQUAL(d.n_inputs, 1);
    CU_ASSERT_EQUAL(d.c, 3);
    CU_ASSERT_EQUAL(d.x[3], 1010.0f);
    wk_data_free(&d);
    /* Predict: no labels needed. */
    snprintf(spec, sizeof spec, "image=%s/img.npy,vector=%s/vec.npy", tmp,
             tmp);
    CU_ASSERT_EQUAL(wk_data_load_inputs(spec, names, 2, 0, "--images", &d),
                    HC_OK);
    CU_ASSERT_PTR_NULL(d.y);
    wk_data_free(&d);

    {
        static const struct { const char *spec, *want; int code; } bad[] = {
            {"image=@/img.npy,@/y.npy", "no array for input vector; the "
             "model's inputs are image, vector: give image=X_image.npy,"
             "vector=X_vector.npy,Y.npy", HC_ERR_DATA},
            {"image=@/img.npy,meta=@/vec.npy,@/y.npy", "\"meta\" is not an "
             "input of the model; its inputs are image, vector", HC_ERR_DATA},
            {"image=@/img.npy,image=@/img.npy,vector=@/vec.npy,@/y.npy",
             "input image is given twice", HC_ERR_DATA},
            {"image=@/img.npy,vector=@/vec4.npy,@/y.npy", "input vector "
             "(@/vec4.npy) has 4 samples but input image (@/img.npy) has 5",
             HC_ERR_DATA},
            {"image=@/img.npy,vector=@/vec.npy", "no labels file; give it "
             "last, without a name", HC_ERR_DATA},
            {"@/img.npy,@/y.npy", "names no input; the model's inputs are "
             "image, vector", HC_ERR_INVAL},
            {"image=,vector=@/vec.npy,@/y.npy", "input image has no file",
             HC_ERR_INVAL},
            {"image=@/nope.npy,vector=@/vec.npy,@/y.npy", "--data: input "
             "image: @/nope.npy", HC_ERR_NOTFOUND},
        };

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char want[512];
            int rv;

            at_tmp(bad[i].spec, spec, sizeof spec);
            at_tmp(bad[i].want, want, sizeof want);
            rv = wk_data_load_inputs(spec, names, 2, 1, "--data", &d);
            printf("\n    case %zu: %s", i, hc_err_msg());
            CU_ASSERT_EQUAL(rv, bad[i].code);
            CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), want));
            CU_ASSERT_PTR_NULL(d.x);
        }
    }
}

static int suite_init(void)
{
    hp_tmpdir(tmp, sizeof tmp);
    for (size_t i = 0; i < sizeof pixels; i++)
        pixels[i] = (unsigned char)(i * 37 % 256);
    pixels[0] = 0;
    pixels[sizeof pixels - 1] = 255;
    return 0;
}

static int suite_clean(void)
{
    hp_rmtree(tmp);
    return 0;
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("data", suite_init, suite_clean);

    CU_add_test(s, "load small IDX files (plain, gzip)", test_load_small);
    CU_add_test(s, "load a directory", test_load_dir);
    CU_add_test(s, "malformed files", test_bad_files);
    CU_add_test(s, "images without labels", test_load_images);
    CU_add_test(s, "shards disjoint and complete", test_shards_cover);
    CU_add_test(s, "per-epoch shuffle", test_shuffle);
    CU_add_test(s, "shuffle as documented", test_shuffle_documented);
    CU_add_test(s, "shard errors and eval batches", test_shard_errors);
    CU_add_test(s, "shuffle false: the strided order", test_file_order);
    CU_add_test(s, "several inputs: packed rows, shards, refusals",
                test_inputs);
    CU_add_test(s, "streamed counts past 2^31, as numbers",
                test_streamed_counts);
    CU_add_test(s, "metrics' and predictions' bound", test_eval_bound);
    CU_add_test(s, "Fashion-MNIST t10k", test_fashion_mnist);
}
