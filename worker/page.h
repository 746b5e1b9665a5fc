/*
 * page.h — the chief's live page, GET / on its metrics address: the
 * cluster's tasks (role, devices, state, step, speed, batch share, whom a
 * step waits for, as the shards say now) and the run's loss, accuracy and
 * throughput curves so far (watch.h's history), as one plain HTML page
 * with inline SVG that reloads itself every 2 s and loads nothing else.
 */
#ifndef WK_PAGE_H
#define WK_PAGE_H

#include <stddef.h>

#include "cluster.h"
#include "watch.h"

struct wk_page {
    const struct hc_cluster *cl;    /* must outlive the page */
    const char *model;              /* the model's name */
    struct wk_watch *watch;         /* the run's history */
};

/* The page, malloc'd (*len bytes): an hc_http_page callback, arg a
 * struct wk_page. NULL when out of memory. */
char *wk_page_render(void *arg, size_t *len);

#endif
