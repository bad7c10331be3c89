/*
 * cli.c - the docfs command line: argument parsing and the subcommands (mount, import,
 * export, check, generate, snapshot, snapshots, restore, index, explain). Errors go to stderr as
 * "docfs <command>: <message>" with exit status 1. The work itself is done by the store, the
 * inserter and the mount.
 */
#include "fs_int.h"
#include "fs.h"
#include "query.h"
#include "router/router.h"
#include "replset/replset.h"
#include "wire/wire.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static const char usage_text[] =
	"usage: docfs <command> [options]\n"
	"\n"
	"commands:\n"
	"  mount [-f] [-d] [-o OPT,...] STORE MOUNTPOINT\n"
	"      Mount the store at MOUNTPOINT; returns once the mount is live (-f: stay in the\n"
	"      foreground, -d: debug output). Unmount with `fusermount3 -u MOUNTPOINT`.\n"
	"      Options: allow_other (and other FUSE mount options), log=FILE (append errors,\n"
	"      index build progress and TTL deletions to FILE), notify_ms=N (how often to\n"
	"      look for changes by other processes, 200),\n"
	"      sort_mem=BYTES (a query sort spills to temporary files past this, 32 MiB),\n"
	"      result_mem=BYTES (larger query results go to a temporary file, 8 MiB),\n"
	"      doc_cache=BYTES (each database keeps the documents indexed queries fetched, up\n"
	"      to this much, 64 MiB; 0: none),\n"
	"      ttl_s=N (delete documents expired by TTL indexes every N seconds, 60; 0: never),\n"
	"      dirplus_nodes=N (listings give the kernel attributes, and the daemon keeps a\n"
	"      node, for documents only while it holds fewer than N nodes, 1000000),\n"
	"      uring (serve requests through FUSE over io_uring, a queue per CPU: Linux 6.14+\n"
	"      with /sys/module/fuse/parameters/enable_uring set to Y).\n"
	"      listen=ADDR (also serve MongoDB's wire protocol from the mount's daemon on\n"
	"      HOST:PORT, :PORT or a Unix socket path; several allowed; empty: 127.0.0.1:27017),\n"
	"      noauth (require no authentication, and allow a non-loopback listen address\n"
	"      without users), cursor_timeout_s=N (close wire cursors idle for N seconds, 600),\n"
	"      tls_cert=FILE,tls_key=FILE (TLS for the wire's TCP clients, PEM files; plaintext\n"
	"      TCP clients are refused).\n"
	"      replset=NAME,zk=HOST:PORT[;HOST:PORT...] (a member of replica set NAME, known\n"
	"      by its first listen= address as rs.conf() names it; ZooKeeper holds the set's\n"
	"      configuration and elections; see README \"Replica sets\"), w=1|N|majority|MODE\n"
	"      [:wtimeout=MS][:j=true] (a primary's write concern for document files and write\n"
	"      paths: close() returns once it is met, else fails with ETIMEDOUT; default w=1).\n"
	"  serve STORE [--listen ADDR]... [--noauth] [--log FILE] [--cursor-timeout-s N]\n"
	"        [--tls-cert FILE --tls-key FILE] [--replset NAME --zk HOST:PORT[;...]]\n"
	"      Serve the store to MongoDB clients (mongosh, drivers) over the wire protocol,\n"
	"      without FUSE, until SIGINT or SIGTERM. ADDR is HOST:PORT, :PORT or a Unix socket\n"
	"      path (default 127.0.0.1:27017); a non-loopback HOST needs users in the store\n"
	"      (docfs user) or --noauth. Prints 'listening on ADDR' for each. Log lines go to\n"
	"      FILE (default: standard error). --tls-cert/--tls-key: TLS for TCP clients.\n"
	"  user STORE add NAME [--db DB] [--roles ROLE[@DB],...] [--uid N] [--gid N]\n"
	"  user STORE drop NAME [--db DB] | user STORE list\n"
	"      Manage the wire protocol's users (SCRAM-SHA-256; admin/system.users). add reads\n"
	"      the password from standard input (one line), or prompts on a terminal; roles\n"
	"      default to root@admin; DB (the authentication database) to admin; --uid and\n"
	"      --gid make the user's commands see only the documents that uid may read.\n"
	"  import STORE DB.COLL [FILE|-] [--drop] [--stopOnError] [--mode insert|upsert|merge]\n"
	"         [--upsertFields F1,F2] [--type json|csv|tsv] [--headerline | --fields F1,F2]\n"
	"      Insert documents (Extended JSON: one or many per line, separated by commas, or\n"
	"      one JSON array) or CSV/TSV records from FILE or standard input; --drop empties\n"
	"      the collection first. Goes on past duplicate keys, reporting each (exit 1),\n"
	"      unless --stopOnError; stops at a document that does not parse, keeping the\n"
	"      ones before it. upsert replaces the document with the same _id (or upsert\n"
	"      fields), merge sets the imported fields on it.\n"
	"  export STORE DB.COLL [-o FILE] [--query FILTER] [--sort SORT] [--projection P]\n"
	"         [--skip N] [--limit N] [--jsonArray] [--fields F1,F2] [--type json|csv]\n"
	"      Write the documents (all, or those matching FILTER, in SORT order) as one line\n"
	"      each of relaxed, type-exact Extended JSON. FILTER, SORT and P are documents in\n"
	"      the shell-literal syntax, e.g. --query '{age: {$gt: 30}}' --sort '{age: -1}'.\n"
	"      --jsonArray writes one JSON array; --fields keeps those fields; --type csv\n"
	"      writes a header line and one CSV record a document (needs --fields).\n"
	"  index STORE DB.COLL create SPEC [--name NAME] | drop NAME | list\n"
	"      Create, drop or list the indexes of a collection. SPEC is a key pattern\n"
	"      ('{price: 1}', '{name: 1, price: -1}', '{h: \"hashed\"}') or a whole spec\n"
	"      ('{key: {email: 1}, unique: true, name: \"by_email\"}'; also sparse,\n"
	"      partialFilterExpression, expireAfterSeconds); create builds the index in one\n"
	"      transaction and prints its name (the collection is created if needed).\n"
	"      list prints each index as one line of JSON: its spec and \"stats\".\n"
	"  explain STORE DB.COLL QUERY\n"
	"      Print the plan of a find or a pipeline, as reading DB/COLL/explain/QUERY in a\n"
	"      mount does: QUERY is '<filter>[?sort=..&limit=..&hint=..&verbosity=..&format=..]',\n"
	"      '[<stage>, ...][?verbosity=..&format=..]' (a pipeline) or '@name'.\n"
	"  capped STORE DB.COLL SIZE [MAX]\n"
	"      Make the collection capped (MongoDB's convertToCapped; created if needed): at\n"
	"      most SIZE bytes of BSON (rounded up to a multiple of 256, at least 4096) and\n"
	"      MAX documents; the oldest documents past either limit are removed, now and at\n"
	"      every insert. Prints the collection's options.\n"
	"  watch STORE [DB[.COLL]] [OPTIONS]\n"
	"      Print change events as JSON Lines, as reading .changes?OPTIONS of the mount,\n"
	"      the database or the collection does: OPTIONS is 'follow=1&resumeAfter=..&\n"
	"      startAfter=..&startAtOperationTime=..&fullDocument=updateLookup&filter=..&\n"
	"      pipeline=..'. Without follow=1 it ends at the newest event.\n"
	"  changes-keep STORE DB BYTES\n"
	"      Keep the last BYTES (at least 4096; default 256 MiB) of DB's change events;\n"
	"      older ones are trimmed and resuming before them fails (history lost). 0 records\n"
	"      no events (bulk loads write about a third as much).\n"
	"  stat [-n N] [--json] [--noheaders] [--humanReadable=false] MOUNTPOINT [SECONDS]\n"
	"      mongostat's view of a mount, a row every SECONDS (1): operations per second,\n"
	"      memory, queued and active clients, network bytes, open handles (conn).\n"
	"  top [-n N] [--json] MOUNTPOINT [SECONDS]\n"
	"      mongotop's view: the time spent per collection (total, read, write) in each\n"
	"      interval, the 10 busiest first.\n"
	"  check STORE\n"
	"      Verify SQLite integrity and the store's invariants; exit 0 when sound.\n"
	"  dbhash STORE DB [COLL]...\n"
	"      Print MongoDB's dbHash of DB (all its collections, or those named): the MD5\n"
	"      of each collection's documents (their BSON in _id order) and of the database,\n"
	"      as the wire protocol's dbHash answers; equal stores print equal md5s.\n"
	"  generate TEMPLATE [-n N] [--seed S]\n"
	"      Write N (default 1) documents as JSON Lines from an mgenerate-style template\n"
	"      (a file, or the template text itself when it starts with '{').\n"
	"  snapshot STORE [DB[.COLL]] [-m MESSAGE] [--tag NAME] [--repo PATH] [--branch B]\n"
	"      Commit the database (every database when none is given) or one collection to\n"
	"      a git repository (default: STORE/snapshots.git) as <db>/<coll>/<name>.json\n"
	"      blobs, the bytes the mount shows. Incremental, consistent, never blocks writers.\n"
	"  snapshots STORE [--repo PATH] [--branch B]\n"
	"      List the snapshots, newest first: id, time, documents, refs, message.\n"
	"  restore STORE REF DB.COLL [--into DB.COLL2] [--force] [--repo PATH]\n"
	"      Restore a collection (documents and index definitions) from snapshot REF (a\n"
	"      branch, tag, commit id or main~3) in one transaction; --force replaces an\n"
	"      existing collection.\n"
	"  update STORE DB.COLL FILTER UPDATE [--multi] [--upsert] [--array-filters A]\n"
	"         [--return before|after] [--sort S] [--projection P]\n"
	"      updateOne (updateMany with --multi, replaceOne when UPDATE has no operators),\n"
	"      atomically; --return makes it findAndModify and prints the document as it was\n"
	"      or as it is now. Prints MongoDB's result as one JSON line.\n"
	"  delete STORE DB.COLL FILTER [--one] [--return before] [--sort S]\n"
	"      deleteMany (deleteOne with --one; findOneAndDelete with --return before).\n"
	"  bulk STORE DB.COLL [FILE|-] [--unordered] [--atomic]\n"
	"      bulkWrite: JSON Lines of {insertOne|updateOne|updateMany|replaceOne|deleteOne|\n"
	"      deleteMany: {...}} operations; ordered unless --unordered (stop at the first\n"
	"      error), --atomic for all or nothing. Prints the BulkWriteResult.\n"
	"  aggregate STORE DB.COLL PIPELINE [--format jsonl|json|pretty]\n"
	"      Run an aggregation pipeline (a JSON array of stages, or @NAME for one saved in\n"
	"      .queries/NAME) and print the results, one JSON line each.\n"
	"  cluster CONFIG_STORE COMMAND | status\n"
	"      Run a sharding admin command, a document in the shell-literal syntax\n"
	"      ('{addShard: \"/srv/s0\"}', enableSharding, shardCollection, addShardToZone,\n"
	"      updateZoneKeyRange, split, moveChunk, balancerStop, listShards, ...), against\n"
	"      the cluster config in CONFIG_STORE (created if absent) and print MongoDB's\n"
	"      reply; a failed command (ok: 0, exit status 1) changes nothing. status prints\n"
	"      sh.status(). No documents move yet (README.md, Sharding).\n"
	"  router CONFIG_STORE MOUNTPOINT [-f]\n"
	"         [-o log=FILE,balancer_ms=N,chunk_mb=N,listen=ADDR,noauth,...]\n"
	"         [-o zk=HOST:PORT[;HOST:PORT],cluster=NAME]\n"
	"      Mount the cluster of CONFIG_STORE: one namespace over the shards' mounted\n"
	"      directories (config.shards hosts), writes sent to the shard owning each\n"
	"      shard key, queries to the shards their filter targets; /.cluster/command\n"
	"      takes the admin commands; a balancer moves chunks (every 10 s). With zk=,\n"
	"      the cluster config lives in ZooKeeper under /docfs/cluster/NAME (CONFIG_STORE\n"
	"      is a local cache) and several routers serve the cluster at once.\n"
	"      listen=ADDR (as mount's) also answers MongoDB's wire protocol as a mongos:\n"
	"      mongosh's sh.* helpers, routed finds and writes, the config database.\n"
	"  rs ZK SET initiate CONF | conf | status | reconfig CONF | add HOST|MEMBER | remove HOST\n"
	"      rs.initiate(), rs.conf(), rs.status(), rs.reconfig(), rs.add(), rs.remove() of\n"
	"      replica set SET, whose configuration ZooKeeper at ZK (host:port, several\n"
	"      joined by ';') keeps; prints MongoDB's reply, exit status 1 when refused\n"
	"      (nothing changed). Members: mount's replset= (README.md, Replica sets).\n"
	"  rs ZK SET stepDown [SECS [CATCHUP]] | freeze HOST SECS\n"
	"      rs.stepDown() on the set's primary (it hands over to a secondary caught up within\n"
	"      CATCHUP s, 10, and does not stand for SECS, 60), rs.freeze() on member HOST.\n"
	"  version\n"
	"      Print the version.\n"
	"\n"
	"STORE is a directory; each database is one SQLite file in it.\n";

