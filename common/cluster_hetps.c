/*
 * cluster_hetps.c — the "hetps" block of a cluster definition, hetps's own
 * settings beside TensorFlow's ClusterSpec: the training mode ("async",
 * "sync", "ssp:S" or "ssp" with "staleness"), backup workers for sync,
 * each worker's devices, and transport security ("insecure":
 * plain TCP; "certs": the certificate directory). Checked against the cluster
 * already read (worker count, chief mapping); every mistake is reported
 * through cl_problem (cluster_read.c).
 */
#include "cluster_hetps.h"
#include "err.h"

#include <ctype.h>
#include <string.h>

#define SSP_MAX 1000000      /* largest staleness bound accepted */
#define DEV_MAX 64           /* devices per worker */

static const char *const hetps_keys[] = { "workers", "mode", "staleness",
                                          "backup_workers", "token_file",
                                          "metrics_port", "insecure", "certs" };
static const char *const wconf_keys[] = { "devices" };

/* Validate a device list; the normalised list goes to out. */
static int parse_devices(const char *s, char *out, size_t on, char *why,
                         size_t wn)
{
    char items[DEV_MAX][16], all[DEV_MAX * 16];
    int n = 0, is_auto = 0, i;
    size_t at = 0;

    for (;;) {
        const char *end = strchr(s, ','), *b = s, *e;
        char item[16];
        long long k;
        e = end ? end : s + strlen(s);
        while (b < e && isspace((unsigned char)*b))
            b++;
        while (e > b && isspace((unsigned char)e[-1]))
            e--;
        if (b == e)
            return snprintf(why, wn, "has an empty device; list devices "
                            "separated by commas, e.g. \"gpu:0,gpu:1\""), -1;
        if (n == DEV_MAX)
            return snprintf(why, wn, "lists more than %d devices",
                            DEV_MAX), -1;
        if (e - b == 4 && memcmp(b, "auto", 4) == 0) {
            is_auto = 1;
            snprintf(item, sizeof item, "auto");
        } else if (e - b == 3 && memcmp(b, "cpu", 3) == 0) {
            snprintf(item, sizeof item, "cpu");
        } else {
            char num[8];
            size_t nl = (size_t)(e - b) - 4;
            if (e - b < 5 || e - b > 10 || (memcmp(b, "cpu:", 4) != 0 &&
                memcmp(b, "gpu:", 4) != 0))
                goto bad;
            memcpy(num, b + 4, nl);
            num[nl] = '\0';
            if (num[0] == '-' || cl_parse_decimal(num, &k) != 0 || k > 4095)
                goto bad;
            snprintf(item, sizeof item, "%.3s:%d", b, (int)k);
        }
        for (i = 0; i < n; i++)
            if (strcmp(items[i], item) == 0)
                return snprintf(why, wn, "lists %s twice", item), -1;
        strcpy(items[n++], item);
        at += (size_t)snprintf(all + at, sizeof all - at, "%s%s",
                               at ? "," : "", item);
        if (!end)
            break;
        s = end + 1;
        continue;
bad:
        return snprintf(why, wn, "\"%.*s\" is not a device; use \"cpu\", "
                        "\"cpu:N\", \"gpu:N\" (comma-separated) or \"auto\"",
                        (int)(e - b > 24 ? 24 : e - b), b), -1;
    }
    if (is_auto && n > 1)
        return snprintf(why, wn, "\"auto\" cannot be combined with other "
                        "devices"), -1;
    if (at >= on)
        return snprintf(why, wn, "too long (at most %zu characters)",
                        on - 1), -1;
    memcpy(out, all, at + 1);
    return 0;
}

static void read_workers(struct cl_parse *p, const cJSON *w,
                         struct hc_cluster *c)
{
    const cJSON *e, *dev;
    char key[64], why[192], norm[sizeof c->wconf[0].devices];
    int n, i = 0;

