/*
 * match.c - evaluates a parsed filter (query_int.h) against one document with MongoDB's
 * semantics: path resolution through embedded documents and arrays, the per-operator
 * element rules, type bracketing of comparisons, and $expr's aggregation expressions.
 *
 * It does not parse or validate anything (filter.c did), and it never fails: a document
 * that cannot be iterated matches as far as it can be read, and a runtime error of an
 * $expr expression (adding a string, dividing by zero) makes that $expr false.
 *
 * Design notes
 *
 * 1. Paths are resolved by walking bson_iter over the document's own bytes: no allocation,
 *    no copy, and the walk stops at the first element that satisfies the predicate. The
 *    walk mirrors MongoDB's BSONElementIterator (src/mongo/db/matcher/path.cpp):
 *    a. Documents are descended field by field (a numeric component names a field there).
 *    b. A field that is missing, or a scalar where the path goes on, yields "missing" once
 *       (which $eq: null, $exists: false, $ne ... see).
 *    c. At an array where the path goes on, each element is considered: a document element
 *       is walked with the rest of the path; when the next component is all digits and
 *       equals the element's index, the element itself is taken for that component (both
 *       for document elements, after the walk into them, and for other elements: the end
 *       of the path yields the element unexpanded, a nested array is traversed with the
 *       rest of the path). Other scalars yield nothing: {"a.b": null} does not match
 *       {a: [1, 2]} nor {a: []}, but does match {a: [{c: 1}]}.
 *    d. At an array where the path ends, each element is tested (nested arrays are not
 *       expanded further), then the array as a whole. $size and $elemMatch see only the
 *       whole array (no leaf expansion); every other operator sees both.
 * 2. Negations ($ne, $nin, $not, $exists: false, $nor) are QK_NOT over the positive form
 *    of the whole path, as MongoDB does: {a: {$ne: 1}} matches {a: [2]} but not {a: [1, 2]}.
 * 3. Comparisons ($eq, $lt, ... and the equalities of $in/$all) hold only within one type
 *    bracket of store_type_bracket (numbers of every type compare by value), with
 *    MongoDB's exceptions: missing compares as null (so {a: null}, $gte/$lte null match it)
 *    and (as of MongoDB 8.0) undefined matches no null comparison; a MinKey or MaxKey
 *    operand is below or above every value of every other type (so {$lt: MaxKey} matches
 *    any value, missing included); NaN equals NaN and is neither above nor below anything.
 * 4. elem_index is MongoDB's elemMatchKey: the index of the element of the outermost array
 *    traversed on the way to the element that matched (or the matching element found by
 *    $elemMatch when no outer array was traversed); under $and the last child that sets it
 *    wins, under $or the child that matched; negations never set it.
 * 5. $expr follows the aggregation rules, not the query ones: "$a.b" maps over arrays
 *    (collecting values, missing ones skipped), comparisons take whole values in the full
 *    BSON order (missing and undefined < null < numbers < ...), no element matching.
 *    Values computed by $expr (arrays of a path, object literals) live in an arena freed at
 *    the end of the $expr; nothing is allocated when no array or object is built.
 * 6. Regexes are matched with a per-thread pcre2 match data of one pair (created at the
 *    first match of a thread, freed at thread exit): the tree stays immutable and shared.
 */
#include "query_int.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool match_doc(const struct query_expr *e, const uint8_t *data, uint32_t len, int *elem);
static bool match_value(const struct query_expr *e, const bson_value_t *v);

static const bson_value_t null_value = {.value_type = BSON_TYPE_NULL};

/* ---- regexes ----------------------------------------------------------------------- */

static pthread_key_t md_key;
static pthread_once_t md_once = PTHREAD_ONCE_INIT;

static void md_destroy(void *p)
{
	pcre2_match_data_free(p);
}

static void md_key_init(void)
{
	if (pthread_key_create(&md_key, md_destroy) != 0)
		abort();
}

bool query__regex_match(const struct query__regex *re, const char *s, size_t len)
{
	pcre2_match_data *md;

	pthread_once(&md_once, md_key_init);
	md = pthread_getspecific(md_key);
	if (!md) {
		md = pcre2_match_data_create(1, NULL);
		if (!md || pthread_setspecific(md_key, md) != 0) {
			fprintf(stderr, "docfs: out of memory\n");
			abort();
		}
	}
	/* 0 means "matched, ovector too small", which cannot happen with one pair but is a
	 * match all the same; negative values are no match or a failure (invalid UTF-8). */
	return pcre2_match(re->code, (PCRE2_SPTR)s, len, 0, 0, md, NULL) >= 0;
}

