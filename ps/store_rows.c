/*
 * store_rows.c — row-sparse tables in the store (store.h, *row-sparse
 * tables*): the "rows" database keyed (u32 BE variable, u64 BE row) so a
 * table's rows sort by id, each row's value its header, parameters and
 * optimizer slots; the tables' definitions and row counts in meta; a read
 * that gives a row never written its initial value (hc_init_row); and the
 * lazy optimizer step of each touched row, run by ps_optim_apply at the
 * row's own update count inside the step's write transaction.
 *
 * Rows are small (a few hundred bytes) and sit in LMDB's leaf pages, which
 * align values to 2 bytes only: a row is copied into the store's row
 * scratch, updated there, and put back whole, its CRC32C recomputed.
 */
#include "store_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "err.h"
#include "rowmap.h"

#define KEY_SIZE 12

/* A table as meta "tables" keeps it (32 bytes, little-endian). */
struct table_rec {
    uint32_t var, dim;
    uint64_t input_dim;
    uint32_t kind;
    float a, b;
    uint32_t mode_dist;         /* mode | dist << 16 */
};

struct store_rows {
    MDB_dbi dbi;
    int have_db;                /* 0: a read-only open of a store without */
    struct ps_table *tables;    /* (n_tables) */
    uint32_t n_tables;
    uint64_t seed;
    float *scratch;             /* under wmu: a row, (1 + n_slots) × dim */
    size_t scratch_len;
    uint64_t added[PS_STORE_MAX_TABLES];    /* under wmu: rows new in the
                                               transaction being written */
};

static void row_key(unsigned char *k, uint32_t var, uint64_t row)
{
    store_be32(k, var);
    store_be32(k + 4, (uint32_t)(row >> 32));
    store_be32(k + 8, (uint32_t)row);
}

int ps_store_row_key_cmp(const void *a, size_t na, const void *b, size_t nb)
{
    size_t n = na < nb ? na : nb;
    int d;

    if (na == KEY_SIZE && nb == KEY_SIZE) {
        uint64_t x, y;
        uint32_t u, w;

        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return __builtin_bswap64(x) < __builtin_bswap64(y) ? -1 : 1;
        memcpy(&u, (const char *)a + 8, 4);
        memcpy(&w, (const char *)b + 8, 4);
        u = __builtin_bswap32(u);
        w = __builtin_bswap32(w);
        return (u > w) - (u < w);
    }
    d = n ? memcmp(a, b, n) : 0;
    if (d)
        return d < 0 ? -1 : 1;
    return (na > nb) - (na < nb);
}

static int rows_cmp(const MDB_val *a, const MDB_val *b)
{
    return ps_store_row_key_cmp(a->mv_data, a->mv_size, b->mv_data,
                                b->mv_size);
}

static uint32_t be32_at(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 |
           b[3];
}

static int rows_state(struct ps_store *s)
{
    if (!s->rows && !(s->rows = calloc(1, sizeof *s->rows)))
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory", s->dir);
    return HC_OK;
}

int store_rows_open(struct ps_store *s, MDB_txn *txn)
{
    int rc, rv;

    if ((rv = rows_state(s)) != HC_OK)
        return rv;
    rc = mdb_dbi_open(txn, "rows", s->read_only ? 0 : MDB_CREATE,
                      &s->rows->dbi);
    if (rc == MDB_NOTFOUND && s->read_only)
        return HC_OK;
    if (rc == 0)
        rc = mdb_set_compare(txn, s->rows->dbi, rows_cmp);
    if (rc != 0)
        return store_lmdb_err(s, rc, "opening the rows database");
    s->rows->have_db = 1;
    return HC_OK;
}

void store_rows_free(struct ps_store *s)
{
    if (!s->rows)
        return;
    free(s->rows->tables);
    free(s->rows->scratch);
    free(s->rows);
    s->rows = NULL;
}

/* ---- the tables ---------------------------------------------------------- */

static const struct ps_table *table_of(const struct ps_store *s, uint32_t var,
                                       uint32_t *index)
{
    for (uint32_t i = 0; s->rows && i < s->rows->n_tables; i++)
        if (s->rows->tables[i].var == var) {
            if (index)
                *index = i;
            return &s->rows->tables[i];
        }
    return NULL;
}

static int no_table(const struct ps_store *s, uint32_t var)
{
    return hc_err_set(HC_ERR_NOTFOUND, "store %s: variable %u is not a "
                      "row-sparse table of this store (it has %u)", s->dir,
                      var, s->rows ? s->rows->n_tables : 0);
}

