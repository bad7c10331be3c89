/*
 * project.c - find() projections with MongoDB 4.4+ semantics: parsing a projection
 * document into a tree of path components, and applying it to result documents. It does
 * not evaluate aggregation expressions ($literal, computed fields: rejected at parse
 * time; of $meta only {$meta: "textScore"} at the top level, appended last) and does not match
 * filters itself ($elemMatch calls the filter engine).
 *
 * Design notes.
 *
 *  1. The tree. Each spec entry is a dotted path (nested sub-projections {a: {b: 1}} are
 *     flattened to "a.b"); its components are nodes, the last one a leaf (include, exclude,
 *     $slice, $elemMatch, positional). A leaf on a path prefix of another entry, or two
 *     entries on one path, is a "path collision" (4.4+ rejects them instead of merging).
 *  2. The kind. Any non-_id inclusion, positional or $elemMatch makes an inclusion
 *     projection, any non-_id exclusion an exclusion one; both is an error. Only $slice
 *     (or nothing but _id) leaves the kind to _id: {_id: 1} includes, otherwise exclusion
 *     (so {a: {$slice: 2}} keeps the other fields, as the manual says).
 *  3. Inclusion walks the document in its order and keeps only the fields the tree names,
 *     _id first. Through arrays, documents are projected, nested arrays walked, anything
 *     else dropped; a field that is not a document or array where the path goes on is
 *     dropped. $elemMatch fields come after all the others (the manual's field order
 *     note), in spec order. An inclusion projection keeps _id unless _id is excluded.
 *  4. Exclusion walks the document and drops what the tree excludes; everything else,
 *     array elements of any type included, is kept in place.
 *  5. $slice on a non-array value keeps the value. Positional "a.b.$" keeps the path as
 *     an inclusion and cuts the first array met along it down to element elem_index of
 *     the document as stored (the server indexes its already projected array, which only
 *     differs when inclusion dropped non-document elements before that index).
 *  6. Applying allocates nothing itself: output goes through bson_append_*_begin/end into
 *     the caller's bson_t; field lookups are linear scans over a node's children (spec
 *     trees are small).
 *
 * Thread-safe: a parsed struct query_proj is immutable.
 */
#include "query.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum pkind {
	PK_INTERNAL,   /* a component with children */
	PK_INCLUDE,    /* a: 1 */
	PK_EXCLUDE,    /* a: 0 */
	PK_SLICE,      /* a: {$slice: ...} */
	PK_ELEMMATCH,  /* a: {$elemMatch: ...} (top level only) */
	PK_POSITIONAL, /* "a.$": 1, on the node of "a" */
	PK_META,       /* a: {$meta: "textScore"} (top level only) */
};

struct pnode {
	char *name;		   /* Owned: this path component */
	uint32_t name_len;	   /* strlen(name) */
	enum pkind kind;	   /* what this node does */
	bool pos_path;		   /* the positional leaf is this node or below it */
	bool slice_skip;	   /* PK_SLICE: [skip, limit] form */
	int64_t skip, limit;	   /* PK_SLICE: limit alone is n (negative: from the end) */
	struct query_expr *filter; /* PK_ELEMMATCH: Owned, {name: {$elemMatch: spec}} */
	char *path;		   /* Owned: the full dotted path of the spec entry (leaves) */
	struct pnode *child;	   /* Owned: first child, in spec order */
	struct pnode *next;	   /* Owned: next sibling */
};

struct query_proj {
	struct pnode root; /* children are the top-level fields */
	bool inclusion;	   /* an inclusion projection (design note 2) */
	bool positional;   /* has a positional leaf */
	bool elemmatch;	   /* has an $elemMatch leaf */
	bool identity;	   /* empty spec: documents unchanged */
	bool meta;	   /* has a $meta leaf */
};

/* Parse state: the kind decided so far (design note 2). */
enum pmode { PM_UNSET, PM_INCL, PM_EXCL };

struct pparse {
	struct query_proj *p;
	enum pmode mode;
	bool id_set;	  /* the spec has the exact path "_id" */
	bool id_included; /* ... and includes it */
};

