/*
 * write.c - MongoDB's write commands over a collection: update (one, many, replace, upsert),
 * delete, findAndModify and bulkWrite, on top of the update engine (update.c), the find
 * cursor (exec.c) and the store's document calls. It does not parse text or know about
 * files: the mount and the command line hand it BSON and render its results.
 *
 * Design notes
 * 1. Two phases: the matching documents' _ids are collected by a find first, then each is
 *    re-read, re-matched (for the positional '$'), changed and written. A write never sees
 *    its own output, so an updateMany that moves a document within an index cannot match it
 *    twice, and the find's cursor is closed before the first write.
 * 2. A call works inside the caller's write transaction: on an error the caller aborts and
 *    nothing of the call remains (stronger than MongoDB, whose updateMany keeps the
 *    documents changed before a failing one). Concurrent writers queue on the database's
 *    write lock, so each document's read-modify-write is atomic.
 * 3. An upsert that finds nothing builds its document from the filter's equality fields
 *    (query_upsert_seed), applies the update with $setOnInsert active, and inserts it; a
 *    unique index makes racing upserts of one key produce one document (the second writer,
 *    serialized behind the first, matches it instead).
 */
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void query_write_result_release(struct query_write_result *r)
{
	if (!r)
		return;
	if (r->upserted_id)
		bson_destroy(r->upserted_id);
	if (r->value)
		bson_destroy(r->value);
	memset(r, 0, sizeof(*r));
}

/* The store entry ids of the documents collect_ids found, in its order (0: not known, look the
 * _id up). Reading a document by its entry id saves the _id index lookup per document. */
struct entries {
	int64_t *v; /* Owned */
	size_t n, cap;
};

static void entries_release(struct entries *e)
{
	free(e->v);
	memset(e, 0, sizeof(*e));
}

/* Collects the _ids of the documents matching o->filter (in o->sort order; only the first
 * unless o->multi) into ids, an array (initialised by the caller), and their entry ids into
 * ents (may be NULL). */
static int collect_ids(struct store_txn *t, int64_t coll, const struct query_write_opts *o,
		       bson_t *ids, struct entries *ents, int64_t *n, struct dfs_err *err)
{
	bson_t proj = BSON_INITIALIZER;
	struct query_find_opts fo = {0};
	struct query_cursor *c = NULL;
	const bson_t *doc;
	int rc;

	BSON_APPEND_INT32(&proj, "_id", 1);
	fo.filter = o->filter;
	fo.sort = o->sort;
	fo.projection = &proj;
	fo.limit = o->multi ? 0 : 1;
	fo.collation = o->collation;
	*n = 0;
	if ((rc = query_find_open(t, coll, &fo, &c, err)))
		goto done;
	while ((rc = query_cursor_next(c, &doc, err)) == 0) {
		bson_iter_t it;
		char key[24];
		const char *k;

		if (!bson_iter_init_find(&it, doc, "_id")) {
			rc = dfs_err_set(err, DFS_ECORRUPT, "a matching document has no _id");
			goto done;
		}
		bson_uint32_to_string((uint32_t)*n, &k, key, sizeof(key));
		bson_append_value(ids, k, -1, bson_iter_value(&it));
		if (ents) {
			if (ents->n == ents->cap) {
				size_t cap = ents->cap ? 2 * ents->cap : 1024;
				int64_t *v = realloc(ents->v, cap * sizeof(*v));

				if (!v) {
					rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
					goto done;
				}
				ents->v = v;
				ents->cap = cap;
			}
			ents->v[ents->n++] = query_cursor_entry(c);
		}
		(*n)++;
	}
	if (rc == DFS_ENOENT)
		rc = 0;
done:
	query_cursor_free(c);
	bson_destroy(&proj);
	return rc;
}

/* Appends a count as MongoDB's replies carry it: an int32 while it fits (so `jq .n` reads a
 * plain number), an int64 beyond. */
static void append_count(bson_t *out, const char *key, int64_t v)
{
	if (v >= INT32_MIN && v <= INT32_MAX)
		BSON_APPEND_INT32(out, key, (int32_t)v);
	else
		BSON_APPEND_INT64(out, key, v);
}

