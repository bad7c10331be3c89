/*
 * mount.c - `docfs router CONFIG_STORE MOUNTPOINT`: one mount over the shards of a cluster.
 * The namespace is a plain mount's (databases, collections, documents, query/, explain/,
 * .insert, .indexes/) plus `/.cluster/` (the admin command file and the config as files)
 * and `/.docfs/errors`. Every operation becomes file operations on the shards' mounted
 * directories (config.shards host); route.c decides which shards and merges what they
 * answer. This file does the FUSE plumbing, with libfuse's path-based API: the router keeps
 * no inodes of its own.
 *
 * Design notes
 * 1. Nothing is cached: attributes and entries time out at once and each operation reads
 *    the config (one read transaction on CONFIG_STORE under a mutex), so a `docfs cluster`
 *    command run beside the mount, or a shard's own writes, are seen by the next operation.
 * 2. Databases and collections exist on every shard: mkdir and rmdir go to all of them
 *    (each must be reachable), listings are the union. The documents of an unsharded
 *    collection, and every path inside it, are its primary shard's. In a sharded one, a
 *    document file is read from the shard that holds it, written to the shard owning its
 *    shard key (the whole file is kept in the router until the close, then sent in one
 *    write), `.insert` is split by owner, `.indexes/<name>` writes go to every shard, and
 *    query/ and explain/ are route.c's. Other paths (scratch files, .stats, .changes, the
 *    fixed directories) are the primary shard's; `mv` of a scratch file onto a document
 *    name (what sed -i does) writes the document where its key belongs.
 * 3. /.cluster/command runs the command written to it at the first read after the write
 *    (the reply, pretty JSON, is read back on the same descriptor, at offset 0 or at the
 *    offset the write ended), or at the close when nothing read it: a failed command then
 *    fails the close (EINVAL) with its errmsg in /.docfs/errors. The other /.cluster/ files
 *    are snapshots made at open: shards, databases, collections, chunks, zones and
 *    migrations (the config documents as JSON Lines: the migration log of migrate.c note
 *    6), balancer (balancerStatus) and status (sh.status()).
 * 4. Errors: a failed operation returns the shard's errno; its message (the shard's own,
 *    from the shard's /.docfs/errors, prefixed with the shard's name) goes to the router's
 *    /.docfs/errors, as does "shard 'X' (<host>) is unreachable: ..." (EIO).
 * 5. A router holds a shared flock of <CONFIG_STORE>/.router-lock while it serves; `docfs
 *    cluster` runs a moveChunk itself (router_cli_move_chunk) only holding it exclusively.
 *    A migration's critical section must hold off every writer of the collection, and the
 *    CLI cannot hold off a router's: with a router mounted the CLI refuses and names
 *    /.cluster/command, and a router does not start during a CLI migration.
 *    With -o zk= (zkcfg.c) there is no lock: CONFIG_STORE is this router's cache of the
 *    config in ZooKeeper, several routers serve one cluster, and migrations wait for the
 *    other routers instead (migrate.c note 7).
 * 6. A shard that is gone fails only what needs it. A database or collection directory is
 *    there when any shard has it; the fixed paths of a sharded collection (query/,
 *    explain/, .indexes, ...) are the primary's, or another shard's while the primary is
 *    unreachable, so a query that targets the shards still there keeps working. The
 *    primary's own paths (scratch files) fail naming it.
 * 7. With zk=, every config read first makes the cache current (zkcfg.c note 2) and every
 *    config write is a compare-and-set in ZooKeeper, run again over the winner's config
 *    when another router committed first (router_config_update). While another live
 *    router's migration of a collection is in its critical section (its config.migrations
 *    entry is `critical` and the chunk is still on the source), ns_load of that collection
 *    waits, with the routing lock let go so that this router's refresher can take it and
 *    acknowledge the commit; after 60 s it fails with EBUSY.
 */
#define FUSE_USE_VERSION 34
#include <fuse.h>

#include "router.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "fs_int.h"

static struct {
	struct store *st;	   /* the config store */
	struct store_db *db;	   /* its config database */
	struct store *merge;	   /* the scratch store where merged aggregations run */
	struct store_db *merge_db; /*   its one database */
	char merge_dir[64];
	pthread_mutex_t lock;
	time_t started;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Routed reads and writes hold it shared, a migration's critical section exclusively
 * (migrate.c note 1d); writers are preferred so a migration is not starved. */
static pthread_rwlock_t routing;
/* The calling thread holds it shared (ns_load lets it go while it waits, note 7). */
static _Thread_local int routing_shared;

void router_routing_lock(bool exclusive)
{
	if (exclusive) {
		pthread_rwlock_wrlock(&routing);
	} else {
		pthread_rwlock_rdlock(&routing);
		routing_shared++;
	}
}

void router_routing_unlock(void)
{
	if (routing_shared > 0)
		routing_shared--;
	pthread_rwlock_unlock(&routing);
}

/* ---- the config (note 1) ------------------------------------------------------------ */

/* With zk=, the local config made current first (zkcfg.c note 2), under R.lock. A read
 * goes on over the cache when ZooKeeper cannot be reached (the failure logged); a write
 * fails. */
static int zk_sync(bool for_write, struct dfs_err *err)
{
	struct dfs_err e = {0};

	if (!router_zk_on() || !router_zk_sync(R.db, false, &e))
		return 0;
	if (for_write) {
		*err = e;
		return e.code;
	}
	static time_t logged; /* once a minute at most (R.lock held) */

	if (time(NULL) - logged >= 60) {
		logged = time(NULL);
		fs_errlog_add("router: %s (serving the config last loaded)", e.msg);
	}
	return 0;
}

/* Whether another live router's migration of db.coll is in its critical section and has
 * not committed yet (note 7): its entry in config.migrations says critical, and the chunk
 * is still on the migration's source. */
static bool held_off(struct router_cfg *c, const char *db, const char *coll,
		     const struct router_ns *ns)
{
	char full[2 * DFS_MAX_NS_NAME + 2];
	bson_t **docs = NULL, *f;
	bool held = false;
	int n = 0;

	if (!ns->sharded)
		return false;
	snprintf(full, sizeof(full), "%s.%s", db, coll);
	f = BCON_NEW("ns", BCON_UTF8(full), "critical", BCON_BOOL(true));
	if (router_cfg_list(c, "migrations", f, NULL, &docs, &n, NULL))
		n = 0;
	for (int i = 0; i < n && !held; i++) {
		bson_t *min = router_doc_field(docs[i], "min"),
		       *max = router_doc_field(docs[i], "max");
		bson_iter_t it;
		const char *who = "", *from = "";

		if (bson_iter_init_find(&it, docs[i], "router") && BSON_ITER_HOLDS_UTF8(&it))
			who = bson_iter_utf8(&it, NULL);
		if (bson_iter_init_find(&it, docs[i], "from") && BSON_ITER_HOLDS_UTF8(&it))
			from = bson_iter_utf8(&it, NULL);
		if (min && max && strcmp(who, router_zk_id()) && router_zk_alive(who))
			for (int k = 0; k < ns->map.n && !held; k++)
				held = !query_shard_bound_compare(ns->map.c[k].min, min) &&
				       !query_shard_bound_compare(ns->map.c[k].max, max) &&
				       !strcmp(ns->map.c[k].shard, from);
		if (min)
			bson_destroy(min);
		if (max)
			bson_destroy(max);
	}
	router_docs_free(docs, n);
	bson_destroy(f);
	return held;
}

#define HELD_OFF_WAIT_MS 60000

static int ns_load(const char *db, const char *coll, struct router_ns *ns, struct dfs_err *err)
{
	int zrc;

	/* with zk=, a router cut off from ZooKeeper routes nothing (zkcfg.c note 6) */
	if (db && coll && (zrc = router_zk_check(err)))
		return zrc;
	for (int waited = 0;; waited += 20) {
		struct router_cfg c = {.st = R.st, .db = R.db};
		bool held = false;
		int rc;

		pthread_mutex_lock(&R.lock);
		zk_sync(false, err);
		rc = store_txn_begin(R.db, false, &c.t, err);
		if (!rc) {
			rc = router_ns_load(&c, db, coll, ns, err);
			held = !rc && db && coll && router_zk_on() && held_off(&c, db, coll, ns);
			store_txn_abort(c.t);
		}
		pthread_mutex_unlock(&R.lock);
		if (!held)
			return rc;
		router_ns_release(ns);
		if (waited >= HELD_OFF_WAIT_MS)
			return dfs_err_set(
				err, DFS_EBUSY,
				"%s.%s: a chunk migration of another router stayed in its "
				"critical section for %d s",
				db, coll, HELD_OFF_WAIT_MS / 1000);
		/* the routing lock is let go meanwhile, so this router's refresher can
		 * acknowledge the migration's commit (zkcfg.c note 5) */
		int held_shared = routing_shared;

		if (held_shared)
			router_routing_unlock();
		usleep(20000);
		if (held_shared)
			router_routing_lock(false);
	}
}

int router_ns_read(const char *db, const char *coll, struct router_ns *out, struct dfs_err *err)
{
	return ns_load(db, coll, out, err);
}

int router_cfg_read_list(const char *coll, const bson_t *filter, bson_t ***docs, int *n,
			 struct dfs_err *err)
{
	struct router_cfg c = {.st = R.st, .db = R.db};
	int rc;

