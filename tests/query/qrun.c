/*
 * qrun.c - the query test driver: runs find() cases given as JSON Lines and prints one
 * result line per case in canonical Extended JSON, so that a comparison of the text is a
 * type-exact comparison of the values.
 *
 *   qrun [FILE]        (no FILE or "-": standard input)
 *
 * Each non-blank input line is one case, a document in the codec's shell-literal syntax:
 *   {"docs": [...], "filter": {...}, "sort": {...}, "projection": {...}, "skip": n, "limit": n}
 * (all but docs optional; "count": true prints the number of results, counted as a count
 * runs: an exact index scan reads no document), or {"echo": <value>}, which prints {"ok": <value>}
 * rendered the same way (the corpus runner uses it to canonicalize expected values). Output, one
 * line per case: {"ok": [results...]} or {"error": "<message>"}. Errors of the case itself (not a
 * document, a missing docs array, an insert failure) are prefixed with "case: " or
 * "insert: "; errors of the find are the engine's message as it is.
 *
 * Design notes
 * 1. One temporary store holds everything. Each case gets a fresh collection inside the
 *    current write transaction; every BATCH cases the transaction is rolled back (nothing is
 *    ever committed), which keeps the store empty and the driver fast.
 * 2. Documents are inserted with store_doc_prepare(doc, NULL, ...) so that a document without
 *    _id gets a generated ObjectId, as an insert into MongoDB does.
 */
#include "plan_int.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 256

static struct store_db *db;
static struct store_txn *txn;
static unsigned txn_cases;
static unsigned long coll_seq;

static void die(const char *what, const struct dfs_err *err)
{
	fprintf(stderr, "qrun: %s: %s\n", what, err ? err->msg : "failed");
	exit(2);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Prints {"<key>": <value at it>} from a one-field document. */
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
	char buf[1200];

	snprintf(buf, sizeof(buf), "%s%s", prefix, msg);
	BSON_APPEND_UTF8(&doc, "error", buf);
	print_doc(&doc);
	bson_destroy(&doc);
}

static struct store_txn *current_txn(void)
{
	struct dfs_err err = {0};

	if (txn && txn_cases >= BATCH) {
		store_txn_abort(txn);
		txn = NULL;
	}
	if (!txn) {
		if (store_txn_begin(db, true, &txn, &err))
			die("begin transaction", &err);
		txn_cases = 0;
	}
	txn_cases++;
	return txn;
}

/* A number option (skip, limit): an integral int32, int64 or double. */
static int int_opt(const bson_iter_t *it, int64_t *out)
{
	if (BSON_ITER_HOLDS_INT32(it) || BSON_ITER_HOLDS_INT64(it)) {
		*out = bson_iter_as_int64(it);
		return 0;
	}
	if (BSON_ITER_HOLDS_DOUBLE(it)) {
		double d = bson_iter_double(it);

		if (d != (double)(int64_t)d)
			return -1;
		*out = (int64_t)d;
		return 0;
	}
	return -1;
}

/* The document at it into *out as a read-only view. */
static int doc_opt(const bson_iter_t *it, bson_t *out)
{
	const uint8_t *data;
	uint32_t len;

	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return -1;
	bson_iter_document(it, &len, &data);
	return bson_init_static(out, data, len) ? 0 : -1;
}

/* ---- generated indexes ("autoindex": true) ----------------------------------------- */

#define AUTO_PATHS 4

/* Collects the field paths a filter names (top level and through $and/$or/$nor). */
static void filter_paths(const bson_t *f, char paths[][128], int *n)
{
	bson_iter_t it, sub;

	if (!bson_iter_init(&it, f))
		return;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (k[0] == '$') {
			if ((!strcmp(k, "$and") || !strcmp(k, "$or") || !strcmp(k, "$nor")) &&
			    BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &sub))
				while (bson_iter_next(&sub)) {
					bson_t d;

					if (doc_opt(&sub, &d) == 0)
						filter_paths(&d, paths, n);
				}
			continue;
		}
		if (strlen(k) >= 100 || *n >= AUTO_PATHS)
			continue;
		{
			bool dup = false;

			for (int i = 0; i < *n; i++)
				dup |= !strcmp(paths[i], k);
			if (!dup)
				snprintf(paths[(*n)++], 128, "%s", k);
		}
	}
}

/* Creates the index of spec json, ignoring a refusal. A refused create may leave its
 * definition behind in the continuing transaction (a store bug at the time of writing), so
 * whatever the failed call added is dropped again. */
