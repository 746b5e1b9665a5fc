/*
 * data.c — IDX files into memory, and a worker's shuffled shard of them.
 *
 * An IDX file is a 4-byte big-endian magic (0, 0, element type, number of
 * dimensions), one big-endian u32 per dimension, then the elements. Both
 * files of a pair are opened and their headers checked (counts agreeing)
 * before any body is read, so a mismatch is reported at once; the bodies are
 * then streamed through a fixed buffer and converted (pixels to floats in
 * [0, 1], labels to int32). An images file may also be loaded alone
 * (prediction), with the same checks. Every error names the file and says what was
 * expected. The shard's shuffle and batching are documented in data.h.
 */
#include "data.h"
#include "err.h"
#include "rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_TYPE_U8     0x08
#define IDX_IMAGES      0x00000803u
#define IDX_LABELS      0x00000801u
#define IDX_MAX_ELEMS   (1ull << 33)    /* 8 Gi pixels: 32 GiB of floats */
#define CHUNK           (1u << 16)

/* One open IDX file and what its header said. */
struct idx {
    const char *path;
    const char *kind;       /* "images" or "labels", for messages */
    gzFile gz;
    int ndims;
    uint32_t dims[3];
    uint64_t elems;         /* product of dims */
};

/* Read up to len bytes; returns the count, or -1 on a read error. */
static long long read_full(gzFile gz, void *buf, size_t len)
{
    size_t got = 0;

    while (got < len) {
        size_t want = len - got < (1u << 30) ? len - got : (1u << 30);
        int n = gzread(gz, (char *)buf + got, (unsigned)want);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (long long)got;
}

/* zlib's last error on gz, without the path it prefixes; "" when none.
 * *sys is set when it was a system (errno) error. */
static const char *gz_why(gzFile gz, const char *path, int *sys)
{
    int code = Z_OK;
    const char *msg = gzerror(gz, &code);
    size_t n = strlen(path);

    *sys = code == Z_ERRNO;
    if (code == Z_ERRNO)
        return strerror(errno);
    if (code == Z_OK || !msg)
        return "";
    if (strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0)
        msg += n + 2;
    return msg;
}

static int read_error(const struct idx *f)
{
    int sys;
    const char *why = gz_why(f->gz, f->path, &sys);

    if (sys)
        return hc_err_set(HC_ERR_IO, "%s file %s: read failed: %s", f->kind,
                          f->path, why);
    return hc_err_set(HC_ERR_DATA, "%s file %s: corrupt gzip data: %s",
                      f->kind, f->path, why);
}

/* Exactly len bytes of the header, or a "truncated header" error. */
static int read_header(struct idx *f, void *buf, size_t len, size_t done)
{
    long long n = read_full(f->gz, buf, len);

    if (n < 0)
        return read_error(f);
    if ((size_t)n < len) {
        if (done + (size_t)n == 0)
            return hc_err_set(HC_ERR_DATA, "%s file %s is empty", f->kind,
                              f->path);
        return hc_err_set(HC_ERR_DATA, "%s file %s: truncated header: "
                          "expected %zu bytes, got %zu", f->kind, f->path,
                          done + len, done + (size_t)n);
    }
    return HC_OK;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | p[3];
}

/* Open f->path and check its header against an IDX images (want_dims 3) or
 * labels (want_dims 1) file of unsigned bytes. */
static int idx_open(struct idx *f, int want_dims)
{
    const uint32_t want = want_dims == 3 ? IDX_IMAGES : IDX_LABELS;
    const char *other = want_dims == 3 ? "labels" : "images";
    unsigned char hdr[12];
    uint32_t magic;
    int rv;

    if (!(f->gz = gzopen(f->path, "rb"))) {
        int e = errno ? errno : ENOMEM;
        return hc_err_set(e == ENOENT ? HC_ERR_NOTFOUND : HC_ERR_IO,
                          "%s file %s: cannot open: %s", f->kind, f->path,
                          strerror(e));
    }
    if ((rv = read_header(f, hdr, 4, 0)))
        return rv;
    magic = be32(hdr);
    if (hdr[0] != 0 || hdr[1] != 0)
        return hc_err_set(HC_ERR_DATA, "%s file %s is not an IDX file "
                          "(magic 0x%08x, expected 0x%08x)", f->kind, f->path,
                          magic, want);
    if (hdr[2] != IDX_TYPE_U8)
        return hc_err_set(HC_ERR_DATA, "%s file %s holds IDX element type "
                          "0x%02x (magic 0x%08x); expected unsigned bytes, "
                          "type 0x08 (magic 0x%08x)", f->kind, f->path,
                          hdr[2], magic, want);
    f->ndims = hdr[3];
    if (f->ndims == 4 - want_dims)      /* 1 ↔ 3: the other kind */
        return hc_err_set(HC_ERR_DATA, "%s file %s is an IDX %s file (magic "
                          "0x%08x), expected %s (magic 0x%08x); are the "
                          "images and labels files swapped?", f->kind,
                          f->path, other, magic, f->kind, want);
    if (f->ndims != want_dims)
        return hc_err_set(HC_ERR_DATA, "%s file %s has %d dimensions (magic "
                          "0x%08x); expected %d (magic 0x%08x)%s", f->kind,
                          f->path, f->ndims, magic, want_dims, want,
                          want_dims == 3 ? ": (N, rows, cols)" : ": (N)");
    if ((rv = read_header(f, hdr, 4u * (unsigned)want_dims, 4)))
        return rv;
    f->elems = 1;
    for (int i = 0; i < want_dims; i++) {
        f->dims[i] = be32(hdr + 4 * i);
        if (f->dims[i] > INT32_MAX ||
            (f->dims[i] && f->elems > IDX_MAX_ELEMS / f->dims[i]))
            return hc_err_set(HC_ERR_DATA, "%s file %s: dimensions too large "
                              "(more than %llu elements)", f->kind, f->path,
                              IDX_MAX_ELEMS);
        f->elems *= f->dims[i];
    }
    if (f->dims[0] == 0)
        return hc_err_set(HC_ERR_DATA, "%s file %s holds no samples (N = 0)",
                          f->kind, f->path);
    if (f->elems == 0)
        return hc_err_set(HC_ERR_DATA, "%s file %s: images of %u x %u "
                          "pixels are empty", f->kind, f->path, f->dims[1],
                          f->dims[2]);
    return HC_OK;
}

/* After the body: a short body is truncated, a longer file has trailing
 * bytes. got is what was read of the body. */
static int idx_finish(struct idx *f, uint64_t got)
{
    char extra;
    long long n;

    if (got < f->elems) {
        int sys;
        const char *why = gz_why(f->gz, f->path, &sys);
        return hc_err_set(HC_ERR_DATA, "%s file %s is truncated: expected "
                          "%llu bytes of data after the header, got %llu%s%s",
                          f->kind, f->path, (unsigned long long)f->elems,
                          (unsigned long long)got, *why ? "; gzip: " : "",
                          why);
    }
    if ((n = read_full(f->gz, &extra, 1)) < 0)
        return read_error(f);
    if (n > 0)
        return hc_err_set(HC_ERR_DATA, "%s file %s has trailing bytes after "
                          "the %u samples its header announces", f->kind,
                          f->path, f->dims[0]);
    return HC_OK;
}

static void idx_close(struct idx *f)
{
    if (f->gz)
        gzclose(f->gz);
    f->gz = NULL;
}

/* Make room for `need` elements of `size` bytes in *p (capacity *cap),
 * growing geometrically but never past f->elems: the arrays grow with the
 * data actually read, so a header that announces more than the file holds
 * costs no more memory than the file's own size. */
static int idx_grow(const struct idx *f, void **p, uint64_t *cap,
                    uint64_t need, size_t size)
{
    uint64_t c = *cap ? *cap : CHUNK;
    void *q;

    if (need <= *cap)
        return HC_OK;
    while (c < need)
        c *= 2;
    if (c > f->elems)
        c = f->elems;
    if (!(q = realloc(*p, (size_t)c * size)))
        return hc_err_set(HC_ERR_NOMEM, "%s file %s: out of memory for %llu "
                          "elements", f->kind, f->path, (unsigned long long)c);
    *p = q;
    *cap = c;
    return HC_OK;
}

/* Stream the body of f, converting each byte: pixels to *x (if x) else
 * labels to *y, each array allocated here (grown as the data arrives). */
static int idx_body(struct idx *f, unsigned char *buf, float **x, int32_t **y)
{
    float lut[256];
    uint64_t got = 0, cap = 0;
    int rv;

    for (int i = 0; i < 256; i++)
        lut[i] = (float)(i / 255.0);
    while (got < f->elems) {
        uint64_t left = f->elems - got;
        size_t want = left < CHUNK ? (size_t)left : CHUNK;
        long long n = read_full(f->gz, buf, want);
        if (n < 0)
            return read_error(f);
        rv = x ? idx_grow(f, (void **)x, &cap, got + (uint64_t)n, sizeof **x)
               : idx_grow(f, (void **)y, &cap, got + (uint64_t)n, sizeof **y);
        if (rv != HC_OK)
            return rv;
        for (long long i = 0; i < n; i++) {
            if (x)
                (*x)[got + (uint64_t)i] = lut[buf[i]];
            else
                (*y)[got + (uint64_t)i] = buf[i];
        }
        got += (uint64_t)n;
        if ((size_t)n < want)
            break;
    }
    return idx_finish(f, got);
}

void wk_data_free(struct wk_dataset *d)
{
    if (!d)
        return;
    if (d->src.close)
        d->src.close(d->src.ctx);
    if (d->map)
        munmap(d->map, d->map_len);
    else
        free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

/* Both files (labels_path set) or the images alone (labels_path NULL:
 * d.y stays NULL). */
static int load(const char *images_path, const char *labels_path,
                struct wk_dataset *out)
{
    struct idx im = {.path = images_path, .kind = "images"};
    struct idx lb = {.path = labels_path, .kind = "labels"};
    struct wk_dataset d = {0};
    unsigned char *buf = NULL;
    int rv;

    if ((rv = idx_open(&im, 3)) || (labels_path && (rv = idx_open(&lb, 1))))
        goto out;
    if (labels_path && im.dims[0] != lb.dims[0]) {
        rv = hc_err_set(HC_ERR_DATA, "images file %s holds %u images but "
                        "labels file %s holds %u labels; they must be a "
                        "matching pair", im.path, im.dims[0], lb.path,
                        lb.dims[0]);
        goto out;
    }
    d.n = (int)im.dims[0];
    d.h = (int)im.dims[1];
    d.w = (int)im.dims[2];
    d.c = 1;
    snprintf(d.images_path, sizeof d.images_path, "%s", images_path);
    if (labels_path)
        snprintf(d.labels_path, sizeof d.labels_path, "%s", labels_path);
    if (!(buf = malloc(CHUNK))) {
        rv = hc_err_set(HC_ERR_NOMEM, "images file %s: out of memory",
                        images_path);
        goto out;
    }
    if ((labels_path && (rv = idx_body(&lb, buf, NULL, &d.y))) ||
        (rv = idx_body(&im, buf, &d.x, NULL)))
        goto out;
    for (int i = 0; labels_path && i < d.n; i++)
        if (d.y[i] + 1 > d.n_classes)
            d.n_classes = d.y[i] + 1;
    *out = d;
    memset(&d, 0, sizeof d);
out:
    free(buf);
    idx_close(&im);
    idx_close(&lb);
    wk_data_free(&d);
    return rv;
}

int wk_data_load(const char *images_path, const char *labels_path,
                 struct wk_dataset *out)
{
    if (!out)
        return hc_err_set(HC_ERR_INVAL, "wk_data_load: NULL output");
    memset(out, 0, sizeof *out);
    if (!images_path || !labels_path)
        return hc_err_set(HC_ERR_INVAL, "wk_data_load: NULL path");
    return load(images_path, labels_path, out);
}

int wk_data_load_images(const char *images_path, struct wk_dataset *out)
{
    if (!out)
        return hc_err_set(HC_ERR_INVAL, "wk_data_load_images: NULL output");
    memset(out, 0, sizeof *out);
    if (!images_path)
        return hc_err_set(HC_ERR_INVAL, "wk_data_load_images: NULL path");
    return load(images_path, NULL, out);
}

/* dir/NAME.gz if it exists, else dir/NAME. */
static int pick_file(const char *dir, const char *name, char *path,
                     size_t len)
{
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/";

    if ((size_t)snprintf(path, len, "%s%s%s.gz", dir, sep, name) >= len)
        return hc_err_set(HC_ERR_INVAL, "data directory %s: path too long",
                          dir);
    if (access(path, F_OK) == 0)
        return HC_OK;
    snprintf(path, len, "%s%s%s", dir, sep, name);
    if (access(path, F_OK) == 0)
        return HC_OK;
    return hc_err_set(HC_ERR_NOTFOUND, "data directory %s has no %s(.gz); "
                      "install Debian's dataset-fashion-mnist package or "
                      "point to a directory holding the IDX files", dir,
                      name);
}

int wk_data_dir_paths(const char *dir, const char *which, char *images,
                      char *labels)
{
    char name[64];
    int rv;

    if (!dir)
        dir = WK_DATA_DEFAULT_DIR;
    if (!which || (strcmp(which, "train") && strcmp(which, "t10k") &&
                   strcmp(which, "test")))
        return hc_err_set(HC_ERR_INVAL, "data set \"%s\": use \"train\" or "
                          "\"t10k\" (test)", which ? which : "(null)");
    if (strcmp(which, "test") == 0)
        which = "t10k";
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", which);
    if ((rv = pick_file(dir, name, images, WK_DATA_PATH_MAX)))
        return rv;
    if (!labels)
        return HC_OK;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", which);
    return pick_file(dir, name, labels, WK_DATA_PATH_MAX);
}

int wk_data_load_dir(const char *dir, const char *which,
                     struct wk_dataset *out)
{
    char images[WK_DATA_PATH_MAX], labels[WK_DATA_PATH_MAX];
    int rv;

    if (!out)
        return hc_err_set(HC_ERR_INVAL, "wk_data_load_dir: NULL output");
    memset(out, 0, sizeof *out);
    if ((rv = wk_data_dir_paths(dir, which, images, labels)))
        return rv;
    return wk_data_load(images, labels, out);
}

int wk_data_check_classes(const struct wk_dataset *d, int n_classes)
{
    for (long long i = 0; d->y && i < d->n; i++)
        if (d->y[i] >= n_classes)
            return hc_err_set(HC_ERR_DATA, "labels file %s: label %d of "
                              "sample %lld is not below the model's %d "
                              "classes", d->labels_path, d->y[i], i,
                              n_classes);
    return HC_OK;
}

int wk_data_batch(const struct wk_dataset *d, long long start, int count,
                  float *x_out, int32_t *y_out)
{
    size_t px = (size_t)d->h * (size_t)d->w * (size_t)d->c;

    if (start < 0 || count < 0 || start >= d->n)
        return 0;
    if (count > d->n - start)
        count = (int)(d->n - start);
    if (d->src.read) {
        int rv = d->src.read(d->src.ctx, start, count, x_out, y_out);

        return rv == HC_OK ? count : -rv;
    }
    memcpy(x_out, d->x + (size_t)start * px, (size_t)count * px * sizeof *x_out);
    if (y_out && d->y)
        memcpy(y_out, d->y + start, (size_t)count * sizeof *y_out);
    return count;
}

/* ---- shards ---------------------------------------------------------------- */


/* Put the shard's samples in epoch's order (see data.h). */
static void shuffle(struct wk_shard *s, int epoch)
{
    uint64_t state = hc_mix64(s->seed ^
                           hc_mix64((uint64_t)epoch * HC_GOLDEN_GAMMA ^
                                 hc_mix64((uint64_t)s->index + 1)));

    s->epoch = epoch;
    for (int j = 0; j < s->n; j++)      /* n ≤ INT32_MAX (wk_shard_init) */
        s->order[j] = s->index + j * s->n_shards;
    if (s->file_order)
        return;
    for (int i = (int)s->n - 1; i > 0; i--) {
        int j = (int)hc_rng_below(&state, (uint64_t)i + 1);
        int32_t t = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = t;
    }
}

/* floor(k · n / parts), k ≤ parts, without overflowing 64 bits. */
static long long part_start(long long n, int parts, int k)
{
    return (long long)k * (n / parts) + (long long)k * (n % parts) / parts;
}

/* The checks of wk_shard_init (data.h); s zeroed. */
static int shard_args(struct wk_shard *s, long long n_total, int n_shards,
                      int shard_index)
{
    if (!s)
        return hc_err_set(HC_ERR_INVAL, "wk_shard_init: NULL shard");
    memset(s, 0, sizeof *s);
    if (n_total < 1)
        return hc_err_set(HC_ERR_INVAL, "data shard: the data set holds %lld "
                          "samples; need at least one", n_total);
    if (n_shards < 1 || shard_index < 0 || shard_index >= n_shards)
        return hc_err_set(HC_ERR_INVAL, "data shard %d of %d: need 0 <= "
                          "index < shards", shard_index, n_shards);
    if (n_shards > n_total)
        return hc_err_set(HC_ERR_INVAL, "data shard %d of %d: %lld samples "
                          "leave some shards empty; use at most %lld workers",
                          shard_index, n_shards, n_total, n_total);
    return HC_OK;
}

int wk_shard_init(struct wk_shard *s, long long n_total, int n_shards,
                  int shard_index, uint64_t seed)
{
    int rv = shard_args(s, n_total, n_shards, shard_index);

    if (rv != HC_OK)
        return rv;
    if (n_total > INT32_MAX)
        return hc_err_set(HC_ERR_LIMIT, "data shard: %lld samples; a "
                          "shuffled shard of a set loaded whole indexes at "
                          "most 2^31 − 1", n_total);
    s->n_total = n_total;
    s->n_shards = n_shards;
    s->index = shard_index;
    s->seed = seed;
    s->n = n_total / n_shards + (shard_index < n_total % n_shards);
    s->epoch = -1;
    if (!(s->order = malloc((size_t)s->n * sizeof *s->order)))
        return hc_err_set(HC_ERR_NOMEM, "data shard: out of memory for %lld "
                          "indices", s->n);
    return HC_OK;
}

int wk_shard_init_parts(struct wk_shard *s, long long n_total, int n_shards,
                        int shard_index)
{
    int rv = shard_args(s, n_total, n_shards, shard_index);

    if (rv != HC_OK)
        return rv;
    s->n_total = n_total;
    s->n_shards = n_shards;
    s->index = shard_index;
    s->epoch = -1;
    /* floor(k · N / K) without overflow: N = q·K + r, so k·N/K is
     * k·q + floor(k·r / K), and k·r < K² < 2^62 */
    s->first = part_start(n_total, n_shards, shard_index);
    s->n = part_start(n_total, n_shards, shard_index + 1) - s->first;
    return HC_OK;
}

int wk_shard_init_for(struct wk_shard *s, const struct wk_dataset *d,
                      int n_shards, int shard_index, uint64_t seed)
{
    if (d->src.read)
        return wk_shard_init_parts(s, d->n, n_shards, shard_index);
    return wk_shard_init(s, d->n, n_shards, shard_index, seed);
}

long long wk_shard_n_batches(const struct wk_shard *s, int batch_size)
{
    if (batch_size < 1)
        return 0;
    return s->n / batch_size + (s->n % batch_size != 0);
}

int wk_shard_check_place(const struct wk_shard *s, int batch_size,
                         const char *what)
{
    long long nb = wk_shard_n_batches(s, batch_size);

    if (nb <= WK_SHARD_PLACE_MAX)
        return HC_OK;
    return hc_err_set(HC_ERR_LIMIT, "%s: worker %d of %d's part holds %lld "
                      "samples, %lld batches of %d; the shards record a "
                      "worker's place in an epoch as a 32-bit count of "
                      "batches, at most %lld: use a batch size of at least "
                      "%lld, or more workers", what, s->index, s->n_shards,
                      s->n, nb, batch_size, WK_SHARD_PLACE_MAX,
                      (s->n + WK_SHARD_PLACE_MAX - 1) / WK_SHARD_PLACE_MAX);
}

int wk_shard_batch(struct wk_shard *s, int epoch, long long batch_index,
                   int batch_size, const struct wk_dataset *d, float *x_out,
                   int32_t *y_out, int *n_out)
{
    *n_out = 0;
    if (batch_size < 1 || batch_index < 0)
        return hc_err_set(HC_ERR_INVAL, "data shard: bad batch request "
                          "(epoch %d, batch %lld of size %d)", epoch,
                          batch_index, batch_size);
    return wk_shard_slice(s, epoch, batch_index * batch_size,
                          batch_size, d, x_out, y_out, n_out);
}

int wk_shard_slice(struct wk_shard *s, int epoch, long long start,
                   int batch_size, const struct wk_dataset *d, float *x_out,
                   int32_t *y_out, int *n_out)
{
    size_t px;
    int count;

    *n_out = 0;
    if (!s->n_total || !d || batch_size < 1 || epoch < 0 || start < 0)
        return hc_err_set(HC_ERR_INVAL, "data shard: bad batch request "
                          "(epoch %d, start %lld, size %d)", epoch, start,
                          batch_size);
    if (d->n != s->n_total)
        return hc_err_set(HC_ERR_INVAL, "data shard: made for %lld samples "
                          "but the data set %s holds %lld", s->n_total,
                          d->images_path, d->n);
    if (start >= s->n)
        return HC_OK;
    count = s->n - start < batch_size ? (int)(s->n - start) : batch_size;
    if (!s->order && d->src.read_epoch) {   /* a part of the source's order */
        int rv = d->src.read_epoch(d->src.ctx, epoch, s->first + start,
                                   count, x_out, y_out);

        *n_out = rv == HC_OK ? count : 0;
        return rv;
    }
    if (!s->order) {            /* a part, in file order */
        int got = wk_data_batch(d, s->first + start, count, x_out, y_out);

        if (got < 0)
            return -got;
        *n_out = got;
        return HC_OK;
    }
    if (s->epoch != epoch)
        shuffle(s, epoch);
    px = (size_t)d->h * (size_t)d->w * (size_t)d->c;
    for (int k = 0; k < count; k++) {
        int32_t i = s->order[start + k];
        memcpy(x_out + (size_t)k * px, d->x + (size_t)i * px,
               px * sizeof *x_out);
        y_out[k] = d->y[i];
    }
    *n_out = count;
    return HC_OK;
}

void wk_shard_free(struct wk_shard *s)
{
    if (!s)
        return;
    free(s->order);
    memset(s, 0, sizeof *s);
}
