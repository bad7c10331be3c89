/*
 * agg.c - the aggregation pipeline: parsing a pipeline (an array of stage documents) into
 * stages, and running it as a pull chain over a find cursor: $match $project $addFields/$set
 * $unset $group $sort $limit $skip $unwind $count $sortByCount $lookup $replaceRoot/
 * $replaceWith $bucket $facet $sample $out $merge, and the text score metadata the stages pass
 * on. Expressions are expr.c's job; filters, find sorts and the collection scan are
 * filter.c/match.c/sort.c/exec.c's (reached only through query.h).
 *
 * Design notes
 * 1. A leading $match (without $expr at its top level or in a top-level $and) and a $sort
 *    right after it (or a leading $sort), then a $skip and a $limit right after those,
 *    become the filter, sort, skip and limit of query_find_open, so the planner can use
 *    indexes and the find's top-k sort bounds the memory. Every other stage runs here. A
 *    $match evaluates the $expr at its top level and inside top-level $and with expr.c
 *    (every operator, and $lookup's let variables); the rest goes to query_filter_match.
 * 2. Pull model: stage i's next() pulls from stage i-1; stage -1 is the source (a find
 *    cursor, or for a $facet sub-pipeline the temporary file its input was spooled to). A
 *    returned document is Borrowed until the next call on that stage. Each stage owns one
 *    arena for the values of the document it is working on and resets it per document.
 * 3. $sort and $group use one external sorter: records (key, payload) in an arena; past the
 *    memory budget the arena is sorted and written to a temporary file as a run; the runs are
 *    merged by memcmp of keys. $sort's key is query_sort_key() plus an 8-byte input sequence
 *    number (a stable sort). $group sorts (store_key of the group key, sequence number) ->
 *    (the accumulators' argument values), then folds each run of equal group keys: groups
 *    come out in group-key order, accumulators see their documents in input order, and only
 *    one group's state is in memory at a time.
 * 4. $group keys: missing and null are one group (output _id null); numbers equal by value
 *    are one group (store_key_append encodes them identically); documents compare field by
 *    field in order.
 * 5. $out and $merge never write before the whole pipeline has run: the results are spooled
 *    (sorted by _id through the sorter, which also finds duplicate _ids for $out), checked
 *    ($merge fail modes), and only then written, in the caller's write transaction. So a
 *    pipeline that fails leaves the target as it was.
 * 6. Explain (query_agg_explain) is MongoDB's aggregate explain: the find that note 1 hands
 *    the leading stages to is explained by explain.c as the "$cursor" stage, the other stages
 *    follow as written. With executionStats the pipeline runs once more with every stage
 *    counted and timed (stage_next; the times include the stages before, as MongoDB's do),
 *    stopping before a $out/$merge: explaining never writes.
 * 7. Text score metadata: a $text in the first $match is the find's (note 1; a $match with
 *    $text elsewhere is refused when the pipeline is parsed, as MongoDB does, and so is a
 *    {$meta: "textScore"} in a pipeline without one, check_meta), and the find gives each
 *    document's score (query_cursor_score). Every stage records the score of the document
 *    it returned last (rstage.has_score/score): the stages that pass or reshape a document
 *    ($match $limit $skip $project $addFields $replaceRoot $unwind $lookup $sample, $sort
 *    in its records, a $facet's spool for its sub-pipelines) keep its input's, the ones
 *    that make new documents ($group $bucket $sortByCount $count $facet) have none, and
 *    an expression evaluates {$meta: "textScore"} to its input's score or to missing.
 * 8. An update pipeline (query_pipeline_apply) is the same stages over a source of one
 *    document instead of a find: no transaction, no collection. Only the stages that map a
 *    document to one document are allowed there (MongoDB's list), so a $lookup or $facet
 *    that would need the store never runs without one. update.c turns the result into a
 *    replacement (its _id rules).
 * 9. $out and $merge write as their caller (the transaction's, cred.c) would through files:
 *    a new target collection needs the database directory's w bit (0755, the daemon's),
 *    $out (which replaces every entry) and a $merge that may insert need the target
 *    directory's, and a $merge that replaces or merges a document needs r and w on it;
 *    otherwise DFS_EACCES and nothing is written. What they create is the caller's, 0644.
 */
#include "agg_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define AGG_MEM_DEFAULT (32u * 1024 * 1024)

/* ---- the external sorter (note 3) ---------------------------------------------------- */

struct srec {
	size_t off;    /* record offset in the arena: key then payload */
	uint32_t klen; /* key bytes */
	uint32_t plen; /* payload bytes */
};

struct srun {
	FILE *f;	     /* Owned: records (klen, plen, key, payload) */
	struct dfs_buf cur;  /* the current record */
	uint32_t klen, plen; /* of cur */
	bool live;	     /* cur holds a record */
};

struct sorter {
	struct dfs_buf arena;
	struct srec *recs; /* Owned */
	size_t n, cap, next;
	struct srun *runs; /* Owned */
	size_t nruns;
	size_t mem;	    /* spill past this many arena bytes */
	bool finished;	    /* sorter_finish was called */
	struct dfs_buf out; /* the record returned last (merge mode) */
	int64_t spills;	    /* runs written (tests look at it through the debug counter) */
};

static void sorter_init(struct sorter *s, size_t mem)
{
	memset(s, 0, sizeof(*s));
	dfs_buf_init(&s->arena);
	dfs_buf_init(&s->out);
	s->mem = mem;
}

static void sorter_release(struct sorter *s)
{
	for (size_t i = 0; i < s->nruns; i++) {
		if (s->runs[i].f)
			fclose(s->runs[i].f);
		dfs_buf_release(&s->runs[i].cur);
	}
	free(s->runs);
	free(s->recs);
	dfs_buf_release(&s->arena);
	dfs_buf_release(&s->out);
	memset(s, 0, sizeof(*s));
}

static int key_cmp(const char *a, uint32_t al, const char *b, uint32_t bl)
{
	int d = memcmp(a, b, al < bl ? al : bl);

	if (d)
		return d;
	return al < bl ? -1 : al > bl;
}

static int srec_cmp(const void *a, const void *b, void *ctx)
{
	const struct sorter *s = ctx;
	const struct srec *x = a, *y = b;

	return key_cmp(s->arena.data + x->off, x->klen, s->arena.data + y->off, y->klen);
}

static int sorter_spill(struct sorter *s, struct dfs_err *err)
{
	struct srun *r;
	FILE *f;

	if (s->n > 1)
		qsort_r(s->recs, s->n, sizeof(*s->recs), srec_cmp, s);
	f = tmpfile();
	if (!f)
		return dfs_err_set(err, DFS_EIO, "cannot create a temporary file to spill to");
	for (size_t i = 0; i < s->n; i++) {
		uint32_t hdr[2] = {s->recs[i].klen, s->recs[i].plen};
		size_t len = (size_t)hdr[0] + hdr[1];

		if (fwrite(hdr, sizeof(hdr), 1, f) != 1 ||
		    fwrite(s->arena.data + s->recs[i].off, 1, len, f) != len) {
			fclose(f);
			return dfs_err_set(err, DFS_EIO, "cannot write a temporary file");
		}
	}
	if (fflush(f) || fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return dfs_err_set(err, DFS_EIO, "cannot write a temporary file");
	}
	r = realloc(s->runs, (s->nruns + 1) * sizeof(*r));
	if (!r) {
		fclose(f);
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	}
	s->runs = r;
	memset(&r[s->nruns], 0, sizeof(*r));
	r[s->nruns].f = f;
	dfs_buf_init(&r[s->nruns].cur);
	s->nruns++;
	s->spills++;
	s->n = 0;
	dfs_buf_reset(&s->arena);
	return 0;
}

static int sorter_add(struct sorter *s, const void *key, size_t klen, const void *p, size_t plen,
		      struct dfs_err *err)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		struct srec *nr = realloc(s->recs, cap * sizeof(*nr));

		if (!nr)
			return dfs_err_set(err, DFS_ENOMEM, "out of memory");
		s->recs = nr;
		s->cap = cap;
	}
	s->recs[s->n].off = s->arena.len;
	s->recs[s->n].klen = (uint32_t)klen;
	s->recs[s->n].plen = (uint32_t)plen;
	s->n++;
	dfs_buf_append(&s->arena, key, klen);
	dfs_buf_append(&s->arena, p, plen);
	if (s->arena.len + s->n * sizeof(struct srec) > s->mem)
		return sorter_spill(s, err);
	return 0;
}

static int run_read(struct srun *r, struct dfs_err *err)
{
	uint32_t hdr[2];
	size_t len;

	r->live = false;
	if (fread(hdr, sizeof(hdr), 1, r->f) != 1)
		return 0;
	len = (size_t)hdr[0] + hdr[1];
	dfs_buf_reset(&r->cur);
	dfs_buf_reserve(&r->cur, len);
	if (fread(r->cur.data, 1, len, r->f) != len)
		return dfs_err_set(err, DFS_EIO, "a temporary file is short");
	r->cur.len = len;
	r->klen = hdr[0];
	r->plen = hdr[1];
	r->live = true;
	return 0;
}

static int sorter_finish(struct sorter *s, struct dfs_err *err)
{
	int rc;

	s->finished = true;
	if (!s->nruns) {
		if (s->n > 1)
			qsort_r(s->recs, s->n, sizeof(*s->recs), srec_cmp, s);
		return 0;
	}
	if (s->n && (rc = sorter_spill(s, err)))
		return rc;
	for (size_t i = 0; i < s->nruns; i++)
		if ((rc = run_read(&s->runs[i], err)))
			return rc;
	return 0;
}

/* The next record: key and payload Borrowed until the next call. DFS_ENOENT at the end. */
static int sorter_next(struct sorter *s, const char **key, uint32_t *klen, const char **p,
		       uint32_t *plen, struct dfs_err *err)
{
	struct srun *best = NULL;
	int rc;

	if (!s->nruns) {
		struct srec *r;

		if (s->next >= s->n)
			return DFS_ENOENT;
		r = &s->recs[s->next++];
		*key = s->arena.data + r->off;
		*klen = r->klen;
		*p = *key + r->klen;
		*plen = r->plen;
		return 0;
	}
	for (size_t i = 0; i < s->nruns; i++) {
		struct srun *r = &s->runs[i];

		if (r->live &&
		    (!best || key_cmp(r->cur.data, r->klen, best->cur.data, best->klen) < 0))
			best = r;
	}
	if (!best)
		return DFS_ENOENT;
	dfs_buf_reset(&s->out);
	dfs_buf_append(&s->out, best->cur.data, best->cur.len);
	*klen = best->klen;
	*plen = best->plen;
	if ((rc = run_read(best, err)))
		return rc;
	*key = s->out.data;
	*p = s->out.data + *klen;
	return 0;
}

static void put_seq(struct dfs_buf *b, uint64_t seq)
{
	unsigned char be[8];

	for (int i = 0; i < 8; i++)
		be[i] = (unsigned char)(seq >> (56 - 8 * i));
	dfs_buf_append(b, be, 8);
}

/* ---- parsed stages ------------------------------------------------------------------- */

enum skind {
	S_MATCH,
	S_PROJECT, /* $project and $unset */
	S_ADDFIELDS,
	S_GROUP, /* $group, $bucket, and the first half of $sortByCount */
	S_SORT,
	S_LIMIT,
	S_SKIP,
	S_UNWIND,
	S_COUNT,
	S_LOOKUP,
	S_REPLACEROOT,
	S_FACET,
	S_SAMPLE,
	S_OUT,
	S_MERGE,
};

/* A projection tree node ($project, $addFields, $unset). */
enum pkind { P_INC, P_EXC, P_EXPR, P_SUB };

struct pnode {
	char *name;	    /* Owned: one path component */
	int kind;	    /* enum pkind */
	struct agg__x *x;   /* P_EXPR: Owned */
	struct pnode *kids; /* P_SUB: Owned array */
	int nkids;
	bool has_expr; /* P_SUB: some descendant is P_EXPR */
};

enum acc_op {
	A_SUM,
	A_AVG,
	A_MIN,
	A_MAX,
	A_FIRST,
	A_LAST,
	A_PUSH,
	A_ADDTOSET,
	A_COUNT,
	A_STDDEVPOP,
	A_MERGEOBJECTS
};

struct acc {
	char *name;	  /* Owned: output field */
	int op;		  /* enum acc_op */
	struct agg__x *x; /* Owned: the argument (NULL for $count) */
};

struct pstage {
	int kind;	  /* enum skind */
	int index;	  /* position in the user's pipeline (messages) */
	const char *name; /* the stage operator as written (static) */
	/* $match */
	bson_t *filter;	       /* Owned: the filter without top-level $expr (or NULL) */
	struct query_expr *fx; /* Owned: parsed filter (or NULL) */
	struct agg__x **mx;    /* Owned: the $expr hoisted out of the filter (note 1) */
	int nmx;
	/* $project / $addFields */
	struct pnode root; /* kids: the spec */
	bool inclusion;	   /* $project: inclusion mode */
	/* $group / $bucket */
	struct agg__x *id; /* Owned: the group key expression */
	struct acc *accs;  /* Owned */
	int naccs;
	bson_value_t *bounds; /* $bucket: Owned copies of the boundaries */
	int nbounds;
	bson_value_t bdefault; /* $bucket: Owned; EOD when there is no default */
	/* $sort */
	bson_t *sort_spec;	 /* Owned */
	struct query_sort *sort; /* Owned */
	/* $limit, $skip, $sample */
	int64_t n;
	/* $unwind */
	char **comp; /* Owned: path components (into buf) */
	int ncomp;
	char *buf;	   /* Owned */
	char *path;	   /* Owned: the path as written, without '$' */
	char *index_field; /* Owned: includeArrayIndex, or NULL */
	bool preserve;	   /* preserveNullAndEmptyArrays */
	/* $count: path; $lookup, $out, $merge */
	char *from, *local, *foreign, *as; /* Owned ($out/$merge target: from) */
	char **lcomp, *lbuf;		   /* Owned: localField components */
	int nlcomp;
	char **ascomp, *asbuf; /* Owned: 'as' components */
	int nascomp;
	char **let_names;      /* Owned: $lookup let variable names */
	struct agg__x **let_x; /* Owned: their expressions */
	int nlet;
	struct query_pipeline *sub; /* Owned: $lookup pipeline */
	/* $replaceRoot */
	struct agg__x *root_x; /* Owned */
	/* $facet */
	char **facet_names;		/* Owned */
	struct query_pipeline **facets; /* Owned */
	int nfacets;
	/* $merge */
	int when_matched;     /* 0 merge, 1 replace, 2 keepExisting, 3 fail */
	int when_not_matched; /* 0 insert, 1 discard, 2 fail */
	char *out_db;	      /* $out/$merge: Owned: the target's database as written, or NULL */
};

struct query_pipeline {
	struct pstage *st; /* Owned: n stages */
	int n;
	bool writes;  /* ends in $out or $merge */
	bson_t *spec; /* Owned: the pipeline as given (explain shows its stages) */
};

static void pnode_release(struct pnode *p)
{
	for (int i = 0; i < p->nkids; i++)
		pnode_release(&p->kids[i]);
	free(p->kids);
	free(p->name);
	agg__x_free(p->x);
}

static void strv_free(char **v, int n)
{
	if (!v)
		return;
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void pstage_release(struct pstage *s)
{
	bson_destroy(s->filter);
	query_expr_free(s->fx);
	for (int i = 0; i < s->nmx; i++)
		agg__x_free(s->mx[i]);
	free(s->mx);
	pnode_release(&s->root);
	agg__x_free(s->id);
	for (int i = 0; i < s->naccs; i++) {
		free(s->accs[i].name);
		agg__x_free(s->accs[i].x);
	}
	free(s->accs);
	for (int i = 0; i < s->nbounds; i++)
		bson_value_destroy(&s->bounds[i]);
	free(s->bounds);
	if (s->bdefault.value_type != BSON_TYPE_EOD)
		bson_value_destroy(&s->bdefault);
	bson_destroy(s->sort_spec);
	query_sort_free(s->sort);
	free(s->comp);
	free(s->buf);
	free(s->path);
	free(s->index_field);
	free(s->from);
	free(s->out_db);
	free(s->local);
	free(s->foreign);
	free(s->as);
	free(s->lcomp);
	free(s->lbuf);
	free(s->ascomp);
	free(s->asbuf);
	strv_free(s->let_names, s->nlet);
	for (int i = 0; i < s->nlet; i++)
		agg__x_free(s->let_x[i]);
	free(s->let_x);
	query_pipeline_free(s->sub);
	agg__x_free(s->root_x);
	strv_free(s->facet_names, s->nfacets);
	for (int i = 0; i < s->nfacets; i++)
		query_pipeline_free(s->facets[i]);
	free(s->facets);
}

void query_pipeline_free(struct query_pipeline *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->n; i++)
		pstage_release(&p->st[i]);
	free(p->st);
	if (p->spec)
		bson_destroy(p->spec);
	free(p);
}

bool query_pipeline_writes(const struct query_pipeline *p)
{
	return p && p->writes;
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);

	if (!d)
		abort();
	return d;
}

/* Splits a dotted path into components (a copy in *buf). */
static int split(const char *what, const char *s, char ***comp, int *n, char **buf,
		 struct dfs_err *err)
{
	int k = 1;

	if (!*s)
		return dfs_err_set(err, DFS_EINVAL, "%s must not be empty", what);
	if (s[0] == '$')
		return dfs_err_set(err, DFS_EINVAL, "%s '%s' must not start with '$'", what, s);
	for (const char *p = s; *p; p++)
		k += *p == '.';
	*buf = xstrdup(s);
	*comp = calloc((size_t)k, sizeof(**comp));
	if (!*comp)
		abort();
	*n = 0;
	for (char *p = *buf;;) {
		char *dot = strchr(p, '.');

		if (dot)
			*dot = 0;
		if (!*p)
			return dfs_err_set(err, DFS_EINVAL, "%s '%s' has an empty component", what,
					   s);
		(*comp)[(*n)++] = p;
		if (!dot)
			break;
		p = dot + 1;
	}
	return 0;
}

static int parse_pipeline(const bson_t *pipeline, const struct agg__scope *sc,
			  struct query_pipeline **out, struct dfs_err *err);

