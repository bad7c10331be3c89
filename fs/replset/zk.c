/*
 * zk.c - what replica sets keep in ZooKeeper, through its official C client (libzookeeper_mt):
 * /docfs/rs/<set>/config holds the set's configuration as BSON bytes. Writes are
 * compare-and-sets on the znode's version, so two changes made from the same version
 * cannot both land (rsconf.c note 3). Nothing else is kept there yet.
 */
#include "replset.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define THREADED 1 /* the synchronous API of libzookeeper_mt */
#include <zookeeper/zookeeper.h>

struct rs_zk {
	zhandle_t *zh;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int state; /* the session's last state (ZOO_CONNECTED_STATE, ...) */
};

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	struct rs_zk *z = ctx;

	(void)zh;
	(void)path;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&z->lock);
	z->state = state;
	pthread_cond_broadcast(&z->cond);
	pthread_mutex_unlock(&z->lock);
}

int rs_zk_open(const char *hosts, int timeout_ms, struct rs_zk **out, struct dfs_err *err)
{
	struct rs_zk *z = calloc(1, sizeof(*z));
	struct timespec until;
	char *list;
	int state;

	if (!z || !(list = strdup(hosts)))
		abort();
	for (char *p = list; *p; p++)
		if (*p == ';' || *p == '+')
			*p = ',';
	pthread_mutex_init(&z->lock, NULL);
	pthread_cond_init(&z->cond, NULL);
	zoo_set_debug_level((ZooLogLevel)0); /* errors reach the caller as messages */
	z->zh = zookeeper_init(list, watcher, timeout_ms > 0 ? timeout_ms : 10000, NULL, z, 0);
	free(list);
	if (!z->zh) {
		rs_zk_close(z);
		return dfs_err_set(err, DFS_EINVAL, "ZooKeeper '%s': not a host list", hosts);
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (timeout_ms > 0 ? timeout_ms : 10000) / 1000;
	pthread_mutex_lock(&z->lock);
	while (z->state != ZOO_CONNECTED_STATE &&
	       pthread_cond_timedwait(&z->cond, &z->lock, &until) == 0)
		;
	state = z->state;
	pthread_mutex_unlock(&z->lock);
	if (state != ZOO_CONNECTED_STATE) {
		rs_zk_close(z);
		return dfs_err_set(err, DFS_EIO, "ZooKeeper '%s' did not answer within %d ms", hosts,
				   timeout_ms);
	}
	*out = z;
	return 0;
}

void rs_zk_close(struct rs_zk *z)
{
	if (!z)
		return;
	if (z->zh)
		zookeeper_close(z->zh);
	pthread_cond_destroy(&z->cond);
	pthread_mutex_destroy(&z->lock);
	free(z);
}

static int zfail(int zrc, const char *what, const char *path, struct dfs_err *err)
{
	int code = zrc == ZNONODE	? DFS_ENOENT
		   : zrc == ZNODEEXISTS ? DFS_EEXIST
		   : zrc == ZBADVERSION ? DFS_EBUSY
					: DFS_EIO;

	return dfs_err_set(err, code, "ZooKeeper: %s %s: %s", what, path, zerror(zrc));
}

static void conf_path(const char *set, char *out, size_t cap)
{
	snprintf(out, cap, "/docfs/rs/%s/config", set);
}

int rs_zk_get_conf(struct rs_zk *z, const char *set, bson_t *out, int *version,
		   struct dfs_err *err)
{
	char path[300];
	int len = 1 << 20, zrc;
	char *buf = malloc((size_t)len);
	struct Stat st;

	if (!buf)
		abort();
	conf_path(set, path, sizeof(path));
	bson_init(out);
	zrc = zoo_get(z->zh, path, 0, buf, &len, &st);
	if (zrc != ZOK) {
		free(buf);
		if (zrc == ZNONODE)
			return dfs_err_set(err, DFS_ENOENT,
					   "replica set %s has no configuration: run rs.initiate "
					   "(docfs rs ... initiate) first",
					   set);
		return zfail(zrc, "read", path, err);
	}
	bson_t view;

	if (len < 5 || !bson_init_static(&view, (const uint8_t *)buf, (size_t)len) ||
	    !bson_validate(&view, BSON_VALIDATE_NONE, NULL)) {
		free(buf);
		return dfs_err_set(err, DFS_ECORRUPT, "ZooKeeper: %s holds no BSON document", path);
	}
	bson_concat(out, &view);
	free(buf);
	*version = st.version;
	return 0;
}

int rs_zk_put_conf(struct rs_zk *z, const char *set, const bson_t *conf, int version,
		   struct dfs_err *err)
{
	char path[300], parent[300];
	int zrc;

	conf_path(set, path, sizeof(path));
	if (version >= 0) {
		zrc = zoo_set(z->zh, path, (const char *)bson_get_data(conf), (int)conf->len, version);
		return zrc == ZOK ? 0 : zfail(zrc, "write", path, err);
	}
	/* the parents, then the node itself, which must not exist */
	const char *parents[] = {"/docfs", "/docfs/rs", NULL};

	for (int i = 0; parents[i]; i++) {
		zrc = zoo_create(z->zh, parents[i], NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
		if (zrc != ZOK && zrc != ZNODEEXISTS)
			return zfail(zrc, "create", parents[i], err);
	}
	snprintf(parent, sizeof(parent), "/docfs/rs/%s", set);
	zrc = zoo_create(z->zh, parent, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	if (zrc != ZOK && zrc != ZNODEEXISTS)
		return zfail(zrc, "create", parent, err);
	zrc = zoo_create(z->zh, path, (const char *)bson_get_data(conf), (int)conf->len,
			 &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	return zrc == ZOK ? 0 : zfail(zrc, "create", path, err);
}

/* ---- what members keep there (member.c note 1) ---------------------------------------- */

int64_t rs_zk_session(struct rs_zk *z)
{
	const clientid_t *id = zoo_client_id(z->zh);

	return id ? id->client_id : 0;
}

int rs_zk_timeout(struct rs_zk *z)
{
	return zoo_recv_timeout(z->zh);
}

bool rs_zk_expired(struct rs_zk *z)
{
	int state;

	pthread_mutex_lock(&z->lock);
	state = z->state;
	pthread_mutex_unlock(&z->lock);
	return state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE;
}

int rs_zk_get(struct rs_zk *z, const char *path, bson_t *out, int *version, int64_t *owner,
	      struct dfs_err *err)
{
	char buf[65536];
	int len = sizeof(buf), zrc;
	struct Stat st;
	bson_t view;

	bson_init(out);
	zrc = zoo_get(z->zh, path, 0, buf, &len, &st);
	if (zrc != ZOK)
		return zfail(zrc, "read", path, err);
	if (len < 5 || !bson_init_static(&view, (const uint8_t *)buf, (size_t)len) ||
	    !bson_validate(&view, BSON_VALIDATE_NONE, NULL))
		return dfs_err_set(err, DFS_ECORRUPT, "ZooKeeper: %s holds no BSON document", path);
	bson_concat(out, &view);
	if (version)
		*version = st.version;
	if (owner)
		*owner = st.ephemeralOwner;
	return 0;
}

int rs_zk_create(struct rs_zk *z, const char *path, const bson_t *doc, bool ephemeral,
		 struct dfs_err *err)
{
	int zrc = zoo_create(z->zh, path, (const char *)bson_get_data(doc), (int)doc->len,
			     &ZOO_OPEN_ACL_UNSAFE, ephemeral ? ZOO_EPHEMERAL : 0, NULL, 0);

	return zrc == ZOK ? 0 : zfail(zrc, "create", path, err);
}

int rs_zk_set(struct rs_zk *z, const char *path, const bson_t *doc, int version,
	      struct dfs_err *err)
{
	int zrc = zoo_set(z->zh, path, (const char *)bson_get_data(doc), (int)doc->len, version);

	return zrc == ZOK ? 0 : zfail(zrc, "write", path, err);
}

int rs_zk_delete(struct rs_zk *z, const char *path, int version, struct dfs_err *err)
{
	int zrc = zoo_delete(z->zh, path, version);

	return zrc == ZOK ? 0 : zfail(zrc, "delete", path, err);
}

int rs_zk_children(struct rs_zk *z, const char *path, int (*cb)(void *ctx, const char *name),
		   void *ctx, struct dfs_err *err)
{
	struct String_vector v = {0};
	int zrc = zoo_get_children(z->zh, path, 0, &v), rc = 0;

	if (zrc != ZOK)
		return zfail(zrc, "list", path, err);
	for (int i = 0; i < v.count && !rc; i++)
		rc = cb(ctx, v.data[i]);
	deallocate_String_vector(&v);
	return rc;
}
