/*
 * cluster_read.c — what every part of the cluster reader shares (the
 * contract is cluster_read.h): the diagnostics of one parse, each mistake
 * one sentence "SOURCE: KEY: what is wrong; fix" (cl_problem), notes, and
 * their printing (hc_diag_print); the key check with its typo suggestions;
 * the JSON text, whose syntax errors name a line and column; and the
 * values: whole numbers, task indices, host:port addresses. Nothing here
 * touches the network.
 */
#include "cluster_read.h"

#include "err.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>

/* ---- diagnostics ------------------------------------------------------ */

void cl_problem(struct cl_parse *p, const char *key, const char *fmt, ...)
{
    char what[448];
    struct hc_diag *d = p->d;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (d->n < HC_DIAG_MAX) {
        char *m = d->msg[d->n];
        if (key)
            snprintf(m, sizeof d->msg[0], "%s: %s: %s", p->src, key, what);
        else
            snprintf(m, sizeof d->msg[0], "%s: %s", p->src, what);
        if (d->n == 0)
            hc_err_set(HC_ERR_CONFIG, "%s", m);
    }
    d->n++;
}

void cl_note(struct hc_diag *d, const char *fmt, ...)
{
    va_list ap;

    if (d->n_note >= NKEYS(d->note))
        return;
    va_start(ap, fmt);
    vsnprintf(d->note[d->n_note++], sizeof d->note[0], fmt, ap);
    va_end(ap);
}

const char *cl_jtype(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsArray(v))
        return "a list";
    if (cJSON_IsObject(v))
        return "an object";
    if (cJSON_IsBool(v))
        return "true/false";
    return "null";
}

/* Edit distance counting a swap of neighbours as one edit (optimal string
 * alignment), case-insensitive; 99 for long strings. */
static int distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b), i, j;
    int d[32][32];

    if (la > 31 || lb > 31)
        return 99;
    for (i = 0; i <= la; i++)
        d[i][0] = i;
    for (j = 0; j <= lb; j++)
        d[0][j] = j;
    for (i = 1; i <= la; i++)
        for (j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)a[i - 1]);
            int cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                cb == tolower((unsigned char)a[i - 2]) &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The valid key closest to a misspelt one, or NULL when none is close. */
const char *cl_suggest(const char *s, const char *const *valid, int n)
{
    const char *best = NULL;
    int bestd = 99, i;

    for (i = 0; i < n; i++) {
        int d = distance(s, valid[i]);
        int lim = (int)strlen(valid[i]) / 3;
        if (d <= (lim < 1 ? 1 : lim) && d < bestd) {
            best = valid[i];
            bestd = d;
        }
    }
    return best;
}

void cl_join(char *buf, size_t n, const char *const *items, int count)
{
    size_t at = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; i < count && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "",
                               items[i]);
}

int cl_known(const char *s, const char *const *valid, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (strcmp(s, valid[i]) == 0)
            return 1;
    return 0;
}

/*
 * Check an object's keys: each at most once; unknown keys are errors when
 * `strict`, else only when they look like a typo of a valid key (a TF_CONFIG
 * may carry keys such as "environment" that hetps has no use for).
 */
void cl_check_keys(struct cl_parse *p, const cJSON *obj, const char *prefix,
                   const char *const *valid, int nvalid, int strict)
{
    const cJSON *e, *f;
    char key[96], list[128];

    cJSON_ArrayForEach(e, obj) {
        snprintf(key, sizeof key, "%s%s%.40s", prefix, *prefix ? "." : "",
                 e->string);
        for (f = obj->child; f != e; f = f->next)
            if (strcmp(f->string, e->string) == 0)
                break;
        if (f != e) {
            cl_problem(p, key, "given twice; keep one");
            continue;
        }
        if (cl_known(e->string, valid, nvalid))
            continue;
        const char *near = cl_suggest(e->string, valid, nvalid);
        if (!strict && !near)
            continue;
        cl_join(list, sizeof list, valid, nvalid);
        if (near)
            cl_problem(p, key, "unknown key; did you mean \"%s\"? (valid "
                       "keys: %s)", near, list);
        else
            cl_problem(p, key, "unknown key; valid keys: %s", list);
    }
}

/* ---- numbers and addresses ------------------------------------------- */