	pthread_mutex_lock(&R.lock);
	zk_sync(false, err);
	rc = store_txn_begin(R.db, false, &c.t, err);
	if (!rc) {
		rc = router_cfg_list(&c, coll, filter, NULL, docs, n, err);
		store_txn_abort(c.t);
	}
	pthread_mutex_unlock(&R.lock);
	return rc;
}

struct cfg_write {
	const char *coll;
	const bson_t *put, *del;
	bool only_new; /* put must not replace a document */
};

static int cfg_write_fn(struct router_cfg *c, void *ctx, struct dfs_err *err)
{
	struct cfg_write *w = ctx;
	int rc = 0;

	if (w->only_new) {
		bson_t f = BSON_INITIALIZER, have = BSON_INITIALIZER;
		bson_iter_t it;

		if (bson_iter_init_find(&it, w->put, "_id"))
			bson_append_value(&f, "_id", 3, bson_iter_value(&it));
		rc = router_cfg_get(c, w->coll, &f, &have, err);
		if (rc == 0) {
			rc = dfs_err_set(err, DFS_EBUSY, "config.%s already holds that _id",
					 w->coll);
		} else if (rc == DFS_ENOENT) {
			dfs_err_clear(err);
			rc = 0;
		}
		bson_destroy(&f);
		bson_destroy(&have);
	}
	if (!rc && w->put)
		rc = router_cfg_put(c, w->coll, w->put, err);
	if (!rc && w->del)
		rc = router_cfg_del(c, w->coll, w->del, NULL, err);
	return rc;
}

int router_cfg_write(const char *coll, const bson_t *put, const bson_t *del, struct dfs_err *err)
{
	struct cfg_write w = {coll, put, del, false};

	return router_config_update(cfg_write_fn, &w, err);
}

int router_cfg_insert_new(const char *coll, const bson_t *doc, struct dfs_err *err)
{
	struct cfg_write w = {coll, doc, NULL, true};

	return router_config_update(cfg_write_fn, &w, err);
}

bool router_balancer_stopped(void)
{
	bson_t **docs = NULL, f;
	bool stopped = false;
	int n = 0;

	bson_init(&f);
	BSON_APPEND_UTF8(&f, "_id", "balancer");
	if (!router_cfg_read_list("settings", &f, &docs, &n, NULL) && n > 0) {
		bson_iter_t it;

		stopped = bson_iter_init_find(&it, docs[0], "stopped") && bson_iter_as_bool(&it);
	}
	router_docs_free(docs, n);
	bson_destroy(&f);
	return stopped;
}

/* Logs err and returns the negative errno FUSE wants. */
static int fail_err(const char *what, const struct dfs_err *err)
{
	if (err->code != DFS_ENOENT || strstr(err->msg, "shard"))
		fs_errlog_add("%s: %s", what, err->msg[0] ? err->msg : dfs_code_name(err->code));
	return -fs_errno(err->code);
}

/* ---- paths ------------------------------------------------------------------------- */

enum rp_kind {
	RP_NONE,
	RP_ROOT,
	RP_CLUSTER,	 /* /.cluster */
	RP_CLUSTER_FILE, /* /.cluster/<file> */
	RP_DOCFS,	 /* /.docfs */
	RP_ERRORS,	 /* /.docfs/errors */
	RP_DB,
	RP_COLL,
	RP_IN_COLL, /* below /<db>/<coll>/: rest */
};

struct rp {
	enum rp_kind kind;
	char db[256], coll[256];
	const char *rest; /* RP_IN_COLL: the path after "/<db>/<coll>/"; RP_CLUSTER_FILE: name */
	const char *rel;  /* the path without its leading '/' */
};

static const char *const cluster_files[] = {"command", "shards", "databases",  "collections",
					    "chunks",  "zones",	 "migrations", "balancer",
					    "status",  NULL};

static bool cluster_file(const char *name)
{
	for (int i = 0; cluster_files[i]; i++)
		if (!strcmp(cluster_files[i], name))
			return true;
	return false;
}

static void classify(const char *path, struct rp *p)
{
	const char *a = path + (path[0] == '/'), *s1, *s2;

	memset(p, 0, sizeof(*p));
	p->rel = a;
	if (!*a) {
		p->kind = RP_ROOT;
		return;
	}
	s1 = strchr(a, '/');
	if (a[0] == '.') {
		size_t n = s1 ? (size_t)(s1 - a) : strlen(a);

		if (n == 8 && !memcmp(a, ".cluster", 8)) {
			p->kind = !s1			 ? RP_CLUSTER
				  : cluster_file(s1 + 1) ? RP_CLUSTER_FILE
							 : RP_NONE;
			p->rest = s1 ? s1 + 1 : NULL;
		} else if (n == 6 && !memcmp(a, ".docfs", 6)) {
			p->kind = !s1 ? RP_DOCFS : !strcmp(s1 + 1, "errors") ? RP_ERRORS : RP_NONE;
		}
		return;
	}
	if (!s1) {
		snprintf(p->db, sizeof(p->db), "%s", a);
		p->kind = strlen(a) < sizeof(p->db) ? RP_DB : RP_NONE;
		return;
	}
	snprintf(p->db, sizeof(p->db), "%.*s", (int)(s1 - a), a);
	s2 = strchr(s1 + 1, '/');
	snprintf(p->coll, sizeof(p->coll), "%.*s",
		 (int)(s2 ? (size_t)(s2 - s1 - 1) : strlen(s1 + 1)), s1 + 1);
	p->kind = s2 ? RP_IN_COLL : RP_COLL;
	p->rest = s2 ? s2 + 1 : NULL;
	if (p->kind == RP_IN_COLL && !*p->rest)
		p->kind = RP_COLL;
}

/* What a path inside a sharded collection is (note 2). */
enum sub_kind {
	SUB_PRIMARY,
	SUB_QUERY,
	SUB_EXPLAIN,
	SUB_INSERT,
	SUB_DOC,
	SUB_INDEX,
	SUB_WRITE,    /* update/<q>, delete/<q> */
	SUB_AGG,      /* aggregate/<pipeline> */
	SUB_UNROUTED, /* what the router cannot answer for a sharded collection yet */
};

static enum sub_kind sub_kind(const char *rest)
{
	size_t n = strlen(rest);

	if (!strncmp(rest, "query/", 6) && rest[6])
		return SUB_QUERY;
	if (!strncmp(rest, "explain/", 8) && rest[8])
		return SUB_EXPLAIN;
	if (!strcmp(rest, ".insert"))
		return SUB_INSERT;
	if (((!strncmp(rest, "update/", 7) || !strncmp(rest, "delete/", 7)) && rest[7]) ||
	    !strcmp(rest, ".bulk") || !strncmp(rest, ".bulk?", 6))
		return SUB_WRITE;
	if (!strncmp(rest, "aggregate/", 10) && rest[10])
		return SUB_AGG;
	if (!strncmp(rest, ".stats", 6) || !strncmp(rest, ".changes", 8))
		return SUB_UNROUTED;
	if (!strncmp(rest, ".indexes/", 9) && rest[9] && !strchr(rest + 9, '/'))
		return SUB_INDEX;
	if (!strchr(rest, '/') && rest[0] != '.' && n > 5 && !strcmp(rest + n - 5, ".json"))
		return SUB_DOC;
	return SUB_PRIMARY;
}

static void shard_abs(const struct router_shard *s, const char *rel, char *out)
{
	router_shard_path(s, rel, out, ROUTER_PATH_MAX);
}

/* ---- handles ----------------------------------------------------------------------- */

enum rh_kind {
	RH_FWD,	   /* an open file on a shard: fd */
	RH_RESULT, /* generated at open: res */
	RH_CMD,	   /* /.cluster/command: the command written (buf) and its reply (res) */
	RH_DOC,	   /* a document of a sharded collection being written: buf */
	RH_INSERT, /* .insert of a sharded collection: buf */
	RH_INDEX,  /* .indexes/<name> of a sharded collection being written: buf */
	RH_WRITE,  /* update/ or delete/ of a sharded collection: the request (buf), result (res) */
};

struct rh {
	enum rh_kind kind;
	int fd;
	struct fs_result res;
	struct dfs_buf buf;
	bool dirty, ran;
	off_t base; /* RH_CMD, RH_WRITE: the offset the reply is read from */
	bool based; /*   decided at the first read after the request ran */
	struct rp p;
	char path[ROUTER_PATH_MAX];
	pthread_mutex_t lock;
};

static struct rh *rh_new(enum rh_kind kind, const char *path)
{
	struct rh *h = calloc(1, sizeof(*h));

