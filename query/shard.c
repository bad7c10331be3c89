/*
 * shard.c - the pure half of sharding: shard key patterns, MongoDB's hash of a value
 * (convertShardKeyToHashed), the shard key of a document, chunk maps (the [min, max) ranges
 * of the key space and the shard owning each), splits, targeting (which chunks a filter can
 * match) and the k-way merge of sorted per-shard result streams with skip and limit. It
 * keeps nothing on disk and talks to no shard: the cluster config (fs/router/config.c)
 * loads and saves chunk maps, the router mount sends the requests.
 *
 * Design notes
 *  1. A shard key pattern is a list of ascending fields ({a: 1, "b.c": 1}) of which at most
 *     one may be "hashed" ({_id: "hashed"}, {a: 1, b: "hashed"}), as MongoDB 4.4+ accepts.
 *     Descending fields are refused (MongoDB: "Pattern must either be a single hashed
 *     field, or a list of ascending fields"). A key value is the document {path: value, ..}
 *     in pattern order with the hashed field replaced by its NumberLong hash; key values and
 *     chunk bounds compare field by field in MongoDB's order (store_value_compare), MinKey
 *     below and MaxKey above everything.
 *  2. query_shard_hash is MongoDB's BSONElementHasher::hash64 with seed 0: the md5 of the
 *     seed (int32), the value's canonical type (int32, MongoDB's canonicalizeBSONType) and
 *     its bytes (numbers as the int64 safeNumberLongForHash gives: truncated, clamped, NaN 0,
 *     and the double 2^63 as INT64_MIN for compatibility with old servers), embedded
 *     documents element by element with their names and a closing EOO (type 0, no name
 *     byte: what MongoDB's values say); the first 8 digest bytes little-endian
 *     are the hash. The MD5 is OpenSSL's (libcrypto, which SCRAM and TLS bring); until
 *     issue 27 it was a hand-written one, and test_shard checks a fold of 3,000 hashes
 *     against the value that one gave. The tests check it against MongoDB's own hard-coded
 *     values (hasher_test.cpp, jstests hash_function_stability). store_index_hash (hashed
 *     indexes) is a different hash and stays so: its values are on disk already.
 *  3. A chunk map covers the whole key space: chunks sorted by min, the first min all
 *     MinKey, the last max all MaxKey, each max the next min (query_chunk_map_check). A key
 *     belongs to the one chunk with min <= key < max (binary search).
 *  4. Documents without a shard key field, or with an array on the way to one, are refused
 *     (the issue asks for the pre-4.4 behaviour: ShardKeyNotFound; arrays are refused by
 *     every version). An update may not change the shard key (ImmutableField).
 *  5. Targeting never misses a chunk that holds a match (like plan.c note 1: wider is fine,
 *     narrower never). Per key field the top-level predicates on exactly that path give
 *     value intervals (plan.c's bounds, intersected); a hashed field only gets points from
 *     equality and $in (hashed here with query_shard_hash), anything else leaves a field
 *     unbounded. Leading point-bounded fields multiply into key prefixes (at most
 *     TARGET_PRODUCT), the next field's intervals extend each prefix, later fields are
 *     [MinKey, MaxKey]; each such range of key tuples is tested against every chunk.
 *     $and intersects the chunk sets of its parts, $or unites its branches', $nor and
 *     anything else target every chunk. An empty set means no document can match.
 *  6. split by middle: the point must lie strictly inside the chunk (min < middle < max)
 *     and be a full key of the pattern. split by find (query_chunk_middle): with sample
 *     keys (the router reads them from the owning shard) the median of those inside the
 *     chunk; without, the arithmetic middle of the first field's bounds when both are
 *     numbers (every hashed chunk: MinKey/MaxKey count as INT64_MIN/INT64_MAX there), else
 *     DFS_EINVAL (give middle). MongoDB always takes the median of the documents.
 *  7. The merge pulls from every stream lazily: each stream's current document stays the
 *     stream's (Borrowed) until that stream is advanced, which happens on the call after
 *     the one that returned it. With a sort the smallest sort key (query_sort_key, _id
 *     breaking ties) wins, ties between streams to the lower stream index; without one the
 *     streams are read one after another. Skip and limit apply to the merged sequence, so
 *     each shard must be asked for skip + limit documents and no skip.
 */
#include "query_int.h"
#include "plan_int.h"

#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TARGET_PRODUCT 200

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "docfs: out of memory\n");
		abort();
	}
	return p;
}

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size ? size : 1);
	if (!p) {
		fprintf(stderr, "docfs: out of memory\n");
		abort();
	}
	return p;
}

/* ---- md5 (OpenSSL's) ---------------------------------------------------------------- */

struct md5 {
	EVP_MD_CTX *ctx; /* Owned: freed by md5_finish */
};

/* OpenSSL's MD5, fetched once: EVP_md5() looks the implementation up (under a lock) at
 * every EVP_DigestInit_ex, which doubled the time of a short hash. Kept for the process. */
static EVP_MD *md5_md;
static pthread_once_t md5_once = PTHREAD_ONCE_INIT;

static void md5_fetch(void)
{
	md5_md = EVP_MD_fetch(NULL, "MD5", NULL);
}

EVP_MD_CTX *query__md5_new(void)
{
	EVP_MD_CTX *ctx;

	pthread_once(&md5_once, md5_fetch);
	ctx = EVP_MD_CTX_new();
	if (!md5_md || !ctx || EVP_DigestInit_ex(ctx, md5_md, NULL) != 1) {
		fprintf(stderr, "docfs: OpenSSL's MD5 is not available\n");
		abort();
	}
	return ctx;
}

static void md5_init(struct md5 *m)
{
	m->ctx = query__md5_new();
}

