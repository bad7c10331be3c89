/*
 * explain.c - describes plans in MongoDB's explain shape (queryPlanner, executionStats,
 * allPlansExecution) and draws an explain document as a text tree. It plans and runs
 * through plan.c and exec.c and never writes anything: the trial and the run happen in
 * the caller's transaction, and explain neither reads nor fills the plan cache.
 */
#include "plan_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Counters as MongoDB prints them: int32 when they fit. */
static void append_num(bson_t *b, const char *k, int64_t v)
{
	if (v >= INT32_MIN && v <= INT32_MAX)
		bson_append_int32(b, k, -1, (int32_t)v);
	else
		bson_append_int64(b, k, -1, v);
}
#define APPEND_NUM(b, k, v) append_num(b, k, v)

const char *plan__stage_name(int stage)
{
	static const char *const names[] = {
		[PS_COLLSCAN] = "COLLSCAN",
		[PS_IXSCAN] = "IXSCAN",
		[PS_FETCH] = "FETCH",
		[PS_OR] = "OR",
		[PS_SORT] = "SORT",
		[PS_SKIP] = "SKIP",
		[PS_LIMIT] = "LIMIT",
		[PS_PROJ_SIMPLE] = "PROJECTION_SIMPLE",
		[PS_PROJ_DEFAULT] = "PROJECTION_DEFAULT",
		[PS_PROJ_COVERED] = "PROJECTION_COVERED",
		[PS_FAST_COUNT] = "RECORD_STORE_FAST_COUNT",
		[PS_TEXT_MATCH] = "TEXT_MATCH",
		[PS_TEXT_OR] = "TEXT_OR",
	};
	return stage >= 0 && stage <= PS_TEXT_OR ? names[stage] : "UNKNOWN";
}

static void append_key_pattern(const struct store_index *ix, bson_t *out, const char *key)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	if (bson_iter_init_find(&it, ix->spec, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_t kp;

		bson_iter_document(&it, &len, &data);
		if (bson_init_static(&kp, data, len))
			BSON_APPEND_DOCUMENT(out, key, &kp);
	}
}

/* Interval k of field i of an index scan as MongoDB lists it: in scan order, so reversed
 * (and its ends swapped) for a field scanned from its high end. */
static struct plan__ival shown_ival(const struct plan__node *n, int i, int k)
{
	const struct plan__ivals *s = &n->fb[i];
	bool rev = (n->ix->field[i].dir < 0) != n->backward;
	const struct plan__ival *iv = &s->iv[rev ? s->n - 1 - k : k];
	struct plan__ival shown = *iv;

	if (rev) {
		shown.lo = iv->hi;
		shown.hi = iv->lo;
		shown.lo_in = iv->hi_in;
		shown.hi_in = iv->lo_in;
	}
	return shown;
}

/* A count's index scan is MongoDB's COUNT_SCAN when its bounds are one interval per field
 * (one contiguous range of keys); otherwise it is shown as the IXSCAN (without FETCH) it is. */
static bool is_count_scan(const struct plan__node *n)
{
	if (n->stage != PS_IXSCAN || !n->count_scan)
		return false;
	for (int i = 0; i < n->ix->nfields; i++)
		if (n->fb[i].n != 1)
			return false;
	return true;
}

/* The fields both IXSCAN and COUNT_SCAN show about their index. */
static void append_index(const struct store_index *ix, bson_t *out)
{
	bson_t mk, arr;

	append_key_pattern(ix, out, "keyPattern");
	BSON_APPEND_UTF8(out, "indexName", ix->name);
	BSON_APPEND_BOOL(out, "isMultiKey", ix->multikey != 0);
	BSON_APPEND_DOCUMENT_BEGIN(out, "multiKeyPaths", &mk);
	for (int i = 0; i < ix->nfields; i++) {
		bson_append_array_begin(&mk, ix->field[i].path, -1, &arr);
		if ((ix->multikey >> i) & 1)
			BSON_APPEND_UTF8(&arr, "0", ix->field[i].path);
		bson_append_array_end(&mk, &arr);
	}
	bson_append_document_end(out, &mk);
	BSON_APPEND_BOOL(out, "isUnique", ix->unique);
	BSON_APPEND_BOOL(out, "isSparse", ix->sparse);
	BSON_APPEND_BOOL(out, "isPartial", ix->partial != NULL);
	BSON_APPEND_INT32(out, "indexVersion", 2);
}

