/*
 * cmd_admin.c - the commands that are not reads or writes of documents: the handshake of a
 * standalone (hello, isMaster), the ones every shell and driver sends at startup (ping,
 * buildInfo, getParameter, getLog, endSessions, connectionStatus, hostInfo, listCommands,
 * replSetGetStatus), and databases and collections (listDatabases, listCollections,
 * create, drop, dropDatabase, dbStats, collStats). The store does the work; the figures of
 * the stats are fs/paths/stats.c's, as the mount's .stats files show them.
 */
#include "wire.h"
#include "fs_int.h"
#include "query.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool (*wire_rs_hello)(bson_t *reply);
int (*wire_rs_command)(struct wire_ctx *c, bson_t *reply);

int wire_cmd_hello(struct wire_ctx *c, bson_t *reply)
{
	bool hello_ok = false, writable = true;
	bson_t set = BSON_INITIALIZER;

	wire_arg_bool(c, "helloOk", &hello_ok);
	if (hello_ok)
		BSON_APPEND_BOOL(reply, "helloOk", true);
	if (wire_rs_hello)
		writable = wire_rs_hello(&set);
	BSON_APPEND_BOOL(reply, strcmp(c->name, "hello") ? "ismaster" : "isWritablePrimary",
			 writable);
	bson_concat(reply, &set);
	bson_destroy(&set);
	BSON_APPEND_INT32(reply, "maxBsonObjectSize", WIRE_MAX_BSON);
	BSON_APPEND_INT32(reply, "maxMessageSizeBytes", WIRE_MAX_MSG);
	BSON_APPEND_INT32(reply, "maxWriteBatchSize", WIRE_MAX_WRITE_BATCH);
	BSON_APPEND_DATE_TIME(reply, "localTime", now_ms());
	BSON_APPEND_INT32(reply, "logicalSessionTimeoutMinutes", 30);
	BSON_APPEND_INT32(reply, "connectionId", (int32_t)c->conn_id);
	BSON_APPEND_INT32(reply, "minWireVersion", 0);
	BSON_APPEND_INT32(reply, "maxWireVersion", 21);
	BSON_APPEND_BOOL(reply, "readOnly", false);
	wire_auth_hello(c, reply);
	return 0;
}

int wire_cmd_ping(struct wire_ctx *c, bson_t *reply)
{
	(void)c;
	(void)reply;
	return 0;
}

int wire_cmd_build_info(struct wire_ctx *c, bson_t *reply)
{
	bson_t arr;

	(void)c;
	BSON_APPEND_UTF8(reply, "version", "7.0.0");
	BSON_APPEND_UTF8(reply, "gitVersion", "docfs-0.1.0");
	BSON_APPEND_ARRAY_BEGIN(reply, "versionArray", &arr);
	BSON_APPEND_INT32(&arr, "0", 7);
	BSON_APPEND_INT32(&arr, "1", 0);
	BSON_APPEND_INT32(&arr, "2", 0);
	BSON_APPEND_INT32(&arr, "3", 0);
	bson_append_array_end(reply, &arr);
	BSON_APPEND_INT32(reply, "bits", (int32_t)(sizeof(void *) * 8));
	BSON_APPEND_BOOL(reply, "debug", false);
	BSON_APPEND_INT32(reply, "maxBsonObjectSize", WIRE_MAX_BSON);
	BSON_APPEND_ARRAY_BEGIN(reply, "storageEngines", &arr);
	BSON_APPEND_UTF8(&arr, "0", "docfs");
	bson_append_array_end(reply, &arr);
	BSON_APPEND_ARRAY_BEGIN(reply, "modules", &arr);
	bson_append_array_end(reply, &arr);
	return 0;
}

int wire_cmd_get_parameter(struct wire_ctx *c, bson_t *reply)
{
	bson_iter_t it;
	bool all = false, fcv = false;

	if (bson_iter_init(&it, c->cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it) &&
	    !strcmp(bson_iter_utf8(&it, NULL), "*"))
		all = true;
	if (bson_iter_init_find(&it, c->cmd, "featureCompatibilityVersion"))
		fcv = true;
	if (!all && !fcv)
		return wire_fail(c, 72, "InvalidOptions", "no option found to get");
	{
		bson_t v;

		BSON_APPEND_DOCUMENT_BEGIN(reply, "featureCompatibilityVersion", &v);
		BSON_APPEND_UTF8(&v, "version", "7.0");
		bson_append_document_end(reply, &v);
	}
	return 0;
}

