/*
 * test_index.c - unit tests of secondary indexes (store/index.c): definitions, key
 * generation (null for missing, multikey, sparse, partial, hashed, descending), the entries
 * after every kind of write, unique clashes, scans, FETCH, the TTL sweep, check, the schema
 * migration from version 1, and a property test of random writes against entries computed
 * independently from the documents. Each test uses its own temporary store directory.
 */
#include "store.h"
#include "test_problems.h"
#include "test_rand.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];
static struct store *st;
static struct store_db *db;
static const struct store_attrs attrs = {0644, 1000, 1000, 0};

static void setup(void)
{
	struct dfs_err err = {0};

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-index-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "shop", true, &db, &err), 0);
}

static void teardown(void)
{
	char cmd[300];

	store_filter_hooks_set(NULL);
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

static bson_t *parse(const char *text)
{
	struct dfs_err err = {0};
	bson_t *b = bson_new();

	ck_assert_msg(store_codec_parse_doc(text, strlen(text), b, &err) == 0, "%s: %s", text,
		      err.msg);
	return b;
}

/* Creates an index from spec text in its own transaction; returns the dfs code. */
static int mkix(int64_t coll, const char *spec, char *name, struct dfs_err *err)
{
	struct store_txn *t;
	bson_t *b = parse(spec);
	int rc;

	ck_assert_int_eq(store_txn_begin(db, true, &t, err), 0);
	rc = store_index_create(t, coll, b, name, name ? 128 : 0, NULL, NULL, err);
	bson_destroy(b);
	if (rc) {
		store_txn_abort(t);
		return rc;
	}
	return store_txn_commit(t, err);
}

static void mkix_ok(int64_t coll, const char *spec)
{
	struct dfs_err err = {0};

	ck_assert_msg(mkix(coll, spec, NULL, &err) == 0, "%s: %s", spec, err.msg);
}

static int put(int64_t coll, const char *name, const char *text, struct dfs_err *err)
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

static void put_ok(int64_t coll, const char *name, const char *text)
{
	struct dfs_err err = {0};

	ck_assert_msg(put(coll, name, text, &err) == 0, "%s: %s", name, err.msg);
}

static int64_t id_of(int64_t coll, const char *name)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_msg(store_entry_lookup(t, coll, name, &e, &err) == 0, "%s", err.msg);
	store_txn_abort(t);
	return e.id;
}

static int rename_entry(int64_t coll, const char *from, const char *to, struct dfs_err *err)
{
	struct store_txn *t;
	struct store_entry e;
	int rc;

	ck_assert_int_eq(store_txn_begin(db, true, &t, err), 0);
	ck_assert_int_eq(store_entry_lookup(t, coll, from, &e, err), 0);
	rc = store_entry_rename(t, e.id, coll, to, NULL, err);
	if (rc) {
		store_txn_abort(t);
		return rc;
	}
	return store_txn_commit(t, err);
}

static void del(int64_t coll, const char *name)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_lookup(t, coll, name, &e, &err), 0);
	ck_assert_int_eq(store_entry_delete(t, e.id, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

static void hex(struct dfs_buf *out, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dfs_buf_printf(out, "%02x", ((const unsigned char *)p)[i]);
}

/* Appends the key of the values (shell literals, one per field; a leading '-' on the text
 * marks a descending field) as hex, then ":" and the id and "\n". */
static void expect(struct dfs_buf *out, int64_t id, int n, const char *const *vals)
{
	struct dfs_buf key;

	dfs_buf_init(&key);
	for (int i = 0; i < n; i++) {
		struct dfs_err err = {0};
		bool desc = vals[i][0] == '-' && vals[i][1] == '!';
		const char *text = desc ? vals[i] + 2 : vals[i];
		bson_t b = BSON_INITIALIZER;
		bson_iter_t it;

		ck_assert_int_eq(store_codec_parse_value(text, strlen(text), &b, "v", &err), 0);
		ck_assert(bson_iter_init_find(&it, &b, "v"));
		ck_assert_int_eq(store_key_append(&key, bson_iter_value(&it), desc, &err), 0);
		bson_destroy(&b);
	}
	hex(out, key.data, key.len);
	dfs_buf_printf(out, ":%lld\n", (long long)id);
	dfs_buf_release(&key);
}

static int line_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the lines of text (so that expectations need no particular order). */
static char *sorted(const char *text)
{
	char *copy = strdup(text), *p, *save = NULL, **lines = NULL, *out;
	size_t n = 0, len = 0;

	for (p = strtok_r(copy, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
		lines = realloc(lines, (n + 1) * sizeof(*lines));
		lines[n++] = p;
		len += strlen(p) + 1;
	}
	qsort(lines, n, sizeof(*lines), line_cmp);
	out = calloc(1, len + 1);
	for (size_t i = 0; i < n; i++) {
		strcat(out, lines[i]);
		strcat(out, "\n");
	}
	free(lines);
	free(copy);
	return out;
}

/* Scans index name of coll over [lo, hi) in one direction: "hexkey:id\n" per entry, in
 * scan order; *vals (when not NULL) gets the compact vals of each entry, one per line. */
static char *scan(int64_t coll, const char *name, bool reverse, const struct dfs_buf *lo,
		  const struct dfs_buf *hi, char **vals)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_index ix;
	struct store_ixscan *s;
	struct store_ixkey k;
	struct dfs_buf out, v;
	int rc;

	dfs_buf_init(&out);
	dfs_buf_init(&v);
	dfs_buf_puts(&out, "");
	dfs_buf_puts(&v, "");
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_msg(store_index_get(t, coll, name, &ix, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_ixscan_open(t, coll, &ix, reverse, &s, &err), 0);
	if (lo || hi)
		ck_assert_int_eq(store_ixscan_range(s, lo ? (const uint8_t *)lo->data : NULL,
						    lo ? lo->len : 0,
						    hi ? (const uint8_t *)hi->data : NULL,
						    hi ? hi->len : 0, &err),
				 0);
	while ((rc = store_ixscan_next(s, &k, &err)) == 0) {
		hex(&out, k.key, k.keylen);
		dfs_buf_printf(&out, ":%lld\n", (long long)k.id);
		store_codec_render(&k.vals, STORE_RENDER_COMPACT, &v, &err);
		dfs_buf_putc(&v, '\n');
	}
	ck_assert_int_eq(rc, DFS_ENOENT);
	store_ixscan_free(s);
	store_index_release(&ix);
	store_txn_abort(t);
	if (vals)
		*vals = v.data;
	else
		dfs_buf_release(&v);
	return out.data;
}

static char *scan_all(int64_t coll, const char *name)
{
	return scan(coll, name, false, NULL, NULL, NULL);
}

static void key_of(struct dfs_buf *out, const char *text, bool desc)
{
	struct dfs_err err = {0};
	bson_t b = BSON_INITIALIZER;
	bson_iter_t it;

	ck_assert_int_eq(store_codec_parse_value(text, strlen(text), &b, "v", &err), 0);
	ck_assert(bson_iter_init_find(&it, &b, "v"));
	ck_assert_int_eq(store_key_append(out, bson_iter_value(&it), desc, &err), 0);
	bson_destroy(&b);
}

static struct store_index_stats stats(int64_t coll, const char *name)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_index_stats s;

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_msg(store_index_stats(t, coll, name, &s, &err) == 0, "%s", err.msg);
	store_txn_abort(t);
	return s;
}

/* ---- definitions ------------------------------------------------------------------- */

/* Counting an index's entries is cached (index.c, ix_counts): every kind of change must
 * still show, including those another store handle (another process) commits, a rolled-back
 * write, and an index dropped and built again under the same name. */
START_TEST(test_store_index_stats_follow_every_change)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct store *st2;
	struct store_db *db2;
	struct store_txn *t;

	put_ok(c, "1.json", "{\"price\": 5}");
	put_ok(c, "2.json", "{\"price\": 7}");
	mkix_ok(c, "{\"key\": {\"price\": 1}, \"sparse\": true}");
	ck_assert_int_eq(stats(c, "price_1").entries, 2);
	ck_assert_int_eq(stats(c, "price_1").entries, 2); /* from the cache */
	ck_assert_int_eq(stats(c, "_id_").entries, 2);
	put_ok(c, "3.json", "{\"price\": 9}");
	ck_assert_int_eq(stats(c, "price_1").entries, 3);
	ck_assert_int_eq(stats(c, "_id_").entries, 3);
	del(c, "1.json");
	ck_assert_int_eq(stats(c, "price_1").entries, 2);
	ck_assert_int_eq(stats(c, "_id_").entries, 2);
	/* A write that is rolled back changes nothing, and the count taken inside it is not
	 * kept. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(
		store_doc_write_text(t, c, "4.json", "{\"price\": 11}", 13, &attrs, NULL, &err), 0);
	{
		struct store_index_stats in;

		ck_assert_int_eq(store_index_stats(t, c, "price_1", &in, &err), 0);
		ck_assert_int_eq(in.entries, 3);
	}
	store_txn_abort(t);
	ck_assert_int_eq(stats(c, "price_1").entries, 2);
	/* Another handle on the store writes, as the CLI does while the store is mounted. */
	ck_assert_int_eq(store_open(tmpdir, false, &st2, &err), 0);
	ck_assert_int_eq(store_db_get(st2, "shop", false, &db2, &err), 0);
	ck_assert_int_eq(store_txn_begin(db2, true, &t, &err), 0);
	ck_assert_int_eq(store_doc_write_text(t, c, "5.json", "{}", 2, &attrs, NULL, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	store_free(st2);
	ck_assert_int_eq(stats(c, "price_1").entries, 2); /* sparse: no entry for 5 */
	ck_assert_int_eq(stats(c, "_id_").entries, 3);
	/* The same name built again over other documents. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_index_drop(t, c, "price_1", &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	mkix_ok(c, "{\"key\": {\"price\": 1}}");
	ck_assert_int_eq(stats(c, "price_1").entries, 3);
}
END_TEST

START_TEST(test_store_index_create_list_get_drop_stats)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_index *ixs, ix;
	int n;
	char name[128];
	int64_t v0, v1;
	struct store_index_stats s;

	put_ok(c, "1.json", "{\"price\": 5, \"name\": \"a\"}");
	put_ok(c, "2.json", "{\"price\": 7}");
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_index_version(t, c, &v0, &err), 0);
	store_txn_abort(t);
	ck_assert_int_eq(mkix(c, "{\"key\": {\"price\": 1}, \"unique\": true}", name, &err), 0);
	ck_assert_str_eq(name, "price_1");
	mkix_ok(c, "{\"key\": {\"name\": 1, \"price\": -1}, \"name\": \"np\"}");

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_index_list(t, c, &ixs, &n, &err), 0);
	ck_assert_int_eq(n, 3);
	ck_assert_str_eq(ixs[0].name, "_id_");
	ck_assert_int_eq(ixs[0].ixid, 0);
	ck_assert(ixs[0].unique);
	ck_assert_str_eq(ixs[0].field[0].path, "_id");
	ck_assert_str_eq(ixs[1].name, "price_1");
	ck_assert(ixs[1].unique);
	ck_assert_int_gt(ixs[1].ixid, 0);
	ck_assert_int_eq(ixs[1].expire_after, -1);
	ck_assert_str_eq(ixs[2].name, "np");
	ck_assert_int_eq(ixs[2].nfields, 2);
	ck_assert_int_eq(ixs[2].field[1].dir, -1);
	{
		struct dfs_buf b;

		dfs_buf_init(&b);
		store_codec_render(ixs[1].spec, STORE_RENDER_COMPACT, &b, &err);
		ck_assert_str_eq(b.data,
				 "{\"v\": 2, \"key\": {\"price\": 1}, \"name\": \"price_1\","
				 " \"unique\": true}");
		dfs_buf_release(&b);
	}
	store_index_list_free(ixs, n);
	ck_assert_int_eq(store_index_get(t, c, "np", &ix, &err), 0);
	ck_assert_str_eq(ix.field[0].path, "name");
	store_index_release(&ix);
	ck_assert_int_eq(store_index_get(t, c, "nope", &ix, &err), DFS_ENOENT);
	ck_assert_int_eq(store_index_version(t, c, &v1, &err), 0);
	ck_assert_int_eq(v1, v0 + 2);
	store_txn_abort(t);

	s = stats(c, "price_1");
	ck_assert_int_eq(s.entries, 2);
	ck_assert_int_gt(s.bytes, 0);
	ck_assert(!s.multikey);
	ck_assert_int_gt(s.created, 1600000000000LL);
	ck_assert_int_ge(s.build_ms, 0);
	s = stats(c, "_id_");
	ck_assert_int_eq(s.entries, 2);

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_index_drop(t, c, "np", &err), 0);
	ck_assert_int_eq(store_index_drop(t, c, "np", &err), DFS_ENOENT);
	dfs_err_clear(&err);
	ck_assert_int_eq(store_index_drop(t, c, "_id_", &err), DFS_EPERM);
	ck_assert_int_eq(store_index_version(t, c, &v1, &err), 0);
	ck_assert_int_eq(v1, v0 + 3);
	ck_assert_int_eq(store_index_list(t, c, &ixs, &n, &err), 0);
	ck_assert_int_eq(n, 2);
	store_index_list_free(ixs, n);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}
END_TEST

START_TEST(test_store_index_create_default_names)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	char name[128];

	ck_assert_int_eq(mkix(c, "{\"key\": {\"a.b\": 1, \"c\": -1}}", name, &err), 0);
	ck_assert_str_eq(name, "a.b_1_c_-1");
	ck_assert_int_eq(mkix(c, "{\"key\": {\"h\": \"hashed\"}}", name, &err), 0);
	ck_assert_str_eq(name, "h_hashed");
	ck_assert_int_eq(mkix(c, "{\"key\": {\"x\": NumberLong(1), \"y\": -1.0}}", name, &err), 0);
	ck_assert_str_eq(name, "x_1_y_-1");
}
END_TEST

START_TEST(test_store_index_create_is_idempotent)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct store_txn *t;
	int64_t v0, v1;

	mkix_ok(c, "{\"key\": {\"a\": 1}, \"unique\": true}");
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_index_version(t, c, &v0, &err), 0);
	store_txn_abort(t);
	mkix_ok(c, "{\"key\": {\"a\": 1}, \"unique\": true, \"name\": \"a_1\"}");
	mkix_ok(c, "{\"key\": {\"_id\": 1}}");
	mkix_ok(c, "{\"key\": {\"_id\": 1}, \"name\": \"_id_\"}");
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_index_version(t, c, &v1, &err), 0);
	store_txn_abort(t);
	ck_assert_int_eq(v0, v1);
	/* Same name, other definition; same key and options under another name. */
	ck_assert_int_eq(mkix(c, "{\"key\": {\"a\": -1}, \"name\": \"a_1\"}", NULL, &err),
			 DFS_EEXIST);
	dfs_err_clear(&err);
	ck_assert_int_eq(mkix(c, "{\"key\": {\"a\": 1}, \"name\": \"a_1\"}", NULL, &err),
			 DFS_EEXIST);
	dfs_err_clear(&err);
	ck_assert_int_eq(
		mkix(c, "{\"key\": {\"a\": 1}, \"unique\": true, \"name\": \"other\"}", NULL, &err),
		DFS_EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "a_1"));
	dfs_err_clear(&err);
	ck_assert_int_eq(
		mkix(c, "{\"key\": {\"_id\": 1}, \"unique\": true, \"name\": \"x\"}", NULL, &err),
		DFS_EEXIST);
}
END_TEST

START_TEST(test_store_index_create_rejects_bad_specs)
{
	static const struct {
		const char *spec, *msg;
	} bad[] = {
		{"{\"key\": {}}", "non-empty 'key'"},
		{"{\"unique\": true}", "non-empty 'key'"},
		{"{\"key\": 5}", "'key' must be a document"},
		{"{\"key\": {\"a\": 2}}", "must be 1, -1 or \"hashed\""},
		{"{\"key\": {\"a\": 0}}", "must be 1, -1 or \"hashed\""},
		{"{\"key\": {\"a\": \"2d\"}}", "'2d' indexes are not supported"},
		{"{\"key\": {\"a\": \"text\", \"b\": 1, \"c\": \"text\"}}",
		 "text index fields must be next to each other"},
		{"{\"key\": {\"a\": 1}, \"weights\": {\"a\": 2}}", "options of text indexes"},
		{"{\"key\": {\"a\": \"2dsphere\"}}", "'2dsphere' indexes are not supported"},
		{"{\"key\": {\"a\": \"2d\"}}", "'2d' indexes are not supported"},
		{"{\"key\": {\"a\": \"hashed\", \"b\": \"hashed\"}}", "only one hashed field"},
		{"{\"key\": {\"a\": \"hashed\"}, \"unique\": true}", "cannot guarantee uniqueness"},
		{"{\"key\": {\"a\": 1}, \"bogus\": 1}", "unknown index option 'bogus'"},
		{"{\"key\": {\"a\": 1, \"b\": 1}, \"expireAfterSeconds\": 5}", "single-field"},
		{"{\"key\": {\"a\": \"hashed\"}, \"expireAfterSeconds\": 5}", "single-field"},
		{"{\"key\": {\"a\": 1}, \"expireAfterSeconds\": -1}", "non-negative integer"},
		{"{\"key\": {\"a\": 1}, \"expireAfterSeconds\": 1.5}", "non-negative integer"},
		{"{\"key\": {\"a\": 1}, \"expireAfterSeconds\": \"x\"}", "non-negative integer"},
		{"{\"key\": {\"a\": 1}, \"partialFilterExpression\": 3}", "must be a document"},
		{"{\"key\": {\"a\": 1}, \"partialFilterExpression\": {\"a\": 1}}", "filter hooks"},
		{"{\"key\": {\"a\": 1}, \"unique\": \"yes\"}", "must be a boolean"},
		{"{\"key\": {\"$a\": 1}}", "must not start with '$'"},
		{"{\"key\": {\"a..b\": 1}}", "empty path component"},
		{"{\"key\": {\"a\": 1}, \"name\": \"x/y\"}", "bad index name"},
		{"{\"key\": {\"a\": 1}, \"name\": 5}", "'name' must be a string"},
	};
	int64_t c = make_coll("items");

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct dfs_err err = {0};

		ck_assert_msg(mkix(c, bad[i].spec, NULL, &err) == DFS_EINVAL, "%s accepted",
			      bad[i].spec);
		ck_assert_msg(strstr(err.msg, bad[i].msg), "%s: '%s'", bad[i].spec, err.msg);
	}
}
END_TEST

START_TEST(test_store_index_create_limit_is_64)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	char spec[64];

	for (int i = 1; i < DFS_MAX_INDEXES; i++) {
		snprintf(spec, sizeof(spec), "{\"key\": {\"f%d\": 1}}", i);
		mkix_ok(c, spec);
	}
	ck_assert_int_eq(mkix(c, "{\"key\": {\"g\": 1}}", NULL, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "64 indexes"));
}
END_TEST

