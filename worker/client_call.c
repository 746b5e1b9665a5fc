/*
 * client_call.c — one request to every shard at once, as join,
 * create, pull and push make it: send them all through common/rpc, and
 * check each reply before anyone reads it (the right cluster, this request
 * id, the expected kind, or an Error whose text is passed on naming the
 * shard). A shard that answers "not joined" has restarted: it is joined
 * again and sent the same request (the same id, so one it had applied is
 * answered from its record, never applied twice). See client_impl.h.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_impl.h"
#include "err.h"
#include "log.h"
#include "rpc.h"
#include "wire.h"

/* Who this client is, with the model signature of the moment. */
void client_sender(struct pc_client *c, struct hc_sender *me)
{
    *me = c->me;
    me->model_signature = atomic_load(&c->model_sig);
}

uint64_t client_next_id(struct pc_client *c)
{
    return atomic_fetch_add(&c->next_id, 1);
}

int client_join_one(struct pc_client *c, int i)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Join join = HETPS__JOIN__INIT;
    nng_msg *req = NULL, *reply = NULL;
    struct hc_wire_msg d;
    int rv;

    struct hc_sender me;

    client_sender(c, &me);
    hc_wire_init_env(&env, &me, client_next_id(c));
    join.devices = c->devices;
    join.has_pid = 1;
    join.pid = (uint32_t)getpid();
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_JOIN;
    env.join = &join;
    if ((rv = hc_wire_encode(&req, &env, NULL, 0)) != HC_OK)
        return rv;
    if ((rv = hc_rpc_call(c->rpc, i, req, &reply, 0)) != HC_OK)
        return rv;
    rv = hc_wire_decode(nng_msg_body(reply), nng_msg_len(reply), c->cl->id, &d);
    if (rv == HC_OK) {
        if (d.env->payload_case != HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY)
            rv = hc_err_set(HC_ERR_REMOTE, "ps:%d refused the re-join%s%s", i,
                            d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR
                                ? ": " : "",
                            d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR
                                ? d.env->error->message : "");
        else
            c->view[i].incarnation = d.env->join_reply->shard_incarnation;
        hc_wire_msg_free(&d);
    }
    nng_msg_free(reply);
    return rv;
}

void pc_set_reply_hook(struct pc_client *c, pc_reply_hook fn, void *arg)
{
    c->hook = fn;
    c->hook_arg = arg;
}

/* Shard i's request of the exchange under way once more: a copy of it,
 * or a push made again (c->remake). */
static int request_again(struct pc_client *c, int i, nng_msg **out)
{
    *out = NULL;
    if (!c->copies[i])
        return c->remake(c->remake_arg, i, out);
    if (nng_msg_dup(out, c->copies[i]) != 0)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    return HC_OK;
}

int pc_hook_resend(struct pc_client *c, int shard, int *sent, int *same)
{
    nng_msg *lost, *dup = NULL;
    int rv;

    *sent = *same = 0;
    if (shard < 0 || shard >= c->n)
        return hc_err_set(HC_ERR_INVAL, "pc_hook_resend: no shard %d", shard);
    if (!c->replies[shard] || !c->copy_ok[shard])
        return HC_OK;
    if ((rv = request_again(c, shard, &dup)) != HC_OK)
        return rv;
    lost = c->replies[shard];
    c->replies[shard] = NULL;
    *sent = 1;
    rv = hc_rpc_call(c->rpc, shard, dup, &c->replies[shard],
                     c->call_timeout_ms);
    if (rv == HC_OK && nng_msg_len(lost) == nng_msg_len(c->replies[shard]) &&
        memcmp(nng_msg_body(lost), nng_msg_body(c->replies[shard]),
               nng_msg_len(lost)) == 0)
        *same = 1;
    nng_msg_free(lost);
    return rv;
}

int client_big(const struct pc_client *c)
{
    return c->fan && c->have_layout &&
           c->layout.total * sizeof(float) >= ((uint64_t)4 << 20);
}

/* Decode every reply into c->dec, each on a core of the fan-out; a reply
 * that does not decode is left for the caller's own decode, which reports
 * why. Lazily: a large answer's checksums are checked as its values are
 * copied out (values_one, hc_wire_take), one pass over them, not two. */
static void decode_one(void *arg, int i)
{
    struct pc_client *c = arg;

    if (c->replies[i] && !c->dec[i].env)
        (void)hc_wire_decode_lazy(nng_msg_body(c->replies[i]),
                                  nng_msg_len(c->replies[i]), c->cl->id,
                                  &c->dec[i]); /* failed: stays empty */
}