/* ---- single values ----------------------------------------------------------------- */

static bool is_number(bson_type_t t)
{
	return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
	       t == BSON_TYPE_DECIMAL128;
}

static bool is_nan(const bson_value_t *v)
{
	if (v->value_type == BSON_TYPE_DOUBLE)
		return isnan(v->value.v_double);
	if (v->value_type == BSON_TYPE_DECIMAL128)
		return ((v->value.v_decimal128.high >> 58) & 0x1f) == 0x1f;
	return false;
}

/* A decimal128 as a long double (approximate: 64 bits of mantissa against 113). */
static long double dec_to_ld(const bson_decimal128_t *d)
{
	char s[BSON_DECIMAL128_STRING];

	bson_decimal128_to_string(d, s);
	if (strstr(s, "NaN"))
		return NAN;
	if (!strcmp(s, "Infinity"))
		return INFINITY;
	if (!strcmp(s, "-Infinity"))
		return -INFINITY;
	return strtold(s, NULL);
}

static long double num_to_ld(const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_INT32:
		return v->value.v_int32;
	case BSON_TYPE_INT64:
		return (long double)v->value.v_int64;
	case BSON_TYPE_DOUBLE:
		return v->value.v_double;
	case BSON_TYPE_DECIMAL128:
		return dec_to_ld(&v->value.v_decimal128);
	default:
		return 0;
	}
}

/* Comparison operators on one value (NULL: missing); see design note 3. */
static bool compare_match(int kind, const bson_value_t *rhs, const bson_value_t *v)
{
	int c;

	if (!v)
		v = &null_value;
	/* MongoDB 8.0: undefined no longer compares equal to null (the operand is never
	 * undefined: the parser refuses it). */
	if (v->value_type == BSON_TYPE_UNDEFINED && rhs->value_type != BSON_TYPE_MAXKEY &&
	    rhs->value_type != BSON_TYPE_MINKEY)
		return false;
	if (store_type_bracket(v->value_type) != store_type_bracket(rhs->value_type)) {
		if (rhs->value_type == BSON_TYPE_MAXKEY)
			return kind == QK_LT || kind == QK_LTE;
		if (rhs->value_type == BSON_TYPE_MINKEY)
			return kind == QK_GT || kind == QK_GTE;
		return false;
	}
	if (is_number(v->value_type) && (is_nan(v) || is_nan(rhs)))
		return (kind == QK_EQ || kind == QK_LTE || kind == QK_GTE) && is_nan(v) &&
		       is_nan(rhs);
	c = store_value_compare(v, rhs);
	switch (kind) {
	case QK_EQ:
		return c == 0;
	case QK_LT:
		return c < 0;
	case QK_LTE:
		return c <= 0;
	case QK_GT:
		return c > 0;
	default:
		return c >= 0;
	}
}

static bool regex_value_match(const struct query__regex *re, const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_UTF8:
		return query__regex_match(re, v->value.v_utf8.str, v->value.v_utf8.len);
	case BSON_TYPE_SYMBOL:
		return query__regex_match(re, v->value.v_symbol.symbol, v->value.v_symbol.len);
	case BSON_TYPE_REGEX: /* a stored regex matches an equal regex */
		return !strcmp(v->value.v_regex.regex, re->pattern) &&
		       !strcmp(v->value.v_regex.options ? v->value.v_regex.options : "",
			       re->options);
	default:
		return false;
	}
}

static bool in_match(const struct query_expr *e, const bson_value_t *v)
{
	int lo = 0, hi = e->nvals - 1, i;

	if (!v)
		return e->has_null;
	if (v->value_type == BSON_TYPE_UNDEFINED)
		return false; /* equal to nothing a filter can hold (MongoDB 8.0) */
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		int c = store_value_compare(v, &e->vals[mid]);

		if (c == 0)
			return true;
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	for (i = 0; i < e->nres; i++)
		if (regex_value_match(e->res[i], v))
			return true;
	return false;
}

static bool type_match(const struct query_expr *e, const bson_value_t *v)
{
	bson_type_t t = v->value_type;

	if (t == BSON_TYPE_MINKEY)
		return e->type_minkey;
	if (t == BSON_TYPE_MAXKEY)
		return e->type_maxkey;
	if (e->type_number && is_number(t))
		return true;
	return (unsigned)t < 32 && (e->types_lo & (UINT32_C(1) << t));
}

/* $mod on one value: numbers truncated toward zero (NaN and infinities never match,
 * values beyond int64 saturate as MongoDB's conversion does). */
