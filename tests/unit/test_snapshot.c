/*
 * test_snapshot.c - unit tests of git snapshots (snapshot.c, snapgit.c): the tree and blob
 * bytes of a snapshot against the store, incremental reuse counts after inserts, updates,
 * deletes and renames, `git diff` between snapshots, partial (one-collection) snapshots,
 * restore (byte-identical, --into, --force), errors, listing, and the browse API; the
 * patched (change feed) and walked paths of an incremental snapshot, each checked against a
 * snapshot into a fresh repository (no cache), and the .idx files against git's. Each test
 * has its own temporary store; the git command line checks what libgit2 wrote.
 */
#include "store.h"
#include "test_rand.h"

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
/* collections are made by the owner of their documents: .attrs.json lists none of them */
static char main_key[32]; /* snap_colls.repo of the default repository (patched()) */

static void setup(void)
{
	struct dfs_err err = {0};

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-snap-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(repo, sizeof(repo), "%s/snapshots.git", tmpdir);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "shop", true, &db, &err), 0);
	main_key[0] = '\0';
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
	ck_assert_msg(store_coll_create(t, name, 0755, 1000, 1000, &c, &err) == 0, "%s", err.msg);
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
	ck_assert_int_eq(count_lines(out), 22); /* and .indexes.json, .attrs.json */
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
		ck_assert_int_eq(store_coll_create(t, "c", 0755, 1000, 1000, &c, &err), 0);
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

/* ---- incremental paths against snapshots without a cache ------------------------------ */

static int fresh_n;

/* The tree id of shop/<coll> in a snapshot of it into a new repository (no cache), and in
 * the branch of the default one; asserts they are equal. */