/* ---- $match -------------------------------------------------------------------------- */

/* Moves every $expr at the top level of spec, or inside a top-level $and (recursively), into
 * s->mx, and appends the rest of spec to out. */
static int hoist_expr(struct pstage *s, const bson_t *spec, bson_t *out,
		      const struct agg__scope *sc, struct dfs_err *err)
{
	bson_iter_t f, a;
	int rc;

	if (!bson_iter_init(&f, spec))
		return dfs_err_set(err, DFS_EINVAL, "bad $match document");
	while (bson_iter_next(&f)) {
		const char *k = bson_iter_key(&f);

		if (!strcmp(k, "$expr")) {
			struct agg__x **nm = realloc(s->mx, (size_t)(s->nmx + 1) * sizeof(*nm));

			if (!nm)
				abort();
			s->mx = nm;
			s->mx[s->nmx] = NULL;
			if ((rc = agg__x_parse(bson_iter_value(&f), sc, &s->mx[s->nmx++], err)))
				return rc;
			continue;
		}
		if (!strcmp(k, "$and") && BSON_ITER_HOLDS_ARRAY(&f) && bson_iter_recurse(&f, &a)) {
			bson_t kept = BSON_INITIALIZER;
			uint32_t n = 0, total = 0;

			while (bson_iter_next(&a)) {
				bson_t el, rest = BSON_INITIALIZER;
				const uint8_t *data;
				uint32_t len;
				char buf[16];
				const char *key;

				total++;
				bson_uint32_to_string(n, &key, buf, sizeof(buf));
				if (!BSON_ITER_HOLDS_DOCUMENT(&a)) {
					bson_append_value(&kept, key, -1, bson_iter_value(&a));
					n++;
					bson_destroy(&rest);
					continue;
				}
				bson_iter_document(&a, &len, &data);
				if (!bson_init_static(&el, data, len) ||
				    (rc = hoist_expr(s, &el, &rest, sc, err))) {
					bson_destroy(&rest);
					bson_destroy(&kept);
					return err->code ? err->code
							 : dfs_err_set(err, DFS_EINVAL, "bad $and");
				}
				if (!bson_empty(&rest)) {
					bson_append_document(&kept, key, -1, &rest);
					n++;
				}
				bson_destroy(&rest);
			}
			/* an empty $and stays, for the filter parser to reject */
			if (n || !total)
				bson_append_array(out, "$and", 4, &kept);
			bson_destroy(&kept);
			continue;
		}
		bson_append_value(out, k, -1, bson_iter_value(&f));
	}
	return 0;
}

static int parse_match(struct pstage *s, const bson_iter_t *it, const struct agg__scope *sc,
		       struct dfs_err *err)
{
	const uint8_t *data;
	uint32_t len;
	bson_t spec;
	int rc;

	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return dfs_err_set(err, DFS_EINVAL,
				   "the match filter must be an expression in an "
				   "object");
	bson_iter_document(it, &len, &data);
	if (!bson_init_static(&spec, data, len))
		return dfs_err_set(err, DFS_EINVAL, "bad $match document");
	s->filter = bson_new();
	if ((rc = hoist_expr(s, &spec, s->filter, sc, err)))
		return rc;
	return query_filter_parse(s->filter, &s->fx, err);
}

/* ---- $project / $addFields / $unset -------------------------------------------------- */

static struct pnode *pnode_child(struct pnode *p, const char *name, bool create)
{
	struct pnode *k;

	for (int i = 0; i < p->nkids; i++)
		if (!strcmp(p->kids[i].name, name))
			return &p->kids[i];
	if (!create)
		return NULL;
	k = realloc(p->kids, (size_t)(p->nkids + 1) * sizeof(*k));
	if (!k)
		abort();
	p->kids = k;
	k = &p->kids[p->nkids++];
	memset(k, 0, sizeof(*k));
	k->name = xstrdup(name);
	k->kind = P_SUB;
	return k;
}

/* Adds the node for dotted path (relative to p) and returns it (kind to be set by caller). */
static int pnode_add(struct pnode *p, const char *path, struct pnode **out, struct dfs_err *err)
{
	char *dup = xstrdup(path), *c = dup;
	int rc = 0;

	if (!*path || path[0] == '$') {
		free(dup);
		return dfs_err_set(err, DFS_EINVAL, "field path '%s' is invalid in a projection",
				   path);
	}
	for (;;) {
		char *dot = strchr(c, '.');
		struct pnode *k;

		if (dot)
			*dot = 0;
		if (!*c) {
			rc = dfs_err_set(err, DFS_EINVAL, "field path '%s' has an empty component",
					 path);
			break;
		}
		k = pnode_child(p, c, true);
		if (!dot) {
			if (k->kind != P_SUB || k->nkids) {
				rc = dfs_err_set(err, DFS_EINVAL, "path collision at '%s'", path);
				break;
			}
			*out = k;
			break;
		}
		if (k->kind != P_SUB) {
			rc = dfs_err_set(err, DFS_EINVAL, "path collision at '%s'", path);
			break;
		}
		p = k;
		c = dot + 1;
	}
	free(dup);
	return rc;
}

static bool is_plain_doc(const bson_iter_t *it)
{
	bson_iter_t k;

	if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &k))
		return false;
	if (!bson_iter_next(&k))
		return false; /* {} is an (empty) object expression */
	return bson_iter_key(&k)[0] != '$';
}

static void mark_exprs(struct pnode *p)
{
	for (int i = 0; i < p->nkids; i++) {
		if (p->kids[i].kind == P_SUB)
			mark_exprs(&p->kids[i]);
		if (p->kids[i].kind == P_EXPR || (p->kids[i].kind == P_SUB && p->kids[i].has_expr))
			p->has_expr = true;
	}
}

/* Parses the spec document into p's subtree. mode: 0 $project, 1 $addFields. *incl and *excl
 * count the inclusions (computed fields among them) and exclusions but _id; *metas the
 * {$meta: ..} fields, which are neither (MongoDB's projection parser), *nested_metas those
 * below the top level. */
static int parse_proj_doc(struct pstage *s, struct pnode *p, const char *prefix, bson_iter_t *it,
			  int mode, const struct agg__scope *sc, int *incl, int *excl, int *metas,
			  int *nested_metas, struct dfs_err *err)
{
	int rc;

	while (bson_iter_next(it)) {
		const char *k = bson_iter_key(it);
		const bson_value_t *v = bson_iter_value(it);
		struct pnode *n;
		char full[512];

		snprintf(full, sizeof(full), "%s%s%s", prefix, *prefix ? "." : "", k);
		if ((rc = pnode_add(p, k, &n, err)))
			return rc;
		if (is_plain_doc(it)) {
			bson_iter_t sub;

			bson_iter_recurse(it, &sub);
			if ((rc = parse_proj_doc(s, n, full, &sub, mode, sc, incl, excl, metas,
						 nested_metas, err)))
				return rc;
			continue;
		}
		if (mode == 0 && (v->value_type == BSON_TYPE_BOOL || agg__is_number(v))) {
			bool on = agg__truthy(v);

			n->kind = on ? P_INC : P_EXC;
			if (strcmp(full, "_id"))
				(*(on ? incl : excl))++;
			continue;
		}
		if (mode == 0 && v->value_type == BSON_TYPE_DOCUMENT) {
			bson_iter_t k2;

			/* {} as a projection value */
			if (bson_iter_recurse(it, &k2) && !bson_iter_next(&k2))
				return dfs_err_set(err, DFS_EINVAL,
						   "an empty object is not a valid value for '%s'",
						   full);
		}
		n->kind = P_EXPR;
		if ((rc = agg__x_parse(v, sc, &n->x, err)))
			return rc;
		if (mode == 0 && agg__x_is_meta(n->x)) {
			(*metas)++;
			if (strchr(full, '.'))
				(*nested_metas)++;
		} else if (mode == 0 && strcmp(full, "_id")) {
			(*incl)++;
		}
	}
	return 0;
}

/* Does p's subtree compute a field with anything but {$meta: ..}? */
static bool non_meta_expr(const struct pnode *p)
{
	for (int i = 0; i < p->nkids; i++)
		if ((p->kids[i].kind == P_EXPR && !agg__x_is_meta(p->kids[i].x)) ||
		    (p->kids[i].kind == P_SUB && non_meta_expr(&p->kids[i])))
			return true;
	return false;
}

static int parse_project(struct pstage *s, const bson_iter_t *it, int mode,
			 const struct agg__scope *sc, struct dfs_err *err)
{
	bson_iter_t f;
	int incl = 0, excl = 0, metas = 0, nested_metas = 0, rc;
	struct pnode *id;

	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return dfs_err_set(err, DFS_EINVAL, "%s specification must be an object", s->name);
	bson_iter_recurse(it, &f);
	if ((rc = parse_proj_doc(s, &s->root, "", &f, mode, sc, &incl, &excl, &metas, &nested_metas,
				 err)))
		return rc;
	if (s->root.nkids == 0 && mode == 0)
		return dfs_err_set(err, DFS_EINVAL, "$project requires at least one output field");
	mark_exprs(&s->root);
	if (mode == 1)
		return 0;
	if (incl && excl)
		return dfs_err_set(err, DFS_EINVAL,
				   "invalid $project: cannot do exclusion on a field in inclusion "
				   "projection");
	/* without inclusions and exclusions, a $meta makes it an inclusion (in aggregation,
	 * unlike find) */
	s->inclusion = incl > 0 || !excl;
	id = pnode_child(&s->root, "_id", false);
	if (s->inclusion) {
		if (!excl && !incl && !metas && id && id->kind == P_EXC) {
			/* only {_id: 0}: an exclusion */
			s->inclusion = false;
		} else if (!id) {
			id = pnode_child(&s->root, "_id", true);
			id->kind = P_INC;
			/* keep _id first: move it to the front */
			if (s->root.nkids > 1) {
				struct pnode t = s->root.kids[s->root.nkids - 1];

				memmove(&s->root.kids[1], &s->root.kids[0],
					(size_t)(s->root.nkids - 1) * sizeof(t));
				s->root.kids[0] = t;
			}
		}
	} else if (non_meta_expr(&s->root)) {
		return dfs_err_set(err, DFS_EINVAL,
				   "invalid $project: cannot use an expression other than $meta "
				   "in an exclusion projection");
	} else if (nested_metas) {
		return dfs_err_set(err, DFS_EINVAL,
				   "invalid $project: $meta in an exclusion projection is "
				   "supported at the top level only");
	}
	return 0;
}

static int parse_unset(struct pstage *s, const bson_iter_t *it, struct dfs_err *err)
{
	bson_iter_t a;
	struct pnode *n;
	int rc, cnt = 0;

	s->inclusion = false;
	if (BSON_ITER_HOLDS_UTF8(it)) {
		if ((rc = pnode_add(&s->root, bson_iter_utf8(it, NULL), &n, err)))
			return rc;
		n->kind = P_EXC;
		return 0;
	}
	if (!BSON_ITER_HOLDS_ARRAY(it))
		return dfs_err_set(err, DFS_EINVAL,
				   "$unset specification must be a string or an array");
	bson_iter_recurse(it, &a);
	while (bson_iter_next(&a)) {
		if (!BSON_ITER_HOLDS_UTF8(&a))
			return dfs_err_set(err, DFS_EINVAL,
					   "$unset specification must be a string or an array "
					   "containing only string values");
		if ((rc = pnode_add(&s->root, bson_iter_utf8(&a, NULL), &n, err)))
			return rc;
		n->kind = P_EXC;
		cnt++;
	}
	if (!cnt)
		return dfs_err_set(err, DFS_EINVAL, "$unset specification must not be empty");
	return 0;
}

/* ---- $group / $bucket / $sortByCount ------------------------------------------------- */

static const struct {
	const char *name;
	int op;
} acc_names[] = {{"$sum", A_SUM},
		 {"$avg", A_AVG},
		 {"$min", A_MIN},
		 {"$max", A_MAX},
		 {"$first", A_FIRST},
		 {"$last", A_LAST},
		 {"$push", A_PUSH},
		 {"$addToSet", A_ADDTOSET},
		 {"$count", A_COUNT},
		 {"$stdDevPop", A_STDDEVPOP},
		 {"$mergeObjects", A_MERGEOBJECTS}};

static int parse_acc(struct acc *a, const char *field, const bson_iter_t *it,
		     const struct agg__scope *sc, struct dfs_err *err)
{
	bson_iter_t d;
	const char *op;
	size_t i;

	a->name = xstrdup(field);
	if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &d) || !bson_iter_next(&d))
		return dfs_err_set(err, DFS_EINVAL, "the field '%s' must be an accumulator object",
				   field);
	op = bson_iter_key(&d);
	for (i = 0; i < sizeof(acc_names) / sizeof(*acc_names); i++)
		if (!strcmp(acc_names[i].name, op))
			break;
	if (i == sizeof(acc_names) / sizeof(*acc_names))
		return dfs_err_set(err, DFS_EINVAL, "unknown group operator '%s'", op);
	a->op = acc_names[i].op;
	if (a->op == A_COUNT) {
		bson_iter_t e;

		if (!BSON_ITER_HOLDS_DOCUMENT(&d) || !bson_iter_recurse(&d, &e) ||
		    bson_iter_next(&e))
			return dfs_err_set(err, DFS_EINVAL,
					   "$count takes no arguments, i.e. $count:{}");
	} else {
		if (BSON_ITER_HOLDS_ARRAY(&d))
			return dfs_err_set(err, DFS_EINVAL,
					   "the %s accumulator is a unary operator", op);
		if (agg__x_parse(bson_iter_value(&d), sc, &a->x, err))
			return err->code;
	}
	if (bson_iter_next(&d))
		return dfs_err_set(err, DFS_EINVAL, "the field '%s' must specify one accumulator",
				   field);
	return 0;
}

static struct acc *acc_push(struct pstage *s)
{
	struct acc *a = realloc(s->accs, (size_t)(s->naccs + 1) * sizeof(*a));

	if (!a)
		abort();
	s->accs = a;
	memset(&a[s->naccs], 0, sizeof(*a));
	return &a[s->naccs++];
}

static int parse_group(struct pstage *s, const bson_iter_t *it, const struct agg__scope *sc,
		       struct dfs_err *err)
{
	bson_iter_t f;
	bool have_id = false;
	int rc;

	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return dfs_err_set(err, DFS_EINVAL,
				   "a group's fields must be specified in an "
				   "object");
	bson_iter_recurse(it, &f);
	while (bson_iter_next(&f)) {
		const char *k = bson_iter_key(&f);

		if (!strcmp(k, "_id")) {
			have_id = true;
			if ((rc = agg__x_parse(bson_iter_value(&f), sc, &s->id, err)))
				return rc;
			continue;
		}
		if (strchr(k, '.'))
			return dfs_err_set(err, DFS_EINVAL,
					   "the group aggregate field name '%s' cannot be used "
					   "because $group's field names cannot contain '.'",
					   k);
		if (k[0] == '$')
			return dfs_err_set(err, DFS_EINVAL,
					   "the group aggregate field name '%s' cannot be an "
					   "operator name",
					   k);
		if ((rc = parse_acc(acc_push(s), k, &f, sc, err)))
			return rc;
	}
	if (!have_id)
		return dfs_err_set(err, DFS_EINVAL, "a group specification must include an _id");
	return 0;
}

static int parse_bucket(struct pstage *s, const bson_iter_t *it, const struct agg__scope *sc,
			struct dfs_err *err)
{
	bson_iter_t f, b;
	bool have_group = false, have_output = false;
	int rc;

	s->kind = S_GROUP;
	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return dfs_err_set(err, DFS_EINVAL, "the $bucket argument must be an object");
	bson_iter_recurse(it, &f);
	while (bson_iter_next(&f)) {
		const char *k = bson_iter_key(&f);

		if (!strcmp(k, "groupBy")) {
			const bson_value_t *v = bson_iter_value(&f);

			if (!(v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.str[0] == '$') &&
			    v->value_type != BSON_TYPE_DOCUMENT)
				return dfs_err_set(err, DFS_EINVAL,
						   "$bucket: 'groupBy' must be a path or an "
						   "expression object");
			have_group = true;
			if ((rc = agg__x_parse(v, sc, &s->id, err)))
				return rc;
		} else if (!strcmp(k, "boundaries")) {
			if (!BSON_ITER_HOLDS_ARRAY(&f))
				return dfs_err_set(err, DFS_EINVAL,
						   "$bucket: 'boundaries' must be an array");
			bson_iter_recurse(&f, &b);
			while (bson_iter_next(&b)) {
				bson_value_t *nb =
					realloc(s->bounds, (size_t)(s->nbounds + 1) * sizeof(*nb));

				if (!nb)
					abort();
				s->bounds = nb;
				bson_value_copy(bson_iter_value(&b), &s->bounds[s->nbounds++]);
			}
		} else if (!strcmp(k, "default")) {
			bson_value_copy(bson_iter_value(&f), &s->bdefault);
		} else if (!strcmp(k, "output")) {
			bson_iter_t o;

			if (!BSON_ITER_HOLDS_DOCUMENT(&f))
				return dfs_err_set(err, DFS_EINVAL,
						   "$bucket: 'output' must be an object");
			have_output = true;
			bson_iter_recurse(&f, &o);
			while (bson_iter_next(&o))
				if ((rc = parse_acc(acc_push(s), bson_iter_key(&o), &o, sc, err)))
					return rc;
		} else {
			return dfs_err_set(err, DFS_EINVAL, "$bucket: unrecognized option '%s'", k);
		}
	}
	if (!have_group || s->nbounds == 0)
		return dfs_err_set(err, DFS_EINVAL,
				   "$bucket requires 'groupBy' and 'boundaries' to be specified");
	if (s->nbounds < 2)
		return dfs_err_set(err, DFS_EINVAL,
				   "$bucket: 'boundaries' must have at least 2 values");
	for (int i = 0; i < s->nbounds; i++) {
		if (agg__nullish(&s->bounds[i]))
			return dfs_err_set(err, DFS_EINVAL,
					   "$bucket: 'boundaries' must be constant values, not %s",
					   agg__type_name(&s->bounds[i]));
		if (i && store_type_bracket(s->bounds[i].value_type) !=
				 store_type_bracket(s->bounds[0].value_type))
			return dfs_err_set(err, DFS_EINVAL,
					   "$bucket: all values in 'boundaries' must have the same "
					   "type");
		if (i && agg__cmp(&s->bounds[i - 1], &s->bounds[i]) >= 0)
			return dfs_err_set(
				err, DFS_EINVAL,
				"$bucket: 'boundaries' must be sorted in ascending order");
	}
	if (s->bdefault.value_type != BSON_TYPE_EOD &&
	    store_type_bracket(s->bdefault.value_type) ==
		    store_type_bracket(s->bounds[0].value_type) &&
	    agg__cmp(&s->bdefault, &s->bounds[0]) >= 0 &&
	    agg__cmp(&s->bdefault, &s->bounds[s->nbounds - 1]) < 0)
		return dfs_err_set(err, DFS_EINVAL,
				   "$bucket: the default value must be less than the lowest "
				   "boundary or greater than or equal to the highest boundary");
	if (!have_output) {
		struct acc *a = acc_push(s);
		bson_value_t one = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 1};

