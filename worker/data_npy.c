/*
 * data_npy.c — training data from NumPy arrays: X.npy + Y.npy, or an .npz
 * holding x_train, y_train, x_test, y_test (see data.h).
 *
 * A file is memory-mapped, never read whole: float32 images are used in
 * place when they are aligned (the mapping is kept, and shared by every
 * process on the machine through the page cache); uint8 images are scaled
 * into a float copy. An .npz is a zip archive: its central directory
 * (zip64 sizes included) locates each member; a stored member (np.savez)
 * is read in the mapping, a deflated one (np.savez_compressed) inflated
 * with zlib; either is checked against its CRC-32.
 */
#include "data.h"
#include "err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* One parsed array. */
struct npy {
    char kind;              /* 'f', 'i', 'u', 'b' */
    int size;               /* bytes per element */
    int ndim;
    size_t shape[8];
    const unsigned char *data;
    size_t count;           /* elements */
};

/* A read-only mapping of a whole file. */
struct map {
    unsigned char *p;
    size_t len;
};

static int map_file(const char *path, struct map *m)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rv = HC_OK;

    m->p = NULL;
    m->len = 0;
    if (fd < 0)
        return hc_err_set(errno == ENOENT ? HC_ERR_NOTFOUND : HC_ERR_IO,
                          "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rv = hc_err_set(HC_ERR_IO, "%s: not a regular file", path);
    else if (st.st_size == 0)
        rv = hc_err_set(HC_ERR_DATA, "%s: empty file", path);
    else if ((m->p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE,
                          fd, 0)) == MAP_FAILED) {
        m->p = NULL;
        rv = hc_err_set(HC_ERR_IO, "%s: cannot map: %s", path,
                        strerror(errno));
    } else {
        m->len = (size_t)st.st_size;
    }
    close(fd);
    return rv;
}

static void unmap(struct map *m)
{
    if (m->p)
        munmap(m->p, m->len);
    m->p = NULL;
}

static uint32_t rd16(const unsigned char *b) { return b[0] | (uint32_t)b[1] << 8; }
static uint32_t rd32(const unsigned char *b)
{
    return rd16(b) | rd16(b + 2) << 16;
}
static uint64_t rd64(const unsigned char *b)
{
    return rd32(b) | (uint64_t)rd32(b + 4) << 32;
}

/* The value after 'key': in the header dict (NULL when absent). */
static const char *dict_value(const char *h, const char *key)
{
    const char *p = strstr(h, key);

    if (!p)
        return NULL;
    p += strlen(key);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
}

/* Parse the .npy in b[0, len); `name` names it in messages. */
static int npy_parse(const unsigned char *b, size_t len, const char *name,
                     struct npy *a)
{
    char h[4096];
    const char *v;
    size_t hlen, off, need;

