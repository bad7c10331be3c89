/*
 * cmd_agg.c - aggregate and explain: a pipeline parsed and run by the engine (query_agg_*,
 * $out/$merge through query_agg_run_out), and the stages the engine has no pipeline for,
 * answered from what the mount has: $changeStream (fs/paths/changes.c's streams, read on by a
 * stream cursor), $currentOp (curop.c's registry) and $collStats (stats.c's figures);
 * explain of find, count, distinct and aggregate (the documents explain/ paths show), and
 * of update, delete and findAndModify (their find under the write's stage).
 */
#include "wire.h"
#include "fs_int.h"
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* ---- change streams ----------------------------------------------------------------- */

/* Appends s %-escaped (every byte but letters and digits) to out: an option value of the
 * mount's change stream names, which fs_changes_open decodes. */
static void opt_escape(struct dfs_buf *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9'))
			dfs_buf_putc(out, (char)ch);
		else
			dfs_buf_printf(out, "%%%02X", ch);
	}
}

/* "&name=<value as compact JSON, escaped>" appended to out. */
static int opt_json(struct dfs_buf *out, const char *name, const bson_value_t *v,
		    struct dfs_err *err)
{
	struct dfs_buf j;
	int rc;

	dfs_buf_init(&j);
	rc = store_codec_render_value(v, &j, err);
	if (!rc) {
		dfs_buf_printf(out, "&%s=", name);
		opt_escape(out, j.data ? j.data : "", j.len);
	}
	dfs_buf_release(&j);
	return rc;
}

static int changes_next(void *src, struct dfs_buf *out, bool (*stop)(void *ctx), void *ctx,
			struct dfs_err *err)
{
	struct dfs_buf lines;
	size_t at = 0;
	int rc;

	dfs_buf_init(&lines);
	rc = fs_changes_next(src, 1 << 20, &lines, stop, ctx, err);
	/* each event is a line of type-exact JSON (fs/paths/changes.c): back to the same BSON */
	while (!rc && at < lines.len) {
		const char *nl = memchr(lines.data + at, '\n', lines.len - at);
		size_t n = nl ? (size_t)(nl - (lines.data + at)) : lines.len - at;
		bson_t ev = BSON_INITIALIZER;

		if (n && !(rc = store_codec_parse_doc(lines.data + at, n, &ev, err)))
			dfs_buf_append(out, bson_get_data(&ev), ev.len);
		bson_destroy(&ev);
		at += n + 1;
	}
	dfs_buf_release(&lines);
	return rc;
}

static void changes_free(void *src)
{
	fs_changes_free(src);
}

static bool changes_token(void *src, bson_t *out)
{
	char token[STORE_TOKEN_LEN + 1];

	if (!fs_changes_token(src, token))
		return false;
	BSON_APPEND_UTF8(out, "_data", token);
	return true;
}

/* An aggregate whose first stage is $changeStream (watch()): the mount's change stream
 * (fs/paths/changes.c: resume tokens, fullDocument, $match stages) with follow=1, read by a
 * stream cursor (cursor.c note 4). -1 when the pipeline does not start with
 * $changeStream, else 0 or a wire_fail code. */
