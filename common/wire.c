/*
 * wire.c — the hetps message frame: building outgoing nng messages with the
 * tensor data in place, and decoding + validating incoming ones.
 *
 * Frame: [u32 LE H][H bytes packed Envelope][zero pad to a multiple of 4]
 * [float32 data of env->tensors, in order, contiguous]. Only the Envelope is
 * protobuf (protobuf-c); TensorRef.crc32c is fixed32, so the packed header
 * has the same size whatever the checksums are, which lets hc_wire_seal
 * re-pack the header in place once the caller has written the data.
 *
 * Every check a receiver makes on the Envelope (sender, payload, tensor
 * spans, names, shapes, strings, counts) is one function, run by the
 * decoder and, so that a sender's mistake is reported at the sender, by the
 * encoder too. The decoder adds the frame checks (sizes, version, cluster,
 * data section size, alignment, CRC32C).
 */
#include "wire.h"
#include "name.h"
#include "err.h"
#include "rng.h"
#include "vec.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* TensorRefs kept on the stack by hc_wire_reserve before it allocates. */
#define WIRE_STACK_REFS 16

/* ---- small helpers ---- */

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* Offset of the data section for a header of h bytes. */
static size_t data_offset(size_t h)
{
    return (4 + h + 3) & ~(size_t)3;
}

static int job_known(int job)
{
    return job == HETPS__JOB__JOB_PS || job == HETPS__JOB__JOB_WORKER ||
           job == HETPS__JOB__JOB_CLIENT;
}

static int error_code_known(int code)
{
    return (code >= HETPS__ERROR_CODE__E_UNKNOWN &&
            code <= HETPS__ERROR_CODE__E_UNSUPPORTED) ||
           code == HETPS__ERROR_CODE__E_TASK_IN_USE ||
           code == HETPS__ERROR_CODE__E_FORBIDDEN;
}

static int payload_carries_tensors(Hetps__Envelope__PayloadCase c)
{
    return c == HETPS__ENVELOPE__PAYLOAD_PUSH ||
           c == HETPS__ENVELOPE__PAYLOAD_PULL_ROWS ||
           c == HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS ||
           c == HETPS__ENVELOPE__PAYLOAD_INIT_ROWS ||
           c == HETPS__ENVELOPE__PAYLOAD_CREATE ||
           c == HETPS__ENVELOPE__PAYLOAD_ACK;
}

const char *hc_wire_payload_name(Hetps__Envelope__PayloadCase c)
{
    switch (c) {
    case HETPS__ENVELOPE__PAYLOAD__NOT_SET: return "none";
    case HETPS__ENVELOPE__PAYLOAD_JOIN: return "join";
    case HETPS__ENVELOPE__PAYLOAD_HEARTBEAT: return "heartbeat";
    case HETPS__ENVELOPE__PAYLOAD_LEAVE: return "leave";
    case HETPS__ENVELOPE__PAYLOAD_CREATE: return "create";
    case HETPS__ENVELOPE__PAYLOAD_PULL: return "pull";
    case HETPS__ENVELOPE__PAYLOAD_PUSH: return "push";
    case HETPS__ENVELOPE__PAYLOAD_STATUS: return "status";
    case HETPS__ENVELOPE__PAYLOAD_SHUTDOWN: return "shutdown";
    case HETPS__ENVELOPE__PAYLOAD_ERROR: return "error";
    case HETPS__ENVELOPE__PAYLOAD_ACK: return "ack";
    case HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY: return "join_reply";
    case HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY: return "status_reply";
    case HETPS__ENVELOPE__PAYLOAD_PULL_ROWS: return "pull_rows";
    case HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS: return "push_rows";
    case HETPS__ENVELOPE__PAYLOAD_INIT_ROWS: return "init_rows";
    case HETPS__ENVELOPE__PAYLOAD_INIT_ROWS_REPLY: return "init_rows_reply";
    default: return "unknown";
    }
}

static const char *const member_state_names[] = {
    [HC_MEMBER_UNKNOWN] = "unknown",
    [HC_MEMBER_JOINED] = "joined",
    [HC_MEMBER_LEFT] = "left",
    [HC_MEMBER_DEAD] = "dead",
};

const char *hc_member_state_name(enum hc_member_state s)
{
    if ((unsigned)s >= sizeof member_state_names / sizeof *member_state_names)
        s = HC_MEMBER_UNKNOWN;
    return member_state_names[s];
}

enum hc_member_state hc_member_state_parse(const char *name)
{
    unsigned s;

    for (s = 0; name && s < sizeof member_state_names / sizeof *member_state_names;
         s++)
        if (!strcmp(name, member_state_names[s]))
            return (enum hc_member_state)s;
    return HC_MEMBER_UNKNOWN;
}

/* ---- identity ---- */

uint64_t hc_wire_new_incarnation(void)
{
    uint64_t v = 0;

    for (int tries = 0; v == 0 && tries < 8; tries++) {
        ssize_t got = getrandom(&v, sizeof v, 0);

        if (got != (ssize_t)sizeof v) {
            v = 0;
            if (got < 0 && errno == EINTR)
                continue;
            break;
        }
    }
    if (v == 0) { /* no getrandom: mix the clock and the pid (splitmix64) */
        struct timespec ts;
        uint64_t state;

        clock_gettime(CLOCK_REALTIME, &ts);
        state = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        state ^= (uint64_t)getpid() << 32;
        v = hc_splitmix64(&state);
        if (v == 0)
            v = 1;
    }
    return v;
}

/*
 * Envelope.sender is a pointer to a Task, but hc_wire_init_env can neither
 * allocate nor return an error. A process sends as very few identities
 * (one, a handful in tests), so each distinct (job, index) gets one
 * immutable Task in a static pool that lives as long as the process; a
 * thread remembers its last one to skip the lock. Should the pool ever
 * fill, the Task falls back to a per-thread slot (valid until the thread's
 * next hc_wire_init_env with another identity).
 */
#define TASK_POOL 256
static Hetps__Task task_pool[TASK_POOL];
static size_t task_pool_used;
static pthread_mutex_t task_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local Hetps__Task *task_last;
static _Thread_local Hetps__Task task_spill;

static Hetps__Task *task_intern(Hetps__Job job, uint32_t index)
{
    Hetps__Task *t = task_last;

    if (t && t->job == job && t->index == index)
        return t;
    t = NULL;
    pthread_mutex_lock(&task_pool_lock);
    for (size_t i = 0; i < task_pool_used && !t; i++)
        if (task_pool[i].job == job && task_pool[i].index == index)
            t = &task_pool[i];
    if (!t && task_pool_used < TASK_POOL) {
        t = &task_pool[task_pool_used++];
        hetps__task__init(t);
        t->job = job;
        t->index = index;
    }
    pthread_mutex_unlock(&task_pool_lock);
    if (!t) {
        t = &task_spill;
        hetps__task__init(t);
        t->job = job;
        t->index = index;
    }
    task_last = t;
    return t;
}

