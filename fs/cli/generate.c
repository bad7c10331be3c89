/*
 * generate.c - the document generator behind `docfs generate`: compiles an mgenerate-style
 * template (the template language of the mgeneratejs tool) once into a tree of nodes, then
 * produces documents from it, fast and deterministically for a seed.
 *
 * It does not read or parse template text (the codec does, store_codec_parse_doc), insert
 * the documents anywhere, or implement the whole mgeneratejs / chance.js operator set: only
 * $choose, $number, $date, $oid, $string, $bool, $pick, $array and $inc. Not thread-safe:
 * one struct fs_gen per thread.
 *
 * Design notes
 *  1. A template value is an operator when it is a document with exactly one field whose
 *     name starts with '$', or one of the bare strings "$number", "$oid", "$bool", "$date",
 *     "$string", "$inc" (the operator with its default arguments). Any other value, strings
 *     starting with '$' included, is a literal copied as it is.
 *  2. Documents and arrays are walked recursively; a subtree without an operator compiles to
 *     one literal node, appended as a byte copy.
 *  3. Operator arguments are nodes too. When all the arguments of an operator are literals
 *     they are checked and converted once, at compile time (node->konst), so fs_gen_next
 *     does no parsing on its fast path. Arguments that are templates are evaluated on each
 *     use into the argument node's scratch document and checked then; their errors come out
 *     of fs_gen_next with the same messages and paths.
 *  4. A $pick whose element is out of range produces nothing (mgeneratejs's "$missing"): the
 *     field is left out, or the array element is skipped. g->missing reports it upwards for
 *     exactly one emit; containers clear it.
 *  5. The PRNG is xoshiro256** seeded through splitmix64. Integers are drawn without bias
 *     (rejection), doubles from the top 53 bits. Every draw happens in template order, so a
 *     seed and a template fix the whole stream, including $inc counters (one per template
 *     position, starting at fs_gen_new).
 *  6. Paths in messages are dotted template paths; operator arguments add the operator and
 *     the option name ("tags.$array.of"), so every node of the template has a distinct path.
 *  7. Defaults and limits: $number is an integer in 0..100 (both ends included); with a double
 *     bound it is a double in [min, max). $date is in 1970-01-01..2025-01-01 (fixed, not
 *     "now", so that output depends on the seed only), both ends included, in milliseconds.
 *     $string is 8 characters of [a-z0-9]; $bool is even odds. $choose needs a literal array
 *     of choices (each choice may be a template); its weights and $inc's start and step must
 *     be plain numbers. An $array has at most 1,000,000 elements, a document 16 MiB.
 */
#include "fs_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GEN_DEFAULT_NUMBER_MAX 100
#define GEN_DEFAULT_STRING_LEN 8
#define GEN_DEFAULT_DATE_MAX INT64_C(1735689600000) /* 2025-01-01T00:00:00Z */
#define GEN_MAX_ARRAY 1000000			    /* elements of one $array */

static const char gen_default_pool[] = "abcdefghijklmnopqrstuvwxyz0123456789";

enum gen_kind {
	GEN_LITERAL,  /* a value copied as it is */
	GEN_DOC,      /* a document with at least one operator inside */
	GEN_ARRAY,    /* an array with at least one operator inside */
	GEN_CHOOSE,   /* kids: the choices; cum: weights */
	GEN_NUMBER,   /* arg: min, max */
	GEN_DATE,     /* arg: min, max */
	GEN_OID,      /* no arguments */
	GEN_STRING,   /* arg: length, pool */
	GEN_BOOL,     /* arg: likelihood (percent of true) */
	GEN_PICK,     /* arg: array, element */
	GEN_ARRAY_OF, /* arg: of, number */
	GEN_INC,      /* arg: start, step (literals only) */
};

/* A number taken from a template: int32 and int64 become i, doubles d. */
struct gen_num {
	bool is_double; /* d is the value, else i */
	int64_t i;	/* the integer value */
	double d;	/* the double value */
};

struct gen_node {
	enum gen_kind kind;	 /* what the node produces */
	char *path;		 /* Owned: dotted template path, for messages */
	bson_value_t lit;	 /* GEN_LITERAL: the value, Owned (bson_value_destroy) */
	size_t n;		 /* GEN_DOC, GEN_ARRAY, GEN_CHOOSE: number of kids */
	struct gen_node **kids;	 /* Owned: fields, elements or choices */
	char **keys;		 /* Owned: GEN_DOC field names */
	uint32_t *key_lens;	 /* Owned: GEN_DOC field name lengths */
	double *cum;		 /* Owned: GEN_CHOOSE cumulative weights, NULL when uniform */
	struct gen_node *arg[2]; /* Owned: operator arguments, NULL when not given */
	bool konst;		 /* every argument is a literal: the fields below are set */
	struct gen_num lo, hi;	 /* $number bounds; $date bounds in i; $inc next value and step */
	int64_t count;		 /* $string length, $array number, $pick element */
	double p;		 /* $bool chance of true, 0..1 */
	const char *pool;	 /* $string characters, Borrowed from arg[1] (or static) */
	size_t pool_len;	 /* bytes of pool */
	bool has_scratch;	 /* scratch is initialised */
	bson_t scratch;		 /* where this node is evaluated when it is an argument */
	bson_value_t value;	 /* the last value evaluated into scratch, Borrowed from it */
};

struct fs_gen {
	uint64_t s[4];	       /* xoshiro256** state */
	struct gen_node *root; /* Owned: the template, a GEN_DOC */
	bool missing;	       /* the last emit produced nothing (design note 4) */
	struct dfs_buf tmp;    /* $string scratch */
};

