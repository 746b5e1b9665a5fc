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

int hetps_cmd_launch(int argc, char **argv)
{
    static const struct option opts[] = {
        { "data-dir", required_argument, NULL, 'd' },
        { "ps-arg", required_argument, NULL, 'p' },
        { "mode", required_argument, NULL, 'm' },
        { "no-reshard", no_argument, NULL, 'R' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *data_dir = "hetps-data", *file, *mode = NULL;
    int reshard = 1, rs;
    const char *ps_args[MAX_ARGS];
    int n_ps_args = 0, c, i, n, n_children = 0, first_fail = 0;
    int n_worker_args = 0, shutdown_sent = 0, stopping = 0;
    const char *user_logdir = NULL;
    char logdir[PATH_MAX + 8], apply_threads[24];
    int user_apply_threads = 0;
    char **worker_args = NULL;
    const char *who = NULL;
    int64_t stop_at = 0;
    struct hc_cluster cl;
    struct child *ch;
    char dir[PATH_MAX];
    struct sigaction sa;

    optind = 1;
    while ((c = getopt_long(argc, argv, "+d:p:m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': data_dir = optarg; break;
        case 'm': mode = optarg; break;
        case 'R': reshard = 0; break;
        case 'p':
            if (n_ps_args == MAX_ARGS - 16) {
                fprintf(stderr, "hetps launch: too many --ps-arg\n");
                return 2;
            }
            ps_args[n_ps_args++] = optarg;
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
    file = argv[optind++];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    worker_args = argv + optind;
    n_worker_args = argc - optind;
    if (n_worker_args > MAX_ARGS - 16) {
        fprintf(stderr, "hetps launch: too many worker arguments\n");
        return 2;
    }
    for (i = 0; i < n_worker_args; i++)
        if (!strcmp(worker_args[i], "--logdir") && i + 1 < n_worker_args)
            user_logdir = worker_args[i + 1];
        else if (!strncmp(worker_args[i], "--logdir=", 9))
            user_logdir = worker_args[i] + 9;
    snprintf(logdir, sizeof logdir, "%s/logs", data_dir);
    if (hc_cluster_open("hetps launch", -1,
                        &(struct hc_task_flags){ file, NULL, mode }, &cl) != HC_OK)
        return 2;
    if (mkdir(data_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "hetps launch: cannot create --data-dir %s: %s\n",
                data_dir, strerror(errno));
        hc_cluster_free(&cl);
        return 2;
    }
    if (!cl.insecure) {
        /* Once per data directory: the cluster's CA and certificates. The
         * tasks (and this process) find them through HETPS_CERTS. */
        const char *env = getenv("HETPS_CERTS");
        char certs[PATH_MAX];
        int made = 0;

        if (env && env[0])
            snprintf(certs, sizeof certs, "%s", env);
        else if (cl.certs[0])
            snprintf(certs, sizeof certs, "%s", cl.certs);
        else
            snprintf(certs, sizeof certs, "%s/certs", data_dir);
        if (hc_tls_make(&cl, certs, &made) != HC_OK) {
            fprintf(stderr, "hetps launch: %s\n", hc_err_msg());
            hc_cluster_free(&cl);
            return 1;
        }
        if (made)
            fprintf(stderr, "hetps launch: made the cluster's CA and "
                    "certificates in %s (%d files)\n", certs, made);
        setenv("HETPS_CERTS", certs, 1);
    }
    hetps_bin_dir(dir, sizeof dir);
    if (reshard && (rs = reshard_first(dir, file, data_dir)) != 0) {
        fprintf(stderr, "hetps launch: no task started: the stores in %s "
                "could not be fitted to %s's %d parameter servers (%s)\n",
                data_dir, file, cl.n_ps, rs < 0 ? strerror(errno) : "above");
        hc_cluster_free(&cl);
        return 1;
    }
    n = cl.n_ps + cl.n_worker;
    ch = calloc((size_t)n, sizeof *ch);
    if (!ch || pipe(sig_pipe) != 0) {
        fprintf(stderr, "hetps launch: out of resources\n");
        free(ch);
        hc_cluster_free(&cl);
        return 1;
    }
    fcntl(sig_pipe[0], F_SETFD, FD_CLOEXEC);
    fcntl(sig_pipe[1], F_SETFD, FD_CLOEXEC);
    fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Every server runs on this machine: each gets its share of the cores
     * for a large optimizer step, unless --ps-arg says otherwise (the
     * default, all cores each, would have the servers' threads crowd one
     * another). */
    for (i = 0; i < n_ps_args; i++)
        if (!strncmp(ps_args[i], "--apply-threads", 15))
            user_apply_threads = 1;
    {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        long share = cores > cl.n_ps ? cores / cl.n_ps : 1;

        snprintf(apply_threads, sizeof apply_threads, "%ld", share);
    }

    /* A worker draws its progress bar when this launcher's output is a
     * terminal; emit() relays the redraws. */
    setenv("HETPS_TTY", isatty(STDOUT_FILENO) ? "1" : "0", 1);
    for (i = 0; i < n; i++) {
        char prog[PATH_MAX + 32], task[32], ddir[PATH_MAX + 32];
        char *args[MAX_ARGS];
        int k = 0, j;
        int is_ps = i < cl.n_ps, idx = is_ps ? i : i - cl.n_ps;

        snprintf(task, sizeof task, "%s:%d", is_ps ? "ps" : "worker", idx);
        snprintf(prog, sizeof prog, "%s/%s", dir,
                 is_ps ? "hetps-ps" : "hetps-worker");
        args[k++] = prog;
        args[k++] = "--cluster";
        args[k++] = (char *)file;
        args[k++] = "--task";
        args[k++] = task;
        if (mode) {
            args[k++] = "--mode";
            args[k++] = (char *)mode;
        }
        if (is_ps) {
            snprintf(ddir, sizeof ddir, "%s/ps-%d", data_dir, idx);
            args[k++] = "--data-dir";
            args[k++] = ddir;
            if (!user_apply_threads) {
                args[k++] = "--apply-threads";
                args[k++] = apply_threads;
            }
            for (j = 0; j < n_ps_args; j++)
                args[k++] = (char *)ps_args[j];
        } else {
            for (j = 0; j < n_worker_args; j++)
                args[k++] = worker_args[j];
            if (!user_logdir) {
                args[k++] = "--logdir";
                args[k++] = logdir;
            }
        }
        args[k] = NULL;
        snprintf(ch[i].name, sizeof ch[i].name, "%s", task);
        ch[i].is_ps = is_ps;
        ch[i].fd = -1;
        if (start_child(&ch[i], args) != 0) {
            fprintf(stderr, "hetps launch: cannot start %s: %s\n", task,
                    strerror(errno));
            first_fail = 1;
            who = ch[i].name;
            break;
        }
        n_children++;
    }
    if (first_fail) {
        signal_all(ch, n_children, SIGTERM, 0);
        stopping = 1;
        stop_at = hc_now_ms() + 10000;
    }

    for (;;) {
        struct pollfd pf[1 + 4096];
        int np = 0, alive = 0, workers_alive = 0, open_fds = 0;

        pf[np].fd = sig_pipe[0];
        pf[np++].events = POLLIN;
        for (i = 0; i < n_children && np < (int)(sizeof pf / sizeof pf[0]); i++) {
            if (ch[i].fd >= 0) {
                pf[np].fd = ch[i].fd;
                pf[np++].events = POLLIN;
                open_fds++;
            }
        }
        poll(pf, (nfds_t)np, 200);
        if (pf[0].revents & POLLIN) {
            char b[16];

            if (read(sig_pipe[0], b, sizeof b) < 0)
                b[0] = 0;
        }
        for (i = 0; i < n_children; i++)
            if (ch[i].fd >= 0)
                drain(&ch[i]);
        reap(ch, n_children, &first_fail, &who);

        if (got_signal) {
            int sig = got_signal;

            got_signal = 0;
            if (!stopping) {
                fprintf(stderr, "hetps launch: %s: stopping every task\n",
                        strsignal(sig));
                signal_all(ch, n_children, SIGTERM, 0);
                stopping = 1;
                stop_at = hc_now_ms() + 10000;
                if (!first_fail)
                    first_fail = 128 + sig;
            } else {
                fprintf(stderr, "hetps launch: second signal: killing every task\n");
                signal_all(ch, n_children, SIGKILL, 0);
            }
        }
        for (i = 0; i < n_children; i++) {
            alive += ch[i].running;
            if (!ch[i].is_ps)
                workers_alive += ch[i].running;
        }
        if (!alive) {
            /* Read what is left in the pipes (bounded: a grandchild may
             * still hold one open). */
            for (i = 0; i < n_children; i++) {
                int k = 0;

                while (drain(&ch[i]) && k++ < 10000)
                    ;
                if (ch[i].len)
                    emit(&ch[i], ch[i].buf, ch[i].len, '\n');
                ch[i].len = 0;
                if (ch[i].fd >= 0)
                    close(ch[i].fd);
                ch[i].fd = -1;
            }
            break;
        }
        if (first_fail && !stopping) {
            fprintf(stderr, "hetps launch: %s failed (exit %d): stopping every task\n",
                    who, first_fail);
            signal_all(ch, n_children, SIGTERM, 0);
            stopping = 1;
            stop_at = hc_now_ms() + 10000;
        }
        if (!stopping && !workers_alive && !shutdown_sent) {
            struct pc_opts po = { .timeout_ms = 2000, .retry_ms = 5000 };
            struct pc_client *pc = NULL;

            shutdown_sent = 1;
            if (pc_open(&pc, &cl, -1, 0, &po) == HC_OK &&
                pc_shutdown(pc) == HC_OK) {
                fprintf(stderr, "hetps launch: every worker finished; "
                        "parameter servers told to shut down\n");
            } else {
                fprintf(stderr, "hetps launch: shutdown request failed (%s); "
                        "stopping the servers by signal\n", hc_err_msg());
                signal_all(ch, n_children, SIGTERM, 1);
            }
            pc_close(pc);
            stop_at = hc_now_ms() + 15000;
            stopping = 0;
        }
        if (stop_at && hc_now_ms() > stop_at) {
            fprintf(stderr, "hetps launch: tasks still running after the grace "
                    "period: killing them\n");
            signal_all(ch, n_children, SIGKILL, 0);
            stop_at = 0;
        }
        (void)open_fds;
    }
    for (i = 0; i < n_children; i++)
        if (ch[i].code != 0 && !first_fail) {
            first_fail = ch[i].code;
            who = ch[i].name;
        }
    if (first_fail)
        fprintf(stderr, "hetps launch: exit %d (first failure: %s)\n",
                first_fail, who ? who : "signal");
    else {
        const char *ld = user_logdir ? user_logdir : logdir;
        char csv[PATH_MAX + 32];

        snprintf(csv, sizeof csv, "%s/training.csv", ld);
        if (access(csv, R_OK) != 0)     /* nothing trained, or --logdir off */
            printf("hetps launch: done\n");
        else
            printf("hetps launch: done. Summaries: %s (TensorBoard: "
                   "tensorboard --logdir %s; training.csv); plot: hetps plot "
                   "%s -o %s/run.png\n", ld, ld, ld, ld);
    }
    free(ch);
    hc_cluster_free(&cl);
    return first_fail;
}
