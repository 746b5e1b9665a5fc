/*
 * ps.c — the parameter server under load, against the transport it runs
 * on (part of `make bench`).
 *
 *   ps [--sizes LIST] [--shards LIST] [--clients LIST] [--secs S]
 *      [--ps BIN] [--max-flight MIB] [--durability LEVEL] [--full]
 *      [--transport tls|plain] [--lanes N] [--part-size MIB]
 *
 * For each tensor size and number of shards it starts real hetps-ps
 * processes (async mode, Adam, LMDB stores in a fresh temporary
 * directory, durability `process` unless --durability machine; mutual
 * TLS with certificates made there, as hetps's default, or plain TCP with
 * --transport plain),
 * registers one variable of that size and then runs synthetic clients — threads, each its own pc_client as
 * its own worker task — that push a gradient and pull the new values
 * (pc_async_step, one round trip) as fast as they can, without computing.
 * In the same run, with the same bytes to the same number of servers and
 * the same number of concurrent requesters, it times raw nng REQ/REP
 * (forked servers answering from several contexts) and raw TCP (forked
 * echo servers, one thread per connection). A pc_client has one request
 * in flight, so "8 in flight" is 8 clients.
 *
 * One line per configuration: round trips per second over all clients,
 * the mean time of one, and tensor bytes per second (size × round trips/s,
 * one way, as ps-lite's figures count them); then hetps as a fraction of
 * raw nng. Then, when at least 3 clients are asked for, a "pull" line: a
 * pull's time with the shards idle, and while 2 other clients
 * push-and-pull as fast as they can (their commits must not add to it).
 * Sizes take K (KiB), M (MiB) or MB (10^6 bytes) suffixes.
 * Configurations whose clients would have more than --max-flight MiB of
 * tensors in flight together are skipped with a line saying so. Each
 * client makes at least two timed calls, so slow rows still measure. Servers are stopped by pid; temporary
 * directories are removed.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "worker/client.h"
#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "model.h"
#include "tls_cert.h"
#include "tune.h"

#define MAX_LIST 16
#define MAX_SHARDS 8
#define MAX_CLIENTS 64
#define RAW_CTX 16              /* contexts of one raw nng server */
#define MIN_CALLS 2             /* timed calls per client at least */
#define WARMUP 3                /* untimed calls first: connections, pages,
                                   the store file's copy-on-write growth */

struct list {
    int n;
    uint64_t v[MAX_LIST];
};

static double secs = 0.5;
static uint64_t mem_limit = 256ull << 20; /* client bytes in flight */
static int base_port;
static const char *durability = "process";  /* hetps-ps --durability */
static int plain;           /* --transport plain: "insecure": true */
static int lanes;           /* --lanes (0: the client's default) */
static uint64_t part_bytes; /* --part-size MiB (0: the client's default) */

static void die(const char *what, const char *why)
{
    fprintf(stderr, "ps bench: %s: %s\n", what, why);
    exit(1);
}

/* "1K,64K,1M,16M,80MB" or "1,2,4" into l; sizes allow suffixes. */
static void parse_list(const char *flag, const char *s, struct list *l)
{
    char *copy = strdup(s), *tok, *save = NULL;

    l->n = 0;
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long long x = strtoull(tok, &end, 10);

        if (!strcmp(end, "K"))
            x <<= 10;
        else if (!strcmp(end, "M"))
            x <<= 20;
        else if (!strcmp(end, "MB"))
            x *= 1000000ull;
        else if (*end || end == tok)
            x = 0;
        if (x == 0 || l->n == MAX_LIST) {
            fprintf(stderr, "ps bench: %s: '%s' is not a list of up to %d "
                    "positive numbers (sizes: K, M or MB suffix)\n", flag, s,
                    MAX_LIST);
            exit(2);
        }
        l->v[l->n++] = x;
    }
    free(copy);
}