/* Decimal integer, optional '-': 0, -1 when not numeric, -2 when huge. */
int cl_parse_decimal(const char *s, long long *v)
{
    long long x = 0;
    int neg = 0, nd = 0;

    if (*s == '-') {
        neg = 1;
        s++;
    }
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s))
            return -1;
        if (++nd <= 15)
            x = x * 10 + (*s - '0');
    }
    if (nd > 15)
        return -2;
    *v = neg ? -x : x;
    return 0;
}

/* A JSON number that is a whole number: 0, -1 when fractional, -2 huge. */
int cl_json_whole(const cJSON *v, long long *out)
{
    double x = v->valuedouble;

    if (x != x)
        return -1;
    if (x > 1e15 || x < -1e15)
        return -2;
    if ((double)(long long)x != x)
        return -1;
    *out = (long long)x;
    return 0;
}

/* A task index: a number or a string of digits ("1"), as Kubeflow writes. */
int cl_read_index(struct cl_parse *p, const char *key, const cJSON *v,
                  long long *out)
{
    int r;

    if (cJSON_IsNumber(v)) {
        r = cl_json_whole(v, out);
        if (r == -1) {
            cl_problem(p, key, "%g is not a whole number; task indices are 0, "
                       "1, 2, …", v->valuedouble);
            return -1;
        }
    } else if (cJSON_IsString(v)) {
        r = cl_parse_decimal(v->valuestring, out);
        if (r == -1) {
            cl_problem(p, key, "\"%.40s\" is not a number; write a task index "
                       "such as 0 or \"0\"", v->valuestring);
            return -1;
        }
    } else {
        cl_problem(p, key, "must be a number such as 0 (or a string of digits "
                   "such as \"0\"), got %s", cl_jtype(v));
        return -1;
    }
    if (r == -2)
        *out = LLONG_MAX;
    if (*out < 0) {
        cl_problem(p, key, "%lld is negative; task indices start at 0", *out);
        return -1;
    }
    return 0;
}

/* Parse "host:port" or "[v6]:port" into *a; on a mistake fill why. */
static int parse_addr(const char *s, struct hc_task_addr *a, char *why,
                      size_t wn)
{
    const char *hs, *he, *colon, *c;
    size_t hl;
    long long port;
    int v6 = 0, r;

    memset(a, 0, sizeof *a);
    if (!*s)
        return snprintf(why, wn, "empty; write \"host:port\", e.g. "
                        "\"ps0:2222\""), -1;
    if (strlen(s) >= sizeof a->addr)
        return snprintf(why, wn, "too long (at most %zu characters)",
                        sizeof a->addr - 1), -1;
    if (strstr(s, "://"))
        return snprintf(why, wn, "has a scheme; write just \"host:port\" "
                        "(hetps adds tcp://)"), -1;
    if (s[0] == '[') {
        v6 = 1;
        hs = s + 1;
        he = strchr(s, ']');
        if (!he)
            return snprintf(why, wn, "has '[' but no ']'; write an IPv6 "
                            "address as \"[::1]:2222\""), -1;
        colon = he + 1;
        if (*colon == '\0')
            return snprintf(why, wn, "missing port; write \"host:port\", "
                            "e.g. \"[::1]:2222\""), -1;
        if (*colon != ':')
            return snprintf(why, wn, "unexpected text after ']'; write an "
                            "IPv6 address as \"[::1]:2222\""), -1;
    } else {
        hs = s;
        colon = he = strrchr(s, ':');
        if (!colon)
            return snprintf(why, wn, "missing port; write \"host:port\", "
                            "e.g. \"%.60s:2222\"", s), -1;
        if (memchr(s, ':', (size_t)(colon - s)))
            return snprintf(why, wn, "an IPv6 address needs brackets, e.g. "
                            "\"[::1]:2222\""), -1;
    }
    hl = (size_t)(he - hs);
    if (hl == 0)
        return snprintf(why, wn, "empty host; write \"host:port\", e.g. "
                        "\"ps0:2222\""), -1;
    if (hl >= HC_HOST_MAX)
        return snprintf(why, wn, "host name too long (at most %d "
                        "characters)", HC_HOST_MAX - 1), -1;
    for (c = hs; c < he; c++)
        if (isspace((unsigned char)*c) || iscntrl((unsigned char)*c) ||
            *c == '/' || (!v6 && (*c == '[' || *c == ']')))
            return snprintf(why, wn, "host \"%.*s\" contains '%s'; write a "
                            "host name or IP address", (int)hl, hs,
                            *c == '/' ? "/" : isspace((unsigned char)*c)
                            ? " " : *c == '[' ? "[" : *c == ']' ? "]"
                            : "a control character"), -1;
    if (colon[1] == '\0')
        return snprintf(why, wn, "missing port after ':'; e.g. \"%.60s2222\"",
                        s), -1;
    r = cl_parse_decimal(colon + 1, &port);
    if (r == -1)
        return snprintf(why, wn, "port \"%.20s\" is not a number; write "
                        "e.g. 2222", colon + 1), -1;
    if (r == -2 || port < 1 || port > 65535)
        return snprintf(why, wn, "port %.20s is out of range; use "
                        "1..65535", colon + 1), -1;
    memcpy(a->host, hs, hl);
    a->host[hl] = '\0';
    a->port = (int)port;
    strcpy(a->addr, s);
    snprintf(a->url, sizeof a->url, v6 ? "tcp://[%s]:%d" : "tcp://%s:%d",
             a->host, a->port);
    return 0;
}

