/*
 * curop.c - the operations a mount runs, while they run and after: the registry behind
 * /.docfs/currentOp and /.docfs/killOp, the counters behind /.docfs/serverStatus
 * (opcounters, opLatencies, metrics, connections, network, mem) and the per-namespace
 * times behind /.docfs/top (mongotop's source). It does not decide what is profiled
 * (profile.c) nor where operations start and end (fsops.c, qpath.c, apath.c, wpath.c).
 *
 * Design notes:
 * 1. An operation is a struct on the stack of the thread that runs it. Beginning it puts
 *    it on one list under one lock and makes it the thread's store stop hook (store.h), so
 *    killOp only sets its flag and the work notices at its next check (a SQLite step, an
 *    executor work() call): nothing is stopped from outside its own thread.
 * 2. The stop hook reads a flag and the coarse monotonic clock only: SQLite calls it from
 *    inside a statement.
 * 3. Counters are atomics, each added once per operation; top's table is a small array of
 *    namespaces under the registry's lock, grown as needed and never shrunk (MongoDB's top
 *    also keeps a namespace until restart).
 */
#include "fs_int.h"
#include "query.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CUROP_KILLED_MSG "operation was interrupted (11601 Interrupted): killed by killOp"
#define CUROP_TIMEOUT_MSG "operation exceeded time limit (50 MaxTimeMSExpired)"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the list and the top table */
static struct fs_curop *ops;				 /* the running operations */
static int64_t next_opid = 1;
static _Thread_local struct fs_curop *cur; /* the thread's operation */
static int64_t start_real_ns, start_mono_ns;

/* serverStatus counters (note 3) */
static atomic_llong c_ops[6];		   /* opcounters by enum fs_op_kind */
static atomic_llong lat_us[3], lat_ops[3]; /* opLatencies reads, writes, commands */
static atomic_llong d_returned, d_inserted, d_updated, d_deleted;
static atomic_llong qe_scanned, qe_objects;
static atomic_llong conn_current, conn_created;
static atomic_llong net_in, net_out, net_requests;
static atomic_llong killed_ops, timed_out_ops;
static atomic_llong listings_kept, listings_refused; /* opendirs of collections */

/* top: per namespace, times (µs) and counts of each column */
enum {
	TOP_TOTAL,
	TOP_READ,
	TOP_WRITE,
	TOP_QUERIES,
	TOP_GETMORE,
	TOP_INSERT,
	TOP_UPDATE,
	TOP_REMOVE,
	TOP_COMMANDS,
	TOP__N
};
static const char *const top_names[TOP__N] = {"total",	 "readLock", "writeLock",
					      "queries", "getmore",  "insert",
					      "update",	 "remove",   "commands"};
struct top_ns {
	char ns[2 * DFS_MAX_NS_NAME + 2];
	int64_t time[TOP__N], count[TOP__N];
};
static struct top_ns *tops; /* Owned: ntops entries, by first use */
static size_t ntops, captops;

static int64_t mono_ns(int clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void fs_curop_start(void)
{
	start_real_ns = mono_ns(CLOCK_REALTIME);
	start_mono_ns = mono_ns(CLOCK_MONOTONIC);
}

/* The stop hook (note 2). */
static int op_stop(void *ctx, struct dfs_err *err)
{
	struct fs_curop *op = ctx;

	if (atomic_load(&op->killed))
		return dfs_err_set(err, DFS_EINTR, CUROP_KILLED_MSG);
	if (op->deadline_ns && mono_ns(CLOCK_MONOTONIC_COARSE) >= op->deadline_ns)
		return dfs_err_set(err, DFS_ETIMEDOUT, CUROP_TIMEOUT_MSG);
	return 0;
}

/* "<db>.<coll>" of coll into op (a read transaction of its own). */
static void op_ns(struct fs_curop *op, struct store_db *db, int64_t coll)
{
	struct dfs_err err = {0};
	struct store_coll c;
	struct store_txn *t;

	snprintf(op->db, sizeof(op->db), "%s", db ? store_db_name(db) : "");
	snprintf(op->ns, sizeof(op->ns), "%s", op->db);
	if (!db || !coll || store_txn_begin(db, false, &t, &err))
		return;
	if (!store_coll_by_id(t, coll, &c, &err))
		snprintf(op->ns, sizeof(op->ns), "%s.%s", op->db, c.name);
	store_txn_abort(t);
}

/* Starts the clock of op, lists it and makes it the thread's operation. */
static void op_register(struct fs_curop *op)
{
	op->start_ns = mono_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&lock);
	op->opid = next_opid++;
	op->next = ops;
	if (ops)
		ops->prev = op;
	ops = op;
	pthread_mutex_unlock(&lock);
	cur = op;
	store_thread_stop_set(op_stop, op);
}

