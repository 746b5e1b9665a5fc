/*
 * fuzz_wire.c — libFuzzer target: the envelope decoder and its validation
 * (common/wire.c). The input is one nng message body. Whatever decodes is
 * encoded again (as a sender would: hc_wire_encode checks it as a receiver
 * does), and that message must decode too.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "err.h"
#include "wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hc_wire_msg m = { 0 }, again = { 0 };
    struct hc_tensor_src *t = NULL;
    nng_msg *out = NULL;
    void *body = malloc(size ? size : 1);   /* malloc'd: aligned as nng's */

    if (!body)
        return 0;
    memcpy(body, data, size);
    if (hc_wire_decode(body, size, 0, &m) == HC_OK) {
        t = calloc(m.n_tensors + 1, sizeof *t);
        if (!t)
            abort();
        for (size_t i = 0; i < m.n_tensors; i++) {
            t[i].key = m.env->tensors[i]->key;
            t[i].offset = m.env->tensors[i]->offset;
            t[i].length = m.env->tensors[i]->length;
            t[i].data = m.data[i];
        }
        Hetps__TensorRef **refs = m.env->tensors;   /* encode overwrites */
        size_t n_refs = m.env->n_tensors;

        if (hc_wire_encode(&out, m.env, t, m.n_tensors) == HC_OK) {
            if (hc_wire_decode(nng_msg_body(out), nng_msg_len(out), 0,
                               &again) != HC_OK)
                abort();    /* what we send, we must accept */
            hc_wire_msg_free(&again);
            nng_msg_free(out);
        }
        m.env->tensors = refs;
        m.env->n_tensors = n_refs;
        free(t);
        hc_wire_msg_free(&m);
    }
    free(body);
    return 0;
}
