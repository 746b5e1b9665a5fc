/*
 * metrics.c — the metrics registry, its Prometheus text rendering and the
 * HTTP server over nng's (see metrics.h).
 *
 * Families and series live in growing arrays of pointers (a series never
 * moves: callers keep it); one mutex guards updates and rendering, which
 * are short. The server answers each GET on nng's threads.
 */
#include "metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "cluster.h"
#include "err.h"
#include "log.h"

#define MAX_BOUNDS 32

const double hc_latency_bounds[16] = {
    1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1, 2.5, 5, 10,
};

struct hc_series {
    struct hc_metrics *m;
    enum hc_metric_type type;
    char *labels;               /* "" when none */
    double value, sum;          /* counter/gauge; histogram sum */
    double bounds[MAX_BOUNDS];
    unsigned long long counts[MAX_BOUNDS + 1]; /* per bucket, last +Inf */
    int n_bounds;
};

struct family {
    char *name, *help;
    enum hc_metric_type type;
    struct hc_series **series;
    int n, cap;
};

struct hc_metrics {
    pthread_mutex_t mu;
    struct family **fam;
    int n, cap;
    void (*on_render)(void *, struct hc_metrics *);
    void *arg;
};

int hc_metrics_new(struct hc_metrics **out)
{
    struct hc_metrics *m = calloc(1, sizeof *m);

    *out = NULL;
    if (!m)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for metrics");
    pthread_mutex_init(&m->mu, NULL);
    *out = m;
    return HC_OK;
}

void hc_metrics_free(struct hc_metrics *m)
{
    int i, j;

    if (!m)
        return;
    for (i = 0; i < m->n; i++) {
        for (j = 0; j < m->fam[i]->n; j++) {
            free(m->fam[i]->series[j]->labels);
            free(m->fam[i]->series[j]);
        }
        free(m->fam[i]->series);
        free(m->fam[i]->name);
        free(m->fam[i]->help);
        free(m->fam[i]);
    }
    free(m->fam);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static int grow(void *arr, int *cap, int need, size_t elem)
{
    void **a = arr;
    int c = *cap ? *cap * 2 : 8;
    void *p;

    if (need <= *cap)
        return 0;
    p = realloc(*a, (size_t)c * elem);
    if (!p)
        return -1;
    *a = p;
    *cap = c;
    return 0;
}

static struct family *family_of(struct hc_metrics *m, enum hc_metric_type type,
                                const char *name, const char *help)
{
    struct family *f;
    int i;

    for (i = 0; i < m->n; i++) {
        if (strcmp(m->fam[i]->name, name))
            continue;
        if (m->fam[i]->type != type) {
            hc_warn("metrics: %s registered with two types", name);
            return NULL;
        }
        return m->fam[i];
    }
    if (grow(&m->fam, &m->cap, m->n + 1, sizeof *m->fam) ||
        !(f = calloc(1, sizeof *f)))
        return NULL;
    f->name = strdup(name);
    f->help = strdup(help ? help : "");
    f->type = type;
    if (!f->name || !f->help) {
        free(f->name);
        free(f->help);
        free(f);
        return NULL;
    }
    m->fam[m->n++] = f;
    return f;
}

struct hc_series *hc_metric(struct hc_metrics *m, enum hc_metric_type type,
                            const char *name, const char *help,
                            const char *labels, const double *bounds,
                            int n_bounds)
{
    struct hc_series *s = NULL;
    struct family *f;
    int i;

    if (!m)
        return NULL;
    if (!labels)
        labels = "";
    pthread_mutex_lock(&m->mu);
    if (!(f = family_of(m, type, name, help)))
        goto out;
    for (i = 0; i < f->n; i++)
        if (!strcmp(f->series[i]->labels, labels)) {
            s = f->series[i];
            goto out;
        }
    if (grow(&f->series, &f->cap, f->n + 1, sizeof *f->series) ||
        !(s = calloc(1, sizeof *s)))
        goto out;
    if (!(s->labels = strdup(labels))) {
        free(s);
        s = NULL;
        goto out;
    }
    s->m = m;
    s->type = type;
    if (type == HC_HISTOGRAM) {
        s->n_bounds = n_bounds < MAX_BOUNDS ? n_bounds : MAX_BOUNDS;
        for (i = 0; i < s->n_bounds; i++)
            s->bounds[i] = bounds[i];
    }
    f->series[f->n++] = s;
out:
    pthread_mutex_unlock(&m->mu);
    return s;
}

void hc_series_add(struct hc_series *s, double v)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->m->mu);
    s->value += v;
    pthread_mutex_unlock(&s->m->mu);
}