    memset(a, 0, sizeof *a);
    if (len < 10 || memcmp(b, "\x93NUMPY", 6))
        return hc_err_set(HC_ERR_DATA, "%s: not a NumPy .npy array (no "
                          "\\x93NUMPY magic)", name);
    if (b[6] == 1) {
        hlen = rd16(b + 8);
        off = 10;
    } else if ((b[6] == 2 || b[6] == 3) && len >= 12) {
        hlen = rd32(b + 8);
        off = 12;
    } else {
        return hc_err_set(HC_ERR_DATA, "%s: .npy format version %d.%d is "
                          "not 1, 2 or 3", name, b[6], b[7]);
    }
    if (hlen >= sizeof h || off + hlen > len)
        return hc_err_set(HC_ERR_DATA, "%s: truncated .npy header", name);
    memcpy(h, b + off, hlen);
    h[hlen] = '\0';
    off += hlen;
    if (!(v = dict_value(h, "'descr'")) || (*v != '\'' && *v != '"') ||
        !strchr("<|=>", v[1]) || !strchr("fiub", v[2]))
        return hc_err_set(HC_ERR_DATA, "%s: the header's descr is not a "
                          "number type: %.60s", name, h);
    a->kind = v[2];
    a->size = atoi(v + 3);
    if (v[1] == '>' && a->size > 1)
        return hc_err_set(HC_ERR_DATA, "%s: big-endian data (%.6s): save it "
                          "little-endian (astype('<...'))", name, v + 1);
    if ((v = dict_value(h, "'fortran_order'")) && !strncmp(v, "True", 4))
        return hc_err_set(HC_ERR_DATA, "%s: Fortran order: save a C-order "
                          "array (np.ascontiguousarray)", name);
    if (!(v = dict_value(h, "'shape'")) || *v != '(')
        return hc_err_set(HC_ERR_DATA, "%s: the header has no shape", name);
    for (v++, a->count = 1; *v && *v != ')';) {
        char *end;
        unsigned long long d;

        while (*v == ' ' || *v == ',')
            v++;
        if (*v == ')')
            break;
        d = strtoull(v, &end, 10);
        if (end == v || a->ndim == 8)
            return hc_err_set(HC_ERR_DATA, "%s: bad shape in the header",
                              name);
        a->shape[a->ndim++] = (size_t)d;
        a->count *= (size_t)d;
        v = end;
    }
    need = a->count * (size_t)a->size;
    if (a->size < 1 || off + need > len)
        return hc_err_set(HC_ERR_DATA, "%s: truncated: its header promises "
                          "%zu bytes of data, the file holds %zu", name, need,
                          len - off);
    a->data = b + off;
    return HC_OK;
}

/* out's images from a: float32 used in place (the mapping given to out
 * when aligned) or uint8 scaled by 1/255. *keep = 1 when out->x points
 * into the mapping. */
static int take_images(const struct npy *a, const char *name,
                       struct wk_dataset *out, int *keep)
{
    size_t i;

    *keep = 0;
    if (a->ndim < 2 || a->ndim > 4 || a->shape[0] == 0 ||
        a->shape[0] > 0x7fffffff)
        return hc_err_set(HC_ERR_DATA, "%s: images must have shape (N, H, W), "
                          "(N, H, W, C) or (N, D) with N > 0; this has %d "
                          "dimension(s)", name, a->ndim);
    out->n = (int)a->shape[0];
    out->h = a->ndim >= 3 ? (int)a->shape[1] : 1;
    out->w = a->ndim >= 3 ? (int)a->shape[2] : (int)a->shape[1];
    out->c = a->ndim == 4 ? (int)a->shape[3] : 1;
    if (a->kind == 'f' && a->size == 4) {
        if (((uintptr_t)a->data & 3) == 0) {
            out->x = (float *)(uintptr_t)a->data;
            *keep = 1;
            return HC_OK;
        }
        if (!(out->x = malloc(a->count * sizeof *out->x)))
            return hc_err_set(HC_ERR_NOMEM, "%s: out of memory", name);
        memcpy(out->x, a->data, a->count * sizeof *out->x);
        return HC_OK;
    }
    if (a->kind == 'u' && a->size == 1) {
        if (!(out->x = malloc(a->count * sizeof *out->x)))
            return hc_err_set(HC_ERR_NOMEM, "%s: out of memory", name);
        for (i = 0; i < a->count; i++)
            out->x[i] = a->data[i] / 255.0f;
        return HC_OK;
    }
    return hc_err_set(HC_ERR_DATA, "%s: images are %c%d; use float32 (scaled "
                      "as the model expects) or uint8 (scaled here by 1/255)",
                      name, a->kind, 8 * a->size);
}

static int take_labels(const struct npy *a, const char *name,
                       struct wk_dataset *out)
{
    size_t i;

