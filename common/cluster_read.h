/*
 * cluster_read.h — the tools every part of the cluster reader
 * (common/cluster*.c) uses, all in cluster_read.c: one parse's
 * diagnostics, the JSON text and its values. Nothing outside
 * common/cluster*.c includes this; the contract is cluster.h.
 */
#ifndef HC_CLUSTER_IMPL_H
#define HC_CLUSTER_IMPL_H

#include "cluster.h"

#include <cjson/cJSON.h>

#define NKEYS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* One parse: where the text came from and where problems go. */
struct cl_parse {
    const char *src;        /* "cluster file F", "TF_CONFIG", "--task flag" */
    struct hc_diag *d;
    int nomem;
};

/* ---- diagnostics (cluster_read.c) ------------------------------------- */

/* Record one mistake as "SRC: KEY: what" (key may be NULL: "SRC: what");
 * the first also becomes the hc_err message. Counts past HC_DIAG_MAX. */
void cl_problem(struct cl_parse *p, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record an informational note (at most four are kept). */
void cl_note(struct hc_diag *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "a string", "a number", "a list", "an object", "true/false", "null". */
const char *cl_jtype(const cJSON *v);

/* The valid key closest to a misspelt one, or NULL when none is close. */
const char *cl_suggest(const char *s, const char *const *valid, int n);

/* items joined with ", " into buf (cut at n bytes). */
void cl_join(char *buf, size_t n, const char *const *items, int count);

/* 1 when s is one of valid[0..n). */
int cl_known(const char *s, const char *const *valid, int n);

/*
 * Check an object's keys: each at most once; unknown keys are errors when
 * `strict`, else only when they look like a typo of a valid key (a TF_CONFIG
 * may carry keys such as "environment" that hetps has no use for). Keys are
 * named "PREFIX.KEY" in messages.
 */
void cl_check_keys(struct cl_parse *p, const cJSON *obj, const char *prefix,
                   const char *const *valid, int nvalid, int strict);

/* ---- JSON text and values (cluster_read.c) ---------------------------- */

/* Parse the JSON text (a UTF-8 byte-order mark allowed); NULL, with the
 * mistake reported at its line and column, when it is empty or bad. */
cJSON *cl_parse_json(struct cl_parse *p, const char *json, size_t len);

/* Decimal integer, optional '-': 0, -1 when not numeric, -2 when huge. */
int cl_parse_decimal(const char *s, long long *v);

/* A JSON number that is a whole number: 0, -1 when fractional, -2 huge. */
int cl_json_whole(const cJSON *v, long long *out);

/* A task index: a number or a string of digits ("1"), as Kubeflow writes;
 * 0, or -1 when reported. A huge index reads as LLONG_MAX. */
int cl_read_index(struct cl_parse *p, const char *key, const cJSON *v,
                  long long *out);

/* A "host:port" (or "[v6]:port") string into *a; 0, or -1 when reported. */
int cl_read_addr(struct cl_parse *p, const char *key, const cJSON *v,
                 struct hc_task_addr *a);

#endif
