/*
 * tables.c — the trainer's sparse path (tables.h): a batch's ids out of
 * the input rows, their unique rows pulled and set in the net, the rows'
 * gradients pushed.
 */
#include "tables.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rowmap.h"

#define MAX_TABLES 8

/* Buffers of rows: the one in the net, the one whose push is under way,
 * and one pulled ahead beside each (wk_tables_ahead_*): --overlap holds
 * all three at once. */
#define SETS 3

/* One batch's ids and rows of one table. */
struct rowset {
    uint64_t *ids;          /* (max_B·N) the batch's */
    int32_t *inv;           /* (max_B·N) each position's unique row */
    float *rows;            /* (max_B·N, dim) the unique rows */
    float *grad;            /* (max_B·N, dim) their gradients */
    struct hc_rowmap map;
};

/* One table: the model's description and its sets' buffers. */
struct table {
    struct wk_net_table d;
    uint64_t input_dim;
    size_t off;             /* where its input starts in a sample's row */
    size_t max_n;           /* ids a batch at most: max_B·N */
    struct rowset s[SETS];  /* each allocated at its first use */
    const float *dense;     /* (input_dim, dim) wk_tables_open_dense's;
                             * NULL: the rows are pulled */
};

/* What a set of buffers (the same index in every table) holds. */
enum set_state {
    SET_FREE,
    SET_PULLING,            /* wk_tables_ahead_begin'd, not yet ended */
    SET_AHEAD,              /* pulled ahead, waiting for its forward */
    SET_NET,                /* the last hook's, set in the net */
    SET_PUSH                /* wk_tables_take'n, its push to come */
};

struct wk_tables {
    struct pc_client *pc;
    size_t in_size;         /* floats a sample's row */
    int n, max_batch;
    struct table t[MAX_TABLES];
    struct wk_net *net;     /* the last hook's */
    enum set_state state[SETS];
    int B[SETS];            /* the batch's samples */
    uint64_t bytes[SETS];   /* its pull's ids and rows */
    int cur;                /* the SET_NET set, -1: none */
    int pushing;            /* the SET_PUSH set, -1: none */
    uint32_t push_samples;
    int ahead[SETS];        /* the SET_AHEAD sets, oldest first */
    int n_ahead;
    int busy;               /* wk_tables_busy: pc is another thread's */
    uint64_t pull_bytes;    /* the last hook's */
    struct wk_tables_stats st;
    /* The client's view of a step's rows (wk_tables_step_push,
     * wk_tables_ahead_ids): the taken push's, and each set's to pull. */
    struct pc_rows push_req[MAX_TABLES];
    struct pc_rows pull_req[SETS][MAX_TABLES];
};

/* Floats of input q in a sample's row. */
static size_t input_floats(const struct hc_model *m, int q)
{
    size_t n = (size_t)m->inputs[q].shape.dims[0];

    if (m->inputs[q].shape.rank == 3)
        n *= (size_t)m->inputs[q].shape.dims[1] *
             (size_t)m->inputs[q].shape.dims[2];
    return m->inputs[q].ids ? n * HC_ID_FLOATS : n;
}

/* Table k's description from m's k-th embedding (in layer order, as the
 * net lists them), its sets' buffers for max_batch samples. */
static int table_init(const struct hc_model *m, const struct hc_layer_spec *l,
                      int li, int max_batch, struct table *t)
{
    const int q = -1 - l->in_from[0];
    const size_t n = (size_t)max_batch * (size_t)m->inputs[q].shape.dims[0];

    t->d = (struct wk_net_table){li, l->var_kernel, q,
                                 m->inputs[q].shape.dims[0], l->units};
    t->input_dim = l->input_dim;
    t->max_n = n;
    for (int j = 0; j < q; j++)
        t->off += input_floats(m, j);
    return HC_OK;
}

/* Set i's buffers in every table, allocated at its first use (sync,
 * evaluation and predict use one set). */
static int set_alloc(struct wk_tables *t, int i)
{
    for (int k = 0; k < t->n; k++) {
        struct rowset *r = &t->t[k].s[i];
        const size_t n = t->t[k].max_n, dim = (size_t)t->t[k].d.dim;

        if (r->ids)
            continue;
        r->ids = malloc(n * sizeof *r->ids);
        r->inv = malloc(n * sizeof *r->inv);
        r->rows = malloc(n * dim * sizeof *r->rows);
        r->grad = malloc(n * dim * sizeof *r->grad);
        if (!r->ids || !r->inv || !r->rows || !r->grad) {
            free(r->ids);
            free(r->inv);
            free(r->rows);
            free(r->grad);
            *r = (struct rowset){0};
            return hc_err_set(HC_ERR_NOMEM, "out of memory for the rows of "
                              "a batch of %d (table of layer %d)",
                              t->max_batch, t->t[k].d.layer);
        }
    }
    return HC_OK;
}