static bool mod_match(const struct query_expr *e, const bson_value_t *v)
{
	int64_t x;

	switch (v->value_type) {
	case BSON_TYPE_INT32:
		x = v->value.v_int32;
		break;
	case BSON_TYPE_INT64:
		x = v->value.v_int64;
		break;
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_DECIMAL128: {
		long double d = num_to_ld(v);

		if (isnan(d) || isinf(d))
			return false;
		if (d >= 9223372036854775807.0L)
			x = INT64_MAX;
		else if (d <= -9223372036854775808.0L)
			x = INT64_MIN;
		else
			x = (int64_t)truncl(d);
		break;
	}
	default:
		return false;
	}
	if (e->mod_div == -1)
		return e->mod_rem == 0; /* x % -1 is 0, and INT64_MIN % -1 would trap */
	return x % e->mod_div == e->mod_rem;
}

static bool size_match(const struct query_expr *e, const bson_value_t *v)
{
	bson_iter_t it;
	int64_t n = 0;

	if (v->value_type != BSON_TYPE_ARRAY ||
	    !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
		return false;
	while (bson_iter_next(&it))
		if (++n > e->size)
			return false;
	return n == e->size;
}

/* $elemMatch on one value: an array with an element that satisfies it (*inner: its index). */
static bool elem_match(const struct query_expr *e, const bson_value_t *v, int *inner)
{
	bson_iter_t it;
	int k = -1, i;

	if (v->value_type != BSON_TYPE_ARRAY ||
	    !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
		return false;
	while (bson_iter_next(&it)) {
		k++;
		if (e->kind == QK_ELEM_OBJ) {
			uint32_t len;
			const uint8_t *data;
			int dummy = -1;

			if (BSON_ITER_HOLDS_DOCUMENT(&it))
				bson_iter_document(&it, &len, &data);
			else if (BSON_ITER_HOLDS_ARRAY(&it))
				bson_iter_array(&it, &len, &data);
			else
				continue;
			if (!match_doc(e->kids[0], data, len, &dummy))
				continue;
		} else {
			const bson_value_t *ev = bson_iter_value(&it);

			for (i = 0; i < e->nkids; i++)
				if (!match_value(e->kids[i], ev))
					break;
			if (i < e->nkids)
				continue;
		}
		*inner = k;
		return true;
	}
	return false;
}

/* A leaf predicate on one value (NULL: missing). *inner: $elemMatch's matching index. */
static bool test_value(const struct query_expr *e, const bson_value_t *v, int *inner)
{
	switch (e->kind) {
	case QK_EQ:
	case QK_LT:
	case QK_LTE:
	case QK_GT:
	case QK_GTE:
		return compare_match(e->kind, &e->val, v);
	case QK_IN:
		return in_match(e, v);
	case QK_EXISTS:
		return v != NULL;
	case QK_NEVER:
		return false;
	case QK_ALWAYS:
		return true;
	default:
		break;
	}
	if (!v)
		return false;
	switch (e->kind) {
	case QK_REGEX:
		return regex_value_match(e->res[0], v);
	case QK_TYPE:
		return type_match(e, v);
	case QK_MOD:
		return mod_match(e, v);
	case QK_SIZE:
		return size_match(e, v);
	case QK_ELEM_OBJ:
	case QK_ELEM_VAL:
		return elem_match(e, v, inner);
	default:
		return false;
	}
}

/* ---- path walking (design note 1) -------------------------------------------------- */

/* Tests the element it stands on (NULL: missing); on success records the index. */
static bool test_at(const struct query_expr *e, bson_iter_t *it, int off, int *elem)
{
	int inner = -1;

	if (!test_value(e, it ? bson_iter_value(it) : NULL, &inner))
		return false;
	*elem = off >= 0 ? off : inner;
	return true;
}

/* Positions it on the field named c of the document data (false when absent). */
static bool find_field(const uint8_t *data, uint32_t len, const struct query__comp *c,
		       bson_iter_t *it)
{
	if (!bson_iter_init_from_data(it, data, len))
		return false;
	while (bson_iter_next(it)) {
		const char *k = bson_iter_key(it);

		if (k[0] == c->s[0] && !strcmp(k, c->s))
			return true;
	}
	return false;
}

static bool walk_array(const struct query_expr *e, bson_iter_t *arr, int j, int off, int *elem);

/* Walks components i.. of e's path from the document data. off: outer array index or -1. */
static bool walk_doc(const struct query_expr *e, const uint8_t *data, uint32_t len, int i, int off,
		     int *elem)
{
	bson_iter_t it;

	for (;;) {
		if (!find_field(data, len, &e->path.comp[i], &it))
			return test_at(e, NULL, off, elem);
		if (BSON_ITER_HOLDS_ARRAY(&it))
			return walk_array(e, &it, i + 1, off, elem);
		if (i == e->path.n - 1)
			return test_at(e, &it, off, elem);
		if (!BSON_ITER_HOLDS_DOCUMENT(&it))
			return test_at(e, NULL, off, elem);
		bson_iter_document(&it, &len, &data);
		i++;
	}
}

static bool no_leaf_expansion(const struct query_expr *e)
{
	return e->kind == QK_SIZE || e->kind == QK_ELEM_OBJ || e->kind == QK_ELEM_VAL;
}

/* Walks components j.. of e's path through the array arr stands on (j == n: the path ends
 * at the array). */
static bool walk_array(const struct query_expr *e, bson_iter_t *arr, int j, int off, int *elem)
{
	const struct query__comp *c;
	const uint8_t *adata, *data;
	uint32_t alen, len;
	bson_iter_t it;
	int k = -1;

	bson_iter_array(arr, &alen, &adata);
	if (j == e->path.n) {
		if (no_leaf_expansion(e))
			return test_at(e, arr, off, elem);
		if (bson_iter_init_from_data(&it, adata, alen))
			while (bson_iter_next(&it))
				if (test_at(e, &it, off >= 0 ? off : ++k, elem))
					return true;
		return test_at(e, arr, off, elem);
	}
	c = &e->path.comp[j];
	if (!bson_iter_init_from_data(&it, adata, alen))
		return false;
	while (bson_iter_next(&it)) {
		bool at_index;

		k++;
		at_index = c->digits && !strcmp(bson_iter_key(&it), c->s);
		if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
			bson_iter_document(&it, &len, &data);
			if (walk_doc(e, data, len, j, off >= 0 ? off : k, elem))
				return true;
			if (!at_index)
				continue;
			if (j == e->path.n - 1) {
				if (test_at(e, &it, off, elem))
					return true;
			} else if (walk_doc(e, data, len, j + 1, off, elem)) {
				return true;
			}
		} else if (at_index) {
			if (j == e->path.n - 1) {
				if (test_at(e, &it, off >= 0 ? off : k, elem))
					return true;
			} else if (BSON_ITER_HOLDS_ARRAY(&it)) {
				if (walk_array(e, &it, j + 1, off, elem))
					return true;
			}
		}
	}
	return false;
}

/* ---- $expr ------------------------------------------------------------------------- */

struct xval {
	bool missing;	/* no value (a missing field) */
	bson_value_t v; /* Borrowed: from the document, the tree or the arena */
};

struct arena {
	bson_t **b; /* Owned: documents built during one $expr */
	int n, cap;
};

static bson_t *arena_new(struct arena *a)
{
	if (a->n == a->cap) {
		int cap = a->cap ? 2 * a->cap : 8;
		bson_t **nb = realloc(a->b, sizeof(*nb) * (size_t)cap);

		if (!nb)
			abort();
		a->b = nb;
		a->cap = cap;
	}
	a->b[a->n] = bson_new();
	return a->b[a->n++];
}

static void arena_release(struct arena *a)
{
	int i;

	for (i = 0; i < a->n; i++)
		bson_destroy(a->b[i]);
	free(a->b);
}

static void doc_value(bson_value_t *v, bson_type_t t, const uint8_t *data, uint32_t len)
{
	v->value_type = t;
	v->value.v_doc.data = (uint8_t *)data;
	v->value.v_doc.data_len = len;
}

static void xpath_array(const uint8_t *adata, uint32_t alen, const struct query__path *p, int i,
			struct arena *ar, struct xval *out);

/* Aggregation path semantics from a document: components i.. of p. */
static void xpath_doc(const uint8_t *data, uint32_t len, const struct query__path *p, int i,
		      struct arena *ar, struct xval *out)
{
	bson_iter_t it;

	out->missing = true;
	for (;;) {
		if (!find_field(data, len, &p->comp[i], &it))
			return;
		if (i == p->n - 1) {
			out->missing = false;
			out->v = *bson_iter_value(&it);
			return;
		}
		if (BSON_ITER_HOLDS_ARRAY(&it)) {
			bson_iter_array(&it, &len, &data);
			xpath_array(data, len, p, i + 1, ar, out);
			return;
		}
		if (!BSON_ITER_HOLDS_DOCUMENT(&it))
			return;
		bson_iter_document(&it, &len, &data);
		i++;
	}
}

/* Maps components i.. of p over the elements of an array: an array of the values found. */
static void xpath_array(const uint8_t *adata, uint32_t alen, const struct query__path *p, int i,
			struct arena *ar, struct xval *out)
{
	bson_t *b = arena_new(ar);
	const uint8_t *data;
	uint32_t len, k = 0;
	bson_iter_t it;
	struct xval r;
	char key[16];
	const char *ks;

	if (bson_iter_init_from_data(&it, adata, alen)) {
		while (bson_iter_next(&it)) {
			if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
				bson_iter_document(&it, &len, &data);
				xpath_doc(data, len, p, i, ar, &r);
			} else if (BSON_ITER_HOLDS_ARRAY(&it)) {
				bson_iter_array(&it, &len, &data);
				xpath_array(data, len, p, i, ar, &r);
			} else {
				continue;
			}
			if (r.missing)
				continue;
			bson_uint32_to_string(k++, &ks, key, sizeof(key));
			bson_append_value(b, ks, -1, &r.v);
		}
	}
	out->missing = false;
	doc_value(&out->v, BSON_TYPE_ARRAY, bson_get_data(b), b->len);
}

