/*
 * fs_int.h - declarations shared between the files of fs/ (the FUSE namespace, the command
 * line, the data generator). Not a public interface.
 */
#ifndef DOCFS_FS_INT_H
#define DOCFS_FS_INT_H

#include "store.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

/* ---- generate.c: mgenerate-style document templates -------------------------------- */

/*
 * A compiled template. Operators: $choose {from:[..], weights:[..]} or [..], $number (bare:
 * integer 0..100; [min,max]; {min,max}), $date ([min,max] ISO dates or {min,max}), $oid,
 * $string ({length}), $bool, $pick {array, element}, $array {of, number}, $inc {start, step},
 * nested documents and arrays of templates, literals copied as they are.
 * Not thread-safe: one generator per thread.
 */
struct fs_gen;

/* Compiles tmpl (Borrowed for the call) with a seeded PRNG; *out Owned, freed by fs_gen_free.
 * Errors: DFS_EINVAL naming the operator and path ("$number needs [min, max] at 'age'"). */
int fs_gen_new(const bson_t *tmpl, uint64_t seed, struct fs_gen **out, struct dfs_err *err);
/* Produces the next document into out (initialised, empty). Deterministic for a seed. */
int fs_gen_next(struct fs_gen *g, bson_t *out, struct dfs_err *err);
void fs_gen_free(struct fs_gen *g);

/* ---- errlog.c: the one place codes become errno, and the /.docfs/errors ring -------- */

/* The errno for a dfs_code (EINVAL for DFS_EINVAL, ...). */
int fs_errno(int code);
/* Records an error message (with a time stamp) for /.docfs/errors and the log file. */
void fs_errlog_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Writes a line (with a time stamp) to the log file only: progress and events, not errors. */
void fs_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Appends the recorded messages, oldest first, one per line, to out. */
void fs_errlog_render(struct dfs_buf *out);
/* Writes line to the log file as it is (no stamp, no length limit): the JSON lines of the
 * slow-query log. */
void fs_log_raw(const char *line);
/* Sends log lines also to path (append; "-": standard error); NULL turns it off. */
int fs_errlog_open(const char *path, struct dfs_err *err);

/* ---- insert.c: streaming insertion of concatenated / line-separated documents ------- */

/*
 * Documents arrive in chunks of any size; each call inserts every complete document in one
 * write transaction. Ordered: the first bad
 * document stops the stream; the documents before it are committed, and the error says which
 * document (its number and line) and why. Not thread-safe; one inserter per stream.
 */
struct fs_insert_item;
struct fs_inserter {
	struct store_db *db;	  /* Borrowed */
	int64_t coll;		  /* target collection id */
	struct store_attrs attrs; /* of the new documents */
	bool json_array;	  /* input is one JSON array of documents ([doc, doc, ...]): set
				   * by the caller, or found at the first byte (insert.c note 5) */
	int array_state; /* 0: before '[' (or before deciding), 1: before a document, 2: after
			  * one, 3: after ']', 4: a stream, not an array */
	struct dfs_buf pending;	      /* bytes received but not yet consumed */
	unsigned line;		      /* line number of pending.data[0] */
	int64_t ndocs;		      /* documents inserted so far */
	bool failed;		      /* an error stopped the stream */
	struct dfs_err err;	      /* the error that stopped it */
	struct fs_insert_item *items; /* Owned: the scan queue's slots, reused between calls */
	bool keep_going;	      /* skip documents refused for a duplicate key (note 6) */
	int64_t nskipped;	      /*   how many were */
	/* called for each skipped one (its number from 1, line, error); may be NULL */
	void (*on_skip)(void *ctx, int64_t n, unsigned line, const struct dfs_err *e);
	/* when set, takes each document instead of inserting it (note 6) */
	int (*sink)(void *ctx, const bson_t *doc, unsigned line, struct dfs_err *err);
	void *sink_ctx;		      /* the context of on_skip and sink */
};
#define FS_INSERT_REPORT 100 /* skipped documents reported one by one, at most */

/* docfs import's formats and modes (import.c). Not thread-safe. */
enum { FS_IMPORT_JSON, FS_IMPORT_CSV, FS_IMPORT_TSV };
enum { FS_IMPORT_INSERT, FS_IMPORT_UPSERT, FS_IMPORT_MERGE };
struct fs_import {
	struct store_db *db; /* Borrowed */
	int64_t coll;
	int type;	      /* FS_IMPORT_JSON, _CSV, _TSV */
	int mode;	      /* FS_IMPORT_INSERT, _UPSERT, _MERGE */
	bool stop_on_error;   /* ordered: stop at the first refused document */
	bool header_pending;  /* the next CSV/TSV record names the fields */
	char **names;	      /* Owned: the field names of CSV/TSV columns */
	int nnames;
	char **upsert;	      /* Owned: the upsert fields (none: _id) */
	int nupsert;
	struct dfs_buf pending; /* CSV/TSV bytes not yet a whole record */
	struct dfs_buf out;	/* the JSON lines made of the last chunk's records */
	int64_t nrecords;	/* CSV/TSV records read */
	bson_t ops;		/* the upsert/merge operations not yet run */
	int nops;
	int64_t nwritten, nfailed; /* upsert/merge: documents written, refused */
};
void fs_import_init(struct fs_import *im, struct store_db *db, int64_t coll);
void fs_import_release(struct fs_import *im);
int fs_import_set_fields(struct fs_import *im, const char *list, struct dfs_err *err);
int fs_import_set_upsert_fields(struct fs_import *im, const char *list, struct dfs_err *err);
/* Turns the CSV/TSV records completed by data (all at final) into JSON lines in im->out. */
int fs_import_csv(struct fs_import *im, const char *data, size_t len, bool final,
		  struct dfs_err *err);
/* fs_inserter's sink in the upsert and merge modes; fs_import_finish runs the rest. */
int fs_import_sink(void *ctx, const bson_t *doc, unsigned line, struct dfs_err *err);
int fs_import_finish(struct fs_import *im, struct dfs_err *err);
/* Reports a skipped document (insert.c). */
void fs_inserter_skipped(struct fs_inserter *in, unsigned line, const struct dfs_err *e);

void fs_inserter_init(struct fs_inserter *in, struct store_db *db, int64_t coll,
		      const struct store_attrs *a);
void fs_inserter_release(struct fs_inserter *in);
/* Feeds bytes; final says no more will come (text left over is then an error). Returns 0 or
 * the error (also kept in in->err; every later call returns it again). */
int fs_inserter_feed(struct fs_inserter *in, const char *data, size_t len, bool final);