static void node_free_kids(struct pnode *n)
{
	struct pnode *c = n->child, *next;

	while (c) {
		next = c->next;
		node_free_kids(c);
		free(c->name);
		free(c->path);
		query_expr_free(c->filter);
		free(c);
		c = next;
	}
	n->child = NULL;
}

void query_proj_free(struct query_proj *p)
{
	if (!p)
		return;
	node_free_kids(&p->root);
	free(p);
}

static struct pnode *find_child(const struct pnode *n, const char *name, size_t len)
{
	struct pnode *c;

	for (c = n->child; c; c = c->next)
		if (c->name_len == len && memcmp(c->name, name, len) == 0)
			return c;
	return NULL;
}

/* The path of some leaf at or below n (for collision messages). */
static const char *some_leaf_path(const struct pnode *n)
{
	while (n->kind == PK_INTERNAL && n->child)
		n = n->child;
	return n->path ? n->path : n->name;
}

/* ---- parsing ----------------------------------------------------------------------- */

static bool value_number(const bson_iter_t *it, double *d)
{
	switch (bson_iter_type(it)) {
	case BSON_TYPE_INT32:
		*d = bson_iter_int32(it);
		return true;
	case BSON_TYPE_INT64:
		*d = (double)bson_iter_int64(it);
		return true;
	case BSON_TYPE_DOUBLE:
		*d = bson_iter_double(it);
		return true;
	case BSON_TYPE_DECIMAL128: {
		bson_decimal128_t dec;
		char s[BSON_DECIMAL128_STRING];

		bson_iter_decimal128(it, &dec);
		bson_decimal128_to_string(&dec, s);
		*d = strtod(s, NULL);
		return true;
	}
	default:
		return false;
	}
}

/* A $slice argument as an int64 (the server truncates non-integral numbers). */
static bool slice_number(const bson_iter_t *it, int64_t *v)
{
	double d;

	if (!value_number(it, &d))
		return false;
	if (bson_iter_type(it) == BSON_TYPE_INT64)
		*v = bson_iter_int64(it) == INT64_MIN ? INT64_MIN + 1 : bson_iter_int64(it);
	else if (d != d)
		*v = 0;
	else if (d >= 9.2e18)
		*v = INT64_MAX;
	else if (d <= -9.2e18)
		*v = INT64_MIN + 1;
	else
		*v = (int64_t)d;
	return true;
}

static int parse_slice(struct pnode *leaf, const bson_iter_t *arg, const char *path,
		       struct dfs_err *err)
{
	bson_iter_t sub;

	leaf->kind = PK_SLICE;
	if (slice_number(arg, &leaf->limit))
		return DFS_OK;
	if (BSON_ITER_HOLDS_ARRAY(arg) && bson_iter_recurse(arg, &sub) && bson_iter_next(&sub) &&
	    slice_number(&sub, &leaf->skip) && bson_iter_next(&sub) &&
	    slice_number(&sub, &leaf->limit) && !bson_iter_next(&sub)) {
		if (leaf->limit <= 0)
			return dfs_err_set(err, DFS_EINVAL, "$slice limit must be positive at '%s'",
					   path);
		leaf->slice_skip = true;
		return DFS_OK;
	}
	return dfs_err_set(err, DFS_EINVAL,
			   "$slice at '%s' takes a number or an array [skip, limit] of numbers",
			   path);
}

static int parse_elemmatch(struct pnode *leaf, const bson_iter_t *arg, const char *path,
			   struct dfs_err *err)
{
	bson_t filter, child;
	uint32_t len;
	const uint8_t *data;
	bson_t spec;
	int rc;

