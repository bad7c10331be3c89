/*
 * expr.c - aggregation expressions: parsing an expression value ("$a.b", "$$var", literals,
 * {a: ..} objects, [..] arrays and {$op: ..} operators) into a tree, and evaluating it
 * against a document with MongoDB's rules (numeric type widening, null/missing propagation,
 * BSON comparison order, UTC date parts). It does not know stages or accumulators of
 * $group (agg.c), and it does not run find filters (match.c; $match is agg.c's job).
 *
 * Design notes
 * 1. A value is a bson_value_t; BSON_TYPE_EOD means missing. Values never own memory: they
 *    point into the input document, the tree's literals or the evaluation's arena
 *    (agg_int.h), so evaluation allocates only arena blocks, freed per document.
 * 2. Operators are parsed into positional argument slots. Object-form operators ($cond
 *    object form, $switch, $filter, $map, $reduce, $let, $dateToString, $dateFromString,
 *    $regexMatch, $convert, $trim...) put their named arguments into fixed slots (NULL when
 *    absent), so evaluation never looks names up.
 * 3. Variables are checked at parse time against the scope (struct agg__scope) and looked
 *    up by name at run time in a linked list of bindings on the C stack.
 * 4. Decimal128 arithmetic ($add $subtract $multiply $divide, $sum, $avg) is IEEE 754-2008
 *    decimal arithmetic (dec.c) when any operand is a decimal, exact to 34 digits for every
 *    operand; $round $trunc $ceil $floor $abs of a decimal work on its own digits. The
 *    transcendental operators ($sqrt $exp $ln $log10 $log $pow) of a decimal are correctly
 *    rounded to 34 digits (decmath.c).
 */
#include "agg_int.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* ---- the arena ----------------------------------------------------------------------- */

void agg__arena_init(struct agg__arena *a)
{
	memset(a, 0, sizeof(*a));
}

void agg__arena_reset(struct agg__arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->blk[i]);
	a->n = 0;
}

void agg__arena_release(struct agg__arena *a)
{
	agg__arena_reset(a);
	free(a->blk);
	a->blk = NULL;
	a->cap = 0;
}

void *agg__arena_alloc(struct agg__arena *a, size_t n)
{
	void *p;

	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 16;
		void **nb = realloc(a->blk, cap * sizeof(*nb));

		if (!nb)
			abort();
		a->blk = nb;
		a->cap = cap;
	}
	p = malloc(n ? n : 1);
	if (!p)
		abort();
	a->blk[a->n++] = p;
	return p;
}

void agg__arena_take(struct agg__arena *a, bson_t *b, bson_type_t t, bson_value_t *out)
{
	uint8_t *p = agg__arena_alloc(a, b->len);

	memcpy(p, bson_get_data(b), b->len);
	out->value_type = t;
	out->value.v_doc.data = p;
	out->value.v_doc.data_len = b->len;
	bson_destroy(b);
}

static void set_str(struct agg__arena *a, const char *s, size_t len, bson_value_t *out)
{
	char *p = agg__arena_alloc(a, len + 1);

	memcpy(p, s, len);
	p[len] = 0;
	out->value_type = BSON_TYPE_UTF8;
	out->value.v_utf8.str = p;
	out->value.v_utf8.len = (uint32_t)len;
}

/* ---- value helpers ------------------------------------------------------------------- */

static const bson_value_t missing_v = {.value_type = BSON_TYPE_EOD};

static void set_null(bson_value_t *o)
{
	memset(o, 0, sizeof(*o));
	o->value_type = BSON_TYPE_NULL;
}

static void set_bool(bson_value_t *o, bool b)
{
	memset(o, 0, sizeof(*o));
	o->value_type = BSON_TYPE_BOOL;
	o->value.v_bool = b;
}

static void set_i32(bson_value_t *o, int32_t i)
{
	memset(o, 0, sizeof(*o));
	o->value_type = BSON_TYPE_INT32;
	o->value.v_int32 = i;
}

static void set_i64(bson_value_t *o, int64_t i)
{
	memset(o, 0, sizeof(*o));
	o->value_type = BSON_TYPE_INT64;
	o->value.v_int64 = i;
}

static void set_dbl(bson_value_t *o, double d)
{
	memset(o, 0, sizeof(*o));
	o->value_type = BSON_TYPE_DOUBLE;
	o->value.v_double = d;
}

static void set_date(bson_value_t *o, int64_t ms)
{
	memset(o, 0, sizeof(*o));
	o->value_type = BSON_TYPE_DATE_TIME;
	o->value.v_datetime = ms;
}

bool agg__is_number(const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_DECIMAL128:
		return true;
	default:
		return false;
	}
}

/* 1 int32, 2 int64, 3 double, 4 decimal, 0 not a number. */
static int num_kind(const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_INT32:
		return 1;
	case BSON_TYPE_INT64:
		return 2;
	case BSON_TYPE_DOUBLE:
		return 3;
	case BSON_TYPE_DECIMAL128:
		return 4;
	default:
		return 0;
	}
}

long double agg__num_ld(const bson_value_t *v)
{
	char s[BSON_DECIMAL128_STRING];

	switch (v->value_type) {
	case BSON_TYPE_INT32:
		return v->value.v_int32;
	case BSON_TYPE_INT64:
		return (long double)v->value.v_int64;
	case BSON_TYPE_DOUBLE:
		return v->value.v_double;
	case BSON_TYPE_DECIMAL128:
		bson_decimal128_to_string(&v->value.v_decimal128, s);
		if (!strcmp(s, "NaN"))
			return NAN;
		if (!strcmp(s, "Infinity"))
			return INFINITY;
		if (!strcmp(s, "-Infinity"))
			return -INFINITY;
		return strtold(s, NULL);
	default:
		return 0;
	}
}

static int64_t num_i64(const bson_value_t *v)
{
	return v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
}

void agg__num_set(int kind, long double d, bson_value_t *out)
{
	char s[64];

	memset(out, 0, sizeof(*out));
	switch (kind) {
	case 1:
		if (d >= INT32_MIN && d <= INT32_MAX) {
			set_i32(out, (int32_t)d);
			return;
		}
		/* fall through */
	case 2:
		if (d >= -9223372036854775808.0L && d < 9223372036854775808.0L) {
			set_i64(out, (int64_t)d);
			return;
		}
		set_dbl(out, (double)d);
		return;
	case 4:
		out->value_type = BSON_TYPE_DECIMAL128;
		if (isnan(d))
			snprintf(s, sizeof(s), "NaN");
		else if (isinf(d))
			snprintf(s, sizeof(s), d < 0 ? "-Infinity" : "Infinity");
		else
			snprintf(s, sizeof(s), "%.17Lg", d);
		bson_decimal128_from_string(s, &out->value.v_decimal128);
		return;
	default:
		set_dbl(out, (double)d);
	}
}

bool agg__nullish(const bson_value_t *v)
{
	return v->value_type == BSON_TYPE_EOD || v->value_type == BSON_TYPE_NULL ||
	       v->value_type == BSON_TYPE_UNDEFINED;
}

bool agg__truthy(const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_EOD:
	case BSON_TYPE_NULL:
	case BSON_TYPE_UNDEFINED:
		return false;
	case BSON_TYPE_BOOL:
		return v->value.v_bool;
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_DECIMAL128:
		return agg__num_ld(v) != 0;
	default:
		return true;
	}
}

static int rank(const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_MINKEY:
		return 1;
	case BSON_TYPE_EOD:
		return 2;
	case BSON_TYPE_UNDEFINED:
	case BSON_TYPE_NULL:
		return 3;
	default:
		return 4;
	}
}

int agg__cmp(const bson_value_t *a, const bson_value_t *b)
{
	int ra = rank(a), rb = rank(b);

	if (ra != rb)
		return ra < rb ? -1 : 1;
	if (ra != 4)
		return 0;
	return store_value_compare(a, b);
}

const char *agg__type_name(const bson_value_t *v)
{
	return v->value_type == BSON_TYPE_EOD ? "missing" : store_type_alias(v->value_type);
}

bool agg__doc_view(const bson_value_t *v, bson_t *out)
{
	if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)
		return false;
	return bson_init_static(out, v->value.v_doc.data, v->value.v_doc.data_len);
}

void agg__append(bson_t *b, const char *key, const bson_value_t *v)
{
	if (v->value_type != BSON_TYPE_EOD)
		bson_append_value(b, key, -1, v);
}

static void append_idx(bson_t *b, uint32_t i, const bson_value_t *v)
{
	char buf[16];
	const char *k;

	bson_uint32_to_string(i, &k, buf, sizeof(buf));
	bson_append_value(b, k, -1, v);
}

/* A growable list of values (malloc'd; the values follow the value convention). */
struct vec {
	bson_value_t *v;
	size_t n, cap;
};

static void vec_push(struct vec *a, const bson_value_t *v)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 8;
		a->v = realloc(a->v, a->cap * sizeof(*a->v));
		if (!a->v)
			abort();
	}
	a->v[a->n++] = *v;
}

/* An array value of the first n values of vs (missing ones become null). */
static void make_array(struct agg__arena *ar, const bson_value_t *vs, size_t n, bson_value_t *out)
{
	bson_t b = BSON_INITIALIZER;
	bson_value_t nul;

	set_null(&nul);
	for (size_t i = 0; i < n; i++)
		append_idx(&b, (uint32_t)i, vs[i].value_type == BSON_TYPE_EOD ? &nul : &vs[i]);
	agg__arena_take(ar, &b, BSON_TYPE_ARRAY, out);
}

/* The elements of an array value into a vec (values Borrowed from the array). */
static void array_elems(const bson_value_t *arr, struct vec *out)
{
	bson_iter_t it;

	if (!bson_iter_init_from_data(&it, arr->value.v_doc.data, arr->value.v_doc.data_len))
		return;
	while (bson_iter_next(&it))
		vec_push(out, bson_iter_value(&it));
}

void agg__path_get(const bson_value_t *base, char **comp, int ncomp, struct agg__arena *ar,
		   bson_value_t *out)
{
	bson_iter_t it;

	if (ncomp == 0) {
		*out = *base;
		return;
	}
	if (base->value_type == BSON_TYPE_DOCUMENT) {
		if (!bson_iter_init_from_data(&it, base->value.v_doc.data,
					      base->value.v_doc.data_len) ||
		    !bson_iter_find(&it, comp[0])) {
			*out = missing_v;
			return;
		}
		agg__path_get(bson_iter_value(&it), comp + 1, ncomp - 1, ar, out);
		return;
	}
	if (base->value_type == BSON_TYPE_ARRAY) {
		bson_t b = BSON_INITIALIZER;
		uint32_t k = 0;

		if (bson_iter_init_from_data(&it, base->value.v_doc.data,
					     base->value.v_doc.data_len)) {
			while (bson_iter_next(&it)) {
				bson_value_t r;
				bson_value_t e = *bson_iter_value(&it);

				if (e.value_type != BSON_TYPE_DOCUMENT &&
				    e.value_type != BSON_TYPE_ARRAY)
					continue;
				agg__path_get(&e, comp, ncomp, ar, &r);
				if (r.value_type != BSON_TYPE_EOD)
					append_idx(&b, k++, &r);
			}
		}
		agg__arena_take(ar, &b, BSON_TYPE_ARRAY, out);
		return;
	}
	*out = missing_v;
}

/* ---- sums ---------------------------------------------------------------------------- */

static void set_dec(bson_value_t *o, const bson_decimal128_t *d)
{
	memset(o, 0, sizeof(*o));
	o->value_type = BSON_TYPE_DECIMAL128;
	o->value.v_decimal128 = *d;
}

void agg__sum_add(struct agg__sum *s, const bson_value_t *v)
{
	int k = num_kind(v);

	if (!k)
		return;
	if ((k == 4 || s->dec_on) && !s->dec_bad) {
		bson_decimal128_t x;

		if (!s->dec_on) { /* the sum so far, as a decimal */
			bson_value_t so_far;

			if (s->kind == 0)
				set_i32(&so_far, 0);
			else if (s->kind <= 2 && !s->overflow)
				set_i64(&so_far, s->i);
			else
				set_dbl(&so_far, (double)s->d);
			agg__dec_from_value(&so_far, &s->dec);
			s->dec_on = true;
		}
		agg__dec_from_value(v, &x);
		if (agg__dec_op('+', &s->dec, &x, &s->dec))
			s->dec_bad = true;
	}
	s->n++;
	if (k > s->kind)
		s->kind = k;
	s->d += agg__num_ld(v);
	if (k <= 2 && !s->overflow && __builtin_add_overflow(s->i, num_i64(v), &s->i))
		s->overflow = true;
}

void agg__sum_value(const struct agg__sum *s, bson_value_t *out)
{
	if (s->kind == 0) {
		set_i32(out, 0);
	} else if (s->kind <= 2 && !s->overflow) {
		if (s->kind == 1 && s->i >= INT32_MIN && s->i <= INT32_MAX)
			set_i32(out, (int32_t)s->i);
		else
			set_i64(out, s->i);
	} else if (s->kind == 4 && s->dec_on && !s->dec_bad) {
		set_dec(out, &s->dec);
	} else {
		agg__num_set(s->kind == 4 ? 4 : 3, s->d, out);
	}
}

void agg__avg_value(const struct agg__sum *s, bson_value_t *out)
{
	if (s->n == 0)
		set_null(out);
	else if (s->kind == 4) {
		bson_value_t n;
		bson_decimal128_t dn, q;

		set_i64(&n, s->n);
		agg__dec_from_value(&n, &dn);
		if (s->dec_on && !s->dec_bad && !agg__dec_op('/', &s->dec, &dn, &q))
			set_dec(out, &q);
		else
			agg__num_set(4, s->d / s->n, out);
	} else if (s->kind <= 2 && !s->overflow)
		set_dbl(out, (double)s->i / (double)s->n);
	else
		set_dbl(out, (double)(s->d / s->n));
}

/* ---- the tree ------------------------------------------------------------------------ */

enum xop {
	X_LIT,
	X_PATH, /* a path from $$CURRENT */
	X_VAR,	/* $$name[.path]: ROOT, CURRENT, NOW, REMOVE or a user variable */
	X_OBJ,
	X_ARR,
	/* arithmetic */
	X_ADD,
	X_SUB,
	X_MUL,
	X_DIV,
	X_MOD,
	X_ABS,
	X_CEIL,
	X_FLOOR,
	X_ROUND,
	X_TRUNC,
	X_SQRT,
	X_POW,
	X_EXP,
	X_LN,
	X_LOG10,
	X_LOG,
	/* comparison, boolean, conditional */
	X_EQ,
	X_NE,
	X_GT,
	X_GTE,
	X_LT,
	X_LTE,
	X_CMP,
	X_AND,
	X_OR,
	X_NOT,
	X_COND,
	X_IFNULL,
	X_SWITCH,
	/* strings */
	X_CONCAT,
	X_SUBSTRB,
	X_SUBSTRCP,
	X_TOLOWER,
	X_TOUPPER,
	X_STRLENB,
	X_STRLENCP,
	X_SPLIT,
	X_TRIM,
	X_LTRIM,
	X_RTRIM,
	X_INDEXOFB,
	X_REGEXMATCH,
	X_STRCASECMP,
	/* dates */
	X_YEAR,
	X_MONTH,
	X_DOM,
	X_HOUR,
	X_MINUTE,
	X_SECOND,
	X_MILLI,
	X_DOW,
	X_DOY,
	X_WEEK,
	X_DATETOSTRING,
	X_DATEFROMSTRING,
	/* arrays */
	X_SIZE,
	X_ELEMAT,
	X_CONCATARRAYS,
	X_FILTER,
	X_MAP,
	X_REDUCE,
	X_IN,
	X_SLICE,
	X_FIRST,
	X_LAST,
	X_ISARRAY,
	X_RANGE,
	X_REVERSE,
	X_INDEXOFARRAY,
	/* types */
	X_TYPE,
	X_TOSTRING,
	X_TOINT,
	X_TOLONG,
	X_TODOUBLE,
	X_TODECIMAL,
	X_TOBOOL,
	X_TODATE,
	X_TOOID,
	X_CONVERT,
	X_ISNUMBER,
	/* objects */
	X_MERGEOBJECTS,
	X_OBJTOARRAY,
	X_ARRTOOBJ,
	X_GETFIELD,   /* args: field (a string literal), input */
	X_SETFIELD,   /* args: field, input, value */
	X_UNSETFIELD, /* args: field, input */
	/* accumulators as expressions */
	X_SUM,
	X_AVG,
	X_MIN,
	X_MAX,
	X_STDDEVPOP,
	X_LET,
	X_META, /* {$meta: "textScore"} */
	X_RAND, /* {$rand: {}} */
};

