/*
 * zkcfg.c - `docfs router -o zk=HOSTS,cluster=NAME`: the cluster config (MongoDB's config
 * database) kept in ZooKeeper, through its official C client, so that several routers serve
 * one cluster and losing a router's host loses nothing. It does not run commands or route
 * (config.c, cluster.c, route.c work unchanged on the local copy); it keeps that copy equal
 * to ZooKeeper, commits a command's changes as one compare-and-set, tells the routers apart,
 * and holds the balancer's lock.
 *
 * Design notes
 * 1. Layout under /docfs/cluster/<name>/: `version` (BSON {v: N}; its znode version is the
 *    config's version), `config/<coll>/<id>` one znode per config document (BSON in
 *    MongoDB's shapes, <id> its _id as a file name, store_name_from_id, with bytes
 *    ZooKeeper refuses %-escaped), `routers/r-<seq>` one ephemeral sequential znode per
 *    serving router (BSON {acked, host, pid}), `balancer` the balancer's lock (an ephemeral
 *    znode holding its router's id). One znode per document, so one per chunk: a
 *    collection's chunk table is unbounded (about 4,000 chunks already pass ZooKeeper's
 *    1 MB znode limit), and a split or a move rewrites only the chunks it changes.
 * 2. CONFIG_STORE is a cache: commands and reads run on it in local transactions as
 *    without zk=. Before each use (router_zk_sync) a stale cache is replaced whole by what
 *    ZooKeeper holds; a load reads `version`, every document, then `version` again, and
 *    starts over when the two differ, so it is one version's config, never a mix.
 * 3. A command commits as ONE zoo_multi (router_zk_commit): a create, set or delete for
 *    each document the command changed (the local transaction read back and compared with
 *    the loaded snapshot, byte for byte) and a set of `version` at the version the cache
 *    was loaded from. A second router that committed in between makes it fail whole
 *    (ZBADVERSION, nothing written); the caller reloads and runs the command again, so its
 *    checks (a migration's owner check, mount.c) see the winner's change. The local
 *    transaction commits only after ZooKeeper accepted the multi.
 * 4. Stale: a watch on `version` marks the cache stale (the watch is set again at each
 *    load); a router sees another's change at its next operation once the watch fired.
 * 5. Acknowledgements: the refresher thread reloads a stale cache with the routing lock
 *    held exclusively (so every routed operation begun on an older config has ended) and
 *    then writes the loaded version into its routers/ znode as `acked`. A migration waits
 *    for every other live router's ack (router_zk_wait_acks) before documents are on two
 *    shards, before its last catch-up (its critical section), and before it deletes the
 *    donor's copy: no router routes a write to the donor after the last catch-up, and none
 *    reads the donor after its copy is gone (migrate.c note 7).
 *
 * 6. A lease: a router that has not been connected to ZooKeeper for two thirds of the
 *    session timeout (or whose session expired) routes nothing (router_zk_check): by the
 *    time its session ends the others stop waiting for its acknowledgements and may move
 *    chunks it would still route to. An expired session is not renewed: remount.
 *
 * Thread-safety: router_zk_sync and router_zk_commit are called under mount.c's config
 * mutex (they share the snapshot); the rest may be called from any thread.
 */
#include "router.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#define THREADED 1 /* the synchronous API of libzookeeper_mt */
#include <zookeeper/zookeeper.h>

#include "fs_int.h"

#define ZBUF (1 << 20)	 /* ZooKeeper's largest znode (jute.maxbuffer's default) */
#define SESSION_MS 10000 /* the session's timeout: a dead router's znodes go after it */

/* One config document as ZooKeeper holds it: key "<coll>/<id>". */
struct zent {
	char *key;
	uint8_t *data; /* Owned: its BSON */
	uint32_t len;
};

struct zsnap {
	struct zent *e; /* Owned, sorted by key */
	int n, cap;
};

