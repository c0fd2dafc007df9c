/* SPDX-License-Identifier: MIT */
/*
 * Values users type: whole numbers and sizes with binary suffixes (64M,
 * 1GiB, 4P), shared by csdfs-mkfs and the daemon's mount options. Only
 * digits are taken: strtoull alone would skip blanks, take a sign and turn
 * "-1" into 2^64 - 1, which is how a bound like commit_ms could vanish.
 */
#include <errno.h>
#include <stdlib.h>

#include "csdfs/csdfs.h"

/* Leading decimal digits of @text into @v; @end gets the first other char. */
static int parse_digits(const char *text, uint64_t *v, const char **end)
{
	uint64_t n = 0;
	const char *p = text;

	if (!text || *p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (n > (UINT64_MAX - d) / 10)
			return -ERANGE;
		n = n * 10 + d;
	}
	*v = n;
	*end = p;
	return 0;
}

int csdfs_parse_u64(const char *text, uint64_t *out)
{
	const char *end;
	uint64_t v;
	int rc = parse_digits(text, &v, &end);

	if (rc)
		return rc;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

int csdfs_parse_size(const char *text, uint64_t *out)
{
	static const char suffixes[] = "KMGTPE";
	const char *end;
	unsigned shift = 0;
	uint64_t v;
	int rc = parse_digits(text, &v, &end);

	if (rc)
		return rc;
	if (*end) {
		for (int i = 0; suffixes[i]; i++)
			if ((*end & ~0x20) == suffixes[i])
				shift = 10u * (unsigned)(i + 1);
		if (!shift)
			return -EINVAL;
		end++;
		if (*end == 'i')
			end++;
		if (*end == 'B' || *end == 'b')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}
