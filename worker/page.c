/*
 * page.c — the chief's live page (see page.h): a table of the tasks from
 * a status request to every shard, and SVG line charts of the history.
 */
#include "page.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "err.h"

struct buf {
    char *p;
    size_t len, cap;
    int failed;
};

static void put(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->failed)
        return;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 16384;
        char *q;

        while (c < b->len + (size_t)n + 1)
            c *= 2;
        if (!(q = realloc(b->p, c))) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Text for HTML: what a shard or a file name could hold. */
static void put_text(struct buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': put(b, "&lt;"); break;
        case '>': put(b, "&gt;"); break;
        case '&': put(b, "&amp;"); break;
        case '"': put(b, "&quot;"); break;
        default: put(b, "%c", *s);
        }
    }
}

#define W 460
#define H 200
#define PAD 44

/* One series of a chart: n points (x[i], y[i]). */
struct line {
    const char *name, *color;
    const double *x, *y;
    int n;
};

/* An SVG line chart of the lines, with its title and axis extremes. */
static void chart(struct buf *b, const char *title, const struct line *l,
                  int n_lines, const char *xlabel)
{
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    int i, k, any = 0;

    for (k = 0; k < n_lines; k++)
        for (i = 0; i < l[k].n; i++) {
            if (!isfinite(l[k].y[i]))
                continue;
            x0 = fmin(x0, l[k].x[i]), x1 = fmax(x1, l[k].x[i]);
            y0 = fmin(y0, l[k].y[i]), y1 = fmax(y1, l[k].y[i]);
            any = 1;
        }
    put(b, "<figure><figcaption>%s</figcaption><svg xmlns=\"http://www.w3."
        "org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
        "role=\"img\" aria-label=\"%s\"><rect x=\"%d\" y=\"8\" width=\"%d\" "
        "height=\"%d\" fill=\"#fff\" stroke=\"#bbb\"/>", title, W, H + 30, W,
        H + 30, title, PAD, W - PAD - 8, H - 8);
    if (!any) {
        put(b, "<text x=\"%d\" y=\"%d\" fill=\"#888\">no data yet</text>"
            "</svg></figure>\n", PAD + 20, H / 2);
        return;
    }
    if (x1 <= x0)
        x1 = x0 + 1;
    if (y1 <= y0)
        y1 = y0 + (y0 ? fabs(y0) * 0.1 : 1);
    put(b, "<text x=\"2\" y=\"18\" font-size=\"11\">%.4g</text>"
        "<text x=\"2\" y=\"%d\" font-size=\"11\">%.4g</text>"
        "<text x=\"%d\" y=\"%d\" font-size=\"11\">%.4g</text>"
        "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%.4g "
        "%s</text>", y1, H, y0, PAD, H + 16, x0, W - 8, H + 16, x1, xlabel);
    for (k = 0; k < n_lines; k++) {
        put(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
            "points=\"", l[k].color);
        for (i = 0; i < l[k].n; i++) {
            if (!isfinite(l[k].y[i]))
                continue;
            put(b, "%.1f,%.1f ", PAD + (l[k].x[i] - x0) / (x1 - x0) *
                                           (W - PAD - 8),
                8 + (1 - (l[k].y[i] - y0) / (y1 - y0)) * (H - 8));
        }
        put(b, "\"/>");
        for (i = 0; l[k].n <= 60 && i < l[k].n; i++)
            if (isfinite(l[k].y[i]))
                put(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>",
                    PAD + (l[k].x[i] - x0) / (x1 - x0) * (W - PAD - 8),
                    8 + (1 - (l[k].y[i] - y0) / (y1 - y0)) * (H - 8),
                    l[k].color);
        put(b, "<text x=\"%d\" y=\"%d\" font-size=\"12\" fill=\"%s\">"
            "%s</text>", PAD + 8 + 110 * k, H + 28, l[k].color, l[k].name);
    }
    put(b, "</svg></figure>\n");
}

