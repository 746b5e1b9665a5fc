/*
 * backend_ops.h — the operations of a backend, listed once (internal to
 * worker/: backend.h and cuda_impl.cuh include it). Each list calls
 *
 *     X(ret, name, params, args, presence)
 *
 * once per entry of struct wk_backend_ops, in the table's order:
 *   ret       the return type (every compute op returns void: a failure is
 *             recorded and reported by check);
 *   name      the entry; wk_be_NAME is its wrapper, wk_cu_NAME the CUDA
 *             backend's implementation of a compute op;
 *   params    the parenthesised parameter list, struct wk_backend *be first;
 *   args      the parenthesised argument names, to pass a call on;
 *   presence  required (every backend fills it) or optional (NULL allowed:
 *             the wrapper in backend.c supplies the generic default).
 *
 * They expand to the table's fields and the wrappers' declarations
 * (backend.h), the wrappers of the required compute ops (backend.c), and
 * the CUDA implementations' declarations and table entries (cuda_impl.cuh,
 * backend_cuda.cu). The comments are the entries' contracts.
 */
#ifndef WK_BACKEND_OPS_H
#define WK_BACKEND_OPS_H

/* Lifetime is the table's destroy entry; these are memory and errors. */
#define WK_BACKEND_MEMORY_OPS(X)                                              \
    /* Allocate `bytes` (> 0) of device memory, 64-byte aligned, contents     \
     * undefined. Returns HC_ERR_NOMEM (with a message) on failure. */        \
    X(int, alloc, (struct wk_backend *be, size_t bytes, void **out),          \
      (be, bytes, out), required)                                             \
    /* Release a buffer of alloc; NULL allowed. */                            \
    X(void, free, (struct wk_backend *be, void *p), (be, p), required)        \
    /* Host → device, device → host, device → device. Synchronous. A failure  \
     * returns its code (with a message) and is also recorded for check, as   \
     * the reduce default relies on. */                                       \
    X(int, upload, (struct wk_backend *be, void *dst, const void *src,        \
                   size_t bytes), (be, dst, src, bytes), required)            \
    X(int, download, (struct wk_backend *be, void *dst, const void *src,      \
                     size_t bytes), (be, dst, src, bytes), required)          \
    X(int, copy, (struct wk_backend *be, void *dst, const void *src,          \
                 size_t bytes), (be, dst, src, bytes), required)              \
    /* Wait for queued work; return and clear the first failure of a compute  \
     * op since the last call. Optional: NULL never fails. */                 \
    X(int, check, (struct wk_backend *be), (be), optional)

/* The compute ops. The CUDA backend implements sgemm with cuBLAS
 * (backend_cuda.cu) and the others as kernels (kernels_cuda.cu). */
