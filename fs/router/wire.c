/*
 * wire.c - `docfs router -o listen=ADDR`: the router answers MongoDB's wire protocol as a
 * mongos. The wire front end (fs/wire/) frames, dispatches and keeps cursors; this file is
 * its route hook (wire_route_hook): the handshake says msg "isdbgrid", the sharding admin
 * commands run as /.cluster/command runs them (cluster.c, moveChunk through migrate.c),
 * the config database is the config store read by the wire's own handlers, and the
 * commands on documents become the requests the router mount makes for the same paths
 * (route.c): there is no second implementation of routing or of any query semantics here,
 * only the translation of a command into a path's text and of the path's answer back into
 * a reply.
 *
 * Design notes
 * 1. A find, count, distinct or explain becomes the component of a query/ or explain/ path
 *    ("<filter>?sort=..&limit=.."), run by router_find / router_explain exactly as a read
 *    of that path on the router mount; their JSON Lines answer is parsed back into the
 *    cursor's documents. The path grammar limits a component to 255 bytes once escaped,
 *    so a longer query is refused with that error (ENAMETOOLONG: 73 from the engine's
 *    codes), as the mount refuses it.
 * 2. Writes: insert, update and delete become one .bulk request (router_write; an insert
 *    as insertOnes, which route.c note 8 sends one request per shard and run), whose
 *    BulkWriteResult gives n, nModified, upserted and writeErrors at the request's indexes
 *    (ordered stops at the first, as mongos does); findAndModify is an
 *    update/ or delete/ request with returnDocument. createIndexes writes
 *    .indexes/<name> on every shard (collections exist on every shard, mount.c note 2), so
 *    a collection sharded later has its key's index wherever its chunks go; create makes
 *    the collection on every shard, as the mount's mkdir, and drop (unsharded) empties it
 *    on its primary and removes it everywhere, as rmdir; listIndexes reads the primary's
 *    .indexes/ files, dropIndexes removes them on every shard.
 * 3. The config database: the wire's handlers run on the config store itself, reads only
 *    (find, aggregate, count, distinct, listCollections, listIndexes); the field names that
 *    config.c stores with U+FF0E for '.' are decoded in the batches returned. config.version
 *    and a config.mongos entry for this router (its ping refreshed at most every 30 s when
 *    the config database is read) are written when the server starts.
 * 4. Anything else on a database: 238 NotImplemented naming the command ("not routed by
 *    docfs router yet"), never a half answer.
 */
#include "router.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs_int.h"

static struct wire_server *srv;
static struct store *bind_store; /* the store srv was bound with (router_wire_bind) */
static time_t started, last_ping;
static pthread_mutex_t ping_lock = PTHREAD_MUTEX_INITIALIZER;
static char mongos_id[300];

/* ---- small helpers ----------------------------------------------------------------- */

/* Appends text with the bytes the path grammar gives a meaning (%, /, ?, &) escaped. */
static void put_escaped(struct dfs_buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '%' || ch == '/' || ch == '?' || ch == '&' || ch < 0x20)
			dfs_buf_printf(b, "%%%02X", ch);
		else
			dfs_buf_putc(b, (char)ch);
	}
}

/* Appends doc as compact JSON, escaped. */
static int put_doc(struct dfs_buf *b, const bson_t *doc, struct dfs_err *err)
{
	struct dfs_buf t;
	int rc;

	dfs_buf_init(&t);
	rc = store_codec_render(doc, STORE_RENDER_COMPACT, &t, err);
	if (!rc)
		put_escaped(b, t.data ? t.data : "", t.len);
	dfs_buf_release(&t);
	return rc;
}

/* The array under it, documents only, as JSON text ("[{...},{...}]") appended to out:
 * false when an element is not a document. */
static bool docs_array_text(const bson_iter_t *it, struct dfs_buf *out)
{
	bson_iter_t a;
	int i = 0;

	dfs_buf_putc(out, '[');
	if (bson_iter_recurse(it, &a)) {
		while (bson_iter_next(&a)) {
			const uint8_t *data;
			uint32_t len;
			bson_t one;

			if (!BSON_ITER_HOLDS_DOCUMENT(&a))
				return false;
			bson_iter_document(&a, &len, &data);
			bson_init_static(&one, data, len);
			if (i++)
				dfs_buf_putc(out, ',');
			store_codec_render(&one, STORE_RENDER_COMPACT, out, NULL);
		}
	}
	dfs_buf_putc(out, ']');
	return true;
}

/* "?name=" or "&name=" */
static void opt_name(struct dfs_buf *b, const char *name)
{
	dfs_buf_putc(b, strchr(b->data ? b->data : "", '?') ? '&' : '?');
	dfs_buf_puts(b, name);
	dfs_buf_putc(b, '=');
}

/* A reply of the engine (the failed request's error) as the command's error. */
static int fail_dfs(struct wire_ctx *c, const struct dfs_err *e)
{
	return wire_fail_dfs(c, e);
}

/* The JSON Lines documents of text into w. */
static int docs_of_text(const char *text, size_t len, struct wire_docs *w, struct dfs_err *err)
{
	size_t at = 0, used;
	unsigned line = 1;

	for (;;) {
		bson_t *d = bson_new();
		int rc = store_codec_parse_next(text + at, len - at, line, &used, d, err);

		if (rc) {
			bson_destroy(d);
			if (rc == DFS_ENOENT) {
				dfs_err_clear(err);
				return 0;
			}
			return rc;
		}
		at += used;
		line++;
		wire_docs_take(w, d);
	}
}

/* A cursor reply (wire_cursor_reply) over the JSON Lines documents of text. */
static int reply_text(struct wire_ctx *c, const char *ns, const struct dfs_buf *text, int64_t batch,
		      bool single, bson_t *reply)
{
	struct dfs_err err = {0};
	struct wire_docs w = {0};
	struct wire_source src = {wire_docs_next, &w};
	bson_t lsid;
	int rc = 0;

	if (docs_of_text(text->data ? text->data : "", text->len, &w, &err) ||
	    wire_cursor_reply(c, ns, &src, batch, single, wire_lsid(c, &lsid), reply, &err))
		rc = fail_dfs(c, &err);
	wire_docs_release(&w);
	return rc;
}

/* The whole fs_result r (memory or spilled) appended to out. */
static int result_text(struct fs_result *r, struct dfs_buf *out)
{
	char buf[65536];
	off_t off = 0;

	for (;;) {
		size_t got = 0;
		int rc = fs_result_read(r, buf, sizeof(buf), off, &got);

		if (rc)
			return rc;
		if (!got)
			return 0;
		dfs_buf_append(out, buf, got);
		off += (off_t)got;
	}
}

/* ---- the sharding commands --------------------------------------------------------- */

static const char *const admin_cmds[] = {"addShard",
					 "removeShard",
					 "listShards",
					 "enableSharding",
					 "shardCollection",
					 "addShardToZone",
					 "removeShardFromZone",
					 "updateZoneKeyRange",
					 "addTagRange",
					 "split",
					 "moveChunk",
					 "balancerStart",
					 "balancerStop",
					 "balancerStatus",
					 NULL};

static bool generic_arg(const char *k)
{
	static const char *const g[] = {
		"lsid",	     "maxTimeMS",  "writeConcern",     "readConcern",
		"comment",   "apiVersion", "apiStrict",	       "apiDeprecationErrors",
		"txnNumber", "autocommit", "startTransaction", NULL};

	if (k[0] == '$')
		return true;
	for (int i = 0; g[i]; i++)
		if (!strcmp(g[i], k))
			return true;
	return false;
}

/* codeName of a cluster reply, kept for error_doc (which runs on this thread next). */
static _Thread_local char code_name[64];

