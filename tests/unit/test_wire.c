/*
 * test_wire.c — the hetps message frame (common/wire.c, common/crc32c.c).
 *
 * A fixture builds one valid Envelope of each payload kind from stack
 * storage; tests encode it with the library, or frame it raw (packing the
 * Envelope with protobuf-c directly) after a mutation so the decoder sees
 * exactly the malformed message under test — the encoder refuses most of
 * them itself. Each decoding check has one table row asserting the code
 * and a fragment of the sentence.
 */
#include "cu.h"
#include "crc32c.h"
#include "err.h"
#include "wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CLUSTER 0x0123456789ABCDEFull
#define INCARNATION 0x1111222233334444ull
#define REQUEST_ID 42u
#define FX_FLOATS 64
#define FX_REFS 8

static const struct hc_sender worker1 = {
    HETPS__JOB__JOB_WORKER, 1, INCARNATION, CLUSTER, 0};

/* ---- fixture: one valid envelope of a payload kind ---- */

struct fx {
    Hetps__Envelope env;
    Hetps__Task sender;
    Hetps__TensorRef refs[FX_REFS];
    Hetps__TensorRef *prefs[FX_REFS];
    size_t n_refs;
    Hetps__TensorRef **tref; /* what gets framed: prefs, or a mutator's */
    size_t n_tref;
    float data[FX_FLOATS];   /* (sum of lengths) tensor data, in order */
    size_t n_floats;
    long extra_bytes;        /* frame: add (or drop) bytes at the end */

    Hetps__Join join;
    Hetps__Heartbeat heartbeat;
    Hetps__Leave leave;
    Hetps__Status status;
    Hetps__Shutdown shutdown;
    Hetps__CreateVariables create;
    Hetps__OptimizerSettings optim;
    Hetps__VariableDef vars[2];
    Hetps__VariableDef *pvars[2];
    uint32_t shapes[2][HC_WIRE_MAX_DIMS + 1];
    Hetps__Pull pull;
    Hetps__Range ranges[2];
    Hetps__Range *pranges[2];
    Hetps__Push push;
    Hetps__Error error;
    Hetps__Ack ack;
    Hetps__JoinReply join_reply;
    Hetps__StatusReply status_reply;
    Hetps__Member members[2];
    Hetps__Member *pmembers[2];
    Hetps__Task mtasks[2];
    Hetps__Task shard;
    char name[HC_WIRE_MAX_NAME + 2];
    char text[HC_WIRE_MAX_TEXT + 2]; /* HC_WIRE_MAX_TEXT + 1 bytes of 'x' */
    void *heap[3];                   /* freed by fx_done */
};

static void fx_tensor(struct fx *f, uint32_t key, uint64_t offset,
                      uint32_t length)
{
    Hetps__TensorRef *r = &f->refs[f->n_refs];

    hetps__tensor_ref__init(r);
    r->key = key;
    r->offset = offset;
    r->length = length;
    f->prefs[f->n_refs++] = r;
    f->n_floats += length;
}

static void fx_member(Hetps__Member *m, Hetps__Task *t, uint32_t index,
                      const char *state)
{
    hetps__member__init(m);
    hetps__task__init(t);
    t->job = HETPS__JOB__JOB_WORKER;
    t->index = index;
    m->task = t;
    m->incarnation = 0xABC0 + index;
    m->state = (char *)state;
}

static void fx_init(struct fx *f, Hetps__Envelope__PayloadCase pc)
{
    Hetps__Envelope *e = &f->env;

    memset(f, 0, sizeof *f);
    hetps__envelope__init(e);
    hetps__task__init(&f->sender);
    f->sender.job = HETPS__JOB__JOB_WORKER;
    f->sender.index = 1;
    e->version = HC_WIRE_VERSION;
    e->cluster_id = CLUSTER;
    e->sender = &f->sender;
    e->incarnation = INCARNATION;
    e->request_id = REQUEST_ID;
    e->payload_case = pc;
    memset(f->text, 'x', HC_WIRE_MAX_TEXT + 1);
    for (size_t i = 0; i < 2; i++) {
        fx_member(&f->members[i], &f->mtasks[i], (uint32_t)i,
                  i ? "left" : "joined");
        f->pmembers[i] = &f->members[i];
    }
    f->members[0].devices = "gpu:0,gpu:1";
    f->members[0].has_last_seen_ms = 1;
    f->members[0].last_seen_ms = 250;

    switch (pc) {
    case HETPS__ENVELOPE__PAYLOAD_JOIN:
        hetps__join__init(&f->join);
        f->join.devices = "gpu:0,gpu:1";
        f->join.host = "gpu-server";
        f->join.has_pid = 1;
        f->join.pid = 4242;
        e->join = &f->join;
        break;
    case HETPS__ENVELOPE__PAYLOAD_HEARTBEAT:
        hetps__heartbeat__init(&f->heartbeat);
        e->heartbeat = &f->heartbeat;
        break;
    case HETPS__ENVELOPE__PAYLOAD_LEAVE:
        hetps__leave__init(&f->leave);
        e->leave = &f->leave;
        break;
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
        hetps__create_variables__init(&f->create);
        for (size_t i = 0; i < 2; i++) {
            hetps__variable_def__init(&f->vars[i]);
            f->vars[i].shape = f->shapes[i];
            f->pvars[i] = &f->vars[i];
        }
        f->vars[0].name = "dense/kernel";
        f->shapes[0][0] = 2;
        f->shapes[0][1] = 3;
        f->vars[0].n_shape = 2; /* (2, 3) */
        f->vars[1].name = "dense/bias";
        f->shapes[1][0] = 3;
        f->vars[1].n_shape = 1; /* (3) */
        f->create.vars = f->pvars;
        f->create.n_vars = 2;
        f->create.block_elems = 4;
        f->create.signature = 0xFEEDFACE12345678ull;
        hetps__optimizer_settings__init(&f->optim);
        f->optim.type = HETPS__OPTIMIZER_TYPE__OPTIMIZER_ADAM;
        f->optim.learning_rate = 0.001f;
        f->optim.has_beta_1 = 1;
        f->optim.beta_1 = 0.9f;
        f->create.optimizer = &f->optim;
        e->create = &f->create;
        fx_tensor(f, 0, 0, 6);
        fx_tensor(f, 1, 0, 3);
        break;
    case HETPS__ENVELOPE__PAYLOAD_PULL:
        hetps__pull__init(&f->pull);
        for (size_t i = 0; i < 2; i++) {
            hetps__range__init(&f->ranges[i]);
            f->ranges[i].key = (uint32_t)i;
            f->ranges[i].offset = 100 * i;
            f->ranges[i].length = 7 + (uint32_t)i;
            f->pranges[i] = &f->ranges[i];
        }
        f->pull.ranges = f->pranges;
        f->pull.n_ranges = 2;
        f->pull.has_min_version = 1;
        f->pull.min_version = 9;
        e->pull = &f->pull;
        break;
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        hetps__push__init(&f->push);
        f->push.samples = 32;
        f->push.has_base_version = 1;
        f->push.base_version = 8;
        e->push = &f->push;
        fx_tensor(f, 0, 0, 3);
        fx_tensor(f, 1, 10, 5);
        break;
    case HETPS__ENVELOPE__PAYLOAD_STATUS:
        hetps__status__init(&f->status);
        e->status = &f->status;
        break;
    case HETPS__ENVELOPE__PAYLOAD_SHUTDOWN:
        hetps__shutdown__init(&f->shutdown);
        e->shutdown = &f->shutdown;
        break;
    case HETPS__ENVELOPE__PAYLOAD_ERROR:
        hetps__error__init(&f->error);
        f->error.code = HETPS__ERROR_CODE__E_NOT_JOINED;
        f->error.message = "worker:1 must join first";
        e->error = &f->error;
        break;
    case HETPS__ENVELOPE__PAYLOAD_ACK:
        hetps__ack__init(&f->ack);
        f->ack.has_version = 1;
        f->ack.version = 12;
        f->ack.has_late = 1;
        f->ack.late = 1;
        e->ack = &f->ack;
        fx_tensor(f, 2, 4, 4);
        break;
    case HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY:
        hetps__join_reply__init(&f->join_reply);
        f->join_reply.shard_incarnation = 0x5151;
        f->join_reply.shard_index = 1;
        f->join_reply.n_shards = 2;
        f->join_reply.members = f->pmembers;
        f->join_reply.n_members = 2;
        f->join_reply.has_version = 1;
        f->join_reply.version = 3;
        e->join_reply = &f->join_reply;
        break;
    case HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY:
        hetps__status_reply__init(&f->status_reply);
        hetps__task__init(&f->shard);
        f->shard.job = HETPS__JOB__JOB_PS;
        f->shard.index = 0;
        f->status_reply.shard = &f->shard;
        f->status_reply.incarnation = 0x7777;
        f->status_reply.version = 17;
        f->status_reply.members = f->pmembers;
        f->status_reply.n_members = 2;
        f->status_reply.has_rejected = 1;
        f->status_reply.rejected = 5;
        f->status_reply.mode = "sync";
        e->status_reply = &f->status_reply;
        break;
    default:
        break;
    }
    for (size_t i = 0; i < FX_FLOATS; i++)
        f->data[i] = (float)i * 0.25f - 1.0f;
    f->tref = f->prefs;
    f->n_tref = f->n_refs;
}

static void fx_done(struct fx *f)
{
    for (size_t i = 0; i < 3; i++)
        free(f->heap[i]);
}

/* Attach f->tref to the envelope with the CRCs of the fixture data. */
static void fx_attach(struct fx *f)
{
    size_t at = 0;

    f->env.tensors = f->n_tref ? f->tref : NULL;
    f->env.n_tensors = f->n_tref;
    for (size_t i = 0; i < f->n_tref; i++) {
        uint32_t len = f->tref[i]->length;

        if (at + len <= f->n_floats)
            f->tref[i]->crc32c = hc_crc32c(f->data + at, (size_t)len * 4);
        at += len;
    }
}

/* The fixture as hc_tensor_src entries pointing into f->data. */
static size_t fx_src(struct fx *f, struct hc_tensor_src *t)
{
    size_t at = 0;

    for (size_t i = 0; i < f->n_refs; i++) {
        t[i].key = f->refs[i].key;
        t[i].offset = f->refs[i].offset;
        t[i].length = f->refs[i].length;
        t[i].data = f->data + at;
        at += f->refs[i].length;
    }
    return f->n_refs;
}

/* Frame the fixture by hand, as a peer would: a malloc'd buffer (so ASan
 * sees over-reads) holding exactly *len bytes. */
