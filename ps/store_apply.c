/*
 * store_apply.c — one optimizer step as one write transaction
 * (ps_store_apply), or several in one (ps_store_apply_group: group
 * commit): check the updates, read each block's parameters and
 * slots, run the optimizer into the new values, count the step, write the
 * records of the requests it answers (store_record.c), commit, and sync
 * when group commit says so. Which variables take weight decay is worked
 * out once from the store's variable names (decay_flags); a batch norm's
 * moving statistics (moving_flags) are moved by their pushed moments
 * instead of the optimizer, without slots (moving_compute). See store.h for
 * the contract, store_impl.h for the other store files.
 *
 * For each block the old parameters and slots are read (mdb_get), then
 * the new values are reserved (mdb_put with MDB_RESERVE, same size) and
 * the optimizer writes straight into them. With a same-size value LMDB
 * either returns the old location (the page is already dirty in this
 * transaction: the update runs in place) or fresh space (a copied leaf or
 * new overflow pages) while the old copy stays readable until commit —
 * ps_optim_apply handles both. Without MDB_WRITEMAP one hazard would
 * remain: past about 128K dirty pages LMDB spills them to disk at the next
 * put and frees their buffers, moving reservations made earlier. Stores
 * are written with WRITEMAP (no dirty list, no spill), so by default every
 * apply is direct; an apply estimated to dirty more than direct_max_pages
 * (set by tests) computes into the store's scratch first and copies each
 * value in right after its own reservation. Values not 4-byte aligned
 * (small values sit in leaf pages, which LMDB aligns to 2 bytes only) go
 * through the scratch too.
 */
#include "store_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "crc32c.h"
#include "err.h"

struct apply_arg {
    const struct hc_optim_conf *c;
    const struct ps_apply *g;   /* (n_g) steps, applied in order */
    size_t n_g;
    int direct;
    uint64_t new_step;
};

static int is_aligned4(const void *p)
{
    return ((uintptr_t)p & 3u) == 0;
}

/* A block of a split step, made ready by the writer (its records read
 * and its new ones reserved) for the threads that compute it. */
struct store_job {
    const struct ps_block *b;
    const struct ps_update *u;
    const float *in[SCRATCH_ARRAYS];      /* parameters, slots: before */
    unsigned char *dst[SCRATCH_ARRAYS];   /* the reserved values */
};

_Static_assert(PS_STORE_MAX_SLOTS == PS_OPTIM_MAX_SLOTS,
               "the store keeps every slot an optimizer has");

/* Run the optimizer on one block: in[0] the parameters, in[1 + k] slot
 * k; the same for out. */
static void block_compute(struct ps_store *s, const struct hc_optim_conf *c,
                          uint64_t step, const struct ps_block *b,
                          const struct ps_update *u, const float *const *in,
                          float *const *out)
{
    struct ps_optim_step at = {step, u->scale,
                               s->decay && b->var < s->n_decay
                                   ? s->decay[b->var] : 0};

    ps_optim_apply(c, &at, b->length, in[0], u->grad, in + 1, out[0],
                   out + 1);
}

/* Copy the new values into their reserved records unless computed there,
 * and write each record's header with the CRC32C of its floats. */
static void block_finish(const struct ps_block *b, int na,
                         float *const *out, unsigned char *const *dst)
{
    size_t bytes = (size_t)b->length * 4;

    for (int k = 0; k < na; k++) {
        struct ps_block_hdr h = {b->var, b->length, b->offset, 0, (uint32_t)k};

        if ((unsigned char *)out[k] != dst[k] + HDR_SIZE)
            memcpy(dst[k] + HDR_SIZE, out[k], bytes);
        h.crc = hc_crc32c(out[k], bytes);
        memcpy(dst[k], &h, HDR_SIZE);
    }
}

/* Reserve the new value of a block's array k (0: parameters, 1 + s: slot
 * s), `bytes` of floats after the header; *dst is where it goes. */
static int reserve(struct ps_store *s, MDB_txn *txn, int k, MDB_val *key,
                   size_t bytes, unsigned char **dst)
{
    MDB_val v = {HDR_SIZE + bytes, NULL};
    int rc = mdb_put(txn, k ? s->dbi_slots : s->dbi_vars, key, &v,
                     MDB_RESERVE);

    if (rc != 0)
        return store_lmdb_err(s, rc, "writing a block");
    *dst = v.mv_data;
    return HC_OK;
}

