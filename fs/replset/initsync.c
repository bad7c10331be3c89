/*
 * initsync.c - initial sync, MongoDB's logical one: a member with nothing to resume from
 * copies every database of its primary (collections with their options, documents,
 * indexes) over the wire protocol with libmongoc, then apply.c applies the primary's
 * change stream from a position taken before the copy began. It does not decide when to
 * run (apply.c asks rs_sync_needed, and resyncs when the primary lost the history it
 * would resume from) and does not tail the stream itself.
 *
 * Design notes
 * 1. When: an initial sync was begun and not finished (note 2); or nothing is saved in
 *    local.replset and the store holds no database but local (a new member, or one whose
 *    store was wiped). A store with data but no saved position (a former primary) replays
 *    the primary's kept history instead (apply.c note 3); when that history is lost the
 *    applier resyncs through here.
 * 2. The mark: local.replset {_id: "initialSync", host, began} is written before anything
 *    is dropped and removed only once the stream caught up with the copy (rs_sync_done),
 *    so a member stopped or crashed halfway, or handed to another primary meanwhile,
 *    starts the whole copy again rather than resume a partial one. The saved position
 *    ({_id: "sync"}) is removed with the member's own databases.
 * 3. The copy: the member's databases but local are dropped (logged); then for each
 *    database of the primary but local, each collection is created with its
 *    listCollections options (capped, size, max, validator, validationLevel,
 *    validationAction), its documents are inserted in the order the primary's find
 *    returns them (a capped collection's is its insertion order) in batches, bypassing
 *    the validator (the primary checked them), then its indexes are built from
 *    listIndexes (every kind the store has: unique, sparse, partial, TTL, text, hashed,
 *    compound): after the documents, as MongoDB does.
 * 4. Events of the primary made during the copy are in the stream apply.c opened before
 *    it began, and are applied after it: an insert of a document copied already is an
 *    upsert of the same document, an update sets the resulting values, a delete of a
 *    document never copied deletes nothing. Until the stream reaches *min_valid (the
 *    primary's position when the copy ended), a duplicate key refused by a unique index
 *    is an intermediate state (the copy has a later one) and is skipped (apply.c).
 * 5. Progress: the member is STARTUP2 with "initial sync: DB.COLL: N documents copied
 *    (database I of K)" as its infoMessage in rs.status(), updated at each batch.
 * 6. Between syncs (rs_catalog_sync, which apply.c calls when it has nothing pending):
 *    the change stream has no event for a collection created empty or for collMod /
 *    convertToCapped, so the member compares its collections with the primary's
 *    listCollections and creates what it lacks (with its options), converts to capped
 *    what the primary has capped, and sets validator fields that differ. Only what the
 *    primary has is made the same: a validator removed there, or a collection dropped
 *    (the drop is an event), are not undone here. It runs caught up, so a collection
 *    made and dropped again in between may be made on the member late and dropped by
 *    the next event; what the stream carries stays in the stream's order.
 *
 * Not copied: scratch files (non-document names in a collection): the wire protocol does
 * not show them.
 */
#include "replset.h"

#include "fs_int.h"
#include "wire.h"

#include <mongoc/mongoc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRESS_COLL "replset"
#define BATCH_DOCS 500
#define BATCH_BYTES (4u << 20)

struct copy {
	struct rs_node *n;
	struct store *s;
	mongoc_client_t *cl;
	const _Atomic bool *stop;
	char *why;
	size_t cap;
	int dbi, dbk;	/* database I of K (progress) */
	int64_t copied; /* documents copied in all */
};

/* 1 with why from a libmongoc error, or RS_SYNC_RETRY when the primary did not answer. */
static int remote_fail(struct copy *c, const char *what, const bson_error_t *e)
{
	snprintf(c->why, c->cap, "initial sync: %s: %s (%u)", what, e->message, e->code);
	return e->domain == MONGOC_ERROR_SERVER || e->domain == MONGOC_ERROR_QUERY ? 1
										   : RS_SYNC_RETRY;
}

static int local_fail(struct copy *c, const char *what, const char *msg)
{
	snprintf(c->why, c->cap, "initial sync: %s: %s", what, msg);
	return 1;
}