static int change_stream(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct fs_changes *ch = NULL;
	struct store_db *db = NULL;
	struct dfs_buf opts, rest;
	bson_iter_t it, st, o;
	bson_t stage, spec, cur, lsid;
	const char *coll = NULL;
	char ns[2 * DFS_MAX_NS_NAME + 32];
	bool cluster = false;
	int64_t batch = -1;
	int nrest = 0, rc = 0;

	if (!bson_iter_init_find(&it, c->cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &st) || !bson_iter_next(&st) || !BSON_ITER_HOLDS_DOCUMENT(&st))
		return -1;
	{
		const uint8_t *data;
		uint32_t len;

		bson_iter_document(&st, &len, &data);
		if (!bson_init_static(&stage, data, len) ||
		    !bson_iter_init_find(&o, &stage, "$changeStream"))
			return -1;
	}
	if (!wire_sub_view(&stage, "$changeStream", false, &spec))
		return wire_fail(c, 14, "TypeMismatch",
				 "the $changeStream stage specification must be an object");
	if (wire_arg_doc(c, "cursor", &cur) == 0 && bson_iter_init_find(&o, &cur, "batchSize") &&
	    BSON_ITER_HOLDS_NUMBER(&o))
		batch = bson_iter_as_int64(&o);
	dfs_buf_init(&opts);
	dfs_buf_init(&rest);
	dfs_buf_puts(&opts, "follow=1");
	if (bson_iter_init(&o, &spec))
		while (!rc && bson_iter_next(&o)) {
			const char *k = bson_iter_key(&o);

			if (!strcmp(k, "resumeAfter") || !strcmp(k, "startAfter")) {
				if (opt_json(&opts, k, bson_iter_value(&o), &err))
					rc = wire_fail_dfs(c, &err);
			} else if (!strcmp(k, "startAtOperationTime")) {
				uint32_t t, i;

				if (!BSON_ITER_HOLDS_TIMESTAMP(&o)) {
					rc = wire_fail(c, 14, "TypeMismatch",
						       "startAtOperationTime must be a Timestamp");
					break;
				}
				bson_iter_timestamp(&o, &t, &i);
				dfs_buf_printf(&opts, "&startAtOperationTime=%u.%u", t, i);
			} else if (!strcmp(k, "fullDocument")) {
				if (!BSON_ITER_HOLDS_UTF8(&o)) {
					rc = wire_fail(c, 14, "TypeMismatch",
						       "fullDocument must be a string");
					break;
				}
				dfs_buf_puts(&opts, "&fullDocument=");
				opt_escape(&opts, bson_iter_utf8(&o, NULL),
					   strlen(bson_iter_utf8(&o, NULL)));
			} else if (!strcmp(k, "allChangesForCluster")) {
				cluster = bson_iter_as_bool(&o);
			} else if (!strcmp(k, "fullDocumentBeforeChange")) {
				if (!BSON_ITER_HOLDS_UTF8(&o) ||
				    strcmp(bson_iter_utf8(&o, NULL), "off"))
					rc = wire_fail(c, 238, "NotImplemented",
						       "fullDocumentBeforeChange needs pre-images, "
						       "which docfs does not record");
			} else if (strcmp(k, "showExpandedEvents")) {
				rc = wire_fail(c, 40415, "Location40415",
					       "BSON field '$changeStream.%s' is an unknown field",
					       k);
			}
		}
	/* the stages after it: the mount's streams take $match stages (fs/paths/changes.c) */
	dfs_buf_putc(&rest, '[');
	while (!rc && bson_iter_next(&st)) {
		if (nrest++)
			dfs_buf_putc(&rest, ',');
		if (store_codec_render_value(bson_iter_value(&st), &rest, &err))
			rc = wire_fail_dfs(c, &err);
	}
	dfs_buf_putc(&rest, ']');
	if (!rc && nrest) {
		dfs_buf_puts(&opts, "&pipeline=");
		opt_escape(&opts, rest.data, rest.len);
	}
	if (rc)
		goto done;
	if (bson_iter_init(&it, c->cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it)) {
		char name[DFS_MAX_NS_NAME + 1];

		if ((rc = wire_arg_coll(c, name, sizeof(name))))
			goto done;
		coll = bson_iter_utf8(&it, NULL);
		snprintf(ns, sizeof(ns), "%s.%s", c->db, coll);
	} else {
		snprintf(ns, sizeof(ns), "%s.$cmd.aggregate", c->db);
	}
	if (cluster && strcmp(c->db, "admin")) {
		rc = wire_fail(c, 73, "InvalidNamespace",
			       "$changeStream may not be opened on the internal %s database with "
			       "allChangesForCluster: use admin",
			       c->db);
		goto done;
	}
	/* watching a database that does not exist yet makes it (its events are recorded) */
	if (!cluster && (rc = wire_db(c, true, &db)))
		goto done;
	if (fs_changes_open(c->store, cluster ? NULL : db, coll, opts.data, &ch, &err)) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	{
		struct wire_stream *sw = wire_stream_new(changes_next, NULL, changes_free, ch);

		sw->token = changes_token;
		rc = wire_cursor_stream_reply(c, ns, sw, true, batch, wire_lsid(c, &lsid), reply);
	}
done:
	dfs_buf_release(&opts);
	dfs_buf_release(&rest);
	return rc;
}

/* An aggregate: 1 whose first stage is $currentOp (mongosh's db.currentOp()): the running
 * operations of /.docfs/currentOp (curop.c), then $match stages over them. -1 when the
 * pipeline does not start with $currentOp, else 0 or a wire_fail code. */
static int current_op_stage(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct query_expr *e = NULL;
	struct wire_docs docs = {0};
	struct wire_source src = {wire_docs_next, &docs};
	bson_iter_t it, st, ops;
	bson_t all = BSON_INITIALIZER, ands = BSON_INITIALIZER, filter = BSON_INITIALIZER;
	char ns[DFS_MAX_NS_NAME + 32];
	int nands = 0, rc = 0;

	if (!bson_iter_init_find(&it, c->cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &st) || !bson_iter_next(&st) ||
	    !BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &ops) ||
	    !bson_iter_next(&ops) || strcmp(bson_iter_key(&ops), "$currentOp"))
		return -1;
	if (strcmp(c->db, "admin"))
		return wire_fail(c, 73, "InvalidNamespace",
				 "$currentOp must be run against the 'admin' database with "
				 "{aggregate: 1}");
	while (bson_iter_next(&st)) {
		bson_iter_t m;
		char key[16];

		if (!BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &m) ||
		    !bson_iter_next(&m) || strcmp(bson_iter_key(&m), "$match") ||
		    !BSON_ITER_HOLDS_DOCUMENT(&m)) {
			rc = wire_fail(c, 238, "NotImplemented",
				       "after $currentOp docfs takes $match stages only");
			goto done;
		}
		snprintf(key, sizeof(key), "%d", nands++);
		bson_append_iter(&ands, key, -1, &m);
	}
	BSON_APPEND_ARRAY(&filter, "$and", &ands);
	if (nands && query_filter_parse(&filter, &e, &err)) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	fs_curop_current_doc(&all);
	if (bson_iter_init_find(&it, &all, "inprog") && bson_iter_recurse(&it, &ops))
		while (bson_iter_next(&ops)) {
			const uint8_t *data;
			uint32_t len;
			bson_t one;

			if (!BSON_ITER_HOLDS_DOCUMENT(&ops))
				continue;
			bson_iter_document(&ops, &len, &data);
			if (!bson_init_static(&one, data, len) ||
			    (e && !query_filter_match(e, &one, NULL)))
				continue;
			wire_docs_take(&docs, bson_copy(&one));
		}
	snprintf(ns, sizeof(ns), "%s.$cmd.aggregate", c->db);
	if (wire_cursor_reply(c, ns, &src, -1, false, NULL, reply, &err))
		rc = wire_fail_dfs(c, &err);