/* Renders an _id for messages. */
static void id_text(const bson_value_t *v, char *out, size_t cap)
{
	struct dfs_buf b;

	dfs_buf_init(&b);
	store_codec_render_value(v, &b, NULL);
	snprintf(out, cap, "%s", b.data ? b.data : "?");
	dfs_buf_release(&b);
}

/* Parses o's update: operators, a replacement, or a pipeline (o->pipeline). */
static int parse_update(const struct query_write_opts *o, struct query_update **u,
			struct dfs_err *err)
{
	if (o->pipeline)
		return query_update_parse_pipeline(o->update, o->array_filters, o->let, u, err);
	return query_update_parse(o->update, o->array_filters, u, err);
}

/* o with its filter's $expr given the command's variables (query_let_filter): *copy gets o
 * with filter pointing at bound (initialised here; the caller destroys it). */
static void bind_let(const struct query_write_opts *o, struct query_write_opts *copy, bson_t *bound)
{
	*copy = *o;
	bson_init(bound);
	if (o->let && o->filter) {
		bson_destroy(bound);
		query_let_filter(o->let, o->filter, bound);
		copy->filter = bound;
	}
}

/* Inserts the upsert document for a filter that matched nothing. */
static int upsert_insert(struct store_txn *t, int64_t coll, const struct query_write_opts *o,
			 const struct query_update *u, int64_t now, struct query_write_result *r,
			 bson_t *inserted, struct dfs_err *err)
{
	bson_t seed, applied, prepared;
	bool changed;
	bson_iter_t it;
	struct store_attrs a = {.mode = 0644};
	int rc;

	bson_init(&seed);
	bson_init(&applied);
	if (o->filter && (rc = query_upsert_seed(o->filter, &seed, err)))
		goto done;
	if (query_update_is_replacement(u)) {
		/* A replacement keeps only the filter's _id (MongoDB). */
		bson_t base = BSON_INITIALIZER;

		if (bson_iter_init_find(&it, &seed, "_id"))
			bson_append_value(&base, "_id", 3, bson_iter_value(&it));
		rc = query_update_apply(u, &base, -1, true, now, &applied, &changed, err);
		bson_destroy(&base);
	} else {
		rc = query_update_apply(u, &seed, -1, true, now, &applied, &changed, err);
	}
	if (rc)
		goto done;
	if ((rc = store_doc_prepare(&applied, NULL, &prepared, err)))
		goto done;
	rc = store_doc_insert(t, coll, &prepared, &a, NULL, err);
	if (!rc) {
		r->upserted++;
		if (bson_iter_init_find(&it, &prepared, "_id")) {
			r->upserted_id = bson_new();
			bson_append_value(r->upserted_id, "_id", 3, bson_iter_value(&it));
		}
		if (inserted)
			bson_copy_to(&prepared, inserted);
	}
	bson_destroy(&prepared);
done:
	bson_destroy(&seed);
	bson_destroy(&applied);
	return rc;
}

/* The entry id of the i-th collected document: from ents when known, else by its _id. */
static int entry_of(struct store_txn *t, int64_t coll, const struct entries *ents, size_t i,
		    const bson_value_t *id, int64_t *out, struct dfs_err *err)
{
	struct store_entry e;
	int rc;

	if (ents && i < ents->n && ents->v[i] > 0) {
		*out = ents->v[i];
		return 0;
	}
	if ((rc = store_doc_find_id(t, coll, id, &e, err)))
		return rc;
	*out = e.id;
	return 0;
}

/*
 * Updates the documents whose _ids are in ids, with their entry ids in ents (may be NULL)
 * (note 1). before/after (may be NULL) get the first document as it was and as it is now.
 */