static int collect_name(void *ctx, const char *name)
{
	char ***v = ctx;
	size_t n = 0;

	while (*v && (*v)[n])
		n++;
	*v = realloc(*v, (n + 2) * sizeof(**v));
	if (!*v || !((*v)[n] = strdup(name)))
		abort();
	(*v)[n + 1] = NULL;
	return 0;
}

static void free_names(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

bool rs_sync_needed(struct store *s)
{
	bson_t cmd = BSON_INITIALIZER, reply = BSON_INITIALIZER, filter;
	bson_iter_t it;
	char **names = NULL;
	bool flagged = false, saved = false, data = false;
	struct dfs_err err = {0};

	/* the mark (note 2) or a saved position: local.replset's _ids */
	BSON_APPEND_UTF8(&cmd, "find", PROGRESS_COLL);
	BSON_APPEND_DOCUMENT_BEGIN(&cmd, "filter", &filter);
	bson_append_document_end(&cmd, &filter);
	if (!wire_command_local(s, "local", &cmd, &reply) && bson_iter_init(&it, &reply)) {
		bson_iter_t b;

		if (bson_iter_find_descendant(&it, "cursor.firstBatch", &b) &&
		    BSON_ITER_HOLDS_ARRAY(&b)) {
			bson_iter_t d;

			bson_iter_recurse(&b, &d);
			while (bson_iter_next(&d)) {
				bson_iter_t f;

				if (!BSON_ITER_HOLDS_DOCUMENT(&d) || !bson_iter_recurse(&d, &f) ||
				    !bson_iter_find(&f, "_id") || !BSON_ITER_HOLDS_UTF8(&f))
					continue;
				flagged |= !strcmp(bson_iter_utf8(&f, NULL), "initialSync");
				saved |= !strcmp(bson_iter_utf8(&f, NULL), "sync");
			}
		}
	}
	bson_destroy(&cmd);
	bson_destroy(&reply);
	if (flagged)
		return true;
	if (saved)
		return false;
	if (store_db_list(s, collect_name, &names, &err))
		return false; /* cannot tell: replay rather than drop */
	for (size_t i = 0; names && names[i]; i++)
		data |= strcmp(names[i], "local") != 0;
	free_names(names);
	return !data;
}

/* Writes or removes (doc NULL) local.replset's document of _id id. */
static int mark(struct store *s, const char *id, const bson_t *doc, char *why, size_t cap)
{
	bson_t cmd = BSON_INITIALIZER, arr, stmt, q;
	int rc;

	BSON_APPEND_UTF8(&cmd, doc ? "update" : "delete", PROGRESS_COLL);
	BSON_APPEND_ARRAY_BEGIN(&cmd, doc ? "updates" : "deletes", &arr);
	BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
	BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
	BSON_APPEND_UTF8(&q, "_id", id);
	bson_append_document_end(&stmt, &q);
	if (doc) {
		BSON_APPEND_DOCUMENT(&stmt, "u", doc);
		BSON_APPEND_BOOL(&stmt, "upsert", true);
	} else {
		BSON_APPEND_INT32(&stmt, "limit", 1);
	}
	bson_append_document_end(&arr, &stmt);
	bson_append_array_end(&cmd, &arr);
	rc = rs_local_run(s, "local", &cmd, why, cap);
	bson_destroy(&cmd);
	return rc;
}

int rs_sync_done(struct store *s, char *why, size_t cap)
{
	return mark(s, "initialSync", NULL, why, cap);
}

static void progress(struct copy *c, const char *db, const char *coll, int64_t docs)
{
	char msg[200];

	snprintf(msg, sizeof(msg),
		 "initial sync: %.60s.%.60s: %lld documents copied (database %d of %d)", db, coll,
		 (long long)docs, c->dbi, c->dbk);
	rs_node_startup2(c->n, msg);
}

/* Drops the member's own databases but local (note 3). */
static int drop_own(struct copy *c)
{
	struct dfs_err err = {0};
	char **names = NULL;
	int rc = 0;

	if (store_db_list(c->s, collect_name, &names, &err))
		return local_fail(c, "listing the member's databases", err.msg);
	for (size_t i = 0; !rc && names && names[i]; i++) {
		bson_t cmd = BSON_INITIALIZER;
		char msg[400];

		if (!strcmp(names[i], "local"))
			continue;
		fs_errlog_add("replica set: initial sync drops the member's database '%s'",
			      names[i]);
		BSON_APPEND_INT32(&cmd, "dropDatabase", 1);
		if (rs_local_run(c->s, names[i], &cmd, msg, sizeof(msg)))
			rc = local_fail(c, "dropping the member's databases", msg);
		bson_destroy(&cmd);
	}
	free_names(names);
	return rc;
}

/* The insert command of a batch: flushed when full or at the end. */
struct batch {
	bson_t cmd, arr;
	int n;
	char key[16];
};

static void batch_begin(struct batch *b, const char *coll)
{
	bson_init(&b->cmd);
	BSON_APPEND_UTF8(&b->cmd, "insert", coll);
	BSON_APPEND_BOOL(&b->cmd, "ordered", true);
	BSON_APPEND_BOOL(&b->cmd, "bypassDocumentValidation", true);
	BSON_APPEND_ARRAY_BEGIN(&b->cmd, "documents", &b->arr);
	b->n = 0;
}

static int batch_flush(struct copy *c, struct batch *b, const char *db, const char *coll)
{
	char msg[400];
	int rc = 0;

	bson_append_array_end(&b->cmd, &b->arr);
	if (b->n && rs_local_run(c->s, db, &b->cmd, msg, sizeof(msg)))
		rc = local_fail(c, "inserting the copied documents", msg);
	bson_destroy(&b->cmd);
	return rc;
}

/* One collection's documents (note 3). */
static int copy_docs(struct copy *c, const char *db, const char *coll)
{
	mongoc_collection_t *mc = mongoc_client_get_collection(c->cl, db, coll);
	bson_t filter = BSON_INITIALIZER;
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(mc, &filter, NULL, NULL);
	const bson_t *doc;
	struct batch b;
	bson_error_t e;
	int64_t docs = 0;
	int rc = 0;

	batch_begin(&b, coll);
	while (!rc && mongoc_cursor_next(cur, &doc)) {
		if (b.n == BATCH_DOCS || b.cmd.len + doc->len > BATCH_BYTES) {
			rc = batch_flush(c, &b, db, coll);
			batch_begin(&b, coll);
			progress(c, db, coll, docs);
			if (atomic_load(c->stop))
				rc = local_fail(c, "copy", "stopped");
		}
		snprintf(b.key, sizeof(b.key), "%d", b.n++);
		BSON_APPEND_DOCUMENT(&b.arr, b.key, doc);
		docs++;
	}
	if (!rc && mongoc_cursor_error(cur, &e))
		rc = remote_fail(c, "reading the primary's documents", &e);
	if (!rc)
		rc = batch_flush(c, &b, db, coll);
	else
		bson_destroy(&b.cmd);
	c->copied += docs;
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(mc);
	bson_destroy(&filter);
	return rc;
}

/* One collection's indexes but _id_ (note 3). */
static int copy_indexes(struct copy *c, const char *db, const char *coll)
{
	mongoc_collection_t *mc = mongoc_client_get_collection(c->cl, db, coll);
	mongoc_cursor_t *cur = mongoc_collection_find_indexes_with_opts(mc, NULL);
	bson_t cmd = BSON_INITIALIZER, arr;
	const bson_t *spec;
	bson_error_t e;
	bson_iter_t it;
	char key[16], msg[400];
	int n = 0, rc = 0;

	BSON_APPEND_UTF8(&cmd, "createIndexes", coll);
	BSON_APPEND_ARRAY_BEGIN(&cmd, "indexes", &arr);
	while (mongoc_cursor_next(cur, &spec)) {
		if (bson_iter_init_find(&it, spec, "name") && BSON_ITER_HOLDS_UTF8(&it) &&
		    !strcmp(bson_iter_utf8(&it, NULL), "_id_"))
			continue;
		snprintf(key, sizeof(key), "%d", n++);
		bson_t one;

		BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &one);
		bson_copy_to_excluding_noinit(spec, &one, "ns", NULL);
		bson_append_document_end(&arr, &one);
	}
	bson_append_array_end(&cmd, &arr);
	if (mongoc_cursor_error(cur, &e))
		rc = remote_fail(c, "listing the primary's indexes", &e);
	else if (n && rs_local_run(c->s, db, &cmd, msg, sizeof(msg)))
		rc = local_fail(c, "building the copied indexes", msg);
	bson_destroy(&cmd);
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(mc);
	return rc;
}