/* Aggregation comparison: MinKey < missing = undefined < null < the store's order. */
static int xrank(const struct xval *x)
{
	if (x->missing || x->v.value_type == BSON_TYPE_UNDEFINED)
		return 2;
	if (x->v.value_type == BSON_TYPE_NULL)
		return 3;
	if (x->v.value_type == BSON_TYPE_MINKEY)
		return 1;
	return 4;
}

static int xcompare(const struct xval *a, const struct xval *b)
{
	int ra = xrank(a), rb = xrank(b);

	if (ra != rb)
		return ra < rb ? -1 : 1;
	if (ra != 4)
		return 0;
	return store_value_compare(&a->v, &b->v);
}

static bool truthy(const struct xval *x)
{
	if (x->missing)
		return false;
	switch (x->v.value_type) {
	case BSON_TYPE_NULL:
	case BSON_TYPE_UNDEFINED:
		return false;
	case BSON_TYPE_BOOL:
		return x->v.value.v_bool;
	case BSON_TYPE_INT32:
		return x->v.value.v_int32 != 0;
	case BSON_TYPE_INT64:
		return x->v.value.v_int64 != 0;
	case BSON_TYPE_DOUBLE:
		return x->v.value.v_double != 0;
	case BSON_TYPE_DECIMAL128:
		return num_to_ld(&x->v) != 0;
	default:
		return true;
	}
}

