/*
 * dispatch.c - a request to its command handler and back: the command's name (its first
 * key) looked up in one table, the generic arguments every command may carry (lsid, $db,
 * $readPreference, writeConcern, readConcern, comment, maxTimeMS, apiVersion, $clusterTime:
 * accepted, and maxTimeMS and a write command's writeConcern acted on: checked before the
 * write, waited for after it on a replica set member, fs/replset/member.c note 8), the operation
 * registered in currentOp for the commands that run the engine, and the reply: the handler's
 * document with "ok": 1, or MongoDB's error shape {ok: 0, errmsg, code, codeName}. Before a command
 * runs, auth.c says whether the connection may run it. Also the small argument readers the handlers
 * share. What each command does is in cmd_*.c; the bytes are frame.c's.
 */
#include "wire.h"
#include "fs_int.h"
#include "query.h"
#include "replset/replset.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum {
	OP_NONE = -1, /* no currentOp entry: the handshake and the like, or one of its own */
};

struct command {
	const char *name;
	wire_handler fn;
	int op;		 /* enum fs_op_kind of its currentOp entry, or OP_NONE */
	bool handshake;	 /* answered over OP_QUERY too */
	bool admin_only; /* listCommands' adminOnly */
	const char *help;
};

static const struct command commands[] = {
	{"hello", wire_cmd_hello, OP_NONE, true, false, "the handshake"},
	{"isMaster", wire_cmd_hello, OP_NONE, true, false, "the legacy handshake"},
	{"ismaster", wire_cmd_hello, OP_NONE, true, false, "the legacy handshake"},
	{"ping", wire_cmd_ping, OP_NONE, false, false, "a no-op"},
	{"buildInfo", wire_cmd_build_info, OP_NONE, false, false, "the server's version"},
	{"buildinfo", wire_cmd_build_info, OP_NONE, false, false, "the server's version"},
	{"getParameter", wire_cmd_get_parameter, OP_NONE, false, true,
	 "featureCompatibilityVersion"},
	{"getLog", wire_cmd_get_log, OP_NONE, false, true, "startupWarnings (none)"},
	{"endSessions", wire_cmd_end_sessions, OP_NONE, false, false,
	 "ends sessions, closing their cursors"},
	{"killSessions", wire_cmd_end_sessions, OP_NONE, false, false,
	 "ends sessions, closing their cursors"},
	{"connectionStatus", wire_cmd_connection_status, OP_NONE, false, false,
	 "who the connection is authenticated as"},
	{"hostInfo", wire_cmd_host_info, OP_NONE, false, false, "the machine"},
	{"listCommands", wire_cmd_list_commands, OP_NONE, false, false, "this list"},
	{"replSetGetStatus", wire_cmd_repl_status, OP_NONE, false, true,
	 "a member's rs.status() (a standalone: NoReplicationEnabled)"},
	{"replSetGetConfig", wire_cmd_repl_status, OP_NONE, false, true,
	 "a member's rs.conf() (a standalone: NoReplicationEnabled)"},
	{"replSetStepDown", wire_cmd_repl_status, OP_NONE, false, true,
	 "the primary hands over to a caught-up secondary (a standalone: NoReplicationEnabled)"},
	{"replSetFreeze", wire_cmd_repl_status, OP_NONE, false, true,
	 "a secondary does not stand for election for a while (a standalone: "
	 "NoReplicationEnabled)"},
	{"listDatabases", wire_cmd_list_databases, FS_OP_COMMAND, false, true, "the databases"},
	{"listCollections", wire_cmd_list_collections, FS_OP_COMMAND, false, false,
	 "the collections of a database"},
	{"create", wire_cmd_create, FS_OP_COMMAND, false, false,
	 "creates a collection (capped, size, max)"},
	{"drop", wire_cmd_drop, FS_OP_COMMAND, false, false, "drops a collection"},
	{"collMod", wire_cmd_coll_mod, FS_OP_COMMAND, false, false,
	 "changes a collection's validator, validationLevel, validationAction"},
	{"convertToCapped", wire_cmd_convert_to_capped, FS_OP_COMMAND, false, false,
	 "caps a collection (size, max), removing the oldest documents past them"},
	{"dropDatabase", wire_cmd_drop_database, FS_OP_COMMAND, false, false, "drops a database"},
	{"dbStats", wire_cmd_db_stats, FS_OP_COMMAND, false, false, "a database's figures"},
	{"collStats", wire_cmd_coll_stats, FS_OP_COMMAND, false, false, "a collection's figures"},
	{"dbHash", wire_cmd_db_hash, FS_OP_COMMAND, false, false,
	 "an MD5 of each collection's documents in _id order, and of the database"},
	{"dbhash", wire_cmd_db_hash, FS_OP_COMMAND, false, false,
	 "an MD5 of each collection's documents in _id order, and of the database"},
	{"insert", wire_cmd_insert, FS_OP_INSERT, false, false, "inserts documents"},
	{"update", wire_cmd_update, FS_OP_UPDATE, false, false, "updates documents"},
	{"delete", wire_cmd_delete, FS_OP_REMOVE, false, false, "deletes documents"},
	{"findAndModify", wire_cmd_find_and_modify, FS_OP_COMMAND, false, false,
	 "updates or deletes one document and returns it"},
	{"findandmodify", wire_cmd_find_and_modify, FS_OP_COMMAND, false, false,
	 "updates or deletes one document and returns it"},
	{"find", wire_cmd_find, FS_OP_QUERY, false, false, "a query"},
	{"getMore", wire_cmd_get_more, FS_OP_GETMORE, false, false, "the next batch of a cursor"},
	{"killCursors", wire_cmd_kill_cursors, OP_NONE, false, false, "closes cursors"},
	{"count", wire_cmd_count, FS_OP_COMMAND, false, false, "counts documents"},
	{"distinct", wire_cmd_distinct, FS_OP_COMMAND, false, false, "the distinct values"},
	{"aggregate", wire_cmd_aggregate, FS_OP_COMMAND, false, false, "a pipeline"},
	{"explain", wire_cmd_explain, FS_OP_COMMAND, false, false,
	 "the plan of find, aggregate, count or distinct"},
	/* fs_index_create registers the build itself (with its progress) */
	{"createIndexes", wire_cmd_create_indexes, OP_NONE, false, false, "builds indexes"},
	{"listIndexes", wire_cmd_list_indexes, FS_OP_COMMAND, false, false,
	 "the indexes of a collection"},
	{"dropIndexes", wire_cmd_drop_indexes, FS_OP_COMMAND, false, false, "drops indexes"},
	{"deleteIndexes", wire_cmd_drop_indexes, FS_OP_COMMAND, false, false, "drops indexes"},
	{"serverStatus", wire_cmd_server_status, OP_NONE, false, false,
	 "the counters of /.docfs/serverStatus"},
	{"top", wire_cmd_top, OP_NONE, false, true, "time per collection"},
	{"currentOp", wire_cmd_current_op, OP_NONE, false, true,
	 "the running operations (with a filter)"},
	{"killOp", wire_cmd_kill_op, OP_NONE, false, true, "asks an operation to stop"},
	{"profile", wire_cmd_profile, OP_NONE, false, false,
	 "the profiler's level, slowms, sampleRate, filter"},
	{"renameCollection", wire_cmd_rename_collection, FS_OP_COMMAND, false, true,
	 "renames a collection within its database"},
	{"validate", wire_cmd_validate, FS_OP_COMMAND, false, false,
	 "docfs check's invariants (of the whole store)"},
	{"saslStart", wire_cmd_sasl_start, OP_NONE, false, false,
	 "starts authenticating (SCRAM-SHA-256)"},
	{"saslContinue", wire_cmd_sasl_continue, OP_NONE, false, false, "goes on authenticating"},
	{"logout", wire_cmd_logout, OP_NONE, false, false, "ends the connection's authentication"},
	{"createUser", wire_cmd_create_user, OP_NONE, false, false,
	 "creates a user (pwd, roles, customData)"},
	{"updateUser", wire_cmd_update_user, OP_NONE, false, false,
	 "changes a user's password, roles or customData"},
	{"dropUser", wire_cmd_drop_user, OP_NONE, false, false, "drops a user"},
	{"usersInfo", wire_cmd_users_info, OP_NONE, false, false, "the users"},
};