int wire_cmd_get_log(struct wire_ctx *c, bson_t *reply)
{
	bson_iter_t it;
	bson_t arr;
	const char *which;

	if (!bson_iter_init_find(&it, c->cmd, c->name) || !BSON_ITER_HOLDS_UTF8(&it))
		return wire_fail(c, 14, "TypeMismatch",
				 "Argument to getLog must be of type String");
	which = bson_iter_utf8(&it, NULL);
	if (!strcmp(which, "*")) {
		BSON_APPEND_ARRAY_BEGIN(reply, "names", &arr);
		BSON_APPEND_UTF8(&arr, "0", "global");
		BSON_APPEND_UTF8(&arr, "1", "startupWarnings");
		bson_append_array_end(reply, &arr);
		return 0;
	}
	if (strcmp(which, "startupWarnings") && strcmp(which, "global"))
		return wire_fail(c, 96, "OperationFailed", "no RamLog named '%s'", which);
	/* docfs keeps no log in memory here: the mount's log file and /.docfs/errors hold it */
	BSON_APPEND_INT32(reply, "totalLinesWritten", 0);
	BSON_APPEND_ARRAY_BEGIN(reply, "log", &arr);
	bson_append_array_end(reply, &arr);
	return 0;
}

/* Ends each session {id: UUID} of an array field: its cursors, its entry in session.c. */
static void end_sessions_of(const bson_t *cmd, const char *key)
{
	bson_iter_t it, arr;

	if (!bson_iter_init_find(&it, cmd, key) || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr))
		return;
	while (bson_iter_next(&arr)) {
		const uint8_t *data;
		uint32_t len;
		bson_t one;

		if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
			continue;
		bson_iter_document(&arr, &len, &data);
		if (bson_init_static(&one, data, len)) {
			wire_cursor_kill_session(&one);
			wire_session_end(&one);
		}
	}
}

int wire_cmd_end_sessions(struct wire_ctx *c, bson_t *reply)
{
	(void)reply;
	end_sessions_of(c->cmd, c->name);
	return 0;
}

int wire_cmd_connection_status(struct wire_ctx *c, bson_t *reply)
{
	bson_t info;

	BSON_APPEND_DOCUMENT_BEGIN(reply, "authInfo", &info);
	wire_auth_status(c, &info);
	bson_append_document_end(reply, &info);
	return 0;
}

int wire_cmd_host_info(struct wire_ctx *c, bson_t *reply)
{
	struct utsname u;
	char host[256] = "localhost";
	bson_t sys, os, extra;
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

	(void)c;
	if (uname(&u) != 0)
		memset(&u, 0, sizeof(u));
	gethostname(host, sizeof(host) - 1);
	BSON_APPEND_DOCUMENT_BEGIN(reply, "system", &sys);
	BSON_APPEND_DATE_TIME(&sys, "currentTime", now_ms());
	BSON_APPEND_UTF8(&sys, "hostname", host);
	BSON_APPEND_INT32(&sys, "cpuAddrSize", (int32_t)(sizeof(void *) * 8));
	BSON_APPEND_INT64(&sys, "memSizeMB",
			  pages > 0 && psize > 0 ? (int64_t)pages * psize / (1024 * 1024) : 0);
	BSON_APPEND_INT32(&sys, "numCores", (int32_t)sysconf(_SC_NPROCESSORS_ONLN));
	BSON_APPEND_UTF8(&sys, "cpuArch", u.machine);
	BSON_APPEND_BOOL(&sys, "numaEnabled", false);
	bson_append_document_end(reply, &sys);
	BSON_APPEND_DOCUMENT_BEGIN(reply, "os", &os);
	BSON_APPEND_UTF8(&os, "type", u.sysname[0] ? u.sysname : "Linux");
	BSON_APPEND_UTF8(&os, "name", u.sysname);
	BSON_APPEND_UTF8(&os, "version", u.release);
	bson_append_document_end(reply, &os);
	BSON_APPEND_DOCUMENT_BEGIN(reply, "extra", &extra);
	BSON_APPEND_UTF8(&extra, "versionString", u.version);
	bson_append_document_end(reply, &extra);
	return 0;
}

