/*
 * cmd_write.c - the write commands: insert, update, delete and findAndModify. Each reads its
 * arguments and runs the engine's own function (store_doc_insert, query_update_run,
 * query_delete_run, query_find_modify) as the mount's write paths do: only the commands'
 * argument and reply shapes are here.
 *
 * Design notes
 * 1. An insert batch runs in one write transaction; when a document fails, the transaction
 *    is rolled back and the documents before it are inserted again in their own, so that an
 *    ordered batch keeps exactly the documents before its first error and an unordered one
 *    every document but the failed ones, as MongoDB's. Each update and delete statement is
 *    its own transaction (query/write.c: all or nothing per statement).
 * 2. Errors of a statement are writeErrors with ok: 1; errors of the command itself
 *    (arguments) are {ok: 0, code}.
 */
#include "wire.h"
#include "fs_int.h"
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* The writeErrors entry of a failed statement i. */
static void write_error(struct wire_ctx *c, const char *coll, bson_t *errs, int *nerrs, int64_t i,
			const struct dfs_err *e, const char *errmsg)
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
	wire_dup_key_info(c, coll, e, &one);
	if (wire_validation_info(e, &one)) /* without the engine's "document i: " */
		errmsg = WIRE_VALIDATION_MSG;
	BSON_APPEND_UTF8(&one, "errmsg", errmsg ? errmsg : e->msg);
	bson_append_document_end(errs, &one);
}

/* The key of a duplicate key message "... index: NAME dup key: { f1: v1, f2: v2 }" (store/
 * index.c's, or insert_range's for _id) as a document of the index's fields (paths) into
 * out (initialised, empty): false when the text is not that (cut short, say). */
static bool dup_key_value(const char *msg, const struct store_index *ix, bson_t *out)
{
	const char *p = strstr(msg, " dup key: { "), *end;
	struct dfs_buf b;
	bool ok;

	if (!p)
		return false;
	p += strlen(" dup key: { ");
	end = msg + strlen(msg);
	if (end - p < 2 || strcmp(end - 2, " }"))
		return false;
	dfs_buf_init(&b);
	dfs_buf_putc(&b, '{');
	for (int f = 0; f < ix->nfields; f++) {
		const char *k = ix->field[f].path, *next;
		size_t kl = strlen(k);

		if (strncmp(p, k, kl) || strncmp(p + kl, ": ", 2))
			break;
		p += kl + 2;
		if (f + 1 < ix->nfields) { /* the value runs up to ", <next field>: " */
			char sep[300];

			snprintf(sep, sizeof(sep), ", %s: ", ix->field[f + 1].path);
			next = strstr(p, sep);
		} else {
			next = end - 2;
		}
		if (!next)
			break;
		dfs_buf_printf(&b, "%s\"%s\": %.*s", f ? ", " : "", k, (int)(next - p), p);
		p = next + (f + 1 < ix->nfields ? 2 : 0);
	}
	dfs_buf_putc(&b, '}');
	ok = store_codec_parse_doc(b.data, b.len, out, NULL) == 0 &&
	     bson_count_keys(out) == (uint32_t)ix->nfields;
	if (!ok)
		bson_reinit(out);
	dfs_buf_release(&b);
	return ok;
}

bool wire_validation_info(const struct dfs_err *e, bson_t *out)
{
	bson_t info;

	if (!strstr(e->msg, WIRE_VALIDATION_MSG) || !store_validation_failure_take(&info))
		return false;
	BSON_APPEND_DOCUMENT(out, "errInfo", &info);
	bson_destroy(&info);
	return true;
}