static void md5_add(struct md5 *m, const void *data, size_t n)
{
	if (n)
		EVP_DigestUpdate(m->ctx, data, n);
}

static void md5_finish(struct md5 *m, uint8_t out[16])
{
	unsigned int n = 16;

	EVP_DigestFinal_ex(m->ctx, out, &n);
	EVP_MD_CTX_free(m->ctx);
	m->ctx = NULL;
}

/* ---- MongoDB's hash (note 2) ------------------------------------------------------- */

static void add_le32(struct md5 *m, int32_t v)
{
	uint8_t b[4];
	uint32_t u = (uint32_t)v;

	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(u >> (8 * i));
	md5_add(m, b, 4);
}

static void add_le64(struct md5 *m, int64_t v)
{
	uint8_t b[8];
	uint64_t u = (uint64_t)v;

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(u >> (8 * i));
	md5_add(m, b, 8);
}

/* A string as BSON stores it: int32 length with the NUL, the bytes, the NUL. */
static void add_bson_string(struct md5 *m, const char *s, uint32_t len)
{
	add_le32(m, (int32_t)len + 1);
	md5_add(m, s, len);
	md5_add(m, "", 1);
}

/* MongoDB's canonicalizeBSONType (bsontypes.h). */
static int32_t canonical_type(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_MINKEY:
		return -1;
	case BSON_TYPE_MAXKEY:
		return 127;
	case BSON_TYPE_EOD:
	case BSON_TYPE_UNDEFINED:
		return 0;
	case BSON_TYPE_NULL:
		return 5;
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DECIMAL128:
		return 10;
	case BSON_TYPE_UTF8:
	case BSON_TYPE_SYMBOL:
		return 15;
	case BSON_TYPE_DOCUMENT:
		return 20;
	case BSON_TYPE_ARRAY:
		return 25;
	case BSON_TYPE_BINARY:
		return 30;
	case BSON_TYPE_OID:
		return 35;
	case BSON_TYPE_BOOL:
		return 40;
	case BSON_TYPE_DATE_TIME:
		return 45;
	case BSON_TYPE_TIMESTAMP:
		return 47;
	case BSON_TYPE_REGEX:
		return 50;
	case BSON_TYPE_DBPOINTER:
		return 55;
	case BSON_TYPE_CODE:
		return 60;
	case BSON_TYPE_CODEWSCOPE:
		return 65;
	default:
		return 0;
	}
}

/* Decimal128 to int64 as MongoDB's safeNumberLong: NaN 0, clamped, ties to even. */
static int64_t dec_to_long(const bson_decimal128_t *d)
{
	uint64_t hi = d->high, lo = d->low;
	bool neg = hi >> 63;
	unsigned __int128 coef, q, r, p = 1;
	int exp;

	if (((hi >> 58) & 0x1f) == 0x1f)
		return 0; /* NaN */
	if (((hi >> 58) & 0x1f) == 0x1e)
		return neg ? INT64_MIN : INT64_MAX;
	if (((hi >> 61) & 3) == 3)
		return 0; /* a non-canonical coefficient (> 10^34) is zero */
	exp = (int)((hi >> 49) & 0x3fff) - 6176;
	coef = (unsigned __int128)(hi & UINT64_C(0x1ffffffffffff)) << 64 | lo;
	if (coef == 0)
		return 0;
	if (exp >= 0) {
		q = coef;
		for (int i = 0; i < exp; i++) {
			q *= 10;
			if (q > (unsigned __int128)1 << 64)
				return neg ? INT64_MIN : INT64_MAX;
		}
	} else if (exp < -38) {
		q = 0; /* coef < 10^34 is under half of 10^-exp */
	} else {
		for (int i = 0; i < -exp; i++)
			p *= 10;
		q = coef / p;
		r = coef % p;
		if (2 * r > p || (2 * r == p && (q & 1)))
			q++;
	}
	if (!neg)
		return q > INT64_MAX ? INT64_MAX : (int64_t)q;
	if (q >= (unsigned __int128)1 << 63)
		return INT64_MIN;
	return -(int64_t)q;
}

/* BSONElement::safeNumberLongForHash. */
static int64_t number_for_hash(const bson_value_t *v)
{
	double d;

	switch (v->value_type) {
	case BSON_TYPE_INT32:
		return v->value.v_int32;
	case BSON_TYPE_INT64:
		return v->value.v_int64;
	case BSON_TYPE_DECIMAL128:
		return dec_to_long(&v->value.v_decimal128);
	default:
		d = v->value.v_double;
		if (isnan(d))
			return 0;
		if (d == 9223372036854775808.0)
			return INT64_MIN; /* what old servers' overflowing cast gave */
		if (!(d < 9223372036854775808.0))
			return INT64_MAX;
		if (d < -9223372036854775808.0)
			return INT64_MIN;
		return (int64_t)d;
	}
}

static void hash_value(struct md5 *m, const bson_value_t *v);

/* The elements of an embedded document or array, each with its name, then the EOO. */
static void hash_elements(struct md5 *m, const uint8_t *data, uint32_t len)
{
	bson_t doc;
	bson_iter_t it;

	if (bson_init_static(&doc, data, len) && bson_iter_init(&it, &doc)) {
		while (bson_iter_next(&it)) {
			add_le32(m, canonical_type(bson_iter_type(&it)));
			md5_add(m, bson_iter_key(&it), bson_iter_key_len(&it) + 1);
			hash_value(m, bson_iter_value(&it));
		}
	}
	add_le32(m, 0); /* EOO: canonical type 0; its name has no bytes */
}

