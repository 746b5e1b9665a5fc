/*
 * keras_impl.h — what keras_h5.c (the weights file) gives keras_archive.c
 * (the .keras zip, which also chooses between the two); the contract is
 * keras.h.
 */
#ifndef HC_KERAS_IMPL_H
#define HC_KERAS_IMPL_H

#include "keras.h"

/* Read m's weights from an HDF5 file image in memory (a .keras archive's
 * model.weights.h5); file names the archive in messages. */
int kx_read_weights_image(const char *file, void *image, size_t len,
                          const struct hc_model *m, float *params);

/* Read m's weights from the .weights.h5 file at path. */
int kx_read_weights_file(const char *path, const struct hc_model *m,
                         float *params);

/* Write the weights file at path (no rename); name is for messages. */
int kx_write_weights_file(const char *path, const char *name,
                          const struct hc_model *m, const float *params);

#endif
