/*
 * test_files.c — what keeps names and file headers safe: name.h's rule for
 * names that become paths, and the bounded .npy header parser (npy.h).
 */
#include "cu.h"

#include <stdio.h>
#include <string.h>

#include "err.h"
#include "name.h"
#include "npy.h"

static void test_names(void)
{
    static char long_ok[HC_NAME_MAX_BYTES + 1], long_bad[HC_NAME_MAX_BYTES + 2];
    const struct {
        const char *name;
        enum hc_name_kind kind;
        int rv;
        const char *want;       /* in the message when refused */
    } t[] = {
        {"conv2d/kernel", HC_NAME_VARIABLE, HC_OK, NULL},
        {"dense_1.v2:a-b", HC_NAME_LAYER, HC_OK, NULL},
        {"a/b/c", HC_NAME_VARIABLE, HC_OK, NULL},
        {"..x", HC_NAME_LAYER, HC_OK, NULL},
        {long_ok, HC_NAME_LAYER, HC_OK, NULL},
        {"", HC_NAME_LAYER, HC_ERR_INVAL, "has an empty name"},
        {NULL, HC_NAME_VARIABLE, HC_ERR_INVAL, "has an empty name"},
        {"../../x", HC_NAME_VARIABLE, HC_ERR_INVAL,
         "v \"../../x\" has a part \"..\"; names may not climb directories"},
        {"..", HC_NAME_LAYER, HC_ERR_INVAL, "has a part \"..\""},
        {".", HC_NAME_LAYER, HC_ERR_INVAL, "has a part \".\""},
        {"a/./b", HC_NAME_VARIABLE, HC_ERR_INVAL, "has a part \".\""},
        {"/etc/passwd", HC_NAME_VARIABLE, HC_ERR_INVAL, "has an empty part"},
        {"a/", HC_NAME_VARIABLE, HC_ERR_INVAL, "has an empty part"},
        {"a//b", HC_NAME_VARIABLE, HC_ERR_INVAL, "has an empty part"},
        {"dense/kernel", HC_NAME_LAYER, HC_ERR_INVAL,
         "v \"dense/…\" has a '/' at position 5"},
        {"ab\x1b[2Jc", HC_NAME_VARIABLE, HC_ERR_INVAL,
         "v \"ab…\" has byte 0x1b at position 2"},
        {"tab\there", HC_NAME_LAYER, HC_ERR_INVAL, "has byte 0x09"},
        {"caf\xc3\xa9", HC_NAME_LAYER, HC_ERR_INVAL, "has byte 0xc3"},
        {"a b", HC_NAME_LAYER, HC_ERR_INVAL, "has byte 0x20"},
        {"a\\b", HC_NAME_LAYER, HC_ERR_INVAL, "has byte 0x5c"},
        {long_bad, HC_NAME_LAYER, HC_ERR_INVAL, "is longer than 128 bytes"},
    };

    memset(long_ok, 'a', sizeof long_ok - 1);
    memset(long_bad, 'b', sizeof long_bad - 1);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int rv = hc_name_check(t[i].name, t[i].kind, "v");
        int ok = rv == t[i].rv &&
                 (!t[i].want || strstr(hc_err_msg(), t[i].want) != NULL);

        if (!ok)
            printf("\n  row %zu: got %d \"%s\"\n", i, rv,
                   rv == HC_OK ? "" : hc_err_msg());
        CU_ASSERT(ok);
    }
}

/* A format-1.0 .npy header with this dict, padded as numpy pads it. */
static size_t npy_v1(unsigned char *buf, size_t cap, const char *dict)
{
    size_t n = strlen(dict), total = (10 + n + 1 + 63) / 64 * 64;

    CU_ASSERT_FATAL(total <= cap && total - 10 < 65536);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)((total - 10) & 0xFF);
    buf[9] = (unsigned char)((total - 10) >> 8);
    memcpy(buf + 10, dict, n);
    memset(buf + 10 + n, ' ', total - 10 - n - 1);
    buf[total - 1] = '\n';
    return total;
}