int wire_cmd_list_commands(struct wire_ctx *c, bson_t *reply)
{
	bson_t cmds;

	(void)c;
	BSON_APPEND_DOCUMENT_BEGIN(reply, "commands", &cmds);
	wire_command_list(&cmds);
	bson_append_document_end(reply, &cmds);
	return 0;
}

int wire_cmd_repl_status(struct wire_ctx *c, bson_t *reply)
{
	if (wire_rs_command)
		return wire_rs_command(c, reply);
	return wire_fail(c, 76, "NoReplicationEnabled", "not running with --replSet");
}

/* ---- databases ----------------------------------------------------------------------- */

struct db_list {
	struct wire_ctx *c;
	bson_t *arr;
	int n;
	bool name_only;
	struct query_expr *filter; /* NULL: every database */
	int64_t total;
};

static int coll_counter(void *ctx, const struct store_coll *co)
{
	(void)co;
	(*(int *)ctx)++;
	return 0;
}

static int db_one(void *ctx, const char *name)
{
	struct db_list *l = ctx;
	struct dfs_err err = {0};
	struct store_db *db;
	struct store_txn *t;
	int64_t file = 0, used, total;
	int ncoll = 0;
	char key[16];
	bson_t doc = BSON_INITIALIZER;

	if (!wire_auth_db_visible(l->c, name))
		return 0; /* a database the user has no role on */
	if (store_db_get(l->c->store, name, false, &db, &err))
		return 0; /* dropped meanwhile */
	BSON_APPEND_UTF8(&doc, "name", name);
	if (!l->name_only) {
		if (store_db_usage(db, &file, &used, &total, &err))
			file = 0;
		if (!store_txn_begin(db, false, &t, &err)) {
			store_coll_list(t, coll_counter, &ncoll, &err);
			store_txn_abort(t);
		}
		BSON_APPEND_INT64(&doc, "sizeOnDisk", file);
		BSON_APPEND_BOOL(&doc, "empty", ncoll == 0);
	}
	if (!l->filter || query_filter_match(l->filter, &doc, NULL)) {
		snprintf(key, sizeof(key), "%d", l->n++);
		BSON_APPEND_DOCUMENT(l->arr, key, &doc);
		l->total += file;
	}
	bson_destroy(&doc);
	return 0;
}

int wire_cmd_list_databases(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct db_list l = {.c = c};
	bson_t arr, filter;
	int rc;

	wire_arg_bool(c, "nameOnly", &l.name_only);
	if ((rc = wire_arg_doc(c, "filter", &filter)) > 1)
		return rc;
	if (rc == 0 && query_filter_parse(&filter, &l.filter, &err))
		return wire_fail_dfs(c, &err);
	BSON_APPEND_ARRAY_BEGIN(reply, "databases", &arr);
	l.arr = &arr;
	rc = store_db_list(c->store, db_one, &l, &err);
	bson_append_array_end(reply, &arr);
	query_expr_free(l.filter);
	if (rc)
		return wire_fail_dfs(c, &err);
	if (!l.name_only) {
		BSON_APPEND_INT64(reply, "totalSize", l.total);
		BSON_APPEND_INT64(reply, "totalSizeMb", l.total / (1024 * 1024));
	}
	return 0;
}

/* ---- collections --------------------------------------------------------------------- */

/* MongoDB's collection options of co: {} or {capped: true, size, max}. */
static void coll_options(const struct store_coll *co, bson_t *out)
{
	if (!co->capped)
		return;
	BSON_APPEND_BOOL(out, "capped", true);
	BSON_APPEND_INT64(out, "size", co->cap_size);
	if (co->cap_max)
		BSON_APPEND_INT64(out, "max", co->cap_max);
}

