/*
 * plan.c - which plans exist for a find: index bounds of the filter's predicates (value
 * intervals in MongoDB's semantics, then half-open byte ranges of store_key encodings), the
 * candidate plans over the collection's indexes (equality and range prefixes, index-provided
 * sort, covered projections, $or by index union, hints), and the plan cache. It does not run
 * plans (exec.c) or describe them (explain.c).
 *
 * Design notes
 *  1. Bounds are never too narrow: every document the predicate matches has at least one
 *     index key inside the predicate's intervals. They may be wider; a plan is then marked
 *     inexact and FETCH (or a covered IXSCAN) re-applies the whole filter. Only equality,
 *     ranges and $in over scalar, non-null values on a non-multikey, non-hashed field are
 *     exact; a plan is exact when every top-level predicate is exact and its field's bounds
 *     are all applied to the byte ranges.
 *  2. Value intervals become byte ranges of keys: for an ascending field [a, b] is
 *     [enc(a), enc(b)+0xFF), (a, .. starts at enc(a)+0xFF and .., b) ends at enc(b). 0xFF
 *     never starts an encoding, ascending (brackets 1..127) or inverted (0x80..0xFE), so
 *     "prefix + 0xFF" lies above every key that starts with the prefix. A descending field
 *     maps [a, b] to [~enc(b), ~enc(a)+0xFF) with the same rules on the swapped ends.
 *  3. Compound bounds: leading fields bounded to points multiply into key prefixes, then
 *     one field's intervals are appended to each prefix; the fields after it are not
 *     bounded (explain shows them as [MinKey, MaxKey]). Past PRODUCT_MAX ranges the product
 *     stops and the scan is wider. On a multikey index two fields whose paths share their
 *     first component are not compounded (the elements they matched may differ), and two
 *     predicates on one multikey field are not intersected (MongoDB's multikey rules; a
 *     $elemMatch value form is one predicate, so its parts intersect).
 *  4. A sparse index is a candidate only when some predicate on one of its fields excludes
 *     missing (its intervals do not hold null, or $exists: true); a partial index only when
 *     the filter implies its partialFilterExpression (each part implied by one top-level
 *     predicate on the same path: intervals inside an exact part's intervals, or no null
 *     for $exists: true); a hashed field serves equality and $in only, never a sort or a
 *     range. A hint overrides all of this, as in MongoDB.
 *  5. The plan cache maps (database pointer, collection id, query shape) to the winner's
 *     desc string. An entry is stale when store_index_version() moved or the database's
 *     change feed advanced by CACHE_WRITES sequence numbers since it was stored (a cheap
 *     write counter: it counts writes to every collection of the database, so it errs on
 *     the side of re-planning).
 *  6. An index provides a sort when the sort fields follow its point-bounded prefix in
 *     order, all in the index's direction or all against it, none multikey. Documents
 *     whose sort keys tie then come in the order of the index's later fields (and _id
 *     within equal keys), where a SORT stage breaks ties by _id: as in MongoDB the order
 *     among ties is the plan's, so with skip or limit which of the tied documents are
 *     kept may differ between plans. The set of documents a plan returns without skip
 *     and limit, and the sequence of their sort keys, never depends on the plan.
 *  7. A filter with $text has one plan, MongoDB's: TEXT_MATCH over TEXT_OR over one
 *     IXSCAN per scan term of the collection's text index, each the byte range of the
 *     prefix fields' equalities then the term (every prefix field needs an equality). No
 *     other plan exists for it (a $text can only be answered by its index), and a text
 *     index serves nothing else. A $text in a branch of an $or (the root, or a child of
 *     the root $and; filter.c refuses it deeper) is planned as MongoDB plans TEXT under
 *     OR: FETCH over OR, whose first input is that text plan (the prefix equalities from
 *     its own branch) and whose other inputs are an IXSCAN of each other branch, under a
 *     FETCH with the branch as filter when the bounds are not exact. A branch no index can
 *     serve fails the query (MongoDB has no collection scan for it). The text branch
 *     comes first, so a document that both find keeps its score; one only the others
 *     find has none. The top FETCH reuses the documents its input fetched and applies the
 *     rest of the root $and, or nothing when the $or is the root.
 */
#include "plan_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRODUCT_MAX 200
#define CACHE_WRITES 1000
#define CACHE_MAX 512

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "docfs: out of memory\n");
		abort();
	}
	return p;
}

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size ? size : 1);
	if (!p) {
		fprintf(stderr, "docfs: out of memory\n");
		abort();
	}
	return p;
}

/* ---- interval lists ----------------------------------------------------------------- */

static void val_set(bson_value_t *v, bson_type_t t)
{
	memset(v, 0, sizeof(*v));
	v->value_type = t;
}

static void val_double(bson_value_t *v, double d)
{
	val_set(v, BSON_TYPE_DOUBLE);
	v->value.v_double = d;
}

static void ival_release(struct plan__ival *iv)
{
	bson_value_destroy(&iv->lo);
	bson_value_destroy(&iv->hi);
}

void plan__ivals_release(struct plan__ivals *s)
{
	for (int i = 0; i < s->n; i++)
		ival_release(&s->iv[i]);
	free(s->iv);
	memset(s, 0, sizeof(*s));
}

static void ivals_add(struct plan__ivals *s, const bson_value_t *lo, bool lo_in,
		      const bson_value_t *hi, bool hi_in)
{
	struct plan__ival *iv;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 4;
		s->iv = xrealloc(s->iv, (size_t)s->cap * sizeof(*s->iv));
	}
	iv = &s->iv[s->n++];
	bson_value_copy(lo, &iv->lo);
	bson_value_copy(hi, &iv->hi);
	iv->lo_in = lo_in;
	iv->hi_in = hi_in;
}

static void ivals_add_point(struct plan__ivals *s, const bson_value_t *v)
{
	ivals_add(s, v, true, v, true);
}

void plan__ivals_full(struct plan__ivals *s)
{
	bson_value_t lo, hi;

	val_set(&lo, BSON_TYPE_MINKEY);
	val_set(&hi, BSON_TYPE_MAXKEY);
	ivals_add(s, &lo, true, &hi, true);
}

bool plan__ivals_is_full(const struct plan__ivals *s)
{
	return s->n == 1 && s->iv[0].lo.value_type == BSON_TYPE_MINKEY && s->iv[0].lo_in &&
	       s->iv[0].hi.value_type == BSON_TYPE_MAXKEY && s->iv[0].hi_in;
}

/* Order of two lower ends (an excluded end starts later). */
static int lo_cmp(const struct plan__ival *a, const struct plan__ival *b)
{
	int c = store_value_compare(&a->lo, &b->lo);

	if (c)
		return c;
	return (a->lo_in ? 0 : 1) - (b->lo_in ? 0 : 1);
}

/* Order of two upper ends (an excluded end ends earlier). */
static int hi_cmp(const struct plan__ival *a, const struct plan__ival *b)
{
	int c = store_value_compare(&a->hi, &b->hi);

	if (c)
		return c;
	return (a->hi_in ? 1 : 0) - (b->hi_in ? 1 : 0);
}

static bool ival_empty(const struct plan__ival *iv)
{
	int c = store_value_compare(&iv->lo, &iv->hi);

	return c > 0 || (c == 0 && !(iv->lo_in && iv->hi_in));
}

/* Does a end before b starts with a gap (no value in both and none between)? */
static bool ival_before(const struct plan__ival *a, const struct plan__ival *b)
{
	int c = store_value_compare(&a->hi, &b->lo);

	return c < 0 || (c == 0 && !a->hi_in && !b->lo_in);
}

static int ival_qsort(const void *a, const void *b)
{
	return lo_cmp(a, b);
}

/* Sorts and merges overlapping intervals, drops empty ones. */
static void ivals_normalize(struct plan__ivals *s)
{
	int w = 0;

	for (int i = 0; i < s->n; i++) {
		if (ival_empty(&s->iv[i]))
			ival_release(&s->iv[i]);
		else
			s->iv[w++] = s->iv[i];
	}
	s->n = w;
	if (s->n > 1)
		qsort(s->iv, (size_t)s->n, sizeof(*s->iv), ival_qsort);
	w = 0;
	for (int i = 0; i < s->n; i++) {
		struct plan__ival *last = w ? &s->iv[w - 1] : NULL;

		if (last && !ival_before(last, &s->iv[i])) {
			if (hi_cmp(&s->iv[i], last) > 0) {
				bson_value_destroy(&last->hi);
				bson_value_copy(&s->iv[i].hi, &last->hi);
				last->hi_in = s->iv[i].hi_in;
			}
			ival_release(&s->iv[i]);
			continue;
		}
		s->iv[w++] = s->iv[i];
	}
	s->n = w;
}

void plan__ivals_union(struct plan__ivals *a, const struct plan__ivals *b)
{
	for (int i = 0; i < b->n; i++)
		ivals_add(a, &b->iv[i].lo, b->iv[i].lo_in, &b->iv[i].hi, b->iv[i].hi_in);
	a->exact = a->exact && b->exact;
	ivals_normalize(a);
}

void plan__ivals_intersect(struct plan__ivals *a, const struct plan__ivals *b)
{
	struct plan__ivals r = {0};

	for (int i = 0; i < a->n; i++) {
		for (int j = 0; j < b->n; j++) {
			const struct plan__ival *x = &a->iv[i], *y = &b->iv[j];
			const struct plan__ival *lo = lo_cmp(x, y) >= 0 ? x : y;
			const struct plan__ival *hi = hi_cmp(x, y) <= 0 ? x : y;
			struct plan__ival t = {lo->lo, hi->hi, lo->lo_in, hi->hi_in};

			if (!ival_empty(&t))
				ivals_add(&r, &lo->lo, lo->lo_in, &hi->hi, hi->hi_in);
		}
	}
	r.exact = a->exact && b->exact;
	plan__ivals_release(a);
	*a = r;
	ivals_normalize(a);
}