/* Variable var's part in batch norm, or NULL for a trained one. */
static const struct store_moving *moving_of(const struct ps_store *s,
                                            uint32_t var)
{
    return s->moving && var < s->n_moving &&
           s->moving[var].kind != MOVING_NONE ? &s->moving[var] : NULL;
}

/* The update of the block of variable var at offset off in step g, or
 * NULL. */
static const struct ps_update *update_of(const struct ps_store *s,
                                         const struct ps_apply *g,
                                         uint32_t var, uint64_t off)
{
    for (size_t i = 0; i < g->n; i++) {
        const struct ps_block *b = &s->blocks[g->u[i].local];

        if (b->var == var && b->offset == off)
            return &g->u[i];
    }
    return NULL;
}

/*
 * A moving statistic's block, outside the optimizer: moving = moving ·
 * momentum + batch · (1 − momentum), the batch's statistic from the
 * pushed moments (their sample-weighted mean: grad · scale). A
 * moving_mean's are the batch's mean; a moving_variance's the batch's
 * mean of squares, its variance that less the square of the mean pushed
 * for its moving_mean in the same step (the block before it: the same
 * shard and push part, layout.h) — the parallel-axis rule. No samples
 * behind the moments (scale 0: a sync step no push gave them), or a
 * variance without its mean's update in the step: unchanged.
 */
static void moving_compute(const struct ps_store *s, const struct ps_block *b,
                           const struct store_moving *mv,
                           const struct ps_apply *g, const struct ps_update *u,
                           const float *in, float *out)
{
    const struct ps_update *m = NULL;
    const float keep = mv->momentum, take = 1.0f - mv->momentum;

    if (mv->kind == MOVING_VARIANCE && b->var > 0)
        m = update_of(s, g, b->var - 1, b->offset);
    if (!(u->scale > 0.0f) ||
        (mv->kind == MOVING_VARIANCE && (!m || !(m->scale > 0.0f) ||
                                         m->length != u->length))) {
        memmove(out, in, (size_t)b->length * sizeof *out);
        return;
    }
    for (uint32_t i = 0; i < b->length; i++) {
        double batch = (double)u->grad[i] * u->scale;

        if (m) {
            double mean = (double)m->grad[i] * m->scale;

            batch -= mean * mean;
            if (batch < 0.0)
                batch = 0.0;
        }
        out[i] = (float)((double)in[i] * keep + batch * take);
    }
}

/*
 * Update one block: see the file comment for why both paths are safe.
 * With `job` (a split step) a direct update whose values are overflow
 * records — a run of pages of their own, which no later put of this
 * transaction moves — and 4-byte aligned is only made ready: its records
 * read and reserved, *deferred set, the computing left to compute_range.
 * Anything else is computed here and now (a small value shares a leaf
 * page, which the next put may rearrange).
 */
