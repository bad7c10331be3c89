/*
 * qpath.c - the query path grammar of DESIGN.md section 2 and the result files it opens:
 * "<filter>[?<option>=<value>[&...]]" with %XX escapes, saved find commands ("@name"), and
 * running a find (query/) or its explain (explain/) into a result that is a stable snapshot
 * for its open file (held in memory up to a point, then in an unlinked temporary file). It
 * does not evaluate or plan queries itself (query/ does) and does not talk to FUSE.
 */
#include "fs_int.h"
#include "query.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RESULT_MEM_MAX (8u * 1024 * 1024) /* beyond this a result goes to a temporary file */

size_t fs_sort_mem;   /* 0: the query layer's default */
size_t fs_result_mem; /* 0: RESULT_MEM_MAX */

void fs_query_init(struct fs_query *q)
{
	memset(q, 0, sizeof(*q));
	bson_init(&q->filter);
	bson_init(&q->sort);
	bson_init(&q->projection);
	bson_init(&q->hint);
	q->format = -1;
	q->verbosity = -1;
}

void fs_query_release(struct fs_query *q)
{
	bson_destroy(&q->filter);
	bson_destroy(&q->sort);
	bson_destroy(&q->projection);
	bson_destroy(&q->hint);
	free(q->distinct);
	free(q->hint_name);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes p[0..n) into out. */
int fs_path_unescape(const char *p, size_t n, struct dfs_buf *out, struct dfs_err *err)
{
	(void)err;
	dfs_buf_reset(out);
	for (size_t i = 0; i < n; i++) {
		int hi = p[i] == '%' && i + 2 < n ? hexval((unsigned char)p[i + 1]) : -1;
		int lo = hi >= 0 ? hexval((unsigned char)p[i + 2]) : -1;

		/* %XX escapes a byte; any other '%' is itself (a query pastes as written) */
		if (hi >= 0 && lo >= 0) {
			dfs_buf_putc(out, (char)(hi * 16 + lo));
			i += 2;
		} else {
			dfs_buf_putc(out, p[i]);
		}
	}
	return 0;
}

/* The scanner behind fs_path_split and fs_path_incomplete: from s on, the first byte of
 * stops outside a string ('...' or "...") or a regex literal (/.../, where a value may
 * start), or the end; *inside says whether the text ended inside such a literal. */
static const char *path_scan(const char *s, const char *stops, bool *inside)
{
	char quote = 0, prev = 0;
	bool regex = false, cls = false, esc = false;

	for (; *s; s++) {
		char c = *s;

		if (quote || regex) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (quote && c == quote)
				quote = 0;
			else if (regex && c == '[')
				cls = true;
			else if (regex && c == ']')
				cls = false;
			else if (regex && !cls && c == '/')
				regex = false;
			continue;
		}
		if (strchr(stops, c))
			break;
		if (c == '"' || c == '\'')
			quote = c;
		else if (c == '/' && (prev == ':' || prev == '[' || prev == ',' || prev == '('))
			regex = true;
		if (c != ' ' && c != '\t' && c != '\n')
			prev = c;
	}
	if (inside)
		*inside = quote || regex;
	return s;
}

const char *fs_path_split(const char *s, const char *stops)
{
	const char *e = path_scan(s, stops, NULL);

	return *e ? e : NULL;
}

bool fs_path_incomplete(const char *text)
{
	const char *end;
	struct dfs_buf v;
	bson_t b = BSON_INITIALIZER;
	bool inside;
	int rc;

	end = path_scan(text, "?", &inside);
	if (inside)
		return true;
	dfs_buf_init(&v);
	fs_path_unescape(text, (size_t)(end - text), &v, NULL);
	rc = v.len && v.data[0] != '@' ? store_codec_parse_value(v.data, v.len, &b, "v", NULL)
				       : 0;
	dfs_buf_release(&v);
	bson_destroy(&b);
	return rc == DFS_EINCOMPLETE;
}