static void check_like_fresh(const char *coll)
{
	struct store_snap_opts o = {.db = "shop", .coll = coll};
	struct store_snap_result r;
	struct dfs_err err = {0};
	char path[400], *want, *got;

	snprintf(path, sizeof(path), "%s/fresh%d.git", tmpdir, fresh_n++);
	o.repo = path;
	ck_assert_msg(store_snapshot(st, &o, &r, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(r.blobs_reused, 0);
	want = run("git -C %s rev-parse main:shop/%s 2>&1", path, coll);
	got = run("git -C %s rev-parse main:shop/%s 2>&1", repo, coll);
	ck_assert_msg(strcmp(want, got) == 0, "seed %llu: %s: fresh %s incremental %s",
		      (unsigned long long)seed_used, coll, want, got);
	free(want);
	free(got);
}

/* 1 when the cache row of coll was written by the patch path (no fingerprint), 0 when by
 * the walk (white box: snap_colls.max_ctime). The first call must come before any
 * check_like_fresh: it takes the only repository key in snap_colls as the default one's. */
static int patched(const char *coll)
{
	char path[400], *out;
	int v;

	snprintf(path, sizeof(path), "%s/shop.db", tmpdir);
	if (!*main_key) {
		out = run("sqlite3 %s \"SELECT DISTINCT repo FROM snap_colls\"", path);
		ck_assert_msg(strchr(out, '\n') == out + strlen(out) - 1, "%s", out);
		snprintf(main_key, sizeof(main_key), "%.*s", (int)strlen(out) - 1, out);
		free(out);
	}
	out = run("sqlite3 %s \"SELECT s.max_ctime IS NULL FROM snap_colls s JOIN colls c ON"
		  " c.id = s.coll WHERE c.name = '%s' AND s.repo = %s\"",
		  path, coll, main_key);
	ck_assert_msg(*out == '0' || *out == '1', "%s", out);
	v = *out - '0';
	free(out);
	return v;
}

/* Every pack's .idx is the one `git index-pack` makes of it, byte for byte. */
static void check_idx(void)
{
	char *out = run("cd %s/objects/pack && for p in *.pack; do git index-pack -o ../check.idx"
			" $p >/dev/null && cmp ${p%%.pack}.idx ../check.idx && echo same || echo"
			" differ $p; rm -f ../check.idx; done",
			repo);

	ck_assert_msg(strstr(out, "same") && !strstr(out, "differ"), "%s", out);
	free(out);
}

static void exec_sql_file(const char *sql)
{
	char path[400];
	sqlite3 *h;

	snprintf(path, sizeof(path), "%s/shop.db", tmpdir);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	sqlite3_busy_timeout(h, 5000);
	ck_assert_int_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
}

START_TEST(test_store_snapshot_patch_like_fresh)
{
	int64_t users = make_coll("users");
	struct store_snap_result r;
	char *out;

	fill(users, 30);
	snap("users", NULL);
	ck_assert_int_eq(patched("users"), 0);
	/* Updates. */
	write_doc(users, "3.json", "{\"n\": 3, \"v\": 2}");
	write_doc(users, "17.json", "{\"n\": 17, \"v\": 2}");
	r = snap("users", NULL);
	ck_assert_int_eq(patched("users"), 1);
	ck_assert_int_eq(r.docs, 30);
	ck_assert_int_eq(r.blobs_written, 2);
	ck_assert_int_eq(r.blobs_reused, 28);
	check_like_fresh("users");
	/* Inserts, one transaction each. */
	write_doc(users, "a.json", "{\"x\": 1}");
	write_doc(users, "0b.json", "{\"x\": 2}");
	r = snap("users", NULL);
	ck_assert_int_eq(patched("users"), 1);
	ck_assert_int_eq(r.docs, 32);
	ck_assert_int_eq(r.blobs_written, 2);
	check_like_fresh("users");
	/* Deletes. */
	delete_doc(users, "0.json");
	delete_doc(users, "a.json");
	r = snap("users", NULL);
	ck_assert_int_eq(patched("users"), 1);
	ck_assert_int_eq(r.docs, 30);
	ck_assert_int_eq(r.blobs_written, 0);
	check_like_fresh("users");
	/* Renames: to a new name, over an existing document, and back and forth. */
	rename_doc(users, "1.json", "100.json");
	rename_doc(users, "2.json", "4.json");
	rename_doc(users, "5.json", "6x.json");
	rename_doc(users, "6x.json", "5.json");
	r = snap("users", NULL);
	ck_assert_int_eq(patched("users"), 1);
	ck_assert_int_eq(r.docs, 29);
	check_like_fresh("users");
	/* All of them in one transaction, and a bulk insert (logged without ids). */
	{
		struct dfs_err err = {0};
		struct store_txn *t;

		ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
		for (int i = 0; i < 50; i++) {
			char text[64];
			bson_t doc, prepared;

			snprintf(text, sizeof(text), "{\"_id\": \"bulk%02d\", \"i\": %d}", i, i);
			bson_init(&doc);
			ck_assert_int_eq(store_codec_parse_doc(text, strlen(text), &doc, &err), 0);
			ck_assert_int_eq(store_doc_prepare(&doc, NULL, &prepared, &err), 0);
			ck_assert_msg(store_doc_insert(t, users, &prepared, &attrs, NULL, &err) ==
					      0,
				      "%s", err.msg);
			bson_destroy(&doc);
			bson_destroy(&prepared);
		}
		ck_assert_int_eq(store_doc_write_text(t, users, "7.json", "{\"b\": 1}", 8, &attrs,
						      NULL, &err),
				 0);
		ck_assert_int_eq(store_entry_delete(t, entry_id(users, "8.json"), &err), 0);
		ck_assert_int_eq(store_txn_commit(t, &err), 0);
	}
	r = snap("users", NULL);
	ck_assert_int_eq(patched("users"), 1);
	ck_assert_int_eq(r.docs, 78);
	ck_assert_int_eq(r.blobs_written, 51);
	check_like_fresh("users");
	/* Nothing changed: the tree is reused, and the next change is still patched. */
	r = snap("users", NULL);
	ck_assert_int_eq(r.colls_reused, 1);
	ck_assert_int_eq(patched("users"), 1);
	write_doc(users, "9.json", "{\"n\": 9, \"v\": 3}");
	r = snap("users", NULL);
	ck_assert_int_eq(patched("users"), 1);
	ck_assert_int_eq(r.blobs_written, 1);
	check_like_fresh("users");
	check_idx();
	out = run("git -C %s fsck --strict 2>&1 && echo fsck-ok", repo);
	ck_assert_msg(strstr(out, "fsck-ok") != NULL, "%s", out);
	free(out);
}
END_TEST

START_TEST(test_store_snapshot_walk_when_feed_cannot_tell)
{
	int64_t users = make_coll("users"), other = make_coll("other");
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_snap_result r;

	fill(users, 20);
	fill(other, 3);
	snap(NULL, NULL);
	/* The feed pruned past the cached seq (as db.c prunes: the oldest records). */
	write_doc(users, "3.json", "{\"n\": 3, \"v\": 2}");
	write_doc(users, "4.json", "{\"n\": 4, \"v\": 2}");
	exec_sql_file("DELETE FROM changes WHERE seq < (SELECT max(seq) FROM changes)");
	r = snap("users", NULL);
	ck_assert_int_eq(patched("users"), 0);
	ck_assert_int_eq(r.blobs_written, 2);
	check_like_fresh("users");
	/* An insert taking back a vacated id: logged without it, caught by the count. */
	rename_doc(users, "5.json", "5.json~");
	r = snap("users", NULL);
	ck_assert_int_eq(patched("users"), 1);
	check_like_fresh("users");
	write_doc(users, "5.json", "{\"n\": 5, \"back\": true}");
	r = snap("users", NULL);
	ck_assert_int_eq(patched("users"), 0);
	ck_assert_int_eq(r.docs, 20);
	check_like_fresh("users");
	/* A scratch file made before the snapshot, renamed to a document after it. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_file_create(t, users, "draft.tmp", STORE_KIND_FILE, &attrs,
					   "{\"d\": 1}", 8, NULL, &err),
			 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	snap("users", NULL);
	rename_doc(users, "draft.tmp", "draft.json");
	r = snap("users", NULL);
	ck_assert_int_eq(r.docs, 21);
	check_like_fresh("users");
	/* A document moved between collections (other's cached seq was pruned: walked). */
	snap(NULL, NULL);
	ck_assert_int_eq(patched("other"), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(
		store_entry_rename(t, entry_id(users, "6.json"), other, "6.json", NULL, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	r = snap(NULL, NULL);
	ck_assert_int_eq(patched("users"), 1);
	ck_assert_int_eq(patched("other"), 1);
	check_like_fresh("users");
	check_like_fresh("other");
	/* Emptied (restore --force does this), then refilled: walked. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_empty(t, other, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	write_doc(other, "1.json", "{\"n\": 1}");
	r = snap("other", NULL);
	ck_assert_int_eq(patched("other"), 0);
	ck_assert_int_eq(r.docs, 1);
	check_like_fresh("other");
	/* Renamed: walked, and the same tree under the new name. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_rename(t, users, "people", &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	r = snap(NULL, NULL);
	ck_assert_int_eq(patched("people"), 0);
	ck_assert_int_eq(r.colls_reused, 1); /* walked, but its fingerprint is the cached one */
	check_like_fresh("people");
	/* A cache from before seq/next_id existed: walked, then patched again. */
	exec_sql_file("UPDATE snap_colls SET seq = NULL, next_id = NULL");
	write_doc(users, "7.json", "{\"n\": 7, \"v\": 2}");
	r = snap("people", NULL);
	ck_assert_int_eq(patched("people"), 0);
	ck_assert_int_eq(r.blobs_written, 1);
	write_doc(users, "8.json", "{\"n\": 8, \"v\": 2}");
	r = snap("people", NULL);
	ck_assert_int_eq(patched("people"), 1);
	ck_assert_int_eq(r.blobs_written, 1);
	check_like_fresh("people");
	/* The repository replaced: every document rendered again, the same tree. */
	{
		char *out = run("rm -rf %s && echo gone", repo);

		free(out);
	}
	r = snap("people", NULL);
	ck_assert_int_eq(r.blobs_reused, 0);
	check_like_fresh("people");
	check_idx();
}
END_TEST

/* n small documents "<i>.json" in one transaction. */
static void fill_bulk(int64_t coll, int n)
{
	struct dfs_err err = {0};
	struct store_txn *t;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	for (int i = 0; i < n; i++) {
		char name[32], text[64];

		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"n\": %d}", i);
		ck_assert_msg(store_doc_write_text(t, coll, name, text, strlen(text), &attrs, NULL,
						   &err) == 0,
			      "%s", err.msg);
	}
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

/* Two collections patched into the same tree (over a megabyte, so the first copy is already
 * in the pack file when the second is found to be the same): the pack holds it once. */
START_TEST(test_store_snapshot_patch_same_tree_twice)
{
	int64_t a = make_coll("a"), b = make_coll("b");
	struct store_snap_result r;
	char *out;

	fill_bulk(a, 30000);
	fill_bulk(b, 30000);
	snap(NULL, NULL);
	ck_assert_int_eq(patched("a"), 0);
	write_doc(a, "2.json", "{\"same\": 1}");
	write_doc(b, "2.json", "{\"same\": 1}");
	r = snap(NULL, NULL);
	ck_assert_int_eq(patched("a"), 1);
	ck_assert_int_eq(patched("b"), 1);
	ck_assert_int_eq(r.docs, 60000);
	out = run("git -C %s rev-parse main:shop/a main:shop/b", repo);
	ck_assert_int_eq(strlen(out), 82);
	ck_assert_int_eq(strncmp(out, out + 41, 40), 0);
	free(out);
	out = run("cd %s && git verify-pack -v objects/pack/*.idx | grep -c ' tree '", repo);
	/* a (= b), shop and the root, in each of the two snapshots: no tree twice */
	ck_assert_str_eq(out, "6\n");
	free(out);
	check_idx();
	check_like_fresh("a");
}
END_TEST

/* Random changes between snapshots: each incremental tree is a fresh snapshot's. */
START_TEST(test_store_snapshot_patch_random)
{
	int64_t colls[2] = {make_coll("users"), make_coll("other")};
	const char *names[2] = {"users", "other"};
	int npatched = 0;

	seed_start(6, 0x5eed);
	fill(colls[0], 40);
	fill(colls[1], 10);
	snap(NULL, NULL);
	for (int round = 0; round < 12; round++) {
		int nops = 1 + (int)rnd(12);

		for (int k = 0; k < nops; k++) {
			int c = (int)rnd(2), op = (int)rnd(6);
			char name[32], name2[40], text[96];
			struct dfs_err err = {0};
			struct store_txn *t;
			struct store_entry e;
			int found;

			snprintf(name, sizeof(name), "%u.json", rnd(60));
			snprintf(name2, sizeof(name2), "%u.json", rnd(60));
			snprintf(text, sizeof(text), "{\"r\": %d, \"k\": %d, \"x\": %u}", round, k,
				 rnd(1000));
			ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
			found = store_entry_lookup(t, colls[c], name, &e, NULL) == 0;
			if (op <= 1 || !found) {
				ck_assert_msg(store_doc_write_text(t, colls[c], name, text,
								   strlen(text), &attrs, NULL,
								   &err) == 0,
					      "%s", err.msg);
			} else if (op == 2) {
				ck_assert_int_eq(store_entry_delete(t, e.id, &err), 0);
			} else if (op == 3) {
				ck_assert_msg(store_entry_rename(t, e.id, colls[rnd(2)], name2,
								 NULL, &err) == 0,
					      "%s", err.msg);
			} else if (op == 4) {
				/* An editor's backup rename: the id waits in 'vacated'. */
				snprintf(name2, sizeof(name2), "%s~", name);
				ck_assert_msg(store_entry_rename(t, e.id, colls[c], name2, NULL,
								 &err) == 0,
					      "%s", err.msg);
			} else {
				struct store_attrs a = {0600, 1, 1, 0};

				ck_assert_int_eq(
					store_entry_setattr(t, e.id, STORE_SET_MODE, &a, &err), 0);
			}
			ck_assert_int_eq(store_txn_commit(t, &err), 0);
		}
		snap(NULL, NULL);
		for (int c = 0; c < 2; c++) {
			npatched += patched(names[c]);
			check_like_fresh(names[c]);
		}
	}
	ck_assert_msg(npatched >= 12, "only %d of 24 trees patched", npatched);
	check_idx();
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
	tcase_add_test(tc, test_store_snapshot_patch_like_fresh);
	tcase_add_test(tc, test_store_snapshot_walk_when_feed_cannot_tell);
	tcase_add_test(tc, test_store_snapshot_patch_same_tree_twice);
	tcase_add_test(tc, test_store_snapshot_patch_random);
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