static int apply_block(struct ps_store *s, MDB_txn *txn,
                       const struct hc_optim_conf *c, uint64_t step,
                       const struct ps_apply *g, const struct ps_update *u,
                       int direct, struct store_job *job, int *deferred)
{
    static const char *const kinds[] = {"parameters", "slot 0", "slot 1",
                                        "slot 2"};
    const struct ps_block *b = &s->blocks[u->local];
    size_t bytes = (size_t)b->length * 4, ml = s->max_len;
    const struct store_moving *mv = moving_of(s, b->var);
    int na = mv ? 1 : 1 + ps_optim_slots(c);
    int own_pages = HDR_SIZE + bytes >= s->psize, aligned = 1;
    unsigned char keys[SCRATCH_ARRAYS][8], *dst[SCRATCH_ARRAYS] = {NULL};
    MDB_val key[SCRATCH_ARRAYS], old[SCRATCH_ARRAYS];
    const float *in[SCRATCH_ARRAYS] = {NULL};
    float *out[SCRATCH_ARRAYS] = {NULL};
    int rv;

    for (int k = 0; k < na; k++) {
        struct ps_block_hdr h;
        const unsigned char *data;

        key[k].mv_size = store_block_key(keys[k], k, u->local);
        key[k].mv_data = keys[k];
        if ((rv = store_get_block(s, txn, k ? s->dbi_slots : s->dbi_vars,
                                  keys[k], key[k].mv_size, u->local, kinds[k],
                                  &old[k], &h)) != HC_OK)
            return rv;
        if (h.var != b->var || h.offset != b->offset ||
            h.length != b->length || h.kind != (uint32_t)k)
            return hc_err_set(HC_ERR_STORE, "store %s: %s of block %u: header "
                              "(var %u, offset %llu, %u elements) disagrees "
                              "with the block table; the store is damaged",
                              s->dir, kinds[k], u->local, h.var,
                              (unsigned long long)h.offset, h.length);
        data = (const unsigned char *)old[k].mv_data + HDR_SIZE;
        if (is_aligned4(data)) {
            in[k] = (const float *)(const void *)data;
        } else {
            memcpy(s->scratch + k * ml, data, bytes);
            in[k] = s->scratch + k * ml;
            aligned = 0;
        }
    }
    for (int k = 0; k < na; k++) {
        out[k] = s->scratch + (SCRATCH_ARRAYS + k) * ml;
        if (!direct)
            continue;
        if ((rv = reserve(s, txn, k, &key[k], bytes, &dst[k])) != HC_OK)
            return rv;
        if (is_aligned4(dst[k] + HDR_SIZE))
            out[k] = (float *)(void *)(dst[k] + HDR_SIZE);
        else
            aligned = 0;
    }
    if (mv) {
        moving_compute(s, b, mv, g, u, in[0], out[0]);
        for (int k = 0; k < na && !direct; k++)
            if ((rv = reserve(s, txn, k, &key[k], bytes, &dst[k])) != HC_OK)
                return rv;
        block_finish(b, na, out, dst);
        return HC_OK;
    }
    if (job && direct && aligned && own_pages) {
        *job = (struct store_job){b, u, {NULL}, {NULL}};
        memcpy(job->in, in, sizeof in);
        memcpy(job->dst, dst, sizeof dst);
        *deferred = 1;
        return HC_OK;
    }
    block_compute(s, c, step, b, u, in, out);
    for (int k = 0; k < na && !direct; k++)
        if ((rv = reserve(s, txn, k, &key[k], bytes, &dst[k])) != HC_OK)
            return rv;
    block_finish(b, na, out, dst);
    return HC_OK;
}

/* The names of the "vars" application meta (JSON text [{"name": …}, …])
 * into s->decay: hc_optim_decays of each. */
static int decay_from_names(struct ps_store *s, const MDB_val *v,
                            const struct hc_optim_conf *c)
{
    cJSON *root = cJSON_ParseWithLength(v->mv_data, v->mv_size);
    const cJSON *it;
    uint32_t i = 0;
    int rv = HC_OK;

    if (!cJSON_IsArray(root) || (uint32_t)cJSON_GetArraySize(root) < s->n_decay)
        rv = hc_err_set(HC_ERR_STORE, "store %s: the variables' names (meta "
                        "\"app.vars\") do not name the %u variables of its "
                        "blocks; the store is damaged", s->dir, s->n_decay);
    cJSON_ArrayForEach(it, root) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");

        if (rv != HC_OK || i >= s->n_decay)
            break;
        if (!cJSON_IsString(name))
            rv = hc_err_set(HC_ERR_STORE, "store %s: variable %u has no name "
                            "in meta \"app.vars\"; the store is damaged",
                            s->dir, i);
        else
            s->decay[i++] = (uint8_t)hc_optim_decays(c, name->valuestring);
    }
    cJSON_Delete(root);
    return rv;
}

/* Under wmu, in txn: make s->decay say, per variable, whether c's weight
 * decay applies to it (hc_optim_decays on the names in the "vars"
 * application meta). With no exclusions every variable decays and no
 * names are needed; exclusions without the names are HC_ERR_STORE. */
