/*
 * agg_int.h - private declarations shared by expr.c (aggregation expressions) and agg.c (the
 * pipeline stages): the per-document arena that evaluated values live in, variables, the
 * parsed expression tree and the helpers both files use. Nothing outside query/ includes it.
 *
 * Value convention: an evaluated value is a bson_value_t; BSON_TYPE_EOD means "missing".
 * Strings, documents and arrays of a value point into the input document, into the parsed
 * tree (literals) or into the arena, so a value is valid until the arena is reset.
 */
#ifndef DOCFS_AGG_INT_H
#define DOCFS_AGG_INT_H

#include "query.h"

/* Memory for the values of one evaluation: every block is freed by agg__arena_reset. */
struct agg__arena {
	void **blk; /* Owned: malloc'd blocks */
	size_t n, cap;
};

void agg__arena_init(struct agg__arena *a);
void agg__arena_reset(struct agg__arena *a);
void agg__arena_release(struct agg__arena *a);
void *agg__arena_alloc(struct agg__arena *a, size_t n);
/* Moves the bytes of b into the arena as a document or array value (b is destroyed). */
void agg__arena_take(struct agg__arena *a, bson_t *b, bson_type_t t, bson_value_t *out);

/* A variable binding ($$name); a scope is a linked list searched innermost first. */
struct agg__var {
	const char *name;	   /* Borrowed: from the parsed tree */
	bson_value_t v;		   /* Borrowed: see the value convention */
	const struct agg__var *up; /* the enclosing scope, or NULL */
};

/* What an evaluation sees. */
struct agg__ctx {
	bson_value_t root;    /* $$ROOT (a document value) */
	bson_value_t current; /* $$CURRENT (a document value) */
	int64_t now_ms;	      /* $$NOW */
	const struct agg__var
		*vars;	       /* user variables ($let, $filter, $map, $reduce, $lookup let) */
	struct agg__arena *ar; /* where results are built */
	const double *score;   /* {$meta: "textScore"}: the document's, or NULL (none) */
};

/* Names in scope while parsing, to reject undefined variables at parse time. */
struct agg__scope {
	const char *name;
	const struct agg__scope *up;
};

struct agg__x; /* a parsed expression (expr.c) */

/* Parses an expression value (Borrowed for the call; the tree copies what it keeps). *out
 * Owned, freed by agg__x_free. Errors DFS_EINVAL naming the operator. */
int agg__x_parse(const bson_value_t *v, const struct agg__scope *sc, struct agg__x **out,
		 struct dfs_err *err);
void agg__x_free(struct agg__x *x);
/* Evaluates x; *out missing (EOD) or a value per the convention above. */
int agg__x_eval(const struct agg__x *x, struct agg__ctx *c, bson_value_t *out, struct dfs_err *err);
/* A constant expression's value (literal), or NULL when x is not constant. */
const bson_value_t *agg__x_const(const struct agg__x *x);
/* Is x a plain field path "$a.b"? Then its dotted path (Borrowed from x), else NULL. */
const char *agg__x_field_path(const struct agg__x *x);
/* Is x {$meta: "textScore"} itself? Does it use it anywhere (so the pipeline needs text
 * score metadata)? */
bool agg__x_is_meta(const struct agg__x *x);
bool agg__x_uses_score(const struct agg__x *x);

/* Aggregation comparison: MinKey < missing < undefined/null < the store's order. */
int agg__cmp(const bson_value_t *a, const bson_value_t *b);
bool agg__truthy(const bson_value_t *v);
bool agg__nullish(const bson_value_t *v);
/* MongoDB's $type name of a value ("missing" for EOD). */
const char *agg__type_name(const bson_value_t *v);
/* A document value's view. */
bool agg__doc_view(const bson_value_t *v, bson_t *out);
/* Appends v to b under key unless v is missing. */
void agg__append(bson_t *b, const char *key, const bson_value_t *v);
/* Value of a dotted path (aggregation semantics: arrays map over their elements). */
void agg__path_get(const bson_value_t *base, char **comp, int ncomp, struct agg__arena *ar,
		   bson_value_t *out);

/* Accumulator numeric sums shared by $group and the $sum/$avg expressions. */
struct agg__sum {
	int kind;      /* widest number seen: 0 none, 1 int32, 2 int64, 3 double, 4 decimal */
	int64_t i;     /* exact integer sum while kind <= 2 */
	long double d; /* sum as floating point (always maintained) */
	int64_t n;     /* numbers added */
	bool overflow; /* the int64 sum overflowed: the result is a double */
	bool dec_on;   /* a decimal was seen: dec holds the exact sum from then on */
	bool dec_bad;  /* dec could not stay exact: d (long double) is the result */
	bson_decimal128_t dec; /* the decimal sum (dec.c) */
};
void agg__sum_add(struct agg__sum *s, const bson_value_t *v); /* ignores non-numbers */
void agg__sum_value(const struct agg__sum *s, bson_value_t *out);
void agg__avg_value(const struct agg__sum *s, bson_value_t *out); /* null when n == 0 */
/* Sets out to a number of the kind (as in agg__sum) holding d. */
void agg__num_set(int kind, long double d, bson_value_t *out);
long double agg__num_ld(const bson_value_t *v);
bool agg__is_number(const bson_value_t *v);

#include "dec.h"

/* tz.c: the UTC offset (ms) of the Olson zone name at the UTC instant utc_ms, from the
 * system's TZif files. DFS_EINVAL "unrecognized time zone identifier '<name>'". Thread-safe. */
int agg__tz_offset(const char *name, int64_t utc_ms, int64_t *off_ms, struct dfs_err *err);

/* let.c: the chains of a command's variables for the evaluator and for the parser (NULL
 * when l is NULL or empty); Borrowed from l. */
const struct agg__var *query__let_vars(const struct query_let *l);
const struct agg__scope *query__let_scope(const struct query_let *l);

/* agg.c: sorter runs written to temporary files so far by a (for the spill tests). */
struct query_agg;
int64_t query__agg_spills(const struct query_agg *a);

#endif