static uint8_t *fx_frame(struct fx *f, size_t *len)
{
    size_t h, off, n, dbytes;
    uint8_t *buf;

    fx_attach(f);
    h = protobuf_c_message_get_packed_size(&f->env.base);
    off = (4 + h + 3) & ~(size_t)3;
    n = (size_t)((long)(off + f->n_floats * 4) + f->extra_bytes);
    buf = calloc(1, n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    buf[0] = (uint8_t)h;
    buf[1] = (uint8_t)(h >> 8);
    buf[2] = (uint8_t)(h >> 16);
    buf[3] = (uint8_t)(h >> 24);
    CU_ASSERT_EQUAL(protobuf_c_message_pack(&f->env.base, buf + 4), h);
    dbytes = n - off < f->n_floats * 4 ? n - off : f->n_floats * 4;
    memcpy(buf + off, f->data, dbytes);
    f->env.tensors = NULL;
    f->env.n_tensors = 0;
    *len = n;
    return buf;
}

static void expect_err(const char *what, int rv, int code, const char *frag)
{
    int ok = rv == code && strstr(hc_err_msg(), frag) != NULL;

    if (!ok)
        printf("\n  %s: got %d \"%s\", want %d with \"%s\"\n", what, rv,
               hc_err_msg(), code, frag);
    CU_ASSERT(ok);
}

static const Hetps__Envelope__PayloadCase all_kinds[] = {
    HETPS__ENVELOPE__PAYLOAD_JOIN,       HETPS__ENVELOPE__PAYLOAD_HEARTBEAT,
    HETPS__ENVELOPE__PAYLOAD_LEAVE,      HETPS__ENVELOPE__PAYLOAD_CREATE,
    HETPS__ENVELOPE__PAYLOAD_PULL,       HETPS__ENVELOPE__PAYLOAD_PUSH,
    HETPS__ENVELOPE__PAYLOAD_STATUS,     HETPS__ENVELOPE__PAYLOAD_SHUTDOWN,
    HETPS__ENVELOPE__PAYLOAD_ERROR,      HETPS__ENVELOPE__PAYLOAD_ACK,
    HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY, HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY,
};
#define N_KINDS (sizeof all_kinds / sizeof all_kinds[0])

/* ---- CRC32C ---- */

static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;

    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static void test_crc_vectors(void)
{
    uint8_t buf[32];
    static const struct { int fill; uint32_t crc; } rfc[] = {
        {0, 0x8A9136AAu},  /* 32 bytes of 0x00 */
        {1, 0x62A8AB43u},  /* 32 bytes of 0xFF */
        {2, 0x46DD794Eu},  /* 0x00, 0x01, … 0x1F */
        {3, 0x113FDB5Cu},  /* 0x1F, 0x1E, … 0x00 */
    };

    for (size_t v = 0; v < sizeof rfc / sizeof rfc[0]; v++) {
        for (int i = 0; i < 32; i++)
            buf[i] = rfc[v].fill == 0 ? 0 : rfc[v].fill == 1 ? 0xFF
                     : rfc[v].fill == 2 ? (uint8_t)i : (uint8_t)(31 - i);
        CU_ASSERT_EQUAL(hc_crc32c(buf, 32), rfc[v].crc);
        CU_ASSERT_EQUAL(hc_crc32c_soft(buf, 32), rfc[v].crc);
    }
    CU_ASSERT_EQUAL(hc_crc32c("123456789", 9), 0xE3069283u);
    CU_ASSERT_EQUAL(hc_crc32c_soft("123456789", 9), 0xE3069283u);
    CU_ASSERT_EQUAL(hc_crc32c("", 0), 0u);
}

/* ISA-L's code, the table code and bitwise code agree on every length and
 * alignment; a CRC continued in pieces is the CRC of the whole. */
static void test_crc_paths_agree(void)
{
    enum { N = 1 << 16 };
    uint8_t *buf = malloc(N + 8);
    uint32_t x = 12345;
    int bad = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    for (size_t i = 0; i < N + 8; i++) {
        x = x * 1664525u + 1013904223u;
        buf[i] = (uint8_t)(x >> 24);
    }
    for (size_t a = 0; a < 8; a++)
        for (size_t n = 0; n < 300; n++) {
            uint32_t ref = crc_bitwise(buf + a, n);

            bad += hc_crc32c(buf + a, n) != ref;
            bad += hc_crc32c_soft(buf + a, n) != ref;
        }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(hc_crc32c(buf + 3, N), crc_bitwise(buf + 3, N));
    CU_ASSERT_EQUAL(hc_crc32c_soft(buf + 3, N), crc_bitwise(buf + 3, N));
    /* Longer lengths, odd ones among them, at three alignments. */
    {
        static const size_t lens[] = {12287, 12288, 12289, 12295, 24576,
                                      24583, 36864 + 31, N - 5};

        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
            for (size_t a = 0; a < 8; a += 3)
                bad += hc_crc32c(buf + a, lens[k]) !=
                       hc_crc32c_soft(buf + a, lens[k]);
        CU_ASSERT_EQUAL(bad, 0);
    }
    /* Copy-and-checksum: the same CRC and the same bytes, across its
     * 24 KiB chunks and at odd alignments of either side. */
    {
        static const size_t lens[] = {0, 1, 7, 24575, 24576, 24577, 50000,
                                      N - 9};
        uint8_t *out = malloc(N + 8);

        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
            for (size_t a = 0; a < 4; a++) {
                memset(out, 0, N + 8);
                bad += hc_crc32c_copy(out + (3 - a), buf + a, lens[k]) !=
                       hc_crc32c_soft(buf + a, lens[k]);
                bad += memcmp(out + (3 - a), buf + a, lens[k]) != 0;
            }
        CU_ASSERT_EQUAL(bad, 0);
        free(out);
    }
    /* hc_crc32c_extend: any split of a buffer gives its CRC. */
    {
        static const size_t cuts[] = {0, 1, 63, 64, 255, 256, 4097, 30000};

        for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++)
            bad += hc_crc32c_extend(hc_crc32c(buf + 1, cuts[k]),
                                    buf + 1 + cuts[k], 40000 - cuts[k]) !=
                   hc_crc32c_soft(buf + 1, 40000);
        CU_ASSERT_EQUAL(bad, 0);
    }
    free(buf);
}

/* ---- identity, names, error codes ---- */

static void test_incarnation(void)
{
    uint64_t v[16];
    int dup = 0;

    for (int i = 0; i < 16; i++) {
        v[i] = hc_wire_new_incarnation();
        CU_ASSERT_NOT_EQUAL(v[i], 0);
        for (int j = 0; j < i; j++)
            dup += v[i] == v[j];
    }
    CU_ASSERT_EQUAL(dup, 0);
}

/* Two envelopes from two identities on one thread keep their own sender. */
static void test_init_env(void)
{
    static const struct hc_sender ps0 = {HETPS__JOB__JOB_PS, 0, 77, CLUSTER, 0};
    Hetps__Envelope a, b;

    hc_wire_init_env(&a, &worker1, 5);
    hc_wire_init_env(&b, &ps0, 6);
    CU_ASSERT_EQUAL(a.version, HC_WIRE_VERSION);
    CU_ASSERT_EQUAL(a.cluster_id, CLUSTER);
    CU_ASSERT_EQUAL(a.incarnation, INCARNATION);
    CU_ASSERT_EQUAL(a.request_id, 5);
    CU_ASSERT_EQUAL(a.payload_case, HETPS__ENVELOPE__PAYLOAD__NOT_SET);
    CU_ASSERT_EQUAL_FATAL(a.sender != NULL && b.sender != NULL, 1);
    CU_ASSERT_EQUAL(a.sender->job, HETPS__JOB__JOB_WORKER);
    CU_ASSERT_EQUAL(a.sender->index, 1);
    CU_ASSERT_EQUAL(b.sender->job, HETPS__JOB__JOB_PS);
    CU_ASSERT_EQUAL(b.sender->index, 0);
    CU_ASSERT_EQUAL(b.request_id, 6);
}

static void test_payload_names(void)
{
    static const char *const want[] = {
        "join", "heartbeat", "leave", "create", "pull", "push", "status",
        "shutdown", "error", "ack", "join_reply", "status_reply"};

    for (size_t i = 0; i < N_KINDS; i++)
        CU_ASSERT_STRING_EQUAL(hc_wire_payload_name(all_kinds[i]), want[i]);
    CU_ASSERT_STRING_EQUAL(
        hc_wire_payload_name(HETPS__ENVELOPE__PAYLOAD__NOT_SET), "none");
    CU_ASSERT_STRING_EQUAL(
        hc_wire_payload_name((Hetps__Envelope__PayloadCase)99), "unknown");
}

static void test_member_states(void)
{
    static const struct {
        enum hc_member_state state;
        const char *name;
    } cases[] = {
        { HC_MEMBER_UNKNOWN, "unknown" },
        { HC_MEMBER_JOINED, "joined" },
        { HC_MEMBER_LEFT, "left" },
        { HC_MEMBER_DEAD, "dead" },
    };

    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CU_ASSERT_STRING_EQUAL(hc_member_state_name(cases[i].state),
                               cases[i].name);
        CU_ASSERT_EQUAL(hc_member_state_parse(cases[i].name), cases[i].state);
    }
    CU_ASSERT_STRING_EQUAL(hc_member_state_name((enum hc_member_state)7),
                           "unknown");
    CU_ASSERT_EQUAL(hc_member_state_parse("Joined"), HC_MEMBER_UNKNOWN);
    CU_ASSERT_EQUAL(hc_member_state_parse(""), HC_MEMBER_UNKNOWN);
    CU_ASSERT_EQUAL(hc_member_state_parse(NULL), HC_MEMBER_UNKNOWN);
}

static void test_error_codes(void)
{
    static const struct { int hc; Hetps__ErrorCode wire; int both_ways; } map[] = {
        {HC_ERR_PROTO, HETPS__ERROR_CODE__E_MALFORMED, 1},
        {HC_ERR_VERSION, HETPS__ERROR_CODE__E_VERSION, 1},
        {HC_ERR_CLUSTER, HETPS__ERROR_CODE__E_CLUSTER, 1},
        {HC_ERR_LIMIT, HETPS__ERROR_CODE__E_LIMIT, 1},
        {HC_ERR_CRC, HETPS__ERROR_CODE__E_CRC, 1},
        {HC_ERR_STALE, HETPS__ERROR_CODE__E_STALE, 1},
        {HC_ERR_NOTFOUND, HETPS__ERROR_CODE__E_NOT_FOUND, 1},
        {HC_ERR_MISMATCH, HETPS__ERROR_CODE__E_MISMATCH, 1},
        {HC_ERR_STORE, HETPS__ERROR_CODE__E_STORE, 1},
        {HC_ERR_CLOSED, HETPS__ERROR_CODE__E_SHUTTING_DOWN, 1},
        {HC_ERR_UNSUPPORTED, HETPS__ERROR_CODE__E_UNSUPPORTED, 1},
        {HC_ERR_INVAL, HETPS__ERROR_CODE__E_MALFORMED, 0},
        {HC_ERR_MAPFULL, HETPS__ERROR_CODE__E_STORE, 0},
        {HC_ERR_EXISTS, HETPS__ERROR_CODE__E_MISMATCH, 0},
        {HC_ERR_TIMEOUT, HETPS__ERROR_CODE__E_UNKNOWN, 0},
        {HC_OK, HETPS__ERROR_CODE__E_UNKNOWN, 0},
    };
    static const struct { Hetps__ErrorCode wire; int hc; } back[] = {
        {HETPS__ERROR_CODE__E_UNKNOWN, HC_ERR_REMOTE},
        {HETPS__ERROR_CODE__E_NOT_JOINED, HC_ERR_REMOTE},
        {HETPS__ERROR_CODE__E_UNKNOWN_TASK, HC_ERR_CONFIG},
        {(Hetps__ErrorCode)77, HC_ERR_REMOTE},
    };

    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        CU_ASSERT_EQUAL(hc_wire_error_code(map[i].hc), map[i].wire);
        if (map[i].both_ways)
            CU_ASSERT_EQUAL(hc_wire_error_from_code(map[i].wire), map[i].hc);
    }
    for (size_t i = 0; i < sizeof back / sizeof back[0]; i++)
        CU_ASSERT_EQUAL(hc_wire_error_from_code(back[i].wire), back[i].hc);
}

