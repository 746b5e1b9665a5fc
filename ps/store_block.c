/*
 * store_block.c — the values of the "vars" and "slots" databases: a
 * block's parameters and its optimizer slots, each a ps_block_hdr and the
 * floats. Their keys, writing and reading one with its header checked,
 * pulls (ps_store_read), ps_store_verify, and reading and overwriting the
 * slots when `hetps reshard` moves a shard's state. See store.h for the
 * contract and the on-disk layout, store_impl.h for the other store
 * files; the optimizer's updates of these values are in store_apply.c.
 *
 * CRC32C: hc_crc32c (common/crc32c.h), the wire's checksum, so a block's
 * stored CRC is the one a pull of the whole block sends.
 */
#include "store_impl.h"

#include <string.h>

#include "crc32c.h"
#include "err.h"

_Static_assert(sizeof(struct ps_block_hdr) == 24, "block header is 24 bytes");

/* ---- keys and values --------------------------------------------------- */

/* Key of array k (0 = parameters, 1 + slot) of block `local`. */
size_t store_block_key(unsigned char *key, int k, uint32_t local)
{
    if (k == 0) {
        store_be32(key, local);
        return 4;
    }
    store_be32(key, (uint32_t)(k - 1));
    store_be32(key + 4, local);
    return 8;
}

/* Put a block value (header + data, or zeros when data is NULL). */
int store_put_block(struct ps_store *s, MDB_txn *txn, MDB_dbi dbi,
                    const void *key, size_t klen, const struct ps_block *b,
                    uint32_t kind, const float *data, float fill)
{
    MDB_val k = {klen, (void *)key};
    MDB_val v = {HDR_SIZE + (size_t)b->length * 4, NULL};
    struct ps_block_hdr h = {b->var, b->length, b->offset, 0, kind};
    unsigned char *dst;
    int rc = mdb_put(txn, dbi, &k, &v, MDB_RESERVE);

    if (rc != 0)
        return store_lmdb_err(s, rc, "writing a block");
    dst = v.mv_data;
    if (data)
        memcpy(dst + HDR_SIZE, data, (size_t)b->length * 4);
    else if (fill == 0.0f)
        memset(dst + HDR_SIZE, 0, (size_t)b->length * 4);
    else
        for (uint32_t i = 0; i < b->length; i++)
            memcpy(dst + HDR_SIZE + 4 * (size_t)i, &fill, 4);
    h.crc = hc_crc32c(dst + HDR_SIZE, (size_t)b->length * 4);
    memcpy(dst, &h, HDR_SIZE);
    return HC_OK;
}

/* Fetch a block value and check its header's size. */
int store_get_block(struct ps_store *s, MDB_txn *txn, MDB_dbi dbi,
                    const void *key, size_t klen, uint32_t local,
                    const char *kind, MDB_val *v, struct ps_block_hdr *h)
{
    MDB_val k = {klen, (void *)key};
    int rc = mdb_get(txn, dbi, &k, v);

    if (rc == MDB_NOTFOUND)
        return hc_err_set(local < s->n_blocks ? HC_ERR_STORE : HC_ERR_NOTFOUND,
                          "store %s: no %s for block %u (this shard has %u "
                          "blocks)%s", s->dir, kind, local, s->n_blocks,
                          local < s->n_blocks ? "; the store is damaged" : "");
    if (rc != 0)
        return store_lmdb_err(s, rc, "reading a block");
    if (v->mv_size >= HDR_SIZE)
        memcpy(h, v->mv_data, HDR_SIZE);
    if (v->mv_size < HDR_SIZE || v->mv_size != HDR_SIZE + (size_t)h->length * 4)
        return hc_err_set(HC_ERR_STORE, "store %s: %s of block %u has %zu "
                          "bytes, which does not match its header; the store "
                          "is damaged", s->dir, kind, local, v->mv_size);
    return HC_OK;
}

/* ---- pulls ------------------------------------------------------------- */

