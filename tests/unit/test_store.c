/*
 * test_store.c - unit tests of the SQLite-paged store (db.c, doc.c, check.c): databases,
 * collections, documents and scratch files, the rename rules, listing cookies, the runs
 * behind listings (doc.c note 5), the change feed and the checker. Each test uses its own temporary
 * store directory.
 */
#include "store.h"
#include "test_problems.h"

#include <check.h>
#include <sqlite3.h>
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

/* A stop hook that says stop once it has been asked `after` times. */
static int stop_asked, stop_after, stop_code;

static int stop_hook(void *ctx, struct dfs_err *err)
{
	(void)ctx;
	if (++stop_asked <= stop_after)
		return 0;
	return dfs_err_set(err, stop_code, stop_code == DFS_EINTR ? "killed" : "too slow");
}

START_TEST(test_store_thread_stop_interrupts_and_never_commits)
{
	struct dfs_err err = {0};
	struct store_entry e;
	struct store_txn *t;
	int64_t coll = make_coll("c"), n = 0, nf = 0;
	char name[32], text[300];

	ck_assert_int_eq(write_doc(coll, "1.json", "{\"_id\": 1}", &e, &err), 0);
	/* a write that is stopped before its commit keeps nothing */
	stop_asked = 0;
	stop_after = 1 << 30;
	stop_code = DFS_ETIMEDOUT;
	store_thread_stop_set(stop_hook, NULL);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	for (int i = 2; i < 200; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"_id\": %d, \"x\": \"%0200d\"}", i, i);
		ck_assert_int_eq(store_doc_write_text(t, coll, name, text, strlen(text), &attrs,
						      &e, &err), 0);
	}
	stop_after = 0; /* the time runs out here */
	ck_assert_int_eq(store_txn_commit(t, &err), DFS_ETIMEDOUT);
	ck_assert_str_eq(err.msg, "too slow");
	store_thread_stop_set(NULL, NULL);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_coll_count(t, coll, &n, &nf, &err), 0);
	store_txn_abort(t);
	ck_assert_int_eq(n, 1);
	/* SQLite's progress handler stops a statement with the hook's code and message */
	dfs_err_clear(&err);
	stop_asked = 0;
	stop_after = 0;
	stop_code = DFS_EINTR;
	store_thread_stop_set(stop_hook, NULL);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	for (int i = 2; i < 400 && !err.code; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"_id\": %d}", i);
		store_doc_write_text(t, coll, name, text, strlen(text), &attrs, &e, &err);
	}
	ck_assert_int_eq(err.code, DFS_EINTR);
	ck_assert_str_eq(err.msg, "killed");
	store_txn_abort(t);
	ck_assert_int_eq(store_thread_stopped(NULL), DFS_EINTR);
	store_thread_stop_set(NULL, NULL);
	ck_assert_int_eq(store_thread_stopped(NULL), 0);
	/* and the store goes on as before */
	ck_assert_int_eq(write_doc(coll, "2.json", "{\"_id\": 2}", &e, &err), 0);
}
END_TEST

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

/* Descriptors of this process open on unlinked files of the test's store. */
static int deleted_files_open(void)
{
	char path[64], target[512];
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (strncmp(target, tmpdir, strlen(tmpdir)) == 0 && strstr(target, " (deleted)"))
			n++;
	}
	return n;
}

/* Another handle on the store (another process: a second mount) drops a database and
 * creates one of the same name. This handle's connections still have the old, unlinked file
 * open: a write through them would be acknowledged and lost, and reads would never see the
 * new database (db.c note 7). */
