/*
 * store_int.h - private declarations shared by the files of store/ that speak SQL
 * (db.c, doc.c, index.c, check.c, snapshot.c). Nothing outside store/ includes it.
 */
#ifndef DOCFS_STORE_INT_H
#define DOCFS_STORE_INT_H

#include "store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sqlite3.h>

/* Prepared statements, one slot each per connection (prepared on first use). */
enum store__st {
	ST_META_GET,
	ST_META_SET,
	ST_COLL_FIND,
	ST_COLL_BY_ID,
	ST_COLL_LIST,
	ST_COLL_INSERT,
	ST_COLL_RENAME,
	ST_COLL_TOUCH,
	ST_COLL_SETATTR,
	ST_COLL_NDOCS,
	ST_COLL_NFILES,
	ST_COLL_OPTIONS,
	ST_COLL_OPTIONS_GET,
	ST_DOC_BSON_LEN,
	ST_DOC_BY_KEY,
	ST_DOC_BY_ID,
	ST_DOC_BSON,
	ST_DOC_INSERT,
	ST_DOC_UPDATE,
	ST_DOC_DELETE,
	ST_DOC_LIST,
	ST_DOC_SETATTR,
	ST_DOC_ATIME,
	ST_DOC_RENAME,
	ST_FILE_BY_NAME,
	ST_FILE_BY_ID,
	ST_FILE_DATA,
	ST_FILE_INSERT,
	ST_FILE_WRITE,
	ST_FILE_DELETE,
	ST_FILE_LIST,
	ST_FILE_SETATTR,
	ST_FILE_ATIME,
	ST_FILE_LINK,
	ST_FILE_HIDE,
	ST_FILE_TOUCH,
	ST_FILE_IN_DIR,
	ST_FILE_RENAME,
	ST_VAC_GET,
	ST_VAC_PUT,
	ST_VAC_DEL,
	ST_VAC_ANY,
	ST_CHANGE_ADD,
	ST_CHANGE_SINCE,
	ST_CHANGE_LAST,
	ST_DOC_FETCH,
	ST_DOC_PERM,
	ST_COLL_PRIVATE,
	ST_COLL_PRIVATE_LIST,
	ST_COLL_PERM_LIST,
	ST_IX_LIST,
	ST_IX_INSERT,
	ST_IX_BUILT,
	ST_IX_DELETE,
	ST_IX_MULTIKEY,
	ST_IX_VERSION,
	ST_IX_BUMP,
	ST_IKEY_INSERT,
	ST_IKEY_DELETE,
	ST_IKEY_DUP,
	ST_IKEY_DROP,
	ST_RUN_LAST,
	ST_RUN_AT,
	ST_RUN_PUT,
	ST_RUN_GAP,
	ST_EV_ADD,
	ST_EV_KEEP_DOC,
	ST_EV_SET_REF,
	ST_EV_LAST_SEQ,
	ST_EV_LAST_TS,
	ST_EV_END_DB,
	ST_EV_END_COLL,
	ST_EV_START_DB,
	ST_EV_START_COLL,
	ST_EV_DB_AFTER,
	ST_EV_MAX_SEQ,
	ST_EV_LIST_DB,
	ST_EV_LIST_COLL,
	ST_EV_FROM_DB,
	ST_EV_FROM_COLL,
	ST__COUNT
};

struct store__conn {
	sqlite3 *h;		     /* Owned */
	sqlite3_stmt *st[ST__COUNT]; /* Owned, lazily prepared */
	sqlite3_stmt *cursor_st[2];  /* Owned: a freed cursor's statement (reset) kept for the
				      * next one, from the start and after an id (doc.c) */
	struct store__conn *next;    /* free list of the pool */
};