START_TEST(test_store_index_create_unique_over_duplicates_fails)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_index *ixs;
	int n;

	put_ok(c, "1.json", "{\"price\": 5}");
	put_ok(c, "2.json", "{\"price\": 5.0}");
	ck_assert_int_eq(mkix(c, "{\"key\": {\"price\": 1}, \"unique\": true}", NULL, &err),
			 DFS_EEXIST);
	ck_assert_str_eq(err.msg, "E11000 duplicate key error collection: shop.items index:"
				  " price_1 dup key: { price: 5.0 }");
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_index_list(t, c, &ixs, &n, &err), 0);
	ck_assert_int_eq(n, 1);
	store_index_list_free(ixs, n);
	store_txn_abort(t);
}
END_TEST

/* ---- write errors ------------------------------------------------------------------ */

START_TEST(test_store_doc_write_text_unique_clash_changes_nothing)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct store_txn *t;
	char *before, *after;

	mkix_ok(c, "{\"key\": {\"price\": 1}, \"unique\": true}");
	mkix_ok(c, "{\"key\": {\"tag\": 1}}");
	put_ok(c, "1.json", "{\"price\": 5, \"tag\": \"a\"}");
	put_ok(c, "2.json", "{\"price\": 6, \"tag\": \"b\"}");
	before = scan_all(c, "tag_1");
	/* insert */
	ck_assert_int_eq(put(c, "3.json", "{\"price\": NumberLong(5), \"tag\": \"c\"}", &err),
			 DFS_EEXIST);
	ck_assert_str_eq(err.msg, "E11000 duplicate key error collection: shop.items index:"
				  " price_1 dup key: { price: {\"$numberLong\": \"5\"} }");
	/* update */
	dfs_err_clear(&err);
	ck_assert_int_eq(put(c, "2.json", "{\"price\": 5, \"tag\": \"z\"}", &err), DFS_EEXIST);
	/* rename: 1.json's price 5 stays, 2.json renamed to 1.json replaces it (allowed); a
	 * third document with price 6 renamed elsewhere is refused only by a clash. */
	dfs_err_clear(&err);
	/* A failed insert inside a transaction that goes on (ordered bulk insert) leaves no
	 * entry behind. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	{
		const char *txt = "{\"price\": 6, \"tag\": \"d\"}";

		ck_assert_int_eq(
			store_doc_write_text(t, c, "4.json", txt, strlen(txt), &attrs, NULL, &err),
			DFS_EEXIST);
	}
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	after = scan_all(c, "tag_1");
	ck_assert_str_eq(before, after);
	free(after);
	after = scan_all(c, "price_1");
	ck_assert_int_eq((int)strlen(after) > 0, 1);
	{
		struct dfs_buf e;
		const char *v5[] = {"5"}, *v6[] = {"6"};

		dfs_buf_init(&e);
		expect(&e, id_of(c, "1.json"), 1, v5);
		expect(&e, id_of(c, "2.json"), 1, v6);
		ck_assert_str_eq(after, e.data);
		dfs_buf_release(&e);
	}
	free(after);
	free(before);
}
END_TEST

START_TEST(test_store_entry_rename_unique_clash_is_eexist)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;

	mkix_ok(c, "{\"key\": {\"k\": 1}, \"unique\": true}");
	put_ok(c, "1.json", "{\"k\": 1}");
	put_ok(c, "2.json", "{\"k\": 2}");
	/* A scratch file holding k: 1 renamed to a new document name clashes with 1.json. */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(
		store_file_create(t, c, "tmp~", STORE_KIND_FILE, &attrs, "{\"k\": 1}", 8, &e, &err),
		0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(rename_entry(c, "tmp~", "3.json", &err), DFS_EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "dup key: { k: 1 }"));
	/* Over 1.json itself it replaces that document: no clash. */
	dfs_err_clear(&err);
	ck_assert_msg(rename_entry(c, "tmp~", "1.json", &err) == 0, "%s", err.msg);
	/* Renaming 2.json over 1.json replaces it too. */
	ck_assert_msg(rename_entry(c, "2.json", "1.json", &err) == 0, "%s", err.msg);
	{
		char *got = scan_all(c, "k_1");
		struct dfs_buf x;
		const char *v2[] = {"2"};

		dfs_buf_init(&x);
		expect(&x, id_of(c, "1.json"), 1, v2);
		ck_assert_str_eq(got, x.data);
		dfs_buf_release(&x);
		free(got);
	}
}
END_TEST

