/*
 * shard.c — the variables of one shard (see shard.h): the chief's create,
 * pulls served from one store snapshot, pushes applied by the optimizer in
 * one store transaction.
 *
 * The store's block table is the shard's map: a (variable, offset) names a
 * block, found by binary search in `index` (the blocks sorted by variable
 * and offset). The arrays a push needs are sized at create/open time; a
 * pull, which may run on any thread beside the writer, takes its few
 * per-range entries in one small allocation of its own and reads one store
 * snapshot, whose step is the version it answers with.
 *
 * The block table and the index are written once (open, or the first
 * create) before `ready` is published, and only read after: a pull that
 * sees `ready` needs no lock. A store created for the chief's initial rows
 * (CreateVariables.rows_follow) is published only once they are in: its
 * InitRows store them while its meta "rows_loading" is 1, the last (done)
 * sets it to 0 — a loaded or trained store takes no rows again.
 */
#include "shard_impl.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "err.h"
#include "fault.h"
#include "layout.h"
#include "log.h"
#include "model.h"         /* HC_MODEL_MAX_VARS */
#include "optimizer.h"
#include "store.h"
#include "vec.h"

/* A block's gradient in the open synchronous step. */
enum {
    ACC_NONE,       /* none yet: acc[b] is stale, read as 0 */
    ACC_SUM,        /* acc[b] holds the sample-weighted sum */
    ACC_LENT        /* one push's: lent[b] · lent_w[b], not copied */
};

/* What one pull needs per range, in one allocation (see pull_scratch). */
struct pull_scratch {
    struct ps_read *reads;
    struct hc_tensor_src *src;
    float **dst;
    uint32_t *crcs;                 /* stored CRCs */
    unsigned char *crc_known;       /* range = whole block */
};

static int cmp_block(const void *a, const void *b, void *arg)
{
    const struct ps_shard *sh = arg;
    const struct ps_block *x = &sh->blocks[*(const uint32_t *)a];
    const struct ps_block *y = &sh->blocks[*(const uint32_t *)b];

    if (x->var != y->var)
        return x->var < y->var ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void free_scratch(struct ps_shard *sh)
{
    free(sh->index_sorted);
    free(sh->updates);
    free(sh->seen);
    free(sh->acc);
    free(sh->acc_mem);
    free(sh->acc_used);
    free(sh->lent);
    free(sh->lent_w);
    free(sh->acc_n);
    free(sh->acc_w);
    free(sh->applied);
}

/* Size the scratch arrays and the lookup index for the store's blocks. */
/* Whether the store's variable definitions ("vars" meta) name a moving
 * statistic; a store without them (an older hetps's) has none. */
static int defs_have_moving(struct ps_store *st)
{
    size_t cap = 1u << 20, len = 0;
    char *json = malloc(cap);
    cJSON *root = NULL;
    const cJSON *it;
    int any = 0;

    if (json && ps_store_meta_get(st, "vars", json, cap, &len) == HC_OK &&
        (root = cJSON_ParseWithLength(json, len)) != NULL)
        cJSON_ArrayForEach(it, root)
            any |= cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(it,
                                                                   "moving"));
    cJSON_Delete(root);
    free(json);
    return any;
}

int ps_shard_has_moving(const struct ps_shard *sh)
{
    return atomic_load(&sh->ready) && sh->has_moving;
}

/* Whether the store waits for the chief's initial rows (meta
 * "rows_loading" is 1) into *loading. */
static int rows_loading(struct ps_shard *sh, int *loading)
{
    unsigned char b = 0;
    size_t len = 0;
    int rv = ps_store_meta_get(sh->store, "rows_loading", &b, 1, &len);

    *loading = rv == HC_OK && len == 1 && b == 1;
    return rv == HC_ERR_NOTFOUND ? HC_OK : rv;
}

static int load_blocks(struct ps_shard *sh)
{
    struct ps_store_info info;
    uint32_t i, n;
    int loading, rv;

    if (atomic_load(&sh->ready))
        return HC_OK;           /* blocks never change once created */
    ps_store_info(sh->store, &info);
    if (!info.initialised)
        return HC_OK;
    if ((rv = rows_loading(sh, &loading)) != HC_OK || loading)
        return rv;              /* not served until the rows are in */
    sh->has_moving = defs_have_moving(sh->store);
    sh->optim = info.optim;
    sh->blocks = ps_store_blocks(sh->store, &n);
    sh->n_blocks = n;
    free_scratch(sh);
    sh->index_sorted = calloc(n + 1, sizeof *sh->index_sorted);
    sh->updates = calloc(n + 1, sizeof *sh->updates);
    sh->seen = calloc(n + 1, 1);
    sh->acc = calloc(n + 1, sizeof *sh->acc);
    sh->acc_used = calloc(n + 1, 1);
    sh->lent = calloc(n + 1, sizeof *sh->lent);
    sh->lent_w = calloc(n + 1, sizeof *sh->lent_w);
    sh->acc_n = calloc(n + 1, sizeof *sh->acc_n);
    sh->acc_w = calloc(n + 1, sizeof *sh->acc_w);
    sh->applied = calloc(n + 1, 1);
    {
        size_t total = 0;

        for (i = 0; i < n; i++)
            total += sh->blocks[i].length;
        sh->acc_mem = calloc(total + 1, sizeof *sh->acc_mem);
        for (i = 0, total = 0; sh->acc && sh->acc_mem && i < n; i++) {
            sh->acc[i] = sh->acc_mem + total;
            total += sh->blocks[i].length;
        }
    }
    if (!sh->index_sorted || !sh->updates || !sh->seen || !sh->acc ||
        !sh->acc_mem || !sh->acc_used || !sh->lent || !sh->lent_w ||
        !sh->acc_n || !sh->acc_w || !sh->applied)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for %u blocks", n);
    for (i = 0; i < n; i++)
        sh->index_sorted[i] = i;
    qsort_r(sh->index_sorted, n, sizeof *sh->index_sorted, cmp_block, sh);
    atomic_store(&sh->ready, 1);
    return HC_OK;
}