static int fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "docfs %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Splits "db.coll" at the first '.'. */
static int split_ns(const char *ns, char *db, char *coll, struct dfs_err *err)
{
	const char *dot = strchr(ns, '.');

	if (!dot || dot == ns || !dot[1])
		return dfs_err_set(err, DFS_EINVAL, "'%s' is not DB.COLL", ns);
	if ((size_t)(dot - ns) > DFS_MAX_NS_NAME || strlen(dot + 1) > DFS_MAX_NS_NAME)
		return dfs_err_set(err, DFS_ENAMETOOLONG, "'%s': names are at most %d bytes", ns,
				   DFS_MAX_NS_NAME);
	memcpy(db, ns, (size_t)(dot - ns));
	db[dot - ns] = '\0';
	strcpy(coll, dot + 1);
	return store_db_name_check(db, err) || store_coll_name_check(coll, err);
}

/* Opens STORE and DB.COLL; creates them when create is set. */
static int open_coll(const char *path, const char *ns, bool create, struct store **s,
		     struct store_db **db, struct store_coll *c, struct dfs_err *err)
{
	char dbname[DFS_MAX_NS_NAME + 1], collname[DFS_MAX_NS_NAME + 1];
	struct store_txn *t;
	int rc;

	if ((rc = split_ns(ns, dbname, collname, err)))
		return rc;
	if ((rc = store_open(path, create, s, err)))
		return rc;
	if ((rc = store_db_get(*s, dbname, create, db, err)))
		return rc;
	if ((rc = store_txn_begin(*db, create, &t, err)))
		return rc;
	rc = store_coll_find(t, collname, c, err);
	if (rc == DFS_ENOENT && create) {
		dfs_err_clear(err);
		rc = store_coll_create(t, collname, 0755, getuid(), getgid(), c, err);
	}
	if (rc) {
		store_txn_abort(t);
		return rc;
	}
	return create ? store_txn_commit(t, err) : (store_txn_abort(t), 0);
}

/* ---- mount ------------------------------------------------------------------------- */

/* The options' strings, freed whatever mount_args() returns. */
struct mount_strs {
	char *copies[FS_MAX_LISTEN]; /* Owned: the -o arguments, split in place */
	int ncopies;
	char *log;		  /* Owned: log=FILE */
	struct dfs_buf fuse_opts; /* options passed on to libfuse */
};

static int mount_args(int argc, char **argv, struct mount_strs *ms)
{
	struct fs_mount_opts o = {0};
	struct dfs_err err = {0};
	const char *pos[2];
	int npos = 0, rc;

	o.notify_ms = 200;
	o.ttl_s = 60;
	o.dirplus_nodes = 1000000;
	o.doc_cache = STORE_DOC_CACHE_DEFAULT;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-f") == 0) {
			o.foreground = true;
		} else if (strcmp(argv[i], "-d") == 0) {
			o.debug = o.foreground = true;
		} else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
			char *save = NULL, *tok;

			char *copy = strdup(argv[++i]);

			if (!copy || ms->ncopies == FS_MAX_LISTEN)
				return fail("mount", "too many -o options");
			ms->copies[ms->ncopies++] = copy; /* listen= values point into it */
			for (tok = strtok_r(copy, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save)) {
				if (strncmp(tok, "log=", 4) == 0) {
					free(ms->log);
					ms->log = strdup(tok + 4);
				} else if (strcmp(tok, "uring") == 0) {
					o.uring = true;
				} else if (strcmp(tok, "listen") == 0 ||
					   strncmp(tok, "listen=", 7) == 0) {
					if (o.nlisten == FS_MAX_LISTEN)
						return fail("mount", "at most %d listen= options",
							    FS_MAX_LISTEN);
					o.listen[o.nlisten++] = tok[6] ? tok + 7 : "";
				} else if (strcmp(tok, "noauth") == 0) {
					o.noauth = true;
				} else if (strncmp(tok, "replset=", 8) == 0) {
					o.replset = tok + 8;
				} else if (strncmp(tok, "zk=", 3) == 0) {
					o.zk = tok + 3;
				} else if (strncmp(tok, "w=", 2) == 0) {
					struct dfs_err werr = {0};

					if (rs_wc_set_file_default(tok + 2, &werr))
						return fail("mount", "%s", werr.msg);
				} else if (strncmp(tok, "tls_cert=", 9) == 0) {
					o.tls_cert = tok + 9;
				} else if (strncmp(tok, "tls_key=", 8) == 0) {
					o.tls_key = tok + 8;
				} else if (strncmp(tok, "cursor_timeout_s=", 17) == 0) {
					char *end;
					long v = strtol(tok + 17, &end, 10);

					if (!tok[17] || *end || v <= 0)
						return fail("mount",
							    "cursor_timeout_s needs a positive "
							    "number of seconds");
					o.cursor_timeout_s = (int)v;
				} else if (strncmp(tok, "sort_mem=", 9) == 0 ||
					   strncmp(tok, "result_mem=", 11) == 0 ||
					   strncmp(tok, "dirplus_nodes=", 14) == 0) {
					char *end;
					unsigned long long v =
						strtoull(strchr(tok, '=') + 1, &end, 10);

					if (*end || v == 0)
						return fail("mount", "%.*s needs a positive number",
							    (int)(strchr(tok, '=') - tok), tok);
					if (tok[0] == 's')
						o.sort_mem = v;
					else if (tok[0] == 'r')
						o.result_mem = v;
					else
						o.dirplus_nodes = v;
				} else if (strncmp(tok, "doc_cache=", 10) == 0) {
					char *end;
					unsigned long long v = strtoull(tok + 10, &end, 10);

					if (!tok[10] || *end || tok[10] == '-')
						return fail("mount",
							    "doc_cache needs a number of bytes "
							    "(0: no document cache)");
					o.doc_cache = v;
				} else if (strncmp(tok, "notify_ms=", 10) == 0) {
					o.notify_ms = atoi(tok + 10);
					if (o.notify_ms <= 0)
						return fail("mount",
							    "notify_ms must be a positive number");
				} else if (strncmp(tok, "ttl_s=", 6) == 0) {
					char *end;
					long v = strtol(tok + 6, &end, 10);

					if (!tok[6] || *end || v < 0 || v > 86400 * 365)
						return fail("mount",
							    "ttl_s needs a number of seconds (0: "
							    "no TTL sweeps)");
					o.ttl_s = (int)v;
				} else {
					if (ms->fuse_opts.len)
						dfs_buf_putc(&ms->fuse_opts, ',');
					dfs_buf_puts(&ms->fuse_opts, tok);
				}
			}
		} else if (argv[i][0] == '-') {
			return fail("mount", "unknown option '%s' (see docfs --help)", argv[i]);
		} else if (npos < 2) {
			pos[npos++] = argv[i];
		} else {
			return fail("mount", "too many arguments (see docfs --help)");
		}
	}
	if (npos != 2)
		return fail("mount", "needs STORE and MOUNTPOINT (see docfs --help)");
	if ((o.replset || o.zk) && (!o.replset || !o.replset[0] || !o.zk || !o.zk[0] || !o.nlisten))
		return fail("mount", "a replica set member needs replset=NAME, zk=HOST:PORT and a "
				     "listen=ADDR (its name in rs.conf())");
	o.store = pos[0];
	o.mountpoint = pos[1];
	o.fuse_opts = ms->fuse_opts.data;
	o.log = ms->log;
	if ((rc = fs_mount_run(&o, &err)))
		return fail("mount", "%s", err.msg);
	return 0;
}

static int cmd_mount(int argc, char **argv)
{
	struct mount_strs ms = {0};
	int rc;

	dfs_buf_init(&ms.fuse_opts);
	rc = mount_args(argc, argv, &ms);
	for (int i = 0; i < ms.ncopies; i++)
		free(ms.copies[i]);
	free(ms.log);
	dfs_buf_release(&ms.fuse_opts);
	return rc;
}

/* ---- import ------------------------------------------------------------------------ */

