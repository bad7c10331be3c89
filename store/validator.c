/*
 * validator.c - collection validators (MongoDB's schema validation with query operators):
 * {validator, validationLevel, validationAction} kept in colls.options beside the capped
 * keys, the check every document write makes (doc.c calls store__validate from its one
 * insert path, its one replace path and the rename that gives a document a new _id, so
 * files, .insert, update/, .bulk and the wire protocol all meet the same rule), and the
 * errInfo MongoDB's DocumentValidationFailure carries. It does not parse or match filters:
 * the query layer's filter hooks (index.c note 5) compile and match, as for partial indexes.
 *
 * Design notes
 * 1. colls.options keys: "validator" (a filter document), "validationLevel" ("strict",
 *    "moderate", "off"), "validationAction" ("error", "warn"); set together by
 *    store_coll_set_validation, which keeps the other keys (capped.c's); capped.c's
 *    rewrites of its totals keep these (store__options_merge). A collection without
 *    validation options has no such keys.
 * 2. Levels as MongoDB: strict checks every insert and replacement; moderate checks inserts
 *    and the replacement of a document that was valid before (an invalid one may stay
 *    invalid); off checks nothing. Actions: error refuses the write (DFS_EINVAL "Document
 *    failed validation", which query_error_code answers as 121), warn lets it through and
 *    calls the warn hook (the log and /.docfs/errors in fs/). Existing documents are never
 *    checked when a validator is set, as in MongoDB.
 * 3. Each transaction keeps the compiled validator of the last collection it wrote (like
 *    capped.c's cache): store_coll_set_validation and store_txn_undo forget it. Another
 *    process's collMod is seen by the next transaction.
 * 4. bypassDocumentValidation is per thread (store_thread_bypass_validation), like the
 *    caller of cred.c: the front end sets it around one command. The errInfo of the last
 *    refusal (or warning) is per thread too, taken by the front end that reports it.
 * 5. errInfo.details follows mongod's doc validation error generator for what a top-level
 *    clause shows: {operatorName, specifiedAs, reason, consideredValue, consideredType}
 *    for a clause on one field with one operator (an implicit equality is "$eq"), the
 *    operator's name and specifiedAs for other clauses; several top-level clauses are an
 *    "$and" with clausesNotSatisfied [{index, details}]. Nested explanations (inside $or,
 *    $elemMatch, ...) are not generated.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct store__vcache {
	int64_t coll;	   /* the collection this describes */
	bson_t *validator; /* Owned: its validator, or NULL */
	void *compiled;	   /* Owned by the hooks: validator compiled */
	int level, action; /* enum store_vlevel, enum store_vaction */
	char name[DFS_MAX_NS_NAME + 1];
};

#define INFO_MAX 16384 /* bytes of errInfo kept; a larger one keeps failingDocumentId only */

static _Thread_local bool tls_bypass;
/* the last refusal's errInfo: a buffer, not the heap, so that a thread that ends (a FUSE
 * worker) leaves nothing behind */
static _Thread_local uint8_t tls_info[INFO_MAX];
static _Thread_local uint32_t tls_info_len; /* 0: none */
static void (*warn_hook)(const char *msg);

void store_thread_bypass_validation(bool on)
{
	tls_bypass = on;
}

bool store_validation_failure_take(bson_t *out)
{
	bson_t view;

	if (!tls_info_len || !bson_init_static(&view, tls_info, tls_info_len))
		return false;
	tls_info_len = 0;
	bson_init(out);
	bson_concat(out, &view);
	return true;
}

/* Keeps info as the thread's last errInfo (note 4). */
static void info_keep(const bson_t *info)
{
	bson_iter_t it;
	bson_t small = BSON_INITIALIZER;

	if (info->len > INFO_MAX) {
		if (bson_iter_init_find(&it, info, "failingDocumentId"))
			bson_append_iter(&small, NULL, 0, &it);
		info = &small;
	}
	tls_info_len = info->len <= INFO_MAX ? info->len : 0;
	if (tls_info_len)
		memcpy(tls_info, bson_get_data(info), info->len);
	bson_destroy(&small);
}

void store_validation_warn_hook_set(void (*fn)(const char *msg))
{
	warn_hook = fn;
}

static const char *const level_names[] = {"strict", "moderate", "off"};
static const char *const action_names[] = {"error", "warn"};

const char *store_vlevel_name(int level)
{
	return level >= 0 && level < 3 ? level_names[level] : "strict";
}