START_TEST(test_store_doc_write_text_key_errors)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	char big[1400];

	mkix_ok(c, "{\"key\": {\"a\": 1, \"b\": 1}}");
	mkix_ok(c, "{\"key\": {\"s\": 1}, \"name\": \"long\"}");
	mkix_ok(c, "{\"key\": {\"h\": \"hashed\"}}");
	ck_assert_int_eq(put(c, "1.json", "{\"a\": [1, 2], \"b\": [3, 4]}", &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "cannot index parallel arrays"));
	dfs_err_clear(&err);
	memset(big, 'x', sizeof(big));
	memcpy(big, "{\"s\": \"", 7);
	memcpy(big + sizeof(big) - 3, "\"}", 3);
	ck_assert_int_eq(put(c, "2.json", big, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "index 'long'"));
	ck_assert_ptr_nonnull(strstr(err.msg, "1024-byte limit"));
	dfs_err_clear(&err);
	ck_assert_int_eq(put(c, "3.json", "{\"h\": [1]}", &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "hashed"));
	/* Nothing of them was stored. */
	{
		char *got = scan_all(c, "a_1_b_1");

		ck_assert_str_eq(got, "");
		free(got);
	}
	/* One array with a scalar, or a shared array prefix, is fine. */
	put_ok(c, "4.json", "{\"a\": [1, 2], \"b\": 3}");
	ck_assert_int_eq(mkix(c, "{\"key\": {\"x.p\": 1, \"x.q\": 1}}", NULL, &err), 0);
	put_ok(c, "5.json", "{\"x\": [{\"p\": 1, \"q\": 2}, {\"p\": 3, \"q\": 4}]}");
	{
		char *got = scan_all(c, "x.p_1_x.q_1");
		struct dfs_buf x;
		int64_t id5 = id_of(c, "5.json"), id4 = id_of(c, "4.json");
		const char *e[][2] = {
			{"null", "null"}, {"1", "2"}, {"1", "4"}, {"3", "2"}, {"3", "4"}};
		char *s1, *s2;

		dfs_buf_init(&x);
		expect(&x, id4, 2, e[0]);
		for (int i = 1; i < 5; i++)
			expect(&x, id5, 2, e[i]);
		s1 = sorted(got);
		s2 = sorted(x.data);
		ck_assert_str_eq(s1, s2);
		free(s1);
		free(s2);
		dfs_buf_release(&x);
		free(got);
	}
}
END_TEST

/* ---- entries ----------------------------------------------------------------------- */