    if (!cJSON_IsArray(w)) {
        cl_problem(p, "hetps.workers", "must be a list of objects such as "
                   "[{\"devices\": \"gpu:0\"}, {\"devices\": \"cpu\"}], got "
                   "%s", cl_jtype(w));
        return;
    }
    n = cJSON_GetArraySize(w);
    if (c->n_worker >= 0 && n > c->n_worker)
        cl_problem(p, "hetps.workers", "lists %d workers but the cluster has "
                   "%d%s; remove the extra entries or add workers to "
                   "cluster.worker", n, c->n_worker, c->chief_mapped
                   ? " (the chief included, as workers[0])" : "");
    cJSON_ArrayForEach(e, w) {
        snprintf(key, sizeof key, "hetps.workers[%d]", i);
        if (!cJSON_IsObject(e)) {
            cl_problem(p, key, "must be an object such as {\"devices\": "
                       "\"cpu\"}, got %s", cl_jtype(e));
        } else {
            cl_check_keys(p, e, key, wconf_keys, NKEYS(wconf_keys), 1);
            dev = cJSON_GetObjectItemCaseSensitive(e, "devices");
            snprintf(key, sizeof key, "hetps.workers[%d].devices", i);
            if (dev && !cJSON_IsString(dev))
                cl_problem(p, key, "must be a string such as \"gpu:0,gpu:1\", "
                           "\"cpu\" or \"auto\", got %s", cl_jtype(dev));
            else if (dev && parse_devices(dev->valuestring, norm, sizeof norm,
                                          why, sizeof why) != 0)
                cl_problem(p, key, "\"%.64s\": %s", dev->valuestring, why);
            else if (dev && i < c->n_worker)
                strcpy(c->wconf[i].devices, norm);
        }
        i++;
    }
}

const char *hc_mode_name(enum hc_mode mode)
{
    return mode == HC_MODE_SYNC ? "sync" : mode == HC_MODE_SSP ? "ssp"
           : "async";
}

/* The text of a mode: 0 and *mode (and *s for "ssp:S", else -1); -1 when
 * it is no mode; -2 when the bound after "ssp:" is not 0..SSP_MAX. */
static int parse_mode(const char *v, enum hc_mode *mode, long long *s)
{
    *s = -1;
    if (strcmp(v, "async") == 0 || strcmp(v, "sync") == 0) {
        *mode = v[0] == 'a' ? HC_MODE_ASYNC : HC_MODE_SYNC;
        return 0;
    }
    if (strncmp(v, "ssp", 3) != 0 || (v[3] != '\0' && v[3] != ':'))
        return -1;
    *mode = HC_MODE_SSP;
    if (v[3] == ':') {
        int r = cl_parse_decimal(v + 4, s);

        if (r != 0 || *s < 0 || *s > SSP_MAX)
            return -2;
    }
    return 0;
}

/* mode: "async", "sync", "ssp:S", or "ssp" with "staleness": S. */
static void read_mode(struct cl_parse *p, const cJSON *m, const cJSON *st,
                      struct hc_cluster *c)
{
    long long s = -1, s2 = -1;
    enum hc_mode mode;
    const char *v;
    int r;

    if (st) {
        if (!cJSON_IsNumber(st) || cl_json_whole(st, &s2) != 0 || s2 < 0 ||
            s2 > SSP_MAX) {
            cl_problem(p, "hetps.staleness", "must be a whole number 0..%d, "
                       "got %s", SSP_MAX, cJSON_IsNumber(st) ? "another number"
                       : cl_jtype(st));
            st = NULL;
            s2 = -1;
        }
    }
    if (!m) {
        if (st)
            cl_problem(p, "hetps.staleness", "applies only to mode ssp; add "
                       "\"mode\": \"ssp\" or remove it");
        return;
    }
    if (!cJSON_IsString(m)) {
        cl_problem(p, "hetps.mode", "must be a string: \"async\", \"sync\" or "
                   "\"ssp:S\", got %s", cl_jtype(m));
        return;
    }
    v = m->valuestring;
    r = parse_mode(v, &mode, &s);
    if (r == -1) {
        cl_problem(p, "hetps.mode", "\"%.40s\" is not a mode; valid: "
                   "\"async\", \"sync\", \"ssp:S\" (S = staleness bound, a "
                   "whole number >= 0)", v);
        return;
    }
    if (r == -2) {
        cl_problem(p, "hetps.mode", "\"%.40s\": the staleness bound after "
                   "\"ssp:\" must be a whole number 0..%d, e.g. \"ssp:3\"",
                   v, SSP_MAX);
        return;
    }
    if (mode != HC_MODE_SSP) {
        c->mode = mode;
        if (st)
            cl_problem(p, "hetps.staleness", "applies only to mode ssp, but "
                       "mode is \"%s\"; remove it", v);
        return;
    }
    if (s >= 0) {
        if (st && s2 != s) {
            cl_problem(p, "hetps.staleness", "%lld disagrees with mode "
                       "\"%s\"; give the bound once", s2, v);
            return;
        }
    } else if (st) {
        s = s2;
    } else {
        cl_problem(p, "hetps.mode", "\"ssp\" needs a staleness bound: write "
                   "\"ssp:3\" or add \"staleness\": 3");
        return;
    }
    c->mode = HC_MODE_SSP;
    c->staleness = (int)s;
}