    if (a->kind != 'i' && a->kind != 'u')
        return hc_err_set(HC_ERR_DATA, "%s: labels are %c%d; use integers "
                          "(class indices, as sparse categorical "
                          "cross-entropy takes them)", name, a->kind,
                          8 * a->size);
    if (a->ndim != 1 && !(a->ndim == 2 && a->shape[1] == 1))
        return hc_err_set(HC_ERR_DATA, "%s: labels must have shape (N,); "
                          "this has %d dimension(s)", name, a->ndim);
    if (a->shape[0] != (size_t)out->n)
        return hc_err_set(HC_ERR_DATA, "%s: %zu labels for %lld images", name,
                          a->shape[0], out->n);
    if (a->size != 1 && a->size != 2 && a->size != 4 && a->size != 8)
        return hc_err_set(HC_ERR_DATA, "%s: %d-byte integers", name, a->size);
    if (!(out->y = malloc((size_t)out->n * sizeof *out->y)))
        return hc_err_set(HC_ERR_NOMEM, "%s: out of memory", name);
    out->n_classes = 0;
    for (i = 0; i < (size_t)out->n; i++) {
        const unsigned char *p = a->data + i * (size_t)a->size;
        int64_t v;

        switch (a->size) {
        case 1: v = a->kind == 'i' ? (int8_t)p[0] : p[0]; break;
        case 2: v = a->kind == 'i' ? (int16_t)rd16(p) : (int64_t)rd16(p); break;
        case 4: v = a->kind == 'i' ? (int32_t)rd32(p) : (int64_t)rd32(p); break;
        default: v = (int64_t)rd64(p); break;
        }
        if (v < 0 || v > 0x7fffffff)
            return hc_err_set(HC_ERR_DATA, "%s: label %lld of sample %zu is "
                              "not a class index (0 or more)", name,
                              (long long)v, i);
        out->y[i] = (int32_t)v;
        if (v + 1 > out->n_classes)
            out->n_classes = (int)v + 1;
    }
    return HC_OK;
}

int wk_data_load_npy(const char *x_path, const char *y_path,
                     struct wk_dataset *out)
{
    struct map mx = { 0 }, my = { 0 };
    struct npy ax, ay;
    int rv, keep = 0;

    memset(out, 0, sizeof *out);
    if ((rv = map_file(x_path, &mx)) != HC_OK ||
        (rv = npy_parse(mx.p, mx.len, x_path, &ax)) != HC_OK ||
        (rv = take_images(&ax, x_path, out, &keep)) != HC_OK)
        goto out;
    snprintf(out->images_path, sizeof out->images_path, "%s", x_path);
    if (y_path) {
        if ((rv = map_file(y_path, &my)) != HC_OK ||
            (rv = npy_parse(my.p, my.len, y_path, &ay)) != HC_OK ||
            (rv = take_labels(&ay, y_path, out)) != HC_OK)
            goto out;
        snprintf(out->labels_path, sizeof out->labels_path, "%s", y_path);
    }
out:
    unmap(&my);
    if (rv == HC_OK && keep) {
        out->map = mx.p;        /* x lies in it */
        out->map_len = mx.len;
        return HC_OK;
    }
    if (rv != HC_OK) {
        if (!keep)
            free(out->x);
        free(out->y);
        memset(out, 0, sizeof *out);
    }
    unmap(&mx);
    return rv;
}

/* Member `want` of the zip in m: its bytes (in the mapping, or inflated
 * into *owned). */
