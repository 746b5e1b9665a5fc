/*
 * log.c — timestamped, task-tagged log lines on stderr.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static char log_task[32] = "hetps";
static int log_level = -1;

void hc_log_set_task(const char *task)
{
    snprintf(log_task, sizeof log_task, "%s", task);
}

void hc_log_set_level(enum hc_log_level level)
{
    log_level = (int)level;
}

static int level_from_env(void)
{
    const char *e = getenv("HETPS_LOG");

    if (!e)
        return HC_LOG_INFO;
    if (!strcasecmp(e, "debug"))
        return HC_LOG_DEBUG;
    if (!strcasecmp(e, "warn"))
        return HC_LOG_WARN;
    if (!strcasecmp(e, "error"))
        return HC_LOG_ERROR;
    return HC_LOG_INFO;
}

void hc_log(enum hc_log_level level, const char *fmt, ...)
{
    static const char *const names[] = { "DEBUG", "INFO", "WARN", "ERROR" };
    char line[2048];
    struct timespec ts;
    struct tm tm;
    va_list ap;
    int n;

    if (log_level < 0)
        log_level = level_from_env();
    if ((int)level < log_level)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_task,
                 names[level]);
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}
