/*
 * fsops.c - the FUSE request handlers (fuse_lowlevel): the namespace of DESIGN.md section
 * 2 over the store. Each handler does its work, then replies exactly once; errors found
 * below come back as dfs_err and become errno here (through fs_errno) with the message
 * recorded for /.docfs/errors. It never sends kernel invalidations itself: it queues them
 * for the notifier thread.
 *
 * Design notes
 * 1. Open files hold the whole content in a buffer: documents are rendered at open (a
 *    stable snapshot for that open file), writes change the buffer, and flush/fsync
 *    validate and commit it. Invalid content never reaches the store.
 * 2. A created "<stem>.json" is a pending node until its first successful flush: there is
 *    no half-written document in the store. Lookups of its name find the pending node.
 *    A failed flush removes the name before close() returns, so a failed cp leaves nothing.
 * 3. keep_cache is granted at open only when the content did not change since the kernel
 *    last cached it (node data_gen == kernel_gen), so a second grep -r reads page cache.
 *    A cold read-only open of a document (up to PUSH_MAX) loads it and stores it in the
 *    page cache before the reply (fs_notify_store), so no READ follows: one round trip
 *    per file instead of two, and the kernel keeps the file's atime (a daemon-served read
 *    invalidates it, and the next fstat would ask for it). If the document changed while
 *    it was stored, the open does not keep the cache and the kernel drops it. The store
 *    waits for the file's locked pages, which a READ or WRITE in flight holds until it is
 *    answered, so it runs only on a worker (cold opens are not quick) and on at most
 *    PUSH_WORKERS of them at once: the reader and ring threads, and other workers, stay
 *    free to answer that request. Any other open reads its content at open (a write) or
 *    at the first read, and records the generation it read before reading. An open file
 *    keeps what it read, but the page cache is the node's, shared by all its files: a READ
 *    answered from content older than the node's (the file was open across a change, and
 *    the pages were dropped) puts old pages back, so it also marks the cache old and has
 *    the notifier drop those pages once they are in (read_old). A file whose entry still
 *    has the ctime and size it loaded is current again instead (still_current): the
 *    notifier bumps the generation again when it passes over this process's own commits.
 *    Commits of one node bump in commit order (handle_commit), so of two files that
 *    committed, the one that committed first does not look current.
 * 4. Attribute and entry timeouts are long: every change is invalidated precisely by the
 *    notifier (for this process's writes and for other processes' through the change feed).
 *    Every listing is readdirplus (not only its first batch): its attributes restore those a
 *    daemon-served read invalidated (a file opened for writing), and a cold grep -r sends no
 *    LOOKUP per file. Each entry
 *    with attributes costs a node here and an inode in the kernel, so once the node table
 *    holds fs_dirplus_nodes nodes, documents are listed by name only (nodeid 0: the kernel
 *    looks them up when used), and a plain ls of a huge collection stays bounded.
 * 5. Files that are computed when opened (query and explain results, index files) use
 *    direct_io and zero timeouts: the kernel never serves them from a cache, and their
 *    st_size is exact for an open file (that of the last open otherwise).
 * 6. An index file is created like a document: a created ".indexes/<name>" is a pending
 *    node (FSN_IXPENDING) whose bytes are the spec; its flush creates and builds the index
 *    in one write transaction, or fails and leaves nothing behind.
 * 7. The request loop's reader thread serves some requests itself (mount.c note 1):
 *    fs_op_quick says which. Those handlers take only short locks and read transactions
 *    (which never wait on a writer in WAL mode), and never wait on the notifier: a
 *    document's getattr, its read-only open, read and release, forgets. Anything that may
 *    write, run a query, build an index or wait for an invalidation goes to a worker.
 * 8. The kernel caches a collection's listing (cache_readdir) and keeps it at the next
 *    opendir while the collection node's data_gen equals its kernel_gen. A listing from
 *    offset 0 may fill the cache: when one reaches its end, kernel_gen becomes the data_gen
 *    at the beginning of the oldest listing that overlapped it (fs_node_list_begin/_end;
 *    an FH_DIR handle says whether its listing is under way). Every change of the
 *    collection bumps data_gen before its invalidation is sent: the notifier for a change
 *    in the feed (which also drops the cached listing of open directories), the flush of
 *    .insert and the first commit of a created document themselves, and the kernel resets
 *    the cache on its own for creates, unlinks and renames through the mount. So a listing
 *    that read an older state is never kept.
 * 9. POSIX files (issue 28). What an open file wrote and has not committed is what stat
 *    shows (fs_node_written_set: its size and time, until its commit or release), so a
 *    file read back on the descriptor that wrote it is not cut at the stored size. A file
 *    unlinked or renamed over while open keeps working for its open files until they
 *    close: orphan_prepare loads the content of every open file of it before the store
 *    drops it, and the node becomes FSN_DEAD with its last attributes and st_nlink 0
 *    (orphan_keep); reads, writes, truncates, mmap and fchmod then work on those buffers
 *    and commit nowhere. O_TRUNC empties a scratch file at the open; a document opened
 *    with O_TRUNC and closed unwritten becomes the empty document, as a created one does.
 *    Creating an entry touches the collection's mtime and ctime, as unlink and rename do.
 * 10. Scratch directories, fifos, sockets and hard links (issue 28): names in a collection
 *    that are not documents may be any of these (store/doc.c note 6). A scratch directory
 *    is an FSN_SDIR node whose entries have the store names "<its id>/<name>" (store_name),
 *    so everything under it is scratch, whatever its name, and never seen by queries. At
 *    the top of a collection a document's name stays a document's: no directory, fifo,
 *    socket or link takes it. Entries move between a collection and its directories with
 *    rename(2)'s rules (rename_dir_check); a directory stays in its collection. A hard link
 *    is a name of the same node (one st_ino); unlink and rename remove one name, and the
 *    node is orphaned (note 9) only with its last. Documents refuse link(): one _id, one
 *    name. Creating or removing an entry touches its directory's mtime and ctime.
 * 11. Backups (issue 28; README "Backups"). tar x meets an existing name with EEXIST and
 *    then unlinks it, and rsync writes ".<name>.XXXXXX" and renames it over the name. So
 *    what every collection has and an archive need not hold is not listed (.insert, .bulk,
 *    .stats, .changes, .indexes/_id_, and .options while the collection has no options: it
 *    is then absent, and created by a write). Fixed entries take the mode and owner they
 *    show and any time (fixed_setattr). In .indexes/, a name starting with '.' is a
 *    temporary file: a scratch entry named IXTEMP_PREFIX "<name>" in the store, listed
 *    there and never an index; renamed to an index name, its bytes make that index
 *    (rename_to_fixed, which also takes a scratch file renamed over .options). A capped
 *    collection's .options, unlinked, is hidden until written again (opts_hide): tar x
 *    over the collection then writes the same options back; the cap never goes.
 * 12. rm -r of a collection (issue 28). rm removes what a directory lists, then rmdirs it,
 *    then the collection. So rmdir of a collection's fixed directory succeeds when it
 *    lists nothing (query/ and the other computed ones always, .indexes/ once only _id_
 *    is left, .queries/ once no query is saved) and the directory stays: it is part of
 *    the collection and goes with it. Then the collection, holding no documents and no
 *    files, is dropped by its own rmdir.
 */
#define FUSE_USE_VERSION 34
#include "fs_int.h"
#include "replset/replset.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h> /* the opcodes fs_op_quick sorts */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define LONG_TIMEOUT 3600.0
#define MAX_TEXT (64u * 1024 * 1024)	 /* bytes of a document file being written */
#define MAX_SCRATCH (256u * 1024 * 1024) /* bytes of a scratch file */
#define PUSH_MAX (1024 * 1024)		 /* largest document stored at open (note 3) */
#define PUSH_WORKERS 16			 /* workers storing at once, at most (note 3) */

static atomic_int pushing; /* workers in open_push's store */

struct store *fs_store;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

enum docfs_file {
	DF_ERRORS,
	DF_VERSION,
	DF_STATUS,
	DF_CURRENTOP,
	DF_KILLOP,
	DF_SERVERSTATUS,
	DF_TOP,
	DF__COUNT,
	/* /.replset/ (a replica set member's mount only): its node is an FSN_DOCFS_DIR with
	 * id 1, its files FSN_DOCFS_FILEs with these ids */
	DF_RS_STATUS = DF__COUNT,
	DF_RS_CONF,
	DF_RS_HELLO,
	DF__ALL
};
static const char *const replset_files[DF__ALL - DF__COUNT] = {"status", "conf", "hello"};
static const char *const docfs_files[DF__COUNT] = {"errors", "version",	     "status", "currentOp",
						   "killOp", "serverStatus", "top"};

enum fh_kind {
	FH_ENTRY = 1, /* a document or scratch file: buf is its content */
	FH_INSERT,    /* .insert: an inserter */
	FH_TEXT,      /* read-only text rendered at open (/.docfs, snapshots, index files) */
	FH_RESULT,    /* a query or explain result */
	FH_IXSPEC,    /* an index file open for writing: buf is the spec (note 6) */
	FH_WRITE,     /* a write path: buf is the request, wres its result */
	FH_DIR,	      /* an open collection directory (note 8) */
	FH_CHANGES,   /* a .changes file: plain (offsets) or a stream (chg) */
};

#define SAVED_PREFIX FS_SAVED_PREFIX /* store names of saved queries: never listed as such */
#define IXTEMP_PREFIX ".indexes/"     /* store names of temporary files in .indexes/ (note 11) */

/* The fixed entries of every collection directory, listed before its documents. */
static const struct {
	const char *name;
	int kind;   /* enum fs_node_kind */
	unsigned k; /* st_ino discriminator (fs_ino_special): 1..15, each once */
} coll_fixed[] = {
	{".insert", FSN_INSERT, 1},	/* bulk insert */
	{"query", FSN_QDIR, 2},		/* finds */
	{"explain", FSN_XDIR, 4},	/* their plans */
	{".queries", FSN_SAVED_DIR, 3}, /* saved finds */
	{".indexes", FSN_IXDIR, 5},	/* index files */
	{"aggregate", FSN_ADIR, 13},	/* pipelines */
	{"update", FSN_UDIR, 10},	/* update paths */
	{"delete", FSN_DDIR, 11},	/* delete paths */
	{".bulk", FSN_WRITE, 12},	/* bulk writes */
	{".options", FSN_OPTIONS, 9},	/* collection options (options.c) */
	{".changes", FSN_CHANGES, 14},	/* change stream (changes.c) */
	{".stats", FSN_STATS, 15},	/* collStats (stats.c) */
};
#define NFIXED (sizeof(coll_fixed) / sizeof(coll_fixed[0]))

static int fixed_index(const char *name)
{
	for (size_t i = 0; i < NFIXED; i++)
		if (strcmp(name, coll_fixed[i].name) == 0)
			return (int)i;
	return -1;
}

/* note 11: is name, in .indexes/, a temporary file (rsync's ".<name>.XXXXXX", a hidden
 * name) rather than an index? Editors' "<name>~" backups stay refused there. */
static bool ix_temp_name(const char *name)
{
	size_t n = strlen(name);

	return n && n <= 255 && name[0] == '.' && strcmp(name, ".") && strcmp(name, "..");
}

struct fs_handle {
	int kind;		/* enum fh_kind */
	struct fs_node *node;	/* Borrowed: the kernel holds it while the file is open */
	int client;		/* the pid that opened it (currentOp's client) */
	pthread_mutex_t lock;	/* guards the fields below */
	struct dfs_buf buf;	/* the content (FH_ENTRY, FH_TEXT, FH_IXSPEC) */
	bool dirty;		/* buf differs from the store */
	bool written;		/* written (or truncated) since opened or last committed */
	bool reported;		/* the inserter's error has been logged */
	bool is_doc;		/* FH_ENTRY holding a document (else a scratch file) */
	bool loaded;		/* FH_ENTRY: buf holds the content (read-only opens load lazily) */
	bool rdonly;		/* FH_ENTRY opened read-only: lock held only briefly (note 7) */
	uint64_t gen;		/* FH_ENTRY: the node's data_gen when buf was loaded (note 3) */
	int64_t ver_ctime;	/* FH_ENTRY: the ctime and size of the entry buf was loaded */
	int64_t ver_size;	/*   from (ver_ctime 0: not known) */
	bool direct;		/* FH_ENTRY opened direct_io: READs bypass the page cache */
	struct fs_inserter ins; /* FH_INSERT */
	bool ins_init;		/* ins is initialised */
	int64_t ins_shown;	/* FH_INSERT: ins.ndocs when the collection was last bumped */
	struct rs_wc wc;	/* FH_INSERT: the write concern its close waits for */
	int64_t ins_waited;	/* FH_INSERT: ins.ndocs when it was last waited for */
	uint64_t ins_mark;	/* FH_INSERT: rs_wc_mark before what it waits for next */
	struct fs_result res;	/* FH_RESULT: the snapshot of a query's output */
	struct dfs_buf wres;	/* FH_WRITE: the result of the request in buf */
	bool applied;		/* FH_WRITE: the request has run; wres holds its result */
	struct fs_changes *chg; /* FH_CHANGES: Owned, the stream (NULL: a plain file) */
	struct fs_tail *tail;	/*   or Owned: a tailable read's stream (tail.c) */
	int64_t chg_off;	/*   offset of buf's first byte in the stream */
	bool chg_end;		/*   the stream has ended */
	int wrc;		/* FH_WRITE: how it ended (0 or a dfs code) */
	struct dfs_err werr;	/* FH_WRITE: its error */
	off_t wend;		/* FH_WRITE: file offset where the request ended */
	off_t wbase;		/* FH_WRITE: the offset the result is read from (write_read) */
	bool wbased;		/*   decided at the first read */
	bool tried;		/* FH_ENTRY: a write reached this handle (fsop_release) */
	bool trunc;		/* FH_ENTRY: a document opened with O_TRUNC (fsop_release) */
	size_t seq_len;		/* FH_ENTRY: bytes written in order from 0 (SIZE_MAX: not) */
	size_t seq_checked;	/*   their length at the last early check (seq_prefix_bad) */
	int scan_depth;		/*   brackets open at seq_len (seq_closes), -1: not begun */
	char scan_quote;	/*   the quote of the string seq_len is in, or 0 */
	bool scan_esc;		/*   the byte at seq_len is escaped */
	char logged[256];	/* the message the last failed write logged: a close failing
				 * with the same one does not log it again */
	bool listing;		/* FH_DIR: a listing from offset 0 began, not yet ended */
	bool saved;		/* FH_ENTRY: a saved query (.queries/<name>) */
	bool created;		/* FH_ENTRY: made empty by this handle's create */
	bool has_cred;		/* cred is who opened it (not root): what it reads is */
	struct store_cred cred; /*   filtered by the documents cred may read (note 9) */
	struct fs_handle *prev, *next; /* the list of live handles (handles_lock) */
};

/* ---- pending documents (note 2) ---------------------------------------------------- */

/* Room for a pending document's name: a file name (NAME_MAX) and its NUL. */
#define FS_PENDING_NAME_CAP 256

static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fs_node **pending; /* Owned array (the nodes Borrowed), grows as needed */
static size_t npending, cappending;

static void pending_add(struct fs_node *n)
{
	pthread_mutex_lock(&pending_lock);
	if (npending == cappending) {
		cappending = cappending ? cappending * 2 : 64;
		pending = realloc(pending, cappending * sizeof(*pending));
		if (!pending)
			abort();
	}
	pending[npending++] = n;
	pthread_mutex_unlock(&pending_lock);
}

static void pending_del(struct fs_node *n)
{
	pthread_mutex_lock(&pending_lock);
	for (size_t i = 0; i < npending; i++) {
		if (pending[i] == n) {
			pending[i] = pending[--npending];
			break;
		}
	}
	pthread_mutex_unlock(&pending_lock);
}

/* Takes n out of the pending nodes if it is still one of kind: true, with its name copied to
 * name (cap bytes; may be NULL). Checked and copied under pending_lock, because a commit on
 * another descriptor of the same file turns the node into a document (pending_del, then
 * fs_node_repoint frees pending_name) at any moment. */