static bool nullish(const struct xval *x)
{
	return x->missing || x->v.value_type == BSON_TYPE_NULL ||
	       x->v.value_type == BSON_TYPE_UNDEFINED;
}

static void set_bool(struct xval *out, bool b)
{
	out->missing = false;
	out->v.value_type = BSON_TYPE_BOOL;
	out->v.value.v_bool = b;
}

static void set_null(struct xval *out)
{
	out->missing = false;
	out->v.value_type = BSON_TYPE_NULL;
}

static void set_i64(struct xval *out, int64_t i, bool narrow)
{
	out->missing = false;
	if (narrow && i >= INT32_MIN && i <= INT32_MAX) {
		out->v.value_type = BSON_TYPE_INT32;
		out->v.value.v_int32 = (int32_t)i;
	} else {
		out->v.value_type = BSON_TYPE_INT64;
		out->v.value.v_int64 = i;
	}
}

static void set_dbl(struct xval *out, double d)
{
	out->missing = false;
	out->v.value_type = BSON_TYPE_DOUBLE;
	out->v.value.v_double = d;
}

/* Decimal results are computed in long double precision (see the report / README). */
static void set_dec(struct xval *out, long double d)
{
	char s[64];

	out->missing = false;
	out->v.value_type = BSON_TYPE_DECIMAL128;
	if (isnan(d))
		snprintf(s, sizeof(s), "NaN");
	else if (isinf(d))
		snprintf(s, sizeof(s), d < 0 ? "-Infinity" : "Infinity");
	else
		snprintf(s, sizeof(s), "%.18Lg", d);
	bson_decimal128_from_string(s, &out->v.value.v_decimal128);
}

/* Number kinds in widening order. */
enum nkind { NK_INT32, NK_INT64, NK_DOUBLE, NK_DEC };

static int nkind(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_INT32:
		return NK_INT32;
	case BSON_TYPE_INT64:
		return NK_INT64;
	case BSON_TYPE_DOUBLE:
		return NK_DOUBLE;
	default:
		return NK_DEC;
	}
}

