/*
 * arun.c - the aggregation test driver: runs aggregate() cases given as JSON Lines and prints
 * one result line per case in canonical Extended JSON (a comparison of the text is a
 * type-exact comparison of the values).
 *
 *   arun [FILE]        (no FILE or "-": standard input)
 *
 * Each non-blank input line is one case, a document in the codec's shell-literal syntax:
 *   {"docs": [...], "pipeline": [...], "colls": {"<name>": [...], ...}, "mem": n, "now": ms,
 *    "out": "<name>"}
 * docs go into collection "c", which the pipeline runs over; colls are more collections of
 * the same database (for $lookup, $out, $merge); mem is query_agg_opts.mem (a tiny value
 * forces $sort/$group to spill); now is $$NOW in ms. When the pipeline ends in $out/$merge it
 * runs through query_agg_run_out and the result is the documents of collection "out" in _id
 * order. {"echo": <value>} prints {"ok": <value>}. Output, one line per case:
 * {"ok": [results...]} (plus "spills": n when mem was given, the sorter runs written) or
 * {"error": "<message>"}; errors of the case itself are prefixed "case: " or "insert: ".
 *
 * Each case runs in its own write transaction, rolled back at the end: nothing is committed
 * and every case sees only its own collections.
 */
#include "agg_int.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct store_db *db;

static void die(const char *what, const struct dfs_err *err)
{
	fprintf(stderr, "arun: %s: %s\n", what, err ? err->msg : "failed");
	exit(2);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void print_doc(const bson_t *doc)
{
	struct dfs_err err = {0};
	struct dfs_buf out;

	dfs_buf_init(&out);
	if (store_codec_render(doc, STORE_RENDER_CANONICAL, &out, &err))
		die("render", &err);
	dfs_buf_putc(&out, '\n');
	fwrite(out.data, 1, out.len, stdout);
	dfs_buf_release(&out);
}

static void print_error(const char *prefix, const char *msg)
{
	bson_t doc = BSON_INITIALIZER;
	char buf[400];

	snprintf(buf, sizeof(buf), "%s%s", prefix, msg);
	BSON_APPEND_UTF8(&doc, "error", buf);
	print_doc(&doc);
	bson_destroy(&doc);
}

/* Creates collection name in t holding the documents of the array at it. */
static int fill(struct store_txn *t, const char *name, bson_iter_t *it, int64_t *id)
{
	struct dfs_err err = {0};
	struct store_coll coll;
	bson_iter_t docs;

	if (store_coll_create(t, name, 0755, 0, 0, &coll, &err)) {
		print_error("case: ", err.msg);
		return -1;
	}
	*id = coll.id;
	if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &docs)) {
		print_error("case: ", "documents must be an array");
		return -1;
	}
	while (bson_iter_next(&docs)) {
		const struct store_attrs a = {0644, 0, 0, 0};
		const uint8_t *data;
		uint32_t len;
		bson_t d, prepared;
		int rc;

		if (!BSON_ITER_HOLDS_DOCUMENT(&docs)) {
			print_error("case: ", "documents must be documents");
			return -1;
		}
		bson_iter_document(&docs, &len, &data);
		if (!bson_init_static(&d, data, len)) {
			print_error("case: ", "bad document");
			return -1;
		}
		if (store_doc_prepare(&d, NULL, &prepared, &err)) {
			print_error("insert: ", err.msg);
			return -1;
		}
		rc = store_doc_insert(t, coll.id, &prepared, &a, NULL, &err);
		bson_destroy(&prepared);
		if (rc) {
			print_error("insert: ", err.msg);
			return -1;
		}
	}
	return 0;
}

static void append_result(bson_t *arr, uint32_t i, const bson_t *doc)
{
	char kbuf[16];
	const char *key;

	bson_uint32_to_string(i, &key, kbuf, sizeof(kbuf));
	bson_append_document(arr, key, -1, doc);
}

