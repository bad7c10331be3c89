/*
 * stats.c - the .stats files: `<db>/<coll>/.stats` in the shape of MongoDB's collStats and
 * `<db>/.stats` in that of dbStats, with `?scale=N` as their scale option. Figures are read
 * in one read transaction when the file is opened. fsops.c does the FUSE plumbing.
 *
 * What the figures are here: size and dataSize are the BSON bytes of the documents (as
 * MongoDB counts them); a collection's storageSize is that too (its rows share SQLite's
 * tables with the other collections, so no page count is its own); a database's
 * storageSize is its SQLite file and WAL; index sizes are the bytes of their keys and
 * values.
 */
#include "fs_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses the part after '?' of a .stats name: scale=N (a number >= 1, truncated). */
static int parse_opts(const char *opts, int64_t *scale, struct dfs_err *err)
{
	struct dfs_buf k, v;
	int rc = 0;

	*scale = 1;
	dfs_buf_init(&k);
	dfs_buf_init(&v);
	for (const char *p = opts ? opts : ""; !rc && *p;) {
		const char *amp = strchr(p, '&'), *eq;
		size_t n = amp ? (size_t)(amp - p) : strlen(p);

		eq = memchr(p, '=', n);
		rc = fs_path_unescape(p, eq ? (size_t)(eq - p) : n, &k, err);
		if (!rc)
			rc = fs_path_unescape(eq ? eq + 1 : p + n, eq ? n - (size_t)(eq - p) - 1 : 0,
					      &v, err);
		p += n + (amp ? 1 : 0);
		if (rc || !k.len)
			continue;
		if (strcmp(k.data, "scale") == 0) {
			char *end;
			double d;

			errno = 0;
			d = strtod(v.data ? v.data : "", &end);
			if (!v.len || *end || errno || !(d >= 1) || d > 9.0e15)
				rc = dfs_err_set(err, DFS_EINVAL,
						 "scale must be a number >= 1, not '%s'",
						 v.data ? v.data : "");
			else
				*scale = (int64_t)floor(d);
		} else {
			rc = dfs_err_set(err, DFS_EINVAL, "unknown .stats option '%s' (scale)",
					 k.data);
		}
	}
	dfs_buf_release(&k);
	dfs_buf_release(&v);
	return rc;
}

/* A number as MongoDB shows these: int32 when it fits, else int64. */
static void put_num(bson_t *b, const char *key, int64_t v)
{
	if (v >= INT32_MIN && v <= INT32_MAX)
		bson_append_int32(b, key, -1, (int32_t)v);
	else
		bson_append_int64(b, key, -1, v);
}

/* The index figures of coll: how many, their total bytes, and indexSizes into sizes
 * (NULL: not wanted). */
static int index_sizes(struct store_txn *t, int64_t coll, int64_t scale, bson_t *sizes, int *n,
		       int64_t *total, struct dfs_err *err)
{
	struct store_index *ixs = NULL;
	int nix = 0, rc;

	*total = 0;
	if ((rc = store_index_list(t, coll, &ixs, &nix, err)))
		return rc;
	for (int i = 0; i < nix && !rc; i++) {
		struct store_index_stats s;

		rc = store_index_stats(t, coll, ixs[i].name, &s, err);
		if (!rc) {
			*total += s.bytes;
			if (sizes)
				put_num(sizes, ixs[i].name, s.bytes / scale);
		}
	}
	store_index_list_free(ixs, nix);
	*n = nix;
	return rc;
}

static int coll_stats(struct store_txn *t, int64_t coll, int64_t scale, bson_t *out,
		      struct dfs_err *err)
{
	struct store_coll c;
	int64_t count, bytes, ixtotal;
	int nix, rc;
	char ns[2 * DFS_MAX_NS_NAME + 2];
	bson_t sizes;