done:
	query_expr_free(e);
	wire_docs_release(&docs);
	bson_destroy(&all);
	bson_destroy(&ands);
	bson_destroy(&filter);
	return rc;
}

/* ---- aggregate ------------------------------------------------------------------------ */

struct agg_src {
	struct query_agg *agg;
};

static int agg_next(void *ctx, const bson_t **doc, struct dfs_err *err)
{
	return query_agg_next(((struct agg_src *)ctx)->agg, doc, err);
}

/* Whether the pipeline's first stage is $documents or $listLocalSessions (a source of
 * documents that is not a collection). */
static bool starts_with_documents(const bson_t *cmd)
{
	bson_iter_t it, st, d;

	return bson_iter_init_find(&it, cmd, "pipeline") && BSON_ITER_HOLDS_ARRAY(&it) &&
	       bson_iter_recurse(&it, &st) && bson_iter_next(&st) &&
	       BSON_ITER_HOLDS_DOCUMENT(&st) && bson_iter_recurse(&st, &d) && bson_iter_next(&d) &&
	       (!strcmp(bson_iter_key(&d), "$documents") ||
		!strcmp(bson_iter_key(&d), "$listLocalSessions"));
}

/* An aggregate: 1 whose first stage is $documents (an array of documents, written out: not
 * an expression) or $listLocalSessions (session.c's documents), the rest of the pipeline run
 * by the engine over them
 * (query_agg_open_docs; $lookup reads the database's collections in a read transaction).
 * -1 when the pipeline does not start with $documents, else 0 or a wire_fail code. */
static int documents_stage(struct wire_ctx *c, struct query_let *let, int64_t batch, bson_t *reply)
{
	struct dfs_err err = {0};
	struct query_agg_opts ao = {.mem = fs_sort_mem, .now_ms = wire_now_ms(), .let = let};
	struct query_pipeline *p = NULL;
	struct agg_src as = {0};
	struct wire_source src = {agg_next, &as};
	struct store_db *db = NULL;
	struct store_txn *t = NULL;
	bson_iter_t it, st, d;
	bson_t rest = BSON_INITIALIZER, sess = BSON_INITIALIZER, docs, lsid;
	const uint8_t *data;
	uint32_t len;
	char ns[DFS_MAX_NS_NAME + 32], key[16];
	int n = 0, rc = 0;

	if (!bson_iter_init(&it, c->cmd) || !bson_iter_next(&it) || BSON_ITER_HOLDS_UTF8(&it) ||
	    !starts_with_documents(c->cmd))
		return -1;
	bson_iter_init_find(&it, c->cmd, "pipeline");
	bson_iter_recurse(&it, &st);
	bson_iter_next(&st);
	bson_iter_recurse(&st, &d);
	bson_iter_next(&d);
	if (!strcmp(bson_iter_key(&d), "$listLocalSessions")) {
		if ((rc = wire_session_list(c, bson_iter_value(&d), &sess)))
			goto done;
		bson_init_static(&docs, bson_get_data(&sess), sess.len);
	} else if (!BSON_ITER_HOLDS_ARRAY(&d)) {
		rc = wire_fail(c, 238, "NotImplemented",
			       "$documents takes an array of documents in docfs (not an "
			       "expression)");
		goto done;
	} else {
		bson_iter_array(&d, &len, &data);
		if (!bson_init_static(&docs, data, len)) {
			rc = wire_fail(c, 2, "BadValue", "$documents: not a valid array");
			goto done;
		}
	}
	while (bson_iter_next(&st)) {
		snprintf(key, sizeof(key), "%d", n++);
		bson_append_iter(&rest, key, -1, &st);
	}
	if (query_pipeline_parse_let(&rest, let, &p, &err)) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	snprintf(ns, sizeof(ns), "%s.$cmd.aggregate", c->db);
	if (query_pipeline_writes(p)) { /* $out / $merge: one write transaction */
		int64_t nw = 0;

		if ((rc = wire_db(c, true, &db)))
			goto done;
		if (store_txn_begin(db, true, &t, &err) ||
		    query_agg_run_out_docs(t, &docs, p, &ao, &nw, &err) ||
		    store_txn_commit(t, &err)) {
			bson_t *info = c->err_info ? c->err_info : (c->err_info = bson_new());

			store_txn_abort(t);
			t = NULL;
			wire_dup_key_info(c, query_pipeline_target(p), &err, info);
			rc = wire_fail_dfs(c, &err);
			goto done;
		}
		t = NULL;
		wire_empty_cursor(reply, ns, "firstBatch");
		goto done;
	}
	if ((rc = wire_db(c, false, &db)) == DFS_ENOENT)
		rc = 0; /* no collections to $lookup: t stays NULL */
	else if (rc)
		goto done;
	else if (store_txn_begin(db, false, &t, &err)) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	if (query_agg_open_docs(t, &docs, p, &ao, &as.agg, &err)) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	if (wire_cursor_reply(c, ns, &src, batch, false, wire_lsid(c, &lsid), reply, &err))
		rc = wire_fail_dfs(c, &err);
done:
	query_agg_free(as.agg);
	store_txn_abort(t);
	query_pipeline_free(p);
	bson_destroy(&rest);
	bson_destroy(&sess);
	return rc;
}

