/*
 * model_impl.h — the inside of the model reader, shared by its files:
 * model.c (the model as a whole: loss, optimizer, metrics, signature,
 * initial values, the entry points), model_layer.c (the layers: what
 * every kind has, and the helpers the rows of the layer table share),
 * model_json.c (typed JSON values and the
 * key check) and model_keras.c (Keras's own JSON, translated). Nothing
 * outside common/model*.c and the rows of the layer table (layer_*.c)
 * includes this; the contract is model.h.
 *
 * Errors: each reader returns HC_OK, or the code of hc_err_set with one
 * message "WHERE: what is wrong", WHERE naming the file and the place in
 * it ("F: layers[2] (dense \"dense_1\")", "F: optimizer (adam)").
 */
#ifndef HC_MODEL_IMPL_H
#define HC_MODEL_IMPL_H

#include "model.h"

#include <cjson/cJSON.h>

#define WHERE_MAX       640     /* bytes of a WHERE */

/* A number range: [lo, hi], with either end open. */
struct md_range {
    double lo, hi;
    int lo_open, hi_open;
};

/* ---- typed JSON values (model_json.c) ---------------------------------- */

/* Record "WHERE: message" as an HC_ERR_CONFIG error and return that code. */
int md_fail(const char *where, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A missing required key, with an example value. */
int md_missing(const char *where, const char *key, const char *example);

/* A short rendering of a JSON value for messages: 0, "abc", an array …;
 * returns buf. */
const char *md_show(const cJSON *it, char *buf, size_t len);

/* s lower-cased without underscores into buf, for matching enum spellings;
 * returns buf. */
const char *md_norm(const char *s, char *buf, size_t len);

/* Every key of obj must be in allowed (NULL-terminated) and appear once;
 * an unknown key's message suggests the one probably meant. */
int md_check_keys(const cJSON *obj, const char *const *allowed,
                  const char *where);

const cJSON *md_get(const cJSON *obj, const char *key);
int md_is_int(const cJSON *it);             /* a finite whole number */

/* An integer value in [lo, hi]. */
int md_int_value(const cJSON *it, const char *key, const char *where,
                 int lo, int hi, int *out);

/* Optional keys: *out = def when absent (NULL for a string). get_pair takes
 * an integer or a [height, width] pair, each in [lo, hi]. */
int md_get_int(const cJSON *obj, const char *key, const char *where,
               int def, int lo, int hi, int *out);
int md_get_pair(const cJSON *obj, const char *key, const char *where,
                int lo, int hi, int *a, int *b);
int md_get_float(const cJSON *obj, const char *key, const char *where,
                 double def, struct md_range r, float *out);
int md_get_bool(const cJSON *obj, const char *key, const char *where,
                int def, int *out);
int md_get_str(const cJSON *obj, const char *key, const char *where,
               const char **out);

/* ---- layers and shapes (model_layer.c) --------------------------------- */

#define MD_DIM_MAX      65536               /* any one dimension, filters */
#define MD_ELEMS_MAX    2147483647ull       /* one activation or variable */

/* Read root's "layers" into m->layers and m->n_layers, inferring each
 * layer's output shape and adding its variables to m->vars; the first
 * layer's input is m->input when have_input, else its own input_shape. */
int md_read_layers(const cJSON *root, struct hc_model *m, int have_input);

/* An "input_shape" value, [H, W, C] or [N], into *s. */
int md_parse_shape(const cJSON *it, const char *where, struct hc_shape *s);

/* "(H, W, C)" or "(N)" into buf; returns buf. */
const char *md_fmt_shape(const struct hc_shape *s, char *buf, size_t len);

/* 1 when s is a valid model or layer name: letters, digits, '_', '-', '.'. */
int md_name_ok(const char *s);

/* Elements of a shape. */
uint64_t md_shape_elems(const struct hc_shape *s);

/* What the rows of the layer table (layer_*.c) share. */

/* Optional "activation" key: a name, or null for linear (def when
 * absent). */
int md_get_act(const cJSON *obj, const char *where, enum hc_act def,
               enum hc_act *out);

/* Optional "padding" key: "valid" (0, also when absent) or "same" (1). */
int md_get_padding(const cJSON *obj, const char *where, int *same);

/* A sliding window of kh × kw (size_key names it in messages) over l's
 * image input with l's strides and padding: fails unless l->in is
 * (H, W, C) and the window fits; else sets l->out's H and W. */
int md_window_out(const char *where, struct hc_layer_spec *l,
                  const char *size_key, int kh, int kw);

/* Append variable "L/what" of layer l to m: shape (ndim dimensions),
 * initialiser and fans; its index into *idx, counted in l->n_var (a
 * layer's variables are appended one after another, in Keras's order).
 * Fails on too many variables or elements. */
int md_add_var(struct hc_model *m, const char *where,
               struct hc_layer_spec *l, const char *what, int ndim,
               const int *shape, enum hc_init init, int fan_in, int fan_out,
               int *idx);

/* The keys of a layer with a kernel and a bias, after its own: their
 * initialisers and regularizers. md_get_weights_args reads them into l
 * (absent: GlorotUniform kernel, Zeros bias, no penalty). */
#define MD_WEIGHTS_KEYS "kernel_initializer", "bias_initializer", \
    "kernel_regularizer", "bias_regularizer"
int md_get_weights_args(const cJSON *lj, const char *where,
                        struct hc_layer_spec *l);

/* The same for a kernel Keras names otherwise ("depthwise": the keys
 * depthwise_initializer and depthwise_regularizer, into l->kernel_init
 * and l->kernel_reg). */
#define MD_DEPTHWISE_KEYS "depthwise_initializer", "bias_initializer", \
    "depthwise_regularizer", "bias_regularizer"
int md_get_weights_args_as(const cJSON *lj, const char *where,
                           const char *kernel, struct hc_layer_spec *l);

/* A depthwise convolution's keys (layer_depthwise_conv2d.c, read by
 * separable_conv2d too): kernel_size (required), strides,
 * depth_multiplier, padding, activation, use_bias and MD_DEPTHWISE_KEYS
 * into l. */
int md_get_dwconv_args(const cJSON *lj, const char *where,
                       struct hc_layer_spec *l);

/* Layer l's kernel "L/kernel" of shape (ndim dimensions) with fans fan_in
 * and fan_out, l->kernel_init, into l->var_kernel; with l->use_bias its
 * bias "L/bias" of the kernel's last dimension, l->bias_init, into
 * l->var_bias. */
int md_add_weights(struct hc_model *m, const char *where,
                   struct hc_layer_spec *l, int ndim, const int *shape,
                   int fan_in, int fan_out);

/* ---- initialisers (model_init.c) --------------------------------------- */

/* Optional initialiser key (def when absent or null): a class name
 * ("HeNormal", "he_normal") with Keras's defaults, or an object
 * {"type": "VarianceScaling", "scale": 2, …} with Keras's config keys.
 * An unknown class fails naming the key and listing the classes. */
int md_get_init(const cJSON *obj, const char *key, const char *where,
                enum hc_init def, struct hc_initializer *out);

/* "GlorotUniform, …" every class, for messages; a constant string. */
const char *md_init_list(void);

/* 1 when s names an initialiser class ("HeNormal", "he_normal"). */
int md_init_known(const char *s);

/* The initial values of variable d (index v) into p (d->size floats),
 * from its own stream of the model's seed. */
void md_init_values(const struct hc_var_def *d, uint64_t seed, int v,
                    float *p);

/* Keras's class of in, its config (seed, then its parameters) added to
 * cfg. */
const char *md_init_keras(const struct hc_initializer *in, double seed,
                          cJSON *cfg);

/* Optional regularizer key (none when absent or null): "l2", "L1L2" with
 * Keras 3's defaults (L1 and L2 0.01, L1L2 0 and 0), or {"type": "L2",
 * "l2": 1e-4} with Keras's config keys, each ≥ 0. An unknown class fails
 * naming the key and listing the classes. */
int md_get_reg(const cJSON *obj, const char *key, const char *where,
               struct hc_regularizer *out);

/* "L1, L2, L1L2", for messages. */
const char *md_reg_list(void);

/* 1 when s names a regularizer class ("L2", "l1_l2"). */
int md_reg_known(const char *s);

/* Keras's class of r (not none), its config added to cfg. */
const char *md_reg_keras(const struct hc_regularizer *r, cJSON *cfg);

/* ---- the loss (model_loss.c) -------------------------------------------- */

/* root's "loss" into m->loss and m->loss_par (Keras's defaults for what
 * it does not say). */
int md_read_loss(const cJSON *root, struct hc_model *m);

/* "sparse_categorical_crossentropy, …" every loss, for messages. */
const char *md_loss_list(void);

/* 1 when s names a loss (its name, Keras's class or short name). */
int md_loss_known(const char *s);

/* Keras's class of loss l ("BinaryCrossentropy"). */
const char *md_loss_class(enum hc_loss l);

/* ---- Keras's own files (model_keras.c) ---------------------------------- */

/* 1 when root is a model as Keras serialises it ("class_name" at the top). */
int md_keras_is(const cJSON *root);

/* Translate Keras's model JSON (to_json, Keras 2 or 3, or a .keras file's
 * config.json) into a new tree of hetps's own model format in *out (the
 * caller deletes it). HC_ERR_CONFIG with every unsupported layer and
 * argument named, one line each. */
int md_keras_translate(const cJSON *root, const char *source, cJSON **out);

/* Replace root's "loss" and "optimizer" (hetps's format) with the command
 * line's, those of c that are not NULL. HC_ERR_CONFIG for an --optimizer
 * that is neither a name nor a JSON object. */
int md_apply_compile(cJSON *root, const struct hc_model_compile *c);

#endif
