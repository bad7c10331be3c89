/*
 * db.c - the store directory, its databases (one SQLite file each), connection pools,
 * transactions, collections and the change feed. Documents and scratch files are in
 * doc.c; this file does not parse or render text.
 *
 * Design notes
 * 1. A database is "<store>/<name>.db" in WAL mode, synchronous=NORMAL: a committed
 *    transaction survives a crash of the process; store_db_sync() adds power-loss safety.
 * 2. Entry ids (documents, scratch files, collections) come from one per-database counter
 *    (meta 'next_id') so that an id names one object for the life of the database: it is
 *    the low part of the inode number. A transaction loads the counter once and stores it
 *    back at commit.
 * 3. Database numbers are assigned at creation under an flock of "<store>/.lock" as one
 *    more than the largest in use, and never change.
 * 4. Several processes may write: BEGIN IMMEDIATE with a 10 s busy timeout. Inside one
 *    process, writers queue on write_lock instead of spinning on SQLITE_BUSY.
 * 5. Every write transaction appends to the 'changes' table; other processes (and the
 *    mount's notifier) read it to invalidate caches. It is pruned to the last 100,000.
 * 6. Checkpoints (copying the WAL back into the database file) run on a thread of the
 *    database, not in the committing writer, which holds the write lock: a bulk insert goes
 *    on while the pages of its earlier transactions are copied (PASSIVE checkpoints do not
 *    block writers). A commit that finds CKPT_PAGES pages in the WAL wakes the thread, which
 *    checkpoints until a pass finds little new (the writer appends meanwhile). The WAL only
 *    starts over when a write begins with every frame copied, so the next commit copies
 *    that little rest itself (when it is little: one large transaction since is the
 *    thread's again). A commit that finds CKPT_BACKSTOP pages while the thread runs (it
 *    cannot keep up) checkpoints itself, as SQLite's autocheckpoint would; one large
 *    transaction past it with the thread idle does not (a 100,000-document updateMany
 *    spent a tenth of its time copying its own WAL before answering). Durability does not
 *    change: a commit is in the WAL before any checkpoint copies it.
 * 7. Another process may drop a database (another mount's rmdir unlinks its files) and
 *    create one of the same name: this process's connections still have the old, unlinked
 *    file open, and whatever they wrote would be lost. So a struct store_db is tied to the
 *    file (dev, ino) its path named when it was opened, and is retired (marked dropped,
 *    kept until store_free) as soon as the path names another file or none:
 *    store_db_get then opens the new one. A write transaction checks, holding the write
 *    lock, that its connection's file is still the one the path names (SQLite's
 *    HAS_MOVED): a drop unlinks while it holds that lock, so no write lands in a dropped
 *    file. A read started before the retirement is noticed may still see the old file
 *    (the mount's notifier looks at every pass: fs/fuse/notify.c). Every connection of a struct
 *    has its file open: a connection opened later (by a transaction or the checkpointer)
 *    is kept only if it opened that file. A retired struct closes its connections as they
 *    come back, so the dropped file's space is freed at once; SQLite does not checkpoint
 *    into, or delete, the WAL of a database file that moved when it closes one. A drop
 *    while a database is being opened is retried, and reads as not found, not as an I/O
 *    error.
 */
#include "store_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* How long a transaction waits for another process's write to end (store.h). */
static int busy_ms = STORE_LOCK_WAIT_MS;

void store_set_lock_wait_ms(int ms)
{
	busy_ms = ms;
}

#define SCHEMA_VERSION STORE__SCHEMA_VERSION
#define CHANGES_KEEP 100000
/* WAL pages after which a commit wakes the checkpointer (SQLite's autocheckpoint was this),
 * and after which it checkpoints itself (note 6). */
#define CKPT_PAGES 8192
#define CKPT_BACKSTOP (4 * CKPT_PAGES)
/* The checkpointer stops when a pass found fewer new frames than this (note 6). */
#define CKPT_REST 1024
#define CKPT_TIGHT 256 /* the threshold on a disk that was found full (space.c note 5) */

struct store {
	char *dir;		  /* Owned: the store directory */
	pthread_mutex_t lock;	  /* guards dbs */
	struct store_db *dbs;	  /* Owned: open databases */
	struct store_db *dropped; /* Owned: dropped ones, kept until store_free: borrowers
				   * (the mount's nodes, its notifier) may still hold them */
	size_t dc_budget;	  /* each database's document cache (dcache.c), in bytes */
	struct store__space space; /* a full disk (space.c) */
	int (*gate)(void *ctx, struct dfs_err *err); /* the write gate, or NULL */
	void *gate_ctx;				     /* its argument */
	char *mark_why; /* Owned: why another live process's gate refuses (store_mark_gate) */
};

/* A secondary's applier writes while the gate is closed (store_thread_gate_pass). */
static _Thread_local bool tls_gate_pass;

void store_set_write_gate(struct store *s, int (*gate)(void *ctx, struct dfs_err *err), void *ctx)
{
	s->gate_ctx = ctx;
	s->gate = gate;
}

void store_thread_gate_pass(bool pass)
{
	tls_gate_pass = pass;
}

#define GATE_MARK ".write-gate" /* "<pid>\n<why>\n" of the process whose gate holds */

static int mark_gate(void *ctx, struct dfs_err *err)
{
	return dfs_err_set(err, DFS_EROFS, "%s", ((struct store *)ctx)->mark_why);
}

/* Another live process's mark closes this store's gate (store_mark_gate). */
static void read_mark(struct store *s)
{
	char *path, why[512] = "";
	FILE *f;
	int pid = 0;

	if (asprintf(&path, "%s/" GATE_MARK, s->dir) < 0)
		abort();
	f = fopen(path, "r");
	free(path);
	if (!f)
		return;
	if (fscanf(f, "%d\n", &pid) == 1 && fgets(why, sizeof(why), f))
		why[strcspn(why, "\n")] = '\0';
	fclose(f);
	if (pid <= 0 || pid == getpid() || !why[0] || (kill(pid, 0) != 0 && errno != EPERM))
		return; /* none, ours, or a process gone (killed before it removed its mark) */
	if (!(s->mark_why = strdup(why)))
		abort();
	store_set_write_gate(s, mark_gate, s);
}

int store_mark_gate(struct store *s, const char *why, struct dfs_err *err)
{
	char *path, *tmp;
	FILE *f;
	int rc = 0;

	if (asprintf(&path, "%s/" GATE_MARK, s->dir) < 0 ||
	    asprintf(&tmp, "%s/" GATE_MARK ".%d", s->dir, (int)getpid()) < 0)
		abort();
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d\n%s\n", (int)getpid(), why) < 0 || fclose(f) != 0 ||
	    rename(tmp, path) != 0) {
		rc = dfs_err_set(err, DFS_EIO, "cannot write '%s': %s", path, strerror(errno));
		unlink(tmp);
	}
	free(path);
	free(tmp);
	return rc;
}

void store_unmark_gate(struct store *s)
{
	char *path;

	if (asprintf(&path, "%s/" GATE_MARK, s->dir) < 0)
		abort();
	unlink(path);
	free(path);
}

/* 0 when s may be written now, else the gate's refusal. */
static int gate_check(struct store *s, struct dfs_err *err)
{
	if (!s->gate || tls_gate_pass)
		return 0;
	return s->gate(s->gate_ctx, err);
}

struct store__space *store__space_of(struct store *s)
{
	return &s->space;
}

/* Version 4 -> 5: change streams (changes.c notes 1, 2). Made before the older migrations,
 * whose index rebuilds record events. */
#define EVENTS_SQL                                                                                 \
	"CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, ts INTEGER NOT NULL,"          \
	" coll TEXT, op INTEGER NOT NULL, line BLOB NOT NULL, off_db INTEGER, off_coll INTEGER,"   \
	" docid INTEGER, pmode INTEGER, puid INTEGER, pgid INTEGER, wall INTEGER, len INTEGER);"   \
	"CREATE INDEX IF NOT EXISTS events_coll ON events(coll, off_coll);"                        \
	"CREATE TABLE IF NOT EXISTS evends(coll TEXT PRIMARY KEY, endoff INTEGER) WITHOUT ROWID;"  \
	"CREATE TABLE IF NOT EXISTS evdocs(seq INTEGER PRIMARY KEY, bson BLOB NOT NULL);"

static const char *const schema_sql =
	"CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS colls(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
	" options BLOB, ctime INTEGER, mtime INTEGER, mode INTEGER, uid INTEGER, gid INTEGER,"
	" ixver INTEGER NOT NULL DEFAULT 0, chtime INTEGER);"
	"CREATE TABLE IF NOT EXISTS indexes(coll INTEGER, name TEXT, spec BLOB, ixid INTEGER,"
	" multikey INTEGER NOT NULL DEFAULT 0, created INTEGER, build_ms INTEGER,"
	" PRIMARY KEY(coll, name)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS ikeys(ix INTEGER, key BLOB, id INTEGER, vals BLOB,"
	" PRIMARY KEY(ix, key, id)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS docs(id INTEGER PRIMARY KEY, coll INTEGER NOT NULL,"
	" key BLOB NOT NULL, name TEXT, size INTEGER, mode INTEGER, uid INTEGER, gid INTEGER,"
	" mtime INTEGER, ctime INTEGER, bson BLOB NOT NULL, atime INTEGER, evseq INTEGER);"
	"CREATE UNIQUE INDEX IF NOT EXISTS docs_key ON docs(coll, key);"
	"CREATE INDEX IF NOT EXISTS docs_private ON docs(coll) WHERE (mode & 292) != 292;"
	"CREATE TABLE IF NOT EXISTS runs(coll INTEGER NOT NULL, lo INTEGER NOT NULL,"
	" hi INTEGER NOT NULL, PRIMARY KEY(coll, lo)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS files(id INTEGER PRIMARY KEY, coll INTEGER NOT NULL,"
	" name TEXT NOT NULL, kind INTEGER, mode INTEGER, uid INTEGER, gid INTEGER,"
	" mtime INTEGER, ctime INTEGER, data BLOB, atime INTEGER, ino INTEGER, UNIQUE(coll, name));"
	"CREATE INDEX IF NOT EXISTS files_ino ON files(ino) WHERE ino IS NOT NULL;"
	"CREATE TABLE IF NOT EXISTS vacated(coll INTEGER, key BLOB, id INTEGER, time INTEGER,"
	" PRIMARY KEY(coll, key)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS changes(seq INTEGER PRIMARY KEY, coll INTEGER, op INTEGER,"
	" id INTEGER, name TEXT);" EVENTS_SQL;