const char *store_vaction_name(int action)
{
	return action >= 0 && action < 2 ? action_names[action] : "error";
}

int store_vlevel_parse(const char *s)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, level_names[i]))
			return i;
	return -1;
}

int store_vaction_parse(const char *s)
{
	for (int i = 0; i < 2; i++)
		if (!strcmp(s, action_names[i]))
			return i;
	return -1;
}

/* ---- colls.options ----------------------------------------------------------------- */

int store__options_get(struct store_txn *t, int64_t coll, bson_t *out, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_COLL_OPTIONS_GET, err);
	int rc;

	bson_init(out);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const void *blob = sqlite3_column_blob(st, 0);
		int len = sqlite3_column_bytes(st, 0);
		bson_t b;

		if (blob && len >= 5 && bson_init_static(&b, blob, (size_t)len))
			bson_concat(out, &b);
		rc = SQLITE_DONE;
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "collection options", err);
	return 0;
}

static bool is_validation_key(const char *k)
{
	return !strcmp(k, "validator") || !strcmp(k, "validationLevel") ||
	       !strcmp(k, "validationAction");
}

int store__options_merge(struct store_txn *t, int64_t coll, bson_t *b, struct dfs_err *err)
{
	bson_t old;
	bson_iter_t it;
	int rc = store__options_get(t, coll, &old, err);

	if (!rc && bson_iter_init(&it, &old))
		while (bson_iter_next(&it))
			if (is_validation_key(bson_iter_key(&it)))
				bson_append_iter(b, NULL, 0, &it);
	bson_destroy(&old);
	return rc;
}

static int options_put_blob(struct store_txn *t, int64_t coll, const bson_t *b, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_COLL_OPTIONS, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	if (b->len > 5)
		sqlite3_bind_blob(st, 2, bson_get_data(b), (int)b->len, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, 2);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "collection options", err);
	return 0;
}

void store_validation_release(struct store_validation *v)
{
	if (v->validator)
		bson_destroy(v->validator);
	memset(v, 0, sizeof(*v));
}

/* Reads the validation keys of options into v (v->validator NULL when there is none). */
static void validation_decode(const bson_t *options, struct store_validation *v)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	memset(v, 0, sizeof(*v));
	if (bson_iter_init_find(&it, options, "validator") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_t view;

		bson_iter_document(&it, &len, &data);
		if (bson_init_static(&view, data, len))
			v->validator = bson_copy(&view);
	}
	if (bson_iter_init_find(&it, options, "validationLevel") && BSON_ITER_HOLDS_UTF8(&it))
		v->level = store_vlevel_parse(bson_iter_utf8(&it, NULL));
	if (bson_iter_init_find(&it, options, "validationAction") && BSON_ITER_HOLDS_UTF8(&it))
		v->action = store_vaction_parse(bson_iter_utf8(&it, NULL));
	if (v->level < 0)
		v->level = STORE_VLEVEL_STRICT;
	if (v->action < 0)
		v->action = STORE_VACTION_ERROR;
	v->has = v->validator || bson_has_field(options, "validationLevel") ||
		 bson_has_field(options, "validationAction");
}

int store_coll_validation(struct store_txn *t, int64_t coll, struct store_validation *out,
			  struct dfs_err *err)
{
	bson_t options;
	int rc = store__options_get(t, coll, &options, err);

	memset(out, 0, sizeof(*out));
	if (!rc)
		validation_decode(&options, out);
	bson_destroy(&options);
	return rc;
}

static void vcache_free(struct store__vcache *vc)
{
	const struct store_filter_hooks *h = store__filter_hooks();

	if (!vc)
		return;
	if (vc->compiled && h)
		h->free(vc->compiled);
	if (vc->validator)
		bson_destroy(vc->validator);
	free(vc);
}

void store__validate_forget(struct store_txn *t)
{
	vcache_free(t->vc);
	t->vc = NULL;
}

