/*
 * doc.c - the entries of a collection directory: documents ("<stem>.json", BSON keyed by
 * the order-preserving encoding of _id) and scratch files (bytes kept as they are). It
 * owns the rules for turning one into the other on rename. It does not know about inodes
 * or open files (fs/ does).
 *
 * Design notes
 * 1. A document row keeps the rendered length (size), so stat never renders.
 * 2. A document's id stays with its _id: renaming a document to a scratch name (vim's
 *    backup rename) gives the scratch file a new id and remembers the document's id in
 *    'vacated' for an hour; a document created again with that _id takes it back. So the
 *    inode of "a.json" survives editors that rename the old file away.
 * 3. A scratch file renamed over an existing document replaces its content and keeps the
 *    document's id; renamed to a new document name it lends the document its own id.
 * 4. Listing order is id order (files first, then documents), so a cookie is an id and a
 *    concurrent insert (a larger id) can only appear after every existing entry.
 * 5. Runs find a collection's documents in id order without an index on docs(coll), which
 *    would be one more B-tree written per document. Invariant: every row of docs with
 *    coll = C has lo <= id <= hi for some row (C, lo, hi) of runs. The runs of one
 *    collection do not overlap; a run may contain ids of other objects (scratch files,
 *    collections, documents of other collections), so scans filter on coll = C. Runs go
 *    only when their collection is dropped or emptied (no document of it is left).
 *    When a document of C gets id N (a new id, a vacated id taken back, a scratch file's
 *    id lent, a document renamed into C): nothing if a run of C holds N; else C's last run
 *    (largest lo) grows to N when it ends below N and no document of another collection
 *    lies between; else (C, N, N) is added. The transaction keeps C's last run in t->run
 *    and writes its row at commit (or when another collection's document comes, or before
 *    its own statements read runs), so a bulk insert costs two compares per document and
 *    one runs row per transaction.
 * 6. Scratch directories, fifos, sockets and hard links (issue 28). An entry inside a
 *    scratch directory (a files row of kind DIR) is named "<dir id>/<name>": a name with a
 *    '/' is never a document name, never listed at the collection's top (the listing skips
 *    them), and a directory's rename changes only its own row. A hard link is a row of its
 *    own whose ino names the row that holds the content and attributes (the inode); a
 *    lookup of the link's name gives the inode's entry with row set to the link's row. An
 *    inode whose own name is removed while links remain is hidden as "0/<id>" (no
 *    directory has id 0) until its last link goes. Documents have no links: one _id, one
 *    name. A directory's link count (2 + the directories in it) is counted when its row is
 *    read (STORE__FILE_LINKS), so no counter has to follow mkdir, rmdir and rename.
 */
#include "store_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VACATED_TTL_NS (3600LL * 1000000000LL)
#define COOKIE_FILES (1ULL << 60)
#define COOKIE_DOCS (1ULL << 61)

/* Splits "<stem>.json" and decodes the stem: 0 and *id set ({"_id": v} in id, initialised
 * here) when name is a document name, DFS_ENOENT when it is a scratch name. */
static int doc_name_decode(const char *name, bson_t *id)
{
	size_t n = strlen(name);

	if (n <= 5 || strcmp(name + n - 5, ".json") != 0)
		return DFS_ENOENT;
	bson_init(id);
	if (store_name_to_id(name, n - 5, id, NULL) != 0) {
		bson_destroy(id);
		return DFS_ENOENT;
	}
	return 0;
}

static int id_value(const bson_t *doc, bson_iter_t *it)
{
	return bson_iter_init_find(it, doc, "_id") ? 0 : DFS_ENOENT;
}

/* Encodes the key of a document's _id into key (reset first) and its file name into name;
 * stem is a scratch buffer. */
static int key_name_encode(const bson_value_t *id, struct dfs_buf *key, struct dfs_buf *stem,
			   char *name, size_t cap, struct dfs_err *err)
{
	int rc;

	dfs_buf_reset(key);
	if ((rc = store_key_append(key, id, false, err)))
		return rc;
	if (key->len > DFS_MAX_KEY_SIZE)
		return dfs_err_set(err, DFS_EINVAL,
				   "_id is %zu bytes as an index key, over the %d-byte limit",
				   key->len, DFS_MAX_KEY_SIZE);
	dfs_buf_reset(stem);
	if ((rc = store_name_from_id(id, stem, err)))
		return rc;
	if (stem->len + 6 > cap)
		return dfs_err_set(err, DFS_ENAMETOOLONG, "_id too long for a file name");
	memcpy(name, stem->data, stem->len);
	memcpy(name + stem->len, ".json", 6);
	return 0;
}

/* Encodes the key and the file name of a document's _id into t->key and name. */
static int doc_key_name(struct store_txn *t, const bson_value_t *id, char *name, size_t cap,
			struct dfs_err *err)
{
	struct dfs_buf stem;
	int rc;

	dfs_buf_init(&stem);
	rc = key_name_encode(id, &t->key, &stem, name, cap, err);
	dfs_buf_release(&stem);
	return rc;
}

int store_doc_rendered_len(const bson_t *doc, struct dfs_buf *scratch, int64_t *size,
			   struct dfs_err *err)
{
	int rc;

	dfs_buf_reset(scratch);
	rc = store_codec_render(doc, STORE_RENDER_PRETTY, scratch, err);
	*size = (int64_t)scratch->len;
	return rc;
}

static void entry_from_doc_row(sqlite3_stmt *st, struct store_entry *e)
{
	const unsigned char *name = sqlite3_column_text(st, 2);

	e->id = sqlite3_column_int64(st, 0);
	e->coll = sqlite3_column_int64(st, 1);
	e->kind = STORE_KIND_DOC;
	snprintf(e->name, sizeof(e->name), "%s", name ? (const char *)name : "");
	e->size = sqlite3_column_int64(st, 3);
	e->mode = (uint32_t)sqlite3_column_int64(st, 4);
	e->uid = (uint32_t)sqlite3_column_int64(st, 5);
	e->gid = (uint32_t)sqlite3_column_int64(st, 6);
	e->mtime_ns = sqlite3_column_int64(st, 7);
	e->ctime_ns = sqlite3_column_int64(st, 8);
	e->atime_ns = sqlite3_column_int64(st, 9);
	e->ino = 0;
	e->nlink = 1;
	e->row = e->id;
	e->rdev = 0;
	e->subdirs = 0;
}

static void entry_from_file_row(sqlite3_stmt *st, struct store_entry *e)
{
	const unsigned char *name = sqlite3_column_text(st, 2);

	e->id = sqlite3_column_int64(st, 0);
	e->coll = sqlite3_column_int64(st, 1);
	snprintf(e->name, sizeof(e->name), "%s", name ? (const char *)name : "");
	e->kind = sqlite3_column_int(st, 3);
	e->size = sqlite3_column_int64(st, 4);
	e->mode = (uint32_t)sqlite3_column_int64(st, 5);
	e->uid = (uint32_t)sqlite3_column_int64(st, 6);
	e->gid = (uint32_t)sqlite3_column_int64(st, 7);
	e->mtime_ns = sqlite3_column_int64(st, 8);
	e->ctime_ns = sqlite3_column_int64(st, 9);
	e->atime_ns = sqlite3_column_int64(st, 10);
	e->ino = sqlite3_column_int64(st, 11); /* 0: its own (NULL) */
	e->nlink = (uint32_t)sqlite3_column_int64(st, 12);
	e->subdirs = (uint32_t)sqlite3_column_int64(st, 13);
	e->row = e->id;
	e->rdev = 0;
	if (e->kind == STORE_KIND_CHR || e->kind == STORE_KIND_BLK) {
		e->rdev = (uint64_t)e->size; /* STORE__FILE_SIZE */
		e->size = 0;
	}
}

/* Runs a one-row lookup statement already bound; 0 with *e filled, DFS_ENOENT, or error. */
static int row_lookup(struct store_txn *t, sqlite3_stmt *st, bool doc, struct store_entry *e,
		      struct dfs_err *err)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		if (doc)
			entry_from_doc_row(st, e);
		else
			entry_from_file_row(st, e);
		sqlite3_reset(st);
		return 0;
	}
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "lookup", err);
	return DFS_ENOENT;
}