	if (!h)
		abort();
	h->kind = kind;
	h->fd = -1;
	fs_result_init(&h->res);
	dfs_buf_init(&h->buf);
	snprintf(h->path, sizeof(h->path), "%s", path);
	classify(h->path, &h->p);
	pthread_mutex_init(&h->lock, NULL);
	return h;
}

static void rh_free(struct rh *h)
{
	if (h->fd >= 0)
		close(h->fd);
	fs_result_release(&h->res);
	dfs_buf_release(&h->buf);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static struct rh *rh_of(struct fuse_file_info *fi)
{
	return (struct rh *)(uintptr_t)fi->fh;
}

static int cluster_render(const char *name, struct dfs_buf *out, struct dfs_err *err);

/* ---- attributes -------------------------------------------------------------------- */

static void dir_stat(struct stat *st, mode_t mode)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFDIR | mode;
	st->st_nlink = 2;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_mtime = st->st_ctime = st->st_atime = R.started;
}

static void file_stat(struct stat *st, mode_t mode)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFREG | mode;
	st->st_nlink = 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_mtime = st->st_ctime = st->st_atime = time(NULL);
}

/* stat of rel on the first shard that has it (all reachable, else EIO). */
static int stat_any(const struct router_ns *ns, const char *rel, struct stat *st,
		    struct dfs_err *err)
{
	int failed = 0;

	/* a shard that is gone fails the path only when no other shard has it (note 6) */
	for (int i = 0; i < ns->nshards; i++) {
		char p[ROUTER_PATH_MAX];
		struct dfs_err e = {0};

		shard_abs(&ns->shards[i], rel, p);
		if (lstat(p, st) == 0) {
			dfs_err_clear(err);
			return 0;
		}
		if (errno != ENOENT)
			router_shard_fail(&ns->shards[i], rel, errno, &e);
		else
			router_shard_ok(&ns->shards[i], &e);
		if (e.code && !failed++)
			*err = e;
		else
			dfs_err_clear(&e);
	}
	return failed ? err->code : DFS_ENOENT;
}

/* A fixed path of a sharded collection (query/, .indexes, ...): the primary's, or any other
 * shard's while the primary is unreachable (every shard holding a chunk has them). */
static int stat_primary(const struct router_ns *ns, const char *rel, struct stat *st,
			struct dfs_err *err)
{
	const struct router_shard *s = router_ns_shard(ns, ns->primary);
	char a[ROUTER_PATH_MAX];

	shard_abs(s, rel, a);
	if (lstat(a, st) == 0)
		return 0;
	int e = errno;

	if (router_shard_ok(s, err) == 0)
		return router_shard_fail(s, rel, e, err);
	for (int i = 0; i < ns->nshards; i++) {
		if (&ns->shards[i] == s)
			continue;
		shard_abs(&ns->shards[i], rel, a);
		if (lstat(a, st) == 0) {
			dfs_err_clear(err);
			return 0;
		}
	}
	return err->code;
}

static int r_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct dfs_err err = {0};
	struct router_ns ns;
	struct rp p;
	int rc;

	classify(path, &p);
	if (fi && fi->fh && rh_of(fi)->kind != RH_FWD) {
		/* a file the router is writing (a new document is nowhere else yet) */
		struct rh *h = rh_of(fi);

		file_stat(st, h->kind == RH_RESULT ? 0444 : 0644);
		st->st_size = (off_t)(h->kind == RH_RESULT ? h->res.size : h->buf.len);
		return 0;
	}
	switch (p.kind) {
	case RP_NONE:
		return -ENOENT;
	case RP_ROOT:
	case RP_CLUSTER:
	case RP_DOCFS:
		dir_stat(st, 0755);
		return 0;
	case RP_CLUSTER_FILE:
	case RP_ERRORS: {
		/* the size of what an open would show now (tail seeks from it) */
		struct dfs_buf b;

		dfs_buf_init(&b);
		if (p.kind == RP_ERRORS)
			fs_errlog_render(&b);
		else if (strcmp(p.rest, "command"))
			cluster_render(p.rest, &b, NULL);
		file_stat(st,
			  p.kind == RP_CLUSTER_FILE && !strcmp(p.rest, "command") ? 0644 : 0444);
		st->st_size = (off_t)b.len;
		dfs_buf_release(&b);
		return 0;
	}
	default:
		break;
	}
	if ((rc = ns_load(p.db, p.kind == RP_DB ? NULL : p.coll, &ns, &err)))
		return fail_err("getattr", &err);
	if (p.kind == RP_IN_COLL && ns.sharded) {
		enum sub_kind k = sub_kind(p.rest);

		if (k == SUB_QUERY || k == SUB_EXPLAIN || k == SUB_AGG) {
			file_stat(st, 0444);
			rc = 0;
		} else if (k == SUB_DOC) {
			const struct router_shard *s;

			rc = router_doc_holder(&ns, p.db, p.coll, p.rest, &s, st);
			/* not found: every shard must have answered (note 4) */
			for (int i = 0; rc && i < ns.nshards; i++)
				if (router_shard_ok(&ns.shards[i], &err))
					rc = err.code;
		} else {
			rc = stat_primary(&ns, p.rel, st, &err);
		}
	} else if (p.kind == RP_IN_COLL) {
		const struct router_shard *s = router_ns_shard(&ns, ns.primary);
		char a[ROUTER_PATH_MAX];

		shard_abs(s, p.rel, a);
		rc = lstat(a, st) ? router_shard_fail(s, p.rel, errno, &err) : 0;
	} else {
		rc = stat_any(&ns, p.rel, st, &err);
	}
	router_ns_release(&ns);
	if (rc == DFS_ENOENT)
		return -ENOENT;
	return rc ? fail_err("getattr", &err) : 0;
}

/* ---- listings ---------------------------------------------------------------------- */

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The union of the listings of rel on shards (each must answer), sorted, unique. */
static int list_union(const struct router_shard *const *sh, int n, const char *rel, bool dots,
		      char ***names, size_t *count, struct dfs_err *err)
{
	size_t cap = 0;

	*names = NULL;
	*count = 0;
	for (int i = 0; i < n; i++) {
		char p[ROUTER_PATH_MAX];
		struct dirent *de;
		DIR *d;

		shard_abs(sh[i], rel, p);
		if (!(d = opendir(p))) {
			if (errno == ENOENT && !router_shard_ok(sh[i], NULL))
				continue; /* not on this shard */
			return router_shard_fail(sh[i], rel[0] ? rel : "/", errno, err);
		}
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (!dots && de->d_name[0] == '.')
				continue;
			if (*count == cap) {
				cap = cap ? 2 * cap : 256;
				*names = realloc(*names, cap * sizeof(char *));
				if (!*names)
					abort();
			}
			(*names)[(*count)++] = strdup(de->d_name);
		}
		closedir(d);
	}
	if (*count)
		qsort(*names, *count, sizeof(char *), str_cmp);
	return 0;
}

static int r_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		     struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	const struct router_shard *sh[ROUTER_MAX_SHARDS];
	struct dfs_err err = {0};
	struct router_ns ns;
	char **names = NULL;
	size_t count = 0;
	struct rp p;
	int n = 0, rc;

	(void)off;
	(void)fi;
	(void)flags;
	classify(path, &p);
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	if (p.kind == RP_CLUSTER) {
		for (int i = 0; cluster_files[i]; i++)
			fill(buf, cluster_files[i], NULL, 0, 0);
		return 0;
	}
	if (p.kind == RP_DOCFS) {
		fill(buf, "errors", NULL, 0, 0);
		return 0;
	}
	if (p.kind != RP_ROOT && p.kind != RP_DB && p.kind != RP_COLL && p.kind != RP_IN_COLL)
		return -ENOTDIR;
	if ((rc = ns_load(p.kind == RP_ROOT ? NULL : p.db, p.kind >= RP_COLL ? p.coll : NULL, &ns,
			  &err)))
		return fail_err("readdir", &err);
	if (p.kind == RP_ROOT || p.kind == RP_DB || (p.kind == RP_COLL && ns.sharded)) {
		for (int i = 0; i < ns.nshards && n < ROUTER_MAX_SHARDS; i++)
			sh[n++] = &ns.shards[i];
	} else {
		sh[n++] = router_ns_shard(&ns, ns.primary);
	}
	rc = list_union(sh, n, p.rel, p.kind != RP_ROOT, &names, &count, &err);
	if (!rc && p.kind == RP_ROOT) {
		fill(buf, ".cluster", NULL, 0, 0);
		fill(buf, ".docfs", NULL, 0, 0);
	}
	for (size_t i = 0; i < count; i++) {
		if (!rc && (i == 0 || strcmp(names[i - 1], names[i])))
			fill(buf, names[i], NULL, 0, 0);
	}
	for (size_t i = 0; i < count; i++)
		free(names[i]);
	free(names);
	router_ns_release(&ns);
	return rc ? fail_err("readdir", &err) : 0;
}

/* ---- /.cluster (note 3) ------------------------------------------------------------- */

