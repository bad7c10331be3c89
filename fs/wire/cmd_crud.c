/*
 * cmd_crud.c - the commands that read and write documents: insert, update, delete,
 * findAndModify, find, getMore, killCursors, count, distinct, aggregate and explain. Each
 * reads its arguments and runs the engine's own function (query_find_open, query_agg_*,
 * query_update_run, query_delete_run, query_find_modify, store_doc_insert, the explains),
 * exactly as the mount's paths do: no semantics of MongoDB are written here, only the
 * commands' argument and reply shapes.
 *
 * Design notes
 * 1. Writes: an insert batch runs in one write transaction; when a document fails, the
 *    transaction is rolled back and the documents before it are inserted again in their
 *    own, so that an ordered batch keeps exactly the documents before its first error and
 *    an unordered one every document but the failed ones, as MongoDB's. Each update and
 *    delete statement is its own transaction (query/write.c: all or nothing per statement).
 * 2. A read of a collection that does not exist answers as an empty one without creating
 *    anything: a find or count from nothing; an aggregate or explain (whose stages may
 *    produce documents from no input, $facet, or whose plan must be shown) runs over a
 *    collection made inside a write transaction that is then rolled back.
 * 3. Errors of a statement are writeErrors with ok: 1; errors of the command itself
 *    (arguments, a parse error of a find's filter) are {ok: 0, code}.
 */
#include "wire.h"
#include "fs_int.h"
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- collections of a command ---------------------------------------------------------- */

enum coll_mode {
	COLL_READ,   /* a read transaction; DFS_ENOENT (no error) when it does not exist */
	COLL_CREATE, /* a write transaction; the database and collection made when missing */
	COLL_GHOST,  /* a read transaction, or a write one over a collection made for the
		      * command and rolled back with it (note 2) */
	COLL_WRITE,  /* a write transaction; DFS_ENOENT (no error) when it does not exist */
};

struct coll_txn {
	struct store_db *db;
	struct store_txn *t;
	struct store_coll co;
	bool ghost;   /* the collection exists only in t */
	bool created; /* COLL_CREATE made the collection in t */
};

/* Opens name of c->db as mode says: 0, DFS_ENOENT (nothing open, no error recorded), or a
 * wire_fail code. */
static int coll_open(struct wire_ctx *c, const char *name, int mode, struct coll_txn *x)
{
	struct dfs_err err = {0};
	bool write = mode == COLL_CREATE || mode == COLL_WRITE;
	int rc;

	memset(x, 0, sizeof(*x));
	if ((rc = wire_db(c, mode == COLL_CREATE, &x->db)))
		return rc;
	if ((rc = store_txn_begin(x->db, write, &x->t, &err)))
		return wire_fail_dfs(c, &err);
	rc = store_coll_find(x->t, name, &x->co, &err);
	if (rc == DFS_ENOENT && mode == COLL_GHOST) {
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
	} else if (rc == DFS_ENOENT && mode == COLL_CREATE) {
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
static int coll_close(struct wire_ctx *c, struct coll_txn *x, bool commit)
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

static void make_ns(char *out, size_t cap, const char *db, const char *coll)
{
	snprintf(out, cap, "%s.%s", db, coll);
}

/* The documents of a write command: the kind-1 section named id, else the array id of the
 * command; each as its bytes in the message (not as bson_t: a bson_init_static view points
 * into itself and must not be moved by a realloc). d Owned (free). */
struct doc_list {
	struct {
		const uint8_t *data;
		uint32_t len;
	} * d;
	size_t n, cap;
};

static void list_add(struct doc_list *l, const uint8_t *data, uint32_t len)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->d = realloc(l->d, l->cap * sizeof(*l->d));
		if (!l->d)
			abort();
	}
	l->d[l->n].data = data;
	l->d[l->n].len = len;
	l->n++;
}

/* Document i of l as a view in *view (valid with the message). */
static const bson_t *list_doc(const struct doc_list *l, size_t i, bson_t *view)
{
	if (!bson_init_static(view, l->d[i].data, l->d[i].len))
		bson_init(view); /* cannot happen: frame.c checked every document */
	return view;
}

static int list_seq_cb(void *ctx, const bson_t *doc)
{
	list_add(ctx, bson_get_data(doc), doc->len);
	return 0;
}

