/*
 * query.h - the public interface of the query layer: MongoDB's filter language (parse to a
 * validated expression tree, match against documents), projection, and sort keys. It builds
 * on store.h (values, comparison, key encoding, errors) and knows nothing of SQL or FUSE.
 *
 * Thread-safety: parsed objects (struct query_expr, query_proj, query_sort) are immutable
 * after parsing and may be used by several threads at once.
 */
#ifndef DOCFS_QUERY_H
#define DOCFS_QUERY_H

#include "store.h"

/* ---- filters (filter.c, match.c) --------------------------------------------------- */

/*
 * A parsed filter. Operators: $eq $ne $gt $gte $lt $lte $in $nin $and $or $nor $not $exists
 * $type $mod $regex (with $options) $all $elemMatch $size $expr $comment; implicit equality;
 * regex values (/re/ or {$regex}) as in MongoDB. $text, $where, $function, geo and bitwise
 * operators are rejected with a message naming them.
 */
struct query_expr;

/* Parses filter (Borrowed for the call) into *out (Owned, freed by query_expr_free). Errors:
 * DFS_EINVAL with a message naming the operator and the path, e.g. "unknown operator '$gtx'
 * at 'age'", "$in needs an array at 'tags'", "$regex has an invalid pattern at 'name': ...". */
/* Whether the filter holds a $text (which only a find's plan can answer: elsewhere it must
 * be refused). */
bool query_filter_has_text(const struct query_expr *e);
int query_filter_parse(const bson_t *filter, struct query_expr **out, struct dfs_err *err);

/*
 * A collation (MongoDB's option: {locale, strength, caseLevel, caseFirst, numericOrdering,
 * alternate, maxVariable, backwards, normalization}) on ICU (collation.c). Immutable after
 * creation: thread-safe.
 */
struct query_collation;
/* Reads spec (Borrowed for the call) into *out (Owned, query_collation_free); *out is NULL
 * for {locale: "simple"} (binary comparison, as without one). Errors DFS_EINVAL: no locale,
 * a locale ICU does not have, an unknown field or a bad value. */
int query_collation_new(const bson_t *spec, struct query_collation **out, struct dfs_err *err);
void query_collation_free(struct query_collation *c);
/* query_filter_parse whose comparisons ($eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $all,
 * equality inside $elemMatch, of strings at any depth) follow c (Borrowed: must outlive
 * *out; NULL: query_filter_parse). DFS_EINVAL for what docfs cannot compare under a
 * collation: $regex, $expr, $text, $where. */
int query_filter_parse_collated(const bson_t *filter, const struct query_collation *c,
				struct query_expr **out, struct dfs_err *err);
void query_expr_free(struct query_expr *e);

/*
 * Does doc match e (MongoDB semantics: dotted paths through embedded documents and arrays,
 * numeric path components, any-element and whole-array matching, null matching missing,
 * comparison within a type bracket, numbers across types by value)? When elem_index is not
 * NULL it gets the index of the array element that satisfied the first array traversed on
 * the way to a match (what positional projection '$' uses), or -1.
 */
bool query_filter_match(const struct query_expr *e, const bson_t *doc, int *elem_index);

/* Appends the normalized filter (MongoDB's explain "parsedQuery" shape) to out under key. */
void query_filter_describe(const struct query_expr *e, bson_t *out, const char *key);

/* ---- projection (project.c) -------------------------------------------------------- */

/*
 * A parsed projection: inclusion or exclusion (mixing them is an error, except _id), _id
 * included unless excluded, dotted paths keeping their nesting, $elemMatch, $slice (n or
 * [skip, limit]), positional "a.$". Expressions other than these ($literal, aggregation
 * expressions) are rejected with a message.
 */
struct query_proj;

int query_proj_parse(const bson_t *spec, struct query_proj **out, struct dfs_err *err);
void query_proj_free(struct query_proj *p);
/* Applies p to doc into out (initialised, empty). elem_index: from query_filter_match, for
 * positional projection (an error when the projection needs it and it is -1). */
int query_proj_apply(const struct query_proj *p, const bson_t *doc, int elem_index, bson_t *out,
		     struct dfs_err *err);
/* The same in a query that has text score metadata: {$meta: "textScore"} fields get *score,
 * or are left out when score is NULL (a document without a score, such as one a non-$text
 * branch of an $or found: MongoDB's missing metadata). query_proj_apply, for queries without
 * the metadata, fails on such a field with DFS_EINVAL "query requires text score
 * metadata...". */
int query_proj_apply_score(const struct query_proj *p, const bson_t *doc, int elem_index,
			   const double *score, bson_t *out, struct dfs_err *err);
/* Whether the projection has a {$meta: "textScore"} field. */
bool query_proj_has_meta(const struct query_proj *p);

