/*
 * profile.c - the database profiler: the settings behind `<db>/.profile` (MongoDB's
 * profile command: level 0/1/2, slowms, sampleRate, filter), the entries written to
 * `<db>/system.profile` (a 1 MB capped collection, store_coll_profile), and the slow-query
 * lines of the log (MongoDB 4.4's JSON shape, id 51803). curop.c hands every operation that
 * ended to fs_profile_op; what an operation is and how it is counted lives there.
 *
 * As in MongoDB: settings do not survive a restart; slowms and sampleRate are the whole
 * daemon's (the last write to any .profile sets them), the level and the filter are each
 * database's; a filter, when set, decides instead of slowms and sampleRate. Unlike
 * MongoDB, operations on system.profile itself are not profiled, so reading the profile
 * does not grow it.
 */
#include "fs_int.h"
#include "query.h"

#include <inttypes.h>
#include <pthread.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct prof_db {
	char name[DFS_MAX_NS_NAME + 1];
	int level;		 /* 0, 1, 2 */
	bson_t *filter;		 /* Owned, or NULL */
	struct query_expr *expr; /* Owned: filter parsed */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct prof_db *dbs; /* Owned: ndbs, one per database ever configured */
static size_t ndbs;
static int64_t slowms = 100;
static double sample_rate = 1.0;

/* The settings of db (lock held); NULL when never set (and add false). */
static struct prof_db *prof_get(const char *db, bool add)
{
	struct prof_db *d;

	for (size_t i = 0; i < ndbs; i++)
		if (!strcmp(dbs[i].name, db))
			return &dbs[i];
	if (!add || !(d = realloc(dbs, (ndbs + 1) * sizeof(*d))))
		return NULL;
	dbs = d;
	d = &dbs[ndbs++];
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", db);
	return d;
}

void fs_profile_render(const char *db, struct dfs_buf *out)
{
	struct dfs_err err = {0};
	bson_t doc = BSON_INITIALIZER;

	fs_profile_doc(db, &doc);
	if (store_codec_render(&doc, STORE_RENDER_PRETTY, out, &err))
		dfs_buf_printf(out, "{\"ok\": 0, \"errmsg\": \"%s\"}\n", err.msg);
	bson_destroy(&doc);
}

void fs_profile_doc(const char *db, bson_t *out)
{
	struct prof_db *d;
	bson_t doc;

	bson_init(&doc);
	pthread_mutex_lock(&lock);
	d = prof_get(db, false);
	/* getProfilingStatus's shape: "was" is the level now */
	bson_append_int32(&doc, "was", -1, d ? d->level : 0);
	if (slowms >= INT32_MIN && slowms <= INT32_MAX)
		bson_append_int32(&doc, "slowms", -1, (int32_t)slowms);
	else
		bson_append_int64(&doc, "slowms", -1, slowms);
	BSON_APPEND_DOUBLE(&doc, "sampleRate", sample_rate);
	if (d && d->filter) {
		BSON_APPEND_DOCUMENT(&doc, "filter", d->filter);
		BSON_APPEND_UTF8(&doc, "note",
				 "with a filter set, slowms and sampleRate do not decide what is "
				 "profiled or logged");
	}
	pthread_mutex_unlock(&lock);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	bson_concat(out, &doc);
	bson_destroy(&doc);
}

/* A number field as an int64 (whole numbers only). */
static int whole(bson_iter_t *it, const char *what, int64_t *out, struct dfs_err *err)
{
	double d;

	if (!BSON_ITER_HOLDS_NUMBER(it))
		return dfs_err_set(err, DFS_EINVAL, "'.profile': %s must be a number", what);
	d = bson_iter_as_double(it);
	if (d != floor(d) || d < -1e15 || d > 1e15)
		return dfs_err_set(err, DFS_EINVAL, "'.profile': %s must be a whole number", what);
	*out = (int64_t)d;
	return 0;
}

int fs_profile_apply(const char *db, const char *text, size_t len, struct dfs_err *err)
{
	bson_t doc;
	size_t i = 0;
	int rc = 0;

	while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t'))
		i++;
	bson_init(&doc);
	if (i < len && (text[i] == '-' || (text[i] >= '0' && text[i] <= '9'))) {
		/* a bare level: echo 2 > db/.profile */
		rc = store_codec_parse_value(text + i, len - i, &doc, "level", err);
	} else {
		rc = store_codec_parse_doc(text + i, len - i, &doc, err);
	}
	if (rc) {
		dfs_err_prefix(err, "'.profile': ");
		bson_destroy(&doc);
		return rc;
	}
	rc = fs_profile_apply_doc(db, &doc, err);
	bson_destroy(&doc);
	return rc;
}

