/*
 * hetps_k8s.c — `hetps k8s CLUSTER_FILE [-o DIR]`: Kubernetes manifests for
 * the cluster a file describes. The parameter servers become a StatefulSet
 * behind a headless Service, each with its own PersistentVolumeClaim for
 * its LMDB store; the workers an Indexed Job (JOB_COMPLETION_INDEX) with
 * its own headless Service; the cluster, its addresses rewritten to the
 * pods' DNS names (NAME-ps-0.NAME-ps:2222) and its "hetps" block kept, a
 * ConfigMap. Every pod runs the same command with `--cluster k8s:FILE` and
 * finds its task from its ordinal or index (common/cluster_k8s.c). Only
 * text is written here: nothing talks to a Kubernetes API server.
 */
#include "hetps.h"

#include "cluster.h"
#include "err.h"
#include "tls_cert.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CONF_DIR "/etc/hetps"
#define STORE_DIR "/var/lib/hetps"
#define CERTS_DIR "/run/secrets/hetps"  /* the Secret NAME-certs */

/* Workers in a row that use the same number of GPUs: one Indexed Job. */
struct wgroup {
    char job[96];           /* the Job's name: NAME-worker, NAME-worker-gpu2 */
    int first, n;           /* workers first..first+n-1 */
    int gpus;               /* nvidia.com/gpu each pod asks for */
};

struct k8s_conf {
    const char *name;       /* prefix of every object: "hetps" */
    const char *ns;         /* namespace, NULL: the current one */
    const char *image;
    const char *model;      /* the worker's --model inside the image */
    const char *storage;    /* each ps's claim: "1Gi" */
    const char *storage_class; /* NULL: the cluster's default */
    int port;
    long fs_group;          /* the claims' group, given to the pods too */
    const char *gpu_image;  /* for workers with GPUs */
    const char *certs;      /* --certs DIR: make the certificates there */
    char **worker_args;     /* after "--" */
    int n_worker_args;
    struct wgroup *groups;  /* (n_groups) */
    int n_groups;
};

static void k8s_usage(FILE *f)
{
    fprintf(f,
"Usage: hetps k8s CLUSTER_FILE [-o DIR] [--name NAME] [--namespace NS]\n"
"                 [--image IMAGE] [--gpu-image IMAGE] [--model FILE]\n"
"                 [--storage SIZE]\n"
"                 [--storage-class CLASS] [--port PORT] [--fs-group GID]\n"
"                 [-- WORKER_ARG...]\n"
"Write Kubernetes manifests for the cluster CLUSTER_FILE describes: the\n"
"parameter servers as a StatefulSet (a headless Service, a volume claim\n"
"each), the workers as Indexed Jobs (one per run of workers with the same\n"
"number of GPUs), the cluster as a ConfigMap. Its\n"
"addresses become the pods' DNS names; its \"hetps\" block is kept.\n"
"\n"
"  -o, --out DIR           write DIR/configmap.yaml, DIR/ps.yaml and\n"
"                          DIR/worker.yaml (default: all to stdout)\n"
"      --name NAME         prefix of every object (default hetps)\n"
"      --namespace NS      put every object in NS (default: kubectl's)\n"
"      --image IMAGE       the image with hetps-ps and hetps-worker\n"
"                          (default hetps:latest, as `make image` tags it)\n"
"      --gpu-image IMAGE   the image of workers with GPUs (default hetps:gpu)\n"
"      --model FILE        the model inside the image (default\n"
"                          /opt/hetps/deploy/models/fashion_cnn.json)\n"
"      --storage SIZE      each parameter server's store (default 1Gi)\n"
"      --storage-class C   the claims' storage class (default: the cluster's)\n"
"      --port PORT         the port every task listens on (default 2222)\n"
"      --certs DIR         make the cluster's certificates in DIR for the\n"
"                          pods' names, and DIR/tasks: what the Secret holds\n"
"      --fs-group GID      group that owns each server's volume; Kubernetes\n"
"                          gives it to the pod's processes (default 1000)\n"
"  -- WORKER_ARG...        more hetps-worker flags (e.g. --epochs 10)\n"
"\n"
"Unless the cluster is \"insecure\", every pod mounts the Secret NAME-certs\n"
"at /run/secrets/hetps (HETPS_CERTS): the CA and every task's certificate,\n"
"made for the pods' DNS names by --certs DIR (then: kubectl create secret\n"
"generic NAME-certs --from-file=DIR/tasks, never ca.key).\n"
"Apply with: kubectl apply -f DIR. Check offline with\n"
"deploy/k8s/validate.py DIR (deploy/README.md, Kubernetes).\n");
}

