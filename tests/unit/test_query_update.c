/*
 * test_query_update.c - unit tests of the update engine's API (update.c): lifecycle edge
 * cases, the contract on out and doc when applying fails, the changed flag, the parsed
 * update reused over many documents, and the upsert seed. Operator semantics are covered by
 * the data-driven corpus (tests/query/update_corpus) and the mingo differential test.
 */
#include "query.h"

#include <check.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void parse(const char *text, bson_t *out)
{
	struct dfs_err err = {0};

	bson_init(out);
	if (store_codec_parse_doc(text, strlen(text), out, &err))
		ck_abort_msg("bad test document %s: %s", text, err.msg);
}

static struct query_update *update_new(const char *text, const char *filters)
{
	struct query_update *u = NULL;
	struct dfs_err err = {0};
	bson_t t, f;

	parse(text, &t);
	if (filters) {
		char wrapped[512];
		bson_iter_t it;
		const uint8_t *data;
		uint32_t len;
		bson_t w, arr;

		snprintf(wrapped, sizeof(wrapped), "{f: %s}", filters);
		parse(wrapped, &w);
		ck_assert(bson_iter_init_find(&it, &w, "f") && BSON_ITER_HOLDS_ARRAY(&it));
		bson_iter_array(&it, &len, &data);
		ck_assert(bson_init_static(&arr, data, len));
		bson_copy_to(&arr, &f);
		bson_destroy(&w);
	}
	if (query_update_parse(&t, filters ? &f : NULL, &u, &err))
		ck_abort_msg("update %s: parse failed: %s", text, err.msg);
	bson_destroy(&t);
	if (filters)
		bson_destroy(&f);
	return u;
}

/* Applies u to doc and checks the result is byte-identical to expect. */
static void apply_ok(const struct query_update *u, const char *doc, const char *expect,
		     bool want_changed)
{
	bson_t d, e, out;
	struct dfs_err err = {0};
	bool changed = !want_changed;

	parse(doc, &d);
	parse(expect, &e);
	bson_init(&out);
	if (query_update_apply(u, &d, -1, false, 0, &out, &changed, &err))
		ck_abort_msg("apply to %s failed: %s", doc, err.msg);
	ck_assert_msg(out.len == e.len && !memcmp(bson_get_data(&out), bson_get_data(&e), e.len),
		      "apply to %s: unexpected result", doc);
	ck_assert(changed == want_changed);
	bson_destroy(&d);
	bson_destroy(&e);
	bson_destroy(&out);
}

START_TEST(test_query_update_free_null)
{
	query_update_free(NULL);
}
END_TEST

START_TEST(test_query_update_parse_refuses_text)
{
	struct query_update *u = NULL;
	struct dfs_err err = {0};
	bson_t t, f, w;
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	/* $text would match everything outside a find's text stages */
	parse("{$pull: {tags: {$text: {$search: 'x'}}}}", &t);
	ck_assert_int_eq(query_update_parse(&t, NULL, &u, &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "$text is not allowed in this context"));
	ck_assert_ptr_null(u);
	bson_destroy(&t);
	dfs_err_clear(&err);
	parse("{$set: {'a.$[e]': 1}}", &t);
	parse("{f: [{e: {$text: {$search: 'x'}}}]}", &w);
	ck_assert(bson_iter_init_find(&it, &w, "f") && BSON_ITER_HOLDS_ARRAY(&it));
	bson_iter_array(&it, &len, &data);
	ck_assert(bson_init_static(&f, data, len));
	ck_assert_int_eq(query_update_parse(&t, &f, &u, &err), DFS_EINVAL);
	ck_assert_msg(strstr(err.msg, "$text"), "%s", err.msg);
	bson_destroy(&t);
	bson_destroy(&w);
}
END_TEST