int store_read_in(struct ps_store *s, MDB_txn *txn, struct ps_read *r,
                  size_t n)
{
    int rv = HC_OK;

    for (size_t i = 0; i < n; i++) {
        unsigned char key[4];
        struct ps_block_hdr h;
        MDB_val v;

        store_be32(key, r[i].local);
        if ((rv = store_get_block(s, txn, s->dbi_vars, key, 4, r[i].local,
                                  "parameters", &v, &h)) != HC_OK)
            return rv;
        if (r[i].first > h.length || r[i].count > h.length - r[i].first)
            return hc_err_set(HC_ERR_INVAL, "store %s: elements %u..%llu are "
                              "outside block %u (%u elements)", s->dir,
                              r[i].first,
                              (unsigned long long)r[i].first + r[i].count,
                              r[i].local, h.length);
        if (r[i].count)
            memcpy(r[i].dst, (const unsigned char *)v.mv_data + HDR_SIZE +
                                 (size_t)r[i].first * 4,
                   (size_t)r[i].count * 4);
        r[i].crc = h.crc;
    }
    return rv;
}

int ps_store_snap_begin(struct ps_store *s, struct ps_snap *snap,
                        uint64_t *step)
{
    MDB_txn *txn = NULL;
    uint64_t at = 0;
    int rv;

    snap->store = NULL;
    snap->txn = NULL;
    if (!atomic_load(&s->initialised))
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: not initialised yet "
                          "(the chief creates the variables first)", s->dir);
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    if ((rv = store_meta_fixed(s, txn, "step", &at, sizeof at)) != HC_OK) {
        store_rtxn_end(s, txn);
        return rv;
    }
    snap->store = s;
    snap->txn = txn;
    if (step)
        *step = at;
    return HC_OK;
}

int ps_store_snap_read(struct ps_snap *snap, struct ps_read *r, size_t n)
{
    return store_read_in(snap->store, snap->txn, r, n);
}

void ps_store_snap_end(struct ps_snap *snap)
{
    if (snap->txn)
        store_rtxn_end(snap->store, snap->txn);
    snap->store = NULL;
    snap->txn = NULL;
}

int ps_store_read(struct ps_store *s, struct ps_read *r, size_t n,
                  uint64_t *step)
{
    struct ps_snap snap;
    int rv;

    if ((rv = ps_store_snap_begin(s, &snap, step)) != HC_OK)
        return rv;
    rv = ps_store_snap_read(&snap, r, n);
    ps_store_snap_end(&snap);
    return rv;
}

int ps_store_read_block(struct ps_store *s, uint32_t local, float *dst,
                        uint32_t len)
{
    struct ps_read r = {local, 0, len, dst, 0};

    if (atomic_load(&s->initialised) && local < s->n_blocks &&
        s->blocks[local].length != len)
        return hc_err_set(HC_ERR_MISMATCH, "store %s: block %u has %u "
                          "elements, not %u", s->dir, local,
                          s->blocks[local].length, len);
    return ps_store_read(s, &r, 1, NULL);
}

/* ---- moving state (hetps reshard) -------------------------------------- */

int ps_store_read_slot(struct ps_store *s, uint32_t slot, uint32_t local,
                       float *dst, uint32_t len)
{
    unsigned char key[8];
    struct ps_block_hdr h;
    MDB_txn *txn = NULL;
    MDB_val v;
    int rv;

    if (slot >= s->n_slots || local >= s->n_blocks ||
        len != s->blocks[local].length)
        return hc_err_set(HC_ERR_INVAL, "store %s: no slot %u of block %u "
                          "with %u elements", s->dir, slot, local, len);
    store_be32(key, slot);
    store_be32(key + 4, local);
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    rv = store_get_block(s, txn, s->dbi_slots, key, 8, local, "slot", &v, &h);
    if (rv == HC_OK) {
        memcpy(dst, (const unsigned char *)v.mv_data + HDR_SIZE,
               (size_t)len * 4);
        if (hc_crc32c(dst, (size_t)len * 4) != h.crc)
            rv = hc_err_set(HC_ERR_CRC, "store %s: slot %u of block %u fails "
                            "its checksum; the store is damaged", s->dir, slot,
                            local);
    }
    store_rtxn_end(s, txn);
    return rv;
}

struct restore_arg {
    const float *const *const *slots;
    uint64_t step;
};