/* ---- qpath.c: the query path grammar and result files -------------------------------- */

/* FSQ_BSON: documents as BSON one after the other, no path gives it (the wire protocol's
 * tailable cursors read fs_tail so). */
enum fs_query_format { FSQ_JSONL, FSQ_JSON, FSQ_PRETTY, FSQ_IDS, FSQ_TREE, FSQ_BSON };

/* A parsed "query/<q>" or "explain/<q>" path component. */
struct fs_query {
	bson_t filter;	   /* the filter (empty: everything) */
	bson_t sort;	   /* when has_sort */
	bson_t projection; /* when has_projection */
	bson_t hint;	   /* when has_hint: a key pattern or {$natural: 1|-1} */
	bool has_sort, has_projection, has_hint;
	char *hint_name;     /* Owned: hint=<index name>, or NULL */
	int64_t skip, limit; /* 0: none */
	int64_t max_time_ms; /* maxTimeMS: the time limit of the find, 0: none */
	bool count;	     /* count=1: the number of matches */
	bool tailable;	     /* tailable=1: a read that waits for new documents (tail.c) */
	char *distinct;	     /* Owned: distinct=<field>, or NULL */
	int format;	     /* enum fs_query_format; -1 until a format= is given */
	int verbosity;	     /* enum query_verbosity; -1 until a verbosity= is given */
	char saved[256];     /* "@name": a saved query to load first, else "" */
};

void fs_query_init(struct fs_query *q);
void fs_query_release(struct fs_query *q);
/* Parses "<filter>[?opt=v&...]" (%XX escapes decoded per part). The options of both query/
 * and explain/ are accepted here; fs_query_run and fs_explain_run refuse the ones that are
 * not theirs. Errors: DFS_EINVAL saying which part is wrong and where. */
int fs_query_parse(const char *component, struct fs_query *q, struct dfs_err *err);
/* Parses a component the way query/ and explain/ open it: a saved query ("@name", from
 * .queries/ of coll) first, then the component's own options over it. */
int fs_query_parse_path(struct store_db *db, int64_t coll, const char *component,
			struct fs_query *q, struct dfs_err *err);
/* Applies a saved find command {"filter", "sort", "projection", "skip", "limit", "hint"}
 * to q. */
int fs_query_from_command(const bson_t *cmd, struct fs_query *q, struct dfs_err *err);
/* Parses text as a saved find command onto q and validates it (what .queries/ accepts). */
int fs_query_parse_saved(const char *text, size_t len, struct fs_query *q, struct dfs_err *err);
/* The store name of saved query name: saved queries are scratch files under this prefix. */
#define FS_SAVED_PREFIX ".queries/"

/* Parses the filter, sort and projection of q to report their errors (nothing is kept). */
int fs_query_validate(const struct fs_query *q, struct dfs_err *err);

/* A result: a snapshot of a query's output, in memory or (when large) an unlinked file. */
struct fs_result {
	struct dfs_buf mem; /* the bytes, while small */
	FILE *spill;	    /* Owned: the bytes, once large */
	size_t size;	    /* total bytes */
};

void fs_result_init(struct fs_result *r);
void fs_result_release(struct fs_result *r);
/* Memory limits of queries run by this process (mount options sort_mem, result_mem). */
extern size_t fs_sort_mem, fs_result_mem;
/* Listings attach a node (attributes and a kernel inode) to a document only while the node
 * table holds fewer than this many nodes (mount option dirplus_nodes; fsops.c note 4). */
extern size_t fs_dirplus_nodes;
/* Runs q over collection coll of db in one read transaction into r. */
int fs_query_run(struct store_db *db, int64_t coll, const struct fs_query *q, struct fs_result *r,
		 struct dfs_err *err);
/* Copies up to n bytes at off; returns 0 or an errno. */
int fs_result_read(struct fs_result *r, char *buf, size_t n, off_t off, size_t *got);
/* "<db>.<coll>" of collection coll, into out (2 * DFS_MAX_NS_NAME + 2 bytes suffice). */
int fs_coll_ns(struct store_txn *t, int64_t coll, char *out, size_t cap, struct dfs_err *err);
/* Explains q over collection coll of db in one read transaction into r: the explain
 * document pretty-printed (format=pretty, the default), on one line (format=json), or drawn
 * as a tree (format=tree). Errors: DFS_EINVAL for options explain does not take. */
int fs_explain_run(struct store_db *db, int64_t coll, const struct fs_query *q, struct fs_result *r,
		   struct dfs_err *err);

/* ---- ixfile.c: index files (.indexes/<name>, docfs index) -------------------------- */

/* May name be the name of an index file? Not an editor's temporary name (a leading '.' or
 * '#', a trailing '~' or '#', all digits like vim's 4913 probe), not "*", 1..127 bytes. */
bool fs_index_name_ok(const char *name);
/* Appends what .indexes/<name> shows: the spec and {"stats": {...}}, pretty (or compact,
 * one line without the final newline). */
int fs_index_render(struct store_txn *t, int64_t coll, const char *name, bool pretty,
		    struct dfs_buf *out, struct dfs_err *err);
/* ---- options.c: the .options file of a collection ---------------------------------- */

/* Appends what .options shows: MongoDB's collection options ({} or {"capped": true,
 * "size": N, "max": M}), one line. */
int fs_options_render(struct store_txn *t, int64_t coll, struct dfs_buf *out, struct dfs_err *err);
/* Applies text written to .options in one write transaction of db: {capped: true, size,
 * max} makes an empty collection capped; the options it already has are accepted again
 * (a file read and written back changes nothing); anything else is DFS_EINVAL naming what. */
int fs_options_apply(struct store_db *db, int64_t coll, const char *text, size_t len,
		     struct dfs_err *err);

/* Parses the text of an index file (a spec in the shell-literal syntax) into out
 * (initialised, empty). */
int fs_index_spec_parse(const char *text, size_t len, bson_t *out, struct dfs_err *err);
/* Checks a spec (as an index file named name holds it) as fs_index_create would before
 * building, without a transaction. */
int fs_index_spec_check(const char *name, const bson_t *in, struct dfs_err *err);
/* Checks the text of `.options` as fs_options_apply would before applying it. */
int fs_options_check(const char *text, size_t len, struct dfs_err *err);
/*
 * Creates index name on collection coll of db from spec {"key": {...}, ...} (Borrowed),
 * whose "name", when present, must be name (name NULL: the spec's or the default name); a
 * "stats" field (what reading an index file shows) is ignored, so a file read and written
 * back creates the same index. One write transaction; the build logs its progress every
 * 100,000 documents. name_out (may be NULL) gets the name used.
 */
