/*
 * replset.h - replica sets (issue 31): a set's configuration
 * (rsconf.c: rs.conf() checked and completed as mongod does) kept in ZooKeeper (zk.c,
 * through its official C client), and `docfs rs` running the shell's rs.initiate,
 * rs.conf, rs.reconfig, rs.add, rs.remove and rs.status against it; members that replicate
 * and fail over: member.c (state, elections, the write gate, hello), apply.c (a
 * secondary applying its primary's change stream) and initsync.c (initial sync: a copy of
 * every database, then the stream); write concern (wconcern.c parses it, member.c waits
 * for it), replSetStepDown and replSetFreeze (member.c). Read preference,
 * rollback and transactions are the rest of issue 31, not built yet.
 *
 * Thread-safety: the configuration functions are pure; a struct rs_zk is thread-safe (the
 * _mt client); a struct rs_node is, through its lock.
 */
#ifndef DOCFS_REPLSET_H
#define DOCFS_REPLSET_H
#include "store.h"

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#define RS_MAX_MEMBERS 50 /* MongoDB's limit */
#define RS_MAX_VOTERS 7

struct rs_member {
	int id;
	char host[256];
	int votes;
	double priority;
	bool arbiter;
	bool hidden;
};

/* A checked configuration: doc is what rs.conf() shows (Owned), the rest read from it. */
struct rs_conf {
	bson_t doc;
	char name[128];
	int64_t version, term;
	bson_oid_t set_id;
	struct rs_member m[RS_MAX_MEMBERS];
	int n;
};

/* Checks in (a configuration as rs.initiate or rs.reconfig takes it) for set, against
 * cur (the one in force, NULL for initiate), and fills out with MongoDB's defaults
 * (rsconf.c notes 2, 3). A refusal (DFS_EINVAL) puts {ok: 0, errmsg, code, codeName}
 * into reply (may be NULL) and changes nothing. */
int rs_conf_check(const char *set, const bson_t *in, const struct rs_conf *cur, struct rs_conf *out,
		  bson_t *reply, struct dfs_err *err);
/* A stored configuration back into out (DFS_ECORRUPT when it is not one). */
int rs_conf_load(const bson_t *stored, struct rs_conf *out, struct dfs_err *err);
void rs_conf_release(struct rs_conf *c);

/* ---- ZooKeeper (zk.c) ---------------------------------------------------------------- */

struct rs_zk;
/* Connects to hosts (ZooKeeper's "h1:p1,h2:p2" list; docfs -o options write ';' or '+'
 * between them instead of ',', which is turned back) within timeout_ms. */
int rs_zk_open(const char *hosts, int timeout_ms, struct rs_zk **out, struct dfs_err *err);
void rs_zk_close(struct rs_zk *z);
/* The stored configuration of set into out (initialised here); *version gets the znode's
 * version for rs_zk_put_conf. DFS_ENOENT when the set was never initiated. */
int rs_zk_get_conf(struct rs_zk *z, const char *set, bson_t *out, int *version,
		   struct dfs_err *err);
/* Stores conf for set: version -1 creates it (DFS_EEXIST when it exists: initiated
 * already), else replaces the znode of that version (DFS_EBUSY when another write came
 * first: MongoDB's ConfigurationInProgress). */
int rs_zk_put_conf(struct rs_zk *z, const char *set, const bson_t *conf, int version,
		   struct dfs_err *err);

/* The session's id (0: none), its negotiated timeout in ms, and whether it expired (the
 * handle is then dead: close it and open another). */
int64_t rs_zk_session(struct rs_zk *z);
int rs_zk_timeout(struct rs_zk *z);
bool rs_zk_expired(struct rs_zk *z);
/* The BSON document at path into out (initialised here); *version (may be NULL) gets the
 * znode's version, *owner (may be NULL) the session that owns it when ephemeral (0 else).
 * DFS_ENOENT when there is none. */
int rs_zk_get(struct rs_zk *z, const char *path, bson_t *out, int *version, int64_t *owner,
	      struct dfs_err *err);
/* Creates path holding doc, ephemeral (tied to this session) or not: DFS_EEXIST, DFS_ENOENT
 * (no parent). */
int rs_zk_create(struct rs_zk *z, const char *path, const bson_t *doc, bool ephemeral,
		 struct dfs_err *err);
/* Replaces path's document if its version is version (-1: any): DFS_EBUSY, DFS_ENOENT. */
int rs_zk_set(struct rs_zk *z, const char *path, const bson_t *doc, int version,
	      struct dfs_err *err);
int rs_zk_delete(struct rs_zk *z, const char *path, int version, struct dfs_err *err);
/* Calls cb with the name of each child of path (a nonzero return stops and is returned). */
int rs_zk_children(struct rs_zk *z, const char *path, int (*cb)(void *ctx, const char *name),
		   void *ctx, struct dfs_err *err);

/* ---- members (member.c, apply.c) ----------------------------------------------------- */

