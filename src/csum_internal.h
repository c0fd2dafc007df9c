/* SPDX-License-Identifier: MIT */
/*
 * The two CRC32C implementations behind csdfs_crc32c(), exposed only so the
 * unit test can prove they agree. Everything else calls csdfs_crc32c().
 */
#ifndef CSDFS_CSUM_INTERNAL_H
#define CSDFS_CSUM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Table-driven (slice-by-8) CRC32C; same convention as csdfs_crc32c(). */
uint32_t csdfs_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/*
 * SSE4.2 CRC32C; same convention as csdfs_crc32c(). Only call it when
 * csdfs_crc32c_hw_usable() is true (it would fault with SIGILL otherwise).
 */
uint32_t csdfs_crc32c_hw(uint32_t crc, const void *buf, size_t len);

/* True if this build and this CPU can run csdfs_crc32c_hw(). */
bool csdfs_crc32c_hw_usable(void);

#endif
