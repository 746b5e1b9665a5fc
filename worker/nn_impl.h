/*
 * nn_impl.h — the inside of a wk_net, shared by the files that build it
 * (nn_build.c), run it (nn.c) and the worker's half of each layer kind
 * (nn_KIND.c, listed in nn_kind.c). Nothing outside worker/nn*.c includes
 * this; the contract is nn.h.
 *
 * A kind of layer is one row of the layer table (common/layer.h: names,
 * keys, shapes, variables) and, here, one struct nn_kind found by the
 * same id: how the net checks a layer of that kind and sizes it, its
 * buffers, and its forward and backward passes, in the backend's ops
 * (backend.h) only. nn_build.c and nn.c do what every layer has and ask
 * the kind for the rest; neither asks which kind a layer is.
 *
 * A net is the model's graph (common/model.h): layers in topological
 * order, each reading n_in nodes (src: an earlier layer, or −1 the net's
 * input). Every layer keeps its output (backward reads it); the gradients
 * of the outputs live in each device's pool of gradient buffers, planned
 * once by liveness (nn_build.c, plan_grads): a buffer is taken when the
 * first of a node's readers writes its gradient and given back once the
 * node's own backward has run, and a layer whose backward works in place
 * (NN_IN_PLACE) hands its buffer on to the one node it reads. Where a node
 * has several readers their gradients are summed into its buffer (gacc).
 *
 * A net runs on one or more backends (explicit placement): each layer
 * names the backend it runs on (nn_layer.dev, an index into wk_net.devs)
 * and keeps every buffer it writes there. Where a layer reads a node on
 * another backend the activation, and in backward its gradient, cross on
 * that edge (nn.c, cross()).
 */
#ifndef WK_NN_IMPL_H
#define WK_NN_IMPL_H

#include "nn.h"

#define NO_VAR ((size_t)-1)

/* Variables a layer may have beyond a kernel and a bias. */
#define NN_MAX_EXTRA 2

/* Distinct backends one net may run on. */
#define NN_MAX_DEVS 16

/* Gradient buffers of one device: at most one per node, and one more. */
#define NN_MAX_GBUF (HC_MODEL_MAX_LAYERS + 1)

/* One backend of the net and what lives on it. */
struct nn_dev {
    struct wk_backend *be;
    int all_params;         /* holds every layer with parameters: its
                             * parameter layout is the host one (one
                             * transfer each way) */
    size_t n_params;        /* floats of parameters its layers own */
    float *params_d;        /* (n_params) non-host backends only */
    float *grads_d;         /* (n_params) non-host backends only */
    size_t max_act;         /* floats per sample of its largest activation */
    int n_gbuf;             /* gradient buffers the plan needs here */
    float *gbuf[NN_MAX_GBUF]; /* (max_B, max_act) each: output gradients */
    size_t ws_floats;       /* its layers' shared workspace (NN_SHARED_WS):
                             * the largest one's for the whole batch, but
                             * no more than its largest activation's
                             * (max_B·max_act) nor its backend's ws_cache,
                             * or one sample's if larger */
    float *ws;              /* (ws_floats) that workspace, or NULL */
    const struct nn_layer *ws_holder; /* the layer whose unrolled input ws
                             * holds now (its forward's), or NULL */
    int need_scratch;       /* the plan sums or crosses a gradient here */
    float *scratch;         /* (max_B, max_act) that sum's term, or NULL */
};

struct nn_kind;

