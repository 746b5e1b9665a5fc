/*
 * tfevents.h — TensorBoard event files: what `tensorboard --logdir DIR`
 * reads. A file is a sequence of records
 *
 *   uint64 length | uint32 masked CRC32C of length | data | uint32 masked
 *   CRC32C of data          (little-endian; mask: rotate right 15, + 0xa282ead8)
 *
 * each holding one Event (proto/tfevent.proto): file_version first, then
 * Summary events of scalar values. One writer per file, one thread at a
 * time; records go through stdio's buffer (hc_tfevents_flush to push
 * them out, as TensorBoard's own writers do every few seconds).
 */
#ifndef HC_TFEVENTS_H
#define HC_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

struct hc_tfevents;

/* Create dir (and its parents) when missing and a new file
 * dir/events.out.tfevents.SECONDS.HOST.PID in it, holding the file_version
 * event. HC_ERR_IO naming the path. The file's path: hc_tfevents_path. */
int hc_tfevents_open(struct hc_tfevents **out, const char *dir);

/* One Summary event at `step`, wall time now, of n scalars tag[i] =
 * value[i]. HC_ERR_IO when it cannot be written. */
int hc_tfevents_scalars(struct hc_tfevents *t, int64_t step, int n,
                        const char *const *tags, const float *values);

int hc_tfevents_flush(struct hc_tfevents *t);
const char *hc_tfevents_path(const struct hc_tfevents *t);

/* Flush and close; NULL is ignored. */
int hc_tfevents_close(struct hc_tfevents *t);

/* The masked CRC32C of a record's parts (exposed for tests). */
uint32_t hc_tfevents_masked_crc(const void *buf, size_t len);

/* mkdir -p: dir and its parents; HC_ERR_IO naming the one that failed. */
int hc_mkdirs(const char *dir);

#endif
