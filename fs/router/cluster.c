/*
 * cluster.c - the sharding admin commands (addShard, removeShard, listShards,
 * enableSharding, shardCollection, addShardToZone, removeShardFromZone, updateZoneKeyRange,
 * addTagRange, split, moveChunk, balancerStart/Stop/Status) run against the config
 * (config.c), with MongoDB's reply shapes, and sh.status()'s text. `docfs cluster` calls
 * it, and so does the router mount's /.cluster/command. Its moveChunk changes the owner in
 * the config only: the callers move the documents first (migrate.c, from the router mount
 * or from `docfs cluster`, mount.c note 5), and draining a shard is the work of a router's
 * balancer (balance.c).
 *
 * Design notes
 *  1. A command runs inside the one write transaction of its struct router_cfg and the
 *     caller commits only on success: a refused command (ok: 0) changes nothing, and two
 *     commands never interleave (the store's write lock).
 *  2. Every reply ends in ok: 1, or is exactly {ok: 0, errmsg, code, codeName} with
 *     MongoDB's code names; docfs-only remarks go in a "docfsNote" field.
 *  3. Chunks are rewritten whole per collection (router_cfg_chunks_save) after each change,
 *     and checked to cover the key space before (query_chunk_map_check).
 *  4. Initial chunks: zones first when the collection is empty (a chunk per zone range on
 *     a shard of its zone, round robin; the gaps round robin over every shard, as
 *     MongoDB's SingleChunkPerTagSplitPolicy; a collection with documents gets one chunk
 *     on its primary, where they are, and the balancer splits and moves), else for a
 *     hashed key MongoDB's split points of numInitialChunks (default two per shard) in
 *     contiguous runs per shard, else one chunk MinKey -->> MaxKey on the primary.
 *  5. Zone ranges may be given before the collection is sharded (MongoDB 4.0.2+): they
 *     are checked for shape only (min and max with the same fields in the same order) and
 *     fitted to the shard key by shardCollection, which refuses a key they are not a
 *     prefix of.
 */
#include "router.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fs_int.h"

/* MongoDB's error codes used here (error_codes.yml). */
#define E_BADVALUE 2, "BadValue"
#define E_FAILEDTOPARSE 9, "FailedToParse"
#define E_ILLEGAL 20, "IllegalOperation"
#define E_ALREADY 23, "AlreadyInitialized"
#define E_NSNOTFOUND 26, "NamespaceNotFound"
#define E_NOCMD 59, "CommandNotFound"
#define E_NOSHARD 70, "ShardNotFound"
#define E_OPTIONS 72, "InvalidOptions"
#define E_FAILED 96, "OperationFailed"
#define E_NOTSHARDED 118, "NamespaceNotSharded"

static int fail(bson_t *reply, struct dfs_err *err, int code, const char *name, const char *fmt,
		...) __attribute__((format(printf, 5, 6)));

/* A random version 4 UUID (config.databases version, config.collections uuid). */
static void uuid4(uint8_t u[16])
{
	FILE *f = fopen("/dev/urandom", "rb");

	if (!f || fread(u, 1, 16, f) != 16)
		for (int i = 0; i < 16; i++)
			u[i] = (uint8_t)(rand() ^ (int)time(NULL) >> (i % 8));
	if (f)
		fclose(f);
	u[6] = (u[6] & 0x0f) | 0x40;
	u[8] = (u[8] & 0x3f) | 0x80;
}

/* Sets reply to {ok: 0, errmsg, code, codeName} and err to the message. */
static int fail(bson_t *reply, struct dfs_err *err, int code, const char *name, const char *fmt,
		...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	bson_reinit(reply);
	BSON_APPEND_DOUBLE(reply, "ok", 0);
	BSON_APPEND_UTF8(reply, "errmsg", msg);
	BSON_APPEND_INT32(reply, "code", code);
	BSON_APPEND_UTF8(reply, "codeName", name);
	return dfs_err_set(err, DFS_EINVAL, "%s", msg);
}

/* An internal failure (the store's): its message in the reply. */
static int fail_err(bson_t *reply, struct dfs_err *err, int rc)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "%s", err->msg);
	dfs_err_clear(err);
	fail(reply, err, E_FAILED, "%s", msg);
	return rc ? rc : DFS_EIO;
}

static const char *str_field(const bson_t *d, const char *name)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, d, name) && BSON_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	return NULL;
}

/* A document field as a borrowed view into out; false when absent or not a document. */
static bool doc_field(const bson_t *d, const char *name, bson_t *out)
{
	bson_iter_t it;
	uint32_t len;
	const uint8_t *data;

	if (!bson_iter_init_find(&it, d, name) || !BSON_ITER_HOLDS_DOCUMENT(&it))
		return false;
	bson_iter_document(&it, &len, &data);
	return bson_init_static(out, data, len);
}

static bool bool_field(const bson_t *d, const char *name, bool dflt)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, d, name))
		return bson_iter_as_bool(&it);
	return dflt;
}

static void text_of(const bson_t *d, char *buf, size_t cap)
{
	struct dfs_buf b;

	dfs_buf_init(&b);
	store_codec_render(d, STORE_RENDER_COMPACT, &b, NULL);
	snprintf(buf, cap, "%s", b.data ? b.data : "{}");
	dfs_buf_release(&b);
}

static bson_t *by_id(const char *id)
{
	return BCON_NEW("_id", BCON_UTF8(id));
}

/* Does shard name exist? */
static int shard_get(struct router_cfg *c, const char *name, bson_t *out, struct dfs_err *err)
{
	bson_t *f = by_id(name);
	int rc = router_cfg_get(c, "shards", f, out, err);

	bson_destroy(f);
	return rc;
}

/* "db.coll" split and checked. */
static int ns_split(const char *ns, char *db, char *coll, bson_t *reply, struct dfs_err *err)
{
	const char *dot = ns ? strchr(ns, '.') : NULL;
	struct dfs_err e = {0};

	if (!dot || dot == ns || (size_t)(dot - ns) > DFS_MAX_NS_NAME ||
	    strlen(dot + 1) > DFS_MAX_NS_NAME)
		return fail(reply, err, E_BADVALUE,
			    "invalid namespace '%s': give <db>.<collection>", ns ? ns : "");
	memcpy(db, ns, (size_t)(dot - ns));
	db[dot - ns] = 0;
	strcpy(coll, dot + 1);
	if (store_db_name_check(db, &e) || store_coll_name_check(coll, &e))
		return fail(reply, err, E_BADVALUE, "invalid namespace '%s': %s", ns, e.msg);
	return 0;
}

/* ---- shards ------------------------------------------------------------------------ */

static int cmd_add_shard(struct router_cfg *c, const bson_t *cmd, bson_t *reply,
			 struct dfs_err *err)
{
	const char *host = str_field(cmd, "addShard"), *name = str_field(cmd, "name");
	char real[4096], gen[32];
	struct stat sb;
	bson_t **docs, *d;
	int n, rc;

