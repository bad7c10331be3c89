/*
 * validate.c - may this BSON be stored as a document? MongoDB's rules as store.h lists them:
 * size, nesting depth, valid UTF-8 in every string and field name, the type of _id and no
 * '$'-prefixed field name inside _id. Field names with '.' or a leading '$' are stored
 * elsewhere (MongoDB 5.0+), except in a subdocument whose keys spell an Extended JSON wrapper
 * ({"$numberInt": "1"}, {"$oid": ..}): its file would read back as a typed value, so the
 * document could not round-trip through its file (store_codec_is_wrapper decides).
 *
 * It does not parse or render (codec_*.c), does not check index key sizes (key.c) or that _id
 * matches a file name (name.c), and does not look inside the scope of code-with-scope values
 * beyond what libbson's iterator checks.
 */
#include "store.h"

#include <stdio.h>
#include <string.h>

/* Paths in messages are cut to this many bytes (plus "..."). */
#define PATH_SHOWN 120

/*
 * The walk keeps the field names of the current path as a stack of views into the document
 * (no copying per field); the dotted path is only built for a message.
 */
struct vctx {
	const char *key[DFS_MAX_DEPTH + 2]; /* Borrowed from the document: the path's names */
	size_t klen[DFS_MAX_DEPTH + 2];	    /* their lengths */
	int n;				    /* names on the path */
	int in_id;			    /* > 0 while inside a document held by _id */
	struct dfs_err *err;
};

/* The current path for a message ("" at the top), abbreviated at a UTF-8 boundary when
 * long, in buf[PATH_SHOWN + 8]. */
static const char *shown_path(struct vctx *v, char *buf)
{
	struct dfs_buf path;
	size_t n;

	dfs_buf_init(&path);
	for (int i = 0; i < v->n; i++) {
		if (i)
			dfs_buf_putc(&path, '.');
		dfs_buf_append(&path, v->key[i], v->klen[i]);
	}
	n = path.len;
	if (n > PATH_SHOWN) {
		n = PATH_SHOWN;
		while (n > 0 && ((unsigned char)path.data[n] & 0xc0) == 0x80)
			n--;
		snprintf(buf, PATH_SHOWN + 8, "%.*s...", (int)n, path.data);
	} else {
		snprintf(buf, PATH_SHOWN + 8, "%s", path.data ? path.data : "");
	}
	dfs_buf_release(&path);
	return buf;
}

static int bad_field(struct vctx *v, const char *key, const char *rule)
{
	char pb[PATH_SHOWN + 8];

	if (!v->n)
		return dfs_err_set(v->err, DFS_EINVAL, "field name '%.60s' must not %s", key, rule);
	return dfs_err_set(v->err, DFS_EINVAL, "field name '%.60s' at '%s' must not %s", key,
			   shown_path(v, pb), rule);
}

static int bad_utf8(struct vctx *v, const char *what)
{
	char pb[PATH_SHOWN + 8];

	return dfs_err_set(v->err, DFS_EINVAL, "%s at '%s' is not valid UTF-8", what,
			   shown_path(v, pb));
}

/* The first field name of doc (Borrowed from doc), "" when it is empty. */
static const char *first_key(const bson_t *doc)
{
	bson_iter_t it;

	return bson_iter_init(&it, doc) && bson_iter_next(&it) ? bson_iter_key(&it) : "";
}

/* bson_utf8_validate with a fast path for ASCII, by far the common case. */
static bool utf8_ok(const char *s, size_t n, bool allow_nul)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t w;

		memcpy(&w, u + i, 8);
		if (w & UINT64_C(0x8080808080808080))
			break;
		/* a NUL byte: (w - 0x01..) & ~w & 0x80.. is nonzero exactly when one is zero */
		if (!allow_nul && ((w - UINT64_C(0x0101010101010101)) & ~w &
				   UINT64_C(0x8080808080808080)))
			return false;
	}
	for (; i < n; i++) {
		if (u[i] >= 0x80)
			return bson_utf8_validate(s + i, n - i, allow_nul);
		if (!u[i] && !allow_nul)
			return false;
	}
	return true;
}

/* Refuses the subdocument held by it when its rendering would read back as a typed value. */
static int check_wrapper(struct vctx *v, const bson_iter_t *it)
{
	char pb[PATH_SHOWN + 8];
	const uint8_t *data;
	uint32_t len;
	bson_t sub;

	bson_iter_document(it, &len, &data);
	if (!data || !bson_init_static(&sub, data, len))
		return dfs_err_set(v->err, DFS_EINVAL, "document is not valid BSON");
	if (!store_codec_is_wrapper(&sub))
		return DFS_OK;
	return dfs_err_set(
		v->err, DFS_EINVAL,
		"the document at '%s' has the keys of an Extended JSON type wrapper "
		"('%.40s'): its file would read back as a typed value, not as a document",
		shown_path(v, pb), first_key(&sub));
}