/* A DNS-1123 label of at most max characters. */
static int dns_label(const char *s, int max)
{
    int n = (int)strlen(s), i;

    if (n == 0 || n > max || s[0] == '-' || s[n - 1] == '-')
        return 0;
    for (i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '-'))
            return 0;
    return 1;
}

/* A Kubernetes quantity such as 1Gi, 500Mi, 10G. */
static int quantity(const char *s)
{
    static const char *const suffix[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi",
                                          "k", "M", "G", "T", "P" };
    size_t i, d = strspn(s, "0123456789");

    if (d == 0)
        return 0;
    for (i = 0; i < sizeof suffix / sizeof *suffix; i++)
        if (strcmp(s + d, suffix[i]) == 0)
            return 1;
    return 0;
}

/* s as a YAML double-quoted scalar (JSON escaping is valid YAML). */
static void yq(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void meta(FILE *f, const struct k8s_conf *k, const char *name,
                 const char *component)
{
    fprintf(f, "metadata:\n  name: %s\n", name);
    if (k->ns)
        fprintf(f, "  namespace: %s\n", k->ns);
    fprintf(f, "  labels:\n    app.kubernetes.io/name: hetps\n"
            "    app.kubernetes.io/instance: %s\n", k->name);
    if (component)
        fprintf(f, "    app.kubernetes.io/component: %s\n", component);
}

/* The address of pod `i` of the StatefulSet or Job `set`, under the
 * headless Service NAME-`job`: "set-i.NAME-job[.NS.svc]:PORT". */
static void pod_addr(char *buf, size_t n, const struct k8s_conf *k,
                     const char *set, const char *job, int i)
{
    if (k->ns)
        snprintf(buf, n, "%s-%d.%s-%s.%s.svc:%d", set, i, k->name, job, k->ns,
                 k->port);
    else
        snprintf(buf, n, "%s-%d.%s-%s:%d", set, i, k->name, job, k->port);
}

/* The GPUs a worker's devices name ("gpu:0,gpu:1" -> 2; "auto" -> 0). */
static int gpu_count(const char *devices)
{
    int n = 0;
    const char *s;

    for (s = devices; (s = strstr(s, "gpu:")); s += 4)
        n++;
    return n;
}

/*
 * Cut the workers into runs of the same GPU count, one Indexed Job each, so
 * a CPU worker never waits for a GPU node: one run is the Job NAME-worker;
 * several are NAME-worker-cpu, NAME-worker-gpu2, … (a kind seen again gets
 * its first worker's index appended). -1 when out of memory.
 */
static int worker_groups(struct k8s_conf *k, const struct hc_cluster *c)
{
    int i, j;

    if (!(k->groups = calloc((size_t)c->n_worker, sizeof *k->groups)))
        return -1;
    for (i = 0; i < c->n_worker; i++) {
        int g = gpu_count(c->wconf[i].devices);
        struct wgroup *w;
        if (k->n_groups && k->groups[k->n_groups - 1].gpus == g) {
            k->groups[k->n_groups - 1].n++;
            continue;
        }
        w = &k->groups[k->n_groups++];
        w->first = i;
        w->n = 1;
        w->gpus = g;
    }
    for (i = 0; i < k->n_groups; i++) {
        struct wgroup *w = &k->groups[i];
        if (k->n_groups == 1) {
            snprintf(w->job, sizeof w->job, "%s-worker", k->name);
            continue;
        }
        if (w->gpus)
            snprintf(w->job, sizeof w->job, "%s-worker-gpu%d", k->name,
                     w->gpus);
        else
            snprintf(w->job, sizeof w->job, "%s-worker-cpu", k->name);
        for (j = 0; j < i; j++)
            if (k->groups[j].gpus == w->gpus) {
                size_t l = strlen(w->job);
                snprintf(w->job + l, sizeof w->job - l, "-%d", w->first);
                break;
            }
    }
    return 0;
}

/* The file's JSON with "cluster" rewritten to the pods' names and "task"
 * dropped; the "hetps" block is kept as written. NULL when out of memory. */
static char *cluster_text(const char *path, const struct hc_cluster *c,
                          const struct k8s_conf *k)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL, *text = NULL, addr[HC_HOST_MAX], set[96];
    long len;
    cJSON *root = NULL, *cl, *ps, *wk;
    int i, g;

    if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0 || !(buf = malloc((size_t)len + 1)) ||
        fread(buf, 1, (size_t)len, f) != (size_t)len)
        goto out;
    buf[len] = '\0';
    if (!(root = cJSON_Parse(buf[0] == '\xef' ? buf + 3 : buf)))
        goto out;
    cJSON_DeleteItemFromObjectCaseSensitive(root, "task");
    if (!(cl = cJSON_CreateObject()) ||
        !cJSON_ReplaceItemInObjectCaseSensitive(root, "cluster", cl) ||
        !(ps = cJSON_AddArrayToObject(cl, "ps")) ||
        !(wk = cJSON_AddArrayToObject(cl, "worker")))
        goto out;
    for (i = 0; i < c->n_ps; i++) {
        snprintf(set, sizeof set, "%s-ps", k->name);
        pod_addr(addr, sizeof addr, k, set, "ps", i);
        if (!cJSON_AddItemToArray(ps, cJSON_CreateString(addr)))
            goto out;
    }
    for (g = 0; g < k->n_groups; g++)
        for (i = 0; i < k->groups[g].n; i++) {
            pod_addr(addr, sizeof addr, k, k->groups[g].job, "worker", i);
            if (!cJSON_AddItemToArray(wk, cJSON_CreateString(addr)))
                goto out;
        }
    text = cJSON_Print(root);
