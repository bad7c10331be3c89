/*
 * update.c - MongoDB's update operators as a pure engine: parses an update document (operators
 * or a replacement) with its arrayFilters once, and applies it to one document at a time,
 * producing the new document. Also builds the base document of an upsert from a filter.
 *
 * It does not read or write the store, choose documents (the caller matches the filter and
 * passes the positional '$' index from query_filter_match), or generate an _id for upserts.
 * Error messages keep MongoDB's wording (and its capitals), unlike the rest of docfs, so that a
 * MongoDB user recognizes them and can look them up.
 *
 * Design notes
 *
 * 1. Parsing builds a trie of the update's paths (as MongoDB's UpdateObjectNode does): one
 *    inner node per path component, a leaf (struct uleaf) per operator application. Two
 *    operations on the same path, or on a path and one of its prefixes, meet in the trie and
 *    are rejected at parse time ("Updating the path 'a.b' would create a conflict at 'a'").
 *    $rename puts two leaves in the trie: its source (removal) and its target.
 * 2. Applying converts the document into a small mutable tree (struct unode), walks the trie
 *    over it, and serializes the tree into out. Children of a trie node are applied in
 *    MongoDB 5.0+ order: names that are both numeric in numeric order, otherwise bytewise
 *    (lexicographic) order. New fields are appended to the end of their document in that
 *    order, existing ones are changed in place.
 * 3. A path that does not exist is created lazily: a slot (struct slot) describes where a
 *    value is or would be, and the first operation that stores a value creates the missing
 *    intermediate documents. Operations that only remove or read ($unset, $pop, $pull,
 *    $pullAll, $rename's source) never create anything. A path that goes on below an
 *    existing scalar (or below an array with a non-numeric component) is "blocked": storing
 *    there is MongoDB's "Cannot create field 'b' in element {a: 1}", removing is a no-op.
 *    A numeric component past the end of an array pads it with nulls.
 * 4. Positional forms: '$' is the component named by elem_index (MongoDB substitutes the
 *    matched position); '$[]' applies the subtree to every element; '$[id]' to the elements
 *    that match the array filter of id (the element wrapped as {id: element}), all of a
 *    node's filters matched before any of its children changes the array. Because
 *    these resolve only at apply time, children of one node that land on one element are
 *    checked before the array changes (array_conflicts), and every leaf application records
 *    the concrete path it touched so that two that meet deeper (equal or prefix) are also
 *    "Update created a conflict at '...'".
 * 5. The result is checked last: _id unchanged (by value, as MongoDB compares it), then
 *    store_doc_validate. *changed is a byte comparison of the result with the input.
 * 6. Numbers: $inc/$mul widen int32 -> int64 -> double -> decimal128 by the wider operand;
 *    an int32 result that overflows becomes int64, an int64 overflow is an error (MongoDB:
 *    integer operations that exceed the 64-bit range produce an error). Decimal128 results
 *    follow IEEE 754-2008 (34 digits, half to even) through dec.c, exactly for every
 *    operand. A double meets a decimal as its 15-digit decimal.
 * 7. Memory is bounded before validation: every leaf counts (a lower bound of) the bytes it
 *    adds, nulls of padding included, and applying stops with DFS_EFBIG once that passes the
 *    size limit plus the input's size (what a storable result can have added, since at most
 *    the whole input is removed). '$[]' copying a large value into every element of a large
 *    array would otherwise allocate without bound. The exact check is store_doc_validate.
 * 9. The tree lives in a per-thread arena for one application (ua_enter .. ua_leave): nodes,
 *    their child arrays and keys are carved from 64 KiB chunks and freed all at once, and
 *    scalar values point at their bytes (in the input document, the update's operands or
 *    the upsert filter's copies, which outlive the tree) instead of being copied. An $inc
 *    into a document of 1,440 fields made 4,300 mallocs and frees before (a third of the
 *    20,000-upsert report's time went to building, writing and freeing the tree).
 */
#include "dec.h"
#include "query_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MongoDB's limit on nulls added to reach a numeric path component past an array's end. */
#define MAX_PADDING 1500000

/* ---- small helpers ----------------------------------------------------------------- */

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size ? size : 1);
	if (!p) {
		fprintf(stderr, "docfs: out of memory\n");
		abort();
	}
	return p;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "docfs: out of memory\n");
		abort();
	}
	return p;
}

static char *xstrndup(const char *s, size_t n)
{
	char *p = xcalloc(n + 1, 1);

	memcpy(p, s, n);
	return p;
}

static char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

/* ---- the tree's arena (note 9) ------------------------------------------------------- */

#define UA_CHUNK (64 * 1024)

struct uchunk {
	struct uchunk *next;
	size_t size;
	_Alignas(16) char data[];
};

static _Thread_local struct {
	struct uchunk *head; /* Owned: the chunks, newest first */
	char *cur, *end;     /* free space in head */
	int depth;	     /* nested applications (an update pipeline's inner updates) */
	bool corrupt;	     /* un_from_container met bytes that are not BSON */
} ua;

static void *ua_alloc(size_t n)
{
	char *p;

	n = (n + 15) & ~(size_t)15;
	if ((size_t)(ua.end - ua.cur) < n) {
		size_t size = n > UA_CHUNK ? n : UA_CHUNK;
		struct uchunk *c = malloc(sizeof(*c) + size);

		if (!c) {
			fprintf(stderr, "docfs: out of memory\n");
			abort();
		}
		c->next = ua.head;
		c->size = size;
		ua.head = c;
		ua.cur = c->data;
		ua.end = c->data + size;
	}
	p = ua.cur;
	ua.cur += n;
	return p;
}

static void ua_enter(void)
{
	ua.depth++;
}

/* Ends an application: the outermost frees every chunk (none is kept for the next one: a
 * worker thread that FUSE ends would leak it). */
static void ua_leave(void)
{
	struct uchunk *c, *next;

	if (--ua.depth > 0)
		return;
	for (c = ua.head; c; c = next) {
		next = c->next;
		free(c);
	}
	ua.head = NULL;
	ua.cur = ua.end = NULL;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

static bool is_number(bson_type_t t)
{
	return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
	       t == BSON_TYPE_DECIMAL128;
}

/* Numeric-aware order of field names (MongoDB 5.0+): both numeric by value, else bytewise. */
static int name_cmp(const char *a, const char *b)
{
	if (all_digits(a) && all_digits(b)) {
		size_t la, lb;

		while (*a == '0' && a[1])
			a++;
		while (*b == '0' && b[1])
			b++;
		la = strlen(a);
		lb = strlen(b);
		if (la != lb)
			return la < lb ? -1 : 1;
	}
	return strcmp(a, b);
}

/* ---- the mutable document tree ------------------------------------------------------ */

struct unode {
	bson_type_t type;    /* BSON_TYPE_DOCUMENT, BSON_TYPE_ARRAY, or a scalar type */
	bson_value_t v;	     /* scalars: Owned copy of the value */
	size_t n, cap;	     /* containers: children used, allocated */
	char **keys;	     /* documents: Owned field names (n of them) */
	struct unode **kids; /* containers: Owned children (n of them) */
};

static struct unode *un_new(bson_type_t type)
{
	struct unode *u = ua_alloc(sizeof(*u));

	memset(u, 0, sizeof(*u));
	u->type = type;
	u->v.value_type = type;
	return u;
}

/* Drops u: its memory goes with the arena (note 9). */
static void un_free(struct unode *u)
{
	(void)u;
}

static void un_push(struct unode *c, const char *key, size_t klen, struct unode *kid)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4;
		struct unode **kids = ua_alloc(cap * sizeof(*kids));

		if (c->n)
			memcpy(kids, c->kids, c->n * sizeof(*kids));
		c->kids = kids;
		if (c->type == BSON_TYPE_DOCUMENT) {
			char **keys = ua_alloc(cap * sizeof(*keys));

			if (c->n)
				memcpy(keys, c->keys, c->n * sizeof(*keys));
			c->keys = keys;
		}
		c->cap = cap;
	}
	if (c->type == BSON_TYPE_DOCUMENT) {
		char *k = ua_alloc(klen + 1);

		memcpy(k, key, klen);
		k[klen] = '\0';
		c->keys[c->n] = k;
	}
	c->kids[c->n++] = kid;
}

static struct unode *un_from_iter(bson_iter_t *it);

static struct unode *un_from_container(const uint8_t *data, uint32_t len, bson_type_t type)
{
	struct unode *u = un_new(type);
	bson_iter_t it;

	if (bson_iter_init_from_data(&it, data, len)) {
		while (bson_iter_next(&it))
			un_push(u, bson_iter_key(&it), bson_iter_key_len(&it), un_from_iter(&it));
		if (it.err_off)
			ua.corrupt = true; /* an iteration stops early only there */
	} else {
		ua.corrupt = true;
	}
	return u;
}

static struct unode *un_from_value(const bson_value_t *v)
{
	struct unode *u;

	if (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY)
		return un_from_container(v->value.v_doc.data, v->value.v_doc.data_len,
					 v->value_type);
	u = un_new(v->value_type);
	u->v = *v; /* its bytes outlive the tree (note 9) */
	return u;
}

static struct unode *un_from_iter(bson_iter_t *it)
{
	return un_from_value(bson_iter_value(it));
}

static struct unode *un_null(void)
{
	return un_new(BSON_TYPE_NULL);
}

static bool un_container(const struct unode *u)
{
	return u->type == BSON_TYPE_DOCUMENT || u->type == BSON_TYPE_ARRAY;
}

static void un_append(bson_t *out, const char *key, size_t klen, const struct unode *u);

static void un_append_kids(bson_t *out, const struct unode *u)
{
	for (size_t i = 0; i < u->n; i++) {
		if (u->type == BSON_TYPE_DOCUMENT) {
			un_append(out, u->keys[i], strlen(u->keys[i]), u->kids[i]);
		} else {
			char kbuf[16];
			const char *key;
			size_t klen = bson_uint32_to_string((uint32_t)i, &key, kbuf, sizeof(kbuf));

			un_append(out, key, klen, u->kids[i]);
		}
	}
}

static void un_append(bson_t *out, const char *key, size_t klen, const struct unode *u)
{
	bson_t child;

	if (u->type == BSON_TYPE_DOCUMENT) {
		bson_append_document_begin(out, key, (int)klen, &child);
		un_append_kids(&child, u);
		bson_append_document_end(out, &child);
	} else if (u->type == BSON_TYPE_ARRAY) {
		bson_append_array_begin(out, key, (int)klen, &child);
		un_append_kids(&child, u);
		bson_append_array_end(out, &child);
	} else {
		bson_append_value(out, key, (int)klen, &u->v);
	}
}

/* A view of u as a bson_value_t in *v; containers are serialized into tmp (initialised here,
 * bson_destroy by the caller). */
static void un_value(const struct unode *u, bson_t *tmp, bson_value_t *v)
{
	bson_init(tmp);
	if (!un_container(u)) {
		*v = u->v;
		return;
	}
	un_append_kids(tmp, u);
	v->value_type = u->type;
	v->value.v_doc.data = (uint8_t *)bson_get_data(tmp);
	v->value.v_doc.data_len = tmp->len;
}

static int un_compare(const struct unode *a, const struct unode *b)
{
	bson_t ta, tb;
	bson_value_t va, vb;
	int c;

	un_value(a, &ta, &va);
	un_value(b, &tb, &vb);
	c = store_value_compare(&va, &vb);
	bson_destroy(&ta);
	bson_destroy(&tb);
	return c;
}

