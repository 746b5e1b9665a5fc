/*
 * optim_check.c — runs seeded gradients through a shard's optimizer with
 * the optimizer given as the model file writes it, and writes what the
 * shard holds, for tests/optim_ref.py to compare with its NumPy
 * transcription of Keras's formulas: on a real shard store (ps/store.h:
 * ps_store_init, ps_store_apply, ps_store_read), or through live hetps-ps
 * processes with the worker's client API (worker/client.h).
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
 *
 *   optim_check shard CLUSTER OPTIMIZER_JSON DIR STEPS
 *     The same through the live shards of CLUSTER, as its one worker:
 *     sets a model of one dense layer "dense" (30 inputs, 10 units:
 *     "dense/kernel" 300 floats, then "dense/bias" 10; so KERNEL_ELEMS 300,
 *     BIAS_ELEMS 10 above) trained by OPTIMIZER_JSON, in blocks of 64
 *     elements (each variable spans both shards of a two-shard cluster),
 *     creates it with DIR/init.f32 and makes STEPS steps, step t pushing
 *     row t of DIR/grads.f32 as the mean gradient of one sample: clipped
 *     by norm first as the trainer does (wk_clip_grads), then in sync a
 *     push-and-pull of the next step (pc_sync_step), in async a
 *     push-and-pull of the freshest values (pc_async_step). Writes
 *     DIR/params.f32: the values pulled after each step.
 *
 *   optim_check slots CLUSTER DATA_DIR DIR
 *     Once those shards have stopped: their stores (DATA_DIR/ps-J, as
 *     `hetps launch` lays them out) read with ps_gather, each optimizer
 *     slot into DIR/slots.f32; prints "slots N".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "err.h"
#include "layout.h"
#include "model.h"
#include "ps/gather.h"
#include "ps/optimizer.h"
#include "ps/store.h"
#include "worker/client.h"
#include "worker/clip.h"

#define BLOCK 64
#define TOTAL 310               /* shard mode: 30·10 kernel + 10 bias */

static const char model_fmt[] =
    "{\"name\": \"optim_check\", \"input_shape\": [30],"
    " \"layers\": [{\"type\": \"dense\", \"name\": \"dense\", \"units\": 10}],"
    " \"loss\": \"mse\", \"optimizer\": %s}";

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

/* The model of shard mode, checked to be laid out as the files are:
 * "dense/kernel" (300) then "dense/bias" (10). */
static int make_model(const char *optim, struct hc_model *m)
{
    size_t len = sizeof model_fmt + strlen(optim);
    char *json = malloc(len);
    int rv;

    if (!json)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    snprintf(json, len, model_fmt, optim);
    rv = hc_model_parse(json, strlen(json), "optim_check's model", m);
    free(json);
    if (rv == HC_OK &&
        (m->n_params != TOTAL || m->n_vars != 2 ||
         strcmp(m->vars[0].name, "dense/kernel") != 0 ||
         hc_model_var_offset(m, 1) != 300))
        rv = hc_err_set(HC_ERR_INVAL, "the model is not laid out as "
                        "dense/kernel (300) then dense/bias (10)");
    return rv;
}