static int decay_flags(struct ps_store *s, MDB_txn *txn,
                       const struct hc_optim_conf *c)
{
    MDB_val v;
    uint32_t n = 0;
    int rv;

    if (!(c->weight_decay > 0.0f))
        return HC_OK;
    if (s->decay && !memcmp(s->decay_for, c->wd_exclude, sizeof s->decay_for))
        return HC_OK;
    for (uint32_t b = 0; b < s->n_blocks; b++)
        if (s->blocks[b].var + 1 > n)
            n = s->blocks[b].var + 1;
    free(s->decay);
    if (!(s->decay = calloc(n ? n : 1, 1)))
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory", s->dir);
    s->n_decay = n;
    if (!c->wd_exclude[0]) {
        memset(s->decay, 1, n);
    } else {
        rv = store_meta_get(s, txn, "app.vars", &v);
        if (rv == HC_ERR_NOTFOUND)
            rv = hc_err_set(HC_ERR_STORE, "store %s: the optimizer excludes "
                            "variables from weight decay by name, but the "
                            "store keeps no names (meta \"app.vars\")",
                            s->dir);
        if (rv == HC_OK)
            rv = decay_from_names(s, &v, c);
        if (rv != HC_OK) {
            free(s->decay);
            s->decay = NULL;
            return rv;
        }
    }
    memcpy(s->decay_for, c->wd_exclude, sizeof s->decay_for);
    return HC_OK;
}

/* Under wmu, in txn, once: s->moving from the definitions in meta
 * "app.vars" (a definition's "moving" momentum, and "moments_of_prev" for
 * a moving_variance). A store without them (made before batch norm, or
 * without names) trains every variable. */
static int moving_flags(struct ps_store *s, MDB_txn *txn)
{
    cJSON *root = NULL;
    const cJSON *it;
    MDB_val v;
    uint32_t n = 0, i = 0;
    int rv;

    if (s->moving)
        return HC_OK;
    for (uint32_t b = 0; b < s->n_blocks; b++)
        if (s->blocks[b].var + 1 > n)
            n = s->blocks[b].var + 1;
    if (!(s->moving = calloc(n ? n : 1, sizeof *s->moving)))
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory", s->dir);
    s->n_moving = n;
    rv = store_meta_get(s, txn, "app.vars", &v);
    if (rv == HC_ERR_NOTFOUND)
        return HC_OK;
    if (rv != HC_OK)
        goto fail;
    root = cJSON_ParseWithLength(v.mv_data, v.mv_size);
    cJSON_ArrayForEach(it, root) {
        const cJSON *mom = cJSON_GetObjectItemCaseSensitive(it, "moving");
        const cJSON *prev = cJSON_GetObjectItemCaseSensitive(it,
                                                             "moments_of_prev");

        if (i >= n)
            break;
        if (cJSON_IsNumber(mom)) {
            if (!(mom->valuedouble >= 0.0 && mom->valuedouble < 1.0)) {
                rv = hc_err_set(HC_ERR_STORE, "store %s: variable %u's moving "
                                "momentum %g in meta \"app.vars\" is not in "
                                "[0, 1); the store is damaged", s->dir, i,
                                mom->valuedouble);
                goto fail;
            }
            s->moving[i].momentum = (float)mom->valuedouble;
            s->moving[i].kind = cJSON_IsTrue(prev) ? MOVING_VARIANCE
                                                   : MOVING_MEAN;
        }
        i++;
    }
    cJSON_Delete(root);
    return HC_OK;
fail:
    cJSON_Delete(root);
    free(s->moving);
    s->moving = NULL;
    return rv;
}

/* The deferred blocks of a split step, cut into ranges for the threads. */
struct split {
    struct ps_store *s;
    const struct hc_optim_conf *c;
    uint64_t step;
    int na, pieces;
    const struct store_job *jobs;
    size_t n;
};

static void compute_range(void *arg, int i)
{
    const struct split *sp = arg;
    size_t lo = sp->n * (size_t)i / (size_t)sp->pieces;
    size_t hi = sp->n * (size_t)(i + 1) / (size_t)sp->pieces;

    for (size_t j = lo; j < hi; j++) {
        const struct store_job *jb = &sp->jobs[j];
        float *out[SCRATCH_ARRAYS] = {NULL};

        for (int k = 0; k < sp->na; k++)
            out[k] = (float *)(void *)(jb->dst[k] + HDR_SIZE);
        block_compute(sp->s, sp->c, sp->step, jb->b, jb->u, jb->in, out);
        block_finish(jb->b, sp->na, out, jb->dst);
    }
}

/* One step's blocks: each made ready by this (the writer's) thread; when
 * the step is big enough to split, the deferred ones then computed on the
 * fan-out's threads and this one, a range each. */