	if (!host || !*host)
		return fail(reply, err, E_BADVALUE, "addShard needs the shard's directory path");
	if (stat(host, &sb) != 0 || !S_ISDIR(sb.st_mode) || !realpath(host, real))
		return fail(reply, err, E_FAILED, "shard '%s' is not a directory", host);
	if ((rc = router_cfg_list(c, "shards", NULL, NULL, &docs, &n, err)))
		return fail_err(reply, err, rc);
	for (int i = 0; i < n; i++) {
		const char *h = str_field(docs[i], "host"), *id = str_field(docs[i], "_id");

		if ((h && strcmp(h, real) == 0) || (name && id && strcmp(id, name) == 0)) {
			fail(reply, err, E_FAILED, "a shard '%s' with host '%s' exists already",
			     id ? id : "", h ? h : "");
			router_docs_free(docs, n);
			return DFS_EEXIST;
		}
	}
	if (!name) {
		/* shard0000-style: the first number no shard has */
		for (int k = 0;; k++) {
			bool used = false;

			snprintf(gen, sizeof(gen), "shard%04d", k);
			for (int i = 0; i < n && !used; i++)
				used = str_field(docs[i], "_id") &&
				       strcmp(str_field(docs[i], "_id"), gen) == 0;
			if (!used)
				break;
		}
		name = gen;
	}
	router_docs_free(docs, n);
	if (!*name || strlen(name) > 64)
		return fail(reply, err, E_BADVALUE, "a shard name has 1 to 64 bytes");
	d = BCON_NEW("_id", BCON_UTF8(name), "host", BCON_UTF8(real), "state", BCON_INT32(1),
		     "tags", "[", "]");
	rc = router_cfg_put(c, "shards", d, err);
	bson_destroy(d);
	if (rc)
		return fail_err(reply, err, rc);
	BSON_APPEND_UTF8(reply, "shardAdded", name);
	return 0;
}

/* Chunks of shard and databases whose primary it is. */
static int shard_usage(struct router_cfg *c, const char *shard, int *chunks, int *jumbo,
		       bson_t *dbs, struct dfs_err *err)
{
	bson_t *f = BCON_NEW("shard", BCON_UTF8(shard)),
	       *pf = BCON_NEW("primary", BCON_UTF8(shard));
	bson_t **docs;
	int n, rc;
	char k[16];

	*chunks = *jumbo = 0;
	if (!(rc = router_cfg_list(c, "chunks", f, NULL, &docs, &n, err))) {
		*chunks = n;
		for (int i = 0; i < n; i++)
			*jumbo += bool_field(docs[i], "jumbo", false);
		router_docs_free(docs, n);
	}
	if (!rc && !(rc = router_cfg_list(c, "databases", pf, NULL, &docs, &n, err))) {
		for (int i = 0; i < n; i++) {
			snprintf(k, sizeof(k), "%d", i);
			BSON_APPEND_UTF8(dbs, k, str_field(docs[i], "_id"));
		}
		router_docs_free(docs, n);
	}
	bson_destroy(f);
	bson_destroy(pf);
	return rc;
}

static int cmd_remove_shard(struct router_cfg *c, const bson_t *cmd, bson_t *reply,
			    struct dfs_err *err)
{
	const char *name = str_field(cmd, "removeShard");
	bson_t sh = BSON_INITIALIZER, dbs = BSON_INITIALIZER, **all;
	int rc, nall, chunks, jumbo;

	if (!name || (rc = shard_get(c, name, &sh, err)) == DFS_ENOENT) {
		bson_destroy(&sh);
		dfs_err_clear(err);
		return fail(reply, err, E_NOSHARD, "shard %s does not exist", name ? name : "''");
	}
	if (rc || (rc = router_cfg_list(c, "shards", NULL, NULL, &all, &nall, err)))
		goto internal;
	router_docs_free(all, nall);
	if (nall == 1) {
		bson_destroy(&sh);
		return fail(reply, err, E_ILLEGAL,
			    "operation not allowed because it would remove the last shard");
	}
	if ((rc = shard_usage(c, name, &chunks, &jumbo, &dbs, err)))
		goto internal;
	if (!bool_field(&sh, "draining", false)) {
		bson_t d = BSON_INITIALIZER;

		bson_copy_to_excluding_noinit(&sh, &d, "draining", NULL);
		BSON_APPEND_BOOL(&d, "draining", true);
		rc = router_cfg_put(c, "shards", &d, err);
		bson_destroy(&d);
		if (rc)
			goto internal;
		BSON_APPEND_UTF8(reply, "msg", "draining started successfully");
		BSON_APPEND_UTF8(reply, "state", "started");
		BSON_APPEND_UTF8(reply, "shard", name);
		BSON_APPEND_UTF8(reply, "note", "you need to drop or movePrimary these databases");
		BSON_APPEND_ARRAY(reply, "dbsToMove", &dbs);
		if (chunks)
			BSON_APPEND_UTF8(reply, "docfsNote",
					 "a docfs router's balancer moves the chunks away (or "
					 "moveChunk them)");
	} else if (chunks || !bson_empty(&dbs)) {
		bson_t rem;

		BSON_APPEND_UTF8(reply, "msg", "draining ongoing");
		BSON_APPEND_UTF8(reply, "state", "ongoing");
		BSON_APPEND_DOCUMENT_BEGIN(reply, "remaining", &rem);
		BSON_APPEND_INT64(&rem, "chunks", chunks);
		BSON_APPEND_INT64(&rem, "dbs", (int64_t)bson_count_keys(&dbs));
		BSON_APPEND_INT64(&rem, "jumboChunks", jumbo);
		bson_append_document_end(reply, &rem);
		BSON_APPEND_UTF8(reply, "note", "you need to drop or movePrimary these databases");
		BSON_APPEND_ARRAY(reply, "dbsToMove", &dbs);
		BSON_APPEND_UTF8(reply, "docfsNote",
				 "the chunks move once a docfs router's balancer runs (or "
				 "with moveChunk)");
	} else {
		bson_t *f = by_id(name);

		rc = router_cfg_del(c, "shards", f, NULL, err);
		bson_destroy(f);
		if (rc)
			goto internal;
		BSON_APPEND_UTF8(reply, "msg", "removeshard completed successfully");
		BSON_APPEND_UTF8(reply, "state", "completed");
		BSON_APPEND_UTF8(reply, "shard", name);
	}
	bson_destroy(&sh);
	bson_destroy(&dbs);
	return 0;
internal:
	bson_destroy(&sh);
	bson_destroy(&dbs);
	return fail_err(reply, err, rc);
}

static int cmd_list_shards(struct router_cfg *c, bson_t *reply, struct dfs_err *err)
{
	bson_t **docs, arr;
	int n, rc = router_cfg_list(c, "shards", NULL, NULL, &docs, &n, err);
	char k[16];

	if (rc)
		return fail_err(reply, err, rc);
	BSON_APPEND_ARRAY_BEGIN(reply, "shards", &arr);
	for (int i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "%d", i);
		BSON_APPEND_DOCUMENT(&arr, k, docs[i]);
	}
	bson_append_array_end(reply, &arr);
	router_docs_free(docs, n);
	return 0;
}