/* The name and options of a listCollections entry (NULL name: not a collection). */
static const char *coll_info(const bson_t *info, bson_t *options)
{
	bson_iter_t it;
	const char *name = NULL, *type = "collection";

	bson_init(options);
	if (bson_iter_init_find(&it, info, "name") && BSON_ITER_HOLDS_UTF8(&it))
		name = bson_iter_utf8(&it, NULL);
	if (bson_iter_init_find(&it, info, "type") && BSON_ITER_HOLDS_UTF8(&it))
		type = bson_iter_utf8(&it, NULL);
	if (bson_iter_init_find(&it, info, "options") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		const uint8_t *data;
		uint32_t len;
		bson_t v;

		bson_iter_document(&it, &len, &data);
		if (bson_init_static(&v, data, len))
			bson_concat(options, &v);
	}
	if (name && !strcmp(name, "system.profile"))
		return NULL; /* each member's own profiler, not replicated (as in MongoDB) */
	return strcmp(type, "collection") ? NULL : name; /* docfs has no views */
}

/* Creates collection name of db with options: 0, 48 (it exists), or 1 with why. */
static int create_coll(struct store *s, const char *db, const char *name, const bson_t *options,
		       char *why, size_t cap)
{
	bson_t cmd = BSON_INITIALIZER;
	bson_iter_t o;
	char msg[400];
	int rc;

	BSON_APPEND_UTF8(&cmd, "create", name);
	if (bson_iter_init(&o, options))
		while (bson_iter_next(&o))
			bson_append_iter(&cmd, bson_iter_key(&o), -1, &o);
	rc = rs_local_run(s, db, &cmd, msg, sizeof(msg));
	bson_destroy(&cmd);
	if (rc && rc != 48)
		snprintf(why, cap, "creating %s.%s: %s", db, name, msg);
	return rc && rc != 48 ? 1 : rc;
}

