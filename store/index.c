/*
 * index.c - secondary indexes: definitions (the 'indexes' table), key generation, entries
 * (the 'ikeys' table), their maintenance on every document write, index scans, FETCH,
 * the TTL sweep and the index part of `docfs check`. It does not plan queries or match
 * filters (a partial index calls the hooks the query layer installs).
 *
 * Design notes
 * 1. Tables. indexes(coll, name, spec, ixid, multikey, created, build_ms): one row per
 *    secondary index; ixid comes from the database's id counter and names the entries.
 *    ikeys(ix, key, id, vals) WITHOUT ROWID, primary key (ix, key, id): one row per entry,
 *    so a range of keys is a B-tree range and a unique check is one probe of (ix, key).
 *    The stored key is the index key K, then the document's _id key (store_key_append,
 *    ascending), then the length of that _id key (4 bytes, big-endian): entries with equal
 *    K follow in _id order, the order in which the SORT stage breaks ties, so an index that
 *    provides a sort returns what a scan and sort return (schema 3). K is prefix-free and
 *    no key byte after a K is 0xFF, so a byte range of K prefixes ("[K, K+0xFF)") holds
 *    exactly the entries of those K whatever the suffix; the trailing length lets a scan
 *    find K in a stored key without decoding it. Callers of the scan see K only.
 *    colls.ixver is the per-collection index version. The _id_ index has no rows: it is
 *    docs(coll, key) through the docs_key index.
 * 2. Key generation (store__ix_keys), for each field path of the key pattern:
 *    - a missing field, or a path that runs into a scalar, yields null ("not found": a sparse
 *      index skips a document when no field is found);
 *    - a value at the end of the path yields itself; an array there yields each element (an
 *      element that is itself an array as that array value), an empty array yields
 *      undefined, and the field becomes multikey;
 *    - a document in the path is descended into; an array in the path is descended element
 *      by element (documents only; an element without the field yields null) and makes the
 *      field multikey, unless the next component is a number: then it picks that element
 *      (and, as a query does, also descends into the array's documents that have a field
 *      of that name, which makes the field multikey);
 *    - an array in the path whose elements yield nothing yields null.
 *    Values of one field are deduplicated by their key bytes (5 and 5.0 are one entry). The
 *    entries of a compound index are the product of its fields' values; two fields that
 *    expand different arrays (neither field's set of expanded arrays contains the other's)
 *    are "parallel arrays", an error. A hashed field is one value (arrays are an error)
 *    stored as store_index_hash(). A key over DFS_MAX_KEY_SIZE bytes is an error.
 * 3. A document write is two steps: store__ix_prepare computes the old entries (from the
 *    stored BSON) and the new ones and runs every check (key errors, unique clashes against
 *    other documents) before anything is written; after the document row is written,
 *    store__ix_apply deletes the old entries and inserts the new ones (an entry in both,
 *    same key and values, is left alone). So a refused write
 *    leaves no trace, even when the caller goes on with its transaction (ordered inserts).
 * 4. Each transaction caches the index list of the last collection written (with compiled
 *    partial filters); a collection without secondary indexes costs one cache comparison per
 *    write. Index creation, drop and collection drop/empty invalidate the cache.
 * 5. The filter hooks are a process global set once at startup, before any store is opened,
 *    and read without locks afterwards.
 * 6. A reverse scan of a secondary index returns equal keys in ascending _id order (as the
 *    SORT stage of a descending sort breaks ties), although the B-tree runs them backwards:
 *    it reads a group of equal K into memory and returns it reversed; a group longer than
 *    TIE_BUF is read by a forward scan of [K, K+0xFF) instead, after which the reverse scan
 *    goes on below K. Memory stays bounded by TIE_BUF entries.
 * 7. An index build collects the entries of up to BUILD_MEM bytes, sorts them by key and
 *    inserts them in that order, so the B-tree grows at its right edge instead of at random
 *    pages (about a million entries of a short key are one chunk). The build thread
 *    reads documents in batches; a key thread keys the batches queued for it into run 1
 *    and the build thread keys a batch into run 0 itself when the queue is full, so both
 *    cores generate keys. Each run is radix-sorted on its own (by the index key only when
 *    its documents came in _id order, as stability then keeps ties in _id order) and the
 *    two are read merged by stored key: by the unique check, which compares neighbours
 *    (from the second chunk on it also probes the entries already inserted), and by one
 *    INSERT ... SELECT from a virtual table, whose B-tree cursor stays on the last leaf
 *    from row to row, so SQLite appends without seeking from the root.
 * 8. A text index (text.c) has one "_fts" field (dir STORE_IX_TEXT) in its key among
 *    ordinary prefix and suffix fields; each distinct term of a document is one entry,
 *    key = prefix keys + the term as a string key + suffix keys, vals = the values with
 *    the term at the "_fts" position, then "score": what MongoDB's _fts/_ftsx keys hold.
 *    So a term's entries are one byte range, and check verifies scores like any value.
 */
#include "store_int.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_KEYS_PER_DOC 100000 /* entries one document may generate for one index */
#define BUILD_PROGRESS 4096	/* documents between progress calls */
#define TTL_BATCH 4096		/* documents deleted per sweep transaction */
#define DIFF_MAX 512		/* pending entries up to which an update is diffed */
#define ID_SUFFIX_LEN 4		/* bytes of the trailing _id key length (note 1) */
#define TIE_BUF 64		/* equal keys a reverse scan reorders in memory (note 6) */
#define BUILD_MEM (128u << 20)	/* bytes of entries an index build sorts at once (note 7) */
#define BUILD_BATCH 256		/* documents an index build keys at once (note 7) */
#define BUILD_QUEUE 2		/* batches queued for the key thread (note 7) */

/* The length of the index key K of a stored key (note 1); len when it has no suffix. */
static size_t key_part(const uint8_t *key, size_t len)
{
	uint32_t n;

	if (len < ID_SUFFIX_LEN)
		return len;
	n = (uint32_t)key[len - 4] << 24 | (uint32_t)key[len - 3] << 16 |
	    (uint32_t)key[len - 2] << 8 | (uint32_t)key[len - 1];
	if ((size_t)n + ID_SUFFIX_LEN > len)
		return len;
	return len - ID_SUFFIX_LEN - n;
}

static struct store_filter_hooks hooks; /* note 5 */
static bool hooks_set;

const struct store_filter_hooks *store__filter_hooks(void)
{
	return hooks_set ? &hooks : NULL;
}

void store_filter_hooks_set(const struct store_filter_hooks *h)
{
	if (h) {
		hooks = *h;
		hooks_set = true;
	} else {
		memset(&hooks, 0, sizeof(hooks));
		hooks_set = false;
	}
}

/* ---- hashing ----------------------------------------------------------------------- */

int64_t store_index_hash(const bson_value_t *v)
{
	struct dfs_buf k;
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	dfs_buf_init(&k);
	if (store_key_append(&k, v, false, NULL) != 0)
		dfs_buf_reset(&k);
	for (size_t i = 0; i < k.len; i++) {
		h ^= (unsigned char)k.data[i];
		h *= UINT64_C(0x100000001b3);
	}
	dfs_buf_release(&k);
	/* FNV-1a spreads poorly in the high bits: finish with a 64-bit mixer. */
	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64_C(0xc4ceb9fe1a85ec53);
	h ^= h >> 33;
	return (int64_t)h;
}

/* ---- definitions ------------------------------------------------------------------- */

void store_index_release(struct store_index *ix)
{
	if (!ix)
		return;
	if (ix->partial)
		bson_destroy(ix->partial);
	if (ix->spec)
		bson_destroy(ix->spec);
	store__text_spec_free(ix->text);
	ix->partial = ix->spec = NULL;
	ix->text = NULL;
}

static int ix_parse(const bson_t *spec, bool strict, struct store_index *ix,
		    struct dfs_err *err);

int store_index_spec_check(const bson_t *spec, struct dfs_err *err)
{
	struct store_index ix;
	int rc = ix_parse(spec, true, &ix, err);

	if (!rc)
		store_index_release(&ix);
	return rc;
}

void store_index_list_free(struct store_index *ixs, int n)
{
	if (!ixs)
		return;
	for (int i = 0; i < n; i++)
		store_index_release(&ixs[i]);
	free(ixs);
}

static bool num_value(const bson_iter_t *it, double *d)
{
	switch (bson_iter_type(it)) {
	case BSON_TYPE_INT32:
		*d = bson_iter_int32(it);
		return true;
	case BSON_TYPE_INT64:
		*d = (double)bson_iter_int64(it);
		return true;
	case BSON_TYPE_DOUBLE:
		*d = bson_iter_double(it);
		return true;
	default:
		return false;
	}
}

static bool truthy(const bson_iter_t *it, bool *out)
{
	double d;

	if (BSON_ITER_HOLDS_BOOL(it)) {
		*out = bson_iter_bool(it);
		return true;
	}
	if (num_value(it, &d)) {
		*out = d != 0;
		return true;
	}
	return false;
}

static int check_path(const char *p, struct dfs_err *err)
{
	size_t n = strlen(p);

	if (n == 0)
		return dfs_err_set(err, DFS_EINVAL, "index key pattern has an empty field name");
	if (n >= sizeof(((struct store_index_field *)0)->path))
		return dfs_err_set(err, DFS_EINVAL, "index field '%.40s...' is too long", p);
	if (p[0] == '$')
		return dfs_err_set(err, DFS_EINVAL, "index field '%s' must not start with '$'", p);
	if (p[0] == '.' || p[n - 1] == '.' || strstr(p, ".."))
		return dfs_err_set(err, DFS_EINVAL, "index field '%s' has an empty path component",
				   p);
	return 0;
}

/* Reads one element of a key pattern ("path": 1 | -1 | "hashed") into the next field. */
static int key_field(const bson_iter_t *k, struct store_index *ix, struct dfs_err *err)
{
	const char *p = bson_iter_key(k), *s;
	struct store_index_field *fl;
	double d;
	int rc;

	if (ix->nfields == STORE_IX_MAX_FIELDS)
		return dfs_err_set(err, DFS_EINVAL, "index key has more than %d fields",
				   STORE_IX_MAX_FIELDS);
	if (!strcmp(p, "_ftsx") && ix->nfields && ix->field[ix->nfields - 1].dir == STORE_IX_TEXT)
		return 0; /* a stored text index's key: {_fts: "text", _ftsx: 1} */
	if (strcmp(p, "$**") && (rc = check_path(p, err)))
		return rc;
	for (int i = 0; i < ix->nfields; i++)
		if (strcmp(ix->field[i].path, p) == 0)
			return dfs_err_set(err, DFS_EINVAL, "index field '%s' appears twice", p);
	fl = &ix->field[ix->nfields];
	snprintf(fl->path, sizeof(fl->path), "%s", p);
	if (!strcmp(p, "$**") &&
	    !(BSON_ITER_HOLDS_UTF8(k) && !strcmp(bson_iter_utf8(k, NULL), "text")))
		return dfs_err_set(err, DFS_EINVAL, "index field '$**' must be \"text\"");
	if (num_value(k, &d) && (d == 1 || d == -1)) {
		fl->dir = d > 0 ? 1 : -1;
		ix->nfields++;
		return 0;
	}
	if (!BSON_ITER_HOLDS_UTF8(k))
		return dfs_err_set(
			err, DFS_EINVAL,
			"bad key pattern value for field '%s': must be 1, -1 or \"hashed\"", p);
	s = bson_iter_utf8(k, NULL);
	if (strcmp(s, "hashed") == 0) {
		fl->dir = 0;
		ix->nfields++;
		return 0;
	}
	if (strcmp(s, "text") == 0) {
		/* one "_fts" entry for the run of text fields (text.c reads their names) */
		if (ix->nfields && ix->field[ix->nfields - 1].dir == STORE_IX_TEXT)
			return 0;
		snprintf(fl->path, sizeof(fl->path), "_fts");
		fl->dir = STORE_IX_TEXT;
		ix->nfields++;
		return 0;
	}
	if (strcmp(s, "2d") == 0 || strcmp(s, "2dsphere") == 0 ||
	    strcmp(s, "geoHaystack") == 0 || strcmp(s, "wildcard") == 0)
		return dfs_err_set(err, DFS_EINVAL, "'%s' indexes are not supported (field '%s')",
				   s, p);
	return dfs_err_set(err, DFS_EINVAL, "unknown index type '%s' for field '%s'", s, p);
}

/*
 * Reads a spec into ix (fields, options, a copy of the spec). strict: a spec given to
 * create (unknown options, types and values are checked); otherwise a stored one.
 * The name may be absent when strict (ix->name is then ""). ix->spec and ix->partial are
 * Owned by ix on success.
 */
static int ix_parse_fields(const bson_t *spec, bool strict, struct store_index *ix,
			   struct dfs_err *err)
{
	bson_iter_t it, k;
	bool have_key = false;
	int nhashed = 0;