static int un_compare_value(const struct unode *a, const bson_value_t *b)
{
	bson_t ta;
	bson_value_t va;
	int c;

	un_value(a, &ta, &va);
	c = store_value_compare(&va, b);
	bson_destroy(&ta);
	return c;
}

/* Index of field key in document u, or -1. */
static long un_find(const struct unode *u, const char *key)
{
	for (size_t i = 0; i < u->n; i++)
		if (!strcmp(u->keys[i], key))
			return (long)i;
	return -1;
}

static void un_remove(struct unode *u, size_t i)
{
	un_free(u->kids[i]);
	memmove(u->kids + i, u->kids + i + 1, (u->n - i - 1) * sizeof(*u->kids));
	if (u->keys)
		memmove(u->keys + i, u->keys + i + 1, (u->n - i - 1) * sizeof(*u->keys));
	u->n--;
}

/* Compact EJSON of u for messages, into buf. */
static const char *un_render(const struct unode *u, char *buf, size_t size)
{
	struct dfs_err e = {0};
	struct dfs_buf b;
	bson_t t;
	bson_value_t v;

	dfs_buf_init(&b);
	un_value(u, &t, &v);
	if (store_codec_render_value(&v, &b, &e))
		dfs_buf_puts(&b, "?");
	bson_destroy(&t);
	snprintf(buf, size, "%s", b.data ? b.data : "");
	dfs_buf_release(&b);
	return buf;
}

static const char *value_render(const bson_value_t *v, char *buf, size_t size)
{
	struct dfs_err e = {0};
	struct dfs_buf b;

	dfs_buf_init(&b);
	if (store_codec_render_value(v, &b, &e))
		dfs_buf_puts(&b, "?");
	snprintf(buf, size, "%s", b.data ? b.data : "");
	dfs_buf_release(&b);
	return buf;
}

/* ---- the parsed update -------------------------------------------------------------- */

enum uop {
	U_SET,
	U_UNSET,
	U_INC,
	U_MUL,
	U_MIN,
	U_MAX,
	U_CURDATE,
	U_SETONINSERT,
	U_PUSH,
	U_ADDTOSET,
	U_POP,
	U_PULL,
	U_PULLALL,
	U_RENAME_FROM,
	U_RENAME_TO,
};

enum pull_kind {
	PULL_EQ,   /* elements equal to the value */
	PULL_WRAP, /* {$gt: ..}, regex: the element wrapped as {v: element} against {v: cond} */
	PULL_OBJ,  /* {field: cond, ...}: document elements matching the filter */
};

struct uleaf {
	int op;			 /* enum uop */
	char *path;		 /* Owned: the path as written */
	char *opname;		 /* Owned: the operator as written ("$set") */
	bson_value_t arg;	 /* Owned: the operand ($push/$addToSet: the $each array) */
	bool ts;		 /* $currentDate: a timestamp (else a date) */
	bool has_slice;		 /* $push: $slice given */
	int64_t slice;		 /* $push: $slice */
	bool has_pos;		 /* $push: $position given */
	int64_t pos;		 /* $push: $position */
	int sort;		 /* $push: 0 none, 1 whole elements, 2 by pattern */
	int sort_dir;		 /* $push: whole-element direction (1, -1) */
	bson_t *sort_pat;	 /* $push: Owned pattern document (sort == 2) */
	int pull;		 /* $pull: enum pull_kind */
	struct query_expr *cond; /* $pull: Owned filter (PULL_WRAP, PULL_OBJ) */
	char **src;		 /* $rename: Owned source components (NULL-terminated) */
	char *src_path;		 /* $rename: Owned source path as written */
};

enum tkind { T_FIELD, T_POS, T_ALL, T_IDENT };

struct tnode {
	int kind;	     /* enum tkind */
	char *name;	     /* Owned: the component as written */
	char *ident;	     /* T_IDENT: Owned identifier */
	struct uleaf *leaf;  /* Owned: set on leaves (which have no children) */
	size_t n, cap;	     /* children */
	struct tnode **kids; /* Owned, sorted by name_cmp once parsing ends */
};

struct afilter {
	char *ident;		 /* Owned: the identifier (top-level field name) */
	struct query_expr *expr; /* Owned: the parsed filter */
	bool used;		 /* some path names $[ident] */
};

struct query_update {
	bool replacement; /* a replacement document (no operators) */
	bson_t *repl;	  /* the replacement: Owned copy (bson_t wants 128-byte alignment) */
	struct tnode root;
	struct afilter *af; /* Owned: the array filters */
	size_t naf;
	struct query_pipeline *pipe; /* Owned: an update pipeline (note 8), or NULL */
	const struct query_let *let; /* Borrowed: the pipeline's variables, or NULL */
};

static void leaf_free(struct uleaf *l)
{
	if (!l)
		return;
	free(l->path);
	free(l->opname);
	bson_value_destroy(&l->arg);
	if (l->sort_pat)
		bson_destroy(l->sort_pat);
	query_expr_free(l->cond);
	if (l->src) {
		for (char **p = l->src; *p; p++)
			free(*p);
		free(l->src);
	}
	free(l->src_path);
	free(l);
}

static void tnode_release(struct tnode *t)
{
	for (size_t i = 0; i < t->n; i++) {
		tnode_release(t->kids[i]);
		free(t->kids[i]);
	}
	free(t->kids);
	free(t->name);
	free(t->ident);
	leaf_free(t->leaf);
}

void query_update_free(struct query_update *u)
{
	if (!u)
		return;
	if (u->repl)
		bson_destroy(u->repl);
	query_pipeline_free(u->pipe);
	tnode_release(&u->root);
	for (size_t i = 0; i < u->naf; i++) {
		free(u->af[i].ident);
		query_expr_free(u->af[i].expr);
	}
	free(u->af);
	free(u);
}

bool query_update_is_replacement(const struct query_update *u)
{
	return u->replacement;
}

/* ---- parsing: paths and the trie ---------------------------------------------------- */

/* Splits a dotted path into components (NULL-terminated, Owned). */
static char **split_path(const char *path, const char *op, struct dfs_err *err, int *nout)
{
	char **c;
	int n = 1, k = 0;
	const char *s = path, *dot;

	if (!*path) {
		dfs_err_set(err, DFS_EINVAL, "an empty update path is not valid (in %s)", op);
		return NULL;
	}
	for (const char *p = path; *p; p++)
		n += *p == '.';
	/* every component is a level of nesting: a longer path can never exist or be stored */
	if (n > DFS_MAX_DEPTH) {
		dfs_err_set(err, DFS_EINVAL,
			    "the update path '%.60s...' has more than %d components", path,
			    DFS_MAX_DEPTH);
		return NULL;
	}
	c = xcalloc((size_t)n + 1, sizeof(*c));
	for (;;) {
		dot = strchr(s, '.');
		size_t len = dot ? (size_t)(dot - s) : strlen(s);

		if (!len) {
			for (int i = 0; i < k; i++)
				free(c[i]);
			free(c);
			dfs_err_set(err, DFS_EINVAL,
				    "The update path '%s' contains an empty field name, which is "
				    "not allowed",
				    path);
			return NULL;
		}
		c[k++] = xstrndup(s, len);
		if (!dot)
			break;
		s = dot + 1;
	}
	*nout = n;
	return c;
}

static void free_comps(char **c)
{
	if (!c)
		return;
	for (char **p = c; *p; p++)
		free(*p);
	free(c);
}

/* The kind of a path component; *ident gets the identifier of $[ident]. */
static int comp_kind(const char *c, const char **ident, size_t *ilen)
{
	size_t n = strlen(c);

	if (!strcmp(c, "$"))
		return T_POS;
	if (n >= 3 && c[0] == '$' && c[1] == '[' && c[n - 1] == ']') {
		if (n == 3)
			return T_ALL;
		*ident = c + 2;
		*ilen = n - 3;
		return T_IDENT;
	}
	return T_FIELD;
}

/* Checks the components of a path: '$' forms only where MongoDB allows them. */
static int check_comps(char **c, const char *path, bool dynamic_ok, const char *what,
		       struct dfs_err *err)
{
	int npos = 0;

	for (int i = 0; c[i]; i++) {
		const char *id;
		size_t ilen;
		int k = comp_kind(c[i], &id, &ilen);

		if (k == T_FIELD) {
			if (c[i][0] == '$')
				return dfs_err_set(err, DFS_EINVAL,
						   "The dollar ($) prefixed field '%s' in '%s' is "
						   "not valid for storage",
						   c[i], path);
			continue;
		}
		if (!dynamic_ok)
			return dfs_err_set(err, DFS_EINVAL,
					   "The %s field for $rename may not be dynamic: %s", what,
					   path);
		if (i == 0)
			return dfs_err_set(err, DFS_EINVAL,
					   "Cannot have positional (i.e. '$') element in the first "
					   "position in path '%s'",
					   path);
		if (k == T_POS && ++npos > 1)
			return dfs_err_set(err, DFS_EINVAL,
					   "Too many positional (i.e. '$') elements found in path "
					   "'%s'",
					   path);
	}
	return 0;
}

static struct tnode *tnode_child(struct tnode *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->kids[i]->name, name))
			return t->kids[i];
	return NULL;
}

static struct tnode *tnode_add(struct tnode *t, const char *name)
{
	struct tnode *k = xcalloc(1, sizeof(*k));
	const char *id = NULL;
	size_t ilen = 0;

	k->name = xstrdup(name);
	k->kind = comp_kind(name, &id, &ilen);
	if (k->kind == T_IDENT)
		k->ident = xstrndup(id, ilen);
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 4;
		t->kids = xrealloc(t->kids, t->cap * sizeof(*t->kids));
	}
	t->kids[t->n++] = k;
	return k;
}

/* Inserts leaf l at the components c (takes l, also on failure). */
static int trie_insert(struct query_update *u, char **c, struct uleaf *l, struct dfs_err *err)
{
	struct tnode *t = &u->root, *k;
	struct dfs_buf prefix;
	int i;

	dfs_buf_init(&prefix);
	for (i = 0; c[i]; i++) {
		if (i)
			dfs_buf_putc(&prefix, '.');
		dfs_buf_puts(&prefix, c[i]);
		k = tnode_child(t, c[i]);
		if (k && (k->leaf || !c[i + 1])) {
			dfs_err_set(err, DFS_EINVAL,
				    "Updating the path '%s' would create a conflict at '%s'",
				    l->path, prefix.data);
			dfs_buf_release(&prefix);
			leaf_free(l);
			return DFS_EINVAL;
		}
		if (!k)
			k = tnode_add(t, c[i]);
		t = k;
	}
	t->leaf = l;
	dfs_buf_release(&prefix);
	return 0;
}

static void trie_sort(struct tnode *t)
{
	/* insertion sort: children are few */
	for (size_t i = 1; i < t->n; i++) {
		struct tnode *k = t->kids[i];
		size_t j = i;

		while (j > 0 && name_cmp(t->kids[j - 1]->name, k->name) > 0) {
			t->kids[j] = t->kids[j - 1];
			j--;
		}
		t->kids[j] = k;
	}
	for (size_t i = 0; i < t->n; i++)
		trie_sort(t->kids[i]);
}

