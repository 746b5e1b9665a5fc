/*
 * service_record.c — the per-worker records that make requests with an
 * effect exactly-once (see service_record.h): the last applied request id
 * of each kind and the reply bytes it was answered with, replayed to a
 * repeat — or, for a large pull answer, only that it was answered.
 */
#include "service_record.h"

#include <stdlib.h>
#include <string.h>

struct record *service_record_of(struct record rec[SERVICE_RECORDS],
                                 Hetps__Envelope__PayloadCase c)
{
    switch (c) {
    case HETPS__ENVELOPE__PAYLOAD_PUSH: return &rec[SERVICE_REC_PUSH];
    case HETPS__ENVELOPE__PAYLOAD_JOIN: return &rec[SERVICE_REC_JOIN];
    default: return &rec[SERVICE_REC_OTHER];
    }
}

int service_record_is_effect(Hetps__Envelope__PayloadCase c)
{
    switch (c) {
    case HETPS__ENVELOPE__PAYLOAD_JOIN:
    case HETPS__ENVELOPE__PAYLOAD_LEAVE:
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        return 1;
    default:
        return 0;
    }
}

/* Room for len bytes of reply; 0 on failure (the reply is then dropped). */
static int reserve(struct record *r, size_t len)
{
    unsigned char *p;

    if (len <= r->reply_cap)
        return 1;
    if (!(p = realloc(r->reply, len)))
        return 0;
    r->reply = p;
    r->reply_cap = len;
    return 1;
}

int service_record_save(struct record *r, uint64_t id, const nng_msg *reply)
{
    size_t len = reply ? nng_msg_len((nng_msg *)reply) : 0;
    int is_new = r->last_req != id;

    r->last_req = id;
    r->reply_len = 0;
    r->again = 0;
    if (len && reserve(r, len)) {
        memcpy(r->reply, nng_msg_body((nng_msg *)reply), len);
        r->reply_len = len;
    }
    return is_new;
}

int service_record_again(struct record *r, uint64_t id)
{
    int is_new = r->last_req != id;

    r->last_req = id;
    r->reply_len = 0;
    r->again = 1;
    return is_new;
}

void service_record_load(struct record *r, const void *reply, size_t len)
{
    r->reply_len = 0;
    r->again = 0;
    if (len && reserve(r, len)) {
        memcpy(r->reply, reply, len);
        r->reply_len = len;
    }
}

nng_msg *service_record_replay(const struct record *r)
{
    nng_msg *msg;

    if (!r->reply_len || nng_msg_alloc(&msg, r->reply_len) != 0)
        return NULL;
    memcpy(nng_msg_body(msg), r->reply, r->reply_len);
    return msg;
}

void service_record_free(struct record *r)
{
    free(r->reply);
    r->reply = NULL;
    r->reply_len = r->reply_cap = 0;
}