out:
    if (f)
        fclose(f);
    free(buf);
    cJSON_Delete(root);
    return text;
}

static void write_configmap(FILE *f, const struct k8s_conf *k,
                            const char *json)
{
    char name[96];
    const char *s, *nl;

    snprintf(name, sizeof name, "%s-cluster", k->name);
    fprintf(f, "# The cluster every pod reads (hetps --cluster k8s:%s/"
            "cluster.json).\n# The servers re-read it when it changes.\n"
            "apiVersion: v1\n"
            "kind: ConfigMap\n", CONF_DIR);
    meta(f, k, name, NULL);
    fprintf(f, "data:\n  cluster.json: |\n");
    for (s = json; *s; s = *nl ? nl + 1 : nl) {
        int tabs = (int)strspn(s, "\t");
        nl = s + strcspn(s, "\n");
        const char *c;
        /* cJSON indents and separates with tabs (a tab inside a string is
         * written \t); YAML indents with spaces */
        fprintf(f, "    %*s", 2 * tabs, "");
        for (c = s + tabs; c < nl; c++)
            fputc(*c == '\t' ? ' ' : *c, f);
        fputc('\n', f);
    }
}

/* The headless Service that gives each pod of `job` its DNS name. */
static void write_service(FILE *f, const struct k8s_conf *k, const char *job)
{
    char name[96];

    snprintf(name, sizeof name, "%s-%s", k->name, job);
    fprintf(f, "apiVersion: v1\nkind: Service\n");
    meta(f, k, name, job);
    fprintf(f, "spec:\n  clusterIP: None\n"
            "  publishNotReadyAddresses: true\n"
            "  selector:\n    app.kubernetes.io/name: hetps\n"
            "    app.kubernetes.io/instance: %s\n"
            "    app.kubernetes.io/component: %s\n"
            "  ports:\n  - name: hetps\n    port: %d\n    targetPort: %d\n",
            k->name, job, k->port, k->port);
}