/* The local block holding element `offset` of variable `var`, or -1. */
static long find_block(const struct ps_shard *sh, uint32_t var, uint64_t offset)
{
    uint32_t lo = 0, hi = sh->n_blocks;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct ps_block *b = &sh->blocks[sh->index_sorted[mid]];

        if (b->var < var || (b->var == var && b->offset + b->length <= offset))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < sh->n_blocks) {
        const struct ps_block *b = &sh->blocks[sh->index_sorted[lo]];

        if (b->var == var && b->offset <= offset &&
            offset < b->offset + b->length)
            return (long)sh->index_sorted[lo];
    }
    return -1;
}

int ps_shard_open(struct ps_shard **out, const char *dir, int shard,
                  int n_shards, int durability, unsigned sync_ms,
                  int apply_threads)
{
    struct ps_store_opts o = { 0 };
    struct ps_store_info info;
    struct ps_shard *sh;
    int rv;

    o.durability = durability ? PS_DURABLE_MACHINE : PS_DURABLE_NONE;
    o.sync_ms = sync_ms;
    o.apply_threads = apply_threads;
    *out = NULL;
    sh = calloc(1, sizeof *sh);
    if (!sh)
        return hc_err_set(HC_ERR_NOMEM, "out of memory opening shard");
    sh->index = shard;
    sh->n_shards = n_shards;
    snprintf(sh->dir, sizeof sh->dir, "%s", dir);
    rv = ps_store_open(dir, &o, &sh->store);
    if (rv == HC_OK)
        rv = load_blocks(sh);
    if (rv != HC_OK) {
        ps_shard_close(sh);
        return rv;
    }
    ps_store_info(sh->store, &info);
    if (info.initialised) {
        if (info.shard != (uint32_t)shard || info.n_shards != (uint32_t)n_shards) {
            rv = hc_err_set(HC_ERR_MISMATCH,
                            "store %s holds shard %u of %u, but this task is "
                            "shard %d of %d: use the right --data-dir, or "
                            "`hetps reshard` to change the number of "
                            "parameter servers", dir, info.shard, info.n_shards,
                            shard, n_shards);
            ps_shard_close(sh);
            return rv;
        }
        /* Every block and slot against its checksum before serving. */
        rv = ps_store_verify(sh->store);
        if (rv != HC_OK) {
            rv = hc_err_set(rv, "%s — refusing to serve a damaged store; "
                            "restore it from a copy, or start from an empty "
                            "--data-dir", hc_err_msg());
            ps_shard_close(sh);
            return rv;
        }
        hc_info("store %s: %u blocks at step %llu, checksums good (open #%llu)%s",
                dir, sh->n_blocks, (unsigned long long)info.step,
                (unsigned long long)info.incarnation,
                atomic_load(&sh->ready) ? "" : "; waiting for the chief's "
                "initial rows of its tables");
    } else {
        hc_info("store %s: empty, waiting for the chief to create the variables",
                dir);
    }
    *out = sh;
    return HC_OK;
}

static int ack_with(const struct ps_shard *sh, const struct hc_wire_msg *in,
                    const struct hc_sender *me, uint64_t version,
                    const struct hc_tensor_src *t, size_t n, float **dst,
                    const struct ps_pull_extra *extra, nng_msg **reply)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Ack ack = HETPS__ACK__INIT;

    (void)sh;
    hc_wire_init_env(&env, me, in->env->request_id);
    ack.has_version = 1;
    ack.version = version;
    if (extra && extra->late) {
        ack.has_late = 1;
        ack.late = 1;
    }
    if (extra && extra->job_batch) {
        ack.has_job_batch = 1;
        ack.job_batch = extra->job_batch;
    }
    if (extra && extra->uncommitted) {
        ack.has_uncommitted = 1;
        ack.uncommitted = 1;
    }
    if (extra && extra->has_slice) {
        ack.has_batch_offset = ack.has_batch_count = 1;
        ack.batch_offset = extra->offset;
        ack.batch_count = extra->count;
    }
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_ACK;
    env.ack = &ack;
    return hc_wire_reserve(reply, &env, t, n, dst);
}

/* The variables' names and shapes as the store keeps them ("vars": JSON
 * text, for `hetps export` and `hetps inspect`; a moving statistic's
 * "moving" momentum and "moments_of_prev" for the store's apply) into
 * *out (malloc'd, *len bytes). Names are checked by the wire's decoder (no quotes). */
