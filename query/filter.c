/*
 * filter.c - MongoDB filter documents to a validated, normalized expression tree
 * (query_filter_parse), its destruction, and its description in explain's "parsedQuery"
 * shape (query_filter_describe).
 *
 * Parsing does all the work that does not depend on a document: paths are split once,
 * regexes compiled once (PCRE2, UTF mode), $in lists sorted for binary search, $type names
 * resolved to bit sets, $mod operands truncated to integers, negations turned into QK_NOT
 * over the positive form ($ne, $nin, $exists: false, $not), $all into $and, nested $and/$or
 * flattened and one-child $and/$or collapsed, and the children of $and/$or sorted in the
 * order MongoDB's canonicalizer uses. It does not evaluate anything (match.c does).
 */
#include "query_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse context: the prefix of paths inside $elemMatch, for messages. */
struct pctx {
	const char *prefix; /* "" or "a." */
	int depth;	    /* nesting of operators, bounded like documents are */
	const char *under;  /* "$or", "$nor", "$elemMatch" or NULL: where a $text would be */
	int *ntext;	    /* $text operators seen in the whole filter */
};

#define MAX_PARSE_DEPTH (2 * DFS_MAX_DEPTH)

static int parse_doc(struct pctx *pc, const bson_iter_t *doc, struct query_expr **out,
		     struct dfs_err *err);
static int parse_ops(struct pctx *pc, const char *path, const bson_iter_t *opdoc,
		     struct query_expr **out, struct dfs_err *err);
static void xnode_free(struct query__xnode *x);

/* ---- small helpers ----------------------------------------------------------------- */

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "docfs: out of memory\n");
		abort();
	}
	return p;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = xcalloc(n, 1);

	memcpy(p, s, n);
	return p;
}

/* Fills p from the dotted path s (s == NULL: the empty path of $elemMatch's value form). */
static void path_init(struct query__path *p, const char *s)
{
	size_t len, i;
	int n = 1, k = 0;
	char *start;

	if (!s) {
		p->n = 0;
		p->comp = NULL;
		p->buf = NULL;
		p->dotted = xstrdup("");
		return;
	}
	len = strlen(s);
	for (i = 0; i < len; i++)
		n += s[i] == '.';
	p->n = n;
	p->comp = xcalloc((size_t)n, sizeof(*p->comp));
	p->buf = xstrdup(s);
	p->dotted = xstrdup(s);
	start = p->buf;
	for (i = 0; i <= len; i++) {
		if (p->buf[i] != '.' && p->buf[i] != '\0')
			continue;
		p->buf[i] = '\0';
		p->comp[k].s = start;
		p->comp[k].len = (uint32_t)(p->buf + i - start);
		p->comp[k].digits = p->comp[k].len > 0;
		for (const char *c = start; *c; c++)
			if (*c < '0' || *c > '9')
				p->comp[k].digits = false;
		k++;
		start = p->buf + i + 1;
	}
}

static void path_release(struct query__path *p)
{
	free(p->comp);
	free(p->buf);
	free(p->dotted);
}

static struct query_expr *node_new(int kind, const char *path)
{
	struct query_expr *e = xcalloc(1, sizeof(*e));

	e->kind = kind;
	path_init(&e->path, path);
	return e;
}

static void node_add(struct query_expr *parent, struct query_expr *kid)
{
	struct query_expr **k = realloc(parent->kids, sizeof(*k) * (size_t)(parent->nkids + 1));

	if (!k) {
		fprintf(stderr, "docfs: out of memory\n");
		abort();
	}
	parent->kids = k;
	parent->kids[parent->nkids++] = kid;
}

static void regex_free(struct query__regex *re)
{
	if (!re)
		return;
	pcre2_code_free(re->code);
	free(re->pattern);
	free(re->options);
	free(re);
}

/* The path as shown in messages (with the $elemMatch prefix); buf of 160 bytes. */
static const char *where(const struct pctx *pc, const char *path, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s", pc->prefix, path ? path : "");
	return buf;
}

#define WHERE(path) where(pc, (path), wbuf, sizeof(wbuf))

static bool is_number(bson_type_t t)
{
	return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
	       t == BSON_TYPE_DECIMAL128;
}

/* A number as a double (decimal128 through its string form, approximately). */
static double num_as_double(const bson_value_t *v)
{
	char s[BSON_DECIMAL128_STRING];

	switch (v->value_type) {
	case BSON_TYPE_INT32:
		return v->value.v_int32;
	case BSON_TYPE_INT64:
		return (double)v->value.v_int64;
	case BSON_TYPE_DOUBLE:
		return v->value.v_double;
	case BSON_TYPE_DECIMAL128:
		bson_decimal128_to_string(&v->value.v_decimal128, s);
		if (!strcmp(s, "NaN") || !strcmp(s, "-NaN"))
			return NAN;
		if (!strcmp(s, "Infinity"))
			return INFINITY;
		if (!strcmp(s, "-Infinity"))
			return -INFINITY;
		return strtod(s, NULL);
	default:
		return 0;
	}
}

/*
 * A number truncated toward zero to int64 (*ok false for NaN, infinities and values out
 * of the int64 range), as MongoDB truncates $mod and $size operands.
 */
static int64_t num_truncate(const bson_value_t *v, bool *ok)
{
	double d;

	*ok = true;
	if (v->value_type == BSON_TYPE_INT32)
		return v->value.v_int32;
	if (v->value_type == BSON_TYPE_INT64)
		return v->value.v_int64;
	d = num_as_double(v);
	if (isnan(d) || d >= 9223372036854775808.0 || d < -9223372036854775808.0) {
		*ok = false;
		return 0;
	}
	return (int64_t)trunc(d);
}

/* Does the document (the iterator's sub-document) start with a '$' key that makes it an
 * operator document (DBRef documents {$ref, $id} are values)? */
static bool is_operator_doc(const bson_iter_t *it)
{
	bson_iter_t sub;
	const char *k;

	if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &sub) || !bson_iter_next(&sub))
		return false;
	k = bson_iter_key(&sub);
	if (k[0] != '$')
		return false;
	if (!strcmp(k, "$ref")) {
		while (bson_iter_next(&sub))
			if (!strcmp(bson_iter_key(&sub), "$id"))
				return false;
	}
	return true;
}

/* ---- regexes ----------------------------------------------------------------------- */

/*
 * Compiles pattern with MongoDB's flags (i m s x, and u accepted). *out Owned. Errors:
 * "invalid flag 'z' in $options at 'a'", "$regex has an invalid pattern at 'a': <pcre>".
 */