static int doc_list(struct wire_ctx *c, const char *id, struct doc_list *l)
{
	bson_iter_t it, arr;

	memset(l, 0, sizeof(*l));
	for (int i = 0; i < c->msg->nseq; i++)
		if (!strcmp(c->msg->seq[i].id, id))
			wire_seq_each(&c->msg->seq[i], list_seq_cb, l);
	if (bson_iter_init_find(&it, c->cmd, id)) {
		if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &arr))
			return wire_fail(c, 14, "TypeMismatch",
					 "BSON field '%s.%s' is the wrong type, expected type "
					 "'array'",
					 c->name, id);
		while (bson_iter_next(&arr)) {
			const uint8_t *data;
			uint32_t len;

			if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
				return wire_fail(
					c, 14, "TypeMismatch",
					"BSON field '%s.%s.%s' is the wrong type, expected "
					"type 'object'",
					c->name, id, bson_iter_key(&arr));
			bson_iter_document(&arr, &len, &data);
			list_add(l, data, len);
		}
	}
	if (l->n == 0 || l->n > WIRE_MAX_WRITE_BATCH)
		return wire_fail(c, 16, "InvalidLength",
				 "Write batch sizes must be between 1 and %d. Got %zu operations.",
				 WIRE_MAX_WRITE_BATCH, l->n);
	return 0;
}

/* A sub-document field of doc as a view: true when present and a document (or array when
 * array). */
static bool sub_view(const bson_t *doc, const char *key, bool array, bson_t *view)
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

/* The writeErrors entry of a failed statement i. */
static void write_error(bson_t *errs, int *nerrs, int64_t i, const struct dfs_err *e,
			const char *errmsg)
{
	const char *name;
	int code = query_error_code(e, &name);
	char key[24];
	bson_t one;

	snprintf(key, sizeof(key), "%d", (*nerrs)++);
	BSON_APPEND_DOCUMENT_BEGIN(errs, key, &one);
	wire_append_count(&one, "index", i);
	BSON_APPEND_INT32(&one, "code", code);
	BSON_APPEND_UTF8(&one, "codeName", name);
	BSON_APPEND_UTF8(&one, "errmsg", errmsg ? errmsg : e->msg);
	bson_append_document_end(errs, &one);
}

/* ---- insert ------------------------------------------------------------------------------ */

/* Inserts docs [from, to) into name in one transaction (note 1): 0, or the error with *bad
 * the failing document's index (-1: the transaction itself failed). */
static int insert_range(struct wire_ctx *c, const char *name, struct doc_list *docs, size_t from,
			size_t to, int64_t *bad, struct dfs_err *err)
{
	struct store_attrs a = {0644, getuid(), getgid(), 0};
	struct coll_txn x;
	int rc;

	*bad = -1;
	if (from >= to)
		return 0;
	if ((rc = coll_open(c, name, COLL_CREATE, &x)))
		return dfs_err_set(err, DFS_EIO, "%s", c->errmsg);
	for (size_t i = from; i < to; i++) {
		bson_t prepared, view;

		if ((rc = store_doc_prepare(list_doc(docs, i, &view), NULL, &prepared, err))) {
			*bad = (int64_t)i;
			break;
		}
		rc = store_doc_insert(x.t, x.co.id, &prepared, &a, NULL, err);
		if (rc == DFS_EEXIST && strncmp(err->msg, "E11000", 6) != 0) {
			/* the _id clash: MongoDB's message */
			bson_iter_t it;
			struct dfs_buf v;
			char ns[2 * DFS_MAX_NS_NAME + 2];

			dfs_buf_init(&v);
			if (bson_iter_init_find(&it, &prepared, "_id"))
				store_codec_render_value(bson_iter_value(&it), &v, NULL);
			make_ns(ns, sizeof(ns), c->db, name);
			dfs_err_clear(err);
			dfs_err_set(err, DFS_EEXIST,
				    "E11000 duplicate key error collection: %s index: _id_ dup "
				    "key: { _id: %s }",
				    ns, v.data ? v.data : "");
			dfs_buf_release(&v);
		}
		bson_destroy(&prepared);
		if (rc) {
			*bad = (int64_t)i;
			break;
		}
	}
	if (rc) {
		store_txn_abort(x.t);
		return rc;
	}
	if ((rc = store_txn_commit(x.t, err)))
		*bad = -1;
	return rc;
}

