/*
 * plan_int.h - private declarations shared by the planner (plan.c: which plans exist), the
 * executor (exec.c: how a plan runs) and explain (explain.c: how a plan is described). A plan
 * is a tree of struct plan__node; the same node carries its description (set by plan.c,
 * immutable afterwards), its run state and its counters (exec.c). Nothing outside query/
 * includes it, except the query unit tests and the qrun test driver.
 */
#ifndef DOCFS_PLAN_INT_H
#define DOCFS_PLAN_INT_H

#include "query_int.h"

#include <pthread.h>

/* ---- index bounds (plan.c) ---------------------------------------------------------- */

/* One interval of values of one index field, in MongoDB's bounds semantics. */
struct plan__ival {
	bson_value_t lo, hi; /* Owned copies (MinKey/MaxKey for the open ends) */
	bool lo_in, hi_in;   /* the ends are included */
};

/* The intervals of one field: sorted, disjoint; n == 0 is the empty set. */
struct plan__ivals {
	struct plan__ival *iv; /* Owned: n intervals */
	int n, cap;
	bool exact; /* matching a key in these intervals is the whole predicate */
};

void plan__ivals_release(struct plan__ivals *s);
/* The full range [MinKey, MaxKey]. */
void plan__ivals_full(struct plan__ivals *s);
bool plan__ivals_is_full(const struct plan__ivals *s);
/* Intersects a with b into a (both sorted and disjoint). */
void plan__ivals_intersect(struct plan__ivals *a, const struct plan__ivals *b);
/* Unites b into a. */
void plan__ivals_union(struct plan__ivals *a, const struct plan__ivals *b);
/* The intervals of one predicate (a leaf of the filter, or $not over one) on the field it
 * names; false when the predicate gives no bounds (the index cannot serve it). hashed: the
 * field is hashed (equality and $in only, the points hashed). */
bool plan__pred_bounds(const struct query_expr *e, bool hashed, struct plan__ivals *out);
/* The interval in MongoDB's explain string form ("[5, 5]", "(5, inf.0]", ...) to out. */
void plan__ival_describe(const struct plan__ival *iv, struct dfs_buf *out);

/* A half-open byte range [lo, hi) of index keys; an empty lo / hi means unbounded. */
struct plan__range {
	struct dfs_buf lo, hi;
};

/* The byte ranges of one field's intervals for a field of direction dir (1, -1) appended
 * after the key prefix pre (may be empty), in ascending byte order. */
int plan__ranges_of(const struct plan__ivals *s, int dir, const struct dfs_buf *pre,
		    struct plan__range **out, int *n, struct dfs_err *err);
void plan__ranges_free(struct plan__range *r, int n);

/* ---- plans (plan.c builds, exec.c runs, explain.c describes) ------------------------ */

enum plan__stage {
	PS_COLLSCAN,
	PS_IXSCAN,
	PS_FETCH,
	PS_OR,
	PS_SORT,
	PS_SKIP,
	PS_LIMIT,
	PS_PROJ_SIMPLE,
	PS_PROJ_DEFAULT,
	PS_PROJ_COVERED,
	PS_FAST_COUNT, /* a count of every document, from the collection's row count */
	PS_TEXT_MATCH, /* $text: phrases, negations, the case/diacritic-sensitive terms */
	PS_TEXT_OR,    /* $text: the union of its IXSCANs (one per term), scores summed */
};

/* MongoDB's per-stage counters (explain's executionStages). */
struct plan__stats {
	int64_t works, advanced, need_time, nreturned;
	bool eof;
	int64_t keys_examined, docs_examined, seeks, dups_tested, dups_dropped;
	int64_t docs_rejected;	 /* TEXT_MATCH */
	int64_t already_has_obj; /* FETCH: inputs that were stored documents already */
	int64_t ns; /* time in the stage and its inputs, when timed (plan__set_timed) */
};

struct plan__set;     /* a set of int64 ids (exec.c) */
struct plan__tscores; /* TEXT_OR's (id, score) pairs (exec.c) */
struct plan__sortbuf;