static bool pending_drop(struct fs_node *n, int kind, char *name, size_t cap)
{
	bool found = false;

	pthread_mutex_lock(&pending_lock);
	for (size_t i = 0; i < npending; i++) {
		if (pending[i] == n && n->kind == kind) {
			if (name)
				snprintf(name, cap, "%s", n->pending_name);
			pending[i] = pending[--npending];
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&pending_lock);
	return found;
}

/* A pending node of kind (FSN_PENDING, FSN_IXPENDING) named name in coll, with one more
 * kernel reference, or NULL. */
static struct fs_node *pending_find(int kind, struct store_db *db, int64_t coll, const char *name)
{
	struct fs_node *found = NULL;

	pthread_mutex_lock(&pending_lock);
	for (size_t i = 0; i < npending; i++) {
		struct fs_node *n = pending[i];

		if (n && n->db == db && n->coll == coll && n->kind == kind &&
		    strcmp(n->pending_name, name) == 0) {
			found = fs_node_ref(kind, db, coll, 0, n->ino, NULL);
			break;
		}
	}
	pthread_mutex_unlock(&pending_lock);
	return found;
}

/* ---- replies ----------------------------------------------------------------------- */

/* Replies with the errno of err, recording its message (what says which file). */
static void reply_dfs(fuse_req_t req, const struct dfs_err *err, const char *what)
{
	int e = fs_errno(err->code);

	if (err->code != DFS_ENOENT)
		fs_errlog_add("%s: %s", what, err->msg[0] ? err->msg : dfs_code_name(err->code));
	fuse_reply_err(req, e ? e : EIO);
}

static void reply_msg(fuse_req_t req, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void reply_msg(fuse_req_t req, int code, const char *fmt, ...)
{
	struct dfs_err err = {0};
	va_list ap;

	err.code = code;
	va_start(ap, fmt);
	vsnprintf(err.msg, sizeof(err.msg), fmt, ap);
	va_end(ap);
	fs_errlog_add("%s", err.msg);
	fuse_reply_err(req, fs_errno(code));
}

static void ts_from_ns(struct timespec *ts, int64_t ns)
{
	ts->tv_sec = (time_t)(ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
}

static void dir_attr(struct stat *st, uint64_t ino, uint32_t mode, uint32_t uid, uint32_t gid,
		     int64_t mtime_ns, int64_t ctime_ns)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = S_IFDIR | (mode & 07777);
	st->st_nlink = 2;
	st->st_uid = uid;
	st->st_gid = gid;
	st->st_size = 4096;
	st->st_blocks = 8;
	st->st_blksize = 4096;
	ts_from_ns(&st->st_mtim, mtime_ns);
	ts_from_ns(&st->st_ctim, ctime_ns);
	st->st_atim = st->st_mtim;
}

static void entry_attr(struct stat *st, uint64_t ino, const struct store_entry *e)
{
	static const mode_t types[] = {
		[STORE_KIND_DOC] = S_IFREG,	[STORE_KIND_FILE] = S_IFREG,
		[STORE_KIND_SYMLINK] = S_IFLNK, [STORE_KIND_DIR] = S_IFDIR,
		[STORE_KIND_FIFO] = S_IFIFO,	[STORE_KIND_SOCK] = S_IFSOCK,
		[STORE_KIND_CHR] = S_IFCHR,	[STORE_KIND_BLK] = S_IFBLK};

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = (e->kind >= 1 && e->kind <= STORE_KIND_BLK ? types[e->kind] : S_IFREG) |
		      (e->mode & 07777);
	st->st_rdev = (dev_t)e->rdev;
	st->st_nlink = e->kind == STORE_KIND_DIR ? 2 + e->subdirs : e->nlink ? e->nlink : 1;
	st->st_uid = e->uid;
	st->st_gid = e->gid;
	st->st_size = e->kind == STORE_KIND_DIR ? 4096 : e->size;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_blksize = 4096;
	ts_from_ns(&st->st_mtim, e->mtime_ns);
	ts_from_ns(&st->st_ctim, e->ctime_ns);
	ts_from_ns(&st->st_atim, e->atime_ns);
}

static void file_attr(struct stat *st, uint64_t ino, uint32_t mode, size_t size, int64_t mtime)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = S_IFREG | mode;
	st->st_nlink = 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_size = (off_t)size;
	st->st_blksize = 4096;
	ts_from_ns(&st->st_mtim, mtime);
	st->st_ctim = st->st_atim = st->st_mtim;
}

static void docfs_file_render(int which, struct dfs_buf *out)
{
	if (which == DF_ERRORS)
		fs_errlog_render(out);
	else if (which == DF_STATUS)
		fs_ring_status(out);
	else if (which == DF_CURRENTOP)
		fs_curop_render_current(out);
	else if (which == DF_SERVERSTATUS)
		fs_curop_render_status(out);
	else if (which == DF_TOP)
		fs_curop_render_top(out);
	else if (which == DF_KILLOP)
		dfs_buf_puts(out, "");
	else if (which >= DF__COUNT && which < DF__ALL) {
		bson_t d = BSON_INITIALIZER;

		if (!rs_node_doc(replset_files[which - DF__COUNT], &d))
			store_codec_render(&d, STORE_RENDER_PRETTY, out, NULL);
		bson_destroy(&d);
	} else
		dfs_buf_puts(out, "docfs 0.1.0\n");
}

/* ---- /.snapshots ------------------------------------------------------------------- */

static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct store_git *snap_git; /* Owned: opened at first use, once the repository exists */

static bool is_snap(int kind)
{
	return kind == FSN_SNAP_ROOT || kind == FSN_SNAP_DIR || kind == FSN_SNAP_FILE;
}

/* The snapshot repository, or NULL (err: DFS_ENOENT while none has been made). */
static struct store_git *snap_repo(struct dfs_err *err)
{
	struct store_git *g;

	pthread_mutex_lock(&snap_lock);
	if (!snap_git)
		store_git_open(fs_store, NULL, &snap_git, err);
	g = snap_git;
	pthread_mutex_unlock(&snap_lock);
	return g;
}

void fs_snapshots_close(void)
{
	pthread_mutex_lock(&snap_lock);
	store_git_free(snap_git);
	snap_git = NULL;
	pthread_mutex_unlock(&snap_lock);
}

/* The node of "<commit>/<path>" (a tree or a blob of a snapshot), with one reference. */
static struct fs_node *snap_node(int kind, const char *key, int64_t size)
{
	uint64_t h = 1469598103934665603ULL;
	struct fs_node *n;

	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	n = fs_node_keyed(kind, NULL, 0, key, FS_INO_SNAP_BASE | (h & ((1ULL << 48) - 1)));
	n->result_size = (uint64_t)size;
	return n;
}

/* Splits a snapshot node's key into its commit and its path (Borrowed from the node). */
static const char *snap_path(const struct fs_node *n, char commit[41])
{
	memcpy(commit, n->pending_name, 40);
	commit[40] = '\0';
	return n->pending_name + 41;
}

static struct fs_node *snap_lookup(struct fs_node *p, const char *name, struct dfs_err *err)
{
	struct store_git *g = snap_repo(err);
	struct store_git_entry e;
	char commit[41], *key;
	const char *path;
	struct fs_node *n;

	if (!g)
		return NULL;
	if (p->kind == FSN_SNAP_ROOT) {
		if (store_git_resolve(g, name, commit, err))
			return NULL;
		if (asprintf(&key, "%s/", commit) < 0)
			abort();
		n = snap_node(FSN_SNAP_DIR, key, 0);
		free(key);
		return n;
	}
	path = snap_path(p, commit);
	if (asprintf(&key, "%s/%s%s%s", commit, path, *path ? "/" : "", name) < 0)
		abort();
	if (store_git_stat(g, commit, key + 41, &e, err)) {
		free(key);
		return NULL;
	}
	n = snap_node(e.is_dir ? FSN_SNAP_DIR : FSN_SNAP_FILE, key, e.size);
	free(key);
	/* A document keeps its mode and owner in the snapshot (the kernel enforces them,
	 * README "Permissions"); a snapshot made before they were kept shows its files as the
	 * mount owner's only. */
	fs_node_pend_set(n, STORE_SET_MODE | STORE_SET_UID | STORE_SET_GID,
			 &(struct store_attrs){.mode = e.has_attrs ? e.mode : 0400,
					       .uid = e.has_attrs ? e.uid : (uint32_t)getuid(),
					       .gid = e.has_attrs ? e.gid : (uint32_t)getgid()},
			 -1);
	return n;
}

/* Fills st for node; returns 0 or an error in err. timeout gets the attribute timeout. */
static int node_attr(struct fs_node *n, struct stat *st, double *timeout, struct dfs_err *err)
{
	struct store_txn *t;
	uint64_t gen;
	int rc = 0;

	*timeout = LONG_TIMEOUT;
	switch (n->kind) {
	case FSN_ROOT:
		dir_attr(st, FS_INO_ROOT, 0755, getuid(), getgid(), 0, 0);
		return 0;
	case FSN_DOCFS_DIR:
		dir_attr(st, n->id ? FS_INO_REPLSET : FS_INO_DOCFS, 0555, getuid(), getgid(), 0, 0);
		return 0;
	case FSN_DOCFS_FILE: {
		struct dfs_buf b;

		dfs_buf_init(&b);
		docfs_file_render((int)n->id, &b);
		file_attr(st, n->ino, n->id == DF_KILLOP ? 0644 : 0444, b.len, now_ns());
		dfs_buf_release(&b);
		*timeout = 0;
		return 0;
	}
	case FSN_DB:
		dir_attr(st, n->ino, 0755, getuid(), getgid(), store_db_ctime(n->db),
			 store_db_ctime(n->db));
		return 0;
	case FSN_PROFILE: {
		struct dfs_buf b;

		dfs_buf_init(&b);
		fs_profile_render(store_db_name(n->db), &b);
		file_attr(st, n->ino, 0644, b.len, store_db_ctime(n->db));
		dfs_buf_release(&b);
		*timeout = 0;
		return 0;
	}
	case FSN_STATS: {
		/* The size of the figures the last open read (they are read at each open); the
		 * time of the collection's last change, or the database's creation. */
		int64_t mtime = store_db_ctime(n->db);

		*timeout = 0;
		if (n->coll) {
			struct store_coll c;

			if ((rc = store_txn_begin(n->db, false, &t, err)))
				return rc;
			rc = store_coll_by_id(t, n->coll, &c, err);
			store_txn_abort(t);
			if (rc)
				return rc;
			mtime = c.mtime_ns;
		}
		file_attr(st, n->ino, 0444, n->result_size, mtime);
		return 0;
	}
	case FSN_CHANGES: {
		/* A plain one grows with its stream; a stream has no size (changes.c note 2). */
		int64_t size = 0;

		*timeout = 0;
		if (n->db && !n->pending_name && (rc = fs_changes_size(n->db, n->coll, &size, err)))
			return rc;
		file_attr(st, n->ino, 0444, (uint64_t)size,
			  n->db && !n->pending_name ? store_db_ctime(n->db) : now_ns());
		return 0;
	}
	case FSN_PENDING: {
		struct store_attrs a = fs_node_pend_get(n);

		file_attr(st, n->ino, a.mode, 0, a.mtime_ns ? a.mtime_ns : now_ns());
		st->st_uid = a.uid;
		st->st_gid = a.gid;
		fs_node_written_apply(n, st);
		if (fs_node_pend_atime(n) >= 0)
			ts_from_ns(&st->st_atim, fs_node_pend_atime(n));
		*timeout = 0;
		return 0;
	}
	case FSN_DEAD:
		/* Unlinked while open (note 9): what stat showed, with st_nlink 0. */
		if (!fs_node_orphan_get(n, st))
			file_attr(st, n->ino, 0644, 0, now_ns());
		fs_node_written_apply(n, st);
		*timeout = 0;
		return 0;
	case FSN_SNAP_ROOT:
		dir_attr(st, FS_INO_SNAPS, 0555, getuid(), getgid(), 0, 0);
		*timeout = 0;
		return 0;
	case FSN_SNAP_DIR:
		/* A snapshot never changes: what a commit holds is forever. */
		dir_attr(st, n->ino, 0555, getuid(), getgid(), 0, 0);
		return 0;
	case FSN_SNAP_FILE: {
		/* no write bit: a snapshot is read-only whatever mode it kept */
		struct store_attrs pa = fs_node_pend_get(n);

		file_attr(st, n->ino, pa.mode & 07555, n->result_size, 0);
		st->st_uid = pa.uid;
		st->st_gid = pa.gid;
		return 0;
	}
	default:
		break;
	}
	/* An entry's attributes come from the node while nothing changed it (every change,
	 * ours or another process's, bumps data_gen); a warm grep -r stats every file. */
	if (n->kind == FSN_ENTRY && fs_node_attr_get(n, st)) {
		fs_node_written_apply(n, st); /* note 9 */
		return 0;
	}
	gen = fs_node_gen(n);
	if ((rc = store_txn_begin(n->db, false, &t, err)))
		return rc;
	if (n->kind == FSN_COLL || n->kind == FSN_INSERT || n->kind == FSN_QDIR ||
	    n->kind == FSN_SAVED_DIR || n->kind == FSN_XDIR || n->kind == FSN_IXDIR ||
	    n->kind == FSN_UDIR || n->kind == FSN_DDIR || n->kind == FSN_ADIR ||
	    n->kind == FSN_WRITE || n->kind == FSN_QUERY || n->kind == FSN_EXPLAIN ||
	    n->kind == FSN_AGG || n->kind == FSN_IXPENDING || n->kind == FSN_OPTIONS ||
	    n->kind == FSN_QPART) {
		/* The fixed entries and computed files of a collection show its times and
		 * owner, not 1970 and the daemon's. */
		struct store_coll c;

		rc = store_coll_by_id(t, n->coll, &c, err);
		if (!rc && (n->kind == FSN_QUERY || n->kind == FSN_EXPLAIN || n->kind == FSN_AGG)) {
			file_attr(st, n->ino, 0444, n->result_size, c.mtime_ns);
			st->st_uid = c.uid;
			st->st_gid = c.gid;
			*timeout = 0;
		} else if (!rc && n->kind == FSN_OPTIONS) {
			struct dfs_buf b;

			dfs_buf_init(&b);
			rc = fs_options_render(t, n->coll, &b, err);
			file_attr(st, n->ino, 0644, b.len, c.ctime_ns);
			st->st_uid = c.uid;
			st->st_gid = c.gid;
			dfs_buf_release(&b);
			*timeout = 0;
		} else if (!rc && (n->kind == FSN_WRITE || n->kind == FSN_IXPENDING)) {
			file_attr(st, n->ino, 0644, 0, c.ctime_ns);
			st->st_uid = c.uid;
			st->st_gid = c.gid;
			if (n->kind == FSN_WRITE)
				st->st_blksize = FS_MAX_WRITE;
			*timeout = 0;
		} else if (!rc && n->kind == FSN_COLL)
			dir_attr(st, n->ino, c.mode, c.uid, c.gid, c.mtime_ns, c.chtime_ns);
		else if (!rc && (n->kind == FSN_QDIR || n->kind == FSN_XDIR || n->kind == FSN_ADIR))
			dir_attr(st, n->ino, 0555, c.uid, c.gid, c.ctime_ns, c.ctime_ns);
		else if (!rc && n->kind == FSN_QPART)
			dir_attr(st, n->ino,
				 n->pending_name[0] == 'u' || n->pending_name[0] == 'd' ? 0755
											: 0555,
				 c.uid, c.gid, c.ctime_ns, c.ctime_ns);
		else if (!rc && (n->kind == FSN_UDIR || n->kind == FSN_DDIR))
			dir_attr(st, n->ino, 0755, c.uid, c.gid, c.ctime_ns, c.ctime_ns);
		else if (!rc && (n->kind == FSN_SAVED_DIR || n->kind == FSN_IXDIR))
			dir_attr(st, n->ino, c.mode, c.uid, c.gid, c.mtime_ns, c.ctime_ns);
		else if (!rc) {
			file_attr(st, n->ino, 0644, 0, c.ctime_ns);
			st->st_uid = c.uid;
			st->st_gid = c.gid;
			/* cat and other tools write st_blksize at a time: one request, one
			 * transaction per MiB instead of per 128 KiB (insert.c note 3) */
			st->st_blksize = FS_MAX_WRITE;
		}
	} else if (n->kind == FSN_INDEX) {
		/* Gone when dropped (by rm or by another process): ENOENT, not old data. */
		struct store_index ix;
		struct store_coll c;
		struct dfs_buf b;

		memset(&ix, 0, sizeof(ix));
		rc = store_index_get(t, n->coll, n->pending_name, &ix, err);
		if (!rc) {
			store_index_release(&ix);
			rc = store_coll_by_id(t, n->coll, &c, err);
		}
		/* The size of what an open reads now, not of the last open: tar and rsync
		 * copy st_size bytes (the figures are counted once per change, index.c). */
		dfs_buf_init(&b);
		if (!rc)
			rc = fs_index_render(t, n->coll, n->pending_name, true, &b, err);
		if (!rc) {
			n->result_size = b.len;
			file_attr(st, n->ino, 0644, n->result_size, c.ctime_ns);
			st->st_uid = c.uid;
			st->st_gid = c.gid;
			*timeout = 0;
		}
		dfs_buf_release(&b);
	} else {
		struct store_entry e;

		rc = store_entry_get(t, n->id, &e, err);
		if (!rc) {
			entry_attr(st, n->ino, &e);
			if (n->kind == FSN_ENTRY)
				fs_node_attr_put(n, st, gen);
			fs_node_written_apply(n, st); /* note 9 */
		}
	}
	store_txn_abort(t);
	return rc;
}

static void reply_entry(fuse_req_t req, struct fs_node *n)
{
	struct fuse_entry_param ep;
	struct dfs_err err = {0};
	double timeout;

	memset(&ep, 0, sizeof(ep));
	if (node_attr(n, &ep.attr, &timeout, &err)) {
		fs_node_forget(n->nodeid, 1);
		reply_dfs(req, &err, "lookup");
		return;
	}
	ep.ino = n->nodeid;
	ep.generation = 1;
	ep.attr_timeout = timeout;
	ep.entry_timeout = n->kind == FSN_DOCFS_FILE || n->kind == FSN_QUERY ||
					   n->kind == FSN_EXPLAIN || n->kind == FSN_INDEX ||
					   n->kind == FSN_IXPENDING || n->kind == FSN_WRITE ||
					   n->kind == FSN_AGG || n->kind == FSN_OPTIONS ||
					   n->kind == FSN_PROFILE || n->kind == FSN_CHANGES ||
					   n->kind == FSN_STATS
				   ? 0
				   : LONG_TIMEOUT;
	/* A ref under /.snapshots may move to another commit at the next snapshot. */
	if (n->kind == FSN_SNAP_DIR && n->pending_name[41] == '\0')
		ep.entry_timeout = 0;
	if (fuse_reply_entry(req, &ep) == -ENOENT)
		fs_node_forget(n->nodeid, 1); /* the request was interrupted */
}

/* ---- lookup ------------------------------------------------------------------------ */

/* Replies ENAMETOOLONG (with a message) for a name over the 255-byte file name limit. */
static bool name_too_long(fuse_req_t req, const char *what, const char *name)
{
	size_t n = strlen(name);

	if (n <= 255)
		return false;
	reply_msg(req, DFS_ENAMETOOLONG,
		  "%s '%.40s...': the name is %zu bytes, over the 255-byte limit", what, name, n);
	return true;
}

/* Replies EINVAL (with a message) to a mkdir, mknod or symlink in .indexes/. */
static bool ix_refuse(fuse_req_t req, const struct fs_node *p, const char *what, const char *name)
{
	if (!p || p->kind != FSN_IXDIR)
		return false;
	reply_msg(req, DFS_EINVAL,
		  "%s '.indexes/%.200s': .indexes/ holds only index files (write a spec to "
		  ".indexes/<index name>)",
		  what, name);
	return true;
}

/* Is name meant as a document ("<stem>.json")? Names starting with '.' never are: they are
 * editor files (emacs ".#a.json" locks, hidden temporaries) and stay scratch files. */
static bool is_json_name(const char *name)
{
	size_t n = strlen(name);

	return n > 5 && name[0] != '.' && strcmp(name + n - 5, ".json") == 0;
}

/* The node of write path name ("update/<q>", ".bulk?...", or of kind FSN_INSERT
 * ".insert?w=...") in p's collection. */
static struct fs_node *write_node_kind(struct fs_node *p, const char *name, int kind)
{
	uint64_t h = 1099511628211ULL;

	for (const char *c = name; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
	h ^= (uint64_t)p->coll * 0x9e3779b97f4a7c15ULL;
	return fs_node_keyed(kind, p->db, p->coll, name,
			     fs_ino_db(p->db) | (3ULL << 37) | (1ULL << 36) |
				     (h & ((1ULL << 36) - 1)));
}

static struct fs_node *write_node(struct fs_node *p, const char *name)
{
	return write_node_kind(p, name, FSN_WRITE);
}

/* The write concern of ".insert?w=..&wtimeout=..&j=.." (the only options it takes) into
 * wc, checked (fs/replset/member.c note 8). */
static int insert_wc(const char *name, struct rs_wc *wc, struct dfs_err *err)
{
	char copy[FS_PENDING_NAME_CAP], *save = NULL;
	struct rs_wc_fail f;
	int rc = 0;

	rs_wc_default(false, wc);
	snprintf(copy, sizeof(copy), "%s", strncmp(name, ".insert?", 8) ? "" : name + 8);
	for (char *tok = strtok_r(copy, "&", &save); tok && !rc; tok = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(tok, '=');

		if (eq)
			*eq = '\0';
		rc = rs_wc_opt(tok, eq ? eq + 1 : "", wc, err);
		if (rc == 1)
			rc = dfs_err_set(err, DFS_EINVAL,
					 ".insert: unknown option '%s' (w, wtimeout, j)", tok);
	}
	if (!rc && rs_wc_check(wc, &f))
		rc = rs_wc_fail_err(&f, err);
	return rc;
}

/* ---- queries that span path components (a '/' in a query) -------------------------- */

static const struct {
	int dir;    /* the family's directory kind */
	char tag;   /* its letter in an FSN_QPART's pending_name */
	const char *what; /* for messages */
} qfamilies[] = {{FSN_QDIR, 'q', "query"},	 {FSN_XDIR, 'x', "explain"},
		 {FSN_ADIR, 'a', "aggregate"}, {FSN_UDIR, 'u', "update"},
		 {FSN_DDIR, 'd', "delete"}};

static int qfamily_of_dir(int kind)
{
	for (size_t i = 0; i < sizeof(qfamilies) / sizeof(qfamilies[0]); i++)
		if (qfamilies[i].dir == kind)
			return (int)i;
	return -1;
}

static int qfamily_of_tag(char tag)
{
	for (size_t i = 0; i < sizeof(qfamilies) / sizeof(qfamilies[0]); i++)
		if (qfamilies[i].tag == tag)
			return (int)i;
	return -1;
}

static struct fs_node *write_node(struct fs_node *p, const char *name);

/* The file of a whole query path text in family f under collection node p. */
static struct fs_node *qpath_node(struct fs_node *p, int f, const char *text)
{
	switch (qfamilies[f].dir) {
	case FSN_QDIR:
		return fs_node_query(FSN_QUERY, p->db, p->coll, text);
	case FSN_XDIR:
		return fs_node_query(FSN_EXPLAIN, p->db, p->coll, text);
	case FSN_ADIR: {
		uint64_t h = 14695981039346656037ULL;

		for (const char *c = text; *c; c++)
			h = (h ^ (unsigned char)*c) * 1099511628211ULL;
		h ^= (uint64_t)p->coll * 0x9e3779b97f4a7c15ULL;
		return fs_node_keyed(FSN_AGG, p->db, p->coll, text,
				     fs_ino_db(p->db) | (3ULL << 37) | (2ULL << 35) |
					     (h & ((1ULL << 35) - 1)));
	}
	default: {
		char *full;
		struct fs_node *n;

		if (asprintf(&full, "%s/%s", qfamilies[f].what, text) < 0)
			abort();
		n = write_node(p, full);
		free(full);
		return n;
	}
	}
}

/* The node of text in family f: a directory while the text is not yet whole (its next
 * path component continues it), the family's file once it is. */
static struct fs_node *qpath_lookup(struct fs_node *p, int f, const char *text)
{
	char *key;
	struct fs_node *n;

	if (!fs_path_incomplete(text))
		return qpath_node(p, f, text);
	if (asprintf(&key, "%c%s", qfamilies[f].tag, text) < 0)
		abort();
	n = fs_node_query(FSN_QPART, p->db, p->coll, key);
	free(key);
	return n;
}

/* Whether name is ".changes" or ".changes?<options>". */
static bool changes_name(const char *name)
{
	return strncmp(name, ".changes", 8) == 0 && (name[8] == '\0' || name[8] == '?');
}

/* The node of a .changes name of collection coll of db (coll 0: of db; db NULL: of the
 * mount). A plain one of a database or collection has a fixed inode; one with options (or
 * the mount's) a hashed one and its name in pending_name. */
static struct fs_node *changes_node(struct store_db *db, int64_t coll, const char *name)
{
	uint64_t h = 14695981039346656037ULL;

	if (db && !strchr(name, '?'))
		return fs_node_ref(FSN_CHANGES, db, coll, 0, fs_ino_special(db, coll, 14), NULL);
	for (const char *c = name; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ULL;
	h ^= (db ? store_db_number(db) : 0) * 0x9e3779b97f4a7c15ULL;
	h ^= (uint64_t)coll * 0xc2b2ae3d27d4eb4fULL;
	return fs_node_keyed(FSN_CHANGES, db, coll, name,
			     (0xfffdULL << 48) | (h & ((1ULL << 48) - 1)));
}

/* Whether name is ".stats" or ".stats?<options>". */
static bool stats_name(const char *name)
{
	return strncmp(name, ".stats", 6) == 0 && (name[6] == '\0' || name[6] == '?');
}

/* The node of a .stats name of collection coll of db (coll 0: of db), as changes_node. */
static struct fs_node *stats_node(struct store_db *db, int64_t coll, const char *name)
{
	uint64_t h = 14695981039346656037ULL;

	if (!strchr(name, '?'))
		return fs_node_ref(FSN_STATS, db, coll, 0, fs_ino_special(db, coll, 15), NULL);
	for (const char *c = name; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ULL;
	h ^= store_db_number(db) * 0x9e3779b97f4a7c15ULL;
	h ^= (uint64_t)coll * 0xc2b2ae3d27d4eb4fULL;
	return fs_node_keyed(FSN_STATS, db, coll, name,
			     (0xfffcULL << 48) | (h & ((1ULL << 48) - 1)));
}

static const char *store_name(const struct fs_node *p, const char *name, char *buf, size_t cap);
static struct fs_node *entry_node(struct store_db *db, const struct store_entry *e,
				  const char *name);

/* Looks name up under parent and returns a referenced node, or NULL with err set. */
/* The capped collections whose .options was unlinked (note 11): tar x over an existing
 * capped collection meets EEXIST, unlinks the file and creates it again. A capped
 * collection cannot be uncapped, so the unlink only hides the file until it is written
 * again (the same options are accepted, others refused) or the store is mounted again. */
#define OPTS_HIDDEN_MAX 64
static struct {
	struct store_db *db; /* NULL: a free slot */
	int64_t coll;
} opts_hidden[OPTS_HIDDEN_MAX];
static pthread_mutex_t opts_hidden_lock = PTHREAD_MUTEX_INITIALIZER;

/* Is p's .options hidden? With set: hide it (false when the table is full); with clear:
 * show it again. */
static bool opts_hide(const struct fs_node *p, bool set, bool clear)
{
	int i, freei = -1;
	bool r = false;

	pthread_mutex_lock(&opts_hidden_lock);
	for (i = 0; i < OPTS_HIDDEN_MAX; i++) {
		if (opts_hidden[i].db == p->db && opts_hidden[i].coll == p->coll)
			break;
		if (!opts_hidden[i].db && freei < 0)
			freei = i;
	}
	if (i < OPTS_HIDDEN_MAX) {
		r = true;
		if (clear)
			opts_hidden[i].db = NULL;
	} else if (set && freei >= 0) {
		opts_hidden[freei].db = p->db;
		opts_hidden[freei].coll = p->coll;
		r = true;
	}
	pthread_mutex_unlock(&opts_hidden_lock);
	return r;
}

/* Does collection node p show a .options file? Only when the collection has options (is
 * capped, or has a validator or validation options) and the file was not unlinked since
 * (opts_hide): a plain collection's are {}, which an archive need not hold, and a restore
 * by tar can then create the file (an existing one would be EEXIST, which tar answers with
 * unlink). A store error shows it, so that reading it reports the error. */
static bool opts_shown(const struct fs_node *p)
{
	struct store_coll c;
	struct store_validation v = {0};
	struct store_txn *t;
	bool has;
	int rc;

	if (opts_hide(p, false, false))
		return false;
	if (store_txn_begin(p->db, false, &t, NULL))
		return true;
	rc = store_coll_by_id(t, p->coll, &c, NULL);
	if (!rc && !c.capped)
		rc = store_coll_validation(t, p->coll, &v, NULL);
	store_txn_abort(t);
	has = v.has;
	store_validation_release(&v);
	return rc || c.capped || has;
}

static struct fs_node *lookup_node(struct fs_node *p, const char *name, struct dfs_err *err)
{
	struct store_txn *t;
	struct fs_node *n = NULL;
	struct store_db *db;

	switch (p->kind) {
	case FSN_ROOT:
		if (strcmp(name, ".docfs") == 0)
			return fs_node_ref(FSN_DOCFS_DIR, NULL, 0, 0, FS_INO_DOCFS, NULL);
		if (strcmp(name, ".replset") == 0 && rs_node_active())
			return fs_node_ref(FSN_DOCFS_DIR, NULL, 0, 1, FS_INO_REPLSET, NULL);
		if (strcmp(name, ".snapshots") == 0)
			return fs_node_ref(FSN_SNAP_ROOT, NULL, 0, 0, FS_INO_SNAPS, NULL);
		if (changes_name(name))
			return changes_node(NULL, 0, name);
		if (store_db_name_check(name, NULL) ||
		    store_db_get(fs_store, name, false, &db, err)) {
			dfs_err_set(err, DFS_ENOENT, "no database '%s'", name);
			return NULL;
		}
		fs_notify_watch(db);
		return fs_node_ref(FSN_DB, db, 0, 0, fs_ino_db(db), NULL);
	case FSN_DOCFS_DIR:
		for (int i = DF__COUNT; p->id && i < DF__ALL; i++)
			if (strcmp(name, replset_files[i - DF__COUNT]) == 0)
				return fs_node_ref(FSN_DOCFS_FILE, NULL, 0, i,
						   FS_INO_REPLSET_FILE(i - DF__COUNT), NULL);
		for (int i = 0; !p->id && i < DF__COUNT; i++)
			if (strcmp(name, docfs_files[i]) == 0)
				return fs_node_ref(FSN_DOCFS_FILE, NULL, 0, i, FS_INO_DOCFS_FILE(i),
						   NULL);
		dfs_err_set(err, DFS_ENOENT, "no file '%s'", name);
		return NULL;
	case FSN_DB: {
		struct store_coll c;

		if (changes_name(name))
			return changes_node(p->db, 0, name);
		if (stats_name(name))
			return stats_node(p->db, 0, name);
		if (!strcmp(name, ".profile"))
			return fs_node_ref(FSN_PROFILE, p->db, 0, 0, fs_ino_special(p->db, 0, 9),
					   NULL);
		if (store_txn_begin(p->db, false, &t, err))
			return NULL;
		if (store_coll_find(t, name, &c, err) == 0)
			n = fs_node_ref(FSN_COLL, p->db, c.id, c.id, fs_ino_entry(p->db, c.id),
					NULL);
		store_txn_abort(t);
		return n;
	}
	case FSN_COLL: {
		struct store_entry e;

		int fi = fixed_index(name);

		if (fs_write_kind_of(name) == FSW_BULK)
			return write_node(p, name);
		if (strncmp(name, ".insert?", 8) == 0) { /* a write concern (insert_wc) */
			struct rs_wc wc;

			if (insert_wc(name, &wc, err))
				return NULL;
			return write_node_kind(p, name, FSN_INSERT);
		}
		if (fi < 0 && changes_name(name))
			return changes_node(p->db, p->coll, name);
		if (fi < 0 && stats_name(name))
			return stats_node(p->db, p->coll, name);
		if (fi >= 0 && coll_fixed[fi].kind == FSN_OPTIONS && !opts_shown(p)) {
			dfs_err_set(err, DFS_ENOENT,
				    opts_hide(p, false, false)
					    ? "'.options' was unlinked: the collection stays capped "
					      "(the file is back once written again)"
					    : "collection has no options ('.options' exists once "
					      "written)");
			return NULL;
		}
		if (fi >= 0)
			return fs_node_ref(coll_fixed[fi].kind, p->db, p->coll, 0,
					   fs_ino_special(p->db, p->coll, coll_fixed[fi].k), NULL);
		if ((n = pending_find(FSN_PENDING, p->db, p->coll, name)))
			return n;
		if (store_txn_begin(p->db, false, &t, err))
			return NULL;
		if (store_entry_lookup(t, p->coll, name, &e, err) == 0)
			n = entry_node(p->db, &e, name);
		store_txn_abort(t);
		return n;
	}
	case FSN_SDIR: {
		/* note 10: "<dir id>/<name>", always scratch */
		struct store_entry e;
		char full[300];

		if (strlen(name) > 255) {
			dfs_err_set(err, DFS_ENAMETOOLONG, "file name too long");
			return NULL;
		}
		if (store_txn_begin(p->db, false, &t, err))
			return NULL;
		if (store_entry_lookup(t, p->coll, store_name(p, name, full, sizeof(full)), &e,
				       err) == 0)
			n = entry_node(p->db, &e, name);
		store_txn_abort(t);
		return n;
	}
	case FSN_SNAP_ROOT:
	case FSN_SNAP_DIR:
		return snap_lookup(p, name, err);
	case FSN_QDIR:
	case FSN_XDIR:
	case FSN_ADIR:
	case FSN_UDIR:
	case FSN_DDIR:
		/* Any name is a query (a pipeline, a write path); it runs when opened, never
		 * on lookup or listing. One that is not whole yet is continued by the next
		 * path component (a '/' in it). */
		return qpath_lookup(p, qfamily_of_dir(p->kind), name);
	case FSN_QPART: {
		int f = qfamily_of_tag(p->pending_name[0]);
		char *text;

		if (f < 0 || asprintf(&text, "%s/%s", p->pending_name + 1, name) < 0) {
			dfs_err_set(err, DFS_ENOENT, "no such query");
			return NULL;
		}
		n = qpath_lookup(p, f, text);
		free(text);
		return n;
	}
	case FSN_IXDIR: {
		struct store_index ix;

		if ((n = pending_find(FSN_IXPENDING, p->db, p->coll, name)))
			return n;
		if (store_txn_begin(p->db, false, &t, err))
			return NULL;
		memset(&ix, 0, sizeof(ix));
		if (store_index_get(t, p->coll, name, &ix, err) == 0) {
			store_index_release(&ix);
			n = fs_node_query(FSN_INDEX, p->db, p->coll, name);
		} else if (ix_temp_name(name)) {
			struct store_entry e;
			char full[300];

			dfs_err_clear(err);
			if (store_entry_lookup(t, p->coll, store_name(p, name, full, sizeof(full)),
					       &e, err) == 0)
				n = entry_node(p->db, &e, name);
		}
		store_txn_abort(t);
		return n;
	}

	case FSN_SAVED_DIR: {
		struct store_entry e;
		char full[300];

		snprintf(full, sizeof(full), SAVED_PREFIX "%s", name);
		if (store_txn_begin(p->db, false, &t, err))
			return NULL;
		if (store_entry_lookup(t, p->coll, full, &e, err) == 0)
			n = fs_node_ref(FSN_ENTRY, p->db, p->coll, e.id, fs_ino_entry(p->db, e.id),
					name);
		store_txn_abort(t);
		return n;
	}
	default:
		dfs_err_set(err, DFS_ENOTDIR, "not a directory");
		return NULL;
	}
}

static void fsop_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_node *p = fs_node_get(parent), *n;
	struct dfs_err err = {0};

	if (!p) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (name_too_long(req, "name", name)) /* none can exist (POSIX: NAME_MAX) */
		return;
	n = lookup_node(p, name, &err);
	if (!n) {
		reply_dfs(req, &err, name);
		return;
	}
	reply_entry(req, n);
}

static void fsop_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_node_forget(ino, nlookup);
	fuse_reply_none(req);
}

static void fsop_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		fs_node_forget(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void fsop_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_node *n = fs_node_get(ino);
	struct dfs_err err = {0};
	struct stat st;
	double timeout;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (node_attr(n, &st, &timeout, &err)) {
		reply_dfs(req, &err, "getattr");
		return;
	}
	if (fi && n->kind == FSN_PENDING) {
		struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;

		st.st_size = (off_t)h->buf.len;
	} else if (fi && (n->kind == FSN_QUERY || n->kind == FSN_EXPLAIN || n->kind == FSN_AGG)) {
		struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;

		st.st_size = (off_t)h->res.size; /* this open file's own result */
	} else if (fi && (n->kind == FSN_INDEX || n->kind == FSN_IXPENDING)) {
		struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;

		pthread_mutex_lock(&h->lock);
		st.st_size = (off_t)h->buf.len; /* what this open file reads */
		pthread_mutex_unlock(&h->lock);
	}
	fuse_reply_attr(req, &st, timeout);
}

/* ---- handles ----------------------------------------------------------------------- */

/* Every handle not yet freed: the kernel sends no release for a file still open when the
 * connection ends, so fs_handles_release frees those at the end of the mount. */
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fs_handle *handles;

/* ---- callers (note 9) -------------------------------------------------------------- */

/* The caller of the open or create this thread is serving (caller_enter), which a handle
 * made meanwhile keeps for its later reads, writes and closes. */
static _Thread_local bool cur_has_cred;
static _Thread_local struct store_cred cur_cred;

/* Serves req's request as its caller: the queries it runs see only what it may read. */
static void caller_enter(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[STORE_CRED_GROUPS];
	int n;

	cur_has_cred = ctx->uid != 0;
	if (!cur_has_cred)
		return;
	memset(&cur_cred, 0, sizeof(cur_cred));
	cur_cred.uid = ctx->uid;
	cur_cred.gid = ctx->gid;
	n = fuse_req_getgroups(req, STORE_CRED_GROUPS, groups);
	if (n > STORE_CRED_GROUPS)
		n = STORE_CRED_GROUPS;
	for (int i = 0; i < n; i++)
		cur_cred.groups[cur_cred.ngroups++] = groups[i];
	store_thread_cred_set(&cur_cred, STORE_MAY_READ);
}

/* Serves a request on h as the caller that opened it; need: what a document must allow. */
static void caller_enter_handle(const struct fs_handle *h, int need)
{
	cur_has_cred = false;
	if (h && h->has_cred)
		store_thread_cred_set(&h->cred, need);
}

static void caller_leave(void)
{
	cur_has_cred = false;
	store_thread_cred_set(NULL, 0);
}

static struct fs_handle *handle_new(int kind, struct fs_node *n)
{
	struct fs_handle *h = calloc(1, sizeof(*h));

	if (!h)
		abort();
	h->kind = kind;
	h->node = n;
	h->has_cred = cur_has_cred;
	if (h->has_cred)
		h->cred = cur_cred;
	h->loaded = true;
	pthread_mutex_init(&h->lock, NULL);
	dfs_buf_init(&h->buf);
	dfs_buf_init(&h->wres);
	pthread_mutex_lock(&handles_lock);
	h->next = handles;
	if (handles)
		handles->prev = h;
	handles = h;
	pthread_mutex_unlock(&handles_lock);
	fs_curop_handle(true);
	return h;
}

/* note 3: h's content (buf) is that of the node's generation gen, and of entry e when known
 * (NULL: not known). */
static void handle_loaded(struct fs_handle *h, uint64_t gen, const struct store_entry *e)
{
	h->gen = gen;
	h->ver_ctime = e ? e->ctime_ns : 0;
	h->ver_size = e ? e->size : 0;
}

static void handle_free(struct fs_handle *h)
{
	pthread_mutex_lock(&handles_lock);
	if (h->prev)
		h->prev->next = h->next;
	else
		handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&handles_lock);
	if (h->node)
		fs_node_written_clear(h->node, h); /* written bytes not committed are gone */
	fs_curop_handle(false);
	if (h->ins_init && h->ins.ndocs) /* one insert a document, as MongoDB counts them */
		fs_curop_count_doc(h->node->db, h->node->coll, true, h->ins.ndocs, 0);
	if (h->ins_init)
		fs_inserter_release(&h->ins);
	if (h->kind == FH_RESULT)
		fs_result_release(&h->res);
	fs_changes_free(h->chg);
	fs_tail_free(h->tail);
	dfs_buf_release(&h->wres);
	dfs_buf_release(&h->buf);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

size_t fs_handles_release(void)
{
	size_t n = 0;

	while (handles) {
		handle_free(handles);
		n++;
	}
	return n;
}

static struct store_attrs caller_attrs(fuse_req_t req, mode_t mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct store_attrs a = {(uint32_t)(mode & ~ctx->umask & 07777), ctx->uid, ctx->gid, 0};

	return a;
}

/* The store's name for name in directory p: saved queries live under SAVED_PREFIX. */
static const char *store_name(const struct fs_node *p, const char *name, char *buf, size_t cap)
{
	if (p->kind == FSN_SDIR) { /* note 10 */
		snprintf(buf, cap, "%lld/%s", (long long)p->id, name);
		return buf;
	}
	if (p->kind == FSN_IXDIR) { /* note 11 */
		snprintf(buf, cap, IXTEMP_PREFIX "%s", name);
		return buf;
	}
	if (p->kind != FSN_SAVED_DIR)
		return name;
	snprintf(buf, cap, SAVED_PREFIX "%s", name);
	return buf;
}


/* note 10: a directory that holds scratch entries of its own making (files, directories,
 * fifos, sockets, symlinks, hard links): a collection or a scratch directory. */
static bool scratch_parent(const struct fs_node *p)
{
	return p && (p->kind == FSN_COLL || p->kind == FSN_SDIR);
}

/* note 10: may name be made in p as a scratch entry other than a regular file? Not a
 * document's name, nor a fixed entry's, at the top of a collection. */
static bool scratch_name_ok(const struct fs_node *p, const char *name)
{
	return p->kind == FSN_SDIR || (!is_json_name(name) && fixed_index(name) < 0);
}

/* The node of store entry e named name (one more kernel reference). */
static struct fs_node *entry_node(struct store_db *db, const struct store_entry *e,
				  const char *name)
{
	return fs_node_ref(e->kind == STORE_KIND_DIR ? FSN_SDIR : FSN_ENTRY, db, e->coll, e->id,
			   fs_ino_entry(db, e->id), name);
}

/* note 10: a new or removed entry in p: the directory's mtime and ctime. */
static int parent_touch(struct store_txn *t, const struct fs_node *p, struct dfs_err *err)
{
	return p->kind == FSN_SDIR ? store_file_touch(t, p->id, err)
				   : store_coll_touch(t, p->coll, 0, err);
}

/* Is the store name of a scratch file that of a saved query (not an editor's file)? */
static bool is_saved_query(const char *store_name)
{
	const char *base = store_name + strlen(SAVED_PREFIX);
	size_t n;

	if (strncmp(store_name, SAVED_PREFIX, strlen(SAVED_PREFIX)) != 0)
		return false;
	n = strlen(base);
	if (!n || base[0] == '.' || base[n - 1] == '~' || strspn(base, "0123456789") == n)
		return false;
	return true;
}

/* Commits the buffer of an entry handle (note 1). Called with h->lock and the node's
 * commit lock held. */
static int handle_commit_ordered(fuse_req_t req, struct fs_handle *h, struct dfs_err *err)
{
	struct fs_node *n = h->node;
	struct store_txn *t;
	struct store_entry e;
	int rc;

	/* A flush with nothing written since the open commits nothing: shells open, dup2 and
	 * close a redirection's file before writing to it. */
	if (h->kind != FH_ENTRY || !h->dirty || !h->written)
		return 0;
	if (n->kind == FSN_DEAD) {
		/* Unlinked or replaced while open: the bytes have nowhere to go. */
		h->dirty = false;
		h->written = false;
		return 0;
	}
	if ((rc = store_txn_begin(n->db, true, &t, err)))
		return rc;
	if (n->kind == FSN_PENDING) {
		/* The create's mode and caller, and what setattr changed since (cp -p sets
		 * the times and mode before it closes). */
		struct store_attrs a = fs_node_pend_get(n);

		rc = store_doc_write_text(t, n->coll, n->pending_name,
					  h->buf.data ? h->buf.data : "", h->buf.len, &a, &e, err);
		if (!rc && fs_node_pend_atime(n) >= 0) { /* touch -a, tar: before the commit */
			e.atime_ns = fs_node_pend_atime(n);
			rc = store_entry_set_atime(t, e.id, e.atime_ns, err);
		}
		/* A new entry: the directory changed (note 9). */
		if (!rc)
			rc = store_coll_touch(t, n->coll, 0, err);
		if (rc)
			dfs_err_prefix(err, "'%s': ", n->pending_name);
	} else {
		rc = store_entry_get(t, n->id, &e, err);
		if (rc == DFS_ENOENT) {
			/* Removed while open: the bytes have nowhere to go, as on any unlinked
			 * file. */
			store_txn_abort(t);
			h->dirty = false;
			dfs_err_clear(err);
			return 0;
		}
		if (!rc && e.kind == STORE_KIND_DOC) {
			rc = store_doc_write_text(t, n->coll, e.name,
						  h->buf.data ? h->buf.data : "", h->buf.len, NULL,
						  &e, err);
		} else if (!rc && is_saved_query(e.name)) {
			struct fs_query q;

			/* A saved query must be a valid find command before it is kept. */
			fs_query_init(&q);
			rc = fs_query_parse_saved(h->buf.data ? h->buf.data : "", h->buf.len, &q,
						  err);
			fs_query_release(&q);
			if (!rc)
				rc = store_file_write(t, n->id, h->buf.data, h->buf.len, err);
		} else if (!rc) {
			rc = store_file_write(t, n->id, h->buf.data, h->buf.len, err);
		}
		if (rc)
			dfs_err_prefix(err, "'%s': ", e.name);
	}
	if (!rc)
		rc = store_txn_commit(t, err);
	else
		store_txn_abort(t);
	if (rc)
		return rc;
	h->dirty = false;
	h->written = false;
	fs_node_written_clear(n, h); /* the store has it now (note 9) */
	if (n->kind == FSN_PENDING) {
		/* A new name in the collection: a listing the kernel keeps may predate it (the
		 * kernel saw the create, not this commit; note 8). */
		uint64_t dir = fs_node_touch_ino(fs_ino_entry(n->db, n->coll));

		pending_del(n);
		fs_node_repoint(n, FSN_ENTRY, n->coll, e.id, fs_ino_entry(n->db, e.id));
		if (dir)
			fs_notify_inode(dir);
	} else {
		fs_node_bump(n);
	}
	/* The content is the store's now; its entry's ctime is known for documents only. */
	handle_loaded(h, fs_node_gen(n), h->is_doc ? &e : NULL);
	fs_notify_inode(n->nodeid);
	return 0;
}

/* Two files of one document committing at once: each bumps the node's generation after its
 * commit, outside the store's write lock, so the bumps could come in the other order and
 * leave the file whose content is older looking current (note 3). A lock per node (striped)
 * around commit and bump keeps them in commit order. */
static pthread_mutex_t commit_locks[16];
static pthread_once_t commit_locks_once = PTHREAD_ONCE_INIT;

static void commit_locks_init(void)
{
	for (size_t i = 0; i < sizeof(commit_locks) / sizeof(commit_locks[0]); i++)
		pthread_mutex_init(&commit_locks[i], NULL);
}

static int handle_commit(fuse_req_t req, struct fs_handle *h, struct dfs_err *err)
{
	pthread_mutex_t *lock;
	struct rs_wc wc;
	struct rs_wc_fail wf;
	uint64_t before;
	bool ins;
	int64_t t0;
	int rc;

	if (h->kind != FH_ENTRY || !h->dirty || !h->written)
		return 0; /* nothing to commit (handle_commit_ordered) */
	/* a replica set's primary: the mount's -o w= (member.c note 8), checked first */
	rs_wc_default(false, &wc);
	if (h->is_doc && rs_wc_check(&wc, &wf))
		return rs_wc_fail_err(&wf, err);
	before = h->is_doc ? rs_wc_mark(h->node->db) : 0;
	pthread_once(&commit_locks_once, commit_locks_init);
	lock = &commit_locks[h->node->nodeid % (sizeof(commit_locks) / sizeof(commit_locks[0]))];
	ins = h->node->kind == FSN_PENDING;
	t0 = now_ns();
	pthread_mutex_lock(lock);
	rc = handle_commit_ordered(req, h, err);
	pthread_mutex_unlock(lock);
	if (!rc && h->is_doc) /* serverStatus and top count a document file's write */
		fs_curop_count_doc(h->node->db, h->node->coll, ins, 1, (now_ns() - t0) / 1000);
	/* the close returns once the write concern is met; when it is not, the document
	 * stays and the close fails with ETIMEDOUT */
	if (!rc && h->is_doc && rs_wc_wait(h->node->db, before, &wc, &wf))
		rc = rs_wc_fail_err(&wf, err);
	return rc;
}

/* Creates the index an index file's handle holds the spec of (note 6). Called with h->lock
 * held. */
static int ix_commit(struct fs_handle *h, struct dfs_err *err)
{
	struct fs_node *n = h->node;
	bson_t spec;
	int rc;

	if (!h->written)
		return 0;
	if (n->kind == FSN_DOCFS_FILE) { /* /.docfs/killOp */
		rc = fs_killop_apply(h->buf.data ? h->buf.data : "", h->buf.len, err);
		h->written = false;
		return rc;
	}
	if (n->kind == FSN_PROFILE) {
		rc = fs_profile_apply(store_db_name(n->db), h->buf.data ? h->buf.data : "",
				      h->buf.len, err);
		h->written = false;
		return rc;
	}
	if (n->kind == FSN_OPTIONS) {
		opts_hide(n, false, true); /* written again: shown, whatever the options */
		rc = fs_options_apply(n->db, n->coll, h->buf.data ? h->buf.data : "", h->buf.len,
				      err);
		if (rc)
			return dfs_err_prefix(err, "'.options': ");
		h->written = false;
		return 0;
	}
	if (n->kind != FSN_IXPENDING && n->kind != FSN_INDEX) {
		h->written = false; /* unlinked while open: nowhere to go */
		return 0;
	}
	bson_init(&spec);
	rc = fs_index_spec_parse(h->buf.data ? h->buf.data : "", h->buf.len, &spec, err);
	if (!rc)
		rc = fs_index_create(n->db, n->coll, n->pending_name, &spec, NULL, 0, err);
	bson_destroy(&spec);
	if (rc) {
		dfs_err_prefix(err, "'.indexes/%s': ", n->pending_name);
		return rc;
	}
	h->written = false;
	if (n->kind == FSN_IXPENDING)
		pending_del(n); /* the name is the index's now: lookups find it in the store */
	return 0;
}

/* note 3: a cold read-only open of a document (gen: the node's data_gen before anything
 * was read) loads it and stores it in the kernel's page cache before the reply. Returns
 * whether the kernel now holds exactly the content of gen, so the open may keep it. A
 * scratch file or a document over PUSH_MAX is left to be read (and h to load it then). */
static bool open_push(struct fs_node *n, struct fs_handle *h, uint64_t gen)
{
	struct dfs_err err = {0};
	struct store_entry e;
	struct store_txn *t = NULL;
	bool kept = false;
	int rc;

	/* The store waits for the file's locked pages, which a READ or WRITE in flight holds
	 * until it is answered: never on a thread that requests need in order to arrive, and
	 * never on so many workers that none is left to answer them. */
	if (!fs_mount_on_worker())
		return false;
	if (atomic_fetch_add(&pushing, 1) >= PUSH_WORKERS)
		goto done;
	if (store_txn_begin(n->db, false, &t, &err))
		goto done;
	rc = store_entry_get(t, n->id, &e, &err);
	if (!rc && (e.kind != STORE_KIND_DOC || e.size > PUSH_MAX))
		rc = -1;
	if (!rc)
		rc = store_entry_read(t, n->id, &h->buf, &err);
	store_txn_abort(t);
	if (rc) {
		dfs_buf_reset(&h->buf);
		goto done;
	}
	h->loaded = true;
	h->is_doc = true;
	handle_loaded(h, gen, &e);
	/* Changed since gen: the notifier's invalidation may have come before the store. The
	 * open then does not keep the cache, and the kernel drops what was stored. */
	kept = fs_notify_store(n->nodeid, h->buf.data ? h->buf.data : "", h->buf.len) == 0 &&
	       fs_node_gen(n) == gen;
done:
	atomic_fetch_sub(&pushing, 1);
	return kept;
}

/*
 * Opens an explain/ or aggregate/ result file: read-only, its text computed now by run into
 * the handle's buffer and counted as a command in currentOp. NULL when refused (replied).
 */
static struct fs_handle *open_result(fuse_req_t req, struct fs_node *n, struct fuse_file_info *fi,
				     const char *what, const char *ro,
				     int (*run)(struct store_db *, int64_t, const char *,
						struct fs_result *, struct dfs_err *))
{
	struct dfs_err err = {0};
	struct fs_handle *h;
	struct fs_curop op;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		reply_msg(req, DFS_EPERM, "%s '%s': %s read-only", what, n->pending_name, ro);
		return NULL;
	}
	h = handle_new(FH_RESULT, n);
	fs_result_init(&h->res);
	fs_curop_begin(&op, FS_OP_COMMAND, n->db, n->coll, fuse_req_ctx(req)->pid);
	rc = run(n->db, n->coll, n->pending_name, &h->res, &err);
	op.reslen = (int64_t)h->res.size;
	fs_curop_end(&op, rc);
	if (rc) {
		handle_free(h);
		dfs_err_prefix(&err, "%s '%s': ", what, n->pending_name);
		reply_dfs(req, &err, "open");
		return NULL;
	}
	n->result_size = h->res.size;
	fi->direct_io = 1;
	return h;
}

static void fsop_open_as(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_node *n = fs_node_get(ino);
	struct dfs_err err = {0};
	struct fs_handle *h;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	switch (n->kind) {
	case FSN_DOCFS_FILE:
		if (n->id == DF_KILLOP && (fi->flags & O_ACCMODE) != O_RDONLY) {
			/* an opid written here is applied at the flush (ix_commit) */
			h = handle_new(FH_IXSPEC, n);
			fi->direct_io = 1;
			break;
		}
		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			fuse_reply_err(req, EACCES);
			return;
		}
		h = handle_new(FH_TEXT, n);
		docfs_file_render((int)n->id, &h->buf);
		fi->direct_io = 1;
		break;
	case FSN_SNAP_FILE: {
		struct store_git *g;
		char commit[41];
		const char *path;
		int rc;

		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			fuse_reply_err(req, EROFS);
			return;
		}
		h = handle_new(FH_TEXT, n);
		path = snap_path(n, commit);
		g = snap_repo(&err);
		rc = g ? store_git_read(g, commit, path, &h->buf, &err) : err.code;
		if (rc) {
			handle_free(h);
			reply_dfs(req, &err, "open snapshot");
			return;
		}
		fi->keep_cache = 1;
		break;
	}
	case FSN_INSERT: {
		struct store_attrs a = caller_attrs(req, 0644);
		struct rs_wc wc;
		struct dfs_err werr = {0};

		if (insert_wc(n->pending_name ? n->pending_name : "", &wc, &werr)) {
			reply_dfs(req, &werr, "open");
			return;
		}
		h = handle_new(FH_INSERT, n);
		h->wc = wc;
		h->ins_mark = rs_wc_mark(n->db);
		fs_inserter_init(&h->ins, n->db, n->coll, &a);
		h->ins_init = true;
		fi->direct_io = 1;
		break;
	}
	case FSN_PENDING:
		h = handle_new(FH_ENTRY, n);
		h->dirty = true;
		h->is_doc = true;
		h->direct = true;
		handle_loaded(h, fs_node_gen(n), NULL);
		fi->direct_io = 1;
		break;
	case FSN_QUERY: {
		struct fs_curop op;
		struct fs_query q;
		int rc;

		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			reply_msg(req, DFS_EPERM, "query '%s': query results are read-only",
				  n->pending_name);
			return;
		}
		fs_query_init(&q);
		rc = fs_query_parse_path(n->db, n->coll, n->pending_name, &q, &err);
		if (!rc && q.tailable) {
			/* a stream, read as a .changes?follow=1 one is (tail.c) */
			h = handle_new(FH_CHANGES, n);
			rc = fs_tail_open(n->db, n->coll, &q, &h->tail, &err);
		} else {
			h = handle_new(FH_RESULT, n);
			fs_result_init(&h->res);
			fs_curop_begin(&op, FS_OP_QUERY, n->db, n->coll, fuse_req_ctx(req)->pid);
			if (!rc)
				rc = fs_query_run(n->db, n->coll, &q, &h->res, &err);
			op.reslen = (int64_t)h->res.size;
			fs_curop_end(&op, rc);
			if (!rc)
				n->result_size = h->res.size;
		}
		fs_query_release(&q);
		if (rc) {
			handle_free(h);
			dfs_err_prefix(&err, "query '%s': ", n->pending_name);
			reply_dfs(req, &err, "open");
			return;
		}
		fi->direct_io = 1;
		break;
	}
	case FSN_EXPLAIN: /* a find, or a pipeline (apath.c) */
		h = open_result(req, n, fi, "explain", "explain results are", fs_explain_path_run);
		if (!h)
			return;
		break;
	case FSN_INDEX: {
		struct store_txn *t;
		int rc;

		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			/* Writing a spec over an index (cp spec .indexes/x twice) creates it
			 * again: nothing happens when it is the same index (note 6). */
			h = handle_new(FH_IXSPEC, n);
			fi->direct_io = 1;
			if (fi->flags & O_TRUNC)
				break;
		} else {
			h = handle_new(FH_TEXT, n);
			fi->direct_io = 1;
		}
		rc = store_txn_begin(n->db, false, &t, &err);
		if (!rc) {
			rc = fs_index_render(t, n->coll, n->pending_name, true, &h->buf, &err);
			store_txn_abort(t);
		}
		if (rc) {
			handle_free(h);
			dfs_err_prefix(&err, "'.indexes/%s': ", n->pending_name);
			reply_dfs(req, &err, "open");
			return;
		}
		n->result_size = h->buf.len;
		break;
	}
	case FSN_IXPENDING:
		h = handle_new(FH_IXSPEC, n);
		fi->direct_io = 1;
		break;
	case FSN_STATS: {
		const char *q = n->pending_name ? strchr(n->pending_name, '?') : NULL;

		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			reply_msg(req, DFS_EPERM, "'.stats' is read-only");
			return;
		}
		h = handle_new(FH_TEXT, n);
		fi->direct_io = 1;
		if (fs_stats_render(n->db, n->coll, q ? q + 1 : NULL, &h->buf, &err)) {
			handle_free(h);
			dfs_err_prefix(&err,
				       "'%s': ", n->pending_name ? n->pending_name : ".stats");
			reply_dfs(req, &err, "open");
			return;
		}
		n->result_size = h->buf.len;
		break;
	}
	case FSN_CHANGES: {
		char coll[DFS_MAX_NS_NAME + 1] = "";
		struct store_txn *t;
		int rc = 0;

		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			reply_msg(req, DFS_EPERM,
				  "'.changes' is read-only: it shows what writes did");
			return;
		}
		h = handle_new(FH_CHANGES, n);
		fi->direct_io = 1;
		if (n->db && !n->pending_name)
			break; /* plain: read at offsets (changes.c note 1) */
		if (n->coll) {
			struct store_coll c;

			rc = store_txn_begin(n->db, false, &t, &err);
			if (!rc) {
				rc = store_coll_by_id(t, n->coll, &c, &err);
				store_txn_abort(t);
			}
			if (!rc)
				snprintf(coll, sizeof(coll), "%s", c.name);
		}
		if (!rc) {
			const char *q = strchr(n->pending_name, '?');

			rc = fs_changes_open(fs_store, n->db, n->coll ? coll : NULL,
					     q ? q + 1 : NULL, &h->chg, &err);
		}
		if (rc) {
			handle_free(h);
			dfs_err_prefix(&err, "'%s': ", n->pending_name);
			reply_dfs(req, &err, "open");
			return;
		}
		break;
	}
	case FSN_PROFILE: {
		/* Read: the settings; written: applied at the flush (ix_commit). */
		bool wr = (fi->flags & O_ACCMODE) != O_RDONLY;

		h = handle_new(wr ? FH_IXSPEC : FH_TEXT, n);
		fi->direct_io = 1;
		if (!wr)
			fs_profile_render(store_db_name(n->db), &h->buf);
		break;
	}
	case FSN_OPTIONS: {
		/* Read: the options; written: a spec-like buffer applied at the flush
		 * (ix_commit), like an index file. */
		struct store_txn *t;
		int rc = 0;
		bool wr = (fi->flags & O_ACCMODE) != O_RDONLY;

		h = handle_new(wr ? FH_IXSPEC : FH_TEXT, n);
		fi->direct_io = 1;
		if (wr && (fi->flags & O_TRUNC))
			break;
		rc = store_txn_begin(n->db, false, &t, &err);
		if (!rc) {
			rc = fs_options_render(t, n->coll, &h->buf, &err);
			store_txn_abort(t);
		}
		if (rc) {
			handle_free(h);
			dfs_err_prefix(&err, "'.options': ");
			reply_dfs(req, &err, "open");
			return;
		}
		break;
	}
	case FSN_ENTRY: {
		struct store_entry e;
		struct store_txn *t;
		uint64_t gen;
		int rc;

		h = handle_new(FH_ENTRY, n);
		if ((fi->flags & O_ACCMODE) == O_RDONLY && !(fi->flags & O_TRUNC)) {
			/* Read-only: with keep_cache the kernel may never ask (a warm grep -r);
			 * else the content is stored in its cache now, or read at the first
			 * read (note 3). */
			h->loaded = false;
			h->rdonly = true;
			fi->noflush = 1;
			if (fs_node_cache_ok(n)) {
				fi->keep_cache = 1;
				break;
			}
			gen = fs_node_gen(n);
			if (open_push(n, h, gen))
				fi->keep_cache = 1;
			fs_node_cache_set(n, gen);
			break;
		}
		gen = fs_node_gen(n); /* before the read: a change after it is seen */
		rc = store_txn_begin(n->db, false, &t, &err);
		if (!rc) {
			rc = store_entry_get(t, n->id, &e, &err);
			h->is_doc = !rc && e.kind == STORE_KIND_DOC;
			h->saved = !rc && is_saved_query(e.name);
			if (!rc && (fi->flags & O_TRUNC))
				h->dirty = true;
			else if (!rc)
				rc = store_entry_read(t, n->id, &h->buf, &err);
			store_txn_abort(t);
		}
		if (rc) {
			handle_free(h);
			reply_dfs(req, &err, "open");
			return;
		}
		handle_loaded(h, gen, (fi->flags & O_TRUNC) ? NULL : &e);
		if ((fi->flags & O_TRUNC) && h->is_doc) {
			/* the empty document at the release, if nothing is written */
			h->trunc = true;
		} else if ((fi->flags & O_TRUNC) && !is_saved_query(e.name)) {
			/* A scratch file is empty from the open on (`: > log.txt`). */
			pthread_mutex_lock(&h->lock);
			h->written = true;
			rc = handle_commit(req, h, &err);
			pthread_mutex_unlock(&h->lock);
			if (rc) {
				handle_free(h);
				reply_dfs(req, &err, "open");
				return;
			}
		}
		/* note 3: the kernel's cache is kept only if it holds what was read here; else
		 * it is refilled from this read, of gen. */
		if (!(fi->flags & O_TRUNC) && fs_node_cache_is(n, gen))
			fi->keep_cache = 1;
		else
			fs_node_cache_set(n, gen);
		break;
	}
	case FSN_AGG:
		h = open_result(req, n, fi, "aggregate", "results are", fs_agg_run);
		if (!h)
			return;
		break;
	case FSN_WRITE: {
		struct dfs_err e2 = {0};

		if (fs_write_validate(n->pending_name, &e2)) {
			dfs_err_prefix(&e2, "'%s': ", n->pending_name);
			reply_dfs(req, &e2, "open");
			return;
		}
		h = handle_new(FH_WRITE, n);
		h->client = fuse_req_ctx(req)->pid;
		fi->direct_io = 1;
		fi->nonseekable = 0;
		break;
	}
	case FSN_DEAD:
		fuse_reply_err(req, ENOENT);
		return;
	default:
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT)
		handle_free(h);
}

