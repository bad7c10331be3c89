/*
 * exec.c - runs a find as a chain of stages over one read transaction: COLLSCAN (with the
 * filter applied as it scans, as MongoDB does), SORT, SKIP, LIMIT and PROJECTION. It does
 * not choose plans (there are no secondary indexes yet) and does not render results.
 *
 * Design notes
 * 1. Without a sort, results stream: each call pulls documents from the store cursor until
 *    one matches. Memory is one document.
 * 2. SORT collects (sort key, document) records in an arena. Past SORT_BUDGET bytes the
 *    arena is sorted and written to a temporary file as a run; at the end the runs are merged
 *    (k-way, by memcmp of keys). With a limit, only skip+limit records can be returned, so
 *    the arena is cut back to them whenever it doubles: a top-k in bounded memory.
 * 3. Sort keys end with the _id encoding, so they are unique and the order is total: ties
 *    on the sort fields come out in _id order.
 */
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SORT_BUDGET (32u * 1024 * 1024)

struct rec {
	size_t off;    /* offset of the record in the arena */
	uint32_t klen; /* key length; the key starts at off + 8 */
	uint32_t dlen; /* document length; it follows the key */
};

struct run {
	FILE *f;	     /* Owned: a temporary file of records (klen, dlen, key, doc) */
	struct dfs_buf cur;  /* the current record's key then document */
	uint32_t klen, dlen; /* of the current record */
	bool live;	     /* cur holds a record */
};

struct query_cursor {
	struct store_cursor *sc;   /* Owned: the scan */
	struct query_expr *filter; /* Owned, or NULL */
	struct query_proj *proj;   /* Owned, or NULL */
	struct query_sort *sort;   /* Owned, or NULL */
	int64_t skip, limit;	   /* remaining to skip; limit (0: none) */
	int64_t returned;	   /* results returned so far */
	bson_t *out;		   /* Owned: the current result (projection output or a copy);
				    * a pointer because bson_t wants 128-byte alignment */
	/* sorting */
	bool sorted;	      /* the sort input has been consumed */
	struct dfs_buf arena; /* records */
	struct rec *recs;     /* Owned: records of the arena */
	size_t nrecs, caprecs;
	size_t next_rec;  /* next record to return from memory */
	struct run *runs; /* Owned: spilled runs */
	size_t nruns;
	struct dfs_buf key; /* scratch for sort keys */
	size_t sort_mem;    /* spill past this many bytes of records */
	int elem_index;	    /* of the current document, for positional projection */
};

static int parse_opt(const bson_t *spec, int (*parse)(const bson_t *, void **, struct dfs_err *),
		     void **out, struct dfs_err *err)
{
	if (!spec)
		return 0;
	return parse(spec, out, err);
}

static int filter_parse(const bson_t *b, void **out, struct dfs_err *err)
{
	return query_filter_parse(b, (struct query_expr **)out, err);
}

static int proj_parse(const bson_t *b, void **out, struct dfs_err *err)
{
	return query_proj_parse(b, (struct query_proj **)out, err);
}

static int sort_parse(const bson_t *b, void **out, struct dfs_err *err)
{
	return query_sort_parse(b, (struct query_sort **)out, err);
}

int query_find_open(struct store_txn *t, int64_t coll, const struct query_find_opts *o,
		    struct query_cursor **out, struct dfs_err *err)
{
	struct query_cursor *c;
	void *p;
	int rc;

	if (o->skip < 0)
		return dfs_err_set(err, DFS_EINVAL, "skip must not be negative");
	if (o->limit < 0)
		return dfs_err_set(err, DFS_EINVAL, "limit must not be negative");
	c = calloc(1, sizeof(*c));
	if (!c)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	c->skip = o->skip;
	c->limit = o->limit;
	c->elem_index = -1;
	c->sort_mem = o->sort_mem ? o->sort_mem : SORT_BUDGET;
	dfs_buf_init(&c->arena);
	dfs_buf_init(&c->key);
	p = NULL;
	if ((rc = parse_opt(o->filter, filter_parse, &p, err)))
		goto fail;
	c->filter = p;
	p = NULL;
	if ((rc = parse_opt(o->projection, proj_parse, &p, err)))
		goto fail;
	c->proj = p;
	p = NULL;
	if ((rc = parse_opt(o->sort, sort_parse, &p, err)))
		goto fail;
	c->sort = p;
	if ((rc = store_cursor_open(t, coll, &c->sc, err)))
		goto fail;
	*out = c;
	return 0;
fail:
	query_cursor_free(c);
	return rc;
}

