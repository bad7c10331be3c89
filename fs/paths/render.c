/*
 * render.c - the documents of a find or aggregate result rendered into its result file,
 * on a second thread once the result is large, so that the cursor fetches the next
 * documents while earlier ones are rendered. It does not run queries and does not read
 * result files back (qpath.c).
 *
 * Design notes
 * 1. The first RENDER_INLINE documents the caller renders (note 5: not those it copies)
 *    are rendered by it: a small result never starts a thread. From then on the caller
 *    copies each document into the batch it is
 *    filling, one of a ring of RING batches, and hands the batch over when it holds
 *    BATCH_BYTES; the render thread renders the batches in order. The bytes produced are
 *    the ones the caller would have produced: one thread at a time owns the result (the
 *    caller until the thread starts, the thread until fs_render_finish joins it).
 * 2. Batch i of the ring belongs to the caller while head - tail < RING and i == head; the
 *    thread takes batch tail and advances tail only once it is rendered, so the caller never
 *    overwrites a batch being read. Both wait on one condition variable. head, tail and
 *    inflight change under the lock; the thread reads batch tail's bytes outside it, as
 *    the caller does not touch that batch until tail moves past it.
 * 3. Memory stays bounded whatever the documents' sizes (a batch of one 16 MiB document is
 *    handed over at once): the caller also waits while more than INFLIGHT_MAX bytes are
 *    handed over and not rendered, and a batch buffer grown past BATCH_KEEP is given back
 *    when reused. So about INFLIGHT_MAX plus two documents are held, besides the result.
 * 4. The thread stops at its first error; the caller sees it at its next hand-over and at
 *    finish. A caller whose own source fails drains first (fs_render_drain): a rendering
 *    error of an earlier document is the one to report, as rendering in turn meets it first.
 * 5. A document an index plan fetched through the document cache (dcache.c note 5) is not
 *    rendered again: the cache holds its compact rendering, made the first time (by the
 *    caller), which a JSON Lines or JSON result copies with its newline or comma. Only
 *    documents rendered by the caller count towards starting the thread (rendered): a
 *    result whose documents all come so never starts one, as copying costs less than
 *    handing over; on the first run of a query the caller renders them all, as each text
 *    is kept by the thread that made it. Once the thread runs, every document goes
 *    through it, which keeps the order.
 * Whatever the outcome, finish and free join the thread.
 */
#include "fs_int.h"
#include "query.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RENDER_INLINE 256		/* documents rendered before a thread starts (note 1) */
#define BATCH_BYTES (64u * 1024)	/* a batch is handed over once it holds this much BSON */
#define RING 8				/* batches in flight */
#define INFLIGHT_MAX (4u * 1024 * 1024) /* bytes handed over and not rendered (note 3) */
#define BATCH_KEEP (4 * BATCH_BYTES)	/* a batch buffer larger than this is given back */

struct batch {
	struct dfs_buf bson; /* the documents, back to back */
	int64_t first;	     /* the result position of its first document */
};

struct fs_render {
	struct fs_result *r; /* Borrowed: the result file being written */
	int format;	     /* FSQ_JSONL, FSQ_JSON, FSQ_PRETTY or FSQ_IDS */
	int64_t n;	     /* documents put so far */
	bool threaded;	     /* the render thread runs (and owns r) */
	int64_t rendered;    /* documents the caller rendered itself (note 1) */
	struct dfs_buf text; /* a rendering made for the document cache (note 5) */
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cond;	 /* any change of head, tail, done or rc */
	struct batch ring[RING]; /* note 2 */
	unsigned head, tail;	 /* batches handed over / rendered, counting from 0 */
	size_t inflight;	 /* bytes of the batches tail..head-1 (note 3) */
	bool done;		 /* the caller hands over no more batches */
	bool stop;		 /* the result is abandoned: render nothing more */
	int rc;			 /* the thread's first error, with err */
	struct dfs_err err;
};

