/*
 * device.c — parsing and opening a worker's device list, and the backend
 * registry: which backends this build has and how to open one. A CUDA
 * backend plugs in here (wk_backend_cuda_available, wk_backend_open) under
 * #ifdef HETPS_CUDA, the only such #ifdef outside the Makefile; the rest
 * of the worker sees struct wk_backend only.
 */
#include "device.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend_cuda.h"
#include "err.h"

#define MAX_INDEX 999

/* ---- the backend registry ---- */

#ifdef HETPS_CUDA
#define HAVE_CUDA 1
int wk_backend_cuda_available(void)
{
    return wk_cuda_device_count();
}
#else
/* No CUDA backend in this build: nothing of backend_cuda.h is linked, and
 * every call to it below sits behind HAVE_CUDA, which the compiler folds. */
#define HAVE_CUDA 0
#define wk_cuda_device_info(d, n, l, m, a, b) HC_ERR_UNSUPPORTED
#define wk_backend_cuda_new(d, o) HC_ERR_UNSUPPORTED
#define wk_cuda_host_alloc(n) NULL
#define wk_cuda_host_pinned(p) ((void)(p), 0)
#define wk_cuda_host_free(p) ((void)(p))

int wk_backend_cuda_available(void)
{
    return 0;
}
#endif

int wk_backend_open(const struct wk_device *d, int blas_threads,
                    struct wk_backend **out)
{
    int rv, n_gpu;

    *out = NULL;
    if (d->kind == WK_DEV_CPU) {
        if ((rv = wk_backend_cpu_new(blas_threads, out)))
            return rv;
        snprintf((*out)->name, sizeof (*out)->name, "%s", d->name);
        return HC_OK;
    }
    if (!HAVE_CUDA)
        return hc_err_set(HC_ERR_UNSUPPORTED,
                          "%s: this build has no CUDA backend (nvcc not found "
                          "at build time) — use cpu", d->name);
    n_gpu = wk_backend_cuda_available();
    if (n_gpu == 0)
        return hc_err_set(HC_ERR_UNSUPPORTED,
                          "%s: this machine has no CUDA device — use cpu",
                          d->name);
    if (d->index >= n_gpu)
        return hc_err_set(HC_ERR_UNSUPPORTED,
                          "%s: this machine has %d CUDA device%s (gpu:0 to "
                          "gpu:%d)", d->name, n_gpu, n_gpu == 1 ? "" : "s",
                          n_gpu - 1);
    if ((rv = wk_backend_cuda_new(d->index, out)))
        return rv;
    snprintf((*out)->name, sizeof (*out)->name, "%s", d->name);
    return HC_OK;
}

void wk_devices_list(FILE *f)
{
    char name[128];
    size_t mem;
    int n_gpu = wk_backend_cuda_available(), i, major, minor;

    fprintf(f, "cpu:0  CPU, OpenBLAS (cpu:N are logical devices sharing its "
               "cores)\n");
    if (!HAVE_CUDA) {
        fprintf(f, "no GPU: this build has no CUDA backend (nvcc not found "
                   "at build time)\n");
        return;
    }
    if (n_gpu == 0) {
        fprintf(f, "no CUDA device found: using the CPU\n");
        return;
    }
    for (i = 0; i < n_gpu; i++) {
        if (wk_cuda_device_info(i, name, sizeof name, &mem, &major, &minor)) {
            fprintf(f, "gpu:%d  %s\n", i, hc_err_msg());
            continue;
        }
        fprintf(f, "gpu:%d  %s, %.1f GiB, compute capability %d.%d\n", i,
                name, (double)mem / (1024.0 * 1024.0 * 1024.0), major, minor);
    }
}

/* ---- parsing ---- */

/* Parse one name (not "auto") of length n at s into d. Returns 0, or −1
 * for an unknown kind, −2 for a bad index. */
static int parse_name(const char *s, size_t n, struct wk_device *d)
{
    size_t i;
    int index = 0;

    if (n < 3)
        return -1;
    if (strncasecmp(s, "cpu", 3) == 0)
        d->kind = WK_DEV_CPU;
    else if (strncasecmp(s, "gpu", 3) == 0)
        d->kind = WK_DEV_GPU;
    else
        return -1;
    if (n > 3) {
        if (s[3] != ':')
            return -1;
        if (n == 4 || n > 7)
            return -2;
        for (i = 4; i < n; i++) {
            if (!isdigit((unsigned char)s[i]))
                return -2;
            index = index * 10 + (s[i] - '0');
        }
    }
    d->index = index;
    snprintf(d->name, sizeof d->name, "%s:%d",
             d->kind == WK_DEV_CPU ? "cpu" : "gpu", index);
    d->be = NULL;
    return 0;
}