int fs_profile_apply_doc(const char *db, const bson_t *doc, struct dfs_err *err)
{
	int64_t level = -1, new_slowms = -1;
	double rate = -1;
	bool set_filter = false, unset_filter = false;
	struct query_expr *expr = NULL;
	bson_t *filter = NULL;
	struct prof_db *d;
	bson_iter_t it;
	int rc = 0;

	if (!bson_iter_init(&it, doc))
		goto done;
	while (!rc && bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "level") || !strcmp(k, "profile")) {
			rc = whole(&it, "the level", &level, err);
			if (!rc && (level < -1 || level > 2))
				rc = dfs_err_set(
					err, DFS_EINVAL,
					"'.profile': the level must be 0, 1 or 2, not %" PRId64,
					level);
		} else if (!strcmp(k, "slowms")) {
			rc = whole(&it, "slowms", &new_slowms, err);
		} else if (!strcmp(k, "sampleRate")) {
			if (!BSON_ITER_HOLDS_NUMBER(&it) || (rate = bson_iter_as_double(&it)) < 0 ||
			    rate > 1)
				rc = dfs_err_set(
					err, DFS_EINVAL,
					"'.profile': sampleRate must be a number from 0 to 1");
		} else if (!strcmp(k, "filter")) {
			if (BSON_ITER_HOLDS_UTF8(&it) &&
			    !strcmp(bson_iter_utf8(&it, NULL), "unset")) {
				unset_filter = true;
			} else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
				const uint8_t *data;
				uint32_t n;

				bson_iter_document(&it, &n, &data);
				filter = bson_new_from_data(data, n);
				rc = query_filter_parse(filter, &expr, err);
				if (rc)
					dfs_err_prefix(err, "'.profile': filter: ");
				set_filter = !rc;
			} else {
				rc = dfs_err_set(
					err, DFS_EINVAL,
					"'.profile': filter must be a query document or \"unset\"");
			}
		} else {
			rc = dfs_err_set(
				err, DFS_EINVAL,
				"'.profile': unknown field '%s' (level, slowms, sampleRate, "
				"filter)",
				k);
		}
	}
	if (rc)
		goto done;
	pthread_mutex_lock(&lock);
	d = prof_get(db, true);
	if (!d) {
		pthread_mutex_unlock(&lock);
		rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
		goto done;
	}
	if (level >= 0)
		d->level = (int)level;
	if (new_slowms >= 0 || new_slowms < -1)
		slowms = new_slowms;
	if (rate >= 0)
		sample_rate = rate;
	if (set_filter || unset_filter) {
		bson_destroy(d->filter);
		query_expr_free(d->expr);
		d->filter = filter;
		d->expr = expr;
		filter = NULL;
		expr = NULL;
	}
	fs_log_info("profiler: database '%s' level %d slowms %" PRId64 " sampleRate %g%s", db,
		    d->level, slowms, sample_rate, d->filter ? " with a filter" : "");
	pthread_mutex_unlock(&lock);
done:
	bson_destroy(filter);
	query_expr_free(expr);
	return rc;
}

static const char *const prof_ops[] = {
	[FS_OP_QUERY] = "query",   [FS_OP_GETMORE] = "getmore", [FS_OP_COMMAND] = "command",
	[FS_OP_INSERT] = "insert", [FS_OP_UPDATE] = "update",	[FS_OP_REMOVE] = "remove"};

static void put_num(bson_t *b, const char *key, int64_t v)
{
	if (v >= INT32_MIN && v <= INT32_MAX)
		bson_append_int32(b, key, -1, (int32_t)v);
	else
		bson_append_int64(b, key, -1, v);
}