struct store_db {
	struct store *s;		/* Borrowed: the owner */
	char name[DFS_MAX_NS_NAME + 1]; /* database name */
	char *path;			/* Owned: the SQLite file */
	struct stat st;			/* the file path named when it was opened (db.c note 7) */
	uint32_t num;			/* stable database number */
	int64_t ctime_ns;		/* creation time */
	pthread_mutex_t pool_lock;	/* guards pool */
	struct store__conn *pool;	/* idle connections */
	pthread_mutex_t write_lock;	/* one write transaction per process at a time */
	struct store_db *next;		/* list of open databases of the store */
	atomic_bool dropped;		/* every new transaction fails (DFS_ENOENT); db.c note 7 */
	pthread_mutex_t ckpt_lock;	/* guards the ckpt_ fields (db.c note 6) */
	pthread_cond_t ckpt_cond;	/* a checkpoint is wanted, or the thread must stop */
	pthread_t ckpt_thread;		/* the checkpointer, when ckpt_pid is this process */
	pid_t ckpt_pid;			/* process that started it (0: none; a fork has none) */
	bool ckpt_want;			/* a commit found the WAL long: the thread runs */
	bool ckpt_done;			/* the thread caught up: the writer finishes */
	int ckpt_log;			/* the WAL's frames at the thread's last pass */
	bool ckpt_stop;			/* db_free: the thread must end */
	pthread_mutex_t ixstats_lock;	/* guards ixstats (index.c, store_index_stats) */
	struct store__ixstats {
		int64_t coll, ixid; /* the index (ixid 0: _id_) */
		int64_t seq;	    /* the change feed's last seq the counts were taken at */
		int64_t entries, bytes;
	} ixstats[8];	       /* the last counts taken, reused while nothing changed */
	unsigned ixstats_next; /* the slot the next counts go to */
	struct store__dcache {
		pthread_mutex_t lock;		  /* guards the fields below */
		int64_t seq;			  /* the feed seq the entries are valid at
						   * (-1: none yet); dcache.c note 2 */
		atomic_size_t budget;		  /* bytes it may hold (0: off); written under lock */
		size_t bytes, n;		  /* bytes and entries held */
		struct store__dcent **tab;	  /* Owned: hash chains, ntab of them */
		size_t ntab;			  /* a power of two, or 0 */
		struct store__dcent *head, *tail; /* most and least recently used */
		uint64_t hits, misses;		  /* look-ups since it was made */
	} dc;					  /* the document cache (dcache.c) */
};

/* The last run (largest lo) of one collection, as this transaction has it (doc.c note 5). */
struct store__run {
	int64_t coll;	/* its collection (0: nothing cached) */
	int64_t lo, hi; /* the run; hi < lo: the collection has no run yet */
	bool dirty;	/* differs from the runs row, or was written inside this transaction:
			 * written (again) at commit */
};

struct store_txn {
	struct store_db *db;	    /* Borrowed */
	struct store__conn *c;	    /* Owned while the transaction runs */
	bool write;		    /* holds the write lock */
	int64_t next_id;	    /* next free entry id, loaded on first use (0: not yet) */
	int64_t first_id;	    /* next_id as loaded, to know whether to store it back */
	int64_t coll_ok;	    /* collection known to exist in this transaction (0: none) */
	int64_t inserts_logged;	    /* collection whose inserts this transaction has logged */
	int64_t vac_none;	    /* collection known to have no live vacated ids (0: none) */
	struct dfs_buf scratch;	    /* rendering buffer reused by the transaction's writes */
	struct dfs_buf key;	    /* key buffer reused by the transaction's writes */
	struct store__ixcache *ixc; /* Owned: index.c's cache and pending entries, or NULL */
	struct store__vcache *vc;   /* Owned: validator.c's compiled validator, or NULL */
	sqlite3_blob *fetch;	    /* Owned: store_doc_fetch's handle on docs.bson, or NULL */
	struct dfs_buf fetched;	    /* the last fetched document's bytes */
	int64_t fetched_id;	    /* its id, when fetched with cache (else 0) */
	struct dfs_buf fetched_text; /* its text from the cache, or empty (store_doc_text) */
	bool dc_known;		    /* dc_seq was read (dcache.c note 2) */
	int64_t dc_seq;		    /* the feed's last seq in this snapshot */
	struct store__run run;	    /* the current run (doc.c note 5) */
	int64_t cap_coll;	    /* collection whose capped state is known (0: none) */
	bool cap_on;		    /*   whether it is capped (capped.c) */
	bool ev_update;		    /* the next doc_update is an update event (changes.c) */
	bool ev_known;		    /* the ev_ fields below are loaded (changes.c note 5) */
	bool ev_off;		    /*   the database records no events (events_keep 0) */
	int64_t ev_seq, ev_ts;	    /*   the last event's seq and clusterTime */
	int64_t ev_end;		    /*   the end of the database's stream */
	char ev_coll[DFS_MAX_NS_NAME + 1]; /* the collection whose stream end is ev_cend */
	int64_t ev_cend;	    /*   (ev_coll "": none known) */
	const bson_t *ev_old;	    /*   Borrowed: the document before it */
	int64_t ev_collid;	    /* the collection named ev_collname (0: none; reset by
				     * renames, drops and undo) */
	char ev_collname[DFS_MAX_NS_NAME + 1];
	bool enospc;		    /* a statement found the disk full (space.c) */
	bool has_cred;			   /* cred below is the caller (cred.c); else t sees all */
	int cred_need;			   /*   STORE_MAY_READ, | STORE_MAY_WRITE for write paths */
	struct store_cred cred;		   /*   who asks */
	int64_t cred_coll[4];		   /*   collections whose restriction is known (cred.c) */
	bool cred_all[4];		   /*   ... and whether t sees all of each */
	int cred_next;			   /*   the slot the next one takes */
};

