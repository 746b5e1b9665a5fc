/*
 * cu_main.c — the main() of every CUnit test program.
 *
 * Runs the suites registered by hp_test_register() and prints one line
 * "cunit-counts: run R failed F skipped S" that tests/run.sh reads. Exit
 * status is 1 when any assertion failed or a suite could not be set up.
 */
#include "cu.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned skipped;

void hp_test_skip(const char *test, const char *why)
{
    printf("\n  %s: skipped: %s\n", test, why);
    skipped++;
}

const char *hp_tmpdir(char *buf, unsigned long len)
{
    const char *base = getenv("TMPDIR");

    snprintf(buf, len, "%s/hetps-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        abort();
    }
    return buf;
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void hp_rmtree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    unsigned run, failed, bad_suites;

    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    hp_test_register();
    if (CU_get_error() != CUE_SUCCESS) {
        fprintf(stderr, "CUnit registration failed: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 1;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    run = CU_get_number_of_tests_run();
    failed = CU_get_number_of_tests_failed();
    bad_suites = CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    printf("\ncunit-counts: run %u failed %u skipped %u\n", run,
           failed + bad_suites, skipped);
    return failed || bad_suites ? 1 : 0;
}