/* ---- sort (sort.c) ----------------------------------------------------------------- */

/*
 * A parsed sort specification ({a: 1, "b.c": -1}). A document's sort key is a byte string
 * whose memcmp order is MongoDB's sort order: per field the store_key encoding of the
 * field's sort value (missing and null as null; an array sorts by its smallest element
 * ascending, its largest descending; an empty array before null... as MongoDB documents),
 * inverted for descending fields, then _id ascending as the tie-break. That tie-break is
 * the SORT stage's; a plan whose index provides the order returns tied documents in index
 * order instead (plan.c note 6), as MongoDB leaves the order of ties unspecified.
 */
struct query_sort;

int query_sort_parse(const bson_t *spec, struct query_sort **out, struct dfs_err *err);
void query_sort_free(struct query_sort *s);
/* Appends doc's sort key to key. A {$meta: "textScore"} field is DFS_EINVAL "query requires
 * text score metadata..." (a query without text score metadata). */
int query_sort_key(const struct query_sort *s, const bson_t *doc, struct dfs_buf *key,
		   struct dfs_err *err);
/* The same in a query that has text score metadata: {$meta: "textScore"} fields sort by
 * *score (descending), or as null when score is NULL (a document without a score: MongoDB's
 * missing metadata, after every score). */
int query_sort_key_score(const struct query_sort *s, const bson_t *doc, const double *score,
			 struct dfs_buf *key, struct dfs_err *err);
/* Whether the sort has a {$meta: "textScore"} field. */
bool query_sort_has_meta(const struct query_sort *s);

/* ---- find execution (exec.c) ------------------------------------------------------ */

/*
 * A find: a plan of stages (COLLSCAN with the filter, SORT, SKIP, LIMIT, PROJECTION) run
 * over one read transaction. Sorting more than a memory budget spills to temporary files.
 */
struct query_find_opts {
	const bson_t *filter;	  /* NULL: match everything */
	const bson_t *sort;	  /* NULL: natural order */
	const bson_t *projection; /* NULL: whole documents */
	int64_t skip;		  /* documents to skip (>= 0) */
	int64_t limit;		  /* at most this many (0: no limit) */
	size_t sort_mem;	  /* bytes a sort holds before spilling (0: 32 MiB) */
	const bson_t *hint;	  /* NULL, or a key pattern ({price: 1}) or {$natural: 1|-1}
				   * forcing that plan (DFS_EINVAL when no index matches) */
	const char *hint_name;	  /* NULL, or the name of the index to force ("price_1") */
	const bson_t *min, *max;  /* NULL, or MongoDB's find min/max: the hinted index's keys
				   * from min (included) to max (excluded), fields named as the
				   * index's in its order; the filter is applied to what they
				   * bound. Without a hint DFS_EINVAL "When using min()/max() a
				   * hint ..." (51173), fields not the index's "The index chosen
				   * is not compatible with min/max" (51174) */
	bool count_only;	  /* the caller only counts the results: an index scan whose
				   * bounds decide the filter reads no document (COUNT_SCAN),
				   * and the cursor may return NULL documents */
	bool in_pipeline;	  /* explain: the find is an aggregate's $cursor, which shows a
				   * count_only plan without the count command's COUNT stage */
	const struct query_collation *collation; /* Borrowed: the filter's and sort's string
						  * comparisons, or NULL (binary); planned as
						  * a collection scan (collation.c) */
};

struct query_cursor;

/*
 * Planning (plan.c): candidate plans come from every index the filter and sort can use
 * (equality, ranges, $in, prefix regex, $exists, compound prefixes, index-provided sort,
 * covered projections, $or by index union); with several candidates each runs a short trial
 * and the most productive wins; the winner is cached per query shape (filter shape, sort,
 * projection) and collection until the collection's indexes change or after many writes.
 * An index never changes a result: a plan returns exactly what a collection scan returns
 * (order aside when there is no sort).
 */

/* Parses the options and opens a cursor over collection coll in t (Borrowed: t must outlive
 * the cursor). *out Owned, freed by query_cursor_free. */
int query_find_open(struct store_txn *t, int64_t coll, const struct query_find_opts *o,
		    struct query_cursor **out, struct dfs_err *err);
/* The next result: 0 with *doc Borrowed (valid until the next call or free), DFS_ENOENT at
 * the end, or an error. */
int query_cursor_next(struct query_cursor *c, const bson_t **doc, struct dfs_err *err);
/* The store entry id of the last result (store_doc_get reads it), or 0 when the plan does
 * not know it (after a SORT stage). */
int64_t query_cursor_entry(const struct query_cursor *c);
/* Whether the last result has a text score (a $text find, except the documents a non-$text
 * branch of an $or found), and then *score: what {$meta: "textScore"} gives the stages of an
 * aggregation after the find. */
