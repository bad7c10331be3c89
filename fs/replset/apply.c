/*
 * apply.c - a secondary's applier: a thread that tails its primary's store-wide change
 * stream over the wire protocol (libmongoc as the client: this file and initsync.c only)
 * and applies each event to its own store through the engine's commands
 * (wire_command_local), keeping where it stands in its own store; it starts an initial
 * sync when the member has nothing to resume from (initsync.c copies). It does not choose
 * whom to follow (member.c does) and does not roll back (not built).
 *
 * Design notes
 * 1. Every event is applied idempotently, so applying one twice is harmless and a restart
 *    may begin anywhere before the last event applied: an insert or replace is an upsert
 *    of the whole document by _id; an update sets the updateDescription's resulting values
 *    ($set of updatedFields, $unset of removedFields, truncatedArrays as a $push with
 *    $slice before them); a delete deletes by _id; drop, rename, createIndexes and
 *    dropIndexes run as commands whose "already done" errors (NamespaceNotFound,
 *    IndexNotFound) are not failures. Events of database "local" (where this file keeps
 *    its place) are not applied: each member's "local" is its own, as in MongoDB.
 * 2. Where it stands is local.replset {_id: "sync", host, term, token, optime}: the
 *    primary followed, its term, the resume token of the last event applied and that
 *    event's position. It is written after each event in its own transaction (a database
 *    of its own, so not in the transaction of the applied write, which is in another
 *    database's file): a crash between the two replays that event, which note 1 makes
 *    harmless.
 * 3. Where a stream starts: first, when the member must copy everything (initsync.c
 *    note 1: a new or wiped member, or an initial sync left unfinished), a stream opened
 *    with no start option holds the primary's position, the copy is made
 *    (rs_initial_sync), and that stream is read on: the writes made during the copy are
 *    applied after it (initsync.c note 4). Else after the saved token when the primary and
 *    term are the saved ones; else (a new primary) at the saved position's clusterTime less
 *    RESTART_MARGIN_S seconds: the new primary applied every event we lack after it was
 *    made, so at a later clusterTime of its own, and what is replayed twice is harmless;
 *    else (a store with data but nothing saved: a former primary that never followed) at
 *    the start of the primary's kept history (startAtOperationTime 1).
 * 4. A resume point the primary no longer has (ChangeStreamHistoryLost: it trimmed the
 *    history, before we resumed or while we read) drops what the member has and copies
 *    everything again, logged, up to SYNC_ATTEMPTS times in a row without catching up. A
 *    feed that cannot be applied otherwise (an event of an unknown kind, a command that
 *    fails) stops the applier and puts the member in RECOVERING with the reason
 *    (rs_node_recovering): it never pretends to be in sync. A primary that does not answer
 *    is retried.
 * 5. The stream has no event for a collection made empty or for its options (capped,
 *    validator): a caught-up member (nothing pending) compares its collections with the
 *    primary's at most once per CATALOG_MS and makes what differs the same
 *    (rs_catalog_sync, initsync.c note 6).
 *
 * Thread-safety: a struct rs_apply is its thread's; rs_apply_stop may be called from any.
 */
#include "replset.h"

#include "fs_int.h"
#include "wire.h"

#include <mongoc/mongoc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RESTART_MARGIN_S 30 /* note 3 */
#define AWAIT_MS 200	    /* how long a getMore waits for events */
#define SYNC_ATTEMPTS 5	    /* initial syncs in a row whose history was lost */
#define CATALOG_MS 1000	    /* how often a caught-up member compares collections */
#define PROGRESS_COLL "replset"

struct rs_apply {
	struct rs_node *n;	/* Borrowed: the member */
	struct store *s;	/* Borrowed: its store */
	char host[RS_HOST_MAX]; /* the primary followed */
	int64_t term;		/* its term */
	pthread_t th;		/* the thread */
	atomic_bool stop;	/* rs_apply_stop asked */
};

static pthread_once_t mongoc_once = PTHREAD_ONCE_INIT;

static void init_mongoc(void)
{
	mongoc_init();
}