/* The value part of recursiveHash (the canonical type is already added). */
static void hash_value(struct md5 *m, const bson_value_t *v)
{
	switch (v->value_type) {
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DECIMAL128:
		add_le64(m, number_for_hash(v));
		break;
	case BSON_TYPE_UTF8:
		add_bson_string(m, v->value.v_utf8.str, v->value.v_utf8.len);
		break;
	case BSON_TYPE_SYMBOL:
		add_bson_string(m, v->value.v_symbol.symbol, v->value.v_symbol.len);
		break;
	case BSON_TYPE_CODE:
		add_bson_string(m, v->value.v_code.code, v->value.v_code.code_len);
		break;
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		hash_elements(m, v->value.v_doc.data, v->value.v_doc.data_len);
		break;
	case BSON_TYPE_CODEWSCOPE:
		md5_add(m, v->value.v_codewscope.code, v->value.v_codewscope.code_len);
		md5_add(m, "", 1);
		hash_elements(m, v->value.v_codewscope.scope_data, v->value.v_codewscope.scope_len);
		break;
	case BSON_TYPE_BINARY: {
		uint32_t n = v->value.v_binary.data_len;
		uint8_t sub = (uint8_t)v->value.v_binary.subtype;

		if (sub == BSON_SUBTYPE_BINARY_DEPRECATED) {
			add_le32(m, (int32_t)n + 4);
			md5_add(m, &sub, 1);
			add_le32(m, (int32_t)n);
		} else {
			add_le32(m, (int32_t)n);
			md5_add(m, &sub, 1);
		}
		md5_add(m, v->value.v_binary.data, n);
		break;
	}
	case BSON_TYPE_OID:
		md5_add(m, v->value.v_oid.bytes, 12);
		break;
	case BSON_TYPE_BOOL: {
		uint8_t b = v->value.v_bool ? 1 : 0;

		md5_add(m, &b, 1);
		break;
	}
	case BSON_TYPE_DATE_TIME:
		add_le64(m, v->value.v_datetime);
		break;
	case BSON_TYPE_TIMESTAMP:
		add_le32(m, (int32_t)v->value.v_timestamp.increment);
		add_le32(m, (int32_t)v->value.v_timestamp.timestamp);
		break;
	case BSON_TYPE_REGEX:
		md5_add(m, v->value.v_regex.regex, strlen(v->value.v_regex.regex) + 1);
		md5_add(m, v->value.v_regex.options ? v->value.v_regex.options : "",
			(v->value.v_regex.options ? strlen(v->value.v_regex.options) : 0) + 1);
		break;
	case BSON_TYPE_DBPOINTER:
		add_bson_string(m, v->value.v_dbpointer.collection,
				v->value.v_dbpointer.collection_len);
		md5_add(m, v->value.v_dbpointer.oid.bytes, 12);
		break;
	default: /* null, undefined, MinKey, MaxKey: no bytes */
		break;
	}
}

int64_t query_shard_hash_seed(const bson_value_t *v, int32_t seed)
{
	struct md5 m;
	uint8_t d[16];
	uint64_t h = 0;

	md5_init(&m);
	add_le32(&m, seed);
	add_le32(&m, canonical_type(v->value_type));
	hash_value(&m, v);
	md5_finish(&m, d);
	for (int i = 7; i >= 0; i--)
		h = h << 8 | d[i];
	return (int64_t)h;
}

int64_t query_shard_hash(const bson_value_t *v)
{
	return query_shard_hash_seed(v, 0);
}

/* ---- shard key patterns (note 1) --------------------------------------------------- */

int query_shard_key_parse(const bson_t *pattern, struct query_shard_key *out, struct dfs_err *err)
{
	bson_iter_t it;

	memset(out, 0, sizeof(*out));
	out->hashed = -1;
	if (!bson_iter_init(&it, pattern))
		return dfs_err_set(err, DFS_EINVAL, "shard key pattern is not valid BSON");
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		bool hashed = false;

		if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "hashed") == 0) {
			hashed = true;
		} else if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_double(&it) != 1.0) {
			return dfs_err_set(
				err, DFS_EINVAL,
				"unsupported shard key pattern field '%s': a shard key "
				"is ascending fields (1) and at most one \"hashed\" field",
				k);
		}
		if (!*k || k[0] == '$' || k[0] == '.' || k[strlen(k) - 1] == '.' || strstr(k, ".."))
			return dfs_err_set(err, DFS_EINVAL,
					   "shard key field '%s' is not a field path", k);
		if (strlen(k) >= sizeof(out->f[0].path))
			return dfs_err_set(err, DFS_ENAMETOOLONG,
					   "shard key field '%.40s...' is too long", k);
		if (out->n == QUERY_SHARD_KEY_MAX)
			return dfs_err_set(err, DFS_EINVAL, "a shard key has at most %d fields",
					   QUERY_SHARD_KEY_MAX);
		for (int i = 0; i < out->n; i++)
			if (strcmp(out->f[i].path, k) == 0)
				return dfs_err_set(err, DFS_EINVAL,
						   "shard key field '%s' appears twice", k);
		if (hashed) {
			if (out->hashed >= 0)
				return dfs_err_set(err, DFS_EINVAL,
						   "a shard key has at most one hashed field");
			out->hashed = out->n;
		}
		snprintf(out->f[out->n].path, sizeof(out->f[0].path), "%s", k);
		out->f[out->n].hashed = hashed;
		out->n++;
	}
	if (out->n == 0)
		return dfs_err_set(err, DFS_EINVAL, "the shard key pattern is empty");
	return 0;
}

void query_shard_key_pattern(const struct query_shard_key *k, bson_t *out)
{
	for (int i = 0; i < k->n; i++) {
		if (k->f[i].hashed)
			BSON_APPEND_UTF8(out, k->f[i].path, "hashed");
		else
			BSON_APPEND_INT32(out, k->f[i].path, 1);
	}
}