void hc_series_set(struct hc_series *s, double v)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->m->mu);
    s->value = v;
    pthread_mutex_unlock(&s->m->mu);
}

void hc_series_observe(struct hc_series *s, double v)
{
    int i;

    if (!s || isnan(v))
        return;
    for (i = 0; i < s->n_bounds && v > s->bounds[i]; i++)
        ;
    pthread_mutex_lock(&s->m->mu);
    s->counts[i]++;
    s->sum += v;
    pthread_mutex_unlock(&s->m->mu);
}

void hc_metrics_on_render(struct hc_metrics *m,
                          void (*fn)(void *arg, struct hc_metrics *m),
                          void *arg)
{
    pthread_mutex_lock(&m->mu);
    m->on_render = fn;
    m->arg = arg;
    pthread_mutex_unlock(&m->mu);
}

/* A growing text buffer. */
struct text {
    char *p;
    size_t len, cap;
    int failed;
};

static void put(struct text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        if (t->failed)
            return;
        va_start(ap, fmt);
        n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0,
                      fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        {
            size_t c = t->cap ? t->cap * 2 : 4096;
            char *q;

            while (c < t->len + (size_t)n + 1)
                c *= 2;
            if (!(q = realloc(t->p, c))) {
                t->failed = 1;
                return;
            }
            t->p = q;
            t->cap = c;
        }
    }
}