int cl_read_addr(struct cl_parse *p, const char *key, const cJSON *v,
                 struct hc_task_addr *a)
{
    char why[256];

    if (!cJSON_IsString(v)) {
        cl_problem(p, key, "must be a string \"host:port\", got %s",
                   cl_jtype(v));
        return -1;
    }
    if (parse_addr(v->valuestring, a, why, sizeof why) != 0) {
        cl_problem(p, key, "\"%.64s\": %s", v->valuestring, why);
        return -1;
    }
    return 0;
}

/* ---- JSON text -------------------------------------------------------- */

static void line_col(const char *s, size_t pos, int *line, int *col)
{
    size_t i, start = 0;

    *line = 1;
    for (i = 0; i < pos; i++)
        if (s[i] == '\n') {
            (*line)++;
            start = i + 1;
        }
    *col = (int)(pos - start) + 1;
}

/* Up to 16 characters from pos, to quote after "near". */
static void excerpt(char *buf, const char *s, size_t len, size_t pos)
{
    size_t n = 0;

    while (pos < len && n < 16 && s[pos] != '\n' && s[pos] != '\0') {
        buf[n++] = isprint((unsigned char)s[pos]) ? s[pos] : '?';
        pos++;
    }
    buf[n] = '\0';
}

cJSON *cl_parse_json(struct cl_parse *p, const char *json, size_t len)
{
    const char *end = NULL;
    cJSON *root;
    size_t off = 0, pos;
    char near[24];
    int line, col;

    if (len >= 3 && memcmp(json, "\xEF\xBB\xBF", 3) == 0)
        off = 3; /* a UTF-8 byte-order mark */
    pos = off;
    while (pos < len && isspace((unsigned char)json[pos]))
        pos++;
    if (pos == len || json[pos] == '\0') {
        cl_problem(p, NULL, "is empty; write a JSON object such as "
                   "{\"cluster\": {\"ps\": [\"host:2222\"], \"worker\": "
                   "[\"host:2223\"]}}");
        return NULL;
    }
    root = cJSON_ParseWithLengthOpts(json + off, len - off, &end, 0);
    pos = end ? (size_t)(end - json) : len;
    if (pos > len)
        pos = len;
    if (root) {
        while (pos < len && isspace((unsigned char)json[pos]))
            pos++;
        if (pos == len || json[pos] == '\0')
            return root;
        cJSON_Delete(root);
        line_col(json, pos, &line, &col);
        excerpt(near, json, len, pos);
        cl_problem(p, NULL, "bad JSON at line %d, column %d: unexpected text "
                   "after the end of the object, near '%s'; remove it", line,
                   col, near);
        return NULL;
    }
    line_col(json, pos, &line, &col);
    excerpt(near, json, len, pos);
    cl_problem(p, NULL, "bad JSON at line %d, column %d, near '%s'; look "
               "there (or just before) for a missing comma, quote, colon or "
               "bracket", line, col, near);
    return NULL;
}

void hc_diag_print(const struct hc_diag *d, FILE *f)
{
    int i, n = d->n < HC_DIAG_MAX ? d->n : HC_DIAG_MAX;

    for (i = 0; i < n; i++)
        fprintf(f, "hetps: %s\n", d->msg[i]);
    if (d->n > n)
        fprintf(f, "hetps: … and %d more problem(s) not shown\n", d->n - n);
    for (i = 0; i < d->n_note; i++)
        fprintf(f, "hetps: note: %s\n", d->note[i]);
}
