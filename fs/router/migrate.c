/*
 * migrate.c - chunk migrations of the router mount: moveChunk through /.cluster/command (and
 * the balancer, balance.c) moves the chunk's documents from the shard that owns it to
 * another, then the ownership in the config. Like mount.c and route.c it reaches the shards
 * only through their mounted directories: the source's query/ and .changes files, the
 * destination's .bulk.
 *
 * Design notes
 * 1. The steps, MongoDB's: (a) note where the source's change stream of the collection
 *    ends (the size of its plain .changes file); (b) copy: every document of the chunk is
 *    upserted on the destination by _id (replaceOne with upsert, .bulk?atomic=true in
 *    batches), so a copy that is run again changes nothing; (c) catch up: the _ids of the
 *    events recorded on the source since (a) are synced again, the document as the source
 *    has it now upserted, or deleted on the destination when the source has none, until a
 *    round finds no event; (d) the critical section: with the router's writes and reads of
 *    routed collections held off (router_routing_lock), a last catch-up, the new owner
 *    committed in the config, and the chunk's documents deleted from the source. Only
 *    then do reads and writes go on, to the new owner.
 * 2. Between (b) and (d) the chunk's documents are on both shards. Readers never see them
 *    twice: merged finds keep a document only from the shard owning its chunk (route.c),
 *    a listing is a union by name, and a document file is read from the migration's
 *    source first. After (d) nothing is left twice.
 * 3. One migration at a time in a router (MongoDB allows one per shard; a router here has
 *    one balancer and one command file, so one is enough and simpler): a second moveChunk
 *    meanwhile is refused with ConflictingOperationInProgress (117).
 * 5. Every batch is written with an fsync before the close (router_shard_write): a shard
 *    applies a .bulk at the first of the two, and sshfs passes an fsync's status on where it
 *    drops a close's (and runs the close after the router's close returned). So a refusal
 *    fails the step that made it, and the donor's copy is gone when moveChunk replies.
 *    Before the owner changes, the critical section also counts the chunk's documents on
 *    both shards: a copy that is not whole however it happened fails the migration, which
 *    changes nothing.
 * 4. Writes made to a shard's own mount, not through the router, are caught up only when
 *    they happen before (d); documents written to the source's chunk after (d) are
 *    orphans there (hidden from merged reads, as MongoDB's are).
 * 6. The migration log and the range deleter: before its first copy a migration puts an
 *    entry in config.migrations (the chunk's range, from, to) and deletes it once the
 *    donor's copy is gone, or, when it fails before the commit, once the recipient's
 *    partial copy is gone. An entry left behind is a router that died (kill -9, a lost
 *    host) or a shard that failed a delete. router_migrations_recover settles each entry
 *    by the config's chunk map alone: of the range's documents on the two shards, those
 *    whose chunk the shard does not own now are deleted (copied but not committed: the
 *    recipient's; committed but not cleaned: the donor's). It runs when a router's
 *    balancer thread starts, at every balancer round (balancer on or off), and before a
 *    `docfs cluster` moveChunk; an entry whose shard is unreachable waits for the next.
 * 7. With zk= (several routers over one cluster, zkcfg.c) the other routers' routed
 *    operations are not held off by this router's routing lock, so a migration also
 *    waits for their acknowledgements (zkcfg.c note 5) at three points: (a) after its log
 *    entry (which now names its router, and which an entry of another router for the
 *    same chunk refuses: ConflictingOperationInProgress) - every router then sees the
 *    migration in config.migrations (router_migration_of) and keeps each document only
 *    from its chunk's owner; (b) after the entry is marked `critical`, before the last
 *    catch-up - every other router then holds off db.coll (mount.c note 7) until the
 *    chunk has a new owner or the entry loses the mark, so none writes to the donor
 *    after the last catch-up; (c) after the commit, before the donor's copy is deleted -
 *    no router reads it any more. The commit itself checks that the chunk is still on
 *    the source with the same bounds (router_commit_move), in the same compare-and-set,
 *    so a router that lost a race to another's move or split commits nothing. A router
 *    that does not acknowledge within ZK_ACK_MS fails the migration (before the commit)
 *    or leaves the donor's copy to the range deleter (after it). The range deleter
 *    settles only the entries of routers that are gone (their routers/ znode), and runs
 *    in the router holding the balancer's lock.
 */
