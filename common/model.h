/*
 * model.h — a model file: a graph of layers in JSON (a Keras-Sequential-like
 * list, each layer reading the one before it unless it names its
 * "inputs"), with the input shapes, loss, optimizer, metrics and training
 * settings.
 *
 *   { "name": "fashion_cnn", "input_shape": [28, 28, 1], "seed": 42,
 *     "layers": [
 *       {"type": "conv2d", "filters": 32, "kernel_size": [3, 3],
 *        "activation": "relu"},
 *       {"type": "maxpool2d", "pool_size": [2, 2]},
 *       {"type": "flatten"},
 *       {"type": "dense", "units": 10, "activation": "softmax",
 *        "device": "cpu:1"} ],
 *     "loss": "sparse_categorical_crossentropy",
 *     "optimizer": {"type": "adam", "learning_rate": 0.001, "beta_1": 0.9,
 *                   "beta_2": 0.999, "epsilon": 1e-7},
 *     "metrics": ["accuracy"], "batch_size": 64, "epochs": 10 }
 *
 * Loading infers every layer's output shape (a mismatch names the layer and
 * both shapes) and yields the variable definitions in Keras's layout and
 * names ("conv2d/kernel" (kh, kw, in, out), "conv2d/bias" (out),
 * "dense/kernel" (in, out), "dense/bias" (out)), with Keras's default
 * initialisers (Glorot-uniform kernels, zero biases) seeded by `seed`.
 * "shuffle" (default true, Keras's fit(shuffle=True)): false reads a
 * streamed training file (click-through data) in file order every epoch,
 * and an in-memory set in its order (a worker's strided share).
 * Activations are NHWC like Keras; shapes below exclude the batch.
 *
 * The graph. layers[] is in topological order: layer i reads n_in nodes,
 * in_from[k] naming each — j ≥ 0 the output of layers[j] (j < i), or
 * −1 − q the model's input q (inputs[q]). The model's one output is the
 * last layer; every other layer is read by some layer. A Sequential model
 * is the chain: layer i reads node i − 1 (layer 0 the input), its one
 * input named "input". hc_model_is_chain tells the two apart; the
 * signature of a chain is what it was before graphs existed.
 */
#ifndef HC_MODEL_H
#define HC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "eval_metric.h"
#include "optim_conf.h"

#define HC_MODEL_MAX_LAYERS 64
#define HC_MODEL_MAX_VARS   128
#define HC_NAME_MAX         64
#define HC_MODEL_MAX_INPUTS 8       /* named inputs of a model */
#define HC_LAYER_MAX_IN     8       /* nodes one layer reads (merges) */

/* A layer's kind: its row in the layer table (layer.h), which says all
 * the rest. The order is the table's and that of messages listing them. */
enum hc_layer_type {
    HC_LAYER_CONV2D,
    HC_LAYER_MAXPOOL2D,
    HC_LAYER_FLATTEN,
    HC_LAYER_DENSE,
    HC_LAYER_DROPOUT,
    HC_LAYER_ACTIVATION,    /* a standalone activation layer */
    HC_LAYER_ADD,           /* merges: several inputs, one output */
    HC_LAYER_SUBTRACT,
    HC_LAYER_AVERAGE,
    HC_LAYER_MULTIPLY,
    HC_LAYER_CONCATENATE,
    HC_LAYER_RELU,          /* Keras's ReLU layer */
    HC_LAYER_LEAKY_RELU,    /* Keras's LeakyReLU layer */
    HC_LAYER_AVGPOOL2D,
    HC_LAYER_GLOBALAVGPOOL2D,
    HC_LAYER_GLOBALMAXPOOL2D,
    HC_LAYER_ZEROPADDING2D,
    HC_LAYER_RESHAPE,
    HC_LAYER_DEPTHWISE_CONV2D,
    HC_LAYER_SEPARABLE_CONV2D,
    HC_LAYER_LAYER_NORMALIZATION,
    HC_LAYER_BATCHNORM,     /* Keras's BatchNormalization */
    HC_LAYER_EMBEDDING,     /* a row-sparse table's rows by id */
    HC_LAYER_GLOBALAVGPOOL1D,
    HC_LAYER_COUNT          /* the number of kinds, not one */
};