int fs_path_doc_opt(const char *what, const struct dfs_buf *v, bson_t *out, struct dfs_err *err)
{
	int rc;

	bson_reinit(out);
	rc = store_codec_parse_doc(v->data ? v->data : "", v->len, out, err);
	if (rc == DFS_EINCOMPLETE)
		rc = DFS_EINVAL;
	if (rc)
		dfs_err_prefix(err, "%s: ", what);
	return rc;
}

static int parse_int_opt(const char *what, const struct dfs_buf *v, int64_t *out,
			 struct dfs_err *err)
{
	char *end;
	long long n;

	errno = 0;
	n = strtoll(v->data ? v->data : "", &end, 10);
	if (!v->len || *end || errno || n < 0)
		return dfs_err_set(err, DFS_EINVAL, "%s needs a whole number >= 0, not '%s'", what,
				   v->data ? v->data : "");
	*out = n;
	return 0;
}

int fs_path_bool_opt(const char *what, const struct dfs_buf *v, bool *out, struct dfs_err *err)
{
	const char *s = v->data ? v->data : "";

	if (!strcmp(s, "1") || !strcmp(s, "true") || !*s)
		*out = true;
	else if (!strcmp(s, "0") || !strcmp(s, "false"))
		*out = false;
	else
		return dfs_err_set(err, DFS_EINVAL, "%s needs 1, 0, true or false, not '%s'", what,
				   s);
	return 0;
}

/* hint=<index name> or hint=<key pattern> ({price: 1}, {$natural: 1}). */
static int set_hint(struct fs_query *q, const char *text, size_t len, struct dfs_err *err)
{
	size_t sp = strspn(text, " \t\n");
	int rc;

	free(q->hint_name);
	q->hint_name = NULL;
	q->has_hint = false;
	if (sp == len)
		return dfs_err_set(err, DFS_EINVAL,
				   "hint needs an index name or a key pattern ({price: 1})");
	if (text[sp] != '{') {
		if (memchr(text, '\0', len))
			return dfs_err_set(err, DFS_EINVAL, "hint: bad index name");
		q->hint_name = strdup(text);
		if (!q->hint_name)
			abort();
		return 0;
	}
	bson_reinit(&q->hint);
	rc = store_codec_parse_doc(text, len, &q->hint, err);
	if (rc == DFS_EINCOMPLETE)
		rc = DFS_EINVAL;
	if (rc) {
		dfs_err_prefix(err, "hint: ");
		return rc;
	}
	q->has_hint = true;
	return 0;
}

int fs_path_format_opt(const struct dfs_buf *v, int *out, struct dfs_err *err)
{
	static const char *const names[] = {"jsonl", "json", "pretty", "ids", "tree"};

	for (int i = 0; i < 5; i++) {
		if (v->data && !strcmp(v->data, names[i])) {
			*out = i; /* enum fs_query_format's order */
			return 0;
		}
	}
	return dfs_err_set(err, DFS_EINVAL,
			   "format must be jsonl, json, pretty, ids or tree, not '%s'",
			   v->data ? v->data : "");
}

int fs_path_verbosity_opt(const struct dfs_buf *v, int *out, struct dfs_err *err)
{
	static const char *const names[] = {"queryPlanner", "executionStats", "allPlansExecution"};
	static const int verbs[] = {QUERY_VERB_PLANNER, QUERY_VERB_EXEC, QUERY_VERB_ALL};

	for (int i = 0; i < 3; i++) {
		if (v->data && !strcmp(v->data, names[i])) {
			*out = verbs[i];
			return 0;
		}
	}
	return dfs_err_set(err, DFS_EINVAL,
			   "verbosity must be queryPlanner, executionStats or "
			   "allPlansExecution, not '%s'",
			   v->data ? v->data : "");
}

