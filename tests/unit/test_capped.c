/*
 * test_capped.c - unit tests of capped collections (store/capped.c and its hooks in doc.c):
 * size rounding, eviction of the oldest documents by size and by count inside the insert's
 * transaction, exact totals through updates, deletes and renames, conversion of a full
 * collection, the refusals (a document over the size, a TTL index, moving a document in or
 * out), index entries of evicted documents gone (docfs check), and the totals across a
 * reopen. Each test uses its own temporary store.
 */
#include "store.h"

#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];
static struct store *st;
static struct store_db *db;
static const struct store_attrs attrs = {0644, 0, 0, 0};

static void setup(void)
{
	struct dfs_err err = {0};

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-capped-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "logs", true, &db, &err), 0);
}

static void teardown(void)
{
	char cmd[300];

	store_free(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static int64_t make_capped(const char *name, int64_t size, int64_t max)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_coll_create(t, name, 0755, 0, 0, &c, &err) == 0, "%s", err.msg);
	if (size)
		ck_assert_msg(store_coll_set_capped(t, c.id, size, max, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	return c.id;
}

/* Inserts {_id: id, pad: <n bytes>} in its own transaction; returns the dfs code. */
static int put(int64_t coll, int id, size_t n, struct dfs_err *err)
{
	char text[8192], *pad = malloc(n + 1);
	struct store_txn *t;
	char name[32];
	int rc;

	memset(pad, 'x', n);
	pad[n] = '\0';
	snprintf(text, sizeof(text), "{\"pad\": \"%s\"}", pad);
	free(pad);
	snprintf(name, sizeof(name), "%d.json", id);
	ck_assert_int_eq(store_txn_begin(db, true, &t, err), 0);
	rc = store_doc_write_text(t, coll, name, text, strlen(text), &attrs, NULL, err);
	if (rc) {
		store_txn_abort(t);
		return rc;
	}
	return store_txn_commit(t, err);
}

static struct store_coll coll_of(int64_t id)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_coll_by_id(t, id, &c, &err), 0);
	store_txn_abort(t);
	return c;
}

/* The ids of coll in $natural order, as "1 2 3", and the sum of their BSON lengths. */
static void ids(int64_t coll, char *out, size_t cap, int64_t *bytes, int64_t *count)
{
	struct dfs_err err = {0};
	struct store_cursor *cur;
	struct store_txn *t;
	bson_t doc;
	int64_t id;

	out[0] = '\0';
	*bytes = *count = 0;
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_cursor_open(t, coll, &cur, &err), 0);
	while (store_cursor_next(cur, &doc, &id, &err) == 0) {
		bson_iter_t it;

		ck_assert(bson_iter_init_find(&it, &doc, "_id"));
		snprintf(out + strlen(out), cap - strlen(out), "%s%d", out[0] ? " " : "",
			 bson_iter_int32(&it));
		*bytes += doc.len;
		(*count)++;
	}
	store_cursor_free(cur);
	store_txn_abort(t);
}

/* The totals kept in the catalog equal what the collection holds. */
static void check_totals(int64_t coll)
{
	struct store_coll c = coll_of(coll);
	int64_t bytes, count;
	char buf[1024];

	ids(coll, buf, sizeof(buf), &bytes, &count);
	ck_assert_msg(c.cap_bytes == bytes && c.cap_count == count,
		      "totals %lld bytes %lld docs, holds %lld bytes %lld docs (%s)",
		      (long long)c.cap_bytes, (long long)c.cap_count, (long long)bytes,
		      (long long)count, buf);
	ck_assert_int_le(c.cap_bytes, c.cap_size);
	if (c.cap_max)
		ck_assert_int_le(c.cap_count, c.cap_max);
}

static void problem(void *ctx, const char *p)
{
	(void)ctx;
	ck_abort_msg("docfs check: %s", p);
}

START_TEST(test_store_capped_round_sizes)
{
	ck_assert_int_eq(store_capped_round(1), 4096);
	ck_assert_int_eq(store_capped_round(4096), 4096);
	ck_assert_int_eq(store_capped_round(4097), 4352);
	ck_assert_int_eq(store_capped_round(100000), 100096);
	ck_assert_int_eq(store_capped_round(1048576), 1048576);
}
END_TEST

START_TEST(test_store_capped_evicts_oldest_by_size)
{
	struct dfs_err err = {0};
	int64_t coll = make_capped("log", 4096, 0), bytes, count;
	char buf[1024];

	/* each document is 1000 bytes of padding plus 25 bytes of BSON around it: four fit */
	for (int i = 1; i <= 10; i++) {
		ck_assert_msg(put(coll, i, 1000, &err) == 0, "%s", err.msg);
		check_totals(coll);
	}
	ids(coll, buf, sizeof(buf), &bytes, &count);
	ck_assert_str_eq(buf, "7 8 9 10");
	ck_assert_int_eq(coll_of(coll).cap_size, 4096);
}
END_TEST