bool query_cursor_score(const struct query_cursor *c, double *score);
/* Whether the last result is a document as an index plan fetched it through the document
 * cache (no projection, sort or other change): then *text is its compact rendering from
 * there (Borrowed: valid until the next fetch of any cursor on the same transaction), or
 * NULL when the cache has none yet, which query_cursor_keep_text adds (dcache.c note 5). */
bool query_cursor_text(const struct query_cursor *c, const char **text, size_t *len);
/* Keeps text, the compact rendering of the last result, with it in the document cache
 * (the result: one query_cursor_text returned true for). */
void query_cursor_keep_text(struct query_cursor *c, const char *text, size_t len);
/* The number of results left (all of them on a fresh cursor), without reading documents
 * when the plan need not: a count of a whole collection takes its row count. */
int query_cursor_count(struct query_cursor *c, int64_t *count, struct dfs_err *err);
void query_cursor_free(struct query_cursor *c);

/* What a find (or the find an aggregate starts with) did so far, for the profiler,
 * currentOp and serverStatus: the winning plan's totals and MongoDB's planSummary. */
struct query_summary {
	int64_t keys_examined; /* index keys read (explain's totalKeysExamined) */
	int64_t docs_examined; /* documents read (totalDocsExamined) */
	bool has_sort_stage;   /* the plan sorts in memory (a SORT stage) */
	char plan[256];	       /* "COLLSCAN", "IXSCAN { a: 1, b: -1 }", leaves joined by ", " */
};
/* Fills s from c (NULL: an empty summary, plan ""). */
void query_cursor_summary(const struct query_cursor *c, struct query_summary *s);

/* ---- explain (explain.c) ---------------------------------------------------------- */

enum query_verbosity {
	QUERY_VERB_PLANNER, /* "queryPlanner": the plans, nothing run but the trial */
	QUERY_VERB_EXEC,    /* "executionStats": the winning plan run to the end */
	QUERY_VERB_ALL,	    /* "allPlansExecution": also every candidate's trial counters */
};

/*
 * Plans the find (and runs it for the exec verbosities) and appends MongoDB's explain
 * document to out (initialised, empty): {"explainVersion", "queryPlanner": {"namespace",
 * "parsedQuery", "indexFilterSet", "winningPlan", "rejectedPlans"}, "executionStats":
 * {"executionSuccess", "nReturned", "executionTimeMillis", "totalKeysExamined",
 * "totalDocsExamined", "executionStages", "allPlansExecution"}, "command"}. Stages carry
 * MongoDB's fields (stage, nReturned, works, advanced, needTime, isEOF, keysExamined,
 * docsExamined, indexName, keyPattern, isMultiKey, direction, indexBounds, inputStage(s)).
 * ns is "<db>.<coll>". Never writes anything.
 */
int query_find_explain(struct store_txn *t, int64_t coll, const char *ns,
		       const struct query_find_opts *o, int verbosity, bson_t *out,
		       struct dfs_err *err);
/* Draws an explain document's winning plan as an indented text tree, one stage a line with
 * its counters, appended to out. */
int query_explain_tree(const bson_t *explain, struct dfs_buf *out, struct dfs_err *err);

/* Installs what the store needs from this layer (store_filter_hooks_set for partial
 * indexes). Call once at startup, before opening stores; calling it again is harmless. */
void query_init(void);

/* ---- aggregation (expr.c, dec.c, tz.c, agg.c) ---------------------------------------- */

/*
 * A parsed aggregation pipeline: an array of stage documents ($match $project $addFields/$set
 * $unset $group $sort $limit $skip $unwind $count $sortByCount $lookup $replaceRoot/
 * $replaceWith $bucket $facet $sample $out $merge) with MongoDB's aggregation expressions.
 * Immutable after parsing: one pipeline may be run by several threads at once.
 */
struct query_pipeline;

/* Parses pipeline (a BSON array document of stage documents; Borrowed for the call) into *out
 * (Owned, freed by query_pipeline_free). Errors: DFS_EINVAL with a message naming the stage
 * index and the operator, e.g. "stage 2: unknown expression operator '$sumx'"; MongoDB's
 * refusals of a $match with $text that is not the first stage and of {$meta: "textScore"}
 * without one ("query requires text score metadata, but it is not available"). */
int query_pipeline_parse(const bson_t *pipeline, struct query_pipeline **out, struct dfs_err *err);
void query_pipeline_free(struct query_pipeline *p);
/* Does p end in $out or $merge (and so must be run with query_agg_run_out)? */
bool query_pipeline_writes(const struct query_pipeline *p);
/* The collection p's $out or $merge writes (Borrowed: lives with p), or NULL. */
const char *query_pipeline_target(const struct query_pipeline *p);

