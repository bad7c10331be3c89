/*
 * check.c - verification of a whole store: SQLite's integrity check of every database and
 * the store's own invariants (each document's BSON valid and storable, its key, file name
 * and rendered size agreeing with it, ids unique across documents, files and collections
 * and below the id counter, every entry in an existing collection, every document inside
 * a run of its collection (doc.c note 5)) and, through index.c, every secondary index's
 * entries against its documents. It repairs nothing.
 */
#include "store_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct check_ctx {
	struct store *s;
	void (*cb)(void *ctx, const char *problem);
	void *ctx;
	int64_t problems;
	struct dfs_err *err;
};

static void problem(struct check_ctx *cc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void problem(struct check_ctx *cc, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cc->problems++;
	if (cc->cb)
		cc->cb(cc->ctx, msg);
}

static void report_problem(void *ctx, const char *msg)
{
	problem(ctx, "%s", msg);
}

static int64_t one_int(sqlite3 *h, const char *sql)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void check_docs(struct check_ctx *cc, const char *db, sqlite3 *h)
{
	sqlite3_stmt *st;
	struct dfs_buf key, stem, text;
	int rc;

	/* the profiler's entries hold commands as they were, $-names ($db) and all */
	int64_t profile = one_int(h, "SELECT id FROM colls WHERE name = '" STORE_PROFILE_COLL "'");

	if (sqlite3_prepare_v2(h, "SELECT id, coll, key, name, size, bson FROM docs", -1, &st,
			       NULL) != SQLITE_OK) {
		problem(cc, "%s: cannot read documents: %s", db, sqlite3_errmsg(h));
		return;
	}
	dfs_buf_init(&key);
	dfs_buf_init(&stem);
	dfs_buf_init(&text);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		long long id = sqlite3_column_int64(st, 0);
		const void *blob = sqlite3_column_blob(st, 5);
		int n = sqlite3_column_bytes(st, 5);
		const char *name = (const char *)sqlite3_column_text(st, 3);
		struct dfs_err e = {0};
		bson_iter_t it;
		bson_t doc;

		if (n < 5 || !bson_init_static(&doc, blob, (size_t)n) ||
		    !bson_validate(&doc, BSON_VALIDATE_UTF8, NULL)) {
			problem(cc, "%s: document %lld is not valid BSON", db, id);
			continue;
		}
		if (sqlite3_column_int64(st, 1) != profile && store_doc_validate(&doc, &e)) {
			problem(cc, "%s: document %lld: %s", db, id, e.msg);
			continue;
		}
		if (!bson_iter_init(&it, &doc) || !bson_iter_next(&it) ||
		    strcmp(bson_iter_key(&it), "_id") != 0) {
			problem(cc, "%s: document %lld does not start with _id", db, id);
			continue;
		}
		dfs_buf_reset(&key);
		dfs_buf_reset(&stem);
		dfs_buf_reset(&text);
		if (store_key_append(&key, bson_iter_value(&it), false, &e) ||
		    (size_t)sqlite3_column_bytes(st, 2) != key.len ||
		    memcmp(sqlite3_column_blob(st, 2), key.data, key.len) != 0)
			problem(cc, "%s: document %lld: key does not match its _id", db, id);
		dfs_err_clear(&e);
		if (store_name_from_id(bson_iter_value(&it), &stem, &e) == 0) {
			dfs_buf_puts(&stem, ".json");
			if (!name || strcmp(name, stem.data) != 0)
				problem(cc, "%s: document %lld: name '%s' should be '%s'", db, id,
					name ? name : "", stem.data);
		}
		dfs_err_clear(&e);
		if (store_codec_render(&doc, STORE_RENDER_PRETTY, &text, &e) ||
		    (int64_t)text.len != sqlite3_column_int64(st, 4))
			problem(cc, "%s: document %lld: stored size %lld, rendered %zu", db, id,
				(long long)sqlite3_column_int64(st, 4), text.len);
	}
	if (rc != SQLITE_DONE)
		problem(cc, "%s: reading documents: %s", db, sqlite3_errmsg(h));
	sqlite3_finalize(st);
	dfs_buf_release(&key);
	dfs_buf_release(&stem);
	dfs_buf_release(&text);
}

/* Reports at most this many rows of one kind of runs problem, then how many more. */
#define RUNS_SHOWN 10

/* doc.c note 5: each document inside a run of its collection (the run with the largest
 * lo <= id is the only one that can hold it, when runs do not overlap), runs well formed,
 * not overlapping, of existing collections. */