/* A number as Prometheus reads it: integers exactly, +Inf, NaN. */
static void put_num(struct text *t, double v)
{
    if (isnan(v))
        put(t, "NaN");
    else if (isinf(v))
        put(t, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        put(t, "%.0f", v);
    else
        put(t, "%.9g", v);
}

static void render_series(struct text *t, const struct family *f,
                          const struct hc_series *s)
{
    const char *sep = s->labels[0] ? "," : "";
    unsigned long long cum = 0;
    int i;

    if (f->type != HC_HISTOGRAM) {
        put(t, s->labels[0] ? "%s{%s} " : "%s%s ", f->name, s->labels);
        put_num(t, s->value);
        put(t, "\n");
        return;
    }
    for (i = 0; i <= s->n_bounds; i++) {
        cum += s->counts[i];
        put(t, "%s_bucket{%s%sle=\"", f->name, s->labels, sep);
        put_num(t, i < s->n_bounds ? s->bounds[i] : INFINITY);
        put(t, "\"} %llu\n", cum);
    }
    put(t, s->labels[0] ? "%s_sum{%s} " : "%s_sum%s ", f->name, s->labels);
    put_num(t, s->sum);
    put(t, s->labels[0] ? "\n%s_count{%s} %llu\n" : "\n%s_count%s %llu\n",
        f->name, s->labels, cum);
}

char *hc_metrics_render(struct hc_metrics *m, size_t *len)
{
    static const char *types[] = { "counter", "gauge", "histogram" };
    void (*fn)(void *, struct hc_metrics *);
    struct text t = { 0 };
    int i, j;

    pthread_mutex_lock(&m->mu);
    fn = m->on_render;
    pthread_mutex_unlock(&m->mu);
    if (fn)
        fn(m->arg, m);
    pthread_mutex_lock(&m->mu);
    put(&t, "%s", "");
    for (i = 0; i < m->n; i++) {
        const struct family *f = m->fam[i];

        if (!f->n)
            continue;
        put(&t, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name,
            types[f->type]);
        for (j = 0; j < f->n; j++)
            render_series(&t, f, f->series[j]);
    }
    pthread_mutex_unlock(&m->mu);
    if (t.failed) {
        free(t.p);
        return NULL;
    }
    *len = t.len;
    return t.p;
}

/* ---- the HTTP server ---------------------------------------------------- */

struct page {
    char *(*fn)(void *arg, size_t *len);
    void *arg;
    char content_type[64];
};

struct hc_http {
    nng_http_server *srv;
    struct hc_metrics *m;
    struct page pages[4];
    int n_pages;
    int port, started;
    char addr[256];
};

static char *metrics_page(void *arg, size_t *len)
{
    return hc_metrics_render(arg, len);
}

static void on_get(nng_aio *aio)
{
    nng_http_handler *h = nng_aio_get_input(aio, 1);
    struct page *p = nng_http_handler_get_data(h);
    nng_http_res *res = NULL;
    size_t len = 0;
    char *body = p->fn(p->arg, &len);
    int rv;

    if (!body) {
        if ((rv = nng_http_res_alloc_error(&res, 500)) != 0) {
            nng_aio_finish(aio, rv);
            return;
        }
    } else if ((rv = nng_http_res_alloc(&res)) != 0 ||
               (rv = nng_http_res_set_header(res, "Content-Type",
                                             p->content_type)) != 0 ||
               (rv = nng_http_res_set_header(res, "Cache-Control",
                                             "no-store")) != 0 ||
               (rv = nng_http_res_copy_data(res, body, len)) != 0) {
        free(body);
        if (res)
            nng_http_res_free(res);
        nng_aio_finish(aio, rv);
        return;
    }
    free(body);
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

int hc_http_page(struct hc_http *h, const char *path, const char *content_type,
                 char *(*fn)(void *arg, size_t *len), void *arg)
{
    nng_http_handler *hd;
    struct page *p;
    int rv;

    if (h->n_pages == (int)(sizeof h->pages / sizeof h->pages[0]))
        return hc_err_set(HC_ERR_LIMIT, "too many pages");
    p = &h->pages[h->n_pages];
    p->fn = fn;
    p->arg = arg;
    snprintf(p->content_type, sizeof p->content_type, "%s", content_type);
    if ((rv = nng_http_handler_alloc(&hd, path, on_get)) != 0)
        return hc_err_set(HC_ERR_NOMEM, "http handler %s: %s", path,
                          nng_strerror(rv));
    if ((rv = nng_http_handler_set_data(hd, p, NULL)) != 0 ||
        (rv = nng_http_server_add_handler(h->srv, hd)) != 0) {
        nng_http_handler_free(hd);
        return hc_err_set(HC_ERR_IO, "http handler %s: %s", path,
                          nng_strerror(rv));
    }
    h->n_pages++;
    return HC_OK;
}

int hc_http_listen(struct hc_http *h)
{
    nng_sockaddr sa;
    int rv;

    if ((rv = nng_http_server_start(h->srv)) != 0)
        return hc_err_set(HC_ERR_IO, "cannot serve metrics on %s: %s",
                          h->addr, nng_strerror(rv));
    if (nng_http_server_get_addr(h->srv, &sa) == 0 && sa.s_family == NNG_AF_INET)
        h->port = ((sa.s_in.sa_port & 0xff) << 8) | (sa.s_in.sa_port >> 8);
    h->started = 1;
    return HC_OK;
}

int hc_http_open(struct hc_http **out, const char *addr, struct hc_metrics *m)
{
    struct hc_http *h;
    nng_url *url = NULL;
    char u[300];
    const char *colon = strrchr(addr, ':');
    int rv;

    *out = NULL;
    if (!colon || colon == addr || !colon[1] ||
        strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
        strlen(addr) > 250)
        return hc_err_set(HC_ERR_CONFIG, "metrics address '%s' is not "
                          "HOST:PORT (e.g. 127.0.0.1:9300)", addr);
    if (!(h = calloc(1, sizeof *h)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    h->m = m;
    snprintf(u, sizeof u, "http://%s", addr);
    if ((rv = nng_url_parse(&url, u)) != 0) {
        free(h);
        return hc_err_set(HC_ERR_CONFIG, "metrics address '%s': %s", addr,
                          nng_strerror(rv));
    }
    rv = nng_http_server_hold(&h->srv, url);
    nng_url_free(url);
    if (rv != 0) {
        free(h);
        return hc_err_set(HC_ERR_IO, "metrics server on %s: %s", addr,
                          nng_strerror(rv));
    }
    if ((rv = hc_http_page(h, "/metrics",
                           "text/plain; version=0.0.4; charset=utf-8",
                           metrics_page, m)) != HC_OK)
        goto fail;
    snprintf(h->addr, sizeof h->addr, "%s", addr);
    *out = h;
    return HC_OK;
fail:
    nng_http_server_release(h->srv);
    free(h);
    return rv;
}

int hc_http_port(const struct hc_http *h)
{
    return h ? h->port : 0;
}

void hc_http_stop(struct hc_http *h)
{
    if (!h)
        return;
    if (h->started)
        nng_http_server_stop(h->srv);
    nng_http_server_release(h->srv);
    free(h);
}

void hc_metrics_addr(const struct hc_cluster *cl, int is_ps, int index,
                     const char *flag, char *out, size_t len)
{
    const struct hc_task_addr *t;

    out[0] = '\0';
    if (flag) {
        if (strcmp(flag, "off"))
            snprintf(out, len, "%s", flag);
        return;
    }
    if (!cl->metrics_port || index < 0 ||
        index >= (is_ps ? cl->n_ps : cl->n_worker))
        return;
    t = is_ps ? &cl->ps[index] : &cl->worker[index];
    snprintf(out, len, strchr(t->host, ':') ? "[%s]:%d" : "%s:%d", t->host,
             cl->metrics_port + (is_ps ? 0 : cl->n_ps) + index);
}
