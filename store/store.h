/*
 * store.h - the public interface of the store layer.
 *
 * The store is the base of docfs: errors, growable buffers, the BSON <-> text codec, value
 * comparison in MongoDB order, the order-preserving key encoding, the _id <-> file name
 * encoding, document validation, and the SQLite-paged document store itself. Nothing here
 * knows about FUSE or errno; only store/ includes sqlite3.h.
 *
 * Thread-safety: functions without an object are thread-safe. A struct store and its
 * struct store_db objects are thread-safe (connections are pooled inside); a struct
 * store_txn belongs to one thread at a time.
 */
#ifndef DOCFS_STORE_H
#define DOCFS_STORE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors ------------------------------------------------------------------------ */

enum dfs_code {
	DFS_OK = 0,
	DFS_EINVAL,	  /* bad input: text, name, document, option */
	DFS_ENOENT,	  /* no such database, collection, document, file */
	DFS_EEXIST,	  /* already exists, or a unique key clash */
	DFS_ENOMEM,	  /* allocation failed */
	DFS_EIO,	  /* SQLite or OS failure */
	DFS_EFBIG,	  /* over a size limit (document > 16 MiB, ...) */
	DFS_ENAMETOOLONG, /* a name over its limit */
	DFS_ENOTEMPTY,	  /* dropping a non-empty database */
	DFS_EBUSY,	  /* locked by another writer for too long */
	DFS_EINCOMPLETE,  /* the text ended inside a value (streaming parsers wait for more) */
	DFS_ECORRUPT,	  /* the store breaks one of its invariants */
	DFS_EPERM,	  /* not allowed here (mkdir inside a collection, ...) */
	DFS_ENOTDIR,
	DFS_EISDIR,
	DFS_ERANGE,    /* a number out of range */
	DFS_EINTR,     /* the caller stopped waiting (an interrupted read), or killOp */
	DFS_ETIMEDOUT, /* an operation ran past its time limit (maxTimeMS) */
	DFS_ESTALE,    /* a position is gone: a tailable read overtaken (CappedPositionLost) */
	DFS_ENOSPC,    /* the store's file system is full (space.c) */
	DFS_ETYPE,     /* a value of the wrong type for the operation (MongoDB's TypeMismatch) */
	DFS_EXDEV,     /* a move between places that hold things apart (a directory's collection) */
	DFS_EACCES,    /* the caller may not (a file's mode and owner refuse it: cred.c) */
	DFS_EROFS,     /* writes refused: a replica set member that is not primary */
};

struct dfs_err {
	int code;      /* enum dfs_code, DFS_OK when clear */
	int os_errno;  /* errno of an OS call when that was the cause, else 0 */
	char msg[256]; /* lowercase message, no final period */
};