void wire_dup_key_info(struct wire_ctx *c, const char *name, const struct dfs_err *e, bson_t *out)
{
	const char *p = strstr(e->msg, " index: ");
	char ixname[128];
	struct store_index ix;
	struct wire_coll x;
	bson_iter_t it, key;
	bson_t kv = BSON_INITIALIZER;
	int code = c->code, dcode = c->dfs_code;
	const char *cname = c->code_name;
	char saved[sizeof(c->errmsg)];
	int n = 0;

	if (e->code != DFS_EEXIST || !strstr(e->msg, "E11000 duplicate key error") || !p ||
	    sscanf(p, " index: %127s dup key:%n", ixname, &n) != 1 || !n)
		return;
	memcpy(saved, c->errmsg, sizeof(saved));
	memset(&ix, 0, sizeof(ix));
	if (wire_coll_open(c, name, WIRE_COLL_READ, &x) == 0) {
		if (store_index_get(x.t, x.co.id, ixname, &ix, NULL) == 0) {
			if (ix.spec && bson_iter_init_find(&it, ix.spec, "key") &&
			    BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &key)) {
				bson_t kp;

				BSON_APPEND_DOCUMENT_BEGIN(out, "keyPattern", &kp);
				while (bson_iter_next(&key))
					bson_append_iter(&kp, NULL, 0, &key);
				bson_append_document_end(out, &kp);
				if (dup_key_value(e->msg, &ix, &kv))
					BSON_APPEND_DOCUMENT(out, "keyValue", &kv);
			}
			store_index_release(&ix);
		}
		wire_coll_close(c, &x, false);
	}
	/* looking the index up is no error of the command */
	c->code = code;
	c->dfs_code = dcode;
	c->code_name = cname;
	memcpy(c->errmsg, saved, sizeof(saved));
	bson_destroy(&kv);
}

/* ---- insert ------------------------------------------------------------------------------ */

/* Inserts docs [from, to) into name in one transaction (note 1): 0, or the error with *bad
 * the failing document's index (-1: the transaction itself failed). */
static int insert_range(struct wire_ctx *c, const char *name, struct doc_list *docs, size_t from,
			size_t to, int64_t *bad, struct dfs_err *err)
{
	struct store_attrs a = {0644, getuid(), getgid(), 0};
	struct wire_coll x;
	int rc;

	*bad = -1;
	if (from >= to)
		return 0;
	if ((rc = wire_coll_open(c, name, WIRE_COLL_CREATE, &x)))
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
			wire_ns(ns, sizeof(ns), c->db, name);
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
		write_error(c, name, &errs, &nerrs, failed, &first, NULL);
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

/* The fields of an update and of a delete statement that MongoDB 7.0 knows; any other is
 * its IDL's 40415 for the whole command (an update's "sort" came in 8.0). */
static const char *const update_fields[] = {
	"q",	"u",	     "c",	 "upsert",	   "multi", "arrayFilters",
	"hint", "collation", "sampleId", "upsertSupplied", NULL};
static const char *const delete_fields[] = {"q", "limit", "hint", "collation", "sampleId", NULL};

/* Checks the command's and each statement's options before any runs (MongoDB parses the
 * whole command first): 0, or 238 for what docfs refuses, 40415 for an unknown field. */
static int check_statements(struct wire_ctx *c, const struct doc_list *sts, const char *id,
			    const char *const *known)
{
	for (size_t i = 0; i < sts->n; i++) {
		bson_t view;
		bson_iter_t it;

		list_doc(sts, i, &view);
		if (!bson_iter_init(&it, &view))
			continue;
		while (bson_iter_next(&it)) {
			const char *k = bson_iter_key(&it);
			size_t j = 0;

			while (known[j] && strcmp(known[j], k))
				j++;
			if (!known[j])
				return wire_fail(c, 40415, "Location40415",
						 "BSON field '%s.%s.%s' is an unknown field.",
						 c->name, id, k);
		}
	}
	return 0;
}

/* update_one's statement st with its options in o. */
static int update_coll(struct wire_ctx *c, const char *name, const bson_t *st,
		       struct query_write_opts *o, struct query_write_result *r,
		       struct dfs_err *err)
{
	bson_t q, u, af;
	bson_iter_t it;
	struct wire_coll x;
	int rc;

	o->pipeline = bson_iter_init_find(&it, st, "u") && BSON_ITER_HOLDS_ARRAY(&it);
	if (!wire_sub_view(st, "u", o->pipeline, &u))
		return dfs_err_set(err, DFS_EINVAL,
				   "update statement needs 'u', a document or a pipeline");
	o->filter = wire_sub_view(st, "q", false, &q) ? &q : NULL;
	o->update = &u;
	o->array_filters = wire_sub_view(st, "arrayFilters", true, &af) ? &af : NULL;
	if (bson_iter_init_find(&it, st, "multi"))
		o->multi = bson_iter_as_bool(&it);
	if (bson_iter_init_find(&it, st, "upsert"))
		o->upsert = bson_iter_as_bool(&it);
	rc = wire_coll_open(c, name, o->upsert ? WIRE_COLL_CREATE : WIRE_COLL_WRITE, &x);
	if (rc == DFS_ENOENT)
		return 0;
	if (rc)
		return dfs_err_set(err, c->dfs_code ? c->dfs_code : DFS_EIO, "%s", c->errmsg);
	if ((rc = query_update_run(x.t, x.co.id, o, r, err))) {
		store_txn_abort(x.t);
		return rc;
	}
	return store_txn_commit(x.t, err);
}

/* The collation of statement st (*out Owned, NULL for none): 0, or an error in err (a
 * statement's bad collation is its write error). */
static int statement_collation(struct wire_ctx *c, const bson_t *st, struct query_collation **out,
			       struct dfs_err *err)
{
	if (!wire_arg_collation(c, st, out))
		return 0;
	c->code = 0; /* not the command's error */
	return dfs_err_set(err, DFS_EINVAL, "%s", c->errmsg);
}

/* Runs one update statement st with the command's variables let (may be NULL); *r filled. 0,
 * DFS_ENOENT (nothing to update), or an error in err. */
static int update_one(struct wire_ctx *c, const char *name, const bson_t *st,
		      const struct query_let *let, struct query_write_result *r,
		      struct dfs_err *err)
{
	struct query_write_opts o = {.now_ms = wire_now_ms(), .let = let};
	struct query_collation *coll = NULL;
	struct query_let *both = NULL;
	bson_iter_t it;
	int rc;

	if ((rc = statement_collation(c, st, &coll, err)))
		return rc;
	o.collation = coll;
	if (bson_iter_init_find(&it, st, "c")) {
		/* the statement's constants ("c", MongoDB 5.0+) join the command's let */
		bson_t all = BSON_INITIALIZER, lv, cv;

		if (!wire_sub_view(st, "c", false, &cv)) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "an update statement's 'c' must be a "
					 "document");
			goto done;
		}
		if (wire_sub_view(c->cmd, "let", false, &lv))
			bson_concat(&all, &lv);
		bson_concat(&all, &cv);
		rc = query_let_new(&all, o.now_ms, &both, err);
		bson_destroy(&all);
		if (rc)
			goto done;
		o.let = both;
	}
	rc = update_coll(c, name, st, &o, r, err);