int fs_index_create(struct store_db *db, int64_t coll, const char *name, const bson_t *spec,
		    char *name_out, size_t name_cap, struct dfs_err *err);
int fs_index_drop(struct store_db *db, int64_t coll, const char *name, struct dfs_err *err);

/* ---- ttl.c: the TTL sweeper thread of a mount ------------------------------------- */

/* Starts a thread calling store_ttl_sweep for every database of s every period_s seconds
 * (period_s 0: no thread). Its deletions reach the kernel through the change feed. */
int fs_ttl_start(struct store *s, int period_s, struct dfs_err *err);
void fs_ttl_stop(void);

/* Moves a result's bytes to its temporary file once they pass result_mem (force: flush). */
int fs_result_spill(struct fs_result *r, bool force, struct dfs_err *err);
/* Ends a result: flushes it and sets its size. */
int fs_result_finish(struct fs_result *r, struct dfs_err *err);

/* The largest write request (FUSE max_write), and the st_blksize of the files written in
 * bulk (.insert, .bulk, update/, delete/), so that tools write that much at a time. */
#define FS_MAX_WRITE (1024 * 1024)

/* ---- render.c: result documents rendered into a result, on a second thread once large -- */

/* Not thread-safe: one caller per struct fs_render. */
struct query_cursor;
struct fs_render;
/* Starts rendering documents into r (which must outlive it) in format (FSQ_JSONL,
 * FSQ_JSON, FSQ_PRETTY or FSQ_IDS). *out is Owned (fs_render_free). */
int fs_render_new(struct fs_result *r, int format, struct fs_render **out, struct dfs_err *err);
/* Adds the next document (copied: doc may die on return). Errors: the rendering's, such as
 * DFS_EINVAL for format=ids without _id, or a spill's DFS_EIO (this one or an earlier
 * document's). */
int fs_render_put(struct fs_render *p, const bson_t *doc, struct dfs_err *err);
/* fs_render_put of c's last result doc: when an index plan fetched it through the
 * document cache, its rendering is copied from there, or kept there once made (render.c
 * note 5). */
int fs_render_put_fetched(struct fs_render *p, struct query_cursor *c, const bson_t *doc,
			  struct dfs_err *err);
/* Renders every document put so far and returns the first rendering error (0: none). */
int fs_render_drain(struct fs_render *p, struct dfs_err *err);
/* Renders what is left, closes a JSON array and ends r (fs_result_finish). */
int fs_render_finish(struct fs_render *p, struct dfs_err *err);
/* Stops rendering (unless finished) and frees p; NULL is a no-op. */
void fs_render_free(struct fs_render *p);

/* The path grammar's pieces, shared by query/, explain/, aggregate/ and the write paths:
 * %XX-decoding of n bytes of p into out, and option values that are documents or booleans
 * (1, 0, true, false, or empty for true). Errors: DFS_EINVAL naming what. */
int fs_path_unescape(const char *p, size_t n, struct dfs_buf *out, struct dfs_err *err);
/* The first byte of stops in a path's text s outside a string or regex literal (so a '?'
 * or '&' inside `"a?b"` or `/colou?r/` is the value's), or NULL. */
const char *fs_path_split(const char *s, const char *stops);
/* Whether text, a query, explain, pipeline or write path joined so far, ends inside its
 * leading value: then the next path component continues it (a '/' in a query). */
bool fs_path_incomplete(const char *text);
int fs_path_doc_opt(const char *what, const struct dfs_buf *v, bson_t *out, struct dfs_err *err);
int fs_path_bool_opt(const char *what, const struct dfs_buf *v, bool *out, struct dfs_err *err);
/* format= (jsonl, json, pretty, ids, tree: an FSQ_* value) and verbosity= (a QUERY_VERB_*). */
int fs_path_format_opt(const struct dfs_buf *v, int *out, struct dfs_err *err);
int fs_path_verbosity_opt(const struct dfs_buf *v, int *out, struct dfs_err *err);

/* ---- changes.c: the .changes files and docfs watch ----------------------------------- */

/* The size of db's stream (coll 0) or collection coll's: the end of its last event. */
int fs_changes_size(struct store_db *db, int64_t coll, int64_t *size, struct dfs_err *err);
/* The bytes [off, off + size) of that stream into out (reset first; short at the end). */
int fs_changes_pread(struct store_db *db, int64_t coll, int64_t off, size_t size,
		     struct dfs_buf *out, struct dfs_err *err);
/* A stream with options (changes.c note 2) over db (NULL: every database of s) or its
 * collection coll (NULL: the whole database); opts is the part after '?' (may be NULL).
 * *out is Owned, freed by fs_changes_free. Not thread-safe: one reader at a time.
 * Errors: DFS_EINVAL naming the option, the bad token or the lost history. */
struct fs_changes;
int fs_changes_open(struct store *s, struct store_db *db, const char *coll, const char *opts,
		    struct fs_changes **out, struct dfs_err *err);
/* Appends the next lines (about want bytes, at least one line when there is one) to out;
 * appends nothing at the end. With follow=1 it waits for an event, asking stop(ctx)
 * between looks (true: DFS_EINTR). */
int fs_changes_next(struct fs_changes *c, size_t want, struct dfs_buf *out, bool (*stop)(void *ctx),
		    void *ctx, struct dfs_err *err);
void fs_changes_free(struct fs_changes *c);
/* The resume token of where a stream over one database stands (after the last event it
 * read, or where it started): the wire protocol's postBatchResumeToken. false for a
 * stream over several databases. */
bool fs_changes_token(const struct fs_changes *c, char out[STORE_TOKEN_LEN + 1]);

/* ---- tail.c: tailable reads of capped collections ------------------------------------ */

/* A tailable read of q over capped collection coll of db (tail.c note 4 lists what it
 * refuses, with DFS_EINVAL saying why). *out is Owned, freed by fs_tail_free; one reader
 * at a time. */
struct fs_tail;
int fs_tail_open(struct store_db *db, int64_t coll, const struct fs_query *q, struct fs_tail **out,
		 struct dfs_err *err);
/* Appends the next matches (about want bytes) to out, waiting for one and asking stop(ctx)
 * between looks (true: DFS_EINTR); appends nothing at the end (a limit reached). Errors:
 * DFS_ESTALE (CappedPositionLost), DFS_ENOENT (the collection dropped). */
