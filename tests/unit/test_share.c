/*
 * test_share.c — together or the fastest alone (worker/share.c), on step
 * times the test makes up: the first try after 10 steps, a try that wins
 * and one that loses, the doubling wait after each loss (capped), the 3 %
 * margin, a device that pays again given a share at the next try, and a
 * new fastest device tried alone after a try of all of them.
 */
#include "cu.h"
#include "worker/share.h"

/* Steps: run n steps whose time depends on the arrangement (cost_all a
 * sample when all share, cost_solo[d] when device d runs alone); returns
 * the number of steps that ran in an arrangement other than `usual`. */
static int run(struct wk_share *s, const double *speed, int n_dev, int n,
               double cost_all, const double *cost_solo, int usual)
{
    int i, other = 0;

    for (i = 0; i < n; i++) {
        int a = wk_share_next(s, speed, n_dev);
        double c = a == WK_SHARE_ALL ? cost_all : cost_solo[a];

        other += a != usual;
        wk_share_done(s, c * 64, 64);
    }
    return other;
}

static void test_first_try_and_win(void)
{
    const double speed[2] = { 1000.0, 50.0 }, solo[2] = { 1.0, 20.0 };
    struct wk_share s;
    int i, a;

    wk_share_init(&s);
    /* No try before every device is measured. */
    for (i = 0; i < 20; i++) {
        CU_ASSERT_EQUAL(wk_share_next(&s, (double[]){ 1000.0, 0.0 }, 2),
                        WK_SHARE_ALL);
        wk_share_done(&s, 2.0 * 64, 64);
    }
    /* Measured: the next step tries device 0 alone (the fastest), for 3
     * steps, and it wins (1.0 against 2.0 a sample). */
    for (i = 0; i < 3; i++) {
        a = wk_share_next(&s, speed, 2);
        CU_ASSERT_EQUAL(a, 0);
        CU_ASSERT_EQUAL(wk_share_done(&s, 1.0 * 64, 64), i == 2);
    }
    CU_ASSERT_EQUAL(s.cur, 0);
    CU_ASSERT_EQUAL(s.every, 100);
    /* Alone it stays for 100 steps, then all are tried again (and lose). */
    CU_ASSERT_EQUAL(run(&s, speed, 2, 100, 2.0, solo, 0), 0);
    CU_ASSERT_EQUAL(run(&s, speed, 2, 3, 2.0, solo, 0), 3);
    CU_ASSERT_EQUAL(s.cur, 0);
    CU_ASSERT_EQUAL(s.every, 200);
}

static void test_losing_tries_wait_longer(void)
{
    const double speed[2] = { 1000.0, 900.0 }, solo[2] = { 2.0, 2.2 };
    struct wk_share s;
    long waits[8];
    int k, i;

    wk_share_init(&s);
    /* Together 1.0 a sample: every try of device 0 alone (2.0) loses. */
    CU_ASSERT_EQUAL(run(&s, speed, 2, 10, 1.0, solo, WK_SHARE_ALL), 0);
    for (k = 0; k < 8; k++) {
        CU_ASSERT_EQUAL(run(&s, speed, 2, 3, 1.0, solo, WK_SHARE_ALL), 3);
        CU_ASSERT_EQUAL(s.cur, WK_SHARE_ALL);
        waits[k] = s.until;
        for (i = 0; i < waits[k]; i++)
            run(&s, speed, 2, 1, 1.0, solo, WK_SHARE_ALL);
    }
    CU_ASSERT_EQUAL(waits[0], 200);
    CU_ASSERT_EQUAL(waits[1], 400);
    CU_ASSERT_EQUAL(waits[4], 3200);
    CU_ASSERT_EQUAL(waits[7], 3200);
}

static void test_expensive_try_waits_longer(void)
{
    const double speed[2] = { 1000.0, 50.0 }, solo[2] = { 1.0, 20.0 };
    struct wk_share s;

    wk_share_init(&s);
    /* Alone (1.0) wins over all (11.0); the next try of all loses at 11×
     * the cost: 2 timed steps × 10 extra = 20 steps' time, which may be at
     * most 1 % of the wait: 2000 steps. */
    run(&s, speed, 2, 13, 11.0, solo, WK_SHARE_ALL);
    CU_ASSERT_EQUAL_FATAL(s.cur, 0);
    run(&s, speed, 2, 100 + 3, 11.0, solo, 0);
    CU_ASSERT_EQUAL(s.cur, 0);
    CU_ASSERT(s.every >= 1990 && s.every <= 2010);
}