static int doc_by_key(struct store_txn *t, int64_t coll, const struct dfs_buf *key,
		      struct store_entry *e, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_DOC_BY_KEY, err);

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_blob(st, 2, key->data, (int)key->len, SQLITE_STATIC);
	return row_lookup(t, st, true, e, err);
}

static int by_id(struct store_txn *t, enum store__st which, int64_t id, struct store_entry *e,
		 struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, which, err);

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	return row_lookup(t, st, which == ST_DOC_BY_ID, e, err);
}

/* note 6: e (a files row just read) as the entry its name stands for: a hard link's row
 * gives its inode's attributes and id, keeping its own name, collection and row. */
static int link_resolve(struct store_txn *t, struct store_entry *e, struct dfs_err *err)
{
	int64_t row = e->id, coll = e->coll;
	char name[sizeof(e->name)];
	int rc;

	if (!e->ino)
		return 0;
	memcpy(name, e->name, sizeof(name));
	if ((rc = by_id(t, ST_FILE_BY_ID, e->ino, e, err)))
		return rc == DFS_ENOENT ? dfs_err_set(err, DFS_ECORRUPT,
						      "hard link %lld: its file %lld is missing",
						      (long long)row, (long long)e->ino)
					: rc;
	memcpy(e->name, name, sizeof(name));
	e->row = row;
	e->coll = coll;
	return 0;
}

int store_entry_lookup(struct store_txn *t, int64_t coll, const char *name, struct store_entry *out,
		       struct dfs_err *err)
{
	bson_t id;
	bson_iter_t it;
	sqlite3_stmt *st;
	int rc;

	if (doc_name_decode(name, &id) == 0) {
		char canon[256];

		bson_iter_init_find(&it, &id, "_id");
		rc = doc_key_name(t, bson_iter_value(&it), canon, sizeof(canon), err);
		bson_destroy(&id);
		if (rc)
			return rc;
		rc = doc_by_key(t, coll, &t->key, out, err);
		if (rc == DFS_ENOENT)
			return dfs_err_set(err, DFS_ENOENT, "no document '%s'", name);
		return rc;
	}
	st = store__stmt(t, ST_FILE_BY_NAME, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	rc = row_lookup(t, st, false, out, err);
	if (rc == DFS_ENOENT)
		return dfs_err_set(err, DFS_ENOENT, "no file '%s'", name);
	return rc ? rc : link_resolve(t, out, err);
}

int store_entry_get(struct store_txn *t, int64_t id, struct store_entry *out, struct dfs_err *err)
{
	int rc = by_id(t, ST_DOC_BY_ID, id, out, err);

	if (rc == DFS_ENOENT && (rc = by_id(t, ST_FILE_BY_ID, id, out, err)) == 0)
		rc = link_resolve(t, out, err);
	if (rc == DFS_ENOENT)
		return dfs_err_set(err, DFS_ENOENT, "entry %lld not found", (long long)id);
	return rc;
}

int store_doc_get(struct store_txn *t, int64_t id, bson_t *out, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_DOC_BSON, err);
	const uint8_t *data;
	int rc, n;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return dfs_err_set(err, DFS_ENOENT, "document %lld not found", (long long)id);
	if (rc != SQLITE_ROW)
		return store__sqlerr(t, rc, "read document", err);
	data = sqlite3_column_blob(st, 0);
	n = sqlite3_column_bytes(st, 0);
	if (n < 5 || !bson_init_static(out, data, (size_t)n)) {
		sqlite3_reset(st);
		return dfs_err_set(err, DFS_ECORRUPT, "document %lld is not valid BSON",
				   (long long)id);
	}
	/* The blob dies at the next step: copy it out of the static view. */
	{
		bson_t view = *out;

		bson_copy_to(&view, out);
	}
	sqlite3_reset(st);
	return 0;
}

int store_entry_read(struct store_txn *t, int64_t id, struct dfs_buf *out, struct dfs_err *err)
{
	struct store_entry e;
	sqlite3_stmt *st;
	int rc;

	if ((rc = store_entry_get(t, id, &e, err)))
		return rc;
	if (e.kind == STORE_KIND_DOC) {
		bson_t doc;

		if ((rc = store_doc_get(t, id, &doc, err)))
			return rc;
		rc = store_codec_render(&doc, STORE_RENDER_PRETTY, out, err);
		bson_destroy(&doc);
		return rc;
	}
	st = store__stmt(t, ST_FILE_DATA, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, e.id); /* a hard link's content is its inode's (note 6) */
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		return store__sqlerr(t, rc, "read file", err);
	dfs_buf_append(out, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0));
	sqlite3_reset(st);
	return 0;
}

int store_entry_list(struct store_txn *t, int64_t coll, uint64_t cookie,
		     int (*cb)(void *ctx, const struct store_entry *e, uint64_t next), void *ctx,
		     struct dfs_err *err)
{
	static const enum store__st phases[2] = {ST_FILE_LIST, ST_DOC_LIST};
	static const uint64_t bases[2] = {COOKIE_FILES, COOKIE_DOCS};
	int phase = cookie >= COOKIE_DOCS ? 1 : 0;
	int64_t after = cookie >= bases[phase] ? (int64_t)(cookie - bases[phase]) : 0;
	int flushed = t->write ? store__run_flush(t, err) : 0;

	if (flushed)
		return flushed;
	for (; phase < 2; phase++, after = 0) {
		for (;;) {
			sqlite3_stmt *st = store__stmt(t, phases[phase], err);
			struct store_entry e;
			int rc, n = 0;

			if (!st)
				return err ? err->code : DFS_EIO;
			sqlite3_bind_int64(st, 1, coll);
			sqlite3_bind_int64(st, 2, after);
			while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
				if (phase == 1)
					entry_from_doc_row(st, &e);
				else
					entry_from_file_row(st, &e);
				after = e.id;
				n++;
				/* A hidden file (note 6) has no name to list. */
				if (phase == 0 && !strncmp(e.name, "0/", 2))
					continue;
				if (phase == 0 && (rc = link_resolve(t, &e, err))) {
					sqlite3_reset(st);
					return rc;
				}
				rc = cb(ctx, &e, bases[phase] + (uint64_t)after);
				if (rc) {
					sqlite3_reset(st);
					return rc;
				}
			}
			if (rc != SQLITE_DONE)
				return store__sqlerr(t, rc, "list", err);
			if (n < 256)
				break;
		}
	}
	return 0;
}

/*
 * ObjectIds for documents without _id come from a context of our own: libbson's default one
 * calls getpid() for every id (a system call, 7% of a bulk insert) to notice a fork. This one
 * caches the pid, and a fork handler drops it in the child (which then draws new random
 * bytes), so a daemonized mount never repeats its parent's ids.
 */
static pthread_mutex_t oid_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(bson_context_t *) oid_ctx;

static void oid_fork_prepare(void)
{
	pthread_mutex_lock(&oid_lock);
}

static void oid_fork_parent(void)
{
	pthread_mutex_unlock(&oid_lock);
}

static void oid_fork_child(void)
{
	/* The parent's context is left allocated: only its randomness must not be reused. */
	atomic_store(&oid_ctx, NULL);
	pthread_mutex_unlock(&oid_lock);
}

static bson_context_t *oid_context(void)
{
	static bool registered;
	bson_context_t *c = atomic_load(&oid_ctx);

	if (c)
		return c;
	pthread_mutex_lock(&oid_lock);
	c = atomic_load(&oid_ctx);
	if (!c) {
		if (!registered &&
		    pthread_atfork(oid_fork_prepare, oid_fork_parent, oid_fork_child) == 0)
			registered = true;
		/* Without the fork handler, fall back to libbson's pid-checking default. */
		c = registered ? bson_context_new(BSON_CONTEXT_NONE) : bson_context_get_default();
		atomic_store(&oid_ctx, c);
	}
	pthread_mutex_unlock(&oid_lock);
	return c;
}

