/*
 * layer.h — the kinds of layer a model may hold, one row each, as
 * darknet's layers and ggml's ops are rows of a table. A row
 * (layer_KIND.c) is all that common/ knows of a kind: its names in
 * hetps's model file and in Keras's, the keys it takes and their checks,
 * its output shape and its variables, and its Keras arguments, read and
 * written. The table (layer.c) is indexed by the kind's id, enum
 * hc_layer_type (model.h); a worker runs a kind through its own half,
 * worker/nn_KIND.c, found by the same id. Nothing outside the rows and
 * the two tables asks which kind a layer is: it asks the row.
 *
 * Rows are constant and shared; every function here may be called from
 * any thread.
 */
#ifndef HC_LAYER_H
#define HC_LAYER_H

#include "model.h"

struct cJSON;

/* What a kind does with an activation (hc_layer_kind.flags). */
#define HC_LAYER_ACT    1u  /* takes "activation" and applies it to its
                             * output */
#define HC_LAYER_LOGITS 2u  /* computes from its weights the values its
                             * activation is applied to: with a flat
                             * output those are a classifier's logits */
#define HC_LAYER_MERGE  4u  /* reads 2 to HC_LAYER_MAX_IN nodes (the others
                             * read exactly one) */
#define HC_LAYER_IDS    8u  /* reads a model input of int64 ids (an
                             * input with "dtype": "int64"), which no
                             * other kind reads */

/* How the Keras reader (model_keras.c) takes one config argument. */
enum hc_keras_take {
    HC_KA_COPY,         /* the same key and value in hetps's format */
    HC_KA_ACT,          /* an activation hetps has: copied */
    HC_KA_IGNORE,       /* no effect on what hetps computes */
    HC_KA_NULL,         /* must be null (regularizers, constraints …) */
    HC_KA_FALSE,        /* must be false or null */
    HC_KA_TRUE,         /* must be true */
    HC_KA_ONES,         /* 1 or (1, 1) */
    HC_KA_LAST,         /* "channels_last" */
    HC_KA_DTYPE,        /* float32, a string or a DTypePolicy */
    HC_KA_GLOROT,       /* a GlorotUniform initializer (its seed is kept) */
    HC_KA_ZEROS,        /* a Zeros initializer */
    HC_KA_INIT,         /* an initializer of keras.initializers, its
                         * config copied (its seed kept) */
    HC_KA_REG,          /* null or a regularizer of keras.regularizers,
                         * its config copied */
    HC_KA_SHAPE,        /* an input shape with the batch: first layer only */
};

struct hc_keras_arg {
    const char *key;
    enum hc_keras_take take;
};

/* The arguments of a Keras layer with a kernel and a bias: its
 * initializers and regularizers, none on its activity, no constraint. */
#define HC_KERAS_WEIGHT_ARGS \
    {"use_bias", HC_KA_COPY}, {"kernel_initializer", HC_KA_INIT}, \
    {"bias_initializer", HC_KA_INIT}, {"kernel_regularizer", HC_KA_REG}, \
    {"bias_regularizer", HC_KA_REG}, {"activity_regularizer", HC_KA_NULL}, \
    {"kernel_constraint", HC_KA_NULL}, {"bias_constraint", HC_KA_NULL}, \
    {"lora_rank", HC_KA_NULL}, {"lora_alpha", HC_KA_IGNORE}

/* The same for DepthwiseConv2D's kernel, which Keras names
 * depthwise_kernel: depthwise_initializer, depthwise_regularizer,
 * depthwise_constraint. */
#define HC_KERAS_DEPTHWISE_ARGS \
    {"use_bias", HC_KA_COPY}, {"depthwise_initializer", HC_KA_INIT}, \
    {"bias_initializer", HC_KA_INIT}, {"depthwise_regularizer", HC_KA_REG}, \
    {"bias_regularizer", HC_KA_REG}, {"activity_regularizer", HC_KA_NULL}, \
    {"depthwise_constraint", HC_KA_NULL}, {"bias_constraint", HC_KA_NULL}