/* The pattern as MongoDB prints it in messages: "{ user.age: 1 }". */
static void pattern_text(const struct query_shard_key *k, char *buf, size_t cap)
{
	size_t o = 0;

	o += (size_t)snprintf(buf, cap, "{ ");
	for (int i = 0; i < k->n && o < cap; i++)
		o += (size_t)snprintf(buf + o, cap - o, "%s%s: %s", i ? ", " : "", k->f[i].path,
				      k->f[i].hashed ? "\"hashed\"" : "1");
	if (o < cap)
		snprintf(buf + o, cap - o, " }");
}

/* The value at dotted path in doc: 1 found (*out set), 0 missing, -1 an array on the way
 * or at the end (shard keys may not hold arrays). */
static int value_at(const bson_t *doc, const char *path, bson_iter_t *out)
{
	bson_iter_t it, sub;
	const char *p = path;
	char comp[256];

	if (!bson_iter_init(&it, doc))
		return 0;
	for (;;) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);

		if (n >= sizeof(comp))
			return 0;
		memcpy(comp, p, n);
		comp[n] = 0;
		if (!bson_iter_find(&it, comp))
			return 0;
		if (BSON_ITER_HOLDS_ARRAY(&it))
			return -1;
		if (!dot) {
			*out = it;
			return 1;
		}
		if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &sub))
			return 0;
		it = sub;
		p = dot + 1;
	}
}

static void id_text(const bson_t *doc, char *buf, size_t cap)
{
	bson_iter_t it;
	struct dfs_buf b;

	snprintf(buf, cap, "(no _id)");
	if (!bson_iter_init_find(&it, doc, "_id"))
		return;
	dfs_buf_init(&b);
	if (store_codec_render_value(bson_iter_value(&it), &b, NULL) == 0)
		snprintf(buf, cap, "%.80s%s", b.data, b.len > 80 ? "..." : "");
	dfs_buf_release(&b);
}

int query_shard_key_of(const struct query_shard_key *k, const bson_t *doc, bson_t *out,
		       struct dfs_err *err)
{
	for (int i = 0; i < k->n; i++) {
		bson_iter_t it;
		int r = value_at(doc, k->f[i].path, &it);
		char pat[200], id[100];

		if (r <= 0) {
			pattern_text(k, pat, sizeof(pat));
			id_text(doc, id, sizeof(id));
			bson_reinit(out);
			if (r < 0)
				return dfs_err_set(err, DFS_EINVAL,
						   "shard key cannot contain array values or array "
						   "descendants: field '%s' of document _id %s",
						   k->f[i].path, id);
			return dfs_err_set(
				err, DFS_EINVAL,
				"document _id %s does not contain shard key for pattern %s", id,
				pat);
		}
		if (k->f[i].hashed)
			BSON_APPEND_INT64(out, k->f[i].path,
					  query_shard_hash(bson_iter_value(&it)));
		else
			BSON_APPEND_VALUE(out, k->f[i].path, bson_iter_value(&it));
	}
	return 0;
}

int query_shard_key_check_update(const struct query_shard_key *k, const bson_t *before,
				 const bson_t *after, struct dfs_err *err)
{
	for (int i = 0; i < k->n; i++) {
		bson_iter_t a, b;
		int ra = value_at(before, k->f[i].path, &a), rb = value_at(after, k->f[i].path, &b);
		struct dfs_buf v;

		if (ra == rb && (ra <= 0 || (bson_iter_type(&a) == bson_iter_type(&b) &&
					     store_iter_compare(&a, &b) == 0)))
			continue;
		dfs_buf_init(&v);
		if (rb > 0)
			store_codec_render_value(bson_iter_value(&b), &v, NULL);
		else
			dfs_buf_puts(&v, rb < 0 ? "an array" : "missing");
		dfs_err_set(err, DFS_EINVAL,
			    "after applying the update, the (immutable) field '%s' was found to "
			    "have been altered to %s: %.80s",
			    k->f[i].path, k->f[i].path, v.data);
		dfs_buf_release(&v);
		return DFS_EINVAL;
	}
	return 0;
}

/* ---- bounds ------------------------------------------------------------------------ */

int query_shard_bound_compare(const bson_t *a, const bson_t *b)
{
	bson_iter_t ia, ib;
	bool ma, mb;

	if (!bson_iter_init(&ia, a) || !bson_iter_init(&ib, b))
		return 0;
	for (;;) {
		int c;

		ma = bson_iter_next(&ia);
		mb = bson_iter_next(&ib);
		if (!ma || !mb)
			return ma - mb;
		c = store_iter_compare(&ia, &ib);
		if (c)
			return c;
	}
}

/* Is b a full key of k: its fields, in order, no arrays? */
static int bound_check(const struct query_shard_key *k, const bson_t *b, const char *what,
		       struct dfs_err *err)
{
	bson_iter_t it;
	int i = 0;
	char pat[200];

	pattern_text(k, pat, sizeof(pat));
	if (!bson_iter_init(&it, b))
		return dfs_err_set(err, DFS_EINVAL, "%s is not valid BSON", what);
	while (bson_iter_next(&it)) {
		if (i >= k->n || strcmp(bson_iter_key(&it), k->f[i].path) != 0)
			return dfs_err_set(err, DFS_EINVAL,
					   "%s is not a key of the shard key pattern %s", what,
					   pat);
		if (BSON_ITER_HOLDS_ARRAY(&it))
			return dfs_err_set(err, DFS_EINVAL, "%s cannot hold an array", what);
		if (k->f[i].hashed && !BSON_ITER_HOLDS_INT64(&it) && !BSON_ITER_HOLDS_MINKEY(&it) &&
		    !BSON_ITER_HOLDS_MAXKEY(&it))
			return dfs_err_set(err, DFS_EINVAL,
					   "%s: the hashed field '%s' must be a NumberLong, MinKey "
					   "or MaxKey",
					   what, k->f[i].path);
		i++;
	}
	if (i != k->n)
		return dfs_err_set(err, DFS_EINVAL, "%s is not a key of the shard key pattern %s",
				   what, pat);
	return 0;
}