static int cluster_render(const char *name, struct dfs_buf *out, struct dfs_err *err)
{
	struct router_cfg c = {.st = R.st, .db = R.db};
	int rc;

	pthread_mutex_lock(&R.lock);
	zk_sync(false, err);
	rc = store_txn_begin(R.db, false, &c.t, err);
	if (!rc && !strcmp(name, "status")) {
		rc = router_cluster_status(&c, out, err);
	} else if (!rc && !strcmp(name, "balancer")) {
		bson_t cmd, reply;

		bson_init(&cmd);
		bson_init(&reply);
		BSON_APPEND_INT32(&cmd, "balancerStatus", 1);
		rc = router_cluster_command(&c, &cmd, &reply, err);
		if (!rc) {
			router_balancer_figures(&reply);
			rc = store_codec_render(&reply, STORE_RENDER_PRETTY, out, err);
		}
		bson_destroy(&cmd);
		bson_destroy(&reply);
	} else if (!rc) {
		const char *coll = !strcmp(name, "zones") ? "tags" : name;
		bson_t **docs = NULL;
		int n = 0;

		rc = router_cfg_list(&c, coll, NULL, NULL, &docs, &n, err);
		for (int i = 0; !rc && i < n; i++) {
			rc = store_codec_render(docs[i], STORE_RENDER_COMPACT, out, err);
			dfs_buf_putc(out, '\n');
		}
		router_docs_free(docs, n);
	}
	if (c.t)
		store_txn_abort(c.t);
	pthread_mutex_unlock(&R.lock);
	return rc;
}

int router_config_update(int (*fn)(struct router_cfg *c, void *ctx, struct dfs_err *err), void *ctx,
			 struct dfs_err *err)
{
	int rc;

	pthread_mutex_lock(&R.lock);
	/* with zk=, a command that lost the race to another router's runs again over the
	 * winner's config (zkcfg.c note 3) */
	for (int tries = 0;; tries++) {
		struct router_cfg c = {.st = R.st, .db = R.db};

		rc = zk_sync(true, err);
		if (!rc)
			rc = store_txn_begin(R.db, true, &c.t, err);
		if (!rc)
			rc = fn(&c, ctx, err);
		if (!rc)
			rc = router_zk_commit(&c, err);
		if (!rc)
			rc = router_cfg_commit(&c, err);
		if (c.t)
			store_txn_abort(c.t);
		if (rc != DFS_EBUSY || !router_zk_on() || tries == 20 ||
		    !strstr(err->msg, "changed in ZooKeeper"))
			break;
		dfs_err_clear(err);
	}
	pthread_mutex_unlock(&R.lock);
	return rc;
}

struct config_cmd {
	const bson_t *cmd;
	bson_t *reply;
};

static int run_config_cmd(struct router_cfg *c, void *ctx, struct dfs_err *err)
{
	struct config_cmd *cc = ctx;

	bson_reinit(cc->reply); /* a run again (zk=) replies afresh */
	return router_cluster_command(c, cc->cmd, cc->reply, err);
}

/* Runs cmd in one write transaction of the config, its reply into reply. */
int router_config_command(const bson_t *cmd, bson_t *reply, struct dfs_err *err)
{
	struct config_cmd cc = {cmd, reply};

	return router_config_update(run_config_cmd, &cc, err);
}

struct store *router_config_store(void)
{
	return R.st;
}

struct store_db *router_merge_db(void)
{
	return R.merge_db;
}

struct commit_move {
	const char *ns;
	const bson_t *min, *max;
	const char *from, *to;
	bson_t *reply;
};

static int commit_move_fn(struct router_cfg *c, void *ctx, struct dfs_err *err)
{
	struct commit_move *cm = ctx;
	struct query_chunk_map m;
	bool there = false;
	bson_t *cmd;
	int rc;

	bson_reinit(cm->reply);
	if ((rc = router_cfg_chunks_load(c, cm->ns, &m, err)))
		return rc;
	for (int i = 0; i < m.n && !there; i++)
		there = !query_shard_bound_compare(m.c[i].min, cm->min) &&
			!query_shard_bound_compare(m.c[i].max, cm->max) &&
			!strcmp(m.c[i].shard, cm->from);
	query_chunk_map_release(&m);
	if (!there) {
		rc = dfs_err_set(err, DFS_EBUSY,
				 "ConflictingOperationInProgress (117): the chunk of %s being "
				 "migrated is no longer on %s as it was (another router moved or "
				 "split it meanwhile): the migration is not committed",
				 cm->ns, cm->from);
		BSON_APPEND_DOUBLE(cm->reply, "ok", 0.0);
		BSON_APPEND_UTF8(cm->reply, "errmsg", err->msg);
		BSON_APPEND_INT32(cm->reply, "code", 117);
		BSON_APPEND_UTF8(cm->reply, "codeName", "ConflictingOperationInProgress");
		return rc;
	}
	cmd = BCON_NEW("moveChunk", BCON_UTF8(cm->ns), "bounds", "[", BCON_DOCUMENT(cm->min),
		       BCON_DOCUMENT(cm->max), "]", "to", BCON_UTF8(cm->to));
	rc = router_cluster_command(c, cmd, cm->reply, err);
	bson_destroy(cmd);
	return rc;
}

int router_commit_move(const char *ns, const bson_t *min, const bson_t *max, const char *from,
		       const char *to, bson_t *reply, struct dfs_err *err)
{
	struct commit_move cm = {ns, min, max, from, to, reply};

	return router_config_update(commit_move_fn, &cm, err);
}

static int move_commit(void *ctx, struct dfs_err *err)
{
	struct commit_move *cm = ctx;

	return router_commit_move(cm->ns, cm->min, cm->max, cm->from, cm->to, cm->reply, err);
}

/* The reply of a moveChunk that failed with rc before the config command could give one. */
static void move_failed(bson_t *reply, int rc, const struct dfs_err *err)
{
	BSON_APPEND_DOUBLE(reply, "ok", 0.0);
	BSON_APPEND_UTF8(reply, "errmsg", err->msg);
	BSON_APPEND_INT32(reply, "code", rc == DFS_EBUSY ? 117 : 96);
	BSON_APPEND_UTF8(reply, "codeName",
			 rc == DFS_EBUSY ? "ConflictingOperationInProgress" : "OperationFailed");
}

/* Whether chunk c of ns may go to shard to, as MongoDB's moveChunk asks: not a draining
 * shard, and one of the chunk's zone (the zone range holding its min). Else reply gets
 * {ok: 0, ..., code 20 IllegalOperation} and DFS_EINVAL is returned. */
static int move_allowed(const char *ns, const struct query_chunk *c, const char *to, bson_t *reply,
			struct dfs_err *err)
{
	bson_t **tags = NULL, **sh = NULL, *f;
	const char *zone = NULL;
	bool in_zone = false, draining = false;
	int nt = 0, ns_ = 0, rc;
	bson_iter_t it, a;

	f = BCON_NEW("ns", BCON_UTF8(ns));
	rc = router_cfg_read_list("tags", f, &tags, &nt, err);
	bson_destroy(f);
	for (int i = 0; !rc && i < nt && !zone; i++) {
		bson_t *min = router_doc_field(tags[i], "min"),
		       *max = router_doc_field(tags[i], "max");

		if (min && max && query_shard_bound_compare(min, c->min) <= 0 &&
		    query_shard_bound_compare(c->min, max) < 0 &&
		    bson_iter_init_find(&it, tags[i], "tag") && BSON_ITER_HOLDS_UTF8(&it))
			zone = bson_iter_utf8(&it, NULL);
		if (min)
			bson_destroy(min);
		if (max)
			bson_destroy(max);
	}
	f = BCON_NEW("_id", BCON_UTF8(to));
	if (!rc)
		rc = router_cfg_read_list("shards", f, &sh, &ns_, err);
	bson_destroy(f);
	if (!rc && ns_ > 0) {
		draining = bson_iter_init_find(&it, sh[0], "draining") && bson_iter_as_bool(&it);
		if (zone && bson_iter_init_find(&it, sh[0], "tags") && bson_iter_recurse(&it, &a))
			while (bson_iter_next(&a))
				in_zone |= BSON_ITER_HOLDS_UTF8(&a) &&
					   !strcmp(bson_iter_utf8(&a, NULL), zone);
	}
	if (!rc && (draining || (zone && !in_zone))) {
		char msg[256];

		if (draining)
			snprintf(msg, sizeof(msg), "%s is currently draining.", to);
		else
			snprintf(msg, sizeof(msg), "%s is not in the correct zone %s", to, zone);
		BSON_APPEND_DOUBLE(reply, "ok", 0.0);
		BSON_APPEND_UTF8(reply, "errmsg", msg);
		BSON_APPEND_INT32(reply, "code", 20);
		BSON_APPEND_UTF8(reply, "codeName", "IllegalOperation");
		rc = dfs_err_set(err, DFS_EINVAL, "%s", msg);
	}
	router_docs_free(tags, nt);
	router_docs_free(sh, ns_);
	return rc;
}