	leaf->kind = PK_ELEMMATCH;
	if (strchr(path, '.'))
		return dfs_err_set(err, DFS_EINVAL,
				   "cannot use $elemMatch projection on a nested field at '%s'",
				   path);
	if (!BSON_ITER_HOLDS_DOCUMENT(arg))
		return dfs_err_set(err, DFS_EINVAL, "$elemMatch at '%s' needs an object", path);
	bson_iter_document(arg, &len, &data);
	if (!bson_init_static(&spec, data, len))
		return dfs_err_set(err, DFS_EINVAL, "$elemMatch at '%s' is not valid bson", path);
	bson_init(&filter);
	bson_append_document_begin(&filter, path, -1, &child);
	BSON_APPEND_DOCUMENT(&child, "$elemMatch", &spec);
	bson_append_document_end(&filter, &child);
	rc = query_filter_parse(&filter, &leaf->filter, err);
	bson_destroy(&filter);
	if (rc)
		dfs_err_prefix(err, "$elemMatch projection at '%s': ", path);
	return rc;
}

/* Design note 2: records the kind leaf (of spec entry path) implies. */
/* {$meta: "textScore"} (the only metadata a find has here), at the top level. */
static int parse_meta(struct pnode *leaf, const bson_iter_t *arg, struct dfs_err *err)
{
	const char *m = BSON_ITER_HOLDS_UTF8(arg) ? bson_iter_utf8(arg, NULL) : NULL;

	if (!m || strcmp(m, "textScore"))
		return dfs_err_set(err, DFS_EINVAL,
				   "unsupported $meta at '%s': only \"textScore\" is supported",
				   leaf->path);
	if (strchr(leaf->path, '.'))
		return dfs_err_set(err, DFS_EINVAL,
				   "$meta at '%s': only top-level fields are supported",
				   leaf->path);
	leaf->kind = PK_META;
	return DFS_OK;
}

static int note_mode(struct pparse *pp, const struct pnode *leaf, const char *path,
		     struct dfs_err *err)
{
	bool is_id = strcmp(path, "_id") == 0;

	if (leaf->kind == PK_SLICE || leaf->kind == PK_META)
		return DFS_OK;
	if (is_id) {
		pp->id_set = true;
		pp->id_included = leaf->kind == PK_INCLUDE;
		return DFS_OK;
	}
	if (leaf->kind == PK_EXCLUDE) {
		if (pp->mode == PM_INCL)
			return dfs_err_set(
				err, DFS_EINVAL,
				"cannot do exclusion on field '%s' in inclusion projection", path);
		pp->mode = PM_EXCL;
		return DFS_OK;
	}
	if (pp->mode == PM_EXCL) {
		if (leaf->kind == PK_ELEMMATCH)
			return dfs_err_set(
				err, DFS_EINVAL,
				"cannot use $elemMatch on field '%s' in exclusion projection",
				path);
		return dfs_err_set(err, DFS_EINVAL,
				   "cannot do inclusion on field '%s' in exclusion projection",
				   path);
	}
	pp->mode = PM_INCL;
	return DFS_OK;
}

/*
 * Adds the spec entry path (len bytes, dotted) with value it to the tree. Errors:
 * DFS_EINVAL for bad names, collisions, mixed kinds and bad operator arguments.
 */
static int add_entry(struct pparse *pp, const char *path, size_t len, bson_iter_t *it,
		     struct dfs_err *err);

/* A sub-projection {a: {b: 1, ...}}: each field becomes the entry "prefix.field". */
static int add_nested(struct pparse *pp, const char *prefix, bson_iter_t *sub, struct dfs_err *err)
{
	struct dfs_buf b;
	int rc = DFS_OK;

	dfs_buf_init(&b);
	while (bson_iter_next(sub)) {
		dfs_buf_reset(&b);
		dfs_buf_printf(&b, "%s.", prefix);
		dfs_buf_append(&b, bson_iter_key(sub), bson_iter_key_len(sub));
		if ((rc = add_entry(pp, b.data, b.len, sub, err)))
			break;
	}
	dfs_buf_release(&b);
	return rc;
}

static int add_entry(struct pparse *pp, const char *path, size_t len, bson_iter_t *it,
		     struct dfs_err *err)
{
	struct pnode *n = &pp->p->root, *c;
	const char *s = path, *dot;
	bool positional = false;
	struct pnode *leaf;
	size_t plen = len;
	double d;

