/*
 * wire.h - what the files of the wire protocol front end (fs/wire/) share: the framing of
 * MongoDB's messages (frame.c), the server's connections (server.c), the command dispatch
 * and its replies (dispatch.c), cursors (cursor.c) and the command handlers (cmd_*.c).
 * The front end runs the same engine as the mount (query/ and store/); nothing here
 * includes FUSE headers, and the FUSE files never include this one except mount.c and
 * cli.c, which start a server.
 *
 * Thread-safety: the framing functions are pure; a server and the cursor registry are
 * thread-safe; a struct wire_ctx belongs to its connection's thread.
 */
#ifndef DOCFS_WIRE_H
#define DOCFS_WIRE_H

#include "query.h"
#include "store.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- frame.c: messages as bytes (pure functions, no sockets) ------------------------ */

#define WIRE_HEADER_LEN 16
#define WIRE_MAX_MSG 48000000		 /* maxMessageSizeBytes */
#define WIRE_MAX_BSON (16 * 1024 * 1024) /* maxBsonObjectSize */
#define WIRE_MAX_WRITE_BATCH 100000	 /* maxWriteBatchSize */
#define WIRE_OP_REPLY 1
#define WIRE_OP_QUERY 2004
#define WIRE_OP_COMPRESSED 2012
#define WIRE_OP_MSG 2013
#define WIRE_MSG_CHECKSUM 0x1u	  /* checksumPresent: a CRC-32C ends the message */
#define WIRE_MSG_MORE 0x2u	  /* moreToCome: the sender wants no reply */
#define WIRE_MSG_EXHAUST 0x10000u /* exhaustAllowed (ignored) */
#define WIRE_MAX_SEQS 8		  /* kind-1 sections of one message */

struct wire_header {
	int32_t len;	     /* messageLength: the whole message, header included */
	int32_t request_id;  /* requestID */
	int32_t response_to; /* responseTo */
	int32_t opcode;	     /* opCode */
};

/* A kind-1 section: documents one after the other, views into the message. */
struct wire_seq {
	char id[64];	     /* its identifier ("documents", "updates", "deletes") */
	const uint8_t *data; /* Borrowed: the documents' bytes (valid with the message) */
	size_t len;	     /* bytes of data */
};

/* A parsed request: views into the message's bytes (Borrowed: valid while they are). */
struct wire_msg {
	struct wire_header h;
	uint32_t flags; /* OP_MSG flagBits */
	bson_t body;	/* OP_MSG kind-0 document, or OP_QUERY's query (read-only view) */
	int nseq;	/* kind-1 sections */
	struct wire_seq seq[WIRE_MAX_SEQS];
	const char *ns;		/* OP_QUERY: fullCollectionName ("admin.$cmd"), else NULL */
	int32_t nskip, nreturn; /* OP_QUERY: numberToSkip, numberToReturn */
};

/* Reads the 16-byte header at p (n >= 16 bytes). Errors (DFS_EINVAL, a message saying
 * why): a length below 16 + the smallest body, or above WIRE_MAX_MSG. */
int wire_header_parse(const uint8_t *p, size_t n, struct wire_header *h, struct dfs_err *err);
/* Parses a whole message (header included, n bytes: its messageLength) into m. OP_MSG and
 * OP_QUERY only; every error is DFS_EINVAL with the reason (unknown opcode, flag bits,
 * section kind, truncated or overlong section, invalid BSON, bad checksum, no kind-0
 * section or two of them), after which the connection is closed. */
int wire_msg_parse(const uint8_t *p, size_t n, struct wire_msg *m, struct dfs_err *err);
/* Appends an OP_MSG reply holding doc (flagBits 0, one kind-0 section) to out. */
void wire_reply_msg(struct dfs_buf *out, int32_t request_id, int32_t response_to,
		    const bson_t *doc);
/* Appends an OP_REPLY holding doc (one document, cursorID 0; responseFlags flags) to out. */
void wire_reply_op_reply(struct dfs_buf *out, int32_t request_id, int32_t response_to,
			 int32_t flags, const bson_t *doc);
