/*
 * client_hook.h — a seam for tests, not part of what a worker uses
 * (client.h): a function the client calls after each call's replies have
 * arrived, before it reads them, and one way for that function to act —
 * send a shard the same request again, as a client does when a reply is
 * lost. tests/tools/counter.c uses it to lose replies on purpose and check
 * that the shards answer the re-sent requests from their records.
 *
 * Threads: as client.h; the hook runs in the thread making the call.
 */
#ifndef HC_CLIENT_HOOK_H
#define HC_CLIENT_HOOK_H

struct pc_client;

/* Called with the client and its number of shards once every shard has
 * answered a call that changes or reads the variables — join, create,
 * pull, push, push-and-pull (not heartbeats, leave, shutdown or status).
 * A code other than HC_OK (with hc_err_set) fails the call with it. */
typedef int (*pc_reply_hook)(struct pc_client *c, int n_shards, void *arg);

/* Install fn (NULL: none) with its argument; before the first call. */
void pc_set_reply_hook(struct pc_client *c, pc_reply_hook fn, void *arg);

/*
 * Only inside the hook: throw shard's reply away and send it this call's
 * request again (the same request id), waiting as the call does. *sent is
 * 1 when it did (0: the shard has no reply or request to re-send), *same 1
 * when the new reply equals the thrown-away one byte for byte — it came
 * from the shard's record, not from applying the request again. Returns
 * HC_OK or the call's error; HC_ERR_INVAL for a shard out of range.
 */
int pc_hook_resend(struct pc_client *c, int shard, int *sent, int *same);

#endif