static int update_ids(struct store_txn *t, int64_t coll, const struct query_expr *filter,
		      const struct query_update *u, int64_t now, const bson_t *ids,
		      const struct entries *ents, struct query_write_result *r, bson_t *before,
		      bson_t *after, struct dfs_err *err)
{
	bson_iter_t it;
	size_t i = 0;
	int rc = 0;

	if (!bson_iter_init(&it, ids))
		return dfs_err_set(err, DFS_EINVAL, "bad id list");
	for (; !rc && bson_iter_next(&it); i++) {
		int64_t eid;
		bson_t doc, out;
		bool changed = false;
		int idx = -1;
		char idt[128];

		if ((rc = entry_of(t, coll, ents, i, bson_iter_value(&it), &eid, err)))
			break;
		if ((rc = store_doc_get(t, eid, &doc, err)))
			break;
		if (filter && !query_filter_match(filter, &doc, &idx)) {
			bson_destroy(&doc);
			continue; /* cannot happen inside one transaction; harmless */
		}
		r->matched++;
		bson_init(&out);
		rc = query_update_apply(u, &doc, idx, false, now, &out, &changed, err);
		if (!rc && changed) {
			rc = query_update_is_replacement(u)
				     ? store_doc_replace(t, eid, &out, err)
				     : store_doc_update_op_checked(t, eid, &doc, &out, err);
			if (!rc)
				r->modified++;
		}
		if (rc) {
			id_text(bson_iter_value(&it), idt, sizeof(idt));
			dfs_err_prefix(err, "document %s: ", idt);
		} else {
			if (before && r->matched == 1)
				bson_copy_to(&doc, before);
			if (after && r->matched == 1)
				bson_copy_to(changed ? &out : &doc, after);
		}
		bson_destroy(&out);
		bson_destroy(&doc);
	}
	return rc;
}

int query_update_run(struct store_txn *t, int64_t coll, const struct query_write_opts *oin,
		     struct query_write_result *r, struct dfs_err *err)
{
	struct query_update *u = NULL;
	struct query_expr *filter = NULL;
	struct query_write_opts bo, *o = &bo;
	bson_t ids = BSON_INITIALIZER, empty = BSON_INITIALIZER, bound;
	struct entries ents = {0};
	int64_t n, now = oin->now_ms ? oin->now_ms : now_ms();
	int rc;

	bind_let(oin, &bo, &bound);
	if (!o->update) {
		rc = dfs_err_set(err, DFS_EINVAL, "an update needs an update document");
		goto done;
	}
	if ((rc = parse_update(o, &u, err)))
		goto done;
	if (o->multi && query_update_is_replacement(u)) {
		rc = dfs_err_set(err, DFS_EINVAL,
				 "a replacement document cannot update many documents (multi)");
		goto done;
	}
	if ((rc = query_filter_parse_collated(o->filter ? o->filter : &empty, o->collation, &filter,
					      err)))
		goto done;
	if ((rc = collect_ids(t, coll, o, &ids, &ents, &n, err)))
		goto done;
	if ((rc = update_ids(t, coll, filter, u, now, &ids, &ents, r, NULL, NULL, err)))
		goto done;
	if (n == 0 && o->upsert)
		rc = upsert_insert(t, coll, o, u, now, r, NULL, err);
done:
	query_update_free(u);
	query_expr_free(filter);
	entries_release(&ents);
	bson_destroy(&ids);
	bson_destroy(&empty);
	bson_destroy(&bound);
	return rc;
}

int query_delete_run(struct store_txn *t, int64_t coll, const struct query_write_opts *oin,
		     struct query_write_result *r, struct dfs_err *err)
{
	bson_t ids = BSON_INITIALIZER, bound;
	struct query_write_opts bo, *o = &bo;
	struct entries ents = {0};
	bson_iter_t it;
	int64_t n, id;
	int rc;

	bind_let(oin, &bo, &bound);
	if ((rc = collect_ids(t, coll, o, &ids, &ents, &n, err)))
		goto done;
	bson_iter_init(&it, &ids);
	for (size_t i = 0; !rc && bson_iter_next(&it); i++) {
		rc = entry_of(t, coll, &ents, i, bson_iter_value(&it), &id, err);
		if (!rc)
			rc = store_entry_delete(t, id, err);
		if (!rc)
			r->deleted++;
	}
done:
	entries_release(&ents);
	bson_destroy(&ids);
	bson_destroy(&bound);
	return rc;
}

