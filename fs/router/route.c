/*
 * route.c - what the router mount does with a collection: where it lives (its primary
 * shard, or its chunk map when sharded), and the operations that need more than one shard:
 * finds, counts and distincts merged across the shards a filter targets, the sharded
 * explain, inserts and document writes sent to the shard owning each shard key. Every
 * request to a shard is an ordinary file operation on the shard's mounted directory (the
 * shard's own docfs answers it); nothing here speaks FUSE (mount.c does).
 *
 * Design notes
 * 1. An unsharded collection lives on its database's primary shard (config.databases), or
 *    on the first shard when the database has no entry; every path in it is forwarded there
 *    unchanged. A sharded collection's documents are on the shards of their chunks.
 * 2. A find on one targeted shard is forwarded as written (the shard applies skip, limit,
 *    projection and format). On several, each shard is asked for the filter, sort and hint
 *    with limit = skip + limit, no skip and no projection; the router merges the sorted
 *    streams (query_shard_merge), applies skip and limit to the merged sequence and then
 *    the projection, and renders the format. The shard's request is built from the raw
 *    text of the user's path (the options it keeps are copied as written), so it is no
 *    longer than the user's.
 * 3. count sums the shards' counts of the filter, then applies skip and limit; distinct
 *    unites the shards' values and sorts them in MongoDB's order.
 * 4. Inserts are checked whole before anything is written: a document without the shard
 *    key refuses the batch. Then each shard gets its documents in one write of its .insert
 *    file; a shard failing after another committed leaves the other's documents written,
 *    and the error says which shards took theirs (MongoDB's unordered insert also reports
 *    a partial batch).
 * 5. A shard that cannot be reached (its directory errors, or is not a docfs mount any
 *    more) fails the operations that need it with EIO and "shard 'X' (<host>) is
 *    unreachable: ..."; operations targeting only other shards go on.
 * 7. aggregate/ on several shards: the leading per-document stages ($match, $project,
 *    $addFields, $set, $unset, $unwind, $replaceRoot) run on the shards, then a $group
 *    whose accumulators decompose ($sum, $count, $min, $max, $avg as a sum and a count of
 *    the numbers, $push as arrays concatenated after) is split into a shard part and a
 *    merge part, a $count becomes a sum, a $sort runs on both sides (with the $limit that
 *    follows it); everything after runs
 *    in the router over the shards' results, put into a scratch collection of the router's
 *    own store, with the same engine a mount uses. Each shard's part is saved in its
 *    .queries/ for the read (a pipeline may be longer than a file name) and removed after.
 *    While a chunk of the collection is being migrated nothing is pushed down, so the
 *    router can keep each document from its owner only.
 * 8. .bulk: each operation is routed by the same rules as update/ and delete/ (an
 *    insertOne to the owner of its document's key, with the _id the router gives it) and
 *    sent as a one-operation .bulk to its shards, the results summed into one
 *    BulkWriteResult with MongoDB's indexes; ordered stops at the first error, as a plain
 *    mount's. atomic=true cannot span shards and is refused. Consecutive insertOnes go
 *    together, one .bulk per shard (as mongos splits a batch): ordered, a run ends where
 *    the next document's shard differs, so the shards see them in the request's order and
 *    nothing after a failed insert is sent; unordered, each shard gets all of its own.
 * 6. update/ and delete/ go to the shards their filter targets, the request written to
 *    each shard's same path and the results summed (matchedCount, modifiedCount,
 *    deletedCount, ...). As MongoDB requires: a single update or delete (not multi, or
 *    findAndModify) must target one shard or name an _id (then the shards are tried in turn
 *    until one has it), an upsert and a replacement must target the shard owning their
 *    shard key, and an update may not touch a shard key field (ImmutableField; even one
 *    that would set the same value). Several shards are not one transaction: a shard that
 *    fails after another applied the write leaves the other's part applied.
 */
#include "router.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_int.h"

void router_ns_release(struct router_ns *ns)
{
	if (ns->sharded)
		query_chunk_map_release(&ns->map);
	free(ns->shards);
	memset(ns, 0, sizeof(*ns));
}

const struct router_shard *router_ns_shard(const struct router_ns *ns, const char *name)
{
	for (int i = 0; i < ns->nshards; i++)
		if (!strcmp(ns->shards[i].name, name))
			return &ns->shards[i];
	return NULL;
}

int router_ns_load(struct router_cfg *c, const char *db, const char *coll, struct router_ns *out,
		   struct dfs_err *err)
{
	char ns[2 * DFS_MAX_NS_NAME + 2];
	bson_t **docs = NULL, filter, dbdoc;
	int n = 0, rc;

	memset(out, 0, sizeof(*out));
	if ((rc = router_cfg_list(c, "shards", NULL, NULL, &docs, &n, err)))
		return rc;
	if (!n) {
		router_docs_free(docs, n);
		return dfs_err_set(err, DFS_EIO,
				   "the cluster has no shards: add one with {addShard: <path>}");
	}
	out->shards = calloc((size_t)n, sizeof(*out->shards));
	if (!out->shards)
		abort();
	for (int i = 0; i < n; i++) {
		bson_iter_t it;

		if (bson_iter_init_find(&it, docs[i], "_id") && BSON_ITER_HOLDS_UTF8(&it))
			snprintf(out->shards[out->nshards].name, sizeof(out->shards[0].name), "%s",
				 bson_iter_utf8(&it, NULL));
		if (bson_iter_init_find(&it, docs[i], "host") && BSON_ITER_HOLDS_UTF8(&it))
			snprintf(out->shards[out->nshards].host, sizeof(out->shards[0].host), "%s",
				 bson_iter_utf8(&it, NULL));
		out->nshards++;
	}
	router_docs_free(docs, n);
	snprintf(out->primary, sizeof(out->primary), "%s", out->shards[0].name);
	if (!db)
		return 0;
	bson_init(&filter);
	bson_init(&dbdoc);
	BSON_APPEND_UTF8(&filter, "_id", db);
	if (!router_cfg_get(c, "databases", &filter, &dbdoc, NULL)) {
		bson_iter_t it;

		if (bson_iter_init_find(&it, &dbdoc, "primary") && BSON_ITER_HOLDS_UTF8(&it) &&
		    router_ns_shard(out, bson_iter_utf8(&it, NULL)))
			snprintf(out->primary, sizeof(out->primary), "%s",
				 bson_iter_utf8(&it, NULL));
	}
	bson_destroy(&filter);
	bson_destroy(&dbdoc);
	if (!coll)
		return 0;
	snprintf(ns, sizeof(ns), "%s.%s", db, coll);
	rc = router_cfg_chunks_load(c, ns, &out->map, err);
	if (rc == DFS_ENOENT) {
		dfs_err_clear(err);
		return 0;
	}
	if (rc) {
		router_ns_release(out);
		return rc;
	}
	out->sharded = true;
	return 0;
}

/* ---- talking to a shard through its directory ---------------------------------------- */

void router_shard_path(const struct router_shard *s, const char *rel, char *out, size_t cap)
{
	snprintf(out, cap, "%s%s%s", s->host, rel[0] == '/' ? "" : "/", rel);
}

int router_shard_ok(const struct router_shard *s, struct dfs_err *err)
{
	char p[ROUTER_PATH_MAX];
	struct stat st;

	router_shard_path(s, ".docfs", p, sizeof(p));
	if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	return dfs_err_set(err, DFS_EIO, "shard '%s' (%s) is unreachable: %s", s->name, s->host,
			   errno == ENOENT ? "no docfs mount there" : strerror(errno));
}

/* The last line of the shard's /.docfs/errors (what it said about a failed request). */
void router_shard_last_error(const struct router_shard *s, char *out, size_t cap)
{
	char p[ROUTER_PATH_MAX];
	struct dfs_buf b;
	char *nl;

	out[0] = '\0';
	router_shard_path(s, ".docfs/errors", p, sizeof(p));
	dfs_buf_init(&b);
	if (!router_read_file(p, &b, NULL) && b.len) {
		while (b.len && b.data[b.len - 1] == '\n')
			b.data[--b.len] = '\0';
		nl = strrchr(b.data, '\n');
		snprintf(out, cap, "%s", nl ? nl + 1 : b.data);
	}
	dfs_buf_release(&b);
}

int router_shard_fail(const struct router_shard *s, const char *what, int e, struct dfs_err *err)
{
	char last[600];
	int code = e == ENOENT	       ? DFS_ENOENT
		   : e == EINVAL       ? DFS_EINVAL
		   : e == EEXIST       ? DFS_EEXIST
		   : e == EPERM	       ? DFS_EPERM
		   : e == ENOTEMPTY    ? DFS_ENOTEMPTY
		   : e == ENAMETOOLONG ? DFS_ENAMETOOLONG
				       : DFS_EIO;

	router_shard_last_error(s, last, sizeof(last));
	/* a network filesystem between (sshfs) turns a shard's refusal into EIO: its own
	 * message is then the shard's last error, when the shard still answers */
	if (e == ENOTCONN || e == ECONNABORTED || e == ENOENT || !last[0] ||
	    (e == EIO && router_shard_ok(s, NULL) != 0))
		return dfs_err_set(err, code, "shard '%s' (%s): %s: %s", s->name, s->host, what,
				   strerror(e));
	/* the shard's own message, without its time stamp */
	return dfs_err_set(err, code, "shard '%s': %s", s->name,
			   strchr(last, ' ') ? strchr(last, ' ') + 1 : last);
}

int router_write_all(int fd, const char *text, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

bson_t *router_doc_field(const bson_t *d, const char *key)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	if (!bson_iter_init_find(&it, d, key) || !BSON_ITER_HOLDS_DOCUMENT(&it))
		return NULL;
	bson_iter_document(&it, &len, &data);
	return bson_new_from_data(data, len);
}

int router_read_file(const char *path, struct dfs_buf *out, struct dfs_err *err)
{
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return dfs_err_set(err, DFS_EIO, "open '%s': %s", path, strerror(errno));
	for (;;) {
		ssize_t n;

		dfs_buf_reserve(out, 1 << 16);
		n = read(fd, out->data + out->len, out->cap - out->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			errno = e;
			return dfs_err_set(err, DFS_EIO, "read '%s': %s", path, strerror(e));
		}
		if (n == 0)
			break;
		out->len += (size_t)n;
		out->data[out->len] = '\0';
	}
	close(fd);
	return 0;
}

/* Reads rel (relative to the shard's root) into out; errors name the shard. */
static int shard_read(const struct router_shard *s, const char *rel, struct dfs_buf *out,
		      struct dfs_err *err)
{
	char p[ROUTER_PATH_MAX];

	router_shard_path(s, rel, p, sizeof(p));
	if (router_read_file(p, out, NULL))
		return router_shard_fail(s, rel, errno, err);
	return 0;
}