/* ---- zones ------------------------------------------------------------------------- */

static int cmd_shard_zone(struct router_cfg *c, const bson_t *cmd, bool add, bson_t *reply,
			  struct dfs_err *err)
{
	const char *name = str_field(cmd, add ? "addShardToZone" : "removeShardFromZone"),
		   *zone = str_field(cmd, "zone");
	bson_t sh = BSON_INITIALIZER, d = BSON_INITIALIZER, tags, **docs;
	bson_iter_t it, t;
	int rc, n = 0, k = 0, holders = 0;
	bool had = false;
	char key[16];

	if (!name || !zone || !*zone)
		return fail(reply, err, E_BADVALUE, "%s needs a shard name and a zone",
			    add ? "addShardToZone" : "removeShardFromZone");
	if ((rc = shard_get(c, name, &sh, err)) == DFS_ENOENT) {
		dfs_err_clear(err);
		bson_destroy(&sh);
		return fail(reply, err, E_NOSHARD, "shard %s does not exist", name);
	}
	if (rc)
		goto internal;
	if (!add) {
		/* the last shard of a zone still used by a range keeps it */
		bson_t *f = BCON_NEW("tags", BCON_UTF8(zone)),
		       *tf = BCON_NEW("tag", BCON_UTF8(zone));

		if (!(rc = router_cfg_list(c, "shards", f, NULL, &docs, &n, err))) {
			holders = n;
			router_docs_free(docs, n);
			rc = router_cfg_list(c, "tags", tf, NULL, &docs, &n, err);
		}
		bson_destroy(f);
		bson_destroy(tf);
		if (rc)
			goto internal;
		router_docs_free(docs, n);
		if (n > 0 && holders == 1) {
			bson_destroy(&sh);
			return fail(
				reply, err, E_ILLEGAL,
				"zone %s is still in use by %d range%s and %s is its last shard",
				zone, n, n == 1 ? "" : "s", name);
		}
	}
	bson_iter_init(&it, &sh);
	while (bson_iter_next(&it))
		if (strcmp(bson_iter_key(&it), "tags") != 0)
			bson_append_iter(&d, NULL, 0, &it);
	BSON_APPEND_ARRAY_BEGIN(&d, "tags", &tags);
	if (bson_iter_init_find(&it, &sh, "tags") && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &t)) {
		while (bson_iter_next(&t)) {
			bool same = BSON_ITER_HOLDS_UTF8(&t) &&
				    strcmp(bson_iter_utf8(&t, NULL), zone) == 0;

			had = had || same;
			if (same && !add)
				continue;
			snprintf(key, sizeof(key), "%d", k++);
			bson_append_iter(&tags, key, -1, &t);
		}
	}
	if (add && !had) {
		snprintf(key, sizeof(key), "%d", k++);
		BSON_APPEND_UTF8(&tags, key, zone);
	}
	bson_append_array_end(&d, &tags);
	rc = router_cfg_put(c, "shards", &d, err);
	bson_destroy(&d);
	bson_destroy(&sh);
	return rc ? fail_err(reply, err, rc) : 0;
internal:
	bson_destroy(&d);
	bson_destroy(&sh);
	return fail_err(reply, err, rc);
}

/* A range bound of a zone: a prefix of the key extended with MinKey, into out. */
static int zone_bound(const struct query_shard_key *k, const bson_t *in, bson_t *out,
		      const char *what, bson_t *reply, struct dfs_err *err)
{
	bson_iter_t it;
	int i = 0;
	struct dfs_err e = {0};

	bson_iter_init(&it, in);
	while (bson_iter_next(&it)) {
		if (i >= k->n || strcmp(bson_iter_key(&it), k->f[i].path) != 0)
			break;
		bson_append_iter(out, NULL, 0, &it);
		i++;
	}
	if (i == 0 || i != (int)bson_count_keys(in))
		return fail(reply, err, E_BADVALUE,
			    "the %s of a zone range must be a prefix of the shard key", what);
	for (; i < k->n; i++)
		BSON_APPEND_MINKEY(out, k->f[i].path);
	if (query_shard_bound_check(k, out, what, &e))
		return fail(reply, err, E_BADVALUE, "%s", e.msg);
	return 0;
}

/* The config.tags document of a zone range into d (initialised, empty). */
static void tag_doc(const char *ns, const bson_t *min, const bson_t *max, const char *zone,
		    bson_t *d)
{
	bson_t id;

	BSON_APPEND_DOCUMENT_BEGIN(d, "_id", &id);
	BSON_APPEND_UTF8(&id, "ns", ns);
	BSON_APPEND_DOCUMENT(&id, "min", min);
	bson_append_document_end(d, &id);
	BSON_APPEND_UTF8(d, "ns", ns);
	BSON_APPEND_DOCUMENT(d, "min", min);
	BSON_APPEND_DOCUMENT(d, "max", max);
	BSON_APPEND_UTF8(d, "tag", zone);
}

/* The key a zone range of ns is checked against: the shard key of a sharded ns; for one
 * not sharded (yet), as MongoDB 4.0.2+ allows, the fields of the range's min in their order
 * (note 5). */
static int key_of_range(struct router_cfg *c, const char *ns, const bson_t *rmin,
			struct query_shard_key *k, bson_t *reply, struct dfs_err *err)
{
	char db[DFS_MAX_NS_NAME + 1], coll[DFS_MAX_NS_NAME + 1];
	struct query_chunk_map m;
	struct dfs_err e = {0};
	bson_t key = BSON_INITIALIZER;
	bson_iter_t it;
	int rc = router_cfg_chunks_load(c, ns, &m, err);

	if (rc == 0) {
		*k = m.key;
		query_chunk_map_release(&m);
		return 0;
	}
	if (rc != DFS_ENOENT)
		return fail_err(reply, err, rc);
	dfs_err_clear(err);
	if ((rc = ns_split(ns, db, coll, reply, err)))
		return rc;
	if (bson_iter_init(&it, rmin))
		while (bson_iter_next(&it))
			BSON_APPEND_INT32(&key, bson_iter_key(&it), 1);
	rc = query_shard_key_parse(&key, k, &e);
	bson_destroy(&key);
	if (rc)
		return fail(reply, err, E_BADVALUE, "zone range min: %s", e.msg);
	return 0;
}

static int cmd_zone_range(struct router_cfg *c, const bson_t *cmd, const char *name, bson_t *reply,
			  struct dfs_err *err)
{
	const char *ns = str_field(cmd, name);
	bool tagform = strcmp(name, "addTagRange") == 0;
	struct query_shard_key k;
	bson_t rmin, rmax, min = BSON_INITIALIZER, max = BSON_INITIALIZER, **docs = NULL;
	bson_iter_t it;
	const char *zone = NULL;
	bool remove = false;
	int rc, n = 0;
	char a[200], b[200];