static void test_error_reply(void)
{
    static const struct { size_t n_a; const char *tail; size_t want_len; } rows[] = {
        {0, "no such variable dense/kernel", 29},
        {5000, "", HC_WIRE_MAX_TEXT},                 /* cut to the limit */
        {HC_WIRE_MAX_TEXT - 1, "\xc3\xa9", HC_WIRE_MAX_TEXT - 1}, /* not mid-é */
    };
    char *text = malloc(6000);
    struct hc_wire_msg m;
    nng_msg *msg;

    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        memset(text, 'a', rows[r].n_a);
        strcpy(text + rows[r].n_a, rows[r].tail);
        CU_ASSERT_EQUAL_FATAL(hc_wire_error_reply(&msg, &worker1, 9,
                                                  HETPS__ERROR_CODE__E_NOT_FOUND,
                                                  text), HC_OK);
        CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg),
                                             CLUSTER, &m), HC_OK);
        CU_ASSERT_EQUAL(m.env->payload_case, HETPS__ENVELOPE__PAYLOAD_ERROR);
        CU_ASSERT_EQUAL(m.env->request_id, 9);
        CU_ASSERT_EQUAL(m.n_tensors, 0);
        CU_ASSERT_EQUAL(m.env->error->code, HETPS__ERROR_CODE__E_NOT_FOUND);
        CU_ASSERT_EQUAL(strlen(m.env->error->message), rows[r].want_len);
        CU_ASSERT_EQUAL(strncmp(m.env->error->message, text, rows[r].want_len), 0);
        hc_wire_msg_free(&m);
        nng_msg_free(msg);
    }
    expect_err("error reply, unknown code",
               hc_wire_error_reply(&msg, &worker1, 9, (Hetps__ErrorCode)55, "x"),
               HC_ERR_PROTO, "unknown code 55");
    CU_ASSERT_PTR_NULL(msg);
    free(text);
}

/* ---- round trips ---- */

static void check_same_envelope(struct fx *f, const Hetps__Envelope *got)
{
    size_t na, nb;
    uint8_t *a, *b;

    fx_attach(f);
    na = protobuf_c_message_get_packed_size(&f->env.base);
    nb = protobuf_c_message_get_packed_size(&got->base);
    CU_ASSERT_EQUAL_FATAL(na, nb);
    a = malloc(na + 1);
    b = malloc(nb + 1);
    CU_ASSERT_FATAL(a && b);
    protobuf_c_message_pack(&f->env.base, a);
    protobuf_c_message_pack(&got->base, b);
    CU_ASSERT_EQUAL(memcmp(a, b, na), 0);
    free(a);
    free(b);
    f->env.tensors = NULL;
    f->env.n_tensors = 0;
}

/* A field or two of each kind, by name, besides the byte comparison. */
static void check_payload_fields(const Hetps__Envelope *e)
{
    switch (e->payload_case) {
    case HETPS__ENVELOPE__PAYLOAD_JOIN:
        CU_ASSERT_STRING_EQUAL(e->join->host, "gpu-server");
        CU_ASSERT_EQUAL(e->join->pid, 4242);
        break;
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
        CU_ASSERT_EQUAL_FATAL(e->create->n_vars, 2);
        CU_ASSERT_STRING_EQUAL(e->create->vars[0]->name, "dense/kernel");
        CU_ASSERT_EQUAL(e->create->vars[0]->n_shape, 2);
        CU_ASSERT_EQUAL(e->create->vars[0]->shape[1], 3);
        CU_ASSERT_EQUAL(e->create->signature, 0xFEEDFACE12345678ull);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e->create->optimizer);
        CU_ASSERT_EQUAL(e->create->optimizer->type,
                        HETPS__OPTIMIZER_TYPE__OPTIMIZER_ADAM);
        CU_ASSERT(e->create->optimizer->learning_rate == 0.001f);
        CU_ASSERT(e->create->optimizer->has_beta_1 &&
                  e->create->optimizer->beta_1 == 0.9f);
        CU_ASSERT(!e->create->optimizer->has_epsilon);
        break;
    case HETPS__ENVELOPE__PAYLOAD_PULL:
        CU_ASSERT_EQUAL_FATAL(e->pull->n_ranges, 2);
        CU_ASSERT_EQUAL(e->pull->ranges[1]->offset, 100);
        CU_ASSERT_EQUAL(e->pull->min_version, 9);
        break;
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        CU_ASSERT_EQUAL(e->push->samples, 32);
        CU_ASSERT_EQUAL(e->push->base_version, 8);
        break;
    case HETPS__ENVELOPE__PAYLOAD_ERROR:
        CU_ASSERT_EQUAL(e->error->code, HETPS__ERROR_CODE__E_NOT_JOINED);
        CU_ASSERT_STRING_EQUAL(e->error->message, "worker:1 must join first");
        break;
    case HETPS__ENVELOPE__PAYLOAD_ACK:
        CU_ASSERT_EQUAL(e->ack->version, 12);
        CU_ASSERT(e->ack->has_late && e->ack->late);
        break;
    case HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY:
        CU_ASSERT_EQUAL_FATAL(e->join_reply->n_members, 2);
        CU_ASSERT_STRING_EQUAL(e->join_reply->members[1]->state, "left");
        CU_ASSERT_STRING_EQUAL(e->join_reply->members[0]->devices, "gpu:0,gpu:1");
        CU_ASSERT_EQUAL(e->join_reply->n_shards, 2);
        break;
    case HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY:
        CU_ASSERT_EQUAL(e->status_reply->shard->job, HETPS__JOB__JOB_PS);
        CU_ASSERT_EQUAL(e->status_reply->version, 17);
        CU_ASSERT_STRING_EQUAL(e->status_reply->mode, "sync");
        CU_ASSERT_EQUAL(e->status_reply->rejected, 5);
        break;
    default: /* heartbeat, leave, status, shutdown: nothing but the kind */
        break;
    }
}

static void test_roundtrip_kinds(void)
{
    struct fx *f = malloc(sizeof *f);
    struct hc_tensor_src t[FX_REFS];
    struct hc_wire_msg m;
    nng_msg *msg;

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (size_t k = 0; k < N_KINDS; k++) {
        size_t n, at = 0;

        fx_init(f, all_kinds[k]);
        n = fx_src(f, t);
        if (hc_wire_encode(&msg, &f->env, t, n) != HC_OK) {
            printf("\n  encode %s: %s\n", hc_wire_payload_name(all_kinds[k]),
                   hc_err_msg());
            CU_FAIL("encode");
            continue;
        }
        CU_ASSERT_PTR_NULL(f->env.tensors);
        CU_ASSERT_EQUAL(f->env.n_tensors, 0);
        CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg),
                                             CLUSTER, &m), HC_OK);
        CU_ASSERT_EQUAL(m.env->payload_case, all_kinds[k]);
        CU_ASSERT_EQUAL(m.env->version, HC_WIRE_VERSION);
        CU_ASSERT_EQUAL(m.env->cluster_id, CLUSTER);
        CU_ASSERT_EQUAL(m.env->sender->job, HETPS__JOB__JOB_WORKER);
        CU_ASSERT_EQUAL(m.env->sender->index, 1);
        CU_ASSERT_EQUAL(m.env->incarnation, INCARNATION);
        CU_ASSERT_EQUAL(m.env->request_id, REQUEST_ID);
        CU_ASSERT_EQUAL_FATAL(m.n_tensors, n);
        for (size_t i = 0; i < n; i++) {
            CU_ASSERT_EQUAL(memcmp(m.data[i], f->data + at,
                                   (size_t)t[i].length * 4), 0);
            at += t[i].length;
        }
        check_payload_fields(m.env);
        check_same_envelope(f, m.env);
        hc_wire_msg_free(&m);
        CU_ASSERT_PTR_NULL(m.env);
        nng_msg_free(msg);
    }
    free(f);
}

/*
 * Push with 0, 1, several and more-than-the-stack tensors: the encode path
 * and the reserve + write + seal path give the same bytes, and the decoded
 * pointers read back the exact floats.
 */
static void test_roundtrip_tensors(void)
{
    enum { MAXT = 40 };
    static const size_t counts[] = {0, 1, 5, MAXT};
    struct hc_tensor_src t[MAXT], tn[MAXT];
    float *dst[MAXT];
    float *src = malloc(MAXT * 1000 * sizeof *src); /* (sum of lengths) */
    Hetps__Push push = HETPS__PUSH__INIT;
    Hetps__Envelope env;

    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    push.samples = 4;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        size_t n = counts[c], at = 0;
        nng_msg *a = NULL, *b = NULL;
        struct hc_wire_msg m;

        for (size_t i = 0; i < n; i++) {
            uint32_t len = i == 0 ? 1 : (uint32_t)(1 + (i * 97) % 1000);

            for (uint32_t k = 0; k < len; k++)
                src[at + k] = (float)(at + k) * -0.125f + (float)i;
            t[i] = (struct hc_tensor_src){(uint32_t)i, (1ull << 33) + i * 7,
                                          len, src + at};
            tn[i] = t[i];
            tn[i].data = NULL;
            at += len;
        }
        hc_wire_init_env(&env, &worker1, 100 + c);
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
        env.push = &push;
        CU_ASSERT_EQUAL_FATAL(hc_wire_encode(&a, &env, t, n), HC_OK);
        CU_ASSERT_EQUAL_FATAL(hc_wire_reserve(&b, &env, tn, n, dst), HC_OK);
        CU_ASSERT_PTR_NULL(env.tensors);
        for (size_t i = 0; i < n; i++) {
            CU_ASSERT_EQUAL(((uintptr_t)dst[i] & 3), 0);
            if (i > 0)
                CU_ASSERT_PTR_EQUAL(dst[i], dst[i - 1] + t[i - 1].length);
            memcpy(dst[i], t[i].data, (size_t)t[i].length * 4);
        }
        CU_ASSERT_EQUAL_FATAL(hc_wire_seal(b), HC_OK);
        CU_ASSERT_EQUAL_FATAL(nng_msg_len(a), nng_msg_len(b));
        CU_ASSERT_EQUAL(memcmp(nng_msg_body(a), nng_msg_body(b), nng_msg_len(a)),
                        0);
        CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(b), nng_msg_len(b),
                                             CLUSTER, &m), HC_OK);
        CU_ASSERT_EQUAL_FATAL(m.n_tensors, n);
        CU_ASSERT_EQUAL(m.data == NULL, n == 0);
        for (size_t i = 0; i < n; i++) {
            int same = 1;

            CU_ASSERT_EQUAL(m.env->tensors[i]->key, t[i].key);
            CU_ASSERT_EQUAL(m.env->tensors[i]->offset, t[i].offset);
            CU_ASSERT_EQUAL(m.env->tensors[i]->length, t[i].length);
            for (uint32_t k = 0; k < t[i].length; k++)
                same &= m.data[i][k] == t[i].data[k];
            CU_ASSERT(same);
        }
        hc_wire_msg_free(&m);
        nng_msg_free(a);
        nng_msg_free(b);
    }
    free(src);
}