int wk_tables_open(const struct hc_model *m, struct pc_client *pc,
                   int max_batch, struct wk_tables **out)
{
    struct wk_tables *t;
    int n = 0, rv = HC_OK;

    *out = NULL;
    for (int i = 0; i < m->n_layers; i++)
        n += m->layers[i].type == HC_LAYER_EMBEDDING;
    if (n == 0)
        return HC_OK;
    if (n > MAX_TABLES)
        return hc_err_set(HC_ERR_CONFIG, "model %s: %d embeddings; a worker "
                          "trains at most %d", m->name, n, MAX_TABLES);
    if (!(t = calloc(1, sizeof *t)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    t->pc = pc;
    t->max_batch = max_batch;
    t->cur = t->pushing = -1;
    for (int q = 0; q < m->n_inputs; q++)
        t->in_size += input_floats(m, q);
    for (int i = 0; i < m->n_layers && rv == HC_OK; i++)
        if (m->layers[i].type == HC_LAYER_EMBEDDING)
            rv = table_init(m, &m->layers[i], i, max_batch, &t->t[t->n++]);
    if (rv != HC_OK) {
        wk_tables_close(t);
        return rv;
    }
    *out = t;
    return HC_OK;
}

int wk_tables_open_dense(const struct hc_model *m, const float *const *dense,
                         int max_batch, struct wk_tables **out)
{
    int rv = wk_tables_open(m, NULL, max_batch, out);

    for (int k = 0; rv == HC_OK && *out && k < (*out)->n; k++)
        (*out)->t[k].dense = dense[k];
    return rv;
}

void wk_tables_close(struct wk_tables *t)
{
    if (!t)
        return;
    for (int k = 0; k < t->n; k++)
        for (int i = 0; i < SETS; i++) {
            struct rowset *r = &t->t[k].s[i];

            free(r->ids);
            free(r->inv);
            free(r->rows);
            free(r->grad);
            hc_rowmap_free(&r->map);
        }
    free(t);
}

/* Table tb's ids of the B samples x into r, de-duplicated. */
static int batch_ids(const struct wk_tables *t, const struct table *tb,
                     struct rowset *r, const float *x, int B)
{
    const size_t N = (size_t)tb->d.n_ids, n = (size_t)B * N;
    int rv;

    for (int b = 0; b < B; b++)
        memcpy(r->ids + (size_t)b * N, x + (size_t)b * t->in_size + tb->off,
               N * sizeof *r->ids);
    for (size_t i = 0; i < n; i++)
        if ((int64_t)r->ids[i] < 0 || r->ids[i] >= tb->input_dim)
            return hc_err_set(HC_ERR_INVAL, "sample %zu of the batch: id "
                              "%lld (position %zu of input %d) is outside "
                              "[0, %llu), the table's input_dim", i / N,
                              (long long)r->ids[i], i % N, tb->d.input,
                              (unsigned long long)tb->input_dim);
    if ((rv = hc_rowmap_build(&r->map, (uint32_t)tb->d.var, r->ids, n, 1,
                              tb->input_dim)))
        return rv;
    for (size_t i = 0; i < n; i++)
        r->inv[i] = (int32_t)r->map.inv[i];
    return HC_OK;
}

/* Set i's ids of the B samples x, de-duplicated, and t->pull_req[i]
 * the rows to pull for them (into the set's buffers); or, without pc,
 * their rows copied from the dense arrays. Their bytes in t->bytes[i].
 * Touches set i only. */
static int set_ids(struct wk_tables *t, const struct pc_client *pc, int i,
                   const float *x, int B)
{
    int k, rv;

    t->bytes[i] = 0;
    for (k = 0; k < t->n; k++) {
        struct table *tb = &t->t[k];
        struct rowset *r = &tb->s[i];

        if ((rv = batch_ids(t, tb, r, x, B)))
            return rv;
        t->pull_req[i][k] = (struct pc_rows){(uint32_t)tb->d.var, r->map.ids,
                                             r->map.n_unique, r->rows, NULL};
        t->bytes[i] += r->map.n_unique * (8 + 4 * (size_t)tb->d.dim);
        for (size_t u = 0; !pc && u < r->map.n_unique; u++)
            memcpy(r->rows + u * (size_t)tb->d.dim,
                   tb->dense + r->map.ids[u] * (size_t)tb->d.dim,
                   (size_t)tb->d.dim * sizeof *r->rows);
    }
    t->B[i] = B;
    return HC_OK;
}

/* Set i's rows of the B samples x: set_ids, then the rows pulled through
 * pc (one request per shard for every table). Touches set i and pc
 * only. */
static int pull_set(struct wk_tables *t, struct pc_client *pc, int i,
                    const float *x, int B)
{
    int rv = set_ids(t, pc, i, x, B);

    if (rv != HC_OK || !pc)
        return rv;
    return pc_pull_rows(pc, t->pull_req[i], (size_t)t->n, NULL);
}

/* Whether set i holds the ids of the B samples x, every table's. */
static int set_is(const struct wk_tables *t, int i, const float *x, int B)
{
    if (t->B[i] != B)
        return 0;
    for (int k = 0; k < t->n; k++) {
        const struct table *tb = &t->t[k];
        const size_t N = (size_t)tb->d.n_ids;

        for (int b = 0; b < B; b++)
            if (memcmp(tb->s[i].ids + (size_t)b * N,
                       x + (size_t)b * t->in_size + tb->off,
                       N * sizeof *tb->s[i].ids) != 0)
                return 0;
    }
    return 1;
}

/* A set no one holds into *i, allocated. Errors: HC_ERR_INVAL (every
 * set in use), HC_ERR_NOMEM. */
static int free_set(struct wk_tables *t, int *i)
{
    for (*i = 0; *i < SETS; (*i)++)
        if (t->state[*i] == SET_FREE)
            return set_alloc(t, *i);
    return hc_err_set(HC_ERR_INVAL, "tables: no free rows buffer for a "
                      "batch (%d in use)", SETS);
}

/* Set i's rows into net, as the last hook's. */
static int set_net(struct wk_tables *t, struct wk_net *net, int i, int B)
{
    int rv;

    for (int k = 0; k < t->n; k++)
        if ((rv = wk_net_set_rows(net, k, t->t[k].s[i].rows,
                                  t->t[k].s[i].map.n_unique,
                                  t->t[k].s[i].inv, B)))
            return rv;
    if (t->cur >= 0 && t->state[t->cur] == SET_NET)
        t->state[t->cur] = SET_FREE;
    t->state[i] = SET_NET;
    t->cur = i;
    t->net = net;
    t->st.pulls++;
    t->pull_bytes = t->bytes[i];
    t->st.bytes_pulled += t->bytes[i];
    for (int k = 0; k < t->n; k++)
        t->st.rows_pulled += t->t[k].s[i].map.n_unique;
    return HC_OK;
}

int wk_tables_before(void *arg, struct wk_net *net, const float *x, int B)
{
    struct wk_tables *t = arg;
    int i, rv;

    if (B < 1 || B > t->max_batch)
        return hc_err_set(HC_ERR_INVAL, "tables: batch %d outside [1, %d]", B,
                          t->max_batch);
    if (t->n_ahead > 0 && set_is(t, t->ahead[0], x, B)) {
        i = t->ahead[0];
        memmove(t->ahead, t->ahead + 1, (size_t)--t->n_ahead * sizeof *t->ahead);
        if ((rv = set_net(t, net, i, B)) == HC_OK)
            t->st.pulls_ahead++;
        return rv;
    }
    while (t->n_ahead > 0)          /* another batch came: not used */
        t->state[t->ahead[--t->n_ahead]] = SET_FREE;
    if (t->busy)
        return hc_err_set(HC_ERR_INVAL, "tables: the rows of a batch of %d "
                          "were not pulled ahead, and the client is in a "
                          "push-and-pull on another thread", B);
    if (t->cur >= 0 && t->state[t->cur] == SET_NET)
        t->state[t->cur] = SET_FREE;    /* its rows are the net's now */
    t->cur = -1;
    if ((rv = free_set(t, &i)) != HC_OK)
        return rv;
    if ((rv = pull_set(t, t->pc, i, x, B)) != HC_OK)
        return rv;
    return set_net(t, net, i, B);
}

void wk_tables_busy(struct wk_tables *t, int busy)
{
    t->busy = busy;
}

int wk_tables_ahead_begin(struct wk_tables *t, int *set)
{
    int i, rv;

    if (!t->pc)
        return hc_err_set(HC_ERR_INVAL, "tables: rows pulled ahead need "
                          "the shards (a client)");
    if ((rv = free_set(t, &i)) != HC_OK)
        return rv;
    t->state[i] = SET_PULLING;
    *set = i;
    return HC_OK;
}

int wk_tables_ahead_pull(struct wk_tables *t, int set, const float *x, int B)
{
    if (B < 1 || B > t->max_batch)
        return hc_err_set(HC_ERR_INVAL, "tables: batch %d outside [1, %d]", B,
                          t->max_batch);
    return pull_set(t, t->pc, set, x, B);
}

int wk_tables_ahead_ids(struct wk_tables *t, int set, const float *x, int B,
                        struct pc_rows **rows, size_t *n)
{
    int rv;

    if (B < 1 || B > t->max_batch)
        return hc_err_set(HC_ERR_INVAL, "tables: batch %d outside [1, %d]", B,
                          t->max_batch);
    if ((rv = set_ids(t, t->pc, set, x, B)) != HC_OK)
        return rv;
    *rows = t->pull_req[set];
    *n = (size_t)t->n;
    return HC_OK;
}

void wk_tables_ahead_end(struct wk_tables *t, int set, int ok)
{
    if (!ok) {
        t->state[set] = SET_FREE;
        return;
    }
    t->state[set] = SET_AHEAD;
    t->ahead[t->n_ahead++] = set;
}

int wk_tables_take(struct wk_tables *t, uint32_t samples)
{
    const int i = t->cur;
    int rv;

    if (i < 0 || !t->pc)
        return hc_err_set(HC_ERR_INVAL, "tables: a push without rows "
                          "pulled from the shards for a step");
    if (t->pushing >= 0)
        return hc_err_set(HC_ERR_INVAL, "tables: a step's rows taken while "
                          "the last step's push is still to be sent");
    t->st.step_rows = t->st.step_bytes_pushed = 0;
    for (int k = 0; k < t->n; k++) {
        struct table *tb = &t->t[k];
        struct rowset *r = &tb->s[i];

        if ((rv = wk_net_rows_grad(t->net, k, r->grad)))
            return rv;
        for (size_t j = 0; j < r->map.n_unique * (size_t)tb->d.dim; j++)
            r->grad[j] *= (float)samples;
        t->st.step_rows += r->map.n_unique;
        t->st.step_bytes_pushed += r->map.n_unique *
                                   (8 + 4 * (size_t)tb->d.dim);
    }
    t->st.rows_pushed += t->st.step_rows;
    t->st.bytes_pushed += t->st.step_bytes_pushed;
    t->st.step_bytes_pulled = t->pull_bytes;
    t->st.pushes++;
    t->state[i] = SET_PUSH;
    t->pushing = i;
    t->cur = -1;
    t->push_samples = samples;
    return HC_OK;
}

int wk_tables_step_push(struct wk_tables *t, const struct pc_rows **rows,
                        size_t *n)
{
    const int i = t->pushing;

    if (i < 0)
        return hc_err_set(HC_ERR_INVAL, "tables: no step's rows to push");
    for (int k = 0; k < t->n; k++) {
        struct rowset *r = &t->t[k].s[i];

        t->push_req[k] = (struct pc_rows){(uint32_t)t->t[k].d.var,
                                          r->map.ids, r->map.n_unique, NULL,
                                          r->grad};
    }
    *rows = t->push_req;
    *n = (size_t)t->n;
    return HC_OK;
}

int wk_tables_send(struct wk_tables *t)
{
    const struct pc_rows *req;
    size_t n;
    int rv = wk_tables_step_push(t, &req, &n);

    return rv == HC_OK ? pc_push_rows_step(t->pc, req, n, t->push_samples)
                       : rv;
}

void wk_tables_sent(struct wk_tables *t)
{
    if (t->pushing >= 0)
        t->state[t->pushing] = SET_FREE;
    t->pushing = -1;
}

int wk_tables_push(struct wk_tables *t, uint32_t samples)
{
    int rv = wk_tables_take(t, samples);

    if (rv == HC_OK)
        rv = wk_tables_send(t);
    wk_tables_sent(t);
    return rv;
}

void wk_tables_stats(const struct wk_tables *t, struct wk_tables_stats *out)
{
    uint64_t a, b;

    *out = t->st;
    if (!t->pc)
        return;
    pc_rows_wire(t->pc, 0, &a, &b);
    out->wire_pulls = a + b;
    pc_rows_wire(t->pc, 1, &a, &b);
    out->wire_pushes = a + b;
}