	if (!ns)
		return fail(reply, err, E_BADVALUE, "%s needs the namespace", name);
	if (bson_iter_init_find(&it, cmd, tagform ? "tag" : "zone")) {
		if (BSON_ITER_HOLDS_NULL(&it) && !tagform)
			remove = true;
		else if (BSON_ITER_HOLDS_UTF8(&it))
			zone = bson_iter_utf8(&it, NULL);
	}
	if (!zone && !remove)
		return fail(reply, err, E_BADVALUE, "%s needs a %s (a string%s)", name,
			    tagform ? "tag" : "zone",
			    tagform ? "" : ", or null to remove the range");
	if (!doc_field(cmd, "min", &rmin) || !doc_field(cmd, "max", &rmax))
		return fail(reply, err, E_BADVALUE, "%s needs min and max documents", name);
	if ((rc = key_of_range(c, ns, &rmin, &k, reply, err)))
		return rc;
	if ((rc = zone_bound(&k, &rmin, &min, "min", reply, err)) ||
	    (rc = zone_bound(&k, &rmax, &max, "max", reply, err)))
		goto done;
	text_of(&min, a, sizeof(a));
	text_of(&max, b, sizeof(b));
	if (query_shard_bound_compare(&min, &max) >= 0) {
		rc = fail(reply, err, E_BADVALUE, "zone range min %s must be below max %s", a, b);
		goto done;
	}
	{
		bson_t *f = BCON_NEW("ns", BCON_UTF8(ns));

		rc = router_cfg_list(c, "tags", f, NULL, &docs, &n, err);
		bson_destroy(f);
		if (rc) {
			rc = fail_err(reply, err, rc);
			goto done;
		}
	}
	if (remove) {
		for (int i = 0; i < n; i++) {
			bson_t tmin, tmax, *f;

			if (!doc_field(docs[i], "min", &tmin) ||
			    !doc_field(docs[i], "max", &tmax) ||
			    query_shard_bound_compare(&tmin, &min) ||
			    query_shard_bound_compare(&tmax, &max))
				continue;
			f = BCON_NEW("ns", BCON_UTF8(ns));
			BSON_APPEND_DOCUMENT(f, "min", &min);
			rc = router_cfg_del(c, "tags", f, NULL, err);
			bson_destroy(f);
			if (rc)
				rc = fail_err(reply, err, rc);
		}
		goto done; /* removing a range that is not there is no error, as in MongoDB */
	}
	{
		bson_t *f = BCON_NEW("tags", BCON_UTF8(zone)), **z;
		int nz;

		rc = router_cfg_list(c, "shards", f, NULL, &z, &nz, err);
		bson_destroy(f);
		if (rc) {
			rc = fail_err(reply, err, rc);
			goto done;
		}
		router_docs_free(z, nz);
		if (nz == 0) {
			rc = fail(
				reply, err, E_BADVALUE,
				"zone %s does not exist: add a shard to it first (addShardToZone)",
				zone);
			goto done;
		}
	}
	for (int i = 0; i < n; i++) {
		bson_t tmin, tmax;
		char x[200], y[200];

		if (!doc_field(docs[i], "min", &tmin) || !doc_field(docs[i], "max", &tmax))
			continue;
		if (query_shard_bound_compare(&min, &tmax) < 0 &&
		    query_shard_bound_compare(&tmin, &max) < 0) {
			text_of(&tmin, x, sizeof(x));
			text_of(&tmax, y, sizeof(y));
			rc = fail(reply, err, E_ILLEGAL,
				  "zone range %s -->> %s is overlapping with existing %s -->> %s "
				  "(zone %s)",
				  a, b, x, y,
				  str_field(docs[i], "tag") ? str_field(docs[i], "tag") : "");
			goto done;
		}
	}
	{
		bson_t d = BSON_INITIALIZER;

		tag_doc(ns, &min, &max, zone, &d);
		rc = router_cfg_put(c, "tags", &d, err);
		bson_destroy(&d);
		if (rc)
			rc = fail_err(reply, err, rc);
	}
done:
	router_docs_free(docs, n);
	bson_destroy(&min);
	bson_destroy(&max);
	return rc;
}

/* ---- databases and collections ------------------------------------------------------ */

static int cmd_enable_sharding(struct router_cfg *c, const bson_t *cmd, bson_t *reply,
			       struct dfs_err *err)
{
	const char *db = str_field(cmd, "enableSharding"),
		   *primary = str_field(cmd, "primaryShard");
	struct dfs_err e = {0};
	bson_t **shards, *f, have = BSON_INITIALIZER, *d;
	int n, rc, best = -1, best_n = 0;

	if (!db || store_db_name_check(db, &e))
		return fail(reply, err, E_BADVALUE, "invalid database name '%s'%s%s", db ? db : "",
			    e.msg[0] ? ": " : "", e.msg);
	if (strcmp(db, "config") == 0 || strcmp(db, "admin") == 0 || strcmp(db, "local") == 0)
		return fail(reply, err, E_ILLEGAL, "can't shard %s database", db);
	f = by_id(db);
	rc = router_cfg_get(c, "databases", f, &have, err);
	bson_destroy(f);
	bson_destroy(&have);
	if (rc == 0)
		return 0; /* enabled already: MongoDB answers ok */
	dfs_err_clear(err);
	if ((rc = router_cfg_list(c, "shards", NULL, NULL, &shards, &n, err)))
		return fail_err(reply, err, rc);
	/* the primary: the one named, else the shard that is primary of the fewest databases */
	for (int i = 0; i < n; i++) {
		const char *id = str_field(shards[i], "_id");
		bson_t *pf = BCON_NEW("primary", BCON_UTF8(id)), **dbs;
		int nd = 0;

		if (primary && strcmp(primary, id) == 0)
			best = i, best_n = -1;
		if (best_n >= 0 && router_cfg_list(c, "databases", pf, NULL, &dbs, &nd, err) == 0) {
			router_docs_free(dbs, nd);
			if (best < 0 || nd < best_n)
				best = i, best_n = nd;
		}
		bson_destroy(pf);
	}
	if (n == 0 || best < 0 || (primary && best_n != -1)) {
		router_docs_free(shards, n);
		if (n == 0)
			return fail(reply, err, E_NOSHARD,
				    "no shards found: add one with addShard");
		return fail(reply, err, E_NOSHARD, "shard %s does not exist", primary);
	}
	{
		uint8_t uuid[16];

		uuid4(uuid);
		d = BCON_NEW("_id", BCON_UTF8(db), "primary",
			     BCON_UTF8(str_field(shards[best], "_id")), "partitioned",
			     BCON_BOOL(true), "version", "{", "uuid",
			     BCON_BIN(BSON_SUBTYPE_UUID, uuid, 16), "lastMod", BCON_INT32(1), "}");
	}
	router_docs_free(shards, n);
	rc = router_cfg_put(c, "databases", d, err);
	bson_destroy(d);
	return rc ? fail_err(reply, err, rc) : 0;
}

