/*
 * wpath.c - the write paths of a collection: "update/<q>", "delete/<q>" and ".bulk[?opts]".
 * A script writes a request to one of them (an update document, anything for a delete, JSON
 * Lines of operations for .bulk) and may read MongoDB's result back on the same open file;
 * the write runs once: an update or delete at the write that completes its request (so
 * that write fails with the error: bash's echo ignores close()), else at the first read or
 * when the file is closed. This file parses
 * the path grammar and the request text and renders the result; the writes themselves are
 * query/write.c's and the FUSE plumbing is fsops.c's.
 *
 * Design notes
 * 1. The result is readable on the descriptor that made the request, so concurrent scripts
 *    never read each other's outcome: there is no shared "last result" file.
 * 2. Options: update/<filter>?multi=true&upsert=true&arrayFilters=[...] (updateOne/Many,
 *    replaceOne when the request has no operators, an update pipeline when it is an
 *    array); with returnDocument=before|after (and optionally sort, projection) it is
 *    findAndModify (findOneAndUpdate). delete/<filter>?justOne=true (or a request
 *    {"justOne": true}), returnDocument=before for findOneAndDelete.
 *    .bulk?ordered=false&atomic=true. All three take a write concern, w=1|N|majority|<mode>,
 *    wtimeout=MS, j=true (fs/replset/member.c note 8): checked before the write, waited
 *    for after it; not met in time, the result carries MongoDB's writeConcernError, the
 *    write stays, and the close fails with ETIMEDOUT ("waiting for replication timed out
 *    (64 WriteConcernFailed)").
 * 3. A failing write changes nothing (query/write.c runs it in one transaction) and its
 *    result is MongoDB's error shape {"ok": 0, "errmsg", "code"}; the error also fails the
 *    close (and the read) with its errno and goes to /.docfs/errors.
 */
#include "fs_int.h"
#include "query.h"
#include "replset/replset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wreq {
	int kind; /* enum fs_write_kind */
	bson_t filter, sort, projection, array_filters;
	bool has_sort, has_projection, has_array_filters;
	bool multi, upsert, just_one, ordered, atomic;
	int return_doc; /* 0 none, 1 before, 2 after */
	struct rs_wc wc; /* its write concern (note 2) */
};

static void wreq_init(struct wreq *w, int kind)
{
	memset(w, 0, sizeof(*w));
	w->kind = kind;
	w->ordered = true;
	rs_wc_default(false, &w->wc);
	bson_init(&w->filter);
	bson_init(&w->sort);
	bson_init(&w->projection);
	bson_init(&w->array_filters);
}

static void wreq_release(struct wreq *w)
{
	bson_destroy(&w->filter);
	bson_destroy(&w->sort);
	bson_destroy(&w->projection);
	bson_destroy(&w->array_filters);
}

int fs_write_kind_of(const char *name)
{
	if (strncmp(name, "update/", 7) == 0)
		return FSW_UPDATE;
	if (strncmp(name, "delete/", 7) == 0)
		return FSW_DELETE;
	if (strcmp(name, ".bulk") == 0 || strncmp(name, ".bulk?", 6) == 0)
		return FSW_BULK;
	return 0;
}

/* A JSON array option (arrayFilters): parsed as the value of a one-field document. */
static int parse_arrayv(const char *what, const struct dfs_buf *v, bson_t *out,
			struct dfs_err *err)
{
	bson_t tmp = BSON_INITIALIZER;
	bson_iter_t it;
	int rc = store_codec_parse_value(v->data ? v->data : "", v->len, &tmp, "v", err);

	if (rc == DFS_EINCOMPLETE)
		rc = DFS_EINVAL;
	if (!rc && (!bson_iter_init_find(&it, &tmp, "v") || !BSON_ITER_HOLDS_ARRAY(&it)))
		rc = dfs_err_set(err, DFS_EINVAL, "needs an array");
	if (!rc) {
		const uint8_t *data;
		uint32_t len;
		bson_t view;

		bson_iter_array(&it, &len, &data);
		bson_init_static(&view, data, len);
		bson_reinit(out);
		bson_concat(out, &view);
	}
	bson_destroy(&tmp);
	if (rc)
		dfs_err_prefix(err, "%s: ", what);
	return rc;
}