int store_rows_check(const struct ps_store *s, const struct ps_table *t,
                     uint32_t n)
{
    if (n > PS_STORE_MAX_TABLES)
        return hc_err_set(HC_ERR_INVAL, "store %s: %u row-sparse tables; at "
                          "most %u", s->dir, n, PS_STORE_MAX_TABLES);
    for (uint32_t i = 0; i < n; i++) {
        if (t[i].dim == 0 || t[i].dim > PS_TABLE_MAX_DIM ||
            t[i].input_dim == 0 || t[i].input_dim > HC_ROW_ID_LIMIT)
            return hc_err_set(HC_ERR_INVAL, "store %s: table %u (variable %u) "
                              "has input_dim %llu and output_dim %u; each "
                              "must be at least 1, input_dim at most 2^62 and "
                              "output_dim at most %u", s->dir, i, t[i].var,
                              (unsigned long long)t[i].input_dim, t[i].dim,
                              PS_TABLE_MAX_DIM);
        if ((unsigned)t[i].init.kind > HC_INIT_VARIANCE_SCALING)
            return hc_err_set(HC_ERR_INVAL, "store %s: table %u (variable %u) "
                              "has an unknown initialiser %d", s->dir, i,
                              t[i].var, (int)t[i].init.kind);
        for (uint32_t j = 0; j < i; j++)
            if (t[j].var == t[i].var)
                return hc_err_set(HC_ERR_INVAL, "store %s: variable %u is "
                                  "given as a table twice", s->dir, t[i].var);
    }
    return HC_OK;
}

static struct table_rec to_rec(const struct ps_table *t)
{
    return (struct table_rec){t->var, t->dim, t->input_dim,
                              (uint32_t)t->init.kind, t->init.par.a,
                              t->init.par.b,
                              (uint32_t)t->init.par.mode |
                                  (uint32_t)t->init.par.dist << 16};
}

static struct ps_table from_rec(const struct table_rec *r)
{
    struct ps_table t = {r->var, r->dim, r->input_dim, {0, {0, 0, 0, 0}}};

    t.init.kind = (enum hc_init)r->kind;
    t.init.par.a = r->a;
    t.init.par.b = r->b;
    t.init.par.mode = (enum hc_fan)(r->mode_dist & 0xffff);
    t.init.par.dist = (enum hc_dist)(r->mode_dist >> 16);
    return t;
}

int store_rows_init(struct ps_store *s, MDB_txn *txn,
                    const struct ps_table *t, uint32_t n, uint64_t seed)
{
    struct table_rec recs[PS_STORE_MAX_TABLES];
    uint64_t counts[PS_STORE_MAX_TABLES] = {0};
    int rv;

    if (n == 0)
        return HC_OK;
    for (uint32_t i = 0; i < n; i++)
        recs[i] = to_rec(&t[i]);
    if ((rv = store_meta_put(s, txn, "tables", recs, n * sizeof *recs)) ||
        (rv = store_meta_put_u64(s, txn, "seed", seed)))
        return rv;
    return store_meta_put(s, txn, "table_rows", counts, n * sizeof *counts);
}

int store_rows_adopt(struct ps_store *s, const struct ps_table *t,
                     uint32_t n, uint64_t seed)
{
    struct ps_table *copy = NULL;
    int rv;

    if ((rv = rows_state(s)) != HC_OK)
        return rv;
    if (n && !(copy = malloc(n * sizeof *copy)))
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory", s->dir);
    if (n)
        memcpy(copy, t, n * sizeof *copy);
    free(s->rows->tables);
    s->rows->tables = copy;
    s->rows->n_tables = n;
    s->rows->seed = seed;
    return HC_OK;
}

int store_rows_load(struct ps_store *s, MDB_txn *txn)
{
    struct ps_table t[PS_STORE_MAX_TABLES];
    struct table_rec r;
    uint64_t seed;
    MDB_val v;
    uint32_t n;
    int rv = store_meta_get(s, txn, "tables", &v);

    if (rv == HC_ERR_NOTFOUND)
        return store_rows_adopt(s, NULL, 0, 0);
    if (rv != HC_OK)
        return rv;
    n = (uint32_t)(v.mv_size / sizeof r);
    if (v.mv_size % sizeof r || n > PS_STORE_MAX_TABLES)
        return hc_err_set(HC_ERR_STORE, "store %s: meta \"tables\" has %zu "
                          "bytes, not a list of %zu-byte tables; the store "
                          "is damaged", s->dir, v.mv_size, sizeof r);
    for (uint32_t i = 0; i < n; i++) {
        memcpy(&r, (const char *)v.mv_data + i * sizeof r, sizeof r);
        t[i] = from_rec(&r);
    }
    if ((rv = store_rows_check(s, t, n)) != HC_OK)
        return hc_err_set(HC_ERR_STORE, "%s; the store is damaged",
                          hc_err_msg());
    if ((rv = store_meta_fixed(s, txn, "seed", &seed, sizeof seed)) != HC_OK)
        return rv;
    return store_rows_adopt(s, t, n, seed);
}