static const char *fmt_size(uint64_t b, char *buf, size_t cap)
{
    if (b % (1u << 20) == 0)
        snprintf(buf, cap, "%llu MiB", (unsigned long long)(b >> 20));
    else if (b % 1000000 == 0)
        snprintf(buf, cap, "%llu MB", (unsigned long long)(b / 1000000));
    else if (b % 1024 == 0)
        snprintf(buf, cap, "%llu KiB", (unsigned long long)(b >> 10));
    else
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
    return buf;
}

/* ---- one timed run: n threads calling `call` for `secs` ---------------- */

struct runner {
    void *(*setup)(void *conf, int i);     /* per thread; NULL: failed */
    int (*call)(void *st);                  /* one round trip; 0 = ok */
    void (*teardown)(void *st);
    void *conf;
    int n;
    pthread_barrier_t start;
    atomic_int stop, failed;
    double t0, t1;
    uint64_t calls[MAX_CLIENTS];
};

struct worker_arg {
    struct runner *r;
    int i;
};

static void *run_thread(void *p)
{
    struct worker_arg *a = p;
    struct runner *r = a->r;
    void *st = r->setup(r->conf, a->i);
    uint64_t n = 0;

    if (!st)
        atomic_store(&r->failed, 1);
    for (int w = 0; st && w < WARMUP && !atomic_load(&r->failed); w++)
        if (r->call(st) != 0)
            atomic_store(&r->failed, 1);
    pthread_barrier_wait(&r->start);
    /* At least MIN_CALLS each, so a slow configuration still measures. */
    while (st && !atomic_load(&r->failed) &&
           (!atomic_load(&r->stop) || n < MIN_CALLS)) {
        if (r->call(st) != 0) {
            atomic_store(&r->failed, 1);
            break;
        }
        n++;
    }
    r->calls[a->i] = n;
    if (st)
        r->teardown(st);
    return NULL;
}

/* Round trips per second over all threads; -1 when a call failed. */
static double run_timed(struct runner *r)
{
    pthread_t th[MAX_CLIENTS];
    struct worker_arg args[MAX_CLIENTS];
    uint64_t total = 0;
    double t0, t1;
    int i;

    atomic_store(&r->stop, 0);
    atomic_store(&r->failed, 0);
    pthread_barrier_init(&r->start, NULL, (unsigned)r->n + 1);
    for (i = 0; i < r->n; i++) {
        args[i].r = r;
        args[i].i = i;
        if (pthread_create(&th[i], NULL, run_thread, &args[i]) != 0)
            die("pthread_create", strerror(errno));
    }
    pthread_barrier_wait(&r->start);
    t0 = hc_now_s();
    while (hc_now_s() - t0 < secs && !atomic_load(&r->failed))
        hc_sleep_s(0.01);
    atomic_store(&r->stop, 1);
    for (i = 0; i < r->n; i++)
        pthread_join(th[i], NULL);
    t1 = hc_now_s();
    pthread_barrier_destroy(&r->start);
    for (i = 0; i < r->n; i++)
        total += r->calls[i];
    if (atomic_load(&r->failed))
        return -1;
    /* Calls still running when the time was up finish after it: count
     * the time to the last thread's end. */
    return (double)total / (t1 - t0);
}

/* ---- raw nng: REQ/REP with the same bytes ------------------------------ */

struct raw_ctx_arg {
    nng_socket s;
};

static void *raw_ctx_loop(void *p)
{
    struct raw_ctx_arg *a = p;
    nng_ctx ctx;

    if (nng_ctx_open(&ctx, a->s) != 0)
        return NULL;
    for (;;) {
        nng_aio *aio;
        nng_msg *m;

        if (nng_aio_alloc(&aio, NULL, NULL) != 0)
            return NULL;
        nng_ctx_recv(ctx, aio);
        nng_aio_wait(aio);
        if (nng_aio_result(aio) != 0) {
            nng_aio_free(aio);
            return NULL;
        }
        m = nng_aio_get_msg(aio);
        /* The answer is as long as the request (pull = push bytes). */
        nng_aio_set_msg(aio, m);
        nng_ctx_send(ctx, aio);
        nng_aio_wait(aio);
        if (nng_aio_result(aio) != 0)
            nng_msg_free(m);
        nng_aio_free(aio);
    }
}

