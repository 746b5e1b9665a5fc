/*
 * model_loss.c — a model file's "loss" (model.h, enum hc_loss): a name
 * ("binary_crossentropy", Keras's class "BinaryCrossentropy", "mse") with
 * Keras's defaults, or an object with Keras's settings,
 * {"type": "categorical_crossentropy", "from_logits": true,
 * "label_smoothing": 0.1}, {"type": "huber", "delta": 2}. A loss it does
 * not know, or a setting that loss does not take, is refused naming the
 * key and what is supported.
 */
#include "model_impl.h"

#include "err.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const keys_xent[] = {"type", "from_logits",
                                        "label_smoothing", NULL};
static const char *const keys_sparse[] = {"type", "from_logits", NULL};
static const char *const keys_none[] = {"type", NULL};
static const char *const keys_huber[] = {"type", "delta", NULL};

static const struct loss_row {
    enum hc_loss loss;
    const char *name;           /* Keras's function name */
    const char *cls;            /* Keras's class */
    const char *alias;          /* Keras's short name, or NULL */
    const char *const *keys;    /* in the object form */
} losses[] = {
    {HC_LOSS_SPARSE_CCE, "sparse_categorical_crossentropy",
     "SparseCategoricalCrossentropy", NULL, keys_sparse},
    {HC_LOSS_CCE, "categorical_crossentropy", "CategoricalCrossentropy",
     NULL, keys_xent},
    {HC_LOSS_BCE, "binary_crossentropy", "BinaryCrossentropy", NULL,
     keys_xent},
    {HC_LOSS_MSE, "mean_squared_error", "MeanSquaredError", "mse",
     keys_none},
    {HC_LOSS_MAE, "mean_absolute_error", "MeanAbsoluteError", "mae",
     keys_none},
    {HC_LOSS_HUBER, "huber", "Huber", "huber_loss", keys_huber},
};

#define N_LOSSES (sizeof losses / sizeof losses[0])

static const struct loss_row *row_of(enum hc_loss l)
{
    for (size_t i = 0; i < N_LOSSES; i++)
        if (losses[i].loss == l)
            return &losses[i];
    return NULL;
}

const char *hc_loss_name(enum hc_loss l)
{
    const struct loss_row *r = row_of(l);

    if (!r)
        return "unknown";
    return r->alias ? r->alias : r->name;   /* "mse", as hetps always said */
}

int hc_loss_takes_classes(enum hc_loss l)
{
    return l == HC_LOSS_SPARSE_CCE || l == HC_LOSS_CCE;
}

const char *md_loss_list(void)
{
    return "sparse_categorical_crossentropy, categorical_crossentropy, "
           "binary_crossentropy, mean_squared_error (mse), "
           "mean_absolute_error (mae), huber";
}

static const struct loss_row *loss_named(const char *s)
{
    char n[64], t[64];

    md_norm(s, n, sizeof n);
    for (size_t i = 0; i < N_LOSSES; i++) {
        const struct loss_row *r = &losses[i];

        if (!strcmp(n, md_norm(r->name, t, sizeof t)) ||
            !strcmp(n, md_norm(r->cls, t, sizeof t)) ||
            (r->alias && !strcmp(n, md_norm(r->alias, t, sizeof t))))
            return r;
    }
    return NULL;
}

int md_loss_known(const char *s)
{
    return loss_named(s) != NULL;
}

const char *md_loss_class(enum hc_loss l)
{
    const struct loss_row *r = row_of(l);

    return r ? r->cls : "unknown";
}

int md_read_loss(const cJSON *root, struct hc_model *m)
{
    static const struct md_range smooth = {0, 1, 0, 0};
    static const struct md_range positive = {0, HUGE_VAL, 1, 0};
    const cJSON *it = md_get(root, "loss"), *t = it;
    struct hc_loss_par *p = &m->loss_par;
    const struct loss_row *r = NULL;
    char where[WHERE_MAX], buf[64];
    int rv;

    p->from_logits = 0;
    p->label_smoothing = 0;
    p->delta = 1;
    if (!it)
        return md_missing(m->source, "loss",
                          "\"sparse_categorical_crossentropy\"");
    if (cJSON_IsObject(it) && !(t = md_get(it, "type")))
        return md_missing(m->source, "type", "\"binary_crossentropy\"");
    if (cJSON_IsString(t))
        r = loss_named(t->valuestring);
    if (!r)
        return md_fail(m->source, "unsupported loss %s; use one of %s",
                       md_show(t, buf, sizeof buf), md_loss_list());
    m->loss = r->loss;
    if (!cJSON_IsObject(it))
        return HC_OK;
    snprintf(where, sizeof where, "%.500s: loss (%s)", m->source, r->name);
    if ((rv = md_check_keys(it, r->keys, where)) ||
        (rv = md_get_bool(it, "from_logits", where, 0, &p->from_logits)) ||
        (rv = md_get_float(it, "label_smoothing", where, 0, smooth,
                           &p->label_smoothing)))
        return rv;
    return md_get_float(it, "delta", where, 1, positive, &p->delta);
}