static void runs_free(struct query_cursor *c)
{
	for (size_t i = 0; i < c->nruns; i++) {
		if (c->runs[i].f)
			fclose(c->runs[i].f);
		dfs_buf_release(&c->runs[i].cur);
	}
	free(c->runs);
	c->runs = NULL;
	c->nruns = 0;
}

void query_cursor_free(struct query_cursor *c)
{
	if (!c)
		return;
	store_cursor_free(c->sc);
	query_expr_free(c->filter);
	query_proj_free(c->proj);
	query_sort_free(c->sort);
	bson_destroy(c->out);
	dfs_buf_release(&c->arena);
	dfs_buf_release(&c->key);
	free(c->recs);
	runs_free(c);
	free(c);
}

/* The next document of the scan that matches the filter (note 1). */
static int scan_next(struct query_cursor *c, bson_t *doc, struct dfs_err *err)
{
	int64_t id;
	int rc;

	for (;;) {
		if ((rc = store_cursor_next(c->sc, doc, &id, err)))
			return rc;
		c->elem_index = -1;
		if (!c->filter || query_filter_match(c->filter, doc, &c->elem_index))
			return 0;
	}
}

static const char *rec_key(const struct query_cursor *c, const struct rec *r)
{
	return c->arena.data + r->off;
}

static int rec_cmp_ctx_sort(const void *a, const void *b, void *ctx)
{
	const struct query_cursor *c = ctx;
	const struct rec *ra = a, *rb = b;
	uint32_t n = ra->klen < rb->klen ? ra->klen : rb->klen;
	int d = memcmp(rec_key(c, ra), rec_key(c, rb), n);

	if (d)
		return d;
	return ra->klen < rb->klen ? -1 : ra->klen > rb->klen;
}

static void recs_sort(struct query_cursor *c)
{
	if (c->nrecs > 1)
		qsort_r(c->recs, c->nrecs, sizeof(*c->recs), rec_cmp_ctx_sort, c);
}

/* Keeps only the first keep records (sorted), compacting the arena. */
static void recs_truncate(struct query_cursor *c, size_t keep)
{
	struct dfs_buf fresh;

	recs_sort(c);
	if (keep >= c->nrecs)
		return;
	dfs_buf_init(&fresh);
	for (size_t i = 0; i < keep; i++) {
		struct rec *r = &c->recs[i];
		size_t off = fresh.len;

		dfs_buf_append(&fresh, c->arena.data + r->off, r->klen + r->dlen);
		r->off = off;
	}
	dfs_buf_release(&c->arena);
	c->arena = fresh;
	c->nrecs = keep;
}

/* Writes the (sorted) records as a run to a temporary file (note 2). */
static int spill(struct query_cursor *c, struct dfs_err *err)
{
	struct run *r;
	FILE *f;

	recs_sort(c);
	f = tmpfile();
	if (!f)
		return dfs_err_set(err, DFS_EIO, "sort: cannot create a temporary file");
	for (size_t i = 0; i < c->nrecs; i++) {
		struct rec *rec = &c->recs[i];
		uint32_t hdr[2] = {rec->klen, rec->dlen};

		if (fwrite(hdr, sizeof(hdr), 1, f) != 1 ||
		    fwrite(c->arena.data + rec->off, 1, rec->klen + rec->dlen, f) !=
			    rec->klen + rec->dlen) {
			fclose(f);
			return dfs_err_set(err, DFS_EIO, "sort: cannot write a temporary file");
		}
	}
	if (fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return dfs_err_set(err, DFS_EIO, "sort: cannot write a temporary file");
	}
	r = realloc(c->runs, (c->nruns + 1) * sizeof(*c->runs));
	if (!r) {
		fclose(f);
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	}
	c->runs = r;
	memset(&c->runs[c->nruns], 0, sizeof(*c->runs));
	c->runs[c->nruns].f = f;
	dfs_buf_init(&c->runs[c->nruns].cur);
	c->nruns++;
	c->nrecs = 0;
	dfs_buf_reset(&c->arena);
	return 0;
}

static int run_advance(struct run *r, struct dfs_err *err)
{
	uint32_t hdr[2];

	r->live = false;
	if (fread(hdr, sizeof(hdr), 1, r->f) != 1)
		return 0;
	dfs_buf_reset(&r->cur);
	dfs_buf_reserve(&r->cur, (size_t)hdr[0] + hdr[1]);
	if (fread(r->cur.data, 1, (size_t)hdr[0] + hdr[1], r->f) != (size_t)hdr[0] + hdr[1])
		return dfs_err_set(err, DFS_EIO, "sort: a temporary file is short");
	r->cur.len = (size_t)hdr[0] + hdr[1];
	r->klen = hdr[0];
	r->dlen = hdr[1];
	r->live = true;
	return 0;
}