struct coll_list {
	struct wire_docs docs;
	bool name_only;
	struct query_expr *filter;
	struct store_txn *t; /* Borrowed: the listing's transaction */
};

static int coll_one(void *ctx, const struct store_coll *co)
{
	struct coll_list *l = ctx;
	bson_t *doc = bson_new(), sub, ix, key;

	BSON_APPEND_UTF8(doc, "name", co->name);
	BSON_APPEND_UTF8(doc, "type", "collection");
	if (!l->name_only) {
		BSON_APPEND_DOCUMENT_BEGIN(doc, "options", &sub);
		coll_options(co, &sub);
		if (l->t)
			fs_options_validation(l->t, co->id, &sub, NULL);
		bson_append_document_end(doc, &sub);
		BSON_APPEND_DOCUMENT_BEGIN(doc, "info", &sub);
		BSON_APPEND_BOOL(&sub, "readOnly", false);
		bson_append_document_end(doc, &sub);
		BSON_APPEND_DOCUMENT_BEGIN(doc, "idIndex", &ix);
		BSON_APPEND_INT32(&ix, "v", 2);
		BSON_APPEND_DOCUMENT_BEGIN(&ix, "key", &key);
		BSON_APPEND_INT32(&key, "_id", 1);
		bson_append_document_end(&ix, &key);
		BSON_APPEND_UTF8(&ix, "name", "_id_");
		bson_append_document_end(doc, &ix);
	}
	if (l->filter && !query_filter_match(l->filter, doc, NULL)) {
		bson_destroy(doc);
		return 0;
	}
	wire_docs_take(&l->docs, doc);
	return 0;
}

int wire_cmd_list_collections(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct coll_list l = {0};
	struct store_db *db;
	struct store_txn *t;
	struct wire_source src = {wire_docs_next, &l.docs};
	char ns[2 * DFS_MAX_NS_NAME + 32];
	bson_t filter, cur;
	int64_t batch = -1;
	int rc;

	wire_arg_bool(c, "nameOnly", &l.name_only);
	if ((rc = wire_arg_doc(c, "filter", &filter)) > 1)
		return rc;
	if (rc == 0 && query_filter_parse(&filter, &l.filter, &err))
		return wire_fail_dfs(c, &err);
	if ((rc = wire_arg_doc(c, "cursor", &cur)) > 1)
		goto done;
	if (rc == 0) {
		bson_iter_t it;

		if (bson_iter_init_find(&it, &cur, "batchSize") && BSON_ITER_HOLDS_NUMBER(&it))
			batch = bson_iter_as_int64(&it);
	}
	rc = wire_db(c, false, &db);
	if (rc == 0) {
		if ((rc = store_txn_begin(db, false, &t, &err))) {
			rc = wire_fail_dfs(c, &err);
			goto done;
		}
		l.t = t;
		rc = store_coll_list(t, coll_one, &l, &err);
		store_txn_abort(t);
		if (rc) {
			rc = wire_fail_dfs(c, &err);
			goto done;
		}
	} else if (rc != DFS_ENOENT) {
		goto done;
	}
	snprintf(ns, sizeof(ns), "%s.$cmd.listCollections", c->db);
	if ((rc = wire_cursor_reply(c, ns, &src, batch, false, NULL, reply, &err)))
		rc = wire_fail_dfs(c, &err);
done:
	query_expr_free(l.filter);
	wire_docs_release(&l.docs);
	return rc;
}

/* Options of create that docfs has no such thing for: refused by name, not ignored. */
static const char *const create_refused[] = {
	"viewOn",
	"pipeline",
	"timeseries",
	"collation",
	"clusteredIndex",
	"changeStreamPreAndPostImages",
	"expireAfterSeconds",
	"encryptedFields",
};

