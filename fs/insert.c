/*
 * insert.c - streaming bulk insertion, shared by the mount's ".insert" file and by
 * `docfs import`. Bytes arrive in chunks; every complete document is parsed, prepared (an
 * ObjectId for a missing _id) and inserted, one write transaction per chunk. It does not
 * read files or talk to FUSE; callers feed it.
 */
#include "fs_int.h"

#include <string.h>

void fs_inserter_init(struct fs_inserter *in, struct store_db *db, int64_t coll,
		      const struct store_attrs *a)
{
	memset(in, 0, sizeof(*in));
	in->db = db;
	in->coll = coll;
	in->attrs = *a;
	in->line = 1;
	dfs_buf_init(&in->pending);
}

void fs_inserter_release(struct fs_inserter *in)
{
	dfs_buf_release(&in->pending);
}

static unsigned count_lines(const char *p, size_t n)
{
	unsigned lines = 0;

	for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))); p++)
		lines++;
	return lines;
}

/* Skips whitespace; returns the offset of the first other byte (or len). */
static size_t skip_space(const char *p, size_t off, size_t len)
{
	while (off < len && (p[off] == ' ' || p[off] == '\t' || p[off] == '\n' || p[off] == '\r'))
		off++;
	return off;
}

/* In JSON array mode, consumes the punctuation between documents. Returns 0 when a
 * document can follow at *off, 1 when more input is needed, DFS_EINVAL on bad input. */
static int array_punct(struct fs_inserter *in, const char *p, size_t len, size_t *off)
{
	for (;;) {
		*off = skip_space(p, *off, len);
		if (*off >= len)
			return 1;
		switch (in->array_state) {
		case 0:
			if (p[*off] != '[')
				return dfs_err_set(&in->err, DFS_EINVAL,
						   "line %u: expected '[' to start a JSON array",
						   in->line + count_lines(p, *off));
			in->array_state = 1;
			(*off)++;
			break;
		case 1:
			if (p[*off] == ']') {
				in->array_state = 3;
				(*off)++;
				break;
			}
			return 0;
		case 2:
			if (p[*off] == ',') {
				in->array_state = 1;
				(*off)++;
			} else if (p[*off] == ']') {
				in->array_state = 3;
				(*off)++;
			} else {
				return dfs_err_set(
					&in->err, DFS_EINVAL,
					"line %u: expected ',' or ']' after document %lld",
					in->line + count_lines(p, *off), (long long)in->ndocs);
			}
			break;
		default:
			return dfs_err_set(&in->err, DFS_EINVAL,
					   "line %u: text after the end of the JSON array",
					   in->line + count_lines(p, *off));
		}
	}
}

int fs_inserter_feed(struct fs_inserter *in, const char *data, size_t len, bool final)
{
	struct store_txn *t = NULL;
	size_t off = 0;
	int rc = 0;

	if (in->failed)
		return in->err.code;
	dfs_buf_append(&in->pending, data, len);
	for (;;) {
		const char *p = in->pending.data + off;
		size_t left = in->pending.len - off, used = 0;
		bson_t doc, prepared;
		unsigned line;

		if (in->json_array) {
			size_t o = 0;

			rc = array_punct(in, p, left, &o);
			in->line += count_lines(p, o);
			off += o;
			p += o;
			left -= o;
			if (rc == 1) {
				rc = 0;
				break;
			}
			if (rc)
				goto fail;
		}
		bson_init(&doc);
		rc = store_codec_parse_next(p, left, in->line, &used, &doc, &in->err);
		if (rc == DFS_ENOENT || (rc == DFS_EINCOMPLETE && !final)) {
			bson_destroy(&doc);
			dfs_err_clear(&in->err);
			rc = 0;
			break;
		}
		/* The document starts after the leading whitespace it consumed. */
		line = in->line + count_lines(p, skip_space(p, 0, rc ? left : used));
		if (rc) {
			bson_destroy(&doc);
			dfs_err_prefix(&in->err,
				       "document %lld (line %u): ", (long long)in->ndocs + 1, line);
			goto fail;
		}
		rc = store_doc_prepare(&doc, NULL, &prepared, &in->err);
		bson_destroy(&doc);
		if (!rc) {
			if (!t)
				rc = store_txn_begin(in->db, true, &t, &in->err);
			if (!rc)
				rc = store_doc_insert(t, in->coll, &prepared, &in->attrs, NULL,
						      &in->err);
			bson_destroy(&prepared);
		}
		if (rc) {
			dfs_err_prefix(&in->err,
				       "document %lld (line %u): ", (long long)in->ndocs + 1, line);
			goto fail;
		}
		in->ndocs++;
		in->line += count_lines(p, used);
		off += used;
		if (in->json_array)
			in->array_state = 2;
	}
	if (final) {
		size_t o =
			skip_space(in->pending.data ? in->pending.data : "", off, in->pending.len);

		if (in->json_array && in->array_state != 3 && !in->err.code) {
			rc = dfs_err_set(&in->err, DFS_EINVAL,
					 "line %u: the JSON array is not closed", in->line);
			goto fail;
		}
		if (o < in->pending.len) {
			rc = dfs_err_set(&in->err, DFS_EINVAL,
					 "document %lld (line %u): unexpected text",
					 (long long)in->ndocs + 1, in->line);
			goto fail;
		}
	}
	/* Keep only what is not consumed yet. */
	memmove(in->pending.data, in->pending.data + off, in->pending.len - off);
	in->pending.len -= off;
	in->pending.data[in->pending.len] = '\0';
	/* One transaction spans write calls until it holds enough documents (a pipe delivers
	 * 64-128 KiB per write); the end of the stream always commits. */
	/* Every call commits: holding the write lock between requests would stall (or, in
	 * the same client, deadlock) every other writer of the database. */
	if (t)
		rc = store_txn_commit(t, &in->err);
	if (rc)
		in->failed = true;
	return rc;
fail:
	/* Ordered semantics: what came before the bad document is kept. */
	in->failed = true;
	if (t) {
		struct dfs_err cerr = {0};

		if (store_txn_commit(t, &cerr))
			fs_errlog_add("insert: commit after an error failed: %s", cerr.msg);
	}
	dfs_buf_reset(&in->pending);
	return in->err.code ? in->err.code : rc;
}