/* One collection: created with its options, then its documents and indexes. */
static int copy_coll(struct copy *c, const char *db, const bson_t *info)
{
	bson_t options;
	const char *name = coll_info(info, &options);
	int rc = 0;

	/* 48 NamespaceExists: made by an insert meanwhile */
	if (name && create_coll(c->s, db, name, &options, c->why, c->cap) == 1)
		rc = 1;
	bson_destroy(&options);
	if (!name || rc)
		return rc;
	progress(c, db, name, 0);
	if ((rc = copy_docs(c, db, name)))
		return rc;
	return copy_indexes(c, db, name);
}

static int copy_db(struct copy *c, const char *db)
{
	mongoc_database_t *md = mongoc_client_get_database(c->cl, db);
	mongoc_cursor_t *cur = mongoc_database_find_collections_with_opts(md, NULL);
	const bson_t *info;
	bson_t *all[4096];
	bson_error_t e;
	size_t n = 0;
	int rc = 0;

	/* the listing is read whole first: its cursor is not kept open across the copy */
	while (n < sizeof(all) / sizeof(*all) && mongoc_cursor_next(cur, &info))
		all[n++] = bson_copy(info);
	if (mongoc_cursor_error(cur, &e))
		rc = remote_fail(c, "listing the primary's collections", &e);
	else if (n == sizeof(all) / sizeof(*all))
		rc = local_fail(c, db, "more than 4096 collections");
	for (size_t i = 0; !rc && i < n; i++) {
		if (atomic_load(c->stop))
			rc = local_fail(c, "copy", "stopped");
		else
			rc = copy_coll(c, db, all[i]);
	}
	for (size_t i = 0; i < n; i++)
		bson_destroy(all[i]);
	mongoc_cursor_destroy(cur);
	mongoc_database_destroy(md);
	return rc;
}