/* Written in place but not sealed: the receiver sees a CRC mismatch. */
static void test_reserve_unsealed(void)
{
    struct hc_tensor_src t = {3, 0, 4, NULL};
    Hetps__Push push = HETPS__PUSH__INIT;
    Hetps__Envelope env;
    struct hc_wire_msg m;
    float *dst;
    nng_msg *msg;

    push.samples = 1;
    hc_wire_init_env(&env, &worker1, 1);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
    env.push = &push;
    CU_ASSERT_EQUAL_FATAL(hc_wire_reserve(&msg, &env, &t, 1, &dst), HC_OK);
    for (int i = 0; i < 4; i++)
        dst[i] = 1.5f * (float)i;
    expect_err("unsealed", hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg),
                                          CLUSTER, &m),
               HC_ERR_CRC, "tensor 0 (key 3");
    CU_ASSERT_PTR_NULL(m.env);
    CU_ASSERT_EQUAL(hc_wire_seal(msg), HC_OK);
    CU_ASSERT_EQUAL(hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg), CLUSTER,
                                   &m), HC_OK);
    hc_wire_msg_free(&m);
    /* A message resized after reserve no longer matches its header. */
    CU_ASSERT_EQUAL_FATAL(nng_msg_append(msg, "abcd", 4), 0);
    expect_err("seal resized", hc_wire_seal(msg), HC_ERR_INVAL, "does not match");
    nng_msg_free(msg);
    CU_ASSERT_EQUAL_FATAL(nng_msg_alloc(&msg, 0), 0);
    CU_ASSERT_EQUAL_FATAL(nng_msg_append(msg, "\x02\0\0\0\xff\xff", 6), 0);
    expect_err("seal foreign", hc_wire_seal(msg), HC_ERR_INVAL, "not an Envelope");
    nng_msg_free(msg);
}

/* Sealed with known CRCs: a right one is used as given (the receiver
 * accepts), a wrong one reaches the receiver (it refuses); redecode skips
 * only the CRC check; a lazy decode leaves it to hc_wire_take. */
static void test_seal_known_redecode(void)
{
    struct hc_tensor_src t[2] = {{3, 0, 4, NULL}, {3, 4, 3, NULL}};
    Hetps__Push push = HETPS__PUSH__INIT;
    Hetps__Envelope env;
    struct hc_wire_msg m;
    unsigned char known[2] = {1, 0};
    uint32_t crc[2];
    float *dst[2], vals[4] = {1, 2, 3, 4};
    nng_msg *msg;

    push.samples = 1;
    hc_wire_init_env(&env, &worker1, 1);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
    env.push = &push;
    CU_ASSERT_EQUAL_FATAL(hc_wire_reserve(&msg, &env, t, 2, dst), HC_OK);
    memcpy(dst[0], vals, sizeof vals);
    memcpy(dst[1], vals, 3 * sizeof *vals);
    crc[0] = hc_crc32c(vals, sizeof vals);
    crc[1] = 0xdeadbeefu;       /* not known: computed, this is ignored */
    CU_ASSERT_EQUAL(hc_wire_seal_known(msg, crc, known), HC_OK);
    CU_ASSERT_EQUAL(hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg), CLUSTER,
                                   &m), HC_OK);
    hc_wire_msg_free(&m);
    crc[0] ^= 1;                /* a wrong known CRC goes out as given */
    CU_ASSERT_EQUAL(hc_wire_seal_known(msg, crc, known), HC_OK);
    expect_err("wrong known crc", hc_wire_decode(nng_msg_body(msg),
                                                 nng_msg_len(msg), CLUSTER, &m),
               HC_ERR_CRC, "tensor 0 (key 3");
    CU_ASSERT_EQUAL(hc_wire_redecode(nng_msg_body(msg), nng_msg_len(msg),
                                     CLUSTER, &m), HC_OK);
    CU_ASSERT_EQUAL(m.n_tensors, 2);
    if (m.n_tensors == 2)
        CU_ASSERT_EQUAL(m.data[1][2], 3.0f);
    hc_wire_msg_free(&m);
    /* Everything else is still checked on redecode. */
    expect_err("redecode other cluster",
               hc_wire_redecode(nng_msg_body(msg), nng_msg_len(msg),
                                CLUSTER + 1, &m),
               HC_ERR_CLUSTER, "cluster");
    /* A lazy decode takes the message; hc_wire_take then refuses the
     * tensor whose CRC is wrong and copies the right one. */
    {
        float got[4] = {0};

        CU_ASSERT_EQUAL(hc_wire_decode_lazy(nng_msg_body(msg),
                                            nng_msg_len(msg), CLUSTER, &m),
                        HC_OK);
        CU_ASSERT_EQUAL(m.crc_unchecked, 1);
        expect_err("take wrong crc", hc_wire_take(&m, 0, got), HC_ERR_CRC,
                   "tensor 0 (key 3");
        CU_ASSERT_EQUAL(hc_wire_take(&m, 1, got), HC_OK);
        CU_ASSERT(got[0] == 1.0f && got[1] == 2.0f && got[2] == 3.0f);
        CU_ASSERT_EQUAL(hc_wire_take(&m, 2, got), HC_ERR_INVAL);
        hc_wire_msg_free(&m);
        expect_err("lazy other cluster",
                   hc_wire_decode_lazy(nng_msg_body(msg), nng_msg_len(msg),
                                       CLUSTER + 1, &m),
                   HC_ERR_CLUSTER, "cluster");
        /* A full decode checked them: take only copies. */
        crc[0] ^= 1;
        CU_ASSERT_EQUAL(hc_wire_seal_known(msg, crc, known), HC_OK);
        CU_ASSERT_EQUAL(hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg),
                                       CLUSTER, &m), HC_OK);
        CU_ASSERT_EQUAL(m.crc_unchecked, 0);
        CU_ASSERT_EQUAL(hc_wire_take(&m, 0, got), HC_OK);
        CU_ASSERT(got[3] == 4.0f);
        hc_wire_msg_free(&m);
    }
    nng_msg_free(msg);
}

/* The sender refuses what a receiver would refuse, and says why. */
static void test_encode_refuses(void)
{
    static const struct {
        const char *what;
        Hetps__Envelope__PayloadCase pc;
        struct hc_tensor_src t;
        int no_sender;
        int code;
        const char *frag;
    } rows[] = {
        {"length 0", HETPS__ENVELOPE__PAYLOAD_PUSH, {0, 0, 0, NULL}, 0,
         HC_ERR_PROTO, "length 0"},
        {"length over", HETPS__ENVELOPE__PAYLOAD_PUSH,
         {0, 0, HC_WIRE_MAX_TENSOR + 1, NULL}, 0, HC_ERR_LIMIT, "over the limit"},
        {"tensors on pull", HETPS__ENVELOPE__PAYLOAD_PULL, {0, 0, 2, NULL}, 0,
         HC_ERR_PROTO, "only push, create and ack"},
        {"no sender", HETPS__ENVELOPE__PAYLOAD_PUSH, {0, 0, 2, NULL}, 1,
         HC_ERR_PROTO, "no sender"},
    };
    struct fx *f = malloc(sizeof *f);
    nng_msg *msg = (nng_msg *)f; /* must come back NULL */
    struct hc_tensor_src *many;
    float *dst[1];

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        fx_init(f, rows[r].pc);
        if (rows[r].no_sender)
            f->env.sender = NULL;
        expect_err(rows[r].what,
                   hc_wire_reserve(&msg, &f->env, &rows[r].t, 1, dst),
                   rows[r].code, rows[r].frag);
        CU_ASSERT_PTR_NULL(msg);
        CU_ASSERT_PTR_NULL(f->env.tensors);
        CU_ASSERT_EQUAL(f->env.n_tensors, 0);
    }
    fx_init(f, HETPS__ENVELOPE__PAYLOAD_PUSH);
    f->env.push = NULL;
    expect_err("payload not set", hc_wire_reserve(&msg, &f->env, NULL, 0, NULL),
               HC_ERR_PROTO, "push payload is selected but not set");
    fx_init(f, HETPS__ENVELOPE__PAYLOAD_PUSH);
    expect_err("encode without data",
               hc_wire_encode(&msg, &f->env, &rows[2].t, 1), HC_ERR_INVAL,
               "has no data");
    many = calloc(HC_WIRE_MAX_TENSORS + 1, sizeof *many);
    CU_ASSERT_PTR_NOT_NULL_FATAL(many);
    for (size_t i = 0; i <= HC_WIRE_MAX_TENSORS; i++)
        many[i].length = 1;
    expect_err("too many", hc_wire_reserve(&msg, &f->env, many,
                                           HC_WIRE_MAX_TENSORS + 1, NULL),
               HC_ERR_LIMIT, "65537 tensors");
    free(many);
    fx_init(f, HETPS__ENVELOPE__PAYLOAD_CREATE);
    f->vars[0].name = "bad name";
    expect_err("bad name", hc_wire_reserve(&msg, &f->env, NULL, 0, NULL),
               HC_ERR_PROTO, "0x20");
    free(f);
}

/* ---- decoding: frame-level checks on raw bytes ---- */

static void test_decode_frame(void)
{
    static const struct {
        const char *what;
        uint8_t bytes[12];
        size_t len;
        int code;
        const char *frag;
    } rows[] = {
        {"empty", {0}, 0, HC_ERR_PROTO, "0 bytes is too short"},
        {"3 bytes", {1, 0, 0}, 3, HC_ERR_PROTO, "3 bytes is too short"},
        {"H past end", {100, 0, 0, 0, 1, 2, 3, 4}, 8, HC_ERR_PROTO,
         "header length 100 bytes runs past the end of the 8-byte message"},
        {"H = 0xFFFFFFFF", {0xff, 0xff, 0xff, 0xff, 0}, 5, HC_ERR_LIMIT,
         "header length 4294967295 bytes is over the limit"},
        {"H over limit", {0x01, 0x00, 0x40, 0x00}, 4, HC_ERR_LIMIT,
         "header length 4194305 bytes"},
        {"garbage header", {3, 0, 0, 0, 0xff, 0xff, 0xff, 0}, 8, HC_ERR_PROTO,
         "not a valid hetps Envelope"},
        {"empty header", {0, 0, 0, 0}, 4, HC_ERR_PROTO,
         "missing a required field"},
    };
    struct hc_wire_msg m;

    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        uint8_t *buf = malloc(rows[r].len + 1); /* exact, for ASan */

        memcpy(buf, rows[r].bytes, rows[r].len);
        expect_err(rows[r].what, hc_wire_decode(buf, rows[r].len, CLUSTER, &m),
                   rows[r].code, rows[r].frag);
        CU_ASSERT_PTR_NULL(m.env);
        free(buf);
    }
    expect_err("NULL out", hc_wire_decode("", 0, 0, NULL), HC_ERR_INVAL, "out");
}

/* A valid message cut anywhere inside its header. */
static void test_decode_truncated(void)
{
    struct fx *f = malloc(sizeof *f);
    struct hc_wire_msg m;
    size_t len;
    uint8_t *buf;

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fx_init(f, HETPS__ENVELOPE__PAYLOAD_CREATE);
    buf = fx_frame(f, &len);
    CU_ASSERT_EQUAL(hc_wire_decode(buf, len, CLUSTER, &m), HC_OK);
    hc_wire_msg_free(&m);
    expect_err("cut at 20", hc_wire_decode(buf, 20, CLUSTER, &m), HC_ERR_PROTO,
               "runs past the end of the 20-byte message");
    expect_err("cut in data", hc_wire_decode(buf, len - 1, CLUSTER, &m),
               HC_ERR_PROTO, "data section is 35 bytes but the 2 tensors need 36");
    free(buf);
    fx_done(f);
    free(f);
}

/* Random bytes: refused, with one of the frame codes, never a crash. */
static void test_decode_random(void)
{
    uint32_t x = 0xC0FFEE;
    int refused = 0;

    for (int r = 0; r < 64; r++) {
        size_t len = 4 + (size_t)r * 13;
        uint8_t *buf = malloc(len);
        struct hc_wire_msg m;
        int rv;

        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            buf[i] = (uint8_t)x;
        }
        if (r & 1) { /* plausible header length: reach the protobuf parser */
            buf[0] = (uint8_t)(len - 4);
            buf[1] = buf[2] = buf[3] = 0;
        }
        rv = hc_wire_decode(buf, len, CLUSTER, &m);
        refused += rv == HC_ERR_PROTO || rv == HC_ERR_LIMIT;
        hc_wire_msg_free(&m);
        free(buf);
    }
    CU_ASSERT_EQUAL(refused, 64);
}

