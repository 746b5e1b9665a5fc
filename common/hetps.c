/*
 * hetps.c — the front door: `hetps launch | status | check-config | help`;
 * `export`, `inspect` and `reshard` run hetps-ps, `eval` and `predict`
 * hetps-worker.
 *
 * `launch` starts every task of a cluster file on this machine (the
 * parameter servers first), prefixes each line a task prints with its name
 * ("[ps:0] …"), forwards Ctrl-C/SIGTERM to all of them, tells the servers
 * to shut down once every worker has finished, and exits with the first
 * failing task's code. Before it starts any, `hetps-ps reshard --in-place`
 * fits the stores in the data directory to the file's number of parameter
 * servers (ps/reshard.c). `status` asks every shard what it knows. The
 * programs it runs (hetps-ps, hetps-worker) are looked for next to this
 * executable.
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
#include "tune.h"
#include "client.h"

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

/* Directory of this executable, to find hetps-ps and hetps-worker. */
static void bin_dir(char *out, size_t len)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    char *slash;

    if (n <= 0) {
        snprintf(out, len, ".");
        return;
    }
    path[n] = '\0';
    slash = strrchr(path, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, len, "%s", path);
}

static void emit(struct child *ch, const char *line, size_t n)
{
    char out[sizeof ch->buf + 48];
    int k = snprintf(out, sizeof out, "[%s] ", ch->name);

    if (n > sizeof out - (size_t)k - 1)
        n = sizeof out - (size_t)k - 1;
    memcpy(out + k, line, n);
    out[k + (int)n] = '\n';
    if (write(STDOUT_FILENO, out, (size_t)k + n + 1) < 0)
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
            emit(ch, ch->buf, ch->len);
        ch->len = 0;
        close(ch->fd);
        ch->fd = -1;
        return 0;
    }
    ch->len += (size_t)n;
    for (;;) {
        char *nl = memchr(ch->buf, '\n', ch->len);
        size_t k;

        if (!nl) {
            if (ch->len == sizeof ch->buf) { /* a very long line: cut it */
                emit(ch, ch->buf, ch->len);
                ch->len = 0;
            }
            return 1;
        }
        k = (size_t)(nl - ch->buf);
        emit(ch, ch->buf, k);
        memmove(ch->buf, nl + 1, ch->len - k - 1);
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
"                         ps:J keeps its LMDB in DIR/ps-J\n"
"  -m, --mode MODE        async, sync or ssp:S for every task, instead of\n"
"                         the cluster file's hetps.mode\n"
"  -p, --ps-arg ARG       pass ARG to every hetps-ps (repeatable)\n"
"      --no-reshard       start the servers on the stores as they are (a\n"
"                         store of another number of servers is refused)\n"
"  -h, --help             show this help and exit\n");
}