	if ((rc = store_coll_by_id(t, coll, &c, err)) ||
	    (rc = store_coll_data_size(t, coll, &count, &bytes, err)))
		return rc;
	snprintf(ns, sizeof(ns), "%s.%s", store_db_name(store_txn_db(t)), c.name);
	BSON_APPEND_UTF8(out, "ns", ns);
	put_num(out, "size", bytes / scale);
	put_num(out, "count", count);
	if (count)
		put_num(out, "avgObjSize", bytes / count);
	put_num(out, "storageSize", bytes / scale);
	BSON_APPEND_BOOL(out, "capped", c.capped);
	if (c.capped) {
		put_num(out, "max", c.cap_max);
		put_num(out, "maxSize", c.cap_size / scale);
	}
	bson_init(&sizes);
	rc = index_sizes(t, coll, scale, &sizes, &nix, &ixtotal, err);
	if (!rc) {
		put_num(out, "nindexes", nix);
		put_num(out, "totalIndexSize", ixtotal / scale);
		put_num(out, "totalSize", (bytes + ixtotal) / scale);
		BSON_APPEND_DOCUMENT(out, "indexSizes", &sizes);
		put_num(out, "scaleFactor", scale);
		BSON_APPEND_DOUBLE(out, "ok", 1.0);
	}
	bson_destroy(&sizes);
	return rc;
}

struct db_acc {
	struct store_txn *t;
	int64_t colls, objects, bytes, indexes, ixbytes;
	struct dfs_err *err;
};

static int db_add_coll(void *ctx, const struct store_coll *c)
{
	struct db_acc *a = ctx;
	int64_t count, bytes, ixtotal;
	int nix, rc;

	if ((rc = store_coll_data_size(a->t, c->id, &count, &bytes, a->err)) ||
	    (rc = index_sizes(a->t, c->id, 1, NULL, &nix, &ixtotal, a->err)))
		return rc;
	a->colls++;
	a->objects += count;
	a->bytes += bytes;
	a->indexes += nix;
	a->ixbytes += ixtotal;
	return 0;
}

static int db_stats(struct store_txn *t, int64_t scale, bson_t *out, struct dfs_err *err)
{
	struct store_db *db = store_txn_db(t);
	struct db_acc a = {t, 0, 0, 0, 0, 0, err};
	int64_t file, used, total;
	int rc;

	/* The index calls inside the listing use other statements than its own. */
	if ((rc = store_coll_list(t, db_add_coll, &a, err)) ||
	    (rc = store_db_usage(db, &file, &used, &total, err)))
		return rc;
	BSON_APPEND_UTF8(out, "db", store_db_name(db));
	put_num(out, "collections", a.colls);
	put_num(out, "views", 0);
	put_num(out, "objects", a.objects);
	put_num(out, "avgObjSize", a.objects ? a.bytes / a.objects : 0);
	put_num(out, "dataSize", a.bytes / scale);
	put_num(out, "storageSize", file / scale);
	put_num(out, "indexes", a.indexes);
	put_num(out, "indexSize", a.ixbytes / scale);
	put_num(out, "totalSize", (file + a.ixbytes) / scale);
	put_num(out, "scaleFactor", scale);
	put_num(out, "fsUsedSize", used / scale);
	put_num(out, "fsTotalSize", total / scale);
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
	return 0;
}

int fs_stats_doc(struct store_db *db, int64_t coll, int64_t scale, bson_t *out, struct dfs_err *err)
{
	struct store_txn *t;
	int rc;

	if (scale < 1)
		return dfs_err_set(err, DFS_EINVAL, "scale has to be > 0");
	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	rc = coll ? coll_stats(t, coll, scale, out, err) : db_stats(t, scale, out, err);
	store_txn_abort(t);
	return rc;
}

int fs_stats_render(struct store_db *db, int64_t coll, const char *opts, struct dfs_buf *out,
		    struct dfs_err *err)
{
	int64_t scale;
	bson_t doc;
	int rc;

	if ((rc = parse_opts(opts, &scale, err)))
		return rc;
	bson_init(&doc);
	rc = fs_stats_doc(db, coll, scale, &doc, err);
	if (!rc)
		rc = store_codec_render(&doc, STORE_RENDER_PRETTY, out, err);
	bson_destroy(&doc);
	return rc;
}