int query_find_modify(struct store_txn *t, int64_t coll, const struct query_write_opts *o,
		      struct query_write_result *r, struct dfs_err *err)
{
	struct query_write_opts one;
	struct query_update *u = NULL;
	struct query_expr *filter = NULL;
	struct query_proj *proj = NULL;
	bson_t ids = BSON_INITIALIZER, empty = BSON_INITIALIZER;
	bson_t before = BSON_INITIALIZER, after = BSON_INITIALIZER;
	const bson_t *ret = NULL;
	int64_t n, now = o->now_ms ? o->now_ms : now_ms();
	bson_t bound;
	int rc;

	bind_let(o, &one, &bound);
	one.multi = false;
	if (o->remove && (o->update || o->upsert)) {
		rc = dfs_err_set(err, DFS_EINVAL,
				 "findAndModify: remove cannot go with an update "
				 "or upsert");
		goto done;
	}
	if (!o->remove && !o->update) {
		rc = dfs_err_set(err, DFS_EINVAL, "findAndModify needs an update or remove");
		goto done;
	}
	if (o->update && (rc = parse_update(o, &u, err)))
		goto done;
	if (o->projection && (rc = query_proj_parse(o->projection, &proj, err)))
		goto done;
	if ((rc = query_filter_parse_collated(one.filter ? one.filter : &empty, o->collation,
					      &filter, err)))
		goto done;
	if ((rc = collect_ids(t, coll, &one, &ids, NULL, &n, err)))
		goto done;
	if (n && o->remove) {
		bson_iter_t it;
		struct store_entry e;

		bson_iter_init(&it, &ids);
		bson_iter_next(&it);
		if ((rc = store_doc_find_id(t, coll, bson_iter_value(&it), &e, err)))
			goto done;
		bson_destroy(&before);
		if ((rc = store_doc_get(t, e.id, &before, err))) {
			bson_init(&before);
			goto done;
		}
		if ((rc = store_entry_delete(t, e.id, err)))
			goto done;
		r->matched = r->deleted = 1;
		ret = &before;
	} else if (n) {
		if ((rc = update_ids(t, coll, filter, u, now, &ids, NULL, r, &before, &after, err)))
			goto done;
		ret = o->return_new ? &after : &before;
	} else if (o->upsert) {
		if ((rc = upsert_insert(t, coll, &one, u, now, r, &after, err)))
			goto done;
		ret = o->return_new ? &after : NULL;
	}
	if (ret) {
		r->value = bson_new();
		if (proj) {
			int idx = -1;

			query_filter_match(filter, ret, &idx);
			rc = query_proj_apply(proj, ret, idx, r->value, err);
		} else {
			bson_copy_to_excluding_noinit(ret, r->value, "", NULL);
		}
	}
done:
	query_update_free(u);
	query_expr_free(filter);
	query_proj_free(proj);
	bson_destroy(&ids);
	bson_destroy(&empty);
	bson_destroy(&before);
	bson_destroy(&after);
	bson_destroy(&bound);
	return rc;
}

void query_write_result_describe(const struct query_write_result *r, const char *command,
				 bson_t *out)
{
	bson_iter_t it;

	if (strcmp(command, "findAndModify") == 0) {
		bson_t leo;

		BSON_APPEND_DOCUMENT_BEGIN(out, "lastErrorObject", &leo);
		BSON_APPEND_INT32(&leo, "n", (int32_t)(r->matched + r->upserted));
		if (!r->deleted)
			BSON_APPEND_BOOL(&leo, "updatedExisting", r->matched > 0);
		if (r->upserted_id && bson_iter_init_find(&it, r->upserted_id, "_id"))
			bson_append_value(&leo, "upserted", 8, bson_iter_value(&it));
		bson_append_document_end(out, &leo);
		if (r->value)
			BSON_APPEND_DOCUMENT(out, "value", r->value);
		else
			BSON_APPEND_NULL(out, "value");
		BSON_APPEND_DOUBLE(out, "ok", 1.0);
		return;
	}
	BSON_APPEND_BOOL(out, "acknowledged", true);
	if (strcmp(command, "delete") == 0) {
		append_count(out, "deletedCount", r->deleted);
		return;
	}
	append_count(out, "matchedCount", r->matched);
	append_count(out, "modifiedCount", r->modified);
	append_count(out, "upsertedCount", r->upserted);
	if (r->upserted_id && bson_iter_init_find(&it, r->upserted_id, "_id"))
		bson_append_value(out, "upsertedId", 10, bson_iter_value(&it));
	else
		BSON_APPEND_NULL(out, "upsertedId");
}