static int restore_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    const struct restore_arg *a = arg;
    int rv;

    for (uint32_t i = 0; i < s->n_blocks; i++) {
        for (uint32_t k = 0; k < s->n_slots; k++) {
            unsigned char key[8];

            store_be32(key, k);
            store_be32(key + 4, i);
            if ((rv = store_put_block(s, txn, s->dbi_slots, key, 8,
                                      &s->blocks[i], 1 + k,
                                      a->slots ? a->slots[k][i] : NULL,
                                      ps_optim_slot_init(&s->optim,
                                                         (int)k))))
                return rv;
        }
    }
    return store_meta_put_u64(s, txn, "step", a->step);
}

int ps_store_restore(struct ps_store *s, const float *const *const *slots,
                     uint64_t step)
{
    struct restore_arg a = { slots, step };
    uint32_t tables = 0;
    int rv;

    ps_store_tables(s, &tables);    /* a shard of rows alone has a step */
    if (!s->n_blocks && !tables)
        return hc_err_set(HC_ERR_NOTFOUND, "store %s holds no variables", s->dir);
    pthread_mutex_lock(&s->wmu);
    rv = store_write_txn(s, restore_body, &a, "restoring the optimizer state");
    pthread_mutex_unlock(&s->wmu);
    if (rv == HC_OK)
        atomic_store(&s->step, step);
    return rv;
}

/* ---- verify ------------------------------------------------------------ */

int ps_store_verify(struct ps_store *s)
{
    static const char *const kinds[] = {"parameters", "slot 0", "slot 1",
                                        "slot 2"};
    MDB_txn *txn = NULL;
    MDB_stat st;
    int rc, rv = HC_OK;

    if (!atomic_load(&s->initialised))
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: not initialised; "
                          "nothing to verify", s->dir);
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    for (uint32_t i = 0; i < s->n_blocks && rv == HC_OK; i++) {
        const struct ps_block *b = &s->blocks[i];

        for (uint32_t k = 0; k <= s->n_slots; k++) {
            unsigned char key[8];
            size_t klen = store_block_key(key, (int)k, i);
            struct ps_block_hdr h;
            MDB_val v;
            uint32_t crc;

            if ((rv = store_get_block(s, txn, k ? s->dbi_slots : s->dbi_vars,
                                      key, klen, i, kinds[k], &v,
                                      &h)) != HC_OK)
                break;
            if (h.var != b->var || h.offset != b->offset ||
                h.length != b->length || h.kind != k) {
                rv = hc_err_set(HC_ERR_STORE, "store %s: %s of block %u: "
                                "header (var %u, offset %llu, %u elements, "
                                "kind %u) disagrees with the block table; the "
                                "store is damaged", s->dir, kinds[k], i, h.var,
                                (unsigned long long)h.offset, h.length, h.kind);
                break;
            }
            crc = hc_crc32c((const unsigned char *)v.mv_data + HDR_SIZE,
                         (size_t)h.length * 4);
            if (crc != h.crc) {
                rv = hc_err_set(HC_ERR_CRC, "store %s: %s of block %u "
                                "(variable %u, offset %llu, %u elements): "
                                "stored CRC32C %08x but the data has %08x; the "
                                "store is damaged: restore it from a checkpoint "
                                "or re-create it", s->dir, kinds[k], i, b->var,
                                (unsigned long long)b->offset, b->length,
                                h.crc, crc);
                break;
            }
        }
    }
    if (rv == HC_OK) {
        if ((rc = mdb_stat(txn, s->dbi_slots, &st)) != 0)
            rv = store_lmdb_err(s, rc, "verifying");
        else if (st.ms_entries != (size_t)s->n_blocks * s->n_slots)
            rv = hc_err_set(HC_ERR_STORE, "store %s: %zu slot values stored, "
                            "expected %u; the store is damaged", s->dir,
                            (size_t)st.ms_entries, s->n_blocks * s->n_slots);
        else if ((rc = mdb_stat(txn, s->dbi_vars, &st)) != 0)
            rv = store_lmdb_err(s, rc, "verifying");
        else if (st.ms_entries != s->n_blocks)
            rv = hc_err_set(HC_ERR_STORE, "store %s: %zu blocks stored, "
                            "expected %u; the store is damaged", s->dir,
                            (size_t)st.ms_entries, s->n_blocks);
    }
    if (rv == HC_OK)
        rv = store_rows_verify(s, txn);
    store_rtxn_end(s, txn);
    return rv;
}