/* MongoDB commands that docfs does not have yet: 238 NotImplemented (naming them), not
 * 59, so a client tells "not here yet" from a typo. */
static const char *const not_yet[] = {
	"compact",
	"mapReduce",
	"bulkWrite",
	"createRole",
	"authenticate",
	"getnonce",
	"startSession",
	"refreshSessions",
	"commitTransaction",
	"abortTransaction",
	"shutdown",
	"fsync",
	"setParameter",
	"setFeatureCompatibilityVersion",
	"dataSize",
	"cloneCollectionAsCapped",
	"reIndex",
	"shardCollection",
	"enableSharding",
	"addShard",
	"listShards",
	"balancerStatus",
	"getShardMap",
	"checkShardingIndex",
	"planCacheClear",
	"planCacheClearFilters",
	"planCacheListFilters",
	"filemd5",
	"getLastError",
	"resetError",
	"whatsmyuri",
	"lockInfo",
	"getCmdLineOpts",
	"aggregateClusterRole",
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

int (*wire_route_hook)(struct wire_ctx *c, bson_t *reply);

static const struct command *command_find(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static bool not_yet_has(const char *name)
{
	for (size_t i = 0; i < sizeof(not_yet) / sizeof(*not_yet); i++)
		if (!strcmp(not_yet[i], name))
			return true;
	return false;
}

bool wire_command_known(const char *name)
{
	return command_find(name) != NULL;
}

void wire_command_list(bson_t *out)
{
	for (size_t i = 0; i < NCOMMANDS; i++) {
		bson_t one;

		BSON_APPEND_DOCUMENT_BEGIN(out, commands[i].name, &one);
		BSON_APPEND_UTF8(&one, "help", commands[i].help);
		BSON_APPEND_BOOL(&one, "requiresAuth", wire_auth_needed(commands[i].name));
		BSON_APPEND_BOOL(&one, "secondaryOk", true);
		BSON_APPEND_BOOL(&one, "adminOnly", commands[i].admin_only);
		bson_append_document_end(out, &one);
	}
}

int wire_fail(struct wire_ctx *c, int code, const char *code_name, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	va_end(ap);
	c->code = code ? code : 1; /* 0 would read as success */
	c->code_name = code ? code_name : "InternalError";
	if (!c->dfs_code)
		c->dfs_code = DFS_EINVAL;
	return c->code;
}

int wire_fail_dfs(struct wire_ctx *c, const struct dfs_err *e)
{
	const char *name;
	int code = query_error_code(e, &name);

	c->dfs_code = e->code ? e->code : DFS_EINVAL;
	return wire_fail(c, code, name, "%s", e->msg[0] ? e->msg : dfs_code_name(e->code));
}

int wire_arg_int(struct wire_ctx *c, const char *key, int64_t *v)
{
	bson_iter_t it;
	double d;

	if (!bson_iter_init_find(&it, c->cmd, key))
		return 1;
	switch (bson_iter_type(&it)) {
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
		*v = bson_iter_as_int64(&it);
		return 0;
	case BSON_TYPE_DOUBLE:
		d = bson_iter_double(&it);
		if (d == d && d >= -9.2e18 && d <= 9.2e18) {
			*v = (int64_t)d;
			return 0;
		}
		break;
	default:
		break;
	}
	return wire_fail(c, 14, "TypeMismatch",
			 "BSON field '%s.%s' is the wrong type '%s', "
			 "expected a number",
			 c->name, key,
			 bson_iter_type(&it) == BSON_TYPE_UTF8 ? "string" : "non-number");
}

int wire_arg_doc(struct wire_ctx *c, const char *key, bson_t *view)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	if (!bson_iter_init_find(&it, c->cmd, key) || BSON_ITER_HOLDS_NULL(&it))
		return 1;
	if (!BSON_ITER_HOLDS_DOCUMENT(&it))
		return wire_fail(c, 14, "TypeMismatch",
				 "BSON field '%s.%s' is the wrong type, expected type 'object'",
				 c->name, key);
	bson_iter_document(&it, &len, &data);
	if (!bson_init_static(view, data, len))
		return wire_fail(c, 2, "BadValue", "invalid document under '%s'", key);
	return 0;
}

int wire_arg_bool(struct wire_ctx *c, const char *key, bool *v)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, c->cmd, key) && !BSON_ITER_HOLDS_NULL(&it))
		*v = bson_iter_as_bool(&it);
	return 0;
}

