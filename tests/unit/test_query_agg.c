/*
 * test_query_agg.c - unit tests of the aggregation API (query.h: query_pipeline_*, query_agg_*)
 * at its edges: freeing NULL, parse errors naming the stage and the operator, a writing
 * pipeline refused by query_agg_open, $sort and $group spilling past a tiny memory budget
 * (same results as in memory), the end of a cursor, expression errors at run time, and the
 * atomicity of $out/$merge: a pipeline that fails leaves the target as it was, and the
 * explain of a pipeline ($cursor with the planner's plan, stage counters, $out not run). The
 * semantics of stages and operators are the corpus's job (tests/query/agg_corpus).
 */
#include "agg_int.h"

#include <check.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a temporary store --------------------------------------------------------------- */

struct fixture {
	char dir[64];
	struct store *st;
	struct store_db *db;
	struct store_txn *t;
	int64_t coll; /* collection "c" */
};

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void parse(const char *text, bson_t *out)
{
	struct dfs_err err = {0};

	bson_init(out);
	if (store_codec_parse_doc(text, strlen(text), out, &err))
		ck_abort_msg("bad test document %s: %s", text, err.msg);
}

static int64_t coll_make(struct fixture *f, const char *name)
{
	struct dfs_err err = {0};
	struct store_coll c;

	ck_assert_msg(!store_coll_create(f->t, name, 0755, 0, 0, &c, &err), "%s", err.msg);
	return c.id;
}

static void insert(struct fixture *f, int64_t coll, const char *text)
{
	const struct store_attrs a = {0644, 0, 0, 0};
	struct dfs_err err = {0};
	bson_t d, p;

	parse(text, &d);
	ck_assert_msg(!store_doc_prepare(&d, NULL, &p, &err), "%s", err.msg);
	ck_assert_msg(!store_doc_insert(f->t, coll, &p, &a, NULL, &err), "%s", err.msg);
	bson_destroy(&p);
	bson_destroy(&d);
}

static void fx_open(struct fixture *f)
{
	struct dfs_err err = {0};

	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/docfs-tagg-XXXXXX");
	ck_assert(mkdtemp(f->dir));
	ck_assert_msg(!store_open(f->dir, true, &f->st, &err), "%s", err.msg);
	ck_assert_msg(!store_db_get(f->st, "d", true, &f->db, &err), "%s", err.msg);
	ck_assert_msg(!store_txn_begin(f->db, true, &f->t, &err), "%s", err.msg);
	f->coll = coll_make(f, "c");
}

