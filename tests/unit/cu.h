/*
 * cu.h — what every CUnit test program shares.
 *
 * Each tests/unit/test_NAME.c defines hp_test_register(), which adds its
 * suites with CU_add_suite/CU_add_test; cu_main.c runs them with the basic
 * interface and prints the counts that tests/run.sh adds up. A test that
 * cannot run here (no CUDA device, say) calls HP_SKIP("no CUDA device"):
 * it prints "skipped: …" and is counted as skipped, never as passed.
 */
#ifndef HP_TEST_CU_H
#define HP_TEST_CU_H

#include <CUnit/Basic.h>

void hp_test_register(void);
void hp_test_skip(const char *test, const char *why);

#define HP_SKIP(why)                         \
    do {                                     \
        hp_test_skip(__func__, (why));       \
        return;                              \
    } while (0)

/* Make a fresh private temporary directory (mkdtemp under $TMPDIR or /tmp)
 * and return its path in buf; removed by the caller with hp_rmtree. */
const char *hp_tmpdir(char *buf, unsigned long len);
void hp_rmtree(const char *path);

#endif