/* Version 1 -> 2: secondary indexes (index.c note 1). */
static const char *const migrate_1_2_sql =
	"ALTER TABLE colls ADD COLUMN ixver INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE indexes ADD COLUMN ixid INTEGER;"
	"ALTER TABLE indexes ADD COLUMN multikey INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE indexes ADD COLUMN created INTEGER;"
	"ALTER TABLE indexes ADD COLUMN build_ms INTEGER;"
	"CREATE TABLE IF NOT EXISTS ikeys(ix INTEGER, key BLOB, id INTEGER, vals BLOB,"
	" PRIMARY KEY(ix, key, id)) WITHOUT ROWID;";

/* Version 3 -> 4: the runs of doc.c note 5 replace the index docs_coll(coll), one more
 * B-tree written per document. One run per collection covers its documents as they are.
 * NOT NULL on the key of runs: without it SQLite does not take (coll, lo) as distinct and
 * sorts each run's documents for "ORDER BY r.lo, d.id" instead of reading them in order. */
static const char *const migrate_3_4_sql =
	"CREATE TABLE IF NOT EXISTS runs(coll INTEGER NOT NULL, lo INTEGER NOT NULL,"
	" hi INTEGER NOT NULL, PRIMARY KEY(coll, lo)) WITHOUT ROWID;"
	"INSERT OR REPLACE INTO runs(coll, lo, hi) SELECT coll, min(id), max(id) FROM docs"
	" GROUP BY coll;"
	"DROP INDEX IF EXISTS docs_coll;";

/* What the readers of events select: the event, its offset in the stream read, then the
 * attributes its document had when it was written (NULL: anyone could read it) and has now
 * (NULL: gone), for cred.c: a document made private after its events were written hides
 * them too; then wallTime, the rendered length (NULL: line is the text, a version-8 row)
 * and the document an insert or replace refers to (changes.c note 6): the row's while it
 * is still the version the event wrote, else the copy kept in evdocs. */
#define EV_COLS "e.seq, e.ts, e.coll, e.op, e.line,"
#define EV_PERM                                                                                    \
	" e.pmode, e.puid, e.pgid, d.mode, d.uid, d.gid, e.wall, e.len,"                           \
	" CASE WHEN e.len IS NULL OR length(e.line) > 0 THEN NULL WHEN d.evseq = e.seq"            \
	" THEN d.bson ELSE (SELECT x.bson FROM evdocs x WHERE x.seq = e.seq) END"                  \
	" FROM events e LEFT JOIN docs d ON d.id = e.docid"
/* Versions 5 -> 7: atime of documents and scratch files, set only by utimensat (NULL: the
 * mtime, so that an insert writes nothing more); chtime, the last status change of a
 * collection directory (its ctime column is its creation, which its fixed entries show);
 * the attributes of the document an event is about, when not everyone may read it
 * (cred.c; the partial index docs_private is in schema_sql). Version 7 -> 8: ino, the row
 * whose content and attributes a hard link's row names (doc.c note 6). Version 8 -> 9:
 * compact change events (changes.c note 6): wallTime and the rendered length of an event,
 * and the event whose fullDocument a document row still is; the version-8 events keep
 * their text (len NULL), which reads as it did. Each column is
 * added unless there (migrate_columns), so a version-6 or -7 file of either branch that
 * made these versions is completed. */
static const char *const migrate_cols[][2] = {
	{"docs", "atime"},   {"files", "atime"}, {"colls", "chtime"}, {"events", "docid"},
	{"events", "pmode"}, {"events", "puid"}, {"events", "pgid"},   {"files", "ino"},
	{"events", "wall"},  {"events", "len"},	 {"docs", "evseq"}};

