/*
 * wire.h — encode and decode hetps messages (see proto/hetps.proto).
 *
 * Frame, one nng message body:
 *
 *   [u32 LE header length H][H bytes protobuf Envelope][0-3 zero bytes so the
 *    data starts at a multiple of 4][tensor data: float32 LE, tensors in the
 *    order of Envelope.tensors, no gaps]
 *
 * Tensor data is never packed into protobuf: the sender writes it straight
 * into the outgoing nng message (hc_wire_reserve, then hc_wire_seal), the
 * receiver reads it in place (hc_wire_decode gives pointers into the
 * message). Decoding validates everything before anyone uses it — frame
 * sizes (overflow-checked), protobuf presence, protocol version, cluster id,
 * sender job, payload kind, tensor counts, lengths, offsets, CRC32C, names,
 * shapes — and on failure returns a code with a sentence in hc_err_msg()
 * suitable for an Error reply.
 *
 * Thread safety: all functions are reentrant; a decoded message is owned by
 * one thread at a time.
 */
#ifndef HC_WIRE_H
#define HC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "crc32c.h"
#include "hetps.pb-c.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hetps's wire format is little-endian float32; big-endian hosts are not supported"
#endif

/* 2: CreateVariables.optimizer is an OptimizerSettings message (1: JSON
 * text in field 4). */
#define HC_WIRE_VERSION 2u

/* Limits every decoder enforces (a message over any is refused). */
#define HC_WIRE_MAX_HEADER   (4u << 20)    /* Envelope bytes */
#define HC_WIRE_MAX_MSG      (512u << 20)  /* whole message */
#define HC_WIRE_MAX_CONTROL  (64u << 10)   /* heartbeat, leave, status, shutdown,
                                              error: no tensors */
#define HC_WIRE_MAX_ROSTER   (32u << 20)   /* join and the replies that list
                                              the members: join, status */
#define HC_WIRE_MAX_TENSORS  65536u        /* TensorRefs / Ranges per message */
#define HC_WIRE_MAX_TENSOR   (64u << 20)   /* elements in one TensorRef */
#define HC_WIRE_MAX_VARS     4096u         /* variables per CreateVariables */
#define HC_WIRE_MAX_DIMS     8u            /* dimensions of one shape */
#define HC_WIRE_MAX_NAME     128u          /* bytes of a variable name */
#define HC_WIRE_MAX_TEXT     4096u         /* bytes of any other string */
#define HC_WIRE_MAX_VAR_ELEMS (1ull << 34) /* elements of one variable */
#define HC_WIRE_MAX_MEMBERS  65536u        /* members in a reply */
#define HC_WIRE_MAX_PARTS    65536u        /* parts of one push (Push.parts) */
#define HC_WIRE_MAX_TABLES   64u           /* tables of one push_rows */
#define HC_WIRE_MAX_ROW_DIM  65536u        /* floats of one row */
#define HC_WIRE_ROW_ID_LIMIT (1ull << 62)  /* row ids are below it */
#define HC_MAX_LANES         8u            /* a sender's lanes (Envelope.lane):
                                              requests in flight to one shard */

/* Identity stamped on every envelope a process sends. */
struct hc_sender {
    Hetps__Job job;
    uint32_t index;
    uint64_t incarnation;   /* random per process start, never 0 */
    uint64_t cluster_id;
    uint64_t model_signature; /* 0 until the sender has a model */
};

/* A tensor to send: `length` floats of variable `key` from `offset`. */
struct hc_tensor_src {
    uint32_t key;
    uint64_t offset;
    uint32_t length;
    const float *data;      /* may be NULL with hc_wire_reserve */
};

/* A decoded message. `env` and `tensors` are owned by it; the data
 * pointers point into the nng message it was decoded from, which must
 * outlive it. */
struct hc_wire_msg {
    Hetps__Envelope *env;
    size_t n_tensors;
    const float **data;     /* (n_tensors) data of env->tensors[i] */
    int crc_unchecked;      /* hc_wire_decode_lazy's: read data only
                               through hc_wire_take, which checks it */
    int finite_checked;     /* hc_wire_decode of a push: its values were
                               checked for NaN and ±Inf, with the CRC: */
    size_t nonfinite_t;     /*   the first tensor holding one (n_tensors:
                               none), */
    uint32_t nonfinite_e;   /*   and its first such element */
};

/* A fresh incarnation number: random, non-zero. */
uint64_t hc_wire_new_incarnation(void);


/* Fill the header fields of an envelope from a sender and request id
 * (hetps__envelope__init first, so the payload is unset). env->sender then
 * points to a Task owned by this module, valid for the life of the process
 * (one per distinct job/index; never free it). */
void hc_wire_init_env(Hetps__Envelope *env, const struct hc_sender *s,
                      uint64_t request_id);