int rs_local_run(struct store *s, const char *db, const bson_t *cmd, char *why, size_t cap)
{
	bson_t reply = BSON_INITIALIZER;
	bson_iter_t it, e;
	int rc = wire_command_local(s, db, cmd, &reply);

	if (!rc && bson_iter_init_find(&it, &reply, "writeErrors") && bson_iter_recurse(&it, &e) &&
	    bson_iter_next(&e)) {
		bson_iter_t f;

		bson_iter_recurse(&e, &f);
		rc = bson_iter_find(&f, "code") ? (int)bson_iter_as_int64(&f) : 1;
		bson_iter_recurse(&e, &f);
		snprintf(why, cap, "%s",
			 bson_iter_find(&f, "errmsg") ? bson_iter_utf8(&f, NULL) : "write error");
	} else if (rc) {
		snprintf(why, cap, "%s",
			 bson_iter_init_find(&it, &reply, "errmsg") ? bson_iter_utf8(&it, NULL)
								    : "failed");
	}
	bson_destroy(&reply);
	return rc;
}

static int run(struct rs_apply *a, const char *db, const bson_t *cmd, char *why, size_t cap)
{
	return rs_local_run(a->s, db, cmd, why, cap);
}

static bool sub_of(const bson_t *d, const char *path, bson_t *view)
{
	bson_iter_t it, f;
	const uint8_t *data;
	uint32_t len;

	if (!bson_iter_init(&it, d) || !bson_iter_find_descendant(&it, path, &f))
		return false;
	if (BSON_ITER_HOLDS_DOCUMENT(&f))
		bson_iter_document(&f, &len, &data);
	else if (BSON_ITER_HOLDS_ARRAY(&f))
		bson_iter_array(&f, &len, &data);
	else
		return false;
	return bson_init_static(view, data, len);
}

static const char *str_of(const bson_t *d, const char *path)
{
	bson_iter_t it, f;

	if (bson_iter_init(&it, d) && bson_iter_find_descendant(&it, path, &f) &&
	    BSON_ITER_HOLDS_UTF8(&f))
		return bson_iter_utf8(&f, NULL);
	return NULL;
}

/* {q: {_id: <documentKey._id>}} begun in stmt (a statement of an update or delete). */
static bool append_id_query(const bson_t *ev, bson_t *stmt)
{
	bson_iter_t it, f;
	bson_t q;

	if (!bson_iter_init(&it, ev) || !bson_iter_find_descendant(&it, "documentKey._id", &f))
		return false;
	BSON_APPEND_DOCUMENT_BEGIN(stmt, "q", &q);
	bson_append_iter(&q, "_id", -1, &f);
	bson_append_document_end(stmt, &q);
	return true;
}

/* An update command of one statement: q by _id, u, upsert. */
static int update_one(struct rs_apply *a, const char *db, const char *coll, const bson_t *ev,
		      const bson_t *u, bool upsert, char *why, size_t cap)
{
	bson_t cmd = BSON_INITIALIZER, arr, stmt;
	int rc;

	BSON_APPEND_UTF8(&cmd, "update", coll);
	BSON_APPEND_ARRAY_BEGIN(&cmd, "updates", &arr);
	BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
	if (!append_id_query(ev, &stmt)) {
		bson_destroy(&cmd);
		snprintf(why, cap, "an event without documentKey._id");
		return 1;
	}
	BSON_APPEND_DOCUMENT(&stmt, "u", u);
	BSON_APPEND_BOOL(&stmt, "upsert", upsert);
	bson_append_document_end(&arr, &stmt);
	bson_append_array_end(&cmd, &arr);
	rc = run(a, db, &cmd, why, cap);
	bson_destroy(&cmd);
	return rc;
}