int store_doc_prepare(const bson_t *doc, const bson_value_t *id_from, bson_t *out,
		      struct dfs_err *err)
{
	bson_iter_t it;
	bson_oid_t oid;
	bool has_id;
	int rc;

	if ((rc = store_doc_validate(doc, err)))
		return rc;
	has_id = id_value(doc, &it) == 0;
	if (has_id && id_from && store_value_compare(bson_iter_value(&it), id_from) != 0) {
		struct dfs_buf a, b;

		dfs_buf_init(&a);
		dfs_buf_init(&b);
		store_codec_render_value(bson_iter_value(&it), &a, NULL);
		store_codec_render_value(id_from, &b, NULL);
		rc = dfs_err_set(err, DFS_EINVAL, "_id %s differs from the file name's _id %s",
				 a.data ? a.data : "?", b.data ? b.data : "?");
		dfs_buf_release(&a);
		dfs_buf_release(&b);
		return rc;
	}
	bson_init(out);
	if (has_id) {
		bson_append_value(out, "_id", 3, bson_iter_value(&it));
	} else if (id_from) {
		bson_append_value(out, "_id", 3, id_from);
	} else {
		bson_oid_init(&oid, oid_context());
		bson_append_oid(out, "_id", 3, &oid);
	}
	bson_iter_init(&it, doc);
	while (bson_iter_next(&it)) {
		if (strcmp(bson_iter_key(&it), "_id") == 0)
			continue;
		bson_append_iter(out, bson_iter_key(&it), (int)bson_iter_key_len(&it), &it);
	}
	if (out->len > DFS_MAX_DOC_SIZE) {
		bson_destroy(out);
		return dfs_err_set(err, DFS_EFBIG, "document is %u bytes, over the 16 MiB limit",
				   out->len);
	}
	return 0;
}

/* True when coll has no vacated id younger than the TTL; then, until this transaction puts
 * one there, no insert into coll needs to look (a bulk insert skips a lookup per document). */
static int vacated_none(struct store_txn *t, int64_t coll, int64_t now, bool *none,
			struct dfs_err *err)
{
	sqlite3_stmt *st;
	int rc;

	*none = t->vac_none == coll;
	if (*none)
		return 0;
	st = store__stmt(t, ST_VAC_ANY, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_int64(st, 2, now - VACATED_TTL_NS);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "vacated ids", err);
	*none = rc == SQLITE_DONE;
	if (*none)
		t->vac_none = coll;
	return 0;
}

/* Takes a vacated id back for (coll, key) when there is one, else a new id. */
static int doc_id_for(struct store_txn *t, int64_t coll, int64_t *id, struct dfs_err *err)
{
	sqlite3_stmt *st;
	int64_t now = store__now_ns();
	bool none;
	int rc;

	if ((rc = vacated_none(t, coll, now, &none, err)))
		return rc;
	if (none)
		return store__new_id(t, id, err);
	st = store__stmt(t, ST_VAC_GET, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_blob(st, 2, t->key.data, (int)t->key.len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now - VACATED_TTL_NS);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		struct store_entry e;

		*id = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
		st = store__stmt(t, ST_VAC_DEL, err);
		if (!st)
			return err ? err->code : DFS_EIO;
		sqlite3_bind_int64(st, 1, coll);
		sqlite3_bind_blob(st, 2, t->key.data, (int)t->key.len, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, now - VACATED_TTL_NS);
		if (sqlite3_step(st) != SQLITE_DONE)
			return store__sqlerr(t, sqlite3_errcode(t->c->h), "vacated ids", err);
		/* The id must be free: it is, unless something took it meanwhile. */
		if (store_entry_get(t, *id, &e, NULL) != 0)
			return 0;
	} else if (rc != SQLITE_DONE) {
		return store__sqlerr(t, rc, "vacated ids", err);
	}
	return store__new_id(t, id, err);
}

/* ---- runs (note 5) ------------------------------------------------------------------- */

static int run_put(struct store_txn *t, int64_t coll, int64_t lo, int64_t hi, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_RUN_PUT, err);

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_int64(st, 2, lo);
	sqlite3_bind_int64(st, 3, hi);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store__sqlerr(t, sqlite3_errcode(t->c->h), "write runs", err);
	return 0;
}

/* The run of coll with the largest lo <= at (INT64_MAX: the last run): *found false when
 * there is none. */
static int run_get(struct store_txn *t, int64_t coll, int64_t at, int64_t *lo, int64_t *hi,
		   bool *found, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, at == INT64_MAX ? ST_RUN_LAST : ST_RUN_AT, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	if (at != INT64_MAX)
		sqlite3_bind_int64(st, 2, at);
	rc = sqlite3_step(st);
	*found = rc == SQLITE_ROW;
	if (*found) {
		*lo = sqlite3_column_int64(st, 0);
		*hi = sqlite3_column_int64(st, 1);
		sqlite3_reset(st);
		return 0;
	}
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "read runs", err);
	return 0;
}

int store__run_flush(struct store_txn *t, struct dfs_err *err)
{
	struct store__run *r = &t->run;

	if (!r->dirty || r->hi < r->lo)
		return 0;
	return run_put(t, r->coll, r->lo, r->hi, err);
}

void store__run_forget(struct store_txn *t, int64_t coll)
{
	if (t->run.coll == coll)
		memset(&t->run, 0, sizeof(t->run));
}

/* Makes t->run the last run of coll, writing the one it held. */
static int run_load(struct store_txn *t, int64_t coll, struct dfs_err *err)
{
	struct store__run *r = &t->run;
	bool found;
	int rc;

	if ((rc = store__run_flush(t, err)))
		return rc;
	memset(r, 0, sizeof(*r));
	if ((rc = run_get(t, coll, INT64_MAX, &r->lo, &r->hi, &found, err)))
		return rc;
	if (!found) {
		r->lo = 0;
		r->hi = -1;
	}
	r->coll = coll;
	return 0;
}

/* The slow path of store__run_note: another collection, a gap, or an id below the last run. */
static int run_note_slow(struct store_txn *t, int64_t coll, int64_t id, struct dfs_err *err)
{
	struct store__run *r = &t->run;
	int64_t lo, hi;
	bool found;
	int rc;

	if (r->coll != coll && (rc = run_load(t, coll, err)))
		return rc;
	if (id >= r->lo && id <= r->hi)
		return 0;
	if (r->hi >= r->lo && id > r->hi) {
		/* Grow the last run over the gap unless another collection's document is in it:
		 * its scans would read that document only to skip it. */
		sqlite3_stmt *st = store__stmt(t, ST_RUN_GAP, err);

		if (!st)
			return err ? err->code : DFS_EIO;
		sqlite3_bind_int64(st, 1, r->hi);
		sqlite3_bind_int64(st, 2, id);
		sqlite3_bind_int64(st, 3, coll);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc == SQLITE_DONE) {
			r->hi = id;
			r->dirty = true;
			return 0;
		}
		if (rc != SQLITE_ROW)
			return store__sqlerr(t, rc, "read documents", err);
	}
	if (r->hi < r->lo || id > r->hi) {
		/* A new last run. */
		if ((rc = store__run_flush(t, err)))
			return rc;
		r->lo = r->hi = id;
		r->dirty = true;
		return 0;
	}
	/* Below the last run: inside an earlier one, or a run of its own between two. */
	if ((rc = run_get(t, coll, id, &lo, &hi, &found, err)))
		return rc;
	if (found && id <= hi)
		return 0;
	return run_put(t, coll, id, id, err);
}

int store__run_note(struct store_txn *t, int64_t coll, int64_t id, struct dfs_err *err)
{
	struct store__run *r = &t->run;

	if (r->coll == coll && id > r->lo && id <= r->hi + 1) {
		if (id > r->hi) {
			r->hi = id;
			r->dirty = true;
		}
		return 0;
	}
	return run_note_slow(t, coll, id, err);
}

