/*
 * npy.c — a float32 array as a NumPy .npy file (see npy.h for the format):
 * writing one, and reading a header back into bounded fields.
 */
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

int hc_npy_write_f32(const char *path, const size_t *shape, int ndim,
                     const float *data)
{
    char header[512];
    unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0 };
    size_t n = 0, total, count = 1;
    FILE *f;
    int i, rv = HC_OK;

    if (!path || !data || ndim < 0 || ndim > HC_NPY_MAX_DIMS)
        return hc_err_set(HC_ERR_INVAL, "hc_npy_write_f32: %s",
                          !path || !data ? "NULL path or data"
                                         : "ndim out of range");
    n += (size_t)snprintf(header + n, sizeof header - n,
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (i = 0; i < ndim; i++) {
        n += (size_t)snprintf(header + n, sizeof header - n, "%zu%s",
                              shape[i], ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
        count *= shape[i];
    }
    n += (size_t)snprintf(header + n, sizeof header - n, "), }");
    total = (sizeof pre + n + 1 + 63) / 64 * 64;
    while (sizeof pre + n + 1 < total)
        header[n++] = ' ';
    header[n++] = '\n';
    pre[8] = (unsigned char)(n & 0xFF);
    pre[9] = (unsigned char)(n >> 8);
    f = fopen(path, "wb");
    if (!f)
        return hc_err_set(HC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (fwrite(pre, 1, sizeof pre, f) != sizeof pre ||
        fwrite(header, 1, n, f) != n ||
        fwrite(data, sizeof(float), count, f) != count)
        rv = hc_err_set(HC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (fclose(f) != 0 && rv == HC_OK)
        rv = hc_err_set(HC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return rv;
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
