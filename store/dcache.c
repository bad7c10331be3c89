/*
 * dcache.c - the document cache of a database: the BSON of documents an index plan fetched,
 * by entry id, so that the FETCH of a repeated indexed query is a hash look-up, not a
 * B-tree descent per document (about 1 us each, most of an indexed query's time). It does
 * not serve collection scans (they read the table in order, which is cheaper) nor writes.
 *
 * Design notes
 * 1. Coherence rests on the change feed (db.c note 5). Every change to a document's row
 *    (update, delete, rename, a collection dropped) records PUT, DEL or COLL in the same
 *    transaction; ids of new documents are new or were DELeted first. The cache is valid
 *    at one feed seq (seq): it holds each document as of that seq.
 * 2. A read transaction learns its snapshot's last seq S once. S == seq: it may look up
 *    and insert (what it reads from SQLite is the document as of S). S > seq: it first
 *    brings the cache to S, evicting every id the feed names in (seq, S] (everything on a
 *    COLL record, a gap, or an error reading the feed), under the lock. S < seq: an older
 *    snapshot; it neither looks up nor inserts. An insert checks seq again under the lock,
 *    so a reader overtaken by a newer one between its read and its insert inserts nothing.
 * 3. Write transactions never use it: their snapshot includes their own uncommitted
 *    changes, whose seqs a rollback would give to other changes.
 * 4. Bounded: budget bytes (entries, their headers and texts). Eviction takes the oldest entry,
 *    sparing (moving to the front) one used since it was put or spared: about least
 *    recently used, without touching the list on a hit, which would cost a look-up three
 *    more cache misses. A document over a sixty-fourth of the budget is not kept.
 * 5. An entry may also hold the document's compact rendering, which a query result of
 *    the entry's document copies instead of rendering it again (store_doc_text): rendering
 *    costs as much as the rest of an indexed query. The text is a function of the entry's
 *    BSON alone, so it lives and dies with the entry and needs no coherence of its own; it
 *    is added only while the cache is at the seq of the transaction that rendered it, the
 *    seq whose document the entry holds.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

struct store__dcent {
	int64_t id;			  /* the document's entry id */
	size_t len;			  /* BSON bytes in data */
	struct store__dcent *hnext;	  /* the next in its hash chain */
	struct store__dcent *prev, *next; /* the list, newest (or spared) first */
	bool used;			  /* looked up since it was put or last spared */
	char *text;			  /* Owned: its compact rendering, or NULL (note 5) */
	size_t tlen;			  /* bytes in text */
	uint8_t data[];			  /* the BSON */
};

static size_t ent_cost(const struct store__dcent *e)
{
	return sizeof(*e) + e->len + e->tlen;
}

static void ent_free(struct store__dcent *e)
{
	free(e->text);
	free(e);
}

static size_t slot_of(const struct store__dcache *dc, int64_t id)
{
	uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull;

	return (size_t)(h >> 32) & (dc->ntab - 1);
}

void store__dcache_init(struct store__dcache *dc, size_t budget)
{
	memset(dc, 0, sizeof(*dc));
	pthread_mutex_init(&dc->lock, NULL);
	dc->seq = -1;
	atomic_init(&dc->budget, budget);
}

static void list_unlink(struct store__dcache *dc, struct store__dcent *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		dc->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		dc->tail = e->prev;
	e->prev = e->next = NULL;
}

static void list_front(struct store__dcache *dc, struct store__dcent *e)
{
	e->prev = NULL;
	e->next = dc->head;
	if (dc->head)
		dc->head->prev = e;
	dc->head = e;
	if (!dc->tail)
		dc->tail = e;
}

static struct store__dcent **find_slot(struct store__dcache *dc, int64_t id)
{
	struct store__dcent **p;

	if (!dc->ntab)
		return NULL;
	for (p = &dc->tab[slot_of(dc, id)]; *p; p = &(*p)->hnext)
		if ((*p)->id == id)
			return p;
	return NULL;
}