START_TEST(test_store_index_entries_follow_writes)
{
	int64_t c = make_coll("items"), c2;
	struct dfs_err err = {0};
	struct store_txn *t;
	struct dfs_buf x;
	char *got;
	int64_t id1, id2;
	const char *v5[] = {"5"}, *v6[] = {"6"}, *vnull[] = {"null"};

	mkix_ok(c, "{\"key\": {\"p\": 1}}");
	put_ok(c, "1.json", "{\"p\": 5}");
	put_ok(c, "2.json", "{\"q\": 1}");
	id1 = id_of(c, "1.json");
	id2 = id_of(c, "2.json");
	dfs_buf_init(&x);
	expect(&x, id2, 1, vnull); /* null sorts before numbers */
	expect(&x, id1, 1, v5);
	got = scan_all(c, "p_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	/* update */
	put_ok(c, "1.json", "{\"p\": 6}");
	dfs_buf_reset(&x);
	expect(&x, id2, 1, vnull);
	expect(&x, id1, 1, v6);
	got = scan_all(c, "p_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	/* rename document -> document (changes _id, keeps the id) */
	ck_assert_int_eq(rename_entry(c, "1.json", "9.json", &err), 0);
	ck_assert_int_eq(id_of(c, "9.json"), id1);
	got = scan_all(c, "p_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	/* document -> scratch removes, scratch -> document adds */
	ck_assert_int_eq(rename_entry(c, "9.json", "9.json~", &err), 0);
	dfs_buf_reset(&x);
	expect(&x, id2, 1, vnull);
	got = scan_all(c, "p_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	ck_assert_int_eq(rename_entry(c, "9.json~", "9.json", &err), 0);
	expect(&x, id_of(c, "9.json"), 1, v6);
	got = scan_all(c, "p_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	/* delete */
	del(c, "9.json");
	dfs_buf_reset(&x);
	expect(&x, id2, 1, vnull);
	got = scan_all(c, "p_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	/* empty: definitions and entries go */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_empty(t, c, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	{
		struct store_index ix;

		ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
		ck_assert_int_eq(store_index_get(t, c, "p_1", &ix, &err), DFS_ENOENT);
		store_txn_abort(t);
	}
	/* drop: entries go with the collection */
	c2 = make_coll("other");
	mkix_ok(c2, "{\"key\": {\"p\": 1}}");
	put_ok(c2, "1.json", "{\"p\": 1}");
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_drop(t, c2, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	{
		char path[400];
		sqlite3 *h;
		sqlite3_stmt *s;

		snprintf(path, sizeof(path), "%s/shop.db", tmpdir);
		ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
		ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT count(*) FROM ikeys", -1, &s, NULL),
				 SQLITE_OK);
		ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
		ck_assert_int_eq(sqlite3_column_int(s, 0), 0);
		sqlite3_finalize(s);
		sqlite3_close(h);
	}
	dfs_buf_release(&x);
}
END_TEST

START_TEST(test_store_index_multikey_one_entry_per_distinct_element)
{
	int64_t c = make_coll("items");
	struct dfs_buf x;
	char *got, *vals, *s1, *s2;
	int64_t id;
	const char *e[] = {"1", "2", "[3, 4]", "\"x\""};
	const char *und[] = {"undefined"};

	mkix_ok(c, "{\"key\": {\"t\": 1}}");
	ck_assert(!stats(c, "t_1").multikey);
	put_ok(c, "1.json", "{\"t\": [1, 2, 2.0, NumberLong(1), [3, 4], \"x\"]}");
	put_ok(c, "2.json", "{\"t\": []}");
	id = id_of(c, "1.json");
	dfs_buf_init(&x);
	for (int i = 0; i < 4; i++)
		expect(&x, id, 1, &e[i]);
	expect(&x, id_of(c, "2.json"), 1, und);
	got = scan(c, "t_1", false, NULL, NULL, &vals);
	s1 = sorted(got);
	s2 = sorted(x.data);
	ck_assert_str_eq(s1, s2);
	ck_assert_ptr_nonnull(strstr(vals, "{\"0\": [3, 4]}"));
	ck_assert(stats(c, "t_1").multikey);
	/* The flag stays after the arrays are gone. */
	put_ok(c, "1.json", "{\"t\": 1}");
	del(c, "2.json");
	ck_assert(stats(c, "t_1").multikey);
	free(got);
	free(vals);
	free(s1);
	free(s2);
	dfs_buf_release(&x);
}
END_TEST

START_TEST(test_store_index_dotted_paths_through_arrays)
{
	int64_t c = make_coll("items");
	struct dfs_buf x;
	char *got, *s1, *s2;
	int64_t id1, id2, id3;
	const char *v1[] = {"1"}, *v2[] = {"2"}, *vn[] = {"null"}, *v7[] = {"7"};

	mkix_ok(c, "{\"key\": {\"a.b\": 1}}");
	put_ok(c, "1.json", "{\"a\": [{\"b\": 1}, {\"b\": [2, 1]}, {\"c\": 3}, 4]}");
	put_ok(c, "2.json", "{\"a\": {\"b\": 7}}");
	put_ok(c, "3.json", "{\"a\": 5}");
	id1 = id_of(c, "1.json");
	id2 = id_of(c, "2.json");
	id3 = id_of(c, "3.json");
	dfs_buf_init(&x);
	expect(&x, id1, 1, v1);
	expect(&x, id1, 1, v2);
	expect(&x, id1, 1, vn);
	expect(&x, id2, 1, v7);
	expect(&x, id3, 1, vn);
	got = scan_all(c, "a.b_1");
	s1 = sorted(got);
	s2 = sorted(x.data);
	ck_assert_str_eq(s1, s2);
	free(got);
	free(s1);
	free(s2);
	dfs_buf_release(&x);
}
END_TEST

START_TEST(test_store_index_sparse_skips_missing)
{
	int64_t c = make_coll("items");
	struct dfs_buf x;
	char *got;
	const char *vn[] = {"null"}, *v1[] = {"1"};

	mkix_ok(c, "{\"key\": {\"s\": 1}, \"sparse\": true, \"unique\": true}");
	put_ok(c, "1.json", "{\"s\": 1}");
	put_ok(c, "2.json", "{\"t\": 1}");
	put_ok(c, "3.json", "{\"t\": 2}"); /* no clash: neither is indexed */
	put_ok(c, "4.json", "{\"s\": null}");
	dfs_buf_init(&x);
	expect(&x, id_of(c, "4.json"), 1, vn);
	expect(&x, id_of(c, "1.json"), 1, v1);
	got = scan_all(c, "s_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	dfs_buf_release(&x);
}
END_TEST

/* Test hooks: a filter {"<field>": {"$exists": true}} and nothing else. */
static int hk_compile(const bson_t *filter, void **out, struct dfs_err *err)
{
	bson_iter_t it, sub;

	if (!bson_iter_init(&it, filter) || !bson_iter_next(&it) ||
	    !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &sub) ||
	    !bson_iter_find(&sub, "$exists"))
		return dfs_err_set(err, DFS_EINVAL, "test hooks take {f: {$exists: true}} only");
	*out = strdup(bson_iter_key(&it));
	return 0;
}

static bool hk_match(const void *compiled, const bson_t *doc)
{
	return bson_has_field(doc, compiled);
}

static void hk_free(void *compiled)
{
	free(compiled);
}

static const struct store_filter_hooks test_hooks = {hk_compile, hk_match, hk_free};

START_TEST(test_store_index_partial_holds_matching_documents)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct dfs_buf x;
	char *got;
	const char *v1[] = {"1"}, *v2[] = {"2"};

	store_filter_hooks_set(&test_hooks);
	put_ok(c, "1.json", "{\"a\": 1, \"f\": true}");
	put_ok(c, "2.json", "{\"a\": 1}");
	ck_assert_int_eq(mkix(c, "{\"key\": {\"a\": 1}, \"partialFilterExpression\": {\"a\": 1}}",
			      NULL, &err),
			 DFS_EINVAL);
	mkix_ok(c, "{\"key\": {\"a\": 1}, \"unique\": true,"
		   " \"partialFilterExpression\": {\"f\": {\"$exists\": true}}}");
	put_ok(c, "3.json", "{\"a\": 2, \"f\": 0}");
	put_ok(c, "4.json", "{\"a\": 2}"); /* outside the filter: no clash */
	dfs_buf_init(&x);
	expect(&x, id_of(c, "1.json"), 1, v1);
	expect(&x, id_of(c, "3.json"), 1, v2);
	got = scan_all(c, "a_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	ck_assert_int_eq(put(c, "5.json", "{\"a\": 2, \"f\": 1}", &err), DFS_EEXIST);
	/* Entering and leaving the filter by update. */
	put_ok(c, "1.json", "{\"a\": 1}");
	put_ok(c, "4.json", "{\"a\": 4, \"f\": 1}");
	dfs_buf_reset(&x);
	{
		const char *v4[] = {"4"};

		expect(&x, id_of(c, "3.json"), 1, v2);
		expect(&x, id_of(c, "4.json"), 1, v4);
	}
	got = scan_all(c, "a_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	dfs_buf_release(&x);
}
END_TEST

START_TEST(test_store_index_hash_equal_numbers_agree)
{
	int64_t c = make_coll("items");
	bson_value_t a = {.value_type = BSON_TYPE_INT32}, b = {.value_type = BSON_TYPE_DOUBLE},
		     d = {.value_type = BSON_TYPE_INT64};
	char *got, *vals;

	a.value.v_int32 = 5;
	b.value.v_double = 5.0;
	d.value.v_int64 = 6;
	ck_assert_int_eq(store_index_hash(&a), store_index_hash(&b));
	ck_assert_int_ne(store_index_hash(&a), store_index_hash(&d));
	mkix_ok(c, "{\"key\": {\"h\": \"hashed\"}}");
	put_ok(c, "1.json", "{\"h\": 5}");
	put_ok(c, "2.json", "{\"h\": 5.0}");
	got = scan(c, "h_hashed", false, NULL, NULL, &vals);
	{
		struct dfs_buf x, key;
		bson_value_t hv = {.value_type = BSON_TYPE_INT64};
		char want[128];

		hv.value.v_int64 = store_index_hash(&a);
		dfs_buf_init(&x);
		dfs_buf_init(&key);
		store_key_append(&key, &hv, false, NULL);
		hex(&x, key.data, key.len);
		dfs_buf_printf(&x, ":%lld\n", (long long)id_of(c, "1.json"));
		hex(&x, key.data, key.len);
		dfs_buf_printf(&x, ":%lld\n", (long long)id_of(c, "2.json"));
		ck_assert_str_eq(got, x.data);
		snprintf(want, sizeof(want), "{\"0\": %lld}\n", (long long)hv.value.v_int64);
		ck_assert_ptr_nonnull(strstr(vals, want));
		dfs_buf_release(&x);
		dfs_buf_release(&key);
	}
	free(got);
	free(vals);
}
END_TEST

START_TEST(test_store_ixscan_range_both_directions)
{
	int64_t c = make_coll("items");
	struct dfs_buf lo, hi, x;
	char *got, *vals;
	int64_t id[6];
	char name[24], text[64];

	mkix_ok(c, "{\"key\": {\"n\": 1}}");
	mkix_ok(c, "{\"key\": {\"n\": -1}}");
	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"n\": %d}", i * 10);
		put_ok(c, name, text);
		id[i] = id_of(c, name);
	}
	dfs_buf_init(&lo);
	dfs_buf_init(&hi);
	dfs_buf_init(&x);
	key_of(&lo, "10", false);
	key_of(&hi, "40", false);
	/* [10, 40) ascending and descending */
	for (int i = 1; i < 4; i++) {
		char v[8];
		const char *p[] = {v};

		snprintf(v, sizeof(v), "%d", i * 10);
		expect(&x, id[i], 1, p);
	}
	got = scan(c, "n_1", false, &lo, &hi, &vals);
	ck_assert_str_eq(got, x.data);
	ck_assert_str_eq(vals, "{\"0\": 10}\n{\"0\": 20}\n{\"0\": 30}\n");
	free(got);
	free(vals);
	got = scan(c, "n_1", true, &lo, &hi, &vals);
	ck_assert_str_eq(vals, "{\"0\": 30}\n{\"0\": 20}\n{\"0\": 10}\n");
	free(got);
	free(vals);
	/* lo only, hi only */
	got = scan(c, "n_1", false, &lo, NULL, &vals);
	ck_assert_str_eq(vals, "{\"0\": 10}\n{\"0\": 20}\n{\"0\": 30}\n{\"0\": 40}\n{\"0\": 50}\n");
	free(got);
	free(vals);
	got = scan(c, "n_1", true, NULL, &lo, &vals);
	ck_assert_str_eq(vals, "{\"0\": 0}\n");
	free(got);
	free(vals);
	/* The descending index stores inverted keys: its ascending scan runs from 50 down. */
	got = scan(c, "n_-1", false, NULL, NULL, &vals);
	ck_assert_str_eq(vals, "{\"0\": 50}\n{\"0\": 40}\n{\"0\": 30}\n{\"0\": 20}\n{\"0\": 10}\n"
			       "{\"0\": 0}\n");
	free(got);
	free(vals);
	dfs_buf_reset(&lo);
	dfs_buf_reset(&hi);
	key_of(&lo, "40", true);
	key_of(&hi, "10", true);
	got = scan(c, "n_-1", false, &lo, &hi, &vals);
	ck_assert_str_eq(vals, "{\"0\": 40}\n{\"0\": 30}\n{\"0\": 20}\n");
	free(got);
	free(vals);
	/* _id_ over docs, both directions; range re-binding on one scan */
	{
		struct dfs_err err = {0};
		struct store_txn *t;
		struct store_index ix;
		struct store_ixscan *s;
		struct store_ixkey k;
		int64_t seen[6];
		int n = 0;
		bson_t doc;
		bson_iter_t it;

		ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
		ck_assert_int_eq(store_index_get(t, c, "_id_", &ix, &err), 0);
		ck_assert_int_eq(store_ixscan_open(t, c, &ix, true, &s, &err), 0);
		while (store_ixscan_next(s, &k, &err) == 0) {
			ck_assert_int_eq(k.vals.len, 5);
			seen[n++] = k.id;
		}
		ck_assert_int_eq(n, 6);
		for (int i = 0; i < 6; i++)
			ck_assert_int_eq(seen[i], id[5 - i]);
		dfs_buf_reset(&lo);
		dfs_buf_reset(&hi);
		key_of(&lo, "2", false);
		key_of(&hi, "4", false);
		ck_assert_int_eq(store_ixscan_range(s, (const uint8_t *)lo.data, lo.len,
						    (const uint8_t *)hi.data, hi.len, &err),
				 0);
		ck_assert_int_eq(store_ixscan_next(s, &k, &err), 0);
		ck_assert_int_eq(k.id, id[3]);
		ck_assert_int_eq(store_ixscan_next(s, &k, &err), 0);
		ck_assert_int_eq(k.id, id[2]);
		ck_assert_int_eq(store_ixscan_next(s, &k, &err), DFS_ENOENT);
		/* FETCH */
		ck_assert_int_eq(store_doc_fetch(t, id[4], true, &doc, &err), 0);
		ck_assert(bson_iter_init_find(&it, &doc, "n"));
		ck_assert_int_eq(bson_iter_int32(&it), 40);
		ck_assert_int_eq(store_doc_fetch(t, 999999, true, &doc, &err), DFS_ENOENT);
		store_ixscan_free(s);
		store_index_release(&ix);
		store_txn_abort(t);
	}
	dfs_buf_release(&lo);
	dfs_buf_release(&hi);
	dfs_buf_release(&x);
}
END_TEST

/* Field n of document id as a read transaction of d fetches it through the document cache
 * (-1: not found); with sid, the document's _id string (or "") goes there. */
static int fetch_n(struct store_db *d, int64_t id, char *sid, size_t sidlen)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	bson_iter_t it;
	bson_t doc;
	int rc, n = -1;

	ck_assert_int_eq(store_txn_begin(d, false, &t, &err), 0);
	rc = store_doc_fetch(t, id, true, &doc, &err);
	ck_assert_msg(rc == 0 || rc == DFS_ENOENT, "%s", err.msg);
	if (rc == 0) {
		ck_assert(bson_iter_init_find(&it, &doc, "n"));
		n = bson_iter_int32(&it);
		if (sid) {
			ck_assert(bson_iter_init_find(&it, &doc, "_id"));
			snprintf(sid, sidlen, "%s",
				 BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "");
		}
	}
	store_txn_abort(t);
	return n;
}

/* One write transaction of d: replaces id with text (NULL: deletes it). */
static void set_doc(struct store_db *d, int64_t id, const char *text)
{
	struct dfs_err err = {0};
	struct store_txn *t;

	ck_assert_int_eq(store_txn_begin(d, true, &t, &err), 0);
	if (text) {
		bson_t *b = parse(text);

		ck_assert_msg(store_doc_replace(t, id, b, &err) == 0, "%s", err.msg);
		bson_destroy(b);
	} else {
		ck_assert_msg(store_entry_delete(t, id, &err) == 0, "%s", err.msg);
	}
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

static struct store_dcache_stats dc_stats(void)
{
	struct store_dcache_stats s;

	store_db_doc_cache_stats(db, &s);
	return s;
}

/* The document cache answers a repeated fetch and never serves a document older than the
 * reader's snapshot, whoever wrote it: this process or another handle on the store (as
 * another process would), by update, delete, rename or collection drop (dcache.c). */
START_TEST(test_store_doc_fetch_cache_follows_every_writer)
{
	int64_t c = make_coll("items"), c2 = make_coll("other");
	struct store *st2;
	struct store_db *db2;
	struct dfs_err err = {0};
	struct store_txn *t, *old;
	struct store_dcache_stats s;
	int64_t a, b, o, z;
	bson_t doc;
	bson_iter_t it;
	char sid[32];

	put_ok(c, "a.json", "{\"n\": 1}");
	put_ok(c, "b.json", "{\"n\": 2}");
	put_ok(c, "o.json", "{\"n\": 7}");
	a = id_of(c, "a.json");
	b = id_of(c, "b.json");
	o = id_of(c, "o.json");
	ck_assert_int_eq(fetch_n(db, a, NULL, 0), 1);
	ck_assert_int_eq(fetch_n(db, a, NULL, 0), 1);
	s = dc_stats();
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_eq(s.hits, 1);
	ck_assert_uint_eq(s.misses, 1);
	/* This process writes. */
	set_doc(db, a, "{\"_id\": \"a\", \"n\": 3}");
	ck_assert_int_eq(fetch_n(db, a, NULL, 0), 3);
	/* Another handle writes. */
	ck_assert_int_eq(store_open(tmpdir, false, &st2, &err), 0);
	ck_assert_int_eq(store_db_get(st2, "shop", false, &db2, &err), 0);
	ck_assert_int_eq(fetch_n(db, b, NULL, 0), 2);
	set_doc(db2, a, "{\"_id\": \"a\", \"n\": 4}");
	set_doc(db2, b, NULL);
	ck_assert_int_eq(fetch_n(db, a, NULL, 0), 4);
	ck_assert_int_eq(fetch_n(db, b, NULL, 0), -1);
	/* A reader of an older snapshot reads its own version and does not put it back. */
	ck_assert_int_eq(store_txn_begin(db, false, &old, &err), 0);
	ck_assert_int_eq(store_doc_fetch(old, a, true, &doc, &err), 0);
	set_doc(db2, a, "{\"_id\": \"a\", \"n\": 5}");
	ck_assert_int_eq(fetch_n(db, o, NULL, 0), 7); /* brings the cache past a's change */
	ck_assert_int_eq(store_doc_fetch(old, a, true, &doc, &err), 0);
	ck_assert(bson_iter_init_find(&it, &doc, "n"));
	ck_assert_int_eq(bson_iter_int32(&it), 4);
	store_txn_abort(old);
	ck_assert_int_eq(fetch_n(db, a, NULL, 0), 5);
	/* A rename by the other handle changes _id in place (the same entry id). */
	ck_assert_int_eq(fetch_n(db, a, sid, sizeof(sid)), 5);
	ck_assert_str_eq(sid, "a");
	ck_assert_int_eq(store_txn_begin(db2, true, &t, &err), 0);
	ck_assert_msg(store_entry_rename(t, a, c, "z.json", NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	z = id_of(c, "z.json");
	ck_assert_int_eq(fetch_n(db, z, sid, sizeof(sid)), 5);
	ck_assert_str_eq(sid, "z");
	/* A write transaction neither reads nor fills the cache. */
	s = dc_stats();
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_doc_fetch(t, z, true, &doc, &err), 0);
	store_txn_abort(t);
	ck_assert_uint_eq(dc_stats().hits + dc_stats().misses, s.hits + s.misses);
	/* A collection dropped (here, another one) empties it. */
	ck_assert_uint_gt(dc_stats().entries, 0);
	ck_assert_int_eq(store_txn_begin(db2, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_drop(t, c2, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(fetch_n(db, z, NULL, 0), 5);
	ck_assert_uint_eq(dc_stats().entries, 1);
	store_free(st2);
	/* Budget 0 turns it off and empties it. */
	store_set_doc_cache(st, 0);
	ck_assert_uint_eq(dc_stats().entries, 0);
	ck_assert_int_eq(fetch_n(db, z, NULL, 0), 5);
	ck_assert_uint_eq(dc_stats().entries, 0);
}
END_TEST

/* The document cache stays within its budget, the newest documents kept and the oldest
 * unused ones gone. */
START_TEST(test_store_doc_fetch_cache_stays_within_budget)
{
	int64_t c = make_coll("many"), id[1000];
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_dcache_stats s;
	char name[32], text[64];
	int i;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	for (i = 0; i < 1000; i++) {
		struct store_entry e;

		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"n\": %d}", i);
		ck_assert_int_eq(store_doc_write_text(t, c, name, text, strlen(text), &attrs, &e,
						      &err),
				 0);
		id[i] = e.id;
	}
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	store_set_doc_cache(st, 16384);
	ck_assert_int_eq(fetch_n(db, id[0], NULL, 0), 0);
	ck_assert_int_eq(fetch_n(db, id[0], NULL, 0), 0);
	for (i = 1; i < 1000; i++)
		ck_assert_int_eq(fetch_n(db, id[i], NULL, 0), i);
	s = dc_stats();
	ck_assert_uint_le(s.bytes, 16384);
	ck_assert_uint_gt(s.entries, 10);
	ck_assert_uint_lt(s.entries, 1000);
	ck_assert_uint_eq(s.hits, 1);
	/* the newest is there; the oldest unused ones are gone */
	ck_assert_int_eq(fetch_n(db, id[999], NULL, 0), 999);
	ck_assert_uint_eq(dc_stats().hits, 2);
	ck_assert_int_eq(fetch_n(db, id[1], NULL, 0), 1);
	ck_assert_uint_eq(dc_stats().hits, 2);
}
END_TEST

/* The text of one fetch of id in a read transaction (store_doc_text): "-" when doc is not
 * a cached fetch, "" when the cache has no text for it; keeps keep when it has none. */
static void fetch_text(int64_t id, bool cache, const char *keep, char *out, size_t cap)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	const char *text;
	size_t len;
	bson_t doc, copy;

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_doc_fetch(t, id, cache, &doc, &err), 0);
	/* the same bytes elsewhere are not the fetched document */
	bson_copy_to(&doc, &copy);
	ck_assert_int_eq(store_doc_text(t, &copy, &text, &len), 0);
	bson_destroy(&copy);
	if (!store_doc_text(t, &doc, &text, &len)) {
		snprintf(out, cap, "-");
	} else {
		ck_assert_int_eq(store_doc_text(t, &doc, &text, &len), id);
		snprintf(out, cap, "%.*s", (int)len, text ? text : "");
		if (!text && keep)
			store_doc_keep_text(t, id, keep, strlen(keep));
	}
	store_txn_abort(t);
}

/* A cache entry keeps the rendering a reader made of its document, gives it to later
 * readers, and loses it with the entry when the document changes; budget counts it. */
START_TEST(test_store_doc_text_lives_with_its_cache_entry)
{
	int64_t c = make_coll("texts"), a, b;
	struct store_dcache_stats s0, s1;
	char got[64];

	put_ok(c, "a.json", "{\"n\": 1}");
	put_ok(c, "b.json", "{\"n\": 2}");
	a = id_of(c, "a.json");
	b = id_of(c, "b.json");
	fetch_text(a, false, "X", got, sizeof(got));
	ck_assert_str_eq(got, "-"); /* not through the cache */
	fetch_text(a, true, "{\"n\": 1, \"t\": 1}", got, sizeof(got));
	ck_assert_str_eq(got, ""); /* a miss: no text yet, kept now */
	s0 = dc_stats();
	fetch_text(a, true, "other", got, sizeof(got));
	ck_assert_str_eq(got, "{\"n\": 1, \"t\": 1}"); /* a hit with the text kept */
	fetch_text(a, true, NULL, got, sizeof(got));
	ck_assert_str_eq(got, "{\"n\": 1, \"t\": 1}"); /* not replaced by "other" */
	s1 = dc_stats();
	ck_assert_uint_eq(s1.entries, s0.entries);
	fetch_text(b, true, NULL, got, sizeof(got));
	ck_assert_str_eq(got, "");
	ck_assert_uint_gt(dc_stats().bytes, s0.bytes);
	/* a change of a drops its entry, text and all */
	set_doc(db, a, "{\"_id\": \"a\", \"n\": 3}");
	fetch_text(a, true, NULL, got, sizeof(got));
	ck_assert_str_eq(got, "");
	ck_assert_int_eq(fetch_n(db, a, NULL, 0), 3);
	/* a reader whose snapshot the cache has left behind keeps no text: its rendering is
	 * of the older document */
	{
		struct dfs_err err = {0};
		struct store_txn *t1, *t2;
		const char *text;
		size_t len;
		bson_t d1, d2;

		ck_assert_int_eq(store_txn_begin(db, false, &t1, &err), 0);
		ck_assert_int_eq(store_doc_fetch(t1, a, true, &d1, &err), 0);
		ck_assert_int_eq(store_doc_text(t1, &d1, &text, &len), a);
		ck_assert_ptr_null(text);
		set_doc(db, a, "{\"_id\": \"a\", \"n\": 4}");
		ck_assert_int_eq(store_txn_begin(db, false, &t2, &err), 0);
		ck_assert_int_eq(store_doc_fetch(t2, a, true, &d2, &err), 0);
		ck_assert_int_eq(store_doc_text(t2, &d2, &text, &len), a);
		store_doc_keep_text(t1, a, "stale", 5);
		store_txn_abort(t1);
		store_txn_abort(t2);
		fetch_text(a, true, NULL, got, sizeof(got));
		ck_assert_str_eq(got, "");
	}
	/* without a cache, nothing is kept */
	store_set_doc_cache(st, 0);
	fetch_text(b, true, "Y", got, sizeof(got));
	ck_assert_str_eq(got, "-");
	store_set_doc_cache(st, STORE_DOC_CACHE_DEFAULT);
	fetch_text(b, true, "Z", got, sizeof(got));
	ck_assert_str_eq(got, "");
	fetch_text(b, true, NULL, got, sizeof(got));
	ck_assert_str_eq(got, "Z");
}
END_TEST

/* Readers on threads, each fetching every document of the collection in one snapshot through
 * the cache, while a writer on another handle (as another process would) rewrites them all
 * in each of its transactions: a reader must see one version across its snapshot. */
enum { RACE_DOCS = 40, RACE_WRITES = 150 };
static int64_t race_id[RACE_DOCS];
static atomic_int race_done;

static void *race_reader(void *arg)
{
	long bad = 0, rounds = 0;

	(void)arg;
	while (!race_done || rounds < 5) {
		struct dfs_err err = {0};
		struct store_txn *t;
		int first = -1;

		if (store_txn_begin(db, false, &t, &err) != 0)
			return (void *)-1L;
		for (int i = 0; i < RACE_DOCS; i++) {
			bson_iter_t it;
			bson_t doc;
			int n;

			if (store_doc_fetch(t, race_id[(i * 7) % RACE_DOCS], true, &doc, &err) !=
				    0 ||
			    !bson_iter_init_find(&it, &doc, "n")) {
				bad++;
				break;
			}
			n = bson_iter_int32(&it);
			if (first < 0)
				first = n;
			else if (n != first)
				bad++;
		}
		store_txn_abort(t);
		rounds++;
	}
	return (void *)bad;
}

START_TEST(test_store_doc_fetch_cache_readers_see_one_snapshot)
{
	int64_t c = make_coll("race");
	struct store *st2;
	struct store_db *db2;
	struct dfs_err err = {0};
	struct store_txn *t;
	pthread_t th[2];
	char name[32];
	void *bad;
	int i, k;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	for (i = 0; i < RACE_DOCS; i++) {
		struct store_entry e;

		snprintf(name, sizeof(name), "%d.json", i);
		ck_assert_int_eq(
			store_doc_write_text(t, c, name, "{\"n\": 0}", 8, &attrs, &e, &err), 0);
		race_id[i] = e.id;
	}
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(store_open(tmpdir, false, &st2, &err), 0);
	ck_assert_int_eq(store_db_get(st2, "shop", false, &db2, &err), 0);
	race_done = 0;
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_reader, NULL), 0);
	for (k = 1; k <= RACE_WRITES; k++) {
		ck_assert_int_eq(store_txn_begin(k % 2 ? db2 : db, true, &t, &err), 0);
		for (i = 0; i < RACE_DOCS; i++) {
			char text[64];
			bson_t *b;

			snprintf(text, sizeof(text), "{\"_id\": %d, \"n\": %d}", i, k);
			b = parse(text);
			ck_assert_msg(store_doc_replace(t, race_id[i], b, &err) == 0, "%s",
				      err.msg);
			bson_destroy(b);
		}
		ck_assert_int_eq(store_txn_commit(t, &err), 0);
	}
	race_done = 1;
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(pthread_join(th[i], &bad), 0);
		ck_assert_msg(bad == NULL, "reader %d saw %ld mixed or failed fetches", i,
			      (long)bad);
	}
	ck_assert_uint_gt(dc_stats().hits, 0);
	store_free(st2);
}
END_TEST

/* FETCH keeps one blob handle per transaction: a row written or deleted in the same
 * transaction is read afresh, a missing id is DFS_ENOENT and the next fetch still works. */
START_TEST(test_store_doc_fetch_follows_writes_in_its_transaction)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct store_txn *t;
	int64_t a, b;
	bson_iter_t it;
	bson_t doc, *nd;

	put_ok(c, "a.json", "{\"n\": 1}");
	put_ok(c, "b.json", "{\"n\": 2}");
	a = id_of(c, "a.json");
	b = id_of(c, "b.json");
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_doc_fetch(t, a, true, &doc, &err), 0);
	ck_assert(bson_iter_init_find(&it, &doc, "n"));
	ck_assert_int_eq(bson_iter_int32(&it), 1);
	nd = parse("{\"_id\": \"a\", \"n\": 10, \"pad\": \"longer than before\"}");
	ck_assert_int_eq(store_doc_replace(t, a, nd, &err), 0);
	bson_destroy(nd);
	ck_assert_int_eq(store_doc_fetch(t, a, true, &doc, &err), 0);
	ck_assert(bson_iter_init_find(&it, &doc, "n"));
	ck_assert_int_eq(bson_iter_int32(&it), 10);
	ck_assert_int_eq(store_entry_delete(t, a, &err), 0);
	ck_assert_int_eq(store_doc_fetch(t, a, true, &doc, &err), DFS_ENOENT);
	ck_assert_int_eq(store_doc_fetch(t, b, true, &doc, &err), 0);
	ck_assert(bson_iter_init_find(&it, &doc, "n"));
	ck_assert_int_eq(bson_iter_int32(&it), 2);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_doc_fetch(t, a, true, &doc, &err), DFS_ENOENT);
	ck_assert_int_eq(store_doc_fetch(t, b, true, &doc, &err), 0);
	store_txn_abort(t);
}
END_TEST