void hc_wire_init_env(Hetps__Envelope *env, const struct hc_sender *s,
                      uint64_t request_id)
{
    hetps__envelope__init(env);
    env->version = HC_WIRE_VERSION;
    env->request_id = request_id;
    if (!s)
        return;
    env->cluster_id = s->cluster_id;
    env->incarnation = s->incarnation;
    env->has_model_signature = s->model_signature != 0;
    env->model_signature = s->model_signature;
    env->sender = task_intern(s->job, s->index);
}

/* ---- validation shared by encoder and decoder ---- */

static int check_text(const char *s, const char *what)
{
    if (s && strnlen(s, HC_WIRE_MAX_TEXT + 1) > HC_WIRE_MAX_TEXT)
        return hc_err_set(HC_ERR_LIMIT, "%s is longer than %u bytes", what,
                          HC_WIRE_MAX_TEXT);
    return HC_OK;
}

/* A variable name becomes a store key, a file name (`hetps export`) and
 * log text: name.h's rule, checked before anything else reads it. */
static int check_var_name(size_t i, const char *name)
{
    char what[32];

    snprintf(what, sizeof what, "variable %zu", i);
    if (hc_name_check(name, HC_NAME_VARIABLE, what) != HC_OK)
        return hc_err_set(name && strnlen(name, HC_WIRE_MAX_NAME + 1) >
                          HC_WIRE_MAX_NAME ? HC_ERR_LIMIT : HC_ERR_PROTO,
                          "%s", hc_err_msg());
    return HC_OK;
}

/* Elements of a shape, or an error naming variable i. */
static int shape_elems(size_t i, const Hetps__VariableDef *v, uint64_t *elems)
{
    uint64_t p = 1;

    if (v->n_shape == 0)
        return hc_err_set(HC_ERR_PROTO, "variable %zu (%s) has an empty shape",
                          i, v->name);
    if (v->n_shape > HC_WIRE_MAX_DIMS)
        return hc_err_set(HC_ERR_LIMIT,
                          "variable %zu (%s) has %zu dimensions, over the limit "
                          "of %u", i, v->name, v->n_shape, HC_WIRE_MAX_DIMS);
    for (size_t d = 0; d < v->n_shape; d++) {
        if (v->shape[d] == 0)
            return hc_err_set(HC_ERR_PROTO,
                              "variable %zu (%s) has dimension %zu of size 0",
                              i, v->name, d);
        if (p > HC_WIRE_MAX_VAR_ELEMS / v->shape[d])
            return hc_err_set(HC_ERR_LIMIT,
                              "variable %zu (%s) has more elements than the "
                              "limit of %llu", i, v->name,
                              (unsigned long long)HC_WIRE_MAX_VAR_ELEMS);
        p *= v->shape[d];
    }
    if (v->has_moving_momentum &&
        !(v->moving_momentum >= 0.0f && v->moving_momentum < 1.0f))
        return hc_err_set(HC_ERR_PROTO, "variable %zu (%s) has moving "
                          "momentum %g; must be in [0, 1)", i, v->name,
                          (double)v->moving_momentum);
    if (v->moments_of_prev && (!v->has_moving_momentum || i == 0))
        return hc_err_set(HC_ERR_PROTO, "variable %zu (%s) pools moments with "
                          "the variable before it but is not a moving "
                          "statistic after one", i, v->name);
    *elems = p;
    return HC_OK;
}

/* A TensorRef or Range: length 1..MAX_TENSOR, end within MAX_VAR_ELEMS. */
static int check_span(const char *kind, size_t i, uint32_t key,
                      uint64_t offset, uint32_t length)
{
    if (length == 0)
        return hc_err_set(HC_ERR_PROTO, "%s %zu (key %u) has length 0", kind, i,
                          key);
    if (length > HC_WIRE_MAX_TENSOR)
        return hc_err_set(HC_ERR_LIMIT,
                          "%s %zu (key %u) has length %u, over the limit of %u "
                          "elements", kind, i, key, length, HC_WIRE_MAX_TENSOR);
    if (offset > HC_WIRE_MAX_VAR_ELEMS - length)
        return hc_err_set(HC_ERR_LIMIT,
                          "%s %zu (key %u): offset %llu + length %u runs past "
                          "the largest variable (%llu elements)", kind, i, key,
                          (unsigned long long)offset, length,
                          (unsigned long long)HC_WIRE_MAX_VAR_ELEMS);
    return HC_OK;
}

static int check_members(Hetps__Member *const *m, size_t n, const char *where)
{
    char what[64];
    int rv;

    if (n > HC_WIRE_MAX_MEMBERS)
        return hc_err_set(HC_ERR_LIMIT, "%s lists %zu members, over the limit "
                          "of %u", where, n, HC_WIRE_MAX_MEMBERS);
    for (size_t i = 0; i < n; i++) {
        if (!m[i]->task)
            return hc_err_set(HC_ERR_PROTO, "%s member %zu has no task", where,
                              i);
        if (!job_known(m[i]->task->job))
            return hc_err_set(HC_ERR_PROTO, "%s member %zu has unknown job %d",
                              where, i, (int)m[i]->task->job);
        snprintf(what, sizeof what, "%s member %zu state", where, i);
        if ((rv = check_text(m[i]->state, what)) != HC_OK)
            return rv;
        snprintf(what, sizeof what, "%s member %zu devices", where, i);
        if ((rv = check_text(m[i]->devices, what)) != HC_OK)
            return rv;
    }
    return HC_OK;
}

/* A row-sparse table's definition (VariableDef.table_rows set). */
static int check_table_def(size_t i, const Hetps__VariableDef *v)
{
    if (v->table_rows == 0 || v->table_rows > HC_WIRE_ROW_ID_LIMIT ||
        v->n_shape != 1 || v->shape[0] == 0 ||
        v->shape[0] > HC_WIRE_MAX_ROW_DIM || !v->table_init ||
        v->table_init->kind > 6 || v->table_init->mode > 2 ||
        v->table_init->dist > 2)
        return hc_err_set(HC_ERR_PROTO, "variable %zu (%s) is a row-sparse "
                          "table of %llu rows: it needs 1 to 2^62 rows, a "
                          "shape of one dimension (its output_dim, 1 to %u) "
                          "and a known initialiser", i, v->name,
                          (unsigned long long)v->table_rows,
                          HC_WIRE_MAX_ROW_DIM);
    return HC_OK;
}

