/*
 * keras_impl.h — what keras_h5.c (the weights file) gives keras_archive.c
 * (the .keras zip, which also chooses between the two), and what
 * keras_config.c (the config.json written) gives the rows of the layer
 * table (layer_*.c) that write their Keras arguments; the contract is
 * keras.h.
 */
#ifndef HC_KERAS_IMPL_H
#define HC_KERAS_IMPL_H

#include "keras.h"

#include <cjson/cJSON.h>

/* Read m's weights (params not NULL) and the optimizer's state (o not
 * NULL) from an HDF5 file image in memory (a .keras archive's
 * model.weights.h5); file names the archive in messages. */
int kx_read_weights_image(const char *file, void *image, size_t len,
                          const struct hc_model *m, float *params,
                          struct hc_keras_optim *o);

/* The same from the .weights.h5 file at path. */
int kx_read_weights_file(const char *path, const struct hc_model *m,
                         float *params, struct hc_keras_optim *o);

/* HC_OK when m has no row-sparse table (size 0: the readers and writers
 * take Keras's dense array only through hc_keras_dense_tables's model);
 * else HC_ERR_UNSUPPORTED naming path, the table and that. */
int kx_no_tables(const struct hc_model *m, const char *path);

/* Write the weights file at path (no rename), with the optimizer's state
 * o (NULL: none); name is for messages. */
int kx_write_weights_file(const char *path, const char *name,
                          const struct hc_model *m, const float *params,
                          const struct hc_keras_optim *o);

/* ---- writing a layer's config (keras_config.c) ------------------------ */

/* [a, b] as Keras writes a pair (kernel_size, strides …). */
cJSON *kx_pair(int a, int b);

/* f as the shortest decimal that reads back as f (0.2, not
 * 0.20000000298023224), as Python prints Keras's settings. */
double kx_tidy(float f);

/* An initialiser as Keras serialises it ({"module", "class_name",
 * "config"}, its seed from the model's), and a regularizer (null for
 * none). */
cJSON *kx_init_json(const struct hc_initializer *in, uint64_t seed);
cJSON *kx_reg_json(const struct hc_regularizer *r);

/* The arguments of a layer l with a kernel and a bias into config c:
 * use_bias, its initialisers (seeded by m's seed) and regularizers, no
 * constraints. */
void kx_weights_args(cJSON *c, const struct hc_model *m,
                     const struct hc_layer_spec *l);

/* The same for a kernel Keras names otherwise ("depthwise":
 * depthwise_initializer, depthwise_regularizer, depthwise_constraint). */
/* Keras's initializer object for in (its seed, or the model's), and its
 * regularizer object (null for none): new items for the caller to add. */
cJSON *kx_init_json(const struct hc_initializer *in, uint64_t seed);
cJSON *kx_reg_json(const struct hc_regularizer *r);

void kx_weights_args_as(cJSON *c, const struct hc_model *m,
                        const struct hc_layer_spec *l, const char *kernel);

/* A depthwise convolution's Keras config (layer_depthwise_conv2d.c,
 * written by separable_conv2d too): kernel_size, strides, padding,
 * depth_multiplier, data_format, dilation_rate, activation and the
 * depthwise and bias arguments. */
void kx_dwconv_config(cJSON *c, const struct hc_model *m,
                      const struct hc_layer_spec *l);

#endif
