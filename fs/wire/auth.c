/*
 * auth.c - who a wire connection is and what it may do: users kept in the store's admin
 * database (admin/system.users, MongoDB's documents), the SASL commands that authenticate
 * a connection with SCRAM-SHA-256 (saslStart, saslContinue; the arithmetic is scram.c's),
 * the user commands (createUser, updateUser, dropUser, usersInfo, logout), and the check
 * every command passes before it runs: the privilege it needs on which database, against
 * the built-in roles of the connection's user. Not here: the framing, the dispatch table
 * (dispatch.c calls wire_auth_check), what the commands do.
 *
 * Design notes
 * 1. When it is enforced. A server started with noauth enforces nothing (WIRE_AUTH_OFF). A
 *    server bound to a non-loopback address (allowed only when the store has users, or
 *    with noauth) always enforces (WIRE_AUTH_ON). Otherwise (loopback, Unix sockets) it is
 *    enforced while the store has at least one user: a store without users is open as
 *    before, and the first createUser (over the wire or `docfs user STORE add`) closes it,
 *    as MongoDB's localhost exception does.
 * 2. Whether users exist is asked of the store at most once a second (a process-wide
 *    cache); a user command of this process refreshes it at once. A user's roles are read
 *    when it authenticates and again after any user command of this process (a generation
 *    number), so updateUser and dropUser reach connections already authenticated; a change
 *    made by `docfs user` in another process reaches the connections that authenticate
 *    after it.
 * 3. Privileges. Each command needs one privilege (read, meta, write, ddl, dbAdmin,
 *    userAdmin, cluster) on the database it names (renameCollection: both; aggregate's
 *    $out and $merge: write on their target; explain: its inner command's). A role gives a
 *    set of privileges on its database (read, readWrite, dbAdmin, userAdmin, dbOwner) or,
 *    defined on admin, on every database (root, readAnyDatabase, readWriteAnyDatabase,
 *    dbAdminAnyDatabase, userAdminAnyDatabase, clusterMonitor). A command docfs does not
 *    classify needs root. A role is granted only by a user with userAdmin on its database.
 * 4. Which documents. A user whose customData has uid (and gid, groups) runs its commands
 *    as that caller (store_thread_cred_set): it sees, updates and deletes the documents
 *    that uid may read (and write) through the mount (README "Permissions"). Without uid
 *    a user's commands see every document, as the daemon does. Documents it inserts are
 *    owned by the daemon's user, like every wire write.
 * 5. system.users' documents are files of mode 0600 in a directory of mode 0700, owned by
 *    the store's owner; they hold the salt and the two keys, never a password.
 */
#include "wire.h"
#include "fs_int.h"

#include <openssl/rand.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define USERS_DB "admin"
#define MAX_ROLES 32
#define MECH "SCRAM-SHA-256"

enum priv {
	P_READ = 1,	  /* find, count, distinct, aggregate, getMore, killCursors */
	P_META = 2,	  /* listCollections, listIndexes, collStats, dbStats */
	P_WRITE = 4,	  /* insert, update, delete, findAndModify */
	P_DDL = 8,	  /* create, drop, indexes, renameCollection, convertToCapped */
	P_DBADMIN = 16,	  /* dropDatabase, profile, validate */
	P_USERADMIN = 32, /* the user commands */
	P_CLUSTER = 64,	  /* serverStatus, currentOp, killOp, top, hostInfo, getLog */
	P_ALL = 127,
};

struct role_def {
	const char *name;
	int privs;
	bool any_db; /* defined on admin only, and gives privs on every database */
};

static const struct role_def roles_known[] = {
	{"read", P_READ | P_META, false},
	{"readWrite", P_READ | P_META | P_WRITE | P_DDL, false},
	{"dbAdmin", P_META | P_DDL | P_DBADMIN, false},
	{"userAdmin", P_USERADMIN, false},
	{"dbOwner", P_READ | P_META | P_WRITE | P_DDL | P_DBADMIN | P_USERADMIN, false},
	{"root", P_ALL, true},
	{"readAnyDatabase", P_READ | P_META, true},
	{"readWriteAnyDatabase", P_READ | P_META | P_WRITE | P_DDL, true},
	{"dbAdminAnyDatabase", P_META | P_DDL | P_DBADMIN, true},
	{"userAdminAnyDatabase", P_USERADMIN, true},
	{"clusterMonitor", P_CLUSTER, true},
};
#define NROLES (sizeof(roles_known) / sizeof(roles_known[0]))

enum need {
	N_NONE,	  /* answered before authentication */
	N_AUTHED, /* any authenticated user */
	N_READ,
	N_META,
	N_WRITE,
	N_DDL,
	N_DBADMIN,
	N_USERADMIN,
	N_CLUSTER,
	N_AGG,	   /* aggregate: read, and write on an $out / $merge target */
	N_EXPLAIN, /* its inner command's */
	N_RENAME,  /* ddl on the source's and the target's database */
	N_ROOT,	   /* a command docfs does not classify (a new one): root's */
};

static const struct {
	const char *name;
	int need;
} rules[] = {
	{"hello", N_NONE},
	{"isMaster", N_NONE},
	{"ismaster", N_NONE},
	{"ping", N_NONE},
	{"buildInfo", N_NONE},
	{"buildinfo", N_NONE},
	{"saslStart", N_NONE},
	{"saslContinue", N_NONE},
	{"logout", N_NONE},
	{"connectionStatus", N_NONE},
	{"listCommands", N_NONE},
	{"endSessions", N_NONE},
	{"getParameter", N_AUTHED},
	{"killSessions", N_AUTHED},
	{"listDatabases", N_AUTHED}, /* shows the databases the user has a role on */
	{"usersInfo", N_AUTHED},     /* the handler checks each user asked for */
	{"find", N_READ},
	{"getMore", N_READ},
	{"killCursors", N_READ},
	{"count", N_READ},
	{"distinct", N_READ},
	{"aggregate", N_AGG},
	{"explain", N_EXPLAIN},
	{"listCollections", N_META},
	{"listIndexes", N_META},
	{"collStats", N_META},
	{"dbStats", N_META},
	{"dbHash", N_READ}, /* MongoDB's read role has the dbHash action */
	{"dbhash", N_READ},
	{"insert", N_WRITE},
	{"update", N_WRITE},
	{"delete", N_WRITE},
	{"findAndModify", N_WRITE},
	{"findandmodify", N_WRITE},
	{"create", N_DDL},
	{"drop", N_DDL},
	{"convertToCapped", N_DDL},
	{"createIndexes", N_DDL},
	{"dropIndexes", N_DDL},
	{"deleteIndexes", N_DDL},
	{"renameCollection", N_RENAME},
	{"dropDatabase", N_DBADMIN},
	{"profile", N_DBADMIN},
	{"validate", N_DBADMIN},
	{"collMod", N_DBADMIN},
	{"createUser", N_USERADMIN},
	{"updateUser", N_USERADMIN},
	{"dropUser", N_USERADMIN},
	{"serverStatus", N_CLUSTER},
	{"top", N_CLUSTER},
	{"currentOp", N_CLUSTER},
	{"killOp", N_CLUSTER},
	{"hostInfo", N_CLUSTER},
	{"getLog", N_CLUSTER},
	{"replSetGetStatus", N_CLUSTER},
	{"replSetStepDown", N_CLUSTER},
	{"replSetFreeze", N_CLUSTER},
};

struct role {
	const struct role_def *def;
	char db[DFS_MAX_NS_NAME + 1];
};