/* The pipeline of an aggregate, parsed with the command's variables let (may be NULL): 0 or
 * a wire_fail code. */
static int agg_pipeline(struct wire_ctx *c, const struct query_let *let, struct query_pipeline **p)
{
	struct dfs_err err = {0};
	bson_t arr;

	if (!wire_sub_view(c->cmd, "pipeline", true, &arr))
		return wire_fail(c, 14, "TypeMismatch",
				 "'pipeline' option must be specified as an array");
	if (query_pipeline_parse_let(&arr, let, p, &err))
		return wire_fail_dfs(c, &err);
	return 0;
}

static int agg_collection(struct wire_ctx *c, char *name, size_t cap)
{
	bson_iter_t it;

	if (bson_iter_init(&it, c->cmd) && bson_iter_next(&it) && !BSON_ITER_HOLDS_UTF8(&it)) {
		if (starts_with_documents(c->cmd)) {
			snprintf(name, cap, "$cmd.aggregate"); /* documents_stage answers */
			return 0;
		}
		return wire_fail(c, 238, "NotImplemented",
				 "aggregate: 1 (a pipeline over a whole database) is not "
				 "supported by docfs yet but with $currentOp, $documents or "
				 "$listLocalSessions first");
	}
	return wire_arg_coll(c, name, cap);
}

static int verbosity_of(struct wire_ctx *c, const bson_t *cmd, int *out)
{
	bson_iter_t it;
	const char *v;

	*out = QUERY_VERB_ALL;
	if (!bson_iter_init_find(&it, cmd, "verbosity"))
		return 0;
	if (!BSON_ITER_HOLDS_UTF8(&it))
		return wire_fail(c, 2, "BadValue", "verbosity must be a string");
	v = bson_iter_utf8(&it, NULL);
	if (!strcmp(v, "queryPlanner"))
		*out = QUERY_VERB_PLANNER;
	else if (!strcmp(v, "executionStats"))
		*out = QUERY_VERB_EXEC;
	else if (!strcmp(v, "allPlansExecution"))
		*out = QUERY_VERB_ALL;
	else
		return wire_fail(c, 2, "BadValue",
				 "verbosity string must be one of "
				 "{'queryPlanner', 'executionStats', "
				 "'allPlansExecution'}");
	return 0;
}

/* The stages after a $collStats (st on the first of them) run by the engine over its one
 * document doc: a collection made for it in a write transaction of db that is rolled
 * back (no pipeline reads other than a collection's), the document's added _id unset
 * first so the stages see it as it is. Results into reply's cursor. */
static int after_coll_stats(struct wire_ctx *c, struct store_db *db, bson_iter_t *st,
			    const bson_t *doc, const char *ns, bson_t *reply)
{
	struct dfs_err err = {0};
	struct query_agg_opts ao = {.mem = fs_sort_mem, .now_ms = wire_now_ms()};
	struct store_attrs a = {0644, getuid(), getgid(), 0};
	struct query_pipeline *p = NULL;
	struct agg_src as = {0};
	struct wire_source src = {agg_next, &as};
	struct store_txn *t = NULL;
	struct store_coll co;
	bson_t pipe = BSON_INITIALIZER, prepared, unset;
	char key[16], tmp[64];
	int n = 0, rc = 0;

	bson_init(&unset);
	BSON_APPEND_UTF8(&unset, "$unset", "_id");
	BSON_APPEND_DOCUMENT(&pipe, "0", &unset);
	bson_destroy(&unset);
	do {
		snprintf(key, sizeof(key), "%d", ++n);
		bson_append_iter(&pipe, key, -1, st);
	} while (bson_iter_next(st));
	if (query_pipeline_parse(&pipe, &p, &err)) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	if (query_pipeline_writes(p)) {
		rc = wire_fail(c, 238, "NotImplemented",
			       "$collStats followed by $out or $merge is not supported by docfs");
		goto done;
	}
	snprintf(tmp, sizeof(tmp), "docfs_collstats_%lld", (long long)wire_now_ms());
	if (store_txn_begin(db, true, &t, &err) ||
	    store_coll_create(t, tmp, 0755, getuid(), getgid(), &co, &err) ||
	    store_doc_prepare(doc, NULL, &prepared, &err)) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	rc = store_doc_insert(t, co.id, &prepared, &a, NULL, &err);
	bson_destroy(&prepared);
	if (rc || query_agg_open(t, co.id, p, &ao, &as.agg, &err) ||
	    wire_cursor_reply(c, ns, &src, -1, false, NULL, reply, &err))
		rc = wire_fail_dfs(c, &err);
done:
	query_agg_free(as.agg);
	store_txn_abort(t); /* the collection made for it goes with the transaction */
	query_pipeline_free(p);
	bson_destroy(&pipe);
	return rc;
}