/* Checks (once per transaction and collection) that coll exists: a collection dropped
 * while a file in it was open must not get orphan rows. */
static int coll_exists(struct store_txn *t, int64_t coll, struct dfs_err *err)
{
	struct store_coll c;
	int rc;

	if (t->coll_ok == coll)
		return 0;
	if ((rc = store_coll_by_id(t, coll, &c, err)))
		return rc;
	t->coll_ok = coll;
	return 0;
}

/* Inserts doc (prepared) with a given id, or a fresh one when id is 0: the row, its index
 * entries and the change. t->key holds the key of its _id, name its file name and size its
 * rendered length. */
static int doc_insert_row(struct store_txn *t, int64_t coll, const bson_t *doc, int64_t id,
			  int64_t size, const char *name, const struct store_attrs *a,
			  struct store_entry *out, struct dfs_err *err)
{
	bson_iter_t it;
	sqlite3_stmt *st;
	int64_t now = store__now_ns(), ref;
	int rc;

	if ((rc = store__space_check(t, err)) || (rc = coll_exists(t, coll, err)))
		return rc;
	if ((rc = store__validate(t, coll, doc, 0, err)))
		return rc;
	if (!id && (rc = doc_id_for(t, coll, &id, err)))
		return rc;
	if ((rc = store__ix_prepare(t, 0, coll, id, doc, err)))
		return rc;
	/* The run first: whatever fails after it, a row of docs is never outside the runs. */
	if ((rc = store__run_note(t, coll, id, err)) || (rc = store__ev_next(t, &ref, err)))
		return rc;
	st = store__stmt(t, ST_DOC_INSERT, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, coll);
	sqlite3_bind_blob(st, 3, t->key.data, (int)t->key.len, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, size);
	sqlite3_bind_int64(st, 6, a->mode & 07777);
	sqlite3_bind_int64(st, 7, a->uid);
	sqlite3_bind_int64(st, 8, a->gid);
	sqlite3_bind_int64(st, 9, a->mtime_ns ? a->mtime_ns : now);
	sqlite3_bind_blob(st, 10, bson_get_data(doc), (int)doc->len, SQLITE_STATIC);
	/* ctime is always now, whatever mtime the caller keeps: snapshots trust it. */
	sqlite3_bind_int64(st, 11, now);
	if (ref) /* the insert event below (changes.c note 6) */
		sqlite3_bind_int64(st, 12, ref);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		if ((rc & 0xff) == SQLITE_CONSTRAINT) {
			struct dfs_buf v;

			dfs_buf_init(&v);
			if (id_value(doc, &it) == 0)
				store_codec_render_value(bson_iter_value(&it), &v, NULL);
			rc = dfs_err_set(err, DFS_EEXIST, "duplicate _id %s in '%s'",
					 v.data ? v.data : "?", name);
			dfs_buf_release(&v);
			sqlite3_reset(st);
			return rc;
		}
		return store__sqlerr(t, rc, "insert document", err);
	}
	if ((rc = store__ix_apply(t, err)))
		return rc;
	{
		struct store__perm pm = {id, a->mode & 07777, a->uid, a->gid, size};

		if ((rc = store__ev_doc(t, STORE_EV_INSERT, coll, &pm, NULL, doc, ref, err)))
			return rc;
	}
	{
		bool capped;

		if ((rc = store__capped_is(t, coll, &capped, err)))
			return rc;
		if (capped && (rc = store__capped_note(t, coll, 1, doc->len, id, err)))
			return rc;
	}
	if (t->inserts_logged != coll) {
		if ((rc = store__change(t, coll, STORE_CH_INSERTS, 0, NULL, err)))
			return rc;
		t->inserts_logged = coll;
	}
	if (out) {
		out->id = id;
		out->coll = coll;
		out->kind = STORE_KIND_DOC;
		out->mode = a->mode & 07777;
		out->uid = a->uid;
		out->gid = a->gid;
		out->size = size;
		out->mtime_ns = a->mtime_ns ? a->mtime_ns : now;
		out->atime_ns = out->mtime_ns;
		out->ctime_ns = now;
		out->nlink = 1;
		out->subdirs = 0;
		out->row = id;
		out->ino = 0;
		snprintf(out->name, sizeof(out->name), "%s", name);
	}
	return 0;
}

/* Inserts doc (prepared) with a given id, or a fresh one when id is 0. */
static int doc_insert(struct store_txn *t, int64_t coll, const bson_t *doc, int64_t id,
		      const struct store_attrs *a, struct store_entry *out, struct dfs_err *err)
{
	char name[256];
	bson_iter_t it;
	int64_t size;
	int rc;

	if (id_value(doc, &it))
		return dfs_err_set(err, DFS_EINVAL, "document has no _id");
	if ((rc = coll_exists(t, coll, err)))
		return rc;
	if ((rc = doc_key_name(t, bson_iter_value(&it), name, sizeof(name), err)))
		return rc;
	if ((rc = store_doc_rendered_len(doc, &t->scratch, &size, err)))
		return rc;
	return doc_insert_row(t, coll, doc, id, size, name, a, out, err);
}

int store_doc_insert(struct store_txn *t, int64_t coll, const bson_t *doc,
		     const struct store_attrs *a, struct store_entry *out, struct dfs_err *err)
{
	return doc_insert(t, coll, doc, 0, a, out, err);
}

int store_doc_ready_fill(const bson_t *doc, struct dfs_buf *scratch, struct store_doc_ready *r,
			 struct dfs_err *err)
{
	bson_iter_t it;
	int rc;

	if (id_value(doc, &it))
		return dfs_err_set(err, DFS_EINVAL, "document has no _id");
	if ((rc = store_doc_rendered_len(doc, scratch, &r->size, err)))
		return rc;
	return key_name_encode(bson_iter_value(&it), &r->key, scratch, r->name, sizeof(r->name),
			       err);
}

int store_doc_insert_ready(struct store_txn *t, int64_t coll, const bson_t *doc,
			   const struct store_doc_ready *r, const struct store_attrs *a,
			   struct store_entry *out, struct dfs_err *err)
{
	dfs_buf_reset(&t->key);
	dfs_buf_append(&t->key, r->key.data, r->key.len);
	return doc_insert_row(t, coll, doc, 0, r->size, r->name, a, out, err);
}

/* Replaces the BSON of document row e (same _id) and records the change. */
/* Replaces e's document with doc; mtime_ns 0 means now (ctime is always now). */
static int doc_update(struct store_txn *t, struct store_entry *e, const bson_t *doc,
		      int64_t mtime_ns, struct dfs_err *err)
{
	sqlite3_stmt *st;
	int64_t size, now = store__now_ns(), oldlen = 0, ref = 0;
	bool capped, as_update = t->ev_update && t->ev_old;
	int rc;

	if ((rc = store__space_check(t, err)) ||
	    (rc = store_doc_rendered_len(doc, &t->scratch, &size, err)))
		return rc;
	if ((rc = store__validate(t, e->coll, doc, e->id, err)))
		return rc;
	if ((rc = store__capped_is(t, e->coll, &capped, err)))
		return rc;
	if (capped && (rc = store__doc_bson_len(t, e->id, &oldlen, err)))
		return rc;
	if ((rc = store__ix_prepare(t, e->coll, e->coll, e->id, doc, err)))
		return rc;
	/* The version an insert or replace event shows is kept; a replace event shows the new
	 * one (changes.c note 6). */
	if ((rc = store__ev_keep_doc(t, e->id, err)) ||
	    (!as_update && (rc = store__ev_next(t, &ref, err))))
		return rc;
	st = store__stmt(t, ST_DOC_UPDATE, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, e->id);
	sqlite3_bind_int64(st, 2, size);
	sqlite3_bind_int64(st, 3, now);
	sqlite3_bind_blob(st, 4, bson_get_data(doc), (int)doc->len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, mtime_ns ? mtime_ns : now);
	if (ref)
		sqlite3_bind_int64(st, 6, ref);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "update document", err);
	if ((rc = store__ix_apply(t, err)))
		return rc;
	if (capped && (rc = store__capped_note(t, e->coll, 0, (int64_t)doc->len - oldlen, e->id,
					       err)))
		return rc;
	e->size = size;
	e->mtime_ns = mtime_ns ? mtime_ns : now;
	e->ctime_ns = now;
	{
		struct store__perm pm = {e->id, e->mode, e->uid, e->gid, size};

		rc = store__ev_doc(t, as_update ? STORE_EV_UPDATE : STORE_EV_REPLACE, e->coll, &pm,
				   as_update ? t->ev_old : NULL, doc, ref, err);
		t->ev_update = false;
		t->ev_old = NULL;
		if (rc)
			return rc;
	}
	return store__change(t, e->coll, STORE_CH_PUT, e->id, e->name, err);
}