START_TEST(test_query_update_parse_error_leaves_null)
{
	struct query_update *u = (struct query_update *)&u; /* not NULL before */
	struct dfs_err err = {0};
	bson_t t;

	parse("{$sett: {a: 1}}", &t);
	ck_assert_int_eq(query_update_parse(&t, NULL, &u, &err), DFS_EINVAL);
	ck_assert_ptr_null(u);
	ck_assert_str_eq(err.msg, "unknown update operator '$sett'");
	bson_destroy(&t);

	/* the error is set once: a later failure does not overwrite a set error */
	parse("{$set: {a: 1}, $inc: {a: 1}}", &t);
	dfs_err_clear(&err);
	ck_assert_int_eq(query_update_parse(&t, NULL, &u, &err), DFS_EINVAL);
	ck_assert_str_eq(err.msg, "Updating the path 'a' would create a conflict at 'a'");
	bson_destroy(&t);
}
END_TEST

START_TEST(test_query_update_is_replacement_kinds)
{
	struct query_update *u = update_new("{a: 1, b: {c: 2}}", NULL);

	ck_assert(query_update_is_replacement(u));
	query_update_free(u);
	u = update_new("{$set: {a: 1}}", NULL);
	ck_assert(!query_update_is_replacement(u));
	query_update_free(u);
	u = update_new("{}", NULL);
	ck_assert(query_update_is_replacement(u));
	query_update_free(u);
}
END_TEST

START_TEST(test_query_update_apply_error_leaves_out_empty)
{
	static const char *const bad[][2] = {
		{"{$inc: {s: 1}}", NULL},
		{"{$set: {\"s.t\": 1}}", NULL},
		{"{$set: {_id: 2}}", NULL},
		{"{$set: {\"a.$\": 1}}", NULL},
		{"{$push: {s: 1}}", NULL},
		{"{$set: {\"a.$[x]\": 1, \"a.$[y]\": 2}}", "[{x: 1}, {y: {$gte: 1}}]"},
	};
	const char *text = "{_id: 1, s: \"x\", a: [1, 2]}";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct query_update *u = update_new(bad[i][0], bad[i][1]);
		struct dfs_err err = {0};
		bool changed = true;
		bson_t d, before, out;

		parse(text, &d);
		bson_copy_to(&d, &before);
		bson_init(&out);
		ck_assert_msg(query_update_apply(u, &d, -1, false, 0, &out, &changed, &err) != 0,
			      "%s: no error", bad[i][0]);
		ck_assert_msg(err.code != DFS_OK && err.msg[0], "%s: no message", bad[i][0]);
		ck_assert_msg(bson_empty(&out), "%s: out is not empty", bad[i][0]);
		ck_assert(!changed);
		ck_assert(bson_equal(&d, &before));
		/* out is usable (empty and initialised) after a failure */
		BSON_APPEND_INT32(&out, "x", 1);
		ck_assert_int_eq(bson_count_keys(&out), 1);
		bson_destroy(&out);
		bson_destroy(&before);
		bson_destroy(&d);
		query_update_free(u);
	}
}
END_TEST

/* Bytes that are not BSON, deep in the document, are refused and nothing is made of them:
 * the operator path notices while building its tree (no bson_validate walk of its own). */
START_TEST(test_query_update_apply_corrupt_input)
{
	static const char *const ups[] = {"{$inc: {n: 1}}", "{$set: {\"m.k\": 2}}", "{n: 5}"};

	for (size_t i = 0; i < sizeof(ups) / sizeof(ups[0]); i++) {
		/* bson_validate, which a replacement keeps, does not look at an embedded
		 * document's last byte (a replacement does not read m) */
		for (int where = 0; where < (i < 2 ? 2 : 1); where++) {
			struct query_update *u = update_new(ups[i], NULL);
			struct dfs_err err = {0};
			bool changed = true;
			bson_t d, bad, out;
			uint8_t *bytes;
			bson_iter_t it;

			parse("{_id: 1, n: 1, m: {k: 1, s: \"abc\"}}", &d);
			bytes = bson_malloc(d.len);
			memcpy(bytes, bson_get_data(&d), d.len);
			ck_assert(bson_iter_init_find(&it, &d, "m"));
			if (where == 0) /* the string in m claims more bytes than m holds */
				bytes[it.d1 + 4 + 1 + 2 + 4 + 1 + 2] = 0x7f;
			else /* m's last byte is not its terminating NUL */
				bytes[it.d1 + bson_iter_value(&it)->value.v_doc.data_len - 1] = 0x01;
			ck_assert(bson_init_static(&bad, bytes, d.len));
			bson_init(&out);
			ck_assert_msg(query_update_apply(u, &bad, -1, false, 0, &out, &changed,
							 &err) == DFS_EINVAL,
				      "%s, corruption %d: accepted", ups[i], where);
			ck_assert_msg(strstr(err.msg, "not valid BSON"), "%s", err.msg);
			ck_assert(bson_empty(&out) && !changed);
			bson_destroy(&out);
			bson_free(bytes);
			bson_destroy(&d);
			query_update_free(u);
		}
	}
}
END_TEST