int wire_cmd_insert(struct wire_ctx *c, bson_t *reply)
{
	char name[DFS_MAX_NS_NAME + 1];
	struct doc_list docs = {0};
	bson_t errs = BSON_INITIALIZER;
	bool ordered = true;
	int64_t n = 0;
	int nerrs = 0, rc;
	size_t i = 0;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = doc_list(c, "documents", &docs)))
		goto done;
	wire_arg_bool(c, "ordered", &ordered);
	while (i < docs.n) {
		struct dfs_err err = {0}, first = {0};
		int64_t bad, failed;

		rc = insert_range(c, name, &docs, i, docs.n, &bad, &err);
		if (!rc) {
			n += (int64_t)(docs.n - i);
			break;
		}
		if (bad < 0) { /* the transaction, not a document */
			rc = c->code ? c->code : wire_fail_dfs(c, &err);
			goto done;
		}
		/* the documents before the failed one again, on their own (note 1) */
		do {
			failed = bad;
			first = err;
			dfs_err_clear(&err);
			rc = insert_range(c, name, &docs, i, (size_t)failed, &bad, &err);
		} while (rc && bad >= 0);
		if (rc) {
			rc = c->code ? c->code : wire_fail_dfs(c, &err);
			goto done;
		}
		n += failed - (int64_t)i;
		write_error(&errs, &nerrs, failed, &first, NULL);
		i = (size_t)failed + 1;
		if (ordered)
			break;
	}
	rc = 0;
	wire_append_count(reply, "n", n);
	if (nerrs)
		BSON_APPEND_ARRAY(reply, "writeErrors", &errs);
	{
		struct fs_curop *op = fs_curop_current();

		if (op)
			op->ninserted += n;
	}
done:
	free(docs.d);
	bson_destroy(&errs);
	return rc;
}

/* ---- update, delete ------------------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs one update statement st; *r filled. 0, DFS_ENOENT (nothing to update), or an
 * error in err. */
static int update_one(struct wire_ctx *c, const char *name, const bson_t *st,
		      struct query_write_result *r, struct dfs_err *err)
{
	struct query_write_opts o = {.now_ms = now_ms()};
	bson_t q, u, af;
	bson_iter_t it;
	struct coll_txn x;
	int rc;

	if (bson_iter_init_find(&it, st, "u") && BSON_ITER_HOLDS_ARRAY(&it))
		return dfs_err_set(err, DFS_EPERM,
				   "updates with an aggregation pipeline are not supported by "
				   "docfs");
	if (!sub_view(st, "u", false, &u))
		return dfs_err_set(err, DFS_EINVAL, "update statement needs 'u', a document");
	o.filter = sub_view(st, "q", false, &q) ? &q : NULL;
	o.update = &u;
	o.array_filters = sub_view(st, "arrayFilters", true, &af) ? &af : NULL;
	if (bson_iter_init_find(&it, st, "multi"))
		o.multi = bson_iter_as_bool(&it);
	if (bson_iter_init_find(&it, st, "upsert"))
		o.upsert = bson_iter_as_bool(&it);
	rc = coll_open(c, name, o.upsert ? COLL_CREATE : COLL_WRITE, &x);
	if (rc == DFS_ENOENT)
		return 0;
	if (rc)
		return dfs_err_set(err, c->dfs_code ? c->dfs_code : DFS_EIO, "%s", c->errmsg);
	if ((rc = query_update_run(x.t, x.co.id, &o, r, err))) {
		store_txn_abort(x.t);
		return rc;
	}
	return store_txn_commit(x.t, err);
}