int wire_cmd_create(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	struct store_db *db;
	struct store_txn *t;
	struct store_coll co;
	struct fs_validation v = {.level = -1, .action = -1};
	bool capped = false, mine;
	int64_t size = 0, max = 0;
	bson_iter_t it;
	int rc;

	(void)reply;
	if ((rc = wire_arg_coll(c, name, sizeof(name))))
		return rc;
	for (size_t i = 0; i < sizeof(create_refused) / sizeof(*create_refused); i++)
		if (bson_has_field(c->cmd, create_refused[i]))
			return wire_fail(c, 238, "NotImplemented",
					 "create: option '%s' is not supported by docfs",
					 create_refused[i]);
	if (bson_iter_init(&it, c->cmd))
		while (bson_iter_next(&it))
			if (fs_validation_opt(&it, &v, &mine, &err))
				return wire_fail_dfs(c, &err);
	wire_arg_bool(c, "capped", &capped);
	if ((rc = wire_arg_int(c, "size", &size)) > 1 || (rc = wire_arg_int(c, "max", &max)) > 1)
		return rc;
	if (capped && size <= 0)
		return wire_fail(c, 72, "InvalidOptions",
				 "the 'size' field is required when 'capped' is true");
	if ((rc = wire_db(c, true, &db)))
		return rc;
	if ((rc = store_txn_begin(db, true, &t, &err)))
		return wire_fail_dfs(c, &err);
	rc = store_coll_create(t, name, 0755, getuid(), getgid(), &co, &err);
	if (rc == DFS_EEXIST) {
		store_txn_abort(t);
		return wire_fail(c, 48, "NamespaceExists", "Collection %s.%s already exists.",
				 c->db, name);
	}
	if (!rc && capped)
		rc = store_coll_set_capped(t, co.id, size, max, &err);
	if (!rc) /* validator, validationLevel, validationAction (store/validator.c) */
		rc = fs_validation_apply(t, co.id, &v, &err);
	if (rc) {
		store_txn_abort(t);
		return wire_fail_dfs(c, &err);
	}
	if (store_txn_commit(t, &err))
		return wire_fail_dfs(c, &err);
	return 0;
}

/* Fields of collMod MongoDB 7.0 has that docfs refuses by name (238), and the generic
 * arguments every command may carry. */
static const char *const coll_mod_refused[] = {"index",
					       "viewOn",
					       "pipeline",
					       "expireAfterSeconds",
					       "timeseries",
					       "cappedSize",
					       "cappedMax",
					       "dryRun",
					       "changeStreamPreAndPostImages",
					       "clusteredIndex",
					       "recordPreImages",
					       NULL};
static const char *const generic_args[] = {"$db",
					   "lsid",
					   "$clusterTime",
					   "writeConcern",
					   "comment",
					   "maxTimeMS",
					   "$readPreference",
					   "apiVersion",
					   "apiStrict",
					   "apiDeprecationErrors",
					   "txnNumber",
					   "autocommit",
					   "startTransaction",
					   "readConcern",
					   NULL};

static bool listed(const char *const *list, const char *k)
{
	for (size_t i = 0; list[i]; i++)
		if (!strcmp(list[i], k))
			return true;
	return false;
}

/* collMod: a collection's validator, validationLevel and validationAction (the store
 * keeps them in its options, store/validator.c); MongoDB's other changes are refused by
 * name (238), unknown fields 40415; the reply is {ok: 1}. */
int wire_cmd_coll_mod(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	struct store_db *db;
	struct store_txn *t;
	struct store_coll co;
	struct fs_validation v = {.level = -1, .action = -1};
	bson_iter_t it;
	bool mine;
	int rc;

	(void)reply;
	if ((rc = wire_arg_coll(c, name, sizeof(name))))
		return rc;
	bson_iter_init(&it, c->cmd);
	bson_iter_next(&it); /* the command's own field */
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (fs_validation_opt(&it, &v, &mine, &err))
			return wire_fail_dfs(c, &err);
		if (mine || listed(generic_args, k))
			continue;
		if (listed(coll_mod_refused, k))
			return wire_fail(c, 238, "NotImplemented",
					 "collMod: option '%s' is not supported by docfs", k);
		return wire_fail(c, 40415, "Location40415",
				 "BSON field 'collMod.%s' is an unknown field.", k);
	}
	if ((rc = wire_db(c, false, &db)) == DFS_ENOENT)
		return wire_fail(c, 26, "NamespaceNotFound", "ns does not exist: %s.%s", c->db,
				 name);
	if (rc)
		return rc;
	if ((rc = store_txn_begin(db, true, &t, &err)))
		return wire_fail_dfs(c, &err);
	rc = store_coll_find(t, name, &co, &err);
	if (rc == DFS_ENOENT) {
		store_txn_abort(t);
		return wire_fail(c, 26, "NamespaceNotFound", "ns does not exist: %s.%s", c->db,
				 name);
	}
	if (!rc)
		rc = fs_validation_apply(t, co.id, &v, &err);
	if (rc) {
		store_txn_abort(t);
		return wire_fail_dfs(c, &err);
	}
	return store_txn_commit(t, &err) ? wire_fail_dfs(c, &err) : 0;
}

