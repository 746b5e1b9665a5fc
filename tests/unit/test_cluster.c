/*
 * test_cluster.c — the cluster definition (common/cluster*.c): a table of
 * mistakes, each checked for the key and the wording of its one message;
 * the real shapes of TF_CONFIG (TensorFlow with a chief, Kubeflow with a
 * string index, master, dict-form jobs, IPv6); the hetps block; identity
 * precedence (--task > TF_CONFIG > file); the cluster id; the printers.
 */
#include "cu.h"
#include "diag_check.h"

#include "cluster.h"
#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SRC "test input"
#define PS2 "\"ps\": [\"p0:2222\", \"p1:2222\"]"
#define W2 "\"worker\": [\"w0:2222\", \"w1:2222\"]"
#define CL "\"cluster\": {" PS2 ", " W2 "}"

static int parse(const char *json, struct hc_cluster *c, struct hc_diag *d)
{
    return hc_cluster_parse(json, strlen(json), SRC, c, d);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    CU_ASSERT_FATAL(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* ---- mistakes ---------------------------------------------------------- */

static const struct bad {
    const char *json;
    const char *key;        /* "KEY" of "test input: KEY: …"; NULL: none */
    const char *frag;       /* part of the message */
    int count;              /* messages expected; 0: at least one */
} bad[] = {
    { "{\n  \"cluster\": {\n    \"ps\": [\"a:1\",]\n}}", NULL,
      "bad JSON at line 3, column 18", 1 },
    { "[1, 2]", NULL, "top level must be a JSON object", 1 },
    { "", NULL, "is empty", 1 },
    { "{" CL "} trailing", NULL, "unexpected text after the end", 1 },
    { "{\"task\": {\"type\": \"ps\", \"index\": 0}}", "cluster",
      "missing; write {\"cluster\"", 1 },
    { "{\"cluster\": [\"a:1\"]}", "cluster", "must be an object", 1 },
    { "{\"cluster\": {" PS2 ", " W2 ", \"gpus\": [\"g:1\"]}}",
      "cluster.gpus", "unknown job name; hetps knows ps, worker", 1 },
    { "{\"cluster\": {" PS2 ", " W2 ", \"evaluator\": [\"e:1\"]}}",
      "cluster.evaluator", "hetps has no evaluator job", 1 },
    { "{\"cluster\": {" PS2 ", " W2 ", \"wrker\": [\"e:1\"]}}",
      "cluster.wrker", "did you mean \"worker\"", 1 },
    { "{\"cluster\": {\"ps\": \"p0:1\", " W2 "}}", "cluster.ps",
      "must be a list of \"host:port\" strings", 0 },
    { "{\"cluster\": {\"ps\": [\"p0:1\", 2222], " W2 "}}", "cluster.ps[1]",
      "must be a string \"host:port\", got a number", 1 },
    { "{\"cluster\": {\"ps\": [\"p0\"], " W2 "}}", "cluster.ps[0]",
      "\"p0\": missing port", 1 },
    { "{\"cluster\": {\"ps\": [\"p0:\"], " W2 "}}", "cluster.ps[0]",
      "missing port after ':'", 1 },
    { "{\"cluster\": {\"ps\": [\"p0:http\"], " W2 "}}", "cluster.ps[0]",
      "port \"http\" is not a number", 1 },
    { "{\"cluster\": {\"ps\": [\"p0:70000\"], " W2 "}}", "cluster.ps[0]",
      "port 70000 is out of range; use 1..65535", 1 },
    { "{\"cluster\": {\"ps\": [\"p0:0\"], " W2 "}}", "cluster.ps[0]",
      "port 0 is out of range", 1 },
    { "{\"cluster\": {\"ps\": [\":2222\"], " W2 "}}", "cluster.ps[0]",
      "empty host", 1 },
    { "{\"cluster\": {\"ps\": [\"a b:2222\"], " W2 "}}", "cluster.ps[0]",
      "contains ' '", 1 },
    { "{\"cluster\": {\"ps\": [\"tcp://p0:2222\"], " W2 "}}",
      "cluster.ps[0]", "has a scheme", 1 },
    { "{\"cluster\": {\"ps\": [\"::1:2222\"], " W2 "}}", "cluster.ps[0]",
      "IPv6 address needs brackets", 1 },
    { "{\"cluster\": {\"ps\": [\"[::1:2222\"], " W2 "}}", "cluster.ps[0]",
      "no ']'", 1 },
    { "{\"cluster\": {\"ps\": [\"w1:2222\"], " W2 "}}", "cluster.worker[1]",
      "address \"w1:2222\" is also used by cluster.ps[0]", 1 },
    { "{\"cluster\": {" PS2 ", \"worker\": [\"w:1\", \"x:1\", \"W:1\"]}}",
      "cluster.worker[2]", "also used by cluster.worker[0]", 1 },
    { "{\"cluster\": {" W2 "}}", "cluster.ps", "missing: hetps needs at "
      "least one parameter server", 1 },
    { "{\"cluster\": {\"ps\": [], " W2 "}}", "cluster.ps", "is empty", 1 },
    { "{\"cluster\": {" PS2 ", \"worker\": []}}", "cluster.worker",
      "is empty and there is no chief", 1 },
    { "{\"cluster\": {" PS2 "}}", "cluster.worker", "missing: add", 1 },
    { "{\"cluster\": {" PS2 ", \"chief\": [\"c:1\", \"d:1\"]}}",
      "cluster.chief", "has 2 tasks; a cluster has one chief", 1 },
    { "{\"cluster\": {" PS2 ", \"chief\": [\"c:1\"], \"master\": [\"m:1\"]}}",
      "cluster.master", "both \"chief\" and \"master\"", 1 },
    { "{\"cluster\": {" PS2 ", \"worker\": {\"0\": \"w:1\", \"2\": \"w:2\"}}}",
      "cluster.worker[\"2\"]", "index 2 leaves a gap", 1 },
    { "{\"cluster\": {" PS2 ", \"worker\": {\"first\": \"w:1\"}}}",
      "cluster.worker[\"first\"]", "is not a task index", 1 },
    { "{\"cluster\": {" PS2 ", \"worker\": {\"0\": \"w:1\", \"00\": \"w:2\"}}}",
      "cluster.worker[\"00\"]", "task 0 is given twice", 1 },
    { "{\"cluster\": {" PS2 ", " PS2 ", " W2 "}}", "cluster.ps",
      "given twice", 1 },
    { "{" CL ", \"task\": \"worker:0\"}", "task", "must be an object", 1 },
    { "{" CL ", \"task\": {\"index\": 0}}", "task.type", "missing", 1 },
    { "{" CL ", \"task\": {\"type\": 1, \"index\": 0}}", "task.type",
      "must be a string", 1 },
    { "{" CL ", \"task\": {\"type\": \"boss\", \"index\": 0}}", "task.type",
      "unknown task type \"boss\"; valid: ps, worker, chief, master", 1 },
    { "{" CL ", \"task\": {\"type\": \"evaluator\", \"index\": 0}}",
      "task.type", "hetps has no evaluator task: the chief", 1 },
    { "{" CL ", \"task\": {\"type\": \"worker\"}}", "task.index", "missing",
      1 },
    { "{" CL ", \"task\": {\"type\": \"worker\", \"index\": -1}}",
      "task.index", "-1 is negative", 1 },
    { "{" CL ", \"task\": {\"type\": \"worker\", \"index\": \"-2\"}}",
      "task.index", "-2 is negative", 1 },
    { "{" CL ", \"task\": {\"type\": \"worker\", \"index\": true}}",
      "task.index", "must be a number", 1 },
    { "{" CL ", \"task\": {\"type\": \"worker\", \"index\": \"one\"}}",
      "task.index", "\"one\" is not a number", 1 },
    { "{" CL ", \"task\": {\"type\": \"worker\", \"index\": 0.5}}",
      "task.index", "not a whole number", 1 },
    { "{" CL ", \"task\": {\"type\": \"worker\", \"index\": 2}}",
      "task.index", "2 is out of range: cluster.worker has 2 task(s), valid "
      "indices are 0..1", 1 },
    { "{" CL ", \"task\": {\"type\": \"ps\", \"index\": \"7\"}}", "task.index",
      "valid indices are 0..1", 1 },
    { "{" CL ", \"task\": {\"type\": \"chief\", \"index\": 1}}", "task.index",
      "valid index is 0", 1 },
    { "{" CL ", \"hetps\": [1]}", "hetps", "must be an object", 1 },
    { "{" CL ", \"hetps\": {\"mdoe\": \"sync\"}}", "hetps.mdoe",
      "did you mean \"mode\"? (valid keys: workers, mode, staleness, "
      "backup_workers, token_file, metrics_port, insecure, certs)", 1 },
    { "{" CL ", \"hetps\": {\"metrics_port\": 70000}}", "hetps.metrics_port",
      "must be a port number (1 to 65535)", 1 },
    { "{" CL ", \"hetps\": {\"insecure\": 1}}", "hetps.insecure",
      "must be true or false, got a number", 1 },
    { "{" CL ", \"hetps\": {\"insecure\": \"yes\"}}", "hetps.insecure",
      "must be true or false, got a string", 1 },
    { "{" CL ", \"hetps\": {\"certs\": \"\"}}", "hetps.certs",
      "must be a directory path", 1 },
    { "{" CL ", \"hetps\": {\"certs\": 3}}", "hetps.certs",
      "must be a directory path (made by `hetps certs`), got a number", 1 },
    { "{" CL ", \"hetps\": {\"speed\": 1}}", "hetps.speed",
      "unknown key; valid keys: workers, mode", 1 },
    { "{" CL ", \"hetps\": {\"mode\": \"fast\"}}", "hetps.mode",
      "\"fast\" is not a mode; valid: \"async\", \"sync\", \"ssp:S\"", 1 },
    { "{" CL ", \"hetps\": {\"mode\": \"ssp:-1\"}}", "hetps.mode",
      "must be a whole number 0..", 1 },
    { "{" CL ", \"hetps\": {\"mode\": \"ssp:x\"}}", "hetps.mode",
      "must be a whole number 0..", 1 },
    { "{" CL ", \"hetps\": {\"mode\": \"ssp\"}}", "hetps.mode",
      "needs a staleness bound", 1 },
    { "{" CL ", \"hetps\": {\"mode\": 2}}", "hetps.mode",
      "must be a string", 1 },
    { "{" CL ", \"hetps\": {\"mode\": \"sync\", \"staleness\": 2}}",
      "hetps.staleness", "applies only to mode ssp", 1 },
    { "{" CL ", \"hetps\": {\"mode\": \"ssp:2\", \"staleness\": 3}}",
      "hetps.staleness", "disagrees with mode", 1 },
    { "{" CL ", \"hetps\": {\"mode\": \"ssp\", \"staleness\": -3}}",
      "hetps.staleness", "must be a whole number", 0 },
    { "{" CL ", \"hetps\": {\"backup_workers\": -1}}",
      "hetps.backup_workers", "-1 is negative", 1 },
    { "{" CL ", \"hetps\": {\"mode\": \"sync\", \"backup_workers\": 2}}",
      "hetps.backup_workers", "must be less than the number of workers (2)",
      1 },
    { "{" CL ", \"hetps\": {\"backup_workers\": \"1\"}}",
      "hetps.backup_workers", "must be a whole number", 1 },
    { "{" CL ", \"hetps\": {\"workers\": {\"devices\": \"cpu\"}}}",
      "hetps.workers", "must be a list of objects", 1 },
    { "{" CL ", \"hetps\": {\"workers\": [{}, {}, {}]}}", "hetps.workers",
      "lists 3 workers but the cluster has 2", 1 },
    { "{" CL ", \"hetps\": {\"workers\": [\"cpu\"]}}", "hetps.workers[0]",
      "must be an object", 1 },
    { "{" CL ", \"hetps\": {\"workers\": [{\"devices\": [\"cpu\"]}]}}",
      "hetps.workers[0].devices", "must be a string", 1 },
    { "{" CL ", \"hetps\": {\"workers\": [{}, {\"devices\": \"gpu\"}]}}",
      "hetps.workers[1].devices", "\"gpu\" is not a device; use \"cpu\", "
      "\"cpu:N\", \"gpu:N\"", 1 },
    { "{" CL ", \"hetps\": {\"workers\": [{\"devices\": \"gpu:0,,gpu:1\"}]}}",
      "hetps.workers[0].devices", "has an empty device", 1 },
    { "{" CL ", \"hetps\": {\"workers\": [{\"devices\": \"gpu:0,gpu:0\"}]}}",
      "hetps.workers[0].devices", "lists gpu:0 twice", 1 },
    { "{" CL ", \"hetps\": {\"workers\": [{\"devices\": \"auto,cpu\"}]}}",
      "hetps.workers[0].devices", "cannot be combined", 1 },
    { "{" CL ", \"hetps\": {\"workers\": [{\"devices\": \"gpu:x\"}]}}",
      "hetps.workers[0].devices", "\"gpu:x\" is not a device", 1 },
    { "{" CL ", \"hetps\": {\"workers\": [{\"device\": \"cpu\"}]}}",
      "hetps.workers[0].device", "did you mean \"devices\"", 1 },
    { "{" CL ", \"hetps\": {\"token_file\": \"/run/secrets/t\"}}",
      "hetps.token_file", "is not supported: each task proves who it is "
      "with its certificate", 1 },
    { "{" CL ", \"clustr\": {}}", "clustr", "did you mean \"cluster\"", 1 },
};

static void test_bad_inputs(void)
{
    size_t i;

    CU_ASSERT(sizeof bad / sizeof bad[0] >= 25);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct hc_cluster c;
        struct hc_diag d;
        char want[128];
        int rc = parse(bad[i].json, &c, &d);

        if (bad[i].key)
            snprintf(want, sizeof want, SRC ": %s: ", bad[i].key);
        else
            snprintf(want, sizeof want, SRC ": ");
        CU_ASSERT_EQUAL(rc, HC_ERR_CONFIG);
        CU_ASSERT_PTR_NULL(c.ps);
        CU_ASSERT_PTR_NULL(c.worker);
        CU_ASSERT_EQUAL(c.n_ps, 0);
        CU_ASSERT(d.n >= 1);
        int ok = hp_diag_has(&d, want, bad[i].frag) &&
                 (bad[i].count == 0 || d.n == bad[i].count);
        CU_ASSERT(ok);
        if (!ok)
            hp_diag_show(bad[i].json, &d);
        /* the first message is also the thread's error detail */
        CU_ASSERT_STRING_EQUAL(hc_err_msg(), d.msg[0]);
    }
}

/* Mistakes are collected, not just the first; the count goes past the
 * stored HC_DIAG_MAX and the printer says how many were left out. */
static void test_collects_all(void)
{
    char json[8192], *p = json;
    struct hc_cluster c;
    struct hc_diag d;
    char *text = NULL;
    size_t tlen = 0;
    FILE *f;
    int i;

    CU_ASSERT_EQUAL(parse("{\"cluster\": {\"ps\": [\"a\", \"b:x\"], "
                          "\"worker\": [\":1\"]}, \"task\": {\"type\": "
                          "\"boss\"}, \"hetps\": {\"mode\": \"slow\"}}",
                          &c, &d), HC_ERR_CONFIG);
    CU_ASSERT_EQUAL(d.n, 6);
    CU_ASSERT(hp_diag_has(&d, "cluster.ps[0]", "missing port"));
    CU_ASSERT(hp_diag_has(&d, "cluster.ps[1]", "not a number"));
    CU_ASSERT(hp_diag_has(&d, "cluster.worker[0]", "empty host"));
    CU_ASSERT(hp_diag_has(&d, "task.type", "boss"));
    CU_ASSERT(hp_diag_has(&d, "task.index", "missing"));
    CU_ASSERT(hp_diag_has(&d, "hetps.mode", "slow"));

    p += sprintf(p, "{\"cluster\": {\"worker\": [\"w:1\"], \"ps\": [");
    for (i = 0; i < 40; i++)
        p += sprintf(p, "%s\"h%d\"", i ? ", " : "", i);
    sprintf(p, "]}}");
    CU_ASSERT_EQUAL(parse(json, &c, &d), HC_ERR_CONFIG);
    CU_ASSERT_EQUAL(d.n, 40);
    CU_ASSERT(hp_diag_has(&d, "cluster.ps[31]", "\"h31\": missing port"));
    f = open_memstream(&text, &tlen);
    CU_ASSERT_FATAL(f != NULL);
    hc_diag_print(&d, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "hetps: " SRC ": cluster.ps[0]: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "and 8 more problem(s)"));
    free(text);
}

/* Line and column of a JSON mistake point at the offending character. */
static void test_json_position(void)
{
    static const struct {
        const char *json;
        const char *where;
    } t[] = {
        { "{\"cluster\" {}}", "line 1, column 12" },
        { "{\n  \"cluster\": {\n    \"ps\": [\"a:1\"]\n    \"worker\": []\n"
          "  }\n}", "line 4, column 5" },
        { "{\n\n   \"cluster\": {\"ps\": [\"a:1\"], \"worker\": [b:1]}}",
          "line 3, column 42" },
        { "{\"cluster\": {\"ps\": [\"a:1\"]", "line 1, column 26" },
        { "{\n\t\"cluster\": {\"ps\": [\"a:1\"], \"worker\": [\"b:1\"]},\n"
          "\t\"hetps\": {\"mode\": 'sync'}\n}", "line 3, column 20" },
        { "\xEF\xBB\xBF{\"cluster\": nope}", "line 1, column 16" },
    };
    size_t i;

    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct hc_cluster c;
        struct hc_diag d;
        int ok = parse(t[i].json, &c, &d) == HC_ERR_CONFIG && d.n == 1 &&
                 hp_diag_has(&d, "bad JSON at", t[i].where);
        CU_ASSERT(ok);
        if (!ok)
            hp_diag_show(t[i].where, &d);
    }
}

/* ---- good inputs ------------------------------------------------------- */

/* The shape of the cluster file in README.md, read from a file. */
static void test_plain_file(void)
{
    char dir[256], path[320], src[400];
    struct hc_cluster c;
    struct hc_diag d;

    hp_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    write_file(path,
               "{\n"
               "  \"cluster\": { \"ps\": [\"ps0:2222\", \"ps1:2222\"],\n"
               "               \"worker\": [\"gpu-server:2222\", "
               "\"cpu-server:2222\"] },\n"
               "  \"task\":    { \"type\": \"worker\", \"index\": 0 },\n"
               "  \"hetps\":   { \"workers\": [ { \"devices\": \"gpu:0,gpu:1\" "
               "}, { \"devices\": \"cpu\" } ],\n"
               "               \"mode\": \"sync\",\n"
               "               \"certs\": \"/run/secrets/hetps\" }\n"
               "}\n");
    CU_ASSERT_EQUAL_FATAL(hc_cluster_load_file(path, &c, &d), HC_OK);
    CU_ASSERT_STRING_EQUAL(c.certs, "/run/secrets/hetps");
    CU_ASSERT_EQUAL(c.insecure, 0);
    snprintf(src, sizeof src, "cluster file %s", path);
    CU_ASSERT_STRING_EQUAL(c.source, src);
    CU_ASSERT_EQUAL(d.n, 0);
    CU_ASSERT_EQUAL(d.n_note, 0);
    CU_ASSERT_EQUAL(c.n_ps, 2);
    CU_ASSERT_EQUAL(c.n_worker, 2);
    CU_ASSERT_STRING_EQUAL(c.ps[1].host, "ps1");
    CU_ASSERT_EQUAL(c.ps[1].port, 2222);
    CU_ASSERT_STRING_EQUAL(c.ps[1].addr, "ps1:2222");
    CU_ASSERT_STRING_EQUAL(c.ps[1].url, "tcp://ps1:2222");
    CU_ASSERT_STRING_EQUAL(c.worker[0].url, "tcp://gpu-server:2222");
    CU_ASSERT_STRING_EQUAL(c.wconf[0].devices, "gpu:0,gpu:1");
    CU_ASSERT_STRING_EQUAL(c.wconf[1].devices, "cpu");
    CU_ASSERT_EQUAL(c.chief_mapped, 0);
    CU_ASSERT_EQUAL(c.has_task, 1);
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_WORKER);
    CU_ASSERT_EQUAL(c.task_index, 0);
    CU_ASSERT_EQUAL(c.mode, HC_MODE_SYNC);
    CU_ASSERT_EQUAL(c.backup_workers, 0);
    CU_ASSERT(c.id != 0);
    hc_cluster_free(&c);
    CU_ASSERT_PTR_NULL(c.ps);

    /* the repository's local cluster file */
    CU_ASSERT_EQUAL_FATAL(hc_cluster_load_file("deploy/cluster.local.json",
                                               &c, &d), HC_OK);
    CU_ASSERT_EQUAL(c.n_ps, 2);
    CU_ASSERT_EQUAL(c.n_worker, 2);
    CU_ASSERT_STRING_EQUAL(c.ps[1].url, "tcp://127.0.0.1:29201");
    CU_ASSERT_STRING_EQUAL(c.worker[1].url, "tcp://127.0.0.1:29211");
    CU_ASSERT_STRING_EQUAL(c.wconf[1].devices, "cpu");
    CU_ASSERT_EQUAL(c.mode, HC_MODE_ASYNC);
    CU_ASSERT_EQUAL(c.has_task, 0);
    hc_cluster_free(&c);

    /* unreadable: missing file, a directory */
    snprintf(path, sizeof path, "%s/nope.json", dir);
    CU_ASSERT_EQUAL(hc_cluster_load_file(path, &c, &d), HC_ERR_CONFIG);
    snprintf(src, sizeof src, "cluster file %s: cannot read it: %s", path,
             strerror(ENOENT));
    CU_ASSERT(hp_diag_has(&d, src, "check the path"));
    CU_ASSERT_EQUAL(hc_cluster_load_file(dir, &c, &d), HC_ERR_CONFIG);
    snprintf(src, sizeof src, "cluster file %s: cannot read it: %s", dir,
             strerror(EISDIR));
    CU_ASSERT(hp_diag_has(&d, src, NULL));
    snprintf(path, sizeof path, "%s/empty.json", dir);
    write_file(path, "\n");
    CU_ASSERT_EQUAL(hc_cluster_load_file(path, &c, &d), HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "empty.json: is empty", NULL));
    hp_rmtree(dir);
}

