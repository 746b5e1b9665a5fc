/*
 * watch_hooks.c — the cost of a worker's reports per training step, alone:
 * wk_watch_step with everything on (a metrics registry with its series,
 * the progress lines going to /dev/null, a TensorBoard event per step in
 * a temporary log directory) called N times, against a step of the
 * reference job (printed by `make bench`'s step line: ~5 ms at batch 64).
 *
 *   build/rel/bench/watch_hooks [N]     (default 200000)
 */
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "err.h"
#include "metrics.h"
#include "worker/watch.h"

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000, i;
    char dir[] = "/tmp/hetps-watch-bench-XXXXXX";
    struct hc_metrics *m = NULL;
    struct wk_watch w;
    struct wk_watch_conf c = { .worker = 0, .n_workers = 2, .epochs = 1,
                               .verbose = 1, .tty = 0,
                               .progress_interval_s = 5 };
    double t0, dt;
    char cmd[64];

    if (!mkdtemp(dir) || hc_metrics_new(&m) != HC_OK)
        return 1;
    c.metrics = m;
    c.logdir = dir;
    if (!freopen("/dev/null", "w", stdout))
        return 1;
    if (wk_watch_open(&w, &c) != HC_OK) {
        fprintf(stderr, "%s\n", hc_err_msg());
        return 1;
    }
    wk_watch_begin(&w, 0, n, hc_now_s());
    t0 = hc_now_s();
    for (i = 1; i <= n; i++)
        wk_watch_step(&w, i, 64, 0.5, 50, 0.004, 0.001, hc_now_s());
    dt = hc_now_s() - t0;
    wk_watch_close(&w);
    hc_metrics_free(m);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    fprintf(stderr, "watch hooks: %ld steps in %.3f s: %.2f us per step "
            "(%.3f %% of a 5 ms step)\n", n, dt, 1e6 * dt / (double)n,
            100 * (dt / (double)n) / 0.005);
    return 0;
}