/* How an operator's operand is parsed. */
enum xform {
	F_ARGS,	   /* an array of arguments, or one non-array argument */
	F_LITERAL, /* $literal */
	F_NAMED,   /* a document of named arguments (slots listed in the table) */
	F_COND,	   /* $cond: array of 3 or {if, then, else} */
	F_SWITCH,
	F_LET,
	F_DATEPART, /* a date expression or {date, timezone} */
	F_META,	    /* $meta: a metadata name */
	F_FIELD,    /* $getField, $setField, $unsetField: named, 'field' a string constant */
};

struct xdef {
	const char *name;
	int op;
	int form;
	int min, max;	      /* F_ARGS: argument counts (-1: any) */
	const char *slots[5]; /* F_NAMED: argument names in slot order */
	unsigned required;    /* F_NAMED: bit i set when slot i is required */
};

static const struct xdef xdefs[] = {
	{"$add", X_ADD, F_ARGS, 0, -1, {0}, 0},
	{"$subtract", X_SUB, F_ARGS, 2, 2, {0}, 0},
	{"$multiply", X_MUL, F_ARGS, 0, -1, {0}, 0},
	{"$divide", X_DIV, F_ARGS, 2, 2, {0}, 0},
	{"$mod", X_MOD, F_ARGS, 2, 2, {0}, 0},
	{"$abs", X_ABS, F_ARGS, 1, 1, {0}, 0},
	{"$ceil", X_CEIL, F_ARGS, 1, 1, {0}, 0},
	{"$floor", X_FLOOR, F_ARGS, 1, 1, {0}, 0},
	{"$round", X_ROUND, F_ARGS, 1, 2, {0}, 0},
	{"$trunc", X_TRUNC, F_ARGS, 1, 2, {0}, 0},
	{"$sqrt", X_SQRT, F_ARGS, 1, 1, {0}, 0},
	{"$pow", X_POW, F_ARGS, 2, 2, {0}, 0},
	{"$exp", X_EXP, F_ARGS, 1, 1, {0}, 0},
	{"$ln", X_LN, F_ARGS, 1, 1, {0}, 0},
	{"$log10", X_LOG10, F_ARGS, 1, 1, {0}, 0},
	{"$log", X_LOG, F_ARGS, 2, 2, {0}, 0},
	{"$eq", X_EQ, F_ARGS, 2, 2, {0}, 0},
	{"$ne", X_NE, F_ARGS, 2, 2, {0}, 0},
	{"$gt", X_GT, F_ARGS, 2, 2, {0}, 0},
	{"$gte", X_GTE, F_ARGS, 2, 2, {0}, 0},
	{"$lt", X_LT, F_ARGS, 2, 2, {0}, 0},
	{"$lte", X_LTE, F_ARGS, 2, 2, {0}, 0},
	{"$cmp", X_CMP, F_ARGS, 2, 2, {0}, 0},
	{"$and", X_AND, F_ARGS, 0, -1, {0}, 0},
	{"$or", X_OR, F_ARGS, 0, -1, {0}, 0},
	{"$not", X_NOT, F_ARGS, 1, 1, {0}, 0},
	{"$cond", X_COND, F_COND, 3, 3, {0}, 0},
	{"$ifNull", X_IFNULL, F_ARGS, 2, -1, {0}, 0},
	{"$switch", X_SWITCH, F_SWITCH, 0, 0, {0}, 0},
	{"$concat", X_CONCAT, F_ARGS, 0, -1, {0}, 0},
	{"$substr", X_SUBSTRB, F_ARGS, 3, 3, {0}, 0},
	{"$substrBytes", X_SUBSTRB, F_ARGS, 3, 3, {0}, 0},
	{"$substrCP", X_SUBSTRCP, F_ARGS, 3, 3, {0}, 0},
	{"$toLower", X_TOLOWER, F_ARGS, 1, 1, {0}, 0},
	{"$toUpper", X_TOUPPER, F_ARGS, 1, 1, {0}, 0},
	{"$strLenBytes", X_STRLENB, F_ARGS, 1, 1, {0}, 0},
	{"$strLenCP", X_STRLENCP, F_ARGS, 1, 1, {0}, 0},
	{"$split", X_SPLIT, F_ARGS, 2, 2, {0}, 0},
	{"$trim", X_TRIM, F_NAMED, 0, 0, {"input", "chars"}, 1},
	{"$ltrim", X_LTRIM, F_NAMED, 0, 0, {"input", "chars"}, 1},
	{"$rtrim", X_RTRIM, F_NAMED, 0, 0, {"input", "chars"}, 1},
	{"$indexOfBytes", X_INDEXOFB, F_ARGS, 2, 4, {0}, 0},
	{"$regexMatch", X_REGEXMATCH, F_NAMED, 0, 0, {"input", "regex", "options"}, 3},
	{"$strcasecmp", X_STRCASECMP, F_ARGS, 2, 2, {0}, 0},
	{"$year", X_YEAR, F_DATEPART, 1, 1, {0}, 0},
	{"$month", X_MONTH, F_DATEPART, 1, 1, {0}, 0},
	{"$dayOfMonth", X_DOM, F_DATEPART, 1, 1, {0}, 0},
	{"$hour", X_HOUR, F_DATEPART, 1, 1, {0}, 0},
	{"$minute", X_MINUTE, F_DATEPART, 1, 1, {0}, 0},
	{"$second", X_SECOND, F_DATEPART, 1, 1, {0}, 0},
	{"$millisecond", X_MILLI, F_DATEPART, 1, 1, {0}, 0},
	{"$dayOfWeek", X_DOW, F_DATEPART, 1, 1, {0}, 0},
	{"$dayOfYear", X_DOY, F_DATEPART, 1, 1, {0}, 0},
	{"$week", X_WEEK, F_DATEPART, 1, 1, {0}, 0},
	{"$dateToString",
	 X_DATETOSTRING,
	 F_NAMED,
	 0,
	 0,
	 {"date", "format", "timezone", "onNull"},
	 1},
	{"$dateFromString",
	 X_DATEFROMSTRING,
	 F_NAMED,
	 0,
	 0,
	 {"dateString", "format", "timezone", "onError", "onNull"},
	 1},
	{"$size", X_SIZE, F_ARGS, 1, 1, {0}, 0},
	{"$arrayElemAt", X_ELEMAT, F_ARGS, 2, 2, {0}, 0},
	{"$concatArrays", X_CONCATARRAYS, F_ARGS, 0, -1, {0}, 0},
	{"$filter", X_FILTER, F_NAMED, 0, 0, {"input", "cond", "as", "limit"}, 3},
	{"$map", X_MAP, F_NAMED, 0, 0, {"input", "in", "as"}, 3},
	{"$reduce", X_REDUCE, F_NAMED, 0, 0, {"input", "initialValue", "in"}, 7},
	{"$in", X_IN, F_ARGS, 2, 2, {0}, 0},
	{"$slice", X_SLICE, F_ARGS, 2, 3, {0}, 0},
	{"$first", X_FIRST, F_ARGS, 1, 1, {0}, 0},
	{"$last", X_LAST, F_ARGS, 1, 1, {0}, 0},
	{"$isArray", X_ISARRAY, F_ARGS, 1, 1, {0}, 0},
	{"$range", X_RANGE, F_ARGS, 2, 3, {0}, 0},
	{"$reverseArray", X_REVERSE, F_ARGS, 1, 1, {0}, 0},
	{"$indexOfArray", X_INDEXOFARRAY, F_ARGS, 2, 4, {0}, 0},
	{"$type", X_TYPE, F_ARGS, 1, 1, {0}, 0},
	{"$toString", X_TOSTRING, F_ARGS, 1, 1, {0}, 0},
	{"$toInt", X_TOINT, F_ARGS, 1, 1, {0}, 0},
	{"$toLong", X_TOLONG, F_ARGS, 1, 1, {0}, 0},
	{"$toDouble", X_TODOUBLE, F_ARGS, 1, 1, {0}, 0},
	{"$toDecimal", X_TODECIMAL, F_ARGS, 1, 1, {0}, 0},
	{"$toBool", X_TOBOOL, F_ARGS, 1, 1, {0}, 0},
	{"$toDate", X_TODATE, F_ARGS, 1, 1, {0}, 0},
	{"$toObjectId", X_TOOID, F_ARGS, 1, 1, {0}, 0},
	{"$convert", X_CONVERT, F_NAMED, 0, 0, {"input", "to", "onError", "onNull"}, 3},
	{"$isNumber", X_ISNUMBER, F_ARGS, 1, 1, {0}, 0},
	{"$mergeObjects", X_MERGEOBJECTS, F_ARGS, 0, -1, {0}, 0},
	{"$objectToArray", X_OBJTOARRAY, F_ARGS, 1, 1, {0}, 0},
	{"$arrayToObject", X_ARRTOOBJ, F_ARGS, 1, 1, {0}, 0},
	{"$getField", X_GETFIELD, F_FIELD, 0, 0, {"field", "input"}, 1},
	{"$setField", X_SETFIELD, F_FIELD, 0, 0, {"field", "input", "value"}, 7},
	{"$unsetField", X_UNSETFIELD, F_FIELD, 0, 0, {"field", "input"}, 3},
	{"$sum", X_SUM, F_ARGS, 0, -1, {0}, 0},
	{"$avg", X_AVG, F_ARGS, 0, -1, {0}, 0},
	{"$min", X_MIN, F_ARGS, 0, -1, {0}, 0},
	{"$max", X_MAX, F_ARGS, 0, -1, {0}, 0},
	{"$stdDevPop", X_STDDEVPOP, F_ARGS, 0, -1, {0}, 0},
	{"$let", X_LET, F_LET, 0, 0, {0}, 0},
	{"$meta", X_META, F_META, 0, 0, {0}, 0},
	{"$rand", X_RAND, F_NAMED, 0, 0, {0}, 0},
	{"$literal", X_LIT, F_LITERAL, 0, 0, {0}, 0},
};

struct agg__x {
	int op;			/* enum xop */
	const struct xdef *def; /* operators: the table entry */
	int n;			/* args */
	struct agg__x **args;	/* Owned: n children (NULL for absent named arguments) */
	char **keys;		/* Owned: X_OBJ field names, X_LET variable names (n - 1) */
	bson_value_t lit;	/* X_LIT: Owned copy */
	char **comp;		/* Owned: X_PATH / X_VAR path components (into buf) */
	int ncomp;
	char *buf;    /* Owned: the components, NUL-separated */
	char *dotted; /* Owned: X_PATH: the path as written (without '$') */
	char *var;    /* Owned: X_VAR name; X_FILTER/X_MAP "as" name */
};

void agg__x_free(struct agg__x *x)
{
	if (!x)
		return;
	for (int i = 0; i < x->n; i++) {
		agg__x_free(x->args[i]);
		if (x->keys)
			free(x->keys[i]);
	}
	free(x->args);
	free(x->keys);
	if (x->op == X_LIT)
		bson_value_destroy(&x->lit);
	free(x->comp);
	free(x->buf);
	free(x->dotted);
	free(x->var);
	free(x);
}

const bson_value_t *agg__x_const(const struct agg__x *x)
{
	return x->op == X_LIT ? &x->lit : NULL;
}

const char *agg__x_field_path(const struct agg__x *x)
{
	return x->op == X_PATH ? x->dotted : NULL;
}

bool agg__x_is_meta(const struct agg__x *x)
{
	return x && x->op == X_META;
}

bool agg__x_uses_score(const struct agg__x *x)
{
	if (!x)
		return false;
	if (x->op == X_META)
		return true;
	for (int i = 0; i < x->n; i++)
		if (agg__x_uses_score(x->args[i]))
			return true;
	return false;
}

static struct agg__x *x_new(int op, int n)
{
	struct agg__x *x = calloc(1, sizeof(*x));

	if (!x)
		abort();
	x->op = op;
	x->n = n;
	if (n) {
		x->args = calloc((size_t)n, sizeof(*x->args));
		if (!x->args)
			abort();
	}
	return x;
}

static struct agg__x *x_lit(const bson_value_t *v)
{
	struct agg__x *x = x_new(X_LIT, 0);

	bson_value_copy(v, &x->lit);
	return x;
}

/* Splits "a.b.c" into components; fails on an empty component. */
static int split_path(struct agg__x *x, const char *s, struct dfs_err *err)
{
	size_t len = strlen(s);
	int n = 1;

	if (len == 0)
		return dfs_err_set(err, DFS_EINVAL, "field path must not be empty");
	x->buf = strdup(s);
	if (!x->buf)
		abort();
	for (size_t i = 0; i < len; i++)
		if (s[i] == '.')
			n++;
	x->comp = calloc((size_t)n, sizeof(*x->comp));
	if (!x->comp)
		abort();
	x->ncomp = 0;
	for (char *p = x->buf;;) {
		char *dot = strchr(p, '.');

		if (dot)
			*dot = 0;
		if (!*p)
			return dfs_err_set(err, DFS_EINVAL,
					   "field path '%s' has an empty component", s);
		x->comp[x->ncomp++] = p;
		if (!dot)
			break;
		p = dot + 1;
	}
	return 0;
}

static bool scope_has(const struct agg__scope *sc, const char *name, size_t len)
{
	static const char *const builtin[] = {"ROOT", "CURRENT", "NOW", "REMOVE"};

	for (size_t i = 0; i < sizeof(builtin) / sizeof(*builtin); i++)
		if (strlen(builtin[i]) == len && !memcmp(builtin[i], name, len))
			return true;
	for (; sc; sc = sc->up)
		if (strlen(sc->name) == len && !memcmp(sc->name, name, len))
			return true;
	return false;
}

static int parse_string(const char *s, const struct agg__scope *sc, struct agg__x **out,
			struct dfs_err *err)
{
	struct agg__x *x;
	const char *dot;
	size_t nlen;

	if (s[1] != '$') {
		x = x_new(X_PATH, 0);
		*out = x;
		x->dotted = strdup(s + 1);
		if (!x->dotted)
			abort();
		return split_path(x, s + 1, err);
	}
	dot = strchr(s + 2, '.');
	nlen = dot ? (size_t)(dot - (s + 2)) : strlen(s + 2);
	if (nlen == 0)
		return dfs_err_set(err, DFS_EINVAL, "empty variable name in '%s'", s);
	if (!scope_has(sc, s + 2, nlen))
		return dfs_err_set(err, DFS_EINVAL, "use of undefined variable: %.*s", (int)nlen,
				   s + 2);
	x = x_new(X_VAR, 0);
	*out = x;
	x->var = strndup(s + 2, nlen);
	if (!x->var)
		abort();
	if (dot)
		return split_path(x, dot + 1, err);
	return 0;
}

static int parse_value(const bson_value_t *v, const struct agg__scope *sc, struct agg__x **out,
		       struct dfs_err *err);

/* A document operand into named slots. */
static int parse_named(struct agg__x *x, const struct xdef *d, const bson_value_t *v,
		       const struct agg__scope *sc, struct dfs_err *err)
{
	bson_iter_t it;
	int nslots = 0;
	struct agg__scope inner = {0};
	const char *as = NULL;

	while (nslots < 5 && d->slots[nslots])
		nslots++;
	if (v->value_type != BSON_TYPE_DOCUMENT)
		return dfs_err_set(err, DFS_EINVAL, "%s expects an object of named arguments",
				   d->name);
	x->n = nslots;
	x->args = calloc((size_t)nslots, sizeof(*x->args));
	if (!x->args)
		abort();
	/* $filter/$map: the "as" name first, the scope of cond/in includes it. */
	if (x->op == X_FILTER || x->op == X_MAP) {
		if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) &&
		    bson_iter_find(&it, "as")) {
			if (!BSON_ITER_HOLDS_UTF8(&it))
				return dfs_err_set(err, DFS_EINVAL, "%s: 'as' must be a string",
						   d->name);
			as = bson_iter_utf8(&it, NULL);
		}
		x->var = strdup(as ? as : "this");
		if (!x->var)
			abort();
		inner.name = x->var;
		inner.up = sc;
	}
	if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
		return dfs_err_set(err, DFS_EINVAL, "%s: bad argument document", d->name);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		int s;
		int rc;

		for (s = 0; s < nslots; s++)
			if (!strcmp(d->slots[s], k))
				break;
		if (s == nslots)
			return dfs_err_set(err, DFS_EINVAL, "%s found an unknown argument: %s",
					   d->name, k);
		if ((x->op == X_FILTER || x->op == X_MAP) && !strcmp(k, "as"))
			continue;
		if (x->args[s])
			return dfs_err_set(err, DFS_EINVAL, "%s: duplicate argument '%s'", d->name,
					   k);
		if (x->op == X_REDUCE && s == 2) {
			struct agg__scope sv = {"value", sc};
			struct agg__scope st = {"this", &sv};

			rc = parse_value(bson_iter_value(&it), &st, &x->args[s], err);
		} else if ((x->op == X_FILTER && s == 1) || (x->op == X_MAP && s == 1)) {
			rc = parse_value(bson_iter_value(&it), &inner, &x->args[s], err);
		} else {
			rc = parse_value(bson_iter_value(&it), sc, &x->args[s], err);
		}
		if (rc)
			return rc;
	}
	for (int s = 0; s < nslots; s++)
		if ((d->required & (1u << s)) && !x->args[s] &&
		    !((x->op == X_FILTER || x->op == X_MAP) && !strcmp(d->slots[s], "as")))
			return dfs_err_set(err, DFS_EINVAL, "%s requires '%s'", d->name,
					   d->slots[s]);
	return 0;
}

