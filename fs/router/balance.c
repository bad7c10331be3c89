/*
 * balance.c - the router's balancer thread: every round (-o balancer_ms=, default 10 s as
 * MongoDB's) it looks at each sharded collection and makes at most one change, through the
 * same commands a user would run: a split at a zone boundary, or a migration (migrate.c).
 * It does nothing while the balancer is stopped (balancerStop, config.settings) or for a
 * collection with noBalance.
 *
 * Design notes
 * 1. The order of what a round fixes, MongoDB's: a chunk that straddles a zone boundary is
 *    split there first; then a chunk on a draining shard (removeShard) or on a shard
 *    outside its chunk's zone moves to the shard of the allowed set that has the fewest
 *    chunks of the collection; then, when the shards allowed for the chunks outside every
 *    zone differ by the migration threshold or more (2 chunks below 20 chunks in all, 4
 *    below 80, else 8), one such chunk moves from the fullest to the emptiest.
 * 2. One migration at a time (migrate.c note 3): a round that finds a migration running
 *    (a user's moveChunk) waits for the next round.
 * 4. Before anything else, a chunk that holds more than the chunk size (-o chunk_mb=, else
 *    config.settings chunksize, 64 MB as MongoDB 3.4) is split at the median shard key of
 *    its documents: a shard whose collection (its .stats) is over the chunk size has its
 *    documents' keys read, counted per chunk, and its biggest chunk (documents times the
 *    shard's average size) split when over. MongoDB splits as inserts come; here it
 *    happens at the next round, so a chunk can grow past the size in between.
 * 5. With zk= (several routers over one cluster) a round runs only in the router holding
 *    the balancer's lock, an ephemeral znode (zkcfg.c): when that router ends or dies,
 *    its session's end frees the lock and another router's next round takes it.
 * 3. What it did is logged ("balancer: moved chunk ... from A to B") to the log file and
 *    counted in /.cluster/balancer's docfs figures (rounds, moves, splits, lastError).
 */
#include "router.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs_int.h"

static struct {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool running, stop;
	int interval_ms;
	int64_t chunk_mb; /* -o chunk_mb (0: config.settings chunksize) */
	int64_t rounds, moves, splits;
	char last_error[512];
} B = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* A zone range of the collection and the shards in its zone. */
struct zone {
	bson_t *min, *max; /* Borrowed from the tags documents */
	const char *tag;
};

struct shard_info {
	const char *name;
	bool draining;
	const bson_t *doc; /* its config.shards document, for its tags */
	int chunks;	   /* of the collection */
};

static bool shard_in_zone(const struct shard_info *s, const char *tag)
{
	bson_iter_t it, a;

	if (!bson_iter_init_find(&it, s->doc, "tags") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &a))
		return false;
	while (bson_iter_next(&a))
		if (BSON_ITER_HOLDS_UTF8(&a) && !strcmp(bson_iter_utf8(&a, NULL), tag))
			return true;
	return false;
}

/* The zone of chunk [min, max), or NULL when it lies in none; *straddle gets a zone bound
 * strictly inside the chunk (to split at), or NULL. */
static const struct zone *zone_of(const struct zone *z, int nz, const struct query_chunk *c,
				  const bson_t **straddle)
{
	*straddle = NULL;
	for (int i = 0; i < nz; i++) {
		bool min_in = query_shard_bound_compare(z[i].min, c->min) > 0 &&
			      query_shard_bound_compare(z[i].min, c->max) < 0;
		bool max_in = query_shard_bound_compare(z[i].max, c->min) > 0 &&
			      query_shard_bound_compare(z[i].max, c->max) < 0;

		if (min_in || max_in) {
			*straddle = min_in ? z[i].min : z[i].max;
			return NULL;
		}
		if (query_shard_bound_compare(z[i].min, c->min) <= 0 &&
		    query_shard_bound_compare(c->max, z[i].max) <= 0)
			return &z[i];
	}
	return NULL;
}

/* The allowed shard (in zone tag, or any when NULL; never draining) with the fewest
 * chunks, or NULL. */
static struct shard_info *emptiest(struct shard_info *s, int n, const char *tag)
{
	struct shard_info *best = NULL;

	for (int i = 0; i < n; i++) {
		if (s[i].draining || (tag && !shard_in_zone(&s[i], tag)))
			continue;
		if (!best || s[i].chunks < best->chunks)
			best = &s[i];
	}
	return best;
}

