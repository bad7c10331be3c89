/*
 * changes.c - change streams in the store: the 'events' table every write transaction
 * appends MongoDB change events to (inside the same transaction as the write), their resume
 * tokens, the byte offsets that make `<db>/.changes` and `<db>/<coll>/.changes` files that
 * only grow, and the trimming of old history. It does not filter, look documents up or
 * serve files: fs/paths/changes.c does that.
 *
 * Design notes
 * 1. One row per event: seq (the rowid, never reused: the newest row is never trimmed), ts
 *    (clusterTime: seconds << 32 | increment, strictly increasing in a database), coll (the
 *    collection name, NULL for a database event), op, wall (wallTime, ms), len (the bytes of
 *    the event's line: the whole event as one compact relaxed Extended JSON line with its
 *    "\n") and line: what the line is rendered from when it is read (note 6). Rows of
 *    schema version 8 have no len: their line is that text, read as it is.
 * 2. A database's stream and each collection's stream are byte streams: off_db and off_coll
 *    are the offsets of the line in them (NULL: not in that stream; an invalidate is only in
 *    its collection's). The next offset is the end of the last line, or of the trimmed
 *    history kept in 'evends' (coll '' for the database): offsets never go back, so a
 *    file's size never shrinks even when history is trimmed or a collection is dropped and
 *    made again. Bytes before the first line still held read as spaces ending in "\n".
 * 3. Trimming keeps the last events_keep bytes of the database stream (meta, default
 *    256 MiB; looked at every 16 events, trimmed once an eighth over) and records the
 *    last trimmed seq as events_cut: a resume token with a seq below it has lost history
 *    (ChangeStreamHistoryLost). New seqs come after the cut even when nothing is left.
 *    events_keep 0 records nothing.
 * 4. The token is hex, upper case, and sorts like the events: "82", the clusterTime (8 + 8
 *    digits), "01", the database number (8 digits) and the seq (16 digits).
 * 5. A write transaction reads the last seq, clusterTime and stream ends once and keeps
 *    them (a bulk insert records one event per document). A savepoint rolled back after
 *    an event (index.c's, when a build fails) leaves them ahead: seqs and offsets then have
 *    a gap, never a repeat, and a gap reads as blanks like trimmed history.
 * 6. Events are stored compactly and rendered when read (ev_render, the same function
 *    that measures len at the write, so a line is always len bytes). What the row does not
 *    hold is derived: the token from dbnum, ts and seq, operationType from op, clusterTime
 *    from ts, ns from the database and coll, documentKey from fullDocument. line holds
 *    the other fields as BSON (documentKey, updateDescription, to, operationDescription),
 *    and is empty for an insert or replace: its fullDocument is the document row docid
 *    while that row's evseq names the event. Every write that changes or removes a row
 *    (doc.c's update, delete and rename, a collection dropped or emptied) first copies the
 *    row into evdocs under that seq, if the event is still kept (seq > events_cut), so an
 *    old insert shows what was inserted whatever happened after; trimming deletes the
 *    copies with their events. An insert thus writes its document once, not twice, and
 *    only the documents changed while their insert is kept are written again.
 * 7. off_db grows with seq (each event's offset is the end of the one before), so the
 *    database's stream is found by seq: the row holding an offset by a binary search of
 *    point reads (db_seq_at), with no index on off_db to keep up on every write. A
 *    collection's stream keeps its index events_coll(coll, off_coll).
 */
#include "store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EVENTS_KEEP_DEFAULT (256LL << 20)

static const char *const op_names[] = {
	[STORE_EV_INSERT] = "insert",		[STORE_EV_UPDATE] = "update",
	[STORE_EV_REPLACE] = "replace",		[STORE_EV_DELETE] = "delete",
	[STORE_EV_DROP] = "drop",		[STORE_EV_RENAME] = "rename",
	[STORE_EV_INVALIDATE] = "invalidate",	[STORE_EV_CREATE_INDEXES] = "createIndexes",
	[STORE_EV_DROP_INDEXES] = "dropIndexes",
};