/* A user as read from its document. */
struct user {
	char name[256], db[DFS_MAX_NS_NAME + 1];
	struct wire_scram_cred cred;
	bool has_cred;
	struct role roles[MAX_ROLES];
	int nroles;
	bool has_caller; /* customData.uid given */
	struct store_cred caller;
};

struct wire_auth {
	struct wire_scram sc; /* the conversation under way */
	int conv;	      /* 0: none; 1: server-first sent; 2: done, an empty step awaited */
	bool skip_empty;      /* options.skipEmptyExchange */
	char conv_db[DFS_MAX_NS_NAME + 1]; /* the database the user authenticates on */
	struct user pending;		   /* the user of the conversation */
	bool authed;
	struct user u; /* the authenticated user */
	uint64_t gen;  /* users_gen when u was read */
};

static atomic_uint_fast64_t users_gen = 1; /* bumped by every user command (note 2) */

static struct {
	pthread_mutex_t lock;
	const struct store *s;
	int has; /* -1: not known */
	time_t at;
} cache = {PTHREAD_MUTEX_INITIALIZER, NULL, -1, 0};

struct wire_auth *wire_auth_new(void)
{
	struct wire_auth *a = calloc(1, sizeof(*a));

	if (!a)
		abort();
	return a;
}

void wire_auth_free(struct wire_auth *a)
{
	if (a)
		memset(a, 0, sizeof(*a)); /* keys of the conversation */
	free(a);
}

static const struct role_def *role_find(const char *name)
{
	for (size_t i = 0; i < NROLES; i++)
		if (!strcmp(roles_known[i].name, name))
			return &roles_known[i];
	return NULL;
}

/* ---- the users' collection ------------------------------------------------------------ */

/* Opens admin's users for reading or writing: 0, DFS_ENOENT (no users at all: nothing
 * open), or an error. */
static int users_open(struct store *s, bool write, struct store_txn **t, struct store_coll *co,
		      struct dfs_err *err)
{
	struct store_db *db;
	int rc;

	if ((rc = store_db_get(s, USERS_DB, write, &db, err)))
		return rc;
	if ((rc = store_txn_begin(db, write, t, err)))
		return rc;
	if ((rc = store_coll_users(*t, write, co, err))) {
		store_txn_abort(*t);
		*t = NULL;
	}
	return rc;
}

static void user_id(char *out, size_t cap, const char *db, const char *name)
{
	snprintf(out, cap, "%s.%s", db, name);
}

/* Reads user document doc into u. */
static int user_parse(const bson_t *doc, struct user *u, struct dfs_err *err)
{
	bson_iter_t it, sub, r;

	memset(u, 0, sizeof(*u));
	if (bson_iter_init_find(&it, doc, "user") && BSON_ITER_HOLDS_UTF8(&it))
		snprintf(u->name, sizeof(u->name), "%s", bson_iter_utf8(&it, NULL));
	if (bson_iter_init_find(&it, doc, "db") && BSON_ITER_HOLDS_UTF8(&it))
		snprintf(u->db, sizeof(u->db), "%s", bson_iter_utf8(&it, NULL));
	if (!u->name[0] || !u->db[0])
		return dfs_err_set(err, DFS_ECORRUPT, "a user document without user or db");
	if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "credentials." MECH, &sub) &&
	    BSON_ITER_HOLDS_DOCUMENT(&sub) && bson_iter_recurse(&sub, &r)) {
		while (bson_iter_next(&r)) {
			const char *k = bson_iter_key(&r);

			if (!strcmp(k, "iterationCount") && BSON_ITER_HOLDS_NUMBER(&r))
				u->cred.iters = (int)bson_iter_as_int64(&r);
			else if (!strcmp(k, "salt") && BSON_ITER_HOLDS_UTF8(&r))
				snprintf(u->cred.salt, sizeof(u->cred.salt), "%s",
					 bson_iter_utf8(&r, NULL));
			else if (!strcmp(k, "storedKey") && BSON_ITER_HOLDS_UTF8(&r))
				snprintf(u->cred.stored, sizeof(u->cred.stored), "%s",
					 bson_iter_utf8(&r, NULL));
			else if (!strcmp(k, "serverKey") && BSON_ITER_HOLDS_UTF8(&r))
				snprintf(u->cred.server, sizeof(u->cred.server), "%s",
					 bson_iter_utf8(&r, NULL));
		}
		u->has_cred = u->cred.iters > 0 && u->cred.salt[0] && u->cred.stored[0] &&
			      u->cred.server[0];
	}
	if (bson_iter_init_find(&it, doc, "roles") && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &sub)) {
		while (bson_iter_next(&sub) && u->nroles < MAX_ROLES) {
			bson_iter_t f;
			const struct role_def *d = NULL;
			const char *rdb = NULL;

			if (!BSON_ITER_HOLDS_DOCUMENT(&sub) || !bson_iter_recurse(&sub, &f))
				continue;
			while (bson_iter_next(&f)) {
				if (!strcmp(bson_iter_key(&f), "role") && BSON_ITER_HOLDS_UTF8(&f))
					d = role_find(bson_iter_utf8(&f, NULL));
				else if (!strcmp(bson_iter_key(&f), "db") &&
					 BSON_ITER_HOLDS_UTF8(&f))
					rdb = bson_iter_utf8(&f, NULL);
			}
			if (!d || !rdb)
				continue; /* a role docfs does not know gives nothing */
			u->roles[u->nroles].def = d;
			snprintf(u->roles[u->nroles].db, sizeof(u->roles[0].db), "%s", rdb);
			u->nroles++;
		}
	}
	if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "customData.uid", &sub) &&
	    BSON_ITER_HOLDS_NUMBER(&sub)) {
		u->has_caller = true;
		u->caller.uid = (uint32_t)bson_iter_as_int64(&sub);
		u->caller.gid = u->caller.uid;
		if (bson_iter_init(&it, doc) &&
		    bson_iter_find_descendant(&it, "customData.gid", &sub) &&
		    BSON_ITER_HOLDS_NUMBER(&sub))
			u->caller.gid = (uint32_t)bson_iter_as_int64(&sub);
		if (bson_iter_init(&it, doc) &&
		    bson_iter_find_descendant(&it, "customData.groups", &sub) &&
		    BSON_ITER_HOLDS_ARRAY(&sub) && bson_iter_recurse(&sub, &r))
			while (bson_iter_next(&r) && u->caller.ngroups < STORE_CRED_GROUPS)
				if (BSON_ITER_HOLDS_NUMBER(&r))
					u->caller.groups[u->caller.ngroups++] =
						(uint32_t)bson_iter_as_int64(&r);
	}
	return 0;
}

/* Finds user name of db in the open users' collection: 0 with its entry (and its document
 * in doc, initialised, when doc is not NULL), DFS_ENOENT, or an error. */
static int user_find(struct store_txn *t, const struct store_coll *co, const char *db,
		     const char *name, struct store_entry *e, bson_t *doc, struct dfs_err *err)
{
	char id[DFS_MAX_NS_NAME + 300];
	bson_value_t v = {.value_type = BSON_TYPE_UTF8};
	int rc;

	user_id(id, sizeof(id), db, name);
	v.value.v_utf8.str = id;
	v.value.v_utf8.len = (uint32_t)strlen(id);
	if ((rc = store_doc_find_id(t, co->id, &v, e, err)))
		return rc;
	if (doc)
		return store_doc_get(t, e->id, doc, err);
	return 0;
}