/* TF_CONFIG exactly as TensorFlow writes it, with a chief. */
static void test_tf_config_chief(void)
{
    struct hc_cluster c;
    struct hc_diag d;

    setenv("TF_CONFIG",
           "{\"cluster\": {\"chief\": [\"host0:2222\"], \"worker\": "
           "[\"host1:2222\", \"host2:2222\"], \"ps\": [\"host3:2222\", "
           "\"host4:2222\"]}, \"task\": {\"type\": \"worker\", \"index\": 1},"
           " \"rpc_layer\": \"grpc\"}", 1);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve(NULL, NULL, 1, &c, &d), HC_OK);
    CU_ASSERT_STRING_EQUAL(c.source, "TF_CONFIG");
    CU_ASSERT_EQUAL(c.n_ps, 2);
    CU_ASSERT_EQUAL(c.n_worker, 3);
    CU_ASSERT_EQUAL(c.chief_mapped, 1);
    CU_ASSERT_STRING_EQUAL(c.worker[0].addr, "host0:2222");
    CU_ASSERT_STRING_EQUAL(c.worker[1].addr, "host1:2222");
    CU_ASSERT_STRING_EQUAL(c.worker[2].addr, "host2:2222");
    CU_ASSERT_STRING_EQUAL(c.wconf[2].devices, "auto");
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_WORKER);
    CU_ASSERT_EQUAL(c.task_index, 2);
    CU_ASSERT(hp_note_has(&d, "cluster.chief (host0:2222) is worker 0"));
    hc_cluster_free(&c);

    setenv("TF_CONFIG",
           "{\"cluster\": {\"chief\": [\"host0:2222\"], \"worker\": "
           "[\"host1:2222\"], \"ps\": [\"host3:2222\"]}, \"task\": "
           "{\"type\": \"chief\", \"index\": 0}}", 1);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve(NULL, NULL, 1, &c, &d), HC_OK);
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_WORKER);
    CU_ASSERT_EQUAL(c.task_index, 0);
    hc_cluster_free(&c);

    /* a chief alone is the one worker */
    setenv("TF_CONFIG",
           "{\"cluster\": {\"chief\": [\"c:1\"], \"ps\": [\"p:1\"]}, "
           "\"task\": {\"type\": \"ps\", \"index\": 0}}", 1);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve(NULL, NULL, 1, &c, &d), HC_OK);
    CU_ASSERT_EQUAL(c.n_worker, 1);
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_PS);
    hc_cluster_free(&c);
    unsetenv("TF_CONFIG");
}

