/*
 * mongoc_test.c - libmongoc 1.23 (Debian's libmongoc-dev) against `docfs serve` over a Unix
 * socket: the handshake (libmongoc monitors over OP_QUERY), insert_many, a find whose
 * cursor needs getMore, update_many, an upsert, delete_one, count_documents, an index and
 * its IXSCAN in explain, and errors (a duplicate _id: 11000 with MongoDB's message, an
 * unknown command: 59, a bad operator: 2). The server is started here (DOCFS: the binary)
 * over a temporary store, and `docfs check` must find the store sound at the end.
 */
#include <mongoc/mongoc.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int checks;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "mongoc_test: %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static pid_t server = -1;

static void stop_server(void)
{
	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
		server = -1;
	}
}

/* Starts `docfs serve store --listen sock` and waits for its "listening" line. */
static void start_server(const char *docfs, const char *store, const char *sock)
{
	int fds[2];
	char line[512];
	FILE *f;

	CHECK(pipe(fds) == 0, "pipe");
	server = fork();
	CHECK(server >= 0, "fork");
	if (server == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl(docfs, docfs, "serve", store, "--listen", sock, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	CHECK(f && fgets(line, sizeof(line), f) && strstr(line, "listening on"),
	      "docfs serve did not start");
	fclose(f);
}

static int64_t count(mongoc_collection_t *c, const char *filter_json)
{
	bson_error_t e;
	bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &e);
	int64_t n = mongoc_collection_count_documents(c, filter, NULL, NULL, NULL, &e);

	CHECK(n >= 0, "count_documents %s: %s", filter_json, e.message);
	bson_destroy(filter);
	return n;
}

int main(void)
{
	const char *docfs = getenv("DOCFS") ? getenv("DOCFS") : "build/docfs";
	char dir[] = "/tmp/docfs-mongoc-XXXXXX", store[256], sock[256], uri[512], cmd[600];
	mongoc_client_t *cl;
	mongoc_collection_t *c;
	mongoc_cursor_t *cur;
	bson_error_t e;
	bson_t reply, *docs[300];
	const bson_t *d;
	int64_t n = 0, last = -1;
	bool sorted = true;

	CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	CHECK(mkdir(store, 0755) == 0, "mkdir");
	start_server(docfs, store, sock);
	atexit(stop_server);
	mongoc_init();
	{
		char esc[300], *o = esc;

		for (const char *p = sock; *p; p++)
			o += *p == '/' ? sprintf(o, "%%2F") : sprintf(o, "%c", *p);
		snprintf(uri, sizeof(uri), "mongodb://%s/?serverSelectionTimeoutMS=5000", esc);
	}
	cl = mongoc_client_new(uri);
	CHECK(cl, "client for %s", uri);
	{
		bson_t *ping = BCON_NEW("ping", BCON_INT32(1));

		CHECK(mongoc_client_command_simple(cl, "admin", ping, NULL, &reply, &e), "ping: %s",
		      e.message);
		bson_destroy(&reply);
		bson_destroy(ping);
	}
	c = mongoc_client_get_collection(cl, "lib", "c");

	/* insert_many */
	for (int i = 0; i < 300; i++)
		docs[i] = BCON_NEW("_id", BCON_INT32(i), "x", BCON_INT32(i % 5), "s",
				   BCON_UTF8("text"));
	CHECK(mongoc_collection_insert_many(c, (const bson_t **)docs, 300, NULL, &reply, &e),
	      "insert_many: %s", e.message);
	{
		bson_iter_t it;

		CHECK(bson_iter_init_find(&it, &reply, "insertedCount") &&
			      bson_iter_as_int64(&it) == 300,
		      "insertedCount");
	}
	bson_destroy(&reply);
	for (int i = 0; i < 300; i++)
		bson_destroy(docs[i]);
	CHECK(count(c, "{}") == 300, "300 documents");

	/* find with a cursor: batchSize 7 needs many getMores */
	{
		bson_t *filter = BCON_NEW("x", "{", "$gte", BCON_INT32(2), "}");
		bson_t *opts = BCON_NEW("batchSize", BCON_INT32(7), "sort", "{", "_id",
					BCON_INT32(1), "}");

		cur = mongoc_collection_find_with_opts(c, filter, opts, NULL);
		while (mongoc_cursor_next(cur, &d)) {
			bson_iter_t it;
			int64_t id;

			CHECK(bson_iter_init_find(&it, d, "_id"), "_id");
			id = bson_iter_as_int64(&it);
			CHECK(id % 5 >= 2, "the filter holds for %lld", (long long)id);
			sorted &= id > last;
			last = id;
			n++;
		}
		CHECK(!mongoc_cursor_error(cur, &e), "cursor: %s", e.message);
		CHECK(n == 180 && sorted, "180 sorted documents, got %lld", (long long)n);
		mongoc_cursor_destroy(cur);
		bson_destroy(filter);
		bson_destroy(opts);
	}

	/* update_many, an upsert, delete_one */
	{
		bson_t *sel = BCON_NEW("x", BCON_INT32(0));
		bson_t *upd = BCON_NEW("$set", "{", "flag", BCON_BOOL(true), "}");
		bson_iter_t it;

		CHECK(mongoc_collection_update_many(c, sel, upd, NULL, &reply, &e),
		      "update_many: %s", e.message);
		CHECK(bson_iter_init_find(&it, &reply, "modifiedCount") &&
			      bson_iter_as_int64(&it) == 60,
		      "modifiedCount 60");
		bson_destroy(&reply);
		bson_destroy(sel);
		bson_destroy(upd);
		CHECK(count(c, "{\"flag\": true}") == 60, "60 flagged");
	}
	{
		bson_t *sel = BCON_NEW("_id", BCON_INT32(5000));
		bson_t *upd = BCON_NEW("$set", "{", "y", BCON_INT32(1), "}");
		bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
		bson_iter_t it;

		CHECK(mongoc_collection_update_one(c, sel, upd, opts, &reply, &e), "upsert: %s",
		      e.message);
		CHECK(bson_iter_init_find(&it, &reply, "upsertedId") &&
			      bson_iter_as_int64(&it) == 5000,
		      "upsertedId");
		bson_destroy(&reply);
		bson_destroy(sel);
		bson_destroy(upd);
		bson_destroy(opts);
	}
	{
		bson_t *sel = BCON_NEW("x", BCON_INT32(4));
		bson_iter_t it;

		CHECK(mongoc_collection_delete_one(c, sel, NULL, &reply, &e), "delete_one: %s",
		      e.message);
		CHECK(bson_iter_init_find(&it, &reply, "deletedCount") &&
			      bson_iter_as_int64(&it) == 1,
		      "deletedCount 1");
		bson_destroy(&reply);
		bson_destroy(sel);
	}
	CHECK(count(c, "{}") == 300, "300 - 1 + 1 documents");

	/* an index, and the plan that uses it */
	{
		bson_t *ci =
			BCON_NEW("createIndexes", BCON_UTF8("c"), "indexes", "[", "{", "key", "{",
				 "x", BCON_INT32(1), "}", "name", BCON_UTF8("x_1"), "}", "]");
		bson_t *ex =
			BCON_NEW("explain", "{", "find", BCON_UTF8("c"), "filter", "{", "x",
				 BCON_INT32(3), "}", "}", "verbosity", BCON_UTF8("queryPlanner"));
		bson_iter_t it;

		CHECK(mongoc_client_command_simple(cl, "lib", ci, NULL, &reply, &e),
		      "createIndexes: %s", e.message);
		bson_destroy(&reply);
		CHECK(mongoc_client_command_simple(cl, "lib", ex, NULL, &reply, &e), "explain: %s",
		      e.message);
		CHECK(bson_iter_init(&it, &reply) &&
			      bson_iter_find_descendant(
				      &it, "queryPlanner.winningPlan.inputStage.stage", &it) &&
			      !strcmp(bson_iter_utf8(&it, NULL), "IXSCAN"),
		      "IXSCAN");
		bson_destroy(&reply);
		bson_destroy(ci);
		bson_destroy(ex);
	}

	/* errors */
	{
		bson_t *dup = BCON_NEW("_id", BCON_INT32(7));

		CHECK(!mongoc_collection_insert_one(c, dup, NULL, NULL, &e), "duplicate accepted");
		CHECK(e.code == 11000, "code %u", e.code);
		CHECK(strstr(e.message, "E11000 duplicate key error collection: lib.c index: _id_ "
					"dup key: { _id: 7 }"),
		      "message %s", e.message);
		bson_destroy(dup);
	}
	{
		bson_t *bad = BCON_NEW("noSuchCommand", BCON_INT32(1));

		CHECK(!mongoc_client_command_simple(cl, "lib", bad, NULL, NULL, &e) && e.code == 59,
		      "CommandNotFound: %u %s", e.code, e.message);
		bson_destroy(bad);
	}
	{
		bson_t *filter = BCON_NEW("x", "{", "$bogus", BCON_INT32(1), "}");

		cur = mongoc_collection_find_with_opts(c, filter, NULL, NULL);
		CHECK(!mongoc_cursor_next(cur, &d) && mongoc_cursor_error(cur, &e) && e.code == 2,
		      "BadValue: %u %s", e.code, e.message);
		mongoc_cursor_destroy(cur);
		bson_destroy(filter);
	}

	mongoc_collection_destroy(c);
	mongoc_client_destroy(cl);
	mongoc_cleanup();
	stop_server();
	snprintf(cmd, sizeof(cmd), "%s check %s >/dev/null && rm -rf %s", docfs, store, dir);
	CHECK(system(cmd) == 0, "docfs check of %s", store);
	printf("mongoc_test: %d checks passed\n", checks);
	return 0;
}