/* Loads user name of db into u: 0, DFS_ENOENT, or an error. */
static int user_load(struct store *s, const char *db, const char *name, struct user *u,
		     struct dfs_err *err)
{
	struct store_txn *t = NULL;
	struct store_coll co;
	struct store_entry e;
	bson_t doc = BSON_INITIALIZER;
	int rc;

	if ((rc = users_open(s, false, &t, &co, err)))
		return rc == DFS_ENOENT ? dfs_err_set(err, DFS_ENOENT, "no users") : rc;
	bson_destroy(&doc);
	rc = user_find(t, &co, db, name, &e, &doc, err);
	if (!rc) {
		rc = user_parse(&doc, u, err);
		bson_destroy(&doc);
	}
	store_txn_abort(t);
	return rc;
}

static void users_changed(void)
{
	atomic_fetch_add(&users_gen, 1);
	pthread_mutex_lock(&cache.lock);
	cache.has = -1;
	pthread_mutex_unlock(&cache.lock);
}

/* Whether s has users: 1, 0, or -1 when it cannot say (logged). */
static int users_any(struct store *s)
{
	struct store_txn *t = NULL;
	struct store_coll co;
	struct dfs_err err = {0};
	int64_t n = 0, files = 0;
	int rc = users_open(s, false, &t, &co, &err);

	if (!rc) {
		rc = store_coll_count(t, co.id, &n, &files, &err);
		store_txn_abort(t);
	}
	if (rc && rc != DFS_ENOENT) {
		fs_errlog_add("wire: cannot read the users of '%s': %s", USERS_DB, err.msg);
		return -1;
	}
	return n > 0;
}

bool wire_auth_users_exist(struct store *s)
{
	time_t now = time(NULL);
	uint64_t gen;
	int has;

	if (!s)
		return false; /* a dispatch without a store (unit tests) */
	pthread_mutex_lock(&cache.lock);
	if (cache.s == s && cache.has >= 0 && cache.at == now) {
		has = cache.has;
		pthread_mutex_unlock(&cache.lock);
		return has;
	}
	pthread_mutex_unlock(&cache.lock);
	gen = atomic_load(&users_gen);
	has = users_any(s) != 0; /* a store that cannot say is taken to have users: closed */
	pthread_mutex_lock(&cache.lock);
	if (gen == atomic_load(&users_gen)) { /* else a user command ran meanwhile: not kept */
		cache.s = s;
		cache.has = has;
		cache.at = now;
	}
	pthread_mutex_unlock(&cache.lock);
	return has;
}

bool wire_auth_users_at(const char *dir)
{
	struct store *s = NULL;
	struct dfs_err err = {0};
	int has;

	if (store_open(dir, false, &s, &err)) {
		fs_errlog_add("wire: cannot open '%s' to look for users: %s", dir, err.msg);
		return true;
	}
	has = users_any(s) != 0;
	store_free(s);
	return has;
}

/* Validates roles (an array of "name" or {role, db}) of a user of db into a new array
 * ({role, db} documents) in out (initialised here). c (may be NULL) is the granting
 * connection: each role's database needs its userAdmin (note 3). */
static int roles_parse(struct wire_ctx *c, const char *db, const bson_t *roles, bson_t *out,
		       struct dfs_err *err);

static int user_doc(const char *db, const char *name, const struct wire_scram_cred *cred,
		    const bson_t *roles, const bson_t *custom, const bson_value_t *uuid,
		    bson_t *out)
{
	char id[DFS_MAX_NS_NAME + 300];
	bson_t creds, one;
	uint8_t u[16];

	user_id(id, sizeof(id), db, name);
	bson_init(out);
	BSON_APPEND_UTF8(out, "_id", id);
	if (uuid) {
		BSON_APPEND_VALUE(out, "userId", uuid);
	} else {
		if (RAND_bytes(u, sizeof(u)) != 1)
			return DFS_EIO;
		u[6] = (uint8_t)((u[6] & 0x0f) | 0x40); /* version 4 */
		u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
		BSON_APPEND_BINARY(out, "userId", BSON_SUBTYPE_UUID, u, sizeof(u));
	}
	BSON_APPEND_UTF8(out, "user", name);
	BSON_APPEND_UTF8(out, "db", db);
	BSON_APPEND_DOCUMENT_BEGIN(out, "credentials", &creds);
	BSON_APPEND_DOCUMENT_BEGIN(&creds, MECH, &one);
	BSON_APPEND_INT32(&one, "iterationCount", cred->iters);
	BSON_APPEND_UTF8(&one, "salt", cred->salt);
	BSON_APPEND_UTF8(&one, "storedKey", cred->stored);
	BSON_APPEND_UTF8(&one, "serverKey", cred->server);
	bson_append_document_end(&creds, &one);
	bson_append_document_end(out, &creds);
	BSON_APPEND_ARRAY(out, "roles", roles);
	if (custom)
		BSON_APPEND_DOCUMENT(out, "customData", custom);
	return 0;
}

static int name_check(const char *db, const char *name, struct dfs_err *err)
{
	if (!name[0] || strlen(name) > 200)
		return dfs_err_set(err, DFS_EINVAL, "a user name must have 1 to 200 bytes");
	if (!db[0] || strchr(db, '.') || strchr(db, '/') || strlen(db) > DFS_MAX_NS_NAME)
		return dfs_err_set(err, DFS_EINVAL, "bad database name '%s'", db);
	if (!strcmp(db, "$external"))
		return dfs_err_set(err, DFS_EINVAL, "users of $external are not supported");
	return 0;
}

static int custom_check(const bson_t *custom, struct dfs_err *err)
{
	bson_iter_t it, a;

	if (!custom)
		return 0;
	if (bson_iter_init_find(&it, custom, "uid") &&
	    (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) < 0 ||
	     bson_iter_as_int64(&it) > UINT32_MAX - 1))
		return dfs_err_set(err, DFS_EINVAL, "customData.uid must be a number of a user");
	if (bson_iter_init_find(&it, custom, "gid") &&
	    (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) < 0 ||
	     bson_iter_as_int64(&it) > UINT32_MAX - 1))
		return dfs_err_set(err, DFS_EINVAL, "customData.gid must be a number of a group");
	if (bson_iter_init_find(&it, custom, "groups")) {
		if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &a))
			return dfs_err_set(err, DFS_EINVAL, "customData.groups must be an array");
		while (bson_iter_next(&a))
			if (!BSON_ITER_HOLDS_NUMBER(&a) || bson_iter_as_int64(&a) < 0)
				return dfs_err_set(err, DFS_EINVAL,
						   "customData.groups must hold group numbers");
	}
	return 0;
}

static int user_create(struct wire_ctx *c, struct store *s, const char *db, const char *name,
		       const char *pwd, const bson_t *roles, const bson_t *custom,
		       struct dfs_err *err)
{
	struct wire_scram_cred cred;
	struct store_txn *t = NULL;
	struct store_coll co;
	struct store_entry e;
	struct store_attrs at = {0600, getuid(), getgid(), 0};
	bson_t rl, doc, prep;
	int rc;