/* An activation, Keras's function of the same name (keras.activations):
 * relu6 = min(max(x, 0), 6); elu = x for x > 0, else exp(x) − 1 (alpha
 * 1); gelu = x·Φ(x), the exact form (Keras's approximate=False); swish
 * (Keras 3's silu) = x·sigmoid(x); softplus = log(1 + exp(x));
 * hard_sigmoid = relu6(x + 3) / 6 (Keras 3's). The order is that of
 * messages listing them; a new one goes before HC_ACT_COUNT. */
enum hc_act {
    HC_ACT_LINEAR,
    HC_ACT_RELU,
    HC_ACT_SIGMOID,
    HC_ACT_TANH,
    HC_ACT_SOFTMAX,
    HC_ACT_RELU6,
    HC_ACT_ELU,
    HC_ACT_GELU,
    HC_ACT_SWISH,
    HC_ACT_SOFTPLUS,
    HC_ACT_HARD_SIGMOID,
    HC_ACT_COUNT            /* the number of activations, not one */
};

/* A loss, Keras's (keras.losses) with its settings in struct
 * hc_loss_par; the per-sample value is Keras's, the batch's loss their
 * mean. The first two keep their numbers (the signature has them).
 *   sparse_categorical_crossentropy: integer labels, −log p[label];
 *   categorical_crossentropy: −Σ t·log p over one-hot targets t, which
 *     the worker makes from the integer labels;
 *   binary_crossentropy: mean over the outputs of −(t·log p + (1 − t)·
 *     log(1 − p)), p clipped to [1e-7, 1 − 1e-7] and 1e-7 added inside
 *     each log as Keras does, or from logits z stably;
 *   mse, mae: mean of (y − t)², |y − t|;
 *   huber: mean of ½e² where |e| ≤ delta, else delta·(|e| − ½delta).
 * The two cross-entropies over classes take a softmax output (whose
 * logits they use, as Keras on TensorFlow does) or, with from_logits,
 * a linear one. */
enum hc_loss {
    HC_LOSS_SPARSE_CCE,
    HC_LOSS_MSE,
    HC_LOSS_CCE,
    HC_LOSS_BCE,
    HC_LOSS_MAE,
    HC_LOSS_HUBER,
};

/* A loss's settings, with Keras's defaults (hc_model.loss_par). */
struct hc_loss_par {
    int from_logits;            /* cross-entropies: the output is logits */
    float label_smoothing;      /* categorical / binary: t ← t·(1 − s) +
                                 * s / N (binary: + s / 2) */
    float delta;                /* huber (1) */
};

/* A variable's initialiser: Keras's (keras.initializers) with its
 * formula and defaults; the parameters are in struct hc_init_par. The
 * first two are the ones every model had before the others, and keep
 * their numbers (the signature has them). HeNormal, HeUniform,
 * GlorotNormal, LecunNormal and LecunUniform are VarianceScaling with
 * Keras's settings; GlorotUniform is its own, the values it always had. */
enum hc_init {
    HC_INIT_GLOROT_UNIFORM,     /* U(±sqrt(6 / (fan_in + fan_out))) */
    HC_INIT_ZEROS,
    HC_INIT_CONSTANT,           /* a (Ones: a = 1) */
    HC_INIT_RANDOM_NORMAL,      /* N(a, b²) */
    HC_INIT_RANDOM_UNIFORM,     /* U[a, b) */
    HC_INIT_TRUNCATED_NORMAL,   /* N(a, b²), redrawn beyond 2b of a */
    HC_INIT_VARIANCE_SCALING,   /* scale a over mode's fan, dist */
};