done:
	query_let_free(both);
	query_collation_free(coll);
	return rc;
}

int wire_cmd_update(struct wire_ctx *c, bson_t *reply)
{
	char name[DFS_MAX_NS_NAME + 1];
	struct doc_list sts = {0};
	struct query_let *let = NULL;
	bson_t errs = BSON_INITIALIZER, ups = BSON_INITIALIZER;
	bool ordered = true;
	int64_t n = 0, modified = 0;
	int nerrs = 0, nups = 0, rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = doc_list(c, "updates", &sts)) ||
	    (rc = check_statements(c, &sts, "updates", update_fields)) ||
	    (rc = wire_arg_let(c, &let)))
		goto done;
	wire_arg_bool(c, "ordered", &ordered);
	for (size_t i = 0; i < sts.n; i++) {
		struct query_write_result r = {0};
		struct dfs_err err = {0};
		bson_t view;

		if (update_one(c, name, list_doc(&sts, i, &view), let, &r, &err)) {
			write_error(c, name, &errs, &nerrs, (int64_t)i, &err, NULL);
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
	query_let_free(let);
	free(sts.d);
	bson_destroy(&errs);
	bson_destroy(&ups);
	return rc;
}

static int delete_one(struct wire_ctx *c, const char *name, const bson_t *st,
		      const struct query_let *let, int64_t *n, struct dfs_err *err)
{
	struct query_write_opts o = {.let = let};
	struct query_write_result r = {0};
	struct query_collation *coll = NULL;
	bson_t q;
	bson_iter_t it;
	struct wire_coll x;
	int64_t limit = 0;
	int rc;

	*n = 0;
	if ((rc = statement_collation(c, st, &coll, err)))
		return rc;
	o.collation = coll;
	if (!wire_sub_view(st, "q", false, &q)) {
		rc = dfs_err_set(err, DFS_EINVAL, "delete statement needs 'q', a document");
		goto done;
	}
	if (bson_iter_init_find(&it, st, "limit"))
		limit = bson_iter_as_int64(&it);
	if (limit != 0 && limit != 1) {
		rc = dfs_err_set(err, DFS_EINVAL,
				 "The limit field in delete objects must be 0 "
				 "or 1. Got %lld",
				 (long long)limit);
		goto done;
	}
	o.filter = &q;
	o.multi = limit == 0;
	o.remove = true;
	rc = wire_coll_open(c, name, WIRE_COLL_WRITE, &x);
	if (rc == DFS_ENOENT) {
		rc = 0;
		goto done;
	}
	if (rc) {
		rc = dfs_err_set(err, c->dfs_code ? c->dfs_code : DFS_EIO, "%s", c->errmsg);
		goto done;
	}
	if ((rc = query_delete_run(x.t, x.co.id, &o, &r, err))) {
		store_txn_abort(x.t);
		query_write_result_release(&r);
		goto done;
	}
	*n = r.deleted;
	query_write_result_release(&r);
	rc = store_txn_commit(x.t, err);
done:
	query_collation_free(coll);
	return rc;
}

int wire_cmd_delete(struct wire_ctx *c, bson_t *reply)
{
	char name[DFS_MAX_NS_NAME + 1];
	struct doc_list sts = {0};
	struct query_let *let = NULL;
	bson_t errs = BSON_INITIALIZER;
	bool ordered = true;
	int64_t n = 0;
	int nerrs = 0, rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = doc_list(c, "deletes", &sts)) ||
	    (rc = check_statements(c, &sts, "deletes", delete_fields)) ||
	    (rc = wire_arg_let(c, &let)))
		goto done;
	wire_arg_bool(c, "ordered", &ordered);
	for (size_t i = 0; i < sts.n; i++) {
		struct dfs_err err = {0};
		bson_t view;
		int64_t k;

		if (delete_one(c, name, list_doc(&sts, i, &view), let, &k, &err)) {
			write_error(c, name, &errs, &nerrs, (int64_t)i, &err, NULL);
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
	query_let_free(let);
	free(sts.d);
	bson_destroy(&errs);
	return rc;
}

int wire_cmd_find_and_modify(struct wire_ctx *c, bson_t *reply)
{
	struct query_write_opts o = {.now_ms = wire_now_ms()};
	struct query_write_result r = {0};
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	bson_t q, sort, fields, u, af, leo;
	struct query_let *let = NULL;
	bson_iter_t it;
	struct wire_coll x;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) ||
	    (rc = wire_arg_collation(c, c->cmd, &c->coll)))
		return rc;
	o.collation = c->coll;
	o.filter = wire_sub_view(c->cmd, "query", false, &q) ? &q : NULL;
	o.sort = wire_sub_view(c->cmd, "sort", false, &sort) ? &sort : NULL;
	o.projection = wire_sub_view(c->cmd, "fields", false, &fields) ? &fields : NULL;
	o.array_filters = wire_sub_view(c->cmd, "arrayFilters", true, &af) ? &af : NULL;
	wire_arg_bool(c, "remove", &o.remove);
	wire_arg_bool(c, "new", &o.return_new);
	wire_arg_bool(c, "upsert", &o.upsert);
	o.pipeline = bson_iter_init_find(&it, c->cmd, "update") && BSON_ITER_HOLDS_ARRAY(&it);
	if (wire_sub_view(c->cmd, "update", o.pipeline, &u))
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
	if ((rc = wire_arg_let(c, &let)))
		return rc;
	o.let = let;
	rc = wire_coll_open(c, name, o.upsert ? WIRE_COLL_CREATE : WIRE_COLL_WRITE, &x);
	if (rc == DFS_ENOENT) {
		rc = 0;
		goto reply;
	}
	if (rc) {
		query_let_free(let);
		return rc;
	}
	rc = query_find_modify(x.t, x.co.id, &o, &r, &err);
	query_let_free(let);
	let = NULL;
	if (rc) {
		store_txn_abort(x.t);
		query_write_result_release(&r);
		if (!c->err_info)
			c->err_info = bson_new();
		wire_dup_key_info(c, name, &err, c->err_info);
		if (wire_validation_info(&err, c->err_info))
			return wire_fail(c, 121, "DocumentValidationFailure", WIRE_VALIDATION_MSG);
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
	query_let_free(let);
	return 0;
}