static int threshold(int nchunks)
{
	return nchunks < 20 ? 2 : nchunks < 80 ? 4 : 8;
}

struct commit_ctx {
	bson_t cmd, reply;
	const char *ns, *from, *to;
	const bson_t *min, *max;
};

static int commit_move(void *ctx, struct dfs_err *err)
{
	struct commit_ctx *c = ctx;

	/* the chunk must still be where it was (another router's move or split) */
	return router_commit_move(c->ns, c->min, c->max, c->from, c->to, &c->reply, err);
}

/* Moves chunk idx of ns to shard to (migrate.c). */
static int move(const struct router_ns *rns, const char *ns, const char *db, const char *coll,
		int idx, const char *to, struct dfs_err *err)
{
	struct commit_ctx cc;
	bson_t arr;
	int rc;

	bson_init(&cc.cmd);
	bson_init(&cc.reply);
	BSON_APPEND_UTF8(&cc.cmd, "moveChunk", ns);
	BSON_APPEND_ARRAY_BEGIN(&cc.cmd, "bounds", &arr);
	BSON_APPEND_DOCUMENT(&arr, "0", rns->map.c[idx].min);
	BSON_APPEND_DOCUMENT(&arr, "1", rns->map.c[idx].max);
	bson_append_array_end(&cc.cmd, &arr);
	BSON_APPEND_UTF8(&cc.cmd, "to", to);
	cc.ns = ns;
	cc.min = rns->map.c[idx].min;
	cc.max = rns->map.c[idx].max;
	cc.from = rns->map.c[idx].shard;
	cc.to = to;
	rc = router_migrate(rns, db, coll, idx, to, commit_move, &cc, NULL, err);
	if (!rc) {
		struct dfs_buf b;

		dfs_buf_init(&b);
		store_codec_render(rns->map.c[idx].min, STORE_RENDER_COMPACT, &b, NULL);
		fs_log_info("balancer: moved the chunk of %s from %s from %s to %s", ns, b.data,
			    rns->map.c[idx].shard, to);
		dfs_buf_release(&b);
		B.moves++;
	}
	bson_destroy(&cc.cmd);
	bson_destroy(&cc.reply);
	return rc;
}

/* The chunk size in bytes: -o chunk_mb, else config.settings chunksize (MB), else 64 MB. */
static int64_t chunk_bytes(void)
{
	bson_t **docs = NULL, f;
	int64_t mb = B.chunk_mb > 0 ? B.chunk_mb : ROUTER_CHUNKSIZE_MB;
	int n = 0;

	if (B.chunk_mb > 0)
		return mb << 20;
	bson_init(&f);
	BSON_APPEND_UTF8(&f, "_id", "chunksize");
	if (!router_cfg_read_list("settings", &f, &docs, &n, NULL) && n > 0) {
		bson_iter_t it;

		if (bson_iter_init_find(&it, docs[0], "value") && BSON_ITER_HOLDS_NUMBER(&it) &&
		    bson_iter_as_int64(&it) > 0)
			mb = bson_iter_as_int64(&it);
	}
	router_docs_free(docs, n);
	bson_destroy(&f);
	return mb << 20;
}

/* Splits the largest chunk of ns on shard s at its median key when it holds more than the
 * chunk size (note 4); *did tells whether it did. */