int router_shard_write(const struct router_shard *s, const char *rel, int flags, const char *text,
		       size_t len, struct dfs_err *err)
{
	char p[ROUTER_PATH_MAX];
	int fd;

	router_shard_path(s, rel, p, sizeof(p));
	if ((fd = open(p, flags, 0644)) < 0)
		return router_shard_fail(s, rel, errno, err);
	if (router_write_all(fd, text, len)) {
		int e = errno;

		close(fd);
		return router_shard_fail(s, rel, e, err);
	}
	/* the shard commits at the close, but a network filesystem between (sshfs) drops the
	 * close's status: an fsync makes the shard commit now and report it */
	if (fsync(fd) != 0 && errno != EINVAL && errno != ENOSYS) {
		int e = errno;

		close(fd);
		return router_shard_fail(s, rel, e, err);
	}
	if (close(fd) != 0)
		return router_shard_fail(s, rel, errno, err);
	return 0;
}

/* ---- the shards a filter targets --------------------------------------------------- */

/* The shards to ask for filter e (every one of an unsharded collection's is its primary):
 * into out (cap entries), their count; each checked reachable (note 5). */
static int targets(const struct router_ns *ns, const struct query_expr *e,
		   const struct router_shard **out, int cap, int *n, struct dfs_err *err)
{
	*n = 0;
	if (!ns->sharded) {
		out[(*n)++] = router_ns_shard(ns, ns->primary);
	} else {
		bool *chunks = calloc((size_t)ns->map.n + 1, sizeof(bool));
		const char **names = calloc((size_t)cap + 1, sizeof(char *));
		int nc, ns_;

		if (!chunks || !names)
			abort();
		query_shard_target(&ns->map, e, chunks, &nc);
		ns_ = query_shard_target_shards(&ns->map, chunks, names, cap);
		for (int i = 0; i < ns_; i++) {
			const struct router_shard *s = router_ns_shard(ns, names[i]);

			if (s)
				out[(*n)++] = s;
		}
		free(chunks);
		free(names);
	}
	for (int i = 0; i < *n; i++) {
		if (!out[i])
			return dfs_err_set(err, DFS_EIO, "a chunk's shard is not in config.shards");
		if (router_shard_ok(out[i], err))
			return err ? err->code : DFS_EIO;
	}
	return 0;
}

/* ---- the request a shard gets (note 2) --------------------------------------------- */

/* The raw "name=value" options of component (after its '?') that are kept, with extra
 * appended: "<filter>?<kept>&<extra>". */
static void sub_component(const char *component, const char *const *drop, const char *extra,
			  struct dfs_buf *out)
{
	const char *q = strchr(component, '?');
	bool first = true;

	dfs_buf_append(out, component, q ? (size_t)(q - component) : strlen(component));
	for (const char *p = q ? q + 1 : ""; *p;) {
		const char *amp = strchr(p, '&'), *eq;
		size_t n = amp ? (size_t)(amp - p) : strlen(p), kl;
		bool keep = true;

		eq = memchr(p, '=', n);
		kl = eq ? (size_t)(eq - p) : n;
		for (int i = 0; drop[i]; i++)
			if (strlen(drop[i]) == kl && !memcmp(drop[i], p, kl))
				keep = false;
		if (keep && n) {
			dfs_buf_putc(out, first ? '?' : '&');
			dfs_buf_append(out, p, n);
			first = false;
		}
		p += n + (amp ? 1 : 0);
	}
	if (extra && extra[0]) {
		dfs_buf_putc(out, first ? '?' : '&');
		dfs_buf_puts(out, extra);
	}
}

/* "<db>/<coll>/<dir>/<component>" into out; DFS_ENAMETOOLONG past NAME_MAX. */
static int sub_path(const char *db, const char *coll, const char *dir, const struct dfs_buf *comp,
		    char *out, size_t cap, struct dfs_err *err)
{
	if (comp->len > 255)
		return dfs_err_set(err, DFS_ENAMETOOLONG,
				   "the query a shard would get is longer than 255 bytes");
	snprintf(out, cap, "%s/%s/%s/%s", db, coll, dir, comp->data);
	return 0;
}

/* ---- merged finds ------------------------------------------------------------------ */

/* One shard's results, parsed from its JSON Lines. */
struct stream {
	struct dfs_buf text;
	size_t at;
	bson_t doc;
	bool has;
	unsigned line;
	const struct router_ns *ns; /* sharded: keep only the documents this shard owns */
	const char *shard;
};

/* Whether doc is in a chunk of shard (else an orphan: a migration's copy, migrate.c
 * note 2). */
static bool owned(const struct router_ns *ns, const char *shard, const bson_t *doc)
{
	int idx = -1;

	if (!ns || !ns->sharded)
		return true;
	if (query_chunk_map_find_doc(&ns->map, doc, &idx, NULL) || idx < 0)
		return true; /* not placeable: shown rather than hidden */
	return !strcmp(ns->map.c[idx].shard, shard);
}

static int stream_next(void *ctx, const bson_t **doc, struct dfs_err *err)
{
	struct stream *s = ctx;
	size_t used;
	int rc;

	for (;;) {
		if (s->has)
			bson_destroy(&s->doc);
		s->has = false;
		bson_init(&s->doc);
		rc = store_codec_parse_next(s->text.data + s->at, s->text.len - s->at, s->line,
					    &used, &s->doc, err);
		if (rc) {
			bson_destroy(&s->doc);
			return rc;
		}
		s->has = true;
		s->at += used;
		s->line++;
		if (owned(s->ns, s->shard, &s->doc))
			break;
	}
	*doc = &s->doc;
	return 0;
}

static const char *const find_drop[] = {"skip",	 "limit",    "projection", "project",  "format",
					"count", "distinct", "verbosity",  "tailable", NULL};

/* distinct's values, sorted and without repeats */
static int value_cmp(const void *a, const void *b)
{
	return store_value_compare(a, b);
}

static int merged_distinct(const struct fs_query *q, const struct router_shard *const *sh, int n,
			   const char *db, const char *coll, const char *component,
			   struct fs_result *r, struct dfs_err *err)
{
	static const char *const drop[] = {"skip", "limit", "projection", "project", "format",
					   "sort", "count", "tailable",	  NULL};
	bson_value_t *vals = NULL;
	size_t nv = 0, capv = 0;
	int rc = 0;

	(void)q;
	for (int i = 0; !rc && i < n; i++) {
		char rel[ROUTER_PATH_MAX];
		struct dfs_buf comp, text;

		dfs_buf_init(&comp);
		dfs_buf_init(&text);
		sub_component(component, drop, NULL, &comp);
		rc = sub_path(db, coll, "query", &comp, rel, sizeof(rel), err);
		if (!rc)
			rc = shard_read(sh[i], rel, &text, err);
		for (char *p = text.data, *nl; !rc && p && *p; p = nl + 1) {
			bson_t one;
			bson_iter_t it;

			nl = strchr(p, '\n');
			if (!nl)
				break;
			bson_init(&one);
			rc = store_codec_parse_value(p, (size_t)(nl - p), &one, "v", err);
			if (!rc && bson_iter_init_find(&it, &one, "v")) {
				if (nv == capv) {
					capv = capv ? 2 * capv : 64;
					vals = realloc(vals, capv * sizeof(*vals));
					if (!vals)
						abort();
				}
				bson_value_copy(bson_iter_value(&it), &vals[nv++]);
			}
			bson_destroy(&one);
		}
		dfs_buf_release(&comp);
		dfs_buf_release(&text);
	}
	if (!rc) {
		qsort(vals, nv, sizeof(*vals), value_cmp);
		for (size_t i = 0; !rc && i < nv; i++) {
			if (i && !store_value_compare(&vals[i - 1], &vals[i]))
				continue;
			rc = store_codec_render_value(&vals[i], &r->mem, err);
			dfs_buf_putc(&r->mem, '\n');
		}
		r->size = r->mem.len;
	}
	for (size_t i = 0; i < nv; i++)
		bson_value_destroy(&vals[i]);
	free(vals);
	return rc;
}

/* The documents of the stream's text this shard owns. */
static int64_t owned_count(struct stream *s, struct dfs_err *err)
{
	const bson_t *doc;
	int64_t n = 0;

	while (stream_next(s, &doc, err) == 0)
		n++;
	if (s->has)
		bson_destroy(&s->doc);
	s->has = false;
	dfs_err_clear(err);
	return n;
}

static int merged_count(const struct router_ns *ns, const struct fs_query *q,
			const struct router_shard *const *sh, int n, const char *db,
			const char *coll, const char *component, struct fs_result *r,
			struct dfs_err *err)
{
	/* while a chunk is copied its documents are on two shards: count the owned ones */
	bool migrating = router_migration_of(db, coll, NULL, 0);
	int64_t total = 0;
	int rc = 0;

	for (int i = 0; !rc && i < n; i++) {
		struct stream st = {.line = 1, .ns = ns, .shard = sh[i]->name};
		char rel[ROUTER_PATH_MAX];
		struct dfs_buf comp;

		dfs_buf_init(&comp);
		dfs_buf_init(&st.text);
		sub_component(component, find_drop, migrating ? NULL : "count=1", &comp);
		rc = sub_path(db, coll, "query", &comp, rel, sizeof(rel), err);
		if (!rc)
			rc = shard_read(sh[i], rel, &st.text, err);
		if (!rc && migrating)
			total += owned_count(&st, err);
		else if (!rc)
			total += strtoll(st.text.data ? st.text.data : "0", NULL, 10);
		dfs_buf_release(&comp);
		dfs_buf_release(&st.text);
	}
	if (rc)
		return rc;
	total = total > q->skip ? total - q->skip : 0;
	if (q->limit > 0 && total > q->limit)
		total = q->limit;
	dfs_buf_printf(&r->mem, "%lld\n", (long long)total);
	r->size = r->mem.len;
	return 0;
}

static int merged_find(const struct router_ns *ns, const struct fs_query *q,
		       const struct query_expr *e, const struct router_shard *const *sh, int n,
		       const char *db, const char *coll, const char *component, struct fs_result *r,
		       struct dfs_err *err)
{
	struct query_shard_stream *ss = calloc((size_t)n, sizeof(*ss));
	struct stream *st = calloc((size_t)n, sizeof(*st));
	struct query_shard_merge *m = NULL;
	struct query_proj *proj = NULL;
	struct fs_render *rd = NULL;
	char extra[64] = "";
	const bson_t *doc;
	int rc = 0;