		a->name = xstrdup("count");
		a->op = A_SUM;
		if ((rc = agg__x_parse(&one, sc, &a->x, err)))
			return rc;
	}
	return 0;
}

/* ---- other stages -------------------------------------------------------------------- */

static int int_value(const bson_iter_t *it, int64_t *out)
{
	const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
	long double d;

	if (!agg__is_number(v))
		return -1;
	d = agg__num_ld(v);
	if (d != (long double)(int64_t)d)
		return -1;
	*out = (int64_t)d;
	return 0;
}

static int parse_unwind(struct pstage *s, const bson_iter_t *it, struct dfs_err *err)
{
	const char *path = NULL;
	bson_iter_t f;

	if (BSON_ITER_HOLDS_UTF8(it)) {
		path = bson_iter_utf8(it, NULL);
	} else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
		bson_iter_recurse(it, &f);
		while (bson_iter_next(&f)) {
			const char *k = bson_iter_key(&f);

			if (!strcmp(k, "path")) {
				if (!BSON_ITER_HOLDS_UTF8(&f))
					return dfs_err_set(err, DFS_EINVAL,
							   "expected a string as the path for "
							   "$unwind stage");
				path = bson_iter_utf8(&f, NULL);
			} else if (!strcmp(k, "includeArrayIndex")) {
				const char *ix;

				if (!BSON_ITER_HOLDS_UTF8(&f))
					return dfs_err_set(
						err, DFS_EINVAL,
						"expected a non-empty string for the "
						"includeArrayIndex option to $unwind stage");
				ix = bson_iter_utf8(&f, NULL);
				if (!*ix || ix[0] == '$')
					return dfs_err_set(
						err, DFS_EINVAL,
						"includeArrayIndex option to $unwind "
						"stage should not be prefixed with a '$'");
				s->index_field = xstrdup(ix);
			} else if (!strcmp(k, "preserveNullAndEmptyArrays")) {
				if (!BSON_ITER_HOLDS_BOOL(&f))
					return dfs_err_set(err, DFS_EINVAL,
							   "expected a boolean for the "
							   "preserveNullAndEmptyArrays option");
				s->preserve = bson_iter_bool(&f);
			} else {
				return dfs_err_set(err, DFS_EINVAL,
						   "unrecognized option to $unwind stage: %s", k);
			}
		}
	} else {
		return dfs_err_set(err, DFS_EINVAL,
				   "expected either a string or an object as specification for "
				   "$unwind stage");
	}
	if (!path)
		return dfs_err_set(err, DFS_EINVAL, "no path specified to $unwind stage");
	if (path[0] != '$')
		return dfs_err_set(err, DFS_EINVAL,
				   "path option to $unwind stage should be prefixed with a '$': %s",
				   path);
	s->path = xstrdup(path + 1);
	return split("$unwind path", path + 1, &s->comp, &s->ncomp, &s->buf, err);
}

static int parse_lookup(struct pstage *s, const bson_iter_t *it, const struct agg__scope *sc,
			struct dfs_err *err)
{
	bson_iter_t f;
	const uint8_t *data;
	uint32_t len;
	bool have_pipeline = false;
	int rc;
	struct agg__scope *scopes = NULL;
	bson_t sub;

	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return dfs_err_set(err, DFS_EINVAL, "the $lookup argument must be an object");
	bson_iter_recurse(it, &f);
	while (bson_iter_next(&f)) {
		const char *k = bson_iter_key(&f);
		char **slot = NULL;

		if (!strcmp(k, "from"))
			slot = &s->from;
		else if (!strcmp(k, "localField"))
			slot = &s->local;
		else if (!strcmp(k, "foreignField"))
			slot = &s->foreign;
		else if (!strcmp(k, "as"))
			slot = &s->as;
		if (slot) {
			if (!BSON_ITER_HOLDS_UTF8(&f))
				return dfs_err_set(err, DFS_EINVAL,
						   "$lookup argument '%s' must be a string", k);
			free(*slot);
			*slot = xstrdup(bson_iter_utf8(&f, NULL));
		} else if (!strcmp(k, "let")) {
			bson_iter_t l;

			if (!BSON_ITER_HOLDS_DOCUMENT(&f))
				return dfs_err_set(err, DFS_EINVAL,
						   "$lookup argument 'let' must be an object");
			bson_iter_recurse(&f, &l);
			while (bson_iter_next(&l)) {
				s->let_names = realloc(s->let_names,
						       (size_t)(s->nlet + 1) * sizeof(char *));
				s->let_x = realloc(s->let_x,
						   (size_t)(s->nlet + 1) * sizeof(*s->let_x));
				if (!s->let_names || !s->let_x)
					abort();
				s->let_names[s->nlet] = xstrdup(bson_iter_key(&l));
				s->let_x[s->nlet] = NULL;
				s->nlet++;
				if ((rc = agg__x_parse(bson_iter_value(&l), sc,
						       &s->let_x[s->nlet - 1], err)))
					return rc;
			}
		} else if (!strcmp(k, "pipeline")) {
			if (!BSON_ITER_HOLDS_ARRAY(&f))
				return dfs_err_set(err, DFS_EINVAL,
						   "$lookup argument 'pipeline' must be an array");
			have_pipeline = true;
		} else {
			return dfs_err_set(err, DFS_EINVAL, "unknown argument to $lookup: %s", k);
		}
	}
	if (!s->from)
		return dfs_err_set(err, DFS_EINVAL, "$lookup requires 'from'");
	if (!s->as)
		return dfs_err_set(err, DFS_EINVAL, "must specify 'as' field for a $lookup");
	if ((rc = split("$lookup 'as'", s->as, &s->ascomp, &s->nascomp, &s->asbuf, err)))
		return rc;
	if (have_pipeline) {
		if (!s->local != !s->foreign)
			return dfs_err_set(err, DFS_EINVAL,
					   "$lookup requires both or neither of 'localField' and "
					   "'foreignField'");
		scopes = calloc((size_t)s->nlet + 1, sizeof(*scopes));
		if (!scopes)
			abort();
		for (int i = 0; i < s->nlet; i++) {
			scopes[i].name = s->let_names[i];
			scopes[i].up = i ? &scopes[i - 1] : sc; /* the enclosing ones stay visible,
								 * as lookup_next chains them */
		}
		bson_iter_recurse(it, &f);
		bson_iter_find(&f, "pipeline");
		bson_iter_array(&f, &len, &data);
		if (!bson_init_static(&sub, data, len)) {
			free(scopes);
			return dfs_err_set(err, DFS_EINVAL, "bad $lookup pipeline");
		}
		rc = parse_pipeline(&sub, s->nlet ? &scopes[s->nlet - 1] : sc, &s->sub, err);
		free(scopes);
		if (rc)
			return dfs_err_prefix(err, "$lookup pipeline: ");
		if (s->sub->writes)
			return dfs_err_set(err, DFS_EINVAL,
					   "$out and $merge are not allowed in a $lookup pipeline");
		if (s->local) /* the concise form: the equality, then the pipeline */
			return split("$lookup 'localField'", s->local, &s->lcomp, &s->nlcomp,
				     &s->lbuf, err);
		return 0;
	}
	if (s->nlet)
		return dfs_err_set(err, DFS_EINVAL, "$lookup 'let' needs a 'pipeline'");
	if (!s->local || !s->foreign)
		return dfs_err_set(err, DFS_EINVAL,
				   "$lookup requires either 'pipeline' or both 'localField' and "
				   "'foreignField' to be specified");
	return split("$lookup 'localField'", s->local, &s->lcomp, &s->nlcomp, &s->lbuf, err);
}

static int parse_facet(struct pstage *s, const bson_iter_t *it, const struct agg__scope *sc,
		       struct dfs_err *err)
{
	bson_iter_t f;
	const uint8_t *data;
	uint32_t len;
	bson_t sub;
	int rc;

	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return dfs_err_set(err, DFS_EINVAL, "the argument to $facet must be an object");
	bson_iter_recurse(it, &f);
	while (bson_iter_next(&f)) {
		const char *k = bson_iter_key(&f);

		if (!*k || k[0] == '$' || strchr(k, '.'))
			return dfs_err_set(err, DFS_EINVAL, "$facet: invalid output field '%s'", k);
		if (!BSON_ITER_HOLDS_ARRAY(&f))
			return dfs_err_set(err, DFS_EINVAL,
					   "$facet: arguments must be arrays, '%s' is not", k);
		s->facet_names = realloc(s->facet_names, (size_t)(s->nfacets + 1) * sizeof(char *));
		s->facets = realloc(s->facets, (size_t)(s->nfacets + 1) * sizeof(*s->facets));
		if (!s->facet_names || !s->facets)
			abort();
		s->facet_names[s->nfacets] = xstrdup(k);
		s->facets[s->nfacets] = NULL;
		s->nfacets++;
		bson_iter_array(&f, &len, &data);
		if (!bson_init_static(&sub, data, len))
			return dfs_err_set(err, DFS_EINVAL, "bad $facet pipeline");
		if ((rc = parse_pipeline(&sub, sc, &s->facets[s->nfacets - 1], err)))
			return dfs_err_prefix(err, "$facet '%s': ", k);
		for (int i = 0; i < s->facets[s->nfacets - 1]->n; i++) {
			int kd = s->facets[s->nfacets - 1]->st[i].kind;

			if (kd == S_OUT || kd == S_MERGE || kd == S_FACET)
				return dfs_err_set(err, DFS_EINVAL,
						   "%s is not allowed to be used within a $facet "
						   "stage",
						   s->facets[s->nfacets - 1]->st[i].name);
		}
	}
	if (!s->nfacets)
		return dfs_err_set(err, DFS_EINVAL,
				   "the $facet specification must be a non-empty "
				   "object");
	return 0;
}

/* The target of $out/$merge: "coll" or {db, coll}; the db (*db, Owned, or NULL) is checked
 * against the transaction's database when the pipeline runs. */
static int target_name(const bson_iter_t *it, const char *stage, char **out, char **db,
		       struct dfs_err *err)
{
	bson_iter_t f;

	if (BSON_ITER_HOLDS_UTF8(it)) {
		*out = xstrdup(bson_iter_utf8(it, NULL));
	} else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
		bson_iter_recurse(it, &f);
		while (bson_iter_next(&f)) {
			if (!strcmp(bson_iter_key(&f), "coll") && BSON_ITER_HOLDS_UTF8(&f)) {
				free(*out);
				*out = xstrdup(bson_iter_utf8(&f, NULL));
			} else if (!strcmp(bson_iter_key(&f), "db") && BSON_ITER_HOLDS_UTF8(&f)) {
				free(*db);
				*db = xstrdup(bson_iter_utf8(&f, NULL));
			} else {
				return dfs_err_set(err, DFS_EINVAL, "%s: bad target field '%s'",
						   stage, bson_iter_key(&f));
			}
		}
		if (!*out)
			return dfs_err_set(err, DFS_EINVAL, "%s: the target needs 'coll'", stage);
	} else {
		return dfs_err_set(err, DFS_EINVAL, "%s: the target must be a string or {db, coll}",
				   stage);
	}
	return store_coll_name_check(*out, err);
}

static int parse_merge(struct pstage *s, const bson_iter_t *it, struct dfs_err *err)
{
	bson_iter_t f;
	int rc;

	s->when_matched = 0;
	s->when_not_matched = 0;
	if (BSON_ITER_HOLDS_UTF8(it))
		return target_name(it, "$merge", &s->from, &s->out_db, err);
	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return dfs_err_set(err, DFS_EINVAL, "$merge requires a string or an object");
	bson_iter_recurse(it, &f);
	while (bson_iter_next(&f)) {
		const char *k = bson_iter_key(&f);
		const char *v = BSON_ITER_HOLDS_UTF8(&f) ? bson_iter_utf8(&f, NULL) : NULL;

		if (!strcmp(k, "into")) {
			if ((rc = target_name(&f, "$merge", &s->from, &s->out_db, err)))
				return rc;
		} else if (!strcmp(k, "on")) {
			if (v && !strcmp(v, "_id"))
				continue;
			if (BSON_ITER_HOLDS_ARRAY(&f)) {
				bson_iter_t a;

				bson_iter_recurse(&f, &a);
				if (bson_iter_next(&a) && BSON_ITER_HOLDS_UTF8(&a) &&
				    !strcmp(bson_iter_utf8(&a, NULL), "_id") && !bson_iter_next(&a))
					continue;
			}
			return dfs_err_set(err, DFS_EINVAL,
					   "$merge: only on: \"_id\" is supported");
		} else if (!strcmp(k, "whenMatched")) {
			static const char *const m[] = {"merge", "replace", "keepExisting", "fail"};
			int i;

			for (i = 0; i < 4 && (!v || strcmp(v, m[i])); i++)
				;
			if (i == 4)
				return dfs_err_set(err, DFS_EINVAL,
						   "$merge: 'whenMatched' must be merge, replace, "
						   "keepExisting or fail");
			s->when_matched = i;
		} else if (!strcmp(k, "whenNotMatched")) {
			static const char *const m[] = {"insert", "discard", "fail"};
			int i;

			for (i = 0; i < 3 && (!v || strcmp(v, m[i])); i++)
				;
			if (i == 3)
				return dfs_err_set(
					err, DFS_EINVAL,
					"$merge: 'whenNotMatched' must be insert, discard "
					"or fail");
			s->when_not_matched = i;
		} else {
			return dfs_err_set(err, DFS_EINVAL, "$merge: unknown option '%s'", k);
		}
	}
	if (!s->from)
		return dfs_err_set(err, DFS_EINVAL, "$merge requires 'into'");
	return 0;
}

/* ---- the pipeline -------------------------------------------------------------------- */

static struct pstage *stage_push(struct query_pipeline *p, int index, int kind, const char *name)
{
	struct pstage *s = realloc(p->st, (size_t)(p->n + 1) * sizeof(*s));

	if (!s)
		abort();
	p->st = s;
	s = &p->st[p->n++];
	memset(s, 0, sizeof(*s));
	s->index = index;
	s->kind = kind;
	s->name = name;
	return s;
}

static int parse_sort_spec(struct pstage *s, const bson_iter_t *it, struct dfs_err *err)
{
	const uint8_t *data;
	uint32_t len;
	bson_t spec;
	bson_iter_t f;

	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return dfs_err_set(err, DFS_EINVAL,
				   "the $sort key specification must be an object");
	bson_iter_document(it, &len, &data);
	if (!bson_init_static(&spec, data, len))
		return dfs_err_set(err, DFS_EINVAL, "bad $sort document");
	bson_iter_init(&f, &spec);
	if (!bson_iter_next(&f))
		return dfs_err_set(err, DFS_EINVAL, "$sort stage must have at least one sort key");
	s->sort_spec = bson_copy(&spec);
	return query_sort_parse(s->sort_spec, &s->sort, err);
}