int wire_cmd_update(struct wire_ctx *c, bson_t *reply)
{
	char name[DFS_MAX_NS_NAME + 1];
	struct doc_list sts = {0};
	bson_t errs = BSON_INITIALIZER, ups = BSON_INITIALIZER;
	bool ordered = true;
	int64_t n = 0, modified = 0;
	int nerrs = 0, nups = 0, rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = doc_list(c, "updates", &sts)))
		goto done;
	wire_arg_bool(c, "ordered", &ordered);
	for (size_t i = 0; i < sts.n; i++) {
		struct query_write_result r = {0};
		struct dfs_err err = {0};
		bson_t view;

		if (update_one(c, name, list_doc(&sts, i, &view), &r, &err)) {
			write_error(&errs, &nerrs, (int64_t)i, &err, NULL);
			query_write_result_release(&r);
			c->code = 0;
			if (ordered)
				break;
			continue;
		}
		n += r.matched + r.upserted;
		modified += r.modified;
		if (r.upserted_id) {
			bson_t one;
			bson_iter_t it;
			char key[24];

			snprintf(key, sizeof(key), "%d", nups++);
			BSON_APPEND_DOCUMENT_BEGIN(&ups, key, &one);
			wire_append_count(&one, "index", (int64_t)i);
			if (bson_iter_init_find(&it, r.upserted_id, "_id"))
				bson_append_iter(&one, "_id", -1, &it);
			bson_append_document_end(&ups, &one);
		}
		query_write_result_release(&r);
	}
	rc = 0;
	wire_append_count(reply, "n", n);
	wire_append_count(reply, "nModified", modified);
	if (nups)
		BSON_APPEND_ARRAY(reply, "upserted", &ups);
	if (nerrs)
		BSON_APPEND_ARRAY(reply, "writeErrors", &errs);
	{
		struct fs_curop *op = fs_curop_current();

		if (op) {
			op->nmatched += n;
			op->nmodified += modified;
		}
	}
done:
	free(sts.d);
	bson_destroy(&errs);
	bson_destroy(&ups);
	return rc;
}

static int delete_one(struct wire_ctx *c, const char *name, const bson_t *st, int64_t *n,
		      struct dfs_err *err)
{
	struct query_write_opts o = {0};
	struct query_write_result r = {0};
	bson_t q;
	bson_iter_t it;
	struct coll_txn x;
	int64_t limit = 0;
	int rc;

	*n = 0;
	if (!sub_view(st, "q", false, &q))
		return dfs_err_set(err, DFS_EINVAL, "delete statement needs 'q', a document");
	if (bson_iter_init_find(&it, st, "limit"))
		limit = bson_iter_as_int64(&it);
	if (limit != 0 && limit != 1)
		return dfs_err_set(err, DFS_EINVAL,
				   "The limit field in delete objects must be 0 "
				   "or 1. Got %lld",
				   (long long)limit);
	o.filter = &q;
	o.multi = limit == 0;
	o.remove = true;
	rc = coll_open(c, name, COLL_WRITE, &x);
	if (rc == DFS_ENOENT)
		return 0;
	if (rc)
		return dfs_err_set(err, c->dfs_code ? c->dfs_code : DFS_EIO, "%s", c->errmsg);
	if ((rc = query_delete_run(x.t, x.co.id, &o, &r, err))) {
		store_txn_abort(x.t);
		query_write_result_release(&r);
		return rc;
	}
	*n = r.deleted;
	query_write_result_release(&r);
	return store_txn_commit(x.t, err);
}

int wire_cmd_delete(struct wire_ctx *c, bson_t *reply)
{
	char name[DFS_MAX_NS_NAME + 1];
	struct doc_list sts = {0};
	bson_t errs = BSON_INITIALIZER;
	bool ordered = true;
	int64_t n = 0;
	int nerrs = 0, rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = doc_list(c, "deletes", &sts)))
		goto done;
	wire_arg_bool(c, "ordered", &ordered);
	for (size_t i = 0; i < sts.n; i++) {
		struct dfs_err err = {0};
		bson_t view;
		int64_t k;

		if (delete_one(c, name, list_doc(&sts, i, &view), &k, &err)) {
			write_error(&errs, &nerrs, (int64_t)i, &err, NULL);
			c->code = 0;
			if (ordered)
				break;
			continue;
		}
		n += k;
	}
	rc = 0;
	wire_append_count(reply, "n", n);
	if (nerrs)
		BSON_APPEND_ARRAY(reply, "writeErrors", &errs);
	{
		struct fs_curop *op = fs_curop_current();

		if (op)
			op->ndeleted += n;
	}
done:
	free(sts.d);
	bson_destroy(&errs);
	return rc;
}

