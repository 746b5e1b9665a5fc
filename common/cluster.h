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
 * *                  "certs": "/run/secrets/hetps", "insecure": false } }
 *
 * A `chief` (or `master`) job of one task becomes worker 0 and the listed
 * workers shift up by one, as TensorFlow's chief is a worker that also does
 * the bookkeeping; a note says so. Identity, highest first: the --task flag,
 * TF_CONFIG's task, the file's task.
 *
 * Resolvers build the same structure from what a scheduler gives a task
 * (cluster_slurm.c: the SLURM_* variables; cluster_k8s.c: a StatefulSet
 * ordinal or an Indexed Job's index); hc_cluster_resolve picks one by the
 * --cluster text: "slurm", "slurm:K", "k8s:FILE", or a file name.
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
    char file[512];         /* the cluster file's path, "" when the cluster
                               came from elsewhere (TF_CONFIG, Slurm): the
                               file a server re-reads when it changes */
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
    int metrics_port;       /* 0: off; else ps:j serves /metrics on its
                               host at metrics_port + j, worker:i at
                               metrics_port + n_ps + i */
    int insecure;           /* "insecure": true — plain TCP, no certificates */
    char certs[512];        /* "certs": certificate directory, "" when unset */

    uint64_t id;            /* cluster id: FNV-1a 64 of what is fixed for
                               the job's life — the ps list, the chief,
                               mode and bounds, insecure — not the other
                               workers (elastic); never 0 (cluster.c) */
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
 * The standard resolution every program uses. `spec` is the --cluster
 * text:
 *   NULL          TF_CONFIG; when TF_CONFIG is unset or empty and
 *                 SLURM_JOB_ID is set, the Slurm resolver (a note says so);
 *                 else an error
 *   "slurm"       the Slurm resolver, hc_cluster_from_slurm (K from
 *   "slurm:K"     HETPS_PS_TASKS, or K given here)
 *   "k8s:FILE"    the cluster file FILE, the task from the pod,
 *                 hc_cluster_from_k8s
 *   anything else a cluster file's path (./slurm reads a file named slurm)
 * Identity: `task_flag` ("worker:1", "ps:0", "chief", "chief:0") when not
 * NULL, else what the resolver says, else TF_CONFIG's task (also when the
 * cluster came from a file), else the file's task. `need_task` makes a
 * missing identity an error.
 */
int hc_cluster_resolve(const char *spec, const char *task_flag, int need_task,
                       struct hc_cluster *out, struct hc_diag *diag);

/* ---- Slurm (cluster_slurm.c) ----------------------------------------- */

#define HC_SLURM_MAX_NODES 65536
#define HC_DEFAULT_PORT 2222

/* Host names of an expanded Slurm host list, in order. */
struct hc_hostlist {
    int n;
    char (*name)[HC_HOST_MAX];  /* (n) */
};

/*
 * Expand a Slurm host list as scontrol does: "node[01-03,07]" ->
 * node01 node02 node03 node07 (the width of a range's first number is kept:
 * "n[009-011]" -> n009 n010 n011), "a[1-2],b5" -> a1 a2 b5, several
 * brackets multiply ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2). `var` names
 * the list in messages ("SLURM_JOB_NODELIST"). HC_OK and *out filled (free
 * with hc_hostlist_free), or HC_ERR_CONFIG with one message in *diag naming
 * `var` and the bad part.
 */
int hc_slurm_hostlist(const char *list, const char *var,
                      struct hc_hostlist *out, struct hc_diag *diag);
void hc_hostlist_free(struct hc_hostlist *h);

/*
 * Expand Slurm's tasks-per-node "3(x2),2,1" into counts[0..n_nodes) =
 * 3 3 2 1; the counts must cover exactly n_nodes nodes. HC_OK, or
 * HC_ERR_CONFIG with a message naming `var` and the bad part.
 */
int hc_slurm_tasks_per_node(const char *spec, const char *var, int n_nodes,
                            int *counts, struct hc_diag *diag);