static int admin_cmd(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	bson_t cmd = BSON_INITIALIZER, got = BSON_INITIALIZER;
	bson_iter_t it;
	int rc;

	if (strcmp(c->db, "admin") != 0) {
		bson_destroy(&cmd);
		bson_destroy(&got);
		return wire_fail(c, 13, "Unauthorized",
				 "%s may only be run against the admin database.", c->name);
	}
	if (bson_iter_init(&it, c->cmd))
		while (bson_iter_next(&it))
			if (!generic_arg(bson_iter_key(&it)))
				bson_append_iter(&cmd, NULL, 0, &it);
	rc = strcmp(c->name, "moveChunk") == 0 ? router_move_chunk(&cmd, &got, &err)
					       : router_config_command(&cmd, &got, &err);
	if (rc) {
		const char *msg = err.msg[0] ? err.msg : "the command failed";
		int code = 96;

		snprintf(code_name, sizeof(code_name), "OperationFailed");
		if (bson_iter_init_find(&it, &got, "errmsg") && BSON_ITER_HOLDS_UTF8(&it))
			msg = bson_iter_utf8(&it, NULL);
		if (bson_iter_init_find(&it, &got, "code"))
			code = (int)bson_iter_as_int64(&it);
		if (bson_iter_init_find(&it, &got, "codeName") && BSON_ITER_HOLDS_UTF8(&it))
			snprintf(code_name, sizeof(code_name), "%s", bson_iter_utf8(&it, NULL));
		rc = wire_fail(c, code, code_name, "%s", msg);
	} else if (bson_iter_init(&it, &got)) {
		while (bson_iter_next(&it))
			if (strcmp(bson_iter_key(&it), "ok") != 0)
				bson_append_iter(reply, NULL, 0, &it);
		if (!strcmp(c->name, "balancerStatus"))
			router_balancer_figures(reply);
	}
	bson_destroy(&cmd);
	bson_destroy(&got);
	return rc;
}

/* ---- the config database (note 3) ---------------------------------------------------- */

struct ping_ctx {
	bool init;
};

static int put_ping(struct router_cfg *c, void *ctx, struct dfs_err *err)
{
	struct ping_ctx *p = ctx;
	bson_t *d, f = BSON_INITIALIZER, have = BSON_INITIALIZER;
	int rc = 0;

	if (p->init) {
		BSON_APPEND_INT32(&f, "_id", 1);
		if (router_cfg_get(c, "version", &f, &have, NULL) == DFS_ENOENT) {
			bson_oid_t id;

			bson_oid_init(&id, NULL);
			d = BCON_NEW("_id", BCON_INT32(1), "clusterId", BCON_OID(&id));
			rc = router_cfg_put(c, "version", d, err);
			bson_destroy(d);
		}
	}
	bson_destroy(&f);
	bson_destroy(&have);
	if (rc)
		return rc;
	d = BCON_NEW("_id", BCON_UTF8(mongos_id), "advisoryHostFQDNs", "[", "]", "mongoVersion",
		     BCON_UTF8("7.0.0"), "ping", BCON_DATE_TIME((int64_t)time(NULL) * 1000), "up",
		     BCON_INT64((int64_t)(time(NULL) - started)), "waiting", BCON_BOOL(true));
	rc = router_cfg_put(c, "mongos", d, err);
	bson_destroy(d);
	return rc;
}

static void ping(bool init)
{
	struct ping_ctx p = {.init = init};
	struct dfs_err err = {0};
	time_t now = time(NULL);

	pthread_mutex_lock(&ping_lock);
	if (init || now - last_ping >= 30) {
		last_ping = now;
		if (router_config_update(put_ping, &p, &err))
			fs_errlog_add("router: config.mongos: %s", err.msg);
	}
	pthread_mutex_unlock(&ping_lock);
}

/* Rewrites the documents of the array key of sub-document cursor of reply with their field
 * names decoded. */
static void decode_batches(bson_t *reply)
{
	bson_t out = BSON_INITIALIZER;
	bson_iter_t it;

	if (!bson_iter_init_find(&it, reply, "cursor") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_destroy(&out);
		return;
	}
	bson_iter_init(&it, reply);
	while (bson_iter_next(&it)) {
		bson_iter_t cur;
		bson_t sub;

		if (strcmp(bson_iter_key(&it), "cursor") || !bson_iter_recurse(&it, &cur)) {
			bson_append_iter(&out, NULL, 0, &it);
			continue;
		}
		BSON_APPEND_DOCUMENT_BEGIN(&out, "cursor", &sub);
		while (bson_iter_next(&cur)) {
			bson_iter_t b;
			bson_t arr;

			if ((strcmp(bson_iter_key(&cur), "firstBatch") &&
			     strcmp(bson_iter_key(&cur), "nextBatch")) ||
			    !bson_iter_recurse(&cur, &b)) {
				bson_append_iter(&sub, NULL, 0, &cur);
				continue;
			}
			bson_append_array_begin(&sub, bson_iter_key(&cur), -1, &arr);
			while (bson_iter_next(&b)) {
				const uint8_t *data;
				uint32_t len;
				bson_t doc, dec;

				if (!BSON_ITER_HOLDS_DOCUMENT(&b)) {
					bson_append_iter(&arr, NULL, 0, &b);
					continue;
				}
				bson_iter_document(&b, &len, &data);
				bson_init_static(&doc, data, len);
				bson_init(&dec);
				router_cfg_decode(&doc, &dec);
				bson_append_document(&arr, bson_iter_key(&b), -1, &dec);
				bson_destroy(&dec);
			}
			bson_append_array_end(&sub, &arr);
		}
		bson_append_document_end(&out, &sub);
	}
	bson_reinit(reply);
	bson_concat(reply, &out);
	bson_destroy(&out);
}

static int config_cmd(struct wire_ctx *c, bson_t *reply)
{
	static const struct {
		const char *name;
		wire_handler fn;
	} reads[] = {
		{"find", wire_cmd_find},
		{"aggregate", wire_cmd_aggregate},
		{"count", wire_cmd_count},
		{"distinct", wire_cmd_distinct},
		{"getMore", wire_cmd_get_more},
		{"listCollections", wire_cmd_list_collections},
		{"listIndexes", wire_cmd_list_indexes},
		{"explain", wire_cmd_explain},
		{"collStats", wire_cmd_coll_stats},
		{"dbStats", wire_cmd_db_stats},
	};

	for (size_t i = 0; i < sizeof(reads) / sizeof(*reads); i++) {
		if (strcmp(reads[i].name, c->name))
			continue;
		if (strcmp(c->name, "getMore"))
			ping(false);
		int rc = reads[i].fn(c, reply);

		if (!rc)
			decode_batches(reply);
		return rc;
	}
	if (!strcmp(c->name, "killCursors"))
		return WIRE_ROUTE_PASS;
	return wire_fail(c, 238, "NotImplemented",
			 "'%s' on the config database is not supported by docfs router: the "
			 "cluster's config changes through the sharding commands (sh.*)",
			 c->name);
}

/* ---- routed commands on documents (notes 1, 2) ------------------------------------- */

struct routed {
	struct router_ns ns;
	char coll[DFS_MAX_NS_NAME + 1];
	char nsname[2 * DFS_MAX_NS_NAME + 2];
};

/* The collection of the command and its placement, under the routing lock (released by
 * routed_end). */
static int routed_begin(struct wire_ctx *c, struct routed *r)
{
	struct dfs_err err = {0};
	int rc;

	if ((rc = wire_arg_coll(c, r->coll, sizeof(r->coll))))
		return rc;
	if (strchr(r->coll, '/') || r->coll[0] == '.')
		return wire_fail(c, 73, "InvalidNamespace", "Invalid collection name '%s'",
				 r->coll);
	wire_ns(r->nsname, sizeof(r->nsname), c->db, r->coll);
	router_routing_lock(false);
	if (router_ns_read(c->db, r->coll, &r->ns, &err)) {
		router_routing_unlock();
		return fail_dfs(c, &err);
	}
	return 0;
}

/* Whether an unsharded collection is missing on its primary: reads of it then answer
 * nothing, as MongoDB's do, instead of the shard's ENOENT. */
