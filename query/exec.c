/*
 * exec.c - how a plan runs: the stages (COLLSCAN, IXSCAN, FETCH, OR, SORT, SKIP, LIMIT,
 * PROJECTION_SIMPLE / _DEFAULT / _COVERED) as MongoDB's work() model with its counters, the
 * trial that picks one of several candidate plans, and the find cursor over the winner. It
 * does not decide which plans exist (plan.c) or describe them (explain.c).
 *
 * Design notes
 *  1. Every stage does one unit of work per call and answers ADVANCED (a working member
 *     goes up), NEED_TIME (work done, nothing to return yet) or EOF. So candidates can be
 *     interleaved: the trial calls each root once per round until one is done, one has
 *     TRIAL_RESULTS results, or TRIAL_WORKS works were spent, then scores advanced/works
 *     (+ small bonuses for no SORT and no FETCH, MongoDB's tie-breakers). The winner is
 *     reset and run from the start: trial results are not kept.
 *  2. A working member's document is a view: a store cursor's or store_doc_fetch()'s
 *     buffer, the SORT arena, or a stage's own bson. It is valid until the next work() of
 *     the same plan; SORT copies what it keeps, the cursor copies what it returns.
 *  3. IXSCAN walks its byte ranges in order (reversed, each range backwards, for a backward
 *     scan). On a multikey index it remembers the ids it returned (dupsTested/dupsDropped);
 *     OR does the same across its inputs.
 *  4. SORT collects (sort key, document) records in an arena. Past the memory budget the
 *     arena is sorted and written to a temporary file as a run; at the end the runs are
 *     merged (k-way, by memcmp of keys). With limitAmount only that many records can be
 *     returned, so the arena is cut back to them whenever it doubles: a top-k in bounded
 *     memory. Sort keys end with the _id encoding, so ties come out in _id order.
 *  5. Results equal a collection scan's: FETCH re-applies the whole filter unless the plan
 *     is exact (plan.c note 1); a covered IXSCAN applies it to the document it builds.
 *  6. $text (plan.c note 7): TEXT_OR reads all its term scans first, summing each
 *     document's entry scores, then fetches the documents in entry id order, applying the
 *     rest of the filter; TEXT_MATCH checks phrases and negations. The working member
 *     carries the score up; a SORT over them keeps it after each key's _id (so ties are
 *     still broken by _id), and PROJECTION gives it to {$meta: "textScore"}. Under an OR
 *     (plan.c note 7) the documents of the other inputs have no score: PROJECTION leaves
 *     the field out and SORT sorts them as null, after every score (MongoDB's missing
 *     metadata); the FETCH above the OR reuses the documents TEXT_MATCH fetched.
 */
#include "plan_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SORT_BUDGET (32u * 1024 * 1024)
#define TRIAL_WORKS 10000
#define TRIAL_RESULTS 101

/* ---- id sets (note 3) ----------------------------------------------------------------- */

struct plan__set {
	int64_t *slot; /* open addressing; 0 is free (entry ids are >= 1) */
	size_t cap, n;
};

static bool set_add(struct plan__set **sp, int64_t id)
{
	struct plan__set *s = *sp;
	size_t i;

	if (!s) {
		s = *sp = calloc(1, sizeof(*s));
		if (!s)
			abort();
	}
	if (2 * (s->n + 1) > s->cap) {
		struct plan__set g = {calloc(s->cap ? 2 * s->cap : 64, sizeof(int64_t)),
				      s->cap ? 2 * s->cap : 64, 0};

		if (!g.slot)
			abort();
		for (i = 0; i < s->cap; i++)
			if (s->slot[i]) {
				size_t j = (uint64_t)s->slot[i] * 0x9E3779B97F4A7C15ull % g.cap;

				while (g.slot[j])
					j = (j + 1) % g.cap;
				g.slot[j] = s->slot[i];
				g.n++;
			}
		free(s->slot);
		*s = g;
	}
	i = (uint64_t)id * 0x9E3779B97F4A7C15ull % s->cap;
	while (s->slot[i]) {
		if (s->slot[i] == id)
			return false;
		i = (i + 1) % s->cap;
	}
	s->slot[i] = id;
	s->n++;
	return true;
}

static void set_free(struct plan__set *s)
{
	if (s) {
		free(s->slot);
		free(s);
	}
}

/* ---- TEXT_OR's scores (note 6) -------------------------------------------------------- */

struct tscore {
	int64_t id;
	double score;
};

struct plan__tscores {
	struct tscore *e; /* Owned: open addressing while reading (id 0 free), then sorted */
	size_t cap, n;
	bool sorted; /* the scans are done: e holds n entries in id order */
	size_t next; /* next entry to return */
};

static void tscores_add(struct plan__tscores *s, int64_t id, double score)
{
	size_t i;

	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct tscore *g = calloc(cap, sizeof(*g));

		if (!g)
			abort();
		for (i = 0; i < s->cap; i++)
			if (s->e[i].id) {
				size_t j = (uint64_t)s->e[i].id * 0x9E3779B97F4A7C15ull % cap;

				while (g[j].id)
					j = (j + 1) % cap;
				g[j] = s->e[i];
			}
		free(s->e);
		s->e = g;
		s->cap = cap;
	}
	i = (uint64_t)id * 0x9E3779B97F4A7C15ull % s->cap;
	while (s->e[i].id && s->e[i].id != id)
		i = (i + 1) % s->cap;
	if (!s->e[i].id) {
		s->e[i].id = id;
		s->n++;
	}
	s->e[i].score += score;
}