static int set_option(struct fs_query *q, const char *name, const struct dfs_buf *v,
		      struct dfs_err *err)
{
	if (!strcmp(name, "sort")) {
		q->has_sort = true;
		return fs_path_doc_opt("sort", v, &q->sort, err);
	}
	if (!strcmp(name, "projection") || !strcmp(name, "project")) {
		q->has_projection = true;
		return fs_path_doc_opt("projection", v, &q->projection, err);
	}
	if (!strcmp(name, "skip"))
		return parse_int_opt("skip", v, &q->skip, err);
	if (!strcmp(name, "limit"))
		return parse_int_opt("limit", v, &q->limit, err);
	if (!strcmp(name, "maxTimeMS"))
		return parse_int_opt("maxTimeMS", v, &q->max_time_ms, err);
	if (!strcmp(name, "count"))
		return fs_path_bool_opt("count", v, &q->count, err);
	if (!strcmp(name, "tailable"))
		return fs_path_bool_opt("tailable", v, &q->tailable, err);
	if (!strcmp(name, "distinct")) {
		if (!v->len)
			return dfs_err_set(err, DFS_EINVAL, "distinct needs a field name");
		free(q->distinct);
		q->distinct = strdup(v->data);
		return 0;
	}
	if (!strcmp(name, "format")) {
		int f;
		int rc = fs_path_format_opt(v, &f, err);

		if (!rc)
			q->format = f;
		return rc;
	}
	if (!strcmp(name, "hint"))
		return set_hint(q, v->data ? v->data : "", v->len, err);
	if (!strcmp(name, "verbosity"))
		return fs_path_verbosity_opt(v, &q->verbosity, err);
	return dfs_err_set(err, DFS_EINVAL,
			   "unknown option '%s' (sort, skip, limit, projection, hint, count, "
			   "distinct, format, verbosity, maxTimeMS, tailable)",
			   name);
}

int fs_query_parse(const char *component, struct fs_query *q, struct dfs_err *err)
{
	const char *qm = fs_path_split(component, "?");
	size_t flen = qm ? (size_t)(qm - component) : strlen(component);
	struct dfs_buf v;
	int rc = 0;

	dfs_buf_init(&v);
	if ((rc = fs_path_unescape(component, flen, &v, err)))
		goto done;
	if (v.len && v.data[0] == '@') {
		if (v.len == 1 || v.len > 200 || memchr(v.data, '/', v.len)) {
			rc = dfs_err_set(err, DFS_EINVAL, "'@' needs the name of a saved query");
			goto done;
		}
		snprintf(q->saved, sizeof(q->saved), "%s", v.data + 1);
	} else if (v.len) {
		rc = fs_path_doc_opt("filter", &v, &q->filter, err);
		if (rc)
			goto done;
	}
	while (qm) {
		const char *opt = qm + 1, *amp = fs_path_split(opt, "&"), *eq;
		size_t olen = amp ? (size_t)(amp - opt) : strlen(opt);
		char name[32];
		size_t nlen;

		qm = amp;
		if (!olen)
			continue;
		eq = memchr(opt, '=', olen);
		nlen = eq ? (size_t)(eq - opt) : olen;
		if (nlen >= sizeof(name)) {
			rc = dfs_err_set(err, DFS_EINVAL, "unknown option '%.*s'", (int)nlen, opt);
			goto done;
		}
		memcpy(name, opt, nlen);
		name[nlen] = '\0';
		if ((rc = fs_path_unescape(eq ? eq + 1 : opt + olen, eq ? olen - nlen - 1 : 0, &v,
					   err)))
			goto done;
		if ((rc = set_option(q, name, &v, err)))
			goto done;
	}
done:
	dfs_buf_release(&v);
	return rc;
}