/* CRC-32C (Castagnoli) of n bytes, as OP_MSG's checksum. */
uint32_t wire_crc32c(const uint8_t *p, size_t n);
/* Calls cb for each document of seq (views valid for the call); a nonzero return of cb
 * stops and is returned. The documents were checked by wire_msg_parse. */
int wire_seq_each(const struct wire_seq *seq, int (*cb)(void *ctx, const bson_t *doc), void *ctx);

/* ---- dispatch.c: commands ------------------------------------------------------------ */

struct wire_conn;

/* A command being run: what a handler reads, and the error it leaves. */
struct wire_ctx {
	struct store *store;	      /* Borrowed: the served store */
	struct wire_conn *conn;	      /* Borrowed: the connection (NULL in unit tests) */
	int64_t conn_id;	      /* its connectionId */
	const struct wire_msg *msg;   /* Borrowed: the request */
	const bson_t *cmd;	      /* Borrowed: the command document */
	const char *name;	      /* Borrowed: the command's name (its first key) */
	char db[DFS_MAX_NS_NAME + 1]; /* $db */
	int code;		      /* the error's MongoDB code (0: none) */
	const char *code_name;	      /* its codeName (static) */
	char errmsg[512];	      /* its message */
	int dfs_code;		      /* the engine's code behind it (DFS_EINVAL when none) */
	bson_t *err_info;	      /* Owned: more fields of the error reply (a duplicate
				       * key's keyPattern and keyValue), or NULL */
	struct query_collation *coll; /* Owned: the command's collation (wire_find_args,
				       * aggregate), NULL for none or "simple" */
};

/* A command handler: fills reply (initialised, empty; "ok" is added by the dispatch) and
 * returns 0, or the error's code after wire_fail / wire_fail_dfs. */
typedef int (*wire_handler)(struct wire_ctx *c, bson_t *reply);

