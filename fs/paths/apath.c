/*
 * apath.c - "aggregate/<pipeline>" paths and saved pipelines: parses the path component
 * (a pipeline array in the shell-literal syntax, or "@name" for a pipeline saved in
 * .queries/, then options), runs it through the aggregation engine (query/agg.c) into a
 * result file, and checks pipelines saved in .queries/. It does not evaluate stages itself
 * and does not talk to FUSE.
 *
 * Design notes
 * 1. The same result files as query/: produced at open, a stable snapshot for that open
 *    file, in memory up to result_mem and then in an unlinked temporary file.
 * 2. A pipeline ending in $out or $merge writes: it runs in one write transaction (the
 *    target collection changes all at once or not at all) and its result file is empty, as
 *    MongoDB's cursor for such a pipeline is.
 * 3. Options: format=jsonl (default) | json | pretty, as for query/.
 * 4. explain/<pipeline> (a component whose filter part starts with '[', or "@name" of a saved
 *    pipeline) explains a pipeline (query_agg_explain) instead of a find; its options are
 *    explain's: verbosity=queryPlanner|executionStats|allPlansExecution and
 *    format=pretty|json|tree. Every other explain/ component goes to qpath.c as before.
 */
#include "fs_int.h"
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SAVED_DIR ".queries/" /* store names of saved queries and pipelines */

/* Copies the array value of it into out (initialised, empty). */
static void array_of(bson_iter_t *it, bson_t *out)
{
	const uint8_t *data;
	uint32_t len;
	bson_t view;

	bson_iter_array(it, &len, &data);
	if (bson_init_static(&view, data, len))
		bson_concat(out, &view);
}

int fs_pipeline_from_text(const char *text, size_t len, bson_t *out, struct dfs_err *err)
{
	bson_t tmp = BSON_INITIALIZER;
	bson_iter_t it;
	size_t i = 0;
	int rc;

	while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'))
		i++;
	if (i < len && text[i] == '{') {
		/* A saved command: {"pipeline": [...]} (also "aggregate" as the key). */
		rc = store_codec_parse_doc(text, len, &tmp, err);
		if (rc == DFS_EINCOMPLETE)
			rc = DFS_EINVAL;
		if (!rc && !(bson_iter_init_find(&it, &tmp, "pipeline") ||
			     bson_iter_init_find(&it, &tmp, "aggregate")))
			rc = dfs_err_set(err, DFS_ENOENT, "not a pipeline");
	} else {
		rc = store_codec_parse_value(text, len, &tmp, "p", err);
		if (rc == DFS_EINCOMPLETE)
			rc = DFS_EINVAL;
		if (!rc)
			bson_iter_init_find(&it, &tmp, "p");
	}
	if (!rc && !BSON_ITER_HOLDS_ARRAY(&it))
		rc = dfs_err_set(err, DFS_EINVAL,
				 "a pipeline is an array of stages ([{$match: ...}, ...])");
	if (!rc)
		array_of(&it, out);
	bson_destroy(&tmp);
	return rc;
}

int fs_pipeline_check(const char *text, size_t len, struct dfs_err *err)
{
	bson_t p = BSON_INITIALIZER;
	struct query_pipeline *qp = NULL;
	int rc = fs_pipeline_from_text(text, len, &p, err);

	if (!rc)
		rc = query_pipeline_parse(&p, &qp, err);
	query_pipeline_free(qp);
	bson_destroy(&p);
	return rc;
}

/* Loads the pipeline saved as .queries/<name> of coll into out. *not_pipeline (may be NULL) is
 * set when there is no such saved text or it is a find command (both DFS_EINVAL as well). */