int store_rows_mismatch(const struct ps_store *s, const struct ps_table *t,
                        uint32_t n, uint64_t seed)
{
    uint32_t have = s->rows ? s->rows->n_tables : 0;

    if (have != n || (n && s->rows->seed != seed))
        return hc_err_set(HC_ERR_MISMATCH, "store %s: holds %u row-sparse "
                          "table%s (seed %llu) but the model has %u (seed "
                          "%llu): train it in a fresh --data-dir", s->dir,
                          have, have == 1 ? "" : "s",
                          (unsigned long long)(have ? s->rows->seed : 0), n,
                          (unsigned long long)seed);
    for (uint32_t i = 0; i < n; i++) {
        struct table_rec a = to_rec(&s->rows->tables[i]), b = to_rec(&t[i]);

        if (memcmp(&a, &b, sizeof a))
            return hc_err_set(HC_ERR_MISMATCH, "store %s: table %u is "
                              "variable %u of (%llu, %u) rows in the store, "
                              "variable %u of (%llu, %u) in the model, or "
                              "their initialisers differ: train it in a "
                              "fresh --data-dir", s->dir, i, a.var,
                              (unsigned long long)a.input_dim, a.dim, b.var,
                              (unsigned long long)b.input_dim, b.dim);
    }
    return HC_OK;
}

const struct ps_table *ps_store_tables(const struct ps_store *s, uint32_t *n)
{
    *n = s->rows ? s->rows->n_tables : 0;
    return *n ? s->rows->tables : NULL;
}

/* ---- one row ------------------------------------------------------------- */

/* Row `id`'s initial value into out: its parameters (hc_init_row) and,
 * when ns > 0, ns slot arrays at the optimizer's fresh values ((1 + ns)
 * × dim floats); *hdr a header of 0 updates. */
static void row_initial(const struct ps_store *s, const struct ps_table *t,
                        uint64_t id, uint32_t ns, float *out,
                        struct ps_row_hdr *hdr)
{
    *hdr = (struct ps_row_hdr){t->dim, 0, 0};
    hc_init_row(&t->init, t->input_dim, t->dim, s->rows->seed, t->var, id,
                out);
    for (uint32_t k = 0; k < ns; k++) {
        float f = ps_optim_slot_init(&s->optim, (int)k);

        for (uint32_t j = 0; j < t->dim; j++)
            out[(size_t)(1 + k) * t->dim + j] = f;
    }
}

/* Check stored value v of row `id` in place (its size, dim and CRC32C
 * over the mapped bytes: no copy is made to check it); *hdr its header;
 * returns HC_OK with *floats its (1 + n_slots) × dim floats, unaligned
 * (LMDB aligns values to 2 bytes: memcpy them out). */
static int row_check(const struct ps_store *s, const struct ps_table *t,
                     uint64_t id, const MDB_val *v, struct ps_row_hdr *hdr,
                     const char **floats)
{
    size_t nb = (size_t)(1 + s->n_slots) * t->dim * sizeof(float);

    if (v->mv_size != sizeof *hdr + nb)
        return hc_err_set(HC_ERR_STORE, "store %s: row %llu of variable %u "
                          "has %zu bytes, expected %zu; the store is damaged",
                          s->dir, (unsigned long long)id, t->var, v->mv_size,
                          sizeof *hdr + nb);
    memcpy(hdr, v->mv_data, sizeof *hdr);
    *floats = (const char *)v->mv_data + sizeof *hdr;
    if (hdr->dim != t->dim || hc_crc32c(*floats, nb) != hdr->crc)
        return hc_err_set(HC_ERR_CRC, "store %s: row %llu of variable %u "
                          "fails its checksum; the store is damaged: restore "
                          "it from a checkpoint", s->dir,
                          (unsigned long long)id, t->var);
    return HC_OK;
}

/* Row `id` of table t found with cursor cur (NULL: a store without rows;
 * left on the row when stored): its first w floats — its parameters
 * (w = dim) or its parameters and slots (w = (1 + n_slots) × dim) — into
 * out, the stored ones (checksum verified) or the initial ones; *hdr its
 * header (updates 0 when not stored), *stored whether it is, *at where
 * its value lies in the map (NULL when not stored). */
static int row_load(struct ps_store *s, MDB_cursor *cur,
                    const struct ps_table *t, uint64_t id, size_t w,
                    float *out, struct ps_row_hdr *hdr, int *stored,
                    const void **at)
{
    unsigned char key[KEY_SIZE];
    MDB_val k = {KEY_SIZE, key}, v;
    const char *floats;
    int rv, rc = MDB_NOTFOUND;

    row_key(key, t->var, id);
    if (cur)
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY);
    *at = NULL;
    if (rc == MDB_NOTFOUND) {
        *stored = 0;
        row_initial(s, t, id, w > t->dim ? s->n_slots : 0, out, hdr);
        return HC_OK;
    }
    if (rc != 0)
        return store_lmdb_err(s, rc, "reading a row");
    if ((rv = row_check(s, t, id, &v, hdr, &floats)) != HC_OK)
        return rv;
    memcpy(out, floats, w * sizeof *out);
    *stored = 1;
    *at = v.mv_data;
    return HC_OK;
}