/* Entries of equal keys come in _id order in both directions, whatever the insertion order:
 * short groups (reordered in memory) and one longer than a reverse scan buffers. */
START_TEST(test_store_ixscan_ties_in_id_order)
{
	enum { N = 300, LONG = 200 };
	int64_t c = make_coll("items"), entry[N];
	struct dfs_err err = {0};
	char name[24], text[64];
	int a[N];

	mkix_ok(c, "{\"key\": {\"a\": 1}}");
	/* _id i: a = 1 for the first LONG ids, else i / 3 (groups of three) */
	for (int i = N - 1; i >= 0; i--) {
		a[i] = i < LONG ? 1 : i / 3;
		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"a\": %d}", a[i]);
		put_ok(c, name, text);
		entry[i] = id_of(c, name);
	}
	for (int reverse = 0; reverse < 2; reverse++) {
		struct store_txn *t;
		struct store_index ix;
		struct store_ixscan *s;
		struct store_ixkey k;
		int got[N], n = 0, rc;

		ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
		ck_assert_int_eq(store_index_get(t, c, "a_1", &ix, &err), 0);
		ck_assert_int_eq(store_ixscan_open(t, c, &ix, reverse, &s, &err), 0);
		while (n < N && (rc = store_ixscan_next(s, &k, &err)) == 0) {
			int i = 0;

			while (i < N && entry[i] != k.id)
				i++;
			ck_assert_int_lt(i, N);
			got[n++] = i;
		}
		{
			int extra = 0;

			while (store_ixscan_next(s, &k, &err) == 0)
				extra++;
			ck_assert_msg(n == N && extra == 0, "%s: %d + %d entries",
				      reverse ? "reverse" : "forward", n, extra);
		}
		/* a in scan direction, ties by _id ascending */
		for (int j = 1; j < N; j++) {
			int p = got[j - 1], q = got[j];

			if (a[p] == a[q])
				ck_assert_msg(p < q, "%s: _id %d before %d",
					      reverse ? "reverse" : "forward", p, q);
			else
				ck_assert(reverse ? a[p] > a[q] : a[p] < a[q]);
		}
		store_ixscan_free(s);
		store_index_release(&ix);
		store_txn_abort(t);
	}
}
END_TEST