static const char *const stmt_sql[ST__COUNT] = {
	[ST_META_GET] = "SELECT v FROM meta WHERE k = ?1",
	[ST_META_SET] = "INSERT OR REPLACE INTO meta(k, v) VALUES(?1, ?2)",
	[ST_COLL_FIND] = "SELECT id, name, ctime, mtime, mode, uid, gid, options,"
			 " coalesce(chtime, mtime) FROM colls WHERE name = ?1",
	[ST_COLL_BY_ID] = "SELECT id, name, ctime, mtime, mode, uid, gid, options,"
			  " coalesce(chtime, mtime) FROM colls WHERE id = ?1",
	[ST_COLL_LIST] = "SELECT id, name, ctime, mtime, mode, uid, gid, options,"
			 " coalesce(chtime, mtime) FROM colls ORDER BY name",
	[ST_COLL_INSERT] = "INSERT INTO colls(id, name, ctime, mtime, mode, uid, gid)"
			   " VALUES(?1, ?2, ?3, ?3, ?4, ?5, ?6)",
	[ST_COLL_RENAME] = "UPDATE colls SET name = ?2, mtime = ?3, chtime = ?3 WHERE id = ?1",
	[ST_COLL_TOUCH] = "UPDATE colls SET mtime = ?2, chtime = ?3 WHERE id = ?1",
	[ST_COLL_SETATTR] = "UPDATE colls SET mode = ?2, uid = ?3, gid = ?4, chtime = ?5"
			    " WHERE id = ?1",
	[ST_COLL_NDOCS] = "SELECT count(*) FROM docs WHERE coll = ?1",
	[ST_COLL_NFILES] = "SELECT count(*) FROM files WHERE coll = ?1",
	[ST_COLL_OPTIONS] = "UPDATE colls SET options = ?2 WHERE id = ?1",
	[ST_COLL_OPTIONS_GET] = "SELECT options FROM colls WHERE id = ?1",
	[ST_DOC_BSON_LEN] = "SELECT length(bson) FROM docs WHERE id = ?1",
	[ST_DOC_BY_KEY] = "SELECT id, coll, name, size, mode, uid, gid, mtime, ctime,"
			  " coalesce(atime, mtime) FROM docs"
			  " WHERE coll = ?1 AND key = ?2",
	[ST_DOC_BY_ID] = "SELECT id, coll, name, size, mode, uid, gid, mtime, ctime,"
			 " coalesce(atime, mtime) FROM docs"
			 " WHERE id = ?1",
	[ST_DOC_BSON] = "SELECT bson FROM docs WHERE id = ?1",
	[ST_DOC_INSERT] = "INSERT INTO docs(id, coll, key, name, size, mode, uid, gid, mtime,"
			  " ctime, bson, evseq) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?11, ?10,"
			  " ?12)",
	[ST_DOC_UPDATE] = "UPDATE docs SET size = ?2, mtime = ?5, ctime = ?3, bson = ?4,"
			  " evseq = ?6 WHERE id = ?1",
	[ST_DOC_DELETE] = "DELETE FROM docs WHERE id = ?1",
	[ST_DOC_LIST] = "SELECT d.id, d.coll, d.name, d.size, d.mode, d.uid, d.gid, d.mtime,"
			" d.ctime, coalesce(d.atime, d.mtime)" STORE__DOCS_OF_COLL_AFTER
			" ORDER BY r.lo, d.id LIMIT 256",
	[ST_DOC_SETATTR] = "UPDATE docs SET mode = ?2, uid = ?3, gid = ?4, mtime = ?5, ctime = ?6,"
			   " atime = ?7 WHERE id = ?1",
	[ST_DOC_ATIME] = "UPDATE docs SET atime = ?2, ctime = ?3 WHERE id = ?1",
	[ST_DOC_RENAME] = "UPDATE docs SET coll = ?2, key = ?3, name = ?4, size = ?5, ctime = ?6,"
			  " bson = ?7, evseq = ?8 WHERE id = ?1",
	[ST_FILE_BY_NAME] = "SELECT id, coll, name, kind, " STORE__FILE_SIZE ", mode, uid, gid, mtime,"
			    " ctime, coalesce(atime, mtime)," STORE__FILE_LINKS " FROM files"
			    " WHERE coll = ?1 AND name = ?2",
	[ST_FILE_BY_ID] = "SELECT id, coll, name, kind, " STORE__FILE_SIZE ", mode, uid, gid, mtime,"
			  " ctime, coalesce(atime, mtime)," STORE__FILE_LINKS " FROM files"
			  " WHERE id = ?1",
	[ST_FILE_DATA] = "SELECT data FROM files WHERE id = ?1",
	[ST_FILE_INSERT] = "INSERT INTO files(id, coll, name, kind, mode, uid, gid, mtime, ctime,"
			   " data) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9)",
	[ST_FILE_WRITE] = "UPDATE files SET data = ?2, mtime = ?3, ctime = ?3 WHERE id = ?1",
	[ST_FILE_DELETE] = "DELETE FROM files WHERE id = ?1",
	[ST_FILE_LIST] = "SELECT id, coll, name, kind, " STORE__FILE_SIZE ", mode, uid, gid, mtime, ctime,"
			 " coalesce(atime, mtime)," STORE__FILE_LINKS " FROM files"
			 " WHERE coll = ?1 AND id > ?2 ORDER BY id LIMIT 256",
	[ST_FILE_SETATTR] = "UPDATE files SET mode = ?2, uid = ?3, gid = ?4, mtime = ?5,"
			    " ctime = ?6, atime = ?7 WHERE id = ?1",
	[ST_FILE_ATIME] = "UPDATE files SET atime = ?2, ctime = ?3 WHERE id = ?1",
	[ST_FILE_LINK] = "INSERT INTO files(id, coll, name, kind, mode, uid, gid, mtime, ctime,"
			 " ino) VALUES(?1, ?2, ?3, ?4, 0, 0, 0, 0, 0, ?5)",
	[ST_FILE_HIDE] = "UPDATE files SET name = '0/' || id, ctime = ?2 WHERE id = ?1",
	[ST_FILE_TOUCH] = "UPDATE files SET mtime = coalesce(?2, mtime), ctime = ?3 WHERE id = ?1",
	[ST_FILE_IN_DIR] = "SELECT 1 FROM files WHERE coll = ?1 AND name >= ?2 AND name < ?3"
			   " LIMIT 1",
	[ST_FILE_RENAME] = "UPDATE files SET coll = ?2, name = ?3, ctime = ?4 WHERE id = ?1",
	[ST_VAC_GET] = "SELECT id FROM vacated WHERE coll = ?1 AND key = ?2 AND time > ?3",
	[ST_VAC_PUT] = "INSERT OR REPLACE INTO vacated(coll, key, id, time) VALUES(?1, ?2, ?3, ?4)",
	[ST_VAC_DEL] = "DELETE FROM vacated WHERE (coll = ?1 AND key = ?2) OR time < ?3",
	[ST_VAC_ANY] = "SELECT 1 FROM vacated WHERE coll = ?1 AND time > ?2 LIMIT 1",
	[ST_CHANGE_ADD] = "INSERT INTO changes(coll, op, id, name) VALUES(?1, ?2, ?3, ?4)",
	[ST_CHANGE_SINCE] = "SELECT seq, coll, op, id, name FROM changes WHERE seq > ?1"
			    " ORDER BY seq LIMIT 1024",
	[ST_CHANGE_LAST] = "SELECT max(seq) FROM changes",
	[ST_EV_ADD] = "INSERT INTO events(seq, ts, coll, op, line, off_db, off_coll, docid, pmode,"
		      " puid, pgid, wall, len) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
		      " ?12, ?13)",
	/* Keeps the version of document ?1 that an event still kept refers to (changes.c
	 * note 6), before the row changes or goes. */
	[ST_EV_KEEP_DOC] = "INSERT INTO evdocs(seq, bson) SELECT evseq, bson FROM docs WHERE"
			   " id = ?1 AND evseq > coalesce((SELECT v FROM meta WHERE"
			   " k = 'events_cut'), 0)",
	[ST_EV_SET_REF] = "UPDATE docs SET evseq = ?2 WHERE id = ?1",
	[ST_EV_LAST_SEQ] = "SELECT max(coalesce((SELECT max(seq) FROM events), 0),"
			   " coalesce((SELECT v FROM meta WHERE k = 'events_cut'), 0))",
	[ST_EV_LAST_TS] = "SELECT ts FROM events ORDER BY seq DESC LIMIT 1",
	/* The database's stream by seq: off_db grows with seq (changes.c note 7). */
	[ST_EV_END_DB] = "SELECT max(coalesce((SELECT off_db + coalesce(len, length(line)) FROM events WHERE"
			 " off_db IS NOT NULL ORDER BY seq DESC LIMIT 1), 0),"
			 " coalesce((SELECT endoff FROM evends WHERE coll = ''), 0))",
	[ST_EV_END_COLL] = "SELECT max(coalesce((SELECT off_coll + coalesce(len, length(line)) FROM events WHERE"
			   " coll = ?1 AND off_coll IS NOT NULL ORDER BY off_coll DESC LIMIT 1), 0),"
			   " coalesce((SELECT endoff FROM evends WHERE coll = ?1), 0))",
	[ST_EV_START_DB] = "SELECT off_db FROM events WHERE off_db IS NOT NULL ORDER BY seq LIMIT 1",
	[ST_EV_START_COLL] = "SELECT min(off_coll) FROM events WHERE coll = ?1 AND off_coll IS NOT NULL",
	[ST_EV_DB_AFTER] = "SELECT seq, off_db FROM events WHERE seq >= ?1 AND off_db IS NOT NULL"
			   " ORDER BY seq LIMIT 1",
	[ST_EV_MAX_SEQ] = "SELECT max(seq) FROM events",
	[ST_EV_LIST_DB] = "SELECT " EV_COLS " off_db," EV_PERM " WHERE seq > ?1"
			  " AND off_db IS NOT NULL ORDER BY seq",
	[ST_EV_LIST_COLL] = "SELECT " EV_COLS " off_coll," EV_PERM " WHERE e.coll = ?2"
			    " AND off_coll IS NOT NULL AND seq > ?1 ORDER BY off_coll",
	[ST_EV_FROM_DB] = "SELECT " EV_COLS " off_db," EV_PERM " WHERE e.seq >= ?1"
			  " AND e.off_db IS NOT NULL ORDER BY e.seq",
	[ST_EV_FROM_COLL] = "SELECT " EV_COLS " off_coll," EV_PERM " WHERE e.coll = ?2"
			    " AND off_coll >= coalesce((SELECT max(off_coll) FROM events WHERE"
			    " coll = ?2 AND off_coll <= ?1), 0) ORDER BY off_coll",
	[ST_DOC_FETCH] = "SELECT bson FROM docs WHERE id = ?1",
	[ST_DOC_PERM] = "SELECT mode, uid, gid FROM docs WHERE id = ?1",
	/* The expression of docs_private, word for word: SQLite uses a partial index only
	 * for a query whose WHERE names its condition as written (cred.c note 1). */
	[ST_COLL_PRIVATE] = "SELECT 1 FROM docs WHERE coll = ?1 AND (mode & 292) != 292 LIMIT 1",
	[ST_COLL_PRIVATE_LIST] = "SELECT mode, uid, gid FROM docs WHERE coll = ?1"
				 " AND (mode & 292) != 292",
	[ST_COLL_PERM_LIST] = "SELECT mode, uid, gid FROM docs WHERE coll = ?1",
	[ST_IX_LIST] = "SELECT name, spec, ixid, multikey, created, build_ms FROM indexes"
		       " WHERE coll = ?1 ORDER BY ixid",
	[ST_IX_INSERT] = "INSERT INTO indexes(coll, name, spec, ixid, multikey, created, build_ms)"
			 " VALUES(?1, ?2, ?3, ?4, 0, ?5, 0)",
	[ST_IX_BUILT] = "UPDATE indexes SET build_ms = ?3 WHERE coll = ?1 AND name = ?2",
	[ST_IX_DELETE] = "DELETE FROM indexes WHERE coll = ?1 AND name = ?2",
	[ST_IX_MULTIKEY] = "UPDATE indexes SET multikey = multikey | ?3 WHERE coll = ?1"
			   " AND name = ?2",
	[ST_IX_VERSION] = "SELECT ixver FROM colls WHERE id = ?1",
	[ST_IX_BUMP] = "UPDATE colls SET ixver = ixver + 1 WHERE id = ?1",
	[ST_IKEY_INSERT] = "INSERT OR REPLACE INTO ikeys(ix, key, id, vals) VALUES(?1, ?2, ?3, ?4)",
	[ST_IKEY_DELETE] = "DELETE FROM ikeys WHERE ix = ?1 AND key = ?2 AND id = ?3",
	[ST_IKEY_DUP] = "SELECT id FROM ikeys WHERE ix = ?1 AND key >= ?2 AND key < ?4"
			" AND id <> ?3 LIMIT 1",
	[ST_IKEY_DROP] = "DELETE FROM ikeys WHERE ix = ?1",
	[ST_RUN_LAST] = "SELECT lo, hi FROM runs WHERE coll = ?1 ORDER BY lo DESC LIMIT 1",
	[ST_RUN_AT] = "SELECT lo, hi FROM runs WHERE coll = ?1 AND lo <= ?2 ORDER BY lo DESC"
		      " LIMIT 1",
	[ST_RUN_PUT] = "INSERT OR REPLACE INTO runs(coll, lo, hi) VALUES(?1, ?2, ?3)",
	[ST_RUN_GAP] = "SELECT 1 FROM docs WHERE id > ?1 AND id < ?2 AND coll <> ?3 LIMIT 1",
};

int64_t store__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the thread's stop hook (store.h) ---------------------------------------------- */

static _Thread_local int (*tls_stop)(void *ctx, struct dfs_err *err);
static _Thread_local void *tls_stop_ctx;
static _Thread_local bool tls_ending; /* in COMMIT or ROLLBACK: never interrupted */

void store_thread_stop_set(int (*stop)(void *ctx, struct dfs_err *err), void *ctx)
{
	tls_stop = stop;
	tls_stop_ctx = ctx;
}

int store_thread_stopped(struct dfs_err *err)
{
	return tls_stop ? tls_stop(tls_stop_ctx, err) : 0;
}

/* SQLite's progress handler, on every connection: nonzero interrupts the statement
 * (SQLITE_INTERRUPT, which conn_err turns into the hook's error). */
static int conn_progress(void *unused)
{
	(void)unused;
	return !tls_ending && tls_stop && tls_stop(tls_stop_ctx, NULL) != 0;
}

static int conn_err(sqlite3 *h, int rc, const char *what, struct dfs_err *err)
{
	int code = DFS_EIO;

	if ((rc & 0xff) == SQLITE_INTERRUPT) {
		int stop = store_thread_stopped(err);

		if (stop)
			return stop;
		return dfs_err_set(err, DFS_EINTR, "%s: interrupted", what);
	}

	if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
		code = DFS_EBUSY;
	else if ((rc & 0xff) == SQLITE_CONSTRAINT)
		code = DFS_EEXIST;
	else if ((rc & 0xff) == SQLITE_FULL ||
		 ((rc & 0xff) == SQLITE_IOERR && h && sqlite3_system_errno(h) == ENOSPC))
		return dfs_err_set(err, DFS_ENOSPC, "%s: no space left on the store's file system (%s)",
				   what, h ? sqlite3_errmsg(h) : sqlite3_errstr(rc));
	else if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB)
		code = DFS_ECORRUPT;
	return dfs_err_set(err, code, "%s: %s", what, h ? sqlite3_errmsg(h) : sqlite3_errstr(rc));
}

int store__sqlerr(struct store_txn *t, int rc, const char *what, struct dfs_err *err)
{
	rc = conn_err(t->c->h, rc, what, err);
	if (rc == DFS_ENOSPC)
		t->enospc = true;
	return rc;
}

/* After the rollback of a write that found the disk full (space.c note 1): gives the
 * reserve back, and copies the WAL into the database and truncates it, waiting a moment
 * for readers at most, so that what the WAL held on disk is free again. */