static int parse_stage(struct query_pipeline *p, int index, const bson_iter_t *sit,
		       const struct agg__scope *sc, struct dfs_err *err)
{
	bson_iter_t d;
	const char *name;
	struct pstage *s;
	int64_t n;

	if (!BSON_ITER_HOLDS_DOCUMENT(sit) || !bson_iter_recurse(sit, &d) || !bson_iter_next(&d))
		return dfs_err_set(err, DFS_EINVAL,
				   "a pipeline stage specification object must contain exactly "
				   "one field");
	name = bson_iter_key(&d);
	{
		bson_iter_t more = d;

		if (bson_iter_next(&more))
			return dfs_err_set(err, DFS_EINVAL,
					   "a pipeline stage specification object must contain "
					   "exactly one field");
	}
#define IS(x) (!strcmp(name, x))
	if (IS("$match")) {
		s = stage_push(p, index, S_MATCH, "$match");
		return parse_match(s, &d, sc, err);
	}
	if (IS("$project")) {
		s = stage_push(p, index, S_PROJECT, "$project");
		return parse_project(s, &d, 0, sc, err);
	}
	if (IS("$addFields") || IS("$set")) {
		s = stage_push(p, index, S_ADDFIELDS, IS("$set") ? "$set" : "$addFields");
		return parse_project(s, &d, 1, sc, err);
	}
	if (IS("$unset")) {
		s = stage_push(p, index, S_PROJECT, "$unset");
		return parse_unset(s, &d, err);
	}
	if (IS("$group")) {
		s = stage_push(p, index, S_GROUP, "$group");
		return parse_group(s, &d, sc, err);
	}
	if (IS("$bucket")) {
		s = stage_push(p, index, S_GROUP, "$bucket");
		return parse_bucket(s, &d, sc, err);
	}
	if (IS("$sortByCount")) {
		const bson_value_t *v = bson_iter_value(&d);
		bson_value_t one = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 1};
		bson_t spec = BSON_INITIALIZER;
		struct acc *a;
		int rc;

		/* a "$path" or an operator document ({} and {a: ..} are not accepted) */
		if (!(v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.str[0] == '$') &&
		    !(v->value_type == BSON_TYPE_DOCUMENT && !is_plain_doc(&d) &&
		      v->value.v_doc.data_len > 5))
			return dfs_err_set(err, DFS_EINVAL,
					   "the argument to $sortByCount must be a $-prefixed path "
					   "or an operator expression");
		s = stage_push(p, index, S_GROUP, "$sortByCount");
		if ((rc = agg__x_parse(v, sc, &s->id, err)))
			return rc;
		a = acc_push(s);
		a->name = xstrdup("count");
		a->op = A_SUM;
		if ((rc = agg__x_parse(&one, sc, &a->x, err)))
			return rc;
		s = stage_push(p, index, S_SORT, "$sortByCount");
		BSON_APPEND_INT32(&spec, "count", -1);
		s->sort_spec = bson_copy(&spec);
		bson_destroy(&spec);
		return query_sort_parse(s->sort_spec, &s->sort, err);
	}
	if (IS("$sort")) {
		s = stage_push(p, index, S_SORT, "$sort");
		return parse_sort_spec(s, &d, err);
	}
	if (IS("$limit") || IS("$skip") || IS("$sample")) {
		bool lim = IS("$limit");

		s = stage_push(p, index,
			       lim	     ? S_LIMIT
			       : IS("$skip") ? S_SKIP
					     : S_SAMPLE,
			       lim	     ? "$limit"
			       : IS("$skip") ? "$skip"
					     : "$sample");
		if (s->kind == S_SAMPLE) {
			bson_iter_t f;

			if (!BSON_ITER_HOLDS_DOCUMENT(&d) || !bson_iter_recurse(&d, &f) ||
			    !bson_iter_find(&f, "size") || int_value(&f, &n) || n < 0)
				return dfs_err_set(
					err, DFS_EINVAL,
					"$sample requires a non-negative integer 'size'");
			s->n = n;
			return 0;
		}
		if (int_value(&d, &n))
			return dfs_err_set(err, DFS_EINVAL, "the %s must be specified as a number",
					   lim ? "limit" : "skip");
		if (lim && n <= 0)
			return dfs_err_set(err, DFS_EINVAL, "the limit must be positive");
		if (!lim && n < 0)
			return dfs_err_set(err, DFS_EINVAL, "the skip must be non-negative");
		s->n = n;
		return 0;
	}
	if (IS("$unwind")) {
		s = stage_push(p, index, S_UNWIND, "$unwind");
		return parse_unwind(s, &d, err);
	}
	if (IS("$count")) {
		const char *f;

		s = stage_push(p, index, S_COUNT, "$count");
		if (!BSON_ITER_HOLDS_UTF8(&d))
			return dfs_err_set(err, DFS_EINVAL, "the count field must be a string");
		f = bson_iter_utf8(&d, NULL);
		if (!*f)
			return dfs_err_set(err, DFS_EINVAL,
					   "the count field must be a non-empty "
					   "string");
		if (f[0] == '$')
			return dfs_err_set(err, DFS_EINVAL,
					   "the count field cannot be a $-prefixed "
					   "path");
		if (strchr(f, '.'))
			return dfs_err_set(err, DFS_EINVAL, "the count field cannot contain '.'");
		s->as = xstrdup(f);
		return 0;
	}
	if (IS("$lookup")) {
		s = stage_push(p, index, S_LOOKUP, "$lookup");
		return parse_lookup(s, &d, sc, err);
	}
	if (IS("$replaceRoot") || IS("$replaceWith")) {
		bson_iter_t f;

		s = stage_push(p, index, S_REPLACEROOT,
			       IS("$replaceRoot") ? "$replaceRoot" : "$replaceWith");
		if (IS("$replaceWith"))
			return agg__x_parse(bson_iter_value(&d), sc, &s->root_x, err);
		if (!BSON_ITER_HOLDS_DOCUMENT(&d) || !bson_iter_recurse(&d, &f) ||
		    !bson_iter_find(&f, "newRoot"))
			return dfs_err_set(err, DFS_EINVAL,
					   "no newRoot specified for the $replaceRoot stage");
		return agg__x_parse(bson_iter_value(&f), sc, &s->root_x, err);
	}
	if (IS("$facet")) {
		s = stage_push(p, index, S_FACET, "$facet");
		return parse_facet(s, &d, sc, err);
	}
	if (IS("$out")) {
		s = stage_push(p, index, S_OUT, "$out");
		return target_name(&d, "$out", &s->from, &s->out_db, err);
	}
	if (IS("$merge")) {
		s = stage_push(p, index, S_MERGE, "$merge");
		return parse_merge(s, &d, err);
	}
#undef IS
	return dfs_err_set(err, DFS_EINVAL, "unrecognized pipeline stage name: '%s'", name);
}

static int parse_pipeline(const bson_t *pipeline, const struct agg__scope *sc,
			  struct query_pipeline **out, struct dfs_err *err)
{
	struct query_pipeline *p = calloc(1, sizeof(*p));
	bson_iter_t it;
	int index = 0, rc = 0;

	if (!p)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	*out = NULL;
	if (!bson_iter_init(&it, pipeline)) {
		query_pipeline_free(p);
		return dfs_err_set(err, DFS_EINVAL, "the pipeline is not valid BSON");
	}
	while (bson_iter_next(&it)) {
		if ((rc = parse_stage(p, index, &it, sc, err))) {
			dfs_err_prefix(err, "stage %d: ", index);
			query_pipeline_free(p);
			return rc;
		}
		index++;
	}
	for (int i = 0; i < p->n; i++) {
		/* MongoDB's DocumentSourceMatch::setSource: only a first $match's $text can
		 * be answered (by the find, note 1) */
		if (p->st[i].kind == S_MATCH && i > 0 && query_filter_has_text(p->st[i].fx)) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "stage %d: $match with $text is only allowed as the first "
					 "pipeline stage",
					 p->st[i].index);
			query_pipeline_free(p);
			return rc;
		}
		if ((p->st[i].kind == S_OUT || p->st[i].kind == S_MERGE) && i != p->n - 1) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "stage %d: %s can only be the final stage in the pipeline",
					 p->st[i].index, p->st[i].name);
			query_pipeline_free(p);
			return rc;
		}
	}
	p->writes = p->n && (p->st[p->n - 1].kind == S_OUT || p->st[p->n - 1].kind == S_MERGE);
	p->spec = bson_copy(pipeline);
	*out = p;
	return 0;
}

static bool pnode_uses_score(const struct pnode *p)
{
	for (int i = 0; i < p->nkids; i++)
		if (agg__x_uses_score(p->kids[i].x) || pnode_uses_score(&p->kids[i]))
			return true;
	return false;
}

/* Does stage s evaluate {$meta: "textScore"} (its sub-pipelines aside)? */
static bool stage_uses_score(const struct pstage *s)
{
	switch (s->kind) {
	case S_MATCH:
		for (int k = 0; k < s->nmx; k++)
			if (agg__x_uses_score(s->mx[k]))
				return true;
		return false;
	case S_PROJECT:
	case S_ADDFIELDS:
		return pnode_uses_score(&s->root);
	case S_GROUP:
		if (agg__x_uses_score(s->id))
			return true;
		for (int k = 0; k < s->naccs; k++)
			if (agg__x_uses_score(s->accs[k].x))
				return true;
		return false;
	case S_SORT:
		return query_sort_has_meta(s->sort);
	case S_REPLACEROOT:
		return agg__x_uses_score(s->root_x);
	case S_LOOKUP:
		for (int k = 0; k < s->nlet; k++)
			if (agg__x_uses_score(s->let_x[k]))
				return true;
		return false;
	default:
		return false;
	}
}

/* Note 7: {$meta: "textScore"} needs the metadata of a $text in the pipeline's first $match
 * (or, in a $facet sub-pipeline, in its parent's: the documents keep it); a $lookup
 * sub-pipeline reads another collection and has only its own. MongoDB checks this when it
 * parses the pipeline (error 40218), wherever a stage stands: after a $group the score is
 * just missing. */
static int check_meta(const struct query_pipeline *p, bool avail, struct dfs_err *err)
{
	int rc;

	avail = avail || (p->n && p->st[0].kind == S_MATCH && query_filter_has_text(p->st[0].fx));
	for (int i = 0; i < p->n; i++) {
		const struct pstage *s = &p->st[i];

		if (!avail && stage_uses_score(s))
			return dfs_err_set(err, DFS_EINVAL,
					   "stage %d: query requires text score metadata, but it "
					   "is not available",
					   s->index);
		for (int f = 0; f < s->nfacets; f++)
			if ((rc = check_meta(s->facets[f], avail, err)))
				return dfs_err_prefix(err, "stage %d: $facet '%s': ", s->index,
						      s->facet_names[f]);
		if (s->sub && (rc = check_meta(s->sub, false, err)))
			return dfs_err_prefix(err, "stage %d: $lookup pipeline: ", s->index);
	}
	return 0;
}

int query_pipeline_parse(const bson_t *pipeline, struct query_pipeline **out, struct dfs_err *err)
{
	int rc = parse_pipeline(pipeline, NULL, out, err);

	if (!rc && (rc = check_meta(*out, false, err))) {
		query_pipeline_free(*out);
		*out = NULL;
	}
	return rc;
}

/* ---- running ------------------------------------------------------------------------- */

struct accst {
	struct agg__sum sum;  /* $sum $avg */
	bson_value_t v;	      /* $min $max $first $last: Owned copy (EOD: none yet) */
	bson_t *arr;	      /* $push $addToSet: Owned array; $mergeObjects: Owned document */
	uint32_t na;	      /* elements of arr */
	long double mean, m2; /* $stdDevPop (Welford) */
	int64_t cnt;	      /* $count, $stdDevPop */
};

struct rstage {
	const struct pstage *ps;
	struct agg__arena ar; /* values of the document being worked on */
	bson_t *out;	      /* Owned: the document returned last (stages that build one) */
	bson_t *view;	      /* Owned: a view returned last ($sort); a pointer because
			       * bson_t wants 128-byte alignment (see view_new) */
	bool started, done;
	int64_t count;	    /* $limit/$skip counters; $count */
	struct sorter so;   /* $sort, $group */
	uint64_t seq;	    /* input sequence number */
	struct dfs_buf key; /* scratch key */
	bool pending;	    /* $group: pk/pp hold the first record of the next group */
	struct dfs_buf pk, pp;
	struct accst *st; /* $group: Owned, naccs states */
	bson_t *in;	  /* $unwind: Owned copy of the input document */
	bson_iter_t ait;  /* $unwind: over the array in *in */
	int64_t ai;	  /* $unwind: index of the next element */
	bool unwinding;	  /* $unwind: ait is live */
	bson_t **res;	  /* $sample: Owned reservoir */
	double *rsc;	  /* $sample: Owned: the text score of each (NaN: none) */
	size_t nres, ri;
	bool has_score;	 /* the document returned last has a text score (note 7) */
	double score;	 /* and this is it */
	int64_t nret;	 /* explain: documents returned */
	int64_t time_ns; /* explain: time spent in this stage and the ones before it */
};

struct query_agg {
	struct store_txn *t;
	int64_t coll;
	int64_t now_ms;
	size_t mem;
	const struct query_pipeline *p;
	int first, last;	  /* stages [first, last) run here */
	struct query_cursor *cur; /* Owned: the source, or NULL */
	FILE *spool;		  /* Borrowed: the $facet source (length-prefixed BSON), or NULL */
	const bson_t *one;	  /* Borrowed: the only document (update pipelines), or NULL */
	struct dfs_buf sbuf;	  /* the document read last from spool */
	bson_t *sview;		  /* Owned: a view of sbuf (see view_new) */
	struct rstage *rs;	  /* Owned: p->n entries */
	const struct agg__var *vars; /* Borrowed: $lookup let variables */
	uint64_t rng;		     /* $sample */
	int64_t spills;		     /* runs written by sorters (for tests) */
	bool timed;		     /* explain: count and time every stage (rs[].nret, time_ns) */
	int64_t src_nret, src_ns;    /* explain: the same for the source (the find) */
	bool src_has_score;	     /* the source's last document has a text score */
	double src_score;	     /* and this is it */
	bool match0_in_find;	     /* stage 0's filter runs in the find, its $expr here */
};

static int agg_open(struct store_txn *t, int64_t coll, const struct query_pipeline *p,
		    int64_t now_ms, size_t mem, FILE *spool, const bson_t *one, const bson_t *extra,
		    const struct agg__var *vars, const struct query_collation *collation, int upto,
		    struct query_agg **out, struct dfs_err *err);
static int stage_next(struct query_agg *a, int i, const bson_t **doc, struct dfs_err *err);
static int stage_run(struct query_agg *a, int i, const bson_t **doc, struct dfs_err *err);
static int spool_read(FILE *f, struct dfs_buf *b, bson_t *doc, struct dfs_err *err);
static int spool_read_score(FILE *f, bool *has, double *score, struct dfs_err *err);

/* Storage for a bson_t view kept in a heap struct: bson_t asks for 128-byte alignment, which
 * calloc does not give. Freed with free(). */
static bson_t *view_new(void)
{
	return aligned_alloc(BSON_ALIGNOF(bson_t), sizeof(bson_t));
}

/* The text score of the document stage i - 1 returned last (stage i's input), or NULL. */
static const double *meta_in(const struct query_agg *a, int i)
{
	if (i - 1 < a->first)
		return a->src_has_score ? &a->src_score : NULL;
	return a->rs[i - 1].has_score ? &a->rs[i - 1].score : NULL;
}

/* Stage rs returns a document whose text score is *score (NULL: none). */
static void meta_set(struct rstage *rs, const double *score)
{
	rs->has_score = score != NULL;
	rs->score = score ? *score : 0;
}

static void ctx_init(struct query_agg *a, struct rstage *rs, const bson_t *doc, const double *score,
		     struct agg__ctx *c)
{
	memset(c, 0, sizeof(*c));
	c->score = score;
	c->root.value_type = BSON_TYPE_DOCUMENT;
	c->root.value.v_doc.data = (uint8_t *)bson_get_data(doc);
	c->root.value.v_doc.data_len = doc->len;
	c->current = c->root;
	c->now_ms = a->now_ms;
	c->vars = a->vars;
	c->ar = &rs->ar;
}

static void set_out(struct rstage *rs, bson_t *b)
{
	if (rs->out)
		bson_destroy(rs->out);
	rs->out = b;
}

static const struct pnode *kid(const struct pnode *p, const char *name, int *idx)
{
	for (int i = 0; i < p->nkids; i++)
		if (!strcmp(p->kids[i].name, name)) {
			*idx = i;
			return &p->kids[i];
		}
	return NULL;
}

static int proj_incl(const struct pnode *p, const bson_t *in, struct agg__ctx *c, bson_t *out,
		     struct dfs_err *err);

static int proj_incl_array(const struct pnode *p, const bson_value_t *arr, struct agg__ctx *c,
			   bson_t *out, struct dfs_err *err)
{
	bson_iter_t it;
	uint32_t k = 0;
	int rc;

	if (!bson_iter_init_from_data(&it, arr->value.v_doc.data, arr->value.v_doc.data_len))
		return 0;
	while (bson_iter_next(&it)) {
		const bson_value_t *v = bson_iter_value(&it);
		char buf[16];
		const char *key;
		bson_t child, view;

		bson_uint32_to_string(k, &key, buf, sizeof(buf));
		if (v->value_type == BSON_TYPE_DOCUMENT) {
			agg__doc_view(v, &view);
			bson_append_document_begin(out, key, -1, &child);
			rc = proj_incl(p, &view, c, &child, err);
			bson_append_document_end(out, &child);
		} else if (v->value_type == BSON_TYPE_ARRAY) {
			bson_append_array_begin(out, key, -1, &child);
			rc = proj_incl_array(p, v, c, &child, err);
			bson_append_array_end(out, &child);
		} else if (p->has_expr) {
			bson_append_document_begin(out, key, -1, &child);
			rc = proj_incl(p, NULL, c, &child, err);
			bson_append_document_end(out, &child);
		} else {
			continue;
		}
		if (rc)
			return rc;
		k++;
	}
	return 0;
}

/* Inclusion projection of in (NULL: an empty document) by p's children into out. */
static int proj_incl(const struct pnode *p, const bson_t *in, struct agg__ctx *c, bson_t *out,
		     struct dfs_err *err)
{
	bool *seen = calloc((size_t)p->nkids + 1, sizeof(bool));
	bson_iter_t it;
	int rc = 0, idx;

	if (!seen)
		abort();
	if (in && bson_iter_init(&it, in)) {
		while (bson_iter_next(&it) && !rc) {
			const struct pnode *n = kid(p, bson_iter_key(&it), &idx);
			const bson_value_t *v = bson_iter_value(&it);
			bson_t child, view;

			if (!n || n->kind == P_EXPR || n->kind == P_EXC)
				continue;
			seen[idx] = true;
			if (n->kind == P_INC) {
				bson_append_value(out, bson_iter_key(&it), -1, v);
			} else if (v->value_type == BSON_TYPE_DOCUMENT) {
				agg__doc_view(v, &view);
				bson_append_document_begin(out, n->name, -1, &child);
				rc = proj_incl(n, &view, c, &child, err);
				bson_append_document_end(out, &child);
			} else if (v->value_type == BSON_TYPE_ARRAY) {
				bson_append_array_begin(out, n->name, -1, &child);
				rc = proj_incl_array(n, v, c, &child, err);
				bson_append_array_end(out, &child);
			} else if (n->has_expr) {
				bson_append_document_begin(out, n->name, -1, &child);
				rc = proj_incl(n, NULL, c, &child, err);
				bson_append_document_end(out, &child);
			}
		}
	}
	for (int i = 0; i < p->nkids && !rc; i++) {
		const struct pnode *n = &p->kids[i];

		if (n->kind == P_EXPR) {
			bson_value_t v;

			if ((rc = agg__x_eval(n->x, c, &v, err)))
				break;
			agg__append(out, n->name, &v);
		} else if (n->kind == P_SUB && n->has_expr && !seen[i]) {
			bson_t child;

			bson_append_document_begin(out, n->name, -1, &child);
			rc = proj_incl(n, NULL, c, &child, err);
			bson_append_document_end(out, &child);
		}
	}
	free(seen);
	return rc;
}

static void proj_excl(const struct pnode *p, const bson_t *in, bson_t *out);