int store_coll_set_validation(struct store_txn *t, int64_t coll, const bson_t *validator, int level,
			      int action, struct dfs_err *err)
{
	const struct store_filter_hooks *h = store__filter_hooks();
	struct store_validation cur;
	bson_t options, out = BSON_INITIALIZER;
	bson_iter_t it;
	void *compiled = NULL;
	int rc;

	if (validator && !bson_empty(validator)) {
		if (!h)
			return dfs_err_set(err, DFS_EINVAL, "a validator needs the query engine");
		if ((rc = h->compile(validator, &compiled, err)))
			return dfs_err_prefix(err, "validator: "), rc;
		h->free(compiled);
	}
	if ((rc = store__options_get(t, coll, &options, err)))
		return rc;
	validation_decode(&options, &cur);
	if (bson_iter_init(&it, &options))
		while (bson_iter_next(&it))
			if (!is_validation_key(bson_iter_key(&it)))
				bson_append_iter(&out, NULL, 0, &it);
	if (validator)
		BSON_APPEND_DOCUMENT(&out, "validator", validator);
	else if (cur.validator)
		BSON_APPEND_DOCUMENT(&out, "validator", cur.validator);
	BSON_APPEND_UTF8(&out, "validationLevel",
			 store_vlevel_name(level >= 0 ? level : cur.level));
	BSON_APPEND_UTF8(&out, "validationAction",
			 store_vaction_name(action >= 0 ? action : cur.action));
	rc = options_put_blob(t, coll, &out, err);
	store_validation_release(&cur);
	bson_destroy(&options);
	bson_destroy(&out);
	store__validate_forget(t);
	return rc;
}

/* ---- the check (notes 2, 3) -------------------------------------------------------- */

static int vcache_load(struct store_txn *t, int64_t coll, struct dfs_err *err)
{
	const struct store_filter_hooks *h = store__filter_hooks();
	struct store_validation v;
	struct store_coll c;
	struct store__vcache *vc;
	int rc;

	if (t->vc && t->vc->coll == coll)
		return 0;
	store__validate_forget(t);
	if ((rc = store_coll_validation(t, coll, &v, err)))
		return rc;
	vc = calloc(1, sizeof(*vc));
	if (!vc)
		abort();
	vc->coll = coll;
	vc->level = v.level;
	vc->action = v.action;
	if (v.validator && !bson_empty(v.validator)) {
		if ((rc = store_coll_by_id(t, coll, &c, err))) {
			store_validation_release(&v);
			free(vc);
			return rc;
		}
		snprintf(vc->name, sizeof(vc->name), "%s", c.name);
		if (!h)
			rc = dfs_err_set(err, DFS_EINVAL,
					 "collection '%s' has a validator, which "
					 "needs the query engine",
					 c.name);
		else
			rc = h->compile(v.validator, &vc->compiled, err);
		if (rc) {
			store_validation_release(&v);
			free(vc);
			return rc;
		}
		vc->validator = v.validator;
		v.validator = NULL;
	}
	store_validation_release(&v);
	t->vc = vc;
	return 0;
}

/* MongoDB's reason for an operator that failed on a value that is there. */
static const char *reason_of(const char *op)
{
	static const struct {
		const char *op, *reason;
	} tab[] = {
		{"$eq", "comparison failed"},
		{"$ne", "comparison succeeded"},
		{"$gt", "comparison failed"},
		{"$gte", "comparison failed"},
		{"$lt", "comparison failed"},
		{"$lte", "comparison failed"},
		{"$in", "no matching value found in array"},
		{"$nin", "matching value found in array"},
		{"$type", "type did not match"},
		{"$regex", "regular expression did not match"},
		{"$exists", "path had value"},
		{"$size", "array length was not equal to given size"},
		{"$mod", "$mod did not evaluate to expected remainder"},
		{"$all", "array did not contain all specified values"},
		{"$elemMatch", "array did not satisfy the child predicate"},
		{"$not", "child expression matched"},
	};

	for (size_t i = 0; i < sizeof(tab) / sizeof(*tab); i++)
		if (!strcmp(tab[i].op, op))
			return tab[i].reason;
	return NULL;
}

/* details of top-level clause it (a key and its value) that doc fails (note 5). */
static void clause_details(bson_iter_t *it, const bson_t *doc, bson_t *out)
{
	const char *key = bson_iter_key(it);
	bson_t spec = BSON_INITIALIZER;
	const char *op = key;
	bool one_op = false;
	bson_iter_t sub, val;

	bson_append_iter(&spec, key, -1, it);
	if (key[0] != '$') {
		op = "$eq";
		if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &sub) &&
		    bson_iter_next(&sub) && bson_iter_key(&sub)[0] == '$') {
			op = bson_iter_key(&sub);
			one_op = !bson_iter_next(&sub);
		} else {
			one_op = true;
		}
	}
	BSON_APPEND_UTF8(out, "operatorName", op);
	BSON_APPEND_DOCUMENT(out, "specifiedAs", &spec);
	if (key[0] != '$' && one_op) {
		bool there =
			bson_iter_init(&val, doc) && bson_iter_find_descendant(&val, key, &sub);

		if (!there && strcmp(op, "$exists") == 0)
			BSON_APPEND_UTF8(out, "reason", "path does not exist");
		else if (!there)
			BSON_APPEND_UTF8(out, "reason", "field was missing");
		else if (reason_of(op))
			BSON_APPEND_UTF8(out, "reason", reason_of(op));
		if (there) {
			bson_append_iter(out, "consideredValue", -1, &sub);
			if (!strcmp(op, "$type"))
				BSON_APPEND_UTF8(out, "consideredType",
						 store_type_alias(bson_iter_type(&sub)));
		}
	}
	bson_destroy(&spec);
}

