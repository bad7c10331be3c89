/*
 * test_query_match.c - unit tests of filter.c and match.c: concrete filter/document cases
 * for every operator, the array / null / missing / type-bracket corners of the MongoDB
 * manual, elemMatchKey (elem_index) cases, parse errors with their exact messages, and the
 * describe() shape. Filters and documents are written in the shell-literal syntax of the
 * codec; the few filters the codec would read as legacy Extended JSON ({$regex, $options})
 * are built with libbson.
 */
#include "query.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ----------------------------------------------------------------------- */

static void parse_text(const char *text, bson_t *out)
{
	struct dfs_err err = {0};

	bson_init(out);
	ck_assert_msg(store_codec_parse_doc(text, strlen(text), out, &err) == 0, "test text %s: %s",
		      text, err.msg);
}

/* 1 match, 0 no match, -1 parse error; *elem gets elem_index. */
static int match_bson(const bson_t *f, const char *doctext, int *elem)
{
	struct query_expr *e = NULL;
	struct dfs_err err = {0};
	bson_t d;
	int r;

	if (query_filter_parse(f, &e, &err) != 0) {
		fprintf(stderr, "parse error: %s\n", err.msg);
		return -1;
	}
	parse_text(doctext, &d);
	r = query_filter_match(e, &d, elem) ? 1 : 0;
	bson_destroy(&d);
	query_expr_free(e);
	return r;
}

static int match_text(const char *filter, const char *doctext, int *elem)
{
	bson_t f;
	int r;

	parse_text(filter, &f);
	r = match_bson(&f, doctext, elem);
	bson_destroy(&f);
	return r;
}

#define YES(f, d) ck_assert_msg(match_text(f, d, NULL) == 1, "%s should match %s", f, d)
#define NO(f, d) ck_assert_msg(match_text(f, d, NULL) == 0, "%s should not match %s", f, d)
#define ELEM(f, d, want)                                                                           \
	do {                                                                                       \
		int got_ = -2;                                                                     \
		ck_assert_msg(match_text(f, d, &got_) == 1, "%s should match %s", f, d);           \
		ck_assert_msg(got_ == (want), "%s on %s: elem_index %d, want %d", f, d, got_,      \
			      (want));                                                             \
	} while (0)

/* The parse error message of filter (the test fails when it parses). */
static const char *parse_err(const char *filter)
{
	static struct dfs_err err;
	struct query_expr *e = NULL;
	bson_t f;
	int rc;

	dfs_err_clear(&err);
	parse_text(filter, &f);
	rc = query_filter_parse(&f, &e, &err);
	bson_destroy(&f);
	query_expr_free(e);
	ck_assert_msg(rc == DFS_EINVAL, "%s should not parse", filter);
	return err.msg;
}

#define PERR(f, msg) ck_assert_str_eq(parse_err(f), msg)

/* {a: {$regex: pattern, $options: options}} built by hand (the codec would make /re/). */
static int match_regex_op(const char *pattern, const char *options, const char *doctext)
{
	bson_t f, sub;
	int r;

	bson_init(&f);
	bson_append_document_begin(&f, "a", -1, &sub);
	bson_append_utf8(&sub, "$regex", -1, pattern, -1);
	if (options)
		bson_append_utf8(&sub, "$options", -1, options, -1);
	bson_append_document_end(&f, &sub);
	r = match_bson(&f, doctext, NULL);
	bson_destroy(&f);
	return r;
}

/* describe() of filter as compact text. */
static char *describe(const char *filter)
{
	struct query_expr *e = NULL;
	struct dfs_err err = {0};
	struct dfs_buf out;
	bson_t f, d;
	bson_iter_t it;

	parse_text(filter, &f);
	ck_assert_int_eq(query_filter_parse(&f, &e, &err), 0);
	bson_init(&d);
	query_filter_describe(e, &d, "q");
	dfs_buf_init(&out);
	ck_assert(bson_iter_init_find(&it, &d, "q"));
	ck_assert_int_eq(store_codec_render_value(bson_iter_value(&it), &out, &err), 0);
	bson_destroy(&d);
	bson_destroy(&f);
	query_expr_free(e);
	return out.data;
}

#define DESCRIBE(f, want)                                                                          \
	do {                                                                                       \
		char *got_ = describe(f);                                                          \
		ck_assert_str_eq(got_, want);                                                      \
		free(got_);                                                                        \
	} while (0)

/* ---- equality, paths, arrays ------------------------------------------------------- */

START_TEST(test_query_filter_match_equality)
{
	YES("{}", "{a: 1}");
	YES("{a: 1}", "{a: 1}");
	YES("{a: 1}", "{a: 1.0}");
	YES("{a: 1}", "{a: NumberLong(1)}");
	YES("{a: 1}", "{a: NumberDecimal(\"1.00\")}");
	NO("{a: 1}", "{a: \"1\"}");
	NO("{a: 1}", "{a: true}");
	NO("{a: 1}", "{b: 1}");
	YES("{a: 1, b: 2}", "{b: 2, a: 1}");
	NO("{a: 1, b: 2}", "{a: 1, b: 3}");
	YES("{a: \"x\"}", "{a: \"x\"}");
	NO("{a: \"x\"}", "{a: \"X\"}");
	YES("{a: {$eq: 5}}", "{a: 5}");
	YES("{a: ObjectId(\"5f0000000000000000000001\")}",
	    "{a: ObjectId(\"5f0000000000000000000001\")}");
	YES("{a: true}", "{a: true}");
	NO("{a: true}", "{a: 1}");
	YES("{a: ISODate(\"2020-01-01T00:00:00Z\")}", "{a: ISODate(\"2020-01-01T00:00:00Z\")}");
	NO("{a: ISODate(\"2020-01-01T00:00:00Z\")}", "{a: Timestamp(1577836800, 0)}");
	YES("{a: MinKey}", "{a: MinKey}");
	NO("{a: MinKey}", "{a: null}");
	YES("{a: MaxKey}", "{a: MaxKey}");
	YES("{a: {$eq: NaN}}", "{a: NaN}");
	NO("{a: NaN}", "{a: 1}");
}
END_TEST