int fs_query_from_command(const bson_t *cmd, struct fs_query *q, struct dfs_err *err)
{
	bson_iter_t it;

	if (!bson_iter_init(&it, cmd))
		return dfs_err_set(err, DFS_EINVAL, "saved query is not a document");
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		bson_t *target = NULL;

		if (!strcmp(k, "filter"))
			target = &q->filter;
		else if (!strcmp(k, "sort"))
			target = &q->sort, q->has_sort = true;
		else if (!strcmp(k, "projection"))
			target = &q->projection, q->has_projection = true;
		if (target) {
			const uint8_t *data;
			uint32_t len;
			bson_t sub;

			if (!BSON_ITER_HOLDS_DOCUMENT(&it))
				return dfs_err_set(err, DFS_EINVAL,
						   "saved query: '%s' must be a document", k);
			bson_iter_document(&it, &len, &data);
			if (!bson_init_static(&sub, data, len))
				return dfs_err_set(err, DFS_EINVAL, "saved query: bad '%s'", k);
			bson_destroy(target);
			bson_copy_to(&sub, target);
		} else if (!strcmp(k, "hint")) {
			const char *str;
			uint32_t slen;

			if (BSON_ITER_HOLDS_UTF8(&it)) {
				int rc;

				str = bson_iter_utf8(&it, &slen);
				if ((rc = set_hint(q, str, slen, err))) {
					dfs_err_prefix(err, "saved query: ");
					return rc;
				}
			} else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
				const uint8_t *data;
				uint32_t dlen;
				bson_t sub;

				bson_iter_document(&it, &dlen, &data);
				if (!bson_init_static(&sub, data, dlen))
					return dfs_err_set(err, DFS_EINVAL,
							   "saved query: bad 'hint'");
				free(q->hint_name);
				q->hint_name = NULL;
				bson_destroy(&q->hint);
				bson_copy_to(&sub, &q->hint);
				q->has_hint = true;
			} else {
				return dfs_err_set(err, DFS_EINVAL,
						   "saved query: 'hint' must be an index name or "
						   "a key pattern");
			}
		} else if (!strcmp(k, "skip") || !strcmp(k, "limit") || !strcmp(k, "maxTimeMS")) {
			int64_t n;

			if (!BSON_ITER_HOLDS_NUMBER(&it) || (n = bson_iter_as_int64(&it)) < 0)
				return dfs_err_set(err, DFS_EINVAL,
						   "saved query: '%s' must be a whole number >= 0",
						   k);
			if (!strcmp(k, "skip"))
				q->skip = n;
			else if (!strcmp(k, "limit"))
				q->limit = n;
			else
				q->max_time_ms = n;
		} else {
			return dfs_err_set(err, DFS_EINVAL,
					   "saved query: unknown field '%s' (filter, sort, "
					   "projection, skip, limit, hint, maxTimeMS)",
					   k);
		}
	}
	return 0;
}

int fs_query_parse_saved(const char *text, size_t len, struct fs_query *q, struct dfs_err *err)
{
	struct dfs_err perr = {0};
	bson_t cmd;
	int rc;

	/* A pipeline (an array, or {"pipeline": [...]}) is saved for aggregate/@name; a
	 * document without "pipeline" is a find command. */
	rc = fs_pipeline_check(text, len, &perr);
	if (rc != DFS_ENOENT) {
		if (rc && err && !err->code)
			*err = perr;
		return rc;
	}
	bson_init(&cmd);
	rc = store_codec_parse_doc(text, len, &cmd, err);
	if (rc == DFS_EINCOMPLETE)
		rc = DFS_EINVAL;
	if (!rc)
		rc = fs_query_from_command(&cmd, q, err);
	if (!rc)
		rc = fs_query_validate(q, err);
	bson_destroy(&cmd);
	return rc;
}

/* Loads saved query q->saved of coll onto q. */
static int saved_load(struct store_db *db, int64_t coll, struct fs_query *q, struct dfs_err *err)
{
	struct store_entry e;
	struct store_txn *t;
	struct dfs_buf text;
	char full[300];
	int rc;

	snprintf(full, sizeof(full), FS_SAVED_PREFIX "%s", q->saved);
	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	dfs_buf_init(&text);
	rc = store_entry_lookup(t, coll, full, &e, NULL);
	if (rc == DFS_ENOENT)
		rc = dfs_err_set(err, DFS_EINVAL, "no saved query '%s' (write it to .queries/%s)",
				 q->saved, q->saved);
	else if (!rc)
		rc = store_entry_read(t, e.id, &text, err);
	store_txn_abort(t);
	if (!rc) {
		bson_t p = BSON_INITIALIZER;

		if (fs_pipeline_from_text(text.data ? text.data : "", text.len, &p, NULL) == 0)
			rc = dfs_err_set(err, DFS_EINVAL,
					 "'.queries/%s' is a pipeline; read it as aggregate/@%s",
					 q->saved, q->saved);
		bson_destroy(&p);
	}
	if (!rc) {
		rc = fs_query_parse_saved(text.data ? text.data : "", text.len, q, err);
		if (rc)
			dfs_err_prefix(err, "saved query '%s': ", q->saved);
	}
	dfs_buf_release(&text);
	return rc;
}

