/*
 * test_insert.c - unit tests of the streaming bulk inserter (fs/paths/insert.c) behind `.insert`
 * and `docfs import`: chunks large enough to be scanned on a second thread keep the ordered
 * semantics (the documents before a bad one are committed, none after it, the error names
 * the document and its line), and documents split across chunks are inserted once.
 */
#include "fs_int.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];
static struct store *st;
static struct store_db *db;
static int64_t coll;
static const struct store_attrs attrs = {0644, 1000, 1000, 0};

static void setup(void)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-insert-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "test", true, &db, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_create(t, "users", 0755, 0, 0, &c, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	coll = c.id;
}

static void teardown(void)
{
	char cmd[300];

	store_free(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static int64_t ndocs(void)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	int64_t n = -1;

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_coll_count(t, coll, &n, NULL, &err), 0);
	store_txn_abort(t);
	return n;
}

/* Whether document "<id>.json" exists and has its rendered length as its size. */
static bool has_doc(int i)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;
	struct dfs_buf b;
	char name[32];
	bool ok;

	snprintf(name, sizeof(name), "%d.json", i);
	dfs_buf_init(&b);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ok = store_entry_lookup(t, coll, name, &e, &err) == 0;
	if (ok) {
		ck_assert_int_eq(store_entry_read(t, e.id, &b, &err), 0);
		ck_assert_int_eq(e.size, (int64_t)b.len);
	}
	store_txn_abort(t);
	dfs_buf_release(&b);
	return ok;
}

/* JSON Lines of n documents {_id: i, ...} (i from 1), the one at bad (if any) replaced. */
static void lines(struct dfs_buf *b, int n, int bad, const char *bad_text)
{
	for (int i = 1; i <= n; i++) {
		if (i == bad)
			dfs_buf_printf(b, "%s\n", bad_text);
		else
			dfs_buf_printf(b,
				       "{\"_id\": %d, \"name\": \"user %d\", \"tags\": [\"a\", "
				       "\"b\"], \"at\": {\"$date\": \"2020-01-02T03:04:05Z\"}}\n",
				       i, i);
	}
}

START_TEST(test_fs_inserter_feed_large_chunk_inserts_all)
{
	struct fs_inserter in;
	struct dfs_buf b;

	dfs_buf_init(&b);
	lines(&b, 3000, 0, NULL);
	ck_assert_uint_gt(b.len, 64 * 1024);
	fs_inserter_init(&in, db, coll, &attrs);
	ck_assert_int_eq(fs_inserter_feed(&in, b.data, b.len, false), 0);
	ck_assert_int_eq(fs_inserter_feed(&in, "", 0, true), 0);
	ck_assert_int_eq(in.ndocs, 3000);
	ck_assert_int_eq(ndocs(), 3000);
	ck_assert(has_doc(1) && has_doc(1500) && has_doc(3000));
	fs_inserter_release(&in);
	dfs_buf_release(&b);
}
END_TEST

/* Chunks cut anywhere (inside documents too), small and large. */
START_TEST(test_fs_inserter_feed_split_chunks)
{
	static const size_t cuts[] = {7, 40000, 13, 100000, 1};
	struct fs_inserter in;
	struct dfs_buf b;
	size_t off = 0;

	dfs_buf_init(&b);
	lines(&b, 4000, 0, NULL);
	fs_inserter_init(&in, db, coll, &attrs);
	for (int i = 0; off < b.len; i++) {
		size_t n = cuts[i % 5];

		if (n > b.len - off)
			n = b.len - off;
		ck_assert_int_eq(fs_inserter_feed(&in, b.data + off, n, false), 0);
		off += n;
	}
	ck_assert_int_eq(fs_inserter_feed(&in, "", 0, true), 0);
	ck_assert_int_eq(ndocs(), 4000);
	ck_assert(has_doc(1) && has_doc(2222) && has_doc(4000));
	fs_inserter_release(&in);
	dfs_buf_release(&b);
}
END_TEST