	if ((rc = name_check(db, name, err)) || (rc = custom_check(custom, err)) ||
	    (rc = roles_parse(c, db, roles, &rl, err)))
		return rc;
	if ((rc = wire_scram_credentials(pwd, WIRE_SCRAM_ITERS, &cred, err))) {
		bson_destroy(&rl);
		return rc;
	}
	rc = user_doc(db, name, &cred, &rl, custom, NULL, &doc);
	bson_destroy(&rl);
	if (rc)
		return dfs_err_set(err, DFS_EIO, "no random bytes for a user id");
	rc = store_doc_prepare(&doc, NULL, &prep, err);
	bson_destroy(&doc);
	if (rc)
		return rc;
	if (!(rc = users_open(s, true, &t, &co, err))) {
		rc = user_find(t, &co, db, name, &e, NULL, err);
		if (rc == 0)
			rc = dfs_err_set(err, DFS_EEXIST, "User \"%s@%s\" already exists", name,
					 db);
		else if (rc == DFS_ENOENT) {
			dfs_err_clear(err);
			rc = store_doc_insert(t, co.id, &prep, &at, &e, err);
		}
		if (rc)
			store_txn_abort(t);
		else
			rc = store_txn_commit(t, err);
	}
	bson_destroy(&prep);
	if (!rc)
		users_changed();
	return rc;
}

int wire_user_create(struct store *s, const char *db, const char *name, const char *pwd,
		     const bson_t *roles, const bson_t *custom, struct dfs_err *err)
{
	return user_create(NULL, s, db, name, pwd, roles, custom, err);
}

int wire_user_drop(struct store *s, const char *db, const char *name, struct dfs_err *err)
{
	struct store_txn *t = NULL;
	struct store_coll co;
	struct store_entry e;
	int rc;

	if ((rc = users_open(s, true, &t, &co, err)))
		return rc;
	rc = user_find(t, &co, db, name, &e, NULL, err);
	if (rc == DFS_ENOENT) {
		dfs_err_clear(err);
		rc = dfs_err_set(err, DFS_ENOENT, "User '%s@%s' not found", name, db);
	}
	if (!rc)
		rc = store_entry_delete(t, e.id, err);
	if (rc)
		store_txn_abort(t);
	else
		rc = store_txn_commit(t, err);
	if (!rc)
		users_changed();
	return rc;
}

int wire_user_each(struct store *s, int (*cb)(void *ctx, const bson_t *user), void *ctx,
		   struct dfs_err *err)
{
	struct store_txn *t = NULL;
	struct store_coll co;
	struct store_cursor *cur = NULL;
	bson_t doc;
	int64_t id;
	int rc;

	if ((rc = users_open(s, false, &t, &co, err)))
		return rc == DFS_ENOENT ? (dfs_err_clear(err), 0) : rc;
	if (!(rc = store_cursor_open(t, co.id, &cur, err))) {
		while (!(rc = store_cursor_next(cur, &doc, &id, err)))
			if ((rc = cb(ctx, &doc)))
				break;
		if (rc == DFS_ENOENT) {
			dfs_err_clear(err);
			rc = 0;
		}
		store_cursor_free(cur);
	}
	store_txn_abort(t);
	return rc;
}

/* ---- privileges ---------------------------------------------------------------------- */

/* Whether nothing is enforced for c now (note 1). */
static bool open_now(struct wire_ctx *c)
{
	enum wire_auth_mode m = wire_conn_auth_mode(c->conn);

	if (m == WIRE_AUTH_OFF)
		return true;
	return m == WIRE_AUTH_USERS && !wire_auth_users_exist(c->store);
}

/* The privileges of user u on database db. */
static int privs_on(const struct user *u, const char *db)
{
	int p = 0;

	for (int i = 0; i < u->nroles; i++)
		if (u->roles[i].def->any_db || !strcmp(u->roles[i].db, db))
			p |= u->roles[i].def->privs;
	return p;
}

/* The authenticated user of c, re-read when a user command ran since (note 2): NULL when
 * none (or when it has been dropped). */
static const struct user *current_user(struct wire_ctx *c)
{
	struct wire_auth *a = wire_conn_auth(c->conn);
	struct dfs_err err = {0};
	uint64_t g = atomic_load(&users_gen);

	if (!a || !a->authed)
		return NULL;
	if (a->gen != g) {
		struct user u;

		if (user_load(c->store, a->u.db, a->u.name, &u, &err)) {
			fs_log_info("wire: connection %lld: user '%s@%s' is gone (%s): "
				    "no longer authenticated",
				    (long long)c->conn_id, a->u.name, a->u.db, err.msg);
			a->authed = false;
			return NULL;
		}
		a->u = u;
		a->gen = g;
	}
	return &a->u;
}

/* Whether c may do what privilege p (enum priv) allows on db: always when nothing is
 * enforced. */
static bool may(struct wire_ctx *c, int p, const char *db)
{
	const struct user *u;

	if (open_now(c))
		return true;
	u = current_user(c);
	return u && (privs_on(u, db) & p) == p;
}

static int roles_parse(struct wire_ctx *c, const char *db, const bson_t *roles, bson_t *out,
		       struct dfs_err *err)
{
	bson_iter_t it, f;
	int n = 0;

	bson_init(out);
	if (!roles || !bson_iter_init(&it, roles))
		return 0;
	while (bson_iter_next(&it)) {
		const char *name = NULL, *rdb = db;
		const struct role_def *d;
		char key[16];
		bson_t one;

		if (BSON_ITER_HOLDS_UTF8(&it)) {
			name = bson_iter_utf8(&it, NULL);
		} else if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &f)) {
			while (bson_iter_next(&f))
				if (!strcmp(bson_iter_key(&f), "role") && BSON_ITER_HOLDS_UTF8(&f))
					name = bson_iter_utf8(&f, NULL);
				else if (!strcmp(bson_iter_key(&f), "db") &&
					 BSON_ITER_HOLDS_UTF8(&f))
					rdb = bson_iter_utf8(&f, NULL);
		}
		if (!name) {
			bson_destroy(out);
			return dfs_err_set(err, DFS_EINVAL,
					   "a role must be a name or a {role, db} document");
		}
		d = role_find(name);
		if (!d || (d->any_db && strcmp(rdb, USERS_DB))) {
			bson_destroy(out);
			return dfs_err_set(err, DFS_ENOENT, "Could not find role: %s@%s", name,
					   rdb);
		}
		if (c && !may(c, P_USERADMIN, rdb)) {
			bson_destroy(out);
			return dfs_err_set(err, DFS_EPERM,
					   "not authorized to grant role %s@%s: userAdmin on "
					   "'%s' is needed",
					   name, rdb, rdb);
		}
		if (n == MAX_ROLES) {
			bson_destroy(out);
			return dfs_err_set(err, DFS_EINVAL, "at most %d roles", MAX_ROLES);
		}
		snprintf(key, sizeof(key), "%d", n++);
		BSON_APPEND_DOCUMENT_BEGIN(out, key, &one);
		BSON_APPEND_UTF8(&one, "role", d->name);
		BSON_APPEND_UTF8(&one, "db", rdb);
		bson_append_document_end(out, &one);
	}
	return 0;
}

static int rule_need(const char *name)
{
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (!strcmp(rules[i].name, name))
			return rules[i].need;
	return N_ROOT; /* what docfs does not classify (note 3) */
}

bool wire_auth_needed(const char *name)
{
	return rule_need(name) != N_NONE;
}

static const int need_priv[] = {
	[N_READ] = P_READ,	 [N_META] = P_META,	  [N_WRITE] = P_WRITE,
	[N_DDL] = P_DDL,	 [N_DBADMIN] = P_DBADMIN, [N_USERADMIN] = P_USERADMIN,
	[N_CLUSTER] = P_CLUSTER, [N_AGG] = P_READ,	  [N_RENAME] = P_DDL,
	[N_ROOT] = P_ALL,
};