/* MongoDB's split points of an empty hashed collection (calculateHashedSplitPoints). */
static int hashed_points(int nchunks, int64_t *pts)
{
	int64_t interval = (INT64_MAX / nchunks) * 2, cur = 0;
	int n = 0;

	if (nchunks % 2 == 0) {
		pts[n++] = 0;
		cur += interval;
	} else {
		cur += interval / 2;
	}
	for (int i = 0; i < (nchunks - 1) / 2; i++) {
		pts[n++] = -cur;
		pts[n++] = cur;
		cur += interval;
	}
	for (int i = 1; i < n; i++) /* insertion sort: a few thousand at most */
		for (int j = i; j > 0 && pts[j - 1] > pts[j]; j--) {
			int64_t t = pts[j];

			pts[j] = pts[j - 1];
			pts[j - 1] = t;
		}
	return n;
}

/* The shard of zone z: the first in shard order holding it (NULL when none). */
static const char *zone_shard(bson_t **shards, int n, const char *z, int *rr)
{
	const char *hit[64];
	int nh = 0;

	for (int i = 0; i < n && nh < 64; i++) {
		bson_iter_t it, t;

		if (!bson_iter_init_find(&it, shards[i], "tags") || !bson_iter_recurse(&it, &t))
			continue;
		while (bson_iter_next(&t))
			if (BSON_ITER_HOLDS_UTF8(&t) && strcmp(bson_iter_utf8(&t, NULL), z) == 0)
				hit[nh++] = str_field(shards[i], "_id");
	}
	if (nh == 0)
		return NULL;
	return hit[(*rr)++ % nh];
}

/* Checks that the zone ranges given before ns was sharded fit key k (their fields a prefix
 * of it) and stores them extended with MinKey to the whole key, as ranges of a sharded
 * collection are; tags (sorted by min) are replaced by the stored ones. */
static int zones_fit(struct router_cfg *c, const char *ns, const struct query_shard_key *k,
		     bson_t **tags, int ntags, bson_t *reply, struct dfs_err *err)
{
	int rc = 0;

	for (int i = 0; !rc && i < ntags; i++) {
		bson_t tmin, tmax, min = BSON_INITIALIZER, max = BSON_INITIALIZER,
				   d = BSON_INITIALIZER, *f;
		const char *zone = str_field(tags[i], "tag") ?: "";

		if (!doc_field(tags[i], "min", &tmin) || !doc_field(tags[i], "max", &tmax)) {
			bson_destroy(&min);
			bson_destroy(&max);
			bson_destroy(&d);
			continue;
		}
		rc = zone_bound(k, &tmin, &min, "min", reply, err);
		if (!rc)
			rc = zone_bound(k, &tmax, &max, "max", reply, err);
		if (!rc) {
			f = BCON_NEW("ns", BCON_UTF8(ns));
			BSON_APPEND_DOCUMENT(f, "min", &tmin);
			rc = router_cfg_del(c, "tags", f, NULL, err);
			bson_destroy(f);
		}
		if (!rc) {
			tag_doc(ns, &min, &max, zone, &d);
			rc = router_cfg_put(c, "tags", &d, err);
			if (!rc) {
				bson_destroy(tags[i]);
				tags[i] = bson_copy(&d);
			}
		}
		bson_destroy(&min);
		bson_destroy(&max);
		bson_destroy(&d);
	}
	return rc;
}

/* Whether db.coll holds no document: it lives on its primary shard until it is sharded,
 * so that shard is asked (a missing collection is empty). */
static int coll_empty(struct router_cfg *c, const char *db, const char *coll, bool *empty,
		      struct dfs_err *err)
{
	struct router_ns ns;
	struct fs_result r;
	int rc = router_ns_load(c, db, coll, &ns, err);
	const struct router_shard *s;
	char p[ROUTER_PATH_MAX], rel[2 * DFS_MAX_NS_NAME + 2];
	struct stat st;

	if (rc)
		return rc;
	s = router_ns_shard(&ns, ns.primary);
	snprintf(rel, sizeof(rel), "%s/%s", db, coll);
	if (s)
		router_shard_path(s, rel, p, sizeof(p));
	if (!s || (rc = router_shard_ok(s, err))) {
		router_ns_release(&ns);
		return s ? rc : dfs_err_set(err, DFS_EIO, "the primary shard of %s is unknown", db);
	}
	if (stat(p, &st) != 0) {
		*empty = true;
		router_ns_release(&ns);
		return 0;
	}
	fs_result_init(&r);
	rc = router_find(&ns, db, coll, "{}?count=1", &r, err);
	if (!rc)
		*empty = strtoll(r.mem.data ? r.mem.data : "0", NULL, 10) == 0;
	fs_result_release(&r);
	router_ns_release(&ns);
	return rc;
}

static int cmd_shard_collection(struct router_cfg *c, const bson_t *cmd, bson_t *reply,
				struct dfs_err *err)
{
	const char *ns = str_field(cmd, "shardCollection");
	char db[DFS_MAX_NS_NAME + 1], coll[DFS_MAX_NS_NAME + 1], dbprim[80] = "";
	struct query_shard_key k;
	struct query_chunk_map m;
	struct dfs_err e = {0};
	bson_t key, dbdoc = BSON_INITIALIZER, have = BSON_INITIALIZER, **shards = NULL,
		    **tags = NULL, *f;
	bson_iter_t it;
	bool unique = bool_field(cmd, "unique", false);
	int nshards = 0, ntags = 0, rc, nchunks = 0, rr = 0;
	bool given = false;