void fs_curop_begin(struct fs_curop *op, int kind, struct store_db *db, int64_t coll, int client)
{
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->client = client;
	bson_init(&op->command);
	op_ns(op, db, coll);
	op_register(op);
}

void fs_curop_begin_ns(struct fs_curop *op, int kind, const char *db, const char *coll, int client)
{
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->client = client;
	bson_init(&op->command);
	snprintf(op->db, sizeof(op->db), "%s", db ? db : "");
	if (coll && coll[0])
		snprintf(op->ns, sizeof(op->ns), "%s.%s", op->db, coll);
	else
		snprintf(op->ns, sizeof(op->ns), "%s", op->db);
	op_register(op);
}

void fs_curop_client(struct fs_curop *op, const char *addr)
{
	pthread_mutex_lock(&lock); /* currentOp reads it under the lock */
	snprintf(op->client_addr, sizeof(op->client_addr), "%s", addr ? addr : "");
	pthread_mutex_unlock(&lock);
}

struct fs_curop *fs_curop_current(void)
{
	return cur;
}

void fs_curop_describe(const bson_t *command, int64_t max_ms)
{
	struct fs_curop *op = cur;

	if (!op)
		return;
	if (command) {
		pthread_mutex_lock(&lock); /* currentOp copies it under the lock */
		bson_destroy(&op->command);
		bson_copy_to(command, &op->command);
		pthread_mutex_unlock(&lock);
	}
	if (max_ms > 0)
		op->deadline_ns = op->start_ns + max_ms * 1000000;
}

void fs_curop_note(const struct query_summary *s, int64_t nreturned)
{
	struct fs_curop *op = cur;

	if (!op)
		return;
	pthread_mutex_lock(&lock);
	if (s) {
		op->keys += s->keys_examined;
		op->docs += s->docs_examined;
		op->sorted |= s->has_sort_stage;
		if (s->plan[0] && !op->plan[0])
			snprintf(op->plan, sizeof(op->plan), "%s", s->plan);
	}
	op->nreturned += nreturned;
	pthread_mutex_unlock(&lock);
}

void fs_curop_plan(const struct query_summary *s)
{
	struct fs_curop *op = cur;

	if (!op || !s->plan[0])
		return;
	pthread_mutex_lock(&lock);
	snprintf(op->plan, sizeof(op->plan), "%s", s->plan);
	pthread_mutex_unlock(&lock);
}

/* The top entry of ns (lock held), or NULL when out of memory. */
static struct top_ns *top_get(const char *ns)
{
	for (size_t i = 0; i < ntops; i++)
		if (!strcmp(tops[i].ns, ns))
			return &tops[i];
	if (ntops == captops) {
		size_t cap = captops ? captops * 2 : 16;
		struct top_ns *t = realloc(tops, cap * sizeof(*t));

		if (!t)
			return NULL;
		tops = t;
		captops = cap;
	}
	memset(&tops[ntops], 0, sizeof(tops[ntops]));
	snprintf(tops[ntops].ns, sizeof(tops[ntops].ns), "%s", ns);
	return &tops[ntops++];
}

