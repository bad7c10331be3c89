/*
 * cursor.c - the cursors of the wire protocol: a find's or aggregate's first batch read
 * straight from the engine's cursor, and the rest kept for getMore as one snapshot. The
 * rest is read at once, in the transaction of the first batch, into a struct fs_result
 * (qpath.c's: memory, then an unlinked temporary file past result_mem), as a result file
 * of the mount is: so a cursor's documents never mix two states of the collection while
 * writers go on, and no read transaction stays open between getMores (an idle client
 * would otherwise hold back the WAL's checkpoints for up to ten minutes).
 *
 * Design notes
 * 1. The registry is one list under one lock; a cursor being read by a getMore is marked
 *    busy and taken off the lock meanwhile, so a killCursors or the idle reaper of another
 *    thread waits for nothing: it marks the cursor dead and the getMore frees it.
 * 2. Ids are random positive int64s (never 0, which means "exhausted"), so a client cannot
 *    guess another's cursor; a getMore must also name the cursor's namespace.
 * 3. A cursor is closed when it is exhausted, killed, idle for wire_cursor_timeout_s, or
 *    when its session (lsid) ends.
 * 4. A stream cursor (a tailable find on a capped collection, a $changeStream) is not a
 *    snapshot: it keeps the mount's reader of that stream (fs/paths/tail.c, fs/paths/changes.c: their
 *    positions, CappedPositionLost, resume tokens) and reads on at each getMore, waiting
 *    for more with awaitData up to the getMore's maxTimeMS (1 s by default). It stays open
 *    with empty batches until the stream ends (a limit, an invalidate), fails, or is
 *    killed or idle.
 */
#include "wire.h"
#include "fs_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

int wire_cursor_timeout_s = WIRE_CURSOR_TIMEOUT_S;

struct cursor {
	int64_t id;
	char ns[2 * DFS_MAX_NS_NAME + 2]; /* "<db>.<coll>" */
	struct fs_result res;		  /* the documents left, BSON one after the other */
	size_t off;			  /* the next document's offset in res */
	uint8_t lsid[16];		  /* the session's id, when has_lsid */
	bool has_lsid;
	struct wire_stream *stream; /* Owned: a stream cursor's reader (note 4), else NULL */
	bool ended;		    /* the stream appended nothing: it has ended */
	bool await;		    /* awaitData: a getMore waits for documents */
	struct dfs_buf pending;	    /* a stream cursor's documents read but not yet sent */
	size_t poff;		    /* the next of them */
	bool busy;		    /* a getMore reads it (note 1) */
	bool dead;		    /* killed while busy: the getMore frees it */
	time_t last;		    /* last use (CLOCK_MONOTONIC seconds) */
	struct cursor *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cursor *cursors; /* guarded by lock */
static int ncursors;

static time_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static int64_t new_id(void)
{
	uint64_t v = 0;

	while (v == 0) {
		if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
			static uint64_t ctr = 0x9e3779b97f4a7c15ull;

			v = __atomic_add_fetch(&ctr, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);
			v ^= (uint64_t)time(NULL) << 20;
		}
		v &= (uint64_t)INT64_MAX;
	}
	return (int64_t)v;
}

static void cursor_free(struct cursor *cu)
{
	if (!cu)
		return;
	fs_result_release(&cu->res);
	if (cu->stream) {
		cu->stream->free(cu->stream->src);
		free(cu->stream);
	}
	dfs_buf_release(&cu->pending);
	free(cu);
}

bool wire_lsid_id(const bson_t *lsid, uint8_t out[16])
{
	bson_iter_t it;
	bson_subtype_t st;
	const uint8_t *data;
	uint32_t len;

	if (!lsid || !bson_iter_init_find(&it, lsid, "id") || !BSON_ITER_HOLDS_BINARY(&it))
		return false;
	bson_iter_binary(&it, &st, &len, &data);
	if (len != 16)
		return false;
	memcpy(out, data, 16);
	return true;
}

/* Appends documents of res from *off to arr (a batch): at most max (0: no count limit)
 * and under WIRE_BATCH_BYTES (at least one). Returns 0 or DFS_EIO. */
