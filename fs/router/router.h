/*
 * router.h - what the files of fs/router/ share: the cluster config kept in a docfs store
 * (config.c), the admin commands run against it (cluster.c), the router mount (mount.c) and
 * the routing of a collection's operations to its shards (route.c), chunk migrations
 * (migrate.c), the balancer thread (balance.c), the router as a mongos over the wire
 * protocol (wire.c) and, with -o zk=, the config kept in ZooKeeper (zkcfg.c).
 *
 * Thread-safety: a struct router_cfg (one open write transaction) is one thread's.
 */
#ifndef DOCFS_ROUTER_H
#define DOCFS_ROUTER_H

#include "query.h"

#include <sys/stat.h>

struct fs_result;

#define ROUTER_CONFIG_DB "config"
#define ROUTER_CHUNKSIZE_MB 64 /* config.settings chunksize when unset */

/* The config store with one write transaction open on its "config" database: everything a
 * command changes commits together or not at all. */
struct router_cfg {
	struct store *st;    /* Owned */
	struct store_db *db; /* Borrowed from st */
	struct store_txn *t; /* Owned: the open write transaction, NULL once ended */
};

/* Opens the store at dir (created when absent, as `docfs mount` would use it) and begins
 * the write transaction. Errors: the store's. */
int router_cfg_open(const char *dir, struct router_cfg *c, struct dfs_err *err);
/* Commits (router_cfg_close still needed). */
int router_cfg_commit(struct router_cfg *c, struct dfs_err *err);
/* Aborts an open transaction and closes the store. */
void router_cfg_close(struct router_cfg *c);

/* The documents of config.<coll> matching filter (NULL: all) in sort order (NULL: _id
 * order). *docs Owned (n copies), freed by router_docs_free; a missing collection has none. */
int router_cfg_list(struct router_cfg *c, const char *coll, const bson_t *filter,
		    const bson_t *sort, bson_t ***docs, int *n, struct dfs_err *err);
void router_docs_free(bson_t **docs, int n);
/* The first match of filter into out (initialised, empty): DFS_ENOENT when none. */
int router_cfg_get(struct router_cfg *c, const char *coll, const bson_t *filter, bson_t *out,
		   struct dfs_err *err);
/* Inserts doc or replaces the document of its _id (doc must have one). */
int router_cfg_put(struct router_cfg *c, const char *coll, const bson_t *doc, struct dfs_err *err);
/* Deletes the matches of filter; *n (may be NULL) gets how many. */
int router_cfg_del(struct router_cfg *c, const char *coll, const bson_t *filter, int64_t *n,
		   struct dfs_err *err);

/* The chunk map of sharded collection ns (its config.collections key, its config.chunks),
 * checked (query_chunk_map_check). m is initialised here; release it with
 * query_chunk_map_release. DFS_ENOENT when ns is not sharded. */
int router_cfg_chunks_load(struct router_cfg *c, const char *ns, struct query_chunk_map *m,
			   struct dfs_err *err);
/* Replaces the config.chunks of ns by m's chunks (MongoDB 4.x shapes: _id "<ns>-<min>",
 * ns, min, max, shard, lastmod, lastmodEpoch, history). */
int router_cfg_chunks_save(struct router_cfg *c, const char *ns, const struct query_chunk_map *m,
			   struct dfs_err *err);

/* Runs the admin command cmd (its first field names it: addShard, removeShard, listShards,
 * enableSharding, shardCollection, addShardToZone, removeShardFromZone,
 * updateZoneKeyRange, addTagRange, split, moveChunk, balancerStart, balancerStop,
 * balancerStatus) against c, and appends MongoDB's reply to reply (initialised, empty):
 * {..., ok: 1}, or {ok: 0, errmsg, code, codeName} and a nonzero return (the caller then
 * does not commit, so a failed command changes nothing). */
int router_cluster_command(struct router_cfg *c, const bson_t *cmd, bson_t *reply,
			   struct dfs_err *err);
/* Appends sh.status()'s text (shards, balancer, databases, sharded collections with their
 * chunk counts per shard, chunk ranges and tag ranges) to out. */
int router_cluster_status(struct router_cfg *c, struct dfs_buf *out, struct dfs_err *err);

/* ---- the router mount (mount.c) and routing (route.c) -------------------------------- */

#define ROUTER_MAX_SHARDS 64
#define ROUTER_PATH_MAX 8192