static void test_margin(void)
{
    const double speed[2] = { 1000.0, 900.0 }, solo[2] = { 0.98, 5.0 };
    struct wk_share s;

    wk_share_init(&s);
    /* 2 % cheaper alone is noise, not a reason: all keep their share. */
    run(&s, speed, 2, 13, 1.0, solo, WK_SHARE_ALL);
    CU_ASSERT_EQUAL(s.cur, WK_SHARE_ALL);
    /* 5 % is. */
    wk_share_init(&s);
    run(&s, speed, 2, 13, 1.0, (double[]){ 0.95, 5.0 }, WK_SHARE_ALL);
    CU_ASSERT_EQUAL(s.cur, 0);
}

static void test_pays_again(void)
{
    const double speed[3] = { 1000.0, 300.0, 200.0 };
    double solo[3] = { 1.0, 3.0, 5.0 };
    struct wk_share s;
    int steps = 0;

    wk_share_init(&s);
    run(&s, speed, 3, 13, 2.0, solo, WK_SHARE_ALL);
    CU_ASSERT_EQUAL_FATAL(s.cur, 0);
    /* Device 0 slows down (its load came back): together is now cheaper,
     * and at the next try of all of them every device gets a share. */
    solo[0] = 4.0;
    while (s.cur == 0 && steps < 200) {
        run(&s, speed, 3, 1, 2.0, solo, 0);
        steps++;
    }
    CU_ASSERT_EQUAL(s.cur, WK_SHARE_ALL);
    CU_ASSERT(steps <= 103);
}

static void test_new_fastest(void)
{
    double speed[2] = { 1000.0, 100.0 }, solo[2] = { 1.0, 10.0 };
    struct wk_share s;
    int i, a;

    wk_share_init(&s);
    run(&s, speed, 2, 13, 2.0, solo, WK_SHARE_ALL);
    CU_ASSERT_EQUAL_FATAL(s.cur, 0);
    /* Device 0 became slow alone; the try of all times both afresh and
     * shows device 1 the fastest (all still lose): device 1 alone is tried
     * at once, and wins. */
    solo[0] = 8.0;
    run(&s, speed, 2, 100, 2.0, solo, 0);
    speed[0] = 100.0;
    speed[1] = 1000.0;
    for (i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(wk_share_next(&s, speed, 2), WK_SHARE_ALL);
        wk_share_done(&s, 9.0 * 64, 64);
    }
    CU_ASSERT_EQUAL(s.cur, 0);
    solo[1] = 1.0;
    a = wk_share_next(&s, speed, 2);
    CU_ASSERT_EQUAL(a, 1);
    run(&s, speed, 2, 3, 9.0, solo, 1);
    CU_ASSERT_EQUAL(s.cur, 1);
}

static void test_one_device(void)
{
    struct wk_share s;

    wk_share_init(&s);
    CU_ASSERT_EQUAL(wk_share_next(&s, (double[]){ 10.0 }, 1), WK_SHARE_ALL);
    CU_ASSERT_EQUAL(wk_share_done(&s, 0.0, 64), 0);
    CU_ASSERT_EQUAL(wk_share_done(&s, 1.0, 0), 0);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("share", NULL, NULL);

    CU_add_test(s, "first try after 10 steps; alone wins", test_first_try_and_win);
    CU_add_test(s, "losing tries wait twice as long, up to 3200", test_losing_tries_wait_longer);
    CU_add_test(s, "a try much slower waits until it costs 1 %", test_expensive_try_waits_longer);
    CU_add_test(s, "a 3 % margin", test_margin);
    CU_add_test(s, "a device that pays again gets a share", test_pays_again);
    CU_add_test(s, "a new fastest device is tried alone", test_new_fastest);
    CU_add_test(s, "one device; bad times ignored", test_one_device);
}