/* One end of a COUNT_SCAN's range: the key made of each field's interval end (the high
 * ends when hi) and whether the range includes it. Past a field whose end is excluded, the
 * fields take their far extreme, so that the key lies beyond (start) or before (end) every
 * key with that prefix, as MongoDB draws it: (a > 5) on {a: 1, b: 1} starts after
 * {a: 5, b: MaxKey}. */
static void append_range_end(const struct plan__node *n, bool hi, bson_t *b)
{
	bool incl = true;
	bson_t key;

	BSON_APPEND_DOCUMENT_BEGIN(b, hi ? "endKey" : "startKey", &key);
	for (int i = 0; i < n->ix->nfields; i++) {
		struct plan__ival iv = shown_ival(n, i, 0);
		bool upper = incl == hi; /* the interval's upper end, or its lower one */

		bson_append_value(&key, n->ix->field[i].path, -1, upper ? &iv.hi : &iv.lo);
		if (incl && !(hi ? iv.hi_in : iv.lo_in))
			incl = false;
	}
	bson_append_document_end(b, &key);
	BSON_APPEND_BOOL(b, hi ? "endKeyInclusive" : "startKeyInclusive", incl);
}

/* COUNT_SCAN's bounds: the first and last key of its one range. */
static void append_count_scan(const struct plan__node *n, bson_t *out)
{
	bson_t b;

	append_index(n->ix, out);
	BSON_APPEND_DOCUMENT_BEGIN(out, "indexBounds", &b);
	append_range_end(n, false, &b);
	append_range_end(n, true, &b);
	bson_append_document_end(out, &b);
}

/* A term's scan under TEXT_OR, as MongoDB shows it: multikey, backward, no bounds. */
static void append_text_scan(const struct plan__node *n, bson_t *out)
{
	bson_t b;

	append_key_pattern(n->ix, out, "keyPattern");
	BSON_APPEND_UTF8(out, "indexName", n->ix->name);
	BSON_APPEND_BOOL(out, "isMultiKey", true);
	BSON_APPEND_BOOL(out, "isUnique", false);
	BSON_APPEND_BOOL(out, "isSparse", false);
	BSON_APPEND_BOOL(out, "isPartial", n->ix->partial != NULL);
	BSON_APPEND_INT32(out, "indexVersion", 2);
	BSON_APPEND_UTF8(out, "direction", "backward");
	BSON_APPEND_DOCUMENT_BEGIN(out, "indexBounds", &b);
	bson_append_document_end(out, &b);
}

static void append_ixscan(const struct plan__node *n, bson_t *out)
{
	const struct store_index *ix = n->ix;
	bson_t b, arr;
	char num[16];

	if (n->text_scan) {
		append_text_scan(n, out);
		return;
	}

	append_index(ix, out);
	BSON_APPEND_UTF8(out, "direction", n->backward ? "backward" : "forward");
	BSON_APPEND_DOCUMENT_BEGIN(out, "indexBounds", &b);
	for (int i = 0; i < ix->nfields; i++) {
		const struct plan__ivals *s = &n->fb[i];
		bson_append_array_begin(&b, ix->field[i].path, -1, &arr);
		for (int k = 0; k < s->n; k++) {
			struct plan__ival shown = shown_ival(n, i, k);
			struct dfs_buf t;

			dfs_buf_init(&t);
			plan__ival_describe(&shown, &t);
			snprintf(num, sizeof(num), "%d", k);
			BSON_APPEND_UTF8(&arr, num, t.data);
			dfs_buf_release(&t);
		}
		bson_append_array_end(&b, &arr);
	}
	bson_append_document_end(out, &b);
}

