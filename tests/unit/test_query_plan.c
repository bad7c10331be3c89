/*
 * test_query_plan.c - unit tests of plan.c and exec.c: index bounds as byte ranges (a
 * property test: bounds are never too narrow, and exact bounds are exactly the predicate),
 * interval strings, and the plan cache (a hit, invalidation by an index create and by
 * writes).
 */
#include "plan_int.h"
#include "test_rand.h"

#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ----------------------------------------------------------------------- */

static void parse_text(const char *text, bson_t *out)
{
	struct dfs_err err = {0};

	bson_init(out);
	ck_assert_msg(store_codec_parse_doc(text, strlen(text), out, &err) == 0, "test text %s: %s",
		      text, err.msg);
}

/* Values of every type bracket, with the corners of each. */
static const char *const pool[] = {
	"MinKey",
	"MaxKey",
	"null",
	"undefined",
	"0",
	"-0.0",
	"5",
	"5.0",
	"NumberLong(5)",
	"NumberDecimal(\"5.000\")",
	"-3",
	"2.5",
	"NumberLong(\"9007199254740993\")",
	"Infinity",
	"-Infinity",
	"NaN",
	"\"\"",
	"\"a\"",
	"\"ab\"",
	"\"abc\"",
	"\"abd\"",
	"\"b\"",
	"\"a\\u0000b\"",
	"{}",
	"{x: 1}",
	"{x: \"a\"}",
	"[]",
	"[1, 2]",
	"[\"ab\", 7]",
	"[[1], 2]",
	"[null]",
	"BinData(0, \"AQI=\")",
	"ObjectId(\"5f0000000000000000000001\")",
	"true",
	"false",
	"ISODate(\"2020-01-01T00:00:00Z\")",
	"new Date(-5)",
	"Timestamp(1, 2)",
	"/ab/",
	"/^ab/",
};
#define NPOOL (sizeof(pool) / sizeof(pool[0]))

/* A random single-field predicate on f as filter text. */
static void random_pred(char *out, size_t cap)
{
	static const char *const ops[] = {"$eq", "$gt", "$gte", "$lt", "$lte", "$ne"};
	const char *v = pool[rnd(NPOOL)], *w = pool[rnd(NPOOL)];

	switch (rnd(10)) {
	case 0:
	case 1:
	case 2:
		if (strcmp(v, "undefined") == 0 || (v[0] == '/' && rnd(2)))
			v = "1";
		snprintf(out, cap, "{f: {%s: %s}}", ops[rnd(6)], v);
		break;
	case 3:
		if (strcmp(v, "undefined") == 0)
			v = "2";
		snprintf(out, cap, "{f: %s}", v);
		break;
	case 4:
		snprintf(out, cap, "{f: {$in: [%s, %s]}}", strcmp(v, "undefined") ? v : "1",
			 strcmp(w, "undefined") ? w : "3");
		break;
	case 5:
		snprintf(out, cap, "{f: {$nin: [%s, %s]}}", strcmp(v, "undefined") ? v : "1",
			 strcmp(w, "undefined") ? w : "3");
		break;
	case 6:
		snprintf(out, cap, "{f: {$regex: \"%s\"}}",
			 (const char *[]){"^ab", "^a", "b", "^abc?", "^a.c", "^$"}[rnd(6)]);
		break;
	case 7:
		snprintf(out, cap, "{f: {$exists: %s}}", rnd(2) ? "true" : "false");
		break;
	case 8:
		snprintf(out, cap, "{f: {$type: \"%s\"}}",
			 (const char *[]){"number", "string", "object", "array", "null", "bool",
					  "date", "double", "int", "minKey", "regex"}[rnd(11)]);
		break;
	default:
		snprintf(out, cap, "{f: {$elemMatch: {$gte: %s, $lt: 9}}}",
			 (const char *[]){"1", "\"a\"", "0", "5.5"}[rnd(4)]);
		break;
	}
}

/* The index keys of {f: v} for one field (note 2 of store/index.c): v itself, or each
 * element of an array (undefined for an empty one). */
static int keys_of(const bson_t *doc, bson_value_t *keys, int cap)
{
	bson_iter_t it, a;
	int n = 0;

	if (!bson_iter_init_find(&it, doc, "f")) {
		keys[0].value_type = BSON_TYPE_NULL;
		return 1;
	}
	if (!BSON_ITER_HOLDS_ARRAY(&it)) {
		keys[0] = *bson_iter_value(&it);
		return 1;
	}
	bson_iter_recurse(&it, &a);
	while (bson_iter_next(&a) && n < cap)
		keys[n++] = *bson_iter_value(&a);
	if (n == 0)
		keys[n++].value_type = BSON_TYPE_UNDEFINED;
	return n;
}

