/*
 * sort.c - sort specifications ({a: 1, "b.c": -1}) and sort keys: byte strings whose memcmp
 * order is MongoDB's find() sort order. It does not sort (the SORT stage of exec.c does, on
 * these keys), and it knows nothing of indexes that could provide the order.
 *
 * Design notes.
 *
 *  1. A field's sort value follows MongoDB's sort key generation (the multikey index key
 *     rules): walking the dotted path, a document continues at the named field (missing:
 *     null), an array continues at each of its elements (a document element at its named
 *     field, any other element gives null; an empty array gives null), a numeric component
 *     on an array picks that element, and any other value with path left gives null. At
 *     the end of the path an array gives each of its elements (nested arrays as whole
 *     values), an empty array gives the "empty array" value, anything else itself.
 *  2. Of the values a field gives, ascending uses the smallest and descending the largest
 *     in store_value_compare order, where the "empty array" value sorts after MinKey and
 *     before null (the manual: an empty array is less than null or a missing field; the
 *     server indexes it as undefined, which sits below null there).
 *  3. The key of a document is, per field, store_key_append() of its sort value (inverted
 *     when descending), then the _id ascending, so equal sort values keep a deterministic
 *     order. The "empty array" value is the single byte SORT_EMPTY_ARRAY, between MinKey's
 *     bracket byte and null's; no store_key encoding starts with it, so the encodings stay
 *     prefix-free and the concatenation keeps the order field by field.
 *  4. No allocation per document: candidate values are bson_value_t views into doc.
 *
 * Divergence, documented: the server builds compound sort keys as index keys, pairing the
 * values of fields that share an array element and rejecting two fields on parallel arrays;
 * here each field picks its own minimum or maximum independently (the query.h contract).
 *
 * Thread-safe: a parsed struct query_sort is immutable.
 */
#include "query_int.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Between store_type_bracket(MinKey) = 1 and store_type_bracket(null) = 5 (compare.c). */
#define SORT_EMPTY_ARRAY 3

struct sort_field {
	char *path;	   /* Owned: the dotted path as given (messages) */
	char *comps;	   /* Owned: the path's components, each NUL-terminated */
	const char **comp; /* Owned array of ncomp pointers into comps */
	int64_t *index;	   /* Owned array: a component's array index, or -1 if not numeric */
	size_t ncomp;	   /* components (>= 1) */
	bool desc;	   /* descending */
	bool meta;	   /* {$meta: "textScore"}: the score, highest first */
};

struct query_sort {
	struct sort_field *f; /* Owned array of n fields, in spec order */
	size_t n;	      /* fields; 0 means natural order */
	const struct query_collation *coll; /* Borrowed: strings compare by it, or NULL */
};

void query__sort_set_collation(struct query_sort *s, const struct query_collation *c)
{
	if (s)
		s->coll = c;
}

void query_sort_free(struct query_sort *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n; i++) {
		free(s->f[i].path);
		free(s->f[i].comps);
		free(s->f[i].comp);
		free(s->f[i].index);
	}
	free(s->f);
	free(s);
}