START_TEST(test_query_filter_match_embedded_documents)
{
	YES("{a: {b: 1, c: 2}}", "{a: {b: 1, c: 2}}");
	NO("{a: {b: 1, c: 2}}", "{a: {c: 2, b: 1}}");
	NO("{a: {b: 1}}", "{a: {b: 1, c: 2}}");
	NO("{a: {b: 1, c: 2}}", "{a: {b: 1}}");
	YES("{a: {b: 1}}", "{a: {b: 1.0}}");
	YES("{a: {}}", "{a: {}}");
	NO("{a: {}}", "{a: {b: 1}}");
	YES("{a: {b: 1}}", "{a: [{b: 1}, 2]}");
	YES("{a: {$eq: {$gt: 1}}}", "{a: {$gt: 1}}"); /* $eq takes the document literally */
	YES("{\"a.b\": 1}", "{a: {b: 1}}");
	YES("{\"a.b.c\": 1}", "{a: {b: {c: 1}}}");
	NO("{\"a.b\": 1}", "{a: 1}");
	NO("{\"a.b\": 1}", "{\"a.b\": 1}");
	YES("{a: {$ref: \"c\", $id: 1}}", "{a: {$ref: \"c\", $id: 1}}"); /* DBRef: a value */
}
END_TEST

START_TEST(test_query_filter_match_arrays)
{
	YES("{a: 2}", "{a: [1, 2, 3]}");
	NO("{a: 4}", "{a: [1, 2, 3]}");
	YES("{a: [1, 2]}", "{a: [1, 2]}");
	NO("{a: [1, 2]}", "{a: [2, 1]}");
	NO("{a: [1, 2]}", "{a: [1, 2, 3]}");
	YES("{a: [1, 2]}", "{a: [[1, 2], 3]}");
	NO("{a: 1}", "{a: [[1, 2], 3]}"); /* nested arrays are not expanded */
	YES("{a: []}", "{a: []}");
	YES("{a: []}", "{a: [[], 1]}");
	NO("{a: []}", "{a: [1]}");
	YES("{\"a.b\": 2}", "{a: [{b: 1}, {b: 2}]}");
	YES("{\"a.b\": 2}", "{a: [{b: [1, 2]}]}");
	YES("{\"a.b.c\": 3}", "{a: [{b: [{c: 3}]}]}");
	NO("{\"a.b\": 1}", "{a: [[{b: 1}]]}"); /* one level of implicit traversal */
	YES("{\"a.b\": [1, 2]}", "{a: [{b: [1, 2]}]}");
	/* numeric components: element index or field name */
	YES("{\"a.0\": 5}", "{a: [5, 6]}");
	NO("{\"a.1\": 5}", "{a: [5, 6]}");
	YES("{\"a.0\": 5}", "{a: {\"0\": 5}}");
	YES("{\"a.0.b\": 1}", "{a: [{b: 1}, {b: 2}]}");
	NO("{\"a.1.b\": 1}", "{a: [{b: 1}, {b: 2}]}");
	YES("{\"a.0\": 7}", "{a: [{\"0\": 7}]}");
	YES("{\"a.0\": {\"0\": 7}}", "{a: [{\"0\": 7}]}");
	NO("{\"a.0\": 1}", "{a: [[1, 2]]}"); /* the element itself, unexpanded */
	YES("{\"a.0\": [1, 2]}", "{a: [[1, 2]]}");
	YES("{\"a.0.0\": 1}", "{a: [[1, 2]]}");
	YES("{\"a.0.b\": 1}", "{a: [[{b: 1}]]}");
	NO("{\"a.00\": 5}", "{a: [5]}");
	YES("{\"a.1\": 6}", "{a: {b: 1, \"1\": 6}}");
	YES("{\"a.b.1\": 9}", "{a: [{b: [8, 9]}]}");
}
END_TEST

START_TEST(test_query_filter_match_null_and_missing)
{
	YES("{a: null}", "{a: null}");
	YES("{a: null}", "{b: 1}");
	NO("{a: null}", "{a: undefined}"); /* MongoDB 8.0 */
	YES("{a: {$ne: null}}", "{a: undefined}");
	NO("{a: null}", "{a: 0}");
	NO("{a: null}", "{a: false}");
	YES("{a: null}", "{a: [1, null]}");
	NO("{a: null}", "{a: []}");
	NO("{a: null}", "{a: [1]}");
	NO("{a: null}", "{a: [[null]]}");
	YES("{\"a.b\": null}", "{a: 1}");
	YES("{\"a.b\": null}", "{a: {c: 1}}");
	YES("{\"a.b\": null}", "{a: [{c: 1}]}");
	YES("{\"a.b\": null}", "{a: [{b: 1}, {c: 1}]}");
	NO("{\"a.b\": null}", "{a: [{b: 1}]}");
	NO("{\"a.b\": null}", "{a: [1, 2]}");
	NO("{\"a.b\": null}", "{a: []}");
	NO("{\"a.0\": null}", "{a: []}");
	YES("{\"a.0\": null}", "{a: [null]}");
	YES("{a: {$ne: null}}", "{a: 1}");
	NO("{a: {$ne: null}}", "{b: 1}");
	NO("{a: {$ne: null}}", "{a: null}");
	NO("{a: {$ne: null}}", "{a: [1, null]}");
	YES("{a: {$ne: null}}", "{a: []}");
	YES("{a: {$gte: null}}", "{b: 1}");
	YES("{a: {$lte: null}}", "{a: null}");
	NO("{a: {$gt: null}}", "{a: null}");
	NO("{a: {$lt: null}}", "{b: 1}");
	NO("{a: {$gt: null}}", "{a: 1}");
	YES("{a: {$in: [null]}}", "{b: 1}");
	YES("{a: {$in: [5, null]}}", "{a: null}");
	NO("{a: {$nin: [null]}}", "{b: 1}");
	YES("{a: {$nin: [null]}}", "{a: 3}");
	YES("{a: {$type: \"null\"}}", "{a: null}");
	NO("{a: {$type: \"null\"}}", "{b: 1}");
	YES("{a: {$type: \"undefined\"}}", "{a: undefined}");
}
END_TEST