/* Adds one operation of kind on ns, taking micros, to top (lock held). */
static void top_add(const char *ns, int kind, int64_t micros)
{
	static const int col[] = {[FS_OP_QUERY] = TOP_QUERIES,	  [FS_OP_GETMORE] = TOP_GETMORE,
				  [FS_OP_COMMAND] = TOP_COMMANDS, [FS_OP_INSERT] = TOP_INSERT,
				  [FS_OP_UPDATE] = TOP_UPDATE,	  [FS_OP_REMOVE] = TOP_REMOVE};
	bool write = kind == FS_OP_INSERT || kind == FS_OP_UPDATE || kind == FS_OP_REMOVE;
	struct top_ns *t;

	if (!ns[0] || !(t = top_get(ns)))
		return;
	t->time[TOP_TOTAL] += micros;
	t->count[TOP_TOTAL]++;
	t->time[write ? TOP_WRITE : TOP_READ] += micros;
	t->count[write ? TOP_WRITE : TOP_READ]++;
	t->time[col[kind]] += micros;
	t->count[col[kind]]++;
}

/* Which opLatencies bucket: 0 reads, 1 writes, 2 commands. */
static int lat_bucket(int kind)
{
	if (kind == FS_OP_QUERY || kind == FS_OP_GETMORE)
		return 0;
	return kind == FS_OP_COMMAND ? 2 : 1;
}

void fs_curop_end(struct fs_curop *op, int rc)
{
	int64_t micros = (mono_ns(CLOCK_MONOTONIC) - op->start_ns) / 1000;
	int b = lat_bucket(op->kind);

	store_thread_stop_set(NULL, NULL);
	if (cur == op)
		cur = NULL;
	pthread_mutex_lock(&lock);
	if (op->prev)
		op->prev->next = op->next;
	else
		ops = op->next;
	if (op->next)
		op->next->prev = op->prev;
	top_add(op->ns, op->kind, micros);
	pthread_mutex_unlock(&lock);
	/* opcounters: MongoDB counts an insert per document, the others per operation */
	atomic_fetch_add(&c_ops[op->kind], op->kind == FS_OP_INSERT ? op->ninserted : 1);
	atomic_fetch_add(&lat_us[b], micros);
	atomic_fetch_add(&lat_ops[b], 1);
	atomic_fetch_add(&d_returned, op->nreturned);
	atomic_fetch_add(&d_inserted, op->ninserted);
	atomic_fetch_add(&d_updated, op->nmodified);
	atomic_fetch_add(&d_deleted, op->ndeleted);
	atomic_fetch_add(&qe_scanned, op->keys);
	atomic_fetch_add(&qe_objects, op->docs);
	if (rc == DFS_EINTR && atomic_load(&op->killed))
		atomic_fetch_add(&killed_ops, 1);
	if (rc == DFS_ETIMEDOUT)
		atomic_fetch_add(&timed_out_ops, 1);
	fs_profile_op(op, rc, micros);
	bson_destroy(&op->command);
}

int fs_curop_kill(int64_t opid, struct dfs_err *err)
{
	int rc = DFS_ENOENT;

	pthread_mutex_lock(&lock);
	for (struct fs_curop *op = ops; op; op = op->next)
		if (op->opid == opid) {
			atomic_store(&op->killed, true);
			rc = 0;
		}
	pthread_mutex_unlock(&lock);
	if (rc) /* EINVAL, not ENOENT: the file is there, the opid is wrong */
		return dfs_err_set(err, DFS_EINVAL, "killOp: no operation %" PRId64 " is running",
				   opid);
	fs_log_info("killOp: attempting to kill op %" PRId64, opid);
	return 0;
}

