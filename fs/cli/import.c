/*
 * import.c - what `docfs import` takes beyond the JSON the inserter reads (insert.c): CSV
 * and TSV turned into documents as mongoimport turns them, and the upsert and merge modes
 * (documents written as bulkWrite operations through query_bulk_run). It does not read
 * files or parse arguments (cli.c does) and does not insert (insert.c does).
 *
 * Design notes
 * 1. A CSV or TSV record becomes a document of the field names (a header line or --fields;
 *    a dotted name nests, "a.b" -> {a: {b: ...}}) and values typed as mongoimport types
 *    them without --columnsHaveTypes: an integer is int32 (int64 past its range), another
 *    number a double, anything else a string; an empty field is "" (mongoimport without
 *    --ignoreBlanks). The document is rendered as a JSON line and fed to the inserter, so
 *    line numbers, _id generation, keep_going and the modes are the same for every type.
 * 2. CSV is RFC 4180: ',' between fields, '"' around a field that holds ',' '"' or a line
 *    break, '""' for a quote inside one; records end at a line break outside quotes (CRLF
 *    too). TSV splits at tabs only, quotes being ordinary bytes (mongoimport's tsv).
 * 3. Upsert mode replaces the document whose upsert fields (default _id) equal the
 *    imported one's, or inserts it (replaceOne with upsert); merge mode sets the imported
 *    fields on it (updateOne {$set} with upsert). A document lacking an upsert field is
 *    inserted. Operations go in batches of FS_IMPORT_BATCH, unordered unless
 *    --stopOnError, each committed on its own (MongoDB's bulkWrite semantics).
 */
#include "fs_int.h"
#include "query.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FS_IMPORT_BATCH 1000

void fs_import_init(struct fs_import *im, struct store_db *db, int64_t coll)
{
	memset(im, 0, sizeof(*im));
	im->db = db;
	im->coll = coll;
	dfs_buf_init(&im->pending);
	dfs_buf_init(&im->out);
	bson_init(&im->ops);
}

void fs_import_release(struct fs_import *im)
{
	for (int i = 0; i < im->nnames; i++)
		free(im->names[i]);
	free(im->names);
	for (int i = 0; i < im->nupsert; i++)
		free(im->upsert[i]);
	free(im->upsert);
	dfs_buf_release(&im->pending);
	dfs_buf_release(&im->out);
	bson_destroy(&im->ops);
}

/* Splits a comma-separated list of field names into *v (appended), *n counting them. */
static int name_list(const char *list, char ***v, int *n, struct dfs_err *err)
{
	const char *p = list;

	while (*p) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);

		if (!len)
			return dfs_err_set(err, DFS_EINVAL, "an empty field name in '%s'", list);
		*v = realloc(*v, (size_t)(*n + 1) * sizeof(**v));
		if (!*v || !((*v)[*n] = strndup(p, len)))
			abort();
		(*n)++;
		p += len + (c ? 1 : 0);
	}
	return 0;
}

int fs_import_set_fields(struct fs_import *im, const char *list, struct dfs_err *err)
{
	return name_list(list, &im->names, &im->nnames, err);
}

int fs_import_set_upsert_fields(struct fs_import *im, const char *list, struct dfs_err *err)
{
	return name_list(list, &im->upsert, &im->nupsert, err);
}