static struct {
	zhandle_t *zh;
	char hosts[1024];
	char root[512];	   /* /docfs/cluster/<name> */
	char me[64];	   /* this router's routers/ child */
	struct zsnap s;	   /* the config as last loaded or committed (under the caller's lock) */
	int zver;	   /* the version znode's version s is of; -1: none loaded */
	atomic_bool stale; /* the watch fired (note 4) */
	_Atomic int64_t loaded; /* the version the cache holds */
	int64_t acked;		/* the version written into routers/<me> */
	pthread_mutex_t lock;	/* guards the wakeups below and the session state */
	pthread_cond_t cond;
	int state;	      /* the session's last state */
	struct timespec down; /* when it stopped being connected (tv_sec 0: connected) */
	bool stop, thread_on;
	pthread_t thread;
	int (*resync)(int64_t *version, struct dfs_err *err);
	atomic_bool balancer; /* this router held the balancer's lock at its last look */
} Z = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .zver = -1};

bool router_zk_on(void)
{
	return Z.zh != NULL;
}

const char *router_zk_id(void)
{
	return Z.me;
}

int64_t router_zk_version(void)
{
	return atomic_load(&Z.loaded);
}

static int zfail(int zrc, const char *what, const char *path, struct dfs_err *err)
{
	return dfs_err_set(err, zrc == ZBADVERSION ? DFS_EBUSY : DFS_EIO, "ZooKeeper %s: %s %s: %s",
			   Z.hosts, what, path, zerror(zrc));
}

static void session_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)path;
	(void)ctx;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&Z.lock);
	if (state == ZOO_EXPIRED_SESSION_STATE && Z.state != state)
		fs_errlog_add("router: the ZooKeeper session expired: this router's balancer lock "
			      "and registration are gone, it routes nothing; remount it");
	if (state == ZOO_CONNECTED_STATE)
		Z.down.tv_sec = 0;
	else if (Z.down.tv_sec == 0)
		clock_gettime(CLOCK_MONOTONIC, &Z.down);
	Z.state = state;
	atomic_store(&Z.stale, true); /* what happened while disconnected is read again */
	pthread_cond_broadcast(&Z.cond);
	pthread_mutex_unlock(&Z.lock);
}

static void version_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)state;
	(void)path;
	(void)ctx;
	if (type == ZOO_SESSION_EVENT)
		return;
	atomic_store(&Z.stale, true);
	pthread_mutex_lock(&Z.lock);
	pthread_cond_broadcast(&Z.cond);
	pthread_mutex_unlock(&Z.lock);
}

static void snap_release(struct zsnap *s)
{
	for (int i = 0; i < s->n; i++) {
		free(s->e[i].key);
		free(s->e[i].data);
	}
	free(s->e);
	memset(s, 0, sizeof(*s));
}

static void snap_add(struct zsnap *s, const char *coll, const char *id, const uint8_t *data,
		     uint32_t len)
{
	struct zent *e;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		if (!(s->e = realloc(s->e, (size_t)s->cap * sizeof(*s->e))))
			abort();
	}
	e = &s->e[s->n++];
	if (asprintf(&e->key, "%s/%s", coll, id) < 0 || !(e->data = malloc(len ? len : 1)))
		abort();
	memcpy(e->data, data, len);
	e->len = len;
}

static int zent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct zent *)a)->key, ((const struct zent *)b)->key);
}

/* The znode name of a document's _id (note 1) into out. */
static int id_name(const bson_t *doc, char *out, size_t cap, struct dfs_err *err)
{
	struct dfs_buf b;
	bson_iter_t it;
	size_t o = 0;
	int rc;

	if (!bson_iter_init_find(&it, doc, "_id"))
		return dfs_err_set(err, DFS_EINVAL, "a config document without _id");
	dfs_buf_init(&b);
	if ((rc = store_name_from_id(bson_iter_value(&it), &b, err))) {
		dfs_buf_release(&b);
		return rc;
	}
	for (size_t i = 0; i < b.len && o + 4 < cap; i++) {
		unsigned char ch = (unsigned char)b.data[i];

		if (ch < 0x20 || ch >= 0x7f || ch == '/' || ch == '%')
			o += (size_t)snprintf(out + o, cap - o, "%%%02X", ch);
		else
			out[o++] = (char)ch;
	}
	out[o] = 0;
	dfs_buf_release(&b);
	return 0;
}

