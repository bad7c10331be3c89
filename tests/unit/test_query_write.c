/*
 * test_query_write.c - unit tests of the write commands (query/write.c): updateOne/Many,
 * upserts, replacements, deletes, findAndModify and bulkWrite (ordered, unordered, atomic),
 * and that a failing command changes nothing. Each test uses its own temporary store.
 */
#include "query.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];
static struct store *st;
static struct store_db *db;
static int64_t coll;

static bson_t *js(const char *text)
{
	struct dfs_err err = {0};
	bson_t *b = bson_new();

	ck_assert_msg(store_codec_parse_doc(text, strlen(text), b, &err) == 0, "%s: %s", text,
		      err.msg);
	return b;
}

static void setup(void)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;
	const char *docs[] = {"{_id: 1, a: 1, tags: ['x']}", "{_id: 2, a: 2}", "{_id: 3, a: 2}"};

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-write-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "shop", true, &db, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_create(t, "c", 0755, 0, 0, &c, &err), 0);
	coll = c.id;
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		bson_t *d = js(docs[i]), prepared;
		struct store_attrs a = {0644, 0, 0, 0};

		ck_assert_int_eq(store_doc_prepare(d, NULL, &prepared, &err), 0);
		ck_assert_int_eq(store_doc_insert(t, coll, &prepared, &a, NULL, &err), 0);
		bson_destroy(&prepared);
		bson_destroy(d);
	}
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