static void proj_excl_array(const struct pnode *p, const bson_value_t *arr, bson_t *out)
{
	bson_iter_t it;

	if (!bson_iter_init_from_data(&it, arr->value.v_doc.data, arr->value.v_doc.data_len))
		return;
	while (bson_iter_next(&it)) {
		const bson_value_t *v = bson_iter_value(&it);
		bson_t child, view;

		if (v->value_type == BSON_TYPE_DOCUMENT) {
			agg__doc_view(v, &view);
			bson_append_document_begin(out, bson_iter_key(&it), -1, &child);
			proj_excl(p, &view, &child);
			bson_append_document_end(out, &child);
		} else if (v->value_type == BSON_TYPE_ARRAY) {
			bson_append_array_begin(out, bson_iter_key(&it), -1, &child);
			proj_excl_array(p, v, &child);
			bson_append_array_end(out, &child);
		} else {
			bson_append_value(out, bson_iter_key(&it), -1, v);
		}
	}
}

static void proj_excl(const struct pnode *p, const bson_t *in, bson_t *out)
{
	bson_iter_t it;
	int idx;

	if (!bson_iter_init(&it, in))
		return;
	while (bson_iter_next(&it)) {
		const struct pnode *n = kid(p, bson_iter_key(&it), &idx);
		const bson_value_t *v = bson_iter_value(&it);
		bson_t child, view;

		if (n && (n->kind == P_EXC || n->kind == P_EXPR))
			continue; /* a $meta field replaces the document's (proj_excl_meta) */
		if (n && n->kind == P_SUB && v->value_type == BSON_TYPE_DOCUMENT) {
			agg__doc_view(v, &view);
			bson_append_document_begin(out, n->name, -1, &child);
			proj_excl(n, &view, &child);
			bson_append_document_end(out, &child);
		} else if (n && n->kind == P_SUB && v->value_type == BSON_TYPE_ARRAY) {
			bson_append_array_begin(out, n->name, -1, &child);
			proj_excl_array(n, v, &child);
			bson_append_array_end(out, &child);
		} else {
			bson_append_value(out, bson_iter_key(&it), -1, v);
		}
	}
}

/* An exclusion projection, then its top-level {$meta: "textScore"} fields (parse_project
 * allows no other expression in one), after the others as in find's projection. */
static int proj_excl_meta(const struct pnode *p, const bson_t *in, struct agg__ctx *c, bson_t *out,
			  struct dfs_err *err)
{
	int rc;

	proj_excl(p, in, out);
	for (int i = 0; i < p->nkids; i++) {
		bson_value_t v;

		if (p->kids[i].kind != P_EXPR)
			continue;
		if ((rc = agg__x_eval(p->kids[i].x, c, &v, err)))
			return rc;
		agg__append(out, p->kids[i].name, &v);
	}
	return 0;
}

static int add_fields(const struct pnode *p, const bson_t *in, struct agg__ctx *c, bson_t *out,
		      struct dfs_err *err);

static int add_fields_array(const struct pnode *p, const bson_value_t *arr, struct agg__ctx *c,
			    bson_t *out, struct dfs_err *err)
{
	bson_iter_t it;
	int rc = 0;

	if (!bson_iter_init_from_data(&it, arr->value.v_doc.data, arr->value.v_doc.data_len))
		return 0;
	while (bson_iter_next(&it) && !rc) {
		const bson_value_t *v = bson_iter_value(&it);
		bson_t child, view;

		if (v->value_type == BSON_TYPE_ARRAY) {
			bson_append_array_begin(out, bson_iter_key(&it), -1, &child);
			rc = add_fields_array(p, v, c, &child, err);
			bson_append_array_end(out, &child);
			continue;
		}
		bson_append_document_begin(out, bson_iter_key(&it), -1, &child);
		if (v->value_type == BSON_TYPE_DOCUMENT) {
			agg__doc_view(v, &view);
			rc = add_fields(p, &view, c, &child, err);
		} else {
			rc = add_fields(p, NULL, c, &child, err);
		}
		bson_append_document_end(out, &child);
	}
	return rc;
}

static int add_fields(const struct pnode *p, const bson_t *in, struct agg__ctx *c, bson_t *out,
		      struct dfs_err *err)
{
	bool *seen = calloc((size_t)p->nkids + 1, sizeof(bool));
	bson_iter_t it;
	int rc = 0, idx;

	if (!seen)
		abort();
	if (in && bson_iter_init(&it, in)) {
		while (bson_iter_next(&it) && !rc) {
			const struct pnode *n = kid(p, bson_iter_key(&it), &idx);
			const bson_value_t *v = bson_iter_value(&it);
			bson_t child, view;
			bson_value_t r;

			if (!n) {
				bson_append_value(out, bson_iter_key(&it), -1, v);
				continue;
			}
			seen[idx] = true;
			if (n->kind == P_EXPR) {
				if ((rc = agg__x_eval(n->x, c, &r, err)))
					break;
				agg__append(out, n->name, &r);
			} else if (v->value_type == BSON_TYPE_ARRAY) {
				bson_append_array_begin(out, n->name, -1, &child);
				rc = add_fields_array(n, v, c, &child, err);
				bson_append_array_end(out, &child);
			} else {
				bson_append_document_begin(out, n->name, -1, &child);
				if (v->value_type == BSON_TYPE_DOCUMENT) {
					agg__doc_view(v, &view);
					rc = add_fields(n, &view, c, &child, err);
				} else {
					rc = add_fields(n, NULL, c, &child, err);
				}
				bson_append_document_end(out, &child);
			}
		}
	}
	for (int i = 0; i < p->nkids && !rc; i++) {
		const struct pnode *n = &p->kids[i];
		bson_value_t r;
		bson_t child;

		if (seen[i])
			continue;
		if (n->kind == P_EXPR) {
			if ((rc = agg__x_eval(n->x, c, &r, err)))
				break;
			agg__append(out, n->name, &r);
		} else {
			bson_append_document_begin(out, n->name, -1, &child);
			rc = add_fields(n, NULL, c, &child, err);
			bson_append_document_end(out, &child);
		}
	}
	free(seen);
	return rc;
}

/* Copies in (NULL: empty) with the dotted path comp set to v (removed when v is missing). */
static void set_path(const bson_t *in, char **comp, int n, const bson_value_t *v, bson_t *out)
{
	bson_iter_t it;
	bool done = false;
	bson_t child, view;

	if (in && bson_iter_init(&it, in)) {
		while (bson_iter_next(&it)) {
			const bson_value_t *f = bson_iter_value(&it);

			if (strcmp(bson_iter_key(&it), comp[0])) {
				bson_append_value(out, bson_iter_key(&it), -1, f);
				continue;
			}
			done = true;
			if (n == 1) {
				agg__append(out, comp[0], v);
				continue;
			}
			bson_append_document_begin(out, comp[0], -1, &child);
			if (f->value_type == BSON_TYPE_DOCUMENT && agg__doc_view(f, &view))
				set_path(&view, comp + 1, n - 1, v, &child);
			else
				set_path(NULL, comp + 1, n - 1, v, &child);
			bson_append_document_end(out, &child);
		}
	}
	if (done)
		return;
	if (n == 1) {
		agg__append(out, comp[0], v);
		return;
	}
	if (v->value_type == BSON_TYPE_EOD)
		return;
	bson_append_document_begin(out, comp[0], -1, &child);
	set_path(NULL, comp + 1, n - 1, v, &child);
	bson_append_document_end(out, &child);
}

/* The value at a dotted path through embedded documents only (no array traversal). */
static void get_strict(const bson_t *doc, char **comp, int n, bson_value_t *out)
{
	bson_iter_t it;
	bson_t view;

	memset(out, 0, sizeof(*out));
	if (!bson_iter_init(&it, doc) || !bson_iter_find(&it, comp[0]))
		return;
	if (n == 1) {
		*out = *bson_iter_value(&it);
		return;
	}
	if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !agg__doc_view(bson_iter_value(&it), &view))
		return;
	get_strict(&view, comp + 1, n - 1, out);
}

static int src_next(struct query_agg *a, const bson_t **doc, struct dfs_err *err)
{
	int rc;

	if (a->one) {
		*doc = a->one;
		a->one = NULL; /* the next call finds no cursor: the end */
		return 0;
	}

	if (a->spool) {
		if (!a->sview && !(a->sview = view_new()))
			return dfs_err_set(err, DFS_ENOMEM, "out of memory");
		rc = spool_read(a->spool, &a->sbuf, a->sview, err);
		if (!rc)
			rc = spool_read_score(a->spool, &a->src_has_score, &a->src_score, err);
		if (!rc)
			*doc = a->sview;
		return rc;
	}
	if (!a->cur)
		return DFS_ENOENT;
	rc = query_cursor_next(a->cur, doc, err);
	if (!rc)
		a->src_has_score = query_cursor_score(a->cur, &a->src_score);
	return rc;
}

/* ---- $group -------------------------------------------------------------------------- */

static int group_input(struct query_agg *a, int i, struct rstage *rs, struct dfs_err *err)
{
	const struct pstage *ps = rs->ps;
	const bson_t *doc;
	int rc;

	while ((rc = stage_next(a, i - 1, &doc, err)) == 0) {
		struct agg__ctx c;
		bson_value_t id, key, disp, nul = {.value_type = BSON_TYPE_NULL};
		bson_t payload = BSON_INITIALIZER;

		agg__arena_reset(&rs->ar);
		ctx_init(a, rs, doc, meta_in(a, i), &c);
		if ((rc = agg__x_eval(ps->id, &c, &id, err))) {
			bson_destroy(&payload);
			return rc;
		}
		if (ps->nbounds) {
			int b = -1;

			if (!agg__nullish(&id) &&
			    store_type_bracket(id.value_type) ==
				    store_type_bracket(ps->bounds[0].value_type))
				for (int k = 0; k + 1 < ps->nbounds; k++)
					if (agg__cmp(&ps->bounds[k], &id) <= 0 &&
					    agg__cmp(&id, &ps->bounds[k + 1]) < 0) {
						b = k;
						break;
					}
			if (b < 0 && ps->bdefault.value_type == BSON_TYPE_EOD) {
				bson_destroy(&payload);
				return dfs_err_set(err, DFS_EINVAL,
						   "$bucket could not find a matching branch for "
						   "an input, and no default was specified");
			}
			if (b < 0)
				b = ps->nbounds;
			memset(&key, 0, sizeof(key));
			key.value_type = BSON_TYPE_INT32;
			key.value.v_int32 = b;
			disp = b == ps->nbounds ? ps->bdefault : ps->bounds[b];
		} else {
			key = agg__nullish(&id) ? nul : id;
			disp = key;
		}
		bson_append_value(&payload, "i", 1, &disp);
		for (int k = 0; k < ps->naccs; k++) {
			bson_value_t v;
			const char *name;
			char buf[16];

			if (!ps->accs[k].x)
				continue;
			if ((rc = agg__x_eval(ps->accs[k].x, &c, &v, err))) {
				bson_destroy(&payload);
				return rc;
			}
			/* libbson's table of index keys: no snprintf per document */
			bson_uint32_to_string((uint32_t)k, &name, buf, sizeof(buf));
			agg__append(&payload, name, &v);
		}
		dfs_buf_reset(&rs->key);
		if ((rc = store_key_append(&rs->key, &key, false, err))) {
			bson_destroy(&payload);
			return rc;
		}
		put_seq(&rs->key, rs->seq++);
		rc = sorter_add(&rs->so, rs->key.data, rs->key.len, bson_get_data(&payload),
				payload.len, err);
		bson_destroy(&payload);
		if (rc)
			return rc;
	}
	if (rc != DFS_ENOENT)
		return rc;
	return sorter_finish(&rs->so, err);
}

static void accst_release(struct accst *s)
{
	if (s->v.value_type != BSON_TYPE_EOD)
		bson_value_destroy(&s->v);
	if (s->arr)
		bson_destroy(s->arr);
	memset(s, 0, sizeof(*s));
}

static void keep(bson_value_t *slot, const bson_value_t *v)
{
	if (slot->value_type != BSON_TYPE_EOD)
		bson_value_destroy(slot);
	if (v->value_type == BSON_TYPE_EOD)
		memset(slot, 0, sizeof(*slot));
	else
		bson_value_copy(v, slot);
}

static void merge_into(bson_t **acc, const bson_value_t *v)
{
	bson_t *m = bson_new(), view;
	bson_iter_t it, f;

	if (!agg__doc_view(v, &view)) {
		bson_destroy(m);
		return;
	}
	if (*acc && bson_iter_init(&it, *acc))
		while (bson_iter_next(&it)) {
			if (bson_iter_init_find(&f, &view, bson_iter_key(&it)))
				bson_append_value(m, bson_iter_key(&it), -1, bson_iter_value(&f));
			else
				bson_append_value(m, bson_iter_key(&it), -1, bson_iter_value(&it));
		}
	if (bson_iter_init(&it, &view))
		while (bson_iter_next(&it))
			if (!*acc || !bson_iter_init_find(&f, *acc, bson_iter_key(&it)))
				bson_append_value(m, bson_iter_key(&it), -1, bson_iter_value(&it));
	if (*acc)
		bson_destroy(*acc);
	*acc = m;
}

static int acc_add(const struct acc *ac, struct accst *s, const bson_value_t *v, bool first,
		   struct dfs_err *err)
{
	bson_value_t nul = {.value_type = BSON_TYPE_NULL};

	switch (ac->op) {
	case A_SUM:
	case A_AVG:
		agg__sum_add(&s->sum, v);
		break;
	case A_MIN:
	case A_MAX:
		if (agg__nullish(v))
			break;
		if (s->v.value_type == BSON_TYPE_EOD ||
		    (ac->op == A_MIN ? agg__cmp(v, &s->v) < 0 : agg__cmp(v, &s->v) > 0))
			keep(&s->v, v);
		break;
	case A_FIRST:
		if (first)
			keep(&s->v, v->value_type == BSON_TYPE_EOD ? &nul : v);
		break;
	case A_LAST:
		keep(&s->v, v->value_type == BSON_TYPE_EOD ? &nul : v);
		break;
	case A_PUSH:
	case A_ADDTOSET: {
		char buf[16];
		const char *key;

		if (v->value_type == BSON_TYPE_EOD)
			break;
		if (!s->arr)
			s->arr = bson_new();
		if (ac->op == A_ADDTOSET) {
			bson_iter_t it;

			if (bson_iter_init(&it, s->arr))
				while (bson_iter_next(&it))
					if (agg__cmp(bson_iter_value(&it), v) == 0)
						return 0;
		}
		bson_uint32_to_string(s->na++, &key, buf, sizeof(buf));
		bson_append_value(s->arr, key, -1, v);
		if (s->arr->len > DFS_MAX_DOC_SIZE)
			return dfs_err_set(err, DFS_EFBIG,
					   "%s used too much memory: the array of '%s' is over "
					   "16 MiB",
					   ac->op == A_PUSH ? "$push" : "$addToSet", ac->name);
		break;
	}
	case A_COUNT:
		s->cnt++;
		break;
	case A_STDDEVPOP:
		if (agg__is_number(v)) {
			long double d = agg__num_ld(v), delta = d - s->mean;

			s->cnt++;
			s->mean += delta / s->cnt;
			s->m2 += delta * (d - s->mean);
		}
		break;
	case A_MERGEOBJECTS:
		if (agg__nullish(v))
			break;
		if (v->value_type != BSON_TYPE_DOCUMENT)
			return dfs_err_set(err, DFS_EINVAL,
					   "$mergeObjects requires object inputs, but input is of "
					   "type %s",
					   agg__type_name(v));
		merge_into(&s->arr, v);
		break;
	}
	return 0;
}

static void acc_result(const struct acc *ac, const struct accst *s, bson_t *out)
{
	bson_value_t r;

	switch (ac->op) {
	case A_SUM:
		agg__sum_value(&s->sum, &r);
		break;
	case A_AVG:
		agg__avg_value(&s->sum, &r);
		break;
	case A_MIN:
	case A_MAX:
	case A_FIRST:
	case A_LAST:
		if (s->v.value_type == BSON_TYPE_EOD) {
			memset(&r, 0, sizeof(r));
			r.value_type = BSON_TYPE_NULL;
		} else {
			r = s->v;
		}
		break;
	case A_PUSH:
	case A_ADDTOSET:
	case A_MERGEOBJECTS:
		if (s->arr) {
			if (ac->op == A_MERGEOBJECTS)
				bson_append_document(out, ac->name, -1, s->arr);
			else
				bson_append_array(out, ac->name, -1, s->arr);
		} else if (ac->op == A_MERGEOBJECTS) {
			bson_t e = BSON_INITIALIZER;

			bson_append_document(out, ac->name, -1, &e);
		} else {
			bson_t e = BSON_INITIALIZER;

			bson_append_array(out, ac->name, -1, &e);
		}
		return;
	case A_COUNT:
		memset(&r, 0, sizeof(r));
		if (s->cnt <= INT32_MAX) {
			r.value_type = BSON_TYPE_INT32;
			r.value.v_int32 = (int32_t)s->cnt;
		} else {
			r.value_type = BSON_TYPE_INT64;
			r.value.v_int64 = s->cnt;
		}
		break;
	default:
		memset(&r, 0, sizeof(r));
		if (s->cnt == 0) {
			r.value_type = BSON_TYPE_NULL;
		} else {
			r.value_type = BSON_TYPE_DOUBLE;
			r.value.v_double = (double)sqrtl(s->m2 / s->cnt);
		}
	}
	bson_append_value(out, ac->name, -1, &r);
}

/* Folds one payload record into the states. */
static int group_fold(const struct pstage *ps, struct accst *st, const char *p, uint32_t plen,
		      bool first, bson_t *out, struct dfs_err *err)
{
	bson_t view;
	bson_iter_t it;
	int rc;

	if (!bson_init_static(&view, (const uint8_t *)p, plen))
		return dfs_err_set(err, DFS_ECORRUPT, "$group: a bad spilled record");
	if (first && bson_iter_init_find(&it, &view, "i"))
		bson_append_value(out, "_id", 3, bson_iter_value(&it));
	for (int k = 0; k < ps->naccs; k++) {
		bson_value_t v = {.value_type = BSON_TYPE_EOD};
		char name[16];

		snprintf(name, sizeof(name), "%d", k);
		if (bson_iter_init_find(&it, &view, name))
			v = *bson_iter_value(&it);
		if ((rc = acc_add(&ps->accs[k], &st[k], &v, first, err)))
			return rc;
	}
	return 0;
}