const char *store_event_op_name(int op)
{
	if (op <= 0 || op >= (int)(sizeof(op_names) / sizeof(op_names[0])) || !op_names[op])
		return "unknown";
	return op_names[op];
}

/* Writes v as n upper-case hex digits at p; returns p + n. */
static char *put_hex(char *p, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 4)
		p[i] = "0123456789ABCDEF"[v & 15];
	return p + n;
}

void store_event_token(uint32_t dbnum, uint64_t ts, int64_t seq, char out[STORE_TOKEN_LEN + 1])
{
	/* "82%08X%08X01%08X%016X" of ts's two halves, dbnum and seq, without printf's cost
	 * (every event written is measured, and rendered when read) */
	char *p = out;

	*p++ = '8';
	*p++ = '2';
	p = put_hex(p, ts >> 32, 8);
	p = put_hex(p, (uint32_t)ts, 8);
	*p++ = '0';
	*p++ = '1';
	p = put_hex(p, dbnum, 8);
	p = put_hex(p, (uint64_t)seq, 16);
	*p = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static uint64_t hexnum(const char *s, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 4 | (uint64_t)hexval(s[i]);
	return v;
}

int store_event_token_parse(const char *hex, uint32_t *dbnum, uint64_t *ts, int64_t *seq,
			    struct dfs_err *err)
{
	size_t n = strlen(hex);

	for (size_t i = 0; i < n; i++)
		if (hexval(hex[i]) < 0)
			return dfs_err_set(err, DFS_EINVAL,
					   "resume token '%.60s' is not hexadecimal (FailedToParse)",
					   hex);
	if (n != STORE_TOKEN_LEN || strncmp(hex, "82", 2) || strncmp(hex + 18, "01", 2))
		return dfs_err_set(err, DFS_EINVAL,
				   "resume token '%.60s' is not a docfs token (InvalidResumeToken, "
				   "code 260)",
				   hex);
	*ts = hexnum(hex + 2, 8) << 32 | hexnum(hex + 10, 8);
	*dbnum = (uint32_t)hexnum(hex + 20, 8);
	*seq = (int64_t)hexnum(hex + 28, 16);
	return 0;
}

/* ---- writing ------------------------------------------------------------------------ */

static int64_t step_int(struct store_txn *t, enum store__st which, const char *coll,
			int64_t dflt, int *rc, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, which, err);
	int64_t v = dflt;
	int r;

	if (!st) {
		*rc = err ? err->code : DFS_EIO;
		return dflt;
	}
	if (coll)
		sqlite3_bind_text(st, 1, coll, -1, SQLITE_STATIC);
	r = sqlite3_step(st);
	if (r == SQLITE_ROW) {
		if (sqlite3_column_type(st, 0) != SQLITE_NULL)
			v = sqlite3_column_int64(st, 0);
	} else if (r != SQLITE_DONE) {
		*rc = store__sqlerr(t, r, "change stream", err);
	}
	sqlite3_reset(st);
	return v;
}

static int exec1(struct store_txn *t, const char *sql, int64_t a, struct dfs_err *err)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(t->c->h, sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
		return store__sqlerr(t, rc, "trim change stream", err);
	sqlite3_bind_int64(st, 1, a);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return store__sqlerr(t, rc, "trim change stream", err);
	return 0;
}

static int events_trim(struct store_txn *t, int64_t end, struct dfs_err *err);

/* The first event of the database's stream at or after seq: *s its seq (0: none), *o its
 * offset. */
static int db_after(struct store_txn *t, int64_t seq, int64_t *s, int64_t *o,
		    struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_EV_DB_AFTER, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	*s = *o = 0;
	sqlite3_bind_int64(st, 1, seq);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*s = sqlite3_column_int64(st, 0);
		*o = sqlite3_column_int64(st, 1);
	}
	sqlite3_reset(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "read change stream", err);
	return 0;
}