static void test_npy_headers(void)
{
    static unsigned char buf[70000];
    const struct {
        const char *dict;
        int rv;
        const char *want;       /* message fragment, or the shape when OK */
    } t[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 3, 1, 32), }",
         HC_OK, "(3, 3, 1, 32)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }", HC_OK,
         "(10,)"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (), }", HC_OK, "()"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, "
         "1, 1, 1), }", HC_ERR_DATA, "more than 8 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000000000"
         ", 1000000000000000000, 1000000000000000000, 1000000000000000000, "
         "1000000000000000000, 1000000000000000000, 1000000000000000000, "
         "1000000000000000000), }", HC_ERR_DATA, "more than 1099511627776 elements"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999"
         "999999,), }", HC_ERR_DATA, "more than 1099511627776 elements"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
         HC_ERR_DATA, "not a tuple of sizes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }",
         HC_ERR_DATA, "not a tuple of sizes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, ", HC_ERR_DATA,
         "not a tuple of sizes"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }",
         HC_ERR_DATA, "neither True nor False"},
        {"{'descr': '<f4 and then a very long type string', 'fortran_order': "
         "False, 'shape': (2,), }", HC_ERR_DATA, "longer than 15 bytes"},
        {"{'descr': '<f4", HC_ERR_DATA, "'descr' is malformed"},
        {"{'fortran_order': False, 'shape': (2,), }", HC_ERR_DATA,
         "no 'descr' string"},
        {"{'descr': '<f4', 'shape': (2,), }", HC_ERR_DATA,
         "no 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False}", HC_ERR_DATA,
         "no 'shape' tuple"},
    };
    struct hc_npy_info h;
    char shape[64];
    size_t n, off;

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int rv, ok;

        n = npy_v1(buf, sizeof buf, t[i].dict);
        rv = hc_npy_parse_header(buf, n, "x.npy", &h, &off);
        ok = rv == t[i].rv &&
             (rv == HC_OK ? off == n && strcmp(hc_npy_shape_str(h.shape, h.ndim,
                                                   shape, sizeof shape),
                                               t[i].want) == 0
                          : strstr(hc_err_msg(), t[i].want) != NULL);
        if (!ok)
            printf("\n  row %zu: got %d \"%s\"\n", i, rv,
                   rv == HC_OK ? shape : hc_err_msg());
        CU_ASSERT(ok);
    }
    /* The preamble: magic, version, lengths. */
    n = npy_v1(buf, sizeof buf, t[0].dict);
    CU_ASSERT_EQUAL(hc_npy_parse_header(buf, 9, "x", &h, &off), HC_ERR_DATA);
    CU_ASSERT_EQUAL(hc_npy_parse_header(buf, n - 1, "x", &h, &off), HC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "truncated"));
    buf[6] = 9;
    CU_ASSERT_EQUAL(hc_npy_parse_header(buf, n, "x", &h, &off), HC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "version 9"));
    buf[6] = 2;     /* 2.0: a 4-byte length, here 0x0a20????: too long */
    CU_ASSERT_EQUAL(hc_npy_parse_header(buf, n, "x", &h, &off), HC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "is longer than 4096"));
    /* A 60 000-byte dict (numpy would read it) is refused by its length,
     * not copied into a fixed buffer. */
    memset(shape, 0, sizeof shape);
    {
        static char big[60001];
        memset(big, ' ', sizeof big - 1);
        memcpy(big, t[0].dict, strlen(t[0].dict));
        n = npy_v1(buf, sizeof buf, big);
        CU_ASSERT_EQUAL(hc_npy_parse_header(buf, n, "x", &h, &off), HC_ERR_DATA);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "is longer than 4096"));
    }
    /* Shape strings are cut to fit, never overrun. */
    {
        const uint64_t dims[8] = { 1ull << 40, 1ull << 40, 1ull << 40,
                                   1ull << 40, 1ull << 40, 1ull << 40,
                                   1ull << 40, 1ull << 40 };
        char small[24];

        memset(small, 'Z', sizeof small);
        hc_npy_shape_str(dims, 8, small, 20);
        CU_ASSERT_EQUAL(strlen(small), 19);
        CU_ASSERT_EQUAL(small[20], 'Z');
        CU_ASSERT_PTR_NOT_NULL(strstr(small, "…"));
    }
}

/* A header written by hc_npy_write_f32 reads back. */
static void test_npy_roundtrip(void)
{
    char dir[256], path[300];
    const size_t shape[3] = { 2, 3, 4 };
    float data[24] = { 0 };
    struct hc_npy_info h;
    FILE *f;

    hp_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.npy", dir);
    CU_ASSERT_EQUAL_FATAL(hc_npy_write_f32(path, shape, 3, data), HC_OK);
    f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(hc_npy_read_header(f, path, &h), HC_OK);
    CU_ASSERT_STRING_EQUAL(h.descr, "<f4");
    CU_ASSERT_EQUAL(h.ndim, 3);
    CU_ASSERT_EQUAL(h.count, 24);
    CU_ASSERT_EQUAL(ftell(f) % 64, 0);
    fclose(f);
    hp_rmtree(dir);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("files", NULL, NULL);

    CU_add_test(s, "name rule table", test_names);
    CU_add_test(s, ".npy header table", test_npy_headers);
    CU_add_test(s, ".npy write and read back", test_npy_roundtrip);
}