static bool routed_missing(const struct wire_ctx *c, const struct routed *r)
{
	char rel[2 * DFS_MAX_NS_NAME + 2], p[ROUTER_PATH_MAX];
	const struct router_shard *s = router_ns_shard(&r->ns, r->ns.primary);
	struct stat st;

	if (r->ns.sharded || !s)
		return false;
	snprintf(rel, sizeof(rel), "%s/%s", c->db, r->coll);
	router_shard_path(s, rel, p, sizeof(p));
	return stat(p, &st) != 0 && errno == ENOENT && router_shard_ok(s, NULL) == 0;
}

static void routed_end(struct routed *r)
{
	router_ns_release(&r->ns);
	router_routing_unlock();
}

/* The component of a find (filter and options) of c->cmd (count: a count's). */
static int find_component(struct wire_ctx *c, bool count, struct dfs_buf *comp, bool *single,
			  int64_t *batch, struct dfs_err *err)
{
	bson_t v;
	int64_t n;
	int rc;

	if ((rc = wire_arg_doc(c, count ? "query" : "filter", &v)) > 1)
		return rc;
	if (rc == 1)
		dfs_buf_puts(comp, "{}");
	else if ((rc = put_doc(comp, &v, err)))
		return fail_dfs(c, err);
	if (!count && wire_arg_doc(c, "sort", &v) == 0 && !bson_empty(&v)) {
		opt_name(comp, "sort");
		put_doc(comp, &v, err);
	}
	if (!count && wire_arg_doc(c, "projection", &v) == 0 && !bson_empty(&v)) {
		opt_name(comp, "projection");
		put_doc(comp, &v, err);
	}
	{
		bson_iter_t it;

		if (bson_iter_init_find(&it, c->cmd, "hint")) {
			if (BSON_ITER_HOLDS_UTF8(&it)) {
				opt_name(comp, "hint");
				put_escaped(comp, bson_iter_utf8(&it, NULL),
					    strlen(bson_iter_utf8(&it, NULL)));
			} else if (wire_arg_doc(c, "hint", &v) == 0 && !bson_empty(&v)) {
				opt_name(comp, "hint");
				put_doc(comp, &v, err);
			}
		}
	}
	n = 0;
	if ((rc = wire_arg_int(c, "skip", &n)) > 1)
		return rc;
	if (n < 0)
		return wire_fail(c, 51024, "Location51024", "BSON field 'skip' value must be >= 0");
	if (n > 0)
		dfs_buf_printf(comp, "%sskip=%lld", strchr(comp->data, '?') ? "&" : "?",
			       (long long)n);
	n = 0;
	if ((rc = wire_arg_int(c, "limit", &n)) > 1)
		return rc;
	if (n < 0 && !count) {
		n = -n;
		*single = true;
	}
	if (n > 0)
		dfs_buf_printf(comp, "%slimit=%lld", strchr(comp->data, '?') ? "&" : "?",
			       (long long)n);
	if (batch) {
		*batch = -1;
		if ((rc = wire_arg_int(c, "batchSize", batch)) > 1)
			return rc;
		if (rc == 1)
			*batch = -1;
		wire_arg_bool(c, "singleBatch", single);
	}
	return 0;
}

/* Runs the find of c->cmd (count: a count's arguments) through router_find, the option
 * opt=val (opt may be NULL) added; the answer's text into text, the namespace into ns. */
static int routed_query(struct wire_ctx *c, bool count, const char *opt, const char *val,
			struct dfs_buf *text, char *ns, size_t nscap, int64_t *batch, bool *single)
{
	struct dfs_err err = {0};
	struct routed r;
	struct fs_result res;
	struct dfs_buf comp;
	int rc;

	if ((rc = routed_begin(c, &r)))
		return rc;
	snprintf(ns, nscap, "%s", r.nsname);
	dfs_buf_init(&comp);
	fs_result_init(&res);
	rc = find_component(c, count, &comp, single, batch, &err);
	if (!rc && opt) {
		opt_name(&comp, opt);
		put_escaped(&comp, val, strlen(val));
	}
	if (!rc && !routed_missing(c, &r) &&
	    router_find(&r.ns, c->db, r.coll, comp.data, &res, &err))
		rc = fail_dfs(c, &err);
	if (!rc)
		result_text(&res, text);
	routed_end(&r);
	fs_result_release(&res);
	dfs_buf_release(&comp);
	return rc;
}

static int r_find(struct wire_ctx *c, bson_t *reply)
{
	char ns[2 * DFS_MAX_NS_NAME + 2];
	struct dfs_buf text;
	bool single = false;
	int64_t batch = -1;
	int rc;

	dfs_buf_init(&text);
	rc = routed_query(c, false, NULL, NULL, &text, ns, sizeof(ns), &batch, &single);
	if (!rc)
		rc = reply_text(c, ns, &text, batch, single, reply);
	dfs_buf_release(&text);
	return rc;
}

static int r_count(struct wire_ctx *c, bson_t *reply)
{
	char ns[2 * DFS_MAX_NS_NAME + 2];
	struct dfs_buf text;
	bool single = false;
	int rc;

	dfs_buf_init(&text);
	rc = routed_query(c, true, "count", "1", &text, ns, sizeof(ns), NULL, &single);
	if (!rc)
		wire_append_count(reply, "n", strtoll(text.data ? text.data : "0", NULL, 10));
	dfs_buf_release(&text);
	return rc;
}

static int r_distinct(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char ns[2 * DFS_MAX_NS_NAME + 2];
	struct dfs_buf text;
	bson_iter_t it;
	bool single = false;
	int rc;

	if (!bson_iter_init_find(&it, c->cmd, "key") || !BSON_ITER_HOLDS_UTF8(&it))
		return wire_fail(c, 14, "TypeMismatch", "distinct needs a key (a string)");
	dfs_buf_init(&text);
	rc = routed_query(c, true, "distinct", bson_iter_utf8(&it, NULL), &text, ns, sizeof(ns),
			  NULL, &single);
	if (!rc) {
		bson_t arr;
		int i = 0;

		BSON_APPEND_ARRAY_BEGIN(reply, "values", &arr);
		for (char *p = text.data, *nl; !rc && p && *p; p = nl + 1) {
			bson_t one = BSON_INITIALIZER;
			bson_iter_t v;
			char key[16];

			if (!(nl = strchr(p, '\n')))
				break;
			if (store_codec_parse_value(p, (size_t)(nl - p), &one, "v", &err))
				rc = fail_dfs(c, &err);
			else if (bson_iter_init_find(&v, &one, "v")) {
				snprintf(key, sizeof(key), "%d", i++);
				bson_append_value(&arr, key, -1, bson_iter_value(&v));
			}
			bson_destroy(&one);
		}
		bson_append_array_end(reply, &arr);
	}
	dfs_buf_release(&text);
	return rc;
}

/* The error recorded in from (the explained command's context) into c. */
static void take_error(struct wire_ctx *c, const struct wire_ctx *from)
{
	c->code = from->code;
	c->code_name = from->code_name;
	c->dfs_code = from->dfs_code;
	memcpy(c->errmsg, from->errmsg, sizeof(c->errmsg));
}