	if (!ss || !st)
		abort();
	if (q->limit > 0)
		snprintf(extra, sizeof(extra), "limit=%lld", (long long)(q->limit + q->skip));
	for (int i = 0; !rc && i < n; i++) {
		char rel[ROUTER_PATH_MAX];
		struct dfs_buf comp;

		dfs_buf_init(&comp);
		dfs_buf_init(&st[i].text);
		st[i].line = 1;
		st[i].ns = ns;
		st[i].shard = sh[i]->name;
		sub_component(component, find_drop, extra, &comp);
		rc = sub_path(db, coll, "query", &comp, rel, sizeof(rel), err);
		if (!rc)
			rc = shard_read(sh[i], rel, &st[i].text, err);
		dfs_buf_release(&comp);
		ss[i].next = stream_next;
		ss[i].ctx = &st[i];
	}
	if (!rc && q->has_projection)
		rc = query_proj_parse(&q->projection, &proj, err);
	if (!rc)
		rc = query_shard_merge_open(q->has_sort ? &q->sort : NULL, q->skip, q->limit, ss, n,
					    &m, err);
	if (!rc)
		rc = fs_render_new(r, q->format, &rd, err);
	while (!rc && (rc = query_shard_merge_next(m, &doc, err)) == 0) {
		if (proj) {
			bson_t out;
			int elem = -1;

			query_filter_match(e, doc, &elem);
			bson_init(&out);
			rc = query_proj_apply(proj, doc, elem, &out, err);
			if (!rc)
				rc = fs_render_put(rd, &out, err);
			bson_destroy(&out);
		} else {
			rc = fs_render_put(rd, doc, err);
		}
	}
	if (rc == DFS_ENOENT) {
		dfs_err_clear(err);
		rc = fs_render_finish(rd, err);
	}
	fs_render_free(rd);
	query_shard_merge_free(m);
	query_proj_free(proj);
	for (int i = 0; i < n; i++) {
		if (st[i].has)
			bson_destroy(&st[i].doc);
		dfs_buf_release(&st[i].text);
	}
	free(st);
	free(ss);
	return rc;
}

int router_find(const struct router_ns *ns, const char *db, const char *coll, const char *component,
		struct fs_result *r, struct dfs_err *err)
{
	const struct router_shard *sh[ROUTER_MAX_SHARDS];
	struct query_expr *e = NULL;
	struct fs_query q;
	int n = 0, rc;

	fs_query_init(&q);
	rc = fs_query_parse(component, &q, err);
	if (!rc && q.saved[0])
		rc = dfs_err_set(err, DFS_EINVAL,
				 "saved queries (@name) are not read through the router yet");
	if (!rc && q.tailable)
		rc = dfs_err_set(err, DFS_EINVAL, "tailable reads are not routed yet");
	if (!rc && q.verbosity >= 0)
		rc = dfs_err_set(err, DFS_EINVAL, "verbosity is an option of explain/ paths");
	if (!rc)
		rc = query_filter_parse(&q.filter, &e, err);
	if (!rc)
		rc = targets(ns, e, sh, ROUTER_MAX_SHARDS, &n, err);
	if (!rc && n > 1 && query_filter_has_text(e))
		rc = dfs_err_set(err, DFS_EINVAL,
				 "$text over several shards is not routed yet (its scores would "
				 "need merging)");
	if (rc)
		goto done;
	if (n == 0) {
		/* no chunk can hold a match */
		if (q.count)
			dfs_buf_puts(&r->mem, "0\n");
		else if (q.format == FSQ_JSON)
			dfs_buf_puts(&r->mem, "[]\n");
		r->size = r->mem.len;
	} else if (n == 1) {
		char rel[ROUTER_PATH_MAX];
		struct dfs_buf comp;

		/* one shard answers it all (note 2) */
		dfs_buf_init(&comp);
		dfs_buf_puts(&comp, component);
		rc = sub_path(db, coll, "query", &comp, rel, sizeof(rel), err);
		dfs_buf_release(&comp);
		if (!rc)
			rc = shard_read(sh[0], rel, &r->mem, err);
		r->size = r->mem.len;
	} else if (q.count) {
		rc = merged_count(ns, &q, sh, n, db, coll, component, r, err);
	} else if (q.distinct) {
		rc = merged_distinct(&q, sh, n, db, coll, component, r, err);
	} else {
		rc = merged_find(ns, &q, e, sh, n, db, coll, component, r, err);
	}
done:
	query_expr_free(e);
	fs_query_release(&q);
	return rc;
}

/* ---- explain: MongoDB's sharded shape ---------------------------------------------- */

/* Sums the int64 field key of doc (sub-document path) into *sum. */
static void add_num(const bson_t *doc, const char *path, int64_t *sum)
{
	bson_iter_t it, f;

	if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &f) &&
	    BSON_ITER_HOLDS_NUMBER(&f))
		*sum += bson_iter_as_int64(&f);
}

/* A count as MongoDB's explain shows it: an int32 while it fits. */
static void put_count(bson_t *out, const char *key, int64_t v)
{
	if (v >= INT32_MIN && v <= INT32_MAX)
		BSON_APPEND_INT32(out, key, (int32_t)v);
	else
		BSON_APPEND_INT64(out, key, v);
}

static void append_fields(bson_t *out, const bson_t *from)
{
	bson_iter_t it;

	if (bson_iter_init(&it, from))
		while (bson_iter_next(&it))
			bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
}

/* Appends element i of arr: the shard's name, then the fields of its explain's section
 * (queryPlanner or executionStats); connection adds its host, success executionSuccess. */
static void shard_entry(bson_t *arr, int i, const struct router_shard *s, const bson_t *ex,
			const char *section, bool stats)
{
	bson_iter_t it;
	bson_t one;
	char key[16];

	snprintf(key, sizeof(key), "%d", i);
	BSON_APPEND_DOCUMENT_BEGIN(arr, key, &one);
	BSON_APPEND_UTF8(&one, "shardName", s->name);
	if (stats)
		BSON_APPEND_BOOL(&one, "executionSuccess", true);
	else
		BSON_APPEND_UTF8(&one, "connectionString", s->host);
	if (bson_iter_init_find(&it, ex, section) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		const uint8_t *d;
		uint32_t l;
		bson_t sub;

		bson_iter_document(&it, &l, &d);
		if (bson_init_static(&sub, d, l))
			append_fields(&one, &sub);
	}
	bson_append_document_end(arr, &one);
}

int router_explain(const struct router_ns *ns, const char *db, const char *coll,
		   const char *component, struct fs_result *r, struct dfs_err *err)
{
	static const char *const drop_one[] = {"format", NULL};
	static const char *const drop_many[] = {"skip", "limit", "format", NULL};
	const struct router_shard *sh[ROUTER_MAX_SHARDS];
	bson_t *ex = NULL;
	struct query_expr *e = NULL;
	struct fs_query q;
	char extra[96];
	int n = 0, rc;

	fs_query_init(&q);
	rc = fs_query_parse(component, &q, err);
	if (!rc && q.saved[0])
		rc = dfs_err_set(err, DFS_EINVAL,
				 "saved queries (@name) are not explained through the router yet");
	if (!rc)
		rc = query_filter_parse(&q.filter, &e, err);
	if (!rc)
		rc = targets(ns, e, sh, ROUTER_MAX_SHARDS, &n, err);
	if (!rc && n == 0)
		rc = dfs_err_set(
			err, DFS_EINVAL,
			"no chunk can hold a match of this filter: no shard to explain on");
	if (rc)
		goto done;
	ex = calloc((size_t)n, sizeof(*ex));
	if (!ex)
		abort();
	if (n > 1 && q.limit > 0)
		snprintf(extra, sizeof(extra), "format=json&limit=%lld",
			 (long long)(q.limit + q.skip));
	else
		snprintf(extra, sizeof(extra), "format=json");
	for (int i = 0; i < n; i++)
		bson_init(&ex[i]);
	for (int i = 0; !rc && i < n; i++) {
		char rel[ROUTER_PATH_MAX];
		struct dfs_buf comp, text;

		dfs_buf_init(&comp);
		dfs_buf_init(&text);
		sub_component(component, n > 1 ? drop_many : drop_one, extra, &comp);
		rc = sub_path(db, coll, "explain", &comp, rel, sizeof(rel), err);
		if (!rc)
			rc = shard_read(sh[i], rel, &text, err);
		if (!rc)
			rc = store_codec_parse_doc(text.data, text.len, &ex[i], err);
		dfs_buf_release(&comp);
		dfs_buf_release(&text);
	}
	if (!rc) {
		const char *stage = n == 1	 ? "SINGLE_SHARD"
				    : q.has_sort ? "SHARD_MERGE_SORT"
						 : "SHARD_MERGE";
		bson_t out, qp, wp, arr, es, stages, earr;
		int64_t ret = 0, keys = 0, docs = 0, ms = 0;
		bool stats = false;

		bson_init(&out);
		BSON_APPEND_DOCUMENT_BEGIN(&out, "queryPlanner", &qp);
		BSON_APPEND_INT32(&qp, "mongosPlannerVersion", 1);
		BSON_APPEND_DOCUMENT_BEGIN(&qp, "winningPlan", &wp);
		BSON_APPEND_UTF8(&wp, "stage", stage);
		BSON_APPEND_ARRAY_BEGIN(&wp, "shards", &arr);
		for (int i = 0; i < n; i++) {
			shard_entry(&arr, i, sh[i], &ex[i], "queryPlanner", false);
			if (bson_has_field(&ex[i], "executionStats"))
				stats = true;
			add_num(&ex[i], "executionStats.nReturned", &ret);
			add_num(&ex[i], "executionStats.totalKeysExamined", &keys);
			add_num(&ex[i], "executionStats.totalDocsExamined", &docs);
			add_num(&ex[i], "executionStats.executionTimeMillis", &ms);
		}
		bson_append_array_end(&wp, &arr);
		bson_append_document_end(&qp, &wp);
		bson_append_document_end(&out, &qp);
		if (stats) {
			if (n > 1 && q.limit > 0 && ret > q.limit)
				ret = q.limit;
			BSON_APPEND_DOCUMENT_BEGIN(&out, "executionStats", &es);
			put_count(&es, "nReturned", ret);
			put_count(&es, "executionTimeMillis", ms);
			put_count(&es, "totalKeysExamined", keys);
			put_count(&es, "totalDocsExamined", docs);
			BSON_APPEND_DOCUMENT_BEGIN(&es, "executionStages", &stages);
			BSON_APPEND_UTF8(&stages, "stage", stage);
			put_count(&stages, "nReturned", ret);
			put_count(&stages, "executionTimeMillis", ms);
			put_count(&stages, "totalKeysExamined", keys);
			put_count(&stages, "totalDocsExamined", docs);
			BSON_APPEND_ARRAY_BEGIN(&stages, "shards", &earr);
			for (int i = 0; i < n; i++)
				shard_entry(&earr, i, sh[i], &ex[i], "executionStats", true);
			bson_append_array_end(&stages, &earr);
			bson_append_document_end(&es, &stages);
			bson_append_document_end(&out, &es);
		}
		BSON_APPEND_DOUBLE(&out, "ok", 1.0);
		rc = store_codec_render(
			&out, q.format == FSQ_JSON ? STORE_RENDER_COMPACT : STORE_RENDER_PRETTY,
			&r->mem, err);
		if (!rc && q.format == FSQ_JSON)
			dfs_buf_putc(&r->mem, '\n');
		r->size = r->mem.len;
		bson_destroy(&out);
	}
done:
	if (ex)
		for (int i = 0; i < n; i++)
			bson_destroy(&ex[i]);
	free(ex);
	query_expr_free(e);
	fs_query_release(&q);
	return rc;
}

