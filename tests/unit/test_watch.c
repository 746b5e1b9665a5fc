/*
 * test_watch.c — a worker's reports of a model with tables (worker/watch.c,
 * worker/page.c): the steps' unique rows and sparse bytes kept in the
 * history and drawn on the live page as their own charts, which a model
 * without tables does not get.
 */
#include "cu.h"
#include "cluster.h"
#include "err.h"
#include "worker/page.h"
#include "worker/watch.h"

#include <stdlib.h>
#include <string.h>

/* The page of a run of `steps` steps, with sparse figures when sparse. */
static char *page_of(int steps, int sparse, struct wk_watch_point *last)
{
    struct wk_watch_conf c = { .worker = 0, .n_workers = 1, .epochs = 1,
                               .verbose = 0 };
    struct hc_cluster cl;
    struct wk_watch w;
    struct wk_page pg = { .cl = &cl, .model = "ctr", .watch = &w };
    struct wk_watch_point pts[8];
    struct wk_watch_epoch ep;
    int n_pts = 0, n_ep = 0;
    size_t len = 0;
    char *html;

    memset(&cl, 0, sizeof cl);
    CU_ASSERT_EQUAL_FATAL(wk_watch_open(&w, &c), HC_OK);
    wk_watch_begin(&w, 0, steps, 0.0);
    for (int i = 1; i <= steps; i++) {
        if (sparse)
            wk_watch_sparse(&w, 100 + (uint64_t)i, 40 * (100 + (uint64_t)i),
                            40 * (100 + (uint64_t)i) + 1);
        wk_watch_step(&w, i, 32, 0.5, 16, 0.01, 0.01, (double)i);
    }
    wk_watch_history(&w, pts, 8, &n_pts, &ep, 1, &n_ep);
    CU_ASSERT_EQUAL_FATAL(n_pts, steps);
    *last = pts[n_pts - 1];
    html = wk_page_render(&pg, &len);
    CU_ASSERT_PTR_NOT_NULL(html);
    CU_ASSERT(html && strlen(html) == len);
    wk_watch_close(&w);
    return html;
}

static void test_sparse_page(void)
{
    struct wk_watch_point p;
    char *html = page_of(5, 1, &p);

    CU_ASSERT_EQUAL(p.rows, 105);
    CU_ASSERT_EQUAL(p.pulled, 4200);
    CU_ASSERT_EQUAL(p.pushed, 4201);
    CU_ASSERT_PTR_NOT_NULL(html && strstr(html, "sparse rows a step"));
    CU_ASSERT_PTR_NOT_NULL(html && strstr(html, ">unique rows</text>"));
    CU_ASSERT_PTR_NOT_NULL(html && strstr(html, ">KiB pulled</text>"));
    CU_ASSERT_PTR_NOT_NULL(html && strstr(html, ">KiB pushed</text>"));
    free(html);
    html = page_of(5, 0, &p);
    CU_ASSERT_EQUAL(p.rows, 0);
    CU_ASSERT_PTR_NOT_NULL(html && strstr(html, "throughput"));
    CU_ASSERT_PTR_NULL(html ? strstr(html, "sparse rows a step") : "");
    free(html);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("watch", NULL, NULL);

    CU_add_test(s, "a model with tables: its sparse charts on the page",
                test_sparse_page);
}