static void space_reclaim(struct store_txn *t)
{
	if (t->db->s)
		store__space_exhausted(t->db->s);
	sqlite3_busy_timeout(t->c->h, 200);
	sqlite3_wal_checkpoint_v2(t->c->h, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	sqlite3_busy_timeout(t->c->h, busy_ms);
}

static bool is_full(sqlite3 *h, int rc)
{
	return (rc & 0xff) == SQLITE_FULL ||
	       ((rc & 0xff) == SQLITE_IOERR && sqlite3_system_errno(h) == ENOSPC);
}

static int exec_sql(sqlite3 *h, const char *sql, struct dfs_err *err)
{
	char *msg = NULL;
	int rc = sqlite3_exec(h, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		if (is_full(h, rc))
			dfs_err_set(err, DFS_ENOSPC,
				    "no space left on the store's file system (sqlite: %s)",
				    msg ? msg : sqlite3_errstr(rc));
		else if ((rc & 0xff) != SQLITE_INTERRUPT || !store_thread_stopped(err))
			dfs_err_set(err, (rc & 0xff) == SQLITE_BUSY ? DFS_EBUSY : DFS_EIO,
				    "sqlite: %s", msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		if (is_full(h, rc))
			return DFS_ENOSPC;
		return err ? err->code : DFS_EIO;
	}
	return 0;
}

/* Has the file c has open been unlinked or replaced under its path (note 7)? */
static bool conn_moved(struct store__conn *c)
{
	int moved = 0;

	if (sqlite3_file_control(c->h, "main", SQLITE_FCNTL_HAS_MOVED, &moved) != SQLITE_OK)
		return true;
	return moved != 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Does db's path still name the file db was opened on (note 7)? A failure to tell (an
 * error other than ENOENT) counts as yes. */
static bool path_is_db(const struct store_db *db)
{
	struct stat st;

	if (stat(db->path, &st) != 0)
		return errno != ENOENT;
	return same_file(&st, &db->st);
}

/* Is c's file the one db was opened on, and does db's path still name it (note 7)? */
static bool conn_is_db(struct store__conn *c, const struct store_db *db)
{
	struct stat st;

	return stat(db->path, &st) == 0 && same_file(&st, &db->st) && !conn_moved(c);
}

/* Gives c back to db's pool; a dropped db's connections are closed instead, so that the
 * unlinked file's space is freed (note 7). */
static void conn_put(struct store_db *db, struct store__conn *c)
{
	bool dropped;

	pthread_mutex_lock(&db->pool_lock);
	dropped = db->dropped;
	if (!dropped) {
		c->next = db->pool;
		db->pool = c;
	}
	pthread_mutex_unlock(&db->pool_lock);
	if (dropped)
		store__conn_close(c);
}

/* Marks db dropped, moves it to the dropped list and closes its idle connections (note 7).
 * Needs s->lock. Closing a connection never checkpoints into, or deletes, the WAL its path
 * names now: SQLite sees that its database file moved. */
static void db_retire_locked(struct store *s, struct store_db *db)
{
	struct store_db **pp;
	struct store__conn *idle, *c;

	if (db->dropped)
		return;
	for (pp = &s->dbs; *pp; pp = &(*pp)->next) {
		if (*pp == db) {
			*pp = db->next;
			break;
		}
	}
	pthread_mutex_lock(&db->pool_lock);
	db->dropped = true;
	idle = db->pool;
	db->pool = NULL;
	pthread_mutex_unlock(&db->pool_lock);
	while ((c = idle)) {
		idle = c->next;
		store__conn_close(c);
	}
	db->next = s->dropped;
	s->dropped = db;
	store__dcache_set_budget(&db->dc, 0);
}

static void db_retire(struct store_db *db)
{
	pthread_mutex_lock(&db->s->lock);
	db_retire_locked(db->s, db);
	pthread_mutex_unlock(&db->s->lock);
}

int store__conn_open(const char *path, bool create, struct store__conn **out, struct dfs_err *err)
{
	struct store__conn *c;
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
	int rc;

	if (create)
		flags |= SQLITE_OPEN_CREATE;
	c = calloc(1, sizeof(*c));
	if (!c)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	rc = sqlite3_open_v2(path, &c->h, flags, NULL);
	if (rc != SQLITE_OK) {
		if (rc == SQLITE_CANTOPEN && !create)
			dfs_err_set(err, DFS_ENOENT, "cannot open '%s'", path);
		else
			conn_err(c->h, rc, path, err);
		sqlite3_close(c->h);
		free(c);
		return err ? err->code : DFS_EIO;
	}
	sqlite3_busy_timeout(c->h, busy_ms);
	sqlite3_extended_result_codes(c->h, 1);
	sqlite3_progress_handler(c->h, 1000, conn_progress, NULL);
	/* mmap_size: reads map the database file instead of copying each page out of the OS
	 * cache with pread (a third of an indexed query's FETCH time at 1M documents). Writes
	 * still go through the WAL. secure_delete=FAST: Debian's SQLite zeroes every deleted
	 * cell and freed page (secure_delete on), which made trimming change-stream history
	 * write twice what it deleted; FAST still zeroes cells on the pages a delete writes. */
	if (exec_sql(c->h,
		     "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
		     " PRAGMA cache_size=-16384; PRAGMA temp_store=MEMORY;"
		     " PRAGMA wal_autocheckpoint=8192; PRAGMA mmap_size=4294967296;"
		     " PRAGMA secure_delete=FAST;",
		     err)) {
		store__conn_close(c);
		return err ? err->code : DFS_EIO;
	}
	*out = c;
	return 0;
}

void store__conn_close(struct store__conn *c)
{
	if (!c)
		return;
	for (int i = 0; i < ST__COUNT; i++)
		sqlite3_finalize(c->st[i]);
	sqlite3_finalize(c->cursor_st[0]);
	sqlite3_finalize(c->cursor_st[1]);
	sqlite3_close(c->h);
	free(c);
}

sqlite3_stmt *store__stmt(struct store_txn *t, enum store__st which, struct dfs_err *err)
{
	struct store__conn *c = t->c;
	int rc;

	if (!c->st[which]) {
		rc = sqlite3_prepare_v3(c->h, stmt_sql[which], -1, SQLITE_PREPARE_PERSISTENT,
					&c->st[which], NULL);
		if (rc != SQLITE_OK) {
			conn_err(c->h, rc, "prepare", err);
			return NULL;
		}
	} else {
		sqlite3_reset(c->st[which]);
		sqlite3_clear_bindings(c->st[which]);
	}
	return c->st[which];
}

/* ---- store ------------------------------------------------------------------------- */

/* Before SQLite initialises (the first connection): no memory statistics, which cost a
 * global mutex around every allocation of every connection. Nothing reads them. */
static void sqlite_config(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int store_open(const char *dir, bool create, struct store **out, struct dfs_err *err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct store *s;
	struct stat st;

	pthread_once(&once, sqlite_config);
	if (stat(dir, &st) != 0) {
		if (errno != ENOENT || !create)
			return dfs_err_set(err, DFS_ENOENT, "store '%s' does not exist", dir);
		if (mkdir(dir, 0755) != 0)
			return dfs_err_set(err, DFS_EIO, "cannot create store '%s': %s", dir,
					   strerror(errno));
	} else if (!S_ISDIR(st.st_mode)) {
		return dfs_err_set(err, DFS_ENOTDIR, "store '%s' is not a directory", dir);
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	s->dir = realpath(dir, NULL);
	if (!s->dir) {
		free(s);
		return dfs_err_set(err, DFS_EIO, "cannot resolve '%s': %s", dir, strerror(errno));
	}
	pthread_mutex_init(&s->lock, NULL);
	s->dc_budget = STORE_DOC_CACHE_DEFAULT;
	read_mark(s);
	*out = s;
	return 0;
}

void store_set_doc_cache(struct store *s, size_t bytes)
{
	struct store_db *db;

	pthread_mutex_lock(&s->lock);
	s->dc_budget = bytes;
	for (db = s->dbs; db; db = db->next)
		store__dcache_set_budget(&db->dc, bytes);
	pthread_mutex_unlock(&s->lock);
}

void store_db_doc_cache_stats(struct store_db *db, struct store_dcache_stats *out)
{
	store__dcache_stats(&db->dc, out);
}

static void db_free(struct store_db *db)
{
	struct store__conn *c;

	pthread_mutex_lock(&db->ckpt_lock);
	db->ckpt_stop = true;
	pthread_cond_signal(&db->ckpt_cond);
	pthread_mutex_unlock(&db->ckpt_lock);
	if (db->ckpt_pid == getpid())
		pthread_join(db->ckpt_thread, NULL);
	pthread_cond_destroy(&db->ckpt_cond);
	pthread_mutex_destroy(&db->ckpt_lock);

	while ((c = db->pool)) {
		db->pool = c->next;
		store__conn_close(c);
	}
	pthread_mutex_destroy(&db->pool_lock);
	pthread_mutex_destroy(&db->write_lock);
	pthread_mutex_destroy(&db->ixstats_lock);
	store__dcache_release(&db->dc);
	free(db->path);
	free(db);
}

void store_free(struct store *s)
{
	struct store_db *db;

	if (!s)
		return;
	while ((db = s->dbs)) {
		s->dbs = db->next;
		db_free(db);
	}
	while ((db = s->dropped)) {
		s->dropped = db->next;
		db_free(db);
	}
	pthread_mutex_destroy(&s->lock);
	free(s->mark_why);
	free(s->dir);
	free(s);
}

const char *store_path(const struct store *s)
{
	return s->dir;
}

int store_db_name_check(const char *name, struct dfs_err *err)
{
	size_t n = strlen(name);

	if (n == 0)
		return dfs_err_set(err, DFS_EINVAL, "database name must not be empty");
	if (n > DFS_MAX_NS_NAME)
		return dfs_err_set(err, DFS_ENAMETOOLONG,
				   "database name '%.20s...' is %zu bytes, over the %d-byte limit",
				   name, n, DFS_MAX_NS_NAME);
	if (strpbrk(name, "/\\. \"$*<>:|?"))
		return dfs_err_set(
			err, DFS_EINVAL,
			"database name '%s' must not contain any of / \\ . space \" $ * < > : | ?",
			name);
	return 0;
}

int store_coll_name_check(const char *name, struct dfs_err *err)
{
	size_t n = strlen(name);

	if (n == 0)
		return dfs_err_set(err, DFS_EINVAL, "collection name must not be empty");
	if (n > DFS_MAX_NS_NAME)
		return dfs_err_set(
			err, DFS_ENAMETOOLONG,
			"collection name '%.20s...' is %zu bytes, over the %d-byte limit", name, n,
			DFS_MAX_NS_NAME);
	if (strchr(name, '/') || strchr(name, '$'))
		return dfs_err_set(err, DFS_EINVAL,
				   "collection name '%s' must not contain '/' or '$'", name);
	if (name[0] == '.' || strncmp(name, "system.", 7) == 0)
		return dfs_err_set(err, DFS_EINVAL,
				   "collection name '%s' must not start with '.' or 'system.'",
				   name);
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int store_db_list(struct store *s, int (*cb)(void *ctx, const char *name), void *ctx,
		  struct dfs_err *err)
{
	DIR *d = opendir(s->dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!d)
		return dfs_err_set(err, DFS_EIO, "cannot list store '%s': %s", s->dir,
				   strerror(errno));
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char name[DFS_MAX_NS_NAME + 1];

		if (len < 4 || len - 3 > DFS_MAX_NS_NAME || strcmp(de->d_name + len - 3, ".db"))
			continue;
		memcpy(name, de->d_name, len - 3);
		name[len - 3] = '\0';
		if (store_db_name_check(name, NULL))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				abort();
		}
		names[n++] = strdup(name);
	}
	closedir(d);
	if (n) /* names is NULL then, which qsort must not get */
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++) {
		if (!rc)
			rc = cb(ctx, names[i]);
		free(names[i]);
	}
	free(names);
	return rc;
}

static int64_t meta_int(struct store__conn *c, const char *k, int64_t dflt)
{
	sqlite3_stmt *st;
	int64_t v = dflt;

	if (sqlite3_prepare_v2(c->h, "SELECT v FROM meta WHERE k = ?1", -1, &st, NULL) != SQLITE_OK)
		return dflt;
	sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Finds the largest database number in use, reading each database's meta table. */
static uint32_t max_db_number(struct store *s)
{
	DIR *d = opendir(s->dir);
	struct dirent *de;
	uint32_t max = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		struct store__conn *c;
		char *path;

		if (len < 4 || strcmp(de->d_name + len - 3, ".db"))
			continue;
		if (asprintf(&path, "%s/%s", s->dir, de->d_name) < 0)
			abort();
		if (store__conn_open(path, false, &c, NULL) == 0) {
			int64_t v = meta_int(c, "dbnum", 0);

			if (v > max)
				max = (uint32_t)v;
			store__conn_close(c);
		}
		free(path);
	}
	closedir(d);
	return max;
}

/* The columns of versions 6 to 8 (migrate_cols), added to tables that lack them. */
static int migrate_columns(sqlite3 *h, struct dfs_err *err)
{
	for (size_t i = 0; i < sizeof(migrate_cols) / sizeof(migrate_cols[0]); i++) {
		char sql[160];
		sqlite3_stmt *st;
		bool has = false;
		int rc;

		snprintf(sql, sizeof(sql),
			 "SELECT 1 FROM pragma_table_info('%s') WHERE name = '%s'",
			 migrate_cols[i][0], migrate_cols[i][1]);
		if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
			return dfs_err_set(err, DFS_EIO, "sqlite: %s", sqlite3_errmsg(h));
		rc = sqlite3_step(st);
		has = rc == SQLITE_ROW;
		sqlite3_finalize(st);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			return dfs_err_set(err, DFS_EIO, "sqlite: %s", sqlite3_errstr(rc));
		if (has)
			continue;
		snprintf(sql, sizeof(sql), "ALTER TABLE %s ADD COLUMN %s INTEGER",
			 migrate_cols[i][0], migrate_cols[i][1]);
		if ((rc = exec_sql(h, sql, err)))
			return rc;
	}
	return 0;
}

/* Creates the schema of a new database file (or checks the version of an existing one). */
static int db_init_schema(struct store *s, struct store__conn *c, const char *name,
			  struct dfs_err *err)
{
	char sql[256];
	int rc;

	{
		sqlite3_stmt *st;
		int uv = 0;

		if (sqlite3_prepare_v2(c->h, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK) {
			if (sqlite3_step(st) == SQLITE_ROW)
				uv = sqlite3_column_int(st, 0);
			sqlite3_finalize(st);
		}
		if (uv == SCHEMA_VERSION)
			return 0;
		if (uv > SCHEMA_VERSION)
			return dfs_err_set(
				err, DFS_EINVAL,
				"database schema version %d is newer than this docfs (%d)", uv,
				SCHEMA_VERSION);
	}
	rc = exec_sql(c->h, "BEGIN IMMEDIATE", err);
	if (rc)
		return rc;
	{
		/* Read again under the lock: another process may have migrated meanwhile. */
		sqlite3_stmt *st;
		int uv = 0;

		if (sqlite3_prepare_v2(c->h, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK) {
			if (sqlite3_step(st) == SQLITE_ROW)
				uv = sqlite3_column_int(st, 0);
			sqlite3_finalize(st);
		}
		if (uv == SCHEMA_VERSION) {
			exec_sql(c->h, "COMMIT", NULL);
			return 0;
		}
		if (uv >= 1 && exec_sql(c->h, EVENTS_SQL, err))
			goto fail;
		/* Before the index rebuild below: its statements read the new columns. */
		if (uv >= 1 && uv <= 8 && migrate_columns(c->h, err))
			goto fail;
		/* 8 -> 9: the database's stream is read by seq (changes.c note 7) */
		if (uv >= 1 && uv <= 8 && exec_sql(c->h, "DROP INDEX IF EXISTS events_db", err))
			goto fail;
		if (uv == 1 && exec_sql(c->h, migrate_1_2_sql, err))
			goto fail;
		/* Before the index rebuild below: its scan reads the runs. */
		if (uv >= 1 && uv <= 3 && exec_sql(c->h, migrate_3_4_sql, err))
			goto fail;
		/* 1, 2 -> 3: index keys end with the _id key (index.c note 1): rebuild them. */
		if ((uv == 1 || uv == 2) &&
		    (exec_sql(c->h, "DELETE FROM ikeys", err) || store__ix_migrate(c, name, err)))
			goto fail;
	}
	if (exec_sql(c->h, schema_sql, err))
		goto fail;
	if (meta_int(c, "dbnum", 0) == 0) {
		snprintf(sql, sizeof(sql),
			 "INSERT OR REPLACE INTO meta VALUES('dbnum', %u);"
			 "INSERT OR REPLACE INTO meta VALUES('next_id', 1);"
			 "INSERT OR REPLACE INTO meta VALUES('ctime', %lld);",
			 max_db_number(s) + 1, (long long)store__now_ns());
		if (exec_sql(c->h, sql, err))
			goto fail;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d; COMMIT", SCHEMA_VERSION);
	if (exec_sql(c->h, sql, err))
		goto fail;
	return 0;
fail:
	exec_sql(c->h, "ROLLBACK", NULL);
	return err ? err->code : DFS_EIO;
}

/* Opens the database file path names and checks its schema; *st: the file's identity,
 * which the connection has open (note 7). Another process dropping the database meanwhile
 * (the file unlinked, perhaps made again) is not an I/O error: the open is tried again, or
 * the database is not found. Needs s->lock. */
static int db_open_file(struct store *s, const char *name, const char *path, bool create,
			struct store__conn **out, struct stat *st, struct dfs_err *err)
{
	struct dfs_err e = {0};
	int rc = 0;

	for (int attempt = 0; attempt < 3; attempt++) {
		struct store__conn *c = NULL;
		struct stat before;
		bool existed = stat(path, &before) == 0;

		dfs_err_clear(&e);
		if (!existed && !create)
			break;
		rc = store__conn_open(path, create, &c, &e);
		if (!rc)
			rc = db_init_schema(s, c, name, &e);
		if (stat(path, st) != 0) {
			store__conn_close(c);
			continue; /* dropped meanwhile */
		}
		if (!rc && !conn_moved(c)) {
			*out = c;
			return 0;
		}
		store__conn_close(c);
		if (rc && existed && same_file(&before, st))
			break; /* a failure of its own, not of a drop */
	}
	if (!e.code)
		return dfs_err_set(err, DFS_ENOENT, "database '%s' not found", name);
	if (err)
		*err = e;
	return e.code;
}

int store_db_get(struct store *s, const char *name, bool create, struct store_db **out,
		 struct dfs_err *err)
{
	struct store_db *db;
	struct store__conn *c = NULL;
	struct stat st;
	char *path = NULL;
	int lockfd = -1;
	int rc;

	if ((rc = store_db_name_check(name, err)))
		return rc;
	pthread_mutex_lock(&s->lock);
	for (db = s->dbs; db; db = db->next) {
		if (strcmp(db->name, name) == 0) {
			if (path_is_db(db)) {
				pthread_mutex_unlock(&s->lock);
				*out = db;
				return 0;
			}
			/* Dropped by another process, perhaps created again (note 7). */
			db_retire_locked(s, db);
			break;
		}
	}
	if (asprintf(&path, "%s/%s.db", s->dir, name) < 0)
		abort();
	if (stat(path, &st) != 0) {
		char *lockpath;

		if (!create) {
			rc = dfs_err_set(err, DFS_ENOENT, "database '%s' not found", name);
			goto done;
		}
		if ((rc = gate_check(s, err)))
			goto done;
		if (asprintf(&lockpath, "%s/.lock", s->dir) < 0)
			abort();
		lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		free(lockpath);
		if (lockfd >= 0)
			flock(lockfd, LOCK_EX);
	}
	rc = db_open_file(s, name, path, create, &c, &st, err);
	if (rc)
		goto done;
	db = calloc(1, sizeof(*db));
	if (!db) {
		rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
		goto done;
	}
	db->s = s;
	snprintf(db->name, sizeof(db->name), "%s", name);
	db->path = path;
	db->st = st;
	path = NULL;
	db->num = (uint32_t)meta_int(c, "dbnum", 0);
	db->ctime_ns = meta_int(c, "ctime", 0);
	pthread_mutex_init(&db->pool_lock, NULL);
	pthread_mutex_init(&db->write_lock, NULL);
	pthread_mutex_init(&db->ckpt_lock, NULL);
	pthread_cond_init(&db->ckpt_cond, NULL);
	pthread_mutex_init(&db->ixstats_lock, NULL);
	store__dcache_init(&db->dc, s->dc_budget);
	db->pool = c;
	c = NULL;
	db->next = s->dbs;
	s->dbs = db;
	*out = db;
done:
	if (lockfd >= 0)
		close(lockfd);
	pthread_mutex_unlock(&s->lock);
	store__conn_close(c);
	free(path);
	return rc;
}

int store_db_drop(struct store *s, const char *name, struct dfs_err *err)
{
	struct store_db *db;
	int rc;

	rc = store_db_get(s, name, false, &db, err);
	if (rc)
		return rc;
	return store_db_drop_db(db, err);
}

int store_db_drop_db(struct store_db *db, struct dfs_err *err)
{
	const char *name = db->name;
	struct store_txn *t;
	int64_t n = 0;
	int rc;

	/* The write transaction fails if db's file is no longer the one its path names (note
	 * 7): the files unlinked below are db's own. */
	rc = store_txn_begin(db, true, &t, err);
	if (rc)
		return rc;
	{
		sqlite3_stmt *st;

		if (sqlite3_prepare_v2(t->c->h, "SELECT count(*) FROM colls", -1, &st, NULL) ==
		    SQLITE_OK) {
			if (sqlite3_step(st) == SQLITE_ROW)
				n = sqlite3_column_int64(st, 0);
			sqlite3_finalize(st);
		}
	}
	if (n > 0) {
		store_txn_abort(t);
		return dfs_err_set(err, DFS_ENOTEMPTY, "database '%s' has %lld collections", name,
				   (long long)n);
	}
	/* Remove the files while holding the write lock so no writer slips in. */
	{
		char *p;

		unlink(db->path);
		if (asprintf(&p, "%s-wal", db->path) >= 0) {
			unlink(p);
			free(p);
		}
		if (asprintf(&p, "%s-shm", db->path) >= 0) {
			unlink(p);
			free(p);
		}
	}
	store_txn_abort(t);
	/* Not freed: a pointer to it may still be held (store_db_get's "Borrowed until
	 * store_db_drop" is too short for a mount), so it waits, marked, until store_free. */
	db_retire(db);
	return 0;
}

bool store_db_gone(struct store_db *db)
{
	if (db->dropped)
		return true;
	if (path_is_db(db))
		return false;
	db_retire(db);
	return true;
}

const char *store_db_name(const struct store_db *db)
{
	return db->name;
}

uint32_t store_db_number(const struct store_db *db)
{
	return db->num;
}

int64_t store_db_ctime(const struct store_db *db)
{
	return db->ctime_ns;
}

static int sync_path(const char *path, struct dfs_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT
			       ? 0
			       : dfs_err_set(err, DFS_EIO, "open '%s': %s", path, strerror(errno));
	if (fdatasync(fd) != 0) {
		int e = errno;

		close(fd);
		return dfs_err_set(err, DFS_EIO, "fsync '%s': %s", path, strerror(e));
	}
	close(fd);
	return 0;
}

/* The WAL only: a commit is durable once its frames are, and a checkpoint syncs the database
 * file itself (synchronous=NORMAL). The database file must not be opened here: closing any
 * descriptor of it drops every POSIX lock this process holds on it, SQLite's SHARED lock
 * included, and another process closing its last connection then takes the file for its
 * own, checkpoints and deletes the WAL this process goes on writing to (its later commits
 * unseen by others, "disk I/O error" for their readers). */
int store_db_sync(struct store_db *db, struct dfs_err *err)
{
	char *wal;
	int rc;

	if (asprintf(&wal, "%s-wal", db->path) < 0)
		abort();
	rc = sync_path(wal, err);
	free(wal);
	return rc;
}

/* ---- transactions ------------------------------------------------------------------ */

/* The checkpointer of db (note 6): a PASSIVE checkpoint on a pooled connection whenever a
 * commit asks for one, until db_free. */
static void *ckpt_thread(void *arg)
{
	struct store_db *db = arg;

	pthread_mutex_lock(&db->ckpt_lock);
	for (;;) {
		struct store__conn *c;

		while (!db->ckpt_want && !db->ckpt_stop)
			pthread_cond_wait(&db->ckpt_cond, &db->ckpt_lock);
		if (db->ckpt_stop)
			break;
		pthread_mutex_unlock(&db->ckpt_lock);
		pthread_mutex_lock(&db->pool_lock);
		c = db->pool;
		if (c)
			db->pool = c->next;
		pthread_mutex_unlock(&db->pool_lock);
		if (!c && store__conn_open(db->path, false, &c, NULL) == 0 && !conn_is_db(c, db)) {
			store__conn_close(c); /* the path names another file now (note 7) */
			c = NULL;
		}
		if (c) {
			int log = 0, done, before = 0;

			/* Passes until one finds little new, or cannot copy everything (a
			 * reader needs older frames); SQLITE_BUSY (another checkpoint runs) or
			 * an error ends them too: the backstop bounds the WAL. */
			while (sqlite3_wal_checkpoint_v2(c->h, NULL, SQLITE_CHECKPOINT_PASSIVE,
							 &log, &done) == SQLITE_OK &&
			       log - before >= CKPT_REST && done == log)
				before = done;
			conn_put(db, c);
			pthread_mutex_lock(&db->ckpt_lock);
			db->ckpt_log = log;
			pthread_mutex_unlock(&db->ckpt_lock);
		}
		pthread_mutex_lock(&db->ckpt_lock);
		db->ckpt_want = false;
		db->ckpt_done = true;
	}
	pthread_mutex_unlock(&db->ckpt_lock);
	return NULL;
}

/* Starts the checkpointer with every signal blocked: a signal meant for the process (the
 * mount's SIGTERM) must reach a thread that acts on it. */
static bool ckpt_start(struct store_db *db)
{
	sigset_t all, old;
	bool ok;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ok = pthread_create(&db->ckpt_thread, NULL, ckpt_thread, db) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ok;
}

/* Wakes the checkpointer unless it runs, starting it first if this process has none.
 * Returns true when the committing writer must checkpoint itself: the thread caught up
 * and the rest since its last pass is small (any rest on a tight disk), or it cannot be
 * started. *busy: the thread was already running, so the WAL grew while it copied. */
static bool ckpt_wake(struct store_db *db, int pages, bool tight, bool *busy)
{
	bool self = false;

	*busy = false;
	pthread_mutex_lock(&db->ckpt_lock);
	if (db->ckpt_pid && db->ckpt_pid != getpid()) {
		/* A forked child: the thread that these flags describe is the parent's. */
		db->ckpt_pid = 0;
		db->ckpt_want = db->ckpt_done = false;
	}
	if (db->ckpt_done) {
		/* A WAL that started over since the last pass is all rest. */
		int rest = pages >= db->ckpt_log ? pages - db->ckpt_log : pages;

		db->ckpt_done = false;
		if (tight || rest < CKPT_PAGES) {
			self = true;
		} else {
			/* One large commit (an updateMany over 100,000 documents) since: the
			 * thread copies it, not the writer that waits to answer. */
			db->ckpt_want = true;
			pthread_cond_signal(&db->ckpt_cond);
		}
	} else if (!db->ckpt_want) {
		if (!db->ckpt_pid) {
			if (db->ckpt_stop || !ckpt_start(db))
				self = true;
			else
				db->ckpt_pid = getpid();
		}
		if (!self) {
			db->ckpt_want = true;
			pthread_cond_signal(&db->ckpt_cond);
		}
	} else {
		*busy = true;
	}
	pthread_mutex_unlock(&db->ckpt_lock);
	return self;
}

/* SQLite's hook after every commit of a writer, with the WAL's length in pages (note 6); it
 * replaces the autocheckpoint. */
static int wal_hook(void *arg, sqlite3 *h, const char *name, int pages)
{
	struct store_db *db = arg;
	/* A store whose disk was found full copies its WAL back in small steps: a WAL left
	 * to grow to CKPT_PAGES could fill that disk again by itself (space.c note 5). */
	bool tight = atomic_load(&store__space_of(db->s)->tight), busy;
	int limit = tight ? CKPT_TIGHT : CKPT_PAGES;

	if (pages < limit) {
		/* The WAL started over since the thread last finished: what it left is no
		 * longer a small rest for the next writer over the threshold to copy. One
		 * uncontended lock per commit. */
		pthread_mutex_lock(&db->ckpt_lock);
		db->ckpt_done = false;
		pthread_mutex_unlock(&db->ckpt_lock);
		return SQLITE_OK;
	}
	/* The backstop is for writers that outpace a running thread; a single commit past
	 * it, with the thread idle, is the thread's to copy (note 6). */
	if (ckpt_wake(db, pages, tight, &busy) || ((busy || tight) && pages >= CKPT_BACKSTOP))
		sqlite3_wal_checkpoint_v2(h, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	return SQLITE_OK;
}

int store_txn_begin(struct store_db *db, bool write, struct store_txn **out, struct dfs_err *err)
{
	struct store_txn *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	if (write && (rc = gate_check(db->s, err))) {
		free(t);
		return rc;
	}
	if (db->dropped) {
		free(t);
		return dfs_err_set(err, DFS_ENOENT, "database '%s' was dropped", db->name);
	}
	t->db = db;
	t->write = write;
	store__txn_take_cred(t);
	pthread_mutex_lock(&db->pool_lock);
	t->c = db->pool;
	if (t->c)
		db->pool = t->c->next;
	pthread_mutex_unlock(&db->pool_lock);
	if (!t->c) {
		struct dfs_err e = {0};

		rc = store__conn_open(db->path, false, &t->c, &e);
		if (rc || !conn_is_db(t->c, db)) {
			store__conn_close(rc ? NULL : t->c);
			free(t);
			if (!rc || store_db_gone(db)) {
				/* Not an error of its own, but a drop (note 7). */
				db_retire(db);
				return dfs_err_set(err, DFS_ENOENT,
						   "database '%s' was dropped by another process",
						   db->name);
			}
			if (err)
				*err = e;
			return rc;
		}
	}
	t->c->next = NULL;
	if (write) {
		sqlite3_wal_hook(t->c->h, wal_hook, db);
		pthread_mutex_lock(&db->write_lock);
	}
	rc = exec_sql(t->c->h, write ? "BEGIN IMMEDIATE" : "BEGIN", err);
	if (rc) {
		if (err)
			dfs_err_prefix(err, "database '%s': ", db->name);
		if (write)
			pthread_mutex_unlock(&db->write_lock);
		conn_put(db, t->c);
		free(t);
		return rc;
	}
	if (write && conn_moved(t->c)) {
		/* Dropped, and the write would be lost with the file (note 7). */
		store_txn_abort(t);
		db_retire(db);
		return dfs_err_set(err, DFS_ENOENT, "database '%s' was dropped by another process",
				   db->name);
	}
	*out = t;
	return 0;
}

/* Resets every statement of the connection: a statement left on a row keeps its read
 * snapshot open past COMMIT/ROLLBACK, and the next write transaction on the connection would
 * then fail with SQLITE_BUSY_SNAPSHOT instead of waiting. */
static void conn_reset(struct store__conn *c)
{
	sqlite3_stmt *st = NULL;

	while ((st = sqlite3_next_stmt(c->h, st)))
		sqlite3_reset(st);
}

void store__txn_close_fetch(struct store_txn *t)
{
	if (t->fetch)
		sqlite3_blob_close(t->fetch);
	t->fetch = NULL;
	dfs_buf_release(&t->fetched);
	dfs_buf_release(&t->fetched_text);
	t->fetched_id = 0;
}

static void txn_end(struct store_txn *t)
{
	struct store_db *db = t->db;

	store__ix_txn_free(t);
	store__validate_forget(t);
	dfs_buf_release(&t->scratch);
	dfs_buf_release(&t->key);
	if (t->write)
		pthread_mutex_unlock(&db->write_lock);
	conn_put(db, t->c);
	free(t);
}

int store_txn_commit(struct store_txn *t, struct dfs_err *err)
{
	int rc = 0;

	store__txn_close_fetch(t);
	if (t->write && (rc = store__run_flush(t, err)))
		goto fail;
	if (t->write && t->next_id && t->next_id != t->first_id) {
		sqlite3_stmt *st = store__stmt(t, ST_META_SET, err);

		if (!st) {
			rc = err ? err->code : DFS_EIO;
			goto fail;
		}
		sqlite3_bind_text(st, 1, "next_id", -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, t->next_id);
		if (sqlite3_step(st) != SQLITE_DONE) {
			rc = store__sqlerr(t, sqlite3_errcode(t->c->h), "store next id", err);
			goto fail;
		}
	}
	/* A stopped write (killOp, maxTimeMS) may have been cut short anywhere: all of it
	 * or none of it, and this is none. */
	if (t->write && (rc = store_thread_stopped(err)))
		goto fail;
	/* a primary whose lease ended while this write ran must not commit it */
	if (t->write && (rc = gate_check(t->db->s, err)))
		goto fail;
	conn_reset(t->c);
	tls_ending = true;
	rc = exec_sql(t->c->h, "COMMIT", err);
	tls_ending = false;
	if (rc)
		goto fail;
	if (t->write && t->db->s)
		store__reserve_keep(t->db->s);
	txn_end(t);
	return 0;
fail:
	conn_reset(t->c);
	tls_ending = true;
	exec_sql(t->c->h, "ROLLBACK", NULL);
	tls_ending = false;
	if (rc == DFS_ENOSPC || t->enospc)
		space_reclaim(t);
	txn_end(t);
	return rc;
}

void store_txn_abort(struct store_txn *t)
{
	if (!t)
		return;
	store__txn_close_fetch(t);
	conn_reset(t->c);
	tls_ending = true;
	exec_sql(t->c->h, "ROLLBACK", NULL);
	tls_ending = false;
	if (t->enospc)
		space_reclaim(t);
	txn_end(t);
}

int store_txn_mark(struct store_txn *t, struct dfs_err *err)
{
	int rc;

	if ((rc = store__run_flush(t, err)))
		return rc;
	return exec_sql(t->c->h, "SAVEPOINT txn_mark", err);
}

int store_txn_release(struct store_txn *t, struct dfs_err *err)
{
	int rc;

	if ((rc = store__run_flush(t, err)))
		return rc;
	return exec_sql(t->c->h, "RELEASE txn_mark", err);
}

void store_txn_undo(struct store_txn *t)
{
	/* What the undone statements left in t's caches goes too: the pending index entries
	 * (as a failed index build does), the fetched document; the runs cache may cover an
	 * id that is gone, which runs allow (doc.c note 5), and the change feed's counters
	 * stay ahead, a gap (changes.c note 5). */
	store__txn_close_fetch(t);
	exec_sql(t->c->h, "ROLLBACK TO txn_mark", NULL);
	exec_sql(t->c->h, "RELEASE txn_mark", NULL);
	store__ix_invalidate(t);
	t->coll_ok = 0;
	t->cap_coll = 0;
	t->ev_collid = 0;
	store__validate_forget(t);
}

struct store_db *store_txn_db(struct store_txn *t)
{
	return t->db;
}

int store__new_id(struct store_txn *t, int64_t *id, struct dfs_err *err)
{
	if (!t->write)
		return dfs_err_set(err, DFS_EINVAL, "new id in a read transaction");
	if (!t->next_id) {
		sqlite3_stmt *st = store__stmt(t, ST_META_GET, err);

		if (!st)
			return err ? err->code : DFS_EIO;
		sqlite3_bind_text(st, 1, "next_id", -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_ROW)
			return dfs_err_set(err, DFS_ECORRUPT, "database '%s' has no id counter",
					   t->db->name);
		t->next_id = t->first_id = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
	}
	*id = t->next_id++;
	return 0;
}

int store__change(struct store_txn *t, int64_t coll, int op, int64_t id, const char *name,
		  struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_CHANGE_ADD, err);
	int64_t seq;

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	sqlite3_bind_int(st, 2, op);
	sqlite3_bind_int64(st, 3, id);
	if (name)
		sqlite3_bind_text(st, 4, name, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store__sqlerr(t, sqlite3_errcode(t->c->h), "change feed", err);
	seq = sqlite3_last_insert_rowid(t->c->h);
	if (seq % 4096 == 0) {
		char sql[128];

		snprintf(sql, sizeof(sql), "DELETE FROM changes WHERE seq <= %lld",
			 (long long)(seq - CHANGES_KEEP));
		return exec_sql(t->c->h, sql, err);
	}
	return 0;
}

/* ---- collections ------------------------------------------------------------------- */

static void coll_from_row(sqlite3_stmt *st, struct store_coll *c)
{
	const unsigned char *name = sqlite3_column_text(st, 1);

	c->id = sqlite3_column_int64(st, 0);
	snprintf(c->name, sizeof(c->name), "%s", name ? (const char *)name : "");
	c->ctime_ns = sqlite3_column_int64(st, 2);
	c->mtime_ns = sqlite3_column_int64(st, 3);
	c->mode = (uint32_t)sqlite3_column_int64(st, 4);
	c->uid = (uint32_t)sqlite3_column_int64(st, 5);
	c->gid = (uint32_t)sqlite3_column_int64(st, 6);
	store__capped_decode(sqlite3_column_blob(st, 7), sqlite3_column_bytes(st, 7), c);
	c->chtime_ns = sqlite3_column_int64(st, 8);
}

static int coll_get(struct store_txn *t, enum store__st which, const char *name, int64_t id,
		    struct store_coll *out, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, which, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	if (name)
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	else
		sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		coll_from_row(st, out);
		sqlite3_reset(st);
		return 0;
	}
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "collection lookup", err);
	if (name)
		return dfs_err_set(err, DFS_ENOENT, "collection '%s.%s' not found", t->db->name,
				   name);
	return dfs_err_set(err, DFS_ENOENT, "collection %lld not found", (long long)id);
}

int store_coll_find(struct store_txn *t, const char *name, struct store_coll *out,
		    struct dfs_err *err)
{
	return coll_get(t, ST_COLL_FIND, name, 0, out, err);
}

int store_coll_by_id(struct store_txn *t, int64_t id, struct store_coll *out, struct dfs_err *err)
{
	return coll_get(t, ST_COLL_BY_ID, NULL, id, out, err);
}

int store_coll_list(struct store_txn *t, int (*cb)(void *ctx, const struct store_coll *c),
		    void *ctx, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_COLL_LIST, err);
	struct store_coll c;
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		coll_from_row(st, &c);
		rc = cb(ctx, &c);
		if (rc) {
			sqlite3_reset(st);
			return rc;
		}
	}
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "list collections", err);
	return 0;
}

static int step_done(struct store_txn *t, sqlite3_stmt *st, const char *what, struct dfs_err *err)
{
	int rc = sqlite3_step(st);

	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, what, err);
	return 0;
}