START_TEST(test_query_filter_match_comparisons)
{
	YES("{a: {$gt: 1}}", "{a: 2}");
	NO("{a: {$gt: 1}}", "{a: 1}");
	YES("{a: {$gte: 1}}", "{a: 1}");
	YES("{a: {$lt: 1}}", "{a: 0.5}");
	YES("{a: {$lte: 1}}", "{a: NumberLong(1)}");
	NO("{a: {$lt: 1}}", "{a: 1}");
	YES("{a: {$gt: 1, $lt: 3}}", "{a: 2}");
	NO("{a: {$gt: 1, $lt: 3}}", "{a: 3}");
	YES("{a: {$gt: 1, $lt: 3}}", "{a: [0, 5]}"); /* different elements may satisfy each */
	NO("{a: {$elemMatch: {$gt: 1, $lt: 3}}}", "{a: [0, 5]}");
	YES("{a: {$gt: 9007199254740992}}", "{a: NumberLong(\"9007199254740993\")}");
	NO("{a: {$gt: 9007199254740993.0}}", "{a: NumberLong(\"9007199254740992\")}");
	YES("{a: {$lt: NumberDecimal(\"0.30000000000000001\")}}", "{a: 0.3}");
	/* type brackets: no cross-type matches */
	NO("{a: {$gt: 1}}", "{a: \"2\"}");
	NO("{a: {$lt: \"a\"}}", "{a: 1}");
	NO("{a: {$gt: 1}}", "{b: 1}");
	NO("{a: {$lt: ISODate(\"2030-01-01T00:00:00Z\")}}", "{a: 5}");
	YES("{a: {$lt: ISODate(\"2030-01-01T00:00:00Z\")}}",
	    "{a: ISODate(\"2020-01-01T00:00:00Z\")}");
	YES("{a: {$gt: \"abc\"}}", "{a: \"abd\"}");
	NO("{a: {$gt: \"abc\"}}", "{a: \"ABD\"}");
	YES("{a: {$gt: false}}", "{a: true}");
	YES("{a: {$gt: [1]}}", "{a: [[2]]}");
	YES("{a: {$gt: {b: 1}}}", "{a: {b: 2}}");
	NO("{a: {$gt: {b: 1}}}", "{a: 5}");
	YES("{a: {$gte: [1, 2]}}", "{a: [1, 2]}"); /* the whole array */
	YES("{a: {$gt: 2}}", "{a: [1, 3]}");
	NO("{a: {$gt: 3}}", "{a: [1, 3]}");
	/* MinKey / MaxKey */
	YES("{a: {$lt: MaxKey}}", "{a: \"x\"}");
	YES("{a: {$lt: MaxKey}}", "{a: {b: 1}}");
	YES("{a: {$lt: MaxKey}}", "{b: 1}");
	NO("{a: {$lt: MaxKey}}", "{a: MaxKey}");
	YES("{a: {$lte: MaxKey}}", "{a: MaxKey}");
	YES("{a: {$gt: MinKey}}", "{a: null}");
	NO("{a: {$gt: MinKey}}", "{a: MinKey}");
	NO("{a: {$gt: MaxKey}}", "{a: 5}");
	NO("{a: {$lt: MinKey}}", "{a: 5}");
	/* NaN */
	NO("{a: {$gt: 0}}", "{a: NaN}");
	NO("{a: {$lt: 0}}", "{a: NaN}");
	YES("{a: {$gte: NaN}}", "{a: NaN}");
	NO("{a: {$lt: NaN}}", "{a: -Infinity}");
	YES("{a: {$gt: -Infinity}}", "{a: -1e308}");
}
END_TEST

START_TEST(test_query_filter_match_ne_in_nin)
{
	YES("{a: {$ne: 1}}", "{a: 2}");
	NO("{a: {$ne: 1}}", "{a: 1}");
	YES("{a: {$ne: 1}}", "{b: 1}");
	NO("{a: {$ne: 1}}", "{a: [1, 2]}");
	YES("{a: {$ne: 1}}", "{a: [2, 3]}");
	NO("{a: {$ne: [1, 2]}}", "{a: [1, 2]}");
	YES("{a: {$ne: 1}}", "{a: \"1\"}");
	YES("{a: {$in: [1, 2]}}", "{a: 2}");
	YES("{a: {$in: [1, 2]}}", "{a: [5, 2]}");
	NO("{a: {$in: [1, 2]}}", "{a: 3}");
	NO("{a: {$in: []}}", "{a: 3}");
	YES("{a: {$in: [[1, 2]]}}", "{a: [1, 2]}");
	YES("{a: {$in: [\"x\", 3.0]}}", "{a: NumberLong(3)}");
	YES("{a: {$in: [/^ab/, 7]}}", "{a: \"abc\"}");
	YES("{a: {$in: [/^ab/, 7]}}", "{a: [\"zz\", \"abz\"]}");
	NO("{a: {$in: [/^ab/, 7]}}", "{a: \"cab\"}");
	YES("{a: {$in: [{b: 1}]}}", "{a: {b: 1}}");
	YES("{a: {$nin: [1, 2]}}", "{a: 3}");
	YES("{a: {$nin: [1, 2]}}", "{b: 3}");
	NO("{a: {$nin: [1, 2]}}", "{a: [3, 2]}");
	YES("{a: {$nin: []}}", "{a: 1}");
	NO("{a: {$nin: [/x/]}}", "{a: \"axe\"}");
	YES("{a: {$in: [1, 1.0, NumberLong(1), 2]}}", "{a: 2}");
}
END_TEST