int query_shard_bound_check(const struct query_shard_key *k, const bson_t *b, const char *what,
			    struct dfs_err *err)
{
	return bound_check(k, b, what, err);
}

/* All MinKey (min true) or all MaxKey bounds of k into out (initialised, empty). */
void query_shard_bound_extreme(const struct query_shard_key *k, bool max, bson_t *out)
{
	for (int i = 0; i < k->n; i++) {
		if (max)
			BSON_APPEND_MAXKEY(out, k->f[i].path);
		else
			BSON_APPEND_MINKEY(out, k->f[i].path);
	}
}

/* ---- chunk maps (note 3) ----------------------------------------------------------- */

void query_chunk_map_init(struct query_chunk_map *m, const struct query_shard_key *k)
{
	memset(m, 0, sizeof(*m));
	m->key = *k;
}

void query_chunk_map_release(struct query_chunk_map *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n; i++) {
		bson_destroy(m->c[i].min);
		bson_destroy(m->c[i].max);
	}
	free(m->c);
	m->c = NULL;
	m->n = m->cap = 0;
}

int query_chunk_map_add(struct query_chunk_map *m, const bson_t *min, const bson_t *max,
			const char *shard, uint32_t major, uint32_t minor, struct dfs_err *err)
{
	struct query_chunk *c;
	int rc;

	if ((rc = bound_check(&m->key, min, "chunk min", err)) ||
	    (rc = bound_check(&m->key, max, "chunk max", err)))
		return rc;
	if (query_shard_bound_compare(min, max) >= 0)
		return dfs_err_set(err, DFS_EINVAL, "chunk min must be below its max");
	if (strlen(shard) >= sizeof(c->shard))
		return dfs_err_set(err, DFS_ENAMETOOLONG, "shard name '%.40s...' is too long",
				   shard);
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 8;
		m->c = xrealloc(m->c, (size_t)m->cap * sizeof(*m->c));
	}
	c = &m->c[m->n++];
	memset(c, 0, sizeof(*c));
	c->min = bson_copy(min);
	c->max = bson_copy(max);
	snprintf(c->shard, sizeof(c->shard), "%s", shard);
	c->major = major;
	c->minor = minor;
	return 0;
}

static int chunk_qsort(const void *a, const void *b)
{
	const struct query_chunk *x = a, *y = b;

	return query_shard_bound_compare(x->min, y->min);
}

int query_chunk_map_check(struct query_chunk_map *m, struct dfs_err *err)
{
	bson_t lo = BSON_INITIALIZER, hi = BSON_INITIALIZER;
	int rc = 0;

	if (m->n > 1)
		qsort(m->c, (size_t)m->n, sizeof(*m->c), chunk_qsort);
	query_shard_bound_extreme(&m->key, false, &lo);
	query_shard_bound_extreme(&m->key, true, &hi);
	if (m->n == 0)
		rc = dfs_err_set(err, DFS_ECORRUPT, "the collection has no chunks");
	else if (query_shard_bound_compare(m->c[0].min, &lo) != 0)
		rc = dfs_err_set(err, DFS_ECORRUPT, "the first chunk does not start at MinKey");
	else if (query_shard_bound_compare(m->c[m->n - 1].max, &hi) != 0)
		rc = dfs_err_set(err, DFS_ECORRUPT, "the last chunk does not end at MaxKey");
	for (int i = 0; !rc && i + 1 < m->n; i++)
		if (query_shard_bound_compare(m->c[i].max, m->c[i + 1].min) != 0)
			rc = dfs_err_set(err, DFS_ECORRUPT,
					 "chunks %d and %d leave a gap or overlap", i, i + 1);
	bson_destroy(&lo);
	bson_destroy(&hi);
	return rc;
}

int query_chunk_map_find(const struct query_chunk_map *m, const bson_t *key)
{
	int lo = 0, hi = m->n - 1;

	while (lo < hi) {
		int mid = lo + (hi - lo + 1) / 2;

		if (query_shard_bound_compare(m->c[mid].min, key) <= 0)
			lo = mid;
		else
			hi = mid - 1;
	}
	return m->n ? lo : -1;
}

int query_chunk_map_find_doc(const struct query_chunk_map *m, const bson_t *doc, int *idx,
			     struct dfs_err *err)
{
	bson_t key = BSON_INITIALIZER;
	int rc = query_shard_key_of(&m->key, doc, &key, err);

	if (rc == 0)
		*idx = query_chunk_map_find(m, &key);
	bson_destroy(&key);
	return rc;
}

int query_chunk_map_split(struct query_chunk_map *m, int idx, const bson_t *middle,
			  struct dfs_err *err)
{
	struct query_chunk *c;
	uint32_t major = 0;
	int rc;

	if (idx < 0 || idx >= m->n)
		return dfs_err_set(err, DFS_EINVAL, "no such chunk");
	if ((rc = bound_check(&m->key, middle, "split point", err)))
		return rc;
	c = &m->c[idx];
	if (query_shard_bound_compare(middle, c->min) == 0)
		return dfs_err_set(err, DFS_EINVAL,
				   "cannot split chunk at its lower bound: the split point "
				   "equals the chunk's min");
	if (query_shard_bound_compare(middle, c->min) < 0 ||
	    query_shard_bound_compare(middle, c->max) >= 0)
		return dfs_err_set(err, DFS_EINVAL, "the split point is not inside the chunk");
	for (int i = 0; i < m->n; i++)
		if (m->c[i].major > major)
			major = m->c[i].major;
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 8;
		m->c = xrealloc(m->c, (size_t)m->cap * sizeof(*m->c));
	}
	memmove(&m->c[idx + 2], &m->c[idx + 1], (size_t)(m->n - idx - 1) * sizeof(*m->c));
	m->n++;
	c = &m->c[idx];
	m->c[idx + 1] = *c;
	m->c[idx + 1].min = bson_copy(middle);
	c->max = bson_copy(middle);
	/* MongoDB bumps the minor version of both halves of a split */
	c->major = m->c[idx + 1].major = major;
	m->c[idx + 1].minor = c->minor + 2;
	c->minor = c->minor + 1;
	c->jumbo = m->c[idx + 1].jumbo = false;
	return 0;
}