/* A call to some shards only: call index k is shard idx[k]. */
struct some {
    struct pc_client *c;
    int *idx;
};

static int remake_some(void *arg, int k, nng_msg **out)
{
    const struct some *sm = arg;

    return sm->c->remake(sm->c->remake_arg, sm->idx[k], out);
}

/*
 * Send c->reqs to their shards at once and wait for the replies, in
 * c->replies and c->errs by shard. A shard without a request (a pull or
 * a push skips one that holds no block of the model) is not called and
 * gets no reply.
 */
static int call_shards(struct pc_client *c, int timeout_ms)
{
    nng_msg **reqs = NULL, **replies = NULL;
    int *idx = NULL, *peers = NULL, *errs = NULL, n = 0, i, rv;
    struct some sm = { c, NULL };

    for (i = 0; i < c->n; i++)
        n += c->reqs[i] != NULL;
    if (n == c->n) {
        if (c->remake)
            return hc_rpc_call_all_remade(c->rpc, c->n, c->peers, c->reqs,
                                          c->remake, c->remake_arg,
                                          c->replies, c->errs, timeout_ms);
        return hc_rpc_call_all_kept(c->rpc, c->n, c->peers, c->reqs,
                                    c->replies, c->errs, timeout_ms);
    }
    for (i = 0; i < c->n; i++) {
        c->replies[i] = NULL;
        c->errs[i] = HC_OK;
    }
    if (n == 0)
        return HC_OK;
    idx = calloc((size_t)n, sizeof *idx);
    peers = calloc((size_t)n, sizeof *peers);
    errs = calloc((size_t)n, sizeof *errs);
    reqs = calloc((size_t)n, sizeof *reqs);
    replies = calloc((size_t)n, sizeof *replies);
    if (!idx || !peers || !errs || !reqs || !replies) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
        if (c->remake)          /* as a call would have: taken */
            client_free_reqs(c);
        goto out;
    }
    for (i = 0, n = 0; i < c->n; i++) {
        if (!c->reqs[i])
            continue;
        idx[n] = i;
        peers[n] = c->peers[i];
        reqs[n++] = c->reqs[i];
    }
    sm.idx = idx;
    if (c->remake) {
        rv = hc_rpc_call_all_remade(c->rpc, n, peers, reqs, remake_some, &sm,
                                    replies, errs, timeout_ms);
        for (i = 0; i < n; i++)
            c->reqs[idx[i]] = reqs[i];      /* taken: NULL */
    } else {
        rv = hc_rpc_call_all_kept(c->rpc, n, peers, reqs, replies, errs,
                                  timeout_ms);
    }
    for (i = 0; i < n; i++) {
        c->replies[idx[i]] = replies[i];
        c->errs[idx[i]] = errs[i];
    }
out:
    free(idx);
    free(peers);
    free(errs);
    free(reqs);
    free(replies);
    return rv;
}

/*
 * Send c->reqs[0..n) to every shard at once; decode each reply into
 * c->dec[i] and check it answers request `id` with payload `want`.
 * On failure every decoded reply is released.
 */