#define RS_HOST_MAX 256
/* A member's state, MongoDB's numbers. */
enum rs_state {
	RS_STARTUP = 0,
	RS_PRIMARY = 1,
	RS_SECONDARY = 2,
	RS_RECOVERING = 3,
	RS_STARTUP2 = 5, /* copying its primary's data (initial sync, initsync.c) */
	RS_DOWN = 8,
	RS_REMOVED = 10,
};
const char *rs_state_name(int state); /* "PRIMARY", ...: static */

/* A position in the set's history (member.c note 2). */
struct rs_optime {
	uint64_t ts; /* clusterTime: seconds << 32 | increment */
	int64_t t;   /* the term of the primary that made it */
};
int rs_optime_cmp(const struct rs_optime *a, const struct rs_optime *b);

/* Where a secondary stands in one database: the clusterTime of the last event of it that it
 * applied (clusterTimes grow within a database only: member.c note 6). */
#define RS_DBPOS 32
struct rs_dbpos {
	char db[DFS_MAX_NS_NAME + 1];
	uint64_t ts;
};

/* A live member as it published itself in ZooKeeper. */
struct rs_seen {
	int id;			/* its _id */
	int state;		/* enum rs_state */
	struct rs_optime op;	/* its position */
	int64_t beat_ms;	/* when it last published (wall ms) */
	char host[RS_HOST_MAX]; /* its address */
	char sync[RS_HOST_MAX]; /* whom it follows */
	char why[200];		/* infoMessage (RECOVERING's reason) */
	struct rs_dbpos dbs[RS_DBPOS]; /* its positions per database (note 6) */
	int ndbs;
	bool frozen;	   /* it does not stand now (replSetFreeze, a step-down) */
	int64_t step_down; /* a primary stepping down: its round (member.c note 7), 0: not */
	int64_t caught_up; /* a secondary: the round it caught up in (0: none) */
};
/* What ZooKeeper shows of a set: its primary and live members. */
struct rs_view {
	bool has_primary;
	char primary[RS_HOST_MAX]; /* the primary znode's host */
	int primary_id;
	int64_t primary_term;
	int64_t primary_owner; /* the session holding it */
	int primary_version;   /* the znode's version */
	struct rs_seen m[RS_MAX_MEMBERS];
	int n;
};
int rs_view_read(struct rs_zk *z, const char *set, struct rs_view *v, struct dfs_err *err);
/* rs.status()'s document of configuration c as v shows it, from self's side (NULL: no
 * member's), appended to out. */
void rs_status_build(const struct rs_conf *c, const struct rs_view *v, const char *self,
		     bson_t *out);

struct rs_node;
/* Makes this daemon (serving store s, Borrowed: must outlive the node) member me of set
 * through ZooKeeper zk: closes s's write gate until elected, answers hello and
 * replSetGetStatus / replSetGetConfig, and starts the member's thread. Call after the
 * daemon forked. *out Owned: rs_node_stop (which keeps the gate closed). */
int rs_node_start(struct store *s, const char *set, const char *zk, const char *me,
		  struct rs_node **out, struct dfs_err *err);
void rs_node_stop(struct rs_node *n);
/* The daemon's membership as a document into out (initialised): what is "hello" (its
 * replica set fields), "status" (rs.status()) or "conf" (rs.conf()), as /.replset/ shows
 * them. DFS_ENOENT when the daemon is not a member. */
int rs_node_doc(const char *what, bson_t *out);
bool rs_node_active(void); /* whether this daemon is a member */
/* What the applier reports: a position reached; a feed it cannot apply (RECOVERING). */
void rs_node_applied(struct rs_node *n, const struct rs_optime *op);
/* The applier applied an event of database db at clusterTime ts (note 6). */
void rs_node_applied_db(struct rs_node *n, const char *db, uint64_t ts);
/* The applier asked its primary for events at t0 (monotonic ms) and got none: everything
 * committed there before t0 is applied (note 7). */
void rs_node_idle(struct rs_node *n, int64_t t0);
int64_t rs_mono_ms(void); /* the monotonic clock of rs_node_idle, in ms */
void rs_node_recovering(struct rs_node *n, const char *why);
/* An initial sync (initsync.c): the member is STARTUP2 with progress as its infoMessage
 * (called again as the copy advances); rs_node_synced when it caught up: SECONDARY. */
void rs_node_startup2(struct rs_node *n, const char *progress);
void rs_node_synced(struct rs_node *n);

struct rs_apply;
/* Starts applying the change stream of primary host (in term) to s (apply.c). *out Owned:
 * rs_apply_stop (NULL: no-op), which waits for the thread. */
int rs_apply_start(struct rs_node *n, struct store *s, const char *host, int64_t term,
		   struct rs_apply **out, struct dfs_err *err);
void rs_apply_stop(struct rs_apply *a);
/* The position kept in s (local.replset), or zeros. */
void rs_apply_saved(struct store *s, struct rs_optime *out);
/* Runs cmd on db of s as the applier (wire_command_local): 0, or the error's code (also a
 * write error inside an ok reply) with its message in why. */
