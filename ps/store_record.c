/*
 * store_record.c — the "records" database: per worker, the last request
 * an apply answered (the worker's incarnation, the request id, the step
 * after the apply), the reply it sent, so that a request repeated after a
 * crash or a lost reply is answered again, never applied twice, and the
 * worker's place in its data, so that a restarted worker resumes there.
 * Written in the apply's own transaction (store_apply.c), read by
 * ps_store_record_get. See store.h for the contract and the value's
 * layout, store_impl.h for the other store files.
 */
#include "store_impl.h"

#include <string.h>

#include "err.h"

/* Value of a "records" entry: this header, the place when flags has
 * REC_PLACE, then reply_len bytes. */
struct record_hdr {
    uint64_t incarnation;
    uint64_t request_id;
    uint64_t step;              /* step after the apply that wrote it */
    uint32_t reply_len;
    uint32_t flags;
};

#define REC_PLACE 1u            /* a u32 epoch and u32 batches follow */

int store_record_put(struct ps_store *s, MDB_txn *txn,
                     const struct ps_record *r, uint64_t step)
{
    struct record_hdr h = {r->incarnation, r->request_id, step, r->reply_len,
                           r->place.known ? REC_PLACE : 0};
    uint32_t place[2] = {r->place.epoch, r->place.batches};
    size_t head = sizeof h + (r->place.known ? sizeof place : 0);
    unsigned char key[4];
    MDB_val k = {4, key}, v = {head + r->reply_len, NULL};
    int rc;

    store_be32(key, r->worker);
    if ((rc = mdb_put(txn, s->dbi_recs, &k, &v, MDB_RESERVE)) != 0)
        return store_lmdb_err(s, rc, "writing a record");
    memcpy(v.mv_data, &h, sizeof h);
    if (r->place.known)
        memcpy((unsigned char *)v.mv_data + sizeof h, place, sizeof place);
    if (r->reply_len)
        memcpy((unsigned char *)v.mv_data + head, r->reply, r->reply_len);
    return HC_OK;
}

/* Check a record's value v and read its header, place and where its reply
 * starts (*head). */
static int decode(const struct ps_store *s, uint32_t worker, const MDB_val *v,
                  struct record_hdr *h, struct ps_place *place, size_t *head)
{
    uint32_t at[2] = {0, 0};

    *head = sizeof *h;
    if (v->mv_size >= sizeof *h) {
        memcpy(h, v->mv_data, sizeof *h);
        if (h->flags & REC_PLACE)
            *head += sizeof at;
    }
    if (v->mv_size < sizeof *h || v->mv_size != *head + h->reply_len ||
        (h->flags & ~REC_PLACE))
        return hc_err_set(HC_ERR_STORE, "store %s: the record of worker %u "
                          "has a bad size (%zu bytes) or flags (%#x); the "
                          "store is damaged", s->dir, worker, v->mv_size,
                          v->mv_size >= sizeof *h ? h->flags : 0u);
    if (h->flags & REC_PLACE)
        memcpy(at, (const unsigned char *)v->mv_data + sizeof *h, sizeof at);
    place->known = (h->flags & REC_PLACE) != 0;
    place->epoch = at[0];
    place->batches = at[1];
    return HC_OK;
}

/* The record of worker in txn, checked: its value, header, place and where
 * its reply starts. HC_ERR_NOTFOUND when there is none. */
static int lookup(struct ps_store *s, MDB_txn *txn, uint32_t worker,
                  MDB_val *v, struct record_hdr *h, struct ps_place *at,
                  size_t *head)
{
    unsigned char key[4];
    MDB_val k = {4, key};
    int rc;

    store_be32(key, worker);
    rc = mdb_get(txn, s->dbi_recs, &k, v);
    if (rc == MDB_NOTFOUND)
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: no request recorded for "
                          "worker %u", s->dir, worker);
    if (rc != 0)
        return store_lmdb_err(s, rc, "reading a record");
    return decode(s, worker, v, h, at, head);
}

int ps_store_record_get(struct ps_store *s, uint32_t worker,
                        uint64_t *incarnation, uint64_t *request_id,
                        void *reply, size_t cap, size_t *reply_len)
{
    MDB_txn *txn = NULL;
    MDB_val v;
    struct record_hdr h;
    struct ps_place at;
    size_t head;
    int rv;

    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    if ((rv = lookup(s, txn, worker, &v, &h, &at, &head)) != HC_OK)
        goto out;
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
        memcpy(reply, (const unsigned char *)v.mv_data + head, h.reply_len);
out:
    store_rtxn_end(s, txn);
    return rv;
}

int ps_store_place(struct ps_store *s, uint32_t worker, struct ps_place *at)
{
    MDB_txn *txn = NULL;
    MDB_val v;
    struct record_hdr h;
    size_t head;
    int rv;

    memset(at, 0, sizeof *at);
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    rv = lookup(s, txn, worker, &v, &h, at, &head);
    if (rv == HC_ERR_NOTFOUND) {
        hc_err_clear();
        rv = HC_OK;
    }
    store_rtxn_end(s, txn);
    return rv;
}

int ps_store_records(struct ps_store *s, ps_record_fn fn, void *arg)
{
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    struct record_hdr h;
    struct ps_place at;
    size_t head;
    int rc, rv;

    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    if ((rc = mdb_cursor_open(txn, s->dbi_recs, &cur)) != 0) {
        rv = store_lmdb_err(s, rc, "reading the records");
        goto out;
    }
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        const unsigned char *kb = k.mv_data;
        uint32_t w;

        if (k.mv_size != 4) {
            rv = hc_err_set(HC_ERR_STORE, "store %s: a record has a %zu-byte "
                            "key; the store is damaged", s->dir, k.mv_size);
            goto out;
        }
        w = (uint32_t)kb[0] << 24 | (uint32_t)kb[1] << 16 |
            (uint32_t)kb[2] << 8 | kb[3];
        if ((rv = decode(s, w, &v, &h, &at, &head)) != HC_OK ||
            fn(arg, w, h.incarnation, h.request_id, &at) != 0)
            goto out;
    }
    if (rc != MDB_NOTFOUND)
        rv = store_lmdb_err(s, rc, "reading the records");
out:
    if (cur)
        mdb_cursor_close(cur);
    store_rtxn_end(s, txn);
    return rv;
}