static int render_id_name(const bson_t *doc, struct dfs_buf *out, struct dfs_err *err)
{
	bson_iter_t it;
	int rc;

	if (!bson_iter_init_find(&it, doc, "_id"))
		return dfs_err_set(err, DFS_EINVAL, "format=ids needs _id in the results");
	if ((rc = store_name_from_id(bson_iter_value(&it), out, err)))
		return rc;
	dfs_buf_puts(out, ".json\n");
	return 0;
}

/* Appends document number i of the result to r in format, spilling r when it is large. */
static int render_one(struct fs_result *r, int format, const bson_t *doc, int64_t i,
		      struct dfs_err *err)
{
	int rc;

	switch (format) {
	case FSQ_JSON:
		dfs_buf_puts(&r->mem, i ? ",\n" : "\n");
		rc = store_codec_render(doc, STORE_RENDER_COMPACT, &r->mem, err);
		break;
	case FSQ_PRETTY:
		rc = store_codec_render(doc, STORE_RENDER_PRETTY, &r->mem, err);
		break;
	case FSQ_IDS:
		rc = render_id_name(doc, &r->mem, err);
		break;
	default:
		rc = store_codec_render(doc, STORE_RENDER_COMPACT, &r->mem, err);
		dfs_buf_putc(&r->mem, '\n');
		break;
	}
	return rc ? rc : fs_result_spill(r, false, err);
}

/* Appends text, the compact rendering of document number i of the result, to r as
 * render_one would (format: not FSQ_PRETTY nor FSQ_IDS). */
static int render_text(struct fs_result *r, int format, const char *text, size_t len, int64_t i,
		       struct dfs_err *err)
{
	if (format == FSQ_JSON)
		dfs_buf_puts(&r->mem, i ? ",\n" : "\n");
	dfs_buf_append(&r->mem, text, len);
	if (format != FSQ_JSON)
		dfs_buf_putc(&r->mem, '\n');
	return fs_result_spill(r, false, err);
}

/* Renders the documents of batch b. */
static int render_batch(struct fs_render *p, const struct batch *b, struct dfs_err *err)
{
	const uint8_t *at = (const uint8_t *)b->bson.data, *end = at + b->bson.len;
	int64_t i = b->first;
	int rc;

	while (at < end) {
		uint32_t len;
		bson_t doc;

		memcpy(&len, at, sizeof(len));
		len = BSON_UINT32_FROM_LE(len);
		if (!bson_init_static(&doc, at, len))
			return dfs_err_set(err, DFS_EIO, "a result document is corrupt");
		if ((rc = render_one(p->r, p->format, &doc, i++, err)))
			return rc;
		at += len;
	}
	return 0;
}

static void *render_main(void *arg)
{
	struct fs_render *p = arg;
	struct dfs_err err = {0};
	int rc = 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (p->tail == p->head && !p->done)
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->tail == p->head || p->stop)
			break;
		pthread_mutex_unlock(&p->lock);
		rc = render_batch(p, &p->ring[p->tail % RING], &err);
		pthread_mutex_lock(&p->lock);
		p->inflight -= p->ring[p->tail % RING].bson.len;
		if (rc) {
			p->rc = rc;
			p->err = err;
			pthread_cond_broadcast(&p->cond);
			break;
		}
		p->tail++;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int fs_render_new(struct fs_result *r, int format, struct fs_render **out, struct dfs_err *err)
{
	struct fs_render *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory for a result");
	p->r = r;
	p->format = format;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	for (int i = 0; i < RING; i++)
		dfs_buf_init(&p->ring[i].bson);
	dfs_buf_init(&p->text);
	if (format == FSQ_JSON)
		dfs_buf_putc(&r->mem, '[');
	*out = p;
	return 0;
}