static void raw_nng_server(int port)
{
    struct raw_ctx_arg a;
    pthread_t th[RAW_CTX];
    char url[64];
    int i;

    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    if (nng_rep0_open(&a.s) || nng_setopt_size(a.s, NNG_OPT_RECVMAXSZ, 0) ||
        nng_listen(a.s, url, NULL, 0))
        die(url, "raw nng server cannot listen");
    for (i = 0; i < RAW_CTX; i++)
        pthread_create(&th[i], NULL, raw_ctx_loop, &a);
    for (;;)
        pause();
}

struct raw_conf {
    int n_srv, port;
    size_t bytes;               /* to each server */
};

struct raw_st {
    const struct raw_conf *c;
    nng_socket s[MAX_SHARDS];
};

static void *raw_setup(void *conf, int i)
{
    struct raw_st *st = calloc(1, sizeof *st);
    int k;

    (void)i;
    st->c = conf;
    for (k = 0; k < st->c->n_srv; k++) {
        char url[64];

        snprintf(url, sizeof url, "tcp://127.0.0.1:%d", st->c->port + k);
        if (nng_req0_open(&st->s[k]) ||
            nng_setopt_size(st->s[k], NNG_OPT_RECVMAXSZ, 0) ||
            nng_setopt_ms(st->s[k], NNG_OPT_REQ_RESENDTIME,
                          NNG_DURATION_INFINITE) ||
            nng_dial(st->s[k], url, NULL, 0)) {
            free(st);
            return NULL;
        }
    }
    return st;
}

static int raw_call(void *p)
{
    struct raw_st *st = p;
    int k;

    for (k = 0; k < st->c->n_srv; k++) {
        nng_msg *m;

        if (nng_msg_alloc(&m, st->c->bytes))
            return -1;
        memset(nng_msg_body(m), 1, st->c->bytes);
        if (nng_sendmsg(st->s[k], m, 0)) {
            nng_msg_free(m);
            return -1;
        }
    }
    for (k = 0; k < st->c->n_srv; k++) {
        nng_msg *m;

        if (nng_recvmsg(st->s[k], &m, 0))
            return -1;
        nng_msg_free(m);
    }
    return 0;
}

static void raw_teardown(void *p)
{
    struct raw_st *st = p;
    int k;

    for (k = 0; k < st->c->n_srv; k++)
        nng_close(st->s[k]);
    free(st);
}

/* ---- raw TCP: length-prefixed echo ------------------------------------- */

static int full_io(int fd, void *buf, size_t n, int wr)
{
    unsigned char *p = buf;

    while (n) {
        ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);

        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static void *tcp_conn(void *p)
{
    int fd = (int)(intptr_t)p;
    unsigned char *buf = NULL;
    size_t cap = 0;
    uint64_t len;

    while (full_io(fd, &len, sizeof len, 0) == 0) {
        if (len > cap) {
            free(buf);
            cap = len;
            if (!(buf = malloc(cap)))
                break;
        }
        if (full_io(fd, buf, len, 0) || full_io(fd, buf, len, 1))
            break;
    }
    free(buf);
    close(fd);
    return NULL;
}

static void tcp_server(int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 64))
        die("raw tcp server", strerror(errno));
    for (;;) {
        pthread_t th;
        int fd = accept(l, NULL, NULL);

        if (fd < 0)
            continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_create(&th, NULL, tcp_conn, (void *)(intptr_t)fd);
        pthread_detach(th);
    }
}

struct tcp_st {
    const struct raw_conf *c;
    int fd[MAX_SHARDS];
    unsigned char *buf;
};

static void *tcp_setup(void *conf, int i)
{
    struct tcp_st *st = calloc(1, sizeof *st);
    int k, one = 1;

    (void)i;
    st->c = conf;
    st->buf = malloc(st->c->bytes);
    memset(st->buf, 1, st->c->bytes);
    for (k = 0; k < st->c->n_srv; k++) {
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)(st->c->port + k)) };

        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        st->fd[k] = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(st->fd[k], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(st->fd[k], (struct sockaddr *)&a, sizeof a) != 0)
            return NULL;
    }
    return st;
}