/* Which fan VarianceScaling divides its scale by. */
enum hc_fan { HC_FAN_IN, HC_FAN_OUT, HC_FAN_AVG };

/* VarianceScaling's distribution, s = scale / fan: truncated normal of
 * stddev sqrt(s) / 0.87962566103423978 (the stddev of a unit normal
 * truncated at ±2, so the values have variance s), normal of stddev
 * sqrt(s), uniform within ±sqrt(3·s). */
enum hc_dist { HC_DIST_TRUNCATED, HC_DIST_NORMAL, HC_DIST_UNIFORM };

struct hc_init_par {
    float a, b;                 /* see enum hc_init */
    enum hc_fan mode;           /* VarianceScaling */
    enum hc_dist dist;          /* VarianceScaling */
};

/* An initialiser as a layer names it. */
struct hc_initializer {
    enum hc_init kind;
    struct hc_init_par par;
};

/* A penalty on a variable, Keras's L1, L2 and L1L2: l1·Σ|w| + l2·Σw²
 * added to the loss, its gradient l1·sign(w) + 2·l2·w to the variable's.
 * Both 0: none. */
struct hc_regularizer {
    float l1, l2;
};

/* A tensor shape without the batch dimension: (H, W, C) for images,
 * (N) for flat vectors (rank 1, dims[0] = N), (steps, C) for sequences
 * (rank 2: an embedding's output, one row per id). */
struct hc_shape {
    int rank;               /* 1, 2 or 3 */
    int dims[3];
};

struct hc_layer_spec {
    enum hc_layer_type type;
    char name[HC_NAME_MAX];     /* Keras-style default: conv2d, conv2d_1, dense… */
    char device[32];            /* explicit placement ("cpu:1"), "" = default */
    enum hc_act act;            /* fused activation (conv2d, dense, activation) */
    int filters;                /* conv2d */
    int depth_multiplier;       /* depthwise_conv2d, separable_conv2d:
                                 * outputs per input channel */
    struct hc_initializer pointwise_init; /* separable_conv2d: its second
                                 * kernel's (the first's is kernel_init) */
    struct hc_regularizer pointwise_reg;
    float epsilon;              /* layer_normalization, batchnorm: added to
                                 * the variance (1e-3; 0 others) */
    int center, scale;          /* layer_normalization, batchnorm: has
                                 * beta, gamma (1, 1) */
    int kh, kw;                 /* conv2d kernel size */
    int sh, sw;                 /* conv2d / maxpool2d / avgpool2d strides */
    int same;                   /* padding: 1 = "same", 0 = "valid" */
    int ph, pw;                 /* maxpool2d / avgpool2d pool size */
    int pad[4];                 /* zeropadding2d: rows on top, bottom,
                                 * columns on the left, right */
    struct hc_shape target;     /* reshape: target_shape as given, one
                                 * dimension may be −1 */
    int units;                  /* dense; embedding: output_dim */
    uint64_t input_dim;         /* embedding: rows of its table (ids in
                                 * [0, input_dim)), up to 2^62 */
    float rate;                 /* dropout */
    float max_value;            /* relu: the ceiling, < 0 for none */
    float negative_slope;       /* relu, leaky_relu */
    float threshold;            /* relu */
    int use_bias;               /* conv2d / dense (default 1) */
    int axis;                   /* concatenate, batchnorm: Keras's axis, the
                                 * batch being axis 0 (−1 the last); 0
                                 * others */
    float momentum;             /* batchnorm (0.99) */
    struct hc_initializer mm_init, mv_init; /* batchnorm: moving_mean,
                                 * moving_variance (Zeros, Ones); gamma's
                                 * and beta's are kernel_init and
                                 * bias_init, their penalties kernel_reg
                                 * and bias_reg */
    int n_in;                   /* nodes it reads: 1, or 2 to
                                 * HC_LAYER_MAX_IN for a merge */
    int in_from[HC_LAYER_MAX_IN]; /* each: j ≥ 0 layers[j], −1 − q the
                                 * model's input q (see the top) */
    struct hc_initializer kernel_init, bias_init;   /* conv2d / dense */
    struct hc_regularizer kernel_reg, bias_reg;     /* conv2d / dense */
    struct hc_shape in, out;    /* inferred at load; in is in_from[0]'s */
    int var_kernel, var_bias;   /* indices into hc_model.vars, -1 if none */
    int var_first, n_var;       /* every variable of the layer, in Keras's
                                 * order (its weights file's vars/0, 1, …):
                                 * vars[var_first … var_first + n_var − 1],
                                 * appended together by its kind's infer */
};

