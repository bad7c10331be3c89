/*
 * fuzz_plan.c - the planner and the executor over real indexes. Input as a query/ path
 * component: when fs_query_parse accepts it, the find runs over a small collection with
 * single, compound, multikey, sparse, partial and hashed indexes, once as planned (its
 * hint, if any, included) and once forced to a collection scan ({$natural: 1}). Neither
 * may crash, and when both succeed without a hint they return the same documents (an index
 * never changes a result) and the same count: a hinted sparse or partial index may leave
 * documents out, as MongoDB's does. Skip and limit are left out of the comparison: with ties
 * in a sort, or without a sort, which documents they keep depends on the plan's order.
 * The documents pass through the document cache and its kept renderings, as the mount's.
 */
#include "fs_int.h"
#include "fuzz.h"
#include "query.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct {
	const char *name, *text; /* the file name (its stem gives a missing _id) */
} docs[] = {
	{"1.json", "{_id: 1, a: 1, b: 'x', c: [{d: 3}, {d: 1}], e: 5}"},
	{"2.json", "{_id: 2, a: 2.5, b: 'y', c: [{d: [1, 2]}], n: null}"},
	{"3.json", "{_id: 3, a: [1, 7], b: 'x', c: {d: 3}, e: null}"},
	{"4.json", "{_id: 4, a: 'str', b: ['x', 'z'], c: []}"},
	{"5.json", "{_id: 5, a: {k: 1}, b: 2, t: ISODate('2020-01-01T00:00:00Z')}"},
	{"6.json", "{_id: 6, a: NumberDecimal('1.0'), b: null, c: [{d: null}, {e: 1}]}"},
	{"7.json", "{_id: 7, a: -0.0, e: 'five', r: /ab+/i}"},
	{"8.json", "{_id: 8, b: true, c: [{d: 'x'}, {d: 4}], e: [1, 2]}"},
	{"9.json", "{_id: 9, a: NaN, b: 'x', e: 9}"},
	{"10.json", "{_id: 10, a: 1, b: 'x', c: {d: [3, 4]}, e: 5}"},
	{"k.json", "{_id: 'k', a: [], b: {c: 1}, e: ObjectId('5f0c6a4b9d1e8a3b2c1d0e0f')}"},
	{"12.json", "{_id: 12, a: NumberLong(3), b: 'y', c: [{d: 2}, {d: 2}]}"},
	{"z.json", "{}"},
};

static const char *const index_specs[] = {
	"{key: {a: 1}}",
	"{key: {a: 1, b: -1}}",
	"{key: {'c.d': 1}}",
	"{key: {e: 1}, sparse: true}",
	"{key: {b: 1}, partialFilterExpression: {a: {$gt: 0}}}",
	"{key: {n: 'hashed'}}",
};

static struct store *st;
static struct store_db *db;
static int64_t coll;
static char dir[64];

static void remove_dir(void)
{
	char cmd[128];

	store_free(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_plan: could not remove %s\n", dir);
}

static void setup(void)
{
	static const struct store_attrs attrs = {0644, 0, 0, 0};
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;

	query_init();
	snprintf(dir, sizeof(dir), "/tmp/docfs-fuzz-plan-XXXXXX");
	FUZZ_CHECK(mkdtemp(dir), "mkdtemp");
	FUZZ_CHECK(store_open(dir, true, &st, &err) == 0, "store_open: %s", err.msg);
	atexit(remove_dir);
	FUZZ_CHECK(store_db_get(st, "db", true, &db, &err) == 0, "db: %s", err.msg);
	FUZZ_CHECK(store_txn_begin(db, true, &t, &err) == 0, "begin: %s", err.msg);
	FUZZ_CHECK(store_coll_create(t, "c", 0755, 0, 0, &c, &err) == 0, "coll: %s", err.msg);
	coll = c.id;
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		struct store_entry e;

		FUZZ_CHECK(store_doc_write_text(t, coll, docs[i].name, docs[i].text,
						strlen(docs[i].text), &attrs, &e, &err) == 0,
			   "document %zu: %s", i, err.msg);
	}
	for (size_t i = 0; i < sizeof(index_specs) / sizeof(index_specs[0]); i++) {
		bson_t spec;

		bson_init(&spec);
		FUZZ_CHECK(store_codec_parse_doc(index_specs[i], strlen(index_specs[i]), &spec,
						 &err) == 0,
			   "spec %zu: %s", i, err.msg);
		FUZZ_CHECK(store_index_create(t, coll, &spec, NULL, 0, NULL, NULL, &err) == 0,
			   "index %zu: %s", i, err.msg);
		bson_destroy(&spec);
	}
	FUZZ_CHECK(store_txn_commit(t, &err) == 0, "commit: %s", err.msg);
}

