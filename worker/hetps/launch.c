/*
 * launch.c — `hetps launch`: start every task of a cluster file on this
 * machine (the parameter servers first), prefix each line a task prints
 * with its name ("[ps:0] …"), forward Ctrl-C/SIGTERM to all of them, tell
 * the servers to shut down once every worker has finished, and exit with
 * the first failing task's code. Before it starts any, `hetps-ps reshard
 * --in-place` fits the stores in the data directory to the file's number
 * of parameter servers (ps/reshard.c). The programs it runs (hetps-ps,
 * hetps-worker) are looked for next to this executable.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "clock.h"
#include "err.h"
#include "log.h"
#include "hetps.h"
#include "worker/client.h"
#include "tls_cert.h"

#define MAX_ARGS 256

/* One task started by `hetps launch`. */
struct child {
    char name[32];          /* "ps:0", "worker:1" */
    int is_ps;
    pid_t pid;
    int fd;                 /* read end of its stdout+stderr, -1 at EOF */
    int running;
    int code;               /* exit code, 128+signal when killed */
    char buf[8192];         /* partial line */
    size_t len;
};

static volatile sig_atomic_t got_signal;
static int sig_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
    char b = (char)sig;

    got_signal = sig;
    if (write(sig_pipe[1], &b, 1) < 0)
        return;
}

/* A worker's live progress bar (HETPS_TTY=1, our stdout a terminal):
 * the task whose bar is on the last line, redrawn in place with '\r'. */
static const struct child *bar_owner;

/* Write one line of ch, prefixed with its name; end is '\n', or '\r' for
 * a progress bar's redraw (left open on the terminal's last line). */
static void emit(struct child *ch, const char *line, size_t n, char end)
{
    char out[sizeof ch->buf + 48];
    int k = 0;

    if (bar_owner && bar_owner != ch)
        out[k++] = '\n';       /* keep the other task's bar above */
    else if (bar_owner)
        out[k++] = '\r';       /* the bar's own line: overwrite it */
    k += snprintf(out + k, sizeof out - (size_t)k, "[%s] ", ch->name);
    if (n > sizeof out - (size_t)k - 1)
        n = sizeof out - (size_t)k - 1;
    memcpy(out + k, line, n);
    if (end == '\n')
        out[k++ + (int)n] = '\n';
    bar_owner = end == '\r' ? ch : NULL;
    if (write(STDOUT_FILENO, out, (size_t)k + n) < 0)
        return;
}

/* Read what a child printed (its pipe is non-blocking) and emit complete
 * lines, prefixed. Returns 1 when it read something, 0 otherwise. */
static int drain(struct child *ch)
{
    ssize_t n;

    if (ch->fd < 0)
        return 0;
    n = read(ch->fd, ch->buf + ch->len, sizeof ch->buf - ch->len);
    if (n <= 0) {
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            return 0;
        if (ch->len)
            emit(ch, ch->buf, ch->len, '\n');
        else if (bar_owner == ch && write(STDOUT_FILENO, "\n", 1) < 0)
            return 0;
        if (bar_owner == ch)
            bar_owner = NULL;
        ch->len = 0;
        close(ch->fd);
        ch->fd = -1;
        return 0;
    }
    ch->len += (size_t)n;
    for (;;) {
        char *nl = memchr(ch->buf, '\n', ch->len);
        char *cr = memchr(ch->buf, '\r', nl ? (size_t)(nl - ch->buf) : ch->len);
        char *end = cr ? cr : nl;
        size_t k;

        if (!end) {
            if (ch->len == sizeof ch->buf) { /* a very long line: cut it */
                emit(ch, ch->buf, ch->len, '\n');
                ch->len = 0;
            }
            return 1;
        }
        k = (size_t)(end - ch->buf);
        if (k || *end == '\n')  /* a bar's leading '\r' ends nothing */
            emit(ch, ch->buf, k, *end);
        memmove(ch->buf, end + 1, ch->len - k - 1);
        ch->len -= k + 1;
    }
}