int fs_killop_apply(const char *text, size_t len, struct dfs_err *err)
{
	bson_t cmd;
	bson_iter_t it;
	int64_t opid = 0;
	int rc;
	size_t i = 0;

	while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n'))
		i++;
	if (i == len)
		return dfs_err_set(err, DFS_EINVAL, "killOp: write an opid or {killOp: 1, op: N}");
	bson_init(&cmd);
	if (text[i] >= '0' && text[i] <= '9') {
		char num[32], *end;
		size_t n = len - i;

		while (n && (text[i + n - 1] == ' ' || text[i + n - 1] == '\n' ||
			     text[i + n - 1] == '\t'))
			n--;
		if (n >= sizeof(num)) {
			bson_destroy(&cmd);
			return dfs_err_set(err, DFS_EINVAL, "killOp: '%.20s...' is not an opid",
					   text + i);
		}
		memcpy(num, text + i, n);
		num[n] = '\0';
		opid = strtoll(num, &end, 10);
		if (*end) {
			bson_destroy(&cmd);
			return dfs_err_set(err, DFS_EINVAL, "killOp: '%s' is not an opid", num);
		}
	} else {
		rc = store_codec_parse_doc(text + i, len - i, &cmd, err);
		if (rc) {
			bson_destroy(&cmd);
			return dfs_err_prefix(err, "killOp: ");
		}
		if (!bson_iter_init_find(&it, &cmd, "op") || !BSON_ITER_HOLDS_NUMBER(&it)) {
			bson_destroy(&cmd);
			return dfs_err_set(err, DFS_EINVAL,
					   "killOp: the command needs a numeric 'op' field");
		}
		opid = bson_iter_as_int64(&it);
	}
	bson_destroy(&cmd);
	return fs_curop_kill(opid, err);
}

void fs_curop_count_doc(struct store_db *db, int64_t coll, bool inserted, int64_t n, int64_t micros)
{
	struct fs_curop op;

	/* a document file's commit is one insert or update of one document; .insert is n */
	memset(&op, 0, sizeof(op));
	op_ns(&op, db, coll);
	pthread_mutex_lock(&lock);
	top_add(op.ns, inserted ? FS_OP_INSERT : FS_OP_UPDATE, micros);
	pthread_mutex_unlock(&lock);
	atomic_fetch_add(&c_ops[inserted ? FS_OP_INSERT : FS_OP_UPDATE], n);
	atomic_fetch_add(inserted ? &d_inserted : &d_updated, n);
	atomic_fetch_add(&lat_us[1], micros);
	atomic_fetch_add(&lat_ops[1], 1);
}

void fs_curop_count_getmore(void)
{
	atomic_fetch_add(&c_ops[FS_OP_GETMORE], 1);
}

void fs_curop_handle(bool opened)
{
	atomic_fetch_add(&conn_current, opened ? 1 : -1);
	if (opened)
		atomic_fetch_add(&conn_created, 1);
}

void fs_net_count(size_t in, size_t out)
{
	if (in) {
		atomic_fetch_add(&net_in, (long long)in);
		atomic_fetch_add(&net_requests, 1);
	}
	if (out)
		atomic_fetch_add(&net_out, (long long)out);
}

/* int32 when it fits (jq and mongostat see a plain number either way). */
static void put_num(bson_t *b, const char *key, int64_t v)
{
	if (v >= INT32_MIN && v <= INT32_MAX)
		bson_append_int32(b, key, -1, (int32_t)v);
	else
		bson_append_int64(b, key, -1, v);
}

static const char *const op_names[] = {
	[FS_OP_QUERY] = "query",   [FS_OP_GETMORE] = "getmore", [FS_OP_COMMAND] = "command",
	[FS_OP_INSERT] = "insert", [FS_OP_UPDATE] = "update",	[FS_OP_REMOVE] = "remove"};

static void render(bson_t *doc, struct dfs_buf *out)
{
	struct dfs_err err = {0};

	if (store_codec_render(doc, STORE_RENDER_PRETTY, out, &err))
		dfs_buf_printf(out, "{\"ok\": 0, \"errmsg\": \"%s\"}\n", err.msg);
}