static int set_opt(struct wreq *w, const char *name, const struct dfs_buf *v, struct dfs_err *err)
{
	const char *s = v->data ? v->data : "";
	int rc = rs_wc_opt(name, s, &w->wc, err);

	if (rc != 1)
		return rc;
	if (w->kind == FSW_BULK) {
		if (!strcmp(name, "ordered"))
			return fs_path_bool_opt(name, v, &w->ordered, err);
		if (!strcmp(name, "atomic"))
			return fs_path_bool_opt(name, v, &w->atomic, err);
	} else {
		if (!strcmp(name, "returnDocument") || !strcmp(name, "new")) {
			if (!strcmp(s, "before") || !strcmp(s, "false"))
				w->return_doc = 1;
			else if (!strcmp(s, "after") || !strcmp(s, "true"))
				w->return_doc = 2;
			else
				return dfs_err_set(err, DFS_EINVAL,
						   "returnDocument needs before or after, not '%s'",
						   s);
			if (w->kind == FSW_DELETE && w->return_doc == 2)
				return dfs_err_set(err, DFS_EINVAL,
						   "a deleted document has no 'after'");
			return 0;
		}
		if (!strcmp(name, "sort")) {
			w->has_sort = true;
			return fs_path_doc_opt("sort", v, &w->sort, err);
		}
		if (!strcmp(name, "projection") || !strcmp(name, "project")) {
			w->has_projection = true;
			return fs_path_doc_opt("projection", v, &w->projection, err);
		}
	}
	if (w->kind == FSW_UPDATE) {
		if (!strcmp(name, "multi"))
			return fs_path_bool_opt(name, v, &w->multi, err);
		if (!strcmp(name, "upsert"))
			return fs_path_bool_opt(name, v, &w->upsert, err);
		if (!strcmp(name, "arrayFilters")) {
			w->has_array_filters = true;
			return parse_arrayv("arrayFilters", v, &w->array_filters, err);
		}
	}
	if (w->kind == FSW_DELETE && !strcmp(name, "justOne"))
		return fs_path_bool_opt(name, v, &w->just_one, err);
	return dfs_err_set(err, DFS_EINVAL, "unknown option '%s' (%s, w, wtimeout, j)", name,
			   w->kind == FSW_BULK	   ? "ordered, atomic"
			   : w->kind == FSW_DELETE ? "justOne, returnDocument, sort, projection"
						   : "multi, upsert, arrayFilters, returnDocument, "
						     "sort, projection");
}

/* Parses the path name ("update/<q>", "delete/<q>", ".bulk?...") into w. */
static int wreq_parse(const char *name, struct wreq *w, struct dfs_err *err)
{
	int kind = fs_write_kind_of(name);
	const char *q = name + (kind == FSW_BULK ? 5 : 7), *opts;
	struct dfs_buf v, k;
	int rc = 0;

	wreq_init(w, kind); /* first: the caller releases it whatever is returned */
	if (!kind)
		return dfs_err_set(err, DFS_EINVAL, "'%s' is not a write path", name);
	dfs_buf_init(&v);
	dfs_buf_init(&k);
	opts = fs_path_split(q, "?");
	if (kind != FSW_BULK) {
		size_t flen = opts ? (size_t)(opts - q) : strlen(q);

		if ((rc = fs_path_unescape(q, flen, &v, err)))
			goto done;
		if (v.len && (rc = fs_path_doc_opt("filter", &v, &w->filter, err)))
			goto done;
	}
	for (const char *p = opts ? opts + 1 : NULL; p && *p;) {
		const char *amp = fs_path_split(p, "&"), *eq;
		size_t n = amp ? (size_t)(amp - p) : strlen(p);

		eq = memchr(p, '=', n);
		if ((rc = fs_path_unescape(p, eq ? (size_t)(eq - p) : n, &k, err)))
			goto done;
		if (eq)
			rc = fs_path_unescape(eq + 1, n - (size_t)(eq + 1 - p), &v, err);
		else
			dfs_buf_reset(&v);
		if (!rc)
			rc = set_opt(w, k.data ? k.data : "", &v, err);
		if (rc)
			goto done;
		p = amp ? amp + 1 : NULL;
	}
	if (w->return_doc && w->multi)
		rc = dfs_err_set(err, DFS_EINVAL, "returnDocument works on one document: no multi");
done:
	dfs_buf_release(&v);
	dfs_buf_release(&k);
	return rc;
}