#include "router.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs_int.h"

#define COPY_BATCH 2000 /* operations per .bulk write */
#define ZK_ACK_MS 20000 /* how long a migration waits for the other routers (note 7) */

static struct {
	pthread_mutex_t lock;
	bool active;
	char ns[2 * DFS_MAX_NS_NAME + 2];
	char from[65], to[65];
} M = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool router_migration_of(const char *db, const char *coll, char *from, size_t cap)
{
	char ns[2 * DFS_MAX_NS_NAME + 2];
	bool yes;

	snprintf(ns, sizeof(ns), "%s.%s", db, coll);
	pthread_mutex_lock(&M.lock);
	yes = M.active && !strcmp(M.ns, ns);
	if (yes && from)
		snprintf(from, cap, "%s", M.from);
	pthread_mutex_unlock(&M.lock);
	if (!yes && router_zk_on()) {
		/* another router's migration: its entry in config.migrations (note 7) */
		bson_t **docs = NULL, *f = BCON_NEW("ns", BCON_UTF8(ns));
		int n = 0;
		bson_iter_t it;

		if (!router_cfg_read_list("migrations", f, &docs, &n, NULL) && n > 0) {
			yes = true;
			if (from && bson_iter_init_find(&it, docs[0], "from") &&
			    BSON_ITER_HOLDS_UTF8(&it))
				snprintf(from, cap, "%s", bson_iter_utf8(&it, NULL));
		}
		router_docs_free(docs, n);
		bson_destroy(f);
	}
	return yes;
}

/* A .bulk being filled for one shard, written every COPY_BATCH operations. */
struct bulk {
	const struct router_shard *s;
	char rel[ROUTER_PATH_MAX];
	struct dfs_buf ops;
	int n;
	int64_t done;
};

static int bulk_flush(struct bulk *b, struct dfs_err *err)
{
	int rc;

	if (!b->n)
		return 0;
	/* the fsync of router_shard_write: the batch is applied (or refused, with the
	 * shard's message) when it returns, through sshfs as well (note 5) */
	if ((rc = router_shard_write(b->s, b->rel, O_WRONLY, b->ops.data, b->ops.len, err)))
		return rc;
	b->done += b->n;
	b->n = 0;
	dfs_buf_reset(&b->ops);
	return 0;
}

/* Appends op (then destroyed) to the batch. */
static int bulk_add(struct bulk *b, bson_t *op, struct dfs_err *err)
{
	int rc = store_codec_render(op, STORE_RENDER_COMPACT, &b->ops, err);

	dfs_buf_putc(&b->ops, '\n');
	bson_destroy(op);
	if (!rc && ++b->n >= COPY_BATCH)
		rc = bulk_flush(b, err);
	return rc;
}

static int bulk_upsert(struct bulk *b, const bson_t *doc, struct dfs_err *err)
{
	bson_t op, inner, filter;
	bson_iter_t it;

	if (!bson_iter_init_find(&it, doc, "_id"))
		return dfs_err_set(err, DFS_EIO, "a document without _id on the source shard");
	bson_init(&op);
	BSON_APPEND_DOCUMENT_BEGIN(&op, "replaceOne", &inner);
	BSON_APPEND_DOCUMENT_BEGIN(&inner, "filter", &filter);
	bson_append_value(&filter, "_id", 3, bson_iter_value(&it));
	bson_append_document_end(&inner, &filter);
	BSON_APPEND_DOCUMENT(&inner, "replacement", doc);
	BSON_APPEND_BOOL(&inner, "upsert", true);
	bson_append_document_end(&op, &inner);
	return bulk_add(b, &op, err);
}

static int bulk_delete(struct bulk *b, const bson_value_t *id, struct dfs_err *err)
{
	bson_t op, inner, filter;

	bson_init(&op);
	BSON_APPEND_DOCUMENT_BEGIN(&op, "deleteOne", &inner);
	BSON_APPEND_DOCUMENT_BEGIN(&inner, "filter", &filter);
	bson_append_value(&filter, "_id", 3, id);
	bson_append_document_end(&inner, &filter);
	bson_append_document_end(&op, &inner);
	return bulk_add(b, &op, err);
}

