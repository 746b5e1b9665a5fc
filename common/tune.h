/*
 * tune.h — process-wide settings every hetps program makes at start.
 */
#ifndef HC_TUNE_H
#define HC_TUNE_H

/*
 * Keep freed memory in the process: message bodies (a few hundred KiB to
 * tens of MB: a large model's push) are allocated per request (nng owns them once sent), and glibc would
 * otherwise map and unmap them each time — on these VMs a fresh page costs
 * ~12 µs to touch. Sets mmap and trim thresholds with mallopt (1 GiB:
 * a process keeps up to that much freed memory for reuse), and one malloc
 * arena for all threads (what one thread frees, another reuses). Raises
 * the soft limit of open descriptors to the hard one (at most 65536).
 */
void hc_tune_process(void);

#endif
