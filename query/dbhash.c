/*
 * dbhash.c - MongoDB's dbHash command over one database: an MD5 per collection and one for
 * the database, so that two stores (the members of a replica set, a restored copy) can be
 * compared without moving their documents. Both front ends print what it builds (the wire
 * protocol's dbHash, `docfs dbhash STORE DB`). It only reads.
 *
 * What is hashed, as mongod 7.0 does it (src/mongo/db/commands/dbhash.cpp):
 *  1. A collection's hash is the MD5 of the BSON bytes of its documents, concatenated, in
 *     _id order (mongod scans its _id index; a capped or clustered collection without one
 *     is scanned in natural order, which docfs never needs: every collection has _id_). The
 *     bytes are the stored document as it is (field order included), so a store holding
 *     the documents mongod would hold hashes as mongod does. Scratch files are not
 *     documents and are not hashed.
 *  2. The database's md5 is the MD5 of the collections' hex digests (32 lowercase
 *     characters each, no separator) in collection name order (byte order: mongod's
 *     std::map), over the collections hashed.
 *  3. Left out, as mongod leaves them out: collections that are not replicated
 *     (system.profile, and every collection of the "local" database), "tmp.mr." ones,
 *     names not in "collections" when that array is given and not empty. A name given that
 *     does not exist is simply absent.
 *  4. capped lists the capped collections hashed, in name order. An empty collection's hash
 *     is the MD5 of nothing (d41d8cd98f00b204e9800998ecf8427e), as in mongod.
 */
#include "query_int.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct coll_ref {
	char name[DFS_MAX_NS_NAME + 1]; /* collection name */
	int64_t id;			/* its store id */
	bool capped;			/* a capped collection */
};

struct coll_list {
	struct coll_ref *v; /* Owned: the collections to hash */
	size_t n, cap;
	const bson_t *want; /* Borrowed: the names asked for (an array), or NULL for all */
};

/* Whether array want (NULL or empty: everything) names name. */
static bool wanted(const bson_t *want, const char *name)
{
	bson_iter_t it;
	bool empty = true;

	if (!want || !bson_iter_init(&it, want))
		return true;
	while (bson_iter_next(&it)) {
		empty = false;
		if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), name) == 0)
			return true;
	}
	return empty;
}

static int collect(void *ctx, const struct store_coll *c)
{
	struct coll_list *l = ctx;

	if (strcmp(c->name, STORE_PROFILE_COLL) == 0 || strncmp(c->name, "tmp.mr.", 7) == 0 ||
	    !wanted(l->want, c->name))
		return 0;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			abort();
	}
	memcpy(l->v[l->n].name, c->name, sizeof(c->name));
	l->v[l->n].id = c->id;
	l->v[l->n].capped = c->capped;
	l->n++;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct coll_ref *)a)->name, ((const struct coll_ref *)b)->name);
}

static void hex(const unsigned char d[16], char out[33])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < 16; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[32] = 0;
}

/* The hex MD5 of collection coll's documents in _id order (note 1) into out. */
static int hash_coll(struct store_txn *t, int64_t coll, char out[33], struct dfs_err *err)
{
	bson_t order = BSON_INITIALIZER;
	struct query_find_opts o = {0};
	struct query_cursor *cur = NULL;
	EVP_MD_CTX *md = query__md5_new();
	unsigned char d[16];
	unsigned int dn = sizeof(d);
	const bson_t *doc;
	int rc;

	BSON_APPEND_INT32(&order, "_id", 1);
	o.sort = &order;
	o.hint = &order; /* the _id_ index: never an in-memory sort */
	rc = query_find_open(t, coll, &o, &cur, err);
	while (!rc && !(rc = query_cursor_next(cur, &doc, err)))
		EVP_DigestUpdate(md, bson_get_data(doc), doc->len);
	if (rc == DFS_ENOENT)
		rc = 0;
	query_cursor_free(cur);
	bson_destroy(&order);
	EVP_DigestFinal_ex(md, d, &dn);
	EVP_MD_CTX_free(md);
	if (!rc)
		hex(d, out);
	return rc;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int query_dbhash(struct store_db *db, const char *host, const bson_t *colls, bson_t *out,
		 struct dfs_err *err)
{
	struct coll_list l = {.want = colls};
	struct store_txn *t = NULL;
	EVP_MD_CTX *all = NULL;
	bson_t hashes, capped;
	bson_iter_t it;
	int64_t start = now_ms(), ms;
	unsigned char d[16];
	unsigned int dn = sizeof(d);
	char sum[33], key[16];
	uint32_t ncapped = 0;
	int rc = 0;

	if (colls && bson_iter_init(&it, colls))
		while (bson_iter_next(&it))
			if (!BSON_ITER_HOLDS_UTF8(&it))
				return dfs_err_set(err, DFS_EINVAL,
						   "collections entries have to be strings");
	if (db && (rc = store_txn_begin(db, false, &t, err)))
		return rc;
	if (db && strcmp(store_db_name(db), "local") != 0) /* nothing of "local" is replicated */
		rc = store_coll_list(t, collect, &l, err);
	if (rc)
		goto done;
	if (l.n) /* qsort(NULL, 0) is undefined */
		qsort(l.v, l.n, sizeof(*l.v), by_name);
	BSON_APPEND_UTF8(out, "host", host);
	BSON_APPEND_DOCUMENT_BEGIN(out, "collections", &hashes);
	all = query__md5_new();
	for (size_t i = 0; i < l.n && !rc; i++) {
		if ((rc = hash_coll(t, l.v[i].id, sum, err))) {
			dfs_err_prefix(err, "collection '%s': ", l.v[i].name);
			break;
		}
		BSON_APPEND_UTF8(&hashes, l.v[i].name, sum);
		EVP_DigestUpdate(all, sum, 32);
	}
	bson_append_document_end(out, &hashes);
	if (rc)
		goto done;
	BSON_APPEND_ARRAY_BEGIN(out, "capped", &capped);
	for (size_t i = 0; i < l.n; i++) {
		if (!l.v[i].capped)
			continue;
		snprintf(key, sizeof(key), "%u", ncapped++);
		BSON_APPEND_UTF8(&capped, key, l.v[i].name);
	}
	bson_append_array_end(out, &capped);
	EVP_DigestFinal_ex(all, d, &dn);
	hex(d, sum);
	BSON_APPEND_UTF8(out, "md5", sum);
	ms = now_ms() - start;
	if (ms <= INT32_MAX)
		BSON_APPEND_INT32(out, "timeMillis", (int32_t)ms);
	else
		BSON_APPEND_INT64(out, "timeMillis", ms);
done:
	EVP_MD_CTX_free(all);
	store_txn_abort(t);
	free(l.v);
	return rc;
}
