/*
 * hetps_compose.c — `hetps compose`: a Docker Compose file from a cluster
 * file, so the cluster file stays the one description of the job.
 *
 * One service per task (ps-0, worker-1), each running the image's
 * hetps-ps or hetps-worker with --cluster on the cluster file's directory,
 * mounted read-only (a directory, not the file: an editor that replaces the
 * file gives it a new inode, which a single-file mount would never show),
 * so the shards see every edit. Each ps keeps its store on its own named
 * volume. Two shapes:
 *
 *   one host   a Compose network; each task reachable under the host name
 *              its address gives (a network alias), so the cluster file
 *              works unchanged inside it;
 *   --host H   only the tasks whose addresses are on H, host networking,
 *              the addresses as written: one file per machine.
 *
 * Only fields that both docker-compose 1.29 and Compose v2 read are written
 * (no `version` key: both read it as the Compose specification).
 */
#include <errno.h>
#include <getopt.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster.h"
#include "err.h"
#include "hetps.h"
#include "tls_cert.h"

#define CONF_DIR "/etc/hetps"            /* the cluster file's directory */
#define STORE_DIR "/var/lib/hetps"       /* a ps's named volume */
#define DATA_DIR "/usr/share/datasets/fashion-mnist"
#define MAX_GPUS 64
#define CERTS_DIR "/run/secrets/hetps"   /* a task's certificates, read-only */
#define IMAGE_UID 10001                  /* the image's user hetps (Dockerfile) */

struct task {
    int job;                    /* HC_JOB_PS or HC_JOB_WORKER */
    int index;
    const struct hc_task_addr *a;
    char service[32];           /* "ps-0", "worker-1" */
    int n_gpu;
    int gpu[MAX_GPUS];          /* host device ids of its gpu:N entries */
};

struct opts {
    const char *file, *out, *host, *image, *gpu_image, *data, *compose_ver;
    const char *certs;          /* --certs DIR (made absolute); NULL: insecure */
    int list_hosts, check_gpu;
    char **worker_args;         /* after "--" */
    int n_worker_args;
};

static void usage(FILE *f)
{
    fprintf(f,
"Usage: hetps compose CLUSTER_FILE [OPTION]... [-- WORKER_ARG...]\n"
"Write a Docker Compose file with one service per task of the cluster file\n"
"(ps-0, worker-1 ...). WORKER_ARGs go to every hetps-worker (e.g. --model\n"
"deploy/models/fashion_cnn.json --epochs 5).\n"
"\n"
"  -o, --out FILE          write here (default: standard output)\n"
"      --host NAME         only the tasks on host NAME (as the addresses\n"
"                          write it), with host networking: one file per\n"
"                          machine\n"
"      --list-hosts        print each host and its tasks and ports, and exit\n"
"      --image IMAGE       image of the tasks (default hetps:latest)\n"
"      --gpu-image IMAGE   image of the workers with GPUs (default hetps:gpu)\n"
"      --data DIR          mount DIR (Fashion-MNIST IDX files) read-only\n"
"                          into the workers (default: the image's own)\n"
"      --compose-version V check that Compose V (1.29.2, 2.20 ...) reads\n"
"                          every field written\n"
"      --check-gpu         check that this host's Docker has the NVIDIA\n"
"                          runtime when a GPU worker is written\n"
"      --certs DIR         the cluster's certificates (made here when\n"
"                          missing, as `hetps certs` does; default: certs/\n"
"                          beside the output file). Each container gets,\n"
"                          read-only at " CERTS_DIR ", DIR/tasks/SERVICE:\n"
"                          ca.crt, its own certificate and admin.pem (for\n"
"                          its HEALTHCHECK); ca.key stays on this host.\n"
"                          Not used for an \"insecure\" cluster\n"
"  -h, --help              this text\n"
"\n"
"Then: docker-compose -f FILE up -d (Compose v2: docker compose). After an\n"
"edit of the cluster file, run this again and 'up -d --remove-orphans':\n"
"only the added tasks start, removed ones stop.\n");
}