/* Over HC_WIRE_MAX_MSG: a lazily mapped region, only its first page used. */
static void test_decode_too_big(void)
{
    size_t len = (size_t)HC_WIRE_MAX_MSG + 4;
    struct fx *f = malloc(sizeof *f);
    struct hc_wire_msg m;
    size_t flen;
    uint8_t *buf, *map;

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    map = mmap(NULL, len, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) {
        free(f);
        HP_SKIP("cannot map 512 MiB of address space");
    }
    fx_init(f, HETPS__ENVELOPE__PAYLOAD_HEARTBEAT);
    buf = fx_frame(f, &flen);
    memcpy(map, buf, flen);
    expect_err("512 MiB + 4", hc_wire_decode(map, len, CLUSTER, &m),
               HC_ERR_LIMIT, "message of 536870916 bytes is over the limit");
    munmap(map, len);
    free(buf);
    free(f);
}

/* Per kind: a heartbeat (no tensors) padded past HC_WIRE_MAX_CONTROL is
 * refused before its body is looked at; the same bytes as a push are not
 * refused for their size. */
static void test_decode_kind_limit(void)
{
    struct fx *f = malloc(sizeof *f);
    size_t flen, len = (size_t)HC_WIRE_MAX_CONTROL + 1;
    struct hc_wire_msg m;
    uint8_t *buf, *big;

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fx_init(f, HETPS__ENVELOPE__PAYLOAD_HEARTBEAT);
    buf = fx_frame(f, &flen);
    CU_ASSERT_FATAL(flen < len);
    big = calloc(1, len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    memcpy(big, buf, flen);
    expect_err("padded heartbeat", hc_wire_decode(big, len, CLUSTER, &m),
               HC_ERR_LIMIT, "a heartbeat message of 65537 bytes is over the "
               "limit of 65536 for its kind");
    CU_ASSERT_EQUAL(hc_wire_decode(buf, flen, CLUSTER, &m), HC_OK);
    hc_wire_msg_free(&m);
    free(big);
    free(buf);
    free(f);
}

/* ---- decoding: one row per Envelope check ---- */

static void m_version(struct fx *f) { f->env.version = HC_WIRE_VERSION + 1; }
static void m_cluster(struct fx *f) { f->env.cluster_id = 0xDEAD; }
static void m_job(struct fx *f) { f->sender.job = (Hetps__Job)7; }
static void m_no_sender(struct fx *f) { f->env.sender = NULL; }
static void m_no_payload(struct fx *f)
{
    f->env.payload_case = HETPS__ENVELOPE__PAYLOAD__NOT_SET;
    f->n_tref = 0;
    f->n_floats = 0;
}
static void m_len0(struct fx *f) { f->refs[0].length = 0; }
static void m_len_big(struct fx *f) { f->refs[1].length = HC_WIRE_MAX_TENSOR + 1; }
static void m_offset(struct fx *f) { f->refs[1].offset = UINT64_MAX - 2; }
static void m_short(struct fx *f) { f->extra_bytes = -4; }
static void m_long(struct fx *f) { f->extra_bytes = 4; }
static void m_name_chars(struct fx *f) { f->vars[1].name = "dense\nbias"; }
static void m_name_empty(struct fx *f) { f->vars[0].name = ""; }
static void m_name_climb(struct fx *f) { f->vars[0].name = "../../x"; }
static void m_name_abs(struct fx *f) { f->vars[0].name = "/etc/x"; }
static void m_name_dot(struct fx *f) { f->vars[1].name = "dense/./bias"; }
static void m_name_slash2(struct fx *f) { f->vars[1].name = "dense//bias"; }
static void m_name_long(struct fx *f)
{
    memset(f->name, 'a', HC_WIRE_MAX_NAME + 1);
    f->vars[0].name = f->name;
}
static void m_shape_empty(struct fx *f) { f->vars[1].n_shape = 0; }
static void m_shape_zero(struct fx *f) { f->shapes[0][1] = 0; }
static void m_shape_ovf(struct fx *f)
{
    for (size_t d = 0; d < HC_WIRE_MAX_DIMS; d++)
        f->shapes[0][d] = 0xFFFFFFFFu;
    f->vars[0].n_shape = HC_WIRE_MAX_DIMS;
}
static void m_shape_dims(struct fx *f)
{
    for (size_t d = 0; d <= HC_WIRE_MAX_DIMS; d++)
        f->shapes[0][d] = 1;
    f->vars[0].n_shape = HC_WIRE_MAX_DIMS + 1;
}
static void m_many_vars(struct fx *f)
{
    size_t n = HC_WIRE_MAX_VARS + 1;
    Hetps__VariableDef *v = calloc(n, sizeof *v);
    Hetps__VariableDef **pv = calloc(n, sizeof *pv);
    static uint32_t one = 1;

    CU_ASSERT_FATAL(v && pv);
    for (size_t i = 0; i < n; i++) {
        hetps__variable_def__init(&v[i]);
        v[i].name = "v";
        v[i].shape = &one;
        v[i].n_shape = 1;
        pv[i] = &v[i];
    }
    f->create.vars = pv;
    f->create.n_vars = n;
    f->heap[0] = v;
    f->heap[1] = pv;
}
static void m_create_key(struct fx *f) { f->refs[1].key = 5; }
static void m_create_outside(struct fx *f) { f->refs[0].offset = 1; }
static void m_block0(struct fx *f) { f->create.block_elems = 0; }
static void m_many_tensors(struct fx *f)
{
    size_t n = HC_WIRE_MAX_TENSORS + 1;
    Hetps__TensorRef *r = calloc(n, sizeof *r);
    Hetps__TensorRef **pr = calloc(n, sizeof *pr);

    CU_ASSERT_FATAL(r && pr);
    for (size_t i = 0; i < n; i++) {
        hetps__tensor_ref__init(&r[i]);
        r[i].length = 1;
        r[i].offset = i;
        pr[i] = &r[i];
    }
    f->tref = pr;
    f->n_tref = n;
    f->heap[0] = r;
    f->heap[1] = pr;
}
static void m_pull_tensors(struct fx *f)
{
    fx_tensor(f, 0, 0, 2);
    f->n_tref = f->n_refs;
}
static void m_range0(struct fx *f) { f->ranges[1].length = 0; }
static void m_range_offset(struct fx *f) { f->ranges[0].offset = UINT64_MAX; }
static void m_many_ranges(struct fx *f)
{
    size_t n = HC_WIRE_MAX_TENSORS + 1;
    Hetps__Range *r = calloc(n, sizeof *r);
    Hetps__Range **pr = calloc(n, sizeof *pr);

    CU_ASSERT_FATAL(r && pr);
    for (size_t i = 0; i < n; i++) {
        hetps__range__init(&r[i]);
        r[i].length = 1;
        pr[i] = &r[i];
    }
    f->pull.ranges = pr;
    f->pull.n_ranges = n;
    f->heap[0] = r;
    f->heap[1] = pr;
}
static void m_samples0(struct fx *f) { f->push.samples = 0; }
static void m_host_long(struct fx *f) { f->join.host = f->text; }
static void m_err_text(struct fx *f) { f->error.message = f->text; }
static void m_err_code(struct fx *f) { f->error.code = (Hetps__ErrorCode)99; }
static void m_shard_index(struct fx *f) { f->join_reply.shard_index = 2; }
static void m_member_job(struct fx *f) { f->mtasks[1].job = (Hetps__Job)9; }
static void m_member_state(struct fx *f) { f->members[0].state = f->text; }
static void m_mode_long(struct fx *f) { f->status_reply.mode = f->text; }
static void m_many_members(struct fx *f)
{
    size_t n = HC_WIRE_MAX_MEMBERS + 1;
    Hetps__Member *mm = calloc(n, sizeof *mm);
    Hetps__Member **pm = calloc(n, sizeof *pm);
    Hetps__Task *t = calloc(n, sizeof *t);

    CU_ASSERT_FATAL(mm && pm && t);
    for (size_t i = 0; i < n; i++) {
        fx_member(&mm[i], &t[i], (uint32_t)i, "joined");
        pm[i] = &mm[i];
    }
    f->status_reply.members = pm;
    f->status_reply.n_members = n;
    f->heap[0] = mm;
    f->heap[1] = pm;
    f->heap[2] = t;
}

/* After framing: flip one data byte of the second tensor. */
static void p_flip_data(uint8_t *buf, size_t len) { buf[len - 3] ^= 0x10; }

static void test_decode_checks(void)
{
    static const struct {
        const char *what;
        Hetps__Envelope__PayloadCase pc;
        void (*mut)(struct fx *);
        void (*post)(uint8_t *, size_t);
        int code;
        const char *frag;
    } rows[] = {
        {"wrong version", HETPS__ENVELOPE__PAYLOAD_HEARTBEAT, m_version, NULL,
         HC_ERR_VERSION, "protocol version 3 but this program speaks version 2"},
        {"wrong cluster", HETPS__ENVELOPE__PAYLOAD_HEARTBEAT, m_cluster, NULL,
         HC_ERR_CLUSTER, "cluster 000000000000dead but this is cluster "
                         "0123456789abcdef"},
        {"bad job enum", HETPS__ENVELOPE__PAYLOAD_HEARTBEAT, m_job, NULL,
         HC_ERR_PROTO, "sender has unknown job 7"},
        {"no sender", HETPS__ENVELOPE__PAYLOAD_HEARTBEAT, m_no_sender, NULL,
         HC_ERR_PROTO, "missing a required field"},
        {"no payload", HETPS__ENVELOPE__PAYLOAD_PUSH, m_no_payload, NULL,
         HC_ERR_PROTO, "has no payload"},
        {"too many tensors", HETPS__ENVELOPE__PAYLOAD_PUSH, m_many_tensors, NULL,
         HC_ERR_LIMIT, "push carries 65537 tensors, over the limit of 65536"},
        {"tensor length 0", HETPS__ENVELOPE__PAYLOAD_PUSH, m_len0, NULL,
         HC_ERR_PROTO, "tensor 0 (key 0) has length 0"},
        {"tensor length over", HETPS__ENVELOPE__PAYLOAD_PUSH, m_len_big, NULL,
         HC_ERR_LIMIT, "tensor 1 (key 1) has length 67108865, over the limit"},
        {"tensor offset overflow", HETPS__ENVELOPE__PAYLOAD_PUSH, m_offset, NULL,
         HC_ERR_LIMIT, "offset 18446744073709551613 + length 5 runs past"},
        {"data too short", HETPS__ENVELOPE__PAYLOAD_PUSH, m_short, NULL,
         HC_ERR_PROTO, "data section is 28 bytes but the 2 tensors need 32"},
        {"data too long", HETPS__ENVELOPE__PAYLOAD_PUSH, m_long, NULL,
         HC_ERR_PROTO, "data section is 36 bytes but the 2 tensors need 32"},
        {"bad crc", HETPS__ENVELOPE__PAYLOAD_PUSH, NULL, p_flip_data,
         HC_ERR_CRC, "tensor 1 (key 1, offset 10, 5 elements): CRC32C"},
        {"tensors on pull", HETPS__ENVELOPE__PAYLOAD_PULL, m_pull_tensors, NULL,
         HC_ERR_PROTO, "pull carries 1 tensors but only push, create and ack"},
        {"name characters", HETPS__ENVELOPE__PAYLOAD_CREATE, m_name_chars, NULL,
         HC_ERR_PROTO, "variable 1 \"dense…\" has byte 0x0a at position 5"},
        {"name climbs", HETPS__ENVELOPE__PAYLOAD_CREATE, m_name_climb, NULL,
         HC_ERR_PROTO, "variable 0 \"../../x\" has a part \"..\""},
        {"name absolute", HETPS__ENVELOPE__PAYLOAD_CREATE, m_name_abs, NULL,
         HC_ERR_PROTO, "has an empty part"},
        {"name dot part", HETPS__ENVELOPE__PAYLOAD_CREATE, m_name_dot, NULL,
         HC_ERR_PROTO, "has a part \".\""},
        {"name double slash", HETPS__ENVELOPE__PAYLOAD_CREATE, m_name_slash2,
         NULL, HC_ERR_PROTO, "has an empty part"},
        {"name empty", HETPS__ENVELOPE__PAYLOAD_CREATE, m_name_empty, NULL,
         HC_ERR_PROTO, "variable 0 has an empty name"},
        {"name too long", HETPS__ENVELOPE__PAYLOAD_CREATE, m_name_long, NULL,
         HC_ERR_LIMIT, "is longer than 128 bytes"},
        {"empty shape", HETPS__ENVELOPE__PAYLOAD_CREATE, m_shape_empty, NULL,
         HC_ERR_PROTO, "variable 1 (dense/bias) has an empty shape"},
        {"zero dim", HETPS__ENVELOPE__PAYLOAD_CREATE, m_shape_zero, NULL,
         HC_ERR_PROTO, "variable 0 (dense/kernel) has dimension 1 of size 0"},
        {"shape overflow", HETPS__ENVELOPE__PAYLOAD_CREATE, m_shape_ovf, NULL,
         HC_ERR_LIMIT, "has more elements than the limit of 17179869184"},
        {"too many dims", HETPS__ENVELOPE__PAYLOAD_CREATE, m_shape_dims, NULL,
         HC_ERR_LIMIT, "has 9 dimensions, over the limit of 8"},
        {"too many vars", HETPS__ENVELOPE__PAYLOAD_CREATE, m_many_vars, NULL,
         HC_ERR_LIMIT, "create lists 4097 variables"},
        {"create key unknown", HETPS__ENVELOPE__PAYLOAD_CREATE, m_create_key,
         NULL, HC_ERR_PROTO, "has key 5 but only 2 variables"},
        {"create outside var", HETPS__ENVELOPE__PAYLOAD_CREATE,
         m_create_outside, NULL, HC_ERR_PROTO,
         "elements 1..7 lie outside the variable's 6"},
        {"block_elems 0", HETPS__ENVELOPE__PAYLOAD_CREATE, m_block0, NULL,
         HC_ERR_PROTO, "block_elems 0"},
        {"range length 0", HETPS__ENVELOPE__PAYLOAD_PULL, m_range0, NULL,
         HC_ERR_PROTO, "range 1 (key 1) has length 0"},
        {"range offset overflow", HETPS__ENVELOPE__PAYLOAD_PULL, m_range_offset,
         NULL, HC_ERR_LIMIT, "range 0 (key 0): offset 18446744073709551615"},
        {"too many ranges", HETPS__ENVELOPE__PAYLOAD_PULL, m_many_ranges, NULL,
         HC_ERR_LIMIT, "pull asks for 65537 ranges"},
        {"push samples 0", HETPS__ENVELOPE__PAYLOAD_PUSH, m_samples0, NULL,
         HC_ERR_PROTO, "samples 0"},
        {"text too long", HETPS__ENVELOPE__PAYLOAD_JOIN, m_host_long, NULL,
         HC_ERR_LIMIT, "join host is longer than 4096 bytes"},
        {"error text too long", HETPS__ENVELOPE__PAYLOAD_ERROR, m_err_text, NULL,
         HC_ERR_LIMIT, "error message is longer than 4096 bytes"},
        {"error code enum", HETPS__ENVELOPE__PAYLOAD_ERROR, m_err_code, NULL,
         HC_ERR_PROTO, "unknown code 99"},
        {"shard index", HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY, m_shard_index, NULL,
         HC_ERR_PROTO, "join_reply names shard 2 of 2"},
        {"member job enum", HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY, m_member_job,
         NULL, HC_ERR_PROTO, "join_reply member 1 has unknown job 9"},
        {"member state long", HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY,
         m_member_state, NULL, HC_ERR_LIMIT, "member 0 state is longer"},
        {"mode too long", HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY, m_mode_long,
         NULL, HC_ERR_LIMIT, "status_reply mode is longer than 4096"},
        {"too many members", HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY,
         m_many_members, NULL, HC_ERR_LIMIT,
         "status_reply lists 65537 members, over the limit of 65536"},
    };
    struct fx *f = malloc(sizeof *f);

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        struct hc_wire_msg m;
        size_t len;
        uint8_t *buf;

        fx_init(f, rows[r].pc);
        /* Unmutated, the same frame decodes: the row tests one thing. */
        buf = fx_frame(f, &len);
        CU_ASSERT_EQUAL(hc_wire_decode(buf, len, CLUSTER, &m), HC_OK);
        hc_wire_msg_free(&m);
        free(buf);
        if (rows[r].mut)
            rows[r].mut(f);
        buf = fx_frame(f, &len);
        if (rows[r].post)
            rows[r].post(buf, len);
        expect_err(rows[r].what, hc_wire_decode(buf, len, CLUSTER, &m),
                   rows[r].code, rows[r].frag);
        CU_ASSERT_PTR_NULL(m.env);
        CU_ASSERT_PTR_NULL(m.data);
        free(buf);
        fx_done(f);
    }
    free(f);
}

