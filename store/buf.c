/*
 * buf.c - growable, NUL-terminated byte buffers. Allocation failure aborts: every caller
 * would have to give up anyway, and libbson (which we build on) does the same.
 */
#include "store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dfs_buf_init(struct dfs_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void dfs_buf_release(struct dfs_buf *b)
{
	free(b->data);
	dfs_buf_init(b);
}

void dfs_buf_reset(struct dfs_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void dfs_buf_reserve(struct dfs_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	size_t cap;
	char *p;

	if (need <= b->cap)
		return;
	cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p) {
		fprintf(stderr, "docfs: out of memory (%zu bytes)\n", cap);
		abort();
	}
	b->data = p;
	b->cap = cap;
	b->data[b->len] = '\0'; /* a first allocation is terminated too, even if nothing follows */
}

void dfs_buf_append(struct dfs_buf *b, const void *p, size_t n)
{
	dfs_buf_reserve(b, n);
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void dfs_buf_putc(struct dfs_buf *b, char c)
{
	dfs_buf_reserve(b, 1);
	b->data[b->len++] = c;
	b->data[b->len] = '\0';
}

void dfs_buf_puts(struct dfs_buf *b, const char *s)
{
	dfs_buf_append(b, s, strlen(s));
}

void dfs_buf_printf(struct dfs_buf *b, const char *fmt, ...)
{
	char small[256]; /* most texts fit: formatted once */
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof small) {
		dfs_buf_append(b, small, (size_t)n);
		return;
	}
	dfs_buf_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}