/* Consumes the whole filtered scan into records, spilling past the budget. */
static int sort_input(struct query_cursor *c, struct dfs_err *err)
{
	size_t keep = c->limit ? (size_t)(c->skip + c->limit) : 0;
	bson_t doc;
	int rc;

	while ((rc = scan_next(c, &doc, err)) == 0) {
		struct rec r;

		dfs_buf_reset(&c->key);
		if ((rc = query_sort_key(c->sort, &doc, &c->key, err)))
			return rc;
		if (c->nrecs == c->caprecs) {
			c->caprecs = c->caprecs ? c->caprecs * 2 : 1024;
			c->recs = realloc(c->recs, c->caprecs * sizeof(*c->recs));
			if (!c->recs)
				return dfs_err_set(err, DFS_ENOMEM, "out of memory");
		}
		r.off = c->arena.len;
		r.klen = (uint32_t)c->key.len;
		r.dlen = doc.len;
		dfs_buf_append(&c->arena, c->key.data, c->key.len);
		dfs_buf_append(&c->arena, bson_get_data(&doc), doc.len);
		c->recs[c->nrecs++] = r;
		if (keep && c->nrecs >= 2 * keep + 1024)
			recs_truncate(c, keep);
		else if (c->arena.len > c->sort_mem && (rc = spill(c, err)))
			return rc;
	}
	if (rc != DFS_ENOENT)
		return rc;
	if (c->nruns) {
		if (c->nrecs && (rc = spill(c, err)))
			return rc;
		for (size_t i = 0; i < c->nruns; i++)
			if ((rc = run_advance(&c->runs[i], err)))
				return rc;
	} else {
		recs_sort(c);
	}
	c->sorted = true;
	return 0;
}

/* The next document in sort order into doc (a view valid until the next call). */
static int sort_next(struct query_cursor *c, bson_t *doc, struct dfs_err *err)
{
	int rc;

	if (!c->sorted && (rc = sort_input(c, err)))
		return rc;
	if (!c->nruns) {
		struct rec *r;

		if (c->next_rec >= c->nrecs)
			return DFS_ENOENT;
		r = &c->recs[c->next_rec++];
		if (!bson_init_static(doc, (const uint8_t *)c->arena.data + r->off + r->klen,
				      r->dlen))
			return dfs_err_set(err, DFS_ECORRUPT, "sort: bad record");
		return 0;
	}
	/* k-way merge: the run whose current key is smallest. */
	{
		struct run *best = NULL;

		for (size_t i = 0; i < c->nruns; i++) {
			struct run *r = &c->runs[i];
			uint32_t n;
			int d;

			if (!r->live)
				continue;
			if (!best) {
				best = r;
				continue;
			}
			n = r->klen < best->klen ? r->klen : best->klen;
			d = memcmp(r->cur.data, best->cur.data, n);
			if (d < 0 || (d == 0 && r->klen < best->klen))
				best = r;
		}
		if (!best)
			return DFS_ENOENT;
		/* Move the record out before advancing the run. */
		dfs_buf_reset(&c->key);
		dfs_buf_append(&c->key, best->cur.data + best->klen, best->dlen);
		if ((rc = run_advance(best, err)))
			return rc;
		if (!bson_init_static(doc, (const uint8_t *)c->key.data, c->key.len))
			return dfs_err_set(err, DFS_ECORRUPT, "sort: bad record");
		return 0;
	}
}

int query_cursor_next(struct query_cursor *c, const bson_t **doc, struct dfs_err *err)
{
	bson_t cur;
	int rc;

	for (;;) {
		if (c->limit && c->returned >= c->limit)
			return DFS_ENOENT;
		rc = c->sort ? sort_next(c, &cur, err) : scan_next(c, &cur, err);
		if (rc)
			return rc;
		if (c->skip > 0) {
			c->skip--;
			continue;
		}
		break;
	}
	bson_destroy(c->out);
	c->out = NULL;
	if (c->proj) {
		int idx = c->elem_index;

		/* After a sort the positional index of the document is recomputed. */
		if (c->sort && c->filter)
			query_filter_match(c->filter, &cur, &idx);
		c->out = bson_new();
		if ((rc = query_proj_apply(c->proj, &cur, idx, c->out, err)))
			return rc;
	} else {
		c->out = bson_copy(&cur);
	}
	c->returned++;
	*doc = c->out;
	return 0;
}
