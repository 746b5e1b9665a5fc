/*
 * test_sync_schedule.c — the arithmetic of synchronous steps
 * (worker/sync_schedule.h): steps per epoch with the drop-remainder rule,
 * the global batch of each step, where a step lies in the job, a changed
 * job batch, and the arguments refused.
 */
#include "cu.h"
#include "worker/sync_schedule.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

static void test_steps_and_batches(void)
{
    static const struct {
        long long n;
        int workers;
        long long G;
        int epochs;
        long long spe;          /* steps per epoch */
        long long last;         /* samples of an epoch's last step */
    } t[] = {
        { 60000, 2, 64, 3, 938, 32 },   /* Fashion-MNIST, 2 × 32 */
        { 60000, 4, 128, 1, 469, 96 },
        { 64, 2, 64, 2, 1, 64 },        /* G divides n */
        { 100, 4, 32, 1, 4, 4 },        /* remainder 4: one each */
        { 99, 4, 32, 1, 3, 32 },        /* remainder 3 < 4 workers: dropped */
        { 10, 1, 3, 5, 4, 1 },          /* one worker keeps any remainder */
        { 5, 8, 16, 1, 0, 0 },          /* fewer samples than workers */
        { 7, 2, 16, 2, 1, 7 },          /* one short step per epoch */
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct wk_sync_schedule s;
        long long sum = 0;

        CU_ASSERT_EQUAL_FATAL(wk_sync_schedule_init(&s, t[i].n, t[i].workers,
                                                    t[i].G, t[i].epochs),
                              HC_OK);
        if (s.steps_per_epoch != t[i].spe)
            printf("\n  row %zu: %lld steps per epoch, want %lld\n", i,
                   s.steps_per_epoch, t[i].spe);
        CU_ASSERT_EQUAL(s.steps_per_epoch, t[i].spe);
        CU_ASSERT_EQUAL(s.total, (uint64_t)(t[i].spe * t[i].epochs));
        CU_ASSERT_EQUAL(s.G, t[i].G);
        if (t[i].spe == 0) {
            CU_ASSERT_EQUAL(wk_sync_batch_of(&s, 0), 0);
            continue;
        }
        /* Every epoch alike: full steps, then the last one. */
        for (uint64_t v = 0; v < s.total; v++) {
            long long b = wk_sync_batch_of(&s, v);
            int last = (v + 1) % (uint64_t)t[i].spe == 0;

            CU_ASSERT_EQUAL(b, last ? t[i].last : t[i].G);
            if (v < (uint64_t)t[i].spe)
                sum += b;
        }
        /* An epoch covers the set, less a dropped remainder. */
        CU_ASSERT_EQUAL(sum, t[i].n % t[i].G && t[i].n % t[i].G < t[i].workers
                                 ? t[i].n - t[i].n % t[i].G : t[i].n);
    }
}

static void test_place(void)
{
    static const struct {
        uint64_t v;
        int epoch;
        long long step;
    } t[] = {
        { 0, 0, 0 }, { 937, 0, 937 }, { 938, 1, 0 }, { 938 * 2 + 5, 2, 5 },
        { 938 * 3 - 1, 2, 937 },
    };
    struct wk_sync_schedule s;

    CU_ASSERT_EQUAL_FATAL(wk_sync_schedule_init(&s, 60000, 2, 64, 3), HC_OK);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int epoch = -1;
        long long step = -1;

        wk_sync_place(&s, t[i].v, &epoch, &step);
        CU_ASSERT_EQUAL(epoch, t[i].epoch);
        CU_ASSERT_EQUAL(step, t[i].step);
    }
}

static void test_rebatch(void)
{
    struct wk_sync_schedule s, before;

    CU_ASSERT_EQUAL_FATAL(wk_sync_schedule_init(&s, 60000, 2, 64, 3), HC_OK);
    before = s;
    /* 0 (ps:0 said nothing) and the same batch change nothing. */
    CU_ASSERT_EQUAL(wk_sync_rebatch(&s, 0), 0);
    CU_ASSERT_EQUAL(wk_sync_rebatch(&s, 64), 0);
    CU_ASSERT_EQUAL(memcmp(&s, &before, sizeof s), 0);
    /* A worker added to a job of two: the job's batch of 64 stays. */
    CU_ASSERT_EQUAL_FATAL(wk_sync_schedule_init(&s, 60000, 3, 96, 3), HC_OK);
    CU_ASSERT_EQUAL(s.steps_per_epoch, 625);
    CU_ASSERT_EQUAL(wk_sync_rebatch(&s, 64), 1);
    CU_ASSERT_EQUAL(s.G, 64);
    CU_ASSERT_EQUAL(s.steps_per_epoch, 938);
    CU_ASSERT_EQUAL(s.total, 938u * 3);
    CU_ASSERT_EQUAL(wk_sync_batch_of(&s, 937), 32);
    /* The drop-remainder rule counts this worker's workers: 99 samples,
     * batch 32 among 4 drops 3; among 3 it keeps them. */
    CU_ASSERT_EQUAL_FATAL(wk_sync_schedule_init(&s, 99, 4, 48, 1), HC_OK);
    CU_ASSERT_EQUAL(s.steps_per_epoch, 2);
    CU_ASSERT_EQUAL(wk_sync_rebatch(&s, 32), 1);
    CU_ASSERT_EQUAL(s.steps_per_epoch, 3);
    CU_ASSERT_EQUAL(wk_sync_batch_of(&s, 2), 32);
    CU_ASSERT_EQUAL_FATAL(wk_sync_schedule_init(&s, 99, 3, 48, 1), HC_OK);
    CU_ASSERT_EQUAL(wk_sync_rebatch(&s, 32), 1);
    CU_ASSERT_EQUAL(s.steps_per_epoch, 4);
    CU_ASSERT_EQUAL(wk_sync_batch_of(&s, 3), 3);
}

static void test_refused(void)
{
    static const struct {
        long long n;
        int workers;
        long long G;
        int epochs;
    } t[] = {
        { 0, 2, 64, 1 }, { -5, 2, 64, 1 }, { 100, 0, 64, 1 },
        { 100, 2, 0, 1 }, { 100, 2, 64, 0 },
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct wk_sync_schedule s;

        memset(&s, 0x5a, sizeof s);
        CU_ASSERT_EQUAL(wk_sync_schedule_init(&s, t[i].n, t[i].workers,
                                              t[i].G, t[i].epochs),
                        HC_ERR_INVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "must be at least 1"));
        CU_ASSERT_EQUAL(s.total, 0);
        CU_ASSERT_EQUAL(s.steps_per_epoch, 0);
    }
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("sync_schedule", NULL, NULL);

    CU_add_test(s, "steps per epoch, batch of each step", test_steps_and_batches);
    CU_add_test(s, "a step's epoch and place", test_place);
    CU_add_test(s, "the job's batch replaces this worker's", test_rebatch);
    CU_add_test(s, "arguments below 1 refused", test_refused);
}