/* ---- the document cache (dcache.c) ---- */
void store__dcache_init(struct store__dcache *dc, size_t budget);
void store__dcache_release(struct store__dcache *dc);
/* Changes the budget, evicting down to it (0 empties and turns it off). */
void store__dcache_set_budget(struct store__dcache *dc, size_t budget);
/* True with document id's BSON copied into out, and its text (empty if none) into text,
 * when t may use the cache and it holds id. */
bool store__dcache_get(struct store_txn *t, int64_t id, struct dfs_buf *out, struct dfs_buf *text);
/* Keeps a copy of document id's BSON as t read it, when t may (dcache.c note 2): true
 * when it did. */
bool store__dcache_put(struct store_txn *t, int64_t id, const void *data, size_t len);
/* Adds the compact rendering of document id, as t read it, to its entry (dcache.c note 5). */
void store__dcache_put_text(struct store_txn *t, int64_t id, const char *text, size_t len);
void store__dcache_stats(struct store__dcache *dc, struct store_dcache_stats *out);

/* Returns the statement slot, reset and unbound, or NULL with err set. Borrowed: valid
 * until the transaction ends. */
sqlite3_stmt *store__stmt(struct store_txn *t, enum store__st which, struct dfs_err *err);
/* ---- a full disk (space.c) ---- */
#define STORE_RESERVE ((int64_t)8 << 20) /* bytes of the reserve file (space.c note 1) */
struct store__space {
	atomic_bool low_space;	   /* the disk was found full (space.c note 2) */
	atomic_bool reserve_known; /* the reserve was made or looked for (note 1) */
	atomic_bool tight;	   /* the disk was full once: checkpoint often (note 5) */
};
struct store__space *store__space_of(struct store *s); /* Borrowed: lives with s */
void store__reserve_keep(struct store *s);
void store__space_exhausted(struct store *s);
/* 0, or DFS_ENOSPC while the store is short of space: called by every write that adds
 * (space.c note 2). */
int store__space_check(struct store_txn *t, struct dfs_err *err);
/* Copies the calling thread's caller into t, as it begins (cred.c note 3). */
void store__txn_take_cred(struct store_txn *t);
/* Closes store_doc_fetch's blob handle and frees its buffer: the handle's statement must
 * not outlive the transaction. */
void store__txn_close_fetch(struct store_txn *t);
/* Records that a document of coll gets id (doc.c note 5): call before its row is written,
 * so that no failure after it leaves a row outside the runs. */
int store__run_note(struct store_txn *t, int64_t coll, int64_t id, struct dfs_err *err);
/* Writes the cached run's row: before a statement of t reads runs, and at commit. The cache
 * stays (and is written again at commit: a savepoint rolled back may have undone this). */
int store__run_flush(struct store_txn *t, struct dfs_err *err);
/* Forgets the cached run of coll without writing it (its runs were deleted). */
void store__run_forget(struct store_txn *t, int64_t coll);
/* Sets err from the connection's last SQLite error, prefixed by what; returns the code. */
int store__sqlerr(struct store_txn *t, int rc, const char *what, struct dfs_err *err);
/* Allocates a fresh entry id. */
int store__new_id(struct store_txn *t, int64_t *id, struct dfs_err *err);
/* The last sequence number of the change feed as t sees it (0 when none). */
int store__change_last(struct store_txn *t, int64_t *seq, struct dfs_err *err);
/* Appends a change record. */
int store__change(struct store_txn *t, int64_t coll, int op, int64_t id, const char *name,
		  struct dfs_err *err);
int64_t store__now_ns(void);

/* ---- change events (changes.c), appended in the writing transaction ---- */
/* The attributes of a document an event is about (cred.c decides who may read it). */
struct store__perm {
	int64_t id;		 /* the document's entry */
	uint32_t mode, uid, gid; /* its attributes as the event is written */
	int64_t size;		 /* its pretty rendered length (0: not known) */
};
/* A document event of coll: insert, replace, delete (doc: the old document, or just its
 * _id) or update (old: the document before, for updateDescription). perm: the document's
 * attributes, kept with the event when not every caller may read it. An insert or replace
 * refers to the row perm->id (changes.c note 6), whose evseq the caller set to ref (from
 * store__ev_next) as it wrote doc there; set right here when the event got another seq. */