/* An update event as idempotent operators (note 1). */
static int apply_update(struct rs_apply *a, const char *db, const char *coll, const bson_t *ev,
			char *why, size_t cap)
{
	bson_t fields, removed, trunc, u = BSON_INITIALIZER, sub;
	bson_iter_t it;
	int rc = 0;

	if (sub_of(ev, "updateDescription.truncatedArrays", &trunc) && !bson_empty(&trunc)) {
		bson_t push = BSON_INITIALIZER, ops;

		BSON_APPEND_DOCUMENT_BEGIN(&push, "$push", &ops);
		bson_iter_init(&it, &trunc);
		while (bson_iter_next(&it)) {
			bson_t one, each;
			bson_iter_t f;
			const char *field = NULL;
			int64_t size = 0;

			if (!BSON_ITER_HOLDS_DOCUMENT(&it))
				continue;
			bson_iter_recurse(&it, &f);
			while (bson_iter_next(&f)) {
				if (!strcmp(bson_iter_key(&f), "field") && BSON_ITER_HOLDS_UTF8(&f))
					field = bson_iter_utf8(&f, NULL);
				else if (!strcmp(bson_iter_key(&f), "newSize"))
					size = bson_iter_as_int64(&f);
			}
			if (!field)
				continue;
			BSON_APPEND_DOCUMENT_BEGIN(&ops, field, &one);
			BSON_APPEND_ARRAY_BEGIN(&one, "$each", &each);
			bson_append_array_end(&one, &each);
			BSON_APPEND_INT64(&one, "$slice", size);
			bson_append_document_end(&ops, &one);
		}
		bson_append_document_end(&push, &ops);
		rc = update_one(a, db, coll, ev, &push, false, why, cap);
		bson_destroy(&push);
		if (rc)
			return rc;
	}
	if (sub_of(ev, "updateDescription.updatedFields", &fields) && !bson_empty(&fields))
		BSON_APPEND_DOCUMENT(&u, "$set", &fields);
	if (sub_of(ev, "updateDescription.removedFields", &removed) && !bson_empty(&removed)) {
		BSON_APPEND_DOCUMENT_BEGIN(&u, "$unset", &sub);
		bson_iter_init(&it, &removed);
		while (bson_iter_next(&it))
			if (BSON_ITER_HOLDS_UTF8(&it))
				BSON_APPEND_UTF8(&sub, bson_iter_utf8(&it, NULL), "");
		bson_append_document_end(&u, &sub);
	}
	if (!bson_empty(&u))
		rc = update_one(a, db, coll, ev, &u, false, why, cap);
	bson_destroy(&u);
	return rc;
}