static bool in_ranges(const struct plan__range *r, int n, const struct dfs_buf *k)
{
	for (int i = 0; i < n; i++) {
		size_t m;
		int c;

		m = r[i].lo.len < k->len ? r[i].lo.len : k->len;
		c = memcmp(r[i].lo.data ? r[i].lo.data : "", k->data, m);
		if (c > 0 || (c == 0 && r[i].lo.len > k->len))
			continue; /* below lo */
		m = r[i].hi.len < k->len ? r[i].hi.len : k->len;
		c = memcmp(k->data, r[i].hi.data, m);
		if (c < 0 || (c == 0 && k->len < r[i].hi.len))
			return true;
	}
	return false;
}

/* ---- bounds ------------------------------------------------------------------------- */

START_TEST(test_plan_ranges_never_too_narrow)
{
	struct dfs_err err = {0};
	int checked = 0, exact_checked = 0;

	seed_start(20261202, 7);
	for (int iter = 0; iter < 20000; iter++) {
		char ftext[256], dtext[256];
		const char *vt = pool[rnd(NPOOL)], *wt = pool[rnd(NPOOL)];
		struct query_expr *e = NULL;
		struct plan__ivals s;
		struct plan__range *r;
		bson_value_t keys[16];
		bson_t f, d, w;
		bson_iter_t wit;
		int nr, nk, dir = rnd(2) ? 1 : -1, wdir = rnd(2) ? 1 : -1;
		bool match, found = false;
		struct dfs_buf pre;
		const struct query_expr *pred;

		random_pred(ftext, sizeof(ftext));
		parse_text(ftext, &f);
		if (query_filter_parse(&f, &e, &err)) {
			dfs_err_clear(&err);
			bson_destroy(&f);
			continue;
		}
		snprintf(dtext, sizeof(dtext), "{f: %s}", vt);
		parse_text(dtext, &d);
		snprintf(dtext, sizeof(dtext), "{w: %s}", wt);
		parse_text(dtext, &w);
		bson_iter_init_find(&wit, &w, "w");
		pred = e;
		if (!plan__pred_bounds(pred, false, &s))
			goto next;
		dfs_buf_init(&pre);
		ck_assert_int_eq(plan__ranges_of(&s, dir, &pre, &r, &nr, &err), 0);
		dfs_buf_release(&pre);
		match = query_filter_match(e, &d, NULL);
		nk = keys_of(&d, keys, 16);
		for (int k = 0; k < nk; k++) {
			struct dfs_buf key;

			dfs_buf_init(&key);
			ck_assert_int_eq(store_key_append(&key, &keys[k], dir < 0, &err), 0);
			/* a compound key: the field, then another field's value */
			ck_assert_int_eq(
				store_key_append(&key, bson_iter_value(&wit), wdir < 0, &err), 0);
			found |= in_ranges(r, nr, &key);
			dfs_buf_release(&key);
		}
		if (match)
			ck_assert_msg(found,
				      "seed %llu: %s matches {f: %s} but no key is in bounds",
				      (unsigned long long)seed_used, ftext, vt);
		if (s.exact && nk == 1 && vt[0] != '[') {
			ck_assert_msg(found == match, "seed %llu: %s exact bounds vs {f: %s}",
				      (unsigned long long)seed_used, ftext, vt);
			exact_checked++;
		}
		checked++;
		plan__ranges_free(r, nr);
		plan__ivals_release(&s);
	next:
		query_expr_free(e);
		bson_destroy(&f);
		bson_destroy(&d);
		bson_destroy(&w);
	}
	ck_assert_int_gt(checked, 10000);
	ck_assert_int_gt(exact_checked, 1000);
}
END_TEST

static void bounds_text(const char *filter, char *out, size_t cap)
{
	struct query_expr *e = NULL;
	struct dfs_err err = {0};
	struct plan__ivals s;
	struct dfs_buf b;
	bson_t f;

	parse_text(filter, &f);
	ck_assert_int_eq(query_filter_parse(&f, &e, &err), 0);
	ck_assert(plan__pred_bounds(e, false, &s));
	dfs_buf_init(&b);
	for (int i = 0; i < s.n; i++) {
		if (i)
			dfs_buf_puts(&b, ", ");
		plan__ival_describe(&s.iv[i], &b);
	}
	snprintf(out, cap, "%s", b.data ? b.data : "");
	dfs_buf_release(&b);
	plan__ivals_release(&s);
	query_expr_free(e);
	bson_destroy(&f);
}

#define BOUNDS(f, want)                                                                            \
	do {                                                                                       \
		char got_[512];                                                                    \
		bounds_text(f, got_, sizeof(got_));                                                \
		ck_assert_str_eq(got_, want);                                                      \
	} while (0)