static int regex_compile(struct pctx *pc, const char *path, const char *pattern, size_t plen,
			 const char *options, struct query__regex **out, struct dfs_err *err)
{
	uint32_t flags = PCRE2_UTF;
	PCRE2_UCHAR msg[160];
	PCRE2_SIZE off;
	char wbuf[160];
	int code;
	struct query__regex *re;

	*out = NULL;
	for (const char *o = options; *o; o++) {
		switch (*o) {
		case 'i':
			flags |= PCRE2_CASELESS;
			break;
		case 'm':
			flags |= PCRE2_MULTILINE;
			break;
		case 's':
			flags |= PCRE2_DOTALL;
			break;
		case 'x':
			flags |= PCRE2_EXTENDED;
			break;
		case 'u':
			flags |= PCRE2_UCP;
			break;
		default:
			return dfs_err_set(err, DFS_EINVAL, "invalid flag '%c' in $options at '%s'",
					   *o, WHERE(path));
		}
	}
	if (strlen(pattern) != plen)
		return dfs_err_set(err, DFS_EINVAL, "$regex must not contain a null byte at '%s'",
				   WHERE(path));
	re = xcalloc(1, sizeof(*re));
	re->code = pcre2_compile((PCRE2_SPTR)pattern, plen, flags, &code, &off, NULL);
	if (!re->code) {
		pcre2_get_error_message(code, msg, sizeof(msg));
		free(re);
		return dfs_err_set(err, DFS_EINVAL, "$regex has an invalid pattern at '%s': %s",
				   WHERE(path), (const char *)msg);
	}
	(void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE); /* optional speed-up */
	re->pattern = xstrdup(pattern);
	re->options = xstrdup(options);
	*out = re;
	return 0;
}

/* Compiles a BSON regex value. */
static int regex_from_value(struct pctx *pc, const char *path, const bson_value_t *v,
			    struct query__regex **out, struct dfs_err *err)
{
	return regex_compile(pc, path, v->value.v_regex.regex, strlen(v->value.v_regex.regex),
			     v->value.v_regex.options ? v->value.v_regex.options : "", out, err);
}

/* ---- leaf operators ---------------------------------------------------------------- */

static struct query_expr *leaf_value(int kind, const char *path, const bson_value_t *v)
{
	struct query_expr *e = node_new(kind, path);

	bson_value_copy(v, &e->val);
	return e;
}

static struct query_expr *negate(struct query_expr *e)
{
	struct query_expr *n = node_new(QK_NOT, NULL);

	node_add(n, e);
	return n;
}

static int value_cmp_qsort(const void *a, const void *b)
{
	return store_value_compare(a, b);
}

/* Sorts e->vals in compare order and drops duplicates (equal in compare order, e.g. 1 and
 * 1.0). */
static void sort_vals(struct query_expr *e)
{
	int k, n;

	qsort(e->vals, (size_t)e->nvals, sizeof(*e->vals), value_cmp_qsort);
	for (k = 1, n = e->nvals ? 1 : 0; k < e->nvals; k++) {
		if (store_value_compare(&e->vals[n - 1], &e->vals[k]) == 0)
			bson_value_destroy(&e->vals[k]);
		else
			e->vals[n++] = e->vals[k];
	}
	e->nvals = n;
}

/* $in / $nin operand: equalities (sorted, deduplicated) and regexes. */
static int parse_in(struct pctx *pc, const char *op, const char *path, const bson_iter_t *it,
		    struct query_expr **out, struct dfs_err *err)
{
	struct query_expr *e;
	bson_iter_t arr;
	char wbuf[160];
	int n = 0, rc, k;

	if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &arr))
		return dfs_err_set(err, DFS_EINVAL, "%s needs an array at '%s'", op, WHERE(path));
	e = node_new(QK_IN, path);
	while (bson_iter_next(&arr))
		n++;
	e->vals = xcalloc((size_t)n, sizeof(*e->vals));
	e->res = xcalloc((size_t)n, sizeof(*e->res));
	bson_iter_recurse(it, &arr);
	while (bson_iter_next(&arr)) {
		const bson_value_t *v = bson_iter_value(&arr);

		if (v->value_type == BSON_TYPE_REGEX) {
			rc = regex_from_value(pc, path, v, &e->res[e->nres], err);
			if (rc) {
				query_expr_free(e);
				return rc;
			}
			e->nres++;
			continue;
		}
		if (is_operator_doc(&arr)) {
			query_expr_free(e);
			return dfs_err_set(err, DFS_EINVAL, "%s cannot contain an operator at '%s'",
					   op, WHERE(path));
		}
		if (v->value_type == BSON_TYPE_UNDEFINED) {
			query_expr_free(e);
			return dfs_err_set(err, DFS_EINVAL,
					   "%s cannot compare to undefined at '%s'", op,
					   WHERE(path));
		}
		if (v->value_type == BSON_TYPE_NULL)
			e->has_null = true;
		bson_value_copy(v, &e->vals[e->nvals++]);
	}
	sort_vals(e);
	(void)k;
	*out = e;
	return 0;
}

/* The BSON type codes $type knows, by alias. */
static const struct {
	const char *name;
	int code;
} type_names[] = {
	{"double", 1},	    {"string", 2},     {"object", 3},
	{"array", 4},	    {"binData", 5},    {"undefined", 6},
	{"objectId", 7},    {"bool", 8},       {"date", 9},
	{"null", 10},	    {"regex", 11},     {"dbPointer", 12},
	{"javascript", 13}, {"symbol", 14},    {"javascriptWithScope", 15},
	{"int", 16},	    {"timestamp", 17}, {"long", 18},
	{"decimal", 19},    {"minKey", -1},    {"maxKey", 127},
};

/* Adds one $type entry (a name or a number) to e. */
static int type_add(struct pctx *pc, const char *path, struct query_expr *e, const bson_value_t *v,
		    struct dfs_err *err)
{
	char wbuf[160];
	int64_t code;
	bool ok;
	size_t i;

	if (v->value_type == BSON_TYPE_UTF8) {
		if (!strcmp(v->value.v_utf8.str, "number")) {
			e->type_number = true;
			return 0;
		}
		for (i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
			if (!strcmp(v->value.v_utf8.str, type_names[i].name))
				break;
		if (i == sizeof(type_names) / sizeof(type_names[0]))
			return dfs_err_set(err, DFS_EINVAL,
					   "unknown type name '%s' for $type at '%s'",
					   v->value.v_utf8.str, WHERE(path));
		code = type_names[i].code;
	} else if (is_number(v->value_type)) {
		code = num_truncate(v, &ok);
		if (!ok || num_as_double(v) != (double)code)
			return dfs_err_set(err, DFS_EINVAL, "$type needs a whole number at '%s'",
					   WHERE(path));
		if (!(code == -1 || code == 127 || (code >= 1 && code <= 19)))
			return dfs_err_set(err, DFS_EINVAL,
					   "invalid type code %lld for $type at '%s'",
					   (long long)code, WHERE(path));
	} else {
		return dfs_err_set(err, DFS_EINVAL, "$type needs a type name or number at '%s'",
				   WHERE(path));
	}
	if (code == -1)
		e->type_minkey = true;
	else if (code == 127)
		e->type_maxkey = true;
	else
		e->types_lo |= UINT32_C(1) << code;
	return 0;
}

static int parse_type(struct pctx *pc, const char *path, const bson_iter_t *it,
		      struct query_expr **out, struct dfs_err *err)
{
	struct query_expr *e = node_new(QK_TYPE, path);
	char wbuf[160];
	bson_iter_t arr;
	int rc = 0, n = 0;

	bson_value_copy(bson_iter_value((bson_iter_t *)it), &e->types_orig);
	if (BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &arr)) {
		while (!rc && bson_iter_next(&arr)) {
			rc = type_add(pc, path, e, bson_iter_value(&arr), err);
			n++;
		}
		if (!rc && n == 0)
			rc = dfs_err_set(err, DFS_EINVAL, "$type needs at least one type at '%s'",
					 WHERE(path));
	} else {
		rc = type_add(pc, path, e, bson_iter_value((bson_iter_t *)it), err);
	}
	if (rc) {
		query_expr_free(e);
		return rc;
	}
	*out = e;
	return 0;
}