/* ---- bulkWrite ------------------------------------------------------------------- */

/* Operations of a bulk (not atomic) committed together (query_bulk_run). */
#define BULK_GROUP 1000

struct bulk_acc {
	int64_t inserted, matched, modified, deleted, upserted;
	bson_t inserted_ids; /* {"<op index>": _id} */
	bson_t upserted_ids;
	bson_t errors; /* array of {index, code, errmsg, op} */
	int nerrors;
};

int query_error_code(const struct dfs_err *e, const char **name)
{
	static const struct {
		int code;
		const char *name;
	} tab[] = {
		{2, "BadValue"},
		{11000, "DuplicateKey"},
		{66, "ImmutableField"},
		{40, "ConflictingUpdateOperators"},
		{10334, "BSONObjectTooLarge"},
		{26, "NamespaceNotFound"},
		{50, "MaxTimeMSExpired"},
		{11601, "Interrupted"},
		{136, "CappedPositionLost"},
		{73, "InvalidNamespace"},
		{46, "LockBusy"},
		{1, "InternalError"},
		{72, "InvalidOptions"},
		{146, "ExceededMemoryLimit"},
		{14, "TypeMismatch"},
		{13, "Unauthorized"},
		{10107, "NotWritablePrimary"},
		{121, "DocumentValidationFailure"},
		{51173, "Location51173"},
		{51174, "Location51174"},
		{51175, "Location51175"},
		{52, "DollarPrefixedFieldName"},
		{286, "ChangeStreamHistoryLost"},
	};
	int code;

	switch (e->code) {
	case DFS_EEXIST:
		code = 11000;
		break;
	case DFS_EFBIG:
		code = 10334;
		break;
	case DFS_ENOENT:
		code = 26;
		break;
	case DFS_ETIMEDOUT:
		code = 50;
		break;
	case DFS_EINTR:
		code = 11601;
		break;
	case DFS_ESTALE:
		code = 136;
		break;
	case DFS_ENAMETOOLONG:
		code = 73;
		break;
	case DFS_EBUSY:
		code = 46;
		break;
	case DFS_EPERM:
		code = 72;
		break;
	case DFS_ENOMEM:
		code = 146;
		break;
	case DFS_ETYPE:
		code = 14;
		break;
	case DFS_EACCES:
		code = 13;
		break;
	case DFS_EROFS:
		code = 10107;
		break;
	case DFS_EIO:
	case DFS_ECORRUPT:
		code = 1;
		break;
	default:
		code = strstr(e->msg, "Document failed validation")    ? 121 /* store/validator.c */
		       : strstr(e->msg, "When using min()/max()")      ? 51173 /* plan.c */
		       : strstr(e->msg, "not compatible with min/max") ? 51174
		       : strstr(e->msg, "provided for min() does not") ? 51175
		       : strstr(e->msg, "The dollar ($) prefixed field") ? 52 /* update.c */
		       : strstr(e->msg, "with '$' inside '_id'")       ? 52 /* validate.c */
		       : strstr(e->msg, "(ChangeStreamHistoryLost")    ? 286 /* changes.c */
		       : strstr(e->msg, "immutable")		       ? 66
		       : strstr(e->msg, "conflict")		       ? 40
								       : 2;
		break;
	}
	if (name) {
		*name = "BadValue";
		for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
			if (tab[i].code == code)
				*name = tab[i].name;
	}
	return code;
}

static const bson_t *sub_doc(const bson_t *d, const char *key, bson_t *view)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	if (!bson_iter_init_find(&it, d, key))
		return NULL;
	if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it))
		return NULL;
	if (BSON_ITER_HOLDS_DOCUMENT(&it))
		bson_iter_document(&it, &len, &data);
	else
		bson_iter_array(&it, &len, &data);
	if (!bson_init_static(view, data, len))
		return NULL;
	return view;
}

