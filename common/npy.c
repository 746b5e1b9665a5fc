/*
 * npy.c — a float32 array as a NumPy .npy file (see npy.h for the format):
 * writing one, and reading a header back into bounded fields.
 */
#include "npy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"

/* The 10-byte preamble and the padded header of an array of dtype descr
 * ("<f4", "<u8") and this shape into buf (cap >= 512); returns the bytes
 * written. */
static size_t npy_header(const char *descr, const size_t *shape, int ndim,
                         unsigned char *buf, size_t *count)
{
    char *header = (char *)buf + 10;
    const size_t cap = 512 - 10;
    size_t n = 0, total;
    int i;

    *count = 1;
    n += (size_t)snprintf(header + n, cap - n,
                          "{'descr': '%s', 'fortran_order': False, "
                          "'shape': (", descr);
    for (i = 0; i < ndim; i++) {    /* 8 dims of 20 digits: fits */
        n += (size_t)snprintf(header + n, cap - n, "%zu%s", shape[i],
                              ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
        *count *= shape[i];
    }
    n += (size_t)snprintf(header + n, cap - n, "), }");
    total = (10 + n + 1 + 63) / 64 * 64;
    while (10 + n + 1 < total)
        header[n++] = ' ';
    header[n++] = '\n';
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(n & 0xFF);
    buf[9] = (unsigned char)(n >> 8);
    return 10 + n;
}

int hc_npy_write_f32(const char *path, const size_t *shape, int ndim,
                     const float *data)
{
    unsigned char hdr[512];
    size_t n, count;
    FILE *f;
    int rv = HC_OK;

    if (!path || !data || ndim < 0 || ndim > HC_NPY_MAX_DIMS)
        return hc_err_set(HC_ERR_INVAL, "hc_npy_write_f32: %s",
                          !path || !data ? "NULL path or data"
                                         : "ndim out of range");
    n = npy_header("<f4", shape, ndim, hdr, &count);
    f = fopen(path, "wb");
    if (!f)
        return hc_err_set(HC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (fwrite(hdr, 1, n, f) != n ||
        fwrite(data, sizeof(float), count, f) != count)
        rv = hc_err_set(HC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (fclose(f) != 0 && rv == HC_OK)
        rv = hc_err_set(HC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return rv;
}

static int write_all(int fd, const void *p, size_t len)
{
    const char *c = p;

    while (len > 0) {
        ssize_t n = write(fd, c, len > (1u << 30) ? (1u << 30) : len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        c += n;
        len -= (size_t)n;
    }
    return 0;
}

/* hc_npy_write_f32_at of elements of `size` bytes, dtype descr. */
static int write_at(int dirfd, const char *name, const char *shown,
                    const char *descr, size_t size, const size_t *shape,
                    int ndim, const void *data)
{
    unsigned char hdr[512];
    char tmp[300];
    size_t n, count;
    int fd, rv = HC_OK;

    if (!name || !shown || !data || ndim < 0 || ndim > HC_NPY_MAX_DIMS ||
        strchr(name, '/') || strlen(name) > 255 - 24)
        return hc_err_set(HC_ERR_INVAL, "hc_npy_write_f32_at: bad arguments");
    n = npy_header(descr, shape, ndim, hdr, &count);
    snprintf(tmp, sizeof tmp, ".%s.tmp-%ld", name, (long)getpid());
    fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
                O_CLOEXEC, 0644);
    if (fd < 0)
        return hc_err_set(HC_ERR_IO, "cannot write %s: %s", shown,
                          strerror(errno));
    if (write_all(fd, hdr, n) != 0 ||
        write_all(fd, data, count * size) != 0 || fsync(fd) != 0)
        rv = hc_err_set(HC_ERR_IO, "cannot write %s: %s", shown,
                        strerror(errno));
    if (close(fd) != 0 && rv == HC_OK)
        rv = hc_err_set(HC_ERR_IO, "cannot write %s: %s", shown,
                        strerror(errno));
    if (rv == HC_OK && renameat(dirfd, tmp, dirfd, name) != 0)
        rv = hc_err_set(HC_ERR_IO, "cannot rename %s into place: %s", shown,
                        strerror(errno));
    if (rv == HC_OK && fsync(dirfd) != 0)
        rv = hc_err_set(HC_ERR_IO, "cannot sync the directory of %s: %s",
                        shown, strerror(errno));
    if (rv != HC_OK)
        unlinkat(dirfd, tmp, 0);
    return rv;
}

int hc_npy_write_f32_at(int dirfd, const char *name, const char *shown,
                        const size_t *shape, int ndim, const float *data)
{
    return write_at(dirfd, name, shown, "<f4", sizeof *data, shape, ndim,
                    data);
}

int hc_npy_write_u64_at(int dirfd, const char *name, const char *shown,
                        const size_t *shape, int ndim, const uint64_t *data)
{
    return write_at(dirfd, name, shown, "<u8", sizeof *data, shape, ndim,
                    data);
}

/* ---- reading ------------------------------------------------------------ */

#define NPY_MAX_COUNT (1ull << 40)

/* The value after key ("'descr':") in the dict h, spaces skipped; NULL
 * when the key is absent. */
static const char *npy_value(const char *h, const char *key)
{
    const char *p = strstr(h, key);

    if (!p)
        return NULL;
    p += strlen(key);
    while (*p == ' ')
        p++;
    return p;
}

static int npy_dict(const char *h, const char *path, struct hc_npy_info *out)
{
    const char *p, *end;
    size_t n;

    if (!(p = npy_value(h, "'descr':")) || (*p != '\'' && *p != '"'))
        return hc_err_set(HC_ERR_DATA, "%s: .npy header has no 'descr' string",
                          path);
    end = strchr(p + 1, *p);
    n = end ? (size_t)(end - p - 1) : 0;
    if (!end || n >= sizeof out->descr)
        return hc_err_set(HC_ERR_DATA, "%s: .npy header's 'descr' is malformed "
                          "or longer than %zu bytes", path,
                          sizeof out->descr - 1);
    memcpy(out->descr, p + 1, n);
    out->descr[n] = '\0';
    if (!(p = npy_value(h, "'fortran_order':")))
        return hc_err_set(HC_ERR_DATA, "%s: .npy header has no "
                          "'fortran_order'", path);
    if (strncmp(p, "False", 5) == 0)
        out->fortran_order = 0;
    else if (strncmp(p, "True", 4) == 0)
        out->fortran_order = 1;
    else
        return hc_err_set(HC_ERR_DATA, "%s: .npy header's 'fortran_order' is "
                          "neither True nor False", path);
    if (!(p = npy_value(h, "'shape':")) || *p != '(')
        return hc_err_set(HC_ERR_DATA, "%s: .npy header has no 'shape' tuple",
                          path);
    p++;
    out->ndim = 0;
    out->count = 1;
    for (;;) {
        char *e;
        unsigned long long v;

        while (*p == ' ')
            p++;
        if (*p == ')')
            return HC_OK;
        if (*p < '0' || *p > '9')
            return hc_err_set(HC_ERR_DATA, "%s: .npy header's 'shape' is not a "
                              "tuple of sizes", path);
        if (out->ndim == HC_NPY_MAX_DIMS)
            return hc_err_set(HC_ERR_DATA, "%s: .npy shape has more than %d "
                              "dimensions", path, HC_NPY_MAX_DIMS);
        errno = 0;
        v = strtoull(p, &e, 10);
        if (errno == ERANGE || v > NPY_MAX_COUNT ||
            (v && out->count > NPY_MAX_COUNT / v))
            return hc_err_set(HC_ERR_DATA, "%s: .npy shape has more than %llu "
                              "elements", path, NPY_MAX_COUNT);
        out->shape[out->ndim++] = v;
        out->count *= v;
        p = e;
        while (*p == ' ')
            p++;
        if (*p == ',')
            p++;
        else if (*p != ')')
            return hc_err_set(HC_ERR_DATA, "%s: .npy header's 'shape' is not a "
                              "tuple of sizes", path);
    }
}

int hc_npy_parse_header(const unsigned char *buf, size_t len, const char *path,
                        struct hc_npy_info *out, size_t *data_offset)
{
    char h[HC_NPY_MAX_HEADER + 1];
    size_t pre, hlen;

    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return hc_err_set(HC_ERR_DATA, "%s is not a .npy file", path);
    if (buf[6] == 1) {
        pre = 10;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    } else if (buf[6] == 2 || buf[6] == 3) {
        if (len < 12)
            return hc_err_set(HC_ERR_DATA, "%s: truncated .npy header", path);
        pre = 12;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
               (size_t)buf[11] << 24;
    } else {
        return hc_err_set(HC_ERR_DATA, "%s: .npy version %d is not supported",
                          path, buf[6]);
    }
    if (hlen > HC_NPY_MAX_HEADER)
        return hc_err_set(HC_ERR_DATA, "%s: .npy header of %zu bytes is longer "
                          "than %u", path, hlen, HC_NPY_MAX_HEADER);
    if (len - pre < hlen)
        return hc_err_set(HC_ERR_DATA, "%s: truncated .npy header", path);
    memcpy(h, buf + pre, hlen);
    h[hlen] = '\0';
    *data_offset = pre + hlen;
    return npy_dict(h, path, out);
}

int hc_npy_read_header(FILE *f, const char *path, struct hc_npy_info *out)
{
    unsigned char buf[12 + HC_NPY_MAX_HEADER];
    size_t got, want, off;
    int rv;

    got = fread(buf, 1, 12, f);
    want = got >= 10 && buf[6] == 1 ? 10 + ((size_t)buf[8] | (size_t)buf[9] << 8)
                                    : 12;
    if (got >= 12 && (buf[6] == 2 || buf[6] == 3)) {
        want = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
               (size_t)buf[11] << 24;
        want = want > HC_NPY_MAX_HEADER ? sizeof buf : 12 + want;
    }
    if (want > sizeof buf)
        want = sizeof buf;
    if (want > got)
        got += fread(buf + got, 1, want - got, f);
    rv = hc_npy_parse_header(buf, got, path, out, &off);
    if (rv == HC_OK && fseek(f, (long)off, SEEK_SET) != 0)
        rv = hc_err_set(HC_ERR_IO, "%s: %s", path, strerror(errno));
    return rv;
}

char *hc_npy_shape_str(const uint64_t *shape, int ndim, char *buf, size_t len)
{
    size_t n = 0;
    int i;

    if (len == 0)
        return buf;
    n += (size_t)snprintf(buf, len, "(");
    for (i = 0; i < ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%llu", i ? ", " : "",
                              (unsigned long long)shape[i]);
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, ndim == 1 ? ",)" : ")");
    if (n >= len && len >= 4)
        snprintf(buf + len - 4, 4, "…");   /* 3 bytes of UTF-8 */
    return buf;
}
