/*
 * client_exchange.c — one request to every shard at once, as join,
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
#include <string.h>
#include <unistd.h>

#include "client_impl.h"
#include "err.h"
#include "log.h"
#include "rpc.h"
#include "wire.h"

uint64_t client_next_id(struct pc_client *c)
{
    return atomic_fetch_add(&c->next_id, 1);
}

/* Join shard i alone (after it restarted). */
static int join_one(struct pc_client *c, int i)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Join join = HETPS__JOIN__INIT;
    nng_msg *req = NULL, *reply = NULL;
    struct hc_wire_msg d;
    int rv;

    struct hc_sender me;

    client_sender(c, &me);
    hc_wire_init_env(&env, &me, atomic_fetch_add(&c->next_id, 1));
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

/*
 * Tests (pc_opts.lose_reply_every): throw every shard's reply away and send
 * the same request again, as a client does when a reply is lost; count the
 * answers that are the lost one byte for byte — answered from the shard's
 * record (a push applied again would be acknowledged at a later version).
 */
static int lose_replies(struct pc_client *c, int timeout_ms)
{
    nng_msg *lost, *dup = NULL;
    int i, rv;

    for (i = 0; i < c->n; i++) {
        if (!c->replies[i] || !c->copy_ok[i])
            continue;
        lost = c->replies[i];
        c->replies[i] = NULL;
        c->n_lost++;
        if (nng_msg_dup(&dup, c->copies[i]) != 0) {
            nng_msg_free(lost);
            return hc_err_set(HC_ERR_NOMEM, "out of memory");
        }
        rv = hc_rpc_call(c->rpc, i, dup, &c->replies[i], timeout_ms);
        if (rv == HC_OK && nng_msg_len(lost) == nng_msg_len(c->replies[i]) &&
            memcmp(nng_msg_body(lost), nng_msg_body(c->replies[i]),
                   nng_msg_len(lost)) == 0)
            c->n_from_record++;
        nng_msg_free(lost);
        if (rv != HC_OK)
            return rv;
    }
    return HC_OK;
}

void pc_lost_replies(const struct pc_client *c, uint64_t *lost,
                     uint64_t *from_record)
{
    *lost = c->n_lost;
    *from_record = c->n_from_record;
}

/*
 * Send c->reqs[0..n) to every shard at once; decode each reply into
 * c->dec[i] and check it answers request `id` with payload `want`.
 * On failure every decoded reply is released.
 */
int client_exchange(struct pc_client *c, const uint64_t *ids,
                    Hetps__Envelope__PayloadCase want, const char *what,
                    int timeout_ms)
{
    int i, rv, first = HC_OK, round;
    char msg[1024] = "";

    /* Keep each request's bytes for a re-send after a re-join, in buffers
     * kept from call to call (no allocation once they are large enough). */
    for (i = 0; i < c->n; i++) {
        size_t len = c->reqs[i] ? nng_msg_len(c->reqs[i]) : 0;

        c->copy_ok[i] = 0;
        if (!c->reqs[i] ||
            (!c->copies[i] && nng_msg_alloc(&c->copies[i], len) != 0) ||
            nng_msg_realloc(c->copies[i], len) != 0)
            continue;
        memcpy(nng_msg_body(c->copies[i]), nng_msg_body(c->reqs[i]), len);
        c->copy_ok[i] = 1;
    }
    rv = hc_rpc_call_all(c->rpc, c->n, c->peers, c->reqs, c->replies, c->errs,
                         timeout_ms);
    for (i = 0; i < c->n; i++)
        c->reqs[i] = NULL;
    if (rv == HC_OK && c->o.lose_reply_every > 0 &&
        ++c->n_calls % (uint64_t)c->o.lose_reply_every == 0)
        rv = lose_replies(c, timeout_ms);
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
            if ((rv = join_one(c, i)) != HC_OK)
                break;
            nng_msg_free(c->replies[i]);
            c->replies[i] = NULL;
            if (nng_msg_dup(&dup, c->copies[i]) != 0) {
                rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
                break;
            }
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
