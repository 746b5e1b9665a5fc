/*
 * optim_check.c — runs seeded gradients through a real shard store
 * (ps/store.h: ps_store_init, ps_store_apply, ps_store_read) with an
 * optimizer given as the model file writes it, and writes what the store
 * holds after every step, for tests/optim_ref.py to compare with its NumPy
 * transcription of Keras's formulas.
 *
 * Usage: optim_check OPTIMIZER_JSON DIR KERNEL_ELEMS BIAS_ELEMS STEPS
 *   OPTIMIZER_JSON  {"type": "rmsprop", "centered": true, …} (read by
 *                   hc_model_optim_from_json, the model reader's code)
 *   DIR/init.f32    the initial values: KERNEL_ELEMS floats of variable
 *                   "dense/kernel", then BIAS_ELEMS of "dense/bias"
 *   DIR/grads.f32   (STEPS, KERNEL_ELEMS + BIAS_ELEMS) gradients
 * Writes DIR/params.f32, (STEPS, total): the parameters after each step,
 * and DIR/slots.f32, (slots, total): the optimizer's slots at the end,
 * both little-endian float32; prints "slots N". The store lives in
 * DIR/store, one shard with blocks of 64 elements (so a variable spans
 * several), and is closed and reopened half-way. Exit 0, or 1 with a
 * message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "layout.h"
#include "model.h"
#include "ps/optimizer.h"
#include "ps/store.h"

#define BLOCK 64

struct run {
    const char *dir;
    size_t n[2], total;
    long steps;
    struct hc_optim_conf c;
    struct hc_layout l;
    struct ps_store *s;
    float *init, *grads, *params;   /* (total), (steps, total), (steps, total) */
};

static int read_f32(const char *dir, const char *name, float *dst, size_t n)
{
    char path[4096];
    FILE *f;
    size_t got;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "rb")))
        return hc_err_set(HC_ERR_IO, "cannot open %s", path);
    got = fread(dst, sizeof(float), n, f);
    fclose(f);
    if (got != n)
        return hc_err_set(HC_ERR_IO, "%s: %zu floats, expected %zu", path,
                          got, n);
    return HC_OK;
}

static int write_f32(const char *dir, const char *name, const float *src,
                     size_t n)
{
    char path[4096];
    FILE *f;
    int ok;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "wb")))
        return hc_err_set(HC_ERR_IO, "cannot write %s", path);
    ok = fwrite(src, sizeof(float), n, f) == n;
    ok = fclose(f) == 0 && ok;
    return ok ? HC_OK : hc_err_set(HC_ERR_IO, "writing %s failed", path);
}

static int open_store(struct run *r)
{
    char path[4096];

    snprintf(path, sizeof path, "%s/store", r->dir);
    return ps_store_open(path, NULL, &r->s);
}

/* Create the store: the layout's blocks with their initial values, the
 * variables' names (weight decay's exclusions match them). */
static int create(struct run *r)
{
    static const char defs_fmt[] = "[{\"name\":\"dense/kernel\",\"shape\":"
                                   "[%zu]},{\"name\":\"dense/bias\","
                                   "\"shape\":[%zu]}]";
    const float **init = calloc(r->l.n_blocks, sizeof *init);
    char defs[256];
    struct ps_store_def d = {0};
    int rv;

    if (!init)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    for (size_t b = 0; b < r->l.n_blocks; b++) {
        const struct hc_block *k = &r->l.blocks[b];

        init[k->local] = r->init + (k->var ? r->n[0] : 0) + k->offset;
    }
    snprintf(defs, sizeof defs, defs_fmt, r->n[0], r->n[1]);
    d.signature = 0x0b7;
    d.layout = &r->l;
    d.optim = &r->c;
    d.init = init;
    d.var_defs = defs;
    d.var_defs_len = strlen(defs);
    rv = ps_store_init(r->s, &d, NULL);
    free(init);
    return rv;
}

/* Step t: every block's gradient, applied in one ps_store_apply; then
 * every block read back into params[t]. */