static int r_explain(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct wire_ctx inner = *c;
	struct routed r;
	struct fs_result res;
	struct dfs_buf comp, text;
	bson_t ex, doc = BSON_INITIALIZER;
	bson_iter_t it;
	bool single = false;
	int rc;

	if ((rc = wire_arg_doc(c, "explain", &ex)) != 0) {
		bson_destroy(&doc);
		return rc > 1 ? rc : wire_fail(c, 9, "FailedToParse", "explain needs a command");
	}
	if (!bson_iter_init(&it, &ex) || !bson_iter_next(&it) ||
	    strcmp(bson_iter_key(&it), "find")) {
		bool named = bson_iter_init(&it, &ex) && bson_iter_next(&it);

		bson_destroy(&doc);
		return wire_fail(c, 238, "NotImplemented",
				 "explain of '%s' is not routed by docfs router yet (find only)",
				 named ? bson_iter_key(&it) : "");
	}
	inner.cmd = &ex;
	inner.name = "find";
	if ((rc = routed_begin(&inner, &r))) {
		take_error(c, &inner);
		bson_destroy(&doc);
		return rc;
	}
	dfs_buf_init(&comp);
	dfs_buf_init(&text);
	fs_result_init(&res);
	rc = find_component(&inner, false, &comp, &single, NULL, &err);
	if (!rc && bson_iter_init_find(&it, c->cmd, "verbosity") && BSON_ITER_HOLDS_UTF8(&it)) {
		opt_name(&comp, "verbosity");
		dfs_buf_puts(&comp, bson_iter_utf8(&it, NULL));
	}
	if (!rc) {
		opt_name(&comp, "format");
		dfs_buf_puts(&comp, "json");
		if (router_explain(&r.ns, c->db, r.coll, comp.data, &res, &err))
			rc = fail_dfs(&inner, &err);
	}
	if (!rc)
		result_text(&res, &text);
	routed_end(&r);
	if (!rc && store_codec_parse_doc(text.data ? text.data : "", text.len, &doc, &err))
		rc = fail_dfs(&inner, &err);
	if (!rc && bson_iter_init(&it, &doc))
		while (bson_iter_next(&it))
			if (strcmp(bson_iter_key(&it), "ok") != 0)
				bson_append_iter(reply, NULL, 0, &it);
	if (rc)
		take_error(c, &inner);
	bson_destroy(&doc);
	fs_result_release(&res);
	dfs_buf_release(&comp);
	dfs_buf_release(&text);
	return rc;
}

static int r_aggregate(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct routed r;
	struct fs_result res;
	struct dfs_buf comp, text, pipe;
	bson_iter_t it;
	bson_t cur;
	int64_t batch = -1;
	int rc;

	if (!bson_iter_init_find(&it, c->cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it))
		return wire_fail(c, 14, "TypeMismatch", "aggregate needs a pipeline (an array)");
	dfs_buf_init(&pipe);
	if (!docs_array_text(&it, &pipe)) {
		dfs_buf_release(&pipe);
		return wire_fail(c, 14, "TypeMismatch", "each stage must be a document");
	}
	if (wire_arg_doc(c, "cursor", &cur) == 0 && bson_iter_init_find(&it, &cur, "batchSize"))
		batch = bson_iter_as_int64(&it);
	if ((rc = routed_begin(c, &r))) {
		dfs_buf_release(&pipe);
		return rc;
	}
	dfs_buf_init(&comp);
	dfs_buf_init(&text);
	fs_result_init(&res);
	put_escaped(&comp, pipe.data, pipe.len);
	if (r.ns.sharded) {
		if (router_aggregate(&r.ns, c->db, r.coll, comp.data, router_merge_db(), &res,
				     &err))
			rc = fail_dfs(c, &err);
		if (!rc)
			result_text(&res, &text);
	} else {
		const struct router_shard *s = router_ns_shard(&r.ns, r.ns.primary);
		char rel[ROUTER_PATH_MAX], p[ROUTER_PATH_MAX];

		if (routed_missing(c, &r)) {
			rc = 0; /* nothing to aggregate */
		} else if (comp.len > 255) {
			rc = wire_fail(c, 73, "InvalidNamespace",
				       "the pipeline is longer than a path component (255 bytes "
				       "once escaped): not routed");
		} else {
			snprintf(rel, sizeof(rel), "%s/%s/aggregate/%s", c->db, r.coll, comp.data);
			router_shard_path(s, rel, p, sizeof(p));
			if (router_read_file(p, &text, NULL)) {
				router_shard_fail(s, rel, errno, &err);
				rc = fail_dfs(c, &err);
			}
		}
	}
	routed_end(&r);
	if (!rc)
		rc = reply_text(c, r.nsname, &text, batch, false, reply);
	fs_result_release(&res);
	dfs_buf_release(&comp);
	dfs_buf_release(&text);
	dfs_buf_release(&pipe);
	return rc;
}

/* Makes db and db/coll on every shard (mount.c note 2: they exist on all). */
static int make_everywhere(const struct router_ns *ns, const char *db, const char *coll,
			   struct dfs_err *err)
{
	for (int i = 0; i < ns->nshards; i++) {
		char rel[2 * DFS_MAX_NS_NAME + 2], p[ROUTER_PATH_MAX];

		for (int k = 0; k < 2; k++) {
			snprintf(rel, sizeof(rel), "%s%s%s", db, k ? "/" : "", k ? coll : "");
			router_shard_path(&ns->shards[i], rel, p, sizeof(p));
			if (mkdir(p, 0755) != 0 && errno != EEXIST)
				return router_shard_fail(&ns->shards[i], rel, errno, err);
		}
	}
	return 0;
}

/* The documents of a write command: the kind-1 section id, or the array field id. */
static int each_statement(struct wire_ctx *c, const char *id,
			  int (*fn)(void *ctx, const bson_t *doc), void *ctx)
{
	bson_iter_t it, a;

	for (int i = 0; c->msg && i < c->msg->nseq; i++)
		if (!strcmp(c->msg->seq[i].id, id))
			return wire_seq_each(&c->msg->seq[i], fn, ctx);
	if (bson_iter_init_find(&it, c->cmd, id) && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &a)) {
		while (bson_iter_next(&a)) {
			const uint8_t *data;
			uint32_t len;
			bson_t d;
			int rc;

			if (!BSON_ITER_HOLDS_DOCUMENT(&a))
				return -1;
			bson_iter_document(&a, &len, &data);
			bson_init_static(&d, data, len);
			if ((rc = fn(ctx, &d)))
				return rc;
		}
	}
	return 0;
}

struct lines {
	struct dfs_buf text;
	int n;
	bool bad;
	const char *kind; /* update or delete */
	char why[200];
};

static int add_line(void *ctx, const bson_t *doc)
{
	struct lines *l = ctx;

	store_codec_render(doc, STORE_RENDER_COMPACT, &l->text, NULL);
	dfs_buf_putc(&l->text, '\n');
	l->n++;
	return 0;
}

static int64_t num_of(const bson_t *d, const char *key)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, d, key) ? bson_iter_as_int64(&it) : 0;
}

/* The writeErrors of a BulkWriteResult res into reply as mongos gives them ({index, code,
 * errmsg}, the request's indexes), when there are any. */
static void put_write_errors(const bson_t *res, bson_t *reply)
{
	bson_iter_t it, e, f;
	bson_t arr;
	int i = 0;

	if (!bson_iter_init_find(&it, res, "writeErrors") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &e))
		return;
	while (bson_iter_next(&e)) {
		bson_t one;
		char key[16];

		if (!BSON_ITER_HOLDS_DOCUMENT(&e) || !bson_iter_recurse(&e, &f))
			continue;
		if (!i)
			BSON_APPEND_ARRAY_BEGIN(reply, "writeErrors", &arr);
		snprintf(key, sizeof(key), "%d", i++);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &one);
		while (bson_iter_next(&f))
			if (strcmp(bson_iter_key(&f), "op") != 0)
				bson_append_iter(&one, NULL, 0, &f);
		bson_append_document_end(&arr, &one);
	}
	if (i)
		bson_append_array_end(reply, &arr);
}

/* One document of an insert as a .bulk insertOne line. */
static int add_insert(void *ctx, const bson_t *doc)
{
	struct lines *l = ctx;
	bson_t line = BSON_INITIALIZER, op;

	BSON_APPEND_DOCUMENT_BEGIN(&line, "insertOne", &op);
	BSON_APPEND_DOCUMENT(&op, "document", doc);
	bson_append_document_end(&line, &op);
	add_line(l, &line);
	bson_destroy(&line);
	return 0;
}

/* insert: the documents as one .bulk request of insertOnes (route.c note 8: one request
 * per shard and run), so that a refused document is a writeError at its index, ordered
 * stops there and unordered goes on, as mongos answers. */