/* A YAML double-quoted scalar. */
static void yq(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int is_ip_literal(const char *h)
{
    if (strchr(h, ':'))
        return 1;                                   /* IPv6 */
    return strspn(h, "0123456789.") == strlen(h);   /* IPv4 */
}

/* A name a Compose network alias can be: letters, digits, '-', '.'. */
static int is_dns_name(const char *h)
{
    size_t n = strlen(h);

    return n > 0 && n < 254 && h[0] != '-' && h[0] != '.' &&
           strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789-.") == n;
}

/* "gpu:0,gpu:1" → host ids {0, 1}; other entries (cpu, auto) none.
 * Returns 0, or -1 with a message for a gpu entry without an id. */
static int parse_gpus(const char *src, int w, const char *devices, struct task *t)
{
    char buf[128], *tok, *save = NULL;

    snprintf(buf, sizeof buf, "%s", devices);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long id;

        while (*tok == ' ')
            tok++;
        if (strncmp(tok, "gpu", 3))
            continue;
        id = tok[3] == ':' ? strtol(tok + 4, &end, 10) : -1;
        if (id < 0 || id > 1023 || tok[3] != ':' || *end || t->n_gpu == MAX_GPUS) {
            fprintf(stderr, "hetps compose: %s: hetps.workers[%d].devices: "
                    "'%s' is not gpu:N; name each GPU's id (gpu:0,gpu:1)\n",
                    src, w, tok);
            return -1;
        }
        t->gpu[t->n_gpu++] = (int)id;
    }
    return 0;
}

/* The hosts of the cluster in order of first appearance. */
static int list_hosts(struct task *t, int n, const char **hosts)
{
    int i, j, nh = 0;

    for (i = 0; i < n; i++) {
        for (j = 0; j < nh; j++)
            if (!strcmp(hosts[j], t[i].a->host))
                break;
        if (j == nh)
            hosts[nh++] = t[i].a->host;
    }
    return nh;
}

/*
 * One host's tasks share a Compose network only when each can be told
 * apart by name: every host a DNS name (not an IP address, not localhost),
 * no two tasks on one name, no name another task's service. Returns 0, or
 * -1 after one line per problem.
 */
static int check_aliases(const char *src, const struct task *t, int n)
{
    int i, j, bad = 0;

    for (i = 0; i < n; i++) {
        const char *h = t[i].a->host;

        if (is_ip_literal(h) || !strcmp(h, "localhost") || !is_dns_name(h)) {
            fprintf(stderr, "hetps compose: %s: cluster.%s[%d] '%s': '%s' cannot "
                    "be a Compose network alias (an IP address, localhost or "
                    "not a host name); give each task a host name "
                    "(\"ps0:2222\"), or write one file per machine with "
                    "--host (hosts: hetps compose FILE --list-hosts)\n",
                    src, hc_job_name(t[i].job), t[i].index, t[i].a->addr, h);
            bad = 1;
            continue;
        }
        for (j = 0; j < n; j++) {
            if (j > i && !strcmp(h, t[j].a->host)) {
                fprintf(stderr, "hetps compose: %s: %s:%d and %s:%d are both on "
                        "host '%s': on one Compose network each task needs a "
                        "host name of its own (a network alias); rename one, or "
                        "use --host for one file per machine\n", src,
                        hc_job_name(t[i].job), t[i].index,
                        hc_job_name(t[j].job), t[j].index, h);
                bad = 1;
            }
            if (j != i && !strcmp(h, t[j].service)) {
                fprintf(stderr, "hetps compose: %s: %s:%d's host '%s' is the "
                        "name of %s:%d's service; choose another host name\n",
                        src, hc_job_name(t[i].job), t[i].index, h,
                        hc_job_name(t[j].job), t[j].index);
                bad = 1;
            }
        }
    }
    return bad ? -1 : 0;
}

/*
 * The Compose fields written and the first docker-compose 1.x that reads
 * them (Compose v2 reads them all). Returns 0, or -1 naming the field.
 */