/* The scan of index name of coll with each entry id replaced by the number i of the
 * document (ids[i] is its entry id), which the collections being compared share. */
static char *scan_docs(int64_t coll, const char *name, const int64_t *ids, int n)
{
	char *s = scan_all(coll, name), *save = NULL;
	struct dfs_buf out;

	dfs_buf_init(&out);
	dfs_buf_puts(&out, "");
	for (char *p = strtok_r(s, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(p, ':');
		long long id;
		int i = 0;

		ck_assert_ptr_nonnull(colon);
		id = atoll(colon + 1);
		while (i < n && ids[i] != id)
			i++;
		ck_assert_int_lt(i, n);
		dfs_buf_printf(&out, "%.*s:%d\n", (int)(colon - p), p, i);
	}
	free(s);
	return out.data;
}

/* An index built over existing documents holds the entries that the writes give an index
 * created first: with _ids inserted in ascending order (the build sorts by index key only)
 * and scrambled (it sorts by whole stored keys), many equal keys, keys sharing more than 8
 * bytes, multikey and descending fields, and a unique index (its check compares neighbours
 * in the sorted order). */
START_TEST(test_store_index_create_build_matches_writes)
{
	enum { N = 700 };
	static const char *const specs[] = {
		"{\"key\": {\"a\": 1}}",
		"{\"key\": {\"s\": 1, \"a\": -1}}",
		"{\"key\": {\"m\": -1}}",
		"{\"key\": {\"a\": 1, \"s\": 1}, \"unique\": true}",
	};
	static const char *const names[] = {"a_1", "s_1_a_-1", "m_-1", "a_1_s_1"};

	for (int scrambled = 0; scrambled < 2; scrambled++) {
		int64_t built = make_coll(scrambled ? "built1" : "built0");
		int64_t kept = make_coll(scrambled ? "kept1" : "kept0");
		int64_t bid[N], kid[N];
		char name[64], text[256];

		for (size_t x = 0; x < sizeof(specs) / sizeof(*specs); x++)
			mkix_ok(kept, specs[x]);
		for (int j = 0; j < N; j++) {
			int i = scrambled ? (j * 241) % N : j;

			if (scrambled)
				snprintf(name, sizeof(name),
					 "user-with-a-long-common-prefix-%04d.json", i);
			else
				snprintf(name, sizeof(name), "%d.json", i);
			snprintf(text, sizeof(text),
				 "{\"a\": %d, \"s\": \"a prefix longer than 8 bytes %d-%d\","
				 " \"m\": [%d, %d, \"x%d\"]}",
				 i % 4, i % 13, i, i % 5, i % 7, i % 3);
			put_ok(built, name, text);
			put_ok(kept, name, text);
			bid[i] = id_of(built, name);
			kid[i] = id_of(kept, name);
		}
		for (size_t x = 0; x < sizeof(specs) / sizeof(*specs); x++) {
			char *b, *k;

			mkix_ok(built, specs[x]);
			b = scan_docs(built, names[x], bid, N);
			k = scan_docs(kept, names[x], kid, N);
			ck_assert_msg(strcmp(b, k) == 0, "%s, %s _ids: built and kept differ",
				      names[x], scrambled ? "scrambled" : "ascending");
			free(b);
			free(k);
		}
	}
}
END_TEST

/* reverse scans over groups of exactly 63/64/65/128/129 equal keys, with int and
 * string _ids mixed, unbounded and with bounds at the edges of groups, and two ranges in a
 * row (as an $in runs them): exactly the entries of the range, a descending, ties by _id. */
START_TEST(test_store_ixscan_backward_ties_at_group_edges)
{
	static const int gsize[] = {63, 64, 65, 1, 129, 128, 2};
	enum { NG = 7 };
	int64_t c = make_coll("items");
	int n = 0, total = 0;
	static int a[1000];
	static int64_t entry[1000];
	char name[32], text[96];

	for (int g = 0; g < NG; g++)
		total += gsize[g];
	/* _id i: an int for odd i, else the string "s<i>"; inserted in a scrambled order */
	for (int g = 0; g < NG; g++)
		for (int j = 0; j < gsize[g]; j++)
			a[n++] = g;
	mkix_ok(c, "{\"key\": {\"a\": 1}}");
	for (int k = 0; k < total; k++) {
		int i = (k * 37) % total; /* total is prime to 37 */

		if (i % 2)
			snprintf(name, sizeof(name), "%d.json", 100000 + i);
		else
			snprintf(name, sizeof(name), "s%05d.json", i);
		snprintf(text, sizeof(text), "{\"a\": %d}", a[i]);
		put_ok(c, name, text);
		entry[i] = id_of(c, name);
	}
	/* ranges: {lo group, hi group, lo inclusive, hi inclusive}; -1: unbounded */
	static const int rg[][4] = {{-1, -1, 1, 1}, {1, 4, 1, 1}, {1, 4, 0, 0}, {0, 2, 1, 0},
				    {2, 6, 0, 1},  {4, 4, 1, 1}, {2, 2, 1, 1}};
	for (size_t r = 0; r < sizeof(rg) / sizeof(rg[0]); r++) {
		struct dfs_err err = {0};
		struct store_txn *t;
		struct store_index ix;
		struct store_ixscan *s;
		struct store_ixkey k;
		struct dfs_buf lo, hi;
		int got[1000], ng = 0, exp[1000], ne = 0;
		char v[16];

		dfs_buf_init(&lo);
		dfs_buf_init(&hi);
		if (rg[r][0] >= 0) {
			snprintf(v, sizeof(v), "%d", rg[r][0]);
			key_of(&lo, v, false);
			if (!rg[r][2])
				dfs_buf_putc(&lo, (char)0xff);
			snprintf(v, sizeof(v), "%d", rg[r][1]);
			key_of(&hi, v, false);
			if (rg[r][3])
				dfs_buf_putc(&hi, (char)0xff);
		}
		ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
		ck_assert_int_eq(store_index_get(t, c, "a_1", &ix, &err), 0);
		ck_assert_int_eq(store_ixscan_open(t, c, &ix, true, &s, &err), 0);
		/* the range twice: once from open's full range after a partial read, then the real */
		for (int pass = 0; pass < 2; pass++) {
			ng = 0;
			if (rg[r][0] >= 0)
				ck_assert_int_eq(store_ixscan_range(s, (uint8_t *)lo.data, lo.len,
								    (uint8_t *)hi.data, hi.len,
								    &err),
						 0);
			else
				ck_assert_int_eq(store_ixscan_range(s, NULL, 0, NULL, 0, &err), 0);
			while (ng < 1000 && store_ixscan_next(s, &k, &err) == 0) {
				int i = 0;

				while (i < total && entry[i] != k.id)
					i++;
				ck_assert_int_lt(i, total);
				got[ng++] = i;
				if (pass == 0 && ng == 70)
					break; /* stop inside a group, then re-range */
			}
		}
		/* expected: groups from hi down to lo, in each odd (int) ids ascending, then even
		 * (string) ids ascending */
		for (int g = NG - 1; g >= 0; g--) {
			if (rg[r][0] >= 0) {
				if (g < rg[r][0] || g > rg[r][1])
					continue;
				if ((g == rg[r][0] && !rg[r][2]) || (g == rg[r][1] && !rg[r][3]))
					continue;
			}
			for (int par = 1; par >= 0; par--)
				for (int i = 0; i < total; i++)
					if (a[i] == g && i % 2 == par)
						exp[ne++] = i;
		}
		ck_assert_msg(ng == ne, "range %zu: %d entries, expected %d", r, ng, ne);
		for (int j = 0; j < ne; j++)
			ck_assert_msg(got[j] == exp[j], "range %zu: position %d: %d, expected %d", r,
				      j, got[j], exp[j]);
		store_ixscan_free(s);
		store_index_release(&ix);
		store_txn_abort(t);
		dfs_buf_release(&lo);
		dfs_buf_release(&hi);
	}
}
END_TEST

/* A unique build that meets a clash fails and leaves no index (with BUILD_MEM shrunk by
 * hand, the clash spans two sorted batches); a multikey unique build with repeats inside a
 * document succeeds, and a later clash through an array is refused. */
START_TEST(test_store_index_create_unique_clash_leaves_nothing)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	char name[32], text[96];
	struct store_txn *t;
	struct store_index ix;

	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"k\": %d, \"m\": [%d, %d, %d]}", i == 900 ? 3 : i,
			 i, i, -i - 1);
		put_ok(c, name, text);
	}
	ck_assert_int_eq(mkix(c, "{\"key\": {\"k\": 1}, \"unique\": true}", NULL, &err),
			 DFS_EEXIST);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_index_get(t, c, "k_1", &ix, &err), DFS_ENOENT);
	store_txn_abort(t);
	mkix_ok(c, "{\"key\": {\"m\": 1}, \"unique\": true}");
	ck_assert_int_eq(stats(c, "m_1").entries, 2000);
	ck_assert_int_eq(store_check(st, NULL, NULL, &err), 0);
	/* a later document clashing with an early one through its array */
	put_ok(c, "x.json", "{\"m\": [5000, 6000]}");
	ck_assert_int_eq(put(c, "y.json", "{\"m\": [7000, -1]}", &err), DFS_EEXIST);
}
END_TEST

/* ---- TTL --------------------------------------------------------------------------- */

START_TEST(test_store_ttl_sweep_deletes_exactly_the_expired)
{
	int64_t c = make_coll("sessions"), d = make_coll("desc");
	struct dfs_err err = {0};
	int64_t deleted = -1;
	const int64_t now = 1700000000000LL;
	char text[128], name[32];

	mkix_ok(c, "{\"key\": {\"at\": 1}, \"expireAfterSeconds\": 60}");
	mkix_ok(d, "{\"key\": {\"at\": -1}, \"expireAfterSeconds\": 0}");
	/* at = now - i seconds, i = 0..119: those with i > 60 are expired in c. */
	for (int i = 0; i < 120; i++) {
		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"at\": {\"$date\": {\"$numberLong\": \"%lld\"}}}",
			 (long long)(now - i * 1000LL));
		put_ok(c, name, text);
	}
	put_ok(c, "str.json", "{\"at\": \"2000-01-01\"}"); /* not a date */
	put_ok(c, "none.json", "{\"x\": 1}");		   /* no field */
	put_ok(c, "arr.json", "{\"at\": [{\"$date\": 0}, {\"$date\": 4102444800000}]}");
	put_ok(d, "old.json", "{\"at\": {\"$date\": 1000}}");
	put_ok(d, "new.json", "{\"at\": {\"$date\": 4102444800000}}");
	ck_assert_msg(store_ttl_sweep(db, now, &deleted, &err) == 0, "%s", err.msg);
	/* c: i = 61..119 (59) and arr.json; d: old.json */
	ck_assert_int_eq(deleted, 59 + 1 + 1);
	{
		struct store_txn *t;
		struct store_entry e;

		ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
		for (int i = 0; i < 120; i++) {
			snprintf(name, sizeof(name), "%d.json", i);
			ck_assert_int_eq(store_entry_lookup(t, c, name, &e, NULL) == 0, i <= 60);
		}
		ck_assert_int_eq(store_entry_lookup(t, c, "str.json", &e, NULL), 0);
		ck_assert_int_eq(store_entry_lookup(t, c, "none.json", &e, NULL), 0);
		ck_assert_int_eq(store_entry_lookup(t, c, "arr.json", &e, NULL), DFS_ENOENT);
		ck_assert_int_eq(store_entry_lookup(t, d, "old.json", &e, NULL), DFS_ENOENT);
		ck_assert_int_eq(store_entry_lookup(t, d, "new.json", &e, NULL), 0);
		store_txn_abort(t);
	}
	ck_assert_int_eq(store_ttl_sweep(db, now, &deleted, &err), 0);
	ck_assert_int_eq(deleted, 0);
	ck_assert_int_eq(store_check(st, NULL, NULL, &err), 0);
}
END_TEST

