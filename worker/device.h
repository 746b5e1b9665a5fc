/*
 * device.h — a worker's devices: the list it is given ("cpu:0,cpu:1",
 * "gpu:0,gpu:1", "auto") parsed and opened, one backend per device.
 *
 * Names are "cpu:N" or "gpu:N"; "cpu" and "gpu" alone mean index 0. Case
 * does not matter and names are stored lower-case. A CPU index is a label
 * (cpu:0 and cpu:1 are two logical devices sharing the machine's cores,
 * each with its own backend); a GPU index is a CUDA device number.
 *
 * "auto" stands alone and means every GPU when the build has a CUDA
 * backend and the machine has GPUs, else "cpu".
 *
 * device.c is also the backend registry: the one place that knows which
 * backends this build has (the only #ifdef HETPS_CUDA outside the
 * Makefile goes there).
 */
#ifndef WK_DEVICE_H
#define WK_DEVICE_H

#include <stdio.h>

#include "backend.h"

#define WK_MAX_DEVICES 16

enum wk_device_kind { WK_DEV_CPU, WK_DEV_GPU };

struct wk_device {
    char name[16];              /* "cpu:1", "gpu:0" */
    enum wk_device_kind kind;
    int index;                  /* N of the name */
    struct wk_backend *be;      /* owned; NULL after wk_devices_parse */
};

struct wk_devices {
    int n;                      /* 1 to WK_MAX_DEVICES once parsed */
    struct wk_device dev[WK_MAX_DEVICES];
};

/*
 * Parse a device list (comma-separated names; blanks around names are
 * ignored) into out without opening anything: every be is NULL. Resolves
 * "auto" with wk_backend_cuda_available(). Errors, each with a message
 * naming the list and the offending entry: HC_ERR_INVAL for NULL or an
 * empty list, an empty entry ("cpu:0,,cpu:1"), an unknown name, a bad
 * index (not a number, negative, over 999), a name given twice ("cpu" and
 * "cpu:0" are the same device), "auto" mixed with other names;
 * HC_ERR_LIMIT for more than WK_MAX_DEVICES devices.
 */
int wk_devices_parse(const char *list, struct wk_devices *out);

/*
 * Parse the list and open a backend for each device. Each CPU device gets
 * its own CPU backend with blas_threads OpenBLAS threads (0 means 1; with
 * several CPU devices keep 1: the setting is process-wide, see
 * wk_backend_cpu_new). Errors as wk_devices_parse, HC_ERR_UNSUPPORTED for
 * a GPU in a build without a CUDA backend ("gpu:0: this build has no CUDA
 * backend …") or a GPU index the machine does not have, HC_ERR_INVAL for
 * blas_threads < 0, HC_ERR_NOMEM, a device error. On error nothing stays
 * open and out->n is 0. Close with wk_devices_close.
 */
int wk_devices_open(const char *list, int blas_threads,
                    struct wk_devices *out);

/* Free every backend (their buffers must be freed first) and set n to 0.
 * Safe on a zeroed or already closed struct. */
void wk_devices_close(struct wk_devices *devs);

/* Index in devs of the device called name ("cpu:1"; "cpu" = "cpu:0"; any
 * case), or -1 when devs has no such device or name is malformed. */
int wk_devices_find(const struct wk_devices *devs, const char *name);

/* The list as text, "cpu:0,cpu:1", for messages (truncated to len). */
const char *wk_devices_str(const struct wk_devices *devs, char *buf,
                           size_t len);

/* ---- the backend registry ---- */

/* Number of CUDA devices usable by this build: 0 in a build without the
 * CUDA backend (no HETPS_CUDA) or on a machine without GPUs or driver. */
int wk_backend_cuda_available(void);

/* Open the backend of device d (kind and index set); blas_threads as
 * wk_devices_open. HC_ERR_UNSUPPORTED when this build or machine has no
 * such device. */
int wk_backend_open(const struct wk_device *d, int blas_threads,
                    struct wk_backend **out);

/*
 * Host memory for what moves between the host and devs's devices (the
 * parameters uploaded each step, the gradients downloaded): page-locked
 * when devs has a GPU, so that the copies run at the bus's speed (an 80 MB
 * upload on an H200: 1.5 ms pinned, 4.6 ms pageable), else plain malloc —
 * also when the GPU's driver refuses to lock it (the copies stay right,
 * through the backend's staging buffer, only slower). Not zeroed. NULL when
 * out of memory. Free with wk_devices_host_free.
 */
void *wk_devices_host_alloc(const struct wk_devices *devs, size_t bytes);

/* Free memory of wk_devices_host_alloc, whichever kind it got; NULL is
 * ignored. */
void wk_devices_host_free(void *p);

/* 1 when p is page-locked host memory (wk_devices_host_alloc's on a GPU),
 * 0 for plain host memory, NULL, or a build without CUDA. */
int wk_devices_host_pinned(const void *p);

/* Print the devices this build and machine have, one a line: the CPU, then
 * each GPU (name, memory, compute capability) or why there is none. */
void wk_devices_list(FILE *f);

#endif
