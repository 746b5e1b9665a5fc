/*
 * store_held.c — a synchronous step's rows pushes held in the store until
 * the step commits (store.h, ps_store_rows_hold): each push's summed
 * gradients, unscaled, with its samples, written as one meta value
 * "held-rows/WORKER/REQUEST" in a transaction of its own beside the push's
 * record, so an answered push survives a restart of the shard; the step's
 * commit (apply_body, the step thread's commit) applies every held push in
 * key order — by worker, then request — summed by row and scaled by
 * 1 / (their samples), one optimizer step per row, and deletes them in the
 * same transaction.
 *
 * A held value: u32 samples, u32 n_tables, n_tables × (u32 var, u32 n,
 * u32 dim, u32 0), then each table's ids (n u64) and gradients (n, dim)
 * f32 padded to 8 bytes, native byte order like the rest of the store.
 */
#include "store_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define HELD_PREFIX "held-rows/"
#define HELD_KEY_MAX 48

struct held_table {
    uint32_t var, n, dim, zero;
};

/* A table's gradient bytes, padded so the next table's ids align. */
static size_t grad_bytes(size_t n, uint32_t dim)
{
    return (n * dim * 4 + 7) & ~(size_t)7;
}

/* The bytes of a held push of rows r[0 .. n). */
static size_t held_size(const struct ps_rows *r, size_t n,
                        const uint32_t *dims)
{
    size_t b = 8 + n * sizeof(struct held_table);

    for (size_t k = 0; k < n; k++)
        b += r[k].n * 8 + grad_bytes(r[k].n, dims[k]);
    return b;
}

struct hold_arg {
    const struct ps_rows *r;
    size_t n;
    const uint32_t *dims;
    uint32_t samples;
    const struct ps_record *rec;
    uint64_t step;
};

/* Delete the worker's held pushes: a worker pushes its rows once a
 * step, so one held already is its restarted process's predecessor's in
 * the same open step, which the new push replaces (the step sums each
 * worker's slice once). */
static int drop_worker(struct ps_store *s, MDB_txn *txn, uint32_t worker)
{
    char prefix[HELD_KEY_MAX];
    MDB_cursor *cur;
    MDB_val k, v;
    size_t len;
    int rc;

    len = (size_t)snprintf(prefix, sizeof prefix, HELD_PREFIX "%08" PRIx32
                           "/", worker);
    if ((rc = mdb_cursor_open(txn, s->dbi_meta, &cur)) != 0)
        return store_lmdb_err(s, rc, "replacing a held rows push");
    /* Each time from the prefix again: the one found is deleted. */
    for (;;) {
        k = (MDB_val){len, prefix};
        if ((rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE)) != 0 ||
            k.mv_size < len || memcmp(k.mv_data, prefix, len) != 0 ||
            (rc = mdb_cursor_del(cur, 0)) != 0)
            break;
    }
    mdb_cursor_close(cur);
    if (rc != 0 && rc != MDB_NOTFOUND)
        return store_lmdb_err(s, rc, "replacing a held rows push");
    return HC_OK;
}

static int hold_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    struct hold_arg *a = arg;
    char key[HELD_KEY_MAX];
    MDB_val k, v;
    unsigned char *p;
    uint32_t hdr[2] = {a->samples, (uint32_t)a->n};
    int rc, rv;

    if ((rv = store_meta_fixed(s, txn, "step", &a->step, sizeof a->step)) !=
        HC_OK || (rv = drop_worker(s, txn, a->rec->worker)) != HC_OK)
        return rv;
    snprintf(key, sizeof key, HELD_PREFIX "%08" PRIx32 "/%016" PRIx64,
             a->rec->worker, a->rec->request_id);
    k = (MDB_val){strlen(key), key};
    v = (MDB_val){held_size(a->r, a->n, a->dims), NULL};
    if ((rc = mdb_put(txn, s->dbi_meta, &k, &v, MDB_RESERVE)) != 0)
        return store_lmdb_err(s, rc, "holding a rows push");
    p = v.mv_data;
    memcpy(p, hdr, sizeof hdr);
    p += sizeof hdr;
    for (size_t t = 0; t < a->n; t++) {
        struct held_table h = {a->r[t].var, (uint32_t)a->r[t].n, a->dims[t],
                               0};

        memcpy(p, &h, sizeof h);
        p += sizeof h;
    }
    for (size_t t = 0; t < a->n; t++) {
        size_t ni = a->r[t].n * 8, ng = a->r[t].n * (size_t)a->dims[t] * 4;

        memcpy(p, a->r[t].ids, ni);
        memcpy(p + ni, a->r[t].grad, ng);
        memset(p + ni + ng, 0, grad_bytes(a->r[t].n, a->dims[t]) - ng);
        p += ni + grad_bytes(a->r[t].n, a->dims[t]);
    }
    return store_record_put(s, txn, a->rec, a->step);
}