START_TEST(test_query_update_apply_changed_flag)
{
	struct query_update *u;

	u = update_new("{$set: {a: 1}}", NULL);
	apply_ok(u, "{_id: 1, a: 1}", "{_id: 1, a: 1}", false);
	apply_ok(u, "{_id: 1, a: 1.0}", "{_id: 1, a: 1}", true);
	apply_ok(u, "{_id: 1, a: NumberLong(1)}", "{_id: 1, a: 1}", true);
	apply_ok(u, "{_id: 1}", "{_id: 1, a: 1}", true);
	query_update_free(u);

	u = update_new("{$inc: {n: 0}, $unset: {gone: 1}, $pull: {arr: 9}}", NULL);
	apply_ok(u, "{_id: 1, n: 5, arr: [1, 2]}", "{_id: 1, n: 5, arr: [1, 2]}", false);
	apply_ok(u, "{_id: 1, n: 5, gone: 0, arr: [9]}", "{_id: 1, n: 5, arr: []}", true);
	query_update_free(u);

	u = update_new("{_id: 1, a: 1}", NULL);
	apply_ok(u, "{_id: 1, a: 1}", "{_id: 1, a: 1}", false);
	apply_ok(u, "{a: 1, _id: 1}", "{_id: 1, a: 1}", true);
	query_update_free(u);

	/* changed may be NULL */
	{
		bson_t d, out;
		struct dfs_err err = {0};

		u = update_new("{$set: {a: 2}}", NULL);
		parse("{_id: 1}", &d);
		bson_init(&out);
		ck_assert_int_eq(query_update_apply(u, &d, -1, false, 0, &out, NULL, &err), 0);
		bson_destroy(&out);
		bson_destroy(&d);
		query_update_free(u);
	}
}
END_TEST

START_TEST(test_query_update_apply_reused)
{
	/* one parsed update (with array filters) applied to many documents in turn */
	struct query_update *u =
		update_new("{$inc: {\"a.$[big]\": 1}, $push: {log: \"x\"}}", "[{big: {$gte: 10}}]");

	for (int i = 0; i < 50; i++) {
		char doc[128], expect[128];

		snprintf(doc, sizeof(doc), "{_id: %d, a: [1, %d, 10]}", i, i);
		snprintf(expect, sizeof(expect), "{_id: %d, a: [1, %d, 11], log: [\"x\"]}", i,
			 i >= 10 ? i + 1 : i);
		apply_ok(u, doc, expect, true);
	}
	query_update_free(u);
}
END_TEST

START_TEST(test_query_update_apply_positional_index)
{
	struct query_update *u = update_new("{$set: {\"a.$\": 0}}", NULL);
	struct dfs_err err = {0};
	bson_t d, e, out;

	parse("{_id: 1, a: [5, 6, 7]}", &d);
	parse("{_id: 1, a: [5, 6, 0]}", &e);
	bson_init(&out);
	ck_assert_int_eq(query_update_apply(u, &d, 2, false, 0, &out, NULL, &err), 0);
	ck_assert(bson_equal(&out, &e));
	bson_reinit(&out);
	ck_assert_int_eq(query_update_apply(u, &d, -1, false, 0, &out, NULL, &err), DFS_EINVAL);
	ck_assert(bson_empty(&out));
	bson_destroy(&out);
	bson_destroy(&e);
	bson_destroy(&d);
	query_update_free(u);
}
END_TEST