/* ---- check and migration ----------------------------------------------------------- */

static void sql(const char *dbname, const char *stmt)
{
	char path[400];
	sqlite3 *h;
	char *msg = NULL;

	snprintf(path, sizeof(path), "%s/%s.db", tmpdir, dbname);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	sqlite3_busy_timeout(h, 5000);
	ck_assert_msg(sqlite3_exec(h, stmt, NULL, NULL, &msg) == SQLITE_OK, "%s", msg);
	sqlite3_close(h);
}

START_TEST(test_store_check_finds_wrong_index_entries)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct problems pr = {0};

	mkix_ok(c, "{\"key\": {\"a\": 1}}");
	put_ok(c, "1.json", "{\"a\": [1, 2]}");
	put_ok(c, "2.json", "{\"a\": 3}");
	ck_assert_msg(store_check(st, on_problem, &pr, &err) == 0, "%s", pr.last);
	sql("shop", "DELETE FROM ikeys WHERE key = (SELECT max(key) FROM ikeys)");
	ck_assert_int_eq(store_check(st, on_problem, &pr, &err), DFS_ECORRUPT);
	ck_assert_int_gt(pr.n, 0);
	ck_assert_ptr_nonnull(strstr(pr.last, "index 'a_1'"));
}
END_TEST

/* The schema of version 1, as db.c created it. */
static const char *const v1_schema =
	"CREATE TABLE meta(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
	"CREATE TABLE colls(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
	" options BLOB, ctime INTEGER, mtime INTEGER, mode INTEGER, uid INTEGER, gid INTEGER);"
	"CREATE TABLE indexes(coll INTEGER, name TEXT, spec BLOB,"
	" PRIMARY KEY(coll, name)) WITHOUT ROWID;"
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
	"INSERT INTO meta VALUES('dbnum', 7), ('next_id', 10), ('ctime', 1);"
	"INSERT INTO colls VALUES(1, 'items', NULL, 1, 1, 493, 0, 0);"
	"PRAGMA user_version = 1;";

START_TEST(test_store_db_get_migrates_schema_1)
{
	struct dfs_err err = {0};
	struct store_db *old;
	struct store_txn *t;
	struct store_index *ixs;
	struct problems pr = {0};
	char path[400], *got;
	sqlite3 *h;
	sqlite3_stmt *s;
	bson_t *doc = parse("{\"_id\": 1, \"p\": 5}"), *spec;
	struct dfs_buf key;
	int n;

	snprintf(path, sizeof(path), "%s/old.db", tmpdir);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(h, v1_schema, NULL, NULL, NULL), SQLITE_OK);
	dfs_buf_init(&key);
	{
		bson_iter_t it;

		ck_assert(bson_iter_init_find(&it, doc, "_id"));
		ck_assert_int_eq(store_key_append(&key, bson_iter_value(&it), false, &err), 0);
	}
	ck_assert_int_eq(sqlite3_prepare_v2(h,
					    "INSERT INTO docs VALUES(2, 1, ?1, '1.json', 25,"
					    " 420, 0, 0, 1, 1, ?2)",
					    -1, &s, NULL),
			 SQLITE_OK);
	sqlite3_bind_blob(s, 1, key.data, (int)key.len, SQLITE_STATIC);
	sqlite3_bind_blob(s, 2, bson_get_data(doc), (int)doc->len, SQLITE_STATIC);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	spec = parse("{\"v\": 2, \"key\": {\"p\": 1}, \"name\": \"p_1\"}");
	ck_assert_int_eq(
		sqlite3_prepare_v2(h, "INSERT INTO indexes VALUES(1, 'p_1', ?1)", -1, &s, NULL),
		SQLITE_OK);
	sqlite3_bind_blob(s, 1, bson_get_data(spec), (int)spec->len, SQLITE_STATIC);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	sqlite3_close(h);

	/* check reads a version-1 database as it is (it migrates only when opened) */
	ck_assert_msg(store_check(st, on_problem, &pr, &err) == 0, "%s", pr.last);
	ck_assert_msg(store_db_get(st, "old", false, &old, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_db_number(old), 7);
	ck_assert_int_eq(store_txn_begin(old, false, &t, &err), 0);
	ck_assert_int_eq(store_index_list(t, 1, &ixs, &n, &err), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(ixs[1].name, "p_1");
	ck_assert_int_ge(ixs[1].ixid, 10);
	store_index_list_free(ixs, n);
	store_txn_abort(t);
	{
		struct store_db *keep = db;
		struct dfs_buf x;
		const char *v5[] = {"5"};

		db = old;
		got = scan_all(1, "p_1");
		dfs_buf_init(&x);
		expect(&x, 2, 1, v5);
		ck_assert_str_eq(got, x.data);
		free(got);
		/* Writes after the migration keep it up to date; new ids are fresh. */
		put_ok(1, "3.json", "{\"p\": 6}");
		ck_assert_int_gt(id_of(1, "3.json"), 10);
		db = keep;
		dfs_buf_release(&x);
	}
	ck_assert_msg(store_check(st, on_problem, &pr, &err) == 0, "%s", pr.last);
	bson_destroy(doc);
	bson_destroy(spec);
	dfs_buf_release(&key);
}
END_TEST

/* Version 2 kept keys without the _id suffix: opening the database rebuilds the entries. */
START_TEST(test_store_db_get_migrates_schema_2)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct problems pr = {0};
	struct dfs_buf x;
	const char *v5[] = {"5"}, *v6[] = {"6"};
	char *got;

	mkix_ok(c, "{\"key\": {\"p\": 1}}");
	put_ok(c, "1.json", "{\"p\": 5}");
	put_ok(c, "2.json", "{\"p\": 6}");
	store_free(st);
	/* a version-2 store: entries keyed by the index key alone */
	sql("shop", "UPDATE ikeys SET key = substr(key, 1, 10); PRAGMA user_version = 2");
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_msg(store_db_get(st, "shop", false, &db, &err) == 0, "%s", err.msg);
	got = scan_all(c, "p_1");
	dfs_buf_init(&x);
	expect(&x, id_of(c, "1.json"), 1, v5);
	expect(&x, id_of(c, "2.json"), 1, v6);
	ck_assert_str_eq(got, x.data);
	free(got);
	dfs_buf_release(&x);
	ck_assert_msg(store_check(st, on_problem, &pr, &err) == 0, "%s", pr.last);
}
END_TEST

/* A failed create leaves the caller's transaction as it was: the caller may go on and commit
 * (its own writes stay, the definition and its entries do not). */
START_TEST(test_store_index_create_failure_leaves_the_transaction)
{
	int64_t c = make_coll("items");
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_index *ixs;
	bson_t *spec = parse("{\"key\": {\"price\": 1}, \"unique\": true}");
	int n;

	put_ok(c, "1.json", "{\"price\": 5}");
	put_ok(c, "2.json", "{\"price\": 5.0}");
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(
		store_doc_write_text(t, c, "3.json", "{\"price\": 7}", 12, &attrs, NULL, &err), 0);
	ck_assert_int_eq(store_index_create(t, c, spec, NULL, 0, NULL, NULL, &err), DFS_EEXIST);
	/* the same transaction goes on: a write, then a commit */
	ck_assert_int_eq(
		store_doc_write_text(t, c, "4.json", "{\"price\": 8}", 12, &attrs, NULL, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_index_list(t, c, &ixs, &n, &err), 0);
	ck_assert_int_eq(n, 1);
	store_index_list_free(ixs, n);
	store_txn_abort(t);
	id_of(c, "3.json");
	id_of(c, "4.json");
	{
		struct problems pr = {0};

		ck_assert_msg(store_check(st, on_problem, &pr, &err) == 0, "%s", pr.last);
	}
	/* and the index can be created once the duplicate is gone */
	del(c, "2.json");
	mkix_ok(c, "{\"key\": {\"price\": 1}, \"unique\": true}");
	bson_destroy(spec);
}
END_TEST

/* ---- property test ----------------------------------------------------------------- */

/* A random value for field a/b: a small int, a string, null, an array of them, or none. */
static void rnd_value(struct dfs_buf *b, int depth)
{
	switch (rnd(depth ? 5 : 7)) {
	case 0:
	case 1:
		dfs_buf_printf(b, "%d", (int)rnd(6));
		break;
	case 2:
		dfs_buf_printf(b, "%d.0", (int)rnd(6));
		break;
	case 3:
		dfs_buf_printf(b, "\"s%d\"", (int)rnd(4));
		break;
	case 4:
		dfs_buf_puts(b, "null");
		break;
	default: {
		int n = (int)rnd(4);

		dfs_buf_putc(b, '[');
		for (int i = 0; i < n; i++) {
			if (i)
				dfs_buf_putc(b, ',');
			rnd_value(b, depth + 1);
		}
		dfs_buf_putc(b, ']');
	}
	}
}

static void rnd_doc(struct dfs_buf *b, int u)
{
	dfs_buf_reset(b);
	dfs_buf_puts(b, "{");
	if (rnd(4)) {
		dfs_buf_puts(b, "\"a\": ");
		rnd_value(b, 0);
		dfs_buf_puts(b, ", ");
	}
	if (rnd(3)) {
		dfs_buf_puts(b, "\"b\": ");
		if (rnd(2))
			rnd_value(b, 1); /* b is never an array at the top: no parallel arrays */
		else
			dfs_buf_printf(b, "%d", (int)rnd(3));
		dfs_buf_puts(b, ", ");
	}
	if (u >= 0)
		dfs_buf_printf(b, "\"u\": %d, ", u);
	switch (rnd(4)) { /* c: for the dotted indexes, checked by store_check's rebuild */
	case 0:
		break;
	case 1:
		dfs_buf_puts(b, "\"c\": {\"d\": ");
		rnd_value(b, 0);
		dfs_buf_puts(b, "}, ");
		break;
	case 2:
		dfs_buf_puts(b, "\"c\": [{\"d\": ");
		rnd_value(b, 0);
		dfs_buf_puts(b, "}, {\"e\": 1}, 3, {\"d\": ");
		rnd_value(b, 1);
		dfs_buf_puts(b, "}], ");
		break;
	default:
		dfs_buf_puts(b, "\"c\": [], ");
	}
	dfs_buf_puts(b, "\"z\": 0}");
}

/* The distinct values of field f of doc as the test's own reading of the rules. */
static void model_values(const bson_t *doc, const char *f, bson_value_t *out, int *n, bool *found)
{
	bson_iter_t it, a;

	*n = 0;
	*found = bson_iter_init_find(&it, doc, f);
	if (!*found) {
		out[(*n)++].value_type = BSON_TYPE_NULL;
		return;
	}
	if (!BSON_ITER_HOLDS_ARRAY(&it)) {
		out[(*n)++] = *bson_iter_value(&it);
		return;
	}
	ck_assert(bson_iter_recurse(&it, &a));
	while (bson_iter_next(&a)) {
		bool dup = false;

		for (int i = 0; i < *n; i++)
			if (store_value_compare(&out[i], bson_iter_value(&a)) == 0)
				dup = true;
		if (!dup)
			out[(*n)++] = *bson_iter_value(&a);
	}
	if (*n == 0)
		out[(*n)++].value_type = BSON_TYPE_UNDEFINED;
}

/* Expected entries of the indexes {a: 1}, {b: -1, a: 1}, {u: 1} unique sparse and
 * {b: "hashed"} for every document of coll: lines "ixname hexkey:id". */
static char *model_entries(int64_t coll)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_cursor *cur;
	struct dfs_buf out, k;
	bson_t doc;
	int64_t id;

	dfs_buf_init(&out);
	dfs_buf_init(&k);
	dfs_buf_puts(&out, "");
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_cursor_open(t, coll, &cur, &err), 0);
	while (store_cursor_next(cur, &doc, &id, &err) == 0) {
		bson_value_t av[8], bv[8], uv[8];
		int na, nb, nu;
		bool fa, fb, fu;

		model_values(&doc, "a", av, &na, &fa);
		model_values(&doc, "b", bv, &nb, &fb);
		model_values(&doc, "u", uv, &nu, &fu);
		for (int i = 0; i < na; i++) {
			dfs_buf_reset(&k);
			store_key_append(&k, &av[i], false, NULL);
			dfs_buf_puts(&out, "a_1 ");
			hex(&out, k.data, k.len);
			dfs_buf_printf(&out, ":%lld\n", (long long)id);
			for (int j = 0; j < nb; j++) {
				dfs_buf_reset(&k);
				store_key_append(&k, &bv[j], true, NULL);
				store_key_append(&k, &av[i], false, NULL);
				dfs_buf_puts(&out, "b_-1_a_1 ");
				hex(&out, k.data, k.len);
				dfs_buf_printf(&out, ":%lld\n", (long long)id);
			}
		}
		if (fu) {
			dfs_buf_reset(&k);
			store_key_append(&k, &uv[0], false, NULL);
			dfs_buf_puts(&out, "u_1 ");
			hex(&out, k.data, k.len);
			dfs_buf_printf(&out, ":%lld\n", (long long)id);
		}
		if (nb == 1) {
			bson_value_t h = {.value_type = BSON_TYPE_INT64};

			h.value.v_int64 = store_index_hash(&bv[0]);
			dfs_buf_reset(&k);
			store_key_append(&k, &h, false, NULL);
			dfs_buf_puts(&out, "b_hashed ");
			hex(&out, k.data, k.len);
			dfs_buf_printf(&out, ":%lld\n", (long long)id);
		}
	}
	store_cursor_free(cur);
	store_txn_abort(t);
	dfs_buf_release(&k);
	return out.data;
}