/* ---- the PRNG ---------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* The next 64 random bits (xoshiro256**). */
static inline uint64_t rand_next(struct fs_gen *g)
{
	uint64_t *s = g->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* A uniform integer in [0, span], span inclusive, without modulo bias. */
static uint64_t rand_upto(struct fs_gen *g, uint64_t span)
{
	uint64_t n, threshold, r;

	if (span == UINT64_MAX)
		return rand_next(g);
	n = span + 1;
	threshold = (0 - n) % n; /* 2^64 mod n: the draws below it would favour small results */
	do {
		r = rand_next(g);
	} while (r < threshold);
	return r % n;
}

/* A uniform double in [0, 1). */
static inline double rand_unit(struct fs_gen *g)
{
	return (double)(rand_next(g) >> 11) * 0x1.0p-53;
}

/* ---- values ------------------------------------------------------------------------ */

static const char *type_name(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_DOUBLE:
		return "double";
	case BSON_TYPE_UTF8:
		return "string";
	case BSON_TYPE_DOCUMENT:
		return "document";
	case BSON_TYPE_ARRAY:
		return "array";
	case BSON_TYPE_BINARY:
		return "binary";
	case BSON_TYPE_OID:
		return "objectid";
	case BSON_TYPE_BOOL:
		return "bool";
	case BSON_TYPE_DATE_TIME:
		return "date";
	case BSON_TYPE_NULL:
		return "null";
	case BSON_TYPE_INT32:
		return "int32";
	case BSON_TYPE_INT64:
		return "int64";
	case BSON_TYPE_DECIMAL128:
		return "decimal128";
	default:
		return "another type";
	}
}

/* Reads a number value into *num; false when v is not an int32, int64 or double. */
static bool num_from_value(const bson_value_t *v, struct gen_num *num)
{
	num->is_double = false;
	num->d = 0;
	num->i = 0;
	switch (v->value_type) {
	case BSON_TYPE_INT32:
		num->i = v->value.v_int32;
		return true;
	case BSON_TYPE_INT64:
		num->i = v->value.v_int64;
		return true;
	case BSON_TYPE_DOUBLE:
		num->is_double = true;
		num->d = v->value.v_double;
		return true;
	default:
		return false;
	}
}

/* Reads an integral number (int32, int64, or a double with no fraction) into *out. */
static bool int_from_value(const bson_value_t *v, int64_t *out)
{
	struct gen_num num;

	if (!num_from_value(v, &num))
		return false;
	if (!num.is_double) {
		*out = num.i;
		return true;
	}
	if (!(num.d >= -0x1.0p63 && num.d < 0x1.0p63) || num.d != floor(num.d))
		return false;
	*out = (int64_t)num.d;
	return true;
}

/* Appends an integer as int32 when it fits, else as int64. */
static inline void append_int(bson_t *b, const char *key, int keylen, int64_t x)
{
	if (x >= INT32_MIN && x <= INT32_MAX)
		bson_append_int32(b, key, keylen, (int32_t)x);
	else
		bson_append_int64(b, key, keylen, x);
}

/* ---- ISO-8601 dates ---------------------------------------------------------------- */

/* Reads exactly n decimal digits at *p into *out and moves *p past them. */
static bool read_digits(const char **p, const char *end, int n, int *out)
{
	int v = 0;

	if (end - *p < n)
		return false;
	for (int i = 0; i < n; i++) {
		char c = (*p)[i];

		if (c < '0' || c > '9')
			return false;
		v = v * 10 + (c - '0');
	}
	*p += n;
	*out = v;
	return true;
}

static bool read_char(const char **p, const char *end, char c)
{
	if (*p >= end || **p != c)
		return false;
	(*p)++;
	return true;
}

static bool is_leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (Hinnant's method). */
static int64_t days_from_civil(int y, int m, int d)
{
	int64_t yy = m <= 2 ? y - 1 : y;
	int64_t era = (yy >= 0 ? yy : yy - 399) / 400;
	int64_t yoe = yy - era * 400;
	int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + doe - 719468;
}

/*
 * Parses "YYYY-MM-DD", optionally followed by 'T' (or ' ') "HH:MM[:SS[.fff]]" and a zone
 * ("Z", "+HH:MM", "-HHMM"; none means UTC), into milliseconds since the epoch.
 */
static bool parse_iso_date(const char *s, size_t len, int64_t *ms)
{
	const char *p = s, *end = s + len;
	int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0, off = 0;

	if (!read_digits(&p, end, 4, &y) || !read_char(&p, end, '-') ||
	    !read_digits(&p, end, 2, &mo) || !read_char(&p, end, '-') ||
	    !read_digits(&p, end, 2, &d))
		return false;
	if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
		return false;
	if (p < end && (*p == 'T' || *p == ' ')) {
		p++;
		if (!read_digits(&p, end, 2, &h) || !read_char(&p, end, ':') ||
		    !read_digits(&p, end, 2, &mi))
			return false;
		if (read_char(&p, end, ':') && !read_digits(&p, end, 2, &sec))
			return false;
		if (read_char(&p, end, '.')) {
			int scale = 100, digits = 0;

			while (p < end && *p >= '0' && *p <= '9') {
				frac += (*p - '0') * scale;
				scale /= 10;
				digits++;
				p++;
			}
			if (!digits)
				return false;
		}
		if (h > 23 || mi > 59 || sec > 59)
			return false;
		if (read_char(&p, end, 'Z')) {
			off = 0;
		} else if (p < end && (*p == '+' || *p == '-')) {
			int sign = *p++ == '-' ? -1 : 1, oh, om;

			if (!read_digits(&p, end, 2, &oh))
				return false;
			read_char(&p, end, ':');
			if (!read_digits(&p, end, 2, &om) || oh > 23 || om > 59)
				return false;
			off = sign * (oh * 60 + om);
		}
	}
	if (p != end)
		return false;
	*ms = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi - off) * 60 + sec;
	*ms = *ms * 1000 + frac;
	return true;
}

/* ---- freeing ----------------------------------------------------------------------- */

static void node_free(struct gen_node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++) {
		node_free(n->kids[i]);
		if (n->keys)
			free(n->keys[i]);
	}
	node_free(n->arg[0]);
	node_free(n->arg[1]);
	if (n->kind == GEN_LITERAL)
		bson_value_destroy(&n->lit);
	if (n->has_scratch)
		bson_destroy(&n->scratch);
	free(n->kids);
	free(n->keys);
	free(n->key_lens);
	free(n->cum);
	free(n->path);
	free(n);
}