int fs_write_validate(const char *name, struct dfs_err *err)
{
	struct wreq w;
	int rc = wreq_parse(name, &w, err);

	wreq_release(&w);
	return rc;
}

/* Parses request text as one document (whitespace only: an empty document). */
static int body_doc(const char *text, size_t len, bson_t *out, struct dfs_err *err)
{
	size_t used;
	int rc = store_codec_parse_next(text, len, 1, &used, out, err);

	if (rc == DFS_ENOENT)
		return 0;
	if (rc == DFS_EINCOMPLETE)
		rc = dfs_err_set(err, DFS_EINVAL, "%s", err ? err->msg : "incomplete request");
	if (rc)
		return rc;
	for (size_t i = used; i < len; i++)
		if (text[i] != ' ' && text[i] != '\n' && text[i] != '\t' && text[i] != '\r')
			return dfs_err_set(err, DFS_EINVAL,
					   "the request holds more than one document (at byte %zu)",
					   i + 1);
	return 0;
}

/* Does the request text start (after whitespace) with '['? Then it is an update pipeline. */
static bool body_is_array(const char *text, size_t len)
{
	size_t i = 0;

	while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'))
		i++;
	return i < len && text[i] == '[';
}

/* Parses an update pipeline request ([{$set: ...}, ...], exactly one value) into out
 * (initialised, empty) as a BSON array document. */
static int body_pipeline(const char *text, size_t len, bson_t *out, struct dfs_err *err)
{
	bson_t tmp = BSON_INITIALIZER;
	bson_iter_t it, arr;
	int rc = store_codec_parse_value(text, len, &tmp, "u", err);

	if (rc == DFS_EINCOMPLETE)
		rc = dfs_err_set(err, DFS_EINVAL, "%s", err ? err->msg : "incomplete request");
	if (!rc && bson_iter_init_find(&it, &tmp, "u") && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &arr))
		while (bson_iter_next(&arr))
			bson_append_iter(out, bson_iter_key(&arr), -1, &arr);
	bson_destroy(&tmp);
	return rc;
}

/* Parses JSON Lines (or concatenated documents) of bulk operations into an array. */
static int body_ops(const char *text, size_t len, bson_t *ops, struct dfs_err *err)
{
	size_t off = 0;
	unsigned line = 1, i = 0;

	for (;;) {
		bson_t doc = BSON_INITIALIZER;
		size_t used;
		char key[16];
		int rc = store_codec_parse_next(text + off, len - off, line, &used, &doc, err);

		if (rc == DFS_ENOENT) {
			bson_destroy(&doc);
			return 0;
		}
		if (rc) {
			bson_destroy(&doc);
			if (rc == DFS_EINCOMPLETE)
				rc = dfs_err_set(err, DFS_EINVAL, "%s", err ? err->msg : "incomplete");
			return dfs_err_prefix(err, "operation %u: ", i);
		}
		for (size_t j = off; j < off + used; j++)
			line += text[j] == '\n';
		snprintf(key, sizeof(key), "%u", i++);
		BSON_APPEND_DOCUMENT(ops, key, &doc);
		bson_destroy(&doc);
		off += used;
	}
}

static void render_line(const bson_t *doc, struct dfs_buf *out)
{
	store_codec_render(doc, STORE_RENDER_COMPACT, out, NULL);
	dfs_buf_putc(out, '\n');
}

/* MongoDB's command error shape, for the result of a write that failed. */
static void render_error(const struct dfs_err *e, struct dfs_buf *out)
{
	bson_t d = BSON_INITIALIZER;
	const char *name;
	int code = query_error_code(e, &name);

	BSON_APPEND_DOUBLE(&d, "ok", 0.0);
	BSON_APPEND_UTF8(&d, "errmsg", e->msg);
	BSON_APPEND_INT32(&d, "code", code);
	BSON_APPEND_UTF8(&d, "codeName", name);
	render_line(&d, out);
	bson_destroy(&d);
}