static void pod_labels(FILE *f, const struct k8s_conf *k, const char *job,
                       int indent)
{
    fprintf(f, "%*sapp.kubernetes.io/name: hetps\n"
            "%*sapp.kubernetes.io/instance: %s\n"
            "%*sapp.kubernetes.io/component: %s\n", indent, "", indent, "",
            k->name, indent, "", job);
}

/* The volume mounts every pod has: the cluster, and the certificates
 * unless the cluster is insecure. */
static void common_mounts(FILE *f, const struct hc_cluster *c)
{
    fprintf(f, "        - name: cluster\n          mountPath: %s\n"
            "          readOnly: true\n", CONF_DIR);
    if (!c->insecure)
        fprintf(f, "        - name: certs\n          mountPath: " CERTS_DIR
                "\n          readOnly: true\n");
}

static void common_volumes(FILE *f, const struct k8s_conf *k,
                           const struct hc_cluster *c)
{
    fprintf(f, "      volumes:\n      - name: cluster\n        configMap:\n"
            "          name: %s-cluster\n", k->name);
    if (!c->insecure)
        fprintf(f, "      - name: certs\n        secret:\n"
                "          secretName: %s-certs\n", k->name);
}

/* The environment line that points a task at its certificates. */
static void certs_env(FILE *f, const struct hc_cluster *c)
{
    if (!c->insecure)
        fprintf(f, "        - name: HETPS_CERTS\n          value: " CERTS_DIR
                "\n");
}

static void write_ps(FILE *f, const struct k8s_conf *k,
                     const struct hc_cluster *c)
{
    char name[96];

    snprintf(name, sizeof name, "%s-ps", k->name);
    fprintf(f, "# Parameter servers: pod %s-N is task ps:N (its ordinal); "
            "each keeps its\n# LMDB store on its own claim, so a restarted "
            "pod resumes where it stopped.\n", name);
    write_service(f, k, "ps");
    fprintf(f, "---\napiVersion: apps/v1\nkind: StatefulSet\n");
    meta(f, k, name, "ps");
    fprintf(f, "spec:\n  serviceName: %s\n  replicas: %d\n"
            "  podManagementPolicy: Parallel\n"
            "  selector:\n    matchLabels:\n", name, c->n_ps);
    pod_labels(f, k, "ps", 6);
    fprintf(f, "  template:\n    metadata:\n      labels:\n");
    pod_labels(f, k, "ps", 8);
    fprintf(f, "    spec:\n      securityContext:\n        fsGroup: %ld\n"
            "      containers:\n      - name: ps\n        image: ", k->fs_group);
    yq(f, k->image);
    fprintf(f, "\n        command: [\"hetps-ps\", \"--cluster\", "
            "\"k8s:%s/cluster.json\",\n"
            "                  \"--listen\", \"tcp://0.0.0.0:%d\", "
            "\"--data-dir\", \"%s/store\"]\n", CONF_DIR, k->port, STORE_DIR);
    fprintf(f, "        env:\n        - name: HETPS_JOB\n          value: ps\n");
    certs_env(f, c);
    fprintf(f, "        ports:\n        - name: hetps\n          containerPort: "
            "%d\n", k->port);
    fprintf(f, "        readinessProbe:\n          tcpSocket:\n            port:"
            " %d\n          periodSeconds: 5\n"
            "        livenessProbe:\n          tcpSocket:\n            port: "
            "%d\n          initialDelaySeconds: 10\n          periodSeconds: "
            "10\n", k->port, k->port);
    fprintf(f, "        volumeMounts:\n        - name: store\n"
            "          mountPath: %s\n", STORE_DIR);
    common_mounts(f, c);
    common_volumes(f, k, c);
    fprintf(f, "  volumeClaimTemplates:\n  - metadata:\n      name: store\n"
            "    spec:\n      accessModes: [\"ReadWriteOnce\"]\n");
    if (k->storage_class)
        fprintf(f, "      storageClassName: %s\n", k->storage_class);
    fprintf(f, "      resources:\n        requests:\n          storage: %s\n",
            k->storage);
}