/* Frees g and its compiled template; NULL is a no-op. */
void fs_gen_free(struct fs_gen *g)
{
	if (!g)
		return;
	node_free(g->root);
	dfs_buf_release(&g->tmp);
	free(g);
}

/* ---- evaluation -------------------------------------------------------------------- */

static int emit(struct fs_gen *g, struct gen_node *n, bson_t *parent, const char *key, int keylen,
		struct dfs_err *err);

/*
 * Evaluates the argument node a. *v is NULL when a is NULL (not given) or produced nothing;
 * else Borrowed: a literal's own value, or a value in a->scratch, valid until a is
 * evaluated again. Errors: those of the argument's template.
 */
static int eval_arg(struct fs_gen *g, struct gen_node *a, const bson_value_t **v,
		    struct dfs_err *err)
{
	bson_iter_t it;
	int rc;

	*v = NULL;
	if (!a)
		return 0;
	if (a->kind == GEN_LITERAL) {
		*v = &a->lit;
		return 0;
	}
	if (!g)
		return 0; /* compile time: only literals are looked at */
	if (a->has_scratch) {
		bson_reinit(&a->scratch);
	} else {
		bson_init(&a->scratch);
		a->has_scratch = true;
	}
	g->missing = false;
	rc = emit(g, a, &a->scratch, "v", 1, err);
	if (rc)
		return rc;
	if (g->missing || !bson_iter_init_find(&it, &a->scratch, "v")) {
		g->missing = false;
		return 0;
	}
	a->value = *bson_iter_value(&it);
	*v = &a->value;
	return 0;
}

/* The arguments of n as numbers (a NULL value keeps the default already in *num). */
static int arg_num(struct fs_gen *g, struct gen_node *n, int i, const char *op, const char *opt,
		   struct gen_num *num, struct dfs_err *err)
{
	const bson_value_t *v;
	int rc = eval_arg(g, n->arg[i], &v, err);

	if (rc || !v)
		return rc;
	if (!num_from_value(v, num))
		return dfs_err_set(err, DFS_EINVAL, "%s %s must be a number, not %s at '%s'", op,
				   opt, type_name(v->value_type), n->path);
	if (num->is_double && !isfinite(num->d))
		return dfs_err_set(err, DFS_EINVAL, "%s %s must be finite at '%s'", op, opt,
				   n->path);
	return 0;
}

/* An integer argument of n in [lo, hi]; a NULL value keeps the default already in *out. */
static int arg_int(struct fs_gen *g, struct gen_node *n, int i, const char *op, const char *opt,
		   int64_t lo, int64_t hi, int64_t *out, struct dfs_err *err)
{
	const bson_value_t *v;
	int rc = eval_arg(g, n->arg[i], &v, err);

	if (rc || !v)
		return rc;
	if (!int_from_value(v, out))
		return dfs_err_set(err, DFS_EINVAL, "%s %s must be an integer, not %s at '%s'", op,
				   opt, type_name(v->value_type), n->path);
	if (*out < lo || *out > hi)
		return dfs_err_set(err, DFS_EINVAL, "%s %s %lld is out of range %lld..%lld at '%s'",
				   op, opt, (long long)*out, (long long)lo, (long long)hi, n->path);
	return 0;
}

/* The bounds of a $number: both integers, or both doubles when either is one. */
static int number_args(struct fs_gen *g, struct gen_node *n, struct gen_num *lo, struct gen_num *hi,
		       struct dfs_err *err)
{
	int rc;

	*lo = (struct gen_num){.i = 0};
	*hi = (struct gen_num){.i = GEN_DEFAULT_NUMBER_MAX};
	if ((rc = arg_num(g, n, 0, "$number", "min", lo, err)) ||
	    (rc = arg_num(g, n, 1, "$number", "max", hi, err)))
		return rc;
	if (lo->is_double || hi->is_double) {
		if (!lo->is_double)
			lo->d = (double)lo->i;
		if (!hi->is_double)
			hi->d = (double)hi->i;
		lo->is_double = hi->is_double = true;
		if (lo->d > hi->d)
			return dfs_err_set(err, DFS_EINVAL,
					   "$number min %g is above max %g at '%s'", lo->d, hi->d,
					   n->path);
	} else if (lo->i > hi->i) {
		return dfs_err_set(err, DFS_EINVAL, "$number min %lld is above max %lld at '%s'",
				   (long long)lo->i, (long long)hi->i, n->path);
	}
	return 0;
}

/* One bound of a $date: a date, an ISO-8601 string, or milliseconds since the epoch. */
static int date_arg(struct fs_gen *g, struct gen_node *n, int i, const char *opt, int64_t *ms,
		    struct dfs_err *err)
{
	const bson_value_t *v;
	int rc = eval_arg(g, n->arg[i], &v, err);

	if (rc || !v)
		return rc;
	if (v->value_type == BSON_TYPE_DATE_TIME) {
		*ms = v->value.v_datetime;
		return 0;
	}
	if (v->value_type == BSON_TYPE_UTF8) {
		if (parse_iso_date(v->value.v_utf8.str, v->value.v_utf8.len, ms))
			return 0;
		return dfs_err_set(err, DFS_EINVAL,
				   "$date %s '%.60s' is not an iso date like 2010-01-01 or "
				   "2014-07-24T10:00:00Z at '%s'",
				   opt, v->value.v_utf8.str, n->path);
	}
	if (int_from_value(v, ms))
		return 0;
	return dfs_err_set(err, DFS_EINVAL, "$date %s must be an iso date string, not %s at '%s'",
			   opt, type_name(v->value_type), n->path);
}

static int date_args(struct fs_gen *g, struct gen_node *n, int64_t *lo, int64_t *hi,
		     struct dfs_err *err)
{
	int rc;