static int group_next(struct query_agg *a, int i, struct rstage *rs, const bson_t **doc,
		      struct dfs_err *err)
{
	const struct pstage *ps = rs->ps;
	const char *k, *p;
	uint32_t kl, pl;
	bson_t *out;
	int rc;

	if (!rs->started) {
		rs->started = true;
		if ((rc = group_input(a, i, rs, err)))
			return rc;
		rs->st = calloc((size_t)ps->naccs + 1, sizeof(*rs->st));
		if (!rs->st)
			return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	}
	if (!rs->pending) {
		rc = sorter_next(&rs->so, &k, &kl, &p, &pl, err);
		if (rc)
			return rc;
		dfs_buf_reset(&rs->pk);
		dfs_buf_append(&rs->pk, k, kl);
		dfs_buf_reset(&rs->pp);
		dfs_buf_append(&rs->pp, p, pl);
	}
	rs->pending = false;
	out = bson_new();
	for (int j = 0; j < ps->naccs; j++)
		accst_release(&rs->st[j]);
	if ((rc = group_fold(ps, rs->st, rs->pp.data, (uint32_t)rs->pp.len, true, out, err)))
		goto fail;
	for (;;) {
		rc = sorter_next(&rs->so, &k, &kl, &p, &pl, err);
		if (rc == DFS_ENOENT)
			break;
		if (rc)
			goto fail;
		if (kl != rs->pk.len || memcmp(k, rs->pk.data, kl - 8)) {
			dfs_buf_reset(&rs->pk);
			dfs_buf_append(&rs->pk, k, kl);
			dfs_buf_reset(&rs->pp);
			dfs_buf_append(&rs->pp, p, pl);
			rs->pending = true;
			break;
		}
		if ((rc = group_fold(ps, rs->st, p, pl, false, out, err)))
			goto fail;
	}
	for (int j = 0; j < ps->naccs; j++)
		acc_result(&ps->accs[j], &rs->st[j], out);
	set_out(rs, out);
	meta_set(rs, NULL); /* a new document: no metadata */
	*doc = out;
	return 0;
fail:
	bson_destroy(out);
	return rc;
}

/* ---- $sort --------------------------------------------------------------------------- */

static int sort_next(struct query_agg *a, int i, struct rstage *rs, const bson_t **doc,
		     struct dfs_err *err)
{
	const char *k, *p;
	uint32_t kl, pl;
	int rc;

	if (!rs->started) {
		const bson_t *in;

		rs->started = true;
		while ((rc = stage_next(a, i - 1, &in, err)) == 0) {
			const double *score = meta_in(a, i);
			char has = score != NULL;
			double sc = score ? *score : 0;

			/* the pipeline was checked to have text score metadata where the
			 * sort asks for it (check_meta); a document without a score sorts
			 * as null */
			dfs_buf_reset(&rs->key);
			if ((rc = query_sort_key_score(rs->ps->sort, in, score, &rs->key, err)))
				return rc;
			put_seq(&rs->key, rs->seq++);
			/* the payload: the score (a flag, 8 bytes), then the document; pp is
			 * the scratch buffer ($group's, unused here) */
			dfs_buf_reset(&rs->pp);
			dfs_buf_append(&rs->pp, &has, 1);
			dfs_buf_append(&rs->pp, &sc, sizeof(sc));
			dfs_buf_append(&rs->pp, bson_get_data(in), in->len);
			if ((rc = sorter_add(&rs->so, rs->key.data, rs->key.len, rs->pp.data,
					     rs->pp.len, err)))
				return rc;
		}
		if (rc != DFS_ENOENT)
			return rc;
		if ((rc = sorter_finish(&rs->so, err)))
			return rc;
	}
	if ((rc = sorter_next(&rs->so, &k, &kl, &p, &pl, err)))
		return rc;
	if (!rs->view && !(rs->view = view_new()))
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	if (pl < 1 + sizeof(double) ||
	    !bson_init_static(rs->view, (const uint8_t *)p + 1 + sizeof(double),
			      pl - 1 - sizeof(double)))
		return dfs_err_set(err, DFS_ECORRUPT, "$sort: a bad spilled record");
	{
		double sc;

		memcpy(&sc, p + 1, sizeof(sc));
		meta_set(rs, p[0] ? &sc : NULL);
	}
	*doc = rs->view;
	return 0;
}

/* ---- $unwind ------------------------------------------------------------------------- */

static int unwind_next(struct query_agg *a, int i, struct rstage *rs, const bson_t **doc,
		       struct dfs_err *err)
{
	const struct pstage *ps = rs->ps;
	const bson_t *in;
	bson_value_t v, idx;
	int rc;

	for (;;) {
		if (rs->unwinding) {
			if (bson_iter_next(&rs->ait)) {
				bson_t *o = bson_new(), *o2;

				set_path(rs->in, ps->comp, ps->ncomp, bson_iter_value(&rs->ait), o);
				if (ps->index_field) {
					char *comp[1] = {ps->index_field};

					memset(&idx, 0, sizeof(idx));
					idx.value_type = BSON_TYPE_INT64;
					idx.value.v_int64 = rs->ai;
					o2 = bson_new();
					set_path(o, comp, 1, &idx, o2);
					bson_destroy(o);
					o = o2;
				}
				rs->ai++;
				set_out(rs, o);
				*doc = o;
				return 0;
			}
			rs->unwinding = false;
		}
		if ((rc = stage_next(a, i - 1, &in, err)))
			return rc;
		meta_set(rs, meta_in(a, i)); /* every document made of it has its score */
		if (rs->in)
			bson_destroy(rs->in);
		rs->in = bson_copy(in);
		get_strict(rs->in, ps->comp, ps->ncomp, &v);
		if (v.value_type == BSON_TYPE_ARRAY) {
			bson_iter_init_from_data(&rs->ait, v.value.v_doc.data,
						 v.value.v_doc.data_len);
			{
				bson_iter_t probe = rs->ait;

				if (bson_iter_next(&probe)) {
					rs->unwinding = true;
					rs->ai = 0;
					continue;
				}
			}
			if (!ps->preserve)
				continue;
			/* an empty array: the document without the field */
			{
				bson_t *o = bson_new();
				bson_value_t none = {.value_type = BSON_TYPE_EOD};

				set_path(rs->in, ps->comp, ps->ncomp, &none, o);
				set_out(rs, o);
			}
		} else if (agg__nullish(&v)) {
			if (!ps->preserve)
				continue;
			set_out(rs, bson_copy(rs->in));
		} else {
			set_out(rs, bson_copy(rs->in));
		}
		if (ps->index_field) {
			char *comp[1] = {ps->index_field};
			bson_t *o2 = bson_new();

			memset(&idx, 0, sizeof(idx));
			idx.value_type = BSON_TYPE_NULL;
			set_path(rs->out, comp, 1, &idx, o2);
			set_out(rs, o2);
		}
		*doc = rs->out;
		return 0;
	}
}

/* ---- $lookup ------------------------------------------------------------------------- */

/* The find filter of $lookup's equality: {foreignField: {$in: [local values]}}, where an array
 * localField gives its elements and a missing one null (which matches null or missing). */
static void lookup_filter(const struct pstage *ps, const bson_t *in, struct agg__arena *ar,
			  bson_t *filter)
{
	bson_t cond, list;
	bson_value_t lv, root;

	memset(&root, 0, sizeof(root));
	root.value_type = BSON_TYPE_DOCUMENT;
	root.value.v_doc.data = (uint8_t *)bson_get_data(in);
	root.value.v_doc.data_len = in->len;
	agg__path_get(&root, ps->lcomp, ps->nlcomp, ar, &lv);
	bson_append_document_begin(filter, ps->foreign, -1, &cond);
	bson_append_array_begin(&cond, "$in", 3, &list);
	if (lv.value_type == BSON_TYPE_ARRAY) {
		bson_iter_t it;
		uint32_t k = 0;

		if (bson_iter_init_from_data(&it, lv.value.v_doc.data, lv.value.v_doc.data_len))
			while (bson_iter_next(&it)) {
				char buf[16];
				const char *key;

				/* regexes in $in would match, not compare: skip them */
				if (BSON_ITER_HOLDS_REGEX(&it))
					continue;
				bson_uint32_to_string(k++, &key, buf, sizeof(buf));
				bson_append_value(&list, key, -1, bson_iter_value(&it));
			}
	} else if (lv.value_type == BSON_TYPE_EOD) {
		bson_append_null(&list, "0", 1);
	} else if (lv.value_type != BSON_TYPE_REGEX) {
		bson_append_value(&list, "0", 1, &lv);
	}
	bson_append_array_end(&cond, &list);
	bson_append_document_end(filter, &cond);
}

static int lookup_next(struct query_agg *a, int i, struct rstage *rs, const bson_t **doc,
		       struct dfs_err *err)
{
	const struct pstage *ps = rs->ps;
	const bson_t *in, *fd;
	struct store_coll fc;
	bson_t arr = BSON_INITIALIZER, *o;
	bson_value_t av;
	uint32_t n = 0;
	int rc;
	bool exists;

	if ((rc = stage_next(a, i - 1, &in, err)))
		goto done;
	meta_set(rs, meta_in(a, i));
	agg__arena_reset(&rs->ar);
	rc = store_coll_find(a->t, ps->from, &fc, err);
	if (rc && rc != DFS_ENOENT)
		goto done;
	if (rc)
		dfs_err_clear(err);
	exists = rc == 0;
	rc = 0;
	if (exists && !ps->sub) {
		struct query_find_opts fo = {0};
		struct query_cursor *cur = NULL;
		bson_t filter = BSON_INITIALIZER;

		lookup_filter(ps, in, &rs->ar, &filter);
		fo.filter = &filter;
		fo.sort_mem = a->mem;
		rc = query_find_open(a->t, fc.id, &fo, &cur, err);
		while (!rc && (rc = query_cursor_next(cur, &fd, err)) == 0) {
			char buf[16];
			const char *key;

			bson_uint32_to_string(n++, &key, buf, sizeof(buf));
			bson_append_document(&arr, key, -1, fd);
		}
		query_cursor_free(cur);
		bson_destroy(&filter);
		if (rc == DFS_ENOENT) {
			dfs_err_clear(err);
			rc = 0;
		}
	} else if (exists) {
		struct agg__var *vars = calloc((size_t)ps->nlet + 1, sizeof(*vars));
		struct query_agg *sub = NULL;
		struct agg__ctx c;
		bson_t eq = BSON_INITIALIZER;

		if (!vars)
			abort();
		if (ps->local)
			lookup_filter(ps, in, &rs->ar, &eq);
		ctx_init(a, rs, in, meta_in(a, i), &c);
		for (int k = 0; k < ps->nlet && !rc; k++) {
			rc = agg__x_eval(ps->let_x[k], &c, &vars[k].v, err);
			vars[k].name = ps->let_names[k];
			vars[k].up = k ? &vars[k - 1] : a->vars;
		}
		if (!rc)
			rc = agg_open(a->t, fc.id, ps->sub, a->now_ms, a->mem, NULL, NULL,
				      ps->local ? &eq : NULL,
				      ps->nlet ? &vars[ps->nlet - 1] : a->vars, NULL, ps->sub->n,
				      &sub, err);
		while (!rc && (rc = query_agg_next(sub, &fd, err)) == 0) {
			char buf[16];
			const char *key;

			bson_uint32_to_string(n++, &key, buf, sizeof(buf));
			bson_append_document(&arr, key, -1, fd);
			if (arr.len > DFS_MAX_DOC_SIZE)
				rc = dfs_err_set(err, DFS_EFBIG,
						 "$lookup: the '%s' array is over 16 MiB", ps->as);
		}
		if (sub)
			a->spills += sub->spills;
		if (rc && rc != DFS_ENOENT)
			dfs_err_prefix(err, "$lookup pipeline: ");
		query_agg_free(sub);
		free(vars);
		bson_destroy(&eq);
		if (rc == DFS_ENOENT) {
			dfs_err_clear(err);
			rc = 0;
		}
	}
	if (rc)
		goto done;
	memset(&av, 0, sizeof(av));
	av.value_type = BSON_TYPE_ARRAY;
	av.value.v_doc.data = (uint8_t *)bson_get_data(&arr);
	av.value.v_doc.data_len = arr.len;
	o = bson_new();
	set_path(in, ps->ascomp, ps->nascomp, &av, o);
	set_out(rs, o);
	*doc = o;
done:
	bson_destroy(&arr);
	return rc;
}

/* ---- $facet, $sample, $count --------------------------------------------------------- */

static int facet_next(struct query_agg *a, int i, struct rstage *rs, const bson_t **doc,
		      struct dfs_err *err)
{
	const struct pstage *ps = rs->ps;
	const bson_t *in;
	FILE *spool;
	bson_t *o;
	int rc;

	if (rs->done)
		return DFS_ENOENT;
	rs->done = true;
	/* The input goes to a temporary file, read again by each sub-pipeline: memory stays
	 * bounded by what the sub-pipelines hold, not by the input. */
	spool = tmpfile();
	if (!spool)
		return dfs_err_set(err, DFS_EIO, "$facet: cannot create a temporary file");
	while ((rc = stage_next(a, i - 1, &in, err)) == 0) {
		uint32_t len = in->len;
		const double *score = meta_in(a, i);
		char has = score != NULL;
		double sc = score ? *score : 0;

		/* each document, then its text score (the sub-pipelines see it) */
		if (fwrite(&len, sizeof(len), 1, spool) != 1 ||
		    fwrite(bson_get_data(in), 1, len, spool) != len ||
		    fwrite(&has, 1, 1, spool) != 1 || fwrite(&sc, sizeof(sc), 1, spool) != 1) {
			rc = dfs_err_set(err, DFS_EIO, "$facet: cannot write a temporary file");
			break;
		}
	}
	if (rc != DFS_ENOENT)
		goto done;
	dfs_err_clear(err);
	rc = 0;
	o = bson_new();
	for (int f = 0; f < ps->nfacets && !rc; f++) {
		struct query_agg *sub = NULL;
		bson_t arr;
		uint32_t k = 0;
		const bson_t *r;

		bson_append_array_begin(o, ps->facet_names[f], -1, &arr);
		if (fflush(spool) || fseek(spool, 0, SEEK_SET))
			rc = dfs_err_set(err, DFS_EIO, "$facet: cannot read a temporary file");
		if (!rc)
			rc = agg_open(a->t, a->coll, ps->facets[f], a->now_ms, a->mem, spool, NULL,
				      NULL, a->vars, NULL, ps->facets[f]->n, &sub, err);
		while (!rc && (rc = query_agg_next(sub, &r, err)) == 0) {
			char buf[16];
			const char *key;

			bson_uint32_to_string(k++, &key, buf, sizeof(buf));
			bson_append_document(&arr, key, -1, r);
			if (arr.len > DFS_MAX_DOC_SIZE)
				rc = dfs_err_set(err, DFS_EFBIG,
						 "$facet: the output document is over 16 MiB");
		}
		bson_append_array_end(o, &arr);
		if (sub)
			a->spills += sub->spills;
		if (rc && rc != DFS_ENOENT)
			dfs_err_prefix(err, "$facet '%s': ", ps->facet_names[f]);
		query_agg_free(sub);
		if (rc == DFS_ENOENT) {
			dfs_err_clear(err);
			rc = 0;
		}
	}
	set_out(rs, o);
	meta_set(rs, NULL);
	*doc = o;
done:
	fclose(spool);
	return rc;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static int sample_next(struct query_agg *a, int i, struct rstage *rs, const bson_t **doc,
		       struct dfs_err *err)
{
	const bson_t *in;
	int rc;

	if (!rs->started) {
		size_t size = (size_t)rs->ps->n;
		uint64_t seen = 0;

		rs->started = true;
		rs->res = calloc(size + 1, sizeof(*rs->res));
		rs->rsc = calloc(size + 1, sizeof(*rs->rsc));
		if (!rs->res || !rs->rsc)
			return dfs_err_set(err, DFS_ENOMEM, "out of memory");
		while ((rc = stage_next(a, i - 1, &in, err)) == 0) {
			const double *score = meta_in(a, i);

			seen++;
			if (rs->nres < size) {
				rs->rsc[rs->nres] = score ? *score : NAN;
				rs->res[rs->nres++] = bson_copy(in);
			} else if (size) {
				uint64_t j = rng_next(&a->rng) % seen;

				if (j < size) {
					bson_destroy(rs->res[j]);
					rs->res[j] = bson_copy(in);
					rs->rsc[j] = score ? *score : NAN;
				}
			}
		}
		if (rc != DFS_ENOENT)
			return rc;
		for (size_t k = rs->nres; k > 1; k--) {
			size_t j = (size_t)(rng_next(&a->rng) % k);
			bson_t *t = rs->res[k - 1];
			double ts = rs->rsc[k - 1];

			rs->res[k - 1] = rs->res[j];
			rs->res[j] = t;
			rs->rsc[k - 1] = rs->rsc[j];
			rs->rsc[j] = ts;
		}
	}
	if (rs->ri >= rs->nres)
		return DFS_ENOENT;
	meta_set(rs, isnan(rs->rsc[rs->ri]) ? NULL : &rs->rsc[rs->ri]);
	*doc = rs->res[rs->ri++];
	return 0;
}

static int count_next(struct query_agg *a, int i, struct rstage *rs, const bson_t **doc,
		      struct dfs_err *err)
{
	const bson_t *in;
	bson_t *o;
	int rc;

