/*
 * test_store.c - unit tests of the SQLite-paged store (db.c, doc.c, check.c): databases,
 * collections, documents and scratch files, the rename rules, listing cookies, the change
 * feed and the checker. Each test uses its own temporary store directory.
 */
#include "store.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];
static struct store *st;
static struct store_db *db;

static void setup(void)
{
	struct dfs_err err = {0};

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-store-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "shop", true, &db, &err), 0);
}

static void teardown(void)
{
	char cmd[300];

	store_free(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static int64_t make_coll(const char *name)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_coll_create(t, name, 0755, 0, 0, &c, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	return c.id;
}

static const struct store_attrs attrs = {0644, 1000, 1000, 0};

/* Writes text as document name; returns the dfs code. */
static int write_doc(int64_t coll, const char *name, const char *text, struct store_entry *e,
		     struct dfs_err *err)
{
	struct store_txn *t;
	int rc;

	ck_assert_int_eq(store_txn_begin(db, true, &t, err), 0);
	rc = store_doc_write_text(t, coll, name, text, strlen(text), &attrs, e, err);
	if (rc) {
		store_txn_abort(t);
		return rc;
	}
	return store_txn_commit(t, err);
}

static char *read_entry(const char *name, int64_t coll, struct store_entry *e)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct dfs_buf b;
	char *s;

	dfs_buf_init(&b);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	if (store_entry_lookup(t, coll, name, e, &err) != 0) {
		store_txn_abort(t);
		return NULL;
	}
	ck_assert_int_eq(store_entry_read(t, e->id, &b, &err), 0);
	store_txn_abort(t);
	s = strdup(b.data ? b.data : "");
	dfs_buf_release(&b);
	return s;
}

START_TEST(test_store_db_get_numbers_are_stable)
{
	struct dfs_err err = {0};
	struct store_db *db2;
	uint32_t n1 = store_db_number(db), n2;

	ck_assert_int_eq(store_db_get(st, "other", true, &db2, &err), 0);
	n2 = store_db_number(db2);
	ck_assert_uint_ne(n1, n2);
	store_free(st);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "shop", false, &db, &err), 0);
	ck_assert_uint_eq(store_db_number(db), n1);
	ck_assert_int_eq(store_db_get(st, "other", false, &db2, &err), 0);
	ck_assert_uint_eq(store_db_number(db2), n2);
}
END_TEST

START_TEST(test_store_db_name_check_rejects_bad_names)
{
	struct dfs_err err = {0};
	char longname[80];

	ck_assert_int_eq(store_db_name_check("a.b", &err), DFS_EINVAL);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_db_name_check("", &err), DFS_EINVAL);
	memset(longname, 'x', 65);
	longname[65] = '\0';
	dfs_err_clear(&err);
	ck_assert_int_eq(store_db_name_check(longname, &err), DFS_ENAMETOOLONG);
	ck_assert_ptr_nonnull(strstr(err.msg, "64-byte limit"));
	dfs_err_clear(&err);
	ck_assert_int_eq(store_coll_name_check("system.users", &err), DFS_EINVAL);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_coll_name_check("a$b", &err), DFS_EINVAL);
	ck_assert_int_eq(store_coll_name_check("users.archive", NULL), 0);
}
END_TEST

START_TEST(test_store_db_drop_refuses_non_empty)
{
	struct dfs_err err = {0};

	make_coll("users");
	ck_assert_int_eq(store_db_drop(st, "shop", &err), DFS_ENOTEMPTY);
	ck_assert_ptr_nonnull(strstr(err.msg, "1 collections"));
}
END_TEST

START_TEST(test_store_coll_create_duplicate_fails)
{
	struct dfs_err err = {0};
	struct store_txn *t;

	make_coll("users");
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_create(t, "users", 0755, 0, 0, NULL, &err), DFS_EEXIST);
	store_txn_abort(t);
}
END_TEST