static int tscore_cmp(const void *a, const void *b)
{
	int64_t x = ((const struct tscore *)a)->id, y = ((const struct tscore *)b)->id;

	return x < y ? -1 : x > y;
}

static void tscores_sort(struct plan__tscores *s)
{
	size_t k = 0;

	for (size_t i = 0; i < s->cap; i++)
		if (s->e[i].id)
			s->e[k++] = s->e[i];
	if (k)
		qsort(s->e, k, sizeof(*s->e), tscore_cmp);
	s->n = k;
	s->sorted = true;
}

static void tscores_free(struct plan__tscores *s)
{
	if (s) {
		free(s->e);
		free(s);
	}
}

/* The "score" of a text index entry's values. */
static double entry_score(const bson_t *vals)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, vals, "score") && BSON_ITER_HOLDS_DOUBLE(&it)
		       ? bson_iter_double(&it)
		       : 0;
}

/* ---- the sort buffer (note 4) --------------------------------------------------------- */

struct rec {
	size_t off;    /* offset of the record in the arena */
	uint32_t klen; /* key length; the key starts at off */
	uint32_t dlen; /* document length; it follows the key */
};

struct run {
	FILE *f;	     /* Owned: a temporary file of records (klen, dlen, key, doc) */
	struct dfs_buf cur;  /* the current record's key then document */
	uint32_t klen, dlen; /* of the current record */
	bool live;	     /* cur holds a record */
};

struct plan__sortbuf {
	bool sorted;	      /* the input has been consumed */
	struct dfs_buf arena; /* records */
	struct rec *recs;     /* Owned: records of the arena */
	size_t nrecs, caprecs;
	size_t next_rec;  /* next record to return from memory */
	struct run *runs; /* Owned: spilled runs */
	size_t nruns;
	struct dfs_buf key; /* scratch: sort keys, the merged record */
	size_t mem;	    /* spill past this many bytes */
	size_t keep;	    /* limitAmount (0: all) */
	size_t merged;	    /* records returned from the runs */
	bool scored;	    /* each key ends with the 8 bytes of the record's text score (NaN:
			     * the document has none) */
};

static void sortbuf_free(struct plan__sortbuf *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->nruns; i++) {
		if (b->runs[i].f)
			fclose(b->runs[i].f);
		dfs_buf_release(&b->runs[i].cur);
	}
	free(b->runs);
	dfs_buf_release(&b->arena);
	dfs_buf_release(&b->key);
	free(b->recs);
	free(b);
}

static int rec_cmp(const void *a, const void *b, void *ctx)
{
	const struct plan__sortbuf *sb = ctx;
	const struct rec *ra = a, *rb = b;
	uint32_t n = ra->klen < rb->klen ? ra->klen : rb->klen;
	int d = memcmp(sb->arena.data + ra->off, sb->arena.data + rb->off, n);

	if (d)
		return d;
	return ra->klen < rb->klen ? -1 : ra->klen > rb->klen;
}

static void recs_sort(struct plan__sortbuf *b)
{
	if (b->nrecs > 1)
		qsort_r(b->recs, b->nrecs, sizeof(*b->recs), rec_cmp, b);
}

/* Keeps only the first keep records (sorted), compacting the arena. */
static void recs_truncate(struct plan__sortbuf *b, size_t keep)
{
	struct dfs_buf fresh;

	recs_sort(b);
	if (keep >= b->nrecs)
		return;
	dfs_buf_init(&fresh);
	for (size_t i = 0; i < keep; i++) {
		struct rec *r = &b->recs[i];
		size_t off = fresh.len;

		dfs_buf_append(&fresh, b->arena.data + r->off, r->klen + r->dlen);
		r->off = off;
	}
	dfs_buf_release(&b->arena);
	b->arena = fresh;
	b->nrecs = keep;
}