START_TEST(test_query_filter_match_logical)
{
	YES("{$and: [{a: 1}, {b: 2}]}", "{a: 1, b: 2}");
	NO("{$and: [{a: 1}, {b: 2}]}", "{a: 1, b: 3}");
	YES("{$or: [{a: 1}, {b: 2}]}", "{a: 5, b: 2}");
	NO("{$or: [{a: 1}, {b: 2}]}", "{a: 5, b: 5}");
	YES("{$nor: [{a: 1}, {b: 2}]}", "{a: 5, b: 5}");
	NO("{$nor: [{a: 1}, {b: 2}]}", "{a: 1}");
	YES("{$nor: [{a: 1}]}", "{}");
	YES("{$or: [{a: {$exists: false}}, {a: 1}]}", "{b: 1}");
	YES("{$and: [{$or: [{a: 1}, {a: 2}]}, {$or: [{b: 3}, {b: 4}]}]}", "{a: 2, b: 3}");
	NO("{$and: [{$or: [{a: 1}, {a: 2}]}, {$or: [{b: 3}, {b: 4}]}]}", "{a: 2, b: 5}");
	YES("{a: 1, $or: [{b: 1}, {c: 1}]}", "{a: 1, c: 1}");
	YES("{a: {$not: {$gt: 5}}}", "{a: 3}");
	NO("{a: {$not: {$gt: 5}}}", "{a: 6}");
	YES("{a: {$not: {$gt: 5}}}", "{b: 1}");
	YES("{a: {$not: {$gt: 5}}}", "{a: \"x\"}");
	NO("{a: {$not: {$gt: 5}}}", "{a: [1, 9]}");
	YES("{a: {$not: /^x/}}", "{a: \"yx\"}");
	NO("{a: {$not: /^x/}}", "{a: \"xy\"}");
	YES("{a: {$not: {$gt: 1, $lt: 5}}}", "{a: 7}");
	NO("{a: {$not: {$gt: 1, $lt: 5}}}", "{a: 3}");
	YES("{$comment: \"hello\", a: 1}", "{a: 1}");
	YES("{$alwaysTrue: 1}", "{}");
	NO("{$alwaysFalse: 1}", "{}");
}
END_TEST

START_TEST(test_query_filter_match_exists_type)
{
	YES("{a: {$exists: true}}", "{a: null}");
	NO("{a: {$exists: true}}", "{b: 1}");
	YES("{a: {$exists: false}}", "{b: 1}");
	NO("{a: {$exists: false}}", "{a: 1}");
	YES("{a: {$exists: 1}}", "{a: 0}");
	YES("{a: {$exists: 0}}", "{}");
	YES("{a: {$exists: true}}", "{a: []}");
	YES("{\"a.b\": {$exists: true}}", "{a: [{c: 1}, {b: 1}]}");
	NO("{\"a.b\": {$exists: true}}", "{a: [{c: 1}]}");
	NO("{\"a.b\": {$exists: true}}", "{a: [1, 2]}");
	YES("{\"a.b\": {$exists: false}}", "{a: [1, 2]}");
	YES("{\"a.1\": {$exists: true}}", "{a: [1, 2]}");
	NO("{\"a.2\": {$exists: true}}", "{a: [1, 2]}");
	YES("{a: {$type: \"string\"}}", "{a: \"x\"}");
	YES("{a: {$type: 2}}", "{a: \"x\"}");
	YES("{a: {$type: 2.0}}", "{a: \"x\"}");
	NO("{a: {$type: \"string\"}}", "{a: 1}");
	YES("{a: {$type: \"number\"}}", "{a: NumberDecimal(\"1\")}");
	YES("{a: {$type: \"number\"}}", "{a: 1}");
	NO("{a: {$type: \"number\"}}", "{a: \"1\"}");
	YES("{a: {$type: \"int\"}}", "{a: 1}");
	NO("{a: {$type: \"int\"}}", "{a: 1.0}");
	YES("{a: {$type: \"long\"}}", "{a: NumberLong(1)}");
	YES("{a: {$type: \"double\"}}", "{a: 1.5}");
	YES("{a: {$type: \"decimal\"}}", "{a: NumberDecimal(\"1\")}");
	YES("{a: {$type: \"array\"}}", "{a: []}");
	YES("{a: {$type: \"array\"}}", "{a: [1]}");
	YES("{a: {$type: 4}}", "{a: [[1]]}");
	NO("{a: {$type: \"array\"}}", "{a: {b: [1]}}");
	YES("{a: {$type: \"string\"}}", "{a: [1, \"x\"]}");
	YES("{a: {$type: \"object\"}}", "{a: {}}");
	YES("{a: {$type: \"bool\"}}", "{a: false}");
	YES("{a: {$type: \"date\"}}", "{a: ISODate(\"2020-01-01T00:00:00Z\")}");
	YES("{a: {$type: \"objectId\"}}", "{a: ObjectId(\"5f0000000000000000000001\")}");
	YES("{a: {$type: \"regex\"}}", "{a: /x/}");
	YES("{a: {$type: \"timestamp\"}}", "{a: Timestamp(1, 2)}");
	YES("{a: {$type: \"binData\"}}", "{a: BinData(0, \"AAAA\")}");
	YES("{a: {$type: \"minKey\"}}", "{a: MinKey}");
	YES("{a: {$type: -1}}", "{a: MinKey}");
	YES("{a: {$type: 127}}", "{a: MaxKey}");
	NO("{a: {$type: \"maxKey\"}}", "{a: MinKey}");
	YES("{a: {$type: [\"string\", \"int\"]}}", "{a: 5}");
	NO("{a: {$type: [\"string\", \"int\"]}}", "{a: 5.5}");
	NO("{a: {$type: \"string\"}}", "{b: \"x\"}");
}
END_TEST

START_TEST(test_query_filter_match_mod_size)
{
	YES("{a: {$mod: [4, 0]}}", "{a: 8}");
	NO("{a: {$mod: [4, 0]}}", "{a: 7}");
	YES("{a: {$mod: [4, 3]}}", "{a: 7}");
	YES("{a: {$mod: [4, -3]}}", "{a: -7}"); /* the sign of the dividend */
	NO("{a: {$mod: [4, 1]}}", "{a: -7}");
	YES("{a: {$mod: [4, 0]}}", "{a: 8.9}"); /* truncated toward zero */
	YES("{a: {$mod: [4.5, 1]}}", "{a: 5}"); /* divisor 4 */
	YES("{a: {$mod: [4, 1.7]}}", "{a: 5}"); /* remainder 1 */
	YES("{a: {$mod: [4, 0]}}", "{a: NumberLong(12)}");
	YES("{a: {$mod: [4, 0]}}", "{a: NumberDecimal(\"16.5\")}");
	YES("{a: {$mod: [2, 1]}}", "{a: [2, 3]}");
	NO("{a: {$mod: [2, 1]}}", "{a: \"3\"}");
	NO("{a: {$mod: [2, 0]}}", "{a: NaN}");
	NO("{a: {$mod: [2, 0]}}", "{b: 1}");
	YES("{a: {$mod: [-1, 0]}}", "{a: NumberLong(\"-9223372036854775808\")}");
	YES("{a: {$size: 2}}", "{a: [1, 2]}");
	NO("{a: {$size: 2}}", "{a: [1]}");
	YES("{a: {$size: 0}}", "{a: []}");
	NO("{a: {$size: 0}}", "{b: 1}");
	NO("{a: {$size: 1}}", "{a: 5}");
	NO("{a: {$size: 2}}", "{a: [[1, 2]]}"); /* not the nested array */
	YES("{a: {$size: 1}}", "{a: [[1, 2]]}");
	YES("{a: {$size: 2.0}}", "{a: [1, 2]}");
	YES("{\"a.b\": {$size: 2}}", "{a: [{b: [1]}, {b: [1, 2]}]}");
	YES("{a: {$not: {$size: 2}}}", "{a: [1]}");
}
END_TEST