static int batch_from_result(struct fs_result *res, size_t *off, int64_t max, bson_t *arr,
			     int64_t *n, struct dfs_err *err)
{
	struct dfs_buf b;
	size_t bytes = 0;
	int rc = 0;

	dfs_buf_init(&b);
	*n = 0;
	while (*off < res->size && (max <= 0 || *n < max)) {
		uint8_t lb[4];
		size_t got;
		uint32_t len;
		bson_t doc;
		char key[24];

		if (fs_result_read(res, (char *)lb, 4, (off_t)*off, &got) || got != 4) {
			rc = dfs_err_set(err, DFS_EIO, "cannot read a cursor's documents");
			break;
		}
		len = (uint32_t)lb[0] | (uint32_t)lb[1] << 8 | (uint32_t)lb[2] << 16 |
		      (uint32_t)lb[3] << 24;
		if (*n && bytes + len > WIRE_BATCH_BYTES)
			break;
		dfs_buf_reset(&b);
		dfs_buf_reserve(&b, len);
		if (fs_result_read(res, b.data, len, (off_t)*off, &got) || got != len ||
		    !bson_init_static(&doc, (const uint8_t *)b.data, len)) {
			rc = dfs_err_set(err, DFS_EIO, "cannot read a cursor's documents");
			break;
		}
		snprintf(key, sizeof(key), "%lld", (long long)*n);
		bson_append_document(arr, key, -1, &doc);
		bytes += len;
		*off += len;
		(*n)++;
	}
	dfs_buf_release(&b);
	return rc;
}

static void cursor_doc_pbrt(bson_t *reply, const char *batch_key, bson_t *batch, int64_t id,
			    const char *ns, const bson_t *pbrt)
{
	bson_t cur;

	BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cur);
	BSON_APPEND_ARRAY(&cur, batch_key, batch);
	BSON_APPEND_INT64(&cur, "id", id);
	BSON_APPEND_UTF8(&cur, "ns", ns);
	if (pbrt && !bson_empty(pbrt))
		BSON_APPEND_DOCUMENT(&cur, "postBatchResumeToken", pbrt);
	bson_append_document_end(reply, &cur);
}

static void cursor_doc(bson_t *reply, const char *batch_key, bson_t *batch, int64_t id,
		       const char *ns)
{
	cursor_doc_pbrt(reply, batch_key, batch, id, ns, NULL);
}

int wire_cursor_reply(struct wire_ctx *c, const char *ns, const struct wire_source *src,
		      int64_t batch, bool single, const bson_t *lsid, bson_t *reply,
		      struct dfs_err *err)
{
	struct cursor *cu = NULL;
	bson_t arr = BSON_INITIALIZER;
	const bson_t *doc;
	size_t bytes = 0;
	int64_t n = 0, max = batch < 0 ? WIRE_BATCH_DOCS : batch;
	int rc = 0;
	bool more = false;

