/*
 * docdiff.c - the differences between two versions of a document in the shape of a change
 * event's updateDescription (updatedFields, removedFields, truncatedArrays), in time linear
 * in the sizes of the two documents. It does not build or store the event: changes.c does.
 *
 * Design notes
 * 1. The result is exactly what a field-by-field walk finds with a look-up by name from the
 *    start of the other document (the first field of that name, as bson_iter_find does):
 *    fields of the new version in its order (equal ones skipped, embedded documents and
 *    arrays of the same type compared inside, anything else set whole), then the fields of
 *    the old version missing from the new one, arrays compared by position and reported
 *    as truncated when shorter. Only the look-up differs: a level with more than
 *    SMALL_LEVEL fields gets a hash table of its names, built once per level, so that a
 *    change to one field of a 1,440-field embedded document costs one pass over it and not
 *    1,440 scans of it.
 * 2. Paths are built in a 1024-byte buffer with snprintf, truncated as such a buffer
 *    truncates them (documents nest at most 100 levels and names are short in practice),
 *    and only for what is reported or looked into.
 * 3. Most updates keep a level's names in place. While the two versions have had the same
 *    names position by position, each sorting after the one before by length and then
 *    bytes (so none repeats: the field at a position is the first of its name), fields
 *    are paired by position and no table is built; an update of one field of a wide
 *    level then costs one walk over both versions. Names 0, 1, ..., 10, 11 and k1, k2,
 *    ..., k10 sort that way; so do new fields appended past the old version's names in
 *    that order. Any other level falls back to the tables from where the order stops.
 * 4. Before that walk, the fields that lie wholly in the bytes the two versions of a level
 *    share from its start are paired without looking at the new version: they are the
 *    same bytes at the same offsets, so equal (names and values). An $inc of the last
 *    field of a 1,440-field level walks the old version once and compares nothing.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_LEVEL 16 /* at most this many fields: look names up by scanning */

/* One field of a level: where its element starts, and its name. */
struct field {
	const char *key; /* Borrowed: in the level's bytes */
	uint32_t klen;	 /* bytes of key */
	uint32_t off;	 /* bson_iter_offset of the element */
};

/* The fields of one level of a document, found by name. */
struct names {
	const bson_t *doc;     /* Borrowed: the level */
	struct field *fields;  /* Owned: the first field of each name, NULL for a small level */
	uint32_t *slot;	       /* Owned: 1 + index into fields, 0 for empty; mask + 1 of them */
	uint32_t count;	       /* fields of the level */
	uint32_t n, mask;      /* entries of fields; hash mask */
};

static uint32_t hash_name(const char *k, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)k[i]) * 16777619u;
	return h;
}

static void names_init(struct names *nm, const bson_t *doc)
{
	bson_iter_t it;
	uint32_t n = 0, cap = 0;

	memset(nm, 0, sizeof(*nm));
	nm->doc = doc;
	if (!bson_iter_init(&it, doc))
		return;
	while (bson_iter_next(&it))
		n++;
	nm->count = n;
	if (n <= SMALL_LEVEL)
		return;
	nm->fields = bson_malloc(n * sizeof(*nm->fields));
	for (cap = 32; cap < 2 * n; cap *= 2)
		;
	nm->slot = bson_malloc0(cap * sizeof(*nm->slot));
	nm->mask = cap - 1;
	bson_iter_init(&it, doc);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		size_t len = bson_iter_key_len(&it);
		uint32_t h = hash_name(k, len) & nm->mask;

		/* the first field of a name wins, as with a scan from the start */
		for (; nm->slot[h]; h = (h + 1) & nm->mask) {
			const struct field *o = &nm->fields[nm->slot[h] - 1];

			if (o->klen == len && memcmp(o->key, k, len) == 0)
				break;
		}
		if (!nm->slot[h]) {
			nm->fields[nm->n] = (struct field){k, (uint32_t)len, bson_iter_offset(&it)};
			nm->slot[h] = ++nm->n;
		}
	}
}

static void names_release(struct names *nm)
{
	bson_free(nm->fields);
	bson_free(nm->slot);
}

/* Positions out at the first field named k; false when there is none. */
static bool names_find(const struct names *nm, const char *k, bson_iter_t *out)
{
	size_t len;
	uint32_t h;

	if (!nm->slot)
		return bson_iter_init_find(out, nm->doc, k);
	len = strlen(k);
	for (h = hash_name(k, len) & nm->mask; nm->slot[h]; h = (h + 1) & nm->mask) {
		const struct field *o = &nm->fields[nm->slot[h] - 1];

		if (o->klen == len && memcmp(o->key, k, len) == 0)
			return bson_iter_init_from_data_at_offset(out, bson_get_data(nm->doc),
								  nm->doc->len, o->off, o->klen);
	}
	return false;
}