START_TEST(test_query_filter_match_regex)
{
	YES("{a: /^ab/}", "{a: \"abc\"}");
	NO("{a: /^ab/}", "{a: \"cab\"}");
	YES("{a: /^AB/i}", "{a: \"abc\"}");
	YES("{a: /b/}", "{a: [\"x\", \"abc\"]}");
	NO("{a: /1/}", "{a: 1}");
	YES("{a: /x/}", "{a: /x/}"); /* a regex matches an equal stored regex */
	NO("{a: /x/i}", "{a: /x/}");
	YES("{a: {$eq: /x/}}", "{a: /x/}"); /* $eq with a regex is equality */
	NO("{a: {$eq: /x/}}", "{a: \"x\"}");
	YES("{a: /^b$/m}", "{a: \"a\\nb\"}");
	NO("{a: /^b$/}", "{a: \"a\\nb\"}");
	YES("{a: /a.b/s}", "{a: \"a\\nb\"}");
	NO("{a: /a.b/}", "{a: \"a\\nb\"}");
	YES("{a: /a b #c/x}", "{a: \"ab\"}");
	YES("{a: /^.$/}", "{a: \"\xc3\xa9\"}"); /* UTF-8 mode: one character */
	YES("{a: {$regex: \"^ab\"}}", "{a: \"abc\"}");
	YES("{a: {$regex: /^ab/i}}", "{a: \"ABC\"}");
	YES("{a: {$not: {$regex: \"^ab\"}}}", "{a: \"xy\"}");
	ck_assert_int_eq(match_regex_op("^ab", "i", "{a: \"ABc\"}"), 1);
	ck_assert_int_eq(match_regex_op("^ab", "", "{a: \"ABc\"}"), 0);
	ck_assert_int_eq(match_regex_op("^b", "m", "{a: \"a\\nb\"}"), 1);
	ck_assert_int_eq(match_regex_op("ab", NULL, "{a: [1, \"zab\"]}"), 1);
	ck_assert_int_eq(match_regex_op("ab", NULL, "{b: \"ab\"}"), 0);
}
END_TEST

START_TEST(test_query_filter_match_all)
{
	YES("{a: {$all: [1, 2]}}", "{a: [2, 3, 1]}");
	NO("{a: {$all: [1, 2]}}", "{a: [2, 3]}");
	YES("{a: {$all: [1]}}", "{a: 1}");
	NO("{a: {$all: [1]}}", "{b: 1}");
	YES("{a: {$all: [null]}}", "{b: 1}");
	NO("{a: {$all: []}}", "{a: []}");
	NO("{a: {$all: []}}", "{a: [1]}");
	YES("{a: {$all: [[1, 2]]}}", "{a: [1, 2]}");
	YES("{a: {$all: [[1, 2]]}}", "{a: [[1, 2], 3]}");
	YES("{a: {$all: [/^x/, /y$/]}}", "{a: [\"xa\", \"by\"]}");
	NO("{a: {$all: [/^x/, /y$/]}}", "{a: [\"xa\"]}");
	YES("{\"a.b\": {$all: [1, 2]}}", "{a: [{b: 1}, {b: 2}]}");
	YES("{a: {$all: [{$elemMatch: {b: 1}}, {$elemMatch: {c: 2}}]}}", "{a: [{b: 1}, {c: 2}]}");
	NO("{a: {$all: [{$elemMatch: {b: 1}}, {$elemMatch: {c: 2}}]}}", "{a: [{b: 1}]}");
	YES("{a: {$all: [{$elemMatch: {$gt: 5}}]}}", "{a: [1, 9]}");
}
END_TEST

START_TEST(test_query_filter_match_elem_match)
{
	YES("{a: {$elemMatch: {$gte: 80, $lt: 85}}}", "{a: [82, 90]}");
	NO("{a: {$elemMatch: {$gte: 80, $lt: 85}}}", "{a: [79, 90]}");
	NO("{a: {$elemMatch: {$gte: 80}}}", "{a: 82}"); /* not an array */
	YES("{a: {$elemMatch: {b: 1, c: 2}}}", "{a: [{b: 1, c: 2}]}");
	NO("{a: {$elemMatch: {b: 1, c: 2}}}", "{a: [{b: 1}, {c: 2}]}");
	YES("{\"a.b\": 1, \"a.c\": 2}", "{a: [{b: 1}, {c: 2}]}");
	YES("{a: {$elemMatch: {b: {$gt: 1}, c: null}}}", "{a: [{b: 2}]}");
	YES("{a: {$elemMatch: {$or: [{b: 1}, {c: 1}]}}}", "{a: [{c: 1}]}");
	YES("{a: {$elemMatch: {}}}", "{a: [{x: 1}]}");
	NO("{a: {$elemMatch: {}}}", "{a: [1]}");
	NO("{a: {$elemMatch: {$eq: 1}}}", "{a: [[1]]}");
	YES("{a: {$elemMatch: {$eq: [1]}}}", "{a: [[1]]}");
	YES("{a: {$elemMatch: {$elemMatch: {$eq: 1}}}}", "{a: [[1]]}");
	YES("{a: {$elemMatch: {\"0\": 1}}}", "{a: [[1, 2]]}"); /* element arrays as documents */
	YES("{a: {$elemMatch: {$ne: 1}}}", "{a: [1, 2]}");
	NO("{a: {$elemMatch: {$ne: 1}}}", "{a: [1, 1]}");
	YES("{a: {$elemMatch: {$not: {$gt: 3}}}}", "{a: [5, 2]}");
	YES("{a: {$elemMatch: {$in: [3, 4]}}}", "{a: [1, 4]}");
	YES("{a: {$elemMatch: {$exists: true}}}", "{a: [null]}");
	YES("{a: {$elemMatch: {$type: \"string\"}}}", "{a: [1, \"s\"]}");
	YES("{a: {$elemMatch: {$regex: \"^q\"}}}", "{a: [\"x\", \"qq\"]}");
	YES("{\"a.b\": {$elemMatch: {c: 1}}}", "{a: {b: [{c: 1}]}}");
	YES("{\"a.b\": {$elemMatch: {$gt: 1}}}", "{a: [{b: [0]}, {b: [5]}]}");
	YES("{a: {$elemMatch: {b: {$elemMatch: {c: 1}}}}}", "{a: [{b: [{c: 1}]}]}");
}
END_TEST