START_TEST(test_store_capped_evicts_oldest_by_count)
{
	struct dfs_err err = {0};
	int64_t coll = make_capped("log", 1 << 20, 3), bytes, count;
	char buf[1024];

	for (int i = 1; i <= 5; i++)
		ck_assert_msg(put(coll, i, 10, &err) == 0, "%s", err.msg);
	ids(coll, buf, sizeof(buf), &bytes, &count);
	ck_assert_str_eq(buf, "3 4 5");
	check_totals(coll);
}
END_TEST

START_TEST(test_store_capped_totals_follow_updates_deletes_renames)
{
	struct dfs_err err = {0};
	int64_t coll = make_capped("log", 8192, 0), bytes, count;
	struct store_entry e;
	struct store_txn *t;
	char buf[1024];

	for (int i = 1; i <= 4; i++)
		ck_assert_int_eq(put(coll, i, 500, &err), 0);
	/* an update that grows document 2 keeps its place and evicts only by size */
	ck_assert_msg(put(coll, 2, 3000, &err) == 0, "%s", err.msg);
	check_totals(coll);
	ids(coll, buf, sizeof(buf), &bytes, &count);
	ck_assert_str_eq(buf, "1 2 3 4");
	ck_assert_msg(put(coll, 3, 6000, &err) == 0, "%s", err.msg); /* 1 and 2 must go */
	check_totals(coll);
	ids(coll, buf, sizeof(buf), &bytes, &count);
	ck_assert_str_eq(buf, "3 4");
	/* a delete, and a rename that changes _id in place */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_lookup(t, coll, "4.json", &e, &err), 0);
	ck_assert_int_eq(store_entry_delete(t, e.id, &err), 0);
	ck_assert_int_eq(store_entry_lookup(t, coll, "3.json", &e, &err), 0);
	ck_assert_msg(store_entry_rename(t, e.id, coll, "123456.json", NULL, &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	check_totals(coll);
	ids(coll, buf, sizeof(buf), &bytes, &count);
	ck_assert_str_eq(buf, "123456");
}
END_TEST

START_TEST(test_store_capped_refusals_change_nothing)
{
	struct dfs_err err = {0};
	int64_t coll = make_capped("log", 4096, 0), plain = make_capped("plain", 0, 0), bytes,
		count;
	struct store_entry e;
	struct store_txn *t;
	char buf[1024];
	bson_t spec;
	int rc;

	ck_assert_int_eq(put(coll, 1, 100, &err), 0);
	ck_assert_int_eq(put(coll, 2, 5000, &err), DFS_EINVAL);
	ck_assert_msg(strstr(err.msg, "does not fit") != NULL, "%s", err.msg);
	ids(coll, buf, sizeof(buf), &bytes, &count);
	ck_assert_str_eq(buf, "1");
	check_totals(coll);
	/* a TTL index on a capped collection, and capping a collection with one */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	bson_init(&spec);
	BCON_APPEND(&spec, "key", "{", "at", BCON_INT32(1), "}", "expireAfterSeconds",
		    BCON_INT32(60));
	ck_assert_int_eq(store_index_create(t, coll, &spec, NULL, 0, NULL, NULL, &err), DFS_EINVAL);
	ck_assert_msg(strstr(err.msg, "capped") != NULL, "%s", err.msg);
	dfs_err_clear(&err); /* an error is set once (STYLE.md): clear it for the next */
	rc = store_index_create(t, plain, &spec, NULL, 0, NULL, NULL, &err);
	ck_assert_msg(rc == 0, "%d %s", rc, err.msg);
	ck_assert_int_eq(store_coll_set_capped(t, plain, 4096, 0, &err), DFS_EINVAL);
	ck_assert_msg(strstr(err.msg, "TTL") != NULL, "%s", err.msg);
	bson_destroy(&spec);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_coll_set_capped(t, plain, 0, 0, &err), DFS_EINVAL);
	/* a document cannot move out of a capped collection */
	dfs_err_clear(&err);
	ck_assert_int_eq(store_entry_lookup(t, coll, "1.json", &e, &err), 0);
	ck_assert_int_eq(store_entry_rename(t, e.id, plain, "1.json", NULL, &err), DFS_EPERM);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert(!coll_of(plain).capped);
}
END_TEST