static int coll_create(struct store_txn *t, const char *name, uint32_t mode, uint32_t uid,
		       uint32_t gid, struct store_coll *out, struct dfs_err *err);

int store_coll_create(struct store_txn *t, const char *name, uint32_t mode, uint32_t uid,
		      uint32_t gid, struct store_coll *out, struct dfs_err *err)
{
	int rc;

	if ((rc = store_coll_name_check(name, err)) || (rc = store__space_check(t, err)))
		return rc;
	return coll_create(t, name, mode, uid, gid, out, err);
}

int store_coll_profile(struct store_txn *t, struct store_coll *out, struct dfs_err *err)
{
	int rc;

	if (coll_get(t, ST_COLL_FIND, STORE_PROFILE_COLL, 0, out, NULL) == 0)
		return 0;
	if ((rc = coll_create(t, STORE_PROFILE_COLL, 0755, getuid(), getgid(), out, err)))
		return rc;
	if ((rc = store_coll_set_capped(t, out->id, STORE_PROFILE_SIZE, 0, err)))
		return rc;
	return coll_get(t, ST_COLL_BY_ID, NULL, out->id, out, err);
}

int store_coll_users(struct store_txn *t, bool create, struct store_coll *out, struct dfs_err *err)
{
	if (coll_get(t, ST_COLL_FIND, STORE_USERS_COLL, 0, out, NULL) == 0)
		return 0;
	if (!create)
		return dfs_err_set(err, DFS_ENOENT, "no users in database '%s'", t->db->name);
	return coll_create(t, STORE_USERS_COLL, 0700, getuid(), getgid(), out, err);
}