static int check_compose_version(const char *v, int gpu)
{
    int major = 0, minor = 0;
    const char *p = v;

    if (*p == 'v' || *p == 'V')
        p++;
    if (sscanf(p, "%d.%d", &major, &minor) < 1 || major < 1) {
        fprintf(stderr, "hetps compose: --compose-version '%s': not a version "
                "(1.29.2, 2.20.2)\n", v);
        return -1;
    }
    if (major >= 2)
        return 0;
    if (minor < 27) {
        fprintf(stderr, "hetps compose: docker-compose %s lacks fields this file "
                "needs: an unversioned file (the Compose specification) and "
                "depends_on's 'condition: service_healthy' need 1.27 or later; "
                "install docker-compose 1.29 or Compose v2\n", v);
        return -1;
    }
    if (gpu && minor < 28) {
        fprintf(stderr, "hetps compose: docker-compose %s lacks the field "
                "deploy.resources.reservations.devices (GPU workers), read "
                "from 1.28 on; install docker-compose 1.29 or Compose v2\n", v);
        return -1;
    }
    return 0;
}

/* Whether this host's Docker daemon has the NVIDIA runtime (the NVIDIA
 * container toolkit). Returns 0 when it has, -1 with a message otherwise. */
static int check_gpu_runtime(const struct task *t)
{
    char line[4096] = "";
    FILE *p = popen("docker info --format '{{json .Runtimes}}' 2>&1", "r");
    int found = 0;

    if (!p) {
        fprintf(stderr, "hetps compose: --check-gpu: cannot run docker: %s\n",
                strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, p))
        if (strstr(line, "nvidia"))
            found = 1;
    if (pclose(p) != 0) {
        fprintf(stderr, "hetps compose: --check-gpu: 'docker info' failed: %s",
                line);
        return -1;
    }
    if (!found) {
        fprintf(stderr, "hetps compose: %s (%s) asks for GPUs, but this host's "
                "Docker has no nvidia runtime ('docker info' lists none): "
                "install the NVIDIA container toolkit and run 'nvidia-ctk "
                "runtime configure --runtime=docker', or give that worker "
                "\"devices\": \"cpu\"\n", t->service, t->a->addr);
        return -1;
    }
    return 0;
}

static void write_list(FILE *f, char **v, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        fputs(", ", f);
        yq(f, v[i]);
    }
}

static void write_service(FILE *f, const struct opts *o, const struct task *t,
                          const struct task *all, int n_all, const char *dir,
                          const char *base, int host_net)
{
    char cfile[PATH_MAX + 16], task[32], listen[64];
    int i, first;

    snprintf(cfile, sizeof cfile, "%s/%s", CONF_DIR, base);
    snprintf(task, sizeof task, "%s:%d", hc_job_name(t->job), t->index);
    fprintf(f, "  %s:\n    image: ", t->service);
    yq(f, t->n_gpu ? o->gpu_image : o->image);
    fprintf(f, "\n    command: [\"%s\", \"--cluster\", ",
            t->job == HC_JOB_PS ? "hetps-ps" : "hetps-worker");
    yq(f, cfile);
    fprintf(f, ", \"--task\", \"%s\"", task);
    if (t->job == HC_JOB_PS) {
        fprintf(f, ", \"--data-dir\", \"" STORE_DIR "\"");
        if (!host_net) {
            snprintf(listen, sizeof listen, "tcp://0.0.0.0:%d", t->a->port);
            fprintf(f, ", \"--listen\", \"%s\"", listen);
        }
    } else {
        if (t->n_gpu) {
            /* The container sees its reserved GPUs numbered from 0. */
            fprintf(f, ", \"--devices\", \"");
            for (i = 0; i < t->n_gpu; i++)
                fprintf(f, "%sgpu:%d", i ? "," : "", i);
            fputc('"', f);
        }
        write_list(f, o->worker_args, o->n_worker_args);
    }
    fputs("]\n", f);
    if (host_net) {
        fputs("    network_mode: host\n", f);
    } else {
        fputs("    networks:\n      default:\n        aliases: [", f);
        yq(f, t->a->host);
        fputs("]\n", f);
    }
    fputs("    volumes:\n      - ", f);
    {
        char v[PATH_MAX + 32];

        snprintf(v, sizeof v, "%s:" CONF_DIR ":ro", dir);
        yq(f, v);
        if (t->job == HC_JOB_PS)
            fprintf(f, "\n      - \"%s:" STORE_DIR "\"", t->service);
        else if (o->data) {
            snprintf(v, sizeof v, "%s:" DATA_DIR ":ro", o->data);
            fputs("\n      - ", f);
            yq(f, v);
        }
        if (o->certs) {
            snprintf(v, sizeof v, "%s/tasks/%s:" CERTS_DIR ":ro", o->certs,
                     t->service);
            fputs("\n      - ", f);
            yq(f, v);
        }
    }
    if (o->certs)
        fputs("\n    environment:\n      HETPS_CERTS: \"" CERTS_DIR "\"", f);
    /* A ps comes back whatever stopped it but `docker stop`; a worker that
     * finished (exit 0) stays done, one that crashed comes back. */
    fprintf(f, "\n    restart: %s\n",
            t->job == HC_JOB_PS ? "unless-stopped" : "on-failure");
    fputs("    healthcheck:\n"
          "      test: [\"CMD\", \"hetps\", \"health\"]\n"
          "      interval: 2s\n      timeout: 5s\n      retries: 3\n"
          "      start_period: 120s\n", f);
    if (t->job == HC_JOB_WORKER) {
        first = 1;
        for (i = 0; i < n_all; i++) {
            /* Per host: only the servers of this file. */
            if (all[i].job != HC_JOB_PS ||
                (host_net && strcmp(all[i].a->host, t->a->host)))
                continue;
            if (first)
                fputs("    depends_on:\n", f);
            first = 0;
            fprintf(f, "      %s:\n        condition: service_healthy\n",
                    all[i].service);
        }
    }
    if (t->n_gpu) {
        fputs("    deploy:\n      resources:\n        reservations:\n"
              "          devices:\n            - driver: nvidia\n"
              "              capabilities: [gpu]\n              device_ids: [", f);
        for (i = 0; i < t->n_gpu; i++)
            fprintf(f, "%s\"%d\"", i ? ", " : "", t->gpu[i]);
        fputs("]\n", f);
    }
}