int fs_tail_next(struct fs_tail *tl, size_t want, struct dfs_buf *out, bool (*stop)(void *ctx),
		 void *ctx, struct dfs_err *err);
void fs_tail_free(struct fs_tail *tl);
/* Whether the read has ended: its limit was reached. */
bool fs_tail_done(const struct fs_tail *tl);

/* ---- stats.c: the .stats files ------------------------------------------------------ */

/* collStats of collection coll of db (coll 0: dbStats of db) as a pretty JSON document
 * appended to out; opts is the part after '?' of the name (scale=N) or NULL. Errors:
 * DFS_EINVAL naming a bad option. */
int fs_stats_render(struct store_db *db, int64_t coll, const char *opts, struct dfs_buf *out,
		    struct dfs_err *err);
/* The same document into out (initialised, empty), figures divided by scale (>= 1): what
 * the wire protocol's collStats and dbStats answer. */
int fs_stats_doc(struct store_db *db, int64_t coll, int64_t scale, bson_t *out,
		 struct dfs_err *err);

/* ---- apath.c: aggregate/ paths and saved pipelines ----------------------------------- */

/* Runs the pipeline of path component "<pipeline>[?format=..]" or "@name[?..]" over
 * db.coll into r (a stable snapshot; a pipeline ending in $out/$merge writes in one
 * transaction and gives an empty result). Errors: DFS_EINVAL saying what is wrong. */
int fs_agg_run(struct store_db *db, int64_t coll, const char *component, struct fs_result *r,
	       struct dfs_err *err);
/* Parses saved text as a pipeline (an array, or {"pipeline": [...]}) into out; DFS_ENOENT
 * when it is a document without a pipeline (a saved find). */
int fs_pipeline_from_text(const char *text, size_t len, bson_t *out, struct dfs_err *err);
/* Checks that text is a valid pipeline (parsed by the engine). */
int fs_pipeline_check(const char *text, size_t len, struct dfs_err *err);
/* Explains the path component of explain/<q> into r: a pipeline ("[...]" or "@name" of a
 * saved pipeline, with verbosity= and format=pretty|json|tree) through query_agg_explain,
 * anything else as a find (fs_query_parse_path + fs_explain_run). Never writes. Errors:
 * DFS_EINVAL saying what is wrong. */
int fs_explain_path_run(struct store_db *db, int64_t coll, const char *component,
			struct fs_result *r, struct dfs_err *err);

/* ---- wpath.c: the write paths update/, delete/ and .bulk ------------------------- */

enum fs_write_kind { FSW_UPDATE = 1, FSW_DELETE, FSW_BULK };

/* The kind of a write path name ("update/<q>", "delete/<q>", ".bulk[?...]"), 0 if none. */
int fs_write_kind_of(const char *name);
/* Checks the grammar of a write path name (filter and options). */
int fs_write_validate(const char *name, struct dfs_err *err);
/* Whether request text for the write path name is complete, so that it runs at the write
 * that completed it (and that write fails with its error, which bash's echo sees): an
 * update/ body once it holds one whole value or cannot start one, a delete/ body once it
 * holds anything but whitespace and is not an unfinished document. .bulk waits for the
 * close (more lines may follow). */
bool fs_write_complete(const char *name, const char *text, size_t len);
/* Runs the write named by name with request text (an update document, anything for a
 * delete, JSON Lines of operations for .bulk) in db.coll, atomically, and appends MongoDB's
 * result (one JSON line) to out, also when the write failed (then {"ok": 0, ...} or a
 * BulkWriteResult with writeErrors). Returns 0 or the error. */
int fs_write_run(struct store_db *db, int64_t coll, const char *name, const char *text, size_t len,
		 struct dfs_buf *out, struct dfs_err *err);

/* ---- mount.c / fsops.c / inode.c / notify.c: the FUSE file system ------------------ */

#define FS_MAX_LISTEN 16 /* listen= addresses of a mount or serve */

struct fs_mount_opts {
	const char *store;	/* store directory */
	const char *mountpoint; /* where to mount */
	bool foreground;	/* stay in the foreground (-f) */
	bool debug;		/* libfuse debug output (-d) */
	const char *fuse_opts;	/* options passed on to libfuse (allow_other, ...) */
	const char *log;	/* log file, or NULL */
	int notify_ms;		/* poll period of the change feed */
	size_t sort_mem;	/* bytes a query's sort holds before spilling (0: default) */
	size_t doc_cache;	/* each database's document cache, bytes (store.h) */
	size_t result_mem;	/* bytes of a result kept in memory (0: default) */
	int ttl_s;		/* seconds between TTL sweeps (0: none) */
	size_t dirplus_nodes;	/* listings give attributes only below this many nodes */
	bool uring;		/* serve requests through FUSE over io_uring (ring.c) */
	const char *listen[FS_MAX_LISTEN]; /* wire protocol addresses (fs/wire/server.c) */
	int nlisten;
	bool noauth;	      /* a non-loopback listen address is allowed */
	int cursor_timeout_s; /* wire cursors idle this long are closed (0: default) */
	const char *tls_cert, *tls_key; /* TLS for the wire's TCP clients (PEM files), or NULL */
	const char *replset; /* a replica set member of this set (fs/replset/), or NULL */
	const char *zk;	     /* its ZooKeeper servers ("h:p;h:p") */
};

/*
 * The node table (inode.c). A node is what the kernel holds a nodeid for. Nodeids are ours
 * to allocate; st_ino comes from the store (stable across mounts), so a node can be
 * re-pointed when a rename makes the kernel's inode stand for another store object.
 */