static void run_case(const bson_t *c)
{
	struct dfs_err err = {0};
	struct query_agg_opts o = {0};
	struct query_pipeline *p = NULL;
	struct query_agg *a = NULL;
	struct store_txn *t = NULL;
	bson_iter_t it, docs, colls;
	bool have_docs = false, have_colls = false, have_mem = false;
	const char *outname = NULL;
	bson_t pipeline, result, arr;
	const uint8_t *data;
	uint32_t len;
	int64_t coll;
	int rc;

	bson_init(&pipeline);
	if (!bson_iter_init(&it, c))
		return print_error("case: ", "not valid BSON");
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "echo")) {
			bson_t e = BSON_INITIALIZER;

			bson_append_value(&e, "ok", 2, bson_iter_value(&it));
			print_doc(&e);
			bson_destroy(&e);
			return;
		} else if (!strcmp(k, "docs")) {
			docs = it;
			have_docs = true;
		} else if (!strcmp(k, "colls")) {
			if (!BSON_ITER_HOLDS_DOCUMENT(&it))
				return print_error("case: ", "colls must be a document");
			colls = it;
			have_colls = true;
		} else if (!strcmp(k, "pipeline")) {
			if (!BSON_ITER_HOLDS_ARRAY(&it))
				return print_error("case: ", "pipeline must be an array");
			bson_iter_array(&it, &len, &data);
			if (!bson_init_static(&pipeline, data, len))
				return print_error("case: ", "bad pipeline");
		} else if (!strcmp(k, "mem")) {
			o.mem = (size_t)bson_iter_as_int64(&it);
			have_mem = true;
		} else if (!strcmp(k, "now")) {
			o.now_ms = bson_iter_as_int64(&it);
		} else if (!strcmp(k, "out")) {
			if (!BSON_ITER_HOLDS_UTF8(&it))
				return print_error("case: ", "out must be a string");
			outname = bson_iter_utf8(&it, NULL);
		} else {
			char msg[128];

			snprintf(msg, sizeof(msg), "unknown case field '%s'", k);
			return print_error("case: ", msg);
		}
	}
	if (!have_docs)
		return print_error("case: ", "docs is missing");
	if (store_txn_begin(db, true, &t, &err))
		die("begin transaction", &err);
	if (fill(t, "c", &docs, &coll))
		goto done;
	if (have_colls) {
		bson_iter_t ci;

		bson_iter_recurse(&colls, &ci);
		while (bson_iter_next(&ci)) {
			int64_t id;

			if (fill(t, bson_iter_key(&ci), &ci, &id))
				goto done;
		}
	}
	if (query_pipeline_parse(&pipeline, &p, &err)) {
		print_error("", err.msg);
		goto done;
	}
	bson_init(&result);
	bson_append_array_begin(&result, "ok", 2, &arr);
	if (query_pipeline_writes(p) && outname) {
		struct store_coll target;
		struct query_find_opts fo = {0};
		struct query_cursor *cur = NULL;
		bson_t sort = BSON_INITIALIZER;
		const bson_t *doc;
		int64_t n;
		uint32_t i = 0;

		if (!outname) {
			bson_append_array_end(&result, &arr);
			bson_destroy(&result);
			print_error("case: ", "a writing pipeline needs \"out\"");
			goto done;
		}
		rc = query_agg_run_out(t, coll, p, &o, &n, &err);
		if (!rc)
			rc = store_coll_find(t, outname, &target, &err);
		BSON_APPEND_INT32(&sort, "_id", 1);
		fo.sort = &sort;
		if (!rc)
			rc = query_find_open(t, target.id, &fo, &cur, &err);
		while (!rc && (rc = query_cursor_next(cur, &doc, &err)) == 0)
			append_result(&arr, i++, doc);
		query_cursor_free(cur);
		bson_destroy(&sort);
		if (rc != DFS_ENOENT) {
			bson_append_array_end(&result, &arr);
			bson_destroy(&result);
			print_error("", err.msg);
			goto done;
		}
	} else {
		const bson_t *doc;
		uint32_t i = 0;

		rc = query_agg_open(t, coll, p, &o, &a, &err);
		while (!rc && (rc = query_agg_next(a, &doc, &err)) == 0)
			append_result(&arr, i++, doc);
		if (rc != DFS_ENOENT) {
			bson_append_array_end(&result, &arr);
			bson_destroy(&result);
			print_error("", err.msg);
			goto done;
		}
	}
	bson_append_array_end(&result, &arr);
	if (have_mem)
		BSON_APPEND_INT64(&result, "spills", a ? query__agg_spills(a) : 0);
	print_doc(&result);
	bson_destroy(&result);
done:
	query_agg_free(a);
	query_pipeline_free(p);
	store_txn_abort(t);
}

int main(int argc, char **argv)
{
	struct dfs_err err = {0};
	char dir[] = "/tmp/docfs-arun-XXXXXX";
	struct store *st;
	FILE *in = stdin;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (argc > 2 || (argc == 2 && !strcmp(argv[1], "--help"))) {
		fprintf(stderr, "usage: arun [FILE]\n");
		return 2;
	}
	if (argc == 2 && strcmp(argv[1], "-")) {
		in = fopen(argv[1], "r");
		if (!in) {
			perror(argv[1]);
			return 2;
		}
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	if (store_open(dir, true, &st, &err))
		die("open store", &err);
	if (store_db_get(st, "arun", true, &db, &err))
		die("open database", &err);
	while ((n = getline(&line, &cap, in)) >= 0) {
		bson_t c;
		size_t i = 0;

		while (i < (size_t)n && strchr(" \t\r\n", line[i]))
			i++;
		if (i == (size_t)n)
			continue;
		bson_init(&c);
		dfs_err_clear(&err);
		if (store_codec_parse_doc(line, (size_t)n, &c, &err))
			print_error("case: ", err.msg);
		else
			run_case(&c);
		bson_destroy(&c);
		fflush(stdout);
	}
	free(line);
	store_free(st);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	if (in != stdin)
		fclose(in);
	return fflush(stdout) ? 2 : 0;
}