struct diff {
	bson_t *u, *rm, *tr; /* Borrowed: updatedFields, removedFields, truncatedArrays */
	uint32_t nrm, ntr;   /* elements appended to rm and tr */
};

static void diff_level(struct diff *d, const bson_t *a, const bson_t *b, bool arrays,
		       const char *prefix);

static bool same_value(const bson_iter_t *x, const bson_iter_t *y)
{
	const bson_value_t *a, *b;

	/* the same bytes are the same value (the iterator's value offset d1 and next_off
	 * delimit them) */
	if (bson_iter_type(x) == bson_iter_type(y) && x->next_off - x->d1 == y->next_off - y->d1 &&
	    memcmp(x->raw + x->d1, y->raw + y->d1, x->next_off - x->d1) == 0)
		return true;
	a = bson_iter_value((bson_iter_t *)x);
	b = bson_iter_value((bson_iter_t *)y);
	if (a->value_type != b->value_type)
		return false;
	if (a->value_type == BSON_TYPE_DOCUMENT || a->value_type == BSON_TYPE_ARRAY)
		return a->value.v_doc.data_len == b->value.v_doc.data_len &&
		       memcmp(a->value.v_doc.data, b->value.v_doc.data, a->value.v_doc.data_len) == 0;
	return store_iter_compare(x, y) == 0 &&
	       (a->value_type != BSON_TYPE_UTF8 ||
		(a->value.v_utf8.len == b->value.v_utf8.len &&
		 memcmp(a->value.v_utf8.str, b->value.v_utf8.str, a->value.v_utf8.len) == 0));
}

/* Compares the field or element x of the old version with y of the new one, both named key
 * under prefix; the path is only built when they differ. */
static void diff_value(struct diff *d, bson_iter_t *x, bson_iter_t *y, const char *prefix,
		       const char *key)
{
	bson_type_t tx = bson_iter_type(x), ty = bson_iter_type(y);
	char path[1024];

	if (same_value(x, y))
		return;
	snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", key);
	if (tx == ty && (tx == BSON_TYPE_DOCUMENT || tx == BSON_TYPE_ARRAY)) {
		const uint8_t *dx, *dy;
		uint32_t lx, ly;
		bson_t bx, by;

		if (tx == BSON_TYPE_DOCUMENT) {
			bson_iter_document(x, &lx, &dx);
			bson_iter_document(y, &ly, &dy);
		} else {
			bson_iter_array(x, &lx, &dx);
			bson_iter_array(y, &ly, &dy);
		}
		if (bson_init_static(&bx, dx, lx) && bson_init_static(&by, dy, ly)) {
			diff_level(d, &bx, &by, tx == BSON_TYPE_ARRAY, path);
			return;
		}
	}
	bson_append_iter(d->u, path, -1, y);
}

static void append_set(struct diff *d, const char *prefix, const char *key, bson_iter_t *y)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", key);
	bson_append_iter(d->u, path, -1, y);
}

/* Whether name (k, kl) sorts after (p, pl) by length, then bytes: names that keep doing so
 * are all different (note 3). */
static bool after(const char *p, size_t pl, const char *k, size_t kl)
{
	return !p || pl < kl || (pl == kl && memcmp(p, k, kl) < 0);
}

static void diff_array(struct diff *d, const bson_t *a, const bson_t *b, const char *prefix)
{
	struct names na = {0};
	bson_iter_t x, y, found;
	char idx[16];
	uint32_t nb = 0, count = 0;
	bool inorder = true, xend = false;

	/* Elements by position: the common ones compared, the new ones set, and a shorter
	 * array reported as truncated. Element nb of the old version is its field named nb:
	 * while the old version's names are 0, 1, 2, ... it is the one at position nb. */
	bson_iter_init(&x, a);
	if (bson_iter_init(&y, b)) {
		while (bson_iter_next(&y)) {
			bool here = false;

			snprintf(idx, sizeof(idx), "%u", nb);
			if (inorder && !xend) {
				if (!bson_iter_next(&x))
					xend = true;
				else if (count++, strcmp(bson_iter_key(&x), idx) == 0)
					here = true;
				else
					inorder = false;
			}
			if (here) {
				diff_value(d, &x, &y, prefix, idx);
			} else if (inorder) {
				append_set(d, prefix, idx, &y); /* past the old version's end */
			} else {
				if (!na.doc)
					names_init(&na, a);
				if (nb >= na.count)
					append_set(d, prefix, idx, &y);
				else if (names_find(&na, idx, &found))
					diff_value(d, &found, &y, prefix, idx);
			}
			nb++;
		}
	}
	if (na.doc) {
		count = na.count;
	} else if (!xend) {
		while (bson_iter_next(&x))
			count++;
	}
	if (nb < count) {
		bson_t t1;

		snprintf(idx, sizeof(idx), "%u", d->ntr++);
		bson_append_document_begin(d->tr, idx, -1, &t1);
		BSON_APPEND_UTF8(&t1, "field", prefix);
		BSON_APPEND_INT32(&t1, "newSize", (int32_t)nb);
		bson_append_document_end(d->tr, &t1);
	}
	names_release(&na);
}