int hc_cluster_set_mode(struct hc_cluster *c, const char *text,
                        const char *source)
{
    enum hc_mode mode;
    long long s;

    if (!c || !text)
        return hc_err_set(HC_ERR_INVAL, "%s: no mode given", source);
    if (parse_mode(text, &mode, &s) != 0 || (mode == HC_MODE_SSP && s < 0))
        return hc_err_set(HC_ERR_INVAL, "%s: \"%.40s\" is not a mode; valid: "
                          "async, sync, ssp:S (S = staleness bound, a whole "
                          "number 0..%d, e.g. ssp:3)", source, text, SSP_MAX);
    c->mode = mode;
    c->staleness = mode == HC_MODE_SSP ? (int)s : 0;
    return HC_OK;
}

void cl_read_hetps(struct cl_parse *p, const cJSON *h, struct hc_cluster *c)
{
    const cJSON *w, *b, *t;
    long long n;

    if (!cJSON_IsObject(h)) {
        cl_problem(p, "hetps", "must be an object such as {\"mode\": "
                   "\"async\"}, got %s", cl_jtype(h));
        return;
    }
    cl_check_keys(p, h, "hetps", hetps_keys, NKEYS(hetps_keys), 1);
    read_mode(p, cJSON_GetObjectItemCaseSensitive(h, "mode"),
              cJSON_GetObjectItemCaseSensitive(h, "staleness"), c);
    if ((w = cJSON_GetObjectItemCaseSensitive(h, "workers")))
        read_workers(p, w, c);
    if ((b = cJSON_GetObjectItemCaseSensitive(h, "backup_workers"))) {
        if (!cJSON_IsNumber(b) || cl_json_whole(b, &n) != 0)
            cl_problem(p, "hetps.backup_workers", "must be a whole number "
                       "such as 1, got %s",
                       cJSON_IsNumber(b) ? "a fraction" : cl_jtype(b));
        else if (n < 0)
            cl_problem(p, "hetps.backup_workers", "%lld is negative; use 0 "
                       "(wait for every worker) or more", n);
        else if (c->n_worker >= 0 && n >= c->n_worker)
            cl_problem(p, "hetps.backup_workers", "%lld must be less than the "
                       "number of workers (%d): a step needs at least one "
                       "gradient; use at most %d", n, c->n_worker,
                       c->n_worker - 1);
        else {
            c->backup_workers = (int)n;
            if (n > 0 && c->mode != HC_MODE_SYNC)
                cl_note(p->d, "hetps.backup_workers is ignored in mode %s "
                        "(it applies to mode sync)", hc_mode_name(c->mode));
        }
    }
    if ((b = cJSON_GetObjectItemCaseSensitive(h, "metrics_port"))) {
        if (!cJSON_IsNumber(b) || cl_json_whole(b, &n) != 0 || n < 1 ||
            n > 65535)
            cl_problem(p, "hetps.metrics_port", "must be a port number (1 to "
                       "65535): ps:j serves /metrics on its host at that port "
                       "+ j, worker:i at that port + (number of ps) + i");
        else
            c->metrics_port = (int)n;
    }
    /* A shared token as a second factor was planned beside the
     * certificates and never read: a file that names one is refused, so
     * that nobody believes a token protects the cluster. */
    if (cJSON_GetObjectItemCaseSensitive(h, "token_file"))
        cl_problem(p, "hetps.token_file", "is not supported: each task "
                   "proves who it is with its certificate (mutual TLS, "
                   "`hetps certs`); remove the key");
    if ((t = cJSON_GetObjectItemCaseSensitive(h, "insecure"))) {
        if (!cJSON_IsBool(t))
            cl_problem(p, "hetps.insecure", "must be true or false, got %s",
                       cl_jtype(t));
        else
            c->insecure = cJSON_IsTrue(t);
    }
    if ((t = cJSON_GetObjectItemCaseSensitive(h, "certs"))) {
        if (!cJSON_IsString(t) || !t->valuestring[0])
            cl_problem(p, "hetps.certs", "must be a directory path (made by "
                       "`hetps certs`), got %s",
                       cJSON_IsString(t) ? "an empty string" : cl_jtype(t));
        else if (strlen(t->valuestring) >= sizeof c->certs)
            cl_problem(p, "hetps.certs", "too long (at most %zu characters)",
                       sizeof c->certs - 1);
        else
            strcpy(c->certs, t->valuestring);
    }
}