/* The cluster check is skipped when the receiver expects none (0). */
static void test_decode_any_cluster(void)
{
    struct fx *f = malloc(sizeof *f);
    struct hc_wire_msg m;
    size_t len;
    uint8_t *buf;

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fx_init(f, HETPS__ENVELOPE__PAYLOAD_STATUS);
    f->env.cluster_id = 0xDEAD;
    buf = fx_frame(f, &len);
    CU_ASSERT_EQUAL(hc_wire_decode(buf, len, 0, &m), HC_OK);
    hc_wire_msg_free(&m);
    free(buf);
    free(f);
}

/* A push's first NaN or ±Inf is found with its CRC32C, in one pass, in
 * any chunk of any tensor; other kinds are not looked at. */
static void test_decode_nonfinite(void)
{
    enum { A = 10, B = 20000 };         /* B spans several chunks */
    static float a[A], b[B];
    struct hc_tensor_src t[2] = {{1, 0, A, a}, {2, 0, B, b}};
    Hetps__Push push = HETPS__PUSH__INIT;
    Hetps__Ack ack = HETPS__ACK__INIT;
    Hetps__Envelope env;
    struct hc_wire_msg m;
    const struct { int tensor, elem; float v; } cases[] = {
        {-1, 0, 0.0f}, {0, 3, NAN}, {1, 0, INFINITY}, {1, 7000, -INFINITY},
        {1, B - 1, NAN},
    };
    nng_msg *msg;

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int i = 0; i < A; i++)
            a[i] = (float)i;
        for (int i = 0; i < B; i++)
            b[i] = 0.5f * (float)i;
        if (cases[c].tensor == 0)
            a[cases[c].elem] = cases[c].v;
        if (cases[c].tensor == 1) {
            b[cases[c].elem] = cases[c].v;
            b[B - 1] = NAN;             /* a later one is not the first */
        }
        push.samples = 1;
        hc_wire_init_env(&env, &worker1, 1);
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
        env.push = &push;
        CU_ASSERT_EQUAL_FATAL(hc_wire_encode(&msg, &env, t, 2), HC_OK);
        CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(msg),
                                             nng_msg_len(msg), CLUSTER, &m),
                              HC_OK);
        CU_ASSERT_EQUAL(m.finite_checked, 1);
        if (cases[c].tensor < 0) {
            CU_ASSERT_EQUAL(m.nonfinite_t, 2);
        } else {
            CU_ASSERT_EQUAL(m.nonfinite_t, (size_t)cases[c].tensor);
            CU_ASSERT_EQUAL(m.nonfinite_e, (uint32_t)cases[c].elem);
        }
        hc_wire_msg_free(&m);
        nng_msg_free(msg);
    }
    /* An answer's values are not a gradient: not looked at. */
    hc_wire_init_env(&env, &worker1, 2);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_ACK;
    env.ack = &ack;
    CU_ASSERT_EQUAL_FATAL(hc_wire_encode(&msg, &env, t, 2), HC_OK);
    CU_ASSERT_EQUAL(hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg),
                                   CLUSTER, &m), HC_OK);
    CU_ASSERT_EQUAL(m.finite_checked, 0);
    hc_wire_msg_free(&m);
    nng_msg_free(msg);
}

