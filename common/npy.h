/*
 * npy.h — writing a float32 array as a NumPy .npy file: `hetps export`
 * (one file per variable) and `hetps predict --out` (the model's outputs).
 *
 * The file is format 1.0: the magic "\x93NUMPY", version 1.0, a
 * little-endian u16 header length and a Python-literal header
 * {'descr': '<f4', 'fortran_order': False, 'shape': (…), } padded with
 * spaces and a newline to a multiple of 64 bytes, then the raw data in C
 * order, so numpy.load reads it as it is. (Reading .npy files back is
 * worker/eval.c's wk_load_npy.)
 */
#ifndef HC_NPY_H
#define HC_NPY_H

#include <stddef.h>

#define HC_NPY_MAX_DIMS 8

/*
 * Write data — the product of shape[0 … ndim) floats, C order, host
 * little-endian — to path as a float32 .npy of that shape (ndim 0: a
 * scalar). Creates or truncates the file; the directory must exist.
 * Errors: HC_ERR_INVAL (ndim outside [0, HC_NPY_MAX_DIMS], NULL path or
 * data), HC_ERR_IO naming the path and the reason (a partial file may be
 * left behind).
 */
int hc_npy_write_f32(const char *path, const size_t *shape, int ndim,
                     const float *data);

#endif
