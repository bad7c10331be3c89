/*
 * cmd_ops.c - the operations commands, on the same registry and counters as the mount's
 * /.docfs files (fs/ops/curop.c, fs/ops/profile.c): serverStatus, currentOp, killOp, top, profile;
 * and renameCollection and validate, which the store does. A wire client and a file
 * reader see the same operations: a find run by PyMongo is in /.docfs/currentOp, a
 * `cat query/...` in the wire's currentOp.
 */
#include "wire.h"
#include "fs_int.h"
#include "query.h"

#include <stdio.h>
#include <string.h>

int wire_cmd_server_status(struct wire_ctx *c, bson_t *reply)
{
	(void)c;
	fs_curop_status_doc(reply);
	return 0;
}

int wire_cmd_top(struct wire_ctx *c, bson_t *reply)
{
	(void)c;
	fs_curop_top_doc(reply);
	return 0;
}

/* Fields of a currentOp command that are its options or generic arguments, not a filter. */
static bool currentop_option(const char *k)
{
	static const char *const opts[] = {"currentOp",	 "lsid",      "comment",
					   "apiVersion", "apiStrict", "maxTimeMS",
					   "$all",	 "$ownOps",   "apiDeprecationErrors"};

	if (k[0] == '$' && strcmp(k, "$all") && strcmp(k, "$ownOps"))
		return true; /* $db, $readPreference, $clusterTime... */
	for (size_t i = 0; i < sizeof(opts) / sizeof(*opts); i++)
		if (!strcmp(k, opts[i]))
			return true;
	return false;
}

int wire_cmd_current_op(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct query_expr *e = NULL;
	bson_t all = BSON_INITIALIZER, filter = BSON_INITIALIZER, arr;
	bson_iter_t it, ops;
	int n = 0;

	if (bson_iter_init(&it, c->cmd))
		while (bson_iter_next(&it))
			if (!currentop_option(bson_iter_key(&it)))
				bson_append_iter(&filter, NULL, 0, &it);
	if (query_filter_parse(&filter, &e, &err)) {
		bson_destroy(&filter);
		bson_destroy(&all);
		return wire_fail_dfs(c, &err);
	}
	fs_curop_current_doc(&all);
	BSON_APPEND_ARRAY_BEGIN(reply, "inprog", &arr);
	if (bson_iter_init_find(&it, &all, "inprog") && bson_iter_recurse(&it, &ops))
		while (bson_iter_next(&ops)) {
			const uint8_t *data;
			uint32_t len;
			bson_t one;
			char key[16];

			if (!BSON_ITER_HOLDS_DOCUMENT(&ops))
				continue;
			bson_iter_document(&ops, &len, &data);
			if (!bson_init_static(&one, data, len) ||
			    !query_filter_match(e, &one, NULL))
				continue;
			snprintf(key, sizeof(key), "%d", n++);
			BSON_APPEND_DOCUMENT(&arr, key, &one);
		}
	bson_append_array_end(reply, &arr);
	query_expr_free(e);
	bson_destroy(&filter);
	bson_destroy(&all);
	return 0;
}

int wire_cmd_kill_op(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	int64_t op = 0;
	int rc;

	if ((rc = wire_arg_int(c, "op", &op)) == 1)
		return wire_fail(c, 4, "NoSuchKey", "Missing required field \"op\"");
	if (rc)
		return rc;
	if (fs_curop_kill(op, &err))
		return wire_fail_dfs(c, &err);
	BSON_APPEND_UTF8(reply, "info", "attempting to kill op");
	return 0;
}

int wire_cmd_profile(struct wire_ctx *c, bson_t *reply)
{
	static const char *const keys[] = {"slowms", "sampleRate", "filter"};
	struct dfs_err err = {0};
	bson_t now = BSON_INITIALIZER, set = BSON_INITIALIZER;
	bson_iter_t it;
	int64_t level = -1;
	int rc;

	if ((rc = wire_arg_int(c, "profile", &level)))
		return rc == 1 ? wire_fail(c, 2, "BadValue", "profile needs a level") : rc;
	if (level < -1 || level > 2)
		return wire_fail(c, 2, "BadValue", "Invalid profiling level %lld",
				 (long long)level);
	fs_profile_doc(c->db, &now); /* its "was" is the level before this command */
	if (level >= 0)
		BSON_APPEND_INT32(&set, "level", (int32_t)level);
	for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
		if (bson_iter_init_find(&it, c->cmd, keys[i]))
			bson_append_iter(&set, NULL, 0, &it);
	if (!bson_empty(&set) && fs_profile_apply_doc(c->db, &set, &err))
		rc = wire_fail_dfs(c, &err);
	else if (bson_iter_init(&it, &now))
		while (bson_iter_next(&it))
			if (strcmp(bson_iter_key(&it), "ok") && strcmp(bson_iter_key(&it), "note"))
				bson_append_iter(reply, NULL, 0, &it);
	bson_destroy(&now);
	bson_destroy(&set);
	return rc;
}

