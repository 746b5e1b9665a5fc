/*
 * record.h — the record that makes a request with an effect exactly-once:
 * "request R of worker W (incarnation I) was answered at version V".
 *
 * One struct, the same in the service's memory (a worker's last request of
 * each kind) and in the store's "records" database, where its bytes are
 * kept as they are — a fixed little-endian layout opening with a magic
 * number and a format — written in the transaction that applies the
 * request. A repeat of R, a lost reply re-sent or a re-send after the
 * shard restarted, is answered from the record and never applied again:
 * an Ack at V, or for a push-and-pull the values read from the store at V
 * (the same bytes while the shard is still there, with the slice recorded)
 * or after it. No reply bytes are kept anywhere.
 *
 * Knows nothing of the network or of LMDB: the store keeps a record's
 * bytes (ps_store_apply, ps_store_record_get in store.h), the service
 * judges requests with ps_record_judge under its lock.
 */
#ifndef PS_RECORD_H
#define PS_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define PS_RECORD_MAGIC  0x43455248u    /* "HREC" as little-endian bytes */
#define PS_RECORD_FORMAT 2u             /* 1: a header and the reply's bytes
                                           (read too, see ps_record_decode) */

/* Lanes a worker may have, each with a record of its own (the wire's
 * HC_MAX_LANES; the service checks they agree). */
#define PS_RECORD_LANES 8u

/* What a record's flags say. */
enum {
    PS_REC_ANSWERED = 1u << 0,  /* answered at `version`; without it the
                                   request is being answered (memory only) */
    PS_REC_PLACE    = 1u << 1,  /* epoch and batches hold the worker's place */
    PS_REC_LATE     = 1u << 2,  /* the push came too late for its step */
    PS_REC_SLICE    = 1u << 3,  /* the answer gave the worker a slice */
};

/* The kind of request a record answers. */
enum ps_record_kind {
    PS_REQ_NONE = 0,            /* no request: a place only (reshard) */
    PS_REQ_PUSH = 1,            /* push, or push-and-pull */
    PS_REQ_JOIN = 2,
    PS_REQ_LEAVE = 3,
    PS_REQ_CREATE = 4,
};

/* Stored as it is: PS_RECORD_SIZE bytes, little-endian, each field at a
 * fixed offset (record.c checks them at compile time). */
struct ps_record {
    uint32_t magic;             /* PS_RECORD_MAGIC */
    uint16_t format;            /* PS_RECORD_FORMAT */
    uint8_t flags;              /* PS_REC_* */
    uint8_t kind;               /* enum ps_record_kind */
    uint16_t worker;            /* the worker's task index (< HC_MAX_TASKS) */
    uint16_t lane;              /* the worker's lane (Envelope.lane): one
                                   record per (worker, lane); 0 in records
                                   written before lanes (the same bytes) */
    uint32_t job_batch;         /* sync: the job's global batch the answer
                                   named (0: none) */
    uint64_t incarnation;       /* of the worker's process */
    uint64_t request_id;        /* 0: no request (a place only: reshard) */
    uint64_t version;           /* the version the answer named */
    uint32_t epoch, batches;    /* PS_REC_PLACE: the worker's place after it */
    uint32_t slice_offset, slice_count;     /* PS_REC_SLICE */
};

#define PS_RECORD_SIZE 56u

/* What a request is, judged against the record of its kind. */
enum ps_record_verdict {
    PS_JUDGE_NEW,               /* not seen: act on it */
    PS_JUDGE_REPEAT,            /* answered: answer again from the record */
    PS_JUDGE_IN_FLIGHT,         /* being answered: no second answer now */
    PS_JUDGE_STALE,             /* older than the last: refuse it */
    PS_JUDGE_OTHER_KIND,        /* its id names a request of another kind:
                                   refuse it */
};

/* Judge request `request_id` of `kind` from the worker's process
 * `incarnation` against r (another incarnation's record, or none: new). */
enum ps_record_verdict ps_record_judge(const struct ps_record *r,
                                       uint64_t incarnation,
                                       uint64_t request_id,
                                       enum ps_record_kind kind);

/* Start r as the record of a request being answered (flags 0, version 0).
 * Returns 1 when it names another request than r did, 0 for the same. */
int ps_record_begin(struct ps_record *r, uint32_t worker,
                    enum ps_record_kind kind, uint64_t incarnation,
                    uint64_t request_id);

/* r's request was answered at `version`. */
void ps_record_answered(struct ps_record *r, uint64_t version);

/* The worker's place in its data after the request (known: PS_REC_PLACE). */
void ps_record_set_place(struct ps_record *r, int known, uint32_t epoch,
                         uint32_t batches);

/* Read the stored bytes [v, v + len) of worker's record into *out: this
 * format, or format 1 (a header, the place, the reply's bytes — whose
 * version is its header's step; the bytes are not needed). Returns 0, or
 * -1 when they are neither (a damaged store). */
int ps_record_decode(const void *v, size_t len, uint32_t worker,
                     struct ps_record *out);

#endif