/* Runs the request of a write handle once (wpath.c note 1); h->lock held. Returns its
 * code; the error is logged once. */
static int write_apply(struct fs_handle *h)
{
	struct fs_node *n = h->node;
	struct fs_curop op;

	if (h->applied || !h->written)
		return h->applied ? h->wrc : 0;
	dfs_buf_reset(&h->wres);
	dfs_err_clear(&h->werr);
	/* the kind is set by wpath.c once it knows the request (fs_curop_current) */
	fs_curop_begin(&op, FS_OP_UPDATE, n->db, n->coll, h->client);
	h->wrc = fs_write_run(n->db, n->coll, n->pending_name, h->buf.data ? h->buf.data : "",
			      h->buf.len, &h->wres, &h->werr);
	op.reslen = (int64_t)h->wres.len;
	fs_curop_end(&op, h->wrc);
	h->applied = true;
	fs_notify_sync(n->db); /* the changed documents read fresh right after */
	if (h->wrc) {
		dfs_err_prefix(&h->werr, "'%s': ", n->pending_name);
		fs_errlog_add("write: %s", h->werr.msg);
	}
	return h->wrc;
}

/* A read of a write path: the result of the request, served from the offset where the
 * request ended (so `cat <&3` after `printf ... >&3` reads it), or from 0 (a seek back):
 * the first read decides which, so reading on from either gives the result once. */