/* Kubeflow's TFJob: string index, "environment", older "master" job. */
static void test_kubeflow(void)
{
    struct hc_cluster c;
    struct hc_diag d;

    setenv("TF_CONFIG",
           "{\"cluster\":{\"ps\":[\"mnist-ps-0.kubeflow.svc:2222\"],"
           "\"worker\":[\"mnist-worker-0.kubeflow.svc:2222\","
           "\"mnist-worker-1.kubeflow.svc:2222\"]},\"task\":{\"type\":"
           "\"worker\",\"index\":\"1\"},\"environment\":\"cloud\"}", 1);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve(NULL, NULL, 1, &c, &d), HC_OK);
    CU_ASSERT_EQUAL(c.n_worker, 2);
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_WORKER);
    CU_ASSERT_EQUAL(c.task_index, 1);
    CU_ASSERT_STRING_EQUAL(c.ps[0].host, "mnist-ps-0.kubeflow.svc");
    hc_cluster_free(&c);

    setenv("TF_CONFIG",
           "{\"cluster\":{\"master\":[\"job-master-0:2222\"],\"ps\":"
           "[\"job-ps-0:2222\"],\"worker\":[\"job-worker-0:2222\"]},"
           "\"task\":{\"type\":\"master\",\"index\":\"0\"},"
           "\"environment\":\"cloud\"}", 1);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve(NULL, NULL, 1, &c, &d), HC_OK);
    CU_ASSERT_EQUAL(c.n_worker, 2);
    CU_ASSERT_EQUAL(c.chief_mapped, 1);
    CU_ASSERT_STRING_EQUAL(c.worker[0].addr, "job-master-0:2222");
    CU_ASSERT_EQUAL(c.task_index, 0);
    CU_ASSERT(hp_note_has(&d, "cluster.master (job-master-0:2222) is worker 0"));
    hc_cluster_free(&c);

    /* an evaluator pod gets a clear refusal */
    setenv("TF_CONFIG",
           "{\"cluster\":{\"ps\":[\"p:2222\"],\"worker\":[\"w:2222\"]},"
           "\"task\":{\"type\":\"evaluator\",\"index\":\"0\"}}", 1);
    CU_ASSERT_EQUAL(hc_cluster_resolve(NULL, NULL, 1, &c, &d), HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "TF_CONFIG: task.type: ", "no evaluator"));
    CU_ASSERT_PTR_NULL(c.ps);
    unsetenv("TF_CONFIG");
}