static int split_big(const struct router_ns *rns, const char *ns, const char *db, const char *coll,
		     const struct router_shard *s, int64_t limit, bool *did, struct dfs_err *err)
{
	char rel[ROUTER_PATH_MAX], p[ROUTER_PATH_MAX];
	struct dfs_buf text, proj;
	int64_t size = 0, count = 0, *per;
	bson_t **keys = NULL;
	int nkeys = 0, capk = 0, big = -1, rc = 0;
	size_t at = 0;
	bson_t stats;

	*did = false;
	dfs_buf_init(&text);
	dfs_buf_init(&proj);
	bson_init(&stats);
	/* the shard's figures first: most rounds stop here */
	snprintf(rel, sizeof(rel), "%s/%s/.stats", db, coll);
	router_shard_path(s, rel, p, sizeof(p));
	if (!router_read_file(p, &text, NULL) &&
	    !store_codec_parse_doc(text.data, text.len, &stats, NULL)) {
		bson_iter_t it;

		if (bson_iter_init_find(&it, &stats, "size"))
			size = bson_iter_as_int64(&it);
		if (bson_iter_init_find(&it, &stats, "count"))
			count = bson_iter_as_int64(&it);
	}
	bson_destroy(&stats);
	if (size <= limit || count < 2) {
		dfs_buf_release(&text);
		return 0;
	}
	/* the shard keys of its documents, counted per chunk */
	dfs_buf_puts(&proj, "{");
	for (int k = 0; k < rns->map.key.n; k++)
		dfs_buf_printf(&proj, "%s\"%s\": 1", k ? ", " : "", rns->map.key.f[k].path);
	dfs_buf_puts(&proj, "}");
	snprintf(rel, sizeof(rel), "%s/%s/query/{}?projection=%s", db, coll, proj.data);
	router_shard_path(s, rel, p, sizeof(p));
	dfs_buf_reset(&text);
	if (router_read_file(p, &text, NULL)) {
		rc = router_shard_fail(s, rel, errno, err);
		goto done;
	}
	per = calloc((size_t)rns->map.n + 1, sizeof(*per));
	if (!per)
		abort();
	for (int pass = 0; pass < 2 && !rc; pass++) {
		/* pass 0 counts per chunk, pass 1 keeps the keys of the biggest */
		at = 0;
		while (at < text.len) {
			size_t used;
			bson_t doc, key;
			int idx = -1;

			bson_init(&doc);
			if (store_codec_parse_next(text.data + at, text.len - at, 1, &used, &doc,
						   NULL)) {
				bson_destroy(&doc);
				break;
			}
			at += used;
			bson_init(&key);
			if (!query_shard_key_of(&rns->map.key, &doc, &key, NULL) &&
			    (idx = query_chunk_map_find(&rns->map, &key)) >= 0) {
				if (pass == 0) {
					per[idx]++;
				} else if (idx == big) {
					if (nkeys == capk) {
						capk = capk ? 2 * capk : 1024;
						keys = realloc(keys, (size_t)capk * sizeof(*keys));
						if (!keys)
							abort();
					}
					keys[nkeys++] = bson_copy(&key);
				}
			}
			bson_destroy(&key);
			bson_destroy(&doc);
		}
		if (pass == 0) {
			for (int c = 0; c < rns->map.n; c++)
				if (!strcmp(rns->map.c[c].shard, s->name) && !rns->map.c[c].jumbo &&
				    (big < 0 || per[c] > per[big]))
					big = c;
			/* the chunk's bytes: its documents at the shard's average size */
			if (big < 0 || per[big] < 2 || per[big] * (size / count) <= limit)
				break;
		}
	}
	if (!rc && nkeys >= 2) {
		bson_t middle, cmd, reply;
		struct dfs_err e = {0};

		bson_init(&middle);
		if (!query_chunk_middle(&rns->map, big, (const bson_t *const *)keys, nkeys, &middle,
					&e)) {
			bson_init(&cmd);
			bson_init(&reply);
			BSON_APPEND_UTF8(&cmd, "split", ns);
			BSON_APPEND_DOCUMENT(&cmd, "middle", &middle);
			if (!router_config_command(&cmd, &reply, &e)) {
				*did = true;
				B.splits++;
				fs_log_info(
					"balancer: split a chunk of %s on %s: %lld documents over "
					"the chunk size",
					ns, s->name, (long long)per[big]);
			}
			bson_destroy(&cmd);
			bson_destroy(&reply);
		}
		bson_destroy(&middle);
	}
	free(per);
done:
	for (int i = 0; i < nkeys; i++)
		bson_destroy(keys[i]);
	free(keys);
	dfs_buf_release(&text);
	dfs_buf_release(&proj);
	return rc;
}

