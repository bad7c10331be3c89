/*
 * changes.c - the `.changes` files (of a collection, a database and the whole mount) and
 * `docfs watch`: change events read from the store's events (store/changes.c), as JSON
 * Lines. fsops.c does the FUSE plumbing; this file knows nothing of FUSE.
 *
 * Design notes
 * 1. A plain `<db>/.changes` or `<db>/<coll>/.changes` is a file whose bytes are the
 *    stream's lines at their offsets (store/changes.c note 2): its size is the stream's end,
 *    it only grows, and any offset can be read, so `tail -f` (which polls the size on
 *    FUSE) and `tail -n` (which seeks back from the end) work. `cat` reads what is there
 *    and ends.
 * 2. A name with options (`.changes?resumeAfter=..&follow=1`) and `/.changes` are streams:
 *    each open has its own position per database and renders events as the reader asks,
 *    sequentially. Without follow=1 a stream ends at the newest event when it was opened;
 *    with it a read waits (polling every 100 ms) until there is an event, or the reader is
 *    interrupted. A collection's stream ends after its invalidate.
 * 3. A follow=1 stream with no resume option starts at the newest event, as watch() does;
 *    without follow=1 a stream starts at the oldest event kept.
 * 4. fullDocument=updateLookup reads the document as it is when the event is read, as
 *    MongoDB's does ("some time after the change"); null when it is gone. Post-images
 *    (whenAvailable, required) are not recorded, and are refused.
 * 5. A store-wide stream that follows (the wire's allChangesForCluster, which a replica
 *    set's secondaries tail) looks for new databases whenever it has nothing to give: a
 *    database made after the open is added with all of its events, which all come after
 *    the open.
 * 6. startAtOperationTime at or before the oldest event a database still keeps, after
 *    some were trimmed, may skip trimmed events: ChangeStreamHistoryLost, as MongoDB
 *    answers a time older than its oplog (a secondary must not think itself in sync).
 *    So does a reader whose position was trimmed while it read (a slow follower).
 */
#include "fs_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "query.h"

#define BATCH 256	/* events read from a database at a time */
#define POLL_NS 100000000L /* follow=1: how often a waiting read looks again */

/* ---- plain stream files (note 1) ----------------------------------------------------- */

/* The collection name of coll into out ("" for coll 0, the database's stream). */
static int coll_name(struct store_txn *t, int64_t coll, char *out, size_t cap, struct dfs_err *err)
{
	struct store_coll c;
	int rc;

	*out = '\0';
	if (!coll)
		return 0;
	if ((rc = store_coll_by_id(t, coll, &c, err)))
		return rc;
	snprintf(out, cap, "%s", c.name);
	return 0;
}

int fs_changes_size(struct store_db *db, int64_t coll, int64_t *size, struct dfs_err *err)
{
	char name[DFS_MAX_NS_NAME + 1];
	struct store_events_span sp;
	struct store_txn *t;
	int rc;

	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	rc = coll_name(t, coll, name, sizeof(name), err);
	if (!rc)
		rc = store_events_span(t, coll ? name : NULL, &sp, err);
	store_txn_abort(t);
	if (!rc)
		*size = sp.end;
	return rc;
}

struct pread_ctx {
	int64_t off, end; /* the bytes wanted */
	struct dfs_buf *out;
};

static int pread_line(void *ctx, const struct store_event *e)
{
	struct pread_ctx *p = ctx;
	int64_t from = p->off > e->off ? p->off : e->off;
	int64_t to = e->off + (int64_t)e->len < p->end ? e->off + (int64_t)e->len : p->end;

	if (e->off >= p->end)
		return 1;
	/* A gap before this line (store/changes.c note 5) reads as blanks. */
	while (p->off < e->off && p->off < p->end) {
		dfs_buf_putc(p->out, ' ');
		p->off++;
	}
	if (to > from && e->hidden) {
		/* An event of a document its reader may not read keeps its place, as blanks
		 * ending in a newline, like trimmed history. */
		for (int64_t i = from; i < to; i++)
			dfs_buf_putc(p->out, i == e->off + (int64_t)e->len - 1 ? '\n' : ' ');
		p->off = to;
	} else if (to > from) {
		dfs_buf_append(p->out, e->line + (from - e->off), (size_t)(to - from));
		p->off = to;
	}
	return p->off >= p->end ? 1 : 0;
}

