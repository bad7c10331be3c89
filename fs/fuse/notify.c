/*
 * notify.c - the notifier thread: the only place that sends kernel cache invalidations.
 * Request handlers queue what they changed; the thread also polls the change feed of every
 * database the mount has seen, so writes by other processes (the CLI) reach the kernel
 * caches within one poll period. It never runs inside a request handler, so an
 * invalidation can never wait on the request that asked for it. The one notification a
 * handler sends itself is a store of a file's content into the page cache
 * (fs_notify_store), only on a worker of the pool (fsops.c note 3).
 */
#define FUSE_USE_VERSION 34
#include "fs_int.h"

#include <ctype.h>
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct qitem {
	uint64_t nodeid; /* inode to invalidate, or 0 */
	uint64_t parent; /* directory of the entry to invalidate, or 0 */
	char *name;	 /* Owned: the entry name */
};

struct watched {
	struct store_db *db; /* Borrowed */
	int64_t seq;	     /* last change seen */
};

static struct fuse_session *nse;
static pthread_t nthread;
static bool nrunning;
static int nperiod_ms = 200;
static pthread_mutex_t nlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ncond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t ndone = PTHREAD_COND_INITIALIZER; /* a pass over the feeds ended */
static bool nwanted;					/* fs_notify_sync waits for a pass */
static uint64_t npasses;				/* passes ended so far */
static struct qitem *queue;
static size_t qlen, qcap;
static struct watched *watch;
static size_t nwatch, watchcap;

static void enqueue(uint64_t nodeid, uint64_t parent, const char *name)
{
	pthread_mutex_lock(&nlock);
	if (qlen == qcap) {
		qcap = qcap ? qcap * 2 : 64;
		queue = realloc(queue, qcap * sizeof(*queue));
		if (!queue)
			abort();
	}
	queue[qlen].nodeid = nodeid;
	queue[qlen].parent = parent;
	queue[qlen].name = name ? strdup(name) : NULL;
	qlen++;
	pthread_cond_signal(&ncond);
	pthread_mutex_unlock(&nlock);
}

void fs_notify_inode(uint64_t nodeid)
{
	enqueue(nodeid, 0, NULL);
}

void fs_notify_entry(uint64_t parent, const char *name)
{
	enqueue(0, parent, name);
}

/* Returns once a whole pass of the notifier has run after this call (at most 2 s): every
 * invalidation queued and every change committed before the call has then been sent. A pass
 * under way may have taken its queue and read the feeds before that: the one after it
 * certainly sees them. */
static void wait_for_pass(void)
{
	struct timespec until;
	uint64_t target;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2; /* never hang a request on a stuck notifier */
	pthread_mutex_lock(&nlock);
	target = npasses + 2;
	while (nrunning && npasses < target) {
		nwanted = true;
		pthread_cond_signal(&ncond);
		if (pthread_cond_timedwait(&ndone, &nlock, &until) != 0)
			break;
	}
	pthread_mutex_unlock(&nlock);
}

void fs_notify_entry_wait(uint64_t parent, const char *name)
{
	enqueue(0, parent, name);
	wait_for_pass();
}

void fs_notify_watch(struct store_db *db)
{
	int64_t seq = 0;

	pthread_mutex_lock(&nlock);
	for (size_t i = 0; i < nwatch; i++) {
		if (watch[i].db == db) {
			pthread_mutex_unlock(&nlock);
			return;
		}
	}
	pthread_mutex_unlock(&nlock);
	store_changes_last(db, &seq, NULL);
	pthread_mutex_lock(&nlock);
	for (size_t i = 0; i < nwatch; i++) {
		if (watch[i].db == db) {
			pthread_mutex_unlock(&nlock);
			return;
		}
	}
	if (nwatch == watchcap) {
		watchcap = watchcap ? watchcap * 2 : 8;
		watch = realloc(watch, watchcap * sizeof(*watch));
		if (!watch)
			abort();
	}
	watch[nwatch].db = db;
	watch[nwatch].seq = seq;
	nwatch++;
	pthread_mutex_unlock(&nlock);
}