/* A syntax error deep in a large chunk: the documents before it are in, none after. */
START_TEST(test_fs_inserter_feed_large_chunk_stops_at_bad_document)
{
	struct fs_inserter in;
	struct dfs_buf b;

	dfs_buf_init(&b);
	lines(&b, 3000, 2000, "{\"_id\": 2000, \"oops\": }");
	fs_inserter_init(&in, db, coll, &attrs);
	ck_assert_int_eq(fs_inserter_feed(&in, b.data, b.len, false), DFS_EINVAL);
	ck_assert_msg(strncmp(in.err.msg, "document 2000 (line 2000): ", 27) == 0, "%s",
		      in.err.msg);
	ck_assert_int_eq(ndocs(), 1999);
	ck_assert(has_doc(1999) && !has_doc(2000) && !has_doc(2001));
	/* every later call returns the same error */
	ck_assert_int_eq(fs_inserter_feed(&in, "{}", 2, true), DFS_EINVAL);
	ck_assert_int_eq(ndocs(), 1999);
	fs_inserter_release(&in);
	dfs_buf_release(&b);
}
END_TEST

/* A duplicate _id (an insert error, not a scan error) in a large chunk. */
START_TEST(test_fs_inserter_feed_large_chunk_stops_at_duplicate)
{
	struct fs_inserter in;
	struct dfs_buf b;

	dfs_buf_init(&b);
	lines(&b, 3000, 2500, "{\"_id\": 7}");
	fs_inserter_init(&in, db, coll, &attrs);
	ck_assert_int_eq(fs_inserter_feed(&in, b.data, b.len, false), DFS_EEXIST);
	ck_assert_msg(strncmp(in.err.msg, "document 2500 (line 2500): duplicate _id", 40) == 0,
		      "%s", in.err.msg);
	ck_assert_int_eq(ndocs(), 2499);
	ck_assert(has_doc(2499) && !has_doc(2500) && !has_doc(2501));
	fs_inserter_release(&in);
	dfs_buf_release(&b);
}
END_TEST

/* Text that is not a document after the last one, at the end of the stream. */
START_TEST(test_fs_inserter_feed_trailing_text_fails_at_end)
{
	struct fs_inserter in;
	struct dfs_buf b;

	dfs_buf_init(&b);
	lines(&b, 3000, 0, NULL);
	dfs_buf_puts(&b, "{\"_id\": 3001, \"cut\": ");
	fs_inserter_init(&in, db, coll, &attrs);
	ck_assert_int_eq(fs_inserter_feed(&in, b.data, b.len, false), 0);
	ck_assert_int_eq(ndocs(), 3000);
	/* DFS_EINCOMPLETE: the mount reports it as EINVAL */
	ck_assert_int_eq(fs_inserter_feed(&in, "", 0, true), DFS_EINCOMPLETE);
	ck_assert_msg(strstr(in.err.msg, "document 3001 (line 3001)") != NULL, "%s", in.err.msg);
	ck_assert_int_eq(ndocs(), 3000);
	fs_inserter_release(&in);
	dfs_buf_release(&b);
}
END_TEST

/* JSON array mode over a large chunk, and its error after a document. */
START_TEST(test_fs_inserter_feed_json_array)
{
	struct fs_inserter in;
	struct dfs_buf b;

	dfs_buf_init(&b);
	dfs_buf_puts(&b, "[\n");
	for (int i = 1; i <= 3000; i++)
		dfs_buf_printf(&b, "{\"_id\": %d, \"pad\": \"xxxxxxxxxxxxxxxxxxxxxxxx\"}%s\n", i,
			       i < 3000 ? "," : "");
	dfs_buf_puts(&b, "]\n");
	fs_inserter_init(&in, db, coll, &attrs);
	in.json_array = true;
	ck_assert_int_eq(fs_inserter_feed(&in, b.data, b.len, true), 0);
	ck_assert_int_eq(ndocs(), 3000);
	fs_inserter_release(&in);
	dfs_buf_reset(&b);
	dfs_buf_puts(&b, "[\n");
	for (int i = 3001; i <= 6000; i++)
		dfs_buf_printf(&b, "{\"_id\": %d, \"pad\": \"xxxxxxxxxxxxxxxxxxxxxxxx\"}%s\n", i,
			       i == 5000 ? " ;" : ",");
	fs_inserter_init(&in, db, coll, &attrs);
	in.json_array = true;
	ck_assert_int_eq(fs_inserter_feed(&in, b.data, b.len, false), DFS_EINVAL);
	ck_assert_msg(strstr(in.err.msg, "line 2001: expected ',' or ']' after document 2000") !=
			      NULL,
		      "%s", in.err.msg);
	ck_assert_int_eq(ndocs(), 5000);
	fs_inserter_release(&in);
	dfs_buf_release(&b);
}
END_TEST