static int zip_member(const struct map *m, const char *path, const char *want,
                      const unsigned char **data, size_t *len,
                      unsigned char **owned)
{
    const unsigned char *b = m->p, *e = NULL, *c;
    size_t i, n, at;

    *owned = NULL;
    for (i = m->len >= 22 ? m->len - 22 : 0; m->len >= 22; i--) {
        if (rd32(b + i) == 0x06054b50) {
            e = b + i;
            break;
        }
        if (i == 0 || m->len - i > 65536 + 22)
            break;
    }
    if (!e)
        return hc_err_set(HC_ERR_DATA, "%s: not an .npz (zip) file, or "
                          "truncated: no end of central directory", path);
    n = rd16(e + 10);
    at = rd32(e + 16);
    for (i = 0; i < n; i++) {
        uint64_t csize, usize, loff;
        uint32_t method, crc, nlen, xlen, clen;
        const unsigned char *x, *l;

        if (at + 46 > m->len || rd32(b + at) != 0x02014b50)
            return hc_err_set(HC_ERR_DATA, "%s: damaged zip central directory",
                              path);
        c = b + at;
        method = rd16(c + 10);
        crc = rd32(c + 16);
        csize = rd32(c + 20);
        usize = rd32(c + 24);
        nlen = rd16(c + 28);
        xlen = rd16(c + 30);
        clen = rd16(c + 32);
        loff = rd32(c + 42);
        if (at + 46 + nlen + xlen > m->len)
            return hc_err_set(HC_ERR_DATA, "%s: damaged zip central directory",
                              path);
        for (x = c + 46 + nlen; x + 4 <= c + 46 + nlen + xlen;
             x += 4 + rd16(x + 2)) {
            const unsigned char *f = x + 4;

            if (rd16(x) != 1)
                continue;       /* zip64: the 0xFFFFFFFF fields, in order */
            if (usize == 0xffffffffu)
                usize = rd64(f), f += 8;
            if (csize == 0xffffffffu)
                csize = rd64(f), f += 8;
            if (loff == 0xffffffffu)
                loff = rd64(f);
        }
        at += 46 + nlen + xlen + clen;
        if (nlen != strlen(want) || memcmp(c + 46, want, nlen))
            continue;
        if (loff + 30 > m->len || rd32(b + loff) != 0x04034b50)
            return hc_err_set(HC_ERR_DATA, "%s: %s: damaged local header",
                              path, want);
        l = b + loff + 30 + rd16(b + loff + 26) + rd16(b + loff + 28);
        if (l + csize > b + m->len)
            return hc_err_set(HC_ERR_DATA, "%s: %s is truncated", path, want);
        if (method == 0) {
            *data = l;
            *len = csize;
        } else if (method == 8) {
            z_stream z;
            int zr;

            if (!(*owned = malloc(usize ? usize : 1)))
                return hc_err_set(HC_ERR_NOMEM, "%s: out of memory", path);
            memset(&z, 0, sizeof z);
            if (inflateInit2(&z, -15) != Z_OK)
                return hc_err_set(HC_ERR_NOMEM, "%s: zlib", path);
            z.next_in = (unsigned char *)(uintptr_t)l;
            z.avail_in = (uInt)csize;   /* members under 4 GiB */
            z.next_out = *owned;
            z.avail_out = (uInt)usize;
            zr = inflate(&z, Z_FINISH);
            inflateEnd(&z);
            if (zr != Z_STREAM_END || z.total_out != usize)
                return hc_err_set(HC_ERR_DATA, "%s: %s: bad deflate data",
                                  path, want);
            *data = *owned;
            *len = usize;
        } else {
            return hc_err_set(HC_ERR_DATA, "%s: %s is compressed with zip "
                              "method %u; use np.savez or "
                              "np.savez_compressed", path, want, method);
        }
        if ((uint32_t)crc32(0, *data, (uInt)*len) != crc)
            return hc_err_set(HC_ERR_DATA, "%s: %s fails its CRC-32 "
                              "(damaged file)", path, want);
        return HC_OK;
    }
    return hc_err_set(HC_ERR_DATA, "%s has no array %.*s (an .npz for "
                      "training holds x_train, y_train, x_test, y_test)",
                      path, (int)strlen(want) - 4, want);
}

int wk_data_load_npz(const char *path, const char *which,
                     struct wk_dataset *out)
{
    const char *set = !strcmp(which, "train") ? "train" : "test";
    struct map m = { 0 };
    const unsigned char *xd, *yd;
    unsigned char *xo = NULL, *yo = NULL;
    char xn[32], yn[32], xname[WK_DATA_PATH_MAX], yname[WK_DATA_PATH_MAX];
    size_t xl, yl;
    struct npy ax, ay;
    int rv, keep = 0;