int fs_query_parse_path(struct store_db *db, int64_t coll, const char *component,
			struct fs_query *q, struct dfs_err *err)
{
	int rc = fs_query_parse(component, q, err);

	if (rc || !q->saved[0])
		return rc;
	/* The saved command first, then the path's own options over it. */
	fs_query_release(q);
	fs_query_init(q);
	fs_query_parse(component, q, NULL);
	if ((rc = saved_load(db, coll, q, err)))
		return rc;
	return fs_query_parse(component, q, err);
}

/* ---- results ----------------------------------------------------------------------- */

void fs_result_init(struct fs_result *r)
{
	memset(r, 0, sizeof(*r));
	dfs_buf_init(&r->mem);
}

void fs_result_release(struct fs_result *r)
{
	dfs_buf_release(&r->mem);
	if (r->spill)
		fclose(r->spill);
	r->spill = NULL;
}

/* Moves what is in memory to the temporary file once it grows too large. */
static int result_flush(struct fs_result *r, bool force, struct dfs_err *err)
{
	size_t max = fs_result_mem ? fs_result_mem : RESULT_MEM_MAX;

	if (!r->spill && r->mem.len < max)
		return 0;
	if (!r->spill) {
		r->spill = tmpfile();
		if (!r->spill)
			return dfs_err_set(err, DFS_EIO,
					   "cannot create a temporary result file: %s",
					   strerror(errno));
	}
	if (r->mem.len && fwrite(r->mem.data, 1, r->mem.len, r->spill) != r->mem.len)
		return dfs_err_set(err, DFS_EIO, "cannot write a temporary result file: %s",
				   strerror(errno));
	dfs_buf_reset(&r->mem);
	if (force && fflush(r->spill) != 0)
		return dfs_err_set(err, DFS_EIO, "cannot write a temporary result file: %s",
				   strerror(errno));
	return 0;
}

int fs_result_read(struct fs_result *r, char *buf, size_t n, off_t off, size_t *got)
{
	*got = 0;
	if (off < 0 || (size_t)off >= r->size)
		return 0;
	if (n > r->size - (size_t)off)
		n = r->size - (size_t)off;
	if (!r->spill) {
		memcpy(buf, r->mem.data + off, n);
		*got = n;
		return 0;
	}
	{
		ssize_t k = pread(fileno(r->spill), buf, n, off);

		if (k < 0)
			return errno;
		*got = (size_t)k;
	}
	return 0;
}

/* A number as the shell shows it: int32 when it fits. */
static void append_count(bson_t *b, const char *key, int64_t v)
{
	if (v <= INT32_MAX)
		BSON_APPEND_INT32(b, key, (int32_t)v);
	else
		BSON_APPEND_INT64(b, key, v);
}

/* The thread's operation (curop.c) is this find: MongoDB's find, count or distinct
 * command, and its maxTimeMS. */