/* Is every interval of q inside one interval of p? */
static bool ivals_subset(const struct plan__ivals *q, const struct plan__ivals *p)
{
	for (int i = 0; i < q->n; i++) {
		bool in = false;

		for (int j = 0; j < p->n && !in; j++)
			in = lo_cmp(&p->iv[j], &q->iv[i]) <= 0 && hi_cmp(&q->iv[i], &p->iv[j]) <= 0;
		if (!in)
			return false;
	}
	return true;
}

static bool ivals_has_null(const struct plan__ivals *s)
{
	bson_value_t null;
	struct plan__ival p;

	val_set(&null, BSON_TYPE_NULL);
	p.lo = p.hi = null;
	p.lo_in = p.hi_in = true;
	for (int i = 0; i < s->n; i++)
		if (lo_cmp(&s->iv[i], &p) <= 0 && hi_cmp(&p, &s->iv[i]) <= 0)
			return true;
	return false;
}

/* ---- brackets ------------------------------------------------------------------------ */

static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};

/* The smallest value of the bracket of type t (an interval's lower end for "all of t"). */
static void bracket_min(bson_type_t t, bson_value_t *v)
{
	switch (t) {
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DECIMAL128:
		val_double(v, NAN);
		break;
	case BSON_TYPE_UTF8:
	case BSON_TYPE_SYMBOL:
		val_set(v, BSON_TYPE_UTF8);
		v->value.v_utf8.str = (char *)"";
		break;
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		val_set(v, t);
		v->value.v_doc.data = (uint8_t *)empty_doc;
		v->value.v_doc.data_len = 5;
		break;
	case BSON_TYPE_BINARY:
		val_set(v, t);
		v->value.v_binary.data = (uint8_t *)empty_doc;
		break;
	case BSON_TYPE_OID:
	case BSON_TYPE_BOOL:
		val_set(v, t);
		break;
	case BSON_TYPE_DATE_TIME:
		val_set(v, t);
		v->value.v_datetime = INT64_MIN;
		break;
	case BSON_TYPE_TIMESTAMP:
		val_set(v, t);
		break;
	case BSON_TYPE_REGEX:
		val_set(v, t);
		v->value.v_regex.regex = (char *)"";
		v->value.v_regex.options = (char *)"";
		break;
	case BSON_TYPE_DBPOINTER:
		val_set(v, t);
		v->value.v_dbpointer.collection = (char *)"";
		break;
	case BSON_TYPE_CODE:
		val_set(v, t);
		v->value.v_code.code = (char *)"";
		break;
	case BSON_TYPE_CODEWSCOPE:
		val_set(v, t);
		v->value.v_codewscope.code = (char *)"";
		v->value.v_codewscope.scope_data = (uint8_t *)empty_doc;
		v->value.v_codewscope.scope_len = 5;
		break;
	case BSON_TYPE_NULL:
	case BSON_TYPE_UNDEFINED:
		val_set(v, BSON_TYPE_NULL);
		break;
	case BSON_TYPE_MINKEY:
		val_set(v, BSON_TYPE_MINKEY);
		break;
	default:
		val_set(v, BSON_TYPE_MAXKEY);
		break;
	}
}

/* Types in bracket order, one per bracket. */
static const bson_type_t bracket_types[] = {
	BSON_TYPE_MINKEY,    BSON_TYPE_NULL,	  BSON_TYPE_DOUBLE,	BSON_TYPE_UTF8,
	BSON_TYPE_DOCUMENT,  BSON_TYPE_ARRAY,	  BSON_TYPE_BINARY,	BSON_TYPE_OID,
	BSON_TYPE_BOOL,	     BSON_TYPE_DATE_TIME, BSON_TYPE_TIMESTAMP,	BSON_TYPE_REGEX,
	BSON_TYPE_DBPOINTER, BSON_TYPE_CODE,	  BSON_TYPE_CODEWSCOPE, BSON_TYPE_MAXKEY,
};

/* Appends "all values of the bracket of t" to s: [min(t), min(next)), numbers [nan, inf]. */
static void ivals_add_bracket(struct plan__ivals *s, bson_type_t t)
{
	int br = store_type_bracket(t);
	size_t i, n = sizeof(bracket_types) / sizeof(bracket_types[0]);
	bson_value_t lo, hi;

	if (t == BSON_TYPE_MINKEY || t == BSON_TYPE_MAXKEY || t == BSON_TYPE_NULL ||
	    t == BSON_TYPE_UNDEFINED) {
		bracket_min(t, &lo);
		ivals_add_point(s, &lo);
		return;
	}
	bracket_min(t, &lo);
	if (br == store_type_bracket(BSON_TYPE_DOUBLE)) {
		val_double(&hi, INFINITY);
		ivals_add(s, &lo, true, &hi, true);
		return;
	}
	for (i = 0; i < n; i++)
		if (store_type_bracket(bracket_types[i]) > br)
			break;
	bracket_min(i < n ? bracket_types[i] : BSON_TYPE_MAXKEY, &hi);
	ivals_add(s, &lo, true, &hi, i >= n);
}

/* ---- predicate bounds ----------------------------------------------------------------- */

static bool is_nan(const bson_value_t *v)
{
	if (v->value_type == BSON_TYPE_DOUBLE)
		return isnan(v->value.v_double);
	if (v->value_type == BSON_TYPE_DECIMAL128) {
		char s[BSON_DECIMAL128_STRING];

		bson_decimal128_to_string(&v->value.v_decimal128, s);
		return strstr(s, "NaN") != NULL;
	}
	return false;
}

/* A value whose equality bounds are one exact point. */
static bool scalar_exact(const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_NULL:
	case BSON_TYPE_UNDEFINED:
	case BSON_TYPE_ARRAY:
	case BSON_TYPE_REGEX:
	case BSON_TYPE_MINKEY:
	case BSON_TYPE_MAXKEY:
		return false;
	default:
		return true;
	}
}

static void hashed_point(struct plan__ivals *s, const bson_value_t *v)
{
	bson_value_t h;

	val_set(&h, BSON_TYPE_INT64);
	h.value.v_int64 = store_index_hash(v);
	ivals_add_point(s, &h);
}

/* Equality with v: the point, plus for an array its first element (or undefined). */
static void eq_bounds(struct plan__ivals *s, const bson_value_t *v)
{
	ivals_add_point(s, v);
	if (v->value_type == BSON_TYPE_ARRAY) {
		bson_t arr;
		bson_iter_t it;
		bson_value_t u;

		if (bson_init_static(&arr, v->value.v_doc.data, v->value.v_doc.data_len) &&
		    bson_iter_init(&it, &arr) && bson_iter_next(&it)) {
			ivals_add_point(s, bson_iter_value(&it));
		} else {
			val_set(&u, BSON_TYPE_NULL); /* undefined encodes as null */
			ivals_add_point(s, &u);
		}
	}
	if (!scalar_exact(v))
		s->exact = false;
}

/* $gt/$gte/$lt/$lte v within v's type bracket. */
static bool range_bounds(int kind, const bson_value_t *v, struct plan__ivals *s)
{
	bson_type_t t = v->value_type;
	bson_value_t lo, hi, top;
	size_t i, n = sizeof(bracket_types) / sizeof(bracket_types[0]);
	int br = store_type_bracket(t);
	bool top_in;

	if (t == BSON_TYPE_ARRAY)
		return false;
	if (t == BSON_TYPE_MINKEY || t == BSON_TYPE_MAXKEY) {
		plan__ivals_full(s);
		s->exact = false;
		return true;
	}
	if (t == BSON_TYPE_NULL || t == BSON_TYPE_UNDEFINED || is_nan(v)) {
		/* $gte null matches null and missing ($gt null nothing), NaN only NaN: the
		 * point, inexact */
		if (t == BSON_TYPE_UNDEFINED)
			val_set(&lo, BSON_TYPE_NULL);
		else
			lo = *v;
		ivals_add_point(s, &lo);
		s->exact = false;
		return true;
	}
	if (br == store_type_bracket(BSON_TYPE_DOUBLE)) {
		val_double(&lo, -INFINITY);
		val_double(&top, INFINITY);
		top_in = true;
	} else {
		bracket_min(t, &lo);
		for (i = 0; i < n; i++)
			if (store_type_bracket(bracket_types[i]) > br)
				break;
		bracket_min(i < n ? bracket_types[i] : BSON_TYPE_MAXKEY, &top);
		top_in = i >= n;
	}
	hi = top;
	switch (kind) {
	case QK_GT:
	case QK_GTE:
		ivals_add(s, v, kind == QK_GTE, &hi, top_in);
		break;
	default:
		ivals_add(s, &lo, true, v, kind == QK_LTE);
		break;
	}
	ivals_normalize(s);
	return true;
}

/* A regex: a prefix range for /^literal/ without i, m or x, else all strings; plus the
 * regex value itself (it matches a stored regex equal to it). */
static void regex_bounds(const struct query__regex *re, struct plan__ivals *s)
{
	const char *p = re->pattern;
	char prefix[256];
	size_t n = 0;
	bson_value_t lo, hi, rv;
	bool simple = p[0] == '^' && !strpbrk(re->options, "imx") && !strchr(p, '|');

	if (simple) {
		for (p++; *p && n < sizeof(prefix) - 1; p++) {
			unsigned char c = (unsigned char)*p;

			if (c >= 0x80 || strchr("\\.*+?()[]{}|^$", c))
				break;
			prefix[n++] = (char)c;
		}
		if (n && (*p == '*' || *p == '?' || *p == '{'))
			n--; /* the last literal is optional */
	}
	if (simple && n > 0) {
		char up[256];

		memcpy(up, prefix, n);
		up[n - 1]++; /* ASCII, so no carry */
		val_set(&lo, BSON_TYPE_UTF8);
		lo.value.v_utf8.str = prefix;
		lo.value.v_utf8.len = (uint32_t)n;
		prefix[n] = '\0';
		up[n] = '\0';
		val_set(&hi, BSON_TYPE_UTF8);
		hi.value.v_utf8.str = up;
		hi.value.v_utf8.len = (uint32_t)n;
		ivals_add(s, &lo, true, &hi, false);
	} else {
		ivals_add_bracket(s, BSON_TYPE_UTF8);
	}
	val_set(&rv, BSON_TYPE_REGEX);
	rv.value.v_regex.regex = re->pattern;
	rv.value.v_regex.options = re->options;
	ivals_add_point(s, &rv);
	s->exact = false;
}