struct nn_layer {
    const struct nn_kind *kind;
    char name[HC_NAME_MAX + 32];   /* "layer 3 (dense)", for messages */
    int dev;                /* index into wk_net.devs */
    struct wk_backend *be;  /* = devs[dev].be */
    enum hc_act act;        /* applied in forward; LINEAR for the fused
                             * softmax of the output */
    int act_in_loss;        /* the output layer whose softmax the fused
                             * cross-entropy applies (act is LINEAR) */
    int n_in;               /* nodes it reads (1; a merge 2 or more) */
    int src[HC_LAYER_MAX_IN]; /* each: a layer's index, or -1 the input */
    int src_size[HC_LAYER_MAX_IN]; /* floats per sample of each */
    int cross[HC_LAYER_MAX_IN]; /* that node is on another backend and
                             * not both host memory: copied in forward
                             * (xin), its gradient copied back */
    float *xin[HC_LAYER_MAX_IN]; /* (max_B, src_size[k]) those copies */
    const float *xs[HC_LAYER_MAX_IN]; /* inputs of the last forward */
    float coef[HC_LAYER_MAX_IN]; /* add, subtract, average: each input's
                             * weight in the output */
    int outer;              /* concatenate: rows per sample of its 2-D
                             * view (dimensions before the axis) */
    int blk_cols[HC_LAYER_MAX_IN]; /* concatenate: each input's columns */
    int blk_off[HC_LAYER_MAX_IN]; /* concatenate: where they start */
    int need_grad;          /* its output's gradient is needed: it, or a
                             * node it reads from, has parameters */
    int gbuf;               /* its output gradient's buffer: index into
                             * devs[dev].gbuf */
    int alias;              /* in-place backward: the gradient it leaves
                             * in its buffer is already its input's */
    int gacc[HC_LAYER_MAX_IN]; /* input k's gradient is added to what its
                             * node's other readers wrote there */
    int galias[HC_LAYER_MAX_IN]; /* NN_SUM_GRAD: input k's node took this
                             * layer's gradient buffer, which is already
                             * input k's gradient (dy) */
    int in_size, out_size;  /* floats per sample (in: its first input) */
    int out_c;              /* last dimension of the output (row length) */
    struct wk_geom g;       /* conv2d, depthwise_conv2d,
                             * separable_conv2d, the pools, zeropadding2d
                             * (a 1×1 window), g.B set per call */
    int units;              /* dense; depthwise_conv2d, separable_conv2d:
                             * the depth_multiplier */
    float rate;             /* dropout */
    float eps;              /* layer_normalization, batchnorm: epsilon */
    float max_value, slope, threshold; /* relu, leaky_relu (layer_relu.c) */
    int direct;             /* conv2d 1×1, stride 1: the input is the cols */
    int flip;               /* conv2d, stride 1, not direct: backward's dX
                             * is im2col(dY) times the kernel turned round
                             * (nn_conv2d.c), that kernel in aux */
    size_t ws_size;         /* floats per sample of its workspace (conv2d:
                             * cols; separable_conv2d: its depthwise
                             * output; layer_normalization: x̂), kept
                             * under 2^31 at max_batch */
    int pre_pool;           /* NN_EPILOGUE_OUT (conv2d) feeding a layer that
                             * applies its bias and activation (nn_build.c,
                             * fuse_epilogue) */
    int post_act;           /* NN_EPILOGUE_IN (maxpool2d) applying act and
                             * the bias at off_b of the layer before it */
    size_t off_w, off_b;    /* offsets in the host params, NO_VAR if none */
    size_t n_w, n_b;        /* their sizes (0 with NO_VAR) */
    size_t doff_w, doff_b;  /* the same in the device's params / grads */
    struct hc_regularizer reg_w, reg_b; /* their penalties (none: 0, 0) */
    int n_extra;            /* variables beyond a kernel and a bias, set
                             * by the kind's setup (nn_check_var) */
    size_t off_x[NN_MAX_EXTRA], size_x[NN_MAX_EXTRA]; /* host offsets and
                             * sizes of those */
    size_t doff_x[NN_MAX_EXTRA]; /* the same in the device's params */
    struct hc_regularizer reg_x[NN_MAX_EXTRA]; /* their penalties */
    float *out;             /* (max_B, out_size) own buffer, or NULL */
    float *cols;            /* (max_B, ws_size) = (max_B·OH·OW, kh·kw·C)
                             * conv2d workspace: its device's ws */
    const struct nn_layer **ws_holder; /* NN_SHARED_WS: &its device's
                             * ws_holder */
    int dx_lo, dx_hi;       /* the columns [dx_lo, dx_hi) of a sample's
                             * input gradient that its one reader passes
                             * on (nn_build.c, plan_dx_cols; dense
                             * computes only those): [0, in_size), or a
                             * concatenation's inputs that need one */
    int dx_add;             /* NN_ADDS: this backward_input call adds to
                             * dx (set by nn.c per call) */
    int ws_chunk;           /* NN_SHARED_WS: samples whose workspace fits
                             * the device's at once (1 to max_B) */
    int32_t *idx;           /* (max_B, out_size) maxpool2d argmax */
    float *pre;             /* (max_B, out_size) conv2d / dense: the
                             * values before an activation whose
                             * derivative reads them (wk_act_reads_input),
                             * else NULL */
    float *aux;             /* (max_B, aux_size) a kind's second buffer:
                             * separable_conv2d the gradient of its
                             * depthwise output, layer_normalization
                             * 1 / σ per row; conv2d with flip its kernel
                             * turned round, (C, kh·kw·F), not per
                             * sample */
    size_t aux_size;
    const float *w2;        /* separable_conv2d: its pointwise kernel in
                             * the last forward's params */
    const float *x;         /* input of the last forward (own backend) */
    const float *y;         /* output of the last forward (own or alias) */
    uint64_t seed;          /* dropout seed of the last forward, 0 = off */
    /* embedding (nn_embedding.c): its table, a row-sparse variable whose
     * step's rows the trainer sets (wk_net_set_rows) into aux (max_B·N,
     * out_c) with each position's row in idx (max_B, N) */
    int table;              /* the table's variable */
    int n_ids;              /* ids a sample (N) */
    size_t n_rows;          /* rows set for the step (≤ B·N) */
    int rows_B;             /* the batch they were set for, 0 none */
    float *rgrad;           /* (max_B·N, out_c) their gradients, summed by
                             * row in backward */
};