static void check_runs(struct check_ctx *cc, const char *db, sqlite3 *h)
{
	static const char *const sql[] = {
		/* documents outside every run of their collection */
		"SELECT d.id, d.coll, 0, d.name, (SELECT name FROM colls WHERE id = d.coll)"
		" FROM docs d WHERE coalesce((SELECT r.hi FROM runs r WHERE r.coll = d.coll"
		" AND r.lo <= d.id ORDER BY r.lo DESC LIMIT 1), -1) < d.id",
		/* empty runs */
		"SELECT coll, lo, hi FROM runs WHERE lo > hi",
		/* overlapping runs: another run starts inside one */
		"SELECT a.coll, a.lo, b.lo FROM runs a, runs b WHERE b.coll = a.coll"
		" AND b.lo > a.lo AND b.lo <= a.hi",
		/* runs of dropped collections */
		"SELECT coll, lo, hi FROM runs WHERE coll NOT IN (SELECT id FROM colls)",
	};

	for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
		sqlite3_stmt *st;
		int64_t n = 0;
		int rc;

		if (sqlite3_prepare_v2(h, sql[i], -1, &st, NULL) != SQLITE_OK) {
			problem(cc, "%s: cannot read runs: %s", db, sqlite3_errmsg(h));
			return;
		}
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			long long a = sqlite3_column_int64(st, 0);
			long long b = sqlite3_column_int64(st, 1);
			long long c = sqlite3_column_int64(st, 2);
			const char *dname = (const char *)sqlite3_column_text(st, 3);
			const char *cname = (const char *)sqlite3_column_text(st, 4);

			if (n++ >= RUNS_SHOWN)
				continue;
			if (i == 0)
				problem(cc,
					"%s: document %lld '%s' of collection %lld '%s' is in"
					" no run of its collection: listings and scans miss it",
					db, a, dname ? dname : "", b, cname ? cname : "");
			else if (i == 1)
				problem(cc, "%s: run %lld..%lld of collection %lld is empty", db, b,
					c, a);
			else if (i == 2)
				problem(cc,
					"%s: runs of collection %lld overlap: the run from"
					" %lld holds the start %lld of another",
					db, a, b, c);
			else
				problem(cc,
					"%s: run %lld..%lld of collection %lld, which does"
					" not exist",
					db, b, c, a);
		}
		if (rc != SQLITE_DONE)
			problem(cc, "%s: reading runs: %s", db, sqlite3_errmsg(h));
		else if (n > RUNS_SHOWN)
			problem(cc, "%s: %lld more run problems like the last", db,
				(long long)(n - RUNS_SHOWN));
		sqlite3_finalize(st);
	}
}

/* capped.c note 1: the totals a capped collection keeps are what it holds, within its
 * limits. */
static void check_capped(struct check_ctx *cc, const char *db, sqlite3 *h)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(h,
			       "SELECT c.id, c.name, c.options, (SELECT count(*) FROM docs d WHERE"
			       " d.coll = c.id), (SELECT coalesce(sum(length(d.bson)), 0) FROM docs d"
			       " WHERE d.coll = c.id) FROM colls c WHERE c.options IS NOT NULL",
			       -1, &st, NULL) != SQLITE_OK) {
		problem(cc, "%s: cannot read collection options: %s", db, sqlite3_errmsg(h));
		return;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_coll c;
		const char *name = (const char *)sqlite3_column_text(st, 1);
		long long count = sqlite3_column_int64(st, 3), bytes = sqlite3_column_int64(st, 4);

		memset(&c, 0, sizeof(c));
		store__capped_decode(sqlite3_column_blob(st, 2), sqlite3_column_bytes(st, 2), &c);
		if (!c.capped)
			continue;
		if (c.cap_count != count || c.cap_bytes != bytes)
			problem(cc,
				"%s: capped collection '%s' counts %lld documents of %lld bytes but"
				" holds %lld of %lld bytes",
				db, name ? name : "", (long long)c.cap_count, (long long)c.cap_bytes,
				count, bytes);
		if (bytes > c.cap_size || (c.cap_max > 0 && count > c.cap_max))
			problem(cc, "%s: capped collection '%s' is over its limits", db,
				name ? name : "");
	}
	if (rc != SQLITE_DONE)
		problem(cc, "%s: reading collection options: %s", db, sqlite3_errmsg(h));
	sqlite3_finalize(st);
}

/* Scratch directories and hard links (doc.c note 6): every link names a file that is
 * there, a hidden file has a link, every entry of a directory has its directory. */
static void check_links(struct check_ctx *cc, const char *db, sqlite3 *h)
{
	if (one_int(h, "SELECT count(*) FROM files l WHERE l.ino IS NOT NULL AND NOT EXISTS"
		       " (SELECT 1 FROM files f WHERE f.id = l.ino AND f.ino IS NULL)") > 0)
		problem(cc, "%s: a hard link names a file that is not there", db);
	if (one_int(h, "SELECT count(*) FROM files f WHERE f.name LIKE '0/%' AND NOT EXISTS"
		       " (SELECT 1 FROM files l WHERE l.ino = f.id)") > 0)
		problem(cc, "%s: a hidden file has no name left", db);
	if (one_int(h, "SELECT count(*) FROM files f WHERE instr(f.name, '/') > 1 AND"
		       " f.name NOT LIKE '.%' AND f.name NOT LIKE '0/%' AND NOT EXISTS"
		       " (SELECT 1 FROM files d WHERE d.coll = f.coll AND d.kind = 4 AND"
		       " d.id = CAST(substr(f.name, 1, instr(f.name, '/') - 1) AS INTEGER))") > 0)
		problem(cc, "%s: an entry of a directory that is not there", db);
}

