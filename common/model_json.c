/*
 * model_json.c — the typed values of a model file's JSON (the contract is
 * model_impl.h): integers, [height, width] pairs, numbers in a range,
 * booleans and strings, each checked for its type and range, a mistake
 * failing with one message "WHERE: "KEY" must be …, got VALUE" (md_fail);
 * and the key check, which allows each key once and turns an unknown key
 * into an error naming the key probably meant (by edit distance, or a name
 * from another API: "lr", "kernel", "out_features" …) or else the keys
 * allowed there. md_norm gives the case- and underscore-insensitive
 * spellings of enum values.
 */
#include "model_impl.h"

#include "err.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int md_fail(const char *where, const char *fmt, ...)
{
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hc_err_set(HC_ERR_CONFIG, "%s: %s", where, msg);
}

/* A short rendering of a JSON value for messages: 0, "abc", an array … */
const char *md_show(const cJSON *it, char *buf, size_t len)
{
    if (cJSON_IsNumber(it))
        snprintf(buf, len, "%.10g", it->valuedouble);
    else if (cJSON_IsString(it))
        snprintf(buf, len, "\"%.40s%s\"", it->valuestring,
                 strlen(it->valuestring) > 40 ? "…" : "");
    else if (cJSON_IsBool(it))
        snprintf(buf, len, "%s", cJSON_IsTrue(it) ? "true" : "false");
    else if (cJSON_IsNull(it))
        snprintf(buf, len, "null");
    else if (cJSON_IsArray(it))
        snprintf(buf, len, "an array");
    else if (cJSON_IsObject(it))
        snprintf(buf, len, "an object");
    else
        snprintf(buf, len, "an invalid value");
    return buf;
}

/* Lower-case s without underscores into buf, for matching enum spellings. */
const char *md_norm(const char *s, char *buf, size_t len)
{
    size_t n = 0;

    for (; *s && n + 1 < len; s++)
        if (*s != '_')
            buf[n++] = (char)tolower((unsigned char)*s);
    buf[n] = '\0';
    return buf;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64], i, j;

    if (la > 63 || lb > 63)
        return 64;
    for (j = 0; j <= lb; j++)
        row[j] = j;
    for (i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (tolower((unsigned char)a[i - 1]) !=
                                 tolower((unsigned char)b[j - 1]));
            size_t best = sub < up + 1 ? sub : up + 1;
            row[j] = best < row[j - 1] + 1 ? best : row[j - 1] + 1;
            diag = up;
        }
    }
    return row[lb];
}

/* Names people bring from other APIs, which edit distance would miss. */
static const char *const key_aliases[][2] = {
    {"lr", "learning_rate"},     {"eps", "epsilon"},
    {"class_name", "type"},      {"kernel", "kernel_size"},
    {"pool", "pool_size"},       {"input_dim", "input_shape"},
    {"p", "rate"},               {"out_features", "units"},
    {"out_channels", "filters"}, {"bias", "use_bias"},
};

static const char *suggest(const char *key, const char *const *allowed)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1, i;

    for (i = 0; i < sizeof key_aliases / sizeof key_aliases[0]; i++)
        if (strcmp(key, key_aliases[i][0]) == 0)
            for (const char *const *a = allowed; *a; a++)
                if (strcmp(*a, key_aliases[i][1]) == 0)
                    return *a;
    for (const char *const *a = allowed; *a; a++) {
        size_t d = edit_distance(key, *a);
        if (d < best_d) {
            best_d = d;
            best = *a;
        }
    }
    if (best && (best_d <= 2 || best_d * 3 <= strlen(best)))
        return best;
    return NULL;
}

/* Every key of obj must be in allowed (NULL-terminated) and appear once. */
int md_check_keys(const cJSON *obj, const char *const *allowed,
                  const char *where)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        const char *const *a;
        const char *hint;
        char list[256] = "";
        size_t n = 0;

        for (const cJSON *p = obj->child; p != it; p = p->next)
            if (strcmp(p->string, it->string) == 0)
                return md_fail(where, "key \"%s\" appears twice; keep one",
                               it->string);
        for (a = allowed; *a; a++)
            if (strcmp(*a, it->string) == 0)
                break;
        if (*a)
            continue;
        if ((hint = suggest(it->string, allowed)) != NULL)
            return md_fail(where, "unknown key \"%.60s\" (did you mean "
                           "\"%s\"?)", it->string, hint);
        for (a = allowed; *a && n + 1 < sizeof list; a++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
                                  a == allowed ? "" : ", ", *a);
        return md_fail(where, "unknown key \"%.60s\"; allowed here: %s",
                       it->string, list);
    }
    return HC_OK;
}