static void version_path(char *out, size_t cap)
{
	snprintf(out, cap, "%s/version", Z.root);
}

/* ---- loading (note 2) ------------------------------------------------------------- */

/* Every document under config/ into s (sorted). */
static int load_docs(struct zsnap *s, char *buf, struct dfs_err *err)
{
	struct String_vector colls = {0, NULL};
	char path[2048];
	int zrc, rc = 0;

	snprintf(path, sizeof(path), "%s/config", Z.root);
	if ((zrc = zoo_get_children(Z.zh, path, 0, &colls)) != ZOK)
		return zfail(zrc, "list", path, err);
	for (int i = 0; !rc && i < colls.count; i++) {
		struct String_vector docs = {0, NULL};
		char cpath[1024];

		snprintf(cpath, sizeof(cpath), "%s/config/%s", Z.root, colls.data[i]);
		if ((zrc = zoo_get_children(Z.zh, cpath, 0, &docs)) != ZOK) {
			if (zrc != ZNONODE)
				rc = zfail(zrc, "list", cpath, err);
			continue;
		}
		for (int j = 0; !rc && j < docs.count; j++) {
			int len = ZBUF;

			snprintf(path, sizeof(path), "%s/%s", cpath, docs.data[j]);
			zrc = zoo_get(Z.zh, path, 0, buf, &len, NULL);
			if (zrc == ZNONODE)
				continue; /* deleted meanwhile: the version check loads again */
			if (zrc != ZOK)
				rc = zfail(zrc, "read", path, err);
			else if (len >= 5)
				snap_add(s, colls.data[i], docs.data[j], (uint8_t *)buf,
					 (uint32_t)len);
		}
		deallocate_String_vector(&docs);
	}
	deallocate_String_vector(&colls);
	if (!rc)
		qsort(s->e, (size_t)s->n, sizeof(*s->e), zent_cmp);
	return rc;
}

struct coll_names {
	char (*name)[DFS_MAX_NS_NAME + 1];
	int n;
};

static int coll_name_cb(void *ctx, const struct store_coll *c)
{
	struct coll_names *cn = ctx;

	if (!(cn->name = realloc(cn->name, (size_t)(cn->n + 1) * sizeof(*cn->name))))
		abort();
	snprintf(cn->name[cn->n++], sizeof(*cn->name), "%s", c->name);
	return 0;
}

/* The local config replaced by s in c's transaction. */
static int local_replace(struct router_cfg *c, const struct zsnap *s, struct dfs_err *err)
{
	struct coll_names cn = {NULL, 0};
	int rc = store_coll_list(c->t, coll_name_cb, &cn, err);

	for (int i = 0; !rc && i < cn.n; i++)
		rc = router_cfg_del(c, cn.name[i], NULL, NULL, err);
	free(cn.name);
	for (int i = 0; !rc && i < s->n; i++) {
		char coll[DFS_MAX_NS_NAME + 1];
		const char *slash = strchr(s->e[i].key, '/');
		bson_t d;

		snprintf(coll, sizeof(coll), "%.*s", (int)(slash - s->e[i].key), s->e[i].key);
		if (!bson_init_static(&d, s->e[i].data, s->e[i].len) ||
		    !bson_validate(&d, BSON_VALIDATE_NONE, NULL))
			rc = dfs_err_set(err, DFS_ECORRUPT, "ZooKeeper: %s/config/%s holds no BSON",
					 Z.root, s->e[i].key);
		else
			rc = router_cfg_put(c, coll, &d, err);
	}
	return rc;
}