/* The state of one migration. */
struct mig {
	const struct router_ns *ns;
	const char *db, *coll;
	int idx; /* the chunk */
	const struct router_shard *from, *to;
	int64_t changes_off; /* how far the source's events were read (note 1a) */
	int64_t copied, synced, deleted;
	const bson_t *rmin, *rmax; /* set: the range deleter's range (note 6) instead of idx */
};

/* Is doc of what m works on: chunk m->idx, or (the range deleter, note 6) a key in
 * [rmin, rmax) whose chunk shard s does not own now. */
static bool in_scope(const struct mig *m, const struct router_shard *s, const bson_t *doc)
{
	int idx = -1;
	bson_t key;
	bool in;

	if (query_chunk_map_find_doc(&m->ns->map, doc, &idx, NULL) || idx < 0)
		return false;
	if (!m->rmin)
		return idx == m->idx;
	bson_init(&key);
	in = !query_shard_key_of(&m->ns->map.key, doc, &key, NULL) &&
	     query_shard_bound_compare(&key, m->rmin) >= 0 &&
	     query_shard_bound_compare(&key, m->rmax) < 0 && strcmp(m->ns->map.c[idx].shard, s->name);
	bson_destroy(&key);
	return in;
}

/* Calls fn for every document of the chunk on shard s. */
static int chunk_docs(struct mig *m, const struct router_shard *s,
		      int (*fn)(struct mig *m, const bson_t *doc, void *ctx, struct dfs_err *err),
		      void *ctx, struct dfs_err *err)
{
	char rel[ROUTER_PATH_MAX], p[ROUTER_PATH_MAX];
	struct dfs_buf text;
	unsigned line = 1;
	size_t at = 0;
	int rc = 0;

	snprintf(rel, sizeof(rel), "%s/%s/query/{}", m->db, m->coll);
	router_shard_path(s, rel, p, sizeof(p));
	dfs_buf_init(&text);
	if (router_read_file(p, &text, NULL))
		rc = router_shard_fail(s, rel, errno, err);
	while (!rc && at < text.len) {
		size_t used;
		bson_t doc;

		bson_init(&doc);
		rc = store_codec_parse_next(text.data + at, text.len - at, line, &used, &doc, err);
		if (rc == DFS_ENOENT) {
			dfs_err_clear(err);
			rc = 0;
			bson_destroy(&doc);
			break;
		}
		at += used;
		line++;
		if (!rc && in_scope(m, s, &doc))
			rc = fn(m, &doc, ctx, err);
		bson_destroy(&doc);
	}
	dfs_buf_release(&text);
	return rc;
}

static int count_one(struct mig *m, const bson_t *doc, void *ctx, struct dfs_err *err)
{
	(void)m;
	(void)doc;
	(void)err;
	(*(int64_t *)ctx)++;
	return 0;
}

static int copy_one(struct mig *m, const bson_t *doc, void *ctx, struct dfs_err *err)
{
	m->copied++;
	return bulk_upsert(ctx, doc, err);
}

static int delete_one(struct mig *m, const bson_t *doc, void *ctx, struct dfs_err *err)
{
	bson_iter_t it;

	m->deleted++;
	if (!bson_iter_init_find(&it, doc, "_id"))
		return 0;
	return bulk_delete(ctx, bson_iter_value(&it), err);
}

/* The end of the source's change stream of the collection (note 1a). */
static int changes_end(struct mig *m, int64_t *end, struct dfs_err *err)
{
	char rel[ROUTER_PATH_MAX], p[ROUTER_PATH_MAX];
	struct stat st;

	snprintf(rel, sizeof(rel), "%s/%s/.changes", m->db, m->coll);
	router_shard_path(m->from, rel, p, sizeof(p));
	if (stat(p, &st))
		return router_shard_fail(m->from, rel, errno, err);
	*end = st.st_size;
	return 0;
}

