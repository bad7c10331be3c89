/*
 * distinct.c - the values of MongoDB's distinct command: the values at a dotted path of each
 * document, arrays unwound one level as distinct does, then sorted in MongoDB's order and
 * made unique (numbers by value). It reads no store: the caller runs the find (the mount's
 * query/<q>?distinct= files and the wire protocol's distinct command share it).
 */
#include "query_int.h"

#include <stdlib.h>
#include <string.h>

void query_distinct_init(struct query_distinct *d)
{
	memset(d, 0, sizeof(*d));
}

void query_distinct_release(struct query_distinct *d)
{
	for (size_t i = 0; i < d->n; i++)
		bson_value_destroy(&d->vals[i]);
	free(d->vals);
	memset(d, 0, sizeof(*d));
}

static int distinct_cmp(const void *a, const void *b)
{
	return store_value_compare(a, b);
}

static void distinct_add(struct query_distinct *s, const bson_value_t *v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->vals = realloc(s->vals, s->cap * sizeof(*s->vals));
		if (!s->vals)
			abort();
	}
	bson_value_copy(v, &s->vals[s->n++]);
}

/* Collects the values at a dotted path, unwinding arrays as MongoDB's distinct does. */
static void distinct_collect(struct query_distinct *s, bson_iter_t *it, const char *path)
{
	const char *dot = strchr(path, '.');
	size_t n = dot ? (size_t)(dot - path) : strlen(path);

	while (bson_iter_next(it)) {
		bson_iter_t child;

		if (strlen(bson_iter_key(it)) != n || memcmp(bson_iter_key(it), path, n) != 0)
			continue;
		if (!dot) {
			if (BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &child)) {
				while (bson_iter_next(&child))
					distinct_add(s, bson_iter_value(&child));
			} else {
				distinct_add(s, bson_iter_value(it));
			}
		} else if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &child)) {
			distinct_collect(s, &child, dot + 1);
		} else if (BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &child)) {
			while (bson_iter_next(&child)) {
				bson_iter_t grand;

				if (BSON_ITER_HOLDS_DOCUMENT(&child) &&
				    bson_iter_recurse(&child, &grand))
					distinct_collect(s, &grand, dot + 1);
			}
		}
		return;
	}
}

void query_distinct_add(struct query_distinct *d, const bson_t *doc, const char *path)
{
	bson_iter_t it;

	if (bson_iter_init(&it, doc))
		distinct_collect(d, &it, path);
}

size_t query_distinct_finish(struct query_distinct *d)
{
	size_t k = 0;

	qsort(d->vals, d->n, sizeof(*d->vals), distinct_cmp);
	for (size_t i = 0; i < d->n; i++) {
		if (k && distinct_cmp(&d->vals[k - 1], &d->vals[i]) == 0) {
			bson_value_destroy(&d->vals[i]);
			continue;
		}
		d->vals[k++] = d->vals[i];
	}
	d->n = k;
	return k;
}

/* A value, its collation key form and its arrival order, for query_distinct_finish_collated. */
struct ckey {
	bson_value_t key; /* Owned: the value under the collation (collation.c note 1) */
	size_t seq;	  /* position in d->vals (the first of equal values is kept) */
};

static int ckey_cmp(const void *a, const void *b)
{
	const struct ckey *x = a, *y = b;
	int c = store_value_compare(&x->key, &y->key);

	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

size_t query_distinct_finish_collated(struct query_distinct *d, const struct query_collation *c)
{
	struct ckey *k;
	bson_value_t *out;
	size_t m = 0;

	if (!c)
		return query_distinct_finish(d);
	k = calloc(d->n + 1, sizeof(*k));
	out = calloc(d->n + 1, sizeof(*out));
	if (!k || !out)
		abort();
	for (size_t i = 0; i < d->n; i++) {
		query__collate_value(c, &d->vals[i], &k[i].key);
		k[i].seq = i;
	}
	qsort(k, d->n, sizeof(*k), ckey_cmp);
	for (size_t i = 0; i < d->n; i++) {
		if (m && store_value_compare(&k[i - 1].key, &k[i].key) == 0) {
			bson_value_destroy(&d->vals[k[i].seq]);
			continue;
		}
		out[m++] = d->vals[k[i].seq];
	}
	for (size_t i = 0; i < d->n; i++)
		bson_value_destroy(&k[i].key);
	free(k);
	free(d->vals);
	d->vals = out;
	d->n = m;
	d->cap = m + 1; /* out has room for n + 1 */
	return m;
}