START_TEST(test_query_filter_match_expr)
{
	YES("{$expr: {$gt: [\"$a\", \"$b\"]}}", "{a: 5, b: 3}");
	NO("{$expr: {$gt: [\"$a\", \"$b\"]}}", "{a: 1, b: 3}");
	YES("{$expr: {$eq: [\"$a\", \"$b\"]}}", "{a: 1, b: 1.0}");
	YES("{$expr: {$gt: [\"$a\", 1]}}", "{a: \"str\"}"); /* full BSON order, no brackets */
	NO("{$expr: {$eq: [\"$a\", null]}}", "{}");	    /* missing is not null here */
	YES("{$expr: {$lt: [\"$a\", null]}}", "{}");
	YES("{$expr: {$eq: [\"$a\", [1, 2]]}}", "{a: [1, 2]}");
	NO("{$expr: {$eq: [\"$a\", 1]}}", "{a: [1, 2]}"); /* no element matching */
	YES("{$expr: {$eq: [\"$a.b\", [1, 2]]}}", "{a: [{b: 1}, {c: 0}, {b: 2}]}");
	YES("{$expr: {$eq: [\"$a.b\", 3]}}", "{a: {b: 3}}");
	YES("{$expr: {$eq: [{$add: [\"$a\", \"$b\", 1]}, 6]}}", "{a: 2, b: 3}");
	YES("{$expr: {$eq: [{$subtract: [\"$a\", \"$b\"]}, -1]}}", "{a: 2, b: 3}");
	YES("{$expr: {$eq: [{$multiply: [\"$a\", 2.5]}, 5]}}", "{a: 2}");
	YES("{$expr: {$eq: [{$divide: [\"$a\", 4]}, 0.5]}}", "{a: 2}");
	YES("{$expr: {$eq: [{$mod: [\"$a\", 4]}, 3]}}", "{a: 7}");
	YES("{$expr: {$eq: [{$abs: \"$a\"}, 7]}}", "{a: -7}");
	YES("{$expr: {$eq: [{$add: [2147483647, 1]}, 2147483648]}}", "{}");
	YES("{$expr: {$eq: [{$add: [\"$a\", 1]}, null]}}", "{}");
	NO("{$expr: {$add: [\"$a\", 1]}}", "{a: \"x\"}"); /* runtime error: false */
	NO("{$expr: {$divide: [1, \"$a\"]}}", "{a: 0}");  /* division by zero */
	YES("{$expr: {$eq: [{$cmp: [\"$a\", \"$b\"]}, -1]}}", "{a: 1, b: 2}");
	YES("{$expr: {$and: [{$gt: [\"$a\", 0]}, {$lt: [\"$a\", 10]}]}}", "{a: 5}");
	YES("{$expr: {$or: [false, \"$a\"]}}", "{a: 1}");
	NO("{$expr: {$or: [false, \"$a\"]}}", "{a: 0}");
	YES("{$expr: {$not: [\"$a\"]}}", "{}");
	YES("{$expr: \"$a\"}", "{a: []}"); /* arrays are truthy */
	NO("{$expr: \"$a\"}", "{a: null}");
	YES("{$expr: {$eq: [\"$a\", {$literal: \"$b\"}]}}", "{a: \"$b\"}");
	YES("{$expr: {$eq: [\"$$ROOT.a\", 1]}}", "{a: 1}");
	YES("{$expr: {$eq: [{x: \"$a\"}, {x: 1}]}}", "{a: 1}");
	YES("{$expr: {$gt: [{$subtract: [\"$d\", \"$e\"]}, 1000]}}",
	    "{d: ISODate(\"2020-01-01T00:00:02Z\"), e: ISODate(\"2020-01-01T00:00:00Z\")}");
	YES("{$expr: {$eq: [{$add: [NumberDecimal(\"0.1\"), NumberDecimal(\"0.2\")]}, "
	    "NumberDecimal(\"0.3\")]}}",
	    "{}");
	YES("{$expr: {$eq: [\"$a.0\", []]}}", "{a: [1, 2]}"); /* no array indexes in paths */
}
END_TEST

/* ---- elem_index (positional projection's elemMatchKey) ----------------------------- */