static int drop_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    return drop_worker(s, txn, *(const uint32_t *)arg);
}

int ps_store_rows_drop(struct ps_store *s, uint32_t worker)
{
    int rv;

    if (!s->rows)
        return HC_OK;
    pthread_mutex_lock(&s->wmu);
    rv = s->read_only ? HC_OK
                      : store_write_txn(s, drop_body, &worker,
                                        "dropping a held rows push");
    pthread_mutex_unlock(&s->wmu);
    return rv;
}

int ps_store_rows_hold(struct ps_store *s, const struct ps_rows *r, size_t n,
                       uint32_t samples, const struct ps_record *rec,
                       uint64_t *step)
{
    uint32_t dims[PS_STORE_MAX_TABLES], nt = 0;
    const struct ps_table *t = ps_store_tables(s, &nt);
    struct hold_arg a = {r, n, dims, samples, rec, 0};
    int rv;

    if (!atomic_load(&s->initialised))
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: not initialised yet "
                          "(the chief creates the variables first)", s->dir);
    if (samples == 0 || n == 0 || n > PS_STORE_MAX_TABLES || !rec)
        return hc_err_set(HC_ERR_INVAL, "store %s: a held rows push needs "
                          "samples (%u), 1 to %u tables (%zu) and a record",
                          s->dir, samples, PS_STORE_MAX_TABLES, n);
    for (size_t k = 0; k < n; k++) {
        dims[k] = 0;
        for (uint32_t i = 0; i < nt; i++)
            if (t[i].var == r[k].var)
                dims[k] = t[i].dim;
    }
    pthread_mutex_lock(&s->wmu);
    if (s->read_only || rec->magic != PS_RECORD_MAGIC ||
        rec->format != PS_RECORD_FORMAT)
        rv = hc_err_set(HC_ERR_INVAL, "store %s: %s", s->dir, s->read_only
                        ? "opened read-only; cannot hold a push"
                        : "a held push's record was not made by "
                          "ps_record_begin");
    else if ((rv = store_rows_check_update(s, r, n)) == HC_OK &&
        (rv = store_write_txn(s, hold_body, &a, "holding a rows push")) ==
            HC_OK) {
        if (step)
            *step = a.step;
        rv = store_maybe_sync(s);
    }
    pthread_mutex_unlock(&s->wmu);
    return rv;
}

/* One held value, copied out of LMDB (values are 2-byte aligned there)
 * into *buf, its tables appended to *r as updates at scale 1 (scaled by
 * the caller once the samples are summed). */
static int held_parse(struct ps_store *s, const MDB_val *v, void **buf,
                      struct ps_rows **r, size_t *n, size_t *cap,
                      uint64_t *samples)
{
    unsigned char *p;
    uint32_t hdr[2];
    size_t off;

    if (v->mv_size < sizeof hdr)
        goto damaged;
    if (!(*buf = malloc(v->mv_size)))
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory for a held "
                          "rows push", s->dir);
    memcpy(*buf, v->mv_data, v->mv_size);
    p = *buf;
    memcpy(hdr, p, sizeof hdr);
    off = sizeof hdr + (size_t)hdr[1] * sizeof(struct held_table);
    if (hdr[1] > PS_STORE_MAX_TABLES || off > v->mv_size)
        goto damaged;
    *samples += hdr[0];
    for (uint32_t t = 0; t < hdr[1]; t++) {
        struct held_table h;

        memcpy(&h, p + sizeof hdr + t * sizeof h, sizeof h);
        if ((size_t)h.n * 8 + grad_bytes(h.n, h.dim) > v->mv_size - off)
            goto damaged;
        if (*n == *cap) {
            size_t c2 = *cap ? 2 * *cap : 8;
            struct ps_rows *q = realloc(*r, c2 * sizeof *q);

            if (!q)
                return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory",
                                  s->dir);
            *r = q;
            *cap = c2;
        }
        /* 8-byte aligned: malloc'd, every part a multiple of 8 bytes. */
        (*r)[(*n)++] = (struct ps_rows){h.var, h.n,
                                        (const uint64_t *)(void *)(p + off),
                                        (const float *)(void *)(p + off +
                                                                h.n * 8ul),
                                        1.0f};
        off += (size_t)h.n * 8 + grad_bytes(h.n, h.dim);
    }
    return HC_OK;