static char *scanned_entries(int64_t coll)
{
	static const char *const names[] = {"a_1", "b_-1_a_1", "u_1", "b_hashed"};
	struct dfs_buf out;

	dfs_buf_init(&out);
	dfs_buf_puts(&out, "");
	for (size_t i = 0; i < 4; i++) {
		char *s = scan_all(coll, names[i]), *save = NULL;

		for (char *p = strtok_r(s, "\n", &save); p; p = strtok_r(NULL, "\n", &save))
			dfs_buf_printf(&out, "%s %s\n", names[i], p);
		free(s);
	}
	return out.data;
}

START_TEST(test_store_index_property_random_writes)
{
	int64_t c = make_coll("rand");
	struct dfs_err err = {0};
	struct dfs_buf text;
	char name[32], to[32];
	int clashes = 0, parallel = 0;

	seed_start(20261202, 4);
	dfs_buf_init(&text);
	mkix_ok(c, "{\"key\": {\"a\": 1}}");
	for (int i = 0; i < 40; i++) {
		rnd_doc(&text, -1);
		snprintf(name, sizeof(name), "%d.json", i);
		dfs_err_clear(&err);
		put(c, name, text.data, &err);
	}
	/* built over existing documents, then kept by the writes */
	mkix_ok(c, "{\"key\": {\"b\": -1, \"a\": 1}}");
	mkix_ok(c, "{\"key\": {\"u\": 1}, \"unique\": true, \"sparse\": true}");
	mkix_ok(c, "{\"key\": {\"b\": \"hashed\"}}");
	mkix_ok(c, "{\"key\": {\"c.d\": 1, \"b\": -1}}");
	mkix_ok(c, "{\"key\": {\"c.d\": -1}, \"sparse\": true}");
	for (int step = 0; step < 300; step++) {
		int op = (int)rnd(10);
		int rc;

		snprintf(name, sizeof(name), "%u.json", rnd(60));
		dfs_err_clear(&err);
		if (op < 6) {
			rnd_doc(&text, rnd(2) ? (int)rnd(30) : -1);
			rc = put(c, name, text.data, &err);
		} else if (op < 8) {
			struct store_txn *t;
			struct store_entry e;

			ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
			rc = store_entry_lookup(t, c, name, &e, NULL);
			if (rc == 0)
				rc = store_entry_delete(t, e.id, &err);
			if (rc == 0)
				ck_assert_int_eq(store_txn_commit(t, &err), 0);
			else
				store_txn_abort(t);
			continue;
		} else {
			snprintf(to, sizeof(to), "%u.json%s", rnd(60), rnd(4) ? "" : "~");
			{
				struct store_txn *t;
				struct store_entry e;

				ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
				if (store_entry_lookup(t, c, name, &e, NULL) != 0) {
					store_txn_abort(t);
					continue;
				}
				rc = store_entry_rename(t, e.id, c, to, NULL, &err);
				if (rc == 0)
					ck_assert_int_eq(store_txn_commit(t, &err), 0);
				else
					store_txn_abort(t);
			}
		}
		if (rc == DFS_EEXIST)
			clashes++;
		else if (rc == DFS_EINVAL && strstr(err.msg, "parallel"))
			parallel++;
		else
			ck_assert_msg(rc == 0, "step %d: %s (seed %llu)", step, err.msg,
				      (unsigned long long)seed_used);
	}
	{
		char *want, *got, *s1, *s2;

		want = model_entries(c);
		got = scanned_entries(c);
		s1 = sorted(want);
		s2 = sorted(got);
		ck_assert_msg(strcmp(s1, s2) == 0, "entries differ (seed %llu)",
			      (unsigned long long)seed_used);
		free(want);
		free(got);
		free(s1);
		free(s2);
	}
	ck_assert_int_gt(clashes, 0);
	{
		struct problems pr = {0};

		ck_assert_msg(store_check(st, on_problem, &pr, &err) == 0, "%s", pr.last);
	}
	(void)parallel;
	dfs_buf_release(&text);
}
END_TEST

START_TEST(test_store_entry_rename_across_collections_moves_entries)
{
	int64_t a = make_coll("a"), b = make_coll("b");
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;
	struct dfs_buf x;
	char *got;
	const char *v1[] = {"1"}, *v2[] = {"2"};

	mkix_ok(a, "{\"key\": {\"p\": 1}}");
	mkix_ok(b, "{\"key\": {\"q\": 1}}");
	put_ok(a, "1.json", "{\"p\": 1, \"q\": 2}");
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_lookup(t, a, "1.json", &e, &err), 0);
	ck_assert_msg(store_entry_rename(t, e.id, b, "1.json", NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	got = scan_all(a, "p_1");
	ck_assert_str_eq(got, "");
	free(got);
	dfs_buf_init(&x);
	expect(&x, e.id, 1, v2);
	got = scan_all(b, "q_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	/* and back */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_rename(t, e.id, a, "1.json", NULL, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	got = scan_all(b, "q_1");
	ck_assert_str_eq(got, "");
	free(got);
	dfs_buf_reset(&x);
	expect(&x, e.id, 1, v1);
	got = scan_all(a, "p_1");
	ck_assert_str_eq(got, x.data);
	free(got);
	dfs_buf_release(&x);
}
END_TEST

static void on_progress(void *ctx, int64_t done, int64_t total)
{
	int *calls = ctx;

	ck_assert_int_eq(total, 5000);
	ck_assert_int_le(done, total);
	(*calls)++;
}

START_TEST(test_store_index_create_builds_with_progress)
{
	int64_t c = make_coll("many");
	struct dfs_err err = {0};
	struct store_txn *t;
	bson_t *spec = parse("{\"key\": {\"k\": -1}}");
	int calls = 0;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	for (int i = 0; i < 5000; i++) {
		bson_t d = BSON_INITIALIZER;

		bson_append_int32(&d, "_id", 3, i);
		bson_append_int32(&d, "k", 1, i % 7);
		ck_assert_int_eq(store_doc_insert(t, c, &d, &attrs, NULL, &err), 0);
		bson_destroy(&d);
	}
	ck_assert_int_eq(store_index_create(t, c, spec, NULL, 0, on_progress, &calls, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(calls, 2); /* at 4096 and at the end */
	ck_assert_int_eq(stats(c, "k_-1").entries, 5000);
	ck_assert_int_eq(store_check(st, NULL, NULL, &err), 0);
	bson_destroy(spec);
}
END_TEST

static Suite *index_suite(void)
{
	Suite *s = suite_create("index");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_store_index_create_list_get_drop_stats);
	tcase_add_test(tc, test_store_index_stats_follow_every_change);
	tcase_add_test(tc, test_store_index_create_default_names);
	tcase_add_test(tc, test_store_index_create_is_idempotent);
	tcase_add_test(tc, test_store_index_create_rejects_bad_specs);
	tcase_add_test(tc, test_store_index_create_limit_is_64);
	tcase_add_test(tc, test_store_index_create_unique_over_duplicates_fails);
	tcase_add_test(tc, test_store_index_create_failure_leaves_the_transaction);
	tcase_add_test(tc, test_store_doc_write_text_unique_clash_changes_nothing);
	tcase_add_test(tc, test_store_entry_rename_unique_clash_is_eexist);
	tcase_add_test(tc, test_store_doc_write_text_key_errors);
	tcase_add_test(tc, test_store_index_entries_follow_writes);
	tcase_add_test(tc, test_store_index_multikey_one_entry_per_distinct_element);
	tcase_add_test(tc, test_store_index_dotted_paths_through_arrays);
	tcase_add_test(tc, test_store_index_sparse_skips_missing);
	tcase_add_test(tc, test_store_index_partial_holds_matching_documents);
	tcase_add_test(tc, test_store_index_hash_equal_numbers_agree);
	tcase_add_test(tc, test_store_ixscan_range_both_directions);
	tcase_add_test(tc, test_store_doc_fetch_follows_writes_in_its_transaction);
	tcase_add_test(tc, test_store_doc_fetch_cache_follows_every_writer);
	tcase_add_test(tc, test_store_doc_fetch_cache_stays_within_budget);
	tcase_add_test(tc, test_store_doc_text_lives_with_its_cache_entry);
	tcase_add_test(tc, test_store_doc_fetch_cache_readers_see_one_snapshot);
	tcase_add_test(tc, test_store_ixscan_ties_in_id_order);
	tcase_add_test(tc, test_store_ixscan_backward_ties_at_group_edges);
	tcase_add_test(tc, test_store_index_create_unique_clash_leaves_nothing);
	tcase_add_test(tc, test_store_index_create_build_matches_writes);
	tcase_add_test(tc, test_store_ttl_sweep_deletes_exactly_the_expired);
	tcase_add_test(tc, test_store_check_finds_wrong_index_entries);
	tcase_add_test(tc, test_store_db_get_migrates_schema_1);
	tcase_add_test(tc, test_store_db_get_migrates_schema_2);
	tcase_add_test(tc, test_store_entry_rename_across_collections_moves_entries);
	tcase_add_test(tc, test_store_index_create_builds_with_progress);
	tcase_add_test(tc, test_store_index_property_random_writes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(index_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