/* The seq of the last event of the database's stream that starts at or before byte off
 * (0: none): a binary search by seq, since offsets grow with seqs (note 7). */
static int db_seq_at(struct store_txn *t, int64_t off, int64_t *out, struct dfs_err *err)
{
	int64_t lo = 0, hi, s = 0, o = 0;
	int rc = 0;

	*out = 0;
	if ((rc = db_after(t, 0, &lo, &o, err)) || !lo || o > off)
		return rc;
	hi = step_int(t, ST_EV_MAX_SEQ, NULL, lo, &rc, err);
	while (!rc && lo < hi) {
		int64_t mid = lo + (hi - lo + 1) / 2;

		if ((rc = db_after(t, mid, &s, &o, err)))
			break;
		if (!s || o > off)
			hi = mid - 1;
		else
			lo = s;
	}
	*out = lo;
	return rc;
}

static int64_t meta_get(struct store_txn *t, const char *k, int64_t dflt)
{
	sqlite3_stmt *st = store__stmt(t, ST_META_GET, NULL);
	int64_t v = dflt;

	if (!st)
		return dflt;
	sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return v;
}

static int meta_put(struct store_txn *t, const char *k, int64_t v, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_META_SET, err);

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, v);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store__sqlerr(t, sqlite3_errcode(t->c->h), "change stream settings", err);
	sqlite3_reset(st);
	return 0;
}

int store_events_set_keep(struct store_txn *t, int64_t bytes, struct dfs_err *err)
{
	if (bytes != 0 && bytes < 4096)
		return dfs_err_set(err, DFS_EINVAL,
				   "change stream history of %lld bytes: keep at least 4096, or 0 "
				   "to record none",
				   (long long)bytes);
	t->ev_known = false;
	int rc = meta_put(t, "events_keep", bytes, err);
	int64_t end;

	if (rc)
		return rc;
	end = step_int(t, ST_EV_END_DB, NULL, 0, &rc, err);
	return rc ? rc : events_trim(t, end, err);
}

/* Trims the oldest events past events_keep bytes (note 3). The trimmed rows are read by
 * rowid (NOT INDEXED): through events_coll SQLite would scan every event for GROUP BY. */
static int events_trim(struct store_txn *t, int64_t end, struct dfs_err *err)
{
	int64_t keep = meta_get(t, "events_keep", EVENTS_KEEP_DEFAULT), start, cut;
	int rc = 0;

	start = step_int(t, ST_EV_START_DB, NULL, end, &rc, err);
	/* An eighth more before trimming: the rows go in large runs, not a few per write. */
	if (rc || end - start <= keep + keep / 8)
		return rc;
	if ((rc = db_seq_at(t, end - keep, &cut, err)))
		return rc;
	if (cut <= 0)
		return 0;
	if ((rc = exec1(t,
			"INSERT OR REPLACE INTO evends(coll, endoff) SELECT coll,"
			" max(off_coll + coalesce(len, length(line))) FROM events NOT INDEXED"
			" WHERE seq <= ?1"
			" AND coll IS NOT NULL AND off_coll IS NOT NULL GROUP BY coll",
			cut, err)) ||
	    (rc = exec1(t,
			"INSERT OR REPLACE INTO evends(coll, endoff) SELECT '',"
			" max(off_db + coalesce(len, length(line))) FROM events NOT INDEXED"
			" WHERE seq <= ?1"
			" AND off_db IS NOT NULL",
			cut, err)) ||
	    (rc = exec1(t, "DELETE FROM events WHERE seq <= ?1", cut, err)) ||
	    (rc = exec1(t, "DELETE FROM evdocs WHERE seq <= ?1", cut, err)))
		return rc;
	return meta_put(t, "events_cut", cut, err);
}