static int parse_mod(struct pctx *pc, const char *path, const bson_iter_t *it,
		     struct query_expr **out, struct dfs_err *err)
{
	bson_value_t v[2];
	bson_iter_t arr;
	char wbuf[160];
	int64_t x[2];
	int n = 0;
	bool ok;

	if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &arr))
		return dfs_err_set(err, DFS_EINVAL,
				   "$mod needs an array [divisor, remainder] at '%s'", WHERE(path));
	while (bson_iter_next(&arr)) {
		if (n < 2)
			v[n] = *bson_iter_value(&arr);
		n++;
	}
	if (n != 2)
		return dfs_err_set(err, DFS_EINVAL,
				   "$mod needs an array [divisor, remainder] of 2 elements at '%s'",
				   WHERE(path));
	for (n = 0; n < 2; n++) {
		if (!is_number(v[n].value_type))
			return dfs_err_set(err, DFS_EINVAL, "$mod needs numbers at '%s'",
					   WHERE(path));
		x[n] = num_truncate(&v[n], &ok);
		if (!ok)
			return dfs_err_set(
				err, DFS_EINVAL,
				"$mod needs finite numbers within the 64-bit range at '%s'",
				WHERE(path));
	}
	if (x[0] == 0)
		return dfs_err_set(err, DFS_EINVAL, "$mod divisor cannot be 0 at '%s'",
				   WHERE(path));
	*out = node_new(QK_MOD, path);
	(*out)->mod_div = x[0];
	(*out)->mod_rem = x[1];
	return 0;
}

static int parse_size(struct pctx *pc, const char *path, const bson_iter_t *it,
		      struct query_expr **out, struct dfs_err *err)
{
	const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
	char wbuf[160];
	int64_t n;
	bool ok;

	if (!is_number(v->value_type))
		return dfs_err_set(err, DFS_EINVAL, "$size needs a whole number at '%s'",
				   WHERE(path));
	n = num_truncate(v, &ok);
	if (!ok || num_as_double(v) != (double)n)
		return dfs_err_set(err, DFS_EINVAL, "$size needs a whole number at '%s'",
				   WHERE(path));
	if (n < 0)
		return dfs_err_set(err, DFS_EINVAL, "$size needs a non-negative number at '%s'",
				   WHERE(path));
	*out = node_new(QK_SIZE, path);
	(*out)->size = n;
	return 0;
}

/* The implicit form of a field: {path: value}, a regex value, or an operator document. */
static int parse_field(struct pctx *pc, const char *path, const bson_iter_t *it,
		       struct query_expr **out, struct dfs_err *err)
{
	const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
	struct query__regex *re;
	char wbuf[160];
	int rc;

	if (is_operator_doc(it))
		return parse_ops(pc, path, it, out, err);
	if (v->value_type == BSON_TYPE_REGEX) {
		rc = regex_from_value(pc, path, v, &re, err);
		if (rc)
			return rc;
		*out = node_new(QK_REGEX, path);
		(*out)->res = xcalloc(1, sizeof(*(*out)->res));
		(*out)->res[0] = re;
		(*out)->nres = 1;
		return 0;
	}
	if (v->value_type == BSON_TYPE_UNDEFINED)
		return dfs_err_set(err, DFS_EINVAL, "cannot compare to undefined at '%s'",
				   WHERE(path));
	*out = leaf_value(QK_EQ, path, v);
	return 0;
}

/* $all: [v, ...] is $and of equalities (regexes match); [{$elemMatch}, ...] of $elemMatch. */
static int parse_all(struct pctx *pc, const char *path, const bson_iter_t *it,
		     struct query_expr **out, struct dfs_err *err)
{
	struct query_expr *e, *kid;
	bson_iter_t arr, sub;
	char wbuf[160];
	int rc = 0, n = 0;
	bool em = false;

	if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &arr))
		return dfs_err_set(err, DFS_EINVAL, "$all needs an array at '%s'", WHERE(path));
	e = node_new(QK_AND, NULL);
	while (!rc && bson_iter_next(&arr)) {
		bool this_em = false;

		if (is_operator_doc(&arr)) {
			bson_iter_recurse(&arr, &sub);
			bson_iter_next(&sub);
			this_em = !strcmp(bson_iter_key(&sub), "$elemMatch");
			if (!this_em) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "$all cannot contain operators other than "
						 "$elemMatch at '%s'",
						 WHERE(path));
				break;
			}
		}
		if (n > 0 && this_em != em) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "$all cannot mix $elemMatch and values at '%s'",
					 WHERE(path));
			break;
		}
		em = this_em;
		n++;
		rc = em ? parse_ops(pc, path, &arr, &kid, err)
			: parse_field(pc, path, &arr, &kid, err);
		if (!rc)
			node_add(e, kid);
	}
	if (rc) {
		query_expr_free(e);
		return rc;
	}
	if (n == 0) {
		e->kind = QK_NEVER; /* $all: [] matches nothing */
		path_release(&e->path);
		path_init(&e->path, path);
	}
	*out = e;
	return 0;
}

/* $elemMatch: the query form {a: .., $or: ..} or the operator form {$gt: .., $lt: ..}. */
static int parse_elem_match(struct pctx *pc, const char *path, const bson_iter_t *it,
			    struct query_expr **out, struct dfs_err *err)
{
	static const char *const query_form_ops[] = {
		"$and",	 "$or",	     "$nor",	    "$expr",	    "$where",
		"$text", "$comment", "$alwaysTrue", "$alwaysFalse", "$jsonSchema"};
	struct query_expr *e, *kid = NULL;
	char wbuf[160], prefix[200];
	bool value_form = false;
	bson_iter_t sub;
	struct pctx inner;
	size_t i;
	int rc;

	if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &sub))
		return dfs_err_set(err, DFS_EINVAL, "$elemMatch needs an object at '%s'",
				   WHERE(path));
	if (bson_iter_next(&sub) && bson_iter_key(&sub)[0] == '$') {
		value_form = true;
		for (i = 0; i < sizeof(query_form_ops) / sizeof(query_form_ops[0]); i++)
			if (!strcmp(bson_iter_key(&sub), query_form_ops[i]))
				value_form = false;
	}
	if (value_form) {
		snprintf(prefix, sizeof(prefix), "%s%s", pc->prefix, path ? path : "");
		inner = *pc;
		inner.prefix = prefix;
		inner.under = "$elemMatch";
		rc = parse_ops(&inner, NULL, it, &kid, err);
		if (rc)
			return rc;
		e = node_new(QK_ELEM_VAL, path);
		if (kid->kind == QK_AND && kid->path.n == 0 && kid->nkids > 0) {
			e->kids = kid->kids;
			e->nkids = kid->nkids;
			kid->kids = NULL;
			kid->nkids = 0;
			query_expr_free(kid);
		} else {
			node_add(e, kid);
		}
		*out = e;
		return 0;
	}
	snprintf(prefix, sizeof(prefix), "%s%s.", pc->prefix, path ? path : "");
	inner = *pc;
	inner.prefix = prefix;
	inner.under = "$elemMatch";
	rc = parse_doc(&inner, it, &kid, err);
	if (rc)
		return rc;
	e = node_new(QK_ELEM_OBJ, path);
	node_add(e, kid);
	*out = e;
	return 0;
}