int fs_changes_pread(struct store_db *db, int64_t coll, int64_t off, size_t size,
		     struct dfs_buf *out, struct dfs_err *err)
{
	char name[DFS_MAX_NS_NAME + 1];
	struct store_events_span sp;
	struct pread_ctx p;
	struct store_txn *t;
	int rc;

	dfs_buf_reset(out);
	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	if ((rc = coll_name(t, coll, name, sizeof(name), err)) ||
	    (rc = store_events_span(t, coll ? name : NULL, &sp, err)))
		goto done;
	p.off = off;
	p.end = off + (int64_t)size < sp.end ? off + (int64_t)size : sp.end;
	p.out = out;
	/* Trimmed history reads as spaces ending in a newline (store/changes.c note 2). */
	while (p.off < sp.start && p.off < p.end) {
		dfs_buf_putc(out, p.off == sp.start - 1 ? '\n' : ' ');
		p.off++;
	}
	if (p.off < p.end)
		rc = store_events_from(t, coll ? name : NULL, p.off, pread_line, &p, err);
done:
	store_txn_abort(t);
	return rc;
}

/* ---- streams (note 2) ---------------------------------------------------------------- */

struct pending {
	int64_t seq;
	uint64_t ts;
	int op;
	char *coll; /* Owned, or NULL */
	char *line; /* Owned */
	size_t len;
	bool hidden; /* about a document the reader may not read: given out as nothing */
};

struct source {
	struct store_db *db;	 /* Borrowed: lives with the store */
	int64_t after;		 /* the last seq read */
	int64_t upto;		 /* without follow: the newest seq at open (else 0) */
	uint64_t after_ts;	 /* events at or before this clusterTime are skipped (0: none) */
	uint64_t last_ts;	 /* the clusterTime of the event at after (0: not read here) */
	struct pending q[BATCH]; /* read, not yet given out */
	size_t qn, qi;		 /* q[qi..qn) are waiting */
	bool exhausted;		 /* without follow: nothing after upto */
};

struct fs_changes {
	char coll[DFS_MAX_NS_NAME + 1]; /* the collection watched, "" for a database or all */
	bool follow;			/* note 2 */
	bool lookup;			/* fullDocument=updateLookup (note 4) */
	uint64_t start_ts;		/* startAtOperationTime (0: none) */
	struct query_expr *match;	/* Owned: filter= and pipeline= $match, or NULL */
	bool ended;			/* an invalidate was given out */
	struct source *src;		/* Owned: one per database */
	size_t nsrc;
	struct store *store; /* Borrowed: a store-wide follow=1 stream's store, whose databases
			      * made after the open are added as they appear (note 5) */
};

static void source_clear(struct source *s)
{
	for (size_t i = s->qi; i < s->qn; i++) {
		free(s->q[i].coll);
		free(s->q[i].line);
	}
	s->qi = s->qn = 0;
}

void fs_changes_free(struct fs_changes *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nsrc; i++)
		source_clear(&c->src[i]);
	free(c->src);
	query_expr_free(c->match);
	free(c);
}

struct fill_ctx {
	struct source *s;
};

static int fill_one(void *ctx, const struct store_event *e)
{
	struct source *s = ((struct fill_ctx *)ctx)->s;
	struct pending *p;

	if (s->upto && e->seq > s->upto)
		return 1;
	p = &s->q[s->qn++];
	p->seq = e->seq;
	p->ts = e->ts;
	p->op = e->op;
	p->coll = e->coll ? strdup(e->coll) : NULL;
	p->line = malloc(e->len);
	if (!p->line || (e->coll && !p->coll))
		abort();
	memcpy(p->line, e->line, e->len);
	p->len = e->len;
	p->hidden = e->hidden;
	return s->qn == BATCH ? 1 : 0;
}