/* Appends ", \"key\": " and v rendered (compact). */
static int put_field(struct dfs_buf *out, const char *key, const bson_value_t *v,
		     struct dfs_err *err)
{
	dfs_buf_puts(out, ", \"");
	dfs_buf_puts(out, key);
	dfs_buf_puts(out, "\": ");
	return store_codec_render_value(v, out, err);
}

static void put_u32(struct dfs_buf *out, uint32_t v)
{
	char d[10];
	int n = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		dfs_buf_putc(out, d[--n]);
}

/*
 * Renders an event into out (appended), "\n" included: the fields every event has, then
 * fullDocument when full is given, then ns (but for an invalidate), documentKey when full is
 * given, and the stored fields rest (note 6). These are the bytes of the whole event
 * rendered as one document in the compact style, "{" and its fields as "\"key\": value"
 * joined by ", ", written field by field: the keys need no escaping, the values go through
 * the codec (tests/unit/test_changes.c parses each line and renders it whole to check).
 * skip_full leaves fullDocument's value out (a write that knows its length measures the
 * rest).
 */
static int ev_render(const struct store_db *db, int op, const char *coll, int64_t seq,
		     uint64_t ts, int64_t wall, const bson_t *full, bool skip_full,
		     const bson_t *rest, struct dfs_buf *out, struct dfs_err *err)
{
	char token[STORE_TOKEN_LEN + 1];
	bson_value_t v;
	size_t at;
	int rc;

	store_event_token(db->num, ts, seq, token);
	dfs_buf_puts(out, "{\"_id\": {\"_data\": \"");
	dfs_buf_puts(out, token);
	dfs_buf_puts(out, "\"}, \"operationType\": \"");
	dfs_buf_puts(out, store_event_op_name(op));
	dfs_buf_puts(out, "\", \"clusterTime\": {\"$timestamp\": {\"t\": ");
	put_u32(out, (uint32_t)(ts >> 32));
	dfs_buf_puts(out, ", \"i\": ");
	put_u32(out, (uint32_t)ts);
	dfs_buf_puts(out, "}}");
	v.value_type = BSON_TYPE_DATE_TIME;
	v.value.v_datetime = wall;
	if ((rc = put_field(out, "wallTime", &v, err)))
		return rc;
	if (full) {
		dfs_buf_puts(out, ", \"fullDocument\": ");
		if (!skip_full && (rc = store_codec_render(full, STORE_RENDER_COMPACT, out, err)))
			return rc;
	}
	if (op != STORE_EV_INVALIDATE) {
		v.value_type = BSON_TYPE_UTF8;
		v.value.v_utf8.str = (char *)db->name;
		v.value.v_utf8.len = (uint32_t)strlen(db->name);
		dfs_buf_puts(out, ", \"ns\": {\"db\": ");
		if ((rc = store_codec_render_value(&v, out, err)))
			return rc;
		if (coll) {
			v.value.v_utf8.str = (char *)coll;
			v.value.v_utf8.len = (uint32_t)strlen(coll);
			if ((rc = put_field(out, "coll", &v, err)))
				return rc;
		}
		dfs_buf_putc(out, '}');
	}
	if (full) {
		bson_iter_t it;

		if (!bson_iter_init_find(&it, full, "_id"))
			return dfs_err_set(err, DFS_EIO, "change event %lld: its document has no _id",
					   (long long)seq);
		dfs_buf_puts(out, ", \"documentKey\": {\"_id\": ");
		if ((rc = store_codec_render_value(bson_iter_value(&it), out, err)))
			return rc;
		dfs_buf_putc(out, '}');
	}
	if (rest && !bson_empty(rest)) {
		dfs_buf_puts(out, ", ");
		at = out->len;
		if ((rc = store_codec_render(rest, STORE_RENDER_COMPACT, out, err)))
			return rc;
		/* its fields, without its braces */
		memmove(out->data + at, out->data + at + 1, out->len - at - 2);
		out->len -= 2;
	}
	dfs_buf_puts(out, "}\n");
	return 0;
}

