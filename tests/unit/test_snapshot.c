/*
 * test_snapshot.c - unit tests of git snapshots (snapshot.c, snapgit.c): the tree and blob
 * bytes of a snapshot against the store, incremental reuse counts after inserts, updates,
 * deletes and renames, `git diff` between snapshots, partial (one-collection) snapshots,
 * restore (byte-identical, --into, --force), errors, listing, and the browse API. Each test
 * has its own temporary store; the git command line checks what libgit2 wrote.
 */
#include "store.h"

#include <check.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];
static char repo[300];
static struct store *st;
static struct store_db *db;
static const struct store_attrs attrs = {0644, 1000, 1000, 0};

static void setup(void)
{
	struct dfs_err err = {0};

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-snap-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(repo, sizeof(repo), "%s/snapshots.git", tmpdir);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "shop", true, &db, &err), 0);
	unsetenv("GIT_AUTHOR_NAME");
	unsetenv("GIT_AUTHOR_DATE");
	unsetenv("GIT_COMMITTER_DATE");
}

static void teardown(void)
{
	char cmd[300];

	store_free(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Runs a shell command and returns its standard output (Owned: free). */
static char *run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *run(const char *fmt, ...)
{
	char cmd[2048];
	struct dfs_buf b;
	char chunk[4096];
	size_t n;
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	dfs_buf_init(&b);
	dfs_buf_puts(&b, "");
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		dfs_buf_append(&b, chunk, n);
	pclose(f);
	return b.data;
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

static void write_doc(int64_t coll, const char *name, const char *text)
{
	struct dfs_err err = {0};
	struct store_txn *t;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_doc_write_text(t, coll, name, text, strlen(text), &attrs, NULL, &err) ==
			      0,
		      "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

static int64_t entry_id(int64_t coll, const char *name)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_msg(store_entry_lookup(t, coll, name, &e, &err) == 0, "%s", err.msg);
	store_txn_abort(t);
	return e.id;
}

static void delete_doc(int64_t coll, const char *name)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	int64_t id = entry_id(coll, name);

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_delete(t, id, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

static void rename_doc(int64_t coll, const char *from, const char *to)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	int64_t id = entry_id(coll, from);

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_entry_rename(t, id, coll, to, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

/* The bytes the mount shows for name (Owned: free), or NULL when absent. */
static char *read_doc(struct store_db *d, const char *coll, const char *name)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;
	struct store_entry e;
	struct dfs_buf b;

	dfs_buf_init(&b);
	ck_assert_int_eq(store_txn_begin(d, false, &t, &err), 0);
	if (store_coll_find(t, coll, &c, NULL) || store_entry_lookup(t, c.id, name, &e, NULL)) {
		store_txn_abort(t);
		return NULL;
	}
	ck_assert_int_eq(store_entry_read(t, e.id, &b, &err), 0);
	store_txn_abort(t);
	return b.data;
}

static void fill(int64_t coll, int n)
{
	char name[64], text[256];

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"n\": %d, \"s\": \"doc %d\", \"a\": [1, {\"b\": 2.5}]}",
			 i, i);
		write_doc(coll, name, text);
	}
}

static struct store_snap_result snap(const char *coll, const char *tag)
{
	struct store_snap_opts o = {.db = "shop", .coll = coll, .tag = tag};
	struct store_snap_result r;
	struct dfs_err err = {0};

	ck_assert_msg(store_snapshot(st, &o, &r, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(strlen(r.commit), 40);
	return r;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

START_TEST(test_store_snapshot_tree_and_blobs)
{
	int64_t users = make_coll("users");
	struct store_snap_result r;
	char *out, *head;

	fill(users, 20);
	r = snap(NULL, NULL);
	ck_assert_int_eq(r.docs, 20);
	ck_assert_int_eq(r.blobs_written, 20);
	ck_assert_int_eq(r.blobs_reused, 0);
	ck_assert_int_eq(r.colls_reused, 0);
	out = run("git -C %s ls-tree -r --name-only main", repo);
	ck_assert_int_eq(count_lines(out), 21);
	ck_assert_ptr_nonnull(strstr(out, "shop/users/.indexes.json\n"));
	ck_assert_ptr_nonnull(strstr(out, "shop/users/13.json\n"));
	free(out);
	for (int i = 0; i < 20; i++) {
		char name[32], *want;

		snprintf(name, sizeof(name), "%d.json", i);
		want = read_doc(db, "users", name);
		out = run("git -C %s show main:shop/users/%s", repo, name);
		ck_assert_str_eq(out, want);
		free(out);
		free(want);
	}
	out = run("git -C %s show main:shop/users/.indexes.json", repo);
	ck_assert_str_eq(out, "[\n  {\n    \"v\": 2,\n    \"key\": {\n      \"_id\": 1\n    },\n"
			      "    \"name\": \"_id_\"\n  }\n]\n");
	free(out);
	/* A sound repository that git itself reads, bare, HEAD on main. */
	out = run("git -C %s fsck --strict 2>&1 && echo fsck-ok", repo);
	ck_assert_msg(strstr(out, "fsck-ok") != NULL, "%s", out);
	free(out);
	head = run("git -C %s symbolic-ref HEAD", repo);
	ck_assert_str_eq(head, "refs/heads/main\n");
	free(head);
	out = run("git -C %s rev-parse main", repo);
	ck_assert_int_eq(strncmp(out, r.commit, 40), 0);
	free(out);
	out = run("git -C %s log -1 --format='%%an <%%ae>|%%s' main", repo);
	ck_assert_str_eq(out, "docfs <docfs@localhost>|docfs snapshot shop\n");
	free(out);
	out = run("cd %s && git clone -q snapshots.git wt 2>&1 && cat wt/shop/users/3.json", tmpdir);
	{
		char *want = read_doc(db, "users", "3.json");

		ck_assert_str_eq(out, want);
		free(want);
	}
	free(out);
}
END_TEST

START_TEST(test_store_snapshot_incremental_counts)
{
	int64_t users = make_coll("users");
	struct store_snap_result r1, r2, r3;
	char *out;

	fill(users, 10);
	r1 = snap("users", "first");
	ck_assert_int_eq(r1.blobs_written, 10);
	write_doc(users, "2.json", "{\"n\": 2, \"changed\": true}");	/* update */
	write_doc(users, "100.json", "{\"n\": 100}");			/* insert */
	delete_doc(users, "5.json");					/* delete */
	rename_doc(users, "7.json", "70.json");				/* rename */
	r2 = snap("users", "second");
	ck_assert_int_eq(r2.docs, 10);
	ck_assert_int_eq(r2.blobs_written, 3);
	ck_assert_int_eq(r2.blobs_reused, 7);
	ck_assert_int_eq(r2.colls_reused, 0);
	out = run("git -C %s diff --no-renames --name-status first second", repo);
	ck_assert_str_eq(out, "A\tshop/users/100.json\n"
			      "M\tshop/users/2.json\n"
			      "D\tshop/users/5.json\n"
			      "D\tshop/users/7.json\n"
			      "A\tshop/users/70.json\n");
	free(out);
	/* Nothing changed: the whole tree is reused, nothing rendered. */
	r3 = snap("users", NULL);
	ck_assert_int_eq(r3.colls_reused, 1);
	ck_assert_int_eq(r3.blobs_written, 0);
	ck_assert_int_eq(r3.blobs_reused, 10);
	ck_assert_int_eq(r3.docs, 10);
	out = run("git -C %s rev-parse main:shop/users main~1:shop/users", repo);
	ck_assert_int_eq(strlen(out), 82);
	ck_assert_int_eq(strncmp(out, out + 41, 40), 0);
	free(out);
	out = run("git -C %s fsck --strict 2>&1 && echo fsck-ok", repo);
	ck_assert_msg(strstr(out, "fsck-ok") != NULL, "%s", out);
	free(out);
}
END_TEST

START_TEST(test_store_snapshot_one_coll_keeps_others)
{
	int64_t a = make_coll("a"), b = make_coll("b");
	struct store_snap_result r;
	char *out;

	fill(a, 3);
	fill(b, 4);
	snap(NULL, NULL);
	write_doc(a, "0.json", "{\"x\": 1}");
	write_doc(b, "0.json", "{\"x\": 2}");
	r = snap("a", NULL);
	ck_assert_int_eq(r.docs, 3);
	ck_assert_int_eq(r.blobs_written, 1);
	out = run("git -C %s rev-parse main:shop/b main~1:shop/b", repo);
	ck_assert_int_eq(strncmp(out, out + 41, 40), 0); /* b kept as it was */
	free(out);
	out = run("git -C %s diff --name-status main~1 main", repo);
	ck_assert_str_eq(out, "M\tshop/a/0.json\n");
	free(out);
	/* A whole-database snapshot drops collections dropped since and keeps other dbs. */
	{
		struct store_db *other;
		struct dfs_err err = {0};
		struct store_txn *t;
		struct store_coll c;
		struct store_snap_opts o = {.db = "other"};

		ck_assert_int_eq(store_db_get(st, "other", true, &other, &err), 0);
		ck_assert_int_eq(store_txn_begin(other, true, &t, &err), 0);
		ck_assert_int_eq(store_coll_create(t, "c", 0755, 0, 0, &c, &err), 0);
		ck_assert_int_eq(store_txn_commit(t, &err), 0);
		ck_assert_msg(store_snapshot(st, &o, &r, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
		ck_assert_int_eq(store_coll_drop(t, b, &err), 0);
		ck_assert_int_eq(store_txn_commit(t, &err), 0);
	}
	r = snap(NULL, NULL);
	ck_assert_int_eq(r.colls_reused, 1); /* a is as cached by the last snapshot */
	out = run("git -C %s ls-tree -d --name-only -r main", repo);
	ck_assert_str_eq(out, "other\nother/c\nshop\nshop/a\n");
	free(out);
}
END_TEST

START_TEST(test_store_snapshot_coll_reuse_after_other_change)
{
	int64_t a = make_coll("a"), b = make_coll("b");
	struct store_snap_result r;

	fill(a, 5);
	fill(b, 5);
	snap(NULL, NULL);
	write_doc(b, "1.json", "{\"y\": 1}");
	r = snap(NULL, NULL);
	ck_assert_int_eq(r.colls_reused, 1);
	ck_assert_int_eq(r.blobs_written, 1);
	ck_assert_int_eq(r.blobs_reused, 9);
}
END_TEST

/* Creates an index of users through the store. */
static void add_index(const char *spec_text)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;
	bson_t spec;

	bson_init(&spec);
	ck_assert_int_eq(store_codec_parse_doc(spec_text, strlen(spec_text), &spec, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_find(t, "users", &c, &err), 0);
	ck_assert_msg(store_index_create(t, c.id, &spec, NULL, 0, NULL, NULL, &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	bson_destroy(&spec);
}

static char *index_names(const char *dbname)
{
	char path[400];

	snprintf(path, sizeof(path), "%s/%s.db", tmpdir, dbname);
	return run("sqlite3 %s \"SELECT c.name || '/' || i.name FROM indexes i JOIN colls c ON"
		   " c.id = i.coll ORDER BY 1\" 2>&1",
		   path);
}

START_TEST(test_store_restore_byte_identical)
{
	int64_t users = make_coll("users");
	struct dfs_err err = {0};
	struct store_snap_result r;
	char *before[6], *out;
	int64_t n = -1;

	fill(users, 6);
	write_doc(users, "x.json", "{\"d\": {\"$date\": \"2020-01-02T03:04:05.678Z\"}, \"l\":"
				   " {\"$numberLong\": \"5\"}, \"f\": 1.0, \"o\": ObjectId(\"0123456789abcdef01234567\")}");
	/* Sparse: the documents without n written below do not clash. */
	add_index("{\"v\": 2, \"key\": {\"n\": 1}, \"name\": \"n_1\", \"unique\": true,"
		  " \"sparse\": true}");
	for (int i = 0; i < 6; i++) {
		char name[32];

		snprintf(name, sizeof(name), "%d.json", i);
		before[i] = read_doc(db, "users", name);
	}
	r = snap("users", "v1");
	ck_assert_int_eq(r.docs, 7);
	out = run("git -C %s show v1:shop/users/.indexes.json", repo);
	ck_assert_ptr_nonnull(strstr(out, "\"name\": \"n_1\",\n    \"unique\": true,\n    \"sparse\": true\n  }\n]\n"));
	free(out);
	/* Change things, then restore over them. */
	write_doc(users, "0.json", "{\"gone\": 1}");
	delete_doc(users, "1.json");
	write_doc(users, "new.json", "{\"new\": 1}");

	ck_assert_int_eq(store_restore(st, NULL, "v1", "shop", "users", NULL, NULL, false, &n, &err),
			 DFS_EEXIST);
	ck_assert_str_eq(err.msg, "collection 'shop.users' exists (use --force to replace it)");
	out = read_doc(db, "users", "0.json");
	ck_assert_str_eq(out, "{\n  \"_id\": 0,\n  \"gone\": 1\n}\n"); /* unchanged */
	free(out);
	dfs_err_clear(&err);
	ck_assert_msg(store_restore(st, NULL, "v1", "shop", "users", NULL, NULL, true, &n, &err) == 0,
		      "%s", err.msg);
	ck_assert_int_eq(n, 7);
	for (int i = 0; i < 6; i++) {
		char name[32];

		snprintf(name, sizeof(name), "%d.json", i);
		out = read_doc(db, "users", name);
		ck_assert_ptr_nonnull(out);
		ck_assert_str_eq(out, before[i]);
		free(out);
	}
	ck_assert_ptr_null(read_doc(db, "users", "new.json"));
	out = read_doc(db, "users", "x.json");
	{
		char *g = run("git -C %s show v1:shop/users/x.json", repo);

		ck_assert_str_eq(out, g);
		free(g);
	}
	free(out);
	out = index_names("shop");
	ck_assert_str_eq(out, "users/n_1\n");
	free(out);
	/* --into another database and collection. */
	ck_assert_msg(store_restore(st, NULL, "v1", "shop", "users", "copy", "people", false, &n,
				    &err) == 0, "%s", err.msg);
	{
		struct store_db *copy;

		ck_assert_int_eq(store_db_get(st, "copy", false, &copy, &err), 0);
		for (int i = 0; i < 6; i++) {
			char name[32];

			snprintf(name, sizeof(name), "%d.json", i);
			out = read_doc(copy, "people", name);
			ck_assert_ptr_nonnull(out);
			ck_assert_str_eq(out, before[i]);
			free(out);
		}
	}
	out = index_names("copy");
	ck_assert_str_eq(out, "people/n_1\n");
	free(out);
	/* The restored indexes are built, not bare definitions. */
	ck_assert_int_eq(store_check(st, NULL, NULL, &err), 0);
	for (int i = 0; i < 6; i++)
		free(before[i]);
}
END_TEST

START_TEST(test_store_snapshot_errors)
{
	int64_t users = make_coll("users");
	struct dfs_err err = {0};
	struct store_snap_result r;
	char bad[400], *out, *head;
	int64_t n;

	fill(users, 2);
	/* A path that exists but is not a repository: refused, left alone. */
	snprintf(bad, sizeof(bad), "%s/notrepo", tmpdir);
	ck_assert_int_eq(mkdir(bad, 0755), 0);
	{
		struct store_snap_opts o = {.db = "shop", .repo = bad};

		ck_assert_int_eq(store_snapshot(st, &o, &r, &err), DFS_EINVAL);
		ck_assert_ptr_nonnull(strstr(err.msg, "is not a git repository"));
		ck_assert_ptr_nonnull(strstr(err.msg, bad));
		out = run("ls -A %s", bad);
		ck_assert_str_eq(out, "");
		free(out);
	}
	dfs_err_clear(&err);
	{
		struct store_snap_opts o = {.db = "nodb"};

		ck_assert_int_eq(store_snapshot(st, &o, &r, &err), DFS_ENOENT);
		dfs_err_clear(&err);
		o.db = "shop";
		o.coll = "nocoll";
		ck_assert_int_eq(store_snapshot(st, &o, &r, &err), DFS_ENOENT);
		dfs_err_clear(&err);
	}
	/* Restore from a repository that does not exist yet, a missing ref, a missing coll. */
	ck_assert_int_eq(store_restore(st, NULL, "main", "shop", "users", "x", NULL, false, &n, &err),
			 DFS_ENOENT);
	dfs_err_clear(&err);
	snap(NULL, "t1");
	ck_assert_int_eq(store_restore(st, NULL, "nosuch", "shop", "users", "x", NULL, false, &n,
				       &err), DFS_ENOENT);
	ck_assert_msg(strstr(err.msg, "no snapshot 'nosuch' in '") != NULL, "%s", err.msg);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_restore(st, NULL, "main", "shop", "nocoll", "x", NULL, false, &n,
				       &err), DFS_ENOENT);
	dfs_err_clear(&err);
	{
		struct store_db *x;

		ck_assert_int_eq(store_db_get(st, "x", false, &x, &err), DFS_ENOENT); /* not created */
		dfs_err_clear(&err);
	}
	/* An existing tag: no commit made. */
	write_doc(users, "9.json", "{}");
	head = run("git -C %s rev-parse main", repo);
	{
		struct store_snap_opts o = {.db = "shop", .tag = "t1"};

		ck_assert_int_eq(store_snapshot(st, &o, &r, &err), DFS_EEXIST);
		dfs_err_clear(&err);
	}
	out = run("git -C %s rev-parse main", repo);
	ck_assert_str_eq(out, head);
	free(out);
	free(head);
}
END_TEST

struct list_ctx {
	struct store_snap_info v[8];
	int n;
};

static int list_cb(void *ctx, const struct store_snap_info *i)
{
	struct list_ctx *l = ctx;

	ck_assert_int_lt(l->n, 8);
	l->v[l->n++] = *i;
	return 0;
}

START_TEST(test_store_snapshot_list_order_counts)
{
	int64_t users = make_coll("users"), b = make_coll("b");
	struct store_snap_opts o = {.db = "shop", .message = "first one\n\nbody"};
	struct store_snap_result r1, r2, r3;
	struct dfs_err err = {0};
	struct list_ctx l = {.n = 0};

	fill(users, 3);
	fill(b, 1);
	ck_assert_int_eq(store_snapshot(st, &o, &r1, &err), 0);
	write_doc(users, "3.json", "{}");
	r2 = snap("users", "tag2");
	delete_doc(b, "0.json");
	r3 = snap(NULL, NULL);
	ck_assert_int_eq(store_snapshot_list(st, NULL, NULL, list_cb, &l, &err), 0);
	ck_assert_int_eq(l.n, 3);
	ck_assert_str_eq(l.v[0].id, r3.commit);
	ck_assert_str_eq(l.v[1].id, r2.commit);
	ck_assert_str_eq(l.v[2].id, r1.commit);
	ck_assert_int_eq(l.v[0].docs, 4);
	ck_assert_int_eq(l.v[1].docs, 5);
	ck_assert_int_eq(l.v[2].docs, 4);
	ck_assert_str_eq(l.v[0].refs, "main");
	ck_assert_str_eq(l.v[1].refs, "tag2");
	ck_assert_str_eq(l.v[2].refs, "");
	ck_assert_str_eq(l.v[2].message, "first one");
	ck_assert_str_eq(l.v[1].message, "docfs snapshot shop.users");
	ck_assert_int_gt(l.v[0].time, 1600000000);
}
END_TEST

START_TEST(test_store_snapshot_author_from_env)
{
	int64_t users = make_coll("users");
	char *out;

	fill(users, 1);
	setenv("GIT_AUTHOR_NAME", "Ada", 1);
	setenv("GIT_AUTHOR_DATE", "1700000000 +0200", 1);
	setenv("GIT_COMMITTER_DATE", "2021-03-04T05:06:07Z", 1);
	snap(NULL, NULL);
	out = run("git -C %s log -1 --format='%%an|%%at|%%ai|%%ct' main", repo);
	ck_assert_str_eq(out, "Ada|1700000000|2023-11-15 00:13:20 +0200|1614834367\n");
	free(out);
	setenv("GIT_AUTHOR_DATE", "not a date", 1);
	{
		struct store_snap_opts o = {.db = "shop"};
		struct store_snap_result r;
		struct dfs_err err = {0};

		ck_assert_int_eq(store_snapshot(st, &o, &r, &err), DFS_EINVAL);
		ck_assert_ptr_nonnull(strstr(err.msg, "GIT_AUTHOR_DATE"));
	}
	unsetenv("GIT_AUTHOR_NAME");
	unsetenv("GIT_AUTHOR_DATE");
	unsetenv("GIT_COMMITTER_DATE");
}
END_TEST

static int names_cb(void *ctx, const char *name)
{
	struct dfs_buf *b = ctx;

	dfs_buf_puts(b, name);
	dfs_buf_putc(b, ' ');
	return 0;
}

static int entries_cb(void *ctx, const struct store_git_entry *e)
{
	struct dfs_buf *b = ctx;

	dfs_buf_printf(b, "%s%s:%lld ", e->name, e->is_dir ? "/" : "", (long long)e->size);
	return 0;
}

START_TEST(test_store_git_browse)
{
	int64_t users = make_coll("users");
	struct store_snap_result r1, r2;
	struct store_git *g;
	struct store_git_entry e;
	struct dfs_err err = {0};
	struct dfs_buf b;
	char c[41], c2[41], abbrev[9], *want, *out;

	ck_assert_int_eq(store_git_open(st, NULL, &g, &err), DFS_ENOENT);
	dfs_err_clear(&err);
	fill(users, 2);
	r1 = snap(NULL, "v1");
	write_doc(users, "1.json", "{\"z\": 1}");
	r2 = snap(NULL, NULL);
	ck_assert_int_eq(store_git_open(st, NULL, &g, &err), 0);
	dfs_buf_init(&b);
	ck_assert_int_eq(store_git_refs(g, names_cb, &b, &err), 0);
	ck_assert_str_eq(b.data, "main v1 ");
	ck_assert_int_eq(store_git_resolve(g, "main", c, &err), 0);
	ck_assert_str_eq(c, r2.commit);
	ck_assert_int_eq(store_git_resolve(g, "v1", c, &err), 0);
	ck_assert_str_eq(c, r1.commit);
	ck_assert_int_eq(store_git_resolve(g, "main~1", c, &err), 0);
	ck_assert_str_eq(c, r1.commit);
	snprintf(abbrev, sizeof(abbrev), "%.8s", r1.commit);
	ck_assert_int_eq(store_git_resolve(g, abbrev, c, &err), 0);
	ck_assert_str_eq(c, r1.commit);
	ck_assert_int_eq(store_git_resolve(g, r2.commit, c2, &err), 0);
	ck_assert_str_eq(c2, r2.commit);
	ck_assert_int_eq(store_git_resolve(g, "nope", c, &err), DFS_ENOENT);
	dfs_err_clear(&err);

	ck_assert_int_eq(store_git_stat(g, r1.commit, "", &e, &err), 0);
	ck_assert(e.is_dir);
	ck_assert_int_eq(store_git_stat(g, r1.commit, "shop/users", &e, &err), 0);
	ck_assert(e.is_dir);
	ck_assert_int_eq(store_git_stat(g, r1.commit, "shop/users/1.json", &e, &err), 0);
	ck_assert(!e.is_dir);
	ck_assert_str_eq(e.name, "1.json");
	out = run("git -C %s rev-parse v1:shop/users/1.json", repo);
	ck_assert_int_eq(strncmp(out, e.oid, 40), 0);
	free(out);
	out = run("git -C %s show v1:shop/users/1.json", repo);
	ck_assert_int_eq(e.size, (int64_t)strlen(out));
	dfs_buf_reset(&b);
	ck_assert_int_eq(store_git_read(g, r1.commit, "shop/users/1.json", &b, &err), 0);
	ck_assert_str_eq(b.data, out);
	free(out);
	ck_assert_int_eq(store_git_stat(g, r1.commit, "shop/users/9.json", &e, &err), DFS_ENOENT);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_git_stat(g, r1.commit, "shop/nope/9.json", &e, &err), DFS_ENOENT);
	dfs_err_clear(&err);

	dfs_buf_reset(&b);
	ck_assert_int_eq(store_git_list(g, r1.commit, "", entries_cb, &b, &err), 0);
	ck_assert_str_eq(b.data, "shop/:0 ");
	dfs_buf_reset(&b);
	ck_assert_int_eq(store_git_list(g, r2.commit, "shop/users", entries_cb, &b, &err), 0);
	want = read_doc(db, "users", "1.json");
	ck_assert_ptr_nonnull(strstr(b.data, ".indexes.json:"));
	ck_assert_ptr_nonnull(strstr(b.data, " 0.json:"));
	{
		char exp[64];

		snprintf(exp, sizeof(exp), " 1.json:%zu ", strlen(want));
		ck_assert_msg(strstr(b.data, exp) != NULL, "%s", b.data);
	}
	dfs_buf_reset(&b);
	ck_assert_int_eq(store_git_read(g, r2.commit, "shop/users/1.json", &b, &err), 0);
	ck_assert_str_eq(b.data, want);
	free(want);
	dfs_buf_release(&b);
	store_git_free(g);
}
END_TEST

static Suite *snapshot_suite(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_store_snapshot_tree_and_blobs);
	tcase_add_test(tc, test_store_snapshot_incremental_counts);
	tcase_add_test(tc, test_store_snapshot_one_coll_keeps_others);
	tcase_add_test(tc, test_store_snapshot_coll_reuse_after_other_change);
	tcase_add_test(tc, test_store_restore_byte_identical);
	tcase_add_test(tc, test_store_snapshot_errors);
	tcase_add_test(tc, test_store_snapshot_list_order_counts);
	tcase_add_test(tc, test_store_snapshot_author_from_env);
	tcase_add_test(tc, test_store_git_browse);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(snapshot_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