/* Compact change events (changes.c note 6): each insert or replace kept shows a document,
 * its row while the row's evseq names it, else the version kept in evdocs. */
static void check_events(struct check_ctx *cc, const char *db, sqlite3 *h)
{
	int64_t n = one_int(h, "SELECT count(*) FROM events e LEFT JOIN docs d ON d.id = e.docid"
			       " WHERE e.len IS NOT NULL AND e.op IN (1, 3) AND length(e.line) = 0"
			       " AND d.evseq IS NOT e.seq AND NOT EXISTS (SELECT 1 FROM evdocs x"
			       " WHERE x.seq = e.seq)");

	if (n > 0)
		problem(cc, "%s: %lld change events show a document that is not kept", db,
			(long long)n);
}

/* Entry ids, collection ids and (from version 2) index ids share one counter. */
static const char *const ids_used_twice_v1 =
	"SELECT count(*) FROM (SELECT id FROM docs UNION ALL SELECT id FROM files"
	" UNION ALL SELECT id FROM colls) GROUP BY id HAVING count(*) > 1";
static const char *const ids_used_twice =
	"SELECT count(*) FROM (SELECT id FROM docs UNION ALL SELECT id FROM files"
	" UNION ALL SELECT id FROM colls UNION ALL SELECT ixid FROM indexes)"
	" GROUP BY id HAVING count(*) > 1";
static const char *const id_over_counter_v1 =
	"SELECT max(m) >= (SELECT v FROM meta WHERE k = 'next_id') FROM ("
	"SELECT max(id) AS m FROM docs UNION ALL SELECT max(id) FROM files"
	" UNION ALL SELECT max(id) FROM colls)";
static const char *const id_over_counter =
	"SELECT max(m) >= (SELECT v FROM meta WHERE k = 'next_id') FROM ("
	"SELECT max(id) AS m FROM docs UNION ALL SELECT max(id) FROM files"
	" UNION ALL SELECT max(id) FROM colls UNION ALL SELECT max(ixid) FROM indexes)";

static int check_db(void *ctx, const char *name)
{
	struct check_ctx *cc = ctx;
	struct store__conn *c;
	struct dfs_err e = {0};
	char *path;
	sqlite3_stmt *st;
	int64_t version;

	if (asprintf(&path, "%s/%s.db", store_path(cc->s), name) < 0)
		abort();
	if (store__conn_open(path, false, &c, &e)) {
		problem(cc, "%s: %s", name, e.msg);
		free(path);
		return 0;
	}
	free(path);
	if (sqlite3_prepare_v2(c->h, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			const char *r = (const char *)sqlite3_column_text(st, 0);

			if (r && strcmp(r, "ok") != 0)
				problem(cc, "%s: sqlite: %s", name, r);
		}
		sqlite3_finalize(st);
	}
	/* Versions 1, 3, 5, 6, 7 and 8 are not opened by this docfs yet (it migrates on open):
	 * 1 has no index entries, neither has runs; 5 to 8 lack only columns of 9 (db.c). */
	version = one_int(c->h, "PRAGMA user_version");
	if (version != 1 && version != 3 && (version < 5 || version > STORE__SCHEMA_VERSION))
		problem(cc, "%s: unknown schema version %lld", name, (long long)version);
	if (one_int(c->h, version == 1 ? ids_used_twice_v1 : ids_used_twice) > 0)
		problem(cc, "%s: an id is used twice", name);
	if (one_int(c->h, version == 1 ? id_over_counter_v1 : id_over_counter) == 1)
		problem(cc, "%s: an id is at or above the id counter", name);
	if (one_int(c->h, "SELECT count(*) FROM docs WHERE coll NOT IN (SELECT id FROM colls)") >
		    0 ||
	    one_int(c->h, "SELECT count(*) FROM files WHERE coll NOT IN (SELECT id FROM colls)") >
		    0)
		problem(cc, "%s: entries in a collection that does not exist", name);
	if (version == STORE__SCHEMA_VERSION)
		check_events(cc, name, c->h);
	check_docs(cc, name, c->h);
	if (version >= 5 && version <= STORE__SCHEMA_VERSION) {
		check_runs(cc, name, c->h);
		check_capped(cc, name, c->h);
	}
	if (version >= 8 && version <= STORE__SCHEMA_VERSION)
		check_links(cc, name, c->h);
	if (version == 3 || (version >= 5 && version <= STORE__SCHEMA_VERSION))
		store__ix_check(c, name, report_problem, cc);
	store__conn_close(c);
	return 0;
}

int store_check(struct store *s, void (*cb)(void *ctx, const char *problem), void *ctx,
		struct dfs_err *err)
{
	struct check_ctx cc = {s, cb, ctx, 0, err};
	int rc = store_db_list(s, check_db, &cc, err);

	if (rc)
		return rc;
	if (cc.problems)
		return dfs_err_set(err, DFS_ECORRUPT, "%lld problems found",
				   (long long)cc.problems);
	return 0;
}