/* Marks the identifiers the trie uses; an undefined one is an error. */
static int trie_idents(struct query_update *u, struct tnode *t, struct dfs_buf *path,
		       struct dfs_err *err)
{
	size_t mark = path->len;

	for (size_t i = 0; i < t->n; i++) {
		struct tnode *k = t->kids[i];

		path->len = mark;
		if (mark)
			dfs_buf_putc(path, '.');
		dfs_buf_puts(path, k->name);
		if (k->kind == T_IDENT) {
			size_t j;

			for (j = 0; j < u->naf; j++)
				if (!strcmp(u->af[j].ident, k->ident))
					break;
			if (j == u->naf) {
				const char *full = k->leaf ? k->leaf->path : path->data;

				return dfs_err_set(err, DFS_EINVAL,
						   "No array filter found for identifier '%s' in "
						   "path '%s'",
						   k->ident, full);
			}
			u->af[j].used = true;
		}
		if (trie_idents(u, k, path, err))
			return err->code;
	}
	path->len = mark;
	if (path->data)
		path->data[mark] = '\0';
	return 0;
}

/* ---- parsing: operators ------------------------------------------------------------- */

enum op_id {
	OP_SET,
	OP_UNSET,
	OP_INC,
	OP_MUL,
	OP_MIN,
	OP_MAX,
	OP_CURDATE,
	OP_SETONINSERT,
	OP_PUSH,
	OP_ADDTOSET,
	OP_POP,
	OP_PULL,
	OP_PULLALL,
	OP_RENAME,
	OP_UNKNOWN
};

static int op_lookup(const char *name)
{
	static const char *const names[] = {
		"$set",		"$unset", "$inc",      "$mul", "$min",	"$max",	    "$currentDate",
		"$setOnInsert", "$push",  "$addToSet", "$pop", "$pull", "$pullAll", "$rename"};

	for (int i = 0; i < OP_UNKNOWN; i++)
		if (!strcmp(name, names[i]))
			return i;
	return OP_UNKNOWN;
}

static bool integral(const bson_value_t *v, int64_t *out)
{
	switch (v->value_type) {
	case BSON_TYPE_INT32:
		*out = v->value.v_int32;
		return true;
	case BSON_TYPE_INT64:
		*out = v->value.v_int64;
		return true;
	case BSON_TYPE_DOUBLE: {
		double d = v->value.v_double;

		if (!(d >= -9.2e18 && d <= 9.2e18) || d != floor(d))
			return false;
		*out = (int64_t)d;
		return true;
	}
	case BSON_TYPE_DECIMAL128: {
		char s[BSON_DECIMAL128_STRING];
		char *end;
		double d;

		bson_decimal128_to_string(&v->value.v_decimal128, s);
		d = strtod(s, &end);
		if (*end || !(d >= -9.2e18 && d <= 9.2e18) || d != floor(d))
			return false;
		*out = (int64_t)d;
		return true;
	}
	default:
		return false;
	}
}

/* Is the document at it a filter on a value ({$gt: ..}) rather than on document fields? */
static bool value_condition(const bson_value_t *v)
{
	bson_iter_t it;
	const char *k;

	if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) ||
	    !bson_iter_next(&it))
		return false;
	k = bson_iter_key(&it);
	if (k[0] != '$')
		return false;
	return strcmp(k, "$and") && strcmp(k, "$or") && strcmp(k, "$nor") && strcmp(k, "$expr") &&
	       strcmp(k, "$comment") && strcmp(k, "$where") && strcmp(k, "$text") &&
	       strcmp(k, "$alwaysTrue") && strcmp(k, "$alwaysFalse");
}

/* A filter {v: <cond>} for the wrapped element. */
/* $text is answered by a find's text stages only; anywhere else (a $pull condition, an
 * array filter) it would match everything, so it is refused as MongoDB refuses it. */
static int no_text(int rc, struct query_expr **e, struct dfs_err *err)
{
	if (rc || !query_filter_has_text(*e))
		return rc;
	query_expr_free(*e);
	*e = NULL;
	return dfs_err_set(err, DFS_EINVAL, "$text is not allowed in this context");
}

static int parse_wrapped(const bson_value_t *cond, const char *key, struct query_expr **out,
			 struct dfs_err *err)
{
	bson_t f = BSON_INITIALIZER;
	int rc;

	bson_append_value(&f, key, -1, cond);
	rc = no_text(query_filter_parse(&f, out, err), out, err);
	bson_destroy(&f);
	return rc;
}

static int parse_push(struct uleaf *l, const bson_value_t *v, bool push, struct dfs_err *err)
{
	bson_iter_t it;
	bool each = false;
	const char *op = push ? "$push" : "$addToSet";

	if (v->value_type == BSON_TYPE_DOCUMENT &&
	    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
		bson_iter_t f = it;

		if (push) {
			while (bson_iter_next(&f))
				if (!strcmp(bson_iter_key(&f), "$each"))
					each = true;
		} else {
			each = bson_iter_next(&f) && !strcmp(bson_iter_key(&f), "$each");
		}
	}
	if (!each) {
		bson_t a = BSON_INITIALIZER;
		bson_value_t av;

		bson_append_value(&a, "0", 1, v);
		av.value_type = BSON_TYPE_ARRAY;
		av.value.v_doc.data = (uint8_t *)bson_get_data(&a);
		av.value.v_doc.data_len = a.len;
		bson_value_copy(&av, &l->arg);
		bson_destroy(&a);
		return 0;
	}
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		const bson_value_t *fv = bson_iter_value(&it);

		if (!strcmp(k, "$each")) {
			if (fv->value_type != BSON_TYPE_ARRAY)
				return dfs_err_set(err, DFS_EINVAL,
						   "The argument to $each in %s must be an array "
						   "but it was of type: %s",
						   op, store_type_alias(fv->value_type));
			bson_value_copy(fv, &l->arg);
		} else if (!push) {
			return dfs_err_set(
				err, DFS_EINVAL,
				"Found unexpected fields after $each in $addToSet: '%s' at "
				"'%s'",
				k, l->path);
		} else if (!strcmp(k, "$slice")) {
			if (!integral(fv, &l->slice))
				return dfs_err_set(err, DFS_EINVAL,
						   "The value for $slice must be an integer value "
						   "but was given type: %s",
						   store_type_alias(fv->value_type));
			l->has_slice = true;
		} else if (!strcmp(k, "$position")) {
			if (!integral(fv, &l->pos))
				return dfs_err_set(err, DFS_EINVAL,
						   "The value for $position must be an integer "
						   "value, not of type: %s",
						   store_type_alias(fv->value_type));
			l->has_pos = true;
		} else if (!strcmp(k, "$sort")) {
			int64_t d;

			if (fv->value_type == BSON_TYPE_DOCUMENT) {
				bson_iter_t s;
				int nf = 0;

				if (!bson_iter_init_from_data(&s, fv->value.v_doc.data,
							      fv->value.v_doc.data_len))
					return dfs_err_set(err, DFS_EINVAL, "bad $sort");
				while (bson_iter_next(&s)) {
					const char *sk = bson_iter_key(&s);

					nf++;
					if (!integral(bson_iter_value(&s), &d) ||
					    (d != 1 && d != -1))
						return dfs_err_set(err, DFS_EINVAL,
								   "The $sort element value must "
								   "be either 1 or -1");
					if (!*sk || sk[0] == '.' || sk[strlen(sk) - 1] == '.' ||
					    strstr(sk, "..") || sk[0] == '$')
						return dfs_err_set(err, DFS_EINVAL,
								   "The $sort field is a special "
								   "'.' field or has an invalid "
								   "name: '%s'",
								   sk);
				}
				if (!nf)
					return dfs_err_set(err, DFS_EINVAL,
							   "The $sort pattern is empty when it "
							   "should be a set of fields");
				l->sort = 2;
				l->sort_pat = bson_new_from_data(fv->value.v_doc.data,
								 fv->value.v_doc.data_len);
			} else if (integral(fv, &d) && (d == 1 || d == -1)) {
				l->sort = 1;
				l->sort_dir = (int)d;
			} else {
				return dfs_err_set(
					err, DFS_EINVAL,
					"The $sort is invalid: use 1/-1 to sort the "
					"whole element, or {field:1/-1} to sort embedded "
					"fields");
			}
		} else {
			return dfs_err_set(err, DFS_EINVAL, "Unrecognized clause in $push: %s", k);
		}
	}
	return 0;
}

/* Parses one field of an operator: fills l from the operand v. */
static int parse_operand(struct query_update *u, int op, struct uleaf *l, const bson_value_t *v,
			 struct dfs_err *err)
{
	char vb[160];
	int64_t d;

	switch (op) {
	case OP_SET:
	case OP_SETONINSERT:
	case OP_MIN:
	case OP_MAX:
	case OP_UNSET:
		l->op = op == OP_SET	       ? U_SET
			: op == OP_SETONINSERT ? U_SETONINSERT
			: op == OP_MIN	       ? U_MIN
			: op == OP_MAX	       ? U_MAX
					       : U_UNSET;
		bson_value_copy(v, &l->arg);
		return 0;
	case OP_INC:
	case OP_MUL:
		l->op = op == OP_INC ? U_INC : U_MUL;
		if (!is_number(v->value_type))
			return dfs_err_set(err, DFS_ETYPE,
					   "Cannot %s with non-numeric argument: {%s: %s}",
					   op == OP_INC ? "increment" : "multiply", l->path,
					   value_render(v, vb, sizeof(vb)));
		bson_value_copy(v, &l->arg);
		return 0;
	case OP_CURDATE:
		l->op = U_CURDATE;
		if (v->value_type == BSON_TYPE_BOOL)
			return 0;
		if (v->value_type == BSON_TYPE_DOCUMENT) {
			bson_iter_t it;
			int nf = 0;
			bool ok = false;

			if (bson_iter_init_from_data(&it, v->value.v_doc.data,
						     v->value.v_doc.data_len)) {
				while (bson_iter_next(&it)) {
					nf++;
					if (strcmp(bson_iter_key(&it), "$type") ||
					    !BSON_ITER_HOLDS_UTF8(&it))
						continue;
					if (!strcmp(bson_iter_utf8(&it, NULL), "date"))
						ok = true;
					else if (!strcmp(bson_iter_utf8(&it, NULL), "timestamp"))
						ok = l->ts = true;
				}
			}
			if (ok && nf == 1)
				return 0;
			return dfs_err_set(err, DFS_EINVAL,
					   "The '$type' string field is required to be 'date' or "
					   "'timestamp': {$currentDate: {%s: {$type: 'date'}}}",
					   l->path);
		}
		return dfs_err_set(err, DFS_EINVAL,
				   "%s is not valid type for $currentDate. Please use a boolean "
				   "('true') or a $type expression ({$type: 'timestamp/date'})",
				   value_render(v, vb, sizeof(vb)));
	case OP_PUSH:
	case OP_ADDTOSET:
		l->op = op == OP_PUSH ? U_PUSH : U_ADDTOSET;
		return parse_push(l, v, op == OP_PUSH, err);
	case OP_POP:
		l->op = U_POP;
		if (!is_number(v->value_type))
			return dfs_err_set(err, DFS_EINVAL, "Expected a number in: %s: %s", l->path,
					   value_render(v, vb, sizeof(vb)));
		if (!integral(v, &d) || (d != 1 && d != -1))
			return dfs_err_set(err, DFS_EINVAL, "$pop expects 1 or -1, found: %s",
					   value_render(v, vb, sizeof(vb)));
		bson_value_copy(v, &l->arg);
		return 0;
	case OP_PULLALL:
		l->op = U_PULLALL;
		if (v->value_type != BSON_TYPE_ARRAY)
			return dfs_err_set(err, DFS_EINVAL,
					   "$pullAll requires an array argument but was given a %s",
					   store_type_alias(v->value_type));
		bson_value_copy(v, &l->arg);
		return 0;
	case OP_PULL:
		l->op = U_PULL;
		bson_value_copy(v, &l->arg);
		if (v->value_type == BSON_TYPE_DOCUMENT && !value_condition(v)) {
			bson_t f;

			l->pull = PULL_OBJ;
			if (!bson_init_static(&f, v->value.v_doc.data, v->value.v_doc.data_len))
				return dfs_err_set(err, DFS_EINVAL, "bad $pull condition");
			if (no_text(query_filter_parse(&f, &l->cond, err), &l->cond, err))
				return dfs_err_prefix(err, "$pull at '%s': ", l->path);
			return 0;
		}
		if (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_REGEX) {
			l->pull = PULL_WRAP;
			if (parse_wrapped(v, "v", &l->cond, err))
				return dfs_err_prefix(err, "$pull at '%s': ", l->path);
			return 0;
		}
		l->pull = PULL_EQ;
		return 0;
	default:
		return dfs_err_set(err, DFS_EINVAL, "unknown update operator");
	}
}

