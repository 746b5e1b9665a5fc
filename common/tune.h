/*
 * tune.h — process-wide settings every hetps program makes at start.
 */
#ifndef HC_TUNE_H
#define HC_TUNE_H

/*
 * Keep freed memory in the process: message bodies of a few hundred KiB
 * are allocated per request (nng owns them once sent), and glibc would
 * otherwise map and unmap them each time — on these VMs a fresh page costs
 * ~12 µs to touch. Sets mmap and trim thresholds with mallopt.
 */
void hc_tune_process(void);

#endif