static int coll_create(struct store_txn *t, const char *name, uint32_t mode, uint32_t uid,
		       uint32_t gid, struct store_coll *out, struct dfs_err *err)
{
	struct store_coll c;
	sqlite3_stmt *st;
	int64_t id, now = store__now_ns();
	int rc;

	if (coll_get(t, ST_COLL_FIND, name, 0, &c, NULL) == 0)
		return dfs_err_set(err, DFS_EEXIST, "collection '%s.%s' already exists",
				   t->db->name, name);
	if ((rc = store__new_id(t, &id, err)))
		return rc;
	st = store__stmt(t, ST_COLL_INSERT, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now);
	sqlite3_bind_int64(st, 4, mode);
	sqlite3_bind_int64(st, 5, uid);
	sqlite3_bind_int64(st, 6, gid);
	if ((rc = step_done(t, st, "create collection", err)))
		return rc;
	if ((rc = store__change(t, id, STORE_CH_COLL, id, name, err)))
		return rc;
	if (out)
		return coll_get(t, ST_COLL_BY_ID, NULL, id, out, err);
	return 0;
}

/* Deletes the contents of collection id, and the collection itself unless keep. */
static int coll_clear(struct store_txn *t, int64_t id, bool keep, struct dfs_err *err)
{
	static const char *const sql[] = {
		"DELETE FROM ikeys WHERE ix IN (SELECT ixid FROM indexes WHERE coll = ?1)",
		/* what the inserts still kept show (changes.c note 6) */
		"INSERT INTO evdocs(seq, bson) SELECT evseq, bson FROM docs WHERE coll = ?1"
		" AND evseq > coalesce((SELECT v FROM meta WHERE k = 'events_cut'), 0)",
		"DELETE FROM docs WHERE coll = ?1",
		"DELETE FROM files WHERE coll = ?1",
		"DELETE FROM indexes WHERE coll = ?1",
		"DELETE FROM vacated WHERE coll = ?1",
		"DELETE FROM runs WHERE coll = ?1",
		"DELETE FROM colls WHERE id = ?1",
	};
	struct store_coll c;
	int rc;

	if ((rc = store_coll_by_id(t, id, &c, err)))
		return rc;
	t->coll_ok = 0;
	t->ev_collid = 0;
	store__run_forget(t, id);
	for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]) - (keep ? 1 : 0); i++) {
		sqlite3_stmt *st;

		rc = sqlite3_prepare_v2(t->c->h, sql[i], -1, &st, NULL);
		if (rc != SQLITE_OK)
			return store__sqlerr(t, rc, "drop collection", err);
		sqlite3_bind_int64(st, 1, id);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return store__sqlerr(t, rc, "drop collection", err);
	}
	if ((rc = store__ix_coll_cleared(t, id, err)))
		return rc;
	if (!keep && (rc = store__ev_coll(t, STORE_EV_DROP, c.name, NULL, err)))
		return rc;
	return store__change(t, id, STORE_CH_COLL, id, c.name, err);
}