/* The first field of bound b as an int64 for arithmetic: MinKey/MaxKey as the extremes of
 * the hash space; false when it is another type. */
static bool bound_number(const bson_t *b, bool hashed, __int128 *out)
{
	bson_iter_t it;

	if (!bson_iter_init(&it, b) || !bson_iter_next(&it))
		return false;
	switch (bson_iter_type(&it)) {
	case BSON_TYPE_MINKEY:
		*out = INT64_MIN;
		return hashed;
	case BSON_TYPE_MAXKEY:
		*out = INT64_MAX;
		return hashed;
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
		*out = bson_iter_as_int64(&it);
		return true;
	default:
		return false;
	}
}

static int key_qsort(const void *a, const void *b)
{
	return query_shard_bound_compare(*(const bson_t *const *)a, *(const bson_t *const *)b);
}

int query_chunk_middle(const struct query_chunk_map *m, int idx, const bson_t *const *keys,
		       int nkeys, bson_t *out, struct dfs_err *err)
{
	const struct query_chunk *c;
	const bson_t **in;
	int n = 0;
	__int128 lo, hi, mid;

	if (idx < 0 || idx >= m->n)
		return dfs_err_set(err, DFS_EINVAL, "no such chunk");
	c = &m->c[idx];
	in = xcalloc((size_t)nkeys, sizeof(*in));
	for (int i = 0; i < nkeys; i++)
		if (query_shard_bound_compare(keys[i], c->min) >= 0 &&
		    query_shard_bound_compare(keys[i], c->max) < 0)
			in[n++] = keys[i];
	if (n > 0) {
		qsort(in, (size_t)n, sizeof(*in), key_qsort);
		for (int i = n / 2; i < n; i++) {
			if (query_shard_bound_compare(in[i], c->min) > 0) {
				bson_concat(out, in[i]);
				free(in);
				return 0;
			}
		}
		free(in);
		return dfs_err_set(err, DFS_EINVAL,
				   "cannot split: every document of the chunk has the key of its "
				   "min (the chunk is jumbo)");
	}
	free(in);
	if (!bound_number(c->min, m->key.f[0].hashed, &lo) ||
	    !bound_number(c->max, m->key.f[0].hashed, &hi) || hi - lo < 2)
		return dfs_err_set(err, DFS_EINVAL,
				   "cannot find the chunk's median without its documents: give "
				   "the split point with middle");
	mid = lo + (hi - lo + 1) / 2;
	for (int i = 0; i < m->key.n; i++) {
		if (i == 0)
			BSON_APPEND_INT64(out, m->key.f[0].path, (int64_t)mid);
		else
			BSON_APPEND_MINKEY(out, m->key.f[i].path);
	}
	return 0;
}

/* ---- targeting (note 5) ------------------------------------------------------------ */

/* One range of key tuples: lo <(=) key <(=) hi. */
struct krange {
	bson_value_t lo[QUERY_SHARD_KEY_MAX], hi[QUERY_SHARD_KEY_MAX]; /* Borrowed values */
	bool lo_in, hi_in;
};

static int tuple_cmp_bound(const bson_value_t *t, int n, const bson_t *b)
{
	bson_iter_t it;
	int i = 0;

	if (!bson_iter_init(&it, b))
		return 0;
	while (i < n && bson_iter_next(&it)) {
		int c = store_value_compare(&t[i], bson_iter_value(&it));

		if (c)
			return c;
		i++;
	}
	return 0;
}

/* Can a key of range r lie in chunk c ([min, max))? */
static bool range_meets_chunk(const struct krange *r, int n, const struct query_chunk *c)
{
	int a = tuple_cmp_bound(r->lo, n, c->max); /* lo vs max: need lo < max */
	int b = tuple_cmp_bound(r->hi, n, c->min); /* hi vs min: need min <= hi (or <) */

	if (a >= 0)
		return false;
	return r->hi_in ? b >= 0 : b > 0;
}

static void val_type(bson_value_t *v, bson_type_t t)
{
	memset(v, 0, sizeof(*v));
	v->value_type = t;
}

/* The intervals of the hashed key field from one predicate: points of eq / $in. */
static bool hashed_bounds(const struct query_expr *e, struct plan__ivals *out)
{
	bson_value_t *pts;
	int n = 0, np = e->kind == QK_IN ? e->nvals : 1;

	if (e->kind == QK_EQ) {
		if (e->val.value_type == BSON_TYPE_ARRAY || e->val.value_type == BSON_TYPE_REGEX)
			return false;
	} else if (e->kind != QK_IN || e->nres > 0) {
		return false;
	}
	pts = xcalloc((size_t)np, sizeof(*pts));
	for (int i = 0; i < np; i++) {
		const bson_value_t *v = e->kind == QK_IN ? &e->vals[i] : &e->val;

		if (v->value_type == BSON_TYPE_ARRAY) {
			free(pts);
			return false;
		}
		val_type(&pts[n], BSON_TYPE_INT64);
		pts[n++].value.v_int64 = query_shard_hash(v);
	}
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < n; i++) {
		struct plan__ivals one = {0};

		one.iv = xcalloc(1, sizeof(*one.iv));
		one.n = one.cap = 1;
		bson_value_copy(&pts[i], &one.iv[0].lo);
		bson_value_copy(&pts[i], &one.iv[0].hi);
		one.iv[0].lo_in = one.iv[0].hi_in = true;
		if (i == 0)
			*out = one;
		else {
			plan__ivals_union(out, &one);
			plan__ivals_release(&one);
		}
	}
	free(pts);
	if (n == 0) /* $in: [] matches nothing */
		out->n = 0;
	return true;
}