static void describe_op(struct store_txn *t, int64_t coll, const struct fs_query *q)
{
	struct dfs_err err = {0};
	struct store_coll c;
	struct fs_curop *op = fs_curop_current();
	bson_t cmd;

	if (!op)
		return;
	if (store_coll_by_id(t, coll, &c, &err))
		c.name[0] = '\0';
	bson_init(&cmd);
	if (q->count) {
		BSON_APPEND_UTF8(&cmd, "count", c.name);
		BSON_APPEND_DOCUMENT(&cmd, "query", &q->filter);
	} else if (q->distinct) {
		BSON_APPEND_UTF8(&cmd, "distinct", c.name);
		BSON_APPEND_UTF8(&cmd, "key", q->distinct);
		BSON_APPEND_DOCUMENT(&cmd, "query", &q->filter);
	} else {
		BSON_APPEND_UTF8(&cmd, "find", c.name);
		BSON_APPEND_DOCUMENT(&cmd, "filter", &q->filter);
		if (q->has_sort)
			BSON_APPEND_DOCUMENT(&cmd, "sort", &q->sort);
		if (q->has_projection)
			BSON_APPEND_DOCUMENT(&cmd, "projection", &q->projection);
	}
	if (q->skip)
		append_count(&cmd, "skip", q->skip);
	if (q->limit)
		append_count(&cmd, "limit", q->limit);
	if (q->max_time_ms)
		append_count(&cmd, "maxTimeMS", q->max_time_ms);
	BSON_APPEND_UTF8(&cmd, "$db", store_db_name(store_txn_db(t)));
	fs_curop_describe(&cmd, q->max_time_ms);
	bson_destroy(&cmd);
}

int fs_query_run(struct store_db *db, int64_t coll, const struct fs_query *q, struct fs_result *r,
		 struct dfs_err *err)
{
	struct query_find_opts o = {
		.filter = &q->filter,
		.sort = q->has_sort && !q->count && !q->distinct ? &q->sort : NULL,
		.projection =
			q->has_projection && !q->count && !q->distinct ? &q->projection : NULL,
		.skip = q->skip,
		.limit = q->limit,
		.sort_mem = fs_sort_mem,
		.hint = q->has_hint ? &q->hint : NULL,
		.hint_name = q->hint_name,
		.count_only = q->count,
	};
	struct query_distinct ds;
	struct fs_render *rd = NULL;
	struct query_cursor *c = NULL;
	struct store_txn *t;
	const bson_t *doc;
	int64_t n = 0;
	int rc;

	query_distinct_init(&ds);
	if (q->verbosity >= 0)
		return dfs_err_set(err, DFS_EINVAL, "verbosity is an option of explain/ paths");
	if (q->format == FSQ_TREE)
		return dfs_err_set(err, DFS_EINVAL, "format=tree is for explain/ paths");
	if (q->tailable)
		return dfs_err_set(err, DFS_EINVAL, "tailable=1 is read through fs_tail_open");
	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	describe_op(t, coll, q);
	if ((rc = query_find_open(t, coll, &o, &c, err)))
		goto done;
	{
		struct query_summary sum;

		query_cursor_summary(c, &sum);
		fs_curop_plan(&sum);
	}
	if (q->count) {
		if ((rc = query_cursor_count(c, &n, err)))
			goto done;
		dfs_buf_printf(&r->mem, "%lld\n", (long long)n);
		rc = fs_result_finish(r, err);
		goto done;
	}
	if (!q->distinct && (rc = fs_render_new(r, q->format, &rd, err)))
		goto done;
	while ((rc = query_cursor_next(c, &doc, err)) == 0) {
		if (q->distinct) {
			query_distinct_add(&ds, doc, q->distinct);
			continue;
		}
		if ((rc = fs_render_put_fetched(rd, c, doc, err)))
			goto done;
		n++;
	}
	if (rc != DFS_ENOENT) {
		struct dfs_err rerr = {0};

		if (rd && fs_render_drain(rd, &rerr)) { /* render.c note 4 */
			rc = rerr.code;
			if (err)
				*err = rerr;
		}
		goto done;
	}
	rc = 0;
	if (q->distinct) {
		query_distinct_finish(&ds);
		for (size_t i = 0; i < ds.n; i++) {
			if ((rc = store_codec_render_value(&ds.vals[i], &r->mem, err)))
				goto done;
			dfs_buf_putc(&r->mem, '\n');
			n++;
		}
	}
	rc = rd ? fs_render_finish(rd, err) : fs_result_finish(r, err);
done:
	if (c) {
		struct query_summary sum;

		query_cursor_summary(c, &sum);
		fs_curop_note(&sum, q->count ? 0 : n); /* a count returns no documents */
	}
	fs_render_free(rd);
	query_distinct_release(&ds);
	query_cursor_free(c);
	store_txn_abort(t);
	return rc;
}

