/*
 * cluster.h — the cluster definition: TensorFlow's ClusterSpec JSON, from a
 * cluster file or the TF_CONFIG variable, plus hetps's own block beside it.
 *
 *   { "cluster": { "ps": ["h:2222", …], "worker": ["h:2223", …],
 *                  "chief": ["h:2224"] },              (chief/master optional)
 *     "task":    { "type": "worker", "index": 0 },     (optional; index may
 *                                                       be a number or string)
 *     "hetps":   { "workers": [ {"devices": "gpu:0,gpu:1"}, {"devices": "cpu"} ],
 *                  "mode": "sync" | "async" | "ssp:3", "backup_workers": 1,
 *                  "token_file": "/run/secrets/hetps.token",
 *                  "certs": "/run/secrets/hetps", "insecure": false } }
 *
 * A `chief` (or `master`) job of one task becomes worker 0 and the listed
 * workers shift up by one, as TensorFlow's chief is a worker that also does
 * the bookkeeping; a note says so. Identity, highest first: the --task flag,
 * TF_CONFIG's task, the file's task.
 *
 * Every mistake is reported as one line "SOURCE: KEY: what is wrong; fix",
 * collected in an hc_diag, before any socket is opened. Nothing here touches
 * the network.
 */
#ifndef HC_CLUSTER_H
#define HC_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HC_HOST_MAX 256
#define HC_MAX_TASKS 4096   /* per job */
#define HC_DIAG_MAX 32      /* messages kept per parse */

enum hc_job { HC_JOB_PS = 0, HC_JOB_WORKER = 1 };

enum hc_mode { HC_MODE_ASYNC = 0, HC_MODE_SYNC = 1, HC_MODE_SSP = 2 };

struct hc_task_addr {
    char host[HC_HOST_MAX]; /* "ps0", "127.0.0.1", "::1" (no brackets) */
    int port;               /* 1..65535 */
    char addr[HC_HOST_MAX + 8]; /* as written: "ps0:2222", "[::1]:2222" */
    char url[HC_HOST_MAX + 16]; /* nng URL: "tcp://ps0:2222" */
};

struct hc_worker_conf {
    char devices[128];      /* "cpu", "gpu:0,gpu:1", "auto" (default) */
};

struct hc_cluster {
    char source[512];       /* "cluster file deploy/x.json" or "TF_CONFIG" */
    int n_ps;
    struct hc_task_addr *ps;          /* (n_ps) */
    int n_worker;
    struct hc_task_addr *worker;      /* (n_worker), chief first if mapped */
    struct hc_worker_conf *wconf;     /* (n_worker) */
    int chief_mapped;       /* 1 when a chief/master job became worker 0 */

    int has_task;           /* identity resolved */
    enum hc_job task_job;
    int task_index;

    enum hc_mode mode;      /* default async */
    int staleness;          /* ssp bound S, when mode is SSP */
    int backup_workers;     /* sync: apply after n_worker - backup gradients */
    char token_file[512];   /* "" when none */
    int insecure;           /* "insecure": true — plain TCP, no certificates */
    char certs[512];        /* "certs": certificate directory, "" when unset */

    uint64_t id;            /* cluster id: FNV-1a 64 of the ps address list,
                               the part that fixes sharding; never 0 */
};

/* Diagnostics of one parse: each entry a full sentence. */
struct hc_diag {
    int n;                  /* messages recorded (may exceed HC_DIAG_MAX) */
    char msg[HC_DIAG_MAX][512];
    char note[4][256];      /* informational notes (chief mapping …) */
    int n_note;
};

/*
 * Parse a cluster definition from JSON text. `source` names it in messages
 * ("cluster file F" / "TF_CONFIG"). On success fills *out (free with
 * hc_cluster_free) and returns HC_OK; on any mistake returns HC_ERR_CONFIG
 * with every problem found in *diag and *out zeroed.
 */
int hc_cluster_parse(const char *json, size_t len, const char *source,
                     struct hc_cluster *out, struct hc_diag *diag);

/* Read and parse a cluster file (HC_ERR_CONFIG also for unreadable files). */
int hc_cluster_load_file(const char *path, struct hc_cluster *out,
                         struct hc_diag *diag);

/*
 * The standard resolution every program uses: the cluster from `file` when
 * not NULL, else from TF_CONFIG (an error when unset or empty); identity
 * from `task_flag` ("worker:1", "ps:0", "chief", "chief:0") when not NULL,
 * else TF_CONFIG's task (also when the cluster came from a file), else the
 * file's task. `need_task` makes a missing identity an error.
 */
int hc_cluster_resolve(const char *file, const char *task_flag, int need_task,
                       struct hc_cluster *out, struct hc_diag *diag);

/* Apply a "job:index" task spec to a parsed cluster (checked for range). */
int hc_cluster_set_task(struct hc_cluster *c, const char *spec,
                        const char *source, struct hc_diag *diag);

/* Override the cluster file's mode with a --mode flag's text: "async",
 * "sync" or "ssp:S". Returns HC_OK, or HC_ERR_INVAL with a message naming
 * `source` (e.g. "--mode") and the valid spellings. Every task of a job
 * must run the same mode: workers check the shards' at join. */
int hc_cluster_set_mode(struct hc_cluster *c, const char *text,
                        const char *source);

void hc_cluster_free(struct hc_cluster *c);

/* Print the resolved cluster, human-readable, as `hetps check-config` does. */
void hc_cluster_print(const struct hc_cluster *c, FILE *f);

/* Print the diagnostics, one "hetps: …" line each, to f. */
void hc_diag_print(const struct hc_diag *d, FILE *f);

const char *hc_job_name(enum hc_job job);   /* "ps", "worker" */
const char *hc_mode_name(enum hc_mode mode); /* "async", "sync", "ssp" */

#endif