static int check_create(const Hetps__Envelope *env)
{
    const Hetps__CreateVariables *c = env->create;
    uint64_t elems;
    int rv;

    if (c->n_vars > HC_WIRE_MAX_VARS)
        return hc_err_set(HC_ERR_LIMIT, "create lists %zu variables, over the "
                          "limit of %u", c->n_vars, HC_WIRE_MAX_VARS);
    for (size_t i = 0; i < c->n_vars; i++) {
        if ((rv = check_var_name(i, c->vars[i]->name)) != HC_OK)
            return rv;
        if (c->vars[i]->has_table_rows) {
            if ((rv = check_table_def(i, c->vars[i])) != HC_OK)
                return rv;
            continue;
        }
        if ((rv = shape_elems(i, c->vars[i], &elems)) != HC_OK)
            return rv;
    }
    if (c->block_elems == 0 || c->block_elems > HC_WIRE_MAX_TENSOR)
        return hc_err_set(HC_ERR_PROTO, "create has block_elems %u; it must be "
                          "1..%u", c->block_elems, HC_WIRE_MAX_TENSOR);
    /* The initial values must lie inside the variables defined here. */
    for (size_t i = 0; i < env->n_tensors; i++) {
        const Hetps__TensorRef *t = env->tensors[i];

        if (t->key >= c->n_vars)
            return hc_err_set(HC_ERR_PROTO, "create tensor %zu has key %u but "
                              "only %zu variables are defined", i, t->key,
                              c->n_vars);
        if (c->vars[t->key]->has_table_rows)
            return hc_err_set(HC_ERR_PROTO, "create tensor %zu names "
                              "variable %u (%s), a row-sparse table: tables "
                              "have no initial tensors", i, t->key,
                              c->vars[t->key]->name);
        if ((rv = shape_elems(t->key, c->vars[t->key], &elems)) != HC_OK)
            return rv;
        if (t->offset + t->length > elems) /* both bounded: no overflow */
            return hc_err_set(HC_ERR_PROTO, "create tensor %zu (key %u, %s): "
                              "elements %llu..%llu lie outside the variable's "
                              "%llu", i, t->key, c->vars[t->key]->name,
                              (unsigned long long)t->offset,
                              (unsigned long long)(t->offset + t->length),
                              (unsigned long long)elems);
    }
    return HC_OK;
}

/* The tensor a RowsRef's ids (or, with grad, its rows' gradients) must
 * travel as. */
static int check_rows_tensor(const Hetps__TensorRef *t, size_t i,
                             const Hetps__RowsRef *r, uint64_t length,
                             const char *what)
{
    if (t->key != r->key || t->offset != 0 || t->length != length)
        return hc_err_set(HC_ERR_PROTO, "rows of variable %u: tensor %zu is "
                          "(key %u, offset %llu, length %u) but its %s must "
                          "be (key %u, offset 0, length %llu)", r->key, i,
                          t->key, (unsigned long long)t->offset, t->length,
                          what, r->key, (unsigned long long)length);
    return HC_OK;
}

/*
 * Rows of one or more tables, their tensors from env->tensors[first] on:
 * a pull_rows's (per table with ids its ids; a table of n = 0 has none) or
 * a push_rows's (per table its ids and its gradients, n ≥ 1), `what`
 * naming them in errors; a push's rows_pull and rows_grad are the same
 * two with need_n (n ≥ 1 each). Counts, dims, keys once, and the tensors'
 * shapes; *used the tensors they take. The ids themselves are checked
 * with the data (check_row_ids).
 */
static int check_rows(const Hetps__Envelope *env, const char *what,
                      size_t first, size_t n_tables,
                      Hetps__RowsRef *const *r, int push, int need_n,
                      size_t *used)
{
    size_t want = 0;
    int rv;

    if (n_tables == 0 || n_tables > HC_WIRE_MAX_TABLES)
        return hc_err_set(HC_ERR_LIMIT, "%s names %zu tables; 1 to %u", what,
                          n_tables, HC_WIRE_MAX_TABLES);
    for (size_t k = 0; k < n_tables; k++) {
        if (r[k]->dim == 0 || r[k]->dim > HC_WIRE_MAX_ROW_DIM)
            return hc_err_set(HC_ERR_PROTO, "%s: rows of variable %u have "
                              "dim %u; 1 to %u", what, r[k]->key, r[k]->dim,
                              HC_WIRE_MAX_ROW_DIM);
        if ((uint64_t)r[k]->n * r[k]->dim > HC_WIRE_MAX_TENSOR ||
            ((push || need_n) && r[k]->n == 0))
            return hc_err_set(HC_ERR_LIMIT, "%s: rows of variable %u: %u ids "
                              "of %u floats; %s at most %u floats", what,
                              r[k]->key, r[k]->n, r[k]->dim,
                              push || need_n ? "at least one id and" : "",
                              HC_WIRE_MAX_TENSOR);
        for (size_t j = 0; j < k; j++)
            if (r[j]->key == r[k]->key)
                return hc_err_set(HC_ERR_PROTO, "%s names variable %u "
                                  "twice", what, r[k]->key);
        want += r[k]->n ? (push ? 2 : 1) : 0;
    }
    if (first > env->n_tensors || env->n_tensors - first < want)
        return hc_err_set(HC_ERR_PROTO, "%s: the message carries %zu "
                          "tensors; its tables need %zu from tensor %zu on",
                          what, env->n_tensors, want, first);
    for (size_t k = 0, i = first; k < n_tables; k++) {
        if (r[k]->n == 0)
            continue;
        if ((rv = check_rows_tensor(env->tensors[i], i, r[k],
                                    2 * (uint64_t)r[k]->n, "ids")))
            return rv;
        i++;
        if (push && (rv = check_rows_tensor(env->tensors[i], i, r[k],
                                            (uint64_t)r[k]->n * r[k]->dim,
                                            "gradients")))
            return rv;
        i += push;
    }
    *used = want;
    return HC_OK;
}

/* A rows payload (pull_rows, push_rows): its tables take every tensor. */
static int check_rows_payload(const Hetps__Envelope *env, size_t n_tables,
                              Hetps__RowsRef *const *r, int push)
{
    const char *what = hc_wire_payload_name(env->payload_case);
    size_t used = 0;
    int rv = check_rows(env, what, 0, n_tables, r, push, 0, &used);

    if (rv == HC_OK && used != env->n_tensors)
        return hc_err_set(HC_ERR_PROTO, "%s carries %zu tensors; its tables "
                          "need %zu", what, env->n_tensors, used);
    return rv;
}

int hc_wire_push_pulls(const Hetps__Push *p)
{
    return p->n_ranges > 0 || p->n_rows_pull > 0;
}

size_t hc_wire_push_dense(const Hetps__Push *p, size_t n_tensors)
{
    size_t rows = 2 * p->n_rows_grad + p->n_rows_pull;

    return n_tensors > rows ? n_tensors - rows : 0;
}