static void write_read(fuse_req_t req, struct fs_handle *h, size_t size, off_t off)
{
	char *copy;
	size_t start;

	pthread_mutex_lock(&h->lock);
	write_apply(h);
	if (!h->wbased) {
		h->wbase = off == h->wend ? h->wend : 0;
		h->wbased = true;
	}
	start = off >= h->wbase ? (size_t)(off - h->wbase) : (size_t)off;
	if (!h->applied || start >= h->wres.len) {
		pthread_mutex_unlock(&h->lock);
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > h->wres.len - start)
		size = h->wres.len - start;
	copy = malloc(size);
	if (!copy) {
		pthread_mutex_unlock(&h->lock);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, h->wres.data + start, size);
	pthread_mutex_unlock(&h->lock);
	fuse_reply_buf(req, copy, size);
	free(copy);
}

/* note 3: whether h (an FH_ENTRY, lock held), loaded before the node's last bump to gen
 * (read before this), still holds the entry's content: the bump was the notifier passing
 * over a change this file committed itself, or one that changed no content. Then h is
 * current again. */
static bool still_current(struct fs_handle *h, uint64_t gen)
{
	struct dfs_err err = {0};
	struct store_entry e;
	struct store_txn *t;
	int rc;

	if (h->ver_ctime == 0 || h->dirty)
		return false;
	if (store_txn_begin(h->node->db, false, &t, &err))
		return false;
	rc = store_entry_get(t, h->node->id, &e, &err);
	store_txn_abort(t);
	if (rc || e.ctime_ns != h->ver_ctime || e.size != h->ver_size)
		return false;
	h->gen = gen;
	return true;
}

/* note 3: h (an FH_ENTRY, lock held) read its content before the node last changed, and
 * is about to answer a READ with it: that old content enters the page cache. The opens
 * after this one do not keep the cache, and the notifier drops these pages once the reply
 * is in (its invalidation waits for the pages the READ holds), for opens that already
 * kept it. */
static void read_old(struct fs_handle *h)
{
	fs_node_cache_set(h->node, h->gen);
	fs_notify_inode(h->node->nodeid);
}

static bool req_stopped(void *ctx)
{
	return fuse_req_interrupted((fuse_req_t)ctx) != 0;
}

/* A read of a .changes file: a plain one at any offset; a stream from where its reader
 * is (buf holds the bytes from chg_off on that were made and not yet read past). */
static void changes_read(fuse_req_t req, struct fs_handle *h, size_t size, off_t off)
{
	struct dfs_err err = {0};
	int rc = 0;

	if (!h->chg && !h->tail) {
		struct dfs_buf b;

		dfs_buf_init(&b);
		rc = off < 0 ? dfs_err_set(&err, DFS_EINVAL, "negative offset")
			     : fs_changes_pread(h->node->db, h->node->coll, off, size, &b, &err);
		if (rc)
			reply_dfs(req, &err, "read .changes");
		else
			fuse_reply_buf(req, b.data, b.len);
		dfs_buf_release(&b);
		return;
	}
	pthread_mutex_lock(&h->lock);
	if (off < h->chg_off) {
		pthread_mutex_unlock(&h->lock);
		reply_msg(req, DFS_EINVAL,
			  "'%s' is a stream: it is read in order (offset %lld was already read)",
			  h->node->pending_name, (long long)off);
		return;
	}
	for (;;) {
		size_t drop = (size_t)(off - h->chg_off) < h->buf.len ? (size_t)(off - h->chg_off)
								      : h->buf.len;
		size_t before;

		/* What the reader is past is not kept. */
		if (drop) {
			memmove(h->buf.data, h->buf.data + drop, h->buf.len - drop);
			h->buf.len -= drop;
			h->chg_off += (int64_t)drop;
		}
		if ((off == h->chg_off && h->buf.len >= size) || h->chg_end ||
		    (off == h->chg_off && h->buf.len > 0))
			break;
		before = h->buf.len;
		rc = h->tail ? fs_tail_next(h->tail, size > h->buf.len ? size - h->buf.len : 1,
					    &h->buf, req_stopped, req, &err)
			     : fs_changes_next(h->chg, size > h->buf.len ? size - h->buf.len : 1,
					       &h->buf, req_stopped, req, &err);
		if (rc)
			break;
		if (h->buf.len == before)
			h->chg_end = true;
	}
	if (rc) {
		pthread_mutex_unlock(&h->lock);
		if (h->tail) {
			/* logged even when ENOENT: the collection was dropped under the read */
			fs_errlog_add("read: query '%s': %s", h->node->pending_name, err.msg);
			fuse_reply_err(req, fs_errno(err.code));
		} else {
			reply_dfs(req, &err, "read .changes");
		}
		return;
	}
	{
		size_t n = off == h->chg_off ? (h->buf.len < size ? h->buf.len : size) : 0;
		char *copy = malloc(n ? n : 1);

		if (!copy)
			abort();
		memcpy(copy, h->buf.data, n);
		pthread_mutex_unlock(&h->lock);
		fuse_reply_buf(req, copy, n);
		free(copy);
	}
}