static int parse_args(struct agg__x *x, const struct xdef *d, const bson_value_t *v,
		      const struct agg__scope *sc, struct dfs_err *err)
{
	bson_iter_t it;
	int n = 0, rc;

	if (v->value_type != BSON_TYPE_ARRAY) {
		x->n = 1;
		x->args = calloc(1, sizeof(*x->args));
		if (!x->args)
			abort();
		if ((rc = parse_value(v, sc, &x->args[0], err)))
			return rc;
	} else {
		if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
			while (bson_iter_next(&it))
				n++;
		x->n = n;
		x->args = calloc((size_t)(n ? n : 1), sizeof(*x->args));
		if (!x->args)
			abort();
		n = 0;
		if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
			while (bson_iter_next(&it))
				if ((rc = parse_value(bson_iter_value(&it), sc, &x->args[n++],
						      err)))
					return rc;
	}
	if (x->n < d->min || (d->max >= 0 && x->n > d->max)) {
		if (d->min == d->max)
			return dfs_err_set(err, DFS_EINVAL,
					   "expression %s takes exactly %d argument%s, %d given",
					   d->name, d->min, d->min == 1 ? "" : "s", x->n);
		if (d->max < 0)
			return dfs_err_set(err, DFS_EINVAL,
					   "expression %s takes at least %d arguments, %d given",
					   d->name, d->min, x->n);
		return dfs_err_set(err, DFS_EINVAL,
				   "expression %s takes %d to %d arguments, %d given", d->name,
				   d->min, d->max, x->n);
	}
	return 0;
}

static int parse_switch(struct agg__x *x, const bson_value_t *v, const struct agg__scope *sc,
			struct dfs_err *err)
{
	bson_iter_t it, br, cb;
	int nb = 0, rc, k = 0;
	bool have_default = false;
	bson_value_t def;

	if (v->value_type != BSON_TYPE_DOCUMENT)
		return dfs_err_set(err, DFS_EINVAL, "$switch requires an object as an argument");
	if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
		return dfs_err_set(err, DFS_EINVAL, "$switch: bad argument");
	while (bson_iter_next(&it)) {
		if (!strcmp(bson_iter_key(&it), "branches")) {
			if (!BSON_ITER_HOLDS_ARRAY(&it))
				return dfs_err_set(err, DFS_EINVAL,
						   "$switch expected an array for 'branches'");
			bson_iter_recurse(&it, &br);
			while (bson_iter_next(&br))
				nb++;
		} else if (!strcmp(bson_iter_key(&it), "default")) {
			have_default = true;
			def = *bson_iter_value(&it);
		} else {
			return dfs_err_set(err, DFS_EINVAL, "$switch found an unknown argument: %s",
					   bson_iter_key(&it));
		}
	}
	if (nb == 0)
		return dfs_err_set(err, DFS_EINVAL, "$switch requires at least one branch");
	/* args: case0, then0, case1, then1, ..., default (or NULL) */
	x->n = 2 * nb + 1;
	x->args = calloc((size_t)x->n, sizeof(*x->args));
	if (!x->args)
		abort();
	bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
	bson_iter_find(&it, "branches");
	bson_iter_recurse(&it, &br);
	while (bson_iter_next(&br)) {
		bool c = false, t = false;

		if (!BSON_ITER_HOLDS_DOCUMENT(&br))
			return dfs_err_set(err, DFS_EINVAL,
					   "$switch expected each branch to be an object");
		bson_iter_recurse(&br, &cb);
		while (bson_iter_next(&cb)) {
			const char *bk = bson_iter_key(&cb);

			if (!strcmp(bk, "case")) {
				c = true;
				rc = parse_value(bson_iter_value(&cb), sc, &x->args[k], err);
			} else if (!strcmp(bk, "then")) {
				t = true;
				rc = parse_value(bson_iter_value(&cb), sc, &x->args[k + 1], err);
			} else {
				return dfs_err_set(
					err, DFS_EINVAL,
					"$switch found an unknown argument to a branch: %s", bk);
			}
			if (rc)
				return rc;
		}
		if (!c)
			return dfs_err_set(err, DFS_EINVAL,
					   "$switch requires each branch have a 'case' expression");
		if (!t)
			return dfs_err_set(err, DFS_EINVAL,
					   "$switch requires each branch have a 'then' expression");
		k += 2;
	}
	if (have_default)
		return parse_value(&def, sc, &x->args[k], err);
	return 0;
}

static int parse_let(struct agg__x *x, const bson_value_t *v, const struct agg__scope *sc,
		     struct dfs_err *err)
{
	bson_iter_t it, vars;
	bson_value_t inv, *in = NULL;
	bool have_vars = false;
	int nv = 0, k = 0, rc;
	struct agg__scope *scopes;

	if (v->value_type != BSON_TYPE_DOCUMENT ||
	    !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
		return dfs_err_set(err, DFS_EINVAL, "$let only supports an object as its argument");
	while (bson_iter_next(&it)) {
		if (!strcmp(bson_iter_key(&it), "vars") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
			have_vars = true;
			bson_iter_recurse(&it, &vars);
			while (bson_iter_next(&vars))
				nv++;
		} else if (!strcmp(bson_iter_key(&it), "in")) {
			inv = *bson_iter_value(&it);
			in = &inv;
		} else {
			return dfs_err_set(err, DFS_EINVAL, "$let: invalid parameter '%s'",
					   bson_iter_key(&it));
		}
	}
	if (!have_vars)
		return dfs_err_set(err, DFS_EINVAL, "$let: missing 'vars' parameter");
	if (!in)
		return dfs_err_set(err, DFS_EINVAL, "$let: missing 'in' parameter");
	x->n = nv + 1;
	x->args = calloc((size_t)x->n, sizeof(*x->args));
	x->keys = calloc((size_t)x->n, sizeof(*x->keys));
	scopes = calloc((size_t)nv + 1, sizeof(*scopes));
	if (!x->args || !x->keys || !scopes)
		abort();
	bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
	bson_iter_find(&it, "vars");
	bson_iter_recurse(&it, &vars);
	rc = 0;
	while (bson_iter_next(&vars)) {
		x->keys[k] = strdup(bson_iter_key(&vars));
		if (!x->keys[k])
			abort();
		/* The variables' expressions see the enclosing scope only. */
		if ((rc = parse_value(bson_iter_value(&vars), sc, &x->args[k], err)))
			break;
		scopes[k].name = x->keys[k];
		scopes[k].up = k ? &scopes[k - 1] : sc;
		k++;
	}
	if (!rc)
		rc = parse_value(in, nv ? &scopes[nv - 1] : sc, &x->args[nv], err);
	free(scopes);
	return rc;
}

/* {$meta: <name>}: MongoDB's messages for a non-string and an unknown name; of the names it
 * knows only "textScore" has metadata here (the others are Atlas Search's, $geoNear's,
 * indexKey, ...). */
static int parse_meta(const bson_value_t *v, struct agg__x **out, struct dfs_err *err)
{
	static const char *const known[] = {"indexKey",
					    "randVal",
					    "recordId",
					    "searchHighlights",
					    "searchScore",
					    "searchScoreDetails",
					    "sortKey",
					    "geoNearDistance",
					    "geoNearPoint",
					    "vectorSearchScore",
					    "score",
					    "scoreDetails",
					    "searchSequenceToken",
					    "searchRootDocumentId"};
	const char *name;

	if (v->value_type != BSON_TYPE_UTF8)
		return dfs_err_set(err, DFS_EINVAL, "$meta only supports string arguments");
	name = v->value.v_utf8.str;
	if (!strcmp(name, "textScore")) {
		*out = x_new(X_META, 0);
		return 0;
	}
	for (size_t i = 0; i < sizeof(known) / sizeof(*known); i++)
		if (!strcmp(name, known[i]))
			return dfs_err_set(err, DFS_EINVAL,
					   "$meta \"%s\" is not supported: the only metadata is "
					   "\"textScore\"",
					   name);
	return dfs_err_set(err, DFS_EINVAL, "Unsupported argument to $meta: %s", name);
}

/*
 * $getField, $setField, $unsetField (MongoDB 5.0+), the only expressions that reach fields
 * whose names hold '.' or start with '$'. Named arguments; $getField also takes its field
 * alone ({$getField: "a.b"}, input $$CURRENT). 'field' must be a constant string (a plain
 * string, or {$literal: "$x"} for one starting with '$': "$x" alone is a field path).
 */
static int parse_field_op(struct agg__x *x, const struct xdef *d, const bson_value_t *v,
			  const struct agg__scope *sc, struct dfs_err *err)
{
	const bson_value_t *f;
	bson_iter_t it;
	int rc;

	if (x->op == X_GETFIELD &&
	    !(v->value_type == BSON_TYPE_DOCUMENT &&
	      bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) &&
	      bson_iter_find(&it, "field"))) {
		x->n = 2;
		x->args = calloc(2, sizeof(*x->args));
		if (!x->args)
			abort();
		if ((rc = parse_value(v, sc, &x->args[0], err)))
			return rc;
		x->args[1] = x_new(X_VAR, 0);
		x->args[1]->var = strdup("CURRENT");
		if (!x->args[1]->var)
			abort();
	} else {
		if (v->value_type != BSON_TYPE_DOCUMENT)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s only supports an object as its argument", d->name);
		if ((rc = parse_named(x, d, v, sc, err)))
			return rc;
	}
	f = agg__x_const(x->args[0]);
	if (!f)
		return dfs_err_set(err, DFS_EINVAL,
				   "%s requires 'field' to evaluate to a constant, but got a "
				   "non-constant argument",
				   d->name);
	if (f->value_type != BSON_TYPE_UTF8)
		return dfs_err_set(err, DFS_EINVAL,
				   "%s requires 'field' to evaluate to type String, but got %s",
				   d->name, agg__type_name(f));
	if (strlen(f->value.v_utf8.str) != f->value.v_utf8.len)
		return dfs_err_set(err, DFS_EINVAL, "%s: 'field' must not contain a NUL byte",
				   d->name);
	return 0;
}

static int parse_operator(const char *name, const bson_value_t *v, const struct agg__scope *sc,
			  struct agg__x **out, struct dfs_err *err)
{
	const struct xdef *d = NULL;
	struct agg__x *x;

	for (size_t i = 0; i < sizeof(xdefs) / sizeof(*xdefs); i++)
		if (!strcmp(xdefs[i].name, name)) {
			d = &xdefs[i];
			break;
		}
	if (!d)
		return dfs_err_set(err, DFS_EINVAL, "unknown expression operator '%s'", name);
	if (d->form == F_LITERAL) {
		*out = x_lit(v);
		return 0;
	}
	if (d->form == F_META)
		return parse_meta(v, out, err);
	x = x_new(d->op, 0);
	x->def = d;
	*out = x;
	switch (d->form) {
	case F_NAMED:
		return parse_named(x, d, v, sc, err);
	case F_COND:
		if (v->value_type == BSON_TYPE_DOCUMENT) {
			static const struct xdef cd = {
				"$cond", X_COND, F_NAMED, 0, 0, {"if", "then", "else"}, 7};

			return parse_named(x, &cd, v, sc, err);
		}
		return parse_args(x, d, v, sc, err);
	case F_FIELD:
		return parse_field_op(x, d, v, sc, err);
	case F_SWITCH:
		return parse_switch(x, v, sc, err);
	case F_LET:
		return parse_let(x, v, sc, err);
	case F_DATEPART:
		if (v->value_type == BSON_TYPE_DOCUMENT) {
			bson_iter_t it;

			/* {date: <expr>, timezone: <tz>}: only UTC is supported. */
			if (bson_iter_init_from_data(&it, v->value.v_doc.data,
						     v->value.v_doc.data_len) &&
			    bson_iter_next(&it) && !strcmp(bson_iter_key(&it), "date")) {
				static const struct xdef dd = {
					"date part", 0, F_NAMED, 0, 0, {"date", "timezone"}, 1};

				return parse_named(x, &dd, v, sc, err);
			}
		}
		return parse_args(x, d, v, sc, err);
	default:
		return parse_args(x, d, v, sc, err);
	}
}

static int parse_value(const bson_value_t *v, const struct agg__scope *sc, struct agg__x **out,
		       struct dfs_err *err)
{
	bson_iter_t it;
	int n = 0, rc;
	struct agg__x *x;

	*out = NULL;
	if (v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.len > 0 &&
	    v->value.v_utf8.str[0] == '$')
		return parse_string(v->value.v_utf8.str, sc, out, err);
	if (v->value_type == BSON_TYPE_ARRAY) {
		if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
			while (bson_iter_next(&it))
				n++;
		x = x_new(X_ARR, n);
		*out = x;
		n = 0;
		if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
			while (bson_iter_next(&it))
				if ((rc = parse_value(bson_iter_value(&it), sc, &x->args[n++],
						      err)))
					return rc;
		return 0;
	}
	if (v->value_type != BSON_TYPE_DOCUMENT) {
		*out = x_lit(v);
		return 0;
	}
	if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
		return dfs_err_set(err, DFS_EINVAL, "bad expression document");
	while (bson_iter_next(&it))
		n++;
	bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
	if (n >= 1) {
		bson_iter_next(&it);
		if (bson_iter_key(&it)[0] == '$') {
			if (n != 1)
				return dfs_err_set(err, DFS_EINVAL,
						   "an expression specification must contain "
						   "exactly one field, the name of the expression: "
						   "'%s' has %d",
						   bson_iter_key(&it), n);
			return parse_operator(bson_iter_key(&it), bson_iter_value(&it), sc, out,
					      err);
		}
		bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
	}
	x = x_new(X_OBJ, n);
	x->keys = calloc((size_t)(n ? n : 1), sizeof(*x->keys));
	if (!x->keys)
		abort();
	*out = x;
	n = 0;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (k[0] == '$')
			return dfs_err_set(err, DFS_EINVAL,
					   "field name '%s' in an object expression must not start "
					   "with '$'",
					   k);
		if (strchr(k, '.'))
			return dfs_err_set(err, DFS_EINVAL,
					   "field name '%s' in an object expression must not "
					   "contain '.'",
					   k);
		x->keys[n] = strdup(k);
		if (!x->keys[n])
			abort();
		if ((rc = parse_value(bson_iter_value(&it), sc, &x->args[n++], err)))
			return rc;
	}
	return 0;
}

int agg__x_parse(const bson_value_t *v, const struct agg__scope *sc, struct agg__x **out,
		 struct dfs_err *err)
{
	struct agg__x *x = NULL;
	int rc = parse_value(v, sc, &x, err);

	if (rc) {
		agg__x_free(x);
		*out = NULL;
		return rc;
	}
	*out = x;
	return 0;
}

/* ---- evaluation helpers -------------------------------------------------------------- */

#define EV(i, v)                                                                                   \
	do {                                                                                       \
		if ((rc = agg__x_eval(x->args[i], c, (v), err)))                                   \
			return rc;                                                                 \
	} while (0)

static const char *opname(const struct agg__x *x)
{
	return x->def ? x->def->name : "expression";
}

/* An integral number argument (int32, int64, or an integral double/decimal) into *out. */
static int int_arg(const struct agg__x *x, const bson_value_t *v, const char *what, int64_t *out,
		   struct dfs_err *err)
{
	long double d;

	if (v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64) {
		*out = num_i64(v);
		return 0;
	}
	if (!agg__is_number(v))
		return dfs_err_set(err, DFS_EINVAL, "%s: %s must be a numeric value, not %s",
				   opname(x), what, agg__type_name(v));
	d = agg__num_ld(v);
	if (d != truncl(d) || d < -9.2e18L || d > 9.2e18L)
		return dfs_err_set(err, DFS_EINVAL, "%s: %s must be an integral value", opname(x),
				   what);
	*out = (int64_t)d;
	return 0;
}