/* One Indexed Job: pod index j is worker w->first + j. */
static void write_job(FILE *f, const struct k8s_conf *k,
                      const struct hc_cluster *c, const struct wgroup *w)
{
    int i;

    fprintf(f, "---\n# Workers %d..%d: pod %s-J (JOB_COMPLETION_INDEX J) is "
            "task worker:%d+J.\napiVersion: batch/v1\nkind: Job\n", w->first,
            w->first + w->n - 1, w->job, w->first);
    meta(f, k, w->job, "worker");
    fprintf(f, "spec:\n  completionMode: Indexed\n  completions: %d\n"
            "  parallelism: %d\n  backoffLimit: %d\n  template:\n"
            "    metadata:\n      labels:\n", w->n, w->n, 6 * w->n);
    pod_labels(f, k, "worker", 8);
    fprintf(f, "    spec:\n      subdomain: %s-worker\n"
            "      restartPolicy: OnFailure\n      containers:\n"
            "      - name: worker\n        image: ", k->name);
    yq(f, w->gpus ? k->gpu_image : k->image);
    fprintf(f, "\n        command: [\"hetps-worker\", \"--cluster\", "
            "\"k8s:%s/cluster.json\",\n                  \"--model\", ",
            CONF_DIR);
    yq(f, k->model);
    for (i = 0; i < k->n_worker_args; i++) {
        fputs(", ", f);
        yq(f, k->worker_args[i]);
    }
    fprintf(f, "]\n        env:\n        - name: HETPS_JOB\n"
            "          value: worker\n");
    certs_env(f, c);
    if (w->first)
        fprintf(f, "        - name: HETPS_INDEX_OFFSET\n"
                "          value: \"%d\"\n", w->first);
    if (w->gpus)
        fprintf(f, "        resources:\n          limits:\n"
                "            nvidia.com/gpu: %d\n", w->gpus);
    fprintf(f, "        volumeMounts:\n");
    common_mounts(f, c);
    common_volumes(f, k, c);
}

static void write_worker(FILE *f, const struct k8s_conf *k,
                         const struct hc_cluster *c)
{
    int g;

    fprintf(f, "# Workers: an Indexed Job per run of workers with the same "
            "number of GPUs;\n# worker 0 is the chief. A Job completes when "
            "its workers have finished.\n");
    write_service(f, k, "worker");
    for (g = 0; g < k->n_groups; g++)
        write_job(f, k, c, &k->groups[g]);
}

/* Open DIR/file for writing, or stdout when dir is NULL. */
static FILE *open_out(const char *dir, const char *file, char *path, size_t n)
{
    if (!dir) {
        snprintf(path, n, "stdout");
        return stdout;
    }
    snprintf(path, n, "%s/%s", dir, file);
    return fopen(path, "w");
}

static int close_out(FILE *f, const char *path, int *rc)
{
    int bad = ferror(f);

    if (f != stdout ? fclose(f) != 0 : fflush(f) != 0)
        bad = 1;
    if (bad) {
        fprintf(stderr, "hetps k8s: cannot write %s: %s\n", path,
                strerror(errno));
        *rc = 1;
    }
    return bad;
}

static int write_all(const char *dir, const struct k8s_conf *k,
                     const struct hc_cluster *c, const char *json)
{
    static const char *const files[] = { "configmap.yaml", "ps.yaml",
                                         "worker.yaml" };
    char path[1024];
    int i, rc = 0;

    if (dir && mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "hetps k8s: --out %s: cannot make the directory: %s\n",
                dir, strerror(errno));
        return 1;
    }
    for (i = 0; i < 3; i++) {
        FILE *f = open_out(dir, files[i], path, sizeof path);
        if (!f) {
            fprintf(stderr, "hetps k8s: cannot write %s: %s\n", path,
                    strerror(errno));
            return 1;
        }
        if (!dir && i > 0)
            fputs("---\n", f);
        fprintf(f, "# Generated by hetps k8s from a cluster file; "
                "regenerate rather than edit.\n");
        if (i == 0)
            write_configmap(f, k, json);
        else if (i == 1)
            write_ps(f, k, c);
        else
            write_worker(f, k, c);
        if (close_out(f, path, &rc))
            return rc;
    }
    return rc;
}