	if (len == 0 || memchr(path, '\0', len))
		return dfs_err_set(err, DFS_EINVAL, "projection field names must not be empty");
	/* A trailing ".$" is positional; '$' anywhere else is not a field name. */
	if (len >= 2 && path[len - 1] == '$' && path[len - 2] == '.') {
		positional = true;
		plen = len - 2;
	}
	for (s = path;; s = dot + 1) {
		dot = memchr(s, '.', (size_t)(path + plen - s));
		if (!dot)
			dot = path + plen;
		if (dot == s)
			return dfs_err_set(err, DFS_EINVAL,
					   "projection path '%.*s' has an empty component",
					   (int)len, path);
		if (*s == '$') {
			if (dot - s == 1 && s != path)
				return dfs_err_set(
					err, DFS_EINVAL,
					"positional projection '.$' must be at the end of "
					"the path at '%.*s'",
					(int)len, path);
			return dfs_err_set(err, DFS_EINVAL,
					   "projection path '%.*s' has a component starting with "
					   "'$'",
					   (int)len, path);
		}
		if (dot == path + plen)
			break;
	}

	/* Sub-projections recurse before anything is added. */
	if (BSON_ITER_HOLDS_DOCUMENT(it)) {
		bson_iter_t sub;
		const char *op;

		if (!bson_iter_recurse(it, &sub) || !bson_iter_next(&sub))
			return dfs_err_set(err, DFS_EINVAL,
					   "an empty sub-projection is not a valid value at '%.*s'",
					   (int)len, path);
		op = bson_iter_key(&sub);
		if (op[0] != '$' && !positional) {
			char *prefix = bson_strndup(path, len);
			int rc;

			if (!bson_iter_recurse(it, &sub)) {
				bson_free(prefix);
				return dfs_err_set(err, DFS_EINVAL, "bad sub-projection at '%.*s'",
						   (int)len, path);
			}
			rc = add_nested(pp, prefix, &sub, err);
			bson_free(prefix);
			return rc;
		}
	}

	/* Walk or create the nodes of all components but the last (design note 1). */
	s = path;
	for (;;) {
		size_t clen;

		dot = memchr(s, '.', (size_t)(path + plen - s));
		clen = dot ? (size_t)(dot - s) : (size_t)(path + plen - s);
		c = find_child(n, s, clen);
		if (c && (c->kind != PK_INTERNAL || !dot))
			return dfs_err_set(err, DFS_EINVAL, "path collision at %s",
					   len >= strlen(some_leaf_path(c)) ? path
									    : some_leaf_path(c));
		if (!c) {
			struct pnode **tail = &n->child;

			c = calloc(1, sizeof(*c));
			if (!c || !(c->name = bson_strndup(s, clen))) {
				free(c);
				return dfs_err_set(err, DFS_ENOMEM,
						   "out of memory parsing projection");
			}
			c->name_len = (uint32_t)clen;
			c->kind = PK_INTERNAL;
			while (*tail)
				tail = &(*tail)->next;
			*tail = c;
		}
		if (positional)
			c->pos_path = true;
		n = c;
		if (!dot)
			break;
		s = dot + 1;
	}
	leaf = n;
	leaf->path = bson_strndup(path, len);
	if (!leaf->path)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory parsing projection");

	if (positional) {
		if (pp->p->positional)
			return dfs_err_set(
				err, DFS_EINVAL,
				"cannot specify more than one positional projection at '%s'",
				leaf->path);
		if (!(BSON_ITER_HOLDS_BOOL(it) && bson_iter_bool(it)) &&
		    !(value_number(it, &d) && d != 0))
			return dfs_err_set(
				err, DFS_EINVAL,
				"positional projection '%s' must be an inclusion (1 or true)",
				leaf->path);
		leaf->kind = PK_POSITIONAL;
		pp->p->positional = true;
	} else if (BSON_ITER_HOLDS_BOOL(it)) {
		leaf->kind = bson_iter_bool(it) ? PK_INCLUDE : PK_EXCLUDE;
	} else if (value_number(it, &d)) {
		leaf->kind = d != 0 ? PK_INCLUDE : PK_EXCLUDE; /* NaN includes, as trueValue() */
	} else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
		bson_iter_t sub, arg;
		const char *op;
		int rc;