static const bson_type_t type_codes[32] = {
	[1] = BSON_TYPE_DOUBLE,	     [2] = BSON_TYPE_UTF8,	 [3] = BSON_TYPE_DOCUMENT,
	[4] = BSON_TYPE_ARRAY,	     [5] = BSON_TYPE_BINARY,	 [6] = BSON_TYPE_UNDEFINED,
	[7] = BSON_TYPE_OID,	     [8] = BSON_TYPE_BOOL,	 [9] = BSON_TYPE_DATE_TIME,
	[10] = BSON_TYPE_NULL,	     [11] = BSON_TYPE_REGEX,	 [12] = BSON_TYPE_DBPOINTER,
	[13] = BSON_TYPE_CODE,	     [14] = BSON_TYPE_SYMBOL,	 [15] = BSON_TYPE_CODEWSCOPE,
	[16] = BSON_TYPE_INT32,	     [17] = BSON_TYPE_TIMESTAMP, [18] = BSON_TYPE_INT64,
	[19] = BSON_TYPE_DECIMAL128,
};

static bool type_bounds(const struct query_expr *e, struct plan__ivals *s)
{
	if (e->types_lo & (1u << 4)) {
		plan__ivals_full(s); /* arrays: their elements are the keys */
	} else {
		for (int b = 1; b < 32; b++)
			if ((e->types_lo & (1u << b)) && type_codes[b])
				ivals_add_bracket(s, type_codes[b]);
		if (e->type_number)
			ivals_add_bracket(s, BSON_TYPE_DOUBLE);
		if (e->type_minkey)
			ivals_add_bracket(s, BSON_TYPE_MINKEY);
		if (e->type_maxkey)
			ivals_add_bracket(s, BSON_TYPE_MAXKEY);
	}
	s->exact = false;
	ivals_normalize(s);
	return true;
}

/* The complement of a set of exact points within [MinKey, MaxKey]. */
static void complement_points(const bson_value_t *pts, int n, struct plan__ivals *s)
{
	bson_value_t lo;
	bool lo_in = true;

	val_set(&lo, BSON_TYPE_MINKEY);
	for (int i = 0; i < n; i++) {
		ivals_add(s, &lo, lo_in, &pts[i], false);
		lo = pts[i];
		lo_in = false;
	}
	{
		bson_value_t hi;

		val_set(&hi, BSON_TYPE_MAXKEY);
		ivals_add(s, &lo, lo_in, &hi, true);
	}
	ivals_normalize(s);
}

static bool leaf_bounds(const struct query_expr *e, bool hashed, struct plan__ivals *out)
{
	out->exact = true;
	if (hashed) {
		if (e->kind == QK_EQ && e->val.value_type != BSON_TYPE_ARRAY &&
		    e->val.value_type != BSON_TYPE_REGEX) {
			hashed_point(out, &e->val);
		} else if (e->kind == QK_IN && e->nres == 0) {
			for (int i = 0; i < e->nvals; i++) {
				if (e->vals[i].value_type == BSON_TYPE_ARRAY)
					return false;
				hashed_point(out, &e->vals[i]);
			}
		} else {
			return false;
		}
		out->exact = false;
		ivals_normalize(out);
		return true;
	}
	switch (e->kind) {
	case QK_EQ:
		eq_bounds(out, &e->val);
		ivals_normalize(out);
		return true;
	case QK_GT:
	case QK_GTE:
	case QK_LT:
	case QK_LTE:
		return range_bounds(e->kind, &e->val, out);
	case QK_IN:
		for (int i = 0; i < e->nvals; i++)
			eq_bounds(out, &e->vals[i]);
		for (int i = 0; i < e->nres; i++)
			regex_bounds(e->res[i], out);
		ivals_normalize(out);
		return true;
	case QK_REGEX:
		regex_bounds(e->res[0], out);
		ivals_normalize(out);
		return true;
	case QK_EXISTS:
		plan__ivals_full(out);
		out->exact = false;
		return true;
	case QK_TYPE:
		return type_bounds(e, out);
	case QK_ELEM_VAL: {
		bool any = false;

		for (int i = 0; i < e->nkids; i++) {
			struct plan__ivals k = {0};

			/* a nested $elemMatch or $not describes an element that is an array
			 * (indexed whole) or a negation: no bounds from it */
			if (e->kids[i]->path.n != 0 || e->kids[i]->kind == QK_ELEM_VAL ||
			    e->kids[i]->kind == QK_ELEM_OBJ || e->kids[i]->kind == QK_NOT ||
			    !leaf_bounds(e->kids[i], false, &k)) {
				plan__ivals_release(&k);
				continue;
			}
			if (!any)
				*out = k;
			else {
				plan__ivals_intersect(out, &k);
				plan__ivals_release(&k);
			}
			any = true;
		}
		out->exact = false;
		return any;
	}
	case QK_NOT: {
		const struct query_expr *k = e->kids[0];

		if (k->kind == QK_EXISTS) {
			bson_value_t null;

			val_set(&null, BSON_TYPE_NULL);
			ivals_add_point(out, &null);
			out->exact = false;
			return true;
		}
		if (k->kind == QK_EQ && scalar_exact(&k->val) && !is_nan(&k->val)) {
			complement_points(&k->val, 1, out);
			out->exact = false;
			return true;
		}
		if (k->kind == QK_IN && k->nres == 0 && !k->has_null) {
			for (int i = 0; i < k->nvals; i++)
				if (!scalar_exact(&k->vals[i]) || is_nan(&k->vals[i]))
					return false;
			complement_points(k->vals, k->nvals, out);
			out->exact = false;
			return true;
		}
		return false;
	}
	default:
		return false;
	}
}

bool plan__pred_bounds(const struct query_expr *e, bool hashed, struct plan__ivals *out)
{
	memset(out, 0, sizeof(*out));
	if (leaf_bounds(e, hashed, out))
		return true;
	plan__ivals_release(out);
	return false;
}

/* The dotted path a top-level predicate constrains, or NULL. */
static const char *pred_path(const struct query_expr *e)
{
	if (e->kind == QK_NOT && e->nkids == 1 && e->kids[0]->path.n > 0)
		return e->kids[0]->path.dotted;
	if (e->path.n > 0)
		return e->path.dotted;
	return NULL;
}

/* ---- byte ranges ---------------------------------------------------------------------- */

void plan__ranges_free(struct plan__range *r, int n)
{
	for (int i = 0; i < n; i++) {
		dfs_buf_release(&r[i].lo);
		dfs_buf_release(&r[i].hi);
	}
	free(r);
}

static int enc(struct dfs_buf *b, const bson_value_t *v, bool desc, struct dfs_err *err)
{
	return store_key_append(b, v, desc, err);
}

int plan__ranges_of(const struct plan__ivals *s, int dir, const struct dfs_buf *pre,
		    struct plan__range **out, int *n, struct dfs_err *err)
{
	struct plan__range *r = xcalloc((size_t)s->n, sizeof(*r));
	bool desc = dir < 0;
	int rc = 0;

	for (int i = 0; i < s->n; i++) {
		const struct plan__ival *iv = &s->iv[desc ? s->n - 1 - i : i];
		const bson_value_t *l = desc ? &iv->hi : &iv->lo, *h = desc ? &iv->lo : &iv->hi;
		bool l_in = desc ? iv->hi_in : iv->lo_in, h_in = desc ? iv->lo_in : iv->hi_in;

		dfs_buf_init(&r[i].lo);
		dfs_buf_init(&r[i].hi);
		dfs_buf_append(&r[i].lo, pre->data, pre->len);
		dfs_buf_append(&r[i].hi, pre->data, pre->len);
		if ((rc = enc(&r[i].lo, l, desc, err)) || (rc = enc(&r[i].hi, h, desc, err))) {
			plan__ranges_free(r, i + 1);
			return rc;
		}
		if (!l_in)
			dfs_buf_putc(&r[i].lo, (char)0xff);
		if (h_in)
			dfs_buf_putc(&r[i].hi, (char)0xff);
	}
	*out = r;
	*n = s->n;
	return 0;
}

/* ---- interval strings (explain) ------------------------------------------------------- */

static void value_describe(const bson_value_t *v, struct dfs_buf *out)
{
	struct dfs_err err = {0};

	switch (v->value_type) {
	case BSON_TYPE_MINKEY:
		dfs_buf_puts(out, "MinKey");
		return;
	case BSON_TYPE_MAXKEY:
		dfs_buf_puts(out, "MaxKey");
		return;
	case BSON_TYPE_NULL:
		dfs_buf_puts(out, "null");
		return;
	case BSON_TYPE_UNDEFINED:
		dfs_buf_puts(out, "undefined");
		return;
	case BSON_TYPE_INT32:
		dfs_buf_printf(out, "%d", v->value.v_int32);
		return;
	case BSON_TYPE_INT64:
		dfs_buf_printf(out, "%lld", (long long)v->value.v_int64);
		return;
	case BSON_TYPE_DOUBLE: {
		double d = v->value.v_double;
		char s[40];

		if (isnan(d)) {
			dfs_buf_puts(out, "nan.0");
		} else if (isinf(d)) {
			dfs_buf_puts(out, d < 0 ? "-inf.0" : "inf.0");
		} else {
			snprintf(s, sizeof(s), "%.17g", d);
			for (int p = 1; p < 17; p++) {
				snprintf(s, sizeof(s), "%.*g", p, d);
				if (strtod(s, NULL) == d)
					break;
			}
			dfs_buf_puts(out, s);
			if (!strpbrk(s, ".en"))
				dfs_buf_puts(out, ".0");
		}
		return;
	}
	case BSON_TYPE_DATE_TIME:
		dfs_buf_printf(out, "new Date(%lld)", (long long)v->value.v_datetime);
		return;
	case BSON_TYPE_TIMESTAMP:
		dfs_buf_printf(out, "Timestamp(%u, %u)", v->value.v_timestamp.timestamp,
			       v->value.v_timestamp.increment);
		return;
	case BSON_TYPE_BOOL:
		dfs_buf_puts(out, v->value.v_bool ? "true" : "false");
		return;
	case BSON_TYPE_OID: {
		char hex[25];

		bson_oid_to_string(&v->value.v_oid, hex);
		dfs_buf_printf(out, "ObjectId('%s')", hex);
		return;
	}
	case BSON_TYPE_REGEX:
		dfs_buf_printf(out, "/%s/%s", v->value.v_regex.regex,
			       v->value.v_regex.options ? v->value.v_regex.options : "");
		return;
	default:
		if (store_codec_render_value(v, out, &err))
			dfs_buf_puts(out, "?");
		return;
	}
}