/* A pipeline that starts with $collStats ({storageStats: {scale}, count: {}}), which the
 * engine has no stage for: its one document, with the figures of fs_stats_doc (the .stats
 * file's), then the stages after it (after_coll_stats). -1 when the pipeline does not
 * start with $collStats, else 0 or a wire_fail. */
static int coll_stats_stage(struct wire_ctx *c, const char *name, const char *ns, bson_t *reply)
{
	struct dfs_err err = {0};
	bson_iter_t it, st, opt;
	bson_t arr, one = BSON_INITIALIZER, spec, stats = BSON_INITIALIZER, batch;
	struct wire_coll x;
	int64_t scale = 1, count = 0, bytes = 0;
	bool storage = false, want_count = false;
	int rc;

	if (!bson_iter_init_find(&it, c->cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &st) || !bson_iter_next(&st) ||
	    !BSON_ITER_HOLDS_DOCUMENT(&st) || !wire_sub_view(c->cmd, "pipeline", true, &arr))
		return -1;
	{
		bson_t stage;
		const uint8_t *data;
		uint32_t len;

		bson_iter_document(&st, &len, &data);
		if (!bson_init_static(&stage, data, len) ||
		    !bson_iter_init_find(&opt, &stage, "$collStats"))
			return -1;
		if (!BSON_ITER_HOLDS_DOCUMENT(&opt) ||
		    !wire_sub_view(&stage, "$collStats", false, &spec))
			return wire_fail(c, 9, "FailedToParse", "$collStats must take an object");
	}
	if (bson_iter_init(&opt, &spec))
		while (bson_iter_next(&opt)) {
			const char *k = bson_iter_key(&opt);
			bson_t sub;

			if (!strcmp(k, "storageStats")) {
				storage = true;
				if (wire_sub_view(&spec, "storageStats", false, &sub) &&
				    bson_iter_init_find(&it, &sub, "scale") &&
				    BSON_ITER_HOLDS_NUMBER(&it))
					scale = bson_iter_as_int64(&it);
			} else if (!strcmp(k, "count")) {
				want_count = true;
			} else {
				return wire_fail(c, 238, "NotImplemented",
						 "$collStats: '%s' is not supported by docfs yet",
						 k);
			}
		}
	if (scale < 1)
		return wire_fail(c, 2, "BadValue", "scale has to be > 0");
	rc = wire_coll_open(c, name, WIRE_COLL_READ, &x);
	if (rc == DFS_ENOENT)
		return wire_fail(c, 26, "NamespaceNotFound",
				 "Unable to retrieve storageStats in $collStats stage :: caused by "
				 ":: Collection [%s] not found.",
				 ns);
	if (rc)
		return rc;
	rc = store_coll_data_size(x.t, x.co.id, &count, &bytes, &err);
	wire_coll_close(c, &x, false);
	if (rc || (storage && fs_stats_doc(x.db, x.co.id, scale, &stats, &err))) {
		bson_destroy(&stats);
		bson_destroy(&one);
		return wire_fail_dfs(c, &err);
	}
	BSON_APPEND_UTF8(&one, "ns", ns);
	BSON_APPEND_DATE_TIME(&one, "localTime", wire_now_ms());
	if (storage) {
		bson_t ss;

		BSON_APPEND_DOCUMENT_BEGIN(&one, "storageStats", &ss);
		if (bson_iter_init(&it, &stats))
			while (bson_iter_next(&it))
				if (strcmp(bson_iter_key(&it), "ok") &&
				    strcmp(bson_iter_key(&it), "ns"))
					bson_append_iter(&ss, NULL, 0, &it);
		bson_append_document_end(&one, &ss);
	}
	if (want_count) {
		bson_t cnt;

		BSON_APPEND_DOCUMENT_BEGIN(&one, "count", &cnt);
		wire_append_count(&cnt, "count", count);
		bson_append_document_end(&one, &cnt);
	}
	if (bson_iter_next(&st)) {
		/* stages after it (mongosh's db.c.totalSize(): a $group) */
		rc = after_coll_stats(c, x.db, &st, &one, ns, reply);
		bson_destroy(&one);
		bson_destroy(&stats);
		return rc;
	}
	bson_init(&batch);
	BSON_APPEND_DOCUMENT(&batch, "0", &one);
	{
		bson_t cur;

		BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cur);
		BSON_APPEND_ARRAY(&cur, "firstBatch", &batch);
		BSON_APPEND_INT64(&cur, "id", 0);
		BSON_APPEND_UTF8(&cur, "ns", ns);
		bson_append_document_end(reply, &cur);
	}
	bson_destroy(&batch);
	bson_destroy(&one);
	bson_destroy(&stats);
	return 0;
}