struct hc_var_def {
    char name[HC_NAME_MAX * 2]; /* "conv2d/kernel" */
    int ndim;
    int shape[4];               /* Keras layout */
    size_t size;                /* product of shape */
    enum hc_init init;
    int fan_in, fan_out;        /* for Glorot: kh*kw*in, kh*kw*out / in, out */
    struct hc_init_par init_par; /* the initialiser's parameters */
    struct hc_regularizer reg;  /* its penalty (none: zeros) */
    /* A row-sparse table (an embedding's): table_rows > 0 rows (its
     * input_dim, up to 2^62) of shape[1] floats, shape = (table_rows as an
     * int when it fits, else 0; dim). Split by row over every shard
     * (rowmap.h), never laid out in blocks: size is 0, and a row never
     * written is hc_init_row's. 0 for a dense variable. */
    uint64_t table_rows;
    int moving;                 /* 1: not trainable — a batch norm's
                                 * moving statistic, which the shards move
                                 * by the pushed batch moments, outside the
                                 * optimizer; 0 (the default): trained */
    float momentum;             /* moving: moving = moving·momentum
                                 * + batch·(1 − momentum) */
    int moments_of;             /* moving, a moving_variance: the index
                                 * of its layer's moving_mean, the variable
                                 * before it (the batch's mean is needed to
                                 * pool variances); −1 otherwise */
};

/* A named input of the model. */
struct hc_model_input {
    char name[HC_NAME_MAX];     /* "input" when the file names none */
    struct hc_shape shape;
    int ids;                    /* "dtype": "int64": (N) row ids, read by
                                 * embeddings only. In a sample's row of
                                 * floats (worker/nn.h) each id takes two
                                 * floats' bytes, the int64 as it is
                                 * (HC_ID_FLOATS), never a float's value */
};

/* Floats of a sample's row an int64 id takes (its 8 bytes, copied). */
#define HC_ID_FLOATS 2

struct hc_model {
    char name[HC_NAME_MAX];
    char source[512];           /* file it came from, for messages */
    struct hc_shape input;      /* = inputs[0].shape */
    int n_inputs;               /* 1 to HC_MODEL_MAX_INPUTS */
    struct hc_model_input inputs[HC_MODEL_MAX_INPUTS];
    int n_layers;
    struct hc_layer_spec layers[HC_MODEL_MAX_LAYERS];
    int n_vars;
    struct hc_var_def vars[HC_MODEL_MAX_VARS];
    size_t n_params;            /* sum of vars[i].size */
    enum hc_loss loss;
    struct hc_loss_par loss_par;
    int n_classes;              /* output units: classes for sparse CCE (last
                                   layer softmax, or linear logits); targets
                                   per sample for mse */
    struct hc_optim_conf optim;
    int metric_accuracy;        /* "accuracy" is among metrics */
    int n_metrics;              /* 0 to HC_MODEL_MAX_METRICS */
    struct hc_eval_metric metrics[HC_MODEL_MAX_METRICS]; /* in file order */
    int batch_size;
    int epochs;
    uint64_t seed;
    int file_order;             /* "shuffle": false (default 0: shuffle) */
    uint64_t signature;         /* hash of layers, shapes, loss, optimizer */
};

/* Parse a model from JSON text; `source` names it in messages. On error
 * returns HC_ERR_CONFIG with a message naming the key or layer. */