/* One catch-up round (note 1c): syncs the _ids of the source's events since the last
 * round; *events gets how many there were. */
static int catch_up(struct mig *m, struct bulk *b, int *events, struct dfs_err *err)
{
	char rel[ROUTER_PATH_MAX], p[ROUTER_PATH_MAX];
	struct dfs_buf text;
	int64_t end = 0;
	size_t at = 0;
	int fd, rc;

	*events = 0;
	if ((rc = changes_end(m, &end, err)) || end <= m->changes_off)
		return rc;
	snprintf(rel, sizeof(rel), "%s/%s/.changes", m->db, m->coll);
	router_shard_path(m->from, rel, p, sizeof(p));
	dfs_buf_init(&text);
	if ((fd = open(p, O_RDONLY)) < 0)
		return router_shard_fail(m->from, rel, errno, err);
	dfs_buf_reserve(&text, (size_t)(end - m->changes_off) + 1);
	while (!rc && text.len < (size_t)(end - m->changes_off)) {
		ssize_t n =
			pread(fd, text.data + text.len, (size_t)(end - m->changes_off) - text.len,
			      m->changes_off + (off_t)text.len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? router_shard_fail(m->from, rel, errno, err) : 0;
			break;
		}
		text.len += (size_t)n;
	}
	close(fd);
	m->changes_off += (int64_t)text.len;
	while (!rc && at < text.len) {
		bson_iter_t it, id;
		size_t used;
		bson_t ev;

		bson_init(&ev);
		rc = store_codec_parse_next(text.data + at, text.len - at, 1, &used, &ev, err);
		if (rc == DFS_ENOENT) {
			dfs_err_clear(err);
			rc = 0;
			bson_destroy(&ev);
			break;
		}
		at += used;
		if (!rc && bson_iter_init(&it, &ev) &&
		    bson_iter_find_descendant(&it, "documentKey._id", &id)) {
			char drel[ROUTER_PATH_MAX], dp[ROUTER_PATH_MAX];
			struct dfs_buf name, doc;

			(*events)++;
			dfs_buf_init(&name);
			dfs_buf_init(&doc);
			rc = store_name_from_id(bson_iter_value(&id), &name, err);
			if (!rc) {
				snprintf(drel, sizeof(drel), "%s/%s/%s.json", m->db, m->coll,
					 name.data);
				router_shard_path(m->from, drel, dp, sizeof(dp));
				if (router_read_file(dp, &doc, NULL) == 0) {
					bson_t d;
					int idx = -1;

					bson_init(&d);
					if (!store_codec_parse_doc(doc.data, doc.len, &d, NULL) &&
					    !query_chunk_map_find_doc(&m->ns->map, &d, &idx,
								      NULL) &&
					    idx == m->idx)
						rc = bulk_upsert(b, &d, err);
					bson_destroy(&d);
				} else if (errno == ENOENT) {
					rc = bulk_delete(b, bson_iter_value(&id), err);
				} else {
					rc = router_shard_fail(m->from, drel, errno, err);
				}
				m->synced++;
			}
			dfs_buf_release(&name);
			dfs_buf_release(&doc);
		}
		bson_destroy(&ev);
	}
	dfs_buf_release(&text);
	return rc ? rc : bulk_flush(b, err);
}

static void bulk_init(struct bulk *b, const struct router_shard *s, const char *db,
		      const char *coll)
{
	memset(b, 0, sizeof(*b));
	b->s = s;
	snprintf(b->rel, sizeof(b->rel), "%s/%s/.bulk?atomic=true", db, coll);
	dfs_buf_init(&b->ops);
}

/* ---- the migration log and the range deleter (note 6) ------------------------------ */