int store_apply_blocks(struct ps_store *s, MDB_txn *txn,
                      const struct hc_optim_conf *c, uint64_t step,
                      const struct ps_apply *g, int direct)
{
    struct split sp = {s, c, step, 1 + ps_optim_slots(c), 0, s->jobs, 0};
    uint64_t elems = 0;
    int rv, split;

    if ((rv = decay_flags(s, txn, c)) != HC_OK ||
        (rv = moving_flags(s, txn)) != HC_OK)
        return rv;
    for (size_t i = 0; i < g->n; i++)
        elems += g->u[i].length;
    split = direct && s->fan && elems >= s->split_min;
    if (split && g->n > s->jobs_cap) {
        struct store_job *j = realloc(s->jobs, g->n * sizeof *j);

        if (!j)
            return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory for "
                              "%zu blocks", s->dir, g->n);
        s->jobs = j;
        s->jobs_cap = g->n;
    }
    for (size_t i = 0; i < g->n; i++) {
        int deferred = 0;

        if ((rv = apply_block(s, txn, c, step, g, &g->u[i], direct,
                              split ? &s->jobs[sp.n] : NULL, &deferred)))
            return rv;
        sp.n += (size_t)deferred;
    }
    if (sp.n == 0)
        return HC_OK;
    sp.jobs = s->jobs;
    sp.pieces = sp.n < 32 ? (int)sp.n : 32;
    hc_fanout_run(s->fan, sp.pieces, compute_range, &sp);
    atomic_fetch_add(&s->steps_split, 1);
    return HC_OK;
}

/* Every step of the group in one transaction. A block updated by two
 * steps is read back from this transaction's dirty page by the second
 * (LMDB returns the same location for its same-size reservation: the
 * update runs in place), so the steps compose exactly as separate
 * transactions would. */
static int apply_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    struct apply_arg *a = arg;
    uint64_t step, first;
    int rv;

    if ((rv = store_meta_fixed(s, txn, "step", &step, sizeof step)) != HC_OK)
        return rv;
    first = step;
    for (size_t k = 0; k < a->n_g; k++) {
        const struct ps_apply *g = &a->g[k];
        /* A later part of a push (async): the step its first part
         * counted, which it does not count again. */
        uint64_t t = g->uncounted && step > 0 ? step - 1 : step;
        int held = 0;

        if ((rv = store_apply_blocks(s, txn, a->c, t, g, a->direct)) != HC_OK ||
            (rv = store_rows_apply(s, txn, a->c, t, g->rows,
                                       g->n_rows)) != HC_OK)
            return rv;
        /* A synchronous step's held rows pushes join its first step; an
         * async step, its own worker's. */
        if (!g->uncounted && (g->held_of || k == 0) &&
            (rv = store_rows_apply_held(s, txn, a->c, t,
                                        (int64_t)g->held_of - 1, &held)) !=
                HC_OK)
            return rv;
        if ((g->n > 0 || g->n_rows > 0 || held) && !g->uncounted)
            step++;
        for (size_t i = 0; i < g->n_recs; i++)
            if ((rv = store_record_put(s, txn, &g->recs[i], step)) != HC_OK)
                return rv;
    }
    if (step != first &&
        (rv = store_meta_put_u64(s, txn, "step", step)) != HC_OK)
        return rv;
    a->new_step = step;
    return HC_OK;
}

