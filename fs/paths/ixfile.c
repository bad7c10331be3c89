/*
 * ixfile.c - index files: what `.indexes/<name>` shows (the stored spec plus statistics) and
 * what writing one does (the spec checked against the file name, the index created and
 * built in one write transaction, its progress logged). `docfs index` uses the same
 * functions. It does not build or scan indexes itself (store/index.c does) and does not
 * talk to FUSE.
 */
#include "fs_int.h"

#include <stdlib.h>
#include <string.h>

#define PROGRESS_EVERY 100000 /* documents between two progress lines of a build */

bool fs_index_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 127 || strcmp(name, "*") == 0)
		return false;
	if (name[0] == '.' || name[0] == '#' || name[n - 1] == '~' || name[n - 1] == '#')
		return false;
	return strspn(name, "0123456789") != n;
}

/* Appends a count as int32 when it fits (it renders as a plain number), else int64. */
static void append_count(bson_t *doc, const char *key, int64_t v)
{
	if (v >= INT32_MIN && v <= INT32_MAX)
		bson_append_int32(doc, key, -1, (int32_t)v);
	else
		bson_append_int64(doc, key, -1, v);
}

int fs_index_render(struct store_txn *t, int64_t coll, const char *name, bool pretty,
		    struct dfs_buf *out, struct dfs_err *err)
{
	struct store_index_stats st;
	struct store_index ix;
	bson_t doc, stats;
	int rc;

	memset(&ix, 0, sizeof(ix));
	if ((rc = store_index_get(t, coll, name, &ix, err)))
		return rc;
	memset(&st, 0, sizeof(st));
	if ((rc = store_index_stats(t, coll, name, &st, err))) {
		store_index_release(&ix);
		return rc;
	}
	bson_init(&doc);
	if (ix.spec)
		bson_concat(&doc, ix.spec);
	bson_append_document_begin(&doc, "stats", -1, &stats);
	append_count(&stats, "entries", st.entries);
	append_count(&stats, "bytes", st.bytes);
	bson_append_bool(&stats, "multikey", -1, st.multikey);
	append_count(&stats, "buildMillis", st.build_ms);
	bson_append_date_time(&stats, "created", -1, st.created);
	bson_append_document_end(&doc, &stats);
	rc = store_codec_render(&doc, pretty ? STORE_RENDER_PRETTY : STORE_RENDER_COMPACT, out,
				err);
	bson_destroy(&doc);
	store_index_release(&ix);
	return rc;
}

struct build_progress {
	const char *name;    /* Borrowed: the index */
	const char *ns;	     /* Borrowed: "<db>.<coll>" */
	int64_t next;	     /* documents at which the next line is due */
	int64_t lines;	     /* progress lines written */
	struct fs_curop *op; /* the build as currentOp shows it */
};

static void build_progress(void *ctx, int64_t done, int64_t total)
{
	struct build_progress *p = ctx;

	atomic_store(&p->op->total, total > 0 ? total : 1);
	atomic_store(&p->op->done, done);
	if (done < p->next)
		return;
	p->next = (done / PROGRESS_EVERY + 1) * PROGRESS_EVERY;
	p->lines++;
	fs_log_info("index '%s' of %s: %lld of %lld documents indexed", p->name, p->ns,
		    (long long)done, (long long)total);
}

int fs_index_spec_parse(const char *text, size_t len, bson_t *out, struct dfs_err *err)
{
	int rc = store_codec_parse_doc(text, len, out, err);

	return rc == DFS_EINCOMPLETE ? DFS_EINVAL : rc;
}