	*lo = 0;
	*hi = GEN_DEFAULT_DATE_MAX;
	if ((rc = date_arg(g, n, 0, "min", lo, err)) || (rc = date_arg(g, n, 1, "max", hi, err)))
		return rc;
	if (*lo > *hi)
		return dfs_err_set(err, DFS_EINVAL, "$date min is after max at '%s'", n->path);
	return 0;
}

static int string_args(struct fs_gen *g, struct gen_node *n, int64_t *len, const char **pool,
		       size_t *pool_len, struct dfs_err *err)
{
	const bson_value_t *v;
	int rc;

	*len = GEN_DEFAULT_STRING_LEN;
	*pool = gen_default_pool;
	*pool_len = sizeof(gen_default_pool) - 1;
	rc = arg_int(g, n, 0, "$string", "length", 0, DFS_MAX_DOC_SIZE, len, err);
	if (rc || (rc = eval_arg(g, n->arg[1], &v, err)) || !v)
		return rc;
	if (v->value_type != BSON_TYPE_UTF8 || v->value.v_utf8.len == 0)
		return dfs_err_set(err, DFS_EINVAL,
				   "$string pool must be a non-empty string at '%s'", n->path);
	for (uint32_t i = 0; i < v->value.v_utf8.len; i++) {
		unsigned char c = (unsigned char)v->value.v_utf8.str[i];

		if (c == 0 || c > 0x7f) /* bytes are drawn one by one: no multi-byte characters */
			return dfs_err_set(err, DFS_EINVAL,
					   "$string pool must be ascii characters at '%s'",
					   n->path);
	}
	*pool = v->value.v_utf8.str;
	*pool_len = v->value.v_utf8.len;
	return 0;
}

static int bool_args(struct fs_gen *g, struct gen_node *n, double *p, struct dfs_err *err)
{
	struct gen_num num = {.i = 50};
	int rc = arg_num(g, n, 0, "$bool", "likelihood", &num, err);

	if (rc)
		return rc;
	*p = (num.is_double ? num.d : (double)num.i) / 100;
	if (*p < 0 || *p > 1)
		return dfs_err_set(err, DFS_EINVAL, "$bool likelihood must be 0..100 at '%s'",
				   n->path);
	return 0;
}

/* The value of $pick: *out Borrowed like eval_arg's, NULL when element is out of range. */
static int pick_value(struct fs_gen *g, struct gen_node *n, const bson_value_t **out,
		      bson_iter_t *it, struct dfs_err *err)
{
	const bson_value_t *v;
	int64_t element = 0;
	int rc;

	*out = NULL;
	rc = n->konst ? 0
		      : arg_int(g, n, 1, "$pick", "element", INT64_MIN, INT64_MAX, &element, err);
	if (rc || (rc = eval_arg(g, n->arg[0], &v, err)))
		return rc;
	if (n->konst)
		element = n->count;
	if (!v && !g)
		return 0; /* compile time, a template array */
	if (!v || v->value_type != BSON_TYPE_ARRAY)
		return dfs_err_set(err, DFS_EINVAL, "$pick array must be an array, not %s at '%s'",
				   v ? type_name(v->value_type) : "nothing", n->path);
	if (element < 0 ||
	    !bson_iter_init_from_data(it, v->value.v_doc.data, v->value.v_doc.data_len))
		return 0;
	while (bson_iter_next(it))
		if (element-- == 0) {
			*out = bson_iter_value(it);
			return 0;
		}
	return 0;
}

static int emit_fields(struct fs_gen *g, struct gen_node *n, bson_t *doc, struct dfs_err *err)
{
	int rc = 0;

	for (size_t i = 0; i < n->n && !rc; i++) {
		g->missing = false;
		rc = emit(g, n->kids[i], doc, n->keys[i], (int)n->key_lens[i], err);
	}
	g->missing = false;
	return rc;
}

static int emit_string(struct fs_gen *g, struct gen_node *n, bson_t *parent, const char *key,
		       int keylen, struct dfs_err *err)
{
	int64_t len = n->count;
	const char *pool = n->pool;
	size_t pool_len = n->pool_len;
	int rc;

	if (!n->konst && (rc = string_args(g, n, &len, &pool, &pool_len, err)))
		return rc;
	dfs_buf_reset(&g->tmp);
	dfs_buf_reserve(&g->tmp, (size_t)len + 1);
	for (int64_t i = 0; i < len; i++)
		g->tmp.data[i] = pool[rand_upto(g, pool_len - 1)];
	g->tmp.data[len] = '\0';
	bson_append_utf8(parent, key, keylen, g->tmp.data, (int)len);
	return 0;
}

static int emit_array_of(struct fs_gen *g, struct gen_node *n, bson_t *parent, const char *key,
			 int keylen, struct dfs_err *err)
{
	int64_t count = n->count;
	bson_t child;
	uint32_t idx = 0;
	char buf[16];
	const char *k;
	int rc = 0;

	if (!n->konst && (rc = arg_int(g, n, 1, "$array", "number", 0, GEN_MAX_ARRAY, &count, err)))
		return rc;
	bson_append_array_begin(parent, key, keylen, &child);
	for (int64_t i = 0; i < count && !rc; i++) {
		size_t kl = bson_uint32_to_string(idx, &k, buf, sizeof(buf));

		g->missing = false;
		rc = emit(g, n->arg[0], &child, k, (int)kl, err);
		if (!g->missing)
			idx++;
		if (!rc && child.len > DFS_MAX_DOC_SIZE)
			rc = dfs_err_set(err, DFS_EFBIG, "$array grew over %d bytes at '%s'",
					 DFS_MAX_DOC_SIZE, n->path);
	}
	bson_append_array_end(parent, &child);
	g->missing = false;
	return rc;
}

