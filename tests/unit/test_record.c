/*
 * test_record.c — the record of a request's outcome (ps/record.h) without
 * a store: how requests are judged against it (a table of cases), how it
 * is begun and answered, and its stored bytes read back — this format,
 * format 1 with and without a place, and bytes that are neither. The
 * records in LMDB are test_store.c's.
 */
#include "cu.h"
#include "ps/record.h"
#include "record_check.h"

#include <stdint.h>
#include <string.h>

/* Stored bytes read back as a record: this format, format 1 with and
 * without a place, and what is neither. */
static void test_record_decode(void)
{
    unsigned char buf[128];
    struct ps_record r, in;
    size_t n;

    ps_record_begin(&in, 7, PS_REQ_PUSH, 0xBBBB, 5);
    ps_record_set_place(&in, 1, 3, 17);
    ps_record_answered(&in, 12);
    CU_ASSERT_EQUAL(ps_record_decode(&in, sizeof in, 7, &r), 0);
    CU_ASSERT_EQUAL(memcmp(&r, &in, sizeof r), 0);
    CU_ASSERT_EQUAL(ps_record_decode(&in, sizeof in, 8, &r), -1);
    CU_ASSERT_EQUAL(ps_record_decode(&in, sizeof in - 1, 7, &r), -1);
    n = hp_record_v1(buf, 0xAAAA, 41, 9, 1, "ack-w0");
    CU_ASSERT_EQUAL(ps_record_decode(buf, n, 2, &r), 0);
    CU_ASSERT(r.magic == PS_RECORD_MAGIC && r.format == PS_RECORD_FORMAT &&
              r.worker == 2 && r.kind == PS_REQ_PUSH &&
              r.incarnation == 0xAAAA && r.request_id == 41 &&
              r.version == 9 && (r.flags & PS_REC_ANSWERED) &&
              (r.flags & PS_REC_PLACE) && r.epoch == 4 && r.batches == 250);
    n = hp_record_v1(buf, 0xAAAA, 42, 10, 0, "");
    CU_ASSERT_EQUAL(ps_record_decode(buf, n, 2, &r), 0);
    CU_ASSERT(r.request_id == 42 && r.version == 10 &&
              !(r.flags & PS_REC_PLACE));
    CU_ASSERT_EQUAL(ps_record_decode(buf, n - 1, 2, &r), -1);
    buf[28] = 2;                /* flags: an unknown bit */
    CU_ASSERT_EQUAL(ps_record_decode(buf, n, 2, &r), -1);
    CU_ASSERT_EQUAL(ps_record_decode(buf, 8, 2, &r), -1);
}

/* Request (incarnation, id, kind) against a record of push 7 from
 * incarnation 0xA, answered or being answered. */
static void test_judge(void)
{
    static const struct {
        int answered;
        uint64_t incarnation, id;
        enum ps_record_kind kind;
        enum ps_record_verdict want;
    } t[] = {
        {1, 0xA, 7, PS_REQ_PUSH, PS_JUDGE_REPEAT},
        {0, 0xA, 7, PS_REQ_PUSH, PS_JUDGE_IN_FLIGHT},
        {1, 0xA, 8, PS_REQ_PUSH, PS_JUDGE_NEW},
        {0, 0xA, 8, PS_REQ_PUSH, PS_JUDGE_NEW},
        {1, 0xA, 6, PS_REQ_PUSH, PS_JUDGE_STALE},
        {1, 0xA, 7, PS_REQ_LEAVE, PS_JUDGE_OTHER_KIND},
        {1, 0xA, 6, PS_REQ_LEAVE, PS_JUDGE_STALE},
        {1, 0xB, 7, PS_REQ_PUSH, PS_JUDGE_NEW},    /* another process */
        {1, 0xB, 1, PS_REQ_PUSH, PS_JUDGE_NEW},
    };
    struct ps_record r, none;
    size_t k;

    memset(&none, 0, sizeof none);
    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        ps_record_begin(&r, 3, PS_REQ_PUSH, 0xA, 7);
        if (t[k].answered)
            ps_record_answered(&r, 40);
        CU_ASSERT_EQUAL(ps_record_judge(&r, t[k].incarnation, t[k].id,
                                        t[k].kind), t[k].want);
        /* no record at all: every request is new */
        CU_ASSERT_EQUAL(ps_record_judge(&none, t[k].incarnation, t[k].id,
                                        t[k].kind), PS_JUDGE_NEW);
    }
}

/* Begun, answered, placed: what each step leaves in the record. */
static void test_begin_answer(void)
{
    struct ps_record r;

    memset(&r, 0xff, sizeof r);
    CU_ASSERT_EQUAL(ps_record_begin(&r, 3, PS_REQ_PUSH, 0xA, 7), 1);
    CU_ASSERT(r.magic == PS_RECORD_MAGIC && r.format == PS_RECORD_FORMAT &&
              r.worker == 3 && r.kind == PS_REQ_PUSH && r.flags == 0 &&
              r.version == 0 && r.incarnation == 0xA && r.request_id == 7);
    CU_ASSERT_EQUAL(ps_record_begin(&r, 3, PS_REQ_PUSH, 0xA, 7), 0);
    ps_record_set_place(&r, 1, 2, 9);
    ps_record_answered(&r, 41);
    CU_ASSERT(r.version == 41 && (r.flags & PS_REC_ANSWERED) &&
              (r.flags & PS_REC_PLACE) && r.epoch == 2 && r.batches == 9);
    ps_record_set_place(&r, 0, 2, 9);
    CU_ASSERT(!(r.flags & PS_REC_PLACE) && r.epoch == 0 && r.batches == 0 &&
              (r.flags & PS_REC_ANSWERED));
    CU_ASSERT_EQUAL(ps_record_begin(&r, 3, PS_REQ_PUSH, 0xB, 7), 1);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("record", NULL, NULL);

    CU_add_test(s, "requests judged against a record", test_judge);
    CU_add_test(s, "begun, answered, placed", test_begin_answer);
    CU_add_test(s, "stored bytes read back, format 1 too",
                test_record_decode);
}