/* errors at the queue's batch and capacity boundaries, scan and insert errors. */
START_TEST(test_fs_inserter_feed_error_at_queue_boundaries)
{
	static const int pos[] = {1, 2, 31, 32, 33, 64, 224, 225, 255, 256, 257, 288, 289, 3000};
	int64_t base = 0;

	for (size_t p = 0; p < sizeof(pos) / sizeof(pos[0]); p++) {
		for (int kind = 0; kind < 2; kind++) {
			struct fs_inserter in;
			struct dfs_buf b;
			char bad[64], want[64];
			int rc;

			/* fresh collection each time */
			{
				struct dfs_err err = {0};
				struct store_txn *t;
				struct store_coll c;
				char cn[32];

				snprintf(cn, sizeof(cn), "c%zu_%d", p, kind);
				ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
				ck_assert_int_eq(store_coll_create(t, cn, 0755, 0, 0, &c, &err), 0);
				ck_assert_int_eq(store_txn_commit(t, &err), 0);
				coll = c.id;
			}
			if (kind == 0)
				snprintf(bad, sizeof(bad), "{\"_id\": %d, \"oops\": }", pos[p]);
			else
				snprintf(bad, sizeof(bad), "{\"_id\": %d}", pos[p] > 1 ? 1 : 0);
			dfs_buf_init(&b);
			lines(&b, 3000, pos[p], bad);
			if (kind == 1 && pos[p] == 1) {
				/* a duplicate at 1 needs an existing _id 0 */
				struct fs_inserter pre;

				fs_inserter_init(&pre, db, coll, &attrs);
				ck_assert_int_eq(fs_inserter_feed(&pre, "{\"_id\": 0}", 10, true),
						 0);
				fs_inserter_release(&pre);
				base = 1;
			} else {
				base = 0;
			}
			fs_inserter_init(&in, db, coll, &attrs);
			rc = fs_inserter_feed(&in, b.data, b.len, false);
			ck_assert_int_eq(rc, kind == 0 ? DFS_EINVAL : DFS_EEXIST);
			snprintf(want, sizeof(want), "document %d (line %d): ", pos[p], pos[p]);
			ck_assert_msg(strncmp(in.err.msg, want, strlen(want)) == 0, "%d/%d: %s",
				      pos[p], kind, in.err.msg);
			ck_assert_int_eq(ndocs(), pos[p] - 1 + base);
			ck_assert(pos[p] == 1 || has_doc(pos[p] - 1));
			ck_assert(!has_doc(pos[p] + 1));
			fs_inserter_release(&in);
			dfs_buf_release(&b);
		}
	}
}
END_TEST

/* a large chunk holding fewer than 32 documents (the inserter waits for a batch the
 * scan never fills), and big documents cut across chunks. */
START_TEST(test_fs_inserter_feed_few_big_documents)
{
	struct fs_inserter in;
	struct dfs_buf b, pad;
	size_t off = 0;

	dfs_buf_init(&b);
	dfs_buf_init(&pad);
	for (int i = 0; i < 9000; i++)
		dfs_buf_putc(&pad, 'x');
	for (int i = 1; i <= 40; i++)
		dfs_buf_printf(&b, "{\"_id\": %d, \"pad\": \"%s\"}\n", i, pad.data);
	fs_inserter_init(&in, db, coll, &attrs);
	/* 5 documents + part of the sixth per call: threaded, fewer than 32 queued */
	while (off < b.len) {
		size_t n = 50000;

		if (n > b.len - off)
			n = b.len - off;
		ck_assert_int_eq(fs_inserter_feed(&in, b.data + off, n, false), 0);
		off += n;
	}
	ck_assert_int_eq(fs_inserter_feed(&in, "", 0, true), 0);
	ck_assert_int_eq(ndocs(), 40);
	for (int i = 1; i <= 40; i++)
		ck_assert(has_doc(i));
	fs_inserter_release(&in);
	dfs_buf_release(&b);
	dfs_buf_release(&pad);
}
END_TEST