static int var_defs_json(const Hetps__CreateVariables *cv, char **out,
                         size_t *len)
{
    size_t cap = 64 + cv->n_vars * (HC_WIRE_MAX_NAME +
                                    16 * HC_WIRE_MAX_DIMS + 96);
    char *json = malloc(cap);
    size_t n = 0, v, k;

    if (!(*out = json))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    n += (size_t)snprintf(json + n, cap - n, "[");
    for (v = 0; v < cv->n_vars; v++) {
        n += (size_t)snprintf(json + n, cap - n, "%s{\"name\":\"%s\",\"shape\":[",
                              v ? "," : "", cv->vars[v]->name);
        for (k = 0; k < cv->vars[v]->n_shape; k++)
            n += (size_t)snprintf(json + n, cap - n, "%s%u", k ? "," : "",
                                  cv->vars[v]->shape[k]);
        n += (size_t)snprintf(json + n, cap - n, "]");
        if (cv->vars[v]->has_table_rows)
            n += (size_t)snprintf(json + n, cap - n, ",\"table_rows\":%llu",
                                  (unsigned long long)cv->vars[v]->table_rows);
        if (cv->vars[v]->has_moving_momentum)
            n += (size_t)snprintf(json + n, cap - n, ",\"moving\":%.9g%s",
                                  (double)cv->vars[v]->moving_momentum,
                                  cv->vars[v]->moments_of_prev
                                      ? ",\"moments_of_prev\":true" : "");
        n += (size_t)snprintf(json + n, cap - n, "}");
    }
    n += (size_t)snprintf(json + n, cap - n, "]");
    *len = n;
    return HC_OK;
}

/*
 * Before building a create's layout (memory in proportion to its blocks,
 * under the service's lock): is it the size of what the message carries?
 * The message holds this shard's blocks, and the layout keeps every shard
 * within block_elems elements of the others, so the whole has at most
 * n_shards × (elements sent + block_elems) elements; and since a message
 * carries at most HC_WIRE_MAX_TENSORS blocks, at most n_shards × (that +
 * one partial block per variable) blocks. A ~100-byte message announcing
 * billions of blocks is refused here, in constant memory.
 */
static int check_layout_size(const struct ps_shard *sh,
                             const Hetps__CreateVariables *cv,
                             const size_t *sizes, const struct hc_wire_msg *in)
{
    const uint64_t block = cv->block_elems;
    uint64_t total = 0, blocks = 0, sent = 0, max_blocks;

    for (size_t v = 0; v < cv->n_vars; v++) {
        total += sizes[v];      /* each <= 2^34 (wire.c), at most 4096 */
        blocks += sizes[v] / block + (sizes[v] % block != 0);
    }
    for (size_t t = 0; t < in->n_tensors; t++)
        sent += in->env->tensors[t]->length;
    max_blocks = (uint64_t)sh->n_shards * (HC_WIRE_MAX_TENSORS + cv->n_vars);
    if (total > (uint64_t)sh->n_shards * (sent + block) || blocks > max_blocks)
        return hc_err_set(HC_ERR_LIMIT, "create: a layout of %llu elements in "
                          "%llu blocks of %u, but the message carries %llu "
                          "elements in %zu blocks for this shard (ps:%d of %d);"
                          " refused before building it", (unsigned long long)total,
                          (unsigned long long)blocks, cv->block_elems,
                          (unsigned long long)sent, in->n_tensors, sh->index,
                          sh->n_shards);
    return HC_OK;
}

/* The row-sparse tables a create defines (VariableDef.table_rows; the
 * wire's decoder checked each) into t, their count into *n. */
static int create_tables(const Hetps__CreateVariables *cv,
                         struct ps_table *t, uint32_t *n)
{
    *n = 0;
    for (size_t v = 0; v < cv->n_vars; v++) {
        const Hetps__VariableDef *d = cv->vars[v];

        if (!d->has_table_rows)
            continue;
        if (*n == PS_STORE_MAX_TABLES)
            return hc_err_set(HC_ERR_LIMIT, "create: more than %u row-sparse "
                              "tables", PS_STORE_MAX_TABLES);
        t[*n] = (struct ps_table){(uint32_t)v, d->shape[0], d->table_rows,
                                  {(enum hc_init)d->table_init->kind,
                                   {d->table_init->a, d->table_init->b,
                                    (enum hc_fan)d->table_init->mode,
                                    (enum hc_dist)d->table_init->dist}}};
        ++*n;
    }
    return HC_OK;
}