/* moveChunk through the router: the documents move (migrate.c), then the owner. A
 * command the migration cannot start (bad namespace, shard, chunk) runs as a plain config
 * command, which gives MongoDB's error. */
int router_move_chunk(const bson_t *cmd, bson_t *reply, struct dfs_err *err)
{
	struct commit_move mc = {0};
	char db[256] = "", coll[256] = "";
	const char *ns = NULL, *to = NULL, *dot;
	struct router_ns rns;
	struct timespec t0, t1;
	bson_iter_t it;
	bson_t got, stats;
	int idx = -1, rc;

	if (bson_iter_init_find(&it, cmd, "moveChunk") && BSON_ITER_HOLDS_UTF8(&it))
		ns = bson_iter_utf8(&it, NULL);
	if (bson_iter_init_find(&it, cmd, "to") && BSON_ITER_HOLDS_UTF8(&it))
		to = bson_iter_utf8(&it, NULL);
	if (!ns || !to || !(dot = strchr(ns, '.')) || (size_t)(dot - ns) >= sizeof(db))
		return router_config_command(cmd, reply, err);
	snprintf(db, sizeof(db), "%.*s", (int)(dot - ns), ns);
	snprintf(coll, sizeof(coll), "%s", dot + 1);
	if (ns_load(db, coll, &rns, NULL))
		return router_config_command(cmd, reply, err);
	bson_init(&got);
	if (!rns.sharded || router_chunk_named(&rns.map, cmd, &idx, &got, NULL) || idx < 0 ||
	    !router_ns_shard(&rns, to) || !strcmp(rns.map.c[idx].shard, to)) {
		bson_destroy(&got);
		router_ns_release(&rns);
		return router_config_command(cmd, reply, err);
	}
	bson_destroy(&got);
	if ((rc = move_allowed(ns, &rns.map.c[idx], to, reply, err))) {
		router_ns_release(&rns);
		return rc;
	}
	bson_init(&got);
	bson_init(&stats);
	mc.reply = &got;
	mc.ns = ns;
	mc.min = rns.map.c[idx].min;
	mc.max = rns.map.c[idx].max;
	mc.from = rns.map.c[idx].shard;
	mc.to = to;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = router_migrate(&rns, db, coll, idx, to, move_commit, &mc, &stats, err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc && !bson_has_field(&got, "ok")) {
		move_failed(reply, rc, err);
	} else if (rc) {
		bson_concat(reply, &got);
	} else {
		BSON_APPEND_INT32(reply, "millis",
				  (int32_t)((t1.tv_sec - t0.tv_sec) * 1000 +
					    (t1.tv_nsec - t0.tv_nsec) / 1000000));
		BSON_APPEND_DOCUMENT(reply, "migration", &stats);
		BSON_APPEND_DOUBLE(reply, "ok", 1.0);
	}
	bson_destroy(&got);
	bson_destroy(&stats);
	router_ns_release(&rns);
	return rc;
}

/* Runs the command in h->buf; the reply goes to h->res. Returns nonzero for a failed
 * command (its errmsg logged). */
static int cluster_run(struct rh *h)
{
	struct dfs_err err = {0};
	bson_t cmd, reply;
	int rc;

	h->ran = true;
	bson_init(&cmd);
	bson_init(&reply);
	rc = store_codec_parse_doc(h->buf.data ? h->buf.data : "", h->buf.len, &cmd, &err);
	if (rc) {
		BSON_APPEND_DOUBLE(&reply, "ok", 0.0);
		BSON_APPEND_UTF8(&reply, "errmsg", err.msg);
		BSON_APPEND_INT32(&reply, "code", 9);
		BSON_APPEND_UTF8(&reply, "codeName", "FailedToParse");
	} else {
		bson_iter_t it;

		if (bson_iter_init(&it, &cmd) && bson_iter_next(&it) &&
		    !strcmp(bson_iter_key(&it), "moveChunk"))
			rc = router_move_chunk(&cmd, &reply, &err);
		else
			rc = router_config_command(&cmd, &reply, &err);
		if (rc && !bson_has_field(&reply, "ok")) {
			BSON_APPEND_DOUBLE(&reply, "ok", 0.0);
			BSON_APPEND_UTF8(&reply, "errmsg", err.msg);
		}
	}
	store_codec_render(&reply, STORE_RENDER_PRETTY, &h->res.mem, NULL);
	h->res.size = h->res.mem.len;
	if (rc)
		fs_errlog_add(".cluster/command: %s", err.msg[0] ? err.msg : "the command failed");
	bson_destroy(&cmd);
	bson_destroy(&reply);
	return rc;
}

/* ---- open, read, write, close ------------------------------------------------------ */

/* Fills h->buf with the current bytes of the document file (a write without O_TRUNC). */
static int preload(struct rh *h, const struct router_ns *ns, struct dfs_err *err)
{
	const struct router_shard *s;
	char a[ROUTER_PATH_MAX];
	struct stat st;

	if (router_doc_holder(ns, h->p.db, h->p.coll, h->p.rest, &s, &st))
		return 0; /* a new document */
	shard_abs(s, h->p.rel, a);
	if (router_read_file(a, &h->buf, NULL))
		return router_shard_fail(s, h->p.rel, errno, err);
	return 0;
}

static int open_common(const char *path, struct fuse_file_info *fi, bool create, mode_t mode)
{
	bool wr = (fi->flags & O_ACCMODE) != O_RDONLY;
	struct dfs_err err = {0};
	const struct router_shard *s = NULL;
	struct router_ns ns;
	struct rh *h = NULL;
	struct rp p;
	int rc = 0;

	classify(path, &p);
	if (p.kind == RP_CLUSTER_FILE) {
		if (!strcmp(p.rest, "command")) {
			h = rh_new(RH_CMD, path);
		} else {
			if (wr)
				return -EACCES;
			h = rh_new(RH_RESULT, path);
			if ((rc = cluster_render(p.rest, &h->res.mem, &err))) {
				rh_free(h);
				return fail_err(path, &err);
			}
			h->res.size = h->res.mem.len;
		}
		fi->direct_io = 1;
		fi->fh = (uintptr_t)h;
		return 0;
	}
	if (p.kind == RP_ERRORS) {
		if (wr)
			return -EACCES;
		h = rh_new(RH_RESULT, path);
		fs_errlog_render(&h->res.mem);
		h->res.size = h->res.mem.len;
		fi->direct_io = 1;
		fi->fh = (uintptr_t)h;
		return 0;
	}
	if (p.kind != RP_IN_COLL)
		return p.kind == RP_NONE ? -ENOENT : -EISDIR;
	if ((rc = ns_load(p.db, p.coll, &ns, &err)))
		return fail_err("open", &err);
	if (ns.sharded) {
		enum sub_kind k = sub_kind(p.rest);

		if (k == SUB_AGG) {
			if (wr) {
				rc = dfs_err_set(&err, DFS_EPERM, "'%s': results are read-only",
						 p.rest);
			} else {
				h = rh_new(RH_RESULT, path);
				rc = router_aggregate(&ns, p.db, p.coll, p.rest + 10, R.merge_db,
						      &h->res, &err);
				fi->direct_io = 1;
			}
		} else if (k == SUB_QUERY || k == SUB_EXPLAIN) {
			if (wr) {
				rc = dfs_err_set(&err, DFS_EPERM, "'%s': results are read-only",
						 p.rest);
			} else {
				h = rh_new(RH_RESULT, path);
				rc = k == SUB_QUERY ? router_find(&ns, p.db, p.coll, p.rest + 6,
								  &h->res, &err)
						    : router_explain(&ns, p.db, p.coll, p.rest + 8,
								     &h->res, &err);
				fi->direct_io = 1;
			}
		} else if (k == SUB_UNROUTED) {
			rc = dfs_err_set(&err, DFS_EPERM,
					 "'%s' of sharded collection %s.%s is not routed by docfs "
					 "router yet",
					 p.rest, p.db, p.coll);
		} else if (k == SUB_WRITE && wr) {
			h = rh_new(RH_WRITE, path);
			fi->direct_io = 1;
		} else if (k == SUB_INSERT && wr) {
			h = rh_new(RH_INSERT, path);
			fi->direct_io = 1;
		} else if (k == SUB_INDEX && wr) {
			h = rh_new(RH_INDEX, path);
			fi->direct_io = 1;
		} else if (k == SUB_DOC && (wr || create)) {
			h = rh_new(RH_DOC, path);
			if (!(fi->flags & O_TRUNC) && !create)
				rc = preload(h, &ns, &err);
			h->dirty = create || (fi->flags & O_TRUNC);
			fi->direct_io = 1;
		} else if (k == SUB_DOC) {
			struct stat st;

			if (router_doc_holder(&ns, p.db, p.coll, p.rest, &s, &st))
				rc = DFS_ENOENT;
		}
	}
	if (!rc && !h) {
		char a[ROUTER_PATH_MAX];
		int fd;

		if (!s)
			s = router_ns_shard(&ns, ns.primary);
		shard_abs(s, p.rel, a);
		fd = create ? open(a, fi->flags | O_CREAT, mode) : open(a, fi->flags);
		if (fd < 0) {
			rc = router_shard_fail(s, p.rel, errno, &err);
		} else {
			h = rh_new(RH_FWD, path);
			h->fd = fd;
			fi->direct_io = 1;
		}
	}
	router_ns_release(&ns);
	if (rc) {
		if (h)
			rh_free(h);
		if (rc == DFS_ENOENT && !err.msg[0])
			return -ENOENT;
		return fail_err(path, &err);
	}
	fi->fh = (uintptr_t)h;
	return 0;
}