static int shard_run(const struct hc_cluster *cl, const char *optim,
               const char *dir, long steps)
{
    struct pc_opts po = { .timeout_ms = 5000, .retry_ms = 30000 };
    struct hc_model *m = calloc(1, sizeof *m);
    struct pc_client *pc = NULL;
    float *init = malloc(TOTAL * sizeof *init);
    float *grads = malloc((size_t)steps * TOTAL * sizeof *grads);
    float *params = malloc((size_t)steps * TOTAL * sizeof *params);
    float g[TOTAL];
    uint64_t version = 0;
    int rv = HC_OK;

    if (!m || !init || !grads || !params) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rv = make_model(optim, m)) ||
        (rv = read_f32(dir, "init.f32", init, TOTAL)) ||
        (rv = read_f32(dir, "grads.f32", grads, (size_t)steps * TOTAL)) ||
        (rv = pc_open(&pc, cl, HC_JOB_WORKER, 0, &po)) ||
        (rv = pc_join(pc, "cpu")) ||
        (rv = pc_set_model(pc, m, BLOCK)) ||
        (rv = pc_create(pc, init)) ||
        (rv = pc_pull(pc, params, &version)))
        goto out;
    for (long t = 0; t < steps && rv == HC_OK; t++) {
        struct pc_grad pg = { .data = g, .samples = 1,
                              .base_version = version };
        struct pc_step st = { .min_version = version + 1,
                              .clock = (uint64_t)t };
        float *p = params + (size_t)t * TOTAL;

        memcpy(g, grads + (size_t)t * TOTAL, sizeof g);
        wk_clip_grads(m, g);
        rv = cl->mode == HC_MODE_SYNC ? pc_sync_step(pc, &pg, p, &st)
                                      : pc_async_step(pc, &pg, p, &st);
        if (rv == HC_OK && st.version != (uint64_t)t + 1)
            rv = hc_err_set(HC_ERR_STORE, "step %ld: the shards answered "
                            "at version %llu", t,
                            (unsigned long long)st.version);
        version = st.version;
    }
    if (rv == HC_OK)
        rv = write_f32(dir, "params.f32", params, (size_t)steps * TOTAL);
    if (rv == HC_OK)
        rv = pc_leave(pc);
out:
    pc_close(pc);
    free(m);
    free(init);
    free(grads);
    free(params);
    return rv;
}

static int shard_slots(const struct hc_cluster *cl, const char *data_dir,
                 const char *dir)
{
    struct ps_gathered g;
    float *out = NULL;
    int rv = ps_gather(cl, data_dir, PS_GATHER_SLOTS, 1, &g, NULL);

    if (rv != HC_OK)
        return rv;
    if (g.n_vars != 2 || g.vars[0].size + g.vars[1].size != TOTAL) {
        rv = hc_err_set(HC_ERR_INVAL, "the stores hold %d variables, not "
                        "the shard mode's model", g.n_vars);
        goto out;
    }
    if (!(out = calloc((size_t)(g.n_slots ? g.n_slots : 1) * TOTAL,
                       sizeof *out))) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < g.n_slots; k++) {
        memcpy(out + (size_t)k * TOTAL, g.slots[k][0],
               g.vars[0].size * sizeof *out);
        memcpy(out + (size_t)k * TOTAL + g.vars[0].size, g.slots[k][1],
               g.vars[1].size * sizeof *out);
    }
    rv = write_f32(dir, "slots.f32", out, (size_t)g.n_slots * TOTAL);
    if (rv == HC_OK)
        printf("slots %u\n", g.n_slots);
out:
    free(out);
    ps_gathered_free(&g);
    return rv;
}

/* optim_check shard|slots CLUSTER …: see the top. */
static int shard_main(int argc, char **argv)
{
    struct hc_cluster cl;
    struct hc_diag diag;
    char *end = NULL;
    long steps = 0;
    int is_run = argc == 6 && strcmp(argv[1], "shard") == 0, rv;

    if (is_run)
        steps = strtol(argv[5], &end, 10);
    if (!(is_run && !*end && steps >= 1 && steps <= 100000) &&
        !(argc == 5 && strcmp(argv[1], "slots") == 0)) {
        fprintf(stderr, "usage: optim_check shard CLUSTER OPTIMIZER_JSON "
                        "DIR STEPS (1..100000)\n"
                        "       optim_check slots CLUSTER DATA_DIR DIR\n");
        return 1;
    }
    if (hc_cluster_load_file(argv[2], &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 1;
    }
    rv = is_run ? shard_run(&cl, argv[3], argv[4], steps)
                : shard_slots(&cl, argv[3], argv[4]);
    hc_cluster_free(&cl);
    if (rv != HC_OK) {
        fprintf(stderr, "optim_check: %s\n", hc_err_msg());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct run r = {0};
    char *end[3];

    if (argc > 1 && (strcmp(argv[1], "shard") == 0 ||
                     strcmp(argv[1], "slots") == 0))
        return shard_main(argc, argv);
    if (argc != 6) {
        fprintf(stderr, "usage: optim_check OPTIMIZER_JSON DIR KERNEL_ELEMS "
                        "BIAS_ELEMS STEPS\n"
                        "       optim_check shard|slots … (see its top)\n");
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