enum fs_node_kind {
	FSN_ROOT = 1,	/* "/" */
	FSN_DOCFS_DIR,	/* "/.docfs" */
	FSN_DOCFS_FILE, /* "/.docfs/<file>", id says which */
	FSN_DB,		/* "/<db>" */
	FSN_COLL,	/* "/<db>/<coll>", coll = id = the collection id */
	FSN_ENTRY,	/* a document or scratch file: id = entry id */
	FSN_PENDING,	/* a created "<stem>.json" not yet written: no store row yet */
	FSN_INSERT,	/* "/<db>/<coll>/.insert" */
	FSN_QDIR,	/* "/<db>/<coll>/query/": lists empty, any name opens a find */
	FSN_QUERY,	/* "/<db>/<coll>/query/<q>": pending_name holds <q> */
	FSN_SAVED_DIR,	/* "/<db>/<coll>/.queries/": saved find commands */
	FSN_XDIR,	/* "/<db>/<coll>/explain/": lists empty, any name opens an explain */
	FSN_EXPLAIN,	/* "/<db>/<coll>/explain/<q>": pending_name holds <q> */
	FSN_IXDIR,	/* "/<db>/<coll>/.indexes/": one file per index */
	FSN_INDEX,	/* "/<db>/<coll>/.indexes/<name>": pending_name holds the name */
	FSN_IXPENDING,	/* a created ".indexes/<name>" not yet written: no index yet */
	FSN_SNAP_ROOT,	/* "/.snapshots": branches and tags of the snapshot repository */
	FSN_SNAP_DIR,	/* a tree of a snapshot: pending_name is "<commit>/<path>" */
	FSN_SNAP_FILE,	/* a blob of a snapshot: pending_name as above, result_size its size */
	FSN_ADIR,	/* "/<db>/<coll>/aggregate/": lists empty, any name opens a pipeline */
	FSN_AGG,	/* "/<db>/<coll>/aggregate/<p>": pending_name holds <p> */
	FSN_UDIR,	/* "/<db>/<coll>/update/": lists empty, any name is an update path */
	FSN_DDIR,	/* "/<db>/<coll>/delete/": lists empty, any name is a delete path */
	FSN_WRITE,	/* a write path: pending_name is "update/<q>", "delete/<q>", ".bulk?.." */
	FSN_QPART,	/* the start of a query path with a '/' in it: a directory whose
			 * children continue it; pending_name is a letter for the family
			 * (q, x, a, u, d: query/ explain/ aggregate/ update/ delete/) and
			 * the text so far */
	FSN_DEAD,	/* unlinked or replaced while the kernel still holds it: its open
			 * files keep their content (read, write, truncate) until they close,
			 * and their writes go nowhere, as on any unlinked file; attr holds
			 * its attributes (st_nlink 0) once orphan is set */
	FSN_OPTIONS,	/* "/<db>/<coll>/.options": the collection's options (options.c) */
	FSN_PROFILE,	/* "<db>/.profile": the profiler's settings (profile.c) */
	FSN_STATS,	/* ".stats[?scale=N]" of a collection (coll) or a database (coll 0);
			 * pending_name: the name when it has options (stats.c) */
	FSN_CHANGES,	/* ".changes[?opts]" of a collection (coll), a database (coll 0) or the
			 * mount (db NULL); pending_name: the name when it has options */
	FSN_SDIR,	/* a scratch directory in a collection, or under one: id = its entry
			 * id; everything under it is scratch (fsops.c note 10) */
};

/* A node's attributes as fs_node_attr_put got them, in fewer bytes than a struct stat (a
 * million listed documents are a million nodes): what entry_attr and the orphan setters
 * fill, read back exactly. */
struct fs_attr {
	uint64_t ino;			  /* st_ino */
	int64_t size, blocks;		  /* st_size, st_blocks */
	int64_t sec[3];			  /* st_atim, st_mtim, st_ctim: seconds */
	uint32_t nsec[3];		  /*   and nanoseconds */
	uint32_t mode, nlink, uid, gid;	  /* st_mode, st_nlink, st_uid, st_gid */
	uint32_t blksize;		  /* st_blksize */
};

/* What only nodes being created, written or listed need, apart so that the million nodes
 * of a listed collection do not carry it (NULL: the defaults in the comments). */
struct fs_node_more {
	struct store_attrs pend; /* FSN_PENDING: what its first commit stores (the create's
				  * mode and caller, setattrs since; mtime 0: the commit's;
				  * all 0); a snapshot file's mode and owner */
	int64_t pend_atime_ns;	 /* FSN_PENDING: its atime (-1: none set) */
	const void *wowner;	 /* the open file whose written size and time follow (NULL:
				  * none): what an open file wrote shows in stat before its
				  * commit (fs_node_written_set) */
	int64_t wsize, wtime_ns; /*   that size and the time of that write */
	uint64_t list_gen;	 /* collection: data_gen when the oldest listing began */
	int listings;		 /* collection: listings from offset 0 under way (0) */
};

struct fs_node {
	uint64_t nodeid;	  /* the kernel's handle */
	uint64_t nlookup;	  /* kernel references (lookup count) */
	struct store_db *db;	  /* Borrowed: lives with the store */
	int64_t coll;		  /* collection id (entries, .insert, collections) */
	int64_t id;		  /* entry id, collection id, or /.docfs file number */
	uint64_t ino;		  /* st_ino */
	uint64_t data_gen;	  /* bumped on every change of the content */
	uint64_t kernel_gen;	  /* data_gen when the kernel last cached the content (a
				   * collection: its listing) */
	char *pending_name;	  /* Owned: FSN_PENDING's file name, FSN_QUERY's query,
				   * FSN_INDEX's index name */
	char *name;		  /* Owned: FSN_ENTRY's last known name in its directory */
	uint64_t result_size;	  /* FSN_QUERY, FSN_EXPLAIN, FSN_INDEX: size of the last
				   * result opened */
	struct fs_attr attr;	  /* FSN_ENTRY: attributes as last read from the store */
	uint64_t attr_gen;	  /* data_gen when attr was read (0: none) */
	struct fs_node_more *more; /* Owned: the state few nodes need, or NULL (inode.c) */
	struct fs_node *next_id;  /* hash chain by nodeid */
	struct fs_node *next_ino; /* hash chain by st_ino */
	int kind;		  /* enum fs_node_kind */
	bool orphan;		  /* FSN_DEAD: attr holds its attributes (fs_node_orphan) */
	bool in_ino_table;	  /* reachable by st_ino (the current node for it) */
};

#define FS_INO_ROOT 1
#define FS_INO_DOCFS 2
#define FS_INO_DOCFS_FILE(n) (3 + (uint64_t)(n))
#define FS_INO_SNAPS 10
#define FS_INO_REPLSET 12			/* /.replset (a replica set member's mount) */
#define FS_INO_REPLSET_FILE(n) (13 + (uint64_t)(n)) /* its files */
#define FS_INO_SNAP_BASE (0xfffeULL << 48) /* snapshot objects: a hash of commit and path */
static inline uint64_t fs_ino_db(const struct store_db *db)
{
	return (uint64_t)store_db_number(db) << 40;
}
static inline uint64_t fs_ino_entry(const struct store_db *db, int64_t id)
{
	return fs_ino_db(db) | (uint64_t)id;
}
static inline uint64_t fs_ino_special(const struct store_db *db, int64_t coll, unsigned k)
{
	return fs_ino_db(db) | (1ULL << 39) | ((uint64_t)coll << 4) | k;
}