/* Index of a weighted choice: the first i whose cumulative weight is above a draw. */
static size_t choose_weighted(struct fs_gen *g, const struct gen_node *n)
{
	double u = rand_unit(g) * n->cum[n->n - 1];
	size_t lo = 0, hi = n->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (n->cum[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	/* rounding can put u at the very top: then take the last choice with a weight */
	while (lo > 0 && (lo == n->n || n->cum[lo] == n->cum[lo - 1]))
		lo--;
	return lo;
}

/*
 * Appends the value node n produces to parent under key (or nothing, setting g->missing).
 * Returns 0, or DFS_EINVAL/DFS_EFBIG for an argument template producing a bad value.
 */
static int emit(struct fs_gen *g, struct gen_node *n, bson_t *parent, const char *key, int keylen,
		struct dfs_err *err)
{
	const bson_value_t *v;
	struct gen_num lo, hi;
	bson_iter_t it;
	bson_oid_t oid;
	bson_t child;
	int64_t a, b;
	double p;
	int rc = 0;

	switch (n->kind) {
	case GEN_LITERAL:
		bson_append_value(parent, key, keylen, &n->lit);
		return 0;
	case GEN_DOC:
		bson_append_document_begin(parent, key, keylen, &child);
		rc = emit_fields(g, n, &child, err);
		bson_append_document_end(parent, &child);
		return rc;
	case GEN_ARRAY: {
		uint32_t idx = 0;
		char buf[16];
		const char *k;

		bson_append_array_begin(parent, key, keylen, &child);
		for (size_t i = 0; i < n->n && !rc; i++) {
			size_t kl = bson_uint32_to_string(idx, &k, buf, sizeof(buf));

			g->missing = false;
			rc = emit(g, n->kids[i], &child, k, (int)kl, err);
			if (!g->missing)
				idx++;
		}
		bson_append_array_end(parent, &child);
		g->missing = false;
		return rc;
	}
	case GEN_CHOOSE: {
		size_t i = n->cum ? choose_weighted(g, n) : (size_t)rand_upto(g, n->n - 1);

		return emit(g, n->kids[i], parent, key, keylen, err);
	}
	case GEN_NUMBER:
		if (n->konst) {
			lo = n->lo;
			hi = n->hi;
		} else if ((rc = number_args(g, n, &lo, &hi, err))) {
			return rc;
		}
		if (lo.is_double) {
			double u = rand_unit(g);
			double d = lo.d * (1 - u) + hi.d * u; /* no overflow on wide ranges */

			bson_append_double(parent, key, keylen,
					   d < hi.d || lo.d == hi.d ? d : lo.d);
		} else {
			uint64_t r = rand_upto(g, (uint64_t)hi.i - (uint64_t)lo.i);

			append_int(parent, key, keylen, (int64_t)((uint64_t)lo.i + r));
		}
		return 0;
	case GEN_DATE:
		if (n->konst) {
			a = n->lo.i;
			b = n->hi.i;
		} else if ((rc = date_args(g, n, &a, &b, err))) {
			return rc;
		}
		bson_append_date_time(
			parent, key, keylen,
			(int64_t)((uint64_t)a + rand_upto(g, (uint64_t)b - (uint64_t)a)));
		return 0;
	case GEN_OID: {
		uint64_t x = rand_next(g), y = rand_next(g);

		memcpy(oid.bytes, &x, 8);
		memcpy(oid.bytes + 8, &y, 4);
		bson_append_oid(parent, key, keylen, &oid);
		return 0;
	}
	case GEN_STRING:
		return emit_string(g, n, parent, key, keylen, err);
	case GEN_BOOL:
		p = n->p;
		if (!n->konst && (rc = bool_args(g, n, &p, err)))
			return rc;
		bson_append_bool(parent, key, keylen,
				 p == 0.5 ? rand_next(g) >> 63 : rand_unit(g) < p);
		return 0;
	case GEN_PICK:
		if ((rc = pick_value(g, n, &v, &it, err)))
			return rc;
		if (v)
			bson_append_value(parent, key, keylen, v);
		else
			g->missing = true;
		return 0;
	case GEN_ARRAY_OF:
		return emit_array_of(g, n, parent, key, keylen, err);
	case GEN_INC:
		if (n->lo.is_double) {
			bson_append_double(parent, key, keylen, n->lo.d);
			n->lo.d += n->hi.d;
		} else {
			append_int(parent, key, keylen, n->lo.i);
			n->lo.i = (int64_t)((uint64_t)n->lo.i + (uint64_t)n->hi.i); /* wraps */
		}
		return 0;
	}
	return dfs_err_set(err, DFS_ECORRUPT, "bad template node at '%s'", n->path);
}

/* See fs_int.h. On error out is left empty (reinitialised), never half-built. */
int fs_gen_next(struct fs_gen *g, bson_t *out, struct dfs_err *err)
{
	int rc = emit_fields(g, g->root, out, err);

	if (!rc && out->len > DFS_MAX_DOC_SIZE)
		rc = dfs_err_set(err, DFS_EFBIG,
				 "generated document is %u bytes, over the %d limit", out->len,
				 DFS_MAX_DOC_SIZE);
	if (rc)
		bson_reinit(out);
	return rc;
}

/* ---- compiling --------------------------------------------------------------------- */

struct gen_cc {
	struct dfs_buf path; /* the dotted path of the value being compiled */
	int depth;	     /* nesting of the value being compiled */
};

/* Appends ".part" (or "part" at the top) to the path; returns the length to restore. */
static size_t path_push(struct gen_cc *cc, const char *part)
{
	size_t old = cc->path.len;

	if (old)
		dfs_buf_putc(&cc->path, '.');
	dfs_buf_puts(&cc->path, part);
	return old;
}

static void path_pop(struct gen_cc *cc, size_t old)
{
	cc->path.len = old;
	if (cc->path.data)
		cc->path.data[old] = '\0';
}

static struct gen_node *node_new(struct gen_cc *cc, enum gen_kind kind)
{
	struct gen_node *n = calloc(1, sizeof(*n));

	if (!n)
		abort(); /* like dfs_buf and libbson */
	n->kind = kind;
	n->path = strdup(cc->path.data ? cc->path.data : "");
	if (!n->path)
		abort();
	return n;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p)
		abort();
	return p;
}

static int compile_value(struct gen_cc *cc, bson_iter_t *it, struct gen_node **out,
			 struct dfs_err *err);

/* Compiles the elements of an array value (at it) into n->kids, path ".i" each. */
static int compile_elements(struct gen_cc *cc, bson_iter_t *it, struct gen_node *n,
			    struct dfs_err *err)
{
	bson_iter_t sub;
	size_t cap = 0;
	char buf[16];
	const char *k;
	int rc = 0;

	if (!bson_iter_recurse(it, &sub))
		return dfs_err_set(err, DFS_EINVAL, "corrupt array at '%s'", n->path);
	while (bson_iter_next(&sub)) {
		size_t old;

		if (n->n == cap) {
			cap = cap ? 2 * cap : 8;
			n->kids = realloc(n->kids, cap * sizeof(*n->kids));
			if (!n->kids)
				abort();
		}
		bson_uint32_to_string((uint32_t)n->n, &k, buf, sizeof(buf));
		old = path_push(cc, k);
		n->kids[n->n] = NULL;
		rc = compile_value(cc, &sub, &n->kids[n->n], err);
		n->n++;
		path_pop(cc, old);
		if (rc)
			return rc;
	}
	return 0;
}

/* True when every kid is a literal (the container can be one literal too). */
static bool all_literal(const struct gen_node *n)
{
	for (size_t i = 0; i < n->n; i++)
		if (n->kids[i]->kind != GEN_LITERAL)
			return false;
	return true;
}

/* Turns n into a literal holding the value at it (a copy). */
static void make_literal(struct gen_node *n, bson_iter_t *it)
{
	for (size_t i = 0; i < n->n; i++) {
		node_free(n->kids[i]);
		if (n->keys)
			free(n->keys[i]);
	}
	free(n->kids);
	free(n->keys);
	free(n->key_lens);
	n->kids = NULL;
	n->keys = NULL;
	n->key_lens = NULL;
	n->n = 0;
	n->kind = GEN_LITERAL;
	bson_value_copy(bson_iter_value(it), &n->lit);
}

/* The fields of a document (at it, or the top-level doc when it is NULL) into n. */
static int compile_fields(struct gen_cc *cc, bson_iter_t *sub, struct gen_node *n,
			  struct dfs_err *err)
{
	size_t cap = 0;
	int rc;

	while (bson_iter_next(sub)) {
		size_t old;

		if (n->n == cap) {
			cap = cap ? 2 * cap : 8;
			n->kids = realloc(n->kids, cap * sizeof(*n->kids));
			n->keys = realloc(n->keys, cap * sizeof(*n->keys));
			n->key_lens = realloc(n->key_lens, cap * sizeof(*n->key_lens));
			if (!n->kids || !n->keys || !n->key_lens)
				abort();
		}
		n->key_lens[n->n] = bson_iter_key_len(sub);
		n->keys[n->n] = strdup(bson_iter_key(sub));
		if (!n->keys[n->n])
			abort();
		n->kids[n->n] = NULL;
		old = path_push(cc, bson_iter_key(sub));
		rc = compile_value(cc, sub, &n->kids[n->n], err);
		n->n++;
		path_pop(cc, old);
		if (rc)
			return rc;
	}
	return 0;
}

/* The operators, their option names (in arg[] order) and their usage for messages. */
struct gen_op {
	const char *name;   /* with the '$' */
	enum gen_kind kind; /* the node it compiles to */
	bool bare;	    /* may be written as the bare string */
	bool positional;    /* [a, b] means {opt[0]: a, opt[1]: b} */
	const char *opt[2]; /* option names, NULL when fewer */
	const char *usage;  /* what a bad argument is told it needs */
};

static const struct gen_op gen_ops[] = {
	{"$choose", GEN_CHOOSE, false, false, {"from", "weights"}, "{from: [...]} or [...]"},
	{"$number", GEN_NUMBER, true, true, {"min", "max"}, "[min, max]"},
	{"$date", GEN_DATE, true, true, {"min", "max"}, "[min, max]"},
	{"$oid", GEN_OID, true, false, {NULL, NULL}, "no arguments"},
	{"$string", GEN_STRING, true, false, {"length", "pool"}, "{length: n}"},
	{"$bool", GEN_BOOL, true, false, {"likelihood", NULL}, "{likelihood: percent}"},
	{"$pick", GEN_PICK, false, false, {"array", "element"}, "{array: [...], element: i}"},
	{"$array", GEN_ARRAY_OF, false, false, {"of", "number"}, "{of: template, number: n}"},
	{"$inc", GEN_INC, true, false, {"start", "step"}, "{start: n, step: n}"},
};

static const struct gen_op *find_op(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(gen_ops) / sizeof(gen_ops[0]); i++)
		if (strlen(gen_ops[i].name) == len && !memcmp(gen_ops[i].name, name, len))
			return &gen_ops[i];
	return NULL;
}