/* $not: a regex or a non-empty operator document. */
static int parse_not(struct pctx *pc, const char *path, const bson_iter_t *it,
		     struct query_expr **out, struct dfs_err *err)
{
	const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
	struct query_expr *kid;
	char wbuf[160];
	bson_iter_t sub;
	int rc;

	if (v->value_type == BSON_TYPE_REGEX) {
		rc = parse_field(pc, path, it, &kid, err);
	} else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
		if (!bson_iter_recurse(it, &sub) || !bson_iter_next(&sub))
			return dfs_err_set(err, DFS_EINVAL, "$not cannot be empty at '%s'",
					   WHERE(path));
		rc = parse_ops(pc, path, it, &kid, err);
	} else {
		return dfs_err_set(err, DFS_EINVAL, "$not needs a regex or a document at '%s'",
				   WHERE(path));
	}
	if (rc)
		return rc;
	*out = negate(kid);
	return 0;
}

/*
 * An operator document {$gt: 1, $lt: 5} for path (NULL under $elemMatch's value form):
 * one node, or $and of several. $regex and $options are one operator.
 */
static int parse_ops(struct pctx *pc, const char *path, const bson_iter_t *opdoc,
		     struct query_expr **out, struct dfs_err *err)
{
	static const char *const unsupported[] = {
		"$near",	"$nearSphere", "$geoWithin",	"$geoIntersects", "$within",
		"$box",		"$center",     "$centerSphere", "$polygon",	  "$maxDistance",
		"$minDistance", "$bitsAllSet", "$bitsAllClear", "$bitsAnySet",	  "$bitsAnyClear",
		"$geometry",	"$where",      "$text",		"$jsonSchema",	  "$expr",
	};
	struct query_expr *all = node_new(QK_AND, NULL), *kid = NULL;
	const char *regex_pat = NULL, *regex_opts = NULL, *opt_str = NULL;
	bool seen_regex = false, seen_options = false;
	size_t regex_len = 0;
	char wbuf[160];
	bson_iter_t it;
	int rc = 0;
	size_t i;

	if (++pc->depth > MAX_PARSE_DEPTH) {
		rc = dfs_err_set(err, DFS_EINVAL, "filter nested too deeply at '%s'", WHERE(path));
		goto done;
	}
	bson_iter_recurse(opdoc, &it);
	while (bson_iter_next(&it)) {
		const char *op = bson_iter_key(&it);
		const bson_value_t *v = bson_iter_value(&it);

		kid = NULL;
		if (!strcmp(op, "$eq") || !strcmp(op, "$ne") || !strcmp(op, "$gt") ||
		    !strcmp(op, "$gte") || !strcmp(op, "$lt") || !strcmp(op, "$lte")) {
			int kind = op[1] == 'e'	  ? QK_EQ
				   : op[1] == 'n' ? QK_EQ
				   : op[1] == 'g' ? (op[3] ? QK_GTE : QK_GT)
						  : (op[3] ? QK_LTE : QK_LT);

			if (v->value_type == BSON_TYPE_UNDEFINED) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "%s cannot compare to undefined at '%s'", op,
						 WHERE(path));
				goto done;
			}
			if (!strcmp(op, "$ne") && v->value_type == BSON_TYPE_REGEX) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "$ne cannot take a regex at '%s' (use $not)",
						 WHERE(path));
				goto done;
			}
			kid = leaf_value(kind, path, v);
			if (op[1] == 'n')
				kid = negate(kid);
		} else if (!strcmp(op, "$in") || !strcmp(op, "$nin")) {
			rc = parse_in(pc, op, path, &it, &kid, err);
			if (!rc && op[1] == 'n')
				kid = negate(kid);
		} else if (!strcmp(op, "$exists")) {
			kid = node_new(QK_EXISTS, path);
			if (!bson_iter_as_bool(&it))
				kid = negate(kid);
		} else if (!strcmp(op, "$type")) {
			rc = parse_type(pc, path, &it, &kid, err);
		} else if (!strcmp(op, "$mod")) {
			rc = parse_mod(pc, path, &it, &kid, err);
		} else if (!strcmp(op, "$size")) {
			rc = parse_size(pc, path, &it, &kid, err);
		} else if (!strcmp(op, "$all")) {
			rc = parse_all(pc, path, &it, &kid, err);
		} else if (!strcmp(op, "$elemMatch")) {
			rc = parse_elem_match(pc, path, &it, &kid, err);
		} else if (!strcmp(op, "$not")) {
			rc = parse_not(pc, path, &it, &kid, err);
		} else if (!strcmp(op, "$regex")) {
			seen_regex = true;
			if (v->value_type == BSON_TYPE_UTF8) {
				regex_pat = v->value.v_utf8.str;
				regex_len = v->value.v_utf8.len;
			} else if (v->value_type == BSON_TYPE_REGEX) {
				regex_pat = v->value.v_regex.regex;
				regex_len = strlen(regex_pat);
				regex_opts = v->value.v_regex.options;
			} else {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "$regex needs a string or a regex at '%s'",
						 WHERE(path));
			}
		} else if (!strcmp(op, "$options")) {
			seen_options = true;
			if (v->value_type != BSON_TYPE_UTF8)
				rc = dfs_err_set(err, DFS_EINVAL, "$options needs a string at '%s'",
						 WHERE(path));
			else
				opt_str = v->value.v_utf8.str;
		} else {
			for (i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
				if (!strcmp(op, unsupported[i]))
					break;
			if (i < sizeof(unsupported) / sizeof(unsupported[0]))
				rc = dfs_err_set(err, DFS_EINVAL, "%s is not supported at '%s'", op,
						 WHERE(path));
			else
				rc = dfs_err_set(err, DFS_EINVAL, "unknown operator '%s' at '%s'",
						 op, WHERE(path));
		}
		if (rc)
			goto done;
		if (kid)
			node_add(all, kid);
	}
	if (seen_options && !seen_regex) {
		rc = dfs_err_set(err, DFS_EINVAL, "$options needs a $regex at '%s'", WHERE(path));
		goto done;
	}
	if (seen_regex) {
		struct query__regex *re;

		if (regex_opts && *regex_opts && opt_str && *opt_str) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "options set in both $regex and $options at '%s'",
					 WHERE(path));
			goto done;
		}
		rc = regex_compile(pc, path, regex_pat, regex_len,
				   opt_str && *opt_str ? opt_str
				   : regex_opts	       ? regex_opts
						       : "",
				   &re, err);
		if (rc)
			goto done;
		kid = node_new(QK_REGEX, path);
		kid->res = xcalloc(1, sizeof(*kid->res));
		kid->res[0] = re;
		kid->nres = 1;
		node_add(all, kid);
	}
	if (all->nkids == 1) {
		*out = all->kids[0];
		all->nkids = 0;
		query_expr_free(all);
	} else {
		*out = all;
	}
	all = NULL;
done:
	pc->depth--;
	query_expr_free(all);
	return rc;
}

/* ---- $expr ------------------------------------------------------------------------- */

