/* SPDX-License-Identifier: MIT */
/*
 * Compaction hints: where a compaction scan should look. One bit per region
 * of CSDFS_HINT_REGION_BLOCKS blocks (1 MiB of container), set when a block
 * of it may have gained dead bytes: a chunk version died there
 * (extent_map.c) or the allocation head left a partly filled block
 * (alloc.c's leave callback). The background, low-space and status scans
 * visit only hinted regions, so what they cost follows what was written
 * since the last scan, not the size of the volume; a scan that finds
 * nothing worth moving in a region clears its bit. A pass asked for on the
 * whole volume sweeps every region (and so also finds what a crash kept
 * from being hinted: the last block the head was filling).
 *
 * A bit set too often costs a scan of one region; a bit missing delays the
 * compaction of that region until the next sweep, nothing else. The bits
 * are stored in pages in the meta table, written into the commit that
 * follows a change (the same transaction as the chunk changes that set
 * them, so a committed kill never lacks its hint). A volume without stored
 * hints (made before them) starts with every bit set.
 *
 * Three levels, so finding the next set bit costs about the same on any
 * volume size: bit w of `sum` is set iff word w of `bits` is non-zero, bit
 * s of `top` iff word s of `sum` is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"

#define PAGE_BYTES 512u                      /* of bits per stored page */
#define PAGE_REGIONS (PAGE_BYTES * 8u)
#define KEY_PREFIX "chint"
#define KEY_LEN 9                            /* prefix + BE32 page */

static void page_key(uint8_t key[KEY_LEN], uint64_t page)
{
	memcpy(key, KEY_PREFIX, 5);
	key[5] = (uint8_t)(page >> 24);
	key[6] = (uint8_t)(page >> 16);
	key[7] = (uint8_t)(page >> 8);
	key[8] = (uint8_t)page;
}

/* Word w of bits changed: bring the levels above up to date. */
static void set_word_sum(struct csdfs_chint *h, uint64_t w)
{
	uint64_t s = w / 64;

	if (h->bits[w])
		h->sum[s] |= 1ull << (w % 64);
	else
		h->sum[s] &= ~(1ull << (w % 64));
	if (h->sum[s])
		h->top[s / 64] |= 1ull << (s % 64);
	else
		h->top[s / 64] &= ~(1ull << (s % 64));
}

static void dirty(struct csdfs_chint *h, uint64_t region)
{
	uint64_t page = region / PAGE_REGIONS;

	h->dirty[page / 64] |= 1ull << (page % 64);
	h->ndirty++;
}

void csdfs_chint_set(struct csdfs_chint *h, uint64_t r)
{
	uint64_t bit = 1ull << (r % 64);

	if (r >= h->nregions || (h->bits[r / 64] & bit))
		return;
	h->bits[r / 64] |= bit;
	set_word_sum(h, r / 64);
	h->nset++;
	dirty(h, r);
}

int csdfs_chint_init(struct csdfs_chint *h, uint64_t total_blocks)
{
	uint64_t words, sums, pages;

	memset(h, 0, sizeof(*h));
	h->nregions = total_blocks / CSDFS_HINT_REGION_BLOCKS + 1;
	words = (h->nregions + 63) / 64;
	sums = (words + 63) / 64;
	pages = (h->nregions + PAGE_REGIONS - 1) / PAGE_REGIONS;
	h->bits = calloc(words, 8);
	h->sum = calloc(sums, 8);
	h->top = calloc((sums + 63) / 64, 8);
	h->dirty = calloc((pages + 63) / 64, 8);
	if (!h->bits || !h->sum || !h->top || !h->dirty) {
		csdfs_chint_release(h);
		return -ENOMEM;
	}
	return 0;
}

void csdfs_chint_release(struct csdfs_chint *h)
{
	free(h->bits);
	free(h->sum);
	free(h->top);
	free(h->dirty);
	memset(h, 0, sizeof(*h));
}

int csdfs_chint_load(struct csdfs_chint *h, struct csdfs_txn *txn)
{
	uint64_t pages = (h->nregions + PAGE_REGIONS - 1) / PAGE_REGIONS;
	uint8_t key[KEY_LEN];
	struct csdfs_val v;
	int rc;

	page_key(key, 0);
	rc = csdfs_meta_get(txn, CSDFS_DB_META, key, KEY_LEN, &v);
	if (rc == -ENOENT) {
		/* Never stored: every region may hold dead bytes. */
		for (uint64_t r = 0; r < h->nregions; r++)
			csdfs_chint_set(h, r);
		return 0;
	}
	for (uint64_t p = 0; p < pages && !rc; p++) {
		uint64_t first = p * PAGE_REGIONS, n = h->nregions - first;

		if (n > PAGE_REGIONS)
			n = PAGE_REGIONS;
		if (p) {
			page_key(key, p);
			rc = csdfs_meta_get(txn, CSDFS_DB_META, key, KEY_LEN, &v);
		}
		if (rc)
			break;
		if (v.len != (n + 7) / 8) {
			rc = -EUCLEAN;
			break;
		}
		for (uint64_t i = 0; i < n; i++)
			if (((const uint8_t *)v.data)[i / 8] & (1u << (i % 8)))
				csdfs_chint_set(h, first + i);
	}
	if (rc == -ENOENT)
		rc = -EUCLEAN;
	if (rc == -EUCLEAN) {
		/* A damaged page: look everywhere again, and store them all
		 * anew with the next commit. */
		for (uint64_t r = 0; r < h->nregions; r++)
			csdfs_chint_set(h, r);
		memset(h->dirty, 0xff, (pages + 63) / 64 * 8);
		h->ndirty = pages;
		return rc;
	}
	/* Loading is not a change: nothing to store until one. */
	memset(h->dirty, 0, (pages + 63) / 64 * 8);
	h->ndirty = 0;
	return rc;
}