void plan__ival_describe(const struct plan__ival *iv, struct dfs_buf *out)
{
	dfs_buf_putc(out, iv->lo_in ? '[' : '(');
	value_describe(&iv->lo, out);
	dfs_buf_puts(out, ", ");
	value_describe(&iv->hi, out);
	dfs_buf_putc(out, iv->hi_in ? ']' : ')');
}

/* ---- plan trees ----------------------------------------------------------------------- */

static struct plan__node *node_new(int stage, struct plan__node *kid)
{
	struct plan__node *n = xcalloc(1, sizeof(*n));

	n->stage = stage;
	n->cur_range = -1;
	if (kid) {
		n->kids = xcalloc(1, sizeof(*n->kids));
		n->kids[0] = kid;
		n->nkids = 1;
	}
	return n;
}

static void node_add(struct plan__node *n, struct plan__node *kid)
{
	n->kids = xrealloc(n->kids, (size_t)(n->nkids + 1) * sizeof(*n->kids));
	n->kids[n->nkids++] = kid;
}

void plan__node_free(struct plan__node *n)
{
	if (!n)
		return;
	plan__reset(n, false);
	for (int i = 0; i < n->nkids; i++)
		plan__node_free(n->kids[i]);
	free(n->kids);
	if (n->fb) {
		for (int i = 0; i < n->ix->nfields; i++)
			plan__ivals_release(&n->fb[i]);
		free(n->fb);
	}
	plan__ranges_free(n->ranges, n->nranges);
	if (n->text_prefix)
		bson_destroy(n->text_prefix);
	if (n->rest) {
		free(n->rest->kids); /* the kids are the filter's */
		free(n->rest);
	}
	free(n);
}

void plan__cands_free(struct plan__cand *c, int n)
{
	for (int i = 0; i < n; i++)
		plan__node_free(c[i].root);
	free(c);
}

/* The top-level predicates of a filter: the kids of a root $and, or the root itself (then
 * *one holds it and *out points at one). */
static void preds_of(const struct query_expr *e, const struct query_expr **one,
		     const struct query_expr ***out, int *n)
{
	if (!e) {
		*out = NULL;
		*n = 0;
	} else if (e->kind == QK_AND) {
		*out = (const struct query_expr **)e->kids;
		*n = e->nkids;
	} else {
		*one = e;
		*out = one;
		*n = 1;
	}
}

static const char *first_comp_end(const char *p)
{
	const char *d = strchr(p, '.');

	return d ? d : p + strlen(p);
}

static bool share_first_comp(const char *a, const char *b)
{
	size_t la = (size_t)(first_comp_end(a) - a), lb = (size_t)(first_comp_end(b) - b);

	return la == lb && !memcmp(a, b, la);
}

/* Bounds of ix for the predicates (note 3). */
struct ixbounds {
	struct plan__ivals fb[STORE_IX_MAX_FIELDS];
	bool from_pred[STORE_IX_MAX_FIELDS]; /* a predicate gave the field's bounds */
	bool applied[STORE_IX_MAX_FIELDS];   /* the bounds are in the byte ranges */
	bool excl_missing;		     /* some predicate on a field excludes missing */
	bool exact;			     /* note 1 */
	int eqprefix;			     /* leading single-point fields */
};

static void ixbounds_release(struct ixbounds *b, int nfields)
{
	for (int i = 0; i < nfields; i++)
		plan__ivals_release(&b->fb[i]);
}

static void ixbounds_compute(const struct store_index *ix, const struct query_expr *const *preds,
			     int npreds, struct ixbounds *b)
{
	bool consumed_exact[64] = {0};
	int consumed_field[64];
	int stop = ix->nfields;

	memset(b, 0, sizeof(*b));
	for (int j = 0; j < npreds && j < 64; j++)
		consumed_field[j] = -1;
	for (int i = 0; i < ix->nfields; i++) {
		const char *path = ix->field[i].path;
		bool hashed = ix->field[i].dir == 0, mk = (ix->multikey >> i) & 1;

		for (int j = 0; j < npreds; j++) {
			const char *pp = pred_path(preds[j]);
			struct plan__ivals s;

			if (!pp || strcmp(pp, path))
				continue;
			if (b->from_pred[i] && (mk || hashed))
				continue; /* one predicate per multikey field */
			if (!plan__pred_bounds(preds[j], hashed, &s))
				continue;
			if (preds[j]->kind == QK_EXISTS || !ivals_has_null(&s))
				b->excl_missing = true;
			if (j < 64) {
				consumed_field[j] = i;
				consumed_exact[j] = s.exact && !mk && !hashed;
			}
			if (!b->from_pred[i]) {
				b->fb[i] = s;
				b->from_pred[i] = true;
			} else {
				plan__ivals_intersect(&b->fb[i], &s);
				plan__ivals_release(&s);
			}
		}
		if (!b->from_pred[i])
			plan__ivals_full(&b->fb[i]);
	}
	/* Note 3: no compounding across fields sharing an array on a multikey index. */
	if (ix->multikey)
		for (int i = 1; i < ix->nfields && stop == ix->nfields; i++)
			for (int k = 0; k < i; k++)
				if (share_first_comp(ix->field[i].path, ix->field[k].path) &&
				    (((ix->multikey >> i) & 1) || ((ix->multikey >> k) & 1)))
					stop = i;
	{
		long product = 1;
		int i;

		for (i = 0; i < stop; i++) {
			const struct plan__ivals *s = &b->fb[i];
			bool points = s->n > 0;

			for (int k = 0; k < s->n && points; k++)
				points = s->iv[k].lo_in && s->iv[k].hi_in &&
					 store_value_compare(&s->iv[k].lo, &s->iv[k].hi) == 0;
			if (!points || product * s->n > PRODUCT_MAX)
				break;
			product *= s->n;
			b->applied[i] = true;
			if (s->n == 1 && b->eqprefix == i)
				b->eqprefix = i + 1;
		}
		if (i < stop && !plan__ivals_is_full(&b->fb[i]) &&
		    product * (b->fb[i].n ? b->fb[i].n : 1) <= 2 * PRODUCT_MAX)
			b->applied[i] = true;
	}
	b->exact = npreds <= 64;
	for (int j = 0; j < npreds && j < 64; j++)
		if (consumed_field[j] < 0 || !consumed_exact[j] || !b->applied[consumed_field[j]])
			b->exact = false;
}

static int range_qsort(const void *a, const void *b)
{
	const struct plan__range *x = a, *y = b;
	size_t n = x->lo.len < y->lo.len ? x->lo.len : y->lo.len;
	int c = memcmp(x->lo.data ? x->lo.data : "", y->lo.data ? y->lo.data : "", n);

	if (c)
		return c;
	return x->lo.len < y->lo.len ? -1 : x->lo.len > y->lo.len;
}

static int key_of(const struct store_index_field *f, const bson_value_t *v, struct dfs_buf *out,
		  struct dfs_err *err)
{
	return store_key_append(out, v, f->dir < 0, err);
}

/* The byte ranges of the applied bounds: the product of point prefixes, then one field's
 * intervals (note 3). */
static int ixbounds_ranges(const struct store_index *ix, const struct ixbounds *b,
			   struct plan__range **out, int *nout, struct dfs_err *err)
{
	struct dfs_buf *pre = xcalloc(1, sizeof(*pre)), *next;
	int npre = 1, i, rc = 0;
	struct plan__range *r = NULL;
	int nr = 0;

	dfs_buf_init(&pre[0]);
	for (i = 0; i < ix->nfields && b->applied[i]; i++) {
		const struct plan__ivals *s = &b->fb[i];
		bool points = true;

		for (int k = 0; k < s->n && points; k++)
			points = s->iv[k].lo_in && s->iv[k].hi_in &&
				 store_value_compare(&s->iv[k].lo, &s->iv[k].hi) == 0;
		if (!points)
			break;
		next = xcalloc((size_t)(npre * s->n) + 1, sizeof(*next));
		for (int p = 0; p < npre; p++)
			for (int k = 0; k < s->n; k++) {
				struct dfs_buf *nb = &next[p * s->n + k];

				dfs_buf_init(nb);
				dfs_buf_append(nb, pre[p].data, pre[p].len);
				if (!rc)
					rc = key_of(&ix->field[i], &s->iv[k].lo, nb, err);
			}
		for (int p = 0; p < npre; p++)
			dfs_buf_release(&pre[p]);
		free(pre);
		pre = next;
		npre *= s->n;
		if (rc)
			goto done;
	}
	if (i < ix->nfields && b->applied[i]) {
		for (int p = 0; p < npre; p++) {
			struct plan__range *pr;
			int np;

			if ((rc = plan__ranges_of(&b->fb[i], ix->field[i].dir, &pre[p], &pr, &np,
						  err)))
				goto done;
			r = xrealloc(r, (size_t)(nr + np) * sizeof(*r));
			memcpy(r + nr, pr, (size_t)np * sizeof(*r));
			nr += np;
			free(pr);
		}
	} else {
		r = xcalloc((size_t)npre, sizeof(*r));
		for (int p = 0; p < npre; p++) {
			dfs_buf_init(&r[p].lo);
			dfs_buf_init(&r[p].hi);
			dfs_buf_append(&r[p].lo, pre[p].data, pre[p].len);
			dfs_buf_append(&r[p].hi, pre[p].data, pre[p].len);
			dfs_buf_putc(&r[p].hi, (char)0xff);
		}
		nr = npre;
	}
	if (nr > 1)
		qsort(r, (size_t)nr, sizeof(*r), range_qsort);
	*out = r;
	*nout = nr;
	r = NULL;
done:
	for (int p = 0; p < npre; p++)
		dfs_buf_release(&pre[p]);
	free(pre);
	if (r)
		plan__ranges_free(r, nr);
	return rc;
}

