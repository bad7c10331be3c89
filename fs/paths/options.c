/*
 * options.c - the .options file of a collection: MongoDB's collection options as JSON, read
 * back as listCollections shows them ({} or {"capped": true, "size": N, "max": M}, then
 * "validator", "validationLevel", "validationAction" when set), and a written options
 * document applied: capping an empty collection, as MongoDB's create does, and setting the
 * validation keys given (as collMod does; "validator": {} removes the validator; keys not
 * given stay as they are). A collection that holds documents is capped by `docfs capped`
 * (convertToCapped), never by a write here, so that a stray echo cannot evict data. The
 * store does the capping (store/capped.c) and the validating (store/validator.c); fsops.c
 * does the FUSE plumbing. The validation options' reader is shared with the wire
 * protocol's create and collMod (fs_validation_opt).
 */
#include "fs_int.h"
#include "query.h"

#include <stdio.h>
#include <string.h>

int fs_options_render(struct store_txn *t, int64_t coll, struct dfs_buf *out,
		      struct dfs_err *err)
{
	struct store_coll c;
	bson_t doc = BSON_INITIALIZER;
	int rc;

	if ((rc = store_coll_by_id(t, coll, &c, err)))
		return rc;
	if (c.capped) {
		BSON_APPEND_BOOL(&doc, "capped", true);
		if (c.cap_size <= INT32_MAX) /* plain integers when rendered */
			BSON_APPEND_INT32(&doc, "size", (int32_t)c.cap_size);
		else
			BSON_APPEND_INT64(&doc, "size", c.cap_size);
		if (c.cap_max <= INT32_MAX)
			BSON_APPEND_INT32(&doc, "max", (int32_t)c.cap_max);
		else
			BSON_APPEND_INT64(&doc, "max", c.cap_max);
	}
	if (!(rc = fs_options_validation(t, coll, &doc, err)) &&
	    !(rc = store_codec_render(&doc, STORE_RENDER_COMPACT, out, err)))
		dfs_buf_putc(out, '\n');
	bson_destroy(&doc);
	return rc;
}

int fs_options_validation(struct store_txn *t, int64_t coll, bson_t *out, struct dfs_err *err)
{
	struct store_validation v;
	int rc = store_coll_validation(t, coll, &v, err);

	if (rc || !v.has)
		return rc;
	if (v.validator)
		BSON_APPEND_DOCUMENT(out, "validator", v.validator);
	BSON_APPEND_UTF8(out, "validationLevel", store_vlevel_name(v.level));
	BSON_APPEND_UTF8(out, "validationAction", store_vaction_name(v.action));
	store_validation_release(&v);
	return 0;
}

int fs_validation_opt(bson_iter_t *it, struct fs_validation *v, bool *mine, struct dfs_err *err)
{
	const char *k = bson_iter_key(it);
	const uint8_t *data;
	uint32_t len;

	*mine = true;
	if (!strcmp(k, "validator")) {
		if (!BSON_ITER_HOLDS_DOCUMENT(it))
			return dfs_err_set(err, DFS_ETYPE, "'validator' must be a document");
		bson_iter_document(it, &len, &data);
		if (!bson_init_static(&v->validator, data, len))
			return dfs_err_set(err, DFS_EINVAL, "'validator' is not valid BSON");
		v->has_validator = true;
		return 0;
	}
	if (!strcmp(k, "validationLevel") || !strcmp(k, "validationAction")) {
		bool level = k[10] == 'L';
		int x = BSON_ITER_HOLDS_UTF8(it)
				? (level ? store_vlevel_parse
					 : store_vaction_parse)(bson_iter_utf8(it, NULL))
				: -1;

		if (!BSON_ITER_HOLDS_UTF8(it))
			return dfs_err_set(err, DFS_ETYPE, "'%s' must be a string", k);
		if (x < 0)
			return dfs_err_set(err, DFS_EINVAL,
					   "Enumeration value '%s' for field '%s' is not a valid "
					   "value.",
					   bson_iter_utf8(it, NULL), k);
		*(level ? &v->level : &v->action) = x;
		return 0;
	}
	*mine = false;
	return 0;
}

int fs_validation_apply(struct store_txn *t, int64_t coll, const struct fs_validation *v,
			struct dfs_err *err)
{
	if (!v->has_validator && v->level < 0 && v->action < 0)
		return 0;
	return store_coll_set_validation(t, coll, v->has_validator ? &v->validator : NULL, v->level,
					 v->action, err);
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
			 int64_t *max_out, bson_t *doc, struct fs_validation *v,
			 struct dfs_err *err)
{
	bool capped = false, has_size = false, mine;
	int64_t size = 0, max = 0;
	bson_iter_t it;
	int rc;

	rc = store_codec_parse_doc(text, len, doc, err);
	if (rc == DFS_EINCOMPLETE)
		rc = dfs_err_set(err, DFS_EINVAL, "%s", err ? err->msg : "incomplete options");
	if (rc)
		goto out;
	v->level = v->action = -1;
	v->has_validator = false;
	bson_iter_init(&it, doc);
	while (!rc && bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if ((rc = fs_validation_opt(&it, v, &mine, err)) || mine) {
			continue;
		} else if (strcmp(k, "capped") == 0) {
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
			rc = dfs_err_set(
				err, DFS_EINVAL,
				"unknown collection option '%s' (capped, size, max, validator, "
				"validationLevel and validationAction are known)",
				k);
		}
	}
	if (!rc && v->has_validator && !bson_empty(&v->validator)) {
		struct query_expr *x = NULL; /* a bad validator fails the write(), not the close */

		if ((rc = query_filter_parse(&v->validator, &x, err)))
			dfs_err_prefix(err, "validator: ");
		query_expr_free(x);
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
	return rc;
}

int fs_options_check(const char *text, size_t len, struct dfs_err *err)
{
	struct fs_validation v;
	bson_t doc = BSON_INITIALIZER;
	bool capped;
	int64_t size, max;
	int rc = options_parse(text, len, &capped, &size, &max, &doc, &v, err);

	bson_destroy(&doc);
	return rc;
}

int fs_options_apply(struct store_db *db, int64_t coll, const char *text, size_t len,
		     struct dfs_err *err)
{
	bool capped = false;
	int64_t size = 0, max = 0, ndocs = 0, nfiles = 0;
	struct store_txn *t = NULL;
	struct store_coll c;
	struct fs_validation v;
	bson_t doc = BSON_INITIALIZER;
	int rc;

	if ((rc = options_parse(text, len, &capped, &size, &max, &doc, &v, err)))
		goto done;
	if ((rc = store_txn_begin(db, true, &t, err)))
		goto done;
	if ((rc = store_coll_by_id(t, coll, &c, err)))
		goto done;
	if (c.capped) {
		/* the same options again: nothing to do (cp of the file onto itself) */
		if (capped && store_capped_round(size) == c.cap_size && max == c.cap_max)
			goto validation;
		rc = dfs_err_set(err, DFS_EINVAL,
				 capped ? "collection '%s' is capped already: its options cannot "
					  "change"
					: "collection '%s' is capped: it cannot be uncapped",
				 c.name);
		goto done;
	}
	if (!capped)
		goto validation; /* no capped keys on a plain collection */
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
	if ((rc = store_coll_set_capped(t, coll, size, max, err)))
		goto done;
validation:
	rc = fs_validation_apply(t, coll, &v, err);
done:
	if (t) {
		if (rc)
			store_txn_abort(t);
		else
			rc = store_txn_commit(t, err);
	}
	bson_destroy(&doc);
	return rc;
}
