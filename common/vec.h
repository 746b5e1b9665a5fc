/*
 * vec.h — four floats (or four 32-bit words) at a time with GCC/clang
 * vector types (SSE on x86-64, NEON on arm64), for loops over tensors.
 * GCC 12 at -O2 does not vectorise a loop whose length is unknown, so the
 * loops that touch every value (the shard's optimizers, sync sum and finite
 * check; the CPU backend's passes over activations) say it themselves. Loads and stores go through memcpy: no alignment needed, and
 * an output may be its own input (a chunk is read before it is written).
 * Element-wise IEEE float32, no contraction: the same bits as one float at
 * a time.
 */
#ifndef HC_VEC_H
#define HC_VEC_H

#include <stdint.h>
#include <string.h>

typedef float v4f __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));

static inline v4f ld4(const float *p)
{
    v4f v;

    memcpy(&v, p, sizeof v);
    return v;
}

static inline void st4(float *p, v4f v)
{
    memcpy(p, &v, sizeof v);
}

static inline v4f splat4(float x)
{
    v4f v = {x, x, x, x};

    return v;
}

/* Whether any of p[0..n) is NaN or ±Inf (all exponent bits set). */
static inline int vec_any_nonfinite(const float *p, size_t n)
{
    const v4u e = {0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u};
    v4u any = {0, 0, 0, 0}, u;
    uint32_t w, r = 0;
    size_t i = 0;

    for (; i + 4 <= n; i += 4) {
        memcpy(&u, p + i, sizeof u);
        any |= (v4u)((u & e) == e);
    }
    for (; i < n; i++) {
        memcpy(&w, p + i, sizeof w);
        r |= (w & 0x7f800000u) == 0x7f800000u;
    }
    return (any[0] | any[1] | any[2] | any[3] | r) != 0;
}

/* a[i] = w·g[i] (add = 0) or a[i] += w·g[i] (add = 1), i < n. */
static inline void vec_scaled_add(float *a, const float *g, float w,
                                  size_t n, int add)
{
    v4f vw = splat4(w);
    size_t i = 0;

    if (add) {
        for (; i + 4 <= n; i += 4)
            st4(a + i, ld4(a + i) + vw * ld4(g + i));
        for (; i < n; i++)
            a[i] += w * g[i];
    } else {
        for (; i + 4 <= n; i += 4)
            st4(a + i, vw * ld4(g + i));
        for (; i < n; i++)
            a[i] = w * g[i];
    }
}

#endif