/* Jobs written as {"index": "address"}, in any order. */
static void test_dict_jobs(void)
{
    struct hc_cluster c;
    struct hc_diag d;

    CU_ASSERT_EQUAL_FATAL(parse("{\"cluster\": {\"ps\": {\"1\": \"p1:1\", "
                                "\"0\": \"p0:1\"}, \"worker\": [\"w0:1\"], "
                                "\"chief\": {\"0\": \"c:1\"}}, \"task\": "
                                "{\"type\": \"ps\", \"index\": 1}}", &c, &d),
                          HC_OK);
    CU_ASSERT_EQUAL(c.n_ps, 2);
    CU_ASSERT_STRING_EQUAL(c.ps[0].addr, "p0:1");
    CU_ASSERT_STRING_EQUAL(c.ps[1].addr, "p1:1");
    CU_ASSERT_EQUAL(c.n_worker, 2);
    CU_ASSERT_STRING_EQUAL(c.worker[0].addr, "c:1");
    CU_ASSERT_STRING_EQUAL(c.worker[1].addr, "w0:1");
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_PS);
    CU_ASSERT_EQUAL(c.task_index, 1);
    hc_cluster_free(&c);

    /* messages about dict entries name the key as written */
    CU_ASSERT_EQUAL(parse("{\"cluster\": {\"ps\": {\"0\": \"p0:1\", \"1\": "
                          "\"p0:1\"}, \"worker\": [\"w0:1\"]}}", &c, &d),
                    HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "cluster.ps[\"1\"]: ",
                       "also used by cluster.ps[\"0\"]"));
}