/* One event (note 1): 0, or nonzero with why. */
static int apply_event(struct rs_apply *a, const bson_t *ev, char *why, size_t cap)
{
	const char *op = str_of(ev, "operationType"), *db = str_of(ev, "ns.db"),
		   *coll = str_of(ev, "ns.coll");
	bson_t cmd = BSON_INITIALIZER, doc, specs;
	bson_iter_t it;
	int rc = 0;

	if (!op) {
		snprintf(why, cap, "an event without operationType");
		return 1;
	}
	if (db && !strcmp(db, "local"))
		return 0;
	if (!strcmp(op, "invalidate"))
		return 0;
	if (!db || (!coll && strcmp(op, "dropDatabase"))) {
		snprintf(why, cap, "a %s event without its namespace", op);
		return 1;
	}
	if (!strcmp(op, "insert") || !strcmp(op, "replace")) {
		if (!sub_of(ev, "fullDocument", &doc)) {
			snprintf(why, cap, "an %s event without fullDocument", op);
			return 1;
		}
		rc = update_one(a, db, coll, ev, &doc, true, why, cap);
	} else if (!strcmp(op, "update")) {
		rc = apply_update(a, db, coll, ev, why, cap);
	} else if (!strcmp(op, "delete")) {
		bson_t arr, stmt;

		BSON_APPEND_UTF8(&cmd, "delete", coll);
		BSON_APPEND_ARRAY_BEGIN(&cmd, "deletes", &arr);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
		append_id_query(ev, &stmt);
		BSON_APPEND_INT32(&stmt, "limit", 1);
		bson_append_document_end(&arr, &stmt);
		bson_append_array_end(&cmd, &arr);
		rc = run(a, db, &cmd, why, cap);
	} else if (!strcmp(op, "drop")) {
		BSON_APPEND_UTF8(&cmd, "drop", coll);
		rc = run(a, db, &cmd, why, cap);
		if (rc == 26)
			rc = 0; /* dropped already */
	} else if (!strcmp(op, "dropDatabase")) {
		BSON_APPEND_INT32(&cmd, "dropDatabase", 1);
		rc = run(a, db, &cmd, why, cap);
	} else if (!strcmp(op, "rename")) {
		const char *tdb = str_of(ev, "to.db"), *tcoll = str_of(ev, "to.coll");
		char from[2 * DFS_MAX_NS_NAME + 2], to[2 * DFS_MAX_NS_NAME + 2];

		if (!tdb || !tcoll) {
			snprintf(why, cap, "a rename event without 'to'");
			rc = 1;
		} else {
			snprintf(from, sizeof(from), "%s.%s", db, coll);
			snprintf(to, sizeof(to), "%s.%s", tdb, tcoll);
			BSON_APPEND_UTF8(&cmd, "renameCollection", from);
			BSON_APPEND_UTF8(&cmd, "to", to);
			BSON_APPEND_BOOL(&cmd, "dropTarget", true);
			rc = run(a, "admin", &cmd, why, cap);
			if (rc == 26)
				rc = 0; /* renamed already */
		}
	} else if (!strcmp(op, "createIndexes") &&
		   sub_of(ev, "operationDescription.indexes", &specs)) {
		BSON_APPEND_UTF8(&cmd, "createIndexes", coll);
		BSON_APPEND_ARRAY(&cmd, "indexes", &specs);
		rc = run(a, db, &cmd, why, cap);
	} else if (!strcmp(op, "dropIndexes") &&
		   sub_of(ev, "operationDescription.indexes", &specs)) {
		bson_iter_init(&it, &specs);
		while (!rc && bson_iter_next(&it)) {
			bson_t spec;
			const char *name;

			if (!BSON_ITER_HOLDS_DOCUMENT(&it))
				continue;
			sub_of(&specs, bson_iter_key(&it), &spec);
			if (!(name = str_of(&spec, "name")))
				continue;
			bson_reinit(&cmd);
			BSON_APPEND_UTF8(&cmd, "dropIndexes", coll);
			BSON_APPEND_UTF8(&cmd, "index", name);
			rc = run(a, db, &cmd, why, cap);
			if (rc == 27 || rc == 26)
				rc = 0; /* dropped already */
		}
	} else {
		snprintf(why, cap, "an event of a kind this member cannot apply: '%s'", op);
		rc = 1;
	}
	bson_destroy(&cmd);
	return rc;
}

/* Saves where we stand (note 2). */
static int save(struct rs_apply *a, const bson_t *token, const struct rs_optime *op, char *why,
		size_t cap)
{
	bson_t cmd = BSON_INITIALIZER, arr, stmt, q, u, o;
	int rc;

	BSON_APPEND_UTF8(&cmd, "update", PROGRESS_COLL);
	BSON_APPEND_ARRAY_BEGIN(&cmd, "updates", &arr);
	BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
	BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
	BSON_APPEND_UTF8(&q, "_id", "sync");
	bson_append_document_end(&stmt, &q);
	BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
	BSON_APPEND_UTF8(&u, "_id", "sync");
	BSON_APPEND_UTF8(&u, "host", a->host);
	BSON_APPEND_INT64(&u, "term", a->term);
	BSON_APPEND_DOCUMENT(&u, "token", token);
	BSON_APPEND_DOCUMENT_BEGIN(&u, "optime", &o);
	BSON_APPEND_TIMESTAMP(&o, "ts", (uint32_t)(op->ts >> 32), (uint32_t)op->ts);
	BSON_APPEND_INT64(&o, "t", op->t);
	bson_append_document_end(&u, &o);
	bson_append_document_end(&stmt, &u);
	BSON_APPEND_BOOL(&stmt, "upsert", true);
	bson_append_document_end(&arr, &stmt);
	bson_append_array_end(&cmd, &arr);
	rc = run(a, "local", &cmd, why, cap);
	bson_destroy(&cmd);
	return rc;
}

