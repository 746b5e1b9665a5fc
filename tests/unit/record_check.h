/*
 * record_check.h — records as an older hetps stored them (format 1), for
 * the tests of ps/record.h and of the store's records. Linked into every
 * unit program.
 */
#ifndef HP_TEST_RECORD_CHECK_H
#define HP_TEST_RECORD_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* Write into buf a record of format 1 — a 32-byte header (incarnation,
 * request id, step, reply length, flags), the place (epoch 4, batches
 * 250) when `place`, then the reply's bytes — and return its length. */
size_t hp_record_v1(unsigned char *buf, uint64_t inc, uint64_t req,
                    uint64_t step, int place, const char *reply);

#endif