START_TEST(test_plan_bounds_strings)
{
	BOUNDS("{f: {$gt: 5}}", "(5, inf.0]");
	BOUNDS("{f: {$lte: 5.5}}", "[-inf.0, 5.5]");
	BOUNDS("{f: {$gte: \"a\"}}", "[\"a\", {})");
	BOUNDS("{f: {$lt: \"a\"}}", "[\"\", \"a\")");
	BOUNDS("{f: {$in: [3, 1, 3]}}", "[1, 1], [3, 3]");
	BOUNDS("{f: /^abc/}", "[\"abc\", \"abd\"), [/^abc/, /^abc/]");
	BOUNDS("{f: /abc/i}", "[\"\", {}), [/abc/i, /abc/i]");
	BOUNDS("{f: {$ne: 5}}", "[MinKey, 5), (5, MaxKey]");
	BOUNDS("{f: {$nin: [1, 2]}}", "[MinKey, 1), (1, 2), (2, MaxKey]");
	BOUNDS("{f: null}", "[null, null]");
	BOUNDS("{f: {$exists: true}}", "[MinKey, MaxKey]");
	BOUNDS("{f: {$exists: false}}", "[null, null]");
	BOUNDS("{f: [1, 2]}", "[1, 1], [[1, 2], [1, 2]]");
	BOUNDS("{f: {$type: \"number\"}}", "[nan.0, inf.0]");
	BOUNDS("{f: {$type: \"object\"}}", "[{}, [])");
	BOUNDS("{f: {$elemMatch: {$gt: 1, $lt: 4}}}", "(1, 4)");
	BOUNDS("{f: {$gt: ISODate(\"2020-01-01T00:00:00Z\")}}",
	       "(new Date(1577836800000), Timestamp(0, 0))");
	BOUNDS("{f: {$lte: true}}", "[false, true]");
}
END_TEST

/* ---- the plan cache --------------------------------------------------------------------- */

static char tmpdir[64];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void find_once(struct store_db *db, int64_t coll, const char *filter, int want)
{
	struct dfs_err err = {0};
	struct query_find_opts o = {0};
	struct query_cursor *c;
	struct store_txn *t;
	const bson_t *doc;
	bson_t f;
	int n = 0, rc;

	parse_text(filter, &f);
	o.filter = &f;
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(query_find_open(t, coll, &o, &c, &err), 0);
	while ((rc = query_cursor_next(c, &doc, &err)) == 0)
		n++;
	ck_assert_int_eq(rc, DFS_ENOENT);
	ck_assert_int_eq(n, want);
	query_cursor_free(c);
	store_txn_abort(t);
	bson_destroy(&f);
}

