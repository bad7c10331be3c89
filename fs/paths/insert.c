/*
 * insert.c - streaming bulk insertion, shared by the mount's ".insert" file and by
 * `docfs import`. Bytes arrive in chunks; every complete document is parsed, prepared (an
 * ObjectId for a missing _id) and inserted, one write transaction per chunk. It does not
 * read files or talk to FUSE; callers feed it.
 *
 * Design notes
 * 1. A chunk is handled by two stages: the scan (find each document, parse, prepare, and
 *    measure its rendered length: pure CPU work, no store access) and the insert (one
 *    write transaction, documents in text order). On a large chunk the scan runs on a
 *    thread of its own, a bounded queue ahead of the insert, so a bulk load uses two cores;
 *    a small chunk runs both stages in turn on the caller's thread.
 * 2. Ordered semantics do not depend on that: the insert takes documents strictly in order
 *    and stops at the first failure (its own, or the scan's error, which the scan reports
 *    only after every document before it); documents before it are committed, none after.
 *    The scan's position (offset, line, JSON array state) becomes the inserter's only when
 *    every document it produced was inserted.
 * 3. Every call commits before returning: holding the write lock between requests would
 *    stall (or, in the same client, deadlock) every other writer of the database, and a
 *    document acknowledged by a successful write() or close() must survive a crash.
 * 4. The writing thread holds the database's write lock, so it does as little as possible:
 *    the scan also computes each document's key, file name and rendered length
 *    (store_doc_ready_fill), and the queue's slots keep their buffers from call to call, so
 *    the insert neither allocates nor frees memory allocated by the other thread.
 * 6. keep_going (docfs import's default, as mongoimport's) skips a document refused for a
 *    duplicate key and goes on. The fast path stays as it is: a call that meets a duplicate
 *    is rolled back and done again with each document in a savepoint (store_txn_mark), so
 *    a load without duplicates costs nothing more. sink, when set, takes each document
 *    instead of the insert (the upsert and merge modes of docfs import), in order.
 * 5. What a MongoDB user has is accepted as it is: a stream of documents (JSON Lines, or
 *    any whitespace between them, or commas: what the brackets of insertMany([...]) hold),
 *    or one JSON array of them (mongoexport --jsonArray). The first byte that is not
 *    whitespace decides: '[' is an array (array_state 0..3), anything else a stream
 *    (array_state 4).
 */
#include "fs_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Chunks at least this long are scanned on a second thread (note 1). */
#define SCAN_THREAD_MIN (32 * 1024)
/* Documents the scan may run ahead of the insert. */
#define QUEUE_LEN 256
/* A waiting side is woken only when this many documents (or free slots) are ready for it:
 * waking it for every document costs a context switch each. */
#define QUEUE_BATCH 32
/* scan_next: no complete document left in the chunk (not a dfs code). */
#define SCAN_END (-1)

/* One prepared document on its way from the scan to the insert. Its buffers are reused from
 * document to document: the writing thread neither allocates nor frees (note 4). */
struct fs_insert_item {
	struct dfs_buf bson;	  /* the prepared document's bytes (_id first) */
	struct store_doc_ready r; /* its rendered length, key and file name */
	unsigned line;		  /* the line where it starts */
};

static void item_init(struct fs_insert_item *it)
{
	dfs_buf_init(&it->bson);
	dfs_buf_init(&it->r.key);
}

static void item_release(struct fs_insert_item *it)
{
	dfs_buf_release(&it->bson);
	dfs_buf_release(&it->r.key);
}

void fs_inserter_init(struct fs_inserter *in, struct store_db *db, int64_t coll,
		      const struct store_attrs *a)
{
	memset(in, 0, sizeof(*in));
	in->db = db;
	in->coll = coll;
	in->attrs = *a;
	in->line = 1;
	dfs_buf_init(&in->pending);
}

void fs_inserter_release(struct fs_inserter *in)
{
	dfs_buf_release(&in->pending);
	if (in->items) {
		for (int i = 0; i < QUEUE_LEN; i++)
			item_release(&in->items[i]);
		free(in->items);
		in->items = NULL;
	}
}

static unsigned count_lines(const char *p, size_t n)
{
	unsigned lines = 0;

	for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))); p++)
		lines++;
	return lines;
}

/* Skips whitespace; returns the offset of the first other byte (or len). */
static size_t skip_space(const char *p, size_t off, size_t len)
{
	while (off < len && (p[off] == ' ' || p[off] == '\t' || p[off] == '\n' || p[off] == '\r'))
		off++;
	return off;
}