/* ---- reads --------------------------------------------------------------- */

static int check_ids(const struct ps_store *s, const struct ps_table *t,
                     const uint64_t *ids, size_t n, int sorted)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= t->input_dim)
            return hc_err_set(HC_ERR_INVAL, "store %s: row id %llu (position "
                              "%zu) of variable %u is not below its "
                              "input_dim %llu", s->dir,
                              (unsigned long long)ids[i], i, t->var,
                              (unsigned long long)t->input_dim);
        if (sorted && i > 0 && ids[i] <= ids[i - 1])
            return hc_err_set(HC_ERR_INVAL, "store %s: row ids of variable %u "
                              "are not ascending and unique at position %zu "
                              "(%llu after %llu)", s->dir, t->var, i,
                              (unsigned long long)ids[i],
                              (unsigned long long)ids[i - 1]);
    }
    return HC_OK;
}

/* Rows ids[0 .. n) of t from one read transaction into out: each row's
 * parameters (whole = 0) or its parameters and slots (whole = 1); the last
 * row's header and whether it is stored into *hdr, *stored (may be NULL).
 *
 * A cursor left on a row makes LMDB's next seek compare the key with the
 * first and the last key of that leaf first, to stay on it when the key
 * is there; in a read those two nodes are seldom in the CPU's cache (the
 * binary search touched others), so when the request's rows lie on
 * different leaves — random ids of a large table — that is two cache
 * misses a row for nothing. The cursor is renewed (the seek descends from
 * the root, whose pages are in cache) unless the last two rows were found
 * on one page: neighbours, as in a dense table, keep the short cut. */
static int read_rows(struct ps_store *s, const struct ps_table *t,
                     const uint64_t *ids, size_t n, float *out, int whole,
                     struct ps_row_hdr *hdr, int *stored, uint64_t *step)
{
    size_t w = whole ? (size_t)(1 + s->n_slots) * t->dim : t->dim;
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    int rv, rc, st = 0;
    struct ps_row_hdr h;
    uintptr_t page[2] = {0, 0}; /* the last two rows' pages (0: not
                                   stored), newest first */

    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    if (step && (rv = store_meta_fixed(s, txn, "step", step,
                                       sizeof *step)) != HC_OK)
        goto end;
    if (s->rows->have_db &&
        (rc = mdb_cursor_open(txn, s->rows->dbi, &cur)) != 0) {
        rv = store_lmdb_err(s, rc, "reading rows");
        goto end;
    }
    for (size_t i = 0; i < n; i++) {
        const void *at;

        if (i > 0 && cur && (page[0] == 0 || page[0] != page[1]) &&
            (rc = mdb_cursor_renew(txn, cur)) != 0) {
            rv = store_lmdb_err(s, rc, "reading rows");
            goto end;
        }
        if ((rv = row_load(s, cur, t, ids[i], w, out + i * w, &h, &st,
                           &at)) != HC_OK)
            goto end;
        page[1] = page[0];
        page[0] = (uintptr_t)at / s->psize;
    }
    if (hdr)
        *hdr = h;
    if (stored)
        *stored = st;
end:
    if (cur)
        mdb_cursor_close(cur);
    store_rtxn_end(s, txn);
    return rv;
}

int ps_store_rows_read(struct ps_store *s, uint32_t var, const uint64_t *ids,
                       size_t n, float *out, uint64_t *step)
{
    const struct ps_table *t;
    int rv;

    if (!atomic_load(&s->initialised) || !(t = table_of(s, var, NULL)))
        return no_table(s, var);
    if ((rv = check_ids(s, t, ids, n, 0)) != HC_OK)
        return rv;
    return read_rows(s, t, ids, n, out, 0, NULL, NULL, step);
}

int ps_store_row_get(struct ps_store *s, uint32_t var, uint64_t id,
                     float *out, uint64_t *updates, int *stored)
{
    const struct ps_table *t;
    struct ps_row_hdr h;
    int rv;

    if (!atomic_load(&s->initialised) || !(t = table_of(s, var, NULL)))
        return no_table(s, var);
    if ((rv = check_ids(s, t, &id, 1, 0)) != HC_OK ||
        (rv = read_rows(s, t, &id, 1, out, 1, &h, stored, NULL)) != HC_OK)
        return rv;
    *updates = h.updates;
    return HC_OK;
}

int ps_store_table_rows(struct ps_store *s, uint32_t var, uint64_t *rows)
{
    uint64_t counts[PS_STORE_MAX_TABLES];
    MDB_txn *txn = NULL;
    uint32_t i;
    int rv;

    if (!atomic_load(&s->initialised) || !table_of(s, var, &i))
        return no_table(s, var);
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    rv = store_meta_fixed(s, txn, "table_rows", counts,
                          s->rows->n_tables * sizeof *counts);
    store_rtxn_end(s, txn);
    if (rv == HC_OK)
        *rows = counts[i];
    return rv;
}