bool fs_write_complete(const char *name, const char *text, size_t len)
{
	int kind = fs_write_kind_of(name);
	size_t i = 0, used;
	bson_t doc = BSON_INITIALIZER;
	int rc;

	if (kind != FSW_UPDATE && kind != FSW_DELETE)
		return false;
	while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'))
		i++;
	if (i == len)
		return false; /* nothing yet: an empty request runs at the close */
	if (kind == FSW_DELETE && text[i] != '{')
		return true; /* "write anything" */
	if (kind == FSW_UPDATE && text[i] == '[')
		rc = store_codec_parse_value(text, len, &doc, "u", NULL);
	else
		rc = store_codec_parse_next(text, len, 1, &used, &doc, NULL);
	bson_destroy(&doc);
	return rc != DFS_EINCOMPLETE && rc != DFS_ENOENT;
}

/* The thread's operation (curop.c) is this write: its kind and MongoDB's command. */
static void describe_op(const struct wreq *w, const bson_t *body)
{
	struct fs_curop *op = fs_curop_current();
	const char *coll;
	bson_t cmd, arr, one;

	if (!op)
		return;
	coll = strchr(op->ns, '.') ? strchr(op->ns, '.') + 1 : "";
	op->kind = w->kind == FSW_DELETE ? FS_OP_REMOVE : FS_OP_UPDATE;
	if (w->kind == FSW_BULK || w->return_doc)
		op->kind = FS_OP_COMMAND;
	bson_init(&cmd);
	if (w->kind == FSW_BULK) {
		BSON_APPEND_UTF8(&cmd, "bulkWrite", coll);
		BSON_APPEND_BOOL(&cmd, "ordered", w->ordered);
	} else if (w->return_doc) {
		BSON_APPEND_UTF8(&cmd, "findAndModify", coll);
		BSON_APPEND_DOCUMENT(&cmd, "query", &w->filter);
		if (w->kind == FSW_DELETE)
			BSON_APPEND_BOOL(&cmd, "remove", true);
		else
			BSON_APPEND_DOCUMENT(&cmd, "update", body);
	} else {
		BSON_APPEND_UTF8(&cmd, w->kind == FSW_DELETE ? "delete" : "update", coll);
		BSON_APPEND_ARRAY_BEGIN(&cmd, w->kind == FSW_DELETE ? "deletes" : "updates", &arr);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &one);
		BSON_APPEND_DOCUMENT(&one, "q", &w->filter);
		if (w->kind == FSW_DELETE) {
			BSON_APPEND_INT32(&one, "limit", w->just_one ? 1 : 0);
		} else {
			BSON_APPEND_DOCUMENT(&one, "u", body);
			BSON_APPEND_BOOL(&one, "multi", w->multi);
			BSON_APPEND_BOOL(&one, "upsert", w->upsert);
		}
		bson_append_document_end(&arr, &one);
		bson_append_array_end(&cmd, &arr);
	}
	BSON_APPEND_UTF8(&cmd, "$db", op->db);
	fs_curop_describe(&cmd, 0);
	bson_destroy(&cmd);
}

/* What the write did, for opcounters and the profiler. */
static void note_op(const struct query_write_result *r, const bson_t *bulk)
{
	struct fs_curop *op = fs_curop_current();
	bson_iter_t it;

	if (!op)
		return;
	if (r) {
		op->nmatched += r->matched;
		op->nmodified += r->modified;
		op->ndeleted += r->deleted;
		op->ninserted += r->inserted + r->upserted;
	}
	if (bulk && bson_iter_init(&it, bulk))
		while (bson_iter_next(&it)) {
			const char *k = bson_iter_key(&it);

			if (!BSON_ITER_HOLDS_NUMBER(&it))
				continue;
			if (!strcmp(k, "nInserted") || !strcmp(k, "nUpserted"))
				op->ninserted += bson_iter_as_int64(&it);
			else if (!strcmp(k, "nMatched"))
				op->nmatched += bson_iter_as_int64(&it);
			else if (!strcmp(k, "nModified"))
				op->nmodified += bson_iter_as_int64(&it);
			else if (!strcmp(k, "nRemoved") || !strcmp(k, "nDeleted"))
				op->ndeleted += bson_iter_as_int64(&it);
		}
}