static int ixscan_new(const struct plan__query *q, int ixpos, struct ixbounds *b, bool backward,
		      struct plan__node **out, struct dfs_err *err)
{
	const struct store_index *ix = &q->ixs[ixpos];
	struct plan__node *n = node_new(PS_IXSCAN, NULL);
	int rc;

	n->ix = ix;
	n->ixpos = ixpos;
	n->backward = backward;
	n->multikey = ix->multikey != 0;
	if ((rc = ixbounds_ranges(ix, b, &n->ranges, &n->nranges, err))) {
		free(n);
		return rc;
	}
	n->fb = xcalloc((size_t)ix->nfields, sizeof(*n->fb));
	for (int i = 0; i < ix->nfields; i++) {
		if (b->applied[i]) {
			n->fb[i] = b->fb[i];
		} else {
			plan__ivals_full(&n->fb[i]);
			plan__ivals_release(&b->fb[i]);
		}
		memset(&b->fb[i], 0, sizeof(b->fb[i]));
	}
	*out = n;
	return 0;
}

/* ---- partial index implication (note 4) ------------------------------------------------- */

static bool implied_part(const struct query_expr *p, const struct query_expr *const *preds,
			 int npreds)
{
	const char *pp = pred_path(p);
	struct plan__ivals ps;
	bool ok = false;

	if (!pp || p->kind == QK_NOT)
		return false;
	if (p->kind != QK_EXISTS && !plan__pred_bounds(p, false, &ps))
		return false;
	if (p->kind != QK_EXISTS && !ps.exact) {
		plan__ivals_release(&ps);
		return false;
	}
	for (int j = 0; j < npreds && !ok; j++) {
		const char *qp = pred_path(preds[j]);
		struct plan__ivals qs;

		if (!qp || strcmp(qp, pp) || preds[j]->kind == QK_NOT)
			continue;
		if (p->kind == QK_EXISTS && preds[j]->kind == QK_EXISTS) {
			ok = true;
			continue;
		}
		if (!plan__pred_bounds(preds[j], false, &qs))
			continue;
		ok = p->kind == QK_EXISTS ? !ivals_has_null(&qs) : ivals_subset(&qs, &ps);
		plan__ivals_release(&qs);
	}
	if (p->kind != QK_EXISTS)
		plan__ivals_release(&ps);
	return ok;
}

static bool partial_implied(const struct store_index *ix, const struct query_expr *const *preds,
			    int npreds)
{
	struct query_expr *pf = NULL;
	const struct query_expr **parts;
	int nparts;
	bool ok = true;

	if (query_filter_parse(ix->partial, &pf, NULL))
		return false;
	{
		const struct query_expr *one;

		preds_of(pf, &one, &parts, &nparts);
		for (int i = 0; i < nparts && ok; i++)
			ok = implied_part(parts[i], preds, npreds);
	}
	query_expr_free(pf);
	return ok;
}

/* ---- candidates ------------------------------------------------------------------------ */

struct sortf {
	const char *path;
	int dir;
};

static int sort_fields(const bson_t *spec, struct sortf *f, int cap)
{
	bson_iter_t it;
	int n = 0;

	if (!spec || !bson_iter_init(&it, spec))
		return 0;
	while (bson_iter_next(&it) && n < cap) {
		f[n].path = bson_iter_key(&it);
		f[n].dir = bson_iter_as_int64(&it) < 0 ? -1 : 1;
		n++;
	}
	return n;
}

/* Does ix give the sort order after its equality prefix? *backward: scan it reversed. */
static bool index_sorts(const struct store_index *ix, const struct ixbounds *b,
			const struct sortf *sf, int nsf, bool *backward)
{
	if (nsf == 0)
		return false;
	for (int p = 0; p <= b->eqprefix; p++) {
		int sign = 0;
		bool ok = p + nsf <= ix->nfields;

		for (int k = 0; k < nsf && ok; k++) {
			const struct store_index_field *f = &ix->field[p + k];
			int s = f->dir * sf[k].dir;

			ok = f->dir != 0 && !strcmp(f->path, sf[k].path) &&
			     !((ix->multikey >> (p + k)) & 1) && (sign == 0 || s == sign);
			sign = s;
		}
		/* the fields of the prefix skipped must be single points (eqprefix) and the
		 * sort fields must be applied or unbounded, which they always are. The fields
		 * after the sort fields may be anything: they only order documents whose sort
		 * keys tie, and MongoDB leaves that order unspecified (note 6). A multikey one
		 * is fine too: a document's entries share its sort fields' values, and the
		 * scan returns the document once. */
		if (ok) {
			*backward = sign < 0;
			return true;
		}
	}
	return false;
}

/* Is the projection an inclusion of top-level fields only (PROJECTION_SIMPLE), and which? */
static bool proj_simple(const bson_t *spec, bool *id_excluded, bool *positional)
{
	bson_iter_t it;
	bool simple = true, incl = false, excl = false;

	*id_excluded = false;
	*positional = false;
	if (!spec || !bson_iter_init(&it, spec))
		return false;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		size_t kl = strlen(k);
		bool on;

		if (kl >= 2 && !strcmp(k + kl - 2, ".$"))
			*positional = true;
		if (strchr(k, '.') || k[0] == '$') {
			simple = false;
			continue;
		}
		if (!(BSON_ITER_HOLDS_NUMBER(&it) || BSON_ITER_HOLDS_BOOL(&it))) {
			simple = false;
			continue;
		}
		on = bson_iter_as_bool(&it);
		if (!strcmp(k, "_id")) {
			*id_excluded = !on;
			continue;
		}
		if (on)
			incl = true;
		else
			excl = true;
	}
	return simple && !(incl && excl);
}

static bool ix_has_field(const struct store_index *ix, const char *path)
{
	for (int i = 0; i < ix->nfields; i++)
		if (!strcmp(ix->field[i].path, path))
			return true;
	return false;
}

/* Are all paths the filter reads fields of ix (no $expr, no $elemMatch)? */
static bool filter_on_index(const struct query_expr *e, const struct store_index *ix)
{
	if (!e)
		return true;
	switch (e->kind) {
	case QK_AND:
	case QK_OR:
	case QK_NOR:
	case QK_NOT:
		for (int i = 0; i < e->nkids; i++)
			if (!filter_on_index(e->kids[i], ix))
				return false;
		return true;
	case QK_EXPR:
	case QK_ELEM_OBJ:
	case QK_ELEM_VAL:
		return false;
	case QK_NEVER:
	case QK_ALWAYS:
		return true;
	default:
		return ix_has_field(ix, e->path.dotted);
	}
}

/* Is field path of ix bounded away from null and missing by the scan? The index stores
 * null for a missing field, so a covered plan may only read fields that cannot be either. */
static bool field_present(const struct store_index *ix, const struct ixbounds *b, const char *path)
{
	for (int i = 0; i < ix->nfields; i++)
		if (!strcmp(ix->field[i].path, path))
			return !strcmp(path, "_id") ||
			       (b->from_pred[i] && b->applied[i] && !ivals_has_null(&b->fb[i]));
	return false;
}

static bool filter_fields_present(const struct query_expr *e, const struct store_index *ix,
				  const struct ixbounds *b)
{
	if (!e)
		return true;
	for (int i = 0; i < e->nkids; i++)
		if (!filter_fields_present(e->kids[i], ix, b))
			return false;
	return e->path.n == 0 || field_present(ix, b, e->path.dotted);
}

/* Is spec an inclusion projection of plain paths (dotted or not; _id may be excluded)? */
static bool proj_inclusion(const bson_t *spec, bool *id_excluded)
{
	bson_iter_t it;

	*id_excluded = false;
	if (!bson_iter_init(&it, spec))
		return false;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (k[0] == '$' || strstr(k, ".$") ||
		    !(BSON_ITER_HOLDS_NUMBER(&it) || BSON_ITER_HOLDS_BOOL(&it)))
			return false;
		if (!strcmp(k, "_id"))
			*id_excluded = !bson_iter_as_bool(&it);
		else if (!bson_iter_as_bool(&it))
			return false;
	}
	return true;
}

/* Can the documents be rebuilt from ix's entries (exec.c's covered_doc nests dotted paths):
 * no component is an array position (a number may pick an element, which a rebuilt
 * document would turn into a field), and no field is a prefix of another? */
static bool fields_rebuildable(const struct store_index *ix)
{
	for (int i = 0; i < ix->nfields; i++) {
		const char *p = ix->field[i].path;

		for (const char *c = p; *c; c = strchr(c, '.') ? strchr(c, '.') + 1 : "") {
			size_t len = strcspn(c, ".");

			if (strspn(c, "0123456789") >= len)
				return false;
		}
		for (int j = 0; j < ix->nfields; j++) {
			size_t len = strlen(p);

			if (j != i && !strncmp(ix->field[j].path, p, len) &&
			    ix->field[j].path[len] == '.')
				return false;
		}
	}
	return true;
}

/* Can ix cover the find: an inclusion projection of its fields only (dotted ones too, on a
 * non-multikey index), every field read bounded away from null and missing? */
static bool covers(const struct plan__query *q, const struct store_index *ix,
		   const struct ixbounds *b)
{
	bson_iter_t it;
	bool id_excl, any = false;

	if (!q->proj_spec || ix->ixid == 0 || ix->multikey || ix->hashed)
		return false;
	if (!proj_inclusion(q->proj_spec, &id_excl))
		return false;
	if (!id_excl && !ix_has_field(ix, "_id"))
		return false;
	if (!fields_rebuildable(ix))
		return false;
	bson_iter_init(&it, q->proj_spec);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "_id"))
			continue;
		if (!bson_iter_as_bool(&it) || !field_present(ix, b, k))
			return false;
		any = true;
	}
	return any && filter_on_index(q->filter, ix) && filter_fields_present(q->filter, ix, b);
}