/* The database of namespace ns ("db.coll") into out. */
static void ns_db(const char *ns, char *out, size_t cap)
{
	const char *dot = strchr(ns, '.');

	snprintf(out, cap, "%.*s", dot ? (int)(dot - ns) : (int)strlen(ns), ns);
}

/* 13 with MongoDB's message: the command as { key: value, ... } (values in the codec's
 * compact style), cut short past 400 bytes. */
static int denied(struct wire_ctx *c, const char *db)
{
	struct dfs_buf b;
	bson_iter_t it;
	int f = 0, rc;

	dfs_buf_init(&b);
	dfs_buf_puts(&b, "{ ");
	if (bson_iter_init(&it, c->cmd)) {
		while (bson_iter_next(&it) && b.len < 400) {
			dfs_buf_printf(&b, "%s%s: ", f++ ? ", " : "", bson_iter_key(&it));
			store_codec_render_value(bson_iter_value(&it), &b, NULL);
		}
	}
	dfs_buf_puts(&b, b.len < 400 ? " }" : " ... }");
	rc = wire_fail(c, 13, "Unauthorized", "not authorized on %s to execute command %.440s", db,
		       b.data);
	dfs_buf_release(&b);
	return rc;
}

/* What an aggregate's pipeline needs beyond read on c->db: write on each $out or $merge
 * target, read on every database for a change stream over the whole deployment, cluster
 * for $currentOp. 0 or denied's code. */
static int agg_check(struct wire_ctx *c, const struct user *u)
{
	bson_iter_t it, st, v, f;

	if (!bson_iter_init_find(&it, c->cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &st))
		return 0;
	while (bson_iter_next(&st)) {
		char tdb[DFS_MAX_NS_NAME + 1];
		const char *k;

		if (!BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &v) ||
		    !bson_iter_next(&v))
			continue;
		k = bson_iter_key(&v);
		snprintf(tdb, sizeof(tdb), "%s", c->db);
		if (!strcmp(k, "$currentOp")) {
			if (!(privs_on(u, USERS_DB) & P_CLUSTER))
				return denied(c, USERS_DB);
			continue;
		}
		if (!strcmp(k, "$changeStream")) {
			bool all = false;

			if (bson_iter_recurse(&v, &f) && bson_iter_find(&f, "allChangesForCluster"))
				all = bson_iter_as_bool(&f);
			for (int i = 0; all && i < u->nroles; i++)
				if (u->roles[i].def->any_db && (u->roles[i].def->privs & P_READ))
					all = false;
			if (all)
				return denied(c, USERS_DB);
			continue;
		}
		if (strcmp(k, "$out") && strcmp(k, "$merge"))
			continue;
		if (BSON_ITER_HOLDS_DOCUMENT(&v) && bson_iter_recurse(&v, &f)) {
			bson_iter_t g;

			if (!strcmp(k, "$merge") && bson_iter_find(&f, "into") &&
			    BSON_ITER_HOLDS_DOCUMENT(&f) && bson_iter_recurse(&f, &g) &&
			    bson_iter_find(&g, "db") && BSON_ITER_HOLDS_UTF8(&g))
				snprintf(tdb, sizeof(tdb), "%s", bson_iter_utf8(&g, NULL));
			else if (!strcmp(k, "$out") && bson_iter_find(&f, "db") &&
				 BSON_ITER_HOLDS_UTF8(&f))
				snprintf(tdb, sizeof(tdb), "%s", bson_iter_utf8(&f, NULL));
		}
		if ((privs_on(u, tdb) & (P_WRITE | P_DDL)) != (P_WRITE | P_DDL))
			return denied(c, tdb);
	}
	return 0;
}

int wire_auth_check(struct wire_ctx *c)
{
	int need = rule_need(c->name), p;
	const struct user *u;
	char db[DFS_MAX_NS_NAME + 1];
	bson_iter_t it;

	if (need == N_NONE || open_now(c))
		return 0;
	if (!(u = current_user(c)))
		return wire_fail(c, 13, "Unauthorized", "command %s requires authentication",
				 c->name);
	snprintf(db, sizeof(db), "%s", c->db);
	if (need == N_EXPLAIN) {
		need = N_READ;
		if (bson_iter_init_find(&it, c->cmd, "explain") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
		    bson_iter_recurse(&it, &it) && bson_iter_next(&it)) {
			need = rule_need(bson_iter_key(&it));
			if (need == N_AUTHED || need == N_NONE || need == N_EXPLAIN ||
			    need == N_AGG)
				need = N_READ;
		}
	}
	if (need == N_RENAME) {
		/* {renameCollection: "db.a", to: "db.b"} on admin: ddl on both */
		if (bson_iter_init_find(&it, c->cmd, "renameCollection") &&
		    BSON_ITER_HOLDS_UTF8(&it))
			ns_db(bson_iter_utf8(&it, NULL), db, sizeof(db));
		if (!(privs_on(u, db) & P_DDL))
			return denied(c, db);
		if (bson_iter_init_find(&it, c->cmd, "to") && BSON_ITER_HOLDS_UTF8(&it))
			ns_db(bson_iter_utf8(&it, NULL), db, sizeof(db));
	}
	if (need != N_AUTHED) {
		p = need_priv[need];
		if (need == N_CLUSTER || need == N_ROOT ? (privs_on(u, USERS_DB) & p) != p
							: (privs_on(u, db) & p) != p)
			return denied(c, db);
		if (need == N_AGG && agg_check(c, u))
			return c->code;
	}
	if (u->has_caller && need != N_USERADMIN && need != N_AUTHED)
		store_thread_cred_set(&u->caller, need == N_WRITE ? STORE_MAY_READ | STORE_MAY_WRITE
								  : STORE_MAY_READ);
	return 0;
}

void wire_auth_done(struct wire_ctx *c)
{
	(void)c;
	store_thread_cred_set(NULL, 0);
}

bool wire_auth_db_visible(struct wire_ctx *c, const char *db)
{
	const struct user *u;

	if (open_now(c))
		return true;
	u = current_user(c);
	return u && privs_on(u, db) & ~P_CLUSTER;
}

static int sasl_start(struct wire_ctx *c, const bson_t *cmd, const char *db, bool quiet,
		      bson_t *reply);

void wire_auth_hello(struct wire_ctx *c, bson_t *reply)
{
	bson_iter_t it, f;
	bson_t arr, spec, out;
	const uint8_t *d;
	uint32_t len;

	/* speculativeAuthenticate: {saslStart: 1, mechanism, payload, db}, the first step of a
	 * conversation carried by the handshake; answered when it starts, else left out (the
	 * client then sends saslStart, and that one's failure is logged) */
	if (bson_iter_init_find(&it, c->cmd, "speculativeAuthenticate") &&
	    BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &len, &d);
		if (bson_init_static(&spec, d, len) && bson_iter_init_find(&f, &spec, "db") &&
		    BSON_ITER_HOLDS_UTF8(&f) && bson_has_field(&spec, "saslStart")) {
			bson_init(&out);
			if (sasl_start(c, &spec, bson_iter_utf8(&f, NULL), true, &out) == 0)
				BSON_APPEND_DOCUMENT(reply, "speculativeAuthenticate", &out);
			bson_destroy(&out);
			c->code = 0; /* hello itself succeeds */
			c->code_name = NULL;
			c->errmsg[0] = '\0';
			c->dfs_code = 0;
		}
	}

	/* listed for any name asked about, so that the reply tells nothing of who exists */
	if (!bson_iter_init_find(&it, c->cmd, "saslSupportedMechs") || !BSON_ITER_HOLDS_UTF8(&it))
		return;
	BSON_APPEND_ARRAY_BEGIN(reply, "saslSupportedMechs", &arr);
	BSON_APPEND_UTF8(&arr, "0", MECH);
	bson_append_array_end(reply, &arr);
}