/* An import's skipped document (a duplicate key), reported as mongoimport does. */
static void import_skipped(void *ctx, int64_t n, unsigned line, const struct dfs_err *e)
{
	(void)ctx;
	fprintf(stderr, "docfs import: document %lld (line %u) not imported: %s\n", (long long)n,
		line, e->msg);
}

static int cmd_import(int argc, char **argv)
{
	const char *pos[3] = {NULL, NULL, NULL}, *fields = NULL, *upsert_fields = NULL;
	bool drop = false, tty = isatty(2), headerline = false;
	struct store_attrs a = {0644, getuid(), getgid(), 0};
	struct dfs_err err = {0};
	struct fs_inserter ins;
	struct fs_import im;
	struct store *s = NULL;
	struct store_db *db;
	struct store_coll c;
	FILE *in = stdin;
	char *chunk = NULL;
	double t0 = now_s(), last = 0;
	int npos = 0, rc, type = FS_IMPORT_JSON, mode = FS_IMPORT_INSERT;
	bool stop = false;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--jsonArray") == 0) {
			/* an array is recognised by itself (insert.c note 5) */
		} else if (strcmp(argv[i], "--drop") == 0) {
			drop = true;
		} else if (strcmp(argv[i], "--stopOnError") == 0) {
			stop = true;
		} else if (strcmp(argv[i], "--headerline") == 0) {
			headerline = true;
		} else if (strcmp(argv[i], "--type") == 0 && v) {
			i++;
			if (!strcmp(v, "json"))
				type = FS_IMPORT_JSON;
			else if (!strcmp(v, "csv"))
				type = FS_IMPORT_CSV;
			else if (!strcmp(v, "tsv"))
				type = FS_IMPORT_TSV;
			else
				return fail("import", "--type '%s': json, csv or tsv", v);
		} else if (strcmp(argv[i], "--mode") == 0 && v) {
			i++;
			if (!strcmp(v, "insert"))
				mode = FS_IMPORT_INSERT;
			else if (!strcmp(v, "upsert"))
				mode = FS_IMPORT_UPSERT;
			else if (!strcmp(v, "merge"))
				mode = FS_IMPORT_MERGE;
			else
				return fail("import", "--mode '%s': insert, upsert or merge", v);
		} else if (strcmp(argv[i], "--fields") == 0 && v) {
			fields = argv[++i];
		} else if (strcmp(argv[i], "--upsertFields") == 0 && v) {
			upsert_fields = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return fail("import", "unknown option '%s' (see docfs --help)", argv[i]);
		} else if (npos < 3) {
			pos[npos++] = argv[i];
		} else {
			return fail("import", "too many arguments");
		}
	}
	if (npos < 2)
		return fail("import", "needs STORE and DB.COLL (see docfs --help)");
	if (type != FS_IMPORT_JSON && !headerline && !fields)
		return fail("import", "--type csv and tsv need --headerline or --fields");
	if (type == FS_IMPORT_JSON && (headerline || fields))
		return fail("import", "--headerline and --fields are for --type csv and tsv");
	if (upsert_fields && mode == FS_IMPORT_INSERT)
		mode = FS_IMPORT_UPSERT; /* as mongoimport: --upsertFields implies upsert */
	if (pos[2] && strcmp(pos[2], "-") != 0) {
		in = fopen(pos[2], "rb");
		if (!in)
			return fail("import", "cannot open '%s': %s", pos[2], strerror(errno));
	}
	rc = open_coll(pos[0], pos[1], true, &s, &db, &c, &err);
	if (!rc && drop) {
		struct store_txn *t;

		rc = store_txn_begin(db, true, &t, &err);
		if (!rc) {
			/* Emptied in place: a mount keeps seeing the same directory. */
			rc = store_coll_empty(t, c.id, &err);
			rc = rc ? (store_txn_abort(t), rc) : store_txn_commit(t, &err);
		}
	}
	fs_import_init(&im, db, c.id);
	im.type = type;
	im.mode = mode;
	im.stop_on_error = stop;
	im.header_pending = headerline;
	if (!rc && fields)
		rc = fs_import_set_fields(&im, fields, &err);
	if (!rc && upsert_fields)
		rc = fs_import_set_upsert_fields(&im, upsert_fields, &err);
	if (rc) {
		fs_import_release(&im);
		store_free(s);
		if (in != stdin)
			fclose(in);
		return fail("import", "%s", err.msg);
	}
	fs_inserter_init(&ins, db, c.id, &a);
	ins.keep_going = !stop; /* mongoimport's default: go on past duplicate keys */
	ins.on_skip = import_skipped;
	if (mode != FS_IMPORT_INSERT) {
		ins.sink = fs_import_sink;
		ins.sink_ctx = &im;
	}
	chunk = malloc(1 << 20);
	if (!chunk)
		abort();
	for (;;) {
		size_t n = fread(chunk, 1, 1 << 20, in);
		bool eof = n < (1 << 20) && (feof(in) || ferror(in));

		if (type == FS_IMPORT_JSON) {
			rc = fs_inserter_feed(&ins, chunk, n, eof);
		} else {
			rc = fs_import_csv(&im, chunk, n, eof, &ins.err);
			if (!rc)
				rc = fs_inserter_feed(&ins, im.out.data ? im.out.data : "",
						      im.out.len, eof);
		}
		if (rc)
			break;
		if (tty && now_s() - last > 0.5) {
			last = now_s();
			fprintf(stderr, "\r%s: %lld documents (%.0f/s)", pos[1],
				(long long)ins.ndocs, (double)ins.ndocs / (last - t0 + 1e-9));
		}
		if (eof)
			break;
	}
	if (!rc && mode != FS_IMPORT_INSERT)
		rc = fs_import_finish(&im, &ins.err);
	if (tty)
		fputc('\r', stderr);
	if (ferror(in) && !rc)
		rc = dfs_err_set(&ins.err, DFS_EIO, "read error: %s", strerror(errno));
	{
		int64_t ok = mode == FS_IMPORT_INSERT ? ins.ndocs : im.nwritten;
		int64_t bad = mode == FS_IMPORT_INSERT ? ins.nskipped : im.nfailed;

		if (rc) {
			fail("import", "%s", ins.err.msg);
			fprintf(stderr, "docfs import: %lld documents imported before the error\n",
				(long long)ok);
		} else {
			fprintf(stderr, "%lld documents imported into %s in %.2fs", (long long)ok,
				pos[1], now_s() - t0);
			if (bad)
				fprintf(stderr, "; %lld failed to import", (long long)bad);
			fputc('\n', stderr);
		}
		if (!rc && bad)
			rc = DFS_EEXIST; /* some documents were refused: exit 1, as mongoimport */
	}
	fs_inserter_release(&ins);
	fs_import_release(&im);
	free(chunk);
	store_free(s);
	if (in != stdin)
		fclose(in);
	return rc ? 1 : 0;
}

/* ---- export ----------------------------------------------------------------------- */

/* Parses a shell-literal document given on the command line for option what. */
static int arg_doc(const char *what, const char *text, bson_t *out, struct dfs_err *err)
{
	int rc;

	bson_init(out);
	rc = store_codec_parse_doc(text, strlen(text), out, err);
	if (rc == DFS_EINCOMPLETE)
		rc = DFS_EINVAL;
	if (rc)
		dfs_err_prefix(err, "%s: ", what);
	return rc;
}

/* One CSV field of an exported document: the value at path (dotted), as mongoexport writes
 * it: strings as they are (quoted when they hold a comma, a quote or a line break), numbers
 * and booleans plainly, missing and null as nothing, anything else as its JSON. */
static void csv_field(const bson_t *doc, const char *path, struct dfs_buf *out)
{
	struct dfs_buf v;
	bson_iter_t it;
	const char *str;
	uint32_t n;

	if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &it))
		return;
	dfs_buf_init(&v);
	switch (bson_iter_type(&it)) {
	case BSON_TYPE_NULL:
		break;
	case BSON_TYPE_UTF8:
		str = bson_iter_utf8(&it, &n);
		dfs_buf_append(&v, str, n);
		break;
	case BSON_TYPE_INT32:
		dfs_buf_printf(&v, "%d", bson_iter_int32(&it));
		break;
	case BSON_TYPE_INT64:
		dfs_buf_printf(&v, "%lld", (long long)bson_iter_int64(&it));
		break;
	case BSON_TYPE_BOOL:
		dfs_buf_printf(&v, "%s", bson_iter_bool(&it) ? "true" : "false");
		break;
	default:
		store_codec_render_value(bson_iter_value(&it), &v, NULL);
	}
	if (v.len && strpbrk(v.data, ",\"\r\n")) {
		dfs_buf_putc(out, '"');
		for (size_t i = 0; i < v.len; i++) {
			if (v.data[i] == '"')
				dfs_buf_putc(out, '"');
			dfs_buf_putc(out, v.data[i]);
		}
		dfs_buf_putc(out, '"');
	} else if (v.len) {
		dfs_buf_append(out, v.data, v.len);
	}
	dfs_buf_release(&v);
}