static int serve_create(struct ps_shard *sh, const struct hc_wire_msg *in,
                        const struct hc_sender *me, nng_msg **reply)
{
    const Hetps__CreateVariables *cv = in->env->create;
    size_t sizes[HC_MODEL_MAX_VARS];
    unsigned char with_prev[HC_MODEL_MAX_VARS];
    const float **init = NULL;
    struct hc_layout layout = { 0 };
    struct hc_optim_conf oc;
    struct ps_store_def def = { 0 };
    struct ps_table tables[PS_STORE_MAX_TABLES];
    char optim[HC_OPTIM_DESCRIBE_MAX], *defs = NULL;
    size_t v, k, b;
    int rv, created = 0, have_layout = 0;

    if (cv->n_vars == 0 || cv->n_vars > HC_MODEL_MAX_VARS)
        return hc_err_set(HC_ERR_LIMIT, "create: %zu variables (1..%d allowed)",
                          cv->n_vars, HC_MODEL_MAX_VARS);
    /* Settings the limits refuse are a malformed request (E_MALFORMED). */
    if (!cv->optimizer)
        return hc_err_set(HC_ERR_PROTO, "create: no optimizer settings");
    if (hc_optim_from_wire(cv->optimizer, "create: optimizer", &oc) != HC_OK) {
        char why[512];

        snprintf(why, sizeof why, "%s", hc_err_msg());
        return hc_err_set(HC_ERR_PROTO, "%s", why);
    }
    for (v = 0; v < cv->n_vars; v++) {
        size_t size = 1;

        for (k = 0; k < cv->vars[v]->n_shape; k++)
            size *= cv->vars[v]->shape[k];
        sizes[v] = cv->vars[v]->has_table_rows ? 0 : size;
        with_prev[v] = cv->vars[v]->moments_of_prev;
    }
    if ((rv = create_tables(cv, tables, &def.n_tables)) != HC_OK)
        return rv;
    if ((rv = check_layout_size(sh, cv, sizes, in)) != HC_OK)
        return rv;
    rv = hc_layout_build_with(sizes, with_prev, (int)cv->n_vars, sh->n_shards,
                              cv->block_elems, &layout);
    if (rv != HC_OK)
        goto out;
    have_layout = 1;
    if (in->n_tensors != layout.shard_blocks[sh->index]) {
        rv = hc_err_set(HC_ERR_MISMATCH, "create: %zu initial blocks sent, "
                        "shard ps:%d holds %u", in->n_tensors, sh->index,
                        layout.shard_blocks[sh->index]);
        goto out;
    }
    init = calloc(in->n_tensors + 1, sizeof *init);
    if (!init) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (b = 0, k = 0; b < layout.n_blocks; b++) {
        const struct hc_block *blk = &layout.blocks[b];
        const Hetps__TensorRef *t;

        if (blk->shard != (uint32_t)sh->index)
            continue;
        t = in->env->tensors[blk->local];
        if (t->key != blk->var || t->offset != blk->offset ||
            t->length != blk->length) {
            rv = hc_err_set(HC_ERR_MISMATCH, "create: tensor %u is (%u, %llu, "
                            "%u), the layout's block is (%u, %llu, %u)",
                            blk->local, t->key, (unsigned long long)t->offset,
                            t->length, blk->var,
                            (unsigned long long)blk->offset, blk->length);
            goto out;
        }
        init[blk->local] = in->data[blk->local];
        k++;
    }
    if ((rv = var_defs_json(cv, &defs, &def.var_defs_len)) != HC_OK)
        goto out;
    def.signature = cv->signature;
    def.layout = &layout;
    def.shard = (uint32_t)sh->index;
    def.optim = &oc;
    def.init = init;
    def.var_defs = defs;
    def.tables = tables;
    def.seed = cv->seed;
    def.rows_loading = cv->rows_follow && def.n_tables > 0;
    ps_fault_point("create:before_init");
    rv = ps_store_init(sh->store, &def, &created);
    if (rv == HC_OK)
        ps_fault_point("create:after_init");
    if (rv == HC_ERR_IO)        /* a full disk: said here, not only replied */
        hc_warn("create refused: %s", hc_err_msg());
    if (rv == HC_OK)
        rv = load_blocks(sh);
    if (rv != HC_OK)
        goto out;
    if (created)
        hc_info("variables created: %zu variables, %u blocks here, optimizer "
                "%s%s", cv->n_vars, sh->n_blocks,
                hc_optim_describe(&oc, optim, sizeof optim),
                def.rows_loading ? "; the tables' initial rows follow" : "");
    else
        hc_info("variables already exist (step %llu): kept",
                (unsigned long long)ps_store_step(sh->store));
    rv = ack_with(sh, in, me, ps_store_step(sh->store), NULL, 0, NULL, NULL,
                  reply);
out:
    free(defs);
    free(init);
    if (have_layout)
        hc_layout_free(&layout);
    return rv;
}

/* HC_ERR_NOTFOUND for a pull or push before the shard serves: no
 * variables yet, or the chief still loading the tables' initial rows. */
static int not_ready(struct ps_shard *sh)
{
    int loading = 0;

    if (ps_store_signature(sh->store) &&
        rows_loading(sh, &loading) == HC_OK && loading)
        return hc_err_set(HC_ERR_NOTFOUND, "shard ps:%d has no variables yet: "
                          "the chief (worker:0) is loading the tables' "
                          "initial rows (--initial-weights)", sh->index);
    return hc_err_set(HC_ERR_NOTFOUND, "shard ps:%d has no variables yet: the "
                      "chief (worker:0) creates them", sh->index);
}

/* The chief's initial rows (InitRows, proto/hetps.proto): each table's
 * ids and values stored while the store is loading, the last (done) ends
 * the loading and publishes the shard; answered with whether the store
 * was loading. A store not loading (loaded, or trained) changes nothing. */
static int serve_init_rows(struct ps_shard *sh, const struct hc_wire_msg *in,
                           const struct hc_sender *me, nng_msg **reply)
{
    const Hetps__InitRows *ir = in->env->init_rows;
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__InitRowsReply ans = HETPS__INIT_ROWS_REPLY__INIT;
    size_t k, i = 0;
    int loading = 0, rv;

    if (!ps_store_signature(sh->store))
        return hc_err_set(HC_ERR_NOTFOUND, "shard ps:%d has no variables yet: "
                          "initial rows come after the create", sh->index);
    if ((rv = rows_loading(sh, &loading)) != HC_OK)
        return rv;
    for (k = 0; loading && k < ir->n_tables; k++, i += 2) {
        const Hetps__RowsRef *t = ir->tables[k];
        uint32_t n_tab, j;
        const struct ps_table *tab = ps_store_tables(sh->store, &n_tab);
        uint64_t *ids;

        for (j = 0; j < n_tab && tab[j].var != t->key; j++)
            ;
        if (j == n_tab || tab[j].dim != t->dim)
            return hc_err_set(HC_ERR_MISMATCH, "initial rows of variable %u "
                              "(dim %u): ps:%d holds no such table", t->key,
                              t->dim, sh->index);
        if (!(ids = malloc(t->n * sizeof *ids)))
            return hc_err_set(HC_ERR_NOMEM, "out of memory for %u ids", t->n);
        for (j = 0; j < t->n; j++)      /* the data is 4-byte aligned */
            ids[j] = hc_wire_row_id(in->data[i], j);
        rv = ps_store_rows_init_put(sh->store, t->key, ids, in->data[i + 1],
                                    t->n);
        free(ids);
        if (rv != HC_OK)
            return rv;
    }
    if (loading && ir->done) {
        ps_fault_point("init_rows:before_done");
        if ((rv = ps_store_meta_put(sh->store, "rows_loading", "\0", 1)) !=
                HC_OK ||
            (rv = load_blocks(sh)) != HC_OK)
            return rv;
        hc_info("the tables' initial rows are in: serving");
    }
    hc_wire_init_env(&env, me, in->env->request_id);
    ans.loading = loading;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_INIT_ROWS_REPLY;
    env.init_rows_reply = &ans;
    return hc_wire_encode(reply, &env, NULL, 0);
}