/* The entries of "auto": every GPU, else one CPU. */
static void parse_auto(struct wk_devices *out)
{
    int n_gpu = wk_backend_cuda_available(), i;

    if (n_gpu > WK_MAX_DEVICES)
        n_gpu = WK_MAX_DEVICES;
    if (n_gpu < 1) {
        parse_name("cpu", 3, &out->dev[0]);
        out->n = 1;
        return;
    }
    for (i = 0; i < n_gpu; i++) {
        out->dev[i].kind = WK_DEV_GPU;
        out->dev[i].index = i;
        out->dev[i].be = NULL;
        snprintf(out->dev[i].name, sizeof out->dev[i].name, "gpu:%d", i);
    }
    out->n = n_gpu;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

int wk_devices_parse(const char *list, struct wk_devices *out)
{
    const char *p, *end, *s, *e;
    int count = 0, i, rv;

    memset(out, 0, sizeof *out);
    if (!list)
        return hc_err_set(HC_ERR_INVAL, "device list is missing (NULL)");
    for (p = list; is_blank(*p); p++)
        ;
    if (!*p)
        return hc_err_set(HC_ERR_INVAL,
                          "device list \"%.200s\" is empty; give devices "
                          "like \"cpu\", \"cpu:0,cpu:1\" or \"auto\"", list);
    for (p = list;; p = end + 1) {
        struct wk_device d;

        end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        count++;
        for (s = p; s < end && is_blank(*s); s++)
            ;
        for (e = end; e > s && is_blank(e[-1]); e--)
            ;
        if (s == e)
            return hc_err_set(HC_ERR_INVAL,
                              "device list \"%.200s\": entry %d is empty",
                              list, count);
        if (e - s == 4 && strncasecmp(s, "auto", 4) == 0) {
            if (count > 1 || *end)
                return hc_err_set(HC_ERR_INVAL,
                                  "device list \"%.200s\": \"auto\" must be "
                                  "the only entry", list);
            parse_auto(out);
            return HC_OK;
        }
        if ((rv = parse_name(s, (size_t)(e - s), &d)) == -1)
            return hc_err_set(HC_ERR_INVAL,
                              "device list \"%.200s\": unknown device "
                              "\"%.*s\"; use cpu, cpu:N, gpu:N or auto", list,
                              (int)(e - s > 40 ? 40 : e - s), s);
        if (rv == -2)
            return hc_err_set(HC_ERR_INVAL,
                              "device list \"%.200s\": \"%.*s\" has a bad "
                              "index; use a number from 0 to %d, as in "
                              "\"cpu:1\"", list,
                              (int)(e - s > 40 ? 40 : e - s), s, MAX_INDEX);
        for (i = 0; i < out->n; i++)
            if (strcmp(out->dev[i].name, d.name) == 0)
                return hc_err_set(HC_ERR_INVAL,
                                  "device list \"%.200s\": %s is given twice",
                                  list, d.name);
        if (out->n == WK_MAX_DEVICES)
            return hc_err_set(HC_ERR_LIMIT,
                              "device list \"%.200s\": more than %d devices",
                              list, WK_MAX_DEVICES);
        out->dev[out->n++] = d;
        if (!*end)
            break;
    }
    return HC_OK;
}

/* ---- opening ---- */

int wk_devices_open(const char *list, int blas_threads,
                    struct wk_devices *out)
{
    int i, rv;

    if ((rv = wk_devices_parse(list, out)))
        goto fail;
    if (blas_threads < 0) {
        rv = hc_err_set(HC_ERR_INVAL,
                        "devices \"%.200s\": %d BLAS threads; use 1 or more "
                        "(0 means 1)", list, blas_threads);
        goto fail;
    }
    for (i = 0; i < out->n; i++)
        if ((rv = wk_backend_open(&out->dev[i], blas_threads,
                                  &out->dev[i].be)))
            goto fail;
    return HC_OK;
fail:
    wk_devices_close(out);
    return rv;
}

void wk_devices_close(struct wk_devices *devs)
{
    int i;

    for (i = 0; i < devs->n && i < WK_MAX_DEVICES; i++) {
        wk_backend_free(devs->dev[i].be);
        devs->dev[i].be = NULL;
    }
    devs->n = 0;
}

int wk_devices_find(const struct wk_devices *devs, const char *name)
{
    struct wk_device d;
    size_t n;
    int i;

    if (!name)
        return -1;
    n = strlen(name);
    if (parse_name(name, n, &d))
        return -1;
    for (i = 0; i < devs->n; i++)
        if (strcmp(devs->dev[i].name, d.name) == 0)
            return i;
    return -1;
}

const char *wk_devices_str(const struct wk_devices *devs, char *buf,
                           size_t len)
{
    size_t used = 0;
    int i, k;

    if (!len)
        return buf;
    buf[0] = '\0';
    for (i = 0; i < devs->n; i++) {
        k = snprintf(buf + used, len - used, "%s%s", i ? "," : "",
                     devs->dev[i].name);
        if (k < 0 || (size_t)k >= len - used)
            break;
        used += (size_t)k;
    }
    return buf;
}

void *wk_devices_host_alloc(const struct wk_devices *devs, size_t bytes)
{
    void *p = NULL;
    int i;

    for (i = 0; HAVE_CUDA && devs && i < devs->n && !p; i++)
        if (devs->dev[i].kind == WK_DEV_GPU)
            p = wk_cuda_host_alloc(bytes);
    return p ? p : malloc(bytes);
}

int wk_devices_host_pinned(const void *p)
{
    return HAVE_CUDA && wk_cuda_host_pinned(p);
}

void wk_devices_host_free(void *p)
{
    if (wk_devices_host_pinned(p))
        wk_cuda_host_free(p);
    else
        free(p);
}