/* Appends one event of kind op. A document event of an insert or replace refers to its
 * document (full, perm->id: its row's evseq names the event, note 6); rest holds the fields
 * stored after ns (NULL: none). coll NULL: a database event; in_db false: only in coll's
 * stream (an invalidate). *seq_out (if given) gets the event's seq, 0 when none was
 * recorded. */
static int event_add(struct store_txn *t, int op, const char *coll, bool in_db,
		     const struct store__perm *perm, const bson_t *full, const bson_t *rest,
		     int64_t *seq_out, struct dfs_err *err)
{
	int64_t seq, ts, now_s, off_db = -1, off_coll = -1, len, wall, full_len = -1;
	struct timespec now;
	sqlite3_stmt *st;
	int rc = 0;

	if (seq_out)
		*seq_out = 0;
	/* MongoDB's change streams never show system collections (the profiler's) */
	if (coll && strncmp(coll, "system.", 7) == 0)
		return 0;
	if (!t->ev_known) {
		t->ev_off = meta_get(t, "events_keep", EVENTS_KEEP_DEFAULT) == 0;
		t->ev_seq = step_int(t, ST_EV_LAST_SEQ, NULL, 0, &rc, err);
		t->ev_ts = step_int(t, ST_EV_LAST_TS, NULL, 0, &rc, err);
		t->ev_end = step_int(t, ST_EV_END_DB, NULL, 0, &rc, err);
		t->ev_coll[0] = '\0';
		if (rc)
			return rc;
		t->ev_known = true;
	}
	if (t->ev_off)
		return 0;
	if (coll && strcmp(coll, t->ev_coll) != 0) {
		int64_t end = step_int(t, ST_EV_END_COLL, coll, 0, &rc, err);

		if (rc)
			return rc;
		snprintf(t->ev_coll, sizeof(t->ev_coll), "%s", coll);
		t->ev_cend = end;
	}
	seq = t->ev_seq + 1;
	clock_gettime(CLOCK_REALTIME, &now);
	now_s = (int64_t)now.tv_sec << 32 | 1;
	ts = t->ev_ts + 1 > now_s ? t->ev_ts + 1 : now_s;
	wall = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	if (in_db)
		off_db = t->ev_end;
	if (coll)
		off_coll = t->ev_cend;
	/* The line's length places the next one in the streams (note 2). A document's
	 * compact length follows from its pretty one, which its row keeps: it is not
	 * rendered again. */
	if (full && perm && perm->size > 0)
		full_len = store_codec_compact_len(full, perm->size);
	dfs_buf_reset(&t->scratch);
	if ((rc = ev_render(t->db, op, coll, seq, (uint64_t)ts, wall, full, full_len >= 0, rest,
			    &t->scratch, err)))
		return rc;
	len = (int64_t)t->scratch.len + (full_len >= 0 ? full_len : 0);
	st = store__stmt(t, ST_EV_ADD, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, seq);
	sqlite3_bind_int64(st, 2, ts);
	if (coll)
		sqlite3_bind_text(st, 3, coll, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, op);
	if (full || !rest)
		sqlite3_bind_zeroblob(st, 5, 0);
	else
		sqlite3_bind_blob(st, 5, bson_get_data(rest), (int)rest->len, SQLITE_STATIC);
	if (off_db >= 0)
		sqlite3_bind_int64(st, 6, off_db);
	if (off_coll >= 0)
		sqlite3_bind_int64(st, 7, off_coll);
	/* Only what not everyone may read keeps its attributes (cred.c note 1). */
	if (perm)
		sqlite3_bind_int64(st, 8, perm->id);
	if (perm && (perm->mode & 0444) != 0444) {
		sqlite3_bind_int64(st, 9, perm->mode);
		sqlite3_bind_int64(st, 10, perm->uid);
		sqlite3_bind_int64(st, 11, perm->gid);
	}
	sqlite3_bind_int64(st, 12, wall);
	sqlite3_bind_int64(st, 13, len);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		t->ev_known = false;
		return store__sqlerr(t, rc, "change stream", err);
	}
	t->ev_seq = seq;
	t->ev_ts = ts;
	if (seq_out)
		*seq_out = seq;
	if (off_db >= 0)
		t->ev_end = off_db + len;
	if (off_coll >= 0)
		t->ev_cend = off_coll + len;
	if (seq % 16 == 0 && off_db >= 0)
		return events_trim(t, off_db, err);
	return 0;
}