/* Reads the next events of s when it has none waiting. */
static int source_fill(struct fs_changes *c, struct source *s, struct dfs_err *err)
{
	struct fill_ctx f = {s};
	struct store_txn *t;
	int rc;

	if (s->qi < s->qn || s->exhausted)
		return 0;
	s->qi = s->qn = 0;
	if ((rc = store_txn_begin(s->db, false, &t, err)))
		return rc;
	if (s->after > 0 && !c->coll[0]) {
		/* a database's or the store's reader overtaken by trimming must not skip the
		 * trimmed events unawares (a replica set's secondary would think itself in
		 * sync): note 6. (A collection's reader is not told: the database's cut does
		 * not say whether events of its collection were trimmed.) */
		struct store_events_span sp;

		rc = store_events_span(t, NULL, &sp, err);
		if (!rc && s->after < sp.cut)
			rc = dfs_err_set(err, DFS_EINVAL,
					 "the stream's position in database '%s' was trimmed "
					 "before it was read (ChangeStreamHistoryLost, code 286)",
					 store_db_name(s->db));
	}
	if (!rc)
		rc = store_events_list(t, c->coll[0] ? c->coll : NULL, s->after, fill_one, &f, err);
	store_txn_abort(t);
	if (!rc && s->qn == 0 && !c->follow)
		s->exhausted = true;
	return rc;
}

static int parse_ts(const char *what, const struct dfs_buf *v, uint64_t *out, struct dfs_err *err)
{
	const char *s = v->data ? v->data : "";
	unsigned long long secs = 0, inc = 0;
	char *end;

	if (*s == '{') {
		bson_t d;
		bson_iter_t it;
		uint32_t ts, i;

		bson_init(&d);
		if (fs_path_doc_opt(what, v, &d, err)) {
			bson_destroy(&d);
			return DFS_EINVAL;
		}
		if (!bson_iter_init(&it, &d) || !bson_iter_next(&it) ||
		    bson_iter_type(&it) != BSON_TYPE_TIMESTAMP) {
			bson_destroy(&d);
			return dfs_err_set(err, DFS_EINVAL, "%s needs a Timestamp", what);
		}
		bson_iter_timestamp(&it, &ts, &i);
		bson_destroy(&d);
		*out = (uint64_t)ts << 32 | i;
		return 0;
	}
	errno = 0;
	secs = strtoull(s, &end, 10);
	if (*end == '.' || *end == ',')
		inc = strtoull(end + 1, &end, 10);
	if (!*s || *end || errno || secs > UINT32_MAX || inc > UINT32_MAX)
		return dfs_err_set(err, DFS_EINVAL,
				   "%s needs seconds[.increment] or {\"$timestamp\": {\"t\": .., "
				   "\"i\": ..}}, not '%s'",
				   what, s);
	*out = (uint64_t)secs << 32 | inc;
	return 0;
}

/* The hex of a token given as hex or as {"_data": hex}. */
static int token_opt(const char *what, const struct dfs_buf *v, char *out, struct dfs_err *err)
{
	const char *s = v->data ? v->data : "";

	if (*s == '{') {
		bson_t d;
		bson_iter_t it;
		int rc = 0;

		bson_init(&d);
		if (fs_path_doc_opt(what, v, &d, err))
			rc = DFS_EINVAL;
		else if (!bson_iter_init_find(&it, &d, "_data") ||
			 bson_iter_type(&it) != BSON_TYPE_UTF8)
			rc = dfs_err_set(err, DFS_EINVAL,
					 "%s: the token's _data must be a string (code 40647)", what);
		else
			snprintf(out, STORE_TOKEN_LEN + 8, "%s", bson_iter_utf8(&it, NULL));
		bson_destroy(&d);
		return rc;
	}
	if (!*s)
		return dfs_err_set(err, DFS_EINVAL, "%s needs a resume token (an event's _id._data)",
				   what);
	snprintf(out, STORE_TOKEN_LEN + 8, "%s", s);
	return 0;
}