		bson_iter_recurse(it, &sub);
		bson_iter_next(&sub);
		op = bson_iter_key(&sub);
		arg = sub;
		if (bson_iter_next(&sub))
			return dfs_err_set(
				err, DFS_EINVAL,
				"projection operator object at '%s' must have exactly one "
				"field",
				leaf->path);
		if (strcmp(op, "$slice") == 0)
			rc = parse_slice(leaf, &arg, leaf->path, err);
		else if (strcmp(op, "$elemMatch") == 0)
			rc = parse_elemmatch(leaf, &arg, leaf->path, err);
		else if (strcmp(op, "$meta") == 0)
			rc = parse_meta(leaf, &arg, err);
		else
			rc = dfs_err_set(err, DFS_EINVAL,
					 "unsupported projection operator '%s' at '%s'", op,
					 leaf->path);
		if (rc)
			return rc;
		if (leaf->kind == PK_ELEMMATCH)
			pp->p->elemmatch = true;
		if (leaf->kind == PK_META)
			pp->p->meta = true;
	} else {
		return dfs_err_set(err, DFS_EINVAL,
				   "unsupported projection value at '%s': only 1/true, 0/false, "
				   "$slice, $elemMatch and '.$' are supported (not expressions)",
				   leaf->path);
	}
	if (pp->p->positional && pp->p->elemmatch)
		return dfs_err_set(
			err, DFS_EINVAL,
			"cannot use positional projection and $elemMatch together at '%s'",
			leaf->path);
	return note_mode(pp, leaf, leaf->path, err);
}

int query_proj_parse(const bson_t *spec, struct query_proj **out, struct dfs_err *err)
{
	struct pparse pp = {0};
	bson_iter_t it;
	int rc = DFS_OK;

	*out = NULL;
	pp.p = calloc(1, sizeof(*pp.p));
	if (!pp.p)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory parsing projection");
	if (!bson_iter_init(&it, spec)) {
		rc = dfs_err_set(err, DFS_EINVAL, "projection is not valid bson");
		goto done;
	}
	while (bson_iter_next(&it))
		if ((rc = add_entry(&pp, bson_iter_key(&it), bson_iter_key_len(&it), &it, err)))
			goto done;
	if (!pp.p->root.child) {
		pp.p->identity = true;
		goto done;
	}
	pp.p->inclusion = pp.mode == PM_INCL || (pp.mode == PM_UNSET && pp.id_included);
	if (pp.p->inclusion && !find_child(&pp.p->root, "_id", 3)) {
		/* _id is included by default: a leaf placed first, so it is found first. */
		struct pnode *id = calloc(1, sizeof(*id));

		if (!id || !(id->name = bson_strdup("_id"))) {
			free(id);
			rc = dfs_err_set(err, DFS_ENOMEM, "out of memory parsing projection");
			goto done;
		}
		id->name_len = 3;
		id->kind = PK_INCLUDE;
		id->next = pp.p->root.child;
		pp.p->root.child = id;
	}
done:
	if (rc) {
		query_proj_free(pp.p);
		return rc;
	}
	*out = pp.p;
	return DFS_OK;
}

/* ---- applying ---------------------------------------------------------------------- */

struct papply {
	const struct query_proj *p;
	int elem_index; /* for the positional leaf */
	struct dfs_err *err;
};

static const char *index_key(uint32_t i, char *buf, size_t size)
{
	const char *k;

	bson_uint32_to_string(i, &k, buf, size);
	return k;
}