void fs_nodes_init(void);
void fs_nodes_release(void);
/* The node for nodeid (Borrowed: valid until its last forget), or NULL. */
struct fs_node *fs_node_get(uint64_t nodeid);
/* Nodes the table holds (the root aside). */
size_t fs_node_count(void);
/* Finds the node of st_ino ino or makes one with these fields; adds one kernel reference.
 * Returns Borrowed, valid until the kernel forgets it. */
struct fs_node *fs_node_ref(int kind, struct store_db *db, int64_t coll, int64_t id, uint64_t ino,
			    const char *name);
void fs_node_set_name(struct fs_node *node, const char *name);
/* Collects the (nodeid, name) pairs of the entry nodes of collection coll into *ids and
 * *names (Owned by the caller: free each name and both arrays). Returns how many. */
size_t fs_nodes_of_coll(struct store_db *db, int64_t coll, uint64_t **ids, char ***names);
/* Makes a node for a created document that has no store row yet (one reference), or with
 * kind FSN_QUERY for a query path. Its st_ino is private to the node. */
struct fs_node *fs_node_pending(int kind, struct store_db *db, int64_t coll, const char *name);
/* The node of kind (FSN_QUERY, FSN_EXPLAIN, FSN_INDEX) named name in collection coll (one
 * more reference): the same node while the kernel holds it, so stat after open shows the
 * size of the last result; its st_ino is a hash of kind, coll and name (stable). */
struct fs_node *fs_node_query(int kind, struct store_db *db, int64_t coll, const char *name);
/* The node of kind whose identity is the string key (kept in pending_name) and whose st_ino
 * is ino: the same node for the same key while the kernel holds it. */
struct fs_node *fs_node_keyed(int kind, struct store_db *db, int64_t coll, const char *key,
			      uint64_t ino);
void fs_node_forget(uint64_t nodeid, uint64_t n);
/* Re-points node at another store object (after a rename or a first write). */
void fs_node_repoint(struct fs_node *node, int kind, int64_t coll, int64_t id, uint64_t ino);
/* fs_node_repoint to the file of kind (FSN_INDEX...) named name, as fs_node_query makes it:
 * a scratch file renamed over an index file (rsync's temporary names) is that file now. */
void fs_node_repoint_query(struct fs_node *node, int kind, int64_t coll, const char *name);
/* A pending document's attributes (node.pend), read and changed under the nodes' lock. */
struct store_attrs fs_node_pend_get(struct fs_node *node);
int64_t fs_node_pend_atime(struct fs_node *node); /* -1: none set */
/* atime_ns: the atime its first commit sets (-1: none, it is the mtime). */
void fs_node_pend_set(struct fs_node *node, int mask, const struct store_attrs *a,
		      int64_t atime_ns);
/* The nodeid currently standing for st_ino (0 when the kernel holds none); bumps data_gen. */
uint64_t fs_node_touch_ino(uint64_t ino);
/* The nodeid of db's directory while its node stands for db (0 when the kernel holds none,
 * or a lookup re-pointed it at another database of that name, of the same number). */
uint64_t fs_node_of_db(struct store_db *db);
void fs_node_bump(struct fs_node *node);
/* The node's cached attributes, when they are still current (no change since): true and *st
 * filled, else false. */
bool fs_node_attr_get(struct fs_node *node, struct stat *st);
/* Caches st as the node's attributes for its current data_gen. */
void fs_node_attr_put(struct fs_node *node, const struct stat *st, uint64_t gen);
uint64_t fs_node_gen(struct fs_node *node);
/* An open file (owner, never dereferenced) wrote or truncated node's content to size bytes,
 * not yet committed: stat shows that size and time until fs_node_written_clear of the same
 * owner (its commit, or its release). */
void fs_node_written_set(struct fs_node *node, const void *owner, int64_t size);
void fs_node_written_clear(struct fs_node *node, const void *owner);
/* Applies what an open file wrote (fs_node_written_set) to st: its size, mtime and ctime. */
void fs_node_written_apply(struct fs_node *node, struct stat *st);
/* Makes node FSN_DEAD, unlinked while the kernel holds it, with the attributes st (st_nlink
 * set to 0 here) that stat shows until the kernel forgets it. */
void fs_node_orphan(struct fs_node *node, const struct stat *st);
/* The attributes of an orphaned node (fs_node_orphan): true and *st filled, else false. */
bool fs_node_orphan_get(struct fs_node *node, struct stat *st);
/* Changes an orphaned node's attributes (mask of STORE_SET_*, as store_entry_setattr, and
 * atime_ns unless -1). */
void fs_node_orphan_set(struct fs_node *node, int mask, const struct store_attrs *a,
			int64_t atime_ns);
/* Records that the kernel caches node's content (a collection: its listing) as of gen, a
 * value fs_node_gen returned before the content was read. */
void fs_node_cache_set(struct fs_node *node, uint64_t gen);
/* Whether nothing changed since what the kernel caches was read (fs_node_cache_set). */
bool fs_node_cache_ok(struct fs_node *node);
/* Whether the kernel caches node's content of gen and gen is still current. */
bool fs_node_cache_is(struct fs_node *node, uint64_t gen);
/* A listing of a collection from offset 0 begins (before its first read of the store) and
 * ends; one that reached its end makes kernel_gen the data_gen at the beginning of the
 * oldest listing that overlapped it, since any of them may have filled the kernel's cache
 * (fsops.c note 8). */
void fs_node_list_begin(struct fs_node *node);
void fs_node_list_end(struct fs_node *node, bool complete);

/* The notifier thread (notify.c): the only sender of kernel cache invalidations. It polls
 * the change feed of every watched database every period_ms and drains a queue of
 * invalidations asked for by request handlers (which must never send them themselves). */
struct fuse_session;
int fs_notify_start(struct fuse_session *se, int period_ms, struct dfs_err *err);
void fs_notify_stop(void);
void fs_notify_watch(struct store_db *db);
/* Returns once the notifier has sent the invalidations of every change committed to db so
 * far (at most 2 s): a write path's result is then what the next read of a file shows. It
 * waits for the notifier thread, so a handler may call it only for changes to other inodes
 * than its own. */
void fs_notify_sync(struct store_db *db);
void fs_notify_inode(uint64_t nodeid);
void fs_notify_entry(uint64_t parent, const char *name);
/* fs_notify_entry, and returns once the invalidation was sent (at most 2 s). The kernel must
 * not hold parent's lock while the caller's request is under way (true of flush). */
