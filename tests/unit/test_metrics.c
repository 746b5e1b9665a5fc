/*
 * test_metrics.c — the Prometheus text a registry renders (common/
 * metrics.c): counters, gauges with labels, histogram buckets cumulated
 * with +Inf, _sum and _count, one HELP/TYPE per family, a family's type
 * kept; the metrics address resolution; and the TensorBoard record framing
 * of common/tfevents.c read back byte by byte (lengths, masked CRC32Cs of
 * TensorFlow's definition).
 */
#include "cu.h"
#include "cluster.h"
#include "crc32c.h"
#include "err.h"
#include "metrics.h"
#include "tfevents.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_render(void)
{
    static const double b[] = { 0.1, 1 };
    struct hc_metrics *m;
    struct hc_series *c, *g, *h;
    char *text;
    size_t len;

    CU_ASSERT_EQUAL_FATAL(hc_metrics_new(&m), HC_OK);
    c = hc_metric(m, HC_COUNTER, "hetps_x_total", "Xs", "shard=\"0\"", NULL, 0);
    g = hc_metric(m, HC_GAUGE, "hetps_g", "A gauge", NULL, NULL, 0);
    h = hc_metric(m, HC_HISTOGRAM, "hetps_t_seconds", "Times", "k=\"a\"", b, 2);
    CU_ASSERT_PTR_EQUAL(hc_metric(m, HC_COUNTER, "hetps_x_total", "Xs",
                                  "shard=\"0\"", NULL, 0), c);
    CU_ASSERT_PTR_NULL(hc_metric(m, HC_GAUGE, "hetps_x_total", "", NULL,
                                 NULL, 0));     /* another type */
    hc_series_add(c, 2);
    hc_series_add(c, 3);
    hc_series_set(g, 0.25);
    hc_series_observe(h, 0.05);
    hc_series_observe(h, 0.5);
    hc_series_observe(h, 0.5);
    hc_series_observe(h, 7);
    text = hc_metrics_render(m, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(len, strlen(text));
    CU_ASSERT_STRING_EQUAL(text,
        "# HELP hetps_x_total Xs\n# TYPE hetps_x_total counter\n"
        "hetps_x_total{shard=\"0\"} 5\n"
        "# HELP hetps_g A gauge\n# TYPE hetps_g gauge\nhetps_g 0.25\n"
        "# HELP hetps_t_seconds Times\n# TYPE hetps_t_seconds histogram\n"
        "hetps_t_seconds_bucket{k=\"a\",le=\"0.1\"} 1\n"
        "hetps_t_seconds_bucket{k=\"a\",le=\"1\"} 3\n"
        "hetps_t_seconds_bucket{k=\"a\",le=\"+Inf\"} 4\n"
        "hetps_t_seconds_sum{k=\"a\"} 8.05\n"
        "hetps_t_seconds_count{k=\"a\"} 4\n");
    free(text);
    hc_metrics_free(m);
}

static void test_addr(void)
{
    struct hc_cluster cl;
    struct hc_task_addr ps[2] = { { .host = "10.0.0.1" }, { .host = "::1" } };
    struct hc_task_addr wk[1] = { { .host = "gpu-box" } };
    char out[64];

    memset(&cl, 0, sizeof cl);
    cl.n_ps = 2;
    cl.ps = ps;
    cl.n_worker = 1;
    cl.worker = wk;
    hc_metrics_addr(&cl, 1, 0, NULL, out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "");            /* off by default */
    cl.metrics_port = 9300;
    hc_metrics_addr(&cl, 1, 0, NULL, out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "10.0.0.1:9300");
    hc_metrics_addr(&cl, 1, 1, NULL, out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "[::1]:9301");
    hc_metrics_addr(&cl, 0, 0, NULL, out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "gpu-box:9302");
    hc_metrics_addr(&cl, 0, 0, "off", out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "");
    hc_metrics_addr(&cl, 0, 0, "127.0.0.1:1", out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "127.0.0.1:1");
}

static uint32_t rd32(const unsigned char *b)
{
    return b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
           (uint32_t)b[3] << 24;
}

static void test_tfevents_framing(void)
{
    static const char *const tags[] = { "loss", "accuracy" };
    static const float v[] = { 0.5f, 0.75f };
    char dir[256], path[512];
    unsigned char buf[4096];
    struct hc_tfevents *t;
    size_t n, at = 0;
    int records = 0;
    FILE *f;

    /* TensorFlow's mask of CRC32C("123456789") = 0xE3069283 */
    CU_ASSERT_EQUAL(hc_tfevents_masked_crc("123456789", 9),
                    ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
    hp_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/logs/run", dir);
    CU_ASSERT_EQUAL_FATAL(hc_tfevents_open(&t, path), HC_OK);
    CU_ASSERT_EQUAL(hc_tfevents_scalars(t, 7, 2, tags, v), HC_OK);
    snprintf(path, sizeof path, "%s", hc_tfevents_path(t));
    CU_ASSERT_PTR_NOT_NULL(strstr(path, "/logs/run/events.out.tfevents."));
    CU_ASSERT_EQUAL(hc_tfevents_close(t), HC_OK);
    f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    while (at + 12 <= n) {
        size_t len = rd32(buf + at);

        CU_ASSERT_EQUAL(rd32(buf + at + 4), 0);         /* length < 4 GiB */
        CU_ASSERT_EQUAL(rd32(buf + at + 8), hc_tfevents_masked_crc(buf + at, 8));
        CU_ASSERT_FATAL(at + 16 + len <= n);
        CU_ASSERT_EQUAL(rd32(buf + at + 12 + len),
                        hc_tfevents_masked_crc(buf + at + 12, len));
        if (records == 0)   /* field 3 (file_version), "brain.Event:2" */
            CU_ASSERT_PTR_NOT_NULL(memmem(buf + at + 12, len,
                                          "\x1a\x0d" "brain.Event:2", 15));
        at += 16 + len;
        records++;
    }
    CU_ASSERT_EQUAL(at, n);
    CU_ASSERT_EQUAL(records, 2);
    CU_ASSERT_EQUAL(hc_tfevents_open(&t, "/proc/hetps-no/such"), HC_ERR_IO);
    hp_rmtree(dir);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("metrics", NULL, NULL);

    CU_add_test(s, "Prometheus text", test_render);
    CU_add_test(s, "metrics address", test_addr);
    CU_add_test(s, "TensorBoard record framing", test_tfevents_framing);
}