struct wk_net {
    int n_devs;
    struct nn_dev devs[NN_MAX_DEVS];
    struct wk_backend *in_be;   /* backend of the first layer: the inputs' */
    struct wk_backend *out_be;  /* backend of the last layer (loss) */
    int n_layers;
    struct nn_layer layers[HC_MODEL_MAX_LAYERS];
    int max_batch;
    int n_inputs;           /* the model's inputs, 1 or more */
    size_t in_off[HC_MODEL_MAX_INPUTS]; /* where input q starts in a
                             * sample's row of x (nn.h) */
    float *x_split;         /* (max_B, in_size) host, several inputs
                             * only: x regrouped input by input, input q
                             * at B·in_off[q] as (B, its size) */
    int first_param;        /* the first layer with parameters */
    size_t in_size, out_size, n_params;
    size_t grad_peak;       /* floats per sample of the output gradients
                             * live at once at the plan's widest point,
                             * each at its node's own size */
    enum hc_loss loss;
    struct hc_loss_par loss_par;
    int fused;              /* softmax (or logits) output + sparse or
                             * categorical cross-entropy */
    float *probs;           /* (max_B, N) fused dense output: softmax(z) */
    float *loss_d, *hit_d;  /* (max_B) per-sample loss and hit, on out_be */
    float *loss_h, *hit_h;  /* (max_B) host copies (device backends) */
    float *x_d;             /* (max_B, in_size) on in_be, device only */
    float *targets_d;       /* (max_B, N) on out_be, device only, all
                             * losses but sparse CCE */
    float *targets_h;       /* (max_B, N) host: the targets of the last
                             * wk_net_loss, made from the labels or given,
                             * label smoothing applied */
    int *labels_d;          /* (max_B)    on out_be, device only, CCE */
    float *stage_h;         /* (max_B, max crossing size) host staging of
                             * a copy between two device backends */
    void (*on_grads)(void *arg, size_t from); /* wk_net_on_grads */
    void *on_grads_arg;
    /* state of the current step */
    int B;
    int stage;              /* 0 nothing, 1 forward done, 2 loss done */
    const float *logits;    /* (B, N) fused: z */
    const float *output;    /* (B, N) network output */
    float *probs_cur;       /* (B, N) fused: softmax(z), = output */
    const int *labels_cur;  /* backend memory */
    const float *targets_cur;
    uint64_t seed, counter;
    size_t first_sample;    /* dropout masks start at this sample */
    double penalty;         /* the regularizers' penalty at the last
                             * forward's parameters, added to each
                             * sample's loss as Keras adds it to the
                             * batch's */
};

/* ---- a kind's half (nn_KIND.c) ----------------------------------------- */