	if (rs->done)
		return DFS_ENOENT;
	rs->done = true;
	while ((rc = stage_next(a, i - 1, &in, err)) == 0)
		rs->count++;
	if (rc != DFS_ENOENT)
		return rc;
	if (rs->count == 0)
		return DFS_ENOENT;
	o = bson_new();
	if (rs->count <= INT32_MAX)
		BSON_APPEND_INT32(o, rs->ps->as, (int32_t)rs->count);
	else
		BSON_APPEND_INT64(o, rs->ps->as, rs->count);
	set_out(rs, o);
	meta_set(rs, NULL);
	*doc = o;
	return 0;
}

/* ---- the chain ----------------------------------------------------------------------- */

static int stage_run(struct query_agg *a, int i, const bson_t **doc, struct dfs_err *err)
{
	struct rstage *rs;
	const struct pstage *ps;
	const bson_t *in;
	struct agg__ctx c;
	int rc;

	if (i < a->first)
		return src_next(a, doc, err);
	rs = &a->rs[i];
	ps = rs->ps;
	switch (ps->kind) {
	case S_MATCH: {
		bool in_find = i == 0 && a->match0_in_find;

		/* Only a $match the find runs can answer $text (plan.c note 7): a $facet
		 * sub-pipeline's first stage (parse_pipeline refuses the others). */
		if (!in_find && query_filter_has_text(ps->fx))
			return dfs_err_set(
				err, DFS_EINVAL,
				"$match with $text is only allowed as the first pipeline "
				"stage");
		for (;;) {
			bson_value_t v;

			if ((rc = stage_next(a, i - 1, &in, err)))
				return rc;
			if (!in_find && ps->fx && !query_filter_match(ps->fx, in, NULL))
				continue;
			if (ps->nmx) {
				bool pass = true;

				agg__arena_reset(&rs->ar);
				ctx_init(a, rs, in, meta_in(a, i), &c);
				for (int k = 0; k < ps->nmx && pass; k++) {
					if ((rc = agg__x_eval(ps->mx[k], &c, &v, err)))
						return rc;
					pass = agg__truthy(&v);
				}
				if (!pass)
					continue;
			}
			meta_set(rs, meta_in(a, i));
			*doc = in;
			return 0;
		}
	}
	case S_PROJECT:
	case S_ADDFIELDS: {
		bson_t *o;

		if ((rc = stage_next(a, i - 1, &in, err)))
			return rc;
		agg__arena_reset(&rs->ar);
		ctx_init(a, rs, in, meta_in(a, i), &c);
		o = bson_new();
		if (ps->kind == S_ADDFIELDS)
			rc = add_fields(&ps->root, in, &c, o, err);
		else if (ps->inclusion)
			rc = proj_incl(&ps->root, in, &c, o, err);
		else
			rc = proj_excl_meta(&ps->root, in, &c, o, err);
		set_out(rs, o);
		if (rc)
			return rc;
		meta_set(rs, c.score); /* the metadata stays with the document */
		*doc = o;
		return 0;
	}
	case S_REPLACEROOT: {
		bson_value_t v;
		bson_t view;

		if ((rc = stage_next(a, i - 1, &in, err)))
			return rc;
		agg__arena_reset(&rs->ar);
		ctx_init(a, rs, in, meta_in(a, i), &c);
		if ((rc = agg__x_eval(ps->root_x, &c, &v, err)))
			return rc;
		if (v.value_type != BSON_TYPE_DOCUMENT || !agg__doc_view(&v, &view))
			return dfs_err_set(err, DFS_EINVAL,
					   "'newRoot' expression must evaluate to an object, but "
					   "resulting value was of type %s",
					   agg__type_name(&v));
		set_out(rs, bson_copy(&view));
		meta_set(rs, c.score);
		*doc = rs->out;
		return 0;
	}
	case S_LIMIT:
		if (rs->count >= ps->n)
			return DFS_ENOENT;
		rs->count++;
		if ((rc = stage_next(a, i - 1, doc, err)))
			return rc;
		meta_set(rs, meta_in(a, i));
		return 0;
	case S_SKIP:
		while (rs->count < ps->n) {
			if ((rc = stage_next(a, i - 1, &in, err)))
				return rc;
			rs->count++;
		}
		if ((rc = stage_next(a, i - 1, doc, err)))
			return rc;
		meta_set(rs, meta_in(a, i));
		return 0;
	case S_GROUP:
		return group_next(a, i, rs, doc, err);
	case S_SORT:
		return sort_next(a, i, rs, doc, err);
	case S_UNWIND:
		return unwind_next(a, i, rs, doc, err);
	case S_LOOKUP:
		return lookup_next(a, i, rs, doc, err);
	case S_FACET:
		return facet_next(a, i, rs, doc, err);
	case S_SAMPLE:
		return sample_next(a, i, rs, doc, err);
	case S_COUNT:
		return count_next(a, i, rs, doc, err);
	default:
		return dfs_err_set(err, DFS_EINVAL, "%s cannot run in a read pipeline", ps->name);
	}
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The next document of stage i. An error found in the stage itself gets the stage's index as
 * a prefix ("stage 2: can't $divide by zero"); errors from stages before it already have
 * theirs. */
static int stage_next(struct query_agg *a, int i, const bson_t **doc, struct dfs_err *err)
{
	int64_t t0 = a->timed ? mono_ns() : 0;
	int rc = stage_run(a, i, doc, err);

	if (a->timed) {
		int64_t dt = mono_ns() - t0;

		if (i >= a->first) {
			a->rs[i].time_ns += dt;
			a->rs[i].nret += rc == 0;
		} else {
			a->src_ns += dt;
			a->src_nret += rc == 0;
		}
	}

	if (rc && rc != DFS_ENOENT && i >= a->first && (rc == DFS_EINVAL || rc == DFS_EFBIG) &&
	    strncmp(err->msg, "stage ", 6))
		dfs_err_prefix(err, "stage %d: ", a->rs[i].ps->index);
	return rc;
}

/* Note 1: a leading $match, then a $sort, go to the find (and a $skip and a $limit right
 * after them, so that the find's top-k sort bounds the memory). Sets them in fo (Borrowed
 * from p) and returns the index of the first stage that runs here. */
static int find_prefix(const struct query_pipeline *p, int upto, struct query_find_opts *fo,
		       bool *match0_in_find)
{
	int i = 0;

	*match0_in_find = false;
	if (i < upto && p->st[i].kind == S_MATCH && p->st[i].nmx) {
		/* the filter to the find, the $expr evaluated here by stage 0 (so a $text
		 * next to an $expr is still the find's) */
		fo->filter = p->st[i].filter;
		*match0_in_find = true;
		return 0;
	}
	if (i < upto && p->st[i].kind == S_MATCH) {
		fo->filter = p->st[i].filter;
		i++;
	}
	if (i < upto && p->st[i].kind == S_SORT && !strcmp(p->st[i].name, "$sort")) {
		fo->sort = p->st[i].sort_spec;
		i++;
	}
	if (i < upto && p->st[i].kind == S_SKIP) {
		fo->skip = p->st[i].n;
		i++;
	}
	if (i < upto && p->st[i].kind == S_LIMIT) {
		fo->limit = p->st[i].n;
		i++;
	}
	return i;
}

/* Does the pipeline only count what its find returns (a $count right after the find's
 * stages)? Then the find reads no document when its index bounds decide the filter (the
 * COUNT_SCAN MongoDB plans when no field of the documents is needed). */
static bool counts_only(const struct query_pipeline *p, int first, int upto)
{
	return first < upto && p->st[first].kind == S_COUNT;
}

/* A $group that compares no values: a constant key (countDocuments' {_id: 1, n: {$sum: 1}})
 * and accumulators that only add or collect constants or fields. */
static bool group_compares_nothing(const struct pstage *ps)
{
	if (strcmp(ps->name, "$group") || !ps->id || !agg__x_const(ps->id))
		return false;
	for (int j = 0; j < ps->naccs; j++) {
		const struct acc *ac = &ps->accs[j];

		if (ac->op != A_SUM && ac->op != A_AVG && ac->op != A_COUNT && ac->op != A_FIRST &&
		    ac->op != A_LAST && ac->op != A_PUSH && ac->op != A_STDDEVPOP)
			return false;
		if (ac->x && !agg__x_const(ac->x) && !agg__x_field_path(ac->x))
			return false;
	}
	return true;
}

/* With a collation, only the find compares strings under it (note 1's stages): the stages
 * after it may only count or cut ($limit, $skip, $count, a $group that compares nothing),
 * since the others' comparisons ($group keys, $sort, expressions) are binary. DFS_EINVAL
 * naming the first that is not. */
static int check_collated(const struct query_pipeline *p, int first, int upto, bool match0,
			  struct dfs_err *err)
{
	if (match0)
		return dfs_err_set(err, DFS_EINVAL,
				   "stage 0: $match with $expr and a collation is not supported by "
				   "docfs");
	for (int i = first; i < upto; i++) {
		int k = p->st[i].kind;

		if (k == S_GROUP && group_compares_nothing(&p->st[i]))
			continue;
		if (k != S_LIMIT && k != S_SKIP && k != S_COUNT)
			return dfs_err_set(err, DFS_EINVAL,
					   "stage %d: %s after the leading $match/$sort with a "
					   "collation is not supported by docfs",
					   p->st[i].index, p->st[i].name);
	}
	return 0;
}

/* Opens the pipeline's stages [0, upto) over coll (or over the documents of spool, read from
 * its current position, when not NULL; or over the one document one, when not NULL). */
static int agg_open(struct store_txn *t, int64_t coll, const struct query_pipeline *p,
		    int64_t now_ms, size_t mem, FILE *spool, const bson_t *one, const bson_t *extra,
		    const struct agg__var *vars, const struct query_collation *collation, int upto,
		    struct query_agg **out, struct dfs_err *err)
{
	struct query_agg *a = calloc(1, sizeof(*a));
	struct query_find_opts fo = {0};
	bson_t both = BSON_INITIALIZER;
	int rc;

	*out = NULL;
	if (!a)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	a->t = t;
	a->coll = coll;
	a->now_ms = now_ms;
	a->mem = mem;
	a->p = p;
	a->last = upto;
	a->spool = spool;
	a->one = one;
	dfs_buf_init(&a->sbuf);
	a->vars = vars;
	a->rng = (uint64_t)now_ms * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
	if (!a->rng)
		a->rng = 1;
	a->rs = calloc((size_t)p->n + 1, sizeof(*a->rs));
	if (!a->rs) {
		free(a);
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	}
	for (int i = 0; i < p->n; i++) {
		a->rs[i].ps = &p->st[i];
		agg__arena_init(&a->rs[i].ar);
		sorter_init(&a->rs[i].so, mem);
		dfs_buf_init(&a->rs[i].key);
		dfs_buf_init(&a->rs[i].pk);
		dfs_buf_init(&a->rs[i].pp);
	}
	if (!spool && !one) {
		a->first = find_prefix(p, upto, &fo, &a->match0_in_find);
		if (collation && (rc = check_collated(p, a->first, upto, a->match0_in_find, err))) {
			query_agg_free(a);
			return rc;
		}
		fo.collation = collation;
		fo.sort_mem = mem;
		fo.count_only = counts_only(p, a->first, upto);
		if (extra && fo.filter) {
			bson_t arr;

			bson_append_array_begin(&both, "$and", 4, &arr);
			bson_append_document(&arr, "0", 1, extra);
			bson_append_document(&arr, "1", 1, fo.filter);
			bson_append_array_end(&both, &arr);
			fo.filter = &both;
		} else if (extra) {
			fo.filter = extra;
		}
		rc = query_find_open(t, coll, &fo, &a->cur, err);
		bson_destroy(&both);
		if (rc) {
			query_agg_free(a);
			return rc;
		}
	}
	*out = a;
	return 0;
}

int query_agg_open(struct store_txn *t, int64_t coll, const struct query_pipeline *p,
		   const struct query_agg_opts *o, struct query_agg **out, struct dfs_err *err)
{
	*out = NULL;
	if (p->writes)
		return dfs_err_set(err, DFS_EINVAL,
				   "stage %d: %s writes a collection: run the pipeline with "
				   "query_agg_run_out in a write transaction",
				   p->st[p->n - 1].index, p->st[p->n - 1].name);
	return agg_open(t, coll, p, o ? o->now_ms : 0, o && o->mem ? o->mem : AGG_MEM_DEFAULT, NULL,
			NULL, NULL, query__let_vars(o ? o->let : NULL), o ? o->collation : NULL,
			p->n, out, err);
}

int query_agg_next(struct query_agg *a, const bson_t **doc, struct dfs_err *err)
{
	int rc = stage_next(a, a->last - 1, doc, err);

	for (int i = 0; i < a->p->n; i++)
		a->spills += a->rs[i].so.spills, a->rs[i].so.spills = 0;
	return rc;
}

int64_t query__agg_spills(const struct query_agg *a)
{
	return a->spills;
}

void query_agg_summary(const struct query_agg *a, struct query_summary *s)
{
	query_cursor_summary(a ? a->cur : NULL, s);
}

void query_agg_free(struct query_agg *a)
{
	if (!a)
		return;
	for (int i = 0; a->rs && i < a->p->n; i++) {
		struct rstage *rs = &a->rs[i];

		agg__arena_release(&rs->ar);
		if (rs->out)
			bson_destroy(rs->out);
		sorter_release(&rs->so);
		dfs_buf_release(&rs->key);
		dfs_buf_release(&rs->pk);
		dfs_buf_release(&rs->pp);
		if (rs->st) {
			for (int j = 0; j < rs->ps->naccs; j++)
				accst_release(&rs->st[j]);
			free(rs->st);
		}
		if (rs->in)
			bson_destroy(rs->in);
		free(rs->view);
		for (size_t k = 0; k < rs->nres; k++)
			bson_destroy(rs->res[k]);
		free(rs->res);
		free(rs->rsc);
	}
	free(a->rs);
	dfs_buf_release(&a->sbuf);
	free(a->sview);
	query_cursor_free(a->cur);
	free(a);
}

/* ---- update pipelines (note 8) ------------------------------------------------------- */

int query_pipeline_check_update(const struct query_pipeline *p, struct dfs_err *err)
{
	for (int i = 0; i < p->n; i++) {
		int k = p->st[i].kind;

		if (k != S_PROJECT && k != S_ADDFIELDS && k != S_REPLACEROOT)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s is not allowed to be used within an update",
					   p->st[i].name);
	}
	return 0;
}

int query_pipeline_apply(const struct query_pipeline *p, const bson_t *doc,
			 const struct query_agg_opts *o, bson_t *out, struct dfs_err *err)
{
	struct query_agg *a;
	const bson_t *res;
	int rc;

	if ((rc = query_pipeline_check_update(p, err)))
		return rc;
	if ((rc = agg_open(NULL, 0, p, o ? o->now_ms : 0, AGG_MEM_DEFAULT, NULL, doc, NULL,
			   query__let_vars(o ? o->let : NULL), NULL, p->n, &a, err)))
		return rc;
	rc = query_agg_next(a, &res, err);
	if (rc == DFS_ENOENT) /* cannot happen: every stage maps one document to one */
		rc = dfs_err_set(err, DFS_EIO, "an update pipeline returned no document");
	if (!rc)
		bson_concat(out, res);
	query_agg_free(a);
	return rc;
}

int query_pipeline_parse_let(const bson_t *pipeline, const struct query_let *l,
			     struct query_pipeline **out, struct dfs_err *err)
{
	int rc = parse_pipeline(pipeline, query__let_scope(l), out, err);

	if (!rc && (rc = check_meta(*out, false, err))) {
		query_pipeline_free(*out);
		*out = NULL;
	}
	return rc;
}

/* ---- $out and $merge (note 5) -------------------------------------------------------- */

/* The existing document of target with the _id of doc (*found false when none). */
static int target_get(struct store_txn *t, int64_t coll, const bson_t *doc, bson_t *existing,
		      bool *found, char *name, size_t nlen, struct store_entry *ent,
		      struct dfs_err *err)
{
	struct store_entry e;
	struct dfs_buf stem;
	bson_iter_t it;
	int rc;

	*found = false;
	if (!bson_iter_init_find(&it, doc, "_id"))
		return dfs_err_set(err, DFS_EINVAL, "$merge: a result has no _id");
	dfs_buf_init(&stem);
	rc = store_name_from_id(bson_iter_value(&it), &stem, err);
	if (!rc) {
		snprintf(name, nlen, "%s.json", stem.data);
		rc = store_entry_lookup(t, coll, name, &e, err);
		if (rc == DFS_ENOENT) {
			dfs_err_clear(err);
			rc = 0;
		} else if (!rc) {
			*found = true;
			if (ent)
				*ent = e;
			rc = store_doc_get(t, e.id, existing, err);
		}
	}
	dfs_buf_release(&stem);
	return rc;
}

static int write_text(struct store_txn *t, int64_t coll, const char *name, const bson_t *doc,
		      struct dfs_err *err)
{
	const struct store_attrs at = {0644, 0, 0, 0};
	struct dfs_buf text;
	int rc;