/* Options of aggregate that docfs does not have yet: refused rather than ignored (a
 * collation or a let ignored gives other documents, or a misleading error). */
static const char *const agg_refused[] = {NULL};

int wire_cmd_aggregate(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct query_agg_opts ao = {.mem = fs_sort_mem, .now_ms = wire_now_ms()};
	struct query_pipeline *p = NULL;
	struct query_let *let = NULL;
	struct agg_src as = {0};
	struct wire_source src = {agg_next, &as};
	char name[DFS_MAX_NS_NAME + 1], ns[2 * DFS_MAX_NS_NAME + 2];
	struct wire_coll x = {0};
	bson_t cur, lsid;
	bool explain = false;
	int64_t batch = -1;
	int rc;

	wire_arg_bool(c, "explain", &explain);
	if ((rc = wire_refuse_opts(c, c->cmd, "aggregate", agg_refused)))
		return rc;
	if (!explain && (rc = change_stream(c, reply)) != -1)
		return rc;
	if (!explain && (rc = current_op_stage(c, reply)) != -1)
		return rc;
	if ((rc = agg_collection(c, name, sizeof(name))))
		return rc;
	if ((rc = wire_arg_doc(c, "cursor", &cur)) > 1)
		return rc;
	if (rc == 1 && !explain)
		return wire_fail(c, 9, "FailedToParse",
				 "The 'cursor' option is required, except for aggregate with the "
				 "explain argument");
	if (rc == 0) {
		bson_iter_t it;

		if (bson_iter_init_find(&it, &cur, "batchSize")) {
			if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) < 0)
				return wire_fail(c, 2, "BadValue",
						 "cursor.batchSize must be a non-negative number");
			batch = bson_iter_as_int64(&it);
		}
	}
	wire_ns(ns, sizeof(ns), c->db, name);
	if (!explain && (rc = coll_stats_stage(c, name, ns, reply)) != -1)
		return rc;
	if ((rc = wire_arg_let(c, &let)))
		return rc;
	if (!explain && (rc = documents_stage(c, let, batch, reply)) != -1) {
		query_let_free(let);
		return rc;
	}
	ao.let = let;
	if ((rc = wire_arg_collation(c, c->cmd, &c->coll)))
		goto done;
	ao.collation = c->coll;
	if ((rc = agg_pipeline(c, let, &p)))
		goto done;
	if (explain) {
		rc = wire_coll_open(c, name, WIRE_COLL_GHOST, &x);
		if (rc == DFS_ENOENT)
			rc = wire_fail(c, 26, "NamespaceNotFound", "database %s does not exist",
				       c->db);
		if (rc)
			goto done;
		if (query_agg_explain(x.t, x.co.id, ns, p, &ao, QUERY_VERB_PLANNER, reply, &err))
			rc = wire_fail_dfs(c, &err);
		goto done;
	}
	if (query_pipeline_writes(p)) {
		/* $out / $merge: one write transaction; a missing source is made and dropped
		 * in it (note 2) */
		int64_t nw = 0;

		rc = wire_coll_open(c, name, WIRE_COLL_CREATE, &x);
		if (rc)
			goto done;
		if (query_agg_run_out(x.t, x.co.id, p, &ao, &nw, &err)) {
			if (!c->err_info)
				c->err_info = bson_new();
			wire_dup_key_info(c, query_pipeline_target(p), &err, c->err_info);
			rc = wire_fail_dfs(c, &err);
			goto done;
		}
		if (x.created) { /* the source made for the run goes again, unless $out wrote it */
			int64_t ndocs = 0, nfiles = 0;

			if (!store_coll_count(x.t, x.co.id, &ndocs, &nfiles, &err) && ndocs == 0 &&
			    store_coll_drop(x.t, x.co.id, &err)) {
				rc = wire_fail_dfs(c, &err);
				goto done;
			}
		}
		if ((rc = wire_coll_close(c, &x, true)))
			goto done;
		wire_empty_cursor(reply, ns, "firstBatch");
		goto done;
	}
	rc = wire_coll_open(c, name, WIRE_COLL_GHOST, &x);
	if (rc == DFS_ENOENT) {
		wire_empty_cursor(reply, ns, "firstBatch");
		rc = 0;
		goto done;
	}
	if (rc)
		goto done;
	if (query_agg_open(x.t, x.co.id, p, &ao, &as.agg, &err)) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	if (wire_cursor_reply(c, ns, &src, batch, false, wire_lsid(c, &lsid), reply, &err))
		rc = wire_fail_dfs(c, &err);
	{
		struct query_summary sum;

		query_agg_summary(as.agg, &sum);
		fs_curop_note(&sum, 0);
	}
done:
	query_agg_free(as.agg);
	wire_coll_close(c, &x, false);
	query_pipeline_free(p);
	query_let_free(let);
	return rc;
}

/* ---- explain ----------------------------------------------------------------------- */

/* Copies doc into out, the field key replaced by {stage, <extra fields>, inputStage: <the
 * field's value>} (a write's stage over the find that feeds it). */