/* What a kind's setup checks a layer against. */
struct nn_setup {
    const struct hc_model *m;
    const char *layer;          /* "layer 3 (dense)" */
    const char *where;          /* "model NAME, layer 3 (dense)" */
    int li;                     /* the layer's index */
    int n_in;                   /* the nodes it reads, and their shapes */
    const struct hc_shape *ins[HC_LAYER_MAX_IN];
    const size_t *var_off;      /* (n_vars) offsets in the host params */
    int *owner;                 /* (n_vars) layer using each, -1 none */
};

/* nn_kind.flags */
#define NN_BIAS         1u  /* has a bias (var_bias) of its output's last
                             * dimension, added with its activation */
#define NN_EPILOGUE_OUT 2u  /* may leave its bias and activation to the
                             * next layer, one with NN_EPILOGUE_IN */
#define NN_EPILOGUE_IN  4u  /* commutes with a per-channel bias and any
                             * non-decreasing activation: may apply those
                             * of the layer before it to its own output */
#define NN_IN_PLACE     8u  /* backward_input always leaves the input's
                             * gradient in dy (returns 0) */
#define NN_SHARED_WS   16u  /* its workspace (ws_size floats a sample) is
                             * its device's, shared by every such layer:
                             * l->cols holds nothing from one call (forward,
                             * or backward_params with backward_input) to
                             * the next */
#define NN_ADDS        32u  /* backward_input adds its input's gradient to
                             * what dx holds when l->dx_add is set (a node
                             * with several readers), needing no scratch */
#define NN_SUM_GRAD    64u  /* a weighted sum (add, subtract, average):
                             * input k's gradient is coef[k]·dy, so an
                             * input of coef 1 read by it alone may take
                             * its gradient buffer as it is (galias) */
#define NN_TABLE      128u  /* reads ids and a row-sparse table
                             * (embedding): needs its output's gradient
                             * though it has no dense parameters */

struct nn_kind {
    unsigned flags;

    /* Check spec s against its input shape in (s->in, already checked
     * equal; a merge's others are c->ins) and fill l's settings, its
     * kernel (nn_check_var) and ws_size; *out (preset to in) gets the
     * output shape the settings give. Errors name c->where. NULL: out =
     * in, nothing to check. */
    int (*setup)(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out);

    /* l's buffers on l->be for batches of up to B samples: l->out
     * (nn_alloc_f) unless its output is its input, and its workspace.
     * wk_net_free frees out, cols, idx, pre and aux. NULL: none. */
    int (*alloc)(struct nn_layer *l, size_t B);

    /* Forward of B samples x (B, in_size) with the device's params:
     * l->y (preset to l->out) is its output. training: a training
     * forward (dropout). NULL: the output is the input (l->y = x). */
    void (*forward)(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B,
                    int training);

    /* Backward, given dy (B, out_size), the gradient of its output
     * (which it may rewrite): backward_params writes its parameter
     * gradients into grads (NULL: it has none); backward_input then,
     * when its input's gradient is needed, writes it to dx and returns
     * 1, or leaves it in dy and returns 0 (NULL: dy is the input's
     * gradient already). */
    void (*backward_params)(struct nn_layer *l, float *grads, float *dy,
                            int B);
    int (*backward_input)(struct nn_layer *l, const float *params,
                          float *dy, float *dx, int B);
    /* Both at once, where one pass over the batch serves both (a kind
     * with one input, optional): the parameter gradients into grads and,
     * dx not NULL, the input's gradient into dx (added with dx_add);
     * returns 1, or 0 having done nothing, for the two calls above. */
    int (*backward_both)(struct nn_layer *l, const float *params,
                         float *grads, float *dy, float *dx, int B);

    /* A merge (reads n_in ≥ 2 nodes, no parameters), instead of forward
     * and backward_input: forward_n writes l->out from xs[0..n_in − 1];
     * backward_in writes the gradient of input k, from dy, into dx (with
     * accumulate: adds it to dx). */
    void (*forward_n)(struct nn_layer *l, const float *const *xs, int B);
    void (*backward_in)(struct nn_layer *l, int k, const float *dy,
                        float *dx, int accumulate, int B);