/* Adds filter f to the $and of the stream's match (m: the stages so far). */
static void match_add(bson_t *m, const bson_t *f, unsigned *n)
{
	char k[16];

	snprintf(k, sizeof(k), "%u", (*n)++);
	BSON_APPEND_DOCUMENT(m, k, f);
}

static int pipeline_opt(const struct dfs_buf *v, bson_t *ands, unsigned *n, struct dfs_err *err)
{
	bson_t p;
	bson_iter_t it, st;
	int rc;

	bson_init(&p);
	{
		/* A pipeline is an array: parse it as the value of a one-field document. */
		struct dfs_buf w;

		dfs_buf_init(&w);
		dfs_buf_puts(&w, "{\"p\": ");
		dfs_buf_append(&w, v->data ? v->data : "", v->len);
		dfs_buf_puts(&w, "}");
		rc = fs_path_doc_opt("pipeline", &w, &p, err);
		dfs_buf_release(&w);
	}
	if (rc)
		goto done;
	if (!bson_iter_init_find(&it, &p, "p") || bson_iter_type(&it) != BSON_TYPE_ARRAY) {
		rc = dfs_err_set(err, DFS_EINVAL, "pipeline must be an array of stages");
		goto done;
	}
	bson_iter_recurse(&it, &st);
	while (bson_iter_next(&st)) {
		bson_iter_t s;
		const uint8_t *d;
		uint32_t l;
		bson_t f;

		if (bson_iter_type(&st) != BSON_TYPE_DOCUMENT || !bson_iter_recurse(&st, &s) ||
		    !bson_iter_next(&s) || strcmp(bson_iter_key(&s), "$match") ||
		    bson_iter_type(&s) != BSON_TYPE_DOCUMENT) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "pipeline stage %s: a change stream here takes $match stages "
					 "only",
					 bson_iter_key(&st));
			goto done;
		}
		bson_iter_document(&s, &l, &d);
		if (bson_init_static(&f, d, l))
			match_add(ands, &f, n);
	}
done:
	bson_destroy(&p);
	return rc;
}

/* Looks the event's resume token up: the event at seq must be there (resumeAfter cannot
 * pass an invalidate). */
struct find_ctx {
	int64_t seq;
	int op; /* 0: not found */
};

static int find_seq(void *ctx, const struct store_event *e)
{
	struct find_ctx *f = ctx;

	if (e->seq == f->seq)
		f->op = e->op;
	return 1;
}

/* Places every source at the resume token hex (after its event; startAfter may pass an
 * invalidate). */
static int resume_at(struct fs_changes *c, const char *hex, bool start_after, struct dfs_err *err)
{
	uint32_t dbnum;
	uint64_t ts;
	int64_t seq;
	bool found = false;
	int rc;

	if ((rc = store_event_token_parse(hex, &dbnum, &ts, &seq, err)))
		return rc;
	for (size_t i = 0; i < c->nsrc; i++) {
		struct source *s = &c->src[i];
		struct store_events_span sp;
		struct find_ctx f = {seq, 0};
		struct store_txn *t;

		if (store_db_number(s->db) != dbnum) {
			s->after_ts = ts; /* another database: what came after that time */
			continue;
		}
		found = true;
		if ((rc = store_txn_begin(s->db, false, &t, err)))
			return rc;
		rc = store_events_span(t, c->coll[0] ? c->coll : NULL, &sp, err);
		if (!rc && seq < sp.cut)
			rc = dfs_err_set(err, DFS_EINVAL,
					 "Resume of change stream was not possible, as the resume "
					 "point may no longer be in the oplog "
					 "(ChangeStreamHistoryLost, code 286)");
		if (!rc)
			rc = store_events_list(t, c->coll[0] ? c->coll : NULL, seq - 1, find_seq, &f,
					       err);
		store_txn_abort(t);
		if (rc)
			return rc;
		if (f.op == STORE_EV_INVALIDATE && !start_after)
			return dfs_err_set(err, DFS_EINVAL,
					   "resumeAfter cannot resume from an invalidate event; use "
					   "startAfter (code 260)");
		s->after = seq;
	}
	if (!found)
		return dfs_err_set(err, DFS_EINVAL,
				   "resume token '%s' is not from %s (InvalidResumeToken, code 260)",
				   hex, c->nsrc == 1 ? "this database" : "a database of this mount");
	return 0;
}