START_TEST(test_store_doc_write_text_takes_id_from_name)
{
	struct dfs_err err = {0};
	struct store_entry e;
	int64_t c = make_coll("users");
	char *text;

	ck_assert_msg(write_doc(c, "alice.json", "{\"age\": 30}", &e, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(e.name, "alice.json");
	text = read_entry("alice.json", c, &e);
	ck_assert_str_eq(text, "{\n  \"_id\": \"alice\",\n  \"age\": 30\n}\n");
	ck_assert_int_eq(e.size, (int64_t)strlen(text));
	ck_assert_uint_eq(e.uid, 1000);
	free(text);
}
END_TEST

START_TEST(test_store_doc_write_text_rejects_other_id)
{
	struct dfs_err err = {0};
	struct store_entry e;
	int64_t c = make_coll("users");
	char *text;

	ck_assert_int_eq(write_doc(c, "7.json", "{\"_id\": 7, \"v\": 1}", &e, &err), 0);
	ck_assert_int_eq(write_doc(c, "7.json", "{\"_id\": 8, \"v\": 2}", &e, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "differs"));
	text = read_entry("7.json", c, &e);
	ck_assert_ptr_nonnull(strstr(text, "\"v\": 1"));
	free(text);
	/* 7.0 is the same _id as 7. */
	dfs_err_clear(&err);
	ck_assert_msg(write_doc(c, "7.json", "{\"_id\": 7.0, \"v\": 3}", &e, &err) == 0, "%s",
		      err.msg);
}
END_TEST

START_TEST(test_store_doc_write_text_invalid_changes_nothing)
{
	struct dfs_err err = {0};
	struct store_entry e, e2;
	int64_t c = make_coll("users");
	char *before, *after;

	ck_assert_int_eq(write_doc(c, "a.json", "{\"x\": 1}", &e, &err), 0);
	before = read_entry("a.json", c, &e);
	ck_assert_int_eq(write_doc(c, "a.json", "{\"x\": ", &e2, &err), DFS_EINVAL);
	dfs_err_clear(&err);
	ck_assert_int_eq(write_doc(c, "a.json", "{\"$x\": 1}", &e2, &err), DFS_EINVAL);
	dfs_err_clear(&err);
	ck_assert_int_eq(write_doc(c, "a.json", "{\"_id\": [1]}", &e2, &err), DFS_EINVAL);
	after = read_entry("a.json", c, &e2);
	ck_assert_str_eq(before, after);
	ck_assert_int_eq(e.mtime_ns, e2.mtime_ns);
	free(before);
	free(after);
}
END_TEST

START_TEST(test_store_doc_insert_duplicate_is_eexist)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	bson_t doc = BSON_INITIALIZER;
	int64_t c = make_coll("users");

	BSON_APPEND_INT32(&doc, "_id", 5);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_doc_insert(t, c, &doc, &attrs, NULL, &err), 0);
	ck_assert_int_eq(store_doc_insert(t, c, &doc, &attrs, NULL, &err), DFS_EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "duplicate _id"));
	/* The statement failed, the transaction did not: the first insert commits. */
	ck_assert_int_eq(store_txn_commit(t, NULL), 0);
	bson_destroy(&doc);
}
END_TEST

START_TEST(test_store_doc_prepare_puts_id_first)
{
	struct dfs_err err = {0};
	bson_t doc = BSON_INITIALIZER, out;
	bson_iter_t it;

	BSON_APPEND_INT32(&doc, "a", 1);
	BSON_APPEND_UTF8(&doc, "_id", "x");
	ck_assert_int_eq(store_doc_prepare(&doc, NULL, &out, &err), 0);
	ck_assert(bson_iter_init(&it, &out) && bson_iter_next(&it));
	ck_assert_str_eq(bson_iter_key(&it), "_id");
	bson_destroy(&out);
	bson_destroy(&doc);
	/* No _id anywhere: an ObjectId. */
	bson_init(&doc);
	BSON_APPEND_INT32(&doc, "a", 1);
	ck_assert_int_eq(store_doc_prepare(&doc, NULL, &out, &err), 0);
	ck_assert(bson_iter_init_find(&it, &out, "_id") && BSON_ITER_HOLDS_OID(&it));
	bson_destroy(&out);
	bson_destroy(&doc);
}
END_TEST

/* The ObjectId that store_doc_prepare gives a document without _id. */
static bson_oid_t prepared_oid(void)
{
	struct dfs_err err = {0};
	bson_t doc = BSON_INITIALIZER, out;
	bson_iter_t it;
	bson_oid_t oid;

	BSON_APPEND_INT32(&doc, "a", 1);
	ck_assert_int_eq(store_doc_prepare(&doc, NULL, &out, &err), 0);
	ck_assert(bson_iter_init_find(&it, &out, "_id") && BSON_ITER_HOLDS_OID(&it));
	bson_oid_copy(bson_iter_oid(&it), &oid);
	bson_destroy(&out);
	bson_destroy(&doc);
	return oid;
}

START_TEST(test_store_doc_prepare_oids_differ_after_fork)
{
	bson_oid_t a = prepared_oid(), b = prepared_oid(), c;
	int fds[2], status;
	pid_t pid;

	/* Within a process: same random part (bytes 4-8), increasing counter. */
	ck_assert(memcmp(a.bytes + 4, b.bytes + 4, 5) == 0);
	ck_assert(!bson_oid_equal(&a, &b));
	/* A forked child (a daemonizing mount) must not reuse its parent's random part. */
	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		bson_oid_t o = prepared_oid();

		_exit(write(fds[1], o.bytes, 12) == 12 ? 0 : 1);
	}
	ck_assert_int_eq(read(fds[0], c.bytes, 12), 12);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(fds[0]);
	close(fds[1]);
	ck_assert(memcmp(a.bytes + 4, c.bytes + 4, 5) != 0);
	/* And the parent goes on with its own. */
	b = prepared_oid();
	ck_assert(memcmp(a.bytes + 4, b.bytes + 4, 5) == 0);
}
END_TEST