static void test_ipv6(void)
{
    struct hc_cluster c;
    struct hc_diag d;

    CU_ASSERT_EQUAL_FATAL(parse("{\"cluster\": {\"ps\": [\"[::1]:2222\", "
                                "\"[fe80::1%eth0]:2223\"], \"worker\": "
                                "[\"127.0.0.1:2224\", \"[::1]:2224\"]}}",
                                &c, &d), HC_OK);
    CU_ASSERT_STRING_EQUAL(c.ps[0].host, "::1");
    CU_ASSERT_EQUAL(c.ps[0].port, 2222);
    CU_ASSERT_STRING_EQUAL(c.ps[0].addr, "[::1]:2222");
    CU_ASSERT_STRING_EQUAL(c.ps[0].url, "tcp://[::1]:2222");
    CU_ASSERT_STRING_EQUAL(c.ps[1].host, "fe80::1%eth0");
    CU_ASSERT_STRING_EQUAL(c.worker[0].url, "tcp://127.0.0.1:2224");
    CU_ASSERT_STRING_EQUAL(c.worker[1].url, "tcp://[::1]:2224");
    hc_cluster_free(&c);

    CU_ASSERT_EQUAL(parse("{\"cluster\": {\"ps\": [\"[::1]:2222\"], "
                          "\"worker\": [\"[::1]\"]}}", &c, &d),
                    HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "cluster.worker[0]: ", "missing port"));
}

static void test_hetps_block(void)
{
    static const struct {
        const char *hetps;
        enum hc_mode mode;
        int staleness, backup;
        const char *dev0, *dev1;
    } t[] = {
        { "{\"mode\": \"async\"}", HC_MODE_ASYNC, 0, 0, "auto", "auto" },
        { "{\"mode\": \"ssp:3\"}", HC_MODE_SSP, 3, 0, "auto", "auto" },
        { "{\"mode\": \"ssp:0\"}", HC_MODE_SSP, 0, 0, "auto", "auto" },
        { "{\"mode\": \"ssp\", \"staleness\": 5}", HC_MODE_SSP, 5, 0, "auto",
          "auto" },
        { "{\"mode\": \"ssp:4\", \"staleness\": 4}", HC_MODE_SSP, 4, 0, "auto",
          "auto" },
        { "{\"workers\": [{\"devices\": \" gpu:0 , gpu:1\"}, {\"devices\": "
          "\"cpu:4\"}], \"mode\": \"sync\", \"backup_workers\": 1}", HC_MODE_SYNC, 0, 1, "gpu:0,gpu:1",
          "cpu:4" },
        { "{\"workers\": [{\"devices\": \"cpu,gpu:0\"}]}", HC_MODE_ASYNC, 0,
          0, "cpu,gpu:0", "auto" },
        { "{\"workers\": [{}, {\"devices\": \"auto\"}]}", HC_MODE_ASYNC, 0, 0,
          "auto", "auto" },
    };
    size_t i;

    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        char json[512];
        struct hc_cluster c;
        struct hc_diag d;

        snprintf(json, sizeof json, "{" CL ", \"hetps\": %s}", t[i].hetps);
        if (parse(json, &c, &d) != HC_OK) {
            CU_FAIL("good hetps block rejected");
            hp_diag_show(t[i].hetps, &d);
            continue;
        }
        CU_ASSERT_EQUAL(c.mode, t[i].mode);
        CU_ASSERT_EQUAL(c.staleness, t[i].staleness);
        CU_ASSERT_EQUAL(c.backup_workers, t[i].backup);
        CU_ASSERT_STRING_EQUAL(c.wconf[0].devices, t[i].dev0);
        CU_ASSERT_STRING_EQUAL(c.wconf[1].devices, t[i].dev1);
        hc_cluster_free(&c);
    }
}

