/*
 * test_qpath.c - unit tests of the query path grammar (fs/paths/qpath.c) for the options that came
 * with indexes and explain (hint by name and by key pattern, verbosity, format=tree, "hint"
 * in saved queries), of index file names (fs/paths/ixfile.c), and of what query/ and explain/
 * refuse of each other's options, run over an in-memory collection in a temporary store.
 */
#include "fs_int.h"
#include "query.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Parses component into q (initialised here); returns the code, err filled. */
static int parse(const char *component, struct fs_query *q, struct dfs_err *err)
{
	fs_query_init(q);
	dfs_err_clear(err);
	return fs_query_parse(component, q, err);
}

/* The compact rendering of doc, for comparisons. Owned by the caller (free). */
static char *compact(const bson_t *doc)
{
	struct dfs_buf b;

	dfs_buf_init(&b);
	ck_assert_int_eq(store_codec_render(doc, STORE_RENDER_COMPACT, &b, NULL), 0);
	return b.data;
}

START_TEST(test_fs_query_parse_hint_name)
{
	struct dfs_err err = {0};
	struct fs_query q;

	ck_assert_int_eq(parse("{a: 1}?hint=price_1", &q, &err), 0);
	ck_assert_str_eq(q.hint_name, "price_1");
	ck_assert(!q.has_hint);
	fs_query_release(&q);
}
END_TEST

START_TEST(test_fs_query_parse_hint_pattern)
{
	struct dfs_err err = {0};
	struct fs_query q;
	char *s;

	ck_assert_int_eq(parse("{}?hint={price: -1, 'a.b': 1}", &q, &err), 0);
	ck_assert(q.has_hint);
	ck_assert_ptr_null(q.hint_name);
	s = compact(&q.hint);
	ck_assert_str_eq(s, "{\"price\": -1, \"a.b\": 1}");
	free(s);
	fs_query_release(&q);
	/* %XX escapes, and a later hint replaces an earlier one of the other kind. */
	ck_assert_int_eq(parse("{}?hint=x_1&hint=%7B$natural: -1%7D", &q, &err), 0);
	ck_assert(q.has_hint);
	ck_assert_ptr_null(q.hint_name);
	s = compact(&q.hint);
	ck_assert_str_eq(s, "{\"$natural\": -1}");
	free(s);
	fs_query_release(&q);
}
END_TEST