static int64_t as_i64(const bson_value_t *v)
{
	return v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
}

static bool eval(const struct query__xnode *x, const uint8_t *root, uint32_t rlen, struct arena *ar,
		 struct xval *out);

/*
 * $add and $multiply: numbers widen int32 -> int64 -> double -> decimal, integer overflow
 * goes to double; $add also takes one date (milliseconds added). Any null or missing
 * operand makes null. false: a runtime error (a non-number, two dates).
 */
static bool eval_sum(const struct query__xnode *x, const uint8_t *root, uint32_t rlen,
		     struct arena *ar, struct xval *out, bool mul)
{
	int64_t iacc = mul ? 1 : 0;
	double dacc = mul ? 1 : 0;
	long double lacc = mul ? 1 : 0;
	int kind = NK_INT32, i;
	bool overflow = false, is_null = false, have_date = false;
	struct xval a;

	for (i = 0; i < x->n; i++) {
		if (!eval(x->args[i], root, rlen, ar, &a))
			return false;
		if (nullish(&a)) {
			is_null = true;
			continue;
		}
		if (!mul && a.v.value_type == BSON_TYPE_DATE_TIME) {
			if (have_date)
				return false;
			have_date = true;
			if (!overflow && __builtin_add_overflow(iacc, a.v.value.v_datetime, &iacc))
				overflow = true;
			dacc += (double)a.v.value.v_datetime;
			lacc += (long double)a.v.value.v_datetime;
			continue;
		}
		if (!is_number(a.v.value_type))
			return false;
		if (nkind(a.v.value_type) > kind)
			kind = nkind(a.v.value_type);
		if (kind <= NK_INT64 && !overflow) {
			int64_t v = as_i64(&a.v);

			if (mul ? __builtin_mul_overflow(iacc, v, &iacc)
				: __builtin_add_overflow(iacc, v, &iacc))
				overflow = true;
		}
		if (mul) {
			dacc *= (double)num_to_ld(&a.v);
			lacc *= num_to_ld(&a.v);
		} else {
			dacc += (double)num_to_ld(&a.v);
			lacc += num_to_ld(&a.v);
		}
	}
	if (is_null) {
		set_null(out);
		return true;
	}
	if (have_date) {
		out->missing = false;
		out->v.value_type = BSON_TYPE_DATE_TIME;
		out->v.value.v_datetime =
			kind <= NK_INT64 && !overflow ? iacc : (int64_t)llroundl(lacc);
		return true;
	}
	if (kind == NK_DEC)
		set_dec(out, lacc);
	else if (kind == NK_DOUBLE || overflow)
		set_dbl(out, dacc);
	else
		set_i64(out, iacc, kind == NK_INT32);
	return true;
}

/* $subtract, $divide, $mod: two operands. */
static bool eval_binary(const struct query__xnode *x, const uint8_t *root, uint32_t rlen,
			struct arena *ar, struct xval *out)
{
	struct xval a, b;
	int kind;
	int64_t r;

	if (!eval(x->args[0], root, rlen, ar, &a) || !eval(x->args[1], root, rlen, ar, &b))
		return false;
	if (nullish(&a) || nullish(&b)) {
		set_null(out);
		return true;
	}
	if (x->op == QX_SUB && a.v.value_type == BSON_TYPE_DATE_TIME) {
		if (b.v.value_type == BSON_TYPE_DATE_TIME) {
			set_i64(out, a.v.value.v_datetime - b.v.value.v_datetime, false);
			return true;
		}
		if (!is_number(b.v.value_type))
			return false;
		out->missing = false;
		out->v.value_type = BSON_TYPE_DATE_TIME;
		out->v.value.v_datetime = a.v.value.v_datetime - (int64_t)llroundl(num_to_ld(&b.v));
		return true;
	}
	if (!is_number(a.v.value_type) || !is_number(b.v.value_type))
		return false;
	kind = nkind(a.v.value_type) > nkind(b.v.value_type) ? nkind(a.v.value_type)
							     : nkind(b.v.value_type);
	switch (x->op) {
	case QX_SUB:
		if (kind <= NK_INT64 && !__builtin_sub_overflow(as_i64(&a.v), as_i64(&b.v), &r))
			set_i64(out, r, kind == NK_INT32);
		else if (kind == NK_DEC)
			set_dec(out, num_to_ld(&a.v) - num_to_ld(&b.v));
		else
			set_dbl(out, (double)(num_to_ld(&a.v) - num_to_ld(&b.v)));
		return true;
	case QX_DIV:
		if (num_to_ld(&b.v) == 0)
			return false;
		if (kind == NK_DEC)
			set_dec(out, num_to_ld(&a.v) / num_to_ld(&b.v));
		else if (kind <= NK_INT64)
			set_dbl(out, (double)as_i64(&a.v) / (double)as_i64(&b.v));
		else
			set_dbl(out, (double)num_to_ld(&a.v) / (double)num_to_ld(&b.v));
		return true;
	default: /* QX_MOD */
		if (num_to_ld(&b.v) == 0)
			return false;
		if (kind <= NK_INT64) {
			int64_t d = as_i64(&b.v);

			set_i64(out, d == -1 ? 0 : as_i64(&a.v) % d, kind == NK_INT32);
		} else if (kind == NK_DEC) {
			set_dec(out, fmodl(num_to_ld(&a.v), num_to_ld(&b.v)));
		} else {
			set_dbl(out, fmod((double)num_to_ld(&a.v), (double)num_to_ld(&b.v)));
		}
		return true;
	}
}