/* A push's row-sparse parts (Push.rows_grad, rows_pull), after its dense
 * tensors: on a push of one part only, each list's tables with ids, the
 * rows' tensors last. */
static int check_push_rows(const Hetps__Envelope *env)
{
    const Hetps__Push *p = env->push;
    size_t rows = 2 * p->n_rows_grad + p->n_rows_pull, dense, used;
    int rv;

    if (p->n_rows_grad == 0 && p->n_rows_pull == 0)
        return HC_OK;
    if (p->n_rows_grad > HC_WIRE_MAX_TABLES ||
        p->n_rows_pull > HC_WIRE_MAX_TABLES)
        return hc_err_set(HC_ERR_LIMIT, "push rows_%s names %zu tables; 1 "
                          "to %u", p->n_rows_grad > HC_WIRE_MAX_TABLES
                                       ? "grad" : "pull",
                          p->n_rows_grad > HC_WIRE_MAX_TABLES
                              ? p->n_rows_grad : p->n_rows_pull,
                          HC_WIRE_MAX_TABLES);
    /* Every table has its tensors (no n of 0), so that the dense ones
     * are told from the rows' by count (hc_wire_push_dense). */
    for (size_t k = 0; k < p->n_rows_grad + p->n_rows_pull; k++) {
        const Hetps__RowsRef *r = k < p->n_rows_grad
                                      ? p->rows_grad[k]
                                      : p->rows_pull[k - p->n_rows_grad];

        if (r->n == 0)
            return hc_err_set(HC_ERR_LIMIT, "push rows_%s: rows of variable "
                              "%u: 0 ids; a push's rows carry at least one "
                              "id a table", k < p->n_rows_grad ? "grad"
                                                               : "pull",
                              r->key);
    }
    if (p->has_parts && p->parts > 1)
        return hc_err_set(HC_ERR_PROTO, "push part %u of %u carries rows "
                          "(rows_grad, rows_pull): rows ride only on a push "
                          "of one part (a step in parts sends PushRows and "
                          "PullRows)", p->part, p->parts);
    if (env->n_tensors < rows)
        return hc_err_set(HC_ERR_PROTO, "push carries %zu tensors but its "
                          "rows (%zu tables of gradients, %zu to pull) need "
                          "%zu", env->n_tensors, p->n_rows_grad,
                          p->n_rows_pull, rows);
    dense = env->n_tensors - rows;
    if (p->n_rows_grad &&
        (rv = check_rows(env, "push rows_grad", dense, p->n_rows_grad,
                         p->rows_grad, 1, 1, &used)) != HC_OK)
        return rv;
    if (p->n_rows_pull &&
        (rv = check_rows(env, "push rows_pull", dense + 2 * p->n_rows_grad,
                         p->n_rows_pull, p->rows_pull, 0, 1, &used)) != HC_OK)
        return rv;
    return HC_OK;
}

static int check_payload(const Hetps__Envelope *env)
{
    int rv;

    switch (env->payload_case) {
    case HETPS__ENVELOPE__PAYLOAD_JOIN:
        if ((rv = check_text(env->join->devices, "join devices")) != HC_OK)
            return rv;
        return check_text(env->join->host, "join host");
    case HETPS__ENVELOPE__PAYLOAD_HEARTBEAT:
    case HETPS__ENVELOPE__PAYLOAD_LEAVE:
    case HETPS__ENVELOPE__PAYLOAD_STATUS:
    case HETPS__ENVELOPE__PAYLOAD_SHUTDOWN:
    case HETPS__ENVELOPE__PAYLOAD_ACK:
        return HC_OK;
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
        return check_create(env);
    case HETPS__ENVELOPE__PAYLOAD_PULL:
        if (env->pull->n_ranges > HC_WIRE_MAX_TENSORS)
            return hc_err_set(HC_ERR_LIMIT, "pull asks for %zu ranges, over "
                              "the limit of %u", env->pull->n_ranges,
                              HC_WIRE_MAX_TENSORS);
        for (size_t i = 0; i < env->pull->n_ranges; i++) {
            const Hetps__Range *r = env->pull->ranges[i];

            if ((rv = check_span("range", i, r->key, r->offset, r->length)))
                return rv;
        }
        return HC_OK;
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        if (env->push->samples == 0)
            return hc_err_set(HC_ERR_PROTO, "push has samples 0; a gradient "
                              "stands for at least one sample");
        if (env->push->n_ranges > HC_WIRE_MAX_TENSORS)
            return hc_err_set(HC_ERR_LIMIT, "push-and-pull asks for %zu "
                              "ranges, over the limit of %u",
                              env->push->n_ranges, HC_WIRE_MAX_TENSORS);
        for (size_t i = 0; i < env->push->n_ranges; i++) {
            const Hetps__Range *r = env->push->ranges[i];

            if ((rv = check_span("range", i, r->key, r->offset, r->length)))
                return rv;
        }
        return check_push_rows(env);
    case HETPS__ENVELOPE__PAYLOAD_PULL_ROWS:
        return check_rows_payload(env, env->pull_rows->n_tables,
                                  env->pull_rows->tables, 0);
    case HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS:
        if (env->push_rows->samples == 0)
            return hc_err_set(HC_ERR_PROTO, "push_rows has samples 0; a "
                              "gradient stands for at least one sample");
        return check_rows_payload(env, env->push_rows->n_tables,
                                  env->push_rows->tables, 1);
    case HETPS__ENVELOPE__PAYLOAD_INIT_ROWS:
        /* No table: the chief's question, or its last word (done). */
        if (env->init_rows->n_tables == 0 && env->n_tensors == 0)
            return HC_OK;
        return check_rows_payload(env, env->init_rows->n_tables,
                                  env->init_rows->tables, 1);
    case HETPS__ENVELOPE__PAYLOAD_INIT_ROWS_REPLY:
        return HC_OK;
    case HETPS__ENVELOPE__PAYLOAD_ERROR:
        if (!error_code_known(env->error->code))
            return hc_err_set(HC_ERR_PROTO, "error payload has unknown code %d",
                              (int)env->error->code);
        return check_text(env->error->message, "error message");
    case HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY:
        if (env->join_reply->n_shards == 0 ||
            env->join_reply->shard_index >= env->join_reply->n_shards)
            return hc_err_set(HC_ERR_PROTO, "join_reply names shard %u of %u",
                              env->join_reply->shard_index,
                              env->join_reply->n_shards);
        return check_members(env->join_reply->members,
                             env->join_reply->n_members, "join_reply");
    case HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY:
        if (!env->status_reply->shard || !job_known(env->status_reply->shard->job))
            return hc_err_set(HC_ERR_PROTO, "status_reply has no shard or an "
                              "unknown shard job");
        if ((rv = check_text(env->status_reply->mode, "status_reply mode")))
            return rv;
        return check_members(env->status_reply->members,
                             env->status_reply->n_members, "status_reply");
    case HETPS__ENVELOPE__PAYLOAD__NOT_SET:
        return hc_err_set(HC_ERR_PROTO, "message has no payload (not a join, "
                          "push, pull, …)");
    default:
        return hc_err_set(HC_ERR_PROTO, "message has unknown payload kind %d",
                          (int)env->payload_case);
    }
}

