/*
 * tune.c — process-wide settings (see tune.h).
 */
#include "tune.h"

#include <malloc.h>
#include <sys/resource.h>

void hc_tune_process(void)
{
    /* Up to 1 GiB: a push of an 80 MB model to one shard is one 80 MB
     * message, faulted in afresh on every step if it were mmapped. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 16 << 20);
    /* One arena for every thread. A message is allocated by one thread
     * (nng's poller receiving it, a task building a reply) and freed by
     * another; with an arena per thread each of a shard's dozen threads
     * grew its own pool of 40 MB blocks, touched afresh the first time
     * every thread met a large message: a 20 M-parameter shard's peak RSS
     * 750 MiB, 631 with one arena, and its push-and-pull about 12 % faster
     * (tests/bench/README.md). Our threads allocate rarely and in large
     * pieces, so they do not queue on its lock. */
    mallopt(M_ARENA_MAX, 1);
    /* Descriptors up to the hard limit (at most 65536): a shard's relay
     * holds up to 4096 connections a loop, and a soft limit of 1024 (a
     * systemd unit's default) would let a flood of bare connections use
     * up the descriptors its own clients need. */
    {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 &&
            rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
            (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
}