static const struct {
	const char *name;
	int op;
	int min, max; /* argument counts */
} xops[] = {
	{"$eq", QX_EQ, 2, 2},
	{"$ne", QX_NE, 2, 2},
	{"$gt", QX_GT, 2, 2},
	{"$gte", QX_GTE, 2, 2},
	{"$lt", QX_LT, 2, 2},
	{"$lte", QX_LTE, 2, 2},
	{"$cmp", QX_CMP, 2, 2},
	{"$and", QX_AND, 0, 1 << 20},
	{"$or", QX_OR, 0, 1 << 20},
	{"$not", QX_NOT, 1, 1},
	{"$add", QX_ADD, 0, 1 << 20},
	{"$subtract", QX_SUB, 2, 2},
	{"$multiply", QX_MUL, 0, 1 << 20},
	{"$divide", QX_DIV, 2, 2},
	{"$mod", QX_MOD, 2, 2},
	{"$abs", QX_ABS, 1, 1},
};

static struct query__xnode *xnode_new(int op)
{
	struct query__xnode *x = xcalloc(1, sizeof(*x));

	x->op = op;
	return x;
}

static void xnode_add(struct query__xnode *x, struct query__xnode *kid, const char *key)
{
	struct query__xnode **a = realloc(x->args, sizeof(*a) * (size_t)(x->n + 1));

	if (!a)
		abort();
	x->args = a;
	if (key) {
		char **k = realloc(x->keys, sizeof(*k) * (size_t)(x->n + 1));

		if (!k)
			abort();
		x->keys = k;
		x->keys[x->n] = xstrdup(key);
	}
	x->args[x->n++] = kid;
}

static void xnode_free(struct query__xnode *x)
{
	int i;

	if (!x)
		return;
	for (i = 0; i < x->n; i++) {
		xnode_free(x->args[i]);
		if (x->keys)
			free(x->keys[i]);
	}
	free(x->args);
	free(x->keys);
	if (x->op == QX_LIT || x->op == QX_GETFIELD)
		bson_value_destroy(&x->lit);
	if (x->op == QX_PATH)
		path_release(&x->path);
	free(x);
}

static int parse_xexpr(struct pctx *pc, const bson_iter_t *it, struct query__xnode **out,
		       struct dfs_err *err);

/* Folds an array or object expression whose members are all constants into one constant
 * (so that evaluation builds nothing for literal arrays like [1, 2]). Consumes x. */
static struct query__xnode *xnode_fold(struct query__xnode *x)
{
	struct query__xnode *lit;
	char key[16];
	const char *k;
	bson_t b;
	int i;

	if (x->op != QX_ARR && x->op != QX_OBJ)
		return x;
	for (i = 0; i < x->n; i++)
		if (x->args[i]->op != QX_LIT)
			return x;
	bson_init(&b);
	for (i = 0; i < x->n; i++) {
		if (x->op == QX_ARR)
			bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		else
			k = x->keys[i];
		bson_append_value(&b, k, -1, &x->args[i]->lit);
	}
	lit = xnode_new(QX_LIT);
	lit->lit.value_type = x->op == QX_ARR ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT;
	lit->lit.value.v_doc.data_len = b.len;
	lit->lit.value.v_doc.data = bson_malloc(b.len);
	memcpy(lit->lit.value.v_doc.data, bson_get_data(&b), b.len);
	bson_destroy(&b);
	xnode_free(x);
	return lit;
}

/* Appends the arguments of an operator (an array, or one value standing for [value]). */
static int parse_xargs(struct pctx *pc, struct query__xnode *x, const bson_iter_t *it,
		       struct dfs_err *err)
{
	struct query__xnode *kid;
	bson_iter_t arr;
	int rc;

	if (!BSON_ITER_HOLDS_ARRAY(it)) {
		rc = parse_xexpr(pc, it, &kid, err);
		if (!rc)
			xnode_add(x, kid, NULL);
		return rc;
	}
	bson_iter_recurse(it, &arr);
	while (bson_iter_next(&arr)) {
		rc = parse_xexpr(pc, &arr, &kid, err);
		if (rc)
			return rc;
		xnode_add(x, kid, NULL);
	}
	return 0;
}

/*
 * {$getField: <field>} or {$getField: {field: <field>, input: <expr>}} (MongoDB 5.0+): the
 * field named exactly <field> ('.' and '$' included), which must be a constant string (a
 * plain one or {$literal: ..}), of the input ($$CURRENT when not given). Same checks and
 * messages as query/expr.c's.
 */
static int parse_getfield(struct pctx *pc, const bson_iter_t *args, struct query__xnode **out,
			  struct dfs_err *err)
{
	struct query__xnode *x = xnode_new(QX_GETFIELD), *f = NULL, *in = NULL;
	bson_iter_t sub;
	int rc = 0;

	*out = x;
	if (BSON_ITER_HOLDS_DOCUMENT(args) && bson_iter_recurse(args, &sub) &&
	    bson_iter_find(&sub, "field")) {
		bson_iter_recurse(args, &sub);
		while (bson_iter_next(&sub)) {
			const char *k = bson_iter_key(&sub);

			if (strcmp(k, "field") && strcmp(k, "input"))
				return dfs_err_set(err, DFS_EINVAL,
						   "$getField found an unknown argument: %s", k);
			if ((rc = parse_xexpr(pc, &sub, k[0] == 'f' ? &f : &in, err)))
				goto done;
		}
	} else if ((rc = parse_xexpr(pc, args, &f, err))) {
		goto done;
	}
	if (f->op != QX_LIT) {
		rc = dfs_err_set(err, DFS_EINVAL,
				 "$getField requires 'field' to evaluate to a constant, but got a "
				 "non-constant argument");
		goto done;
	}
	if (f->lit.value_type != BSON_TYPE_UTF8 ||
	    strlen(f->lit.value.v_utf8.str) != f->lit.value.v_utf8.len) {
		rc = dfs_err_set(err, DFS_EINVAL,
				 "$getField requires 'field' to evaluate to type String");
		goto done;
	}
	bson_value_copy(&f->lit, &x->lit);
	xnode_add(x, in ? in : xnode_new(QX_ROOT), NULL);
	in = NULL;
done:
	xnode_free(f);
	xnode_free(in);
	return rc;
}

/* One aggregation expression: a literal, "$path", "$$ROOT", [..], {..} or {$op: args}. */
static int parse_xexpr(struct pctx *pc, const bson_iter_t *it, struct query__xnode **out,
		       struct dfs_err *err)
{
	const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
	struct query__xnode *x = NULL, *kid;
	bson_iter_t sub;
	int rc = 0;
	size_t i;