static void wrap_stage(const bson_t *doc, const char *key, const char *stage, const bson_t *extra,
		       bson_t *out)
{
	bson_iter_t it;

	if (!bson_iter_init(&it, doc))
		return;
	while (bson_iter_next(&it)) {
		bson_t w;

		if (strcmp(bson_iter_key(&it), key)) {
			bson_append_iter(out, NULL, 0, &it);
			continue;
		}
		BSON_APPEND_DOCUMENT_BEGIN(out, key, &w);
		BSON_APPEND_UTF8(&w, "stage", stage);
		if (extra)
			bson_concat(&w, extra);
		bson_append_iter(&w, "inputStage", -1, &it);
		bson_append_document_end(out, &w);
	}
}

/* Explain of update (its first statement), delete (its first statement) or findAndModify
 * (c->cmd is the explained command): the plan is the engine's find of the documents the
 * write would change (query_find_explain), under an UPDATE or DELETE stage; with
 * executionStats the write also runs, in a transaction that is rolled back, for its
 * counters (nMatched, nWouldModify, nWouldUpsert, nWouldDelete). Nothing is written. */
static int explain_write(struct wire_ctx *c, int verbosity, bson_t *reply)
{
	struct dfs_err err = {0};
	struct query_write_opts o = {.now_ms = wire_now_ms()};
	struct query_write_result r = {0};
	struct query_find_opts fo = {.sort_mem = fs_sort_mem};
	struct wire_coll x = {0};
	char name[DFS_MAX_NS_NAME + 1], ns[2 * DFS_MAX_NS_NAME + 2];
	bool fam = !strcasecmp(c->name, "findAndModify"), del = !strcmp(c->name, "delete");
	bson_t st, q, u, sort, af, arr, fexp = BSON_INITIALIZER, counters = BSON_INITIALIZER;
	bson_t qp = BSON_INITIALIZER, es = BSON_INITIALIZER;
	const bson_t *sp; /* the statement */
	bson_iter_t it;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))))
		return rc;
	if (fam) {
		sp = c->cmd; /* findAndModify's statement is the command itself */
	} else if (!wire_sub_view(c->cmd, del ? "deletes" : "updates", true, &arr) ||
		   !bson_iter_init(&it, &arr) || !bson_iter_next(&it) ||
		   !BSON_ITER_HOLDS_DOCUMENT(&it) ||
		   !wire_sub_view(&arr, bson_iter_key(&it), false, &st)) {
		return wire_fail(c, 9, "FailedToParse", "explain of %s needs one statement in '%s'",
				 c->name, del ? "deletes" : "updates");
	} else {
		sp = &st;
	}
	o.filter = wire_sub_view(sp, fam ? "query" : "q", false, &q) ? &q : NULL;
	o.sort = fam && wire_sub_view(sp, "sort", false, &sort) ? &sort : NULL;
	o.array_filters = wire_sub_view(sp, "arrayFilters", true, &af) ? &af : NULL;
	if (fam) {
		o.remove = bson_iter_init_find(&it, sp, "remove") && bson_iter_as_bool(&it);
		o.return_new = bson_iter_init_find(&it, sp, "new") && bson_iter_as_bool(&it);
		del = o.remove;
	} else if (!del) {
		o.multi = bson_iter_init_find(&it, sp, "multi") && bson_iter_as_bool(&it);
	} else {
		o.multi = !(bson_iter_init_find(&it, sp, "limit") && bson_iter_as_int64(&it) == 1);
		o.remove = true;
	}
	o.upsert = !del && bson_iter_init_find(&it, sp, "upsert") && bson_iter_as_bool(&it);
	if (!del) {
		o.pipeline = bson_iter_init_find(&it, sp, fam ? "update" : "u") &&
			     BSON_ITER_HOLDS_ARRAY(&it);
		if (!wire_sub_view(sp, fam ? "update" : "u", o.pipeline, &u))
			return wire_fail(c, 9, "FailedToParse",
					 "explain of %s needs an update document", c->name);
		o.update = &u;
	}
	/* the find that feeds the write */
	fo.filter = o.filter;
	fo.sort = o.sort;
	fo.limit = o.multi ? 0 : 1;
	wire_ns(ns, sizeof(ns), c->db, name);
	if ((rc = wire_coll_open(c, name, WIRE_COLL_GHOST, &x)) == DFS_ENOENT)
		rc = wire_fail(c, 26, "NamespaceNotFound", "database %s does not exist", c->db);
	if (rc)
		goto done;
	if (query_find_explain(x.t, x.co.id, ns, &fo, verbosity, &fexp, &err)) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	if (verbosity >= QUERY_VERB_EXEC) {
		/* the write itself, rolled back: its counters */
		if (!x.ghost) {
			wire_coll_close(c, &x, false);
			if ((rc = wire_coll_open(c, name, WIRE_COLL_WRITE, &x)))
				goto done;
		}
		rc = fam   ? query_find_modify(x.t, x.co.id, &o, &r, &err)
		     : del ? query_delete_run(x.t, x.co.id, &o, &r, &err)
			   : query_update_run(x.t, x.co.id, &o, &r, &err);
		if (rc) {
			rc = wire_fail_dfs(c, &err);
			goto done;
		}
		BSON_APPEND_INT32(&counters, "nReturned", 0);
		if (del) {
			wire_append_count(&counters, "nWouldDelete", r.deleted);
		} else {
			wire_append_count(&counters, "nMatched", r.matched);
			wire_append_count(&counters, "nWouldModify", r.modified);
			wire_append_count(&counters, "nWouldUpsert", r.upserted);
		}
	}
	/* the find's explain, its plans under the write's stage */
	if (bson_iter_init(&it, &fexp))
		while (bson_iter_next(&it)) {
			const char *k = bson_iter_key(&it);
			const uint8_t *data;
			uint32_t len;
			bson_t sub;

			if (!strcmp(k, "command")) {
				BSON_APPEND_DOCUMENT(reply, "command", c->cmd);
				continue;
			}
			if ((strcmp(k, "queryPlanner") && strcmp(k, "executionStats")) ||
			    !BSON_ITER_HOLDS_DOCUMENT(&it)) {
				bson_append_iter(reply, NULL, 0, &it);
				continue;
			}
			bson_iter_document(&it, &len, &data);
			if (!bson_init_static(&sub, data, len))
				continue;
			if (!strcmp(k, "queryPlanner")) {
				wrap_stage(&sub, "winningPlan", del ? "DELETE" : "UPDATE", NULL,
					   &qp);
				BSON_APPEND_DOCUMENT(reply, k, &qp);
			} else {
				wrap_stage(&sub, "executionStages", del ? "DELETE" : "UPDATE",
					   &counters, &es);
				BSON_APPEND_DOCUMENT(reply, k, &es);
			}
		}