static void evict(struct store__dcache *dc, int64_t id)
{
	struct store__dcent **p = find_slot(dc, id), *e;

	if (!p)
		return;
	e = *p;
	*p = e->hnext;
	list_unlink(dc, e);
	dc->bytes -= ent_cost(e);
	dc->n--;
	ent_free(e);
}

static void clear_all(struct store__dcache *dc)
{
	struct store__dcent *e, *next;

	for (e = dc->head; e; e = next) {
		next = e->next;
		ent_free(e);
	}
	dc->head = dc->tail = NULL;
	if (dc->ntab)
		memset(dc->tab, 0, dc->ntab * sizeof(*dc->tab));
	dc->bytes = 0;
	dc->n = 0;
}

void store__dcache_release(struct store__dcache *dc)
{
	clear_all(dc);
	free(dc->tab);
	dc->tab = NULL;
	dc->ntab = 0;
	pthread_mutex_destroy(&dc->lock);
}

/* Evicts down to the budget (note 4), never keep. */
static void shrink(struct store__dcache *dc, struct store__dcent *keep)
{
	struct store__dcent *e;

	while (dc->bytes > dc->budget && (e = dc->tail) && e != keep) {
		if (e->used && dc->budget) {
			e->used = false;
			list_unlink(dc, e);
			list_front(dc, e);
			continue;
		}
		evict(dc, e->id);
	}
}

void store__dcache_set_budget(struct store__dcache *dc, size_t budget)
{
	pthread_mutex_lock(&dc->lock);
	atomic_store_explicit(&dc->budget, budget, memory_order_relaxed);
	shrink(dc, NULL);
	pthread_mutex_unlock(&dc->lock);
}

/* Brings the cache from dc->seq to t's snapshot (note 2), holding dc->lock. Whatever goes
 * wrong reading the feed empties the cache, which is valid at any seq. */
static void advance(struct store_txn *t, struct store__dcache *dc)
{
	sqlite3_stmt *st = NULL;
	int64_t expect = dc->seq + 1;
	int rc;

	if (dc->n == 0)
		goto done;
	if (sqlite3_prepare_v2(t->c->h,
			       "SELECT seq, op, id FROM changes WHERE seq > ?1 AND seq <= ?2"
			       " ORDER BY seq",
			       -1, &st, NULL) != SQLITE_OK) {
		clear_all(dc);
		goto done;
	}
	sqlite3_bind_int64(st, 1, dc->seq);
	sqlite3_bind_int64(st, 2, t->dc_seq);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int op = sqlite3_column_int(st, 1);

		/* The feed is pruned from its oldest record and has no gaps: a record
		 * missing means changes this cache can no longer know. */
		if (sqlite3_column_int64(st, 0) != expect++ || op == STORE_CH_COLL) {
			clear_all(dc);
			goto done;
		}
		if (op == STORE_CH_PUT || op == STORE_CH_DEL)
			evict(dc, sqlite3_column_int64(st, 2));
	}
	if (rc != SQLITE_DONE || expect != t->dc_seq + 1)
		clear_all(dc);
done:
	sqlite3_finalize(st);
	dc->seq = t->dc_seq;
}

/* May t use the cache: true and dc locked when its snapshot is the cache's (brought to it
 * if older), false and unlocked when not. A failure to read the feed's last seq only means
 * t does without the cache. */
static bool lock_for(struct store_txn *t, struct store__dcache *dc)
{
	if (t->write || !atomic_load_explicit(&dc->budget, memory_order_relaxed))
		return false;
	if (!t->dc_known) {
		if (store__change_last(t, &t->dc_seq, NULL))
			return false;
		t->dc_known = true;
	}
	pthread_mutex_lock(&dc->lock);
	if (dc->seq < t->dc_seq)
		advance(t, dc);
	if (dc->seq != t->dc_seq || !dc->budget) {
		pthread_mutex_unlock(&dc->lock);
		return false;
	}
	return true;
}

