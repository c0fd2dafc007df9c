/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat: allocation that exits on failure, and the list of problems
 * met while sampling. A problem is printed at once, kept for the JSON
 * "errors" of the sample, and makes the exit status 1.
 */
#include "stat.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int exit_status = EXIT_OK;

struct problem *problems;
size_t n_problems;
static size_t cap_problems;

void oom(void)
{
	fprintf(stderr, PROG ": out of memory\n");
	exit(EXIT_ERR);
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		oom();
	return p;
}

char *xstrdup(const char *s)
{
	char *d = strdup(s);

	if (!d)
		oom();
	return d;
}

void grow(void **v, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return;
	*cap = *cap ? *cap * 2 : 16;
	if (*cap < need)
		*cap = need;
	*v = xrealloc(*v, *cap * size);
}

void sort_array(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(v, n, size, cmp);
}

void problem(const char *path, const char *fmt, ...)
{
	char msg[PATH_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, PROG ": %s\n", msg);
	grow((void **)&problems, &cap_problems, n_problems + 1, sizeof(*problems));
	problems[n_problems].path = xstrdup(path);
	problems[n_problems].message = xstrdup(msg);
	n_problems++;
	exit_status = EXIT_ERR;
}

void problems_clear(void)
{
	size_t i;

	for (i = 0; i < n_problems; i++) {
		free(problems[i].path);
		free(problems[i].message);
	}
	n_problems = 0;
}