bool wire_auth_user(struct wire_ctx *c, const char **name, const char **db)
{
	const struct user *u = c->conn ? current_user(c) : NULL;

	if (!u)
		return false;
	*name = u->name;
	*db = u->db;
	return true;
}

void wire_auth_status(struct wire_ctx *c, bson_t *info)
{
	const struct user *u = current_user(c);
	bson_t arr, one;
	char key[16];

	BSON_APPEND_ARRAY_BEGIN(info, "authenticatedUsers", &arr);
	if (u) {
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &one);
		BSON_APPEND_UTF8(&one, "user", u->name);
		BSON_APPEND_UTF8(&one, "db", u->db);
		bson_append_document_end(&arr, &one);
	}
	bson_append_array_end(info, &arr);
	BSON_APPEND_ARRAY_BEGIN(info, "authenticatedUserRoles", &arr);
	for (int i = 0; u && i < u->nroles; i++) {
		snprintf(key, sizeof(key), "%d", i);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &one);
		BSON_APPEND_UTF8(&one, "role", u->roles[i].def->name);
		BSON_APPEND_UTF8(&one, "db", u->roles[i].db);
		bson_append_document_end(&arr, &one);
	}
	bson_append_array_end(info, &arr);
}

/* ---- SASL ------------------------------------------------------------------------------ */

/* The payload of the command (BinData or a string) as a view: its length, or -1. */
static int payload(const bson_t *cmd, const char **p, uint32_t *len)
{
	bson_iter_t it;
	bson_subtype_t sub;
	const uint8_t *b;

	if (!bson_iter_init_find(&it, cmd, "payload"))
		return -1;
	if (BSON_ITER_HOLDS_BINARY(&it)) {
		bson_iter_binary(&it, &sub, len, &b);
		*p = (const char *)b;
		return 0;
	}
	if (BSON_ITER_HOLDS_UTF8(&it)) {
		*p = bson_iter_utf8(&it, len);
		return 0;
	}
	return -1;
}

static const char *peer(struct wire_ctx *c, char *buf, size_t cap)
{
	const char *a = wire_conn_addr(c->conn);

	if (a[0])
		return a;
	snprintf(buf, cap, "unix (pid %d)", wire_conn_pid(c->conn));
	return buf;
}

/* 18 AuthenticationFailed, and a line in the log saying why (never to the client; not
 * when quiet: a speculative start, which the client follows with a saslStart). */
static int auth_failed(struct wire_ctx *c, const char *db, bool quiet, const char *user,
		       const char *why)
{
	char pb[64];
	struct wire_auth *a = wire_conn_auth(c->conn);

	if (!quiet)
		fs_errlog_add("wire: connection %lld from %s: authentication failed for user "
			      "'%s@%s' (" MECH "): %s",
			      (long long)c->conn_id, peer(c, pb, sizeof(pb)), user, db, why);
	if (a) {
		a->conv = 0;
		memset(&a->sc, 0, sizeof(a->sc));
	}
	return wire_fail(c, 18, "AuthenticationFailed", "Authentication failed.");
}

/* saslStart of cmd (mechanism, payload, options) for a user of db into reply. */
static int sasl_start(struct wire_ctx *c, const bson_t *cmd, const char *db, bool quiet,
		      bson_t *reply)
{
	struct wire_auth *a = wire_conn_auth(c->conn);
	struct dfs_err err = {0};
	const char *p, *mech = "";
	uint32_t len;
	char out[800];
	bson_iter_t it;
	int rc;

	if (!a)
		return wire_fail(c, 2, "BadValue", "authentication needs a connection");
	if (bson_iter_init_find(&it, cmd, "mechanism") && BSON_ITER_HOLDS_UTF8(&it))
		mech = bson_iter_utf8(&it, NULL);
	if (strcmp(mech, MECH))
		return wire_fail(c, 334, "MechanismUnavailable",
				 "Received authentication for mechanism %s which is unknown or "
				 "not enabled (docfs has " MECH ")",
				 mech);
	if (payload(cmd, &p, &len))
		return wire_fail(c, 2, "BadValue", "saslStart needs a payload");
	a->conv = 0;
	a->skip_empty = false;
	snprintf(a->conv_db, sizeof(a->conv_db), "%s", db);
	if (bson_iter_init(&it, cmd) &&
	    bson_iter_find_descendant(&it, "options.skipEmptyExchange", &it))
		a->skip_empty = bson_iter_as_bool(&it);
	if (wire_scram_client_first(&a->sc, p, len, &err))
		return auth_failed(c, db, quiet, "?", err.msg);
	rc = user_load(c->store, db, a->sc.user, &a->pending, &err);
	if (rc == DFS_ENOENT)
		return auth_failed(c, db, quiet, a->sc.user, "no such user");
	if (rc)
		return auth_failed(c, db, quiet, a->sc.user, err.msg);
	if (!a->pending.has_cred)
		return auth_failed(c, db, quiet, a->sc.user,
				   "the user has no " MECH " credentials");
	if (wire_scram_server_first(&a->sc, NULL, &a->pending.cred, out, sizeof(out), &err))
		return auth_failed(c, db, quiet, a->sc.user, err.msg);
	a->conv = 1;
	BSON_APPEND_INT32(reply, "conversationId", 1);
	BSON_APPEND_BOOL(reply, "done", false);
	BSON_APPEND_BINARY(reply, "payload", BSON_SUBTYPE_BINARY, (const uint8_t *)out,
			   (uint32_t)strlen(out));
	return 0;
}

int wire_cmd_sasl_start(struct wire_ctx *c, bson_t *reply)
{
	return sasl_start(c, c->cmd, c->db, false, reply);
}

int wire_cmd_sasl_continue(struct wire_ctx *c, bson_t *reply)
{
	struct wire_auth *a = wire_conn_auth(c->conn);
	struct dfs_err err = {0};
	const char *p;
	uint32_t len;
	int64_t conv = 0;
	char out[128], pb[64];
	int rc;

	if (!a || !a->conv || wire_arg_int(c, "conversationId", &conv) || conv != 1)
		return wire_fail(c, 17, "ProtocolError", "No SASL session state found");
	if (payload(c->cmd, &p, &len))
		return wire_fail(c, 2, "BadValue", "saslContinue needs a payload");
	if (a->conv == 2) { /* the empty exchange after server-final */
		a->conv = 0;
		BSON_APPEND_INT32(reply, "conversationId", 1);
		BSON_APPEND_BOOL(reply, "done", true);
		BSON_APPEND_BINARY(reply, "payload", BSON_SUBTYPE_BINARY, (const uint8_t *)"", 0);
		return 0;
	}
	rc = wire_scram_client_final(&a->sc, p, len, out, sizeof(out), &err);
	if (rc == DFS_EPERM)
		return auth_failed(c, a->conv_db, false, a->sc.user, "wrong password");
	if (rc)
		return auth_failed(c, a->conv_db, false, a->sc.user, err.msg);
	a->u = a->pending;
	a->authed = true;
	a->gen = atomic_load(&users_gen);
	fs_log_info("wire: connection %lld from %s: authenticated as '%s@%s'",
		    (long long)c->conn_id, peer(c, pb, sizeof(pb)), a->u.name, a->u.db);
	memset(&a->sc, 0, sizeof(a->sc));
	a->conv = a->skip_empty ? 0 : 2;
	BSON_APPEND_INT32(reply, "conversationId", 1);
	BSON_APPEND_BOOL(reply, "done", a->skip_empty);
	BSON_APPEND_BINARY(reply, "payload", BSON_SUBTYPE_BINARY, (const uint8_t *)out,
			   (uint32_t)strlen(out));
	return 0;
}