static const char *pred_path(const struct query_expr *e)
{
	if (e->kind == QK_NOT && e->nkids == 1 && e->kids[0]->path.n > 0)
		return e->kids[0]->path.dotted;
	if (e->path.n > 0)
		return e->path.dotted;
	return NULL;
}

static bool ival_point(const struct plan__ival *iv)
{
	return iv->lo_in && iv->hi_in && store_value_compare(&iv->lo, &iv->hi) == 0;
}

/* Marks in sel the chunks the leaf predicates preds (all on the same document) can match. */
static void target_leaves(const struct query_chunk_map *m, const struct query_expr *const *preds,
			  int np, bool *sel)
{
	const struct query_shard_key *k = &m->key;
	struct plan__ivals fb[QUERY_SHARD_KEY_MAX];
	struct krange *rs;
	int nr = 1, fixed = 0;
	bson_value_t minkey, maxkey;

	val_type(&minkey, BSON_TYPE_MINKEY);
	val_type(&maxkey, BSON_TYPE_MAXKEY);
	memset(fb, 0, sizeof(fb));
	for (int f = 0; f < k->n; f++) {
		plan__ivals_full(&fb[f]);
		for (int i = 0; i < np; i++) {
			const char *p = pred_path(preds[i]);
			struct plan__ivals b;
			bool ok;

			if (!p || strcmp(p, k->f[f].path) != 0)
				continue;
			ok = k->f[f].hashed ? hashed_bounds(preds[i], &b)
					    : plan__pred_bounds(preds[i], false, &b);
			if (!ok)
				continue;
			plan__ivals_intersect(&fb[f], &b);
			plan__ivals_release(&b);
		}
	}
	for (int f = 0; f < k->n; f++)
		if (fb[f].n == 0)
			goto done; /* some field can match nothing */
	/* leading point fields multiply into prefixes */
	while (fixed < k->n) {
		bool points = true;

		for (int i = 0; i < fb[fixed].n; i++)
			points = points && ival_point(&fb[fixed].iv[i]);
		if (!points || nr * fb[fixed].n > TARGET_PRODUCT)
			break;
		nr *= fb[fixed].n;
		fixed++;
	}
	{
		int last = fixed < k->n && nr * fb[fixed].n <= TARGET_PRODUCT ? fb[fixed].n : 0;
		int total = nr * (last ? last : 1), r = 0;

		rs = xcalloc((size_t)total, sizeof(*rs));
		for (int p = 0; p < nr; p++) {
			for (int j = 0; j < (last ? last : 1); j++, r++) {
				int q = p;
				struct krange *x = &rs[r];

				for (int f = fixed - 1; f >= 0; f--) {
					const struct plan__ival *iv = &fb[f].iv[q % fb[f].n];

					q /= fb[f].n;
					x->lo[f] = iv->lo;
					x->hi[f] = iv->hi;
				}
				x->lo_in = x->hi_in = true;
				for (int f = fixed; f < k->n; f++) {
					x->lo[f] = minkey;
					x->hi[f] = maxkey;
				}
				if (last) {
					const struct plan__ival *iv = &fb[fixed].iv[j];

					x->lo[fixed] = iv->lo;
					x->hi[fixed] = iv->hi;
					if (!iv->lo_in) {
						/* (a, ..: past every key with field == a */
						for (int f = fixed + 1; f < k->n; f++)
							x->lo[f] = maxkey;
						x->lo_in = false;
					}
					if (!iv->hi_in) {
						for (int f = fixed + 1; f < k->n; f++)
							x->hi[f] = minkey;
						x->hi_in = false;
					}
				}
			}
		}
		for (int i = 0; i < m->n; i++)
			for (int j = 0; j < total && !sel[i]; j++)
				if (range_meets_chunk(&rs[j], k->n, &m->c[i]))
					sel[i] = true;
		free(rs);
	}
done:
	for (int f = 0; f < k->n; f++)
		plan__ivals_release(&fb[f]);
}

static void target_expr(const struct query_chunk_map *m, const struct query_expr *e, bool *sel)
{
	const struct query_expr **leaves;
	bool *part;
	int nl = 0;

	switch (e->kind) {
	case QK_AND:
		break;
	case QK_OR:
		part = xcalloc((size_t)m->n, sizeof(*part));
		for (int i = 0; i < e->nkids; i++) {
			memset(part, 0, (size_t)m->n * sizeof(*part));
			target_expr(m, e->kids[i], part);
			for (int c = 0; c < m->n; c++)
				sel[c] = sel[c] || part[c];
		}
		free(part);
		return;
	case QK_NEVER:
		return;
	case QK_NOR:
	case QK_EXPR:
	case QK_ALWAYS:
		for (int c = 0; c < m->n; c++)
			sel[c] = true;
		return;
	default:
		target_leaves(m, &e, 1, sel);
		return;
	}
	/* $and: the leaves together, intersected with each logical part */
	leaves = xcalloc((size_t)e->nkids, sizeof(*leaves));
	for (int i = 0; i < e->nkids; i++)
		if (e->kids[i]->kind != QK_AND && e->kids[i]->kind != QK_OR &&
		    e->kids[i]->kind != QK_NOR && e->kids[i]->kind != QK_NEVER &&
		    e->kids[i]->kind != QK_ALWAYS && e->kids[i]->kind != QK_EXPR)
			leaves[nl++] = e->kids[i];
	target_leaves(m, leaves, nl, sel);
	free(leaves);
	part = xcalloc((size_t)m->n, sizeof(*part));
	for (int i = 0; i < e->nkids; i++) {
		int kind = e->kids[i]->kind;

		if (kind != QK_AND && kind != QK_OR && kind != QK_NEVER)
			continue;
		memset(part, 0, (size_t)m->n * sizeof(*part));
		target_expr(m, e->kids[i], part);
		for (int c = 0; c < m->n; c++)
			sel[c] = sel[c] && part[c];
	}
	free(part);
}