struct router_shard {
	char name[65];	 /* config.shards _id */
	char host[4096]; /* the directory the shard's docfs is mounted on (or reached through) */
};

/* Where a collection lives (route.c note 1). */
struct router_ns {
	struct router_shard *shards; /* Owned: every shard, in config.shards order */
	int nshards;
	char primary[65];	    /* the database's primary shard */
	bool sharded;		    /* the collection is sharded: */
	struct query_chunk_map map; /*   its chunks */
};

/* The shards and the placement of db.coll (db, coll may be NULL: the shards only) read
 * from c. Release with router_ns_release. */
int router_ns_load(struct router_cfg *c, const char *db, const char *coll, struct router_ns *out,
		   struct dfs_err *err);
void router_ns_release(struct router_ns *ns);
/* The shard of that name, or NULL. */
const struct router_shard *router_ns_shard(const struct router_ns *ns, const char *name);
/* "<host>/<rel>" into out. */
void router_shard_path(const struct router_shard *s, const char *rel, char *out, size_t cap);
/* 0, or DFS_EIO "shard 'X' (<host>) is unreachable: ..." (route.c note 5). */
int router_shard_ok(const struct router_shard *s, struct dfs_err *err);
/* The error of a failed request what to shard s (errno e), with the shard's own message
 * from its /.docfs/errors when it has one; returns the dfs code. */
int router_shard_fail(const struct router_shard *s, const char *what, int e, struct dfs_err *err);
/* The last line of shard s's /.docfs/errors (its time stamp kept), or "". */
void router_shard_last_error(const struct router_shard *s, char *out, size_t cap);
/* Writes len bytes of text to rel of shard s in one open-write-fsync-close (the shard
 * commits at the fsync, which a network filesystem between passes on with its status,
 * where it drops a close's); flags are open's (O_WRONLY and more). */
int router_shard_write(const struct router_shard *s, const char *rel, int flags, const char *text,
		       size_t len, struct dfs_err *err);
/* Writes all len bytes of text to fd (retrying short writes): 0, or -1 with errno. */
int router_write_all(int fd, const char *text, size_t len);
/* A copy of the sub-document d.key (NULL when it is not a document); bson_destroy it. */
bson_t *router_doc_field(const bson_t *d, const char *key);
/* The whole file at path appended to out (errno kept on failure). */
int router_read_file(const char *path, struct dfs_buf *out, struct dfs_err *err);

/* query/<component> of db.coll through the shards (route.c notes 2, 3) into r. */
int router_find(const struct router_ns *ns, const char *db, const char *coll, const char *component,
		struct fs_result *r, struct dfs_err *err);
/* explain/<component>: MongoDB's SINGLE_SHARD / SHARD_MERGE / SHARD_MERGE_SORT shape. */
int router_explain(const struct router_ns *ns, const char *db, const char *coll,
		   const char *component, struct fs_result *r, struct dfs_err *err);
/* Writes the documents of text (as .insert takes them) to the shards owning them (note 4). */
int router_insert(const struct router_ns *ns, const char *db, const char *coll, const char *text,
		  size_t len, struct dfs_err *err);
/* aggregate/<component> of db.coll through the shards (route.c note 7); the merge part
 * runs in merge_db (the router's scratch store). */
int router_aggregate(const struct router_ns *ns, const char *db, const char *coll,
		     const char *component, struct store_db *merge_db, struct fs_result *r,
		     struct dfs_err *err);
/* update/<q>, delete/<q> or .bulk (rest) of db.coll with request text through the shards
 * (route.c notes 6, 8); MongoDB's result (one JSON line) appended to out. */
int router_write(const struct router_ns *ns, const char *db, const char *coll, const char *rest,
		 const char *text, size_t len, struct dfs_buf *out, struct dfs_err *err);
/* The shard holding document file name of db.coll (first found), with its attributes;
 * DFS_ENOENT when none. */
int router_doc_holder(const struct router_ns *ns, const char *db, const char *coll,
		      const char *name, const struct router_shard **out, struct stat *st);
/* Writes document file name of a sharded db.coll to the shard owning its key; a write that
 * would change a document's shard key is DFS_EPERM/DFS_EINVAL. */
int router_doc_write(const struct router_ns *ns, const char *db, const char *coll, const char *name,
		     const char *text, size_t len, struct dfs_err *err);