/* The saved progress document into out (initialised here): 0, or DFS_ENOENT. */
static int saved_doc(struct store *s, bson_t *out)
{
	bson_t cmd = BSON_INITIALIZER, reply = BSON_INITIALIZER, filter, first;
	int rc;

	bson_init(out);
	BSON_APPEND_UTF8(&cmd, "find", PROGRESS_COLL);
	BSON_APPEND_DOCUMENT_BEGIN(&cmd, "filter", &filter);
	BSON_APPEND_UTF8(&filter, "_id", "sync");
	bson_append_document_end(&cmd, &filter);
	BSON_APPEND_INT32(&cmd, "limit", 1);
	BSON_APPEND_BOOL(&cmd, "singleBatch", true);
	rc = wire_command_local(s, "local", &cmd, &reply);
	if (!rc && sub_of(&reply, "cursor.firstBatch.0", &first))
		bson_concat(out, &first);
	else
		rc = DFS_ENOENT;
	bson_destroy(&cmd);
	bson_destroy(&reply);
	return rc;
}

void rs_apply_saved(struct store *s, struct rs_optime *out)
{
	bson_t d;
	bson_iter_t it, f;

	out->ts = 0;
	out->t = 0;
	if (!saved_doc(s, &d) && bson_iter_init(&it, &d)) {
		if (bson_iter_find_descendant(&it, "optime.ts", &f) &&
		    BSON_ITER_HOLDS_TIMESTAMP(&f)) {
			uint32_t t, i;

			bson_iter_timestamp(&f, &t, &i);
			out->ts = (uint64_t)t << 32 | i;
		}
		if (bson_iter_init(&it, &d) && bson_iter_find_descendant(&it, "optime.t", &f))
			out->t = bson_iter_as_int64(&f);
	}
	bson_destroy(&d);
}

/* The stream's options: where it starts (note 3). */
static void start_opts(struct rs_apply *a, bson_t *opts)
{
	bson_t d, token;
	bson_iter_t it, f;
	const char *host;
	int64_t term = -1;
	uint32_t secs = 0, inc = 0;

	BSON_APPEND_INT64(opts, "maxAwaitTimeMS", AWAIT_MS);
	if (saved_doc(a->s, &d)) {
		bson_destroy(&d);
		BSON_APPEND_TIMESTAMP(opts, "startAtOperationTime", 1, 0);
		return;
	}
	host = str_of(&d, "host");
	if (bson_iter_init_find(&it, &d, "term"))
		term = bson_iter_as_int64(&it);
	if (host && !strcmp(host, a->host) && term == a->term && sub_of(&d, "token", &token)) {
		BSON_APPEND_DOCUMENT(opts, "resumeAfter", &token);
	} else {
		if (bson_iter_init(&it, &d) && bson_iter_find_descendant(&it, "optime.ts", &f) &&
		    BSON_ITER_HOLDS_TIMESTAMP(&f))
			bson_iter_timestamp(&f, &secs, &inc);
		secs = secs > RESTART_MARGIN_S + 1 ? secs - RESTART_MARGIN_S : 1;
		BSON_APPEND_TIMESTAMP(opts, "startAtOperationTime", secs, 0);
	}
	bson_destroy(&d);
}

static void uri_of(const char *host, char *out, size_t cap)
{
	size_t o = (size_t)snprintf(out, cap, "mongodb://");

	for (const char *p = host; *p && o + 4 < cap; p++) /* a Unix socket's '/' as %2F */
		o += (size_t)snprintf(out + o, cap - o, *p == '/' ? "%%2F" : "%c", *p);
	snprintf(out + o, cap - o,
		 "/?directConnection=true&serverSelectionTimeoutMS=2000&connectTimeoutMS=2000");
}

/* Whether a failed stream should be tried again (the primary did not answer) rather than
 * give up (note 4). */
static bool retryable(const bson_error_t *e)
{
	return e->domain != MONGOC_ERROR_SERVER && e->domain != MONGOC_ERROR_QUERY;
}

/* The stream caught up with an initial sync's copy (initsync.c note 4): where it stands
 * saved (when no event was applied since the copy, so a restart resumes rather than
 * copies again), the mark cleared, SECONDARY. */