struct result {
	char **lines; /* the rendered documents, sorted */
	size_t n;
	int64_t count;
};

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void result_free(struct result *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->lines[i]);
	free(r->lines);
}

/* Runs the find of q (skip and limit left out) with hint, or q's own; 0 or its error. */
static int run(const struct fs_query *q, const bson_t *hint, struct result *out)
{
	struct query_find_opts o = {
		.filter = &q->filter,
		.sort = q->has_sort ? &q->sort : NULL,
		.projection = q->has_projection ? &q->projection : NULL,
		.hint = hint,
		.hint_name = hint ? NULL : q->hint_name,
	};
	struct dfs_err err = {0};
	struct query_cursor *c = NULL;
	struct store_txn *t;
	const bson_t *doc;
	struct dfs_buf text;
	int rc;

	if (!hint && q->has_hint)
		o.hint = &q->hint;
	memset(out, 0, sizeof(*out));
	dfs_buf_init(&text);
	FUZZ_CHECK(store_txn_begin(db, false, &t, &err) == 0, "begin: %s", err.msg);
	rc = query_find_open(t, coll, &o, &c, &err);
	while (!rc && (rc = query_cursor_next(c, &doc, &err)) == 0) {
		const char *kept;
		size_t len;

		dfs_buf_reset(&text);
		if ((rc = store_codec_render(doc, STORE_RENDER_COMPACT, &text, &err)))
			break;
		/* a kept rendering is the document's own (render.c note 5) */
		if (query_cursor_text(c, &kept, &len)) {
			if (kept)
				FUZZ_CHECK(len == text.len && memcmp(kept, text.data, len) == 0,
					   "kept rendering %.*s differs from %s", (int)len, kept,
					   text.data);
			else
				query_cursor_keep_text(c, text.data, text.len);
		}
		out->lines = realloc(out->lines, (out->n + 1) * sizeof(*out->lines));
		FUZZ_CHECK(out->lines && (out->lines[out->n] = strdup(text.data)), "memory");
		out->n++;
	}
	if (rc == DFS_ENOENT)
		rc = 0;
	query_cursor_free(c);
	c = NULL;
	if (!rc) {
		o.count_only = true;
		o.projection = NULL;
		rc = query_find_open(t, coll, &o, &c, &err);
		if (!rc)
			rc = query_cursor_count(c, &out->count, &err);
		query_cursor_free(c);
	}
	store_txn_abort(t);
	dfs_buf_release(&text);
	if (out->n)
		qsort(out->lines, out->n, sizeof(*out->lines), cmp_line);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bson_t natural;
	struct dfs_err err = {0};
	struct fs_query q;
	struct result planned, scan;
	char *comp;

	if (!st) {
		setup();
		bson_init(&natural);
		BSON_APPEND_INT32(&natural, "$natural", 1);
	}
	if (memchr(data, '\0', size))
		return 0;
	comp = fuzz_cstr(data, size);
	fs_query_init(&q);
	if (fs_query_parse(comp, &q, &err) == 0 && !q.distinct) {
		int rp = run(&q, NULL, &planned), rs = run(&q, &natural, &scan);

		/* A hinted sparse or partial index may leave documents out, as in MongoDB. */
		if (rp == 0 && rs == 0 && !q.has_hint && !q.hint_name) {
			FUZZ_CHECK(planned.n == scan.n, "%s: %zu documents planned, %zu scanned",
				   comp, planned.n, scan.n);
			for (size_t i = 0; i < planned.n; i++)
				FUZZ_CHECK(strcmp(planned.lines[i], scan.lines[i]) == 0,
					   "%s: planned %s, scanned %s", comp, planned.lines[i],
					   scan.lines[i]);
			FUZZ_CHECK(planned.count == scan.count,
				   "%s: count %lld planned, %lld scanned", comp,
				   (long long)planned.count, (long long)scan.count);
			FUZZ_CHECK(planned.count == (int64_t)planned.n,
				   "%s: count %lld, %zu documents", comp, (long long)planned.count,
				   planned.n);
		}
		result_free(&planned);
		result_free(&scan);
	}
	fs_query_release(&q);
	free(comp);
	return 0;
}
