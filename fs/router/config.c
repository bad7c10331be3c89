/*
 * config.c - the cluster config kept in its own docfs store, in the "config" database with
 * MongoDB's collection names and document shapes (shards, databases, collections, chunks,
 * tags, settings), read and written through the store API and the find cursor in one write
 * transaction per command. It does not decide anything (cluster.c runs the commands) and
 * keeps no cache: every command reads what it needs.
 *
 * One divergence: MongoDB keeps dotted field names in key patterns and bounds ({key:
 * {"user.age": 1}}), which a docfs document may not hold (store_doc_validate). Stored
 * field names write each '.' as U+FF0E (FULLWIDTH FULL STOP), filters are encoded the same
 * way, and every document read back is decoded: callers only ever see MongoDB's shapes.
 */
#include "router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int router_cfg_open(const char *dir, struct router_cfg *c, struct dfs_err *err)
{
	int rc;

	memset(c, 0, sizeof(*c));
	if ((rc = store_open(dir, true, &c->st, err)))
		return dfs_err_prefix(err, "config store '%s': ", dir);
	if ((rc = store_db_get(c->st, ROUTER_CONFIG_DB, true, &c->db, err)) ||
	    (rc = store_txn_begin(c->db, true, &c->t, err))) {
		router_cfg_close(c);
		return rc;
	}
	return 0;
}

int router_cfg_commit(struct router_cfg *c, struct dfs_err *err)
{
	struct store_txn *t = c->t;

	c->t = NULL;
	return store_txn_commit(t, err);
}

void router_cfg_close(struct router_cfg *c)
{
	store_txn_abort(c->t);
	c->t = NULL;
	store_free(c->st);
	c->st = NULL;
}

#define DOT_ESC "\xef\xbc\x8e" /* U+FF0E */

/* name with '.' <-> DOT_ESC into buf. */
static const char *name_code(const char *name, bool enc, char *buf, size_t cap)
{
	const char *from = enc ? "." : DOT_ESC, *to = enc ? DOT_ESC : ".";
	size_t fl = strlen(from), tl = strlen(to), o = 0;

	if (!strstr(name, from))
		return name;
	while (*name && o + tl < cap) {
		if (strncmp(name, from, fl) == 0) {
			memcpy(buf + o, to, tl);
			o += tl;
			name += fl;
		} else {
			buf[o++] = *name++;
		}
	}
	buf[o] = 0;
	return buf;
}

/* Copies in to out (initialised) with every field name at every depth en- or decoded. */
static void doc_code(const bson_t *in, bson_t *out, bool enc)
{
	bson_iter_t it;
	char buf[1024];

	if (!bson_iter_init(&it, in))
		return;
	while (bson_iter_next(&it)) {
		const char *k = name_code(bson_iter_key(&it), enc, buf, sizeof(buf));

		if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
			bson_t sub, child;
			uint32_t len;
			const uint8_t *data;

			if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
				bson_iter_document(&it, &len, &data);
				bson_append_document_begin(out, k, -1, &child);
			} else {
				bson_iter_array(&it, &len, &data);
				bson_append_array_begin(out, k, -1, &child);
			}
			if (bson_init_static(&sub, data, len))
				doc_code(&sub, &child, enc);
			if (BSON_ITER_HOLDS_DOCUMENT(&it))
				bson_append_document_end(out, &child);
			else
				bson_append_array_end(out, &child);
		} else {
			bson_append_value(out, k, -1, bson_iter_value(&it));
		}
	}
}

void router_cfg_decode(const bson_t *in, bson_t *out)
{
	doc_code(in, out, false);
}

void router_docs_free(bson_t **docs, int n)
{
	for (int i = 0; i < n; i++)
		bson_destroy(docs[i]);
	free(docs);
}

/* The collection's id: 0 (and no error) when it does not exist and create is false. */
static int coll_id(struct router_cfg *c, const char *coll, bool create, int64_t *id,
		   struct dfs_err *err)
{
	struct store_coll sc;
	int rc = store_coll_find(c->t, coll, &sc, err);

	if (rc == DFS_ENOENT) {
		dfs_err_clear(err);
		*id = 0;
		if (!create)
			return 0;
		rc = store_coll_create(c->t, coll, 0755, getuid(), getgid(), &sc, err);
	}
	if (rc == 0)
		*id = sc.id;
	return rc;
}