/* The log entry of m: _id "<ns>-<min>", ns, min, max, from, to, started. */
static void log_entry(const struct mig *m, const bson_t *min, const bson_t *max, bson_t *out)
{
	struct dfs_buf id;

	dfs_buf_init(&id);
	dfs_buf_printf(&id, "%s.%s-", m->db, m->coll);
	store_codec_render(min, STORE_RENDER_COMPACT, &id, NULL);
	BSON_APPEND_UTF8(out, "_id", id.data);
	dfs_buf_release(&id);
	dfs_buf_printf(&id, "%s.%s", m->db, m->coll);
	BSON_APPEND_UTF8(out, "ns", id.data);
	dfs_buf_release(&id);
	BSON_APPEND_DOCUMENT(out, "min", min);
	BSON_APPEND_DOCUMENT(out, "max", max);
	BSON_APPEND_UTF8(out, "from", m->from->name);
	BSON_APPEND_UTF8(out, "to", m->to->name);
	BSON_APPEND_DATE_TIME(out, "started", (int64_t)time(NULL) * 1000);
	if (router_zk_on())
		BSON_APPEND_UTF8(out, "router", router_zk_id());
}

/* Deletes the entry with the _id of entry. */
static int log_done(const bson_t *entry, struct dfs_err *err)
{
	bson_iter_t it;
	bson_t f;
	int rc;

	if (!bson_iter_init_find(&it, entry, "_id"))
		return 0;
	bson_init(&f);
	bson_append_value(&f, "_id", 3, bson_iter_value(&it));
	rc = router_cfg_write("migrations", NULL, &f, err);
	bson_destroy(&f);
	return rc;
}

/* Deletes from shard s the documents of [min, max) it does not own now; *n gets how many. */
static int range_delete(const struct router_ns *ns, const char *db, const char *coll,
			const struct router_shard *s, const bson_t *min, const bson_t *max,
			int64_t *n, struct dfs_err *err)
{
	struct mig m = {.ns = ns, .db = db, .coll = coll, .rmin = min, .rmax = max};
	struct bulk b;
	int rc;

	bulk_init(&b, s, db, coll);
	rc = chunk_docs(&m, s, delete_one, &b, err);
	if (!rc)
		rc = bulk_flush(&b, err);
	dfs_buf_release(&b.ops);
	*n = m.deleted;
	return rc;
}

/* Settles one log entry: the range's documents go from whichever of its two shards does
 * not own them now. */
static int settle(const bson_t *entry, struct dfs_err *err)
{
	char db[256], coll[256];
	const char *ns = NULL, *who[2] = {NULL, NULL}, *dot;
	bson_t *min = router_doc_field(entry, "min"), *max = router_doc_field(entry, "max");
	struct router_ns rns;
	bson_iter_t it;
	int rc = 0;

	if (bson_iter_init_find(&it, entry, "ns") && BSON_ITER_HOLDS_UTF8(&it))
		ns = bson_iter_utf8(&it, NULL);
	if (bson_iter_init_find(&it, entry, "from") && BSON_ITER_HOLDS_UTF8(&it))
		who[0] = bson_iter_utf8(&it, NULL);
	if (bson_iter_init_find(&it, entry, "to") && BSON_ITER_HOLDS_UTF8(&it))
		who[1] = bson_iter_utf8(&it, NULL);
	if (!ns || !min || !max || !(dot = strchr(ns, '.')) || (size_t)(dot - ns) >= sizeof(db)) {
		rc = log_done(entry, err); /* not an entry this code wrote: nothing to settle */
		goto out;
	}
	snprintf(db, sizeof(db), "%.*s", (int)(dot - ns), ns);
	snprintf(coll, sizeof(coll), "%s", dot + 1);
	if ((rc = router_ns_read(db, coll, &rns, err)))
		goto out;
	for (int i = 0; !rc && rns.sharded && i < 2; i++) {
		const struct router_shard *s = who[i] ? router_ns_shard(&rns, who[i]) : NULL;
		int64_t n = 0;

		if (!s)
			continue;
		if (!(rc = router_shard_ok(s, err)))
			rc = range_delete(&rns, db, coll, s, min, max, &n, err);
		if (!rc && n)
			fs_log_info("migration of %s from %s to %s was interrupted: %lld orphan "
				    "documents of its range deleted from %s",
				    ns, who[0], who[1], (long long)n, s->name);
	}
	router_ns_release(&rns);
	if (!rc)
		rc = log_done(entry, err);
out:
	if (min)
		bson_destroy(min);
	if (max)
		bson_destroy(max);
	return rc;
}