static void fx_close(struct fixture *f)
{
	store_txn_abort(f->t);
	store_free(f->st);
	nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static struct query_pipeline *pipeline(const char *text)
{
	struct dfs_err err = {0};
	struct query_pipeline *p = NULL;
	bson_t b;
	char wrapped[4096];

	snprintf(wrapped, sizeof(wrapped), "{\"p\": %s}", text);
	parse(wrapped, &b);
	{
		bson_iter_t it;
		const uint8_t *data;
		uint32_t len;
		bson_t arr;

		ck_assert(bson_iter_init_find(&it, &b, "p") && BSON_ITER_HOLDS_ARRAY(&it));
		bson_iter_array(&it, &len, &data);
		ck_assert(bson_init_static(&arr, data, len));
		if (query_pipeline_parse(&arr, &p, &err))
			ck_abort_msg("pipeline %s: %s", text, err.msg);
	}
	bson_destroy(&b);
	return p;
}

/* Parses text expecting failure; checks the code and a message substring. */
static void parse_fails(const char *text, const char *msg)
{
	struct dfs_err err = {0};
	struct query_pipeline *p = (struct query_pipeline *)1;
	bson_t b, arr;
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;
	char wrapped[4096];

	snprintf(wrapped, sizeof(wrapped), "{\"p\": %s}", text);
	parse(wrapped, &b);
	ck_assert(bson_iter_init_find(&it, &b, "p"));
	bson_iter_array(&it, &len, &data);
	ck_assert(bson_init_static(&arr, data, len));
	ck_assert_int_eq(query_pipeline_parse(&arr, &p, &err), DFS_EINVAL);
	ck_assert_int_eq(err.code, DFS_EINVAL);
	ck_assert_msg(strstr(err.msg, msg), "pipeline %s: message '%s' lacks '%s'", text, err.msg,
		      msg);
	ck_assert_ptr_null(p);
	bson_destroy(&b);
}

/* Runs p over coll and collects the results as compact text lines. */
static char *run(struct fixture *f, int64_t coll, const struct query_pipeline *p, size_t mem,
		 int64_t *spills, int *rc_out)
{
	struct query_agg_opts o = {.mem = mem};
	struct dfs_err err = {0};
	struct query_agg *a = NULL;
	struct dfs_buf out;
	const bson_t *doc;
	int rc;

	dfs_buf_init(&out);
	rc = query_agg_open(f->t, coll, p, &o, &a, &err);
	while (!rc && (rc = query_agg_next(a, &doc, &err)) == 0) {
		ck_assert(!store_codec_render(doc, STORE_RENDER_CANONICAL, &out, &err));
		dfs_buf_putc(&out, '\n');
	}
	if (rc_out)
		*rc_out = rc;
	else
		ck_assert_msg(rc == DFS_ENOENT, "run failed: %s", err.msg);
	if (spills)
		*spills = a ? query__agg_spills(a) : 0;
	query_agg_free(a);
	return out.data ? out.data : strdup("");
}

/* The documents of collection name, canonical text, in _id order. */
static char *contents(struct fixture *f, const char *name)
{
	struct dfs_err err = {0};
	struct store_coll c;
	struct query_pipeline *p = pipeline("[{$sort: {_id: 1}}]");
	char *s;

	ck_assert_msg(!store_coll_find(f->t, name, &c, &err), "%s", err.msg);
	s = run(f, c.id, p, 0, NULL, NULL);
	query_pipeline_free(p);
	return s;
}

/* ---- tests --------------------------------------------------------------------------- */

START_TEST(test_query_pipeline_free_null)
{
	query_pipeline_free(NULL);
	query_agg_free(NULL);
	ck_assert(!query_pipeline_writes(NULL));
}
END_TEST

START_TEST(test_query_pipeline_parse_errors)
{
	parse_fails("[{$match: {}}, {$match: {}}, {$project: {x: {$sumx: 1}}}]",
		    "stage 2: unknown expression operator '$sumx'");
	parse_fails("[{$bogus: 1}]", "stage 0: unrecognized pipeline stage name: '$bogus'");
	parse_fails("[{$group: {_id: null, n: {$avgx: 1}}}]", "unknown group operator '$avgx'");
	parse_fails("[{$out: \"t\"}, {$limit: 1}]",
		    "stage 0: $out can only be the final stage in the pipeline");
	parse_fails("[{$project: {a: {$add: 1, $sub: 2}}}]", "exactly one field");
	parse_fails("[{$project: {a: \"$$undefinedvar\"}}]", "use of undefined variable");
	parse_fails("[{$lookup: {from: \"x\", pipeline: [{$bogus: 1}], as: \"j\"}}]",
		    "$lookup pipeline: stage 0: unrecognized pipeline stage name");
	parse_fails("[{$facet: {a: [{$project: {x: {$nope: 1}}}]}}]",
		    "$facet 'a': stage 0: unknown expression operator '$nope'");
}
END_TEST

START_TEST(test_query_pipeline_writes_out_merge)
{
	struct query_pipeline *a = pipeline("[{$match: {}}, {$out: \"t\"}]");
	struct query_pipeline *b = pipeline("[{$merge: {into: \"t\"}}]");
	struct query_pipeline *c = pipeline("[{$match: {}}]");

	ck_assert(query_pipeline_writes(a));
	ck_assert(query_pipeline_writes(b));
	ck_assert(!query_pipeline_writes(c));
	query_pipeline_free(a);
	query_pipeline_free(b);
	query_pipeline_free(c);
}
END_TEST

START_TEST(test_query_agg_open_refuses_writes)
{
	struct fixture f;
	struct dfs_err err = {0};
	struct query_agg *a = (struct query_agg *)1;
	struct query_pipeline *p;

	fx_open(&f);
	p = pipeline("[{$out: \"t\"}]");
	ck_assert_int_eq(query_agg_open(f.t, f.coll, p, NULL, &a, &err), DFS_EINVAL);
	ck_assert_ptr_null(a);
	ck_assert(strstr(err.msg, "query_agg_run_out"));
	query_pipeline_free(p);
	fx_close(&f);
}
END_TEST

START_TEST(test_query_agg_next_end_and_errors)
{
	struct fixture f;
	struct dfs_err err = {0};
	struct query_agg *a = NULL;
	struct query_pipeline *p;
	const bson_t *doc;

	fx_open(&f);
	insert(&f, f.coll, "{_id: 1, a: 2}");
	insert(&f, f.coll, "{_id: 2, a: 0}");
	p = pipeline("[{$project: {r: {$divide: [1, \"$a\"]}}}]");
	ck_assert(!query_agg_open(f.t, f.coll, p, NULL, &a, &err));
	ck_assert_int_eq(query_agg_next(a, &doc, &err), 0);
	ck_assert_int_eq(query_agg_next(a, &doc, &err), DFS_EINVAL);
	ck_assert_str_eq(err.msg, "stage 0: can't $divide by zero");
	query_agg_free(a);
	query_pipeline_free(p);

	p = pipeline("[{$count: \"n\"}]");
	dfs_err_clear(&err);
	ck_assert(!query_agg_open(f.t, f.coll, p, NULL, &a, &err));
	ck_assert_int_eq(query_agg_next(a, &doc, &err), 0);
	ck_assert_int_eq(query_agg_next(a, &doc, &err), DFS_ENOENT);
	ck_assert_int_eq(query_agg_next(a, &doc, &err), DFS_ENOENT);
	query_agg_free(a);
	query_pipeline_free(p);
	fx_close(&f);
}
END_TEST

/* $sort and $group past a tiny budget: the same results as in memory, and runs were spilled. */
START_TEST(test_query_agg_next_spill)
{
	static const char *const pipes[] = {
		/* a $match with $expr stays here, so the $sort after it is agg.c's, not exec.c's */
		"[{$match: {$expr: true}}, {$sort: {k: -1, s: 1}}]",
		"[{$project: {k: 1, s: 1}}, {$sort: {s: -1}}]",
		"[{$group: {_id: \"$k\", n: {$sum: 1}, t: {$sum: \"$i\"}, f: {$first: \"$i\"}, "
		"p: {$push: \"$s\"}}}, {$sort: {_id: 1}}]",
		"[{$sortByCount: {$mod: [\"$i\", 13]}}, {$sort: {count: -1, _id: 1}}]",
	};
	struct fixture f;

	fx_open(&f);
	for (int i = 0; i < 3000; i++) {
		char doc[160];

		snprintf(doc, sizeof(doc), "{_id: %d, i: %d, k: %d, s: \"%08x-padding-padding\"}",
			 i, i, (i * 7919) % 41, (unsigned)(i * 2654435761u));
		insert(&f, f.coll, doc);
	}
	for (size_t k = 0; k < sizeof(pipes) / sizeof(*pipes); k++) {
		struct query_pipeline *p = pipeline(pipes[k]);
		int64_t spills = 0, none = -1;
		char *big = run(&f, f.coll, p, 0, &none, NULL);
		char *small = run(&f, f.coll, p, 4096, &spills, NULL);

		ck_assert_int_eq(none, 0);
		ck_assert_msg(spills > 1, "pipeline %zu did not spill", k);
		ck_assert_msg(!strcmp(big, small), "pipeline %zu: spilled results differ", k);
		free(big);
		free(small);
		query_pipeline_free(p);
	}
	fx_close(&f);
}
END_TEST

/* A failing $out (a duplicate _id, an expression error) leaves the target as it was. */
START_TEST(test_query_agg_run_out_atomic)
{
	struct fixture f;
	struct dfs_err err = {0};
	struct query_pipeline *p;
	int64_t t, n = -1;
	char *before, *after;

	fx_open(&f);
	t = coll_make(&f, "t");
	insert(&f, t, "{_id: \"keep\", v: 1}");
	for (int i = 0; i < 200; i++) {
		char doc[64];

		snprintf(doc, sizeof(doc), "{_id: %d, k: %d, z: %d}", i, i % 5, i == 150 ? 0 : 1);
		insert(&f, f.coll, doc);
	}
	before = contents(&f, "t");

	p = pipeline("[{$project: {_id: \"$k\"}}, {$out: \"t\"}]");
	ck_assert_int_eq(query_agg_run_out(f.t, f.coll, p, NULL, &n, &err), DFS_EEXIST);
	ck_assert(strstr(err.msg, "duplicate _id"));
	after = contents(&f, "t");
	ck_assert_str_eq(before, after);
	free(after);
	query_pipeline_free(p);

	dfs_err_clear(&err);
	p = pipeline("[{$project: {r: {$divide: [1, \"$z\"]}}}, {$out: \"t\"}]");
	ck_assert_int_eq(query_agg_run_out(f.t, f.coll, p, NULL, &n, &err), DFS_EINVAL);
	after = contents(&f, "t");
	ck_assert_str_eq(before, after);
	free(after);
	query_pipeline_free(p);

	dfs_err_clear(&err);
	p = pipeline("[{$merge: {into: \"t\", whenMatched: \"fail\"}}]");
	insert(&f, t, "{_id: 3, v: 3}");
	free(before);
	before = contents(&f, "t");
	ck_assert_int_eq(query_agg_run_out(f.t, f.coll, p, NULL, &n, &err), DFS_EEXIST);
	after = contents(&f, "t");
	ck_assert_str_eq(before, after);
	free(after);
	query_pipeline_free(p);

	/* and a successful $out replaces the target */
	dfs_err_clear(&err);
	p = pipeline("[{$group: {_id: \"$k\", n: {$sum: 1}}}, {$out: \"t\"}]");
	ck_assert_msg(!query_agg_run_out(f.t, f.coll, p, NULL, &n, &err), "%s", err.msg);
	ck_assert_int_eq(n, 5);
	after = contents(&f, "t");
	ck_assert(!strstr(after, "keep"));
	ck_assert(strstr(after, "\"n\": {\"$numberInt\": \"40\"}"));
	free(after);
	free(before);
	query_pipeline_free(p);

	/* a pipeline that does not write is refused */
	dfs_err_clear(&err);
	p = pipeline("[{$match: {}}]");
	ck_assert_int_eq(query_agg_run_out(f.t, f.coll, p, NULL, &n, &err), DFS_EINVAL);
	query_pipeline_free(p);
	fx_close(&f);
}
END_TEST

/* $out and $merge into a collection that does not exist create it. */
START_TEST(test_query_agg_run_out_creates)
{
	struct fixture f;
	struct dfs_err err = {0};
	struct query_pipeline *p;
	struct store_coll c;
	int64_t n = 0;
	char *s;

	fx_open(&f);
	insert(&f, f.coll, "{_id: 1, a: 1}");
	insert(&f, f.coll, "{_id: 2, a: 2}");
	p = pipeline("[{$merge: \"fresh\"}]");
	ck_assert_msg(!query_agg_run_out(f.t, f.coll, p, NULL, &n, &err), "%s", err.msg);
	ck_assert_int_eq(n, 2);
	ck_assert(!store_coll_find(f.t, "fresh", &c, &err));
	s = contents(&f, "fresh");
	ck_assert_str_eq(s, "{\"_id\": {\"$numberInt\": \"1\"}, \"a\": {\"$numberInt\": \"1\"}}\n"
			    "{\"_id\": {\"$numberInt\": \"2\"}, \"a\": {\"$numberInt\": \"2\"}}\n");
	free(s);
	query_pipeline_free(p);
	fx_close(&f);
}
END_TEST

/* The value at dotted path of d, rendered compact (or "" when missing). */
static char *at(const bson_t *d, const char *path)
{
	struct dfs_err err = {0};
	struct dfs_buf b;
	bson_iter_t it, f;

	dfs_buf_init(&b);
	if (bson_iter_init(&it, d) && bson_iter_find_descendant(&it, path, &f))
		ck_assert(!store_codec_render_value(bson_iter_value(&f), &b, &err));
	return b.data ? b.data : strdup("");
}

static void expect_at(const bson_t *d, const char *path, const char *want)
{
	char *got = at(d, path);

	ck_assert_msg(!strcmp(got, want), "%s: got '%s', want '%s'", path, got, want);
	free(got);
}

/* A fixture whose collection holds {_id: i, k: i % 10, g: i % 3} for i < 100, indexed on k. */
static void fx_open_k(struct fixture *f)
{
	struct dfs_err err = {0};
	bson_t spec;

	fx_open(f);
	for (int i = 0; i < 100; i++) {
		char doc[64];

		snprintf(doc, sizeof(doc), "{_id: %d, k: %d, g: %d}", i, i % 10, i % 3);
		insert(f, f->coll, doc);
	}
	parse("{key: {k: 1}}", &spec);
	ck_assert_msg(!store_index_create(f->t, f->coll, &spec, NULL, 0, NULL, NULL, &err), "%s",
		      err.msg);
	bson_destroy(&spec);
}

/* A $count right after the find's stages needs no field of the documents: the $cursor counts
 * index keys when the bounds decide the filter (COUNT_SCAN, no document examined), the row
 * count for no filter (RECORD_STORE_FAST_COUNT), and the counts are the scan's. */
START_TEST(test_query_agg_count_reads_no_document)
{
	static const char *const cases[][3] = {
		/* pipeline, the $cursor's plan, the result */
		{"[{$match: {k: {$lt: 2}}}, {$count: \"n\"}]", "COUNT_SCAN",
		 "{\"n\": {\"$numberInt\": \"20\"}}\n"},
		{"[{$count: \"n\"}]", "RECORD_STORE_FAST_COUNT",
		 "{\"n\": {\"$numberInt\": \"100\"}}\n"},
		{"[{$match: {k: {$in: [1, 3]}, g: 0}}, {$count: \"n\"}]", "FETCH",
		 "{\"n\": {\"$numberInt\": \"7\"}}\n"},
		{"[{$match: {k: {$gt: 100}}}, {$count: \"n\"}]", "COUNT_SCAN", ""},
	};
	struct fixture f;
	struct dfs_err err = {0};

	fx_open_k(&f);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct query_pipeline *p = pipeline(cases[i][0]);
		char *got = run(&f, f.coll, p, 0, NULL, NULL);
		char want[64];
		bson_t out;

		ck_assert_msg(!strcmp(got, cases[i][2]), "%s: %s", cases[i][0], got);
		free(got);
		bson_init(&out);
		ck_assert_msg(!query_agg_explain(f.t, f.coll, "d.c", p, NULL, QUERY_VERB_EXEC, &out,
						 &err),
			      "%s", err.msg);
		snprintf(want, sizeof(want), "\"%s\"", cases[i][1]);
		expect_at(&out, "stages.0.$cursor.queryPlanner.winningPlan.stage", want);
		if (strcmp(cases[i][1], "FETCH"))
			expect_at(&out, "stages.0.$cursor.executionStats.totalDocsExamined", "0");
		bson_destroy(&out);
		query_pipeline_free(p);
	}
	fx_close(&f);
}
END_TEST