static void teardown(void)
{
	char cmd[300];

	store_free(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* The collection as one compact text, in _id order. */
static char *dump(void)
{
	struct dfs_err err = {0};
	struct query_find_opts o = {0};
	struct query_cursor *c;
	struct store_txn *t;
	struct dfs_buf b;
	const bson_t *doc;
	bson_t *sort = js("{_id: 1}");

	dfs_buf_init(&b);
	o.sort = sort;
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(query_find_open(t, coll, &o, &c, &err), 0);
	while (query_cursor_next(c, &doc, &err) == 0) {
		store_codec_render(doc, STORE_RENDER_COMPACT, &b, &err);
		dfs_buf_putc(&b, '\n');
	}
	query_cursor_free(c);
	store_txn_abort(t);
	bson_destroy(sort);
	return b.data ? b.data : strdup("");
}

/* Runs an update in its own transaction; commits when it succeeds. */
static int run_update(const char *filter, const char *update, bool multi, bool upsert,
		      struct query_write_result *r, struct dfs_err *err)
{
	struct query_write_opts o = {0};
	bson_t *f = js(filter), *u = js(update);
	struct store_txn *t;
	int rc;

	o.filter = f;
	o.update = u;
	o.multi = multi;
	o.upsert = upsert;
	ck_assert_int_eq(store_txn_begin(db, true, &t, err), 0);
	rc = query_update_run(t, coll, &o, r, err);
	if (rc)
		store_txn_abort(t);
	else
		ck_assert_int_eq(store_txn_commit(t, err), 0);
	bson_destroy(f);
	bson_destroy(u);
	return rc;
}

START_TEST(test_query_update_run_one_and_many)
{
	struct query_write_result r = {0};
	struct dfs_err err = {0};
	char *s;

	ck_assert_int_eq(run_update("{a: 2}", "{$inc: {a: 10}}", false, false, &r, &err), 0);
	ck_assert_int_eq(r.matched, 1);
	ck_assert_int_eq(r.modified, 1);
	query_write_result_release(&r);
	ck_assert_int_eq(run_update("{}", "{$set: {b: true}}", true, false, &r, &err), 0);
	ck_assert_int_eq(r.matched, 3);
	ck_assert_int_eq(r.modified, 3);
	query_write_result_release(&r);
	/* A no-op is matched, not modified. */
	ck_assert_int_eq(run_update("{_id: 1}", "{$set: {b: true}}", false, false, &r, &err), 0);
	ck_assert_int_eq(r.matched, 1);
	ck_assert_int_eq(r.modified, 0);
	query_write_result_release(&r);
	s = dump();
	ck_assert_str_eq(s, "{\"_id\": 1, \"a\": 1, \"tags\": [\"x\"], \"b\": true}\n"
			    "{\"_id\": 2, \"a\": 12, \"b\": true}\n"
			    "{\"_id\": 3, \"a\": 2, \"b\": true}\n");
	free(s);
}
END_TEST

START_TEST(test_query_update_run_moved_document_matches_once)
{
	struct query_write_result r = {0};
	struct dfs_err err = {0};

	/* Every document matching a >= 1 gains 10 and still matches: each counted once. */
	ck_assert_int_eq(run_update("{a: {$gte: 1}}", "{$inc: {a: 10}}", true, false, &r, &err),
			 0);
	ck_assert_int_eq(r.matched, 3);
	ck_assert_int_eq(r.modified, 3);
	query_write_result_release(&r);
}
END_TEST

/* The documents are re-read by the entry ids the find gave (query_cursor_entry), through an
 * index scan too (a multikey index returns a document once), or by _id after a SORT. */
START_TEST(test_query_update_run_entries_from_the_plan)
{
	struct query_write_result r = {0};
	struct query_find_opts fo = {0};
	struct query_cursor *c;
	struct dfs_err err = {0};
	struct store_txn *t;
	const bson_t *doc;
	bson_t *spec = js("{key: {tags: 1}}"), *sort = js("{a: -1}");
	char *s;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(!store_index_create(t, coll, spec, NULL, 0, NULL, NULL, &err), "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(run_update("{_id: 2}", "{$set: {tags: ['x', 'y']}}", false, false, &r, &err),
			 0);
	query_write_result_release(&r);

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(query_find_open(t, coll, &fo, &c, &err), 0);
	ck_assert_int_eq(query_cursor_next(c, &doc, &err), 0);
	ck_assert_int_gt(query_cursor_entry(c), 0);
	query_cursor_free(c);
	fo.sort = sort;
	ck_assert_int_eq(query_find_open(t, coll, &fo, &c, &err), 0);
	ck_assert_int_eq(query_cursor_next(c, &doc, &err), 0);
	ck_assert_int_eq(query_cursor_entry(c), 0);
	query_cursor_free(c);
	store_txn_abort(t);

	ck_assert_int_eq(run_update("{tags: {$in: ['x', 'y']}}", "{$inc: {a: 100}}", true, false, &r,
				    &err),
			 0);
	ck_assert_int_eq(r.matched, 2);
	ck_assert_int_eq(r.modified, 2);
	query_write_result_release(&r);
	s = dump();
	ck_assert_str_eq(s, "{\"_id\": 1, \"a\": 101, \"tags\": [\"x\"]}\n"
			    "{\"_id\": 2, \"a\": 102, \"tags\": [\"x\", \"y\"]}\n"
			    "{\"_id\": 3, \"a\": 2}\n");
	free(s);
	bson_destroy(spec);
	bson_destroy(sort);
}
END_TEST

START_TEST(test_query_update_run_upsert_and_replacement)
{
	struct query_write_result r = {0};
	struct dfs_err err = {0};
	char *s;

	ck_assert_int_eq(run_update("{_id: 9, k: 'v'}", "{$set: {n: 1}}", false, true, &r, &err),
			 0);
	ck_assert_int_eq(r.matched, 0);
	ck_assert_int_eq(r.upserted, 1);
	ck_assert_ptr_nonnull(r.upserted_id);
	query_write_result_release(&r);
	ck_assert_int_eq(run_update("{_id: 2}", "{z: 1}", false, false, &r, &err), 0);
	query_write_result_release(&r);
	s = dump();
	ck_assert_ptr_nonnull(strstr(s, "{\"_id\": 9, \"k\": \"v\", \"n\": 1}\n"));
	ck_assert_ptr_nonnull(strstr(s, "{\"_id\": 2, \"z\": 1}\n"));
	free(s);
	ck_assert_int_eq(run_update("{}", "{z: 1}", true, false, &r, &err), DFS_EINVAL);
	query_write_result_release(&r);
}
END_TEST

START_TEST(test_query_update_run_error_changes_nothing)
{
	struct query_write_result r = {0};
	struct dfs_err err = {0};
	char *before = dump(), *after;

	/* The second document fails ($inc on an array): the first must not stay changed. */
	ck_assert_int_eq(run_update("{}", "{$inc: {tags: 1}}", true, false, &r, &err), DFS_ETYPE);
	query_write_result_release(&r);
	after = dump();
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
}
END_TEST

START_TEST(test_query_delete_run_one_and_many)
{
	struct query_write_opts o = {0};
	struct query_write_result r = {0};
	struct dfs_err err = {0};
	struct store_txn *t;
	bson_t *f = js("{a: 2}");
	char *s;

	o.filter = f;
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(query_delete_run(t, coll, &o, &r, &err), 0);
	ck_assert_int_eq(r.deleted, 1);
	o.multi = true;
	ck_assert_int_eq(query_delete_run(t, coll, &o, &r, &err), 0);
	ck_assert_int_eq(r.deleted, 2);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	s = dump();
	ck_assert_str_eq(s, "{\"_id\": 1, \"a\": 1, \"tags\": [\"x\"]}\n");
	free(s);
	bson_destroy(f);
}
END_TEST

START_TEST(test_query_find_modify_returns_before_and_after)
{
	struct query_write_opts o = {0};
	struct query_write_result r = {0};
	struct dfs_err err = {0};
	struct store_txn *t;
	bson_t *f = js("{a: 2}"), *u = js("{$inc: {a: 1}}"), *sort = js("{_id: -1}");
	bson_iter_t it;

	o.filter = f;
	o.update = u;
	o.sort = sort;
	o.return_new = true;
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(query_find_modify(t, coll, &o, &r, &err), 0);
	ck_assert_ptr_nonnull(r.value);
	ck_assert(bson_iter_init_find(&it, r.value, "_id") && bson_iter_as_int64(&it) == 3);
	ck_assert(bson_iter_init_find(&it, r.value, "a") && bson_iter_as_int64(&it) == 3);
	query_write_result_release(&r);
	o.return_new = false;
	ck_assert_int_eq(query_find_modify(t, coll, &o, &r, &err), 0);
	ck_assert(bson_iter_init_find(&it, r.value, "_id") && bson_iter_as_int64(&it) == 2);
	ck_assert(bson_iter_init_find(&it, r.value, "a") && bson_iter_as_int64(&it) == 2);
	query_write_result_release(&r);
	/* Nothing left with a: 2 and no upsert: no document. */
	ck_assert_int_eq(query_find_modify(t, coll, &o, &r, &err), 0);
	ck_assert_ptr_null(r.value);
	query_write_result_release(&r);
	o.update = NULL;
	o.remove = true;
	bson_destroy(f);
	f = js("{_id: 1}");
	o.filter = f;
	ck_assert_int_eq(query_find_modify(t, coll, &o, &r, &err), 0);
	ck_assert_int_eq(r.deleted, 1);
	ck_assert_ptr_nonnull(r.value);
	query_write_result_release(&r);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	bson_destroy(f);
	bson_destroy(u);
	bson_destroy(sort);
}
END_TEST

static int64_t field_int(const bson_t *b, const char *path)
{
	bson_iter_t it, d;

	ck_assert_msg(bson_iter_init(&it, b) && bson_iter_find_descendant(&it, path, &d), "%s",
		      path);
	return bson_iter_as_int64(&d);
}

static int bulk(const char *ops, bool ordered, bool atomic, bson_t *out, struct dfs_err *err)
{
	struct dfs_err perr = {0};
	bson_t *arr = bson_new();
	int rc;

	ck_assert_int_eq(store_codec_parse_value(ops, strlen(ops), arr, "v", &perr), 0);
	{
		bson_iter_t it;
		const uint8_t *data;
		uint32_t len;
		bson_t view;

		ck_assert(bson_iter_init_find(&it, arr, "v"));
		bson_iter_array(&it, &len, &data);
		bson_init_static(&view, data, len);
		rc = query_bulk_run(db, coll, &view, ordered, atomic, out, err);
	}
	bson_destroy(arr);
	return rc;
}

START_TEST(test_query_bulk_run_ordered_unordered_atomic)
{
	const char *ops = "[{insertOne: {document: {_id: 7}}}, {insertOne: {document: {_id: 1}}},"
			  " {updateMany: {filter: {}, update: {$set: {m: 1}}}}]";
	struct dfs_err err = {0};
	bson_t out = BSON_INITIALIZER;
	char *before, *after;

	/* Ordered: the duplicate stops it; the first insert stays. */
	ck_assert_int_eq(bulk(ops, true, false, &out, &err), DFS_EEXIST);
	ck_assert_int_eq(field_int(&out, "insertedCount"), 1);
	ck_assert_int_eq(field_int(&out, "modifiedCount"), 0);
	ck_assert_int_eq(field_int(&out, "writeErrors.0.index"), 1);
	ck_assert_int_eq(field_int(&out, "writeErrors.0.code"), 11000);
	bson_reinit(&out);
	/* Unordered: both inserts fail now (7 exists), the update runs. */
	ck_assert_int_eq(bulk(ops, false, false, &out, &err), DFS_EEXIST);
	ck_assert_int_eq(field_int(&out, "modifiedCount"), 4);
	ck_assert_int_eq(field_int(&out, "writeErrors.1.index"), 1);
	bson_reinit(&out);
	/* Atomic: an error leaves everything as it was. */
	before = dump();
	ck_assert_int_eq(bulk("[{deleteMany: {filter: {}}}, {insertOne: {document: {_id: 1}}},"
			      " {insertOne: {document: {_id: 1}}}]",
			      true, true, &out, &err),
			 DFS_EEXIST);
	ck_assert_int_eq(field_int(&out, "deletedCount"), 0);
	after = dump();
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
	bson_reinit(&out);
	dfs_err_clear(&err);
	ck_assert_int_eq(bulk("[{explode: {}}]", true, false, &out, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "explode"));
	bson_destroy(&out);
}
END_TEST

/* A bulk longer than a commit group (query_bulk_run's BULK_GROUP, 1000): a duplicate in
 * the second group fails alone, unordered; ordered, everything before it stays and nothing
 * after it is written, whichever group it falls in. */
START_TEST(test_query_bulk_run_groups_keep_exact_results)
{
	struct dfs_err err = {0};
	bson_t out = BSON_INITIALIZER;
	struct dfs_buf ops;
	int64_t ndocs = 0, nfiles = 0;
	struct store_txn *t;

	dfs_buf_init(&ops);
	dfs_buf_puts(&ops, "[");
	for (int i = 0; i < 2500; i++)
		dfs_buf_printf(&ops, "%s{insertOne: {document: {_id: %d}}}", i ? "," : "",
			       i == 1500 ? 2 : 100000 + i);
	dfs_buf_puts(&ops, "]");
	ck_assert_int_eq(bulk(ops.data, false, false, &out, &err), DFS_EEXIST);
	ck_assert_int_eq(field_int(&out, "insertedCount"), 2499);
	ck_assert_int_eq(field_int(&out, "writeErrors.0.index"), 1500);
	ck_assert_int_eq(field_int(&out, "insertedIds.2499"), 102499);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_coll_count(t, coll, &ndocs, &nfiles, &err), 0);
	store_txn_abort(t);
	ck_assert_int_eq(ndocs, 3 + 2499);
	/* ordered, over what is there now: the first insert is a duplicate */
	bson_reinit(&out);
	ck_assert_int_eq(bulk("[{insertOne: {document: {_id: 200000}}}, "
			      "{insertOne: {document: {_id: 100000}}}, "
			      "{insertOne: {document: {_id: 200001}}}]",
			      true, false, &out, &err),
			 DFS_EEXIST);
	ck_assert_int_eq(field_int(&out, "insertedCount"), 1);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_coll_count(t, coll, &ndocs, &nfiles, &err), 0);
	store_txn_abort(t);
	ck_assert_int_eq(ndocs, 3 + 2499 + 1);
	dfs_buf_release(&ops);
	bson_destroy(&out);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("query_write");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_query_update_run_one_and_many);
	tcase_add_test(tc, test_query_update_run_moved_document_matches_once);
	tcase_add_test(tc, test_query_update_run_entries_from_the_plan);
	tcase_add_test(tc, test_query_update_run_upsert_and_replacement);
	tcase_add_test(tc, test_query_update_run_error_changes_nothing);
	tcase_add_test(tc, test_query_delete_run_one_and_many);
	tcase_add_test(tc, test_query_find_modify_returns_before_and_after);
	tcase_add_test(tc, test_query_bulk_run_ordered_unordered_atomic);
	tcase_add_test(tc, test_query_bulk_run_groups_keep_exact_results);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
