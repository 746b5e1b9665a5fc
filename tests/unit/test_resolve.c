/*
 * test_resolve.c — the cluster resolvers (common/cluster_slurm.c,
 * common/cluster_k8s.c): Slurm host lists and tasks-per-node lists as
 * tables, leading zeros, bad lists and the messages that name them; a whole
 * Slurm step into ps and workers with per-node ports; the choice of
 * resolver by --cluster and SLURM_JOB_ID; a pod's task from a StatefulSet
 * ordinal or an Indexed Job's index; Kubeflow TFJob's TF_CONFIG as it is.
 */
#include "cu.h"
#include "diag_check.h"

#include "cluster.h"
#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const slurm_vars[] = {
    "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
    "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_JOB_ID",
    "SLURMD_NODENAME", "HETPS_PS_TASKS", "HETPS_BASE_PORT", "TF_CONFIG",
    "HETPS_JOB", "JOB_COMPLETION_INDEX", "HOSTNAME", "HETPS_INDEX_OFFSET",
};

static void clear_env(void)
{
    size_t i;

    for (i = 0; i < sizeof slurm_vars / sizeof *slurm_vars; i++)
        unsetenv(slurm_vars[i]);
}

/* ---- host lists ------------------------------------------------------- */

static void test_hostlist(void)
{
    static const struct {
        const char *list;
        const char *want; /* names joined by ' ' */
    } t[] = {
        { "node01", "node01" },
        { "node[01-03,07]", "node01 node02 node03 node07" },
        { "n[009-011]", "n009 n010 n011" },
        { "n[8-11]", "n8 n9 n10 n11" },
        { "a[1-2],b5", "a1 a2 b5" },
        { "gpu-server,cpu-server", "gpu-server cpu-server" },
        { "r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2" },
        { "x[1-2]-ib,y", "x1-ib x2-ib y" },
        { "c[0098-0100]", "c0098 c0099 c0100" },
        { "h[3]", "h3" },
    };
    size_t i;

    for (i = 0; i < sizeof t / sizeof *t; i++) {
        struct hc_hostlist h;
        struct hc_diag d;
        char got[512] = "";
        int k;

        memset(&d, 0, sizeof d);
        CU_ASSERT_EQUAL_FATAL(hc_slurm_hostlist(t[i].list, "LIST", &h, &d),
                              HC_OK);
        for (k = 0; k < h.n; k++) {
            if (k)
                strcat(got, " ");
            strcat(got, h.name[k]);
        }
        if (strcmp(got, t[i].want) != 0)
            printf("\n  %s: got \"%s\", want \"%s\"\n", t[i].list, got,
                   t[i].want);
        CU_ASSERT_STRING_EQUAL(got, t[i].want);
        hc_hostlist_free(&h);
    }
}

static void test_hostlist_bad(void)
{
    static const struct {
        const char *list;
        const char *part;   /* the message must quote this */
        const char *what;   /* and say this */
    } t[] = {
        { "", "SLURM_JOB_NODELIST: is empty", NULL },
        { "node[01-03", "'[' at character 5", "has no ']'" },
        { "node01-03]", "']' without '['", NULL },
        { "node[03-01]", "\"03-01\"", "backwards" },
        { "node[a-c]", "\"a-c\"", "not a number or range" },
        { "node[1-]", "\"1-\"", "not a number or range" },
        { "node[]", "empty brackets", NULL },
        { "node[1,]", "\"[1,]\"", "not a number" },
        { "a,,b", "\"a,,b\"", "empty host name" },
        { "a[1-2],", "empty host name", NULL },
        { "a[[1]]", "cannot nest", NULL },
        { "node[1-99999999]", "more than", "hosts" },
        { "a b", "space", "character 2" },
    };
    size_t i;

    for (i = 0; i < sizeof t / sizeof *t; i++) {
        struct hc_hostlist h;
        struct hc_diag d;

        memset(&d, 0, sizeof d);
        CU_ASSERT_EQUAL(hc_slurm_hostlist(t[i].list, "SLURM_JOB_NODELIST", &h,
                                          &d), HC_ERR_CONFIG);
        CU_ASSERT_EQUAL(h.n, 0);
        CU_ASSERT_PTR_NULL(h.name);
        if (!hp_diag_has(&d, "Slurm: SLURM_JOB_NODELIST: ", NULL) ||
            !hp_diag_has(&d, t[i].part, t[i].what)) {
            hp_diag_show(t[i].list, &d);
            CU_FAIL("message does not name the variable and the bad part");
        }
    }
}