/* The scan of one chunk (note 1): a copy of the inserter's position that it advances. */
struct scan {
	const char *text;	/* Borrowed: the pending bytes */
	size_t len;		/* their length */
	bool final;		/* no more bytes will come */
	bool json_array;	/* the inserter's mode */
	bool raw;		/* documents go to a sink as parsed (no _id made, note 6) */
	size_t off;		/* next byte to look at */
	unsigned line;		/* line of text[off] */
	int array_state;	/* as fs_inserter.array_state */
	int64_t ndocs;		/* documents before the next one (inserted or queued) */
	struct dfs_buf scratch; /* rendering buffer for the sizes */
	bson_t parsed;		/* the document being parsed (reinitialised for each) */
	bson_t prepared;	/* and prepared */
	struct dfs_err err;	/* the scan's error */
};

/* In JSON array mode, consumes the punctuation between documents. Returns 0 when a
 * document can follow at *off, SCAN_END when more input is needed, DFS_EINVAL on bad input
 * (which is 1: the two must not share a value). */
static int array_punct(struct scan *s, const char *p, size_t len, size_t *off)
{
	for (;;) {
		*off = skip_space(p, *off, len);
		if (*off >= len)
			return SCAN_END;
		switch (s->array_state) {
		case 0:
			if (p[*off] != '[')
				return dfs_err_set(&s->err, DFS_EINVAL,
						   "line %u: expected '[' to start a JSON array",
						   s->line + count_lines(p, *off));
			s->array_state = 1;
			(*off)++;
			break;
		case 1:
			if (p[*off] == ']') {
				s->array_state = 3;
				(*off)++;
				break;
			}
			return 0;
		case 2:
			if (p[*off] == ',') {
				s->array_state = 1;
				(*off)++;
			} else if (p[*off] == ']') {
				s->array_state = 3;
				(*off)++;
			} else {
				return dfs_err_set(
					&s->err, DFS_EINVAL,
					"line %u: expected ',' or ']' after document %lld",
					s->line + count_lines(p, *off), (long long)s->ndocs);
			}
			break;
		default:
			return dfs_err_set(&s->err, DFS_EINVAL,
					   "line %u: text after the end of the JSON array",
					   s->line + count_lines(p, *off));
		}
	}
}

/*
 * Scans the next document. Returns 0 with *it filled, SCAN_END when no complete document is
 * left in the chunk (s->off and s->line then say where the scan stopped), or an error in s->err
 * with the document's number and line.
 */
static int scan_next(struct scan *s, struct fs_insert_item *it)
{
	const char *p = s->text + s->off;
	size_t left = s->len - s->off, used = 0;
	unsigned line;
	int rc;

	if (!s->json_array) {
		/* note 5: the first byte decides between one JSON array and a stream, whose
		 * documents may be separated by commas too */
		size_t o = skip_space(p, 0, left);

		if (o >= left)
			return SCAN_END;
		if (s->array_state == 0 && s->ndocs == 0 && p[o] == '[') {
			s->json_array = true;
		} else {
			s->array_state = 4;
			if (s->ndocs > 0 && p[o] == ',')
				o++;
			s->line += count_lines(p, o);
			s->off += o;
			p += o;
			left -= o;
		}
	}
	if (s->json_array) {
		size_t o = 0;

		rc = array_punct(s, p, left, &o);
		s->line += count_lines(p, o);
		s->off += o;
		p += o;
		left -= o;
		if (rc)
			return rc;
	}
	bson_reinit(&s->parsed);
	rc = store_codec_parse_next(p, left, s->line, &used, &s->parsed, &s->err);
	if (rc == DFS_ENOENT || (rc == DFS_EINCOMPLETE && !s->final)) {
		dfs_err_clear(&s->err);
		return SCAN_END;
	}
	/* The document starts after the leading whitespace it consumed. */
	line = s->line + count_lines(p, skip_space(p, 0, rc ? left : used));
	if (!rc && s->raw) {
		/* the sink's operations check and complete it (an upsert keeps the _id it
		 * finds) */
		dfs_buf_reset(&it->bson);
		dfs_buf_append(&it->bson, bson_get_data(&s->parsed), s->parsed.len);
	} else if (!rc && !(rc = store_doc_prepare(&s->parsed, NULL, &s->prepared, &s->err))) {
		rc = store_doc_ready_fill(&s->prepared, &s->scratch, &it->r, &s->err);
		if (!rc) {
			dfs_buf_reset(&it->bson);
			dfs_buf_append(&it->bson, bson_get_data(&s->prepared), s->prepared.len);
		}
		bson_destroy(&s->prepared);
	}
	if (rc) {
		dfs_err_prefix(&s->err, "document %lld (line %u): ", (long long)s->ndocs + 1, line);
		return rc;
	}
	it->line = line;
	s->ndocs++;
	s->line += count_lines(p, used);
	s->off += used;
	if (s->json_array)
		s->array_state = 2;
	return 0;
}

