/*
 * replset.h - replica sets (issue 31), the part built so far: a set's configuration
 * (rsconf.c: rs.conf() checked and completed as mongod does) kept in ZooKeeper (zk.c,
 * through its official C client), and `docfs rs` running the shell's rs.initiate,
 * rs.conf, rs.reconfig, rs.add and rs.remove against it. Members (replication, elections,
 * write concern) are not built yet.
 *
 * Thread-safety: none needed yet (the command line is one thread).
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

/* `docfs rs ZK SET initiate|conf|reconfig|add|remove [ARG]` (cli.c calls it): prints the
 * reply (MongoDB's shape) and returns 0, or 1 after a refusal. */
int rs_cli(int argc, char **argv);

#endif