/*
 * The cluster of a Slurm job step, from the environment srun gives each
 * task: the nodes from SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), the
 * tasks on each from SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE),
 * their number SLURM_NTASKS, this task SLURM_PROCID. Tasks are numbered in
 * Slurm's default block distribution (node 0's tasks first); tasks 0..K-1
 * are the parameter servers, the rest workers 0.. (K = n_ps when > 0, else
 * HETPS_PS_TASKS, else 1). The task with local index L on its node listens
 * on HETPS_BASE_PORT (default 2222) + L, so tasks sharing a node never
 * collide. `want_task` also sets the task from SLURM_PROCID (and checks it
 * against SLURMD_NODENAME). HC_OK, or HC_ERR_CONFIG with messages naming
 * each variable at fault.
 */
int hc_cluster_from_slurm(int n_ps, int want_task, struct hc_cluster *out,
                          struct hc_diag *diag);

/* ---- Kubernetes (cluster_k8s.c) ------------------------------------- */

/*
 * A pod's task from what Kubernetes gives it: the job from HETPS_JOB ("ps"
 * or "worker"), else from the host name NAME-N whose NAME ends in "-ps" or
 * "-worker" (as `hetps k8s` names its StatefulSet and Job); the index from
 * JOB_COMPLETION_INDEX (an Indexed Job), else the N of NAME-N (a
 * StatefulSet's ordinal), plus HETPS_INDEX_OFFSET when set (a second Job
 * whose pods are workers K..). The host name is HOSTNAME, else
 * gethostname().
 * Writes "ps:0"-style text into spec; HC_OK, or HC_ERR_CONFIG with a message
 * naming the variable at fault.
 */
int hc_k8s_task(char *spec, size_t n, struct hc_diag *diag);

/*
 * The cluster file `path` (a ConfigMap's file) with the task of this pod
 * (hc_k8s_task) when `want_task`. HC_OK or HC_ERR_CONFIG.
 */
int hc_cluster_from_k8s(const char *path, int want_task,
                        struct hc_cluster *out, struct hc_diag *diag);

/* What a program's flags say of its place in the job. */
struct hc_task_flags {
    const char *file;   /* --cluster SPEC (hc_cluster_resolve); NULL: TF_CONFIG */
    const char *task;   /* --task JOB:INDEX; NULL: TF_CONFIG's or the file's */
    const char *mode;   /* --mode MODE; NULL: the cluster's hetps.mode */
};

/*
 * The opening every program of a job shares (hetps-ps, hetps-worker,
 * hetps launch). With role HC_JOB_PS or HC_JOB_WORKER: resolve the cluster
 * and the task as hc_cluster_resolve (the task required), and refuse a
 * task of the other role, naming the program to use. With role -1 (hetps
 * launch, every task): read f->file alone, which must not be NULL — no
 * TF_CONFIG, no task. Then apply f->mode as hc_cluster_set_mode.
 * `prog` ("hetps-ps", "hetps launch") opens each message. Prints notes to
 * stderr ("hetps: note: …"). Returns HC_OK with *out filled (free with
 * hc_cluster_free), or HC_ERR_CONFIG after printing every mistake to
 * stderr, *out then holding nothing: the program exits 2.
 */
int hc_cluster_open(const char *prog, int role, const struct hc_task_flags *f,
                    struct hc_cluster *out);

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

/* NULL when a and b have the same cluster id, else the part of their
 * definitions that differs: "the list of parameter servers", "the chief
 * (worker 0)", "\"insecure\"" or "the mode or its bounds". */
const char *hc_cluster_differs(const struct hc_cluster *a,
                               const struct hc_cluster *b);

/* Print the resolved cluster, human-readable, as `hetps check-config` does. */
void hc_cluster_print(const struct hc_cluster *c, FILE *f);

/* Print the diagnostics, one "hetps: …" line each, to f. */
void hc_diag_print(const struct hc_diag *d, FILE *f);

const char *hc_job_name(enum hc_job job);   /* "ps", "worker" */
const char *hc_mode_name(enum hc_mode mode); /* "async", "sync", "ssp" */

#endif