/* ---- writes -------------------------------------------------------------------------- */

/* The shard owning doc (its shard key's chunk, or the primary of an unsharded
 * collection), checked reachable. */
static int owner_of(const struct router_ns *ns, const bson_t *doc, const struct router_shard **out,
		    struct dfs_err *err)
{
	int idx = -1, rc;

	if (!ns->sharded) { /* note 1: its primary's */
		if (!(*out = router_ns_shard(ns, ns->primary)))
			return dfs_err_set(err, DFS_EIO, "the primary shard is not in the config");
		return router_shard_ok(*out, err);
	}
	if ((rc = query_chunk_map_find_doc(&ns->map, doc, &idx, err)))
		return rc;
	if (idx < 0 || !(*out = router_ns_shard(ns, ns->map.c[idx].shard)))
		return dfs_err_set(err, DFS_EIO, "no shard owns the chunk of this document");
	return router_shard_ok(*out, err);
}

/* doc with the _id its file name gives when it has none (as the shard will store it). */
static int with_name_id(bson_t *doc, const char *name, struct dfs_err *err)
{
	const char *dot = strrchr(name, '.');
	bson_t with;
	int rc;

	if (bson_has_field(doc, "_id"))
		return 0;
	bson_init(&with);
	if ((rc = store_name_to_id(name, dot ? (size_t)(dot - name) : strlen(name), &with, err))) {
		bson_destroy(&with);
		return rc;
	}
	append_fields(&with, doc);
	bson_destroy(doc);
	bson_steal(doc, &with);
	return 0;
}

int router_insert(const struct router_ns *ns, const char *db, const char *coll, const char *text,
		  size_t len, struct dfs_err *err)
{
	struct dfs_buf *per = calloc((size_t)ns->nshards, sizeof(*per));
	char rel[ROUTER_PATH_MAX], done[512] = "";
	unsigned line = 1;
	size_t at = 0;
	int rc = 0, ndoc = 0;

	if (!per)
		abort();
	for (int i = 0; i < ns->nshards; i++)
		dfs_buf_init(&per[i]);
	/* every document is placed before anything is written (note 4) */
	while (!rc && at < len) {
		const struct router_shard *s = NULL;
		size_t used;
		bson_t doc;

		bson_init(&doc);
		rc = store_codec_parse_next(text + at, len - at, line, &used, &doc, err);
		if (rc == DFS_ENOENT) {
			dfs_err_clear(err);
			bson_destroy(&doc);
			rc = 0;
			break;
		}
		for (size_t i = at; i < at + used && i < len; i++)
			line += text[i] == '\n';
		at += used;
		ndoc++;
		if (!rc && !bson_has_field(&doc, "_id")) {
			bson_t with;
			bson_oid_t oid;

			bson_init(&with);
			bson_oid_init(&oid, NULL);
			BSON_APPEND_OID(&with, "_id", &oid);
			append_fields(&with, &doc);
			bson_destroy(&doc);
			bson_steal(&doc, &with);
		}
		if (!rc && (rc = owner_of(ns, &doc, &s, err)))
			dfs_err_prefix(err, "document %d: ", ndoc);
		if (!rc) {
			struct dfs_buf *b = &per[s - ns->shards];

			rc = store_codec_render(&doc, STORE_RENDER_COMPACT, b, err);
			dfs_buf_putc(b, '\n');
		}
		bson_destroy(&doc);
	}
	snprintf(rel, sizeof(rel), "%s/%s/.insert", db, coll);
	for (int i = 0; !rc && i < ns->nshards; i++) {
		if (!per[i].len)
			continue;
		rc = router_shard_write(&ns->shards[i], rel, O_WRONLY, per[i].data, per[i].len,
					err);
		if (rc && done[0])
			dfs_err_prefix(err, "(the documents for %s were written) ", done);
		else if (!rc)
			snprintf(done + strlen(done), sizeof(done) - strlen(done), "%s%s",
				 done[0] ? ", " : "", ns->shards[i].name);
	}
	for (int i = 0; i < ns->nshards; i++)
		dfs_buf_release(&per[i]);
	free(per);
	return rc;
}

int router_doc_holder(const struct router_ns *ns, const char *db, const char *coll,
		      const char *name, const struct router_shard **out, struct stat *st)
{
	char from[65] = "";

	/* a migration's source holds the current version (migrate.c note 2) */
	router_migration_of(db, coll, from, sizeof(from));
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < ns->nshards; i++) {
			char p[ROUTER_PATH_MAX];

			if ((pass == 0) != !strcmp(ns->shards[i].name, from))
				continue;
			snprintf(p, sizeof(p), "%s/%s/%s/%s", ns->shards[i].host, db, coll, name);
			if (stat(p, st) == 0) {
				*out = &ns->shards[i];
				return 0;
			}
		}
	}
	return DFS_ENOENT;
}

int router_doc_write(const struct router_ns *ns, const char *db, const char *coll, const char *name,
		     const char *text, size_t len, struct dfs_err *err)
{
	const struct router_shard *s = NULL, *was = NULL;
	char rel[ROUTER_PATH_MAX];
	struct stat st;
	bson_t doc;
	int rc;

	bson_init(&doc);
	rc = store_codec_parse_doc(text, len, &doc, err);
	if (!rc)
		rc = with_name_id(&doc, name, err);
	if (!rc)
		rc = owner_of(ns, &doc, &s, err);
	snprintf(rel, sizeof(rel), "%s/%s/%s", db, coll, name);
	if (!rc && !router_doc_holder(ns, db, coll, name, &was, &st)) {
		/* a write over a document: its shard key must stay (MongoDB's ImmutableField) */
		struct dfs_buf old;
		bson_t before;

		dfs_buf_init(&old);
		bson_init(&before);
		rc = shard_read(was, rel, &old, err);
		if (!rc)
			rc = store_codec_parse_doc(old.data, old.len, &before, err);
		if (!rc)
			rc = query_shard_key_check_update(&ns->map.key, &before, &doc, err);
		bson_destroy(&before);
		dfs_buf_release(&old);
	}
	bson_destroy(&doc);
	if (rc)
		return rc;
	return router_shard_write(s, rel, O_WRONLY | O_CREAT | O_TRUNC, text, len, err);
}

/* ---- update/ and delete/ (note 6) ------------------------------------------------------ */

/* Whether the raw option name of component is "true" (or "1"). */
static bool opt_true(const char *component, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = strchr(component, '?'); p && *p; p = strchr(p, '&')) {
		p++;
		if (!strncmp(p, name, nl) && p[nl] == '=' &&
		    (!strncmp(p + nl + 1, "true", 4) || p[nl + 1] == '1'))
			return true;
	}
	return false;
}

static bool opt_given(const char *component, const char *name)
{
	size_t nl = strlen(name);

	for (const char *p = strchr(component, '?'); p && *p; p = strchr(p, '&')) {
		p++;
		if (!strncmp(p, name, nl) && (p[nl] == '=' || p[nl] == '&' || !p[nl]))
			return true;
	}
	return false;
}

/* Whether update path (a dotted field) touches shard key field key. */
static bool touches(const char *path, const char *key)
{
	size_t pl = strlen(path), kl = strlen(key);

	if (pl == kl)
		return !strcmp(path, key);
	if (pl < kl)
		return !strncmp(key, path, pl) && key[pl] == '.';
	return !strncmp(path, key, kl) && path[kl] == '.';
}

/* DFS_EINVAL when the update (operators) would change a shard key field. */
static int key_untouched(const struct router_ns *ns, const bson_t *update, struct dfs_err *err)
{
	bson_iter_t op, f;

	if (!bson_iter_init(&op, update))
		return 0;
	while (bson_iter_next(&op)) {
		if (!BSON_ITER_HOLDS_DOCUMENT(&op) || !bson_iter_recurse(&op, &f))
			continue;
		while (bson_iter_next(&f)) {
			for (int k = 0; k < ns->map.key.n; k++) {
				const char *kp = ns->map.key.f[k].path;

				if (touches(bson_iter_key(&f), kp) ||
				    (!strcmp(bson_iter_key(&op), "$rename") &&
				     BSON_ITER_HOLDS_UTF8(&f) &&
				     touches(bson_iter_utf8(&f, NULL), kp)))
					return dfs_err_set(
						err, DFS_EINVAL,
						"%s of '%s' would change the shard key field '%s' "
						"(ImmutableField): a document's shard key cannot "
						"change",
						bson_iter_key(&op), bson_iter_key(&f), kp);
			}
		}
	}
	return 0;
}

/* Writes text to rel of shard s on one descriptor and reads the result back into out. */
static int shard_request(const struct router_shard *s, const char *rel, const char *text,
			 size_t len, struct dfs_buf *out, struct dfs_err *err)
{
	char p[ROUTER_PATH_MAX];
	int fd;

	router_shard_path(s, rel, p, sizeof(p));
	if ((fd = open(p, O_RDWR)) < 0)
		return router_shard_fail(s, rel, errno, err);
	if (router_write_all(fd, text, len)) {
		int e = errno;

		close(fd);
		return router_shard_fail(s, rel, e, err);
	}
	for (off_t off = 0;;) {
		ssize_t n;

		dfs_buf_reserve(out, 4096);
		n = pread(fd, out->data + out->len, out->cap - out->len - 1, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			return router_shard_fail(s, rel, e, err);
		}
		if (n == 0)
			break;
		out->len += (size_t)n;
		out->data[out->len] = '\0';
		off += n;
	}
	if (close(fd))
		return router_shard_fail(s, rel, errno, err);
	return 0;
}

/* The count key of a result (matchedCount, deletedCount, ...) summed into sum. */
static void sum_results(bson_t *sum, const bson_t *one, bool first)
{
	bson_t out;
	bson_iter_t it, prev;

	if (first) {
		bson_copy_to(one, sum);
		return;
	}
	bson_init(&out);
	if (bson_iter_init(&it, sum)) {
		while (bson_iter_next(&it)) {
			const char *k = bson_iter_key(&it);

			if (BSON_ITER_HOLDS_INT(&it) && bson_iter_init_find(&prev, one, k) &&
			    BSON_ITER_HOLDS_INT(&prev)) {
				int64_t v = bson_iter_as_int64(&it) + bson_iter_as_int64(&prev);

				put_count(&out, k, v);
			} else if (BSON_ITER_HOLDS_NULL(&it) &&
				   bson_iter_init_find(&prev, one, k)) {
				bson_append_value(&out, k, -1, bson_iter_value(&prev));
			} else {
				bson_append_value(&out, k, -1, bson_iter_value(&it));
			}
		}
	}
	bson_destroy(sum);
	bson_steal(sum, &out);
}

