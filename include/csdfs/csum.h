/* SPDX-License-Identifier: MIT */
/* CRC32C (Castagnoli), used for the superblock and every stored chunk. */
#ifndef CSDFS_CSUM_H
#define CSDFS_CSUM_H

#include <stddef.h>
#include <stdint.h>

/*
 * csdfs_crc32c - CRC32C of @len bytes at @buf, continuing from @crc.
 * Start a fresh checksum with @crc = 0. Uses SSE4.2 when the CPU has it.
 * Thread-safe. csdfs_crc32c(0, "123456789", 9) == 0xe3069283.
 */
uint32_t csdfs_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