static int r_insert(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct lines l = {0};
	struct dfs_buf out;
	struct routed r;
	bson_t res = BSON_INITIALIZER;
	bool ordered = true;
	int rc;

	wire_arg_bool(c, "ordered", &ordered);
	dfs_buf_init(&l.text);
	dfs_buf_init(&out);
	if (each_statement(c, "documents", add_insert, &l)) {
		dfs_buf_release(&l.text);
		bson_destroy(&res);
		return wire_fail(c, 14, "TypeMismatch", "documents must be documents");
	}
	if ((rc = routed_begin(c, &r))) {
		dfs_buf_release(&l.text);
		bson_destroy(&res);
		return rc;
	}
	if (l.n && !r.ns.sharded && make_everywhere(&r.ns, c->db, r.coll, &err))
		rc = fail_dfs(c, &err);
	else if (l.n &&
		 router_write(&r.ns, c->db, r.coll, ordered ? ".bulk" : ".bulk?ordered=false",
			      l.text.data, l.text.len, &out, &err) &&
		 !out.len)
		rc = fail_dfs(c, &err);
	routed_end(&r);
	if (!rc && l.n && store_codec_parse_doc(out.data, out.len, &res, &err))
		rc = fail_dfs(c, &err);
	if (!rc) {
		wire_append_count(reply, "n", num_of(&res, "insertedCount"));
		put_write_errors(&res, reply);
	}
	bson_destroy(&res);
	dfs_buf_release(&l.text);
	dfs_buf_release(&out);
	return rc;
}

static bool is_operators(const bson_t *u)
{
	bson_iter_t it;

	return bson_iter_init(&it, u) && bson_iter_next(&it) && bson_iter_key(&it)[0] == '$';
}

/* One update or delete statement as a .bulk line. */
static int add_write(void *ctx, const bson_t *st)
{
	struct lines *l = ctx;
	bson_t line = BSON_INITIALIZER, op, q, u;
	bson_iter_t it;
	bool multi = false, upsert = false;
	int64_t limit = 0;

	if (bson_iter_init_find(&it, st, "q") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		const uint8_t *d;
		uint32_t n;

		bson_iter_document(&it, &n, &d);
		bson_init_static(&q, d, n);
	} else {
		snprintf(l->why, sizeof(l->why), "each statement needs q (a document)");
		l->bad = true;
		bson_destroy(&line);
		return 1;
	}
	if (!strcmp(l->kind, "delete")) {
		if (bson_iter_init_find(&it, st, "limit"))
			limit = bson_iter_as_int64(&it);
		BSON_APPEND_DOCUMENT_BEGIN(&line, limit == 1 ? "deleteOne" : "deleteMany", &op);
		BSON_APPEND_DOCUMENT(&op, "filter", &q);
	} else {
		const uint8_t *d;
		uint32_t n;

		if (!bson_iter_init_find(&it, st, "u") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
			snprintf(l->why, sizeof(l->why),
				 "u must be a document (update pipelines are not routed yet)");
			l->bad = true;
			bson_destroy(&line);
			return 1;
		}
		bson_iter_document(&it, &n, &d);
		bson_init_static(&u, d, n);
		if (bson_iter_init_find(&it, st, "multi"))
			multi = bson_iter_as_bool(&it);
		if (bson_iter_init_find(&it, st, "upsert"))
			upsert = bson_iter_as_bool(&it);
		if (!is_operators(&u)) {
			BSON_APPEND_DOCUMENT_BEGIN(&line, "replaceOne", &op);
			BSON_APPEND_DOCUMENT(&op, "filter", &q);
			BSON_APPEND_DOCUMENT(&op, "replacement", &u);
		} else {
			BSON_APPEND_DOCUMENT_BEGIN(&line, multi ? "updateMany" : "updateOne", &op);
			BSON_APPEND_DOCUMENT(&op, "filter", &q);
			BSON_APPEND_DOCUMENT(&op, "update", &u);
			if (bson_iter_init_find(&it, st, "arrayFilters"))
				bson_append_iter(&op, "arrayFilters", -1, &it);
		}
		if (upsert)
			BSON_APPEND_BOOL(&op, "upsert", true);
	}
	bson_append_document_end(&line, &op);
	add_line(l, &line);
	bson_destroy(&line);
	return 0;
}

static int r_write(struct wire_ctx *c, bson_t *reply)
{
	bool del = !strcmp(c->name, "delete"), ordered = true;
	struct dfs_err err = {0};
	struct lines l = {.kind = del ? "delete" : "update"};
	struct dfs_buf out;
	struct routed r;
	bson_t res = BSON_INITIALIZER;
	bson_iter_t it;
	int rc;

	wire_arg_bool(c, "ordered", &ordered);
	dfs_buf_init(&l.text);
	dfs_buf_init(&out);
	if (each_statement(c, del ? "deletes" : "updates", add_write, &l) || l.bad) {
		dfs_buf_release(&l.text);
		bson_destroy(&res);
		return wire_fail(c, l.bad ? 238 : 14, l.bad ? "NotImplemented" : "TypeMismatch",
				 "%s", l.bad ? l.why : "statements must be documents");
	}
	if ((rc = routed_begin(c, &r))) {
		dfs_buf_release(&l.text);
		bson_destroy(&res);
		return rc;
	}
	if (l.n &&
	    router_write(&r.ns, c->db, r.coll, ordered ? ".bulk" : ".bulk?ordered=false",
			 l.text.data, l.text.len, &out, &err) &&
	    !out.len)
		rc = fail_dfs(c, &err);
	routed_end(&r);
	if (!rc && l.n && store_codec_parse_doc(out.data, out.len, &res, &err))
		rc = fail_dfs(c, &err);
	if (!rc && num_of(&res, "ok") == 0 && bson_has_field(&res, "errmsg") &&
	    !bson_has_field(&res, "writeErrors")) {
		bson_iter_init_find(&it, &res, "errmsg");
		rc = wire_fail(c, (int)num_of(&res, "code"), "OperationFailed", "%s",
			       BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "failed");
	}
	if (!rc && del) {
		wire_append_count(reply, "n", num_of(&res, "deletedCount"));
	} else if (!rc) {
		wire_append_count(reply, "n",
				  num_of(&res, "matchedCount") + num_of(&res, "upsertedCount"));
		wire_append_count(reply, "nModified", num_of(&res, "modifiedCount"));
		if (bson_iter_init_find(&it, &res, "upsertedIds") &&
		    BSON_ITER_HOLDS_DOCUMENT(&it) && num_of(&res, "upsertedCount") > 0) {
			bson_iter_t u;
			bson_t arr;
			int i = 0;

			bson_iter_recurse(&it, &u);
			BSON_APPEND_ARRAY_BEGIN(reply, "upserted", &arr);
			while (bson_iter_next(&u)) {
				bson_t one;
				char key[16];

				snprintf(key, sizeof(key), "%d", i++);
				BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &one);
				BSON_APPEND_INT32(&one, "index", atoi(bson_iter_key(&u)));
				bson_append_value(&one, "_id", 3, bson_iter_value(&u));
				bson_append_document_end(&arr, &one);
			}
			bson_append_array_end(reply, &arr);
		}
	}
	if (!rc)
		put_write_errors(&res, reply);
	bson_destroy(&res);
	dfs_buf_release(&l.text);
	dfs_buf_release(&out);
	return rc;
}

/* findAndModify: an update/ or delete/ path with returnDocument (route.c note 6: one
 * shard, or an _id), its {lastErrorObject, value} the reply. */
