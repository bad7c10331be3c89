/*
 * cmd_find.c - the read commands: find (and tailable finds over fs/paths/tail.c), getMore,
 * killCursors, count and distinct. Each runs the engine's find (query_find_open,
 * query_cursor_count, query_distinct_*) and answers with a cursor (cursor.c) or a value.
 */
#include "wire.h"
#include "fs_int.h"
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- find, getMore, killCursors ----------------------------------------------------- */

struct find_src {
	struct query_cursor *cur;
	int64_t n;
};

static int find_next(void *ctx, const bson_t **doc, struct dfs_err *err)
{
	struct find_src *f = ctx;
	int rc = query_cursor_next(f->cur, doc, err);

	if (!rc)
		f->n++;
	return rc;
}

static int tail_next(void *src, struct dfs_buf *out, bool (*stop)(void *ctx), void *ctx,
		     struct dfs_err *err)
{
	return fs_tail_next(src, 1 << 20, out, stop, ctx, err);
}

static bool tail_done(void *src)
{
	return fs_tail_done(src);
}

static void tail_free(void *src)
{
	fs_tail_free(src);
}

/* A tailable find (cursor.c note 4): the mount's tailable read (fs/paths/tail.c) of a capped
 * collection, which refuses what MongoDB's does (a sort other than $natural, an index hint,
 * a collection that is not capped). */
static int find_tailable(struct wire_ctx *c, const char *name, const char *ns,
			 const struct wire_find_args *a, bson_t *reply)
{
	struct dfs_err err = {0};
	struct fs_query q;
	struct fs_tail *tl = NULL;
	struct wire_coll x;
	bson_t lsid;
	bool await = false;
	int rc;

	wire_arg_bool(c, "awaitData", &await);
	rc = wire_coll_open(c, name, WIRE_COLL_READ, &x);
	if (rc == DFS_ENOENT) {
		wire_empty_cursor(reply, ns, "firstBatch");
		return 0;
	}
	if (rc)
		return rc;
	wire_coll_close(c, &x, false);
	fs_query_init(&q);
	if (a->o.filter)
		bson_concat(&q.filter, a->o.filter);
	if ((q.has_sort = a->o.sort != NULL))
		bson_concat(&q.sort, a->o.sort);
	if ((q.has_projection = a->o.projection != NULL))
		bson_concat(&q.projection, a->o.projection);
	if ((q.has_hint = a->o.hint != NULL))
		bson_concat(&q.hint, a->o.hint);
	if (a->o.hint_name && !(q.hint_name = strdup(a->o.hint_name)))
		abort();
	q.skip = a->o.skip;
	q.limit = a->o.limit;
	q.format = FSQ_BSON;
	rc = fs_tail_open(x.db, x.co.id, &q, &tl, &err);
	fs_query_release(&q);
	if (rc)
		return wire_fail_dfs(c, &err);
	return wire_cursor_stream_reply(c, ns, wire_stream_new(tail_next, tail_done, tail_free, tl),
					await, a->single ? -1 : a->batch, wire_lsid(c, &lsid),
					reply);
}

/* find, its filter bound to the command's let in *bound (the caller's, destroyed after). */
static int find_bound(struct wire_ctx *c, bson_t *reply, bson_t *bound)
{
	struct query_let *let = NULL;
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1], ns[2 * DFS_MAX_NS_NAME + 2];
	struct wire_find_args a;
	struct find_src f = {0};
	struct wire_source src = {find_next, &f};
	struct wire_coll x;
	bson_t lsid;
	bool tailable = false;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = wire_find_args(c, &a, false)) ||
	    (rc = wire_arg_let(c, &let)))
		return rc;
	if (let && a.o.filter) { /* the find copies what it keeps of its filter */
		bson_destroy(bound);
		query_let_filter(let, a.o.filter, bound);
		a.o.filter = bound;
	}
	query_let_free(let);
	wire_ns(ns, sizeof(ns), c->db, name);
	wire_arg_bool(c, "tailable", &tailable);
	if (tailable)
		return find_tailable(c, name, ns, &a, reply);
	rc = wire_coll_open(c, name, WIRE_COLL_READ, &x);
	if (rc == DFS_ENOENT) {
		struct query_expr *e = NULL;

		/* nothing to read, but a bad filter is still an error */
		if (a.o.filter && query_filter_parse(a.o.filter, &e, &err))
			return wire_fail_dfs(c, &err);
		query_expr_free(e);
		wire_empty_cursor(reply, ns, "firstBatch");
		return 0;
	}
	if (rc)
		return rc;
	if ((rc = query_find_open(x.t, x.co.id, &a.o, &f.cur, &err))) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	{
		struct query_summary sum;

		query_cursor_summary(f.cur, &sum);
		fs_curop_plan(&sum);
	}
	if (wire_cursor_reply(c, ns, &src, a.batch, a.single || a.o.limit == 1, wire_lsid(c, &lsid),
			      reply, &err))
		rc = wire_fail_dfs(c, &err);
done:
	if (f.cur) {
		struct query_summary sum;

		query_cursor_summary(f.cur, &sum);
		fs_curop_note(&sum, f.n);
	}
	query_cursor_free(f.cur);
	wire_coll_close(c, &x, false);
	return rc;
}

int wire_cmd_find(struct wire_ctx *c, bson_t *reply)
{
	bson_t bound = BSON_INITIALIZER;
	int rc = find_bound(c, reply, &bound);

	bson_destroy(&bound);
	return rc;
}