/*
 * A command's variables (MongoDB's "let" option, an update statement's "c"): let is a
 * document of names and aggregation expressions, each evaluated once when the command starts
 * (let.c's notes). Pipelines parsed with them see $$name; filters get them written into
 * their $expr. Immutable after creation: thread-safe.
 */
struct query_let;
/* Evaluates let (Borrowed for the call) with $$NOW = now_ms into *out (Owned, freed by
 * query_let_free). Errors DFS_EINVAL: a bad name ("'X' starts with an invalid character for
 * a user variable name"), an expression's parse or evaluation error naming the variable. */
int query_let_new(const bson_t *let, int64_t now_ms, struct query_let **out, struct dfs_err *err);
void query_let_free(struct query_let *l);
/* filter into out (initialised here; Owned) with l's variables bound in each $expr at the
 * top level or under $and/$or/$nor: "$$name" becomes {$literal: value}. l may be NULL (a
 * plain copy). */
void query_let_filter(const struct query_let *l, const bson_t *filter, bson_t *out);
/* query_pipeline_parse with l's variables in scope (l may be NULL). The pipeline must then
 * run with the same l in query_agg_opts.let. */
int query_pipeline_parse_let(const bson_t *pipeline, const struct query_let *l,
			     struct query_pipeline **out, struct dfs_err *err);

struct query_agg_opts {
	size_t mem;	/* bytes each $group/$sort (and the find's sort) holds before spilling
			 * to temporary files (0: 32 MiB) */
	int64_t now_ms; /* $$NOW, ms since the epoch (also seeds $sample) */
	const struct query_let *let;		 /* Borrowed: the command's variables, or NULL */
	const struct query_collation *collation; /* Borrowed: the leading $match/$sort's string
						  * comparisons (no other stage may compare:
						  * DFS_EINVAL), or NULL */
};

/*
 * Runs p over the one document doc (Borrowed) into out (initialised, empty): an update
 * pipeline (MongoDB's "update with an aggregation pipeline"). Only stages that map one
 * document to one document may appear ($addFields/$set, $project, $unset, $replaceRoot/
 * $replaceWith), checked by query_pipeline_check_update. o may be NULL. Errors: those of the
 * stages (DFS_EINVAL naming the stage, DFS_EFBIG); out is left empty on error.
 */
int query_pipeline_apply(const struct query_pipeline *p, const bson_t *doc,
			 const struct query_agg_opts *o, bson_t *out, struct dfs_err *err);
/* 0 when p can be an update pipeline, else DFS_EINVAL naming the first stage that cannot
 * ("$group is not allowed to be used within an update"). */
int query_pipeline_check_update(const struct query_pipeline *p, struct dfs_err *err);

/* A running pipeline (not thread-safe: one thread at a time). */
struct query_agg;

/*
 * Runs p over collection coll in transaction t (Borrowed: t and p must outlive the cursor).
 * A leading $match (unless it has $expr at its top level or in a top-level $and), a $sort
 * right after it or a leading $sort, then a $skip and a $limit right after those, are handed
 * to query_find_open as its filter, sort, skip and limit so the planner can use indexes; the
 * rest run as stages here. $lookup reads other collections of the same database
 * through t. *out Owned, freed by query_agg_free. o may be NULL (defaults). A pipeline that
 * ends in $out/$merge is DFS_EINVAL here: use query_agg_run_out.
 */
int query_agg_open(struct store_txn *t, int64_t coll, const struct query_pipeline *p,
		   const struct query_agg_opts *o, struct query_agg **out, struct dfs_err *err);
/* p over the documents of array docs instead of a collection (MongoDB's leading
 * $documents stage, which p no longer holds), in their order: an aggregate over a
 * database. t (may be NULL: a database that does not exist) is what $lookup reads; docs is
 * copied (to a temporary file). Errors: DFS_ETYPE (an element that is not a document),
 * DFS_EINVAL (p ends in $out or $merge: query_agg_run_out_docs), DFS_EIO. *out as
 * query_agg_open's. */
int query_agg_open_docs(struct store_txn *t, const bson_t *docs, const struct query_pipeline *p,
			const struct query_agg_opts *o, struct query_agg **out,
			struct dfs_err *err);
/* query_agg_run_out over the documents of array docs ($documents then $out/$merge), in
 * write transaction t of the target's database. */
int query_agg_run_out_docs(struct store_txn *t, const bson_t *docs, const struct query_pipeline *p,
			   const struct query_agg_opts *o, int64_t *nwritten, struct dfs_err *err);
/* The next result: 0 with *doc Borrowed (valid until the next call or free), DFS_ENOENT at
 * the end, or an error: DFS_EINVAL for an expression error, naming the stage ("stage 2:
 * can't $divide by zero"), DFS_EFBIG for a result over 16 MiB, DFS_EIO when spilling fails. */