/* ---- migrations (migrate.c) --------------------------------------------------------- */

/* The chunk of ns that cmd's find (a document with the shard key) or bounds names (cluster.c). */
int router_chunk_named(const struct query_chunk_map *m, const bson_t *cmd, int *idx, bson_t *reply,
		       struct dfs_err *err);
/* Moves the documents of chunk idx of db.coll to shard to (migrate.c note 1); commit(ctx)
 * records the new owner in the config inside the critical section. stats (may be NULL)
 * gets cloned, caughtUp, deletedFromDonor. DFS_EBUSY while another migration runs. */
int router_migrate(const struct router_ns *ns, const char *db, const char *coll, int idx,
		   const char *to, int (*commit)(void *ctx, struct dfs_err *err), void *ctx,
		   bson_t *stats, struct dfs_err *err);
/* Finishes or rolls back what the migration log (config.migrations) says was under way
 * when a router died (migrate.c note 6): the documents of each logged range go from the
 * shard that does not own it now. Entries whose shards cannot be reached stay for the next
 * call. Returns how many entries were settled. */
int router_migrations_recover(void);
/* Whether db.coll has a migration running; *from gets its source shard's name. */
bool router_migration_of(const char *db, const char *coll, char *from, size_t cap);
/* The router's routing lock (mount.c): routed reads and writes hold it shared, a
 * migration's critical section exclusive. */
void router_routing_lock(bool exclusive);
void router_routing_unlock(void);

/* ---- the router's config access (mount.c) and the balancer (balance.c) ------------- */

/* router_ns_load in a read transaction of the router's config. */
int router_ns_read(const char *db, const char *coll, struct router_ns *out, struct dfs_err *err);
/* In one write transaction of the router's config: put (may be NULL) inserted or replaced
 * in config.<coll>, then the matches of del (may be NULL) deleted. */
int router_cfg_write(const char *coll, const bson_t *put, const bson_t *del, struct dfs_err *err);
/* router_cfg_list in a read transaction of the router's config. */
int router_cfg_read_list(const char *coll, const bson_t *filter, bson_t ***docs, int *n,
			 struct dfs_err *err);
/* Runs an admin command in one write transaction of the router's config (committed when it
 * succeeds). */
int router_config_command(const bson_t *cmd, bson_t *reply, struct dfs_err *err);
/* Whether balancerStop is in force (config.settings). */
bool router_balancer_stopped(void);
/* The balancer thread (balance.c): a round every interval_ms; chunk_mb overrides the
 * config's chunk size (0: config.settings chunksize). */
void router_balancer_start(int interval_ms, int64_t chunk_mb);
void router_balancer_stop(void);
/* Appends {docfs: {threadRunning, intervalMs, rounds, moves, splits, lastError}} to out. */
void router_balancer_figures(bson_t *out);

/* moveChunk through the router: the documents move (migrate.c), then the owner; reply gets
 * MongoDB's reply, failed ones included. */
int router_move_chunk(const bson_t *cmd, bson_t *reply, struct dfs_err *err);
/* Runs fn(c, ctx) in one write transaction of the router's config, committed when it
 * returns 0. */
int router_config_update(int (*fn)(struct router_cfg *c, void *ctx, struct dfs_err *err), void *ctx,
			 struct dfs_err *err);
/* The router's config store and its scratch database for merged aggregations (Borrowed,
 * valid while the router serves). */
struct store *router_config_store(void);
struct store_db *router_merge_db(void);
/* Copies in to out (initialised) with the field names config.c stores with U+FF0E for '.'
 * decoded, at every depth. */
void router_cfg_decode(const bson_t *in, bson_t *out);

/* The moveChunk commit of a migration (mount.c): in one write transaction of the config,
 * the chunk [min, max) of ns must still be on shard from (DFS_EBUSY, reply {ok: 0, code 117}
 * when another router moved or split it meanwhile), then it goes to shard to. */
int router_commit_move(const char *ns, const bson_t *min, const bson_t *max, const char *from,
		       const char *to, bson_t *reply, struct dfs_err *err);
/* Inserts doc into config.<coll> in one write transaction; DFS_EBUSY when its _id is there. */
int router_cfg_insert_new(const char *coll, const bson_t *doc, struct dfs_err *err);

/* ---- the config in ZooKeeper (zkcfg.c, -o zk=) ----------------------------------------- */