static void auto_index(struct store_txn *t, int64_t coll, const char *json)
{
	struct dfs_err err = {0};
	struct store_index *ixs;
	int n0 = 0, n;
	bson_t spec;

	bson_init(&spec);
	if (store_index_list(t, coll, &ixs, &n0, &err) == 0)
		store_index_list_free(ixs, n0);
	if (store_codec_parse_doc(json, strlen(json), &spec, &err) == 0 &&
	    store_index_create(t, coll, &spec, NULL, 0, NULL, NULL, &err) &&
	    store_index_list(t, coll, &ixs, &n, NULL) == 0) {
		for (int i = n0; i < n; i++)
			store_index_drop(t, coll, ixs[i].name, NULL);
		store_index_list_free(ixs, n);
	}
	bson_destroy(&spec);
}

/* The generated index set: single-field on every path (multikey where the data has
 * arrays), a descending sparse one, a hashed one, a compound one and a partial one. Specs
 * the store refuses (hashed arrays, parallel arrays, key too large) are skipped. */
static void auto_indexes(struct store_txn *t, int64_t coll, const struct query_find_opts *o)
{
	char paths[AUTO_PATHS * 2][128], js[1024];
	int n = 0;

	if (o->filter)
		filter_paths(o->filter, paths, &n);
	if (o->sort)
		filter_paths(o->sort, paths, &n);
	for (int i = 0; i < n; i++) {
		snprintf(js, sizeof(js), "{\"key\": {\"%s\": 1}}", paths[i]);
		auto_index(t, coll, js);
	}
	if (n >= 1) {
		snprintf(js, sizeof(js), "{\"key\": {\"%s\": -1}, \"sparse\": true}", paths[0]);
		auto_index(t, coll, js);
		snprintf(js, sizeof(js), "{\"key\": {\"%s\": \"hashed\"}}", paths[n - 1]);
		auto_index(t, coll, js);
		snprintf(js, sizeof(js),
			 "{\"key\": {\"%s\": 1, \"_id\": 1}, \"partialFilterExpression\": "
			 "{\"%s\": {\"$exists\": true}}}",
			 paths[0], paths[0]);
		auto_index(t, coll, js);
	}
	if (n >= 2) {
		snprintf(js, sizeof(js), "{\"key\": {\"%s\": 1, \"%s\": -1}}", paths[0], paths[1]);
		auto_index(t, coll, js);
		snprintf(js, sizeof(js), "{\"key\": {\"%s\": -1, \"%s\": 1}, \"sparse\": true}",
			 paths[1], paths[0]);
		auto_index(t, coll, js);
	}
}

static void run_explain(struct store_txn *t, const struct store_coll *coll,
			const struct query_find_opts *o, const char *verb, const char *format)
{
	struct dfs_err err = {0};
	bson_t ex = BSON_INITIALIZER, result = BSON_INITIALIZER;
	int v = !strcmp(verb, "queryPlanner")	     ? QUERY_VERB_PLANNER
		: !strcmp(verb, "executionStats")    ? QUERY_VERB_EXEC
		: !strcmp(verb, "allPlansExecution") ? QUERY_VERB_ALL
						     : -1;
	char ns[200];

	if (v < 0)
		return print_error("case: ", "unknown explain verbosity");
	snprintf(ns, sizeof(ns), "qrun.%s", coll->name);
	if (query_find_explain(t, coll->id, ns, o, v, &ex, &err)) {
		bson_destroy(&ex);
		return print_error("", err.msg);
	}
	if (format && !strcmp(format, "tree")) {
		struct dfs_buf tree;

		dfs_buf_init(&tree);
		if (query_explain_tree(&ex, &tree, &err)) {
			dfs_buf_release(&tree);
			bson_destroy(&ex);
			return print_error("", err.msg);
		}
		BSON_APPEND_UTF8(&result, "ok", tree.data ? tree.data : "");
		dfs_buf_release(&tree);
	} else {
		BSON_APPEND_DOCUMENT(&result, "ok", &ex);
	}
	print_doc(&result);
	bson_destroy(&result);
	bson_destroy(&ex);
}