/* ---- identity ---------------------------------------------------------- */

/* --task > TF_CONFIG's task > the file's task; a file's cluster wins over
 * TF_CONFIG's; chief specs map to worker 0, TF worker i to i+1. */
static void test_precedence(void)
{
    char dir[256], path[320], chief[320];
    struct hc_cluster c;
    struct hc_diag d;
    static const struct {
        const char *file;       /* 0: path, 1: chief */
        int use_chief;
        const char *tf;         /* NULL: unset */
        const char *flag;
        enum hc_job job;
        int index;
    } t[] = {
        { "file task", 0, NULL, NULL, HC_JOB_PS, 0 },
        { "tf task", 0, "{\"task\": {\"type\": \"worker\", \"index\": 1}}",
          NULL, HC_JOB_WORKER, 1 },
        { "tf task, tf cluster ignored", 0, "{\"cluster\": {\"ps\": "
          "[\"x:1\"], \"worker\": [\"y:1\"]}, \"task\": {\"type\": \"ps\", "
          "\"index\": 1}}", NULL, HC_JOB_PS, 1 },
        { "tf without task", 0, "{\"environment\": \"cloud\"}", NULL,
          HC_JOB_PS, 0 },
        { "flag wins", 0, "{\"task\": {\"type\": \"worker\", \"index\": 1}}",
          "ps:1", HC_JOB_PS, 1 },
        { "flag, empty tf", 0, "", "worker:1", HC_JOB_WORKER, 1 },
        { "chief flag", 1, NULL, "chief", HC_JOB_WORKER, 0 },
        { "chief:0 flag", 1, NULL, "chief:0", HC_JOB_WORKER, 0 },
        { "master flag", 1, NULL, "master:0", HC_JOB_WORKER, 0 },
        { "worker flag shifts", 1, NULL, "worker:0", HC_JOB_WORKER, 1 },
        { "tf chief task", 1, "{\"task\": {\"type\": \"chief\", \"index\": "
          "0}}", NULL, HC_JOB_WORKER, 0 },
        { "tf worker shifts", 1, "{\"task\": {\"type\": \"worker\", "
          "\"index\": \"1\"}}", NULL, HC_JOB_WORKER, 2 },
        { "file task shifts", 1, NULL, NULL, HC_JOB_WORKER, 1 },
    };
    size_t i;

    hp_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/c.json", dir);
    snprintf(chief, sizeof chief, "%s/chief.json", dir);
    write_file(path, "{" CL ", \"task\": {\"type\": \"ps\", \"index\": 0}}");
    write_file(chief, "{\"cluster\": {\"chief\": [\"c:1\"], " PS2 ", " W2
               "}, \"task\": {\"type\": \"worker\", \"index\": 0}}");
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        int rc, ok;

        if (t[i].tf)
            setenv("TF_CONFIG", t[i].tf, 1);
        else
            unsetenv("TF_CONFIG");
        rc = hc_cluster_resolve(t[i].use_chief ? chief : path, t[i].flag, 1,
                                &c, &d);
        ok = rc == HC_OK && c.has_task && c.task_job == t[i].job &&
             c.task_index == t[i].index && c.n_ps == 2;
        CU_ASSERT(ok);
        if (!ok) {
            hp_diag_show(t[i].file, &d);
            printf("  job %d index %d\n", c.task_job, c.task_index);
        }
        if (rc == HC_OK)
            CU_ASSERT_PTR_NOT_NULL(strstr(c.source, "cluster file "));
        if (i == 2)
            CU_ASSERT(hp_note_has(&d, "TF_CONFIG's cluster is ignored"));
        hc_cluster_free(&c);
    }

    /* TF_CONFIG's task is checked against the file's cluster */
    setenv("TF_CONFIG", "{\"task\": {\"type\": \"ps\", \"index\": 2}}", 1);
    CU_ASSERT_EQUAL(hc_cluster_resolve(path, NULL, 1, &c, &d),
                    HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "TF_CONFIG: task.index: ", "0..1"));
    setenv("TF_CONFIG", "{\"task\": ", 1);
    CU_ASSERT_EQUAL(hc_cluster_resolve(path, NULL, 1, &c, &d),
                    HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "TF_CONFIG: bad JSON at line 1", NULL));

    /* no cluster at all */
    unsetenv("TF_CONFIG");
    CU_ASSERT_EQUAL(hc_cluster_resolve(NULL, "ps:0", 1, &c, &d),
                    HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "TF_CONFIG: is not set", "give a cluster file"));
    setenv("TF_CONFIG", "", 1);
    CU_ASSERT_EQUAL(hc_cluster_resolve(NULL, NULL, 0, &c, &d),
                    HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "TF_CONFIG: is empty", NULL));
    setenv("TF_CONFIG", "{\"task\": {\"type\": \"ps\", \"index\": 0}}", 1);
    CU_ASSERT_EQUAL(hc_cluster_resolve(NULL, NULL, 1, &c, &d),
                    HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "TF_CONFIG: cluster: missing", NULL));

    /* no identity, needed or not */
    unsetenv("TF_CONFIG");
    write_file(path, "{" CL "}");
    CU_ASSERT_EQUAL(hc_cluster_resolve(path, NULL, 1, &c, &d),
                    HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "task: not given", "--task worker:0"));
    CU_ASSERT_PTR_NULL(c.ps);
    CU_ASSERT_EQUAL(hc_cluster_resolve(path, NULL, 0, &c, &d), HC_OK);
    CU_ASSERT_EQUAL(c.has_task, 0);
    hc_cluster_free(&c);

    /* a bad flag is reported with its source */
    CU_ASSERT_EQUAL(hc_cluster_resolve(path, "worker:9", 0, &c, &d),
                    HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "--task flag: \"worker:9\": ", "0..1"));
    CU_ASSERT_PTR_NULL(c.ps);
    hp_rmtree(dir);
}