    memset(out, 0, sizeof *out);
    snprintf(xn, sizeof xn, "x_%s.npy", set);
    snprintf(yn, sizeof yn, "y_%s.npy", set);
    snprintf(xname, sizeof xname, "%.400s:x_%s", path, set);
    snprintf(yname, sizeof yname, "%.400s:y_%s", path, set);
    if ((rv = map_file(path, &m)) != HC_OK ||
        (rv = zip_member(&m, path, xn, &xd, &xl, &xo)) != HC_OK ||
        (rv = npy_parse(xd, xl, xname, &ax)) != HC_OK ||
        (rv = take_images(&ax, xname, out, &keep)) != HC_OK ||
        (rv = zip_member(&m, path, yn, &yd, &yl, &yo)) != HC_OK ||
        (rv = npy_parse(yd, yl, yname, &ay)) != HC_OK ||
        (rv = take_labels(&ay, yname, out)) != HC_OK)
        goto out;
    if (keep && xo) {           /* in place, but in the inflated copy */
        float *x = malloc((size_t)out->n * out->h * out->w * out->c *
                          sizeof *x);

        if (!x) {
            rv = hc_err_set(HC_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        memcpy(x, out->x, (size_t)out->n * out->h * out->w * out->c *
                              sizeof *x);
        out->x = x;
        keep = 0;
    }
    snprintf(out->images_path, sizeof out->images_path, "%s", xname);
    snprintf(out->labels_path, sizeof out->labels_path, "%s", yname);
out:
    free(xo);
    free(yo);
    if (rv == HC_OK && keep) {
        out->map = m.p;         /* x lies in it */
        out->map_len = m.len;
        return HC_OK;
    }
    if (rv != HC_OK) {
        if (!keep)
            free(out->x);       /* else in the mapping, or in xo */
        free(out->y);
        memset(out, 0, sizeof *out);
    }
    unmap(&m);
    return rv;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);

    return a >= b && !strcmp(s + a - b, suffix);
}

/* "X.npy,Y.npy" → the two paths. */
static int pair(const char *spec, char *x, char *y, const char *flag)
{
    const char *comma = strchr(spec, ',');

    if (!comma || strchr(comma + 1, ',') || comma == spec || !comma[1] ||
        (size_t)(comma - spec) >= WK_DATA_PATH_MAX ||
        strlen(comma + 1) >= WK_DATA_PATH_MAX)
        return hc_err_set(HC_ERR_INVAL, "%s %s: give X.npy,Y.npy (images "
                          "and labels) or one .npz file", flag, spec);
    memcpy(x, spec, (size_t)(comma - spec));
    x[comma - spec] = '\0';
    strcpy(y, comma + 1);
    return HC_OK;
}

int wk_data_load_any(const char *data, const char *test, const char *dir,
                     const char *which, struct wk_dataset *out)
{
    char x[WK_DATA_PATH_MAX], y[WK_DATA_PATH_MAX];
    int is_test = strcmp(which, "train") != 0, rv;

    if (!data)
        return wk_data_load_dir(dir, which, out);
    if (ends_with(data, ".npz") && !strchr(data, ','))
        return wk_data_load_npz(data, is_test ? "test" : "train", out);
    if (is_test && !test)
        return hc_err_set(HC_ERR_NOTFOUND, "--data %s has no test set: give "
                          "--validation-data XT.npy,YT.npy (or an .npz with "
                          "x_test, y_test), or --no-eval", data);
    if ((rv = pair(is_test ? test : data, x, y,
                   is_test ? "--validation-data" : "--data")) != HC_OK)
        return rv;
    return wk_data_load_npy(x, y, out);
}

/* ---- several inputs ----------------------------------------------------- */

/* "image, meta": the model's inputs, for messages. */
static const char *input_list(const char *const *names, int n, char *buf,
                              size_t len)
{
    size_t at = 0;

    buf[0] = '\0';
    for (int q = 0; q < n && at < len; q++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", q ? ", " : "",
                               names[q]);
    return buf;
}

/* "image=X_image.npy,meta=X_meta.npy,Y.npy": the example for names. */
static const char *input_example(const char *const *names, int n, char *buf,
                                 size_t len)
{
    size_t at = 0;

    buf[0] = '\0';
    for (int q = 0; q < n && at < len; q++)
        at += (size_t)snprintf(buf + at, len - at, "%s=X_%s.npy,", names[q],
                               names[q]);
    if (at < len)
        snprintf(buf + at, len - at, "Y.npy");
    return buf;
}

/* Split spec into each input's path (paths[q] for names[q]) and the
 * labels' (y, "" when none). */
static int split_spec(const char *spec, const char *const *names, int n,
                      const char *flag, char paths[][WK_DATA_PATH_MAX],
                      char *y)
{
    char part[2 * WK_DATA_PATH_MAX], list[WK_DATA_MAX_INPUTS * 66];
    char ex[WK_DATA_MAX_INPUTS * 160];
    const char *p = spec;

    y[0] = '\0';
    for (int q = 0; q < n; q++)
        paths[q][0] = '\0';
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *eq;
        int q;

        if (len == 0 || len >= sizeof part)
            return hc_err_set(HC_ERR_INVAL, "%s %s: an empty or too long "
                              "part; give NAME=X.npy for each input, then "
                              "Y.npy", flag, spec);
        memcpy(part, p, len);
        part[len] = '\0';
        p += len + (end != NULL);
        if (!(eq = strchr(part, '='))) {
            if (y[0] || *p)
                return hc_err_set(HC_ERR_INVAL, "%s %s: \"%s\" names no "
                                  "input; the model's inputs are %s: give "
                                  "%s (only the labels, last, without "
                                  "NAME=)", flag, spec, part,
                                  input_list(names, n, list, sizeof list),
                                  input_example(names, n, ex, sizeof ex));
            if (len >= WK_DATA_PATH_MAX)
                return hc_err_set(HC_ERR_INVAL, "%s: path too long", flag);
            strcpy(y, part);
            continue;
        }
        *eq = '\0';
        for (q = 0; q < n && strcmp(names[q], part); q++)
            ;
        if (q == n)
            return hc_err_set(HC_ERR_DATA, "%s: \"%s\" is not an input of "
                              "the model; its inputs are %s", flag, part,
                              input_list(names, n, list, sizeof list));
        if (paths[q][0])
            return hc_err_set(HC_ERR_DATA, "%s: input %s is given twice",
                              flag, part);
        if (!eq[1] || strlen(eq + 1) >= WK_DATA_PATH_MAX)
            return hc_err_set(HC_ERR_INVAL, "%s: input %s has no file (or "
                              "too long a path)", flag, part);
        strcpy(paths[q], eq + 1);
    }
    for (int q = 0; q < n; q++)
        if (!paths[q][0])
            return hc_err_set(HC_ERR_DATA, "%s %s: no array for input %s; "
                              "the model's inputs are %s: give %s", flag,
                              spec, names[q],
                              input_list(names, n, list, sizeof list),
                              input_example(names, n, part, sizeof part));
    return HC_OK;
}