/* $rename {from: "to"}: two leaves. */
static int parse_rename(struct query_update *u, const char *from, const bson_value_t *v,
			struct dfs_err *err)
{
	char vb[160];
	char **fc = NULL, **tc = NULL;
	const char *to;
	struct uleaf *lf, *lt;
	int nf, nt, rc;
	size_t flen, tlen;

	if (v->value_type != BSON_TYPE_UTF8)
		return dfs_err_set(err, DFS_EINVAL,
				   "The 'to' field for $rename must be a string: %s: %s", from,
				   value_render(v, vb, sizeof(vb)));
	to = v->value.v_utf8.str;
	if (strlen(to) != v->value.v_utf8.len)
		return dfs_err_set(err, DFS_EINVAL, "The 'to' field for $rename contains NUL");
	if (!strcmp(from, to))
		return dfs_err_set(
			err, DFS_EINVAL,
			"The source and target field for $rename must differ: %s: \"%s\"", from,
			to);
	flen = strlen(from);
	tlen = strlen(to);
	if ((flen < tlen && !strncmp(from, to, flen) && to[flen] == '.') ||
	    (tlen < flen && !strncmp(from, to, tlen) && from[tlen] == '.'))
		return dfs_err_set(err, DFS_EINVAL,
				   "The source and target field for $rename must not be on the "
				   "same path: %s: \"%s\"",
				   from, to);
	fc = split_path(from, "$rename", err, &nf);
	if (!fc)
		return err->code;
	tc = split_path(to, "$rename", err, &nt);
	if (!tc) {
		free_comps(fc);
		return err->code;
	}
	if (check_comps(fc, from, false, "source", err) ||
	    check_comps(tc, to, false, "destination", err)) {
		free_comps(fc);
		free_comps(tc);
		return err->code;
	}
	lf = xcalloc(1, sizeof(*lf));
	lf->op = U_RENAME_FROM;
	lf->path = xstrdup(from);
	lf->opname = xstrdup("$rename");
	lf->src_path = xstrdup(from);
	lf->src = split_path(from, "$rename", err, &nf);
	lt = xcalloc(1, sizeof(*lt));
	lt->op = U_RENAME_TO;
	lt->path = xstrdup(to);
	lt->opname = xstrdup("$rename");
	lt->src_path = xstrdup(from);
	lt->src = fc;
	rc = trie_insert(u, fc, lf, err);
	if (!rc)
		rc = trie_insert(u, tc, lt, err);
	else
		leaf_free(lt);
	free_comps(tc);
	return rc;
}

static int parse_operator(struct query_update *u, const char *opname, const bson_iter_t *opit,
			  struct dfs_err *err)
{
	int op = op_lookup(opname);
	bson_iter_t it;

	if (op == OP_UNKNOWN)
		return dfs_err_set(err, DFS_EINVAL, "unknown update operator '%s'", opname);
	if (!BSON_ITER_HOLDS_DOCUMENT(opit))
		return dfs_err_set(err, DFS_EINVAL,
				   "Modifiers operate on fields but we found type %s instead. For "
				   "example: {$mod: {<field>: ...}} not {%s: ...}",
				   store_type_alias(bson_iter_type(opit)), opname);
	if (!bson_iter_recurse(opit, &it))
		return dfs_err_set(err, DFS_EINVAL, "%s is not valid BSON", opname);
	while (bson_iter_next(&it)) {
		const char *path = bson_iter_key(&it);
		const bson_value_t *v = bson_iter_value(&it);
		struct uleaf *l;
		char **c;
		int n, rc;

		if (op == OP_RENAME) {
			if (parse_rename(u, path, v, err))
				return err->code;
			continue;
		}
		c = split_path(path, opname, err, &n);
		if (!c)
			return err->code;
		if (check_comps(c, path, true, NULL, err)) {
			free_comps(c);
			return err->code;
		}
		l = xcalloc(1, sizeof(*l));
		l->path = xstrdup(path);
		l->opname = xstrdup(opname);
		if (parse_operand(u, op, l, v, err)) {
			leaf_free(l);
			free_comps(c);
			return err->code;
		}
		rc = trie_insert(u, c, l, err);
		free_comps(c);
		if (rc)
			return rc;
	}
	return 0;
}

/* The identifier of an array filter: the common first component of its field names. */
static int filter_ident(const bson_t *f, char **ident, struct dfs_err *err)
{
	bson_iter_t it;

	if (!bson_iter_init(&it, f))
		return dfs_err_set(err, DFS_EINVAL, "bad array filter");
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		const char *dot;
		size_t n;

		if (k[0] == '$') {
			bson_iter_t sub;

			/* $and/$or/$nor: the identifiers of the clauses */
			if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &sub))
				continue;
			while (bson_iter_next(&sub)) {
				bson_t cd;
				const uint8_t *data;
				uint32_t len;

				if (!BSON_ITER_HOLDS_DOCUMENT(&sub))
					continue;
				bson_iter_document(&sub, &len, &data);
				if (!bson_init_static(&cd, data, len))
					continue;
				if (filter_ident(&cd, ident, err))
					return err->code;
			}
			continue;
		}
		dot = strchr(k, '.');
		n = dot ? (size_t)(dot - k) : strlen(k);
		if (*ident && (strlen(*ident) != n || strncmp(*ident, k, n)))
			return dfs_err_set(err, DFS_EINVAL,
					   "Error parsing array filter :: caused by :: Expected a "
					   "single top-level field name, found '%s' and '%.*s'",
					   *ident, (int)n, k);
		if (!*ident)
			*ident = xstrndup(k, n);
	}
	return 0;
}

static int parse_array_filters(struct query_update *u, const bson_t *af, struct dfs_err *err)
{
	bson_iter_t it;
	uint32_t count = bson_count_keys(af);

	if (!bson_iter_init(&it, af))
		return dfs_err_set(err, DFS_EINVAL, "arrayFilters is not valid BSON");
	u->af = xcalloc(count, sizeof(*u->af));
	while (bson_iter_next(&it)) {
		struct afilter *a = &u->af[u->naf];
		const uint8_t *data;
		uint32_t len;
		bson_t f;
		char *id = NULL;

		if (!BSON_ITER_HOLDS_DOCUMENT(&it))
			return dfs_err_set(err, DFS_EINVAL,
					   "arrayFilters entries must be objects, found %s",
					   store_type_alias(bson_iter_type(&it)));
		bson_iter_document(&it, &len, &data);
		if (!bson_init_static(&f, data, len))
			return dfs_err_set(err, DFS_EINVAL, "bad array filter");
		if (filter_ident(&f, &id, err)) {
			free(id);
			return err->code;
		}
		if (!id)
			return dfs_err_set(
				err, DFS_EINVAL,
				"Cannot use an expression without a top-level field name "
				"in arrayFilters");
		if (!(id[0] >= 'a' && id[0] <= 'z') ||
		    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") !=
			    strlen(id)) {
			dfs_err_set(
				err, DFS_EINVAL,
				"Error parsing array filter :: caused by :: The top-level field "
				"name must be an alphanumeric string beginning with a lowercase "
				"letter, found '%s'",
				id);
			free(id);
			return DFS_EINVAL;
		}
		for (size_t j = 0; j < u->naf; j++)
			if (!strcmp(u->af[j].ident, id)) {
				dfs_err_set(err, DFS_EINVAL,
					    "Found multiple array filters with the same top-level "
					    "field name %s",
					    id);
				free(id);
				return DFS_EINVAL;
			}
		a->ident = id;
		u->naf++;
		if (no_text(query_filter_parse(&f, &a->expr, err), &a->expr, err))
			return dfs_err_prefix(err, "Error parsing array filter :: caused by :: ");
	}
	return 0;
}

int query_update_parse(const bson_t *update, const bson_t *array_filters, struct query_update **out,
		       struct dfs_err *err)
{
	struct query_update *u = xcalloc(1, sizeof(*u));
	bson_iter_t it;
	bool ops = false, fields = false;
	int rc = 0;

	*out = NULL;
	if (!bson_iter_init(&it, update)) {
		rc = dfs_err_set(err, DFS_EINVAL, "the update is not valid BSON");
		goto done;
	}
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (k[0] == '$') {
			if (fields) {
				rc = dfs_err_set(
					err, DFS_EINVAL,
					"The dollar ($) prefixed field '%s' in '%s' is not "
					"allowed in the context of an update's replacement "
					"document",
					k, k);
				goto done;
			}
			ops = true;
		} else {
			if (ops) {
				rc = dfs_err_set(
					err, DFS_EINVAL,
					"unknown update operator '%s' (an update cannot mix "
					"operators and replacement fields)",
					k);
				goto done;
			}
			fields = true;
		}
	}
	if (array_filters && (rc = parse_array_filters(u, array_filters, err)))
		goto done;
	if (!ops) {
		u->replacement = true;
		u->repl = bson_copy(update);
		if (u->naf) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "arrayFilters may not be specified with a replacement "
					 "document");
			goto done;
		}
		*out = u;
		return 0;
	}
	bson_iter_init(&it, update);
	while (bson_iter_next(&it))
		if ((rc = parse_operator(u, bson_iter_key(&it), &it, err)))
			goto done;
	trie_sort(&u->root);
	{
		struct dfs_buf path;

		dfs_buf_init(&path);
		rc = trie_idents(u, &u->root, &path, err);
		dfs_buf_release(&path);
		if (rc)
			goto done;
	}
	for (size_t j = 0; j < u->naf; j++)
		if (!u->af[j].used) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "The array filter for identifier '%s' was not used in the "
					 "update",
					 u->af[j].ident);
			goto done;
		}
	*out = u;
	return 0;
done:
	query_update_free(u);
	return rc;
}

/* ---- numbers ------------------------------------------------------------------------- */

static int nrank(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_INT32:
		return 0;
	case BSON_TYPE_INT64:
		return 1;
	case BSON_TYPE_DOUBLE:
		return 2;
	default:
		return 3;
	}
}