int wire_cmd_logout(struct wire_ctx *c, bson_t *reply)
{
	struct wire_auth *a = wire_conn_auth(c->conn);

	(void)reply;
	if (a) {
		a->authed = false;
		a->conv = 0;
		memset(&a->u, 0, sizeof(a->u));
	}
	return 0;
}

/* ---- user commands --------------------------------------------------------------------- */

/* An engine error of a user command as MongoDB's code. */
static int user_fail(struct wire_ctx *c, const struct dfs_err *e)
{
	switch (e->code) {
	case DFS_EEXIST:
		return wire_fail(c, 51003, "Location51003", "%s", e->msg);
	case DFS_EPERM:
		return wire_fail(c, 13, "Unauthorized", "%s", e->msg);
	case DFS_ENOENT:
		if (!strncmp(e->msg, "Could not find role", 19))
			return wire_fail(c, 31, "RoleNotFound", "%s", e->msg);
		return wire_fail(c, 11, "UserNotFound", "%s", e->msg);
	case DFS_EINVAL:
		return wire_fail(c, 2, "BadValue", "%s", e->msg);
	default:
		return wire_fail_dfs(c, e);
	}
}

/* The string under key, or NULL (with a TypeMismatch recorded when it is not a string:
 * *rc). */
static const char *arg_str(struct wire_ctx *c, const char *key, int *rc)
{
	bson_iter_t it;

	*rc = 0;
	if (!bson_iter_init_find(&it, c->cmd, key))
		return NULL;
	if (!BSON_ITER_HOLDS_UTF8(&it)) {
		*rc = wire_fail(c, 14, "TypeMismatch", "BSON field '%s.%s' must be a string",
				c->name, key);
		return NULL;
	}
	return bson_iter_utf8(&it, NULL);
}

/* What createUser and updateUser share: mechanisms and digestPassword refused unless they
 * ask for what docfs does. */
static int user_opts(struct wire_ctx *c)
{
	bson_iter_t it, m;
	bool digest = true;

	wire_arg_bool(c, "digestPassword", &digest);
	if (!digest)
		return wire_fail(c, 2, "BadValue", "Use of " MECH " requires undigested passwords");
	if (bson_iter_init_find(&it, c->cmd, "mechanisms")) {
		if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &m))
			return wire_fail(c, 14, "TypeMismatch", "mechanisms must be an array");
		while (bson_iter_next(&m))
			if (!BSON_ITER_HOLDS_UTF8(&m) || strcmp(bson_iter_utf8(&m, NULL), MECH))
				return wire_fail(c, 2, "BadValue",
						 "docfs supports only the mechanism " MECH);
	}
	return 0;
}

static int arg_array(struct wire_ctx *c, const char *key, bson_t *view)
{
	bson_iter_t it;
	const uint8_t *d;
	uint32_t len;

	if (!bson_iter_init_find(&it, c->cmd, key))
		return 1;
	if (!BSON_ITER_HOLDS_ARRAY(&it))
		return wire_fail(c, 14, "TypeMismatch", "BSON field '%s.%s' must be an array",
				 c->name, key);
	bson_iter_array(&it, &len, &d);
	if (!bson_init_static(view, d, len))
		return wire_fail(c, 2, "BadValue", "invalid array under '%s'", key);
	return 0;
}

int wire_cmd_create_user(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	const char *name, *pwd;
	bson_t roles, custom;
	int rc, rr, rcu;

	(void)reply;
	name = arg_str(c, "createUser", &rc);
	if (rc)
		return rc;
	if (!name)
		return wire_fail(c, 2, "BadValue", "createUser needs a user name");
	if (!(pwd = arg_str(c, "pwd", &rc)))
		return rc ? rc : wire_fail(c, 2, "BadValue", "createUser needs a pwd");
	if ((rc = user_opts(c)))
		return rc;
	if ((rr = arg_array(c, "roles", &roles)) > 1)
		return rr;
	if (rr == 1)
		return wire_fail(c, 2, "BadValue",
				 "\"createUser\" command requires a \"roles\" array");
	if ((rcu = wire_arg_doc(c, "customData", &custom)) > 1)
		return rcu;
	if (user_create(c, c->store, c->db, name, pwd, &roles, rcu ? NULL : &custom, &err))
		return user_fail(c, &err);
	return 0;
}

int wire_cmd_update_user(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	const char *name, *pwd;
	bson_t roles, custom, old = BSON_INITIALIZER, doc, rl, prep;
	struct store_txn *t = NULL;
	struct store_coll co;
	struct store_entry e;
	struct wire_scram_cred cred;
	bson_value_t uuid;
	bson_iter_t it;
	int rc, rr, rcu;

	(void)reply;
	name = arg_str(c, "updateUser", &rc);
	if (rc)
		return rc;
	if (!name)
		return wire_fail(c, 2, "BadValue", "updateUser needs a user name");
	pwd = arg_str(c, "pwd", &rc);
	if (rc || (rc = user_opts(c)))
		return rc;
	if ((rr = arg_array(c, "roles", &roles)) > 1)
		return rr;
	if ((rcu = wire_arg_doc(c, "customData", &custom)) > 1)
		return rcu;
	if (!pwd && rr && rcu)
		return wire_fail(c, 2, "BadValue",
				 "Must specify at least one field to update "
				 "in updateUser");
	if ((rcu == 0 && custom_check(&custom, &err)) ||
	    (rr == 0 && roles_parse(c, c->db, &roles, &rl, &err)) ||
	    (pwd && wire_scram_credentials(pwd, WIRE_SCRAM_ITERS, &cred, &err)))
		return user_fail(c, &err);
	if (rr)
		bson_init(&rl);
	if ((rc = users_open(c->store, true, &t, &co, &err))) {
		bson_destroy(&rl);
		if (rc == DFS_ENOENT)
			return wire_fail(c, 11, "UserNotFound", "User '%s@%s' not found", name,
					 c->db);
		return wire_fail_dfs(c, &err);
	}
	bson_destroy(&old);
	rc = user_find(t, &co, c->db, name, &e, &old, &err);
	if (rc) {
		store_txn_abort(t);
		bson_destroy(&rl);
		if (rc == DFS_ENOENT)
			return wire_fail(c, 11, "UserNotFound", "User '%s@%s' not found", name,
					 c->db);
		return wire_fail_dfs(c, &err);
	}
	{
		struct user u;
		bson_t keep_roles, keep_custom;
		bool has_custom = false;
		const uint8_t *d;
		uint32_t len;

		user_parse(&old, &u, &err);
		if (!pwd)
			cred = u.cred;
		if (rr) { /* roles kept */
			bson_destroy(&rl);
			if (bson_iter_init_find(&it, &old, "roles") && BSON_ITER_HOLDS_ARRAY(&it)) {
				bson_iter_array(&it, &len, &d);
				bson_init_static(&keep_roles, d, len);
				bson_copy_to(&keep_roles, &rl);
			} else {
				bson_init(&rl);
			}
		}
		if (rcu && bson_iter_init_find(&it, &old, "customData") &&
		    BSON_ITER_HOLDS_DOCUMENT(&it)) {
			bson_iter_document(&it, &len, &d);
			has_custom = bson_init_static(&keep_custom, d, len);
		}
		if (!bson_iter_init_find(&it, &old, "userId"))
			uuid.value_type = BSON_TYPE_NULL;
		else
			bson_value_copy(bson_iter_value(&it), &uuid);
		rc = user_doc(c->db, name, &cred, &rl,
			      rcu ? (has_custom ? &keep_custom : NULL) : &custom,
			      uuid.value_type == BSON_TYPE_NULL ? NULL : &uuid, &doc);
		if (uuid.value_type != BSON_TYPE_NULL)
			bson_value_destroy(&uuid);
	}
	bson_destroy(&rl);
	if (!rc && !(rc = store_doc_prepare(&doc, NULL, &prep, &err))) {
		rc = store_doc_replace(t, e.id, &prep, &err);
		bson_destroy(&prep);
	}
	bson_destroy(&doc);
	bson_destroy(&old);
	if (rc) {
		store_txn_abort(t);
		return err.code ? wire_fail_dfs(c, &err)
				: wire_fail(c, 1, "InternalError", "cannot update the user");
	}
	if (store_txn_commit(t, &err))
		return wire_fail_dfs(c, &err);
	users_changed();
	return 0;
}