static void append_ns(bson_t *b, const char *key, const char *db, const char *coll)
{
	bson_t ns;

	bson_append_document_begin(b, key, -1, &ns);
	BSON_APPEND_UTF8(&ns, "db", db);
	if (coll)
		BSON_APPEND_UTF8(&ns, "coll", coll);
	bson_append_document_end(b, &ns);
}

/* The name of collection coll, kept in t for the next event (a bulk insert's are all of
 * one collection). */
static int coll_name(struct store_txn *t, int64_t coll, char *out, size_t cap,
		     struct dfs_err *err)
{
	struct store_coll c;
	int rc;

	if (coll != t->ev_collid) {
		if ((rc = store_coll_by_id(t, coll, &c, err)))
			return rc;
		snprintf(t->ev_collname, sizeof(t->ev_collname), "%s", c.name);
		t->ev_collid = coll;
	}
	snprintf(out, cap, "%s", t->ev_collname);
	return 0;
}

int store__ev_next(struct store_txn *t, int64_t *seq, struct dfs_err *err)
{
	int rc = 0;

	*seq = 0;
	if (!t->ev_known) {
		int64_t keep = meta_get(t, "events_keep", EVENTS_KEEP_DEFAULT);
		int64_t last = step_int(t, ST_EV_LAST_SEQ, NULL, 0, &rc, err);

		if (rc)
			return rc;
		*seq = keep ? last + 1 : 0;
		return 0;
	}
	*seq = t->ev_off ? 0 : t->ev_seq + 1;
	return 0;
}

int store__ev_keep_doc(struct store_txn *t, int64_t id, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_EV_KEEP_DOC, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "keep a document for the change stream", err);
	return 0;
}

int store__ev_doc(struct store_txn *t, int op, int64_t coll, const struct store__perm *perm,
		  const bson_t *old, const bson_t *doc, int64_t ref, struct dfs_err *err)
{
	char name[DFS_MAX_NS_NAME + 1];
	bool full = op == STORE_EV_INSERT || op == STORE_EV_REPLACE;
	int64_t seq;
	bson_iter_t it;
	bson_t rest, dk;
	int rc;

	if ((rc = coll_name(t, coll, name, sizeof(name), err)))
		return rc;
	if (!bson_iter_init_find(&it, doc, "_id"))
		return dfs_err_set(err, DFS_EINVAL, "change event of a document without _id");
	bson_init(&rest);
	if (!full) {
		BSON_APPEND_DOCUMENT_BEGIN(&rest, "documentKey", &dk);
		bson_append_iter(&dk, "_id", 3, &it);
		bson_append_document_end(&rest, &dk);
	}
	if (op == STORE_EV_UPDATE) {
		bson_t ud, u, rm, tr;

		BSON_APPEND_DOCUMENT_BEGIN(&rest, "updateDescription", &ud);
		BSON_APPEND_DOCUMENT_BEGIN(&ud, "updatedFields", &u);
		bson_init(&rm);
		bson_init(&tr);
		store__doc_diff(old, doc, &u, &rm, &tr); /* linear in the two sizes (docdiff.c) */
		bson_append_document_end(&ud, &u);
		bson_append_array(&ud, "removedFields", -1, &rm);
		bson_append_array(&ud, "truncatedArrays", -1, &tr);
		bson_destroy(&rm);
		bson_destroy(&tr);
		bson_append_document_end(&rest, &ud);
	}
	rc = event_add(t, op, name, true, perm, full ? doc : NULL, full ? NULL : &rest, &seq,
		       err);
	bson_destroy(&rest);
	if (rc || !full || seq == ref)
		return rc;
	/* The row names another event than the one recorded (note 6): put it right. */
	{
		sqlite3_stmt *st = store__stmt(t, ST_EV_SET_REF, err);

		if (!st)
			return err ? err->code : DFS_EIO;
		sqlite3_bind_int64(st, 1, perm->id);
		if (seq)
			sqlite3_bind_int64(st, 2, seq);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc != SQLITE_DONE)
			return store__sqlerr(t, rc, "change stream", err);
	}
	return 0;
}