/* open_common under the routing lock (shared) for the paths of collections. */
static int open_locked(const char *path, struct fuse_file_info *fi, bool create, mode_t mode)
{
	struct rp p;
	int rc;

	classify(path, &p);
	if (p.kind != RP_IN_COLL)
		return open_common(path, fi, create, mode);
	router_routing_lock(false);
	rc = open_common(path, fi, create, mode);
	router_routing_unlock();
	return rc;
}

static int r_open(const char *path, struct fuse_file_info *fi)
{
	return open_locked(path, fi, false, 0);
}

static int r_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	return open_locked(path, fi, true, mode);
}

static int write_run(struct rh *h, struct dfs_err *err);

static int r_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct rh *h = rh_of(fi);
	size_t got = 0;
	int rc = 0;

	(void)path;
	if (h->kind == RH_FWD) {
		ssize_t n = pread(h->fd, buf, size, off);

		return n < 0 ? -errno : (int)n;
	}
	pthread_mutex_lock(&h->lock);
	if (h->kind == RH_CMD && !h->ran && h->buf.len)
		cluster_run(h);
	if (h->kind == RH_WRITE && !h->ran && h->dirty) {
		struct dfs_err err = {0};

		if (write_run(h, &err)) {
			pthread_mutex_unlock(&h->lock);
			return fail_err(h->path, &err);
		}
	}
	if ((h->kind == RH_CMD || h->kind == RH_WRITE) && h->ran) {
		/* the reply from 0, or from where the request's write ended (note 3): the first
		 * read after it ran decides which, so reading on from either gives it once */
		if (!h->based) {
			h->base = (size_t)off == h->buf.len ? (off_t)h->buf.len : 0;
			h->based = true;
		}
		off = off >= h->base ? off - h->base : off;
	}
	if (h->kind == RH_DOC || h->kind == RH_INDEX || h->kind == RH_INSERT) {
		if ((size_t)off < h->buf.len) {
			got = h->buf.len - (size_t)off < size ? h->buf.len - (size_t)off : size;
			memcpy(buf, h->buf.data + off, got);
		}
	} else {
		rc = fs_result_read(&h->res, buf, size, off, &got);
	}
	pthread_mutex_unlock(&h->lock);
	return rc ? -rc : (int)got;
}

static int r_write(const char *path, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct rh *h = rh_of(fi);

	(void)path;
	if (h->kind == RH_FWD) {
		ssize_t n = pwrite(h->fd, buf, size, off);

		return n < 0 ? -errno : (int)n;
	}
	if (h->kind == RH_RESULT)
		return -EBADF;
	pthread_mutex_lock(&h->lock);
	if (h->kind == RH_CMD && h->ran) {
		/* a new command on the same descriptor */
		dfs_buf_reset(&h->buf);
		fs_result_release(&h->res);
		fs_result_init(&h->res);
		h->ran = false;
		h->based = false;
		off = 0;
	}
	if ((size_t)off + size > h->buf.len) {
		size_t old = h->buf.len;

		dfs_buf_reserve(&h->buf, (size_t)off + size - old + 1);
		if ((size_t)off > old)
			memset(h->buf.data + old, 0, (size_t)off - old);
		h->buf.len = (size_t)off + size;
		h->buf.data[h->buf.len] = '\0';
	}
	memcpy(h->buf.data + off, buf, size);
	h->dirty = true;
	if (h->kind == RH_WRITE && !h->ran &&
	    fs_write_complete(h->p.rest, h->buf.data, h->buf.len)) {
		/* the write that completes the request runs it and fails with its error */
		struct dfs_err err = {0};

		if (write_run(h, &err)) {
			pthread_mutex_unlock(&h->lock);
			return fail_err(h->path, &err);
		}
	}
	pthread_mutex_unlock(&h->lock);
	return (int)size;
}

/* Runs the update or delete request of h once (route.c note 6); the result goes to h->res. */
static int write_run(struct rh *h, struct dfs_err *err)
{
	struct router_ns ns;
	int rc;

	h->ran = true;
	router_routing_lock(false);
	rc = ns_load(h->p.db, h->p.coll, &ns, err);
	if (!rc) {
		rc = router_write(&ns, h->p.db, h->p.coll, h->p.rest,
				  h->buf.data ? h->buf.data : "", h->buf.len, &h->res.mem, err);
		router_ns_release(&ns);
	}
	router_routing_unlock();
	if (rc && !h->res.mem.len)
		dfs_buf_printf(&h->res.mem, "{\"ok\": 0.0, \"errmsg\": \"%s\"}\n",
			       "see /.docfs/errors");
	h->res.size = h->res.mem.len;
	return rc;
}

/* Sends what a collecting handle holds to the shards (note 2). */
static int flush_routed(struct rh *h, struct dfs_err *err)
{
	struct router_ns ns;
	int rc;

	if ((rc = ns_load(h->p.db, h->p.coll, &ns, err)))
		return rc;
	if (!ns.sharded) {
		rc = dfs_err_set(err, DFS_EIO, "%s.%s stopped being sharded while open", h->p.db,
				 h->p.coll);
	} else if (h->kind == RH_INSERT) {
		rc = router_insert(&ns, h->p.db, h->p.coll, h->buf.data ? h->buf.data : "",
				   h->buf.len, err);
	} else if (h->kind == RH_DOC) {
		rc = router_doc_write(&ns, h->p.db, h->p.coll, h->p.rest,
				      h->buf.data ? h->buf.data : "", h->buf.len, err);
	} else {
		/* an index on every shard */
		for (int i = 0; !rc && i < ns.nshards; i++) {
			char a[ROUTER_PATH_MAX];
			int fd;

			shard_abs(&ns.shards[i], h->p.rel, a);
			fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			/* the fsync makes the shard create it now and report it, even through
			 * sshfs, which drops the status of a close */
			if (fd < 0 ||
			    (h->buf.len &&
			     write(fd, h->buf.data, h->buf.len) != (ssize_t)h->buf.len) ||
			    fsync(fd))
				rc = router_shard_fail(&ns.shards[i], h->p.rel, errno, err);
			if (fd >= 0 && close(fd) && !rc)
				rc = router_shard_fail(&ns.shards[i], h->p.rel, errno, err);
		}
	}
	router_ns_release(&ns);
	return rc;
}

static int r_flush(const char *path, struct fuse_file_info *fi)
{
	struct rh *h = rh_of(fi);
	struct dfs_err err = {0};
	int rc = 0;

	if (h->kind == RH_FWD) {
		/* closing a duplicate makes the shard commit now and report its error */
		int d = dup(h->fd);

		if (d < 0)
			return -errno;
		return close(d) ? -errno : 0;
	}
	pthread_mutex_lock(&h->lock);
	if (h->kind == RH_CMD) {
		if (!h->ran && h->buf.len && cluster_run(h))
			rc = -EINVAL;
	} else if (h->kind == RH_WRITE) {
		/* only a request that was written runs (a shell's dup-close of an fd that has
		 * not been written yet flushes too) */
		if (!h->ran && h->dirty && write_run(h, &err))
			rc = fail_err(path, &err);
	} else if (h->kind != RH_RESULT && h->dirty) {
		h->dirty = false;
		router_routing_lock(false);
		if (flush_routed(h, &err))
			rc = fail_err(path, &err);
		router_routing_unlock();
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}

static int r_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	rh_free(rh_of(fi));
	return 0;
}

static int r_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	return fi ? r_flush(path, fi) : 0;
}

/* ---- changes to the namespace ------------------------------------------------------ */

/* Runs fn(abs path) for path on the shard holding it: the primary, or the holder of a
 * document of a sharded collection (every holder when all is set). */
static int on_holder_unlocked(const char *path, bool all, int (*fn)(const char *a, void *ctx),
			      void *ctx);

static int on_holder(const char *path, bool all, int (*fn)(const char *a, void *ctx), void *ctx)
{
	int rc;

	router_routing_lock(false);
	rc = on_holder_unlocked(path, all, fn, ctx);
	router_routing_unlock();
	return rc;
}