/* Check an apply's arguments before any transaction starts. */
int store_apply_check(struct ps_store *s, const struct hc_optim_conf *c,
                       const struct ps_update *u, size_t n,
                       const struct ps_record *recs, size_t n_recs)
{
    int rv;

    if (s->read_only)
        return hc_err_set(HC_ERR_INVAL, "store %s: opened read-only; cannot "
                          "apply", s->dir);
    if (!c)
        return hc_err_set(HC_ERR_INVAL, "store %s: apply without optimizer "
                          "settings", s->dir);
    if ((rv = hc_optim_validate(c, s->dir)) != HC_OK)
        return rv;
    if ((uint32_t)ps_optim_slots(c) > s->n_slots) {
        char made[HC_OPTIM_DESCRIBE_MAX];

        return hc_err_set(HC_ERR_MISMATCH, "store %s: optimizer %s needs %d "
                          "slot arrays but the store was made with %s (%u)",
                          s->dir, hc_optim_name(c->type), ps_optim_slots(c),
                          hc_optim_describe(&s->optim, made, sizeof made),
                          s->n_slots);
    }
    if (++s->seen_gen == 0) {
        memset(s->seen, 0, (size_t)s->n_blocks * sizeof *s->seen);
        s->seen_gen = 1;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t l = u[i].local;

        if (l >= s->n_blocks)
            return hc_err_set(HC_ERR_INVAL, "store %s: update %zu names block "
                              "%u but this shard has %u blocks", s->dir, i, l,
                              s->n_blocks);
        if (u[i].length != s->blocks[l].length)
            return hc_err_set(HC_ERR_INVAL, "store %s: update %zu for block %u "
                              "has %u elements, the block %u", s->dir, i, l,
                              u[i].length, s->blocks[l].length);
        if (!u[i].grad || !isfinite(u[i].scale))
            return hc_err_set(HC_ERR_INVAL, "store %s: update %zu for block %u "
                              "has no gradient or a non-finite scale", s->dir,
                              i, l);
        if (s->seen[l] == s->seen_gen)
            return hc_err_set(HC_ERR_INVAL, "store %s: block %u appears twice "
                              "in one apply", s->dir, l);
        s->seen[l] = s->seen_gen;
    }
    for (size_t i = 0; i < n_recs; i++)
        if (recs[i].magic != PS_RECORD_MAGIC ||
            recs[i].format != PS_RECORD_FORMAT)
            return hc_err_set(HC_ERR_INVAL, "store %s: record %zu (worker %u) "
                              "was not made by ps_record_begin", s->dir, i,
                              recs[i].worker);
    return HC_OK;
}

int ps_store_apply_group(struct ps_store *s, const struct hc_optim_conf *c,
                         const struct ps_apply *g, size_t n_g,
                         uint64_t *new_step)
{
    struct apply_arg a = {c, g, n_g, 0, 0};
    uint64_t pages = 16;
    int rv = HC_OK;

    if (!atomic_load(&s->initialised))
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: not initialised yet "
                          "(the chief creates the variables first)", s->dir);
    pthread_mutex_lock(&s->wmu);
    for (size_t k = 0; k < n_g && rv == HC_OK; k++)
        if ((rv = store_apply_check(s, c, g[k].u, g[k].n, g[k].recs,
                                    g[k].n_recs)) == HC_OK)
            rv = store_rows_check_update(s, g[k].rows, g[k].n_rows);
    if (rv != HC_OK)
        goto out;
    /* Counted per step: a block two steps share is counted twice, which
     * only errs towards the scratch path. */
    for (size_t k = 0; k < n_g; k++) {
        for (size_t i = 0; i < g[k].n; i++) {
            uint64_t bytes = HDR_SIZE + (uint64_t)g[k].u[i].length * 4 + 16;

            pages += (uint64_t)(1 + ps_optim_slots(c)) *
                     ((bytes + s->psize - 1) / s->psize + 8);
        }
        pages += (uint64_t)g[k].n_recs * 10;
    }
    a.direct = pages <= s->direct_max_pages;
    if ((rv = store_write_txn(s, apply_body, &a,
                              "applying an update")) != HC_OK)
        goto out;
    atomic_store(&s->step, a.new_step);
    if (new_step)
        *new_step = a.new_step;
    rv = store_maybe_sync(s);
out:
    pthread_mutex_unlock(&s->wmu);
    return rv;
}

int ps_store_apply(struct ps_store *s, const struct hc_optim_conf *c,
                   const struct ps_update *u, size_t n,
                   const struct ps_record *recs, size_t n_recs,
                   uint64_t *new_step)
{
    struct ps_apply g = {.u = u, .n = n, .recs = recs, .n_recs = n_recs};

    return ps_store_apply_group(s, c, &g, 1, new_step);
}

int ps_store_apply_rows(struct ps_store *s, const struct hc_optim_conf *c,
                        const struct ps_update *u, size_t n,
                        const struct ps_rows *rows, size_t n_rows,
                        const struct ps_record *recs, size_t n_recs,
                        uint64_t *new_step)
{
    struct ps_apply g = {.u = u, .n = n, .recs = recs, .n_recs = n_recs,
                         .rows = rows, .n_rows = n_rows};

    return ps_store_apply_group(s, c, &g, 1, new_step);
}
