/*
 * metrics.h — a process's Prometheus metrics and the small HTTP server that
 * shows them: GET /metrics in the text exposition format (version 0.0.4),
 * and any page a program adds (the chief's GET /, worker/page.c).
 *
 * A registry holds families (one name, help and type) of series (one set
 * of labels each). Names follow Prometheus's rules as the callers choose
 * them: hetps_ prefix, base units (seconds, bytes), _total counters.
 * Looking a series up creates it, so a scrape callback can set gauges of
 * labels it meets (a worker that joined later). Every function is
 * thread-safe (one mutex per registry; an update is a lookup-free pointer
 * operation when the caller keeps the series it got).
 */
#ifndef HC_METRICS_H
#define HC_METRICS_H

#include <stddef.h>

struct hc_metrics;
struct hc_series;
struct hc_http;

enum hc_metric_type { HC_COUNTER, HC_GAUGE, HC_HISTOGRAM };

/* A registry; HC_ERR_NOMEM. */
int hc_metrics_new(struct hc_metrics **out);
void hc_metrics_free(struct hc_metrics *m);

/*
 * The series of family `name` with `labels` (preformatted, e.g.
 * `shard="0",type="push"`, or NULL), created on first use with `help`;
 * histograms take their bucket upper bounds (increasing, n_bounds <= 32,
 * +Inf added). NULL when out of memory or when name is already a family
 * of another type (a programming error, logged). Valid until
 * hc_metrics_free.
 */
struct hc_series *hc_metric(struct hc_metrics *m, enum hc_metric_type type,
                            const char *name, const char *help,
                            const char *labels, const double *bounds,
                            int n_bounds);

/* Counters and gauges: add v (a counter takes v >= 0); gauges: set v.
 * Histograms: observe v. A NULL series is ignored. */
void hc_series_add(struct hc_series *s, double v);
void hc_series_set(struct hc_series *s, double v);
void hc_series_observe(struct hc_series *s, double v);

/* fn(arg, m) runs at each rendering, before the text is made, to set
 * gauges from state the caller owns (under its own locks). One callback
 * per registry; NULL removes it. */
void hc_metrics_on_render(struct hc_metrics *m,
                          void (*fn)(void *arg, struct hc_metrics *m),
                          void *arg);

/* The text exposition format of every series, malloc'd (*len bytes, NUL
 * terminated); NULL when out of memory. */
char *hc_metrics_render(struct hc_metrics *m, size_t *len);

/* Bucket bounds for latencies: 100 µs .. 10 s (16 bounds). */
extern const double hc_latency_bounds[16];

/*
 * A server of GET /metrics of m on addr ("HOST:PORT", e.g.
 * "127.0.0.1:9300"; port 0 picks one) with nng's HTTP server; it listens
 * from hc_http_listen. HC_ERR_CONFIG naming addr when it is not HOST:PORT.
 */
int hc_http_open(struct hc_http **out, const char *addr, struct hc_metrics *m);

/* Serve GET path (e.g. "/") with the page fn returns: malloc'd bytes of
 * content_type, freed by the server; NULL: a 500. Before hc_http_listen. */
int hc_http_page(struct hc_http *h, const char *path, const char *content_type,
                 char *(*fn)(void *arg, size_t *len), void *arg);

/* Start listening; HC_ERR_IO naming the address when it cannot. */
int hc_http_listen(struct hc_http *h);

/* The port it listens on (the one chosen for port 0). */
int hc_http_port(const struct hc_http *h);

void hc_http_stop(struct hc_http *h);

struct hc_cluster;

/*
 * Where task (ps or worker, index) serves its metrics, into out ("" when
 * nowhere): `flag` when given (--metrics-addr HOST:PORT, or "off"), else
 * the cluster's hetps.metrics_port scheme on the task's own host (see
 * cluster.h), else nowhere.
 */
void hc_metrics_addr(const struct hc_cluster *cl, int is_ps, int index,
                     const char *flag, char *out, size_t len);

#endif