static long double num_ld(const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_INT32:
		return v->value.v_int32;
	case BSON_TYPE_INT64:
		return (long double)v->value.v_int64;
	case BSON_TYPE_DOUBLE:
		return v->value.v_double;
	default: {
		char s[BSON_DECIMAL128_STRING];

		bson_decimal128_to_string(&v->value.v_decimal128, s);
		if (!strcmp(s, "Infinity"))
			return HUGE_VALL;
		if (!strcmp(s, "-Infinity"))
			return -HUGE_VALL;
		if (!strcmp(s, "NaN"))
			return NAN;
		return strtold(s, NULL);
	}
	}
}

/* An exact decimal: coef * 10^exp. */
struct dnum {
	__int128 coef;
	int exp;
};

/* Parses the decimal string of a finite value; false when it does not fit. */
static bool dnum_parse(const char *s, struct dnum *d)
{
	bool neg = false, dot = false;
	int frac = 0;

	d->coef = 0;
	d->exp = 0;
	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	if (!((*s >= '0' && *s <= '9') || *s == '.'))
		return false;
	for (; (*s >= '0' && *s <= '9') || *s == '.'; s++) {
		if (*s == '.') {
			dot = true;
			continue;
		}
		if (__builtin_mul_overflow(d->coef, 10, &d->coef) ||
		    __builtin_add_overflow(d->coef, *s - '0', &d->coef))
			return false;
		if (dot)
			frac++;
	}
	if (*s == 'E' || *s == 'e') {
		char *end;
		long e = strtol(s + 1, &end, 10);

		if (*end || e > 10000 || e < -10000)
			return false;
		d->exp = (int)e;
	} else if (*s) {
		return false;
	}
	d->exp -= frac;
	if (neg)
		d->coef = -d->coef;
	return true;
}

static bool dnum_from_value(const bson_value_t *v, struct dnum *d)
{
	char s[BSON_DECIMAL128_STRING + 8];

	switch (v->value_type) {
	case BSON_TYPE_INT32:
		d->coef = v->value.v_int32;
		d->exp = 0;
		return true;
	case BSON_TYPE_INT64:
		d->coef = v->value.v_int64;
		d->exp = 0;
		return true;
	case BSON_TYPE_DOUBLE:
		if (!isfinite(v->value.v_double))
			return false;
		/* MongoDB converts a double to decimal128 with 15 significant digits */
		snprintf(s, sizeof(s), "%.15g", v->value.v_double);
		return dnum_parse(s, d);
	default:
		bson_decimal128_to_string(&v->value.v_decimal128, s);
		return dnum_parse(s, d);
	}
}

/*
 * Brings x (the larger exponent) and y to one exponent for an addition: x's coefficient is
 * scaled up as far as 37 digits allow, and y's is cut to the same exponent when the gap is
 * larger than that (digits far below x's 34 significant ones only matter for exact ties).
 */
static void align(struct dnum *x, struct dnum *y)
{
	__int128 big = 1;

	for (int i = 0; i < 36; i++)
		big *= 10;
	while (x->exp > y->exp && x->coef < big && x->coef > -big) {
		x->coef *= 10;
		x->exp--;
	}
	while (y->exp < x->exp) {
		if (!y->coef) {
			y->exp = x->exp;
			break;
		}
		y->coef /= 10;
		y->exp++;
	}
}

/* Rounds the magnitude m * 10^exp to decimal128's 34 digits, half to even (IEEE 754). */
static void round34(__int128 *m, int *exp)
{
	__int128 lim = 1, p = 1, q, rem, half;
	int k = 0;

	for (int i = 0; i < 34; i++)
		lim *= 10;
	while (*m / p >= lim) {
		p *= 10;
		k++;
	}
	if (!k)
		return;
	q = *m / p;
	rem = *m % p;
	half = p / 2;
	if (rem > half || (rem == half && (q & 1)))
		q++;
	if (q == lim) {
		q /= 10;
		k++;
	}
	*m = q;
	*exp += k;
}

/* Decimal a+b or a*b into out, rounded to 34 digits; false when the exact value does not fit
 * 128-bit integers (the caller then computes in long double). */
static bool dnum_arith(bool mul, const bson_value_t *a, const bson_value_t *b, bson_value_t *out)
{
	struct dnum x, y, r;
	char s[80], digits[48];
	__int128 m;
	int nd = 0;
	bool neg;

	if (!dnum_from_value(a, &x) || !dnum_from_value(b, &y))
		return false;
	if (mul) {
		if (__builtin_mul_overflow(x.coef, y.coef, &r.coef))
			return false;
		r.exp = x.exp + y.exp;
	} else {
		if (x.exp < y.exp) {
			struct dnum t = x;

			x = y;
			y = t;
		}
		align(&x, &y);
		if (__builtin_add_overflow(x.coef, y.coef, &r.coef))
			return false;
		r.exp = x.exp;
	}
	neg = r.coef < 0;
	m = neg ? -r.coef : r.coef;
	round34(&m, &r.exp);
	do {
		digits[nd++] = (char)('0' + (int)(m % 10));
		m /= 10;
	} while (m && nd < 47);
	if (m || nd > 34)
		return false;
	{
		int p = 0;

		if (neg)
			s[p++] = '-';
		while (nd)
			s[p++] = digits[--nd];
		snprintf(s + p, sizeof(s) - (size_t)p, "E%d", r.exp);
	}
	out->value_type = BSON_TYPE_DECIMAL128;
	return bson_decimal128_from_string(s, &out->value.v_decimal128);
}

/* a (+ or *) b with MongoDB's widening; DFS_ERANGE on a 64-bit integer overflow. */
static int num_arith(bool mul, const bson_value_t *a, const bson_value_t *b, bson_value_t *out)
{
	int k = nrank(a->value_type) > nrank(b->value_type) ? nrank(a->value_type)
							    : nrank(b->value_type);

	memset(out, 0, sizeof(*out));
	if (k <= 1) {
		int64_t x = a->value_type == BSON_TYPE_INT32 ? a->value.v_int32 : a->value.v_int64;
		int64_t y = b->value_type == BSON_TYPE_INT32 ? b->value.v_int32 : b->value.v_int64;
		int64_t r;

		if (mul ? __builtin_mul_overflow(x, y, &r) : __builtin_add_overflow(x, y, &r))
			return DFS_ERANGE;
		if (k == 0 && r >= INT32_MIN && r <= INT32_MAX) {
			out->value_type = BSON_TYPE_INT32;
			out->value.v_int32 = (int32_t)r;
		} else {
			out->value_type = BSON_TYPE_INT64;
			out->value.v_int64 = r;
		}
		return 0;
	}
	if (k == 2) {
		double x = (double)num_ld(a), y = (double)num_ld(b);

		if (a->value_type == BSON_TYPE_INT64)
			x = (double)a->value.v_int64;
		if (b->value_type == BSON_TYPE_INT64)
			y = (double)b->value.v_int64;
		out->value_type = BSON_TYPE_DOUBLE;
		out->value.v_double = mul ? x * y : x + y;
		return 0;
	}
	{
		/* decimal128 (dec.c): exact to 34 digits, IEEE 754 rounding */
		bson_decimal128_t x, y;

		agg__dec_from_value(a, &x);
		agg__dec_from_value(b, &y);
		out->value_type = BSON_TYPE_DECIMAL128;
		if (!agg__dec_op(mul ? '*' : '+', &x, &y, &out->value.v_decimal128))
			return 0;
		if (dnum_arith(mul, a, b, out)) /* a compiler without _Decimal128 (dec.c note 3) */
			return 0;
	}
	{
		long double r = mul ? num_ld(a) * num_ld(b) : num_ld(a) + num_ld(b);
		char s[64];

		if (isnan(r))
			snprintf(s, sizeof(s), "NaN");
		else if (isinf(r))
			snprintf(s, sizeof(s), r > 0 ? "Infinity" : "-Infinity");
		else
			snprintf(s, sizeof(s), "%.18Lg", r);
		out->value_type = BSON_TYPE_DECIMAL128;
		bson_decimal128_from_string(s, &out->value.v_decimal128);
	}
	return 0;
}

/* The zero of v's numeric type (what $mul makes of a missing field). */
static void num_zero(const bson_value_t *v, bson_value_t *out)
{
	memset(out, 0, sizeof(*out));
	out->value_type = v->value_type;
	if (v->value_type == BSON_TYPE_DECIMAL128)
		bson_decimal128_from_string("0", &out->value.v_decimal128);
}

/* ---- applying ------------------------------------------------------------------------ */

/*
 * Where a value is, or would be (design note 3). parent is the existing container (document
 * or array); when it is missing, up is the slot of the container (created on demand); when
 * the path is blocked by a scalar or an array, blocker is that element.
 */
struct slot {
	struct slot *up;	     /* the container's own slot when parent is NULL */
	struct unode *parent;	     /* the container, or NULL */
	const struct unode *blocker; /* the element in the way, or NULL */
	const char *blocker_name;    /* its field name */
	const char *first;	     /* the first field that would be created under blocker */
	const char *name;	     /* this component */
	size_t index;		     /* parent is an array: the position */
	struct unode *node;	     /* the value, NULL when missing */
};

struct actx {
	const struct query_update *u;
	struct unode *root; /* the document being changed */
	const bson_t *orig; /* the input document */
	int elem_index;
	bool upsert;
	int64_t now_ms;
	struct dfs_buf path; /* the concrete path being applied */
	char **touched;	     /* Owned: concrete paths of the leaves applied */
	size_t ntouched, cap;
	uint64_t grown;	 /* bytes the leaves may have added, at least (design note 7) */
	uint64_t budget; /* the most grown may reach before the result cannot be stored */
	struct dfs_err *err;
};

/* Counts bytes added by a leaf; DFS_EFBIG once the result can no longer fit a document. */
static int grow(struct actx *a, uint64_t bytes)
{
	a->grown += bytes;
	if (a->grown > a->budget)
		return dfs_err_set(
			a->err, DFS_EFBIG,
			"the update would make the document larger than %d bytes at '%s'",
			DFS_MAX_DOC_SIZE, a->path.data);
	return 0;
}

/* The BSON bytes of null elements at array positions from..to-1 (type, key, NUL). */
static uint64_t nulls_size(uint64_t from, uint64_t to)
{
	uint64_t total = 0, lo = 0, hi = 10;

	for (int digits = 1; lo < to; digits++, lo = hi, hi *= 10) {
		uint64_t a = from > lo ? from : lo, b = to < hi ? to : hi;

		if (a < b)
			total += (b - a) * (uint64_t)(digits + 2);
	}
	return total;
}

/* The BSON bytes of a value, at least (a scalar counts its type byte and a short key). */
static uint64_t value_size(const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		return 3 + (uint64_t)v->value.v_doc.data_len;
	case BSON_TYPE_UTF8:
		return 7 + (uint64_t)v->value.v_utf8.len;
	case BSON_TYPE_BINARY:
		return 8 + (uint64_t)v->value.v_binary.data_len;
	default:
		return 3;
	}
}

static int blocked_error(struct actx *a, const struct slot *s)
{
	char vb[200];

	return dfs_err_set(a->err, DFS_EINVAL, "Cannot create field '%s' in element {%s: %s}",
			   s->first, s->blocker_name, un_render(s->blocker, vb, sizeof(vb)));
}

