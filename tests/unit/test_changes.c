/*
 * test_changes.c - unit tests of change streams in the store (store/changes.c and its hooks
 * in doc.c, db.c and index.c): the event each write records in its own transaction (insert,
 * update with updateDescription, replace, delete, a document renamed to another _id, drop
 * and rename of a collection with their invalidates, createIndexes/dropIndexes), nothing
 * recorded by a write that failed, tokens that parse back and sort in event order, offsets
 * that only grow through trimming, and the cut that marks lost history; the compact rows
 * (note 6): every line exactly the whole event rendered as one document, an insert showing
 * what was inserted whatever happened to the document after, and a version-8 store, whose
 * rows are text, migrated and read byte for byte. Each test uses its own temporary store.
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

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-changes-XXXXXX");
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

/* The events of a stream, collected. */
struct evs {
	int n;
	int op[64];
	int64_t seq[64], off[64];
	char coll[64][64];
	char line[64][1024];
};

static int collect(void *ctx, const struct store_event *e)
{
	struct evs *v = ctx;

	if (v->n == 64)
		return 1;
	v->op[v->n] = e->op;
	v->seq[v->n] = e->seq;
	v->off[v->n] = e->off;
	snprintf(v->coll[v->n], sizeof(v->coll[0]), "%s", e->coll ? e->coll : "");
	snprintf(v->line[v->n], sizeof(v->line[0]), "%.*s", (int)e->len, e->line);
	v->n++;
	return 0;
}

static void list(const char *coll, int64_t after, struct evs *v)
{
	struct dfs_err err = {0};
	struct store_txn *t;

	memset(v, 0, sizeof(*v));
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_msg(store_events_list(t, coll, after, collect, v, &err) == 0, "%s", err.msg);
	store_txn_abort(t);
}

static void span(const char *coll, struct store_events_span *sp)
{
	struct dfs_err err = {0};
	struct store_txn *t;

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_msg(store_events_span(t, coll, sp, &err) == 0, "%s", err.msg);
	store_txn_abort(t);
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

static int put_text(int64_t coll, const char *name, const char *text, struct dfs_err *err)
{
	struct store_txn *t;
	int rc;

	ck_assert_int_eq(store_txn_begin(db, true, &t, err), 0);
	rc = store_doc_write_text(t, coll, name, text, strlen(text), &attrs, NULL, err);
	if (rc) {
		store_txn_abort(t);
		return rc;
	}
	return store_txn_commit(t, err);
}

static int64_t entry_of(int64_t coll, const char *name)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_msg(store_entry_lookup(t, coll, name, &e, &err) == 0, "%s", err.msg);
	store_txn_abort(t);
	return e.id;
}