static int on_holder_unlocked(const char *path, bool all, int (*fn)(const char *a, void *ctx),
			      void *ctx)
{
	struct dfs_err err = {0};
	struct router_ns ns;
	struct rp p;
	int rc, done = 0;

	classify(path, &p);
	if (p.kind != RP_IN_COLL)
		return -EPERM;
	if ((rc = ns_load(p.db, p.coll, &ns, &err)))
		return fail_err(path, &err);
	rc = 0;
	for (int i = 0; i < ns.nshards && !rc; i++) {
		const struct router_shard *s = &ns.shards[i];
		char a[ROUTER_PATH_MAX];
		struct stat st;

		if (!(ns.sharded && sub_kind(p.rest) != SUB_PRIMARY) && strcmp(s->name, ns.primary))
			continue;
		shard_abs(s, p.rel, a);
		if (ns.sharded && sub_kind(p.rest) == SUB_DOC && lstat(a, &st))
			continue;
		if (fn(a, ctx))
			rc = router_shard_fail(s, p.rel, errno, &err);
		else
			done++;
		if (done && !all)
			break;
	}
	router_ns_release(&ns);
	if (!rc && !done)
		return -ENOENT;
	return rc ? fail_err(path, &err) : 0;
}

static int do_unlink(const char *a, void *ctx)
{
	(void)ctx;
	return unlink(a);
}

static int r_unlink(const char *path)
{
	return on_holder(path, true, do_unlink, NULL);
}

static int do_truncate(const char *a, void *ctx)
{
	return truncate(a, *(off_t *)ctx);
}

static int r_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct rh *h = fi ? rh_of(fi) : NULL;

	if (h && h->kind == RH_FWD)
		return ftruncate(h->fd, size) ? -errno : 0;
	if (h && (h->kind == RH_DOC || h->kind == RH_INSERT || h->kind == RH_INDEX ||
		  h->kind == RH_CMD || h->kind == RH_WRITE)) {
		pthread_mutex_lock(&h->lock);
		if ((size_t)size < h->buf.len)
			h->buf.len = (size_t)size;
		h->dirty = true;
		pthread_mutex_unlock(&h->lock);
		return 0;
	}
	return on_holder(path, false, do_truncate, &size);
}

static int do_utimens(const char *a, void *ctx)
{
	return utimensat(AT_FDCWD, a, ctx, AT_SYMLINK_NOFOLLOW);
}

static int r_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	struct rp p;

	(void)fi;
	classify(path, &p);
	if (p.kind != RP_IN_COLL)
		return 0; /* the router's own entries and the shared directories keep theirs */
	return on_holder(path, false, do_utimens, (void *)tv);
}

static int do_chmod(const char *a, void *ctx)
{
	return chmod(a, *(mode_t *)ctx);
}

static int r_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	(void)fi;
	return on_holder(path, true, do_chmod, &mode);
}

/* mkdir or rmdir of a database or collection on every shard (note 2). */
static int on_all(const char *path, bool make, mode_t mode)
{
	struct dfs_err err = {0};
	struct router_ns ns;
	struct rp p;
	int rc, ok = 0, exist = 0;

	classify(path, &p);
	if (p.kind != RP_DB && p.kind != RP_COLL)
		return p.kind == RP_IN_COLL ? -EPERM : -EACCES;
	if ((rc = ns_load(p.kind == RP_COLL ? p.db : NULL, NULL, &ns, &err)))
		return fail_err(make ? "mkdir" : "rmdir", &err);
	for (int i = 0; !rc && i < ns.nshards; i++)
		rc = router_shard_ok(&ns.shards[i], &err);
	for (int i = 0; !rc && i < ns.nshards; i++) {
		char a[ROUTER_PATH_MAX];

		shard_abs(&ns.shards[i], p.rel, a);
		if ((make ? mkdir(a, mode) : rmdir(a)) == 0)
			ok++;
		else if (errno == (make ? EEXIST : ENOENT))
			exist++;
		else
			rc = router_shard_fail(&ns.shards[i], p.rel, errno, &err);
	}
	router_ns_release(&ns);
	if (rc)
		return fail_err(make ? "mkdir" : "rmdir", &err);
	return ok ? 0 : make ? -EEXIST : -ENOENT;
}

static int r_mkdir(const char *path, mode_t mode)
{
	return on_all(path, true, mode);
}

static int r_rmdir(const char *path)
{
	return on_all(path, false, 0);
}

static int rename_unlocked(const char *from, const char *to, unsigned int flags);

static int r_rename(const char *from, const char *to, unsigned int flags)
{
	int rc;

	router_routing_lock(false);
	rc = rename_unlocked(from, to, flags);
	router_routing_unlock();
	return rc;
}

static int rename_unlocked(const char *from, const char *to, unsigned int flags)
{
	struct dfs_err err = {0};
	struct router_ns ns;
	struct rp a, b;
	int rc;

	classify(from, &a);
	classify(to, &b);
	if (a.kind != RP_IN_COLL || b.kind != RP_IN_COLL || strcmp(a.db, b.db) ||
	    strcmp(a.coll, b.coll))
		return -EXDEV; /* mv copies then: through the router's own routing */
	if ((rc = ns_load(a.db, a.coll, &ns, &err)))
		return fail_err("rename", &err);
	if (!ns.sharded || (sub_kind(a.rest) == SUB_PRIMARY && sub_kind(b.rest) == SUB_PRIMARY)) {
		const struct router_shard *s = router_ns_shard(&ns, ns.primary);
		char pa[ROUTER_PATH_MAX], pb[ROUTER_PATH_MAX];

		shard_abs(s, a.rel, pa);
		shard_abs(s, b.rel, pb);
		rc = (flags ? renameat2(AT_FDCWD, pa, AT_FDCWD, pb, flags) : rename(pa, pb))
			     ? router_shard_fail(s, a.rel, errno, &err)
			     : 0;
	} else if (sub_kind(b.rest) == SUB_DOC && sub_kind(a.rest) != SUB_QUERY &&
		   sub_kind(a.rest) != SUB_EXPLAIN && !flags) {
		/* sed -i: the new text goes where its key belongs, then the old name goes */
		const struct router_shard *s = router_ns_shard(&ns, ns.primary);
		char pa[ROUTER_PATH_MAX];
		struct dfs_buf text;
		struct stat st;

		if (sub_kind(a.rest) == SUB_DOC &&
		    router_doc_holder(&ns, a.db, a.coll, a.rest, &s, &st))
			rc = DFS_ENOENT;
		dfs_buf_init(&text);
		shard_abs(s, a.rel, pa);
		if (!rc && router_read_file(pa, &text, NULL))
			rc = router_shard_fail(s, a.rel, errno, &err);
		if (!rc)
			rc = router_doc_write(&ns, b.db, b.coll, b.rest, text.data ? text.data : "",
					      text.len, &err);
		if (!rc && unlink(pa))
			rc = router_shard_fail(s, a.rel, errno, &err);
		dfs_buf_release(&text);
	} else {
		rc = dfs_err_set(&err, DFS_EPERM,
				 "rename '%s' to '%s': not supported in a sharded collection",
				 a.rest, b.rest);
	}
	router_ns_release(&ns);
	if (rc == DFS_ENOENT && !err.msg[0])
		return -ENOENT;
	return rc ? fail_err("rename", &err) : 0;
}

static int r_statfs(const char *path, struct statvfs *sv)
{
	struct dfs_err err = {0};
	struct router_ns ns;
	int rc;

	(void)path;
	if ((rc = ns_load(NULL, NULL, &ns, &err)))
		return fail_err("statfs", &err);
	rc = statvfs(ns.shards[0].host, sv) ? -errno : 0;
	router_ns_release(&ns);
	return rc;
}

static void *r_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->entry_timeout = 0;
	cfg->attr_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->use_ino = 0;
	return NULL;
}

static const struct fuse_operations router_ops = {
	.init = r_init,
	.getattr = r_getattr,
	.readdir = r_readdir,
	.open = r_open,
	.create = r_create,
	.read = r_read,
	.write = r_write,
	.flush = r_flush,
	.release = r_release,
	.fsync = r_fsync,
	.unlink = r_unlink,
	.truncate = r_truncate,
	.utimens = r_utimens,
	.chmod = r_chmod,
	.mkdir = r_mkdir,
	.rmdir = r_rmdir,
	.rename = r_rename,
	.statfs = r_statfs,
};

/* The lock of note 5 on config store dir, LOCK_SH or LOCK_EX (never waiting): the
 * descriptor, or -1 with err set. */
static int config_lock(const char *dir, int how, struct dfs_err *err)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/.router-lock", dir);
	if ((fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
		dfs_err_set(err, DFS_EIO, "'%s': %s", p, strerror(errno));
		return -1;
	}
	if (flock(fd, how | LOCK_NB) == 0)
		return fd;
	close(fd);
	if (errno != EWOULDBLOCK) {
		dfs_err_set(err, DFS_EIO, "flock '%s': %s", p, strerror(errno));
		return -1;
	}
	dfs_err_set(
		err, DFS_EBUSY,
		how == LOCK_EX
			? "ConflictingOperationInProgress (117): a docfs router is mounted over "
			  "the config store '%s': run moveChunk through its /.cluster/command "
			  "(its writes must wait for the migration's critical section)"
			: "ConflictingOperationInProgress (117): a moveChunk of docfs cluster is "
			  "running on the config store '%s': start the router when it ends",
		dir);
	return -1;
}