/* Walks the document or array held by it (or the top level when it is NULL). */
static int check_doc(struct vctx *v, const bson_t *top, const bson_iter_t *holder, bool array,
		     int depth)
{
	bson_iter_t it;
	int rc;

	if (depth > DFS_MAX_DEPTH) {
		char pb[PATH_SHOWN + 8];

		return dfs_err_set(v->err, DFS_EINVAL, "nesting deeper than %d levels at '%s'",
				   DFS_MAX_DEPTH, shown_path(v, pb));
	}
	if (top ? !bson_iter_init(&it, top) : !bson_iter_recurse(holder, &it))
		return dfs_err_set(v->err, DFS_EINVAL, "document is not valid BSON");
	while (bson_iter_next(&it)) {
		const char *key = bson_iter_key(&it);
		size_t klen = bson_iter_key_len(&it);
		const char *s = NULL, *s2 = NULL;
		uint32_t n = 0;

		if (!array) {
			if (!utf8_ok(key, klen, false))
				return v->n ? bad_utf8(v, "a field name")
					    : dfs_err_set(v->err, DFS_EINVAL,
							  "a field name is not valid UTF-8");
			if (key[0] == '$' && v->in_id)
				return bad_field(v, key, "start with '$' inside '_id'");
		}
		v->key[v->n] = key;
		v->klen[v->n] = klen;
		v->n++;
		switch (bson_iter_type(&it)) {
		case BSON_TYPE_UTF8:
			s = bson_iter_utf8(&it, &n);
			break;
		case BSON_TYPE_SYMBOL:
			s = bson_iter_symbol(&it, &n);
			break;
		case BSON_TYPE_CODE:
			s = bson_iter_code(&it, &n);
			break;
		case BSON_TYPE_CODEWSCOPE: {
			const uint8_t *sd;
			uint32_t sl;

			s = bson_iter_codewscope(&it, &n, &sl, &sd);
			break;
		}
		case BSON_TYPE_REGEX:
			s = bson_iter_regex(&it, &s2);
			n = (uint32_t)strlen(s);
			if (!utf8_ok(s2, strlen(s2), false))
				return bad_utf8(v, "a regex");
			break;
		case BSON_TYPE_DBPOINTER: {
			const bson_oid_t *oid;

			bson_iter_dbpointer(&it, &n, &s, &oid);
			break;
		}
		case BSON_TYPE_DOCUMENT:
			if ((rc = check_wrapper(v, &it)))
				return rc;
			/* fall through */
		case BSON_TYPE_ARRAY:
			if (v->n == 1 && !strcmp(key, "_id"))
				v->in_id++;
			rc = check_doc(v, NULL, &it, BSON_ITER_HOLDS_ARRAY(&it), depth + 1);
			if (v->n == 1 && !strcmp(key, "_id"))
				v->in_id--;
			if (rc)
				return rc;
			break;
		default:
			break;
		}
		if (s && !utf8_ok(s, n, true))
			return bad_utf8(v, "a string");
		v->n--;
	}
	if (it.err_off)
		return dfs_err_set(v->err, DFS_EINVAL, "document is not valid BSON");
	return DFS_OK;
}

/*
 * Checks that doc may be stored (the rules of store.h). Returns 0, DFS_EFBIG when it is over
 * DFS_MAX_DOC_SIZE, or DFS_EINVAL with a message naming the offending path.
 */
int store_doc_validate(const bson_t *doc, struct dfs_err *err)
{
	struct vctx v;
	bson_iter_t it;

	if (doc->len > DFS_MAX_DOC_SIZE)
		return dfs_err_set(err, DFS_EFBIG, "document is %u bytes, over the 16 MiB limit",
				   doc->len);
	if (bson_iter_init_find(&it, doc, "_id")) {
		if (BSON_ITER_HOLDS_ARRAY(&it))
			return dfs_err_set(err, DFS_EINVAL, "'_id' must not be an array");
		if (BSON_ITER_HOLDS_REGEX(&it))
			return dfs_err_set(err, DFS_EINVAL, "'_id' must not be a regex");
		if (BSON_ITER_HOLDS_UNDEFINED(&it))
			return dfs_err_set(err, DFS_EINVAL, "'_id' must not be undefined");
	}
	v.err = err;
	v.n = 0;
	v.in_id = 0;
	return check_doc(&v, doc, NULL, false, 1);
}