void fs_notify_entry_wait(uint64_t parent, const char *name);
/* Stores data as the whole content of file nodeid in the kernel's page cache (from offset
 * 0). Not an invalidation: a handler may call it for the file it is opening, before the
 * reply, but only on a worker: it waits for pages that a READ or WRITE in flight holds
 * (fsops.c note 3). Returns 0 or -errno (-ENOENT when the kernel holds no such inode). */
int fs_notify_store(uint64_t nodeid, const char *data, size_t len);

/* fsops.c: the request handlers and the state they share. */
/* Frees the handles of files and directories still open when the connection ended (the
 * kernel sends no release for them: a SIGTERM or an abort with files open) and returns how
 * many there were. Only once no request can run any more. */
size_t fs_handles_release(void);
struct fuse_lowlevel_ops;
extern const struct fuse_lowlevel_ops fs_ops;
extern struct store *fs_store; /* Borrowed by fsops.c: the mounted store */
/* Whether the reader thread of the request loop may serve this request itself (mount.c
 * note 1): true only for handlers that never wait on anything a FUSE request or the
 * notifier must first do, and never for long. opcode and nodeid are the request header's;
 * fh and open_flags those of an OPEN, READ or RELEASE (else 0). */
bool fs_op_quick(uint32_t opcode, uint64_t nodeid, uint64_t fh, uint32_t open_flags);
/* pthread_create with every signal blocked in the new thread: signals go to the request
 * loop's reader, whose read() they interrupt (mount.c). The thread runs with the daemon's
 * CPU affinity and normal scheduling, even when a ring thread (pinned, SCHED_IDLE) starts
 * it. Returns pthread_create's result. */
int fs_thread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
/* mount.c: serves one request read from /dev/fuse (ent NULL) or taken from ring entry ent
 * (ring.c): quick ones on this thread, others through the worker pool. mem (size bytes, /dev/fuse
 * layout) is borrowed for the call. */
struct fs_ring_ent;
void fs_mount_dispatch(const char *mem, size_t size, struct fs_ring_ent *ent);
/* Whether the calling thread is a worker of the pool (not the /dev/fuse reader or a ring
 * thread, which every request needs in order to arrive). */
bool fs_mount_on_worker(void);

/* ring.c: FUSE over io_uring (-o uring). Not thread-safe before fs_ring_start; the
 * status is. */
/* Asks for the ring on the FUSE device fd, whose FUSE_INIT reply and ring replies
 * writev() catches. */
void fs_ring_want(int fd);
/* Called from the init handler: the reply this thread writes next is FUSE_INIT's. */
void fs_ring_init_reply(void);
/* Whether the FUSE_INIT reply asked for the ring and fs_ring_start has not tried yet. */
bool fs_ring_granted(void);
/* Starts a pinned thread and ring per CPU, each registering its entries of payload_sz
 * bytes. On an error the mount goes on through /dev/fuse. */
int fs_ring_start(size_t payload_sz, struct dfs_err *err);
/* The reply written next on this thread goes to ent (NULL: to /dev/fuse). */
void fs_ring_bind(struct fs_ring_ent *ent);
/* Stops the ring threads (no new requests); fs_ring_free, once no worker serves a ring
 * request any more, frees the rings. */
void fs_ring_stop(void);
void fs_ring_free(void);
/* One JSON line: the transport and how many requests the ring served. */
void fs_ring_status(struct dfs_buf *out);
/* Whether the /dev/fuse reader follows its callers' CPUs (mount.c note 3), and how many
 * times it moved. */
void fs_mount_reader_status(bool *follows, unsigned long long *moves);

/* ---- idle.c: threads serving at SCHED_IDLE next to their callers, and their watchdog -- */

/* One such thread (ring.c note 6, mount.c note 3). */
struct fs_idle_thread {
	int tid;		       /* its thread id */
	atomic_bool boosted;	       /* raised to normal priority by the watchdog */
	atomic_llong boost_until;      /* CLOCK_MONOTONIC ns: stays raised until then */
	atomic_ullong loops;	       /* turns of its loop */
	unsigned long long seen_loops; /* the watchdog's: loops at its last look */
};
/* Whether this process may take a thread out of SCHED_IDLE again (CAP_SYS_NICE or an
 * RLIMIT_NICE of 20; tried once): without that the watchdog could not raise a starved one. */
bool fs_idle_allowed(void);
/* The calling thread goes to SCHED_IDLE and is watched (the watchdog starts with the first). */
void fs_idle_begin(struct fs_idle_thread *t);
/* The calling thread (t's) runs at normal priority until a turn without more work. */
void fs_idle_raise(struct fs_idle_thread *t);
/* A turn of the thread's loop, before it waits for more work (more: it has some already):
 * counts, and goes back to SCHED_IDLE once a raise has run out. */
void fs_idle_turn(struct fs_idle_thread *t, bool more);
/* Not watched any more (the calling thread is t's, or t's thread has ended); normal: the
 * calling thread goes back to normal priority. */
void fs_idle_end(struct fs_idle_thread *t, bool normal);
/* Times a starved thread was raised. */
unsigned long long fs_idle_boosts(void);
/* Ends the watchdog (at unmount, once no thread is watched). */
void fs_idle_stop(void);

/* ---- curop.c: current operations, killOp, serverStatus, top ---------------------- */

/* What an operation is, as currentOp's op and top's columns name it. */
enum fs_op_kind {
	FS_OP_QUERY,
	FS_OP_GETMORE,
	FS_OP_COMMAND,
	FS_OP_INSERT,
	FS_OP_UPDATE,
	FS_OP_REMOVE
};

/*
 * One operation a request runs (a query, explain or aggregate open, a write path, a
 * document commit), registered while it runs so /.docfs/currentOp lists it and killOp can
 * stop it. Lives on the caller's stack between fs_curop_begin and fs_curop_end, on one
 * thread: the thread's store stop hook (store.h) is the operation's while it runs.
 */
struct fs_curop {
	int64_t opid;			  /* 1, 2, ... in this daemon's life */
	int kind;			  /* enum fs_op_kind */
	char db[DFS_MAX_NS_NAME + 1];	  /* the database name ("" for none) */
	char ns[2 * DFS_MAX_NS_NAME + 2]; /* "<db>.<coll>" */
	bson_t command;	    /* the command as MongoDB shows it (empty until described) */
	char plan[256];	    /* planSummary, "" until known */
	int64_t keys, docs; /* keysExamined, docsExamined */
	bool sorted;	    /* hasSortStage */
	int64_t nreturned, ninserted, nmatched, nmodified, ndeleted;
	int64_t reslen;		       /* responseLength: bytes of the result */
	int client;		       /* the caller's pid (0: unknown) */
	char client_addr[64];	       /* a wire client's address ("127.0.0.1:51234"), or "" */
	atomic_llong done, total;      /* an index build's progress (total 0: none) */
	int64_t start_ns, deadline_ns; /* CLOCK_MONOTONIC; deadline 0: none */
	atomic_bool killed;	       /* killOp asked: stop at the next check */
	struct fs_curop *prev, *next;  /* the registry's list (curop.c's lock) */
};