/* Stores node (taken) in the slot's container, which exists. */
static int slot_store(struct actx *a, struct slot *s, struct unode *node)
{
	struct unode *c = s->parent;

	if (c->type == BSON_TYPE_DOCUMENT) {
		long i = un_find(c, s->name);

		if (i >= 0) {
			un_free(c->kids[i]);
			c->kids[i] = node;
		} else {
			un_push(c, s->name, strlen(s->name), node);
		}
	} else {
		if (s->index < c->n) {
			un_free(c->kids[s->index]);
			c->kids[s->index] = node;
		} else {
			if (s->index - c->n > MAX_PADDING) {
				un_free(node);
				return dfs_err_set(
					a->err, DFS_EINVAL,
					"can't backfill array to larger than %d elements "
					"at '%s'",
					MAX_PADDING, a->path.data);
			}
			if (grow(a, nulls_size(c->n, s->index))) {
				un_free(node);
				return a->err->code;
			}
			while (c->n < s->index)
				un_push(c, NULL, 0, un_null());
			un_push(c, NULL, 0, node);
		}
	}
	s->node = node;
	return 0;
}

/* Makes the slot's container exist (creating missing documents up the chain). */
static int slot_container(struct actx *a, struct slot *s)
{
	struct unode *d;

	if (s->parent)
		return 0;
	if (s->blocker)
		return blocked_error(a, s);
	if (s->up->node)
		return dfs_err_set(a->err, DFS_EINVAL, "internal: slot chain out of date");
	if (slot_container(a, s->up))
		return a->err->code;
	d = un_new(BSON_TYPE_DOCUMENT);
	if (slot_store(a, s->up, d))
		return a->err->code;
	s->parent = d;
	return 0;
}

/* Puts node (taken, also on failure) at the slot. */
static int slot_put(struct actx *a, struct slot *s, struct unode *node)
{
	if (slot_container(a, s)) {
		un_free(node);
		return a->err->code;
	}
	return slot_store(a, s, node);
}

/* The slot of child name under the slot s. */
static void slot_child(struct slot *s, const char *name, struct slot *cs)
{
	memset(cs, 0, sizeof(*cs));
	cs->name = name;
	if (s->node) {
		struct unode *n = s->node;

		if (n->type == BSON_TYPE_DOCUMENT) {
			long i = un_find(n, name);

			cs->parent = n;
			cs->node = i >= 0 ? n->kids[i] : NULL;
			return;
		}
		if (n->type == BSON_TYPE_ARRAY && all_digits(name) && strlen(name) < 10) {
			cs->parent = n;
			cs->index = strtoul(name, NULL, 10);
			cs->node = cs->index < n->n ? n->kids[cs->index] : NULL;
			return;
		}
		cs->blocker = n;
		cs->blocker_name = s->name;
		cs->first = name;
		return;
	}
	if (s->blocker) {
		cs->blocker = s->blocker;
		cs->blocker_name = s->blocker_name;
		cs->first = s->first;
		return;
	}
	cs->up = s;
}

/* Removes the slot's value (an array element becomes null). */
static void slot_remove(struct slot *s)
{
	struct unode *c = s->parent;

	if (!s->node || !c)
		return;
	if (c->type == BSON_TYPE_DOCUMENT) {
		long i = un_find(c, s->name);

		if (i >= 0)
			un_remove(c, (size_t)i);
	} else {
		un_free(c->kids[s->index]);
		c->kids[s->index] = un_null();
	}
	s->node = NULL;
}

static const char *id_text(struct actx *a, char *buf, size_t size)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, a->orig, "_id"))
		return value_render(bson_iter_value(&it), buf, size);
	snprintf(buf, size, "(none)");
	return buf;
}

/* $rename's source: the value at l->src in the original document (arrays not crossed). */
static int rename_source(struct actx *a, const struct uleaf *l, const bson_value_t **v,
			 bson_iter_t *holder)
{
	bson_iter_t it, child;
	char ib[100];

	*v = NULL;
	if (!bson_iter_init(&it, a->orig))
		return 0;
	for (int i = 0; l->src[i]; i++) {
		if (!bson_iter_find(&it, l->src[i]))
			return 0;
		if (!l->src[i + 1]) {
			*holder = it;
			*v = bson_iter_value(holder);
			return 0;
		}
		if (BSON_ITER_HOLDS_ARRAY(&it))
			return dfs_err_set(a->err, DFS_EINVAL,
					   "The source field cannot be an array element, '%s' in "
					   "doc with _id: %s has an array field called '%s'",
					   l->src_path, id_text(a, ib, sizeof(ib)), l->src[i]);
		if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &child))
			return 0;
		it = child;
	}
	return 0;
}

/* The destination of $rename must not cross an array either (checked in the current tree). */
static int rename_dest_check(struct actx *a, const struct uleaf *l)
{
	const struct unode *n = a->root;
	char *p = xstrdup(l->path), *save = NULL, *c, *next;
	char ib[100];
	int rc = 0;

	for (c = strtok_r(p, ".", &save); c && n; c = next) {
		long k;

		next = strtok_r(NULL, ".", &save);
		if (!next)
			break;
		k = un_find(n, c);
		if (k < 0)
			break;
		n = n->kids[k];
		if (n->type == BSON_TYPE_ARRAY) {
			rc = dfs_err_set(
				a->err, DFS_EINVAL,
				"The destination field cannot be an array element, '%s' in "
				"doc with _id: %s has an array field called '%s'",
				l->path, id_text(a, ib, sizeof(ib)), c);
			break;
		}
		if (n->type != BSON_TYPE_DOCUMENT)
			break;
	}
	free(p);
	return rc;
}

/* Does the array element e match the array filter f, wrapped as {ident: e}? */
static bool wrapped_match(const struct query_expr *f, const char *key, const struct unode *e)
{
	bson_t d = BSON_INITIALIZER;
	bool m;

	un_append(&d, key, strlen(key), e);
	m = query_filter_match(f, &d, NULL);
	bson_destroy(&d);
	return m;
}

static bool pull_match(const struct uleaf *l, const struct unode *e)
{
	switch (l->pull) {
	case PULL_EQ:
		return un_compare_value(e, &l->arg) == 0;
	case PULL_WRAP:
		return wrapped_match(l->cond, "v", e);
	default:
		if (e->type != BSON_TYPE_DOCUMENT)
			return false;
		{
			bson_t d = BSON_INITIALIZER;
			bool m;

			un_append_kids(&d, e);
			m = query_filter_match(l->cond, &d, NULL);
			bson_destroy(&d);
			return m;
		}
	}
}

/* $push $sort: the value of the pattern path in a document element (missing: null). */
static void sort_key_value(const struct unode *e, const char *path, bson_t *tmp, bson_value_t *v)
{
	const struct unode *n = e;
	char *p = xstrdup(path), *save = NULL;

	for (char *c = strtok_r(p, ".", &save); c; c = strtok_r(NULL, ".", &save)) {
		long i;

		if (!n || n->type != BSON_TYPE_DOCUMENT) {
			n = NULL;
			break;
		}
		i = un_find(n, c);
		n = i >= 0 ? n->kids[i] : NULL;
	}
	free(p);
	if (!n) {
		bson_init(tmp);
		memset(v, 0, sizeof(*v));
		v->value_type = BSON_TYPE_NULL;
		return;
	}
	un_value(n, tmp, v);
}

static int push_cmp(const struct uleaf *l, const struct unode *x, const struct unode *y)
{
	bson_iter_t it;

	if (l->sort == 1)
		return l->sort_dir * un_compare(x, y);
	if (!bson_iter_init(&it, l->sort_pat))
		return 0;
	while (bson_iter_next(&it)) {
		bson_t tx, ty;
		bson_value_t vx, vy;
		int64_t dir = 1;
		int c;
		static const struct unode nothing = {.type = BSON_TYPE_NULL};

		integral(bson_iter_value(&it), &dir);
		sort_key_value(x->type == BSON_TYPE_DOCUMENT ? x : &nothing, bson_iter_key(&it),
			       &tx, &vx);
		sort_key_value(y->type == BSON_TYPE_DOCUMENT ? y : &nothing, bson_iter_key(&it),
			       &ty, &vy);
		c = store_value_compare(&vx, &vy);
		bson_destroy(&tx);
		bson_destroy(&ty);
		if (c)
			return (int)dir * c;
	}
	return 0;
}

/* Stable merge sort of the array's children. */
static void push_sort(const struct uleaf *l, struct unode **v, struct unode **tmp, size_t n)
{
	size_t h = n / 2, i = 0, j = h, k = 0;

	if (n < 2)
		return;
	push_sort(l, v, tmp, h);
	push_sort(l, v + h, tmp, n - h);
	while (i < h && j < n)
		tmp[k++] = push_cmp(l, v[j], v[i]) < 0 ? v[j++] : v[i++];
	while (i < h)
		tmp[k++] = v[i++];
	while (j < n)
		tmp[k++] = v[j++];
	memcpy(v, tmp, n * sizeof(*v));
}

static int apply_push(struct actx *a, const struct uleaf *l, struct slot *s)
{
	struct unode *arr, *each;
	size_t pos, ne;

	if (s->node && s->node->type != BSON_TYPE_ARRAY) {
		char ib[100];

		return dfs_err_set(a->err, DFS_EINVAL,
				   "The field '%s' must be an array but is of type %s in document "
				   "{_id: %s}",
				   a->path.data, store_type_alias(s->node->type),
				   id_text(a, ib, sizeof(ib)));
	}
	if (!s->node) {
		if (slot_put(a, s, un_new(BSON_TYPE_ARRAY)))
			return a->err->code;
	}
	arr = s->node;
	if (l->op == U_PUSH && grow(a, value_size(&l->arg)))
		return a->err->code;
	each = un_from_value(&l->arg);
	ne = each->n;
	if (l->op == U_ADDTOSET) {
		bson_iter_t ev;
		int rc = 0;

		if (!bson_iter_init_from_data(&ev, l->arg.value.v_doc.data,
					      l->arg.value.v_doc.data_len))
			memset(&ev, 0, sizeof(ev));
		for (size_t i = 0; i < ne; i++) {
			bool dup = false;
			uint64_t size = bson_iter_next(&ev) ? value_size(bson_iter_value(&ev)) : 3;

			for (size_t j = 0; j < arr->n && !dup; j++)
				dup = un_compare(arr->kids[j], each->kids[i]) == 0;
			if (!dup && !rc)
				rc = grow(a, size);
			if (!dup && !rc) {
				un_push(arr, NULL, 0, each->kids[i]);
				each->kids[i] = NULL;
			}
		}
		for (size_t i = 0; i < ne; i++)
			un_free(each->kids[i]);
		each->n = 0;
		un_free(each);
		return rc;
	}
	pos = arr->n;
	if (l->has_pos) {
		if (l->pos >= 0)
			pos = (uint64_t)l->pos < arr->n ? (size_t)l->pos : arr->n;
		else
			pos = (uint64_t)(-l->pos) >= arr->n ? 0 : arr->n - (size_t)(-l->pos);
	}
	if (ne) {
		size_t old = arr->n;

		for (size_t i = 0; i < ne; i++)
			un_push(arr, NULL, 0, NULL);
		memmove(arr->kids + pos + ne, arr->kids + pos, (old - pos) * sizeof(*arr->kids));
		memcpy(arr->kids + pos, each->kids, ne * sizeof(*arr->kids));
	}
	each->n = 0;
	un_free(each);
	if (l->sort) {
		struct unode **tmp = xcalloc(arr->n, sizeof(*tmp));

		push_sort(l, arr->kids, tmp, arr->n);
		free(tmp);
	}
	if (l->has_slice) {
		if (l->slice >= 0) {
			while ((int64_t)arr->n > l->slice)
				un_remove(arr, arr->n - 1);
		} else {
			while ((int64_t)arr->n > -l->slice)
				un_remove(arr, 0);
		}
	}
	return 0;
}