	memset(ix, 0, sizeof(*ix));
	ix->expire_after = -1;
	if (!bson_iter_init(&it, spec))
		return dfs_err_set(err, DFS_EINVAL, "index spec is not valid BSON");
	while (bson_iter_next(&it)) {
		const char *f = bson_iter_key(&it);
		double d;

		if (strcmp(f, "key") == 0) {
			if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &k))
				return dfs_err_set(err, DFS_EINVAL,
						   "index 'key' must be a document");
			have_key = true;
			while (bson_iter_next(&k)) {
				int rc = key_field(&k, ix, err);

				if (rc)
					return rc;
				nhashed += ix->field[ix->nfields - 1].dir == 0;
			}
		} else if (strcmp(f, "name") == 0) {
			const char *s;

			if (!BSON_ITER_HOLDS_UTF8(&it))
				return dfs_err_set(err, DFS_EINVAL,
						   "index 'name' must be a string");
			s = bson_iter_utf8(&it, NULL);
			if (!*s || strlen(s) >= sizeof(ix->name) || strchr(s, '/') ||
			    strcmp(s, ".") == 0 || strcmp(s, "..") == 0 || strcmp(s, "*") == 0)
				return dfs_err_set(err, DFS_EINVAL,
						   "bad index name '%.60s': 1..127 bytes, no '/', "
						   "not '.', '..' or '*'",
						   s);
			snprintf(ix->name, sizeof(ix->name), "%s", s);
		} else if (strcmp(f, "unique") == 0 || strcmp(f, "sparse") == 0) {
			bool b;

			if (!truthy(&it, &b))
				return dfs_err_set(err, DFS_EINVAL,
						   "index option '%s' must be a boolean", f);
			if (f[0] == 'u')
				ix->unique = b;
			else
				ix->sparse = b;
		} else if (strcmp(f, "expireAfterSeconds") == 0) {
			if (!num_value(&it, &d) || d < 0 || d != (double)(int64_t)d ||
			    d > 2147483647.0)
				return dfs_err_set(
					err, DFS_EINVAL,
					"expireAfterSeconds must be a non-negative integer");
			ix->expire_after = (int64_t)d;
		} else if (strcmp(f, "partialFilterExpression") == 0) {
			const uint8_t *data;
			uint32_t len;

			if (!BSON_ITER_HOLDS_DOCUMENT(&it))
				return dfs_err_set(err, DFS_EINVAL,
						   "partialFilterExpression must be a document");
			bson_iter_document(&it, &len, &data);
			if (ix->partial)
				bson_destroy(ix->partial);
			ix->partial = bson_new_from_data(data, len);
		} else if (strcmp(f, "v") == 0) {
			if (strict && (!num_value(&it, &d) || (d != 1 && d != 2))) {
				store_index_release(ix);
				return dfs_err_set(err, DFS_EINVAL,
						   "index version 'v' must be 1 or 2");
			}
		} else if (strcmp(f, "weights") == 0 || strcmp(f, "default_language") == 0 ||
			   strcmp(f, "language_override") == 0 ||
			   strcmp(f, "textIndexVersion") == 0) {
			/* a text index's options: store__text_spec_parse reads them */
		} else if (strcmp(f, "background") == 0) {
			/* accepted and ignored, as by MongoDB 4.2+ */
		} else if (strict) {
			store_index_release(ix);
			return dfs_err_set(err, DFS_EINVAL, "unknown index option '%s'", f);
		}
	}
	if (!have_key || ix->nfields == 0) {
		store_index_release(ix);
		return dfs_err_set(err, DFS_EINVAL, "index spec needs a non-empty 'key' document");
	}
	ix->hashed = nhashed > 0;
	for (int i = 0; i < ix->nfields; i++) {
		int rc;

		if (ix->field[i].dir != STORE_IX_TEXT)
			continue;
		if (ix->hashed || ix->expire_after >= 0) {
			store_index_release(ix);
			return dfs_err_set(err, DFS_EINVAL, "a text index cannot be %s",
					   ix->hashed ? "hashed" : "a TTL index");
		}
		if ((rc = store__text_spec_parse(spec, ix, strict, err))) {
			store_index_release(ix);
			return rc;
		}
		break;
	}
	if (strict && !ix->text && (bson_has_field(spec, "weights") ||
				    bson_has_field(spec, "default_language") ||
				    bson_has_field(spec, "language_override") ||
				    bson_has_field(spec, "textIndexVersion"))) {
		store_index_release(ix);
		return dfs_err_set(err, DFS_EINVAL,
				   "weights, default_language, language_override and "
				   "textIndexVersion are options of text indexes");
	}
	if (strict) {
		const char *why = NULL;

		if (nhashed > 1)
			why = "an index may have only one hashed field";
		else if (ix->hashed && ix->unique)
			why = "hashed indexes cannot guarantee uniqueness: use a regular index";
		else if (ix->expire_after >= 0 && (ix->nfields != 1 || ix->hashed))
			why = "expireAfterSeconds needs a single-field, non-hashed index";
		else if (ix->expire_after >= 0 && strcmp(ix->field[0].path, "_id") == 0)
			why = "expireAfterSeconds is not allowed on _id";
		else if (ix->partial && ix->sparse)
			why = "cannot mix partialFilterExpression and sparse";
		if (why) {
			store_index_release(ix);
			return dfs_err_set(err, DFS_EINVAL, "%s", why);
		}
	}
	return 0;
}

static int ix_parse(const bson_t *spec, bool strict, struct store_index *ix, struct dfs_err *err)
{
	int rc = ix_parse_fields(spec, strict, ix, err);

	if (rc) {
		store_index_release(ix);
		return rc;
	}
	ix->spec = bson_copy(spec);
	return 0;
}

/* MongoDB's default name: "<path>_<1|-1|hashed>" joined with '_'. */
static int default_name(const struct store_index *ix, char *out, size_t cap, struct dfs_err *err)
{
	struct dfs_buf b;
	int rc = 0;

	dfs_buf_init(&b);
	for (int i = 0; i < ix->nfields; i++)
		if (ix->field[i].dir == STORE_IX_TEXT)
			dfs_buf_printf(&b, "%s%s", i ? "_" : "", ix->text->keynames);
		else
		dfs_buf_printf(&b, "%s%s_%s", i ? "_" : "", ix->field[i].path,
			       ix->field[i].dir == 0  ? "hashed"
			       : ix->field[i].dir > 0 ? "1"
						      : "-1");
	if (b.len >= cap)
		rc = dfs_err_set(err, DFS_EINVAL,
				 "default index name '%.40s...' is too long: give a name", b.data);
	else
		snprintf(out, cap, "%s", b.data);
	dfs_buf_release(&b);
	return rc;
}

static void id_index(struct store_index *ix)
{
	bson_t key;

	memset(ix, 0, sizeof(*ix));
	ix->ixid = 0;
	snprintf(ix->name, sizeof(ix->name), "_id_");
	ix->nfields = 1;
	snprintf(ix->field[0].path, sizeof(ix->field[0].path), "_id");
	ix->field[0].dir = 1;
	ix->unique = true;
	ix->expire_after = -1;
	ix->spec = bson_new();
	bson_append_int32(ix->spec, "v", 1, 2);
	bson_append_document_begin(ix->spec, "key", 3, &key);
	bson_append_int32(&key, "_id", 3, 1);
	bson_append_document_end(ix->spec, &key);
	bson_append_utf8(ix->spec, "name", 4, "_id_", 4);
}

/* Fills ix from a row of ST_IX_LIST (name, spec, ixid, multikey, created, build_ms). */
static int ix_from_row(sqlite3_stmt *st, struct store_index *ix, struct dfs_err *err)
{
	const uint8_t *data = sqlite3_column_blob(st, 1);
	int n = sqlite3_column_bytes(st, 1);
	const char *name = (const char *)sqlite3_column_text(st, 0);
	bson_t spec;
	int rc;

	if (n < 5 || !bson_init_static(&spec, data, (size_t)n))
		return dfs_err_set(err, DFS_ECORRUPT, "index '%s' has a bad spec",
				   name ? name : "?");
	if ((rc = ix_parse(&spec, false, ix, err)))
		return dfs_err_prefix(err, "index '%s': ", name ? name : "?");
	snprintf(ix->name, sizeof(ix->name), "%s", name ? name : "");
	ix->ixid = sqlite3_column_int64(st, 2);
	ix->multikey = (uint32_t)sqlite3_column_int64(st, 3);
	return 0;
}

/* Checks that collection coll exists (DFS_ENOENT). */
static int coll_check(struct store_txn *t, int64_t coll, struct dfs_err *err)
{
	struct store_coll c;

	if (t->coll_ok == coll)
		return 0;
	return store_coll_by_id(t, coll, &c, err);
}

/* The secondary indexes of coll, by creation. *out Owned (array of *n, may be NULL). */
static int load_secondary(struct store_txn *t, int64_t coll, struct store_index **out, int *n,
			  struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_IX_LIST, err);
	struct store_index *ixs = NULL;
	int cnt = 0, cap = 0, rc;

	*out = NULL;
	*n = 0;
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (cnt == cap) {
			cap = cap ? cap * 2 : 4;
			ixs = realloc(ixs, (size_t)cap * sizeof(*ixs));
			if (!ixs)
				abort();
		}
		if ((rc = ix_from_row(st, &ixs[cnt], err))) {
			sqlite3_reset(st);
			store_index_list_free(ixs, cnt);
			return rc;
		}
		cnt++;
	}
	if (rc != SQLITE_DONE) {
		store_index_list_free(ixs, cnt);
		return store__sqlerr(t, rc, "read index definitions", err);
	}
	*out = ixs;
	*n = cnt;
	return 0;
}

int store_index_list(struct store_txn *t, int64_t coll, struct store_index **out, int *n,
		     struct dfs_err *err)
{
	struct store_index *sec, *all;
	int nsec, rc;

	if ((rc = coll_check(t, coll, err)))
		return rc;
	if ((rc = load_secondary(t, coll, &sec, &nsec, err)))
		return rc;
	all = calloc((size_t)nsec + 1, sizeof(*all));
	if (!all)
		abort();
	id_index(&all[0]);
	if (nsec)
		memcpy(all + 1, sec, (size_t)nsec * sizeof(*sec));
	free(sec);
	*out = all;
	*n = nsec + 1;
	return 0;
}

int store_index_get(struct store_txn *t, int64_t coll, const char *name, struct store_index *out,
		    struct dfs_err *err)
{
	struct store_index *all;
	int n, rc;

	if ((rc = store_index_list(t, coll, &all, &n, err)))
		return rc;
	rc = dfs_err_set(err, DFS_ENOENT, "index '%s' not found", name);
	for (int i = 0; i < n; i++) {
		if (strcmp(all[i].name, name) == 0) {
			if (err)
				dfs_err_clear(err);
			*out = all[i];
			memset(&all[i], 0, sizeof(all[i]));
			rc = 0;
			break;
		}
	}
	store_index_list_free(all, n);
	return rc;
}

/* ---- key generation (note 2) ------------------------------------------------------- */

struct fieldvals {
	bson_value_t *v; /* values (shallow: point into the document) */
	size_t n, cap;
	const uint8_t **arrs; /* arrays expanded (their data pointers) */
	size_t narrs, capa;
	bool found;    /* some value was found (sparse) */
	bool multikey; /* an array was expanded */
};

static void fv_add(struct fieldvals *fv, const bson_value_t *v)
{
	if (fv->n == fv->cap) {
		fv->cap = fv->cap ? fv->cap * 2 : 8;
		fv->v = realloc(fv->v, fv->cap * sizeof(*fv->v));
		if (!fv->v)
			abort();
	}
	fv->v[fv->n++] = *v;
}

static void fv_arr(struct fieldvals *fv, const uint8_t *data)
{
	fv->multikey = true;
	for (size_t i = 0; i < fv->narrs; i++)
		if (fv->arrs[i] == data)
			return;
	if (fv->narrs == fv->capa) {
		fv->capa = fv->capa ? fv->capa * 2 : 4;
		fv->arrs = realloc(fv->arrs, fv->capa * sizeof(*fv->arrs));
		if (!fv->arrs)
			abort();
	}
	fv->arrs[fv->narrs++] = data;
}

static void add_null(struct fieldvals *fv)
{
	bson_value_t v = {.value_type = BSON_TYPE_NULL};

	fv_add(fv, &v);
}

static void walk_value(const bson_value_t *v, const char *rest, struct fieldvals *fv);

/* Looks up the first component of path in the document data and walks on. */
static void walk_doc(const uint8_t *data, uint32_t len, const char *path, struct fieldvals *fv)
{
	const char *dot = strchr(path, '.');
	size_t clen = dot ? (size_t)(dot - path) : strlen(path);
	bson_t d;
	bson_iter_t it;

	if (!bson_init_static(&d, data, len) || !bson_iter_init(&it, &d) ||
	    !bson_iter_find_w_len(&it, path, (int)clen)) {
		add_null(fv);
		return;
	}
	walk_value(bson_iter_value(&it), dot ? dot + 1 : NULL, fv);
}