int hc_model_parse(const char *json, size_t len, const char *source,
                   struct hc_model *out);
/* A model file: hetps's JSON, Keras's model.to_json() (Keras 2 or 3) or a
 * .keras archive (its config.json), told apart by their content. */
int hc_model_load(const char *path, struct hc_model *out);

/* An optimizer value alone, as a model file's "optimizer" holds it ("adam"
 * or {"type": "sgd", "learning_rate": 0.1, "momentum": 0.9}), read as the
 * model reader reads it (Keras's names and defaults, hc_optim_validate):
 * what a store of format 1 kept as JSON text is converted with. Returns
 * HC_OK or HC_ERR_CONFIG naming `source`; *out unchanged on error. */
int hc_model_optim_from_json(const char *text, size_t len, const char *source,
                             struct hc_optim_conf *out);

/* What model.compile() would say, from the command line (--loss,
 * --optimizer): each non-NULL member replaces the file's, as compiling a
 * loaded Keras model again does. loss is a name
 * ("sparse_categorical_crossentropy", "mse"); optimizer a name ("adam",
 * "sgd") or an optimizer object in JSON ({"type": "sgd",
 * "learning_rate": 0.05, "momentum": 0.9}). A bad value fails as it would
 * in the file, naming the flag. */
struct hc_model_compile {
    const char *loss;
    const char *optimizer;
};

/* hc_model_load with the command line's compile settings (c may be NULL). */
int hc_model_load_compiled(const char *path, const struct hc_model_compile *c,
                           struct hc_model *out);

/* Write the Keras default initial values of every variable into params,
 * laid out variable after variable in definition order (n_params floats),
 * deterministically from m->seed. */
void hc_model_init_params(const struct hc_model *m, float *params);

/*
 * The initial values of row `row` of a row-sparse table, variable `var` of
 * a model with `seed`: `dim` floats of initialiser `in`, its fans those of
 * an (input_dim, dim) matrix as Keras computes them (fan_in input_dim,
 * fan_out dim). Counter-based: the row's own splitmix64 stream starts at
 *     hc_mix64(hc_mix64(seed ^ hc_mix64(var + HC_GOLDEN_GAMMA)) ^ hc_mix64(row))
 * so any process, shard, restart or reshard computes the same row without
 * drawing the rows before it. Reentrant.
 */
void hc_init_row(const struct hc_initializer *in, uint64_t input_dim,
                 uint32_t dim, uint64_t seed, uint32_t var, uint64_t row,
                 float *p);

/* Offset (in floats) of variable v in the flat parameter vector. */
size_t hc_model_var_offset(const struct hc_model *m, int v);

/* 1 when m is a chain: one input, layer i reading node i − 1 alone. */
int hc_model_is_chain(const struct hc_model *m);

/* The shape of node j of m (j ≥ 0 layers[j]'s output, −1 − q input q);
 * NULL when there is no such node. */
const struct hc_shape *hc_model_node_shape(const struct hc_model *m, int j);

/* The name of node j ("conv2d", an input's name); "?" when none. */
const char *hc_model_node_name(const struct hc_model *m, int j);

/* Keras's name of activation a ("hard_sigmoid"), "unknown" when a is
 * none. */
const char *hc_act_name(enum hc_act a);

/* Keras's name of loss l ("binary_crossentropy"), "unknown" when none. */
const char *hc_loss_name(enum hc_loss l);

/* 1 when loss l reads a class index per sample (sparse and categorical
 * cross-entropy): its labels must lie in [0, n_classes). */
int hc_loss_takes_classes(enum hc_loss l);

/* The activation named s, Keras's name or an alias ("silu" is swish),
 * matched case-insensitively without underscores: its id into *a and 0,
 * or -1 when none. */
int hc_act_named(const char *s, enum hc_act *a);

/* "relu", "sigmoid", … every activation's name, comma-separated, for
 * messages; a constant string. */
const char *hc_act_list(void);
const char *hc_layer_type_name(enum hc_layer_type t);

#endif