/* hc_cluster_open: the programs' shared opening, one row per case. */
static void test_open(void)
{
    static const struct {
        const char *what;
        int role;
        const char *task, *mode;
        int want;               /* HC_OK or HC_ERR_CONFIG */
        enum hc_mode mode_after;
    } t[] = {
        { "ps task for hetps-ps", HC_JOB_PS, "ps:1", NULL, HC_OK,
          HC_MODE_ASYNC },
        { "worker task for hetps-worker", HC_JOB_WORKER, "worker:0", "sync",
          HC_OK, HC_MODE_SYNC },
        { "worker task refused by hetps-ps", HC_JOB_PS, "worker:0", NULL,
          HC_ERR_CONFIG, 0 },
        { "ps task refused by hetps-worker", HC_JOB_WORKER, "ps:0", NULL,
          HC_ERR_CONFIG, 0 },
        { "no task", HC_JOB_WORKER, NULL, NULL, HC_ERR_CONFIG, 0 },
        { "bad --mode", HC_JOB_PS, "ps:0", "fast", HC_ERR_CONFIG, 0 },
        { "launch: no task needed", -1, NULL, "ssp:2", HC_OK, HC_MODE_SSP },
        { "launch: bad --mode", -1, NULL, "ssp", HC_ERR_CONFIG, 0 },
    };
    char dir[256], path[300];
    struct hc_cluster c;
    size_t i;
    int rc;

    unsetenv("TF_CONFIG");
    hp_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/c.json", dir);
    write_file(path, "{" CL "}");
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        rc = hc_cluster_open("test", t[i].role,
                             &(struct hc_task_flags){ path, t[i].task,
                                                      t[i].mode }, &c);
        if (rc != t[i].want)
            fprintf(stderr, "open: %s: got %d, want %d\n", t[i].what, rc,
                    t[i].want);
        CU_ASSERT_EQUAL(rc, t[i].want);
        if (rc == HC_OK) {
            CU_ASSERT_EQUAL(c.mode, t[i].mode_after);
            CU_ASSERT_EQUAL(c.has_task, t[i].role >= 0);
            hc_cluster_free(&c);
        } else {
            CU_ASSERT_PTR_NULL(c.ps);
        }
    }
    hp_rmtree(dir);
}

static void test_task_specs(void)
{
    static const struct {
        const char *spec;
        const char *frag;       /* NULL: good */
        enum hc_job job;
        int index;
    } t[] = {
        { "ps:0", NULL, HC_JOB_PS, 0 },
        { "ps:1", NULL, HC_JOB_PS, 1 },
        { "worker:1", NULL, HC_JOB_WORKER, 1 },
        { "chief", NULL, HC_JOB_WORKER, 0 },
        { "chief:0", NULL, HC_JOB_WORKER, 0 },
        { "worker", "missing index; write \"worker:0\"", 0, 0 },
        { "ps", "missing index", 0, 0 },
        { "worker:x", "the index \"x\" is not a number", 0, 0 },
        { "worker:", "is not a number", 0, 0 },
        { "ps:-1", "-1 is negative", 0, 0 },
        { "foo:0", "unknown task type \"foo\"", 0, 0 },
        { "evaluator:0", "no evaluator task", 0, 0 },
        { ":1", "not a task; write JOB:INDEX", 0, 0 },
        { "", "not a task", 0, 0 },
        { "worker:2", "valid indices are 0..1", 0, 0 },
        { "ps:99999999999999999999", "out of range", 0, 0 },
        { "chief:1", "valid index is 0", 0, 0 },
    };
    struct hc_cluster c;
    struct hc_diag d;
    size_t i;

    CU_ASSERT_EQUAL_FATAL(parse("{" CL "}", &c, &d), HC_OK);
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        char key[64];
        int rc, ok;

        memset(&d, 0, sizeof d);
        c.has_task = 0;
        rc = hc_cluster_set_task(&c, t[i].spec, "--task flag", &d);
        snprintf(key, sizeof key, "--task flag: \"%s\": ", t[i].spec);
        if (t[i].frag)
            ok = rc == HC_ERR_CONFIG && d.n == 1 && !c.has_task &&
                 hp_diag_has(&d, key, t[i].frag);
        else
            ok = rc == HC_OK && d.n == 0 && c.has_task &&
                 c.task_job == t[i].job && c.task_index == t[i].index;
        CU_ASSERT(ok);
        if (!ok)
            hp_diag_show(t[i].spec, &d);
    }
    /* NULL diag is allowed */
    CU_ASSERT_EQUAL(hc_cluster_set_task(&c, "ps:5", "--task flag", NULL),
                    HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "\"ps:5\""));
    hc_cluster_free(&c);
}

/* ---- cluster id and printing ------------------------------------------ */

static uint64_t id_of(const char *json)
{
    struct hc_cluster c;
    struct hc_diag d;
    uint64_t id = 0;

    if (parse(json, &c, &d) == HC_OK) {
        id = c.id;
        hc_cluster_free(&c);
    }
    CU_ASSERT(id != 0);         /* parsed: a comparison is meaningful */
    return id;
}