/* $choose: the choices are compiled one by one (only the chosen one runs); weights literal. */
static int compile_choose(struct gen_cc *cc, struct gen_node *n, bson_iter_t *from,
			  bson_iter_t *weights, struct dfs_err *err)
{
	bson_iter_t w;
	size_t old, i = 0;
	double total = 0;
	int rc;

	if (!from || !BSON_ITER_HOLDS_ARRAY(from))
		return dfs_err_set(err, DFS_EINVAL, "$choose needs {from: [...]} or [...] at '%s'",
				   n->path);
	rc = compile_elements(cc, from, n, err);
	if (rc)
		return rc;
	if (n->n == 0)
		return dfs_err_set(err, DFS_EINVAL, "$choose needs at least one choice at '%s'",
				   n->path);
	if (!weights)
		return 0;
	old = path_push(cc, "weights");
	if (!BSON_ITER_HOLDS_ARRAY(weights) || !bson_iter_recurse(weights, &w)) {
		rc = dfs_err_set(err, DFS_EINVAL, "$choose weights must be an array at '%s'",
				 n->path);
		goto done;
	}
	n->cum = xcalloc(n->n, sizeof(*n->cum));
	while (bson_iter_next(&w)) {
		struct gen_num num;
		double x;

		if (i == n->n || !num_from_value(bson_iter_value(&w), &num)) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "$choose needs one number per choice in "
					 "weights at '%s'",
					 n->path);
			goto done;
		}
		x = num.is_double ? num.d : (double)num.i;
		if (!(x >= 0) || !isfinite(x)) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "$choose weights must not be negative at '%s'", n->path);
			goto done;
		}
		total += x;
		n->cum[i++] = total;
	}
	if (i != n->n)
		rc = dfs_err_set(err, DFS_EINVAL,
				 "$choose needs one number per choice in weights at '%s'", n->path);
	else if (!(total > 0) || !isfinite(total))
		rc = dfs_err_set(err, DFS_EINVAL, "$choose weights must not all be zero at '%s'",
				 n->path);