static void ms_tm(int64_t ms, struct tm *tm, int *millis)
{
	int64_t s = ms / 1000, r = ms % 1000;
	time_t t;

	if (r < 0) {
		r += 1000;
		s--;
	}
	t = (time_t)s;
	if (!gmtime_r(&t, tm)) /* out of the C library's range: the epoch, not garbage */
		memset(tm, 0, sizeof(*tm));
	*millis = (int)r;
}

static int to_date(const struct agg__x *x, const bson_value_t *v, int64_t *ms, struct dfs_err *err)
{
	switch (v->value_type) {
	case BSON_TYPE_DATE_TIME:
		*ms = v->value.v_datetime;
		return 0;
	case BSON_TYPE_TIMESTAMP:
		*ms = (int64_t)v->value.v_timestamp.timestamp * 1000;
		return 0;
	case BSON_TYPE_OID:
		*ms = (int64_t)bson_oid_get_time_t(&v->value.v_oid) * 1000;
		return 0;
	default:
		return dfs_err_set(err, DFS_EINVAL, "%s: can't convert from BSON type %s to Date",
				   opname(x), agg__type_name(v));
	}
}

static void iso_date(int64_t ms, char *buf, size_t n)
{
	struct tm tm;
	int milli;

	ms_tm(ms, &tm, &milli);
	snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, milli);
}

static void dbl_str(double d, char *buf, size_t n)
{
	if (isnan(d)) {
		snprintf(buf, n, "NaN");
		return;
	}
	if (isinf(d)) {
		snprintf(buf, n, d < 0 ? "-Infinity" : "Infinity");
		return;
	}
	/* integral values below 1e15 in plain digits ("10", not "1e+01" which %g picks) */
	if (d == trunc(d) && fabs(d) < 1e15) {
		snprintf(buf, n, "%.0f", d);
		return;
	}
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, n, "%.*g", p, d);
		if (strtod(buf, NULL) == d)
			return;
	}
}

/* Parses the simple ISO-8601 forms: YYYY-MM-DD[(T| )HH:MM[:SS[.f+]]][Z|(+|-)HH[:]MM]. */
static bool parse_iso(const char *s, int64_t *ms)
{
	int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0, fd = 0, n = 0;
	struct tm tm = {0};
	int64_t off = 0;

	if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 || n != 10)
		return false;
	s += n;
	if (*s == 'T' || *s == ' ') {
		s++;
		if (sscanf(s, "%2d:%2d%n", &h, &mi, &n) != 2 || n != 5)
			return false;
		s += n;
		if (*s == ':') {
			s++;
			if (!isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]))
				return false;
			sec = (s[0] - '0') * 10 + (s[1] - '0');
			s += 2;
			if (*s == '.') {
				s++;
				if (!isdigit((unsigned char)*s))
					return false;
				while (isdigit((unsigned char)*s)) {
					if (fd < 3) {
						frac = frac * 10 + (*s - '0');
						fd++;
					}
					s++;
				}
				while (fd < 3) {
					frac *= 10;
					fd++;
				}
			}
		}
		if (*s == 'Z') {
			s++;
		} else if (*s == '+' || *s == '-') {
			int oh, om;
			int sign = *s == '-' ? -1 : 1;

			s++;
			if (sscanf(s, "%2d:%2d%n", &oh, &om, &n) == 2 && n == 5)
				s += 5;
			else if (sscanf(s, "%2d%2d%n", &oh, &om, &n) == 2 && n == 4)
				s += 4;
			else
				return false;
			off = sign * ((int64_t)oh * 3600 + om * 60);
		}
	}
	if (*s || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59)
		return false;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	*ms = ((int64_t)timegm(&tm) - off) * 1000 + frac;
	return true;
}

/* Parses s by a $dateFromString format: %Y %m %d %H %M %S %L %j %z %% and literal bytes. */
static bool parse_fmt(const char *s, const char *fmt, int64_t *ms)
{
	int y = 1970, mo = 1, d = 1, h = 0, mi = 0, sec = 0, milli = 0, yday = 0;
	int64_t off = 0;
	struct tm tm = {0};

	for (const char *f = fmt; *f; f++) {
		int width = 0, v = 0, *slot = NULL;

		if (*f != '%' || f[1] == '%') {
			if (*s != *f)
				return false;
			s++;
			if (*f == '%')
				f++;
			continue;
		}
		f++;
		switch (*f) {
		case 'Y':
			width = 4, slot = &y;
			break;
		case 'm':
			width = 2, slot = &mo;
			break;
		case 'd':
			width = 2, slot = &d;
			break;
		case 'H':
			width = 2, slot = &h;
			break;
		case 'M':
			width = 2, slot = &mi;
			break;
		case 'S':
			width = 2, slot = &sec;
			break;
		case 'L':
			width = 3, slot = &milli;
			break;
		case 'j':
			width = 3, slot = &yday;
			break;
		case 'z': {
			int sign, oh, om;

			if (*s != '+' && *s != '-')
				return false;
			sign = *s++ == '-' ? -1 : 1;
			if (sscanf(s, "%2d%2d", &oh, &om) != 2 || !isdigit((unsigned char)s[3]))
				return false;
			s += 4;
			off = sign * ((int64_t)oh * 3600 + om * 60);
			continue;
		}
		default:
			return false;
		}
		for (int i = 0; i < width; i++) {
			if (!isdigit((unsigned char)*s))
				return false;
			v = v * 10 + (*s++ - '0');
		}
		*slot = v;
	}
	if (*s || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59)
		return false;
	tm.tm_year = y - 1900;
	tm.tm_mon = yday ? 0 : mo - 1;
	tm.tm_mday = yday ? yday : d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	*ms = ((int64_t)timegm(&tm) - off) * 1000 + milli;
	return true;
}

static int date_to_string(const struct agg__x *x, int64_t ms, int64_t off, const char *fmt,
			  struct agg__arena *ar, bson_value_t *out, struct dfs_err *err)
{
	struct dfs_buf b;
	struct tm tm;
	int milli;
	char tmp[64];

	ms_tm(ms + off, &tm, &milli);
	dfs_buf_init(&b);
	for (const char *p = fmt; *p; p++) {
		if (*p != '%') {
			dfs_buf_putc(&b, *p);
			continue;
		}
		p++;
		switch (*p) {
		case 'Y':
			dfs_buf_printf(&b, "%04d", tm.tm_year + 1900);
			break;
		case 'm':
			dfs_buf_printf(&b, "%02d", tm.tm_mon + 1);
			break;
		case 'd':
			dfs_buf_printf(&b, "%02d", tm.tm_mday);
			break;
		case 'H':
			dfs_buf_printf(&b, "%02d", tm.tm_hour);
			break;
		case 'M':
			dfs_buf_printf(&b, "%02d", tm.tm_min);
			break;
		case 'S':
			dfs_buf_printf(&b, "%02d", tm.tm_sec);
			break;
		case 'L':
			dfs_buf_printf(&b, "%03d", milli);
			break;
		case 'j':
			dfs_buf_printf(&b, "%03d", tm.tm_yday + 1);
			break;
		case 'w':
			dfs_buf_printf(&b, "%d", tm.tm_wday + 1);
			break;
		case 'u':
			dfs_buf_printf(&b, "%d", tm.tm_wday ? tm.tm_wday : 7);
			break;
		case 'U':
			dfs_buf_printf(&b, "%02d", (tm.tm_yday + 7 - tm.tm_wday) / 7);
			break;
		case 'V':
		case 'G': {
			char f[3] = {'%', *p, 0};

			strftime(tmp, sizeof(tmp), f, &tm);
			dfs_buf_puts(&b, tmp);
			break;
		}
		case 'z':
			dfs_buf_printf(&b, "%c%02d%02d", off < 0 ? '-' : '+',
				       (int)(llabs(off) / 3600000), (int)(llabs(off) / 60000 % 60));
			break;
		case 'Z':
			dfs_buf_printf(&b, "%d", (int)(off / 60000));
			break;
		case '%':
			dfs_buf_putc(&b, '%');
			break;
		default:
			dfs_buf_release(&b);
			return dfs_err_set(err, DFS_EINVAL, "%s: invalid format character '%%%c'",
					   opname(x), *p ? *p : ' ');
		}
		if (!*p)
			break;
	}
	set_str(ar, b.data ? b.data : "", b.len, out);
	dfs_buf_release(&b);
	return 0;
}

/* Conversion targets ($convert "to", $toX): BSON type codes. */
static int type_code(const bson_value_t *to, int *code)
{
	static const struct {
		const char *name;
		int code;
	} names[] = {{"double", 1}, {"string", 2}, {"objectId", 7}, {"bool", 8},
		     {"date", 9},   {"int", 16},   {"long", 18},    {"decimal", 19}};

	if (to->value_type == BSON_TYPE_UTF8) {
		for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
			if (!strcmp(names[i].name, to->value.v_utf8.str)) {
				*code = names[i].code;
				return 0;
			}
		return -1;
	}
	if (agg__is_number(to)) {
		*code = (int)agg__num_ld(to);
		for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
			if (names[i].code == *code)
				return 0;
	}
	return -1;
}

static const char *code_name(int code)
{
	switch (code) {
	case 1:
		return "double";
	case 2:
		return "string";
	case 7:
		return "objectId";
	case 8:
		return "bool";
	case 9:
		return "date";
	case 16:
		return "int";
	case 18:
		return "long";
	default:
		return "decimal";
	}
}

/* Parses a whole string as a number: integer when allow_int and it has no '.', 'e'. */
static bool parse_num_str(const char *s, long double *d, bool *integral)
{
	char *end;

	if (!*s || isspace((unsigned char)*s))
		return false;
	errno = 0;
	*d = strtold(s, &end);
	if (*end || errno == ERANGE)
		return false;
	*integral = !strpbrk(s, ".eEnNiI");
	return true;
}

/* Converts v (not nullish) to the BSON type code; 0, or nonzero with err holding why. */
static int convert(const struct agg__x *x, const bson_value_t *v, int code, struct agg__arena *ar,
		   bson_value_t *out, struct dfs_err *err)
{
	char buf[64];
	long double d = 0;
	bool integral = true;

	switch (code) {
	case 2: /* string */
		switch (v->value_type) {
		case BSON_TYPE_UTF8:
			*out = *v;
			return 0;
		case BSON_TYPE_BOOL:
			set_str(ar, v->value.v_bool ? "true" : "false", v->value.v_bool ? 4 : 5,
				out);
			return 0;
		case BSON_TYPE_INT32:
		case BSON_TYPE_INT64:
			snprintf(buf, sizeof(buf), "%" PRId64, num_i64(v));
			break;
		case BSON_TYPE_DOUBLE:
			dbl_str(v->value.v_double, buf, sizeof(buf));
			break;
		case BSON_TYPE_DECIMAL128:
			bson_decimal128_to_string(&v->value.v_decimal128, buf);
			break;
		case BSON_TYPE_OID:
			bson_oid_to_string(&v->value.v_oid, buf);
			break;
		case BSON_TYPE_DATE_TIME:
			iso_date(v->value.v_datetime, buf, sizeof(buf));
			break;
		default:
			goto unsupported;
		}
		set_str(ar, buf, strlen(buf), out);
		return 0;
	case 8: /* bool */
		switch (v->value_type) {
		case BSON_TYPE_BOOL:
			*out = *v;
			return 0;
		case BSON_TYPE_INT32:
		case BSON_TYPE_INT64:
		case BSON_TYPE_DOUBLE:
		case BSON_TYPE_DECIMAL128:
			set_bool(out, agg__num_ld(v) != 0);
			return 0;
		case BSON_TYPE_UTF8:
		case BSON_TYPE_OID:
		case BSON_TYPE_DATE_TIME:
			set_bool(out, true);
			return 0;
		default:
			goto unsupported;
		}
	case 7: /* objectId */
		if (v->value_type == BSON_TYPE_OID) {
			*out = *v;
			return 0;
		}
		if (v->value_type == BSON_TYPE_UTF8) {
			if (v->value.v_utf8.len != 24 ||
			    !bson_oid_is_valid(v->value.v_utf8.str, 24))
				return dfs_err_set(err, DFS_EINVAL,
						   "%s: failed to parse objectId '%s' with no "
						   "onError value",
						   opname(x), v->value.v_utf8.str);
			memset(out, 0, sizeof(*out));
			out->value_type = BSON_TYPE_OID;
			bson_oid_init_from_string(&out->value.v_oid, v->value.v_utf8.str);
			return 0;
		}
		goto unsupported;
	case 9: /* date */
		switch (v->value_type) {
		case BSON_TYPE_DATE_TIME:
			*out = *v;
			return 0;
		case BSON_TYPE_INT64:
			set_date(out, v->value.v_int64);
			return 0;
		case BSON_TYPE_DOUBLE:
		case BSON_TYPE_DECIMAL128:
			d = agg__num_ld(v);
			if (isnan(d) || isinf(d) || d < -9.2e18L || d > 9.2e18L)
				return dfs_err_set(err, DFS_EINVAL,
						   "%s: conversion to date out of range",
						   opname(x));
			set_date(out, (int64_t)truncl(d));
			return 0;
		case BSON_TYPE_OID:
		case BSON_TYPE_TIMESTAMP: {
			int64_t ms;

			to_date(x, v, &ms, err);
			set_date(out, ms);
			return 0;
		}
		case BSON_TYPE_UTF8: {
			int64_t ms;

			if (!parse_iso(v->value.v_utf8.str, &ms))
				return dfs_err_set(err, DFS_EINVAL,
						   "%s: error parsing date string '%s'", opname(x),
						   v->value.v_utf8.str);
			set_date(out, ms);
			return 0;
		}
		default:
			goto unsupported;
		}
	default: /* numbers */
		switch (v->value_type) {
		case BSON_TYPE_BOOL:
			d = v->value.v_bool;
			break;
		case BSON_TYPE_INT32:
		case BSON_TYPE_INT64:
		case BSON_TYPE_DOUBLE:
		case BSON_TYPE_DECIMAL128:
			d = agg__num_ld(v);
			if (code == 16 || code == 18) {
				if (isnan(d) || isinf(d))
					return dfs_err_set(err, DFS_EINVAL,
							   "%s: attempt to convert NaN or infinity "
							   "to an integer",
							   opname(x));
				d = truncl(d);
			}
			if (code == 1 && v->value_type == BSON_TYPE_INT64) {
				set_dbl(out, (double)v->value.v_int64);
				return 0;
			}
			if (code == 18 && v->value_type == BSON_TYPE_INT64) {
				*out = *v;
				return 0;
			}
			break;
		case BSON_TYPE_DATE_TIME:
			if (code == 16)
				goto unsupported;
			d = (long double)v->value.v_datetime;
			if (code == 18) {
				set_i64(out, v->value.v_datetime);
				return 0;
			}
			break;
		case BSON_TYPE_UTF8:
			if (!parse_num_str(v->value.v_utf8.str, &d, &integral) ||
			    ((code == 16 || code == 18) && !integral))
				return dfs_err_set(
					err, DFS_EINVAL,
					"%s: failed to parse number '%s' with no onError "
					"value",
					opname(x), v->value.v_utf8.str);
			if (code == 18 && integral) {
				set_i64(out, strtoll(v->value.v_utf8.str, NULL, 10));
				return 0;
			}
			break;
		default:
			goto unsupported;
		}
		if (code == 16) {
			if (d < INT32_MIN || d > INT32_MAX)
				return dfs_err_set(err, DFS_EINVAL,
						   "%s: conversion to int overflowed", opname(x));
			set_i32(out, (int32_t)d);
		} else if (code == 18) {
			if (d < -9223372036854775808.0L || d >= 9223372036854775808.0L)
				return dfs_err_set(err, DFS_EINVAL,
						   "%s: conversion to long overflowed", opname(x));
			set_i64(out, (int64_t)d);
		} else if (code == 19) {
			if (v->value_type == BSON_TYPE_DECIMAL128) {
				*out = *v;
				return 0;
			}
			if (v->value_type == BSON_TYPE_DOUBLE) {
				dbl_str(v->value.v_double, buf, sizeof(buf));
				memset(out, 0, sizeof(*out));
				out->value_type = BSON_TYPE_DECIMAL128;
				bson_decimal128_from_string(buf, &out->value.v_decimal128);
				return 0;
			}
			if (v->value_type == BSON_TYPE_UTF8) {
				memset(out, 0, sizeof(*out));
				out->value_type = BSON_TYPE_DECIMAL128;
				bson_decimal128_from_string(v->value.v_utf8.str,
							    &out->value.v_decimal128);
				return 0;
			}
			agg__num_set(4, d, out);
		} else {
			set_dbl(out, (double)d);
		}
		return 0;
	}
unsupported:
	return dfs_err_set(err, DFS_EINVAL,
			   "%s: unsupported conversion from %s to %s with no onError value",
			   opname(x), agg__type_name(v), code_name(code));
}