static bool all_digits(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static void walk_value(const bson_value_t *v, const char *rest, struct fieldvals *fv)
{
	bson_t a;
	bson_iter_t it;

	if (!rest) {
		fv->found = true;
		if (v->value_type != BSON_TYPE_ARRAY) {
			fv_add(fv, v);
			return;
		}
		fv_arr(fv, v->value.v_doc.data);
		if (!bson_init_static(&a, v->value.v_doc.data, v->value.v_doc.data_len) ||
		    !bson_iter_init(&it, &a))
			return;
		if (bson_count_keys(&a) == 0) {
			bson_value_t u = {.value_type = BSON_TYPE_UNDEFINED};

			fv_add(fv, &u);
			return;
		}
		while (bson_iter_next(&it))
			fv_add(fv, bson_iter_value(&it));
		return;
	}
	if (v->value_type == BSON_TYPE_DOCUMENT) {
		walk_doc(v->value.v_doc.data, v->value.v_doc.data_len, rest, fv);
		return;
	}
	if (v->value_type != BSON_TYPE_ARRAY) {
		add_null(fv);
		return;
	}
	if (!bson_init_static(&a, v->value.v_doc.data, v->value.v_doc.data_len) ||
	    !bson_iter_init(&it, &a)) {
		add_null(fv);
		return;
	}
	{
		const char *dot = strchr(rest, '.');
		size_t clen = dot ? (size_t)(dot - rest) : strlen(rest);
		size_t before = fv->n;

		if (all_digits(rest, clen)) {
			bson_iter_t els = it;

			/* A positional component picks one element... */
			if (bson_iter_find_w_len(&it, rest, (int)clen))
				walk_value(bson_iter_value(&it), dot ? dot + 1 : NULL, fv);
			else
				add_null(fv);
			/* ...and names a field of the documents in the array, as it does for a
			 * query (match.c note 1c): their values are keys too, and make the field
			 * multikey. Documents without that field add nothing. */
			while (bson_iter_next(&els)) {
				const bson_value_t *e = bson_iter_value(&els);
				bson_iter_t f;
				bson_t ed;

				if (e->value_type != BSON_TYPE_DOCUMENT ||
				    !bson_init_static(&ed, e->value.v_doc.data,
						      e->value.v_doc.data_len) ||
				    !bson_iter_init(&f, &ed) ||
				    !bson_iter_find_w_len(&f, rest, (int)clen))
					continue;
				fv_arr(fv, v->value.v_doc.data);
				walk_doc(e->value.v_doc.data, e->value.v_doc.data_len, rest, fv);
			}
			return;
		}
		fv_arr(fv, v->value.v_doc.data);
		while (bson_iter_next(&it)) {
			const bson_value_t *e = bson_iter_value(&it);

			if (e->value_type == BSON_TYPE_DOCUMENT)
				walk_doc(e->value.v_doc.data, e->value.v_doc.data_len, rest, fv);
		}
		if (fv->n == before)
			add_null(fv);
	}
}

/* Empties fv for the next document, keeping its arrays. */
static void fv_reset(struct fieldvals *fv)
{
	fv->n = fv->narrs = 0;
	fv->found = fv->multikey = false;
}

static bool arrs_subset(const struct fieldvals *a, const struct fieldvals *b)
{
	for (size_t i = 0; i < a->narrs; i++) {
		size_t j;

		for (j = 0; j < b->narrs; j++)
			if (a->arrs[i] == b->arrs[j])
				break;
		if (j == b->narrs)
			return false;
	}
	return true;
}

/* One field's distinct values with their key bytes (encoded for its direction). */
struct fieldkeys {
	struct dfs_buf buf;
	size_t *off, *len; /* key bytes of value i in buf */
	bson_value_t *val; /* the value stored in vals (the hash for a hashed field) */
	size_t n, cap;
};

/* Key generation's per-field work space, kept from one document to the next so that a
 * document costs no allocation once the arrays have grown. */
struct store__ixscratch {
	struct fieldvals fv[STORE_IX_MAX_FIELDS];
	struct fieldkeys fk[STORE_IX_MAX_FIELDS];
};

void store__ixkeys_init(struct store__ixkeys *k)
{
	memset(k, 0, sizeof(*k));
	dfs_buf_init(&k->buf);
}

void store__ixkeys_reset(struct store__ixkeys *k)
{
	dfs_buf_reset(&k->buf);
	k->n = 0;
	k->multikey = 0;
}

void store__ixkeys_release(struct store__ixkeys *k)
{
	dfs_buf_release(&k->buf);
	free(k->e);
	if (k->scratch) {
		for (int f = 0; f < STORE_IX_MAX_FIELDS; f++) {
			free(k->scratch->fv[f].v);
			free(k->scratch->fv[f].arrs);
			dfs_buf_release(&k->scratch->fk[f].buf);
			free(k->scratch->fk[f].off);
			free(k->scratch->fk[f].len);
			free(k->scratch->fk[f].val);
		}
		free(k->scratch);
	}
	memset(k, 0, sizeof(*k));
}

static int field_keys(const struct store_index *ix, int f, struct fieldvals *fv,
		      struct fieldkeys *fk, struct dfs_err *err)
{
	const struct store_index_field *fl = &ix->field[f];
	int rc;

	dfs_buf_reset(&fk->buf);
	fk->n = 0;
	if (fk->cap < fv->n + 1) {
		fk->cap = fv->n + 1;
		fk->off = realloc(fk->off, fk->cap * sizeof(size_t));
		fk->len = realloc(fk->len, fk->cap * sizeof(size_t));
		fk->val = realloc(fk->val, fk->cap * sizeof(bson_value_t));
		if (!fk->off || !fk->len || !fk->val)
			abort();
	}
	if (fl->dir == 0 && fv->multikey)
		return dfs_err_set(err, DFS_EINVAL,
				   "index '%s': hashed field '%s' holds an array: hashed indexes do"
				   " not support array values",
				   ix->name, fl->path);
	for (size_t i = 0; i < fv->n; i++) {
		size_t start = fk->buf.len;
		bson_value_t hv;
		const bson_value_t *v = &fv->v[i];
		bool dup = false;

		if (fl->dir == 0) {
			hv.value_type = BSON_TYPE_INT64;
			hv.value.v_int64 = store_index_hash(v);
			v = &hv;
		}
		if ((rc = store_key_append(&fk->buf, v, fl->dir < 0, err)))
			return dfs_err_prefix(err, "index '%s': ", ix->name);
		for (size_t j = 0; j < fk->n; j++) {
			if (fk->len[j] == fk->buf.len - start &&
			    memcmp(fk->buf.data + fk->off[j], fk->buf.data + start, fk->len[j]) ==
				    0) {
				dup = true;
				break;
			}
		}
		if (dup) {
			fk->buf.len = start;
			continue;
		}
		fk->off[fk->n] = start;
		fk->len[fk->n] = fk->buf.len - start;
		fk->val[fk->n] = *v;
		fk->n++;
	}
	return 0;
}

static void ek_push(struct store__ixkeys *out, size_t koff, size_t klen, size_t voff, size_t vlen)
{
	if (out->n == out->cap) {
		out->cap = out->cap ? out->cap * 2 : 16;
		out->e = realloc(out->e, out->cap * sizeof(*out->e));
		if (!out->e)
			abort();
	}
	out->e[out->n].koff = koff;
	out->e[out->n].klen = klen;
	out->e[out->n].voff = voff;
	out->e[out->n].vlen = vlen;
	out->n++;
}

/* The names of the fields of vals: "0", "1", ... */
static const char *const field_num[STORE_IX_MAX_FIELDS] = {
	"0",  "1",  "2",  "3",	"4",  "5",  "6",  "7",	"8",  "9",  "10",
	"11", "12", "13", "14", "15", "16", "17", "18", "19", "20", "21",
	"22", "23", "24", "25", "26", "27", "28", "29", "30", "31",
};

/*
 * The entries of a text index (note 8): the other fields must hold one value each (an
 * array is an error, as in MongoDB); one entry per distinct term of the document, its key
 * the fields' keys with the term's in the "_fts" position, its vals the values with the
 * term there and "score".
 */
static int text_keys(const struct store_index *ix, const bson_t *doc, size_t idlen,
		     struct store__ixkeys *out, struct dfs_err *err)
{
	struct fieldvals *fv = out->scratch->fv;
	struct store_text_terms terms;
	struct dfs_buf pre, suf;
	int rc = 0, pos = ix->text->pos;

	dfs_buf_init(&pre);
	dfs_buf_init(&suf);
	store_text_terms_init(&terms);
	for (int f = 0; f < ix->nfields; f++) {
		if (f == pos)
			continue;
		fv_reset(&fv[f]);
		walk_doc(bson_get_data(doc), doc->len, ix->field[f].path, &fv[f]);
		if (fv[f].multikey) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "index '%s': cannot have a multi-key as a %s to a text "
					 "index (field '%s')",
					 ix->name, f < pos ? "prefix" : "suffix", ix->field[f].path);
			goto done;
		}
		if ((rc = store_key_append(f < pos ? &pre : &suf, &fv[f].v[0],
					   ix->field[f].dir < 0, err))) {
			dfs_err_prefix(err, "index '%s': ", ix->name);
			goto done;
		}
	}
	if ((rc = store_text_score(ix, doc, &terms, err))) {
		dfs_err_prefix(err, "index '%s': ", ix->name);
		goto done;
	}
	for (size_t i = 0; i < terms.n; i++) {
		const char *term = terms.buf.data + terms.off[i];
		bson_value_t tv = {.value_type = BSON_TYPE_UTF8};
		size_t koff = out->buf.len, klen, voff;
		bson_t vals;

		tv.value.v_utf8.str = (char *)term;
		tv.value.v_utf8.len = (uint32_t)strlen(term);
		dfs_buf_append(&out->buf, pre.data, pre.len);
		if ((rc = store_key_append(&out->buf, &tv, false, err))) {
			dfs_err_prefix(err, "index '%s': ", ix->name);
			goto done;
		}
		dfs_buf_append(&out->buf, suf.data, suf.len);
		if (out->buf.len - koff > DFS_MAX_KEY_SIZE) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "index '%s': key is %zu bytes, over the %d-byte limit",
					 ix->name, out->buf.len - koff, DFS_MAX_KEY_SIZE);
			goto done;
		}
		dfs_buf_reserve(&out->buf, idlen + ID_SUFFIX_LEN);
		dfs_buf_append(&out->buf, out->buf.data, idlen + ID_SUFFIX_LEN);
		klen = out->buf.len - koff;
		bson_init(&vals);
		for (int f = 0; f < ix->nfields; f++)
			bson_append_value(&vals, field_num[f], f < 10 ? 1 : 2,
					  f == pos ? &tv : &fv[f].v[0]);
		bson_append_double(&vals, "score", 5, terms.score[i]);
		voff = out->buf.len;
		dfs_buf_append(&out->buf, bson_get_data(&vals), vals.len);
		ek_push(out, koff, klen, voff, vals.len);
		bson_destroy(&vals);
	}
	if (terms.n)
		out->multikey |= UINT32_C(1) << pos;
done:
	store_text_terms_release(&terms);
	dfs_buf_release(&pre);
	dfs_buf_release(&suf);
	return rc;
}

int store__ix_keys(const struct store_index *ix, const void *partial, const bson_t *doc,
		   struct store__ixkeys *out, struct dfs_err *err)
{
	struct fieldvals *fv;
	struct fieldkeys *fk;
	size_t idx[STORE_IX_MAX_FIELDS];
	size_t total = 1, idlen;
	bson_iter_t idit;
	bson_value_t null_id = {.value_type = BSON_TYPE_NULL};
	bool any_found = false;
	int rc = 0, nf = ix->nfields;

	store__ixkeys_reset(out);
	if (ix->partial) {
		if (!partial)
			return dfs_err_set(
				err, DFS_EINVAL,
				"partial index '%s' needs the query engine's filter hooks",
				ix->name);
		if (!hooks.match(partial, doc))
			return 0;
	}
	/* The _id suffix of every key (note 1), kept at the start of buf. */
	if ((rc = store_key_append(&out->buf,
				   bson_iter_init_find(&idit, doc, "_id") ? bson_iter_value(&idit)
									  : &null_id,
				   false, err)))
		return dfs_err_prefix(err, "index '%s': _id: ", ix->name);
	idlen = out->buf.len;
	dfs_buf_putc(&out->buf, (char)(idlen >> 24));
	dfs_buf_putc(&out->buf, (char)(idlen >> 16));
	dfs_buf_putc(&out->buf, (char)(idlen >> 8));
	dfs_buf_putc(&out->buf, (char)idlen);
	if (!out->scratch) {
		out->scratch = calloc(1, sizeof(*out->scratch));
		if (!out->scratch)
			abort();
		for (int f = 0; f < STORE_IX_MAX_FIELDS; f++)
			dfs_buf_init(&out->scratch->fk[f].buf);
	}
	fv = out->scratch->fv;
	fk = out->scratch->fk;
	if (ix->text) {
		rc = text_keys(ix, doc, idlen, out, err);
		goto done;
	}
	for (int f = 0; f < nf; f++) {
		fv_reset(&fv[f]);
		walk_doc(bson_get_data(doc), doc->len, ix->field[f].path, &fv[f]);
		any_found |= fv[f].found;
		if (fv[f].multikey)
			out->multikey |= UINT32_C(1) << f;
	}
	if (ix->sparse && !any_found)
		goto done;
	for (int i = 0; i < nf; i++)
		for (int j = i + 1; j < nf; j++)
			if (fv[i].narrs && fv[j].narrs && !arrs_subset(&fv[i], &fv[j]) &&
			    !arrs_subset(&fv[j], &fv[i])) {
				rc = dfs_err_set(
					err, DFS_EINVAL,
					"index '%s': cannot index parallel arrays [%s] [%s]",
					ix->name, ix->field[j].path, ix->field[i].path);
				goto done;
			}
	for (int f = 0; f < nf; f++) {
		if ((rc = field_keys(ix, f, &fv[f], &fk[f], err)))
			goto done;
		total *= fk[f].n ? fk[f].n : 1;
		if (total > MAX_KEYS_PER_DOC) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "index '%s': a document generates more than %d keys",
					 ix->name, MAX_KEYS_PER_DOC);
			goto done;
		}
	}
	/* The product of the fields' values, first field slowest. */
	memset(idx, 0, sizeof(idx));
	for (size_t e = 0; e < total; e++) {
		size_t koff = out->buf.len, voff, klen;
		bson_t vals;

		for (int f = 0; f < nf; f++)
			dfs_buf_append(&out->buf, fk[f].buf.data + fk[f].off[idx[f]],
				       fk[f].len[idx[f]]);
		klen = out->buf.len - koff;
		if (klen > DFS_MAX_KEY_SIZE) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "index '%s': key is %zu bytes, over the %d-byte limit",
					 ix->name, klen, DFS_MAX_KEY_SIZE);
			goto done;
		}
		dfs_buf_reserve(&out->buf, idlen + ID_SUFFIX_LEN);
		dfs_buf_append(&out->buf, out->buf.data, idlen + ID_SUFFIX_LEN);
		klen = out->buf.len - koff;
		bson_init(&vals);
		for (int f = 0; f < nf; f++)
			bson_append_value(&vals, field_num[f], f < 10 ? 1 : 2, &fk[f].val[idx[f]]);
		voff = out->buf.len;
		dfs_buf_append(&out->buf, bson_get_data(&vals), vals.len);
		ek_push(out, koff, klen, voff, vals.len);
		bson_destroy(&vals);
		for (int f = nf - 1; f >= 0; f--) {
			if (++idx[f] < fk[f].n)
				break;
			idx[f] = 0;
		}
	}
done:
	if (rc)
		store__ixkeys_reset(out);
	return rc;
}

/* ---- the per-transaction cache and pending writes (notes 3, 4) ------------------------ */

struct pend {
	int64_t ixid;
	bool add;	   /* insert (else delete) */
	bool skip;	   /* an unchanged entry: deleted and added alike */
	size_t koff, klen; /* in ixc->pbuf */
	size_t voff, vlen;
	int64_t id;
};

struct store__ixcache {
	int64_t coll;		/* collection loaded (0: none) */
	struct store_index *ix; /* Owned: its secondary indexes */
	void **partial;		/* Owned: compiled partial filters (NULL entries) */
	int n;
	struct store__ixkeys keys; /* scratch of key generation */
	struct dfs_buf pbuf;	   /* pending keys and vals */
	struct pend *pend;
	size_t npend, cappend;
	uint32_t mk[DFS_MAX_INDEXES]; /* multikey bits to add, per cached index */
	bool mk_any;
};

static void cache_drop(struct store__ixcache *c)
{
	for (int i = 0; i < c->n; i++)
		if (c->partial[i] && hooks.free)
			hooks.free(c->partial[i]);
	store_index_list_free(c->ix, c->n);
	free(c->partial);
	c->ix = NULL;
	c->partial = NULL;
	c->n = 0;
	c->coll = 0;
}

void store__ix_invalidate(struct store_txn *t)
{
	if (t->ixc)
		cache_drop(t->ixc);
}

void store__ix_txn_free(struct store_txn *t)
{
	struct store__ixcache *c = t->ixc;

	if (!c)
		return;
	cache_drop(c);
	store__ixkeys_release(&c->keys);
	dfs_buf_release(&c->pbuf);
	free(c->pend);
	free(c);
	t->ixc = NULL;
}

static int compile_partial(const struct store_index *ix, void **out, struct dfs_err *err)
{
	*out = NULL;
	if (!ix->partial)
		return 0;
	if (!hooks_set || !hooks.compile || !hooks.match)
		return dfs_err_set(err, DFS_EINVAL,
				   "partial index '%s' needs the query engine's filter hooks",
				   ix->name);
	if (hooks.compile(ix->partial, out, err))
		return dfs_err_prefix(err, "index '%s': partialFilterExpression: ", ix->name);
	return 0;
}

static int cache_load(struct store_txn *t, int64_t coll, struct store__ixcache **out,
		      struct dfs_err *err)
{
	struct store__ixcache *c = t->ixc;
	int rc;

	if (!c) {
		c = t->ixc = calloc(1, sizeof(*c));
		if (!c)
			abort();
		store__ixkeys_init(&c->keys);
		dfs_buf_init(&c->pbuf);
	}
	*out = c;
	if (c->coll == coll)
		return 0;
	cache_drop(c);
	if ((rc = load_secondary(t, coll, &c->ix, &c->n, err)))
		return rc;
	c->partial = calloc((size_t)c->n + 1, sizeof(void *));
	if (!c->partial)
		abort();
	for (int i = 0; i < c->n; i++) {
		if ((rc = compile_partial(&c->ix[i], &c->partial[i], err))) {
			cache_drop(c);
			return rc;
		}
	}
	c->coll = coll;
	return 0;
}

static void pend_push(struct store__ixcache *c, int64_t ixid, bool add, int64_t id,
		      const struct store__ixkeys *k, size_t e)
{
	struct pend *p;

	if (c->npend == c->cappend) {
		c->cappend = c->cappend ? c->cappend * 2 : 32;
		c->pend = realloc(c->pend, c->cappend * sizeof(*c->pend));
		if (!c->pend)
			abort();
	}
	p = &c->pend[c->npend++];
	p->ixid = ixid;
	p->add = add;
	p->skip = false;
	p->id = id;
	p->koff = c->pbuf.len;
	p->klen = k->e[e].klen;
	dfs_buf_append(&c->pbuf, k->buf.data + k->e[e].koff, k->e[e].klen);
	p->voff = c->pbuf.len;
	p->vlen = k->e[e].vlen;
	dfs_buf_append(&c->pbuf, k->buf.data + k->e[e].voff, k->e[e].vlen);
}