int store__ev_doc(struct store_txn *t, int op, int64_t coll, const struct store__perm *perm,
		  const bson_t *old, const bson_t *doc, int64_t ref, struct dfs_err *err);
/* The seq the next event of t will have, or 0 when the database records none. */
int store__ev_next(struct store_txn *t, int64_t *seq, struct dfs_err *err);
/* Keeps document id's row as it is for the insert or replace event that shows it, if that
 * event is still kept (changes.c note 6): before the row changes or goes. */
int store__ev_keep_doc(struct store_txn *t, int64_t id, struct dfs_err *err);
/* Appends to updated, removed and truncated (an open document and two arrays, all empty)
 * what changed from old to doc, as an update event's updatedFields, removedFields and
 * truncatedArrays, in time linear in the two sizes (docdiff.c). */
void store__doc_diff(const bson_t *old, const bson_t *doc, bson_t *updated, bson_t *removed,
		     bson_t *truncated);
/* drop or rename (to: the new name) of collection coll, each followed by an invalidate in
 * its stream. */
int store__ev_coll(struct store_txn *t, int op, const char *coll, const char *to,
		   struct dfs_err *err);
/* createIndexes or dropIndexes of one index (spec) of coll. */
int store__ev_index(struct store_txn *t, int op, int64_t coll, const bson_t *spec,
		    struct dfs_err *err);

/* ---- capped collections (capped.c) ---- */
/* Whether collection coll is capped (cached in t). */
int store__capped_is(struct store_txn *t, int64_t coll, bool *on, struct dfs_err *err);
/* The BSON length of document id. */
int store__doc_bson_len(struct store_txn *t, int64_t id, int64_t *len, struct dfs_err *err);
/* Counts dcount documents and dbytes bytes more (or fewer) into capped collection coll;
 * when it grew, removes its oldest documents past its limits, never document keep (a
 * document over the whole size is an error). Callers check store__capped_is first. */
int store__capped_note(struct store_txn *t, int64_t coll, int64_t dcount, int64_t dbytes,
		       int64_t keep, struct dfs_err *err);
/* Decodes colls.options (a BSON blob, or NULL) into c's capped fields. */
void store__capped_decode(const void *blob, int len, struct store_coll *c);
/* ---- collection validators (validator.c) ---- */
/* Checks doc, about to be written into coll (old_id: the document it replaces, 0 for an
 * insert), against coll's validator: DFS_EINVAL "Document failed validation" (errInfo kept
 * for store_validation_failure_take), or 0 (valid, not checked, or only warned). */
int store__validate(struct store_txn *t, int64_t coll, const bson_t *doc, int64_t old_id,
		    struct dfs_err *err);
/* Forgets t's compiled validator (a collMod, an undo, the transaction's end). */
void store__validate_forget(struct store_txn *t);
/* coll's options blob as a document (empty when NULL); out initialised here. */
int store__options_get(struct store_txn *t, int64_t coll, bson_t *out, struct dfs_err *err);
/* Appends coll's validation keys to b (capped.c rewrites the options with them). */
int store__options_merge(struct store_txn *t, int64_t coll, bson_t *b, struct dfs_err *err);
/* The filter hooks the query layer installed (index.c note 5), or NULL. */
const struct store_filter_hooks *store__filter_hooks(void);
/* Opens a private connection to a database file (for check.c). */
int store__conn_open(const char *path, bool create, struct store__conn **out, struct dfs_err *err);
void store__conn_close(struct store__conn *c);

#define STORE__SCHEMA_VERSION 9

/* The FROM and WHERE of a scan of collection ?1's documents (d) in run order (doc.c note
 * 5): runs in lo order, each a rowid range of docs filtered on coll (a run may hold other
 * ids). Add "ORDER BY r.lo, d.id" for id order. CROSS JOIN keeps runs the outer loop and
 * "+d.coll" keeps docs_key out, so SQLite searches docs by rowid range and needs no sort.
 * A scan from an id puts it in the range's one lower bound (lo, e.g. "max(r.lo, ?2)"): of
 * two lower bounds on the rowid SQLite seeks by one and may take r.lo, reading the run
 * from its start. Read runs in a write transaction only after store__run_flush. */
#define STORE__DOCS_OF_COLL_FROM(lo)                                                               \
	" FROM runs r CROSS JOIN docs d WHERE r.coll = ?1 AND d.id BETWEEN " lo " AND r.hi"        \
	" AND +d.coll = ?1"
#define STORE__DOCS_OF_COLL STORE__DOCS_OF_COLL_FROM("r.lo")
/* The documents of collection ?1 after id ?2 (runs before the one holding ?2 end before
 * ?2: they are skipped). */