static void update_op(int64_t coll, const char *name, const char *newtext)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	bson_t doc, prepared;
	int64_t id = entry_of(coll, name);

	bson_init(&doc);
	bson_init(&prepared);
	ck_assert_int_eq(store_codec_parse_doc(newtext, strlen(newtext), &doc, &err), 0);
	ck_assert_int_eq(store_doc_prepare(&doc, NULL, &prepared, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_doc_update_op(t, id, &prepared, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	bson_destroy(&doc);
	bson_destroy(&prepared);
}

START_TEST(test_store_events_record_document_writes)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct evs v;
	int64_t coll = make_coll("items");

	ck_assert_int_eq(put_text(coll, "1.json", "{\"a\": 1, \"tags\": [\"x\", \"y\"], \"z\": 0}",
				  &err),
			 0);
	ck_assert_int_eq(put_text(coll, "1.json", "{\"a\": 2}", &err), 0); /* a whole file */
	update_op(coll, "1.json", "{\"_id\": 1, \"a\": 3, \"tags\": [\"x\"], \"n\": {\"b\": 1}}");
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_delete(t, entry_of(coll, "1.json"), &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	list("items", 0, &v);
	ck_assert_int_eq(v.n, 4);
	ck_assert_int_eq(v.op[0], STORE_EV_INSERT);
	ck_assert_int_eq(v.op[1], STORE_EV_REPLACE);
	ck_assert_int_eq(v.op[2], STORE_EV_UPDATE);
	ck_assert_int_eq(v.op[3], STORE_EV_DELETE);
	ck_assert_ptr_nonnull(strstr(v.line[0], "\"operationType\": \"insert\""));
	ck_assert_ptr_nonnull(
		strstr(v.line[0], "\"fullDocument\": {\"_id\": 1, \"a\": 1, \"tags\": [\"x\", \"y\"], "
				  "\"z\": 0}, \"ns\": {\"db\": \"shop\", \"coll\": \"items\"}, "
				  "\"documentKey\": {\"_id\": 1}}\n"));
	ck_assert_ptr_nonnull(strstr(v.line[1], "\"fullDocument\": {\"_id\": 1, \"a\": 2}"));
	/* replace -> {a: 3, tags: [x], n: {b: 1}}: from {a: 2} all three are set */
	ck_assert_msg(strstr(v.line[2], "\"updateDescription\": {\"updatedFields\": {\"a\": 3, "
					"\"tags\": [\"x\"], \"n\": {\"b\": 1}}, \"removedFields\": [], "
					"\"truncatedArrays\": []}") != NULL,
		      "%s", v.line[2]);
	ck_assert_ptr_null(strstr(v.line[2], "fullDocument"));
	ck_assert_ptr_nonnull(strstr(v.line[3], "\"documentKey\": {\"_id\": 1}}\n"));
	ck_assert_ptr_null(strstr(v.line[3], "fullDocument"));
	/* seqs and offsets in order, lines back to back */
	for (int i = 1; i < v.n; i++) {
		ck_assert_int_gt(v.seq[i], v.seq[i - 1]);
		ck_assert_int_eq(v.off[i], v.off[i - 1] + (int64_t)strlen(v.line[i - 1]));
	}
}
END_TEST

START_TEST(test_store_events_update_description_paths)
{
	struct dfs_err err = {0};
	struct evs v;
	int64_t coll = make_coll("items");

	ck_assert_int_eq(put_text(coll, "7.json",
				  "{\"a\": {\"b\": 1, \"c\": 2}, \"arr\": [1, 2, 3], \"gone\": true}",
				  &err),
			 0);
	update_op(coll, "7.json", "{\"_id\": 7, \"a\": {\"b\": 5, \"c\": 2}, \"arr\": [1, 9]}");
	update_op(coll, "7.json", "{\"_id\": 7, \"a\": {\"b\": 5, \"c\": 2}, \"arr\": [1, 9, 4]}");
	list("items", 0, &v);
	ck_assert_int_eq(v.n, 3);
	ck_assert_msg(strstr(v.line[1], "{\"updatedFields\": {\"a.b\": 5, \"arr.1\": 9}, "
					"\"removedFields\": [\"gone\"], \"truncatedArrays\": "
					"[{\"field\": \"arr\", \"newSize\": 2}]}") != NULL,
		      "%s", v.line[1]);
	ck_assert_msg(strstr(v.line[2], "{\"updatedFields\": {\"arr.2\": 4}, \"removedFields\": [], "
					"\"truncatedArrays\": []}") != NULL,
		      "%s", v.line[2]);
}
END_TEST

START_TEST(test_store_events_failed_write_records_nothing)
{
	struct dfs_err err = {0};
	struct evs v;
	int64_t coll = make_coll("items");

	ck_assert_int_eq(put_text(coll, "1.json", "{\"a\": 1}", &err), 0);
	ck_assert_int_ne(put_text(coll, "2.json", "{\"a\": ", &err), 0);
	list("items", 0, &v);
	ck_assert_int_eq(v.n, 1);
}
END_TEST

START_TEST(test_store_events_rename_drop_invalidate_indexes)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct evs v;
	int64_t coll = make_coll("items"), other = make_coll("other");
	bson_t spec;
	char used[128];

	ck_assert_int_eq(put_text(coll, "1.json", "{\"a\": 1}", &err), 0);
	/* a document renamed to another _id: a delete and an insert */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_entry_rename(t, entry_of(coll, "1.json"), coll, "2.json", NULL, &err) ==
			      0,
		      "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	bson_init(&spec);
	ck_assert_int_eq(store_codec_parse_doc("{\"key\": {\"a\": 1}}", 17, &spec, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_index_create(t, coll, &spec, used, sizeof(used), NULL, NULL, &err) == 0,
		      "%s", err.msg);
	ck_assert_int_eq(store_index_drop(t, coll, "a_1", &err), 0);
	ck_assert_int_eq(store_coll_rename(t, coll, "things", &err), 0);
	ck_assert_int_eq(store_coll_drop(t, other, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	bson_destroy(&spec);
	list("items", 0, &v);
	ck_assert_int_eq(v.n, 7);
	ck_assert_int_eq(v.op[1], STORE_EV_DELETE);
	ck_assert_int_eq(v.op[2], STORE_EV_INSERT);
	ck_assert_ptr_nonnull(strstr(v.line[2], "\"documentKey\": {\"_id\": 2}"));
	ck_assert_int_eq(v.op[3], STORE_EV_CREATE_INDEXES);
	ck_assert_ptr_nonnull(strstr(v.line[3], "\"operationDescription\": {\"indexes\": [{\"v\": 2, "
						"\"key\": {\"a\": 1}, \"name\": \"a_1\"}]}"));
	ck_assert_int_eq(v.op[4], STORE_EV_DROP_INDEXES);
	ck_assert_int_eq(v.op[5], STORE_EV_RENAME);
	ck_assert_ptr_nonnull(strstr(v.line[5], "\"to\": {\"db\": \"shop\", \"coll\": \"things\"}"));
	ck_assert_int_eq(v.op[6], STORE_EV_INVALIDATE);
	list("other", 0, &v);
	ck_assert_int_eq(v.n, 2);
	ck_assert_int_eq(v.op[0], STORE_EV_DROP);
	ck_assert_int_eq(v.op[1], STORE_EV_INVALIDATE);
	/* the database's stream has no invalidates */
	list(NULL, 0, &v);
	ck_assert_int_eq(v.n, 7);
	for (int i = 0; i < v.n; i++)
		ck_assert_int_ne(v.op[i], STORE_EV_INVALIDATE);
}
END_TEST

START_TEST(test_store_event_tokens_sort_and_parse)
{
	char a[STORE_TOKEN_LEN + 1], b[STORE_TOKEN_LEN + 1];
	struct dfs_err err = {0};
	uint32_t dbnum;
	uint64_t ts;
	int64_t seq;

	store_event_token(3, (uint64_t)1700000000 << 32 | 9, 255, a);
	store_event_token(3, (uint64_t)1700000000 << 32 | 10, 256, b);
	ck_assert_int_eq((int)strlen(a), STORE_TOKEN_LEN);
	ck_assert_int_lt(strcmp(a, b), 0);
	ck_assert_str_eq(a, "826553F10000000009010000000300000000000000FF");
	ck_assert_int_eq(store_event_token_parse(a, &dbnum, &ts, &seq, &err), 0);
	ck_assert_int_eq(dbnum, 3);
	ck_assert_uint_eq(ts, (uint64_t)1700000000 << 32 | 9);
	ck_assert_int_eq(seq, 255);
	ck_assert_int_eq(store_event_token_parse("82zz", &dbnum, &ts, &seq, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "FailedToParse"));
	dfs_err_clear(&err);
	ck_assert_int_eq(store_event_token_parse("8200", &dbnum, &ts, &seq, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "InvalidResumeToken"));
}
END_TEST

START_TEST(test_store_events_trim_keeps_offsets_growing)
{
	struct dfs_err err = {0};
	struct store_events_span before, after, cs;
	struct store_txn *t;
	struct evs v;
	int64_t coll = make_coll("items");
	char name[32], text[600];

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_events_set_keep(t, 100, &err), DFS_EINVAL);
	ck_assert_int_eq(store_events_set_keep(t, 8192, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"pad\": \"%0400d\"}", i);
		ck_assert_int_eq(put_text(coll, name, text, &err), 0);
		if (i == 10)
			span(NULL, &before);
	}
	span(NULL, &after);
	span("items", &cs);
	ck_assert_int_gt(after.cut, 0);
	ck_assert_int_gt(after.start, 0);
	ck_assert_int_le(after.end - after.start, 9216 + 16 * 700); /* checked every 16 */
	ck_assert_int_gt(after.end, before.end);
	ck_assert_int_eq(cs.end, after.end); /* one collection: the same bytes */
	ck_assert_int_eq(after.last_seq, 300);
	/* the first event kept follows the cut */
	list(NULL, 0, &v);
	ck_assert_int_eq(v.seq[0], after.cut + 1);
	ck_assert_int_eq(v.off[0], after.start);
	/* a collection dropped with all its events trimmed keeps its end */
	{
		int64_t end = cs.end;

		ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
		ck_assert_int_eq(store_coll_drop(t, coll, &err), 0);
		ck_assert_int_eq(store_txn_commit(t, &err), 0);
		int64_t o = make_coll("other");

		for (int i = 0; i < 300; i++) {
			snprintf(name, sizeof(name), "%d.json", i);
			snprintf(text, sizeof(text), "{\"pad\": \"%0400d\"}", i);
			ck_assert_int_eq(put_text(o, name, text, &err), 0);
		}
		coll = make_coll("items");
		ck_assert_int_eq(put_text(coll, "1.json", "{\"back\": true}", &err), 0);
		span("items", &cs);
		ck_assert_int_gt(cs.start, end);
	}
}
END_TEST

START_TEST(test_store_events_keep_zero_records_nothing)
{
	struct dfs_err err = {0};
	struct store_events_span sp;
	struct store_txn *t;
	struct evs v;
	int64_t coll = make_coll("items");

	ck_assert_int_eq(put_text(coll, "1.json", "{\"a\": 1}", &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_events_set_keep(t, 0, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(put_text(coll, "2.json", "{\"a\": 2}", &err), 0);
	list(NULL, 0, &v);
	ck_assert_int_eq(v.n, 0);
	span(NULL, &sp);
	ck_assert_int_eq(sp.cut, 1); /* the one event before */
	ck_assert_int_gt(sp.end, 0);
	ck_assert_int_eq(sp.start, sp.end);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_events_set_keep(t, 1 << 20, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(put_text(coll, "3.json", "{\"a\": 3}", &err), 0);
	list(NULL, 0, &v);
	ck_assert_int_eq(v.n, 1);
	ck_assert_int_eq(v.seq[0], 2); /* after the cut, never a token seen before */
	ck_assert_int_eq(v.off[0], sp.end);
}
END_TEST

/* The bytes of the database's stream from offset 0 to its end, as a plain `.changes` reads
 * them (gaps and trimmed history as blanks), into out. */
static void stream_bytes(const char *coll, struct dfs_buf *out)
{
	struct evs v;
	struct store_events_span sp;

	dfs_buf_reset(out);
	span(coll, &sp);
	list(coll, 0, &v);
	ck_assert_int_lt(v.n, 64);
	for (int i = 0; i < v.n; i++) {
		while ((int64_t)out->len < v.off[i])
			dfs_buf_putc(out, ' ');
		dfs_buf_puts(out, v.line[i]);
	}
	ck_assert_int_eq((int64_t)out->len, sp.end);
}

/* Each line is exactly the event rendered as one compact document (what schema version 8
 * stored): parsed and rendered again it is the same bytes. */
static void lines_render_whole(const struct evs *v)
{
	struct dfs_err err = {0};
	struct dfs_buf again;

	dfs_buf_init(&again);
	for (int i = 0; i < v->n; i++) {
		size_t n = strlen(v->line[i]);
		bson_t ev;

		ck_assert_int_lt((int)n, 1023);
		bson_init(&ev);
		ck_assert_msg(store_codec_parse_doc(v->line[i], n, &ev, &err) == 0, "%s: %s",
			      v->line[i], err.msg);
		dfs_buf_reset(&again);
		ck_assert_int_eq(store_codec_render(&ev, STORE_RENDER_COMPACT, &again, &err), 0);
		dfs_buf_putc(&again, '\n');
		ck_assert_str_eq(again.data, v->line[i]);
		bson_destroy(&ev);
	}
	dfs_buf_release(&again);
}

static void delete_doc(int64_t coll, const char *name)
{
	struct dfs_err err = {0};
	struct store_txn *t;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_entry_delete(t, entry_of(coll, name), &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

static int64_t sql_int(const char *sql)
{
	char path[300];
	sqlite3 *h;
	sqlite3_stmt *q;
	int64_t v = -1;

	snprintf(path, sizeof(path), "%s/shop.db", tmpdir);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &q, NULL), SQLITE_OK);
	if (sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(h);
	return v;
}

static void check_problem(void *ctx, const char *p)
{
	if (ctx)
		snprintf(ctx, 512, "%s", p);
}

START_TEST(test_store_events_inserts_show_what_was_inserted)
{
	static const char *const docs[] = {
		"{\"a\": 1.5, \"s\": \"h\\u00e9 \\\"q\\\"\\n\", \"d\": {\"$date\": \"2020-01-01T00:00:00Z\"},"
		" \"e\": {}, \"ea\": [], \"n\": [1, [2, {\"x\": null}]]}",
		"{\"big\": {\"$numberLong\": \"9007199254740993\"}, \"dec\": {\"$numberDecimal\": \"1.10\"},"
		" \"c\": {\"$code\": \"f()\", \"$scope\": {\"y\": {\"z\": 1}}}, \"neg\": -0.0}",
		"{\"ts\": {\"$timestamp\": {\"t\": 5, \"i\": 6}}, \"old\": {\"$date\": {\"$numberLong\": \"-5\"}}}",
		"{\"k\": \"v\"}",
	};
	struct dfs_err err = {0};
	struct store_txn *t;
	struct dfs_buf before, after;
	struct evs v;
	int64_t coll = make_coll("items"), gone = make_coll("gone");
	char name[32];

	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "%d.json", i + 1);
		ck_assert_int_eq(put_text(coll, name, docs[i], &err), 0);
		ck_assert_int_eq(put_text(gone, name, docs[i], &err), 0);
	}
	dfs_buf_init(&before);
	dfs_buf_init(&after);
	stream_bytes("items", &before);
	/* every later change to the documents: an update, a replace (then an update of the
	 * replaced version), a delete, a rename to another _id, the other collection emptied
	 * and dropped */
	update_op(coll, "1.json", "{\"_id\": 1, \"a\": 2}");
	ck_assert_int_eq(put_text(coll, "2.json", "{\"r\": 1}", &err), 0);
	update_op(coll, "2.json", "{\"_id\": 2, \"r\": 2}");
	delete_doc(coll, "3.json");
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_rename(t, entry_of(coll, "4.json"), coll, "5.json", NULL, &err),
			 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_empty(t, gone, &err), 0);
	ck_assert_int_eq(store_coll_drop(t, gone, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	/* the first events read as they did, byte for byte */
	stream_bytes("items", &after);
	ck_assert_uint_gt(after.len, before.len);
	ck_assert_int_eq(memcmp(before.data, after.data, before.len), 0);
	list("gone", 0, &v);
	ck_assert_int_eq(v.n, 6); /* 4 inserts, drop, invalidate */
	for (int i = 0; i < 4; i++)
		ck_assert_ptr_nonnull(strstr(v.line[i], "\"fullDocument\": {\"_id\": "));
	lines_render_whole(&v);
	list("items", 0, &v);
	ck_assert_int_eq(v.n, 10);
	ck_assert_ptr_nonnull(strstr(v.line[5], "\"fullDocument\": {\"_id\": 2, \"r\": 1}"));
	ck_assert_ptr_nonnull(strstr(v.line[9], "\"fullDocument\": {\"_id\": 5, \"k\": \"v\"}"));
	lines_render_whole(&v);
	/* the first versions of 1-4 of items and 1-4 of gone, and the replaced 2 were kept */
	ck_assert_int_eq(sql_int("SELECT count(*) FROM evdocs"), 9);
	/* compact: no insert or replace row holds its document */
	ck_assert_int_eq(sql_int("SELECT count(*) FROM events WHERE op IN (1, 3) AND"
				 " length(line) > 0"),
			 0);
	/* docfs check finds a kept version gone */
	ck_assert_msg(store_check(st, check_problem, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(sql_int("DELETE FROM evdocs WHERE seq = (SELECT min(seq) FROM evdocs)"
				 " RETURNING 1"),
			 1);
	{
		char found[512] = "";

		ck_assert_int_eq(store_check(st, check_problem, found, &err), DFS_ECORRUPT);
		ck_assert_msg(strstr(found, "1 change events show a document that is not kept"),
			      "%s", found);
	}
	dfs_buf_release(&before);
	dfs_buf_release(&after);
}
END_TEST

START_TEST(test_store_events_trim_removes_kept_documents)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct evs v;
	int64_t coll = make_coll("items");
	char name[32], text[600];

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_events_set_keep(t, 8192, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"pad\": \"%0400d\"}", i);
		ck_assert_int_eq(put_text(coll, name, text, &err), 0);
	}
	/* 0 and 1's inserts are trimmed: nothing kept for them; 39's is kept */
	update_op(coll, "0.json", "{\"_id\": 0, \"x\": 1}");
	update_op(coll, "39.json", "{\"_id\": 39, \"x\": 1}");
	ck_assert_int_eq(sql_int("SELECT count(*) FROM evdocs"), 1);
	for (int i = 40; i < 100; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"pad\": \"%0400d\"}", i);
		ck_assert_int_eq(put_text(coll, name, text, &err), 0);
	}
	/* 39's insert went with its kept version */
	ck_assert_int_eq(sql_int("SELECT count(*) FROM evdocs"), 0);
	list("items", 0, &v);
	ck_assert_int_gt(v.n, 0);
	lines_render_whole(&v);
}
END_TEST

/* A store of schema version 8 (events as text, no evdocs): made from a version-9 one by
 * writing each event's text into its row and dropping what version 9 added. */
static void make_version_8(void)
{
	char path[300];
	struct evs v;
	sqlite3 *h;
	sqlite3_stmt *q;

	list(NULL, 0, &v);
	store_free(st);
	st = NULL;
	snprintf(path, sizeof(path), "%s/shop.db", tmpdir);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "UPDATE events SET line = ?2 WHERE seq = ?1", -1, &q,
					    NULL),
			 SQLITE_OK);
	for (int i = 0; i < v.n; i++) {
		sqlite3_bind_int64(q, 1, v.seq[i]);
		sqlite3_bind_blob(q, 2, v.line[i], (int)strlen(v.line[i]), SQLITE_STATIC);
		ck_assert_int_eq(sqlite3_step(q), SQLITE_DONE);
		sqlite3_reset(q);
	}
	sqlite3_finalize(q);
	ck_assert_int_eq(sqlite3_exec(h,
				      "ALTER TABLE events DROP COLUMN wall;"
				      "ALTER TABLE events DROP COLUMN len;"
				      "ALTER TABLE docs DROP COLUMN evseq;"
				      "DROP TABLE evdocs; CREATE INDEX events_db ON events(off_db);"
				      "PRAGMA user_version = 8",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(h);
}

START_TEST(test_store_events_migrate_version_8)
{
	struct dfs_err err = {0};
	struct dfs_buf before, after;
	struct evs v;
	int64_t coll = make_coll("items");

	ck_assert_int_eq(put_text(coll, "1.json", "{\"a\": 1}", &err), 0);
	ck_assert_int_eq(put_text(coll, "2.json", "{\"b\": [1, 2]}", &err), 0);
	update_op(coll, "2.json", "{\"_id\": 2, \"b\": [1]}");
	dfs_buf_init(&before);
	dfs_buf_init(&after);
	stream_bytes(NULL, &before);
	make_version_8();
	ck_assert_int_eq(sql_int("PRAGMA user_version"), 8);
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_msg(store_db_get(st, "shop", false, &db, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(sql_int("PRAGMA user_version"), 9);
	ck_assert_int_eq(sql_int("SELECT count(*) FROM sqlite_master WHERE name = 'events_db'"), 0);
	/* the text rows read as they did */
	stream_bytes(NULL, &after);
	ck_assert_uint_eq(after.len, before.len);
	ck_assert_int_eq(memcmp(before.data, after.data, before.len), 0);
	ck_assert_int_eq(sql_int("SELECT count(*) FROM events WHERE len IS NULL"), 3);
	/* new events follow them, compact; the old insert of 1 stays what it was */
	update_op(coll, "1.json", "{\"_id\": 1, \"a\": 5}");
	ck_assert_int_eq(put_text(coll, "3.json", "{\"c\": 3}", &err), 0);
	delete_doc(coll, "1.json");
	stream_bytes(NULL, &after);
	ck_assert_int_eq(memcmp(before.data, after.data, before.len), 0);
	list(NULL, 0, &v);
	ck_assert_int_eq(v.n, 6);
	ck_assert_int_eq(v.off[3], (int64_t)before.len);
	ck_assert_ptr_nonnull(strstr(v.line[0], "\"fullDocument\": {\"_id\": 1, \"a\": 1}"));
	ck_assert_ptr_nonnull(strstr(v.line[4], "\"fullDocument\": {\"_id\": 3, \"c\": 3}"));
	lines_render_whole(&v);
	ck_assert_int_eq(sql_int("SELECT count(*) FROM events WHERE len IS NOT NULL"), 3);
	dfs_buf_release(&before);
	dfs_buf_release(&after);
}
END_TEST

struct first_ctx {
	int64_t off, len, seq;
};

static int first_event(void *ctx, const struct store_event *e)
{
	struct first_ctx *f = ctx;

	f->off = e->off;
	f->len = (int64_t)e->len;
	f->seq = e->seq;
	return 1;
}

/* Reading the database's stream from any offset starts at the event holding it (found by
 * seq, note 7), across events that are not in it (invalidates) and a trimmed start. */
START_TEST(test_store_events_from_any_offset)
{
	struct dfs_err err = {0};
	struct store_events_span sp;
	struct store_txn *t;
	struct evs v;
	int64_t a = make_coll("items"), b;
	char name[32];

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_events_set_keep(t, 4096, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	for (int i = 0; i < 30; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		ck_assert_int_eq(put_text(a, name, "{\"x\": \"some padding here\"}", &err), 0);
		if (i % 7 == 3) { /* a drop: its invalidate is only in the collection's stream */
			b = make_coll("other");
			ck_assert_int_eq(put_text(b, "1.json", "{}", &err), 0);
			ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
			ck_assert_int_eq(store_coll_drop(t, b, &err), 0);
			ck_assert_int_eq(store_txn_commit(t, &err), 0);
		}
	}
	span(NULL, &sp);
	ck_assert_int_gt(sp.cut, 0);
	list(NULL, 0, &v);
	ck_assert_int_gt(v.n, 3);
	ck_assert_int_eq(v.off[0], sp.start);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	for (int64_t off = 0; off < sp.end; off++) {
		struct first_ctx f = {-1, 0, 0};

		ck_assert_int_eq(store_events_from(t, NULL, off, first_event, &f, &err), 0);
		if (off < sp.start) {
			ck_assert_int_eq(f.off, sp.start); /* trimmed: from the first kept */
			continue;
		}
		ck_assert_msg(f.off <= off && off < f.off + f.len, "offset %lld: event at %lld+%lld",
			      (long long)off, (long long)f.off, (long long)f.len);
	}
	store_txn_abort(t);
}
END_TEST

static Suite *changes_suite(void)
{
	Suite *s = suite_create("changes");
	TCase *c = tcase_create("changes");

	tcase_add_checked_fixture(c, setup, teardown);
	tcase_set_timeout(c, 60);
	tcase_add_test(c, test_store_events_record_document_writes);
	tcase_add_test(c, test_store_events_update_description_paths);
	tcase_add_test(c, test_store_events_failed_write_records_nothing);
	tcase_add_test(c, test_store_events_rename_drop_invalidate_indexes);
	tcase_add_test(c, test_store_event_tokens_sort_and_parse);
	tcase_add_test(c, test_store_events_trim_keeps_offsets_growing);
	tcase_add_test(c, test_store_events_keep_zero_records_nothing);
	tcase_add_test(c, test_store_events_inserts_show_what_was_inserted);
	tcase_add_test(c, test_store_events_trim_removes_kept_documents);
	tcase_add_test(c, test_store_events_migrate_version_8);
	tcase_add_test(c, test_store_events_from_any_offset);
	suite_add_tcase(s, c);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(changes_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
