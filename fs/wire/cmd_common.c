/*
 * cmd_common.c - what the document commands (cmd_write.c, cmd_find.c, cmd_agg.c) share: a
 * command's collection in a transaction of the right kind, sub-document arguments, a
 * find's arguments (find, count, distinct and their explains), the lsid, an empty cursor,
 * and streams for cursors that read on.
 *
 * Design notes
 * 1. A read of a collection that does not exist answers as an empty one without creating
 *    anything: a find or count from nothing; an aggregate or explain (whose stages may
 *    produce documents from no input, $facet, or whose plan must be shown) runs over a
 *    collection made inside a write transaction that is then rolled back (WIRE_COLL_GHOST).
 */
#include "wire.h"
#include "fs_int.h"
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Opens name of c->db as mode says: 0, DFS_ENOENT (nothing open, no error recorded), or a
 * wire_fail code. */
int wire_coll_open(struct wire_ctx *c, const char *name, int mode, struct wire_coll *x)
{
	struct dfs_err err = {0};
	bool write = mode == WIRE_COLL_CREATE || mode == WIRE_COLL_WRITE;
	int rc;

	memset(x, 0, sizeof(*x));
	if ((rc = wire_db(c, mode == WIRE_COLL_CREATE, &x->db)))
		return rc;
	if ((rc = store_txn_begin(x->db, write, &x->t, &err)))
		return wire_fail_dfs(c, &err);
	rc = store_coll_find(x->t, name, &x->co, &err);
	if (rc == DFS_ENOENT && mode == WIRE_COLL_GHOST) {
		store_txn_abort(x->t);
		x->t = NULL;
		dfs_err_clear(&err);
		if ((rc = store_txn_begin(x->db, true, &x->t, &err)))
			return wire_fail_dfs(c, &err);
		rc = store_coll_find(x->t, name, &x->co, &err); /* made meanwhile? */
		if (rc == DFS_ENOENT) {
			dfs_err_clear(&err);
			rc = store_coll_create(x->t, name, 0755, getuid(), getgid(), &x->co, &err);
			x->ghost = rc == 0;
		}
	} else if (rc == DFS_ENOENT && mode == WIRE_COLL_CREATE) {
		dfs_err_clear(&err);
		rc = store_coll_create(x->t, name, 0755, getuid(), getgid(), &x->co, &err);
		x->created = rc == 0;
	}
	if (rc == DFS_ENOENT) {
		store_txn_abort(x->t);
		x->t = NULL;
		return DFS_ENOENT;
	}
	if (rc) {
		store_txn_abort(x->t);
		x->t = NULL;
		return wire_fail_dfs(c, &err);
	}
	return 0;
}

/* Ends x: commits when commit (and x is not a ghost), else rolls back. 0 or a wire_fail. */
int wire_coll_close(struct wire_ctx *c, struct wire_coll *x, bool commit)
{
	struct dfs_err err = {0};
	struct store_txn *t = x->t;

	x->t = NULL;
	if (!t)
		return 0;
	if (!commit || x->ghost) {
		store_txn_abort(t);
		return 0;
	}
	if (store_txn_commit(t, &err))
		return wire_fail_dfs(c, &err);
	return 0;
}

void wire_ns(char *out, size_t cap, const char *db, const char *coll)
{
	snprintf(out, cap, "%s.%s", db, coll);
}

/* A sub-document field of doc as a view: true when present and a document (or array when
 * array). */
bool wire_sub_view(const bson_t *doc, const char *key, bool array, bson_t *view)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	if (!bson_iter_init_find(&it, doc, key))
		return false;
	if (array ? !BSON_ITER_HOLDS_ARRAY(&it) : !BSON_ITER_HOLDS_DOCUMENT(&it))
		return false;
	if (array)
		bson_iter_array(&it, &len, &data);
	else
		bson_iter_document(&it, &len, &data);
	return bson_init_static(view, data, len);
}

int64_t wire_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether option name is a collation of only {locale: "simple"}: the binary comparison
 * that docfs always does. */
static bool simple_collation(const char *name, const uint8_t *data, uint32_t len)
{
	bson_t doc;
	bson_iter_t it;

	if (strcmp(name, "collation") || !bson_init_static(&doc, data, len) ||
	    bson_count_keys(&doc) != 1 || !bson_iter_init_find(&it, &doc, "locale") ||
	    !BSON_ITER_HOLDS_UTF8(&it))
		return false;
	return !strcmp(bson_iter_utf8(&it, NULL), "simple");
}

int wire_refuse_opts(struct wire_ctx *c, const bson_t *doc, const char *what,
		     const char *const *names)
{
	bson_iter_t it;

	for (; *names; names++) {
		bool set;

		if (!bson_iter_init_find(&it, doc, *names))
			continue;
		if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
			uint32_t len;
			const uint8_t *data;

			bson_iter_document(&it, &len, &data);
			set = len > 5 && !simple_collation(*names, data, len); /* {} is 5 bytes */
		} else {
			set = !BSON_ITER_HOLDS_NULL(&it) && bson_iter_as_bool(&it);
		}
		if (set)
			return wire_fail(c, 238, "NotImplemented",
					 "%s: option '%s' is not supported by docfs yet", what,
					 *names);
	}
	return 0;
}

int wire_arg_collation(struct wire_ctx *c, const bson_t *doc, struct query_collation **out)
{
	struct dfs_err err = {0};
	bson_iter_t it;
	bson_t view;

	*out = NULL;
	if (!bson_iter_init_find(&it, doc, "collation") || BSON_ITER_HOLDS_NULL(&it))
		return 0;
	if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !wire_sub_view(doc, "collation", false, &view))
		return wire_fail(c, 14, "TypeMismatch",
				 "BSON field '%s.collation' is the wrong type, expected type "
				 "'object'",
				 c->name);
	if (query_collation_new(&view, out, &err))
		return wire_fail(c, 2, "BadValue", "%s", err.msg);
	return 0;
}