/* Check a pull range or pushed tensor against the blocks: HC_OK with the
 * local block index in *out, or an error code (message set). */
static int check_range(struct ps_shard *sh, const char *what, size_t i,
                       uint32_t key, uint64_t offset, uint32_t length,
                       int whole, uint32_t *out)
{
    long local = find_block(sh, key, offset);
    const struct ps_block *b;

    if (local < 0)
        return hc_err_set(HC_ERR_NOTFOUND, "%s %zu: no block of variable %u "
                          "at offset %llu on shard ps:%d", what, i, key,
                          (unsigned long long)offset, sh->index);
    b = &sh->blocks[local];
    if (offset + length > b->offset + b->length ||
        (whole && (offset != b->offset || length != b->length)))
        return hc_err_set(HC_ERR_MISMATCH, "%s %zu: (%u, %llu, %u) does not "
                          "match block (%u, %llu, %u) of shard ps:%d", what, i,
                          key, (unsigned long long)offset, length, b->var,
                          (unsigned long long)b->offset, b->length, sh->index);
    *out = (uint32_t)local;
    return HC_OK;
}

/* One allocation holding a pull's per-range arrays (free with free(base)). */
static void *pull_scratch(size_t n, struct pull_scratch *ps)
{
    size_t n1 = n + 1;
    unsigned char *p = malloc(n1 * (sizeof *ps->reads + sizeof *ps->src +
                                    sizeof *ps->dst + sizeof *ps->crcs + 1));

    if (!p)
        return NULL;
    /* Largest alignment first: every array starts aligned. */
    ps->src = (struct hc_tensor_src *)p;
    ps->reads = (struct ps_read *)(ps->src + n1);
    ps->dst = (float **)(ps->reads + n1);
    ps->crcs = (uint32_t *)(ps->dst + n1);
    ps->crc_known = (unsigned char *)(ps->crcs + n1);
    return p;
}

/* A pull's answer: from a snapshot (early 0), or from the open step at
 * version `early` (ps_shard_answer_early). */