static int cmd_export(int argc, char **argv)
{
	const char *pos[2] = {NULL, NULL}, *outpath = NULL, *fields = NULL;
	const char *qtext = NULL, *stext = NULL, *ptext = NULL;
	bool json_array = false, csv = false;
	char **fv = NULL;
	int nf = 0;
	struct query_find_opts o = {0};
	bson_t filter, sort, proj;
	struct query_cursor *cur = NULL;
	struct dfs_err err = {0};
	struct store *s = NULL;
	struct store_txn *t = NULL;
	struct store_db *db;
	struct store_coll c;
	struct dfs_buf line;
	const bson_t *doc;
	FILE *out = stdout;
	int64_t n = 0;
	int npos = 0, rc;

	for (int i = 1; i < argc; i++) {
		char *end;

		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
			outpath = argv[++i];
		} else if ((strcmp(argv[i], "--query") == 0 || strcmp(argv[i], "-q") == 0) &&
			   i + 1 < argc) {
			qtext = argv[++i];
		} else if (strcmp(argv[i], "--sort") == 0 && i + 1 < argc) {
			stext = argv[++i];
		} else if (strcmp(argv[i], "--projection") == 0 && i + 1 < argc) {
			ptext = argv[++i];
		} else if ((strcmp(argv[i], "--fields") == 0 || strcmp(argv[i], "-f") == 0) &&
			   i + 1 < argc) {
			fields = argv[++i];
		} else if (strcmp(argv[i], "--jsonArray") == 0) {
			json_array = true;
		} else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc) {
			i++;
			if (strcmp(argv[i], "csv") == 0)
				csv = true;
			else if (strcmp(argv[i], "json") != 0)
				return fail("export", "--type '%s': json or csv", argv[i]);
		} else if ((strcmp(argv[i], "--limit") == 0 || strcmp(argv[i], "--skip") == 0) &&
			   i + 1 < argc) {
			long long v = strtoll(argv[i + 1], &end, 10);

			if (*end || v < 0 || !argv[i + 1][0])
				return fail("export", "%s needs a whole number >= 0, not '%s'",
					    argv[i], argv[i + 1]);
			if (strcmp(argv[i], "--limit") == 0)
				o.limit = v;
			else
				o.skip = v;
			i++;
		} else if (argv[i][0] == '-') {
			return fail("export", "unknown option '%s' (see docfs --help)", argv[i]);
		} else if (npos < 2) {
			pos[npos++] = argv[i];
		} else {
			return fail("export", "too many arguments");
		}
	}
	if (npos < 2)
		return fail("export", "needs STORE and DB.COLL (see docfs --help)");
	if (csv && !fields)
		return fail("export", "--type csv needs --fields (the columns)");
	if (csv && json_array)
		return fail("export", "--jsonArray is for --type json");
	if (fields && ptext)
		return fail("export", "--fields and --projection are the same thing: give one");
	bson_init(&filter);
	bson_init(&sort);
	bson_init(&proj);
	dfs_buf_init(&line);
	rc = 0;
	if (qtext) {
		bson_destroy(&filter);
		rc = arg_doc("--query", qtext, &filter, &err);
	}
	if (!rc && stext) {
		bson_destroy(&sort);
		rc = arg_doc("--sort", stext, &sort, &err);
		o.sort = &sort;
	}
	if (!rc && ptext) {
		bson_destroy(&proj);
		rc = arg_doc("--projection", ptext, &proj, &err);
		o.projection = &proj;
	}
	for (const char *p = fields; !rc && p && *p;) {
		const char *cm = strchr(p, ',');
		size_t len = cm ? (size_t)(cm - p) : strlen(p);

		if (!len) {
			rc = dfs_err_set(&err, DFS_EINVAL, "--fields: an empty field name");
			break;
		}
		fv = realloc(fv, (size_t)(nf + 1) * sizeof(*fv));
		if (!fv || !(fv[nf] = strndup(p, len)))
			abort();
		bson_append_int32(&proj, fv[nf], -1, 1);
		nf++;
		o.projection = &proj;
		p += len + (cm ? 1 : 0);
	}
	o.filter = &filter;
	if (!rc)
		rc = open_coll(pos[0], pos[1], false, &s, &db, &c, &err);
	/* One read transaction: the export is one point-in-time view. */
	if (!rc)
		rc = store_txn_begin(db, false, &t, &err);
	if (!rc)
		rc = query_find_open(t, c.id, &o, &cur, &err);
	if (!rc && outpath && !(out = fopen(outpath, "wb")))
		rc = dfs_err_set(&err, DFS_EIO, "cannot create '%s': %s", outpath, strerror(errno));
	if (!rc && csv) { /* the header line: the fields as given */
		for (int i = 0; i < nf; i++)
			fprintf(out, "%s%s", i ? "," : "", fv[i]);
		fputc('\n', out);
	}
	if (!rc && json_array)
		fputc('[', out);
	while (!rc) {
		rc = query_cursor_next(cur, &doc, &err);
		if (rc == DFS_ENOENT) {
			rc = 0; /* the end of the results */
			break;
		}
		if (!rc && csv) {
			for (int i = 0; i < nf; i++) {
				if (i)
					dfs_buf_putc(&line, ',');
				csv_field(doc, fv[i], &line);
			}
		} else if (!rc) {
			if (json_array && n)
				dfs_buf_putc(&line, ',');
			rc = store_codec_render(doc, STORE_RENDER_COMPACT, &line, &err);
		}
		dfs_buf_putc(&line, '\n');
		if (!rc && fwrite(line.data, 1, line.len, out) != line.len)
			rc = dfs_err_set(&err, DFS_EIO, "write error: %s", strerror(errno));
		dfs_buf_reset(&line);
		n++;
	}
	if (!rc && json_array)
		fputs("]\n", out);
	if (out && fflush(out) != 0 && !rc)
		rc = dfs_err_set(&err, DFS_EIO, "write error: %s", strerror(errno));
	for (int i = 0; i < nf; i++)
		free(fv[i]);
	free(fv);
	if (out && out != stdout)
		fclose(out);
	query_cursor_free(cur);
	store_txn_abort(t);
	store_free(s);
	bson_destroy(&filter);
	bson_destroy(&sort);
	bson_destroy(&proj);
	dfs_buf_release(&line);
	if (rc)
		return fail("export", "%s", err.msg);
	if (outpath)
		fprintf(stderr, "%lld documents exported to %s\n", (long long)n, outpath);
	return 0;
}

/* ---- index, explain ---------------------------------------------------------------- */

/* Builds the spec of `docfs index create`: SPEC is a whole spec when its "key" is a
 * document, else a key pattern. */
static int index_spec(const char *text, bson_t *spec, struct dfs_err *err)
{
	bson_iter_t it;
	bson_t in;
	int rc;

	bson_init(&in);
	rc = fs_index_spec_parse(text, strlen(text), &in, err);
	if (!rc && bson_iter_init_find(&it, &in, "key") && BSON_ITER_HOLDS_DOCUMENT(&it))
		bson_concat(spec, &in);
	else if (!rc)
		BSON_APPEND_DOCUMENT(spec, "key", &in);
	bson_destroy(&in);
	if (rc)
		dfs_err_prefix(err, "SPEC: ");
	return rc;
}

static int print_indexes(struct store_db *db, int64_t coll, struct dfs_err *err)
{
	struct store_index *ixs = NULL;
	struct store_txn *t;
	struct dfs_buf line;
	int n = 0, rc;

	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	dfs_buf_init(&line);
	rc = store_index_list(t, coll, &ixs, &n, err);
	for (int i = 0; !rc && i < n; i++) {
		dfs_buf_reset(&line);
		rc = fs_index_render(t, coll, ixs[i].name, false, &line, err);
		dfs_buf_putc(&line, '\n');
		if (!rc && fwrite(line.data, 1, line.len, stdout) != line.len)
			rc = dfs_err_set(err, DFS_EIO, "write error: %s", strerror(errno));
	}
	if (ixs)
		store_index_list_free(ixs, n);
	store_txn_abort(t);
	dfs_buf_release(&line);
	return rc;
}

static int cmd_index(int argc, char **argv)
{
	const char *pos[4] = {NULL, NULL, NULL, NULL}, *name = NULL;
	char used[128];
	struct dfs_err err = {0};
	struct store *s = NULL;
	struct store_db *db;
	struct store_coll c;
	int npos = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
			name = argv[++i];
		else if (argv[i][0] == '-' && argv[i][1] == '-')
			return fail("index", "unknown option '%s' (see docfs --help)", argv[i]);
		else if (npos < 4)
			pos[npos++] = argv[i];
		else
			return fail("index", "too many arguments (see docfs --help)");
	}
	if (npos < 3)
		return fail("index", "needs STORE, DB.COLL and create, drop or list (see docfs "
				     "--help)");
	if (strcmp(pos[2], "create") == 0) {
		bson_t spec;

		if (npos != 4)
			return fail("index", "create needs a SPEC, e.g. '{price: 1}'");
		bson_init(&spec);
		rc = index_spec(pos[3], &spec, &err);
		if (!rc)
			rc = open_coll(pos[0], pos[1], true, &s, &db, &c, &err);
		if (!rc)
			rc = fs_index_create(db, c.id, name, &spec, used, sizeof(used), &err);
		if (!rc)
			printf("%s\n", used);
		bson_destroy(&spec);
	} else if (strcmp(pos[2], "drop") == 0) {
		if (npos != 4 || name)
			return fail("index", "drop needs the NAME of the index");
		rc = open_coll(pos[0], pos[1], false, &s, &db, &c, &err);
		if (!rc)
			rc = fs_index_drop(db, c.id, pos[3], &err);
	} else if (strcmp(pos[2], "list") == 0) {
		if (npos != 3 || name)
			return fail("index", "list takes no other argument");
		rc = open_coll(pos[0], pos[1], false, &s, &db, &c, &err);
		if (!rc)
			rc = print_indexes(db, c.id, &err);
	} else {
		return fail("index", "unknown action '%s' (create, drop or list)", pos[2]);
	}
	store_free(s);
	if (rc)
		return fail("index", "%s", err.msg);
	return fflush(stdout) == 0 ? 0 : fail("index", "write error: %s", strerror(errno));
}

/* A whole non-negative decimal number of argv, or -1. */
static int64_t count_arg(const char *a)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(a, &end, 10);
	if (errno || end == a || *end || v < 0)
		return -1;
	return (int64_t)v;
}

static int cmd_capped(int argc, char **argv)
{
	struct dfs_err err = {0};
	struct store *s = NULL;
	struct store_db *db;
	struct store_coll c;
	struct store_txn *t = NULL;
	int64_t size, max = 0;
	int rc;

	if (argc != 4 && argc != 5)
		return fail("capped", "needs STORE, DB.COLL and SIZE, and optionally MAX (see "
				      "docfs --help)");
	if ((size = count_arg(argv[3])) <= 0)
		return fail("capped", "SIZE '%s' must be a positive number of bytes", argv[3]);
	if (argc == 5 && (max = count_arg(argv[4])) < 0)
		return fail("capped", "MAX '%s' must be a number of documents (0: no limit)",
			    argv[4]);
	rc = open_coll(argv[1], argv[2], true, &s, &db, &c, &err);
	if (!rc)
		rc = store_txn_begin(db, true, &t, &err);
	if (!rc)
		rc = store_coll_set_capped(t, c.id, size, max, &err);
	if (!rc)
		rc = store_coll_by_id(t, c.id, &c, &err);
	if (!rc)
		rc = store_txn_commit(t, &err);
	else if (t)
		store_txn_abort(t);
	store_free(s);
	if (rc)
		return fail("capped", "%s", err.msg);
	printf("{\"capped\": true, \"size\": %lld, \"max\": %lld, \"count\": %lld}\n",
	       (long long)c.cap_size, (long long)c.cap_max, (long long)c.cap_count);
	return fflush(stdout) == 0 ? 0 : fail("capped", "write error: %s", strerror(errno));
}