/* ---- arithmetic ---------------------------------------------------------------------- */

/* $add and $multiply: integers stay integers while they fit (int32 -> int64 -> double). */
/* Folds the numbers of vals with op in exact decimal arithmetic; -1 when it cannot be exact. */
static int dec_fold(char op, const bson_value_t *vals, int n, bson_value_t *out)
{
	bson_decimal128_t acc, x;
	bool have = false;

	for (int i = 0; i < n; i++) {
		if (!agg__is_number(&vals[i]))
			continue;
		agg__dec_from_value(&vals[i], &x);
		if (!have) {
			acc = x;
			have = true;
		} else if (agg__dec_op(op, &acc, &x, &acc)) {
			return -1;
		}
	}
	if (!have)
		return -1;
	set_dec(out, &acc);
	return 0;
}

static int eval_addmul(const struct agg__x *x, struct agg__ctx *c, bool mul, bson_value_t *out,
		       struct dfs_err *err)
{
	bson_value_t vals[16];
	int kind = 1, rc;
	int64_t iacc = mul ? 1 : 0, date_ms = 0;
	long double dacc = mul ? 1 : 0;
	bool overflow = false, have_date = false, null = false;

	for (int i = 0; i < x->n; i++) {
		bson_value_t v;
		int k;

		EV(i, &v);
		if (i < 16)
			vals[i] = v;
		if (agg__nullish(&v)) {
			null = true;
			continue;
		}
		if (!mul && v.value_type == BSON_TYPE_DATE_TIME) {
			if (have_date)
				return dfs_err_set(err, DFS_EINVAL,
						   "only one date allowed in an $add expression");
			have_date = true;
			date_ms = v.value.v_datetime;
			continue;
		}
		k = num_kind(&v);
		if (!k)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s only supports numeric%s types, not %s", opname(x),
					   mul ? "" : " or date", agg__type_name(&v));
		if (k > kind)
			kind = k;
		if (mul) {
			dacc *= agg__num_ld(&v);
			if (k <= 2 && !overflow && __builtin_mul_overflow(iacc, num_i64(&v), &iacc))
				overflow = true;
		} else {
			dacc += agg__num_ld(&v);
			if (k <= 2 && !overflow && __builtin_add_overflow(iacc, num_i64(&v), &iacc))
				overflow = true;
		}
	}
	if (null) {
		set_null(out);
		return 0;
	}
	if (have_date) {
		int64_t r;

		if (!(fabsl(dacc) < 9.2e18L) ||
		    __builtin_add_overflow(date_ms, (int64_t)llroundl(dacc), &r))
			return dfs_err_set(err, DFS_EINVAL, "$add: date overflow");
		set_date(out, r);
		return 0;
	}
	if (kind <= 2 && !overflow) {
		if (kind == 1 && iacc >= INT32_MIN && iacc <= INT32_MAX)
			set_i32(out, (int32_t)iacc);
		else
			set_i64(out, iacc);
		return 0;
	}
	if (kind == 4 && x->n <= 16 && !dec_fold(mul ? '*' : '+', vals, x->n, out))
		return 0;
	agg__num_set(kind == 4 ? 4 : 3, dacc, out);
	return 0;
}

/* Two numeric operands; *kind the wider; 1 when one is nullish (the result is null). */
static int two_nums(const struct agg__x *x, struct agg__ctx *c, bson_value_t *a, bson_value_t *b,
		    int *kind, struct dfs_err *err)
{
	int rc;

	EV(0, a);
	EV(1, b);
	if (agg__nullish(a) || agg__nullish(b))
		return -1;
	if (!agg__is_number(a) || !agg__is_number(b))
		return dfs_err_set(err, DFS_EINVAL, "%s only supports numeric types, not %s and %s",
				   opname(x), agg__type_name(a), agg__type_name(b));
	*kind = num_kind(a) > num_kind(b) ? num_kind(a) : num_kind(b);
	return 0;
}

static int eval_subtract(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
			 struct dfs_err *err)
{
	bson_value_t a, b;
	int rc, kind;
	int64_t r;

	EV(0, &a);
	EV(1, &b);
	if (agg__nullish(&a) || agg__nullish(&b)) {
		set_null(out);
		return 0;
	}
	if (a.value_type == BSON_TYPE_DATE_TIME) {
		if (b.value_type == BSON_TYPE_DATE_TIME) {
			if (__builtin_sub_overflow(a.value.v_datetime, b.value.v_datetime, &r))
				return dfs_err_set(err, DFS_EINVAL, "$subtract: date overflow");
			set_i64(out, r);
			return 0;
		}
		if (agg__is_number(&b)) {
			long double d = agg__num_ld(&b);

			if (!(fabsl(d) < 9.2e18L) ||
			    __builtin_sub_overflow(a.value.v_datetime, (int64_t)llroundl(d), &r))
				return dfs_err_set(err, DFS_EINVAL, "$subtract: date overflow");
			set_date(out, r);
			return 0;
		}
	}
	if (!agg__is_number(&a) || !agg__is_number(&b))
		return dfs_err_set(err, DFS_EINVAL, "can't $subtract %s from %s",
				   agg__type_name(&b), agg__type_name(&a));
	kind = num_kind(&a) > num_kind(&b) ? num_kind(&a) : num_kind(&b);
	if (kind <= 2 && !__builtin_sub_overflow(num_i64(&a), num_i64(&b), &r)) {
		if (kind == 1 && r >= INT32_MIN && r <= INT32_MAX)
			set_i32(out, (int32_t)r);
		else
			set_i64(out, r);
		return 0;
	}
	if (kind == 4) {
		bson_decimal128_t da, db, dr;

		agg__dec_from_value(&a, &da);
		agg__dec_from_value(&b, &db);
		if (!agg__dec_op('-', &da, &db, &dr)) {
			set_dec(out, &dr);
			return 0;
		}
	}
	agg__num_set(kind == 4 ? 4 : 3, agg__num_ld(&a) - agg__num_ld(&b), out);
	return 0;
}

static int eval_divmod(const struct agg__x *x, struct agg__ctx *c, bool mod, bson_value_t *out,
		       struct dfs_err *err)
{
	bson_value_t a, b;
	int kind = 0, rc = two_nums(x, c, &a, &b, &kind, err);
	long double da, db;

	if (rc < 0) {
		set_null(out);
		return 0;
	}
	if (rc)
		return rc;
	da = agg__num_ld(&a);
	db = agg__num_ld(&b);
	if (!mod) {
		if (db == 0)
			return dfs_err_set(err, DFS_EINVAL, "can't $divide by zero");
		if (kind == 4) {
			bson_decimal128_t xa, xb, r;

			agg__dec_from_value(&a, &xa);
			agg__dec_from_value(&b, &xb);
			if (!agg__dec_op('/', &xa, &xb, &r)) {
				set_dec(out, &r);
				return 0;
			}
		}
		agg__num_set(kind == 4 ? 4 : 3, da / db, out);
		return 0;
	}
	if (kind <= 2) {
		int64_t ia = num_i64(&a), ib = num_i64(&b), r;

		if (ib == 0)
			return dfs_err_set(err, DFS_EINVAL, "can't $mod by zero");
		r = ib == -1 ? 0 : ia % ib;
		if (kind == 1)
			set_i32(out, (int32_t)r);
		else
			set_i64(out, r);
		return 0;
	}
	if (db == 0)
		return dfs_err_set(err, DFS_EINVAL, "can't $mod by zero");
	agg__num_set(kind == 4 ? 4 : 3, fmodl(da, db), out);
	return 0;
}

/* One numeric operand (nullish: null result, returns -1). */
static int one_num(const struct agg__x *x, struct agg__ctx *c, bson_value_t *a, struct dfs_err *err)
{
	int rc;

	EV(0, a);
	if (agg__nullish(a))
		return -1;
	if (!agg__is_number(a))
		return dfs_err_set(err, DFS_EINVAL, "%s only supports numeric types, not %s",
				   opname(x), agg__type_name(a));
	return 0;
}

static int eval_unary_math(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
			   struct dfs_err *err)
{
	bson_value_t a;
	int rc = one_num(x, c, &a, err), k;
	long double d;

	if (rc < 0) {
		set_null(out);
		return 0;
	}
	if (rc)
		return rc;
	k = num_kind(&a);
	d = agg__num_ld(&a);
	switch (x->op) {
	case X_ABS:
		if (k <= 2) {
			if (num_i64(&a) == INT64_MIN)
				return dfs_err_set(err, DFS_EINVAL,
						   "can't take $abs of long long min");
			if (k == 1 && a.value.v_int32 == INT32_MIN)
				set_i64(out, -(int64_t)INT32_MIN);
			else if (k == 1)
				set_i32(out, abs(a.value.v_int32));
			else
				set_i64(out, llabs(a.value.v_int64));
			return 0;
		}
		if (k == 4) { /* the sign bit off: exact */
			*out = a;
			out->value.v_decimal128.high &= ~(1ULL << 63);
			return 0;
		}
		agg__num_set(k, fabsl(d), out);
		return 0;
	case X_CEIL:
	case X_FLOOR:
		if (k <= 2) {
			*out = a;
			return 0;
		}
		if (k == 4) {
			bson_decimal128_t r4;

			*out = a;
			if (!agg__dec_round(&a.value.v_decimal128, 0, x->op == X_CEIL ? 'c' : 'f',
					    &r4))
				out->value.v_decimal128 = r4;
			return 0;
		}
		agg__num_set(k, x->op == X_CEIL ? ceill(d) : floorl(d), out);
		return 0;
	case X_SQRT:
		/* decimals correctly rounded, on their own digits (decmath.c) */
		if ((k == 4 && agg__dec_sqrt(&a.value.v_decimal128, &out->value.v_decimal128)) ||
		    (k != 4 && d < 0))
			return dfs_err_set(err, DFS_EINVAL,
					   "$sqrt's argument must be greater than or equal to 0");
		if (k == 4) {
			out->value_type = BSON_TYPE_DECIMAL128;
			return 0;
		}
		agg__num_set(3, sqrtl(d), out);
		return 0;
	case X_EXP:
		if (k == 4) {
			out->value_type = BSON_TYPE_DECIMAL128;
			agg__dec_exp(&a.value.v_decimal128, &out->value.v_decimal128);
			return 0;
		}
		agg__num_set(3, expl(d), out);
		return 0;
	case X_LN:
	case X_LOG10:
		if ((k == 4 && (x->op == X_LN ? agg__dec_ln : agg__dec_log10)(
				       &a.value.v_decimal128, &out->value.v_decimal128)) ||
		    (k != 4 && !(d > 0) && !isnan(d)))
			return dfs_err_set(err, DFS_EINVAL,
					   "%s's argument must be a positive number, but is %Lg",
					   opname(x), d);
		if (k == 4) {
			out->value_type = BSON_TYPE_DECIMAL128;
			return 0;
		}
		agg__num_set(3, x->op == X_LN ? logl(d) : log10l(d), out);
		return 0;
	default:
		return dfs_err_set(err, DFS_EINVAL, "internal: bad unary operator");
	}
}

static int eval_round(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		      struct dfs_err *err)
{
	bson_value_t a, p;
	int64_t place = 0;
	int rc = one_num(x, c, &a, err), k;
	long double d, scale, r;

	if (rc < 0) {
		set_null(out);
		return 0;
	}
	if (rc)
		return rc;
	if (x->n > 1) {
		EV(1, &p);
		if (agg__nullish(&p)) {
			set_null(out);
			return 0;
		}
		if ((rc = int_arg(x, &p, "place", &place, err)))
			return rc;
		if (place < -20 || place > 100)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s: place must be between -20 and 100, not %" PRId64,
					   opname(x), place);
	}
	k = num_kind(&a);
	if (k <= 2 && place >= 0) {
		*out = a;
		return 0;
	}
	if (k == 4) {
		/* exactly, on the decimal's own digits (dec.c); NaN and infinities stay */
		bson_decimal128_t r4;

		*out = a;
		if (!agg__dec_round(&a.value.v_decimal128, place, x->op == X_TRUNC ? 't' : 'r',
				    &r4))
			out->value.v_decimal128 = r4;
		return 0;
	}
	d = agg__num_ld(&a);
	if (isnan(d) || isinf(d)) {
		*out = a;
		return 0;
	}
	/* nearbyintl: the default rounding mode rounds half to even, as $round does */
	if (place >= 0) {
		scale = powl(10, (long double)place);
		r = x->op == X_TRUNC ? truncl(d * scale) / scale : nearbyintl(d * scale) / scale;
	} else {
		scale = powl(10, (long double)-place);
		r = x->op == X_TRUNC ? truncl(d / scale) * scale : nearbyintl(d / scale) * scale;
	}
	if (k <= 2) {
		if (k == 1 && r >= INT32_MIN && r <= INT32_MAX)
			set_i32(out, (int32_t)r);
		else
			set_i64(out, r >= -9223372036854775808.0L && r < 9223372036854775808.0L
					     ? (int64_t)r
					     : (num_i64(&a) < 0 ? INT64_MIN : INT64_MAX));
		return 0;
	}
	agg__num_set(k, r, out);
	return 0;
}

static int eval_pow(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		    struct dfs_err *err)
{
	bson_value_t a, b;
	int kind = 0, rc = two_nums(x, c, &a, &b, &kind, err);
	long double da, db;

	if (rc < 0) {
		set_null(out);
		return 0;
	}
	if (rc)
		return rc;
	da = agg__num_ld(&a);
	db = agg__num_ld(&b);
	if (kind == 4) { /* correctly rounded, padded to 34 digits as MongoDB does (decmath.c) */
		bson_decimal128_t xa, xb;

		agg__dec_from_value(&a, &xa);
		agg__dec_from_value(&b, &xb);
		out->value_type = BSON_TYPE_DECIMAL128;
		if (agg__dec_pow(&xa, &xb, &out->value.v_decimal128))
			return dfs_err_set(err, DFS_EINVAL,
					   "$pow cannot take a base of 0 and a negative exponent");
		return 0;
	}
	if (da == 0 && db < 0)
		return dfs_err_set(err, DFS_EINVAL,
				   "$pow cannot take a base of 0 and a negative exponent");
	if (kind <= 2) {
		int64_t base = num_i64(&a), e = num_i64(&b), r = 1;
		bool ovf = false;

		if (e >= 0) {
			for (int64_t i = 0; i < e && !ovf; i++) {
				ovf = __builtin_mul_overflow(r, base, &r);
				if (r == 0 || ((r == 1 || r == -1) && (base == 1 || base == -1))) {
					if (base == -1)
						r = (e % 2) ? -1 : 1;
					break;
				}
			}
			if (!ovf) {
				if (kind == 1 && r >= INT32_MIN && r <= INT32_MAX)
					set_i32(out, (int32_t)r);
				else
					set_i64(out, r);
				return 0;
			}
		}
		agg__num_set(3, powl(da, db), out);
		return 0;
	}
	agg__num_set(3, powl(da, db), out);
	return 0;
}

/* {$log: [x, base]}: MongoDB's errors for x <= 0 and a base <= 0 or 1. */
static int eval_log(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		    struct dfs_err *err)
{
	bson_value_t a, b;
	int kind = 0, rc = two_nums(x, c, &a, &b, &kind, err);
	long double da, db;

	if (rc < 0) {
		set_null(out);
		return 0;
	}
	if (rc)
		return rc;
	da = agg__num_ld(&a);
	db = agg__num_ld(&b);
	if (kind == 4) { /* correctly rounded (decmath.c) */
		bson_decimal128_t xa, xb;

		agg__dec_from_value(&a, &xa);
		agg__dec_from_value(&b, &xb);
		out->value_type = BSON_TYPE_DECIMAL128;
		rc = agg__dec_log(&xa, &xb, &out->value.v_decimal128);
		if (rc == 0)
			return 0;
	}
	if (rc == -1 || (kind != 4 && !(da > 0) && !isnan(da)))
		return dfs_err_set(err, DFS_EINVAL,
				   "$log's argument must be a positive number, but is %Lg", da);
	if (rc == -2 || (!(db > 0) && !isnan(db)) || db == 1)
		return dfs_err_set(
			err, DFS_EINVAL,
			"$log's base must be a positive number not equal to 1, but is %Lg", db);
	set_dbl(out, log((double)da) / log((double)db));
	return 0;
}

/* $sum $avg $min $max $stdDevPop as expressions: over one array argument's elements, or over
 * the arguments. */