static int exchange(struct pc_client *c, const uint64_t *ids,
                    Hetps__Envelope__PayloadCase want, const char *what,
                    int timeout_ms)
{
    int i, rv, first = HC_OK, round;
    char msg[1024] = "";

    /* The requests stay ours through the call (rpc sends copies), for a
     * re-send after a re-join — but a push's: sent as they are, and made
     * again for a re-send (c->remake), so a large push is never copied. */
    for (i = 0; i < c->n; i++) {
        c->copies[i] = c->remake ? NULL : c->reqs[i];
        c->copy_ok[i] = c->reqs[i] != NULL;
    }
    rv = call_shards(c, timeout_ms);
    for (i = 0; i < c->n; i++)
        c->reqs[i] = NULL;
    if (rv == HC_OK && c->hook) {
        c->call_timeout_ms = timeout_ms;
        rv = c->hook(c, c->n, c->hook_arg);
    }
    /* After the hook: it may replace a reply (and a decoded one points
     * into its reply). */
    if (rv == HC_OK && client_big(c))
        hc_fanout_run(c->fan, c->n, decode_one, c);
    /* A shard that restarted (a new incarnation) no longer knows this
     * worker: join it again and re-send the same request — the same id, so
     * a request it had applied before the restart is answered from its
     * record, not applied twice. */
    for (round = 0; rv == HC_OK && round < 3; round++) {
        int again = 0;

        for (i = 0; i < c->n; i++) {
            nng_msg *dup = NULL;
            const Hetps__Envelope *e;

            /* Decoded once here; the checks below use the same result. */
            if (!c->replies[i] || !c->copy_ok[i] ||
                (!c->dec[i].env &&
                 hc_wire_decode(nng_msg_body(c->replies[i]),
                                nng_msg_len(c->replies[i]), c->cl->id,
                                &c->dec[i]) != HC_OK))
                continue;
            e = c->dec[i].env;
            if (e->payload_case != HETPS__ENVELOPE__PAYLOAD_ERROR ||
                e->error->code != HETPS__ERROR_CODE__E_NOT_JOINED)
                continue;
            hc_wire_msg_free(&c->dec[i]);
            again = 1;
            hc_warn("ps:%d (%s) does not know this worker (it restarted?): "
                    "joining it again and re-sending %s", i, c->urls[i], what);
            if ((rv = client_join_one(c, i)) != HC_OK)
                break;
            nng_msg_free(c->replies[i]);
            c->replies[i] = NULL;
            if ((rv = request_again(c, i, &dup)) != HC_OK)
                break;
            if ((rv = hc_rpc_call(c->rpc, i, dup, &c->replies[i],
                                  timeout_ms)) != HC_OK)
                break;
        }
        if (!again)
            break;
    }
    if (rv != HC_OK) {
        first = rv;
        snprintf(msg, sizeof msg, "%s: %s", what, hc_err_msg());
    }
    for (i = 0; i < c->n; i++) {
        const Hetps__Envelope *e;

        if (!c->replies[i])
            continue;
        rv = c->dec[i].env ? HC_OK
                           : hc_wire_decode(nng_msg_body(c->replies[i]),
                                            nng_msg_len(c->replies[i]),
                                            c->cl->id, &c->dec[i]);
        if (rv != HC_OK) {
            if (first == HC_OK) {
                first = rv;
                snprintf(msg, sizeof msg, "%s: bad reply from ps:%d (%s): %s",
                         what, i, c->urls[i], hc_err_msg());
            }
            continue;
        }
        e = c->dec[i].env;
        if (e->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR) {
            if (first == HC_OK) {
                first = hc_wire_error_from_code(e->error->code);
                if (first == HC_OK)
                    first = HC_ERR_REMOTE;
                snprintf(msg, sizeof msg, "%s: ps:%d (%s) refused: %s", what,
                         i, c->urls[i], e->error->message);
            }
        } else if (e->request_id != ids[i] || e->payload_case != want) {
            if (first == HC_OK) {
                first = HC_ERR_PROTO;
                snprintf(msg, sizeof msg,
                         "%s: ps:%d answered request %llu with a %s to %llu",
                         what, i, (unsigned long long)ids[i],
                         hc_wire_payload_name(e->payload_case),
                         (unsigned long long)e->request_id);
            }
        }
    }
    if (first != HC_OK) {
        for (i = 0; i < c->n; i++) {
            hc_wire_msg_free(&c->dec[i]);
            if (c->replies[i])
                nng_msg_free(c->replies[i]);
            c->replies[i] = NULL;
        }
        return hc_err_set(first, "%s", msg);
    }
    return HC_OK;
}

int client_call(struct pc_client *c, const uint64_t *ids,
                    Hetps__Envelope__PayloadCase want, const char *what,
                    int timeout_ms)
{
    int i, rv = exchange(c, ids, want, what, timeout_ms);

    for (i = 0; i < c->n; i++) {
        if (c->copies[i])
            nng_msg_free(c->copies[i]);
        c->copies[i] = NULL;
        c->copy_ok[i] = 0;
    }
    return rv;
}

void client_release(struct pc_client *c)
{
    int i;

    for (i = 0; i < c->n; i++) {
        hc_wire_msg_free(&c->dec[i]);
        if (c->replies[i])
            nng_msg_free(c->replies[i]);
        c->replies[i] = NULL;
    }
}

void client_free_reqs(struct pc_client *c)
{
    int i;

    for (i = 0; i < c->n; i++) {
        if (c->reqs[i])
            nng_msg_free(c->reqs[i]);
        c->reqs[i] = NULL;
    }
}

/* Build the same payload-only request (no tensors) for every shard. */
int client_simple_reqs(struct pc_client *c, Hetps__Envelope *env,
                       uint64_t *ids)
{
    int i, rv;

    for (i = 0; i < c->n; i++) {
        ids[i] = client_next_id(c);
        env->request_id = ids[i];
        rv = hc_wire_encode(&c->reqs[i], env, NULL, 0);
        if (rv != HC_OK) {
            client_free_reqs(c);
            return rv;
        }
    }
    return HC_OK;
}