int wire_arg_let(struct wire_ctx *c, struct query_let **out)
{
	struct dfs_err err = {0};
	bson_iter_t it;
	bson_t view;

	*out = NULL;
	if (!bson_iter_init_find(&it, c->cmd, "let"))
		return 0;
	if (!BSON_ITER_HOLDS_DOCUMENT(&it))
		return wire_fail(c, 14, "TypeMismatch",
				 "BSON field '%s.let' is the wrong type, expected type 'object'",
				 c->name);
	if (!wire_sub_view(c->cmd, "let", false, &view) ||
	    query_let_new(&view, wire_now_ms(), out, &err))
		return wire_fail(c, 2, "BadValue", "%s: %s", c->name, err.msg);
	return 0;
}

/* Options of find, and of count and distinct, that docfs does not have yet: refused by
 * name rather than ignored (an option ignored gives other documents, silently). */
static const char *const find_refused[] = {"returnKey", "showRecordId", "oplogReplay", NULL};
static const char *const count_refused[] = {NULL};

int wire_find_args(struct wire_ctx *c, struct wire_find_args *a, bool count)
{
	bson_iter_t it;
	int64_t limit = 0, skip = 0;
	int rc;

	memset(a, 0, sizeof(*a));
	a->batch = -1;
	if ((rc = wire_refuse_opts(c, c->cmd, c->name, count ? count_refused : find_refused)))
		return rc;
	if ((rc = wire_arg_doc(c, count ? "query" : "filter", &a->filter)) > 1)
		return rc;
	a->o.filter = rc == 0 ? &a->filter : NULL;
	query_collation_free(c->coll);
	if ((rc = wire_arg_collation(c, c->cmd, &c->coll)))
		return rc;
	a->o.collation = c->coll;
	if (!count) {
		if ((rc = wire_arg_doc(c, "sort", &a->sort)) > 1)
			return rc;
		a->o.sort = rc == 0 && !bson_empty(&a->sort) ? &a->sort : NULL;
		if ((rc = wire_arg_doc(c, "projection", &a->projection)) > 1)
			return rc;
		a->o.projection = rc == 0 && !bson_empty(&a->projection) ? &a->projection : NULL;
		if ((rc = wire_arg_doc(c, "min", &a->min)) > 1)
			return rc;
		a->o.min = rc == 0 ? &a->min : NULL; /* plan.c: index bounds (needs a hint) */
		if ((rc = wire_arg_doc(c, "max", &a->max)) > 1)
			return rc;
		a->o.max = rc == 0 ? &a->max : NULL;
	}
	if (bson_iter_init_find(&it, c->cmd, "hint")) {
		if (BSON_ITER_HOLDS_UTF8(&it)) {
			a->o.hint_name = bson_iter_utf8(&it, NULL);
		} else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
			if ((rc = wire_arg_doc(c, "hint", &a->hint)) > 1)
				return rc;
			a->o.hint = bson_empty(&a->hint) ? NULL : &a->hint;
		} else {
			return wire_fail(c, 2, "BadValue", "hint must be a string or an object");
		}
	}
	if ((rc = wire_arg_int(c, "skip", &skip)) > 1 ||
	    (rc = wire_arg_int(c, "limit", &limit)) > 1 ||
	    (rc = wire_arg_int(c, "batchSize", &a->batch)) > 1)
		return rc;
	if (skip < 0)
		return wire_fail(c, 51024, "Location51024",
				 "BSON field 'skip' value must be >= 0, actual value '%lld'",
				 (long long)skip);
	if (limit < 0) {
		if (!count)
			return wire_fail(c, 51024, "Location51024",
					 "BSON field 'limit' value must be >= 0, actual value "
					 "'%lld'",
					 (long long)limit);
		limit = -limit;
	}
	if (!bson_has_field(c->cmd, "batchSize"))
		a->batch = -1;
	else if (a->batch < 0)
		return wire_fail(c, 51024, "Location51024",
				 "BSON field 'batchSize' value must be >= 0, actual value '%lld'",
				 (long long)a->batch);
	wire_arg_bool(c, "singleBatch", &a->single);
	a->o.skip = skip;
	a->o.limit = limit;
	a->o.sort_mem = fs_sort_mem;
	return 0;
}

/* The lsid of the command (a view), or NULL. */
const bson_t *wire_lsid(struct wire_ctx *c, bson_t *view)
{
	return wire_sub_view(c->cmd, "lsid", false, view) ? view : NULL;
}

void wire_empty_cursor(bson_t *reply, const char *ns, const char *key)
{
	bson_t cur, arr;

	BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cur);
	BSON_APPEND_ARRAY_BEGIN(&cur, key, &arr);
	bson_append_array_end(&cur, &arr);
	BSON_APPEND_INT64(&cur, "id", 0);
	BSON_APPEND_UTF8(&cur, "ns", ns);
	bson_append_document_end(reply, &cur);
}

/* A heap wire_stream of next, free and src. */
struct wire_stream *wire_stream_new(int (*next)(void *, struct dfs_buf *, bool (*)(void *), void *,
						struct dfs_err *),
				    bool (*done)(void *), void (*fr)(void *), void *src)
{
	struct wire_stream *st = calloc(1, sizeof(*st));

	if (!st)
		abort();
	st->next = next;
	st->done = done;
	st->free = fr;
	st->src = src;
	return st;
}