static bool eval_abs(const struct xval *a, struct xval *out)
{
	if (nullish(a)) {
		set_null(out);
		return true;
	}
	*out = *a;
	switch (a->v.value_type) {
	case BSON_TYPE_INT32:
		set_i64(out,
			a->v.value.v_int32 < 0 ? -(int64_t)a->v.value.v_int32 : a->v.value.v_int32,
			true);
		return true;
	case BSON_TYPE_INT64:
		if (a->v.value.v_int64 == INT64_MIN)
			return false;
		set_i64(out, a->v.value.v_int64 < 0 ? -a->v.value.v_int64 : a->v.value.v_int64,
			false);
		return true;
	case BSON_TYPE_DOUBLE:
		out->v.value.v_double = fabs(a->v.value.v_double);
		return true;
	case BSON_TYPE_DECIMAL128:
		out->v.value.v_decimal128.high &= ~(UINT64_C(1) << 63); /* exact */
		return true;
	default:
		return false;
	}
}

/* Evaluates x against the document root. false: a runtime error. */
static bool eval(const struct query__xnode *x, const uint8_t *root, uint32_t rlen, struct arena *ar,
		 struct xval *out)
{
	struct xval a, b;
	char key[16];
	const char *ks;
	bson_t *bld;
	int i, c;

	out->missing = false;
	switch (x->op) {
	case QX_LIT:
		out->v = x->lit;
		return true;
	case QX_ROOT:
		doc_value(&out->v, BSON_TYPE_DOCUMENT, root, rlen);
		return true;
	case QX_PATH:
		xpath_doc(root, rlen, &x->path, 0, ar, out);
		return true;
	case QX_OBJ:
	case QX_ARR:
		bld = arena_new(ar);
		for (i = 0; i < x->n; i++) {
			if (!eval(x->args[i], root, rlen, ar, &a))
				return false;
			if (x->op == QX_OBJ) {
				if (!a.missing) /* missing fields are left out */
					bson_append_value(bld, x->keys[i], -1, &a.v);
				continue;
			}
			bson_uint32_to_string((uint32_t)i, &ks, key, sizeof(key));
			bson_append_value(bld, ks, -1, a.missing ? &null_value : &a.v);
		}
		doc_value(&out->v, x->op == QX_OBJ ? BSON_TYPE_DOCUMENT : BSON_TYPE_ARRAY,
			  bson_get_data(bld), bld->len);
		return true;
	case QX_EQ:
	case QX_NE:
	case QX_GT:
	case QX_GTE:
	case QX_LT:
	case QX_LTE:
	case QX_CMP:
		if (!eval(x->args[0], root, rlen, ar, &a) || !eval(x->args[1], root, rlen, ar, &b))
			return false;
		c = xcompare(&a, &b);
		switch (x->op) {
		case QX_EQ:
			set_bool(out, c == 0);
			break;
		case QX_NE:
			set_bool(out, c != 0);
			break;
		case QX_GT:
			set_bool(out, c > 0);
			break;
		case QX_GTE:
			set_bool(out, c >= 0);
			break;
		case QX_LT:
			set_bool(out, c < 0);
			break;
		case QX_LTE:
			set_bool(out, c <= 0);
			break;
		default:
			set_i64(out, c < 0 ? -1 : c > 0, true);
			break;
		}
		return true;
	case QX_AND:
	case QX_OR:
		for (i = 0; i < x->n; i++) {
			if (!eval(x->args[i], root, rlen, ar, &a))
				return false;
			if (truthy(&a) == (x->op == QX_OR)) {
				set_bool(out, x->op == QX_OR);
				return true;
			}
		}
		set_bool(out, x->op == QX_AND);
		return true;
	case QX_NOT:
		if (!eval(x->args[0], root, rlen, ar, &a))
			return false;
		set_bool(out, !truthy(&a));
		return true;
	case QX_ADD:
	case QX_MUL:
		return eval_sum(x, root, rlen, ar, out, x->op == QX_MUL);
	case QX_SUB:
	case QX_DIV:
	case QX_MOD:
		return eval_binary(x, root, rlen, ar, out);
	case QX_ABS:
		if (!eval(x->args[0], root, rlen, ar, &a))
			return false;
		return eval_abs(&a, out);
	case QX_GETFIELD: {
		bson_iter_t it;

		if (!eval(x->args[0], root, rlen, ar, &a))
			return false;
		if (nullish(&a)) {
			out->v = null_value;
			return true;
		}
		if (a.v.value_type != BSON_TYPE_DOCUMENT ||
		    !bson_iter_init_from_data(&it, a.v.value.v_doc.data, a.v.value.v_doc.data_len))
			return false; /* MongoDB: an error; here no match */
		out->missing = true;
		while (bson_iter_next(&it))
			if (!strcmp(bson_iter_key(&it), x->lit.value.v_utf8.str)) {
				out->v = *bson_iter_value(&it);
				out->missing = false;
				break;
			}
		return true;
	}
	default:
		return false;
	}
}