START_TEST(test_query_update_apply_upsert_insert)
{
	struct query_update *u = update_new("{$setOnInsert: {n: 1}, $set: {_id: 7}}", NULL);
	struct dfs_err err = {0};
	bool changed = false;
	bson_t d, e, out;

	parse("{a: 1}", &d);
	parse("{_id: 7, a: 1, n: 1}", &e);
	bson_init(&out);
	ck_assert_int_eq(query_update_apply(u, &d, -1, true, 0, &out, &changed, &err), 0);
	ck_assert(bson_equal(&out, &e));
	ck_assert(changed);
	bson_destroy(&out);
	bson_destroy(&e);
	bson_destroy(&d);
	query_update_free(u);
}
END_TEST

START_TEST(test_query_upsert_seed_shapes)
{
	struct dfs_err err = {0};
	bson_t f, e, out;

	parse("{\"x.y\": 1, b: {$gt: 2}, _id: 3, $and: [{c: {$eq: [1]}}]}", &f);
	parse("{_id: 3, c: [1], x: {y: 1}}", &e);
	bson_init(&out);
	ck_assert_int_eq(query_upsert_seed(&f, &out, &err), 0);
	ck_assert(bson_equal(&out, &e));
	bson_destroy(&out);
	bson_destroy(&e);
	bson_destroy(&f);

	parse("{a: 1, \"a.b\": 2}", &f);
	bson_init(&out);
	ck_assert_int_eq(query_upsert_seed(&f, &out, &err), DFS_EINVAL);
	ck_assert(bson_empty(&out));
	bson_destroy(&out);
	bson_destroy(&f);

	parse("{a: {$nope: 1}}", &f);
	bson_init(&out);
	dfs_err_clear(&err);
	ck_assert_int_eq(query_upsert_seed(&f, &out, &err), DFS_EINVAL);
	ck_assert(bson_empty(&out));
	bson_destroy(&out);
	bson_destroy(&f);
}
END_TEST

START_TEST(test_query_update_apply_too_big)
{
	/* '$[]' copying a 1 MB value into 40 elements: stopped before allocating it all */
	size_t n = 1000000;
	char *big = malloc(n + 1);
	bson_t upd, set, d, arr, out;
	struct query_update *u = NULL;
	struct dfs_err err = {0};

	ck_assert_ptr_nonnull(big);
	memset(big, 'x', n);
	big[n] = '\0';
	bson_init(&upd);
	bson_append_document_begin(&upd, "$set", -1, &set);
	BSON_APPEND_UTF8(&set, "a.$[]", big);
	bson_append_document_end(&upd, &set);
	ck_assert_int_eq(query_update_parse(&upd, NULL, &u, &err), 0);
	bson_init(&d);
	BSON_APPEND_INT32(&d, "_id", 1);
	bson_append_array_begin(&d, "a", -1, &arr);
	for (int i = 0; i < 40; i++) {
		char k[12];

		snprintf(k, sizeof(k), "%d", i);
		BSON_APPEND_INT32(&arr, k, i);
	}
	bson_append_array_end(&d, &arr);
	bson_init(&out);
	ck_assert_int_eq(query_update_apply(u, &d, -1, false, 0, &out, NULL, &err), DFS_EFBIG);
	ck_assert(bson_empty(&out));
	bson_destroy(&out);
	bson_destroy(&d);
	bson_destroy(&upd);
	query_update_free(u);
	free(big);
}
END_TEST

static Suite *query_update_suite(void)
{
	Suite *s = suite_create("query_update");
	TCase *t = tcase_create("update");

	tcase_add_test(t, test_query_update_free_null);
	tcase_add_test(t, test_query_update_parse_error_leaves_null);
	tcase_add_test(t, test_query_update_is_replacement_kinds);
	tcase_add_test(t, test_query_update_apply_error_leaves_out_empty);
	tcase_add_test(t, test_query_update_apply_changed_flag);
	tcase_add_test(t, test_query_update_apply_corrupt_input);
	tcase_add_test(t, test_query_update_apply_reused);
	tcase_add_test(t, test_query_update_apply_positional_index);
	tcase_add_test(t, test_query_update_apply_upsert_insert);
	tcase_add_test(t, test_query_upsert_seed_shapes);
	tcase_add_test(t, test_query_update_apply_too_big);
	tcase_add_test(t, test_query_update_parse_refuses_text);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(query_update_suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