/* A body at an odd address: refused when it carries tensors. */
static void test_decode_misaligned(void)
{
    static const Hetps__Envelope__PayloadCase kinds[] = {
        HETPS__ENVELOPE__PAYLOAD_PUSH, HETPS__ENVELOPE__PAYLOAD_HEARTBEAT};
    struct fx *f = malloc(sizeof *f);

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (size_t k = 0; k < 2; k++) {
        struct hc_wire_msg m;
        size_t len;
        uint8_t *buf, *odd;

        fx_init(f, kinds[k]);
        buf = fx_frame(f, &len);
        odd = malloc(len + 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(odd);
        memcpy(odd + 1, buf, len);
        if (k == 0)
            expect_err("misaligned push", hc_wire_decode(odd + 1, len, CLUSTER,
                                                         &m),
                       HC_ERR_PROTO, "is not 4-byte aligned");
        else
            CU_ASSERT_EQUAL(hc_wire_decode(odd + 1, len, CLUSTER, &m), HC_OK);
        hc_wire_msg_free(&m);
        free(odd);
        free(buf);
    }
    free(f);
}

/* ---- fuzz ---- */

/*
 * 2000 deterministic mutations (bit flips, truncations, header-length
 * rewrites) of valid messages: each decodes or is refused with a frame
 * code, never crashes (run under ASan in the SANITIZE build).
 */
static void test_fuzz(void)
{
    static const Hetps__Envelope__PayloadCase bases[] = {
        HETPS__ENVELOPE__PAYLOAD_CREATE, HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY,
        HETPS__ENVELOPE__PAYLOAD_PULL};
    struct fx *f = malloc(sizeof *f);
    uint8_t *orig[3];
    size_t olen[3];
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int decoded = 0, refused = 0, bad = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (size_t b = 0; b < 3; b++) {
        fx_init(f, bases[b]);
        orig[b] = fx_frame(f, &olen[b]);
    }
    for (int it = 0; it < 2000; it++) {
        size_t b = (size_t)it % 3, len = olen[b], hlen;
        uint8_t *buf;
        struct hc_wire_msg m;
        int rv, op;

        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        op = (int)(x % 4);
        hlen = 4 + ((size_t)orig[b][0] | (size_t)orig[b][1] << 8);
        if (op == 1) /* truncate */
            len = (size_t)(x >> 8) % len;
        buf = malloc(len ? len : 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
        memcpy(buf, orig[b], len);
        if (op == 0 || op == 2) { /* flip 1-4 bits; op 2: in the header */
            int flips = 1 + (int)((x >> 4) % 4);

            for (int i = 0; i < flips; i++) {
                uint64_t y = x >> (10 + 9 * i);
                size_t at = op == 2 ? 4 + (size_t)y % (hlen - 4) : (size_t)y % len;

                buf[at] ^= (uint8_t)(1u << ((y >> 20) % 8));
            }
        } else if (op == 3) { /* rewrite the header length */
            buf[0] = (uint8_t)(x >> 16);
            buf[1] = (uint8_t)((x >> 40) % 3);
        }
        rv = hc_wire_decode(buf, len, CLUSTER, &m);
        if (rv == HC_OK) {
            decoded++;
            CU_ASSERT_PTR_NOT_NULL(m.env);
            for (size_t i = 0; i < m.n_tensors; i++)
                bad += m.data[i] == NULL;
        } else if (rv == HC_ERR_PROTO || rv == HC_ERR_LIMIT ||
                   rv == HC_ERR_VERSION || rv == HC_ERR_CLUSTER ||
                   rv == HC_ERR_CRC) {
            refused++;
            bad += m.env != NULL || hc_err_msg()[0] == '\0';
        } else {
            printf("\n  fuzz %d: unexpected %d %s\n", it, rv, hc_err_msg());
            bad++;
        }
        hc_wire_msg_free(&m);
        free(buf);
    }
    printf("\n  fuzz: %d decoded, %d refused\n", decoded, refused);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(decoded + refused, 2000);
    CU_ASSERT(refused > 1000);
    for (size_t b = 0; b < 3; b++)
        free(orig[b]);
    free(f);
}

/* ---- row-sparse tables: pull_rows and push_rows ---- */

/* A pull_rows of ids[0 .. n) (the ids tensor's length `words`, its key
 * `key`) or, with grad, a push_rows of one table; encoded, then decoded:
 * the first refusal's code (HC_OK when both pass), *out decoded. */
static int rows_msg(int push, uint32_t key, uint32_t dim, const uint64_t *ids,
                    uint32_t n, uint32_t words, uint32_t samples,
                    struct hc_wire_msg *out, nng_msg **msg)
{
    Hetps__Envelope env;
    Hetps__PullRows pull = HETPS__PULL_ROWS__INIT;
    Hetps__PushRows pr = HETPS__PUSH_ROWS__INIT;
    Hetps__RowsRef ref = HETPS__ROWS_REF__INIT, *refs[1] = {&ref};
    static float grad[64 * 4];
    struct hc_tensor_src t[2] = {{key, 0, words, (const float *)ids},
                                 {key, 0, n * dim, grad}};
    int rv;

    memset(out, 0, sizeof *out);
    *msg = NULL;
    ref.key = 7;
    ref.n = n;
    ref.dim = dim;
    hc_wire_init_env(&env, &worker1, 5);
    if (push) {
        pr.samples = samples;
        pr.n_tables = 1;
        pr.tables = refs;
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS;
        env.push_rows = &pr;
    } else {
        pull.n_tables = 1;
        pull.tables = refs;
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PULL_ROWS;
        env.pull_rows = &pull;
    }
    if ((rv = hc_wire_encode(msg, &env, t, words ? (push ? 2 : 1) : 0)))
        return rv;
    return hc_wire_decode(nng_msg_body(*msg), nng_msg_len(*msg), CLUSTER,
                          out);
}

static void test_rows(void)
{
    static const uint64_t good[] = {0, 3, 1ull << 40, (1ull << 62) - 1};
    static const uint64_t unsorted[] = {5, 3}, twice[] = {5, 5};
    static const uint64_t big[] = {1, 1ull << 62};
    struct hc_wire_msg m;
    nng_msg *msg;
    int rv;

    /* A pull of ids up to 2^62 − 1, read back exactly; a push of them. */
    CU_ASSERT_EQUAL_FATAL(rows_msg(0, 7, 4, good, 4, 8, 0, &m, &msg), HC_OK);
    CU_ASSERT_EQUAL(m.env->pull_rows->n_tables, 1);
    CU_ASSERT_EQUAL(m.env->pull_rows->tables[0]->n, 4);
    for (uint32_t j = 0; j < 4; j++)
        CU_ASSERT_EQUAL(hc_wire_row_id(m.data[0], j), good[j]);
    hc_wire_msg_free(&m);
    nng_msg_free(msg);
    CU_ASSERT_EQUAL(rows_msg(1, 7, 4, good, 4, 8, 2, &m, &msg), HC_OK);
    CU_ASSERT_EQUAL(m.n_tensors, 2);
    hc_wire_msg_free(&m);
    nng_msg_free(msg);
    /* A pull of no ids carries no tensor. */
    CU_ASSERT_EQUAL(rows_msg(0, 7, 4, NULL, 0, 0, 0, &m, &msg), HC_OK);
    hc_wire_msg_free(&m);
    nng_msg_free(msg);

    /* Two tables in one push (ids and gradients each), and the same table
     * twice refused. */
    {
        Hetps__Envelope env;
        Hetps__PushRows pr = HETPS__PUSH_ROWS__INIT;
        Hetps__RowsRef r0 = HETPS__ROWS_REF__INIT, r1 = HETPS__ROWS_REF__INIT;
        Hetps__RowsRef *refs[2] = {&r0, &r1};
        static const float g[16];
        struct hc_tensor_src t[4] = {{2, 0, 8, (const float *)good},
                                     {2, 0, 8, g},
                                     {5, 0, 4, NULL},
                                     {5, 0, 4, g}};

        r0.key = 2;
        r0.n = 4;
        r0.dim = 2;
        r1.key = 5;
        r1.n = 2;
        r1.dim = 2;
        t[2].data = (const float *)big;     /* 1, 2^62: refused below */
        pr.samples = 3;
        pr.n_tables = 2;
        pr.tables = refs;
        hc_wire_init_env(&env, &worker1, 9);
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS;
        env.push_rows = &pr;
        CU_ASSERT_EQUAL_FATAL(hc_wire_encode(&msg, &env, t, 4), HC_OK);
        expect_err("second table's ids",
                   hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg),
                                  CLUSTER, &m),
                   HC_ERR_PROTO, "rows of variable 5: id 4611686018427387904");
        nng_msg_free(msg);
        t[2].data = (const float *)good;    /* 0, 3: ascending */
        CU_ASSERT_EQUAL_FATAL(hc_wire_encode(&msg, &env, t, 4), HC_OK);
        CU_ASSERT_EQUAL(hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg),
                                       CLUSTER, &m), HC_OK);
        CU_ASSERT_EQUAL(m.n_tensors, 4);
        hc_wire_msg_free(&m);
        nng_msg_free(msg);
        r1.key = 2;
        t[2].key = t[3].key = 2;
        expect_err("twice", hc_wire_encode(&msg, &env, t, 4), HC_ERR_PROTO,
                   "push_rows names variable 2 twice");
    }

    /* Refusals, each naming what is wrong. */
    static const struct {
        const char *what;
        int push;
        uint32_t key, dim;
        const uint64_t *ids;
        uint32_t n, words, samples;
        int rv;
        const char *frag;
    } bad[] = {
        {"unsorted", 0, 7, 4, unsorted, 2, 4, 0, HC_ERR_PROTO,
         "ascending and unique"},
        {"repeated", 1, 7, 4, twice, 2, 4, 1, HC_ERR_PROTO,
         "id 5 at position 1"},
        {"2^62", 0, 7, 4, big, 2, 4, 0, HC_ERR_PROTO, "not below 2^62"},
        {"count", 0, 7, 4, good, 4, 6, 0, HC_ERR_PROTO,
         "must be (key 7, offset 0, length 8)"},
        {"key", 0, 8, 4, good, 4, 8, 0, HC_ERR_PROTO, "(key 8, offset 0"},
        {"dim 0", 0, 7, 0, good, 4, 8, 0, HC_ERR_PROTO, "have dim 0"},
        {"samples 0", 1, 7, 4, good, 4, 8, 0, HC_ERR_PROTO, "samples 0"},
        {"push of none", 1, 7, 4, NULL, 0, 0, 1, HC_ERR_LIMIT,
         "at least one id"},
        {"ids missing", 0, 7, 4, good, 4, 0, 0, HC_ERR_PROTO,
         "carries 0 tensors; its tables need 1"},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rv = rows_msg(bad[i].push, bad[i].key, bad[i].dim, bad[i].ids,
                      bad[i].n, bad[i].words, bad[i].samples, &m, &msg);
        expect_err(bad[i].what, rv, bad[i].rv, bad[i].frag);
        CU_ASSERT_PTR_NULL(m.env);
        nng_msg_free(msg);
    }
}

/* An init_rows of `n_tables` (0 or 1) table 7 of dim 2 with ids[0 .. n)
 * and `tensors` tensors; done as given. Encoded (*msg, which *out reads:
 * the caller frees both), then decoded: the first refusal's code (HC_OK
 * when both pass). */
static int init_rows_msg(size_t n_tables, const uint64_t *ids, uint32_t n,
                         size_t tensors, int done, struct hc_wire_msg *out,
                         nng_msg **msg)
{
    Hetps__Envelope env;
    Hetps__InitRows ir = HETPS__INIT_ROWS__INIT;
    Hetps__RowsRef ref = HETPS__ROWS_REF__INIT, *refs[1] = {&ref};
    static const float rows[8 * 2];
    struct hc_tensor_src t[2] = {{7, 0, 2 * n, (const float *)ids},
                                 {7, 0, 2 * n, rows}};
    int rv;

    memset(out, 0, sizeof *out);
    *msg = NULL;
    ref.key = 7;
    ref.n = n;
    ref.dim = 2;
    ir.n_tables = n_tables;
    ir.tables = refs;
    ir.has_done = ir.done = done;
    hc_wire_init_env(&env, &worker1, 6);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_INIT_ROWS;
    env.init_rows = &ir;
    if ((rv = hc_wire_encode(msg, &env, t, tensors)) == HC_OK)
        rv = hc_wire_decode(nng_msg_body(*msg), nng_msg_len(*msg), CLUSTER,
                            out);
    return rv;
}

/* The chief's initial rows: a table's ids and values, as a push_rows; no
 * table (the question, or done) carries nothing; ids out of order and a
 * table without its tensors refused. */
static void test_init_rows(void)
{
    static const uint64_t good[] = {1, 4, 9}, unsorted[] = {4, 1};
    struct hc_wire_msg m;
    nng_msg *msg;

    CU_ASSERT_EQUAL_FATAL(init_rows_msg(1, good, 3, 2, 0, &m, &msg), HC_OK);
    CU_ASSERT_EQUAL(m.n_tensors, 2);
    CU_ASSERT_EQUAL(hc_wire_row_id(m.data[0], 2), 9);
    CU_ASSERT_STRING_EQUAL(hc_wire_payload_name(m.env->payload_case),
                           "init_rows");
    hc_wire_msg_free(&m);
    nng_msg_free(msg);
    CU_ASSERT_EQUAL_FATAL(init_rows_msg(0, NULL, 0, 0, 1, &m, &msg), HC_OK);
    CU_ASSERT_TRUE(m.env->init_rows->done);
    hc_wire_msg_free(&m);
    nng_msg_free(msg);
    expect_err("unsorted", init_rows_msg(1, unsorted, 2, 2, 0, &m, &msg),
               HC_ERR_PROTO, "ascending and unique");
    nng_msg_free(msg);
    expect_err("no values", init_rows_msg(1, good, 3, 1, 0, &m, &msg),
               HC_ERR_PROTO, "carries 1 tensors; its tables need 2");
    nng_msg_free(msg);
    expect_err("a tensor and no table",
               init_rows_msg(0, good, 3, 1, 0, &m, &msg), HC_ERR_LIMIT,
               "names 0 tables");
    nng_msg_free(msg);
}