bool store__dcache_get(struct store_txn *t, int64_t id, struct dfs_buf *out, struct dfs_buf *text)
{
	struct store__dcache *dc = &t->db->dc;
	struct store__dcent **p, *e;

	if (!lock_for(t, dc))
		return false;
	p = find_slot(dc, id);
	if (!p) {
		dc->misses++;
		pthread_mutex_unlock(&dc->lock);
		return false;
	}
	e = *p;
	dfs_buf_reset(out);
	dfs_buf_reserve(out, e->len);
	memcpy(out->data, e->data, e->len);
	out->len = e->len;
	dfs_buf_reset(text);
	if (e->text)
		dfs_buf_append(text, e->text, e->tlen);
	e->used = true;
	dc->hits++;
	pthread_mutex_unlock(&dc->lock);
	return true;
}

static void grow(struct store__dcache *dc)
{
	size_t n = dc->ntab ? dc->ntab * 2 : 1024, i;
	struct store__dcent **tab = calloc(n, sizeof(*tab)), *e, *next;
	size_t old = dc->ntab;
	struct store__dcent **otab = dc->tab;

	if (!tab)
		return; /* the chains get longer, nothing worse */
	dc->tab = tab;
	dc->ntab = n;
	for (i = 0; i < old; i++)
		for (e = otab[i]; e; e = next) {
			next = e->hnext;
			e->hnext = tab[slot_of(dc, e->id)];
			tab[slot_of(dc, e->id)] = e;
		}
	free(otab);
}

bool store__dcache_put(struct store_txn *t, int64_t id, const void *data, size_t len)
{
	struct store__dcache *dc = &t->db->dc;
	struct store__dcent *e;
	size_t slot;
	bool kept = false;

	/* t->dc_known: t looked the id up (and missed) at the cache's seq. */
	if (t->write || !t->dc_known)
		return false;
	pthread_mutex_lock(&dc->lock);
	if (dc->seq != t->dc_seq || sizeof(*e) + len > dc->budget / 64 || find_slot(dc, id))
		goto done;
	e = malloc(sizeof(*e) + len);
	if (!e)
		goto done;
	e->id = id;
	e->len = len;
	e->used = false;
	e->text = NULL;
	e->tlen = 0;
	memcpy(e->data, data, len);
	if (dc->n >= dc->ntab)
		grow(dc);
	if (!dc->ntab) {
		ent_free(e);
		goto done;
	}
	slot = slot_of(dc, id);
	e->hnext = dc->tab[slot];
	dc->tab[slot] = e;
	list_front(dc, e);
	dc->bytes += ent_cost(e);
	dc->n++;
	shrink(dc, e);
	kept = true;
done:
	pthread_mutex_unlock(&dc->lock);
	return kept;
}

void store__dcache_put_text(struct store_txn *t, int64_t id, const char *text, size_t len)
{
	struct store__dcache *dc = &t->db->dc;
	struct store__dcent **p, *e;
	char *copy;

	if (t->write || !t->dc_known || !len)
		return;
	pthread_mutex_lock(&dc->lock);
	/* At the cache's seq, the entry holds the document t rendered (note 5). */
	if (dc->seq != t->dc_seq || !(p = find_slot(dc, id)) || (e = *p)->text ||
	    ent_cost(e) + len > dc->budget / 64 || !(copy = malloc(len)))
		goto done;
	memcpy(copy, text, len);
	e->text = copy;
	e->tlen = len;
	dc->bytes += len;
	shrink(dc, NULL); /* e may go too: it is not at the front */
done:
	pthread_mutex_unlock(&dc->lock);
}

void store__dcache_stats(struct store__dcache *dc, struct store_dcache_stats *out)
{
	pthread_mutex_lock(&dc->lock);
	out->hits = dc->hits;
	out->misses = dc->misses;
	out->entries = dc->n;
	out->bytes = dc->bytes;
	out->budget = dc->budget;
	pthread_mutex_unlock(&dc->lock);
}
