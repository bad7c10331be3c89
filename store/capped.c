/*
 * capped.c - capped collections: the limits and running totals kept in colls.options, the
 * conversion of a collection (MongoDB's create {capped: true} and convertToCapped), and the
 * removal of the oldest documents when an insert takes a collection past its limits. The
 * hooks that keep the totals are in doc.c (every insert, update, delete and rename of a
 * document calls store__capped_note when its collection is capped). It does not decide
 * what the mount shows (fs/); tailable reads are fs/paths/tail.c's.
 *
 * Design notes
 * 1. colls.options is a BSON document {capped: true, size, max, bytes, count}: the limits
 *    and the totals of the documents' BSON lengths and of the documents, changed in the
 *    same transaction as the documents, so they are exact after any crash. A collection
 *    that is not capped has NULL options (or a document without capped: true).
 * 2. The oldest document is the first of the collection in entry id order (the runs of
 *    doc.c note 5), which is insertion order: an editor's rewrite keeps a document's id
 *    (doc.c note 2), so it keeps its place, as an update does in MongoDB.
 * 3. The document just inserted is never removed to make room: when it alone is over the
 *    size, the insert fails and its transaction changes nothing.
 */
#include "store_int.h"

#include <string.h>

int64_t store_capped_round(int64_t size)
{
	if (size < STORE_CAPPED_MIN)
		return STORE_CAPPED_MIN;
	if (size > INT64_MAX - 255)
		return INT64_MAX - INT64_MAX % 256;
	return (size + 255) / 256 * 256;
}

void store__capped_decode(const void *blob, int len, struct store_coll *c)
{
	bson_t b;
	bson_iter_t it;

	c->capped = false;
	c->cap_size = c->cap_max = c->cap_bytes = c->cap_count = 0;
	if (!blob || len < 5 || !bson_init_static(&b, blob, (size_t)len))
		return;
	if (!bson_iter_init_find(&it, &b, "capped") || !bson_iter_as_bool(&it))
		return;
	c->capped = true;
	if (bson_iter_init_find(&it, &b, "size"))
		c->cap_size = bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, &b, "max"))
		c->cap_max = bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, &b, "bytes"))
		c->cap_bytes = bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, &b, "count"))
		c->cap_count = bson_iter_as_int64(&it);
}

static int options_put(struct store_txn *t, const struct store_coll *c, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_COLL_OPTIONS, err);
	bson_t b = BSON_INITIALIZER;
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	BSON_APPEND_BOOL(&b, "capped", true);
	BSON_APPEND_INT64(&b, "size", c->cap_size);
	BSON_APPEND_INT64(&b, "max", c->cap_max);
	BSON_APPEND_INT64(&b, "bytes", c->cap_bytes);
	BSON_APPEND_INT64(&b, "count", c->cap_count);
	sqlite3_bind_int64(st, 1, c->id);
	sqlite3_bind_blob(st, 2, bson_get_data(&b), (int)b.len, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	bson_destroy(&b);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "capped collection totals", err);
	sqlite3_reset(st);
	return 0;
}

int store__capped_is(struct store_txn *t, int64_t coll, bool *on, struct dfs_err *err)
{
	struct store_coll c;
	int rc;

	if (t->cap_coll == coll) {
		*on = t->cap_on;
		return 0;
	}
	if ((rc = store_coll_by_id(t, coll, &c, err)))
		return rc;
	t->cap_coll = coll;
	t->cap_on = *on = c.capped;
	return 0;
}

int store__doc_bson_len(struct store_txn *t, int64_t id, int64_t *len, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_DOC_BSON_LEN, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		sqlite3_reset(st);
		return rc == SQLITE_DONE ? dfs_err_set(err, DFS_ENOENT, "document %lld not found",
						       (long long)id)
					 : store__sqlerr(t, rc, "document length", err);
	}
	*len = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return 0;
}