static int saved_pipeline(struct store_db *db, int64_t coll, const char *name, bson_t *out,
			  bool *not_pipeline, struct dfs_err *err)
{
	struct store_entry e;
	struct store_txn *t;
	struct dfs_buf text;
	char full[300];
	int rc;

	snprintf(full, sizeof(full), SAVED_DIR "%s", name);
	dfs_buf_init(&text);
	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	rc = store_entry_lookup(t, coll, full, &e, NULL);
	if (rc == DFS_ENOENT && not_pipeline)
		*not_pipeline = true;
	if (rc == DFS_ENOENT)
		rc = dfs_err_set(err, DFS_EINVAL,
				 "no saved pipeline '%s' (write it to .queries/%s)", name, name);
	else if (!rc)
		rc = store_entry_read(t, e.id, &text, err);
	store_txn_abort(t);
	if (!rc) {
		struct dfs_err perr = {0};

		rc = fs_pipeline_from_text(text.data ? text.data : "", text.len, out, &perr);
		if (rc == DFS_ENOENT && not_pipeline)
			*not_pipeline = true;
		if (rc == DFS_ENOENT)
			rc = dfs_err_set(err, DFS_EINVAL,
					 "'.queries/%s' is a find; read it as query/@%s", name,
					 name);
		else if (rc)
			rc = dfs_err_set(err, rc, ".queries/%s: %s", name, perr.msg);
	}
	dfs_buf_release(&text);
	return rc;
}

struct apath {
	bson_t pipeline;
	int format;	     /* enum fs_query_format */
	int64_t max_time_ms; /* maxTimeMS=, 0: none */
};

/* maxTimeMS=N: a whole number of milliseconds >= 0. */
static int max_time_opt(const char *p, size_t n, int64_t *out, struct dfs_err *err)
{
	int64_t v = 0;

	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9' || v > INT64_MAX / 10 - 10)
			return dfs_err_set(err, DFS_EINVAL,
					   "maxTimeMS must be a whole number of milliseconds, not "
					   "'%.*s'",
					   (int)n, p);
		v = v * 10 + (p[i] - '0');
	}
	*out = v;
	return 0;
}

/* A number as the shell shows it: int32 when it fits. */
static void append_count(bson_t *b, const char *key, int64_t v)
{
	if (v <= INT32_MAX)
		BSON_APPEND_INT32(b, key, (int32_t)v);
	else
		BSON_APPEND_INT64(b, key, v);
}

/* The thread's operation (curop.c) is this aggregate command. */
static void describe_op(struct store_txn *t, int64_t coll, const struct apath *a)
{
	struct dfs_err err = {0};
	struct store_coll c;
	bson_t cmd;

	if (!fs_curop_current())
		return;
	if (store_coll_by_id(t, coll, &c, &err))
		c.name[0] = '\0';
	bson_init(&cmd);
	BSON_APPEND_UTF8(&cmd, "aggregate", c.name);
	BSON_APPEND_ARRAY(&cmd, "pipeline", &a->pipeline);
	if (a->max_time_ms)
		append_count(&cmd, "maxTimeMS", a->max_time_ms);
	BSON_APPEND_UTF8(&cmd, "$db", store_db_name(store_txn_db(t)));
	fs_curop_describe(&cmd, a->max_time_ms);
	bson_destroy(&cmd);
}

static int apath_parse(struct store_db *db, int64_t coll, const char *component, struct apath *a,
		       struct dfs_err *err)
{
	const char *q = fs_path_split(component, "?");
	size_t plen = q ? (size_t)(q - component) : strlen(component);
	struct dfs_buf v;
	int rc;

	dfs_buf_init(&v);
	a->format = FSQ_JSONL;
	a->max_time_ms = 0;
	if ((rc = fs_path_unescape(component, plen, &v, err)))
		goto done;
	if (v.len && v.data[0] == '@') {
		rc = saved_pipeline(db, coll, v.data + 1, &a->pipeline, NULL, err);
	} else {
		struct dfs_err perr = {0};

		rc = fs_pipeline_from_text(v.data ? v.data : "", v.len, &a->pipeline, &perr);
		if (rc == DFS_ENOENT)
			rc = dfs_err_set(err, DFS_EINVAL, "a pipeline is an array of stages");
		else if (rc)
			rc = dfs_err_set(err, rc, "%s", perr.msg);
	}
	for (const char *p = q ? q + 1 : NULL; !rc && p && *p;) {
		const char *amp = fs_path_split(p, "&");
		size_t n = amp ? (size_t)(amp - p) : strlen(p);

		if (n == 12 && strncmp(p, "format=jsonl", 12) == 0)
			a->format = FSQ_JSONL;
		else if (n == 11 && strncmp(p, "format=json", 11) == 0)
			a->format = FSQ_JSON;
		else if (n == 13 && strncmp(p, "format=pretty", 13) == 0)
			a->format = FSQ_PRETTY;
		else if (n > 10 && strncmp(p, "maxTimeMS=", 10) == 0)
			rc = max_time_opt(p + 10, n - 10, &a->max_time_ms, err);
		else
			rc = dfs_err_set(err, DFS_EINVAL,
					 "unknown option '%.*s' (format=jsonl|json|pretty, "
					 "maxTimeMS=N)",
					 (int)n, p);
		p = amp ? amp + 1 : NULL;
	}
done:
	dfs_buf_release(&v);
	return rc;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int fs_agg_run(struct store_db *db, int64_t coll, const char *component, struct fs_result *r,
	       struct dfs_err *err)
{
	struct query_agg_opts o = {.mem = fs_sort_mem, .now_ms = wall_ms()};
	struct query_pipeline *qp = NULL;
	struct query_agg *ag = NULL;
	struct fs_render *rd = NULL;
	struct store_txn *t = NULL;
	struct apath a;
	const bson_t *doc;
	int64_t nret = 0;
	int rc;