/* ---- a step's push with rows (Push.rows_grad, rows_pull) ---- */

/* A push of one dense block (key 0, 4 floats), the rows' gradients of
 * table 2 (dim 2) and the rows to pull of table 3 (dim 2), as a worker's
 * click-through step sends it; `mut` changes it before encoding. */
struct push_rows_fx {
    Hetps__Envelope env;
    Hetps__Push push;
    Hetps__Range range, *ranges[1];
    Hetps__RowsRef grad, pull, *grads[1], *pulls[HC_WIRE_MAX_TABLES + 1];
    uint64_t grad_ids[3], pull_ids[2];
    float dense[4], g[3 * 2];
    struct hc_tensor_src t[5];
    size_t nt;
};

static void push_rows_fx_init(struct push_rows_fx *f)
{
    static const uint64_t gi[3] = {1, 7, 1ull << 40}, pi[2] = {2, 9};

    memset(f, 0, sizeof *f);
    hc_wire_init_env(&f->env, &worker1, 11);
    hetps__push__init(&f->push);
    hetps__range__init(&f->range);
    f->range.key = 0;
    f->range.length = 4;
    f->ranges[0] = &f->range;
    hetps__rows_ref__init(&f->grad);
    hetps__rows_ref__init(&f->pull);
    f->grad.key = 2;
    f->grad.n = 3;
    f->grad.dim = 2;
    f->pull.key = 3;
    f->pull.n = 2;
    f->pull.dim = 2;
    f->grads[0] = &f->grad;
    for (size_t k = 0; k <= HC_WIRE_MAX_TABLES; k++)
        f->pulls[k] = &f->pull;
    memcpy(f->grad_ids, gi, sizeof gi);
    memcpy(f->pull_ids, pi, sizeof pi);
    for (int i = 0; i < 4; i++)
        f->dense[i] = 0.5f * (float)i;
    for (int i = 0; i < 6; i++)
        f->g[i] = (float)i - 2.5f;
    f->push.samples = 4;
    f->push.n_ranges = 1;
    f->push.ranges = f->ranges;
    f->push.n_rows_grad = 1;
    f->push.rows_grad = f->grads;
    f->push.n_rows_pull = 1;
    f->push.rows_pull = f->pulls;
    f->t[0] = (struct hc_tensor_src){0, 0, 4, f->dense};
    f->t[1] = (struct hc_tensor_src){2, 0, 6, (const float *)f->grad_ids};
    f->t[2] = (struct hc_tensor_src){2, 0, 6, f->g};
    f->t[3] = (struct hc_tensor_src){3, 0, 4, (const float *)f->pull_ids};
    f->nt = 4;
    f->env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
    f->env.push = &f->push;
}

/* f encoded, then decoded: the first refusal's code (HC_OK: both
 * passed, *out decoded; the caller frees *out and *msg). */
static int push_rows_code(struct push_rows_fx *f, struct hc_wire_msg *out,
                          nng_msg **msg)
{
    int rv;

    memset(out, 0, sizeof *out);
    *msg = NULL;
    if ((rv = hc_wire_encode(msg, &f->env, f->t, f->nt)))
        return rv;
    return hc_wire_decode(nng_msg_body(*msg), nng_msg_len(*msg), CLUSTER,
                          out);
}

static void pr_parts(struct push_rows_fx *f)
{
    f->push.has_part = f->push.has_parts = 1;
    f->push.part = 0;
    f->push.parts = 2;
}
static void pr_pull_none(struct push_rows_fx *f) { f->pull.n = 0; f->nt = 3; }
static void pr_grad_dim0(struct push_rows_fx *f) { f->grad.dim = 0; }
static void pr_short(struct push_rows_fx *f) { f->nt = 2; }
static void pr_pull_key(struct push_rows_fx *f) { f->t[3].key = 9; }
static void pr_grad_len(struct push_rows_fx *f) { f->t[2].length = 4; }
static void pr_pull_twice(struct push_rows_fx *f)
{
    f->push.n_rows_pull = 2;
    f->t[4] = f->t[3];
    f->nt = 5;
}
static void pr_pull_many(struct push_rows_fx *f)
{
    f->push.n_rows_pull = HC_WIRE_MAX_TABLES + 1;
}
static void pr_pull_unsorted(struct push_rows_fx *f)
{
    f->pull_ids[0] = 9;
    f->pull_ids[1] = 2;
}
static void pr_grad_big(struct push_rows_fx *f)
{
    f->grad_ids[2] = 1ull << 62;
}

static void test_push_rows(void)
{
    struct push_rows_fx *f = malloc(sizeof *f);
    struct hc_wire_msg m;
    nng_msg *msg;

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    /* Read back: the dense block first, then the rows' tensors. */
    push_rows_fx_init(f);
    CU_ASSERT_EQUAL_FATAL(push_rows_code(f, &m, &msg), HC_OK);
    CU_ASSERT_EQUAL(m.n_tensors, 4);
    CU_ASSERT_EQUAL(hc_wire_push_dense(m.env->push, m.n_tensors), 1);
    CU_ASSERT(hc_wire_push_pulls(m.env->push));
    CU_ASSERT_EQUAL(m.env->push->rows_grad[0]->n, 3);
    CU_ASSERT_EQUAL(m.env->push->rows_pull[0]->key, 3);
    CU_ASSERT_EQUAL(hc_wire_row_id(m.data[1], 2), 1ull << 40);
    CU_ASSERT_EQUAL(hc_wire_row_id(m.data[3], 1), 9);
    CU_ASSERT_EQUAL(m.data[2][5], 2.5f);
    CU_ASSERT_EQUAL(m.nonfinite_t, m.n_tensors);
    hc_wire_msg_free(&m);
    nng_msg_free(msg);

    /* An id whose words read as a NaN is an id, not a non-finite value;
     * a NaN among the rows' gradients is found, in their tensor. */
    push_rows_fx_init(f);
    f->grad_ids[1] = 0x7fc00000u;
    f->pull_ids[1] = 0x7f800000u;
    CU_ASSERT_EQUAL_FATAL(push_rows_code(f, &m, &msg), HC_OK);
    CU_ASSERT_EQUAL(m.nonfinite_t, m.n_tensors);
    hc_wire_msg_free(&m);
    nng_msg_free(msg);
    push_rows_fx_init(f);
    f->g[3] = NAN;
    CU_ASSERT_EQUAL_FATAL(push_rows_code(f, &m, &msg), HC_OK);
    CU_ASSERT_EQUAL(m.nonfinite_t, 2);
    CU_ASSERT_EQUAL(m.nonfinite_e, 3);
    hc_wire_msg_free(&m);
    nng_msg_free(msg);

    /* Rows alone (a shard holding no block): a push-and-pull of rows. */
    push_rows_fx_init(f);
    f->push.n_ranges = 0;
    f->t[0] = f->t[1];
    f->t[1] = f->t[2];
    f->t[2] = f->t[3];
    f->nt = 3;
    CU_ASSERT_EQUAL_FATAL(push_rows_code(f, &m, &msg), HC_OK);
    CU_ASSERT_EQUAL(hc_wire_push_dense(m.env->push, m.n_tensors), 0);
    CU_ASSERT(hc_wire_push_pulls(m.env->push));
    hc_wire_msg_free(&m);
    nng_msg_free(msg);

    static const struct {
        const char *what;
        void (*mut)(struct push_rows_fx *);
        int code;
        const char *frag;
    } bad[] = {
        {"in parts", pr_parts, HC_ERR_PROTO,
         "rows ride only on a push of one part"},
        {"a pull of no ids", pr_pull_none, HC_ERR_LIMIT,
         "push rows_pull: rows of variable 3: 0 ids; a push's rows carry "
         "at least one id"},
        {"dim 0", pr_grad_dim0, HC_ERR_PROTO,
         "push rows_grad: rows of variable 2 have dim 0"},
        {"tensors missing", pr_short, HC_ERR_PROTO,
         "push carries 2 tensors but its rows"},
        {"pull ids' key", pr_pull_key, HC_ERR_PROTO,
         "tensor 3 is (key 9, offset 0, length 4) but its ids must be "
         "(key 3"},
        {"gradients' length", pr_grad_len, HC_ERR_PROTO,
         "its gradients must be (key 2, offset 0, length 6)"},
        {"a table twice", pr_pull_twice, HC_ERR_PROTO,
         "push rows_pull names variable 3 twice"},
        {"too many tables", pr_pull_many, HC_ERR_LIMIT,
         "push rows_pull names 65 tables; 1 to 64"},
        {"unsorted", pr_pull_unsorted, HC_ERR_PROTO,
         "rows of variable 3: id 2 at position 1 is not above"},
        {"2^62", pr_grad_big, HC_ERR_PROTO,
         "rows of variable 2: id 4611686018427387904 at position 2 is not "
         "below 2^62"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        push_rows_fx_init(f);
        bad[i].mut(f);
        expect_err(bad[i].what, push_rows_code(f, &m, &msg), bad[i].code,
                   bad[i].frag);
        CU_ASSERT_PTR_NULL(m.env);
        nng_msg_free(msg);
    }
    free(f);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("wire", NULL, NULL);

    CU_add_test(s, "crc32c RFC 3720 vectors", test_crc_vectors);
    CU_add_test(s, "crc32c hardware = table = bitwise", test_crc_paths_agree);
    CU_add_test(s, "incarnation non-zero, distinct", test_incarnation);
    CU_add_test(s, "init_env keeps each sender", test_init_env);
    CU_add_test(s, "payload names", test_payload_names);
    CU_add_test(s, "member state names, both ways", test_member_states);
    CU_add_test(s, "error code mapping", test_error_codes);
    CU_add_test(s, "error reply, truncation", test_error_reply);
    CU_add_test(s, "round trip of every payload kind", test_roundtrip_kinds);
    CU_add_test(s, "round trip 0/1/5/40 tensors, both paths",
                test_roundtrip_tensors);
    CU_add_test(s, "reserve without seal, seal errors", test_reserve_unsealed);
    CU_add_test(s, "encoder refuses invalid messages", test_encode_refuses);
    CU_add_test(s, "seal with known CRCs, redecode", test_seal_known_redecode);
    CU_add_test(s, "decode: frame sizes", test_decode_frame);
    CU_add_test(s, "decode: truncated message", test_decode_truncated);
    CU_add_test(s, "decode: random bytes", test_decode_random);
    CU_add_test(s, "decode: over the message limit", test_decode_too_big);
    CU_add_test(s, "decode: over its kind's limit", test_decode_kind_limit);
    CU_add_test(s, "decode: envelope checks", test_decode_checks);
    CU_add_test(s, "decode: cluster 0 accepts any", test_decode_any_cluster);
    CU_add_test(s, "decode: misaligned body", test_decode_misaligned);
    CU_add_test(s, "decode: a push's first NaN or Inf, found with its CRC",
                test_decode_nonfinite);
    CU_add_test(s, "decode: 2000 mutations", test_fuzz);
    CU_add_test(s, "rows: ids read back; out of order, repeated, too large, "
                   "miscounted refused", test_rows);
    CU_add_test(s, "init_rows: a table's ids and values, or none (the "
                "question, done); out of order, short refused",
                test_init_rows);
    CU_add_test(s, "push with rows: dense then rows read back, ids not "
                   "floats; parts, counts, keys, ids refused", test_push_rows);
}