int wire_arg_coll(struct wire_ctx *c, char *out, size_t cap)
{
	bson_iter_t it;
	struct dfs_err err = {0};

	if (!bson_iter_init(&it, c->cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it))
		return wire_fail(c, 73, "InvalidNamespace",
				 "the collection name of '%s' must be a string", c->name);
	snprintf(out, cap, "%s", bson_iter_utf8(&it, NULL));
	if (strcmp(out, STORE_PROFILE_COLL) != 0 && store_coll_name_check(out, &err))
		return wire_fail(c, 73, "InvalidNamespace",
				 "Invalid namespace specified '%s.%s': %s", c->db, out, err.msg);
	return 0;
}

int wire_db(struct wire_ctx *c, bool create, struct store_db **out)
{
	struct dfs_err err = {0};
	int rc = store_db_get(c->store, c->db, create, out, &err);

	if (rc == DFS_ENOENT && !create)
		return DFS_ENOENT;
	if (rc == DFS_EINVAL || rc == DFS_ENAMETOOLONG)
		return wire_fail(c, 73, "InvalidNamespace", "Invalid database name '%s': %s", c->db,
				 err.msg);
	if (rc)
		return wire_fail_dfs(c, &err);
	return 0;
}

void wire_append_count(bson_t *b, const char *key, int64_t v)
{
	if (v >= INT32_MIN && v <= INT32_MAX)
		BSON_APPEND_INT32(b, key, (int32_t)v);
	else
		BSON_APPEND_INT64(b, key, v);
}