int wire_cmd_find_and_modify(struct wire_ctx *c, bson_t *reply)
{
	struct query_write_opts o = {.now_ms = now_ms()};
	struct query_write_result r = {0};
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	bson_t q, sort, fields, u, af, leo;
	bson_iter_t it;
	struct coll_txn x;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))))
		return rc;
	o.filter = sub_view(c->cmd, "query", false, &q) ? &q : NULL;
	o.sort = sub_view(c->cmd, "sort", false, &sort) ? &sort : NULL;
	o.projection = sub_view(c->cmd, "fields", false, &fields) ? &fields : NULL;
	o.array_filters = sub_view(c->cmd, "arrayFilters", true, &af) ? &af : NULL;
	wire_arg_bool(c, "remove", &o.remove);
	wire_arg_bool(c, "new", &o.return_new);
	wire_arg_bool(c, "upsert", &o.upsert);
	if (bson_iter_init_find(&it, c->cmd, "update") && BSON_ITER_HOLDS_ARRAY(&it))
		return wire_fail(c, 238, "NotImplemented",
				 "updates with an aggregation pipeline are not supported by docfs");
	if (sub_view(c->cmd, "update", false, &u))
		o.update = &u;
	if (o.remove && o.update)
		return wire_fail(c, 9, "FailedToParse",
				 "Cannot specify both an update and remove=true");
	if (!o.remove && !o.update)
		return wire_fail(c, 9, "FailedToParse",
				 "Either an update or remove=true must be specified");
	if (o.remove && o.upsert)
		return wire_fail(c, 9, "FailedToParse",
				 "Cannot specify both upsert=true and remove=true");
	if (o.remove && o.return_new)
		return wire_fail(c, 9, "FailedToParse",
				 "Cannot specify both new=true and remove=true; 'remove' always "
				 "returns the deleted document");
	rc = coll_open(c, name, o.upsert ? COLL_CREATE : COLL_WRITE, &x);
	if (rc == DFS_ENOENT) {
		rc = 0;
		goto reply;
	}
	if (rc)
		return rc;
	if ((rc = query_find_modify(x.t, x.co.id, &o, &r, &err))) {
		store_txn_abort(x.t);
		query_write_result_release(&r);
		return wire_fail_dfs(c, &err);
	}
	if ((rc = store_txn_commit(x.t, &err))) {
		query_write_result_release(&r);
		return wire_fail_dfs(c, &err);
	}
reply:
	BSON_APPEND_DOCUMENT_BEGIN(reply, "lastErrorObject", &leo);
	wire_append_count(&leo, "n", o.remove ? r.deleted : r.matched + r.upserted);
	if (!o.remove)
		BSON_APPEND_BOOL(&leo, "updatedExisting", r.matched > 0);
	if (r.upserted_id && bson_iter_init_find(&it, r.upserted_id, "_id"))
		bson_append_iter(&leo, "upserted", -1, &it);
	bson_append_document_end(reply, &leo);
	if (r.value)
		BSON_APPEND_DOCUMENT(reply, "value", r.value);
	else
		BSON_APPEND_NULL(reply, "value");
	query_write_result_release(&r);
	return 0;
}

/* ---- find, getMore, killCursors ----------------------------------------------------- */

/* A find's arguments, views into the command. */
struct find_args {
	struct query_find_opts o;
	bson_t filter, sort, projection, hint;
	int64_t batch; /* -1: default */
	bool single;
};

/* Options of find that docfs does not have yet: refused by name. */
static const char *const find_refused[] = {"min",	"max",		"collation",  "let",
					   "returnKey", "showRecordId", "oplogReplay"};