/* Records an error in c: MongoDB's code, codeName (static) and message. Returns code. */
int wire_fail(struct wire_ctx *c, int code, const char *code_name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Records an engine error with its MongoDB code (query_error_code). Returns that code. */
int wire_fail_dfs(struct wire_ctx *c, const struct dfs_err *e);

/*
 * Runs the command of request m for a connection and appends the whole reply message to
 * out (nothing when m has moreToCome). OP_QUERY answers only the handshake (hello,
 * isMaster, ismaster) on "<db>.$cmd", anything else with an OP_REPLY {$err, code}.
 */
void wire_dispatch(struct store *s, struct wire_conn *conn, int64_t conn_id,
		   const struct wire_msg *m, int32_t reply_id, struct dfs_buf *out);
/* A front end in front of the table (the router's mongos, fs/router/wire.c): when set
 * (before a server starts), every command is offered to it first, c->name and c->db read;
 * it answers (its handler's return: 0 or a wire_fail code) or returns WIRE_ROUTE_PASS to
 * let the table's handler run on c->store (which it may set). */
#define WIRE_ROUTE_PASS (-1)
extern int (*wire_route_hook)(struct wire_ctx *c, bson_t *reply);
/* Runs command cmd on database db of s in this thread, as the store's owner (no
 * authentication, currentOp or profiler: a replica set member applying its primary's
 * writes, fs/replset/apply.c), into reply (initialised, empty): the reply MongoDB gives,
 * {ok: 0, errmsg, code, codeName} on a failure. Returns 0 or the error's code. */
int wire_command_local(struct store *s, const char *db, const bson_t *cmd, bson_t *reply);
/* A replica set member (fs/replset/member.c) sets these before its server starts; NULL in
 * a standalone. wire_rs_hello appends the set's fields of hello to reply and returns
 * isWritablePrimary; wire_rs_command answers replSetGetStatus and replSetGetConfig. */
extern bool (*wire_rs_hello)(bson_t *reply);
extern int (*wire_rs_command)(struct wire_ctx *c, bson_t *reply);
/* Whether name is a command docfs answers (for listCommands and tests). */
bool wire_command_known(const char *name);
/* Appends {<name>: {help, adminOnly, ...}} for every command to out (listCommands). */
void wire_command_list(bson_t *out);

/* Helpers of the handlers (dispatch.c). */
/* The value of key in the command as a whole number: 0 with *v, 1 when absent, else a
 * wire_fail (TypeMismatch 14) code. */
int wire_arg_int(struct wire_ctx *c, const char *key, int64_t *v);
/* The document under key ({} allowed) as a view into the command: 0, 1 when absent, else
 * a wire_fail code (TypeMismatch 14). */
int wire_arg_doc(struct wire_ctx *c, const char *key, bson_t *view);
/* The boolean (or number) under key: *v unchanged when absent. */
int wire_arg_bool(struct wire_ctx *c, const char *key, bool *v);
/* The collection named by the command's first field (a string), checked; else a wire_fail
 * code (InvalidNamespace 73). */
int wire_arg_coll(struct wire_ctx *c, char *out, size_t cap);
/* Opens c->db (create: make it when missing). 0, DFS_ENOENT (no error recorded) when it
 * does not exist and create is false, else a wire_fail code. */
int wire_db(struct wire_ctx *c, bool create, struct store_db **out);
/* A number as MongoDB writes counts: int32 when it fits. */
void wire_append_count(bson_t *b, const char *key, int64_t v);

/* ---- cursor.c: cursors kept between getMores ---------------------------------------- */

#define WIRE_BATCH_DOCS 101		    /* a first batch's default number of documents */
#define WIRE_BATCH_BYTES (16 * 1024 * 1024) /* a batch stops before this many bytes */
#define WIRE_CURSOR_TIMEOUT_S 600	    /* idle cursors are closed after this */

/* A source of documents a cursor answers from: next gives 0 with *doc (Borrowed: valid
 * until the next call), DFS_ENOENT at the end, or an error. */
struct wire_source {
	int (*next)(void *ctx, const bson_t **doc, struct dfs_err *err);
	void *ctx;
};

/*
 * Answers a find, aggregate or listing with a cursor: the first batch (batch documents,
 * -1 for the default 101; bytes under WIRE_BATCH_BYTES) read from src into reply's
 * {cursor: {firstBatch, id, ns}}; unless single, what is left is read now (so the cursor's
 * results are one snapshot, as a result file's are, while src's transaction is still
 * open) into a cursor kept for getMore, whose id the reply gives (0 when nothing is left).
 * lsid (may be NULL) is the session, whose end closes the cursor. Returns 0 or the
 * source's error (reply then unchanged but for the partial cursor, which the caller drops
 * with the reply).
 */
int wire_cursor_reply(struct wire_ctx *c, const char *ns, const struct wire_source *src,
		      int64_t batch, bool single, const bson_t *lsid, bson_t *reply,
		      struct dfs_err *err);
/* A wire_source over documents built in memory (listCollections, listIndexes). */
struct wire_docs {
	bson_t **d; /* Owned: each freed by wire_docs_release */
	size_t n, cap, pos;
};
/* Adds doc (taken: wire_docs_release destroys it). */
void wire_docs_take(struct wire_docs *w, bson_t *doc);
/* wire_source's next over w. */
int wire_docs_next(void *ctx, const bson_t **doc, struct dfs_err *err);
void wire_docs_release(struct wire_docs *w);

/* A stream a cursor reads on (a tailable find, a change stream; cursor.c note 4). */
struct wire_stream {
	/* Appends the next documents (BSON, one after the other) to out, waiting for some
	 * and asking stop(ctx) between looks (true: DFS_EINTR); appends nothing at the
	 * stream's end. */
	int (*next)(void *src, struct dfs_buf *out, bool (*stop)(void *ctx), void *ctx,
		    struct dfs_err *err);
	/* Whether the stream has ended without asking next (NULL: only next tells). */
	bool (*done)(void *src);
	/* The resume token of where the stream stands, as {_data: "..."} into out
	 * (initialised, empty): a change stream's postBatchResumeToken (NULL: none). */
	bool (*token)(void *src, bson_t *out);
	void (*free)(void *src);
	void *src; /* Owned: freed by free */
};
/* A stream's cursor over st (heap, taken: freed with the cursor, or here on an error): its
 * first batch (what is there now, at most batch documents, -1: 101) into reply; the cursor
 * stays open, empty batches included, until the stream ends. await: awaitData. 0 or a
 * wire_fail code (136 CappedPositionLost). */
int wire_cursor_stream_reply(struct wire_ctx *c, const char *ns, struct wire_stream *st, bool await,
			     int64_t batch, const bson_t *lsid, bson_t *reply);
/* getMore: the next batch of cursor id (batch 0: as many as fit in WIRE_BATCH_BYTES) into
 * reply's {cursor: {nextBatch, id, ns}}; an awaitData stream cursor waits up to await_ms
 * for documents. Errors (wire_fail): 43 CursorNotFound, 13 Unauthorized (another
 * namespace), 136 CappedPositionLost, 175 QueryPlanKilled (a tailed collection dropped). */
int wire_cursor_more(struct wire_ctx *c, int64_t id, const char *ns, int64_t batch,
		     int64_t await_ms, bson_t *reply);

/* While stop, no awaitData getMore waits (a server stopping must not wait for them). */
void wire_cursor_stop_waits(bool stop);
/* Closes cursor id; true when it existed. */
bool wire_cursor_kill(int64_t id);
/* Closes the cursors of session lsid ({id: UUID}). */
void wire_cursor_kill_session(const bson_t *lsid);
/* The 16 bytes of lsid's "id" (a UUID) into out: true when it has one (lsid may be NULL). */
bool wire_lsid_id(const bson_t *lsid, uint8_t out[16]);

/* ---- sessions (session.c) ------------------------------------------------------------- */

/* Remembers the session of c's lsid (if any) as used now, by c's user. */
void wire_session_touch(struct wire_ctx *c);
/* Forgets the session of lsid ({id: UUID}), as endSessions and killSessions do. */
void wire_session_end(const bson_t *lsid);
/* Appends to docs (an array being built) the documents $listLocalSessions gives for its
 * spec ({}: c's user's sessions, {allUsers: true}, {users: [{user, db}]}). Returns 0 or a
 * wire_fail code. */
int wire_session_list(struct wire_ctx *c, const bson_value_t *spec, bson_t *docs);
/* Closes cursors idle for more than timeout_s; returns how many. */
int wire_cursor_reap(int timeout_s);
/* Open cursors. */
int wire_cursor_count(void);
/* The idle timeout (-o cursor_timeout_s=; WIRE_CURSOR_TIMEOUT_S by default). */
extern int wire_cursor_timeout_s;

/* ---- cmd_common.c: what the document commands share ---------------------------------- */

/* How a command opens its collection (cmd_common.c note 1). */
enum wire_coll_mode {
	WIRE_COLL_READ,	  /* a read transaction; DFS_ENOENT (no error) when it does not exist */
	WIRE_COLL_CREATE, /* a write transaction; the database and collection made when missing */
	WIRE_COLL_GHOST,  /* a read transaction, or a write one over a collection made for the
			   * command and rolled back with it (cmd_common.c note 1) */
	WIRE_COLL_WRITE,  /* a write transaction; DFS_ENOENT (no error) when it does not exist */
};

struct wire_coll {
	struct store_db *db;
	struct store_txn *t;
	struct store_coll co;
	bool ghost;   /* the collection exists only in t */
	bool created; /* WIRE_COLL_CREATE made the collection in t */
};

/* A find's arguments, views into the command. */
struct wire_find_args {
	struct query_find_opts o;
	bson_t filter, sort, projection, hint, min, max;
	int64_t batch; /* -1: default */
	bool single;
};

/* Opens collection name of c->db as mode says into x: 0, DFS_ENOENT (nothing open, no error
 * recorded), or a wire_fail code. */
int wire_coll_open(struct wire_ctx *c, const char *name, int mode, struct wire_coll *x);
/* Ends x: commits when commit (and x is not a ghost), else rolls back. 0 or a wire_fail. */
int wire_coll_close(struct wire_ctx *c, struct wire_coll *x, bool commit);
/* "<db>.<coll>" into out. */
void wire_ns(char *out, size_t cap, const char *db, const char *coll);
/* The sub-document (or, array: array) key of doc as a view: true when present and of
 * that type. */
bool wire_sub_view(const bson_t *doc, const char *key, bool array, bson_t *view);
/* A duplicate key error e (11000) on collection name of c->db: MongoDB's keyPattern and
 * keyValue appended to out. Nothing for another error, and no keyValue when the key cannot
 * be read back from e's message (cut at its length limit). */
void wire_dup_key_info(struct wire_ctx *c, const char *name, const struct dfs_err *e, bson_t *out);
/* MongoDB's errInfo ({failingDocumentId, details}) appended to out when e is a refusal of a
 * collection's validator (121): the store keeps it for the thread (store/validator.c).
 * True when it was one (its errmsg is then WIRE_VALIDATION_MSG, as mongod's). */
#define WIRE_VALIDATION_MSG "Document failed validation"
bool wire_validation_info(const struct dfs_err *e, bson_t *out);
/* The "collation" of doc (the command or one of its statements) read into *out (Owned,
 * query_collation_free; NULL when absent or {locale: "simple"}). 0, or a wire_fail code: 2
 * BadValue for a collation docfs cannot make (no locale, one ICU lacks, a bad option). */
int wire_arg_collation(struct wire_ctx *c, const bson_t *doc, struct query_collation **out);
/* The command's "let" evaluated (query_let_new): *out Owned (query_let_free), NULL when the
 * command has none. 0, or a wire_fail code: 14 TypeMismatch when let is not a document, 2
 * BadValue for a bad name or an expression that fails. */
int wire_arg_let(struct wire_ctx *c, struct query_let **out);
/* Now, in ms since the epoch ($currentDate, $$NOW). */
int64_t wire_now_ms(void);
/* 238 NotImplemented when doc (the command, or one of its statements) sets one of names
 * (NULL-terminated): to a document that is not empty, or to any value but false or null.
 * what names the command in the message. 0 when none is set. */
int wire_refuse_opts(struct wire_ctx *c, const bson_t *doc, const char *what,
		     const char *const *names);
/* A find's (count: a count's or distinct's) arguments of c->cmd into a: 0 or a wire_fail
 * code (238 for the options docfs has not yet). */
int wire_find_args(struct wire_ctx *c, struct wire_find_args *a, bool count);
/* The command's lsid (a view in *view), or NULL. */
const bson_t *wire_lsid(struct wire_ctx *c, bson_t *view);
/* {cursor: {<key>: [], id: 0, ns}} appended to reply. */
void wire_empty_cursor(bson_t *reply, const char *ns, const char *key);
/* A heap wire_stream of next, done (may be NULL), free and src (Owned by it). */
struct wire_stream *wire_stream_new(int (*next)(void *, struct dfs_buf *, bool (*)(void *), void *,
						struct dfs_err *),
				    bool (*done)(void *), void (*fr)(void *), void *src);

/* ---- the command handlers (cmd_admin.c, cmd_write.c, cmd_find.c, cmd_agg.c, cmd_index.c,
 * cmd_ops.c) ------------------------------------------------------------------------------ */

int wire_cmd_hello(struct wire_ctx *c, bson_t *reply);
int wire_cmd_ping(struct wire_ctx *c, bson_t *reply);
int wire_cmd_build_info(struct wire_ctx *c, bson_t *reply);
int wire_cmd_get_parameter(struct wire_ctx *c, bson_t *reply);
int wire_cmd_get_log(struct wire_ctx *c, bson_t *reply);
int wire_cmd_end_sessions(struct wire_ctx *c, bson_t *reply);
int wire_cmd_connection_status(struct wire_ctx *c, bson_t *reply);
int wire_cmd_host_info(struct wire_ctx *c, bson_t *reply);
int wire_cmd_list_commands(struct wire_ctx *c, bson_t *reply);
int wire_cmd_repl_status(struct wire_ctx *c, bson_t *reply);
int wire_cmd_list_databases(struct wire_ctx *c, bson_t *reply);
int wire_cmd_list_collections(struct wire_ctx *c, bson_t *reply);
int wire_cmd_create(struct wire_ctx *c, bson_t *reply);
int wire_cmd_drop(struct wire_ctx *c, bson_t *reply);
int wire_cmd_convert_to_capped(struct wire_ctx *c, bson_t *reply);
int wire_cmd_drop_database(struct wire_ctx *c, bson_t *reply);
int wire_cmd_db_stats(struct wire_ctx *c, bson_t *reply);
int wire_cmd_coll_stats(struct wire_ctx *c, bson_t *reply);
int wire_cmd_db_hash(struct wire_ctx *c, bson_t *reply);
int wire_cmd_coll_mod(struct wire_ctx *c, bson_t *reply);

int wire_cmd_insert(struct wire_ctx *c, bson_t *reply);
int wire_cmd_update(struct wire_ctx *c, bson_t *reply);
int wire_cmd_delete(struct wire_ctx *c, bson_t *reply);
int wire_cmd_find_and_modify(struct wire_ctx *c, bson_t *reply);
int wire_cmd_find(struct wire_ctx *c, bson_t *reply);
int wire_cmd_get_more(struct wire_ctx *c, bson_t *reply);
int wire_cmd_kill_cursors(struct wire_ctx *c, bson_t *reply);
int wire_cmd_count(struct wire_ctx *c, bson_t *reply);
int wire_cmd_distinct(struct wire_ctx *c, bson_t *reply);
int wire_cmd_aggregate(struct wire_ctx *c, bson_t *reply);
int wire_cmd_explain(struct wire_ctx *c, bson_t *reply);

int wire_cmd_server_status(struct wire_ctx *c, bson_t *reply);
int wire_cmd_top(struct wire_ctx *c, bson_t *reply);
int wire_cmd_current_op(struct wire_ctx *c, bson_t *reply);
int wire_cmd_kill_op(struct wire_ctx *c, bson_t *reply);
int wire_cmd_profile(struct wire_ctx *c, bson_t *reply);
int wire_cmd_rename_collection(struct wire_ctx *c, bson_t *reply);
int wire_cmd_validate(struct wire_ctx *c, bson_t *reply);

int wire_cmd_create_indexes(struct wire_ctx *c, bson_t *reply);
int wire_cmd_list_indexes(struct wire_ctx *c, bson_t *reply);
int wire_cmd_drop_indexes(struct wire_ctx *c, bson_t *reply);

/* ---- scram.c: SCRAM-SHA-256, the server's side (pure functions) ---------------------- */

#define WIRE_SCRAM_KEY 32      /* SHA-256's bytes */
#define WIRE_SCRAM_ITERS 15000 /* MongoDB's default iterationCount */

/* A user's stored credentials, as in system.users' credentials.SCRAM-SHA-256 (base64). */
struct wire_scram_cred {
	int iters;	 /* iterationCount */
	char salt[64];	 /* salt */
	char stored[48]; /* storedKey */
	char server[48]; /* serverKey */
};

/* One conversation's state (step 1: client-first read; 2: server-first sent; 3: failed or
 * done with the proof; 4: proof accepted). */
struct wire_scram {
	int step;
	char gs2[64];	 /* the gs2 header as sent ("n,,") */
	char user[256];	 /* the user name, unescaped */
	char nonce[256]; /* the client's nonce, then the combined one */
	char cfb[600];	 /* client-first-bare */
	char sf[700];	 /* server-first */
	uint8_t stored[WIRE_SCRAM_KEY], server[WIRE_SCRAM_KEY];
};

/* Base64 of n bytes into out (cap bytes, NUL-terminated): its length, or -1 (no room). */
int wire_b64_encode(const uint8_t *p, size_t n, char *out, size_t cap);
/* The bytes of base64 text s (len chars) into out: how many, or -1 (not base64, no room). */
int wire_b64_decode(const char *s, size_t len, uint8_t *out, size_t cap);
/* 0 when pwd may be a password (printable ASCII, not empty: scram.c note 1), else
 * DFS_EINVAL saying why. */
int wire_scram_password_check(const char *pwd, struct dfs_err *err);
/* storedKey and serverKey of pwd with salt and iters (RFC 5802). */
int wire_scram_derive(const char *pwd, const uint8_t *salt, size_t salt_len, int iters,
		      uint8_t stored[WIRE_SCRAM_KEY], uint8_t server[WIRE_SCRAM_KEY],
		      struct dfs_err *err);
/* New credentials for pwd (checked) with a random salt. */
int wire_scram_credentials(const char *pwd, int iters, struct wire_scram_cred *out,
			   struct dfs_err *err);
/* Reads the client-first message (len bytes) into st (reset): its user name and nonce.
 * DFS_EINVAL when malformed or asking for channel binding. */
int wire_scram_client_first(struct wire_scram *st, const char *msg, size_t len,
			    struct dfs_err *err);
/* The server-first message for the user's cred into out (cap bytes): the client's nonce
 * and snonce (NULL: 24 random bytes, base64), the salt and iterations. */
int wire_scram_server_first(struct wire_scram *st, const char *snonce,
			    const struct wire_scram_cred *cred, char *out, size_t cap,
			    struct dfs_err *err);
/* Checks the client-final message (len bytes): 0 with the server-final message ("v=...")
 * in out; DFS_EPERM for a wrong proof (a wrong password), DFS_EINVAL for a malformed
 * message or a nonce or channel binding that does not match. One try per conversation. */
int wire_scram_client_final(struct wire_scram *st, const char *msg, size_t len, char *out,
			    size_t cap, struct dfs_err *err);

/* ---- auth.c: users, authentication and what each command needs ------------------------ */

/* How a server enforces authentication (auth.c note 1). */
enum wire_auth_mode {
	WIRE_AUTH_OFF,	 /* noauth: nothing enforced */
	WIRE_AUTH_USERS, /* enforced while the store has users (loopback and Unix sockets) */
	WIRE_AUTH_ON,	 /* always enforced (a non-loopback address is bound) */
};

/* A connection's authentication: its conversation and the user it is authenticated as. */
struct wire_auth;
struct wire_auth *wire_auth_new(void); /* Owned: wire_auth_free */
void wire_auth_free(struct wire_auth *a);
/* Whether the store has at least one user (cached for a second; auth.c note 2). */
bool wire_auth_users_exist(struct store *s);
/* The same asked of the store at dir through a store of its own, opened and freed here: a
 * daemon asks before it forks, when no database of its store may be open (server.c). */
bool wire_auth_users_at(const char *dir);
/* Before command c runs (c->name known, a handler found): 0, or 13 Unauthorized
 * (wire_fail) when it needs an authenticated user or a role the user lacks. On 0 the
 * thread's caller (store_thread_cred_set) is the user's uid and gid when it has one;
 * wire_auth_done clears it. */
int wire_auth_check(struct wire_ctx *c);
void wire_auth_done(struct wire_ctx *c);
/* Whether command name needs an authenticated user when authentication is enforced
 * (listCommands' requiresAuth). */
bool wire_auth_needed(const char *name);
/* hello's saslSupportedMechs (when the command asks) into reply. */
void wire_auth_hello(struct wire_ctx *c, bson_t *reply);
/* connectionStatus' authenticatedUsers and authenticatedUserRoles into info. */
void wire_auth_status(struct wire_ctx *c, bson_t *info);
/* c's authenticated user: true with *name and *db (Borrowed: valid while c's connection
 * lives and no user command runs on it), false when there is none. */
bool wire_auth_user(struct wire_ctx *c, const char **name, const char **db);
/* Whether listDatabases shows db to c's user (every db when nothing is enforced). */
bool wire_auth_db_visible(struct wire_ctx *c, const char *db);
/* Creates user name of database db with password pwd, roles (an array of "role" strings
 * (of db) or {role, db} documents) and customData (NULL: none; its uid, gid and groups are
 * the user's caller, auth.c note 4). Errors: DFS_EEXIST, DFS_EINVAL (a role, a password, a
 * name), store errors. For `docfs user` (cli.c) and createUser. */
int wire_user_create(struct store *s, const char *db, const char *name, const char *pwd,
		     const bson_t *roles, const bson_t *custom, struct dfs_err *err);
/* Drops user name of db: DFS_ENOENT when there is none. */
int wire_user_drop(struct store *s, const char *db, const char *name, struct dfs_err *err);
/* Calls cb with each user's document (credentials included), in _id order. */
int wire_user_each(struct store *s, int (*cb)(void *ctx, const bson_t *user), void *ctx,
		   struct dfs_err *err);

int wire_cmd_sasl_start(struct wire_ctx *c, bson_t *reply);
int wire_cmd_sasl_continue(struct wire_ctx *c, bson_t *reply);
int wire_cmd_logout(struct wire_ctx *c, bson_t *reply);
int wire_cmd_create_user(struct wire_ctx *c, bson_t *reply);
int wire_cmd_update_user(struct wire_ctx *c, bson_t *reply);
int wire_cmd_drop_user(struct wire_ctx *c, bson_t *reply);
int wire_cmd_users_info(struct wire_ctx *c, bson_t *reply);

/* ---- tls.c: TLS over TCP connections (OpenSSL) ---------------------------------------- */

struct wire_tls;
/* A server's TLS context from PEM files: cert (the certificate chain) and key (its private
 * key). DFS_EINVAL saying which file did not load, or that they do not match. */
int wire_tls_new(const char *cert, const char *key, struct wire_tls **out, struct dfs_err *err);
void wire_tls_free(struct wire_tls *t); /* NULL: no-op */
/* The handshake of accepted connection fd: 0 with *ssl (Owned: wire_tls_close), or -1 with
 * why (a plaintext client, a failed handshake) for the log. */
int wire_tls_accept(struct wire_tls *t, int fd, void **ssl, char *why, size_t cap);
/* recv/send through ssl: bytes moved, 0 at a clean end (read), -1 on an error. */
ssize_t wire_tls_read(void *ssl, void *p, size_t n);
ssize_t wire_tls_write(void *ssl, const void *p, size_t n);
void wire_tls_close(void *ssl); /* NULL: no-op */

/* ---- server.c: listeners and connections --------------------------------------------- */

/* The server's listening addresses, parsed: "HOST:PORT", ":PORT" / "PORT" (127.0.0.1),
 * "" (127.0.0.1:27017), or a Unix socket path (anything with a '/'). */
struct wire_server;

/*
 * Binds every address of addrs (n of them) for store s (Borrowed: must outlive the
 * server). A TCP address other than loopback is refused (DFS_EPERM, saying so) unless the
 * store has users (the server then always requires authentication) or noauth (nothing
 * enforced), which logs a warning. No thread is started
 * (so a daemon may bind before it forks). *out Owned, freed by wire_server_stop.
 */
int wire_server_bind(struct store *s, const char *const *addrs, int n, bool noauth,
		     struct wire_server **out, struct dfs_err *err);
/* Makes every TCP connection of w use TLS (cert, key: PEM files), refusing the clients that
 * do not (a line in the log); Unix socket connections stay plaintext. Before
 * wire_server_start. Errors: wire_tls_new's. */
int wire_server_tls(struct wire_server *w, const char *cert, const char *key, struct dfs_err *err);
/* Starts the accepting thread (after a fork). */
int wire_server_start(struct wire_server *w, struct dfs_err *err);
/* The address listener i is bound to ("127.0.0.1:40123", "/tmp/x.sock"), Borrowed. */
const char *wire_server_addr(const struct wire_server *w, int i);
/* Stops accepting, closes every connection, waits for their threads and frees w (NULL:
 * no-op). Unix socket files it made are removed. */
void wire_server_stop(struct wire_server *w);
/* The process id of a Unix socket connection's client (0: TCP, unknown, or cn NULL): the
 * "client" of its operations in currentOp and system.profile, as a FUSE caller's pid. */
int wire_conn_pid(const struct wire_conn *cn);
/* A TCP connection's client address ("127.0.0.1:51234"), or "" (Unix sockets, cn NULL). */
const char *wire_conn_addr(const struct wire_conn *cn);
/* The connection's authentication state (NULL for cn NULL), Borrowed: lives with cn. */
struct wire_auth *wire_conn_auth(struct wire_conn *cn);
/* How cn's server enforces authentication (WIRE_AUTH_USERS for cn NULL). */
enum wire_auth_mode wire_conn_auth_mode(const struct wire_conn *cn);
/* Connections open now (serverStatus connections.current). */
int wire_server_connections(void);

#endif