	(void)c;
	while (n < max) {
		char key[24];

		rc = src->next(src->ctx, &doc, err);
		if (rc == DFS_ENOENT) {
			rc = 0;
			goto reply;
		}
		if (rc)
			goto done;
		if (n && bytes + doc->len > WIRE_BATCH_BYTES) {
			more = true; /* doc opens the rest */
			break;
		}
		snprintf(key, sizeof(key), "%lld", (long long)n);
		bson_append_document(&arr, key, -1, doc);
		bytes += doc->len;
		n++;
	}
	if (single)
		goto reply;
	/* The rest, now, in the source's transaction (the file's note). */
	if (!more) {
		rc = src->next(src->ctx, &doc, err);
		if (rc == DFS_ENOENT) {
			rc = 0;
			goto reply;
		}
		if (rc)
			goto done;
	}
	cu = calloc(1, sizeof(*cu));
	if (!cu)
		abort();
	fs_result_init(&cu->res);
	snprintf(cu->ns, sizeof(cu->ns), "%s", ns);
	cu->has_lsid = wire_lsid_id(lsid, cu->lsid);
	for (;;) {
		dfs_buf_append(&cu->res.mem, bson_get_data(doc), doc->len);
		if ((rc = fs_result_spill(&cu->res, false, err)))
			goto done;
		rc = src->next(src->ctx, &doc, err);
		if (rc == DFS_ENOENT)
			break;
		if (rc)
			goto done;
	}
	if ((rc = fs_result_finish(&cu->res, err)))
		goto done;
	cu->id = new_id();
	cu->last = now_s();
	pthread_mutex_lock(&lock);
	cu->next = cursors;
	cursors = cu;
	ncursors++;
	pthread_mutex_unlock(&lock);
reply:
	cursor_doc(reply, "firstBatch", &arr, cu ? cu->id : 0, ns);
	cu = NULL;
done:
	cursor_free(cu);
	bson_destroy(&arr);
	return rc;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static atomic_bool stopping; /* the server stops: no getMore waits any more */

void wire_cursor_stop_waits(bool stop)
{
	atomic_store(&stopping, stop);
}

static bool past(void *ctx)
{
	return atomic_load(&stopping) || mono_ns() >= *(const int64_t *)ctx;
}

/* A change stream cursor's postBatchResumeToken after a batch of n documents (the last
 * in arr) into out: the last document's _id while documents read are still pending, else
 * where the stream stands. */
static void stream_pbrt(struct cursor *cu, const bson_t *arr, int64_t n, bson_t *out)
{
	if (!cu->stream->token)
		return;
	if (n > 0 && cu->poff < cu->pending.len) {
		bson_iter_t it, id;
		char path[40];

		snprintf(path, sizeof(path), "%lld._id", (long long)(n - 1));
		if (bson_iter_init(&it, arr) && bson_iter_find_descendant(&it, path, &id) &&
		    BSON_ITER_HOLDS_DOCUMENT(&id)) {
			const uint8_t *data;
			uint32_t len;
			bson_t v;

			bson_iter_document(&id, &len, &data);
			if (bson_init_static(&v, data, len))
				bson_concat(out, &v);
			return;
		}
	}
	cu->stream->token(cu->stream->src, out);
}

/* Whether stream cursor cu has nothing more to give. */
static bool stream_ended(const struct cursor *cu)
{
	return cu->poff >= cu->pending.len &&
	       (cu->ended || (cu->stream->done && cu->stream->done(cu->stream->src)));
}

/* A stream cursor's next batch into arr: at most max documents (0: any), under
 * WIRE_BATCH_BYTES, reading on (and waiting until deadline, CLOCK_MONOTONIC ns) when none
 * is pending. 0 (also for an empty batch), or the read's error. */
static int stream_batch(struct cursor *cu, int64_t max, int64_t deadline, bson_t *arr, int64_t *n,
			struct dfs_err *err)
{
	size_t bytes = 0;