static int cmd_watch(int argc, char **argv)
{
	struct dfs_err err = {0};
	struct store *s = NULL;
	struct store_db *db = NULL;
	struct fs_changes *c = NULL;
	const char *ns = NULL, *opts = NULL;
	char dbname[DFS_MAX_NS_NAME + 1] = "", coll[DFS_MAX_NS_NAME + 1] = "";
	struct dfs_buf out;
	int rc;

	if (argc < 2 || argc > 4)
		return fail("watch", "needs STORE, and optionally DB[.COLL] and OPTIONS (see docfs "
				     "--help)");
	for (int i = 2; i < argc; i++) {
		if (strchr(argv[i], '=') && !opts)
			opts = argv[i];
		else if (!ns)
			ns = argv[i];
		else
			return fail("watch", "'%s': one namespace and one OPTIONS string at most",
				    argv[i]);
	}
	if (ns) {
		const char *dot = strchr(ns, '.');
		size_t n = dot ? (size_t)(dot - ns) : strlen(ns);

		if (n > DFS_MAX_NS_NAME || (dot && strlen(dot + 1) > DFS_MAX_NS_NAME))
			return fail("watch", "namespace '%s' is too long", ns);
		memcpy(dbname, ns, n);
		dbname[n] = '\0';
		if (dot)
			snprintf(coll, sizeof(coll), "%s", dot + 1);
	}
	rc = store_open(argv[1], false, &s, &err);
	if (!rc && ns)
		rc = store_db_get(s, dbname, false, &db, &err);
	if (!rc)
		rc = fs_changes_open(s, db, coll[0] ? coll : NULL, opts, &c, &err);
	dfs_buf_init(&out);
	while (!rc) {
		dfs_buf_reset(&out);
		rc = fs_changes_next(c, 64 * 1024, &out, NULL, NULL, &err);
		if (rc || !out.len)
			break;
		if (fwrite(out.data, 1, out.len, stdout) != out.len || fflush(stdout)) {
			dfs_buf_release(&out);
			fs_changes_free(c);
			store_free(s);
			return fail("watch", "write error: %s", strerror(errno));
		}
	}
	dfs_buf_release(&out);
	fs_changes_free(c);
	store_free(s);
	if (rc)
		return fail("watch", "%s", err.msg);
	return 0;
}

static int cmd_changes_keep(int argc, char **argv)
{
	struct dfs_err err = {0};
	struct store *s = NULL;
	struct store_db *db;
	struct store_txn *t = NULL;
	int64_t bytes;
	int rc;

	if (argc != 4)
		return fail("changes-keep", "needs STORE, DB and BYTES (see docfs --help)");
	if ((bytes = count_arg(argv[3])) < 0)
		return fail("changes-keep", "BYTES '%s' must be a number of bytes", argv[3]);
	rc = store_open(argv[1], false, &s, &err);
	if (!rc)
		rc = store_db_get(s, argv[2], false, &db, &err);
	if (!rc)
		rc = store_txn_begin(db, true, &t, &err);
	if (!rc)
		rc = store_events_set_keep(t, bytes, &err);
	if (!rc)
		rc = store_txn_commit(t, &err);
	else if (t)
		store_txn_abort(t);
	store_free(s);
	if (rc)
		return fail("changes-keep", "%s", err.msg);
	return 0;
}

static int cmd_explain(int argc, char **argv)
{
	struct dfs_err err = {0};
	struct store *s = NULL;
	struct fs_result r;
	struct store_db *db;
	struct store_coll c;
	int rc;

	if (argc != 4 || argv[1][0] == '-' || argv[2][0] == '-')
		return fail("explain", "needs STORE, DB.COLL and QUERY (see docfs --help)");
	fs_result_init(&r);
	rc = open_coll(argv[1], argv[2], false, &s, &db, &c, &err);
	if (!rc) /* a find, or a pipeline ("[...]", or @name of a saved one) */
		rc = fs_explain_path_run(db, c.id, argv[3], &r, &err);
	if (!rc && fwrite(r.mem.data, 1, r.mem.len, stdout) != r.mem.len)
		rc = dfs_err_set(&err, DFS_EIO, "write error: %s", strerror(errno));
	fs_result_release(&r);
	store_free(s);
	if (rc)
		return fail("explain", "%s", err.msg);
	return fflush(stdout) == 0 ? 0 : fail("explain", "write error: %s", strerror(errno));
}

/* ---- check ------------------------------------------------------------------------- */

static void print_problem(void *ctx, const char *problem)
{
	fprintf(stderr, "docfs check: %s\n", problem);
}

static int count_db(void *ctx, const char *name)
{
	(*(int *)ctx)++;
	return 0;
}

static int cmd_check(int argc, char **argv)
{
	struct dfs_err err = {0};
	struct store *s;
	int ndb = 0, rc;

	if (argc != 2)
		return fail("check", "needs STORE (see docfs --help)");
	if ((rc = store_open(argv[1], false, &s, &err)))
		return fail("check", "%s", err.msg);
	rc = store_check(s, print_problem, NULL, &err);
	if (!rc)
		rc = store_db_list(s, count_db, &ndb, &err);
	store_free(s);
	if (rc)
		return fail("check", "%s", err.msg);
	printf("store '%s' is sound (%d databases)\n", argv[1], ndb);
	return 0;
}

/* ---- dbhash ------------------------------------------------------------------------ */

/* `docfs dbhash STORE DB [COLL]...`: the wire protocol's dbHash document (query/dbhash.c),
 * without its "ok", as one line of relaxed Extended JSON. A database that does not exist
 * hashes as one without collections, as mongod answers. */
static int cmd_dbhash(int argc, char **argv)
{
	struct dfs_err err = {0};
	struct store *s = NULL;
	struct store_db *db = NULL;
	struct dfs_buf out = {0};
	bson_t doc = BSON_INITIALIZER, colls = BSON_INITIALIZER;
	char host[256] = "localhost", key[16];
	int rc;

	dfs_buf_init(&out);
	if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-')
		return fail("dbhash", "needs STORE and DB, and optionally collections (see docfs "
				      "--help)");
	for (int i = 3; i < argc; i++) {
		snprintf(key, sizeof(key), "%d", i - 3);
		BSON_APPEND_UTF8(&colls, key, argv[i]);
	}
	gethostname(host, sizeof(host) - 1);
	if (!(rc = store_db_name_check(argv[2], &err)) &&
	    !(rc = store_open(argv[1], false, &s, &err))) {
		rc = store_db_get(s, argv[2], false, &db, &err);
		if (rc == DFS_ENOENT) {
			dfs_err_clear(&err);
			db = NULL;
			rc = 0;
		}
	}
	if (!rc)
		rc = query_dbhash(db, host, argc > 3 ? &colls : NULL, &doc, &err);
	if (!rc)
		rc = store_codec_render(&doc, STORE_RENDER_COMPACT, &out, &err);
	store_free(s);
	bson_destroy(&doc);
	bson_destroy(&colls);
	if (rc) {
		dfs_buf_release(&out);
		return fail("dbhash", "%s", err.msg);
	}
	printf("%s\n", out.data);
	dfs_buf_release(&out);
	return fflush(stdout) == 0 ? 0 : fail("dbhash", "write error: %s", strerror(errno));
}

/* ---- snapshots --------------------------------------------------------------------- */

static int snapshot_db(struct store *s, const char *db, const char *coll,
		       const struct store_snap_opts *base, struct dfs_err *err)
{
	struct store_snap_opts o = *base;
	struct store_snap_result r;
	int rc;

	o.db = db;
	o.coll = coll;
	memset(&r, 0, sizeof(r));
	if ((rc = store_snapshot(s, &o, &r, err)))
		return rc;
	printf("%.12s %s%s%s: %lld documents (%lld written, %lld reused, %lld collections "
	       "unchanged)\n",
	       r.commit, db, coll ? "." : "", coll ? coll : "", (long long)r.docs,
	       (long long)r.blobs_written, (long long)r.blobs_reused, (long long)r.colls_reused);
	return 0;
}

struct db_names {
	char **v;
	size_t n;
};

static int collect_db(void *ctx, const char *name)
{
	struct db_names *d = ctx;

	d->v = realloc(d->v, (d->n + 1) * sizeof(*d->v));
	if (!d->v)
		abort();
	d->v[d->n++] = strdup(name);
	return 0;
}

static int cmd_snapshot(int argc, char **argv)
{
	struct store_snap_opts o = {0};
	const char *pos[2] = {NULL, NULL};
	struct dfs_err err = {0};
	struct db_names dbs = {0};
	struct store *s = NULL;
	int npos = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
			o.message = argv[++i];
		else if (strcmp(argv[i], "--tag") == 0 && i + 1 < argc)
			o.tag = argv[++i];
		else if (strcmp(argv[i], "--repo") == 0 && i + 1 < argc)
			o.repo = argv[++i];
		else if (strcmp(argv[i], "--branch") == 0 && i + 1 < argc)
			o.branch = argv[++i];
		else if (argv[i][0] == '-')
			return fail("snapshot", "unknown option '%s' (see docfs --help)", argv[i]);
		else if (npos < 2)
			pos[npos++] = argv[i];
		else
			return fail("snapshot", "too many arguments");
	}
	if (npos < 1)
		return fail("snapshot", "needs STORE (see docfs --help)");
	if ((rc = store_open(pos[0], false, &s, &err)))
		return fail("snapshot", "%s", err.msg);
	if (pos[1]) {
		char db[DFS_MAX_NS_NAME + 1], coll[DFS_MAX_NS_NAME + 1];

		if (strchr(pos[1], '.')) {
			rc = split_ns(pos[1], db, coll, &err);
			if (!rc)
				rc = snapshot_db(s, db, coll, &o, &err);
		} else {
			rc = snapshot_db(s, pos[1], NULL, &o, &err);
		}
	} else {
		rc = store_db_list(s, collect_db, &dbs, &err);
		if (!rc && dbs.n == 0)
			rc = dfs_err_set(&err, DFS_ENOENT, "store '%s' has no databases", pos[0]);
		for (size_t i = 0; !rc && i < dbs.n; i++) {
			/* The tag goes on the last commit, when every database is in. */
			struct store_snap_opts one = o;

			if (i + 1 < dbs.n)
				one.tag = NULL;
			rc = snapshot_db(s, dbs.v[i], NULL, &one, &err);
		}
	}
	for (size_t i = 0; i < dbs.n; i++)
		free(dbs.v[i]);
	free(dbs.v);
	store_free(s);
	return rc ? fail("snapshot", "%s", err.msg) : 0;
}

static int print_snap(void *ctx, const struct store_snap_info *i)
{
	char when[32];
	time_t t = (time_t)i->time;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("%.12s  %s  %8lld docs  %s%s%s%s\n", i->id, when, (long long)i->docs,
	       i->refs[0] ? "(" : "", i->refs, i->refs[0] ? ") " : "", i->message);
	return 0;
}

