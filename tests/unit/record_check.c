/*
 * record_check.c — records as an older hetps stored them, for the tests
 * of ps/record.h (test_record.c) and of the store's records
 * (test_store.c).
 */
#include "record_check.h"

#include <string.h>

/* A record of format 1 as the store wrote it before: a 32-byte header
 * (incarnation, request id, step, reply length, flags), the place when
 * flags bit 0 is set, then the reply's bytes. */
size_t hp_record_v1(unsigned char *buf, uint64_t inc, uint64_t req,
                    uint64_t step, int place, const char *reply)
{
    uint32_t len = (uint32_t)strlen(reply), flags = place ? 1u : 0u;
    uint32_t at[2] = {4, 250};
    size_t n = 0;

    memcpy(buf + n, &inc, 8), n += 8;
    memcpy(buf + n, &req, 8), n += 8;
    memcpy(buf + n, &step, 8), n += 8;
    memcpy(buf + n, &len, 4), n += 4;
    memcpy(buf + n, &flags, 4), n += 4;
    if (place)
        memcpy(buf + n, at, sizeof at), n += sizeof at;
    memcpy(buf + n, reply, len);
    return n + len;
}