/* "db.coll" into db and coll: 0 or a wire_fail code. */
static int split_ns(struct wire_ctx *c, const char *key, char *db, char *coll)
{
	bson_iter_t it;
	const char *ns, *dot;

	if (!bson_iter_init_find(&it, c->cmd, key) || !BSON_ITER_HOLDS_UTF8(&it))
		return wire_fail(c, 14, "TypeMismatch", "'%s' must be a namespace string", key);
	ns = bson_iter_utf8(&it, NULL);
	dot = strchr(ns, '.');
	if (!dot || dot == ns || !dot[1] || (size_t)(dot - ns) > DFS_MAX_NS_NAME ||
	    strlen(dot + 1) > DFS_MAX_NS_NAME)
		return wire_fail(c, 73, "InvalidNamespace", "Invalid namespace specified '%s'", ns);
	snprintf(db, DFS_MAX_NS_NAME + 1, "%.*s", (int)(dot - ns), ns);
	snprintf(coll, DFS_MAX_NS_NAME + 1, "%s", dot + 1);
	return 0;
}

int wire_cmd_rename_collection(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char fdb[DFS_MAX_NS_NAME + 1], fcoll[DFS_MAX_NS_NAME + 1];
	char tdb[DFS_MAX_NS_NAME + 1], tcoll[DFS_MAX_NS_NAME + 1];
	struct store_db *db;
	struct store_txn *t;
	struct store_coll from, to;
	bool drop_target = false;
	int rc;

	(void)reply;
	if ((rc = split_ns(c, "renameCollection", fdb, fcoll)) ||
	    (rc = split_ns(c, "to", tdb, tcoll)))
		return rc;
	wire_arg_bool(c, "dropTarget", &drop_target);
	if (strcmp(fdb, tdb))
		return wire_fail(c, 238, "NotImplemented",
				 "renaming a collection to another database is not supported by "
				 "docfs (each database is its own SQLite file)");
	if (store_coll_name_check(tcoll, &err))
		return wire_fail(c, 73, "InvalidNamespace", "%s", err.msg);
	if (store_db_get(c->store, fdb, false, &db, &err))
		return wire_fail(c, 26, "NamespaceNotFound",
				 "Source collection %s.%s does not exist", fdb, fcoll);
	if ((rc = store_txn_begin(db, true, &t, &err)))
		return wire_fail_dfs(c, &err);
	if (store_coll_find(t, fcoll, &from, &err)) {
		store_txn_abort(t);
		return wire_fail(c, 26, "NamespaceNotFound",
				 "Source collection %s.%s does not exist", fdb, fcoll);
	}
	dfs_err_clear(&err);
	if (!store_coll_find(t, tcoll, &to, &err)) {
		if (!drop_target || to.id == from.id) {
			store_txn_abort(t);
			return wire_fail(c, 48, "NamespaceExists", "target namespace exists");
		}
		rc = store_coll_drop(t, to.id, &err);
	} else {
		dfs_err_clear(&err);
		rc = 0;
	}
	if (!rc)
		rc = store_coll_rename(t, from.id, tcoll, &err);
	if (rc) {
		store_txn_abort(t);
		return wire_fail_dfs(c, &err);
	}
	return store_txn_commit(t, &err) ? wire_fail_dfs(c, &err) : 0;
}

struct problems {
	bson_t *arr;
	int n;
};

static void problem(void *ctx, const char *text)
{
	struct problems *p = ctx;
	char key[16];

	snprintf(key, sizeof(key), "%d", p->n++);
	BSON_APPEND_UTF8(p->arr, key, text);
}

int wire_cmd_validate(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1], ns[2 * DFS_MAX_NS_NAME + 2];
	struct store_db *db;
	struct store_txn *t;
	struct store_coll co;
	struct problems p;
	bson_t arr;
	int64_t ndocs = 0, nfiles = 0;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))))
		return rc;
	snprintf(ns, sizeof(ns), "%s.%s", c->db, name);
	if (store_db_get(c->store, c->db, false, &db, &err) || store_txn_begin(db, false, &t, &err))
		return wire_fail(c, 26, "NamespaceNotFound",
				 "Collection '%s' does not exist to "
				 "validate.",
				 ns);
	rc = store_coll_find(t, name, &co, &err);
	if (!rc)
		rc = store_coll_count(t, co.id, &ndocs, &nfiles, &err);
	store_txn_abort(t);
	if (rc == DFS_ENOENT)
		return wire_fail(c, 26, "NamespaceNotFound",
				 "Collection '%s' does not exist to validate.", ns);
	if (rc)
		return wire_fail_dfs(c, &err);
	BSON_APPEND_UTF8(reply, "ns", ns);
	wire_append_count(reply, "nrecords", ndocs);
	/* docfs check's invariants, over the whole store: a problem anywhere is reported */
	BSON_APPEND_ARRAY_BEGIN(reply, "errors", &arr);
	p.arr = &arr;
	p.n = 0;
	rc = store_check(c->store, problem, &p, &err);
	bson_append_array_end(reply, &arr);
	if (rc && rc != DFS_ECORRUPT)
		return wire_fail_dfs(c, &err);
	BSON_APPEND_BOOL(reply, "valid", p.n == 0);
	{
		bson_t w;

		BSON_APPEND_ARRAY_BEGIN(reply, "warnings", &w);
		BSON_APPEND_UTF8(&w, "0", "docfs validates the whole store (docfs check)");
		bson_append_array_end(reply, &w);
	}
	return 0;
}