/* Copy input a's rows (n × size floats) into x's rows of `row`, at off. */
static void pack(float *x, size_t row, size_t off, const struct wk_dataset *a)
{
    const size_t size = (size_t)a->h * a->w * a->c;

    for (size_t i = 0; i < (size_t)a->n; i++)
        memcpy(x + i * row + off, a->x + i * size, size * sizeof *x);
}

int wk_data_load_inputs(const char *spec, const char *const *names,
                        int n_names, int labels, const char *flag,
                        struct wk_dataset *out)
{
    char paths[WK_DATA_MAX_INPUTS][WK_DATA_PATH_MAX], y[WK_DATA_PATH_MAX];
    char ex[WK_DATA_MAX_INPUTS * 160];
    struct wk_dataset a[WK_DATA_MAX_INPUTS];
    size_t row = 0;
    int q, rv, loaded = 0;

    memset(out, 0, sizeof *out);
    memset(a, 0, sizeof a);
    if (!spec || !names || n_names < 1 || n_names > WK_DATA_MAX_INPUTS)
        return hc_err_set(HC_ERR_INVAL, "%s: 1 to %d inputs", flag,
                          WK_DATA_MAX_INPUTS);
    if ((rv = split_spec(spec, names, n_names, flag, paths, y)))
        return rv;
    if (labels && !y[0])
        return hc_err_set(HC_ERR_DATA, "%s %s: no labels file; give it "
                          "last, without a name: %s", flag, spec,
                          input_example(names, n_names, ex, sizeof ex));
    for (q = 0; q < n_names; q++, loaded++) {
        struct wk_data_input *in = &out->inputs[q];

        if ((rv = wk_data_load_npy(paths[q], NULL, &a[q])) != HC_OK) {
            char msg[1024];

            snprintf(msg, sizeof msg, "%s", hc_err_msg());
            rv = hc_err_set(rv, "%s: input %s: %s", flag, names[q], msg);
            goto out;
        }
        if (a[q].n != a[0].n) {
            rv = hc_err_set(HC_ERR_DATA, "%s: input %s (%s) has %lld samples "
                            "but input %s (%s) has %lld", flag, names[q],
                            paths[q], a[q].n, names[0], paths[0], a[0].n);
            loaded++;
            goto out;
        }
        snprintf(in->name, sizeof in->name, "%s", names[q]);
        snprintf(in->path, sizeof in->path, "%s", paths[q]);
        in->h = a[q].h;
        in->w = a[q].w;
        in->c = a[q].c;
        in->off = row;
        row += (size_t)a[q].h * a[q].w * a[q].c;
    }
    out->n = a[0].n;
    out->h = out->w = 1;
    if (row > 0x7fffffff) {
        rv = hc_err_set(HC_ERR_DATA, "%s: a sample's inputs hold %zu "
                        "floats, more than 2^31 − 1", flag, row);
        goto out;
    }
    out->c = (int)row;
    out->n_inputs = n_names;
    if (!(out->x = malloc((size_t)out->n * row * sizeof *out->x))) {
        rv = hc_err_set(HC_ERR_NOMEM, "%s: out of memory for %lld samples of "
                        "%zu floats", flag, out->n, row);
        goto out;
    }
    for (q = 0; q < n_names; q++)
        pack(out->x, row, out->inputs[q].off, &a[q]);
    snprintf(out->images_path, sizeof out->images_path, "%s", spec);
    if (y[0]) {
        struct map my = { 0 };
        struct npy ay;

        if ((rv = map_file(y, &my)) == HC_OK &&
            (rv = npy_parse(my.p, my.len, y, &ay)) == HC_OK)
            rv = take_labels(&ay, y, out);
        unmap(&my);
        if (rv != HC_OK)
            goto out;
        snprintf(out->labels_path, sizeof out->labels_path, "%s", y);
    }
out:
    for (q = 0; q < loaded && q < n_names; q++)
        wk_data_free(&a[q]);
    if (rv != HC_OK)
        wk_data_free(out);
    return rv;
}

int wk_data_load_any_inputs(const char *data, const char *test,
                            const char *which, const char *const *names,
                            int n_names, struct wk_dataset *out)
{
    char list[WK_DATA_MAX_INPUTS * 66], ex[WK_DATA_MAX_INPUTS * 160];
    int is_test = strcmp(which, "train") != 0;

    memset(out, 0, sizeof *out);
    if (!data || (is_test && !test))
        return hc_err_set(HC_ERR_NOTFOUND, "the model has %d inputs (%s): "
                          "give %s %s, one .npy per input and the labels",
                          n_names, input_list(names, n_names, list,
                                              sizeof list),
                          is_test ? "--validation-data" : "--data",
                          input_example(names, n_names, ex, sizeof ex));
    return wk_data_load_inputs(is_test ? test : data, names, n_names, 1,
                               is_test ? "--validation-data" : "--data",
                               out);
}