int query_agg_next(struct query_agg *a, const bson_t **doc, struct dfs_err *err);
void query_agg_free(struct query_agg *a);
/* The summary of a's leading find (query_cursor_summary); plan "" when a has none. */
void query_agg_summary(const struct query_agg *a, struct query_summary *s);

/*
 * Runs a pipeline that ends in $out or $merge over coll in the WRITE transaction t, and writes
 * the target collection (of t's database) in t: $out replaces the target's documents
 * (creating it when missing); $merge matches on _id (whenMatched merge|replace|keepExisting|
 * fail, whenNotMatched insert|discard|fail). Nothing is written before the whole pipeline has
 * run and its results were checked (duplicate _ids for $out, the fail modes of $merge), so on
 * an error the target is as it was (the caller aborts t anyway). *nwritten (may be NULL) gets
 * the documents inserted or replaced.
 */
int query_agg_run_out(struct store_txn *t, int64_t coll, const struct query_pipeline *p,
		      const struct query_agg_opts *o, int64_t *nwritten, struct dfs_err *err);
/*
 * Explains p over coll in t and appends MongoDB's aggregate explain document to out
 * (initialised, empty): {"explainVersion", "stages": [{"$cursor": {"queryPlanner",
 * "executionStats"}}, {"$group": {..}}, ..], "command": {"aggregate", "pipeline", ..}}.
 * The $cursor is the find of the leading $match/$sort/$skip/$limit (query_find_explain's
 * documents); when the find is the whole pipeline the result is that find's explain alone,
 * as MongoDB's. verbosity is an enum query_verbosity: with QUERY_VERB_EXEC and up the
 * pipeline also runs, and each stage gets "nReturned" and "executionTimeMillisEstimate" (and
 * $group/$sort "usedDisk", "spills"). ns is "<db>.<coll>". Never writes: a $out/$merge stage
 * is shown, and the pipeline runs up to it. Errors: those of running the pipeline.
 */
int query_agg_explain(struct store_txn *t, int64_t coll, const char *ns,
		      const struct query_pipeline *p, const struct query_agg_opts *o, int verbosity,
		      bson_t *out, struct dfs_err *err);
/* Draws an aggregate explain document as an indented text tree (the last stage first, its
 * input under it, the $cursor's plan last), appended to out; a find's explain document is
 * drawn as query_explain_tree does. */
int query_agg_explain_tree(const bson_t *explain, struct dfs_buf *out, struct dfs_err *err);
/* ---- updates (update.c) ------------------------------------------------------------ */

/*
 * A parsed update: an operator document ({$set: {...}, $inc: {...}}) or a replacement
 * document (no top-level '$' fields; mixing the two is an error). Operators: $set $unset $inc
 * $mul $rename $min $max $currentDate $setOnInsert $push ($each $slice $sort $position)
 * $addToSet ($each) $pop $pull $pullAll; dotted paths, numeric components, positional '$',
 * '$[]' and '$[<ident>]' with arrayFilters. Immutable after parsing: thread-safe.
 */
struct query_update;

/* Parses update (Borrowed for the call) with array_filters (NULL, or a BSON array document of
 * filter documents for $[<ident>]) into *out (Owned, freed by query_update_free). Errors:
 * DFS_EINVAL with MongoDB-like messages naming operator and path ("unknown update operator
 * '$sett'", "Updating the path 'a' would create a conflict at 'a'"). */
int query_update_parse(const bson_t *update, const bson_t *array_filters, struct query_update **out,
		       struct dfs_err *err);
/* Parses an update pipeline (stages: a BSON array document; Borrowed for the call) into *out
 * (Owned, freed by query_update_free), with the command's variables let (Borrowed: must
 * outlive *out; may be NULL). Only $set/$addFields, $unset, $project, $replaceRoot/
 * $replaceWith stages; array_filters must be NULL. Applying it runs the stages over the
 * document (upserts: over the filter's seed) and keeps the result as a replacement whose
 * _id is the document's (update.c note 8). Errors DFS_EINVAL: the pipeline's parse errors,
 * a stage not allowed, arrayFilters given. */
int query_update_parse_pipeline(const bson_t *stages, const bson_t *array_filters,
				const struct query_let *let, struct query_update **out,
				struct dfs_err *err);
void query_update_free(struct query_update *u);
bool query_update_is_replacement(const struct query_update *u);

/*
 * Applies u to doc into out (initialised, empty). elem_index: the array position for the
 * positional '$' from query_filter_match (-1: none; an update using '$' then fails as MongoDB
 * does). upsert_insert: the document is being created by an upsert ($setOnInsert applies,
 * _id is moved first). now_ms: the time for $currentDate. *changed (may be NULL): false when
 * the result equals doc byte for byte (MongoDB's nModified). _id is immutable ("Performing an
 * update on the path '_id' would modify the immutable field '_id'"); a replacement keeps
 * doc's _id, first. The result passes store_doc_validate. On error doc is untouched, out is
 * left empty; errors are DFS_EINVAL (DFS_ERANGE for a 64-bit integer overflow, DFS_EFBIG for
 * a result over 16 MiB).
 */