int router_cfg_list(struct router_cfg *c, const char *coll, const bson_t *filter,
		    const bson_t *sort, bson_t ***docs, int *n, struct dfs_err *err)
{
	struct query_find_opts o = {0};
	struct query_cursor *cur;
	const bson_t *d;
	int64_t id;
	int rc, cap = 0;

	*docs = NULL;
	*n = 0;
	if ((rc = coll_id(c, coll, false, &id, err)) || id == 0)
		return rc;
	bson_t fenc = BSON_INITIALIZER;

	if (filter)
		doc_code(filter, &fenc, true);
	o.filter = filter ? &fenc : NULL;
	o.sort = sort;
	if ((rc = query_find_open(c->t, id, &o, &cur, err))) {
		bson_destroy(&fenc);
		return dfs_err_prefix(err, "config.%s: ", coll);
	}
	while ((rc = query_cursor_next(cur, &d, err)) == 0) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			*docs = realloc(*docs, (size_t)cap * sizeof(**docs));
			if (!*docs)
				abort();
		}
		(*docs)[*n] = bson_new();
		doc_code(d, (*docs)[(*n)++], false);
	}
	query_cursor_free(cur);
	bson_destroy(&fenc);
	if (rc != DFS_ENOENT) {
		router_docs_free(*docs, *n);
		*docs = NULL;
		*n = 0;
		return rc;
	}
	dfs_err_clear(err);
	return 0;
}

int router_cfg_get(struct router_cfg *c, const char *coll, const bson_t *filter, bson_t *out,
		   struct dfs_err *err)
{
	bson_t **docs;
	int n, rc = router_cfg_list(c, coll, filter, NULL, &docs, &n, err);

	if (rc)
		return rc;
	if (n == 0)
		rc = DFS_ENOENT;
	else
		bson_concat(out, docs[0]);
	router_docs_free(docs, n);
	return rc;
}

int router_cfg_put(struct router_cfg *c, const char *coll, const bson_t *doc, struct dfs_err *err)
{
	struct store_entry e;
	bson_t prep;
	bson_iter_t it;
	int64_t id;
	int rc;

	if (!bson_iter_init_find(&it, doc, "_id"))
		return dfs_err_set(err, DFS_EINVAL, "config.%s: a document without _id", coll);
	bson_t enc = BSON_INITIALIZER;

	doc_code(doc, &enc, true);
	if ((rc = coll_id(c, coll, true, &id, err)) ||
	    (rc = store_doc_prepare(&enc, NULL, &prep, err))) {
		bson_destroy(&enc);
		return rc;
	}
	bson_destroy(&enc);
	bson_iter_init_find(&it, &prep, "_id"); /* the encoded _id */
	rc = store_doc_find_id(c->t, id, bson_iter_value(&it), &e, err);
	if (rc == 0) {
		rc = store_doc_replace(c->t, e.id, &prep, err);
	} else if (rc == DFS_ENOENT) {
		struct store_attrs a = {0644, (uint32_t)getuid(), (uint32_t)getgid(), 0};

		dfs_err_clear(err);
		rc = store_doc_insert(c->t, id, &prep, &a, &e, err);
	}
	bson_destroy(&prep);
	return rc ? dfs_err_prefix(err, "config.%s: ", coll) : 0;
}

int router_cfg_del(struct router_cfg *c, const char *coll, const bson_t *filter, int64_t *n,
		   struct dfs_err *err)
{
	struct query_write_opts o = {0};
	struct query_write_result r = {0};
	int64_t id;
	int rc;

	if (n)
		*n = 0;
	if ((rc = coll_id(c, coll, false, &id, err)) || id == 0)
		return rc;
	bson_t fenc = BSON_INITIALIZER;

	if (filter)
		doc_code(filter, &fenc, true);
	o.filter = filter ? &fenc : NULL;
	o.multi = true;
	rc = query_delete_run(c->t, id, &o, &r, err);
	bson_destroy(&fenc);
	if (rc == 0 && n)
		*n = r.deleted;
	query_write_result_release(&r);
	return rc;
}

int router_cfg_chunks_load(struct router_cfg *c, const char *ns, struct query_chunk_map *m,
			   struct dfs_err *err)
{
	struct query_shard_key k;
	bson_t coll = BSON_INITIALIZER, key, *f = BCON_NEW("_id", BCON_UTF8(ns)),
	       *cf = BCON_NEW("ns", BCON_UTF8(ns));
	bson_t **docs = NULL;
	bson_iter_t it;
	uint32_t len;
	const uint8_t *data;
	int n = 0, rc;