int router_zk_sync(struct store_db *db, bool force, struct dfs_err *err)
{
	char vpath[600], *buf;
	struct zsnap s = {0};
	struct Stat st1, st2;
	int zrc, rc = 0;

	if (!Z.zh || (!force && !atomic_load(&Z.stale) && Z.zver >= 0))
		return 0;
	atomic_store(&Z.stale, false); /* a change from now on marks it again */
	version_path(vpath, sizeof(vpath));
	if ((zrc = zoo_wexists(Z.zh, vpath, version_watch, NULL, &st1)) != ZOK) {
		atomic_store(&Z.stale, true);
		return zfail(zrc, "read", vpath, err);
	}
	if (st1.version == Z.zver && !force)
		return 0; /* our own commit, or nothing new */
	if (!(buf = malloc(ZBUF)))
		abort();
	for (int tries = 0;; tries++) {
		snap_release(&s);
		if ((rc = load_docs(&s, buf, err)))
			break;
		if ((zrc = zoo_exists(Z.zh, vpath, 0, &st2)) != ZOK) {
			rc = zfail(zrc, "read", vpath, err);
			break;
		}
		if (st2.version == st1.version)
			break;
		if (tries == 50) {
			rc = dfs_err_set(err, DFS_EBUSY,
					 "ZooKeeper: the cluster config changed during 50 loads");
			break;
		}
		st1 = st2;
	}
	free(buf);
	if (!rc) {
		struct router_cfg c = {.db = db};

		if (!(rc = store_txn_begin(db, true, &c.t, err)) &&
		    !(rc = local_replace(&c, &s, err)))
			rc = router_cfg_commit(&c, err);
		store_txn_abort(c.t);
	}
	if (rc) {
		snap_release(&s);
		atomic_store(&Z.stale, true);
		return dfs_err_prefix(err, "the cluster config from ZooKeeper: ");
	}
	snap_release(&Z.s);
	Z.s = s;
	Z.zver = st1.version;
	atomic_store(&Z.loaded, st1.version);
	return 0;
}

/* ---- committing (note 3) ---------------------------------------------------------- */

/* Every document of c's transaction into s (sorted). */
static int snap_of_txn(struct router_cfg *c, struct zsnap *s, struct dfs_err *err)
{
	struct coll_names cn = {NULL, 0};
	int rc = store_coll_list(c->t, coll_name_cb, &cn, err);

	for (int i = 0; !rc && i < cn.n; i++) {
		bson_t **docs = NULL;
		int n = 0;
		char id[1024];

		rc = router_cfg_list(c, cn.name[i], NULL, NULL, &docs, &n, err);
		for (int j = 0; !rc && j < n; j++)
			if (!(rc = id_name(docs[j], id, sizeof(id), err)))
				snap_add(s, cn.name[i], id, bson_get_data(docs[j]), docs[j]->len);
		router_docs_free(docs, n);
	}
	free(cn.name);
	if (!rc)
		qsort(s->e, (size_t)s->n, sizeof(*s->e), zent_cmp);
	return rc;
}

/* Creates path when it is absent (a persistent, empty znode). */
static int ensure(const char *path, struct dfs_err *err)
{
	int zrc = zoo_create(Z.zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);

	return zrc == ZOK || zrc == ZNODEEXISTS ? 0 : zfail(zrc, "create", path, err);
}