/* Copy src to dst (mode 0600), replacing it. 0, or -1 with a message. */
static int copy_file(const char *src, const char *dst)
{
    char buf[8192];
    ssize_t n = 0;
    int in, out, rv = 0;

    if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "hetps compose: %s: %s\n", src, strerror(errno));
        return -1;
    }
    out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        fprintf(stderr, "hetps compose: %s: %s\n", dst, strerror(errno));
        close(in);
        return -1;
    }
    while (rv == 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n)
            rv = -1;
    if (n < 0 || rv != 0 || close(out) != 0) {
        fprintf(stderr, "hetps compose: cannot write %s\n", dst);
        rv = -1;
    }
    close(in);
    return rv;
}

/*
 * The cluster's certificates in o->certs (made when missing), and for each
 * task a directory DIR/tasks/SERVICE holding what its container may read:
 * ca.crt, its own certificate and admin.pem (the HEALTHCHECK's identity),
 * owned by the image's user when this runs as root. 0, or -1 with a message.
 */
static int task_certs(const struct opts *o, const struct hc_cluster *cl,
                      const struct task *t, int n)
{
    char dir[PATH_MAX], src[PATH_MAX + 64], dst[PATH_MAX + 64], name[32];
    char task[32];
    const char *files[3];
    int i, k, made = 0;

    if (hc_tls_make(cl, o->certs, &made) != HC_OK) {
        fprintf(stderr, "hetps compose: %s\n", hc_err_msg());
        return -1;
    }
    snprintf(dir, sizeof dir, "%s/tasks", o->certs);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "hetps compose: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (o->host && strcmp(t[i].a->host, o->host))
            continue;
        snprintf(task, sizeof task, "%s:%d", hc_job_name(t[i].job), t[i].index);
        hc_tls_file_name(name, sizeof name, task);
        files[0] = "ca.crt";
        files[1] = name;
        files[2] = "admin.pem";
        snprintf(dst, sizeof dst, "%s/%s", dir, t[i].service);
        if (mkdir(dst, 0700) != 0 && errno != EEXIST) {
            fprintf(stderr, "hetps compose: %s: %s\n", dst, strerror(errno));
            return -1;
        }
        if (geteuid() == 0 && chown(dst, IMAGE_UID, IMAGE_UID) != 0) {
            fprintf(stderr, "hetps compose: %s: %s\n", dst, strerror(errno));
            return -1;
        }
        for (k = 0; k < 3; k++) {
            snprintf(src, sizeof src, "%s/%s", o->certs, files[k]);
            snprintf(dst, sizeof dst, "%s/%s/%s", dir, t[i].service, files[k]);
            if (copy_file(src, dst) != 0)
                return -1;
            if (geteuid() == 0 && chown(dst, IMAGE_UID, IMAGE_UID) != 0) {
                fprintf(stderr, "hetps compose: %s: %s\n", dst, strerror(errno));
                return -1;
            }
        }
    }
    if (made)
        fprintf(stderr, "hetps compose: made the cluster's CA and "
                "certificates in %s (%d files)\n", o->certs, made);
    if (geteuid() != 0)
        fprintf(stderr, "hetps compose: note: not root, so %s/tasks is not "
                "given to the image's user (uid %d): the containers can read "
                "it only if you run them as your own user\n", o->certs,
                IMAGE_UID);
    return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {
        { "out", required_argument, NULL, 'o' },
        { "host", required_argument, NULL, 'H' },
        { "list-hosts", no_argument, NULL, 'L' },
        { "image", required_argument, NULL, 'i' },
        { "gpu-image", required_argument, NULL, 'g' },
        { "data", required_argument, NULL, 'd' },
        { "compose-version", required_argument, NULL, 'V' },
        { "check-gpu", no_argument, NULL, 'G' },
        { "certs", required_argument, NULL, 'C' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    o->image = "hetps:latest";
    o->gpu_image = "hetps:gpu";
    /* What follows "--" goes to the workers, untouched. */
    for (c = 1; c < argc && strcmp(argv[c], "--"); c++)
        ;
    if (c < argc) {
        o->worker_args = argv + c + 1;
        o->n_worker_args = argc - c - 1;
    }
    argc = c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case 'H': o->host = optarg; break;
        case 'L': o->list_hosts = 1; break;
        case 'i': o->image = optarg; break;
        case 'g': o->gpu_image = optarg; break;
        case 'd': o->data = optarg; break;
        case 'V': o->compose_ver = optarg; break;
        case 'G': o->check_gpu = 1; break;
        case 'C': o->certs = optarg; break;
        case 'h': usage(stdout); return 1;
        default:
            fprintf(stderr, "Try 'hetps compose --help' for more information.\n");
            return -1;
        }
    }
    if (optind < argc)
        o->file = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "hetps compose: unexpected argument '%s' (worker "
                "arguments go after --)\n", argv[optind]);
        return -1;
    }
    if (!o->file) {
        fprintf(stderr, "hetps compose: no cluster file given\n");
        usage(stderr);
        return -1;
    }
    if (o->data && o->data[0] != '/') {
        fprintf(stderr, "hetps compose: --data '%s': give an absolute path\n",
                o->data);
        return -1;
    }
    return 0;
}