	if ((rc = ns_split(ns, db, coll, reply, err)))
		return rc;
	if (!doc_field(cmd, "key", &key))
		return fail(reply, err, E_BADVALUE, "shardCollection needs a key document");
	if (query_shard_key_parse(&key, &k, &e))
		return fail(reply, err, E_BADVALUE, "%s", e.msg);
	if (unique && k.hashed >= 0)
		return fail(reply, err, E_OPTIONS, "hashed shard keys cannot be declared unique");
	if (bson_iter_init_find(&it, cmd, "numInitialChunks")) {
		int64_t v = bson_iter_as_int64(&it);

		given = true;
		if (k.hashed < 0 && v != 0)
			return fail(reply, err, E_OPTIONS,
				    "numInitialChunks is only supported when the shard key has a "
				    "hashed field");
		if (v < 0 || v > 8192 * 64)
			return fail(reply, err, E_OPTIONS, "numInitialChunks %lld is out of range",
				    (long long)v);
		nchunks = (int)v;
	}
	f = by_id(db);
	rc = router_cfg_get(c, "databases", f, &dbdoc, err);
	bson_destroy(f);
	if (rc == DFS_ENOENT) {
		dfs_err_clear(err);
		bson_destroy(&dbdoc);
		return fail(reply, err, E_ILLEGAL,
			    "sharding not enabled for db %s: run enableSharding", db);
	}
	if (rc)
		goto internal;
	snprintf(dbprim, sizeof(dbprim), "%s", str_field(&dbdoc, "primary") ?: "");
	bson_destroy(&dbdoc);
	f = by_id(ns);
	rc = router_cfg_get(c, "collections", f, &have, err);
	bson_destroy(f);
	bson_destroy(&have);
	if (rc == 0)
		return fail(reply, err, E_ALREADY, "sharding already enabled for collection %s",
			    ns);
	dfs_err_clear(err);
	if ((rc = router_cfg_list(c, "shards", NULL, NULL, &shards, &nshards, err)))
		goto internal;
	f = BCON_NEW("ns", BCON_UTF8(ns));
	{
		bson_t *bymin = BCON_NEW("min", BCON_INT32(1));

		rc = router_cfg_list(c, "tags", f, bymin, &tags, &ntags, err);
		bson_destroy(bymin);
	}
	bson_destroy(f);
	if (rc)
		goto internal;
	query_chunk_map_init(&m, &k);
	{
		bson_t lo = BSON_INITIALIZER, hi = BSON_INITIALIZER;

		query_shard_bound_extreme(&k, false, &lo);
		query_shard_bound_extreme(&k, true, &hi);
		bool empty = true;

		if (ntags > 0)
			rc = zones_fit(c, ns, &k, tags, ntags, reply, err);
		if (!rc && ntags > 0)
			rc = coll_empty(c, db, coll, &empty, err);
		if (rc) {
			bson_destroy(&lo);
			bson_destroy(&hi);
			query_chunk_map_release(&m);
			router_docs_free(shards, nshards);
			router_docs_free(tags, ntags);
			return bson_has_field(reply, "code") ? rc : fail_err(reply, err, rc);
		}
		if (ntags > 0 && !empty) {
			/* documents are there, all on the primary: one chunk there, and the
			 * balancer splits at the zones and moves (MongoDB does the same) */
			rc = query_chunk_map_add(&m, &lo, &hi, dbprim, 1, 0, err);
		} else if (ntags > 0) {
			/* zones: a chunk per range on a shard of its zone, the gaps round robin
			 * over every shard (note 4) */
			bson_t cur = BSON_INITIALIZER;
			int hole = 0;

			bson_concat(&cur, &lo);
			for (int i = 0; i < ntags && !rc; i++) {
				bson_t tmin, tmax;
				const char *zs;

				if (!doc_field(tags[i], "min", &tmin) ||
				    !doc_field(tags[i], "max", &tmax))
					continue;
				if (query_shard_bound_compare(&cur, &tmin) < 0)
					rc = query_chunk_map_add(
						&m, &cur, &tmin,
						str_field(shards[hole++ % nshards], "_id"), 1, 0,
						err);
				zs = zone_shard(shards, nshards, str_field(tags[i], "tag") ?: "",
						&rr);
				if (!rc)
					rc = query_chunk_map_add(&m, &tmin, &tmax, zs ? zs : dbprim,
								 1, 0, err);
				bson_reinit(&cur);
				bson_concat(&cur, &tmax);
			}
			if (!rc && query_shard_bound_compare(&cur, &hi) < 0)
				rc = query_chunk_map_add(&m, &cur, &hi,
							 str_field(shards[hole++ % nshards], "_id"),
							 1, 0, err);
			bson_destroy(&cur);
		} else if (k.hashed >= 0 && (nchunks > 1 || (!given && nshards > 1))) {
			/* MongoDB < 5.0: numInitialChunks (default 2 per shard), contiguous runs
			 * of chunks per shard */
			int total = nchunks > 1 ? nchunks : 2 * nshards, np, per;
			int64_t *pts = calloc((size_t)total, sizeof(*pts));
			bson_t prev = BSON_INITIALIZER;

			if (!pts)
				abort();
			np = hashed_points(total, pts);
			per = (np + 1) / nshards > 1 ? (np + 1) / nshards : 1;
			bson_concat(&prev, &lo);
			for (int i = 0; i <= np && !rc; i++) {
				bson_t next = BSON_INITIALIZER;
				const char *owner = str_field(shards[(i / per) % nshards], "_id");

				if (i < np) {
					for (int j = 0; j < k.n; j++) {
						if (j == k.hashed)
							BSON_APPEND_INT64(&next, k.f[j].path,
									  pts[i]);
						else
							BSON_APPEND_MINKEY(&next, k.f[j].path);
					}
				} else {
					bson_concat(&next, &hi);
				}
				rc = query_chunk_map_add(&m, &prev, &next, owner, 1, (uint32_t)i,
							 err);
				bson_reinit(&prev);
				bson_concat(&prev, &next);
				bson_destroy(&next);
			}
			bson_destroy(&prev);
			free(pts);
		} else {
			rc = query_chunk_map_add(&m, &lo, &hi, dbprim, 1, 0, err);
		}
		bson_destroy(&lo);
		bson_destroy(&hi);
	}
	if (!rc)
		rc = query_chunk_map_check(&m, err);
	if (!rc) {
		bson_oid_t epoch;
		uint8_t uuid[16];
		bson_t *d;

		bson_oid_init(&epoch, NULL);
		uuid4(uuid);
		d = BCON_NEW("_id", BCON_UTF8(ns), "lastmodEpoch", BCON_OID(&epoch), "lastmod",
			     BCON_DATE_TIME((int64_t)time(NULL) * 1000), "dropped",
			     BCON_BOOL(false), "key", BCON_DOCUMENT(&key), "unique",
			     BCON_BOOL(unique), "uuid", BCON_BIN(BSON_SUBTYPE_UUID, uuid, 16),
			     "noBalance", BCON_BOOL(false));
		rc = router_cfg_put(c, "collections", d, err);
		bson_destroy(d);
		if (!rc)
			rc = router_cfg_chunks_save(c, ns, &m, err);
	}
	query_chunk_map_release(&m);
	router_docs_free(shards, nshards);
	router_docs_free(tags, ntags);
	if (rc)
		return fail_err(reply, err, rc);
	BSON_APPEND_UTF8(reply, "collectionsharded", ns);
	return 0;
internal:
	router_docs_free(shards, nshards);
	router_docs_free(tags, ntags);
	return fail_err(reply, err, rc);
}

/* ---- chunks ------------------------------------------------------------------------ */

/* The shard key of a find written as a query, its key fields named by their dotted paths
 * ({"user.age": 20}, what sh.moveChunk sends), into key (reset); false when a field is
 * missing or the key is hashed (whose values the find gives unhashed). */
static bool flat_key(const struct query_shard_key *k, const bson_t *find, bson_t *key)
{
	bson_reinit(key);
	if (k->hashed >= 0)
		return false;
	for (int i = 0; i < k->n; i++) {
		bson_iter_t it;

		if (!bson_iter_init_find(&it, find, k->f[i].path) || BSON_ITER_HOLDS_DOCUMENT(&it))
			return false;
		bson_append_value(key, k->f[i].path, -1, bson_iter_value(&it));
	}
	return true;
}

