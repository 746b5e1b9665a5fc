/*
 * service_reply.c — the service's own short replies: an Error naming what
 * was wrong with a request (counted by reason in the metrics), and an Ack
 * carrying a version (the shard's now, or the one a request was answered
 * at). Replies with values are the shard's (ps/shard.c). And the lane a
 * request came on (service_lane), which picks its record.
 */
#include <stddef.h>

#include "err.h"
#include "service_impl.h"
#include "shard.h"
#include "wire.h"

nng_msg *service_error_reply(struct ps_service *s, uint64_t id,
                             Hetps__ErrorCode code, const char *text)
{
    nng_msg *m = NULL;

    service_metrics_refusal(s, code);
    if (hc_wire_error_reply(&m, &s->me, id, code, text) != HC_OK)
        return NULL;
    return m;
}

nng_msg *service_ack_at(struct ps_service *s, uint64_t id, uint64_t version,
                        int late)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Ack ack = HETPS__ACK__INIT;
    nng_msg *m = NULL;

    hc_wire_init_env(&env, &s->me, id);
    ack.has_version = 1;
    ack.version = version;
    ack.has_late = ack.late = late != 0;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_ACK;
    env.ack = &ack;
    if (hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
        return NULL;
    return m;
}

nng_msg *service_ack_reply(struct ps_service *s, uint64_t id)
{
    return service_ack_at(s, id, s->shard ? ps_shard_version(s->shard) : 0, 0);
}

uint32_t service_lane(const Hetps__Envelope *e)
{
    return e->has_lane ? e->lane : 0;   /* checked below HC_MAX_LANES */
}