static void fsop_read_as(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;

	if (h->kind == FH_RESULT) {
		size_t got = 0;
		char *buf = malloc(size ? size : 1);
		int e;

		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		e = fs_result_read(&h->res, buf, size, off, &got);
		if (off > 0 && got)
			fs_curop_count_getmore(); /* the next batch of a result */
		fs_net_count(0, got);
		if (e)
			fuse_reply_err(req, e);
		else
			fuse_reply_buf(req, buf, got);
		free(buf);
		return;
	}
	if (h->kind == FH_WRITE) {
		write_read(req, h, size, off);
		return;
	}
	if (h->kind == FH_CHANGES) {
		changes_read(req, h, size, off);
		return;
	}
	pthread_mutex_lock(&h->lock);
	if (h->kind == FH_ENTRY && !h->loaded && h->node->kind == FSN_DEAD) {
		pthread_mutex_unlock(&h->lock);
		fuse_reply_buf(req, NULL, 0); /* replaced before it was read */
		return;
	}
	if (h->kind == FH_ENTRY && !h->loaded) {
		struct dfs_err err = {0};
		struct store_txn *t;
		/* The generation before the read: a change after it is seen. */
		uint64_t gen = fs_node_gen(h->node);
		struct store_entry e;
		int rc = store_txn_begin(h->node->db, false, &t, &err);

		if (!rc) {
			rc = store_entry_get(t, h->node->id, &e, &err);
			if (!rc)
				rc = store_entry_read(t, h->node->id, &h->buf, &err);
			store_txn_abort(t);
		}
		if (rc) {
			pthread_mutex_unlock(&h->lock);
			reply_dfs(req, &err, "read");
			return;
		}
		h->loaded = true;
		handle_loaded(h, gen, &e);
	}
	/* note 3: this reply goes into the page cache the node's other files share. From a
	 * file that read an older content, it must not stay there for the opens to come. */
	if (h->kind == FH_ENTRY && !h->direct && h->node->kind != FSN_DEAD) {
		uint64_t gen = fs_node_gen(h->node);

		if (h->gen != gen && !still_current(h, gen))
			read_old(h);
	}
	if (h->kind == FH_INSERT || off < 0 || (size_t)off >= h->buf.len) {
		pthread_mutex_unlock(&h->lock);
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > h->buf.len - (size_t)off)
		size = h->buf.len - (size_t)off;
	{
		/* Reply from a copy this thread owns: a release on another thread may free
		 * h->buf as soon as the kernel has the reply, before writev returns here. */
		char *copy = malloc(size);

		if (!copy) {
			pthread_mutex_unlock(&h->lock);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		memcpy(copy, h->buf.data + off, size);
		pthread_mutex_unlock(&h->lock);
		fs_net_count(0, size);
		fuse_reply_buf(req, copy, size);
		free(copy);
	}
}

static bool blank(const char *data, size_t size)
{
	for (size_t i = 0; i < size; i++)
		if (data[i] != ' ' && data[i] != '\n' && data[i] != '\t' && data[i] != '\r')
			return false;
	return true;
}

/* A document file written in order from offset 0 (h->seq_len bytes so far, h->lock held)
 * fails the write that makes its bytes unable to start a document, not only the close
 * (bash's echo ignores close()). The bytes are checked at the first write and then each
 * time they doubled, so a large document costs at most two parses more; the close checks
 * everything anyway. The written bytes stay in the buffer, so the close fails with the
 * same message. */
/* Whether the bytes of h->buf from `from` on, appended in order, close the document's
 * top-level braces (scanning strings in either quote and their escapes). A regex literal
 * holding a brace can only make this say so too early or too late: the parse that follows
 * decides, and the close checks everything anyway. */
static bool seq_closes(struct fs_handle *h, size_t from)
{
	bool closed = false;

	for (size_t i = from; i < h->buf.len; i++) {
		char c = h->buf.data[i];

		if (h->scan_quote) {
			if (h->scan_esc)
				h->scan_esc = false;
			else if (c == '\\')
				h->scan_esc = true;
			else if (c == h->scan_quote)
				h->scan_quote = 0;
			continue;
		}
		if (c == '"' || c == '\'') {
			h->scan_quote = c;
		} else if (c == '{' || c == '[') {
			h->scan_depth = h->scan_depth < 0 ? 1 : h->scan_depth + 1;
		} else if ((c == '}' || c == ']') && h->scan_depth > 0) {
			if (--h->scan_depth == 0)
				closed = true;
		}
	}
	return closed;
}

/* Runs the write of a whole document h holds as the close would, and rolls it back: the
 * checks of the commit (its _id against the name, field names, sizes, unique keys against
 * what is committed) fail the write() that completed it (h->lock held). */
static int doc_dry_run(struct fs_handle *h, struct dfs_err *err)
{
	struct fs_node *n = h->node;
	struct store_txn *t;
	struct store_entry e;
	int rc;

	if (n->kind != FSN_PENDING && n->kind != FSN_ENTRY)
		return 0;
	if ((rc = store_txn_begin(n->db, true, &t, err)))
		return rc == DFS_EBUSY ? (dfs_err_clear(err), 0) : rc; /* the close decides */
	if (n->kind == FSN_PENDING) {
		struct store_attrs a = fs_node_pend_get(n);

		rc = store_doc_write_text(t, n->coll, n->pending_name, h->buf.data, h->buf.len,
					  &a, &e, err);
		if (rc)
			dfs_err_prefix(err, "'%s': ", n->pending_name);
	} else if ((rc = store_entry_get(t, n->id, &e, err)) == 0 && e.kind == STORE_KIND_DOC) {
		rc = store_doc_write_text(t, n->coll, e.name, h->buf.data, h->buf.len, NULL, &e,
					  err);
		if (rc)
			dfs_err_prefix(err, "'%s': ", e.name);
	} else if (rc == DFS_ENOENT) {
		rc = 0; /* removed meanwhile: the close decides */
		dfs_err_clear(err);
	}
	store_txn_abort(t);
	/* Only what the content decides: the store being busy or full, or the collection
	 * gone meanwhile, is the close's. */
	if (rc == DFS_EBUSY || rc == DFS_EIO || rc == DFS_ENOSPC || rc == DFS_ENOENT) {
		dfs_err_clear(err);
		rc = 0;
	}
	return rc;
}

/* The check the close makes of the whole value a file other than a document holds (h->lock
 * held): an index spec (without building it), `.options`, a saved query. */
static int value_check(struct fs_handle *h, struct dfs_err *err)
{
	struct fs_node *n = h->node;
	const char *text = h->buf.data ? h->buf.data : "";
	int rc = 0;

	if (h->kind == FH_IXSPEC && (n->kind == FSN_IXPENDING || n->kind == FSN_INDEX)) {
		bson_t spec = BSON_INITIALIZER;

		rc = fs_index_spec_parse(text, h->buf.len, &spec, err);
		if (!rc)
			rc = fs_index_spec_check(n->pending_name, &spec, err);
		bson_destroy(&spec);
		if (rc && rc != DFS_EINCOMPLETE)
			dfs_err_prefix(err, "'.indexes/%s': ", n->pending_name);
	} else if (h->kind == FH_IXSPEC && n->kind == FSN_OPTIONS) {
		rc = fs_options_check(text, h->buf.len, err);
		if (rc && rc != DFS_EINCOMPLETE)
			dfs_err_prefix(err, "'.options': ");
	} else if (h->kind == FH_ENTRY && n->kind == FSN_ENTRY && h->saved) {
		struct fs_query q;

		fs_query_init(&q);
		rc = fs_query_parse_saved(text, h->buf.len, &q, err);
		fs_query_release(&q);
		if (rc && rc != DFS_EINCOMPLETE)
			dfs_err_prefix(err, "'.queries/%s': ", n->name ? n->name : "?");
	}
	return rc;
}

static bool seq_prefix_bad(struct fs_handle *h, size_t off, size_t size, struct dfs_err *err)
{
	bson_t doc = BSON_INITIALIZER;
	bool closes;
	int rc;

	if (off == 0 && h->buf.len == size) { /* from the start again (after O_TRUNC) */
		h->seq_len = h->seq_checked = 0;
		h->scan_depth = -1;
		h->scan_quote = 0;
		h->scan_esc = false;
	}
	if (off != h->seq_len || h->buf.len != off + size) {
		h->seq_len = SIZE_MAX; /* not sequential from 0: the close decides */
		return false;
	}
	h->seq_len = off + size;
	closes = seq_closes(h, off);
	if (!h->is_doc) {
		/* an index spec, .options or a saved query: checked once it is whole */
		rc = closes ? value_check(h, err) : 0;
		if (rc == DFS_EINCOMPLETE) {
			dfs_err_clear(err);
			rc = 0;
		}
		return rc != 0;
	}
	if (!closes && h->seq_checked && h->seq_len < 2 * h->seq_checked)
		return false;
	h->seq_checked = h->seq_len;
	rc = store_codec_parse_doc(h->buf.data, h->buf.len, &doc, err);
	bson_destroy(&doc);
	if (rc == DFS_EINCOMPLETE) {
		dfs_err_clear(err);
		return false;
	}
	if (rc == 0) {
		/* a whole document: every check the close makes (bash's echo ignores close) */
		dfs_err_clear(err);
		return closes && doc_dry_run(h, err) != 0;
	}
	if (h->node->kind == FSN_PENDING && h->node->pending_name)
		dfs_err_prefix(err, "'%s': ", h->node->pending_name);
	return true;
}

static void fsop_write_as(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
			  struct fuse_file_info *fi)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	size_t end = (size_t)off + size;
	struct dfs_err werr = {0};
	int rc;

	pthread_mutex_lock(&h->lock);
	if (h->kind == FH_INSERT) {
		rc = fs_inserter_feed(&h->ins, data, size, false);
		if (rc && !h->reported) {
			h->reported = true;
			fs_errlog_add(".insert: %s", h->ins.err.msg);
		}
		pthread_mutex_unlock(&h->lock);
		if (rc) {
			fuse_reply_err(req, fs_errno(rc));
		} else {
			fuse_reply_write(req, size);
		}
		return;
	}
	if (h->kind == FH_WRITE) {
		/* A request is appended whatever the offset; after its result was made, a
		 * new write starts the next request on the same descriptor. */
		if (h->applied && blank(data, size)) {
			/* the rest of a line after a request that ran (printf '%s\n' in two
			 * writes): not a new request */
			h->wend = off + (off_t)size;
			pthread_mutex_unlock(&h->lock);
			fuse_reply_write(req, size);
			return;
		}
		if (h->applied) {
			h->applied = false;
			h->written = false;
			dfs_buf_reset(&h->buf);
		}
		if (h->buf.len + size > MAX_TEXT) {
			pthread_mutex_unlock(&h->lock);
			reply_msg(req, DFS_EFBIG, "write: a request over %u bytes", MAX_TEXT);
			return;
		}
		dfs_buf_append(&h->buf, data, size);
		h->written = true;
		h->wend = off + (off_t)size;
		/* An update or delete runs at the write that completes it, which then fails
		 * with its error (wpath.c); the close fails too, as it would have. */
		rc = 0;
		if (fs_write_complete(h->node->pending_name, h->buf.data, h->buf.len))
			rc = write_apply(h);
		pthread_mutex_unlock(&h->lock);
		if (rc)
			fuse_reply_err(req, fs_errno(rc));
		else
			fuse_reply_write(req, size);
		return;
	}
	if (h->kind != FH_ENTRY && h->kind != FH_IXSPEC) {
		pthread_mutex_unlock(&h->lock);
		fuse_reply_err(req, EBADF);
		return;
	}
	h->tried = true; /* even a write that fails: then no empty document at the release */
	if (fi->flags & O_APPEND) {
		off = (off_t)h->buf.len;
		end = h->buf.len + size;
	}
	/* The write that crosses the limit fails, not the close (README: scratch files). */
	if (off < 0 || end > (h->is_doc || h->kind == FH_IXSPEC ? MAX_TEXT : MAX_SCRATCH)) {
		pthread_mutex_unlock(&h->lock);
		reply_msg(req, DFS_EFBIG, "write: file would be %zu bytes, over the limit", end);
		return;
	}
	if (end > h->buf.len) {
		dfs_buf_reserve(&h->buf, end - h->buf.len);
		memset(h->buf.data + h->buf.len, 0, end - h->buf.len);
		h->buf.len = end;
		h->buf.data[end] = '\0';
	}
	memcpy(h->buf.data + off, data, size);
	h->dirty = true;
	h->written = true;
	if (h->kind == FH_ENTRY) /* stat shows it before the commit (note 9) */
		fs_node_written_set(h->node, h, (int64_t)h->buf.len);
	if ((h->is_doc || h->kind == FH_IXSPEC || h->saved) &&
	    seq_prefix_bad(h, (size_t)off, size, &werr)) {
		snprintf(h->logged, sizeof(h->logged), "%s", werr.msg);
		pthread_mutex_unlock(&h->lock);
		reply_dfs(req, &werr, "write");
		return;
	}
	pthread_mutex_unlock(&h->lock);
	fuse_reply_write(req, size);
}

/* What flush and fsync commit of open file h (h->lock held): an .insert inserts the rest,
 * a write path runs its request (once: later calls give its result again), an index spec
 * builds its index, and a document (or at a flush any other file) is committed. fsync does
 * what the close would, with its status: a network filesystem between (sshfs) passes an
 * fsync's status on and drops a close's. 0, or a dfs code with *err to report, or with
 * *plain set when it was already reported (logged once, every close of the file fails). */
static int open_file_commit(fuse_req_t req, struct fs_handle *h, bool flush, struct dfs_err *err,
			    bool *plain)
{
	int rc;

	*plain = false;
	if (h->kind == FH_WRITE) {
		*plain = true;
		return write_apply(h);
	}
	if (h->kind == FH_IXSPEC)
		return ix_commit(h, err);
	if (h->kind != FH_INSERT)
		return flush || h->kind == FH_ENTRY ? handle_commit(req, h, err) : 0;
	rc = fs_inserter_feed(&h->ins, "", 0, true);
	/* The next listing shows what was inserted, without waiting for the notifier (note
	 * 8); an insert that failed midway kept the documents before it. A close that
	 * inserted nothing (grep -r reads .insert) keeps the listing. */
	if (h->ins.ndocs != h->ins_shown) {
		struct store_txn *t;
		struct dfs_err terr = {0};

		h->ins_shown = h->ins.ndocs;
		/* New entries: the directory's mtime and ctime (note 9). */
		if (store_txn_begin(h->node->db, true, &t, &terr) == 0) {
			if (store_coll_touch(t, h->node->coll, 0, &terr) == 0)
				store_txn_commit(t, &terr);
			else
				store_txn_abort(t);
		}
		if (terr.code)
			fs_errlog_add(".insert: %s", terr.msg);
		fs_node_touch_ino(fs_ino_entry(h->node->db, h->node->coll));
	}
	if (rc && h->reported)
		*plain = true;
	else if (rc) {
		h->reported = true;
		*err = h->ins.err;
	}
	if (!rc && h->ins.ndocs != h->ins_waited) { /* the documents stay when it fails */
		struct rs_wc_fail wf;
		uint64_t before = h->ins_mark;

		h->ins_waited = h->ins.ndocs;
		h->ins_mark = rs_wc_mark(h->node->db); /* the next wait: what comes after */
		if (rs_wc_wait(h->node->db, before, &h->wc, &wf))
			rc = rs_wc_fail_err(&wf, err);
	}
	return rc;
}

/* A saved query this handle created and that failed its check is not kept: its name goes
 * as a refused document's does (note 2), unless something was committed to it since. */
static void saved_discard(struct fs_handle *h)
{
	struct fs_node *n = h->node;
	struct dfs_err err = {0};
	struct store_entry e;
	struct store_txn *t;
	char name[FS_PENDING_NAME_CAP];
	uint64_t parent;

	if (!h->saved || !h->created || n->kind != FSN_ENTRY || !n->name)
		return;
	if (store_txn_begin(n->db, true, &t, &err))
		return;
	if (store_entry_get(t, n->id, &e, &err) || e.size != 0 ||
	    store_entry_delete(t, n->id, &err)) {
		store_txn_abort(t);
		return;
	}
	if (store_txn_commit(t, &err))
		return;
	snprintf(name, sizeof(name), "%s", n->name);
	pthread_mutex_lock(&h->lock);
	h->dirty = h->written = false;
	pthread_mutex_unlock(&h->lock);
	fs_node_repoint(n, FSN_DEAD, n->coll, 0, n->ino);
	parent = fs_node_touch_ino(fs_ino_special(n->db, n->coll, 3)); /* .queries */
	if (parent)
		fs_notify_entry_wait(parent, name);
}

static void fsop_flush_as(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	struct dfs_err err = {0};
	bool plain;
	int rc;

	pthread_mutex_lock(&h->lock);
	rc = open_file_commit(req, h, true, &err, &plain);
	pthread_mutex_unlock(&h->lock);
	if (rc && plain) {
		fuse_reply_err(req, fs_errno(rc));
		return;
	}
	if (rc && h->kind == FH_ENTRY) {
		/* No document was made: the name is gone by the time close() fails, not only
		 * once the release arrives (note 2). A later successful flush on another
		 * descriptor of the same file still creates it. */
		struct fs_node *n = h->node;
		char name[FS_PENDING_NAME_CAP];

		if (pending_drop(n, FSN_PENDING, name, sizeof(name))) {
			uint64_t parent = fs_node_touch_ino(fs_ino_entry(n->db, n->coll));

			if (parent)
				fs_notify_entry_wait(parent, name);
		}
	}
	if (rc && h->saved)
		saved_discard(h);
	if (rc && h->logged[0] && strcmp(err.msg, h->logged) == 0) {
		fuse_reply_err(req, fs_errno(rc)); /* the failed write logged it */
		return;
	}
	if (rc) {
		reply_dfs(req, &err, h->kind == FH_INSERT ? ".insert" : "write");
		return;
	}
	fuse_reply_err(req, 0);
}

static void fsop_fsync_as(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	struct dfs_err err = {0};
	bool plain;
	int rc;

	pthread_mutex_lock(&h->lock);
	rc = open_file_commit(req, h, false, &err, &plain);
	pthread_mutex_unlock(&h->lock);
	if (rc && plain) {
		fuse_reply_err(req, fs_errno(rc));
		return;
	}
	if (!rc && h->node->db)
		rc = store_db_sync(h->node->db, &err);
	if (rc && h->logged[0] && strcmp(err.msg, h->logged) == 0) {
		fuse_reply_err(req, fs_errno(rc)); /* the failed write logged it */
		return;
	}
	if (rc) {
		reply_dfs(req, &err, "fsync");
		return;
	}
	fuse_reply_err(req, 0);
}

static void fsop_release_as(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_handle *h = (struct fs_handle *)(uintptr_t)fi->fh;
	struct fs_node *n = h->node;
	char name[FS_PENDING_NAME_CAP];

	if (h->kind == FH_ENTRY && !h->tried && (n->kind == FSN_PENDING || h->trunc)) {
		/* Created and closed without a write (touch, `: > new.json`, cp of an empty
		 * file): the empty document {_id: <from the name>}, so that a create that
		 * succeeded leaves its file; the same for a document opened with O_TRUNC
		 * (`: > a.json`). Done at the release, not the flush: a shell flushes a
		 * redirection's file before the command writes to it. */
		struct dfs_err err = {0};

		pthread_mutex_lock(&h->lock);
		dfs_buf_reset(&h->buf);
		dfs_buf_puts(&h->buf, "{}");
		h->dirty = h->written = true;
		if (handle_commit(req, h, &err))
			fs_errlog_add("create: %s", err.msg);
		pthread_mutex_unlock(&h->lock);
	}
	if (pending_drop(n, FSN_PENDING, name, sizeof(name))) {
		/* Never written validly: the name goes away again. */
		uint64_t parent = fs_node_touch_ino(fs_ino_entry(n->db, n->coll));

		if (parent)
			fs_notify_entry(parent, name);
	} else {
		/* no index made: the name was never cached (timeout 0) */
		pending_drop(n, FSN_IXPENDING, NULL, 0);
	}
	handle_free(h);
	fuse_reply_err(req, 0);
}

/* ---- create, setattr --------------------------------------------------------------- */

/* Creates ".indexes/<name>": a pending index file until its spec is flushed (note 6). */
static void ix_create(fuse_req_t req, struct fs_node *p, const char *name,
		      struct fuse_file_info *fi)
{
	struct fuse_entry_param ep;
	struct store_index ix;
	struct dfs_err err = {0};
	struct store_txn *t;
	struct fs_handle *h;
	struct fs_node *n;
	int rc;