/*
 * Everything about an Envelope that does not depend on the frame: sender,
 * payload, tensor spans. On success *elems is the sum of tensor lengths.
 */
static int check_envelope(const Hetps__Envelope *env, uint64_t *elems)
{
    uint64_t sum = 0;
    int rv;

    if (!env->sender)
        return hc_err_set(HC_ERR_PROTO, "message has no sender");
    if (!job_known(env->sender->job))
        return hc_err_set(HC_ERR_PROTO, "sender has unknown job %d (known: 0 "
                          "ps, 1 worker, 2 client)", (int)env->sender->job);
    if ((env->payload_case < HETPS__ENVELOPE__PAYLOAD_JOIN ||
         env->payload_case > HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS) &&
        env->payload_case != HETPS__ENVELOPE__PAYLOAD_INIT_ROWS &&
        env->payload_case != HETPS__ENVELOPE__PAYLOAD_INIT_ROWS_REPLY)
        return check_payload(env); /* says "no payload" or "unknown" */
    if (!env->join) /* any member of the union: all are pointers */
        return hc_err_set(HC_ERR_PROTO, "%s payload is selected but not set",
                          hc_wire_payload_name(env->payload_case));
    if (env->has_lane && env->lane >= HC_MAX_LANES)
        return hc_err_set(HC_ERR_PROTO, "lane %u: a sender has lanes 0 to %u",
                          env->lane, HC_MAX_LANES - 1);
    if (env->payload_case == HETPS__ENVELOPE__PAYLOAD_PUSH &&
        (env->push->has_part || env->push->has_parts) &&
        (!env->push->has_part || !env->push->has_parts ||
         env->push->parts == 0 || env->push->parts > HC_WIRE_MAX_PARTS ||
         env->push->part >= env->push->parts))
        return hc_err_set(HC_ERR_PROTO, "push part %u of %u: a part is "
                          "0 to parts - 1 of 1 to %u parts, both given",
                          env->push->part, env->push->parts,
                          HC_WIRE_MAX_PARTS);
    if (env->n_tensors > HC_WIRE_MAX_TENSORS)
        return hc_err_set(HC_ERR_LIMIT, "%s carries %zu tensors, over the "
                          "limit of %u", hc_wire_payload_name(env->payload_case),
                          env->n_tensors, HC_WIRE_MAX_TENSORS);
    for (size_t i = 0; i < env->n_tensors; i++) {
        const Hetps__TensorRef *t = env->tensors[i];

        if ((rv = check_span("tensor", i, t->key, t->offset, t->length)))
            return rv;
        if (sum > UINT64_MAX - t->length)
            return hc_err_set(HC_ERR_LIMIT, "tensor lengths overflow");
        sum += t->length;
    }
    if (env->n_tensors > 0 && !payload_carries_tensors(env->payload_case))
        return hc_err_set(HC_ERR_PROTO, "%s carries %zu tensors but only push, "
                          "create and ack may carry tensor data",
                          hc_wire_payload_name(env->payload_case),
                          env->n_tensors);
    if ((rv = check_payload(env)) != HC_OK)
        return rv;
    *elems = sum;
    return HC_OK;
}

/* ---- encoding ---- */

int hc_wire_reserve(nng_msg **out, Hetps__Envelope *env,
                    const struct hc_tensor_src *t, size_t n, float **dst)
{
    Hetps__TensorRef stack_refs[WIRE_STACK_REFS];
    Hetps__TensorRef *stack_ptrs[WIRE_STACK_REFS];
    Hetps__TensorRef *refs = stack_refs, **ptrs = stack_ptrs;
    void *heap = NULL;
    nng_msg *msg = NULL;
    uint64_t elems = 0, total;
    size_t h, off;
    uint8_t *body;
    int rv;

    if (out)
        *out = NULL;
    if (!out || !env || (n > 0 && !t))
        return hc_err_set(HC_ERR_INVAL, "hc_wire_reserve: out, env and (with "
                          "n > 0) t must not be NULL");
    if (n > HC_WIRE_MAX_TENSORS)
        return hc_err_set(HC_ERR_LIMIT, "%s would carry %zu tensors, over the "
                          "limit of %u", hc_wire_payload_name(env->payload_case),
                          n, HC_WIRE_MAX_TENSORS);
    if (n > WIRE_STACK_REFS) {
        heap = malloc(n * (sizeof *refs + sizeof *ptrs));
        if (!heap)
            return hc_err_set(HC_ERR_NOMEM, "no memory for %zu tensor refs", n);
        refs = heap;
        ptrs = (Hetps__TensorRef **)(refs + n);
    }
    for (size_t i = 0; i < n; i++) {
        hetps__tensor_ref__init(&refs[i]);
        refs[i].key = t[i].key;
        refs[i].offset = t[i].offset;
        refs[i].length = t[i].length;
        ptrs[i] = &refs[i];
    }
    env->tensors = ptrs;
    env->n_tensors = n;
    if ((rv = check_envelope(env, &elems)) != HC_OK)
        goto out;
    /* crc32c is fixed32: the header's size does not depend on the CRCs,
     * which are computed while the data is copied in, below. */
    h = protobuf_c_message_get_packed_size(&env->base);
    if (h > HC_WIRE_MAX_HEADER) {
        rv = hc_err_set(HC_ERR_LIMIT, "%s header would be %zu bytes, over the "
                        "limit of %u", hc_wire_payload_name(env->payload_case),
                        h, HC_WIRE_MAX_HEADER);
        goto out;
    }
    total = data_offset(h) + elems * 4;
    if (total > HC_WIRE_MAX_MSG) {
        rv = hc_err_set(HC_ERR_LIMIT, "%s message would be %llu bytes, over "
                        "the limit of %u; send fewer or smaller tensors",
                        hc_wire_payload_name(env->payload_case),
                        (unsigned long long)total, HC_WIRE_MAX_MSG);
        goto out;
    }
    if (nng_msg_alloc(&msg, (size_t)total) != 0) {
        rv = hc_err_set(HC_ERR_NOMEM, "no memory for a %llu-byte message",
                        (unsigned long long)total);
        goto out;
    }
    body = nng_msg_body(msg);
    if (((uintptr_t)body & 3) != 0) {
        rv = hc_err_set(HC_ERR_TRANSPORT, "nng gave a message body that is not "
                        "4-byte aligned");
        goto out;
    }
    off = data_offset(h);
    for (size_t i = 0; i < n; i++) {
        size_t bytes = (size_t)t[i].length * 4;

        if (t[i].data)
            refs[i].crc32c = hc_crc32c_copy(body + off, t[i].data, bytes);
        if (dst)
            dst[i] = (float *)(void *)(body + off);
        off += bytes;
    }
    put_le32(body, (uint32_t)h);
    if (protobuf_c_message_pack(&env->base, body + 4) != h) {
        rv = hc_err_set(HC_ERR_PROTO, "%s header packed to a size other than "
                        "protobuf-c computed",
                        hc_wire_payload_name(env->payload_case));
        goto out;
    }
    memset(body + 4 + h, 0, data_offset(h) - 4 - h);
    *out = msg;
    msg = NULL;
    rv = HC_OK;
out:
    if (msg)
        nng_msg_free(msg);
    env->tensors = NULL;
    env->n_tensors = 0;
    free(heap);
    return rv;
}