static int find_args(struct wire_ctx *c, struct find_args *a, bool count)
{
	bson_iter_t it;
	int64_t limit = 0, skip = 0;
	int rc;

	memset(a, 0, sizeof(*a));
	a->batch = -1;
	for (size_t i = 0; !count && i < sizeof(find_refused) / sizeof(*find_refused); i++)
		if (bson_iter_init_find(&it, c->cmd, find_refused[i]) && bson_iter_as_bool(&it) &&
		    !BSON_ITER_HOLDS_DOCUMENT(&it))
			return wire_fail(c, 238, "NotImplemented",
					 "find: option '%s' is not supported by docfs yet",
					 find_refused[i]);
	if ((rc = wire_arg_doc(c, count ? "query" : "filter", &a->filter)) > 1)
		return rc;
	a->o.filter = rc == 0 ? &a->filter : NULL;
	if (!count) {
		if ((rc = wire_arg_doc(c, "sort", &a->sort)) > 1)
			return rc;
		a->o.sort = rc == 0 && !bson_empty(&a->sort) ? &a->sort : NULL;
		if ((rc = wire_arg_doc(c, "projection", &a->projection)) > 1)
			return rc;
		a->o.projection = rc == 0 && !bson_empty(&a->projection) ? &a->projection : NULL;
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

/* The lsid of the command (a view), or NULL. */
static const bson_t *cmd_lsid(struct wire_ctx *c, bson_t *view)
{
	return sub_view(c->cmd, "lsid", false, view) ? view : NULL;
}

static void empty_cursor(bson_t *reply, const char *ns, const char *key)
{
	bson_t cur, arr;

	BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cur);
	BSON_APPEND_ARRAY_BEGIN(&cur, key, &arr);
	bson_append_array_end(&cur, &arr);
	BSON_APPEND_INT64(&cur, "id", 0);
	BSON_APPEND_UTF8(&cur, "ns", ns);
	bson_append_document_end(reply, &cur);
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

/* A heap wire_stream of next, free and src. */
static struct wire_stream *stream_new(int (*next)(void *, struct dfs_buf *, bool (*)(void *),
						  void *, struct dfs_err *),
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

/* A tailable find (cursor.c note 4): the mount's tailable read (fs/tail.c) of a capped
 * collection, which refuses what MongoDB's does (a sort other than $natural, an index hint,
 * a collection that is not capped). */
static int find_tailable(struct wire_ctx *c, const char *name, const char *ns,
			 const struct find_args *a, bson_t *reply)
{
	struct dfs_err err = {0};
	struct fs_query q;
	struct fs_tail *tl = NULL;
	struct coll_txn x;
	bson_t lsid;
	bool await = false;
	int rc;

	wire_arg_bool(c, "awaitData", &await);
	rc = coll_open(c, name, COLL_READ, &x);
	if (rc == DFS_ENOENT) {
		empty_cursor(reply, ns, "firstBatch");
		return 0;
	}
	if (rc)
		return rc;
	coll_close(c, &x, false);
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
	return wire_cursor_stream_reply(c, ns, stream_new(tail_next, tail_done, tail_free, tl),
					await, a->single ? -1 : a->batch, cmd_lsid(c, &lsid),
					reply);
}

int wire_cmd_find(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1], ns[2 * DFS_MAX_NS_NAME + 2];
	struct find_args a;
	struct find_src f = {0};
	struct wire_source src = {find_next, &f};
	struct coll_txn x;
	bson_t lsid;
	bool tailable = false;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = find_args(c, &a, false)))
		return rc;
	make_ns(ns, sizeof(ns), c->db, name);
	wire_arg_bool(c, "tailable", &tailable);
	if (tailable)
		return find_tailable(c, name, ns, &a, reply);
	rc = coll_open(c, name, COLL_READ, &x);
	if (rc == DFS_ENOENT) {
		struct query_expr *e = NULL;

		/* nothing to read, but a bad filter is still an error */
		if (a.o.filter && query_filter_parse(a.o.filter, &e, &err))
			return wire_fail_dfs(c, &err);
		query_expr_free(e);
		empty_cursor(reply, ns, "firstBatch");
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
	if (wire_cursor_reply(c, ns, &src, a.batch, a.single || a.o.limit == 1, cmd_lsid(c, &lsid),
			      reply, &err))
		rc = wire_fail_dfs(c, &err);
done:
	if (f.cur) {
		struct query_summary sum;

		query_cursor_summary(f.cur, &sum);
		fs_curop_note(&sum, f.n);
	}
	query_cursor_free(f.cur);
	coll_close(c, &x, false);
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
	make_ns(ns, sizeof(ns), c->db, bson_iter_utf8(&it, NULL));
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
	struct find_args a;
	struct query_cursor *cur = NULL;
	struct coll_txn x;
	int64_t n = 0;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = find_args(c, &a, true)))
		return rc;
	a.o.count_only = true;
	rc = coll_open(c, name, COLL_READ, &x);
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
	coll_close(c, &x, false);
	return rc;
}