/* How many documents a result says it matched or deleted (or 1 for a findAndModify value). */
static int64_t result_hits(const bson_t *res)
{
	static const char *const keys[] = {"matchedCount", "deletedCount", "upsertedCount", NULL};
	bson_iter_t it;
	int64_t n = 0;

	for (int i = 0; keys[i]; i++)
		if (bson_iter_init_find(&it, res, keys[i]) && BSON_ITER_HOLDS_INT(&it))
			n += bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, res, "value") && !BSON_ITER_HOLDS_NULL(&it))
		n++;
	return n;
}

int router_bulk(const struct router_ns *ns, const char *db, const char *coll, const char *rest,
		const char *text, size_t len, struct dfs_buf *out, struct dfs_err *err);

int router_write(const struct router_ns *ns, const char *db, const char *coll, const char *rest,
		 const char *text, size_t len, struct dfs_buf *out, struct dfs_err *err)
{
	int kind = fs_write_kind_of(rest);
	const char *component, *qm;
	const struct router_shard *sh[ROUTER_MAX_SHARDS];
	struct query_expr *e = NULL;
	bson_t filter, body, sum;
	struct dfs_buf fv;
	bool single, by_id, upsert;
	char rel[ROUTER_PATH_MAX];
	int n = 0, rc, hits = 0;

	if (kind == FSW_BULK)
		return router_bulk(ns, db, coll, rest, text, len, out, err);
	if (kind != FSW_UPDATE && kind != FSW_DELETE)
		return dfs_err_set(err, DFS_EINVAL, "'%s' is not a write path", rest);
	/* "update/" and "delete/" are 7 bytes (a ".bulk" rest is shorter) */
	component = rest + 7;
	qm = strchr(component, '?');
	upsert = opt_true(component, "upsert");
	if ((rc = fs_write_validate(rest, err)))
		return rc;
	bson_init(&filter);
	bson_init(&body);
	bson_init(&sum);
	dfs_buf_init(&fv);
	rc = fs_path_unescape(component, qm ? (size_t)(qm - component) : strlen(component), &fv,
			      err);
	if (!rc && fv.len)
		rc = store_codec_parse_doc(fv.data, fv.len, &filter, err);
	if (!rc && kind == FSW_UPDATE)
		rc = store_codec_parse_doc(text, len, &body, err);
	if (!rc)
		rc = query_filter_parse(&filter, &e, err);
	if (!rc)
		rc = targets(ns, e, sh, ROUTER_MAX_SHARDS, &n, err);
	if (rc)
		goto done;
	/* updateOne, deleteOne, findAndModify: one document */
	if (kind == FSW_UPDATE)
		single = !opt_true(component, "multi");
	else {
		bson_iter_t it;

		single = opt_true(component, "justOne");
		if (!single && len && text[0] == '{') {
			bson_t b;

			bson_init(&b);
			if (!store_codec_parse_doc(text, len, &b, NULL) &&
			    bson_iter_init_find(&it, &b, "justOne"))
				single = bson_iter_as_bool(&it);
			bson_destroy(&b);
		}
	}
	if (opt_given(component, "returnDocument"))
		single = true;
	by_id = bson_has_field(&filter, "_id");
	if (ns->sharded && kind == FSW_UPDATE) {
		bson_iter_t it;
		bool ops = bson_iter_init(&it, &body) && bson_iter_next(&it) &&
			   bson_iter_key(&it)[0] == '$';

		if (ops) {
			rc = key_untouched(ns, &body, err);
		} else {
			/* a replacement: its key must stay on the shard the filter names */
			const struct router_shard *to = NULL;
			int idx = -1;

			rc = query_chunk_map_find_doc(&ns->map, &body, &idx, err);
			if (!rc && idx >= 0)
				to = router_ns_shard(ns, ns->map.c[idx].shard);
			if (!rc && (n != 1 || to != sh[0]))
				rc = dfs_err_set(
					err, DFS_EINVAL,
					"a replacement on a sharded collection must target the "
					"shard that owns its shard key: include the shard key "
					"in the filter, and do not change it (ImmutableField)");
		}
		if (!rc && upsert && n != 1)
			rc = dfs_err_set(err, DFS_EINVAL,
					 "an upsert on a sharded collection must include the shard "
					 "key in the filter (it targets %d shards)",
					 n);
	}
	if (!rc && ns->sharded && single && n > 1 && !by_id)
		rc = dfs_err_set(err, DFS_EINVAL,
				 "a single %s (not multi) on a sharded collection must target one "
				 "shard: include the shard key or _id in the filter (it targets %d "
				 "shards)",
				 kind == FSW_UPDATE ? "update" : "delete", n);
	if (rc)
		goto done;
	snprintf(rel, sizeof(rel), "%s/%s/%s", db, coll, rest);
	for (int i = 0; !rc && i < n; i++) {
		struct dfs_buf one;
		bson_t res;

		dfs_buf_init(&one);
		bson_init(&res);
		rc = shard_request(sh[i], rel, text, len, &one, err);
		if (!rc && n == 1) {
			dfs_buf_append(out, one.data, one.len);
		} else if (!rc) {
			rc = store_codec_parse_doc(one.data, one.len, &res, err);
			if (!rc) {
				sum_results(&sum, &res, i == 0);
				hits += result_hits(&res) > 0;
			}
		}
		dfs_buf_release(&one);
		bson_destroy(&res);
		if (single && hits)
			break; /* by _id: the one shard that had it */
	}
	if (!rc && n > 1) {
		rc = store_codec_render(&sum, STORE_RENDER_COMPACT, out, err);
		dfs_buf_putc(out, '\n');
	} else if (!rc && n == 0) {
		dfs_buf_puts(out, kind == FSW_UPDATE
					  ? "{\"acknowledged\": true, \"matchedCount\": 0, "
					    "\"modifiedCount\": 0, \"upsertedCount\": 0, "
					    "\"upsertedId\": null}\n"
					  : "{\"acknowledged\": true, \"deletedCount\": 0}\n");
	}
done:
	query_expr_free(e);
	bson_destroy(&filter);
	bson_destroy(&body);
	bson_destroy(&sum);
	dfs_buf_release(&fv);
	return rc;
}

/* ---- aggregate/ (note 7) -------------------------------------------------------------- */

/* Stages that work on each document alone: they run on the shards. */
static bool per_document(const char *stage)
{
	static const char *const ok[] = {"$match",	 "$project",	 "$addFields",
					 "$set",	 "$unset",	 "$unwind",
					 "$replaceRoot", "$replaceWith", NULL};

	for (int i = 0; ok[i]; i++)
		if (!strcmp(stage, ok[i]))
			return true;
	return false;
}

static void put_str_doc(bson_t *out, const char *key, const char *op, const char *val)
{
	bson_t d;

	BSON_APPEND_DOCUMENT_BEGIN(out, key, &d);
	BSON_APPEND_UTF8(&d, op, val);
	bson_append_document_end(out, &d);
}

/* Splits {$group: spec} into a shard part and merge stages (note 7); false when an
 * accumulator does not decompose ($first, $last, $stdDev..., $addToSet). */
static bool split_group(const bson_t *spec, bson_t *shard, bson_t *merge, int *nmerge)
{
	bson_t sg, mg, fix, fixdoc;
	bson_iter_t it, acc;
	bool need_fix = false;
	char key[16];

	bson_init(&fix);
	bson_init(&sg);
	bson_init(&mg);
	if (!bson_iter_init(&it, spec))
		return false;
	while (bson_iter_next(&it)) {
		const char *f = bson_iter_key(&it);
		char ref[310], s_name[300], c_name[300];
		const char *op;

		snprintf(ref, sizeof(ref), "$%s", f);
		if (!strcmp(f, "_id")) {
			bson_append_value(&sg, "_id", 3, bson_iter_value(&it));
			BSON_APPEND_UTF8(&mg, "_id", "$_id");
			BSON_APPEND_UTF8(&fix, "_id", "$_id");
			continue;
		}
		if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &acc) ||
		    !bson_iter_next(&acc))
			goto no;
		op = bson_iter_key(&acc);
		if (!strcmp(op, "$sum") || !strcmp(op, "$min") || !strcmp(op, "$max")) {
			bson_t a;

			BSON_APPEND_DOCUMENT_BEGIN(&sg, f, &a);
			bson_append_value(&a, op, -1, bson_iter_value(&acc));
			bson_append_document_end(&sg, &a);
			put_str_doc(&mg, f, op, ref);
			BSON_APPEND_UTF8(&fix, f, ref);
		} else if (!strcmp(op, "$count")) {
			bson_t a;

			BSON_APPEND_DOCUMENT_BEGIN(&sg, f, &a);
			BSON_APPEND_INT32(&a, "$sum", 1);
			bson_append_document_end(&sg, &a);
			put_str_doc(&mg, f, "$sum", ref);
			BSON_APPEND_UTF8(&fix, f, ref);
		} else if (!strcmp(op, "$avg")) {
			/* the sum and the count of the numbers, divided after the merge */
			bson_t a, cond, arr, isn;

			snprintf(s_name, sizeof(s_name), "%s__docfs_sum", f);
			snprintf(c_name, sizeof(c_name), "%s__docfs_n", f);
			BSON_APPEND_DOCUMENT_BEGIN(&sg, s_name, &a);
			bson_append_value(&a, "$sum", 4, bson_iter_value(&acc));
			bson_append_document_end(&sg, &a);
			BSON_APPEND_DOCUMENT_BEGIN(&sg, c_name, &a);
			BSON_APPEND_DOCUMENT_BEGIN(&a, "$sum", &cond);
			BSON_APPEND_ARRAY_BEGIN(&cond, "$cond", &arr);
			BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &isn);
			bson_append_value(&isn, "$isNumber", 9, bson_iter_value(&acc));
			bson_append_document_end(&arr, &isn);
			BSON_APPEND_INT32(&arr, "1", 1);
			BSON_APPEND_INT32(&arr, "2", 0);
			bson_append_array_end(&cond, &arr);
			bson_append_document_end(&a, &cond);
			bson_append_document_end(&sg, &a);
			snprintf(ref, sizeof(ref), "$%s", s_name);
			put_str_doc(&mg, s_name, "$sum", ref);
			snprintf(ref, sizeof(ref), "$%s", c_name);
			put_str_doc(&mg, c_name, "$sum", ref);
			{
				/* {$cond: [{$eq: ["$n", 0]}, null, {$divide: ["$s", "$n"]}]} */
				bson_t e, ca, eq, ea, dv, da;
				char sref[310], cref[310];

				snprintf(sref, sizeof(sref), "$%s", s_name);
				snprintf(cref, sizeof(cref), "$%s", c_name);
				BSON_APPEND_DOCUMENT_BEGIN(&fix, f, &e);
				BSON_APPEND_ARRAY_BEGIN(&e, "$cond", &ca);
				BSON_APPEND_DOCUMENT_BEGIN(&ca, "0", &eq);
				BSON_APPEND_ARRAY_BEGIN(&eq, "$eq", &ea);
				BSON_APPEND_UTF8(&ea, "0", cref);
				BSON_APPEND_INT32(&ea, "1", 0);
				bson_append_array_end(&eq, &ea);
				bson_append_document_end(&ca, &eq);
				BSON_APPEND_NULL(&ca, "1");
				BSON_APPEND_DOCUMENT_BEGIN(&ca, "2", &dv);
				BSON_APPEND_ARRAY_BEGIN(&dv, "$divide", &da);
				BSON_APPEND_UTF8(&da, "0", sref);
				BSON_APPEND_UTF8(&da, "1", cref);
				bson_append_array_end(&dv, &da);
				bson_append_document_end(&ca, &dv);
				bson_append_array_end(&e, &ca);
				bson_append_document_end(&fix, &e);
			}
			need_fix = true;
		} else if (!strcmp(op, "$push")) {
			/* arrays of arrays, concatenated after the merge */
			bson_t a, e, r, in, ca;

			BSON_APPEND_DOCUMENT_BEGIN(&sg, f, &a);
			bson_append_value(&a, "$push", 5, bson_iter_value(&acc));
			bson_append_document_end(&sg, &a);
			put_str_doc(&mg, f, "$push", ref);
			BSON_APPEND_DOCUMENT_BEGIN(&fix, f, &e);
			BSON_APPEND_DOCUMENT_BEGIN(&e, "$reduce", &r);
			BSON_APPEND_UTF8(&r, "input", ref);
			BSON_APPEND_ARRAY_BEGIN(&r, "initialValue", &a);
			bson_append_array_end(&r, &a);
			BSON_APPEND_DOCUMENT_BEGIN(&r, "in", &in);
			BSON_APPEND_ARRAY_BEGIN(&in, "$concatArrays", &ca);
			BSON_APPEND_UTF8(&ca, "0", "$$value");
			BSON_APPEND_UTF8(&ca, "1", "$$this");
			bson_append_array_end(&in, &ca);
			bson_append_document_end(&r, &in);
			bson_append_document_end(&e, &r);
			bson_append_document_end(&fix, &e);
			need_fix = true;
		} else {
			goto no;
		}
	}
	BSON_APPEND_DOCUMENT(shard, "$group", &sg);
	snprintf(key, sizeof(key), "%d", (*nmerge)++);
	{
		bson_t st;

		BSON_APPEND_DOCUMENT_BEGIN(merge, key, &st);
		BSON_APPEND_DOCUMENT(&st, "$group", &mg);
		bson_append_document_end(merge, &st);
	}
	if (need_fix) {
		snprintf(key, sizeof(key), "%d", (*nmerge)++);
		bson_init(&fixdoc);
		BSON_APPEND_DOCUMENT(&fixdoc, "$replaceWith", &fix);
		BSON_APPEND_DOCUMENT(merge, key, &fixdoc);
		bson_destroy(&fixdoc);
	}
	bson_destroy(&sg);
	bson_destroy(&mg);
	bson_destroy(&fix);
	return true;