static int tcp_call(void *p)
{
    struct tcp_st *st = p;
    uint64_t len = st->c->bytes;
    int k;

    for (k = 0; k < st->c->n_srv; k++)
        if (full_io(st->fd[k], &len, sizeof len, 1) ||
            full_io(st->fd[k], st->buf, st->c->bytes, 1))
            return -1;
    for (k = 0; k < st->c->n_srv; k++)
        if (full_io(st->fd[k], st->buf, st->c->bytes, 0))
            return -1;
    return 0;
}

static void tcp_teardown(void *p)
{
    struct tcp_st *st = p;
    int k;

    for (k = 0; k < st->c->n_srv; k++)
        close(st->fd[k]);
    free(st->buf);
    free(st);
}

/* ---- hetps: real shards ------------------------------------------------ */

struct hp_conf {
    struct hc_cluster cl;
    struct hc_model m;
};

struct hp_st {
    const struct hp_conf *c;
    struct pc_client *pc;
    float *grads, *params;  /* (n_params) */
    uint64_t version, clock;
};

static void *hp_setup(void *conf, int i)
{
    struct hp_st *st = calloc(1, sizeof *st);
    size_t n;

    st->c = conf;
    n = st->c->m.n_params;
    st->grads = malloc(n * sizeof(float));
    st->params = malloc(n * sizeof(float));
    if (!st->grads || !st->params)
        goto fail;
    for (size_t k = 0; k < n; k++)
        st->grads[k] = 1e-3f * (float)((k % 7) + 1);
    /* Long attempts: a shard serving many large pushes one after another
     * answers late; the benchmark measures that, it does not re-send. */
    struct pc_opts po = { .timeout_ms = 600000, .retry_ms = 1200000,
                          .lanes = lanes, .part_bytes = part_bytes };

    if (pc_open(&st->pc, &st->c->cl, HC_JOB_WORKER, i, &po) != HC_OK ||
        pc_join(st->pc, "bench") != HC_OK ||
        pc_set_model(st->pc, &st->c->m, 0) != HC_OK)
        goto fail;
    return st;
fail:
    fprintf(stderr, "ps bench: client %d: %s\n", i, hc_err_msg());
    if (st->pc)
        pc_close(st->pc);
    free(st->grads);
    free(st->params);
    free(st);
    return NULL;
}

static int hp_call(void *p)
{
    struct hp_st *st = p;
    struct pc_grad g = { .data = st->grads, .samples = 64,
                         .base_version = st->version, .samples_per_s = 1000.0f };
    struct pc_step s = { 0 };
    int rv;

    s.clock = st->clock;
    rv = pc_async_step(st->pc, &g, st->params, &s);
    if (rv != HC_OK) {
        fprintf(stderr, "ps bench: push-and-pull: %s\n", hc_err_msg());
        return -1;
    }
    st->version = s.version;
    st->clock++;
    return 0;
}

static void hp_teardown(void *p)
{
    struct hp_st *st = p;

    pc_leave(st->pc);
    pc_close(st->pc);
    free(st->grads);
    free(st->params);
    free(st);
}

/* ---- a pull's latency while other clients' pushes commit ------------- */

struct pusher {
    struct hp_conf *hc;
    int i;
    atomic_int *stop;
    double busy;                /* seconds in push-and-pull */
    uint64_t n;
    int failed;
};

static void *pusher_loop(void *p)
{
    struct pusher *a = p;
    struct hp_st *st = hp_setup(a->hc, a->i);

    if (!st) {
        a->failed = 1;
        return NULL;
    }
    while (!atomic_load(a->stop)) {
        double t0 = hc_now_s();

        if (hp_call(st) != 0) {
            a->failed = 1;
            break;
        }
        a->busy += hc_now_s() - t0;
        a->n++;
    }
    hp_teardown(st);
    return NULL;
}