/* Runs the find and appends "ok": [results] (and "keys": "<hex> ..." when keys) to out. */
static int run_find(struct store_txn *t, int64_t coll, const struct query_find_opts *o, bool keys,
		    bson_t *out, struct dfs_err *err)
{
	struct query_cursor *cur;
	struct dfs_buf kb;
	const bson_t *doc;
	bson_t arr;
	int rc;

	if ((rc = query_find_open(t, coll, o, &cur, err)))
		return rc;
	if (keys)
		query__cursor_want_keys(cur);
	if (o->count_only) { /* "count": the number of results, documents unread */
		int64_t n = 0;

		rc = query_cursor_count(cur, &n, err);
		query_cursor_free(cur);
		if (!rc)
			BSON_APPEND_INT64(out, "ok", n);
		return rc;
	}
	dfs_buf_init(&kb);
	bson_append_array_begin(out, "ok", 2, &arr);
	for (uint32_t i = 0;; i++) {
		const char *key;
		char kbuf[16];
		size_t klen;

		rc = query_cursor_next(cur, &doc, err);
		if (rc == DFS_ENOENT)
			break;
		if (rc) {
			bson_append_array_end(out, &arr);
			query_cursor_free(cur);
			dfs_buf_release(&kb);
			return rc;
		}
		klen = bson_uint32_to_string(i, &key, kbuf, sizeof(kbuf));
		bson_append_document(&arr, key, (int)klen, doc);
		if (keys && query__cursor_sort_key(cur)) {
			const struct dfs_buf *sk = query__cursor_sort_key(cur);

			if (i)
				dfs_buf_putc(&kb, ' ');
			for (size_t j = 0; j < sk->len; j++)
				dfs_buf_printf(&kb, "%02x", (unsigned char)sk->data[j]);
		}
	}
	query_cursor_free(cur);
	bson_append_array_end(out, &arr);
	if (keys)
		BSON_APPEND_UTF8(out, "keys", kb.data ? kb.data : "");
	dfs_buf_release(&kb);
	return 0;
}

/* "allplans": appends "plans": [{"plan": desc, "ok": [...], "keys": ...} or {"plan": desc,
 * "error": msg}, ...]: every candidate plan forced by a hint, on the same collection. */
static int run_all_plans(struct store_txn *t, int64_t coll, const struct query_find_opts *o,
			 bson_t *out, struct dfs_err *err)
{
	struct query_cursor *cur;
	bson_t names = BSON_INITIALIZER, plans;
	bson_iter_t it;
	int rc, k = 0;

	if ((rc = query_find_open(t, coll, o, &cur, err)))
		return rc;
	query__cursor_candidates(cur, &names);
	query_cursor_free(cur);
	bson_append_array_begin(out, "plans", 5, &plans);
	bson_iter_init(&it, &names);
	while (bson_iter_next(&it)) {
		const char *desc = bson_iter_utf8(&it, NULL);
		struct query_find_opts h = *o;
		bson_t natural = BSON_INITIALIZER, one;
		char name[128], num[16];
		struct dfs_err e = {0};

		if (!strncmp(desc, "ix:", 3)) {
			snprintf(name, sizeof(name), "%s", desc + 3);
			if (strrchr(name, ':') && !strcmp(strrchr(name, ':'), ":b"))
				*strrchr(name, ':') = '\0';
			h.hint = NULL;
			h.hint_name = name;
		} else if (!strncmp(desc, "coll", 4)) {
			BSON_APPEND_INT32(&natural, "$natural", 1);
			h.hint = &natural;
			h.hint_name = NULL;
		} else {
			bson_destroy(&natural);
			continue; /* an index union cannot be hinted */
		}
		snprintf(num, sizeof(num), "%d", k++);
		bson_append_document_begin(&plans, num, -1, &one);
		BSON_APPEND_UTF8(&one, "plan", desc);
		if (run_find(t, coll, &h, true, &one, &e))
			BSON_APPEND_UTF8(&one, "error", e.msg);
		bson_append_document_end(&plans, &one);
		bson_destroy(&natural);
	}
	bson_append_array_end(out, &plans);
	bson_destroy(&names);
	return 0;
}

