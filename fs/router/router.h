/*
 * router.h - what the files of fs/router/ share: the cluster config kept in a docfs store
 * (config.c) and the admin commands run against it (cluster.c). The router mount itself,
 * chunk migrations and the balancer thread are not built yet; they are meant to use these
 * same functions (a chunk map from router_cfg_chunks_load, commands from /.cluster/command
 * through router_cluster_command).
 *
 * Thread-safety: a struct router_cfg (one open write transaction) is one thread's.
 */
#ifndef DOCFS_ROUTER_H
#define DOCFS_ROUTER_H

#include "query.h"

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

#endif