static int apply_numeric(struct actx *a, const struct uleaf *l, struct slot *s)
{
	bson_value_t r;
	char ib[100], vb[100];

	if (!s->node) {
		struct unode *n = un_new(l->arg.value_type);

		if (l->op == U_MUL)
			num_zero(&l->arg, &n->v);
		else
			n->v = l->arg; /* a number */
		return slot_put(a, s, n);
	}
	if (!is_number(s->node->type))
		return dfs_err_set(a->err, DFS_ETYPE,
				   "Cannot apply %s to a value of non-numeric type. {_id: %s} has "
				   "the field '%s' of non-numeric type %s",
				   l->opname, id_text(a, ib, sizeof(ib)), s->name,
				   store_type_alias(s->node->type));
	if (num_arith(l->op == U_MUL, &s->node->v, &l->arg, &r))
		return dfs_err_set(a->err, DFS_ERANGE,
				   "Failed to apply %s operations to current value (%s) for "
				   "document {_id: %s}: the result overflows a 64-bit integer",
				   l->opname, value_render(&s->node->v, vb, sizeof(vb)),
				   id_text(a, ib, sizeof(ib)));
	/* the same bytes when nothing changes (x + 0, x * 1 of the same type) */
	s->node->v = r;
	s->node->type = r.value_type;
	return 0;
}

static int apply_leaf(struct actx *a, const struct uleaf *l, struct slot *s)
{
	struct unode *n;

	if (a->ntouched == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 8;
		a->touched = xrealloc(a->touched, a->cap * sizeof(*a->touched));
	}
	a->touched[a->ntouched++] = xstrdup(a->path.data);

	switch (l->op) {
	case U_SETONINSERT:
		if (!a->upsert)
			return 0;
		/* fall through */
	case U_SET:
		if (grow(a, value_size(&l->arg)))
			return a->err->code;
		return slot_put(a, s, un_from_value(&l->arg));
	case U_UNSET:
		slot_remove(s);
		return 0;
	case U_INC:
	case U_MUL:
		return apply_numeric(a, l, s);
	case U_MIN:
	case U_MAX: {
		int c;

		if (!s->node) {
			if (grow(a, value_size(&l->arg)))
				return a->err->code;
			return slot_put(a, s, un_from_value(&l->arg));
		}
		c = un_compare_value(s->node, &l->arg);
		if ((l->op == U_MIN && c > 0) || (l->op == U_MAX && c < 0)) {
			if (grow(a, value_size(&l->arg)))
				return a->err->code;
			return slot_put(a, s, un_from_value(&l->arg));
		}
		return 0;
	}
	case U_CURDATE:
		n = un_new(l->ts ? BSON_TYPE_TIMESTAMP : BSON_TYPE_DATE_TIME);
		if (l->ts) {
			n->v.value.v_timestamp.timestamp = (uint32_t)(a->now_ms / 1000);
			n->v.value.v_timestamp.increment = 1;
		} else {
			n->v.value.v_datetime = a->now_ms;
		}
		return slot_put(a, s, n);
	case U_PUSH:
	case U_ADDTOSET:
		if (s->node && s->node->type != BSON_TYPE_ARRAY && l->op == U_ADDTOSET)
			return dfs_err_set(a->err, DFS_EINVAL,
					   "Cannot apply $addToSet to non-array field. Field named "
					   "'%s' has non-array type %s",
					   s->name, store_type_alias(s->node->type));
		return apply_push(a, l, s);
	case U_POP:
		if (!s->node)
			return 0;
		if (s->node->type != BSON_TYPE_ARRAY)
			return dfs_err_set(a->err, DFS_EINVAL,
					   "Path '%s' contains an element of non-array type '%s'",
					   a->path.data, store_type_alias(s->node->type));
		if (s->node->n) {
			int64_t d = 1;

			integral(&l->arg, &d);
			un_remove(s->node, d > 0 ? s->node->n - 1 : 0);
		}
		return 0;
	case U_PULL:
	case U_PULLALL: {
		struct unode *arr = s->node;
		bson_iter_t it;

		if (!arr)
			return 0;
		if (arr->type != BSON_TYPE_ARRAY)
			return dfs_err_set(a->err, DFS_EINVAL,
					   "Cannot apply %s to a non-array value (at '%s')",
					   l->opname, a->path.data);
		for (size_t i = arr->n; i-- > 0;) {
			bool m = false;

			if (l->op == U_PULL) {
				m = pull_match(l, arr->kids[i]);
			} else if (bson_iter_init_from_data(&it, l->arg.value.v_doc.data,
							    l->arg.value.v_doc.data_len)) {
				while (!m && bson_iter_next(&it))
					m = un_compare_value(arr->kids[i], bson_iter_value(&it)) ==
					    0;
			}
			if (m)
				un_remove(arr, i);
		}
		return 0;
	}
	case U_RENAME_FROM: {
		const bson_value_t *v;
		bson_iter_t h;

		if (rename_source(a, l, &v, &h))
			return a->err->code;
		if (v)
			slot_remove(s);
		return 0;
	}
	case U_RENAME_TO: {
		const bson_value_t *v;
		bson_iter_t h;

		if (rename_source(a, l, &v, &h))
			return a->err->code;
		if (!v)
			return 0;
		if (rename_dest_check(a, l) || grow(a, value_size(v)))
			return a->err->code;
		/* MongoDB moves the field: a renamed field goes to the end of its document */
		if (s->node && s->parent && s->parent->type == BSON_TYPE_DOCUMENT)
			slot_remove(s);
		return slot_put(a, s, un_from_value(v));
	}
	default:
		return dfs_err_set(a->err, DFS_EINVAL, "internal: unknown leaf");
	}
}

static int apply_node(struct actx *a, const struct tnode *t, struct slot *s);

static int apply_child(struct actx *a, const struct tnode *k, struct slot *cs)
{
	size_t mark = a->path.len;
	int rc;

	if (mark)
		dfs_buf_putc(&a->path, '.');
	dfs_buf_puts(&a->path, cs->name);
	rc = k->leaf ? apply_leaf(a, k->leaf, cs) : apply_node(a, k, cs);
	a->path.len = mark;
	a->path.data[mark] = '\0';
	return rc;
}

static const struct query_expr *afilter_of(const struct actx *a, const char *ident)
{
	for (size_t i = 0; i < a->u->naf; i++)
		if (!strcmp(a->u->af[i].ident, ident))
			return a->u->af[i].expr;
	return NULL;
}

/*
 * Which elements of the array at s each '$[]' / '$[ident]' child of t applies to, decided for
 * all of them before any is applied (as MongoDB matches array filters against the array as
 * it was when the array node is reached). *out: Owned, per child NULL or arr->n flags.
 */
static bool **array_matches(struct actx *a, const struct tnode *t, const struct slot *s)
{
	bool **m = NULL;

	if (!s->node || s->node->type != BSON_TYPE_ARRAY)
		return NULL;
	for (size_t i = 0; i < t->n; i++) {
		const struct tnode *k = t->kids[i];
		const struct query_expr *f;

		if (k->kind != T_ALL && k->kind != T_IDENT)
			continue;
		if (!m)
			m = xcalloc(t->n, sizeof(*m));
		m[i] = xcalloc(s->node->n, sizeof(**m));
		f = k->kind == T_IDENT ? afilter_of(a, k->ident) : NULL;
		for (size_t j = 0; j < s->node->n; j++)
			m[i][j] = !f || wrapped_match(f, k->ident, s->node->kids[j]);
	}
	return m;
}

/*
 * Before a node's children change an array, two of them that resolve to one element where
 * one of them is a leaf conflict ("a.$[]" with "a.0.b", "a.$" with "a.1"), reported as
 * MongoDB does before anything is applied. (Two inner nodes on one element merge; their
 * leaves meet in check_touched.)
 */
static int array_conflicts(struct actx *a, const struct tnode *t, const struct slot *s,
			   bool **match)
{
	size_t n = s->node->n;
	/* per element: 0 untouched, 1 by an inner node, 2 by a leaf */
	unsigned char *seen = xcalloc(n, 1);
	int rc = 0;

	for (size_t i = 0; i < t->n && !rc; i++) {
		const struct tnode *k = t->kids[i];
		unsigned char mine = k->leaf ? 2 : 1;

		for (size_t j = 0; j < n && !rc; j++) {
			bool hit;

			if (k->kind == T_ALL || k->kind == T_IDENT)
				hit = match && match[i] && match[i][j];
			else if (k->kind == T_POS)
				hit = a->elem_index >= 0 && (size_t)a->elem_index == j;
			else
				hit = all_digits(k->name) && strlen(k->name) < 10 &&
				      strtoul(k->name, NULL, 10) == j;
			if (!hit)
				continue;
			if (seen[j] && (seen[j] == 2 || mine == 2))
				rc = dfs_err_set(a->err, DFS_EINVAL,
						 "Update created a conflict at '%s%s%zu'",
						 a->path.data, a->path.len ? "." : "", j);
			if (mine > seen[j])
				seen[j] = mine;
		}
	}
	free(seen);
	return rc;
}

static int apply_node(struct actx *a, const struct tnode *t, struct slot *s)
{
	char nb[24], vb[200];
	size_t nmatch = s->node && s->node->type == BSON_TYPE_ARRAY ? s->node->n : 0;
	bool **match = array_matches(a, t, s);
	int rc = 0;

	if (nmatch && t->n > 1)
		rc = array_conflicts(a, t, s, match);

	for (size_t i = 0; i < t->n && !rc; i++) {
		const struct tnode *k = t->kids[i];
		struct slot cs;

		if (k->kind == T_FIELD || k->kind == T_POS) {
			const char *name = k->name;

			if (k->kind == T_POS) {
				if (a->elem_index < 0) {
					rc = dfs_err_set(a->err, DFS_EINVAL,
							 "The positional operator did not find "
							 "the match needed from the query");
					break;
				}
				snprintf(nb, sizeof(nb), "%d", a->elem_index);
				name = nb;
			}
			slot_child(s, name, &cs);
			rc = apply_child(a, k, &cs);
			continue;
		}
		/* $[] and $[ident] */
		if (!s->node) {
			rc = dfs_err_set(a->err, DFS_EINVAL,
					 "The path '%s' must exist in the document in order to "
					 "apply array updates",
					 a->path.data);
			break;
		}
		if (s->node->type != BSON_TYPE_ARRAY) {
			rc = dfs_err_set(a->err, DFS_EINVAL,
					 "Cannot apply array updates to non-array element %s: %s",
					 s->name, un_render(s->node, vb, sizeof(vb)));
			break;
		}
		for (size_t j = 0; j < s->node->n && j < nmatch && !rc; j++) {
			if (!match[i][j])
				continue;
			snprintf(nb, sizeof(nb), "%zu", j);
			memset(&cs, 0, sizeof(cs));
			cs.name = nb;
			cs.parent = s->node;
			cs.index = j;
			cs.node = s->node->kids[j];
			rc = apply_child(a, k, &cs);
		}
	}
	if (match) {
		for (size_t i = 0; i < t->n; i++)
			free(match[i]);
		free(match);
	}
	return rc;
}

