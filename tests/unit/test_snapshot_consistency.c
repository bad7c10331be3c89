/*
 * test_snapshot_consistency.c - a snapshot taken while 4 writers run is one committed state:
 * each writer transaction inserts a document and increments a counter document, so in any
 * committed state the counter equals the number of inserted documents, and every document
 * holds the version its name says. Several snapshots are taken while the writers run.
 */
#include "store.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRITERS 4
#define SNAPSHOTS 5

static char tmpdir[256];
static struct store *st;
static struct store_db *db;
static int64_t coll;
static volatile int stop;

static void *writer(void *arg)
{
	int k = (int)(intptr_t)arg;

	for (int n = 0; !stop && n < 100000; n++) {
		struct dfs_err err = {0};
		struct store_attrs a = {0644, 0, 0, 0};
		struct store_txn *t;
		struct store_entry e;
		char name[64], text[128];
		bson_t counter;
		bson_iter_t it;
		int64_t count = 0;

		ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
		snprintf(name, sizeof(name), "w%d-%d.json", k, n);
		snprintf(text, sizeof(text), "{\"k\": %d, \"n\": %d}", k, n);
		ck_assert_msg(store_doc_write_text(t, coll, name, text, strlen(text), &a, &e, &err) == 0,
			      "%s", err.msg);
		ck_assert_int_eq(store_entry_lookup(t, coll, "counter.json", &e, &err), 0);
		bson_init(&counter);
		ck_assert_int_eq(store_doc_get(t, e.id, &counter, &err), 0);
		ck_assert(bson_iter_init_find(&it, &counter, "n"));
		count = bson_iter_as_int64(&it) + 1;
		bson_destroy(&counter);
		snprintf(text, sizeof(text), "{\"n\": NumberLong(%lld)}", (long long)count);
		ck_assert_int_eq(store_doc_write_text(t, coll, "counter.json", text, strlen(text), &a,
						      &e, &err),
				 0);
		ck_assert_int_eq(store_txn_commit(t, &err), 0);
	}
	return NULL;
}

struct tally {
	int64_t docs;
	int64_t counter;
	struct store_git *g;
	const char *commit;
};

static int check_entry(void *ctx, const struct store_git_entry *e)
{
	struct tally *ta = ctx;
	struct dfs_err err = {0};
	struct dfs_buf b;
	char path[300];
	bson_t doc;
	bson_iter_t it;

	if (strcmp(e->name, ".indexes.json") == 0 || strcmp(e->name, ".attrs.json") == 0)
		return 0;
	snprintf(path, sizeof(path), "db/c/%s", e->name);
	dfs_buf_init(&b);
	ck_assert_msg(store_git_read(ta->g, ta->commit, path, &b, &err) == 0, "%s", err.msg);
	bson_init(&doc);
	ck_assert_msg(store_codec_parse_doc(b.data, b.len, &doc, &err) == 0, "%s: %s", path, err.msg);
	if (strcmp(e->name, "counter.json") == 0) {
		ck_assert(bson_iter_init_find(&it, &doc, "n"));
		ta->counter = bson_iter_as_int64(&it);
	} else {
		int k, n;

		/* A whole, committed version: the fields agree with the name. */
		ck_assert_int_eq(sscanf(e->name, "w%d-%d.json", &k, &n), 2);
		ck_assert(bson_iter_init_find(&it, &doc, "k") && bson_iter_as_int64(&it) == k);
		ck_assert(bson_iter_init_find(&it, &doc, "n") && bson_iter_as_int64(&it) == n);
		ta->docs++;
	}
	bson_destroy(&doc);
	dfs_buf_release(&b);
	return 0;
}

START_TEST(test_store_snapshot_consistent_under_writers)
{
	struct store_snap_opts o = {.db = "db", .coll = "c", .message = "during writes"};
	struct dfs_err err = {0};
	struct store_attrs a = {0644, 0, 0, 0};
	pthread_t th[WRITERS];
	struct store_txn *t;
	struct store_coll c;
	struct store_entry e;
	char cmd[300];

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-snapc-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "db", true, &db, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_create(t, "c", 0755, 0, 0, &c, &err), 0);
	ck_assert_int_eq(store_doc_write_text(t, c.id, "counter.json", "{\"n\": NumberLong(0)}", 20,
					      &a, &e, &err),
			 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	coll = c.id;
	stop = 0;
	for (int k = 0; k < WRITERS; k++)
		ck_assert_int_eq(pthread_create(&th[k], NULL, writer, (void *)(intptr_t)k), 0);
	for (int i = 0; i < SNAPSHOTS; i++) {
		struct store_snap_result r;
		struct tally ta = {0};
		struct store_git *g;

		memset(&r, 0, sizeof(r));
		ck_assert_msg(store_snapshot(st, &o, &r, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(store_git_open(st, NULL, &g, &err), 0);
		ta.g = g;
		ta.commit = r.commit;
		ck_assert_int_eq(store_git_list(g, r.commit, "db/c", check_entry, &ta, &err), 0);
		store_git_free(g);
		ck_assert_msg(ta.counter == ta.docs,
			      "snapshot %d: counter %lld but %lld documents: not one committed state", i,
			      (long long)ta.counter, (long long)ta.docs);
		ck_assert_int_eq(r.docs, ta.docs + 1);
	}
	stop = 1;
	for (int k = 0; k < WRITERS; k++)
		pthread_join(th[k], NULL);
	store_free(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("snapshot_consistency");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_store_snapshot_consistent_under_writers);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