int wire_cmd_drop_user(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	const char *name;
	int rc;

	(void)reply;
	name = arg_str(c, "dropUser", &rc);
	if (rc)
		return rc;
	if (!name)
		return wire_fail(c, 2, "BadValue", "dropUser needs a user name");
	rc = wire_user_drop(c->store, c->db, name, &err);
	if (rc == DFS_ENOENT)
		return wire_fail(c, 11, "UserNotFound", "User '%s@%s' not found", name, c->db);
	if (rc)
		return wire_fail_dfs(c, &err);
	return 0;
}

/* usersInfo's targets: all of a database, every database, or named users. */
struct users_info {
	struct wire_ctx *c;
	bool all_dbs, show_creds, denied;
	bson_t want; /* {"db.user": true, ...}; empty: every user of c->db (unless all_dbs) */
	bool named;
	bson_t *arr;
	int n;
};

static int info_one(void *ctx, const bson_t *doc)
{
	struct users_info *q = ctx;
	struct user u;
	struct dfs_err err = {0};
	char id[DFS_MAX_NS_NAME + 300], key[16];
	bson_iter_t it;
	bson_t one, mech;

	if (user_parse(doc, &u, &err))
		return 0;
	user_id(id, sizeof(id), u.db, u.name);
	if (q->named ? !bson_iter_init_find(&it, &q->want, id) /* a key with dots: not a path */
		     : !q->all_dbs && strcmp(u.db, q->c->db))
		return 0;
	snprintf(key, sizeof(key), "%d", q->n++);
	BSON_APPEND_DOCUMENT_BEGIN(q->arr, key, &one);
	BSON_APPEND_UTF8(&one, "_id", id);
	if (bson_iter_init_find(&it, doc, "userId"))
		BSON_APPEND_VALUE(&one, "userId", bson_iter_value(&it));
	BSON_APPEND_UTF8(&one, "user", u.name);
	BSON_APPEND_UTF8(&one, "db", u.db);
	if (bson_iter_init_find(&it, doc, "roles"))
		BSON_APPEND_VALUE(&one, "roles", bson_iter_value(&it));
	if (q->show_creds && bson_iter_init_find(&it, doc, "credentials"))
		BSON_APPEND_VALUE(&one, "credentials", bson_iter_value(&it));
	if (bson_iter_init_find(&it, doc, "customData"))
		BSON_APPEND_VALUE(&one, "customData", bson_iter_value(&it));
	BSON_APPEND_ARRAY_BEGIN(&one, "mechanisms", &mech);
	if (u.has_cred)
		BSON_APPEND_UTF8(&mech, "0", MECH);
	bson_append_array_end(&one, &mech);
	bson_append_document_end(q->arr, &one);
	return 0;
}

/* Adds target v (a name of c->db, or {user, db}) to q->want: 0 or a wire_fail code. */
static int info_target(struct users_info *q, bson_iter_t *v)
{
	struct wire_ctx *c = q->c;
	const char *name = NULL, *db = c->db;
	char id[DFS_MAX_NS_NAME + 300];
	const struct user *me;
	bson_iter_t f;

	if (BSON_ITER_HOLDS_UTF8(v)) {
		name = bson_iter_utf8(v, NULL);
	} else if (BSON_ITER_HOLDS_DOCUMENT(v) && bson_iter_recurse(v, &f)) {
		while (bson_iter_next(&f))
			if (!strcmp(bson_iter_key(&f), "user") && BSON_ITER_HOLDS_UTF8(&f))
				name = bson_iter_utf8(&f, NULL);
			else if (!strcmp(bson_iter_key(&f), "db") && BSON_ITER_HOLDS_UTF8(&f))
				db = bson_iter_utf8(&f, NULL);
	}
	if (!name)
		return wire_fail(c, 2, "BadValue",
				 "usersInfo takes 1, a user name, {user, db}, or an array of them");
	me = open_now(c) ? NULL : current_user(c);
	if (!may(c, P_USERADMIN, db) && !(me && !strcmp(me->name, name) && !strcmp(me->db, db)))
		return wire_fail(c, 13, "Unauthorized",
				 "not authorized on %s to execute command usersInfo of %s@%s",
				 c->db, name, db);
	user_id(id, sizeof(id), db, name);
	BSON_APPEND_BOOL(&q->want, id, true);
	q->named = true;
	return 0;
}

int wire_cmd_users_info(struct wire_ctx *c, bson_t *reply)
{
	struct users_info q = {.c = c};
	struct dfs_err err = {0};
	bson_iter_t it, a;
	bson_t arr;
	int rc = 0;

	bson_init(&q.want);
	wire_arg_bool(c, "showCredentials", &q.show_creds);
	if (!bson_iter_init_find(&it, c->cmd, "usersInfo")) {
		rc = wire_fail(c, 2, "BadValue", "usersInfo needs a value");
	} else if (BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &a)) {
		while (!rc && bson_iter_next(&a))
			rc = info_target(&q, &a);
		q.named = true;
	} else if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &a) &&
		   bson_iter_find(&a, "forAllDBs")) {
		q.all_dbs = bson_iter_as_bool(&a);
		if (q.all_dbs && !may(c, P_USERADMIN, "") && !may(c, P_ALL, USERS_DB))
			rc = wire_fail(c, 13, "Unauthorized",
				       "not authorized to list the users of every database");
	} else if (BSON_ITER_HOLDS_UTF8(&it) || BSON_ITER_HOLDS_DOCUMENT(&it)) {
		rc = info_target(&q, &it);
	} else if (BSON_ITER_HOLDS_NUMBER(&it)) {
		if (!may(c, P_USERADMIN, c->db))
			rc = wire_fail(c, 13, "Unauthorized",
				       "not authorized on %s to execute command usersInfo", c->db);
	} else {
		rc = wire_fail(c, 2, "BadValue",
			       "usersInfo takes 1, a user name, {user, db}, or an array of them");
	}
	if (rc) {
		bson_destroy(&q.want);
		return rc;
	}
	BSON_APPEND_ARRAY_BEGIN(reply, "users", &arr);
	q.arr = &arr;
	rc = wire_user_each(c->store, info_one, &q, &err);
	bson_append_array_end(reply, &arr);
	bson_destroy(&q.want);
	return rc ? wire_fail_dfs(c, &err) : 0;
}