static int bool_field(const bson_t *d, const char *key, bool *out, struct dfs_err *err)
{
	bson_iter_t it;

	*out = false;
	if (!bson_iter_init_find(&it, d, key))
		return 0;
	if (!BSON_ITER_HOLDS_BOOL(&it))
		return dfs_err_set(err, DFS_EINVAL, "'%s' must be a boolean", key);
	*out = bson_iter_bool(&it);
	return 0;
}

/* Checks that spec has only the given fields. */
static int known_fields(const bson_t *spec, const char *op, const char *const *names,
			struct dfs_err *err)
{
	bson_iter_t it;

	bson_iter_init(&it, spec);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		bool ok = false;

		for (int i = 0; names[i]; i++)
			ok = ok || strcmp(k, names[i]) == 0;
		if (!ok)
			return dfs_err_set(err, DFS_EINVAL, "%s: unknown field '%s'", op, k);
	}
	return 0;
}

/* Runs one bulk operation in t. */
static int bulk_one(struct store_txn *t, int64_t coll, const bson_t *op, uint32_t index,
		    struct bulk_acc *acc, struct dfs_err *err)
{
	static const char *const f_insert[] = {"document", NULL};
	static const char *const f_update[] = {"filter", "update",    "upsert", "arrayFilters",
					       "hint",	 "collation", NULL};
	static const char *const f_replace[] = {"filter", "replacement", "upsert",
						"hint",	  "collation",	 NULL};
	static const char *const f_delete[] = {"filter", "hint", "collation", NULL};
	struct query_write_opts o = {0};
	struct query_write_result r = {0};
	struct query_collation *collation = NULL;
	bson_t specv, fv, uv, av;
	const bson_t *spec;
	bson_iter_t it;
	const char *name;
	char key[16];
	int rc;

	if (!bson_iter_init(&it, op) || !bson_iter_next(&it))
		return dfs_err_set(err, DFS_EINVAL, "an empty operation");
	name = bson_iter_key(&it);
	if (bson_iter_next(&it))
		return dfs_err_set(err, DFS_EINVAL, "an operation must have exactly one field");
	spec = sub_doc(op, name, &specv);
	if (!spec)
		return dfs_err_set(err, DFS_EINVAL, "'%s' needs a document", name);
	snprintf(key, sizeof(key), "%u", index);
	if (strcmp(name, "insertOne") == 0) {
		const bson_t *doc;
		bson_t prepared;
		struct store_attrs a = {.mode = 0644};

		if ((rc = known_fields(spec, name, f_insert, err)))
			return rc;
		if (!(doc = sub_doc(spec, "document", &fv)))
			return dfs_err_set(err, DFS_EINVAL, "insertOne needs a 'document'");
		if ((rc = store_doc_prepare(doc, NULL, &prepared, err)))
			return rc;
		rc = store_doc_insert(t, coll, &prepared, &a, NULL, err);
		if (!rc && bson_iter_init_find(&it, &prepared, "_id")) {
			acc->inserted++;
			bson_append_value(&acc->inserted_ids, key, -1, bson_iter_value(&it));
		}
		bson_destroy(&prepared);
		return rc;
	}
	if (strcmp(name, "updateOne") == 0 || strcmp(name, "updateMany") == 0) {
		if ((rc = known_fields(spec, name, f_update, err)))
			return rc;
		o.update = sub_doc(spec, "update", &uv);
		if (!o.update)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s needs an 'update' document or pipeline", name);
		o.pipeline = bson_iter_init_find(&it, spec, "update") && BSON_ITER_HOLDS_ARRAY(&it);
		o.array_filters = sub_doc(spec, "arrayFilters", &av);
		o.multi = name[6] == 'M';
	} else if (strcmp(name, "replaceOne") == 0) {
		if ((rc = known_fields(spec, name, f_replace, err)))
			return rc;
		o.update = sub_doc(spec, "replacement", &uv);
		if (!o.update)
			return dfs_err_set(err, DFS_EINVAL, "replaceOne needs a 'replacement'");
		bson_iter_init(&it, o.update);
		if (bson_iter_next(&it) && bson_iter_key(&it)[0] == '$')
			return dfs_err_set(err, DFS_EINVAL,
					   "replaceOne: the replacement must not hold operators");
	} else if (strcmp(name, "deleteOne") == 0 || strcmp(name, "deleteMany") == 0) {
		if ((rc = known_fields(spec, name, f_delete, err)))
			return rc;
		o.multi = name[6] == 'M';
	} else {
		return dfs_err_set(err, DFS_EINVAL, "unknown bulk operation '%s'", name);
	}
	o.filter = sub_doc(spec, "filter", &fv);
	if (!o.filter)
		return dfs_err_set(err, DFS_EINVAL, "%s needs a 'filter' document", name);
	if ((rc = bool_field(spec, "upsert", &o.upsert, err)))
		return rc;
	if (bson_iter_init_find(&it, spec, "collation")) {
		bson_t cv;
		const bson_t *cs = sub_doc(spec, "collation", &cv);

		if (!cs || !BSON_ITER_HOLDS_DOCUMENT(&it))
			return dfs_err_set(err, DFS_EINVAL, "%s: 'collation' must be a document",
					   name);
		if ((rc = query_collation_new(cs, &collation, err)))
			return rc;
		o.collation = collation;
	}
	if (name[0] == 'd') {
		rc = query_delete_run(t, coll, &o, &r, err);
	} else {
		rc = query_update_run(t, coll, &o, &r, err);
		if (!rc && r.upserted_id && bson_iter_init_find(&it, r.upserted_id, "_id"))
			bson_append_value(&acc->upserted_ids, key, -1, bson_iter_value(&it));
	}
	if (!rc) {
		acc->matched += r.matched;
		acc->modified += r.modified;
		acc->deleted += r.deleted;
		acc->upserted += r.upserted;
	}
	query_write_result_release(&r);
	query_collation_free(collation);
	return rc;
}