/* Puts SORT, SKIP, LIMIT and PROJECTION over a scan. */
static struct plan__node *finish(const struct plan__query *q, struct plan__node *n, bool need_sort,
				 bool covered, struct plan__cand *c)
{
	if (need_sort) {
		n = node_new(PS_SORT, n);
		n->sort = q->sort;
		n->sort_spec = q->sort_spec;
		n->amount = q->limit ? q->skip + q->limit : 0;
		n->sort_mem = q->sort_mem;
		n->scored = q->text != NULL;
		c->has_sort = true;
	}
	if (q->limit && !need_sort) {
		n = node_new(PS_LIMIT, n);
		n->amount = q->skip + q->limit;
	}
	if (q->skip) {
		n = node_new(PS_SKIP, n);
		n->amount = q->skip;
	}
	if (q->proj) {
		bool id_excl, positional;
		bool simple = proj_simple(q->proj_spec, &id_excl, &positional);

		n = node_new(covered  ? PS_PROJ_COVERED
			     : simple ? PS_PROJ_SIMPLE
				      : PS_PROJ_DEFAULT,
			     n);
		n->proj = q->proj;
		n->proj_spec = q->proj_spec;
		n->positional = positional;
		n->filter = q->filter;
		n->scored = q->text != NULL;
	}
	return n;
}

static bool sortable(const struct plan__query *q)
{
	return q->sort_spec && !bson_empty(q->sort_spec);
}

/* A plan over index ixpos with bounds b (taken). */
static int index_cand(const struct plan__query *q, int ixpos, struct ixbounds *b,
		      const struct sortf *sf, int nsf, struct plan__cand *c, struct dfs_err *err)
{
	const struct store_index *ix = &q->ixs[ixpos];
	bool backward = false, sorted = false, covered;
	struct plan__node *n;
	int rc;

	memset(c, 0, sizeof(*c));
	if (sortable(q) && !ix->hashed)
		sorted = index_sorts(ix, b, sf, nsf, &backward);
	covered = (!sortable(q) || sorted) && covers(q, ix, b);
	if ((rc = ixscan_new(q, ixpos, b, backward, &n, err)))
		return rc;
	if (q->count_only && b->exact && !q->proj && !sortable(q)) {
		n->count_scan = true; /* the keys decide the filter: nothing to read */
	} else if (covered) {
		n->build_doc = true;
		if (!b->exact)
			n->filter = q->filter;
	} else {
		n = node_new(PS_FETCH, n);
		if (!b->exact)
			n->filter = q->filter;
		c->has_fetch = true;
	}
	c->root = finish(q, n, sortable(q) && !sorted, covered, c);
	snprintf(c->desc, sizeof(c->desc), "ix:%s%s", ix->name, backward ? ":b" : "");
	return 0;
}

/* The key of bound b (min or max of a find) in ix's encoding into out: b's fields must be
 * ix's, in its order (MongoDB's indexCompatibleMaxMin); none hashed or text. */
static int minmax_key(const struct store_index *ix, const bson_t *b, struct dfs_buf *out,
		      struct dfs_err *err)
{
	bson_iter_t it;
	int i = 0, rc;

	if (!bson_iter_init(&it, b))
		return dfs_err_set(err, DFS_EINVAL, "min/max is not a valid document");
	while (bson_iter_next(&it)) {
		if (i >= ix->nfields || strcmp(bson_iter_key(&it), ix->field[i].path) ||
		    ix->field[i].dir == 0 || ix->field[i].dir == STORE_IX_TEXT)
			break;
		if ((rc = store_key_append(out, bson_iter_value(&it), ix->field[i].dir < 0, err)))
			return rc;
		i++;
	}
	if (i != ix->nfields || bson_iter_next(&it))
		return dfs_err_set(err, DFS_EINVAL,
				   "The index chosen is not compatible with min/max (index '%s')",
				   ix->name);
	return 0;
}

/* A find with min and/or max: the hinted index's one key range [min, max), FETCH with the
 * whole filter (the range does not come from it), then sort, skip, limit as usual. */
static int minmax_cand(const struct plan__query *q, int ixpos, struct plan__cand *c,
		       struct dfs_err *err)
{
	const struct store_index *ix = &q->ixs[ixpos];
	struct plan__range *r = xcalloc(1, sizeof(*r));
	struct plan__node *n;
	int rc;

	memset(c, 0, sizeof(*c));
	dfs_buf_init(&r->lo);
	dfs_buf_init(&r->hi);
	if ((q->min && (rc = minmax_key(ix, q->min, &r->lo, err))) ||
	    (q->max && (rc = minmax_key(ix, q->max, &r->hi, err)))) {
		plan__ranges_free(r, 1);
		return rc;
	}
	if (q->min && q->max) {
		size_t m = r->lo.len < r->hi.len ? r->lo.len : r->hi.len;
		int cmp = memcmp(r->lo.data, r->hi.data, m);

		if (cmp == 0)
			cmp = r->lo.len < r->hi.len ? -1 : r->lo.len > r->hi.len;
		if (cmp >= 0) {
			plan__ranges_free(r, 1);
			return dfs_err_set(err, DFS_EINVAL,
					   "The value provided for min() does not come before the "
					   "value provided for max() in the hinted index");
		}
	}
	n = node_new(PS_IXSCAN, NULL);
	n->ix = ix;
	n->ixpos = ixpos;
	n->multikey = ix->multikey != 0;
	n->ranges = r;
	n->nranges = 1;
	n->fb = xcalloc((size_t)ix->nfields, sizeof(*n->fb));
	for (int i = 0; i < ix->nfields; i++)
		plan__ivals_full(&n->fb[i]); /* explain: the bounds are min/max, not intervals */
	n = node_new(PS_FETCH, n);
	if (q->filter && !(q->filter->kind == QK_AND && q->filter->nkids == 0))
		n->filter = q->filter;
	c->has_fetch = true;
	c->root = finish(q, n, sortable(q), false, c);
	snprintf(c->desc, sizeof(c->desc), "ix:%s:minmax", ix->name);
	return 0;
}

static int collscan_cand(const struct plan__query *q, bool backward, struct plan__cand *c)
{
	struct plan__node *n = node_new(PS_COLLSCAN, NULL);

	memset(c, 0, sizeof(*c));
	n->filter = q->filter;
	n->backward = backward;
	c->root = finish(q, n, sortable(q), false, c);
	snprintf(c->desc, sizeof(c->desc), "coll%s", backward ? ":b" : "");
	return 0;
}

/* May ix serve a filter with these predicates (notes 4)? */
static bool ix_allowed(const struct store_index *ix, const struct ixbounds *b,
		       const struct query_expr *const *preds, int npreds)
{
	if (ix->sparse && !b->excl_missing)
		return false;
	if (ix->partial && !partial_implied(ix, preds, npreds))
		return false;
	return true;
}

/* The IXSCAN of one $or branch over the index bounding most of its fields: *out NULL when
 * no index can serve it. *exact: the bounds decide the branch (note 1). */
static int branch_ixscan(const struct plan__query *q, const struct query_expr *branch,
			 struct plan__node **out, bool *exact, struct dfs_err *err)
{
	const struct query_expr **bp, *one;
	int nb, best = -1, best_score = 0, rc;
	struct ixbounds bb, cur;

	*out = NULL;
	*exact = false;
	preds_of(branch, &one, &bp, &nb);
	for (int i = 0; i < q->nixs; i++) {
		const struct store_index *ix = &q->ixs[i];
		int score = 0;

		if (ix->text)
			continue;

		ixbounds_compute(ix, bp, nb, &cur);
		if (cur.from_pred[0] && ix_allowed(ix, &cur, bp, nb)) {
			for (int f = 0; f < ix->nfields; f++)
				score += cur.applied[f] && cur.from_pred[f];
			if (score > best_score) {
				if (best >= 0)
					ixbounds_release(&bb, q->ixs[best].nfields);
				bb = cur;
				best = i;
				best_score = score;
				continue;
			}
		}
		ixbounds_release(&cur, ix->nfields);
	}
	if (best < 0)
		return 0;
	*exact = bb.exact;
	rc = ixscan_new(q, best, &bb, false, out, err);
	ixbounds_release(&bb, q->ixs[best].nfields);
	return rc;
}

/* $or by index union: one IXSCAN per branch (the index bounding most fields). */
static int or_cand(const struct plan__query *q, struct plan__cand *c, bool *made,
		   struct dfs_err *err)
{
	const struct query_expr *root = q->filter;
	struct plan__node *orn;
	int rc;

	*made = false;
	orn = node_new(PS_OR, NULL);
	for (int k = 0; k < root->nkids; k++) {
		struct plan__node *scan;
		bool exact;

		if ((rc = branch_ixscan(q, root->kids[k], &scan, &exact, err)) || !scan) {
			plan__node_free(orn);
			return rc;
		}
		node_add(orn, scan);
	}
	memset(c, 0, sizeof(*c));
	{
		struct plan__node *f = node_new(PS_FETCH, orn);

		f->filter = q->filter;
		c->has_fetch = true;
		c->root = finish(q, f, sortable(q), false, c);
	}
	snprintf(c->desc, sizeof(c->desc), "or");
	for (int i = 0; i < orn->nkids; i++) {
		size_t l = strlen(c->desc);

		snprintf(c->desc + l, sizeof(c->desc) - l, ":%s", orn->kids[i]->ix->name);
	}
	*made = true;
	return 0;
}

/* ---- $text (note 7) ------------------------------------------------------------------- */

static bool holds_text(const struct query_expr *e)
{
	if (e->kind == QK_TEXT)
		return true;
	if (e->kind == QK_AND)
		for (int i = 0; i < e->nkids; i++)
			if (e->kids[i]->kind == QK_TEXT)
				return true;
	return false;
}