static void inval_inode(uint64_t nodeid)
{
	if (nodeid)
		fuse_lowlevel_notify_inval_inode(nse, nodeid, 0, 0);
}

static void inval_entry(uint64_t parent, const char *name)
{
	if (parent && name && name[0])
		fuse_lowlevel_notify_inval_entry(nse, parent, name, strlen(name));
}

struct feed_ctx {
	struct store_db *db;
	uint64_t dirs[16]; /* collection directories whose listing changed in this pass */
	size_t ndirs;
};

/* Queues the invalidation of a collection's listing (the kernel's readdir cache, fsops.c
 * note 8) for the end of the pass: a pass over an updateMany sends it once. */
static void dir_changed(struct feed_ctx *fc, uint64_t dir)
{
	if (!dir)
		return;
	for (size_t i = 0; i < fc->ndirs; i++)
		if (fc->dirs[i] == dir)
			return;
	if (fc->ndirs == sizeof(fc->dirs) / sizeof(fc->dirs[0]))
		inval_inode(dir);
	else
		fc->dirs[fc->ndirs++] = dir;
}

/* Is collection id of db called name right now? */
static bool coll_is(struct store_db *db, int64_t id, const char *name)
{
	struct store_txn *t;
	struct store_coll c;
	bool is = false;

	if (store_txn_begin(db, false, &t, NULL))
		return false;
	if (store_coll_by_id(t, id, &c, NULL) == 0)
		is = strcmp(c.name, name) == 0;
	store_txn_abort(t);
	return is;
}

/* Turns one change record into the invalidations it implies. */
static int on_change(void *ctx, const struct store_change *c)
{
	struct feed_ctx *fc = ctx;
	uint64_t coll_node = fs_node_touch_ino(fs_ino_entry(fc->db, c->coll));

	switch (c->op) {
	case STORE_CH_PUT:
		/* A put may be a new name (the record does not say): the listing may change. */
		inval_inode(fs_node_touch_ino(fs_ino_entry(fc->db, c->id)));
		dir_changed(fc, coll_node);
		break;
	case STORE_CH_DEL: {
		/* In a scratch directory the name is "<its id>/<name>" (fsops.c note 10; id 0:
		 * a hidden file, store/doc.c note 6). */
		const char *slash = strchr(c->name, '/');
		long long dir = slash && isdigit((unsigned char)c->name[0])
					? strtoll(c->name, NULL, 10)
					: 0;

		if (dir > 0)
			inval_entry(fs_node_touch_ino(fs_ino_entry(fc->db, dir)), slash + 1);
		else if (!slash)
			inval_entry(coll_node, c->name);
		inval_inode(fs_node_touch_ino(fs_ino_entry(fc->db, c->id)));
		dir_changed(fc, coll_node);
		break;
	}
	case STORE_CH_COLL: {
		/* Created, dropped, renamed or emptied: forget what the kernel knows of it. */
		uint64_t *ids;
		char **names;
		size_t n = fs_nodes_of_coll(fc->db, c->coll, &ids, &names);

		/* A collection that is there under this name (just created, or emptied) keeps
		 * its dentry: dropping it would break the cwd of a shell inside it. */
		if (!coll_is(fc->db, c->coll, c->name))
			inval_entry(fs_node_touch_ino(fs_ino_db(fc->db)), c->name);
		inval_inode(coll_node);
		for (size_t i = 0; i < n; i++) {
			inval_entry(coll_node, names[i]);
			inval_inode(ids[i]);
			free(names[i]);
		}
		free(ids);
		free(names);
		break;
	}
	case STORE_CH_INSERTS:
		inval_inode(coll_node);
		break;
	default:
		break;
	}
	return 0;
}