static void bulk_error(struct bulk_acc *acc, uint32_t index, const bson_t *op,
		       const struct dfs_err *e)
{
	bson_t d;
	char key[16];

	snprintf(key, sizeof(key), "%d", acc->nerrors++);
	BSON_APPEND_DOCUMENT_BEGIN(&acc->errors, key, &d);
	BSON_APPEND_INT32(&d, "index", (int32_t)index);
	BSON_APPEND_INT32(&d, "code", query_error_code(e, NULL));
	BSON_APPEND_UTF8(&d, "errmsg", e->msg);
	BSON_APPEND_DOCUMENT(&d, "op", op);
	bson_append_document_end(&acc->errors, &d);
}

/* Keeps in ids (a {"<op index>": _id} document) only the entries of operations before
 * index: those of a group whose commit failed are dropped. */
static void ids_before(bson_t *ids, uint32_t index)
{
	bson_t kept = BSON_INITIALIZER;
	bson_iter_t it;

	if (bson_iter_init(&it, ids))
		while (bson_iter_next(&it))
			if (strtoul(bson_iter_key(&it), NULL, 10) < index)
				bson_append_iter(&kept, NULL, 0, &it);
	bson_destroy(ids);
	bson_steal(ids, &kept);
}

int query_bulk_run(struct store_db *db, int64_t coll, const bson_t *ops, bool ordered, bool atomic,
		   bson_t *out, struct dfs_err *err)
{
	struct bulk_acc acc = {0}, group = {0};
	struct store_txn *t = NULL;
	struct dfs_err first = {0};
	bson_iter_t it;
	uint32_t index = 0, first_index = 0, group_first = 0;
	int rc = 0, ret = 0, in_group = 0;

	bson_init(&acc.inserted_ids);
	bson_init(&acc.upserted_ids);
	bson_init(&acc.errors);
	if (!bson_iter_init(&it, ops))
		return dfs_err_set(err, DFS_EINVAL, "bulk: the operations are not an array");
	if (atomic && (rc = store_txn_begin(db, true, &t, err)))
		goto finish;
	for (bool more = bson_iter_next(&it), stop = false;; more = !stop && bson_iter_next(&it)) {
		struct dfs_err e = {0};
		struct bulk_acc saved = acc;
		bson_t opv;
		const uint8_t *data;
		uint32_t len;

		/* Not atomic: each operation is undone alone when it fails (a savepoint), and
		 * BULK_GROUP of them commit together, so a bulk costs a commit per group rather
		 * than per operation; nothing is acknowledged before its group's commit, and a
		 * failed commit fails the operations of its group. */
		if (!atomic && t && (!more || in_group >= BULK_GROUP)) {
			if ((rc = store_txn_commit(t, &e)) != 0) {
				acc.inserted = group.inserted;
				acc.matched = group.matched;
				acc.modified = group.modified;
				acc.deleted = group.deleted;
				acc.upserted = group.upserted;
				ids_before(&acc.inserted_ids, group_first);
				ids_before(&acc.upserted_ids, group_first);
				bson_init(&opv);
				bulk_error(&acc, group_first, &opv, &e);
				bson_destroy(&opv);
				if (!first.code) {
					first = e;
					first_index = group_first;
				}
				t = NULL;
				break;
			}
			t = NULL;
		}
		if (!more)
			break;
		if (!atomic && !t) {
			group = acc;
			group_first = index;
			in_group = 0;
		}
		if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
			dfs_err_set(&e, DFS_EINVAL, "operation %u is not a document", index);
			bson_init(&opv);
			bulk_error(&acc, index, &opv, &e);
			bson_destroy(&opv);
			rc = e.code;
		} else {
			bson_iter_document(&it, &len, &data);
			bson_init_static(&opv, data, len);
			rc = 0;
			if (!atomic && !t)
				rc = store_txn_begin(db, true, &t, &e);
			if (!rc && !atomic)
				rc = store_txn_mark(t, &e);
			if (!rc && !atomic) {
				rc = bulk_one(t, coll, &opv, index, &acc, &e);
				if (rc) {
					store_txn_undo(t);
					/* The failed operation's counts are not kept. */
					acc.inserted = saved.inserted;
					acc.matched = saved.matched;
					acc.modified = saved.modified;
					acc.deleted = saved.deleted;
					acc.upserted = saved.upserted;
				} else {
					rc = store_txn_release(t, &e);
				}
				in_group++;
			} else if (atomic) {
				rc = bulk_one(t, coll, &opv, index, &acc, &e);
			}
			if (rc)
				bulk_error(&acc, index, &opv, &e);
		}
		if (rc && !first.code) {
			first = e;
			first_index = index;
		}
		index++;
		/* ordered: what came before the failure stays (its group commits above) */
		stop = rc && (ordered || atomic);
	}
	if (atomic && t) {
		if (first.code) {
			store_txn_abort(t);
			/* All or nothing: nothing was written. */
			acc.inserted = acc.matched = acc.modified = acc.deleted = acc.upserted = 0;
			bson_reinit(&acc.inserted_ids);
			bson_reinit(&acc.upserted_ids);
		} else if ((rc = store_txn_commit(t, &first)) != 0) {
			acc.inserted = acc.matched = acc.modified = acc.deleted = acc.upserted = 0;
		}
		t = NULL;
	}
	ret = first.code;
	if (ret && err)
		dfs_err_set(err, first.code, "operation %u: %s", first_index, first.msg);
finish:
	BSON_APPEND_BOOL(out, "acknowledged", true);
	append_count(out, "insertedCount", acc.inserted);
	append_count(out, "matchedCount", acc.matched);
	append_count(out, "modifiedCount", acc.modified);
	append_count(out, "deletedCount", acc.deleted);
	append_count(out, "upsertedCount", acc.upserted);
	BSON_APPEND_DOCUMENT(out, "insertedIds", &acc.inserted_ids);
	BSON_APPEND_DOCUMENT(out, "upsertedIds", &acc.upserted_ids);
	BSON_APPEND_ARRAY(out, "writeErrors", &acc.errors);
	bson_destroy(&acc.inserted_ids);
	bson_destroy(&acc.upserted_ids);
	bson_destroy(&acc.errors);
	return rc && !ret ? rc : ret;
}