int wire_cmd_get_more(struct wire_ctx *c, bson_t *reply)
{
	char ns[2 * DFS_MAX_NS_NAME + 2];
	bson_iter_t it;
	int64_t batch = 0, await_ms = 1000;
	int rc;

	if (!bson_iter_init_find(&it, c->cmd, "getMore") || !BSON_ITER_HOLDS_INT64(&it))
		return wire_fail(c, 14, "TypeMismatch",
				 "Field 'getMore' must be of type long in: getMore");
	if (!bson_iter_init_find(&it, c->cmd, "collection") || !BSON_ITER_HOLDS_UTF8(&it))
		return wire_fail(c, 14, "TypeMismatch",
				 "BSON field 'getMore.collection' is missing or not a string");
	wire_ns(ns, sizeof(ns), c->db, bson_iter_utf8(&it, NULL));
	if ((rc = wire_arg_int(c, "batchSize", &batch)) > 1)
		return rc;
	if (batch < 0)
		return wire_fail(c, 51024, "Location51024",
				 "BSON field 'batchSize' value must be >= 0");
	if ((rc = wire_arg_int(c, "maxTimeMS", &await_ms)) > 1)
		return rc;
	bson_iter_init_find(&it, c->cmd, "getMore");
	return wire_cursor_more(c, bson_iter_int64(&it), ns, batch, await_ms, reply);
}

int wire_cmd_kill_cursors(struct wire_ctx *c, bson_t *reply)
{
	bson_iter_t it, arr;
	bson_t killed, nf, empty;
	int nk = 0, nn = 0;

	if (!bson_iter_init_find(&it, c->cmd, "cursors") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr))
		return wire_fail(c, 14, "TypeMismatch",
				 "BSON field 'killCursors.cursors' is missing or not an array");
	bson_init(&killed);
	bson_init(&nf);
	while (bson_iter_next(&arr)) {
		char key[16];
		int64_t id;

		if (!BSON_ITER_HOLDS_INT64(&arr)) {
			bson_destroy(&killed);
			bson_destroy(&nf);
			return wire_fail(c, 14, "TypeMismatch",
					 "BSON field 'killCursors.cursors' must hold longs");
		}
		id = bson_iter_int64(&arr);
		if (wire_cursor_kill(id)) {
			snprintf(key, sizeof(key), "%d", nk++);
			BSON_APPEND_INT64(&killed, key, id);
		} else {
			snprintf(key, sizeof(key), "%d", nn++);
			BSON_APPEND_INT64(&nf, key, id);
		}
	}
	bson_init(&empty);
	BSON_APPEND_ARRAY(reply, "cursorsKilled", &killed);
	BSON_APPEND_ARRAY(reply, "cursorsNotFound", &nf);
	BSON_APPEND_ARRAY(reply, "cursorsAlive", &empty);
	BSON_APPEND_ARRAY(reply, "cursorsUnknown", &empty);
	bson_destroy(&killed);
	bson_destroy(&nf);
	bson_destroy(&empty);
	return 0;
}

/* ---- count, distinct ------------------------------------------------------------------ */

int wire_cmd_count(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	struct wire_find_args a;
	struct query_cursor *cur = NULL;
	struct wire_coll x;
	int64_t n = 0;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = wire_find_args(c, &a, true)))
		return rc;
	a.o.count_only = true;
	rc = wire_coll_open(c, name, WIRE_COLL_READ, &x);
	if (rc == DFS_ENOENT)
		goto reply;
	if (rc)
		return rc;
	if ((rc = query_find_open(x.t, x.co.id, &a.o, &cur, &err)) ||
	    (rc = query_cursor_count(cur, &n, &err))) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	{
		struct query_summary sum;

		query_cursor_summary(cur, &sum);
		fs_curop_note(&sum, 0);
	}
reply:
	wire_append_count(reply, "n", n);
	rc = 0;
done:
	query_cursor_free(cur);
	wire_coll_close(c, &x, false);
	return rc;
}

int wire_cmd_distinct(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	struct wire_find_args a;
	struct query_cursor *cur = NULL;
	struct query_distinct d;
	struct wire_coll x;
	const bson_t *doc;
	const char *key;
	bson_iter_t it;
	bson_t arr;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = wire_find_args(c, &a, true)))
		return rc;
	if (!bson_iter_init_find(&it, c->cmd, "key") || !BSON_ITER_HOLDS_UTF8(&it))
		return wire_fail(c, 14, "TypeMismatch",
				 "BSON field 'distinct.key' is missing or not a string");
	key = bson_iter_utf8(&it, NULL);
	query_distinct_init(&d);
	rc = wire_coll_open(c, name, WIRE_COLL_READ, &x);
	if (rc == DFS_ENOENT)
		goto reply;
	if (rc)
		return rc;
	if ((rc = query_find_open(x.t, x.co.id, &a.o, &cur, &err))) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	while ((rc = query_cursor_next(cur, &doc, &err)) == 0)
		query_distinct_add(&d, doc, key);
	if (rc != DFS_ENOENT) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	query_distinct_finish_collated(&d, a.o.collation);
reply:
	BSON_APPEND_ARRAY_BEGIN(reply, "values", &arr);
	for (size_t i = 0; i < d.n; i++) {
		char k[24];

		snprintf(k, sizeof(k), "%zu", i);
		bson_append_value(&arr, k, -1, &d.vals[i]);
	}
	bson_append_array_end(reply, &arr);
	rc = 0;
done:
	query_distinct_release(&d);
	query_cursor_free(cur);
	wire_coll_close(c, &x, false);
	return rc;
}