/* errInfo {failingDocumentId, details} of doc failing vc's validator. */
static void failure_info(const struct store__vcache *vc, const bson_t *doc, bson_t *out)
{
	const struct store_filter_hooks *h = store__filter_hooks();
	bson_iter_t it;
	bson_t details, list, one, inner;
	uint32_t n = 0, index = 0;
	char key[16];

	bson_init(out);
	if (bson_iter_init_find(&it, doc, "_id"))
		bson_append_iter(out, "failingDocumentId", -1, &it);
	if (bson_iter_init(&it, vc->validator))
		while (bson_iter_next(&it))
			n++;
	BSON_APPEND_DOCUMENT_BEGIN(out, "details", &details);
	if (n == 1 && bson_iter_init(&it, vc->validator) && bson_iter_next(&it)) {
		clause_details(&it, doc, &details);
	} else {
		BSON_APPEND_UTF8(&details, "operatorName", "$and");
		BSON_APPEND_ARRAY_BEGIN(&details, "clausesNotSatisfied", &list);
		n = 0;
		bson_iter_init(&it, vc->validator);
		while (bson_iter_next(&it)) {
			bson_t clause = BSON_INITIALIZER;
			void *c = NULL;
			bool fails = true;

			bson_append_iter(&clause, bson_iter_key(&it), -1, &it);
			if (h && h->compile(&clause, &c, NULL) == 0) {
				fails = !h->match(c, doc);
				h->free(c);
			}
			bson_destroy(&clause);
			if (fails) {
				snprintf(key, sizeof(key), "%u", n++);
				BSON_APPEND_DOCUMENT_BEGIN(&list, key, &one);
				BSON_APPEND_INT32(&one, "index", (int32_t)index);
				BSON_APPEND_DOCUMENT_BEGIN(&one, "details", &inner);
				clause_details(&it, doc, &inner);
				bson_append_document_end(&one, &inner);
				bson_append_document_end(&list, &one);
			}
			index++;
		}
		bson_append_array_end(&details, &list);
	}
	bson_append_document_end(out, &details);
}

int store__validate(struct store_txn *t, int64_t coll, const bson_t *doc, int64_t old_id,
		    struct dfs_err *err)
{
	const struct store_filter_hooks *h;
	struct store__vcache *vc;
	struct dfs_buf idtext;
	bson_iter_t it;
	int rc;

	if (tls_bypass)
		return 0;
	if ((rc = vcache_load(t, coll, err)))
		return rc;
	vc = t->vc;
	h = store__filter_hooks();
	if (!vc->compiled || vc->level == STORE_VLEVEL_OFF || h->match(vc->compiled, doc))
		return 0;
	if (vc->level == STORE_VLEVEL_MODERATE && old_id) {
		bson_t old;
		bool valid;

		if ((rc = store_doc_get(t, old_id, &old, err)))
			return rc;
		valid = h->match(vc->compiled, &old);
		bson_destroy(&old);
		if (!valid) /* an invalid document may stay invalid */
			return 0;
	}
	if (vc->action == STORE_VACTION_WARN) {
		if (warn_hook) {
			char msg[512];

			dfs_buf_init(&idtext);
			if (bson_iter_init_find(&it, doc, "_id"))
				store_codec_render_value(bson_iter_value(&it), &idtext, NULL);
			snprintf(msg, sizeof(msg),
				 "Document would fail validation: collection '%s.%s' _id %s",
				 store_db_name(t->db), vc->name, idtext.data ? idtext.data : "?");
			dfs_buf_release(&idtext);
			warn_hook(msg);
		}
		return 0;
	}
	{
		bson_t info;

		failure_info(vc, doc, &info);
		info_keep(&info);
		bson_destroy(&info);
	}
	return dfs_err_set(err, DFS_EINVAL, "Document failed validation");
}