static void test_cluster_id(void)
{
    uint64_t a = id_of("{" CL "}");
    uint64_t h = 0xcbf29ce484222325ull;
    const char *s;
    struct hc_cluster c1, c2;
    struct hc_diag d;

    CU_ASSERT(a != 0);
    /* FNV-1a 64 over the canonical definition */
    for (s = "ps=p0:2222,p1:2222;chief=w0:2222;mode=async;staleness=0;"
             "backup=0;insecure=0"; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    CU_ASSERT_EQUAL(a, h);
    /* workers other than the chief are elastic; local settings are not
     * the cluster's; case and the ps map's order do not matter */
    CU_ASSERT_EQUAL(id_of("{\"cluster\": {" PS2 ", \"worker\": [\"w0:2222\"]}}"),
                    a);
    CU_ASSERT_EQUAL(id_of("{\"cluster\": {" PS2 ", \"worker\": [\"w0:2222\", "
                          "\"w:2\", \"w:3\"]}, \"hetps\": {\"metrics_port\": "
                          "9100, \"workers\": [{\"devices\": \"cpu\"}]}}"), a);
    CU_ASSERT_EQUAL(id_of("{\"cluster\": {\"ps\": {\"1\": \"p1:2222\", \"0\": "
                          "\"P0:2222\"}, " W2 "}}"), a);
    /* a chief job is worker 0 */
    CU_ASSERT_EQUAL(id_of("{\"cluster\": {" PS2 ", \"chief\": [\"w0:2222\"], "
                          "\"worker\": [\"w1:2222\"]}}"), a);
    /* the ps list fixes sharding: any change is another cluster */
    CU_ASSERT(id_of("{\"cluster\": {\"ps\": [\"p0:2222\"], " W2 "}}") != a);
    CU_ASSERT(id_of("{\"cluster\": {\"ps\": [\"p1:2222\", \"p0:2222\"], " W2
                    "}}") != a);
    CU_ASSERT(id_of("{\"cluster\": {\"ps\": [\"p0:2222\", \"p1:2223\"], " W2
                    "}}") != a);
    CU_ASSERT(id_of("{\"cluster\": {\"ps\": [\"p0:2222\", \"p1:2222\", "
                    "\"p2:2222\"], " W2 "}}") != a);
    /* so do the chief, the mode and its bounds, and the transport */
    CU_ASSERT(id_of("{\"cluster\": {" PS2 ", \"chief\": [\"c:1\"], " W2 "}}")
              != a);
    CU_ASSERT(id_of("{\"cluster\": {" PS2 ", \"worker\": [\"w1:2222\"]}}") != a);
    CU_ASSERT(id_of("{" CL ", \"hetps\": {\"mode\": \"sync\"}}") != a);
    CU_ASSERT(id_of("{" CL ", \"hetps\": {\"mode\": \"ssp:2\"}}") !=
              id_of("{" CL ", \"hetps\": {\"mode\": \"ssp:3\"}}"));
    CU_ASSERT(id_of("{" CL ", \"hetps\": {\"mode\": \"sync\"}}") !=
              id_of("{" CL ", \"hetps\": {\"mode\": \"sync\", "
                    "\"backup_workers\": 1}}"));
    CU_ASSERT(id_of("{" CL ", \"hetps\": {\"insecure\": true}}") != a);

    /* what differs is named */
    CU_ASSERT_EQUAL_FATAL(parse("{" CL "}", &c1, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(parse("{\"cluster\": {" PS2 ", \"worker\": "
                                "[\"w0:2222\"]}}", &c2, &d), HC_OK);
    CU_ASSERT_PTR_NULL(hc_cluster_differs(&c1, &c2));
    hc_cluster_free(&c2);
    CU_ASSERT_EQUAL_FATAL(parse("{\"cluster\": {\"ps\": [\"p0:2222\"], " W2
                                "}}", &c2, &d), HC_OK);
    CU_ASSERT_STRING_EQUAL(hc_cluster_differs(&c1, &c2),
                           "the list of parameter servers");
    hc_cluster_free(&c2);
    CU_ASSERT_EQUAL_FATAL(parse("{\"cluster\": {" PS2 ", \"worker\": "
                                "[\"w9:2222\"]}}", &c2, &d), HC_OK);
    CU_ASSERT_STRING_EQUAL(hc_cluster_differs(&c1, &c2), "the chief (worker 0)");
    hc_cluster_free(&c2);
    CU_ASSERT_EQUAL_FATAL(parse("{" CL ", \"hetps\": {\"mode\": \"sync\"}}",
                                &c2, &d), HC_OK);
    CU_ASSERT_STRING_EQUAL(hc_cluster_differs(&c1, &c2), "the mode or its bounds");
    hc_cluster_free(&c2);
    hc_cluster_free(&c1);
}

static void test_print(void)
{
    struct hc_cluster c;
    struct hc_diag d;
    char *text = NULL, id[32];
    size_t len = 0;
    FILE *f;

    CU_ASSERT_EQUAL_FATAL(parse("{\"cluster\": {\"chief\": [\"c:1\"], " PS2
                                ", " W2 "}, \"task\": {\"type\": \"worker\", "
                                "\"index\": 1}, \"hetps\": {\"mode\": "
                                "\"ssp:2\", \"workers\": [{\"devices\": "
                                "\"gpu:0\"}]}}", &c, &d), HC_OK);
    f = open_memstream(&text, &len);
    CU_ASSERT_FATAL(f != NULL);
    hc_cluster_print(&c, f);
    hc_diag_print(&d, f);
    fclose(f);
    snprintf(id, sizeof id, "0x%016llx", (unsigned long long)c.id);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "cluster from " SRC));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, id));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "ssp (staleness bound 2)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "transport mutual TLS, certificates in "));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "ps:1      p1:2222"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "worker:0  c:1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "devices gpu:0  (chief)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "worker:2  w1:2222"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "task      worker:2 (w1:2222)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "hetps: note: cluster.chief (c:1) "
                                  "is worker 0"));
    CU_ASSERT_PTR_NULL(strstr(text, "worker:1  c:1"));
    free(text);
    hc_cluster_free(&c);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("cluster", NULL, NULL);

    CU_add_test(s, "bad inputs (table)", test_bad_inputs);
    CU_add_test(s, "all problems collected", test_collects_all);
    CU_add_test(s, "bad JSON line and column", test_json_position);
    CU_add_test(s, "plain cluster file", test_plain_file);
    CU_add_test(s, "TF_CONFIG with chief", test_tf_config_chief);
    CU_add_test(s, "Kubeflow TF_CONFIG", test_kubeflow);
    CU_add_test(s, "dict-form jobs", test_dict_jobs);
    CU_add_test(s, "IPv6 addresses", test_ipv6);
    CU_add_test(s, "hetps block", test_hetps_block);
    CU_add_test(s, "identity precedence", test_precedence);
    CU_add_test(s, "task specs", test_task_specs);
    CU_add_test(s, "programs' opening (hc_cluster_open)", test_open);
    CU_add_test(s, "cluster id", test_cluster_id);
    CU_add_test(s, "printing", test_print);
}
