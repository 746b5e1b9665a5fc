/*
 * npy.h — writing a float32 array as a NumPy .npy file: `hetps export`
 * (one file per variable) and `hetps predict --out` (the model's outputs).
 *
 * The file is format 1.0: the magic "\x93NUMPY", version 1.0, a
 * little-endian u16 header length and a Python-literal header
 * {'descr': '<f4', 'fortran_order': False, 'shape': (…), } padded with
 * spaces and a newline to a multiple of 64 bytes, then the raw data in C
 * order, so numpy.load reads it as it is. Reading: hc_npy_read_header
 * parses a file's header (format 1.0, 2.0 or 3.0) into bounded fields;
 * worker/eval.c's wk_load_npy reads the weights with it.
 */
#ifndef HC_NPY_H
#define HC_NPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HC_NPY_MAX_DIMS 8
#define HC_NPY_MAX_HEADER 4096u     /* bytes of the dict we read (numpy's own
                                       headers are 118 bytes or so) */

/* What a .npy header says. */
struct hc_npy_info {
    char descr[16];                 /* "<f4" (longer ones are refused) */
    int fortran_order;
    int ndim;
    uint64_t shape[HC_NPY_MAX_DIMS];
    uint64_t count;                 /* product of shape (1 when ndim is 0) */
};

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

/*
 * The same, safely, as the file `name` (one path component) in the open
 * directory dirfd: written to a temporary name beside it (opened with
 * O_NOFOLLOW: a symlink planted there is not followed), synced, renamed
 * over `name` (which replaces a symlink rather than writing through it),
 * and the directory synced; a reader never sees a partial file. `shown`
 * names the file in messages. Errors as hc_npy_write_f32 (no partial file
 * is left behind).
 */
int hc_npy_write_f32_at(int dirfd, const char *name, const char *shown,
                        const size_t *shape, int ndim, const float *data);
/* The same for uint64 elements ('<u8': a table's row ids). */
int hc_npy_write_u64_at(int dirfd, const char *name, const char *shown,
                        const size_t *shape, int ndim, const uint64_t *data);

/*
 * Read the header of the .npy file f (positioned at its start; `path`
 * names it in messages) into *out and leave f at the first data byte.
 * Every field is parsed into a bounded buffer: the header length, the
 * descr (at most 15 bytes), fortran_order, and a shape of at most
 * HC_NPY_MAX_DIMS dimensions whose product must fit in 2^40. Errors:
 * HC_ERR_DATA naming the path and what is wrong (not a .npy, an unknown
 * version, truncated, a header over HC_NPY_MAX_HEADER, a key missing or
 * malformed).
 */
int hc_npy_read_header(FILE *f, const char *path, struct hc_npy_info *out);

/* The same from the len bytes at buf (the whole file or its beginning);
 * *data_offset gets where the data starts. */
int hc_npy_parse_header(const unsigned char *buf, size_t len, const char *path,
                        struct hc_npy_info *out, size_t *data_offset);

/* "(4, 3)" / "(12,)" / "()": shape as Python writes it, cut (ending in
 * "…") to fit len bytes; returns buf. */
char *hc_npy_shape_str(const uint64_t *shape, int ndim, char *buf, size_t len);

#endif