/* Hands the batch being filled to the thread and waits for a free one (note 2). */
static int hand_over(struct fs_render *p, struct dfs_err *err)
{
	int rc;

	pthread_mutex_lock(&p->lock);
	p->inflight += p->ring[p->head % RING].bson.len;
	p->head++;
	pthread_cond_broadcast(&p->cond);
	while ((p->head - p->tail == RING || (p->inflight > INFLIGHT_MAX && p->tail != p->head)) &&
	       !p->rc)
		pthread_cond_wait(&p->cond, &p->lock);
	rc = p->rc;
	if (rc)
		*err = p->err;
	pthread_mutex_unlock(&p->lock);
	if (!rc) {
		struct batch *b = &p->ring[p->head % RING];

		if (b->bson.cap > BATCH_KEEP) {
			dfs_buf_release(&b->bson);
			dfs_buf_init(&b->bson);
		}
		dfs_buf_reset(&b->bson);
		b->first = p->n;
	}
	return rc;
}

int fs_render_put(struct fs_render *p, const bson_t *doc, struct dfs_err *err)
{
	struct batch *b;
	int rc;

	if (!p->threaded) {
		if ((rc = render_one(p->r, p->format, doc, p->n, err)))
			return rc;
		p->n++;
		if (++p->rendered == RENDER_INLINE) {
			p->ring[0].first = p->n;
			/* Without a thread the caller goes on rendering itself. */
			p->threaded = fs_thread_create(&p->th, NULL, render_main, p) == 0;
		}
		return 0;
	}
	b = &p->ring[p->head % RING];
	dfs_buf_append(&b->bson, bson_get_data(doc), doc->len);
	p->n++;
	return b->bson.len >= BATCH_BYTES ? hand_over(p, err) : 0;
}

int fs_render_put_fetched(struct fs_render *p, struct query_cursor *c, const bson_t *doc,
			  struct dfs_err *err)
{
	const char *text;
	size_t len;
	int rc;

	/* Once the thread owns r, documents keep their order by going through it. */
	if (p->threaded || p->format == FSQ_PRETTY || p->format == FSQ_IDS ||
	    !query_cursor_text(c, &text, &len))
		return fs_render_put(p, doc, err);
	if (!text) {
		dfs_buf_reset(&p->text);
		if ((rc = store_codec_render(doc, STORE_RENDER_COMPACT, &p->text, err)))
			return rc;
		query_cursor_keep_text(c, p->text.data, p->text.len);
		text = p->text.data;
		len = p->text.len;
	}
	return render_text(p->r, p->format, text, len, p->n++, err);
}

/* Stops the thread once it has rendered what was handed over (or at once, with stop);
 * returns its error. */
static int render_join(struct fs_render *p, bool stop, struct dfs_err *err)
{
	int rc;

	if (!p->threaded)
		return 0;
	pthread_mutex_lock(&p->lock);
	p->done = true;
	p->stop = stop;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->th, NULL);
	p->threaded = false;
	rc = p->rc;
	if (rc && err)
		*err = p->err;
	return rc;
}

int fs_render_drain(struct fs_render *p, struct dfs_err *err)
{
	if (p->threaded && p->ring[p->head % RING].bson.len) {
		pthread_mutex_lock(&p->lock);
		p->inflight += p->ring[p->head % RING].bson.len;
		p->head++;
		pthread_mutex_unlock(&p->lock);
	}
	return render_join(p, false, err);
}

int fs_render_finish(struct fs_render *p, struct dfs_err *err)
{
	int rc;

	if ((rc = fs_render_drain(p, err)))
		return rc;
	if (p->format == FSQ_JSON)
		dfs_buf_puts(&p->r->mem, p->n ? "\n]\n" : "]\n");
	return fs_result_finish(p->r, err);
}

void fs_render_free(struct fs_render *p)
{
	if (!p)
		return;
	render_join(p, true, NULL);
	for (int i = 0; i < RING; i++)
		dfs_buf_release(&p->ring[i].bson);
	dfs_buf_release(&p->text);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