int store__ev_coll(struct store_txn *t, int op, const char *coll, const char *to,
		   struct dfs_err *err)
{
	bson_t rest;
	int rc;

	bson_init(&rest);
	if (to)
		append_ns(&rest, "to", t->db->name, to);
	rc = event_add(t, op, coll, true, NULL, NULL, &rest, NULL, err);
	bson_destroy(&rest);
	if (!rc && (op == STORE_EV_DROP || op == STORE_EV_RENAME))
		rc = event_add(t, STORE_EV_INVALIDATE, coll, false, NULL, NULL, NULL, NULL, err);
	return rc;
}

int store__ev_index(struct store_txn *t, int op, int64_t coll, const bson_t *spec,
		    struct dfs_err *err)
{
	char name[DFS_MAX_NS_NAME + 1];
	bson_t rest, od, arr;
	int rc;

	if ((rc = coll_name(t, coll, name, sizeof(name), err)))
		return rc;
	bson_init(&rest);
	BSON_APPEND_DOCUMENT_BEGIN(&rest, "operationDescription", &od);
	BSON_APPEND_ARRAY_BEGIN(&od, "indexes", &arr);
	BSON_APPEND_DOCUMENT(&arr, "0", spec);
	bson_append_array_end(&od, &arr);
	bson_append_document_end(&rest, &od);
	rc = event_add(t, op, name, true, NULL, NULL, &rest, NULL, err);
	bson_destroy(&rest);
	return rc;
}

/* ---- reading ------------------------------------------------------------------------ */

/* Fills e from a row of EV_COLS, EV_PERM (db.c), rendering a compact row's line into buf
 * (note 6). */
static int event_from_row(struct store_txn *t, sqlite3_stmt *st, struct store_event *e,
			  struct dfs_buf *buf, struct dfs_err *err)
{
	e->seq = sqlite3_column_int64(st, 0);
	e->ts = (uint64_t)sqlite3_column_int64(st, 1);
	e->coll = (const char *)sqlite3_column_text(st, 2);
	e->op = sqlite3_column_int(st, 3);
	e->off = sqlite3_column_int64(st, 5);
	/* Hidden when its document was not for the reader then, or is not now (db.c's
	 * EV_PERM). */
	e->hidden = false;
	for (int c = 6; c <= 9 && !e->hidden; c += 3)
		e->hidden = sqlite3_column_type(st, c) != SQLITE_NULL &&
			    !store_txn_allows(t, (uint32_t)sqlite3_column_int64(st, c),
					      (uint32_t)sqlite3_column_int64(st, c + 1),
					      (uint32_t)sqlite3_column_int64(st, c + 2));
	if (sqlite3_column_type(st, 13) == SQLITE_NULL) { /* a version-8 row: the text */
		e->line = sqlite3_column_blob(st, 4);
		e->len = (size_t)sqlite3_column_bytes(st, 4);
		return 0;
	}
	e->len = (size_t)sqlite3_column_int64(st, 13);
	dfs_buf_reset(buf);
	if (e->hidden) {
		/* Nothing of it is rendered: its place reads as blanks (fs/paths/changes.c). */
		for (size_t i = 0; i < e->len; i++)
			dfs_buf_putc(buf, i + 1 == e->len ? '\n' : ' ');
	} else {
		bool full = e->op == STORE_EV_INSERT || e->op == STORE_EV_REPLACE;
		int col = full ? 14 : 4, n = sqlite3_column_bytes(st, col);
		const void *data = sqlite3_column_blob(st, col);
		bson_t stored;
		int rc;

		if (full && sqlite3_column_type(st, 14) == SQLITE_NULL)
			return dfs_err_set(err, DFS_EIO,
					   "change event %lld: the document it shows is missing",
					   (long long)e->seq);
		if (n == 0) {
			bson_init(&stored);
		} else if (n < 5 || !bson_init_static(&stored, data, (size_t)n)) {
			return dfs_err_set(err, DFS_EIO, "change event %lld is not valid BSON",
					   (long long)e->seq);
		}
		rc = ev_render(t->db, e->op, e->coll, e->seq, e->ts, sqlite3_column_int64(st, 12),
			       full ? &stored : NULL, false, full ? NULL : &stored, buf, err);
		bson_destroy(&stored);
		if (rc)
			return rc;
		if (buf->len != e->len)
			return dfs_err_set(err, DFS_EIO,
					   "change event %lld renders to %zu bytes, not the %zu "
					   "recorded",
					   (long long)e->seq, buf->len, e->len);
	}
	e->line = buf->data;
	return 0;
}

