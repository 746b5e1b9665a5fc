/*
 * shard.h — the variables of one parameter-server shard: creation by the
 * chief, pulls and pushes, on top of the LMDB store (ps/store.h) and the
 * optimizer (ps/optimizer.h). Knows the wire's envelopes, not the network.
 *
 * Threads: every call is made under the service's mutex.
 */
#ifndef PS_SHARD_H
#define PS_SHARD_H

#include <stdint.h>

#include <nng/nng.h>

#include "wire.h"

struct ps_shard;

/* Open (creating if needed) the shard's store in `dir`. Variables exist
 * once the chief's CreateVariables arrives, or already when the store
 * holds them from an earlier run. */
int ps_shard_open(struct ps_shard **out, const char *dir, int shard,
                  int n_shards);

/* Serve a create, pull or push. On success *reply is the answer (owned by
 * the caller); on failure returns a code with the reason in hc_err_msg(). */
int ps_shard_serve(struct ps_shard *sh, const struct hc_wire_msg *in,
                   const struct hc_sender *me, nng_msg **reply);

/* Updates applied so far (the shard's global step). */
uint64_t ps_shard_version(const struct ps_shard *sh);

void ps_shard_close(struct ps_shard *sh);

#endif