START_TEST(test_query_filter_match_elem_index)
{
	ELEM("{a: 1}", "{a: 1}", -1);
	ELEM("{a: 3}", "{a: [1, 2, 3]}", 2);
	ELEM("{a: [1, 2]}", "{a: [1, 2]}", -1);
	ELEM("{a: [1, 2]}", "{a: [0, [1, 2]]}", 1);
	ELEM("{\"a.b\": 2}", "{a: [{b: 1}, {b: 2}]}", 1);
	ELEM("{\"a.b\": 5}", "{a: [{b: [1]}, {b: [4, 5]}]}", 1); /* the outer array */
	ELEM("{a: {$gt: 2}}", "{a: [1, 2, 3, 4]}", 2);
	ELEM("{a: {$elemMatch: {$gt: 2}}}", "{a: [1, 2, 3]}", 2);
	ELEM("{a: {$elemMatch: {b: 2}}}", "{a: [{b: 1}, {b: 2}]}", 1);
	ELEM("{\"a.b\": {$elemMatch: {$gt: 1}}}", "{a: [{b: [0]}, {b: [5]}]}", 1);
	ELEM("{\"a.1\": 6}", "{a: [5, 6]}", 1);
	ELEM("{a: {$ne: 1}}", "{a: [2, 3]}", -1);
	ELEM("{$or: [{a: 9}, {b: 2}]}", "{a: [1], b: [1, 2]}", 1);
	ELEM("{x: 1, a: 3}", "{x: 1, a: [1, 2, 3]}", 2);
	ELEM("{a: {$size: 2}}", "{a: [1, 2]}", -1);
	ELEM("{a: {$in: [7, 8]}}", "{a: [1, 8]}", 1);
	ELEM("{a: /z/}", "{a: [\"a\", \"z\"]}", 1);
	ELEM("{a: {$exists: true}}", "{a: [1]}", 0);
}
END_TEST

/* ---- parse errors ------------------------------------------------------------------ */

START_TEST(test_query_filter_parse_errors)
{
	PERR("{age: {$gtx: 1}}", "unknown operator '$gtx' at 'age'");
	PERR("{a: {$gt: 1, b: 2}}", "unknown operator 'b' at 'a'");
	PERR("{tags: {$in: 5}}", "$in needs an array at 'tags'");
	PERR("{tags: {$nin: {}}}", "$nin needs an array at 'tags'");
	PERR("{name: /a(/}",
	     "$regex has an invalid pattern at 'name': missing closing parenthesis");
	PERR("{name: {$regex: \"[\"}}",
	     "$regex has an invalid pattern at 'name': missing terminating ] for character class");
	PERR("{$and: []}", "$and needs a non-empty array");
	PERR("{$or: []}", "$or needs a non-empty array");
	PERR("{$nor: 5}", "$nor needs a non-empty array");
	PERR("{$or: [1]}", "$or needs an array of documents");
	PERR("{a: {$size: 1.5}}", "$size needs a whole number at 'a'");
	PERR("{a: {$size: \"2\"}}", "$size needs a whole number at 'a'");
	PERR("{a: {$size: -1}}", "$size needs a non-negative number at 'a'");
	PERR("{$nor: [{$text: {$search: \"x\"}}]}", "text expression not allowed in nor");
	PERR("{$where: \"this.a\"}", "$where is not supported");
	PERR("{$foo: 1}", "unknown top level operator '$foo'");
	PERR("{a: {$mod: [0, 1]}}", "$mod divisor cannot be 0 at 'a'");
	PERR("{a: {$mod: [0.5, 1]}}", "$mod divisor cannot be 0 at 'a'");
	PERR("{a: {$mod: [1]}}", "$mod needs an array [divisor, remainder] of 2 elements at 'a'");
	PERR("{a: {$mod: 4}}", "$mod needs an array [divisor, remainder] at 'a'");
	PERR("{a: {$mod: [\"x\", 1]}}", "$mod needs numbers at 'a'");
	PERR("{a: {$mod: [NaN, 1]}}", "$mod needs finite numbers within the 64-bit range at 'a'");
	PERR("{a: {$type: \"strin\"}}", "unknown type name 'strin' for $type at 'a'");
	PERR("{a: {$type: 99}}", "invalid type code 99 for $type at 'a'");
	PERR("{a: {$type: []}}", "$type needs at least one type at 'a'");
	PERR("{a: {$all: 1}}", "$all needs an array at 'a'");
	PERR("{a: {$all: [{$gt: 1}]}}",
	     "$all cannot contain operators other than $elemMatch at 'a'");
	PERR("{a: {$elemMatch: 1}}", "$elemMatch needs an object at 'a'");
	PERR("{a: {$elemMatch: {b: {$foo: 1}}}}", "unknown operator '$foo' at 'a.b'");
	PERR("{a: {$elemMatch: {$foo: 1}}}", "unknown operator '$foo' at 'a'");
	PERR("{a: {$not: 1}}", "$not needs a regex or a document at 'a'");
	PERR("{a: {$not: {}}}", "$not cannot be empty at 'a'");
	PERR("{a: {$not: {b: 1}}}", "unknown operator 'b' at 'a'");
	PERR("{a: {$options: \"i\"}}", "$options needs a $regex at 'a'");
	PERR("{a: {$regex: 5}}", "$regex needs a string or a regex at 'a'");
	PERR("{a: {$near: [1, 2]}}", "$near is not supported at 'a'");
	PERR("{a: {$bitsAllSet: 1}}", "$bitsAllSet is not supported at 'a'");
	PERR("{a: {$in: [{$gt: 1}]}}", "$in cannot contain an operator at 'a'");
	PERR("{a: {$ne: /x/}}", "$ne cannot take a regex at 'a' (use $not)");
	PERR("{a: {$eq: undefined}}", "$eq cannot compare to undefined at 'a'");
	PERR("{$expr: {$foo: 1}}", "unknown expression operator '$foo' in $expr");
	PERR("{$expr: {$eq: [1]}}", "$eq takes exactly 2 arguments in $expr");
	PERR("{$expr: \"$$x\"}", "unknown variable '$$x' in $expr");
	PERR("{$expr: {$eq: [1, 2], $ne: [1, 2]}}",
	     "an expression operator must be alone in its object in $expr ('$eq')");
	PERR("{$alwaysTrue: 2}", "$alwaysTrue needs the value 1");
	PERR("{a: undefined}", "cannot compare to undefined at 'a'");
	PERR("{a: {$in: [undefined]}}", "$in cannot compare to undefined at 'a'");
	PERR("{a: {$all: [1, {$elemMatch: {b: 1}}]}}",
	     "$all cannot mix $elemMatch and values at 'a'");
}
END_TEST