/* Starts op: registers it, and makes its kill and deadline this thread's stop hook. db may
 * be NULL; coll 0 for a database-wide operation (the ns is then "<db>"). */
void fs_curop_begin(struct fs_curop *op, int kind, struct store_db *db, int64_t coll, int client);
/* The same for a caller that knows the names (the wire protocol): db and coll may be NULL
 * or ""; no transaction is opened to find them. Then fs_curop_client names a network
 * client. */
void fs_curop_begin_ns(struct fs_curop *op, int kind, const char *db, const char *coll, int client);
/* Sets op's client address (currentOp's and system.profile's "client"). */
void fs_curop_client(struct fs_curop *op, const char *addr);
/* The thread's running operation, or NULL. */
struct fs_curop *fs_curop_current(void);
/* Sets the thread's operation's command (copied) and, when max_ms > 0, its deadline
 * (maxTimeMS, from its start). No-op without one. */
void fs_curop_describe(const bson_t *command, int64_t max_ms);
struct query_summary;
/* Adds what a cursor did (query_cursor_summary) and its results to the thread's op. */
void fs_curop_note(const struct query_summary *s, int64_t nreturned);
/* Sets the thread's op's planSummary from s as soon as the plan is chosen (currentOp). */
void fs_curop_plan(const struct query_summary *s);
/* Ends op with its code (0, or the failure's): unregisters it, clears the stop hook, and
 * counts it (opcounters, opLatencies, metrics, top) and hands it to the profiler. */
void fs_curop_end(struct fs_curop *op, int rc);
/* killOp: asks operation opid to stop. DFS_EINVAL when no such operation runs. */
int fs_curop_kill(int64_t opid, struct dfs_err *err);
/* Applies what was written to /.docfs/killOp: an opid, or {killOp: 1, op: N}. Like
 * MongoDB's killOp it only asks: the operation stops at its next check. */
int fs_killop_apply(const char *text, size_t len, struct dfs_err *err);
/* Counters outside operations: n documents written through their files or .insert (insert
 * or update), one
 * read of a result past its start (getmore), handles opened/closed, request bytes. */
void fs_curop_count_doc(struct store_db *db, int64_t coll, bool inserted, int64_t n,
			int64_t micros);
void fs_curop_count_getmore(void);
void fs_curop_handle(bool opened);
void fs_net_count(size_t in, size_t out);
/* A collection's opendir: kept (the kernel may keep its cached listing) or refused. */
void fs_curop_count_listing(bool kept);
/* The /.docfs files: currentOp ({inprog: [...], ok}), serverStatus, top (pretty JSON). */
void fs_curop_render_current(struct dfs_buf *out);
void fs_curop_render_status(struct dfs_buf *out);
void fs_curop_render_top(struct dfs_buf *out);
/* The same documents appended to out (initialised): the wire protocol's currentOp,
 * serverStatus and top. */
void fs_curop_current_doc(bson_t *out);
void fs_curop_status_doc(bson_t *out);
void fs_curop_top_doc(bson_t *out);
/* Starts the uptime clock (at mount). */
void fs_curop_start(void);

/* ---- stattop.c: docfs stat and docfs top ------------------------------------------- */

#define FS_STAT_NCOLS 14
extern const char *const fs_stat_keys[FS_STAT_NCOLS]; /* mongostat's column keys */
struct fs_stat_row {
	char cell[FS_STAT_NCOLS][48]; /* each column's text */
};
/* A grid of rows: column widths only grow; a header every 10 rows unless noheaders. */
struct fs_stat_grid {
	int width[FS_STAT_NCOLS];
	int rows;
	bool noheaders;
};
/* bytes with binary units and 3 significant digits (1.01G, 82.0M, 253M). */
void fs_stat_size(double bytes, char *out, size_t cap);
/* a rate with decimal units b/k/m/g and 3 significant digits (262b, 4.52k, 137k). */
void fs_stat_bits(double v, char *out, size_t cap);
/* mongostat's row from two serverStatus samples secs apart, at now_ms (the time column). */
void fs_stat_row(const bson_t *prev, const bson_t *cur, double secs, bool human, int64_t now_ms,
		 struct fs_stat_row *row);
void fs_stat_grid_print(struct fs_stat_grid *g, const struct fs_stat_row *r, struct dfs_buf *out);
/* --json: {"<host>":{"<key>":"<value>",...}} and a newline. */
void fs_stat_json(const char *host, const struct fs_stat_row *r, struct dfs_buf *out);
/* mongotop's block (or --json line) from two top samples; prev NULL: no baseline. */
int fs_top_block(const bson_t *prev, const bson_t *cur, int64_t now_ms, bool json,
		 struct dfs_buf *out);
/* docfs stat / docfs top (argv[0] is the command's name). */
int fs_stat_main(int argc, char **argv);
int fs_top_main(int argc, char **argv);

/* ---- profile.c: the profiler ------------------------------------------------------- */

/* What <db>/.profile shows: {was?, level, slowms, sampleRate, filter?, note?} pretty. */
void fs_profile_render(const char *db, struct dfs_buf *out);
/* Applies a write to <db>/.profile: a level (0, 1, 2), or {level|profile, slowms,
 * sampleRate, filter|"unset"}. Errors: DFS_EINVAL, nothing changed. */
int fs_profile_apply(const char *db, const char *text, size_t len, struct dfs_err *err);
/* The same as documents: the settings appended to out (initialised), and a settings
 * document applied (the wire protocol's profile command). */
void fs_profile_doc(const char *db, bson_t *out);
int fs_profile_apply_doc(const char *db, const bson_t *doc, struct dfs_err *err);
/* The profiler's and the slow-query log's look at an operation that ended (curop.c). */
void fs_profile_op(const struct fs_curop *op, int rc, int64_t micros);

/* Closes the snapshot repository /.snapshots reads (at unmount). */
void fs_snapshots_close(void);

/* Mounts and serves until unmounted. Returns once the mount is live unless foreground. */
int fs_mount_run(const struct fs_mount_opts *o, struct dfs_err *err);

#endif