void fs_curop_current_doc(bson_t *out)
{
	int64_t now = mono_ns(CLOCK_MONOTONIC);
	bson_t doc, arr, one;
	char key[24];
	int i = 0;

	bson_init(&doc);
	BSON_APPEND_ARRAY_BEGIN(&doc, "inprog", &arr);
	pthread_mutex_lock(&lock);
	for (struct fs_curop *op = ops; op; op = op->next) {
		int64_t us = (now - op->start_ns) / 1000;

		snprintf(key, sizeof(key), "%d", i++);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &one);
		BSON_APPEND_UTF8(&one, "type", "op");
		put_num(&one, "opid", op->opid);
		BSON_APPEND_BOOL(&one, "active", true);
		put_num(&one, "secs_running", us / 1000000);
		put_num(&one, "microsecs_running", us);
		BSON_APPEND_UTF8(&one, "op", op_names[op->kind]);
		BSON_APPEND_UTF8(&one, "ns", op->ns);
		BSON_APPEND_DOCUMENT(&one, "command", &op->command);
		if (op->plan[0])
			BSON_APPEND_UTF8(&one, "planSummary", op->plan);
		if (op->client)
			put_num(&one, "client_pid", op->client);
		if (op->client_addr[0])
			BSON_APPEND_UTF8(&one, "client", op->client_addr);
		if (atomic_load(&op->total) > 0) {
			/* an index build, as MongoDB shows one */
			int64_t done = atomic_load(&op->done), total = atomic_load(&op->total);
			char msg[128];
			bson_t pr;

			snprintf(msg, sizeof(msg),
				 "Index Build: scanning collection %lld/%lld %lld%%",
				 (long long)done, (long long)total,
				 (long long)(done * 100 / total));
			BSON_APPEND_UTF8(&one, "msg", msg);
			BSON_APPEND_DOCUMENT_BEGIN(&one, "progress", &pr);
			put_num(&pr, "done", done);
			put_num(&pr, "total", total);
			bson_append_document_end(&one, &pr);
		}
		BSON_APPEND_BOOL(&one, "killPending", atomic_load(&op->killed));
		put_num(&one, "numYields", 0);
		bson_append_document_end(&arr, &one);
	}
	pthread_mutex_unlock(&lock);
	bson_append_array_end(&doc, &arr);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	bson_concat(out, &doc);
	bson_destroy(&doc);
}

void fs_curop_render_current(struct dfs_buf *out)
{
	bson_t doc = BSON_INITIALIZER;

	fs_curop_current_doc(&doc);
	render(&doc, out);
	bson_destroy(&doc);
}

/* resident and virtual MB from /proc/self/statm */
static void mem_mb(int64_t *res, int64_t *virt)
{
	long pages_v = 0, pages_r = 0, psz = sysconf(_SC_PAGESIZE);
	FILE *f = fopen("/proc/self/statm", "r");

	*res = *virt = 0;
	if (!f)
		return;
	if (fscanf(f, "%ld %ld", &pages_v, &pages_r) == 2) {
		*virt = (int64_t)pages_v * psz / (1024 * 1024);
		*res = (int64_t)pages_r * psz / (1024 * 1024);
	}
	fclose(f);
}

/* The document caches of every open database, summed. */
struct cache_sum {
	struct store_dcache_stats st;
};

static int cache_add(void *ctx, const char *name)
{
	struct cache_sum *c = ctx;
	struct dfs_err err = {0};
	struct store_dcache_stats s;
	struct store_db *db;

	if (store_db_get(fs_store, name, false, &db, &err))
		return 0;
	store_db_doc_cache_stats(db, &s);
	c->st.hits += s.hits;
	c->st.misses += s.misses;
	c->st.entries += s.entries;
	c->st.bytes += s.bytes;
	c->st.budget += s.budget;
	return 0;
}