static void test_tasks_per_node(void)
{
    static const struct {
        const char *spec;
        int nodes;
        int want[6];
        const char *err; /* NULL: valid */
    } t[] = {
        { "3(x2),2,1", 4, { 3, 3, 2, 1 }, NULL },
        { "1", 1, { 1 }, NULL },
        { "2(x3)", 3, { 2, 2, 2 }, NULL },
        { "4,1(x2)", 3, { 4, 1, 1 }, NULL },
        { "3(x2),2", 4, { 0 }, "counts 3 node(s), but the node list has 4" },
        { "3(x5)", 4, { 0 }, "more nodes than the 4" },
        { "3(2)", 1, { 0 }, "\"3(2)\" is not a task count" },
        { "x", 1, { 0 }, "\"x\" is not a task count" },
        { "0", 1, { 0 }, "\"0\" is not a task count" },
        { "2,", 1, { 0 }, "is not a task count" },
        { "2(x1", 1, { 0 }, "\"2(x1\" is not a task count" },
    };
    size_t i;

    for (i = 0; i < sizeof t / sizeof *t; i++) {
        struct hc_diag d;
        int counts[8] = { 0 }, rc;

        memset(&d, 0, sizeof d);
        rc = hc_slurm_tasks_per_node(t[i].spec, "SLURM_STEP_TASKS_PER_NODE",
                                     t[i].nodes, counts, &d);
        if (!t[i].err) {
            CU_ASSERT_EQUAL(rc, HC_OK);
            CU_ASSERT(memcmp(counts, t[i].want, (size_t)t[i].nodes *
                             sizeof *counts) == 0);
            continue;
        }
        CU_ASSERT_EQUAL(rc, HC_ERR_CONFIG);
        if (!hp_diag_has(&d, "Slurm: SLURM_STEP_TASKS_PER_NODE: ", t[i].err)) {
            hp_diag_show(t[i].spec, &d);
            CU_FAIL("message does not name the variable and the bad part");
        }
    }
}

/* ---- a whole Slurm step ------------------------------------------------ */

static void slurm_env(const char *nodes, const char *tpn, const char *ntasks,
                      const char *procid)
{
    clear_env();
    setenv("SLURM_JOB_ID", "42", 1);
    setenv("SLURM_STEP_NODELIST", nodes, 1);
    if (tpn)
        setenv("SLURM_STEP_TASKS_PER_NODE", tpn, 1);
    if (ntasks)
        setenv("SLURM_NTASKS", ntasks, 1);
    if (procid)
        setenv("SLURM_PROCID", procid, 1);
}

