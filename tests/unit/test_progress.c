/*
 * test_progress.c — Keras-style progress output (worker/progress.c), driven
 * by a fake clock into a memory stream: the plain lines' period and format
 * (never a '\r'), the terminal bar's redraws, padding and final line,
 * verbose 2 and 0, the model's metrics (val_auc …) and Keras's ETA
 * texts.
 */
#include "cu.h"
#include "worker/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run one epoch of 10 steps of 32 samples, 1 s apart, through p's settings;
 * returns what was printed (malloc'd). */
static char *epoch_of_10(int verbose, int tty, double interval)
{
    struct wk_progress p;
    struct wk_epoch_stats s = { .epoch = 2, .steps = 10, .samples = 320,
                                .seconds = 10, .loss = 0.5, .acc = 0.75,
                                .has_val = 1, .val_loss = 0.25,
                                .val_acc = 0.875 };
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    long i;

    wk_progress_init(&p, f, verbose, tty, 5, interval);
    wk_progress_begin(&p, 2, 10, 100.0);
    for (i = 1; i <= 10; i++)
        wk_progress_step(&p, i, 32, 0.5, 24, 100.0 + (double)i);
    wk_progress_end(&p, &s);
    fclose(f);
    return buf;
}

static int count(const char *s, const char *what)
{
    int n = 0;

    for (; (s = strstr(s, what)); s += strlen(what))
        n++;
    return n;
}

static void test_plain_lines(void)
{
    char *out = epoch_of_10(1, 0, 3.0);

    /* steps at t = 1..9 s (the last step prints no progress line):
     * lines at 3, 6 and 9 s */
    CU_ASSERT_EQUAL(count(out, "\n"), 4);
    CU_ASSERT_PTR_NULL(strchr(out, '\r'));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Epoch 3/5 - 3/10 - ETA: 7s - loss: "
                                       "0.5000 - accuracy: 0.7500 - 32 "
                                       "samples/s\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Epoch 3/5 - 10/10 - 10.0s 1s/step - "
                                       "loss: 0.5000 - accuracy: 0.7500 - "
                                       "val_loss: 0.2500 - val_accuracy: "
                                       "0.8750 - 32 samples/s\n"));
    if (count(out, "\n") != 4)
        printf("\n%s", out);
    free(out);
}

/* The model's other metrics follow val_accuracy in its order, with
 * Keras's names; "accuracy" itself is not repeated. */
static void test_metrics(void)
{
    const struct hc_eval_metric ms[3] = {
        { .kind = HC_EM_ACCURACY, .name = "accuracy" },
        { .kind = HC_EM_AUC, .name = "auc" },
        { .kind = HC_EM_SPARSE_TOP_K, .name = "sparse_top_k_categorical_accuracy",
          .k = 5 } };
    struct wk_epoch_stats s = { .steps = 1, .samples = 32, .seconds = 1,
                                .has_val = 1, .val_loss = 0.25,
                                .val_acc = 0.875,
                                .val_metric = { 0, 0.96875, 1 } };
    struct wk_progress p;
    char *buf = NULL, small[24];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    wk_progress_init(&p, f, 2, 0, 1, 1.0);
    p.metrics = ms;
    p.n_metrics = 3;
    wk_progress_begin(&p, 0, 1, 0.0);
    wk_progress_end(&p, &s);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, " - val_loss: 0.2500 - val_accuracy: "
                                       "0.8750 - val_auc: 0.9688 - "
                                       "val_sparse_top_k_categorical_accuracy"
                                       ": 1.0000 - 32 samples/s\n"));
    free(buf);
    /* a short buffer is cut, terminated */
    CU_ASSERT_EQUAL(wk_progress_metrics(small, sizeof small, "", ms, 3,
                                        s.val_metric), sizeof small - 1);
    CU_ASSERT_STRING_EQUAL(small, " - auc: 0.9688 - sparse");
}

static void test_terminal_bar(void)
{
    char *out = epoch_of_10(1, 1, 3.0);

    CU_ASSERT_EQUAL(strncmp(out, "Epoch 3/5\n", 10), 0);
    /* one redraw per step but the last (1 s apart > 0.05 s), then the end */
    CU_ASSERT_EQUAL(count(out, "\r"), 10);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\r 3/10 [========>.....................]"
                                       " - ETA: 7s - loss: 0.5000"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\r10/10 [==============================]"
                                       " - 10s 1s/step - loss: 0.5000 - "
                                       "accuracy: 0.7500 - val_loss: 0.2500"));
    CU_ASSERT_EQUAL(out[strlen(out) - 1], '\n');
    CU_ASSERT_EQUAL(count(out, "\n"), 2);
    free(out);
}

static void test_verbose_2_and_0(void)
{
    char *out = epoch_of_10(2, 1, 3.0);

    CU_ASSERT_EQUAL(count(out, "\n"), 1);
    CU_ASSERT_PTR_NULL(strchr(out, '\r'));
    CU_ASSERT_EQUAL(strncmp(out, "Epoch 3/5 - 10/10 - 10.0s", 25), 0);
    free(out);
    out = epoch_of_10(0, 1, 3.0);
    CU_ASSERT_STRING_EQUAL(out, "");
    free(out);
}

static void test_eta(void)
{
    static const struct { double s; const char *want; } t[] = {
        { 0, "0s" }, { 2.4, "2s" }, { 59.4, "59s" }, { 65, "1:05" },
        { 3599, "59:59" }, { 3723, "1:02:03" }, { -1, "0s" },
    };
    char buf[32];
    size_t i;

    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        wk_progress_eta(t[i].s, buf, sizeof buf);
        CU_ASSERT_STRING_EQUAL(buf, t[i].want);
    }
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("progress", NULL, NULL);

    CU_add_test(s, "plain lines, not a terminal", test_plain_lines);
    CU_add_test(s, "terminal bar", test_terminal_bar);
    CU_add_test(s, "the model's metrics after val_accuracy", test_metrics);
    CU_add_test(s, "verbose 2 and 0", test_verbose_2_and_0);
    CU_add_test(s, "ETA texts", test_eta);
}