int rs_local_run(struct store *s, const char *db, const bson_t *cmd, char *why, size_t cap);

/* ---- initial sync (initsync.c; libmongoc's client, as apply.c) ------------------------ */

struct _mongoc_client_t;
#define RS_SYNC_RETRY 2 /* rs_initial_sync: the primary did not answer: try again */
/* Whether s must be copied from its primary before it follows it (initsync.c note 1):
 * an initial sync was begun and not finished, or nothing is saved and s holds no
 * database but local. */
bool rs_sync_needed(struct store *s);
/* Copies every database of the primary (cl, at host) into s after dropping s's own
 * (local aside), marking s as in initial sync until rs_sync_done (note 2); *min_valid
 * gets the primary's position once the copy ended (clusterTime). 0, RS_SYNC_RETRY, or 1
 * with why; stops early (1) when *stop is set. */
int rs_initial_sync(struct rs_node *n, struct store *s, struct _mongoc_client_t *cl,
		    const char *host, const _Atomic bool *stop, uint64_t *min_valid, char *why,
		    size_t cap);
/* Clears the mark of an initial sync (after the stream caught up to min_valid). */
int rs_sync_done(struct store *s, char *why, size_t cap);
/* Brings s's collections to the primary's (cl), as the change stream does not carry
 * them (initsync.c note 6): 0, or 1 with why. */
int rs_catalog_sync(struct store *s, struct _mongoc_client_t *cl, char *why, size_t cap);

/* ---- write concern (wconcern.c, member.c notes 6, 8) ------------------------------------ */

/* A write concern: {w, j, wtimeout}. */
struct rs_wc {
	int w;		     /* members that must have the write, when mode is "" (0: none) */
	char mode[128];	     /* "majority", or a mode of settings.getLastErrorModes */
	bool j;		     /* j: true (a commit is always durable: nothing more to wait for) */
	int64_t wtimeout_ms; /* 0: wait as long as it takes */
	bool given;	     /* set by the writer (else the daemon's default) */
};
/* A write concern that cannot be met, or was not in time, in MongoDB's terms. */
struct rs_wc_fail {
	int code;	       /* 64 WriteConcernFailed, 79, 100, 2 BadValue, 11602 */
	const char *code_name; /* static */
	char msg[256];	       /* errmsg */
	bool wtimeout;	       /* errInfo {wtimeout: true} */
};
/* Parses a writeConcern document ({w: 1|N|"majority"|"<mode>", j, wtimeout, fsync}) into
 * out: DFS_EINVAL naming the field (MongoDB's 9 FailedToParse). */
int rs_wc_parse(const bson_t *doc, struct rs_wc *out, struct dfs_err *err);
/* One path option into out: w=, wtimeout=, j=. 1 when name is none of them, 0 when taken,
 * DFS_EINVAL for a bad value. */
int rs_wc_opt(const char *name, const char *value, struct rs_wc *out, struct dfs_err *err);
/* The daemon's default write concern into out (member.c note 8): the mount's -o w= for files
 * (rs_wc_set_file_default), MongoDB's implicit default over the wire (wire true). */
void rs_wc_default(bool wire, struct rs_wc *out);
/* -o w=VALUE: the default for document files; DFS_EINVAL for a bad value. */
int rs_wc_set_file_default(const char *value, struct dfs_err *err);
/* Before a write: whether wc can be met at all (0), or why not in f (nonzero): 79
 * UnknownReplWriteConcern, 100 UnsatisfiableWriteConcern on a member; 2 BadValue for w > 1
 * or a custom mode on a standalone. Nothing is written after a refusal. */
int rs_wc_check(const struct rs_wc *wc, struct rs_wc_fail *f);
/* Where db's history stands (the clusterTime of its newest event, 0: none, or db NULL):
 * taken before a write, for rs_wc_wait. */
uint64_t rs_wc_mark(struct store_db *db);
/* After a write to db committed (before: rs_wc_mark before it): returns once wc is met (0),
 * or nonzero with f: 64 WriteConcernFailed at wtimeout (the write stays), 11602 when the
 * member stopped being primary meanwhile. A standalone, and a write that made no event
 * (nothing to replicate: an update that matched nothing), return 0 at once. */
int rs_wc_wait(struct store_db *db, uint64_t before, const struct rs_wc *wc,
	       struct rs_wc_fail *f);
/* f as the mount reports it: "waiting for replication timed out (64 WriteConcernFailed)",
 * DFS_ETIMEDOUT (64) or DFS_EINVAL (the others). */
int rs_wc_fail_err(const struct rs_wc_fail *f, struct dfs_err *err);
/* f as MongoDB's writeConcernError document, appended to reply. */
void rs_wc_fail_append(const struct rs_wc_fail *f, const struct rs_wc *wc, bson_t *reply);

/* `docfs rs ZK SET initiate|conf|reconfig|add|remove [ARG]` (cli.c calls it): prints the
 * reply (MongoDB's shape) and returns 0, or 1 after a refusal. */
int rs_cli(int argc, char **argv);

#endif