int store_coll_drop(struct store_txn *t, int64_t id, struct dfs_err *err)
{
	return coll_clear(t, id, false, err);
}

int store_coll_empty(struct store_txn *t, int64_t id, struct dfs_err *err)
{
	return coll_clear(t, id, true, err);
}

int store_coll_rename(struct store_txn *t, int64_t id, const char *newname, struct dfs_err *err)
{
	char oldname[DFS_MAX_NS_NAME + 1];
	struct store_coll c;
	sqlite3_stmt *st;
	int rc;

	if ((rc = store_coll_name_check(newname, err)))
		return rc;
	if (coll_get(t, ST_COLL_FIND, newname, 0, &c, NULL) == 0 && c.id != id)
		return dfs_err_set(err, DFS_EEXIST, "collection '%s.%s' already exists",
				   t->db->name, newname);
	if ((rc = store_coll_by_id(t, id, &c, err)))
		return rc;
	snprintf(oldname, sizeof(oldname), "%s", c.name);
	st = store__stmt(t, ST_COLL_RENAME, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, newname, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, store__now_ns());
	if ((rc = step_done(t, st, "rename collection", err)))
		return rc;
	t->ev_collid = 0;
	if ((rc = store_coll_by_id(t, id, &c, err)))
		return rc;
	if (strcmp(oldname, newname) &&
	    (rc = store__ev_coll(t, STORE_EV_RENAME, oldname, newname, err)))
		return rc;
	return store__change(t, id, STORE_CH_COLL, id, newname, err);
}