int router_zk_commit(struct router_cfg *c, struct dfs_err *err)
{
	struct zsnap s = {0};
	zoo_op_t *ops = NULL;
	zoo_op_result_t *res = NULL;
	char **paths = NULL, vpath[600];
	int nops = 0, cap, rc, zrc, i = 0, j = 0;
	struct Stat vst;
	bson_t v = BSON_INITIALIZER;

	if (!Z.zh)
		return 0;
	if ((rc = snap_of_txn(c, &s, err)))
		goto done;
	cap = Z.s.n + s.n + 1;
	if (!(ops = calloc((size_t)cap, sizeof(*ops))) ||
	    !(res = calloc((size_t)cap, sizeof(*res))) ||
	    !(paths = calloc((size_t)cap, sizeof(*paths))))
		abort();
	while (i < Z.s.n || j < s.n) {
		int cmp = i == Z.s.n ? 1 : j == s.n ? -1 : strcmp(Z.s.e[i].key, s.e[j].key);
		const struct zent *e = cmp < 0 ? &Z.s.e[i] : &s.e[j];

		if (cmp == 0 && Z.s.e[i].len == s.e[j].len &&
		    !memcmp(Z.s.e[i].data, s.e[j].data, s.e[j].len)) {
			i++, j++;
			continue;
		}
		if (asprintf(&paths[nops], "%s/config/%s", Z.root, e->key) < 0)
			abort();
		if (cmp < 0) {
			zoo_delete_op_init(&ops[nops], paths[nops], -1);
			i++;
		} else if (cmp == 0) {
			zoo_set_op_init(&ops[nops], paths[nops], (const char *)e->data, (int)e->len,
					-1, NULL);
			i++, j++;
		} else {
			char parent[1024];
			const char *slash = strchr(e->key, '/');

			snprintf(parent, sizeof(parent), "%s/config/%.*s", Z.root,
				 (int)(slash - e->key), e->key);
			if ((rc = ensure(parent, err)))
				goto done;
			zoo_create_op_init(&ops[nops], paths[nops], (const char *)e->data,
					   (int)e->len, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
			j++;
		}
		nops++;
	}
	if (nops == 0)
		goto done; /* nothing changed: no new version */
	version_path(vpath, sizeof(vpath));
	BSON_APPEND_INT64(&v, "v", (int64_t)Z.zver + 1);
	zoo_set_op_init(&ops[nops], vpath, (const char *)bson_get_data(&v), (int)v.len, Z.zver,
			&vst);
	nops++;
	zrc = zoo_multi(Z.zh, nops, ops, res);
	if (zrc == ZOK) {
		snap_release(&Z.s);
		Z.s = s;
		memset(&s, 0, sizeof(s));
		Z.zver = vst.version;
		atomic_store(&Z.loaded, vst.version);
	} else if (zrc == ZBADVERSION || zrc == ZNONODE || zrc == ZNODEEXISTS) {
		/* another router committed since this one loaded: nothing was written */
		atomic_store(&Z.stale, true);
		rc = dfs_err_set(
			err, DFS_EBUSY,
			"the cluster config changed in ZooKeeper meanwhile (another router)");
	} else {
		atomic_store(&Z.stale, true);
		rc = zfail(zrc, "commit to", Z.root, err);
	}
done:
	for (int k = 0; paths && k < cap; k++)
		free(paths[k]);
	free(paths);
	free(ops);
	free(res);
	bson_destroy(&v);
	snap_release(&s);
	return rc;
}

/* ---- routers and their acknowledgements (note 5) ---------------------------------- */

static int write_ack(int64_t version)
{
	char path[700], host[256] = "";
	bson_t d = BSON_INITIALIZER;
	int zrc;

	gethostname(host, sizeof(host) - 1);
	BSON_APPEND_INT64(&d, "acked", version);
	BSON_APPEND_UTF8(&d, "host", host);
	BSON_APPEND_INT32(&d, "pid", (int32_t)getpid());
	snprintf(path, sizeof(path), "%s/routers/%s", Z.root, Z.me);
	zrc = zoo_set(Z.zh, path, (const char *)bson_get_data(&d), (int)d.len, -1);
	bson_destroy(&d);
	return zrc;
}

bool router_zk_alive(const char *id)
{
	char path[700];

	if (!Z.zh || !id || !id[0])
		return false;
	snprintf(path, sizeof(path), "%s/routers/%s", Z.root, id);
	return zoo_exists(Z.zh, path, 0, NULL) == ZOK;
}

int router_zk_wait_acks(int64_t version, int timeout_ms, struct dfs_err *err)
{
	char path[700], buf[512];
	struct timespec t0, now;

	if (!Z.zh)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct String_vector kids = {0, NULL};
		const char *behind = NULL;
		int zrc;

		snprintf(path, sizeof(path), "%s/routers", Z.root);
		if ((zrc = zoo_get_children(Z.zh, path, 0, &kids)) != ZOK)
			return zfail(zrc, "list", path, err);
		for (int i = 0; i < kids.count && !behind; i++) {
			int len = sizeof(buf);
			bson_t d;
			bson_iter_t it;

			if (!strcmp(kids.data[i], Z.me))
				continue;
			snprintf(path, sizeof(path), "%s/routers/%s", Z.root, kids.data[i]);
			if (zoo_get(Z.zh, path, 0, buf, &len, NULL) != ZOK)
				continue; /* gone: it routes nothing any more */
			if (len < 5 || !bson_init_static(&d, (uint8_t *)buf, (size_t)len) ||
			    !bson_iter_init_find(&it, &d, "acked") ||
			    bson_iter_as_int64(&it) < version)
				behind = kids.data[i];
		}
		if (!behind) {
			deallocate_String_vector(&kids);
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >
		    timeout_ms) {
			dfs_err_set(
				err, DFS_ETIMEDOUT,
				"router %s did not acknowledge config version %lld within %d ms",
				behind, (long long)version, timeout_ms);
			deallocate_String_vector(&kids);
			return DFS_ETIMEDOUT;
		}
		deallocate_String_vector(&kids);
		usleep(10000);
	}
}