static void append_stats(const struct plan__node *n, bson_t *out)
{
	const struct plan__stats *st = &n->st;

	APPEND_NUM(out, "nReturned", st->nreturned);
	APPEND_NUM(out, "executionTimeMillisEstimate", st->ns / 1000000);
	APPEND_NUM(out, "works", st->works);
	APPEND_NUM(out, "advanced", st->advanced);
	APPEND_NUM(out, "needTime", st->need_time);
	BSON_APPEND_INT32(out, "needYield", 0);
	BSON_APPEND_INT32(out, "saveState", 0);
	BSON_APPEND_INT32(out, "restoreState", 0);
	BSON_APPEND_INT32(out, "isEOF", st->eof ? 1 : 0); /* MongoDB prints 1 or 0 */
	switch (n->stage) {
	case PS_FETCH:
		APPEND_NUM(out, "docsExamined", st->docs_examined);
		APPEND_NUM(out, "alreadyHasObj", st->already_has_obj);
		break;
	case PS_COLLSCAN:
	case PS_TEXT_OR:
		APPEND_NUM(out, "docsExamined", st->docs_examined);
		break;
	case PS_TEXT_MATCH:
		APPEND_NUM(out, "docsRejected", st->docs_rejected);
		break;
	case PS_IXSCAN:
		APPEND_NUM(out, "keysExamined", st->keys_examined);
		if (is_count_scan(n))
			break;
		APPEND_NUM(out, "seeks", st->seeks);
		APPEND_NUM(out, "dupsTested", st->dups_tested);
		APPEND_NUM(out, "dupsDropped", st->dups_dropped);
		break;
	case PS_OR:
		APPEND_NUM(out, "dupsTested", st->dups_tested);
		APPEND_NUM(out, "dupsDropped", st->dups_dropped);
		break;
	case PS_FAST_COUNT:
		APPEND_NUM(out, "nCounted", n->amount);
		BSON_APPEND_INT32(out, "nSkipped", 0);
		break;
	default:
		break;
	}
}

/* One stage document (with its inputs); stats: with the counters. */
static void append_stage(const struct plan__node *n, bool stats, bson_t *out)
{
	BSON_APPEND_UTF8(out, "stage",
			 is_count_scan(n) ? "COUNT_SCAN" : plan__stage_name(n->stage));
	if (n->filter && (n->stage == PS_COLLSCAN || n->stage == PS_FETCH ||
			  n->stage == PS_IXSCAN || n->stage == PS_TEXT_OR))
		query_filter_describe(n->filter, out, "filter");
	switch (n->stage) {
	case PS_COLLSCAN:
		BSON_APPEND_UTF8(out, "direction", n->backward ? "backward" : "forward");
		break;
	case PS_IXSCAN:
		if (is_count_scan(n))
			append_count_scan(n, out);
		else
			append_ixscan(n, out);
		break;
	case PS_SORT:
		BSON_APPEND_DOCUMENT(out, "sortPattern", n->sort_spec);
		APPEND_NUM(out, "memLimit",
			   (int64_t)(n->sort_mem ? n->sort_mem : 32u * 1024 * 1024));
		if (n->amount)
			APPEND_NUM(out, "limitAmount", n->amount);
		BSON_APPEND_UTF8(out, "type", "simple");
		break;
	case PS_SKIP:
		APPEND_NUM(out, "skipAmount", n->amount);
		break;
	case PS_TEXT_MATCH:
		BSON_APPEND_DOCUMENT(out, "indexPrefix", n->text_prefix);
		BSON_APPEND_UTF8(out, "indexName", n->ix->name);
		query__text_parsed(n->text, out, "parsedTextQuery");
		BSON_APPEND_INT32(out, "textIndexVersion", 3);
		break;
	case PS_LIMIT:
		APPEND_NUM(out, "limitAmount", n->amount);
		break;
	case PS_PROJ_SIMPLE:
	case PS_PROJ_DEFAULT:
	case PS_PROJ_COVERED:
		BSON_APPEND_DOCUMENT(out, "transformBy", n->proj_spec);
		break;
	default:
		break;
	}
	if (stats)
		append_stats(n, out);
	if (n->stage == PS_OR || (n->stage == PS_TEXT_OR && n->nkids > 1)) {
		bson_t arr, kid;
		char num[16];

		BSON_APPEND_ARRAY_BEGIN(out, "inputStages", &arr);
		for (int i = 0; i < n->nkids; i++) {
			snprintf(num, sizeof(num), "%d", i);
			BSON_APPEND_DOCUMENT_BEGIN(&arr, num, &kid);
			append_stage(n->kids[i], stats, &kid);
			bson_append_document_end(&arr, &kid);
		}
		bson_append_array_end(out, &arr);
	} else if (n->nkids == 1) {
		bson_t kid;

		BSON_APPEND_DOCUMENT_BEGIN(out, "inputStage", &kid);
		append_stage(n->kids[0], stats, &kid);
		bson_append_document_end(out, &kid);
	}
}