static int r_find_and_modify(struct wire_ctx *c, bson_t *reply)
{
	static const char *const refused_opts[] = {"collation", "let", NULL};
	struct dfs_err err = {0};
	bool remove = false, upsert = false, newd = false;
	struct dfs_buf rest, text, out;
	struct routed r;
	bson_t q, u, v, res = BSON_INITIALIZER;
	bson_iter_t it;
	int rc, has_u;

	if ((rc = wire_refuse_opts(c, c->cmd, c->name, refused_opts)))
		goto early;
	wire_arg_bool(c, "remove", &remove);
	wire_arg_bool(c, "new", &newd);
	wire_arg_bool(c, "upsert", &upsert);
	if (bson_iter_init_find(&it, c->cmd, "update") && BSON_ITER_HOLDS_ARRAY(&it)) {
		rc = wire_fail(c, 238, "NotImplemented",
			       "update pipelines are not routed by docfs router yet");
		goto early;
	}
	if ((rc = wire_arg_doc(c, "query", &q)) > 1 ||
	    (has_u = wire_arg_doc(c, "update", &u)) > 1) {
		rc = rc > 1 ? rc : has_u;
		goto early;
	}
	if (remove == !has_u) {
		rc = wire_fail(c, 9, "FailedToParse",
			       remove ? "Cannot specify both an update and remove=true"
				      : "Either an update or remove=true must be specified");
		goto early;
	}
	dfs_buf_init(&rest);
	dfs_buf_init(&text);
	dfs_buf_init(&out);
	dfs_buf_puts(&rest, remove ? "delete/" : "update/");
	if (rc == 1)
		dfs_buf_puts(&rest, "{}");
	else
		put_doc(&rest, &q, &err);
	opt_name(&rest, "returnDocument");
	dfs_buf_puts(&rest, newd && !remove ? "after" : "before");
	if (upsert && !remove) {
		opt_name(&rest, "upsert");
		dfs_buf_puts(&rest, "true");
	}
	if (wire_arg_doc(c, "sort", &v) == 0 && !bson_empty(&v)) {
		opt_name(&rest, "sort");
		put_doc(&rest, &v, &err);
	}
	if (wire_arg_doc(c, "fields", &v) == 0 && !bson_empty(&v)) {
		opt_name(&rest, "projection");
		put_doc(&rest, &v, &err);
	}
	if (!remove && bson_iter_init_find(&it, c->cmd, "arrayFilters") &&
	    BSON_ITER_HOLDS_ARRAY(&it)) {
		struct dfs_buf arr;

		dfs_buf_init(&arr);
		docs_array_text(&it, &arr);
		opt_name(&rest, "arrayFilters");
		put_escaped(&rest, arr.data, arr.len);
		dfs_buf_release(&arr);
	}
	if (!remove)
		store_codec_render(&u, STORE_RENDER_COMPACT, &text, NULL);
	else
		dfs_buf_puts(&text, "{}"); /* a delete/ request: a document of options */
	if ((rc = routed_begin(c, &r)))
		goto done;
	if (upsert && make_everywhere(&r.ns, c->db, r.coll, &err))
		rc = fail_dfs(c, &err);
	else if (!upsert && routed_missing(c, &r))
		dfs_buf_puts(&out, "{\"lastErrorObject\": {\"n\": 0, \"updatedExisting\": false}, "
				   "\"value\": null}");
	else if (router_write(&r.ns, c->db, r.coll, rest.data, text.data ? text.data : "", text.len,
			      &out, &err))
		rc = fail_dfs(c, &err);
	routed_end(&r);
	if (!rc && store_codec_parse_doc(out.data ? out.data : "", out.len, &res, &err))
		rc = fail_dfs(c, &err);
	if (!rc && bson_iter_init(&it, &res))
		while (bson_iter_next(&it))
			if (!strcmp(bson_iter_key(&it), "lastErrorObject") ||
			    !strcmp(bson_iter_key(&it), "value"))
				bson_append_iter(reply, NULL, 0, &it);
done:
	dfs_buf_release(&rest);
	dfs_buf_release(&text);
	dfs_buf_release(&out);
early:
	bson_destroy(&res);
	return rc;
}

static int r_create_indexes(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct routed r;
	bson_iter_t it, a;
	int rc, n = 0;

	if (!bson_iter_init_find(&it, c->cmd, "indexes") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &a))
		return wire_fail(c, 14, "TypeMismatch", "createIndexes needs indexes (an array)");
	if ((rc = routed_begin(c, &r)))
		return rc;
	if (make_everywhere(&r.ns, c->db, r.coll, &err))
		rc = fail_dfs(c, &err);
	while (!rc && bson_iter_next(&a)) {
		const uint8_t *data;
		uint32_t len;
		bson_t spec;
		bson_iter_t nm;
		struct dfs_buf text;
		char rel[ROUTER_PATH_MAX];

		if (!BSON_ITER_HOLDS_DOCUMENT(&a)) {
			rc = wire_fail(c, 14, "TypeMismatch", "each index must be a document");
			break;
		}
		bson_iter_document(&a, &len, &data);
		bson_init_static(&spec, data, len);
		if (!bson_iter_init_find(&nm, &spec, "name") || !BSON_ITER_HOLDS_UTF8(&nm) ||
		    !fs_index_name_ok(bson_iter_utf8(&nm, NULL))) {
			rc = wire_fail(c, 9, "FailedToParse", "each index needs a usable name");
			break;
		}
		dfs_buf_init(&text);
		store_codec_render(&spec, STORE_RENDER_COMPACT, &text, NULL);
		snprintf(rel, sizeof(rel), "%s/%s/.indexes/%s", c->db, r.coll,
			 bson_iter_utf8(&nm, NULL));
		for (int i = 0; !rc && i < r.ns.nshards; i++)
			if (router_shard_write(&r.ns.shards[i], rel, O_WRONLY | O_CREAT | O_TRUNC,
					       text.data, text.len, &err))
				rc = fail_dfs(c, &err);
		dfs_buf_release(&text);
		n++;
	}
	routed_end(&r);
	if (!rc) {
		BSON_APPEND_BOOL(reply, "createdCollectionAutomatically", false);
		wire_append_count(reply, "numIndexesCreated", n);
	}
	return rc;
}

/* The union of the names in dir rel over every shard (no dot names), sorted. */
static int names_union(const struct router_ns *ns, const char *rel, bool dirs_only,
		       struct wire_docs *w, const char *what, struct dfs_err *err)
{
	char **names = NULL;
	size_t n = 0, cap = 0;

