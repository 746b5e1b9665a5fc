/*
 * store_record.c — the "records" database: per worker, the last request
 * an apply answered (the worker's incarnation, the request id, the step
 * after the apply) and the reply it sent, so that a request repeated
 * after a crash or a lost reply is answered again, never applied twice.
 * Written in the apply's own transaction (store_apply.c), read by
 * ps_store_record_get. See store.h for the contract and the value's
 * layout, store_impl.h for the other store files.
 */
#include "store_impl.h"

#include <string.h>

#include "err.h"

/* Value of a "records" entry, followed by reply_len bytes. */
struct record_hdr {
    uint64_t incarnation;
    uint64_t request_id;
    uint64_t step;              /* step after the apply that wrote it */
    uint32_t reply_len;
    uint32_t pad;
};

int store_record_put(struct ps_store *s, MDB_txn *txn,
                     const struct ps_record *r, uint64_t step)
{
    struct record_hdr h = {r->incarnation, r->request_id, step, r->reply_len,
                           0};
    unsigned char key[4];
    MDB_val k = {4, key}, v = {sizeof h + r->reply_len, NULL};
    int rc;

    store_be32(key, r->worker);
    if ((rc = mdb_put(txn, s->dbi_recs, &k, &v, MDB_RESERVE)) != 0)
        return store_lmdb_err(s, rc, "writing a record");
    memcpy(v.mv_data, &h, sizeof h);
    if (r->reply_len)
        memcpy((unsigned char *)v.mv_data + sizeof h, r->reply, r->reply_len);
    return HC_OK;
}

int ps_store_record_get(struct ps_store *s, uint32_t worker,
                        uint64_t *incarnation, uint64_t *request_id,
                        void *reply, size_t cap, size_t *reply_len)
{
    MDB_txn *txn = NULL;
    unsigned char key[4];
    MDB_val k = {4, key}, v;
    struct record_hdr h;
    int rc, rv;

    store_be32(key, worker);
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    rc = mdb_get(txn, s->dbi_recs, &k, &v);
    if (rc == MDB_NOTFOUND) {
        rv = hc_err_set(HC_ERR_NOTFOUND, "store %s: no request recorded for "
                        "worker %u", s->dir, worker);
        goto out;
    }
    if (rc != 0) {
        rv = store_lmdb_err(s, rc, "reading a record");
        goto out;
    }
    if (v.mv_size >= sizeof h)
        memcpy(&h, v.mv_data, sizeof h);
    if (v.mv_size < sizeof h || v.mv_size != sizeof h + h.reply_len) {
        rv = hc_err_set(HC_ERR_STORE, "store %s: the record of worker %u has "
                        "a bad size (%zu bytes); the store is damaged",
                        s->dir, worker, v.mv_size);
        goto out;
    }
    if (incarnation)
        *incarnation = h.incarnation;
    if (request_id)
        *request_id = h.request_id;
    if (reply_len)
        *reply_len = h.reply_len;
    if (h.reply_len > cap) {
        rv = hc_err_set(HC_ERR_LIMIT, "store %s: the reply recorded for worker "
                        "%u has %u bytes but the buffer holds %zu", s->dir,
                        worker, h.reply_len, cap);
        goto out;
    }
    if (h.reply_len)
        memcpy(reply, (const unsigned char *)v.mv_data + sizeof h, h.reply_len);
out:
    store_rtxn_end(s, txn);
    return rv;
}