static int touched_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Two leaves applied at the same path, or one under the other (design note 4)? */
static int check_touched(struct actx *a)
{
	if (a->ntouched < 2)
		return 0;
	qsort(a->touched, a->ntouched, sizeof(*a->touched), touched_cmp);
	/* sorted, every path that starts with p follows it directly (with others between, such as
	 * "a.0-x" between "a.0" and "a.0.b") */
	for (size_t i = 0; i + 1 < a->ntouched; i++) {
		const char *p = a->touched[i];
		size_t n = strlen(p);

		for (size_t j = i + 1; j < a->ntouched && !strncmp(p, a->touched[j], n); j++) {
			const char *q = a->touched[j];

			if (!q[n] || q[n] == '.')
				return dfs_err_set(a->err, DFS_EINVAL,
						   "Update created a conflict at '%s'", p);
		}
	}
	return 0;
}

/* Finishes out from the tree: _id first when asked, validation. */
static int finish(struct actx *a, struct unode *root, bool id_first, bson_t *out)
{
	bson_iter_t oid;
	long idi = un_find(root, "_id");

	if (bson_iter_init_find(&oid, a->orig, "_id")) {
		if (idi < 0 || un_compare_value(root->kids[idi], bson_iter_value(&oid)) != 0)
			return dfs_err_set(
				a->err, DFS_EINVAL,
				"Performing an update on the path '_id' would modify the "
				"immutable field '_id'");
	}
	if (id_first && idi > 0) {
		struct unode *n = root->kids[idi];
		char *k = root->keys[idi];

		memmove(root->kids + 1, root->kids, (size_t)idi * sizeof(*root->kids));
		memmove(root->keys + 1, root->keys, (size_t)idi * sizeof(*root->keys));
		root->kids[0] = n;
		root->keys[0] = k;
	}
	un_append_kids(out, root);
	if (store_doc_validate(out, a->err)) {
		bson_reinit(out);
		return a->err->code;
	}
	return 0;
}

static int apply_replacement(struct actx *a, const bson_t *repl, bson_t *out)
{
	bson_iter_t oid, it;
	bool have_id = bson_iter_init_find(&oid, a->orig, "_id");
	struct unode *root = un_new(BSON_TYPE_DOCUMENT);
	int rc;

	if (have_id)
		un_push(root, "_id", 3, un_from_iter(&oid));
	if (bson_iter_init(&it, repl)) {
		while (bson_iter_next(&it)) {
			if (!strcmp(bson_iter_key(&it), "_id")) {
				if (have_id) {
					if (store_value_compare(bson_iter_value(&it),
								bson_iter_value(&oid)))
						goto immutable;
					continue;
				}
				/* no _id yet: the replacement's goes first */
				un_push(root, "_id", 3, un_from_iter(&it));
				continue;
			}
			un_push(root, bson_iter_key(&it), bson_iter_key_len(&it),
				un_from_iter(&it));
		}
	}
	rc = finish(a, root, true, out);
	un_free(root);
	return rc;
immutable:
	un_free(root);
	return dfs_err_set(a->err, DFS_EINVAL,
			   "Performing an update on the path '_id' would modify the immutable "
			   "field '_id'");
}

/* Note 8: the pipeline's output is the replacement document. */
static int apply_pipeline(struct actx *a, bson_t *out)
{
	struct query_agg_opts o = {.now_ms = a->now_ms, .let = a->u->let};
	bson_t res = BSON_INITIALIZER;
	int rc = query_pipeline_apply(a->u->pipe, a->orig, &o, &res, a->err);

	if (!rc)
		rc = apply_replacement(a, &res, out);
	bson_destroy(&res);
	return rc;
}

int query_update_parse_pipeline(const bson_t *stages, const bson_t *array_filters,
				const struct query_let *let, struct query_update **out,
				struct dfs_err *err)
{
	struct query_update *u;
	int rc;

	*out = NULL;
	if (array_filters)
		return dfs_err_set(err, DFS_EINVAL,
				   "arrayFilters may not be specified for pipeline-style updates");
	u = xcalloc(1, sizeof(*u));
	u->let = let;
	if ((rc = query_pipeline_parse_let(stages, let, &u->pipe, err)) ||
	    (rc = query_pipeline_check_update(u->pipe, err))) {
		query_update_free(u);
		return rc;
	}
	*out = u;
	return 0;
}

int query_update_apply(const struct query_update *u, const bson_t *doc, int elem_index,
		       bool upsert_insert, int64_t now_ms, bson_t *out, bool *changed,
		       struct dfs_err *err)
{
	struct actx a = {.u = u,
			 .orig = doc,
			 .elem_index = elem_index,
			 .upsert = upsert_insert,
			 .now_ms = now_ms,
			 .budget = (uint64_t)DFS_MAX_DOC_SIZE + doc->len,
			 .err = err};
	struct unode *root = NULL;
	struct slot s = {0};
	int rc;

	if (changed)
		*changed = false;
	/* Operators: the tree is built from every byte of doc, and notices what is not BSON
	 * as bson_validate would, without a walk of its own (a 1,440-field document's). */
	if ((u->replacement || u->pipe) && !bson_validate(doc, BSON_VALIDATE_NONE, NULL))
		return dfs_err_set(err, DFS_EINVAL, "the document is not valid BSON");
	ua_enter();
	if (u->replacement) {
		rc = apply_replacement(&a, u->repl, out);
		goto done;
	}
	if (u->pipe) {
		rc = apply_pipeline(&a, out);
		goto done;
	}
	ua.corrupt = false;
	root = un_from_container(bson_get_data(doc), doc->len, BSON_TYPE_DOCUMENT);
	if (ua.corrupt) {
		rc = dfs_err_set(err, DFS_EINVAL, "the document is not valid BSON");
		goto done;
	}
	dfs_buf_init(&a.path);
	dfs_buf_reserve(&a.path, 64);
	a.path.data[0] = '\0';
	s.node = root;
	s.name = "";
	a.root = root;
	rc = apply_node(&a, &u->root, &s);
	if (!rc)
		rc = check_touched(&a);
	if (!rc)
		rc = finish(&a, root, upsert_insert, out);
	dfs_buf_release(&a.path);
	for (size_t i = 0; i < a.ntouched; i++)
		free(a.touched[i]);
	free(a.touched);
	un_free(root);
done:
	ua_leave();
	if (rc) {
		bson_reinit(out);
		return rc;
	}
	if (changed)
		*changed = out->len != doc->len ||
			   memcmp(bson_get_data(out), bson_get_data(doc), doc->len) != 0;
	return 0;
}

/* ---- upsert seeds -------------------------------------------------------------------- */

struct seed_eq {
	char *path;	   /* Owned */
	bson_value_t copy; /* Owned copy of the value */
};

struct seed {
	struct seed_eq *eq;
	size_t n, cap;
};

static void seed_add(struct seed *s, const char *path, const bson_value_t *v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 8;
		s->eq = xrealloc(s->eq, s->cap * sizeof(*s->eq));
	}
	s->eq[s->n].path = xstrdup(path);
	bson_value_copy(v, &s->eq[s->n].copy);
	s->n++;
}

static bool operator_doc(const bson_value_t *v)
{
	bson_iter_t it;

	return v->value_type == BSON_TYPE_DOCUMENT &&
	       bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) &&
	       bson_iter_next(&it) && bson_iter_key(&it)[0] == '$';
}

static void seed_collect(struct seed *s, bson_iter_t *it)
{
	while (bson_iter_next(it)) {
		const char *k = bson_iter_key(it);
		const bson_value_t *v = bson_iter_value(it);

		if (!strcmp(k, "$and")) {
			bson_iter_t arr, d;

			if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &arr))
				continue;
			while (bson_iter_next(&arr))
				if (BSON_ITER_HOLDS_DOCUMENT(&arr) && bson_iter_recurse(&arr, &d))
					seed_collect(s, &d);
			continue;
		}
		if (k[0] == '$')
			continue;
		if (operator_doc(v)) {
			bson_iter_t ops;

			if (!bson_iter_recurse(it, &ops))
				continue;
			while (bson_iter_next(&ops))
				if (!strcmp(bson_iter_key(&ops), "$eq"))
					seed_add(s, k, bson_iter_value(&ops));
			continue;
		}
		if (v->value_type == BSON_TYPE_REGEX)
			continue;
		seed_add(s, k, v);
	}
}

static int seed_cmp(const void *x, const void *y)
{
	const struct seed_eq *a = x, *b = y;

	return strcmp(a->path, b->path);
}

int query_upsert_seed(const bson_t *filter, bson_t *out, struct dfs_err *err)
{
	struct query_expr *e = NULL;
	struct seed s = {0};
	struct unode *root = NULL;
	bson_iter_t it;
	int rc = 0;

	if ((rc = query_filter_parse(filter, &e, err)))
		return rc;
	query_expr_free(e);
	if (!bson_iter_init(&it, filter))
		return dfs_err_set(err, DFS_EINVAL, "the filter is not valid BSON");
	seed_collect(&s, &it);
	/* MongoDB adds the equalities in the order of their paths */
	if (s.n > 1)
		qsort(s.eq, s.n, sizeof(*s.eq), seed_cmp);
	for (size_t i = 1; i < s.n; i++) {
		const char *p = s.eq[i - 1].path, *q = s.eq[i].path;
		size_t n = strlen(p);

		if (!strcmp(p, q)) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "cannot infer query fields to set, path '%s' is matched "
					 "twice",
					 p);
			goto done;
		}
		if (!strncmp(p, q, n) && q[n] == '.') {
			rc = dfs_err_set(
				err, DFS_EINVAL,
				"cannot infer query fields to set, both paths '%s' and '%s' "
				"are matched",
				q, p);
			goto done;
		}
	}
	ua_enter();
	root = un_new(BSON_TYPE_DOCUMENT);
	/* _id first, as an insert stores it */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < s.n; i++) {
			const char *path = s.eq[i].path;
			bool is_id = !strcmp(path, "_id") || !strncmp(path, "_id.", 4);
			struct unode *d = root;
			char *p, *save = NULL, *c, *next;

			if (is_id != (pass == 0))
				continue;
			p = xstrdup(path);
			c = strtok_r(p, ".", &save);
			while (c) {
				long k;

				next = strtok_r(NULL, ".", &save);
				k = un_find(d, c);
				if (!next) {
					un_push(d, c, strlen(c), un_from_value(&s.eq[i].copy));
					break;
				}
				if (k < 0) {
					un_push(d, c, strlen(c), un_new(BSON_TYPE_DOCUMENT));
					k = (long)d->n - 1;
				}
				d = d->kids[k];
				if (d->type != BSON_TYPE_DOCUMENT)
					break; /* prefixes were rejected above */
				c = next;
			}
			free(p);
		}
	}
	un_append_kids(out, root);
	if ((rc = store_doc_validate(out, err)))
		bson_reinit(out);
	un_free(root);
	ua_leave();
done:
	for (size_t i = 0; i < s.n; i++) {
		free(s.eq[i].path);
		bson_value_destroy(&s.eq[i].copy);
	}
	free(s.eq);
	return rc;
}