/* The MongoDB-like message of a unique clash: vals rendered as { path: value, ... }. */
static int dup_error(struct store_txn *t, int64_t coll, const struct store_index *ix,
		     const uint8_t *vals, size_t vlen, struct dfs_err *err)
{
	struct store_coll c;
	struct dfs_buf b;
	bson_t v;
	bson_iter_t it;
	int f = 0, rc;

	dfs_buf_init(&b);
	dfs_buf_puts(&b, "{ ");
	if (bson_init_static(&v, vals, vlen) && bson_iter_init(&it, &v)) {
		while (bson_iter_next(&it) && f < ix->nfields) {
			dfs_buf_printf(&b, "%s%s: ", f ? ", " : "", ix->field[f].path);
			store_codec_render_value(bson_iter_value(&it), &b, NULL);
			f++;
		}
	}
	dfs_buf_puts(&b, " }");
	if (store_coll_by_id(t, coll, &c, NULL) != 0)
		snprintf(c.name, sizeof(c.name), "%lld", (long long)coll);
	rc = dfs_err_set(err, DFS_EEXIST,
			 "E11000 duplicate key error collection: %s.%s index: %s dup key: %s",
			 t->db->name, c.name, ix->name, b.data);
	dfs_buf_release(&b);
	return rc;
}

/* 0 when no other document than id has key in index ixid; DFS_EEXIST (message set by the
 * caller) when one has; else an SQLite error. */
static int unique_probe(struct store_txn *t, int64_t ixid, const void *key, size_t klen, int64_t id,
			struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_IKEY_DUP, err);
	size_t k = key_part(key, klen);
	uint8_t hi[DFS_MAX_KEY_SIZE + 1];
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	/* The entries of K whatever their _id suffix: [K, K+0xFF) (note 1). */
	memcpy(hi, key, k);
	hi[k] = 0xff;
	sqlite3_bind_int64(st, 1, ixid);
	sqlite3_bind_blob(st, 2, key, (int)k, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, id);
	sqlite3_bind_blob(st, 4, hi, (int)k + 1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc == SQLITE_ROW)
		return DFS_EEXIST;
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "unique check", err);
	return 0;
}

int store__ix_prepare(struct store_txn *t, int64_t oldcoll, int64_t newcoll, int64_t id,
		      const bson_t *newdoc, struct dfs_err *err)
{
	struct store__ixcache *c;
	int rc;

	if (t->ixc) {
		t->ixc->npend = 0;
		dfs_buf_reset(&t->ixc->pbuf);
		t->ixc->mk_any = false;
	}
	if (oldcoll) {
		bson_t old;

		if ((rc = cache_load(t, oldcoll, &c, err)))
			return rc;
		if (c->n) {
			if ((rc = store_doc_get(t, id, &old, err)))
				return rc;
			for (int i = 0; i < c->n && !rc; i++) {
				rc = store__ix_keys(&c->ix[i], c->partial[i], &old, &c->keys, NULL);
				/* An old document whose keys fail (an index created over it by an
				 * older docfs) has no entries to delete. */
				if (rc) {
					rc = 0;
					continue;
				}
				for (size_t e = 0; e < c->keys.n; e++)
					pend_push(c, c->ix[i].ixid, false, id, &c->keys, e);
			}
			bson_destroy(&old);
		}
	}
	if (newcoll && newdoc) {
		if ((rc = cache_load(t, newcoll, &c, err)))
			return rc;
		memset(c->mk, 0, sizeof(c->mk));
		for (int i = 0; i < c->n; i++) {
			struct store_index *ix = &c->ix[i];

			if ((rc = store__ix_keys(ix, c->partial[i], newdoc, &c->keys, err)))
				return rc;
			if (c->keys.multikey & ~ix->multikey) {
				c->mk[i] = c->keys.multikey & ~ix->multikey;
				c->mk_any = true;
			}
			for (size_t e = 0; e < c->keys.n; e++) {
				if (ix->unique) {
					rc = unique_probe(t, ix->ixid,
							  c->keys.buf.data + c->keys.e[e].koff,
							  c->keys.e[e].klen, id, err);
					if (rc == DFS_EEXIST)
						return dup_error(t, newcoll, ix,
								 (const uint8_t *)c->keys.buf.data +
									 c->keys.e[e].voff,
								 c->keys.e[e].vlen, err);
					if (rc)
						return rc;
				}
				pend_push(c, ix->ixid, true, id, &c->keys, e);
			}
		}
	}
	return 0;
}

static int entry_write(struct store_txn *t, int64_t ixid, bool add, const void *key, size_t klen,
		       int64_t id, const void *vals, size_t vlen, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, add ? ST_IKEY_INSERT : ST_IKEY_DELETE, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, ixid);
	sqlite3_bind_blob(st, 2, key, (int)klen, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, id);
	if (add)
		sqlite3_bind_blob(st, 4, vals, (int)vlen, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, add ? "insert index entry" : "delete index entry", err);
	return 0;
}

static int set_multikey(struct store_txn *t, int64_t coll, struct store_index *ix, uint32_t bits,
			struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_IX_MULTIKEY, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_text(st, 2, ix->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, bits);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "mark index multikey", err);
	ix->multikey |= bits;
	return 0;
}

static bool pend_same(const struct store__ixcache *c, const struct pend *a, const struct pend *b)
{
	return a->ixid == b->ixid && a->id == b->id && a->klen == b->klen && a->vlen == b->vlen &&
	       memcmp(c->pbuf.data + a->koff, c->pbuf.data + b->koff, a->klen) == 0 &&
	       memcmp(c->pbuf.data + a->voff, c->pbuf.data + b->voff, a->vlen) == 0;
}

static void diff_pending(struct store__ixcache *c)
{
	for (size_t i = 0; i < c->npend; i++) {
		struct pend *a = &c->pend[i];

		if (!a->add)
			continue;
		for (size_t j = 0; j < c->npend; j++) {
			struct pend *d = &c->pend[j];

			if (!d->add && !d->skip && pend_same(c, a, d)) {
				a->skip = d->skip = true;
				break;
			}
		}
	}
}

int store__ix_apply(struct store_txn *t, struct dfs_err *err)
{
	struct store__ixcache *c = t->ixc;
	int rc;

	if (!c || (!c->npend && !c->mk_any))
		return 0;
	/* An update usually keeps most entries: leave those alone (a quadratic match, so only
	 * for the usual small documents). */
	if (c->npend <= DIFF_MAX)
		diff_pending(c);
	/* Deletions first, so that an entry deleted and added again ends up present. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < c->npend; i++) {
			struct pend *p = &c->pend[i];

			if (p->skip || p->add != (pass == 1))
				continue;
			rc = entry_write(t, p->ixid, p->add, c->pbuf.data + p->koff, p->klen, p->id,
					 c->pbuf.data + p->voff, p->vlen, err);
			if (rc)
				return rc;
		}
	}
	c->npend = 0;
	dfs_buf_reset(&c->pbuf);
	if (c->mk_any) {
		for (int i = 0; i < c->n; i++)
			if (c->mk[i] && (rc = set_multikey(t, c->coll, &c->ix[i], c->mk[i], err)))
				return rc;
		memset(c->mk, 0, sizeof(c->mk));
		c->mk_any = false;
	}
	return 0;
}

/* ---- create, drop, version, stats -------------------------------------------------- */

static int bump_version(struct store_txn *t, int64_t coll, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_IX_BUMP, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "index version", err);
	return 0;
}

int store__ix_coll_cleared(struct store_txn *t, int64_t coll, struct dfs_err *err)
{
	store__ix_invalidate(t);
	return bump_version(t, coll, err);
}

int store_index_version(struct store_txn *t, int64_t coll, int64_t *version, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_IX_VERSION, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*version = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
		return 0;
	}
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "index version", err);
	return dfs_err_set(err, DFS_ENOENT, "collection %lld not found", (long long)coll);
}

static bool same_bson(const bson_t *a, const bson_t *b)
{
	if (!a || !b)
		return a == b;
	return a->len == b->len && memcmp(bson_get_data(a), bson_get_data(b), a->len) == 0;
}

static bool same_key(const struct store_index *a, const struct store_index *b)
{
	if (a->nfields != b->nfields)
		return false;
	for (int i = 0; i < a->nfields; i++)
		if (a->field[i].dir != b->field[i].dir ||
		    strcmp(a->field[i].path, b->field[i].path))
			return false;
	return true;
}

static bool same_options(const struct store_index *a, const struct store_index *b)
{
	return a->unique == b->unique && a->sparse == b->sparse &&
	       a->expire_after == b->expire_after && same_bson(a->partial, b->partial);
}

/* The spec as stored: {"v": 2, "key", "name", then the options as given}. */
static bson_t *stored_spec(const bson_t *spec, const char *name)
{
	bson_t *out = bson_new();
	bson_iter_t it;

	bson_append_int32(out, "v", 1, 2);
	if (bson_iter_init_find(&it, spec, "key"))
		bson_append_iter(out, "key", 3, &it);
	bson_append_utf8(out, "name", 4, name, -1);
	bson_iter_init(&it, spec);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (strcmp(k, "v") && strcmp(k, "key") && strcmp(k, "name") &&
		    strcmp(k, "background"))
			bson_append_iter(out, k, -1, &it);
	}
	return out;
}

static int64_t now_ms(void)
{
	return store__now_ns() / 1000000;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An entry of a build, its key and vals in the build's arena. */
struct bent {
	uint64_t w; /* 8 key bytes from the sort's current 8-byte window, big-endian, 0-padded */
	union {
		size_t off;	    /* while collecting: key bytes, then vals bytes, in the arena */
		const uint8_t *key; /* from the sort on (the arena no longer moves) */
	};
	int64_t id;
	uint32_t klen, vlen;
	uint32_t end; /* the key bytes that order this entry (see build_sort) */
};

/* One run of a chunk: the entries one thread generated, sorted on their own. */
struct brun {
	struct dfs_buf arena;
	struct bent *e, *tmp; /* the entries; tmp: the sort's scratch, as large */
	size_t n, cap;
	bool ordered;		/* its documents came in ascending _id key order */
	struct dfs_buf lastid;	/* the _id key of its last document with entries */
	struct store__ixkeys k; /* key generation's work space */
	uint32_t mk;		/* multikey bits seen */
	int rc;			/* the first key error (DFS_*), 0 while none */
	int64_t err_id;		/* the document of that error */
	struct dfs_err err;	/* its message, prefixed by the document's _id */
};

struct build_state {
	struct store_txn *t;
	int64_t coll;
	struct store_index *ix;
	void *partial;	    /* Borrowed: the compiled partial filter, or NULL */
	struct brun run[2]; /* 0: the build thread's, 1: the key thread's */
	bool flushed;	    /* entries of an earlier chunk are in the index */
	sqlite3_stmt *ins;  /* Owned: the INSERT ... SELECT of a chunk */
};

#define SORT_SMALL 32 /* buckets below this size are insertion-sorted */

/* Loads the window of 8 key bytes at depth d. */
static void bent_window(struct bent *a, size_t n, size_t d)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t w = 0;

		for (size_t j = d; j < d + 8; j++)
			w = w << 8 | (j < a[i].end ? a[i].key[j] : 0);
		a[i].w = w;
	}
}

/* memcmp order of the first end bytes of two keys equal in their first d bytes. */
static int bent_cmp_from(const struct bent *a, const struct bent *b, size_t d)
{
	size_t n = (a->end < b->end ? a->end : b->end) - d;
	int c = n ? memcmp(a->key + d, b->key + d, n) : 0;

	if (c)
		return c;
	return a->end < b->end ? -1 : a->end > b->end;
}

/*
 * Sorts a[0..n) by the first end bytes of their keys, in memcmp order, stably: an MSD radix
 * sort, one byte per pass, the entries equal in their first d bytes, whose window w holds
 * bytes base..base+7. A key that ends at depth d sorts first (its bucket 0); a bucket of
 * keys that all ended is done. The largest bucket goes on in the loop and the others
 * recurse, so the recursion depth stays below log2(n) whatever the keys.
 */
static void build_rsort(struct bent *a, struct bent *tmp, size_t n, size_t d, size_t base)
{
	size_t cnt[257], pos[257];

	for (;;) {
		size_t big = 0, start;

		if (n < SORT_SMALL) {
			for (size_t i = 1; i < n; i++) {
				struct bent x = a[i];
				size_t j = i;

				for (; j > 0 && bent_cmp_from(&a[j - 1], &x, d) > 0; j--)
					a[j] = a[j - 1];
				a[j] = x;
			}
			return;
		}
		if (d - base == 8) {
			bent_window(a, n, d);
			base = d;
		}
		memset(cnt, 0, sizeof(cnt));
		for (size_t i = 0; i < n; i++)
			cnt[d < a[i].end ? (a[i].w >> (56 - 8 * (d - base)) & 0xff) + 1 : 0]++;
		if (cnt[0] == n)
			return; /* all ended: equal, in their original order */
		for (size_t k = 0; k < 257; k++)
			if (cnt[k] > cnt[big])
				big = k;
		if (cnt[big] == n) { /* one byte value: nothing moves */
			d++;
			continue;
		}
		start = 0;
		for (size_t k = 0; k < 257; k++) {
			pos[k] = start;
			start += cnt[k];
		}
		for (size_t i = 0; i < n; i++) {
			size_t k = d < a[i].end ? (a[i].w >> (56 - 8 * (d - base)) & 0xff) + 1 : 0;

			tmp[pos[k]++] = a[i];
		}
		memcpy(a, tmp, n * sizeof(*a));
		start = cnt[0];
		for (size_t k = 1; k < 257; k++) {
			if (k != big && cnt[k] > 1)
				build_rsort(a + start, tmp + start, cnt[k], d + 1, base);
			start += cnt[k];
		}
		if (big == 0)
			return;
		start = 0;
		for (size_t k = 0; k < big; k++)
			start += cnt[k];
		a += start;
		tmp += start;
		n = cnt[big];
		d++;
	}
}

/*
 * Sorts a run into index order: by stored key (note 1), whose bytes are distinct for
 * distinct entries. When the run's documents came in ascending _id order (the common case:
 * ids follow insertion), entries of equal index key K are already in _id order, so only K
 * needs sorting and the stable sort keeps the rest.
 */
static void run_sort(struct brun *r)
{
	for (size_t i = 0; i < r->n; i++) {
		struct bent *e = &r->e[i];

		e->key = (const uint8_t *)r->arena.data + e->off;
		e->end = r->ordered ? (uint32_t)key_part(e->key, e->klen) : e->klen;
	}
	if (r->n < 2) /* r->e is NULL when no document had a key (UBSan) */
		return;
	bent_window(r->e, r->n, 0);
	build_rsort(r->e, r->tmp, r->n, 0, 0);
}

static void run_reset(struct brun *r)
{
	r->n = 0;
	dfs_buf_reset(&r->arena);
	r->ordered = true;
	dfs_buf_reset(&r->lastid);
}

/* The two sorted runs of a chunk read as one sequence in stored key order. */
struct bmerge {
	const struct build_state *b; /* Borrowed */
	size_t i[2];		     /* the next entry of each run */
	const struct bent *cur;	     /* the entry at the merge, NULL at the end */
	int from;		     /* its run */
};

static void bmerge_pick(struct bmerge *m)
{
	const struct brun *r = m->b->run;
	const struct bent *a = m->i[0] < r[0].n ? &r[0].e[m->i[0]] : NULL;
	const struct bent *c = m->i[1] < r[1].n ? &r[1].e[m->i[1]] : NULL;
	int d;

	if (!a || !c) {
		m->cur = a ? a : c;
		m->from = a ? 0 : 1;
		return;
	}
	d = memcmp(a->key, c->key, a->klen < c->klen ? a->klen : c->klen);
	if (!d)
		d = a->klen < c->klen ? -1 : a->klen > c->klen;
	m->cur = d <= 0 ? a : c;
	m->from = d <= 0 ? 0 : 1;
}