int store_coll_data_size(struct store_txn *t, int64_t id, int64_t *count, int64_t *bytes,
			 struct dfs_err *err)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(t->c->h,
				    "SELECT count(*), coalesce(sum(length(bson)), 0) FROM docs"
				    " WHERE coll = ?1",
				    -1, &st, NULL);

	if (rc != SQLITE_OK)
		return store__sqlerr(t, rc, "collection size", err);
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*count = sqlite3_column_int64(st, 0);
		*bytes = sqlite3_column_int64(st, 1);
		rc = 0;
	} else {
		rc = store__sqlerr(t, rc, "collection size", err);
	}
	sqlite3_finalize(st);
	return rc;
}

int store_db_usage(const struct store_db *db, int64_t *file_bytes, int64_t *fs_used,
		   int64_t *fs_total, struct dfs_err *err)
{
	char wal[4096];
	struct statvfs vfs;
	struct stat sb;

	if (stat(db->path, &sb) != 0)
		return dfs_err_set(err, DFS_EIO, "database file '%s': %s", db->path, strerror(errno));
	*file_bytes = (int64_t)sb.st_size;
	snprintf(wal, sizeof(wal), "%s-wal", db->path);
	if (stat(wal, &sb) == 0)
		*file_bytes += (int64_t)sb.st_size;
	if (statvfs(db->path, &vfs) != 0)
		return dfs_err_set(err, DFS_EIO, "file system of '%s': %s", db->path,
				   strerror(errno));
	*fs_total = (int64_t)vfs.f_blocks * (int64_t)vfs.f_frsize;
	*fs_used = *fs_total - (int64_t)vfs.f_bfree * (int64_t)vfs.f_frsize;
	return 0;
}

int store_coll_count(struct store_txn *t, int64_t id, int64_t *ndocs, int64_t *nfiles,
		     struct dfs_err *err)
{
	enum store__st which[2] = {ST_COLL_NDOCS, ST_COLL_NFILES};
	int64_t *outs[2] = {ndocs, nfiles};

	for (int i = 0; i < 2; i++) {
		sqlite3_stmt *st;
		int rc;

		if (!outs[i])
			continue;
		st = store__stmt(t, which[i], err);
		if (!st)
			return err ? err->code : DFS_EIO;
		sqlite3_bind_int64(st, 1, id);
		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			return store__sqlerr(t, rc, "count", err);
		*outs[i] = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
	}
	return 0;
}

int store_coll_touch(struct store_txn *t, int64_t id, int64_t mtime_ns, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_COLL_TOUCH, err);

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, mtime_ns ? mtime_ns : store__now_ns());
	sqlite3_bind_int64(st, 3, store__now_ns());
	return step_done(t, st, "touch collection", err);
}

int store_coll_setattr(struct store_txn *t, int64_t id, uint32_t mode, uint32_t uid, uint32_t gid,
		       struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_COLL_SETATTR, err);

	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, mode);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int64(st, 4, gid);
	sqlite3_bind_int64(st, 5, store__now_ns());
	return step_done(t, st, "collection attributes", err);
}

/* ---- change feed ------------------------------------------------------------------- */

int store_changes_since(struct store_db *db, int64_t seq,
			int (*cb)(void *ctx, const struct store_change *c), void *ctx,
			struct dfs_err *err)
{
	struct store_txn *t;
	int rc;

	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	for (;;) {
		sqlite3_stmt *st = store__stmt(t, ST_CHANGE_SINCE, err);
		struct store_change c;
		int n = 0;

		if (!st) {
			rc = err ? err->code : DFS_EIO;
			break;
		}
		sqlite3_bind_int64(st, 1, seq);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			const unsigned char *name = sqlite3_column_text(st, 4);

			c.seq = sqlite3_column_int64(st, 0);
			c.coll = sqlite3_column_int64(st, 1);
			c.op = sqlite3_column_int(st, 2);
			c.id = sqlite3_column_int64(st, 3);
			snprintf(c.name, sizeof(c.name), "%s", name ? (const char *)name : "");
			seq = c.seq;
			n++;
			if ((rc = cb(ctx, &c)))
				goto done;
		}
		if (rc != SQLITE_DONE) {
			rc = store__sqlerr(t, rc, "read change feed", err);
			break;
		}
		rc = 0;
		if (n < 1024)
			break;
	}
done:
	store_txn_abort(t);
	return rc;
}

int store__change_last(struct store_txn *t, int64_t *seq, struct dfs_err *err)
{
	sqlite3_stmt *st = store__stmt(t, ST_CHANGE_LAST, err);
	int rc;

	if (!st)
		return err ? err->code : DFS_EIO;
	if ((rc = sqlite3_step(st)) != SQLITE_ROW)
		return store__sqlerr(t, rc, "read change feed", err);
	*seq = sqlite3_column_int64(st, 0);
	return 0;
}

int store_changes_last(struct store_db *db, int64_t *seq, struct dfs_err *err)
{
	struct store_txn *t;
	int rc;

	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	rc = store__change_last(t, seq, err);
	store_txn_abort(t);
	return rc;
}