int router_cli_move_chunk(const char *config, const bson_t *cmd, bson_t *reply, struct dfs_err *err)
{
	int lock, rc;

	if ((rc = router_cfg_zk_cache(config, err))) {
		move_failed(reply, rc, err);
		return rc;
	}
	if ((lock = config_lock(config, LOCK_EX, err)) < 0) {
		move_failed(reply, err->code, err);
		return err->code;
	}
	if ((rc = store_open(config, true, &R.st, err)) ||
	    (rc = store_db_get(R.st, ROUTER_CONFIG_DB, true, &R.db, err))) {
		move_failed(reply, rc, err);
		store_free(R.st);
		R.st = NULL;
		close(lock);
		return rc;
	}
	pthread_rwlock_init(&routing, NULL); /* no routed operations in this process */
	router_migrations_recover(); /* what a router killed in a migration left (migrate.c) */
	rc = router_move_chunk(cmd, reply, err);
	pthread_rwlock_destroy(&routing);
	store_free(R.st);
	R.st = NULL;
	R.db = NULL;
	close(lock);
	return rc;
}

/* The refresher's reload (zkcfg.c note 5): with the routing lock held exclusively, so every
 * routed operation begun on an older config has ended when the version is acknowledged. */
static int zk_resync(int64_t *version, struct dfs_err *err)
{
	int rc;

	router_routing_lock(true);
	pthread_mutex_lock(&R.lock);
	rc = router_zk_sync(R.db, false, err);
	*version = router_zk_version();
	pthread_mutex_unlock(&R.lock);
	router_routing_unlock();
	return rc;
}

#define ZK_MARK ".zk-cluster" /* in CONFIG_STORE: it is the cache of a cluster in ZooKeeper */

int router_cfg_zk_cache(const char *dir, struct dfs_err *err)
{
	char p[PATH_MAX + 16], what[1024] = "";
	FILE *f;

	snprintf(p, sizeof(p), "%s/" ZK_MARK, dir);
	if (!(f = fopen(p, "r")))
		return 0;
	if (!fgets(what, sizeof(what), f))
		what[0] = 0;
	fclose(f);
	what[strcspn(what, "\n")] = 0;
	return dfs_err_set(
		err, DFS_EBUSY,
		"config store '%s' is a router's cache of the cluster config in ZooKeeper "
		"(%s): run the command through that router's /.cluster/command (or remove "
		"'%s' to use the store on its own)",
		dir, what, p);
}

int router_mount_run(const struct router_mount_opts *o, struct dfs_err *err)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config lc = {.clone_fd = 0, .max_idle_threads = 10};
	struct fuse *f = NULL;
	char *opts = NULL, config[PATH_MAX];
	struct router_cfg probe;
	int rc = 0, lock = -1;
	bool fresh = false, was_cache = false;

	/* the config must open (and is created) before the mount goes live; the daemon
	 * leaves the working directory, so it keeps the absolute path */
	if ((rc = router_cfg_open(o->config, &probe, err)))
		return rc;
	router_cfg_close(&probe);
	if (!realpath(o->config, config))
		return dfs_err_set(err, DFS_EIO, "config store '%s': %s", o->config,
				   strerror(errno));
	if (o->zk) {
		/* several routers serve one cluster: no lock of the local store, which is only
		 * a cache (zkcfg.c note 2); ZooKeeper must answer before the mount goes live,
		 * and is connected again in the process that serves */
		char mark[PATH_MAX + 16];
		FILE *mf;

		/* a store that is a cache already never seeds a cluster (it may be another's) */
		was_cache = router_cfg_zk_cache(config, NULL) != 0;
		if ((rc = router_zk_open(o->zk, o->cluster, &fresh, err)))
			return rc;
		router_zk_close();
		/* `docfs cluster` refuses this store from now on (router_cfg_zk_cache) */
		snprintf(mark, sizeof(mark), "%s/" ZK_MARK, config);
		bool wrote = false;

		if ((mf = fopen(mark, "w"))) {
			wrote = fprintf(mf, "zk=%s,cluster=%s\n", o->zk, o->cluster) > 0;
			wrote = !fclose(mf) && wrote;
		}
		if (!wrote)
			return dfs_err_set(err, DFS_EIO, "'%s': %s", mark, strerror(errno));
	} else if ((rc = router_cfg_zk_cache(config, err))) {
		return rc; /* without zk=, a stale copy would become the cluster's config */
	} else if ((lock = config_lock(config, LOCK_SH, err)) < 0) {
		/* kept across the daemon's fork (an flock belongs to the open file), released
		 * when the process ends */
		return err->code;
	}
	if (o->log && (rc = fs_errlog_open(o->log, err))) {
		if (lock >= 0)
			close(lock);
		return rc;
	}
	if (asprintf(&opts, "fsname=docfs-router:%s,subtype=docfs-router%s%s", config,
		     o->fuse_opts && o->fuse_opts[0] ? "," : "",
		     o->fuse_opts ? o->fuse_opts : "") < 0)
		abort();
	if (fuse_opt_add_arg(&args, "docfs") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opts) || (o->debug && fuse_opt_add_arg(&args, "-d"))) {
		rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
		goto done;
	}
	if (!(f = fuse_new(&args, &router_ops, sizeof(router_ops), NULL))) {
		rc = dfs_err_set(err, DFS_EINVAL, "cannot start a FUSE session (bad -o options?)");
		goto done;
	}
	if (fuse_mount(f, o->mountpoint) != 0) {
		rc = dfs_err_set(err, DFS_EIO, "cannot mount on '%s'", o->mountpoint);
		goto done;
	}
	/* bound before the fork, so that a taken port fails the command (wire.c) */
	if (o->nlisten && (rc = router_wire_bind(config, o->listen, o->nlisten, o->noauth, err)))
		goto unmount;
	if (fuse_daemonize(o->foreground) != 0) {
		rc = dfs_err_set(err, DFS_EIO, "cannot daemonize");
		goto unmount;
	}
	/* opened in the process that serves (after the fork) */
	if ((rc = store_open(config, true, &R.st, err)) ||
	    (rc = store_db_get(R.st, ROUTER_CONFIG_DB, true, &R.db, err))) {
		fs_errlog_add("router: %s", err->msg);
		goto unmount;
	}
	if (o->zk) {
		bool again = false;

		/* the first router of a cluster uploads its local config; the others (and
		 * this one's later starts) take ZooKeeper's */
		if ((rc = router_zk_open(o->zk, o->cluster, &again, err)) ||
		    (rc = (fresh || again) && !was_cache ? router_zk_seed(R.db, err)
							 : router_zk_sync(R.db, true, err))) {
			fs_errlog_add("router: %s", err->msg);
			goto unmount;
		}
		router_zk_start(zk_resync);
	}
	snprintf(R.merge_dir, sizeof(R.merge_dir), "/tmp/docfs-router-XXXXXX");
	if (!mkdtemp(R.merge_dir) || (rc = store_open(R.merge_dir, true, &R.merge, err)) ||
	    (rc = store_db_get(R.merge, "merge", true, &R.merge_db, err))) {
		if (!rc)
			rc = dfs_err_set(err, DFS_EIO, "scratch store: %s", strerror(errno));
		fs_errlog_add("router: %s", err->msg);
		goto unmount;
	}
	R.started = time(NULL);
	{
		pthread_rwlockattr_t a;

		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&routing, &a);
		pthread_rwlockattr_destroy(&a);
	}
	if (fuse_set_signal_handlers(fuse_get_session(f)) != 0) {
		rc = dfs_err_set(err, DFS_EIO, "cannot install signal handlers");
		goto unmount;
	}
	if ((rc = router_wire_start(err))) {
		fs_errlog_add("router: %s", err->msg);
		goto unmount;
	}
	router_balancer_start(o->balancer_ms, o->chunk_mb);
	if (fuse_loop_mt(f, &lc) != 0)
		fs_errlog_add("router: request loop ended with an error");
	router_balancer_stop();
	fuse_remove_signal_handlers(fuse_get_session(f));
unmount:
	router_wire_stop(); /* its connections end before the config store is freed */
	router_zk_close();
	fuse_unmount(f);
done:
	if (f)
		fuse_destroy(f);
	fuse_opt_free_args(&args);
	store_free(R.st);
	R.st = NULL;
	if (R.merge) {
		/* the scratch store goes with the mount */
		DIR *d = opendir(R.merge_dir);
		struct dirent *de;

		store_free(R.merge);
		R.merge = NULL;
		while (d && (de = readdir(d))) {
			char p[sizeof(R.merge_dir) + 260];

			if (de->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "%s/%s", R.merge_dir, de->d_name);
			unlink(p);
		}
		if (d)
			closedir(d);
		rmdir(R.merge_dir);
	}
	fs_errlog_open(NULL, NULL);
	free(opts);
	if (lock >= 0)
		close(lock);
	return rc;
}