/* The chunk of ns that find (a document with the shard key) or bounds ([min, max]) names. */
int router_chunk_named(const struct query_chunk_map *m, const bson_t *cmd, int *idx, bson_t *reply,
		       struct dfs_err *err)
{
	bson_t find, key = BSON_INITIALIZER;
	bson_iter_t it, b;
	struct dfs_err e = {0};

	if (doc_field(cmd, "find", &find)) {
		if (query_shard_key_of(&m->key, &find, &key, &e) &&
		    !flat_key(&m->key, &find, &key)) {
			bson_destroy(&key);
			return fail(reply, err, E_BADVALUE, "find: %s", e.msg);
		}
		*idx = query_chunk_map_find(m, &key);
		bson_destroy(&key);
		return 0;
	}
	if (bson_iter_init_find(&it, cmd, "bounds") && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &b) && bson_iter_next(&b) && BSON_ITER_HOLDS_DOCUMENT(&b)) {
		bson_t lo;
		uint32_t len;
		const uint8_t *data;

		bson_iter_document(&b, &len, &data);
		bson_init_static(&lo, data, len);
		*idx = query_chunk_map_find(m, &lo);
		if (*idx >= 0 && query_shard_bound_compare(m->c[*idx].min, &lo) == 0)
			return 0;
		return fail(reply, err, E_BADVALUE, "bounds do not name a chunk of the collection");
	}
	return fail(reply, err, E_BADVALUE, "give find (a document with the shard key) or bounds");
}

static int cmd_split(struct router_cfg *c, const bson_t *cmd, bson_t *reply, struct dfs_err *err)
{
	const char *ns = str_field(cmd, "split");
	struct query_chunk_map m;
	struct dfs_err e = {0};
	bson_t middle, mid = BSON_INITIALIZER;
	int idx, rc = router_cfg_chunks_load(c, ns ? ns : "", &m, err);

	if (rc == DFS_ENOENT) {
		dfs_err_clear(err);
		return fail(reply, err, E_NOTSHARDED, "%s is not sharded", ns ? ns : "''");
	}
	if (rc)
		return fail_err(reply, err, rc);
	if (doc_field(cmd, "middle", &middle)) {
		bson_concat(&mid, &middle);
		if (query_shard_bound_check(&m.key, &mid, "middle", &e)) {
			rc = fail(reply, err, E_BADVALUE, "%s", e.msg);
			goto done;
		}
		idx = query_chunk_map_find(&m, &mid);
	} else {
		if ((rc = router_chunk_named(&m, cmd, &idx, reply, err)))
			goto done;
		/* docfs's config holds no documents: the numeric middle (shard.c note 6) */
		if (query_chunk_middle(&m, idx, NULL, 0, &mid, &e)) {
			rc = fail(reply, err, E_BADVALUE, "%s", e.msg);
			goto done;
		}
	}
	if (query_chunk_map_split(&m, idx, &mid, &e)) {
		rc = fail(reply, err, E_BADVALUE, "%s", e.msg);
		goto done;
	}
	if ((rc = router_cfg_chunks_save(c, ns, &m, err)))
		rc = fail_err(reply, err, rc);
done:
	bson_destroy(&mid);
	query_chunk_map_release(&m);
	return rc;
}

static int cmd_move_chunk(struct router_cfg *c, const bson_t *cmd, bson_t *reply,
			  struct dfs_err *err)
{
	const char *ns = str_field(cmd, "moveChunk"), *to = str_field(cmd, "to");
	struct query_chunk_map m;
	bson_t sh = BSON_INITIALIZER;
	uint32_t major = 0;
	int idx, rc;

	if (!to)
		return fail(reply, err, E_BADVALUE, "moveChunk needs the shard to move to (to)");
	if ((rc = shard_get(c, to, &sh, err)) == DFS_ENOENT) {
		dfs_err_clear(err);
		bson_destroy(&sh);
		return fail(reply, err, E_NOSHARD, "shard %s does not exist", to);
	}
	bson_destroy(&sh);
	if (rc)
		return fail_err(reply, err, rc);
	rc = router_cfg_chunks_load(c, ns ? ns : "", &m, err);
	if (rc == DFS_ENOENT) {
		dfs_err_clear(err);
		return fail(reply, err, E_NOTSHARDED, "%s is not sharded", ns ? ns : "''");
	}
	if (rc)
		return fail_err(reply, err, rc);
	if ((rc = router_chunk_named(&m, cmd, &idx, reply, err)))
		goto done;
	if (strcmp(m.c[idx].shard, to) == 0) {
		rc = fail(reply, err, E_ILLEGAL, "that chunk is already on shard %s", to);
		goto done;
	}
	for (int i = 0; i < m.n; i++)
		major = m.c[i].major > major ? m.c[i].major : major;
	snprintf(m.c[idx].shard, sizeof(m.c[idx].shard), "%s", to);
	m.c[idx].major = major + 1; /* a migration bumps the collection's major version */
	m.c[idx].minor = 0;
	if ((rc = router_cfg_chunks_save(c, ns, &m, err))) {
		rc = fail_err(reply, err, rc);
		goto done;
	}
	BSON_APPEND_INT32(reply, "millis", 0);
done:
	query_chunk_map_release(&m);
	return rc;
}

/* ---- the balancer's state ---------------------------------------------------------- */

static bool balancer_stopped(struct router_cfg *c, struct dfs_err *err)
{
	bson_t d = BSON_INITIALIZER, *f = by_id("balancer");
	bool stopped = false;

	if (router_cfg_get(c, "settings", f, &d, err) == 0)
		stopped = bool_field(&d, "stopped", false);
	dfs_err_clear(err);
	bson_destroy(&d);
	bson_destroy(f);
	return stopped;
}

static int cmd_balancer(struct router_cfg *c, const char *name, bson_t *reply, struct dfs_err *err)
{
	bool stopped;
	int rc;

	if (strcmp(name, "balancerStatus") != 0) {
		bool stop = strcmp(name, "balancerStop") == 0;
		bson_t *d = BCON_NEW("_id", BCON_UTF8("balancer"), "mode",
				     BCON_UTF8(stop ? "off" : "full"), "stopped", BCON_BOOL(stop));

		rc = router_cfg_put(c, "settings", d, err);
		bson_destroy(d);
		if (rc)
			return fail_err(reply, err, rc);
		BSON_APPEND_UTF8(reply, "docfsNote",
				 "every docfs router's balancer reads this state at each round");
		return 0;
	}
	stopped = balancer_stopped(c, err);
	BSON_APPEND_UTF8(reply, "mode", stopped ? "off" : "full");
	BSON_APPEND_BOOL(reply, "inBalancerRound", false);
	BSON_APPEND_INT32(reply, "numBalancerRounds", 0);
	BSON_APPEND_UTF8(
		reply, "docfsNote",
		"the rounds are each docfs router's own: its /.cluster/balancer counts them");
	return 0;
}

/* ---- dispatch ---------------------------------------------------------------------- */