/* Connects to hosts (';' or '+' between servers) and registers this router under
 * /docfs/cluster/<cluster>/ (zkcfg.c note 1); *fresh tells that the cluster had no config
 * yet. */
int router_zk_open(const char *hosts, const char *cluster, bool *fresh, struct dfs_err *err);
/* Ends the refresher thread and the session (its ephemeral znodes go). */
void router_zk_close(void);
/* Whether the config is in ZooKeeper (a session is open). */
bool router_zk_on(void);
/* This router's id (its routers/ znode), "" without zk=. Borrowed, valid while open. */
const char *router_zk_id(void);
/* The config version the local cache holds. */
int64_t router_zk_version(void);
/* Uploads the local config db to a fresh cluster (the first router of a cluster). */
int router_zk_seed(struct store_db *db, struct dfs_err *err);
/* Replaces the local config db by ZooKeeper's when it is stale (or force): note 2. The
 * caller holds the config mutex. */
int router_zk_sync(struct store_db *db, bool force, struct dfs_err *err);
/* Commits what c's open transaction changed to ZooKeeper as one compare-and-set (note 3):
 * DFS_EBUSY when another router committed first (nothing written; sync and run again).
 * The caller commits c only after 0. */
int router_zk_commit(struct router_cfg *c, struct dfs_err *err);
/* Starts the refresher thread (note 5); resync reloads with the routing lock held
 * exclusively and gives the version loaded. */
void router_zk_start(int (*resync)(int64_t *version, struct dfs_err *err));
/* Waits until every other live router acknowledged config version (note 5). */
int router_zk_wait_acks(int64_t version, int timeout_ms, struct dfs_err *err);
/* Whether the router of that id is serving (its ephemeral znode exists). */
bool router_zk_alive(const char *id);
/* Whether this router holds the balancer's lock (taken when free); true without zk=. */
bool router_zk_balancer_turn(void);
/* 0, or DFS_EIO when this router may not route: its ZooKeeper session expired or has been
 * disconnected for two thirds of its timeout (zkcfg.c note 6). 0 without zk=. */
int router_zk_check(struct dfs_err *err);
/* Whether it held the lock at its last round (for /.cluster/balancer); false without zk=. */
bool router_zk_balancer_held(void);

/* ---- the router as a mongos (wire.c) ------------------------------------------------- */

/* Binds the wire protocol's listeners (before the daemon forks) for the config store at
 * directory config. */
int router_wire_bind(const char *config, const char *const *addrs, int n, bool noauth,
		     struct dfs_err *err);
/* Writes config.version and config.mongos and starts serving (after the fork, with the
 * config store open); nothing when nothing was bound. */
int router_wire_start(struct dfs_err *err);
/* Stops the server (no-op when none). */
void router_wire_stop(void);

#define ROUTER_MAX_LISTEN 8

/* docfs router CONFIG_STORE MOUNTPOINT: serves the mount until it is unmounted. */
struct router_mount_opts {
	const char *config, *mountpoint, *log, *fuse_opts;
	bool foreground, debug;
	const char *listen[ROUTER_MAX_LISTEN]; /* -o listen=ADDR: also a mongos there */
	int nlisten;
	bool noauth;	  /* -o noauth: a listen address that is not loopback */
	int balancer_ms;  /* the balancer's round (0: 10 s) */
	int64_t chunk_mb; /* -o chunk_mb (0: config.settings chunksize) */
	const char *zk;	  /* -o zk=HOST:PORT[;HOST:PORT]: the config in ZooKeeper */
	const char *cluster; /* -o cluster=NAME: its cluster there */
};
int router_mount_run(const struct router_mount_opts *o, struct dfs_err *err);
/* 0, or DFS_EBUSY when the store at dir is a router's cache of a cluster config kept in
 * ZooKeeper (-o zk=): `docfs cluster` would change a copy that the next reload replaces. */
int router_cfg_zk_cache(const char *dir, struct dfs_err *err);
/* docfs cluster CONFIG_STORE '{moveChunk: ...}': the migration of the router's moveChunk
 * (migrate.c) run by the CLI, refused while a router serves the config (mount.c note 5);
 * reply gets MongoDB's reply, failed ones included. */
int router_cli_move_chunk(const char *config, const bson_t *cmd, bson_t *reply,
			  struct dfs_err *err);

#endif