int router_migrations_recover(void)
{
	struct dfs_err err = {0};
	bson_t **docs = NULL;
	int n = 0, settled = 0;

	if (router_cfg_read_list("migrations", NULL, &docs, &n, &err) || !n) {
		router_docs_free(docs, n);
		return 0;
	}
	pthread_mutex_lock(&M.lock);
	if (M.active) { /* a migration of this router runs: it keeps its own entry */
		pthread_mutex_unlock(&M.lock);
		router_docs_free(docs, n);
		return 0;
	}
	M.active = true;
	snprintf(M.ns, sizeof(M.ns), "(the range deleter)");
	M.from[0] = M.to[0] = 0;
	pthread_mutex_unlock(&M.lock);
	for (int i = 0; i < n; i++) {
		bson_iter_t it;

		/* a live router's entry is its running migration (note 7) */
		if (router_zk_on() && bson_iter_init_find(&it, docs[i], "router") &&
		    BSON_ITER_HOLDS_UTF8(&it) &&
		    strcmp(bson_iter_utf8(&it, NULL), router_zk_id()) &&
		    router_zk_alive(bson_iter_utf8(&it, NULL)))
			continue;
		dfs_err_clear(&err);
		if (settle(docs[i], &err))
			fs_errlog_add("migration recovery: %s", err.msg);
		else
			settled++;
	}
	pthread_mutex_lock(&M.lock);
	M.active = false;
	pthread_mutex_unlock(&M.lock);
	router_docs_free(docs, n);
	return settled;
}