bool router_zk_balancer_turn(void)
{
	char path[700], buf[128];
	int len = sizeof(buf) - 1, zrc;

	bool mine;

	if (!Z.zh)
		return true;
	snprintf(path, sizeof(path), "%s/balancer", Z.root);
	zrc = zoo_create(Z.zh, path, Z.me, (int)strlen(Z.me), &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL,
			 NULL, 0);
	if (zrc == ZOK) {
		mine = true;
	} else if (zrc != ZNODEEXISTS || zoo_get(Z.zh, path, 0, buf, &len, NULL) != ZOK) {
		mine = false;
	} else {
		buf[len < 0 ? 0 : len] = 0;
		mine = !strcmp(buf, Z.me); /* still ours */
	}
	atomic_store(&Z.balancer, mine);
	return mine;
}

int router_zk_check(struct dfs_err *err)
{
	struct timespec now;
	int64_t ms = 0;
	int state;

	if (!Z.zh)
		return 0;
	pthread_mutex_lock(&Z.lock);
	state = Z.state;
	if (Z.down.tv_sec) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (now.tv_sec - Z.down.tv_sec) * 1000 + (now.tv_nsec - Z.down.tv_nsec) / 1000000;
	}
	pthread_mutex_unlock(&Z.lock);
	if (state != ZOO_EXPIRED_SESSION_STATE && ms < SESSION_MS * 2 / 3)
		return 0;
	return dfs_err_set(err, DFS_EIO,
			   "the ZooKeeper session of this router is %s (%lld ms): it routes "
			   "nothing, since the other routers may have moved chunks meanwhile",
			   state == ZOO_EXPIRED_SESSION_STATE ? "expired: remount the router"
							      : "lost",
			   (long long)ms);
}

bool router_zk_balancer_held(void)
{
	return Z.zh && atomic_load(&Z.balancer);
}

/* The refresher thread (note 5). */
static void *refresher(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&Z.lock);
	while (!Z.stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000000L; /* a missed wakeup costs at most this */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (!atomic_load(&Z.stale) && atomic_load(&Z.loaded) == Z.acked)
			pthread_cond_timedwait(&Z.cond, &Z.lock, &ts);
		if (Z.stop)
			break;
		pthread_mutex_unlock(&Z.lock);
		{
			struct dfs_err e = {0};
			int64_t v = -1;

			if (Z.resync(&v, &e)) {
				fs_errlog_add("router: %s", e.msg);
				usleep(200000);
			} else if (v != Z.acked) {
				if (write_ack(v) == ZOK)
					Z.acked = v;
				else
					usleep(200000); /* ZooKeeper away: not a busy loop */
			}
		}
		pthread_mutex_lock(&Z.lock);
	}
	pthread_mutex_unlock(&Z.lock);
	return NULL;
}