int hc_wire_encode(nng_msg **out, Hetps__Envelope *env,
                   const struct hc_tensor_src *t, size_t n)
{
    if (out)
        *out = NULL;
    for (size_t i = 0; i < n && t; i++)
        if (!t[i].data)
            return hc_err_set(HC_ERR_INVAL, "tensor %zu (key %u) has no data: "
                              "hc_wire_encode needs every t[i].data (use "
                              "hc_wire_reserve to write it in place)", i,
                              t[i].key);
    return hc_wire_reserve(out, env, t, n, NULL);
}

int hc_wire_seal(nng_msg *msg)
{
    return hc_wire_seal_known(msg, NULL, NULL);
}

int hc_wire_seal_known(nng_msg *msg, const uint32_t *crc,
                       const unsigned char *known)
{
    Hetps__Envelope *env = NULL;
    uint64_t elems = 0;
    uint8_t *body;
    size_t len, h, off;
    int rv;

    if (!msg)
        return hc_err_set(HC_ERR_INVAL, "hc_wire_seal: msg is NULL");
    body = nng_msg_body(msg);
    len = nng_msg_len(msg);
    if (len < 4 || (h = get_le32(body)) > len - 4)
        return hc_err_set(HC_ERR_INVAL, "hc_wire_seal: the %zu-byte message "
                          "was not built by hc_wire_reserve", len);
    env = (Hetps__Envelope *)protobuf_c_message_unpack(
        &hetps__envelope__descriptor, NULL, h, body + 4);
    if (!env)
        return hc_err_set(HC_ERR_INVAL, "hc_wire_seal: the message header is "
                          "not an Envelope (not built by hc_wire_reserve?)");
    for (size_t i = 0; i < env->n_tensors; i++)
        elems += env->tensors[i]->length;
    off = data_offset(h);
    if (env->n_tensors > HC_WIRE_MAX_TENSORS || off > len ||
        elems > (len - off) / 4 || off + elems * 4 != len) {
        rv = hc_err_set(HC_ERR_INVAL, "hc_wire_seal: the %zu-byte message does "
                        "not match its header (was it resized after "
                        "hc_wire_reserve?)", len);
        goto out;
    }
    for (size_t i = 0; i < env->n_tensors; i++) {
        size_t bytes = (size_t)env->tensors[i]->length * 4;

        env->tensors[i]->crc32c = known && known[i]
                                      ? crc[i] : hc_crc32c(body + off, bytes);
        off += bytes;
    }
    if (protobuf_c_message_get_packed_size(&env->base) != h ||
        protobuf_c_message_pack(&env->base, body + 4) != h) {
        rv = hc_err_set(HC_ERR_PROTO, "hc_wire_seal: the header changed size "
                        "when re-packed");
        goto out;
    }
    rv = HC_OK;
out:
    protobuf_c_message_free_unpacked(&env->base, NULL);
    return rv;
}

/* ---- decoding ---- */

/* Whether tensor i of a push, a push_rows or a pull_rows is a table's
 * ids (two words an id, not floats). */
static int ids_tensor(const Hetps__Envelope *env, size_t i)
{
    size_t dense, ng;

    switch (env->payload_case) {
    case HETPS__ENVELOPE__PAYLOAD_PULL_ROWS:
        return 1;
    case HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS:
    case HETPS__ENVELOPE__PAYLOAD_INIT_ROWS:
        return i % 2 == 0;
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        dense = hc_wire_push_dense(env->push, env->n_tensors);
        ng = 2 * env->push->n_rows_grad;
        return i >= dense && (i - dense >= ng || (i - dense) % 2 == 0);
    default:
        return 0;
    }
}

/* Floats checksummed at a time by crc_and_finite: 24 KiB, small enough
 * to be read again from cache. */
#define FINITE_CHUNK 6144u

/* The CRC32C of n floats at p and, in the same pass (chunk by chunk, each
 * checked while it is in cache), the index of the first that is NaN or
 * ±Inf (all exponent bits set) into *bad, n when none. */
static uint32_t crc_and_finite(const float *p, uint32_t n, uint32_t *bad)
{
    uint32_t crc = 0, done = 0;

    *bad = n;
    while (done < n) {
        uint32_t k = n - done < FINITE_CHUNK ? n - done : FINITE_CHUNK;

        crc = hc_crc32c_extend(crc, p + done, (size_t)k * 4);
        if (*bad == n && vec_any_nonfinite(p + done, k)) {
            const uint32_t *u = (const uint32_t *)(const void *)(p + done);
            uint32_t e = 0;

            while ((u[e] & 0x7f800000u) != 0x7f800000u)
                e++;
            *bad = done + e;
        }
        done += k;
    }
    return crc;
}

/*
 * The data section after a valid Envelope: exact size, alignment, CRC32C
 * of each tensor — and a push's first non-finite value (out->nonfinite_*),
 * found in the same pass. On success out->data holds n_tensors pointers
 * into b (NULL when there are none), to be freed by the caller.
 */