damaged:
    return hc_err_set(HC_ERR_STORE, "store %s: a held rows push (%zu bytes) "
                      "is damaged; the store was written by another version "
                      "of hetps or damaged", s->dir, v->mv_size);
}

int store_rows_apply_held(struct ps_store *s, MDB_txn *txn,
                          const struct hc_optim_conf *c, uint64_t step,
                          int64_t worker, int *any)
{
    char prefix[HELD_KEY_MAX] = HELD_PREFIX;
    size_t len = worker < 0 ? sizeof HELD_PREFIX - 1
                            : (size_t)snprintf(prefix, sizeof prefix,
                                               HELD_PREFIX "%08" PRIx32 "/",
                                               (uint32_t)worker);
    MDB_cursor *cur = NULL;
    MDB_val k = {len, prefix}, v;
    struct ps_rows *r = NULL;
    void **bufs = NULL;
    size_t n = 0, cap = 0, nb = 0, cap_b = 0;
    uint64_t samples = 0;
    int rc, rv = HC_OK;

    *any = 0;
    if (!s->rows)
        return HC_OK;
    if ((rc = mdb_cursor_open(txn, s->dbi_meta, &cur)) != 0)
        return store_lmdb_err(s, rc, "reading held rows");
    /* Each time from the prefix again: the one found is deleted. */
    while ((rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE)) == 0 &&
           k.mv_size >= len && memcmp(k.mv_data, prefix, len) == 0) {
        if (nb == cap_b) {
            size_t c2 = cap_b ? 2 * cap_b : 8;
            void **q = realloc(bufs, c2 * sizeof *q);

            if (!q) {
                rv = hc_err_set(HC_ERR_NOMEM, "store %s: out of memory",
                                s->dir);
                goto out;
            }
            bufs = q;
            cap_b = c2;
        }
        bufs[nb] = NULL;
        rv = held_parse(s, &v, &bufs[nb], &r, &n, &cap, &samples);
        nb++;
        if (rv != HC_OK)
            goto out;
        /* Deleted in this transaction: applied exactly once with it. */
        if ((rc = mdb_cursor_del(cur, 0)) != 0) {
            rv = store_lmdb_err(s, rc, "deleting a held rows push");
            goto out;
        }
        k = (MDB_val){len, prefix};
    }
    if (rc != 0 && rc != MDB_NOTFOUND) {
        rv = store_lmdb_err(s, rc, "reading held rows");
        goto out;
    }
    if (nb == 0)
        goto out;
    for (size_t i = 0; i < n; i++)
        r[i].scale = 1.0f / (float)samples;
    if ((rv = store_rows_check_update(s, r, n)) == HC_OK &&
        (rv = store_rows_apply(s, txn, c, step, r, n)) == HC_OK)
        *any = 1;
out:
    mdb_cursor_close(cur);
    for (size_t i = 0; i < nb; i++)
        free(bufs[i]);
    free(bufs);
    free(r);
    return rv;
}

int ps_store_rows_held(struct ps_store *s, size_t *n)
{
    MDB_val k = {sizeof HELD_PREFIX - 1, HELD_PREFIX}, v;
    MDB_cursor *cur = NULL;
    MDB_txn *txn = NULL;
    int rc, rv;

    *n = 0;
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    if ((rc = mdb_cursor_open(txn, s->dbi_meta, &cur)) != 0) {
        rv = store_lmdb_err(s, rc, "reading held rows");
        goto out;
    }
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
         rc == 0 && k.mv_size >= sizeof HELD_PREFIX - 1 &&
         memcmp(k.mv_data, HELD_PREFIX, sizeof HELD_PREFIX - 1) == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
        (*n)++;
    if (rc != 0 && rc != MDB_NOTFOUND)
        rv = store_lmdb_err(s, rc, "reading held rows");
    mdb_cursor_close(cur);
out:
    store_rtxn_end(s, txn);
    return rv;
}
