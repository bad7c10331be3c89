/*
 * store_int.h - private declarations shared by the files of store/ that speak SQL
 * (db.c, doc.c, check.c). Nothing outside store/ includes it.
 */
#ifndef DOCFS_STORE_INT_H
#define DOCFS_STORE_INT_H

#include "store.h"

#include <pthread.h>
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
	ST_DOC_BY_KEY,
	ST_DOC_BY_ID,
	ST_DOC_BSON,
	ST_DOC_INSERT,
	ST_DOC_UPDATE,
	ST_DOC_DELETE,
	ST_DOC_LIST,
	ST_DOC_SETATTR,
	ST_DOC_RENAME,
	ST_FILE_BY_NAME,
	ST_FILE_BY_ID,
	ST_FILE_DATA,
	ST_FILE_INSERT,
	ST_FILE_WRITE,
	ST_FILE_DELETE,
	ST_FILE_LIST,
	ST_FILE_SETATTR,
	ST_FILE_RENAME,
	ST_VAC_GET,
	ST_VAC_PUT,
	ST_VAC_DEL,
	ST_CHANGE_ADD,
	ST_CHANGE_SINCE,
	ST_CHANGE_LAST,
	ST__COUNT
};

struct store__conn {
	sqlite3 *h;		     /* Owned */
	sqlite3_stmt *st[ST__COUNT]; /* Owned, lazily prepared */
	struct store__conn *next;    /* free list of the pool */
};

struct store_db {
	struct store *s;		/* Borrowed: the owner */
	char name[DFS_MAX_NS_NAME + 1]; /* database name */
	char *path;			/* Owned: the SQLite file */
	uint32_t num;			/* stable database number */
	int64_t ctime_ns;		/* creation time */
	pthread_mutex_t pool_lock;	/* guards pool */
	struct store__conn *pool;	/* idle connections */
	pthread_mutex_t write_lock;	/* one write transaction per process at a time */
	struct store_db *next;		/* list of open databases of the store */
	bool dropped;			/* dropped: every new transaction fails (DFS_ENOENT) */
};

struct store_txn {
	struct store_db *db;	/* Borrowed */
	struct store__conn *c;	/* Owned while the transaction runs */
	bool write;		/* holds the write lock */
	int64_t next_id;	/* next free entry id, loaded on first use (0: not yet) */
	int64_t first_id;	/* next_id as loaded, to know whether to store it back */
	int64_t coll_ok;	/* collection known to exist in this transaction (0: none) */
	int64_t inserts_logged; /* collection whose inserts this transaction has logged */
	struct dfs_buf scratch; /* rendering buffer reused by the transaction's writes */
	struct dfs_buf key;	/* key buffer reused by the transaction's writes */
};

/* Returns the statement slot, reset and unbound, or NULL with err set. Borrowed: valid
 * until the transaction ends. */
sqlite3_stmt *store__stmt(struct store_txn *t, enum store__st which, struct dfs_err *err);
/* Sets err from the connection's last SQLite error, prefixed by what; returns the code. */
int store__sqlerr(struct store_txn *t, int rc, const char *what, struct dfs_err *err);
/* Allocates a fresh entry id. */
int store__new_id(struct store_txn *t, int64_t *id, struct dfs_err *err);
/* Appends a change record. */
int store__change(struct store_txn *t, int64_t coll, int op, int64_t id, const char *name,
		  struct dfs_err *err);
int64_t store__now_ns(void);
/* Opens a private connection to a database file (for check.c). */
int store__conn_open(const char *path, bool create, struct store__conn **out, struct dfs_err *err);
void store__conn_close(struct store__conn *c);

#endif