/* A plan as explain shows it: a count's under a COUNT stage, which counts what its input
 * returns (it calls the input once per work and returns no document). */
static void append_plan(const struct plan__node *root, bool count, bool stats, bson_t *out)
{
	bson_t in;

	if (!count || root->stage == PS_FAST_COUNT) { /* FAST_COUNT is a whole count */
		append_stage(root, stats, out);
		return;
	}
	BSON_APPEND_UTF8(out, "stage", "COUNT");
	if (stats) {
		const struct plan__stats *st = &root->st;

		BSON_APPEND_INT32(out, "nReturned", 0);
		APPEND_NUM(out, "executionTimeMillisEstimate", st->ns / 1000000);
		APPEND_NUM(out, "works", st->works);
		BSON_APPEND_INT32(out, "advanced", 0);
		APPEND_NUM(out, "needTime", st->works - (st->eof ? 1 : 0));
		BSON_APPEND_INT32(out, "needYield", 0);
		BSON_APPEND_INT32(out, "saveState", 0);
		BSON_APPEND_INT32(out, "restoreState", 0);
		BSON_APPEND_INT32(out, "isEOF", st->eof ? 1 : 0);
		APPEND_NUM(out, "nCounted", st->nreturned);
		BSON_APPEND_INT32(out, "nSkipped", 0);
	}
	BSON_APPEND_DOCUMENT_BEGIN(out, "inputStage", &in);
	append_stage(root, stats, &in);
	bson_append_document_end(out, &in);
}

/* Appends a key pattern the way MongoDB's planSummary writes it: { a: 1, b: "hashed" }. */
static void summary_pattern(const bson_t *key, struct dfs_buf *out)
{
	bson_iter_t it;
	bool first = true;

	dfs_buf_puts(out, "{ ");
	if (key && bson_iter_init(&it, key)) {
		while (bson_iter_next(&it)) {
			dfs_buf_printf(out, "%s%s: ", first ? "" : ", ", bson_iter_key(&it));
			first = false;
			if (BSON_ITER_HOLDS_UTF8(&it))
				dfs_buf_printf(out, "\"%s\"", bson_iter_utf8(&it, NULL));
			else if (BSON_ITER_HOLDS_NUMBER(&it))
				dfs_buf_printf(out, "%g", bson_iter_as_double(&it));
			else
				dfs_buf_puts(out, "?");
		}
	}
	dfs_buf_puts(out, first ? "}" : " }");
}

static void summary_leaf(struct query_summary *s, const char *leaf)
{
	size_t have = strlen(s->plan), add = strlen(leaf);

	/* each index once, as MongoDB lists them: leaves are separated by ", " and none
	 * holds ", " itself after its closing brace */
	for (const char *p = s->plan; (p = strstr(p, leaf)); p += add)
		if ((p == s->plan || (p >= s->plan + 2 && p[-2] == ',')) &&
		    (p[add] == '\0' || p[add] == ','))
			return;
	if (have + add + 3 >= sizeof(s->plan))
		return;
	snprintf(s->plan + have, sizeof(s->plan) - have, "%s%s", have ? ", " : "", leaf);
}

void plan__summary(const struct plan__node *n, struct query_summary *s)
{
	s->keys_examined += n->st.keys_examined;
	s->docs_examined += n->st.docs_examined;
	if (n->stage == PS_SORT)
		s->has_sort_stage = true;
	if (n->stage == PS_COLLSCAN) {
		summary_leaf(s, "COLLSCAN");
	} else if (n->stage == PS_IXSCAN && n->ix) {
		struct dfs_buf b;
		bson_iter_t it;
		bson_t key;
		bool have = false;

		dfs_buf_init(&b);
		dfs_buf_puts(&b, n->count_scan ? "COUNT_SCAN " : "IXSCAN ");
		if (n->ix->spec && bson_iter_init_find(&it, n->ix->spec, "key") &&
		    BSON_ITER_HOLDS_DOCUMENT(&it)) {
			const uint8_t *d;
			uint32_t len;

			bson_iter_document(&it, &len, &d);
			have = bson_init_static(&key, d, len);
		}
		if (have)
			summary_pattern(&key, &b);
		else
			dfs_buf_puts(&b, "{ _id: 1 }");
		summary_leaf(s, b.data);
		dfs_buf_release(&b);
	} else if (n->stage == PS_FAST_COUNT) {
		summary_leaf(s, "RECORD_STORE_FAST_COUNT");
	}
	for (int i = 0; i < n->nkids; i++)
		plan__summary(n->kids[i], s);
}