done:
	path_pop(cc, old);
	return rc;
}

/* Checks the arguments of n and, when they are all literals, converts them once. */
static int prepare_op(struct gen_node *n, struct dfs_err *err)
{
	bool konst = (!n->arg[0] || n->arg[0]->kind == GEN_LITERAL) &&
		     (!n->arg[1] || n->arg[1]->kind == GEN_LITERAL);
	bson_iter_t it;
	const bson_value_t *v;
	int rc = 0;

	switch (n->kind) {
	case GEN_NUMBER:
		if (konst)
			rc = number_args(NULL, n, &n->lo, &n->hi, err);
		break;
	case GEN_DATE:
		if (konst)
			rc = date_args(NULL, n, &n->lo.i, &n->hi.i, err);
		break;
	case GEN_STRING:
		if (konst)
			rc = string_args(NULL, n, &n->count, &n->pool, &n->pool_len, err);
		break;
	case GEN_BOOL:
		if (konst)
			rc = bool_args(NULL, n, &n->p, err);
		break;
	case GEN_PICK:
		if (!n->arg[0])
			return dfs_err_set(err, DFS_EINVAL,
					   "$pick needs {array: [...], element: i} "
					   "at '%s'",
					   n->path);
		n->count = 0;
		rc = arg_int(NULL, n, 1, "$pick", "element", INT64_MIN, INT64_MAX, &n->count, err);
		if (!rc && (!n->arg[1] || n->arg[1]->kind == GEN_LITERAL)) {
			n->konst = true; /* element known; the array may still be a template */
			rc = pick_value(NULL, n, &v, &it, err);
		}
		return rc;
	case GEN_ARRAY_OF:
		if (!n->arg[0] || !n->arg[1])
			return dfs_err_set(err, DFS_EINVAL,
					   "$array needs {of: template, number: n} "
					   "at '%s'",
					   n->path);
		konst = n->arg[1]->kind == GEN_LITERAL;
		if (konst)
			rc = arg_int(NULL, n, 1, "$array", "number", 0, GEN_MAX_ARRAY, &n->count,
				     err);
		break;
	case GEN_INC:
		if (!konst)
			return dfs_err_set(err, DFS_EINVAL,
					   "$inc start and step must be plain numbers at '%s'",
					   n->path);
		n->lo = (struct gen_num){.i = 0};
		n->hi = (struct gen_num){.i = 1};
		if ((rc = arg_num(NULL, n, 0, "$inc", "start", &n->lo, err)) ||
		    (rc = arg_num(NULL, n, 1, "$inc", "step", &n->hi, err)))
			return rc;
		if (n->lo.is_double != n->hi.is_double) {
			if (!n->lo.is_double)
				n->lo.d = (double)n->lo.i;
			if (!n->hi.is_double)
				n->hi.d = (double)n->hi.i;
			n->lo.is_double = n->hi.is_double = true;
		}
		return 0;
	default:
		break;
	}
	n->konst = konst && !rc;
	return rc;
}

/*
 * Compiles the operator op at the current path; arg is its argument (NULL when written as a
 * bare string). Errors: DFS_EINVAL naming the operator, the problem and the path.
 */
static int compile_op(struct gen_cc *cc, const struct gen_op *op, bson_iter_t *arg,
		      struct gen_node **out, struct dfs_err *err)
{
	struct gen_node *n = node_new(cc, op->kind);
	bson_iter_t sub, opt0, opt1; /* no array: bson_iter_t is over-aligned */
	bson_iter_t *opt_it[2] = {&opt0, &opt1};
	bool has_opt[2] = {false, false};
	size_t old = path_push(cc, op->name);
	int levels = arg ? 1 : 0; /* {"$op": ...} is a document level, "$op" is not */
	int rc = 0;