void fs_curop_status_doc(bson_t *out)
{
	static const char *const lat_names[] = {"reads", "writes", "commands"};
	int64_t now_real = mono_ns(CLOCK_REALTIME), up_ms;
	int64_t res, virt, active[3] = {0};
	struct cache_sum cs = {0};
	struct dfs_err err = {0};
	bson_t doc, sub, sub2;
	char host[256] = "localhost";

	up_ms = (mono_ns(CLOCK_MONOTONIC) - start_mono_ns) / 1000000;
	gethostname(host, sizeof(host) - 1);
	pthread_mutex_lock(&lock);
	for (struct fs_curop *op = ops; op; op = op->next) {
		active[0]++;
		active[lat_bucket(op->kind) == 1 ? 2 : 1]++;
	}
	pthread_mutex_unlock(&lock);
	bson_init(&doc);
	BSON_APPEND_UTF8(&doc, "host", host);
	BSON_APPEND_UTF8(&doc, "version", "docfs 0.1.0");
	BSON_APPEND_UTF8(&doc, "process", "docfs");
	put_num(&doc, "pid", getpid());
	put_num(&doc, "uptime", up_ms / 1000);
	put_num(&doc, "uptimeMillis", up_ms);
	put_num(&doc, "uptimeEstimate", up_ms / 1000);
	BSON_APPEND_DATE_TIME(&doc, "localTime", now_real / 1000000);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "connections", &sub);
	put_num(&sub, "current", atomic_load(&conn_current));
	put_num(&sub, "totalCreated", atomic_load(&conn_created));
	bson_append_document_end(&doc, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "globalLock", &sub);
	put_num(&sub, "totalTime", (mono_ns(CLOCK_MONOTONIC) - start_mono_ns) / 1000);
	BSON_APPEND_DOCUMENT_BEGIN(&sub, "currentQueue", &sub2);
	put_num(&sub2, "total", 0);
	put_num(&sub2, "readers", 0);
	put_num(&sub2, "writers", 0);
	bson_append_document_end(&sub, &sub2);
	BSON_APPEND_DOCUMENT_BEGIN(&sub, "activeClients", &sub2);
	put_num(&sub2, "total", active[0]);
	put_num(&sub2, "readers", active[1]);
	put_num(&sub2, "writers", active[2]);
	bson_append_document_end(&sub, &sub2);
	bson_append_document_end(&doc, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "network", &sub);
	put_num(&sub, "bytesIn", atomic_load(&net_in));
	put_num(&sub, "bytesOut", atomic_load(&net_out));
	put_num(&sub, "numRequests", atomic_load(&net_requests));
	bson_append_document_end(&doc, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "opcounters", &sub);
	put_num(&sub, "insert", atomic_load(&c_ops[FS_OP_INSERT]));
	put_num(&sub, "query", atomic_load(&c_ops[FS_OP_QUERY]));
	put_num(&sub, "update", atomic_load(&c_ops[FS_OP_UPDATE]));
	put_num(&sub, "delete", atomic_load(&c_ops[FS_OP_REMOVE]));
	put_num(&sub, "getmore", atomic_load(&c_ops[FS_OP_GETMORE]));
	put_num(&sub, "command", atomic_load(&c_ops[FS_OP_COMMAND]));
	bson_append_document_end(&doc, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "opLatencies", &sub);
	for (int i = 0; i < 3; i++) {
		BSON_APPEND_DOCUMENT_BEGIN(&sub, lat_names[i], &sub2);
		put_num(&sub2, "latency", atomic_load(&lat_us[i]));
		put_num(&sub2, "ops", atomic_load(&lat_ops[i]));
		bson_append_document_end(&sub, &sub2);
	}
	bson_append_document_end(&doc, &sub);
	mem_mb(&res, &virt);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "mem", &sub);
	put_num(&sub, "bits", (int64_t)sizeof(void *) * 8);
	put_num(&sub, "resident", res);
	put_num(&sub, "virtual", virt);
	BSON_APPEND_BOOL(&sub, "supported", true);
	bson_append_document_end(&doc, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "metrics", &sub);
	BSON_APPEND_DOCUMENT_BEGIN(&sub, "document", &sub2);
	put_num(&sub2, "deleted", atomic_load(&d_deleted));
	put_num(&sub2, "inserted", atomic_load(&d_inserted));
	put_num(&sub2, "returned", atomic_load(&d_returned));
	put_num(&sub2, "updated", atomic_load(&d_updated));
	bson_append_document_end(&sub, &sub2);
	BSON_APPEND_DOCUMENT_BEGIN(&sub, "queryExecutor", &sub2);
	put_num(&sub2, "scanned", atomic_load(&qe_scanned));
	put_num(&sub2, "scannedObjects", atomic_load(&qe_objects));
	bson_append_document_end(&sub, &sub2);
	BSON_APPEND_DOCUMENT_BEGIN(&sub, "operation", &sub2);
	put_num(&sub2, "killed", atomic_load(&killed_ops));
	put_num(&sub2, "maxTimeMSExpired", atomic_load(&timed_out_ops));
	bson_append_document_end(&sub, &sub2);
	bson_append_document_end(&doc, &sub);
	if (fs_store)
		store_db_list(fs_store, cache_add, &cs, &err);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "documentCache", &sub);
	put_num(&sub, "hits", (int64_t)cs.st.hits);
	put_num(&sub, "misses", (int64_t)cs.st.misses);
	put_num(&sub, "entries", (int64_t)cs.st.entries);
	put_num(&sub, "bytes", (int64_t)cs.st.bytes);
	put_num(&sub, "maxBytes", (int64_t)cs.st.budget);
	bson_append_document_end(&doc, &sub);
	/* docfs's own: whether a collection's opendir let the kernel keep its cached listing
	 * (fsops.c note 8); a kept listing the kernel asks for again lost its pages. */
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "docfs", &sub);
	BSON_APPEND_DOCUMENT_BEGIN(&sub, "listingCache", &sub2);
	put_num(&sub2, "kept", atomic_load(&listings_kept));
	put_num(&sub2, "refused", atomic_load(&listings_refused));
	bson_append_document_end(&sub, &sub2);
	bson_append_document_end(&doc, &sub);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	bson_concat(out, &doc);
	bson_destroy(&doc);
}