	if (!fs_index_name_ok(name)) {
		reply_msg(req, DFS_EINVAL,
			  "create '.indexes/%.200s': not an index name (.indexes/ holds one file "
			  "per index, named after it; temporary files cannot be kept there)",
			  name);
		return;
	}
	rc = store_txn_begin(p->db, false, &t, &err);
	if (!rc) {
		memset(&ix, 0, sizeof(ix));
		rc = store_index_get(t, p->coll, name, &ix, &err);
		if (!rc)
			store_index_release(&ix);
		store_txn_abort(t);
	}
	if (rc == 0) {
		fuse_reply_err(req, EEXIST); /* O_EXCL on an existing index */
		return;
	}
	if (rc != DFS_ENOENT) {
		reply_dfs(req, &err, "create");
		return;
	}
	n = fs_node_pending(FSN_IXPENDING, p->db, p->coll, name);
	pending_add(n);
	h = handle_new(FH_IXSPEC, n);
	memset(&ep, 0, sizeof(ep));
	file_attr(&ep.attr, n->ino, 0644, 0, now_ns());
	ep.ino = n->nodeid;
	ep.generation = 1;
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 1;
	if (fuse_reply_create(req, &ep, fi) == -ENOENT) {
		pending_del(n);
		handle_free(h);
		fs_node_forget(n->nodeid, 1);
	}
}

static void fsop_create_as(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			   struct fuse_file_info *fi)
{
	struct fs_node *p = fs_node_get(parent), *n;
	struct store_attrs a = caller_attrs(req, mode);
	struct fuse_entry_param ep;
	struct dfs_err err = {0};
	struct store_entry e;
	struct store_txn *t;
	struct fs_handle *h;
	bson_t id;
	int rc;

	if (p && is_snap(p->kind)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!p) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (p->kind == FSN_IXDIR && !ix_temp_name(name)) {
		ix_create(req, p, name, fi);
		return;
	}
	if (p->kind != FSN_COLL && p->kind != FSN_SAVED_DIR && p->kind != FSN_SDIR &&
	    p->kind != FSN_IXDIR) {
		reply_msg(req, DFS_EPERM, "create '%s': files live in collections (/<db>/<coll>/)",
			  name);
		return;
	}
	if (name_too_long(req, "create", name))
		return;
	if (p->kind == FSN_COLL && fixed_index(name) >= 0 &&
	    coll_fixed[fixed_index(name)].kind == FSN_OPTIONS && !opts_shown(p)) {
		/* A plain collection's .options, written (tar x of a capped collection): the
		 * options are applied at the flush, as for an open of the file (ix_commit). */
		double timeout;

		n = fs_node_ref(FSN_OPTIONS, p->db, p->coll, 0,
				fs_ino_special(p->db, p->coll, coll_fixed[fixed_index(name)].k),
				NULL);
		memset(&ep, 0, sizeof(ep));
		if (node_attr(n, &ep.attr, &timeout, &err)) {
			fs_node_forget(n->nodeid, 1);
			reply_dfs(req, &err, "create");
			return;
		}
		h = handle_new(FH_IXSPEC, n);
		ep.ino = n->nodeid;
		ep.generation = 1;
		fi->fh = (uint64_t)(uintptr_t)h;
		fi->direct_io = 1;
		if (fuse_reply_create(req, &ep, fi) == -ENOENT) {
			handle_free(h);
			fs_node_forget(n->nodeid, 1);
		}
		return;
	}
	if (p->kind == FSN_COLL && fixed_index(name) >= 0) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	memset(&ep, 0, sizeof(ep));
	bson_init(&id);
	if (p->kind == FSN_COLL && is_json_name(name)) {
		rc = store_name_to_id(name, strlen(name) - 5, &id, &err);
		bson_destroy(&id);
		if (rc) {
			dfs_err_prefix(&err, "'%s' is not a document name: ", name);
			reply_dfs(req, &err, "create");
			return;
		}
		n = fs_node_pending(FSN_PENDING, p->db, p->coll, name);
		fs_node_pend_set(n,
				 STORE_SET_MODE | STORE_SET_UID | STORE_SET_GID | STORE_SET_MTIME,
				 &a, -1);
		pending_add(n);
		h = handle_new(FH_ENTRY, n);
		h->dirty = true;
		h->is_doc = true;
		h->direct = true; /* below */
		handle_loaded(h, fs_node_gen(n), NULL);
		file_attr(&ep.attr, n->ino, a.mode, 0, now_ns());
		ep.attr.st_uid = a.uid;
		ep.attr.st_gid = a.gid;
		ep.attr_timeout = 0;
	} else {
		char full[300];

		bson_destroy(&id);
		rc = store_txn_begin(p->db, true, &t, &err);
		if (!rc) {
			rc = store_file_create(t, p->coll, store_name(p, name, full, sizeof(full)),
					       STORE_KIND_FILE, &a, NULL, 0, &e, &err);
			if (!rc)
				rc = parent_touch(t, p, &err); /* note 9 */
			if (!rc)
				rc = store_txn_commit(t, &err);
			else
				store_txn_abort(t);
		}
		if (rc) {
			reply_dfs(req, &err, "create");
			return;
		}
		n = fs_node_ref(FSN_ENTRY, p->db, p->coll, e.id, fs_ino_entry(p->db, e.id), name);
		h = handle_new(FH_ENTRY, n);
		h->saved = is_saved_query(e.name);
		h->created = true; /* a saved query that turns out invalid leaves nothing */
		handle_loaded(h, fs_node_gen(n), &e); /* empty, as in the store */
		entry_attr(&ep.attr, n->ino, &e);
		ep.attr_timeout = LONG_TIMEOUT;
	}
	ep.ino = n->nodeid;
	ep.generation = 1;
	ep.entry_timeout = LONG_TIMEOUT;
	fi->fh = (uint64_t)(uintptr_t)h;
	if (n->kind == FSN_PENDING)
		fi->direct_io = 1;
	if (fuse_reply_create(req, &ep, fi) == -ENOENT) {
		if (n->kind == FSN_PENDING)
			pending_del(n);
		handle_free(h);
		fs_node_forget(n->nodeid, 1);
	}
}

static void fsop_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct fs_node *p = fs_node_get(parent);
	struct store_attrs a = caller_attrs(req, mode);
	struct dfs_err err = {0};
	struct store_entry e;
	struct store_txn *t;
	int rc;

	if (p && is_snap(p->kind)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (ix_refuse(req, p, "mknod", name) || name_too_long(req, "mknod", name))
		return;
	/* note 10: scratch files, fifos, sockets and device nodes (the kernel lets only a
	 * caller with CAP_MKNOD make those; the number is kept, what it opens is the
	 * kernel's business, as on any filesystem mounted without nodev) */
	if (!scratch_parent(p) ||
	    !(S_ISREG(mode) || S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) ||
	      S_ISBLK(mode)) ||
	    !scratch_name_ok(p, name)) {
		reply_msg(req, DFS_EPERM,
			  "mknod '%s': only scratch files, fifos, sockets and device nodes can be "
			  "made in a collection (not under a document's name)",
			  name);
		return;
	}
	rc = store_txn_begin(p->db, true, &t, &err);
	if (!rc) {
		char full[300], num[24];
		int len = S_ISCHR(mode) || S_ISBLK(mode)
				  ? snprintf(num, sizeof(num), "%llu", (unsigned long long)rdev)
				  : 0;

		rc = store_file_create(t, p->coll, store_name(p, name, full, sizeof(full)),
				       S_ISFIFO(mode)	? STORE_KIND_FIFO
				       : S_ISSOCK(mode) ? STORE_KIND_SOCK
				       : S_ISCHR(mode)	? STORE_KIND_CHR
				       : S_ISBLK(mode)	? STORE_KIND_BLK
							: STORE_KIND_FILE,
				       &a, len ? num : NULL, (size_t)len, &e, &err);
		if (!rc)
			rc = parent_touch(t, p, &err); /* note 9 */
		rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
	}
	if (rc) {
		reply_dfs(req, &err, "mknod");
		return;
	}
	reply_entry(req, entry_node(p->db, &e, name));
}

/* Commits what the open files of node n wrote and did not commit yet. */
static int commit_written(fuse_req_t req, struct fs_node *n, struct dfs_err *err)
{
	struct fs_handle *h;
	int rc = 0;

	pthread_mutex_lock(&handles_lock);
	for (h = handles; h && !rc; h = h->next) {
		if (h->node != n || h->kind != FH_ENTRY)
			continue;
		pthread_mutex_lock(&h->lock);
		rc = handle_commit(req, h, err);
		pthread_mutex_unlock(&h->lock);
	}
	pthread_mutex_unlock(&handles_lock);
	return rc;
}

/* The attributes of a fixed or computed entry (a database, query/, .indexes/, .options, an
 * index file...) are those of its collection or database: a change of its mode or owner is
 * refused, the same mode and owner again (tar -p and rsync -a restoring what they archived)
 * succeed, and times are taken and forgotten (they are computed). Errors: DFS_EPERM. */
static int fixed_setattr(struct fs_node *n, int mask, const struct store_attrs *a,
			 struct dfs_err *err)
{
	struct stat cur;
	double timeout;
	int rc;

	if (!(mask & (STORE_SET_MODE | STORE_SET_UID | STORE_SET_GID)))
		return 0;
	if ((rc = node_attr(n, &cur, &timeout, err)))
		return rc;
	if ((mask & STORE_SET_MODE) && (a->mode & 07777) != (cur.st_mode & 07777))
		return dfs_err_set(err, DFS_EPERM,
				   "the mode of this entry is fixed (%04o; it follows its "
				   "collection or database)",
				   (unsigned)(cur.st_mode & 07777));
	if (((mask & STORE_SET_UID) && a->uid != cur.st_uid) ||
	    ((mask & STORE_SET_GID) && a->gid != cur.st_gid))
		return dfs_err_set(err, DFS_EPERM,
				   "the owner of this entry is fixed (%u:%u; it follows its "
				   "collection or database)",
				   (unsigned)cur.st_uid, (unsigned)cur.st_gid);
	return 0;
}

static void fsop_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			 struct fuse_file_info *fi)
{
	struct fs_node *n = fs_node_get(ino);
	struct dfs_err err = {0};
	struct store_txn *t = NULL;
	struct stat st;
	double timeout;
	int rc = 0;

	if (n && is_snap(n->kind)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		struct fs_handle *h = fi ? (struct fs_handle *)(uintptr_t)fi->fh : NULL;
		struct fs_handle tmp;
		size_t size = (size_t)attr->st_size;

		if (h && h->kind == FH_IXSPEC) {
			/* An index file open for writing: its spec buffer. */
			pthread_mutex_lock(&h->lock);
			if (size > MAX_TEXT) {
				pthread_mutex_unlock(&h->lock);
				fuse_reply_err(req, EFBIG);
				return;
			}
			if (size > h->buf.len) {
				dfs_buf_reserve(&h->buf, size - h->buf.len);
				memset(h->buf.data + h->buf.len, 0, size - h->buf.len);
			}
			h->buf.len = size;
			if (h->buf.data)
				h->buf.data[size] = '\0';
			h->written = true;
			pthread_mutex_unlock(&h->lock);
			goto attrs;
		}
		if (n->kind == FSN_INDEX || n->kind == FSN_IXPENDING) {
			reply_msg(req, DFS_EINVAL,
				  "truncate '.indexes/%s': write a spec to the file instead",
				  n->pending_name);
			return;
		}
		if (n->kind != FSN_ENTRY && n->kind != FSN_PENDING && n->kind != FSN_INSERT &&
		    n->kind != FSN_DEAD && n->kind != FSN_WRITE && n->kind != FSN_OPTIONS) {
			fuse_reply_err(req, EISDIR);
			return;
		}
		if (n->kind == FSN_INSERT || n->kind == FSN_WRITE || n->kind == FSN_OPTIONS)
			goto attrs; /* "> .insert" truncates nothing */
		if (attr->st_size < 0 || size > MAX_SCRATCH) {
			fuse_reply_err(req, EFBIG);
			return;
		}
		if (!h && n->kind == FSN_ENTRY) {
			/* truncate(2) without an open file: change and commit at once. */
			memset(&tmp, 0, sizeof(tmp));
			tmp.kind = FH_ENTRY;
			tmp.node = n;
			dfs_buf_init(&tmp.buf);
			rc = store_txn_begin(n->db, false, &t, &err);
			if (!rc) {
				rc = store_entry_read(t, n->id, &tmp.buf, &err);
				store_txn_abort(t);
			}
			h = &tmp;
		}
		if (!rc && h && h->kind == FH_ENTRY) {
			if (h != &tmp)
				pthread_mutex_lock(&h->lock);
			if (size > h->buf.len) {
				dfs_buf_reserve(&h->buf, size - h->buf.len);
				memset(h->buf.data + h->buf.len, 0, size - h->buf.len);
			}
			h->buf.len = size;
			if (h->buf.data)
				h->buf.data[size] = '\0';
			h->dirty = true;
			h->written = true;
			if (h == &tmp) {
				rc = handle_commit(req, h, &err);
			} else {
				fs_node_written_set(n, h, (int64_t)size); /* note 9 */
				pthread_mutex_unlock(&h->lock);
			}
		}
		if (h == &tmp)
			dfs_buf_release(&tmp.buf);
		if (rc) {
			reply_dfs(req, &err, "truncate");
			return;
		}
	}
attrs:
	if (to_set &
	    (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_MTIME |
	     FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		struct store_attrs a = {(uint32_t)attr->st_mode, attr->st_uid, attr->st_gid,
					(int64_t)attr->st_mtim.tv_sec * 1000000000 +
						attr->st_mtim.tv_nsec};
		/* the atime to keep (touch -a; -1: unchanged) */
		int64_t atime = (int64_t)attr->st_atim.tv_sec * 1000000000 + attr->st_atim.tv_nsec;
		int mask = 0;

		if (to_set & FUSE_SET_ATTR_MODE)
			mask |= STORE_SET_MODE;
		if (to_set & FUSE_SET_ATTR_UID)
			mask |= STORE_SET_UID;
		if (to_set & FUSE_SET_ATTR_GID)
			mask |= STORE_SET_GID;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			a.mtime_ns = now_ns();
		if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
			mask |= STORE_SET_MTIME;
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			atime = now_ns();
		else if (!(to_set & FUSE_SET_ATTR_ATIME))
			atime = -1;
		/* tar and cp -p set the times on the open file before its close: its bytes are
		 * committed first, so that the commit does not make the mtime now. */
		if ((mask & STORE_SET_MTIME) && n->kind == FSN_ENTRY &&
		    (rc = commit_written(req, n, &err))) {
			reply_dfs(req, &err, "setattr");
			return;
		}
		/* .queries/ and .indexes/ show their collection's mode, owner and times:
		 * setting theirs sets the collection's (tar and rsync restore them before the
		 * collection's own, with the same values). */
		bool coll_view = n->kind == FSN_COLL || n->kind == FSN_SAVED_DIR ||
				 n->kind == FSN_IXDIR;

		if (n->kind == FSN_ENTRY || n->kind == FSN_SDIR || coll_view) {
			t = NULL; /* store_txn_begin leaves it alone when it fails */
			rc = store_txn_begin(n->db, true, &t, &err);
			if (!rc && !coll_view) {
				if (mask || atime < 0)
					rc = store_entry_setattr(t, n->id, mask, &a, &err);
				if (!rc && atime >= 0)
					rc = store_entry_set_atime(t, n->id, atime, &err);
			} else if (!rc) {
				struct store_coll c;

				rc = store_coll_by_id(t, n->coll, &c, &err);
				if (!rc)
					rc = store_coll_setattr(
						t, n->coll,
						(mask & STORE_SET_MODE) ? a.mode : c.mode,
						(mask & STORE_SET_UID) ? a.uid : c.uid,
						(mask & STORE_SET_GID) ? a.gid : c.gid, &err);
				if (!rc && (mask & STORE_SET_MTIME))
					rc = store_coll_touch(t, n->coll, a.mtime_ns, &err);
			}
			if (!rc)
				rc = store_txn_commit(t, &err);
			else if (t)
				store_txn_abort(t);
		} else if (n->kind == FSN_PENDING) {
			fs_node_pend_set(n, mask, &a, atime); /* for its first commit */
		} else if (n->kind == FSN_DEAD) {
			/* fchmod of an unlinked file (note 9) */
			fs_node_orphan_set(n, mask, &a, atime);
		} else if (n->kind != FSN_IXPENDING) {
			rc = fixed_setattr(n, mask, &a, &err);
		}
		if (rc) {
			reply_dfs(req, &err, "setattr");
			return;
		}
	}
	fs_node_bump(n); /* whatever changed, the cached attributes are old */
	if ((rc = node_attr(n, &st, &timeout, &err))) {
		reply_dfs(req, &err, "setattr");
		return;
	}
	if (fi &&
	    (n->kind == FSN_PENDING || n->kind == FSN_IXPENDING ||
	     (n->kind == FSN_INDEX && ((struct fs_handle *)(uintptr_t)fi->fh)->kind == FH_IXSPEC)))
		st.st_size = (off_t)((struct fs_handle *)(uintptr_t)fi->fh)->buf.len;
	fuse_reply_attr(req, &st, timeout);
}

/* ---- directories ------------------------------------------------------------------- */

size_t fs_dirplus_nodes = 1000000; /* mount option dirplus_nodes (note 4) */

static void fsop_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fs_node *p = fs_node_get(parent);
	struct store_attrs a = caller_attrs(req, mode);
	struct dfs_err err = {0};
	struct store_db *db;
	struct store_txn *t;
	struct store_coll c;
	int rc;

	if (p && is_snap(p->kind)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (name_too_long(req, "mkdir", name) || ix_refuse(req, p, "mkdir", name))
		return;
	if (!p) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (p->kind == FSN_ROOT) {
		if (strcmp(name, ".docfs") == 0 || changes_name(name) ||
		    store_db_get(fs_store, name, false, &db, NULL) == 0) {
			fuse_reply_err(req, EEXIST);
			return;
		}
		if ((rc = store_db_get(fs_store, name, true, &db, &err))) {
			reply_dfs(req, &err, "mkdir");
			return;
		}
		fs_notify_watch(db);
		reply_entry(req, fs_node_ref(FSN_DB, db, 0, 0, fs_ino_db(db), NULL));
		return;
	}
	if (scratch_parent(p)) {
		/* note 10: a scratch directory */
		struct store_entry e;
		char full[300];

		if (p->kind == FSN_COLL && fixed_index(name) >= 0) {
			fuse_reply_err(req, EEXIST);
			return;
		}
		if (!scratch_name_ok(p, name)) {
			reply_msg(req, DFS_EPERM,
				  "mkdir '%s': a name ending in .json is a document's; a directory "
				  "in a collection takes another name",
				  name);
			return;
		}
		rc = store_txn_begin(p->db, true, &t, &err);
		if (!rc) {
			rc = store_file_create(t, p->coll, store_name(p, name, full, sizeof(full)),
					       STORE_KIND_DIR, &a, NULL, 0, &e, &err);
			if (!rc)
				rc = parent_touch(t, p, &err);
			rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
		}
		if (rc) {
			reply_dfs(req, &err, "mkdir");
			return;
		}
		reply_entry(req, entry_node(p->db, &e, name));
		return;
	}
	if (p->kind != FSN_DB) {
		reply_msg(req, DFS_EPERM, "mkdir '%s': not in a database or a collection", name);
		return;
	}
	if (changes_name(name) || stats_name(name)) {
		reply_msg(req, DFS_EEXIST, "mkdir '%s': a file of the database has that name",
			  name);
		return;
	}
	rc = store_txn_begin(p->db, true, &t, &err);
	if (!rc) {
		rc = store_coll_create(t, name, a.mode, a.uid, a.gid, &c, &err);
		rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
	}
	if (rc) {
		reply_dfs(req, &err, "mkdir");
		return;
	}
	reply_entry(req, fs_node_ref(FSN_COLL, p->db, c.id, c.id, fs_ino_entry(p->db, c.id), NULL));
}

/* Stops store_entry_list at the first saved query (a scratch entry under SAVED_PREFIX). */
static int saved_seen(void *ctx, const struct store_entry *e, uint64_t next)
{
	(void)ctx;
	(void)next;
	if (e->kind == STORE_KIND_DOC)
		return 2; /* scratch entries come first: there is none */
	return strncmp(e->name, SAVED_PREFIX, strlen(SAVED_PREFIX)) == 0;
}

/* note 12: 0 when the fixed directory name of collection p (kind) is empty as listed:
 * query/, explain/, aggregate/, update/ and delete/ always are, .indexes/ when only _id_
 * is left, .queries/ when no query is saved; else DFS_ENOTEMPTY, or not a directory. */
static int fixed_dir_empty(struct fs_node *p, int kind, const char *name, struct dfs_err *err)
{
	struct store_index *ixs = NULL;
	struct store_txn *t;
	int rc, nix = 0;

	if (kind != FSN_QDIR && kind != FSN_XDIR && kind != FSN_ADIR && kind != FSN_UDIR &&
	    kind != FSN_DDIR && kind != FSN_IXDIR && kind != FSN_SAVED_DIR)
		return dfs_err_set(err, DFS_ENOTDIR, "rmdir '%s': not a directory", name);
	if (kind != FSN_IXDIR && kind != FSN_SAVED_DIR)
		return 0;
	if ((rc = store_txn_begin(p->db, false, &t, err)))
		return rc;
	if (kind == FSN_IXDIR) {
		rc = store_index_list(t, p->coll, &ixs, &nix, err);
		if (!rc && nix > 1)
			rc = dfs_err_set(err, DFS_ENOTEMPTY,
					 "rmdir '%s': indexes besides _id_ remain (%d) "
					 "(remove their files first)",
					 name, nix - 1);
		if (ixs)
			store_index_list_free(ixs, nix);
	} else {
		rc = store_entry_list(t, p->coll, 0, saved_seen, NULL, err);
		if (rc == 1)
			rc = dfs_err_set(err, DFS_ENOTEMPTY,
					 "rmdir '%s': queries are saved here (remove them first)",
					 name);
		else if (rc == 2)
			rc = 0;
	}
	store_txn_abort(t);
	return rc;
}

static void fsop_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_node *p = fs_node_get(parent);
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;
	int64_t ndocs = 0, nfiles = 0;
	int rc, fi;

	if (p && is_snap(p->kind)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!p) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (p->kind == FSN_ROOT) {
		if (strcmp(name, ".docfs") == 0) {
			fuse_reply_err(req, EPERM);
			return;
		}
		if ((rc = store_db_drop(fs_store, name, &err)))
			reply_dfs(req, &err, "rmdir");
		else
			fuse_reply_err(req, 0);
		return;
	}
	fi = p->kind == FSN_COLL ? fixed_index(name) : -1;
	if (fi >= 0 && coll_fixed[fi].kind != FSN_INSERT && coll_fixed[fi].kind != FSN_WRITE) {
		/* note 12: accepted when empty, and the directory stays */
		if ((rc = fixed_dir_empty(p, coll_fixed[fi].kind, name, &err)))
			reply_dfs(req, &err, "rmdir");
		else
			fuse_reply_err(req, 0);
		return;
	}
	if (scratch_parent(p) && fi < 0) {
		/* note 10: a scratch directory, when empty */
		struct store_entry e;
		const char *base = name;
		char full[300];
		bool any = false;

		name = store_name(p, name, full, sizeof(full));
		rc = store_txn_begin(p->db, true, &t, &err);
		if (rc) {
			reply_dfs(req, &err, "rmdir");
			return;
		}
		rc = store_entry_lookup(t, p->coll, name, &e, &err);
		if (!rc && e.kind != STORE_KIND_DIR)
			rc = dfs_err_set(&err, DFS_ENOTDIR, "'%s' is not a directory", base);
		if (!rc)
			rc = store_dir_any(t, p->coll, e.id, &any, &err);
		if (!rc && any)
			rc = dfs_err_set(&err, DFS_ENOTEMPTY, "directory '%s' is not empty", base);
		if (!rc)
			rc = store_entry_delete(t, e.row, &err);
		if (!rc)
			rc = parent_touch(t, p, &err);
		rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
		if (rc)
			reply_dfs(req, &err, "rmdir");
		else
			fuse_reply_err(req, 0);
		return;
	}
	if (p->kind != FSN_DB) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	rc = store_txn_begin(p->db, true, &t, &err);
	if (rc) {
		reply_dfs(req, &err, "rmdir");
		return;
	}
	rc = store_coll_find(t, name, &c, &err);
	if (!rc)
		rc = store_coll_count(t, c.id, &ndocs, &nfiles, &err);
	if (!rc && ndocs + nfiles > 0)
		rc = dfs_err_set(&err, DFS_ENOTEMPTY,
				 "collection '%s' holds %lld documents and %lld files", name,
				 (long long)ndocs, (long long)nfiles);
	if (!rc)
		rc = store_coll_drop(t, c.id, &err);
	rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
	if (rc)
		reply_dfs(req, &err, "rmdir");
	else
		fuse_reply_err(req, 0);
}