static int step(struct run *r, long t, struct ps_update *u)
{
    uint64_t now = 0;
    int rv;

    for (size_t b = 0; b < r->l.n_blocks; b++) {
        const struct hc_block *k = &r->l.blocks[b];
        size_t at = (k->var ? r->n[0] : 0) + k->offset;

        u[k->local] = (struct ps_update){k->local, k->length,
                                         r->grads + (size_t)t * r->total + at,
                                         1.0f};
    }
    if ((rv = ps_store_apply(r->s, &r->c, u, r->l.n_blocks, NULL, 0, &now)))
        return rv;
    if (now != (uint64_t)t + 1)
        return hc_err_set(HC_ERR_STORE, "step %ld: the store counts %llu", t,
                          (unsigned long long)now);
    for (size_t b = 0; b < r->l.n_blocks; b++) {
        const struct hc_block *k = &r->l.blocks[b];
        size_t at = (k->var ? r->n[0] : 0) + k->offset;

        if ((rv = ps_store_read_block(r->s, k->local,
                                      r->params + (size_t)t * r->total + at,
                                      k->length)))
            return rv;
    }
    return HC_OK;
}

static int write_slots(struct run *r)
{
    int ns = ps_optim_slots(&r->c), rv = HC_OK;
    float *slots = calloc((size_t)(ns ? ns : 1) * r->total, sizeof *slots);

    if (!slots)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    for (int k = 0; k < ns && rv == HC_OK; k++)
        for (size_t b = 0; b < r->l.n_blocks && rv == HC_OK; b++) {
            const struct hc_block *bk = &r->l.blocks[b];
            size_t at = (bk->var ? r->n[0] : 0) + bk->offset;

            rv = ps_store_read_slot(r->s, (uint32_t)k, bk->local,
                                    slots + (size_t)k * r->total + at,
                                    bk->length);
        }
    if (rv == HC_OK)
        rv = write_f32(r->dir, "slots.f32", slots, (size_t)ns * r->total);
    free(slots);
    printf("slots %d\n", ns);
    return rv;
}

static int run(struct run *r, const char *json)
{
    struct ps_update *u = NULL;
    int rv;

    if ((rv = hc_model_optim_from_json(json, strlen(json), "optimizer",
                                       &r->c)) ||
        (rv = hc_layout_build(r->n, 2, 1, BLOCK, &r->l)))
        return rv;
    r->total = r->n[0] + r->n[1];
    r->init = malloc(r->total * sizeof(float));
    r->grads = malloc((size_t)r->steps * r->total * sizeof(float));
    r->params = malloc((size_t)r->steps * r->total * sizeof(float));
    u = calloc(r->l.n_blocks, sizeof *u);
    if (!r->init || !r->grads || !r->params || !u) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rv = read_f32(r->dir, "init.f32", r->init, r->total)) ||
        (rv = read_f32(r->dir, "grads.f32", r->grads,
                       (size_t)r->steps * r->total)) ||
        (rv = open_store(r)) || (rv = create(r)))
        goto out;
    for (long t = 0; t < r->steps && rv == HC_OK; t++) {
        if (t == r->steps / 2) {        /* slots and step persist */
            ps_store_close(r->s);
            r->s = NULL;
            if ((rv = open_store(r)))
                break;
        }
        rv = step(r, t, u);
    }
    if (rv == HC_OK)
        rv = write_f32(r->dir, "params.f32", r->params,
                       (size_t)r->steps * r->total);
    if (rv == HC_OK)
        rv = write_slots(r);
out:
    free(u);
    ps_store_close(r->s);
    hc_layout_free(&r->l);
    free(r->init);
    free(r->grads);
    free(r->params);
    return rv;
}

int main(int argc, char **argv)
{
    struct run r = {0};
    char *end[3];

    if (argc != 6) {
        fprintf(stderr, "usage: optim_check OPTIMIZER_JSON DIR KERNEL_ELEMS "
                        "BIAS_ELEMS STEPS\n");
        return 1;
    }
    r.dir = argv[2];
    r.n[0] = strtoul(argv[3], &end[0], 10);
    r.n[1] = strtoul(argv[4], &end[1], 10);
    r.steps = strtol(argv[5], &end[2], 10);
    if (*end[0] || *end[1] || *end[2] || !r.n[0] || !r.n[1] ||
        r.n[0] > 1000000 || r.n[1] > 1000000 || r.steps < 1 ||
        r.steps > 100000) {
        fprintf(stderr, "optim_check: sizes 1..1000000, steps 1..100000\n");
        return 1;
    }
    if (run(&r, argv[1]) != HC_OK) {
        fprintf(stderr, "optim_check: %s\n", hc_err_msg());
        return 1;
    }
    return 0;
}