/* The primary's position now: a new stream's resume token's clusterTime (0: none). */
static int position_now(struct copy *c, uint64_t *out)
{
	bson_t pipeline = BSON_INITIALIZER, opts = BSON_INITIALIZER;
	mongoc_change_stream_t *cs;
	const bson_t *tok, *errdoc;
	bson_error_t e;
	bson_iter_t it;
	int rc = 0;

	*out = 0;
	cs = mongoc_client_watch(c->cl, &pipeline, &opts);
	if (mongoc_change_stream_error_document(cs, &e, &errdoc))
		rc = remote_fail(c, "the primary's position", &e);
	else if ((tok = mongoc_change_stream_get_resume_token(cs)) &&
		 bson_iter_init_find(&it, tok, "_data") && BSON_ITER_HOLDS_UTF8(&it)) {
		struct dfs_err err = {0};
		uint32_t dbnum;
		int64_t seq;

		if (store_event_token_parse(bson_iter_utf8(&it, NULL), &dbnum, out, &seq, &err))
			*out = 0;
	}
	mongoc_change_stream_destroy(cs);
	bson_destroy(&pipeline);
	bson_destroy(&opts);
	return rc;
}

int rs_initial_sync(struct rs_node *n, struct store *s, struct _mongoc_client_t *cl,
		    const char *host, const _Atomic bool *stop, uint64_t *min_valid, char *why,
		    size_t cap)
{
	struct copy c = {n, s, cl, stop, why, cap, 0, 0, 0};
	bson_t flag = BSON_INITIALIZER;
	bson_error_t e;
	char **dbs;
	int rc;

	*min_valid = 0;
	rs_node_startup2(n, "initial sync: listing the primary's databases");
	dbs = mongoc_client_get_database_names_with_opts(cl, NULL, &e);
	if (!dbs)
		return remote_fail(&c, "listing the primary's databases", &e);
	BSON_APPEND_UTF8(&flag, "_id", "initialSync");
	BSON_APPEND_UTF8(&flag, "host", host);
	BSON_APPEND_DATE_TIME(&flag, "began", (int64_t)time(NULL) * 1000);
	rc = mark(s, "initialSync", &flag, why, cap);
	bson_destroy(&flag);
	if (!rc)
		rc = mark(s, "sync", NULL, why, cap);
	if (rc) {
		bson_strfreev(dbs);
		return 1;
	}
	rc = drop_own(&c);
	for (char **p = dbs; *p; p++)
		c.dbk += strcmp(*p, "local") != 0;
	for (char **p = dbs; !rc && *p; p++) {
		if (!strcmp(*p, "local"))
			continue; /* each member's own */
		c.dbi++;
		rc = copy_db(&c, *p);
	}
	bson_strfreev(dbs);
	if (!rc)
		rc = position_now(&c, min_valid);
	if (!rc) {
		char msg[200];

		snprintf(msg, sizeof(msg),
			 "initial sync: %lld documents of %d databases copied; applying the "
			 "writes made meanwhile",
			 (long long)c.copied, c.dbk);
		rs_node_startup2(n, msg);
		fs_log_info("replica set: %s", msg);
	}
	return rc;
}

/* ---- the catalog between syncs (note 6) ----------------------------------------------- */

/* What of a remote collection (name, options) the member lacks: the collection, capped,
 * or validator fields that differ; fixes it (create, convertToCapped, collMod). */