START_TEST(test_fs_query_parse_hint_errors)
{
	struct dfs_err err = {0};
	struct fs_query q;

	ck_assert_int_eq(parse("{}?hint=", &q, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "hint needs"));
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?hint={price: ", &q, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "hint: "));
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?hint=a%00b", &q, &err), DFS_EINVAL);
	fs_query_release(&q);
}
END_TEST

START_TEST(test_fs_query_parse_verbosity_and_format)
{
	struct dfs_err err = {0};
	struct fs_query q;

	ck_assert_int_eq(parse("{}", &q, &err), 0);
	ck_assert_int_eq(q.verbosity, -1);
	ck_assert_int_eq(q.format, -1);
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?verbosity=executionStats&format=tree", &q, &err), 0);
	ck_assert_int_eq(q.verbosity, QUERY_VERB_EXEC);
	ck_assert_int_eq(q.format, FSQ_TREE);
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?verbosity=allPlansExecution", &q, &err), 0);
	ck_assert_int_eq(q.verbosity, QUERY_VERB_ALL);
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?verbosity=queryPlanner", &q, &err), 0);
	ck_assert_int_eq(q.verbosity, QUERY_VERB_PLANNER);
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?verbosity=loud", &q, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "'loud'"));
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?format=xml", &q, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "tree"));
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?hintt=a", &q, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "unknown option 'hintt'"));
	fs_query_release(&q);
}
END_TEST

/* Applies the saved command text to a fresh q. */
static int saved(const char *text, struct fs_query *q, struct dfs_err *err)
{
	fs_query_init(q);
	dfs_err_clear(err);
	return fs_query_parse_saved(text, strlen(text), q, err);
}

START_TEST(test_fs_query_from_command_hint)
{
	struct dfs_err err = {0};
	struct fs_query q;
	char *s;

	ck_assert_int_eq(saved("{filter: {a: 1}, hint: 'a_1'}", &q, &err), 0);
	ck_assert_str_eq(q.hint_name, "a_1");
	fs_query_release(&q);
	ck_assert_int_eq(saved("{hint: {a: 1}}", &q, &err), 0);
	ck_assert(q.has_hint);
	s = compact(&q.hint);
	ck_assert_str_eq(s, "{\"a\": 1}");
	free(s);
	fs_query_release(&q);
	ck_assert_int_eq(saved("{hint: 5}", &q, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "'hint'"));
	fs_query_release(&q);
	ck_assert_int_eq(saved("{hint: ''}", &q, &err), DFS_EINVAL);
	fs_query_release(&q);
	ck_assert_int_eq(saved("{verbosity: 'executionStats'}", &q, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "hint, maxTimeMS)"));
	fs_query_release(&q);
	ck_assert_int_eq(saved("{filter: {}, maxTimeMS: 250}", &q, &err), 0);
	ck_assert_int_eq(q.max_time_ms, 250);
	fs_query_release(&q);
	ck_assert_int_eq(saved("{maxTimeMS: -1}", &q, &err), DFS_EINVAL);
	fs_query_release(&q);
	fs_query_init(&q);
	ck_assert_int_eq(fs_query_parse("{a:1}?maxTimeMS=40&limit=2", &q, &err), 0);
	ck_assert_int_eq(q.max_time_ms, 40);
	fs_query_release(&q);
	fs_query_init(&q);
	ck_assert_int_eq(fs_query_parse("{}?maxTimeMS=x", &q, &err), DFS_EINVAL);
	fs_query_release(&q);
}
END_TEST

START_TEST(test_fs_index_name_ok_editor_names)
{
	static const char *const ok[] = {"price_1",	    "by_cat", "_id_",  "a.b_1",
					 "name_1_price_-1", "x",      "idx#1", NULL};
	static const char *const bad[] = {"",	  ".a.swp", ".#lock", "#auto#", "price_1~",
					  "4913", "*",	    "0",      NULL};
	char big[200];

	for (int i = 0; ok[i]; i++)
		ck_assert_msg(fs_index_name_ok(ok[i]), "'%s' refused", ok[i]);
	for (int i = 0; bad[i]; i++)
		ck_assert_msg(!fs_index_name_ok(bad[i]), "'%s' accepted", bad[i]);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert(!fs_index_name_ok(big));
	big[127] = '\0';
	ck_assert(fs_index_name_ok(big));
}
END_TEST

/* A temporary store with collection db.c holding three documents. */
struct fixture {
	char dir[64];
	struct store *s;
	struct store_db *db;
	struct store_coll c;
};

static void fixture_open(struct fixture *f)
{
	struct store_attrs a = {0644, 0, 0, 0};
	struct store_txn *t;
	struct store_entry e;

	strcpy(f->dir, "/tmp/test_qpath.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	ck_assert_int_eq(store_open(f->dir, true, &f->s, NULL), 0);
	ck_assert_int_eq(store_db_get(f->s, "db", true, &f->db, NULL), 0);
	ck_assert_int_eq(store_txn_begin(f->db, true, &t, NULL), 0);
	ck_assert_int_eq(store_coll_create(t, "c", 0755, 0, 0, &f->c, NULL), 0);
	for (int i = 1; i <= 3; i++) {
		char name[24], text[64];

		snprintf(name, sizeof(name), "%d.json", i);
		snprintf(text, sizeof(text), "{\"p\": %d}", i * 10);
		ck_assert_int_eq(
			store_doc_write_text(t, f->c.id, name, text, strlen(text), &a, &e, NULL),
			0);
	}
	ck_assert_int_eq(store_txn_commit(t, NULL), 0);
}

static void fixture_close(struct fixture *f)
{
	char cmd[128];

	store_free(f->s);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_fs_query_run_refuses_explain_options)
{
	struct dfs_err err = {0};
	struct fs_result r;
	struct fixture f;
	struct fs_query q;

	fixture_open(&f);
	fs_result_init(&r);
	ck_assert_int_eq(parse("{}?verbosity=executionStats", &q, &err), 0);
	ck_assert_int_eq(fs_query_run(f.db, f.c.id, &q, &r, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "explain/"));
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?format=tree", &q, &err), 0);
	ck_assert_int_eq(fs_query_run(f.db, f.c.id, &q, &r, &err), DFS_EINVAL);
	fs_query_release(&q);
	ck_assert_int_eq(parse("{p: {$gt: 15}}?hint={$natural: -1}", &q, &err), 0);
	ck_assert_int_eq(fs_query_run(f.db, f.c.id, &q, &r, &err), 0);
	ck_assert_str_eq(r.mem.data, "{\"_id\": 3, \"p\": 30}\n{\"_id\": 2, \"p\": 20}\n");
	fs_query_release(&q);
	fs_result_release(&r);
	fixture_close(&f);
}
END_TEST

START_TEST(test_fs_explain_run_formats)
{
	struct dfs_err err = {0};
	struct fs_result r;
	struct fixture f;
	struct fs_query q;
	bson_t doc;

	fixture_open(&f);
	/* The default: pretty JSON, the queryPlanner verbosity, the collection's namespace. */
	fs_result_init(&r);
	ck_assert_int_eq(parse("{p: 20}", &q, &err), 0);
	ck_assert_int_eq(fs_explain_run(f.db, f.c.id, &q, &r, &err), 0);
	ck_assert_uint_eq(r.size, r.mem.len);
	ck_assert_ptr_nonnull(strstr(r.mem.data, "\n  \"queryPlanner\": {\n"));
	ck_assert_ptr_nonnull(strstr(r.mem.data, "\"namespace\": \"db.c\""));
	ck_assert_ptr_null(strstr(r.mem.data, "\"executionStats\""));
	bson_init(&doc);
	ck_assert_int_eq(store_codec_parse_doc(r.mem.data, r.mem.len, &doc, NULL), 0);
	bson_destroy(&doc);
	fs_query_release(&q);
	fs_result_release(&r);
	/* format=json: one line; executionStats. */
	fs_result_init(&r);
	ck_assert_int_eq(parse("{p: 20}?format=json&verbosity=executionStats", &q, &err), 0);
	ck_assert_int_eq(fs_explain_run(f.db, f.c.id, &q, &r, &err), 0);
	ck_assert_ptr_eq(strchr(r.mem.data, '\n'), r.mem.data + r.mem.len - 1);
	ck_assert_ptr_nonnull(strstr(r.mem.data, "\"nReturned\": 1"));
	fs_query_release(&q);
	fs_result_release(&r);
	/* format=tree: text naming the stage. */
	fs_result_init(&r);
	ck_assert_int_eq(parse("{p: 20}?format=tree", &q, &err), 0);
	ck_assert_int_eq(fs_explain_run(f.db, f.c.id, &q, &r, &err), 0);
	ck_assert_ptr_nonnull(strstr(r.mem.data, "COLLSCAN"));
	ck_assert(r.mem.data[0] != '{');
	fs_query_release(&q);
	fs_result_release(&r);
	/* A count: its plan under a COUNT stage. */
	fs_result_init(&r);
	ck_assert_int_eq(parse("{p: 20}?count=1&format=tree", &q, &err), 0);
	ck_assert_int_eq(fs_explain_run(f.db, f.c.id, &q, &r, &err), 0);
	ck_assert_ptr_nonnull(strstr(r.mem.data, "COUNT\n  COLLSCAN"));
	fs_query_release(&q);
	fs_result_release(&r);
	/* What explain does not take. */
	fs_result_init(&r);
	ck_assert_int_eq(parse("{}?distinct=p", &q, &err), 0);
	ck_assert_int_eq(fs_explain_run(f.db, f.c.id, &q, &r, &err), DFS_EINVAL);
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?format=ids", &q, &err), 0);
	ck_assert_int_eq(fs_explain_run(f.db, f.c.id, &q, &r, &err), DFS_EINVAL);
	fs_query_release(&q);
	ck_assert_int_eq(parse("{}?hint=nosuch", &q, &err), 0);
	ck_assert_int_eq(fs_explain_run(f.db, f.c.id, &q, &r, &err), DFS_EINVAL);
	fs_query_release(&q);
	fs_result_release(&r);
	fixture_close(&f);
}
END_TEST

/* issue 29: a '?' or '&' inside a string or a regex literal belongs to the value. */
START_TEST(test_fs_path_split_skips_literals)
{
	const char *s = "{url: \"/a?x&y\", n: /colou?r/}?limit=2&sort={a: 'b&c'}";
	const char *q = fs_path_split(s, "?"), *amp;

	ck_assert_ptr_nonnull(q);
	ck_assert_str_eq(q, "?limit=2&sort={a: 'b&c'}");
	amp = fs_path_split(q + 1, "&");
	ck_assert_ptr_nonnull(amp);
	ck_assert_str_eq(amp, "&sort={a: 'b&c'}");
	ck_assert_ptr_null(fs_path_split(amp + 1, "&"));
	/* a '/' after an operator's colon starts a regex; in a key it does not */
	ck_assert_ptr_null(fs_path_split("{a: /x?/}", "?"));
	ck_assert_ptr_null(fs_path_split("{a: /[/?]/}", "?"));
}
END_TEST

/* issue 29: whether a query path's text so far needs the next component. */
START_TEST(test_fs_path_incomplete_joins_components)
{
	ck_assert(fs_path_incomplete("{ item: "));
	ck_assert(fs_path_incomplete("{ item: /^P"));
	ck_assert(!fs_path_incomplete("{ item: /^P/i }"));
	ck_assert(fs_path_incomplete("{url: \""));
	ck_assert(fs_path_incomplete("{url: \"/a"));
	ck_assert(!fs_path_incomplete("{url: \"/a/b\"}"));
	ck_assert(!fs_path_incomplete("{url: \"/a?b\"}?limit=1"));
	ck_assert(fs_path_incomplete("[{$match: {u: "));
	ck_assert(!fs_path_incomplete("[{$match: {u: /^\\/a/}}]"));
	/* whole, or wrong in a way no later component can fix: not continued */
	ck_assert(!fs_path_incomplete("{a: 1}}"));
	ck_assert(!fs_path_incomplete("@saved"));
	ck_assert(!fs_path_incomplete(""));
}
END_TEST

/* issue 29: a '%' not followed by two hex digits is itself. */
START_TEST(test_fs_path_unescape_keeps_lone_percent)
{
	struct dfs_buf b;

	dfs_buf_init(&b);
	ck_assert_int_eq(fs_path_unescape("100%", 4, &b, NULL), 0);
	ck_assert_str_eq(b.data, "100%");
	ck_assert_int_eq(fs_path_unescape("a%2Fb%zz%4", 10, &b, NULL), 0);
	ck_assert_str_eq(b.data, "a/b%zz%4");
	dfs_buf_release(&b);
}
END_TEST

static Suite *qpath_suite(void)
{
	Suite *s = suite_create("qpath");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_fs_query_parse_hint_name);
	tcase_add_test(tc, test_fs_path_split_skips_literals);
	tcase_add_test(tc, test_fs_path_incomplete_joins_components);
	tcase_add_test(tc, test_fs_path_unescape_keeps_lone_percent);
	tcase_add_test(tc, test_fs_query_parse_hint_pattern);
	tcase_add_test(tc, test_fs_query_parse_hint_errors);
	tcase_add_test(tc, test_fs_query_parse_verbosity_and_format);
	tcase_add_test(tc, test_fs_query_from_command_hint);
	tcase_add_test(tc, test_fs_index_name_ok_editor_names);
	tcase_add_test(tc, test_fs_query_run_refuses_explain_options);
	tcase_add_test(tc, test_fs_explain_run_formats);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(qpath_suite());
	int failed;

	query_init();
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