/* The profile document of op (MongoDB's system.profile fields that docfs knows). */
static void entry_build(const struct fs_curop *op, int rc, int64_t micros, bson_t *e)
{
	char client[32];

	BSON_APPEND_UTF8(e, "op", prof_ops[op->kind]);
	BSON_APPEND_UTF8(e, "ns", op->ns);
	BSON_APPEND_DOCUMENT(e, "command", &op->command);
	put_num(e, "keysExamined", op->keys);
	put_num(e, "docsExamined", op->docs);
	if (op->sorted)
		BSON_APPEND_BOOL(e, "hasSortStage", true);
	if (op->kind == FS_OP_QUERY || op->kind == FS_OP_GETMORE || op->kind == FS_OP_COMMAND)
		put_num(e, "nreturned", op->nreturned);
	if (op->kind == FS_OP_INSERT)
		put_num(e, "ninserted", op->ninserted);
	if (op->kind == FS_OP_UPDATE) {
		put_num(e, "nMatched", op->nmatched);
		put_num(e, "nModified", op->nmodified);
	}
	if (op->kind == FS_OP_REMOVE)
		put_num(e, "ndeleted", op->ndeleted);
	put_num(e, "responseLength", op->reslen);
	put_num(e, "millis", micros / 1000);
	if (op->plan[0])
		BSON_APPEND_UTF8(e, "planSummary", op->plan);
	if (rc) {
		bool timeout = rc == DFS_ETIMEDOUT, killed = rc == DFS_EINTR;

		BSON_APPEND_DOUBLE(e, "ok", 0.0);
		if (timeout || killed) {
			BSON_APPEND_INT32(e, "errCode", timeout ? 50 : 11601);
			BSON_APPEND_UTF8(e, "errName",
					 timeout ? "MaxTimeMSExpired" : "Interrupted");
		}
	}
	{
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		BSON_APPEND_DATE_TIME(e, "ts", (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
	}
	snprintf(client, sizeof(client), "pid %d", op->client);
	BSON_APPEND_UTF8(e, "client",
			 op->client_addr[0] ? op->client_addr
			 : op->client	    ? client
					    : "");
	BSON_APPEND_UTF8(e, "user", "");
}

/* Writes e to db's system.profile (a write transaction of its own). */
static void entry_write(const char *dbname, const bson_t *e)
{
	struct dfs_err err = {0};
	struct store_coll c;
	struct store_db *db;
	struct store_txn *t;
	bson_t doc;
	bson_oid_t oid;
	int rc;

	if (!fs_store || store_db_get(fs_store, dbname, false, &db, &err))
		return;
	bson_init(&doc);
	bson_oid_init(&oid, NULL);
	BSON_APPEND_OID(&doc, "_id", &oid);
	bson_concat(&doc, e);
	/* Not store_doc_prepare: a profile entry holds the command as it was, $-names and
	 * all (MongoDB's system.profile does too); _id is first already. */
	rc = store_txn_begin(db, true, &t, &err);
	if (!rc) {
		struct store_attrs a = {.mode = 0644, .uid = getuid(), .gid = getgid()};

		rc = store_coll_profile(t, &c, &err);
		if (!rc)
			rc = store_doc_insert(t, c.id, &doc, &a, NULL, &err);
		if (!rc)
			rc = store_txn_commit(t, &err);
		else
			store_txn_abort(t);
	}
	if (rc)
		fs_errlog_add("profiler: cannot write to '%s.system.profile': %s", dbname, err.msg);
	bson_destroy(&doc);
}

/* The slow-query line of e, as MongoDB 4.4+ logs it. */
static void slow_log(const struct fs_curop *op, const bson_t *e, int64_t micros)
{
	struct dfs_err err = {0};
	struct dfs_buf line;
	char stamp[40];
	struct timespec ts;
	struct tm tm;
	bson_t attr;
	bson_iter_t it;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, 24, "%Y-%m-%dT%H:%M:%S", &tm);
	bson_init(&attr);
	BSON_APPEND_UTF8(&attr, "type", prof_ops[op->kind]);
	if (bson_iter_init(&it, e))
		while (bson_iter_next(&it)) {
			const char *k = bson_iter_key(&it);

			if (!strcmp(k, "op") || !strcmp(k, "ts") || !strcmp(k, "millis") ||
			    !strcmp(k, "user") || !strcmp(k, "client"))
				continue;
			bson_append_iter(&attr, !strcmp(k, "responseLength") ? "reslen" : k, -1,
					 &it);
		}
	put_num(&attr, "durationMillis", micros / 1000);
	dfs_buf_init(&line);
	dfs_buf_printf(
		&line,
		"{\"t\":{\"$date\":\"%s.%03ldZ\"},\"s\":\"I\",\"c\":\"COMMAND\",\"id\":51803,"
		"\"ctx\":\"conn%d\",\"msg\":\"Slow query\",\"attr\":",
		stamp, ts.tv_nsec / 1000000, op->client);
	if (!store_codec_render(&attr, STORE_RENDER_COMPACT, &line, &err)) {
		while (line.len && line.data[line.len - 1] == '\n')
			line.data[--line.len] = '\0';
		dfs_buf_putc(&line, '}');
		fs_log_raw(line.data);
	}
	dfs_buf_release(&line);
	bson_destroy(&attr);
}

void fs_profile_op(const struct fs_curop *op, int rc, int64_t micros)
{
	char prof_ns[2 * DFS_MAX_NS_NAME + 2];
	bool profile = false, log = false, sampled;
	struct prof_db *d;
	bson_t e;

	if (!op->db[0])
		return;
	snprintf(prof_ns, sizeof(prof_ns), "%s." STORE_PROFILE_COLL, op->db);
	if (!strcmp(op->ns, prof_ns))
		return;
	bson_init(&e);
	pthread_mutex_lock(&lock);
	d = prof_get(op->db, false);
	sampled = sample_rate >= 1.0 || drand48() < sample_rate;
	if (d && d->expr) {
		entry_build(op, rc, micros, &e);
		log = profile = query_filter_match(d->expr, &e, NULL);
		profile = profile && d->level >= 1;
	} else {
		log = micros / 1000 >= slowms && sampled;
		profile = d && (d->level == 2 || (d->level == 1 && log));
	}
	pthread_mutex_unlock(&lock);
	if ((profile || log) && bson_empty(&e))
		entry_build(op, rc, micros, &e);
	if (log)
		slow_log(op, &e, micros);
	if (profile)
		entry_write(op->db, &e);
	bson_destroy(&e);
}