	for (int i = 0; i < ns->nshards; i++) {
		char p[ROUTER_PATH_MAX];
		DIR *d;
		struct dirent *de;

		router_shard_path(&ns->shards[i], rel, p, sizeof(p));
		if (!(d = opendir(p))) {
			if (errno == ENOENT)
				continue;
			for (size_t k = 0; k < n; k++)
				free(names[k]);
			free(names);
			return router_shard_fail(&ns->shards[i], rel[0] ? rel : "/", errno, err);
		}
		while ((de = readdir(d))) {
			bool have = false;

			if (de->d_name[0] == '.' ||
			    (dirs_only && de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
				continue;
			for (size_t k = 0; k < n && !have; k++)
				have = !strcmp(names[k], de->d_name);
			if (have)
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 16;
				if (!(names = realloc(names, cap * sizeof(*names))))
					abort();
			}
			names[n++] = strdup(de->d_name);
		}
		closedir(d);
	}
	for (size_t k = 0; k < n; k++) {
		bson_t *doc = bson_new();

		BSON_APPEND_UTF8(doc, "name", names[k]);
		if (!strcmp(what, "collection")) {
			bson_t o;

			BSON_APPEND_UTF8(doc, "type", "collection");
			BSON_APPEND_DOCUMENT_BEGIN(doc, "options", &o);
			bson_append_document_end(doc, &o);
			BSON_APPEND_DOCUMENT_BEGIN(doc, "info", &o);
			BSON_APPEND_BOOL(&o, "readOnly", false);
			bson_append_document_end(doc, &o);
		} else {
			BSON_APPEND_INT64(doc, "sizeOnDisk", 0);
			BSON_APPEND_BOOL(doc, "empty", false);
		}
		wire_docs_take(w, doc);
		free(names[k]);
	}
	free(names);
	return 0;
}

static int r_list_collections(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct wire_docs w = {0}, keep = {0};
	struct router_ns ns;
	struct query_expr *e = NULL;
	bson_t filter, lsid;
	int rc = 0, has;

	if ((has = wire_arg_doc(c, "filter", &filter)) > 1)
		return has;
	if (!has && query_filter_parse(&filter, &e, &err))
		return fail_dfs(c, &err);
	if (router_ns_read(NULL, NULL, &ns, &err)) {
		query_expr_free(e);
		return fail_dfs(c, &err);
	}
	if (names_union(&ns, c->db, true, &w, "collection", &err))
		rc = fail_dfs(c, &err);
	router_ns_release(&ns);
	for (size_t i = 0; !rc && i < w.n; i++) {
		if (e && !query_filter_match(e, w.d[i], NULL))
			continue;
		wire_docs_take(&keep, w.d[i]);
		w.d[i] = NULL;
	}
	if (!rc) {
		struct wire_source src = {wire_docs_next, &keep};
		char nsn[DFS_MAX_NS_NAME + 32];

		snprintf(nsn, sizeof(nsn), "%s.$cmd.listCollections", c->db);
		if (wire_cursor_reply(c, nsn, &src, -1, false, wire_lsid(c, &lsid), reply, &err))
			rc = fail_dfs(c, &err);
	}
	query_expr_free(e);
	wire_docs_release(&keep);
	wire_docs_release(&w);
	return rc;
}

/* The index specs of the routed collection r into out: the .indexes/ files on its primary
 * shard (every shard has them: createIndexes writes them everywhere), their statistics left
 * out. 0, or a wire_fail code (26 when the collection does not exist). */
static int index_specs(struct wire_ctx *c, const struct routed *r, struct wire_docs *out)
{
	struct dfs_err err = {0};
	struct wire_docs w = {0};
	struct router_ns one;
	const struct router_shard *s = router_ns_shard(&r->ns, r->ns.primary);
	char rel[ROUTER_PATH_MAX], p[ROUTER_PATH_MAX];
	struct stat st;
	int rc = 0;

	snprintf(rel, sizeof(rel), "%s/%s", c->db, r->coll);
	router_shard_path(s, rel, p, sizeof(p));
	if (stat(p, &st) != 0)
		return wire_fail(c, 26, "NamespaceNotFound", "ns does not exist: %s", r->nsname);
	one = r->ns;
	one.shards = (struct router_shard *)s;
	one.nshards = 1;
	snprintf(rel, sizeof(rel), "%s/%s/.indexes", c->db, r->coll);
	if (names_union(&one, rel, false, &w, "index", &err))
		rc = fail_dfs(c, &err);
	/* _id_ first: every collection has it, and .indexes/ does not list it (an archive of
	 * the collection must not hold it) */
	for (size_t i = 0; !rc && i <= w.n; i++) {
		struct dfs_buf text;
		bson_t *spec, tmp = BSON_INITIALIZER;
		bson_iter_t it, nm;
		char f[ROUTER_PATH_MAX + 256];
		const char *name = "_id_";
		size_t used;

		if (i > 0) {
			bson_iter_init_find(&nm, w.d[i - 1], "name");
			name = bson_iter_utf8(&nm, NULL);
			if (!strcmp(name, "_id_"))
				continue;
		}
		spec = bson_new();
		dfs_buf_init(&text);
		snprintf(f, sizeof(f), "%s/%s", rel, name);
		router_shard_path(s, f, p, sizeof(p));
		if (router_read_file(p, &text, NULL)) {
			router_shard_fail(s, f, errno, &err);
			rc = fail_dfs(c, &err);
		} else if (store_codec_parse_next(text.data ? text.data : "", text.len, 1, &used,
						  &tmp, &err)) {
			rc = fail_dfs(c, &err);
		} else if (bson_iter_init(&it, &tmp)) {
			while (bson_iter_next(&it))
				if (strcmp(bson_iter_key(&it), "stats") != 0)
					bson_append_iter(spec, NULL, 0, &it);
		}
		bson_destroy(&tmp);
		dfs_buf_release(&text);
		wire_docs_take(out, spec);
	}
	wire_docs_release(&w);
	return rc;
}

static int r_list_indexes(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct wire_docs out = {0};
	struct wire_source src = {wire_docs_next, &out};
	struct routed r;
	bson_t lsid;
	int rc;

	if ((rc = routed_begin(c, &r)))
		return rc;
	rc = index_specs(c, &r, &out);
	routed_end(&r);
	if (!rc &&
	    wire_cursor_reply(c, r.nsname, &src, -1, false, wire_lsid(c, &lsid), reply, &err))
		rc = fail_dfs(c, &err);
	wire_docs_release(&out);
	return rc;
}

/* Whether index spec (a listIndexes document) is named by the dropIndexes argument v: its
 * name, its key pattern, "*" (every index but _id_), or an array of names. */
static bool index_named(const bson_t *spec, const bson_iter_t *v)
{
	bson_iter_t it, a;
	const char *name = "";

	if (bson_iter_init_find(&it, spec, "name") && BSON_ITER_HOLDS_UTF8(&it))
		name = bson_iter_utf8(&it, NULL);
	if (BSON_ITER_HOLDS_UTF8(v))
		return !strcmp(bson_iter_utf8(v, NULL), "*")
			       ? strcmp(name, "_id_") != 0
			       : !strcmp(bson_iter_utf8(v, NULL), name);
	if (BSON_ITER_HOLDS_ARRAY(v) && bson_iter_recurse(v, &a)) {
		while (bson_iter_next(&a))
			if (BSON_ITER_HOLDS_UTF8(&a) && !strcmp(bson_iter_utf8(&a, NULL), name))
				return true;
		return false;
	}
	if (BSON_ITER_HOLDS_DOCUMENT(v) && bson_iter_init_find(&it, spec, "key") &&
	    BSON_ITER_HOLDS_DOCUMENT(&it)) {
		const uint8_t *d1, *d2;
		uint32_t l1, l2;

		bson_iter_document(v, &l1, &d1);
		bson_iter_document(&it, &l2, &d2);
		return l1 == l2 && !memcmp(d1, d2, l1);
	}
	return false;
}

/* dropIndexes: the .indexes/<name> files of the named indexes removed on every shard. */
static int r_drop_indexes(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct wire_docs specs = {0};
	struct routed r;
	bson_iter_t v;
	int rc, hit = 0;

	if (!bson_iter_init_find(&v, c->cmd, "index"))
		return wire_fail(c, 9, "FailedToParse", "dropIndexes needs index");
	if ((rc = routed_begin(c, &r)))
		return rc;
	rc = index_specs(c, &r, &specs);
	for (size_t i = 0; !rc && i < specs.n; i++) {
		bson_iter_t nm;
		char rel[ROUTER_PATH_MAX];

		if (!index_named(specs.d[i], &v) || !bson_iter_init_find(&nm, specs.d[i], "name"))
			continue;
		if (!strcmp(bson_iter_utf8(&nm, NULL), "_id_")) {
			rc = wire_fail(c, 72, "InvalidOptions", "cannot drop _id index");
			break;
		}
		hit++;
		snprintf(rel, sizeof(rel), "%s/%s/.indexes/%s", c->db, r.coll,
			 bson_iter_utf8(&nm, NULL));
		for (int k = 0; !rc && k < r.ns.nshards; k++) {
			char p[ROUTER_PATH_MAX];

			router_shard_path(&r.ns.shards[k], rel, p, sizeof(p));
			if (unlink(p) != 0 && errno != ENOENT) {
				router_shard_fail(&r.ns.shards[k], rel, errno, &err);
				rc = fail_dfs(c, &err);
			}
		}
	}
	routed_end(&r);
	if (!rc && !hit && !(BSON_ITER_HOLDS_UTF8(&v) && !strcmp(bson_iter_utf8(&v, NULL), "*")))
		rc = wire_fail(c, 27, "IndexNotFound",
			       "index not found with name or pattern given");
	if (!rc)
		wire_append_count(reply, "nIndexesWas", (int64_t)specs.n);
	wire_docs_release(&specs);
	return rc;
}

/* create: the collection made on every shard (no options: a capped or view collection is
 * not routed). */
static int r_create(struct wire_ctx *c, bson_t *reply)
{
	static const char *const opts[] = {"capped",	"size",		  "max",
					   "viewOn",	"pipeline",	  "timeseries",
					   "validator", "clusteredIndex", NULL};
	struct dfs_err err = {0};
	struct routed r;
	char rel[ROUTER_PATH_MAX], p[ROUTER_PATH_MAX];
	struct stat st;
	int rc;

	(void)reply;
	if ((rc = wire_refuse_opts(c, c->cmd, "create through docfs router", opts)))
		return rc;
	if ((rc = routed_begin(c, &r)))
		return rc;
	snprintf(rel, sizeof(rel), "%s/%s", c->db, r.coll);
	router_shard_path(router_ns_shard(&r.ns, r.ns.primary), rel, p, sizeof(p));
	if (stat(p, &st) == 0)
		rc = wire_fail(c, 48, "NamespaceExists", "Collection %s already exists.", r.nsname);
	else if (make_everywhere(&r.ns, c->db, r.coll, &err))
		rc = fail_dfs(c, &err);
	routed_end(&r);
	return rc;
}

/* drop of an unsharded collection: its documents deleted on the primary (a delete/ of
 * everything), then the directory removed on every shard as the mount's rmdir does. A
 * sharded one is refused: its config (collections, chunks) would have to go with it. */
static int r_drop(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct wire_docs ix = {0};
	struct dfs_buf out;
	struct routed r;
	char rel[ROUTER_PATH_MAX];
	int rc;

	if ((rc = routed_begin(c, &r)))
		return rc;
	dfs_buf_init(&out);
	if (r.ns.sharded) {
		rc = wire_fail(c, 238, "NotImplemented",
			       "drop of sharded collection %s is not routed by docfs router yet",
			       r.nsname);
	} else if (routed_missing(c, &r)) {
		rc = 0; /* MongoDB 7.0: dropping what does not exist succeeds */
	} else {
		struct router_ns one = r.ns;

		one.shards = (struct router_shard *)router_ns_shard(&r.ns, r.ns.primary);
		one.nshards = 1;
		snprintf(rel, sizeof(rel), "%s/%s/.indexes", c->db, r.coll);
		if (names_union(&one, rel, false, &ix, "index", &err) ||
		    router_write(&r.ns, c->db, r.coll, "delete/{}", "{}", 2, &out, &err))
			rc = fail_dfs(c, &err);
		for (int i = 0; !rc && i < r.ns.nshards; i++) {
			char p[ROUTER_PATH_MAX];

			snprintf(rel, sizeof(rel), "%s/%s", c->db, r.coll);
			router_shard_path(&r.ns.shards[i], rel, p, sizeof(p));
			if (rmdir(p) != 0 && errno != ENOENT) {
				router_shard_fail(&r.ns.shards[i], rel, errno, &err);
				rc = fail_dfs(c, &err);
			}
		}
		if (!rc) {
			wire_append_count(reply, "nIndexesWas", (int64_t)ix.n);
			BSON_APPEND_UTF8(reply, "ns", r.nsname);
		}
	}
	routed_end(&r);
	wire_docs_release(&ix);
	dfs_buf_release(&out);
	return rc;
}

static int r_list_databases(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	struct wire_docs w = {0};
	struct router_ns ns;
	bool names = false;
	bson_t arr;
	int rc = 0;

	wire_arg_bool(c, "nameOnly", &names);
	if (router_ns_read(NULL, NULL, &ns, &err))
		return fail_dfs(c, &err);
	if (names_union(&ns, "", true, &w, "database", &err))
		rc = fail_dfs(c, &err);
	if (!rc) {
		/* the config database is the router's own (a mongos lists it too) */
		bson_t *cfg = bson_new();

		BSON_APPEND_UTF8(cfg, "name", "config");
		BSON_APPEND_INT64(cfg, "sizeOnDisk", 0);
		BSON_APPEND_BOOL(cfg, "empty", false);
		wire_docs_take(&w, cfg);
	}
	router_ns_release(&ns);
	if (!rc) {
		BSON_APPEND_ARRAY_BEGIN(reply, "databases", &arr);
		for (size_t i = 0; i < w.n; i++) {
			char key[24];

			snprintf(key, sizeof(key), "%zu", i);
			BSON_APPEND_DOCUMENT(&arr, key, w.d[i]);
		}
		bson_append_array_end(reply, &arr);
		if (!names)
			BSON_APPEND_INT64(reply, "totalSize", 0);
	}
	wire_docs_release(&w);
	return rc;
}

/* ---- the hook ---------------------------------------------------------------------- */

static const struct {
	const char *name;
	wire_handler fn;
} routed_cmds[] = {
	{"find", r_find},
	{"count", r_count},
	{"distinct", r_distinct},
	{"explain", r_explain},
	{"aggregate", r_aggregate},
	{"insert", r_insert},
	{"update", r_write},
	{"delete", r_write},
	{"findAndModify", r_find_and_modify},
	{"findandmodify", r_find_and_modify},
	{"createIndexes", r_create_indexes},
	{"listCollections", r_list_collections},
	{"listIndexes", r_list_indexes},
	{"create", r_create},
	{"drop", r_drop},
	{"dropIndexes", r_drop_indexes},
	{"deleteIndexes", r_drop_indexes},
};

/* What the router answers as a plain server would (its own state, no database; the
 * authentication conversation against the users of its config store). */
static const char *const own_cmds[] = {"ping",
				       "buildInfo",
				       "buildinfo",
				       "getParameter",
				       "getLog",
				       "endSessions",
				       "killSessions",
				       "connectionStatus",
				       "hostInfo",
				       "listCommands",
				       "getMore",
				       "killCursors",
				       "serverStatus",
				       "currentOp",
				       "killOp",
				       "saslStart",
				       "saslContinue",
				       "logout",
				       NULL};

static bool in_list(const char *const *l, const char *name)
{
	for (int i = 0; l[i]; i++)
		if (!strcmp(l[i], name))
			return true;
	return false;
}

static int route(struct wire_ctx *c, bson_t *reply)
{
	c->store = router_config_store();
	if (!strcmp(c->name, "hello") || !strcmp(c->name, "isMaster") ||
	    !strcmp(c->name, "ismaster")) {
		int rc = wire_cmd_hello(c, reply);

		BSON_APPEND_UTF8(reply, "msg", "isdbgrid");
		return rc;
	}
	if (in_list(admin_cmds, c->name))
		return admin_cmd(c, reply);
	if (!strcmp(c->db, "config"))
		return config_cmd(c, reply);
	if (in_list(own_cmds, c->name))
		return WIRE_ROUTE_PASS;
	if (!strcmp(c->name, "listDatabases"))
		return r_list_databases(c, reply);
	if (strcmp(c->db, "admin") && strcmp(c->db, "local"))
		for (size_t i = 0; i < sizeof(routed_cmds) / sizeof(*routed_cmds); i++)
			if (!strcmp(routed_cmds[i].name, c->name))
				return routed_cmds[i].fn(c, reply);
	if (!wire_command_known(c->name) && !in_list(admin_cmds, c->name))
		return WIRE_ROUTE_PASS; /* 59 CommandNotFound, or 238 for the known ones */
	return wire_fail(c, 238, "NotImplemented",
			 "'%s' on database '%s' is not routed by docfs router yet", c->name, c->db);
}

int router_wire_bind(const char *config, const char *const *addrs, int n, bool noauth,
		     struct dfs_err *err)
{
	int rc;

	/* the server's own store: the config store's directory, no database opened before the
	 * fork (the commands run on the router's config store, set by route) */
	if ((rc = store_open(config, false, &bind_store, err)))
		return rc;
	if ((rc = wire_server_bind(bind_store, addrs, n, noauth, &srv, err))) {
		store_free(bind_store);
		bind_store = NULL;
	}
	return rc;
}

int router_wire_start(struct dfs_err *err)
{
	char host[256] = "localhost";
	const char *a, *colon;

	if (!srv)
		return 0;
	gethostname(host, sizeof(host) - 1);
	/* config.mongos _id: "<host>:<port>" as bound (a port 0 becomes the kernel's) */
	a = wire_server_addr(srv, 0);
	colon = strrchr(a, ':');
	snprintf(mongos_id, sizeof(mongos_id), "%s:%s", host, a[0] != '/' && colon ? colon + 1 : a);
	started = time(NULL);
	wire_route_hook = route;
	ping(true);
	return wire_server_start(srv, err);
}

void router_wire_stop(void)
{
	wire_server_stop(srv);
	srv = NULL;
	wire_route_hook = NULL;
	store_free(bind_store);
	bind_store = NULL;
}