static int check_data(const uint8_t *b, size_t len, size_t off,
                      const Hetps__Envelope *env, uint64_t elems,
                      int check_crc, struct hc_wire_msg *out)
{
    int finite = check_crc &&
                 env->payload_case == HETPS__ENVELOPE__PAYLOAD_PUSH;
    const float **data;
    uint64_t want = off + elems * 4; /* elems <= 2^42: no overflow */

    out->data = NULL;
    out->finite_checked = finite;
    out->nonfinite_t = env->n_tensors;
    if (len != want)
        return hc_err_set(HC_ERR_PROTO, "data section is %lld bytes but the "
                          "%zu tensors need %llu (sum of lengths x 4)",
                          (long long)len - (long long)off, env->n_tensors,
                          (unsigned long long)(elems * 4));
    if (env->n_tensors == 0)
        return HC_OK;
    if (((uintptr_t)(b + off) & 3) != 0)
        return hc_err_set(HC_ERR_PROTO, "tensor data at %p is not 4-byte "
                          "aligned (the message body itself is misaligned); "
                          "refusing unaligned float reads",
                          (const void *)(b + off));
    data = malloc(env->n_tensors * sizeof *data);
    if (!data)
        return hc_err_set(HC_ERR_NOMEM, "no memory for %zu tensor pointers",
                          env->n_tensors);
    for (size_t i = 0; i < env->n_tensors; i++) {
        const Hetps__TensorRef *t = env->tensors[i];
        size_t bytes = (size_t)t->length * 4;
        uint32_t crc = t->crc32c, bad;

        if (finite && !ids_tensor(env, i)) {
            crc = crc_and_finite((const float *)(const void *)(b + off),
                                 t->length, &bad);
            if (bad < t->length && out->nonfinite_t == env->n_tensors) {
                out->nonfinite_t = i;
                out->nonfinite_e = bad;
            }
        } else if (check_crc || finite) {
            crc = hc_crc32c(b + off, bytes);
        }
        if (crc != t->crc32c) {
            free(data);
            return hc_err_set(HC_ERR_CRC, "tensor %zu (key %u, offset %llu, "
                              "%u elements): CRC32C %08x does not match %08x "
                              "in the header; the data was corrupted", i,
                              t->key, (unsigned long long)t->offset, t->length,
                              crc, t->crc32c);
        }
        data[i] = (const float *)(const void *)(b + off);
        off += bytes;
    }
    out->data = data;
    return HC_OK;
}

/* The ids of a pull_rows, a push_rows or a push's rows, in the data: each
 * table's ascending, unique and below HC_WIRE_ROW_ID_LIMIT. Frees
 * out->data on failure. */
static int check_row_ids(const Hetps__Envelope *env, struct hc_wire_msg *out)
{
    size_t i = env->payload_case == HETPS__ENVELOPE__PAYLOAD_PUSH
                   ? hc_wire_push_dense(env->push, env->n_tensors)
                   : 0;

    if (env->payload_case != HETPS__ENVELOPE__PAYLOAD_PUSH &&
        env->payload_case != HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS &&
        env->payload_case != HETPS__ENVELOPE__PAYLOAD_INIT_ROWS &&
        env->payload_case != HETPS__ENVELOPE__PAYLOAD_PULL_ROWS)
        return HC_OK;
    for (; i < env->n_tensors; i++) {
        uint32_t n = env->tensors[i]->length / 2;
        uint64_t prev = 0;

        if (!ids_tensor(env, i))
            continue;
        for (uint32_t j = 0; j < n; j++) {
            uint64_t id = hc_wire_row_id(out->data[i], j);

            if (id >= HC_WIRE_ROW_ID_LIMIT || (j > 0 && id <= prev)) {
                free(out->data);
                out->data = NULL;
                return hc_err_set(HC_ERR_PROTO, "rows of variable %u: id %llu "
                                  "at position %u is %s", env->tensors[i]->key,
                                  (unsigned long long)id, j,
                                  id >= HC_WIRE_ROW_ID_LIMIT
                                      ? "not below 2^62"
                                      : "not above the one before: ids must "
                                        "be ascending and unique");
            }
            prev = id;
        }
    }
    return HC_OK;
}

uint64_t hc_wire_row_id(const float *ids, uint32_t j)
{
    uint64_t id;

    memcpy(&id, (const char *)ids + (size_t)j * 8, sizeof id);
    return id;
}

/* The largest whole message of a kind: only messages that carry tensors
 * (create, pull, push, and the ack that answers a pull with the values)
 * may reach HC_WIRE_MAX_MSG. */
static size_t kind_limit(Hetps__Envelope__PayloadCase pc)
{
    switch (pc) {
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
    case HETPS__ENVELOPE__PAYLOAD_PULL:
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
    case HETPS__ENVELOPE__PAYLOAD_PULL_ROWS:
    case HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS:
    case HETPS__ENVELOPE__PAYLOAD_INIT_ROWS:
    case HETPS__ENVELOPE__PAYLOAD_ACK:
        return HC_WIRE_MAX_MSG;
    case HETPS__ENVELOPE__PAYLOAD_JOIN:
    case HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY:
    case HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY:
        return HC_WIRE_MAX_ROSTER;
    default:
        return HC_WIRE_MAX_CONTROL;
    }
}

static int decode(const void *body, size_t len, uint64_t expect_cluster,
                  int check_crc, struct hc_wire_msg *out)
{
    const uint8_t *b = body;
    Hetps__Envelope *env = NULL;
    uint64_t elems = 0;
    uint32_t h;
    int rv;

    if (!out)
        return hc_err_set(HC_ERR_INVAL, "hc_wire_decode: out is NULL");
    memset(out, 0, sizeof *out);
    if (!body && len > 0)
        return hc_err_set(HC_ERR_INVAL, "hc_wire_decode: body is NULL");
    if (len < 4)
        return hc_err_set(HC_ERR_PROTO, "message of %zu bytes is too short: a "
                          "hetps message starts with a 4-byte header length",
                          len);
    h = get_le32(b);
    if (h > HC_WIRE_MAX_HEADER)
        return hc_err_set(HC_ERR_LIMIT, "header length %u bytes is over the "
                          "limit of %u (not a hetps message, or corrupt)", h,
                          HC_WIRE_MAX_HEADER);
    if (h > len - 4)
        return hc_err_set(HC_ERR_PROTO, "header length %u bytes runs past the "
                          "end of the %zu-byte message (truncated?)", h, len);
    if (len > HC_WIRE_MAX_MSG)
        return hc_err_set(HC_ERR_LIMIT, "message of %zu bytes is over the "
                          "limit of %u", len, HC_WIRE_MAX_MSG);
    env = (Hetps__Envelope *)protobuf_c_message_unpack(
        &hetps__envelope__descriptor, NULL, h, b + 4);
    if (!env)
        return hc_err_set(HC_ERR_PROTO, "header of %u bytes is not a valid "
                          "hetps Envelope (corrupt, truncated, or missing a "
                          "required field)", h);
    if (env->version != HC_WIRE_VERSION) {
        rv = hc_err_set(HC_ERR_VERSION, "message uses protocol version %u but "
                        "this program speaks version %u; run the same hetps "
                        "release on every task", env->version, HC_WIRE_VERSION);
        goto fail;
    }
    if (len > kind_limit(env->payload_case)) {
        rv = hc_err_set(HC_ERR_LIMIT, "a %s message of %zu bytes is over the "
                        "limit of %zu for its kind",
                        hc_wire_payload_name(env->payload_case), len,
                        kind_limit(env->payload_case));
        goto fail;
    }
    if (expect_cluster != 0 && env->cluster_id != expect_cluster) {
        rv = hc_err_set(HC_ERR_CLUSTER, "message is for cluster %016llx but "
                        "this is cluster %016llx; check that every task uses "
                        "the same cluster file",
                        (unsigned long long)env->cluster_id,
                        (unsigned long long)expect_cluster);
        goto fail;
    }
    if ((rv = check_envelope(env, &elems)) != HC_OK)
        goto fail;
    if ((rv = check_data(b, len, data_offset(h), env, elems, check_crc,
                         out)) ||
        (rv = check_row_ids(env, out)))
        goto fail;
    out->env = env;
    out->n_tensors = env->n_tensors;
    return HC_OK;
fail:
    protobuf_c_message_free_unpacked(&env->base, NULL);
    memset(out, 0, sizeof *out);
    return rv;
}

