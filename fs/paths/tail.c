/*
 * tail.c - tailable reads: `query/<filter>?tailable=1` on a capped collection, MongoDB's
 * find with tailable and awaitData. The read prints the matching documents in $natural
 * order and then waits for new ones, as `tail -f` does for a log file. fsops.c does the FUSE
 * plumbing (the handle is read as a stream, like a .changes?follow=1 one); this file knows
 * nothing of FUSE.
 *
 * Design notes
 * 1. The position is the entry id of the last document examined (matching or not): each
 *    look opens a read transaction, resumes the collection's cursor after that id, and
 *    ends its transaction before waiting, so a waiting reader holds no snapshot and no
 *    lock. Ids are handed out in insertion order under the write lock, so a document
 *    committed later always sorts after the position.
 * 2. A capped collection removes its oldest documents; when the one at the position has
 *    been removed before the reader came back, documents between it and the oldest kept
 *    one may have gone unseen. MongoDB then kills the cursor with CappedPositionLost (136):
 *    so does the read here (ESTALE), rather than skip them silently. A dropped collection
 *    ends the read with QueryPlanKilled (175) (ENOENT).
 * 3. An empty collection does not end the read (MongoDB's cursor would be dead at once
 *    and the shell would retry: here the read just waits). A limit ends it once that many
 *    documents were printed; skip skips the first matches.
 * 4. What a tailable find refuses in MongoDB is refused at open: a collection that is not
 *    capped, a sort other than {$natural: 1}, a hint of an index. count, distinct, a
 *    $text filter and the output formats that are not a stream (json: an array never
 *    closed; ids; tree) are refused too, as is maxTimeMS (the read waits until the reader
 *    stops it: `timeout 10 cat ...`).
 */
#include "fs_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "query.h"

#define TAIL_BATCH 256		/* documents examined per look at most */
#define TAIL_POLL_NS 100000000L /* how often a waiting read looks again */

struct fs_tail {
	struct store_db *db;	  /* Borrowed */
	int64_t coll;		  /* the capped collection's id */
	int64_t after;		  /* the position (note 1), 0: before the first */
	struct query_expr *match; /* Owned: the filter */
	struct query_proj *proj;  /* Owned: the projection, or NULL */
	int64_t skip, limit;	  /* left to skip; left to print (0: any) */
	bool limited;		  /* a limit was given */
	int format;		  /* FSQ_JSONL, FSQ_PRETTY or FSQ_BSON */
};

/* Whether spec is {$natural: 1} (the only order of a tailable read). */
static bool natural_forward(const bson_t *spec)
{
	bson_iter_t it;

	if (!bson_iter_init(&it, spec) || !bson_iter_next(&it) ||
	    strcmp(bson_iter_key(&it), "$natural") || !BSON_ITER_HOLDS_NUMBER(&it) ||
	    bson_iter_as_double(&it) != 1.0)
		return false;
	return !bson_iter_next(&it);
}

int fs_tail_open(struct store_db *db, int64_t coll, const struct fs_query *q, struct fs_tail **out,
		 struct dfs_err *err)
{
	struct store_txn *t;
	struct store_coll c;
	struct fs_tail *tl;
	int rc;

	*out = NULL;
	if (q->count || q->distinct)
		return dfs_err_set(err, DFS_EINVAL, "tailable=1 cannot be used with %s",
				   q->count ? "count" : "distinct");
	if (q->format == FSQ_JSON || q->format == FSQ_IDS || q->format == FSQ_TREE)
		return dfs_err_set(err, DFS_EINVAL,
				   "a tailable read is a stream of documents: format must be jsonl "
				   "or pretty, not %s",
				   q->format == FSQ_JSON  ? "json"
				   : q->format == FSQ_IDS ? "ids"
							  : "tree");
	if (q->verbosity >= 0)
		return dfs_err_set(err, DFS_EINVAL, "verbosity is an option of explain/ paths");
	if (q->max_time_ms)
		return dfs_err_set(err, DFS_EINVAL,
				   "maxTimeMS cannot be used with tailable=1: the read waits until "
				   "it is stopped (for example by timeout(1))");
	if (q->has_sort && !natural_forward(&q->sort))
		return dfs_err_set(
			err, DFS_EINVAL,
			"cannot use tailable option with a sort other than {$natural: 1}");
	if (q->hint_name || (q->has_hint && !natural_forward(&q->hint)))
		return dfs_err_set(
			err, DFS_EINVAL,
			"a tailable read scans the collection in $natural order: the only "
			"hint it takes is {$natural: 1}");
	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	rc = store_coll_by_id(t, coll, &c, err);
	store_txn_abort(t);
	if (rc)
		return rc;
	if (!c.capped)
		return dfs_err_set(err, DFS_EINVAL,
				   "tailable cursor requested on non capped collection '%s'",
				   c.name);
	if (!(tl = calloc(1, sizeof(*tl))))
		abort();
	tl->db = db;
	tl->coll = coll;
	tl->skip = q->skip;
	tl->limit = q->limit;
	tl->limited = q->limit > 0;
	tl->format = q->format == FSQ_PRETTY || q->format == FSQ_BSON ? q->format : FSQ_JSONL;
	rc = query_filter_parse(&q->filter, &tl->match, err);
	if (!rc && query_filter_has_text(tl->match))
		rc = dfs_err_set(
			err, DFS_EINVAL,
			"$text needs a text index scan: it cannot be used with tailable=1");
	if (!rc && q->has_projection)
		rc = query_proj_parse(&q->projection, &tl->proj, err);
	if (rc) {
		fs_tail_free(tl);
		return rc;
	}
	*out = tl;
	return 0;
}