static int cmd_launch(int argc, char **argv)
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
    char **worker_args = NULL;
    const char *who = NULL;
    int64_t stop_at = 0;
    struct hc_cluster cl;
    struct hc_diag diag;
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
    if (hc_cluster_load_file(file, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    for (i = 0; i < diag.n_note; i++)
        fprintf(stderr, "hetps: note: %s\n", diag.note[i]);
    if (mode && hc_cluster_set_mode(&cl, mode, "--mode") != HC_OK) {
        fprintf(stderr, "hetps launch: %s\n", hc_err_msg());
        hc_cluster_free(&cl);
        return 2;
    }
    if (mkdir(data_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "hetps launch: cannot create --data-dir %s: %s\n",
                data_dir, strerror(errno));
        hc_cluster_free(&cl);
        return 2;
    }
    bin_dir(dir, sizeof dir);
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
            for (j = 0; j < n_ps_args; j++)
                args[k++] = (char *)ps_args[j];
        } else {
            for (j = 0; j < n_worker_args; j++)
                args[k++] = worker_args[j];
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
                    emit(&ch[i], ch[i].buf, ch[i].len);
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
    free(ch);
    hc_cluster_free(&cl);
    return first_fail;
}

static int cmd_status(int argc, char **argv)
{
    static const struct option opts[] = {
        { "cluster", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *file = NULL;
    struct pc_shard_status *st;
    struct pc_client *pc = NULL;
    struct hc_cluster cl;
    struct hc_diag diag;
    int c, i, w, rv, down = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': file = optarg; break;
        case 'h':
            printf("Usage: hetps status [--cluster FILE | FILE]\n"
                   "Ask every parameter server of the cluster (FILE, or\n"
                   "TF_CONFIG) for its state and the workers it knows.\n"
                   "Exit status 1 when a server does not answer.\n");
            return 0;
        default:
            fprintf(stderr, "Try 'hetps status --help' for more information.\n");
            return 2;
        }
    }
    if (!file && optind < argc)
        file = argv[optind++];
    if (hc_cluster_resolve(file, NULL, 0, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    st = calloc((size_t)cl.n_ps, sizeof *st);
    rv = st ? pc_open(&pc, &cl, -1, 0,
                      &(struct pc_opts){ .timeout_ms = 1000, .retry_ms = 2000 })
            : HC_ERR_NOMEM;
    if (rv == HC_OK)
        rv = pc_status(pc, st);
    if (rv != HC_OK) {
        fprintf(stderr, "hetps status: %s\n", hc_err_msg());
        free(st);
        pc_close(pc);
        hc_cluster_free(&cl);
        return 1;
    }
    printf("%-10s %-8s %s\n", "TASK", "STATE", "DETAIL");
    for (i = 0; i < cl.n_ps; i++) {
        if (!st[i].up) {
            printf("ps:%-7d %-8s %s: %s\n", i, "down", cl.ps[i].addr, st[i].error);
            down++;
            continue;
        }
        printf("ps:%-7d %-8s %s mode %s incarnation %016llx version %llu "
               "requests %llu duplicates %llu rejected %llu late %llu "
               "stale %llu nonfinite %llu max_ahead %u waiting %u uptime %.1fs\n",
               i, "up", cl.ps[i].addr, st[i].mode,
               (unsigned long long)st[i].incarnation,
               (unsigned long long)st[i].version,
               (unsigned long long)st[i].requests,
               (unsigned long long)st[i].duplicates,
               (unsigned long long)st[i].rejected,
               (unsigned long long)st[i].late,
               (unsigned long long)st[i].stale,
               (unsigned long long)st[i].nonfinite, st[i].max_ahead,
               st[i].waiting, st[i].uptime_ms / 1000.0);
    }
    for (w = 0; w < cl.n_worker; w++) {
        char states[1024] = "";
        const char *devices = "";
        size_t len = 0;
        int seen = 0;

        for (i = 0; i < cl.n_ps; i++) {
            int k;

            for (k = 0; k < st[i].n_members; k++) {
                const struct pc_member *m = &st[i].members[k];

                if (m->worker != w)
                    continue;
                seen++;
                devices = m->devices;
                char lag[40] = "", at[64] = "";

                if (m->lag_ms >= 0)
                    snprintf(lag, sizeof lag, ", lag %.2f ms", (double)m->lag_ms);
                if (m->has_place)
                    snprintf(at, sizeof at, ", at epoch %u batch %u",
                             m->epoch + 1, m->batches);
                len += (size_t)snprintf(states + len, sizeof states - len,
                                        "%sps:%d %s (seen %llums ago, %llu requests, %llu duplicates, "
                                        "clock %llu%s, %.0f samples/s, share %u%s, late %llu)",
                                        len ? "; " : "", i, m->state,
                                        (unsigned long long)m->last_seen_ms,
                                        (unsigned long long)m->requests,
                                        (unsigned long long)m->duplicates,
                                        (unsigned long long)m->clock, at,
                                        (double)m->samples_per_s, m->share, lag,
                                        (unsigned long long)m->late);
                if (len >= sizeof states)
                    len = sizeof states - 1;
            }
        }
        printf("worker:%-3d %-8s %s devices %s%s%s\n", w,
               seen ? "known" : "unknown", cl.worker[w].addr,
               devices[0] ? devices : "-", seen ? ": " : "", states);
    }
    pc_status_free(st, cl.n_ps);
    free(st);
    pc_close(pc);
    hc_cluster_free(&cl);
    return down ? 1 : 0;
}

static int cmd_check_config(int argc, char **argv)
{
    static const struct option opts[] = {
        { "task", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *file = NULL, *task = NULL;
    struct hc_cluster cl;
    struct hc_diag diag;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': task = optarg; break;
        case 'h':
            printf("Usage: hetps check-config [--task JOB:INDEX] [FILE]\n"
                   "Check a cluster file (without FILE: the TF_CONFIG\n"
                   "variable) and print the resolved cluster; on a mistake\n"
                   "print one line per problem and exit 2.\n");
            return 0;
        default:
            fprintf(stderr, "Try 'hetps check-config --help' for more information.\n");
            return 2;
        }
    }
    if (optind < argc)
        file = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "hetps check-config: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    if (hc_cluster_resolve(file, task, 0, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    for (c = 0; c < diag.n_note; c++)
        printf("note: %s\n", diag.note[c]);
    hc_cluster_print(&cl, stdout);
    hc_cluster_free(&cl);
    return 0;
}

/* Commands of one role run by that role's program, as git runs git-foo. */
static int run_role(const char *prog, int argc, char **argv)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    char **args = calloc((size_t)argc + 2, sizeof *args);
    int i;

    if (!args)
        return 1;
    bin_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s", dir, prog);
    args[0] = path;
    for (i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    execv(path, args);
    fprintf(stderr, "hetps: cannot run %s: %s\n", path, strerror(errno));
    free(args);
    return 1;
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: hetps COMMAND [ARG]...\n"
"The front door of hetps, a parameter server for training across unequal\n"
"machines.\n"
"\n"
"Commands:\n"
"  launch CLUSTER_FILE [-- WORKER_ARG...]  start every task on this machine\n"
"  status [FILE]                           what every parameter server knows\n"
"  check-config [FILE]                     check a cluster file or TF_CONFIG\n"
"  export --out DIR [--data-dir D] [FILE]  the shards' variables as .npy files\n"
"  inspect STORE_DIR...                    what a shard's LMDB store holds\n"
"  reshard --from OLD --to NEW --out-dir D move the stores to another number\n"
"                                          of parameter servers\n"
"  eval --model M (--weights DIR | --cluster FILE)\n"
"                                          loss and accuracy on the test set\n"
"  predict --model M (--weights DIR | --cluster FILE) [--images FILE]\n"
"          [--out FILE.npy]                the outputs for each image\n"
"  help                                    this text\n"
"\n"
"'hetps COMMAND --help' describes each command.\n");
}

int main(int argc, char **argv)
{
    hc_log_set_task("hetps");
    hc_tune_process();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "launch"))
        return cmd_launch(argc - 1, argv + 1);
    if (!strcmp(argv[1], "status"))
        return cmd_status(argc - 1, argv + 1);
    if (!strcmp(argv[1], "check-config"))
        return cmd_check_config(argc - 1, argv + 1);
    if (!strcmp(argv[1], "export") || !strcmp(argv[1], "inspect") ||
        !strcmp(argv[1], "reshard"))
        return run_role("hetps-ps", argc - 1, argv + 1);
    if (!strcmp(argv[1], "eval") || !strcmp(argv[1], "predict"))
        return run_role("hetps-worker", argc - 1, argv + 1);
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "hetps: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