static void insert_docs(struct store_db *db, int64_t coll, int from, int n)
{
	struct dfs_err err = {0};
	const struct store_attrs a = {0644, 0, 0, 0};
	struct store_txn *t;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	for (int i = from; i < from + n; i++) {
		char text[128];
		bson_t d, p;

		snprintf(text, sizeof(text), "{_id: %d, a: %d, b: %d}", i, i % 10, i % 7);
		parse_text(text, &d);
		ck_assert_int_eq(store_doc_prepare(&d, NULL, &p, &err), 0);
		ck_assert_int_eq(store_doc_insert(t, coll, &p, &a, NULL, &err), 0);
		bson_destroy(&p);
		bson_destroy(&d);
	}
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

/* Rewrites documents from..from+n-1 one file write each (one change record per write). */
static void rewrite_docs(struct store_db *db, int64_t coll, int from, int n)
{
	struct dfs_err err = {0};
	const struct store_attrs a = {0644, 0, 0, 0};
	struct store_txn *t;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	for (int i = from; i < from + n; i++) {
		char name[32], text[128];

		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"_id\": %d, \"a\": %d, \"b\": %d}", i, i % 10,
			 i % 7);
		ck_assert_msg(store_doc_write_text(t, coll, name, text, strlen(text), &a, NULL,
						   &err) == 0,
			      "%s", err.msg);
	}
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

static void create_index(struct store_db *db, int64_t coll, const char *spec)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	bson_t s;

	parse_text(spec, &s);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_index_create(t, coll, &s, NULL, 0, NULL, NULL, &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	bson_destroy(&s);
}

/* A fresh store in tmpdir with database "d" and collection "c"; returns the collection id. */
static int64_t open_coll(struct store **st, struct store_db **db)
{
	struct dfs_err err = {0};
	struct store_coll coll;
	struct store_txn *t;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-plan-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(store_open(tmpdir, true, st, &err), 0);
	ck_assert_int_eq(store_db_get(*st, "d", true, db, &err), 0);
	ck_assert_int_eq(store_txn_begin(*db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_create(t, "c", 0755, 0, 0, &coll, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	return coll.id;
}

START_TEST(test_plan_cache_hit_and_invalidation)
{
	int64_t coll;
	struct store_db *db;
	struct store *st;
	int64_t hits, misses, inval;

	query_init();
	plan__cache_clear();
	coll = open_coll(&st, &db);
	insert_docs(db, coll, 1, 100);
	create_index(db, coll, "{key: {a: 1}}");
	create_index(db, coll, "{key: {b: 1}}");

	/* two candidates: the first find plans and caches, the second hits */
	find_once(db, coll, "{a: 3, b: 2}", 2);
	plan__cache_stats(&hits, &misses, &inval);
	ck_assert_int_eq(hits, 0);
	ck_assert_int_eq(misses, 1);
	find_once(db, coll, "{a: 4, b: 5}", 1); /* same shape, other values */
	plan__cache_stats(&hits, &misses, &inval);
	ck_assert_int_eq(hits, 1);
	find_once(db, coll, "{a: {$gt: 4}, b: 5}", 8); /* another shape */
	plan__cache_stats(&hits, &misses, &inval);
	ck_assert_int_eq(hits, 1);
	ck_assert_int_eq(misses, 2);

	/* an index create invalidates */
	create_index(db, coll, "{key: {a: 1, b: 1}}");
	find_once(db, coll, "{a: 3, b: 2}", 2);
	plan__cache_stats(&hits, &misses, &inval);
	ck_assert_int_eq(hits, 1);
	ck_assert_int_eq(inval, 1);
	find_once(db, coll, "{a: 3, b: 2}", 2);
	plan__cache_stats(&hits, &misses, &inval);
	ck_assert_int_eq(hits, 2);

	/* fewer than 1,000 writes keep the entry, 1,000 more drop it (the counter is the
	 * database's change feed: a bulk insert transaction counts once, a file write once) */
	rewrite_docs(db, coll, 1, 10);
	find_once(db, coll, "{a: 3, b: 2}", 2);
	plan__cache_stats(&hits, &misses, &inval);
	ck_assert_int_eq(hits, 3);
	ck_assert_int_eq(inval, 1);
	rewrite_docs(db, coll, 1, 100);
	for (int i = 0; i < 9; i++)
		rewrite_docs(db, coll, 1, 100);
	find_once(db, coll, "{a: 3, b: 2}", 2);
	plan__cache_stats(&hits, &misses, &inval);
	ck_assert_int_eq(hits, 3);
	ck_assert_int_eq(inval, 2);

	store_free(st);
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	plan__cache_clear();
}
END_TEST

/* A sort past its memory budget spills runs; with a limit it still returns only limitAmount
 * documents, the first ones in order (the merge of spilled runs once ignored the limit). */
START_TEST(test_plan_sort_spilled_keeps_the_limit)
{
	struct dfs_err err = {0};
	struct query_find_opts o = {0};
	struct query_cursor *c;
	int64_t coll;
	struct store_txn *t;
	struct store_db *db;
	struct store *st;
	const bson_t *doc;
	bson_t f, sort;
	int n = 0, rc;

	query_init();
	coll = open_coll(&st, &db);
	insert_docs(db, coll, 1, 3000);
	parse_text("{}", &f);
	parse_text("{b: -1, _id: 1}", &sort);
	o.filter = &f;
	o.sort = &sort;
	o.limit = 20;
	o.sort_mem = 4096; /* 3,000 documents: many runs */
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(query_find_open(t, coll, &o, &c, &err), 0);
	while ((rc = query_cursor_next(c, &doc, &err)) == 0) {
		bson_iter_t it;

		/* b = i % 7: the 20 first are b = 6, i = 6, 13, 20, ... */
		ck_assert(bson_iter_init_find(&it, doc, "_id"));
		ck_assert_int_eq(bson_iter_as_int64(&it), 6 + 7 * n);
		n++;
	}
	ck_assert_int_eq(rc, DFS_ENOENT);
	ck_assert_int_eq(n, 20);
	query_cursor_free(c);
	store_txn_abort(t);
	bson_destroy(&f);
	bson_destroy(&sort);
	store_free(st);
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	plan__cache_clear();
}
END_TEST

static Suite *plan_suite(void)
{
	Suite *s = suite_create("query_plan");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_plan_ranges_never_too_narrow);
	tcase_add_test(tc, test_plan_bounds_strings);
	tcase_add_test(tc, test_plan_cache_hit_and_invalidation);
	tcase_add_test(tc, test_plan_sort_spilled_keeps_the_limit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(plan_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