int wire_cmd_distinct(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	struct find_args a;
	struct query_cursor *cur = NULL;
	struct query_distinct d;
	struct coll_txn x;
	const bson_t *doc;
	const char *key;
	bson_iter_t it;
	bson_t arr;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = find_args(c, &a, true)))
		return rc;
	if (!bson_iter_init_find(&it, c->cmd, "key") || !BSON_ITER_HOLDS_UTF8(&it))
		return wire_fail(c, 14, "TypeMismatch",
				 "BSON field 'distinct.key' is missing or not a string");
	key = bson_iter_utf8(&it, NULL);
	query_distinct_init(&d);
	rc = coll_open(c, name, COLL_READ, &x);
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
	query_distinct_finish(&d);
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
	coll_close(c, &x, false);
	return rc;
}

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
	/* each event is a line of type-exact JSON (fs/changes.c): back to the same BSON */
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
 * (fs/changes.c: resume tokens, fullDocument, $match stages) with follow=1, read by a
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
	if (!sub_view(&stage, "$changeStream", false, &spec))
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
	/* the stages after it: the mount's streams take $match stages (fs/changes.c) */
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
		struct wire_stream *sw = stream_new(changes_next, NULL, changes_free, ch);

		sw->token = changes_token;
		rc = wire_cursor_stream_reply(c, ns, sw, true, batch, cmd_lsid(c, &lsid), reply);
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

/* The pipeline of an aggregate, parsed: 0 or a wire_fail code. */
static int agg_pipeline(struct wire_ctx *c, struct query_pipeline **p)
{
	struct dfs_err err = {0};
	bson_t arr;

	if (!sub_view(c->cmd, "pipeline", true, &arr))
		return wire_fail(c, 14, "TypeMismatch",
				 "'pipeline' option must be specified as an array");
	if (query_pipeline_parse(&arr, p, &err))
		return wire_fail_dfs(c, &err);
	return 0;
}