/* The queue between a scan thread and the insert (note 1). */
struct queue {
	struct scan *s;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fs_insert_item *items; /* Borrowed: QUEUE_LEN slots (the inserter's) */
	size_t head, tail; /* items[head % QUEUE_LEN] is next out; tail - head are queued */
	bool done;	   /* the scan ended; rc says how */
	bool stop;	   /* the insert failed: the scan stops early */
	bool scan_waits;   /* the scan waits for free slots */
	bool insert_waits; /* the insert waits for documents */
	bool held;	   /* the insert uses items[head % QUEUE_LEN] */
	int rc;		   /* scan_next's last result: SCAN_END or an error */
};

static void *scan_thread(void *arg)
{
	struct queue *q = arg;
	int rc;

	for (;;) {
		pthread_mutex_lock(&q->lock);
		while (q->tail - q->head == QUEUE_LEN && !q->stop) {
			q->scan_waits = true;
			pthread_cond_wait(&q->cond, &q->lock);
			q->scan_waits = false;
		}
		if (q->stop) {
			pthread_mutex_unlock(&q->lock);
			rc = SCAN_END;
			break;
		}
		pthread_mutex_unlock(&q->lock);
		/* Slot tail is not queued: the insert does not touch it. */
		rc = scan_next(q->s, &q->items[q->tail % QUEUE_LEN]);
		if (rc)
			break;
		pthread_mutex_lock(&q->lock);
		q->tail++;
		/* The insert waits idle for the chunk's first document: no batching then. */
		if (q->insert_waits && (q->tail - q->head >= QUEUE_BATCH || q->head == 0))
			pthread_cond_signal(&q->cond);
		pthread_mutex_unlock(&q->lock);
	}
	pthread_mutex_lock(&q->lock);
	q->rc = rc;
	q->done = true;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

/* The next scanned document from the queue: 0 with *it pointing at it (the slot stays the
 * insert's until the next call, which hands it back to the scan under the same lock), or
 * the scan's end (SCAN_END or an error). */
static int queue_next(struct queue *q, struct fs_insert_item **it)
{
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	if (q->held) {
		q->held = false;
		q->head++;
		if (q->scan_waits && q->tail - q->head <= QUEUE_LEN - QUEUE_BATCH)
			pthread_cond_signal(&q->cond);
	}
	while (q->tail == q->head && !q->done) {
		q->insert_waits = true;
		pthread_cond_wait(&q->cond, &q->lock);
		q->insert_waits = false;
	}
	if (q->tail != q->head) {
		*it = &q->items[q->head % QUEUE_LEN];
		q->held = true;
	} else {
		rc = q->rc;
	}
	pthread_mutex_unlock(&q->lock);
	return rc;
}

static bool use_scan_thread(size_t len)
{
	static long ncpu;

	if (len < SCAN_THREAD_MIN)
		return false;
	if (!ncpu)
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	return ncpu > 1;
}

/* The insert of fs_inserter_feed. careful: each document in a savepoint, a duplicate key
 * skipped and counted (keep_going, note 6); else a duplicate key under keep_going rolls the
 * call back and returns FEED_AGAIN, with in as it was. */
#define FEED_AGAIN (-2)
static int feed(struct fs_inserter *in, const char *data, size_t len, bool final, bool careful)
{
	struct store_txn *t = NULL;
	struct scan s;
	struct queue q;
	pthread_t th;
	bool threaded = false;
	int rc = 0, src;

	if (in->failed)
		return in->err.code;
	dfs_buf_append(&in->pending, data, len);
	memset(&s, 0, sizeof(s));
	s.text = in->pending.data ? in->pending.data : "";
	s.len = in->pending.len;
	s.final = final;
	s.json_array = in->json_array;
	s.raw = in->sink != NULL;
	s.line = in->line;
	s.array_state = in->array_state;
	s.ndocs = in->ndocs;
	dfs_buf_init(&s.scratch);
	bson_init(&s.parsed);
	if (!in->items) {
		in->items = calloc(QUEUE_LEN, sizeof(*in->items));
		if (!in->items)
			abort();
		for (int i = 0; i < QUEUE_LEN; i++)
			item_init(&in->items[i]);
	}
	if (use_scan_thread(s.len)) {
		memset(&q, 0, sizeof(q));
		q.s = &s;
		q.items = in->items;
		pthread_mutex_init(&q.lock, NULL);
		pthread_cond_init(&q.cond, NULL);
		threaded = pthread_create(&th, NULL, scan_thread, &q) == 0;
		if (!threaded) {
			pthread_cond_destroy(&q.cond);
			pthread_mutex_destroy(&q.lock);
		}
	}
	/* The insert: documents in order until the scan ends or an insert fails (note 2). */
	for (;;) {
		struct fs_insert_item *it = in->items;
		bson_t doc;

		src = threaded ? queue_next(&q, &it) : scan_next(&s, it);
		if (src)
			break;
		if (!t && !in->sink)
			rc = store_txn_begin(in->db, true, &t, &in->err);
		if (!rc) {
			/* The scan built it: a view of its bytes is a valid document. */
			if (!bson_init_static(&doc, (const uint8_t *)it->bson.data, it->bson.len))
				abort();
			if (in->sink) {
				rc = in->sink(in->sink_ctx, &doc, it->line, &in->err);
			} else if (careful) {
				struct dfs_err e = {0};

				rc = store_txn_mark(t, &in->err);
				if (!rc)
					rc = store_doc_insert_ready(t, in->coll, &doc, &it->r,
								    &in->attrs, NULL, &e);
				if (rc == DFS_EEXIST) {
					store_txn_undo(t);
					if (in->nskipped++ < FS_INSERT_REPORT)
						fs_inserter_skipped(in, it->line, &e);
					rc = 0;
					continue;
				}
				if (!rc)
					rc = store_txn_release(t, &in->err);
				else if (!in->err.code)
					in->err = e;
			} else {
				rc = store_doc_insert_ready(t, in->coll, &doc, &it->r, &in->attrs,
							    NULL, &in->err);
			}
		}
		if (rc == DFS_EEXIST && in->keep_going && !careful && !in->sink) {
			rc = FEED_AGAIN;
			break;
		}
		if (rc) {
			dfs_err_prefix(&in->err,
				       "document %lld (line %u): ", (long long)in->ndocs + 1,
				       it->line);
			break;
		}
		in->ndocs++;
	}
	if (threaded) {
		pthread_mutex_lock(&q.lock);
		q.stop = true;
		pthread_cond_signal(&q.cond);
		pthread_mutex_unlock(&q.lock);
		pthread_join(th, NULL);
		if (!rc)
			src = q.rc;
		pthread_cond_destroy(&q.cond);
		pthread_mutex_destroy(&q.lock);
	}
	dfs_buf_release(&s.scratch);
	bson_destroy(&s.parsed);
	if (rc == FEED_AGAIN) {
		store_txn_abort(t);
		dfs_err_clear(&in->err);
		return FEED_AGAIN;
	}
	if (rc)
		goto fail;
	if (src != SCAN_END) {
		in->err = s.err;
		rc = src;
		goto fail;
	}
	/* Every scanned document is in: the scan's position is the inserter's. */
	in->line = s.line;
	in->array_state = s.array_state;
	in->json_array = s.json_array;
	if (final) {
		size_t o = skip_space(s.text, s.off, s.len);

		if (in->json_array && in->array_state != 3) {
			rc = dfs_err_set(&in->err, DFS_EINVAL,
					 "line %u: the JSON array is not closed", in->line);
			goto fail;
		}
		if (o < s.len) {
			rc = dfs_err_set(&in->err, DFS_EINVAL,
					 "document %lld (line %u): unexpected text",
					 (long long)in->ndocs + 1, in->line);
			goto fail;
		}
	}
	/* Keep only what is not consumed yet. */
	if (in->pending.data) {
		memmove(in->pending.data, in->pending.data + s.off, in->pending.len - s.off);
		in->pending.len -= s.off;
		in->pending.data[in->pending.len] = '\0';
	}
	/* Every call commits (note 3). */
	if (t)
		rc = store_txn_commit(t, &in->err);
	if (rc)
		in->failed = true;
	return rc;
fail:
	/* Ordered semantics: what came before the bad document is kept. */
	in->failed = true;
	if (t) {
		struct dfs_err cerr = {0};

		if (store_txn_commit(t, &cerr))
			fs_errlog_add("insert: commit after an error failed: %s", cerr.msg);
	}
	dfs_buf_reset(&in->pending);
	return in->err.code ? in->err.code : rc;
}

int fs_inserter_feed(struct fs_inserter *in, const char *data, size_t len, bool final)
{
	size_t plen = in->pending.len;
	int64_t ndocs = in->ndocs;
	int rc;

	if (in->failed)
		return in->err.code;
	rc = feed(in, data, len, final, false);
	if (rc != FEED_AGAIN)
		return rc;
	/* note 6: a duplicate key in this call: again, each document on its own */
	in->pending.len = plen;
	if (in->pending.data)
		in->pending.data[plen] = '\0';
	in->ndocs = ndocs;
	return feed(in, data, len, final, true);
}

void fs_inserter_skipped(struct fs_inserter *in, unsigned line, const struct dfs_err *e)
{
	if (in->on_skip)
		in->on_skip(in->sink_ctx, in->ndocs + in->nskipped, line, e);
}