/* explain of a pipeline: the leading $match is the $cursor's find (an index scan when an
 * index fits), the other stages follow as written with their counters; a pipeline the find
 * runs whole is the find's explain; a $out is shown but never run. */
START_TEST(test_query_agg_explain_stages)
{
	struct fixture f;
	struct dfs_err err = {0};
	struct query_pipeline *p;
	struct store_coll c;
	bson_t out;
	char *s;

	fx_open_k(&f);

	p = pipeline("[{$match: {k: {$lt: 2}}}, {$group: {_id: \"$g\", n: {$sum: 1}}}, "
		     "{$sortByCount: \"$n\"}]");
	bson_init(&out);
	ck_assert_msg(
		!query_agg_explain(f.t, f.coll, "d.c", p, NULL, QUERY_VERB_PLANNER, &out, &err),
		"%s", err.msg);
	expect_at(&out, "explainVersion", "\"1\"");
	expect_at(&out, "stages.0.$cursor.queryPlanner.winningPlan.inputStage.stage", "\"IXSCAN\"");
	expect_at(&out, "stages.0.$cursor.queryPlanner.winningPlan.inputStage.indexName",
		  "\"k_1\"");
	expect_at(&out, "stages.0.nReturned", "");
	expect_at(&out, "stages.0.$cursor.executionStats", "");
	expect_at(&out, "stages.1.$group._id", "\"$g\"");
	expect_at(&out, "stages.2.$group.count", "{\"$sum\": 1}");
	expect_at(&out, "stages.3.$sort.sortKey", "{\"count\": -1}");
	expect_at(&out, "stages.4", "");
	expect_at(&out, "command.aggregate", "\"c\"");
	expect_at(&out, "command.$db", "\"d\"");
	expect_at(&out, "command.pipeline.1.$group.n", "{\"$sum\": 1}");
	bson_destroy(&out);

	/* executionStats: 20 documents match, 3 groups of them, 2 distinct counts (7, 7, 6) */
	bson_init(&out);
	ck_assert_msg(!query_agg_explain(f.t, f.coll, "d.c", p, NULL, QUERY_VERB_EXEC, &out, &err),
		      "%s", err.msg);
	expect_at(&out, "stages.0.$cursor.executionStats.nReturned", "20");
	expect_at(&out, "stages.0.$cursor.executionStats.totalKeysExamined", "20");
	expect_at(&out, "stages.0.nReturned", "20");
	expect_at(&out, "stages.1.nReturned", "3");
	expect_at(&out, "stages.1.usedDisk", "false");
	expect_at(&out, "stages.2.nReturned", "2");
	expect_at(&out, "stages.3.nReturned", "2");
	s = at(&out, "stages.3.executionTimeMillisEstimate");
	ck_assert_msg(*s, "no executionTimeMillisEstimate");
	free(s);
	{
		struct dfs_buf tree;

		dfs_buf_init(&tree);
		ck_assert_msg(!query_agg_explain_tree(&out, &tree, &err), "%s", err.msg);
		ck_assert_msg(strstr(tree.data,
				     "$sort {\"sortKey\": {\"count\": -1}}  nReturned=2\n"
				     "  $group {\"_id\": \"$n\", \"count\": {\"$sum\": 1}}"),
			      "tree:\n%s", tree.data);
		ck_assert_msg(strstr(tree.data, "      $cursor  nReturned=20\n        FETCH"),
			      "tree:\n%s", tree.data);
		ck_assert_msg(strstr(tree.data, "          IXSCAN k_1"), "tree:\n%s", tree.data);
		dfs_buf_release(&tree);
	}
	bson_destroy(&out);
	query_pipeline_free(p);

	/* the find runs the whole pipeline: the find's explain, with the aggregate command */
	p = pipeline("[{$match: {k: 3}}, {$sort: {_id: -1}}, {$limit: 2}]");
	bson_init(&out);
	ck_assert_msg(!query_agg_explain(f.t, f.coll, "d.c", p, NULL, QUERY_VERB_EXEC, &out, &err),
		      "%s", err.msg);
	expect_at(&out, "stages", "");
	expect_at(&out, "executionStats.nReturned", "2");
	expect_at(&out, "command.aggregate", "\"c\"");
	bson_destroy(&out);
	query_pipeline_free(p);

	/* $out is explained, not run: the target is not created */
	p = pipeline("[{$group: {_id: \"$g\"}}, {$out: \"t\"}]");
	bson_init(&out);
	ck_assert_msg(!query_agg_explain(f.t, f.coll, "d.c", p, NULL, QUERY_VERB_ALL, &out, &err),
		      "%s", err.msg);
	expect_at(&out, "stages.0.$cursor.queryPlanner.winningPlan.stage", "\"COLLSCAN\"");
	expect_at(&out, "stages.1.nReturned", "3");
	expect_at(&out, "stages.2.$out", "\"t\"");
	expect_at(&out, "stages.2.nReturned", "");
	ck_assert_int_eq(store_coll_find(f.t, "t", &c, &err), DFS_ENOENT);
	bson_destroy(&out);
	query_pipeline_free(p);

	/* an error while running (executionStats) is the pipeline's error */
	dfs_err_clear(&err);
	p = pipeline("[{$project: {r: {$divide: [1, \"$g\"]}}}]");
	bson_init(&out);
	ck_assert_msg(
		!query_agg_explain(f.t, f.coll, "d.c", p, NULL, QUERY_VERB_PLANNER, &out, &err),
		"%s", err.msg);
	bson_destroy(&out);
	bson_init(&out);
	ck_assert_int_eq(
		query_agg_explain(f.t, f.coll, "d.c", p, NULL, QUERY_VERB_EXEC, &out, &err),
		DFS_EINVAL);
	ck_assert_msg(strstr(err.msg, "stage 0: ") && strstr(err.msg, "divide by zero"), "%s",
		      err.msg);
	bson_destroy(&out);
	query_pipeline_free(p);
	fx_close(&f);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("query_agg");
	TCase *tp = tcase_create("parse");
	TCase *tr = tcase_create("run");

	tcase_add_test(tp, test_query_pipeline_free_null);
	tcase_add_test(tp, test_query_pipeline_parse_errors);
	tcase_add_test(tp, test_query_pipeline_writes_out_merge);
	tcase_set_timeout(tr, 120);
	tcase_add_test(tr, test_query_agg_open_refuses_writes);
	tcase_add_test(tr, test_query_agg_next_end_and_errors);
	tcase_add_test(tr, test_query_agg_next_spill);
	tcase_add_test(tr, test_query_agg_run_out_atomic);
	tcase_add_test(tr, test_query_agg_run_out_creates);
	tcase_add_test(tr, test_query_agg_explain_stages);
	tcase_add_test(tr, test_query_agg_count_reads_no_document);
	suite_add_tcase(s, tp);
	suite_add_tcase(s, tr);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