static void error_doc(const struct wire_ctx *c, bson_t *out)
{
	BSON_APPEND_DOUBLE(out, "ok", 0.0);
	BSON_APPEND_UTF8(out, "errmsg", c->errmsg);
	BSON_APPEND_INT32(out, "code", c->code);
	BSON_APPEND_UTF8(out, "codeName", c->code_name ? c->code_name : "UnknownError");
	if (c->err_info)
		bson_concat(out, c->err_info);
}

/* The command of an OP_QUERY: its query, or the document under $query / query. */
static const bson_t *query_command(const struct wire_msg *m, bson_t *view)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	if (bson_iter_init(&it, &m->body) && bson_iter_next(&it) &&
	    (!strcmp(bson_iter_key(&it), "$query") || !strcmp(bson_iter_key(&it), "query")) &&
	    BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &len, &data);
		if (bson_init_static(view, data, len))
			return view;
	}
	return &m->body;
}

/* Runs command cmd of c (name set) into reply; returns the handler's code. */
static int run(struct wire_ctx *c, const struct command *cmd, bson_t *reply)
{
	struct fs_curop op;
	char coll[DFS_MAX_NS_NAME + 1] = "";
	int64_t max_ms = 0;
	int rc;

	if (cmd->op == OP_NONE)
		return cmd->fn(c, reply);
	{
		bson_iter_t it;

		if (bson_iter_init(&it, c->cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
			snprintf(coll, sizeof(coll), "%s", bson_iter_utf8(&it, NULL));
		else if (bson_iter_init_find(&it, c->cmd, "collection") &&
			 BSON_ITER_HOLDS_UTF8(&it)) /* getMore */
			snprintf(coll, sizeof(coll), "%s", bson_iter_utf8(&it, NULL));
	}
	if ((rc = wire_arg_int(c, "maxTimeMS", &max_ms)) > 1)
		return rc;
	if (max_ms < 0)
		return wire_fail(c, 2, "BadValue", "%s must be a non-negative integer",
				 "maxTimeMS");
	fs_curop_begin_ns(&op, cmd->op, c->db, coll, wire_conn_pid(c->conn));
	fs_curop_client(&op, wire_conn_addr(c->conn));
	/* a getMore's maxTimeMS is how long a tailable awaitData cursor waits (cursor.c) */
	fs_curop_describe(c->cmd, cmd->fn == wire_cmd_get_more ? 0 : max_ms);
	{
		bool bypass = false;

		/* insert, update, findAndModify, aggregate's $out/$merge: the store's writes of
		 * this thread skip the collections' validators (store/validator.c note 4) */
		wire_arg_bool(c, "bypassDocumentValidation", &bypass);
		store_thread_bypass_validation(bypass);
	}
	rc = cmd->fn(c, reply);
	store_thread_bypass_validation(false);
	fs_curop_end(&op, rc ? (c->dfs_code ? c->dfs_code : DFS_EINVAL) : 0);
	return rc;
}

/* The commands that write, whose writeConcern is acted on. */
static bool writes(const char *name)
{
	static const char *const w[] = {
		"insert",	 "update",  "delete",	       "findAndModify",	   "findandmodify",
		"create",	 "drop",    "dropDatabase",    "createIndexes",	   "dropIndexes",
		"deleteIndexes", "collMod", "convertToCapped", "renameCollection",
	};

	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		if (!strcmp(name, w[i]))
			return true;
	return false;
}

/* The write concern of c (its writeConcern, or the default) into wc: 0, or a refusal before
 * anything is written (9 FailedToParse, 79, 100, a standalone's 2 BadValue). */
static int wc_before(struct wire_ctx *c, struct rs_wc *wc)
{
	struct dfs_err err = {0};
	struct rs_wc_fail f;
	bson_t view;
	int rc = wire_arg_doc(c, "writeConcern", &view);

	if (rc > 1)
		return rc;
	if (rc == 0 && rs_wc_parse(&view, wc, &err))
		return wire_fail(c, 9, "FailedToParse", "%s", err.msg);
	if (rc == 1)
		rs_wc_default(true, wc);
	if (rs_wc_check(wc, &f))
		return wire_fail(c, f.code, f.code_name, "%s", f.msg);
	return 0;
}

/* After write command c succeeded: waits for wc, and says in reply when it was not met
 * (writeConcernError: the write stays). */
static void wc_after(struct wire_ctx *c, const struct rs_wc *wc, uint64_t before, bson_t *reply)
{
	struct store_db *db;
	struct rs_wc_fail f;

	if (!rs_node_active() || store_db_get(c->store, c->db, false, &db, NULL))
		return; /* a standalone waits for nothing; a dropped database neither */
	if (rs_wc_wait(db, before, wc, &f))
		rs_wc_fail_append(&f, wc, reply);
}

/* The route hook's answer after the authentication check every command passes
 * (WIRE_ROUTE_PASS: the table answers, checking again). */
static int route_checked(struct wire_ctx *c, bson_t *reply)
{
	int rc = wire_auth_check(c);

	if (rc)
		return rc;
	rc = wire_route_hook(c, reply);
	wire_auth_done(c);
	return rc;
}

void wire_dispatch(struct store *s, struct wire_conn *conn, int64_t conn_id,
		   const struct wire_msg *m, int32_t reply_id, struct dfs_buf *out)
{
	struct wire_ctx c = {.store = s, .conn = conn, .conn_id = conn_id, .msg = m};
	const struct command *cmd = NULL;
	bson_t reply = BSON_INITIALIZER, qview;
	bson_iter_t it;
	int rc;

	if (m->h.opcode == WIRE_OP_QUERY) {
		const char *dot = strchr(m->ns, '.');

		c.cmd = query_command(m, &qview);
		c.name =
			bson_iter_init(&it, c.cmd) && bson_iter_next(&it) ? bson_iter_key(&it) : "";
		snprintf(c.db, sizeof(c.db), "%.*s", dot ? (int)(dot - m->ns) : 0, m->ns);
		cmd = command_find(c.name);
		if (!dot || strcmp(dot, ".$cmd") != 0 || !cmd || !cmd->handshake) {
			BSON_APPEND_UTF8(&reply, "$err",
					 "OP_QUERY is no longer supported: only the handshake "
					 "(hello, isMaster) is answered over it; use OP_MSG");
			BSON_APPEND_INT32(&reply, "code", 5739101);
			BSON_APPEND_DOUBLE(&reply, "ok", 0.0);
			wire_reply_op_reply(out, reply_id, m->h.request_id, 2 /* QueryFailure */,
					    &reply);
			bson_destroy(&reply);
			return;
		}
		if (!wire_route_hook || (rc = wire_route_hook(&c, &reply)) == WIRE_ROUTE_PASS)
			rc = run(&c, cmd, &reply);
		if (rc) {
			bson_reinit(&reply);
			error_doc(&c, &reply);
		} else if (!bson_has_field(&reply, "ok")) {
			BSON_APPEND_DOUBLE(&reply, "ok", 1.0);
		}
		wire_reply_op_reply(out, reply_id, m->h.request_id, 0, &reply);
		bson_destroy(&reply);
		if (c.err_info)
			bson_destroy(c.err_info);
		query_collation_free(c.coll);
		return;
	}
	c.cmd = &m->body;
	c.name = bson_iter_init(&it, c.cmd) && bson_iter_next(&it) ? bson_iter_key(&it) : "";
	if (bson_iter_init_find(&it, c.cmd, "$db") && BSON_ITER_HOLDS_UTF8(&it))
		snprintf(c.db, sizeof(c.db), "%s", bson_iter_utf8(&it, NULL));
	if (!c.name[0])
		rc = wire_fail(&c, 59, "CommandNotFound", "no command in the request");
	else if (!c.db[0])
		rc = wire_fail(&c, 40571, "Location40571",
			       "OP_MSG requests require a $db argument");
	else if (wire_route_hook && (rc = route_checked(&c, &reply)) != WIRE_ROUTE_PASS)
		; /* answered by the router (fs/router/wire.c) */
	else if (!(cmd = command_find(c.name)) && not_yet_has(c.name))
		rc = wire_fail(&c, 238, "NotImplemented",
			       "command '%s' is not supported by docfs yet", c.name);
	else if (!cmd)
		rc = wire_fail(&c, 59, "CommandNotFound", "no such command: '%s'", c.name);
	else if (!(rc = wire_auth_check(&c))) {
		struct rs_wc wc;
		struct store_db *db = NULL;
		bool w = writes(c.name);
		uint64_t before = 0;

		if (w && !(rc = wc_before(&c, &wc)) && rs_node_active() &&
		    !store_db_get(c.store, c.db, false, &db, NULL))
			before = rs_wc_mark(db); /* (a new database: 0) */
		wire_session_touch(&c);
		if (!w || !rc)
			rc = run(&c, cmd, &reply);
		if (w && !rc)
			wc_after(&c, &wc, before, &reply);
		wire_auth_done(&c);
	}
	if (rc) {
		bson_reinit(&reply);
		error_doc(&c, &reply);
	} else if (!bson_has_field(&reply, "ok")) {
		BSON_APPEND_DOUBLE(&reply, "ok", 1.0);
	}
	if (reply.len > WIRE_MAX_BSON + 16 * 1024) { /* a reply a client would refuse */
		bson_reinit(&reply);
		wire_fail(&c, 10334, "BSONObjectTooLarge", "the reply of %s is over %d bytes",
			  c.name, WIRE_MAX_BSON);
		if (c.err_info)
			bson_reinit(c.err_info);
		error_doc(&c, &reply);
	}
	if (!(m->flags & WIRE_MSG_MORE))
		wire_reply_msg(out, reply_id, m->h.request_id, &reply);
	bson_destroy(&reply);
	if (c.err_info)
		bson_destroy(c.err_info);
	query_collation_free(c.coll);
}

int wire_command_local(struct store *s, const char *db, const bson_t *cmd, bson_t *reply)
{
	struct wire_msg m = {.h = {.opcode = WIRE_OP_MSG}};
	struct wire_ctx c = {.store = s, .msg = &m, .cmd = cmd};
	const struct command *found;
	bson_iter_t it;
	int rc;

	bson_init_static(&m.body, bson_get_data(cmd), cmd->len);
	c.name = bson_iter_init(&it, cmd) && bson_iter_next(&it) ? bson_iter_key(&it) : "";
	snprintf(c.db, sizeof(c.db), "%s", db);
	if (!(found = command_find(c.name)))
		rc = wire_fail(&c, 59, "CommandNotFound", "no such command: '%s'", c.name);
	else
		rc = found->fn(&c, reply);
	if (rc) {
		bson_reinit(reply);
		error_doc(&c, reply);
	} else if (!bson_has_field(reply, "ok")) {
		BSON_APPEND_DOUBLE(reply, "ok", 1.0);
	}
	if (c.err_info)
		bson_destroy(c.err_info);
	query_collation_free(c.coll);
	return rc;
}