/* Array index of a path component: decimal digits without a leading zero, else -1. */
static int64_t comp_index(const char *c)
{
	int64_t v = 0;
	const char *p;

	if (!*c || (c[0] == '0' && c[1]) || strlen(c) > 9)
		return -1;
	for (p = c; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v;
}

/* Splits path into f's components. Errors: DFS_EINVAL for an empty component or one
 * starting with '$'. */
static int field_init(struct sort_field *f, const char *path, uint32_t len, bool desc,
		      struct dfs_err *err)
{
	size_t i, k;

	memset(f, 0, sizeof(*f));
	f->desc = desc;
	f->path = bson_strndup(path, len);
	f->comps = bson_strndup(path, len);
	if (!f->path || !f->comps)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory parsing sort");
	if (len == 0 || strlen(f->path) != len)
		return dfs_err_set(err, DFS_EINVAL, "bad sort field name '%s'", f->path);
	f->ncomp = 1;
	for (i = 0; i < len; i++)
		if (f->comps[i] == '.')
			f->ncomp++;
	f->comp = calloc(f->ncomp, sizeof(*f->comp));
	f->index = calloc(f->ncomp, sizeof(*f->index));
	if (!f->comp || !f->index)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory parsing sort");
	f->comp[0] = f->comps;
	for (i = 0, k = 1; i < len; i++)
		if (f->comps[i] == '.') {
			f->comps[i] = '\0';
			f->comp[k++] = f->comps + i + 1;
		}
	for (k = 0; k < f->ncomp; k++) {
		if (!*f->comp[k])
			return dfs_err_set(err, DFS_EINVAL,
					   "sort field '%s' has an empty path component", f->path);
		if (f->comp[k][0] == '$')
			return dfs_err_set(err, DFS_EINVAL,
					   "sort field '%s' has a component starting with '$'",
					   f->path);
		f->index[k] = comp_index(f->comp[k]);
	}
	return DFS_OK;
}

/* The direction a sort value means: 1 ascending, -1 descending, 0 anything else. */
static int sort_direction(const bson_iter_t *it)
{
	double d;

	switch (bson_iter_type(it)) {
	case BSON_TYPE_INT32:
		d = bson_iter_int32(it);
		break;
	case BSON_TYPE_INT64:
		d = (double)bson_iter_int64(it);
		break;
	case BSON_TYPE_DOUBLE:
		d = bson_iter_double(it);
		break;
	case BSON_TYPE_DECIMAL128: {
		bson_decimal128_t dec;
		char s[BSON_DECIMAL128_STRING];

		bson_iter_decimal128(it, &dec);
		bson_decimal128_to_string(&dec, s);
		d = strtod(s, NULL);
		break;
	}
	default:
		return 0;
	}
	return d == 1.0 ? 1 : d == -1.0 ? -1 : 0;
}

int query_sort_parse(const bson_t *spec, struct query_sort **out, struct dfs_err *err)
{
	struct query_sort *s;
	bson_iter_t it;
	int rc = DFS_OK;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory parsing sort");
	if (!bson_iter_init(&it, spec)) {
		rc = dfs_err_set(err, DFS_EINVAL, "sort specification is not valid bson");
		goto done;
	}
	s->f = calloc(bson_count_keys(spec) + 1, sizeof(*s->f));
	if (!s->f) {
		rc = dfs_err_set(err, DFS_ENOMEM, "out of memory parsing sort");
		goto done;
	}
	while (bson_iter_next(&it)) {
		const char *key = bson_iter_key(&it);
		int dir = sort_direction(&it);

		if (dir == 0) {
			bson_iter_t sub;

			if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) &&
			    bson_iter_find(&sub, "$meta")) {
				if (BSON_ITER_HOLDS_UTF8(&sub) &&
				    !strcmp(bson_iter_utf8(&sub, NULL), "textScore") &&
				    !bson_iter_next(&sub)) {
					rc = field_init(&s->f[s->n], key, bson_iter_key_len(&it),
							true, err);
					s->f[s->n++].meta = true;
					if (rc)
						goto done;
					continue;
				}
				rc = dfs_err_set(err, DFS_EINVAL,
						 "unsupported $meta sort at '%s': only {$meta: "
						 "\"textScore\"} is supported",
						 key);
			} else {
				struct dfs_buf b;

				dfs_buf_init(&b);
				store_codec_render_value(bson_iter_value(&it), &b, NULL);
				rc = dfs_err_set(err, DFS_EINVAL,
						 "bad sort value for '%s': %s (must be 1 or -1)",
						 key, b.data ? b.data : "?");
				dfs_buf_release(&b);
			}
			goto done;
		}
		rc = field_init(&s->f[s->n], key, bson_iter_key_len(&it), dir < 0, err);
		s->n++;
		if (rc)
			goto done;
	}
done:
	if (rc) {
		query_sort_free(s);
		return rc;
	}
	*out = s;
	return DFS_OK;
}

/* ---- sort keys ----------------------------------------------------------------------- */

enum cand_state { CAND_NONE, CAND_VALUE, CAND_EMPTY };

/* The best sort value of one field so far (design note 2). */
struct cand {
	enum cand_state state;
	bson_value_t v; /* CAND_VALUE: a view into the document */
	bool desc;	/* keep the largest instead of the smallest */
};

static const bson_value_t null_value = {.value_type = BSON_TYPE_NULL};

/* Order of a candidate against the "empty array" value: only MinKey is below it. */
static int cmp_empty(const bson_value_t *v)
{
	return v->value_type == BSON_TYPE_MINKEY ? -1 : 1;
}

static void offer_value(struct cand *c, const bson_value_t *v)
{
	int r;

	if (c->state == CAND_NONE) {
		r = -1;
	} else if (c->state == CAND_EMPTY) {
		r = cmp_empty(v);
	} else {
		r = store_value_compare(v, &c->v);
	}
	if (c->state == CAND_NONE || (c->desc ? r > 0 : r < 0)) {
		c->state = CAND_VALUE;
		c->v = *v;
	}
}

static void offer_empty(struct cand *c)
{
	if (c->state == CAND_NONE || (c->state == CAND_VALUE && !c->desc && cmp_empty(&c->v) > 0) ||
	    (c->state == CAND_VALUE && c->desc && cmp_empty(&c->v) < 0))
		c->state = CAND_EMPTY;
}