/* Copies the spec in into spec, checking its name against name. */
static int spec_check(const char *name, const bson_t *in, bson_t *spec, struct dfs_err *err)
{
	bool named = false;
	bson_iter_t it;
	int rc = 0;

	if (!bson_iter_init(&it, in))
		return dfs_err_set(err, DFS_EINVAL, "the spec is not a document");
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		/* What reading an index file adds: writing the file back creates the same
		 * index. */
		if (!strcmp(k, "stats"))
			continue;
		if (!strcmp(k, "name")) {
			const char *given;

			if (!BSON_ITER_HOLDS_UTF8(&it))
				return dfs_err_set(err, DFS_EINVAL,
						   "the index name must be a string");
			given = bson_iter_utf8(&it, NULL);
			if (name && strcmp(given, name) != 0)
				return dfs_err_set(err, DFS_EINVAL,
						   "the spec names the index '%s' but the file is "
						   "'%s' (an index file is named after its index)",
						   given, name);
			named = true;
		}
		bson_append_iter(spec, k, -1, &it);
	}
	if (!named && name)
		bson_append_utf8(spec, "name", -1, name, -1);
	return rc;
}

int fs_index_spec_check(const char *name, const bson_t *in, struct dfs_err *err)
{
	bson_t spec = BSON_INITIALIZER;
	int rc = spec_check(name, in, &spec, err);

	if (!rc)
		rc = store_index_spec_check(&spec, err);
	bson_destroy(&spec);
	return rc;
}

int fs_index_create(struct store_db *db, int64_t coll, const char *name, const bson_t *in,
		    char *name_out, size_t name_cap, struct dfs_err *err)
{
	struct fs_curop op;
	struct build_progress p = {name, NULL, PROGRESS_EVERY, 0, &op};
	char ns[2 * DFS_MAX_NS_NAME + 2], used[128];
	struct store_txn *t = NULL;
	bson_t spec;
	int rc;

	bson_init(&spec);
	/* currentOp lists the build (with its progress) and killOp can stop it */
	fs_curop_begin(&op, FS_OP_COMMAND, db, coll, 0);
	if ((rc = spec_check(name, in, &spec, err)))
		goto done;
	if (!name) {
		bson_iter_t it;

		p.name = bson_iter_init_find(&it, &spec, "name") && BSON_ITER_HOLDS_UTF8(&it)
				 ? bson_iter_utf8(&it, NULL)
				 : "(default name)";
	}
	if ((rc = store_txn_begin(db, true, &t, err)))
		goto done;
	if ((rc = fs_coll_ns(t, coll, ns, sizeof(ns), err)))
		goto done;
	p.ns = ns;
	{
		struct store_coll c;
		bson_t cmd, arr;

		bson_init(&cmd);
		if (!store_coll_by_id(t, coll, &c, NULL))
			BSON_APPEND_UTF8(&cmd, "createIndexes", c.name);
		BSON_APPEND_ARRAY_BEGIN(&cmd, "indexes", &arr);
		BSON_APPEND_DOCUMENT(&arr, "0", &spec);
		bson_append_array_end(&cmd, &arr);
		BSON_APPEND_UTF8(&cmd, "$db", store_db_name(db));
		fs_curop_describe(&cmd, 0);
		bson_destroy(&cmd);
	}
	used[0] = '\0';
	rc = store_index_create(t, coll, &spec, used, sizeof(used), build_progress, &p, err);
	if (!rc) {
		rc = store_txn_commit(t, err);
		t = NULL;
	}
	if (!rc && p.lines)
		fs_log_info("index '%s' of %s: built", used, ns);
	if (!rc && name_out)
		snprintf(name_out, name_cap, "%s", used);
done:
	store_txn_abort(t);
	fs_curop_end(&op, rc);
	bson_destroy(&spec);
	return rc;
}

int fs_index_drop(struct store_db *db, int64_t coll, const char *name, struct dfs_err *err)
{
	struct store_txn *t;
	int rc;

	if ((rc = store_txn_begin(db, true, &t, err)))
		return rc;
	if ((rc = store_index_drop(t, coll, name, err))) {
		store_txn_abort(t);
		return rc;
	}
	return store_txn_commit(t, err);
}
