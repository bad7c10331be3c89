/*
 * let.c - a command's variables (the "let" option of find, aggregate, update, delete and
 * findAndModify, and an update statement's "c"): each value is an aggregation expression,
 * evaluated once, before any document is read, into a constant that pipelines see as $$name
 * and that $expr in filters sees as a literal.
 *
 * It does not evaluate per document: the expressions are expr.c's, the pipelines that read
 * the variables are agg.c's (through query_pipeline_parse_let and query_agg_opts.let), and
 * filters get the values written in (query_let_filter) since filter.c's $expr has no scope.
 *
 * Design notes
 * 1. A value is evaluated with an empty document as $$ROOT (MongoDB's let cannot read a
 *    document: "$a" is missing) and with $$NOW of the command, so {$literal: "$x"} binds the
 *    string "$x" and {$rand: {}} one number for the whole command. Earlier variables of the
 *    same let are not in scope (MongoDB's are not either).
 * 2. Names follow MongoDB's rule for user variables: a lowercase ASCII letter or a non-ASCII
 *    byte first, then letters, digits and '_'; ROOT, CURRENT, NOW and the other system
 *    variables start with an uppercase letter and so cannot be rebound.
 * 3. The variables are kept as one chain of struct agg__var (innermost last) and a matching
 *    chain of struct agg__scope, which is what agg.c's parser and evaluator already take for
 *    $lookup's let; a pipeline's own $let/$lookup variables shadow them.
 */
#include "agg_int.h"

#include <stdlib.h>
#include <string.h>

struct query_let {
	int n;
	char **names;		  /* Owned: n names */
	bson_value_t *vals;	  /* Owned: n values (EOD for missing) */
	struct agg__var *vars;	  /* Owned: n bindings, vars[i].up = &vars[i - 1] */
	struct agg__scope *scope; /* Owned: n names for the parser, chained the same way */
};

static bool valid_name(const char *s)
{
	unsigned char c = (unsigned char)s[0];

	if (!(c >= 'a' && c <= 'z') && c < 0x80)
		return false;
	for (s++; *s; s++) {
		c = (unsigned char)*s;
		if (c < 0x80 && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') &&
		    !(c >= '0' && c <= '9') && c != '_')
			return false;
	}
	return true;
}

void query_let_free(struct query_let *l)
{
	if (!l)
		return;
	for (int i = 0; i < l->n; i++) {
		free(l->names[i]);
		if (l->vals[i].value_type != BSON_TYPE_EOD)
			bson_value_destroy(&l->vals[i]);
	}
	free(l->names);
	free(l->vals);
	free(l->vars);
	free(l->scope);
	free(l);
}

int query_let_new(const bson_t *let, int64_t now_ms, struct query_let **out, struct dfs_err *err)
{
	struct query_let *l = calloc(1, sizeof(*l));
	struct agg__arena ar;
	bson_t empty = BSON_INITIALIZER;
	bson_iter_t it;
	uint32_t n;
	int rc = 0;

	*out = NULL;
	if (!l)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	agg__arena_init(&ar);
	if (!bson_iter_init(&it, let)) {
		rc = dfs_err_set(err, DFS_EINVAL, "let is not valid BSON");
		goto done;
	}
	n = bson_count_keys(let);
	l->names = calloc(n + 1, sizeof(*l->names));
	l->vals = calloc(n + 1, sizeof(*l->vals));
	l->vars = calloc(n + 1, sizeof(*l->vars));
	l->scope = calloc(n + 1, sizeof(*l->scope));
	if (!l->names || !l->vals || !l->vars || !l->scope) {
		rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
		goto done;
	}
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		struct agg__x *x = NULL;
		struct agg__ctx c = {0};
		bson_value_t v;

		if (!valid_name(k)) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "'%s' starts with an invalid character for a user "
					 "variable name",
					 k);
			goto done;
		}
		for (int i = 0; i < l->n; i++)
			if (!strcmp(l->names[i], k)) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "let variable '%s' is given twice", k);
				goto done;
			}
		if ((rc = agg__x_parse(bson_iter_value(&it), NULL, &x, err))) {
			dfs_err_prefix(err, "let variable '%s': ", k);
			goto done;
		}
		c.root.value_type = BSON_TYPE_DOCUMENT;
		c.root.value.v_doc.data = (uint8_t *)bson_get_data(&empty);
		c.root.value.v_doc.data_len = empty.len;
		c.current = c.root;
		c.now_ms = now_ms;
		c.ar = &ar;
		rc = agg__x_eval(x, &c, &v, err);
		if (rc) {
			agg__x_free(x);
			dfs_err_prefix(err, "let variable '%s': ", k);
			goto done;
		}
		/* v may point into x (a literal): copied before x goes */
		if (v.value_type != BSON_TYPE_EOD)
			bson_value_copy(&v, &l->vals[l->n]);
		agg__x_free(x);
		l->names[l->n] = strdup(k);
		if (!l->names[l->n]) {
			if (l->vals[l->n].value_type != BSON_TYPE_EOD)
				bson_value_destroy(&l->vals[l->n]);
			rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
			goto done;
		}
		l->n++;
		agg__arena_reset(&ar);
	}
	for (int i = 0; i < l->n; i++) {
		l->vars[i].name = l->names[i];
		l->vars[i].v = l->vals[i];
		l->vars[i].up = i ? &l->vars[i - 1] : NULL;
		l->scope[i].name = l->names[i];
		l->scope[i].up = i ? &l->scope[i - 1] : NULL;
	}
