/*
 * ctr_inputs.c — a click-through file (data_ctr.h) streamed as a data set
 * of the model's inputs (ctr_inputs.h): which input each column group
 * feeds, then, each time samples are asked for, their lines read in
 * chunks and packed a sample's row at a time.
 */
#include "ctr_inputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_ctr.h"
#include "err.h"

#define CHUNK 1024      /* lines parsed at once */

/* What feeds what: the model's inputs q_cat (ids) and q_num (−1: none). */
struct plan {
    int q_cat, q_num;
    uint64_t input_dim;     /* of the embedding reading q_cat */
};

/* A streamed data set's source (data.h's wk_data_source): the open file
 * and one chunk's parsed lines. */
struct stream {
    struct wk_ctr *c;
    struct plan p;
    int n_num, n_cat;       /* the file's columns */
    size_t row;             /* floats a sample's row holds */
    size_t off_cat, off_num;    /* where the inputs start in a row */
    float *label;           /* (CHUNK) */
    float *num;             /* (CHUNK, n_num) */
    int64_t *cat;           /* (CHUNK, n_cat) */
};

int wk_ctr_inputs_spec(const char *spec)
{
    return spec && (!strncmp(spec, "criteo:", 7) || !strncmp(spec, "libsvm:", 7));
}

/* The input_dim of the embeddings reading input q (they must agree). */
static int table_dim(const struct hc_model *m, int q, uint64_t *dim)
{
    *dim = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const struct hc_layer_spec *l = &m->layers[i];

        if (l->type != HC_LAYER_EMBEDDING || l->in_from[0] != -1 - q)
            continue;
        if (*dim && *dim != l->input_dim)
            return hc_err_set(HC_ERR_CONFIG, "model %s: embeddings of "
                              "input_dim %llu and %llu read input \"%s\"; "
                              "click-through ids are made for one input_dim",
                              m->name, (unsigned long long)*dim,
                              (unsigned long long)l->input_dim,
                              m->inputs[q].name);
        *dim = l->input_dim;
    }
    return HC_OK;
}

/* The input named name, else the one of ids (or floats) n wide; −1
 * none, −2 several. */
static int find_input(const struct hc_model *m, const char *name, int ids,
                      int n)
{
    int found = -1;

    for (int q = 0; q < m->n_inputs; q++)
        if (!strcmp(m->inputs[q].name, name))
            return q;
    for (int q = 0; q < m->n_inputs; q++)
        if (m->inputs[q].ids == ids && m->inputs[q].shape.rank == 1 &&
            m->inputs[q].shape.dims[0] == n)
            found = found == -1 ? q : -2;
    return found;
}

static int make_plan(const struct hc_model *m, const char *path, int n_cat,
                     int n_num, struct plan *p)
{
    const struct hc_model_input *c;
    int rv;

    p->q_cat = find_input(m, "categorical", 1, n_cat);
    p->q_num = find_input(m, "numeric", 0, n_num);
    if (p->q_cat < 0)
        return hc_err_set(HC_ERR_CONFIG, "%s holds %d categorical ids a "
                          "line; model %s has %s input of %d int64 ids to "
                          "take them (name it \"categorical\")", path, n_cat,
                          m->name, p->q_cat == -2 ? "more than one" : "no",
                          n_cat);
    c = &m->inputs[p->q_cat];
    if (!c->ids || c->shape.rank != 1 || c->shape.dims[0] != n_cat)
        return hc_err_set(HC_ERR_CONFIG, "%s holds %d categorical ids a "
                          "line, but model %s's input \"%s\" is not %d int64 "
                          "ids (\"shape\": [%d], \"dtype\": \"int64\")", path,
                          n_cat, m->name, c->name, n_cat, n_cat);
    if (p->q_num == -2)
        return hc_err_set(HC_ERR_CONFIG, "model %s has several float inputs "
                          "of %d values; name the one for %s's numeric "
                          "fields \"numeric\"", m->name, n_num, path);
    if (p->q_num >= 0 && (m->inputs[p->q_num].ids ||
                          m->inputs[p->q_num].shape.rank != 1 ||
                          m->inputs[p->q_num].shape.dims[0] != n_num))
        return hc_err_set(HC_ERR_CONFIG, "%s holds %d numeric values a line, "
                          "but model %s's input \"%s\" is not %d floats",
                          path, n_num, m->name, m->inputs[p->q_num].name,
                          n_num);
    if (m->n_inputs != 1 + (p->q_num >= 0))
        return hc_err_set(HC_ERR_CONFIG, "model %s has %d inputs; %s feeds "
                          "two: \"categorical\" (%d int64 ids) and "
                          "\"numeric\" (%d floats)", m->name, m->n_inputs,
                          path, n_cat, n_num);
    if ((rv = table_dim(m, p->q_cat, &p->input_dim)))
        return rv;
    if (!p->input_dim)
        return hc_err_set(HC_ERR_CONFIG, "model %s: no embedding reads input "
                          "\"%s\"", m->name, c->name);
    return HC_OK;
}

/* The data set's description of its inputs: widths in floats. */
static void describe(const struct hc_model *m, const struct plan *p,
                     const char *path, struct wk_dataset *d)
{
    size_t off = 0;

    d->n_inputs = m->n_inputs;
    for (int q = 0; q < m->n_inputs; q++) {
        struct wk_data_input *in = &d->inputs[q];

        snprintf(in->name, sizeof in->name, "%s", m->inputs[q].name);
        snprintf(in->path, sizeof in->path, "%s", path);
        in->h = in->w = 1;
        in->c = m->inputs[q].shape.dims[0] *
                (q == p->q_cat ? HC_ID_FLOATS : 1);
        in->off = off;
        off += (size_t)in->c;
    }
    d->h = d->w = 1;
    d->c = (int)off;
    snprintf(d->images_path, sizeof d->images_path, "%s", path);
    snprintf(d->labels_path, sizeof d->labels_path, "%s", path);
    d->n_classes = 2;
}