/* Check the flags' values; 0, or 2 after a message naming the flag. */
static int check_conf(const struct k8s_conf *k)
{
    if (!dns_label(k->name, 40)) {
        fprintf(stderr, "hetps k8s: --name \"%s\": use at most 40 lower-case "
                "letters, digits and '-' (a DNS label; pod names add "
                "-worker-N)\n", k->name);
        return 2;
    }
    if (k->ns && !dns_label(k->ns, 63)) {
        fprintf(stderr, "hetps k8s: --namespace \"%s\" is not a namespace "
                "name (lower-case letters, digits, '-')\n", k->ns);
        return 2;
    }
    if (!quantity(k->storage)) {
        fprintf(stderr, "hetps k8s: --storage \"%s\" is not a size; write "
                "e.g. 1Gi or 500Mi\n", k->storage);
        return 2;
    }
    if (k->storage_class && !dns_label(k->storage_class, 253)) {
        fprintf(stderr, "hetps k8s: --storage-class \"%s\" is not a storage "
                "class name\n", k->storage_class);
        return 2;
    }
    if (k->port < 1 || k->port > 65535) {
        fprintf(stderr, "hetps k8s: --port must be 1..65535\n");
        return 2;
    }
    if (k->fs_group < 0 || k->fs_group > 2147483647) {
        fprintf(stderr, "hetps k8s: --fs-group must be a group id, "
                "0..2147483647\n");
        return 2;
    }
    if (!*k->image || strpbrk(k->image, " \t\n")) {
        fprintf(stderr, "hetps k8s: --image \"%s\" is not an image name\n",
                k->image);
        return 2;
    }
    if (!*k->gpu_image || strpbrk(k->gpu_image, " \t\n")) {
        fprintf(stderr, "hetps k8s: --gpu-image \"%s\" is not an image "
                "name\n", k->gpu_image);
        return 2;
    }
    return 0;
}

/* Copy src to dst, replacing it. 0, or -1 with a message. */
static int copy_to(const char *src, const char *dst)
{
    char buf[8192];
    size_t n;
    FILE *in = fopen(src, "rb"), *o = in ? fopen(dst, "wb") : NULL;
    int rv = in && o ? 0 : -1;

    while (rv == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, o) != n)
            rv = -1;
    if (in && ferror(in))
        rv = -1;
    if (o && fclose(o) != 0)
        rv = -1;
    if (in)
        fclose(in);
    if (rv)
        fprintf(stderr, "hetps k8s: cannot copy %s to %s\n", src, dst);
    return rv;
}

/*
 * --certs DIR: the certificates of the cluster as the pods see it (their
 * DNS names, from the rewritten cluster `json`), made as `hetps certs`
 * does, and DIR/tasks holding what the Secret NAME-certs gets: ca.crt and
 * every task's certificate, never ca.key. 0, or 1 with a message.
 */
static int make_certs(const struct k8s_conf *k, const char *json)
{
    struct hc_cluster pods;
    struct hc_diag diag;
    char dir[4096], src[4200], dst[4200], task[32], name[32];
    int made = 0, i, rv = 1;

    if (hc_cluster_parse(json, strlen(json), "the pods' cluster", &pods,
                         &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 1;
    }
    if (hc_tls_make(&pods, k->certs, &made) != HC_OK) {
        fprintf(stderr, "hetps k8s: %s\n", hc_err_msg());
        goto out;
    }
    snprintf(dir, sizeof dir, "%s/tasks", k->certs);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "hetps k8s: %s: %s\n", dir, strerror(errno));
        goto out;
    }
    for (i = -2; i < pods.n_ps + pods.n_worker; i++) {
        if (i == -2)
            snprintf(name, sizeof name, "ca.crt");
        else if (i == -1)
            snprintf(name, sizeof name, "admin.pem");
        else {
            snprintf(task, sizeof task, "%s:%d", i < pods.n_ps ? "ps" : "worker",
                     i < pods.n_ps ? i : i - pods.n_ps);
            hc_tls_file_name(name, sizeof name, task);
        }
        snprintf(src, sizeof src, "%s/%s", k->certs, name);
        snprintf(dst, sizeof dst, "%s/%s", dir, name);
        if (copy_to(src, dst) != 0)
            goto out;
    }
    fprintf(stderr, "hetps k8s: certificates for the pods' names in %s (%d "
            "made); give them to the pods with:\n  kubectl create secret "
            "generic %s-certs --from-file=%s\n", k->certs, made, k->name, dir);
    rv = 0;