int ps_store_rows_list(struct ps_store *s, uint32_t var, uint64_t **ids_out,
                       float **rows_out, uint64_t **updates_out,
                       size_t *n_out)
{
    const struct ps_table *t;
    size_t nf, n = 0, cap = 0;
    unsigned char key[KEY_SIZE];
    MDB_val k = {KEY_SIZE, key}, v;
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    uint64_t *ids = NULL, *ups = NULL;
    float *rows = NULL;
    struct ps_row_hdr h;
    size_t w;                   /* floats kept a row */
    int rv = HC_OK, rc;

    *ids_out = NULL;
    *rows_out = NULL;
    if (updates_out)
        *updates_out = NULL;
    *n_out = 0;
    if (!atomic_load(&s->initialised) || !(t = table_of(s, var, NULL)))
        return no_table(s, var);
    if (!s->rows->have_db)
        return HC_OK;
    nf = (size_t)(1 + s->n_slots) * t->dim;
    w = updates_out ? nf : t->dim;
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        goto out;
    if ((rc = mdb_cursor_open(txn, s->rows->dbi, &cur)) != 0) {
        rv = store_lmdb_err(s, rc, "listing rows");
        goto end;
    }
    row_key(key, var, 0);
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        const unsigned char *kb = k.mv_data;
        const char *floats;
        uint64_t id;

        if (k.mv_size != KEY_SIZE || be32_at(kb) != var)
            break;
        id = (uint64_t)be32_at(kb + 4) << 32 | be32_at(kb + 8);
        if ((rv = row_check(s, t, id, &v, &h, &floats)) != HC_OK)
            goto end;
        if (n == cap) {
            size_t c2 = cap ? 2 * cap : 1024;
            uint64_t *i2 = realloc(ids, c2 * sizeof *i2);
            float *r2 = i2 ? realloc(rows, c2 * w * sizeof *r2) : NULL;
            uint64_t *u2 = r2 && updates_out
                               ? realloc(ups, c2 * sizeof *u2) : NULL;

            if (i2)
                ids = i2;
            if (r2)
                rows = r2;
            if (u2)
                ups = u2;
            if (!i2 || !r2 || (updates_out && !u2)) {
                rv = hc_err_set(HC_ERR_NOMEM, "store %s: out of memory for "
                                "%zu rows of variable %u", s->dir, c2, var);
                goto end;
            }
            cap = c2;
        }
        ids[n] = id;
        memcpy(rows + n * w, floats, w * sizeof *rows);
        if (updates_out)
            ups[n] = h.updates;
        n++;
    }
    if (rc != 0 && rc != MDB_NOTFOUND)
        rv = store_lmdb_err(s, rc, "listing rows");
end:
    if (cur)
        mdb_cursor_close(cur);
    store_rtxn_end(s, txn);
out:
    if (rv != HC_OK) {
        free(ids);
        free(rows);
        free(ups);
        return rv;
    }
    *ids_out = ids;
    *rows_out = rows;
    if (updates_out)
        *updates_out = ups;
    *n_out = n;
    return HC_OK;
}

struct put_arg {
    const struct ps_table *t;
    uint32_t ti;
    const uint64_t *ids;
    const float *rows;          /* (n, (1 + n_slots) · dim); initial:
                                   (n, dim), the values alone */
    const uint64_t *updates;    /* (n); initial: NULL, every count 0 */
    size_t n;
    int initial;                /* ps_store_rows_init_put: a row stored
                                   already is replaced, not refused */
};

static int scratch_for(struct ps_store *s, size_t nf);

/* An initial row (dim values) whole into buf ((1 + n_slots) · dim): the
 * values, then each slot at the optimizer's initial value. */
static void initial_row(const struct ps_store *s, const float *values,
                        uint32_t dim, float *buf)
{
    memcpy(buf, values, dim * sizeof *buf);
    for (uint32_t k = 0; k < s->n_slots; k++)
        for (uint32_t j = 0; j < dim; j++)
            buf[(1 + k) * dim + j] = ps_optim_slot_init(&s->optim, (int)k);
}