START_TEST(test_store_db_dropped_by_another_handle)
{
	struct dfs_err err = {0};
	struct store *st2, *st3;
	struct store_db *x1, *x2, *x3, *y1, *y2;
	struct store_txn *t;
	struct store_coll c;

	ck_assert_int_eq(store_db_get(st, "x", true, &x1, &err), 0);
	ck_assert_int_eq(store_db_get(st, "y", true, &y1, &err), 0);
	ck_assert_int_eq(store_open(tmpdir, false, &st2, &err), 0);
	ck_assert_int_eq(store_db_get(st2, "x", false, &x2, &err), 0);
	ck_assert_int_eq(store_db_get(st2, "y", false, &y2, &err), 0);
	ck_assert_int_eq(store_txn_begin(x2, false, &t, &err), 0); /* its connection is open */
	store_txn_abort(t);
	ck_assert(!store_db_gone(x2));
	ck_assert_int_eq(store_open(tmpdir, false, &st3, &err), 0);
	ck_assert_int_eq(store_db_get(st3, "x", false, &x3, &err), 0);

	ck_assert_int_eq(store_db_drop(st, "x", &err), 0);
	ck_assert_int_eq(store_db_get(st, "x", true, &x1, &err), 0);
	ck_assert_int_eq(store_txn_begin(x1, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_create(t, "c", 0755, 0, 0, &c, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);

	/* Getting the name again opens the new database. */
	{
		struct store_db *x3new;

		ck_assert_int_eq(store_db_get(st3, "x", false, &x3new, &err), 0);
		ck_assert_ptr_ne(x3new, x3);
		ck_assert_int_eq(store_txn_begin(x3new, false, &t, &err), 0);
		ck_assert_int_eq(store_coll_find(t, "c", &c, &err), 0);
		store_txn_abort(t);
		store_free(st3);
	}
	/* The write through the old file is refused, not lost. */
	dfs_err_clear(&err);
	ck_assert_int_eq(store_txn_begin(x2, true, &t, &err), DFS_ENOENT);
	ck_assert_msg(strstr(err.msg, "dropped by another process"), "%s", err.msg);
	ck_assert(store_db_gone(x2));
	dfs_err_clear(&err);
	ck_assert_int_eq(store_txn_begin(x2, false, &t, &err), DFS_ENOENT);
	/* The name now opens the new database, which has the new collection and takes
	 * writes that the first handle sees. */
	ck_assert_int_eq(store_db_get(st2, "x", false, &x2, &err), 0);
	ck_assert(!store_db_gone(x2));
	ck_assert_int_eq(store_txn_begin(x2, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_find(t, "c", &c, &err), 0);
	ck_assert_int_eq(store_coll_create(t, "d", 0755, 0, 0, &c, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(store_txn_begin(x1, false, &t, &err), 0);
	ck_assert_int_eq(store_coll_find(t, "d", &c, &err), 0);
	store_txn_abort(t);

	/* Dropped and not created again: gone, and the name is not found. */
	ck_assert_int_eq(store_db_drop(st, "y", &err), 0);
	ck_assert(store_db_gone(y2));
	dfs_err_clear(&err);
	ck_assert_int_eq(store_db_get(st2, "y", false, &y2, &err), DFS_ENOENT);
	/* No handle keeps a dropped file open: its space is freed now, not at store_free. */
	ck_assert_int_eq(deleted_files_open(), 0);
	store_free(st2);
}
END_TEST

/* The same, while this handle's only connection is busy: the next transaction opens a new
 * connection, by path, which finds the new file; it must not join the old database's pool
 * (db.c note 7). A drop that comes while a database is opened reads as not found. */
START_TEST(test_store_db_new_connection_after_drop)
{
	struct dfs_err err = {0};
	struct store *st2;
	struct store_db *x1, *x2;
	struct store_txn *held, *t;
	struct store_coll c;

	ck_assert_int_eq(store_db_get(st, "x", true, &x1, &err), 0);
	ck_assert_int_eq(store_open(tmpdir, false, &st2, &err), 0);
	ck_assert_int_eq(store_db_get(st2, "x", false, &x2, &err), 0);
	ck_assert_int_eq(store_txn_begin(x2, false, &held, &err), 0); /* its only connection */
	ck_assert_int_eq(store_db_drop(st, "x", &err), 0);
	ck_assert_int_eq(store_db_get(st, "x", true, &x1, &err), 0);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_txn_begin(x2, false, &t, &err), DFS_ENOENT);
	ck_assert_msg(strstr(err.msg, "dropped by another process"), "%s", err.msg);
	store_txn_abort(held);
	ck_assert_int_eq(store_db_get(st2, "x", false, &x2, &err), 0);
	ck_assert_int_eq(store_txn_begin(x2, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_create(t, "c", 0755, 0, 0, &c, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(store_txn_begin(x1, false, &t, &err), 0);
	ck_assert_int_eq(store_coll_find(t, "c", &c, &err), 0);
	store_txn_abort(t);
	ck_assert_int_eq(deleted_files_open(), 0);
	store_free(st2);
}
END_TEST

/* Dropping a database by its handle drops that file only: not a database of the same name
 * another process made since (a failed restore drops the database it made this way). */
START_TEST(test_store_db_drop_db_spares_a_new_one)
{
	struct dfs_err err = {0};
	struct store *st2;
	struct store_db *old, *x2;

	ck_assert_int_eq(store_db_get(st, "x", true, &old, &err), 0);
	ck_assert_int_eq(store_open(tmpdir, false, &st2, &err), 0);
	ck_assert_int_eq(store_db_drop(st2, "x", &err), 0);
	ck_assert_int_eq(store_db_get(st2, "x", true, &x2, &err), 0);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_db_drop_db(old, &err), DFS_ENOENT);
	ck_assert(!store_db_gone(x2));
	store_free(st2);
	ck_assert_int_eq(store_open(tmpdir, false, &st2, &err), 0);
	ck_assert_int_eq(store_db_get(st2, "x", false, &x2, &err), 0);
	ck_assert_int_eq(store_db_drop_db(x2, &err), 0);
	ck_assert(store_db_gone(x2));
	store_free(st2);
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
	ck_assert_int_eq(write_doc(c, "a.json", "{\"_id\": {\"$x\": 1}}", &e2, &err), DFS_EINVAL);
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
	ck_assert_int_eq(store_file_create(t, c, "sedX1", STORE_KIND_FILE, &attrs, tmp, strlen(tmp),
					   &f, &err),
			 0);
	ck_assert_msg(store_entry_rename(t, f.id, c, "a.json", &out, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(out.id, d.id);
	ck_assert_ptr_null(read_entry("sedX1", c, &f));
	text = read_entry("a.json", c, &d);
	ck_assert_ptr_nonnull(strstr(text, "\"v\": 2"));
	ck_assert_int_eq(d.id, out.id);
	free(text);
	/* The document takes the mtime of the file moved over it (rsync -a sets it first). */
	{
		const struct store_attrs old = {0644, 1000, 1000, 1600000000123456789LL};

		ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
		ck_assert_int_eq(store_file_create(t, c, ".a.json.Xy12", STORE_KIND_FILE, &old, tmp,
						   strlen(tmp), &f, &err),
				 0);
		ck_assert_int_eq(store_entry_rename(t, f.id, c, "a.json", &out, &err), 0);
		ck_assert_int_eq(store_txn_commit(t, &err), 0);
		ck_assert_int_eq(out.id, d.id);
		ck_assert_int_eq(out.mtime_ns, old.mtime_ns);
		text = read_entry("a.json", c, &d);
		ck_assert_int_eq(d.mtime_ns, old.mtime_ns);
		ck_assert_int_gt(d.ctime_ns, old.mtime_ns);
		free(text);
	}
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
	ck_assert_int_eq(
		store_file_create(t, c, "t", STORE_KIND_FILE, &attrs, "{oops", 5, &f, &err), 0);
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
	ck_assert_msg(store_doc_write_text(t, c, "a.json", b, strlen(b), &attrs, &again, &err) == 0,
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

/* ---- runs (doc.c note 5) ----------------------------------------------------------- */

#define MAX_IDS 2048

struct idlist {
	int64_t ids[MAX_IDS];
	int n;
	int64_t coll;	/* every listed document must be of this collection */
	uint64_t last;	/* cookie after the last entry */
	int stop_after; /* stop the listing after this many entries (0: never) */
	int in_call;	/* entries in the current call */
};

static int collect_docs(void *ctx, const struct store_entry *e, uint64_t next)
{
	struct idlist *l = ctx;

	l->last = next;
	if (e->kind != STORE_KIND_DOC)
		return 0;
	ck_assert_int_eq(e->coll, l->coll);
	ck_assert_int_lt(l->n, MAX_IDS);
	l->ids[l->n++] = e->id;
	return ++l->in_call == l->stop_after ? 1 : 0;
}

/* Lists the documents of coll in t, page by page (page entries per call, 0: one call). */
static void list_in(struct store_txn *t, int64_t coll, int page, struct idlist *l)
{
	struct dfs_err err = {0};
	int rc;

	memset(l, 0, sizeof(*l));
	l->coll = coll;
	l->stop_after = page;
	do {
		l->in_call = 0;
		rc = store_entry_list(t, coll, l->last, collect_docs, l, &err);
		ck_assert_msg(rc == 0 || rc == 1, "%s", err.msg);
	} while (rc == 1);
}

/* The ids of coll's documents as the collection cursor reads them, into l. */
static void scan_in(struct store_txn *t, int64_t coll, struct idlist *l)
{
	struct dfs_err err = {0};
	struct store_cursor *cur;
	bson_t doc;
	int64_t id;
	int rc;

	memset(l, 0, sizeof(*l));
	ck_assert_int_eq(store_cursor_open(t, coll, &cur, &err), 0);
	while ((rc = store_cursor_next(cur, &doc, &id, &err)) == 0) {
		ck_assert_int_lt(l->n, MAX_IDS);
		l->ids[l->n++] = id;
	}
	ck_assert_int_eq(rc, DFS_ENOENT);
	store_cursor_free(cur);
}

static int cmp_id(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* Listing (in pages of 7 and whole) and cursor of coll give exactly ids (any order) in
 * ascending id order. t: the transaction to read in (NULL: a read transaction of its own). */
static void expect_ids(struct store_txn *t, int64_t coll, const int64_t *ids, int n)
{
	struct dfs_err err = {0};
	struct store_txn *own = NULL;
	static struct idlist l;
	int64_t want[MAX_IDS];

	ck_assert_int_le(n, MAX_IDS);
	memcpy(want, ids, (size_t)n * sizeof(*ids));
	qsort(want, (size_t)n, sizeof(*want), cmp_id);
	if (!t) {
		ck_assert_int_eq(store_txn_begin(db, false, &own, &err), 0);
		t = own;
	}
	for (int pass = 0; pass < 3; pass++) {
		if (pass == 2)
			scan_in(t, coll, &l);
		else
			list_in(t, coll, pass == 0 ? 7 : 0, &l);
		ck_assert_int_eq(l.n, n);
		for (int i = 0; i < n; i++)
			ck_assert_int_eq(l.ids[i], want[i]);
	}
	store_txn_abort(own);
}

/* Inserts "<name>.json" ({}) into coll in t; returns its id. */
static int64_t insert_in(struct store_txn *t, int64_t coll, const char *name)
{
	struct dfs_err err = {0};
	struct store_entry e;
	char file[64];

	snprintf(file, sizeof(file), "%s.json", name);
	ck_assert_msg(store_doc_write_text(t, coll, file, "{}", 2, &attrs, &e, &err) == 0, "%s",
		      err.msg);
	return e.id;
}

static int64_t insert_one(int64_t coll, const char *name)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	int64_t id;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	id = insert_in(t, coll, name);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	return id;
}

static int64_t rename_one(int64_t coll, const char *from, int64_t newcoll, const char *to)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_lookup(t, coll, from, &e, &err), 0);
	ck_assert_msg(store_entry_rename(t, e.id, newcoll, to, &e, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	return e.id;
}

/* One integer from the database file of "shop" (or -1). */
static int64_t sql_int(const char *q)
{
	char path[400];
	sqlite3 *h;
	sqlite3_stmt *s;
	int64_t v = -1;

	snprintf(path, sizeof(path), "%s/shop.db", tmpdir);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	sqlite3_busy_timeout(h, 5000);
	ck_assert_msg(sqlite3_prepare_v2(h, q, -1, &s, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(h));
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(h);
	return v;
}

static void check_clean(void)
{
	struct dfs_err err = {0};

	ck_assert_msg(store_check(st, no_problem, NULL, &err) == 0, "%s", err.msg);
}

START_TEST(test_store_entry_list_interleaved_colls_each_complete)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	int64_t a = make_coll("a"), b = make_coll("b");
	static int64_t ia[MAX_IDS], ib[MAX_IDS];
	int na = 0, nb = 0;
	char name[32];

	/* One transaction alternating, read back before and after its commit. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "%d", i);
		if (i % 3 == 0)
			ib[nb++] = insert_in(t, b, name);
		else
			ia[na++] = insert_in(t, a, name);
		if (i == 100)
			ck_assert_int_eq(store_file_create(t, a, "notes.txt", STORE_KIND_FILE,
							   &attrs, "x", 1, NULL, &err),
					 0);
	}
	expect_ids(t, a, ia, na);
	expect_ids(t, b, ib, nb);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	expect_ids(NULL, a, ia, na);
	expect_ids(NULL, b, ib, nb);
	/* One transaction per document, alternating. */
	for (int i = 300; i < 340; i++) {
		snprintf(name, sizeof(name), "%d", i);
		if (i % 2)
			ib[nb++] = insert_one(b, name);
		else
			ia[na++] = insert_one(a, name);
	}
	expect_ids(NULL, a, ia, na);
	expect_ids(NULL, b, ib, nb);
	/* Runs stay far fewer than documents where a collection's ids come in stretches. */
	ck_assert_int_lt(sql_int("SELECT count(*) FROM runs"), na + nb);
	check_clean();
}
END_TEST

START_TEST(test_store_entry_rename_across_colls_lists_both)
{
	int64_t a = make_coll("a"), b = make_coll("b");
	int64_t x1 = insert_one(a, "x1"), x2 = insert_one(a, "x2");
	int64_t y1 = insert_one(b, "y1"), y2 = insert_one(b, "y2"), y3 = insert_one(b, "y3");

	/* Into b below b's ids, keeping its id. */
	ck_assert_int_eq(rename_one(a, "x1.json", b, "m.json"), x1);
	expect_ids(NULL, a, (int64_t[]){x2}, 1);
	expect_ids(NULL, b, (int64_t[]){x1, y1, y2, y3}, 4);
	/* Into a above a's ids, past documents of b. */
	ck_assert_int_eq(rename_one(b, "y2.json", a, "n.json"), y2);
	expect_ids(NULL, a, (int64_t[]){x2, y2}, 2);
	expect_ids(NULL, b, (int64_t[]){x1, y1, y3}, 3);
	/* And back. */
	ck_assert_int_eq(rename_one(a, "n.json", b, "y2.json"), y2);
	expect_ids(NULL, a, (int64_t[]){x2}, 1);
	expect_ids(NULL, b, (int64_t[]){x1, y1, y2, y3}, 4);
	check_clean();
}
END_TEST

START_TEST(test_store_coll_drop_removes_runs)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	int64_t a = make_coll("a"), b = make_coll("b"), ids[2];
	char q[128];

	insert_one(a, "1");
	ids[0] = insert_one(b, "1");
	insert_one(a, "2");
	snprintf(q, sizeof(q), "SELECT count(*) FROM runs WHERE coll = %lld", (long long)a);
	ck_assert_int_eq(sql_int(q), 2);
	/* Emptied: its runs go with its documents, new ones get new runs. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	insert_in(t, a, "3");
	ck_assert_int_eq(store_coll_empty(t, a, &err), 0);
	ids[1] = insert_in(t, a, "4");
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	expect_ids(NULL, a, &ids[1], 1);
	ck_assert_int_eq(sql_int(q), 1);
	/* Dropped in the transaction that wrote to it: no run is left behind. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	insert_in(t, a, "5");
	ck_assert_int_eq(store_coll_drop(t, a, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(sql_int(q), 0);
	expect_ids(NULL, b, ids, 1);
	check_clean();
}
END_TEST

START_TEST(test_store_entry_rename_vacated_and_lent_ids_listed)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;
	int64_t a = make_coll("a"), b = make_coll("b");
	int64_t v = insert_one(a, "v"), s, w, y;

	/* A scratch file of a, then documents of b, then more of a: a has two runs. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(
		store_file_create(t, a, "s.tmp", STORE_KIND_FILE, &attrs, "{}", 2, &e, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	s = e.id;
	y = insert_one(b, "y");
	w = insert_one(a, "w");
	/* An editor moves v.json away and writes it again: it takes its id back. */
	rename_one(a, "v.json", a, "v.json~");
	ck_assert_int_eq(write_doc(a, "v.json", "{\"n\": 2}", &e, &err), 0);
	ck_assert_int_eq(e.id, v);
	/* The scratch file becomes a document with its own id, between a's runs. */
	ck_assert_int_eq(rename_one(a, "s.tmp", a, "s.json"), s);
	expect_ids(NULL, a, (int64_t[]){v, s, w}, 3);
	expect_ids(NULL, b, &y, 1);
	check_clean();
}
END_TEST

START_TEST(test_store_index_create_failed_keeps_runs_of_txn)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;
	int64_t a = make_coll("a"), b = make_coll("b"), ids[3];
	bson_t spec;

	insert_one(b, "1");
	ids[0] = insert_one(a, "0");
	/* The index build reads a's runs inside its savepoint and fails: the rollback to the
	 * savepoint must not lose the run written for the reading. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_doc_write_text(t, a, "1.json", "{\"n\": 1}", 8, &attrs, &e, &err),
			 0);
	ids[1] = e.id;
	insert_in(t, b, "2");
	ck_assert_int_eq(store_doc_write_text(t, a, "2.json", "{\"n\": 1}", 8, &attrs, &e, &err),
			 0);
	ids[2] = e.id;
	bson_init(&spec);
	{
		bson_t key;

		BSON_APPEND_DOCUMENT_BEGIN(&spec, "key", &key);
		BSON_APPEND_INT32(&key, "n", 1);
		bson_append_document_end(&spec, &key);
	}
	BSON_APPEND_BOOL(&spec, "unique", true);
	ck_assert_int_eq(store_index_create(t, a, &spec, NULL, 0, NULL, NULL, &err), DFS_EEXIST);
	bson_destroy(&spec);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	expect_ids(NULL, a, ids, 3);
	check_clean();
}
END_TEST

START_TEST(test_store_check_finds_doc_outside_runs)
{
	struct dfs_err err = {0};
	int64_t a = make_coll("a"), b = make_coll("b");
	char cmd[512];
	struct problems lp = {0};

	insert_one(a, "1");
	insert_one(b, "1");
	insert_one(a, "2");
	store_free(st);
	st = NULL;
	/* The run of a's second document goes; then two runs of b overlap. */
	snprintf(cmd, sizeof(cmd),
		 "sqlite3 %s/shop.db 'DELETE FROM runs WHERE coll = %lld AND lo = (SELECT max(lo)"
		 " FROM runs WHERE coll = %lld)'",
		 tmpdir, (long long)a, (long long)a);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_check(st, on_problem, &lp, &err), DFS_ECORRUPT);
	ck_assert_int_eq(lp.n, 1);
	ck_assert_msg(strstr(lp.last, "'2.json' of collection") &&
			      strstr(lp.last, "'a' is in no run"),
		      "%s", lp.last);
	snprintf(cmd, sizeof(cmd),
		 "sqlite3 %s/shop.db 'INSERT INTO runs VALUES(%lld, 0, 1000); INSERT INTO runs"
		 " SELECT %lld, max(id), max(id) FROM docs WHERE coll = %lld'",
		 tmpdir, (long long)b, (long long)a, (long long)a);
	ck_assert_int_eq(system(cmd), 0);
	lp.n = 0;
	ck_assert_int_eq(store_check(st, on_problem, &lp, &err), DFS_ECORRUPT);
	ck_assert_int_eq(lp.n, 1);
	ck_assert_msg(strstr(lp.last, "overlap"), "%s", lp.last);
}
END_TEST

/* The schema of version 3, as db.c created it (docs_coll, no runs). */
static const char *const v3_schema =
	"CREATE TABLE meta(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
	"CREATE TABLE colls(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
	" options BLOB, ctime INTEGER, mtime INTEGER, mode INTEGER, uid INTEGER, gid INTEGER,"
	" ixver INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE indexes(coll INTEGER, name TEXT, spec BLOB, ixid INTEGER,"
	" multikey INTEGER NOT NULL DEFAULT 0, created INTEGER, build_ms INTEGER,"
	" PRIMARY KEY(coll, name)) WITHOUT ROWID;"
	"CREATE TABLE ikeys(ix INTEGER, key BLOB, id INTEGER, vals BLOB,"
	" PRIMARY KEY(ix, key, id)) WITHOUT ROWID;"
	"CREATE TABLE docs(id INTEGER PRIMARY KEY, coll INTEGER NOT NULL,"
	" key BLOB NOT NULL, name TEXT, size INTEGER, mode INTEGER, uid INTEGER, gid INTEGER,"
	" mtime INTEGER, ctime INTEGER, bson BLOB NOT NULL);"
	"CREATE UNIQUE INDEX docs_key ON docs(coll, key);"
	"CREATE INDEX docs_coll ON docs(coll);"
	"CREATE TABLE files(id INTEGER PRIMARY KEY, coll INTEGER NOT NULL,"
	" name TEXT NOT NULL, kind INTEGER, mode INTEGER, uid INTEGER, gid INTEGER,"
	" mtime INTEGER, ctime INTEGER, data BLOB, UNIQUE(coll, name));"
	"CREATE TABLE vacated(coll INTEGER, key BLOB, id INTEGER, time INTEGER,"
	" PRIMARY KEY(coll, key)) WITHOUT ROWID;"
	"CREATE TABLE changes(seq INTEGER PRIMARY KEY, coll INTEGER, op INTEGER,"
	" id INTEGER, name TEXT);"
	"INSERT INTO meta VALUES('dbnum', 9), ('next_id', 20), ('ctime', 1);"
	"INSERT INTO colls(id, name, ctime, mtime, mode, uid, gid) VALUES(1, 'a', 1, 1, 493, 0, 0),"
	" (2, 'b', 1, 1, 493, 0, 0);"
	"PRAGMA user_version = 3;";

/* Inserts document {"_id": n} as row id of coll, the way version 3 stored it. */
static void v3_doc(sqlite3 *h, int64_t id, int64_t coll, int n)
{
	struct dfs_err err = {0};
	struct dfs_buf key, name;
	sqlite3_stmt *s;
	bson_iter_t it;
	bson_t doc;
	int64_t size;

	bson_init(&doc);
	BSON_APPEND_INT32(&doc, "_id", n);
	dfs_buf_init(&key);
	dfs_buf_init(&name);
	ck_assert(bson_iter_init_find(&it, &doc, "_id"));
	ck_assert_int_eq(store_key_append(&key, bson_iter_value(&it), false, &err), 0);
	ck_assert_int_eq(store_doc_rendered_len(&doc, &name, &size, &err), 0);
	dfs_buf_reset(&name);
	ck_assert_int_eq(store_name_from_id(bson_iter_value(&it), &name, &err), 0);
	dfs_buf_puts(&name, ".json");
	ck_assert_int_eq(sqlite3_prepare_v2(h,
					    "INSERT INTO docs VALUES(?1, ?2, ?3, ?4, ?5, 420, 0, 0,"
					    " 1, 1, ?6)",
					    -1, &s, NULL),
			 SQLITE_OK);
	sqlite3_bind_int64(s, 1, id);
	sqlite3_bind_int64(s, 2, coll);
	sqlite3_bind_blob(s, 3, key.data, (int)key.len, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, name.data, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 5, size);
	sqlite3_bind_blob(s, 6, bson_get_data(&doc), (int)doc.len, SQLITE_STATIC);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	dfs_buf_release(&key);
	dfs_buf_release(&name);
	bson_destroy(&doc);
}

START_TEST(test_store_db_get_migrates_schema_3)
{
	struct dfs_err err = {0};
	struct store_db *old, *keep = db;
	char path[400];
	sqlite3 *h;

	snprintf(path, sizeof(path), "%s/old.db", tmpdir);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(h, v3_schema, NULL, NULL, NULL), SQLITE_OK);
	/* Interleaved ids, as two collections written in turn leave them. */
	v3_doc(h, 3, 1, 1);
	v3_doc(h, 4, 2, 1);
	v3_doc(h, 5, 1, 2);
	v3_doc(h, 6, 2, 2);
	v3_doc(h, 9, 1, 3);
	sqlite3_close(h);
	/* check reads a version-3 database as it is (it migrates only when opened) */
	check_clean();
	ck_assert_msg(store_db_get(st, "old", false, &old, &err) == 0, "%s", err.msg);
	db = old;
	expect_ids(NULL, 1, (int64_t[]){3, 5, 9}, 3);
	expect_ids(NULL, 2, (int64_t[]){4, 6}, 2);
	/* New documents after the migration list after the old ones. */
	ck_assert_int_ge(insert_one(1, "x"), 20);
	ck_assert_int_eq(insert_one(2, "4"), 21);
	expect_ids(NULL, 2, (int64_t[]){4, 6, 21}, 3);
	db = keep;
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	{
		sqlite3_stmt *s;

		ck_assert_int_eq(sqlite3_prepare_v2(h,
						    "SELECT (SELECT count(*) FROM sqlite_master"
						    " WHERE name = 'docs_coll'), (SELECT count(*)"
						    " FROM runs), (SELECT lo || '-' || hi FROM runs"
						    " WHERE coll = 1 ORDER BY lo LIMIT 1)",
						    -1, &s, NULL),
				 SQLITE_OK);
		ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
		ck_assert_int_eq(sqlite3_column_int(s, 0), 0);
		/* One run per collection, a grew over the gap after 9 (no document of b in
		 * it), b's new document is past a's: a run of its own. */
		ck_assert_int_eq(sqlite3_column_int(s, 1), 3);
		ck_assert_str_eq((const char *)sqlite3_column_text(s, 2), "3-20");
		sqlite3_finalize(s);
	}
	sqlite3_close(h);
	check_clean();
}
END_TEST

START_TEST(test_store_cred_allows_the_kernels_classes)
{
	struct store_cred nobody = {65534, 65534, 0, {0}}, member = {1, 1, 1, {4242}};
	struct store_cred root = {0, 0, 0, {0}};

	/* owner bits for the owner, even when others may do more */
	ck_assert(store_cred_allows(&nobody, STORE_MAY_READ, 0600, 65534, 0));
	ck_assert(!store_cred_allows(&nobody, STORE_MAY_READ, 0044, 65534, 0));
	/* group bits for a supplementary group's member */
	ck_assert(store_cred_allows(&member, STORE_MAY_READ, 0640, 0, 4242));
	ck_assert(!store_cred_allows(&member, STORE_MAY_WRITE, 0640, 0, 4242));
	ck_assert(!store_cred_allows(&nobody, STORE_MAY_READ, 0640, 0, 4242));
	/* other bits, both needs at once */
	ck_assert(store_cred_allows(&nobody, STORE_MAY_READ, 0644, 0, 0));
	ck_assert(!store_cred_allows(&nobody, STORE_MAY_READ | STORE_MAY_WRITE, 0644, 0, 0));
	ck_assert(store_cred_allows(&nobody, STORE_MAY_READ | STORE_MAY_WRITE, 0666, 0, 0));
	ck_assert(store_cred_allows(&root, STORE_MAY_READ | STORE_MAY_WRITE, 0, 5, 5));
}
END_TEST

/* A transaction begun while a caller is set sees only what it may read: the cursor says
 * which, and the counts of what it may not see come from the private documents only. */
START_TEST(test_store_txn_cred_hides_private_documents)
{
	static const struct store_attrs priv = {0600, 1000, 1000, 0};
	struct store_cred nobody = {65534, 65534, 0, {0}}, owner = {1000, 1000, 0, {0}};
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_cursor *cur;
	bson_t doc, v;
	int64_t c = make_coll("users"), id, hidden, n;
	bool all;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	for (int i = 0; i < 4; i++) {
		bson_init(&doc);
		BSON_APPEND_INT32(&doc, "_id", i);
		ck_assert_int_eq(store_doc_insert(t, c, &doc, i == 2 ? &priv : &attrs, NULL, &err),
				 0);
		bson_destroy(&doc);
	}
	ck_assert_int_eq(store_txn_commit(t, &err), 0);

	store_thread_cred_set(&nobody, STORE_MAY_READ);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	store_thread_cred_set(NULL, 0); /* the transaction keeps what was set when it began */
	ck_assert_int_eq(store_txn_sees_all(t, c, &all, &err), 0);
	ck_assert(!all);
	ck_assert_int_eq(store_coll_hidden_count(t, c, &hidden, &err), 0);
	ck_assert_int_eq(hidden, 1);
	ck_assert_int_eq(store_cursor_open(t, c, &cur, &err), 0);
	n = 0;
	while (store_cursor_next(cur, &v, &id, &err) == 0)
		n += store_cursor_allowed(cur);
	ck_assert_int_eq(n, 3);
	store_cursor_free(cur);
	store_txn_abort(t);

	store_thread_cred_set(&owner, STORE_MAY_READ);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_coll_hidden_count(t, c, &hidden, &err), 0);
	ck_assert_int_eq(hidden, 0);
	store_txn_abort(t);
	/* a writer may be refused what it may read: 0644 documents of uid 1000 are not
	 * nobody's to change */
	store_thread_cred_set(&nobody, STORE_MAY_READ | STORE_MAY_WRITE);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	store_thread_cred_set(NULL, 0);
	ck_assert_int_eq(store_coll_hidden_count(t, c, &hidden, &err), 0);
	ck_assert_int_eq(hidden, 4);
	store_txn_abort(t);
	/* no caller: everything */
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_txn_sees_all(t, c, &all, &err), 0);
	ck_assert(all);
	store_txn_abort(t);
}
END_TEST

/* issue 28: atime is kept apart from mtime (set only by store_entry_set_atime, never moved
 * by other attributes or a write); a collection's chtime follows its changes. */
START_TEST(test_store_entry_set_atime_keeps_it_apart)
{
	struct dfs_err err = {0};
	struct store_entry e, f;
	struct store_coll c0, c1;
	struct store_txn *t;
	struct store_attrs mode = {0600, 0, 0, 0};
	int64_t c = make_coll("times");

	ck_assert_msg(write_doc(c, "a.json", "{}", &e, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(e.atime_ns, e.mtime_ns);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_by_id(t, c, &c0, &err), 0);
	ck_assert_int_eq(
		store_file_create(t, c, "s.txt", STORE_KIND_FILE, &attrs, "x", 1, &f, &err), 0);
	ck_assert_int_eq(f.atime_ns, f.mtime_ns);
	ck_assert_int_eq(store_entry_set_atime(t, e.id, 123456789, &err), 0);
	ck_assert_int_eq(store_entry_set_atime(t, f.id, 987654321, &err), 0);
	ck_assert_int_eq(store_entry_setattr(t, e.id, STORE_SET_MODE, &mode, &err), 0);
	ck_assert_int_eq(store_file_write(t, f.id, "yz", 2, &err), 0);
	ck_assert_int_eq(store_coll_touch(t, c, 5, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_entry_get(t, e.id, &e, &err), 0);
	ck_assert_int_eq(e.atime_ns, 123456789);
	ck_assert_uint_eq(e.mode, 0600);
	ck_assert_int_gt(e.mtime_ns, 123456789);
	ck_assert_int_eq(store_entry_lookup(t, c, "s.txt", &f, &err), 0);
	ck_assert_int_eq(f.atime_ns, 987654321);
	ck_assert_int_eq(f.size, 2);
	ck_assert_int_gt(f.ctime_ns, 987654321);
	ck_assert_int_eq(store_coll_by_id(t, c, &c1, &err), 0);
	store_txn_abort(t);
	ck_assert_int_eq(c1.mtime_ns, 5);	      /* as set (utimensat) */
	ck_assert_int_gt(c1.chtime_ns, c0.chtime_ns); /* the change itself: now */
	ck_assert_int_eq(c1.ctime_ns, c0.ctime_ns);   /* the creation stays */
}
END_TEST

/* A version-5 database (before atime and chtime) is sound to docfs check as it is, and
 * opening it adds the columns; what it held reads as before (atime: the mtime). */
START_TEST(test_store_check_and_migrate_schema_5)
{
	struct dfs_err err = {0};
	struct store_entry e, got;
	struct store_txn *t;
	int64_t c = make_coll("old5");
	char path[400], *msg = NULL;
	sqlite3 *h;

	ck_assert_msg(write_doc(c, "a.json", "{}", &e, &err) == 0, "%s", err.msg);
	store_free(st);
	snprintf(path, sizeof(path), "%s/shop.db", tmpdir);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(h,
				   "ALTER TABLE docs DROP COLUMN atime;"
				   "ALTER TABLE files DROP COLUMN atime;"
				   "ALTER TABLE colls DROP COLUMN chtime; PRAGMA user_version = 5",
				   NULL, NULL, &msg) == SQLITE_OK,
		      "%s", msg);
	sqlite3_close(h);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	check_clean();
	ck_assert_msg(store_db_get(st, "shop", false, &db, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_entry_lookup(t, c, "a.json", &got, &err), 0);
	store_txn_abort(t);
	ck_assert_int_eq(got.id, e.id);
	ck_assert_int_eq(got.atime_ns, got.mtime_ns);
	check_clean();
}
END_TEST

/* A version-7 database of main's kind (no files.ino) is sound to docfs check, and opening
 * it adds the column: hard links work there. */
START_TEST(test_store_check_and_migrate_schema_7_without_ino)
{
	struct dfs_err err = {0};
	struct store_entry f, l;
	struct store_txn *t;
	int64_t c = make_coll("old7");
	char path[400], *msg = NULL;
	sqlite3 *h;

	store_free(st);
	snprintf(path, sizeof(path), "%s/shop.db", tmpdir);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(h,
				   "DROP INDEX files_ino; ALTER TABLE files DROP COLUMN ino;"
				   " PRAGMA user_version = 7",
				   NULL, NULL, &msg) == SQLITE_OK,
		      "%s", msg);
	sqlite3_close(h);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	check_clean();
	ck_assert_msg(store_db_get(st, "shop", false, &db, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(
		store_file_create(t, c, "f", STORE_KIND_FILE, &attrs, "x", 1, &f, &err), 0);
	ck_assert_msg(store_file_link(t, f.id, c, "g", &l, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(l.nlink, 2);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	check_clean();
}
END_TEST

/* A collect callback of store_entry_list: the names listed, space-separated. */
static int collect_names(void *ctx, const struct store_entry *e, uint64_t next)
{
	struct dfs_buf *b = ctx;

	dfs_buf_printf(b, "%s:%u ", e->name, e->nlink);
	return 0;
}

static char *list_names(int64_t coll)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct dfs_buf b;

	dfs_buf_init(&b);
	dfs_buf_puts(&b, "");
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_entry_list(t, coll, 0, collect_names, &b, &err), 0);
	store_txn_abort(t);
	return b.data;
}

/* issue 28 item 6 (doc.c note 6): a hard link is a name of the same file; the file lives
 * while any name does, hidden when its first name goes; documents refuse links. */
START_TEST(test_store_file_link_names_one_file)
{
	struct dfs_err err = {0};
	struct store_entry f, l, got, d;
	struct store_txn *t;
	struct dfs_buf b;
	int64_t c = make_coll("links");
	bool any = true;
	char *names, in_dir[64], want[128];

	dfs_buf_init(&b);
	ck_assert_msg(write_doc(c, "d.json", "{}", &d, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(
		store_file_create(t, c, "dir", STORE_KIND_DIR, &attrs, NULL, 0, &got, &err), 0);
	ck_assert_int_eq(store_dir_any(t, c, got.id, &any, &err), 0);
	ck_assert(!any);
	snprintf(in_dir, sizeof(in_dir), "%lld/l.txt", (long long)got.id); /* dir/l.txt */
	ck_assert_int_eq(
		store_file_create(t, c, "f.txt", STORE_KIND_FILE, &attrs, "abc", 3, &f, &err), 0);
	ck_assert_msg(store_file_link(t, f.id, c, in_dir, &l, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(l.id, f.id);
	ck_assert_int_ne(l.row, f.id);
	ck_assert_int_eq(l.nlink, 2);
	ck_assert_int_eq(store_dir_any(t, c, strtoll(in_dir, NULL, 10), &any, &err), 0);
	ck_assert(any);
	ck_assert_int_eq(store_file_link(t, d.id, c, "dl", NULL, &err), DFS_EPERM);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_file_link(t, f.id, c, "x.json", NULL, &err), DFS_EPERM);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_file_link(t, f.id, c, "f.txt", NULL, &err), DFS_EEXIST);
	dfs_err_clear(&err);
	/* the first name goes: the file stays, hidden, under its other name */
	ck_assert_int_eq(store_entry_delete(t, f.row, &err), 0);
	ck_assert_int_eq(store_file_write(t, f.id, "abcd", 4, &err), 0);
	ck_assert_int_eq(store_entry_lookup(t, c, in_dir, &got, &err), 0);
	ck_assert_int_eq(got.id, f.id);
	ck_assert_int_eq(got.nlink, 1);
	ck_assert_int_eq(got.size, 4);
	ck_assert_int_eq(store_entry_read(t, got.id, &b, &err), 0);
	ck_assert_str_eq(b.data, "abcd");
	ck_assert_int_eq(store_entry_lookup(t, c, "f.txt", &got, &err), DFS_ENOENT);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	names = list_names(c);
	snprintf(want, sizeof(want), "dir:1 %s:1 d.json:1 ", in_dir);
	ck_assert_str_eq(names, want);
	free(names);
	check_clean();

	/* a rename of the link moves its name; the last name's removal removes the file */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_entry_rename(t, l.row, c, "m.txt", &got, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(got.id, f.id);
	ck_assert_str_eq(got.name, "m.txt");
	ck_assert_int_eq(store_file_write(t, f.id, "{}", 2, &err), 0);
	ck_assert_int_eq(store_entry_rename(t, got.row, c, "m.json", NULL, &err), DFS_EPERM);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_entry_delete(t, got.row, &err), 0);
	ck_assert_int_eq(store_entry_get(t, f.id, &got, &err), DFS_ENOENT);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	names = list_names(c);
	ck_assert_str_eq(names, "dir:1 d.json:1 ");
	free(names);
	check_clean();
	dfs_buf_release(&b);
}
END_TEST

/* docfs check finds a hard link to nothing, a hidden file without links and an entry of a
 * directory that is gone (doc.c note 6). */
START_TEST(test_store_check_finds_broken_links_and_dirs)
{
	struct dfs_err err = {0};
	int64_t c = make_coll("broken");
	char cmd[600];
	int n = 0;

	store_free(st);
	st = NULL;
	snprintf(cmd, sizeof(cmd),
		 "sqlite3 %s/shop.db \"UPDATE meta SET v = 1000 WHERE k = 'next_id';"
		 " INSERT INTO files(id, coll, name, kind, ino) VALUES(100, %lld, 'l', 2, 99);"
		 " INSERT INTO files(id, coll, name, kind) VALUES(101, %lld, '0/101', 2);"
		 " INSERT INTO files(id, coll, name, kind) VALUES(102, %lld, '98/x', 2)\"",
		 tmpdir, (long long)c, (long long)c, (long long)c);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_check(st, count_problem, &n, &err), DFS_ECORRUPT);
	ck_assert_int_eq(n, 3);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_db_get_numbers_are_stable);
	tcase_add_test(tc, test_store_cred_allows_the_kernels_classes);
	tcase_add_test(tc, test_store_txn_cred_hides_private_documents);
	tcase_add_test(tc, test_store_db_name_check_rejects_bad_names);
	tcase_add_test(tc, test_store_db_drop_refuses_non_empty);
	tcase_add_test(tc, test_store_db_dropped_by_another_handle);
	tcase_add_test(tc, test_store_db_new_connection_after_drop);
	tcase_add_test(tc, test_store_db_drop_db_spares_a_new_one);
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
	tcase_add_test(tc, test_store_entry_list_interleaved_colls_each_complete);
	tcase_add_test(tc, test_store_entry_rename_across_colls_lists_both);
	tcase_add_test(tc, test_store_coll_drop_removes_runs);
	tcase_add_test(tc, test_store_entry_rename_vacated_and_lent_ids_listed);
	tcase_add_test(tc, test_store_index_create_failed_keeps_runs_of_txn);
	tcase_add_test(tc, test_store_check_finds_doc_outside_runs);
	tcase_add_test(tc, test_store_db_get_migrates_schema_3);
	tcase_add_test(tc, test_store_entry_set_atime_keeps_it_apart);
	tcase_add_test(tc, test_store_check_and_migrate_schema_5);
	tcase_add_test(tc, test_store_check_and_migrate_schema_7_without_ino);
	tcase_add_test(tc, test_store_file_link_names_one_file);
	tcase_add_test(tc, test_store_check_finds_broken_links_and_dirs);
	tcase_add_test(tc, test_store_thread_stop_interrupts_and_never_commits);
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