static void totals(const struct plan__node *n, int64_t *keys, int64_t *docs)
{
	*keys += n->st.keys_examined;
	*docs += n->st.docs_examined;
	for (int i = 0; i < n->nkids; i++)
		totals(n->kids[i], keys, docs);
}

/* Is o the count command (explained with its COUNT stage and as {count, query}), rather
 * than a find or an aggregate's $cursor? */
static bool is_count_command(const struct query_find_opts *o)
{
	return o->count_only && !o->in_pipeline;
}

static void append_command(const char *ns, const struct query_find_opts *o, bson_t *out)
{
	const char *dot = strchr(ns, '.');
	bson_t cmd;

	BSON_APPEND_DOCUMENT_BEGIN(out, "command", &cmd);
	bool count = is_count_command(o);

	BSON_APPEND_UTF8(&cmd, count ? "count" : "find", dot ? dot + 1 : ns);
	if (o->filter)
		BSON_APPEND_DOCUMENT(&cmd, count ? "query" : "filter", o->filter);
	else {
		bson_t e = BSON_INITIALIZER;

		BSON_APPEND_DOCUMENT(&cmd, count ? "query" : "filter", &e);
	}
	if (o->sort)
		BSON_APPEND_DOCUMENT(&cmd, "sort", o->sort);
	if (o->projection)
		BSON_APPEND_DOCUMENT(&cmd, "projection", o->projection);
	if (o->skip)
		APPEND_NUM(&cmd, "skip", o->skip);
	if (o->limit)
		APPEND_NUM(&cmd, "limit", o->limit);
	if (o->hint)
		BSON_APPEND_DOCUMENT(&cmd, "hint", o->hint);
	else if (o->hint_name)
		BSON_APPEND_UTF8(&cmd, "hint", o->hint_name);
	if (dot)
		bson_append_utf8(&cmd, "$db", 3, ns, (int)(dot - ns));
	bson_append_document_end(out, &cmd);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Explain's run of a planned find r (the part after planning; r stays the caller's). */
static int explain_run(struct store_txn *t, const char *ns, const struct query_find_opts *o,
		       int verbosity, struct plan__run *r, int64_t start, bson_t *out,
		       struct dfs_err *err)
{
	bool count = is_count_command(o);
	bson_t qp, wp, rej, es, st, all;
	int64_t nret = 0, keys = 0, docs = 0;
	int rc;

	BSON_APPEND_UTF8(out, "explainVersion", "1");
	BSON_APPEND_DOCUMENT_BEGIN(out, "queryPlanner", &qp);
	BSON_APPEND_UTF8(&qp, "namespace", ns);
	BSON_APPEND_BOOL(&qp, "indexFilterSet", false);
	if (r->q.filter)
		query_filter_describe(r->q.filter, &qp, "parsedQuery");
	else {
		bson_t e = BSON_INITIALIZER;

		BSON_APPEND_DOCUMENT(&qp, "parsedQuery", &e);
	}
	BSON_APPEND_DOCUMENT_BEGIN(&qp, "winningPlan", &wp);
	append_plan(r->cands[r->winner].root, count, false, &wp);
	bson_append_document_end(&qp, &wp);
	BSON_APPEND_ARRAY_BEGIN(&qp, "rejectedPlans", &rej);
	for (int i = 0, k = 0; i < r->ncands; i++) {
		char num[16];
		bson_t p;

		if (i == r->winner)
			continue;
		snprintf(num, sizeof(num), "%d", k++);
		BSON_APPEND_DOCUMENT_BEGIN(&rej, num, &p);
		append_plan(r->cands[i].root, count, false, &p);
		bson_append_document_end(&rej, &p);
	}
	bson_append_array_end(&qp, &rej);
	bson_append_document_end(out, &qp);