static void bmerge_start(struct bmerge *m, const struct build_state *b)
{
	m->b = b;
	m->i[0] = m->i[1] = 0;
	bmerge_pick(m);
}

static void bmerge_next(struct bmerge *m)
{
	m->i[m->from]++;
	bmerge_pick(m);
}

/*
 * The sorted entries of a chunk reach SQLite as the rows of an eponymous virtual table,
 * docfs_ixbuild(state), read by one INSERT ... SELECT: its ikeys cursor stays open from
 * row to row, so each insert of a key above the last one finds its place on the last leaf
 * (SQLite's right-edge fast path) instead of seeking from the root (note 7). The state is
 * passed as a pointer parameter, so the module holds no state of its own.
 */
#define BUILD_PTR "docfs_ixbuild" /* the pointer type of the state parameter */

struct bsrc_vtab {
	sqlite3_vtab base;
};

struct bsrc_cur {
	sqlite3_vtab_cursor base;
	struct bmerge m; /* m.b: Borrowed, from the parameter; NULL before xFilter */
	int64_t row;	 /* rows returned */
};

static int bsrc_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
			sqlite3_vtab **out, char **errmsg)
{
	struct bsrc_vtab *v;
	int rc;

	(void)aux, (void)argc, (void)argv, (void)errmsg;
	rc = sqlite3_declare_vtab(db, "CREATE TABLE x(key BLOB, id INTEGER, vals BLOB,"
				      " state HIDDEN)");
	if (rc != SQLITE_OK)
		return rc;
	v = sqlite3_malloc(sizeof(*v));
	if (!v)
		return SQLITE_NOMEM;
	memset(v, 0, sizeof(*v));
	*out = &v->base;
	return SQLITE_OK;
}

static int bsrc_disconnect(sqlite3_vtab *v)
{
	sqlite3_free(v);
	return SQLITE_OK;
}

/* The only plan: the state parameter bound (column 3 = ?), the entries in their order. */
static int bsrc_best_index(sqlite3_vtab *v, sqlite3_index_info *info)
{
	(void)v;
	for (int i = 0; i < info->nConstraint; i++) {
		const struct sqlite3_index_constraint *c = &info->aConstraint[i];

		if (c->iColumn == 3 && c->op == SQLITE_INDEX_CONSTRAINT_EQ && c->usable) {
			info->aConstraintUsage[i].argvIndex = 1;
			info->aConstraintUsage[i].omit = 1;
			info->estimatedCost = 1;
			return SQLITE_OK;
		}
	}
	return SQLITE_CONSTRAINT; /* no plan without the state */
}

static int bsrc_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out)
{
	struct bsrc_cur *c = sqlite3_malloc(sizeof(*c));

	(void)v;
	if (!c)
		return SQLITE_NOMEM;
	memset(c, 0, sizeof(*c));
	*out = &c->base;
	return SQLITE_OK;
}

static int bsrc_close(sqlite3_vtab_cursor *c)
{
	sqlite3_free(c);
	return SQLITE_OK;
}

static int bsrc_filter(sqlite3_vtab_cursor *vc, int idxnum, const char *idxstr, int argc,
		       sqlite3_value **argv)
{
	struct bsrc_cur *c = (struct bsrc_cur *)vc;
	const struct build_state *b;

	(void)idxnum, (void)idxstr;
	b = argc == 1 ? sqlite3_value_pointer(argv[0], BUILD_PTR) : NULL;
	c->row = 0;
	if (b)
		bmerge_start(&c->m, b);
	else
		memset(&c->m, 0, sizeof(c->m));
	return SQLITE_OK;
}

static int bsrc_next(sqlite3_vtab_cursor *vc)
{
	struct bsrc_cur *c = (struct bsrc_cur *)vc;

	bmerge_next(&c->m);
	c->row++;
	return SQLITE_OK;
}

static int bsrc_eof(sqlite3_vtab_cursor *vc)
{
	const struct bsrc_cur *c = (const struct bsrc_cur *)vc;

	return !c->m.cur;
}

static int bsrc_column(sqlite3_vtab_cursor *vc, sqlite3_context *ctx, int col)
{
	const struct bsrc_cur *c = (const struct bsrc_cur *)vc;
	const struct bent *e = c->m.cur;

	/* The arena outlives the statement's step: the blobs need no copy here. */
	if (col == 0)
		sqlite3_result_blob(ctx, e->key, (int)e->klen, SQLITE_STATIC);
	else if (col == 1)
		sqlite3_result_int64(ctx, e->id);
	else if (col == 2)
		sqlite3_result_blob(ctx, e->key + e->klen, (int)e->vlen, SQLITE_STATIC);
	else
		sqlite3_result_null(ctx);
	return SQLITE_OK;
}

static int bsrc_rowid(sqlite3_vtab_cursor *vc, sqlite3_int64 *rowid)
{
	*rowid = ((const struct bsrc_cur *)vc)->row;
	return SQLITE_OK;
}

static const sqlite3_module bsrc_module = {
	.iVersion = 0,
	.xCreate = NULL, /* eponymous only: no CREATE VIRTUAL TABLE */
	.xConnect = bsrc_connect,
	.xBestIndex = bsrc_best_index,
	.xDisconnect = bsrc_disconnect,
	.xOpen = bsrc_open,
	.xClose = bsrc_close,
	.xFilter = bsrc_filter,
	.xNext = bsrc_next,
	.xEof = bsrc_eof,
	.xColumn = bsrc_column,
	.xRowid = bsrc_rowid,
};

/* Sorts the runs collected, checks uniqueness and inserts the entries in key order (note
 * 7). The key thread is idle. */
static int build_flush(struct build_state *b, struct dfs_err *err)
{
	struct bmerge m;
	const struct bent *p = NULL;
	int rc;

	if (!b->ins) {
		/* Registered again on each build: replacing a module is cheap and keeps the
		 * connection setup (db.c) free of index concerns. */
		rc = sqlite3_create_module_v2(b->t->c->h, BUILD_PTR, &bsrc_module, NULL, NULL);
		if (rc == SQLITE_OK)
			rc = sqlite3_prepare_v3(
				b->t->c->h,
				"INSERT INTO ikeys(ix, key, id, vals) SELECT ?2, key,"
				" id, vals FROM " BUILD_PTR "(?1)",
				-1, 0, &b->ins, NULL);
		if (rc != SQLITE_OK)
			return store__sqlerr(b->t, rc, "insert index entries", err);
	}
	run_sort(&b->run[0]);
	run_sort(&b->run[1]);
	for (bmerge_start(&m, b); b->ix->unique && m.cur; p = m.cur, bmerge_next(&m)) {
		const struct bent *e = m.cur;

		rc = 0;
		if (p) {
			size_t kp = key_part(p->key, p->klen), ke = key_part(e->key, e->klen);

			if (kp == ke && p->id != e->id && memcmp(p->key, e->key, ke) == 0)
				rc = DFS_EEXIST;
		}
		/* Entries of earlier chunks are in the index already: probe them. */
		if (!rc && b->flushed)
			rc = unique_probe(b->t, b->ix->ixid, e->key, e->klen, e->id, err);
		if (rc == DFS_EEXIST)
			return dup_error(b->t, b->coll, b->ix, e->key + e->klen, e->vlen, err);
		if (rc)
			return rc;
	}
	if (b->run[0].n + b->run[1].n) {
		sqlite3_bind_pointer(b->ins, 1, b, BUILD_PTR, NULL);
		sqlite3_bind_int64(b->ins, 2, b->ix->ixid);
		rc = sqlite3_step(b->ins);
		sqlite3_reset(b->ins);
		sqlite3_clear_bindings(b->ins);
		if (rc != SQLITE_DONE)
			return store__sqlerr(b->t, rc, "insert index entries", err);
	}
	run_reset(&b->run[0]);
	run_reset(&b->run[1]);
	b->flushed = true;
	return 0;
}

/* Keeps r->ordered: whether the _id keys of the run's documents with entries (k) rise. */
static void note_id(struct brun *r, const struct store__ixkeys *k)
{
	const uint8_t *key = (const uint8_t *)k->buf.data + k->e[0].koff;
	size_t kl = key_part(key, k->e[0].klen), n = k->e[0].klen - ID_SUFFIX_LEN - kl;

	if (!r->ordered)
		return;
	if (r->lastid.len) {
		size_t m = r->lastid.len < n ? r->lastid.len : n;
		int c = memcmp(r->lastid.data, key + kl, m);

		if (c > 0 || (c == 0 && r->lastid.len >= n)) {
			r->ordered = false;
			return;
		}
	}
	dfs_buf_reset(&r->lastid);
	dfs_buf_append(&r->lastid, key + kl, n);
}

/* Appends the entries k of document id to the run. */
static void run_add(struct brun *r, const struct store__ixkeys *k, int64_t id)
{
	if (k->n)
		note_id(r, k);
	for (size_t e = 0; e < k->n; e++) {
		struct bent *be;

		if (r->n == r->cap) {
			r->cap = r->cap ? r->cap * 2 : 4096;
			r->e = realloc(r->e, r->cap * sizeof(*r->e));
			r->tmp = realloc(r->tmp, r->cap * sizeof(*r->tmp));
			if (!r->e || !r->tmp)
				abort();
		}
		be = &r->e[r->n++];
		be->off = r->arena.len;
		be->klen = (uint32_t)k->e[e].klen;
		be->vlen = (uint32_t)k->e[e].vlen;
		be->id = id;
		dfs_buf_append(&r->arena, k->buf.data + k->e[e].koff, k->e[e].klen);
		dfs_buf_append(&r->arena, k->buf.data + k->e[e].voff, k->e[e].vlen);
	}
}

/* The memory of a run as BUILD_MEM counts it: the sort's scratch is left out, as qsort's
 * was before it. */
static size_t run_mem(const struct brun *r)
{
	return r->arena.len + r->n * sizeof(*r->e);
}

/* Documents copied out of the cursor, for key generation. */
struct bbatch {
	struct dfs_buf data; /* their BSON, one after the other */
	size_t off[BUILD_BATCH];
	uint32_t len[BUILD_BATCH];
	int64_t id[BUILD_BATCH];
	size_t n;
	bool busy; /* queued for or being keyed by the key thread */
};

/* Generates the entries of a batch's documents into run r; stops at the run's first error. */
static void run_keys(const struct build_state *b, struct brun *r, const struct bbatch *bt)
{
	for (size_t i = 0; i < bt->n && !r->rc; i++) {
		bson_t doc;

		if (!bson_init_static(&doc, (const uint8_t *)bt->data.data + bt->off[i],
				      bt->len[i])) {
			r->rc = dfs_err_set(&r->err, DFS_ECORRUPT,
					    "document %lld is not valid BSON",
					    (long long)bt->id[i]);
			r->err_id = bt->id[i];
			break;
		}
		if ((r->rc = store__ix_keys(b->ix, b->partial, &doc, &r->k, &r->err))) {
			bson_iter_t it;
			struct dfs_buf eb;

			dfs_buf_init(&eb);
			if (bson_iter_init_find(&it, &doc, "_id"))
				store_codec_render_value(bson_iter_value(&it), &eb, NULL);
			dfs_err_prefix(&r->err, "document _id %s: ", eb.data ? eb.data : "?");
			dfs_buf_release(&eb);
			r->err_id = bt->id[i];
			break;
		}
		r->mk |= r->k.multikey;
		run_add(r, &r->k, bt->id[i]);
	}
}

/*
 * The key thread of a build (note 7): it keys the batches the build thread queues into
 * run 1 while the build thread reads the next ones from SQLite, and keys a batch into run 0
 * itself when the queue is full, so both cores generate keys. The build thread touches run
 * 1 only while the key thread is idle (nothing queued or being keyed).
 */
struct keyer {
	struct build_state *b;		   /* Borrowed */
	struct bbatch bt[BUILD_QUEUE + 2]; /* queued, being keyed, being filled: one spare */
	pthread_mutex_t mu;		   /* guards what follows */
	pthread_cond_t cv;		   /* the queue or quit changed, or a batch ended */
	struct bbatch *q[BUILD_QUEUE];	   /* Borrowed: the queue, oldest first */
	int nq;
	bool working;  /* the key thread has a batch */
	size_t mem1;   /* run_mem of run 1 after its last batch */
	bool quit;     /* the key thread is to end */
	bool threaded; /* the key thread runs */
	pthread_t th;
};

static void *keyer_thread(void *arg)
{
	struct keyer *kr = arg;
	struct brun *r = &kr->b->run[1];

	pthread_mutex_lock(&kr->mu);
	for (;;) {
		struct bbatch *bt;

		while (!kr->nq && !kr->quit)
			pthread_cond_wait(&kr->cv, &kr->mu);
		if (!kr->nq)
			break;
		bt = kr->q[0];
		memmove(kr->q, kr->q + 1, (size_t)(--kr->nq) * sizeof(*kr->q));
		kr->working = true;
		pthread_mutex_unlock(&kr->mu);
		run_keys(kr->b, r, bt);
		pthread_mutex_lock(&kr->mu);
		kr->working = false;
		kr->mem1 = run_mem(r);
		bt->busy = false;
		pthread_cond_broadcast(&kr->cv);
	}
	pthread_mutex_unlock(&kr->mu);
	return NULL;
}

/* Waits until the key thread is idle. */
static void keyer_wait(struct keyer *kr)
{
	if (!kr->threaded)
		return;
	pthread_mutex_lock(&kr->mu);
	while (kr->nq || kr->working)
		pthread_cond_wait(&kr->cv, &kr->mu);
	pthread_mutex_unlock(&kr->mu);
}

static void keyer_stop(struct keyer *kr)
{
	if (!kr->threaded)
		return;
	pthread_mutex_lock(&kr->mu);
	kr->quit = true;
	pthread_cond_broadcast(&kr->cv);
	pthread_mutex_unlock(&kr->mu);
	pthread_join(kr->th, NULL);
	kr->threaded = false;
}

/* A batch neither queued nor being keyed, to fill. */
static struct bbatch *keyer_free_batch(struct keyer *kr)
{
	struct bbatch *bt = NULL;

	pthread_mutex_lock(&kr->mu);
	for (size_t i = 0; !bt && i < BUILD_QUEUE + 2; i++)
		if (!kr->bt[i].busy)
			bt = &kr->bt[i];
	pthread_mutex_unlock(&kr->mu);
	assert(bt); /* at most BUILD_QUEUE queued and one being keyed */
	return bt;
}

/* Queues a filled batch for the key thread, or keys it into run 0 when the queue is full
 * (or there is no key thread). */
static void keyer_give(struct keyer *kr, struct bbatch *bt)
{
	bool queued = false;

	if (kr->threaded) {
		pthread_mutex_lock(&kr->mu);
		if (kr->nq < BUILD_QUEUE) {
			bt->busy = true;
			kr->q[kr->nq++] = bt;
			queued = true;
			pthread_cond_broadcast(&kr->cv);
		}
		pthread_mutex_unlock(&kr->mu);
	}
	if (!queued)
		run_keys(kr->b, &kr->b->run[0], bt);
}