static int sync_finish(struct rs_apply *a, mongoc_change_stream_t *cs, bool applied_any, int *lost,
		       char *why, size_t cap)
{
	const bson_t *tok = mongoc_change_stream_get_resume_token(cs);
	bson_iter_t it;

	if (!applied_any && tok && bson_iter_init_find(&it, tok, "_data") &&
	    BSON_ITER_HOLDS_UTF8(&it)) {
		struct rs_optime op = {0, a->term};
		struct dfs_err err = {0};
		uint32_t dbnum;
		int64_t seq;

		if (!store_event_token_parse(bson_iter_utf8(&it, NULL), &dbnum, &op.ts, &seq,
					     &err)) {
			if (save(a, tok, &op, why, cap))
				return 1;
			rs_node_applied(a->n, &op);
		}
	}
	if (rs_sync_done(a->s, why, cap))
		return 1;
	rs_node_synced(a->n);
	*lost = 0;
	return 0;
}

static void *thread(void *arg)
{
	struct rs_apply *a = arg;
	char uri[600], why[600];
	bool resync = false;	    /* the primary lost the history we would resume from */
	int lost = 0;		    /* history lost since the last sync that caught up */
	int64_t catalog_at = 0;	    /* rs_mono_ms of the last rs_catalog_sync */
	char catalog_why[600] = ""; /* its last failure logged */

	store_thread_gate_pass(true);
	uri_of(a->host, uri, sizeof(uri));
	while (!atomic_load(&a->stop)) {
		mongoc_client_t *cl = mongoc_client_new(uri);
		mongoc_change_stream_t *cs;
		bson_t pipeline = BSON_INITIALIZER, opts = BSON_INITIALIZER;
		const bson_t *ev, *errdoc;
		bson_error_t e;
		bool failed = false, syncing = false, applied_any = false, retry = false;
		uint64_t min_valid = 0;

		if (!cl) {
			rs_node_recovering(a->n, "the primary's address is not a MongoDB URI");
			break;
		}
		if (resync || rs_sync_needed(a->s)) {
			/* initial sync (initsync.c): the stream opened first holds the position
			 * from before the copy (note 4 there) */
			int rc;

			BSON_APPEND_INT64(&opts, "maxAwaitTimeMS", AWAIT_MS);
			cs = mongoc_client_watch(cl, &pipeline, &opts);
			if (!mongoc_change_stream_error_document(cs, &e, &errdoc)) {
				rc = rs_initial_sync(a->n, a->s, cl, a->host, &a->stop, &min_valid,
						     why, sizeof(why));
				if (rc == RS_SYNC_RETRY) {
					fs_log_info("replica set: %s: trying again", why);
					retry = true;
				} else if (rc && !atomic_load(&a->stop)) {
					rs_node_recovering(a->n, why);
					failed = true;
				} else if (!rc) {
					syncing = true;
					resync = false;
				}
			}
		} else {
			start_opts(a, &opts);
			cs = mongoc_client_watch(cl, &pipeline, &opts);
		}
		while (!failed && !retry && !atomic_load(&a->stop)) {
			int64_t asked = rs_mono_ms(); /* member.c note 7 */

			if (!mongoc_change_stream_next(cs, &ev)) {
				if (mongoc_change_stream_error_document(cs, &e, &errdoc))
					break; /* below */
				rs_node_idle(a->n, asked);
				if (syncing) { /* nothing more: caught up */
					syncing = false;
					if (sync_finish(a, cs, applied_any, &lost, why,
							sizeof(why))) {
						rs_node_recovering(a->n, why);
						failed = true;
					}
				}
				if (!syncing && rs_mono_ms() - catalog_at >= CATALOG_MS) {
					/* caught up: the collections the stream does not carry
					 * (initsync.c note 6) */
					catalog_at = rs_mono_ms();
					if (rs_catalog_sync(a->s, cl, why, sizeof(why)) &&
					    strcmp(why, catalog_why)) {
						fs_errlog_add("replica set: the primary's "
							      "collections: %s",
							      why);
						snprintf(catalog_why, sizeof(catalog_why), "%s",
							 why);
					}
				}
				continue; /* nothing new yet */
			}
			struct rs_optime op = {0, a->term};
			bson_iter_t it;
			bson_t token;
			int rc;

			if (bson_iter_init_find(&it, ev, "clusterTime") &&
			    BSON_ITER_HOLDS_TIMESTAMP(&it)) {
				uint32_t t, i;

				bson_iter_timestamp(&it, &t, &i);
				op.ts = (uint64_t)t << 32 | i;
			}
			rc = apply_event(a, ev, why, sizeof(why));
			if (rc == 11000 && syncing) {
				/* an intermediate state against the copy's later one (initsync.c
				 * note 4) */
				fs_log_info("replica set: initial sync: skipped while catching up: "
					    "%s",
					    why);
				rc = 0;
			}
			if (rc) {
				char msg[900];
				char *text = bson_as_relaxed_extended_json(ev, NULL);

				snprintf(msg, sizeof(msg), "cannot apply %.300s: %.400s",
					 text ? text : "an event", why);
				bson_free(text);
				rs_node_recovering(a->n, msg);
				failed = true;
				break;
			}
			if (!sub_of(ev, "_id", &token) || save(a, &token, &op, why, sizeof(why))) {
				rs_node_recovering(a->n, "cannot keep the applied position");
				failed = true;
				break;
			}
			applied_any = true;
			rs_node_applied(a->n, &op);
			rs_node_applied_db(a->n, str_of(ev, "ns.db"), op.ts); /* member.c note 6 */
			if (syncing && op.ts >= min_valid) {
				syncing = false;
				if (sync_finish(a, cs, true, &lost, why, sizeof(why))) {
					rs_node_recovering(a->n, why);
					failed = true;
				}
			}
		}
		if (!failed && !retry && !atomic_load(&a->stop) &&
		    mongoc_change_stream_error_document(cs, &e, &errdoc)) {
			/* the wire answers the store's refusal as 2 BadValue with the name in
			 * its message */
			if ((e.code == 286 || strstr(e.message, "ChangeStreamHistoryLost")) &&
			    ++lost <= SYNC_ATTEMPTS) {
				/* ChangeStreamHistoryLost: what this member had is dropped and
				 * copied again (initsync.c); during a sync's catch-up, the
				 * primary's kept history did not cover the copy: again, a few
				 * times */
				fs_errlog_add(
					"replica set: the primary %s no longer has the history "
					"this member would resume from (%s): initial sync "
					"again (attempt %d of %d)",
					a->host, e.message, lost, SYNC_ATTEMPTS);
				resync = true;
			} else if (retryable(&e)) {
				fs_log_info("replica set: following %s: %s (%u): trying again",
					    a->host, e.message, e.code);
			} else {
				char msg[700];

				snprintf(msg, sizeof(msg),
					 "the primary's change stream failed: %s (%u)", e.message,
					 e.code);
				rs_node_recovering(a->n, msg);
				failed = true;
			}
		}
		mongoc_change_stream_destroy(cs);
		mongoc_client_destroy(cl);
		bson_destroy(&pipeline);
		bson_destroy(&opts);
		if (failed)
			break;
		for (int i = 0; i < 5 && !atomic_load(&a->stop) && !resync; i++)
			usleep(100 * 1000);
	}
	store_thread_gate_pass(false);
	return NULL;
}

int rs_apply_start(struct rs_node *n, struct store *s, const char *host, int64_t term,
		   struct rs_apply **out, struct dfs_err *err)
{
	struct rs_apply *a = calloc(1, sizeof(*a));

	if (!a)
		abort();
	pthread_once(&mongoc_once, init_mongoc);
	a->n = n;
	a->s = s;
	snprintf(a->host, sizeof(a->host), "%s", host);
	a->term = term;
	atomic_init(&a->stop, false);
	if (pthread_create(&a->th, NULL, thread, a)) {
		free(a);
		return dfs_err_set(err, DFS_EIO, "cannot start the applier's thread");
	}
	*out = a;
	return 0;
}

void rs_apply_stop(struct rs_apply *a)
{
	if (!a)
		return;
	atomic_store(&a->stop, true);
	pthread_join(a->th, NULL);
	free(a);
}
