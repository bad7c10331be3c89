/*
 * cmd_index.c - the index commands: createIndexes (each spec built by fs_index_create, the
 * function behind the mount's .indexes/ files and `docfs index`, which lists the build in
 * currentOp), listIndexes (the specs as stored) and dropIndexes (by name, key pattern,
 * a list of names, or "*").
 */
#include "wire.h"
#include "fs_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The collection name of c in the store: its id in *id (0 when missing). */
static int coll_id(struct wire_ctx *c, struct store_db *db, const char *name, bool create,
		   int64_t *id, bool *created)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll co;
	int rc;

	*id = 0;
	if ((rc = store_txn_begin(db, create, &t, &err)))
		return wire_fail_dfs(c, &err);
	rc = store_coll_find(t, name, &co, &err);
	if (rc == DFS_ENOENT && create) {
		dfs_err_clear(&err);
		rc = store_coll_create(t, name, 0755, getuid(), getgid(), &co, &err);
		if (!rc && created)
			*created = true;
	}
	if (rc == DFS_ENOENT) {
		store_txn_abort(t);
		return 0;
	}
	if (rc) {
		store_txn_abort(t);
		return wire_fail_dfs(c, &err);
	}
	*id = co.id;
	if (!create) {
		store_txn_abort(t);
		return 0;
	}
	return store_txn_commit(t, &err) ? wire_fail_dfs(c, &err) : 0;
}

static int index_count(struct store_db *db, int64_t coll, int *n, struct dfs_err *err)
{
	struct store_txn *t;
	struct store_index *ixs;
	int rc;

	*n = 0;
	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	if (!(rc = store_index_list(t, coll, &ixs, n, err)))
		store_index_list_free(ixs, *n);
	store_txn_abort(t);
	return rc;
}

int wire_cmd_create_indexes(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	struct store_db *db;
	bson_iter_t it, arr;
	int64_t coll;
	bool created = false;
	int before = 0, after = 0, rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))))
		return rc;
	if (!bson_iter_init_find(&it, c->cmd, "indexes") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr))
		return wire_fail(c, 14, "TypeMismatch",
				 "BSON field 'createIndexes.indexes' is missing or not an array");
	if ((rc = wire_db(c, true, &db)) || (rc = coll_id(c, db, name, true, &coll, &created)))
		return rc;
	if (index_count(db, coll, &before, &err))
		return wire_fail_dfs(c, &err);
	while (bson_iter_next(&arr)) {
		const uint8_t *data;
		uint32_t len;
		bson_t spec, clean;
		bson_iter_t f;

		if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
			return wire_fail(c, 14, "TypeMismatch",
					 "each index spec must be a document");
		bson_iter_document(&arr, &len, &data);
		if (!bson_init_static(&spec, data, len))
			return wire_fail(c, 2, "BadValue", "invalid index spec");
		/* "v" (the index version: docfs has one) and "ns" (old drivers' namespace) are
		 * MongoDB's, not options */
		bson_init(&clean);
		if (bson_iter_init(&f, &spec))
			while (bson_iter_next(&f))
				if (strcmp(bson_iter_key(&f), "v") &&
				    strcmp(bson_iter_key(&f), "ns"))
					bson_append_iter(&clean, NULL, 0, &f);
		rc = fs_index_create(db, coll, NULL, &clean, NULL, 0, &err);
		bson_destroy(&clean);
		if (rc) {
			if (rc == DFS_EEXIST && strncmp(err.msg, "E11000", 6) != 0)
				return wire_fail(c, 86, "IndexKeySpecsConflict", "%s", err.msg);
			return wire_fail_dfs(c, &err);
		}
	}
	if (index_count(db, coll, &after, &err))
		return wire_fail_dfs(c, &err);
	BSON_APPEND_INT32(reply, "numIndexesBefore", before);
	BSON_APPEND_INT32(reply, "numIndexesAfter", after);
	if (before == after)
		BSON_APPEND_UTF8(reply, "note", "all indexes already exist");
	BSON_APPEND_BOOL(reply, "createdCollectionAutomatically", created);
	return 0;
}

int wire_cmd_list_indexes(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1], ns[2 * DFS_MAX_NS_NAME + 2];
	struct store_db *db;
	struct store_txn *t;
	struct store_index *ixs = NULL;
	struct wire_docs docs = {0};
	struct wire_source src = {wire_docs_next, &docs};
	int64_t coll;
	int n = 0, rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))))
		return rc;
	snprintf(ns, sizeof(ns), "%s.%s", c->db, name);
	rc = wire_db(c, false, &db);
	if (rc == DFS_ENOENT)
		goto missing;
	if (rc || (rc = coll_id(c, db, name, false, &coll, NULL)))
		return rc;
	if (!coll)
		goto missing;
	if ((rc = store_txn_begin(db, false, &t, &err)))
		return wire_fail_dfs(c, &err);
	rc = store_index_list(t, coll, &ixs, &n, &err);
	store_txn_abort(t);
	if (rc)
		return wire_fail_dfs(c, &err);
	for (int i = 0; i < n; i++) {
		bson_t *one = bson_new();
		bson_iter_t it;

		/* MongoDB lists v first */
		if (!ixs[i].spec || !bson_iter_init_find(&it, ixs[i].spec, "v"))
			BSON_APPEND_INT32(one, "v", 2);
		if (ixs[i].spec)
			bson_concat(one, ixs[i].spec);
		wire_docs_take(&docs, one);
	}
	store_index_list_free(ixs, n);
	if (wire_cursor_reply(c, ns, &src, -1, false, NULL, reply, &err))
		rc = wire_fail_dfs(c, &err);
	wire_docs_release(&docs);
	return rc;
