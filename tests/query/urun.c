/*
 * urun.c - the update test driver: applies update cases given as JSON Lines with the pure
 * update engine (query_update_parse / query_update_apply / query_upsert_seed) and prints one
 * result line per case in canonical Extended JSON, so that comparing the text compares the
 * values type-exactly and field-order-sensitively.
 *
 *   urun [FILE]        (no FILE or "-": standard input)
 *
 * Each non-blank input line is one case, a document in the codec's shell-literal syntax:
 *   {"doc": {...}, "update": {...} or [stages], "arrayFilters": [...], "filter": {...},
 *    "upsert": {...}, "now": <int64 ms>, "let": {...}}
 * doc is the document to update (default {}); filter, when given, must match doc and gives
 * the positional '$' its array index (query_filter_match's elem_index; -1 without a filter);
 * upsert, when given, is the filter of an upsert that inserts: the document is the seed built
 * from it (query_upsert_seed) and the update is applied with upsert_insert (doc is ignored);
 * now is the time for $currentDate and $$NOW (default 1700000000000; give it before let). An
 * update that is an array is an update pipeline (query_update_parse_pipeline), with the
 * variables of let. {"echo": <value>} prints
 * {"ok": <value>} rendered the same way (the corpus runner canonicalizes expectations).
 *
 * Output, one line per case: {"ok": <document>, "changed": <bool>} or {"error": "<msg>"}.
 * Errors of the case itself (not a document, a bad field) are prefixed "case: "; errors of
 * the engine are its message as it is. Nothing touches a store: the engine is pure.
 */
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const struct dfs_err *err)
{
	fprintf(stderr, "urun: %s: %s\n", what, err ? err->msg : "failed");
	exit(2);
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

/* The document or array at it into *out as a read-only view. */
static int view_opt(const bson_iter_t *it, bool array, bson_t *out)
{
	const uint8_t *data;
	uint32_t len;

	if (array ? !BSON_ITER_HOLDS_ARRAY(it) : !BSON_ITER_HOLDS_DOCUMENT(it))
		return -1;
	if (array)
		bson_iter_array(it, &len, &data);
	else
		bson_iter_document(it, &len, &data);
	return bson_init_static(out, data, len) ? 0 : -1;
}

static void run_case(const bson_t *c)
{
	struct dfs_err err = {0};
	bson_t doc = BSON_INITIALIZER, upd, af, filter, upsert, out, res, seed;
	bool have_upd = false, have_af = false, have_filter = false, have_upsert = false;
	bool have_doc = false, changed = false, pipeline = false;
	struct query_let *let = NULL;
	int64_t now = 1700000000000LL;
	struct query_update *u = NULL;
	const bson_t *target;
	int elem = -1;
	bson_iter_t it;

	if (!bson_iter_init(&it, c))
		return print_error("case: ", "not valid BSON");
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		int bad = 0;

		if (!strcmp(k, "echo")) {
			bson_t e = BSON_INITIALIZER;

			bson_append_value(&e, "ok", 2, bson_iter_value(&it));
			print_doc(&e);
			bson_destroy(&e);
			return;
		} else if (!strcmp(k, "doc")) {
			bad = view_opt(&it, false, &doc);
			have_doc = !bad;
		} else if (!strcmp(k, "update")) {
			pipeline = BSON_ITER_HOLDS_ARRAY(&it);
			bad = view_opt(&it, pipeline, &upd);
			have_upd = !bad;
		} else if (!strcmp(k, "let")) {
			bson_t lv;

			bad = view_opt(&it, false, &lv);
			if (!bad && query_let_new(&lv, now, &let, &err)) {
				print_error("", err.msg);
				goto done;
			}
		} else if (!strcmp(k, "arrayFilters")) {
			bad = view_opt(&it, true, &af);
			have_af = !bad;
		} else if (!strcmp(k, "filter")) {
			bad = view_opt(&it, false, &filter);
			have_filter = !bad;
		} else if (!strcmp(k, "upsert")) {
			bad = view_opt(&it, false, &upsert);
			have_upsert = !bad;
		} else if (!strcmp(k, "now")) {
			if (!BSON_ITER_HOLDS_INT32(&it) && !BSON_ITER_HOLDS_INT64(&it))
				bad = -1;
			else
				now = bson_iter_as_int64(&it);
		} else {
			char msg[128];

			snprintf(msg, sizeof(msg), "unknown case field '%s'", k);
			print_error("case: ", msg);
			goto done;
		}
		if (bad) {
			char msg[128];

			snprintf(msg, sizeof(msg), "bad value for '%s'", k);
			print_error("case: ", msg);
			goto done;
		}
	}
	if (!have_upd) {
		print_error("case: ", "update is missing");
		goto done;
	}
	(void)have_doc;

	if (pipeline ? query_update_parse_pipeline(&upd, have_af ? &af : NULL, let, &u, &err)
		     : query_update_parse(&upd, have_af ? &af : NULL, &u, &err)) {
		print_error("", err.msg);
		goto done;
	}
	target = &doc;
	bson_init(&seed);
	if (have_upsert) {
		if (query_upsert_seed(&upsert, &seed, &err)) {
			query_update_free(u);
			bson_destroy(&seed);
			print_error("", err.msg);
			goto done;
		}
		target = &seed;
	} else if (have_filter) {
		struct query_expr *e;

		if (query_filter_parse(&filter, &e, &err)) {
			query_update_free(u);
			bson_destroy(&seed);
			print_error("case: filter: ", err.msg);
			goto done;
		}
		if (!query_filter_match(e, &doc, &elem)) {
			query_expr_free(e);
			query_update_free(u);
			bson_destroy(&seed);
			print_error("case: ", "the filter does not match the document");
			goto done;
		}
		query_expr_free(e);
	}
	bson_init(&out);
	if (query_update_apply(u, target, elem, have_upsert, now, &out, &changed, &err)) {
		if (out.len != 5)
			die("apply left out non-empty after an error", NULL);
		print_error("", err.msg);
	} else {
		bson_init(&res);
		bson_append_document(&res, "ok", 2, &out);
		bson_append_bool(&res, "changed", 7, changed);
		print_doc(&res);
		bson_destroy(&res);
	}
	bson_destroy(&out);
	bson_destroy(&seed);
	query_update_free(u);
done:
	query_let_free(let);
}

int main(int argc, char **argv)
{
	struct dfs_err err = {0};
	FILE *in = stdin;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (argc > 2 || (argc == 2 && !strcmp(argv[1], "--help"))) {
		fprintf(stderr, "usage: urun [FILE]\n");
		return 2;
	}
	if (argc == 2 && strcmp(argv[1], "-")) {
		in = fopen(argv[1], "r");
		if (!in) {
			perror(argv[1]);
			return 2;
		}
	}
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
	if (in != stdin)
		fclose(in);
	return fflush(stdout) ? 2 : 0;
}