struct dir_fill {
	fuse_req_t req;
	char *buf;
	size_t size, used;
	bool plus;
	struct fs_node *dir;
	bool full;
};

/* Adds one entry; returns 1 (stop) when it does not fit. n (referenced) is consumed. */
static int dir_add(struct dir_fill *f, const char *name, struct fs_node *n, const struct stat *st,
		   double timeout, off_t next)
{
	size_t need;

	if (f->plus) {
		struct fuse_entry_param ep;

		memset(&ep, 0, sizeof(ep));
		need = fuse_add_direntry_plus(f->req, NULL, 0, name, NULL, 0);
		if (f->used + need > f->size) {
			if (n)
				fs_node_forget(n->nodeid, 1);
			f->full = true;
			return 1;
		}
		ep.attr = *st;
		if (n) {
			ep.ino = n->nodeid;
			ep.generation = 1;
			ep.attr_timeout = timeout;
			/* An index may be dropped by another process: never cache its name. */
			ep.entry_timeout = n->kind == FSN_INDEX ? 0 : LONG_TIMEOUT;
		}
		fuse_add_direntry_plus(f->req, f->buf + f->used, f->size - f->used, name, &ep,
				       next);
	} else {
		need = fuse_add_direntry(f->req, NULL, 0, name, NULL, 0);
		if (f->used + need > f->size) {
			f->full = true;
			return 1;
		}
		fuse_add_direntry(f->req, f->buf + f->used, f->size - f->used, name, st, next);
	}
	f->used += need;
	return 0;
}

static int dir_add_entry(void *ctx, const struct store_entry *e, uint64_t next)
{
	struct dir_fill *f = ctx;
	struct fs_node *n = NULL;
	const char *name = e->name;
	struct stat st;

	if (f->dir->kind == FSN_SAVED_DIR) {
		/* Saved queries are scratch files under SAVED_PREFIX; documents come after. */
		if (e->kind == STORE_KIND_DOC)
			return 2;
		if (strncmp(name, SAVED_PREFIX, strlen(SAVED_PREFIX)) != 0)
			return 0;
		name += strlen(SAVED_PREFIX);
	} else if (f->dir->kind == FSN_SDIR) {
		/* note 10: "<its id>/<name>" (scratch files come before documents) */
		char prefix[32];
		size_t len;

		if (e->kind == STORE_KIND_DOC)
			return 2;
		len = (size_t)snprintf(prefix, sizeof(prefix), "%lld/", (long long)f->dir->id);
		if (strncmp(name, prefix, len) != 0 || strchr(name + len, '/'))
			return 0;
		name += len;
	} else if (strchr(name, '/')) {
		return 0;
	}
	entry_attr(&st, fs_ino_entry(f->dir->db, e->id), e);
	if (f->plus && fs_node_count() < fs_dirplus_nodes) {
		if (f->used + fuse_add_direntry_plus(f->req, NULL, 0, name, NULL, 0) > f->size) {
			f->full = true;
			return 1;
		}
		n = entry_node(f->dir->db, e, name);
	}
	return dir_add(f, name, n, &st, LONG_TIMEOUT, (off_t)next);
}

struct name_list {
	char **names;
	bool *files; /* the entry is a regular file (else a directory) */
	size_t n, cap;
};

static int name_list_put(struct name_list *l, const char *name, bool file)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->names = realloc(l->names, l->cap * sizeof(*l->names));
		l->files = realloc(l->files, l->cap * sizeof(*l->files));
		if (!l->names || !l->files)
			abort();
	}
	l->files[l->n] = file;
	l->names[l->n++] = strdup(name);
	return 0;
}

static int name_list_add(void *ctx, const char *name)
{
	return name_list_put(ctx, name, false);
}

static int file_list_add(void *ctx, const char *name)
{
	return name_list_put(ctx, name, true);
}

static int git_list_add(void *ctx, const struct store_git_entry *e)
{
	return name_list_put(ctx, e->name, !e->is_dir);
}

static int coll_list_add(void *ctx, const struct store_coll *c)
{
	return name_list_add(ctx, c->name);
}

/* note 11: the temporary files of .indexes/ (scratch files come before documents). */
static int ixtemp_list_add(void *ctx, const struct store_entry *e, uint64_t next)
{
	(void)next;
	if (e->kind == STORE_KIND_DOC)
		return 2;
	if (strncmp(e->name, IXTEMP_PREFIX, strlen(IXTEMP_PREFIX)) != 0)
		return 0;
	return name_list_put(ctx, e->name + strlen(IXTEMP_PREFIX), true);
}

static void name_list_free(struct name_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	free(l->files);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus,
		       struct fs_handle *dh)
{
	struct fs_node *d = fs_node_get(ino);
	struct dir_fill f = {req, NULL, size, 0, plus, d, false};
	struct dfs_err err = {0};
	struct stat st;
	int rc = 0;

	if (!d) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	/* note 8: a listing from the start (again, after a rewinddir) is one the kernel may
	 * cache; it begins before anything is read from the store. */
	if (dh && off == 0) {
		if (dh->listing)
			fs_node_list_end(d, false);
		fs_node_list_begin(d);
		dh->listing = true;
	}
	f.buf = malloc(size);
	if (!f.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memset(&st, 0, sizeof(st));
	st.st_mode = S_IFDIR;
	/* Offsets 1 and 2 are "." and "..": both carry no lookup reference. */
	if (off < 1 && dir_add(&f, ".", NULL, &st, 0, 1))
		goto reply;
	if (off < 2 && dir_add(&f, "..", NULL, &st, 0, 2))
		goto reply;
	if (d->kind == FSN_UDIR || d->kind == FSN_DDIR || d->kind == FSN_ADIR ||
	    d->kind == FSN_QPART)
		goto reply; /* aggregate/ and the write paths list empty, like query/ */
	if (d->kind == FSN_COLL || d->kind == FSN_SAVED_DIR || d->kind == FSN_QDIR ||
	    d->kind == FSN_XDIR || d->kind == FSN_SDIR) {
		/* Offsets 3.. are the fixed entries, then the store's cookies (>= 2^60). */
		uint64_t cookie = (uint64_t)off >= (1ULL << 60) ? (uint64_t)off : 0;
		struct store_txn *t;

		for (size_t i = off < 2 ? 0 : (size_t)(off - 2);
		     d->kind == FSN_COLL && !cookie && i < NFIXED; i++) {
			struct fs_node *n = NULL;
			double timeout;

			/* .changes holds copies of documents and .stats figures computed at
			 * each open: grep -r, cp -r and rsync of a collection must not read
			 * them unasked, nor a copy carry them. They are there by name. */
			if (coll_fixed[i].kind == FSN_CHANGES || coll_fixed[i].kind == FSN_STATS)
				continue;
			/* .insert and .bulk read empty: they are ways in, not content, and tar
			 * and rsync would only fail to write them back. .options is there when
			 * the collection has options (backups restore it); see opts_shown. */
			if (coll_fixed[i].kind == FSN_INSERT || coll_fixed[i].kind == FSN_WRITE ||
			    (coll_fixed[i].kind == FSN_OPTIONS && !opts_shown(d)))
				continue;
			st.st_ino = fs_ino_special(d->db, d->coll, coll_fixed[i].k);
			st.st_mode = coll_fixed[i].kind == FSN_INSERT ||
						     coll_fixed[i].kind == FSN_WRITE ||
						     coll_fixed[i].kind == FSN_OPTIONS
					     ? S_IFREG | 0644
					     : S_IFDIR | 0755;
			if (plus) {
				if (f.used + fuse_add_direntry_plus(req, NULL, 0,
								    coll_fixed[i].name, NULL, 0) >
				    f.size)
					goto reply;
				n = coll_fixed[i].kind == FSN_WRITE
					    ? write_node(d, coll_fixed[i].name)
					    : fs_node_ref(coll_fixed[i].kind, d->db, d->coll, 0,
							  st.st_ino, NULL);
				if (node_attr(n, &st, &timeout, &err)) {
					fs_node_forget(n->nodeid, 1);
					goto reply;
				}
			}
			if (dir_add(&f, coll_fixed[i].name, n, &st, LONG_TIMEOUT, (off_t)(3 + i)))
				goto reply;
		}
		/* query/ and explain/ list empty: find and grep -r never run a query by
		 * accident. */
		if (d->kind == FSN_QDIR || d->kind == FSN_XDIR)
			goto reply;
		rc = store_txn_begin(d->db, false, &t, &err);
		if (!rc) {
			rc = store_entry_list(t, d->coll, cookie, dir_add_entry, &f, &err);
			store_txn_abort(t);
			if (rc == 1 || rc == 2)
				rc = 0;
		}
	} else {
		struct name_list l = {0};

		if (d->kind == FSN_ROOT) {
			name_list_add(&l, ".docfs");
			name_list_add(&l, ".snapshots");
			if (rs_node_active())
				name_list_add(&l, ".replset");
			rc = store_db_list(fs_store, name_list_add, &l, &err);
		} else if (d->kind == FSN_DOCFS_DIR && d->id) {
			for (int i = DF__COUNT; i < DF__ALL; i++)
				file_list_add(&l, replset_files[i - DF__COUNT]);
		} else if (d->kind == FSN_DOCFS_DIR) {
			for (int i = 0; i < DF__COUNT; i++)
				file_list_add(&l, docfs_files[i]);
		} else if (d->kind == FSN_SNAP_ROOT || d->kind == FSN_SNAP_DIR) {
			struct store_git *g = snap_repo(&err);

			if (!g) {
				/* No snapshot taken yet: an empty directory. */
				rc = 0;
				dfs_err_clear(&err);
			} else if (d->kind == FSN_SNAP_ROOT) {
				rc = store_git_refs(g, name_list_add, &l, &err);
			} else {
				char commit[41];
				const char *path = snap_path(d, commit);

				rc = store_git_list(g, commit, path, git_list_add, &l, &err);
			}
		} else if (d->kind == FSN_DB) {
			struct store_txn *t;

			/* Only collections: `ls -A <db>` lists them. .stats and .changes are
			 * there by name. */
			rc = store_txn_begin(d->db, false, &t, &err);
			if (!rc) {
				rc = store_coll_list(t, coll_list_add, &l, &err);
				store_txn_abort(t);
			}
		} else if (d->kind == FSN_IXDIR) {
			struct store_index *ixs = NULL;
			struct store_txn *t;
			int nix = 0;

			/* "_id_" first, then by creation (store_index_list's order). */
			rc = store_txn_begin(d->db, false, &t, &err);
			if (!rc) {
				rc = store_index_list(t, d->coll, &ixs, &nix, &err);
				store_txn_abort(t);
			}
			/* _id_ is in every collection, the same: an archive need not hold it
			 * and tar could not write it back over itself (EEXIST, then unlink).
			 * It is there by name. */
			for (int i = 0; !rc && i < nix; i++)
				if (strcmp(ixs[i].name, "_id_") != 0)
					file_list_add(&l, ixs[i].name);
			if (ixs)
				store_index_list_free(ixs, nix);
			/* then the temporary files (note 11) */
			if (!rc && !(rc = store_txn_begin(d->db, false, &t, &err))) {
				rc = store_entry_list(t, d->coll, 0, ixtemp_list_add, &l, &err);
				store_txn_abort(t);
				if (rc == 1 || rc == 2)
					rc = 0;
			}
		} else {
			rc = dfs_err_set(&err, DFS_ENOTDIR, "not a directory");
		}
		for (size_t i = (size_t)(off < 2 ? 0 : off - 2); !rc && i < l.n; i++) {
			struct fs_node *n = NULL;
			double timeout;

			if (plus) {
				if (f.used + fuse_add_direntry_plus(req, NULL, 0, l.names[i], NULL,
								    0) >
				    f.size)
					break;
				n = lookup_node(d, l.names[i], &err);
				if (!n) {
					dfs_err_clear(&err);
					continue;
				}
				if (node_attr(n, &st, &timeout, &err)) {
					fs_node_forget(n->nodeid, 1);
					dfs_err_clear(&err);
					continue;
				}
			} else {
				st.st_mode = l.files[i] ? S_IFREG : S_IFDIR;
				st.st_ino = 0;
				timeout = 0;
			}
			if (dir_add(&f, l.names[i], n, &st, timeout, (off_t)(i + 3)))
				break;
		}
		name_list_free(&l);
	}
reply:
	if (rc && f.used == 0) {
		free(f.buf);
		reply_dfs(req, &err, "readdir");
		return;
	}
	if (dh && dh->listing && !rc && f.used == 0) {
		/* The end: the kernel now holds the whole listing. */
		fs_node_list_end(d, true);
		dh->listing = false;
	}
	fuse_reply_buf(req, f.buf, f.used);
	free(f.buf);
}

/* note 8: a collection's listing is cached by the kernel, and kept while nothing in the
 * collection changed since the listing that filled the cache began. */
static void fsop_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_node *d = fs_node_get(ino);
	struct fs_handle *dh = NULL;

	if (d && d->kind == FSN_QPART) {
		/* `cat` of a query that never became whole (`cat 'query/{a: "x'`) ends here:
		 * the message says what the path holds. */
		int f = qfamily_of_tag(d->pending_name[0]);

		fs_errlog_add("%s '%s': not a whole query yet (a path component with a '/' "
			      "continues it)",
			      f >= 0 ? qfamilies[f].what : "query", d->pending_name + 1);
	}
	if (d && d->kind == FSN_COLL) {
		dh = handle_new(FH_DIR, d);
		fi->cache_readdir = 1;
		fi->keep_cache = fs_node_cache_ok(d);
		fs_curop_count_listing(fi->keep_cache);
	}
	fi->fh = (uint64_t)(uintptr_t)dh;
	if (fuse_reply_open(req, fi) == -ENOENT && dh)
		handle_free(dh);
}

static void fsop_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_handle *dh = (struct fs_handle *)(uintptr_t)fi->fh;

	if (dh) {
		if (dh->listing)
			fs_node_list_end(dh->node, false);
		handle_free(dh);
	}
	fuse_reply_err(req, 0);
}

static void fsop_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, false, (struct fs_handle *)(uintptr_t)fi->fh);
}

static void fsop_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			     struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, true, (struct fs_handle *)(uintptr_t)fi->fh);
}

/* ---- unlink, rename, symlinks ------------------------------------------------------ */

/* rm .indexes/<name>: drops the index (EPERM for "_id_"). */
static void ix_unlink(fuse_req_t req, struct fs_node *p, const char *name)
{
	struct fs_node *pn = pending_find(FSN_IXPENDING, p->db, p->coll, name);
	struct dfs_err err = {0};

	if (pn) {
		/* Created, not yet written: the open file can no longer make the index. */
		pending_del(pn);
		fs_node_repoint(pn, FSN_DEAD, pn->coll, 0, pn->ino);
		fs_node_forget(pn->nodeid, 1);
		fuse_reply_err(req, 0);
		return;
	}
	if (fs_index_drop(p->db, p->coll, name, &err)) {
		dfs_err_prefix(&err, "rm '.indexes/%s': ", name);
		reply_dfs(req, &err, "unlink");
		return;
	}
	fuse_reply_err(req, 0);
}

/* note 9: the entry called name in p's collection is about to be unlinked or replaced.
 * Returns the node the kernel holds for it (Borrowed: the kernel holds it for the request),
 * or NULL, with *e its entry; every open file of that node has its content loaded first, so
 * that it keeps reading it once the store has none. Read in a transaction of its own before
 * the writing one: a commit takes a handle's lock and then the store's write lock, so this
 * must never hold the write lock while it waits for a handle's lock. */
static struct fs_node *orphan_prepare(struct fs_node *p, const char *name, struct store_entry *e)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct fs_handle *h;
	struct fs_node *n;
	uint64_t nodeid;

	if (store_txn_begin(p->db, false, &t, &err))
		return NULL;
	if (store_entry_lookup(t, p->coll, name, e, &err) ||
	    !(nodeid = fs_node_touch_ino(fs_ino_entry(p->db, e->id))) ||
	    !(n = fs_node_get(nodeid)) || n->kind != FSN_ENTRY || n->id != e->id) {
		store_txn_abort(t);
		return NULL;
	}
	pthread_mutex_lock(&handles_lock);
	for (h = handles; h; h = h->next) {
		if (h->node != n || h->kind != FH_ENTRY)
			continue;
		pthread_mutex_lock(&h->lock);
		if (!h->loaded) {
			dfs_buf_reset(&h->buf);
			if (store_entry_read(t, e->id, &h->buf, &err) == 0) {
				h->loaded = true;
				handle_loaded(h, fs_node_gen(n), e);
			}
		}
		pthread_mutex_unlock(&h->lock);
	}
	pthread_mutex_unlock(&handles_lock);
	store_txn_abort(t);
	return n;
}

/* note 9: n (orphan_prepare's node of entry e) is gone from the store: it stays, with its
 * attributes and st_nlink 0, for its open files. */
static void orphan_keep(struct fs_node *n, const struct store_entry *e)
{
	struct stat st;

	if (!n || n->kind != FSN_ENTRY || n->id != e->id)
		return;
	entry_attr(&st, n->ino, e);
	ts_from_ns(&st.st_ctim, now_ns()); /* its link count changed */
	fs_node_orphan(n, &st);
}