START_TEST(test_store_capped_convert_full_collection_and_reopen)
{
	struct dfs_err err = {0};
	int64_t coll = make_capped("log", 0, 0), bytes, count;
	struct store_txn *t;
	char buf[1024];

	for (int i = 1; i <= 20; i++)
		ck_assert_int_eq(put(coll, i, 400, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_coll_set_capped(t, coll, 2000, 0, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ids(coll, buf, sizeof(buf), &bytes, &count);
	ck_assert_str_eq(buf, "12 13 14 15 16 17 18 19 20"); /* 9 x 424 bytes <= 4096 */
	check_totals(coll);
	ck_assert_msg(store_check(st, problem, NULL, &err) == 0, "%s", err.msg);
	store_free(st);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "logs", false, &db, &err), 0);
	ck_assert_int_eq(put(coll, 21, 400, &err), 0);
	ids(coll, buf, sizeof(buf), &bytes, &count);
	ck_assert_str_eq(buf, "13 14 15 16 17 18 19 20 21");
	check_totals(coll);
}
END_TEST

static void collect(void *ctx, const char *p)
{
	snprintf(ctx, 512, "%s", p);
}

START_TEST(test_store_check_finds_wrong_capped_totals)
{
	struct dfs_err err = {0};
	int64_t coll = make_capped("log", 4096, 0);
	char path[300], found[512] = "";
	sqlite3 *h;

	for (int i = 1; i <= 3; i++)
		ck_assert_int_eq(put(coll, i, 100, &err), 0);
	ck_assert_msg(store_check(st, problem, NULL, &err) == 0, "%s", err.msg);
	/* a document removed behind the store's back: the totals no longer agree */
	snprintf(path, sizeof(path), "%s/logs.db", tmpdir);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	ck_assert_int_eq(
		sqlite3_exec(h, "DELETE FROM docs WHERE name = '2.json'", NULL, NULL, NULL),
		SQLITE_OK);
	sqlite3_close(h);
	ck_assert_int_eq(store_check(st, collect, found, &err), DFS_ECORRUPT);
	ck_assert_msg(strstr(found, "capped collection 'log' counts 3 documents") != NULL, "%s",
		      found);
}
END_TEST

/* The _ids of coll after entry id after, as "4 5"; *last gets the entry id of the one at
 * index at (-1: none). */
static void ids_after(int64_t coll, int64_t after, char *out, size_t cap, int at, int64_t *last)
{
	struct dfs_err err = {0};
	struct store_cursor *cur;
	struct store_txn *t;
	bson_t doc;
	int64_t id;
	int i = 0;

	out[0] = '\0';
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_cursor_open_after(t, coll, after, &cur, &err), 0);
	while (store_cursor_next(cur, &doc, &id, &err) == 0) {
		bson_iter_t it;

		ck_assert(bson_iter_init_find(&it, &doc, "_id"));
		snprintf(out + strlen(out), cap - strlen(out), "%s%d", out[0] ? " " : "",
			 bson_iter_int32(&it));
		if (i++ == at)
			*last = id;
	}
	store_cursor_free(cur);
	store_txn_abort(t);
}

/* A tailable read resumes $natural order after the last entry it saw (fs/paths/tail.c), across
 * id runs shared with another collection's inserts. */
START_TEST(test_store_cursor_resumes_after_an_entry)
{
	struct dfs_err err = {0};
	int64_t a = make_capped("a", 1 << 20, 0), b = make_capped("b", 0, 0), pos = 0;
	char buf[256];

	for (int i = 1; i <= 6; i++) {
		ck_assert_int_eq(put(a, i, 10, &err), 0);
		ck_assert_int_eq(put(b, 100 + i, 10, &err), 0);
	}
	ids_after(a, 0, buf, sizeof(buf), 2, &pos);
	ck_assert_str_eq(buf, "1 2 3 4 5 6");
	ids_after(a, pos, buf, sizeof(buf), -1, &pos);
	ck_assert_str_eq(buf, "4 5 6");
	ids_after(b, 0, buf, sizeof(buf), 5, &pos);
	ck_assert_str_eq(buf, "101 102 103 104 105 106");
	ids_after(b, pos, buf, sizeof(buf), -1, &pos);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(put(b, 107, 10, &err), 0);
	ids_after(b, pos, buf, sizeof(buf), -1, &pos);
	ck_assert_str_eq(buf, "107");
}
END_TEST

static Suite *capped_suite(void)
{
	Suite *s = suite_create("capped");
	TCase *c = tcase_create("capped");

	tcase_add_checked_fixture(c, setup, teardown);
	tcase_add_test(c, test_store_capped_round_sizes);
	tcase_add_test(c, test_store_capped_evicts_oldest_by_size);
	tcase_add_test(c, test_store_capped_evicts_oldest_by_count);
	tcase_add_test(c, test_store_capped_totals_follow_updates_deletes_renames);
	tcase_add_test(c, test_store_capped_refusals_change_nothing);
	tcase_add_test(c, test_store_capped_convert_full_collection_and_reopen);
	tcase_add_test(c, test_store_check_finds_wrong_capped_totals);
	tcase_add_test(c, test_store_cursor_resumes_after_an_entry);
	suite_add_tcase(s, c);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(capped_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