    /* The columns [*lo, *hi) of a sample's output gradient that backward
     * reads, given which of its inputs' nodes need a gradient (net's
     * need_grad, planned); NULL: all of them. */
    void (*grad_cols)(const struct wk_net *net, const struct nn_layer *l,
                      int *lo, int *hi);
};

/* The half of kind t (nn_kind.c); NULL when t is not a kind. */
const struct nn_kind *nn_kind_of(enum hc_layer_type t);

extern const struct nn_kind nn_conv2d, nn_maxpool2d, nn_flatten, nn_dense,
    nn_dropout, nn_activation, nn_add, nn_subtract, nn_average,
    nn_multiply, nn_concatenate, nn_relu, nn_avgpool2d, nn_globalavgpool2d,
    nn_globalmaxpool2d, nn_zeropadding2d, nn_reshape, nn_depthwise_conv2d,
    nn_separable_conv2d, nn_layer_normalization,
    nn_batchnorm, nn_embedding, nn_globalavgpool1d;

/* What nn_build.c gives the kinds' setup and alloc. */

/* Check variable v (what: "kernel", "bias") of the layer: in range,
 * `size` floats, used by no other layer; records it as the layer's and
 * returns its host offset in *off and its size in *n. HC_ERR_MISMATCH
 * naming c->where. */
int nn_check_var(const struct nn_setup *c, int v, const char *what,
                 size_t size, size_t *off, size_t *n);

/* nn_check_var for the layer's next extra variable (off_x[n_extra]),
 * its penalty taken from the model. */
int nn_check_extra(const struct nn_setup *c, struct nn_layer *l, int v,
                   const char *what, size_t size);

/* 1 when l has any variable (kernel, bias or extra). */
int nn_layer_has_vars(const struct nn_layer *l);

/* HC_ERR_CONFIG naming c->where unless in is an image (H, W, C). */
int nn_need_image(const struct nn_setup *c, const struct hc_layer_spec *s,
                  const struct hc_shape *in);

/* A window layer's geometry (conv2d, maxpool2d) on its image input: l->g
 * for a kh × kw window with strides sh, sw and s's padding, and out
 * (H', W', C); HC_ERR_CONFIG naming c->where when it does not fit. */
int nn_window(const struct nn_setup *c, const struct hc_layer_spec *s,
              const struct hc_shape *in, int kh, int kw, int sh, int sw,
              struct nn_layer *l, struct hc_shape *out);

/* A global pool's geometry (globalmaxpool2d, globalavgpool2d): l->g for
 * one window of the whole image input, out (C). HC_ERR_CONFIG naming
 * c->where unless in is an image. */
int nn_global_window(const struct nn_setup *c,
                     const struct hc_layer_spec *s, const struct hc_shape *in,
                     struct nn_layer *l, struct hc_shape *out);

/* Floats of a shape. */
size_t nn_shape_size(const struct hc_shape *s);

/* Floats per sample of node j of m: its shape's, or for an input of
 * int64 ids HC_ID_FLOATS a value (each id's bytes as they are). */
size_t nn_node_floats(const struct hc_model *m, int j);

/* "(H, W, C)" or "(N)" into buf; returns buf. */
const char *nn_shape_str(const struct hc_shape *s, char *buf, size_t len);

/* The backend node j's output is on: layer j's, or (j < 0) the input's. */
struct wk_backend *nn_node_be(const struct wk_net *net, int j);

/* n floats on be into *p. */
int nn_alloc_f(struct wk_backend *be, float **p, size_t n);

/* The alloc of a kind that needs its output buffer alone, (B, out_size). */
int nn_alloc_out(struct nn_layer *l, size_t B);

/* What conv2d and dense share: their bias and activation over rows of n
 * values, y (rows, n) in place, keeping the values before the activation
 * in l->pre where its derivative reads them; and in backward that
 * derivative with the bias gradient (db NULL: none). nn_alloc_pre gives
 * l->pre when l's activation needs it. */
int nn_alloc_pre(struct nn_layer *l, size_t B);
void nn_bias_act(struct nn_layer *l, const float *bias, float *y, int rows,
                 int n);
void nn_bias_act_backward(struct nn_layer *l, float *dy, int rows, int n,
                          float *db);

#endif