int wire_cmd_convert_to_capped(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	struct store_db *db;
	struct store_txn *t;
	struct store_coll co;
	int64_t size = 0, max = 0;
	int rc;

	(void)reply;
	if ((rc = wire_arg_coll(c, name, sizeof(name))))
		return rc;
	if ((rc = wire_arg_int(c, "size", &size)) > 1 || (rc = wire_arg_int(c, "max", &max)) > 1)
		return rc;
	if (size <= 0)
		return wire_fail(c, 72, "InvalidOptions",
				 "convertToCapped needs a positive 'size'");
	if ((rc = wire_db(c, false, &db)) == DFS_ENOENT)
		return wire_fail(c, 26, "NamespaceNotFound", "database %s does not exist", c->db);
	if (rc)
		return rc;
	if ((rc = store_txn_begin(db, true, &t, &err)))
		return wire_fail_dfs(c, &err);
	rc = store_coll_find(t, name, &co, &err);
	if (rc == DFS_ENOENT) {
		store_txn_abort(t);
		return wire_fail(c, 26, "NamespaceNotFound",
				 "source collection %s.%s does not exist", c->db, name);
	}
	/* the store removes what is past the new limits, oldest first (capped.c) */
	if (!rc)
		rc = store_coll_set_capped(t, co.id, size, max, &err);
	if (rc) {
		store_txn_abort(t);
		return wire_fail_dfs(c, &err);
	}
	return store_txn_commit(t, &err) ? wire_fail_dfs(c, &err) : 0;
}

int wire_cmd_drop(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	struct store_db *db;
	struct store_txn *t;
	struct store_coll co;
	struct store_index *ixs = NULL;
	int nix = 0, rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))))
		return rc;
	if ((rc = wire_db(c, false, &db)) == DFS_ENOENT)
		return 0; /* MongoDB 7.0: dropping what does not exist succeeds */
	if (rc)
		return rc;
	if ((rc = store_txn_begin(db, true, &t, &err)))
		return wire_fail_dfs(c, &err);
	rc = store_coll_find(t, name, &co, &err);
	if (rc == DFS_ENOENT) {
		store_txn_abort(t);
		return 0;
	}
	if (!rc && !(rc = store_index_list(t, co.id, &ixs, &nix, &err)))
		store_index_list_free(ixs, nix);
	if (!rc)
		rc = store_coll_drop(t, co.id, &err);
	if (rc) {
		store_txn_abort(t);
		return wire_fail_dfs(c, &err);
	}
	if (store_txn_commit(t, &err))
		return wire_fail_dfs(c, &err);
	wire_append_count(reply, "nIndexesWas", nix);
	{
		char ns[2 * DFS_MAX_NS_NAME + 2];

		snprintf(ns, sizeof(ns), "%s.%s", c->db, name);
		BSON_APPEND_UTF8(reply, "ns", ns);
	}
	return 0;
}

static int coll_id_add(void *ctx, const struct store_coll *co)
{
	struct wire_docs *ids = ctx;
	bson_t *one = bson_new();

	BSON_APPEND_INT64(one, "id", co->id);
	wire_docs_take(ids, one);
	return 0;
}