/* One collection's round (note 1); *changed tells whether it split or moved a chunk. */
static int balance_coll(const char *ns, bool *changed, struct dfs_err *err)
{
	char db[256], coll[256];
	const char *dot = strchr(ns, '.');
	struct router_ns rns;
	bson_t **tags = NULL, **shards = NULL, filter;
	struct zone *z = NULL;
	struct shard_info *si = NULL;
	int ntags = 0, nshards = 0, nz = 0, rc, did = 0;

	if (!dot || (size_t)(dot - ns) >= sizeof(db))
		return 0;
	snprintf(db, sizeof(db), "%.*s", (int)(dot - ns), ns);
	snprintf(coll, sizeof(coll), "%s", dot + 1);
	if ((rc = router_ns_read(db, coll, &rns, err)))
		return rc;
	if (!rns.sharded) {
		router_ns_release(&rns);
		return 0;
	}
	bson_init(&filter);
	BSON_APPEND_UTF8(&filter, "ns", ns);
	rc = router_cfg_read_list("tags", &filter, &tags, &ntags, err);
	if (!rc)
		rc = router_cfg_read_list("shards", NULL, &shards, &nshards, err);
	bson_destroy(&filter);
	if (rc)
		goto done;
	z = calloc((size_t)ntags + 1, sizeof(*z));
	si = calloc((size_t)nshards + 1, sizeof(*si));
	if (!z || !si)
		abort();
	for (int i = 0; i < ntags; i++) {
		bson_iter_t it;

		z[nz].min = router_doc_field(tags[i], "min");
		z[nz].max = router_doc_field(tags[i], "max");
		if (z[nz].min && z[nz].max && bson_iter_init_find(&it, tags[i], "tag") &&
		    BSON_ITER_HOLDS_UTF8(&it)) {
			z[nz].tag = bson_iter_utf8(&it, NULL);
			nz++;
		} else {
			bson_destroy(z[nz].min);
			bson_destroy(z[nz].max);
		}
	}
	for (int i = 0; i < nshards; i++) {
		bson_iter_t it;

		si[i].doc = shards[i];
		si[i].name = bson_iter_init_find(&it, shards[i], "_id") && BSON_ITER_HOLDS_UTF8(&it)
				     ? bson_iter_utf8(&it, NULL)
				     : "";
		si[i].draining =
			bson_iter_init_find(&it, shards[i], "draining") && bson_iter_as_bool(&it);
		for (int c = 0; c < rns.map.n; c++)
			si[i].chunks += !strcmp(rns.map.c[c].shard, si[i].name);
	}
	/* chunks past the chunk size are split first (note 4) */
	{
		int64_t limit = chunk_bytes();

		for (int i = 0; !did && !rc && i < rns.nshards; i++) {
			bool split = false;

			if (router_shard_ok(&rns.shards[i], NULL))
				continue;
			rc = split_big(&rns, ns, db, coll, &rns.shards[i], limit, &split, err);
			did = split;
		}
	}
	/* splits at zone bounds, then chunks in the wrong place (note 1) */
	for (int c = 0; !did && !rc && c < rns.map.n; c++) {
		const bson_t *straddle;
		const struct zone *zc = zone_of(z, nz, &rns.map.c[c], &straddle);
		struct shard_info *owner = NULL, *to;

		if (straddle) {
			bson_t cmd, reply;

			bson_init(&cmd);
			bson_init(&reply);
			BSON_APPEND_UTF8(&cmd, "split", ns);
			BSON_APPEND_DOCUMENT(&cmd, "middle", straddle);
			rc = router_config_command(&cmd, &reply, err);
			bson_destroy(&cmd);
			bson_destroy(&reply);
			if (!rc) {
				did = 1;
				B.splits++;
				fs_log_info("balancer: split a chunk of %s at a zone bound", ns);
			}
			break;
		}
		for (int i = 0; i < nshards; i++)
			if (!strcmp(si[i].name, rns.map.c[c].shard))
				owner = &si[i];
		if (owner && !owner->draining && (!zc || shard_in_zone(owner, zc->tag)))
			continue;
		to = emptiest(si, nshards, zc ? zc->tag : NULL);
		if (!to || to == owner)
			continue;
		rc = move(&rns, ns, db, coll, c, to->name, err);
		did = !rc;
	}
	/* evening out the chunks outside every zone */
	if (!did && !rc) {
		struct shard_info *full = NULL, *empty = emptiest(si, nshards, NULL);

		for (int i = 0; i < nshards; i++)
			if (!si[i].draining && (!full || si[i].chunks > full->chunks))
				full = &si[i];
		if (full && empty && full->chunks - empty->chunks >= threshold(rns.map.n)) {
			for (int c = 0; c < rns.map.n; c++) {
				const bson_t *straddle;

				if (strcmp(rns.map.c[c].shard, full->name) ||
				    zone_of(z, nz, &rns.map.c[c], &straddle) || straddle)
					continue;
				rc = move(&rns, ns, db, coll, c, empty->name, err);
				did = !rc;
				break;
			}
		}
	}
done:
	for (int i = 0; i < nz; i++) {
		bson_destroy(z[i].min);
		bson_destroy(z[i].max);
	}
	free(z);
	free(si);
	router_docs_free(tags, ntags);
	router_docs_free(shards, nshards);
	router_ns_release(&rns);
	*changed = did && !rc;
	return rc;
}