static int agg_collection(struct wire_ctx *c, char *name, size_t cap)
{
	bson_iter_t it;

	if (bson_iter_init(&it, c->cmd) && bson_iter_next(&it) && !BSON_ITER_HOLDS_UTF8(&it))
		return wire_fail(c, 238, "NotImplemented",
				 "aggregate: 1 (a pipeline over a whole database, such as "
				 "$currentOp) is not supported by docfs yet");
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

/* A pipeline made of one $collStats stage ({storageStats: {scale}, count: {}}), which the
 * engine has no stage for: its one document, with the figures of fs_stats_doc (the .stats
 * file's). -1 when the pipeline does not start with $collStats, else 0 or a wire_fail. */
static int coll_stats_stage(struct wire_ctx *c, const char *name, const char *ns, bson_t *reply)
{
	struct dfs_err err = {0};
	bson_iter_t it, st, opt;
	bson_t arr, one = BSON_INITIALIZER, spec, stats = BSON_INITIALIZER, batch;
	struct coll_txn x;
	int64_t scale = 1, count = 0, bytes = 0;
	bool storage = false, want_count = false;
	int rc;

	if (!bson_iter_init_find(&it, c->cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &st) || !bson_iter_next(&st) ||
	    !BSON_ITER_HOLDS_DOCUMENT(&st) || !sub_view(c->cmd, "pipeline", true, &arr))
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
		    !sub_view(&stage, "$collStats", false, &spec))
			return wire_fail(c, 9, "FailedToParse", "$collStats must take an object");
	}
	if (bson_iter_next(&st))
		return wire_fail(c, 238, "NotImplemented",
				 "$collStats followed by other stages is not supported by docfs "
				 "yet");
	if (bson_iter_init(&opt, &spec))
		while (bson_iter_next(&opt)) {
			const char *k = bson_iter_key(&opt);
			bson_t sub;

			if (!strcmp(k, "storageStats")) {
				storage = true;
				if (sub_view(&spec, "storageStats", false, &sub) &&
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
	rc = coll_open(c, name, COLL_READ, &x);
	if (rc == DFS_ENOENT)
		return wire_fail(c, 26, "NamespaceNotFound",
				 "Unable to retrieve storageStats in $collStats stage :: caused by "
				 ":: Collection [%s] not found.",
				 ns);
	if (rc)
		return rc;
	rc = store_coll_data_size(x.t, x.co.id, &count, &bytes, &err);
	coll_close(c, &x, false);
	if (rc || (storage && fs_stats_doc(x.db, x.co.id, scale, &stats, &err))) {
		bson_destroy(&stats);
		bson_destroy(&one);
		return wire_fail_dfs(c, &err);
	}
	BSON_APPEND_UTF8(&one, "ns", ns);
	BSON_APPEND_DATE_TIME(&one, "localTime", now_ms());
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

int wire_cmd_aggregate(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct query_agg_opts ao = {.mem = fs_sort_mem, .now_ms = now_ms()};
	struct query_pipeline *p = NULL;
	struct agg_src as = {0};
	struct wire_source src = {agg_next, &as};
	char name[DFS_MAX_NS_NAME + 1], ns[2 * DFS_MAX_NS_NAME + 2];
	struct coll_txn x = {0};
	bson_t cur, lsid;
	bool explain = false;
	int64_t batch = -1;
	int rc;

	wire_arg_bool(c, "explain", &explain);
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
	make_ns(ns, sizeof(ns), c->db, name);
	if (!explain && (rc = coll_stats_stage(c, name, ns, reply)) != -1)
		return rc;
	if ((rc = agg_pipeline(c, &p)))
		return rc;
	if (explain) {
		rc = coll_open(c, name, COLL_GHOST, &x);
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

		rc = coll_open(c, name, COLL_CREATE, &x);
		if (rc)
			goto done;
		if (query_agg_run_out(x.t, x.co.id, p, &ao, &nw, &err)) {
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
		if ((rc = coll_close(c, &x, true)))
			goto done;
		empty_cursor(reply, ns, "firstBatch");
		goto done;
	}
	rc = coll_open(c, name, COLL_GHOST, &x);
	if (rc == DFS_ENOENT) {
		empty_cursor(reply, ns, "firstBatch");
		rc = 0;
		goto done;
	}
	if (rc)
		goto done;
	if (query_agg_open(x.t, x.co.id, p, &ao, &as.agg, &err)) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	if (wire_cursor_reply(c, ns, &src, batch, false, cmd_lsid(c, &lsid), reply, &err))
		rc = wire_fail_dfs(c, &err);
	{
		struct query_summary sum;

		query_agg_summary(as.agg, &sum);
		fs_curop_note(&sum, 0);
	}
done:
	query_agg_free(as.agg);
	coll_close(c, &x, false);
	query_pipeline_free(p);
	return rc;
}

/* ---- explain ----------------------------------------------------------------------- */

int wire_cmd_explain(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	const bson_t *outer = c->cmd;
	const char *outer_name = c->name;
	char name[DFS_MAX_NS_NAME + 1], ns[2 * DFS_MAX_NS_NAME + 2];
	struct coll_txn x = {0};
	struct query_pipeline *p = NULL;
	struct find_args a;
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
	if (strcmp(c->name, "find") && strcmp(c->name, "count") && strcmp(c->name, "distinct") &&
	    strcmp(c->name, "aggregate")) {
		rc = wire_fail(c, 238, "NotImplemented",
			       "explain of '%s' is not supported by docfs yet (find, aggregate, "
			       "count and distinct are)",
			       c->name);
		goto done;
	}
	if (!strcmp(c->name, "aggregate")) {
		struct query_agg_opts ao = {.mem = fs_sort_mem, .now_ms = now_ms()};

		if ((rc = agg_collection(c, name, sizeof(name))) || (rc = agg_pipeline(c, &p)))
			goto done;
		make_ns(ns, sizeof(ns), c->db, name);
		if ((rc = coll_open(c, name, COLL_GHOST, &x)) == DFS_ENOENT)
			rc = wire_fail(c, 26, "NamespaceNotFound", "database %s does not exist",
				       c->db);
		if (rc)
			goto done;
		if (query_agg_explain(x.t, x.co.id, ns, p, &ao, verbosity, reply, &err))
			rc = wire_fail_dfs(c, &err);
		goto done;
	}
	if ((rc = wire_arg_coll(c, name, sizeof(name))) ||
	    (rc = find_args(c, &a, strcmp(c->name, "find") != 0)))
		goto done;
	a.o.count_only = !strcmp(c->name, "count");
	make_ns(ns, sizeof(ns), c->db, name);
	if ((rc = coll_open(c, name, COLL_GHOST, &x)) == DFS_ENOENT)
		rc = wire_fail(c, 26, "NamespaceNotFound", "database %s does not exist", c->db);
	if (rc)
		goto done;
	if (query_find_explain(x.t, x.co.id, ns, &a.o, verbosity, reply, &err))
		rc = wire_fail_dfs(c, &err);
done:
	c->cmd = outer;
	c->name = outer_name;
	query_pipeline_free(p);
	coll_close(c, &x, false);
	return rc;
}