static int eval_accum(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		      struct dfs_err *err)
{
	struct vec vals = {0};
	struct agg__sum s = {0};
	bson_value_t best = missing_v;
	long double mean = 0, m2 = 0;
	int64_t cnt = 0;
	int rc = 0;

	for (int i = 0; i < x->n; i++) {
		bson_value_t v;

		if ((rc = agg__x_eval(x->args[i], c, &v, err)))
			goto done;
		if (x->n == 1 && v.value_type == BSON_TYPE_ARRAY)
			array_elems(&v, &vals);
		else
			vec_push(&vals, &v);
	}
	for (size_t i = 0; i < vals.n; i++) {
		const bson_value_t *v = &vals.v[i];

		switch (x->op) {
		case X_SUM:
		case X_AVG:
			agg__sum_add(&s, v);
			break;
		case X_MIN:
		case X_MAX:
			if (agg__nullish(v))
				break;
			if (best.value_type == BSON_TYPE_EOD ||
			    (x->op == X_MIN ? agg__cmp(v, &best) < 0 : agg__cmp(v, &best) > 0))
				best = *v;
			break;
		default:
			if (agg__is_number(v)) {
				long double d = agg__num_ld(v), delta = d - mean;

				cnt++;
				mean += delta / cnt;
				m2 += delta * (d - mean);
			}
		}
	}
	switch (x->op) {
	case X_SUM:
		agg__sum_value(&s, out);
		break;
	case X_AVG:
		agg__avg_value(&s, out);
		break;
	case X_MIN:
	case X_MAX:
		if (best.value_type == BSON_TYPE_EOD)
			set_null(out);
		else
			*out = best;
		break;
	default:
		if (cnt == 0)
			set_null(out);
		else
			set_dbl(out, (double)sqrtl(m2 / cnt));
	}
done:
	free(vals.v);
	return rc;
}

/* ---- strings ------------------------------------------------------------------------- */

/* Byte length of the UTF-8 sequence starting with byte b. */
static int u8len(unsigned char b)
{
	if (b < 0x80)
		return 1;
	if ((b & 0xe0) == 0xc0)
		return 2;
	if ((b & 0xf0) == 0xe0)
		return 3;
	return 4;
}

static size_t cp_count(const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i += (size_t)u8len((unsigned char)s[i]))
		n++;
	return n;
}

/* A string operand for $substr/$toLower...: strings as they are, nullish as "", numbers and
 * dates converted; anything else an error. */
static int str_operand(const struct agg__x *x, struct agg__ctx *c, const bson_value_t *v,
		       bson_value_t *out, struct dfs_err *err)
{
	if (v->value_type == BSON_TYPE_UTF8) {
		*out = *v;
		return 0;
	}
	if (agg__nullish(v)) {
		set_str(c->ar, "", 0, out);
		return 0;
	}
	if (agg__is_number(v) || v->value_type == BSON_TYPE_DATE_TIME)
		return convert(x, v, 2, c->ar, out, err);
	return dfs_err_set(err, DFS_EINVAL, "%s: can't convert from BSON type %s to String",
			   opname(x), agg__type_name(v));
}

static int eval_substr(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		       struct dfs_err *err)
{
	bson_value_t sv, s, a, b;
	int64_t start, len;
	size_t slen;
	const char *p;
	int rc;

	EV(0, &sv);
	if ((rc = str_operand(x, c, &sv, &s, err)))
		return rc;
	EV(1, &a);
	EV(2, &b);
	if ((rc = int_arg(x, &a, "starting index", &start, err)) ||
	    (rc = int_arg(x, &b, "length", &len, err)))
		return rc;
	p = s.value.v_utf8.str;
	slen = s.value.v_utf8.len;
	if (x->op == X_SUBSTRB) {
		size_t st, ln;

		if (start < 0 || (size_t)start >= slen) {
			set_str(c->ar, "", 0, out);
			return 0;
		}
		st = (size_t)start;
		ln = len < 0 || (size_t)len > slen - st ? slen - st : (size_t)len;
		if ((p[st] & 0xc0) == 0x80)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s: invalid range, starting index is a UTF-8 "
					   "continuation byte",
					   opname(x));
		if (st + ln < slen && (p[st + ln] & 0xc0) == 0x80)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s: invalid range, ending index is in the middle of a "
					   "UTF-8 character",
					   opname(x));
		set_str(c->ar, p + st, ln, out);
		return 0;
	}
	if (start < 0)
		return dfs_err_set(err, DFS_EINVAL,
				   "$substrCP: starting index must be "
				   "non-negative");
	if (len < 0)
		return dfs_err_set(err, DFS_EINVAL, "$substrCP: length must be non-negative");
	{
		size_t i = 0, from, cp = 0;

		while (i < slen && cp < (size_t)start) {
			i += (size_t)u8len((unsigned char)p[i]);
			cp++;
		}
		from = i < slen ? i : slen;
		cp = 0;
		while (i < slen && cp < (size_t)len) {
			i += (size_t)u8len((unsigned char)p[i]);
			cp++;
		}
		if (i > slen)
			i = slen;
		set_str(c->ar, p + from, i - from, out);
	}
	return 0;
}

static bool in_chars(const char *chars, size_t clen, const char *p, int l)
{
	for (size_t i = 0; i < clen; i += (size_t)u8len((unsigned char)chars[i])) {
		int cl = u8len((unsigned char)chars[i]);

		if (cl == l && !memcmp(chars + i, p, (size_t)l))
			return true;
	}
	return false;
}

static int eval_trim(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		     struct dfs_err *err)
{
	static const char ws[] = " \t\n\v\f\r";
	bson_value_t in, ch;
	const char *chars = ws, *p;
	size_t clen = sizeof(ws), b, e;
	int rc;

	EV(0, &in);
	if (agg__nullish(&in)) {
		set_null(out);
		return 0;
	}
	if (in.value_type != BSON_TYPE_UTF8)
		return dfs_err_set(err, DFS_EINVAL,
				   "%s requires its input to be a string, got %s instead",
				   opname(x), agg__type_name(&in));
	if (x->args[1]) {
		EV(1, &ch);
		if (agg__nullish(&ch)) {
			set_null(out);
			return 0;
		}
		if (ch.value_type != BSON_TYPE_UTF8)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s requires 'chars' to be a string, got %s instead",
					   opname(x), agg__type_name(&ch));
		chars = ch.value.v_utf8.str;
		clen = ch.value.v_utf8.len;
	}
	p = in.value.v_utf8.str;
	b = 0;
	e = in.value.v_utf8.len;
	if (x->op != X_RTRIM)
		while (b < e && in_chars(chars, clen, p + b, u8len((unsigned char)p[b])))
			b += (size_t)u8len((unsigned char)p[b]);
	if (x->op != X_LTRIM)
		while (e > b) {
			size_t k = e - 1;

			while (k > b && (p[k] & 0xc0) == 0x80)
				k--;
			if (!in_chars(chars, clen, p + k, (int)(e - k)))
				break;
			e = k;
		}
	set_str(c->ar, p + b, e - b, out);
	return 0;
}

static int eval_regex(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		      struct dfs_err *err)
{
	bson_value_t in, re, opt;
	const char *pattern, *flags = "";
	uint32_t o = PCRE2_UTF;
	pcre2_code *code;
	pcre2_match_data *md;
	int ec, rc;
	PCRE2_SIZE eo;

	EV(0, &in);
	EV(1, &re);
	if (re.value_type == BSON_TYPE_REGEX) {
		pattern = re.value.v_regex.regex;
		flags = re.value.v_regex.options;
	} else if (re.value_type == BSON_TYPE_UTF8) {
		pattern = re.value.v_utf8.str;
	} else if (agg__nullish(&re)) {
		set_bool(out, false);
		return 0;
	} else {
		return dfs_err_set(err, DFS_EINVAL,
				   "$regexMatch needs 'regex' to be of type string or regex");
	}
	if (x->args[2]) {
		EV(2, &opt);
		if (opt.value_type == BSON_TYPE_UTF8) {
			if (*flags)
				return dfs_err_set(err, DFS_EINVAL,
						   "$regexMatch: options set in both 'regex' and "
						   "'options'");
			flags = opt.value.v_utf8.str;
		} else if (!agg__nullish(&opt)) {
			return dfs_err_set(err, DFS_EINVAL,
					   "$regexMatch needs 'options' to be of type string");
		}
	}
	if (agg__nullish(&in)) {
		set_bool(out, false);
		return 0;
	}
	if (in.value_type != BSON_TYPE_UTF8)
		return dfs_err_set(err, DFS_EINVAL,
				   "$regexMatch needs 'input' to be of type string");
	for (const char *f = flags; *f; f++) {
		switch (*f) {
		case 'i':
			o |= PCRE2_CASELESS;
			break;
		case 'm':
			o |= PCRE2_MULTILINE;
			break;
		case 's':
			o |= PCRE2_DOTALL;
			break;
		case 'x':
			o |= PCRE2_EXTENDED;
			break;
		case 'u':
			break;
		default:
			return dfs_err_set(err, DFS_EINVAL,
					   "$regexMatch: invalid flag in regex "
					   "options: %c",
					   *f);
		}
	}
	code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, o, &ec, &eo, NULL);
	if (!code)
		return dfs_err_set(err, DFS_EINVAL, "$regexMatch: invalid regular expression '%s'",
				   pattern);
	md = pcre2_match_data_create_from_pattern(code, NULL);
	rc = pcre2_match(code, (PCRE2_SPTR)in.value.v_utf8.str, in.value.v_utf8.len, 0, 0, md,
			 NULL);
	pcre2_match_data_free(md);
	pcre2_code_free(code);
	set_bool(out, rc >= 0);
	return 0;
}

/* ---- arrays and objects -------------------------------------------------------------- */

static int eval_filter_map(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
			   struct dfs_err *err)
{
	bson_value_t in, lim;
	struct vec el = {0}, res = {0};
	struct agg__var var;
	const struct agg__var *saved = c->vars;
	int64_t limit = -1;
	int rc = 0;

	EV(0, &in);
	if (agg__nullish(&in)) {
		set_null(out);
		return 0;
	}
	if (in.value_type != BSON_TYPE_ARRAY)
		return dfs_err_set(err, DFS_EINVAL, "input to %s must be an array not %s",
				   opname(x), agg__type_name(&in));
	if (x->op == X_FILTER && x->args[3]) {
		EV(3, &lim);
		if (!agg__nullish(&lim)) {
			if ((rc = int_arg(x, &lim, "limit", &limit, err)))
				return rc;
			if (limit < 1)
				return dfs_err_set(err, DFS_EINVAL,
						   "$filter: limit must be greater than 0");
		}
	}
	array_elems(&in, &el);
	var.name = x->var;
	var.up = saved;
	for (size_t i = 0; i < el.n; i++) {
		bson_value_t r;

		if (limit >= 0 && (int64_t)res.n >= limit)
			break;
		var.v = el.v[i];
		c->vars = &var;
		rc = agg__x_eval(x->args[1], c, &r, err);
		c->vars = saved;
		if (rc)
			goto done;
		if (x->op == X_MAP)
			vec_push(&res, &r);
		else if (agg__truthy(&r))
			vec_push(&res, &el.v[i]);
	}
	make_array(c->ar, res.v, res.n, out);
done:
	free(el.v);
	free(res.v);
	return rc;
}

static int eval_reduce(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		       struct dfs_err *err)
{
	bson_value_t in, acc;
	struct vec el = {0};
	struct agg__var vv, vt;
	const struct agg__var *saved = c->vars;
	int rc = 0;

	EV(0, &in);
	if (agg__nullish(&in)) {
		set_null(out);
		return 0;
	}
	if (in.value_type != BSON_TYPE_ARRAY)
		return dfs_err_set(err, DFS_EINVAL,
				   "$reduce requires 'input' to be an array, not "
				   "%s",
				   agg__type_name(&in));
	EV(1, &acc);
	array_elems(&in, &el);
	vv.name = "value";
	vv.up = saved;
	vt.name = "this";
	vt.up = &vv;
	for (size_t i = 0; i < el.n; i++) {
		vv.v = acc;
		vt.v = el.v[i];
		c->vars = &vt;
		rc = agg__x_eval(x->args[2], c, &acc, err);
		c->vars = saved;
		if (rc)
			break;
	}
	*out = acc;
	free(el.v);
	return rc;
}

static int eval_slice(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		      struct dfs_err *err)
{
	bson_value_t a, b, d;
	struct vec el = {0};
	int64_t pos = 0, n;
	int rc;

	EV(0, &a);
	EV(1, &b);
	if (x->n == 3)
		EV(2, &d);
	if (agg__nullish(&a) || agg__nullish(&b) || (x->n == 3 && agg__nullish(&d))) {
		set_null(out);
		return 0;
	}
	if (a.value_type != BSON_TYPE_ARRAY)
		return dfs_err_set(err, DFS_EINVAL,
				   "first argument to $slice must be an array, but is of type: %s",
				   agg__type_name(&a));
	array_elems(&a, &el);
	if (x->n == 2) {
		if ((rc = int_arg(x, &b, "second argument", &n, err)))
			goto done;
		if (n >= 0) {
			pos = 0;
		} else {
			pos = (int64_t)el.n + n;
			if (pos < 0)
				pos = 0;
			n = -n;
		}
	} else {
		if ((rc = int_arg(x, &b, "second argument", &pos, err)) ||
		    (rc = int_arg(x, &d, "third argument", &n, err)))
			goto done;
		if (n <= 0) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "third argument to $slice must be positive");
			goto done;
		}
		if (pos < 0) {
			pos = (int64_t)el.n + pos;
			if (pos < 0)
				pos = 0;
		}
	}
	if (pos > (int64_t)el.n)
		pos = (int64_t)el.n;
	if (n > (int64_t)el.n - pos)
		n = (int64_t)el.n - pos;
	make_array(c->ar, el.v + pos, (size_t)n, out);
	rc = 0;
done:
	free(el.v);
	return rc;
}

static int eval_merge(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		      struct dfs_err *err)
{
	struct vec vals = {0};
	const char **keys = NULL;
	size_t cap = 0;
	bson_t b = BSON_INITIALIZER;
	int rc = 0;

	for (int i = 0; i < x->n; i++) {
		bson_value_t v;
		bson_iter_t it;

		if ((rc = agg__x_eval(x->args[i], c, &v, err)))
			goto done;
		if (agg__nullish(&v))
			continue;
		if (v.value_type != BSON_TYPE_DOCUMENT) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "$mergeObjects requires object inputs, but input is of "
					 "type %s",
					 agg__type_name(&v));
			goto done;
		}
		if (!bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len))
			continue;
		while (bson_iter_next(&it)) {
			size_t k;

			for (k = 0; k < vals.n; k++)
				if (!strcmp(keys[k], bson_iter_key(&it)))
					break;
			if (k < vals.n) {
				vals.v[k] = *bson_iter_value(&it);
				continue;
			}
			if (vals.n == cap) {
				cap = cap ? 2 * cap : 8;
				keys = realloc(keys, cap * sizeof(*keys));
				if (!keys)
					abort();
			}
			keys[vals.n] = bson_iter_key(&it);
			vec_push(&vals, bson_iter_value(&it));
		}
	}
	for (size_t k = 0; k < vals.n; k++)
		bson_append_value(&b, keys[k], -1, &vals.v[k]);
	agg__arena_take(c->ar, &b, BSON_TYPE_DOCUMENT, out);
	bson_init(&b);
done:
	bson_destroy(&b);
	free(vals.v);
	free(keys);
	return rc;
}

/*
 * $getField: the value of the field named exactly 'field' in input (missing when absent).
 * $setField / $unsetField: a copy of input with that field replaced in place, appended when
 * absent, or removed when the value is missing ($$REMOVE, $unsetField). A null, undefined or
 * missing input gives null; another non-document is an error.
 */
static int eval_field_op(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
			 struct dfs_err *err)
{
	const bson_value_t *f = agg__x_const(x->args[0]);
	const char *name = f->value.v_utf8.str;
	bson_value_t in, val = missing_v;
	bson_iter_t it;
	bson_t b;
	bool found = false;
	int rc;

	EV(1, &in);
	if (agg__nullish(&in)) {
		set_null(out);
		return 0;
	}
	if (in.value_type != BSON_TYPE_DOCUMENT)
		return dfs_err_set(err, DFS_EINVAL,
				   "%s requires 'input' to evaluate to type Object, but got %s",
				   opname(x), agg__type_name(&in));
	if (!bson_iter_init_from_data(&it, in.value.v_doc.data, in.value.v_doc.data_len))
		return dfs_err_set(err, DFS_EINVAL, "%s: 'input' is not valid BSON", opname(x));
	if (x->op == X_GETFIELD) {
		*out = missing_v;
		while (bson_iter_next(&it))
			if (!strcmp(bson_iter_key(&it), name)) {
				*out = *bson_iter_value(&it);
				break;
			}
		return 0;
	}
	if (x->op == X_SETFIELD)
		EV(2, &val);
	bson_init(&b);
	while (bson_iter_next(&it)) {
		if (!strcmp(bson_iter_key(&it), name)) {
			found = true;
			if (val.value_type != BSON_TYPE_EOD)
				bson_append_value(&b, name, -1, &val);
			continue;
		}
		bson_append_value(&b, bson_iter_key(&it), -1, bson_iter_value(&it));
	}
	if (!found && val.value_type != BSON_TYPE_EOD)
		bson_append_value(&b, name, -1, &val);
	agg__arena_take(c->ar, &b, BSON_TYPE_DOCUMENT, out);
	return 0;
}