static int put_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    struct put_arg *a = arg;
    uint64_t counts[PS_STORE_MAX_TABLES];
    size_t nf = (size_t)(1 + s->n_slots) * a->t->dim, added = 0;
    size_t bytes = s->rows->n_tables * sizeof *counts;
    unsigned char key[KEY_SIZE];
    int rv, rc;

    if (a->initial && (rv = scratch_for(s, nf)) != HC_OK)
        return rv;
    for (size_t i = 0; i < a->n; i++) {
        const float *row = a->rows + i * nf;
        struct ps_row_hdr h = {a->t->dim, 0, a->updates ? a->updates[i] : 0};
        MDB_val k = {KEY_SIZE, key},
                v = {sizeof h + nf * sizeof(float), NULL}, old;
        int had = 0;

        if (a->initial) {
            initial_row(s, a->rows + i * a->t->dim, a->t->dim,
                        s->rows->scratch);
            row = s->rows->scratch;
        }
        h.crc = hc_crc32c(row, nf * sizeof(float));
        row_key(key, a->t->var, a->ids[i]);
        if (a->initial) {
            rc = mdb_get(txn, s->rows->dbi, &k, &old);
            if (rc != 0 && rc != MDB_NOTFOUND)
                return store_lmdb_err(s, rc, "reading a row");
            had = rc == 0;
        }
        if ((rc = mdb_put(txn, s->rows->dbi, &k, &v,
                          MDB_RESERVE | (had ? 0 : MDB_NOOVERWRITE))) != 0)
            return rc == MDB_KEYEXIST
                       ? hc_err_set(HC_ERR_EXISTS, "store %s: row %llu of "
                                    "variable %u is stored already", s->dir,
                                    (unsigned long long)a->ids[i], a->t->var)
                       : store_lmdb_err(s, rc, "writing a row");
        memcpy(v.mv_data, &h, sizeof h);
        memcpy((char *)v.mv_data + sizeof h, row, nf * sizeof(float));
        added += !had;
    }
    if ((rv = store_meta_fixed(s, txn, "table_rows", counts, bytes)) != HC_OK)
        return rv;
    counts[a->ti] += added;
    return store_meta_put(s, txn, "table_rows", counts, bytes);
}

static int rows_put(struct ps_store *s, struct put_arg *a, uint32_t var)
{
    int rv;

    if (s->read_only || !atomic_load(&s->initialised) ||
        !(a->t = table_of(s, var, &a->ti)))
        return s->read_only ? hc_err_set(HC_ERR_INVAL, "store %s: opened "
                                         "read-only", s->dir)
                            : no_table(s, var);
    if ((rv = check_ids(s, a->t, a->ids, a->n, 1)) != HC_OK)
        return rv;
    pthread_mutex_lock(&s->wmu);
    rv = store_write_txn(s, put_body, a, "writing rows");
    pthread_mutex_unlock(&s->wmu);
    return rv;
}

int ps_store_rows_init_put(struct ps_store *s, uint32_t var,
                           const uint64_t *ids, const float *values, size_t n)
{
    struct put_arg a = {NULL, 0, ids, values, NULL, n, 1};

    return rows_put(s, &a, var);
}

int ps_store_rows_put(struct ps_store *s, uint32_t var, const uint64_t *ids,
                      const float *rows, const uint64_t *updates, size_t n)
{
    struct put_arg a = {NULL, 0, ids, rows, updates, n, 0};

    return rows_put(s, &a, var);
}

uint64_t ps_store_rows_seed(const struct ps_store *s)
{
    return s->rows ? s->rows->seed : 0;
}

int store_rows_verify(struct ps_store *s, MDB_txn *txn)
{
    struct store_rows *R = s->rows;
    uint64_t counts[PS_STORE_MAX_TABLES], seen[PS_STORE_MAX_TABLES] = {0};
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    int rc, rv = HC_OK;

    if (!R || !R->have_db || R->n_tables == 0)
        return HC_OK;
    if ((rv = store_meta_fixed(s, txn, "table_rows", counts,
                               R->n_tables * sizeof *counts)) != HC_OK)
        return rv;
    if ((rc = mdb_cursor_open(txn, R->dbi, &cur)) != 0)
        return store_lmdb_err(s, rc, "verifying the rows");
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && rv == HC_OK;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        const unsigned char *kb = k.mv_data;
        uint32_t var = (uint32_t)kb[0] << 24 | (uint32_t)kb[1] << 16 |
                       (uint32_t)kb[2] << 8 | kb[3], ti = 0;
        const struct ps_table *t = k.mv_size == KEY_SIZE
                                       ? table_of(s, var, &ti) : NULL;
        size_t nf = t ? (size_t)(1 + s->n_slots) * t->dim : 0;
        struct ps_row_hdr h;

        if (!t || v.mv_size != sizeof h + nf * 4) {
            rv = hc_err_set(HC_ERR_STORE, "store %s: a row of %zu bytes keyed "
                            "by %zu bytes (variable %u) is not a row of a "
                            "table here; the store is damaged", s->dir,
                            v.mv_size, k.mv_size, var);
            break;
        }
        memcpy(&h, v.mv_data, sizeof h);
        if (h.dim != t->dim ||
            hc_crc32c((const char *)v.mv_data + sizeof h, nf * 4) != h.crc)
            rv = hc_err_set(HC_ERR_CRC, "store %s: a row of variable %u fails "
                            "its checksum; the store is damaged: restore it "
                            "from a checkpoint", s->dir, var);
        seen[ti]++;
    }
    mdb_cursor_close(cur);
    if (rv == HC_OK && rc != 0 && rc != MDB_NOTFOUND)
        rv = store_lmdb_err(s, rc, "verifying the rows");
    for (uint32_t i = 0; rv == HC_OK && i < R->n_tables; i++)
        if (seen[i] != counts[i])
            rv = hc_err_set(HC_ERR_STORE, "store %s: table %u holds %llu rows "
                            "but meta counts %llu; the store is damaged",
                            s->dir, R->tables[i].var,
                            (unsigned long long)seen[i],
                            (unsigned long long)counts[i]);
    return rv;
}