static void fsop_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_node *p = fs_node_get(parent), *on;
	struct dfs_err err = {0};
	struct store_entry e, oe;
	struct store_txn *t;
	int rc;

	if (p && is_snap(p->kind)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	char full[300];

	if (p && p->kind == FSN_IXDIR && !ix_temp_name(name)) {
		ix_unlink(req, p, name);
		return;
	}
	if (!p || (p->kind != FSN_COLL && p->kind != FSN_SAVED_DIR && p->kind != FSN_SDIR &&
		   p->kind != FSN_IXDIR)) {
		fuse_reply_err(req, p ? EPERM : ESTALE);
		return;
	}
	if (p->kind == FSN_COLL && fixed_index(name) >= 0 &&
	    coll_fixed[fixed_index(name)].kind == FSN_OPTIONS && opts_shown(p) &&
	    opts_hide(p, true, false)) {
		/* note 11: tar x over a capped collection; the cap stays */
		fuse_reply_err(req, 0);
		return;
	}
	if (p->kind == FSN_COLL && fixed_index(name) >= 0) {
		reply_msg(req, DFS_EPERM, "unlink '%s': it is part of every collection", name);
		return;
	}
	name = store_name(p, name, full, sizeof(full));
	on = orphan_prepare(p, name, &oe);
	rc = store_txn_begin(p->db, true, &t, &err);
	if (rc) {
		reply_dfs(req, &err, "unlink");
		return;
	}
	rc = store_entry_lookup(t, p->coll, name, &e, &err);
	if (rc == DFS_ENOENT) {
		struct fs_node *pn = pending_find(FSN_PENDING, p->db, p->coll, name);

		if (pn) {
			/* A created document never written: forget its name, and make sure an
			 * open file of it can no longer bring it into being. Its open files
			 * keep what they wrote (note 9). */
			struct stat st;
			double timeout;

			pending_del(pn);
			node_attr(pn, &st, &timeout, &err);
			fs_node_repoint(pn, FSN_DEAD, pn->coll, 0, pn->ino);
			fs_node_orphan(pn, &st);
			fs_node_forget(pn->nodeid, 1);
			store_txn_abort(t);
			fuse_reply_err(req, 0);
			return;
		}
	}
	if (!rc && e.kind == STORE_KIND_DIR)
		rc = dfs_err_set(&err, DFS_EISDIR, "'%s' is a directory (rmdir removes it)",
				 strrchr(name, '/') ? strrchr(name, '/') + 1 : name);
	if (!rc)
		rc = store_entry_delete(t, e.row, &err); /* this name (note 10) */
	if (!rc)
		rc = p->kind == FSN_SAVED_DIR ? store_coll_touch(t, p->coll, 0, &err)
					      : parent_touch(t, p, &err);
	rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
	if (rc) {
		reply_dfs(req, &err, "unlink");
		return;
	}
	if (on && oe.id == e.id && e.nlink <= 1)
		orphan_keep(on, &e);
	else if (on)
		fs_node_bump(on); /* one name less: its link count */
	fuse_reply_err(req, 0);
}

/* note 10: what rename(2) requires of directories, before src (an entry of the store) moves
 * to newname (its store name) in np: a directory replaces only an empty directory, a file
 * only a file, and a directory moves neither into itself nor out of its collection. */
static int rename_dir_check(struct store_txn *t, const struct store_entry *src,
			    const struct fs_node *np, const char *newname, struct dfs_err *err)
{
	struct store_entry dst, up;
	bool any = false;
	int64_t id;
	int rc;

	if (store_entry_lookup(t, np->coll, newname, &dst, NULL) == 0 && dst.row != src->row) {
		if (src->kind == STORE_KIND_DIR && dst.kind != STORE_KIND_DIR)
			return dfs_err_set(err, DFS_ENOTDIR, "the target is not a directory");
		if (src->kind != STORE_KIND_DIR && dst.kind == STORE_KIND_DIR)
			return dfs_err_set(err, DFS_EISDIR, "the target is a directory");
		if (dst.kind == STORE_KIND_DIR &&
		    ((rc = store_dir_any(t, dst.coll, dst.id, &any, err)) || any))
			return rc ? rc : dfs_err_set(err, DFS_ENOTEMPTY, "directory not empty");
	}
	if (src->kind != STORE_KIND_DIR)
		return 0;
	if (np->coll != src->coll)
		return dfs_err_set(err, DFS_EXDEV, "a directory stays in its collection");
	/* Up from the new parent to the collection: the directory must not be on the way. */
	for (id = np->kind == FSN_SDIR ? np->id : 0; id;) {
		const char *slash;

		if (id == src->id)
			return dfs_err_set(err, DFS_EINVAL, "a directory cannot move into itself");
		if ((rc = store_entry_get(t, id, &up, err)))
			return rc;
		slash = strchr(up.name, '/');
		id = slash ? strtoll(up.name, NULL, 10) : 0;
	}
	return 0;
}

/* name as a message shows it: up to 40 bytes, then "...", so that two names of 255 bytes
 * leave room in the message for the reason (the buffer is 48 bytes). */
static const char *msg_name(const char *name, char *buf)
{
	if (strlen(name) <= 40)
		return name;
	snprintf(buf, 48, "%.40s...", name);
	return buf;
}

/* note 11: scratch file name in p renamed over the fixed file newname of np's collection
 * (kind FSN_OPTIONS: ".options", or FSN_INDEX: ".indexes/<newname>"), as rsync puts each
 * file in place: its bytes are written to that file (options applied, or the index made;
 * the same index again is nothing to do), then the scratch file is removed, and the
 * kernel's inode of it is the fixed file's from then on. A refused write changes nothing
 * and leaves the scratch file where it was. */
static void rename_to_fixed(fuse_req_t req, struct fs_node *p, const char *name,
			    struct fs_node *np, const char *newname, int kind)
{
	struct dfs_err err = {0};
	struct store_entry e;
	struct store_txn *t;
	struct dfs_buf b;
	char full[300];
	const char *sname = store_name(p, name, full, sizeof(full));
	int rc;

	if (p->coll != np->coll) {
		fuse_reply_err(req, EXDEV);
		return;
	}
	dfs_buf_init(&b);
	rc = store_txn_begin(p->db, false, &t, &err);
	if (!rc) {
		rc = store_entry_lookup(t, p->coll, sname, &e, &err);
		if (!rc && e.kind != STORE_KIND_FILE)
			rc = dfs_err_set(&err, DFS_EPERM,
					 "only a plain file's bytes can become '%s'", newname);
		if (!rc)
			rc = store_entry_read(t, e.id, &b, &err);
		store_txn_abort(t);
	}
	if (!rc && kind == FSN_OPTIONS) {
		opts_hide(np, false, true);
		rc = fs_options_apply(np->db, np->coll, b.data ? b.data : "", b.len, &err);
	} else if (!rc) {
		bson_t spec;

		bson_init(&spec);
		rc = fs_index_spec_parse(b.data ? b.data : "", b.len, &spec, &err);
		if (!rc)
			rc = fs_index_create(np->db, np->coll, newname, &spec, NULL, 0, &err);
		bson_destroy(&spec);
	}
	dfs_buf_release(&b);
	if (!rc)
		rc = store_txn_begin(p->db, true, &t, &err);
	if (!rc) {
		rc = store_entry_lookup(t, p->coll, sname, &e, &err);
		if (!rc)
			rc = store_entry_delete(t, e.row, &err);
		if (!rc)
			rc = store_coll_touch(t, p->coll, 0, &err);
		rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
	}
	if (rc) {
		char s1[48], s2[48];

		dfs_err_prefix(&err, "rename '%s' to '%s%s': ", msg_name(name, s1),
			       kind == FSN_INDEX ? ".indexes/" : "", msg_name(newname, s2));
		reply_dfs(req, &err, "rename");
		return;
	}
	{
		uint64_t nodeid = fs_node_touch_ino(fs_ino_entry(p->db, e.id));
		struct fs_node *n = nodeid ? fs_node_get(nodeid) : NULL;

		if (n && kind == FSN_OPTIONS)
			fs_node_repoint(n, FSN_OPTIONS, np->coll, 0,
					fs_ino_special(np->db, np->coll,
						       coll_fixed[fixed_index(newname)].k));
		else if (n)
			fs_node_repoint_query(n, FSN_INDEX, np->coll, newname);
	}
	/* the kernel keeps the scratch file's long entry timeout for the name: have it look
	 * the name up again (a .options of {} is not there) */
	fs_notify_entry(np->nodeid, newname);
	fuse_reply_err(req, 0);
}

static void fsop_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
			const char *newname, unsigned int flags)
{
	struct fs_node *p = fs_node_get(parent), *np = fs_node_get(newparent), *dn;
	struct dfs_err err = {0};
	struct store_entry src, dst, out, de;
	char src_full[300], dst_full[300];
	const char *base; /* newname in its directory */
	struct store_txn *t;
	bson_t id;
	int rc;

	if (p && is_snap(p->kind)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (np && is_snap(np->kind)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!p || !np) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (name_too_long(req, "rename", newname))
		return;
	if (flags & RENAME_EXCHANGE) {
		reply_msg(req, DFS_EINVAL, "rename '%s': exchanging files is not supported", name);
		return;
	}
	/* Scratch entries move between a collection and its scratch directories (note 10). */
	if (p->db != np->db || (p->kind != np->kind && !(scratch_parent(p) && scratch_parent(np) &&
							 p->coll == np->coll))) {
		fuse_reply_err(req, EXDEV);
		return;
	}
	if (p->kind == FSN_ROOT) {
		reply_msg(req, DFS_EPERM, "rename '%s': databases cannot be renamed", name);
		return;
	}
	if (p->kind == FSN_DB) {
		struct store_coll c, other;

		rc = store_txn_begin(p->db, true, &t, &err);
		if (rc) {
			reply_dfs(req, &err, "rename");
			return;
		}
		rc = store_coll_find(t, name, &c, &err);
		if (!rc && store_coll_find(t, newname, &other, NULL) == 0 && other.id != c.id) {
			int64_t nd = 0, nf = 0;

			if (flags & RENAME_NOREPLACE) {
				rc = dfs_err_set(&err, DFS_EEXIST, "collection '%s' exists",
						 newname);
			} else {
				rc = store_coll_count(t, other.id, &nd, &nf, &err);
				if (!rc && nd + nf > 0)
					rc = dfs_err_set(&err, DFS_ENOTEMPTY,
							 "collection '%s' is not empty", newname);
				if (!rc)
					rc = store_coll_drop(t, other.id, &err);
			}
		}
		if (!rc)
			rc = store_coll_rename(t, c.id, newname, &err);
		rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
		if (rc)
			reply_dfs(req, &err, "rename");
		else
			fuse_reply_err(req, 0);
		return;
	}
	if (p->kind == FSN_IXDIR && !ix_temp_name(name)) {
		reply_msg(req, DFS_EPERM,
			  "rename '.indexes/%s': indexes cannot be renamed (write a spec under the "
			  "new name, then rm the old one)",
			  name);
		return;
	}
	if (p->kind == FSN_IXDIR && !ix_temp_name(newname)) {
		rename_to_fixed(req, p, name, np, newname, FSN_INDEX);
		return;
	}
	if (p->kind == FSN_COLL && np->kind == FSN_COLL && fixed_index(newname) >= 0 &&
	    coll_fixed[fixed_index(newname)].kind == FSN_OPTIONS && fixed_index(name) < 0) {
		rename_to_fixed(req, p, name, np, newname, FSN_OPTIONS);
		return;
	}
	if (p->kind != FSN_COLL && p->kind != FSN_SAVED_DIR && p->kind != FSN_SDIR &&
	    p->kind != FSN_IXDIR) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if ((p->kind == FSN_COLL && fixed_index(name) >= 0) ||
	    (np->kind == FSN_COLL && fixed_index(newname) >= 0)) {
		reply_msg(req, DFS_EPERM, "rename: '%s' is part of every collection",
			  p->kind == FSN_COLL && fixed_index(name) >= 0 ? name : newname);
		return;
	}
	base = newname;
	if (np->kind == FSN_COLL && is_json_name(newname)) {
		bson_init(&id);
		rc = store_name_to_id(newname, strlen(newname) - 5, &id, &err);
		bson_destroy(&id);
		if (rc) {
			dfs_err_prefix(&err, "'%s' is not a document name: ", newname);
			reply_dfs(req, &err, "rename");
			return;
		}
	}
	if (p->kind == FSN_SAVED_DIR || p->kind == FSN_SDIR || np->kind == FSN_SDIR ||
	    p->kind == FSN_IXDIR) {
		name = store_name(p, name, src_full, sizeof(src_full));
		newname = store_name(np, newname, dst_full, sizeof(dst_full));
	}
	dn = orphan_prepare(np, newname, &de); /* what the rename replaces (note 9) */
	rc = store_txn_begin(p->db, true, &t, &err);
	if (rc) {
		reply_dfs(req, &err, "rename");
		return;
	}
	rc = store_entry_lookup(t, p->coll, name, &src, &err);
	if (!rc && (flags & RENAME_NOREPLACE) &&
	    store_entry_lookup(t, np->coll, newname, &dst, NULL) == 0)
		rc = dfs_err_set(&err, DFS_EEXIST, "'%s' exists", newname);
	if (!rc)
		rc = rename_dir_check(t, &src, np, newname, &err); /* note 10 */
	if (!rc)
		rc = store_entry_rename(t, src.row, np->coll, newname, &out, &err);
	if (!rc)
		rc = p->kind == FSN_SAVED_DIR ? store_coll_touch(t, p->coll, 0, &err)
					      : parent_touch(t, p, &err);
	if (!rc && np != p && np->kind != FSN_SAVED_DIR)
		rc = parent_touch(t, np, &err);
	if (rc) {
		char s1[48], s2[48];

		dfs_err_prefix(&err, "rename '%s' to '%s': ", msg_name(name, s1),
			       msg_name(newname, s2));
		store_txn_abort(t);
		reply_dfs(req, &err, "rename");
		return;
	}
	rc = store_txn_commit(t, &err);
	if (rc) {
		reply_dfs(req, &err, "rename");
		return;
	}
	if (dn && de.id != src.id && de.nlink <= 1)
		orphan_keep(dn, &de);
	else if (dn && de.id != src.id)
		fs_node_bump(dn); /* one name less */
	/* The kernel's inode for the source now has the new name: point it at what the
	 * store has there (design note 1 of inode.c). */
	{
		uint64_t nodeid = fs_node_touch_ino(fs_ino_entry(p->db, src.id));
		struct fs_node *n = nodeid ? fs_node_get(nodeid) : NULL;

		if (n && (n->id != out.id || n->coll != out.coll))
			fs_node_repoint(n, FSN_ENTRY, out.coll, out.id,
					fs_ino_entry(p->db, out.id));
		else if (n)
			fs_node_bump(n); /* same row, new _id: new content and size */
		if (n) {
			fs_node_set_name(n, base);
			fs_notify_inode(n->nodeid);
		}
	}
	fuse_reply_err(req, 0);
}

static void fsop_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct fs_node *p = fs_node_get(parent);
	struct store_attrs a = caller_attrs(req, 0777);
	struct dfs_err err = {0};
	struct store_entry e;
	struct store_txn *t;
	int rc;

	if (p && is_snap(p->kind)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (name_too_long(req, "symlink", name) || ix_refuse(req, p, "symlink", name))
		return;
	if (!scratch_parent(p) || !scratch_name_ok(p, name)) {
		reply_msg(req, DFS_EPERM, "symlink '%s': symlinks are scratch files in collections",
			  name);
		return;
	}
	a.mode = 0777;
	rc = store_txn_begin(p->db, true, &t, &err);
	if (!rc) {
		char full[300];

		rc = store_file_create(t, p->coll, store_name(p, name, full, sizeof(full)),
				       STORE_KIND_SYMLINK, &a, link, strlen(link), &e, &err);
		if (!rc)
			rc = parent_touch(t, p, &err); /* note 9 */
		rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
	}
	if (rc) {
		reply_dfs(req, &err, "symlink");
		return;
	}
	reply_entry(req, entry_node(p->db, &e, name));
}

static void fsop_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs_node *n = fs_node_get(ino);
	struct dfs_err err = {0};
	struct dfs_buf b;
	struct store_txn *t;
	int rc;

	if (!n || n->kind != FSN_ENTRY) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	dfs_buf_init(&b);
	rc = store_txn_begin(n->db, false, &t, &err);
	if (!rc) {
		rc = store_entry_read(t, n->id, &b, &err);
		store_txn_abort(t);
	}
	if (rc)
		reply_dfs(req, &err, "readlink");
	else
		fuse_reply_readlink(req, b.data ? b.data : "");
	dfs_buf_release(&b);
}

/* note 10: a hard link of a scratch file (documents have one name, their _id). */
static void fsop_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fs_node *n = fs_node_get(ino), *p = fs_node_get(newparent);
	struct dfs_err err = {0};
	struct store_entry e;
	struct store_txn *t;
	char full[300];
	int rc;

	if ((p && is_snap(p->kind)) || (n && is_snap(n->kind))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (!n || !p) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (name_too_long(req, "link", newname) || ix_refuse(req, p, "link", newname))
		return;
	if (n->kind == FSN_ENTRY && scratch_parent(p) && (p->db != n->db || p->coll != n->coll)) {
		fuse_reply_err(req, EXDEV); /* a file's names stay in its collection */
		return;
	}
	if (n->kind != FSN_ENTRY || !scratch_parent(p) || !scratch_name_ok(p, newname)) {
		reply_msg(req, DFS_EPERM,
			  "link '%s': hard links are for scratch files, within a database, under "
			  "names that are not a document's",
			  newname);
		return;
	}
	rc = store_txn_begin(p->db, true, &t, &err);
	if (!rc) {
		rc = store_file_link(t, n->id, p->coll, store_name(p, newname, full, sizeof(full)),
				     &e, &err);
		if (rc)
			dfs_err_prefix(&err, "'%s': ", newname);
		if (!rc)
			rc = parent_touch(t, p, &err);
		rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
	}
	if (rc) {
		reply_dfs(req, &err, "link");
		return;
	}
	fs_node_bump(n); /* its link count and ctime */
	reply_entry(req, entry_node(p->db, &e, newname));
}

static void fsop_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	if (statvfs(store_path(fs_store), &sv) != 0) {
		fuse_reply_err(req, errno);
		return;
	}
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

/* ---- the handlers above, each served as its caller (note 9) -------------------------- */

static int handle_need(const struct fuse_file_info *fi)
{
	const struct fs_handle *h = (const struct fs_handle *)(uintptr_t)fi->fh;

	return h && h->kind == FH_WRITE ? STORE_MAY_READ | STORE_MAY_WRITE : STORE_MAY_READ;
}

static void fsop_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	caller_enter(req);
	fsop_open_as(req, ino, fi);
	caller_leave();
}

static void fsop_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			struct fuse_file_info *fi)
{
	caller_enter(req);
	fsop_create_as(req, parent, name, mode, fi);
	caller_leave();
}

static void fsop_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	caller_enter_handle((const struct fs_handle *)(uintptr_t)fi->fh, handle_need(fi));
	fsop_read_as(req, ino, size, off, fi);
	caller_leave();
}

static void fsop_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	caller_enter_handle((const struct fs_handle *)(uintptr_t)fi->fh, handle_need(fi));
	fsop_write_as(req, ino, data, size, off, fi);
	caller_leave();
}

static void fsop_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	caller_enter_handle((const struct fs_handle *)(uintptr_t)fi->fh, handle_need(fi));
	fsop_flush_as(req, ino, fi);
	caller_leave();
}

static void fsop_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	caller_enter_handle((const struct fs_handle *)(uintptr_t)fi->fh, handle_need(fi));
	fsop_fsync_as(req, ino, datasync, fi);
	caller_leave();
}

static void fsop_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	caller_enter_handle((const struct fs_handle *)(uintptr_t)fi->fh, handle_need(fi));
	fsop_release_as(req, ino, fi);
	caller_leave();
}

static void fsop_init(void *userdata, struct fuse_conn_info *conn)
{
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO; /* note 4 */
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	/* Requests arrive in memory, so the request loop can hand them to another thread. */
	conn->want &= ~(unsigned)FUSE_CAP_SPLICE_READ;
	/* Replies are written with writev, where the ring (ring.c note 2) catches them. */
	conn->want &= ~(unsigned)(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	conn->max_write = FS_MAX_WRITE;
	conn->max_readahead = 1024 * 1024;
	fs_ring_init_reply();
}

/* note 7 */
bool fs_op_quick(uint32_t opcode, uint64_t nodeid, uint64_t fh, uint32_t open_flags)
{
	const struct fs_handle *h = (const struct fs_handle *)(uintptr_t)fh;
	struct fs_node *n;

	switch (opcode) {
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
		return true;
	case FUSE_IOCTL:
		/* No handler: libfuse answers ENOSYS at once. The kernel asks again at every
		 * open that checks for a terminal (Python's open() calls isatty()). */
		return true;
	case FUSE_GETATTR:
		/* An index file's size comes from its handle, locked by an index build. */
		n = fs_node_get(nodeid);
		return n && n->kind != FSN_INDEX && n->kind != FSN_IXPENDING;
	case FUSE_OPEN:
		/* A read-only open of a document whose content the kernel caches loads nothing;
		 * one that loads and stores it goes to a worker (note 3). */
		n = fs_node_get(nodeid);
		return n && n->kind == FSN_ENTRY && (open_flags & O_ACCMODE) == O_RDONLY &&
		       !(open_flags & O_TRUNC) && fs_node_cache_ok(n);
	case FUSE_READ:
		/* The first read loads the whole entry: a document (at most 16 MiB of BSON) is
		 * quick enough, a scratch file (up to 256 MiB) goes to a worker so that it does
		 * not stall every other request. is_doc is set at open and never changes. */
		return h && h->kind == FH_ENTRY && h->rdonly && h->is_doc;
	case FUSE_RELEASE:
		/* The kernel sends neither before the open's reply nor after the release: the
		 * handle is alive. A read-only one is never committed, so its lock is free. */
		return h && h->kind == FH_ENTRY && h->rdonly;
	default:
		return false;
	}
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = fsop_init,
	.lookup = fsop_lookup,
	.forget = fsop_forget,
	.forget_multi = fsop_forget_multi,
	.getattr = fsop_getattr,
	.setattr = fsop_setattr,
	.readlink = fsop_readlink,
	.mknod = fsop_mknod,
	.mkdir = fsop_mkdir,
	.unlink = fsop_unlink,
	.rmdir = fsop_rmdir,
	.symlink = fsop_symlink,
	.rename = fsop_rename,
	.link = fsop_link,
	.open = fsop_open,
	.read = fsop_read,
	.write = fsop_write,
	.flush = fsop_flush,
	.release = fsop_release,
	.fsync = fsop_fsync,
	.opendir = fsop_opendir,
	.releasedir = fsop_releasedir,
	.readdir = fsop_readdir,
	.readdirplus = fsop_readdirplus,
	.statfs = fsop_statfs,
	.create = fsop_create,
};