static struct query_expr *text_of(struct query_expr *e)
{
	if (e->kind == QK_TEXT)
		return e;
	for (int i = 0; i < e->nkids; i++)
		if (e->kids[i]->kind == QK_TEXT)
			return e->kids[i];
	return NULL;
}

/* Finds the filter's $text node: the filter itself or a child of its top-level $and, or in
 * a branch (itself, or a child of the branch's $and) of an $or that is the filter or a child
 * of its top-level $and (note 7; filter.c refuses it anywhere else). Sets q->text, and
 * q->text_or / q->text_branch for the $or. */
static void text_locate(struct plan__query *q)
{
	struct query_expr *f = q->filter, *orx = NULL;

	q->text = NULL;
	q->text_or = q->text_branch = NULL;
	if (!f)
		return;
	if (holds_text(f)) {
		q->text = text_of(f);
		return;
	}
	if (f->kind == QK_OR)
		orx = f;
	else if (f->kind == QK_AND)
		for (int i = 0; i < f->nkids; i++)
			if (f->kids[i]->kind == QK_OR && query_filter_has_text(f->kids[i]))
				orx = f->kids[i];
	for (int k = 0; orx && k < orx->nkids; k++)
		if (holds_text(orx->kids[k])) {
			q->text = text_of(orx->kids[k]);
			q->text_or = orx;
			q->text_branch = orx->kids[k];
			return;
		}
}

/* The equality on path among the top-level predicates, or NULL. */
static const bson_value_t *equality_on(const struct query_expr *const *preds, int n,
				       const char *path)
{
	for (int i = 0; i < n; i++) {
		const struct query_expr *e = preds[i];

		if (e->kind == QK_EQ && !strcmp(e->path.dotted, path) &&
		    e->val.value_type != BSON_TYPE_ARRAY && e->val.value_type != BSON_TYPE_REGEX)
			return &e->val;
		if (e->kind == QK_IN && e->nvals == 1 && !e->nres &&
		    !strcmp(e->path.dotted, path) && e->vals[0].value_type != BSON_TYPE_ARRAY)
			return &e->vals[0];
	}
	return NULL;
}

/* The text plan of the $text node under filter (the whole filter, or the $or branch that
 * holds it), whose top-level predicates give the prefix equalities: TEXT_MATCH over TEXT_OR
 * over an IXSCAN of each term, each scan the byte range of (prefix equalities, term). The
 * TEXT_OR applies filter unless it is the $text itself. */
static int text_plan(const struct plan__query *q, const struct query_expr *filter,
		     struct plan__node **out, struct dfs_err *err)
{
	const struct query_expr **preds, *one;
	const struct store_index *ix = NULL;
	struct plan__node *orn, *tm;
	struct dfs_buf pre;
	int npreds, pos = -1, rc = 0;
	bson_t *prefix = bson_new();

	*out = NULL;
	preds_of(filter, &one, &preds, &npreds);
	for (int i = 0; i < q->nixs && pos < 0; i++)
		if (q->ixs[i].text)
			pos = i;
	dfs_buf_init(&pre);
	if (pos < 0) {
		rc = dfs_err_set(err, DFS_EINVAL, "text index required for $text query");
		goto done;
	}
	ix = &q->ixs[pos];
	if ((rc = query__text_prepare(q->text->text, ix, err)))
		goto done;
	for (int f = 0; f < ix->text->pos; f++) {
		const bson_value_t *v = equality_on(preds, npreds, ix->field[f].path);

		if (!v) {
			rc = dfs_err_set(err, DFS_EINVAL, "need have an equality filter on: %s",
					 ix->field[f].path);
			goto done;
		}
		if ((rc = store_key_append(&pre, v, ix->field[f].dir < 0, err)))
			goto done;
		bson_append_value(prefix, ix->field[f].path, -1, v);
	}
	orn = node_new(PS_TEXT_OR, NULL);
	if (filter->kind != QK_TEXT)
		orn->filter = filter;
	for (size_t i = 0; i < query__text_nscan(q->text->text); i++) {
		const char *term = query__text_scan_term(q->text->text, i);
		bson_value_t tv = {.value_type = BSON_TYPE_UTF8};
		struct plan__node *scan = node_new(PS_IXSCAN, NULL);

		scan->ix = ix;
		scan->ixpos = pos;
		scan->backward = true;
		scan->text_scan = true;
		scan->ranges = xcalloc(1, sizeof(*scan->ranges));
		scan->nranges = 1;
		dfs_buf_init(&scan->ranges[0].lo);
		dfs_buf_init(&scan->ranges[0].hi);
		dfs_buf_append(&scan->ranges[0].lo, pre.data, pre.len);
		tv.value.v_utf8.str = (char *)term;
		tv.value.v_utf8.len = (uint32_t)strlen(term);
		node_add(orn, scan);
		if ((rc = store_key_append(&scan->ranges[0].lo, &tv, false, err))) {
			plan__node_free(orn);
			goto done;
		}
		dfs_buf_append(&scan->ranges[0].hi, scan->ranges[0].lo.data,
			       scan->ranges[0].lo.len);
		dfs_buf_putc(&scan->ranges[0].hi, (char)0xFF);
	}
	tm = node_new(PS_TEXT_MATCH, orn);
	tm->ix = ix;
	tm->ixpos = pos;
	tm->text = q->text->text;
	tm->text_prefix = prefix;
	prefix = NULL;
	*out = tm;
done:
	if (prefix)
		bson_destroy(prefix);
	dfs_buf_release(&pre);
	return rc;
}

/* What MongoDB refuses in any $text query: a hint, a $natural sort. */
static int text_refusals(const struct plan__query *q, struct dfs_err *err)
{
	bson_iter_t it;

	if (q->hint || q->hint_name)
		return dfs_err_set(err, DFS_EINVAL, "text and hint not allowed in same query");
	if (q->sort_spec && bson_iter_init_find(&it, q->sort_spec, "$natural"))
		return dfs_err_set(err, DFS_EINVAL,
				   "text and $natural sort not allowed in same query");
	return 0;
}

/* The one plan of a $text query (note 7). */
static int text_cand(struct plan__query *q, struct plan__cand *c, struct dfs_err *err)
{
	struct plan__node *tm;
	int rc;

	memset(c, 0, sizeof(*c));
	if ((rc = text_refusals(q, err)) || (rc = text_plan(q, q->filter, &tm, err)))
		return rc;
	c->has_fetch = true;
	c->root = finish(q, tm, sortable(q), false, c);
	snprintf(c->desc, sizeof(c->desc), "text:%s", tm->ix->name);
	return 0;
}

/* Sets the filter of FETCH node n to the predicates of the root $and f but orx: the one
 * left, or an $and of them (n->rest, MongoDB's filter). */
static void and_rest(const struct query_expr *f, const struct query_expr *orx, struct plan__node *n)
{
	struct query_expr *r;
	int k = 0;

	if (f->nkids == 2) {
		n->filter = f->kids[f->kids[0] == orx ? 1 : 0];
		return;
	}
	r = xcalloc(1, sizeof(*r));
	r->kind = QK_AND;
	r->kids = xcalloc((size_t)f->nkids, sizeof(*r->kids));
	for (int i = 0; i < f->nkids; i++)
		if (f->kids[i] != orx)
			r->kids[k++] = f->kids[i];
	r->nkids = k;
	n->rest = r;
	n->filter = r;
}

/* The one plan of a $text under $or (note 7): FETCH over OR of the text plan and an index
 * scan of every other branch. */
static int text_or_cand(struct plan__query *q, struct plan__cand *c, struct dfs_err *err)
{
	const struct query_expr *orx = q->text_or;
	struct plan__node *orn, *tm, *top;
	bool all_fetched = true;
	int rc;

	memset(c, 0, sizeof(*c));
	if ((rc = text_refusals(q, err)) || (rc = text_plan(q, q->text_branch, &tm, err)))
		return rc;
	orn = node_new(PS_OR, tm);
	snprintf(c->desc, sizeof(c->desc), "textor:%s", tm->ix->name);
	for (int k = 0; k < orx->nkids; k++) {
		const struct query_expr *b = orx->kids[k];
		struct plan__node *scan;
		bool exact;
		size_t l = strlen(c->desc);

		if (b == q->text_branch)
			continue;
		if ((rc = branch_ixscan(q, b, &scan, &exact, err))) {
			plan__node_free(orn);
			return rc;
		}
		if (!scan) {
			plan__node_free(orn);
			/* MongoDB's words (query_planner.cpp); it says "No query solutions"
			 * when the $or is inside an $and, which explains nothing */
			return dfs_err_set(err, DFS_EINVAL,
					   "Failed to produce a solution for TEXT under OR - "
					   "other non-TEXT clauses under OR have to be indexed as "
					   "well");
		}
		snprintf(c->desc + l, sizeof(c->desc) - l, ":%s", scan->ix->name);
		if (!exact) {
			scan = node_new(PS_FETCH, scan);
			scan->filter = b;
		} else {
			all_fetched = false;
		}
		node_add(orn, scan);
	}
	top = orn;
	if (!all_fetched || orx != q->filter) {
		top = node_new(PS_FETCH, orn);
		if (orx != q->filter)
			and_rest(q->filter, orx, top);
	}
	c->has_fetch = true;
	c->root = finish(q, top, sortable(q), false, c);
	return 0;
}

static bool key_pattern_equal(const struct store_index *ix, const bson_t *hint)
{
	bson_iter_t it, kt;
	bson_t key;
	const uint8_t *data;
	uint32_t len;

	if (!bson_iter_init_find(&kt, ix->spec, "key") || !BSON_ITER_HOLDS_DOCUMENT(&kt))
		return false;
	bson_iter_document(&kt, &len, &data);
	if (!bson_init_static(&key, data, len))
		return false;
	if (bson_count_keys(&key) != bson_count_keys(hint))
		return false;
	bson_iter_init(&kt, &key);
	bson_iter_init(&it, hint);
	while (bson_iter_next(&kt) && bson_iter_next(&it))
		if (strcmp(bson_iter_key(&kt), bson_iter_key(&it)) ||
		    store_value_compare(bson_iter_value(&kt), bson_iter_value(&it)))
			return false;
	return true;
}