int router_migrate(const struct router_ns *ns, const char *db, const char *coll, int idx,
		   const char *to, int (*commit)(void *ctx, struct dfs_err *err), void *ctx,
		   bson_t *stats, struct dfs_err *err)
{
	struct mig m = {.ns = ns, .db = db, .coll = coll, .idx = idx};
	bool committed = false;
	struct bulk b;
	int rc, events = 0;

	m.from = router_ns_shard(ns, ns->map.c[idx].shard);
	m.to = router_ns_shard(ns, to);
	if (!m.from || !m.to)
		return dfs_err_set(err, DFS_EINVAL, "no such shard");
	if ((rc = router_shard_ok(m.from, err)) || (rc = router_shard_ok(m.to, err)))
		return rc;
	pthread_mutex_lock(&M.lock);
	if (M.active) {
		pthread_mutex_unlock(&M.lock);
		return dfs_err_set(
			err, DFS_EBUSY,
			"ConflictingOperationInProgress (117): a migration of %s from %s "
			"to %s is running",
			M.ns, M.from, M.to);
	}
	M.active = true;
	snprintf(M.ns, sizeof(M.ns), "%s.%s", db, coll);
	snprintf(M.from, sizeof(M.from), "%s", m.from->name);
	snprintf(M.to, sizeof(M.to), "%s", m.to->name);
	pthread_mutex_unlock(&M.lock);

	bson_t entry;
	bool zk = router_zk_on(), critical = false;

	/* logged before the first document moves, settled after the last (note 6); with
	 * zk=, an entry of another router for the same chunk refuses this one, and every
	 * router must know of it before documents are on two shards (note 7) */
	bson_init(&entry);
	log_entry(&m, ns->map.c[idx].min, ns->map.c[idx].max, &entry);
	bulk_init(&b, m.to, db, coll);
	if (!zk) {
		rc = router_cfg_write("migrations", &entry, NULL, err);
	} else if ((rc = router_cfg_insert_new("migrations", &entry, err)) == DFS_EBUSY) {
		dfs_err_clear(err);
		rc = dfs_err_set(
			err, DFS_EBUSY,
			"ConflictingOperationInProgress (117): another router is migrating "
			"that chunk of %s.%s",
			db, coll);
		bson_reinit(&entry); /* not ours: left alone below */
	} else if (!rc && (rc = router_zk_wait_acks(router_zk_version(), ZK_ACK_MS, err))) {
		log_done(&entry, NULL);
		bson_reinit(&entry);
	}
	if (!rc)
		rc = changes_end(&m, &m.changes_off, err);
	if (!rc)
		rc = chunk_docs(&m, m.from, copy_one, &b, err);
	if (!rc)
		rc = bulk_flush(&b, err);
	for (int round = 0; !rc && round < 8; round++) {
		if ((rc = catch_up(&m, &b, &events, err)) || !events)
			break;
	}
	if (!rc && zk) {
		/* the other routers hold off db.coll before the last catch-up (note 7) */
		bson_t crit = BSON_INITIALIZER;

		bson_copy_to_excluding_noinit(&entry, &crit, "critical", NULL);
		BSON_APPEND_BOOL(&crit, "critical", true);
		rc = router_cfg_write("migrations", &crit, NULL, err);
		bson_destroy(&crit);
		critical = !rc;
		if (!rc)
			rc = router_zk_wait_acks(router_zk_version(), ZK_ACK_MS, err);
	}
	if (!rc) {
		/* the critical section (note 1d) */
		router_routing_lock(true);
		rc = catch_up(&m, &b, &events, err);
		if (!rc) {
			/* the copy must be whole before the owner changes: a refusal the
			 * destination could not report (sshfs drops the status of a close, where
			 * a .bulk runs) shows here (note 5) */
			int64_t have = 0, want = 0;

			rc = chunk_docs(&m, m.from, count_one, &want, err);
			if (!rc)
				rc = chunk_docs(&m, m.to, count_one, &have, err);
			if (!rc && have != want) {
				char last[600];

				router_shard_last_error(m.to, last, sizeof(last));
				rc = dfs_err_set(
					err, DFS_EIO,
					"the copy of the chunk on shard '%s' holds %lld of its "
					"%lld documents: the chunk stays on '%s'; shard '%s' "
					"said: %s",
					m.to->name, (long long)have, (long long)want, m.from->name,
					m.to->name, last[0] ? last : "nothing");
			}
		}
		if (!rc)
			committed = !(rc = commit(ctx, err));
		/* no router reads or writes the donor's copy when it goes (note 7) */
		if (!rc && zk && (rc = router_zk_wait_acks(router_zk_version(), ZK_ACK_MS, err)))
			dfs_err_prefix(err,
				       "the chunk moved, but its documents stay on %s as orphans "
				       "(the range deleter removes them): ",
				       m.from->name);
		if (!rc) {
			struct bulk del;

			bulk_init(&del, m.from, db, coll);
			rc = chunk_docs(&m, m.from, delete_one, &del, err);
			if (!rc)
				rc = bulk_flush(&del, err);
			dfs_buf_release(&del.ops);
			if (rc)
				dfs_err_prefix(err,
					       "the chunk moved, but deleting its documents from "
					       "%s failed (they stay there as orphans): ",
					       m.from->name);
		}
		router_routing_unlock();
	}
	dfs_buf_release(&b.ops);
	if (!rc) {
		dfs_err_clear(err);
		log_done(&entry, NULL);
	} else if (!committed && !bson_empty(&entry)) {
		/* what was copied to the destination goes now, not at the next recovery; by
		 * the config as it is now (another router may have moved the chunk there) */
		struct dfs_err e = {0};
		struct router_ns now;
		int64_t n = 0;

		if (critical)
			router_cfg_write("migrations", &entry, NULL, &e); /* others go on */
		if (!router_ns_read(db, coll, &now, &e)) {
			if (now.sharded && !range_delete(&now, db, coll, m.to, ns->map.c[idx].min,
							 ns->map.c[idx].max, &n, &e))
				log_done(&entry, NULL);
			router_ns_release(&now);
		}
	}
	bson_destroy(&entry);
	if (stats) {
		/* counts as MongoDB's replies carry them: int32 */
		BSON_APPEND_INT32(stats, "cloned", (int32_t)m.copied);
		BSON_APPEND_INT32(stats, "caughtUp", (int32_t)m.synced);
		BSON_APPEND_INT32(stats, "deletedFromDonor", (int32_t)m.deleted);
	}
	pthread_mutex_lock(&M.lock);
	M.active = false;
	pthread_mutex_unlock(&M.lock);
	return rc;
}
