/*
 * ttl.c - the TTL sweeper of a mount: a thread that, every ttl_s seconds, asks the store to
 * delete the expired documents of every database (store_ttl_sweep does the work, in small
 * write transactions). It sends no kernel invalidations: the deletions are in the change
 * feed, and the notifier thread turns them into invalidations like any other process's
 * writes. Deletions go to the log file; failures also to /.docfs/errors.
 */
#include "fs_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tcond = PTHREAD_COND_INITIALIZER;
static pthread_t tthread;
static bool trunning;	     /* the thread was started and not yet told to stop */
static int tperiod_s;	     /* seconds between sweeps */
static struct store *tstore; /* Borrowed: the mounted store, outlives the thread */
static char tlast_err[256];  /* the last failure logged (repeats are not logged again) */

struct db_names {
	char **v; /* Owned, each name too */
	size_t n;
};

static int collect_db(void *ctx, const char *name)
{
	struct db_names *d = ctx;

	d->v = realloc(d->v, (d->n + 1) * sizeof(*d->v));
	if (!d->v)
		abort();
	d->v[d->n] = strdup(name);
	if (!d->v[d->n])
		abort();
	d->n++;
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One sweep over every database; logs what it deleted and what failed. */
static void sweep_all(void)
{
	struct db_names dbs = {0};
	struct dfs_err err = {0};

	if (store_db_list(tstore, collect_db, &dbs, &err))
		fs_errlog_add("ttl: %s", err.msg);
	for (size_t i = 0; i < dbs.n; i++) {
		struct store_db *db;
		int64_t deleted = 0;

		dfs_err_clear(&err);
		if (store_db_get(tstore, dbs.v[i], false, &db, &err) == 0 &&
		    store_ttl_sweep(db, now_ms(), &deleted, &err) == 0) {
			if (deleted > 0)
				fs_log_info("ttl: deleted %lld expired documents in '%s'",
					    (long long)deleted, dbs.v[i]);
		} else if (err.code != DFS_ENOENT && err.code != DFS_EROFS &&
			   strcmp(err.msg, tlast_err) != 0) {
			/* A database dropped meanwhile is no failure, nor a replica set's
			 * secondary's refusal (only the primary's sweeper deletes; its deletes
			 * are replicated); a failure that repeats every sweep is logged once. */
			snprintf(tlast_err, sizeof(tlast_err), "%s", err.msg);
			fs_errlog_add("ttl: database '%s': %s", dbs.v[i], err.msg);
		}
		free(dbs.v[i]);
	}
	free(dbs.v);
}

static void *sweeper(void *arg)
{
	pthread_mutex_lock(&tlock);
	while (trunning) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += tperiod_s;
		while (trunning && pthread_cond_timedwait(&tcond, &tlock, &until) == 0)
			; /* woken early but still running: keep waiting for the period */
		if (!trunning)
			break;
		pthread_mutex_unlock(&tlock);
		sweep_all();
		pthread_mutex_lock(&tlock);
	}
	pthread_mutex_unlock(&tlock);
	return arg;
}

int fs_ttl_start(struct store *s, int period_s, struct dfs_err *err)
{
	int rc;

	if (period_s <= 0)
		return 0;
	tstore = s;
	tperiod_s = period_s;
	trunning = true;
	rc = fs_thread_create(&tthread, NULL, sweeper, NULL);
	if (rc) {
		trunning = false;
		return dfs_err_set(err, DFS_EIO, "cannot start the TTL sweeper: %s", strerror(rc));
	}
	return 0;
}

void fs_ttl_stop(void)
{
	pthread_mutex_lock(&tlock);
	if (!trunning) {
		pthread_mutex_unlock(&tlock);
		return;
	}
	trunning = false;
	pthread_cond_signal(&tcond);
	pthread_mutex_unlock(&tlock);
	pthread_join(tthread, NULL); /* after the sweep in progress, if any */
	tstore = NULL;
}