static int spill(struct plan__sortbuf *b, struct dfs_err *err)
{
	struct run *r;
	FILE *f;

	recs_sort(b);
	f = tmpfile();
	if (!f)
		return dfs_err_set(err, DFS_EIO, "sort: cannot create a temporary file");
	for (size_t i = 0; i < b->nrecs; i++) {
		struct rec *rec = &b->recs[i];
		uint32_t hdr[2] = {rec->klen, rec->dlen};

		if (fwrite(hdr, sizeof(hdr), 1, f) != 1 ||
		    fwrite(b->arena.data + rec->off, 1, rec->klen + rec->dlen, f) !=
			    rec->klen + rec->dlen) {
			fclose(f);
			return dfs_err_set(err, DFS_EIO, "sort: cannot write a temporary file");
		}
	}
	if (fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return dfs_err_set(err, DFS_EIO, "sort: cannot write a temporary file");
	}
	r = realloc(b->runs, (b->nruns + 1) * sizeof(*b->runs));
	if (!r) {
		fclose(f);
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	}
	b->runs = r;
	memset(&b->runs[b->nruns], 0, sizeof(*b->runs));
	b->runs[b->nruns].f = f;
	dfs_buf_init(&b->runs[b->nruns].cur);
	b->nruns++;
	b->nrecs = 0;
	dfs_buf_reset(&b->arena);
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

static int sortbuf_add(struct plan__sortbuf *b, const struct query_sort *s, const bson_t *doc,
		       double score, struct dfs_err *err)
{
	struct rec r;
	int rc;

	dfs_buf_reset(&b->key);
	if (b->scored)
		rc = query_sort_key_score(s, doc, isnan(score) ? NULL : &score, &b->key, err);
	else
		rc = query_sort_key(s, doc, &b->key, err);
	if (rc)
		return rc;
	if (b->scored) /* after the _id: no effect on the order */
		dfs_buf_append(&b->key, &score, sizeof(score));
	if (b->nrecs == b->caprecs) {
		b->caprecs = b->caprecs ? b->caprecs * 2 : 1024;
		b->recs = realloc(b->recs, b->caprecs * sizeof(*b->recs));
		if (!b->recs)
			return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	}
	r.off = b->arena.len;
	r.klen = (uint32_t)b->key.len;
	r.dlen = doc->len;
	dfs_buf_append(&b->arena, b->key.data, b->key.len);
	dfs_buf_append(&b->arena, bson_get_data(doc), doc->len);
	b->recs[b->nrecs++] = r;
	if (b->keep && b->nrecs >= 2 * b->keep + 1024)
		recs_truncate(b, b->keep);
	else if (b->arena.len > b->mem && (rc = spill(b, err)))
		return rc;
	return 0;
}

static int sortbuf_finish(struct plan__sortbuf *b, struct dfs_err *err)
{
	int rc;

	if (b->nruns) {
		if (b->nrecs && (rc = spill(b, err)))
			return rc;
		for (size_t i = 0; i < b->nruns; i++)
			if ((rc = run_advance(&b->runs[i], err)))
				return rc;
	} else if (b->keep) {
		recs_truncate(b, b->keep);
	} else {
		recs_sort(b);
	}
	b->sorted = true;
	return 0;
}

/* The next record in sort order: DFS_ENOENT at the end. *score gets its text score when
 * the buffer keeps them (NaN for a document without one). */
static int sortbuf_next(struct plan__sortbuf *b, bson_t *doc, double *score, struct dfs_err *err)
{
	struct run *best = NULL;
	int rc;

	if (!b->nruns) {
		struct rec *r;

		if (b->next_rec >= b->nrecs)
			return DFS_ENOENT;
		r = &b->recs[b->next_rec++];
		if (b->scored && r->klen >= sizeof(*score))
			memcpy(score, b->arena.data + r->off + r->klen - sizeof(*score),
			       sizeof(*score));
		if (!bson_init_static(doc, (const uint8_t *)b->arena.data + r->off + r->klen,
				      r->dlen))
			return dfs_err_set(err, DFS_ECORRUPT, "sort: bad record");
		return 0;
	}
	for (size_t i = 0; i < b->nruns; i++) {
		struct run *r = &b->runs[i];
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
	/* limitAmount holds for spilled runs too: only the in-memory arena is cut to it. */
	if (!best || (b->keep && b->merged >= b->keep))
		return DFS_ENOENT;
	b->merged++;
	if (b->scored && best->klen >= sizeof(*score))
		memcpy(score, best->cur.data + best->klen - sizeof(*score), sizeof(*score));
	dfs_buf_reset(&b->key);
	dfs_buf_append(&b->key, best->cur.data + best->klen, best->dlen);
	if ((rc = run_advance(best, err)))
		return rc;
	if (!bson_init_static(doc, (const uint8_t *)b->key.data, b->key.len))
		return dfs_err_set(err, DFS_ECORRUPT, "sort: bad record");
	return 0;
}

/* ---- stages (note 1) --------------------------------------------------------------------- */

static void wm_doc(struct plan__wm *wm, const bson_t *doc)
{
	wm->has_doc = true;
	if (!bson_init_static(&wm->doc, bson_get_data(doc), doc->len))
		wm->has_doc = false;
	wm->result = &wm->doc;
}

/* The next document of a COLLSCAN's cursor that its caller may read: the others are not
 * there for it, not even as work (store.h "callers"). */
static int scan_next(struct plan__node *n, bson_t *doc, int64_t *id, struct dfs_err *err)
{
	int rc;

	while ((rc = store_cursor_next(n->sc, doc, id, err)) == 0 && !n->sees_all &&
	       !store_cursor_allowed(n->sc))
		;
	return rc;
}

static int collscan_next(struct store_txn *t, int64_t coll, struct plan__node *n, bson_t *doc,
			 int64_t *id, struct dfs_err *err)
{
	int rc;

	if (!n->opened) {
		n->opened = true;
		if ((rc = store_txn_sees_all(t, coll, &n->sees_all, err)) ||
		    (rc = store_cursor_open(t, coll, &n->sc, err)))
			return rc;
		if (n->backward) {
			size_t cap = 0;

			while ((rc = scan_next(n, doc, id, err)) == 0) {
				if (n->nids == cap) {
					cap = cap ? 2 * cap : 256;
					n->ids = realloc(n->ids, cap * sizeof(*n->ids));
					if (!n->ids)
						return dfs_err_set(err, DFS_ENOMEM,
								   "out of memory");
				}
				n->ids[n->nids++] = *id;
			}
			if (rc != DFS_ENOENT)
				return rc;
			n->next_id = n->nids;
		}
	}
	if (!n->backward)
		return scan_next(n, doc, id, err);
	for (;;) {
		if (n->next_id == 0)
			return DFS_ENOENT;
		*id = n->ids[--n->next_id];
		rc = store_doc_fetch(t, *id, false, doc, err);
		if (rc != DFS_ENOENT)
			return rc;
	}
}

/* Appends the n values at their paths to out, nesting dotted paths: the fields that share
 * a first component go into one embedded document, at the place of the first of them. */
static void nest_values(bson_t *out, const char **path, const bson_value_t **val, int n)
{
	bool done[STORE_IX_MAX_FIELDS] = {false};

	for (int i = 0; i < n; i++) {
		const char *sub[STORE_IX_MAX_FIELDS];
		const bson_value_t *subval[STORE_IX_MAX_FIELDS];
		size_t len = strcspn(path[i], ".");
		bson_t child;
		int m = 0;

		if (done[i])
			continue;
		if (!path[i][len]) {
			bson_append_value(out, path[i], -1, val[i]);
			continue;
		}
		for (int j = i; j < n; j++)
			if (!done[j] && !strncmp(path[j], path[i], len) && path[j][len] == '.') {
				done[j] = true;
				sub[m] = path[j] + len + 1;
				subval[m++] = val[j];
			}
		bson_append_document_begin(out, path[i], (int)len, &child);
		nest_values(&child, sub, subval, m);
		bson_append_document_end(out, &child);
	}
}

/* The document a covered scan returns: the entry's values at the key pattern's paths (the
 * planner only covers indexes whose paths nest without conflict, plan.c covers()). */
static void covered_doc(struct plan__node *n, const bson_t *vals)
{
	const char *path[STORE_IX_MAX_FIELDS];
	const bson_value_t *val[STORE_IX_MAX_FIELDS];
	bson_value_t copy[STORE_IX_MAX_FIELDS]; /* views into vals: the iterator reuses its own */
	bson_iter_t it;
	int i = 0;

	bson_destroy(n->out);
	n->out = bson_new();
	if (!bson_iter_init(&it, vals))
		return;
	while (bson_iter_next(&it) && i < n->ix->nfields) {
		path[i] = n->ix->field[i].path;
		copy[i] = *bson_iter_value(&it);
		val[i] = &copy[i];
		i++;
	}
	nest_values(n->out, path, val, i);
}

struct exec_ctx {
	struct store_txn *t;
	int64_t coll;
	bool timed;	/* plan__set_timed */
	unsigned works; /* plan__work calls, for the stop checks */
};

static __thread struct exec_ctx cur_ctx;

static int work_node(struct plan__node *n, struct plan__wm *wm, struct dfs_err *err);

static int work_ixscan(struct plan__node *n, struct plan__wm *wm, struct dfs_err *err)
{
	struct store_ixkey k;
	int rc;

	if (!n->opened) {
		n->opened = true;
		if (store_txn_sees_all(cur_ctx.t, cur_ctx.coll, &n->sees_all, err) ||
		    store_ixscan_open(cur_ctx.t, cur_ctx.coll, n->ix, n->backward, &n->is, err))
			return -1;
		n->cur_range = -1;
	}
	for (;;) {
		if (n->cur_range < 0 || n->cur_range >= n->nranges) {
			int next = n->cur_range + 1;
			const struct plan__range *r;

			if (n->cur_range >= n->nranges || next >= n->nranges) {
				n->cur_range = n->nranges;
				return PLAN_EOF;
			}
			n->cur_range = next;
			r = &n->ranges[n->backward ? n->nranges - 1 - next : next];
			if (store_ixscan_range(
				    n->is, r->lo.len ? (const uint8_t *)r->lo.data : NULL,
				    r->lo.len, (const uint8_t *)r->hi.data, r->hi.len, err))
				return -1;
			n->st.seeks++;
		}
		rc = store_ixscan_next(n->is, &k, err);
		if (rc == DFS_ENOENT) {
			if (n->cur_range + 1 >= n->nranges) {
				n->cur_range = n->nranges;
				return PLAN_EOF;
			}
			/* the next range on the next call */
			{
				int next = n->cur_range + 1;
				const struct plan__range *r =
					&n->ranges[n->backward ? n->nranges - 1 - next : next];

				n->cur_range = next;
				if (store_ixscan_range(
					    n->is, r->lo.len ? (const uint8_t *)r->lo.data : NULL,
					    r->lo.len, (const uint8_t *)r->hi.data, r->hi.len, err))
					return -1;
				n->st.seeks++;
			}
			return PLAN_NEED_TIME;
		}
		if (rc)
			return -1;
		if (!n->sees_all) {
			/* A key of a document the caller may not read is not there for it:
			 * neither examined nor counted (store.h "callers"). */
			bool ok;

			if (store_doc_allowed(cur_ctx.t, k.id, &ok, err))
				return -1;
			if (!ok)
				continue;
		}
		break;
	}
	n->st.keys_examined++;
	if (n->multikey) {
		n->st.dups_tested++;
		if (!set_add(&n->seen, k.id)) {
			n->st.dups_dropped++;
			return PLAN_NEED_TIME;
		}
	}
	memset(wm, 0, sizeof(*wm));
	wm->id = k.id;
	wm->elem_index = -1;
	wm->has_vals = true;
	wm->vals = k.vals;
	if (n->build_doc) {
		covered_doc(n, &k.vals);
		wm_doc(wm, n->out);
		if (n->filter && !query_filter_match(n->filter, n->out, &wm->elem_index))
			return PLAN_NEED_TIME;
	}
	return PLAN_ADVANCED;
}

/* TEXT_OR (note 6): every key of every term scan first, scores summed per document; then
 * each document in id order, fetched, with the rest of the filter applied. */
static int work_text_or(struct plan__node *n, struct plan__wm *wm, struct dfs_err *err)
{
	struct plan__wm in;
	bson_t doc;
	int rc;

	if (!n->ts && !(n->ts = calloc(1, sizeof(*n->ts))))
		abort();
	if (!n->ts->sorted) {
		if (n->cur_kid >= n->nkids) {
			tscores_sort(n->ts);
			return PLAN_NEED_TIME;
		}
		rc = work_node(n->kids[n->cur_kid], &in, err);
		if (rc == PLAN_EOF) {
			n->cur_kid++;
			return PLAN_NEED_TIME;
		}
		if (rc != PLAN_ADVANCED)
			return rc;
		tscores_add(n->ts, in.id, in.has_vals ? entry_score(&in.vals) : 0);
		return PLAN_NEED_TIME;
	}
	if (n->ts->next >= n->ts->n)
		return PLAN_EOF;
	{
		struct tscore e = n->ts->e[n->ts->next++];

		rc = store_doc_fetch(cur_ctx.t, e.id, true, &doc, err);
		if (rc == DFS_ENOENT)
			return PLAN_NEED_TIME;
		if (rc)
			return -1;
		n->st.docs_examined++;
		memset(wm, 0, sizeof(*wm));
		wm->id = e.id;
		wm->elem_index = -1;
		wm->has_score = true;
		wm->score = e.score;
	}
	if (n->filter && !query_filter_match(n->filter, &doc, &wm->elem_index))
		return PLAN_NEED_TIME;
	wm_doc(wm, &doc);
	return PLAN_ADVANCED;
}

static int work_stage(struct plan__node *n, struct plan__wm *wm, struct dfs_err *err)
{
	struct plan__wm in;
	bson_t doc;
	int64_t id;
	int rc;

	switch (n->stage) {
	case PS_COLLSCAN:
		rc = collscan_next(cur_ctx.t, cur_ctx.coll, n, &doc, &id, err);
		if (rc == DFS_ENOENT)
			return PLAN_EOF;
		if (rc)
			return -1;
		n->st.docs_examined++;
		memset(wm, 0, sizeof(*wm));
		wm->id = id;
		wm->elem_index = -1;
		if (n->filter && !query_filter_match(n->filter, &doc, &wm->elem_index))
			return PLAN_NEED_TIME;
		wm_doc(wm, &doc);
		return PLAN_ADVANCED;
	case PS_IXSCAN:
		return work_ixscan(n, wm, err);
	case PS_FAST_COUNT: /* the row count once, then one advance per document (no document) */
		if (!n->opened) {
			int64_t nfiles, hidden;

			n->opened = true;
			if (store_coll_count(cur_ctx.t, cur_ctx.coll, &n->amount, &nfiles, err) ||
			    store_coll_hidden_count(cur_ctx.t, cur_ctx.coll, &hidden, err))
				return -1;
			n->amount -= hidden;
		}
		if (n->count >= n->amount)
			return PLAN_EOF;
		n->count++;
		memset(wm, 0, sizeof(*wm));
		wm->elem_index = -1;
		return PLAN_ADVANCED;
	case PS_FETCH:
		rc = work_node(n->kids[0], &in, err);
		if (rc != PLAN_ADVANCED)
			return rc;
		if (in.has_doc && !in.has_vals) {
			/* a stored document already (an OR's TEXT_MATCH or FETCH input, note
			 * 7): MongoDB's alreadyHasObj; the text score goes on up with it */
			n->st.already_has_obj++;
			doc = in.doc;
		} else {
			rc = store_doc_fetch(cur_ctx.t, in.id, true, &doc, err);
			if (rc == DFS_ENOENT)
				return PLAN_NEED_TIME;
			if (rc)
				return -1;
			n->st.docs_examined++;
			in.has_score = false;
		}
		memset(wm, 0, sizeof(*wm));
		wm->id = in.id;
		wm->elem_index = -1;
		wm->has_score = in.has_score;
		wm->score = in.score;
		if (n->filter && !query_filter_match(n->filter, &doc, &wm->elem_index))
			return PLAN_NEED_TIME;
		wm_doc(wm, &doc);
		return PLAN_ADVANCED;
	case PS_OR:
		for (;;) {
			if (n->cur_kid >= n->nkids)
				return PLAN_EOF;
			rc = work_node(n->kids[n->cur_kid], wm, err);
			if (rc == PLAN_EOF) {
				n->cur_kid++;
				return PLAN_NEED_TIME;
			}
			if (rc != PLAN_ADVANCED)
				return rc;
			n->st.dups_tested++;
			if (!set_add(&n->seen, wm->id)) {
				n->st.dups_dropped++;
				return PLAN_NEED_TIME;
			}
			return PLAN_ADVANCED;
		}
	case PS_SORT:
		if (!n->sb) {
			n->sb = calloc(1, sizeof(*n->sb));
			if (!n->sb) {
				dfs_err_set(err, DFS_ENOMEM, "out of memory");
				return -1;
			}
			dfs_buf_init(&n->sb->arena);
			dfs_buf_init(&n->sb->key);
			n->sb->mem = n->sort_mem ? n->sort_mem : SORT_BUDGET;
			n->sb->keep = (size_t)n->amount;
			n->sb->scored = n->scored;
		}
		if (!n->sb->sorted) {
			rc = work_node(n->kids[0], &in, err);
			if (rc == PLAN_NEED_TIME)
				return rc;
			if (rc == PLAN_ADVANCED) {
				if (sortbuf_add(n->sb, n->sort, &in.doc,
						in.has_score ? in.score : NAN, err))
					return -1;
				return PLAN_NEED_TIME;
			}
			if (rc != PLAN_EOF)
				return rc;
			if (sortbuf_finish(n->sb, err))
				return -1;
			return PLAN_NEED_TIME;
		}
		{
			double score = 0;

			rc = sortbuf_next(n->sb, &doc, &score, err);
			if (rc == DFS_ENOENT)
				return PLAN_EOF;
			if (rc)
				return -1;
			memset(wm, 0, sizeof(*wm));
			wm->elem_index = -1;
			wm->has_score = n->scored && !isnan(score);
			wm->score = score;
		}
		wm_doc(wm, &doc);
		return PLAN_ADVANCED;
	case PS_TEXT_OR:
		return work_text_or(n, wm, err);
	case PS_TEXT_MATCH:
		rc = work_node(n->kids[0], wm, err);
		if (rc != PLAN_ADVANCED)
			return rc;
		if (!query__text_match(n->text, n->ix, &wm->doc)) {
			n->st.docs_rejected++;
			return PLAN_NEED_TIME;
		}
		return PLAN_ADVANCED;
	case PS_SKIP:
		rc = work_node(n->kids[0], wm, err);
		if (rc == PLAN_ADVANCED && n->count < n->amount) {
			n->count++;
			return PLAN_NEED_TIME;
		}
		return rc;
	case PS_LIMIT:
		if (n->count >= n->amount)
			return PLAN_EOF;
		rc = work_node(n->kids[0], wm, err);
		if (rc == PLAN_ADVANCED)
			n->count++;
		return rc;
	default: /* projections */
		rc = work_node(n->kids[0], wm, err);
		if (rc != PLAN_ADVANCED)
			return rc;
		{
			int idx = wm->elem_index;

			if (n->positional && n->filter)
				query_filter_match(n->filter, &wm->doc, &idx);
			bson_destroy(n->out);
			n->out = bson_new();
			if (n->scored ? query_proj_apply_score(n->proj, &wm->doc, idx,
							       wm->has_score ? &wm->score : NULL,
							       n->out, err)
				      : query_proj_apply(n->proj, &wm->doc, idx, n->out, err))
				return -1;
			wm->result = n->out;
		}
		return PLAN_ADVANCED;
	}
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One work() with its counters. */
static int work_node(struct plan__node *n, struct plan__wm *wm, struct dfs_err *err)
{
	int rc;

	if (n->st.eof)
		return PLAN_EOF;
	n->st.works++;
	if (cur_ctx.timed) {
		int64_t t0 = now_ns();

		rc = work_stage(n, wm, err);
		n->st.ns += now_ns() - t0;
	} else {
		rc = work_stage(n, wm, err);
	}
	switch (rc) {
	case PLAN_ADVANCED:
		n->st.advanced++;
		n->st.nreturned++;
		break;
	case PLAN_NEED_TIME:
		n->st.need_time++;
		break;
	case PLAN_EOF:
		n->st.eof = true;
		break;
	default:
		break;
	}
	return rc;
}

int plan__count(struct store_txn *t, struct plan__node *n, int64_t *count, struct dfs_err *err)
{
	struct plan__wm wm;
	int rc;

	*count = 0;
	if (n->stage == PS_FAST_COUNT && !n->opened) {
		/* the first work reads the row count; it counts for all */
		if ((rc = plan__work(t, n, &wm, err)) < 0)
			return err && err->code ? err->code : DFS_EIO;
		*count = n->amount;
		n->count = n->amount;
		n->st.eof = true;
		n->st.advanced = n->st.nreturned = 0;
		return 0;
	}
	while ((rc = plan__work(t, n, &wm, err)) != PLAN_EOF) {
		if (rc < 0)
			return err && err->code ? err->code : DFS_EIO;
		if (rc == PLAN_ADVANCED)
			(*count)++;
	}
	return 0;
}

void plan__set_timed(bool on)
{
	cur_ctx.timed = on;
}

int plan__work(struct store_txn *t, struct plan__node *n, struct plan__wm *wm, struct dfs_err *err)
{
	cur_ctx.t = t;
	/* killOp and maxTimeMS (store.h's stop hook): a plan served from the document cache
	 * may run without a SQLite step for long, so the executor asks too. */
	if ((++cur_ctx.works & 63) == 0 && store_thread_stopped(err))
		return -1;
	return work_node(n, wm, err);
}

void plan__reset(struct plan__node *n, bool keep_stats)
{
	if (!n)
		return;
	for (int i = 0; i < n->nkids; i++)
		plan__reset(n->kids[i], keep_stats);
	store_cursor_free(n->sc);
	n->sc = NULL;
	free(n->ids);
	n->ids = NULL;
	n->nids = n->next_id = 0;
	store_ixscan_free(n->is);
	n->is = NULL;
	n->cur_range = -1;
	set_free(n->seen);
	n->seen = NULL;
	n->cur_kid = 0;
	n->count = 0;
	sortbuf_free(n->sb);
	n->sb = NULL;
	tscores_free(n->ts);
	n->ts = NULL;
	bson_destroy(n->out);
	n->out = NULL;
	n->opened = false;
	if (!keep_stats)
		memset(&n->st, 0, sizeof(n->st));
	else
		n->st.eof = false;
}

/* ---- planning and the trial ------------------------------------------------------------ */

static int parse_opts(const struct query_find_opts *o, struct plan__query *q, struct dfs_err *err)
{
	int rc;

	if (o->skip < 0)
		return dfs_err_set(err, DFS_EINVAL, "skip must not be negative");
	if (o->limit < 0)
		return dfs_err_set(err, DFS_EINVAL, "limit must not be negative");
	q->skip = o->skip;
	q->limit = o->limit;
	q->filter_spec = o->filter;
	q->sort_spec = o->sort;
	q->proj_spec = o->projection;
	q->hint = o->hint;
	q->hint_name = o->hint_name;
	q->min = o->min && !bson_empty(o->min) ? o->min : NULL;
	q->max = o->max && !bson_empty(o->max) ? o->max : NULL;
	if ((q->min || q->max) && !o->hint_name &&
	    (!o->hint || bson_has_field(o->hint, "$natural")))
		return dfs_err_set(err, DFS_EINVAL,
				   "When using min()/max() a hint of which index "
				   "to use must be provided");
	q->sort_mem = o->sort_mem;
	q->count_only = o->count_only;
	q->coll = query__collation_ref(o->collation); /* the cursor may outlive o's */
	if (o->filter && (rc = query_filter_parse_collated(o->filter, q->coll, &q->filter, err)))
		return rc;
	if (o->projection && (rc = query_proj_parse(o->projection, &q->proj, err)))
		return rc;
	if (o->sort && (rc = query_sort_parse(o->sort, &q->sort, err)))
		return rc;
	query__sort_set_collation(q->sort, q->coll);
	if (q->sort_spec && bson_empty(q->sort_spec))
		q->sort_spec = NULL;
	return 0;
}

static void query_release(struct plan__query *q)
{
	query_expr_free(q->filter);
	query_proj_free(q->proj);
	query_sort_free(q->sort);
	query_collation_free(q->coll);
	store_index_list_free(q->ixs, q->nixs);
	memset(q, 0, sizeof(*q));
}

void plan__run_release(struct plan__run *r)
{
	plan__cands_free(r->cands, r->ncands);
	query_release(&r->q);
	memset(r, 0, sizeof(*r));
}

/* Note 1: round-robin trial of every candidate. */
static int trial(struct store_txn *t, struct plan__run *r, struct dfs_err *err)
{
	int64_t works = 0;
	bool done = false;
	int best = -1;

	while (!done && works < TRIAL_WORKS) {
		for (int i = 0; i < r->ncands && !done; i++) {
			struct plan__cand *c = &r->cands[i];
			struct plan__wm wm;
			struct dfs_err e = {0};
			int rc;

			if (c->score < 0)
				continue;
			rc = plan__work(t, c->root, &wm, &e);
			works++;
			if (rc < 0) {
				c->score = -1; /* a failing candidate is dropped */
				if (err && !err->code)
					*err = e;
				continue;
			}
			if (rc == PLAN_EOF || c->root->st.advanced >= TRIAL_RESULTS)
				done = true;
		}
		{
			bool alive = false;

			for (int i = 0; i < r->ncands; i++)
				alive |= r->cands[i].score >= 0;
			if (!alive)
				return err ? err->code : DFS_EIO;
		}
	}
	for (int i = 0; i < r->ncands; i++) {
		struct plan__cand *c = &r->cands[i];

		if (c->score < 0)
			continue;
		c->trial = c->root->st;
		c->score = 1.0 +
			   (c->root->st.works
				    ? (double)c->root->st.advanced / (double)c->root->st.works
				    : 0) +
			   (c->has_sort ? 0 : 1e-4) + (c->has_fetch ? 0 : 1e-4) +
			   (c->root->st.eof ? 1e-4 : 0);
		if (best < 0 || c->score > r->cands[best].score)
			best = i;
	}
	if (err)
		dfs_err_clear(err);
	r->winner = best;
	r->trial_run = true;
	return 0;
}

int plan__run_open(struct store_txn *t, int64_t coll, const struct query_find_opts *o,
		   bool use_cache, struct plan__run *r, struct dfs_err *err)
{
	char desc[512];
	int rc;

	memset(r, 0, sizeof(*r));
	cur_ctx.t = t;
	cur_ctx.coll = coll;
	if ((rc = parse_opts(o, &r->q, err)))
		goto fail;
	if ((rc = store_index_list(t, coll, &r->q.ixs, &r->q.nixs, err)))
		goto fail;
	if ((rc = plan__enumerate(&r->q, &r->cands, &r->ncands, err)))
		goto fail;
	r->winner = 0;
	if (r->ncands > 1) {
		if (use_cache && plan__cache_get(t, coll, &r->q, desc, sizeof(desc))) {
			for (int i = 0; i < r->ncands; i++)
				if (!strcmp(r->cands[i].desc, desc)) {
					r->winner = i;
					r->from_cache = true;
				}
		}
		if (!r->from_cache) {
			if ((rc = trial(t, r, err)))
				goto fail;
			if (use_cache)
				plan__cache_put(t, coll, &r->q, r->cands[r->winner].desc);
		}
	}
	return 0;
fail:
	plan__run_release(r);
	return rc;
}

/* ---- the cursor ------------------------------------------------------------------------- */

struct query_cursor {
	struct store_txn *t; /* Borrowed */
	int64_t coll;
	struct plan__run run;
	struct plan__node *root; /* Borrowed: the winner's root */
	bson_t *out;		 /* Owned (aligned_alloc: bson_t wants 128-byte alignment,
				  * which calloc does not give): the current result, a view of
				  * outbuf, or NULL before the first */
	struct dfs_buf outbuf;	 /* the current result's bytes, reused from one to the next */
	bool want_keys;		 /* keep the sort key of each result (tests) */
	struct dfs_buf key;	 /* the last result's sort key without _id */
	int64_t entry;		 /* the last result's entry id (0: unknown) */
	bool has_score;		 /* the last result has a text score */
	double score;		 /* and this is it */
	int64_t fetched;	 /* the entry id of the last result when it is a cached
				  * fetch's document (store_doc_text), else 0 */
	const char *text;	 /* Borrowed: that document's compact rendering, or NULL */
	size_t tlen;
};

int query_find_open(struct store_txn *t, int64_t coll, const struct query_find_opts *o,
		    struct query_cursor **out, struct dfs_err *err)
{
	struct query_cursor *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	c->t = t;
	c->coll = coll;
	dfs_buf_init(&c->key);
	dfs_buf_init(&c->outbuf);
	if ((rc = plan__run_open(t, coll, o, true, &c->run, err))) {
		free(c);
		return rc;
	}
	for (int i = 0; i < c->run.ncands; i++)
		plan__reset(c->run.cands[i].root, i != c->run.winner);
	c->root = c->run.cands[c->run.winner].root;
	*out = c;
	return 0;
}

/* Appends to out the sort key of doc without its _id tail. */
static void sort_key_of(const struct query_sort *s, const bson_t *doc, struct dfs_buf *out)
{
	struct dfs_err err = {0};
	struct dfs_buf idk;
	bson_iter_t it;

	dfs_buf_reset(out);
	if (query_sort_key(s, doc, out, &err))
		return;
	dfs_buf_init(&idk);
	if (bson_iter_init_find(&it, doc, "_id"))
		store_key_append(&idk, bson_iter_value(&it), false, &err);
	else {
		bson_value_t null = {.value_type = BSON_TYPE_NULL};

		store_key_append(&idk, &null, false, &err);
	}
	if (idk.len <= out->len)
		out->len -= idk.len;
	dfs_buf_release(&idk);
}

int query_cursor_next(struct query_cursor *c, const bson_t **doc, struct dfs_err *err)
{
	struct plan__wm wm;
	int rc;

	for (;;) {
		cur_ctx.t = c->t;
		cur_ctx.coll = c->coll;
		rc = plan__work(c->t, c->root, &wm, err);
		if (rc == PLAN_EOF)
			return DFS_ENOENT;
		if (rc < 0)
			return err && err->code ? err->code : DFS_EIO;
		if (rc == PLAN_ADVANCED)
			break;
	}
	c->entry = wm.id;
	c->has_score = wm.has_score;
	c->score = wm.score;
	if (!wm.result) { /* a count's index scan (count_only) */
		*doc = NULL;
		return 0;
	}
	if (c->want_keys && c->run.q.sort && wm.has_doc)
		sort_key_of(c->run.q.sort, &wm.doc, &c->key);
	c->fetched = store_doc_text(c->t, wm.result, &c->text, &c->tlen);
	/* The working member dies at the next work(); one buffer, grown once, keeps it until
	 * the next call instead of a bson allocation per result. */
	dfs_buf_reset(&c->outbuf);
	dfs_buf_append(&c->outbuf, bson_get_data(wm.result), wm.result->len);
	if (!c->out && !(c->out = aligned_alloc(BSON_ALIGNOF(bson_t), sizeof(bson_t))))
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	if (!bson_init_static(c->out, (const uint8_t *)c->outbuf.data, c->outbuf.len))
		return dfs_err_set(err, DFS_ECORRUPT, "result %lld is not valid BSON",
				   (long long)wm.id);
	*doc = c->out;
	return 0;
}

void query_cursor_summary(const struct query_cursor *c, struct query_summary *s)
{
	memset(s, 0, sizeof(*s));
	if (c && c->root)
		plan__summary(c->root, s);
}

bool query_cursor_text(const struct query_cursor *c, const char **text, size_t *len)
{
	if (!c->fetched)
		return false;
	*text = c->text;
	*len = c->tlen;
	return true;
}

void query_cursor_keep_text(struct query_cursor *c, const char *text, size_t len)
{
	if (c->fetched && !c->text)
		store_doc_keep_text(c->t, c->fetched, text, len);
}

int query_cursor_count(struct query_cursor *c, int64_t *count, struct dfs_err *err)
{
	cur_ctx.coll = c->coll;
	return plan__count(c->t, c->root, count, err);
}

int64_t query_cursor_entry(const struct query_cursor *c)
{
	return c->entry;
}

bool query_cursor_score(const struct query_cursor *c, double *score)
{
	if (c->has_score)
		*score = c->score;
	return c->has_score;
}

void query_cursor_free(struct query_cursor *c)
{
	if (!c)
		return;
	plan__run_release(&c->run);
	free(c->out);
	dfs_buf_release(&c->outbuf);
	dfs_buf_release(&c->key);
	free(c);
}

const struct dfs_buf *query__cursor_sort_key(const struct query_cursor *c)
{
	return c->run.q.sort ? &c->key : NULL;
}

void query__cursor_want_keys(struct query_cursor *c)
{
	c->want_keys = true;
}

int query__cursor_candidates(const struct query_cursor *c, bson_t *names)
{
	for (int i = 0; i < c->run.ncands; i++) {
		char k[16];

		snprintf(k, sizeof(k), "%d", i);
		BSON_APPEND_UTF8(names, k, c->run.cands[i].desc);
	}
	return c->run.ncands;
}

/* ---- query_init ---------------------------------------------------------------------- */

static int hook_compile(const bson_t *filter, void **out, struct dfs_err *err)
{
	int rc = query_filter_parse(filter, (struct query_expr **)out, err);

	if (!rc && query_filter_has_text(*out)) {
		query_expr_free(*out);
		*out = NULL;
		return dfs_err_set(err, DFS_EINVAL,
				   "$text is not allowed in a partialFilterExpression");
	}
	return rc;
}

static bool hook_match(const void *compiled, const bson_t *doc)
{
	return query_filter_match(compiled, doc, NULL);
}

static void hook_free(void *compiled)
{
	query_expr_free(compiled);
}

void query_init(void)
{
	static const struct store_filter_hooks h = {hook_compile, hook_match, hook_free};

	store_filter_hooks_set(&h);
}
