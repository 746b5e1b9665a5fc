/*
 * test_nn_graph.c — nets of graphs: the backend's copy2d against plain
 * loops, and networks with fan-out, Add, Subtract, Average and
 * Concatenate (nn_check.c's graph models) against the double reference
 * and finite differences, the gradients summed where a node has several
 * readers (x ⊙ x reads one node twice).
 *
 * The reference and the shared checks are in nn_ref.c and nn_check.c;
 * each comparison prints its largest difference.
 */
#include "cu.h"

#include <stdio.h>
#include <stdlib.h>

#include "err.h"
#include "nn_check.h"
#include "nn_ref.h"
#include "worker/backend.h"
#include "worker/nn.h"

/* z = x ⊙ y or z += x ⊙ y. */
static void test_mul(void)
{
    struct wk_backend *be = nr_cpu();
    float x[37], y[37], z[37], want[37];
    uint64_t s = 6;

    for (int acc = 0; acc < 2; acc++) {
        nr_fill_rand(x, 37, &s, -1, 1);
        nr_fill_rand(y, 37, &s, -1, 1);
        nr_fill_rand(z, 37, &s, -1, 1);
        for (int i = 0; i < 37; i++)
            want[i] = (acc ? z[i] : 0.0f) + x[i] * y[i];
        wk_be_mul(be, 37, x, y, z, acc);
        for (int i = 0; i < 37; i++)
            CU_ASSERT_EQUAL(z[i], want[i]);
    }
    wk_backend_free(be);
}

/* dst = a·src or dst += a·src on blocks of wider matrices. */
static void test_copy2d(void)
{
    struct wk_backend *be = nr_cpu();
    float src[5 * 7], dst[5 * 9], want[5 * 9];
    uint64_t s = 5;
    int acc, r, c;

    for (acc = 0; acc < 2; acc++) {
        nr_fill_rand(src, sizeof src / sizeof *src, &s, -1, 1);
        nr_fill_rand(dst, sizeof dst / sizeof *dst, &s, -1, 1);
        for (r = 0; r < 5 * 9; r++)
            want[r] = dst[r];
        for (r = 0; r < 4; r++)
            for (c = 0; c < 3; c++)
                want[r * 9 + 2 + c] = (acc ? want[r * 9 + 2 + c] : 0.0f) +
                                      -0.5f * src[r * 7 + 1 + c];
        wk_be_copy2d(be, 4, 3, -0.5f, src + 1, 7, dst + 2, 9, acc);
        CU_ASSERT_EQUAL(wk_be_check(be), HC_OK);
        for (r = 0; r < 5 * 9; r++)
            CU_ASSERT_EQUAL(dst[r], want[r]);
    }
    wk_backend_free(be);
}

static void test_grad_residual(void)
{
    nc_check_model(nc_model_graph_residual, 3, 0, 0, 2);
}

static void test_grad_concat(void)
{
    nc_check_model(nc_model_graph_concat, 2, 0, 0, 2);
}

static void test_grad_merges(void)
{
    nc_check_model(nc_model_graph_merges, 4, 0, 0, 2);
}

static void test_grad_two_inputs(void)
{
    nc_check_model(nc_model_two_inputs, 3, 0, 0, 2);
}

void hp_test_register(void)
{
    static const struct nc_test ops[] = {
        {"copy2d vs plain loops", test_copy2d},
        {"mul vs a plain loop", test_mul},
    }, nets[] = {
        {"grad residual: fan-out, add, relu, dropout", test_grad_residual},
        {"grad concatenates (channels, flat), a pool beside a flatten",
         test_grad_concat},
        {"grad subtract, average, flat concatenate, multiply of 2 and 3",
         test_grad_merges},
        {"grad two inputs: image conv and vector dense (read twice), "
         "concatenated", test_grad_two_inputs},
    };

    nc_add_suite("backend_cpu graph ops", ops, sizeof ops / sizeof ops[0]);
    nc_add_suite("nn graph", nets, sizeof nets / sizeof nets[0]);
}
