/*
 * fuzz_wire.c — libFuzzer target: the envelope decoder and its validation
 * (common/wire.c). The input is one nng message body. Whatever decodes is
 * encoded again (as a sender would: hc_wire_encode checks it as a receiver
 * does), and that message must decode too — unless it holds an unknown
 * field numbered 0: protobuf-c reads an overlong tag (0x80 0x00) as field
 * 0, keeps it as unknown, and writes it back as the one-byte tag 0, which
 * it then refuses. hetps ignores unknown fields and never sends a decoded
 * message on, so that is harmless (corpus: wire/unknown-field-0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "err.h"
#include "wire.h"

/* Whether m or a message inside it keeps an unknown field numbered 0. */
static int has_unknown_tag0(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d;

    if (!m)
        return 0;
    for (unsigned i = 0; i < m->n_unknown_fields; i++)
        if (m->unknown_fields[i].tag == 0)
            return 1;
    d = m->descriptor;
    for (unsigned f = 0; f < d->n_fields; f++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[f];
        const char *base = (const char *)m;

        if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(const void *)(base + fd->quantifier_offset);
            ProtobufCMessage *const *a =
                *(ProtobufCMessage *const *const *)(const void *)(base + fd->offset);

            for (size_t k = 0; k < n; k++)
                if (has_unknown_tag0(a[k]))
                    return 1;
            continue;
        }
        if ((fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)(const void *)(base + fd->quantifier_offset) !=
                fd->id)
            continue;   /* another member of the oneof is set */
        if (has_unknown_tag0(*(ProtobufCMessage *const *)(const void *)
                                 (base + fd->offset)))
            return 1;
    }
    return 0;
}

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
    if (hc_wire_decode(body, size, 0, &m) == HC_OK &&
        !has_unknown_tag0(&m.env->base)) {
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
                               &again) != HC_OK) {
                /* What we send, we must accept. */
                fprintf(stderr, "fuzz_wire: re-encoded message refused: %s\n",
                        hc_err_msg());
                abort();
            }
            hc_wire_msg_free(&again);
            nng_msg_free(out);
        }
        m.env->tensors = refs;
        m.env->n_tensors = n_refs;
        free(t);
    }
    hc_wire_msg_free(&m);
    free(body);
    return 0;
}