static int eval_arr_to_obj(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
			   struct dfs_err *err)
{
	bson_value_t in;
	struct vec el = {0};
	bson_t b = BSON_INITIALIZER;
	const char **keys = NULL;
	struct vec vals = {0};
	int rc = 0;

	EV(0, &in);
	if (agg__nullish(&in)) {
		set_null(out);
		bson_destroy(&b);
		return 0;
	}
	if (in.value_type != BSON_TYPE_ARRAY) {
		bson_destroy(&b);
		return dfs_err_set(err, DFS_EINVAL,
				   "$arrayToObject requires an array input, "
				   "found: %s",
				   agg__type_name(&in));
	}
	array_elems(&in, &el);
	keys = calloc(el.n + 1, sizeof(*keys));
	if (!keys)
		abort();
	for (size_t i = 0; i < el.n; i++) {
		bson_iter_t it;
		bson_value_t kvs, vvs;
		const bson_value_t *kv = NULL, *vv = NULL;
		int cnt = 0;

		if (el.v[i].value_type != BSON_TYPE_ARRAY &&
		    el.v[i].value_type != BSON_TYPE_DOCUMENT) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "$arrayToObject requires an array of key-value pairs, "
					 "found: %s",
					 agg__type_name(&el.v[i]));
			goto done;
		}
		bson_iter_init_from_data(&it, el.v[i].value.v_doc.data,
					 el.v[i].value.v_doc.data_len);
		while (bson_iter_next(&it)) {
			cnt++;
			if ((el.v[i].value_type == BSON_TYPE_ARRAY && cnt == 1) ||
			    (el.v[i].value_type == BSON_TYPE_DOCUMENT &&
			     !strcmp(bson_iter_key(&it), "k"))) {
				kvs = *bson_iter_value(&it);
				kv = &kvs;
			} else if ((el.v[i].value_type == BSON_TYPE_ARRAY && cnt == 2) ||
				   (el.v[i].value_type == BSON_TYPE_DOCUMENT &&
				    !strcmp(bson_iter_key(&it), "v"))) {
				vvs = *bson_iter_value(&it);
				vv = &vvs;
			}
		}
		if (cnt != 2 || !kv || !vv) {
			rc = dfs_err_set(err, DFS_EINVAL, "$arrayToObject requires %s",
					 el.v[i].value_type == BSON_TYPE_ARRAY
						 ? "an array of size 2 arrays"
						 : "an object with keys 'k' and 'v'");
			goto done;
		}
		if (kv->value_type != BSON_TYPE_UTF8) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "$arrayToObject requires the key to be of type string, "
					 "found: %s",
					 agg__type_name(kv));
			goto done;
		}
		{
			size_t k;

			for (k = 0; k < vals.n; k++)
				if (!strcmp(keys[k], kv->value.v_utf8.str))
					break;
			if (k < vals.n) {
				vals.v[k] = *vv;
			} else {
				keys[vals.n] = kv->value.v_utf8.str;
				vec_push(&vals, vv);
			}
		}
	}
	for (size_t k = 0; k < vals.n; k++)
		bson_append_value(&b, keys[k], -1, &vals.v[k]);
	agg__arena_take(c->ar, &b, BSON_TYPE_DOCUMENT, out);
	bson_init(&b);
done:
	bson_destroy(&b);
	free(el.v);
	free(vals.v);
	free(keys);
	return rc;
}

/* ---- the evaluator ------------------------------------------------------------------- */

/* The UTC offset of a timezone argument at the instant at_ms: "UTC", "GMT", "Z", a fixed
 * offset "+hh", "+hh:mm", "+hhmm" (and '-'), or an Olson name ("Europe/Paris", tz.c). When
 * local is true, at_ms is a local wall-clock time and the offset is the one in force there. */
static int tz_offset(const struct agg__x *x, const bson_value_t *tz, int64_t at_ms, bool local,
		     int64_t *off_ms, struct dfs_err *err)
{
	const char *s;
	int h = 0, m = 0, n = 0, rc;

	*off_ms = 0;
	if (agg__nullish(tz))
		return 0;
	if (tz->value_type != BSON_TYPE_UTF8)
		return dfs_err_set(err, DFS_EINVAL, "%s: 'timezone' must be a string", opname(x));
	s = tz->value.v_utf8.str;
	if (!strcmp(s, "UTC") || !strcmp(s, "GMT") || !strcmp(s, "Z"))
		return 0;
	if ((s[0] == '+' || s[0] == '-') &&
	    ((sscanf(s + 1, "%2d:%2d%n", &h, &m, &n) == 2 && n == 5 && !s[6]) ||
	     (sscanf(s + 1, "%2d%2d%n", &h, &m, &n) == 2 && n == 4 && !s[5]) ||
	     (sscanf(s + 1, "%2d%n", &h, &n) == 1 && n == 2 && !s[3] && !(m = 0))) &&
	    isdigit((unsigned char)s[1]) && isdigit((unsigned char)s[2]) && h <= 23 && m <= 59) {
		*off_ms = (s[0] == '-' ? -1 : 1) * ((int64_t)h * 3600000 + (int64_t)m * 60000);
		return 0;
	}
	if ((rc = agg__tz_offset(s, at_ms, off_ms, err)))
		return dfs_err_prefix(err, "%s: ", opname(x));
	if (local) { /* the offset in force at the UTC instant this wall-clock time names */
		int64_t first = *off_ms;

		if ((rc = agg__tz_offset(s, at_ms - first, off_ms, err)))
			return dfs_err_prefix(err, "%s: ", opname(x));
	}
	return 0;
}

static int eval_datepart(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
			 struct dfs_err *err)
{
	bson_value_t v, tz;
	struct tm tm;
	int milli, r, rc;
	int64_t ms = 0, off = 0;

	EV(0, &v);
	if (agg__nullish(&v)) {
		set_null(out);
		return 0;
	}
	if ((rc = to_date(x, &v, &ms, err)))
		return rc;
	if (x->n > 1 && x->args[1]) {
		EV(1, &tz);
		if ((rc = tz_offset(x, &tz, ms, false, &off, err)))
			return rc;
	}
	ms_tm(ms + off, &tm, &milli);
	switch (x->op) {
	case X_YEAR:
		r = tm.tm_year + 1900;
		break;
	case X_MONTH:
		r = tm.tm_mon + 1;
		break;
	case X_DOM:
		r = tm.tm_mday;
		break;
	case X_HOUR:
		r = tm.tm_hour;
		break;
	case X_MINUTE:
		r = tm.tm_min;
		break;
	case X_SECOND:
		r = tm.tm_sec;
		break;
	case X_MILLI:
		r = milli;
		break;
	case X_DOW:
		r = tm.tm_wday + 1;
		break;
	case X_DOY:
		r = tm.tm_yday + 1;
		break;
	default:
		r = (tm.tm_yday + 7 - tm.tm_wday) / 7;
	}
	set_i32(out, r);
	return 0;
}

static int eval_cmp(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		    struct dfs_err *err)
{
	bson_value_t a, b;
	int rc, d;

	EV(0, &a);
	EV(1, &b);
	d = agg__cmp(&a, &b);
	switch (x->op) {
	case X_EQ:
		set_bool(out, d == 0);
		break;
	case X_NE:
		set_bool(out, d != 0);
		break;
	case X_GT:
		set_bool(out, d > 0);
		break;
	case X_GTE:
		set_bool(out, d >= 0);
		break;
	case X_LT:
		set_bool(out, d < 0);
		break;
	case X_LTE:
		set_bool(out, d <= 0);
		break;
	default:
		set_i32(out, d < 0 ? -1 : d > 0);
	}
	return 0;
}

static int eval_string_ops(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
			   struct dfs_err *err)
{
	bson_value_t a, b, s;
	int rc;

	switch (x->op) {
	case X_CONCAT: {
		struct dfs_buf buf;
		bool null = false;

		dfs_buf_init(&buf);
		for (int i = 0; i < x->n; i++) {
			if ((rc = agg__x_eval(x->args[i], c, &a, err))) {
				dfs_buf_release(&buf);
				return rc;
			}
			if (agg__nullish(&a)) {
				null = true;
				continue;
			}
			if (a.value_type != BSON_TYPE_UTF8) {
				dfs_buf_release(&buf);
				return dfs_err_set(err, DFS_EINVAL,
						   "$concat only supports strings, not %s",
						   agg__type_name(&a));
			}
			dfs_buf_append(&buf, a.value.v_utf8.str, a.value.v_utf8.len);
		}
		if (null)
			set_null(out);
		else
			set_str(c->ar, buf.data ? buf.data : "", buf.len, out);
		dfs_buf_release(&buf);
		return 0;
	}
	case X_TOLOWER:
	case X_TOUPPER: {
		char *p;

		EV(0, &a);
		if ((rc = str_operand(x, c, &a, &s, err)))
			return rc;
		set_str(c->ar, s.value.v_utf8.str, s.value.v_utf8.len, out);
		p = (char *)out->value.v_utf8.str;
		for (uint32_t i = 0; i < out->value.v_utf8.len; i++)
			if ((unsigned char)p[i] < 0x80)
				p[i] = (char)(x->op == X_TOLOWER ? tolower((unsigned char)p[i])
								 : toupper((unsigned char)p[i]));
		return 0;
	}
	case X_STRLENB:
	case X_STRLENCP:
		EV(0, &a);
		if (a.value_type != BSON_TYPE_UTF8)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s requires a string argument, found: %s", opname(x),
					   agg__type_name(&a));
		set_i32(out, (int32_t)(x->op == X_STRLENB
					       ? a.value.v_utf8.len
					       : cp_count(a.value.v_utf8.str, a.value.v_utf8.len)));
		return 0;
	case X_STRCASECMP: {
		bson_value_t sa, sb;
		int d;

		EV(0, &a);
		EV(1, &b);
		if ((rc = str_operand(x, c, &a, &sa, err)) ||
		    (rc = str_operand(x, c, &b, &sb, err)))
			return rc;
		d = strcasecmp(sa.value.v_utf8.str, sb.value.v_utf8.str);
		set_i32(out, d < 0 ? -1 : d > 0);
		return 0;
	}
	case X_SPLIT: {
		struct vec parts = {0};
		const char *p, *q, *end;
		size_t dl;

		EV(0, &a);
		EV(1, &b);
		if (agg__nullish(&a) || agg__nullish(&b)) {
			set_null(out);
			return 0;
		}
		if (a.value_type != BSON_TYPE_UTF8)
			return dfs_err_set(err, DFS_EINVAL,
					   "$split requires an expression that evaluates to a "
					   "string as a first argument, found: %s",
					   agg__type_name(&a));
		if (b.value_type != BSON_TYPE_UTF8)
			return dfs_err_set(err, DFS_EINVAL,
					   "$split requires an expression that evaluates to a "
					   "string as a second argument, found: %s",
					   agg__type_name(&b));
		dl = b.value.v_utf8.len;
		if (dl == 0)
			return dfs_err_set(err, DFS_EINVAL,
					   "$split requires a non-empty separator");
		p = a.value.v_utf8.str;
		end = p + a.value.v_utf8.len;
		for (;;) {
			bson_value_t part;

			q = memmem(p, (size_t)(end - p), b.value.v_utf8.str, dl);
			set_str(c->ar, p, q ? (size_t)(q - p) : (size_t)(end - p), &part);
			vec_push(&parts, &part);
			if (!q)
				break;
			p = q + dl;
		}
		make_array(c->ar, parts.v, parts.n, out);
		free(parts.v);
		return 0;
	}
	case X_INDEXOFB: {
		bson_value_t st, en;
		int64_t from = 0, to;
		const char *hit;

		EV(0, &a);
		if (agg__nullish(&a)) {
			set_null(out);
			return 0;
		}
		if (a.value_type != BSON_TYPE_UTF8)
			return dfs_err_set(err, DFS_EINVAL,
					   "$indexOfBytes requires a string as the first argument, "
					   "found: %s",
					   agg__type_name(&a));
		EV(1, &b);
		if (b.value_type != BSON_TYPE_UTF8)
			return dfs_err_set(err, DFS_EINVAL,
					   "$indexOfBytes requires a string as the second "
					   "argument, found: %s",
					   agg__type_name(&b));
		to = a.value.v_utf8.len;
		if (x->n > 2) {
			EV(2, &st);
			if ((rc = int_arg(x, &st, "starting index", &from, err)))
				return rc;
			if (from < 0)
				return dfs_err_set(err, DFS_EINVAL,
						   "$indexOfBytes: starting index must be "
						   "non-negative");
		}
		if (x->n > 3) {
			EV(3, &en);
			if ((rc = int_arg(x, &en, "ending index", &to, err)))
				return rc;
			if (to < 0)
				return dfs_err_set(err, DFS_EINVAL,
						   "$indexOfBytes: ending index must be "
						   "non-negative");
			if (to > (int64_t)a.value.v_utf8.len)
				to = a.value.v_utf8.len;
		}
		if (from > to) {
			set_i32(out, -1);
			return 0;
		}
		hit = memmem(a.value.v_utf8.str + from, (size_t)(to - from), b.value.v_utf8.str,
			     b.value.v_utf8.len);
		set_i32(out, hit ? (int32_t)(hit - a.value.v_utf8.str) : -1);
		return 0;
	}
	default:
		return eval_substr(x, c, out, err);
	}
}

static int eval_array_ops(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
			  struct dfs_err *err)
{
	bson_value_t a, b;
	struct vec el = {0};
	int rc = 0;