/* Sets err (when not NULL) unless it already holds an error; returns code. */
int dfs_err_set(struct dfs_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefixes the message of an error already set with context ("document 3: "). Returns code. */
int dfs_err_prefix(struct dfs_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dfs_err_clear(struct dfs_err *err);
const char *dfs_code_name(int code);

/*
 * The calling thread's stop hook: while one is set, long work on this thread (SQLite
 * statements, every 1000 virtual-machine steps; the query executor, every few work() calls)
 * asks stop(ctx, err) whether to go on. A nonzero return (DFS_EINTR for killOp,
 * DFS_ETIMEDOUT for maxTimeMS, with its message in err) makes that work fail with it. A
 * write transaction that was stopped rolls back instead of committing; COMMIT and ROLLBACK
 * themselves are never interrupted. stop may be called with err NULL and from inside
 * SQLite: it must only read state (a flag, the clock). stop NULL clears the hook.
 */
void store_thread_stop_set(int (*stop)(void *ctx, struct dfs_err *err), void *ctx);
/* 0 when the thread's work may go on (or has no hook), else the hook's code with err set. */
int store_thread_stopped(struct dfs_err *err);

/* ---- buffers ----------------------------------------------------------------------- */

/* A growable byte buffer, always NUL-terminated after len (data may be NULL when cap 0). */
struct dfs_buf {
	char *data; /* Owned: freed by dfs_buf_release */
	size_t len; /* bytes used, not counting the terminating NUL */
	size_t cap; /* bytes allocated */
};

void dfs_buf_init(struct dfs_buf *b);
void dfs_buf_release(struct dfs_buf *b);
void dfs_buf_reset(struct dfs_buf *b); /* len = 0, keeps the memory */
/* All appenders abort on out-of-memory (like libbson): the daemon cannot go on without it. */
void dfs_buf_reserve(struct dfs_buf *b, size_t extra);
void dfs_buf_append(struct dfs_buf *b, const void *p, size_t n);
void dfs_buf_putc(struct dfs_buf *b, char c);
void dfs_buf_puts(struct dfs_buf *b, const char *s);
void dfs_buf_printf(struct dfs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- limits (MongoDB's) ------------------------------------------------------------ */

#define DFS_MAX_DOC_SIZE (16 * 1024 * 1024) /* BSON bytes of one document */
#define DFS_MAX_DEPTH 100		    /* nesting levels; the top-level document is 1 */
#define DFS_MAX_NS_NAME 64		    /* bytes of a database or collection name */
#define DFS_MAX_KEY_SIZE 1024		    /* bytes of one index key */
#define DFS_MAX_NAME_STEM 250		    /* bytes of a document file name before ".json" */

/* ---- the text codec (codec_parse.c, codec_render.c) -------------------------------- */

/*
 * Parsing accepts the shell-literal syntax of DESIGN.md section 2: strict JSON, Extended
 * JSON v2 canonical and relaxed, legacy v1 forms ({"$date": 123}, {"$binary": "..",
 * "$type": "00"}, {"$regex": "..", "$options": ".."}, ...), and mongo-shell literals
 * (unquoted keys, single-quoted strings, ObjectId("..."), ISODate("..."), new Date(...),
 * Date(...), NumberLong(...), NumberInt(...), NumberDecimal(...), Timestamp(t, i),
 * BinData(n, "..."), UUID("..."), /re/flags, MinKey, MaxKey, undefined, trailing commas,
 * // and block comments). Numbers: an integer literal that fits int32 is int32, else int64
 * when it fits, else double; anything with '.', 'e' or 'E' is a double. Input must be valid
 * UTF-8. Nesting deeper than DFS_MAX_DEPTH is an error.
 *
 * Errors are DFS_EINVAL with a message "line L, column C: expected X, found Y" (lines and
 * columns from 1, columns in bytes), or DFS_EINCOMPLETE when the text ends inside the value.
 */

/* Parses exactly one document (a top-level object, whitespace around it allowed) into out,
 * which must be initialised (bson_init) and empty. On error out is left empty. */
int store_codec_parse_doc(const char *text, size_t len, bson_t *out, struct dfs_err *err);

/* Parses one document from the start of text, skipping leading whitespace and comments, and
 * stops right after its closing brace; *consumed gets the bytes used (including the leading
 * whitespace). Errors count lines from first_line (the caller's line number of text[0]).
 * Returns DFS_EINCOMPLETE when text ends before the document does, and DFS_ENOENT (with no
 * message) when text holds only whitespace/comments. */
int store_codec_parse_next(const char *text, size_t len, unsigned first_line, size_t *consumed,
			   bson_t *out, struct dfs_err *err);

/* Parses any single value (a document, array, string, number, literal ...) and appends it
 * to out under key (out must be initialised). Used for typed file names and option values. */
int store_codec_parse_value(const char *text, size_t len, bson_t *out, const char *key,
			    struct dfs_err *err);

enum store_render_style {
	STORE_RENDER_PRETTY,	/* document files: 2-space indent, one field per line, final \n */
	STORE_RENDER_COMPACT,	/* one line, no spaces except after ':' and ',' , no final \n */
	STORE_RENDER_CANONICAL, /* one line, canonical Extended JSON v2 (every number typed) */
};

/*
 * Renders doc as type-exact relaxed Extended JSON v2, appended to out. Type-exact means
 * parsing the output gives back byte-identical BSON: int32 as a plain integer, int64 as
 * {"$numberLong": "n"} when it would fit int32 (a plain integer otherwise), doubles always
 * with a '.' or an exponent (shortest form that reads back exactly; non-finite ones and
 * -0.0 as {"$numberDouble": ".."}), decimal128 as {"$numberDecimal": ".."}, dates in range
 * 1970..9999 as {"$date": "ISO-8601 with milliseconds Z"} else {"$date": {"$numberLong":..}},
 * and the other types in their canonical EJSON v2 forms. Strings are escaped per JSON
 * (control characters as \u00XX, '"' and '\\'; other UTF-8 kept as is). Returns 0, or
 * DFS_EINVAL when doc is not valid BSON. */
int store_codec_render(const bson_t *doc, enum store_render_style style, struct dfs_buf *out,
		       struct dfs_err *err);

/* True when the subdocument doc would read back from its rendering as an Extended JSON
 * wrapper ({"$numberInt": "1"}, {"$oid": ..}, {"$regex": .., "$options": ..}, ...: a typed
 * value, or an error for a wrapper shape with a bad value) rather than as itself. */
bool store_codec_is_wrapper(const bson_t *doc);
/* Renders one value (compact style) appended to out, for names, keys and messages. */
int store_codec_render_value(const bson_value_t *v, struct dfs_buf *out, struct dfs_err *err);
/* The length of doc's compact rendering, given the length of its pretty one (the two differ
 * only in whitespace, counted from doc's shape without rendering), or -1 when doc is not
 * valid BSON. */
int64_t store_codec_compact_len(const bson_t *doc, int64_t pretty_len);

/* ---- document validation (validate.c) ---------------------------------------------- */

/*
 * Checks that doc may be stored as a document: BSON size <= DFS_MAX_DOC_SIZE (DFS_EFBIG),
 * nesting <= DFS_MAX_DEPTH, strings and field names valid UTF-8, _id (when present) not an
 * array, not a regex, not undefined, and no field name starting with '$' inside it; no
 * subdocument with the keys of an Extended JSON wrapper (store_codec_is_wrapper). Field names
 * with '.' or a leading '$' are allowed elsewhere (MongoDB 5.0+). Returns 0 or
 * DFS_EINVAL/DFS_EFBIG with a message naming the path ("field name '$x' at '_id.a' must not
 * start with '$' inside '_id'").
 */
int store_doc_validate(const bson_t *doc, struct dfs_err *err);

/* ---- comparison in MongoDB order (compare.c) --------------------------------------- */

/*
 * The canonical type order of MongoDB: MinKey < undefined/null < numbers (int32, int64,
 * double, decimal128 compared by value; NaN below every other number) < symbol/string <
 * document < array < binary < ObjectId < bool < date < timestamp < regex < dbpointer <
 * code < code w/scope < MaxKey. Strings compare by bytes; documents field by field (type
 * bracket, then name, then value); arrays element by element; binary by length, subtype,
 * bytes. Returns <0, 0, >0.
 */
int store_type_bracket(bson_type_t t);
int store_value_compare(const bson_value_t *a, const bson_value_t *b);
int store_iter_compare(const bson_iter_t *a, const bson_iter_t *b); /* the elements' values */
int store_doc_compare(const bson_t *a, const bson_t *b);
/* MongoDB's alias of a BSON type ("double", "string", ... "maxKey"; "unknown" for others), as
 * $type takes it and messages name it. */
const char *store_type_alias(bson_type_t t);

/* ---- key encoding (key.c) ---------------------------------------------------------- */

/*
 * An order-preserving byte encoding of BSON values: memcmp order of two encodings equals
 * store_value_compare order of the values (numbers of different types with equal value
 * encode identically). Descending inverts every byte so that memcmp order reverses. Keys of
 * compound indexes are the concatenation of the per-field encodings; each encoding is
 * self-delimiting so the concatenation keeps the order.
 */
int store_key_append(struct dfs_buf *out, const bson_value_t *v, bool descending,
		     struct dfs_err *err);

/* ---- _id <-> file name (name.c) ---------------------------------------------------- */

/*
 * Every _id value has exactly one file name stem (the name without ".json") and every stem
 * names at most one _id (numbers by value: 5, 5.0 and NumberLong(5) are one _id, as in a
 * unique index). Forms:
 *   ObjectId             24 lowercase hex digits
 *   integral number      canonical decimal digits (0, -12, 42) when within int64
 *   plain string         itself, with '%', '/', bytes < 0x20 and 0x7f escaped as %XX (upper
 *                        hex); the first byte also escaped when the string starts with '.'
 *                        or '=' or would read as another form (all digits with an optional
 *                        leading '-', or 24 hex digits of either case)
 *   anything else        '=' followed by the compact Extended JSON of the value, escaped the
 *                        same way ("=1.5", "=\"\"" for the empty string, "={"$date":...}")
 * A stem longer than DFS_MAX_NAME_STEM bytes is DFS_ENAMETOOLONG. Decoding rejects (DFS_EINVAL)
 * every stem that is not the canonical encoding of the value it decodes to.
 */
int store_name_from_id(const bson_value_t *id, struct dfs_buf *out, struct dfs_err *err);
/* Decodes stem into out as the single field {"_id": value}; out initialised and empty. */
int store_name_to_id(const char *stem, size_t len, bson_t *out, struct dfs_err *err);

/* ---- the store: databases, collections, entries (db.c, doc.c) ---------------------- */

/*
 * A store is a directory holding one SQLite file per database ("<db>.db", WAL mode). All
 * objects are thread-safe except struct store_txn. Several processes may open one store.
 */
struct store;
struct store_db;
struct store_txn;

/* Opens (creating the directory when create is true) the store at dir. *out Owned, freed by
 * store_free. Errors: DFS_ENOENT (no such store), DFS_EIO. */
int store_open(const char *dir, bool create, struct store **out, struct dfs_err *err);
/*
 * How long a transaction of this process waits for another process's write to end before it
 * fails with DFS_EBUSY ("database is locked"). The mount and the servers keep 10 s (a request
 * should not hang); the command-line writers, batch jobs, wait 2 minutes: SQLite's busy
 * handler is not fair, and eight `docfs bulk` writers of 1,000-operation transactions on a
 * loaded machine starved one past 10 s. Set before opening stores.
 */
#define STORE_LOCK_WAIT_MS 10000
#define STORE_LOCK_WAIT_BATCH_MS 120000
void store_set_lock_wait_ms(int ms);
void store_free(struct store *s);
const char *store_path(const struct store *s); /* Borrowed: valid until store_free */

/* Database and collection names: 1..64 bytes, no '/', '\\', '.', ' ', '"', '$', '*', '<',
 * '>', ':', '|', '?' or NUL in database names; collection names no '/', '$' or NUL, not
 * starting with '.' or "system.". Returns 0 or DFS_EINVAL / DFS_ENAMETOOLONG. */
int store_db_name_check(const char *name, struct dfs_err *err);
int store_coll_name_check(const char *name, struct dfs_err *err);

/* Each database's document cache (store_doc_fetch) holds at most bytes from now on; 0
 * turns it off. STORE_DOC_CACHE_DEFAULT until set. Thread-safe. */
#define STORE_DOC_CACHE_DEFAULT ((size_t)64 << 20)
void store_set_doc_cache(struct store *s, size_t bytes);
struct store_dcache_stats {
	uint64_t hits, misses; /* look-ups answered from the cache, and not */
	size_t entries, bytes; /* documents held, and their bytes with the cache's headers and
				* the texts kept with them (store_doc_keep_text) */
	size_t budget;	       /* the most it may hold */
};
void store_db_doc_cache_stats(struct store_db *db, struct store_dcache_stats *out);

/* Calls cb for each database name (sorted); a nonzero return from cb stops and is returned. */
int store_db_list(struct store *s, int (*cb)(void *ctx, const char *name), void *ctx,
		  struct dfs_err *err);
/* Opens a database, creating it when create is true. *out Borrowed: valid until store_free
 * or store_db_drop of that name. Errors: DFS_ENOENT, DFS_EINVAL (bad name), DFS_EIO. */
int store_db_get(struct store *s, const char *name, bool create, struct store_db **out,
		 struct dfs_err *err);
/* Drops an empty database (DFS_ENOTEMPTY when it has collections). */
int store_db_drop(struct store *s, const char *name, struct dfs_err *err);
/* The same for db itself: DFS_ENOENT, and nothing dropped, when db is gone already, even if
 * another database of its name was made since (store_db_gone). */
int store_db_drop_db(struct store_db *db, struct dfs_err *err);
/* Is db dropped, here or by another process (its path names another file now, or none)?
 * A db found gone stays so: every new transaction fails with DFS_ENOENT, and store_db_get
 * of its name opens the database now there, if any. */
bool store_db_gone(struct store_db *db);
const char *store_db_name(const struct store_db *db); /* Borrowed: lives with db */
uint32_t store_db_number(const struct store_db *db);  /* stable, unique in the store, >= 1 */
int64_t store_db_ctime(const struct store_db *db);    /* ns since the epoch */
/* The bytes of db's SQLite file and its WAL, and the used and total bytes of the file
 * system holding them (statvfs). */
int store_db_usage(const struct store_db *db, int64_t *file_bytes, int64_t *fs_used,
		   int64_t *fs_total, struct dfs_err *err);
/* Makes committed writes durable against power loss (fsyncs the WAL; db.c says why not the
 * database file). */
int store_db_sync(struct store_db *db, struct dfs_err *err);

/*
 * The write gate of a replica set member (fs/replset/member.c): while one is set, every
 * write of s asks gate(ctx, err) first, at the beginning and again at the commit of each
 * write transaction, and before a database file is made: a nonzero return (DFS_EROFS with
 * its message) refuses the write and changes nothing. This is the one place writes enter
 * the engine, so the mount, the wire protocol and the command line all honour it. A thread
 * that called store_thread_gate_pass(true) (a secondary's applier) is let through. gate must
 * only read state (it runs inside every writer); NULL clears it. Set before s is served.
 */
void store_set_write_gate(struct store *s, int (*gate)(void *ctx, struct dfs_err *err), void *ctx);
void store_thread_gate_pass(bool pass);
/* A daemon whose gate is set marks its store (STORE/.write-gate: its pid and why), so that
 * other processes opening it (the command line) refuse every write with DFS_EROFS and why
 * while the daemon lives; store_unmark_gate removes the mark. A mark left by a process
 * that died is ignored. */
int store_mark_gate(struct store *s, const char *why, struct dfs_err *err);
void store_unmark_gate(struct store *s);

/* Begins a transaction. A write transaction takes the database's write lock (waiting up to
 * 10 s for another process: DFS_EBUSY after that). *out Owned, ended by commit or abort. */
int store_txn_begin(struct store_db *db, bool write, struct store_txn **out, struct dfs_err *err);
/* Commits and frees t (also on failure, where nothing of t is kept). */
int store_txn_commit(struct store_txn *t, struct dfs_err *err);
void store_txn_abort(struct store_txn *t); /* rolls back and frees; NULL is a no-op */
/* A savepoint in write transaction t: what follows until store_txn_release can be undone
 * by store_txn_undo (one level; an unordered bulk load skips a refused document this way
 * and keeps the rest of its transaction). */
int store_txn_mark(struct store_txn *t, struct dfs_err *err);
int store_txn_release(struct store_txn *t, struct dfs_err *err);
void store_txn_undo(struct store_txn *t);
struct store_db *store_txn_db(struct store_txn *t);

struct store_coll {
	int64_t id;			/* stable, shares the id space of entries */
	char name[DFS_MAX_NS_NAME + 1]; /* collection name */
	int64_t ctime_ns, mtime_ns;	/* creation, last change of the directory */
	int64_t chtime_ns;		/* last change of the directory or its attributes */
	uint32_t mode, uid, gid;	/* directory attributes */
	bool capped;			/* a capped collection (capped.c): */
	int64_t cap_size, cap_max;	/*   its size in bytes and most documents (0: any) */
	int64_t cap_bytes, cap_count;	/*   the BSON bytes and documents it holds */
};

int store_coll_find(struct store_txn *t, const char *name, struct store_coll *out,
		    struct dfs_err *err); /* DFS_ENOENT */
int store_coll_by_id(struct store_txn *t, int64_t id, struct store_coll *out, struct dfs_err *err);
/* The profiler's collection of t's database (write t), created capped at STORE_PROFILE_SIZE
 * bytes when missing: the one "system." name a store holds (MongoDB's system.profile). */
#define STORE_PROFILE_COLL "system.profile"
#define STORE_PROFILE_SIZE ((int64_t)1 << 20)
int store_coll_profile(struct store_txn *t, struct store_coll *out, struct dfs_err *err);
/* The wire protocol's users of t's database (admin), MongoDB's system.users: DFS_ENOENT when
 * it does not exist and create is false, else made (write t) owned by the store's owner
 * with mode 0700, the other "system." name a store holds (fs/wire/auth.c). */
#define STORE_USERS_COLL "system.users"
int store_coll_users(struct store_txn *t, bool create, struct store_coll *out, struct dfs_err *err);
int store_coll_list(struct store_txn *t, int (*cb)(void *ctx, const struct store_coll *c),
		    void *ctx, struct dfs_err *err);
int store_coll_create(struct store_txn *t, const char *name, uint32_t mode, uint32_t uid,
		      uint32_t gid, struct store_coll *out, struct dfs_err *err); /* DFS_EEXIST */
/* Drops a collection with everything in it (documents, scratch files, index definitions). */
int store_coll_drop(struct store_txn *t, int64_t id, struct dfs_err *err);
/* Deletes everything in a collection but keeps the collection (its id, name, attributes). */
int store_coll_empty(struct store_txn *t, int64_t id, struct dfs_err *err);
int store_coll_rename(struct store_txn *t, int64_t id, const char *newname,
		      struct dfs_err *err); /* DFS_EEXIST when newname exists */
int store_coll_count(struct store_txn *t, int64_t id, int64_t *ndocs, int64_t *nfiles,
		     struct dfs_err *err);
/* The documents of collection id and the bytes of their BSON (collStats count and size). */
int store_coll_data_size(struct store_txn *t, int64_t id, int64_t *count, int64_t *bytes,
			 struct dfs_err *err);
/* Sets the mtime of collection id (0: now) and its chtime to now: an entry was added,
 * removed or renamed (or utimensat). */
int store_coll_touch(struct store_txn *t, int64_t id, int64_t mtime_ns, struct dfs_err *err);
int store_coll_setattr(struct store_txn *t, int64_t id, uint32_t mode, uint32_t uid, uint32_t gid,
		       struct dfs_err *err);

/* An entry of a collection directory: a document or a scratch file (or symlink). */
enum store_kind {
	STORE_KIND_DOC = 1,	/* "<stem>.json", BSON in the store, rendered on read */
	STORE_KIND_FILE = 2,	/* scratch file: bytes kept as they are */
	STORE_KIND_SYMLINK = 3, /* scratch symlink (emacs lock files): the target as bytes */
	STORE_KIND_DIR = 4,	/* scratch directory: its entries are "<its id>/<name>" */
	STORE_KIND_FIFO = 5,	/* scratch named pipe */
	STORE_KIND_SOCK = 6,	/* scratch socket */
	STORE_KIND_CHR = 7,	/* scratch character device node: data holds rdev in decimal */
	STORE_KIND_BLK = 8,	/* scratch block device node: the same */
};

struct store_entry {
	int64_t id;		 /* stable id (the inode number's low part) */
	int64_t coll;		 /* collection id */
	int kind;		 /* enum store_kind */
	uint32_t mode, uid, gid; /* permission bits only in mode, no S_IFMT */
	int64_t size;		 /* rendered JSON length (documents) or byte length */
	int64_t mtime_ns, ctime_ns;
	char name[256];	  /* the file name in the directory */
	int64_t atime_ns; /* last access as set (utimensat): the mtime until set */
	uint32_t nlink;	  /* names of a scratch file (hard links); 1 for a document */
	int64_t row;	  /* the row of this name: id, or a hard link's own row */
	int64_t ino;	  /* internal: the row a hard link's row names (0: none) */
	uint64_t rdev;	  /* STORE_KIND_CHR, STORE_KIND_BLK: the device number (else 0) */
	uint32_t subdirs; /* STORE_KIND_DIR: the directories in it (st_nlink is 2 + this) */
};

struct store_attrs {
	uint32_t mode, uid, gid;
	int64_t mtime_ns; /* 0: now */
};

/* Looks a file name up in collection coll: "<stem>.json" with a canonical stem finds the
 * document with that _id, any other name a scratch file. DFS_ENOENT when absent. */
int store_entry_lookup(struct store_txn *t, int64_t coll, const char *name, struct store_entry *out,
		       struct dfs_err *err);
int store_entry_get(struct store_txn *t, int64_t id, struct store_entry *out, struct dfs_err *err);
/* The bytes of an entry as the mount shows them (documents pretty-rendered). */
int store_entry_read(struct store_txn *t, int64_t id, struct dfs_buf *out, struct dfs_err *err);
/* The BSON of document id into out (initialised, empty). */
int store_doc_get(struct store_txn *t, int64_t id, bson_t *out, struct dfs_err *err);
/* Streams the entries of coll in a stable order from cookie (0: the start). cb gets each
 * entry and the cookie that resumes after it; a nonzero return from cb stops the listing
 * and is returned. Entries added during a listing come after every existing one. */
int store_entry_list(struct store_txn *t, int64_t coll, uint64_t cookie,
		     int (*cb)(void *ctx, const struct store_entry *e, uint64_t next), void *ctx,
		     struct dfs_err *err);

/*
 * Prepares a document for storing: validates it, puts _id first (taking it from id_from when
 * the document has none, or generating an ObjectId when id_from is NULL too), and checks that
 * an _id present in both agrees. out is initialised here (Owned, bson_destroy by the caller
 * on success). Errors: DFS_EINVAL / DFS_EFBIG with a message.
 */
int store_doc_prepare(const bson_t *doc, const bson_value_t *id_from, bson_t *out,
		      struct dfs_err *err);
/* Inserts a prepared document (DFS_EEXIST "duplicate _id ..." when its _id exists). */
int store_doc_insert(struct store_txn *t, int64_t coll, const bson_t *doc,
		     const struct store_attrs *a, struct store_entry *out, struct dfs_err *err);
/* What store_doc_insert computes for a prepared document before touching the store, so that
 * a bulk inserter can compute it on another thread than the writing one. */
struct store_doc_ready {
	int64_t size;	    /* the rendered length (store_doc_rendered_len) */
	struct dfs_buf key; /* the key encoding of its _id */
	char name[256];	    /* its file name, "<stem>.json" */
};
/* Fills r (its key buffer initialised by the caller, reused between calls) for the prepared
 * doc; scratch as for store_doc_rendered_len. Errors: DFS_EINVAL (no _id, bad BSON, _id key
 * over the limit), DFS_ENAMETOOLONG. Needs no transaction; thread-safe. */
int store_doc_ready_fill(const bson_t *doc, struct dfs_buf *scratch, struct store_doc_ready *r,
			 struct dfs_err *err);
/* store_doc_insert with r filled by store_doc_ready_fill for this doc. */
int store_doc_insert_ready(struct store_txn *t, int64_t coll, const bson_t *doc,
			   const struct store_doc_ready *r, const struct store_attrs *a,
			   struct store_entry *out, struct dfs_err *err);
/* The length of doc as a document file (pretty Extended JSON), the st_size stored with it;
 * scratch is a buffer the caller may reuse between calls. Errors: DFS_EINVAL (bad BSON). */
int store_doc_rendered_len(const bson_t *doc, struct dfs_buf *scratch, int64_t *size,
			   struct dfs_err *err);
/*
 * Writes the text of a document file: parses text, validates it and stores it under the
 * name (a "<stem>.json"), replacing the document of that _id or creating it. The _id comes
 * from the name when the text has none and must agree with it otherwise. A scratch file of
 * the same name cannot exist (names ending in ".json" with a canonical stem are documents).
 */
int store_doc_write_text(struct store_txn *t, int64_t coll, const char *name, const char *text,
			 size_t len, const struct store_attrs *a, struct store_entry *out,
			 struct dfs_err *err);
/* Removes entry id, or the name of row id (a store_entry's row): a scratch file's other
 * names (hard links) keep it. */
int store_entry_delete(struct store_txn *t, int64_t id, struct dfs_err *err);
/* The document of coll whose _id equals id (numbers by value); DFS_ENOENT when none. */
int store_doc_find_id(struct store_txn *t, int64_t coll, const bson_value_t *id,
		      struct store_entry *out, struct dfs_err *err);
/* Replaces the BSON of document entry id with doc (prepared: valid, _id first and equal to
 * the stored one, else DFS_EINVAL), updating its size, times and every index. */
int store_doc_replace(struct store_txn *t, int64_t id, const bson_t *doc, struct dfs_err *err);
/* Creates a scratch file or symlink (kind) with the given bytes. */
int store_file_create(struct store_txn *t, int64_t coll, const char *name, int kind,
		      const struct store_attrs *a, const void *data, size_t len,
		      struct store_entry *out, struct dfs_err *err);
int store_file_write(struct store_txn *t, int64_t id, const void *data, size_t len,
		     struct dfs_err *err);
/* Makes name in coll a hard link of scratch file id (doc.c note 6); *out: the entry of the
 * new name. DFS_EPERM for a document, a directory or a document name; DFS_EEXIST. */
int store_file_link(struct store_txn *t, int64_t id, int64_t coll, const char *name,
		    struct store_entry *out, struct dfs_err *err);
/* Sets the mtime and ctime of scratch entry id to now (a directory that changed);
 * DFS_ENOENT when it is gone. */
int store_file_touch(struct store_txn *t, int64_t id, struct dfs_err *err);
/* Whether scratch directory dir of coll holds any entry. */
int store_dir_any(struct store_txn *t, int64_t coll, int64_t dir, bool *any, struct dfs_err *err);
/*
 * Renames entry id to newname in collection newcoll, replacing what was there. Documents
 * renamed to another document name change _id; a scratch file renamed to a document name
 * becomes that document (its text validated; a replaced document keeps its id); a document
 * renamed to a scratch name becomes a scratch file holding its rendered bytes. *out gets the
 * entry now at newname.
 */
int store_entry_rename(struct store_txn *t, int64_t id, int64_t newcoll, const char *newname,
		       struct store_entry *out, struct dfs_err *err);
#define STORE_SET_MODE 1
#define STORE_SET_UID 2
#define STORE_SET_GID 4
#define STORE_SET_MTIME 8
int store_entry_setattr(struct store_txn *t, int64_t id, int mask, const struct store_attrs *a,
			struct dfs_err *err);
/* Sets the atime of entry id (utimensat, touch -a); a new entry's atime is its mtime, and
 * stays where it shows when its other attributes are set. */
int store_entry_set_atime(struct store_txn *t, int64_t id, int64_t atime_ns, struct dfs_err *err);

/* ---- callers and the documents they may read (cred.c) ------------------------------ */

/*
 * A document is a file with a mode, an owner and a group, and what a caller may not read
 * through the file must not reach it through a query either (README "Permissions"). A
 * caller is set per thread (store_thread_cred_set); every transaction begun on that thread
 * while it is set carries it, and the readers of the query layer (a find's scans, counts,
 * the change events) ask the transaction what it may see. The store's own work in such a
 * transaction (index builds, capped removal, unique checks, TTL) always sees everything:
 * only the functions below and the callers that use them filter.
 */
#define STORE_CRED_GROUPS 64 /* supplementary groups kept (more: the rest are ignored) */
#define STORE_MAY_READ 4
#define STORE_MAY_WRITE 2
struct store_cred {
	uint32_t uid, gid;		    /* the caller's file-system uid and gid */
	int ngroups;			    /* supplementary groups in groups */
	uint32_t groups[STORE_CRED_GROUPS]; /* its supplementary groups */
};
/* Whether c may do need (STORE_MAY_READ, STORE_MAY_WRITE, or both) to a file of mode, uid
 * and gid: the kernel's rule (owner bits for the owner, else group bits for a member of
 * the group, else the other bits); uid 0 may do anything. */
bool store_cred_allows(const struct store_cred *c, int need, uint32_t mode, uint32_t uid,
		       uint32_t gid);
/* Sets the calling thread's caller (c NULL: none, every document visible) and what it
 * needs of a document for it to take part (STORE_MAY_READ; | STORE_MAY_WRITE for the
 * documents an update or delete may change). c is copied. */
void store_thread_cred_set(const struct store_cred *c, int need);
/* Whether t's caller may do need (STORE_MAY_READ, STORE_MAY_WRITE, both) to a file or
 * directory of these attributes (true when t has no caller or it is root). */
bool store_txn_may(struct store_txn *t, int need, uint32_t mode, uint32_t uid, uint32_t gid);
/* Who owns what t creates: its caller, else the process's own uid and gid. */
void store_txn_owner(struct store_txn *t, uint32_t *uid, uint32_t *gid);
/* Whether t may read a file of these attributes (true when t has no caller). */
bool store_txn_allows(struct store_txn *t, uint32_t mode, uint32_t uid, uint32_t gid);
/* *all: whether t sees every document of coll (no caller, uid 0, or no document of coll
 * it could be refused), so that a scan may skip asking per document. Cached in t. */
int store_txn_sees_all(struct store_txn *t, int64_t coll, bool *all, struct dfs_err *err);
/* *ok: whether t may see document id (false when it is gone). */
int store_doc_allowed(struct store_txn *t, int64_t id, bool *ok, struct dfs_err *err);
/* *n: the documents of coll that t may not see (0 when it sees all). */
int store_coll_hidden_count(struct store_txn *t, int64_t coll, int64_t *n, struct dfs_err *err);

/* A forward cursor over the documents of a collection in id order, inside a transaction.
 * Not thread-safe; must be freed before its transaction ends. */
struct store_cursor;
int store_cursor_open(struct store_txn *t, int64_t coll, struct store_cursor **out,
		      struct dfs_err *err);
/* The next document: 0 with doc a read-only view (Borrowed: valid until the next call or
 * free) and *id its entry id; DFS_ENOENT at the end. */
int store_cursor_next(struct store_cursor *c, bson_t *doc, int64_t *id, struct dfs_err *err);
/* Whether the transaction of c may see the document c returned last (store_txn_allows). */
bool store_cursor_allowed(struct store_cursor *c);
void store_cursor_free(struct store_cursor *c);
/* The same from after entry id after on (0: from the start): $natural order resumed. */
int store_cursor_open_after(struct store_txn *t, int64_t coll, int64_t after,
			    struct store_cursor **out, struct dfs_err *err);

/* ---- capped collections (capped.c) ------------------------------------------------- */

/*
 * A capped collection holds at most cap_size bytes of BSON and (when cap_max > 0) cap_max
 * documents; every insert past either limit removes the oldest documents ($natural order:
 * the order of entry ids, which is insertion order) in the same transaction, through the
 * ordinary delete (index entries, change feed). MongoDB 5.3+ semantics: updates that change
 * a document's size and deletes are allowed. The limits live in colls.options.
 */
#define STORE_CAPPED_MIN 4096 /* the smallest size (rounded up to a multiple of 256) */

/* Makes coll capped (MongoDB's create {capped: true, size, max} and convertToCapped): size
 * is rounded up to a multiple of 256 and to at least STORE_CAPPED_MIN; max 0 means no count
 * limit. Documents past the limits are removed now, oldest first. Errors: DFS_EINVAL (size
 * not positive, max negative, a TTL index on coll, a document larger than the size). */
int store_coll_set_capped(struct store_txn *t, int64_t coll, int64_t size, int64_t max,
			  struct dfs_err *err);
/* The rounded size store_coll_set_capped keeps for size. */
int64_t store_capped_round(int64_t size);

/* ---- collection validators (validator.c) ------------------------------------------ */

/*
 * MongoDB's schema validation with query operators: a collection's validator (a filter)
 * that every insert and replacement of a document must match, by level and action, kept
 * in colls.options; every write path of the store checks it (validator.c's notes).
 */
enum store_vlevel { STORE_VLEVEL_STRICT, STORE_VLEVEL_MODERATE, STORE_VLEVEL_OFF };
enum store_vaction { STORE_VACTION_ERROR, STORE_VACTION_WARN };
struct store_validation {
	bson_t *validator; /* Owned: the validator, or NULL (none) */
	int level;	   /* enum store_vlevel */
	int action;	   /* enum store_vaction */
	bool has;	   /* any validation option is set (the validator, level or action) */
};
/* The validation options of coll; release with store_validation_release. */
int store_coll_validation(struct store_txn *t, int64_t coll, struct store_validation *out,
			  struct dfs_err *err);
void store_validation_release(struct store_validation *v);
/* Sets coll's validation (write t): validator NULL keeps the current one, an empty
 * document means none; level or action -1 keeps the current one. The validator must
 * compile (DFS_EINVAL "validator: ..."); documents already there are not checked. */
int store_coll_set_validation(struct store_txn *t, int64_t coll, const bson_t *validator, int level,
			      int action, struct dfs_err *err);
const char *store_vlevel_name(int level);   /* "strict", "moderate", "off" */
const char *store_vaction_name(int action); /* "error", "warn" */
int store_vlevel_parse(const char *s);	    /* -1: not a level */
int store_vaction_parse(const char *s);	    /* -1: not an action */
/* While on, the calling thread's writes are not validated (bypassDocumentValidation). */
void store_thread_bypass_validation(bool on);
/* The errInfo ({failingDocumentId, details}) of the calling thread's last write refused
 * for validation, moved into out (initialised here): false when there is none since the
 * last take. A refusal is DFS_EINVAL "Document failed validation". */
bool store_validation_failure_take(bson_t *out);
/* Called (from any writing thread) for each document a "warn" validator lets through with
 * a message naming the collection and the _id; set once at startup. */
void store_validation_warn_hook_set(void (*fn)(const char *msg));

/* ---- the change feed (db.c) -------------------------------------------------------- */

enum store_change_op {
	STORE_CH_PUT = 1,    /* entry id created or changed (name: its name) */
	STORE_CH_DEL = 2,    /* entry id removed (name: its old name) */
	STORE_CH_COLL = 3,   /* collection coll created, dropped or renamed */
	STORE_CH_INSERTS = 4 /* many documents inserted into coll (no per-entry records) */
};
struct store_change {
	int64_t seq;
	int64_t coll;
	int op; /* enum store_change_op */
	int64_t id;
	char name[256];
};
/* Every write transaction appends its changes; this reads those after seq (in order). */
int store_changes_since(struct store_db *db, int64_t seq,
			int (*cb)(void *ctx, const struct store_change *c), void *ctx,
			struct dfs_err *err);
/* The last sequence number written (0 when none). */
int store_changes_last(struct store_db *db, int64_t *seq, struct dfs_err *err);

/* ---- change streams (changes.c) ----------------------------------------------------- */

/* The kinds of change event (MongoDB's operationType). */
enum store_ev_op {
	STORE_EV_INSERT = 1,
	STORE_EV_UPDATE,
	STORE_EV_REPLACE,
	STORE_EV_DELETE,
	STORE_EV_DROP,
	STORE_EV_RENAME,
	STORE_EV_INVALIDATE,
	STORE_EV_CREATE_INDEXES,
	STORE_EV_DROP_INDEXES,
};
#define STORE_TOKEN_LEN 44 /* hex digits of a resume token (changes.c note 4) */

struct store_event {
	int64_t seq;	  /* its place in the database's events (>= 1) */
	uint64_t ts;	  /* clusterTime: seconds << 32 | increment */
	const char *coll; /* Borrowed: its collection, NULL for a database event */
	int op;		  /* enum store_ev_op */
	const char *line; /* Borrowed: the event as one JSON line, "\n" included */
	size_t len;	  /* bytes of line */
	int64_t off;	  /* offset of line in the stream read (store_events_from only) */
	bool hidden;	  /* about a document the reading transaction's caller may not read
			   * (cred.c): show nothing of it but its place */
};
/* Where a stream stands (changes.c notes 2, 3). */
struct store_events_span {
	int64_t start, end; /* offsets of the first byte held and of the end */
	int64_t last_seq;   /* the database's newest event (0: none) */
	int64_t cut;	    /* events up to this seq were trimmed (0: none) */
	uint32_t dbnum;	    /* the database's number, as in its tokens */
};

/* "insert", "update", ...; Borrowed, static. */
const char *store_event_op_name(int op);
void store_event_token(uint32_t dbnum, uint64_t ts, int64_t seq, char out[STORE_TOKEN_LEN + 1]);
/* Errors: DFS_EINVAL (not hex, or not a token docfs made), naming MongoDB's error. */
int store_event_token_parse(const char *hex, uint32_t *dbnum, uint64_t *ts, int64_t *seq,
			    struct dfs_err *err);
/* The events after seq in the database's stream (coll NULL) or collection coll's, in order.
 * cb returns 0 to go on, > 0 to stop, < 0 (an error code) to fail; the event's pointers die
 * when it returns. */
int store_events_list(struct store_txn *t, const char *coll, int64_t after,
		      int (*cb)(void *ctx, const struct store_event *e), void *ctx,
		      struct dfs_err *err);
/* The same from the line holding byte off of the stream on, with offsets. */
int store_events_from(struct store_txn *t, const char *coll, int64_t off,
		      int (*cb)(void *ctx, const struct store_event *e), void *ctx,
		      struct dfs_err *err);
int store_events_span(struct store_txn *t, const char *coll, struct store_events_span *out,
		      struct dfs_err *err);
/* How many bytes of the database's stream are kept (default 256 MiB, at least 4096; 0:
 * record no events, and trim all). */
int store_events_set_keep(struct store_txn *t, int64_t bytes, struct dfs_err *err);
/* store_doc_replace that records an update event (with updateDescription) instead of a
 * replace: update operators use it. */
int store_doc_update_op(struct store_txn *t, int64_t id, const bson_t *doc, struct dfs_err *err);
/* store_doc_update_op for a caller that read old, the document's current version, in this
 * transaction and made doc with query_update_apply (which ends with store_doc_validate):
 * neither is done again (a tenth of an $inc into a large document). */
int store_doc_update_op_checked(struct store_txn *t, int64_t id, const bson_t *old,
				const bson_t *doc, struct dfs_err *err);

/* ---- git snapshots (snapshot.c, snapgit.c; only these include git2.h) ----------------- */

/*
 * A snapshot commits a point-in-time view of a database (or one collection of it) to a git
 * repository: the tree is "<db>/<coll>/<name>.json" (each blob exactly the bytes the mount
 * shows) plus "<db>/<coll>/.indexes.json" (the index definitions, a JSON array). A snapshot
 * of one collection keeps the other collections' trees from the branch's previous commit.
 * One read transaction per database: writers are never blocked. Incremental: a document
 * whose ctime did not change since the last snapshot reuses its blob without rendering or
 * hashing, and an unchanged collection reuses its whole tree.
 */
struct store_snap_opts {
	const char *db;	     /* the database (required) */
	const char *coll;    /* one collection, or NULL for the whole database */
	const char *message; /* commit message, NULL: "docfs snapshot <db>[.<coll>]" */
	const char *tag;     /* also create this lightweight tag, or NULL */
	const char *repo;    /* repository path, NULL: "<store>/snapshots.git" (bare, created) */
	const char *branch;  /* NULL: "main" */
};

struct store_snap_result {
	char commit[41];       /* the new commit id (hex) */
	int64_t docs;	       /* documents in the snapshot */
	int64_t blobs_written; /* documents rendered and stored */
	int64_t blobs_reused;  /* documents whose blob was reused */
	int64_t colls_reused;  /* collections whose tree was reused whole */
};

/* Takes a snapshot. Author and committer come from GIT_AUTHOR_NAME / GIT_AUTHOR_EMAIL /
 * GIT_AUTHOR_DATE (and the GIT_COMMITTER_* ones) like git, defaulting to "docfs" and
 * "docfs@localhost" and the current time. Errors: DFS_ENOENT (no such database/collection),
 * DFS_EINVAL ("'x' is not a git repository"), DFS_EIO. */
int store_snapshot(struct store *s, const struct store_snap_opts *o, struct store_snap_result *r,
		   struct dfs_err *err);

struct store_snap_info {
	char id[41];	   /* commit id */
	int64_t time;	   /* commit time, seconds since the epoch */
	char message[256]; /* first line of the message */
	char refs[256];	   /* branches and tags pointing at it, comma-separated */
	int64_t docs;	   /* documents in its tree (".json" blobs) */
};

/* Lists the commits of the branch (NULL: "main"), newest first, in repo (NULL: default). */
int store_snapshot_list(struct store *s, const char *repo, const char *branch,
			int (*cb)(void *ctx, const struct store_snap_info *i), void *ctx,
			struct dfs_err *err);

/* Restores collection db.coll as it is in snapshot ref (a branch, tag, full or abbreviated
 * commit id, "main~3") into into_db.into_coll (NULL: the same), documents and index
 * definitions, in one transaction. An existing target collection is DFS_EEXIST unless force
 * (then it is replaced). *ndocs gets the number of documents restored. */
int store_restore(struct store *s, const char *repo, const char *ref, const char *db,
		  const char *coll, const char *into_db, const char *into_coll, bool force,
		  int64_t *ndocs, struct dfs_err *err);

/* Read-only browsing of a snapshot repository (for /.snapshots in the mount). Thread-safe:
 * calls are serialized inside. */
struct store_git;
/* Opens repo (NULL: the default one); DFS_ENOENT when it does not exist yet. *out Owned,
 * freed by store_git_free. */
int store_git_open(struct store *s, const char *repo, struct store_git **out, struct dfs_err *err);
void store_git_free(struct store_git *g);
/* Calls cb with the short names of the branches, then of the tags. */
int store_git_refs(struct store_git *g, int (*cb)(void *ctx, const char *name), void *ctx,
		   struct dfs_err *err);
/* Resolves ref (branch, tag, full or abbreviated id, "main~3") to a commit id (hex). */
int store_git_resolve(struct store_git *g, const char *ref, char commit[41], struct dfs_err *err);
struct store_git_entry {
	char name[256]; /* entry name */
	bool is_dir;	/* a tree */
	int64_t size;	/* blob size (0 for trees) */
	char oid[41];	/* object id (hex): stable, usable as an inode seed */
	bool has_attrs;	/* the snapshot kept the file's mode and owner (snapshot.c note 8): */
	uint32_t mode, uid, gid; /* its permission bits and owner */
};
/* Looks path ("" for the root, "db/coll/x.json") up in commit's tree. DFS_ENOENT when absent. */
int store_git_stat(struct store_git *g, const char *commit, const char *path,
		   struct store_git_entry *out, struct dfs_err *err);
/* Lists the tree at path of commit. */
int store_git_list(struct store_git *g, const char *commit, const char *path,
		   int (*cb)(void *ctx, const struct store_git_entry *e), void *ctx,
		   struct dfs_err *err);
/* Appends the blob at path of commit to out. */
int store_git_read(struct store_git *g, const char *commit, const char *path, struct dfs_buf *out,
		   struct dfs_err *err);

/* ---- secondary indexes (index.c) --------------------------------------------------- */

/*
 * An index of a collection: its definition (the spec, as MongoDB's createIndex takes it) and
 * its entries. The "_id_" index always exists and is served by the documents' own key (the
 * store_key encoding of _id, ixid 0); every other index keeps its entries in one SQLite
 * WITHOUT ROWID table ordered by (index, key, _id), so equal keys come in _id order (the
 * order in which a sort breaks ties) in both scan directions. An entry's key is the
 * concatenation of the store_key encodings of the indexed values, each inverted for a
 * descending field, a hashed field encoded as the int64 store_index_hash() of its value. Next
 * to the key each entry keeps the indexed values themselves (type-exact, so that a covered
 * query returns them as stored): a BSON document {"0": v0, "1": v1, ...}.
 *
 * Key generation follows MongoDB: a missing field indexes as null (a sparse index skips a
 * document whose indexed fields are all missing); an array field indexes each distinct
 * element (an empty array as undefined) and marks that field multikey; two array fields in
 * one compound key ("cannot index parallel arrays") and a key over DFS_MAX_KEY_SIZE bytes are
 * errors of the write; a partial index holds only the documents its partialFilterExpression
 * matches. Every document write (insert, replace, rename, delete, restore, import) updates
 * every index of its collection in the same transaction; a unique index refuses a second
 * document with an equal key (missing counts as null) with DFS_EEXIST.
 */
#define DFS_MAX_INDEXES 64	/* per collection, _id_ included */
#define STORE_IX_MAX_FIELDS 32 /* fields of one compound key */

#define STORE_IX_TEXT 2 /* store_index_field.dir of a text index's "_fts" entry */

struct store_index_field {
	char path[256]; /* the dotted field path ("_fts" for a text index's terms) */
	int dir;	/* 1 ascending, -1 descending, 0 hashed, STORE_IX_TEXT */
};

struct store_text_spec; /* a text index's weights and languages (text.c) */

struct store_index {
	int64_t ixid;		 /* 0: the _id_ index; else the id of its entries */
	char name[128];		 /* "price_1", "_id_", or the name given */
	int nfields;		 /* fields of the key pattern */
	struct store_index_field field[STORE_IX_MAX_FIELDS];
	bool unique, sparse;	 /* options */
	bool hashed;		 /* one field is hashed */
	uint32_t multikey;	 /* bit i: field i has indexed an array element */
	int64_t expire_after;	 /* expireAfterSeconds (TTL), -1 when not set */
	bson_t *partial;	 /* Owned: partialFilterExpression, or NULL */
	bson_t *spec;		 /* Owned: the whole spec as stored ({v, key, name, ...}) */
	struct store_text_spec *text; /* Owned: a text index's fields, or NULL */
};

/* The filter engine lives above the store; partial indexes need it. The query layer installs
 * these once at startup (query_init()); without them a partial index is DFS_EINVAL. The
 * hooks are a process global read without locks: set them before opening any store (NULL
 * removes them, for tests). */
struct store_filter_hooks {
	int (*compile)(const bson_t *filter, void **out, struct dfs_err *err);
	bool (*match)(const void *compiled, const bson_t *doc);
	void (*free)(void *compiled);
};
void store_filter_hooks_set(const struct store_filter_hooks *h);

/* The 64-bit hash a hashed index stores for value v (numbers by value: 5 and 5.0 agree). */
int64_t store_index_hash(const bson_value_t *v);

/* The indexes of coll, "_id_" first then by creation. *out Owned (an array of *n), freed by
 * store_index_list_free. */
int store_index_list(struct store_txn *t, int64_t coll, struct store_index **out, int *n,
		     struct dfs_err *err);
void store_index_list_free(struct store_index *ixs, int n);
/* One index by name; DFS_ENOENT when absent. *out released by store_index_release. */
int store_index_get(struct store_txn *t, int64_t coll, const char *name, struct store_index *out,
		    struct dfs_err *err);
void store_index_release(struct store_index *ix);

/*
 * Creates an index from spec ({"key": {...}, "name", "unique", "sparse",
 * "partialFilterExpression", "expireAfterSeconds"}; unknown options are DFS_EINVAL) and builds
 * it over the existing documents in t (a write transaction: all or nothing). The default name
 * is MongoDB's ("price_1", "name_1_price_-1"); name_out (may be NULL) gets the name used.
 * progress (may be NULL) is called every few thousand documents. Creating an index that
 * exists with the same key and options does nothing; the same name with another definition
 * is DFS_EEXIST. Errors: DFS_EINVAL (bad spec, parallel arrays, key too large, more than
 * DFS_MAX_INDEXES), DFS_EEXIST (a unique index over duplicates: the message gives the key).
 */
int store_index_create(struct store_txn *t, int64_t coll, const bson_t *spec, char *name_out,
		       size_t name_cap, void (*progress)(void *ctx, int64_t done, int64_t total),
		       void *ctx, struct dfs_err *err);
/* Checks spec as store_index_create would before building (the key, the options, text
 * options, the name), without a transaction. Errors: DFS_EINVAL. */
int store_index_spec_check(const bson_t *spec, struct dfs_err *err);
/* Drops an index (DFS_EPERM for "_id_", DFS_ENOENT when absent). */
int store_index_drop(struct store_txn *t, int64_t coll, const char *name, struct dfs_err *err);
/* Bumped by every index create and drop of coll (for plan caches). */
int store_index_version(struct store_txn *t, int64_t coll, int64_t *version, struct dfs_err *err);

struct store_index_stats {
	int64_t entries;  /* index entries (documents for _id_) */
	int64_t bytes;	  /* bytes of keys and values */
	bool multikey;	  /* some field has indexed an array */
	int64_t build_ms; /* time the last build took */
	int64_t created;  /* creation time, ms since the epoch */
};
int store_index_stats(struct store_txn *t, int64_t coll, const char *name,
		      struct store_index_stats *out, struct dfs_err *err);

/* A scan of one index over one half-open byte range [lo, hi) of keys (lo NULL: from the
 * first key; hi NULL: to the last), ascending or (reverse) descending. Not thread-safe; must
 * be freed before its transaction ends. */
struct store_ixscan;
struct store_ixkey {
	const uint8_t *key; /* Borrowed: valid until the next call */
	size_t keylen;
	int64_t id;  /* the document's entry id */
	bson_t vals; /* read-only view {"0": v0, ...} (empty for _id_); valid until next call */
};
int store_ixscan_open(struct store_txn *t, int64_t coll, const struct store_index *ix,
		      bool reverse, struct store_ixscan **out, struct dfs_err *err);
/* (Re)positions the scan on the range [lo, hi); the next call of _next returns its first
 * key in scan order. */
int store_ixscan_range(struct store_ixscan *s, const uint8_t *lo, size_t lolen, const uint8_t *hi,
		       size_t hilen, struct dfs_err *err);
/* 0 with *out filled, DFS_ENOENT at the end of the range. */
int store_ixscan_next(struct store_ixscan *s, struct store_ixkey *out, struct dfs_err *err);
void store_ixscan_free(struct store_ixscan *s);

/* The BSON of document id as a read-only view (Borrowed: valid until the next call with the
 * same t or the end of t): the FETCH of an index plan. DFS_ENOENT when it is gone. With
 * cache, a read transaction looks in the database's document cache first and keeps what it
 * read there (dcache.c); a scan fetching every document passes false. */
int store_doc_fetch(struct store_txn *t, int64_t id, bool cache, bson_t *view, struct dfs_err *err);
/* When doc is the view store_doc_fetch(t, id, cache true, …) last returned, the same bytes:
 * id, with *text its compact rendering (STORE_RENDER_COMPACT, no newline) from the
 * document cache, or NULL (*len 0) when the cache has none yet, which store_doc_keep_text
 * may add (dcache.c note 5). Borrowed: valid until the next fetch with t. Else 0. */
int64_t store_doc_text(struct store_txn *t, const bson_t *doc, const char **text, size_t *len);
/* Keeps text, the compact rendering of document id as t fetched it (store_doc_text gave id),
 * with id's cache entry; nothing when the cache moved on meanwhile or already has one. */
void store_doc_keep_text(struct store_txn *t, int64_t id, const char *text, size_t len);

/* Deletes the documents of db whose TTL index date is older than expireAfterSeconds before
 * now_ms (an array: its earliest date; non-dates never expire), in write transactions of at
 * most a few thousand documents. *deleted gets the count. */
int store_ttl_sweep(struct store_db *db, int64_t now_ms, int64_t *deleted, struct dfs_err *err);

/* ---- text search (text.c) ---------------------------------------------------------- */

/*
 * MongoDB's text indexes (textIndexVersion 3): tokenizing on the Unicode delimiter classes,
 * case folding and diacritic stripping, stop words and Snowball stemming (libstemmer) in
 * MongoDB's 15 languages plus "none", and the per-document term scores of a text index
 * (ops.md 7.5). A text index's entries are one per (prefix values, term, suffix values,
 * document): the key is the store_key encodings of the prefix values, the term (a string)
 * and the suffix values; the vals hold the values, the term at the "_fts" field's position
 * and the term's score as "score" (a double). All functions are thread-safe.
 */
#define STORE_TEXT_CASE 1	/* case-sensitive: no case folding */
#define STORE_TEXT_DIACRITIC 2	/* diacritic-sensitive: no stripping */
#define STORE_TEXT_KEEP_STOP 4	/* keep stop words */
#define STORE_TEXT_MAX_TERM 256 /* bytes a term is cut to (at a character boundary) */

struct store_text_field {
	char path[256]; /* dotted path, or "$**" */
	double weight;	/* 1..99999 */
};

struct store_text_spec {
	struct store_text_field *f; /* Owned: the weighted fields, sorted by path */
	int nf;
	bool wildcard;		 /* "$**": every string is indexed */
	int lang;		 /* default_language (store_text_language) */
	char override[256];	 /* language_override */
	int pos;		 /* the "_fts" field's position in the key */
	char keynames[512];	 /* the text fields as the key named them, "a_text_b_text" */
};

/* The language of a name or ISO code ("english", "en", "none", ...): its number (0 is
 * "none"), or -1 when MongoDB does not support it. */
int store_text_language(const char *name);
/* The canonical name of language lang ("english"). Borrowed: static. */
const char *store_text_language_name(int lang);

/* Tokenizes the len bytes of s (UTF-8) in language lang: cb gets each term (stemmed; case
 * folded and diacritics stripped unless flags say otherwise; stop words dropped unless
 * STORE_TEXT_KEEP_STOP), a view valid for the call. */
void store_text_tokens(int lang, unsigned flags, const char *s, size_t len,
		       void (*cb)(void *ctx, const char *term, size_t tlen), void *ctx);
/* Appends s folded as flags say (case folding unless STORE_TEXT_CASE, diacritics stripped
 * unless STORE_TEXT_DIACRITIC) to out: what phrases are compared on. */
void store_text_fold(const char *s, size_t len, unsigned flags, struct dfs_buf *out);

/* Calls cb for each string ix (a text index) indexes in doc: one field value or array
 * element, its field's weight and the language in force there. A nonzero return of cb
 * stops the walk and is returned. DFS_EINVAL for an unsupported language override. */
int store_text_strings(const struct store_index *ix, const bson_t *doc,
		       int (*cb)(void *ctx, const char *s, size_t len, double weight, int lang),
		       void *ctx, struct dfs_err *err);

/* The distinct terms of a document with their scores. */
struct store_text_terms {
	struct dfs_buf buf; /* the terms, NUL-terminated, one after the other */
	size_t *off;	    /* Owned: term i starts at buf.data + off[i] */
	double *score;	    /* Owned: its score */
	size_t n, cap;
};
void store_text_terms_init(struct store_text_terms *t);
void store_text_terms_release(struct store_text_terms *t);
/* The terms of doc under text index ix, sorted, with MongoDB's scores (ops.md 7.5). */
int store_text_score(const struct store_index *ix, const bson_t *doc, struct store_text_terms *out,
		     struct dfs_err *err);

/* ---- verification (check.c) -------------------------------------------------------- */

/* Verifies every database: SQLite integrity and the store's invariants (every document's
 * key, name and size agree with its BSON, which is valid; ids unique). Each problem goes to
 * cb; returns 0 when sound, DFS_ECORRUPT when problems were found. */
int store_check(struct store *s, void (*cb)(void *ctx, const char *problem), void *ctx,
		struct dfs_err *err);

#endif