missing:
	return wire_fail(c, 26, "NamespaceNotFound", "ns does not exist: %s", ns);
}

int wire_cmd_drop_indexes(struct wire_ctx *c, bson_t *reply)
{
	struct dfs_err err = {0};
	char name[DFS_MAX_NS_NAME + 1];
	struct store_db *db;
	struct store_txn *t = NULL;
	struct store_index *ixs = NULL;
	bson_iter_t it;
	int64_t coll;
	int n = 0, rc;

	if ((rc = wire_arg_coll(c, name, sizeof(name))))
		return rc;
	if (!bson_iter_init_find(&it, c->cmd, "index"))
		return wire_fail(c, 9, "FailedToParse", "dropIndexes needs 'index'");
	rc = wire_db(c, false, &db);
	if (rc == DFS_ENOENT)
		goto missing;
	if (rc || (rc = coll_id(c, db, name, false, &coll, NULL)))
		return rc;
	if (!coll)
		goto missing;
	if ((rc = store_txn_begin(db, true, &t, &err)) ||
	    (rc = store_index_list(t, coll, &ixs, &n, &err))) {
		rc = wire_fail_dfs(c, &err);
		goto done;
	}
	if (BSON_ITER_HOLDS_UTF8(&it) && !strcmp(bson_iter_utf8(&it, NULL), "*")) {
		for (int i = 1; i < n && !rc; i++)
			if ((rc = store_index_drop(t, coll, ixs[i].name, &err)))
				rc = wire_fail_dfs(c, &err);
	} else if (BSON_ITER_HOLDS_UTF8(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
		bson_iter_t names;
		bool one = BSON_ITER_HOLDS_UTF8(&it);

		if (!one)
			bson_iter_recurse(&it, &names);
		while (!rc && (one || bson_iter_next(&names))) {
			const char *ix = one ? bson_iter_utf8(&it, NULL)
					 : BSON_ITER_HOLDS_UTF8(&names)
						 ? bson_iter_utf8(&names, NULL)
						 : "";

			if (!strcmp(ix, "_id_"))
				rc = wire_fail(c, 72, "InvalidOptions", "cannot drop _id index");
			else if ((rc = store_index_drop(t, coll, ix, &err)) == DFS_ENOENT)
				rc = wire_fail(c, 27, "IndexNotFound",
					       "index not found with name [%s]", ix);
			else if (rc)
				rc = wire_fail_dfs(c, &err);
			one = false;
			if (BSON_ITER_HOLDS_UTF8(&it))
				break;
		}
	} else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
		const uint8_t *data;
		uint32_t len;
		bson_t key;
		int found = -1;

		bson_iter_document(&it, &len, &data);
		if (bson_init_static(&key, data, len))
			for (int i = 0; i < n && found < 0; i++) {
				bson_iter_t k;
				const uint8_t *kd;
				uint32_t kl;
				bson_t kv;

				if (ixs[i].spec && bson_iter_init_find(&k, ixs[i].spec, "key") &&
				    BSON_ITER_HOLDS_DOCUMENT(&k)) {
					bson_iter_document(&k, &kl, &kd);
					if (bson_init_static(&kv, kd, kl) && kv.len == key.len &&
					    !memcmp(bson_get_data(&kv), bson_get_data(&key), kl))
						found = i;
				}
			}
		if (found < 0)
			rc = wire_fail(c, 27, "IndexNotFound", "can't find index with key: %s",
				       "(the given key pattern)");
		else if (found == 0)
			rc = wire_fail(c, 72, "InvalidOptions", "cannot drop _id index");
		else if ((rc = store_index_drop(t, coll, ixs[found].name, &err)))
			rc = wire_fail_dfs(c, &err);
	} else {
		rc = wire_fail(c, 14, "TypeMismatch",
			       "dropIndexes' index must be a string, an array or an object");
	}
	if (!rc) {
		rc = store_txn_commit(t, &err) ? wire_fail_dfs(c, &err) : 0;
		t = NULL;
	}
	if (!rc)
		wire_append_count(reply, "nIndexesWas", n);
done:
	store_txn_abort(t);
	if (ixs)
		store_index_list_free(ixs, n);
	return rc;
missing:
	return wire_fail(c, 26, "NamespaceNotFound", "ns not found %s.%s", c->db, name);
}
