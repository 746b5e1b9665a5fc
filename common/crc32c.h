/*
 * crc32c.h — CRC32C, the checksum of tensors on the wire and of blocks in
 * the stores, and a portable implementation, exposed so tests can hold
 * the fast one to it.
 *
 * hc_crc32c is ISA-L's crc32_iscsi (the fastest code the CPU has, chosen
 * by the library at run time); hc_crc32c_soft is slicing-by-8 table code.
 * Both compute CRC32C (Castagnoli, reflected polynomial 0x82F63B78,
 * initial and final XOR 0xFFFFFFFF), as in iSCSI / RFC 3720. All are
 * thread-safe.
 */
#ifndef HC_CRC32C_H
#define HC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C (Castagnoli) of len bytes, as in iSCSI / RFC 3720. */
uint32_t hc_crc32c(const void *buf, size_t len);

/* The CRC32C of a buffer continued by len more bytes: crc is the CRC32C
 * of what came before (0 for nothing), so hc_crc32c(ab) ==
 * hc_crc32c_extend(hc_crc32c(a), b). For checksumming in chunks while
 * the same chunks are read for something else. */
uint32_t hc_crc32c_extend(uint32_t crc, const void *buf, size_t len);

/* Copy len bytes from src to dst (not overlapping) and return their
 * CRC32C, in one pass over src: each chunk is checksummed in dst while it
 * is still in cache. */
uint32_t hc_crc32c_copy(void *dst, const void *src, size_t len);

/* CRC32C of len bytes with the portable table code only. */
uint32_t hc_crc32c_soft(const void *buf, size_t len);

#endif