static void test_slurm_cluster(void)
{
    struct hc_cluster c;
    struct hc_diag d;

    /* 3 + 3 + 2 + 1 tasks; 2 servers, both on node01 */
    slurm_env("node[01-02],gpu[007-008]", "3(x2),2,1", "9", "4");
    setenv("SLURM_JOB_NODELIST", "ignored[1-9]", 1);
    setenv("HETPS_PS_TASKS", "2", 1);
    setenv("SLURMD_NODENAME", "node02", 1);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve("slurm", NULL, 1, &c, &d), HC_OK);
    CU_ASSERT_EQUAL(c.n_ps, 2);
    CU_ASSERT_EQUAL(c.n_worker, 7);
    CU_ASSERT_STRING_EQUAL(c.ps[0].addr, "node01:2222");
    CU_ASSERT_STRING_EQUAL(c.ps[1].addr, "node01:2223");
    CU_ASSERT_STRING_EQUAL(c.worker[0].addr, "node01:2224");
    CU_ASSERT_STRING_EQUAL(c.worker[1].addr, "node02:2222");
    CU_ASSERT_STRING_EQUAL(c.worker[3].addr, "node02:2224");
    CU_ASSERT_STRING_EQUAL(c.worker[5].addr, "gpu007:2223");
    CU_ASSERT_STRING_EQUAL(c.worker[6].addr, "gpu008:2222");
    CU_ASSERT(c.has_task);
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_WORKER);
    CU_ASSERT_EQUAL(c.task_index, 2);           /* rank 4 = worker 2 */
    CU_ASSERT_STRING_EQUAL(c.file, "");
    CU_ASSERT(strstr(c.source, "SLURM_STEP_NODELIST") != NULL);
    hc_cluster_free(&c);

    /* "slurm:K" beats HETPS_PS_TASKS; a base port; rank 0 is ps:0 */
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURMD_NODENAME", "node01", 1);
    setenv("HETPS_BASE_PORT", "30000", 1);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve("slurm:1", NULL, 1, &c, &d),
                          HC_OK);
    CU_ASSERT_EQUAL(c.n_ps, 1);
    CU_ASSERT_EQUAL(c.n_worker, 8);
    CU_ASSERT_STRING_EQUAL(c.ps[0].addr, "node01:30000");
    CU_ASSERT_STRING_EQUAL(c.worker[7].addr, "gpu008:30000");
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_PS);
    CU_ASSERT_EQUAL(c.task_index, 0);
    hc_cluster_free(&c);

    /* automatic under a job when no file and no TF_CONFIG; --task wins and
     * SLURM_PROCID is then not needed */
    slurm_env("n[1-3]", NULL, "3", NULL);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve(NULL, "worker:1", 1, &c, &d),
                          HC_OK);
    CU_ASSERT_EQUAL(c.n_ps, 1);
    CU_ASSERT_STRING_EQUAL(c.worker[1].addr, "n3:2222");
    CU_ASSERT_EQUAL(c.task_index, 1);
    CU_ASSERT(d.n_note == 1 && strstr(d.note[0], "Slurm job 42"));
    hc_cluster_free(&c);

    /* a status command needs no task: no SLURM_PROCID is fine */
    CU_ASSERT_EQUAL(hc_cluster_resolve("slurm", NULL, 0, &c, &d), HC_OK);
    CU_ASSERT(!c.has_task);
    hc_cluster_free(&c);
    clear_env();
}

static void test_slurm_bad(void)
{
    static const struct {
        const char *nodes, *tpn, *ntasks, *procid, *ps, *spec, *node;
        const char *a, *b;
    } t[] = {
        { "n[1-2", "1(x2)", "2", "0", NULL, "slurm", NULL,
          "SLURM_STEP_NODELIST: \"n[1-2\"", "no ']'" },
        { "n[1-2]", "2,x", "3", "0", NULL, "slurm", NULL,
          "SLURM_STEP_TASKS_PER_NODE: \"2,x\"", "\"x\"" },
        { "n[1-2]", "1(x2)", "3", "0", NULL, "slurm", NULL,
          "SLURM_NTASKS: is 3", "places 2 task(s)" },
        { "n[1-2]", "1(x2)", "2", "2", NULL, "slurm", NULL,
          "SLURM_PROCID: \"2\"", "0..1" },
        { "n[1-2]", "1(x2)", "2", NULL, NULL, "slurm", NULL,
          "SLURM_PROCID: is not set", NULL },
        { "n[1-2]", "1(x2)", "2", "0", "2", "slurm", NULL,
          "HETPS_PS_TASKS: 2 parameter server(s)", "no worker" },
        { "n[1-2]", "1(x2)", "2", "0", "two", "slurm", NULL,
          "HETPS_PS_TASKS: \"two\"", "whole number" },
        { "n[1-2]", "1(x2)", "2", "0", NULL, "slurm:x", NULL,
          "--cluster: \"slurm:x\"", "slurm:K" },
        { "n[1-2]", "1(x2)", "2", "1", NULL, "slurm", "n1",
          "task 1 runs on n1", "block distribution" },
    };
    size_t i;

    for (i = 0; i < sizeof t / sizeof *t; i++) {
        struct hc_cluster c;
        struct hc_diag d;

        slurm_env(t[i].nodes, t[i].tpn, t[i].ntasks, t[i].procid);
        if (t[i].ps)
            setenv("HETPS_PS_TASKS", t[i].ps, 1);
        if (t[i].node)
            setenv("SLURMD_NODENAME", t[i].node, 1);
        CU_ASSERT_EQUAL(hc_cluster_resolve(t[i].spec, NULL, 1, &c, &d),
                        HC_ERR_CONFIG);
        CU_ASSERT_PTR_NULL(c.ps);
        if (!hp_diag_has(&d, t[i].a, t[i].b)) {
            hp_diag_show(t[i].a, &d);
            CU_FAIL("message does not name the variable and the bad part");
        }
    }
    /* not under Slurm at all */
    {
        struct hc_cluster c;
        struct hc_diag d;
        clear_env();
        CU_ASSERT_EQUAL(hc_cluster_resolve("slurm", NULL, 1, &c, &d),
                        HC_ERR_CONFIG);
        CU_ASSERT(hp_diag_has(&d, "Slurm: SLURM_STEP_NODELIST: is not set",
                           "srun"));
    }
    clear_env();
}