	bson_init(&a.pipeline);
	if ((rc = apath_parse(db, coll, component, &a, err)))
		goto done;
	if ((rc = query_pipeline_parse(&a.pipeline, &qp, err)))
		goto done;
	if (query_pipeline_writes(qp)) {
		int64_t written = 0;

		if ((rc = store_txn_begin(db, true, &t, err)))
			goto done;
		describe_op(t, coll, &a);
		rc = query_agg_run_out(t, coll, qp, &o, &written, err);
		if (!rc)
			rc = store_txn_commit(t, err);
		else
			store_txn_abort(t);
		t = NULL;
		if (!rc)
			fs_notify_sync(db);
		goto finish;
	}
	if ((rc = store_txn_begin(db, false, &t, err)))
		goto done;
	describe_op(t, coll, &a);
	if ((rc = query_agg_open(t, coll, qp, &o, &ag, err)))
		goto done;
	{
		struct query_summary sum;

		query_agg_summary(ag, &sum);
		fs_curop_plan(&sum);
	}
	if ((rc = fs_render_new(r, a.format, &rd, err)))
		goto done;
	while ((rc = query_agg_next(ag, &doc, err)) == 0) {
		nret++;
		if ((rc = fs_render_put(rd, doc, err)))
			goto done;
	}
	if (rc != DFS_ENOENT) {
		struct dfs_err rerr = {0};

		if (fs_render_drain(rd, &rerr)) { /* render.c note 4 */
			rc = rerr.code;
			if (err)
				*err = rerr;
		}
		goto done;
	}
	rc = fs_render_finish(rd, err);
	goto done;
finish:
	if (!rc)
		rc = fs_result_finish(r, err);
done:
	if (ag) {
		struct query_summary sum;

		query_agg_summary(ag, &sum);
		fs_curop_note(&sum, nret);
	}
	fs_render_free(rd);
	query_agg_free(ag);
	store_txn_abort(t);
	query_pipeline_free(qp);
	bson_destroy(&a.pipeline);
	return rc;
}

/* ---- explain/ of a pipeline (note 4) ------------------------------------------------- */

/* Is the component of an explain/ path a pipeline: "[...]" (after %-decoding and blanks),
 * or "@name" naming a saved pipeline? When it is, the pipeline is loaded into out. A saved
 * name that is missing or a find is left to the find's explain (which reports it). */
static int explain_pipeline(struct store_db *db, int64_t coll, const char *component, bson_t *out,
			    bool *is_pipeline, struct dfs_err *err)
{
	const char *q = fs_path_split(component, "?");
	size_t plen = q ? (size_t)(q - component) : strlen(component), i = 0;
	struct dfs_buf v;
	int rc;

	*is_pipeline = false;
	dfs_buf_init(&v);
	if ((rc = fs_path_unescape(component, plen, &v, err)))
		goto done;
	while (i < v.len && strchr(" \t\n\r", v.data[i]))
		i++;
	if (i < v.len && v.data[i] == '[') {
		struct dfs_err perr = {0};

		*is_pipeline = true;
		rc = fs_pipeline_from_text(v.data, v.len, out, &perr);
		if (rc)
			rc = dfs_err_set(err, DFS_EINVAL, "%s", perr.msg);
	} else if (v.len > 1 && v.data[0] == '@') {
		struct dfs_err serr = {0};
		bool not_pipeline = false;

		rc = saved_pipeline(db, coll, v.data + 1, out, &not_pipeline, &serr);
		if (not_pipeline) {
			rc = 0;
		} else {
			*is_pipeline = true;
			if (rc) /* a saved pipeline that no longer parses */
				rc = dfs_err_set(err, rc, "%s", serr.msg);
		}
	}
done:
	dfs_buf_release(&v);
	return rc;
}

/* The options of explain/<pipeline>: verbosity= and format=pretty|json|tree. */
static int explain_opts(const char *q, int *verbosity, int *format, struct dfs_err *err)
{
	struct dfs_buf v;
	int rc = 0;

	*verbosity = QUERY_VERB_PLANNER;
	*format = FSQ_PRETTY;
	dfs_buf_init(&v);
	for (const char *p = q; !rc && p && *p;) {
		const char *amp = fs_path_split(p, "&"), *eq;
		size_t n = amp ? (size_t)(amp - p) : strlen(p);

		eq = memchr(p, '=', n);
		dfs_buf_reset(&v);
		if (eq && (rc = fs_path_unescape(eq + 1, n - (size_t)(eq + 1 - p), &v, err)))
			break;
		if (eq && eq - p == 9 && !strncmp(p, "verbosity", 9)) {
			rc = fs_path_verbosity_opt(&v, verbosity, err);
		} else if (eq && eq - p == 6 && !strncmp(p, "format", 6)) {
			if (fs_path_format_opt(&v, format, NULL) ||
			    (*format != FSQ_PRETTY && *format != FSQ_JSON && *format != FSQ_TREE))
				rc = dfs_err_set(err, DFS_EINVAL,
						 "format of an explain must be pretty, json or "
						 "tree, not '%s'",
						 v.data ? v.data : "");
		} else {
			rc = dfs_err_set(
				err, DFS_EINVAL,
				"unknown option '%.*s' of a pipeline's explain (verbosity, "
				"format)",
				(int)(eq ? (size_t)(eq - p) : n), p);
		}
		p = amp ? amp + 1 : NULL;
	}
	dfs_buf_release(&v);
	return rc;
}

int fs_explain_path_run(struct store_db *db, int64_t coll, const char *component,
			struct fs_result *r, struct dfs_err *err)
{
	struct query_agg_opts o = {.mem = fs_sort_mem, .now_ms = wall_ms()};
	const char *qm = fs_path_split(component, "?");
	struct query_pipeline *qp = NULL;
	char ns[2 * DFS_MAX_NS_NAME + 2];
	struct store_txn *t = NULL;
	bson_t pipeline, out;
	bool is_pipeline;
	int verbosity, format, rc;