static int events_run(struct store_txn *t, sqlite3_stmt *st,
		      int (*cb)(void *ctx, const struct store_event *e), void *ctx,
		      struct dfs_err *err)
{
	struct store_event e;
	struct dfs_buf buf;
	int rc;

	dfs_buf_init(&buf);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((rc = event_from_row(t, st, &e, &buf, err))) {
			sqlite3_reset(st);
			dfs_buf_release(&buf);
			return rc;
		}
		if ((rc = cb(ctx, &e))) {
			sqlite3_reset(st);
			dfs_buf_release(&buf);
			return rc > 0 ? 0 : rc;
		}
	}
	sqlite3_reset(st);
	dfs_buf_release(&buf);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "read change stream", err);
	return 0;
}

int store_events_list(struct store_txn *t, const char *coll, int64_t after,
		      int (*cb)(void *ctx, const struct store_event *e), void *ctx,
		      struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, coll ? ST_EV_LIST_COLL : ST_EV_LIST_DB, err);

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, after);
	if (coll)
		sqlite3_bind_text(st, 2, coll, -1, SQLITE_TRANSIENT);
	return events_run(t, st, cb, ctx, err);
}

int store_events_from(struct store_txn *t, const char *coll, int64_t off,
		      int (*cb)(void *ctx, const struct store_event *e), void *ctx,
		      struct dfs_err *err)
{
	sqlite3_stmt *st;
	int64_t from = off;
	int rc;

	if (!coll && (rc = db_seq_at(t, off, &from, err))) /* ?1: a seq (note 7) */
		return rc;
	st = store__stmt(t, coll ? ST_EV_FROM_COLL : ST_EV_FROM_DB, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, from);
	if (coll)
		sqlite3_bind_text(st, 2, coll, -1, SQLITE_TRANSIENT);
	return events_run(t, st, cb, ctx, err);
}

int store_events_span(struct store_txn *t, const char *coll, struct store_events_span *out,
		      struct dfs_err *err)
{
	int rc = 0;

	out->end = step_int(t, coll ? ST_EV_END_COLL : ST_EV_END_DB, coll, 0, &rc, err);
	out->start = step_int(t, coll ? ST_EV_START_COLL : ST_EV_START_DB, coll, out->end, &rc,
			      err);
	out->last_seq = step_int(t, ST_EV_LAST_SEQ, NULL, 0, &rc, err);
	out->cut = meta_get(t, "events_cut", 0);
	out->dbnum = t->db->num;
	return rc;
}