START_TEST(test_query_filter_parse_regex_options_conflict)
{
	struct query_expr *e = NULL;
	struct dfs_err err = {0};
	bson_t f, sub;

	bson_init(&f);
	bson_append_document_begin(&f, "a", -1, &sub);
	bson_append_regex(&sub, "$regex", -1, "x", "i");
	bson_append_utf8(&sub, "$options", -1, "m", -1);
	bson_append_document_end(&f, &sub);
	ck_assert_int_eq(query_filter_parse(&f, &e, &err), DFS_EINVAL);
	ck_assert_str_eq(err.msg, "options set in both $regex and $options at 'a'");
	ck_assert_ptr_null(e);
	bson_destroy(&f);

	dfs_err_clear(&err);
	bson_init(&f);
	bson_append_document_begin(&f, "a", -1, &sub);
	bson_append_utf8(&sub, "$regex", -1, "x", -1);
	bson_append_utf8(&sub, "$options", -1, "iq", -1);
	bson_append_document_end(&f, &sub);
	ck_assert_int_eq(query_filter_parse(&f, &e, &err), DFS_EINVAL);
	ck_assert_str_eq(err.msg, "invalid flag 'q' in $options at 'a'");
	bson_destroy(&f);
}
END_TEST

/* ---- describe ---------------------------------------------------------------------- */

START_TEST(test_query_filter_describe_shape)
{
	DESCRIBE("{}", "{}");
	DESCRIBE("{a: 1}", "{\"a\": {\"$eq\": 1}}");
	DESCRIBE("{b: 1, a: {$gt: 2}}",
		 "{\"$and\": [{\"b\": {\"$eq\": 1}}, {\"a\": {\"$gt\": 2}}]}");
	DESCRIBE("{a: {$ne: 1}}", "{\"a\": {\"$not\": {\"$eq\": 1}}}");
	DESCRIBE("{a: {$in: [3, 1, 2]}}", "{\"a\": {\"$in\": [1, 2, 3]}}");
	DESCRIBE("{$and: [{$and: [{a: 1}]}, {b: 2}]}",
		 "{\"$and\": [{\"a\": {\"$eq\": 1}}, {\"b\": {\"$eq\": 2}}]}");
	DESCRIBE("{$or: [{a: 1}]}", "{\"a\": {\"$eq\": 1}}");
	DESCRIBE("{a: {$exists: false}}", "{\"a\": {\"$not\": {\"$exists\": true}}}");
	DESCRIBE("{a: /x/i}", "{\"a\": {\"$regex\": \"x\", \"$options\": \"i\"}}");
	DESCRIBE("{a: {$elemMatch: {$gt: 1}}}", "{\"a\": {\"$elemMatch\": {\"$gt\": 1}}}");
	DESCRIBE("{$nor: [{a: 1}]}", "{\"$nor\": [{\"a\": {\"$eq\": 1}}]}");
}
END_TEST

START_TEST(test_query_filter_match_thread_shared_tree)
{
	/* one tree, many documents: the regex match data is reused, nothing leaks */
	struct query_expr *e = NULL;
	struct dfs_err err = {0};
	bson_t f, d;
	int i, n = 0;

	parse_text("{a: /^x\\d+$/, b: {$in: [1, 2, 3]}}", &f);
	ck_assert_int_eq(query_filter_parse(&f, &e, &err), 0);
	for (i = 0; i < 1000; i++) {
		char text[64];

		snprintf(text, sizeof(text), "{a: \"x%d\", b: %d}", i, i % 5);
		parse_text(text, &d);
		n += query_filter_match(e, &d, NULL);
		bson_destroy(&d);
	}
	ck_assert_int_eq(n, 600);
	query_expr_free(e);
	bson_destroy(&f);
}
END_TEST

struct thread_arg {
	const struct query_expr *e; /* Borrowed: shared by every thread */
	int matched;		    /* out */
};

static void *match_thread(void *p)
{
	struct thread_arg *a = p;
	struct dfs_err err = {0};
	bson_t d;
	int i;

	for (i = 0; i < 2000; i++) {
		char text[64];

		snprintf(text, sizeof(text), "{a: \"x%d\", b: [%d, 9]}", i, i % 4);
		bson_init(&d);
		if (store_codec_parse_doc(text, strlen(text), &d, &err) == 0)
			a->matched += query_filter_match(a->e, &d, NULL);
		bson_destroy(&d);
	}
	return NULL;
}

START_TEST(test_query_filter_match_threads)
{
	struct thread_arg args[4];
	pthread_t th[4];
	struct query_expr *e = NULL;
	struct dfs_err err = {0};
	bson_t f;
	int i;

	parse_text("{a: {$regex: \"^x1\"}, b: {$elemMatch: {$lt: 2}}}", &f);
	ck_assert_int_eq(query_filter_parse(&f, &e, &err), 0);
	for (i = 0; i < 4; i++) {
		args[i].e = e;
		args[i].matched = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, match_thread, &args[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		/* "x1", "x10".."x19", "x100".."x199", "x1000".."x1999" with i % 4 < 2 */
		ck_assert_int_eq(args[i].matched, 555);
	}
	query_expr_free(e);
	bson_destroy(&f);
}
END_TEST

static Suite *query_match_suite(void)
{
	Suite *s = suite_create("query_match");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_query_filter_match_equality);
	tcase_add_test(tc, test_query_filter_match_embedded_documents);
	tcase_add_test(tc, test_query_filter_match_arrays);
	tcase_add_test(tc, test_query_filter_match_null_and_missing);
	tcase_add_test(tc, test_query_filter_match_comparisons);
	tcase_add_test(tc, test_query_filter_match_ne_in_nin);
	tcase_add_test(tc, test_query_filter_match_logical);
	tcase_add_test(tc, test_query_filter_match_exists_type);
	tcase_add_test(tc, test_query_filter_match_mod_size);
	tcase_add_test(tc, test_query_filter_match_regex);
	tcase_add_test(tc, test_query_filter_match_all);
	tcase_add_test(tc, test_query_filter_match_elem_match);
	tcase_add_test(tc, test_query_filter_match_expr);
	tcase_add_test(tc, test_query_filter_match_elem_index);
	tcase_add_test(tc, test_query_filter_parse_errors);
	tcase_add_test(tc, test_query_filter_parse_regex_options_conflict);
	tcase_add_test(tc, test_query_filter_describe_shape);
	tcase_add_test(tc, test_query_filter_match_thread_shared_tree);
	tcase_add_test(tc, test_query_filter_match_threads);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(query_match_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