/* Parses and prepares the text of a document file named name ("<stem>.json"). */
static int doc_from_text(const char *name, const char *text, size_t len, bson_t *out,
			 struct dfs_err *err)
{
	bson_t id, parsed;
	bson_iter_t it;
	int rc;

	if (doc_name_decode(name, &id) != 0)
		return dfs_err_set(err, DFS_EINVAL, "'%s' is not a document name", name);
	bson_init(&parsed);
	rc = store_codec_parse_doc(text, len, &parsed, err);
	if (rc == DFS_EINCOMPLETE)
		rc = dfs_err_set(err, DFS_EINVAL, "%s", err ? err->msg : "incomplete document");
	if (!rc) {
		bson_iter_init_find(&it, &id, "_id");
		rc = store_doc_prepare(&parsed, bson_iter_value(&it), out, err);
	}
	bson_destroy(&parsed);
	bson_destroy(&id);
	return rc;
}

int store_doc_write_text(struct store_txn *t, int64_t coll, const char *name, const char *text,
			 size_t len, const struct store_attrs *a, struct store_entry *out,
			 struct dfs_err *err)
{
	struct store_entry e;
	bson_t doc;
	bson_iter_t it;
	char canon[256];
	int rc;

	if ((rc = doc_from_text(name, text, len, &doc, err)))
		return rc;
	bson_iter_init_find(&it, &doc, "_id");
	rc = doc_key_name(t, bson_iter_value(&it), canon, sizeof(canon), err);
	if (!rc) {
		rc = doc_by_key(t, coll, &t->key, &e, err);
		if (rc == 0) {
			rc = doc_update(t, &e, &doc, 0, err);
			if (!rc && out)
				*out = e;
		} else if (rc == DFS_ENOENT) {
			rc = doc_insert(t, coll, &doc, 0, a, out, err);
		}
	}
	bson_destroy(&doc);
	return rc;
}

static int row_delete(struct store_txn *t, const struct store_entry *e, struct dfs_err *err)
{
	sqlite3_stmt *st;
	int64_t len = 0;
	bool capped = false;
	int rc;

	if (e->kind == STORE_KIND_DOC) {
		if ((rc = store__capped_is(t, e->coll, &capped, err)))
			return rc;
		if (capped && (rc = store__doc_bson_len(t, e->id, &len, err)))
			return rc;
	}
	if (e->kind == STORE_KIND_DOC) {
		bson_t old;

		if ((rc = store_doc_get(t, e->id, &old, err)))
			return rc;
		struct store__perm pm = {e->id, e->mode, e->uid, e->gid, 0};

		rc = store__ev_doc(t, STORE_EV_DELETE, e->coll, &pm, NULL, &old, 0, err);
		bson_destroy(&old);
		if (rc)
			return rc;
	}
	if (e->kind == STORE_KIND_DOC && ((rc = store__ix_prepare(t, e->coll, 0, e->id, NULL, err)) ||
					  (rc = store__ev_keep_doc(t, e->id, err))))
		return rc;
	st = store__stmt(t, e->kind == STORE_KIND_DOC ? ST_DOC_DELETE : ST_FILE_DELETE, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, e->id);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "delete", err);
	if (e->kind == STORE_KIND_DOC && (rc = store__ix_apply(t, err)))
		return rc;
	if (capped && (rc = store__capped_note(t, e->coll, -1, -len, 0, err)))
		return rc;
	return store__change(t, e->coll, STORE_CH_DEL, e->id, e->name, err);
}

/* Removes the name e stands for (e->row; note 6): a hard link's row, and its inode once
 * hidden and unnamed; an inode that still has links is hidden, not deleted. */
static int name_remove(struct store_txn *t, const struct store_entry *e, struct dfs_err *err)
{
	struct store_entry r, ino;
	sqlite3_stmt *st;
	int rc;

	if (e->kind == STORE_KIND_DOC)
		return row_delete(t, e, err);
	if ((rc = by_id(t, ST_FILE_BY_ID, e->row, &r, err)))
		return rc;
	if (r.ino) {
		if ((rc = row_delete(t, &r, err)))
			return rc;
		if ((rc = by_id(t, ST_FILE_BY_ID, r.ino, &ino, err)))
			return rc == DFS_ENOENT ? 0 : rc;
		if (ino.nlink == 0) /* hidden, and this was its last name */
			return row_delete(t, &ino, err);
		st = store__stmt(t, ST_FILE_TOUCH, err); /* its link count changed */
		if (!st)
			return err ? err->code : DFS_EIO;
		sqlite3_bind_int64(st, 1, ino.id);
		sqlite3_bind_null(st, 2);
		sqlite3_bind_int64(st, 3, store__now_ns());
		rc = sqlite3_step(st);
		if (rc != SQLITE_DONE)
			return store__sqlerr(t, rc, "unlink", err);
		return store__change(t, ino.coll, STORE_CH_PUT, ino.id, ino.name, err);
	}
	if (r.nlink <= 1)
		return row_delete(t, &r, err);
	st = store__stmt(t, ST_FILE_HIDE, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, r.id);
	sqlite3_bind_int64(st, 2, store__now_ns());
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "unlink", err);
	return store__change(t, r.coll, STORE_CH_DEL, r.id, r.name, err);
}

int store_entry_delete(struct store_txn *t, int64_t id, struct dfs_err *err)
{
	struct store_entry e;
	int rc;

	if ((rc = by_id(t, ST_DOC_BY_ID, id, &e, err)) == DFS_ENOENT)
		rc = by_id(t, ST_FILE_BY_ID, id, &e, err);
	if (rc == DFS_ENOENT)
		return dfs_err_set(err, DFS_ENOENT, "entry %lld not found", (long long)id);
	if (rc)
		return rc;
	return name_remove(t, &e, err);
}

int store_file_link(struct store_txn *t, int64_t id, int64_t coll, const char *name,
		    struct store_entry *out, struct dfs_err *err)
{
	struct store_entry e;
	sqlite3_stmt *st;
	int64_t row;
	bson_t idv;
	const char *base = strrchr(name, '/');
	int rc;

	if ((rc = store_entry_get(t, id, &e, err)))
		return rc;
	if (e.kind == STORE_KIND_DOC || doc_name_decode(name, &idv) == 0) {
		if (e.kind != STORE_KIND_DOC)
			bson_destroy(&idv);
		return dfs_err_set(err, DFS_EPERM,
				   "a document has one name, its _id (hard links are for scratch "
				   "files)");
	}
	if (e.kind == STORE_KIND_DIR)
		return dfs_err_set(err, DFS_EPERM, "directories have no hard links");
	if (strlen(base ? base + 1 : name) > 255)
		return dfs_err_set(err, DFS_ENAMETOOLONG, "file name too long");
	if ((rc = coll_exists(t, coll, err)) || (rc = store__new_id(t, &row, err)))
		return rc;
	st = store__stmt(t, ST_FILE_LINK, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, row);
	sqlite3_bind_int64(st, 2, coll);
	sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, e.kind);
	sqlite3_bind_int64(st, 5, e.id);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		if ((rc & 0xff) == SQLITE_CONSTRAINT) {
			sqlite3_reset(st);
			return dfs_err_set(err, DFS_EEXIST, "file '%s' exists", name);
		}
		return store__sqlerr(t, rc, "link", err);
	}
	st = store__stmt(t, ST_FILE_TOUCH, err); /* its link count changed */
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, e.id);
	sqlite3_bind_null(st, 2);
	sqlite3_bind_int64(st, 3, store__now_ns());
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "link", err);
	if ((rc = store__change(t, coll, STORE_CH_PUT, e.id, name, err)))
		return rc;
	if (out && (rc = store_entry_lookup(t, coll, name, out, err)))
		return rc;
	return 0;
}