static void *notifier(void *arg)
{
	pthread_mutex_lock(&nlock);
	while (nrunning) {
		struct timespec until;
		struct qitem *items;
		size_t n;

		if (qlen == 0 && !nwanted) {
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += (long)nperiod_ms * 1000000;
			until.tv_sec += until.tv_nsec / 1000000000;
			until.tv_nsec %= 1000000000;
			pthread_cond_timedwait(&ncond, &nlock, &until);
		}
		if (!nrunning)
			break;
		nwanted = false;
		items = queue;
		n = qlen;
		queue = NULL;
		qlen = qcap = 0;
		pthread_mutex_unlock(&nlock);
		for (size_t i = 0; i < n; i++) {
			inval_inode(items[i].nodeid);
			inval_entry(items[i].parent, items[i].name);
			free(items[i].name);
		}
		free(items);
		/* The change feed of every database seen so far. */
		for (size_t i = 0;; i++) {
			struct feed_ctx fc;
			int64_t seq;

			pthread_mutex_lock(&nlock);
			if (i >= nwatch) {
				pthread_mutex_unlock(&nlock);
				break;
			}
			fc.db = watch[i].db;
			fc.ndirs = 0;
			seq = watch[i].seq;
			pthread_mutex_unlock(&nlock);
			if (store_db_gone(fc.db)) {
				/* Dropped, here or by another process, and perhaps created again
				 * (store/db.c note 7): while the kernel holds its directory, the
				 * entry goes, and the next lookup of the name finds what is there
				 * now, and watches that. Only then: by name it could be the entry
				 * of a database made again here (the cwd of a shell). */
				uint64_t node = fs_node_of_db(fc.db);

				if (node) {
					inval_entry(FUSE_ROOT_ID, store_db_name(fc.db));
					inval_inode(node);
				}
				pthread_mutex_lock(&nlock);
				watch[i] = watch[--nwatch];
				pthread_mutex_unlock(&nlock);
				i--;
				continue;
			}
			{
				int64_t last = seq;

				if (store_changes_last(fc.db, &last, NULL) == 0 && last != seq) {
					store_changes_since(fc.db, seq, on_change, &fc, NULL);
					for (size_t k = 0; k < fc.ndirs; k++)
						inval_inode(fc.dirs[k]);
					pthread_mutex_lock(&nlock);
					watch[i].seq = last;
					pthread_mutex_unlock(&nlock);
				}
			}
		}
		pthread_mutex_lock(&nlock);
		npasses++;
		pthread_cond_broadcast(&ndone);
	}
	pthread_cond_broadcast(&ndone);
	pthread_mutex_unlock(&nlock);
	return arg;
}

int fs_notify_store(uint64_t nodeid, const char *data, size_t len)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);

	if (!nse)
		return -ENOTCONN;
	bv.buf[0].mem = (void *)data;
	return fuse_lowlevel_notify_store(nse, nodeid, 0, &bv, 0);
}

void fs_notify_sync(struct store_db *db)
{
	fs_notify_watch(db);
	wait_for_pass();
}

int fs_notify_start(struct fuse_session *se, int period_ms, struct dfs_err *err)
{
	int rc;

	nse = se;
	if (period_ms > 0)
		nperiod_ms = period_ms;
	nrunning = true;
	rc = fs_thread_create(&nthread, NULL, notifier, NULL);
	if (rc) {
		nrunning = false;
		return dfs_err_set(err, DFS_EIO, "cannot start the notifier: %s", strerror(rc));
	}
	return 0;
}

void fs_notify_stop(void)
{
	pthread_mutex_lock(&nlock);
	if (!nrunning) {
		pthread_mutex_unlock(&nlock);
		return;
	}
	nrunning = false;
	pthread_cond_signal(&ncond);
	pthread_mutex_unlock(&nlock);
	pthread_join(nthread, NULL);
	for (size_t i = 0; i < qlen; i++)
		free(queue[i].name);
	free(queue);
	queue = NULL;
	qlen = qcap = 0;
	free(watch);
	watch = NULL;
	nwatch = watchcap = 0;
}