/* Mean and largest time of pc_pull over `secs` (at least 5 pulls). */
static int time_pulls(struct hp_st *st, double *mean, double *max)
{
    double t0 = hc_now_s(), sum = 0;
    uint64_t n = 0, v;

    *max = 0;
    while (hc_now_s() - t0 < secs || n < 5) {
        double t = hc_now_s(), d;

        if (pc_pull(st->pc, st->params, &v) != HC_OK) {
            fprintf(stderr, "ps bench: pull: %s\n", hc_err_msg());
            return -1;
        }
        d = hc_now_s() - t;
        sum += d;
        n++;
        if (d > *max)
            *max = d;
    }
    *mean = sum / (double)n;
    return 0;
}

/* Worker 0 pulls alone, then while workers 1..n_push push-and-pull as fast
 * as they can: with a serialised shard a pull waits for each commit, with
 * a parallel one it does not. One line. */
static void pull_under_push(struct hp_conf *hc, const char *sz, int ns,
                            int n_push)
{
    struct pusher a[MAX_CLIENTS];
    pthread_t th[MAX_CLIENTS];
    atomic_int stop = 0;
    struct hp_st *st = hp_setup(hc, 0);
    double alone, alone_max, busy, busy_max, push_s = 0;
    uint64_t pushes = 0;
    int i, failed = 0;

    if (!st || time_pulls(st, &alone, &alone_max) != 0) {
        printf("pull %8s, %d shard(s): failed\n", sz, ns);
        if (st)
            hp_teardown(st);
        return;
    }
    for (i = 0; i < n_push; i++) {
        a[i] = (struct pusher){ hc, 1 + i, &stop, 0, 0, 0 };
        if (pthread_create(&th[i], NULL, pusher_loop, &a[i]) != 0)
            die("pthread_create", strerror(errno));
    }
    hc_sleep_s(0.2 + secs / 2);     /* the pushers joined and going */
    failed = time_pulls(st, &busy, &busy_max);
    atomic_store(&stop, 1);
    for (i = 0; i < n_push; i++) {
        pthread_join(th[i], NULL);
        failed |= a[i].failed;
        push_s += a[i].busy;
        pushes += a[i].n;
    }
    hp_teardown(st);
    if (failed || !pushes) {
        printf("pull %8s, %d shard(s): failed\n", sz, ns);
        return;
    }
    printf("pull %8s, %d shard(s): alone %.3f ms (max %.3f) | while %d "
           "clients push-and-pull (%.3f ms each): %.3f ms (max %.3f)\n",
           sz, ns, alone * 1e3, alone_max * 1e3, n_push,
           push_s / (double)pushes * 1e3, busy * 1e3, busy_max * 1e3);
    fflush(stdout);
}

static pid_t spawn_server(void (*serve)(int), int port)
{
    pid_t pid = fork();

    if (pid < 0)
        die("fork", strerror(errno));
    if (pid == 0) {
        serve(port);
        _exit(0);
    }
    return pid;
}

/* Shard j of n_shards, all on this machine: each with its share of the
 * cores for a large optimizer step, as `hetps launch` gives them. */