struct plan__node {
	int stage;		  /* enum plan__stage */
	struct plan__node **kids; /* Owned: the input stages (OR: several) */
	int nkids;
	/* description (plan.c) */
	const struct query_expr *filter; /* Borrowed (the cursor's): COLLSCAN, FETCH apply it */
	bool backward;			 /* COLLSCAN, IXSCAN direction */
	int ixpos;			 /* IXSCAN: position in the cursor's index list */
	const struct store_index *ix;	 /* IXSCAN: Borrowed from the cursor's index list */
	struct plan__ivals *fb;		 /* IXSCAN: Owned, ix->nfields field bounds */
	struct plan__range *ranges;	 /* IXSCAN: Owned byte ranges, ascending */
	int nranges;
	bool multikey;	 /* IXSCAN: de-duplicate ids */
	bool build_doc;	 /* IXSCAN: build the document from the entry's values (covered) */
	bool count_scan; /* IXSCAN: a count's, reading keys only (no document, no FETCH) */
	size_t sort_mem; /* SORT: bytes held before spilling */
	int64_t amount;	 /* SKIP, LIMIT amounts; SORT: limitAmount (0: none) */
	const struct query_sort *sort; /* SORT: Borrowed */
	const bson_t *sort_spec;       /* SORT: Borrowed */
	const struct query_proj *proj; /* PROJECTION: Borrowed */
	const bson_t *proj_spec;       /* PROJECTION: Borrowed */
	bool positional;	       /* PROJECTION: the projection uses '$' */
	struct query__text *text;      /* TEXT_MATCH: Borrowed from the filter */
	bson_t *text_prefix;	       /* TEXT_MATCH: Owned indexPrefix {field: value} */
	struct query_expr *rest;       /* FETCH over a text OR: Owned node (its kids are
					* Borrowed): the root $and without that $or */
	bool text_scan;		       /* IXSCAN: one term's entries under TEXT_OR */
	bool scored; /* SORT: records keep the text score; PROJECTION: the query has text
		      * score metadata (a $text plan) */
	/* run state (exec.c) */
	struct plan__stats st;
	struct store_cursor *sc; /* COLLSCAN */
	int64_t *ids;		 /* COLLSCAN backward: Owned ids, read first */
	size_t nids, next_id;
	struct store_ixscan *is;  /* IXSCAN */
	int cur_range;		  /* IXSCAN: the range being scanned, -1 before the first */
	struct plan__set *seen;	  /* IXSCAN multikey, OR: ids returned */
	int cur_kid;		  /* OR */
	int64_t count;		  /* SKIP, LIMIT: done so far */
	struct plan__sortbuf *sb; /* SORT */
	struct plan__tscores *ts; /* TEXT_OR */
	bson_t *out;		  /* PROJECTION: Owned result */
	bool opened;
	bool sees_all; /* COLLSCAN, IXSCAN: the caller may read every document (store.h) */
};

/* Adds the plan rooted at n to s (explain.c): its counters and its planSummary leaves. */
void plan__summary(const struct plan__node *n, struct query_summary *s);

/* The working member passed up the tree by one work() call. */
struct plan__wm {
	int64_t id;	      /* the document's entry id (0 when unknown: after SORT) */
	bool has_doc;	      /* doc is set: the stored document, or built from the index
			       * entry's values when has_vals (covered) */
	bson_t doc;	      /* a read-only view, valid until the next work() of the same plan */
	bool has_vals;	      /* vals is set (IXSCAN) */
	bson_t vals;	      /* the index entry's values, a view */
	int elem_index;	      /* for positional projection, -1 when unknown */
	const bson_t *result; /* the document to return (a view of doc or a projection) */
	bool has_score;	      /* score is set (a $text plan; not for documents a non-$text
			       * branch of an $or found) */
	double score;	      /* the textScore */
};

/* A candidate plan: a tree and what the planner knows about it. */
struct plan__cand {
	struct plan__node *root;  /* Owned */
	char desc[512];		  /* the plan's identity for the plan cache ("ix:price_1", ...) */
	bool has_sort, has_fetch; /* for MongoDB's tie-breakers */
	double score;		  /* trial productivity */
	struct plan__stats trial; /* the root's counters at the end of the trial */
};