/* Appends the $slice of array it under key (design note 5). */
static void append_slice(const struct pnode *n, bson_iter_t *it, bson_t *out)
{
	bson_iter_t sub;
	bson_t arr;
	int64_t len = 0, from, to, i = 0;
	uint32_t k = 0;
	char buf[16];

	if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &sub)) {
		bson_append_iter(out, bson_iter_key(it), (int)bson_iter_key_len(it), it);
		return;
	}
	while (bson_iter_next(&sub))
		len++;
	if (!n->slice_skip) {
		if (n->limit >= 0) {
			from = 0;
			to = n->limit < len ? n->limit : len;
		} else {
			from = -n->limit < len ? len + n->limit : 0;
			to = len;
		}
	} else {
		if (n->skip >= 0)
			from = n->skip < len ? n->skip : len;
		else
			from = -n->skip < len ? len + n->skip : 0;
		to = n->limit < len - from ? from + n->limit : len;
	}
	bson_append_array_begin(out, bson_iter_key(it), (int)bson_iter_key_len(it), &arr);
	bson_iter_recurse(it, &sub);
	while (bson_iter_next(&sub) && i < to) {
		if (i++ >= from)
			bson_append_iter(&arr, index_key(k++, buf, sizeof(buf)), -1, &sub);
	}
	bson_append_array_end(out, &arr);
}

/* Finds element idx of array it into *elem. */
static bool array_elem(bson_iter_t *it, int idx, bson_iter_t *elem)
{
	int i = 0;

	if (idx < 0 || !bson_iter_recurse(it, elem))
		return false;
	while (bson_iter_next(elem))
		if (i++ == idx)
			return true;
	return false;
}

static int incl_fields(const struct papply *a, const struct pnode *n, bson_iter_t *it, bson_t *out,
		       bool root, bool pos_pending);
static int incl_array(const struct papply *a, const struct pnode *n, bson_iter_t *sub, bson_t *out,
		      bool pos_pending);
static int incl_elem(const struct papply *a, const struct pnode *n, bson_iter_t *sub, bson_t *out,
		     uint32_t *k, bool pos_pending);

/* The inclusion of the element it under child c of the tree (design note 3). */
static int incl_value(const struct papply *a, const struct pnode *c, bson_iter_t *it,
		      const char *key, int klen, bson_t *out, bool pos_pending)
{
	bson_iter_t sub, elem;
	bson_t child;
	int rc = DFS_OK;

	switch (c->kind) {
	case PK_INCLUDE:
		bson_append_iter(out, key, klen, it);
		return DFS_OK;
	case PK_EXCLUDE:
	case PK_ELEMMATCH: /* appended after the other fields */
	case PK_META:
		return DFS_OK;
	case PK_SLICE:
		append_slice(c, it, out);
		return DFS_OK;
	case PK_POSITIONAL:
		if (!pos_pending || !BSON_ITER_HOLDS_ARRAY(it)) {
			bson_append_iter(out, key, klen, it);
			return DFS_OK;
		}
		if (!array_elem(it, a->elem_index, &elem))
			return dfs_err_set(a->err, DFS_EINVAL,
					   "positional operator '.$' element mismatch at '%s'",
					   c->path);
		bson_append_array_begin(out, key, klen, &child);
		bson_append_iter(&child, "0", 1, &elem);
		bson_append_array_end(out, &child);
		return DFS_OK;
	case PK_INTERNAL:
		break;
	}
	if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &sub)) {
		bson_append_document_begin(out, key, klen, &child);
		rc = incl_fields(a, c, &sub, &child, false, pos_pending);
		bson_append_document_end(out, &child);
	} else if (BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &sub)) {
		bson_append_array_begin(out, key, klen, &child);
		if (c->pos_path && pos_pending) {
			if (!array_elem(it, a->elem_index, &elem))
				rc = dfs_err_set(
					a->err, DFS_EINVAL,
					"positional operator '.$' element mismatch at '%s'",
					some_leaf_path(c));
			else
				rc = incl_elem(a, c, &elem, &child, &(uint32_t){0}, false);
		} else {
			rc = incl_array(a, c, &sub, &child, pos_pending);
		}
		bson_append_array_end(out, &child);
	}
	return rc;
}

/* One array element (sub positioned on it) under internal node n, appended as element k
 * when it is a document or an array; anything else is dropped (design note 3). */