static void run_case(const bson_t *c)
{
	struct dfs_err err = {0};
	struct query_find_opts o = {0};
	bson_t filter, sort, proj, result, arr;
	bson_iter_t it, docs;
	bool have_docs = false;
	struct query_cursor *cur = NULL;
	struct store_coll coll;
	bson_iter_t ixs;
	bool have_ixs = false, want_cands = false, want_keys = false, autoidx = false;
	bool unlimited = false;
	bool want_all = false;
	const char *explain = NULL, *format = NULL;
	bson_t hint;
	struct store_txn *t;
	char name[32];
	int rc;

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
			if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &docs))
				return print_error("case: ", "docs must be an array");
			have_docs = true;
		} else if (!strcmp(k, "filter")) {
			if (doc_opt(&it, &filter))
				return print_error("case: ", "filter must be a document");
			o.filter = &filter;
		} else if (!strcmp(k, "sort")) {
			if (doc_opt(&it, &sort))
				return print_error("case: ", "sort must be a document");
			o.sort = &sort;
		} else if (!strcmp(k, "projection")) {
			if (doc_opt(&it, &proj))
				return print_error("case: ", "projection must be a document");
			o.projection = &proj;
		} else if (!strcmp(k, "indexes")) {
			if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &ixs))
				return print_error("case: ", "indexes must be an array");
			have_ixs = true;
		} else if (!strcmp(k, "hint")) {
			if (BSON_ITER_HOLDS_UTF8(&it))
				o.hint_name = bson_iter_utf8(&it, NULL);
			else if (doc_opt(&it, &hint))
				return print_error("case: ", "hint must be a document or a name");
			else
				o.hint = &hint;
		} else if (!strcmp(k, "explain")) {
			if (!BSON_ITER_HOLDS_UTF8(&it))
				return print_error("case: ", "explain must be a verbosity string");
			explain = bson_iter_utf8(&it, NULL);
		} else if (!strcmp(k, "format")) {
			if (!BSON_ITER_HOLDS_UTF8(&it))
				return print_error("case: ", "format must be a string");
			format = bson_iter_utf8(&it, NULL);
		} else if (!strcmp(k, "candidates")) {
			want_cands = bson_iter_as_bool(&it);
		} else if (!strcmp(k, "autoindex")) {
			autoidx = bson_iter_as_bool(&it);
		} else if (!strcmp(k, "count")) {
			o.count_only = bson_iter_as_bool(&it);
		} else if (!strcmp(k, "allplans")) {
			want_all = bson_iter_as_bool(&it);
		} else if (!strcmp(k, "keys")) {
			want_keys = bson_iter_as_bool(&it);
		} else if (!strcmp(k, "unlimited")) {
			unlimited = bson_iter_as_bool(&it);
		} else if (!strcmp(k, "skip")) {
			if (int_opt(&it, &o.skip))
				return print_error("case: ", "skip must be an integer");
		} else if (!strcmp(k, "limit")) {
			if (int_opt(&it, &o.limit))
				return print_error("case: ", "limit must be an integer");
		} else {
			char msg[128];

			snprintf(msg, sizeof(msg), "unknown case field '%s'", k);
			return print_error("case: ", msg);
		}
	}
	if (!have_docs)
		return print_error("case: ", "docs is missing");
	if (unlimited) /* the whole result that skip and limit would cut */
		o.skip = o.limit = 0;
	if (o.count_only) /* as query/<q>?count=1 runs a count */
		o.sort = o.projection = NULL;

	t = current_txn();
	snprintf(name, sizeof(name), "q%lu", ++coll_seq);
	if (store_coll_create(t, name, 0755, 0, 0, &coll, &err))
		die("create collection", &err);
	while (bson_iter_next(&docs)) {
		const struct store_attrs a = {0644, 0, 0, 0};
		const uint8_t *data;
		uint32_t len;
		bson_t d, prepared;

		if (!BSON_ITER_HOLDS_DOCUMENT(&docs))
			return print_error("case: ", "docs must hold documents");
		bson_iter_document(&docs, &len, &data);
		if (!bson_init_static(&d, data, len))
			return print_error("case: ", "bad document");
		if (store_doc_prepare(&d, NULL, &prepared, &err))
			return print_error("insert: ", err.msg);
		rc = store_doc_insert(t, coll.id, &prepared, &a, NULL, &err);
		bson_destroy(&prepared);
		if (rc)
			return print_error("insert: ", err.msg);
	}
	while (have_ixs && bson_iter_next(&ixs)) {
		bson_t spec;

		if (doc_opt(&ixs, &spec))
			return print_error("case: ", "indexes must hold documents");
		if (store_index_create(t, coll.id, &spec, NULL, 0, NULL, NULL, &err))
			return print_error("index: ", err.msg);
	}
	if (autoidx)
		auto_indexes(t, coll.id, &o);
	if (explain)
		return run_explain(t, &coll, &o, explain, format);

	if (want_cands) {
		if (query_find_open(t, coll.id, &o, &cur, &err))
			return print_error("", err.msg);
		bson_init(&result);
		bson_append_array_begin(&result, "ok", 2, &arr);
		query__cursor_candidates(cur, &arr);
		bson_append_array_end(&result, &arr);
		query_cursor_free(cur);
		print_doc(&result);
		bson_destroy(&result);
		return;
	}
	bson_init(&result);
	if (run_find(t, coll.id, &o, want_keys || want_all, &result, &err)) {
		bson_destroy(&result);
		return print_error("", err.msg);
	}
	if (want_all && run_all_plans(t, coll.id, &o, &result, &err)) {
		bson_destroy(&result);
		return print_error("", err.msg);
	}
	print_doc(&result);
	bson_destroy(&result);
}

int main(int argc, char **argv)
{
	struct dfs_err err = {0};
	char dir[] = "/tmp/docfs-qrun-XXXXXX";
	struct store *st;
	FILE *in = stdin;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (argc > 2 || (argc == 2 && !strcmp(argv[1], "--help"))) {
		fprintf(stderr, "usage: qrun [FILE]\n");
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
	query_init();
	if (store_open(dir, true, &st, &err))
		die("open store", &err);
	if (store_db_get(st, "qrun", true, &db, &err))
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
	}
	free(line);
	store_txn_abort(txn);
	store_free(st);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	if (in != stdin)
		fclose(in);
	return fflush(stdout) ? 2 : 0;
}
