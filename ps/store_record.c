/*
 * store_record.c — the "records" database, the LMDB side of ps/record.h:
 * per worker and lane, the record of the last request an apply answered ("request
 * R of worker W, incarnation I, answered at version V") with the worker's
 * place in its data, so that a request repeated after a crash is answered
 * again, never applied twice, and a restarted worker resumes where it
 * was. A record's value is the struct's bytes as they are; format 1's
 * (a header, the place, the reply's bytes) is read too. Written in the
 * apply's own transaction (store_apply.c). See store.h for the contract,
 * store_impl.h for the other store files.
 */
#include "store_impl.h"

#include <string.h>

#include "err.h"

/* A record's key: the worker (u32 BE), then for lanes above 0 the lane
 * (u32 BE) — lane 0's key is the one records had before lanes. Returns
 * its size. */
static size_t record_key(unsigned char key[8], uint32_t worker, uint32_t lane)
{
    store_be32(key, worker);
    if (!lane)
        return 4;
    store_be32(key + 4, lane);
    return 8;
}

int store_record_put(struct ps_store *s, MDB_txn *txn,
                     const struct ps_record *r, uint64_t step)
{
    struct ps_record at = *r;
    unsigned char key[8];
    MDB_val k = {record_key(key, r->worker, r->lane), key},
            v = {sizeof at, &at};
    int rc;

    ps_record_answered(&at, step);
    if (!(at.flags & PS_REC_PLACE)) {
        /* A request without a place (a rows push held for the step that
         * follows) keeps the place of the record it replaces: the
         * worker's place moves only with the pushes that say where it
         * is, and a restart resumes from it. */
        MDB_val old;
        struct ps_record was;

        if (mdb_get(txn, s->dbi_recs, &k, &old) == 0 &&
            ps_record_decode(old.mv_data, old.mv_size, r->worker, &was) ==
                0 &&
            (was.flags & PS_REC_PLACE))
            ps_record_set_place(&at, 1, was.epoch, was.batches);
    }
    if ((rc = mdb_put(txn, s->dbi_recs, &k, &v, 0)) != 0)
        return store_lmdb_err(s, rc, "writing a record");
    return HC_OK;
}

/* Read worker's record from its value v. */
static int decode(const struct ps_store *s, uint32_t worker, const MDB_val *v,
                  struct ps_record *r)
{
    if (ps_record_decode(v->mv_data, v->mv_size, worker, r) != 0)
        return hc_err_set(HC_ERR_STORE, "store %s: the record of worker %u "
                          "(%zu bytes) is neither of format %u nor of format "
                          "1; the store is damaged, or written by a newer "
                          "hetps", s->dir, worker, v->mv_size,
                          PS_RECORD_FORMAT);
    return HC_OK;
}

/* The record of (worker, lane) in txn, checked. HC_ERR_NOTFOUND when
 * there is none. */
static int lookup(struct ps_store *s, MDB_txn *txn, uint32_t worker,
                  uint32_t lane, struct ps_record *r)
{
    unsigned char key[8];
    MDB_val k = {record_key(key, worker, lane), key}, v;
    int rc;

    rc = mdb_get(txn, s->dbi_recs, &k, &v);
    if (rc == MDB_NOTFOUND)
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: no request recorded for "
                          "worker %u lane %u", s->dir, worker, lane);
    if (rc != 0)
        return store_lmdb_err(s, rc, "reading a record");
    if ((rc = decode(s, worker, &v, r)) == HC_OK && r->lane != lane)
        rc = hc_err_set(HC_ERR_STORE, "store %s: the record of worker %u lane "
                        "%u names lane %u; the store is damaged", s->dir,
                        worker, lane, r->lane);
    return rc;
}

int ps_store_record_get(struct ps_store *s, uint32_t worker, uint32_t lane,
                        struct ps_record *out)
{
    MDB_txn *txn = NULL;
    int rv;

    memset(out, 0, sizeof *out);
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    rv = lookup(s, txn, worker, lane, out);
    store_rtxn_end(s, txn);
    return rv;
}

/* The place a record holds. */
static void place_of(const struct ps_record *r, struct ps_place *at)
{
    at->known = (r->flags & PS_REC_PLACE) != 0;
    at->epoch = r->epoch;
    at->batches = r->batches;
}

int ps_store_place(struct ps_store *s, uint32_t worker, struct ps_place *at)
{
    struct ps_record r;
    uint64_t newest = 0;
    uint32_t lane;
    int rv = HC_OK;

    /* The newest of the worker's records that holds a place (its lanes
     * carry one push's parts: each records the place). */
    memset(at, 0, sizeof *at);
    for (lane = 0; lane < PS_RECORD_LANES && rv == HC_OK; lane++) {
        rv = ps_store_record_get(s, worker, lane, &r);
        if (rv == HC_ERR_NOTFOUND) {
            hc_err_clear();
            rv = HC_OK;
            continue;
        }
        if (rv == HC_OK && (r.flags & PS_REC_PLACE) &&
            r.request_id >= newest) {
            newest = r.request_id;
            place_of(&r, at);
        }
    }
    return rv;
}

int ps_store_records(struct ps_store *s, ps_record_fn fn, void *arg)
{
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    struct ps_record r;
    struct ps_place at;
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

        if (k.mv_size != 4 && k.mv_size != 8) {
            rv = hc_err_set(HC_ERR_STORE, "store %s: a record has a %zu-byte "
                            "key; the store is damaged", s->dir, k.mv_size);
            goto out;
        }
        w = (uint32_t)kb[0] << 24 | (uint32_t)kb[1] << 16 |
            (uint32_t)kb[2] << 8 | kb[3];
        if ((rv = decode(s, w, &v, &r)) != HC_OK)
            goto out;
        place_of(&r, &at);
        if (fn(arg, w, r.incarnation, r.request_id, &at) != 0)
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