START_TEST(test_store_entry_rename_doc_changes_id)
{
	struct dfs_err err = {0};
	struct store_entry e, out;
	struct store_txn *t;
	int64_t c = make_coll("users");
	char *text;

	ck_assert_int_eq(write_doc(c, "a.json", "{\"v\": 1}", &e, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_entry_rename(t, e.id, c, "b.json", &out, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(out.id, e.id);
	ck_assert_ptr_null(read_entry("a.json", c, &e));
	text = read_entry("b.json", c, &e);
	ck_assert_str_eq(text, "{\n  \"_id\": \"b\",\n  \"v\": 1\n}\n");
	free(text);
}
END_TEST

START_TEST(test_store_entry_rename_scratch_over_doc_keeps_id)
{
	struct dfs_err err = {0};
	struct store_entry d, f, out;
	struct store_txn *t;
	int64_t c = make_coll("users");
	const char *tmp = "{\"v\": 2}";
	char *text;

	ck_assert_int_eq(write_doc(c, "a.json", "{\"v\": 1}", &d, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_file_create(t, c, "sedX1", STORE_KIND_FILE, &attrs, tmp,
					   strlen(tmp), &f, &err), 0);
	ck_assert_msg(store_entry_rename(t, f.id, c, "a.json", &out, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(out.id, d.id);
	ck_assert_ptr_null(read_entry("sedX1", c, &f));
	text = read_entry("a.json", c, &d);
	ck_assert_ptr_nonnull(strstr(text, "\"v\": 2"));
	ck_assert_int_eq(d.id, out.id);
	free(text);
}
END_TEST

START_TEST(test_store_entry_rename_invalid_scratch_changes_nothing)
{
	struct dfs_err err = {0};
	struct store_entry d, f, out;
	struct store_txn *t;
	int64_t c = make_coll("users");
	char *text;

	ck_assert_int_eq(write_doc(c, "a.json", "{\"v\": 1}", &d, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_file_create(t, c, "t", STORE_KIND_FILE, &attrs, "{oops", 5, &f,
					   &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_rename(t, f.id, c, "a.json", &out, &err), DFS_EINVAL);
	store_txn_abort(t);
	text = read_entry("a.json", c, &d);
	ck_assert_ptr_nonnull(strstr(text, "\"v\": 1"));
	free(text);
	text = read_entry("t", c, &f);
	ck_assert_str_eq(text, "{oops");
	free(text);
}
END_TEST

START_TEST(test_store_entry_rename_doc_away_and_back_keeps_id)
{
	/* vim: rename a.json to a.json~, create a.json again: the same id comes back. */
	struct dfs_err err = {0};
	struct store_entry d, bak, again;
	struct store_txn *t;
	int64_t c = make_coll("users");
	char *text;

	ck_assert_int_eq(write_doc(c, "a.json", "{\"v\": 1}", &d, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_rename(t, d.id, c, "a.json~", &bak, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_ne(bak.id, d.id);
	ck_assert_int_eq(bak.kind, STORE_KIND_FILE);
	text = read_entry("a.json~", c, &bak);
	ck_assert_str_eq(text, "{\n  \"_id\": \"a\",\n  \"v\": 1\n}\n");
	free(text);
	ck_assert_int_eq(write_doc(c, "a.json", "{\"v\": 2}", &again, &err), 0);
	ck_assert_int_eq(again.id, d.id);
}
END_TEST

/* The same within one transaction that has already inserted into the collection (and so
 * knows it had no vacated ids): the rename's vacated id must still be found. */
START_TEST(test_store_entry_rename_doc_away_and_back_in_one_txn_keeps_id)
{
	struct dfs_err err = {0};
	struct store_entry d, bak, again;
	struct store_txn *t;
	int64_t c = make_coll("users");
	const char *b = "{\"v\": 2}";

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_doc_write_text(t, c, "a.json", "{}", 2, &attrs, &d, &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(store_entry_rename(t, d.id, c, "a.json~", &bak, &err), 0);
	ck_assert_msg(store_doc_write_text(t, c, "a.json", b, strlen(b), &attrs, &again, &err) ==
			  0,
		      "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(again.id, d.id);
	ck_assert_int_ne(bak.id, d.id);
}
END_TEST

struct listing {
	int64_t ids[64];
	int n;
	uint64_t last;
	int stop_after;
};

static int collect(void *ctx, const struct store_entry *e, uint64_t next)
{
	struct listing *l = ctx;

	l->ids[l->n++] = e->id;
	l->last = next;
	return l->n == l->stop_after ? 1 : 0;
}

START_TEST(test_store_entry_list_resumes_from_cookie)
{
	struct dfs_err err = {0};
	struct store_entry e;
	struct store_txn *t;
	struct listing l = {.stop_after = 3};
	int64_t c = make_coll("users");
	char name[32];

	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		ck_assert_int_eq(write_doc(c, name, "{}", &e, &err), 0);
	}
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_entry_list(t, c, 0, collect, &l, &err), 1);
	store_txn_abort(t);
	/* An insert between two calls shows after the existing entries only. */
	ck_assert_int_eq(write_doc(c, "100.json", "{}", &e, &err), 0);
	l.stop_after = 0;
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_entry_list(t, c, l.last, collect, &l, &err), 0);
	store_txn_abort(t);
	ck_assert_int_eq(l.n, 11);
	for (int i = 1; i < l.n; i++)
		ck_assert_int_lt(l.ids[i - 1], l.ids[i]);
	ck_assert_int_eq(l.ids[10], e.id);
}
END_TEST

static int count_changes(void *ctx, const struct store_change *c)
{
	(*(int *)ctx)++;
	return 0;
}

START_TEST(test_store_changes_since_sees_writes)
{
	struct dfs_err err = {0};
	struct store_entry e;
	int64_t c = make_coll("users"), seq = 0;
	int n = 0;

	ck_assert_int_eq(store_changes_last(db, &seq, &err), 0);
	ck_assert_int_eq(write_doc(c, "a.json", "{}", &e, &err), 0);
	ck_assert_int_eq(write_doc(c, "a.json", "{\"x\": 1}", &e, &err), 0);
	ck_assert_int_eq(store_changes_since(db, seq, count_changes, &n, &err), 0);
	ck_assert_int_eq(n, 2);
}
END_TEST

static void no_problem(void *ctx, const char *p)
{
	ck_abort_msg("unexpected problem: %s", p);
}

START_TEST(test_store_check_passes_on_sound_store)
{
	struct dfs_err err = {0};
	struct store_entry e;
	int64_t c = make_coll("users");

	ck_assert_int_eq(write_doc(c, "a.json", "{\"n\": NumberLong(5), \"d\": 1.5}", &e, &err), 0);
	ck_assert_msg(store_check(st, no_problem, NULL, &err) == 0, "%s", err.msg);
}
END_TEST

static void count_problem(void *ctx, const char *p)
{
	(*(int *)ctx)++;
}

START_TEST(test_store_check_finds_wrong_size)
{
	struct dfs_err err = {0};
	struct store_entry e;
	int64_t c = make_coll("users");
	char cmd[512];
	int n = 0;

	ck_assert_int_eq(write_doc(c, "a.json", "{}", &e, &err), 0);
	store_free(st);
	st = NULL;
	snprintf(cmd, sizeof(cmd), "sqlite3 %s/shop.db 'UPDATE docs SET size = size + 1'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_check(st, count_problem, &n, &err), DFS_ECORRUPT);
	ck_assert_int_eq(n, 1);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_db_get_numbers_are_stable);
	tcase_add_test(tc, test_store_db_name_check_rejects_bad_names);
	tcase_add_test(tc, test_store_db_drop_refuses_non_empty);
	tcase_add_test(tc, test_store_coll_create_duplicate_fails);
	tcase_add_test(tc, test_store_doc_write_text_takes_id_from_name);
	tcase_add_test(tc, test_store_doc_write_text_rejects_other_id);
	tcase_add_test(tc, test_store_doc_write_text_invalid_changes_nothing);
	tcase_add_test(tc, test_store_doc_insert_duplicate_is_eexist);
	tcase_add_test(tc, test_store_doc_prepare_puts_id_first);
	tcase_add_test(tc, test_store_doc_prepare_oids_differ_after_fork);
	tcase_add_test(tc, test_store_entry_rename_doc_changes_id);
	tcase_add_test(tc, test_store_entry_rename_scratch_over_doc_keeps_id);
	tcase_add_test(tc, test_store_entry_rename_invalid_scratch_changes_nothing);
	tcase_add_test(tc, test_store_entry_rename_doc_away_and_back_keeps_id);
	tcase_add_test(tc, test_store_entry_rename_doc_away_and_back_in_one_txn_keeps_id);
	tcase_add_test(tc, test_store_entry_list_resumes_from_cookie);
	tcase_add_test(tc, test_store_changes_since_sees_writes);
	tcase_add_test(tc, test_store_check_passes_on_sound_store);
	tcase_add_test(tc, test_store_check_finds_wrong_size);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(store_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