/* The oldest document of coll other than keep (note 2): *id 0 when there is none. */
static int oldest(struct store_txn *t, int64_t coll, int64_t keep, int64_t *id,
		  struct dfs_err *err)
{
	struct store_cursor *cur;
	bson_t doc;
	int rc;

	*id = 0;
	if ((rc = store_cursor_open(t, coll, &cur, err)))
		return rc;
	while ((rc = store_cursor_next(cur, &doc, id, err)) == 0 && *id == keep)
		;
	store_cursor_free(cur);
	if (rc == DFS_ENOENT) {
		*id = 0;
		if (err)
			dfs_err_clear(err);
		return 0;
	}
	return rc;
}

static bool over(const struct store_coll *c)
{
	return c->cap_bytes > c->cap_size || (c->cap_max > 0 && c->cap_count > c->cap_max);
}

/* Removes the oldest documents of c (but keep) until it is within its limits. */
static int evict(struct store_txn *t, struct store_coll *c, int64_t keep, struct dfs_err *err)
{
	int rc;

	while (over(c)) {
		int64_t id;

		if ((rc = oldest(t, c->id, keep, &id, err)))
			return rc;
		if (!id)
			return dfs_err_set(err, DFS_EINVAL,
					   "a document of %lld bytes does not fit in capped "
					   "collection '%s' of %lld bytes",
					   (long long)c->cap_bytes, c->name, (long long)c->cap_size);
		/* the delete's hook (doc.c) takes its length and count off the totals */
		if ((rc = store_entry_delete(t, id, err)))
			return rc;
		if ((rc = store_coll_by_id(t, c->id, c, err)))
			return rc;
	}
	return 0;
}

int store__capped_note(struct store_txn *t, int64_t coll, int64_t dcount, int64_t dbytes,
		       int64_t keep, struct dfs_err *err)
{
	struct store_coll c;
	int rc;

	if ((rc = store_coll_by_id(t, coll, &c, err)))
		return rc;
	if (!c.capped)
		return 0;
	c.cap_count += dcount;
	c.cap_bytes += dbytes;
	if ((rc = options_put(t, &c, err)))
		return rc;
	if (dcount > 0 || dbytes > 0)
		return evict(t, &c, keep, err);
	return 0;
}

int store_coll_set_capped(struct store_txn *t, int64_t coll, int64_t size, int64_t max,
			  struct dfs_err *err)
{
	struct store_index *ixs = NULL;
	struct store_cursor *cur;
	struct store_coll c;
	int nixs = 0, rc;
	int64_t id;
	bson_t doc;

	if (size <= 0)
		return dfs_err_set(err, DFS_EINVAL, "the size of a capped collection must be a "
						    "positive number of bytes");
	if (max < 0)
		return dfs_err_set(err, DFS_EINVAL, "max of a capped collection must not be "
						    "negative");
	if ((rc = store_coll_by_id(t, coll, &c, err)))
		return rc;
	if ((rc = store_index_list(t, coll, &ixs, &nixs, err)))
		return rc;
	for (int i = 0; i < nixs; i++)
		if (ixs[i].expire_after >= 0) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "collection '%s' has the TTL index '%s': a capped "
					 "collection cannot have one",
					 c.name, ixs[i].name);
			store_index_list_free(ixs, nixs);
			return rc;
		}
	store_index_list_free(ixs, nixs);
	/* The totals of what the collection holds now. */
	c.cap_bytes = c.cap_count = 0;
	if ((rc = store_cursor_open(t, coll, &cur, err)))
		return rc;
	while ((rc = store_cursor_next(cur, &doc, &id, err)) == 0) {
		c.cap_bytes += doc.len;
		c.cap_count++;
	}
	store_cursor_free(cur);
	if (rc != DFS_ENOENT)
		return rc;
	if (err)
		dfs_err_clear(err);
	c.capped = true;
	c.cap_size = store_capped_round(size);
	c.cap_max = max;
	if ((rc = options_put(t, &c, err)))
		return rc;
	t->cap_coll = coll;
	t->cap_on = true;
	return evict(t, &c, 0, err);
}