/* The chunk's n lines, parsed into st's buffers, packed into rows x
 * (n, row) and labels y (n; may be NULL). */
static void pack(const struct stream *st, int n, float *x, int32_t *y)
{
    for (int i = 0; i < n; i++) {
        float *row = x + (size_t)i * st->row;

        memcpy(row + st->off_cat, st->cat + (size_t)i * st->n_cat,
               (size_t)st->n_cat * sizeof *st->cat);
        if (st->p.q_num >= 0)
            memcpy(row + st->off_num, st->num + (size_t)i * st->n_num,
                   (size_t)st->n_num * sizeof *st->num);
        if (y)
            y[i] = st->label[i] > 0.5f;
    }
}

/* wk_data_source's read (epoch < 0: lines [start, start + count)) and
 * read_epoch (positions of epoch's order), a chunk at a time. */
static int stream_chunks(struct stream *st, int epoch, long long start,
                         int count, float *x, int32_t *y)
{
    int done = 0, got, rv;

    while (done < count) {
        int want = count - done < CHUNK ? count - done : CHUNK;

        rv = epoch < 0 ? wk_ctr_read(st->c, start + done, want, st->label,
                                     st->num, st->cat, &got)
                       : wk_ctr_read_epoch(st->c, epoch, start + done, want,
                                           st->label, st->num, st->cat, &got);
        if (rv)
            return rv;
        if (got != want)
            return hc_err_set(HC_ERR_DATA, "%d lines read at line %lld, %d "
                              "expected (the file changed?)", got,
                              start + done + 1, want);
        pack(st, got, x + (size_t)done * st->row, y ? y + done : NULL);
        done += got;
    }
    return HC_OK;
}

static int stream_read(void *ctx, long long start, int count, float *x,
                       int32_t *y)
{
    return stream_chunks(ctx, -1, start, count, x, y);
}

static int stream_read_epoch(void *ctx, int epoch, long long start,
                             int count, float *x, int32_t *y)
{
    return stream_chunks(ctx, epoch, start, count, x, y);
}

static void stream_close(void *ctx)
{
    struct stream *st = ctx;

    if (!st)
        return;
    wk_ctr_close(st->c);
    free(st->label);
    free(st->num);
    free(st->cat);
    free(st);
}

int wk_ctr_inputs_load(const char *spec, const char *flag,
                       const struct hc_model *m, struct wk_dataset *out)
{
    struct wk_ctr_opts o = {0};
    struct stream *st = NULL;
    const char *path = spec + 7;
    long long n_lines;
    int rv;

    memset(out, 0, sizeof *out);
    if (!wk_ctr_inputs_spec(spec))
        return hc_err_set(HC_ERR_CONFIG, "%s %s: a click-through file is "
                          "criteo:PATH or libsvm:PATH", flag, spec);
    o.format = strncmp(spec, "criteo:", 7) ? WK_CTR_LIBSVM : WK_CTR_CRITEO;
    o.shuffle = !m->file_order;     /* training's order; eval reads lines */
    o.seed = m->seed;
    /* The ids' rule needs input_dim: the plan for Criteo's widths first
     * (libsvm's are known once it is open, then checked again). */
    o.input_dim = 1;
    for (int q = 0; q < m->n_inputs; q++) {
        uint64_t dim;

        if (m->inputs[q].ids && table_dim(m, q, &dim) == HC_OK && dim)
            o.input_dim = dim;
    }
    if (!(st = calloc(1, sizeof *st)))
        return hc_err_set(HC_ERR_NOMEM, "%s: out of memory", path);
    if ((rv = wk_ctr_open(path, &o, &st->c)))
        goto out;
    st->n_num = wk_ctr_n_num(st->c);
    st->n_cat = wk_ctr_n_cat(st->c);
    n_lines = wk_ctr_lines(st->c);
    if ((rv = make_plan(m, path, st->n_cat, st->n_num, &st->p)))
        goto out;
    if (st->p.input_dim != o.input_dim) {
        rv = hc_err_set(HC_ERR_CONFIG, "model %s: its ids inputs' tables "
                        "differ in input_dim; %s feeds one", m->name, path);
        goto out;
    }
    describe(m, &st->p, path, out);
    out->n = n_lines;
    st->row = (size_t)out->c;
    st->off_cat = out->inputs[st->p.q_cat].off;
    st->off_num = st->p.q_num >= 0 ? out->inputs[st->p.q_num].off : 0;
    st->label = malloc(CHUNK * sizeof *st->label);
    st->num = malloc((size_t)CHUNK * (size_t)st->n_num * sizeof *st->num);
    st->cat = malloc((size_t)CHUNK * (size_t)st->n_cat * sizeof *st->cat);
    if (!st->label || !st->num || !st->cat) {
        rv = hc_err_set(HC_ERR_NOMEM, "%s: out of memory for %d lines",
                        path, CHUNK);
        goto out;
    }
    out->src = (struct wk_data_source){ .read = stream_read,
                                        .read_epoch = stream_read_epoch,
                                        .close = stream_close, .ctx = st };
    st = NULL;
out:
    stream_close(st);
    if (rv != HC_OK)
        wk_data_free(out);
    return rv;
}