void fs_curop_render_status(struct dfs_buf *out)
{
	bson_t doc = BSON_INITIALIZER;

	fs_curop_status_doc(&doc);
	render(&doc, out);
	bson_destroy(&doc);
}

void fs_curop_count_listing(bool kept)
{
	atomic_fetch_add(kept ? &listings_kept : &listings_refused, 1);
}

void fs_curop_top_doc(bson_t *out)
{
	bson_t doc, totals, ns, col;

	bson_init(&doc);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "totals", &totals);
	BSON_APPEND_UTF8(&totals, "note", "all times in microseconds");
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < ntops; i++) {
		BSON_APPEND_DOCUMENT_BEGIN(&totals, tops[i].ns, &ns);
		for (int c = 0; c < TOP__N; c++) {
			BSON_APPEND_DOCUMENT_BEGIN(&ns, top_names[c], &col);
			put_num(&col, "time", tops[i].time[c]);
			put_num(&col, "count", tops[i].count[c]);
			bson_append_document_end(&ns, &col);
		}
		bson_append_document_end(&totals, &ns);
	}
	pthread_mutex_unlock(&lock);
	bson_append_document_end(&doc, &totals);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	bson_concat(out, &doc);
	bson_destroy(&doc);
}

void fs_curop_render_top(struct dfs_buf *out)
{
	bson_t doc = BSON_INITIALIZER;

	fs_curop_top_doc(&doc);
	render(&doc, out);
	bson_destroy(&doc);
}