int store_file_touch(struct store_txn *t, int64_t id, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_FILE_TOUCH, err);
	int64_t now = store__now_ns();
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, now);
	sqlite3_bind_int64(st, 3, now);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "touch directory", err);
	if (sqlite3_changes(t->c->h) == 0) /* removed meanwhile: nothing can be made in it */
		return dfs_err_set(err, DFS_ENOENT, "directory %lld is gone", (long long)id);
	return 0;
}

int store_dir_any(struct store_txn *t, int64_t coll, int64_t dir, bool *any, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_FILE_IN_DIR, err);
	char lo[32], hi[32];
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	snprintf(lo, sizeof(lo), "%lld/", (long long)dir);
	snprintf(hi, sizeof(hi), "%lld0", (long long)dir); /* '0' follows '/' */
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_text(st, 2, lo, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, hi, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	*any = rc == SQLITE_ROW;
	sqlite3_reset(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : store__sqlerr(t, rc, "directory", err);
}

static int file_insert(struct store_txn *t, int64_t coll, const char *name, int kind, int64_t id,
		       const struct store_attrs *a, const void *data, size_t len,
		       struct store_entry *out, struct dfs_err *err)
{
	sqlite3_stmt *st;
	int64_t now = store__now_ns();
	int rc;

	if (strlen(strrchr(name, '/') ? strrchr(name, '/') + 1 : name) > 255)
		return dfs_err_set(err, DFS_ENAMETOOLONG, "file name too long");
	if ((rc = coll_exists(t, coll, err)))
		return rc;
	if (!id && (rc = store__new_id(t, &id, err)))
		return rc;
	st = store__stmt(t, ST_FILE_INSERT, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, coll);
	sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, kind);
	sqlite3_bind_int64(st, 5, a->mode & 07777);
	sqlite3_bind_int64(st, 6, a->uid);
	sqlite3_bind_int64(st, 7, a->gid);
	sqlite3_bind_int64(st, 8, a->mtime_ns ? a->mtime_ns : now);
	sqlite3_bind_blob(st, 9, len ? data : "", (int)len, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		if ((rc & 0xff) == SQLITE_CONSTRAINT) {
			sqlite3_reset(st);
			return dfs_err_set(err, DFS_EEXIST, "file '%s' exists", name);
		}
		return store__sqlerr(t, rc, "create file", err);
	}
	if ((rc = store__change(t, coll, STORE_CH_PUT, id, name, err)))
		return rc;
	if (out) {
		out->id = id;
		out->coll = coll;
		out->kind = kind;
		out->mode = a->mode & 07777;
		out->uid = a->uid;
		out->gid = a->gid;
		out->size = (int64_t)len;
		out->mtime_ns = out->ctime_ns = a->mtime_ns ? a->mtime_ns : now;
		out->atime_ns = out->mtime_ns;
		out->nlink = 1;
		out->subdirs = 0;
		out->row = id;
		out->ino = 0;
		snprintf(out->name, sizeof(out->name), "%s", name);
	}
	return 0;
}

int store_file_create(struct store_txn *t, int64_t coll, const char *name, int kind,
		      const struct store_attrs *a, const void *data, size_t len,
		      struct store_entry *out, struct dfs_err *err)
{
	bson_t id;
	int rc;

	if (doc_name_decode(name, &id) == 0) {
		bson_destroy(&id);
		return dfs_err_set(err, DFS_EINVAL, "'%s' is a document name", name);
	}
	if ((rc = store__space_check(t, err)))
		return rc;
	return file_insert(t, coll, name, kind, 0, a, data, len, out, err);
}

int store_file_write(struct store_txn *t, int64_t id, const void *data, size_t len,
		     struct dfs_err *err)
{
	struct store_entry e;
	sqlite3_stmt *st;
	int rc;

	if ((rc = by_id(t, ST_FILE_BY_ID, id, &e, err)))
		return rc == DFS_ENOENT ? dfs_err_set(err, rc, "file %lld not found", (long long)id)
					: rc;
	if ((int64_t)len > e.size && (rc = store__space_check(t, err)))
		return rc;
	st = store__stmt(t, ST_FILE_WRITE, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_blob(st, 2, len ? data : "", (int)len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, store__now_ns());
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "write file", err);
	return store__change(t, e.coll, STORE_CH_PUT, id, e.name, err);
}

/* Finds whatever is called name in coll, unless it is the name of row keep. */
static int clear_target(struct store_txn *t, int64_t coll, const char *name, int64_t keep,
			struct store_entry *found, bool *had, struct dfs_err *err)
{
	int rc = store_entry_lookup(t, coll, name, found, NULL);

	*had = false;
	if (rc == DFS_ENOENT)
		return 0;
	if (rc)
		return store_entry_lookup(t, coll, name, found, err);
	if (found->row == keep)
		return 0;
	*had = true;
	return 0;
}

int store_entry_rename(struct store_txn *t, int64_t id, int64_t newcoll, const char *newname,
		       struct store_entry *out, struct dfs_err *err)
{
	struct store_entry src, dst;
	bool had, to_doc;
	int64_t row;
	bson_t idv;
	int rc;

