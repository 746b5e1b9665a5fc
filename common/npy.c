/*
 * npy.c — a float32 array as a NumPy .npy file (see npy.h for the format).
 */
#include "npy.h"

#include <errno.h>
#include <stdio.h>
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