/* What a find plans over: the parsed options and the collection's indexes. */
struct plan__query {
	struct query_expr *filter;			   /* Owned, or NULL */
	struct query_proj *proj;			   /* Owned, or NULL */
	struct query_sort *sort;			   /* Owned, or NULL */
	const bson_t *filter_spec, *sort_spec, *proj_spec; /* Borrowed from the options */
	int64_t skip, limit;
	struct store_index *ixs; /* Owned: the collection's indexes */
	int nixs;
	const bson_t *hint;		      /* Borrowed */
	const char *hint_name;		      /* Borrowed */
	const bson_t *min, *max;	      /* Borrowed: query_find_opts' (NULL: none) */
	size_t sort_mem;		      /* SORT budget */
	bool count_only;		      /* query_find_opts.count_only */
	struct query_collation *coll;	      /* Owned: a reference to query_find_opts.collation */
	struct query_expr *text;	      /* Borrowed: the filter's $text node, or NULL */
	const struct query_expr *text_or;     /* Borrowed: the $or holding it, or NULL */
	const struct query_expr *text_branch; /* Borrowed: text_or's kid holding it */
};

/* Builds the candidate plans of q into *cands (Owned array of *n, freed by
 * plan__cands_free). With a hint exactly one candidate. Errors: DFS_EINVAL for a hint that
 * names no index. */
int plan__enumerate(struct plan__query *q, struct plan__cand **cands, int *n, struct dfs_err *err);
void plan__cands_free(struct plan__cand *c, int n);
void plan__node_free(struct plan__node *n);

/* The plan cache (plan.c): the desc of the winner for (db, coll, shape), if still valid. */
bool plan__cache_get(struct store_txn *t, int64_t coll, const struct plan__query *q, char *desc,
		     size_t cap);
void plan__cache_put(struct store_txn *t, int64_t coll, const struct plan__query *q,
		     const char *desc);
/* Counters for tests: lookups that hit, entries dropped as stale. */
void plan__cache_stats(int64_t *hits, int64_t *misses, int64_t *invalidations);
void plan__cache_clear(void);

/* ---- execution (exec.c) ------------------------------------------------------------- */

enum { PLAN_ADVANCED, PLAN_NEED_TIME, PLAN_EOF };

/* One unit of work of the plan rooted at n: PLAN_ADVANCED with *wm, PLAN_NEED_TIME, PLAN_EOF,
 * or -1 with err set. */
int plan__work(struct store_txn *t, struct plan__node *n, struct plan__wm *wm, struct dfs_err *err);
/* Whether work() on this thread times each stage (stats.ns): explain's, off otherwise. */
void plan__set_timed(bool on);
/* Counts what the plan rooted at n returns: PS_FAST_COUNT reads its number at once (one
 * work), any other plan is worked to its end. Errors: those of work(). */
int plan__count(struct store_txn *t, struct plan__node *n, int64_t *count, struct dfs_err *err);
/* Ends the run state of a tree (counters kept); a later work() starts it again. */
void plan__reset(struct plan__node *n, bool keep_stats);

/* Plans and opens q for running: picks the winner (trial, cache), fills *cands. Used by
 * query_find_open and query_find_explain. */
struct plan__run {
	struct plan__query q;
	struct plan__cand *cands;
	int ncands;
	int winner;
	bool from_cache;
	bool trial_run;
};
int plan__run_open(struct store_txn *t, int64_t coll, const struct query_find_opts *o,
		   bool use_cache, struct plan__run *r, struct dfs_err *err);
void plan__run_release(struct plan__run *r);

/* explain.c: a stage's MongoDB name. */
const char *plan__stage_name(int stage);

/* For the test driver: the sort key (without the _id tie-break) of the last result of a
 * cursor before projection, or NULL when the find has no sort. */
const struct dfs_buf *query__cursor_sort_key(const struct query_cursor *c);
void query__cursor_want_keys(struct query_cursor *c);
/* Appends the candidates' descs ("ix:price_1", "or:a_1:b_1", "coll") to names as an array
 * body; returns their number. */
int query__cursor_candidates(const struct query_cursor *c, bson_t *names);

#endif