static int cmd_snapshots(int argc, char **argv)
{
	const char *store = NULL, *repo = NULL, *branch = NULL;
	struct dfs_err err = {0};
	struct store *s;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--repo") == 0 && i + 1 < argc)
			repo = argv[++i];
		else if (strcmp(argv[i], "--branch") == 0 && i + 1 < argc)
			branch = argv[++i];
		else if (argv[i][0] == '-' || store)
			return fail("snapshots", "bad argument '%s' (see docfs --help)", argv[i]);
		else
			store = argv[i];
	}
	if (!store)
		return fail("snapshots", "needs STORE (see docfs --help)");
	if ((rc = store_open(store, false, &s, &err)))
		return fail("snapshots", "%s", err.msg);
	rc = store_snapshot_list(s, repo, branch, print_snap, NULL, &err);
	store_free(s);
	return rc ? fail("snapshots", "%s", err.msg) : 0;
}

static int cmd_restore(int argc, char **argv)
{
	const char *pos[3] = {NULL, NULL, NULL}, *into = NULL, *repo = NULL;
	char db[DFS_MAX_NS_NAME + 1], coll[DFS_MAX_NS_NAME + 1];
	char idb[DFS_MAX_NS_NAME + 1], icoll[DFS_MAX_NS_NAME + 1];
	struct dfs_err err = {0};
	struct store *s = NULL;
	bool force = false;
	int64_t n = 0;
	int npos = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--into") == 0 && i + 1 < argc)
			into = argv[++i];
		else if (strcmp(argv[i], "--repo") == 0 && i + 1 < argc)
			repo = argv[++i];
		else if (strcmp(argv[i], "--force") == 0)
			force = true;
		else if (argv[i][0] == '-')
			return fail("restore", "unknown option '%s' (see docfs --help)", argv[i]);
		else if (npos < 3)
			pos[npos++] = argv[i];
		else
			return fail("restore", "too many arguments");
	}
	if (npos < 3)
		return fail("restore", "needs STORE, REF and DB.COLL (see docfs --help)");
	rc = split_ns(pos[2], db, coll, &err);
	if (!rc && into)
		rc = split_ns(into, idb, icoll, &err);
	if (!rc)
		rc = store_open(pos[0], false, &s, &err);
	if (!rc)
		rc = store_restore(s, repo, pos[1], db, coll, into ? idb : NULL,
				   into ? icoll : NULL, force, &n, &err);
	store_free(s);
	if (rc)
		return fail("restore", "%s", err.msg);
	printf("restored %lld documents into %s\n", (long long)n, into ? into : pos[2]);
	return 0;
}

/* ---- generate ---------------------------------------------------------------------- */

static int read_all(const char *path, struct dfs_buf *out, struct dfs_err *err)
{
	FILE *f = fopen(path, "rb");
	char chunk[65536];
	size_t n;

	if (!f)
		return dfs_err_set(err, DFS_ENOENT, "cannot open '%s': %s", path, strerror(errno));
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		dfs_buf_append(out, chunk, n);
	fclose(f);
	return 0;
}

static int cmd_generate(int argc, char **argv)
{
	const char *tmpl_arg = NULL;
	long long n = 1;
	uint64_t seed = 1;
	struct dfs_err err = {0};
	struct dfs_buf text, line;
	struct fs_gen *g = NULL;
	bson_t tmpl;
	int rc;

	for (int i = 1; i < argc; i++) {
		char *end;

		if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
			n = strtoll(argv[++i], &end, 10);
			if (*end || n < 0)
				return fail("generate", "-n needs a count, not '%s'", argv[i]);
		} else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			seed = strtoull(argv[++i], &end, 10);
			if (*end)
				return fail("generate", "--seed needs a number, not '%s'", argv[i]);
		} else if (argv[i][0] == '-') {
			return fail("generate", "unknown option '%s' (see docfs --help)", argv[i]);
		} else if (!tmpl_arg) {
			tmpl_arg = argv[i];
		} else {
			return fail("generate", "too many arguments");
		}
	}
	if (!tmpl_arg)
		return fail("generate", "needs a TEMPLATE (see docfs --help)");
	dfs_buf_init(&text);
	dfs_buf_init(&line);
	if (tmpl_arg[0] == '{')
		dfs_buf_puts(&text, tmpl_arg);
	else if ((rc = read_all(tmpl_arg, &text, &err)))
		return fail("generate", "%s", err.msg);
	bson_init(&tmpl);
	rc = store_codec_parse_doc(text.data ? text.data : "", text.len, &tmpl, &err);
	if (!rc)
		rc = fs_gen_new(&tmpl, seed, &g, &err);
	for (long long i = 0; !rc && i < n; i++) {
		bson_t doc;

		bson_init(&doc);
		rc = fs_gen_next(g, &doc, &err);
		if (!rc)
			rc = store_codec_render(&doc, STORE_RENDER_COMPACT, &line, &err);
		dfs_buf_putc(&line, '\n');
		bson_destroy(&doc);
		if (line.len > (1 << 20) || i + 1 == n) {
			if (fwrite(line.data, 1, line.len, stdout) != line.len)
				rc = dfs_err_set(&err, DFS_EIO, "write error: %s", strerror(errno));
			dfs_buf_reset(&line);
		}
	}
	fs_gen_free(g);
	bson_destroy(&tmpl);
	dfs_buf_release(&text);
	dfs_buf_release(&line);
	if (rc)
		return fail("generate", "%s", err.msg);
	return fflush(stdout) == 0 ? 0 : fail("generate", "write error: %s", strerror(errno));
}

/* ---- update, delete, bulk ---------------------------------------------------------- */

/* Appends s to out with the bytes the write path grammar treats specially %-escaped. */
static void path_escape(struct dfs_buf *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '%' || *s == '?' || *s == '&' || *s == '/' || *s == '=')
			dfs_buf_printf(out, "%%%02X", (unsigned char)*s);
		else
			dfs_buf_putc(out, *s);
	}
}

static void path_opt(struct dfs_buf *out, const char *name, const char *value)
{
	dfs_buf_putc(out, strchr(out->data ? out->data : "", '?') ? '&' : '?');
	dfs_buf_puts(out, name);
	dfs_buf_putc(out, '=');
	path_escape(out, value);
}

/* Reads a whole file (or standard input for "-") into out. */
static int slurp(const char *path, struct dfs_buf *out, struct dfs_err *err)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	char chunk[65536];
	size_t n;

	if (!f)
		return dfs_err_set(err, DFS_ENOENT, "cannot open '%s': %s", path, strerror(errno));
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		dfs_buf_append(out, chunk, n);
	if (ferror(f)) {
		if (f != stdin)
			fclose(f);
		return dfs_err_set(err, DFS_EIO, "cannot read '%s'", path);
	}
	if (f != stdin)
		fclose(f);
	return 0;
}

/* update, delete and bulk: the arguments become a write path name (the mount's grammar)
 * and run through the same code as a write to that path. */
static int cmd_write(const char *cmd, int argc, char **argv)
{
	const char *pos[4] = {NULL, NULL, NULL, NULL};
	int npos = 0, want = strcmp(cmd, "update") == 0 ? 4 : strcmp(cmd, "delete") == 0 ? 3 : 2;
	struct dfs_buf name, body, out;
	struct dfs_err err = {0};
	struct store *s = NULL;
	struct store_db *db;
	struct store_coll c;
	int rc;

	dfs_buf_init(&name);
	dfs_buf_init(&body);
	dfs_buf_init(&out);
	dfs_buf_puts(&name, strcmp(cmd, "bulk") == 0 ? ".bulk" : cmd);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool upd = strcmp(cmd, "update") == 0, del = strcmp(cmd, "delete") == 0;

		if (upd && (strcmp(a, "--multi") == 0 || strcmp(a, "--upsert") == 0)) {
			continue; /* added after the filter below */
		} else if ((upd || del) && i + 1 < argc &&
			   (strcmp(a, "--return") == 0 || strcmp(a, "--sort") == 0 ||
			    strcmp(a, "--projection") == 0 ||
			    (upd && strcmp(a, "--array-filters") == 0))) {
			i++;
		} else if (del && strcmp(a, "--one") == 0) {
			continue;
		} else if (!upd && !del &&
			   (strcmp(a, "--unordered") == 0 || strcmp(a, "--atomic") == 0)) {
			continue;
		} else if (a[0] == '-' && a[1]) {
			rc = fail(cmd, "unknown option '%s' (see docfs --help)", a);
			goto done;
		} else if (npos < want + (strcmp(cmd, "bulk") == 0)) {
			pos[npos++] = a; /* bulk's FILE is optional, after STORE and DB.COLL */
		} else {
			rc = fail(cmd, "too many arguments");
			goto done;
		}
	}
	if (npos < want) {
		rc = fail(cmd, "needs %s (see docfs --help)",
			  want == 4   ? "STORE, DB.COLL, FILTER and UPDATE"
			  : want == 3 ? "STORE, DB.COLL and FILTER"
				      : "STORE and DB.COLL");
		goto done;
	}
	if (want > 2) {
		dfs_buf_putc(&name, '/');
		path_escape(&name, pos[2]);
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--multi") == 0 || strcmp(a, "--upsert") == 0 ||
		    strcmp(a, "--one") == 0 || strcmp(a, "--unordered") == 0 ||
		    strcmp(a, "--atomic") == 0) {
			path_opt(&name,
				 strcmp(a, "--one") == 0	 ? "justOne"
				 : strcmp(a, "--unordered") == 0 ? "ordered"
								 : a + 2,
				 strcmp(a, "--unordered") == 0 ? "false" : "true");
		} else if (i + 1 < argc && strcmp(a, "--return") == 0) {
			path_opt(&name, "returnDocument", argv[++i]);
		} else if (i + 1 < argc && strcmp(a, "--array-filters") == 0) {
			path_opt(&name, "arrayFilters", argv[++i]);
		} else if (i + 1 < argc &&
			   (strcmp(a, "--sort") == 0 || strcmp(a, "--projection") == 0)) {
			path_opt(&name, a + 2, argv[i + 1]);
			i++;
		}
	}
	if (want == 4)
		dfs_buf_puts(&body, pos[3]);
	else if (want == 3)
		dfs_buf_puts(&body, "{}");
	else if ((rc = slurp(npos > 2 ? pos[2] : "-", &body, &err)))
		goto failed;
	if ((rc = open_coll(pos[0], pos[1], want != 3, &s, &db, &c, &err)))
		goto failed;
	rc = fs_write_run(db, c.id, name.data, body.data ? body.data : "", body.len, &out, &err);
	if (out.len)
		fwrite(out.data, 1, out.len, stdout);
	if (rc)
		goto failed;
	rc = fflush(stdout) == 0 ? 0 : fail(cmd, "write error: %s", strerror(errno));
	goto done;