no:
	bson_destroy(&sg);
	bson_destroy(&mg);
	bson_destroy(&fix);
	return false;
}

/* The stages of bson array arr as the JSON array text a saved pipeline holds. */
static void array_text(const bson_t *arr, struct dfs_buf *out)
{
	bson_iter_t it;
	bool first = true;

	dfs_buf_putc(out, '[');
	if (bson_iter_init(&it, arr)) {
		while (bson_iter_next(&it)) {
			const uint8_t *d;
			uint32_t l;
			bson_t st;

			if (!BSON_ITER_HOLDS_DOCUMENT(&it))
				continue;
			bson_iter_document(&it, &l, &d);
			if (!bson_init_static(&st, d, l))
				continue;
			if (!first)
				dfs_buf_puts(out, ", ");
			store_codec_render(&st, STORE_RENDER_COMPACT, out, NULL);
			first = false;
		}
	}
	dfs_buf_putc(out, ']');
}

int router_aggregate(const struct router_ns *ns, const char *db, const char *coll,
		     const char *component, struct store_db *merge_db, struct fs_result *r,
		     struct dfs_err *err)
{
	static const struct store_attrs scratch_attrs = {0600, 0, 0, 0};
	static unsigned long seq;
	const char *qm = strchr(component, '?');
	const struct router_shard *sh[ROUTER_MAX_SHARDS];
	bson_t pipeline, shard_p, merge_p, first_match;
	struct query_pipeline *check = NULL;
	struct query_expr *e = NULL;
	struct dfs_buf pv, text;
	char name[96], tmpcoll[96];
	bson_iter_t it;
	int n = 0, ns_ = 0, nm = 0, rc;
	bool split_done = false;