int query_update_apply(const struct query_update *u, const bson_t *doc, int elem_index,
		       bool upsert_insert, int64_t now_ms, bson_t *out, bool *changed,
		       struct dfs_err *err);

/*
 * The base document of an upsert, built from filter's equality conditions as MongoDB does:
 * implicit equality and $eq, also inside a top-level $and; dotted paths create embedded
 * documents; _id included (first); other operators contribute nothing. The fields come in
 * the order of their paths. out initialised, empty (left empty on error). Errors: the
 * filter's parse errors, "cannot infer query fields to set, path 'a' is matched twice".
 */
int query_upsert_seed(const bson_t *filter, bson_t *out, struct dfs_err *err);

/* ---- writes (write.c) ------------------------------------------------------------ */

/*
 * MongoDB's write commands over a collection, each inside the caller's write transaction t
 * (so one call is atomic: it changes every matching document or, on an error, nothing; the
 * caller commits). Matching documents are collected first and then changed, so a write never
 * sees its own output (an updated document is not matched twice).
 */
struct query_write_opts {
	const bson_t *filter;	     /* NULL: every document */
	const bson_t *update;	     /* update operators or a replacement (updates) */
	const bson_t *array_filters; /* NULL or an array of filters for $[<ident>] */
	const bson_t *sort;	     /* find-and-modify: the first document in this order */
	const bson_t *projection;    /* find-and-modify: of the returned document */
	bool multi;		     /* update or delete every match (else the first) */
	bool upsert;		     /* insert when nothing matches */
	bool remove;		     /* find-and-modify: delete instead of update */
	bool return_new;	     /* find-and-modify: return the document after the update */
	bool pipeline;		     /* update is an update pipeline (a BSON array of stages) */
	int64_t now_ms;		     /* the time of $currentDate and $$NOW (0: now) */
	const struct query_let *let; /* the command's variables ($expr, pipelines), or NULL */
	const struct query_collation *collation; /* filter and sort comparisons, or NULL */
};

struct query_write_result {
	int64_t matched, modified, deleted, inserted, upserted;
	bson_t *upserted_id; /* Owned: {"_id": v} of the upserted document, or NULL */
	bson_t *value;	     /* Owned: find-and-modify's returned document, or NULL */
};
void query_write_result_release(struct query_write_result *r);

/* updateOne / updateMany / replaceOne (o->update, o->multi, o->upsert, o->array_filters). */
int query_update_run(struct store_txn *t, int64_t coll, const struct query_write_opts *o,
		     struct query_write_result *r, struct dfs_err *err);
/* deleteOne / deleteMany (o->filter, o->multi). */
int query_delete_run(struct store_txn *t, int64_t coll, const struct query_write_opts *o,
		     struct query_write_result *r, struct dfs_err *err);
/* findAndModify: the first match in o->sort order is updated (or removed); r->value gets it
 * as it was, or as it is now with o->return_new, projected; NULL when nothing matched. */
int query_find_modify(struct store_txn *t, int64_t coll, const struct query_write_opts *o,
		      struct query_write_result *r, struct dfs_err *err);
/* Appends r as MongoDB's result document of the command ("update", "delete", "findAndModify")
 * to out under its fields (matchedCount, modifiedCount, upsertedId, ...). */
void query_write_result_describe(const struct query_write_result *r, const char *command,
				 bson_t *out);

/*
 * bulkWrite: ops is an array of MongoDB's operation documents ({"insertOne": {"document"}},
 * {"updateOne"|"updateMany": {"filter", "update", "upsert", "arrayFilters"}}, {"replaceOne":
 * {"filter", "replacement", "upsert"}}, {"deleteOne"|"deleteMany": {"filter"}}). Ordered: stop
 * at the first error; unordered: go on past errors. Atomic: everything in one transaction, and
 * any error changes nothing; otherwise each operation commits on its own. out gets MongoDB's
 * BulkWriteResult shape ({"acknowledged", "insertedCount", "matchedCount", "modifiedCount",
 * "deletedCount", "upsertedCount", "insertedIds", "upsertedIds", "writeErrors": [{"index",
 * "code", "errmsg", "op"}]}). Returns 0 when every operation succeeded, else the first error
 * (its message also in writeErrors); out is filled either way.
 */
int query_bulk_run(struct store_db *db, int64_t coll, const bson_t *ops, bool ordered, bool atomic,
		   bson_t *out, struct dfs_err *err);