	switch (x->op) {
	case X_SIZE:
		EV(0, &a);
		if (a.value_type != BSON_TYPE_ARRAY)
			return dfs_err_set(
				err, DFS_EINVAL,
				"the argument to $size must be an array, but was of type: "
				"%s",
				agg__type_name(&a));
		array_elems(&a, &el);
		set_i32(out, (int32_t)el.n);
		break;
	case X_ISARRAY:
		EV(0, &a);
		set_bool(out, a.value_type == BSON_TYPE_ARRAY);
		return 0;
	case X_ELEMAT: {
		int64_t i;

		EV(0, &a);
		EV(1, &b);
		if (agg__nullish(&a) || agg__nullish(&b)) {
			set_null(out);
			return 0;
		}
		if (a.value_type != BSON_TYPE_ARRAY)
			return dfs_err_set(err, DFS_EINVAL,
					   "$arrayElemAt's first argument must be an array, but is "
					   "%s",
					   agg__type_name(&a));
		if (!agg__is_number(&b) || int_arg(x, &b, "index", &i, NULL))
			return dfs_err_set(err, DFS_EINVAL,
					   "$arrayElemAt's second argument must be a numeric value "
					   "representable as a 32-bit integral value");
		array_elems(&a, &el);
		if (i < 0)
			i += (int64_t)el.n;
		*out = i >= 0 && i < (int64_t)el.n ? el.v[i] : missing_v;
		break;
	}
	case X_FIRST:
	case X_LAST:
		EV(0, &a);
		if (agg__nullish(&a)) {
			set_null(out);
			return 0;
		}
		if (a.value_type != BSON_TYPE_ARRAY)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s's argument must be an array, but is %s", opname(x),
					   agg__type_name(&a));
		array_elems(&a, &el);
		*out = el.n ? el.v[x->op == X_FIRST ? 0 : el.n - 1] : missing_v;
		break;
	case X_CONCATARRAYS: {
		bool null = false;

		for (int i = 0; i < x->n && !rc; i++) {
			if ((rc = agg__x_eval(x->args[i], c, &a, err)))
				break;
			if (agg__nullish(&a))
				null = true;
			else if (a.value_type != BSON_TYPE_ARRAY)
				rc = dfs_err_set(err, DFS_EINVAL,
						 "$concatArrays only supports arrays, not %s",
						 agg__type_name(&a));
			else
				array_elems(&a, &el);
		}
		if (!rc) {
			if (null)
				set_null(out);
			else
				make_array(c->ar, el.v, el.n, out);
		}
		break;
	}
	case X_REVERSE:
		EV(0, &a);
		if (agg__nullish(&a)) {
			set_null(out);
			return 0;
		}
		if (a.value_type != BSON_TYPE_ARRAY)
			return dfs_err_set(
				err, DFS_EINVAL,
				"the argument to $reverseArray must be an array, but was "
				"of type: %s",
				agg__type_name(&a));
		array_elems(&a, &el);
		for (size_t i = 0; i < el.n / 2; i++) {
			bson_value_t t = el.v[i];

			el.v[i] = el.v[el.n - 1 - i];
			el.v[el.n - 1 - i] = t;
		}
		make_array(c->ar, el.v, el.n, out);
		break;
	case X_IN: {
		bool found = false;

		EV(0, &a);
		EV(1, &b);
		if (b.value_type != BSON_TYPE_ARRAY)
			return dfs_err_set(err, DFS_EINVAL,
					   "$in requires an array as a second argument, found: %s",
					   agg__type_name(&b));
		array_elems(&b, &el);
		for (size_t i = 0; i < el.n && !found; i++)
			found = agg__cmp(&a, &el.v[i]) == 0;
		set_bool(out, found);
		break;
	}
	case X_INDEXOFARRAY: {
		bson_value_t st, en;
		int64_t from = 0, to;

		EV(0, &a);
		if (agg__nullish(&a)) {
			set_null(out);
			return 0;
		}
		if (a.value_type != BSON_TYPE_ARRAY)
			return dfs_err_set(err, DFS_EINVAL,
					   "$indexOfArray requires an array as a first argument, "
					   "found: %s",
					   agg__type_name(&a));
		EV(1, &b);
		array_elems(&a, &el);
		to = (int64_t)el.n;
		if (x->n > 2) {
			if ((rc = agg__x_eval(x->args[2], c, &st, err)) ||
			    (rc = int_arg(x, &st, "starting index", &from, err)))
				break;
			if (from < 0) {
				rc = dfs_err_set(
					err, DFS_EINVAL,
					"$indexOfArray: starting index must be non-negative");
				break;
			}
		}
		if (x->n > 3) {
			if ((rc = agg__x_eval(x->args[3], c, &en, err)) ||
			    (rc = int_arg(x, &en, "ending index", &to, err)))
				break;
			if (to < 0) {
				rc = dfs_err_set(
					err, DFS_EINVAL,
					"$indexOfArray: ending index must be non-negative");
				break;
			}
			if (to > (int64_t)el.n)
				to = (int64_t)el.n;
		}
		set_i32(out, -1);
		for (int64_t i = from; i < to; i++)
			if (agg__cmp(&el.v[i], &b) == 0) {
				set_i32(out, (int32_t)i);
				break;
			}
		break;
	}
	case X_RANGE: {
		bson_value_t st;
		int64_t from, to, step = 1;

		EV(0, &a);
		EV(1, &b);
		if ((rc = int_arg(x, &a, "starting value", &from, err)) ||
		    (rc = int_arg(x, &b, "ending value", &to, err)))
			return rc;
		if (x->n > 2) {
			EV(2, &st);
			if ((rc = int_arg(x, &st, "step value", &step, err)))
				return rc;
			if (step == 0)
				return dfs_err_set(err, DFS_EINVAL,
						   "$range requires a non-zero step value");
		}
		{
			bson_t arr = BSON_INITIALIZER;
			uint32_t k = 0;

			for (int64_t i = from; step > 0 ? i < to : i > to; i += step) {
				bson_value_t v;

				if (k >= 10000000) {
					bson_destroy(&arr);
					return dfs_err_set(
						err, DFS_EINVAL,
						"$range would produce too many elements");
				}
				set_i32(&v, (int32_t)i);
				append_idx(&arr, k++, &v);
			}
			agg__arena_take(c->ar, &arr, BSON_TYPE_ARRAY, out);
		}
		return 0;
	}
	case X_OBJTOARRAY: {
		bson_iter_t it;
		bson_t arr = BSON_INITIALIZER;
		uint32_t k = 0;

		EV(0, &a);
		if (agg__nullish(&a)) {
			bson_destroy(&arr);
			set_null(out);
			return 0;
		}
		if (a.value_type != BSON_TYPE_DOCUMENT) {
			bson_destroy(&arr);
			return dfs_err_set(err, DFS_EINVAL,
					   "$objectToArray requires a document input, found: %s",
					   agg__type_name(&a));
		}
		if (bson_iter_init_from_data(&it, a.value.v_doc.data, a.value.v_doc.data_len))
			while (bson_iter_next(&it)) {
				bson_t kv;
				char buf[16];
				const char *key;

				bson_uint32_to_string(k++, &key, buf, sizeof(buf));
				bson_append_document_begin(&arr, key, -1, &kv);
				bson_append_utf8(&kv, "k", 1, bson_iter_key(&it), -1);
				bson_append_value(&kv, "v", 1, bson_iter_value(&it));
				bson_append_document_end(&arr, &kv);
			}
		agg__arena_take(c->ar, &arr, BSON_TYPE_ARRAY, out);
		return 0;
	}
	default:
		return dfs_err_set(err, DFS_EINVAL, "internal: bad array operator");
	}
	free(el.v);
	return rc;
}

static int eval_type_ops(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
			 struct dfs_err *err)
{
	bson_value_t a, to;
	int rc, code = 0;

	EV(0, &a);
	switch (x->op) {
	case X_TYPE: {
		const char *n = agg__type_name(&a);

		set_str(c->ar, n, strlen(n), out);
		return 0;
	}
	case X_ISNUMBER:
		set_bool(out, agg__is_number(&a));
		return 0;
	case X_CONVERT:
		EV(1, &to);
		if (agg__nullish(&to)) {
			set_null(out);
			return 0;
		}
		if (type_code(&to, &code))
			return dfs_err_set(err, DFS_EINVAL,
					   "$convert: unknown type name or code "
					   "for 'to'");
		if (agg__nullish(&a)) {
			if (x->args[3])
				EV(3, out);
			else
				set_null(out);
			return 0;
		}
		rc = convert(x, &a, code, c->ar, out, err);
		if (rc && x->args[2]) {
			dfs_err_clear(err);
			EV(2, out);
			return 0;
		}
		return rc;
	default:
		break;
	}
	if (agg__nullish(&a)) {
		set_null(out);
		return 0;
	}
	switch (x->op) {
	case X_TOSTRING:
		code = 2;
		break;
	case X_TOINT:
		code = 16;
		break;
	case X_TOLONG:
		code = 18;
		break;
	case X_TODOUBLE:
		code = 1;
		break;
	case X_TODECIMAL:
		code = 19;
		break;
	case X_TOBOOL:
		code = 8;
		break;
	case X_TODATE:
		code = 9;
		break;
	default:
		code = 7;
	}
	return convert(x, &a, code, c->ar, out, err);
}

static int eval_dates(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out,
		      struct dfs_err *err)
{
	bson_value_t a, f, tz;
	const char *fmt = "%Y-%m-%dT%H:%M:%S.%LZ";
	int64_t ms = 0, off = 0;
	int rc;

	memset(&tz, 0, sizeof(tz));
	if (x->args[2])
		EV(2, &tz);
	if (x->args[1]) {
		EV(1, &f);
		if (f.value_type != BSON_TYPE_UTF8)
			return dfs_err_set(err, DFS_EINVAL, "%s: 'format' must be a string",
					   opname(x));
		fmt = f.value.v_utf8.str;
	}
	EV(0, &a);
	if (x->op == X_DATETOSTRING) {
		if (agg__nullish(&a)) {
			if (x->args[3])
				EV(3, out);
			else
				set_null(out);
			return 0;
		}
		if ((rc = to_date(x, &a, &ms, err)) ||
		    (rc = tz_offset(x, &tz, ms, false, &off, err)))
			return rc;
		return date_to_string(x, ms, off, fmt, c->ar, out, err);
	}
	if (agg__nullish(&a)) {
		if (x->args[4])
			EV(4, out);
		else
			set_null(out);
		return 0;
	}
	if (a.value_type != BSON_TYPE_UTF8) {
		if (x->args[3])
			EV(3, out);
		else
			return dfs_err_set(
				err, DFS_EINVAL,
				"$dateFromString requires that 'dateString' be a string, "
				"found: %s",
				agg__type_name(&a));
		return 0;
	}
	if (x->args[1] ? !parse_fmt(a.value.v_utf8.str, fmt, &ms)
		       : !parse_iso(a.value.v_utf8.str, &ms)) {
		if (x->args[3]) {
			EV(3, out);
			return 0;
		}
		return dfs_err_set(err, DFS_EINVAL,
				   "$dateFromString: error parsing date string '%s'",
				   a.value.v_utf8.str);
	}
	/* the timezone names the zone of the string's wall-clock time (simplified: applied to
	 * every string, also one with its own offset) */
	if ((rc = tz_offset(x, &tz, ms, true, &off, err)))
		return rc;
	set_date(out, ms - off);
	return 0;
}

int agg__x_eval(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out, struct dfs_err *err)
{
	bson_value_t a, b;
	int rc;

	switch (x->op) {
	case X_LIT:
		*out = x->lit;
		return 0;
	case X_PATH:
		agg__path_get(&c->current, x->comp, x->ncomp, c->ar, out);
		return 0;
	case X_VAR: {
		const bson_value_t *base = NULL;
		bson_value_t now;

		if (!strcmp(x->var, "ROOT")) {
			base = &c->root;
		} else if (!strcmp(x->var, "CURRENT")) {
			base = &c->current;
		} else if (!strcmp(x->var, "REMOVE")) {
			*out = missing_v;
			return 0;
		} else if (!strcmp(x->var, "NOW")) {
			set_date(&now, c->now_ms);
			base = &now;
		} else {
			for (const struct agg__var *v = c->vars; v; v = v->up)
				if (!strcmp(v->name, x->var)) {
					base = &v->v;
					break;
				}
			if (!base)
				return dfs_err_set(err, DFS_EINVAL, "use of undefined variable: %s",
						   x->var);
		}
		agg__path_get(base, x->comp, x->ncomp, c->ar, out);
		return 0;
	}
	case X_OBJ: {
		bson_t d = BSON_INITIALIZER;

		for (int i = 0; i < x->n; i++) {
			if ((rc = agg__x_eval(x->args[i], c, &a, err))) {
				bson_destroy(&d);
				return rc;
			}
			agg__append(&d, x->keys[i], &a);
		}
		agg__arena_take(c->ar, &d, BSON_TYPE_DOCUMENT, out);
		return 0;
	}
	case X_ARR: {
		bson_t d = BSON_INITIALIZER;

		for (int i = 0; i < x->n; i++) {
			if ((rc = agg__x_eval(x->args[i], c, &a, err))) {
				bson_destroy(&d);
				return rc;
			}
			if (a.value_type == BSON_TYPE_EOD)
				set_null(&a);
			append_idx(&d, (uint32_t)i, &a);
		}
		agg__arena_take(c->ar, &d, BSON_TYPE_ARRAY, out);
		return 0;
	}
	case X_ADD:
		return eval_addmul(x, c, false, out, err);
	case X_MUL:
		return eval_addmul(x, c, true, out, err);
	case X_RAND: /* a double in [0, 1) with 53 random bits (glibc's arc4random) */
		out->value_type = BSON_TYPE_DOUBLE;
		out->value.v_double =
			(double)((((uint64_t)arc4random() << 32) | arc4random()) >> 11) * 0x1p-53;
		return 0;
	case X_SUB:
		return eval_subtract(x, c, out, err);
	case X_DIV:
		return eval_divmod(x, c, false, out, err);
	case X_MOD:
		return eval_divmod(x, c, true, out, err);
	case X_ABS:
	case X_CEIL:
	case X_FLOOR:
	case X_SQRT:
	case X_EXP:
	case X_LN:
	case X_LOG10:
		return eval_unary_math(x, c, out, err);
	case X_ROUND:
	case X_TRUNC:
		return eval_round(x, c, out, err);
	case X_POW:
		return eval_pow(x, c, out, err);
	case X_LOG:
		return eval_log(x, c, out, err);
	case X_EQ:
	case X_NE:
	case X_GT:
	case X_GTE:
	case X_LT:
	case X_LTE:
	case X_CMP:
		return eval_cmp(x, c, out, err);
	case X_AND:
	case X_OR:
		for (int i = 0; i < x->n; i++) {
			EV(i, &a);
			if (agg__truthy(&a) == (x->op == X_OR)) {
				set_bool(out, x->op == X_OR);
				return 0;
			}
		}
		set_bool(out, x->op == X_AND);
		return 0;
	case X_NOT:
		EV(0, &a);
		set_bool(out, !agg__truthy(&a));
		return 0;
	case X_COND:
		EV(0, &a);
		return agg__x_eval(x->args[agg__truthy(&a) ? 1 : 2], c, out, err);
	case X_IFNULL:
		for (int i = 0; i < x->n - 1; i++) {
			EV(i, out);
			if (!agg__nullish(out))
				return 0;
		}
		return agg__x_eval(x->args[x->n - 1], c, out, err);
	case X_SWITCH:
		for (int i = 0; i + 1 < x->n; i += 2) {
			EV(i, &a);
			if (agg__truthy(&a))
				return agg__x_eval(x->args[i + 1], c, out, err);
		}
		if (!x->args[x->n - 1])
			return dfs_err_set(err, DFS_EINVAL,
					   "$switch could not find a matching branch for an input, "
					   "and no default was specified");
		return agg__x_eval(x->args[x->n - 1], c, out, err);
	case X_CONCAT:
	case X_SUBSTRB:
	case X_SUBSTRCP:
	case X_TOLOWER:
	case X_TOUPPER:
	case X_STRLENB:
	case X_STRLENCP:
	case X_SPLIT:
	case X_INDEXOFB:
	case X_STRCASECMP:
		return eval_string_ops(x, c, out, err);
	case X_TRIM:
	case X_LTRIM:
	case X_RTRIM:
		return eval_trim(x, c, out, err);
	case X_REGEXMATCH:
		return eval_regex(x, c, out, err);
	case X_YEAR:
	case X_MONTH:
	case X_DOM:
	case X_HOUR:
	case X_MINUTE:
	case X_SECOND:
	case X_MILLI:
	case X_DOW:
	case X_DOY:
	case X_WEEK:
		return eval_datepart(x, c, out, err);
	case X_DATETOSTRING:
	case X_DATEFROMSTRING:
		return eval_dates(x, c, out, err);
	case X_FILTER:
	case X_MAP:
		return eval_filter_map(x, c, out, err);
	case X_REDUCE:
		return eval_reduce(x, c, out, err);
	case X_SLICE:
		return eval_slice(x, c, out, err);
	case X_SIZE:
	case X_ELEMAT:
	case X_CONCATARRAYS:
	case X_IN:
	case X_FIRST:
	case X_LAST:
	case X_ISARRAY:
	case X_RANGE:
	case X_REVERSE:
	case X_INDEXOFARRAY:
	case X_OBJTOARRAY:
		return eval_array_ops(x, c, out, err);
	case X_ARRTOOBJ:
		return eval_arr_to_obj(x, c, out, err);
	case X_MERGEOBJECTS:
		return eval_merge(x, c, out, err);
	case X_GETFIELD:
	case X_SETFIELD:
	case X_UNSETFIELD:
		return eval_field_op(x, c, out, err);
	case X_TYPE:
	case X_TOSTRING:
	case X_TOINT:
	case X_TOLONG:
	case X_TODOUBLE:
	case X_TODECIMAL:
	case X_TOBOOL:
	case X_TODATE:
	case X_TOOID:
	case X_CONVERT:
	case X_ISNUMBER:
		return eval_type_ops(x, c, out, err);
	case X_SUM:
	case X_AVG:
	case X_MIN:
	case X_MAX:
	case X_STDDEVPOP:
		return eval_accum(x, c, out, err);
	case X_META: /* missing for a document without a score, as in MongoDB */
		if (c->score)
			set_dbl(out, *c->score);
		else
			*out = missing_v;
		return 0;
	case X_LET: {
		int nv = x->n - 1;
		struct agg__var *vs = calloc((size_t)nv + 1, sizeof(*vs));
		const struct agg__var *saved = c->vars;

		if (!vs)
			abort();
		for (int i = 0; i < nv; i++) {
			if ((rc = agg__x_eval(x->args[i], c, &b, err))) {
				free(vs);
				return rc;
			}
			vs[i].name = x->keys[i];
			vs[i].v = b;
			vs[i].up = i ? &vs[i - 1] : saved;
		}
		if (nv)
			c->vars = &vs[nv - 1];
		rc = agg__x_eval(x->args[nv], c, out, err);
		c->vars = saved;
		free(vs);
		return rc;
	}
	default:
		return dfs_err_set(err, DFS_EINVAL, "internal: unknown expression node %d", x->op);
	}
}
