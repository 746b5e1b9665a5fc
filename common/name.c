/*
 * name.c — checking names before they become paths, keys or log text (see
 * name.h).
 */
#include "name.h"

#include <string.h>

#include "err.h"

static int name_char_ok(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' ||
           c == '-';
}

int hc_name_check(const char *name, enum hc_name_kind kind, const char *what)
{
    size_t n = name ? strnlen(name, HC_NAME_MAX_BYTES + 1) : 0;
    size_t part = 0;    /* start of the current part */

    if (n == 0)
        return hc_err_set(HC_ERR_INVAL, "%s has an empty name", what);
    /* Bytes first, so any prefix printed below is clean. */
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)name[k];

        if (c == '/' && kind != HC_NAME_VARIABLE)
            return hc_err_set(HC_ERR_INVAL, "%s \"%.*s/…\" has a '/' at "
                              "position %zu; this name may not have one",
                              what, (int)k, name, k);
        if (c != '/' && !name_char_ok(c))
            return hc_err_set(HC_ERR_INVAL, "%s \"%.*s…\" has byte 0x%02x at "
                              "position %zu; names use only A-Z a-z 0-9 _ . : -"
                              "%s", what, (int)k, name, c, k,
                              kind == HC_NAME_VARIABLE ? " and '/'" : "");
    }
    if (n > HC_NAME_MAX_BYTES)
        return hc_err_set(HC_ERR_INVAL, "%s \"%.40s…\" is longer than %u bytes",
                          what, name, HC_NAME_MAX_BYTES);
    for (size_t k = 0; k <= n; k++) {
        size_t len = k - part;

        if (k < n && name[k] != '/')
            continue;
        if (len == 0)
            return hc_err_set(HC_ERR_INVAL, "%s \"%s\" has an empty part (a "
                              "'/' first, last or doubled)", what, name);
        if ((len == 1 && name[part] == '.') ||
            (len == 2 && name[part] == '.' && name[part + 1] == '.'))
            return hc_err_set(HC_ERR_INVAL, "%s \"%s\" has a part \"%.*s\"; "
                              "names may not climb directories", what, name,
                              (int)len, name + part);
        part = k + 1;
    }
    return HC_OK;
}