/* ---- distinct (distinct.c) ----------------------------------------------------------- */

/* The values of a distinct: collected from each document found, then sorted and unique. */
struct query_distinct {
	bson_value_t *vals; /* Owned: copies, the values (sorted and unique after _finish) */
	size_t n, cap;
};
void query_distinct_init(struct query_distinct *d);
void query_distinct_release(struct query_distinct *d);
/* Adds the values at dotted path of doc (arrays unwound as MongoDB's distinct does). */
void query_distinct_add(struct query_distinct *d, const bson_t *doc, const char *path);
/* Sorts the values in MongoDB's order and drops duplicates (numbers by value); returns n. */
size_t query_distinct_finish(struct query_distinct *d);
/* The same with strings compared under c (NULL: query_distinct_finish): of values equal under
 * it the first added is kept. */
size_t query_distinct_finish_collated(struct query_distinct *d, const struct query_collation *c);

/* ---- MongoDB's error codes (write.c) ---------------------------------------------- */

/* The MongoDB error code of an engine error (11000 DuplicateKey for a unique key clash, 66
 * ImmutableField, 40 ConflictingUpdateOperators, 10334 BSONObjectTooLarge, 26
 * NamespaceNotFound, 50 MaxTimeMSExpired, 11601 Interrupted, 136 CappedPositionLost, 121
 * DocumentValidationFailure (a collection's validator refused the document), 2
 * BadValue for bad input...) and its codeName in *name (Borrowed: static; may be NULL).
 * The one mapping both front ends (.bulk results, the wire protocol) use. */
int query_error_code(const struct dfs_err *e, const char **name);

/* ---- sharding: keys, hashes, chunk maps, targeting, merging (shard.c) --------------- */

/*
 * The pure half of sharding (shard.c's design notes): nothing here reads a store or talks to
 * a shard. A shard key pattern is ascending fields with at most one "hashed" field; a key
 * value or chunk bound is a document {path: value, ...} in pattern order (the hashed field
 * as its NumberLong query_shard_hash), compared field by field in MongoDB's order.
 * Thread-safety: the functions are; a chunk map or merge is one thread's at a time.
 */
#define QUERY_SHARD_KEY_MAX 8

struct query_shard_key {
	int n; /* fields */
	struct {
		char path[256]; /* the dotted field path */
		bool hashed;	/* "hashed" (else ascending) */
	} f[QUERY_SHARD_KEY_MAX];
	int hashed; /* index of the hashed field, -1 when none */
};

/* MongoDB's hash of a value (BSONElementHasher::hash64, seed 0; convertShardKeyToHashed),
 * and with another seed (MongoDB's tests use 1). */
int64_t query_shard_hash(const bson_value_t *v);
int64_t query_shard_hash_seed(const bson_value_t *v, int32_t seed);

/* Parses a key pattern ({a: 1}, {_id: "hashed"}, {a: 1, b: "hashed"}). DFS_EINVAL for
 * descending or other values, two hashed fields, duplicates, bad paths, an empty pattern. */
int query_shard_key_parse(const bson_t *pattern, struct query_shard_key *out, struct dfs_err *err);
/* Appends the pattern's fields ({a: 1, b: "hashed"}) to out. */
void query_shard_key_pattern(const struct query_shard_key *k, bson_t *out);
/* The shard key of doc into out (initialised, empty): DFS_EINVAL when a key field is
 * missing ("document _id 1 does not contain shard key for pattern { a: 1 }") or an array
 * is on its path; out is left empty then. */
int query_shard_key_of(const struct query_shard_key *k, const bson_t *doc, bson_t *out,
		       struct dfs_err *err);
/* DFS_EINVAL (MongoDB's ImmutableField wording) when after's shard key differs from
 * before's (type-exact: 1 and 1.0 differ, as the stored bytes would). */
int query_shard_key_check_update(const struct query_shard_key *k, const bson_t *before,
				 const bson_t *after, struct dfs_err *err);
/* Compares two bounds or key values field by field (<0, 0, >0). */
int query_shard_bound_compare(const bson_t *a, const bson_t *b);
/* Is b a full key of k (its fields in order, no arrays, hashed fields NumberLong/MinKey/
 * MaxKey)? what names it in the message ("min", "split point"). */
int query_shard_bound_check(const struct query_shard_key *k, const bson_t *b, const char *what,
			    struct dfs_err *err);
/* All-MinKey (max false) or all-MaxKey bounds of k appended to out. */
void query_shard_bound_extreme(const struct query_shard_key *k, bool max, bson_t *out);

struct query_chunk {
	bson_t *min, *max;     /* Owned: [min, max) */
	char shard[65];	       /* the owning shard's name */
	uint32_t major, minor; /* lastmod: Timestamp(major, minor) */
	bool jumbo;	       /* could not be split */
};