int csdfs_chint_store(struct csdfs_chint *h, struct csdfs_txn *txn, bool all)
{
	uint64_t pages = (h->nregions + PAGE_REGIONS - 1) / PAGE_REGIONS;
	uint8_t key[KEY_LEN], buf[PAGE_BYTES];

	if (!h->ndirty && !all)
		return 0;
	for (uint64_t p = 0; p < pages; p++) {
		uint64_t first = p * PAGE_REGIONS, n = h->nregions - first;
		int rc;

		if (!all && !(h->dirty[p / 64] & (1ull << (p % 64))))
			continue;
		if (n > PAGE_REGIONS)
			n = PAGE_REGIONS;
		/* A page starts on a word: byte j holds bits 8j..8j+7 of it
		 * (the bits past nregions are never set). */
		for (uint64_t j = 0; j < (n + 7) / 8; j++)
			buf[j] = (uint8_t)(h->bits[first / 64 + j / 8] >> (j % 8 * 8));
		page_key(key, p);
		rc = csdfs_meta_put(txn, CSDFS_DB_META, key, KEY_LEN, buf, (n + 7) / 8, 0);
		if (rc)
			return rc;
		h->dirty[p / 64] &= ~(1ull << (p % 64));
	}
	h->ndirty = 0;
	return 0;
}

void csdfs_chint_mark_block(struct csdfs_chint *h, uint64_t block)
{
	uint64_t r = block / CSDFS_HINT_REGION_BLOCKS;

	csdfs_chint_set(h, r);
	/* A chunk that starts in the region before reaches into this block:
	 * scans find chunks by where they start. */
	if (r && block % CSDFS_HINT_REGION_BLOCKS == 0)
		csdfs_chint_set(h, r - 1);
}

void csdfs_chint_mark_range(struct csdfs_chint *h, uint64_t pa, uint64_t len)
{
	uint64_t first = pa / CSDFS_BLOCK_SIZE;
	uint64_t last = (pa + (len ? len : 1) - 1) / CSDFS_BLOCK_SIZE;

	csdfs_chint_mark_block(h, first);
	if (last != first)
		csdfs_chint_mark_block(h, last);
}

void csdfs_chint_clear(struct csdfs_chint *h, uint64_t r)
{
	uint64_t bit = 1ull << (r % 64);

	if (r >= h->nregions || !(h->bits[r / 64] & bit))
		return;
	h->bits[r / 64] &= ~bit;
	set_word_sum(h, r / 64);
	h->nset--;
	dirty(h, r);
}

/* The first set bit at or after @from in @map of @nbits bits, if any
 * within its word. */
static bool in_word(const uint64_t *map, uint64_t from, uint64_t *at)
{
	uint64_t rest = map[from / 64] >> (from % 64);

	if (!rest)
		return false;
	*at = from + (uint64_t)__builtin_ctzll(rest);
	return true;
}

bool csdfs_chint_next(const struct csdfs_chint *h, uint64_t from, uint64_t *region)
{
	uint64_t words = (h->nregions + 63) / 64, sums = (words + 63) / 64;
	uint64_t tops = (sums + 63) / 64, w, s, t;

	if (from >= h->nregions || !h->nset)
		return false;
	/* Up the levels until one has a set bit after where we are, then
	 * down along the lowest set bits. */
	if (in_word(h->bits, from, region))
		return true;
	w = from / 64 + 1;
	if (w < words && in_word(h->sum, w, &w))
		goto found_word;
	s = from / 64 / 64 + 1;
	if (s < sums && in_word(h->top, s, &s))
		goto found_sum;
	for (t = s / 64 + 1; t < tops; t++)
		if (h->top[t]) {
			s = t * 64 + (uint64_t)__builtin_ctzll(h->top[t]);
			goto found_sum;
		}
	return false;
found_sum:
	w = s * 64 + (uint64_t)__builtin_ctzll(h->sum[s]);
found_word:
	*region = w * 64 + (uint64_t)__builtin_ctzll(h->bits[w]);
	return *region < h->nregions;
}

bool csdfs_chint_test(const struct csdfs_chint *h, uint64_t region)
{
	return region < h->nregions && (h->bits[region / 64] >> (region % 64) & 1);
}