	if (verbosity >= QUERY_VERB_EXEC) {
		struct plan__node *root = r->cands[r->winner].root;

		/* The trial's counters, before the winner runs again from the start. */
		bson_init(&all);
		if (verbosity == QUERY_VERB_ALL && r->ncands > 1) {
			for (int i = 0; i < r->ncands; i++) {
				const struct plan__node *root_i = r->cands[i].root;
				char num[16];
				bson_t p, s;
				int64_t k = 0, d = 0;

				totals(root_i, &k, &d);
				snprintf(num, sizeof(num), "%d", i);
				BSON_APPEND_DOCUMENT_BEGIN(&all, num, &p);
				APPEND_NUM(&p, "nReturned", count ? 0 : root_i->st.nreturned);
				APPEND_NUM(&p, "executionTimeMillisEstimate",
					   root_i->st.ns / 1000000);
				APPEND_NUM(&p, "totalKeysExamined", k);
				APPEND_NUM(&p, "totalDocsExamined", d);
				BSON_APPEND_DOCUMENT_BEGIN(&p, "executionStages", &s);
				append_plan(root_i, count, true, &s);
				bson_append_document_end(&p, &s);
				bson_append_document_end(&all, &p);
			}
		}
		for (int i = 0; i < r->ncands; i++)
			plan__reset(r->cands[i].root, i != r->winner);
		if ((rc = plan__count(t, root, &nret, err))) {
			bson_destroy(&all);
			return rc;
		}
		totals(root, &keys, &docs);
		BSON_APPEND_DOCUMENT_BEGIN(out, "executionStats", &es);
		BSON_APPEND_BOOL(&es, "executionSuccess", true);
		APPEND_NUM(&es, "nReturned", count ? 0 : nret); /* COUNT returns no document */
		APPEND_NUM(&es, "executionTimeMillis", now_ms() - start);
		APPEND_NUM(&es, "totalKeysExamined", keys);
		APPEND_NUM(&es, "totalDocsExamined", docs);
		BSON_APPEND_DOCUMENT_BEGIN(&es, "executionStages", &st);
		append_plan(root, count, true, &st);
		bson_append_document_end(&es, &st);
		if (verbosity == QUERY_VERB_ALL)
			BSON_APPEND_ARRAY(&es, "allPlansExecution", &all);
		bson_destroy(&all);
		bson_append_document_end(out, &es);
	}
	append_command(ns, o, out);
	return 0;
}

int query_find_explain(struct store_txn *t, int64_t coll, const char *ns,
		       const struct query_find_opts *o, int verbosity, bson_t *out,
		       struct dfs_err *err)
{
	int64_t start = now_ms();
	struct plan__run r;
	int rc;

	/* Every stage's executionTimeMillisEstimate, trial included. */
	plan__set_timed(true);
	rc = plan__run_open(t, coll, o, false, &r, err);
	if (!rc) {
		rc = explain_run(t, ns, o, verbosity, &r, start, out, err);
		plan__run_release(&r);
	}
	plan__set_timed(false);
	return rc;
}

/* ---- the text tree ----------------------------------------------------------------------- */

static void shell_doc(const bson_t *d, struct dfs_buf *out)
{
	struct dfs_err err = {0};
	bson_iter_t it;
	bool first = true;

	dfs_buf_putc(out, '{');
	if (bson_iter_init(&it, d))
		while (bson_iter_next(&it)) {
			dfs_buf_printf(out, "%s%s: ", first ? "" : ", ", bson_iter_key(&it));
			store_codec_render_value(bson_iter_value(&it), out, &err);
			first = false;
		}
	dfs_buf_putc(out, '}');
}

static int64_t get_int(const bson_t *d, const char *k, bool *found)
{
	bson_iter_t it;

	*found = bson_iter_init_find(&it, d, k) && BSON_ITER_HOLDS_NUMBER(&it);
	return *found ? bson_iter_as_int64(&it) : 0;
}

static bool get_bool(const bson_t *d, const char *k)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, d, k) && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
}

static bool sub_doc(const bson_t *d, const char *k, bson_t *out)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	if (!bson_iter_init_find(&it, d, k) ||
	    !(BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)))
		return false;
	bson_iter_document(&it, &len, &data);
	if (BSON_ITER_HOLDS_ARRAY(&it))
		bson_iter_array(&it, &len, &data);
	return bson_init_static(out, data, len);
}