int hc_wire_decode(const void *body, size_t len, uint64_t expect_cluster,
                   struct hc_wire_msg *out)
{
    return decode(body, len, expect_cluster, 1, out);
}

int hc_wire_redecode(const void *body, size_t len, uint64_t expect_cluster,
                     struct hc_wire_msg *out)
{
    return decode(body, len, expect_cluster, 0, out);
}

int hc_wire_decode_lazy(const void *body, size_t len, uint64_t expect_cluster,
                        struct hc_wire_msg *out)
{
    int rv = decode(body, len, expect_cluster, 0, out);

    if (rv == HC_OK)
        out->crc_unchecked = 1;
    return rv;
}

int hc_wire_take(const struct hc_wire_msg *m, size_t i, float *dst)
{
    const Hetps__TensorRef *t;
    size_t bytes;
    uint32_t crc;

    if (!m || !m->env || i >= m->n_tensors || !dst)
        return hc_err_set(HC_ERR_INVAL, "hc_wire_take: no tensor %zu", i);
    t = m->env->tensors[i];
    bytes = (size_t)t->length * 4;
    if (!m->crc_unchecked) {
        memcpy(dst, m->data[i], bytes);
        return HC_OK;
    }
    crc = hc_crc32c_copy(dst, m->data[i], bytes);
    if (crc != t->crc32c)
        return hc_err_set(HC_ERR_CRC, "tensor %zu (key %u, offset %llu, %u "
                          "elements): CRC32C %08x does not match %08x in the "
                          "header; the data was corrupted", i, t->key,
                          (unsigned long long)t->offset, t->length, crc,
                          t->crc32c);
    return HC_OK;
}

void hc_wire_msg_free(struct hc_wire_msg *m)
{
    if (!m)
        return;
    if (m->env)
        protobuf_c_message_free_unpacked(&m->env->base, NULL);
    free(m->data);
    memset(m, 0, sizeof *m);
}

/* ---- errors ---- */

Hetps__ErrorCode hc_wire_error_code(int hc_code)
{
    switch (hc_code) {
    case HC_ERR_PROTO:
    case HC_ERR_INVAL: return HETPS__ERROR_CODE__E_MALFORMED;
    case HC_ERR_VERSION: return HETPS__ERROR_CODE__E_VERSION;
    case HC_ERR_CLUSTER: return HETPS__ERROR_CODE__E_CLUSTER;
    case HC_ERR_LIMIT: return HETPS__ERROR_CODE__E_LIMIT;
    case HC_ERR_CRC: return HETPS__ERROR_CODE__E_CRC;
    case HC_ERR_STALE: return HETPS__ERROR_CODE__E_STALE;
    case HC_ERR_NOTFOUND: return HETPS__ERROR_CODE__E_NOT_FOUND;
    case HC_ERR_MISMATCH:
    case HC_ERR_EXISTS: return HETPS__ERROR_CODE__E_MISMATCH;
    case HC_ERR_STORE:
    case HC_ERR_MAPFULL:
    case HC_ERR_IO: return HETPS__ERROR_CODE__E_STORE;
    case HC_ERR_CLOSED: return HETPS__ERROR_CODE__E_SHUTTING_DOWN;
    case HC_ERR_UNSUPPORTED: return HETPS__ERROR_CODE__E_UNSUPPORTED;
    default: return HETPS__ERROR_CODE__E_UNKNOWN;
    }
}

int hc_wire_error_from_code(Hetps__ErrorCode code)
{
    switch (code) {
    case HETPS__ERROR_CODE__E_MALFORMED: return HC_ERR_PROTO;
    case HETPS__ERROR_CODE__E_VERSION: return HC_ERR_VERSION;
    case HETPS__ERROR_CODE__E_CLUSTER: return HC_ERR_CLUSTER;
    case HETPS__ERROR_CODE__E_LIMIT: return HC_ERR_LIMIT;
    case HETPS__ERROR_CODE__E_CRC: return HC_ERR_CRC;
    case HETPS__ERROR_CODE__E_UNKNOWN_TASK: return HC_ERR_CONFIG;
    case HETPS__ERROR_CODE__E_STALE: return HC_ERR_STALE;
    case HETPS__ERROR_CODE__E_NOT_FOUND: return HC_ERR_NOTFOUND;
    case HETPS__ERROR_CODE__E_MISMATCH: return HC_ERR_MISMATCH;
    case HETPS__ERROR_CODE__E_STORE: return HC_ERR_STORE;
    case HETPS__ERROR_CODE__E_SHUTTING_DOWN: return HC_ERR_CLOSED;
    case HETPS__ERROR_CODE__E_UNSUPPORTED: return HC_ERR_UNSUPPORTED;
    case HETPS__ERROR_CODE__E_TASK_IN_USE: return HC_ERR_EXISTS;
    case HETPS__ERROR_CODE__E_FORBIDDEN: return HC_ERR_CONFIG;
    default: return HC_ERR_REMOTE; /* E_UNKNOWN, E_NOT_JOINED, unknown */
    }
}

int hc_wire_error_reply(nng_msg **out, const struct hc_sender *s,
                        uint64_t request_id, Hetps__ErrorCode code,
                        const char *text)
{
    char buf[HC_WIRE_MAX_TEXT + 1];
    Hetps__Envelope env;
    Hetps__Error err = HETPS__ERROR__INIT;
    size_t n = text ? strnlen(text, HC_WIRE_MAX_TEXT + 1) : 0;

    if (n > HC_WIRE_MAX_TEXT) { /* cut before a UTF-8 continuation byte */
        n = HC_WIRE_MAX_TEXT;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--;
    }
    if (n > 0)
        memcpy(buf, text, n);
    buf[n] = '\0';
    hc_wire_init_env(&env, s, request_id);
    err.code = code;
    err.message = buf;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_ERROR;
    env.error = &err;
    return hc_wire_encode(out, &env, NULL, 0);
}