	bson_init(&pipeline);
	bson_init(&out);
	if ((rc = explain_pipeline(db, coll, component, &pipeline, &is_pipeline, err)))
		goto done;
	if (!is_pipeline) {
		struct fs_query q;

		fs_query_init(&q);
		rc = fs_query_parse_path(db, coll, component, &q, err);
		if (!rc)
			rc = fs_explain_run(db, coll, &q, r, err);
		fs_query_release(&q);
		goto done;
	}
	if ((rc = explain_opts(qm ? qm + 1 : NULL, &verbosity, &format, err)) ||
	    (rc = query_pipeline_parse(&pipeline, &qp, err)) ||
	    (rc = store_txn_begin(db, false, &t, err)) ||
	    (rc = fs_coll_ns(t, coll, ns, sizeof(ns), err)) ||
	    (rc = query_agg_explain(t, coll, ns, qp, &o, verbosity, &out, err)))
		goto done;
	if (format == FSQ_TREE) {
		rc = query_agg_explain_tree(&out, &r->mem, err);
	} else if (format == FSQ_JSON) {
		rc = store_codec_render(&out, STORE_RENDER_COMPACT, &r->mem, err);
		dfs_buf_putc(&r->mem, '\n');
	} else {
		rc = store_codec_render(&out, STORE_RENDER_PRETTY, &r->mem, err);
	}
	if (!rc)
		r->size = r->mem.len;
done:
	store_txn_abort(t);
	query_pipeline_free(qp);
	bson_destroy(&out);
	bson_destroy(&pipeline);
	return rc;
}