	*out = n;
	cc->depth += levels;
	if (cc->depth > DFS_MAX_DEPTH) {
		rc = dfs_err_set(err, DFS_EINVAL, "template nests deeper than %d levels at '%s'",
				 DFS_MAX_DEPTH, n->path);
		goto done;
	}
	if (!arg) {
		/* bare: every option at its default */
	} else if (BSON_ITER_HOLDS_DOCUMENT(arg)) {
		if (!bson_iter_recurse(arg, &sub)) {
			rc = dfs_err_set(err, DFS_EINVAL, "corrupt document at '%s'", n->path);
			goto done;
		}
		while (bson_iter_next(&sub)) {
			const char *key = bson_iter_key(&sub);
			int i = op->opt[0] && !strcmp(key, op->opt[0])	 ? 0
				: op->opt[1] && !strcmp(key, op->opt[1]) ? 1
									 : -1;

			if (i < 0) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "%s has no option '%s' (it takes %s) "
						 "at '%s'",
						 op->name, key, op->usage, n->path);
				goto done;
			}
			*opt_it[i] = sub;
			has_opt[i] = true;
		}
	} else if (BSON_ITER_HOLDS_ARRAY(arg) && op->kind == GEN_CHOOSE) {
		*opt_it[0] = *arg;
		has_opt[0] = true;
	} else if (BSON_ITER_HOLDS_ARRAY(arg) && op->positional) {
		bson_iter_t el;
		int count = 0;

		if (!bson_iter_recurse(arg, &el)) {
			rc = dfs_err_set(err, DFS_EINVAL, "corrupt array at '%s'", n->path);
			goto done;
		}
		while (bson_iter_next(&el)) {
			if (count < 2)
				*opt_it[count] = el;
			count++;
		}
		if (count != 2) {
			rc = dfs_err_set(err, DFS_EINVAL, "%s needs %s at '%s'", op->name,
					 op->usage, n->path);
			goto done;
		}
		has_opt[0] = has_opt[1] = true;
	} else {
		rc = dfs_err_set(err, DFS_EINVAL, "%s needs %s at '%s'", op->name, op->usage,
				 n->path);
		goto done;
	}

	if (op->kind == GEN_CHOOSE) {
		size_t o = cc->path.len;

		if (arg && BSON_ITER_HOLDS_DOCUMENT(arg))
			o = path_push(
				cc, "from"); /* choices at 'x.$choose.from.i', else 'x.$choose.i' */
		rc = compile_choose(cc, n, has_opt[0] ? opt_it[0] : NULL,
				    has_opt[1] ? opt_it[1] : NULL, err);
		path_pop(cc, o);
		goto done;
	}
	for (int i = 0; i < 2 && !rc; i++) {
		size_t o;

		if (!has_opt[i])
			continue;
		o = path_push(cc, op->opt[i]);
		rc = compile_value(cc, opt_it[i], &n->arg[i], err);
		path_pop(cc, o);
	}
	if (!rc)
		rc = prepare_op(n, err);
done:
	cc->depth -= levels;
	path_pop(cc, old);
	return rc;
}

/*
 * Compiles the template value at it into *out (set even on failure, so the caller frees it).
 * Errors: DFS_EINVAL for unknown operators, bad arguments, nesting over DFS_MAX_DEPTH.
 */
static int compile_value(struct gen_cc *cc, bson_iter_t *it, struct gen_node **out,
			 struct dfs_err *err)
{
	struct gen_node *n;
	const struct gen_op *op;
	bson_iter_t sub;
	int rc = 0;

	*out = NULL;
	if (BSON_ITER_HOLDS_UTF8(it)) {
		uint32_t len;
		const char *s = bson_iter_utf8(it, &len);

		op = s[0] == '$' ? find_op(s, len) : NULL;
		if (op && op->bare)
			return compile_op(cc, op, NULL, out, err);
	}
	if (!BSON_ITER_HOLDS_DOCUMENT(it) && !BSON_ITER_HOLDS_ARRAY(it)) {
		n = node_new(cc, GEN_LITERAL);
		bson_value_copy(bson_iter_value(it), &n->lit);
		*out = n;
		return 0;
	}
	if (!bson_iter_recurse(it, &sub))
		return dfs_err_set(err, DFS_EINVAL, "corrupt document at '%s'", cc->path.data);
	if (BSON_ITER_HOLDS_DOCUMENT(it)) {
		bson_iter_t probe = sub;

		if (bson_iter_next(&probe) && bson_iter_key(&probe)[0] == '$') {
			const char *name = bson_iter_key(&probe);
			bson_iter_t val = probe;

			if (!bson_iter_next(&probe)) {
				op = find_op(name, strlen(name));
				if (!op)
					return dfs_err_set(err, DFS_EINVAL,
							   "unknown template operator '%s' at '%s'",
							   name,
							   cc->path.data ? cc->path.data : "");
				return compile_op(cc, op, &val, out, err);
			}
		}
	}
	if (++cc->depth > DFS_MAX_DEPTH) {
		cc->depth--;
		return dfs_err_set(err, DFS_EINVAL, "template nests deeper than %d levels at '%s'",
				   DFS_MAX_DEPTH, cc->path.data);
	}
	if (BSON_ITER_HOLDS_DOCUMENT(it)) {
		n = node_new(cc, GEN_DOC);
		*out = n;
		rc = compile_fields(cc, &sub, n, err);
	} else {
		n = node_new(cc, GEN_ARRAY);
		*out = n;
		rc = compile_elements(cc, it, n, err);
	}
	cc->depth--;
	if (!rc && all_literal(n))
		make_literal(n, it);
	return rc;
}

/* See fs_int.h. The whole template is checked here; only template arguments fail later. */
int fs_gen_new(const bson_t *tmpl, uint64_t seed, struct fs_gen **out, struct dfs_err *err)
{
	struct gen_cc cc = {.depth = 1};
	struct fs_gen *g = xcalloc(1, sizeof(*g));
	bson_iter_t it;
	int rc = 0;

	*out = NULL;
	for (int i = 0; i < 4; i++)
		g->s[i] = splitmix64(&seed);
	dfs_buf_init(&g->tmp);
	dfs_buf_init(&cc.path);
	dfs_buf_reserve(&cc.path, 64);
	dfs_buf_reset(&cc.path); /* "" rather than no string at all */
	g->root = node_new(&cc, GEN_DOC);
	if (!bson_iter_init(&it, tmpl)) {
		rc = dfs_err_set(err, DFS_EINVAL, "template is not valid bson");
		goto done;
	}
	if (bson_count_keys(tmpl) == 1 && bson_iter_next(&it) && bson_iter_key(&it)[0] == '$') {
		rc = dfs_err_set(err, DFS_EINVAL,
				 "template must be a document of fields, not the operator '%s'",
				 bson_iter_key(&it));
		goto done;
	}
	bson_iter_init(&it, tmpl);
	rc = compile_fields(&cc, &it, g->root, err);
done:
	dfs_buf_release(&cc.path);
	if (rc) {
		fs_gen_free(g);
		return rc;
	}
	*out = g;
	return 0;
}