int wire_cmd_drop_database(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct wire_docs ids = {0};
	struct store_db *db;
	struct store_txn *t;
	int rc;

	if ((rc = wire_db(c, false, &db)) == DFS_ENOENT)
		return 0;
	if (rc)
		return rc;
	if ((rc = store_txn_begin(db, true, &t, &err)))
		return wire_fail_dfs(c, &err);
	rc = store_coll_list(t, coll_id_add, &ids, &err);
	for (size_t i = 0; !rc && i < ids.n; i++) {
		bson_iter_t it;

		if (bson_iter_init_find(&it, ids.d[i], "id"))
			rc = store_coll_drop(t, bson_iter_int64(&it), &err);
	}
	wire_docs_release(&ids);
	if (rc) {
		store_txn_abort(t);
		return wire_fail_dfs(c, &err);
	}
	if (store_txn_commit(t, &err))
		return wire_fail_dfs(c, &err);
	rc = store_db_drop_db(db, &err);
	if (rc && rc != DFS_ENOENT)
		return wire_fail_dfs(c, &err);
	BSON_APPEND_UTF8(reply, "dropped", c->db);
	return 0;
}

/* scale of the stats commands: 0 or a wire_fail code. */
static int stats_scale(struct wire_ctx *c, int64_t *scale)
{
	int rc;

	*scale = 1;
	if ((rc = wire_arg_int(c, "scale", scale)) > 1)
		return rc;
	if (*scale < 1)
		return wire_fail(c, 2, "BadValue", "Scale factor must be greater than zero");
	return 0;
}

int wire_cmd_db_stats(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct store_db *db;
	int64_t scale;
	int rc;

	if ((rc = stats_scale(c, &scale)))
		return rc;
	if ((rc = wire_db(c, false, &db)) == DFS_ENOENT) {
		static const char *const zero[] = {"collections", "views",     "objects",
						   "avgObjSize",  "dataSize",  "storageSize",
						   "indexes",	  "indexSize", "totalSize"};

		BSON_APPEND_UTF8(reply, "db", c->db);
		for (size_t i = 0; i < sizeof(zero) / sizeof(*zero); i++)
			BSON_APPEND_INT32(reply, zero[i], 0);
		wire_append_count(reply, "scaleFactor", scale);
		return 0;
	}
	if (rc)
		return rc;
	if (fs_stats_doc(db, 0, scale, reply, &err))
		return wire_fail_dfs(c, &err);
	return 0;
}

/* dbHash: query_dbhash's document (query/dbhash.c says what is hashed); a database that
 * does not exist hashes as one without collections. */
int wire_cmd_db_hash(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct store_db *db = NULL;
	char host[256] = "localhost";
	bson_t view, *colls = NULL;
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;
	int rc;

	if (bson_iter_init_find(&it, c->cmd, "collections") && BSON_ITER_HOLDS_ARRAY(&it)) {
		bson_iter_array(&it, &len, &data);
		if (!bson_init_static(&view, data, len))
			return wire_fail(c, 2, "BadValue", "invalid array under 'collections'");
		colls = &view;
	}
	if ((rc = wire_db(c, false, &db)) == DFS_ENOENT)
		db = NULL;
	else if (rc)
		return rc;
	gethostname(host, sizeof(host) - 1);
	if (query_dbhash(db, host, colls, reply, &err))
		return wire_fail_dfs(c, &err);
	return 0;
}

int wire_cmd_coll_stats(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	struct store_db *db;
	struct store_txn *t;
	struct store_coll co;
	int64_t scale;
	int rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))) || (rc = stats_scale(c, &scale)))
		return rc;
	if ((rc = wire_db(c, false, &db)) == DFS_ENOENT)
		goto missing;
	if (rc)
		return rc;
	if ((rc = store_txn_begin(db, false, &t, &err)))
		return wire_fail_dfs(c, &err);
	rc = store_coll_find(t, name, &co, &err);
	store_txn_abort(t);
	if (rc == DFS_ENOENT)
		goto missing;
	if (rc)
		return wire_fail_dfs(c, &err);
	if (fs_stats_doc(db, co.id, scale, reply, &err))
		return wire_fail_dfs(c, &err);
	return 0;
missing:
	return wire_fail(c, 26, "NamespaceNotFound", "Collection [%s.%s] not found.", c->db, name);
}