static void draw(const bson_t *stage, int depth, struct dfs_buf *out)
{
	bson_iter_t it;
	bson_t sub;
	const char *name = "?";
	bool found;
	int64_t v;

	for (int i = 0; i < depth; i++)
		dfs_buf_puts(out, "  ");
	if (bson_iter_init_find(&it, stage, "stage") && BSON_ITER_HOLDS_UTF8(&it))
		name = bson_iter_utf8(&it, NULL);
	dfs_buf_puts(out, name);
	if (!strcmp(name, "IXSCAN") || !strcmp(name, "COUNT_SCAN")) {
		if (bson_iter_init_find(&it, stage, "indexName") && BSON_ITER_HOLDS_UTF8(&it))
			dfs_buf_printf(out, " %s", bson_iter_utf8(&it, NULL));
		if (sub_doc(stage, "keyPattern", &sub)) {
			dfs_buf_putc(out, ' ');
			shell_doc(&sub, out);
		}
		if (!strcmp(name, "COUNT_SCAN") && sub_doc(stage, "indexBounds", &sub)) {
			bson_t key;

			/* [startKey, endKey) with the ends' inclusiveness as brackets */
			dfs_buf_puts(out, get_bool(&sub, "startKeyInclusive") ? " [" : " (");
			if (sub_doc(&sub, "startKey", &key))
				shell_doc(&key, out);
			dfs_buf_puts(out, ", ");
			if (sub_doc(&sub, "endKey", &key))
				shell_doc(&key, out);
			dfs_buf_puts(out, get_bool(&sub, "endKeyInclusive") ? "]" : ")");
		} else if (sub_doc(stage, "indexBounds", &sub) && bson_iter_init(&it, &sub)) {
			bool first = true;

			while (bson_iter_next(&it)) {
				bson_iter_t a;

				dfs_buf_printf(out, "%s%s: ", first ? " " : "; ",
					       bson_iter_key(&it));
				first = false;
				if (bson_iter_recurse(&it, &a)) {
					bool f2 = true;

					while (bson_iter_next(&a)) {
						if (BSON_ITER_HOLDS_UTF8(&a))
							dfs_buf_printf(out, "%s%s", f2 ? "" : ", ",
								       bson_iter_utf8(&a, NULL));
						f2 = false;
					}
				}
			}
		}
		v = get_int(stage, "keysExamined", &found);
		if (found)
			dfs_buf_printf(out, "  keysExamined=%lld", (long long)v);
		v = get_int(stage, "dupsDropped", &found);
		if (found && v)
			dfs_buf_printf(out, " dupsDropped=%lld", (long long)v);
	} else {
		const char *sep = "  ";

		v = get_int(stage, "nReturned", &found);
		if (found) {
			dfs_buf_printf(out, "%snReturned=%lld", sep, (long long)v);
			sep = " ";
		}
		v = get_int(stage, "docsExamined", &found);
		if (found) {
			dfs_buf_printf(out, "%sdocsExamined=%lld", sep, (long long)v);
			sep = " ";
		}
		v = get_int(stage, "nCounted", &found);
		if (found) {
			dfs_buf_printf(out, "%snCounted=%lld", sep, (long long)v);
			sep = " ";
		}
		if (sub_doc(stage, "sortPattern", &sub)) {
			dfs_buf_printf(out, "%s", sep);
			shell_doc(&sub, out);
		}
	}
	dfs_buf_putc(out, '\n');
	if (sub_doc(stage, "inputStage", &sub))
		draw(&sub, depth + 1, out);
	if (sub_doc(stage, "inputStages", &sub) && bson_iter_init(&it, &sub))
		while (bson_iter_next(&it)) {
			bson_t k;
			const uint8_t *data;
			uint32_t len;

			bson_iter_document(&it, &len, &data);
			if (bson_init_static(&k, data, len))
				draw(&k, depth + 1, out);
		}
}

int query_explain_tree(const bson_t *explain, struct dfs_buf *out, struct dfs_err *err)
{
	bson_t a, b;

	if (sub_doc(explain, "executionStats", &a) && sub_doc(&a, "executionStages", &b)) {
		draw(&b, 0, out);
		return 0;
	}
	if (sub_doc(explain, "queryPlanner", &a) && sub_doc(&a, "winningPlan", &b)) {
		draw(&b, 0, out);
		return 0;
	}
	return dfs_err_set(err, DFS_EINVAL, "explain document has no winning plan");
}