	*out = NULL;
	if (++pc->depth > MAX_PARSE_DEPTH) {
		rc = dfs_err_set(err, DFS_EINVAL, "$expr nested too deeply");
		goto done;
	}
	if (v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.str[0] == '$') {
		const char *s = v->value.v_utf8.str;

		if (s[1] == '$') {
			const char *rest = NULL;

			if (!strncmp(s, "$$ROOT", 6) && (s[6] == '\0' || s[6] == '.'))
				rest = s + 6;
			else if (!strncmp(s, "$$CURRENT", 9) && (s[9] == '\0' || s[9] == '.'))
				rest = s + 9;
			if (!rest) {
				rc = dfs_err_set(err, DFS_EINVAL, "unknown variable '%s' in $expr",
						 s);
				goto done;
			}
			if (!*rest) {
				x = xnode_new(QX_ROOT);
				goto done;
			}
			s = rest; /* ".a.b": fall through as "$a.b" */
		}
		if (s[1] == '\0' || strlen(v->value.v_utf8.str) != v->value.v_utf8.len) {
			rc = dfs_err_set(err, DFS_EINVAL, "'%s' is not a valid field path in $expr",
					 v->value.v_utf8.str);
			goto done;
		}
		x = xnode_new(QX_PATH);
		path_init(&x->path, s + 1);
		goto done;
	}
	if (v->value_type == BSON_TYPE_ARRAY) {
		x = xnode_new(QX_ARR);
		bson_iter_recurse(it, &sub);
		while (bson_iter_next(&sub)) {
			rc = parse_xexpr(pc, &sub, &kid, err);
			if (rc)
				goto done;
			xnode_add(x, kid, NULL);
		}
		goto done;
	}
	if (v->value_type == BSON_TYPE_DOCUMENT) {
		bson_iter_recurse(it, &sub);
		if (bson_iter_next(&sub) && bson_iter_key(&sub)[0] == '$') {
			const char *op = bson_iter_key(&sub);
			bson_iter_t args = sub;

			if (bson_iter_next(&sub)) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "an expression operator must be alone in its "
						 "object in $expr ('%s')",
						 op);
				goto done;
			}
			if (!strcmp(op, "$literal")) {
				x = xnode_new(QX_LIT);
				bson_value_copy(bson_iter_value(&args), &x->lit);
				goto done;
			}
			if (!strcmp(op, "$getField")) {
				rc = parse_getfield(pc, &args, &x, err);
				goto done;
			}
			for (i = 0; i < sizeof(xops) / sizeof(xops[0]); i++)
				if (!strcmp(op, xops[i].name))
					break;
			if (i == sizeof(xops) / sizeof(xops[0])) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "unknown expression operator '%s' in $expr", op);
				goto done;
			}
			x = xnode_new(xops[i].op);
			rc = parse_xargs(pc, x, &args, err);
			if (rc)
				goto done;
			if (x->n < xops[i].min || x->n > xops[i].max) {
				if (xops[i].min == xops[i].max)
					rc = dfs_err_set(err, DFS_EINVAL,
							 "%s takes exactly %d argument%s in $expr",
							 op, xops[i].min,
							 xops[i].min == 1 ? "" : "s");
				else
					rc = dfs_err_set(err, DFS_EINVAL,
							 "%s has the wrong number of arguments "
							 "in $expr",
							 op);
			}
			goto done;
		}
		x = xnode_new(QX_OBJ);
		bson_iter_recurse(it, &sub);
		while (bson_iter_next(&sub)) {
			if (strchr(bson_iter_key(&sub), '.')) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "field name '%s' in $expr must not contain '.'",
						 bson_iter_key(&sub));
				goto done;
			}
			rc = parse_xexpr(pc, &sub, &kid, err);
			if (rc)
				goto done;
			xnode_add(x, kid, bson_iter_key(&sub));
		}
		goto done;
	}
	x = xnode_new(QX_LIT);
	bson_value_copy(v, &x->lit);
done:
	pc->depth--;
	if (rc) {
		xnode_free(x);
		return rc;
	}
	*out = xnode_fold(x);
	return 0;
}

/* ---- documents and logical operators ----------------------------------------------- */

/* $and / $or / $nor: a non-empty array of filter documents. */
static int parse_logical(struct pctx *pc, const char *op, int kind, const bson_iter_t *it,
			 struct query_expr **out, struct dfs_err *err)
{
	struct query_expr *e, *kid;
	const char *under;
	bson_iter_t arr;
	int rc, n = 0;

	if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &arr))
		return dfs_err_set(err, DFS_EINVAL, "%s needs a non-empty array", op);
	e = node_new(kind, NULL);
	under = pc->under;
	if (kind != QK_AND && !(under && (!strcmp(under, "$nor") || !strcmp(under, "$elemMatch"))))
		pc->under = op;
	while (bson_iter_next(&arr)) {
		n++;
		if (!BSON_ITER_HOLDS_DOCUMENT(&arr)) {
			query_expr_free(e);
			return dfs_err_set(err, DFS_EINVAL, "%s needs an array of documents", op);
		}
		rc = parse_doc(pc, &arr, &kid, err);
		if (rc) {
			pc->under = under;
			query_expr_free(e);
			return rc;
		}
		node_add(e, kid);
	}
	pc->under = under;
	if (n == 0) {
		query_expr_free(e);
		return dfs_err_set(err, DFS_EINVAL, "%s needs a non-empty array", op);
	}
	*out = e;
	return 0;
}

/* $text: at most one, not under $nor or $elemMatch. Under $or its place is checked once the
 * tree is normalized (text_placed). */
static int parse_text(struct pctx *pc, const bson_iter_t *it, struct query_expr **out,
		      struct dfs_err *err)
{
	struct query_expr *e;
	int rc;

	if (pc->under && !strcmp(pc->under, "$nor"))
		return dfs_err_set(err, DFS_EINVAL, "text expression not allowed in nor");
	if (pc->under && !strcmp(pc->under, "$elemMatch"))
		return dfs_err_set(err, DFS_EINVAL,
				   "$text can only be applied to the top-level document");
	if (pc->ntext && ++*pc->ntext > 1)
		return dfs_err_set(err, DFS_EINVAL, "Too many text expressions");
	e = node_new(QK_TEXT, NULL);
	if ((rc = query__text_parse(bson_iter_value((bson_iter_t *)it), &e->text, err))) {
		query_expr_free(e);
		return rc;
	}
	*out = e;
	return 0;
}

/* A filter document (the top level, an $and/$or/$nor entry, $elemMatch's query form). */
static int parse_doc(struct pctx *pc, const bson_iter_t *doc, struct query_expr **out,
		     struct dfs_err *err)
{
	struct query_expr *all = node_new(QK_AND, NULL), *kid;
	bson_iter_t it;
	int rc = 0;

	if (++pc->depth > MAX_PARSE_DEPTH) {
		rc = dfs_err_set(err, DFS_EINVAL, "filter nested too deeply");
		goto done;
	}
	bson_iter_recurse(doc, &it);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		kid = NULL;
		if (k[0] != '$') {
			rc = parse_field(pc, k, &it, &kid, err);
		} else if (!strcmp(k, "$and")) {
			rc = parse_logical(pc, k, QK_AND, &it, &kid, err);
		} else if (!strcmp(k, "$or")) {
			rc = parse_logical(pc, k, QK_OR, &it, &kid, err);
		} else if (!strcmp(k, "$nor")) {
			rc = parse_logical(pc, k, QK_NOR, &it, &kid, err);
		} else if (!strcmp(k, "$expr")) {
			kid = node_new(QK_EXPR, NULL);
			bson_value_copy(bson_iter_value(&it), &kid->x_orig);
			rc = parse_xexpr(pc, &it, &kid->x, err);
		} else if (!strcmp(k, "$comment")) {
			/* ignored */
		} else if (!strcmp(k, "$alwaysTrue") || !strcmp(k, "$alwaysFalse")) {
			if (!is_number(bson_iter_type(&it)) ||
			    num_as_double(bson_iter_value(&it)) != 1)
				rc = dfs_err_set(err, DFS_EINVAL, "%s needs the value 1", k);
			else
				kid = node_new(k[7] == 'T' ? QK_ALWAYS : QK_NEVER, NULL);
		} else if (!strcmp(k, "$text")) {
			rc = parse_text(pc, &it, &kid, err);
		} else if (!strcmp(k, "$where")) {
			rc = dfs_err_set(err, DFS_EINVAL, "$where is not supported");
		} else if (!strcmp(k, "$jsonSchema") || !strcmp(k, "$sampleRate")) {
			rc = dfs_err_set(err, DFS_EINVAL, "%s is not supported", k);
		} else {
			rc = dfs_err_set(err, DFS_EINVAL, "unknown top level operator '%s'", k);
		}
		if (kid)
			node_add(all, kid);
		if (rc)
			goto done;
	}
	*out = all;
	all = NULL;