failed:
	rc = fail(cmd, "%s", err.msg);
done:
	store_free(s);
	dfs_buf_release(&name);
	dfs_buf_release(&body);
	dfs_buf_release(&out);
	return rc;
}

static int cmd_aggregate(int argc, char **argv)
{
	const char *pos[3] = {NULL, NULL, NULL}, *format = NULL;
	struct dfs_err err = {0};
	struct store *s = NULL;
	struct store_db *db;
	struct store_coll c;
	struct fs_result r;
	struct dfs_buf name;
	int npos = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
			format = argv[++i];
		else if (argv[i][0] == '-' && argv[i][1])
			return fail("aggregate", "unknown option '%s' (see docfs --help)", argv[i]);
		else if (npos < 3)
			pos[npos++] = argv[i];
		else
			return fail("aggregate", "too many arguments");
	}
	if (npos < 3)
		return fail("aggregate", "needs STORE, DB.COLL and PIPELINE (see docfs --help)");
	dfs_buf_init(&name);
	path_escape(&name, pos[2]);
	if (format)
		path_opt(&name, "format", format);
	fs_result_init(&r);
	rc = open_coll(pos[0], pos[1], false, &s, &db, &c, &err);
	if (!rc)
		rc = fs_agg_run(db, c.id, name.data, &r, &err);
	if (!rc) {
		char buf[65536];
		size_t got;

		for (off_t off = 0; (size_t)off < r.size; off += (off_t)got) {
			if (fs_result_read(&r, buf, sizeof(buf), off, &got) || !got)
				break;
			fwrite(buf, 1, got, stdout);
		}
	}
	fs_result_release(&r);
	store_free(s);
	dfs_buf_release(&name);
	if (rc)
		return fail("aggregate", "%s", err.msg);
	return fflush(stdout) == 0 ? 0 : fail("aggregate", "write error: %s", strerror(errno));
}

/* docfs router CONFIG_STORE MOUNTPOINT [-f] [-d] [-o log=FILE,<fuse options>] */
static int cmd_router(int argc, char **argv)
{
	struct router_mount_opts o = {0};
	struct dfs_err err = {0};
	struct dfs_buf fuse_opts;
	const char *pos[2];
	char *copy = NULL, *log = NULL, *zk = NULL, *cluster = NULL;
	int npos = 0, rc = 0;

	dfs_buf_init(&fuse_opts);
	for (int i = 1; !rc && i < argc; i++) {
		if (!strcmp(argv[i], "-f")) {
			o.foreground = true;
		} else if (!strcmp(argv[i], "-d")) {
			o.debug = o.foreground = true;
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			char *save = NULL;

			free(copy);
			copy = strdup(argv[++i]);
			for (char *tok = strtok_r(copy, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save)) {
				if (!strncmp(tok, "log=", 4)) {
					free(log);
					log = strdup(tok + 4);
				} else if (!strncmp(tok, "chunk_mb=", 9)) {
					char *end;
					long v = strtol(tok + 9, &end, 10);

					if (!tok[9] || *end || v <= 0 || v > 1024)
						rc = fail("router", "chunk_mb needs a number of MB "
								    "(1-1024)");
					o.chunk_mb = v;
				} else if (!strcmp(tok, "listen") || !strncmp(tok, "listen=", 7)) {
					if (o.nlisten == ROUTER_MAX_LISTEN)
						rc = fail("router", "at most %d listen= options",
							  ROUTER_MAX_LISTEN);
					else
						o.listen[o.nlisten++] =
							strdup(tok[6] ? tok + 7 : "");
				} else if (!strcmp(tok, "noauth")) {
					o.noauth = true;
				} else if (!strncmp(tok, "zk=", 3)) {
					free(zk);
					zk = strdup(tok + 3);
				} else if (!strncmp(tok, "cluster=", 8)) {
					free(cluster);
					cluster = strdup(tok + 8);
				} else if (!strncmp(tok, "balancer_ms=", 12)) {
					char *end;
					long v = strtol(tok + 12, &end, 10);

					if (!tok[12] || *end || v <= 0 || v > 86400000)
						rc = fail("router",
							  "balancer_ms needs a positive number "
							  "of milliseconds");
					o.balancer_ms = (int)v;
				} else {
					if (fuse_opts.len)
						dfs_buf_putc(&fuse_opts, ',');
					dfs_buf_puts(&fuse_opts, tok);
				}
			}
		} else if (argv[i][0] == '-' || npos == 2) {
			rc = fail("router", "unexpected '%s' (see docfs --help)", argv[i]);
		} else {
			pos[npos++] = argv[i];
		}
	}
	if (!rc && npos != 2)
		rc = fail("router", "needs CONFIG_STORE and MOUNTPOINT (see docfs --help)");
	if (!rc && (zk && !zk[0]))
		rc = fail("router", "zk= needs HOST:PORT[;HOST:PORT...]");
	if (!rc && !zk != !cluster)
		rc = fail("router", "zk= and cluster=NAME go together");
	if (!rc) {
		o.zk = zk;
		o.cluster = cluster;
		o.config = pos[0];
		o.mountpoint = pos[1];
		o.log = log;
		o.fuse_opts = fuse_opts.data;
		if (router_mount_run(&o, &err))
			rc = fail("router", "%s", err.msg);
	}
	free(copy);
	free(log);
	free(zk);
	free(cluster);
	for (int i = 0; i < o.nlisten; i++)
		free((char *)o.listen[i]);
	dfs_buf_release(&fuse_opts);
	return rc;
}

/* Whether the first field of d is named key. */
static bool first_key_is(const bson_t *d, const char *key)
{
	bson_iter_t it;

	return bson_iter_init(&it, d) && bson_iter_next(&it) && !strcmp(bson_iter_key(&it), key);
}

/* docfs cluster CONFIG_STORE COMMAND|status: one write transaction, committed only when
 * the command succeeded. */
static int cmd_cluster(int argc, char **argv)
{
	struct dfs_err err = {0};
	struct router_cfg c;
	struct dfs_buf out;
	bson_t cmd = BSON_INITIALIZER, reply = BSON_INITIALIZER;
	int rc;

	if (argc != 3)
		return fail("cluster", "usage: docfs cluster CONFIG_STORE COMMAND|status");
	if (strcmp(argv[2], "status") != 0 &&
	    store_codec_parse_doc(argv[2], strlen(argv[2]), &cmd, &err))
		return fail("cluster", "command: %s", err.msg);
	if (router_cfg_zk_cache(argv[1], &err)) {
		bson_destroy(&cmd);
		return fail("cluster", "%s", err.msg);
	}
	dfs_buf_init(&out);
	if (strcmp(argv[2], "status") != 0 && first_key_is(&cmd, "moveChunk")) {
		/* the documents move too, unless a router serves this config */
		rc = router_cli_move_chunk(argv[1], &cmd, &reply, &err);
		store_codec_render(&reply, STORE_RENDER_PRETTY, &out, NULL);
	} else if ((rc = router_cfg_open(argv[1], &c, &err))) {
		bson_destroy(&cmd);
		dfs_buf_release(&out);
		return fail("cluster", "%s", err.msg);
	} else {
		if (strcmp(argv[2], "status") == 0) {
			rc = router_cluster_status(&c, &out, &err);
		} else {
			rc = router_cluster_command(&c, &cmd, &reply, &err);
			if (rc == 0)
				rc = router_cfg_commit(&c, &err);
			if (!bson_empty(&reply))
				store_codec_render(&reply, STORE_RENDER_PRETTY, &out, NULL);
		}
		router_cfg_close(&c);
	}
	if (out.len)
		fputs(out.data, stdout);
	dfs_buf_release(&out);
	bson_destroy(&cmd);
	bson_destroy(&reply);
	if (rc)
		return fail("cluster", "%s", err.msg);
	return fflush(stdout) == 0 ? 0 : fail("cluster", "write error: %s", strerror(errno));
}

/* ---- user ---------------------------------------------------------------------------- */

/* A password: one line of standard input, or typed at a prompt on a terminal (no echo). */
static int read_password(const char *name, char *out, size_t cap)
{
	bool tty = isatty(0);
	struct termios old, quiet;
	size_t n;

	if (tty) {
		fprintf(stderr, "password for %s: ", name);
		if (tcgetattr(0, &old) == 0) {
			quiet = old;
			quiet.c_lflag &= ~(tcflag_t)ECHO;
			tcsetattr(0, TCSAFLUSH, &quiet);
		}
	}
	if (!fgets(out, (int)cap, stdin))
		out[0] = '\0';
	if (tty) {
		tcsetattr(0, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	n = strlen(out);
	if (n == cap - 1 && out[n - 1] != '\n')
		return -1;
	while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
		out[--n] = '\0';
	return 0;
}

static int user_print(void *ctx, const bson_t *doc)
{
	bson_iter_t it, r, f;
	const char *user = "", *db = "";

	(void)ctx;
	if (bson_iter_init_find(&it, doc, "user") && BSON_ITER_HOLDS_UTF8(&it))
		user = bson_iter_utf8(&it, NULL);
	if (bson_iter_init_find(&it, doc, "db") && BSON_ITER_HOLDS_UTF8(&it))
		db = bson_iter_utf8(&it, NULL);
	printf("%s@%s", user, db);
	if (bson_iter_init_find(&it, doc, "roles") && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &r)) {
		const char *sep = " ";

		while (bson_iter_next(&r)) {
			const char *role = "?", *rdb = "?";

			if (bson_iter_recurse(&r, &f)) {
				while (bson_iter_next(&f)) {
					if (!strcmp(bson_iter_key(&f), "role"))
						role = bson_iter_utf8(&f, NULL);
					else if (!strcmp(bson_iter_key(&f), "db"))
						rdb = bson_iter_utf8(&f, NULL);
				}
			}
			printf("%s%s@%s", sep, role ? role : "?", rdb ? rdb : "?");
			sep = ",";
		}
	}
	if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "customData.uid", &f))
		printf(" uid=%lld", (long long)bson_iter_as_int64(&f));
	putchar('\n');
	return 0;
}