done:
	agg__arena_release(&ar);
	bson_destroy(&empty);
	if (rc) {
		query_let_free(l);
		return rc;
	}
	*out = l;
	return 0;
}

const struct agg__var *query__let_vars(const struct query_let *l)
{
	return l && l->n ? &l->vars[l->n - 1] : NULL;
}

const struct agg__scope *query__let_scope(const struct query_let *l)
{
	return l && l->n ? &l->scope[l->n - 1] : NULL;
}

/* The value of variable "$$name" or "$$name.a.b" (s after the "$$"), or NULL when s names
 * none of l's variables. *rest gets the path after the name ("" or ".a.b"). */
static const bson_value_t *lookup(const struct query_let *l, const char *s, const char **rest)
{
	size_t len = strcspn(s, ".");

	for (int i = l->n - 1; i >= 0; i--)
		if (strlen(l->names[i]) == len && !memcmp(l->names[i], s, len)) {
			*rest = s + len;
			return &l->vals[i];
		}
	return NULL;
}

/* Appends {$literal: v} under key (or a missing value's stand-in, "$$REMOVE"). */
static void append_literal(bson_t *out, const char *key, const bson_value_t *v)
{
	bson_t lit;

	if (v->value_type == BSON_TYPE_EOD) {
		BSON_APPEND_UTF8(out, key, "$$REMOVE");
		return;
	}
	BSON_APPEND_DOCUMENT_BEGIN(out, key, &lit);
	bson_append_value(&lit, "$literal", -1, v);
	bson_append_document_end(out, &lit);
}

/* The value of it into out under key, with each "$$name" of l written in as {$literal: value}
 * and each "$$name.a.b" as the value at that path of a document variable. A missing value
 * becomes "$$REMOVE", which filter.c's $expr refuses by name rather than read as null. */
static void subst(const struct query_let *l, bson_iter_t *it, bson_t *out, const char *key)
{
	bson_iter_t sub;

	if (BSON_ITER_HOLDS_UTF8(it)) {
		const char *s = bson_iter_utf8(it, NULL), *rest;
		const bson_value_t *v;

		if (!strncmp(s, "$$", 2) && (v = lookup(l, s + 2, &rest))) {
			bson_value_t at = *v;

			if (*rest) {
				bson_t doc;
				bson_iter_t f;

				at.value_type = BSON_TYPE_EOD;
				if (v->value_type == BSON_TYPE_DOCUMENT &&
				    bson_init_static(&doc, v->value.v_doc.data,
						     v->value.v_doc.data_len) &&
				    bson_iter_init(&f, &doc) &&
				    bson_iter_find_descendant(&f, rest + 1, &f))
					at = *bson_iter_value(&f);
			}
			append_literal(out, key, &at);
			return;
		}
	}
	if (BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) {
		bool arr = BSON_ITER_HOLDS_ARRAY(it);
		bson_t child;

		bson_iter_recurse(it, &sub);
		if (arr)
			BSON_APPEND_ARRAY_BEGIN(out, key, &child);
		else
			BSON_APPEND_DOCUMENT_BEGIN(out, key, &child);
		while (bson_iter_next(&sub)) {
			/* {$literal: ...} is taken as written */
			if (!arr && !strcmp(bson_iter_key(&sub), "$literal"))
				bson_append_iter(&child, "$literal", -1, &sub);
			else
				subst(l, &sub, &child, bson_iter_key(&sub));
		}
		if (arr)
			bson_append_array_end(out, &child);
		else
			bson_append_document_end(out, &child);
		return;
	}
	bson_append_iter(out, key, -1, it);
}

void query_let_filter(const struct query_let *l, const bson_t *filter, bson_t *out)
{
	bson_iter_t it;

	bson_init(out);
	if (!bson_iter_init(&it, filter))
		return;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (l && l->n && !strcmp(k, "$expr")) {
			subst(l, &it, out, k);
		} else if (l && l->n &&
			   (!strcmp(k, "$and") || !strcmp(k, "$or") || !strcmp(k, "$nor")) &&
			   BSON_ITER_HOLDS_ARRAY(&it)) {
			bson_iter_t arr;
			bson_t a;

			bson_iter_recurse(&it, &arr);
			BSON_APPEND_ARRAY_BEGIN(out, k, &a);
			while (bson_iter_next(&arr)) {
				bson_t sub, wrapped;
				uint32_t len;
				const uint8_t *data;

				bson_iter_document(&arr, &len, &data);
				if (!BSON_ITER_HOLDS_DOCUMENT(&arr) ||
				    !bson_init_static(&sub, data, len)) {
					bson_append_iter(&a, bson_iter_key(&arr), -1, &arr);
					continue;
				}
				query_let_filter(l, &sub, &wrapped);
				BSON_APPEND_DOCUMENT(&a, bson_iter_key(&arr), &wrapped);
				bson_destroy(&wrapped);
			}
			bson_append_array_end(out, &a);
		} else {
			bson_append_iter(out, k, -1, &it);
		}
	}
}
