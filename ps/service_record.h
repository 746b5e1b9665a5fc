/*
 * service_record.h — a worker's last applied request and the reply it got,
 * as the service keeps it to answer a repeat with the same bytes and never
 * apply it twice (exactly-once). Knows replies as nng messages, nothing of
 * the service or the store.
 *
 * Threads: a record belongs to one member of the service; it is read and
 * written under the service's small mutex.
 */
#ifndef PS_SERVICE_RECORD_H
#define PS_SERVICE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "hetps.pb-c.h"

/* The last applied request of one kind and its reply. */
struct record {
    uint64_t last_req;          /* last applied request id (0: none) */
    unsigned char *reply;       /* (reply_len) bytes answered to last_req;
                                   0 bytes: still being answered, or */
    int again;                  /* answered with values not kept here: the
                                   service answers a repeat again from
                                   the store (service_record_again) */
    size_t reply_len, reply_cap;
};

/* A member's records, one per ordering: pushes (which carry the
 * optimizer's ordering), joins, and the chief's create and a leave. Kept
 * apart so that the re-join before a re-sent push, create or leave (after
 * a shard restart: a new, higher id) never makes that request look old. */
enum { SERVICE_REC_PUSH, SERVICE_REC_JOIN, SERVICE_REC_OTHER, SERVICE_RECORDS };

/* Which of a member's records (rec[SERVICE_RECORDS]) a request kind goes
 * to. */
struct record *service_record_of(struct record rec[SERVICE_RECORDS],
                                 Hetps__Envelope__PayloadCase c);

/* Whether a request kind has an effect (goes through the record). */
int service_record_is_effect(Hetps__Envelope__PayloadCase c);

/* Remember `reply` (NULL: none yet, still being answered) as the answer to
 * request `id`. Returns 1 when id is a new request, 0 when it was already
 * the last. Out of memory: the reply is forgotten (a repeat then goes
 * unanswered and is sent again). */
int service_record_save(struct record *r, uint64_t id, const nng_msg *reply);

/* Remember that request `id` was answered, without its bytes: a large
 * pull answer, which the service makes again for a repeat rather than
 * keeping a copy. Returns 1 when id is a new request, 0 when it was
 * already the last. */
int service_record_again(struct record *r, uint64_t id);

/* Keep `len` bytes recovered from the store (after a restart) as the
 * reply to r->last_req; out of memory: none kept. */
void service_record_load(struct record *r, const void *reply, size_t len);

/* A new message holding a copy of the recorded reply; NULL when none is
 * recorded (still being answered) or out of memory. */
nng_msg *service_record_replay(const struct record *r);

/* Free the reply bytes (the record reads as empty after). */
void service_record_free(struct record *r);

#endif