static int catalog_one(struct store *s, struct store_db *ldb, const char *db, const char *name,
		       const bson_t *options, char *why, size_t cap)
{
	static const char *const vkeys[] = {"validator", "validationLevel", "validationAction"};
	struct dfs_err err = {0};
	struct store_coll co;
	struct store_txn *t;
	bson_t mine = BSON_INITIALIZER, mod = BSON_INITIALIZER;
	bson_iter_t it, m;
	bool remote_capped = false, changed = false;
	char msg[400];
	int rc = DFS_ENOENT;

	if (ldb && !store_txn_begin(ldb, false, &t, &err)) {
		rc = store_coll_find(t, name, &co, &err);
		if (!rc)
			fs_options_validation(t, co.id, &mine, NULL);
		store_txn_abort(t);
	}
	if (rc == DFS_ENOENT) {
		bson_destroy(&mine);
		bson_destroy(&mod);
		rc = create_coll(s, db, name, options, why, cap);
		if (!rc)
			fs_log_info("replica set: created %s.%s as the primary has it", db, name);
		return rc == 1;
	}
	if (rc) {
		snprintf(why, cap, "reading %s.%s: %s", db, name, err.msg);
		goto done;
	}
	if (bson_iter_init_find(&it, options, "capped"))
		remote_capped = bson_iter_as_bool(&it);
	if (remote_capped && !co.capped) {
		bson_t cmd = BSON_INITIALIZER;

		BSON_APPEND_UTF8(&cmd, "convertToCapped", name);
		if (bson_iter_init_find(&it, options, "size"))
			BSON_APPEND_INT64(&cmd, "size", bson_iter_as_int64(&it));
		if (bson_iter_init_find(&it, options, "max"))
			BSON_APPEND_INT64(&cmd, "max", bson_iter_as_int64(&it));
		rc = rs_local_run(s, db, &cmd, msg, sizeof(msg));
		bson_destroy(&cmd);
		if (rc) {
			snprintf(why, cap, "convertToCapped %s.%s: %s", db, name, msg);
			goto done;
		}
	}
	BSON_APPEND_UTF8(&mod, "collMod", name);
	for (size_t i = 0; i < sizeof(vkeys) / sizeof(*vkeys); i++) {
		bson_value_t *a, *b;

		if (!bson_iter_init_find(&it, options, vkeys[i]))
			continue; /* a validator removed on the primary stays (README) */
		if (bson_iter_init_find(&m, &mine, vkeys[i])) {
			a = (bson_value_t *)bson_iter_value(&it);
			b = (bson_value_t *)bson_iter_value(&m);
			if (a->value_type == b->value_type &&
			    (a->value_type == BSON_TYPE_DOCUMENT
				     ? a->value.v_doc.data_len == b->value.v_doc.data_len &&
					       !memcmp(a->value.v_doc.data, b->value.v_doc.data,
						       a->value.v_doc.data_len)
				     : a->value_type == BSON_TYPE_UTF8 &&
					       !strcmp(a->value.v_utf8.str, b->value.v_utf8.str)))
				continue;
		}
		bson_append_iter(&mod, vkeys[i], -1, &it);
		changed = true;
	}
	rc = 0;
	if (changed && (rc = rs_local_run(s, db, &mod, msg, sizeof(msg))))
		snprintf(why, cap, "collMod %s.%s: %s", db, name, msg);
	else if (changed)
		fs_log_info("replica set: %s.%s's validator set as the primary has it", db, name);
done:
	bson_destroy(&mine);
	bson_destroy(&mod);
	return rc ? 1 : 0;
}

int rs_catalog_sync(struct store *s, struct _mongoc_client_t *cl, char *why, size_t cap)
{
	bson_error_t e;
	char **dbs = mongoc_client_get_database_names_with_opts(cl, NULL, &e);
	int rc = 0;

	if (!dbs) {
		snprintf(why, cap, "listing the primary's databases: %s", e.message);
		return 1;
	}
	for (char **p = dbs; !rc && *p; p++) {
		mongoc_database_t *md;
		mongoc_cursor_t *cur;
		struct store_db *ldb = NULL;
		struct dfs_err err = {0};
		const bson_t *info;

		if (!strcmp(*p, "local"))
			continue;
		if (store_db_get(s, *p, false, &ldb, &err))
			ldb = NULL;
		md = mongoc_client_get_database(cl, *p);
		cur = mongoc_database_find_collections_with_opts(md, NULL);
		while (!rc && mongoc_cursor_next(cur, &info)) {
			bson_t options;
			const char *name = coll_info(info, &options);

			if (name)
				rc = catalog_one(s, ldb, *p, name, &options, why, cap);
			bson_destroy(&options);
			if (!ldb && !rc && store_db_get(s, *p, false, &ldb, &err))
				ldb = NULL;
		}
		if (!rc && mongoc_cursor_error(cur, &e)) {
			snprintf(why, cap, "listing the primary's collections: %s", e.message);
			rc = 1;
		}
		mongoc_cursor_destroy(cur);
		mongoc_database_destroy(md);
	}
	bson_strfreev(dbs);
	return rc;
}
