/*
 * mongoc_auth.c - libmongoc 1.23 (Debian's libmongoc-dev) authenticating to a docfs server
 * that auth_test.py has started and filled: with SCRAM-SHA-256 credentials it counts the
 * documents of test.c (argv[4] of them); with a wrong password every command fails with
 * "Authentication failed"; as a read-only user an insert fails with 13. Usage:
 *   mongoc_auth GOOD_URI BAD_PASSWORD_URI READ_ONLY_URI COUNT
 */
#include <mongoc/mongoc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "mongoc_auth: %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* Counts test.c through uri: the count, or -1 with err. */
static int64_t count(const char *uri, bson_error_t *err)
{
	mongoc_client_t *cl = mongoc_client_new(uri);
	mongoc_collection_t *co;
	bson_t filter = BSON_INITIALIZER;
	int64_t n;

	CHECK(cl != NULL, "bad URI '%s'", uri);
	co = mongoc_client_get_collection(cl, "test", "c");
	n = mongoc_collection_count_documents(co, &filter, NULL, NULL, NULL, err);
	mongoc_collection_destroy(co);
	mongoc_client_destroy(cl);
	return n;
}

int main(int argc, char **argv)
{
	bson_error_t err;
	mongoc_client_t *cl;
	mongoc_collection_t *co;
	bson_t *doc;
	int64_t n;

	CHECK(argc == 5, "usage: mongoc_auth GOOD_URI BAD_URI READ_URI COUNT");
	mongoc_init();
	n = count(argv[1], &err);
	CHECK(n == atoll(argv[4]), "count %lld: %s", (long long)n, err.message);
	n = count(argv[2], &err);
	CHECK(n == -1 && strstr(err.message, "Authentication failed"), "a wrong password: %lld, %s",
	      (long long)n, err.message);
	n = count(argv[3], &err);
	CHECK(n == atoll(argv[4]), "the reader's count %lld: %s", (long long)n, err.message);
	cl = mongoc_client_new(argv[3]);
	co = mongoc_client_get_collection(cl, "test", "c");
	doc = BCON_NEW("_id", BCON_UTF8("mongoc"));
	CHECK(!mongoc_collection_insert_one(co, doc, NULL, NULL, &err),
	      "a read-only user inserted");
	CHECK(err.code == 13 && strstr(err.message, "not authorized on test"), "%u %s", err.code,
	      err.message);
	bson_destroy(doc);
	mongoc_collection_destroy(co);
	mongoc_client_destroy(cl);
	mongoc_cleanup();
	printf("mongoc_auth: %d checks passed\n", checks);
	return 0;
}