/* The tasks' table, from every shard's status. */
static void tasks(struct buf *b, const struct wk_page *pg)
{
    const struct hc_cluster *cl = pg->cl;
    struct pc_opts po = { .timeout_ms = 1000, .retry_ms = 1500 };
    struct pc_shard_status *st = calloc((size_t)cl->n_ps, sizeof *st);
    struct pc_client *pc = NULL;
    int j, w, ok;

    ok = st && pc_open(&pc, cl, -1, 0, &po) == HC_OK && pc_status(pc, st) ==
                                                            HC_OK;
    put(b, "<table><tr><th>task</th><th>role</th><th>devices</th><th>state"
        "</th><th>step</th><th>samples/s</th><th>share</th><th>waiting for"
        "</th></tr>\n");
    for (j = 0; j < cl->n_ps; j++) {
        put(b, "<tr><td>ps:%d</td><td>parameter server</td><td></td>", j);
        if (!ok || !st[j].up) {
            put(b, "<td class=\"bad\">down</td><td></td><td></td><td></td>"
                "<td></td></tr>\n");
            continue;
        }
        put(b, "<td>up</td><td>%llu</td><td></td><td></td><td>",
            (unsigned long long)st[j].version);
        if (st[j].waiting_for[0] && st[j].waiting_s >= 1.0)
            put(b, "<span class=\"bad\">%s (%.1f s)</span>", st[j].waiting_for,
                st[j].waiting_s);
        put(b, "</td></tr>\n");
    }
    for (w = 0; w < cl->n_worker; w++) {
        const struct pc_member *m = NULL;

        for (j = 0; ok && j < cl->n_ps && !m; j++) {
            int k;

            for (k = 0; st[j].up && k < st[j].n_members; k++)
                if (st[j].members[k].worker == w)
                    m = &st[j].members[k];
        }
        put(b, "<tr><td>worker:%d</td><td>%s</td><td>", w,
            w == 0 ? "chief" : "worker");
        put_text(b, m ? m->devices : "");
        put(b, "</td><td%s>", m && m->state != PC_MEMBER_DEAD ? ""
                                                             : " class=\"bad\"");
        put_text(b, pc_member_state_name(m ? m->state : PC_MEMBER_UNKNOWN));
        if (m)
            put(b, "</td><td>%llu</td><td>%.0f</td><td>%u</td><td></td></tr>\n",
                (unsigned long long)m->clock, (double)m->samples_per_s,
                m->share);
        else
            put(b, "</td><td></td><td></td><td></td><td></td></tr>\n");
    }
    put(b, "</table>\n");
    for (j = 0, w = 0; ok && j < cl->n_ps; j++)
        for (int k = 0; st[j].up && k < st[j].n_tables; k++)
            put(b, "%s ps:%d variable %u: %llu", w++ ? "," : "<p id=\"rows\">"
                "row-sparse tables' rows stored:", j, st[j].tables[k].var,
                (unsigned long long)st[j].tables[k].rows);
    if (w)
        put(b, "</p>\n");
    if (st)
        pc_status_free(st, cl->n_ps);
    free(st);
    pc_close(pc);
}

/* A model with tables (its points have rows): the chief's steps' unique
 * rows, and the KiB of ids and rows pulled and of ids and gradients
 * pushed (watch.h), drawn in the scratch rows, pulled, pushed (n_pts
 * each; x holds the steps). */
static void sparse_charts(struct buf *b, const struct wk_watch_point *pts,
                          int n_pts, const double *x, double *rows,
                          double *pulled, double *pushed)
{
    struct line l[2];
    int any = 0;

    for (int i = 0; i < n_pts; i++)
        any |= pts[i].rows > 0;
    if (!any)
        return;
    for (int i = 0; i < n_pts; i++) {
        rows[i] = pts[i].rows;
        pulled[i] = pts[i].pulled / 1024.0;
        pushed[i] = pts[i].pushed / 1024.0;
    }
    l[0] = (struct line){ "unique rows", "#9467bd", x, rows, n_pts };
    chart(b, "sparse rows a step", l, 1, "steps");
    l[0] = (struct line){ "KiB pulled", "#1f77b4", x, pulled, n_pts };
    l[1] = (struct line){ "KiB pushed", "#ff7f0e", x, pushed, n_pts };
    chart(b, "sparse KiB a step", l, 2, "steps");
}