/* The queue's slots keep their buffers from call to call: documents that shrink and grow
 * from one chunk to the next still get their own bytes, key, name and size. */
START_TEST(test_fs_inserter_feed_reuses_slots_across_calls)
{
	struct fs_inserter in;
	struct dfs_buf b, pad;
	int id = 0;

	dfs_buf_init(&pad);
	for (int i = 0; i < 3000; i++)
		dfs_buf_putc(&pad, 'x');
	fs_inserter_init(&in, db, coll, &attrs);
	for (int round = 0; round < 4; round++) {
		dfs_buf_init(&b);
		/* Big documents in even rounds, small ones in odd rounds, enough of them to
		 * use the scan thread and every slot of the queue. */
		for (int i = 0; i < (round % 2 ? 2000 : 300); i++) {
			id++;
			dfs_buf_printf(&b, "{\"_id\": %d, \"s\": \"%.*s\"}\n", id,
				       round % 2 ? id % 7 : 1000 + id % 2000, pad.data);
		}
		ck_assert_uint_gt(b.len, 32 * 1024);
		ck_assert_int_eq(fs_inserter_feed(&in, b.data, b.len, false), 0);
		dfs_buf_release(&b);
	}
	ck_assert_int_eq(fs_inserter_feed(&in, "", 0, true), 0);
	ck_assert_int_eq(in.ndocs, id);
	ck_assert_int_eq(ndocs(), id);
	for (int i = 1; i <= id; i += 97)
		ck_assert(has_doc(i));
	ck_assert(has_doc(id));
	fs_inserter_release(&in);
	dfs_buf_release(&pad);
}
END_TEST

static void no_problem(void *ctx, const char *p)
{
	ck_abort_msg("check: %s", p);
}

/* More than a checkpoint's worth of WAL (db.c note 6: the checkpointer thread, started by a
 * commit): everything is there after the store is closed (which stops the thread) and
 * opened again, and the store checks sound. */
START_TEST(test_fs_inserter_feed_past_checkpoints_keeps_all)
{
	struct dfs_err err = {0};
	struct fs_inserter in;
	struct dfs_buf b, pad;
	int n = 0;

	dfs_buf_init(&pad);
	for (int i = 0; i < 16000; i++)
		dfs_buf_putc(&pad, 'a' + i % 26);
	fs_inserter_init(&in, db, coll, &attrs);
	/* 48 MiB in 1 MiB calls, each its own transaction: past the 32 MiB threshold. */
	for (int round = 0; round < 48; round++) {
		dfs_buf_init(&b);
		while (b.len < 1024 * 1024 - 17000)
			dfs_buf_printf(&b, "{\"_id\": %d, \"s\": \"%s\"}\n", ++n, pad.data);
		ck_assert_int_eq(fs_inserter_feed(&in, b.data, b.len, false), 0);
		dfs_buf_release(&b);
	}
	ck_assert_int_eq(fs_inserter_feed(&in, "", 0, true), 0);
	fs_inserter_release(&in);
	dfs_buf_release(&pad);
	store_free(st);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "test", false, &db, &err), 0);
	ck_assert_int_eq(ndocs(), n);
	ck_assert(has_doc(1) && has_doc(n / 2) && has_doc(n));
	ck_assert_msg(store_check(st, no_problem, NULL, &err) == 0, "%s", err.msg);
}
END_TEST

static Suite *insert_suite(void)
{
	Suite *s = suite_create("insert");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fs_inserter_feed_large_chunk_inserts_all);
	tcase_add_test(tc, test_fs_inserter_feed_split_chunks);
	tcase_add_test(tc, test_fs_inserter_feed_large_chunk_stops_at_bad_document);
	tcase_add_test(tc, test_fs_inserter_feed_large_chunk_stops_at_duplicate);
	tcase_add_test(tc, test_fs_inserter_feed_trailing_text_fails_at_end);
	tcase_add_test(tc, test_fs_inserter_feed_json_array);
	tcase_add_test(tc, test_fs_inserter_feed_error_at_queue_boundaries);
	tcase_add_test(tc, test_fs_inserter_feed_few_big_documents);
	tcase_add_test(tc, test_fs_inserter_feed_reuses_slots_across_calls);
	tcase_add_test(tc, test_fs_inserter_feed_past_checkpoints_keeps_all);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(insert_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