done:
	query_write_result_release(&r);
	wire_coll_close(c, &x, false);
	bson_destroy(&fexp);
	bson_destroy(&counters);
	bson_destroy(&qp);
	bson_destroy(&es);
	return rc;
}

int wire_cmd_explain(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	const bson_t *outer = c->cmd;
	const char *outer_name = c->name;
	char name[DFS_MAX_NS_NAME + 1], ns[2 * DFS_MAX_NS_NAME + 2];
	struct wire_coll x = {0};
	struct query_pipeline *p = NULL;
	struct wire_find_args a;
	bson_t inner;
	bson_iter_t it;
	int verbosity, rc;

	if ((rc = verbosity_of(c, outer, &verbosity)))
		return rc;
	if ((rc = wire_arg_doc(c, "explain", &inner)))
		return rc == 1 ? wire_fail(c, 9, "FailedToParse", "explain needs a command") : rc;
	if (!bson_iter_init(&it, &inner) || !bson_iter_next(&it))
		return wire_fail(c, 9, "FailedToParse", "explain needs a command");
	c->cmd = &inner;
	c->name = bson_iter_key(&it);
	if (!strcmp(c->name, "update") || !strcmp(c->name, "delete") ||
	    !strcasecmp(c->name, "findAndModify")) {
		rc = explain_write(c, verbosity, reply);
		goto done;
	}
	if (strcmp(c->name, "find") && strcmp(c->name, "count") && strcmp(c->name, "distinct") &&
	    strcmp(c->name, "aggregate")) {
		rc = wire_fail(c, 238, "NotImplemented",
			       "explain of '%s' is not supported by docfs yet (find, aggregate, "
			       "count, distinct, update, delete and findAndModify are)",
			       c->name);
		goto done;
	}
	if (!strcmp(c->name, "aggregate")) {
		struct query_agg_opts ao = {.mem = fs_sort_mem, .now_ms = wire_now_ms()};
		struct query_let *let = NULL;

		if ((rc = agg_collection(c, name, sizeof(name))) || (rc = wire_arg_let(c, &let)) ||
		    (rc = agg_pipeline(c, let, &p)))
			goto agg_done;
		ao.let = let;
		query_collation_free(c->coll);
		if ((rc = wire_arg_collation(c, c->cmd, &c->coll)))
			goto agg_done;
		ao.collation = c->coll;
		wire_ns(ns, sizeof(ns), c->db, name);
		if ((rc = wire_coll_open(c, name, WIRE_COLL_GHOST, &x)) == DFS_ENOENT)
			rc = wire_fail(c, 26, "NamespaceNotFound", "database %s does not exist",
				       c->db);
		if (!rc && query_agg_explain(x.t, x.co.id, ns, p, &ao, verbosity, reply, &err))
			rc = wire_fail_dfs(c, &err);
	agg_done:
		query_let_free(let);
		goto done;
	}
	if ((rc = wire_arg_coll(c, name, sizeof(name))) ||
	    (rc = wire_find_args(c, &a, strcmp(c->name, "find") != 0)))
		goto done;
	a.o.count_only = !strcmp(c->name, "count");
	wire_ns(ns, sizeof(ns), c->db, name);
	if ((rc = wire_coll_open(c, name, WIRE_COLL_GHOST, &x)) == DFS_ENOENT)
		rc = wire_fail(c, 26, "NamespaceNotFound", "database %s does not exist", c->db);
	if (rc)
		goto done;
	if (query_find_explain(x.t, x.co.id, ns, &a.o, verbosity, reply, &err))
		rc = wire_fail_dfs(c, &err);
done:
	c->cmd = outer;
	c->name = outer_name;
	query_pipeline_free(p);
	wire_coll_close(c, &x, false);
	return rc;
}