char *wk_page_render(void *arg, size_t *len)
{
    const struct wk_page *pg = arg;
    struct buf b = { 0 };
    struct wk_watch_point *pts = calloc(WK_WATCH_POINTS, sizeof *pts);
    struct wk_watch_epoch *ep = calloc(WK_WATCH_EPOCHS, sizeof *ep);
    double *v = calloc(4 * WK_WATCH_POINTS + 4 * WK_WATCH_EPOCHS, sizeof *v);
    int n_pts = 0, n_ep = 0, i;

    if (!pts || !ep || !v)
        goto out;
    wk_watch_history(pg->watch, pts, WK_WATCH_POINTS, &n_pts, ep,
                     WK_WATCH_EPOCHS, &n_ep);
    put(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"refresh\" content=\"2\"><title>hetps: ");
    put_text(&b, pg->model);
    put(&b, "</title><style>body{font-family:sans-serif;margin:1.5em;color:"
        "#222}table{border-collapse:collapse;margin-bottom:1em}td,th{border:"
        "1px solid #ccc;padding:3px 8px;text-align:left}th{background:#eee}"
        ".bad{color:#b00;font-weight:bold}figure{display:inline-block;margin:"
        "0 1em 1em 0}figcaption{font-weight:bold}</style></head><body>\n"
        "<h1>hetps: ");
    put_text(&b, pg->model);
    put(&b, "</h1>\n<p id=\"progress\">epoch %d/%d, step %ld of the chief",
        pg->watch->prog.epoch + 1, pg->watch->c.epochs, pg->watch->step);
    if (n_ep && ep[n_ep - 1].s.has_val)
        put(&b, " — last val_accuracy %.4f", ep[n_ep - 1].s.val_acc);
    put(&b, "</p>\n<h2>Tasks</h2>\n");
    tasks(&b, pg);
    put(&b, "<h2>Curves</h2>\n");
    {
        double *sx = v, *sl = v + WK_WATCH_POINTS, *sa = v + 2 * WK_WATCH_POINTS,
               *sr = v + 3 * WK_WATCH_POINTS;
        double *ex = v + 4 * WK_WATCH_POINTS, *evl = ex + WK_WATCH_EPOCHS,
               *eva = evl + WK_WATCH_EPOCHS, *el = eva + WK_WATCH_EPOCHS;
        struct line l[2];

        for (i = 0; i < n_pts; i++) {
            sx[i] = (double)pts[i].step;
            sl[i] = pts[i].loss;
            sa[i] = pts[i].acc;
            sr[i] = pts[i].rate;
        }
        l[0] = (struct line){ "train (step)", "#1f77b4", sx, sl, n_pts };
        chart(&b, "loss", l, 1, "steps");
        l[0] = (struct line){ "train (step)", "#1f77b4", sx, sa, n_pts };
        chart(&b, "accuracy", l, 1, "steps");
        l[0] = (struct line){ "chief samples/s", "#2ca02c", sx, sr, n_pts };
        chart(&b, "throughput", l, 1, "steps");
        sparse_charts(&b, pts, n_pts, sx, sl, sa, sr);
        for (i = 0; i < n_ep; i++) {
            ex[i] = ep[i].s.epoch + 1;
            el[i] = ep[i].s.loss;
            evl[i] = ep[i].s.has_val ? ep[i].s.val_loss : NAN;
            eva[i] = ep[i].s.has_val ? ep[i].s.val_acc : NAN;
        }
        l[0] = (struct line){ "train loss", "#1f77b4", ex, el, i };
        l[1] = (struct line){ "val_loss", "#d62728", ex, evl, i };
        chart(&b, "loss per epoch", l, 2, "epochs");
        l[0] = (struct line){ "val_accuracy", "#d62728", ex, eva, i };
        chart(&b, "val_accuracy per epoch", l, 1, "epochs");
    }
    put(&b, "</body></html>\n");
out:
    free(pts);
    free(ep);
    free(v);
    if (b.failed || !b.p) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