/* Design note 1: offers the values at components i.. of f, starting from the value at it. */
static void walk(const struct sort_field *f, bson_iter_t *it, size_t i, struct cand *c)
{
	bson_type_t t = bson_iter_type(it);
	bson_iter_t sub, elem;
	bool any = false;

	if (i == f->ncomp) {
		if (t != BSON_TYPE_ARRAY) {
			offer_value(c, bson_iter_value(it));
			return;
		}
		if (bson_iter_recurse(it, &sub))
			while (bson_iter_next(&sub)) {
				any = true;
				offer_value(c, bson_iter_value(&sub));
			}
		if (!any)
			offer_empty(c);
		return;
	}
	if (t == BSON_TYPE_DOCUMENT) {
		if (bson_iter_recurse(it, &sub) && bson_iter_find(&sub, f->comp[i]))
			walk(f, &sub, i + 1, c);
		else
			offer_value(c, &null_value);
		return;
	}
	if (t != BSON_TYPE_ARRAY || !bson_iter_recurse(it, &sub)) {
		offer_value(c, &null_value);
		return;
	}
	if (f->index[i] >= 0) {
		int64_t k = 0;

		while (bson_iter_next(&sub))
			if (k++ == f->index[i]) {
				walk(f, &sub, i + 1, c);
				return;
			}
		offer_value(c, &null_value);
		return;
	}
	while (bson_iter_next(&sub)) {
		any = true;
		if (BSON_ITER_HOLDS_DOCUMENT(&sub) && bson_iter_recurse(&sub, &elem) &&
		    bson_iter_find(&elem, f->comp[i]))
			walk(f, &elem, i + 1, c);
		else
			offer_value(c, &null_value);
	}
	if (!any)
		offer_value(c, &null_value);
}

/* The key of a document of a query without text score metadata: a $meta field is an error
 * (the planner refuses such a find first; shard merges, writes and tailable reads may not). */
static int sort_key(const struct query_sort *s, const bson_t *doc, const double *score,
		    bool have_meta, struct dfs_buf *key, struct dfs_err *err);

int query_sort_key(const struct query_sort *s, const bson_t *doc, struct dfs_buf *key,
		   struct dfs_err *err)
{
	return sort_key(s, doc, NULL, false, key, err);
}

bool query_sort_has_meta(const struct query_sort *s)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (s->f[i].meta)
			return true;
	return false;
}

int query_sort_key_score(const struct query_sort *s, const bson_t *doc, const double *score,
			 struct dfs_buf *key, struct dfs_err *err)
{
	return sort_key(s, doc, score, true, key, err);
}

static int sort_key(const struct query_sort *s, const bson_t *doc, const double *score,
		    bool have_meta, struct dfs_buf *key, struct dfs_err *err)
{
	size_t start = key->len, i;
	bson_iter_t it;
	int rc = DFS_OK;
	const bson_t *orig = doc; /* the _id tie-break stays binary */
	bson_t conv = BSON_INITIALIZER;

	if (s->coll) { /* collation.c note 1: the fields' strings as sort keys */
		query__collate_doc(s->coll, doc, &conv);
		doc = &conv;
	}

	for (i = 0; i < s->n; i++) {
		const struct sort_field *f = &s->f[i];
		struct cand c = {.state = CAND_NONE, .desc = f->desc};

		if (f->meta) {
			bson_value_t v = {.value_type = BSON_TYPE_DOUBLE};

			if (!have_meta) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "query requires text score metadata, but it is "
						 "not available");
				goto done;
			}
			/* a document without a score (from a non-$text branch of an $or, or
			 * made by $group) sorts as MongoDB's missing metadata: null */
			if (score)
				v.value.v_double = *score;
			if ((rc = store_key_append(key, score ? &v : &null_value, true, err)))
				goto done;
			continue;
		}

		if (bson_iter_init(&it, doc) && bson_iter_find(&it, f->comp[0]))
			walk(f, &it, 1, &c);
		if (c.state == CAND_EMPTY) {
			dfs_buf_putc(key, (char)(f->desc ? ~SORT_EMPTY_ARRAY : SORT_EMPTY_ARRAY));
			continue;
		}
		rc = store_key_append(key, c.state == CAND_VALUE ? &c.v : &null_value, f->desc,
				      err);
		if (rc) {
			dfs_err_prefix(err, "sort key of '%s': ", f->path);
			goto done;
		}
	}
	if (bson_iter_init_find(&it, orig, "_id"))
		rc = store_key_append(key, bson_iter_value(&it), false, err);
	else
		rc = store_key_append(key, &null_value, false, err);
	if (rc)
		dfs_err_prefix(err, "sort key of '_id': ");
done:
	bson_destroy(&conv);
	if (rc) {
		key->len = start;
		if (key->data)
			key->data[start] = '\0';
	}
	return rc;
}
