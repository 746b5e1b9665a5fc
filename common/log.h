/*
 * log.h — one line per event on stderr: "2026-12-02T10:16:17.123Z ps:0 INFO msg".
 *
 * The task name is set once by main (hc_log_set_task). Levels below the
 * threshold (HETPS_LOG=debug|info|warn|error, default info) are dropped.
 * Safe to call from any thread; each line is written with one write(2).
 */
#ifndef HC_LOG_H
#define HC_LOG_H

enum hc_log_level { HC_LOG_DEBUG, HC_LOG_INFO, HC_LOG_WARN, HC_LOG_ERROR };

void hc_log_set_task(const char *task);
void hc_log_set_level(enum hc_log_level level);
void hc_log(enum hc_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define hc_debug(...) hc_log(HC_LOG_DEBUG, __VA_ARGS__)
#define hc_info(...) hc_log(HC_LOG_INFO, __VA_ARGS__)
#define hc_warn(...) hc_log(HC_LOG_WARN, __VA_ARGS__)
#define hc_error(...) hc_log(HC_LOG_ERROR, __VA_ARGS__)

#endif