/* The memory of the chunk (run 1 as of its last batch). */
static size_t keyer_mem(struct keyer *kr)
{
	size_t m1 = 0;

	if (kr->threaded) {
		pthread_mutex_lock(&kr->mu);
		m1 = kr->mem1;
		pthread_mutex_unlock(&kr->mu);
	} else {
		m1 = run_mem(&kr->b->run[1]);
	}
	return run_mem(&kr->b->run[0]) + m1;
}

/* Copies up to BUILD_BATCH documents from the cursor into bt; DFS_ENOENT at the end. */
static int batch_fill(struct store_cursor *cur, struct bbatch *bt, struct dfs_err *err)
{
	int rc = 0;

	bt->n = 0;
	dfs_buf_reset(&bt->data);
	while (bt->n < BUILD_BATCH) {
		bson_t doc;
		int64_t id;

		if ((rc = store_cursor_next(cur, &doc, &id, err)))
			break;
		bt->off[bt->n] = bt->data.len;
		bt->len[bt->n] = doc.len;
		bt->id[bt->n] = id;
		dfs_buf_append(&bt->data, bson_get_data(&doc), doc.len);
		bt->n++;
	}
	return rc;
}

/* The first key error of the two runs (by document), with its message in err. */
static int runs_error(const struct build_state *b, struct dfs_err *err)
{
	const struct brun *r = &b->run[0], *o = &b->run[1];

	if (!r->rc || (o->rc && o->err_id < r->err_id))
		r = o;
	if (r->rc && err)
		*err = r->err;
	return r->rc;
}

/* Builds the entries of the new index ix over the documents of coll. */
static int build(struct store_txn *t, int64_t coll, struct store_index *ix,
		 void (*progress)(void *ctx, int64_t done, int64_t total), void *ctx,
		 struct dfs_err *err)
{
	struct store_cursor *cur = NULL;
	struct build_state b = {.t = t, .coll = coll, .ix = ix};
	struct keyer *kr = calloc(1, sizeof(*kr));
	void *partial = NULL;
	int64_t total = 0, done = 0;
	int rc;
	bool end = false;

	if (!kr)
		abort();
	kr->b = &b;
	pthread_mutex_init(&kr->mu, NULL);
	pthread_cond_init(&kr->cv, NULL);
	for (int i = 0; i < 2; i++) {
		dfs_buf_init(&b.run[i].arena);
		dfs_buf_init(&b.run[i].lastid);
		store__ixkeys_init(&b.run[i].k);
		b.run[i].ordered = true;
	}
	for (size_t i = 0; i < BUILD_QUEUE + 2; i++)
		dfs_buf_init(&kr->bt[i].data);
	if ((rc = compile_partial(ix, &partial, err)))
		goto out;
	b.partial = partial;
	if (progress && (rc = store_coll_count(t, coll, &total, NULL, err)))
		goto out;
	if ((rc = store_cursor_open(t, coll, &cur, err)))
		goto out;
	while (!end) {
		struct bbatch *bt = keyer_free_batch(kr);

		rc = batch_fill(cur, bt, err);
		if (rc && rc != DFS_ENOENT)
			break;
		end = rc == DFS_ENOENT;
		rc = 0;
		/* A collection of more than one batch keys on a second core too. */
		if (!end && !kr->threaded && pthread_create(&kr->th, NULL, keyer_thread, kr) == 0)
			kr->threaded = true;
		keyer_give(kr, bt);
		if (b.run[0].rc)
			break;
		done += (int64_t)bt->n;
		if (progress && done / BUILD_PROGRESS != (done - (int64_t)bt->n) / BUILD_PROGRESS)
			progress(ctx, done, total);
		if (keyer_mem(kr) >= BUILD_MEM) {
			keyer_wait(kr);
			if (runs_error(&b, NULL))
				break;
			if ((rc = build_flush(&b, err)))
				break;
		}
	}
	keyer_wait(kr);
	keyer_stop(kr);
	if (!rc)
		rc = runs_error(&b, err);
	if (rc)
		goto out;
	store_cursor_free(cur);
	cur = NULL;
	if ((rc = build_flush(&b, err)))
		goto out;
	if (progress)
		progress(ctx, done, total);
	if (b.run[0].mk | b.run[1].mk)
		rc = set_multikey(t, coll, ix, b.run[0].mk | b.run[1].mk, err);
out:
	keyer_stop(kr);
	store_cursor_free(cur);
	if (partial && hooks.free)
		hooks.free(partial);
	pthread_mutex_destroy(&kr->mu);
	pthread_cond_destroy(&kr->cv);
	for (size_t i = 0; i < BUILD_QUEUE + 2; i++)
		dfs_buf_release(&kr->bt[i].data);
	free(kr);
	for (int i = 0; i < 2; i++) {
		store__ixkeys_release(&b.run[i].k);
		dfs_buf_release(&b.run[i].arena);
		dfs_buf_release(&b.run[i].lastid);
		free(b.run[i].e);
		free(b.run[i].tmp);
	}
	sqlite3_finalize(b.ins);
	return rc;
}

static int create(struct store_txn *t, int64_t coll, const bson_t *spec, char *name_out,
		  size_t name_cap, void (*progress)(void *ctx, int64_t done, int64_t total),
		  void *ctx, struct dfs_err *err);

int store_index_create(struct store_txn *t, int64_t coll, const bson_t *spec, char *name_out,
		       size_t name_cap, void (*progress)(void *ctx, int64_t done, int64_t total),
		       void *ctx, struct dfs_err *err)
{
	bson_iter_t it;
	int rc, src;

	if ((rc = store__space_check(t, err)))
		return rc;
	if (bson_iter_init_find(&it, spec, "expireAfterSeconds")) {
		bool capped;

		if ((rc = store__capped_is(t, coll, &capped, err)))
			return rc;
		if (capped)
			return dfs_err_set(err, DFS_EINVAL,
					   "a TTL index (expireAfterSeconds) cannot be created on a "
					   "capped collection");
	}
	if (!t->write)
		return create(t, coll, spec, name_out, name_cap, progress, ctx, err);
	/* A failure leaves the caller's transaction as it was: the definition, the entries
	 * built so far and the version bump all go. */
	src = sqlite3_exec(t->c->h, "SAVEPOINT ix_create", NULL, NULL, NULL);
	if (src != SQLITE_OK)
		return store__sqlerr(t, src, "create index", err);
	rc = create(t, coll, spec, name_out, name_cap, progress, ctx, err);
	if (rc) {
		src = sqlite3_exec(t->c->h, "ROLLBACK TO ix_create", NULL, NULL, NULL);
		store__ix_invalidate(t);
		if (src != SQLITE_OK) {
			dfs_err_prefix(err, "create index: cannot roll back (%s): ",
				       sqlite3_errmsg(t->c->h));
			return rc;
		}
	}
	src = sqlite3_exec(t->c->h, "RELEASE ix_create", NULL, NULL, NULL);
	if (src != SQLITE_OK && !rc)
		return store__sqlerr(t, src, "create index", err);
	return rc;
}

static int create(struct store_txn *t, int64_t coll, const bson_t *spec, char *name_out,
		  size_t name_cap, void (*progress)(void *ctx, int64_t done, int64_t total),
		  void *ctx, struct dfs_err *err)
{
	struct store_index ix, *all = NULL;
	bson_t *stored = NULL;
	sqlite3_stmt *st;
	int n = 0, rc;
	int64_t t0 = mono_ms();

	if ((rc = ix_parse(spec, true, &ix, err)))
		return rc;
	if (!ix.name[0] && ix.nfields == 1 && ix.field[0].dir == 1 &&
	    strcmp(ix.field[0].path, "_id") == 0)
		snprintf(ix.name, sizeof(ix.name), "_id_"); /* createIndex({_id: 1}) */
	if (!ix.name[0] && (rc = default_name(&ix, ix.name, sizeof(ix.name), err)))
		goto done;
	if (name_out && name_cap)
		snprintf(name_out, name_cap, "%s", ix.name);
	if ((rc = store_index_list(t, coll, &all, &n, err)))
		goto done;
	for (int i = 0; ix.text && i < n; i++)
		if (all[i].text && strcmp(all[i].name, ix.name)) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "only one text index per collection allowed, found existing "
					 "text index \"%s\"",
					 all[i].name);
			goto done;
		}
	for (int i = 0; i < n; i++) {
		bool sk = same_key(&all[i], &ix), so = same_options(&all[i], &ix);

		if (strcmp(all[i].name, ix.name) == 0) {
			if (sk &&
			    (so || (i == 0 && !ix.sparse && !ix.partial && ix.expire_after < 0)))
				goto done; /* exists as asked: nothing to do */
			rc = dfs_err_set(err, DFS_EEXIST,
					 "an index named '%s' exists with another definition",
					 ix.name);
			goto done;
		}
		if (sk && same_bson(all[i].partial, ix.partial)) {
			rc = dfs_err_set(err, DFS_EEXIST,
					 "index '%s' already has this key pattern%s", all[i].name,
					 so ? "" : " (with other options)");
			goto done;
		}
	}
	if (n >= DFS_MAX_INDEXES) {
		rc = dfs_err_set(err, DFS_EINVAL,
				 "collection has %d indexes, the limit (_id_ included)",
				 DFS_MAX_INDEXES);
		goto done;
	}
	if (!t->write) {
		rc = dfs_err_set(err, DFS_EINVAL, "index creation in a read transaction");
		goto done;
	}
	if ((rc = store__new_id(t, &ix.ixid, err)))
		goto done;
	stored = ix.text ? store__text_stored_spec(&ix, spec, ix.name) : stored_spec(spec, ix.name);
	st = store__stmt(t, ST_IX_INSERT, err);
	if (!st) {
		rc = err ? err->code : DFS_EIO;
		goto done;
	}
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_text(st, 2, ix.name, -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 3, bson_get_data(stored), (int)stored->len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, ix.ixid);
	sqlite3_bind_int64(st, 5, now_ms());
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		rc = store__sqlerr(t, rc, "create index", err);
		goto done;
	}
	store__ix_invalidate(t);
	if ((rc = build(t, coll, &ix, progress, ctx, err)))
		goto done;
	if ((rc = bump_version(t, coll, err)))
		goto done;
	st = store__stmt(t, ST_IX_BUILT, err);
	if (!st) {
		rc = err ? err->code : DFS_EIO;
		goto done;
	}
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_text(st, 2, ix.name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, mono_ms() - t0);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	rc = rc == SQLITE_DONE ? 0 : store__sqlerr(t, rc, "create index", err);
	if (!rc)
		rc = store__ev_index(t, STORE_EV_CREATE_INDEXES, coll, stored, err);
done:
	if (stored)
		bson_destroy(stored);
	store_index_list_free(all, n);
	store_index_release(&ix);
	return rc;
}

int store_index_drop(struct store_txn *t, int64_t coll, const char *name, struct dfs_err *err)
{
	struct store_index ix;
	sqlite3_stmt *st;
	int rc;

	if (strcmp(name, "_id_") == 0)
		return dfs_err_set(err, DFS_EPERM, "cannot drop the _id_ index");
	if ((rc = store_index_get(t, coll, name, &ix, err)))
		return rc;
	st = store__stmt(t, ST_IKEY_DROP, err);
	if (!st) {
		rc = err ? err->code : DFS_EIO;
		goto done;
	}
	sqlite3_bind_int64(st, 1, ix.ixid);
	if ((rc = sqlite3_step(st)) != SQLITE_DONE) {
		rc = store__sqlerr(t, rc, "drop index", err);
		goto done;
	}
	st = store__stmt(t, ST_IX_DELETE, err);
	if (!st) {
		rc = err ? err->code : DFS_EIO;
		goto done;
	}
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	if ((rc = sqlite3_step(st)) != SQLITE_DONE) {
		rc = store__sqlerr(t, rc, "drop index", err);
		goto done;
	}
	sqlite3_reset(st);
	store__ix_invalidate(t);
	rc = bump_version(t, coll, err);
	if (!rc && ix.spec)
		rc = store__ev_index(t, STORE_EV_DROP_INDEXES, coll, ix.spec, err);
done:
	store_index_release(&ix);
	return rc;
}

static int one_row(struct store_txn *t, const char *sql, int64_t a, int64_t *x, int64_t *y,
		   struct dfs_err *err)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(t->c->h, sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
		return store__sqlerr(t, rc, "index stats", err);
	sqlite3_bind_int64(st, 1, a);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*x = sqlite3_column_int64(st, 0);
		*y = sqlite3_column_int64(st, 1);
		rc = 0;
	} else {
		rc = store__sqlerr(t, rc, "index stats", err);
	}
	sqlite3_finalize(st);
	return rc;
}

/* The entries and bytes of index ixid of coll (ixid 0: _id_, the documents), counted, or
 * taken from the counts of an earlier read transaction that saw the same last change: every
 * write of documents or index entries appends to the change feed, and an index built again
 * gets a new ixid (note 1). Counting reads the whole index, a second for a million entries,
 * and `grep -r` reads every index file. A write transaction counts (its seq may be rolled
 * back and used again). */
static int ix_counts(struct store_txn *t, int64_t coll, int64_t ixid, int64_t *entries,
		     int64_t *bytes, struct dfs_err *err)
{
	struct store_db *db = t->db;
	const size_t nslots = sizeof(db->ixstats) / sizeof(db->ixstats[0]);
	int64_t seq = 0;
	int rc;

	if (!t->write) {
		if ((rc = store__change_last(t, &seq, err)))
			return rc;
		pthread_mutex_lock(&db->ixstats_lock);
		for (size_t i = 0; seq > 0 && i < nslots; i++) {
			struct store__ixstats *c = &db->ixstats[i];

			if (c->seq == seq && c->coll == coll && c->ixid == ixid) {
				*entries = c->entries;
				*bytes = c->bytes;
				pthread_mutex_unlock(&db->ixstats_lock);
				return 0;
			}
		}
		pthread_mutex_unlock(&db->ixstats_lock);
	}
	if (ixid == 0)
		rc = one_row(t,
			     "SELECT count(*), coalesce(sum(length(key)), 0) FROM docs"
			     " WHERE coll = ?1",
			     coll, entries, bytes, err);
	else
		rc = one_row(t,
			     "SELECT count(*), coalesce(sum(length(key) + length(vals)), 0)"
			     " FROM ikeys WHERE ix = ?1",
			     ixid, entries, bytes, err);
	if (!rc && seq > 0) {
		struct store__ixstats *c;

		pthread_mutex_lock(&db->ixstats_lock);
		c = &db->ixstats[db->ixstats_next++ % nslots];
		c->coll = coll;
		c->ixid = ixid;
		c->seq = seq;
		c->entries = *entries;
		c->bytes = *bytes;
		pthread_mutex_unlock(&db->ixstats_lock);
	}
	return rc;
}

int store_index_stats(struct store_txn *t, int64_t coll, const char *name,
		      struct store_index_stats *out, struct dfs_err *err)
{
	struct store_index ix;
	int64_t a = 0, b = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = store_index_get(t, coll, name, &ix, err)))
		return rc;
	rc = ix_counts(t, coll, ix.ixid, &out->entries, &out->bytes, err);
	if (rc)
		goto done;
	if (ix.ixid == 0) {
		rc = one_row(t, "SELECT min(ctime) / 1000000, 0 FROM colls WHERE id = ?1", coll,
			     &out->created, &b, err);
		goto done;
	}
	{
		sqlite3_stmt *st;

		rc = sqlite3_prepare_v2(t->c->h,
					"SELECT created, build_ms FROM indexes WHERE coll = ?1"
					" AND name = ?2",
					-1, &st, NULL);
		if (rc != SQLITE_OK) {
			rc = store__sqlerr(t, rc, "index stats", err);
			goto done;
		}
		sqlite3_bind_int64(st, 1, coll);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW) {
			a = sqlite3_column_int64(st, 0);
			b = sqlite3_column_int64(st, 1);
		}
		sqlite3_finalize(st);
		out->created = a;
		out->build_ms = b;
		rc = 0;
	}
	out->multikey = ix.multikey != 0;