/* Appends the value of one field (note 1) under key to b. */
static void typed_field(bson_t *b, const char *key, const char *v, size_t n)
{
	char buf[64], *end;

	if (n && n < sizeof(buf)) {
		memcpy(buf, v, n);
		buf[n] = '\0';
		errno = 0;
		long long i = strtoll(buf, &end, 10);

		if (!*end && !errno && (buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9'))) {
			if (i >= INT32_MIN && i <= INT32_MAX)
				BSON_APPEND_INT32(b, key, (int32_t)i);
			else
				BSON_APPEND_INT64(b, key, i);
			return;
		}
		errno = 0;
		double d = strtod(buf, &end);

		if (!*end && !errno && (buf[0] == '-' || buf[0] == '.' || (buf[0] >= '0' &&
									     buf[0] <= '9'))) {
			BSON_APPEND_DOUBLE(b, key, d);
			return;
		}
	}
	bson_append_utf8(b, key, -1, v, (int)n);
}

/* Puts value at the dotted path name into doc (built with nested documents). */
static void put_path(bson_t *doc, const char *name, const char *v, size_t n)
{
	const char *dot = strchr(name, '.');
	bson_iter_t it;

	if (!dot) {
		typed_field(doc, name, v, n);
		return;
	}
	{
		char head[256];
		size_t hn = (size_t)(dot - name) < sizeof(head) - 1 ? (size_t)(dot - name)
								    : sizeof(head) - 1;
		bson_t sub, merged;

		memcpy(head, name, hn);
		head[hn] = '\0';
		/* an earlier field of the same head: rebuild that sub-document with this one */
		bson_init(&sub);
		if (bson_iter_init_find(&it, doc, head) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
			const uint8_t *d;
			uint32_t l;
			bson_t old;

			bson_iter_document(&it, &l, &d);
			if (bson_init_static(&old, d, l))
				bson_concat(&sub, &old);
			bson_init(&merged);
			bson_copy_to_excluding_noinit(doc, &merged, head, NULL);
			bson_reinit(doc);
			bson_concat(doc, &merged);
			bson_destroy(&merged);
		}
		put_path(&sub, dot + 1, v, n);
		bson_append_document(doc, head, -1, &sub);
		bson_destroy(&sub);
	}
}

/* One record's fields (f[i] of length fl[i]) as a document, rendered as a JSON line. */
static int emit_record(struct fs_import *im, char **f, size_t *fl, int nf, struct dfs_err *err)
{
	bson_t doc = BSON_INITIALIZER;
	int rc;

	if (im->header_pending) {
		im->header_pending = false;
		for (int i = 0; i < nf; i++) {
			im->names = realloc(im->names, (size_t)(im->nnames + 1) * sizeof(*im->names));
			if (!im->names || !(im->names[im->nnames] = strndup(f[i], fl[i])))
				abort();
			im->nnames++;
		}
		return 0;
	}
	if (nf == 1 && fl[0] == 0)
		return 0; /* a blank line */
	for (int i = 0; i < nf; i++) {
		char gen[32];
		const char *name = i < im->nnames ? im->names[i] : NULL;

		if (!name) {
			snprintf(gen, sizeof(gen), "field%d", i + 1);
			name = gen;
		}
		put_path(&doc, name, f[i], fl[i]);
	}
	rc = store_codec_render(&doc, STORE_RENDER_CANONICAL, &im->out, err);
	bson_destroy(&doc);
	if (!rc)
		dfs_buf_putc(&im->out, '\n');
	return rc;
}

int fs_import_csv(struct fs_import *im, const char *data, size_t len, bool final,
		  struct dfs_err *err)
{
	char *p;
	size_t start = 0, i;
	bool tsv = im->type == FS_IMPORT_TSV;

	dfs_buf_append(&im->pending, data, len);
	dfs_buf_reset(&im->out);
	p = im->pending.data ? im->pending.data : "";
	for (;;) {
		/* one record from start: its end (a line break outside quotes) first */
		bool q = false, complete = false;
		size_t end;

		for (i = start; i < im->pending.len; i++) {
			if (!tsv && p[i] == '"')
				q = !q;
			else if (!q && p[i] == '\n') {
				complete = true;
				break;
			}
		}
		if (!complete && !(final && i > start))
			break;
		end = i;
		{
			/* split it in place: unquoting shortens fields, never lengthens them */
			char **f = NULL;
			size_t *fl = NULL, rl = end, w, fs;
			int nf = 0, rc;

			if (rl > start && p[rl - 1] == '\r')
				rl--;
			q = false;
			w = fs = start;
			for (size_t k = start;; k++) {
				bool at_end = k >= rl;

				if (!at_end && !tsv && p[k] == '"') {
					if (q && k + 1 < rl && p[k + 1] == '"') {
						p[w++] = '"';
						k++;
					} else {
						q = !q;
					}
					continue;
				}
				if (at_end || (!q && p[k] == (tsv ? '\t' : ','))) {
					f = realloc(f, (size_t)(nf + 1) * sizeof(*f));
					fl = realloc(fl, (size_t)(nf + 1) * sizeof(*fl));
					if (!f || !fl)
						abort();
					f[nf] = p + fs;
					fl[nf] = w - fs;
					nf++;
					w = fs = k + 1;
					if (at_end)
						break;
					continue;
				}
				p[w++] = p[k];
			}
			if (q) {
				free(f);
				free(fl);
				return dfs_err_set(err, DFS_EINVAL,
						   "record %lld: a quoted field is not closed",
						   (long long)im->nrecords + 1);
			}
			im->nrecords++;
			rc = emit_record(im, f, fl, nf, err);
			free(f);
			free(fl);
			if (rc)
				return rc;
		}
		start = end + 1;
		if (start > im->pending.len)
			start = im->pending.len;
	}
	memmove(im->pending.data, p + start, im->pending.len - start);
	im->pending.len -= start;
	if (im->pending.data)
		im->pending.data[im->pending.len] = '\0';
	return 0;
}

/* Runs the batched operations (note 3). */
static int flush_ops(struct fs_import *im, struct dfs_err *err)
{
	bson_t out = BSON_INITIALIZER;
	bson_iter_t it;
	int rc;

	if (!im->nops)
		return 0;
	rc = query_bulk_run(im->db, im->coll, &im->ops, im->stop_on_error, false, &out, err);
	if (bson_iter_init(&it, &out)) {
		while (bson_iter_next(&it)) {
			const char *k = bson_iter_key(&it);

			if (!strcmp(k, "insertedCount") || !strcmp(k, "upsertedCount"))
				im->nwritten += bson_iter_as_int64(&it);
			else if (!strcmp(k, "matchedCount"))
				im->nwritten += bson_iter_as_int64(&it);
			else if (!strcmp(k, "writeErrors") && BSON_ITER_HOLDS_ARRAY(&it)) {
				bson_iter_t e;

				bson_iter_recurse(&it, &e);
				while (bson_iter_next(&e))
					im->nfailed++;
			}
		}
	}
	bson_destroy(&out);
	bson_reinit(&im->ops);
	im->nops = 0;
	if (rc && !im->stop_on_error) {
		dfs_err_clear(err); /* counted; go on, as mongoimport does */
		rc = 0;
	}
	return rc;
}

/* The inserter's sink in the upsert and merge modes: one bulkWrite operation a document. */
int fs_import_sink(void *ctx, const bson_t *doc, unsigned line, struct dfs_err *err)
{
	struct fs_import *im = ctx;
	bson_t op, body, filter, upd, set;
	bool insert = false;
	char key[16];
	bson_iter_t it;

	(void)line;
	bson_init(&filter);
	for (int i = 0; i < (im->nupsert ? im->nupsert : 1); i++) {
		const char *f = im->nupsert ? im->upsert[i] : "_id";

		if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, f, &it)) {
			insert = true;
			break;
		}
		bson_append_value(&filter, f, -1, bson_iter_value(&it));
	}
	snprintf(key, sizeof(key), "%d", im->nops);
	bson_append_document_begin(&im->ops, key, -1, &op);
	if (insert) {
		BSON_APPEND_DOCUMENT_BEGIN(&op, "insertOne", &body);
		BSON_APPEND_DOCUMENT(&body, "document", doc);
	} else if (im->mode == FS_IMPORT_UPSERT) {
		BSON_APPEND_DOCUMENT_BEGIN(&op, "replaceOne", &body);
		BSON_APPEND_DOCUMENT(&body, "filter", &filter);
		BSON_APPEND_DOCUMENT(&body, "replacement", doc);
		BSON_APPEND_BOOL(&body, "upsert", true);
	} else {
		BSON_APPEND_DOCUMENT_BEGIN(&op, "updateOne", &body);
		BSON_APPEND_DOCUMENT(&body, "filter", &filter);
		BSON_APPEND_DOCUMENT_BEGIN(&body, "update", &upd);
		BSON_APPEND_DOCUMENT_BEGIN(&upd, "$set", &set);
		bson_copy_to_excluding_noinit(doc, &set, "", NULL);
		bson_append_document_end(&upd, &set);
		bson_append_document_end(&body, &upd);
		BSON_APPEND_BOOL(&body, "upsert", true);
	}
	bson_append_document_end(&op, &body);
	bson_append_document_end(&im->ops, &op);
	bson_destroy(&filter);
	im->nops++;
	return im->nops >= FS_IMPORT_BATCH ? flush_ops(im, err) : 0;
}

int fs_import_finish(struct fs_import *im, struct dfs_err *err)
{
	return flush_ops(im, err);
}