int router_cluster_command(struct router_cfg *c, const bson_t *cmd, bson_t *reply,
			   struct dfs_err *err)
{
	bson_iter_t it;
	const char *name;
	int rc;

	if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it))
		return fail(reply, err, E_FAILEDTOPARSE, "the command document is empty");
	name = bson_iter_key(&it);
	if (strcmp(name, "addShard") == 0)
		rc = cmd_add_shard(c, cmd, reply, err);
	else if (strcmp(name, "removeShard") == 0)
		rc = cmd_remove_shard(c, cmd, reply, err);
	else if (strcmp(name, "listShards") == 0)
		rc = cmd_list_shards(c, reply, err);
	else if (strcmp(name, "enableSharding") == 0)
		rc = cmd_enable_sharding(c, cmd, reply, err);
	else if (strcmp(name, "shardCollection") == 0)
		rc = cmd_shard_collection(c, cmd, reply, err);
	else if (strcmp(name, "addShardToZone") == 0)
		rc = cmd_shard_zone(c, cmd, true, reply, err);
	else if (strcmp(name, "removeShardFromZone") == 0)
		rc = cmd_shard_zone(c, cmd, false, reply, err);
	else if (strcmp(name, "updateZoneKeyRange") == 0 || strcmp(name, "addTagRange") == 0)
		rc = cmd_zone_range(c, cmd, name, reply, err);
	else if (strcmp(name, "split") == 0)
		rc = cmd_split(c, cmd, reply, err);
	else if (strcmp(name, "moveChunk") == 0)
		rc = cmd_move_chunk(c, cmd, reply, err);
	else if (strcmp(name, "balancerStart") == 0 || strcmp(name, "balancerStop") == 0 ||
		 strcmp(name, "balancerStatus") == 0)
		rc = cmd_balancer(c, name, reply, err);
	else
		return fail(reply, err, E_NOCMD, "no such command: '%s'", name);
	if (rc == 0) {
		/* settings.chunksize exists from the first command on (MongoDB's default) */
		bson_t d = BSON_INITIALIZER, *f = by_id("chunksize");

		if (router_cfg_get(c, "settings", f, &d, err) == DFS_ENOENT) {
			bson_t *cs = BCON_NEW("_id", BCON_UTF8("chunksize"), "value",
					      BCON_INT32(ROUTER_CHUNKSIZE_MB));

			dfs_err_clear(err);
			rc = router_cfg_put(c, "settings", cs, err);
			bson_destroy(cs);
		}
		bson_destroy(&d);
		bson_destroy(f);
		if (rc)
			return fail_err(reply, err, rc);
		BSON_APPEND_DOUBLE(reply, "ok", 1);
	}
	return rc;
}

/* ---- sh.status() ------------------------------------------------------------------- */

static void put_doc(struct dfs_buf *out, const bson_t *d)
{
	store_codec_render(d, STORE_RENDER_COMPACT, out, NULL);
}

int router_cluster_status(struct router_cfg *c, struct dfs_buf *out, struct dfs_err *err)
{
	bson_t **shards = NULL, **dbs = NULL;
	int ns = 0, nd = 0, rc;

	if ((rc = router_cfg_list(c, "shards", NULL, NULL, &shards, &ns, err)) ||
	    (rc = router_cfg_list(c, "databases", NULL, NULL, &dbs, &nd, err)))
		goto done;
	dfs_buf_puts(out, "--- Sharding Status ---\n  shards:\n");
	for (int i = 0; i < ns; i++) {
		dfs_buf_puts(out, "        ");
		put_doc(out, shards[i]);
		dfs_buf_putc(out, '\n');
	}
	dfs_buf_printf(out,
		       "  balancer:\n        Currently enabled:  %s\n"
		       "        Currently running:  (each docfs router's /.cluster/balancer)\n",
		       balancer_stopped(c, err) ? "no" : "yes");
	dfs_buf_puts(out, "  databases:\n");
	for (int i = 0; i < nd; i++) {
		const char *db = str_field(dbs[i], "_id");
		bson_t **colls = NULL;
		int nc = 0;

		dfs_buf_puts(out, "        ");
		put_doc(out, dbs[i]);
		dfs_buf_putc(out, '\n');
		if ((rc = router_cfg_list(c, "collections", NULL, NULL, &colls, &nc, err)))
			goto done;
		for (int j = 0; j < nc && !rc; j++) {
			const char *name = str_field(colls[j], "_id");
			struct query_chunk_map m;
			bson_t key, **tags = NULL, *f;
			int nt = 0;

			if (!name || strncmp(name, db, strlen(db)) != 0 || name[strlen(db)] != '.')
				continue;
			if ((rc = router_cfg_chunks_load(c, name, &m, err)))
				break;
			dfs_buf_printf(
				out,
				"                %s\n                        shard key: ", name);
			if (doc_field(colls[j], "key", &key))
				put_doc(out, &key);
			dfs_buf_printf(out,
				       "\n                        unique: %s\n"
				       "                        balancing: %s\n"
				       "                        chunks:\n",
				       bool_field(colls[j], "unique", false) ? "true" : "false",
				       bool_field(colls[j], "noBalance", false) ? "false" : "true");
			for (int s = 0; s < ns; s++) {
				const char *sid = str_field(shards[s], "_id");
				int cnt = 0;

				for (int x = 0; x < m.n; x++)
					cnt += strcmp(m.c[x].shard, sid) == 0;
				if (cnt)
					dfs_buf_printf(out,
						       "                                %s\t%d\n",
						       sid, cnt);
			}
			for (int x = 0; x < m.n; x++) {
				dfs_buf_puts(out, "                        ");
				put_doc(out, m.c[x].min);
				dfs_buf_puts(out, " -->> ");
				put_doc(out, m.c[x].max);
				dfs_buf_printf(out, " on : %s Timestamp(%u, %u)%s\n", m.c[x].shard,
					       m.c[x].major, m.c[x].minor,
					       m.c[x].jumbo ? " jumbo" : "");
			}
			f = BCON_NEW("ns", BCON_UTF8(name));
			{
				bson_t *bymin = BCON_NEW("min", BCON_INT32(1));

				rc = router_cfg_list(c, "tags", f, bymin, &tags, &nt, err);
				bson_destroy(bymin);
			}
			bson_destroy(f);
			for (int x = 0; x < nt && !rc; x++) {
				bson_t tmin, tmax;

				if (!doc_field(tags[x], "min", &tmin) ||
				    !doc_field(tags[x], "max", &tmax))
					continue;
				dfs_buf_printf(out, "                         tag: %s  ",
					       str_field(tags[x], "tag") ?: "");
				put_doc(out, &tmin);
				dfs_buf_puts(out, " -->> ");
				put_doc(out, &tmax);
				dfs_buf_putc(out, '\n');
			}
			router_docs_free(tags, nt);
			query_chunk_map_release(&m);
		}
		router_docs_free(colls, nc);
		if (rc)
			goto done;
	}
done:
	router_docs_free(shards, ns);
	router_docs_free(dbs, nd);
	return rc;
}