	/* id may be a hard link's row: the name moves, the file is its inode (note 6) */
	if ((rc = store_entry_get(t, id, &src, err)))
		return rc;
	row = src.row;
	id = src.id;
	to_doc = doc_name_decode(newname, &idv) == 0;
	if (to_doc)
		bson_destroy(&idv);
	if ((rc = clear_target(t, newcoll, newname, row, &dst, &had, err)))
		return rc;
	if (to_doc && (src.row != src.id || src.nlink > 1)) /* a link's row, or a linked file */
		return dfs_err_set(err, DFS_EPERM,
				   "'%s' has hard links: a document has one name, its _id",
				   src.name);
	if (had && dst.id == id && dst.row != row) {
		/* Two names of one file: rename(2) does nothing. */
		if (out)
			*out = src;
		return 0;
	}
	if (src.kind == STORE_KIND_DOC && to_doc) {
		/* A new _id for the same document: rewrite _id, keep the row. */
		bson_t doc, renamed;
		bson_iter_t it;
		char name[256];
		int64_t size;
		sqlite3_stmt *st;
		bool cap_src, cap_dst;
		int64_t oldlen, ref = 0;
		struct store__perm src_perm = {id, src.mode, src.uid, src.gid, 0};

		/* A capped collection keeps its documents in insertion order and counts
		 * them (capped.c): a document cannot move in or out of one. */
		if ((rc = store__capped_is(t, src.coll, &cap_src, err)) ||
		    (rc = store__capped_is(t, newcoll, &cap_dst, err)))
			return rc;
		if ((cap_src || cap_dst) && src.coll != newcoll)
			return dfs_err_set(err, DFS_EPERM,
					   "'%s': a document cannot move into or out of a capped "
					   "collection",
					   src.name);
		if ((rc = store_doc_get(t, id, &doc, err)))
			return rc;
		/* To a change stream the _id changed: the old document went, a new one came. */
		if ((rc = store__ev_doc(t, STORE_EV_DELETE, src.coll, &src_perm, NULL, &doc, 0,
					err))) {
			bson_destroy(&doc);
			return rc;
		}
		oldlen = (int64_t)doc.len;
		{
			bson_t idn;

			doc_name_decode(newname, &idn);
			bson_iter_init_find(&it, &idn, "_id");
			bson_init(&renamed);
			bson_append_value(&renamed, "_id", 3, bson_iter_value(&it));
			bson_destroy(&idn);
		}
		bson_iter_init(&it, &doc);
		while (bson_iter_next(&it))
			if (strcmp(bson_iter_key(&it), "_id") != 0)
				bson_append_iter(&renamed, bson_iter_key(&it),
						 (int)bson_iter_key_len(&it), &it);
		bson_destroy(&doc);
		if (had && (rc = name_remove(t, &dst, err)))
			goto doc_done;
		bson_iter_init_find(&it, &renamed, "_id");
		if ((rc = doc_key_name(t, bson_iter_value(&it), name, sizeof(name), err)))
			goto doc_done;
		if ((rc = store_doc_rendered_len(&renamed, &t->scratch, &size, err)))
			goto doc_done;
		/* a new _id is a new document to the validator (validator.c) */
		if ((rc = store__validate(t, newcoll, &renamed, 0, err)))
			goto doc_done;
		if ((rc = store__ix_prepare(t, src.coll, newcoll, id, &renamed, err)))
			goto doc_done;
		if (newcoll != src.coll && (rc = store__run_note(t, newcoll, id, err)))
			goto doc_done;
		if ((rc = store__ev_keep_doc(t, id, err)) || (rc = store__ev_next(t, &ref, err)))
			goto doc_done;
		st = store__stmt(t, ST_DOC_RENAME, err);
		if (!st) {
			rc = err ? err->code : DFS_EIO;
			goto doc_done;
		}
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, newcoll);
		sqlite3_bind_blob(st, 3, t->key.data, (int)t->key.len, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 5, size);
		sqlite3_bind_int64(st, 6, store__now_ns());
		sqlite3_bind_blob(st, 7, bson_get_data(&renamed), (int)renamed.len, SQLITE_STATIC);
		if (ref)
			sqlite3_bind_int64(st, 8, ref);
		rc = sqlite3_step(st);
		if (rc != SQLITE_DONE) {
			rc = store__sqlerr(t, rc, "rename document", err);
			goto doc_done;
		}
		if ((rc = store__ix_apply(t, err)))
			goto doc_done;
		src_perm.size = size;
		if ((rc = store__ev_doc(t, STORE_EV_INSERT, newcoll, &src_perm, NULL, &renamed,
					ref, err)))
			goto doc_done;
		if (cap_src && (rc = store__capped_note(t, src.coll, 0,
							(int64_t)renamed.len - oldlen, id, err)))
			goto doc_done;
		rc = store__change(t, src.coll, STORE_CH_DEL, id, src.name, err);
		if (!rc)
			rc = store__change(t, newcoll, STORE_CH_PUT, id, name, err);
	doc_done:
		bson_destroy(&renamed);
		if (!rc && out)
			rc = store_entry_get(t, id, out, err);
		return rc;
	}
	if (src.kind == STORE_KIND_DOC) {
		/* A document becomes a scratch file with its rendered bytes; its id waits in
		 * 'vacated' for the document to come back (note 2). */
		struct dfs_buf text;
		struct store_attrs a = {src.mode, src.uid, src.gid, src.mtime_ns};
		bson_t doc;
		bson_iter_t it;
		char name[256];
		sqlite3_stmt *st;

		dfs_buf_init(&text);
		if ((rc = store_doc_get(t, id, &doc, err)))
			return rc;
		rc = store_codec_render(&doc, STORE_RENDER_PRETTY, &text, err);
		if (!rc) {
			bson_iter_init_find(&it, &doc, "_id");
			rc = doc_key_name(t, bson_iter_value(&it), name, sizeof(name), err);
		}
		bson_destroy(&doc);
		if (!rc && had)
			rc = name_remove(t, &dst, err);
		if (!rc)
			rc = row_delete(t, &src, err);
		if (!rc) {
			st = store__stmt(t, ST_VAC_PUT, err);
			t->vac_none = 0;
			if (!st) {
				rc = err ? err->code : DFS_EIO;
			} else {
				sqlite3_bind_int64(st, 1, src.coll);
				sqlite3_bind_blob(st, 2, t->key.data, (int)t->key.len,
						  SQLITE_STATIC);
				sqlite3_bind_int64(st, 3, id);
				sqlite3_bind_int64(st, 4, store__now_ns());
				rc = sqlite3_step(st);
				rc = rc == SQLITE_DONE ? 0
						       : store__sqlerr(t, rc, "vacated ids", err);
			}
		}
		if (!rc)
			rc = file_insert(t, newcoll, newname, STORE_KIND_FILE, 0, &a, text.data,
					 text.len, out, err);
		dfs_buf_release(&text);
		return rc;
	}
	if (to_doc) {
		/* A scratch file becomes a document: validate its bytes first (note 3). */
		struct dfs_buf text;
		struct store_attrs a = {src.mode, src.uid, src.gid, src.mtime_ns};
		bson_t doc;

		if (src.kind != STORE_KIND_FILE)
			return dfs_err_set(err, DFS_EINVAL,
					   "only a regular file can become document '%s'", newname);
		dfs_buf_init(&text);
		rc = store_entry_read(t, id, &text, err);
		if (!rc)
			rc = doc_from_text(newname, text.data ? text.data : "", text.len, &doc,
					   err);
		dfs_buf_release(&text);
		if (rc)
			return rc;
		rc = row_delete(t, &src, err);
		if (!rc && had && dst.kind == STORE_KIND_DOC) {
			/* The document keeps its id, mode and owner; its mtime is the file's
			 * moved over it, as rename(2) leaves it (rsync -a sets it first). */
			rc = doc_update(t, &dst, &doc, src.mtime_ns, err);
			if (!rc && out)
				*out = dst;
		} else if (!rc) {
			char canon[256];
			bson_iter_t it;
			int64_t newid = id;

			bson_iter_init_find(&it, &doc, "_id");
			rc = doc_key_name(t, bson_iter_value(&it), canon, sizeof(canon), err);
			if (!rc) {
				/* Prefer the id the document had before an editor moved it. */
				sqlite3_stmt *st = store__stmt(t, ST_VAC_GET, err);

				if (st) {
					sqlite3_bind_int64(st, 1, newcoll);
					sqlite3_bind_blob(st, 2, t->key.data, (int)t->key.len,
							  SQLITE_STATIC);
					sqlite3_bind_int64(st, 3, store__now_ns() - VACATED_TTL_NS);
					if (sqlite3_step(st) == SQLITE_ROW)
						newid = sqlite3_column_int64(st, 0);
					sqlite3_reset(st);
				}
				if (newid != id && store_entry_get(t, newid, &dst, NULL) == 0)
					newid = id;
				rc = doc_insert(t, newcoll, &doc, newid, &a, out, err);
			}
		}
		bson_destroy(&doc);
		return rc;
	}
	/* Scratch to scratch. */
	if (had && (rc = name_remove(t, &dst, err)))
		return rc;
	{
		sqlite3_stmt *st = store__stmt(t, ST_FILE_RENAME, err);

		if (!st)
			return err ? err->code : DFS_EIO;
		sqlite3_bind_int64(st, 1, row);
		sqlite3_bind_int64(st, 2, newcoll);
		sqlite3_bind_text(st, 3, newname, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, store__now_ns());
		rc = sqlite3_step(st);
		if (rc != SQLITE_DONE)
			return store__sqlerr(t, rc, "rename file", err);
	}
	rc = store__change(t, src.coll, STORE_CH_DEL, id, src.name, err);
	if (!rc)
		rc = store__change(t, newcoll, STORE_CH_PUT, id, newname, err);
	if (!rc && out && (rc = store_entry_get(t, id, out, err)) == 0) {
		snprintf(out->name, sizeof(out->name), "%s", newname); /* a link's own name */
		out->row = row;
		out->coll = newcoll;
	}
	return rc;
}

int store_entry_setattr(struct store_txn *t, int64_t id, int mask, const struct store_attrs *a,
			struct dfs_err *err)
{
	struct store_entry e;
	sqlite3_stmt *st;
	int rc;

