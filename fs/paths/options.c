/*
 * options.c - the .options file of a collection: MongoDB's collection options as JSON, read
 * back as listCollections shows them ({} or {"capped": true, "size": N, "max": M}), and a
 * written options document applied: capping an empty collection, as MongoDB's create does.
 * A collection that holds documents is capped by `docfs capped` (convertToCapped), never by
 * a write here, so that a stray echo cannot evict data. The store does the capping
 * (store/capped.c); fsops.c does the FUSE plumbing.
 */
#include "fs_int.h"

#include <stdio.h>
#include <string.h>

int fs_options_render(struct store_txn *t, int64_t coll, struct dfs_buf *out,
		      struct dfs_err *err)
{
	struct store_coll c;
	int rc;

	if ((rc = store_coll_by_id(t, coll, &c, err)))
		return rc;
	if (!c.capped) {
		dfs_buf_puts(out, "{}\n");
		return 0;
	}
	dfs_buf_printf(out, "{\"capped\": true, \"size\": %lld, \"max\": %lld}\n",
		       (long long)c.cap_size, (long long)c.cap_max);
	return 0;
}

/* A whole number option (int32, int64 or an integral double), >= 0. */
static int count_opt(bson_iter_t *it, int64_t *out, struct dfs_err *err)
{
	const char *k = bson_iter_key(it);
	double d;

	switch (bson_iter_type(it)) {
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
		*out = bson_iter_as_int64(it);
		break;
	case BSON_TYPE_DOUBLE:
		d = bson_iter_double(it);
		if (d != d || d < 0 || d > 9.2e18 || d != (double)(int64_t)d)
			return dfs_err_set(err, DFS_EINVAL, "'%s' must be a whole number", k);
		*out = (int64_t)d;
		break;
	default:
		return dfs_err_set(err, DFS_EINVAL, "'%s' must be a number", k);
	}
	if (*out < 0)
		return dfs_err_set(err, DFS_EINVAL, "'%s' must not be negative", k);
	return 0;
}

/* Reads the options text into capped, size and max, checking them as MongoDB's create does.
 * Errors: DFS_EINVAL. */
static int options_parse(const char *text, size_t len, bool *capped_out, int64_t *size_out,
			 int64_t *max_out, struct dfs_err *err)
{
	bson_t doc = BSON_INITIALIZER;
	bool capped = false, has_size = false;
	int64_t size = 0, max = 0;
	bson_iter_t it;
	int rc;

	rc = store_codec_parse_doc(text, len, &doc, err);
	if (rc == DFS_EINCOMPLETE)
		rc = dfs_err_set(err, DFS_EINVAL, "%s", err ? err->msg : "incomplete options");
	if (rc)
		goto out;
	bson_iter_init(&it, &doc);
	while (!rc && bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (strcmp(k, "capped") == 0) {
			if (!BSON_ITER_HOLDS_BOOL(&it))
				rc = dfs_err_set(err, DFS_EINVAL, "'capped' must be true or false");
			else
				capped = bson_iter_bool(&it);
		} else if (strcmp(k, "size") == 0) {
			rc = count_opt(&it, &size, err);
			has_size = true;
		} else if (strcmp(k, "max") == 0) {
			rc = count_opt(&it, &max, err);
		} else {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "unknown collection option '%s' (capped, size and max are "
					 "known)",
					 k);
		}
	}
	if (rc)
		goto out;
	if (capped && (!has_size || size == 0)) {
		rc = dfs_err_set(err, DFS_EINVAL, "the 'size' field is required when 'capped' is "
						  "true");
		goto out;
	}
	if (!capped && (has_size || max)) {
		rc = dfs_err_set(err, DFS_EINVAL, "'size' and 'max' need 'capped': true");
		goto out;
	}
	*capped_out = capped;
	*size_out = size;
	*max_out = max;
out:
	bson_destroy(&doc);
	return rc;
}

int fs_options_check(const char *text, size_t len, struct dfs_err *err)
{
	bool capped;
	int64_t size, max;

	return options_parse(text, len, &capped, &size, &max, err);
}

int fs_options_apply(struct store_db *db, int64_t coll, const char *text, size_t len,
		     struct dfs_err *err)
{
	bool capped = false;
	int64_t size = 0, max = 0, ndocs = 0, nfiles = 0;
	struct store_txn *t = NULL;
	struct store_coll c;
	int rc;

	if ((rc = options_parse(text, len, &capped, &size, &max, err)))
		return rc;
	if ((rc = store_txn_begin(db, true, &t, err)))
		goto done;
	if ((rc = store_coll_by_id(t, coll, &c, err)))
		goto done;
	if (c.capped) {
		/* the same options again: nothing to do (cp of the file onto itself) */
		if (capped && store_capped_round(size) == c.cap_size && max == c.cap_max)
			goto done;
		rc = dfs_err_set(err, DFS_EINVAL,
				 capped ? "collection '%s' is capped already: its options cannot "
					  "change"
					: "collection '%s' is capped: it cannot be uncapped",
				 c.name);
		goto done;
	}
	if (!capped)
		goto done; /* {} on a plain collection */
	if ((rc = store_coll_count(t, coll, &ndocs, &nfiles, err)))
		goto done;
	if (ndocs) {
		rc = dfs_err_set(err, DFS_EINVAL,
				 "collection '%s' holds %lld documents: cap it with `docfs capped "
				 "STORE DB.COLL SIZE [MAX]` (convertToCapped), which removes the "
				 "oldest past the limits",
				 c.name, (long long)ndocs);
		goto done;
	}
	rc = store_coll_set_capped(t, coll, size, max, err);
done:
	if (t) {
		if (rc)
			store_txn_abort(t);
		else
			rc = store_txn_commit(t, err);
	}
	return rc;
}