static int start_child(struct child *ch, char *const argv[])
{
    pid_t parent = getpid();
    int p[2];

    if (pipe(p) != 0)
        return -1;
    ch->pid = fork();
    if (ch->pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (ch->pid == 0) {
        setpgid(0, 0);
        /* A task never outlives its launcher, even one killed by SIGKILL. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        dup2(p[1], STDOUT_FILENO);
        dup2(p[1], STDERR_FILENO);
        close(p[0]);
        close(p[1]);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(p[1]);
    fcntl(p[0], F_SETFD, FD_CLOEXEC);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    ch->fd = p[0];
    ch->running = 1;
    return 0;
}

static void signal_all(struct child *ch, int n, int sig, int only_ps)
{
    int i;

    for (i = 0; i < n; i++)
        if (ch[i].running && (!only_ps || ch[i].is_ps))
            kill(ch[i].pid, sig);
}

static int reap(struct child *ch, int n, int *first_fail, const char **who)
{
    int status, i, any = 0;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (i = 0; i < n; i++) {
            if (ch[i].pid != pid || !ch[i].running)
                continue;
            ch[i].running = 0;
            ch[i].code = WIFEXITED(status) ? WEXITSTATUS(status)
                                           : 128 + WTERMSIG(status);
            any = 1;
            if (ch[i].code != 0 && *first_fail == 0) {
                *first_fail = ch[i].code;
                *who = ch[i].name;
            }
        }
    }
    return any;
}

/*
 * Before any task starts: `hetps-ps reshard --in-place`, which moves the
 * stores in data_dir to the cluster file's number of parameter servers
 * when they are of another (and finishes a move that was interrupted),
 * printing what it did. Returns its exit code, -1 when it cannot be run.
 */
static int reshard_first(const char *dir, const char *file,
                         const char *data_dir)
{
    char prog[PATH_MAX + 32];
    char *args[] = { prog, "reshard", "--in-place", "--to", (char *)file,
                     "--data-dir", (char *)data_dir, NULL };
    int status;
    pid_t pid;

    snprintf(prog, sizeof prog, "%s/hetps-ps", dir);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execv(prog, args);
        fprintf(stderr, "hetps launch: cannot run %s: %s\n", prog,
                strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void launch_usage(FILE *f)
{
    fprintf(f,
"Usage: hetps launch [OPTION]... CLUSTER_FILE [-- WORKER_ARG...]\n"
"Start every task of CLUSTER_FILE on this machine: the parameter servers,\n"
"then the workers (with WORKER_ARGs). Each line a task prints is prefixed\n"
"with its name. Ctrl-C stops them all. When every worker has finished the\n"
"servers are told to shut down. Exits with the first failing task's code.\n"
"\n"
"When DIR/ps-0 holds the stores of another number of parameter servers than\n"
"CLUSTER_FILE's, they are resharded first (`hetps reshard --in-place`): the\n"
"new stores go to DIR/ps-J, the old ones are kept in DIR/before-reshard-M.\n"
"Stop the job that used them first. If that fails, no task is started.\n"
"\n"
"  -d, --data-dir DIR     parent of the shards' stores (default hetps-data):\n"
"                         ps:J keeps its LMDB in DIR/ps-J; the cluster's\n"
"                         CA and certificates are made once in DIR/certs\n"
"                         (unless HETPS_CERTS or hetps.certs names a set)\n"
"  -m, --mode MODE        async, sync or ssp:S for every task, instead of\n"
"                         the cluster file's hetps.mode\n"
"  -p, --ps-arg ARG       pass ARG to every hetps-ps (repeatable); each\n"
"                         gets --apply-threads CORES/SERVERS unless given\n"
"      --no-reshard       start the servers on the stores as they are (a\n"
"                         store of another number of servers is refused)\n"
"  -h, --help             show this help and exit\n");
}

/* What the command line asked for. */
struct launch_args {
    const char *data_dir;           /* --data-dir: parent of the stores */
    const char *file;               /* CLUSTER_FILE */
    const char *mode;               /* --mode; NULL: the file's hetps.mode */
    int reshard;                    /* 0 with --no-reshard */
    const char *ps_args[MAX_ARGS];  /* --ps-arg, in order (n_ps_args) */
    int n_ps_args;
    char **worker_args;             /* after CLUSTER_FILE (n_worker_args) */
    int n_worker_args;
    const char *user_logdir;        /* a --logdir among them, or NULL */
};

/* The tasks started, and how far stopping them has gone. */
struct tasks {
    struct child *ch;               /* (n_ps + n_worker), n started */
    int n;
    int first_fail;                 /* the first failure's exit code, or 0 */
    const char *who;                /* its task's name (NULL: a signal) */
    int stopping;                   /* every task was sent SIGTERM */
    int shutdown_sent;              /* the servers were asked to shut down */
    int64_t stop_at;                /* SIGKILL what runs after (ms); 0: no */
};

/* Parse the command line into a. Returns -1 to go on, else the exit code
 * (0 after --help, 2 on a usage error, with its message printed). */
static int parse_args(int argc, char **argv, struct launch_args *a)
{
    static const struct option opts[] = {
        { "data-dir", required_argument, NULL, 'd' },
        { "ps-arg", required_argument, NULL, 'p' },
        { "mode", required_argument, NULL, 'm' },
        { "no-reshard", no_argument, NULL, 'R' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c, i;

    memset(a, 0, sizeof *a);
    a->data_dir = "hetps-data";
    a->reshard = 1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+d:p:m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': a->data_dir = optarg; break;
        case 'm': a->mode = optarg; break;
        case 'R': a->reshard = 0; break;
        case 'p':
            if (a->n_ps_args == MAX_ARGS - 16) {
                fprintf(stderr, "hetps launch: too many --ps-arg\n");
                return 2;
            }
            a->ps_args[a->n_ps_args++] = optarg;
            break;
        case 'h': launch_usage(stdout); return 0;
        default:
            fprintf(stderr, "Try 'hetps launch --help' for more information.\n");
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "hetps launch: missing CLUSTER_FILE\n"
                "Try 'hetps launch --help' for more information.\n");
        return 2;
    }
    a->file = argv[optind++];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    a->worker_args = argv + optind;
    a->n_worker_args = argc - optind;
    if (a->n_worker_args > MAX_ARGS - 16) {
        fprintf(stderr, "hetps launch: too many worker arguments\n");
        return 2;
    }
    for (i = 0; i < a->n_worker_args; i++)
        if (!strcmp(a->worker_args[i], "--logdir") && i + 1 < a->n_worker_args)
            a->user_logdir = a->worker_args[i + 1];
        else if (!strncmp(a->worker_args[i], "--logdir=", 9))
            a->user_logdir = a->worker_args[i] + 9;
    return -1;
}

/* Once per data directory: the cluster's CA and certificates, in
 * HETPS_CERTS, the file's hetps.certs or DATA_DIR/certs. The tasks (and
 * this process) find them through HETPS_CERTS, set here. Returns 0, or 1
 * with the message printed. */
static int make_certs(const struct hc_cluster *cl, const char *data_dir)
{
    const char *env = getenv("HETPS_CERTS");
    char certs[PATH_MAX];
    int made = 0;

    if (env && env[0])
        snprintf(certs, sizeof certs, "%s", env);
    else if (cl->certs[0])
        snprintf(certs, sizeof certs, "%s", cl->certs);
    else
        snprintf(certs, sizeof certs, "%s/certs", data_dir);
    if (hc_tls_make(cl, certs, &made) != HC_OK) {
        fprintf(stderr, "hetps launch: %s\n", hc_err_msg());
        return 1;
    }
    if (made)
        fprintf(stderr, "hetps launch: made the cluster's CA and "
                "certificates in %s (%d files)\n", certs, made);
    setenv("HETPS_CERTS", certs, 1);
    return 0;
}

/* Route SIGINT, SIGTERM and SIGHUP to on_signal (which wakes the poll
 * through sig_pipe); ignore SIGPIPE. Returns -1 when no pipe is left. */
static int catch_signals(void)
{
    struct sigaction sa;

    if (pipe(sig_pipe) != 0)
        return -1;
    fcntl(sig_pipe[0], F_SETFD, FD_CLOEXEC);
    fcntl(sig_pipe[1], F_SETFD, FD_CLOEXEC);
    fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* Every server runs on this machine: each gets its share of the cores for
 * a large optimizer step, unless --ps-arg says otherwise (the default, all
 * cores each, would have the servers' threads crowd one another). Returns
 * the --apply-threads value, written in buf, or NULL when a --ps-arg gives
 * one. */
static const char *apply_threads_share(const struct launch_args *a,
                                       const struct hc_cluster *cl,
                                       char *buf, size_t len)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long share = cores > cl->n_ps ? cores / cl->n_ps : 1;
    int i;

    for (i = 0; i < a->n_ps_args; i++)
        if (!strncmp(a->ps_args[i], "--apply-threads", 15))
            return NULL;
    snprintf(buf, len, "%ld", share);
    return buf;
}

/* The command line of one task. */
struct task_cmd {
    char prog[PATH_MAX + 32];       /* DIR/hetps-ps or DIR/hetps-worker */
    char task[32];                  /* "ps:0", "worker:1" */
    char store[PATH_MAX + 32];      /* a server's DATA_DIR/ps-J */
    char *argv[MAX_ARGS];
};

/* The command of task i (the servers first, then the workers): the
 * program in dir with --cluster, --task and --mode; a server gets its
 * store, apply_threads (unless NULL) and the --ps-args, a worker the
 * worker arguments and, unless they name one, --logdir logdir. */
static void task_command(struct task_cmd *t, const struct launch_args *a,
                         const struct hc_cluster *cl, int i, const char *dir,
                         const char *logdir, const char *apply_threads)
{
    int k = 0, j;
    int is_ps = i < cl->n_ps, idx = is_ps ? i : i - cl->n_ps;

    snprintf(t->task, sizeof t->task, "%s:%d", is_ps ? "ps" : "worker", idx);
    snprintf(t->prog, sizeof t->prog, "%s/%s", dir,
             is_ps ? "hetps-ps" : "hetps-worker");
    t->argv[k++] = t->prog;
    t->argv[k++] = "--cluster";
    t->argv[k++] = (char *)a->file;
    t->argv[k++] = "--task";
    t->argv[k++] = t->task;
    if (a->mode) {
        t->argv[k++] = "--mode";
        t->argv[k++] = (char *)a->mode;
    }
    if (is_ps) {
        snprintf(t->store, sizeof t->store, "%s/ps-%d", a->data_dir, idx);
        t->argv[k++] = "--data-dir";
        t->argv[k++] = t->store;
        if (apply_threads) {
            t->argv[k++] = "--apply-threads";
            t->argv[k++] = (char *)apply_threads;
        }
        for (j = 0; j < a->n_ps_args; j++)
            t->argv[k++] = (char *)a->ps_args[j];
    } else {
        for (j = 0; j < a->n_worker_args; j++)
            t->argv[k++] = a->worker_args[j];
        if (!a->user_logdir) {
            t->argv[k++] = "--logdir";
            t->argv[k++] = (char *)logdir;
        }
    }
    t->argv[k] = NULL;
}

/* SIGTERM to every task, and SIGKILL to those still running in 10 s. */
static void stop_all(struct tasks *t)
{
    signal_all(t->ch, t->n, SIGTERM, 0);
    t->stopping = 1;
    t->stop_at = hc_now_ms() + 10000;
}

/* Start the parameter servers, then the workers. When one cannot be
 * started, it is the failure and those already started are stopped. */
static void start_tasks(struct tasks *t, const struct launch_args *a,
                        const struct hc_cluster *cl, const char *dir,
                        const char *logdir)
{
    char share[24];
    const char *apply_threads = apply_threads_share(a, cl, share,
                                                    sizeof share);
    struct task_cmd cmd;
    int i;

    /* A worker draws its progress bar when this launcher's output is a
     * terminal; emit() relays the redraws. */
    setenv("HETPS_TTY", isatty(STDOUT_FILENO) ? "1" : "0", 1);
    for (i = 0; i < cl->n_ps + cl->n_worker; i++) {
        struct child *ch = &t->ch[i];

        task_command(&cmd, a, cl, i, dir, logdir, apply_threads);
        snprintf(ch->name, sizeof ch->name, "%s", cmd.task);
        ch->is_ps = i < cl->n_ps;
        ch->fd = -1;
        if (start_child(ch, cmd.argv) != 0) {
            fprintf(stderr, "hetps launch: cannot start %s: %s\n", cmd.task,
                    strerror(errno));
            t->first_fail = 1;
            t->who = ch->name;
            stop_all(t);
            return;
        }
        t->n++;
    }
}

/* Wait up to 200 ms for output or a signal, relay what the tasks printed
 * and record those that exited. */
static void poll_tasks(struct tasks *t)
{
    struct pollfd pf[1 + 4096];
    int np = 0, i;

    pf[np].fd = sig_pipe[0];
    pf[np++].events = POLLIN;
    for (i = 0; i < t->n && np < (int)(sizeof pf / sizeof pf[0]); i++) {
        if (t->ch[i].fd >= 0) {
            pf[np].fd = t->ch[i].fd;
            pf[np++].events = POLLIN;
        }
    }
    poll(pf, (nfds_t)np, 200);
    if (pf[0].revents & POLLIN) {
        char b[16];

        if (read(sig_pipe[0], b, sizeof b) < 0)
            b[0] = 0;
    }
    for (i = 0; i < t->n; i++)
        if (t->ch[i].fd >= 0)
            drain(&t->ch[i]);
    reap(t->ch, t->n, &t->first_fail, &t->who);
}

/* A signal received: the first stops every task (and is the exit code
 * unless a task failed first), the second kills them. */
static void pass_signal(struct tasks *t, int sig)
{
    if (t->stopping) {
        fprintf(stderr, "hetps launch: second signal: killing every task\n");
        signal_all(t->ch, t->n, SIGKILL, 0);
        return;
    }
    fprintf(stderr, "hetps launch: %s: stopping every task\n",
            strsignal(sig));
    stop_all(t);
    if (!t->first_fail)
        t->first_fail = 128 + sig;
}

/* How many tasks are running; with workers_only, how many workers. */
static int running(const struct tasks *t, int workers_only)
{
    int i, n = 0;

    for (i = 0; i < t->n; i++)
        if (!workers_only || !t->ch[i].is_ps)
            n += t->ch[i].running;
    return n;
}

/* Every worker has finished: ask the servers to shut down (by signal when
 * the request fails), and kill what still runs in 15 s. */
static void shutdown_servers(struct tasks *t, const struct hc_cluster *cl)
{
    struct pc_opts po = { .timeout_ms = 2000, .retry_ms = 5000 };
    struct pc_client *pc = NULL;

    t->shutdown_sent = 1;
    if (pc_open(&pc, cl, -1, 0, &po) == HC_OK && pc_shutdown(pc) == HC_OK) {
        fprintf(stderr, "hetps launch: every worker finished; "
                "parameter servers told to shut down\n");
    } else {
        fprintf(stderr, "hetps launch: shutdown request failed (%s); "
                "stopping the servers by signal\n", hc_err_msg());
        signal_all(t->ch, t->n, SIGTERM, 1);
    }
    pc_close(pc);
    t->stop_at = hc_now_ms() + 15000;
}

/* Every task has exited: relay what is left in the pipes (bounded: a
 * grandchild may still hold one open) and close them. */
static void drain_rest(struct tasks *t)
{
    int i;

    for (i = 0; i < t->n; i++) {
        struct child *ch = &t->ch[i];
        int k = 0;

        while (drain(ch) && k++ < 10000)
            ;
        if (ch->len)
            emit(ch, ch->buf, ch->len, '\n');
        ch->len = 0;
        if (ch->fd >= 0)
            close(ch->fd);
        ch->fd = -1;
    }
}

/* Until every task has exited: relay their output, pass a signal on, stop
 * every task when one fails, ask the servers to shut down once the
 * workers are done, and kill what outlives its grace period. */
static void supervise(struct tasks *t, const struct hc_cluster *cl)
{
    for (;;) {
        poll_tasks(t);
        if (got_signal) {
            int sig = got_signal;

            got_signal = 0;
            pass_signal(t, sig);
        }
        if (!running(t, 0)) {
            drain_rest(t);
            return;
        }
        if (t->first_fail && !t->stopping) {
            fprintf(stderr, "hetps launch: %s failed (exit %d): stopping every task\n",
                    t->who, t->first_fail);
            stop_all(t);
        }
        if (!t->stopping && !running(t, 1) && !t->shutdown_sent)
            shutdown_servers(t, cl);
        if (t->stop_at && hc_now_ms() > t->stop_at) {
            fprintf(stderr, "hetps launch: tasks still running after the grace "
                    "period: killing them\n");
            signal_all(t->ch, t->n, SIGKILL, 0);
            t->stop_at = 0;
        }
    }
}

/* The exit code: the first failure (a task's code, or 128 + the signal
 * that stopped the job), said in a last line; on success, where the
 * summaries in logdir are, when training wrote any. */
static int finish(struct tasks *t, const char *logdir)
{
    char csv[PATH_MAX + 32];
    int i;

    for (i = 0; i < t->n; i++)
        if (t->ch[i].code != 0 && !t->first_fail) {
            t->first_fail = t->ch[i].code;
            t->who = t->ch[i].name;
        }
    if (t->first_fail) {
        fprintf(stderr, "hetps launch: exit %d (first failure: %s)\n",
                t->first_fail, t->who ? t->who : "signal");
        return t->first_fail;
    }
    snprintf(csv, sizeof csv, "%s/training.csv", logdir);
    if (access(csv, R_OK) != 0)     /* nothing trained, or --logdir off */
        printf("hetps launch: done\n");
    else
        printf("hetps launch: done. Summaries: %s (TensorBoard: "
               "tensorboard --logdir %s; training.csv); plot: hetps plot "
               "%s -o %s/run.png\n", logdir, logdir, logdir, logdir);
    return 0;
}

int hetps_cmd_launch(int argc, char **argv)
{
    struct launch_args a;
    struct tasks t = { 0 };
    struct hc_cluster cl;
    char dir[PATH_MAX], logdir[PATH_MAX + 8];
    int rv;

    if ((rv = parse_args(argc, argv, &a)) >= 0)
        return rv;
    snprintf(logdir, sizeof logdir, "%s/logs", a.data_dir);
    if (hc_cluster_open("hetps launch", -1,
                        &(struct hc_task_flags){ a.file, NULL, a.mode },
                        &cl) != HC_OK)
        return 2;
    if (mkdir(a.data_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "hetps launch: cannot create --data-dir %s: %s\n",
                a.data_dir, strerror(errno));
        hc_cluster_free(&cl);
        return 2;
    }
    if (!cl.insecure && make_certs(&cl, a.data_dir) != 0) {
        hc_cluster_free(&cl);
        return 1;
    }
    hetps_bin_dir(dir, sizeof dir);
    if (a.reshard && (rv = reshard_first(dir, a.file, a.data_dir)) != 0) {
        fprintf(stderr, "hetps launch: no task started: the stores in %s "
                "could not be fitted to %s's %d parameter servers (%s)\n",
                a.data_dir, a.file, cl.n_ps,
                rv < 0 ? strerror(errno) : "above");
        hc_cluster_free(&cl);
        return 1;
    }
    t.ch = calloc((size_t)(cl.n_ps + cl.n_worker), sizeof *t.ch);
    if (!t.ch || catch_signals() != 0) {
        fprintf(stderr, "hetps launch: out of resources\n");
        free(t.ch);
        hc_cluster_free(&cl);
        return 1;
    }
    start_tasks(&t, &a, &cl, dir, logdir);
    supervise(&t, &cl);
    rv = finish(&t, a.user_logdir ? a.user_logdir : logdir);
    free(t.ch);
    hc_cluster_free(&cl);
    return rv;
}