/* ---- Kubernetes -------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    CU_ASSERT_FATAL(f != NULL);
    fputs(text, f);
    fclose(f);
}

static void test_k8s_task(void)
{
    static const struct {
        const char *host, *job, *index;
        const char *want;   /* task, or NULL */
        const char *err;
        const char *offset; /* HETPS_INDEX_OFFSET */
    } t[] = {
        { "hetps-ps-1", NULL, NULL, "ps:1", NULL, NULL },
        { "train-worker-12", NULL, NULL, "worker:12", NULL, NULL },
        { "hetps-worker-3", NULL, "3", "worker:3", NULL, NULL },
        { "pod-xyz", "worker", "2", "worker:2", NULL, NULL },   /* Indexed Job */
        { "trainer-0", "ps", NULL, "ps:0", NULL, NULL },        /* any StatefulSet */
        { "trainer-0", NULL, NULL, NULL, "HETPS_JOB: not set", NULL },
        { "hetps-ps", NULL, NULL, NULL, "HETPS_JOB: not set", NULL },
        { "web-7", "db", NULL, NULL, "HETPS_JOB: \"db\" is not a job", NULL },
        { "hetps-worker", "worker", NULL, NULL,
          "HOSTNAME: \"hetps-worker\" does not end in -N", NULL },
        { "x", "worker", "-1", NULL, "JOB_COMPLETION_INDEX: \"-1\"", NULL },
        { "x", "worker", "1a", NULL, "JOB_COMPLETION_INDEX: \"1a\"", NULL },
        { "x", "worker", "1", "worker:4", NULL, "3" },    /* a second Job */
        { "x", "worker", "1", NULL, "HETPS_INDEX_OFFSET: \"-3\"", "-3" },
    };
    size_t i;

    for (i = 0; i < sizeof t / sizeof *t; i++) {
        struct hc_diag d;
        char spec[64] = "";
        int rc;

        clear_env();
        memset(&d, 0, sizeof d);
        setenv("HOSTNAME", t[i].host, 1);
        if (t[i].job)
            setenv("HETPS_JOB", t[i].job, 1);
        if (t[i].index)
            setenv("JOB_COMPLETION_INDEX", t[i].index, 1);
        if (t[i].offset)
            setenv("HETPS_INDEX_OFFSET", t[i].offset, 1);
        rc = hc_k8s_task(spec, sizeof spec, &d);
        if (t[i].want) {
            CU_ASSERT_EQUAL(rc, HC_OK);
            CU_ASSERT_STRING_EQUAL(spec, t[i].want);
        } else {
            CU_ASSERT_EQUAL(rc, HC_ERR_CONFIG);
            if (!hp_diag_has(&d, "Kubernetes: ", t[i].err)) {
                hp_diag_show(t[i].host, &d);
                CU_FAIL("message does not name the variable");
            }
        }
    }
    clear_env();
}