done:
	pc->depth--;
	query_expr_free(all);
	return rc;
}

/* ---- normalization ----------------------------------------------------------------- */

/* MongoDB's canonical order of siblings: kind, then path, then (recursively) children. */
static int node_order(const struct query_expr *a, const struct query_expr *b)
{
	int c, i;

	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	c = strcmp(a->path.dotted, b->path.dotted);
	if (c)
		return c;
	if (a->nkids != b->nkids)
		return a->nkids < b->nkids ? -1 : 1;
	for (i = 0; i < a->nkids; i++) {
		c = node_order(a->kids[i], b->kids[i]);
		if (c)
			return c;
	}
	return 0;
}

/* Flattens $and in $and and $or in $or, collapses one-child $and/$or, sorts siblings
 * (stably). Returns the node that replaces e. */
static struct query_expr *normalize(struct query_expr *e)
{
	int i, j;

	for (i = 0; i < e->nkids; i++)
		e->kids[i] = normalize(e->kids[i]);
	if (e->kind != QK_AND && e->kind != QK_OR)
		return e;
	for (i = 0; i < e->nkids; i++) {
		struct query_expr *k = e->kids[i];
		struct query_expr **nk;

		if (k->kind != e->kind || k->path.n != 0)
			continue;
		/* splice k's children in place of k */
		nk = xcalloc((size_t)(e->nkids + k->nkids), sizeof(*nk));
		memcpy(nk, e->kids, sizeof(*nk) * (size_t)i);
		if (k->nkids) /* (an empty one has no array) */
			memcpy(nk + i, k->kids, sizeof(*nk) * (size_t)k->nkids);
		memcpy(nk + i + k->nkids, e->kids + i + 1,
		       sizeof(*nk) * (size_t)(e->nkids - i - 1));
		free(e->kids);
		e->kids = nk;
		e->nkids += k->nkids - 1;
		k->nkids = 0;
		query_expr_free(k);
		i--;
	}
	for (i = 1; i < e->nkids; i++) { /* insertion sort: stable, lists are short */
		struct query_expr *k = e->kids[i];

		for (j = i; j > 0 && node_order(e->kids[j - 1], k) > 0; j--)
			e->kids[j] = e->kids[j - 1];
		e->kids[j] = k;
	}
	if (e->nkids == 1) {
		struct query_expr *only = e->kids[0];

		e->nkids = 0;
		query_expr_free(e);
		return only;
	}
	return e;
}

/* ---- public ------------------------------------------------------------------------ */

/* Is the $text of the normalized tree e where a plan can answer it (plan.c note 7): at the
 * top, in the top-level $and, or in a branch of an $or that is at the top or in the
 * top-level $and, the branch being the $text or an $and holding it? Normalized, $and and
 * $or alternate on the way down, so that is: no two $or above it. ors: those passed. */
static bool text_placed(const struct query_expr *e, int ors)
{
	if (e->kind == QK_OR && ++ors > 1)
		return false;
	if (e->kind != QK_AND && e->kind != QK_OR)
		return true; /* the $text itself, or no $text below (not under $nor, $elemMatch) */
	for (int i = 0; i < e->nkids; i++)
		if (query_filter_has_text(e->kids[i]) && !text_placed(e->kids[i], ors))
			return false;
	return true;
}

bool query_filter_has_text(const struct query_expr *e)
{
	if (!e)
		return false;
	if (e->kind == QK_TEXT)
		return true;
	for (int i = 0; i < e->nkids; i++)
		if (query_filter_has_text(e->kids[i]))
			return true;
	return false;
}

int query_filter_parse(const bson_t *filter, struct query_expr **out, struct dfs_err *err)
{
	int ntext = 0;
	struct pctx pc = {"", 0, NULL, &ntext};
	struct query_expr *e;
	bson_t wrap;
	bson_iter_t it;
	int rc;

	*out = NULL;
	/* parse_doc wants an iterator on a document element: wrap the filter in {"": filter} */
	bson_init(&wrap);
	bson_append_document(&wrap, "", 0, filter);
	if (!bson_iter_init(&it, &wrap) || !bson_iter_next(&it)) {
		bson_destroy(&wrap);
		return dfs_err_set(err, DFS_EINVAL, "the filter is not a valid document");
	}
	rc = parse_doc(&pc, &it, &e, err);
	bson_destroy(&wrap);
	if (rc)
		return rc;
	e = normalize(e);
	if (ntext && !text_placed(e, 0)) {
		query_expr_free(e);
		return dfs_err_set(err, DFS_EINVAL,
				   "$text under a nested $or is not supported: use it in an $or at "
				   "the top level or in the top-level $and");
	}
	*out = e;
	return 0;
}

void query_expr_free(struct query_expr *e)
{
	int i;

	if (!e)
		return;
	query_expr_free(e->orig);
	for (i = 0; i < e->nkids; i++)
		query_expr_free(e->kids[i]);
	free(e->kids);
	path_release(&e->path);
	if (e->kind >= QK_SIZE && e->kind <= QK_GTE && e->kind != QK_SIZE)
		bson_value_destroy(&e->val);
	for (i = 0; i < e->nvals; i++)
		bson_value_destroy(&e->vals[i]);
	free(e->vals);
	for (i = 0; i < e->nres; i++)
		regex_free(e->res[i]);
	free(e->res);
	if (e->kind == QK_TYPE)
		bson_value_destroy(&e->types_orig);
	if (e->kind == QK_EXPR) {
		xnode_free(e->x);
		bson_value_destroy(&e->x_orig);
	}
	query__text_free(e->text);
	free(e);
}

/* ---- describe ---------------------------------------------------------------------- */

static void describe_doc(const struct query_expr *e, bson_t *doc);