	dfs_buf_init(&text);
	rc = store_codec_render(doc, STORE_RENDER_CANONICAL, &text, err);
	if (!rc)
		rc = store_doc_write_text(t, coll, name, text.data, text.len, &at, NULL, err);
	dfs_buf_release(&text);
	return rc;
}

/* Reads the spool (length-prefixed prepared documents) back one document at a time. */
static int spool_read(FILE *f, struct dfs_buf *b, bson_t *doc, struct dfs_err *err)
{
	uint32_t len;

	if (fread(&len, sizeof(len), 1, f) != 1)
		return DFS_ENOENT;
	dfs_buf_reset(b);
	dfs_buf_reserve(b, len);
	if (fread(b->data, 1, len, f) != len)
		return dfs_err_set(err, DFS_EIO, "a temporary file is short");
	b->len = len;
	if (!bson_init_static(doc, (const uint8_t *)b->data, len))
		return dfs_err_set(err, DFS_ECORRUPT, "a bad spooled document");
	return 0;
}

/* Reads the text score that follows each document of a $facet's spool (facet_next). */
static int spool_read_score(FILE *f, bool *has, double *score, struct dfs_err *err)
{
	char h;

	if (fread(&h, 1, 1, f) != 1 || fread(score, sizeof(*score), 1, f) != 1)
		return dfs_err_set(err, DFS_EIO, "a temporary file is short");
	*has = h != 0;
	return 0;
}

int query_agg_run_out(struct store_txn *t, int64_t coll, const struct query_pipeline *p,
		      const struct query_agg_opts *o, int64_t *nwritten, struct dfs_err *err)
{
	const struct pstage *last;
	struct query_agg *a = NULL;
	struct sorter so;
	struct store_coll target;
	struct dfs_buf key, buf;
	const bson_t *doc;
	FILE *spool = NULL;
	size_t mem = o && o->mem ? o->mem : AGG_MEM_DEFAULT;
	const char *k, *pl;
	uint32_t kl, pll, owner, group;
	bool have_prev = false, target_exists;
	int64_t n = 0;
	uint64_t seq = 0;
	int rc;

	if (nwritten)
		*nwritten = 0;
	if (!p->writes)
		return dfs_err_set(err, DFS_EINVAL, "the pipeline does not end in $out or $merge");
	last = &p->st[p->n - 1];
	if (last->out_db && strcmp(last->out_db, store_db_name(store_txn_db(t))))
		return dfs_err_set(err, DFS_EINVAL,
				   "stage %d: %s: writing to another database ('%s') is not "
				   "supported",
				   last->index, last->name, last->out_db);
	sorter_init(&so, mem);
	dfs_buf_init(&key);
	dfs_buf_init(&buf);
	/* 1. run the pipeline, preparing every result, sorted by _id */
	if ((rc = agg_open(t, coll, p, o ? o->now_ms : 0, mem, NULL, NULL, NULL,
			   query__let_vars(o ? o->let : NULL), o ? o->collation : NULL, p->n - 1,
			   &a, err)))
		goto done;
	while ((rc = query_agg_next(a, &doc, err)) == 0) {
		bson_t prepared;
		bson_iter_t it;

		if ((rc = store_doc_prepare(doc, NULL, &prepared, err))) {
			dfs_err_prefix(err, "stage %d: %s: ", last->index, last->name);
			goto done;
		}
		bson_iter_init_find(&it, &prepared, "_id");
		dfs_buf_reset(&key);
		rc = store_key_append(&key, bson_iter_value(&it), false, err);
		put_seq(&key, seq++);
		if (!rc)
			rc = sorter_add(&so, key.data, key.len, bson_get_data(&prepared),
					prepared.len, err);
		bson_destroy(&prepared);
		if (rc)
			goto done;
	}
	if (rc != DFS_ENOENT)
		goto done;
	dfs_err_clear(err);
	if ((rc = sorter_finish(&so, err)))
		goto done;
	/* 2. check: duplicate _ids ($out), fail modes ($merge); spool in _id order */
	rc = store_coll_find(t, last->from, &target, err);
	if (rc && rc != DFS_ENOENT)
		goto done;
	target_exists = rc == 0;
	dfs_err_clear(err);
	spool = tmpfile();
	if (!spool) {
		rc = dfs_err_set(err, DFS_EIO, "cannot create a temporary file");
		goto done;
	}
	dfs_buf_reset(&key);
	while ((rc = sorter_next(&so, &k, &kl, &pl, &pll, err)) == 0) {
		bson_t d;

		if (!bson_init_static(&d, (const uint8_t *)pl, pll)) {
			rc = dfs_err_set(err, DFS_ECORRUPT, "a bad spilled record");
			goto done;
		}
		if (have_prev && key.len == kl - 8 && !memcmp(key.data, k, kl - 8) &&
		    last->kind == S_OUT) {
			bson_iter_t it;
			struct dfs_buf idt;

			dfs_buf_init(&idt);
			bson_iter_init_find(&it, &d, "_id");
			store_codec_render_value(bson_iter_value(&it), &idt, NULL);
			rc = dfs_err_set(err, DFS_EEXIST,
					 "stage %d: $out: duplicate _id %s in the results",
					 last->index, idt.data ? idt.data : "");
			dfs_buf_release(&idt);
			goto done;
		}
		have_prev = true;
		dfs_buf_reset(&key);
		dfs_buf_append(&key, k, kl - 8);
		if (last->kind == S_MERGE && target_exists &&
		    (last->when_matched == 3 || last->when_not_matched == 2)) {
			bson_t ex = BSON_INITIALIZER;
			bool found;
			char name[300];

			rc = target_get(t, target.id, &d, &ex, &found, name, sizeof(name), NULL,
					err);
			bson_destroy(&ex);
			if (rc)
				goto done;
			if (found && last->when_matched == 3) {
				rc = dfs_err_set(err, DFS_EEXIST,
						 "stage %d: $merge: a document with _id of "
						 "'%s' already exists in the target (whenMatched: "
						 "fail)",
						 last->index, name);
				goto done;
			}
			if (!found && last->when_not_matched == 2) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "stage %d: $merge could not find a matching "
						 "document in the target for '%s' (whenNotMatched: "
						 "fail)",
						 last->index, name);
				goto done;
			}
		} else if (last->kind == S_MERGE && !target_exists && last->when_not_matched == 2) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "stage %d: $merge could not find a matching document in "
					 "the target (whenNotMatched: fail)",
					 last->index);
			goto done;
		}
		if (fwrite(&pll, sizeof(pll), 1, spool) != 1 || fwrite(pl, 1, pll, spool) != pll) {
			rc = dfs_err_set(err, DFS_EIO, "cannot write a temporary file");
			goto done;
		}
	}
	if (rc != DFS_ENOENT)
		goto done;
	dfs_err_clear(err);
	if (fflush(spool) || fseek(spool, 0, SEEK_SET)) {
		rc = dfs_err_set(err, DFS_EIO, "cannot read a temporary file");
		goto done;
	}
	/* 3. write, as the caller would through files (note 9) */
	store_txn_owner(t, &owner, &group);
	if (!target_exists) {
		/* a database directory is 0755, the daemon's (fs/fuse/fsops.c) */
		if (!store_txn_may(t, STORE_MAY_WRITE, 0755, (uint32_t)getuid(), (uint32_t)getgid())) {
			rc = dfs_err_set(err, DFS_EACCES,
					 "stage %d: %s: permission denied: uid %u may not create "
					 "collection '%s'",
					 last->index, last->name, owner, last->from);
			goto done;
		}
		if ((rc = store_coll_create(t, last->from, 0755, owner, group, &target, err)))
			goto done;
	} else if (!store_txn_may(t, STORE_MAY_WRITE, target.mode, target.uid, target.gid) &&
		   (last->kind == S_OUT || last->when_not_matched == 0)) {
		/* $out replaces every entry, $merge may add some: the directory's w bit */
		rc = dfs_err_set(err, DFS_EACCES,
				 "stage %d: %s: permission denied: collection '%s' is not writable "
				 "by uid %u",
				 last->index, last->name, last->from, owner);
		goto done;
	} else if (last->kind == S_OUT) {
		if ((rc = store_coll_empty(t, target.id, err)))
			goto done;
	}
	for (;;) {
		const struct store_attrs at = {0644, owner, group, 0};
		bson_t d;

		rc = spool_read(spool, &buf, &d, err);
		if (rc == DFS_ENOENT) {
			rc = 0;
			break;
		}
		if (rc)
			goto done;
		if (last->kind == S_OUT) {
			rc = store_doc_insert(t, target.id, &d, &at, NULL, err);
		} else {
			bson_t ex = BSON_INITIALIZER;
			struct store_entry e;
			bool found;
			char name[300];

			rc = target_get(t, target.id, &d, &ex, &found, name, sizeof(name), &e, err);
			if (!rc && found && last->when_matched <= 1 &&
			    !store_txn_may(t, STORE_MAY_READ | STORE_MAY_WRITE, e.mode, e.uid, e.gid))
				rc = dfs_err_set(err, DFS_EACCES,
						 "permission denied: uid %u may not rewrite %s",
						 owner, name);
			else if (!rc && !found && last->when_not_matched == 0)
				rc = store_doc_insert(t, target.id, &d, &at, NULL, err);
			else if (!rc && !found)
				n--; /* discarded */
			else if (!rc && found && last->when_matched == 1)
				rc = write_text(t, target.id, name, &d, err);
			else if (!rc && found && last->when_matched == 0) {
				bson_value_t dv;
				bson_t *m = bson_copy(&ex);

				dv.value_type = BSON_TYPE_DOCUMENT;
				dv.value.v_doc.data = (uint8_t *)bson_get_data(&d);
				dv.value.v_doc.data_len = d.len;
				merge_into(&m, &dv);
				rc = write_text(t, target.id, name, m, err);
				bson_destroy(m);
			} else if (!rc) {
				n--; /* kept the existing one */
			}
			bson_destroy(&ex);
		}
		if (rc) {
			dfs_err_prefix(err, "stage %d: %s: ", last->index, last->name);
			goto done;
		}
		n++;
	}
	if (nwritten)
		*nwritten = n;
done:
	if (a)
		query_agg_free(a);
	if (spool)
		fclose(spool);
	sorter_release(&so);
	dfs_buf_release(&key);
	dfs_buf_release(&buf);
	return rc;
}

/* ---- explain (note 6) ---------------------------------------------------------------- */

/* The user's stage document at index of p's pipeline (*out a view into p->spec). */
static bool user_stage(const struct query_pipeline *p, int index, bson_iter_t *out)
{
	bson_iter_t it, d;
	char key[16];

	snprintf(key, sizeof(key), "%d", index);
	return p->spec && bson_iter_init_find(&it, p->spec, key) && bson_iter_recurse(&it, &d) &&
	       bson_iter_next(&d) && (*out = d, true);
}

/* Appends stage i of p as MongoDB's aggregate explain shows it: {<$stage>: <spec>}, with
 * $sort as {"$sort": {"sortKey": ..}} and $sortByCount as the $group and $sort it is. */
static void explain_stage_spec(const struct query_pipeline *p, int i, bson_t *out)
{
	const struct pstage *ps = &p->st[i];
	bson_iter_t d;
	bson_t b, c;

	if (ps->kind == S_SORT) {
		BSON_APPEND_DOCUMENT_BEGIN(out, "$sort", &b);
		BSON_APPEND_DOCUMENT(&b, "sortKey", ps->sort_spec);
		bson_append_document_end(out, &b);
		return;
	}
	if (!user_stage(p, ps->index, &d)) {
		bson_t e = BSON_INITIALIZER;

		BSON_APPEND_DOCUMENT(out, ps->name, &e);
		return;
	}
	if (!strcmp(ps->name, "$sortByCount")) {
		BSON_APPEND_DOCUMENT_BEGIN(out, "$group", &b);
		BSON_APPEND_VALUE(&b, "_id", bson_iter_value(&d));
		BSON_APPEND_DOCUMENT_BEGIN(&b, "count", &c);
		BSON_APPEND_INT32(&c, "$sum", 1);
		bson_append_document_end(&b, &c);
		bson_append_document_end(out, &b);
		return;
	}
	BSON_APPEND_VALUE(out, bson_iter_key(&d), bson_iter_value(&d));
}

/* Counters as explain.c prints them: int32 when they fit. */
static void append_num(bson_t *b, const char *k, int64_t v)
{
	if (v >= INT32_MIN && v <= INT32_MAX)
		bson_append_int32(b, k, -1, (int32_t)v);
	else
		bson_append_int64(b, k, -1, v);
}

static void append_counts(bson_t *out, int64_t nret, int64_t ns)
{
	append_num(out, "nReturned", nret);
	append_num(out, "executionTimeMillisEstimate", ns / 1000000);
}

/* Copies every field of src but "command" to out. */
static void copy_but_command(const bson_t *src, bson_t *out)
{
	bson_iter_t it;

	if (bson_iter_init(&it, src))
		while (bson_iter_next(&it))
			if (strcmp(bson_iter_key(&it), "command"))
				BSON_APPEND_VALUE(out, bson_iter_key(&it), bson_iter_value(&it));
}

static void append_agg_command(const char *ns, const struct query_pipeline *p, bson_t *out)
{
	const char *dot = strchr(ns, '.');
	bson_t cmd, e = BSON_INITIALIZER;

	BSON_APPEND_DOCUMENT_BEGIN(out, "command", &cmd);
	BSON_APPEND_UTF8(&cmd, "aggregate", dot ? dot + 1 : ns);
	if (p->spec)
		BSON_APPEND_ARRAY(&cmd, "pipeline", p->spec);
	BSON_APPEND_BOOL(&cmd, "explain", true);
	BSON_APPEND_DOCUMENT(&cmd, "cursor", &e);
	if (dot)
		bson_append_utf8(&cmd, "$db", 3, ns, (int)(dot - ns));
	bson_append_document_end(out, &cmd);
}

int query_agg_explain(struct store_txn *t, int64_t coll, const char *ns,
		      const struct query_pipeline *p, const struct query_agg_opts *o, int verbosity,
		      bson_t *out, struct dfs_err *err)
{
	size_t mem = o && o->mem ? o->mem : AGG_MEM_DEFAULT;
	int upto = p->writes ? p->n - 1 : p->n;
	struct query_find_opts fo = {.sort_mem = mem};
	struct query_agg *a = NULL;
	bson_t fx = BSON_INITIALIZER, stages, sd, cur;
	bson_iter_t it;
	bool match0_in_find;
	int first, rc;

	first = find_prefix(p, upto, &fo, &match0_in_find);
	fo.count_only = counts_only(p, first, upto);
	fo.in_pipeline = true;
	if ((rc = query_find_explain(t, coll, ns, &fo, verbosity, &fx, err)))
		goto done;
	if (first == p->n) {
		/* The find runs the whole pipeline: MongoDB shows the find's explain alone. */
		copy_but_command(&fx, out);
		append_agg_command(ns, p, out);
		goto done;
	}
	if (verbosity >= QUERY_VERB_EXEC) {
		/* Runs the stages before a $out/$merge (never the write) to count and time
		 * each one. The find runs again here: its counters above are its own run's. */
		const bson_t *doc;

		if ((rc = agg_open(t, coll, p, o ? o->now_ms : 0, mem, NULL, NULL, NULL,
				   query__let_vars(o ? o->let : NULL), o ? o->collation : NULL,
				   upto, &a, err)))
			goto done;
		a->timed = true;
		while (upto > 0 && (rc = stage_next(a, upto - 1, &doc, err)) == 0)
			;
		if (upto > 0 && rc != DFS_ENOENT)
			goto done;
		rc = 0;
	}
	BSON_APPEND_UTF8(out, "explainVersion", "1");
	BSON_APPEND_ARRAY_BEGIN(out, "stages", &stages);
	BSON_APPEND_DOCUMENT_BEGIN(&stages, "0", &sd);
	BSON_APPEND_DOCUMENT_BEGIN(&sd, "$cursor", &cur);
	if (bson_iter_init_find(&it, &fx, "queryPlanner"))
		BSON_APPEND_VALUE(&cur, "queryPlanner", bson_iter_value(&it));
	if (bson_iter_init_find(&it, &fx, "executionStats"))
		BSON_APPEND_VALUE(&cur, "executionStats", bson_iter_value(&it));
	bson_append_document_end(&sd, &cur);
	if (a)
		append_counts(&sd, a->src_nret, a->src_ns);
	bson_append_document_end(&stages, &sd);
	for (int i = first, k = 1; i < p->n; i++, k++) {
		char key[16];

		snprintf(key, sizeof(key), "%d", k);
		BSON_APPEND_DOCUMENT_BEGIN(&stages, key, &sd);
		explain_stage_spec(p, i, &sd);
		if (a && i < upto) {
			const struct rstage *rs = &a->rs[i];

			append_counts(&sd, rs->nret, rs->time_ns);
			if (rs->ps->kind == S_GROUP || rs->ps->kind == S_SORT) {
				BSON_APPEND_BOOL(&sd, "usedDisk", rs->so.spills > 0);
				append_num(&sd, "spills", rs->so.spills);
			}
		}
		bson_append_document_end(&stages, &sd);
	}
	bson_append_array_end(out, &stages);
	append_agg_command(ns, p, out);
done:
	query_agg_free(a);
	bson_destroy(&fx);
	return rc;
}

/* One line per stage, the last stage first and each input indented under it (as the find
 * tree draws a plan); the $cursor's find plan under it. */
int query_agg_explain_tree(const bson_t *explain, struct dfs_buf *out, struct dfs_err *err)
{
	bson_iter_t it, st;
	bson_value_t v[128]; /* shallow copies: views into explain */
	int n = 0, rc;

	if (!bson_iter_init_find(&it, explain, "stages") || !BSON_ITER_HOLDS_ARRAY(&it))
		return query_explain_tree(explain, out, err);
	bson_iter_recurse(&it, &st);
	while (bson_iter_next(&st) && n < (int)(sizeof(v) / sizeof(v[0])))
		if (BSON_ITER_HOLDS_DOCUMENT(&st))
			v[n++] = *bson_iter_value(&st);
	for (int k = n - 1, depth = 0; k >= 0; k--, depth++) {
		bson_t sd, sub;
		bson_iter_t f;
		const char *name = "?";

		if (!agg__doc_view(&v[k], &sd) || !bson_iter_init(&f, &sd) || !bson_iter_next(&f))
			continue;
		name = bson_iter_key(&f);
		for (int i = 0; i < depth; i++)
			dfs_buf_puts(out, "  ");
		dfs_buf_puts(out, name);
		if (strcmp(name, "$cursor")) {
			dfs_buf_putc(out, ' ');
			if ((rc = store_codec_render_value(bson_iter_value(&f), out, err)))
				return rc;
		}
		while (bson_iter_next(&f)) {
			const char *key = bson_iter_key(&f);

			if (!strcmp(key, "nReturned") ||
			    (!strcmp(key, "spills") && bson_iter_as_int64(&f) > 0))
				dfs_buf_printf(out, "  %s=%lld", key,
					       (long long)bson_iter_as_int64(&f));
		}
		dfs_buf_putc(out, '\n');
		if (!strcmp(name, "$cursor") && bson_iter_init(&f, &sd) && bson_iter_next(&f) &&
		    agg__doc_view(bson_iter_value(&f), &sub)) {
			struct dfs_buf plan;
			size_t start = 0;

			dfs_buf_init(&plan);
			rc = query_explain_tree(&sub, &plan, err);
			for (size_t i = 0; !rc && i < plan.len; i++) {
				if (plan.data[i] != '\n')
					continue;
				for (int d = 0; d <= depth; d++)
					dfs_buf_puts(out, "  ");
				dfs_buf_printf(out, "%.*s\n", (int)(i - start), plan.data + start);
				start = i + 1;
			}
			dfs_buf_release(&plan);
			if (rc)
				return rc;
		}
	}
	return 0;
}