	memset(m, 0, sizeof(*m));
	rc = router_cfg_get(c, "collections", f, &coll, err);
	if (rc == DFS_ENOENT)
		rc = dfs_err_set(err, DFS_ENOENT, "collection '%s' is not sharded", ns);
	if (rc)
		goto done;
	if (!bson_iter_init_find(&it, &coll, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
		rc = dfs_err_set(err, DFS_ECORRUPT, "config.collections '%s' has no key", ns);
		goto done;
	}
	bson_iter_document(&it, &len, &data);
	bson_init_static(&key, data, len);
	if ((rc = query_shard_key_parse(&key, &k, err)))
		goto done;
	query_chunk_map_init(m, &k);
	if ((rc = router_cfg_list(c, "chunks", cf, NULL, &docs, &n, err)))
		goto done;
	for (int i = 0; i < n && !rc; i++) {
		bson_t min, max;
		const char *shard = "";
		uint32_t major = 0, minor = 0;
		bool jumbo = false, hmin = false, hmax = false;

		bson_iter_init(&it, docs[i]);
		while (bson_iter_next(&it)) {
			const char *name = bson_iter_key(&it);

			if (strcmp(name, "min") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
				bson_iter_document(&it, &len, &data);
				hmin = bson_init_static(&min, data, len);
			} else if (strcmp(name, "max") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
				bson_iter_document(&it, &len, &data);
				hmax = bson_init_static(&max, data, len);
			} else if (strcmp(name, "shard") == 0 && BSON_ITER_HOLDS_UTF8(&it)) {
				shard = bson_iter_utf8(&it, NULL);
			} else if (strcmp(name, "lastmod") == 0 && BSON_ITER_HOLDS_TIMESTAMP(&it)) {
				bson_iter_timestamp(&it, &major, &minor);
			} else if (strcmp(name, "jumbo") == 0) {
				jumbo = bson_iter_as_bool(&it);
			}
		}
		if (!hmin || !hmax)
			rc = dfs_err_set(err, DFS_ECORRUPT, "a chunk of '%s' has no min or max",
					 ns);
		else if (!(rc = query_chunk_map_add(m, &min, &max, shard, major, minor, err)))
			m->c[m->n - 1].jumbo = jumbo;
	}
	if (!rc)
		rc = query_chunk_map_check(m, err);
	if (rc) {
		dfs_err_prefix(err, "chunks of '%s': ", ns);
		query_chunk_map_release(m);
	}
done:
	router_docs_free(docs, n);
	bson_destroy(&coll);
	bson_destroy(f);
	bson_destroy(cf);
	return rc;
}

/* The chunk's _id as MongoDB 4.x made it: "<ns>-<field>_<value>..." of its min. */
static void chunk_id(const char *ns, const bson_t *min, struct dfs_buf *out)
{
	bson_iter_t it;

	dfs_buf_printf(out, "%s-", ns);
	if (!bson_iter_init(&it, min))
		return;
	while (bson_iter_next(&it)) {
		dfs_buf_printf(out, "%s_", bson_iter_key(&it));
		if (BSON_ITER_HOLDS_MINKEY(&it))
			dfs_buf_puts(out, "MinKey");
		else if (BSON_ITER_HOLDS_MAXKEY(&it))
			dfs_buf_puts(out, "MaxKey");
		else
			store_codec_render_value(bson_iter_value(&it), out, NULL);
	}
}

int router_cfg_chunks_save(struct router_cfg *c, const char *ns, const struct query_chunk_map *m,
			   struct dfs_err *err)
{
	bson_t *f = BCON_NEW("ns", BCON_UTF8(ns)), *cf = BCON_NEW("_id", BCON_UTF8(ns));
	bson_t coll = BSON_INITIALIZER;
	bson_oid_t epoch;
	bson_iter_t it;
	struct dfs_buf id;
	int rc;

	bson_oid_init(&epoch, NULL);
	if ((rc = router_cfg_get(c, "collections", cf, &coll, err)) == 0 &&
	    bson_iter_init_find(&it, &coll, "lastmodEpoch") && BSON_ITER_HOLDS_OID(&it))
		bson_oid_copy(bson_iter_oid(&it), &epoch);
	dfs_err_clear(err);
	dfs_buf_init(&id);
	rc = router_cfg_del(c, "chunks", f, NULL, err);
	for (int i = 0; i < m->n && !rc; i++) {
		const struct query_chunk *ch = &m->c[i];
		bson_t d = BSON_INITIALIZER, hist, h;

		dfs_buf_reset(&id);
		chunk_id(ns, ch->min, &id);
		BSON_APPEND_UTF8(&d, "_id", id.data);
		BSON_APPEND_UTF8(&d, "ns", ns);
		BSON_APPEND_DOCUMENT(&d, "min", ch->min);
		BSON_APPEND_DOCUMENT(&d, "max", ch->max);
		BSON_APPEND_UTF8(&d, "shard", ch->shard);
		BSON_APPEND_TIMESTAMP(&d, "lastmod", ch->major, ch->minor);
		BSON_APPEND_OID(&d, "lastmodEpoch", &epoch);
		if (ch->jumbo)
			BSON_APPEND_BOOL(&d, "jumbo", true);
		BSON_APPEND_ARRAY_BEGIN(&d, "history", &hist);
		BSON_APPEND_DOCUMENT_BEGIN(&hist, "0", &h);
		BSON_APPEND_TIMESTAMP(&h, "validAfter", (uint32_t)time(NULL), 0);
		BSON_APPEND_UTF8(&h, "shard", ch->shard);
		bson_append_document_end(&hist, &h);
		bson_append_array_end(&d, &hist);
		rc = router_cfg_put(c, "chunks", &d, err);
		bson_destroy(&d);
	}
	dfs_buf_release(&id);
	bson_destroy(&coll);
	bson_destroy(f);
	bson_destroy(cf);
	return rc;
}