/*
 * Build the outgoing message for `env` (its payload set by the caller; its
 * `tensors` field is overwritten from `t`) with room for the n tensors.
 * When t[i].data is not NULL the data is copied in and sealed; otherwise
 * *dst (when not NULL) receives n pointers to where the caller writes each
 * tensor's floats, and the caller must call hc_wire_seal before sending.
 * On success *out is a new message owned by the caller; on failure *out
 * is NULL. env->tensors/n_tensors are used only during the call and are
 * NULL/0 when it returns (what they held before is ignored, not freed).
 * The envelope is checked as a receiver would check it: a message the
 * decoder would refuse fails here with the decoder's code and sentence.
 */
int hc_wire_reserve(nng_msg **out, Hetps__Envelope *env,
                    const struct hc_tensor_src *t, size_t n, float **dst);

/* Compute the CRCs of the written tensor data and finish the header (the
 * header is re-packed in place; its size cannot change). HC_ERR_INVAL when
 * msg was not built by hc_wire_reserve or was resized since. */
int hc_wire_seal(nng_msg *msg);

/* hc_wire_seal, taking tensor i's CRC from crc[i] where known[i] is set
 * (the caller copied it from a source whose CRC it holds, e.g. a store
 * block read whole: the receiver then checks the data end to end). */
int hc_wire_seal_known(nng_msg *msg, const uint32_t *crc,
                       const unsigned char *known);

/* hc_wire_reserve with every t[i].data set: encode and seal in one go. */
int hc_wire_encode(nng_msg **out, Hetps__Envelope *env,
                   const struct hc_tensor_src *t, size_t n);

/*
 * Decode and validate `len` bytes at `body` (an nng message body). When
 * expect_cluster is not 0 the envelope's cluster id must equal it.
 * Returns HC_OK and fills *out, or HC_ERR_PROTO / _VERSION / _CLUSTER /
 * _LIMIT / _CRC (or _NOMEM) with the reason in hc_err_msg(); *out is then
 * empty. Tensor data is read in place, so the data section must be 4-byte
 * aligned in memory (nng's received bodies are); a misaligned body with
 * tensors is refused with HC_ERR_PROTO. Free with hc_wire_msg_free.
 */
int hc_wire_decode(const void *body, size_t len, uint64_t expect_cluster,
                   struct hc_wire_msg *out);

/* hc_wire_decode, every check but the tensors' CRC32C: the caller reads
 * each tensor's data with hc_wire_take, which checks it in the same pass
 * as it copies it out (a large pull's answer is read once, not twice).
 * out->crc_unchecked is set. */
int hc_wire_decode_lazy(const void *body, size_t len, uint64_t expect_cluster,
                        struct hc_wire_msg *out);

/* Copy tensor i of a decoded message into dst (its length floats); when
 * the message was decoded lazily, its CRC32C is checked as it is copied:
 * HC_ERR_CRC naming the tensor when it does not match (dst then holds the
 * corrupted values: the caller must not use them). Thread-safe for
 * different i (and dst). */
int hc_wire_take(const struct hc_wire_msg *m, size_t i, float *dst);

/* Decode again a message this process decoded with hc_wire_decode before
 * and kept unchanged (a request held until it can be answered): every
 * check but the tensors' CRC32C, which were checked then. */
int hc_wire_redecode(const void *body, size_t len, uint64_t expect_cluster,
                     struct hc_wire_msg *out);

void hc_wire_msg_free(struct hc_wire_msg *m);

/* A push's dense tensors (its blocks): the first n_tensors − 2·n_rows_grad
 * − n_rows_pull; its rows' tensors follow (Push.rows_grad: ids and
 * gradients per table, then Push.rows_pull: ids per table). */
size_t hc_wire_push_dense(const Hetps__Push *p, size_t n_tensors);

/* Whether a push asks for values back (a push-and-pull): ranges
 * (Push.ranges) or rows (Push.rows_pull). */
int hc_wire_push_pulls(const Hetps__Push *p);

/* Id j of a rows tensor (a pull_rows' or push_rows' ids: two words an id,
 * little-endian; data only 4-byte aligned). */
uint64_t hc_wire_row_id(const float *ids, uint32_t j);

/* The Error payload code that answers an hc_err code. */
Hetps__ErrorCode hc_wire_error_code(int hc_code);
/* The hc_err code for an Error payload code received from a peer. */
int hc_wire_error_from_code(Hetps__ErrorCode code);

/* Build an Error reply with `text` (truncated to HC_WIRE_MAX_TEXT). */
int hc_wire_error_reply(nng_msg **out, const struct hc_sender *s,
                        uint64_t request_id, Hetps__ErrorCode code,
                        const char *text);

/* "join", "push", … for logs and messages. */
const char *hc_wire_payload_name(Hetps__Envelope__PayloadCase c);

/* A worker's membership as a shard reports it (Member.state on the wire). */
enum hc_member_state {
    HC_MEMBER_UNKNOWN,          /* never joined, or a state not known here */
    HC_MEMBER_JOINED,
    HC_MEMBER_LEFT,             /* said goodbye */
    HC_MEMBER_DEAD              /* missed its heartbeats */
};

/* "unknown", "joined", "left", "dead": the wire's words for each state. */
const char *hc_member_state_name(enum hc_member_state s);

/* The state `name` stands for; NULL or a word not listed above: UNKNOWN. */
enum hc_member_state hc_member_state_parse(const char *name);

#endif