struct hc_layer_kind {
    /* Names. */
    const char *name;           /* hetps's "type" ("maxpool2d"): in
                                 * messages and the signature */
    const char *const *spellings; /* more "type" values read as this kind,
                                 * as md_norm leaves them ("maxpooling2d");
                                 * NULL-terminated, or NULL */
    const char *keras_class;    /* Keras's class ("MaxPooling2D") */
    const char *const *keras_aliases; /* more classes read as this kind
                                 * ("MaxPool2D"); NULL-terminated, or NULL */
    const char *snake;          /* Keras's snake case of the class
                                 * ("max_pooling2d"): default layer names
                                 * and the weights file's groups */
    unsigned flags;             /* HC_LAYER_* */

    /* hetps's model file: the keys besides type, name, device and
     * input_shape (NULL-terminated), then the settings read from them
     * (the keys are already checked). parse sets every setting of l the
     * kind has, with Keras's defaults; NULL for a kind without settings. */
    const char *const *keys;
    int (*parse)(const struct cJSON *lj, const char *where,
                 struct hc_layer_spec *l);

    /* Shape and variables: from l->in (a merge: every input's shape,
     * hc_model_node_shape(m, l->in_from[k])), l->out (preset to l->in)
     * and the kind's variables appended to m (md_add_var, model_impl.h),
     * kernel first. A misfit fails naming the input's shape (a merge:
     * both shapes that differ, and the layers they come from). NULL:
     * out = in, no variables. */
    int (*infer)(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l);

    /* Keras's config: the arguments besides those every layer has
     * (name, trainable, dtype, the input shapes), as
     * {"key", how} ending in {NULL}; and l's values of them written into
     * config (keras_config.c adds the rest). */
    const struct hc_keras_arg *keras_args;
    void (*keras_config)(struct cJSON *config, const struct hc_model *m,
                         const struct hc_layer_spec *l);
};

/* The row of kind t; NULL when t is not a kind. */
const struct hc_layer_kind *hc_layer_kind(enum hc_layer_type t);

/* The kind whose name or spelling is s once md_norm'd ("maxpooling2d"):
 * its id into *t and 0, or -1 when none. */
int hc_layer_kind_named(const char *s, enum hc_layer_type *t);

/* The kind of Keras class cls ("Conv2D", "MaxPool2D"); NULL when none. */
const struct hc_layer_kind *hc_layer_kind_keras(const char *cls);

/* The rows, each in its layer_KIND.c. */
extern const struct hc_layer_kind hc_layer_conv2d;
extern const struct hc_layer_kind hc_layer_maxpool2d;
extern const struct hc_layer_kind hc_layer_flatten;
extern const struct hc_layer_kind hc_layer_dense;
extern const struct hc_layer_kind hc_layer_dropout;
extern const struct hc_layer_kind hc_layer_activation;
extern const struct hc_layer_kind hc_layer_add;
extern const struct hc_layer_kind hc_layer_subtract;
extern const struct hc_layer_kind hc_layer_average;
extern const struct hc_layer_kind hc_layer_multiply;
extern const struct hc_layer_kind hc_layer_concatenate;
extern const struct hc_layer_kind hc_layer_relu;
extern const struct hc_layer_kind hc_layer_leaky_relu;
extern const struct hc_layer_kind hc_layer_avgpool2d;
extern const struct hc_layer_kind hc_layer_globalavgpool2d;
extern const struct hc_layer_kind hc_layer_globalmaxpool2d;
extern const struct hc_layer_kind hc_layer_zeropadding2d;
extern const struct hc_layer_kind hc_layer_reshape;
extern const struct hc_layer_kind hc_layer_depthwise_conv2d;
extern const struct hc_layer_kind hc_layer_separable_conv2d;
extern const struct hc_layer_kind hc_layer_layer_normalization;
extern const struct hc_layer_kind hc_layer_batchnorm;
extern const struct hc_layer_kind hc_layer_embedding;
extern const struct hc_layer_kind hc_layer_globalavgpool1d;

#endif