done:
	store_index_release(&ix);
	return rc;
}

/* ---- scans and FETCH --------------------------------------------------------------- */

struct tie {
	size_t koff, klen, voff, vlen; /* in tbuf */
	int64_t id;
};

struct store_ixscan {
	struct store_txn *t; /* Borrowed */
	int64_t coll, ixid;
	bool reverse;
	sqlite3_stmt *st[2]; /* Owned: [0] bounded above, [1] not */
	sqlite3_stmt *cur;   /* Borrowed: one of st */
	bool done;	     /* cur returned SQLITE_DONE (stepping again would restart it) */
	/* A reverse scan of a secondary index (note 6): */
	bool ties;	   /* reorder equal keys into _id order */
	struct dfs_buf lo; /* the range's lower bound (has_lo) */
	bool has_lo;
	struct dfs_buf tbuf; /* the rows of tie[], then the row read ahead */
	struct tie tie[TIE_BUF], ahead;
	int ntie;	   /* rows of the current group still to return: tie[ntie - 1] next */
	bool has_ahead;	   /* ahead holds the first row of the next group */
	sqlite3_stmt *grp; /* Owned: forward scan of one long group [K, K+0xFF) */
	bool in_grp;	   /* rows come from grp */
	struct dfs_buf gk; /* K of that group */
};

static const char *scan_sql(bool id, bool hi, bool reverse)
{
	static const char *const sql[2][2][2] = {
		{{"SELECT key, id, vals FROM ikeys WHERE ix = ?1 AND key >= ?2"
		  " ORDER BY key, id",
		  "SELECT key, id, vals FROM ikeys WHERE ix = ?1 AND key >= ?2"
		  " ORDER BY key DESC, id DESC"},
		 {"SELECT key, id, vals FROM ikeys WHERE ix = ?1 AND key >= ?2 AND key < ?3"
		  " ORDER BY key, id",
		  "SELECT key, id, vals FROM ikeys WHERE ix = ?1 AND key >= ?2 AND key < ?3"
		  " ORDER BY key DESC, id DESC"}},
		{{"SELECT key, id FROM docs WHERE coll = ?1 AND key >= ?2 ORDER BY key",
		  "SELECT key, id FROM docs WHERE coll = ?1 AND key >= ?2 ORDER BY key DESC"},
		 {"SELECT key, id FROM docs WHERE coll = ?1 AND key >= ?2 AND key < ?3"
		  " ORDER BY key",
		  "SELECT key, id FROM docs WHERE coll = ?1 AND key >= ?2 AND key < ?3"
		  " ORDER BY key DESC"}},
	};
	return sql[id][hi][reverse];
}

int store_ixscan_open(struct store_txn *t, int64_t coll, const struct store_index *ix, bool reverse,
		      struct store_ixscan **out, struct dfs_err *err)
{
	struct store_ixscan *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	s->t = t;
	s->coll = coll;
	s->ixid = ix->ixid;
	s->reverse = reverse;
	s->ties = reverse && ix->ixid != 0;
	dfs_buf_init(&s->lo);
	dfs_buf_init(&s->tbuf);
	dfs_buf_init(&s->gk);
	if ((rc = store_ixscan_range(s, NULL, 0, NULL, 0, err))) {
		store_ixscan_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

/* Points cur at [lo, hi) in the scan's direction (hi NULL: unbounded). */
static int bind_range(struct store_ixscan *s, const uint8_t *lo, size_t lolen, const uint8_t *hi,
		      size_t hilen, struct dfs_err *err)
{
	int w = hi ? 0 : 1;
	int rc;

	if (!s->st[w]) {
		rc = sqlite3_prepare_v3(s->t->c->h, scan_sql(s->ixid == 0, hi != NULL, s->reverse),
					-1, 0, &s->st[w], NULL);
		if (rc != SQLITE_OK)
			return store__sqlerr(s->t, rc, "index scan", err);
	}
	s->cur = s->st[w];
	s->done = false;
	sqlite3_reset(s->cur);
	sqlite3_clear_bindings(s->cur);
	sqlite3_bind_int64(s->cur, 1, s->ixid ? s->ixid : s->coll);
	if (lo)
		sqlite3_bind_blob(s->cur, 2, lo, (int)lolen, SQLITE_TRANSIENT);
	else
		sqlite3_bind_zeroblob(s->cur, 2, 0);
	if (hi)
		sqlite3_bind_blob(s->cur, 3, hi, (int)hilen, SQLITE_TRANSIENT);
	return 0;
}

int store_ixscan_range(struct store_ixscan *s, const uint8_t *lo, size_t lolen, const uint8_t *hi,
		       size_t hilen, struct dfs_err *err)
{
	s->ntie = 0;
	s->has_ahead = false;
	s->in_grp = false;
	if (s->grp)
		sqlite3_reset(s->grp);
	if (s->ties) {
		dfs_buf_reset(&s->lo);
		s->has_lo = lo != NULL;
		if (lo)
			dfs_buf_append(&s->lo, lo, lolen);
	}
	return bind_range(s, lo, lolen, hi, hilen, err);
}

/* Fills out from the current row of st (keys of secondary indexes without their suffix). */
static int row_out(struct store_ixscan *s, sqlite3_stmt *st, struct store_ixkey *out,
		   struct dfs_err *err)
{
	out->key = sqlite3_column_blob(st, 0);
	out->keylen = (size_t)sqlite3_column_bytes(st, 0);
	out->id = sqlite3_column_int64(st, 1);
	if (s->ixid == 0) {
		bson_init(&out->vals);
	} else {
		const uint8_t *v = sqlite3_column_blob(st, 2);
		int n = sqlite3_column_bytes(st, 2);

		out->keylen = key_part(out->key, out->keylen);
		if (n < 5 || !bson_init_static(&out->vals, v, (size_t)n))
			return dfs_err_set(err, DFS_ECORRUPT,
					   "index entry of document %lld has bad values",
					   (long long)out->id);
	}
	return 0;
}

/* Steps cur once: SQLITE_ROW, SQLITE_DONE (also on every later call), or an error code. */
static int step_cur(struct store_ixscan *s)
{
	int rc;

	if (s->done)
		return SQLITE_DONE;
	rc = sqlite3_step(s->cur);
	if (rc == SQLITE_DONE)
		s->done = true;
	return rc;
}

/* Copies the current row of cur (its whole key) into tbuf as *e. */
static void tie_copy(struct store_ixscan *s, struct tie *e)
{
	const void *k = sqlite3_column_blob(s->cur, 0), *v = sqlite3_column_blob(s->cur, 2);

	e->klen = (size_t)sqlite3_column_bytes(s->cur, 0);
	e->vlen = (size_t)sqlite3_column_bytes(s->cur, 2);
	e->id = sqlite3_column_int64(s->cur, 1);
	e->koff = s->tbuf.len;
	dfs_buf_append(&s->tbuf, k, e->klen);
	e->voff = s->tbuf.len;
	dfs_buf_append(&s->tbuf, v, e->vlen);
}

static bool same_k(const struct store_ixscan *s, const struct tie *a, const struct tie *b)
{
	const uint8_t *ka = (const uint8_t *)s->tbuf.data + a->koff;
	const uint8_t *kb = (const uint8_t *)s->tbuf.data + b->koff;
	size_t la = key_part(ka, a->klen), lb = key_part(kb, b->klen);

	return la == lb && memcmp(ka, kb, la) == 0;
}

/* The next row of a reverse scan with ties in _id order (note 6). */
static int next_ties(struct store_ixscan *s, struct store_ixkey *out, struct dfs_err *err)
{
	int rc;

	for (;;) {
		if (s->in_grp) {
			rc = sqlite3_step(s->grp);
			if (rc == SQLITE_ROW)
				return row_out(s, s->grp, out, err);
			if (rc != SQLITE_DONE)
				return store__sqlerr(s->t, rc, "index scan", err);
			/* The group is done: go on below its key. */
			s->in_grp = false;
			if ((rc = bind_range(s, s->has_lo ? (const uint8_t *)s->lo.data : NULL,
					     s->lo.len, (const uint8_t *)s->gk.data, s->gk.len,
					     err)))
				return rc;
		}
		if (s->ntie > 0) {
			const struct tie *e = &s->tie[--s->ntie];
			const uint8_t *v = (const uint8_t *)s->tbuf.data + e->voff;

			out->key = (const uint8_t *)s->tbuf.data + e->koff;
			out->keylen = key_part(out->key, e->klen);
			out->id = e->id;
			if (e->vlen < 5 || !bson_init_static(&out->vals, v, e->vlen))
				return dfs_err_set(err, DFS_ECORRUPT,
						   "index entry of document %lld has bad values",
						   (long long)e->id);
			return 0;
		}
		/* Read the next group: rows of one key K arrive in descending _id order. */
		{
			struct tie first;

			if (s->has_ahead) {
				/* ahead sits at the end of tbuf: move it to the front */
				size_t k = s->ahead.koff;

				memmove(s->tbuf.data, s->tbuf.data + k, s->tbuf.len - k);
				s->tbuf.len -= k;
				s->ahead.koff -= k;
				s->ahead.voff -= k;
				first = s->ahead;
				s->has_ahead = false;
			} else {
				rc = step_cur(s);
				if (rc == SQLITE_DONE)
					return DFS_ENOENT;
				if (rc != SQLITE_ROW)
					return store__sqlerr(s->t, rc, "index scan", err);
				dfs_buf_reset(&s->tbuf);
				tie_copy(s, &first);
			}
			s->tie[0] = first;
			s->ntie = 1;
			while ((rc = step_cur(s)) == SQLITE_ROW) {
				struct tie e;

				tie_copy(s, &e);
				if (!same_k(s, &e, &s->tie[0])) {
					s->ahead = e;
					s->has_ahead = true;
					break;
				}
				if (s->ntie == TIE_BUF) {
					/* A long group: scan it forward on its own. */
					const uint8_t *k =
						(const uint8_t *)s->tbuf.data + s->tie[0].koff;
					size_t kl = key_part(k, s->tie[0].klen);

					dfs_buf_reset(&s->gk);
					dfs_buf_append(&s->gk, k, kl);
					dfs_buf_putc(&s->gk, (char)0xff);
					if (!s->grp) {
						int prc = sqlite3_prepare_v3(
							s->t->c->h, scan_sql(false, true, false),
							-1, 0, &s->grp, NULL);

						if (prc != SQLITE_OK)
							return store__sqlerr(s->t, prc,
									     "index scan", err);
					}
					sqlite3_reset(s->grp);
					sqlite3_bind_int64(s->grp, 1, s->ixid);
					sqlite3_bind_blob(s->grp, 2, s->gk.data, (int)kl,
							  SQLITE_TRANSIENT);
					sqlite3_bind_blob(s->grp, 3, s->gk.data, (int)kl + 1,
							  SQLITE_TRANSIENT);
					s->gk.len = kl; /* resume below K */
					s->ntie = 0;
					s->in_grp = true;
					break;
				}
				s->tie[s->ntie++] = e;
			}
			if (rc != SQLITE_ROW && rc != SQLITE_DONE)
				return store__sqlerr(s->t, rc, "index scan", err);
		}
	}
}

int store_ixscan_next(struct store_ixscan *s, struct store_ixkey *out, struct dfs_err *err)
{
	int rc;

	if (s->ties)
		return next_ties(s, out, err);
	rc = step_cur(s);
	if (rc == SQLITE_DONE)
		return DFS_ENOENT;
	if (rc != SQLITE_ROW)
		return store__sqlerr(s->t, rc, "index scan", err);
	return row_out(s, s->cur, out, err);
}

void store_ixscan_free(struct store_ixscan *s)
{
	if (!s)
		return;
	sqlite3_finalize(s->st[0]);
	sqlite3_finalize(s->st[1]);
	sqlite3_finalize(s->grp);
	dfs_buf_release(&s->lo);
	dfs_buf_release(&s->tbuf);
	dfs_buf_release(&s->gk);
	free(s);
}

/* Reads docs.bson of row id through an incremental-blob handle kept for the transaction:
 * moving the handle to another row is a seek, where a statement would be reset, rebound
 * and would reopen its cursor for every document. A handle is aborted by an error and
 * expires when its row is written; then a fresh one is opened. With cache, the document
 * cache answers first and keeps what was read (dcache.c). */
int store_doc_fetch(struct store_txn *t, int64_t id, bool cache, bson_t *view, struct dfs_err *err)
{
	int rc = SQLITE_ERROR, n;

	t->fetched_id = 0;
	dfs_buf_reset(&t->fetched_text);
	if (cache && store__dcache_get(t, id, &t->fetched, &t->fetched_text)) {
		n = (int)t->fetched.len;
		t->fetched_id = id;
		goto view;
	}
	if (t->fetch)
		rc = sqlite3_blob_reopen(t->fetch, id);
	if (rc != SQLITE_OK) {
		if (t->fetch)
			sqlite3_blob_close(t->fetch);
		t->fetch = NULL;
		rc = sqlite3_blob_open(t->c->h, "main", "docs", "bson", id, 0, &t->fetch);
		if (rc != SQLITE_OK) {
			if (t->fetch)
				sqlite3_blob_close(t->fetch);
			t->fetch = NULL;
			if (rc == SQLITE_ERROR)
				return dfs_err_set(err, DFS_ENOENT, "document %lld not found",
						   (long long)id);
			return store__sqlerr(t, rc, "fetch document", err);
		}
	}
	n = sqlite3_blob_bytes(t->fetch);
	dfs_buf_reset(&t->fetched);
	dfs_buf_reserve(&t->fetched, (size_t)n);
	if (n > 0 && (rc = sqlite3_blob_read(t->fetch, t->fetched.data, n, 0)) != SQLITE_OK) {
		sqlite3_blob_close(t->fetch);
		t->fetch = NULL;
		return store__sqlerr(t, rc, "fetch document", err);
	}
	t->fetched.len = (size_t)n;
	if (cache && n >= 5 && store__dcache_put(t, id, t->fetched.data, (size_t)n))
		t->fetched_id = id;
view:
	if (n < 5 || !bson_init_static(view, (const uint8_t *)t->fetched.data, (size_t)n))
		return dfs_err_set(err, DFS_ECORRUPT, "document %lld is not valid BSON",
				   (long long)id);
	return 0;
}

int64_t store_doc_text(struct store_txn *t, const bson_t *doc, const char **text, size_t *len)
{
	if (!t->fetched_id || bson_get_data(doc) != (const uint8_t *)t->fetched.data ||
	    doc->len != t->fetched.len)
		return 0;
	*len = t->fetched_text.len;
	*text = *len ? t->fetched_text.data : NULL;
	return t->fetched_id;
}

void store_doc_keep_text(struct store_txn *t, int64_t id, const char *text, size_t len)
{
	store__dcache_put_text(t, id, text, len);
}

/* ---- TTL --------------------------------------------------------------------------- */

struct ttl_target {
	int64_t coll;
	struct store_index ix;
};

static int ttl_targets(struct store_db *db, struct ttl_target **out, int *n, struct dfs_err *err)
{
	struct store_txn *t;
	sqlite3_stmt *st = NULL;
	struct ttl_target *v = NULL;
	int cnt = 0, cap = 0, rc;

	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	rc = sqlite3_prepare_v2(t->c->h,
				"SELECT name, spec, ixid, multikey, created, build_ms, coll"
				" FROM indexes ORDER BY coll, ixid",
				-1, &st, NULL);
	if (rc != SQLITE_OK) {
		rc = store__sqlerr(t, rc, "ttl sweep", err);
		goto done;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_index ix;

		if (ix_from_row(st, &ix, NULL) != 0)
			continue;
		if (ix.expire_after < 0) {
			store_index_release(&ix);
			continue;
		}
		if (cnt == cap) {
			cap = cap ? cap * 2 : 4;
			v = realloc(v, (size_t)cap * sizeof(*v));
			if (!v)
				abort();
		}
		v[cnt].coll = sqlite3_column_int64(st, 6);
		v[cnt].ix = ix;
		cnt++;
	}
	rc = rc == SQLITE_DONE ? 0 : store__sqlerr(t, rc, "ttl sweep", err);
done:
	sqlite3_finalize(st);
	store_txn_abort(t);
	if (rc) {
		for (int i = 0; i < cnt; i++)
			store_index_release(&v[i].ix);
		free(v);
		return rc;
	}
	*out = v;
	*n = cnt;
	return 0;
}

/* One batch: deletes up to TTL_BATCH expired documents of one TTL index; *found gets how
 * many expired entries the scan saw. */
static int ttl_batch(struct store_db *db, const struct ttl_target *tg, int64_t cutoff,
		     int64_t *deleted, int64_t *found, struct dfs_err *err)
{
	struct store_txn *t;
	struct store_ixscan *s = NULL;
	struct store_ixkey k;
	struct dfs_buf lo, hi;
	bson_value_t d = {.value_type = BSON_TYPE_DATE_TIME};
	int64_t *ids = NULL;
	size_t nids = 0;
	bool desc = tg->ix.field[0].dir < 0;
	int rc;

	*found = 0;
	dfs_buf_init(&lo);
	dfs_buf_init(&hi);
	/* Every date key shares its first (bracket) byte; a descending key inverts it. */
	d.value.v_datetime = INT64_MIN;
	store_key_append(&lo, &d, desc, NULL);
	lo.len = 1;
	dfs_buf_append(&hi, lo.data, 1);
	hi.data[0] = (char)(hi.data[0] + 1);
	if ((rc = store_txn_begin(db, true, &t, err)))
		goto out;
	ids = calloc(TTL_BATCH, sizeof(*ids));
	if (!ids)
		abort();
	{
		struct store_coll c;

		if (store_coll_by_id(t, tg->coll, &c, NULL) != 0)
			goto commit; /* dropped meanwhile */
	}
	if ((rc = store_ixscan_open(t, tg->coll, &tg->ix, desc, &s, err)) ||
	    (rc = store_ixscan_range(s, (const uint8_t *)lo.data, lo.len, (const uint8_t *)hi.data,
				     hi.len, err)))
		goto fail;
	while (nids < TTL_BATCH && (rc = store_ixscan_next(s, &k, err)) == 0) {
		bson_iter_t it;

		if (!bson_iter_init_find(&it, &k.vals, "0") || !BSON_ITER_HOLDS_DATE_TIME(&it))
			continue;
		if (bson_iter_date_time(&it) >= cutoff)
			break; /* keys run in date order from the oldest */
		if (nids && ids[nids - 1] == k.id)
			continue;
		ids[nids++] = k.id;
	}
	if (rc && rc != DFS_ENOENT)
		goto fail;
	store_ixscan_free(s);
	s = NULL;
	*found = (int64_t)nids;
	for (size_t i = 0; i < nids; i++) {
		rc = store_entry_delete(t, ids[i], NULL);
		if (rc == DFS_ENOENT)
			continue; /* an array of dates: deleted already */
		if (rc)
			rc = store_entry_delete(t, ids[i], err);
		if (rc)
			goto fail;
		(*deleted)++;
	}
commit:
	rc = store_txn_commit(t, err);
	goto out;
fail:
	store_ixscan_free(s);
	store_txn_abort(t);
out:
	free(ids);
	dfs_buf_release(&lo);
	dfs_buf_release(&hi);
	return rc;
}

int store_ttl_sweep(struct store_db *db, int64_t now_ms_, int64_t *deleted, struct dfs_err *err)
{
	struct ttl_target *tg = NULL;
	int n = 0, rc;

	*deleted = 0;
	if ((rc = ttl_targets(db, &tg, &n, err)))
		return rc;
	for (int i = 0; i < n && !rc; i++) {
		int64_t cutoff = now_ms_ - tg[i].ix.expire_after * 1000, found;

		do {
			int64_t before = *deleted;

			rc = ttl_batch(db, &tg[i], cutoff, deleted, &found, err);
			if (!rc && found == TTL_BATCH && *deleted == before)
				break; /* nothing could be deleted: do not spin */
		} while (!rc && found == TTL_BATCH);
	}
	for (int i = 0; i < n; i++)
		store_index_release(&tg[i].ix);
	free(tg);
	return rc;
}

/* ---- schema migration and verification --------------------------------------------- */

/* A transaction over a bare connection (inside the caller's BEGIN), for the code paths
 * that run before a struct store_db exists or without one. */
struct bare_txn {
	struct store_db db;
	struct store_txn t;
};

static void bare_begin(struct bare_txn *b, struct store__conn *c, const char *dbname)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->db.name, sizeof(b->db.name), "%s", dbname);
	b->t.db = &b->db;
	b->t.c = c;
	b->t.write = true;
}

