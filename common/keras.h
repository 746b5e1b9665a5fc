/*
 * keras.h — Keras 3's files of a model: the weights file `NAME.weights.h5`
 * (HDF5, as `model.save_weights` writes it; keras_h5.c) and the `.keras`
 * archive (a zip of config.json, metadata.json and model.weights.h5, as
 * `model.save` writes it; keras_archive.c). The model itself, as Keras's
 * JSON, is read by hc_model_load (model.h), which takes a `.keras` file
 * too.
 *
 * The weights file's layout (Keras 3's H5IOStore): a group "vars" at the
 * top (the model's own variables: none), and for the i-th layer of its
 * class after the InputLayer, "layers/SNAKE/vars" with SNAKE the class
 * in snake case, "_N" added from the second layer of a class on
 * (conv2d, conv2d_1, max_pooling2d, flatten, dense, dense_1 …: Keras
 * names the path by class, never by the layer's own name); in it one
 * float32 dataset per variable, "0" the kernel and "1" the bias, in
 * Keras's shapes — which are hetps's ((kh, kw, in, out), (in, out),
 * (out)): nothing is transposed. With the optimizer's state
 * (struct hc_keras_optim below), "optimizer/vars" holds Keras's
 * optimizer.variables, so that keras.models.load_model resumes with the
 * same slots; without it, that group is not written (Keras then warns that
 * it skips loading the optimizer).
 *
 * Every reader checks each size, shape and type against the model before
 * it reads a value, and an error names the file and the dataset. Calls
 * are not thread-safe (the HDF5 library's serial build).
 */
#ifndef HC_KERAS_H
#define HC_KERAS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define HC_KERAS_VERSION "3.3.3"   /* metadata.json: the format written */

/* Keras's class name of a layer type ("Conv2D", "MaxPooling2D" …). */
const char *hc_keras_class(enum hc_layer_type t);

/* The path of variable v of m in Keras's weights file
 * ("layers/conv2d/vars/0") into buf. Returns HC_OK, or HC_ERR_INVAL for
 * a v out of range. */
int hc_keras_var_path(const struct hc_model *m, int v, char *buf,
                      size_t len);

/* 1 when the file at path starts as a zip archive does (PK\3\4). */
int hc_keras_is_archive(const char *path);

/* The config.json of the .keras archive at path, into a new buffer
 * *json (NUL-terminated, *len bytes, the caller frees it), at most max
 * bytes. Errors name the file: not a zip, no config.json, too large. */
int hc_keras_archive_config(const char *path, size_t max, char **json,
                            size_t *len);

/*
 * A model's row-sparse tables as Keras's files hold an Embedding's
 * embeddings: one dense (input_dim, output_dim) float32 array. *dense is
 * m with each table made a dense variable of that shape (its size counted
 * in n_params, laid out where hc_model_var_offset puts it), for the
 * readers and writers here. A table is written dense only when
 * input_dim · output_dim · 4 bytes ≤ HC_KERAS_TABLE_MAX_BYTES; a larger
 * one is HC_ERR_UNSUPPORTED naming the table, its input_dim and the
 * limit (`hetps export` without a model file writes its stored rows as
 * NAME.ids.npy and NAME.rows.npy). A model without tables is copied as
 * it is.
 */
#define HC_KERAS_TABLE_MAX_BYTES (1ull << 30)
int hc_keras_dense_tables(const struct hc_model *m, struct hc_model *dense);

/* Read the weights of m from path — a `.weights.h5` file, or the
 * model.weights.h5 of a `.keras` archive — into params (m->n_params
 * floats, variable after variable as hc_model_var_offset lays them).
 * Every variable must be there with the model's shape; errors name the
 * file and the dataset. */
int hc_keras_read_weights(const char *path, const struct hc_model *m,
                          float *params);

/*
 * The optimizer's state, as Keras 3.3 keeps it: optimizer.variables,
 * "optimizer/vars/0…N-1" of the weights file, in the order Keras 3.3's
 * optimizer creates them:
 *   iteration       int64 scalar, the updates applied (iterations)
 *   learning_rate   float32 scalar, m->optim.lr — only when the rate is a
 *                   constant (a schedule is no variable)
 *   u_product       float32 scalar, Nadam's only
 *   then the slots, each shaped as its variable: the first `lead` kinds
 *   (hetps's store order, ps/optimizer.h) variable by variable, kinds
 *   interleaved (Adam: momentum 0, velocity 0, momentum 1, velocity 1 …),
 *   each further kind for every variable in turn (Adam's velocity_hat,
 *   RMSprop's momentum and average_gradient); lead is 2 for Adam, AdamW,
 *   Nadam, Adamax and Ftrl (their build's first loop makes two), 1 for SGD
 *   with momentum, RMSprop and Adagrad.
 * Keras releases whose build makes them in another order (Nadam's
 * u_product after its slots; in some, each kind for every variable in
 * turn) read them by index as theirs: load_model there refuses the
 * shapes, or swaps slots of equal shapes.
 */
#define HC_KERAS_MAX_SLOTS 3
struct hc_keras_optim {
    uint64_t iterations;
    float u_product;                    /* Nadam's; ignored for the others */
    int n_slots;                        /* kinds, 0..HC_KERAS_MAX_SLOTS */
    float *slots[HC_KERAS_MAX_SLOTS];   /* each (m->n_params), laid out as
                                           the parameters; the caller's */
};

/* How many variables optimizer.variables has for m with n_slots kinds. */
int hc_keras_optim_count(const struct hc_model *m, int n_slots);

/* Write params (m->n_params floats) as a Keras 3 `.weights.h5` file at
 * path, made whole or not at all (written beside it, then renamed); with
 * the optimizer's state o (NULL: none). */
int hc_keras_write_weights(const char *path, const struct hc_model *m,
                           const float *params,
                           const struct hc_keras_optim *o);

/* Read the optimizer's state of m from path (a `.weights.h5` or `.keras`
 * file) into o: o->n_slots kinds (set by the caller, as the optimizer of
 * m keeps: ps_optim_slots) into o->slots (the caller's, m->n_params
 * floats each), o->iterations and o->u_product. "optimizer/vars" must
 * hold exactly hc_keras_optim_count variables of the shapes above;
 * HC_ERR_NOTFOUND when the file has none (saved without the optimizer),
 * HC_ERR_MISMATCH naming the dataset otherwise. */
int hc_keras_read_optim(const char *path, const struct hc_model *m,
                        struct hc_keras_optim *o);

/* m as Keras 3 serialises a compiled Sequential (keras_config.c): the
 * config.json of a `.keras` file, with "compile_config", into a new
 * buffer *json the caller frees. */
int hc_keras_config_json(const struct hc_model *m, char **json);

/* Write m and params as a `.keras` archive at path: config.json,
 * metadata.json and model.weights.h5 (with the optimizer's state o, NULL:
 * none), made whole or not at all. */
int hc_keras_write_archive(const char *path, const struct hc_model *m,
                           const float *params,
                           const struct hc_keras_optim *o);

#endif