static bool expr_match(const struct query__xnode *x, const uint8_t *data, uint32_t len)
{
	struct arena ar = {NULL, 0, 0};
	struct xval r;
	bool ok;

	ok = eval(x, data, len, &ar, &r) && truthy(&r);
	arena_release(&ar);
	return ok;
}

/* ---- the tree ---------------------------------------------------------------------- */

/* A node of the value form of $elemMatch (path.n == 0) against one element. */
static bool match_value(const struct query_expr *e, const bson_value_t *v)
{
	int i, inner = -1;

	switch (e->kind) {
	case QK_AND:
		for (i = 0; i < e->nkids; i++)
			if (!match_value(e->kids[i], v))
				return false;
		return true;
	case QK_OR:
		for (i = 0; i < e->nkids; i++)
			if (match_value(e->kids[i], v))
				return true;
		return false;
	case QK_NOR:
		for (i = 0; i < e->nkids; i++)
			if (match_value(e->kids[i], v))
				return false;
		return true;
	case QK_NOT:
		return !match_value(e->kids[0], v);
	default:
		return test_value(e, v, &inner);
	}
}

/* A node against the document data; *elem as in design note 4 (untouched on no match). */
static bool match_doc(const struct query_expr *e, const uint8_t *data, uint32_t len, int *elem)
{
	int i, k;

	switch (e->kind) {
	case QK_AND:
		for (i = 0; i < e->nkids; i++) {
			k = -1;
			if (!match_doc(e->kids[i], data, len, &k))
				return false;
			if (k >= 0)
				*elem = k;
		}
		return true;
	case QK_OR:
		for (i = 0; i < e->nkids; i++) {
			k = -1;
			if (match_doc(e->kids[i], data, len, &k)) {
				if (k >= 0)
					*elem = k;
				return true;
			}
		}
		return false;
	case QK_NOR:
		for (i = 0; i < e->nkids; i++) {
			k = -1;
			if (match_doc(e->kids[i], data, len, &k))
				return false;
		}
		return true;
	case QK_NOT:
		k = -1;
		return !match_doc(e->kids[0], data, len, &k);
	case QK_EXPR:
		return expr_match(e->x, data, len);
	case QK_ALWAYS:
	case QK_TEXT: /* the text stages decided it (plan.c plans $text only so) */
		return true;
	case QK_NEVER:
		return false;
	default:
		if (e->path.n == 0)
			return false; /* value-form nodes are only evaluated by match_value */
		return walk_doc(e, data, len, 0, -1, elem);
	}
}

bool query_filter_match(const struct query_expr *e, const bson_t *doc, int *elem_index)
{
	int k = -1;
	bool r;

	if (e && e->coll) { /* collation.c note 1: the document's strings as sort keys */
		bson_t conv = BSON_INITIALIZER;

		query__collate_doc(e->coll, doc, &conv);
		r = match_doc(e, bson_get_data(&conv), conv.len, &k);
		bson_destroy(&conv);
	} else {
		r = match_doc(e, bson_get_data(doc), doc->len, &k);
	}

	if (elem_index)
		*elem_index = r ? k : -1;
	return r;
}