	bson_init(&pipeline);
	bson_init(&shard_p);
	bson_init(&merge_p);
	bson_init(&first_match);
	dfs_buf_init(&pv);
	dfs_buf_init(&text);
	rc = fs_path_unescape(component, qm ? (size_t)(qm - component) : strlen(component), &pv,
			      err);
	if (!rc && pv.len && pv.data[0] == '@')
		rc = dfs_err_set(err, DFS_EINVAL,
				 "saved pipelines (@name) are not run through the router yet");
	if (!rc)
		rc = fs_pipeline_from_text(pv.data ? pv.data : "", pv.len, &pipeline, err);
	if (!rc)
		rc = query_pipeline_parse(&pipeline, &check, err); /* its errors, as a mount's */
	if (!rc && query_pipeline_writes(check))
		rc = dfs_err_set(err, DFS_EINVAL,
				 "$out and $merge of a sharded collection are not routed yet");
	if (rc)
		goto done;
	/* the split (note 7): per-document stages go to the shards, then a $group split in
	 * two, or a $sort (and its $limit) run on both sides, or $count as a sum */
	if (bson_iter_init(&it, &pipeline)) {
		/* while a chunk is copied the shards hold it twice: everything runs here,
		 * over the documents each shard owns */
		bool shard_side = !router_migration_of(db, coll, NULL, 0), sort_pushed = false;

		while (bson_iter_next(&it)) {
			bson_iter_t st;
			const char *op;
			const uint8_t *d;
			uint32_t l;
			bson_t stage;
			char key[16];

			if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) ||
			    !bson_iter_next(&st))
				continue;
			op = bson_iter_key(&st);
			bson_iter_document(&it, &l, &d);
			bson_init_static(&stage, d, l);
			if (!strcmp(op, "$lookup") || !strcmp(op, "$graphLookup") ||
			    !strcmp(op, "$unionWith")) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "%s in a pipeline of a sharded collection is not "
						 "routed yet",
						 op);
				goto done;
			}
			if (shard_side && per_document(op)) {
				snprintf(key, sizeof(key), "%d", ns_++);
				BSON_APPEND_DOCUMENT(&shard_p, key, &stage);
				if (!strcmp(op, "$match") && ns_ == 1 &&
				    BSON_ITER_HOLDS_DOCUMENT(&st)) {
					bson_iter_document(&st, &l, &d);
					bson_destroy(&first_match);
					bson_init_static(&first_match, d, l);
				}
				continue;
			}
			if (shard_side && !split_done && !strcmp(op, "$group") &&
			    BSON_ITER_HOLDS_DOCUMENT(&st)) {
				bson_t spec, sstage;

				bson_iter_document(&st, &l, &d);
				bson_init_static(&spec, d, l);
				bson_init(&sstage);
				if (split_group(&spec, &sstage, &merge_p, &nm)) {
					snprintf(key, sizeof(key), "%d", ns_++);
					BSON_APPEND_DOCUMENT(&shard_p, key, &sstage);
					split_done = true;
					shard_side = false;
					bson_destroy(&sstage);
					continue;
				}
				bson_destroy(&sstage);
			}
			if (shard_side && !split_done && !strcmp(op, "$count") &&
			    BSON_ITER_HOLDS_UTF8(&st)) {
				/* each shard counts, the router sums: {$group: {_id: null, f:
				 * {$sum:
				 * "$f"}}}, {$project: {_id: 0}} */
				const char *f = bson_iter_utf8(&st, NULL);
				bson_t g, gs, p, ps;
				char ref[300];

				snprintf(key, sizeof(key), "%d", ns_++);
				BSON_APPEND_DOCUMENT(&shard_p, key, &stage);
				snprintf(ref, sizeof(ref), "$%s", f);
				snprintf(key, sizeof(key), "%d", nm++);
				BSON_APPEND_DOCUMENT_BEGIN(&merge_p, key, &g);
				BSON_APPEND_DOCUMENT_BEGIN(&g, "$group", &gs);
				BSON_APPEND_NULL(&gs, "_id");
				put_str_doc(&gs, f, "$sum", ref);
				bson_append_document_end(&g, &gs);
				bson_append_document_end(&merge_p, &g);
				snprintf(key, sizeof(key), "%d", nm++);
				BSON_APPEND_DOCUMENT_BEGIN(&merge_p, key, &p);
				BSON_APPEND_DOCUMENT_BEGIN(&p, "$project", &ps);
				BSON_APPEND_INT32(&ps, "_id", 0);
				bson_append_document_end(&p, &ps);
				bson_append_document_end(&merge_p, &p);
				split_done = true;
				shard_side = false;
				continue;
			}
			if (shard_side && !split_done && !strcmp(op, "$sort")) {
				/* sorted on both sides: the shards' order is only a head start */
				snprintf(key, sizeof(key), "%d", ns_++);
				BSON_APPEND_DOCUMENT(&shard_p, key, &stage);
				sort_pushed = true;
			} else if (sort_pushed && !strcmp(op, "$limit")) {
				/* and each shard needs no more than the limit right after it */
				snprintf(key, sizeof(key), "%d", ns_++);
				BSON_APPEND_DOCUMENT(&shard_p, key, &stage);
				sort_pushed = false;
			} else {
				sort_pushed = false;
			}
			shard_side = false;
			snprintf(key, sizeof(key), "%d", nm++);
			BSON_APPEND_DOCUMENT(&merge_p, key, &stage);
		}
	}
	if ((rc = query_filter_parse(&first_match, &e, err)))
		goto done;
	if (query_filter_has_text(e)) {
		rc = dfs_err_set(err, DFS_EINVAL,
				 "$text in a pipeline of a sharded collection is not routed yet");
		goto done;
	}
	if ((rc = targets(ns, e, sh, ROUTER_MAX_SHARDS, &n, err)))
		goto done;
	if (n == 1) {
		/* one shard answers it all, as written */
		char rel[ROUTER_PATH_MAX];
		struct dfs_buf comp;

		dfs_buf_init(&comp);
		dfs_buf_puts(&comp, component);
		rc = sub_path(db, coll, "aggregate", &comp, rel, sizeof(rel), err);
		dfs_buf_release(&comp);
		if (!rc)
			rc = shard_read(sh[0], rel, &r->mem, err);
		r->size = r->mem.len;
		goto done;
	}
	/* each shard's part, saved on the shard (a pipeline can be longer than a file name)
	 * and read through aggregate/@name; the documents go into a scratch collection of
	 * the router's own store, where the merge part runs */
	snprintf(name, sizeof(name), "docfs-router-%d-%lu", (int)getpid(),
		 __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
	snprintf(tmpcoll, sizeof(tmpcoll), "m%lu", __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
	array_text(&shard_p, &text);
	{
		struct store_txn *t = NULL;
		struct store_coll c;
		int64_t id = 0;

		rc = store_txn_begin(merge_db, true, &t, err);
		if (!rc)
			rc = store_coll_create(t, tmpcoll, 0700, 0, 0, &c, err);
		for (int i = 0; !rc && i < n; i++) {
			char rel[ROUTER_PATH_MAX];
			struct stream st = {.line = 1, .ns = ns, .shard = sh[i]->name};
			const bson_t *doc;

			dfs_buf_init(&st.text);
			snprintf(rel, sizeof(rel), "%s/%s/.queries/%s", db, coll, name);
			rc = router_shard_write(sh[i], rel, O_WRONLY | O_CREAT | O_TRUNC, text.data,
						text.len, err);
			if (!rc) {
				char arel[ROUTER_PATH_MAX], p[ROUTER_PATH_MAX];

				snprintf(arel, sizeof(arel), "%s/%s/aggregate/@%s", db, coll, name);
				rc = shard_read(sh[i], arel, &st.text, err);
				router_shard_path(sh[i], rel, p, sizeof(p));
				unlink(p);
			}
			/* a merged document is {_id: n, d: <document>}: shard results may have no
			 * _id or repeat one; after a $group nothing is a document to filter */
			st.ns = split_done ? NULL : ns;
			while (!rc && stream_next(&st, &doc, NULL) == 0) {
				bson_t w;

				bson_init(&w);
				BSON_APPEND_INT64(&w, "_id", ++id);
				BSON_APPEND_DOCUMENT(&w, "d", doc);
				rc = store_doc_insert(t, c.id, &w, &scratch_attrs, NULL, err);
				bson_destroy(&w);
			}
			if (st.has)
				bson_destroy(&st.doc);
			dfs_buf_release(&st.text);
		}
		if (!rc)
			rc = store_txn_commit(t, err);
		else if (t)
			store_txn_abort(t);
		if (!rc) {
			struct dfs_buf comp;
			bson_t full, first;
			char key[16];
			bson_iter_t mi;
			int k = 0;

			/* the merge part, after unwrapping the documents */
			bson_init(&full);
			bson_init(&first);
			BSON_APPEND_UTF8(&first, "$replaceWith", "$d");
			BSON_APPEND_DOCUMENT(&full, "0", &first);
			bson_destroy(&first);
			if (bson_iter_init(&mi, &merge_p)) {
				while (bson_iter_next(&mi)) {
					snprintf(key, sizeof(key), "%d", ++k);
					bson_append_value(&full, key, -1, bson_iter_value(&mi));
				}
			}
			dfs_buf_init(&comp);
			dfs_buf_reset(&text);
			array_text(&full, &text);
			for (size_t i = 0; i < text.len; i++) {
				if (text.data[i] == '%')
					dfs_buf_puts(&comp, "%25");
				else if (text.data[i] == '?')
					dfs_buf_puts(&comp, "%3F");
				else
					dfs_buf_putc(&comp, text.data[i]);
			}
			if (qm)
				dfs_buf_puts(&comp, qm);
			rc = fs_agg_run(merge_db, c.id, comp.data, r, err);
			dfs_buf_release(&comp);
			bson_destroy(&full);
		}
		if (!store_txn_begin(merge_db, true, &t, NULL)) {
			if (store_coll_find(t, tmpcoll, &c, NULL) || store_coll_drop(t, c.id, NULL))
				store_txn_abort(t);
			else
				store_txn_commit(t, NULL);
		}
	}
done:
	query_pipeline_free(check);
	query_expr_free(e);
	bson_destroy(&pipeline);
	bson_destroy(&shard_p);
	bson_destroy(&merge_p);
	bson_destroy(&first_match);
	dfs_buf_release(&pv);
	dfs_buf_release(&text);
	return rc;
}

/* ---- .bulk (note 8) ------------------------------------------------------------------- */

struct bulk_sum {
	int64_t inserted, matched, modified, deleted, upserted;
	bson_t inserted_ids, upserted_ids, errors;
	int nerrors;
};

static void bulk_err(struct bulk_sum *b, int index, int code, const char *msg, const bson_t *op)
{
	char key[16];
	bson_t d;

	snprintf(key, sizeof(key), "%d", b->nerrors++);
	BSON_APPEND_DOCUMENT_BEGIN(&b->errors, key, &d);
	BSON_APPEND_INT32(&d, "index", index);
	BSON_APPEND_INT32(&d, "code", code);
	BSON_APPEND_UTF8(&d, "errmsg", msg);
	BSON_APPEND_DOCUMENT(&d, "op", op);
	bson_append_document_end(&b->errors, &d);
}

/* The request's index of a shard's operation k (map: the request's index of each
 * operation sent, nmap of them); -1 when k is out of range. */
static int mapped(const int *map, int nmap, int64_t k)
{
	return k >= 0 && k < nmap ? map[k] : -1;
}

/* Adds a shard's BulkWriteResult for the operations it was sent (map[k] is the request's
 * index of the shard's operation k); returns whether it had a write error. */
static bool bulk_add_result(struct bulk_sum *b, const int *map, int nmap, const bson_t *res,
			    int64_t *hits)
{
	static const char *const counts[] = {"insertedCount", "matchedCount", "modifiedCount",
					     "deletedCount", "upsertedCount"};
	int64_t *to[] = {&b->inserted, &b->matched, &b->modified, &b->deleted, &b->upserted};
	bson_t *ids[] = {&b->inserted_ids, &b->upserted_ids};
	const char *ids_name[] = {"insertedIds", "upsertedIds"};
	bson_iter_t it, e, f;
	char key[16];
	bool failed = false;

	for (int i = 0; i < 5; i++)
		if (bson_iter_init_find(&it, res, counts[i]) && BSON_ITER_HOLDS_NUMBER(&it)) {
			*to[i] += bson_iter_as_int64(&it);
			if (i)
				*hits += bson_iter_as_int64(&it);
		}
	for (int i = 0; i < 2; i++) {
		if (!bson_iter_init_find(&it, res, ids_name[i]) || !bson_iter_recurse(&it, &e))
			continue;
		while (bson_iter_next(&e)) {
			int at = mapped(map, nmap, strtoll(bson_iter_key(&e), NULL, 10));

			if (at < 0)
				continue;
			snprintf(key, sizeof(key), "%d", at);
			bson_append_value(ids[i], key, -1, bson_iter_value(&e));
		}
	}
	if (bson_iter_init_find(&it, res, "writeErrors") && bson_iter_recurse(&it, &e)) {
		while (bson_iter_next(&e)) {
			bson_t one, op;
			int code = 8; /* UnknownError, when the shard gave none */
			int64_t k = 0;
			const char *msg = "a write error";

			bson_init(&op);
			if (bson_iter_recurse(&e, &f)) {
				while (bson_iter_next(&f)) {
					if (!strcmp(bson_iter_key(&f), "code"))
						code = (int)bson_iter_as_int64(&f);
					else if (!strcmp(bson_iter_key(&f), "index"))
						k = bson_iter_as_int64(&f);
					else if (!strcmp(bson_iter_key(&f), "errmsg") &&
						 BSON_ITER_HOLDS_UTF8(&f))
						msg = bson_iter_utf8(&f, NULL);
					else if (!strcmp(bson_iter_key(&f), "op") &&
						 BSON_ITER_HOLDS_DOCUMENT(&f)) {
						const uint8_t *d;
						uint32_t l;

						bson_iter_document(&f, &l, &d);
						bson_destroy(&op);
						bson_init_static(&one, d, l);
						bson_copy_to(&one, &op);
					}
				}
			}
			bulk_err(b, mapped(map, nmap, k) < 0 ? map[0] : mapped(map, nmap, k), code,
				 msg, &op);
			bson_destroy(&op);
			failed = true;
		}
	}
	return failed;
}

/* Consecutive insertOnes waiting to go to their shards in one request each (note 8). */
struct insert_run {
	struct dfs_buf text[ROUTER_MAX_SHARDS]; /* insertOne lines per shard */
	int *map[ROUTER_MAX_SHARDS];		/* the request's index of each line */
	int n[ROUTER_MAX_SHARDS], cap[ROUTER_MAX_SHARDS];
	int pending; /* lines in all */
};

static void run_add(struct insert_run *r, int shard, int index, const bson_t *one_op)
{
	if (r->n[shard] == r->cap[shard]) {
		r->cap[shard] = r->cap[shard] ? 2 * r->cap[shard] : 64;
		r->map[shard] = realloc(r->map[shard], (size_t)r->cap[shard] * sizeof(int));
		if (!r->map[shard])
			abort();
	}
	r->map[shard][r->n[shard]++] = index;
	store_codec_render(one_op, STORE_RENDER_COMPACT, &r->text[shard], NULL);
	dfs_buf_putc(&r->text[shard], '\n');
	r->pending++;
}

/* Sends each shard's waiting insertOnes as one .bulk (rel) and adds the results; returns
 * whether any failed (the first failure's message into first). A shard that cannot be
 * reached fails each of its operations (their outcome unknown, none reported). */
static bool run_flush(const struct router_ns *ns, struct insert_run *r, const char *rel,
		      struct bulk_sum *b, struct dfs_err *first)
{
	bool any = false;

	for (int s = 0; s < ns->nshards && r->pending; s++) {
		struct dfs_buf reply;
		struct dfs_err e = {0};
		bson_t res;
		int64_t hits = 0;
		bool failed = false;
		int orc;

		if (!r->n[s])
			continue;
		dfs_buf_init(&reply);
		bson_init(&res);
		orc = shard_request(&ns->shards[s], rel, r->text[s].data, r->text[s].len, &reply,
				    &e);
		/* a refused operation fails the close, but the result was read back */
		if (reply.len && !store_codec_parse_doc(reply.data, reply.len, &res, NULL)) {
			failed = bulk_add_result(b, r->map[s], r->n[s], &res, &hits);
		} else if (orc) {
			bson_t none = BSON_INITIALIZER;

			for (int k = 0; k < r->n[s]; k++)
				bulk_err(b, r->map[s][k], 8, e.msg, &none);
			bson_destroy(&none);
			failed = true;
		}
		if (failed && !first->code)
			dfs_err_set(first, DFS_EINVAL, "operation %d: %s", r->map[s][0],
				    e.msg[0] ? e.msg : "a write error");
		any |= failed;
		bson_destroy(&res);
		dfs_buf_release(&reply);
		r->pending -= r->n[s];
		r->n[s] = 0;
		r->text[s].len = 0;
	}
	return any;
}

static void run_release(struct insert_run *r)
{
	for (int s = 0; s < ROUTER_MAX_SHARDS; s++) {
		dfs_buf_release(&r->text[s]);
		free(r->map[s]);
	}
}

/* The filter and body of a bulk operation {<kind>: {filter, update|replacement, upsert}}. */
static const char *bulk_op(const bson_t *op, bson_t *args)
{
	bson_iter_t it;
	const uint8_t *d;
	uint32_t l;

	if (!bson_iter_init(&it, op) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_DOCUMENT(&it))
		return NULL;
	bson_iter_document(&it, &l, &d);
	if (!bson_init_static(args, d, l))
		return NULL;
	return bson_iter_key(&it);
}

/* One operation's shards, or an error message for it (MongoDB's rules, note 6). */
static int bulk_targets(const struct router_ns *ns, const char *kind, const bson_t *args,
			bson_t *insert_doc, const struct router_shard **sh, int *n, bool *single,
			struct dfs_err *err)
{
	bson_t *filter = NULL, *body = NULL;
	struct query_expr *e = NULL;
	bson_iter_t it;
	bool upsert = false;
	int rc = 0;

	*n = 0;
	*single = true;
	if (!strcmp(kind, "insertOne")) {
		bson_t *doc = router_doc_field(args, "document");
		const struct router_shard *s = NULL;

		if (!doc)
			return dfs_err_set(err, DFS_EINVAL, "insertOne needs a document");
		if (!bson_has_field(doc, "_id")) {
			bson_oid_t oid;

			bson_oid_init(&oid, NULL);
			BSON_APPEND_OID(insert_doc, "_id", &oid);
		}
		append_fields(insert_doc, doc);
		bson_destroy(doc);
		rc = owner_of(ns, insert_doc, &s, err);
		if (!rc) {
			sh[0] = s;
			*n = 1;
		}
		return rc;
	}
	filter = router_doc_field(args, "filter");
	if (!filter)
		filter = bson_new();
	if (bson_iter_init_find(&it, args, "upsert"))
		upsert = bson_iter_as_bool(&it);
	*single = !strcmp(kind, "updateOne") || !strcmp(kind, "replaceOne") ||
		  !strcmp(kind, "deleteOne");
	if (strcmp(kind, "updateOne") && strcmp(kind, "updateMany") && strcmp(kind, "replaceOne") &&
	    strcmp(kind, "deleteOne") && strcmp(kind, "deleteMany"))
		rc = dfs_err_set(err, DFS_EINVAL, "unknown bulk operation '%s'", kind);
	if (!rc)
		rc = query_filter_parse(filter, &e, err);
	if (!rc)
		rc = targets(ns, e, sh, ROUTER_MAX_SHARDS, n, err);
	if (!rc && !strcmp(kind, "replaceOne") && (body = router_doc_field(args, "replacement"))) {
		const struct router_shard *to = NULL;
		int idx = -1;

		rc = query_chunk_map_find_doc(&ns->map, body, &idx, err);
		if (!rc && idx >= 0)
			to = router_ns_shard(ns, ns->map.c[idx].shard);
		if (!rc && (*n != 1 || to != sh[0]))
			rc = dfs_err_set(
				err, DFS_EINVAL,
				"a replacement on a sharded collection must target the shard "
				"that owns its shard key (ImmutableField)");
	} else if (!rc && !strncmp(kind, "update", 6) &&
		   (body = router_doc_field(args, "update"))) {
		rc = key_untouched(ns, body, err);
	}
	if (!rc && upsert && *n != 1)
		rc = dfs_err_set(err, DFS_EINVAL,
				 "an upsert on a sharded collection must include the shard key in "
				 "the filter");
	if (!rc && *single && *n > 1 && !bson_has_field(filter, "_id"))
		rc = dfs_err_set(err, DFS_EINVAL,
				 "%s on a sharded collection must target one shard: include the "
				 "shard key or _id in the filter",
				 kind);
	query_expr_free(e);
	bson_destroy(filter);
	if (body)
		bson_destroy(body);
	return rc;
}

int router_bulk(const struct router_ns *ns, const char *db, const char *coll, const char *rest,
		const char *text, size_t len, struct dfs_buf *out, struct dfs_err *err)
{
	bool ordered = !opt_given(rest, "ordered") || opt_true(rest, "ordered");
	char rel[ROUTER_PATH_MAX], rel_run[ROUTER_PATH_MAX + 16];
	struct insert_run *run;
	bool stopped = false;
	struct bulk_sum b = {0};
	struct dfs_err first = {0};
	unsigned line = 1;
	size_t at = 0;
	int index = 0, rc = 0;
	bson_t res;

	if (opt_true(rest, "atomic"))
		return dfs_err_set(
			err, DFS_EINVAL,
			".bulk?atomic=true cannot span the shards of a sharded collection");
	bson_init(&b.inserted_ids);
	bson_init(&b.upserted_ids);
	bson_init(&b.errors);
	if (!(run = calloc(1, sizeof(*run))))
		abort();
	for (int s = 0; s < ROUTER_MAX_SHARDS; s++)
		dfs_buf_init(&run->text[s]);
	snprintf(rel, sizeof(rel), "%s/%s/.bulk", db, coll);
	snprintf(rel_run, sizeof(rel_run), "%s%s", rel, ordered ? "" : "?ordered=false");
	while (at < len) {
		const struct router_shard *sh[ROUTER_MAX_SHARDS];
		struct dfs_err e = {0};
		bson_t op, args, ins, one_op;
		const char *kind;
		size_t used;
		int n = 0, orc;
		bool single = true, failed = false;
		int64_t hits = 0;

		bson_init(&op);
		orc = store_codec_parse_next(text + at, len - at, line, &used, &op, &e);
		if (orc == DFS_ENOENT) {
			bson_destroy(&op);
			break;
		}
		if (orc) {
			/* the rest cannot be read: MongoDB refuses the whole request */
			bson_destroy(&op);
			rc = orc;
			dfs_err_set(err, orc, "%s", e.msg);
			break;
		}
		for (size_t i = at; i < at + used; i++)
			line += text[i] == '\n';
		at += used;
		bson_init(&ins);
		bson_init(&one_op);
		kind = bulk_op(&op, &args);
		if (!kind)
			orc = dfs_err_set(&e, DFS_EINVAL, "operation %d is not {<kind>: {...}}",
					  index);
		else
			orc = bulk_targets(ns, kind, &args, &ins, sh, &n, &single, &e);
		if (!orc && !strcmp(kind, "insertOne")) {
			/* the document with the _id the router gave it, waiting with the
			 * inserts next to it for the same shard (ordered: while the shard
			 * stays the same) */
			bson_t in;
			int s = (int)(sh[0] - ns->shards);

			BSON_APPEND_DOCUMENT_BEGIN(&one_op, "insertOne", &in);
			BSON_APPEND_DOCUMENT(&in, "document", &ins);
			bson_append_document_end(&one_op, &in);
			if (ordered && run->pending > run->n[s] &&
			    run_flush(ns, run, rel_run, &b, &first)) {
				stopped = true;
			} else {
				run_add(run, s, index, &one_op);
				n = 0; /* sent with the run */
			}
		} else if (!orc) {
			bson_copy_to_excluding_noinit(&op, &one_op, "", NULL);
			if (run->pending && run_flush(ns, run, rel_run, &b, &first) && ordered)
				stopped = true;
		} else if (run->pending && run_flush(ns, run, rel_run, &b, &first) && ordered) {
			stopped = true;
		}
		if (stopped) {
			bson_destroy(&op);
			bson_destroy(&ins);
			bson_destroy(&one_op);
			break;
		}
		if (orc) {
			bulk_err(&b, index, 2 /* BadValue */, e.msg, &op);
			failed = true;
		}
		for (int i = 0; !orc && i < n; i++) {
			struct dfs_buf reply, line_text;

			dfs_buf_init(&reply);
			dfs_buf_init(&line_text);
			store_codec_render(&one_op, STORE_RENDER_COMPACT, &line_text, NULL);
			dfs_buf_putc(&line_text, '\n');
			bson_init(&res);
			orc = shard_request(sh[i], rel, line_text.data, line_text.len, &reply, &e);
			/* a refused operation fails the close, but the result was read back */
			if (reply.len &&
			    !store_codec_parse_doc(reply.data, reply.len, &res, NULL)) {
				orc = 0;
				failed |= bulk_add_result(&b, &index, 1, &res, &hits);
			} else if (orc) {
				bulk_err(&b, index, 8, e.msg, &op);
				failed = true;
			}
			bson_destroy(&res);
			dfs_buf_release(&reply);
			dfs_buf_release(&line_text);
			if (failed || (single && hits))
				break; /* by _id: the one shard that had it */
		}
		if (failed && !first.code)
			dfs_err_set(&first, DFS_EINVAL, "operation %d: %s", index,
				    e.msg[0] ? e.msg : "a write error");
		bson_destroy(&op);
		bson_destroy(&ins);
		bson_destroy(&one_op);
		index++;
		if (failed && ordered)
			break;
	}
	if (!stopped && run->pending) /* the operations before an unreadable one stay applied */
		run_flush(ns, run, rel_run, &b, &first);
	run_release(run);
	free(run);
	if (!rc) {
		bson_t out_doc;

		bson_init(&out_doc);
		BSON_APPEND_BOOL(&out_doc, "acknowledged", true);
		put_count(&out_doc, "insertedCount", b.inserted);
		put_count(&out_doc, "matchedCount", b.matched);
		put_count(&out_doc, "modifiedCount", b.modified);
		put_count(&out_doc, "deletedCount", b.deleted);
		put_count(&out_doc, "upsertedCount", b.upserted);
		BSON_APPEND_DOCUMENT(&out_doc, "insertedIds", &b.inserted_ids);
		BSON_APPEND_DOCUMENT(&out_doc, "upsertedIds", &b.upserted_ids);
		BSON_APPEND_ARRAY(&out_doc, "writeErrors", &b.errors);
		store_codec_render(&out_doc, STORE_RENDER_COMPACT, out, NULL);
		dfs_buf_putc(out, '\n');
		bson_destroy(&out_doc);
		if (first.code) {
			rc = first.code;
			if (err)
				*err = first;
		}
	}
	bson_destroy(&b.inserted_ids);
	bson_destroy(&b.upserted_ids);
	bson_destroy(&b.errors);
	return rc;
}