static int serve_pull(struct ps_shard *sh, const struct hc_wire_msg *in,
                      const struct hc_sender *me,
                      const struct ps_pull_extra *extra, uint64_t early,
                      nng_msg **reply)
{
    const Hetps__Envelope *e = in->env;
    int is_push = e->payload_case == HETPS__ENVELOPE__PAYLOAD_PUSH;
    size_t n = is_push ? e->push->n_ranges : e->pull->n_ranges;
    /* A push's rows to pull (Push.rows_pull): their tensors follow the
     * ranges' in the answer. */
    size_t nr = is_push ? e->push->n_rows_pull : 0;
    Hetps__Range **ranges = is_push ? e->push->ranges : e->pull->ranges;
    struct ps_snap snap = { 0 };
    struct pull_scratch ps;
    uint64_t step = 0, rstep;
    void *base;
    size_t i;
    int rv;

    if (n > sh->n_blocks)
        return hc_err_set(HC_ERR_LIMIT, "pull of %zu ranges; shard ps:%d has "
                          "%u blocks", n, sh->index, sh->n_blocks);
    if (!(base = pull_scratch(n + nr, &ps)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory for a pull of %zu "
                          "ranges", n);
    for (i = 0; i < n; i++) {
        const Hetps__Range *r = ranges[i];
        uint32_t local;

        if ((rv = check_range(sh, "pull range", i, r->key, r->offset,
                              r->length, 0, &local)) != HC_OK)
            goto out;
        ps.src[i].key = r->key;
        ps.src[i].offset = r->offset;
        ps.src[i].length = r->length;
        ps.src[i].data = NULL;
        ps.reads[i].local = local;
        ps.reads[i].first = (uint32_t)(r->offset - sh->blocks[local].offset);
        ps.reads[i].count = r->length;
    }
    for (i = 0; i < nr; i++) {
        const Hetps__RowsRef *r = e->push->rows_pull[i];

        ps.src[n + i] = (struct hc_tensor_src){r->key, 0, r->n * r->dim,
                                               NULL};
        ps.crc_known[n + i] = 0;
    }
    /* The snapshot first: its step is the version the answer names, however
     * many pushes commit while it is read. */
    step = early;
    if (!early && (rv = ps_store_snap_begin(sh->store, &snap, &step)) != HC_OK)
        goto out;
    rv = ack_with(sh, in, me, step, ps.src, n + nr, ps.dst, extra, reply);
    if (rv != HC_OK)
        goto out;
    for (i = 0; i < n; i++)
        ps.reads[i].dst = ps.dst[i];
    if (!early) {
        rv = ps_store_snap_read(&snap, ps.reads, n);
        ps_store_snap_end(&snap);
    } else if ((rv = ps_store_step_read(sh->store, ps.reads, n, &step)) ==
                   HC_OK && step != early) {
        rv = hc_err_set(HC_ERR_STALE, "shard ps:%d: the open step's values "
                        "are version %llu, not %llu", sh->index,
                        (unsigned long long)step, (unsigned long long)early);
    }
    /* A whole block goes out with the CRC stored with it: no second pass
     * over the data, and the worker checks it end to end. */
    for (i = 0; rv == HC_OK && i < n; i++) {
        ps.crcs[i] = ps.reads[i].crc;
        ps.crc_known[i] = ps.reads[i].first == 0 &&
                          ps.reads[i].count ==
                              sh->blocks[ps.reads[i].local].length;
    }
    /* The rows, each table from a snapshot of its own (at or after the
     * ranges' step), straight into the answer; their CRCs made by the
     * seal. */
    for (i = 0; rv == HC_OK && i < nr; i++)
        rv = ps_shard_read_rows(sh, in, i, ps.dst[n + i], &rstep);
    if (rv == HC_OK)
        rv = hc_wire_seal_known(*reply, ps.crcs, ps.crc_known);
out:
    ps_store_snap_end(&snap);
    free(base);
    if (rv != HC_OK && *reply) {
        nng_msg_free(*reply);
        *reply = NULL;
    }
    return rv;
}

/* Check a push's dense tensors (its blocks: the rows' follow them,
 * hc_wire_push_dense): each a whole block of this shard, none twice;
 * fills u[0 .. *n) with them. A push of rows alone has none. */
static int check_push(struct ps_shard *sh, const struct hc_wire_msg *in,
                      struct ps_update *u, size_t *n)
{
    const Hetps__Envelope *e = in->env;
    size_t i, dense = hc_wire_push_dense(e->push, in->n_tensors);

    *n = dense;
    if (dense == 0 && e->push->n_rows_grad == 0)
        return hc_err_set(HC_ERR_PROTO, "push without tensors");
    if (dense > sh->n_blocks)
        return hc_err_set(HC_ERR_LIMIT, "push of %zu tensors; shard ps:%d has "
                          "%u blocks", dense, sh->index, sh->n_blocks);
    memset(sh->seen, 0, sh->n_blocks);
    for (i = 0; i < dense; i++) {
        const Hetps__TensorRef *t = e->tensors[i];
        uint32_t local;
        int rv;

        if ((rv = check_range(sh, "pushed tensor", i, t->key, t->offset,
                              t->length, 1, &local)) != HC_OK)
            return rv;
        if (sh->seen[local]++)
            return hc_err_set(HC_ERR_PROTO, "pushed tensor %zu repeats block "
                              "(%u, %llu)", i, t->key,
                              (unsigned long long)t->offset);
        u[i].local = local;
        u[i].length = t->length;
        u[i].grad = in->data[i];
        u[i].scale = 1.0f;
    }
    return HC_OK;
}

int ps_shard_push(struct ps_shard *sh, const struct hc_wire_msg *in,
                  uint64_t *version)
{
    struct ps_push_item it = { .in = in };

    ps_shard_push_group(sh, &it, 1);
    if (it.rv != HC_OK)
        return hc_err_set(it.rv, "%s", it.err);
    *version = it.version;
    return HC_OK;
}

/* A push applied at once, answered with an Ack at the version after it. */
static int serve_push(struct ps_shard *sh, const struct hc_wire_msg *in,
                      const struct hc_sender *me, nng_msg **reply)
{
    uint64_t version;
    int rv = ps_shard_push(sh, in, &version);

    if (rv != HC_OK)
        return rv;
    return ack_with(sh, in, me, version, NULL, 0, NULL, NULL, reply);
}

/* The record of push `in`, written with its update. */
static void push_record(const struct hc_wire_msg *in, struct ps_record *rec)
{
    const Hetps__Envelope *e = in->env;

    ps_record_begin(rec, e->sender->index, PS_REQ_PUSH, e->incarnation,
                    e->request_id);
    rec->lane = (uint16_t)(e->has_lane ? e->lane : 0);
    ps_record_set_place(rec, e->push->has_epoch && e->push->has_batches,
                        e->push->epoch, e->push->batches);
}

static void item_fail(struct ps_push_item *it, int rv)
{
    it->rv = rv;
    snprintf(it->err, sizeof it->err, "%s", hc_err_msg());
}

void ps_shard_push_group(struct ps_shard *sh, struct ps_push_item *items,
                         size_t n)
{
    struct ps_update *u = NULL;
    struct ps_apply *g = NULL;
    struct ps_record *recs = NULL;
    struct ps_rows *rows = NULL;    /* (total_rows) the steps' row updates */
    uint64_t **ids = NULL;          /* (total_rows) their ids */
    size_t k, total = 0, total_rows = 0, n_g = 0, at = 0, at_rows = 0, nd;
    uint64_t step;
    int rv;

    for (k = 0; k < n; k++) {
        items[k].rv = HC_OK;
        items[k].version = 0;
        items[k].err[0] = 0;
        total += items[k].in->n_tensors;
        total_rows += items[k].in->env->push->n_rows_grad;
    }
    if (!atomic_load(&sh->ready)) {
        not_ready(sh);
        for (k = 0; k < n; k++)
            item_fail(&items[k], HC_ERR_NOTFOUND);
        return;
    }
    u = calloc(total + 1, sizeof *u);
    g = calloc(n + 1, sizeof *g);
    recs = calloc(n + 1, sizeof *recs);
    rows = calloc(total_rows + 1, sizeof *rows);
    ids = calloc(total_rows + 1, sizeof *ids);
    if (!u || !g || !recs || !rows || !ids) {
        hc_err_set(HC_ERR_NOMEM, "out of memory for %zu pushes", n);
        for (k = 0; k < n; k++)
            item_fail(&items[k], HC_ERR_NOMEM);
        goto out;
    }
    step = ps_store_step(sh->store);
    for (k = 0; k < n; k++) {
        struct ps_push_item *it = &items[k];

        if ((rv = check_push(sh, it->in, u + at, &nd)) != HC_OK ||
            (rv = ps_shard_step_rows(sh, it->in, rows + at_rows,
                                     ids + at_rows)) != HC_OK) {
            item_fail(it, rv);
            for (size_t r = 0; r < it->in->env->push->n_rows_grad; r++) {
                free(ids[at_rows + r]);
                ids[at_rows + r] = NULL;
            }
            continue;
        }
        /* Each push is a step of the group: its version the one after;
         * a later part of a push is applied at its first part's step,
         * not counted again. */
        g[n_g].uncounted = it->in->env->push->has_part &&
                           it->in->env->push->part > 0;
        step += !g[n_g].uncounted;
        it->version = step;
        push_record(it->in, &recs[n_g]);
        g[n_g].u = u + at;
        g[n_g].n = nd;
        g[n_g].recs = &recs[n_g];
        g[n_g].n_recs = 1;
        /* Its rows: carried (Push.rows_grad), or held (PushRows). */
        g[n_g].rows = rows + at_rows;
        g[n_g].n_rows = it->in->env->push->n_rows_grad;
        g[n_g].held_of = recs[n_g].worker + 1;
        n_g++;
        at += nd;
        at_rows += it->in->env->push->n_rows_grad;
    }
    if (n_g && (rv = ps_store_apply_group(sh->store, &sh->optim, g, n_g,
                                          NULL)) != HC_OK)
        for (k = 0; k < n; k++)
            if (items[k].rv == HC_OK)
                item_fail(&items[k], rv);
out:
    for (k = 0; ids && k < total_rows; k++)
        free(ids[k]);
    free(ids);
    free(rows);
    free(u);
    free(g);
    free(recs);
}

/* Block b's lent gradient copied into its sum (acc[b] = lent · w). */
static void take_lent(struct ps_shard *sh, uint32_t b)
{
    vec_scaled_add(sh->acc[b], sh->lent[b], sh->lent_w[b],
                   sh->blocks[b].length, 0);
    sh->acc_used[b] = ACC_SUM;
    sh->lent[b] = NULL;
}

int ps_shard_accumulate(struct ps_shard *sh, const struct hc_wire_msg *in,
                        int lend)
{
    float w = (float)in->env->push->samples;
    size_t i, n;
    int rv;

    if (!sh->n_blocks)
        return hc_err_set(HC_ERR_NOTFOUND, "shard ps:%d has no variables yet",
                          sh->index);
    if (in->env->push->n_rows_grad || in->env->push->n_rows_pull)
        return hc_err_set(HC_ERR_UNSUPPORTED, "a synchronous step's push "
                          "carries rows (rows_grad, rows_pull): sync sends "
                          "them as PushRows and PullRows");
    if ((rv = check_push(sh, in, sh->updates, &n)) != HC_OK)
        return rv;
    for (i = 0; i < n; i++) {
        uint32_t b = sh->updates[i].local;
        const float *g = in->data[i];

        if (sh->applied[b]) {
            /* Its sum went to the open step already (every worker the
             * step waits for was in): a worker it did not wait for. */
            hc_warn("shard ps:%d: a gradient for block %u came after the "
                    "block was applied in this step; left out", sh->index, b);
            continue;
        }
        sh->acc_n[b]++;
        sh->acc_w[b] += in->env->push->samples;
        if (lend && sh->acc_used[b] == ACC_NONE &&
            sh->updates[i].length == sh->blocks[b].length) {
            /* The step's only gradient so far: used where it lies. */
            sh->lent[b] = g;
            sh->lent_w[b] = w;
            sh->acc_used[b] = ACC_LENT;
            continue;
        }
        if (sh->acc_used[b] == ACC_LENT)
            take_lent(sh, b);
        /* The step's first gradient for a block is written, not added to
         * zeros: one pass less, and no clearing after the step. */
        vec_scaled_add(sh->acc[b], g, w, sh->updates[i].length,
                       sh->acc_used[b] == ACC_SUM);
        sh->acc_used[b] = ACC_SUM;
    }
    return HC_OK;
}

void ps_shard_unlend(struct ps_shard *sh, const void *body, size_t len)
{
    const char *lo = body, *hi = lo + len;
    int waited = 0;

    for (uint32_t b = 0; b < sh->n_blocks; b++) {
        if (sh->acc_used[b] != ACC_LENT || (const char *)sh->lent[b] < lo ||
            (const char *)sh->lent[b] >= hi)
            continue;
        if (sh->applied[b]) {
            /* In the open step: read there, once its queued applies are
             * done — then the message may go. */
            if (!waited++)
                ps_store_step_drain(sh->store);
            continue;
        }
        take_lent(sh, b);
    }
}

/* Block b's update of the open step: its sum (or its one lent gradient)
 * over the samples behind it — with every push of the step in it, the
 * step's sample-weighted mean; `total` where no push gave it a gradient
 * (a zero sum, as a step's mean of nothing). */
static void step_update(struct ps_shard *sh, uint32_t b, uint64_t total,
                        struct ps_update *u)
{
    uint64_t w = sh->acc_w[b] ? sh->acc_w[b] : total;

    u->local = b;
    u->length = sh->blocks[b].length;
    u->grad = sh->acc[b];
    u->scale = w ? 1.0f / (float)w : 0.0f;
    if (sh->acc_used[b] == ACC_LENT) {
        u->grad = sh->lent[b];
        u->scale = w ? sh->lent_w[b] / (float)w : 0.0f;
    } else if (sh->acc_used[b] == ACC_NONE) {
        /* No samples behind it: a zero gradient, and a batch norm's
         * moving statistic kept (scale 0, store_apply.c). */
        memset(sh->acc[b], 0, sh->blocks[b].length * sizeof(float));
        u->scale = 0.0f;
    }
}

int ps_shard_apply_ready(struct ps_shard *sh, uint32_t need)
{
    uint32_t b, k = 0;
    int rv;

    if (!need)
        return 0;
    for (b = 0; b < sh->n_blocks; b++) {
        if (sh->applied[b] || sh->acc_n[b] < need)
            continue;
        step_update(sh, b, 0, &sh->updates[k++]);
        sh->applied[b] = 1;
    }
    if (k && (rv = ps_store_step_add(sh->store, &sh->optim, sh->updates,
                                     k)) != HC_OK) {
        hc_warn("shard ps:%d: %s (applied with the step's last blocks)",
                sh->index, hc_err_msg());
        for (b = 0; b < sh->n_blocks; b++)
            sh->applied[b] = 0;
        return 0;
    }
    if (k)
        hc_debug("shard ps:%d: %u blocks to the open step", sh->index, k);
    return (int)k;
}

int ps_shard_apply_step(struct ps_shard *sh, uint64_t total,
                        const struct ps_record *recs, size_t n_recs)
{
    uint32_t b, k = 0;
    int rv;

    for (b = 0; b < sh->n_blocks; b++)
        if (!sh->applied[b])
            step_update(sh, b, total, &sh->updates[k++]);
    rv = ps_store_step_commit(sh->store, &sh->optim, sh->updates, k, recs,
                              n_recs, NULL);
    memset(sh->acc_used, ACC_NONE, sh->n_blocks);
    memset(sh->lent, 0, sh->n_blocks * sizeof *sh->lent);
    memset(sh->acc_n, 0, sh->n_blocks * sizeof *sh->acc_n);
    memset(sh->acc_w, 0, sh->n_blocks * sizeof *sh->acc_w);
    memset(sh->applied, 0, sh->n_blocks);
    return rv;
}

int ps_shard_answer_pull(struct ps_shard *sh, const struct hc_wire_msg *in,
                         const struct hc_sender *me,
                         const struct ps_pull_extra *extra, nng_msg **reply)
{
    *reply = NULL;
    if (!atomic_load(&sh->ready))
        return not_ready(sh);
    return serve_pull(sh, in, me, extra, 0, reply);
}

int ps_shard_applied(struct ps_shard *sh, const struct hc_wire_msg *in)
{
    const Hetps__Push *p = in->env->push;

    for (size_t i = 0; i < p->n_ranges; i++) {
        long b = find_block(sh, p->ranges[i]->key, p->ranges[i]->offset);

        if (b < 0 || !sh->applied[b])
            return 0;
    }
    return p->n_ranges > 0;
}

int ps_shard_answer_early(struct ps_shard *sh, const struct hc_wire_msg *in,
                          const struct hc_sender *me, uint64_t version,
                          nng_msg **reply)
{
    struct ps_pull_extra extra = { .uncommitted = 1 };

    *reply = NULL;
    return serve_pull(sh, in, me, &extra, version, reply);
}

int ps_shard_serve(struct ps_shard *sh, const struct hc_wire_msg *in,
                   const struct hc_sender *me,
                   const struct ps_pull_extra *extra, nng_msg **reply)
{
    *reply = NULL;
    switch (in->env->payload_case) {
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
        return serve_create(sh, in, me, reply);
    case HETPS__ENVELOPE__PAYLOAD_INIT_ROWS:
        return serve_init_rows(sh, in, me, reply);
    case HETPS__ENVELOPE__PAYLOAD_PULL:
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        if (!atomic_load(&sh->ready))
            return not_ready(sh);
        return in->env->payload_case == HETPS__ENVELOPE__PAYLOAD_PULL
                   ? serve_pull(sh, in, me, extra, 0, reply)
                   : serve_push(sh, in, me, reply);
    default:
        return hc_err_set(HC_ERR_PROTO, "not a variable request");
    }
}

struct ps_store *ps_shard_store(const struct ps_shard *sh)
{
    return shard_store(sh);
}


int ps_shard_record(struct ps_shard *sh, int w, uint32_t lane,
                    struct ps_record *out)
{
    return ps_store_record_get(sh->store, (uint32_t)w, lane, out);
}

void ps_shard_place(struct ps_shard *sh, int w, struct ps_place *at)
{
    memset(at, 0, sizeof *at);
    if (sh && ps_store_place(sh->store, (uint32_t)w, at) != HC_OK) {
        hc_warn("%s", hc_err_msg());
        memset(at, 0, sizeof *at);
    }
}

uint64_t ps_shard_version(const struct ps_shard *sh)
{
    return sh && sh->store ? ps_store_step(sh->store) : 0;
}

uint64_t ps_shard_signature(const struct ps_shard *sh)
{
    /* Not ps_store_info: the map's size it reads may be growing under an
     * async push's apply, which holds no service lock this caller holds. */
    return sh && sh->store ? ps_store_signature(sh->store) : 0;
}

uint32_t ps_shard_block_elems(const struct ps_shard *sh)
{
    return sh && sh->store ? ps_store_block_elems(sh->store) : 0;
}

int ps_shard_maintain(struct ps_shard *sh)
{
    return sh && sh->store ? ps_store_maintain(sh->store) : HC_OK;
}

void ps_shard_close(struct ps_shard *sh)
{
    if (!sh)
        return;
    ps_store_close(sh->store);
    free_scratch(sh);
    free(sh);
}