struct first_ts {
	uint64_t ts; /* the clusterTime of the oldest event kept (0: none) */
};

static int first_kept(void *ctx, const struct store_event *e)
{
	((struct first_ts *)ctx)->ts = e->ts;
	return 1;
}

static int add_source(struct fs_changes *c, struct store_db *db, struct dfs_err *err)
{
	struct source *n = realloc(c->src, (c->nsrc + 1) * sizeof(*n));

	(void)err;
	if (!n)
		abort();
	c->src = n;
	memset(&n[c->nsrc], 0, sizeof(n[0]));
	n[c->nsrc].db = db;
	c->nsrc++;
	return 0;
}

struct dbs_ctx {
	struct fs_changes *c;
	struct store *s;
	struct dfs_err *err;
};

static int add_db(void *ctx, const char *name)
{
	struct dbs_ctx *d = ctx;
	struct store_db *db;

	if (store_db_get(d->s, name, false, &db, NULL))
		return 0; /* dropped meanwhile */
	for (size_t i = 0; i < d->c->nsrc; i++)
		if (d->c->src[i].db == db)
			return 0; /* a source already (note 5) */
	return add_source(d->c, db, d->err);
}

int fs_changes_open(struct store *s, struct store_db *db, const char *coll, const char *opts,
		    struct fs_changes **out, struct dfs_err *err)
{
	struct fs_changes *c = calloc(1, sizeof(*c));
	struct dfs_buf k, v;
	char token[STORE_TOKEN_LEN + 8] = "";
	bool start_after = false;
	int nresume = 0, rc = 0;
	bson_t ands;
	unsigned nands = 0;

