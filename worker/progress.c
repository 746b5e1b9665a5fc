/*
 * progress.c — Keras-style progress lines for the training loop (see
 * progress.h): a live bar on a terminal, plain periodic lines elsewhere,
 * and one summary line per epoch.
 */
#include "progress.h"

#include <string.h>

#define BAR_WIDTH 30
#define TTY_INTERVAL_S 0.05

void wk_progress_init(struct wk_progress *p, FILE *out, int verbose, int tty,
                      int epochs, double interval_s)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->verbose = verbose;
    p->tty = tty;
    p->epochs = epochs;
    p->interval_s = interval_s > 0 ? interval_s : 5.0;
}

size_t wk_progress_metrics(char *buf, size_t len, const char *prefix,
                           const struct hc_eval_metric *ms, int n,
                           const double *v)
{
    size_t k = 0;
    int i, w;

    if (len)
        buf[0] = '\0';
    for (i = 0; i < n && k < len; i++) {
        if (ms[i].kind == HC_EM_ACCURACY)
            continue;
        w = snprintf(buf + k, len - k, " - %s%s: %.4f", prefix, ms[i].name,
                     v[i]);
        if (w < 0)
            break;
        k += (size_t)w < len - k ? (size_t)w : len - k - 1;
    }
    return k;
}

void wk_progress_eta(double s, char *buf, size_t len)
{
    long t = s > 0 ? (long)(s + 0.5) : 0;

    if (t >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else if (t >= 60)
        snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
    else
        snprintf(buf, len, "%lds", t);
}

/* Keras's time per step: "6ms/step". */
static void per_step(double s, char *buf, size_t len)
{
    if (s >= 1)
        snprintf(buf, len, "%.0fs/step", s);
    else if (s >= 1e-3)
        snprintf(buf, len, "%.0fms/step", s * 1e3);
    else
        snprintf(buf, len, "%.0fus/step", s * 1e6);
}

/* "123/469 [=======>......................]" into buf; returns its length. */
static int bar(const struct wk_progress *p, long cur, char *buf, size_t len)
{
    char digits[24];
    int n, fill, i, k;

    snprintf(digits, sizeof digits, "%ld", p->target);
    n = snprintf(buf, len, "%*ld/%ld [", (int)strlen(digits), cur, p->target);
    fill = p->target > 0 ? (int)(BAR_WIDTH * cur / p->target) : 0;
    if (fill > BAR_WIDTH)
        fill = BAR_WIDTH;
    for (i = 0, k = n; i < BAR_WIDTH && k + 2 < (int)len; i++, k++)
        buf[k] = i < fill - 1 ? '=' : i == fill - 1 ? (cur < p->target ? '>' : '=')
                                                    : '.';
    if (k + 1 < (int)len)
        buf[k++] = ']';
    buf[k] = '\0';
    return k;
}

/* " - loss: 0.3101 - accuracy: 0.8912" of the samples so far. */
static int running_metrics(const struct wk_progress *p, char *buf, size_t len)
{
    if (!p->samples)
        return snprintf(buf, len, "%s", "");
    return snprintf(buf, len, " - loss: %.4f - accuracy: %.4f",
                    p->loss_sum / (double)p->samples,
                    (double)p->correct / (double)p->samples);
}

/* Write line on the terminal in place of the last bar, padded over it. */
static void redraw(struct wk_progress *p, const char *line, int n, int end)
{
    int pad = p->width > n ? p->width - n : 0;

    fprintf(p->out, "\r%s%*s%s", line, pad, "", end ? "\n" : "");
    fflush(p->out);
    p->width = end ? 0 : n;
}

void wk_progress_begin(struct wk_progress *p, int epoch, long target,
                       double now)
{
    p->epoch = epoch;
    p->target = target;
    p->step = p->samples = p->correct = 0;
    p->loss_sum = 0;
    p->t0 = p->t_last = now;
    p->width = 0;
    if (p->verbose == 1 && p->tty) {
        fprintf(p->out, "Epoch %d/%d\n", epoch + 1, p->epochs);
        fflush(p->out);
    }
}

void wk_progress_step(struct wk_progress *p, long step, int n, double loss,
                      long correct, double now)
{
    char line[512], eta[32], m[128];
    double rate, left;
    int k;

    p->step = step;
    p->samples += n;
    p->correct += correct;
    p->loss_sum += loss * n;
    if (p->verbose != 1 || step >= p->target ||
        now - p->t_last < (p->tty ? TTY_INTERVAL_S : p->interval_s))
        return;
    p->t_last = now;
    rate = now > p->t0 ? (double)p->samples / (now - p->t0) : 0;
    left = step > 0 ? (now - p->t0) / (double)step * (double)(p->target - step)
                    : 0;
    wk_progress_eta(left, eta, sizeof eta);
    running_metrics(p, m, sizeof m);
    if (p->tty) {
        k = bar(p, step, line, sizeof line);
        k += snprintf(line + k, sizeof line - (size_t)k,
                      " - ETA: %s%s - %.0f samples/s", eta, m, rate);
        redraw(p, line, k < (int)sizeof line ? k : (int)sizeof line - 1, 0);
        return;
    }
    fprintf(p->out, "Epoch %d/%d - %ld/%ld - ETA: %s%s - %.0f samples/s\n",
            p->epoch + 1, p->epochs, step, p->target, eta, m, rate);
    fflush(p->out);
}

void wk_progress_end(struct wk_progress *p, const struct wk_epoch_stats *s)
{
    char line[1280], ps[32], val[640] = "";
    double rate = s->seconds > 0 ? (double)s->samples / s->seconds : 0;
    int k;

    if (p->verbose == 0)
        return;
    per_step(s->steps > 0 ? s->seconds / (double)s->steps : 0, ps, sizeof ps);
    if (s->has_val) {
        k = snprintf(val, sizeof val, " - val_loss: %.4f - val_accuracy: "
                     "%.4f", s->val_loss, s->val_acc);
        wk_progress_metrics(val + k, sizeof val - (size_t)k, "val_",
                            p->metrics, p->n_metrics, s->val_metric);
    }
    if (p->verbose == 1 && p->tty) {
        long steps = p->target > 0 ? p->target : s->steps;

        k = bar(p, steps, line, sizeof line);
        k += snprintf(line + k, sizeof line - (size_t)k,
                      " - %.0fs %s - loss: %.4f - accuracy: %.4f%s - %.0f "
                      "samples/s", s->seconds, ps, s->loss, s->acc, val, rate);
        redraw(p, line, k < (int)sizeof line ? k : (int)sizeof line - 1, 1);
        return;
    }
    fprintf(p->out, "Epoch %d/%d - %ld/%ld - %.1fs %s - loss: %.4f - "
            "accuracy: %.4f%s - %.0f samples/s\n", s->epoch + 1, p->epochs,
            s->steps, p->target > 0 ? p->target : s->steps, s->seconds, ps,
            s->loss, s->acc, val, rate);
    fflush(p->out);
}