/* docfs user STORE add|drop|list ... */
static int cmd_user(int argc, char **argv)
{
	const char *store_dir = NULL, *verb = NULL, *name = NULL, *db = "admin", *roles = NULL;
	long uid = -1, gid = -1;
	struct dfs_err err = {0};
	struct store *s = NULL;
	char pwd[1024];
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--db") && i + 1 < argc) {
			db = argv[++i];
		} else if (!strcmp(argv[i], "--roles") && i + 1 < argc) {
			roles = argv[++i];
		} else if ((!strcmp(argv[i], "--uid") || !strcmp(argv[i], "--gid")) &&
			   i + 1 < argc) {
			char *end;
			long v = strtol(argv[i + 1], &end, 10);

			if (*end || v < 0 || v > 0x7fffffffL)
				return fail("user", "%s needs a number", argv[i]);
			*(argv[i][2] == 'u' ? &uid : &gid) = v;
			i++;
		} else if (argv[i][0] == '-') {
			return fail("user", "unknown option '%s' (see docfs --help)", argv[i]);
		} else if (!store_dir) {
			store_dir = argv[i];
		} else if (!verb) {
			verb = argv[i];
		} else if (!name) {
			name = argv[i];
		} else {
			return fail("user", "too many arguments (see docfs --help)");
		}
	}
	if (!store_dir || !verb)
		return fail("user", "needs STORE and add, drop or list (see docfs --help)");
	if (strcmp(verb, "list") && !name)
		return fail("user", "%s needs a user NAME", verb);
	if (strcmp(verb, "add") && strcmp(verb, "drop") && strcmp(verb, "list"))
		return fail("user", "unknown verb '%s': add, drop or list", verb);
	if (gid >= 0 && uid < 0)
		return fail("user", "--gid needs --uid");
	if (!strcmp(verb, "add")) {
		if (read_password(name, pwd, sizeof(pwd)))
			return fail("user", "the password is too long");
		if (wire_scram_password_check(pwd, &err))
			return fail("user", "%s", err.msg);
	}
	if (store_open(store_dir, false, &s, &err))
		return fail("user", "%s", err.msg);
	if (!strcmp(verb, "list")) {
		rc = wire_user_each(s, user_print, NULL, &err);
	} else if (!strcmp(verb, "drop")) {
		rc = wire_user_drop(s, db, name, &err);
	} else {
		bson_t r = BSON_INITIALIZER, custom = BSON_INITIALIZER;
		char list[1024], key[16];
		int n = 0;

		snprintf(list, sizeof(list), "%s", roles ? roles : "root@admin");
		for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			char *at = strchr(tok, '@');
			bson_t one;

			if (at)
				*at = '\0';
			snprintf(key, sizeof(key), "%d", n++);
			BSON_APPEND_DOCUMENT_BEGIN(&r, key, &one);
			BSON_APPEND_UTF8(&one, "role", tok);
			BSON_APPEND_UTF8(&one, "db", at ? at + 1 : db);
			bson_append_document_end(&r, &one);
		}
		if (uid >= 0) {
			BSON_APPEND_INT64(&custom, "uid", uid);
			BSON_APPEND_INT64(&custom, "gid", gid >= 0 ? gid : uid);
		}
		rc = wire_user_create(s, db, name, pwd, &r, uid >= 0 ? &custom : NULL, &err);
		bson_destroy(&r);
		bson_destroy(&custom);
	}
	memset(pwd, 0, sizeof(pwd));
	store_free(s);
	if (rc)
		return fail("user", "%s", err.msg);
	return fflush(stdout) == 0 ? 0 : fail("user", "write error: %s", strerror(errno));
}

/* ---- serve ------------------------------------------------------------------------- */

/* docfs serve STORE [--listen ADDR]... [--noauth] [--log FILE] [--cursor-timeout-s N] */
static int cmd_serve(int argc, char **argv)
{
	const char *addrs[FS_MAX_LISTEN], *store_dir = NULL, *log = "-", *cert = NULL, *key = NULL;
	const char *replset = NULL, *zk = NULL;
	struct rs_node *node = NULL;
	struct dfs_err err = {0};
	struct wire_server *w = NULL;
	struct store *s = NULL;
	sigset_t sigs;
	bool noauth = false;
	int n = 0, sig = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
			if (n == FS_MAX_LISTEN)
				return fail("serve", "at most %d --listen", FS_MAX_LISTEN);
			addrs[n++] = argv[++i];
		} else if (!strncmp(argv[i], "--listen=", 9)) {
			if (n == FS_MAX_LISTEN)
				return fail("serve", "at most %d --listen", FS_MAX_LISTEN);
			addrs[n++] = argv[i] + 9;
		} else if (!strcmp(argv[i], "--noauth")) {
			noauth = true;
		} else if (!strcmp(argv[i], "--tls-cert") && i + 1 < argc) {
			cert = argv[++i];
		} else if (!strcmp(argv[i], "--tls-key") && i + 1 < argc) {
			key = argv[++i];
		} else if (!strcmp(argv[i], "--replset") && i + 1 < argc) {
			replset = argv[++i];
		} else if (!strcmp(argv[i], "--zk") && i + 1 < argc) {
			zk = argv[++i];
		} else if (!strcmp(argv[i], "--log") && i + 1 < argc) {
			log = argv[++i];
		} else if (!strcmp(argv[i], "--cursor-timeout-s") && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);

			if (*end || v <= 0)
				return fail("serve", "--cursor-timeout-s needs a positive number");
			wire_cursor_timeout_s = (int)v;
		} else if (argv[i][0] == '-') {
			return fail("serve", "unknown option '%s' (see docfs --help)", argv[i]);
		} else if (!store_dir) {
			store_dir = argv[i];
		} else {
			return fail("serve", "too many arguments (see docfs --help)");
		}
	}
	if (!store_dir)
		return fail("serve", "needs STORE (see docfs --help)");
	if ((replset || zk) && (!replset || !replset[0] || !zk || !zk[0] || !n))
		return fail("serve",
			    "a replica set member needs --replset NAME, --zk HOST:PORT and "
			    "a --listen ADDR (its name in rs.conf())");
	if (n == 0)
		addrs[n++] = "";
	if (fs_errlog_open(log, &err))
		return fail("serve", "%s", err.msg);
	/* the signals that end the server are taken by sigwait below, in this thread only */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (store_open(store_dir, false, &s, &err) ||
	    wire_server_bind(s, addrs, n, noauth, &w, &err) ||
	    ((cert || key) && wire_server_tls(w, cert, key, &err))) {
		wire_server_stop(w);
		store_free(s);
		return fail("serve", "%s", err.msg);
	}
	fs_curop_start();
	fs_store = s; /* the profiler writes <db>.system.profile of the served store */
	if (replset && rs_node_start(s, replset, zk, wire_server_addr(w, 0), &node, &err)) {
		wire_server_stop(w);
		fs_store = NULL;
		store_free(s);
		return fail("serve", "%s", err.msg);
	}
	if (wire_server_start(w, &err)) {
		wire_server_stop(w);
		rs_node_stop(node);
		fs_store = NULL;
		store_free(s);
		return fail("serve", "%s", err.msg);
	}
	for (int i = 0; i < n; i++)
		printf("docfs serve: listening on %s\n", wire_server_addr(w, i));
	fflush(stdout);
	sigwait(&sigs, &sig);
	fs_log_info("serve: signal %d: stopping", sig);
	wire_server_stop(w);
	rs_node_stop(node);
	fs_store = NULL;
	store_free(s);
	fs_errlog_open(NULL, NULL);
	return 0;
}

/* A "warn" validator's message (store/validator.c): the log and /.docfs/errors. */
static void validation_warn(const char *msg)
{
	fs_errlog_add("%s", msg);
}

int fs_main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	store_validation_warn_hook_set(validation_warn);

	if (!cmd || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
	    strcmp(cmd, "help") == 0) {
		fputs(usage_text, cmd ? stdout : stderr);
		return cmd ? 0 : 1;
	}
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		puts("docfs 0.1.0");
		return 0;
	}
	if (strcmp(cmd, "mount") == 0)
		return cmd_mount(argc - 1, argv + 1);
	if (strcmp(cmd, "serve") == 0)
		return cmd_serve(argc - 1, argv + 1);
	/* The daemons above keep the mount's 10 s wait for another process's write lock; a
	 * command-line writer is a batch job and waits longer (store.h). */
	store_set_lock_wait_ms(STORE_LOCK_WAIT_BATCH_MS);
	if (strcmp(cmd, "user") == 0)
		return cmd_user(argc - 1, argv + 1);
	if (strcmp(cmd, "import") == 0)
		return cmd_import(argc - 1, argv + 1);
	if (strcmp(cmd, "export") == 0)
		return cmd_export(argc - 1, argv + 1);
	if (strcmp(cmd, "capped") == 0)
		return cmd_capped(argc - 1, argv + 1);
	if (strcmp(cmd, "watch") == 0)
		return cmd_watch(argc - 1, argv + 1);
	if (strcmp(cmd, "changes-keep") == 0)
		return cmd_changes_keep(argc - 1, argv + 1);
	if (strcmp(cmd, "check") == 0)
		return cmd_check(argc - 1, argv + 1);
	if (strcmp(cmd, "dbhash") == 0)
		return cmd_dbhash(argc - 1, argv + 1);
	if (strcmp(cmd, "generate") == 0)
		return cmd_generate(argc - 1, argv + 1);
	if (strcmp(cmd, "snapshot") == 0)
		return cmd_snapshot(argc - 1, argv + 1);
	if (strcmp(cmd, "snapshots") == 0)
		return cmd_snapshots(argc - 1, argv + 1);
	if (strcmp(cmd, "restore") == 0)
		return cmd_restore(argc - 1, argv + 1);
	if (strcmp(cmd, "aggregate") == 0)
		return cmd_aggregate(argc - 1, argv + 1);
	if (strcmp(cmd, "update") == 0 || strcmp(cmd, "delete") == 0 || strcmp(cmd, "bulk") == 0)
		return cmd_write(cmd, argc - 1, argv + 1);
	if (strcmp(cmd, "index") == 0)
		return cmd_index(argc - 1, argv + 1);
	if (strcmp(cmd, "explain") == 0)
		return cmd_explain(argc - 1, argv + 1);
	if (strcmp(cmd, "cluster") == 0)
		return cmd_cluster(argc - 1, argv + 1);
	if (strcmp(cmd, "router") == 0)
		return cmd_router(argc - 1, argv + 1);
	if (strcmp(cmd, "rs") == 0)
		return rs_cli(argc - 1, argv + 1);
	if (strcmp(cmd, "stat") == 0)
		return fs_stat_main(argc - 1, argv + 1);
	if (strcmp(cmd, "top") == 0)
		return fs_top_main(argc - 1, argv + 1);
	return fail(cmd, "unknown command (see docfs --help)");
}