/* Renders doc (a match) to out as the format asks. */
static int put_doc(struct fs_tail *tl, const bson_t *doc, int elem, struct dfs_buf *out,
		   struct dfs_err *err)
{
	bson_t shaped;
	int rc;

	if (tl->format == FSQ_BSON) {
		if (!tl->proj) {
			dfs_buf_append(out, bson_get_data(doc), doc->len);
			return 0;
		}
		bson_init(&shaped);
		rc = query_proj_apply(tl->proj, doc, elem, &shaped, err);
		if (!rc)
			dfs_buf_append(out, bson_get_data(&shaped), shaped.len);
		bson_destroy(&shaped);
		return rc;
	}
	if (!tl->proj)
		rc = store_codec_render(
			doc, tl->format == FSQ_PRETTY ? STORE_RENDER_PRETTY : STORE_RENDER_COMPACT,
			out, err);
	else {
		bson_init(&shaped);
		rc = query_proj_apply(tl->proj, doc, elem, &shaped, err);
		if (!rc)
			rc = store_codec_render(&shaped,
						tl->format == FSQ_PRETTY ? STORE_RENDER_PRETTY
									 : STORE_RENDER_COMPACT,
						out, err);
		bson_destroy(&shaped);
	}
	if (!rc && tl->format != FSQ_PRETTY)
		dfs_buf_putc(out, '\n'); /* pretty output ends with its own newline */
	return rc;
}

/* One look (note 1): examines up to TAIL_BATCH documents after the position, appending
 * the matches to out until about want bytes; *end tells whether it reached the last one. */
static int look(struct fs_tail *tl, size_t want, struct dfs_buf *out, bool *end,
		struct dfs_err *err)
{
	struct store_cursor *cur = NULL;
	size_t start = out->len;
	struct store_txn *t;
	struct store_coll c;
	int rc;

	*end = false;
	if ((rc = store_txn_begin(tl->db, false, &t, err)))
		return rc;
	rc = store_coll_by_id(t, tl->coll, &c, err);
	if (rc == DFS_ENOENT) {
		dfs_err_clear(err);
		rc = dfs_err_set(err, DFS_ENOENT,
				 "QueryPlanKilled (175): the collection was dropped while a "
				 "tailable read was open");
	}
	if (!rc && tl->after) {
		struct store_entry e;

		rc = store_entry_get(t, tl->after, &e, err);
		if (rc == DFS_ENOENT)
			dfs_err_clear(err);
		if (rc == DFS_ENOENT || (!rc && e.coll != tl->coll))
			rc = dfs_err_set(err, DFS_ESTALE,
					 "CappedPositionLost (136): the tailable read's position "
					 "(record %lld) was removed from capped collection '%s' "
					 "before the read came back to it: documents after it may "
					 "have been missed",
					 (long long)tl->after, c.name);
	}
	if (!rc)
		rc = store_cursor_open_after(t, tl->coll, tl->after, &cur, err);
	for (int n = 0; !rc && n < TAIL_BATCH && out->len - start < want; n++) {
		bson_t doc;
		int64_t id;
		int elem = -1;

		rc = store_cursor_next(cur, &doc, &id, err);
		if (rc)
			break;
		tl->after = id;
		/* what its reader may not read is not there for it (store.h "callers") */
		if (!store_cursor_allowed(cur) || !query_filter_match(tl->match, &doc, &elem))
			continue;
		if (tl->skip > 0) {
			tl->skip--;
			continue;
		}
		if ((rc = put_doc(tl, &doc, elem, out, err)))
			break;
		if (tl->limited && --tl->limit == 0)
			break;
	}
	if (rc == DFS_ENOENT && cur) {
		rc = 0; /* the end of what is there */
		*end = true;
	}
	store_cursor_free(cur);
	store_txn_abort(t);
	return rc;
}

int fs_tail_next(struct fs_tail *tl, size_t want, struct dfs_buf *out, bool (*stop)(void *ctx),
		 void *ctx, struct dfs_err *err)
{
	size_t start = out->len;
	int rc;

	if (!want)
		want = 1;
	for (;;) {
		struct timespec ts = {0, TAIL_POLL_NS};
		bool end;

		if (tl->limited && tl->limit == 0)
			return 0; /* the limit was reached: the end */
		if ((rc = look(tl, want, out, &end, err)))
			return rc;
		if (out->len > start)
			return 0;
		if (stop && stop(ctx))
			return dfs_err_set(err, DFS_EINTR, "tailable read interrupted");
		if (end)
			nanosleep(&ts, NULL);
	}
}

bool fs_tail_done(const struct fs_tail *tl)
{
	return tl->limited && tl->limit == 0;
}

void fs_tail_free(struct fs_tail *tl)
{
	if (!tl)
		return;
	query_expr_free(tl->match);
	query_proj_free(tl->proj);
	free(tl);
}
