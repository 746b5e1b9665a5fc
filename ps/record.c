/*
 * record.c — the record of a request's outcome (see record.h): how a
 * request is judged against it, and its stored bytes read back, in this
 * format or in format 1's.
 */
#include "record.h"

#include <stddef.h>
#include <string.h>

/* The stored bytes are the struct's: fixed widths, no padding, and hetps
 * runs on little-endian hosts only (store.h). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "records are stored as little-endian bytes");
_Static_assert(sizeof(struct ps_record) == PS_RECORD_SIZE &&
               offsetof(struct ps_record, worker) == 8 &&
               offsetof(struct ps_record, lane) == 10 &&
               offsetof(struct ps_record, incarnation) == 16 &&
               offsetof(struct ps_record, version) == 32 &&
               offsetof(struct ps_record, slice_count) == 52,
               "struct ps_record is the stored layout: change the format "
               "(and read the old one) before changing it");

enum ps_record_verdict ps_record_judge(const struct ps_record *r,
                                       uint64_t incarnation,
                                       uint64_t request_id,
                                       enum ps_record_kind kind)
{
    if (!r->request_id || r->incarnation != incarnation ||
        request_id > r->request_id)
        return PS_JUDGE_NEW;
    if (request_id < r->request_id)
        return PS_JUDGE_STALE;
    if (r->kind != (uint8_t)kind)
        return PS_JUDGE_OTHER_KIND;
    return r->flags & PS_REC_ANSWERED ? PS_JUDGE_REPEAT : PS_JUDGE_IN_FLIGHT;
}

int ps_record_begin(struct ps_record *r, uint32_t worker,
                    enum ps_record_kind kind, uint64_t incarnation,
                    uint64_t request_id)
{
    int other = r->request_id != request_id || r->incarnation != incarnation;

    memset(r, 0, sizeof *r);
    r->magic = PS_RECORD_MAGIC;
    r->format = PS_RECORD_FORMAT;
    r->kind = (uint8_t)kind;
    r->worker = (uint16_t)worker;
    r->incarnation = incarnation;
    r->request_id = request_id;
    return other;
}

void ps_record_answered(struct ps_record *r, uint64_t version)
{
    r->flags |= PS_REC_ANSWERED;
    r->version = version;
}

void ps_record_set_place(struct ps_record *r, int known, uint32_t epoch,
                         uint32_t batches)
{
    r->flags = (uint8_t)(known ? r->flags | PS_REC_PLACE
                               : r->flags & ~PS_REC_PLACE);
    r->epoch = known ? epoch : 0;
    r->batches = known ? batches : 0;
}

/* Format 1's header: then, when flags has bit 0, u32 epoch and u32
 * batches; then reply_len bytes of the Ack the push was answered with. */
struct record_v1 {
    uint64_t incarnation;
    uint64_t request_id;
    uint64_t step;              /* the version after the push's apply */
    uint32_t reply_len;
    uint32_t flags;
};

static int decode_v1(const unsigned char *v, size_t len, uint32_t worker,
                     struct ps_record *out)
{
    struct record_v1 h;
    uint32_t at[2] = {0, 0};
    size_t head = sizeof h;

    if (len < sizeof h)
        return -1;
    memcpy(&h, v, sizeof h);
    if (h.flags & ~1u)
        return -1;
    if (h.flags & 1u)
        head += sizeof at;
    if (len != head + h.reply_len)
        return -1;
    if (h.flags & 1u)
        memcpy(at, v + sizeof h, sizeof at);
    ps_record_begin(out, worker, PS_REQ_PUSH, h.incarnation, h.request_id);
    ps_record_answered(out, h.step);
    ps_record_set_place(out, h.flags & 1u, at[0], at[1]);
    return 0;
}

int ps_record_decode(const void *v, size_t len, uint32_t worker,
                     struct ps_record *out)
{
    memset(out, 0, sizeof *out);
    if (len == sizeof *out) {
        memcpy(out, v, sizeof *out);
        if (out->magic == PS_RECORD_MAGIC && out->format == PS_RECORD_FORMAT)
            return out->worker == worker ? 0 : -1;
    }
    return decode_v1(v, len, worker, out);
}