/* The offset of the first byte of a level that differs between a and b, after the length
 * that heads both. */
static uint32_t common_prefix(const bson_t *a, const bson_t *b)
{
	const uint8_t *p = bson_get_data(a), *q = bson_get_data(b);
	uint32_t n = a->len < b->len ? a->len : b->len, i = 4;

	while (i + 64 <= n && memcmp(p + i, q + i, 64) == 0)
		i += 64;
	while (i < n && p[i] == q[i])
		i++;
	return i;
}

static void diff_level(struct diff *d, const bson_t *a, const bson_t *b, bool arrays,
		       const char *prefix)
{
	struct names na = {0}, nb = {0};
	bson_iter_t x, y, found;
	const char *prev = NULL;
	size_t prevlen = 0;
	uint32_t same = 0;
	bool inorder = true, xend = false;
	char path[1024], idx[16];

	if (arrays) {
		diff_array(d, a, b, prefix);
		return;
	}
	/* The new version's fields in order, each against the old version's first field of
	 * its name: the field at the same position while both have had the same names in an
	 * order that rules out repeats (note 3), else found through a table. */
	bson_iter_init(&x, a);
	bson_iter_init(&y, b);
	{
		/* note 4: the shared first bytes, in names that keep the order */
		uint32_t common = common_prefix(a, b);
		bson_iter_t t = x;

		while (bson_iter_next(&t) && t.next_off <= common &&
		       after(prev, prevlen, bson_iter_key(&t), bson_iter_key_len(&t))) {
			x = t;
			prev = bson_iter_key(&x);
			prevlen = bson_iter_key_len(&x);
			same++;
		}
		if (same && !bson_iter_init_from_data_at_offset(&y, bson_get_data(b), b->len,
								 bson_iter_offset(&x),
								 bson_iter_key_len(&x))) {
			/* cannot happen (b holds that element there): walk it all */
			bson_iter_init(&x, a);
			bson_iter_init(&y, b);
			prev = NULL;
			prevlen = 0;
			same = 0;
		}
	}
	while (bson_iter_next(&y)) {
		const char *k = bson_iter_key(&y);
		size_t kl = bson_iter_key_len(&y);
		bson_iter_t *match = NULL;

		if (inorder) {
			if (!xend && !bson_iter_next(&x))
				xend = true;
			if (!after(prev, prevlen, k, kl)) {
				inorder = false;
			} else if (xend) {
				prev = k; /* after every name of the old version: a new field */
				prevlen = kl;
			} else if (bson_iter_key_len(&x) == kl && memcmp(bson_iter_key(&x), k, kl) == 0) {
				prev = k;
				prevlen = kl;
				same++;
				match = &x;
			} else {
				inorder = false;
			}
			if (!inorder)
				names_init(&na, a);
		}
		if (!*prefix && strcmp(k, "_id") == 0)
			continue;
		if (!match && !inorder && names_find(&na, k, &found))
			match = &found;
		if (match)
			diff_value(d, match, &y, prefix, k);
		else
			append_set(d, prefix, k, &y);
	}
	/* The old version's fields missing from the new one: not among the first `same`,
	 * which the new version has too. */
	if (inorder && !xend && !bson_iter_next(&x))
		xend = true;
	if (!inorder || !xend) {
		bson_iter_init(&x, a);
		for (uint32_t i = 0; i < same && bson_iter_next(&x); i++)
			;
		names_init(&nb, b);
		while (bson_iter_next(&x)) {
			const char *k = bson_iter_key(&x);

			if (names_find(&nb, k, &found))
				continue;
			snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", k);
			snprintf(idx, sizeof(idx), "%u", d->nrm++);
			BSON_APPEND_UTF8(d->rm, idx, path);
		}
	}
	names_release(&na);
	names_release(&nb);
}

void store__doc_diff(const bson_t *old, const bson_t *doc, bson_t *updated, bson_t *removed,
		     bson_t *truncated)
{
	struct diff d = {updated, removed, truncated, 0, 0};

	diff_level(&d, old, doc, false, "");
}