out:
    hc_cluster_free(&pods);
    return rv;
}

int hetps_cmd_k8s(int argc, char **argv)
{
    static const struct option opts[] = {
        { "out", required_argument, NULL, 'o' },
        { "name", required_argument, NULL, 'n' },
        { "namespace", required_argument, NULL, 'N' },
        { "image", required_argument, NULL, 'i' },
        { "model", required_argument, NULL, 'm' },
        { "storage", required_argument, NULL, 's' },
        { "storage-class", required_argument, NULL, 'S' },
        { "port", required_argument, NULL, 'p' },
        { "fs-group", required_argument, NULL, 'g' },
        { "gpu-image", required_argument, NULL, 'G' },
        { "certs", required_argument, NULL, 'C' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct k8s_conf k = { "hetps", NULL, "hetps:latest",
                          "/opt/hetps/deploy/models/fashion_cnn.json",
                          "1Gi", NULL, HC_DEFAULT_PORT, 1000, "hetps:gpu",
                          NULL, NULL, 0, NULL, 0 };
    const char *out = NULL, *file;
    struct hc_cluster c;
    struct hc_diag diag;
    char *json, *end;
    int opt, rc, dd;

    /* options and the file before "--", the worker's flags after it */
    for (dd = 1; dd < argc && strcmp(argv[dd], "--") != 0; dd++)
        ;
    while ((opt = getopt_long(dd, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'o': out = optarg; break;
        case 'n': k.name = optarg; break;
        case 'N': k.ns = optarg; break;
        case 'i': k.image = optarg; break;
        case 'G': k.gpu_image = optarg; break;
        case 'C': k.certs = optarg; break;
        case 'm': k.model = optarg; break;
        case 's': k.storage = optarg; break;
        case 'S': k.storage_class = optarg; break;
        case 'p':
            k.port = (int)strtol(optarg, &end, 10);
            if (*end || end == optarg)
                k.port = 0;
            break;
        case 'g':
            k.fs_group = strtol(optarg, &end, 10);
            if (*end || end == optarg)
                k.fs_group = -1;
            break;
        case 'h': k8s_usage(stdout); return 0;
        default: k8s_usage(stderr); return 2;
        }
    }
    if (optind + 1 != dd) {
        fprintf(stderr, "hetps k8s: give one CLUSTER_FILE (and the worker's "
                "flags after --)\n");
        k8s_usage(stderr);
        return 2;
    }
    file = argv[optind];
    if (dd < argc) {
        k.worker_args = argv + dd + 1;
        k.n_worker_args = argc - dd - 1;
    }
    if ((rc = check_conf(&k)) != 0)
        return rc;
    if (hc_cluster_load_file(file, &c, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    if (worker_groups(&k, &c) != 0 || !(json = cluster_text(file, &c, &k))) {
        fprintf(stderr, "hetps k8s: %s: cannot rewrite the cluster (out of "
                "memory?)\n", file);
        free(k.groups);
        hc_cluster_free(&c);
        return 1;
    }
    rc = write_all(out, &k, &c, json);
    if (rc == 0 && k.certs && !c.insecure)
        rc = make_certs(&k, json);
    if (rc == 0 && out)
        fprintf(stderr, "hetps k8s: wrote %s/configmap.yaml, ps.yaml, "
                "worker.yaml: %d parameter server(s), %d worker(s); "
                "kubectl apply -f %s\n", out, c.n_ps, c.n_worker, out);
    free(json);
    free(k.groups);
    hc_cluster_free(&c);
    return rc;
}