int router_zk_open(const char *hosts, const char *cluster, bool *fresh, struct dfs_err *err)
{
	char list[1024], path[700], created[700];
	struct timespec until;
	bson_t v = BSON_INITIALIZER;
	int zrc, rc = 0;

	*fresh = false;
	if (!cluster || !cluster[0] || strchr(cluster, '/') || strlen(cluster) > 200 ||
	    !strcmp(cluster, ".") || !strcmp(cluster, ".."))
		return dfs_err_set(
			err, DFS_EINVAL,
			"zk= needs cluster=NAME (a name without '/', at most 200 bytes)");
	snprintf(Z.hosts, sizeof(Z.hosts), "%s", hosts);
	snprintf(list, sizeof(list), "%s", hosts);
	for (char *p = list; *p; p++)
		if (*p == ';' || *p == '+')
			*p = ',';
	snprintf(Z.root, sizeof(Z.root), "/docfs/cluster/%s", cluster);
	zoo_set_debug_level((ZooLogLevel)0);
	pthread_mutex_lock(&Z.lock);
	Z.state = 0; /* not the state of an earlier session (the probe before the fork) */
	Z.down.tv_sec = 0;
	pthread_mutex_unlock(&Z.lock);
	if (!(Z.zh = zookeeper_init(list, session_watch, SESSION_MS, NULL, NULL, 0)))
		return dfs_err_set(err, DFS_EINVAL, "ZooKeeper '%s': not a host list", hosts);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&Z.lock);
	while (Z.state != ZOO_CONNECTED_STATE &&
	       pthread_cond_timedwait(&Z.cond, &Z.lock, &until) == 0)
		;
	zrc = Z.state;
	pthread_mutex_unlock(&Z.lock);
	if (zrc != ZOO_CONNECTED_STATE) {
		rc = dfs_err_set(err, DFS_EIO, "ZooKeeper '%s' did not answer within 10 s", hosts);
		goto fail;
	}
	const char *parents[] = {"/docfs", "/docfs/cluster", Z.root, "config", "routers", NULL};

	for (int i = 0; !rc && parents[i]; i++) {
		if (parents[i][0] == '/')
			snprintf(path, sizeof(path), "%s", parents[i]);
		else
			snprintf(path, sizeof(path), "%s/%s", Z.root, parents[i]);
		rc = ensure(path, err);
	}
	if (rc)
		goto fail;
	version_path(path, sizeof(path));
	BSON_APPEND_INT64(&v, "v", 0);
	zrc = zoo_create(Z.zh, path, (const char *)bson_get_data(&v), (int)v.len,
			 &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	if (zrc == ZOK)
		*fresh = true;
	else if (zrc != ZNODEEXISTS) {
		rc = zfail(zrc, "create", path, err);
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/routers/r-", Z.root);
	zrc = zoo_create(Z.zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE,
			 created, sizeof(created));
	if (zrc != ZOK) {
		rc = zfail(zrc, "create", path, err);
		goto fail;
	}
	snprintf(Z.me, sizeof(Z.me), "%s", strrchr(created, '/') + 1);
	Z.acked = -1;
	atomic_store(&Z.stale, true);
	bson_destroy(&v);
	return 0;
fail:
	bson_destroy(&v);
	zookeeper_close(Z.zh);
	Z.zh = NULL;
	return rc;
}

int router_zk_seed(struct store_db *db, struct dfs_err *err)
{
	struct router_cfg c = {.db = db};
	int rc;

	Z.zver = 0; /* the version znode just created, with nothing under config/ */
	if ((rc = store_txn_begin(db, false, &c.t, err)))
		return rc;
	rc = router_zk_commit(&c, err);
	store_txn_abort(c.t);
	return rc;
}

void router_zk_start(int (*resync)(int64_t *version, struct dfs_err *err))
{
	Z.resync = resync;
	Z.stop = false;
	if (Z.zh && pthread_create(&Z.thread, NULL, refresher, NULL) == 0)
		Z.thread_on = true;
}

void router_zk_close(void)
{
	if (Z.thread_on) {
		pthread_mutex_lock(&Z.lock);
		Z.stop = true;
		pthread_cond_broadcast(&Z.cond);
		pthread_mutex_unlock(&Z.lock);
		pthread_join(Z.thread, NULL);
		Z.thread_on = false;
	}
	if (Z.zh)
		zookeeper_close(Z.zh); /* its ephemeral znodes (registration, lock) go with it */
	Z.zh = NULL;
	snap_release(&Z.s);
	Z.zver = -1;
}