	*n = 0;
	while (max <= 0 || *n < max) {
		const uint8_t *p;
		uint32_t len;
		bson_t doc;
		char key[24];

		if (cu->poff >= cu->pending.len) {
			int rc;

			if (*n || stream_ended(cu))
				break;
			dfs_buf_reset(&cu->pending);
			cu->poff = 0;
			rc = cu->stream->next(cu->stream->src, &cu->pending, past, &deadline, err);
			if (rc == DFS_EINTR) { /* the deadline: an empty batch */
				dfs_err_clear(err);
				break;
			}
			if (rc)
				return rc;
			if (!cu->pending.len) {
				cu->ended = true;
				break;
			}
		}
		p = (const uint8_t *)cu->pending.data + cu->poff;
		len = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		      (uint32_t)p[3] << 24;
		if (*n && bytes + len > WIRE_BATCH_BYTES)
			break;
		if (!bson_init_static(&doc, p, len))
			return dfs_err_set(err, DFS_EIO, "a stream cursor's document is damaged");
		snprintf(key, sizeof(key), "%lld", (long long)*n);
		bson_append_document(arr, key, -1, &doc);
		bytes += len;
		cu->poff += len;
		(*n)++;
	}
	return 0;
}

int wire_cursor_stream_reply(struct wire_ctx *c, const char *ns, struct wire_stream *st, bool await,
			     int64_t batch, const bson_t *lsid, bson_t *reply)
{
	struct dfs_err err = {0};
	struct cursor *cu = calloc(1, sizeof(*cu));
	bson_t arr = BSON_INITIALIZER;
	int64_t n = 0;
	int rc;

	if (!cu)
		abort();
	fs_result_init(&cu->res);
	dfs_buf_init(&cu->pending);
	cu->stream = st;
	cu->await = await;
	snprintf(cu->ns, sizeof(cu->ns), "%s", ns);
	cu->has_lsid = wire_lsid_id(lsid, cu->lsid);
	/* the first batch waits for nothing */
	rc = stream_batch(cu, batch < 0 ? WIRE_BATCH_DOCS : batch, 0, &arr, &n, &err);
	if (rc) {
		cursor_free(cu);
		bson_destroy(&arr);
		if (rc == DFS_ESTALE)
			return wire_fail(c, 136, "CappedPositionLost", "%s", err.msg);
		return wire_fail_dfs(c, &err);
	}
	if (stream_ended(cu)) {
		cursor_doc(reply, "firstBatch", &arr, 0, ns);
		cursor_free(cu);
	} else {
		bson_t pbrt = BSON_INITIALIZER;

		cu->id = new_id();
		cu->last = now_s();
		stream_pbrt(cu, &arr, n, &pbrt);
		cursor_doc_pbrt(reply, "firstBatch", &arr, cu->id, ns, &pbrt);
		bson_destroy(&pbrt);
		pthread_mutex_lock(&lock);
		cu->next = cursors;
		cursors = cu;
		ncursors++;
		pthread_mutex_unlock(&lock);
	}
	bson_destroy(&arr);
	return 0;
}

/* Takes cursor id off the list (lock held); NULL when absent. */
static struct cursor *unlink_cursor(int64_t id)
{
	for (struct cursor **p = &cursors; *p; p = &(*p)->next)
		if ((*p)->id == id) {
			struct cursor *cu = *p;

			*p = cu->next;
			ncursors--;
			return cu;
		}
	return NULL;
}

int wire_cursor_more(struct wire_ctx *c, int64_t id, const char *ns, int64_t batch,
		     int64_t await_ms, bson_t *reply)
{
	struct dfs_err err = {0};
	struct cursor *cu;
	bson_t arr = BSON_INITIALIZER;
	int64_t n = 0;
	int rc;
	bool done;

	pthread_mutex_lock(&lock);
	for (cu = cursors; cu && cu->id != id; cu = cu->next)
		;
	if (cu && (cu->busy || cu->dead || strcmp(cu->ns, ns) != 0)) {
		bool busy = cu->busy || cu->dead;

		pthread_mutex_unlock(&lock);
		bson_destroy(&arr);
		if (busy)
			return wire_fail(c, 43, "CursorNotFound",
					 "cursor id %lld is in use by another getMore",
					 (long long)id);
		return wire_fail(c, 13, "Unauthorized",
				 "Requested getMore on namespace '%s', but cursor belongs to a "
				 "different namespace %s",
				 ns, cu->ns);
	}
	if (!cu) {
		pthread_mutex_unlock(&lock);
		bson_destroy(&arr);
		return wire_fail(c, 43, "CursorNotFound", "cursor id %lld not found",
				 (long long)id);
	}
	cu->busy = true;
	pthread_mutex_unlock(&lock);

	if (cu->stream)
		rc = stream_batch(cu, batch, cu->await ? mono_ns() + await_ms * 1000000 : 0, &arr,
				  &n, &err);
	else
		rc = batch_from_result(&cu->res, &cu->off, batch, &arr, &n, &err);
	{
		struct fs_curop *op = fs_curop_current();

		if (op)
			fs_curop_note(NULL, n);
	}

	pthread_mutex_lock(&lock);
	cu->busy = false;
	cu->last = now_s();
	done = rc || cu->dead || (cu->stream ? stream_ended(cu) : cu->off >= cu->res.size);
	if (done && !cu->dead)
		unlink_cursor(id);
	pthread_mutex_unlock(&lock);
	if (!rc) {
		bson_t pbrt = BSON_INITIALIZER;

		if (cu->stream)
			stream_pbrt(cu, &arr, n, &pbrt);
		cursor_doc_pbrt(reply, "nextBatch", &arr, done ? 0 : id, ns, &pbrt);
		bson_destroy(&pbrt);
	}
	if (done)
		cursor_free(cu);
	bson_destroy(&arr);
	if (rc == DFS_ESTALE)
		return wire_fail(c, 136, "CappedPositionLost", "%s", err.msg);
	if (rc == DFS_ENOENT)
		return wire_fail(c, 175, "QueryPlanKilled", "%s", err.msg);
	return rc ? wire_fail_dfs(c, &err) : 0;
}

bool wire_cursor_kill(int64_t id)
{
	struct cursor *cu;

	pthread_mutex_lock(&lock);
	cu = unlink_cursor(id);
	if (cu && cu->busy) {
		cu->dead = true; /* the getMore frees it (note 1) */
		cu = (struct cursor *)1;
	}
	pthread_mutex_unlock(&lock);
	if (cu == (struct cursor *)1)
		return true;
	cursor_free(cu);
	return cu != NULL;
}

/* Takes off the list (lock held) every cursor that pred selects; the idle ones are
 * returned as a chain to free, busy ones marked dead. */
static struct cursor *take_if(bool (*pred)(const struct cursor *cu, const void *arg),
			      const void *arg, int *n)
{
	struct cursor *out = NULL;

	for (struct cursor **p = &cursors; *p;) {
		struct cursor *cu = *p;

		if (!pred(cu, arg)) {
			p = &cu->next;
			continue;
		}
		*p = cu->next;
		ncursors--;
		(*n)++;
		if (cu->busy) {
			cu->dead = true;
			continue;
		}
		cu->next = out;
		out = cu;
	}
	return out;
}

static void free_chain(struct cursor *cu)
{
	while (cu) {
		struct cursor *next = cu->next;

		cursor_free(cu);
		cu = next;
	}
}

static bool of_session(const struct cursor *cu, const void *arg)
{
	return cu->has_lsid && !memcmp(cu->lsid, arg, 16);
}

void wire_cursor_kill_session(const bson_t *lsid)
{
	uint8_t id[16];
	struct cursor *chain;
	int n = 0;

	if (!wire_lsid_id(lsid, id))
		return;
	pthread_mutex_lock(&lock);
	chain = take_if(of_session, id, &n);
	pthread_mutex_unlock(&lock);
	free_chain(chain);
}

static bool idle_since(const struct cursor *cu, const void *arg)
{
	return !cu->busy && cu->last < *(const time_t *)arg;
}

int wire_cursor_reap(int timeout_s)
{
	time_t before = now_s() - timeout_s;
	struct cursor *chain;
	int n = 0;

	pthread_mutex_lock(&lock);
	chain = take_if(idle_since, &before, &n);
	pthread_mutex_unlock(&lock);
	free_chain(chain);
	if (n)
		fs_log_info("wire: closed %d cursors idle for %d s", n, timeout_s);
	return n;
}

int wire_cursor_count(void)
{
	int n;

	pthread_mutex_lock(&lock);
	n = ncursors;
	pthread_mutex_unlock(&lock);
	return n;
}

void wire_docs_take(struct wire_docs *w, bson_t *doc)
{
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 16;
		w->d = realloc(w->d, w->cap * sizeof(*w->d));
		if (!w->d)
			abort();
	}
	w->d[w->n++] = doc;
}

int wire_docs_next(void *ctx, const bson_t **doc, struct dfs_err *err)
{
	struct wire_docs *w = ctx;

	(void)err;
	if (w->pos >= w->n)
		return DFS_ENOENT;
	*doc = w->d[w->pos++];
	return 0;
}

void wire_docs_release(struct wire_docs *w)
{
	for (size_t i = 0; i < w->n; i++)
		bson_destroy(w->d[i]);
	free(w->d);
	memset(w, 0, sizeof(*w));
}