/* ---- updates ------------------------------------------------------------- */

int store_rows_check_update(struct ps_store *s, const struct ps_rows *r,
                            size_t n)
{
    int rv;

    for (size_t k = 0; k < n; k++) {
        const struct ps_table *t = table_of(s, r[k].var, NULL);

        if (!t)
            return no_table(s, r[k].var);
        if ((r[k].n && (!r[k].ids || !r[k].grad)) || !isfinite(r[k].scale))
            return hc_err_set(HC_ERR_INVAL, "store %s: row update %zu of "
                              "variable %u has no ids, no gradient or a "
                              "non-finite scale", s->dir, k, r[k].var);
        if ((rv = check_ids(s, t, r[k].ids, r[k].n, 1)) != HC_OK)
            return rv;
    }
    return HC_OK;
}

/* A table's updates in one step, several (a synchronous step's pushes):
 * their ids merged and each row's gradients summed — Σ grad·scale, in the
 * order of r — into one update of scale 1, its arrays malloc'd into
 * *ids_out and *grad_out (the caller frees them). */
struct merge_key {
    uint64_t id;
    uint32_t k, i;              /* r[k]'s row i */
};

static int merge_cmp(const void *pa, const void *pb)
{
    const struct merge_key *a = pa, *b = pb;

    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return a->k < b->k ? -1 : a->k > b->k;
}

static int merge_rows(struct ps_store *s, const struct ps_rows *r, size_t n,
                      uint32_t var, uint32_t dim, struct ps_rows *out,
                      uint64_t **ids_out, float **grad_out)
{
    struct merge_key *keys;
    size_t total = 0, u = 0, at = 0;
    uint64_t *ids;
    float *g;

    for (size_t k = 0; k < n; k++)
        total += r[k].var == var ? r[k].n : 0;
    keys = malloc((total ? total : 1) * sizeof *keys);
    ids = malloc((total ? total : 1) * sizeof *ids);
    g = calloc(total ? total * dim : 1, sizeof *g);
    if (!keys || !ids || !g) {
        free(keys);
        free(ids);
        free(g);
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory summing a "
                          "step's rows", s->dir);
    }
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; r[k].var == var && i < r[k].n; i++)
            keys[at++] = (struct merge_key){r[k].ids[i], (uint32_t)k,
                                            (uint32_t)i};
    qsort(keys, total, sizeof *keys, merge_cmp);
    for (size_t j = 0; j < total; j++) {
        const struct ps_rows *q = &r[keys[j].k];
        const float *src = q->grad + (size_t)keys[j].i * dim;
        float *dst;

        if (u == 0 || ids[u - 1] != keys[j].id)
            ids[u++] = keys[j].id;
        dst = g + (u - 1) * dim;
        for (uint32_t e = 0; e < dim; e++)
            dst[e] += src[e] * q->scale;
    }
    free(keys);
    *out = (struct ps_rows){var, u, ids, g, 1.0f};
    *ids_out = ids;
    *grad_out = g;
    return HC_OK;
}

/* Room for one row of the widest table. */
static int scratch_for(struct ps_store *s, size_t nf)
{
    struct store_rows *R = s->rows;
    float *p;

    if (nf <= R->scratch_len)
        return HC_OK;
    if (!(p = realloc(R->scratch, nf * sizeof *p)))
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory for a row",
                          s->dir);
    R->scratch = p;
    R->scratch_len = nf;
    return HC_OK;
}

/* One table's rows: load, run the optimizer at the row's own count, put.
 * One descent a row: the put that would insert the row (MDB_NOOVERWRITE,
 * MDB_RESERVE) finds it. Stored, it answers MDB_KEYEXIST with the stored
 * value and leaves the cursor on it; the row is updated in the scratch and
 * written back in place (MDB_CURRENT, the same size: LMDB copies the leaf
 * once a transaction, the row not again). New, the row is inserted there
 * and then: its initial value is updated in the scratch and written into
 * the space the put reserved (no second descent to insert it). */