int fs_query_validate(const struct fs_query *q, struct dfs_err *err)
{
	struct query_expr *e = NULL;
	struct query_proj *p = NULL;
	struct query_sort *s = NULL;
	int rc;

	rc = query_filter_parse(&q->filter, &e, err);
	if (!rc && q->has_projection)
		rc = query_proj_parse(&q->projection, &p, err);
	if (!rc && q->has_sort)
		rc = query_sort_parse(&q->sort, &s, err);
	query_expr_free(e);
	query_proj_free(p);
	query_sort_free(s);
	return rc;
}

int fs_coll_ns(struct store_txn *t, int64_t coll, char *out, size_t cap, struct dfs_err *err)
{
	struct store_coll c;
	int rc;

	if ((rc = store_coll_by_id(t, coll, &c, err)))
		return rc;
	snprintf(out, cap, "%s.%s", store_db_name(store_txn_db(t)), c.name);
	return 0;
}

int fs_explain_run(struct store_db *db, int64_t coll, const struct fs_query *q, struct fs_result *r,
		   struct dfs_err *err)
{
	struct query_find_opts o = {
		.filter = &q->filter,
		.sort = q->has_sort && !q->count ? &q->sort : NULL,
		.projection = q->has_projection && !q->count ? &q->projection : NULL,
		.skip = q->skip,
		.limit = q->limit,
		.sort_mem = fs_sort_mem,
		.hint = q->has_hint ? &q->hint : NULL,
		.hint_name = q->hint_name,
		.count_only = q->count,
	};
	char ns[2 * DFS_MAX_NS_NAME + 2];
	struct store_txn *t;
	bson_t out;
	int rc;

	if (q->distinct)
		return dfs_err_set(err, DFS_EINVAL,
				   "explain/ explains finds and counts: distinct is not supported");
	if (q->tailable)
		return dfs_err_set(err, DFS_EINVAL,
				   "explain/ explains finds and counts: tailable is an option of "
				   "query/ paths");
	if (q->format == FSQ_JSONL || q->format == FSQ_IDS)
		return dfs_err_set(err, DFS_EINVAL,
				   "format of an explain must be pretty, json or tree, not %s",
				   q->format == FSQ_JSONL ? "jsonl" : "ids");
	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	describe_op(t, coll, q); /* an explain runs the find, under its maxTimeMS */
	bson_init(&out);
	rc = fs_coll_ns(t, coll, ns, sizeof(ns), err);
	if (!rc)
		rc = query_find_explain(t, coll, ns, &o,
					q->verbosity >= 0 ? q->verbosity : QUERY_VERB_PLANNER, &out,
					err);
	store_txn_abort(t);
	if (!rc && q->format == FSQ_TREE) {
		rc = query_explain_tree(&out, &r->mem, err);
	} else if (!rc && q->format == FSQ_JSON) {
		rc = store_codec_render(&out, STORE_RENDER_COMPACT, &r->mem, err);
		dfs_buf_putc(&r->mem, '\n');
	} else if (!rc) {
		rc = store_codec_render(&out, STORE_RENDER_PRETTY, &r->mem, err);
	}
	if (!rc)
		r->size = r->mem.len;
	bson_destroy(&out);
	return rc;
}

int fs_result_spill(struct fs_result *r, bool force, struct dfs_err *err)
{
	return result_flush(r, force, err);
}

int fs_result_finish(struct fs_result *r, struct dfs_err *err)
{
	int rc = 0;

	if (r->spill)
		rc = result_flush(r, true, err);
	if (!rc)
		r->size = r->spill ? (size_t)ftello(r->spill) : r->mem.len;
	return rc;
}