static int incl_elem(const struct papply *a, const struct pnode *n, bson_iter_t *sub, bson_t *out,
		     uint32_t *k, bool pos_pending)
{
	bson_iter_t inner;
	bson_t child;
	char buf[16];
	int rc = DFS_OK;

	if (BSON_ITER_HOLDS_DOCUMENT(sub) && bson_iter_recurse(sub, &inner)) {
		bson_append_document_begin(out, index_key((*k)++, buf, sizeof(buf)), -1, &child);
		rc = incl_fields(a, n, &inner, &child, false, pos_pending);
		bson_append_document_end(out, &child);
	} else if (BSON_ITER_HOLDS_ARRAY(sub) && bson_iter_recurse(sub, &inner)) {
		bson_append_array_begin(out, index_key((*k)++, buf, sizeof(buf)), -1, &child);
		rc = incl_array(a, n, &inner, &child, pos_pending);
		bson_append_array_end(out, &child);
	}
	return rc;
}

/* The elements of an array under internal node n (sub positioned before the first). */
static int incl_array(const struct papply *a, const struct pnode *n, bson_iter_t *sub, bson_t *out,
		      bool pos_pending)
{
	uint32_t k = 0;
	int rc = DFS_OK;

	while (rc == DFS_OK && bson_iter_next(sub))
		rc = incl_elem(a, n, sub, out, &k, pos_pending);
	return rc;
}

static int incl_fields(const struct papply *a, const struct pnode *n, bson_iter_t *it, bson_t *out,
		       bool root, bool pos_pending)
{
	const struct pnode *c;
	int rc;

	while (bson_iter_next(it)) {
		const char *key = bson_iter_key(it);
		uint32_t klen = bson_iter_key_len(it);

		if (root && klen == 3 && memcmp(key, "_id", 3) == 0)
			continue; /* written first */
		if (!(c = find_child(n, key, klen)))
			continue;
		if ((rc = incl_value(a, c, it, key, (int)klen, out, pos_pending)))
			return rc;
	}
	return DFS_OK;
}

/* The first element of array field it that matches $elemMatch leaf c, as [element]. */
static void append_elemmatch(const struct pnode *c, const bson_t *doc, bson_t *out)
{
	bson_iter_t it, elem;
	bson_t arr;
	int idx = -1;

	if (!bson_iter_init_find_w_len(&it, doc, c->name, (int)c->name_len) ||
	    !BSON_ITER_HOLDS_ARRAY(&it) || !query_filter_match(c->filter, doc, &idx))
		return;
	if (!array_elem(&it, idx, &elem)) {
		/* No index from the matcher: test the elements one at a time. */
		bool found = false;

		if (!bson_iter_recurse(&it, &elem))
			return;
		while (!found && bson_iter_next(&elem)) {
			bson_t one, one_arr;

			bson_init(&one);
			bson_append_array_begin(&one, c->name, (int)c->name_len, &one_arr);
			bson_append_iter(&one_arr, "0", 1, &elem);
			bson_append_array_end(&one, &one_arr);
			found = query_filter_match(c->filter, &one, NULL);
			bson_destroy(&one);
		}
		if (!found)
			return;
	}
	bson_append_array_begin(out, c->name, (int)c->name_len, &arr);
	bson_append_iter(&arr, "0", 1, &elem);
	bson_append_array_end(out, &arr);
}

/* Design note 4. */
static void excl_array(const struct pnode *n, bson_iter_t *sub, bson_t *out);

static void excl_fields(const struct pnode *n, bson_iter_t *it, bson_t *out)
{
	const struct pnode *c;
	bson_iter_t sub;
	bson_t child;

	while (bson_iter_next(it)) {
		const char *key = bson_iter_key(it);
		int klen = (int)bson_iter_key_len(it);

		if (!(c = find_child(n, key, (size_t)klen)) || c->kind == PK_INCLUDE) {
			bson_append_iter(out, key, klen, it);
		} else if (c->kind == PK_SLICE) {
			append_slice(c, it, out);
		} else if (c->kind != PK_INTERNAL) {
			continue; /* PK_EXCLUDE */
		} else if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &sub)) {
			bson_append_document_begin(out, key, klen, &child);
			excl_fields(c, &sub, &child);
			bson_append_document_end(out, &child);
		} else if (BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &sub)) {
			bson_append_array_begin(out, key, klen, &child);
			excl_array(c, &sub, &child);
			bson_append_array_end(out, &child);
		} else {
			bson_append_iter(out, key, klen, it);
		}
	}
}