/* Appends the operator(s) of a leaf (or a value-form node) into the operator document. */
static void describe_ops(const struct query_expr *e, bson_t *ops)
{
	static const char *const cmp_names[] = {[QK_EQ] = "$eq",
						[QK_LTE] = "$lte",
						[QK_LT] = "$lt",
						[QK_GT] = "$gt",
						[QK_GTE] = "$gte"};
	bson_t sub;
	char key[16];
	const char *k;
	int i;

	switch (e->kind) {
	case QK_EQ:
	case QK_LTE:
	case QK_LT:
	case QK_GT:
	case QK_GTE:
		bson_append_value(ops, cmp_names[e->kind], -1, &e->val);
		break;
	case QK_REGEX:
		bson_append_utf8(ops, "$regex", -1, e->res[0]->pattern, -1);
		if (e->res[0]->options[0])
			bson_append_utf8(ops, "$options", -1, e->res[0]->options, -1);
		break;
	case QK_IN:
		bson_append_array_begin(ops, "$in", -1, &sub);
		for (i = 0; i < e->nvals + e->nres; i++) {
			bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
			if (i < e->nvals)
				bson_append_value(&sub, k, -1, &e->vals[i]);
			else
				bson_append_regex(&sub, k, -1, e->res[i - e->nvals]->pattern,
						  e->res[i - e->nvals]->options);
		}
		bson_append_array_end(ops, &sub);
		break;
	case QK_EXISTS:
		bson_append_bool(ops, "$exists", -1, true);
		break;
	case QK_TYPE:
		bson_append_value(ops, "$type", -1, &e->types_orig);
		break;
	case QK_MOD:
		bson_append_array_begin(ops, "$mod", -1, &sub);
		bson_append_int64(&sub, "0", -1, e->mod_div);
		bson_append_int64(&sub, "1", -1, e->mod_rem);
		bson_append_array_end(ops, &sub);
		break;
	case QK_SIZE:
		bson_append_int64(ops, "$size", -1, e->size);
		break;
	case QK_ELEM_OBJ:
		bson_append_document_begin(ops, "$elemMatch", -1, &sub);
		describe_doc(e->kids[0], &sub);
		bson_append_document_end(ops, &sub);
		break;
	case QK_ELEM_VAL:
		bson_append_document_begin(ops, "$elemMatch", -1, &sub);
		for (i = 0; i < e->nkids; i++)
			describe_ops(e->kids[i], &sub);
		bson_append_document_end(ops, &sub);
		break;
	case QK_NOT:
		bson_append_document_begin(ops, "$not", -1, &sub);
		describe_ops(e->kids[0], &sub);
		bson_append_document_end(ops, &sub);
		break;
	case QK_AND: /* $all and operator documents under $not */
		for (i = 0; i < e->nkids; i++)
			describe_ops(e->kids[i], ops);
		break;
	case QK_NEVER:
		bson_append_array_begin(ops, "$all", -1, &sub);
		bson_append_array_end(ops, &sub);
		break;
	default:
		break;
	}
}

/* The path a node applies to when it is a path predicate (a leaf, or $not/$and over leaves
 * of one path as $not and $all produce), else NULL. */
static const char *node_path(const struct query_expr *e)
{
	const char *p;
	int i;

	if (e->path.n > 0)
		return e->path.dotted;
	if (e->kind != QK_NOT && e->kind != QK_AND)
		return NULL;
	if (e->nkids == 0)
		return NULL;
	p = node_path(e->kids[0]);
	for (i = 1; p && i < e->nkids; i++) {
		const char *q = node_path(e->kids[i]);

		if (!q || strcmp(p, q))
			return NULL;
	}
	return p;
}

static void describe_list(const char *op, const struct query_expr *e, bson_t *doc)
{
	bson_t arr, sub;
	char key[16];
	const char *k;
	int i;

	bson_append_array_begin(doc, op, -1, &arr);
	for (i = 0; i < e->nkids; i++) {
		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		bson_append_document_begin(&arr, k, -1, &sub);
		describe_doc(e->kids[i], &sub);
		bson_append_document_end(&arr, &sub);
	}
	bson_append_array_end(doc, &arr);
}

/* Appends e as the fields of a filter document. */
static void describe_doc(const struct query_expr *e, bson_t *doc)
{
	const char *path = node_path(e);
	bson_t sub;

	if (path && e->kind != QK_AND) {
		bson_append_document_begin(doc, path, -1, &sub);
		describe_ops(e, &sub);
		bson_append_document_end(doc, &sub);
		return;
	}
	switch (e->kind) {
	case QK_AND:
		if (e->nkids > 0)
			describe_list("$and", e, doc);
		break;
	case QK_OR:
		describe_list("$or", e, doc);
		break;
	case QK_NOR:
	case QK_NOT:
		describe_list("$nor", e, doc);
		break;
	case QK_EXPR:
		bson_append_value(doc, "$expr", -1, &e->x_orig);
		break;
	case QK_ALWAYS:
		bson_append_int32(doc, "$alwaysTrue", -1, 1);
		break;
	case QK_TEXT:
		query__text_describe(e->text, doc);
		break;
	case QK_NEVER:
		bson_append_int32(doc, "$alwaysFalse", -1, 1);
		break;
	default:
		break;
	}
}

void query_filter_describe(const struct query_expr *e, bson_t *out, const char *key)
{
	bson_t doc;

	bson_append_document_begin(out, key, -1, &doc);
	if (e && e->orig) /* a collated filter shows its operands as written */
		e = e->orig;
	if (e)
		describe_doc(e, &doc);
	bson_append_document_end(out, &doc);
}

/* ---- collations -------------------------------------------------------------------- */

/* Converts the comparison operands of e (collation.c note 1); DFS_EINVAL for the operators
 * whose strings are not compared by value ($regex, $expr, $text). */
static int collate_tree(struct query_expr *e, const struct query_collation *c, struct dfs_err *err)
{
	bson_value_t v;
	int rc;

	switch (e->kind) {
	case QK_REGEX:
		return dfs_err_set(err, DFS_EINVAL,
				   "$regex with a collation is not supported by docfs ('%s')",
				   e->path.dotted);
	case QK_EXPR:
		return dfs_err_set(err, DFS_EINVAL,
				   "$expr with a collation is not supported by docfs");
	case QK_TEXT:
		return dfs_err_set(err, DFS_EINVAL,
				   "$text with a collation is not supported by docfs");
	case QK_EQ:
	case QK_LT:
	case QK_LTE:
	case QK_GT:
	case QK_GTE:
		query__collate_value(c, &e->val, &v);
		bson_value_destroy(&e->val);
		e->val = v;
		break;
	case QK_IN:
		if (e->nres)
			return dfs_err_set(
				err, DFS_EINVAL,
				"a regex in $in or $nin with a collation is not supported "
				"by docfs ('%s')",
				e->path.dotted);
		for (int i = 0; i < e->nvals; i++) {
			query__collate_value(c, &e->vals[i], &v);
			bson_value_destroy(&e->vals[i]);
			e->vals[i] = v;
		}
		sort_vals(e); /* "a" and "A" may now be one value */
		break;
	default:
		break;
	}
	for (int i = 0; i < e->nkids; i++)
		if ((rc = collate_tree(e->kids[i], c, err)))
			return rc;
	return 0;
}

int query_filter_parse_collated(const bson_t *filter, const struct query_collation *c,
				struct query_expr **out, struct dfs_err *err)
{
	struct query_expr *e = NULL, *orig = NULL;
	int rc;

	*out = NULL;
	if (!c)
		return query_filter_parse(filter, out, err);
	if ((rc = query_filter_parse(filter, &e, err)) ||
	    (rc = query_filter_parse(filter, &orig, err)) || (rc = collate_tree(e, c, err))) {
		query_expr_free(e);
		query_expr_free(orig);
		return rc;
	}
	e->coll = c;
	e->orig = orig;
	*out = e;
	return 0;
}