int hetps_cmd_compose(int argc, char **argv)
{
    struct opts o = { 0 };
    struct hc_cluster cl;
    struct hc_diag diag;
    struct task *t = NULL;
    const char **hosts = NULL;
    char real[PATH_MAX], certs_abs[PATH_MAX], *slash;
    const char *base;
    int i, j, n, nh, rv = 2, gpu = 0, host_net;
    FILE *f = NULL;

    if ((i = parse_opts(argc, argv, &o)) != 0)
        return i > 0 ? 0 : 2;
    if (hc_cluster_load_file(o.file, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    if (!realpath(o.file, real)) {
        fprintf(stderr, "hetps compose: %s: %s\n", o.file, strerror(errno));
        goto out;
    }
    slash = strrchr(real, '/');
    *slash = '\0';
    base = slash + 1;
    n = cl.n_ps + cl.n_worker;
    t = calloc((size_t)n, sizeof *t);
    hosts = calloc((size_t)n, sizeof *hosts);
    if (!t || !hosts) {
        fprintf(stderr, "hetps compose: out of memory\n");
        goto out;
    }
    for (i = 0; i < n; i++) {
        struct task *x = &t[i];

        x->job = i < cl.n_ps ? HC_JOB_PS : HC_JOB_WORKER;
        x->index = i < cl.n_ps ? i : i - cl.n_ps;
        x->a = x->job == HC_JOB_PS ? &cl.ps[x->index] : &cl.worker[x->index];
        snprintf(x->service, sizeof x->service, "%s-%d", hc_job_name(x->job),
                 x->index);
        if (x->job == HC_JOB_WORKER &&
            parse_gpus(cl.source, x->index, cl.wconf[x->index].devices, x))
            goto out;
    }
    nh = list_hosts(t, n, hosts);
    if (o.list_hosts) {
        for (i = 0; i < nh; i++) {
            printf("%s", hosts[i]);
            for (j = 0; j < n; j++)
                if (!strcmp(t[j].a->host, hosts[i]))
                    printf(" %s:%d(port %d)", hc_job_name(t[j].job), t[j].index,
                           t[j].a->port);
            printf("\n");
        }
        rv = 0;
        goto out;
    }
    host_net = o.host != NULL;
    if (host_net) {
        for (i = 0; i < nh && strcmp(hosts[i], o.host); i++)
            ;
        if (i == nh) {
            fprintf(stderr, "hetps compose: --host '%s': no task of %s is on it; "
                    "its hosts:", o.host, cl.source);
            for (i = 0; i < nh; i++)
                fprintf(stderr, " %s", hosts[i]);
            fprintf(stderr, "\n");
            goto out;
        }
    } else if (check_aliases(cl.source, t, n)) {
        goto out;
    }
    for (i = 0; i < n; i++) {
        if (host_net && strcmp(t[i].a->host, o.host))
            continue;
        if (t[i].n_gpu) {
            gpu = 1;
            if (o.check_gpu && check_gpu_runtime(&t[i]))
                goto out;
        }
    }
    if (o.compose_ver && check_compose_version(o.compose_ver, gpu))
        goto out;
    if (cl.insecure) {
        o.certs = NULL;
    } else {
        /* Absolute: Compose reads a relative path from the file's folder. */
        char out_dir[PATH_MAX], *sl;

        if (!o.certs) {
            snprintf(out_dir, sizeof out_dir, "%s", o.out ? o.out : "./x");
            sl = strrchr(out_dir, '/');
            if (sl)
                *sl = '\0';
            else
                snprintf(out_dir, sizeof out_dir, ".");
            if (!realpath(out_dir, certs_abs) ||
                strlen(certs_abs) + 7 >= sizeof certs_abs) {
                fprintf(stderr, "hetps compose: %s: %s\n", out_dir,
                        strerror(errno));
                goto out;
            }
            strcat(certs_abs, "/certs");
        } else if (o.certs[0] != '/') {
            fprintf(stderr, "hetps compose: --certs '%s': give an absolute "
                    "path\n", o.certs);
            goto out;
        } else {
            snprintf(certs_abs, sizeof certs_abs, "%s", o.certs);
        }
        o.certs = certs_abs;
        if (task_certs(&o, &cl, t, n) != 0)
            goto out;
    }

    f = o.out ? fopen(o.out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "hetps compose: -o %s: %s\n", o.out, strerror(errno));
        goto out;
    }
    fprintf(f, "# Written by `hetps compose` from %s%s%s.\n"
            "# Edit the cluster file, not this: run hetps compose again, then\n"
            "# `docker-compose up -d --remove-orphans` (Compose v2: docker compose).\n"
            "services:\n", cl.source, host_net ? ", host " : "",
            host_net ? o.host : "");
    for (i = 0; i < n; i++)
        if (!host_net || !strcmp(t[i].a->host, o.host))
            write_service(f, &o, &t[i], t, n, real, base, host_net);
    for (i = 0, j = 0; i < n; i++)
        if (t[i].job == HC_JOB_PS &&
            (!host_net || !strcmp(t[i].a->host, o.host)))
            fprintf(f, "%s  %s: {}\n", j++ ? "" : "volumes:\n", t[i].service);
    if (ferror(f) || (o.out && fclose(f) != 0)) {
        fprintf(stderr, "hetps compose: cannot write %s\n",
                o.out ? o.out : "standard output");
        f = NULL;
        goto out;
    }
    f = NULL;
    rv = 0;
out:
    if (f && f != stdout)
        fclose(f);
    free(hosts);
    free(t);
    hc_cluster_free(&cl);
    return rv;
}