static void excl_array(const struct pnode *n, bson_iter_t *sub, bson_t *out)
{
	bson_iter_t inner;
	bson_t child;

	while (bson_iter_next(sub)) {
		const char *key = bson_iter_key(sub);
		int klen = (int)bson_iter_key_len(sub);

		if (BSON_ITER_HOLDS_DOCUMENT(sub) && bson_iter_recurse(sub, &inner)) {
			bson_append_document_begin(out, key, klen, &child);
			excl_fields(n, &inner, &child);
			bson_append_document_end(out, &child);
		} else if (BSON_ITER_HOLDS_ARRAY(sub) && bson_iter_recurse(sub, &inner)) {
			bson_append_array_begin(out, key, klen, &child);
			excl_array(n, &inner, &child);
			bson_append_array_end(out, &child);
		} else {
			bson_append_iter(out, key, klen, sub);
		}
	}
}

static int proj_apply(const struct query_proj *p, const bson_t *doc, int elem_index,
		      const double *score, bool have_meta, bson_t *out, struct dfs_err *err);

int query_proj_apply(const struct query_proj *p, const bson_t *doc, int elem_index, bson_t *out,
		     struct dfs_err *err)
{
	return proj_apply(p, doc, elem_index, NULL, false, out, err);
}

int query_proj_apply_score(const struct query_proj *p, const bson_t *doc, int elem_index,
			   const double *score, bson_t *out, struct dfs_err *err)
{
	return proj_apply(p, doc, elem_index, score, true, out, err);
}

bool query_proj_has_meta(const struct query_proj *p)
{
	return p && p->meta;
}

/* The $meta fields, after all the others (in spec order); none when the document has no
 * score (MongoDB's $meta of missing metadata is missing). */
static int append_meta(const struct query_proj *p, const double *score, bool have_meta, bson_t *out,
		       struct dfs_err *err)
{
	for (const struct pnode *c = p->root.child; c; c = c->next) {
		if (c->kind != PK_META)
			continue;
		if (!have_meta)
			return dfs_err_set(err, DFS_EINVAL,
					   "query requires text score metadata, but it is not "
					   "available");
		if (score)
			bson_append_double(out, c->name, (int)c->name_len, *score);
	}
	return DFS_OK;
}

static int proj_apply(const struct query_proj *p, const bson_t *doc, int elem_index,
		      const double *score, bool have_meta, bson_t *out, struct dfs_err *err)
{
	struct papply a = {.p = p, .elem_index = elem_index, .err = err};
	const struct pnode *c;
	bson_iter_t it;
	int rc = DFS_OK;

	if (p->identity) {
		bson_concat(out, doc);
		return DFS_OK;
	}
	if (!bson_iter_init(&it, doc))
		return dfs_err_set(err, DFS_EINVAL, "document to project is not valid bson");
	if (!p->inclusion) {
		excl_fields(&p->root, &it, out);
		if (p->meta && (rc = append_meta(p, score, have_meta, out, err)))
			bson_reinit(out);
		return rc;
	}
	if (p->positional && elem_index < 0)
		return dfs_err_set(err, DFS_EINVAL,
				   "positional operator '.$' needs a matching array element in the "
				   "filter");
	c = find_child(&p->root, "_id", 3);
	if (c && bson_iter_init_find(&it, doc, "_id"))
		rc = incl_value(&a, c, &it, "_id", 3, out, true);
	if (rc == DFS_OK && bson_iter_init(&it, doc))
		rc = incl_fields(&a, &p->root, &it, out, true, true);
	if (rc == DFS_OK && p->elemmatch)
		for (c = p->root.child; c; c = c->next)
			if (c->kind == PK_ELEMMATCH)
				append_elemmatch(c, doc, out);
	if (rc == DFS_OK && p->meta)
		rc = append_meta(p, score, have_meta, out, err);
	if (rc)
		bson_reinit(out);
	return rc;
}