/* The chunks of one collection: sorted by min, covering MinKey..MaxKey (after _check). */
struct query_chunk_map {
	struct query_shard_key key;
	struct query_chunk *c; /* Owned: n chunks */
	int n, cap;
};

void query_chunk_map_init(struct query_chunk_map *m, const struct query_shard_key *k);
void query_chunk_map_release(struct query_chunk_map *m);
/* Adds a chunk (copies min and max). DFS_EINVAL: bounds not keys of the pattern, min >= max. */
int query_chunk_map_add(struct query_chunk_map *m, const bson_t *min, const bson_t *max,
			const char *shard, uint32_t major, uint32_t minor, struct dfs_err *err);
/* Sorts the chunks and checks that they cover the key space without gaps or overlaps
 * (DFS_ECORRUPT naming the first problem). */
int query_chunk_map_check(struct query_chunk_map *m, struct dfs_err *err);
/* The index of the chunk holding key (a key value of the pattern), -1 for an empty map. */
int query_chunk_map_find(const struct query_chunk_map *m, const bson_t *key);
/* The chunk of document doc: query_shard_key_of's errors. */
int query_chunk_map_find_doc(const struct query_chunk_map *m, const bson_t *doc, int *idx,
			     struct dfs_err *err);
/* Splits chunk idx at middle (a full key strictly inside it: DFS_EINVAL otherwise, "equals
 * the chunk's min" named). Both halves keep the owner and get the collection's highest
 * major version with the next minor versions. Indexes after idx move up by one. */
int query_chunk_map_split(struct query_chunk_map *m, int idx, const bson_t *middle,
			  struct dfs_err *err);
/* The split point of chunk idx for `split find` (shard.c note 6): the median of the keys
 * (nkeys key values, Borrowed; those outside the chunk ignored) or, without any, the
 * numeric middle of the first field. out initialised, empty. DFS_EINVAL when neither. */
int query_chunk_middle(const struct query_chunk_map *m, int idx, const bson_t *const *keys,
		       int nkeys, bson_t *out, struct dfs_err *err);

/* The chunks filter (NULL: everything) can match: chunks[i] set for each (m->n entries, the
 * caller's array); returns their count (0: nothing can match). Never misses a chunk holding
 * a match (equality, ranges, $in, $or, compound prefixes; hashed fields by equality and $in;
 * anything else all chunks). */
int query_shard_target(const struct query_chunk_map *m, const struct query_expr *filter,
		       bool *chunks, int *nchunks);
/* The distinct owners of the chunks set in chunks, in chunk order, into shards (Borrowed
 * from m, at most cap); returns their count. */
int query_shard_target_shards(const struct query_chunk_map *m, const bool *chunks,
			      const char **shards, int cap);

/* A sorted stream of one shard's results: next gives 0 with *doc (Borrowed: valid until
 * its next call), DFS_ENOENT at the end, or an error. */
struct query_shard_stream {
	int (*next)(void *ctx, const bson_t **doc, struct dfs_err *err);
	void *ctx;
};
/* The k-way merge of n streams each sorted by sort (NULL or {}: no order, the streams one
 * after another), with skip and limit (0: none) applied to the merged sequence: each shard
 * must be asked for skip + limit documents and no skip. *out Owned, freed by
 * query_shard_merge_free; the streams' contexts must outlive it. */
struct query_shard_merge;
int query_shard_merge_open(const bson_t *sort, int64_t skip, int64_t limit,
			   const struct query_shard_stream *streams, int n,
			   struct query_shard_merge **out, struct dfs_err *err);
/* 0 with *doc (Borrowed: valid until the next call), DFS_ENOENT at the end, or a stream's
 * error prefixed "shard stream i: ". */
int query_shard_merge_next(struct query_shard_merge *m, const bson_t **doc, struct dfs_err *err);
void query_shard_merge_free(struct query_shard_merge *m);

/* ---- dbHash (dbhash.c) ------------------------------------------------------------ */

/*
 * MongoDB's dbHash of database db (NULL: a database that does not exist, which has no
 * collections), appended to out in mongod's reply order: host (given),
 * collections {name: md5 hex of the collection}, capped [names], md5 (of the database),
 * timeMillis; mongod's "uuids" is left out (docfs collections have no UUIDs). Read in one
 * read transaction, so the hashes are of one moment. colls: NULL, or an array of names to
 * hash (empty: all; a name that does not exist is left out, as mongod does). Documents a
 * caller of the thread may not read are left out of its hashes (README "Permissions").
 * Errors: DFS_EINVAL (an entry of colls that is not a string), the store's.
 */
int query_dbhash(struct store_db *db, const char *host, const bson_t *colls, bson_t *out,
		 struct dfs_err *err);

#endif