int query_shard_target(const struct query_chunk_map *m, const struct query_expr *filter,
		       bool *chunks, int *nchunks)
{
	int n = 0;

	memset(chunks, 0, (size_t)m->n * sizeof(*chunks));
	if (!filter) {
		for (int c = 0; c < m->n; c++)
			chunks[c] = true;
	} else {
		target_expr(m, filter, chunks);
	}
	for (int c = 0; c < m->n; c++)
		n += chunks[c];
	if (nchunks)
		*nchunks = n;
	return n;
}

int query_shard_target_shards(const struct query_chunk_map *m, const bool *chunks,
			      const char **shards, int cap)
{
	int n = 0;

	for (int c = 0; c < m->n; c++) {
		bool seen = false;

		if (!chunks[c])
			continue;
		for (int i = 0; i < n && !seen; i++)
			seen = strcmp(shards[i], m->c[c].shard) == 0;
		if (!seen && n < cap)
			shards[n++] = m->c[c].shard;
	}
	return n;
}

/* ---- merging sorted streams (note 7) ----------------------------------------------- */

struct merge_in {
	const bson_t *doc;  /* Borrowed from the stream: its current document, or NULL */
	struct dfs_buf key; /* its sort key */
	bool done;	    /* at its end */
	bool stale;	    /* doc was returned: advance before looking again */
};

struct query_shard_merge {
	struct query_shard_stream *s; /* Owned copy of the streams */
	struct merge_in *in;	      /* Owned: one per stream */
	int n;
	struct query_sort *sort; /* Owned, or NULL */
	int64_t skip, limit, returned;
	int cur; /* without a sort: the stream being read */
	bool primed;
};

void query_shard_merge_free(struct query_shard_merge *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n; i++)
		dfs_buf_release(&m->in[i].key);
	free(m->in);
	free(m->s);
	query_sort_free(m->sort);
	free(m);
}

int query_shard_merge_open(const bson_t *sort, int64_t skip, int64_t limit,
			   const struct query_shard_stream *streams, int n,
			   struct query_shard_merge **out, struct dfs_err *err)
{
	struct query_shard_merge *m;
	int rc;

	if (skip < 0 || limit < 0)
		return dfs_err_set(err, DFS_EINVAL, "skip and limit must not be negative");
	m = xcalloc(1, sizeof(*m));
	m->s = xcalloc((size_t)n, sizeof(*m->s));
	m->in = xcalloc((size_t)n, sizeof(*m->in));
	m->n = n;
	if (n > 0)
		memcpy(m->s, streams, (size_t)n * sizeof(*m->s));
	for (int i = 0; i < n; i++) {
		dfs_buf_init(&m->in[i].key);
		m->in[i].stale = true;
	}
	m->skip = skip;
	m->limit = limit;
	if (sort && !bson_empty(sort) && (rc = query_sort_parse(sort, &m->sort, err))) {
		query_shard_merge_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

/* Brings stream i to its next document when its current one was used. */
static int advance(struct query_shard_merge *m, int i, struct dfs_err *err)
{
	struct merge_in *in = &m->in[i];
	int rc;

	if (in->done || !in->stale)
		return 0;
	in->stale = false;
	rc = m->s[i].next(m->s[i].ctx, &in->doc, err);
	if (rc == DFS_ENOENT) {
		in->done = true;
		in->doc = NULL;
		return 0;
	}
	if (rc)
		return dfs_err_prefix(err, "shard stream %d: ", i);
	if (m->sort) {
		dfs_buf_reset(&in->key);
		if ((rc = query_sort_key(m->sort, in->doc, &in->key, err)))
			return rc;
	}
	return 0;
}

/* The next document of the merged sequence before skip and limit. */
static int merged_next(struct query_shard_merge *m, const bson_t **doc, struct dfs_err *err)
{
	int best = -1, rc;

	if (!m->sort) {
		while (m->cur < m->n) {
			if ((rc = advance(m, m->cur, err)))
				return rc;
			if (!m->in[m->cur].done)
				break;
			m->cur++;
		}
		best = m->cur < m->n ? m->cur : -1;
	} else {
		for (int i = 0; i < m->n; i++) {
			struct merge_in *in = &m->in[i], *b;
			size_t l;
			int c;

			if ((rc = advance(m, i, err)))
				return rc;
			if (in->done)
				continue;
			if (best < 0) {
				best = i;
				continue;
			}
			b = &m->in[best];
			l = in->key.len < b->key.len ? in->key.len : b->key.len;
			c = memcmp(in->key.data, b->key.data, l);
			if (c < 0 || (c == 0 && in->key.len < b->key.len))
				best = i;
		}
	}
	if (best < 0)
		return DFS_ENOENT;
	*doc = m->in[best].doc;
	m->in[best].stale = true;
	return 0;
}

int query_shard_merge_next(struct query_shard_merge *m, const bson_t **doc, struct dfs_err *err)
{
	int rc;

	if (m->limit > 0 && m->returned >= m->limit)
		return DFS_ENOENT;
	while (m->skip > 0) {
		if ((rc = merged_next(m, doc, err)))
			return rc;
		m->skip--;
	}
	if ((rc = merged_next(m, doc, err)))
		return rc;
	m->returned++;
	return 0;
}