int fs_write_run(struct store_db *db, int64_t coll, const char *name, const char *text,
		 size_t len, struct dfs_buf *out, struct dfs_err *err)
{
	struct query_write_opts o = {0};
	struct query_write_result r = {0};
	struct store_txn *t = NULL;
	struct rs_wc_fail wf;
	uint64_t before;
	struct wreq w;
	bson_t body = BSON_INITIALIZER, res = BSON_INITIALIZER;
	const char *command;
	int rc;

	if ((rc = wreq_parse(name, &w, err)))
		goto done;
	if (rs_wc_check(&w.wc, &wf)) { /* nothing is written */
		rc = rs_wc_fail_err(&wf, err);
		goto done;
	}
	before = rs_wc_mark(db);
	if (w.kind == FSW_BULK) {
		describe_op(&w, &body);
		if ((rc = body_ops(text, len, &body, err)) == 0)
			rc = query_bulk_run(db, coll, &body, w.ordered, w.atomic, &res, err);
		note_op(NULL, &res);
		if (!rc && rs_wc_wait(db, before, &w.wc, &wf)) { /* the write stays (note 2) */
			rs_wc_fail_append(&wf, &w.wc, &res);
			rc = rs_wc_fail_err(&wf, err);
		}
		if (!bson_empty(&res))
			render_line(&res, out);
		goto done;
	}
	if (w.kind == FSW_DELETE) {
		/* "Write anything" deletes; a document, though, must be a valid one (a typo in
		 * {"justOne": true} must not turn into deleteMany). */
		size_t i = 0;

		while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' ||
				   text[i] == '\r'))
			i++;
		if (i < len && text[i] == '{' && (rc = body_doc(text, len, &body, err)))
			goto done;
	} else if (body_is_array(text, len)) {
		if ((rc = body_pipeline(text, len, &body, err)))
			goto done;
		o.pipeline = true;
	} else if ((rc = body_doc(text, len, &body, err))) {
		goto done;
	}
	o.filter = &w.filter;
	o.sort = w.has_sort ? &w.sort : NULL;
	o.projection = w.has_projection ? &w.projection : NULL;
	o.array_filters = w.has_array_filters ? &w.array_filters : NULL;
	o.upsert = w.upsert;
	o.return_new = w.return_doc == 2;
	if (w.kind == FSW_DELETE) {
		bson_iter_t it;

		if (bson_iter_init_find(&it, &body, "justOne")) {
			if (!BSON_ITER_HOLDS_BOOL(&it)) {
				rc = dfs_err_set(err, DFS_EINVAL, "justOne must be true or false");
				goto done;
			}
			w.just_one = bson_iter_bool(&it);
		}
		o.multi = !w.just_one;
		o.remove = true;
	} else {
		if (bson_empty(&body) && !o.pipeline) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "write an update document ({$set: {...}}), a replacement "
					 "or a pipeline ([{$set: {...}}])");
			goto done;
		}
		o.update = &body;
		o.multi = w.multi;
	}
	describe_op(&w, &body);
	if ((rc = store_txn_begin(db, true, &t, err)))
		goto done;
	if (w.return_doc) {
		command = "findAndModify";
		rc = query_find_modify(t, coll, &o, &r, err);
	} else if (w.kind == FSW_DELETE) {
		command = "delete";
		rc = query_delete_run(t, coll, &o, &r, err);
	} else {
		command = "update";
		rc = query_update_run(t, coll, &o, &r, err);
	}
	if (!rc) {
		rc = store_txn_commit(t, err);
	} else {
		store_txn_abort(t);
	}
	t = NULL;
	if (!rc) {
		note_op(&r, NULL);
		query_write_result_describe(&r, command, &res);
		if (rs_wc_wait(db, before, &w.wc, &wf)) { /* the write stays (note 2) */
			rs_wc_fail_append(&wf, &w.wc, &res);
			rc = rs_wc_fail_err(&wf, err);
		}
		render_line(&res, out);
		if (rc)
			goto done_rendered;
	}
done:
	if (rc && w.kind != FSW_BULK)
		render_error(err, out);
done_rendered:
	query_write_result_release(&r);
	wreq_release(&w);
	bson_destroy(&body);
	bson_destroy(&res);
	return rc;
}