#define WK_BACKEND_COMPUTE_OPS(X)                                             \
    /* ---- BLAS-like ---- */                                                 \
    /* C (m, n) = alpha · op(A) · op(B) + beta · C, row-major; op(A) is       \
     * (m, k): A is (m, lda≥k) when !ta, (k, lda≥m) when ta; likewise B.      \
     * beta = 0 ignores C's old contents (NaN included). */                   \
    X(void, sgemm, (struct wk_backend *be, int ta, int tb, int m, int n,      \
                   int k, float alpha, const float *a, int lda,               \
                   const float *b, int ldb, float beta, float *c, int ldc),   \
      (be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), required)   \
    /* x (n) = v. */                                                          \
    X(void, fill, (struct wk_backend *be, float *x, size_t n, float v),       \
      (be, x, n, v), required)                                                \
    /* g (n) += l1 · sign(w) + 2 · l2 · w: the gradient of the penalty       \
     * l1·Σ|w| + l2·Σw² (sign(0) = 0). */                                     \
    X(void, reg_grad, (struct wk_backend *be, const float *w, float *g,       \
                       size_t n, float l1, float l2),                         \
      (be, w, g, n, l1, l2), required)                                        \
    /* x (n) *= a. */                                                         \
    X(void, scale, (struct wk_backend *be, float *x, size_t n, float a),      \
      (be, x, n, a), required)                                                \
    /* y (n) += a · x. */                                                     \
    X(void, axpy, (struct wk_backend *be, size_t n, float a, const float *x,  \
                   float *y), (be, n, a, x, y), required)                     \
    /* dst (n) = Σ_i w_i · src_i (w = NULL: all 1), n_src ≥ 1; dst may equal  \
     * src[0]. Optional: the default is scale/copy, then axpy per source. */  \
    X(void, reduce, (struct wk_backend *be, float *dst,                       \
                     const float *const *src, const float *w, int n_src,      \
                     size_t n),                                               \
      (be, dst, src, w, n_src, n), optional)                                  \
    /* dst (rows, cols), its rows ldd apart, = a · src (rows, cols), its   \
     * rows lds apart; with accumulate, dst += a · src. A block of a wider  \
     * matrix: one input's slice of a concatenation, a merge's terms. */    \
    X(void, copy2d, (struct wk_backend *be, int rows, int cols, float a,     \
                     const float *src, int lds, float *dst, int ldd,         \
                     int accumulate),                                        \
      (be, rows, cols, a, src, lds, dst, ldd, accumulate), required)         \
    /* z (n) = x ⊙ y, or with accumulate z += x ⊙ y; z may equal x or y    \
     * (without accumulate). */                                             \
    X(void, mul, (struct wk_backend *be, size_t n, const float *x,           \
                  const float *y, float *z, int accumulate),                 \
      (be, n, x, y, z, accumulate), required)                                \
                                                                              \
    /* ---- convolution helpers ---- */                                       \
    /* cols (B·OH·OW, kh·kw·C) from x (B, H, W, C); column (i·kw + j)·C + c   \
     * of row (b·OH + oh)·OW + ow holds x[b, oh·sh − pt + i, ow·sw − pl + j,  \
     * c], or 0 in the padding. That column order is the Keras kernel         \
     * (kh, kw, in, out) flattened to a (kh·kw·in, out) matrix. */            \
    X(void, im2col, (struct wk_backend *be, const struct wk_geom *g,          \
                     const float *x, float *cols),                            \
      (be, g, x, cols), required)                                             \
    /* The adjoint: dx (B, H, W, C) = Σ of cols' entries over the positions   \
     * im2col read them from; add 0 overwrites dx, 1 adds to it. */          \
    X(void, col2im, (struct wk_backend *be, const struct wk_geom *g,          \
                     const float *cols, float *dx, int add),                  \
      (be, g, cols, dx, add), required)                                       \
                                                                              \
    /* ---- bias and activations (act ∈ hc_act; softmax acts on rows) ---- */ \
    /* y (rows, n) = act(x + bias); bias (n) may be NULL; y may equal x. */   \
    X(void, act_forward, (struct wk_backend *be, const float *x,              \
                          const float *bias, float *y, int rows, int n,       \
                          enum hc_act act),                                   \
      (be, x, bias, y, rows, n, act), required)                               \
    /* dx = dy · act'(…), from the op's output y (its input z, bias added,   \
     * for an act of wk_act_reads_input); dx may equal dy. Softmax:           \
     * dx = y ⊙ (dy − Σ_j dy_j y_j) per row. */                               \
    X(void, act_backward, (struct wk_backend *be, const float *y,             \
                           const float *dy, float *dx, int rows, int n,       \
                           enum hc_act act),                                  \
      (be, y, dy, dx, rows, n, act), required)                                \
    /* db (n) = Σ over rows of dy (rows, n). Overwrites db. */                \
    X(void, bias_grad, (struct wk_backend *be, const float *dy, int rows,     \
                        int n, float *db),                                    \
      (be, dy, rows, n, db), required)                                        \
    /* dy ← act_backward(y, dy) in place, then, if db is not NULL,            \
     * db = bias_grad(dy). Optional (a fusion): the default is those two. */  \
    X(void, act_bias_backward, (struct wk_backend *be, const float *y,        \
                                float *dy, int rows, int n, enum hc_act act,  \
                                float *db),                                   \
      (be, y, dy, rows, n, act, db), optional)                                \
                                                                              \
    /* Keras's ReLU layer over n values (layer_relu.c): y = min(x, max) for  \
     * x > threshold (clipped below at 0 too when max ≥ 0), else slope ·     \
     * (x − threshold); max < 0: no ceiling. y may equal x. */                \
    X(void, relu_forward, (struct wk_backend *be, const float *x, float *y,   \
                           size_t n, float max, float slope,                  \
                           float threshold),                                  \
      (be, x, y, n, max, slope, threshold), required)                         \
    /* dx = dy · f'(x) of the same function, from its input x; dx may equal   \
     * dy. */                                                                 \
    X(void, relu_backward, (struct wk_backend *be, const float *x,            \
                            const float *dy, float *dx, size_t n, float max,  \
                            float slope, float threshold),                    \
      (be, x, dy, dx, n, max, slope, threshold), required)                    \
                                                                              \
    /* ---- losses (per-sample results; the caller reduces) ---- */           \
    /* p (rows, n) = softmax(z) per row, computed stably. If labels (rows) is \
     * not NULL also loss[r] = logsumexp(z_r) − z_r[label_r] and hit[r] = 1   \
     * when argmax(z_r) (first maximum) equals label_r, else 0. Labels are    \
     * in [0, n) (the caller checks). */                                      \
    X(void, xent_forward, (struct wk_backend *be, const float *z,             \
                           const int *labels, int rows, int n, float *p,      \
                           float *loss, float *hit),                          \
      (be, z, labels, rows, n, p, loss, hit), required)                       \
    /* dz (rows, n) = scale · (p − onehot(labels)). dz may equal p. */        \
    X(void, xent_backward, (struct wk_backend *be, const float *p,            \
                            const int *labels, int rows, int n, float scale,  \
                            float *dz),                                       \
      (be, p, labels, rows, n, scale, dz), required)                          \
    /* loss[r] = mean_j (y − t)²; hit[r] = Keras's accuracy for this loss:    \
     * n = 1: (y > 0.5) == (t > 0.5); n > 1: argmax y == argmax t. */         \
    X(void, mse_forward, (struct wk_backend *be, const float *y,              \
                          const float *t, int rows, int n, float *loss,       \
                          float *hit),                                        \
      (be, y, t, rows, n, loss, hit), required)                               \
    /* dy = scale · (y − t), elementwise over `count` floats. */              \
    X(void, mse_backward, (struct wk_backend *be, const float *y,             \
                           const float *t, size_t count, float scale,         \
                           float *dy),                                        \
      (be, y, t, count, scale, dy), required)                                 \
    /* The other losses of float targets t (rows, n), Keras's per-sample      \
     * value (model.h, enum hc_loss) into loss[r] and hit[r] as mse_forward:  \
     * kind HC_LOSS_CCE: y is the logits z, loss = logsumexp(z) − Σ t·z,     \
     * hit argmax z == argmax t; HC_LOSS_BCE: y the probabilities (clipped    \
     * to [1e-7, 1 − 1e-7], 1e-7 inside each log) or, from_logits, the        \
     * logits (n = 1: hit when (y > 0) == (t > 0.5)); HC_LOSS_MAE;           \
     * HC_LOSS_HUBER with delta. */                                           \
    X(void, tloss_forward, (struct wk_backend *be, enum hc_loss kind,         \
                            int from_logits, float delta, const float *y,     \
                            const float *t, int rows, int n, float *loss,     \
                            float *hit),                                      \
      (be, kind, from_logits, delta, y, t, rows, n, loss, hit), required)     \
    /* dy (rows, n) = scale · ∂loss[r]/∂y of the same loss (0 where BCE       \
     * clips); for HC_LOSS_CCE y is the softmax p of the logits, and the      \
     * gradient with respect to them, scale · (p − t), is written. dy may     \
     * equal y. */                                                            \
    X(void, tloss_backward, (struct wk_backend *be, enum hc_loss kind,        \
                             int from_logits, float delta, const float *y,    \
                             const float *t, int rows, int n, float scale,    \
                             float *dy),                                      \
      (be, kind, from_logits, delta, y, t, rows, n, scale, dy), required)     \
                                                                              \
    /* ---- pooling and dropout ---- */                                       \
    /* y (B, OH, OW, C) = max over each window (padding never wins); idx      \
     * holds the flat index into x of each maximum (first one on ties). */    \
    X(void, maxpool_forward, (struct wk_backend *be,                          \
                              const struct wk_geom *g, const float *x,        \
                              float *y, int32_t *idx),                        \
      (be, g, x, y, idx), required)                                           \
    /* dx (B, H, W, C) = scatter-add of dy at idx. Overwrites dx. */          \
    X(void, maxpool_backward, (struct wk_backend *be,                         \
                               const struct wk_geom *g, const float *dy,      \
                               const int32_t *idx, float *dx),                \
      (be, g, dy, idx, dx), required)                                         \
    /* y (B, OH, OW, C) = the mean over each window of its cells inside x:   \
     * padding is not counted (Keras's "same" average pooling). A window    \
     * of the whole image (kh = H, kw = W, valid) is a global average. */   \
    X(void, avgpool_forward, (struct wk_backend *be,                          \
                              const struct wk_geom *g, const float *x,        \
                              float *y),                                      \
      (be, g, x, y), required)                                                \
    /* dx (B, H, W, C) = Σ over the windows holding each cell of dy / that    \
     * window's count of cells inside x. Overwrites dx. */                    \
    X(void, avgpool_backward, (struct wk_backend *be,                         \
                               const struct wk_geom *g, const float *dy,      \
                               float *dx),                                    \
      (be, g, dy, dx), required)                                              \
    /* Depthwise convolution, g over the input (B, H, W, C), dm outputs per \
     * channel: y (B, OH, OW, C·dm) at channel c·dm + m = Σ over the       \
     * window's cells inside x of x[…, c] · w[i, j, c, m], w (kh, kw, C,   \
     * dm). Overwrites y. */                                                  \
    X(void, dwconv_forward, (struct wk_backend *be, const struct wk_geom *g,  \
                             int dm, const float *x, const float *w,          \
                             float *y),                                       \
      (be, g, dm, x, w, y), required)                                         \
    /* dw (kh, kw, C, dm) = Σ over samples and windows of x · dy, the same    \
     * pairs dwconv_forward multiplies. Overwrites dw. */                     \
    X(void, dwconv_backward_filter, (struct wk_backend *be,                   \
                                     const struct wk_geom *g, int dm,         \
                                     const float *x, const float *dy,         \
                                     float *dw),                              \
      (be, g, dm, x, dy, dw), required)                                       \
    /* dx (B, H, W, C) = Σ over the windows holding each cell and the dm     \
     * outputs of its channel of dy · w. Overwrites dx. */                    \
    X(void, dwconv_backward_input, (struct wk_backend *be,                    \
                                    const struct wk_geom *g, int dm,          \
                                    const float *dy, const float *w,          \
                                    float *dx),                               \
      (be, g, dm, dy, w, dx), required)                                       \
    /* Layer normalisation of rows (rows, n): per row μ and the biased σ²,  \
     * rstd (rows) = 1 / sqrt(σ² + eps), xhat (rows, n) = (x − μ) · rstd,    \
     * y = xhat · gamma + beta (gamma, beta (n) each may be NULL: 1, 0).    \
     * Sums in double, row by row. Overwrites y, xhat, rstd. */              \
    X(void, layernorm_forward, (struct wk_backend *be, int rows, int n,       \
                                float eps, const float *x,                    \
                                const float *gamma, const float *beta,        \
                                float *y, float *xhat, float *rstd),          \
      (be, rows, n, eps, x, gamma, beta, y, xhat, rstd), required)            \
    /* Its gradients from dy (rows, n) and the forward's xhat and rstd:      \
     * dgamma (n) = Σ_rows dy·xhat, dbeta (n) = Σ_rows dy, and with         \
     * g = dy·gamma, dx = rstd · (g − mean(g) − xhat · mean(g·xhat)) per    \
     * row. Each output may be NULL: not wanted. Overwrites them; dx may    \
     * equal dy. */                                                          \
    X(void, layernorm_backward, (struct wk_backend *be, int rows, int n,      \
                                 const float *dy, const float *xhat,          \
                                 const float *rstd, const float *gamma,       \
                                 float *dx, float *dgamma, float *dbeta),     \
      (be, rows, n, dy, xhat, rstd, gamma, dx, dgamma, dbeta), required)      \
    /* Embedding lookup: y (n, dim) row i = rows[inv[i]], rows (n_rows, dim), \
     * inv (n) each < n_rows (a batch position's row among the step's       \
     * unique ones). Overwrites y. */                                        \
    X(void, embed_gather, (struct wk_backend *be, const float *rows,          \
                           const int32_t *inv, size_t n, int dim, float *y),  \
      (be, rows, inv, n, dim, y), required)                                   \
    /* Its adjoint: drows (n_rows, dim) row u = Σ over i with inv[i] = u of  \
     * dy[i] (the gradients of repeated ids summed; the CPU in batch order,  \
     * CUDA in any). Overwrites drows, rows no position names included. */   \
    X(void, embed_scatter, (struct wk_backend *be, const float *dy,           \
                            const int32_t *inv, size_t n, int dim,            \
                            size_t n_rows, float *drows),                     \
      (be, dy, inv, n, dim, n_rows, drows), required)                         \
    /* y = x ⊙ mask(seed) / (1 − rate), mask as wk_dropout_hash documents;    \
     * y may equal x. 0 ≤ rate < 1. */                                        \
    X(void, dropout_forward, (struct wk_backend *be, const float *x,          \
                              float *y, size_t n, float rate, uint64_t seed), \
      (be, x, y, n, rate, seed), required)                                    \
    /* dx = dy ⊙ the same mask and scale; dx may equal dy. */                 \
    X(void, dropout_backward, (struct wk_backend *be, const float *dy,        \
                               float *dx, size_t n, float rate,               \
                               uint64_t seed),                                \
      (be, dy, dx, n, rate, seed), required)                                                                              \
    /* ---- batch normalization over the last axis (rows, C) ---- */          \
    /* st (3, C): each channel's mean, biased variance and mean of squares    \
     * (variance + mean²) over the rows of x (rows, C), in one pass: Σ(x − k) \
     * and Σ(x − k)², k the channel's value in row 0, variance = Σ(x − k)² /  \
     * rows − (mean − k)². rows ≥ 1. Overwrites st. */                        \
    X(void, bn_stats, (struct wk_backend *be, const float *x, int rows,       \
                       int c, float *st),                                     \
      (be, x, rows, c, st), required)                                         \
    /* y (rows, C) = gamma · (x − mean) / sqrt(var + eps) + beta, mean and    \
     * var (C) each; gamma NULL: 1, beta NULL: 0. y may equal x. */           \
    X(void, bn_forward, (struct wk_backend *be, const float *x, int rows,     \
                         int c, const float *mean, const float *var,          \
                         float eps, const float *gamma, const float *beta,    \
                         float *y),                                           \
      (be, x, rows, c, mean, var, eps, gamma, beta, y), required)             \
    /* sums (2, C): Σ dy · x̂ (gamma's gradient) and Σ dy (beta's) over the   \
     * rows, x̂ = (x − mean) / sqrt(var + eps) with st's mean and var (the    \
     * batch's, bn_stats). Overwrites sums. */                                \
    X(void, bn_backward_params, (struct wk_backend *be, const float *x,       \
                                 const float *dy, int rows, int c,            \
                                 const float *st, float eps, float *sums),    \
      (be, x, dy, rows, c, st, eps, sums), required)                          \
    /* dx (rows, C): the gradient through the batch's own moments,            \
     * gamma / sqrt(var + eps) · (dy − Σdy / rows − x̂ · Σ(dy·x̂) / rows),     \
     * the sums those of bn_backward_params; gamma NULL: 1. dx may equal     \
     * dy. */                                                                 \
    X(void, bn_backward_input, (struct wk_backend *be, const float *x,        \
                                const float *dy, int rows, int c,             \
                                const float *st, float eps,                   \
                                const float *gamma, const float *sums,        \
                                float *dx),                                   \
      (be, x, dy, rows, c, st, eps, gamma, sums, dx), required)

/* Every entry but destroy, in the table's order. */
#define WK_BACKEND_OPS(X) WK_BACKEND_MEMORY_OPS(X) WK_BACKEND_COMPUTE_OPS(X)

#endif