static int add_cand(struct plan__cand **cands, int *n, const struct plan__cand *c)
{
	*cands = xrealloc(*cands, (size_t)(*n + 1) * sizeof(**cands));
	(*cands)[(*n)++] = *c;
	return 0;
}

int plan__enumerate(struct plan__query *q, struct plan__cand **cands, int *n, struct dfs_err *err)
{
	const struct query_expr **preds, *one;
	struct sortf sf[STORE_IX_MAX_FIELDS];
	int npreds, nsf, rc = 0;
	struct plan__cand c;

	*cands = NULL;
	*n = 0;
	preds_of(q->filter, &one, &preds, &npreds);
	text_locate(q);
	if (!q->text && (query_sort_has_meta(q->sort) || query_proj_has_meta(q->proj)))
		return dfs_err_set(err, DFS_EINVAL,
				   "query requires text score metadata, but it is not available");
	if (q->text) {
		if ((rc = q->text_or ? text_or_cand(q, &c, err) : text_cand(q, &c, err)))
			return rc;
		return add_cand(cands, n, &c);
	}
	nsf = sort_fields(q->sort_spec, sf, STORE_IX_MAX_FIELDS);
	if (q->count_only && npreds == 0 && !q->hint && !q->hint_name && !q->skip && !q->limit) {
		/* MongoDB's count of a whole collection: its record count, no scan */
		memset(&c, 0, sizeof(c));
		c.root = node_new(PS_FAST_COUNT, NULL);
		snprintf(c.desc, sizeof(c.desc), "count");
		return add_cand(cands, n, &c);
	}
	if (q->coll && ((q->hint_name) || (q->hint && !bson_has_field(q->hint, "$natural"))))
		return dfs_err_set(err, DFS_EINVAL,
				   "a hinted index cannot answer a query with a collation (docfs's "
				   "indexes hold binary keys)");
	if (q->coll) {
		/* collation.c: no index holds collation keys, so none can find, bound or
		 * order strings under it; a collection scan compares every document */
		bson_iter_t it;

		collscan_cand(q,
			      q->hint && bson_iter_init_find(&it, q->hint, "$natural") &&
				      bson_iter_as_int64(&it) < 0,
			      &c);
		return add_cand(cands, n, &c);
	}
	if (q->hint || q->hint_name) {
		int pos = -1;
		bson_iter_t it;

		if (q->hint && bson_iter_init_find(&it, q->hint, "$natural")) {
			collscan_cand(q, bson_iter_as_int64(&it) < 0, &c);
			return add_cand(cands, n, &c);
		}
		for (int i = 0; i < q->nixs && pos < 0; i++)
			if (q->hint_name ? !strcmp(q->ixs[i].name, q->hint_name)
					 : key_pattern_equal(&q->ixs[i], q->hint))
				pos = i;
		if (pos < 0)
			return dfs_err_set(
				err, DFS_EINVAL,
				"hint provided does not correspond to an existing index");
		if (q->ixs[pos].text)
			return dfs_err_set(err, DFS_EINVAL,
					   "a text index ('%s') serves $text queries only",
					   q->ixs[pos].name);
		if (q->min || q->max) {
			if ((rc = minmax_cand(q, pos, &c, err)))
				return rc;
			return add_cand(cands, n, &c);
		}
		{
			struct ixbounds b;

			ixbounds_compute(&q->ixs[pos], preds, npreds, &b);
			rc = index_cand(q, pos, &b, sf, nsf, &c, err);
			ixbounds_release(&b, q->ixs[pos].nfields);
			if (rc)
				return rc;
			return add_cand(cands, n, &c);
		}
	}
	for (int i = 0; i < q->nixs; i++) {
		const struct store_index *ix = &q->ixs[i];
		struct ixbounds b;
		bool backward = false, relevant;

		if (ix->text)
			continue; /* for $text only */

		ixbounds_compute(ix, preds, npreds, &b);
		relevant = b.from_pred[0] && ix_allowed(ix, &b, preds, npreds);
		if (!relevant && sortable(q) && !ix->sparse && !ix->partial && !ix->hashed &&
		    index_sorts(ix, &b, sf, nsf, &backward))
			relevant = true;
		if (relevant && (rc = index_cand(q, i, &b, sf, nsf, &c, err)) == 0)
			add_cand(cands, n, &c);
		ixbounds_release(&b, ix->nfields);
		if (rc)
			goto fail;
	}
	if (q->filter && q->filter->kind == QK_OR && q->filter->nkids > 1) {
		bool made;

		if ((rc = or_cand(q, &c, &made, err)))
			goto fail;
		if (made)
			add_cand(cands, n, &c);
	}
	if (*n == 0) {
		collscan_cand(q, false, &c);
		add_cand(cands, n, &c);
	}
	return 0;
fail:
	plan__cands_free(*cands, *n);
	*cands = NULL;
	*n = 0;
	return rc;
}

/* ---- the plan cache (note 5) ---------------------------------------------------------- */

struct cache_entry {
	char *key;		/* Owned: db pointer, collection, shape */
	char desc[512];		/* the winner */
	int64_t ixver, changes; /* index version and change sequence when stored */
};

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cache_entry cache[CACHE_MAX];
static int cache_n, cache_next;
static int64_t cache_hits, cache_misses, cache_inval;

static void shape_expr(const struct query_expr *e, struct dfs_buf *b)
{
	if (!e)
		return;
	dfs_buf_printf(b, "(%d", e->kind);
	if (e->path.n)
		dfs_buf_printf(b, " %s", e->path.dotted);
	if (e->kind >= QK_EQ && e->kind <= QK_GTE)
		dfs_buf_printf(b, " t%d", (int)e->val.value_type);
	if (e->kind == QK_IN) {
		for (int i = 0; i < e->nvals; i++)
			dfs_buf_printf(b, " t%d", (int)e->vals[i].value_type);
		dfs_buf_printf(b, " r%d", e->nres);
	}
	if (e->kind == QK_REGEX)
		dfs_buf_printf(b, " /%s/%s", e->res[0]->pattern, e->res[0]->options);
	for (int i = 0; i < e->nkids; i++)
		shape_expr(e->kids[i], b);
	dfs_buf_putc(b, ')');
}

static void cache_key(struct store_txn *t, int64_t coll, const struct plan__query *q,
		      struct dfs_buf *b)
{
	struct dfs_err err = {0};

	dfs_buf_printf(b, "%p|%lld|", (void *)store_txn_db(t), (long long)coll);
	shape_expr(q->filter, b);
	dfs_buf_putc(b, '|');
	if (q->sort_spec)
		store_codec_render(q->sort_spec, STORE_RENDER_COMPACT, b, &err);
	dfs_buf_putc(b, '|');
	if (q->proj_spec)
		store_codec_render(q->proj_spec, STORE_RENDER_COMPACT, b, &err);
	dfs_buf_printf(b, "|%d|%d|%s", q->skip != 0, q->limit != 0, query__collation_desc(q->coll));
}

static int cache_versions(struct store_txn *t, int64_t coll, int64_t *ixver, int64_t *changes)
{
	struct dfs_err err = {0};

	if (store_index_version(t, coll, ixver, &err))
		return -1;
	if (store_changes_last(store_txn_db(t), changes, &err))
		return -1;
	return 0;
}

bool plan__cache_get(struct store_txn *t, int64_t coll, const struct plan__query *q, char *desc,
		     size_t cap)
{
	struct dfs_buf k;
	int64_t ixver, changes;
	bool hit = false;

	if (cache_versions(t, coll, &ixver, &changes))
		return false;
	dfs_buf_init(&k);
	cache_key(t, coll, q, &k);
	pthread_mutex_lock(&cache_mu);
	for (int i = 0; i < cache_n; i++) {
		struct cache_entry *e = &cache[i];

		if (!e->key || strcmp(e->key, k.data))
			continue;
		if (e->ixver != ixver || changes - e->changes >= CACHE_WRITES ||
		    changes < e->changes) {
			free(e->key);
			e->key = NULL;
			cache_inval++;
			break;
		}
		snprintf(desc, cap, "%s", e->desc);
		hit = true;
		break;
	}
	if (hit)
		cache_hits++;
	else
		cache_misses++;
	pthread_mutex_unlock(&cache_mu);
	dfs_buf_release(&k);
	return hit;
}

void plan__cache_put(struct store_txn *t, int64_t coll, const struct plan__query *q,
		     const char *desc)
{
	struct dfs_buf k;
	int64_t ixver, changes;
	int slot = -1;

	if (cache_versions(t, coll, &ixver, &changes))
		return;
	dfs_buf_init(&k);
	cache_key(t, coll, q, &k);
	pthread_mutex_lock(&cache_mu);
	for (int i = 0; i < cache_n && slot < 0; i++)
		if (!cache[i].key || !strcmp(cache[i].key, k.data))
			slot = i;
	if (slot < 0) {
		if (cache_n < CACHE_MAX) {
			slot = cache_n++;
		} else {
			slot = cache_next;
			cache_next = (cache_next + 1) % CACHE_MAX;
		}
	}
	free(cache[slot].key);
	cache[slot].key = k.data; /* takes the buffer */
	snprintf(cache[slot].desc, sizeof(cache[slot].desc), "%s", desc);
	cache[slot].ixver = ixver;
	cache[slot].changes = changes;
	pthread_mutex_unlock(&cache_mu);
}

void plan__cache_stats(int64_t *hits, int64_t *misses, int64_t *invalidations)
{
	pthread_mutex_lock(&cache_mu);
	*hits = cache_hits;
	*misses = cache_misses;
	*invalidations = cache_inval;
	pthread_mutex_unlock(&cache_mu);
}

void plan__cache_clear(void)
{
	pthread_mutex_lock(&cache_mu);
	for (int i = 0; i < cache_n; i++) {
		free(cache[i].key);
		cache[i].key = NULL;
	}
	cache_n = cache_next = 0;
	cache_hits = cache_misses = cache_inval = 0;
	pthread_mutex_unlock(&cache_mu);
}