/* One round over every sharded collection: at most one change. */
static void round_once(void)
{
	struct dfs_err err = {0};
	bson_t **colls = NULL;
	int n = 0, rc;

	/* with zk=, one router of the cluster balances: the one holding its lock */
	if (!router_zk_balancer_turn())
		return;
	/* the range deleter runs whether or not the balancer is on (migrate.c note 6) */
	router_migrations_recover();
	if (router_balancer_stopped())
		return;
	if (router_cfg_read_list("collections", NULL, &colls, &n, &err)) {
		snprintf(B.last_error, sizeof(B.last_error), "%s", err.msg);
		return;
	}
	for (int i = 0; i < n; i++) {
		bool changed = false;
		bson_iter_t it;

		if (bson_iter_init_find(&it, colls[i], "dropped") && bson_iter_as_bool(&it))
			continue;
		if (bson_iter_init_find(&it, colls[i], "noBalance") && bson_iter_as_bool(&it))
			continue;
		if (!bson_iter_init_find(&it, colls[i], "_id") || !BSON_ITER_HOLDS_UTF8(&it))
			continue;
		dfs_err_clear(&err);
		rc = balance_coll(bson_iter_utf8(&it, NULL), &changed, &err);
		if (rc && rc != DFS_EBUSY) {
			/* a migration running (note 2) is not an error */
			snprintf(B.last_error, sizeof(B.last_error), "%s", err.msg);
			fs_errlog_add("balancer: %s", err.msg);
		}
		if (rc || changed)
			break;
	}
	router_docs_free(colls, n);
}

static void *balancer_main(void *arg)
{
	(void)arg;
	/* a router killed during a migration left its documents on two shards: settle that
	 * first (migrate.c note 6) */
	if (router_zk_balancer_turn())
		router_migrations_recover();
	pthread_mutex_lock(&B.lock);
	while (!B.stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += B.interval_ms / 1000;
		ts.tv_nsec += (long)(B.interval_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&B.wake, &B.lock, &ts);
		if (B.stop)
			break;
		pthread_mutex_unlock(&B.lock);
		round_once();
		B.rounds++;
		pthread_mutex_lock(&B.lock);
	}
	pthread_mutex_unlock(&B.lock);
	return NULL;
}

void router_balancer_start(int interval_ms, int64_t chunk_mb)
{
	B.interval_ms = interval_ms > 0 ? interval_ms : 10000;
	B.chunk_mb = chunk_mb;
	B.stop = false;
	if (pthread_create(&B.th, NULL, balancer_main, NULL) == 0)
		B.running = true;
}

void router_balancer_stop(void)
{
	if (!B.running)
		return;
	pthread_mutex_lock(&B.lock);
	B.stop = true;
	pthread_cond_broadcast(&B.wake);
	pthread_mutex_unlock(&B.lock);
	pthread_join(B.th, NULL);
	B.running = false;
}

void router_balancer_figures(bson_t *out)
{
	bson_t d;

	BSON_APPEND_DOCUMENT_BEGIN(out, "docfs", &d);
	BSON_APPEND_BOOL(&d, "threadRunning", B.running);
	BSON_APPEND_INT32(&d, "intervalMs", B.interval_ms);
	BSON_APPEND_INT32(&d, "rounds", (int32_t)B.rounds);
	BSON_APPEND_INT32(&d, "moves", (int32_t)B.moves);
	BSON_APPEND_INT32(&d, "splits", (int32_t)B.splits);
	BSON_APPEND_UTF8(&d, "lastError", B.last_error);
	if (router_zk_on()) {
		BSON_APPEND_UTF8(&d, "router", router_zk_id());
		BSON_APPEND_BOOL(&d, "holdsLock", router_zk_balancer_held());
	}
	bson_append_document_end(out, &d);
}