static pid_t spawn_shard(const char *bin, const char *dir, int j,
                         int n_shards)
{
    char task[32], data[512], logf[512], cfile[512], threads[24];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    pid_t pid;

    snprintf(threads, sizeof threads, "%ld",
             cores > n_shards ? cores / n_shards : 1);
    snprintf(task, sizeof task, "ps:%d", j);
    snprintf(data, sizeof data, "%s/ps-%d", dir, j);
    snprintf(logf, sizeof logf, "%s/ps-%d.log", dir, j);
    snprintf(cfile, sizeof cfile, "%s/cluster.json", dir);
    pid = fork();
    if (pid < 0)
        die("fork", strerror(errno));
    if (pid == 0) {
        int fd = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0644);

        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(bin, bin, "--cluster", cfile, "--task", task, "--data-dir", data,
              "--durability", durability, "--apply-threads", threads,
              (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    return pid;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    if (!f || fputs(text, f) == EOF || fclose(f) != 0)
        die(path, "cannot write");
}

/* Start n_shards shards holding one variable of `bytes`; the chief
 * creates it. Returns 0 and fills c and pids. */
static int shards_start(const char *bin, const char *dir, int n_shards,
                        uint64_t bytes, int n_workers, struct hp_conf *c,
                        pid_t *pids)
{
    char path[512], *json;
    size_t cap = 4096 + 32 * (size_t)(n_shards + n_workers), len = 0;
    struct hc_diag diag = { 0 };
    struct pc_client *chief = NULL;
    float *init;
    int j, rv;

    json = malloc(cap);
    len += (size_t)snprintf(json + len, cap - len, "{\"cluster\":{\"ps\":[");
    for (j = 0; j < n_shards; j++)
        len += (size_t)snprintf(json + len, cap - len, "%s\"127.0.0.1:%d\"",
                                j ? "," : "", base_port + j);
    len += (size_t)snprintf(json + len, cap - len, "],\"worker\":[");
    for (j = 0; j < n_workers; j++)
        len += (size_t)snprintf(json + len, cap - len, "%s\"127.0.0.1:%d\"",
                                j ? "," : "", base_port + 100 + j);
    if (plain)
        snprintf(json + len, cap - len, "]},\"hetps\":{\"mode\":\"async\","
                 "\"insecure\":true}}\n");
    else
        snprintf(json + len, cap - len, "]},\"hetps\":{\"mode\":\"async\","
                 "\"certs\":\"%s/certs\"}}\n", dir);
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    write_file(path, json);
    if (hc_cluster_load_file(path, &c->cl, &diag) != HC_OK)
        die(path, "the generated cluster file does not parse");
    snprintf(path, sizeof path, "%s/certs", dir);
    if (!plain && hc_tls_make(&c->cl, path, NULL) != HC_OK)
        die(path, hc_err_msg());
    /* One dense layer without activation of exactly bytes/4 parameters:
     * k inputs and u units, u (k + 1) = bytes/4, k at most 65536. */
    {
        uint64_t n = bytes / 4, u = 1;

        while (u < n && (n % u || n / u - 1 > 65536))
            u++;
        snprintf(json, cap,
                 "{\"name\":\"bench\",\"input_shape\":[%llu],\"layers\":"
                 "[{\"type\":\"dense\",\"units\":%llu}],\"loss\":\"mse\","
                 "\"optimizer\":{\"type\":\"adam\",\"learning_rate\":0.001},"
                 "\"batch_size\":64}",
                 (unsigned long long)(n / u - 1), (unsigned long long)u);
    }
    if (hc_model_parse(json, strlen(json), "bench model", &c->m) != HC_OK)
        die("bench model", hc_err_msg());
    free(json);
    for (j = 0; j < n_shards; j++)
        pids[j] = spawn_shard(bin, dir, j, n_shards);
    init = calloc(c->m.n_params, sizeof *init);
    rv = pc_open(&chief, &c->cl, HC_JOB_WORKER, 0, NULL);
    if (rv == HC_OK)
        rv = pc_join(chief, "bench");
    if (rv == HC_OK)
        rv = pc_set_model(chief, &c->m, 0);
    if (rv == HC_OK)
        rv = pc_create(chief, init);
    if (rv == HC_OK)
        rv = pc_leave(chief);
    if (rv != HC_OK)
        fprintf(stderr, "ps bench: creating the variable: %s (logs in %s)\n",
                hc_err_msg(), dir);
    if (chief)
        pc_close(chief);
    free(init);
    return rv;
}

static void stop_pids(pid_t *pids, int n)
{
    int j;

    for (j = 0; j < n; j++) {
        kill(pids[j], SIGTERM);
        waitpid(pids[j], NULL, 0);
    }
}

static void print_rate(const char *name, double rate, int clients,
                       uint64_t bytes)
{
    if (rate < 0)
        printf("  %s failed", name);
    else
        printf("  %s %8.0f rt/s %9.3f ms %6.2f GB/s", name, rate,
               rate > 0 ? 1e3 * clients / rate : 0.0, rate * (double)bytes / 1e9);
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: ps [--sizes LIST] [--shards LIST] [--clients LIST] [--secs S]\n"
"          [--ps BIN] [--max-flight MIB] [--durability LEVEL] [--full]\n"
"          [--transport tls|plain] [--lanes N] [--part-size MIB]\n"
"  --sizes    tensor bytes per round trip (default 1K,1M,16M,80MB)\n"
"  --shards   numbers of shards (default 1,2)\n"
"  --clients  concurrent clients, each one request in flight (default 1,8)\n"
"  --secs     timed seconds per flavour and configuration (default 0.5)\n"
"  --lanes    connections per shard a client's step is cut over (1 to 8;\n"
"             default: the client's, 4)\n"
"  --part-size MiB a part (default: the client's, 4)\n"
"  --ps       the hetps-ps binary (default bin/hetps-ps)\n"
"  --durability  the shards' --durability: process (default) or machine\n"
"             (an fsync per commit: what a pull must not wait for)\n"
"  --max-flight  skip configurations whose clients hold more than MIB\n"
"             tensor bytes in flight together (default 256; --full 2048)\n"
"  --full     the whole grid: sizes 1K,64K,1M,16M,80MB, shards 1,2,4,\n"
"             clients 1,2,4,8,16\n"
"  --transport  tls (default: mutual TLS, as hetps runs by default;\n"
"             the relay) or plain (\"insecure\": true)\n");
}

int main(int argc, char **argv)
{
    struct list sizes, shards, clients;
    const char *bin = "bin/hetps-ps";
    pid_t raw_pids[2 * MAX_SHARDS];
    int a, si, hi, ci, n_raw = 0;

    parse_list("--sizes", "1K,1M,16M,80MB", &sizes);
    parse_list("--shards", "1,2", &shards);
    parse_list("--clients", "1,8", &clients);
    for (a = 1; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;

        if (!strcmp(argv[a], "--full")) {
            parse_list("--sizes", "1K,64K,1M,16M,80MB", &sizes);
            parse_list("--shards", "1,2,4", &shards);
            parse_list("--clients", "1,2,4,8,16", &clients);
            mem_limit = 2048ull << 20;
            continue;
        }
        if (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            usage(stderr);
            return 2;
        }
        if (!strcmp(argv[a], "--sizes"))
            parse_list(argv[a], v, &sizes);
        else if (!strcmp(argv[a], "--shards"))
            parse_list(argv[a], v, &shards);
        else if (!strcmp(argv[a], "--clients"))
            parse_list(argv[a], v, &clients);
        else if (!strcmp(argv[a], "--ps"))
            bin = v;
        else if (!strcmp(argv[a], "--durability") &&
                 (!strcmp(v, "process") || !strcmp(v, "machine")))
            durability = v;
        else if (!strcmp(argv[a], "--transport") &&
                 (!strcmp(v, "tls") || !strcmp(v, "plain")))
            plain = !strcmp(v, "plain");
        else if (!strcmp(argv[a], "--max-flight") &&
                 (mem_limit = strtoull(v, NULL, 10) << 20) > 0)
            ;
        else if (!strcmp(argv[a], "--secs") && (secs = atof(v)) > 0 && secs < 600)
            ;
        else if (!strcmp(argv[a], "--lanes") && (lanes = atoi(v)) >= 1 &&
                 lanes <= PC_MAX_LANES)
            ;
        else if (!strcmp(argv[a], "--part-size") &&
                 (part_bytes = strtoull(v, NULL, 10) << 20) > 0)
            ;
        else {
            fprintf(stderr, "ps bench: unknown option or bad value: %s %s\n",
                    argv[a], v);
            usage(stderr);
            return 2;
        }
        a++;
    }
    for (a = 0; a < shards.n; a++)
        if (shards.v[a] > MAX_SHARDS)
            die("--shards", "at most 8");
    for (a = 0; a < clients.n; a++)
        if (clients.v[a] > MAX_CLIENTS)
            die("--clients", "at most 64");
    if (access(bin, X_OK) != 0)
        die(bin, "not found: build it first (make all)");
    hc_tune_process();          /* as hetps-ps and hetps-worker do */
    signal(SIGPIPE, SIG_IGN);
    base_port = 24000 + (int)(getpid() % 100) * 300;
    /* The raw servers are forked before this process uses nng (which is
     * not safe across fork), as many as the most shards asked for. */
    {
        int most = 0;

        for (a = 0; a < shards.n; a++)
            if ((int)shards.v[a] > most)
                most = (int)shards.v[a];
        for (a = 0; a < most; a++) {
            raw_pids[n_raw++] = spawn_server(raw_nng_server, base_port + 200 + a);
            raw_pids[n_raw++] = spawn_server(tcp_server, base_port + 250 + a);
        }
        hc_sleep_s(0.3);
    }
    printf("ps bench: async, Adam, durability %s, %s; %.1f s per flavour; "
           "rt = push+pull round trip of SIZE tensor bytes each way\n",
           durability, plain ? "plain TCP" : "mutual TLS", secs);
    for (si = 0; si < sizes.n; si++) {
        for (hi = 0; hi < shards.n; hi++) {
            int ns = (int)shards.v[hi], maxc = 0;
            char dir[] = "/tmp/hetps-bench-ps-XXXXXX", sz[32];
            uint64_t bytes = sizes.v[si] / 4 * 4;
            struct raw_conf rc = { ns, 0, (size_t)(bytes / (uint64_t)ns) };
            struct hp_conf *hc = calloc(1, sizeof *hc);
            pid_t pids[MAX_SHARDS];

            for (ci = 0; ci < clients.n; ci++)
                if ((int)clients.v[ci] > maxc)
                    maxc = (int)clients.v[ci];
            if (!mkdtemp(dir))
                die("mkdtemp", strerror(errno));
            if (shards_start(bin, dir, ns, bytes, maxc, hc, pids) != HC_OK)
                die("starting the shards", dir);
            for (ci = 0; ci < clients.n; ci++) {
                int nc = (int)clients.v[ci];
                struct runner r = { 0 };
                double hp, raw, tcp;

                fmt_size(bytes, sz, sizeof sz);
                if ((uint64_t)nc * bytes > mem_limit) {
                    printf("ps %8s, %d shard(s), %2d client(s): skipped (over "
                           "%llu MiB in flight; --max-flight)\n", sz, ns, nc,
                           (unsigned long long)(mem_limit >> 20));
                    continue;
                }
                r.n = nc;
                rc.port = base_port + 250;
                r.setup = tcp_setup, r.call = tcp_call, r.teardown = tcp_teardown;
                r.conf = &rc;
                tcp = run_timed(&r);
                rc.port = base_port + 200;
                r.setup = raw_setup, r.call = raw_call, r.teardown = raw_teardown;
                raw = run_timed(&r);
                r.setup = hp_setup, r.call = hp_call, r.teardown = hp_teardown;
                r.conf = hc;
                hp = run_timed(&r);
                printf("ps %8s, %d shard(s), %2d client(s):", sz, ns, nc);
                print_rate("hetps", hp, nc, bytes);
                print_rate("| nng", raw, nc, bytes);
                print_rate("| tcp", tcp, nc, bytes);
                if (hp > 0 && raw > 0)
                    printf("  | hetps/nng %.2f", hp / raw);
                printf("\n");
                fflush(stdout);
            }
            if (maxc >= 3 && 2 * bytes <= mem_limit)
                pull_under_push(hc, fmt_size(bytes, sz, sizeof sz), ns, 2);
            stop_pids(pids, ns);
            hc_cluster_free(&hc->cl);
            free(hc);
            {
                char cmd[600];

                snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
                if (system(cmd) != 0)
                    fprintf(stderr, "ps bench: could not remove %s\n", dir);
            }
        }
    }
    stop_pids(raw_pids, n_raw);
    return 0;
}