const cJSON *md_get(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

int md_missing(const char *where, const char *key, const char *example)
{
    return md_fail(where, "missing required key \"%s\" (e.g. %s)", key,
                   example);
}

int md_is_int(const cJSON *it)
{
    return cJSON_IsNumber(it) && isfinite(it->valuedouble) &&
           it->valuedouble == floor(it->valuedouble);
}

/* An integer value in [lo, hi]. */
int md_int_value(const cJSON *it, const char *key, const char *where,
                 int lo, int hi, int *out)
{
    char buf[64];

    if (!md_is_int(it))
        return md_fail(where, "\"%s\" must be an integer, got %s", key,
                       md_show(it, buf, sizeof buf));
    if (it->valuedouble < lo || it->valuedouble > hi)
        return md_fail(where, "\"%s\" must be from %d to %d, got %s", key, lo,
                       hi, md_show(it, buf, sizeof buf));
    *out = (int)it->valuedouble;
    return HC_OK;
}

/* Optional integer key (def when absent). */
int md_get_int(const cJSON *obj, const char *key, const char *where,
               int def, int lo, int hi, int *out)
{
    const cJSON *it = md_get(obj, key);

    if (!it) {
        *out = def;
        return HC_OK;
    }
    return md_int_value(it, key, where, lo, hi, out);
}

/* An integer or a [height, width] pair, each in [lo, hi]. */
int md_get_pair(const cJSON *obj, const char *key, const char *where,
                int lo, int hi, int *a, int *b)
{
    const cJSON *it = md_get(obj, key);
    char buf[64];
    int rv;

    if (cJSON_IsArray(it)) {
        if (cJSON_GetArraySize(it) != 2)
            return md_fail(where, "\"%s\" must be an integer or [height, "
                           "width], got an array of %d", key,
                           cJSON_GetArraySize(it));
        if ((rv = md_int_value(it->child, key, where, lo, hi, a)) != HC_OK)
            return rv;
        return md_int_value(it->child->next, key, where, lo, hi, b);
    }
    if (!md_is_int(it))
        return md_fail(where, "\"%s\" must be an integer or [height, width] "
                       "of integers, got %s", key,
                       md_show(it, buf, sizeof buf));
    if ((rv = md_int_value(it, key, where, lo, hi, a)) == HC_OK)
        *b = *a;
    return rv;
}

/* Optional float key (def when absent), checked against r. */
int md_get_float(const cJSON *obj, const char *key, const char *where,
                 double def, struct md_range r, float *out)
{
    const cJSON *it = md_get(obj, key);
    char buf[64];
    double v;

    if (!it) {
        *out = (float)def;
        return HC_OK;
    }
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return md_fail(where, "\"%s\" must be a number, got %s", key,
                       md_show(it, buf, sizeof buf));
    v = it->valuedouble;
    if (fabs(v) < 1e30)
        v = (double)(float)v;       /* judge the value as it is stored */
    if ((r.lo_open ? v <= r.lo : v < r.lo) ||
        (r.hi_open ? v >= r.hi : v > r.hi))
        return md_fail(where, "\"%s\" must be in %c%g, %g%c, got %s", key,
                       r.lo_open ? '(' : '[', r.lo, r.hi,
                       r.hi_open ? ')' : ']', md_show(it, buf, sizeof buf));
    *out = (float)v;
    return HC_OK;
}

int md_get_bool(const cJSON *obj, const char *key, const char *where,
                int def, int *out)
{
    const cJSON *it = md_get(obj, key);
    char buf[64];

    if (!it) {
        *out = def;
        return HC_OK;
    }
    if (!cJSON_IsBool(it))
        return md_fail(where, "\"%s\" must be true or false, got %s", key,
                       md_show(it, buf, sizeof buf));
    *out = cJSON_IsTrue(it);
    return HC_OK;
}

/* Optional string key: *out is NULL when absent. */
int md_get_str(const cJSON *obj, const char *key, const char *where,
               const char **out)
{
    const cJSON *it = md_get(obj, key);
    char buf[64];

    *out = NULL;
    if (!it)
        return HC_OK;
    if (!cJSON_IsString(it))
        return md_fail(where, "\"%s\" must be a string, got %s", key,
                       md_show(it, buf, sizeof buf));
    *out = it->valuestring;
    return HC_OK;
}