	if (!c)
		abort();
	snprintf(c->coll, sizeof(c->coll), "%s", coll ? coll : "");
	dfs_buf_init(&k);
	dfs_buf_init(&v);
	bson_init(&ands);
	if (db) {
		rc = add_source(c, db, err);
	} else {
		struct dbs_ctx d = {c, s, err};

		rc = store_db_list(s, add_db, &d, err);
		c->store = s;
	}
	for (const char *p = opts ? opts : ""; !rc && *p;) {
		const char *amp = fs_path_split(p, "&"), *eq;
		size_t n = amp ? (size_t)(amp - p) : strlen(p);

		eq = memchr(p, '=', n);
		if (!eq) {
			rc = fs_path_unescape(p, n, &k, err);
			dfs_buf_reset(&v);
		} else {
			rc = fs_path_unescape(p, (size_t)(eq - p), &k, err);
			if (!rc)
				rc = fs_path_unescape(eq + 1, n - (size_t)(eq - p) - 1, &v, err);
		}
		p += n + (amp ? 1 : 0);
		if (rc || !k.len)
			continue;
		if (!strcmp(k.data, "follow")) {
			rc = fs_path_bool_opt("follow", &v, &c->follow, err);
		} else if (!strcmp(k.data, "resumeAfter") || !strcmp(k.data, "startAfter")) {
			start_after = k.data[0] == 's';
			nresume++;
			rc = token_opt(k.data, &v, token, err);
		} else if (!strcmp(k.data, "startAtOperationTime")) {
			nresume++;
			rc = parse_ts("startAtOperationTime", &v, &c->start_ts, err);
		} else if (!strcmp(k.data, "fullDocument")) {
			const char *s2 = v.data ? v.data : "";

			if (!strcmp(s2, "updateLookup"))
				c->lookup = true;
			else if (!strcmp(s2, "whenAvailable") || !strcmp(s2, "required"))
				rc = dfs_err_set(err, DFS_EINVAL,
						 "fullDocument=%s needs post-images "
						 "(changeStreamPreAndPostImages), which docfs does not "
						 "record; use updateLookup",
						 s2);
			else if (strcmp(s2, "default"))
				rc = dfs_err_set(err, DFS_EINVAL,
						 "fullDocument must be default, updateLookup, "
						 "whenAvailable or required, not '%s'",
						 s2);
		} else if (!strcmp(k.data, "filter")) {
			bson_t f;

			bson_init(&f);
			rc = fs_path_doc_opt("filter", &v, &f, err);
			if (!rc)
				match_add(&ands, &f, &nands);
			bson_destroy(&f);
		} else if (!strcmp(k.data, "pipeline")) {
			rc = pipeline_opt(&v, &ands, &nands, err);
		} else {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "unknown change stream option '%s' (follow, resumeAfter, "
					 "startAfter, startAtOperationTime, fullDocument, filter, "
					 "pipeline)",
					 k.data);
		}
	}
	if (!rc && nresume > 1)
		rc = dfs_err_set(err, DFS_EINVAL,
				 "only one of resumeAfter, startAfter and startAtOperationTime may be "
				 "given");
	if (!rc && nands) {
		bson_t f;
		bson_t arr;

		bson_init(&f);
		bson_append_array_begin(&f, "$and", 4, &arr);
		bson_concat(&arr, &ands);
		bson_append_array_end(&f, &arr);
		rc = query_filter_parse(&f, &c->match, err);
		if (!rc && query_filter_has_text(c->match)) /* it has no text index to answer */
			rc = dfs_err_set(err, DFS_EINVAL, "$text is not allowed in this context");
		if (rc)
			dfs_err_prefix(err, "change stream filter: ");
		bson_destroy(&f);
	}
	if (!rc && token[0])
		rc = resume_at(c, token, start_after, err);
	/* Where each source starts and (without follow) ends (note 3). */
	for (size_t i = 0; !rc && i < c->nsrc; i++) {
		struct source *src = &c->src[i];
		struct store_events_span sp;
		struct store_txn *t;

		if ((rc = store_txn_begin(src->db, false, &t, err)))
			break;
		rc = store_events_span(t, NULL, &sp, err);
		if (!rc && c->start_ts && sp.cut > 0) { /* note 6 */
			struct first_ts ft = {0};

			rc = store_events_list(t, NULL, sp.cut, first_kept, &ft, err);
			if (!rc && (!ft.ts || c->start_ts <= ft.ts))
				rc = dfs_err_set(err, DFS_EINVAL,
						 "startAtOperationTime is older than the oldest "
						 "event database '%s' keeps "
						 "(ChangeStreamHistoryLost, code 286)",
						 store_db_name(src->db));
		}
		store_txn_abort(t);
		if (rc)
			break;
		if (c->follow && !token[0] && !c->start_ts)
			src->after = sp.last_seq;
		if (!c->follow)
			src->upto = sp.last_seq;
		if (!c->follow && src->after >= sp.last_seq)
			src->exhausted = true;
	}
	dfs_buf_release(&k);
	dfs_buf_release(&v);
	bson_destroy(&ands);
	if (rc) {
		fs_changes_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* The source whose waiting event comes first (clusterTime, then database, then seq), or
 * NULL when none has one now. */
static struct source *first_source(struct fs_changes *c)
{
	struct source *best = NULL;

	for (size_t i = 0; i < c->nsrc; i++) {
		struct source *s = &c->src[i];
		const struct pending *p, *b;

		if (s->qi >= s->qn)
			continue;
		p = &s->q[s->qi];
		if (!best) {
			best = s;
			continue;
		}
		b = &best->q[best->qi];
		if (p->ts < b->ts ||
		    (p->ts == b->ts && store_db_number(s->db) < store_db_number(best->db)))
			best = s;
	}
	return best;
}

/* Appends p's line to out as the options shape it, or nothing when filtered out. */
static int emit(struct fs_changes *c, struct source *s, const struct pending *p,
		struct dfs_buf *out, struct dfs_err *err)
{
	bson_t ev;
	int rc;

	if (!c->match && !(c->lookup && p->op == STORE_EV_UPDATE)) {
		dfs_buf_append(out, p->line, p->len);
		return 0;
	}
	bson_init(&ev);
	if ((rc = store_codec_parse_doc(p->line, p->len, &ev, err)))
		goto done;
	if (c->lookup && p->op == STORE_EV_UPDATE) {
		/* note 4: the document as it is now, or null. */
		struct store_txn *t;
		struct store_coll coll;
		struct store_entry e;
		bson_iter_t it, id;
		bson_t doc, with;
		bool have = false;

		if ((rc = store_txn_begin(s->db, false, &t, err)))
			goto done;
		if (p->coll && store_coll_find(t, p->coll, &coll, NULL) == 0 &&
		    bson_iter_init_find(&it, &ev, "documentKey") && bson_iter_recurse(&it, &id) &&
		    bson_iter_find(&id, "_id") &&
		    store_doc_find_id(t, coll.id, bson_iter_value(&id), &e, NULL) == 0 &&
		    store_txn_allows(t, e.mode, e.uid, e.gid) &&
		    store_doc_get(t, e.id, &doc, NULL) == 0)
			have = true;
		store_txn_abort(t);
		bson_init(&with);
		bson_copy_to_excluding_noinit(&ev, &with, "fullDocument", NULL);
		if (have) {
			BSON_APPEND_DOCUMENT(&with, "fullDocument", &doc);
			bson_destroy(&doc);
		} else {
			BSON_APPEND_NULL(&with, "fullDocument");
		}
		bson_destroy(&ev);
		ev = with;
	}
	if (c->match && !query_filter_match(c->match, &ev, NULL))
		goto done;
	if ((rc = store_codec_render(&ev, STORE_RENDER_COMPACT, out, err)))
		goto done;
	dfs_buf_putc(out, '\n');
done:
	bson_destroy(&ev);
	return rc;
}

bool fs_changes_token(const struct fs_changes *c, char out[STORE_TOKEN_LEN + 1])
{
	if (c->nsrc != 1)
		return false;
	store_event_token(store_db_number(c->src[0].db), c->src[0].last_ts, c->src[0].after, out);
	return true;
}

int fs_changes_next(struct fs_changes *c, size_t want, struct dfs_buf *out,
		    bool (*stop)(void *ctx), void *ctx, struct dfs_err *err)
{
	size_t start = out->len;
	int rc;

	while (!c->ended && out->len - start < want) {
		struct source *s;
		struct pending *p;

		for (size_t i = 0; i < c->nsrc; i++)
			if ((rc = source_fill(c, &c->src[i], err)))
				return rc;
		s = first_source(c);
		if (!s) {
			struct timespec ts = {0, POLL_NS};

			if (!c->follow || out->len > start)
				break; /* the end (or what there is, to the waiting reader) */
			if (stop && stop(ctx))
				return dfs_err_set(err, DFS_EINTR, "change stream read interrupted");
			nanosleep(&ts, NULL);
			if (c->store) { /* note 5 */
				struct dbs_ctx d = {c, c->store, err};

				if ((rc = store_db_list(c->store, add_db, &d, err)))
					return rc;
			}
			continue;
		}
		p = &s->q[s->qi++];
		s->after = p->seq;
		s->last_ts = p->ts;
		rc = 0;
		if (!p->hidden && (!s->after_ts || p->ts > s->after_ts) &&
		    (!c->start_ts || p->ts >= c->start_ts)) {
			if (p->op == STORE_EV_INVALIDATE) {
				dfs_buf_append(out, p->line, p->len);
				c->ended = c->coll[0] != '\0';
			} else {
				rc = emit(c, s, p, out, err);
			}
		}
		free(p->coll);
		free(p->line);
		p->coll = p->line = NULL;
		if (rc)
			return rc;
	}
	return 0;
}