static void test_k8s_cluster(void)
{
    char dir[256], path[300], spec[320];
    struct hc_cluster c;
    struct hc_diag d;

    CU_ASSERT_PTR_NOT_NULL_FATAL(hp_tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    write_file(path, "{\"cluster\": {\"ps\": [\"hetps-ps-0.hetps-ps:2222\", "
               "\"hetps-ps-1.hetps-ps:2222\"], \"worker\": "
               "[\"hetps-worker-0.hetps-worker:2222\", "
               "\"hetps-worker-1.hetps-worker:2222\"]}}");
    snprintf(spec, sizeof spec, "k8s:%s", path);

    clear_env();
    setenv("HOSTNAME", "hetps-ps-1", 1);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve(spec, NULL, 1, &c, &d), HC_OK);
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_PS);
    CU_ASSERT_EQUAL(c.task_index, 1);
    CU_ASSERT_STRING_EQUAL(c.file, path);   /* a server re-reads this */
    hc_cluster_free(&c);

    setenv("HOSTNAME", "hetps-worker-1-abcde", 1); /* a Job pod's name */
    setenv("HETPS_JOB", "worker", 1);
    setenv("JOB_COMPLETION_INDEX", "1", 1);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve(spec, NULL, 1, &c, &d), HC_OK);
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_WORKER);
    CU_ASSERT_EQUAL(c.task_index, 1);
    hc_cluster_free(&c);

    /* an index past the ConfigMap's cluster */
    setenv("JOB_COMPLETION_INDEX", "2", 1);
    CU_ASSERT_EQUAL(hc_cluster_resolve(spec, NULL, 1, &c, &d), HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "Kubernetes pod (task worker:2)",
                       "out of range: cluster.worker has 2 task(s)"));
    /* --task wins over the pod */
    CU_ASSERT_EQUAL(hc_cluster_resolve(spec, "ps:0", 1, &c, &d), HC_OK);
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_PS);
    hc_cluster_free(&c);
    /* a missing ConfigMap file is the file's error */
    CU_ASSERT_EQUAL(hc_cluster_resolve("k8s:/nonexistent/c.json", NULL, 1, &c,
                                       &d), HC_ERR_CONFIG);
    CU_ASSERT(hp_diag_has(&d, "cluster file /nonexistent/c.json", "cannot read"));
    clear_env();
    hp_rmtree(dir);
}

/* Kubeflow's TFJob operator writes TF_CONFIG with addresses
 * {job}-{type}-{index}.{namespace}.svc:2222, lower-case types, a chief, and
 * "environment": "cloud"; it is read as it is. */
static void test_tfjob(void)
{
    struct hc_cluster c;
    struct hc_diag d;

    clear_env();
    setenv("TF_CONFIG",
           "{\"cluster\":{\"chief\":[\"mnist-chief-0.team-a.svc:2222\"],"
           "\"ps\":[\"mnist-ps-0.team-a.svc:2222\","
           "\"mnist-ps-1.team-a.svc:2222\"],"
           "\"worker\":[\"mnist-worker-0.team-a.svc:2222\"]},"
           "\"task\":{\"type\":\"worker\",\"index\":0},"
           "\"environment\":\"cloud\"}", 1);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_resolve(NULL, NULL, 1, &c, &d), HC_OK);
    CU_ASSERT_EQUAL(d.n, 0);
    CU_ASSERT_EQUAL(c.n_ps, 2);
    CU_ASSERT_EQUAL(c.n_worker, 2);
    CU_ASSERT_STRING_EQUAL(c.ps[1].host, "mnist-ps-1.team-a.svc");
    CU_ASSERT_EQUAL(c.ps[1].port, 2222);
    CU_ASSERT_STRING_EQUAL(c.worker[0].addr, "mnist-chief-0.team-a.svc:2222");
    CU_ASSERT_EQUAL(c.task_job, HC_JOB_WORKER);
    CU_ASSERT_EQUAL(c.task_index, 1);   /* worker 0 after the chief */
    hc_cluster_free(&c);
    /* a TFJob pod under Slurm-like variables still takes TF_CONFIG */
    setenv("SLURM_JOB_ID", "7", 1);
    CU_ASSERT_EQUAL(hc_cluster_resolve(NULL, NULL, 1, &c, &d), HC_OK);
    CU_ASSERT(strcmp(c.source, "TF_CONFIG") == 0);
    hc_cluster_free(&c);
    clear_env();
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("resolve", NULL, NULL);

    CU_add_test(s, "Slurm host lists (table)", test_hostlist);
    CU_add_test(s, "bad Slurm host lists (table)", test_hostlist_bad);
    CU_add_test(s, "Slurm tasks per node (table)", test_tasks_per_node);
    CU_add_test(s, "Slurm step into a cluster", test_slurm_cluster);
    CU_add_test(s, "bad Slurm steps (table)", test_slurm_bad);
    CU_add_test(s, "pod task from ordinal or index", test_k8s_task);
    CU_add_test(s, "k8s:FILE", test_k8s_cluster);
    CU_add_test(s, "Kubeflow TFJob TF_CONFIG", test_tfjob);
}