	if ((rc = store_entry_get(t, id, &e, err)))
		return rc;
	st = store__stmt(t, e.kind == STORE_KIND_DOC ? ST_DOC_SETATTR : ST_FILE_SETATTR, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, (mask & STORE_SET_MODE) ? (a->mode & 07777) : e.mode);
	sqlite3_bind_int64(st, 3, (mask & STORE_SET_UID) ? a->uid : e.uid);
	sqlite3_bind_int64(st, 4, (mask & STORE_SET_GID) ? a->gid : e.gid);
	sqlite3_bind_int64(st, 5, (mask & STORE_SET_MTIME) ? a->mtime_ns : e.mtime_ns);
	sqlite3_bind_int64(st, 6, store__now_ns());
	/* An atime never set shows the mtime (db.c, version 6): kept where it shows now. */
	sqlite3_bind_int64(st, 7, e.atime_ns);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "set attributes", err);
	return store__change(t, e.coll, STORE_CH_PUT, id, e.name, err);
}

int store_entry_set_atime(struct store_txn *t, int64_t id, int64_t atime_ns, struct dfs_err *err)
{
	struct store_entry e;
	sqlite3_stmt *st;
	int rc;

	if ((rc = store_entry_get(t, id, &e, err)))
		return rc;
	st = store__stmt(t, e.kind == STORE_KIND_DOC ? ST_DOC_ATIME : ST_FILE_ATIME, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, atime_ns);
	sqlite3_bind_int64(st, 3, store__now_ns());
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "set atime", err);
	return store__change(t, e.coll, STORE_CH_PUT, id, e.name, err);
}

/* ---- cursors ----------------------------------------------------------------------- */

struct store_cursor {
	struct store_txn *t;	 /* Borrowed */
	struct store__conn *conn; /* Borrowed: the transaction's connection */
	sqlite3_stmt *st;	 /* Owned: its own statement, so cursors can nest */
	int kind;		 /* 0: from the start, 1: after an id (conn->cursor_st) */
	uint32_t mode, uid, gid; /* the attributes of the document returned last */
};

static int cursor_open(struct store_txn *t, int64_t coll, int64_t after, struct store_cursor **out,
		       struct dfs_err *err)
{
	struct store_cursor *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	c->t = t;
	if (t->write && (rc = store__run_flush(t, err))) {
		free(c);
		return rc;
	}
	c->conn = t->c;
	c->kind = after ? 1 : 0;
	/* the statement a freed cursor left: preparing it again cost a bulk write of
	 * single-document upserts without an index a fifth of its time */
	c->st = c->conn->cursor_st[c->kind];
	c->conn->cursor_st[c->kind] = NULL;
	rc = c->st ? SQLITE_OK
		   : sqlite3_prepare_v3(
			     t->c->h,
			     after ? "SELECT d.id, d.bson, d.mode, d.uid, d.gid" STORE__DOCS_OF_COLL_AFTER
				     " ORDER BY r.lo, d.id"
				   : "SELECT d.id, d.bson, d.mode, d.uid, d.gid" STORE__DOCS_OF_COLL
				     " ORDER BY r.lo, d.id",
			     -1, SQLITE_PREPARE_PERSISTENT, &c->st, NULL);
	if (rc != SQLITE_OK) {
		free(c);
		return store__sqlerr(t, rc, "open cursor", err);
	}
	sqlite3_bind_int64(c->st, 1, coll);
	if (after)
		sqlite3_bind_int64(c->st, 2, after);
	*out = c;
	return 0;
}

int store_cursor_open(struct store_txn *t, int64_t coll, struct store_cursor **out,
		      struct dfs_err *err)
{
	return cursor_open(t, coll, 0, out, err);
}

int store_cursor_open_after(struct store_txn *t, int64_t coll, int64_t after,
			    struct store_cursor **out, struct dfs_err *err)
{
	return cursor_open(t, coll, after, out, err);
}

int store_cursor_next(struct store_cursor *c, bson_t *doc, int64_t *id, struct dfs_err *err)
{
	int rc = sqlite3_step(c->st);
	const void *data;
	int n;

	if (rc == SQLITE_DONE)
		return DFS_ENOENT;
	if (rc != SQLITE_ROW)
		return store__sqlerr(c->t, rc, "read documents", err);
	*id = sqlite3_column_int64(c->st, 0);
	c->mode = (uint32_t)sqlite3_column_int64(c->st, 2);
	c->uid = (uint32_t)sqlite3_column_int64(c->st, 3);
	c->gid = (uint32_t)sqlite3_column_int64(c->st, 4);
	data = sqlite3_column_blob(c->st, 1);
	n = sqlite3_column_bytes(c->st, 1);
	if (n < 5 || !bson_init_static(doc, data, (size_t)n))
		return dfs_err_set(err, DFS_ECORRUPT, "document %lld is not valid BSON",
				   (long long)*id);
	return 0;
}

bool store_cursor_allowed(struct store_cursor *c)
{
	return store_txn_allows(c->t, c->mode, c->uid, c->gid);
}

void store_cursor_free(struct store_cursor *c)
{
	if (!c)
		return;
	/* kept for the next cursor of the connection (freed before its transaction ends, like
	 * every cursor), unless one is kept already */
	sqlite3_reset(c->st);
	if (!c->conn->cursor_st[c->kind]) {
		sqlite3_clear_bindings(c->st);
		c->conn->cursor_st[c->kind] = c->st;
	} else {
		sqlite3_finalize(c->st);
	}
	free(c);
}

/* ---- documents by _id (the write paths of the query layer) ------------------------- */

int store_doc_find_id(struct store_txn *t, int64_t coll, const bson_value_t *id,
		      struct store_entry *out, struct dfs_err *err)
{
	char name[256];
	int rc;

	if ((rc = doc_key_name(t, id, name, sizeof(name), err)))
		return rc;
	rc = doc_by_key(t, coll, &t->key, out, err);
	if (rc == DFS_ENOENT)
		return dfs_err_set(err, DFS_ENOENT, "no document '%s'", name);
	return rc;
}

/* known: the caller's copy of the current version, and doc already validated (NULL: read
 * and validate here). */
static int doc_replace(struct store_txn *t, int64_t id, const bson_t *doc, bool as_update,
		       const bson_t *known, struct dfs_err *err)
{
	struct store_entry e;
	bson_t old;
	bson_iter_t a, b;
	int rc;

	if (!known && (rc = store_doc_validate(doc, err)))
		return rc;
	if ((rc = store_entry_get(t, id, &e, err)))
		return rc;
	if (e.kind != STORE_KIND_DOC)
		return dfs_err_set(err, DFS_EINVAL, "'%s' is not a document", e.name);
	if (known)
		bson_init_static(&old, bson_get_data(known), known->len);
	else if ((rc = store_doc_get(t, id, &old, err)))
		return rc;
	if (!bson_iter_init(&b, doc) || !bson_iter_next(&b) || strcmp(bson_iter_key(&b), "_id") ||
	    !bson_iter_init_find(&a, &old, "_id") || store_iter_compare(&a, &b) != 0 ||
	    bson_iter_type(&a) != bson_iter_type(&b))
		rc = dfs_err_set(err, DFS_EINVAL,
				 "replacing '%s' must keep its _id first and unchanged", e.name);
	if (!rc && as_update) {
		t->ev_update = true;
		t->ev_old = &old;
	}
	if (!rc)
		rc = doc_update(t, &e, doc, 0, err);
	t->ev_update = false;
	t->ev_old = NULL;
	bson_destroy(&old);
	return rc;
}

int store_doc_replace(struct store_txn *t, int64_t id, const bson_t *doc, struct dfs_err *err)
{
	return doc_replace(t, id, doc, false, NULL, err);
}

int store_doc_update_op(struct store_txn *t, int64_t id, const bson_t *doc, struct dfs_err *err)
{
	return doc_replace(t, id, doc, true, NULL, err);
}

int store_doc_update_op_checked(struct store_txn *t, int64_t id, const bson_t *old,
				const bson_t *doc, struct dfs_err *err)
{
	return doc_replace(t, id, doc, true, old, err);
}