static int apply_table(struct ps_store *s, MDB_txn *txn,
                       const struct hc_optim_conf *c, const struct ps_rows *r,
                       uint32_t ti)
{
    const struct ps_table *t = &s->rows->tables[ti];
    uint32_t ns = (uint32_t)ps_optim_slots(c), dim = t->dim;
    size_t nf = (size_t)(1 + s->n_slots) * dim;
    unsigned char key[KEY_SIZE];
    float *p, *sl[PS_OPTIM_MAX_SLOTS] = {0};
    MDB_cursor *cur = NULL;
    int rv = HC_OK, rc;

    if ((rv = scratch_for(s, nf)) != HC_OK)
        return rv;
    if ((rc = mdb_cursor_open(txn, s->rows->dbi, &cur)) != 0)
        return store_lmdb_err(s, rc, "writing rows");
    p = s->rows->scratch;
    for (uint32_t k = 0; k < ns; k++)
        sl[k] = p + (size_t)(1 + k) * dim;
    for (size_t i = 0; i < r->n; i++) {
        struct ps_row_hdr h;
        struct ps_optim_step at;
        MDB_val k = {KEY_SIZE, key}, v = {sizeof h + nf * sizeof *p, NULL};
        const char *floats;
        int stored;

        row_key(key, t->var, r->ids[i]);
        rc = mdb_cursor_put(cur, &k, &v, MDB_RESERVE | MDB_NOOVERWRITE);
        stored = rc == MDB_KEYEXIST;
        if (rc != 0 && !stored) {
            rv = store_lmdb_err(s, rc, "writing a row");
            break;
        }
        if (stored) {
            if ((rv = row_check(s, t, r->ids[i], &v, &h, &floats)) != HC_OK)
                break;
            memcpy(p, floats, nf * sizeof *p);
        } else {
            row_initial(s, t, r->ids[i], s->n_slots, p, &h);
        }
        at = (struct ps_optim_step){h.updates, r->scale, 0};
        ps_optim_apply(c, &at, dim, p, r->grad + i * dim,
                       (const float *const *)sl, p, sl);
        h.updates++;
        h.crc = hc_crc32c(p, nf * sizeof *p);
        if (stored) {
            v = (MDB_val){sizeof h + nf * sizeof *p, NULL};
            if ((rc = mdb_cursor_put(cur, &k, &v,
                                     MDB_RESERVE | MDB_CURRENT)) != 0) {
                rv = store_lmdb_err(s, rc, "writing a row");
                break;
            }
        }
        memcpy(v.mv_data, &h, sizeof h);
        memcpy((char *)v.mv_data + sizeof h, p, nf * sizeof *p);
        s->rows->added[ti] += !stored;
    }
    mdb_cursor_close(cur);
    return rv;
}

/* Whether r[k]'s table came earlier in r. */
static int seen_before(const struct ps_rows *r, size_t k)
{
    for (size_t j = 0; j < k; j++)
        if (r[j].var == r[k].var)
            return 1;
    return 0;
}

int store_rows_apply(struct ps_store *s, MDB_txn *txn,
                     const struct hc_optim_conf *conf, uint64_t step,
                     const struct ps_rows *r, size_t n)
{
    uint64_t counts[PS_STORE_MAX_TABLES];
    struct store_rows *R = s->rows;
    struct hc_optim_conf at_step = *conf, *c = &at_step;
    size_t bytes;
    int rv, any = 0;

    if (n == 0)
        return HC_OK;
    /* A schedule's rate is the step's (the store's), not the row's: the
     * row's own count is the optimizer's step for bias correction alone. */
    c->lr = hc_optim_lr(conf, step);
    c->sched.kind = HC_LR_CONSTANT;
    if (!R || !R->have_db)
        return no_table(s, r[0].var);
    memset(R->added, 0, sizeof R->added);
    for (size_t k = 0; k < n; k++) {
        uint32_t ti = 0, more = 0;
        struct ps_rows merged = r[k];
        uint64_t *ids = NULL;
        float *g = NULL;

        if (seen_before(r, k))
            continue;           /* summed with the first of its table */
        for (size_t j = k + 1; j < n; j++)
            more += r[j].var == r[k].var;
        table_of(s, r[k].var, &ti);
        if (more && (rv = merge_rows(s, r, n, r[k].var, R->tables[ti].dim,
                                     &merged, &ids, &g)) != HC_OK)
            return rv;
        rv = apply_table(s, txn, c, &merged, ti);
        free(ids);
        free(g);
        if (rv != HC_OK)
            return rv;
    }
    for (uint32_t i = 0; i < R->n_tables; i++)
        any |= R->added[i] != 0;
    if (!any)
        return HC_OK;
    bytes = R->n_tables * sizeof *counts;
    if ((rv = store_meta_fixed(s, txn, "table_rows", counts, bytes)) != HC_OK)
        return rv;
    for (uint32_t i = 0; i < R->n_tables; i++)
        counts[i] += R->added[i];
    return store_meta_put(s, txn, "table_rows", counts, bytes);
}