static int bare_end(struct bare_txn *b, struct dfs_err *err)
{
	int rc = 0;

	if (b->t.next_id && b->t.next_id != b->t.first_id) {
		sqlite3_stmt *st = store__stmt(&b->t, ST_META_SET, err);

		if (!st) {
			rc = err ? err->code : DFS_EIO;
		} else {
			sqlite3_bind_text(st, 1, "next_id", -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 2, b->t.next_id);
			rc = sqlite3_step(st) == SQLITE_DONE
				     ? 0
				     : store__sqlerr(&b->t, sqlite3_errcode(b->t.c->h),
						     "store next id", err);
		}
	}
	store__ix_txn_free(&b->t);
	store__txn_close_fetch(&b->t);
	dfs_buf_release(&b->t.scratch);
	dfs_buf_release(&b->t.key);
	for (sqlite3_stmt *st = NULL; (st = sqlite3_next_stmt(b->t.c->h, st));)
		sqlite3_reset(st);
	return rc;
}

int store__ix_migrate(struct store__conn *c, const char *dbname, struct dfs_err *err)
{
	struct bare_txn b;
	sqlite3_stmt *st;
	struct {
		int64_t coll;
		bson_t *spec;
	} *defs = NULL;
	size_t n = 0, cap = 0;
	int rc;

	rc = sqlite3_prepare_v2(c->h, "SELECT coll, spec FROM indexes ORDER BY coll, name", -1, &st,
				NULL);
	if (rc != SQLITE_OK)
		return dfs_err_set(err, DFS_EIO, "migrate indexes: %s", sqlite3_errmsg(c->h));
	while (sqlite3_step(st) == SQLITE_ROW) {
		const uint8_t *data = sqlite3_column_blob(st, 1);
		int len = sqlite3_column_bytes(st, 1);

		if (len < 5)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 4;
			defs = realloc(defs, cap * sizeof(*defs));
			if (!defs)
				abort();
		}
		defs[n].coll = sqlite3_column_int64(st, 0);
		defs[n].spec = bson_new_from_data(data, (size_t)len);
		if (defs[n].spec)
			n++;
	}
	sqlite3_finalize(st);
	rc = sqlite3_exec(c->h, "DELETE FROM indexes", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		rc = dfs_err_set(err, DFS_EIO, "migrate indexes: %s", sqlite3_errmsg(c->h));
		goto done;
	}
	/* Version 1 kept definitions (restored from snapshots) without entries: build them. */
	bare_begin(&b, c, dbname);
	for (size_t i = 0; i < n && !rc; i++) {
		bson_iter_t it;

		if (bson_iter_init_find(&it, defs[i].spec, "name") && BSON_ITER_HOLDS_UTF8(&it) &&
		    strcmp(bson_iter_utf8(&it, NULL), "_id_") == 0)
			continue;
		rc = store_index_create(&b.t, defs[i].coll, defs[i].spec, NULL, 0, NULL, NULL, err);
		if (rc)
			dfs_err_prefix(
				err, "migrate index of collection %lld: ", (long long)defs[i].coll);
	}
	if (bare_end(&b, rc ? NULL : err) && !rc)
		rc = err ? err->code : DFS_EIO;
done:
	for (size_t i = 0; i < n; i++)
		bson_destroy(defs[i].spec);
	free(defs);
	return rc;
}

struct check_ix {
	void (*report)(void *ctx, const char *msg);
	void *ctx;
	const char *db;
	int shown; /* problems reported for the current index */
};

static void ck(struct check_ix *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void ck(struct check_ix *cx, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (cx->shown++ >= 20)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cx->report(cx->ctx, msg);
}

static int64_t int_query(sqlite3 *h, const char *sql, int64_t a)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(st, 1, a);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Do two entries of index ixid share their key K (without the _id suffix, note 1)? */
static bool unique_dups(sqlite3 *h, int64_t ixid)
{
	sqlite3_stmt *st;
	struct dfs_buf prev;
	bool dup = false, first = true;

	if (sqlite3_prepare_v2(h, "SELECT key FROM ikeys WHERE ix = ?1 ORDER BY key", -1, &st,
			       NULL) != SQLITE_OK)
		return false;
	dfs_buf_init(&prev);
	sqlite3_bind_int64(st, 1, ixid);
	while (!dup && sqlite3_step(st) == SQLITE_ROW) {
		const uint8_t *k = sqlite3_column_blob(st, 0);
		size_t n = key_part(k, (size_t)sqlite3_column_bytes(st, 0));

		dup = !first && n == prev.len && memcmp(k, prev.data, n) == 0;
		first = false;
		dfs_buf_reset(&prev);
		dfs_buf_append(&prev, k, n);
	}
	sqlite3_finalize(st);
	dfs_buf_release(&prev);
	return dup;
}

/* Checks one index: each document's entries present with their values, nothing else. */
static void check_one(struct check_ix *cx, sqlite3 *h, int64_t coll, struct store_index *ix)
{
	sqlite3_stmt *docs = NULL, *probe = NULL;
	struct store__ixkeys k;
	struct dfs_err e = {0};
	void *partial = NULL;
	int64_t expected = 0, have;
	uint32_t mk = 0;

	cx->shown = 0;
	store__ixkeys_init(&k);
	if (ix->partial && compile_partial(ix, &partial, &e)) {
		ck(cx, "%s: index '%s': cannot verify: %s", cx->db, ix->name, e.msg);
		goto done;
	}
	if (sqlite3_prepare_v2(h, "SELECT id, bson FROM docs WHERE coll = ?1", -1, &docs, NULL) ||
	    sqlite3_prepare_v2(h, "SELECT vals FROM ikeys WHERE ix = ?1 AND key = ?2 AND id = ?3",
			       -1, &probe, NULL)) {
		ck(cx, "%s: index '%s': %s", cx->db, ix->name, sqlite3_errmsg(h));
		goto done;
	}
	sqlite3_bind_int64(docs, 1, coll);
	while (sqlite3_step(docs) == SQLITE_ROW) {
		long long id = sqlite3_column_int64(docs, 0);
		const void *blob = sqlite3_column_blob(docs, 1);
		int n = sqlite3_column_bytes(docs, 1);
		bson_t doc;

		if (n < 5 || !bson_init_static(&doc, blob, (size_t)n))
			continue; /* reported by the document checks */
		dfs_err_clear(&e);
		if (store__ix_keys(ix, partial, &doc, &k, &e)) {
			ck(cx, "%s: index '%s': document %lld: %s", cx->db, ix->name, id, e.msg);
			continue;
		}
		mk |= k.multikey;
		expected += (int64_t)k.n;
		for (size_t i = 0; i < k.n; i++) {
			sqlite3_reset(probe);
			sqlite3_bind_int64(probe, 1, ix->ixid);
			sqlite3_bind_blob(probe, 2, k.buf.data + k.e[i].koff, (int)k.e[i].klen,
					  SQLITE_STATIC);
			sqlite3_bind_int64(probe, 3, id);
			if (sqlite3_step(probe) != SQLITE_ROW) {
				ck(cx, "%s: index '%s': document %lld misses an entry", cx->db,
				   ix->name, id);
				continue;
			}
			if ((size_t)sqlite3_column_bytes(probe, 0) != k.e[i].vlen ||
			    memcmp(sqlite3_column_blob(probe, 0), k.buf.data + k.e[i].voff,
				   k.e[i].vlen) != 0)
				ck(cx, "%s: index '%s': document %lld: an entry has wrong values",
				   cx->db, ix->name, id);
		}
	}
	have = int_query(h, "SELECT count(*) FROM ikeys WHERE ix = ?1", ix->ixid);
	if (have != expected)
		ck(cx, "%s: index '%s' has %lld entries, its documents imply %lld", cx->db,
		   ix->name, (long long)have, (long long)expected);
	if (mk & ~ix->multikey)
		ck(cx, "%s: index '%s' is not marked multikey but indexes arrays", cx->db,
		   ix->name);
	if (ix->unique && unique_dups(h, ix->ixid))
		ck(cx, "%s: unique index '%s' holds duplicate keys", cx->db, ix->name);
done:
	sqlite3_finalize(docs);
	sqlite3_finalize(probe);
	if (partial && hooks.free)
		hooks.free(partial);
	store__ixkeys_release(&k);
}

void store__ix_check(struct store__conn *c, const char *db,
		     void (*report)(void *ctx, const char *msg), void *ctx)
{
	struct check_ix cx = {report, ctx, db, 0};
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(c->h,
			       "SELECT name, spec, ixid, multikey, created, build_ms, coll"
			       " FROM indexes ORDER BY coll, ixid",
			       -1, &st, NULL) != SQLITE_OK) {
		ck(&cx, "%s: cannot read index definitions: %s", db, sqlite3_errmsg(c->h));
		return;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		struct store_index ix;
		struct dfs_err e = {0};

		cx.shown = 0;
		if (ix_from_row(st, &ix, &e)) {
			ck(&cx, "%s: %s", db, e.msg);
			continue;
		}
		check_one(&cx, c->h, sqlite3_column_int64(st, 6), &ix);
		store_index_release(&ix);
	}
	sqlite3_finalize(st);
	cx.shown = 0;
	if (int_query(c->h,
		      "SELECT count(*) FROM ikeys WHERE ix NOT IN (SELECT ixid FROM indexes"
		      " WHERE ixid IS NOT NULL) AND ?1 = ?1",
		      0) > 0)
		ck(&cx, "%s: index entries of an index that does not exist", db);
	if (int_query(c->h,
		      "SELECT count(*) FROM indexes WHERE coll NOT IN (SELECT id FROM colls)"
		      " AND ?1 = ?1",
		      0) > 0)
		ck(&cx, "%s: index definitions of a collection that does not exist", db);
}