/* The size column of a files row: its bytes, or the device number of a device node (whose
 * data is that number in decimal; entry_from_file_row moves it to rdev). */
#define STORE__FILE_SIZE "CASE WHEN kind IN (7, 8) THEN CAST(data AS INTEGER) ELSE length(data) END"
/* The last three columns of a files row: ino (the row a hard link names, NULL for a row
 * that is its own), its link count (its own name unless hidden, plus its links) and, for a
 * directory, the directories in it (their names are "<its id>/<name>", doc.c note 6):
 * counted when read, so mkdir, rmdir and rename keep it right without a counter to update.
 * The count walks the directory's names in the files(coll, name) index. */
#define STORE__FILE_LINKS                                                                          \
	" ino, (substr(name, 1, 2) <> '0/') + (SELECT count(*) FROM files l WHERE l.ino = files.id),"  \
	" CASE WHEN kind = 4 THEN (SELECT count(*) FROM files s WHERE s.coll = files.coll"         \
	" AND s.name >= files.id || '/' AND s.name < files.id || '0' AND s.kind = 4) ELSE 0 END"
#define STORE__DOCS_OF_COLL_AFTER                                                                  \
	STORE__DOCS_OF_COLL_FROM("max(r.lo, ?2 + 1)")                                              \
	" AND r.lo >= coalesce((SELECT lo FROM runs WHERE coll = ?1 AND lo <= ?2"                  \
	" ORDER BY lo DESC LIMIT 1), 0)"

/* ---- index.c ----------------------------------------------------------------------- */

/* The entries one index implies for one document: key and vals bytes in buf. */
struct store__ixentry {
	size_t koff, klen; /* the key in buf */
	size_t voff, vlen; /* the vals BSON in buf */
};
struct store__ixkeys {
	struct dfs_buf buf;	  /* key and vals bytes of every entry */
	struct store__ixentry *e; /* Owned: n entries */
	size_t n, cap;
	uint32_t multikey;		  /* bit i: field i expanded an array */
	struct store__ixscratch *scratch; /* Owned: key generation's work space, or NULL */
};
void store__ixkeys_init(struct store__ixkeys *k);
void store__ixkeys_reset(struct store__ixkeys *k);
void store__ixkeys_release(struct store__ixkeys *k);
/* Computes the entries of doc in ix (partial: its compiled partialFilterExpression, NULL
 * when it has none). Errors: DFS_EINVAL (parallel arrays, key too large, hashed array). */
int store__ix_keys(const struct store_index *ix, const void *partial, const bson_t *doc,
		   struct store__ixkeys *out, struct dfs_err *err);

/* text.c: the text options of spec into ix->text (Owned by ix; sets ix->sparse). */
int store__text_spec_parse(const bson_t *spec, struct store_index *ix, bool strict,
			   struct dfs_err *err);
void store__text_spec_free(struct store_text_spec *ts);
/* The spec of text index ix as MongoDB stores it: key {prefix, _fts: "text", _ftsx: 1,
 * suffix}, weights, default_language, language_override, textIndexVersion. Owned. */
bson_t *store__text_stored_spec(const struct store_index *ix, const bson_t *spec, const char *name);
/* text_stop.c: the stop words of language lang (its name), space-separated. Static. */
const char *store__text_stop_words(const char *lang);
/*
 * The index side of one document write, step 1 (index.c note 3): the entries of document
 * id as stored now in oldcoll go away (oldcoll 0: it is new), the entries of newdoc in
 * newcoll come (newcoll 0 or newdoc NULL: it goes away). Checks everything, writes nothing.
 * Call before the document row changes; then store__ix_apply after it changed.
 */
int store__ix_prepare(struct store_txn *t, int64_t oldcoll, int64_t newcoll, int64_t id,
		      const bson_t *newdoc, struct dfs_err *err);
int store__ix_apply(struct store_txn *t, struct dfs_err *err);
/* The index definitions of coll were removed (drop/empty): forget them, bump the version. */
int store__ix_coll_cleared(struct store_txn *t, int64_t coll, struct dfs_err *err);
void store__ix_invalidate(struct store_txn *t);
void store__ix_txn_free(struct store_txn *t);
/* Builds the index definitions a version-1 database kept without entries (inside the
 * caller's write transaction on c). */
int store__ix_migrate(struct store__conn *c, const char *dbname, struct dfs_err *err);
/* docs check: every index's entries against its documents; problems go to report. */
void store__ix_check(struct store__conn *c, const char *db,
		     void (*report)(void *ctx, const char *msg), void *ctx);

#endif
