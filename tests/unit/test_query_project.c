/*
 * test_query_project.c - unit tests of project.c (find() projections) and sort.c (sort
 * keys). Projection cases follow the manual's "Project Fields to Return from Query" page
 * and the $, $elemMatch and $slice projection operator pages, errors included. The sort
 * tests check concrete orders from the manual's "Comparison/Sort Order" page, then a
 * property test: random documents sorted by memcmp of their keys must come out in the
 * order of a direct comparator written here from the manual's rules. The PRNG seed is
 * fixed; set DOCFS_SEED to try others (failures print the seed).
 */
#include "query.h"

#include <check.h>

#include "test_rand.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ----------------------------------------------------------------------- */

static void parse(const char *text, bson_t *out)
{
	struct dfs_err err = {0};

	bson_init(out);
	if (store_codec_parse_doc(text, strlen(text), out, &err))
		ck_abort_msg("bad test document %s: %s", text, err.msg);
}

static char *render(const bson_t *b)
{
	struct dfs_buf buf;
	struct dfs_err err = {0};
	char *s;

	dfs_buf_init(&buf);
	store_codec_render(b, STORE_RENDER_COMPACT, &buf, &err);
	s = strdup(buf.data ? buf.data : "");
	dfs_buf_release(&buf);
	return s;
}

/* Projects doc with spec (elem_index for '$') and checks the result is byte-identical to
 * expect (field order and number types included). */
static void proj_ok(const char *spec, const char *doc, int elem_index, const char *expect)
{
	bson_t s, d, e, out;
	struct query_proj *p = NULL;
	struct dfs_err err = {0};

	parse(spec, &s);
	parse(doc, &d);
	parse(expect, &e);
	if (query_proj_parse(&s, &p, &err))
		ck_abort_msg("projection %s: parse failed: %s", spec, err.msg);
	bson_init(&out);
	if (query_proj_apply(p, &d, elem_index, &out, &err))
		ck_abort_msg("projection %s of %s: failed: %s", spec, doc, err.msg);
	if (!bson_equal(&out, &e)) {
		char *got = render(&out);

		ck_abort_msg("projection %s of %s: got %s, want %s", spec, doc, got, expect);
	}
	bson_destroy(&out);
	bson_destroy(&s);
	bson_destroy(&d);
	bson_destroy(&e);
	query_proj_free(p);
}

/* Parsing spec fails with DFS_EINVAL and a message containing msg. */
static void proj_bad(const char *spec, const char *msg)
{
	bson_t s;
	struct query_proj *p = NULL;
	struct dfs_err err = {0};
	int rc;

	parse(spec, &s);
	rc = query_proj_parse(&s, &p, &err);
	ck_assert_msg(rc == DFS_EINVAL, "projection %s: rc %d, want DFS_EINVAL", spec, rc);
	ck_assert_ptr_null(p);
	ck_assert_msg(strstr(err.msg, msg), "projection %s: message '%s' lacks '%s'", spec, err.msg,
		      msg);
	bson_destroy(&s);
}

/* Parsing works, applying to doc fails with a message containing msg (out left empty). */
static void proj_apply_bad(const char *spec, const char *doc, int elem_index, const char *msg)
{
	bson_t s, d, out;
	struct query_proj *p = NULL;
	struct dfs_err err = {0};
	int rc;

	parse(spec, &s);
	parse(doc, &d);
	ck_assert_int_eq(query_proj_parse(&s, &p, &err), 0);
	bson_init(&out);
	rc = query_proj_apply(p, &d, elem_index, &out, &err);
	ck_assert_msg(rc == DFS_EINVAL, "projection %s of %s: rc %d", spec, doc, rc);
	ck_assert_msg(strstr(err.msg, msg), "message '%s' lacks '%s'", err.msg, msg);
	ck_assert_uint_eq(bson_count_keys(&out), 0);
	bson_destroy(&out);
	bson_destroy(&s);
	bson_destroy(&d);
	query_proj_free(p);
}

/* ---- projection: inclusion, exclusion, _id ----------------------------------------- */

START_TEST(test_query_proj_apply_inclusion)
{
	const char *doc = "{_id: 1, item: 'journal', status: 'A', size: {h: 14, w: 21}, qty: 5}";

	proj_ok("{item: 1, status: 1}", doc, -1, "{_id: 1, item: 'journal', status: 'A'}");
	/* any true value includes: true, non-zero numbers of every type */
	proj_ok("{item: true, status: -1}", doc, -1, "{_id: 1, item: 'journal', status: 'A'}");
	proj_ok("{item: 0.5, status: NumberLong(3)}", doc, -1,
		"{_id: 1, item: 'journal', status: 'A'}");
	proj_ok("{item: NumberDecimal('1'), qty: 1}", doc, -1, "{_id: 1, item: 'journal', qty: 5}");
	/* the output follows the document's order, not the projection's */
	proj_ok("{qty: 1, item: 1}", doc, -1, "{_id: 1, item: 'journal', qty: 5}");
	/* fields that do not exist are not created */
	proj_ok("{nothere: 1, qty: 1}", doc, -1, "{_id: 1, qty: 5}");
	/* _id comes first when present */
	proj_ok("{a: 1}", "{a: 1, _id: 2, b: 3}", -1, "{_id: 2, a: 1}");
	proj_ok("{a: 1}", "{b: 1}", -1, "{}");
}
END_TEST

START_TEST(test_query_proj_apply_id)
{
	const char *doc = "{_id: 1, item: 'journal', status: 'A', qty: 5}";

	proj_ok("{item: 1, _id: 0}", doc, -1, "{item: 'journal'}");
	proj_ok("{_id: 0, item: 1}", doc, -1, "{item: 'journal'}");
	proj_ok("{_id: false, item: true}", doc, -1, "{item: 'journal'}");
	proj_ok("{_id: 0}", doc, -1, "{item: 'journal', status: 'A', qty: 5}");
	proj_ok("{_id: 1}", doc, -1, "{_id: 1}");
	proj_ok("{_id: 1, item: 1}", doc, -1, "{_id: 1, item: 'journal'}");
	proj_ok("{_id: 1, item: 0}", doc, -1, "{_id: 1, status: 'A', qty: 5}");
	proj_ok("{_id: 0, item: 0}", doc, -1, "{status: 'A', qty: 5}");
	/* an _id that is a document, with a sub-path */
	proj_ok("{'_id.x': 1}", "{_id: {x: 1, y: 2}, a: 1}", -1, "{_id: {x: 1}}");
}
END_TEST

START_TEST(test_query_proj_apply_exclusion)
{
	const char *doc = "{_id: 1, item: 'journal', status: 'A', size: {h: 14, w: 21}, qty: 5}";

	proj_ok("{status: 0, qty: 0}", doc, -1, "{_id: 1, item: 'journal', size: {h: 14, w: 21}}");
	proj_ok("{status: false}", doc, -1,
		"{_id: 1, item: 'journal', size: {h: 14, w: 21}, qty: 5}");
	proj_ok("{status: NumberLong(0), qty: 0.0}", doc, -1,
		"{_id: 1, item: 'journal', size: {h: 14, w: 21}}");
	proj_ok("{nothere: 0}", doc, -1, doc);
	proj_ok("{}", doc, -1, doc);
}
END_TEST

START_TEST(test_query_proj_parse_mixed)
{
	proj_bad("{a: 1, b: 0}", "cannot do exclusion on field 'b' in inclusion projection");
	proj_bad("{a: 0, b: 1}", "cannot do inclusion on field 'b' in exclusion projection");
	proj_bad("{a: 0, 'b.c': true}", "cannot do inclusion on field 'b.c' in exclusion");
	proj_bad("{'a.b': 1, 'a.c': 0}", "cannot do exclusion on field 'a.c'");
	proj_bad("{a: 0, 'b.$': 1}", "cannot do inclusion on field 'b.$' in exclusion projection");
	proj_bad("{a: 0, b: {$elemMatch: {x: 1}}}", "in exclusion projection");
}
END_TEST

/* ---- projection: dotted paths ------------------------------------------------------ */

START_TEST(test_query_proj_apply_dotted)
{
	proj_ok("{'a.b': 1}", "{_id: 1, a: {b: 1, c: 2}, d: 3}", -1, "{_id: 1, a: {b: 1}}");
	/* nested form, as 4.4+ accepts */
	proj_ok("{a: {b: 1}}", "{_id: 1, a: {b: 1, c: 2}, d: 3}", -1, "{_id: 1, a: {b: 1}}");
	proj_ok("{a: {b: {c: 1}}, d: 1}", "{_id: 1, a: {b: {c: 1, x: 1}, c: 2}, d: 3}", -1,
		"{_id: 1, a: {b: {c: 1}}, d: 3}");
	/* the manual's embedded document example */
	proj_ok("{item: 1, status: 1, 'size.uom': 1}",
		"{_id: 1, item: 'journal', status: 'A', size: {h: 14, w: 21, uom: 'cm'}}", -1,
		"{_id: 1, item: 'journal', status: 'A', size: {uom: 'cm'}}");
	proj_ok("{'size.uom': 0}",
		"{_id: 1, item: 'journal', status: 'A', size: {h: 14, w: 21, uom: 'cm'}}", -1,
		"{_id: 1, item: 'journal', status: 'A', size: {h: 14, w: 21}}");
	/* through arrays of documents; non-documents dropped, nested arrays walked */
	proj_ok("{'a.b': 1}", "{_id: 1, a: [{b: 1, c: 2}, {b: 3}]}", -1,
		"{_id: 1, a: [{b: 1}, {b: 3}]}");
	proj_ok("{'a.b': 1}", "{_id: 1, a: [{b: 1, c: 2}, 5, 'x', [{b: 4, c: 5}, 6], {c: 1}]}", -1,
		"{_id: 1, a: [{b: 1}, [{b: 4}], {}]}");
	proj_ok("{'instock.qty': 1, _id: 0}",
		"{_id: 5, item: 'postcard', instock: [{warehouse: 'B', qty: 15}, "
		"{warehouse: 'C', qty: 35}]}",
		-1, "{instock: [{qty: 15}, {qty: 35}]}");
	/* a scalar where the path goes on is dropped; a document keeps its (empty) self */
	proj_ok("{'a.b': 1}", "{_id: 1, a: 5}", -1, "{_id: 1}");
	proj_ok("{'a.b': 1}", "{_id: 1, a: {c: 1}}", -1, "{_id: 1, a: {}}");
	proj_ok("{'a.b.c': 1}", "{_id: 1, a: [{b: [{c: 1, d: 1}, {d: 2}]}, {b: {c: 3, e: 4}}]}", -1,
		"{_id: 1, a: [{b: [{c: 1}, {}]}, {b: {c: 3}}]}");
	proj_ok("{'a.b': 1, 'a.c': 1}", "{_id: 1, a: {c: 1, d: 2, b: 3}}", -1,
		"{_id: 1, a: {c: 1, b: 3}}");
	/* exclusion through arrays keeps everything else in place */
	proj_ok("{'a.b': 0}", "{_id: 1, a: [{b: 1, c: 2}, 5, [{b: 4, c: 5}], {c: 1}]}", -1,
		"{_id: 1, a: [{c: 2}, 5, [{c: 5}], {c: 1}]}");
	proj_ok("{'a.b': 0}", "{_id: 1, a: 5}", -1, "{_id: 1, a: 5}");
	proj_ok("{'a.b.c': 0, 'a.d': 0}", "{_id: 1, a: {b: {c: 1, x: 2}, d: 3, e: 4}}", -1,
		"{_id: 1, a: {b: {x: 2}, e: 4}}");
	/* numeric components are field names in projections */
	proj_ok("{'a.0': 1}", "{_id: 1, a: [{'0': 1, x: 2}, 7], b: {'0': 3}}", -1,
		"{_id: 1, a: [{'0': 1}]}");
}
END_TEST

START_TEST(test_query_proj_parse_collision)
{
	proj_bad("{a: 1, 'a.b': 1}", "path collision at a.b");
	proj_bad("{'a.b': 1, a: 1}", "path collision at a.b");
	proj_bad("{'a.b.c': 0, 'a.b': 0}", "path collision at a.b.c");
	proj_bad("{a: {$slice: 1}, 'a.b': 1}", "path collision at a.b");
	proj_bad("{'a.$': 1, a: 1}", "path collision");
	proj_bad("{a: 1, a: 0}", "path collision at a");
	proj_bad("{a: {b: 1}, 'a.b': 1}", "path collision at a.b");
	/* siblings do not collide */
	proj_ok("{'a.b': 1, 'a.c': 1, ab: 1}", "{_id: 1, a: {b: 1, c: 2, d: 3}, ab: 4}", -1,
		"{_id: 1, a: {b: 1, c: 2}, ab: 4}");
}
END_TEST

START_TEST(test_query_proj_parse_bad)
{
	proj_bad("{a: 'x'}", "unsupported projection value at 'a'");
	proj_bad("{a: null}", "unsupported projection value at 'a'");
	proj_bad("{a: {$meta: 'indexKey'}}", "unsupported $meta at 'a'");
	proj_bad("{'a.b': {$meta: 'textScore'}}", "only top-level fields");
	proj_bad("{a: {$literal: 1}}", "unsupported projection operator '$literal'");
	proj_bad("{a: {}}", "empty sub-projection");
	proj_bad("{a: {$slice: 1, $elemMatch: {}}}", "exactly one field");
	proj_bad("{'$a': 1}", "starting with '$'");
	proj_bad("{'a.$b': 1}", "starting with '$'");
	proj_bad("{'a..b': 1}", "empty component");
	proj_bad("{'': 1}", "must not be empty");
	proj_bad("{'a.': 1}", "empty component");
}
END_TEST

/* ---- projection: $slice ------------------------------------------------------------ */

START_TEST(test_query_proj_apply_slice)
{
	const char *doc = "{_id: 1, a: [1, 2, 3, 4, 5], b: 'x'}";

	/* alone, $slice keeps the other fields (exclusion-style) */
	proj_ok("{a: {$slice: 2}}", doc, -1, "{_id: 1, a: [1, 2], b: 'x'}");
	proj_ok("{a: {$slice: -2}}", doc, -1, "{_id: 1, a: [4, 5], b: 'x'}");
	proj_ok("{a: {$slice: 0}}", doc, -1, "{_id: 1, a: [], b: 'x'}");
	proj_ok("{a: {$slice: 10}}", doc, -1, doc);
	proj_ok("{a: {$slice: -10}}", doc, -1, doc);
	proj_ok("{a: {$slice: NumberLong(1)}}", doc, -1, "{_id: 1, a: [1], b: 'x'}");
	proj_ok("{a: {$slice: 2.7}}", doc, -1, "{_id: 1, a: [1, 2], b: 'x'}");
	proj_ok("{a: {$slice: [1, 2]}}", doc, -1, "{_id: 1, a: [2, 3], b: 'x'}");
	proj_ok("{a: {$slice: [3, 10]}}", doc, -1, "{_id: 1, a: [4, 5], b: 'x'}");
	proj_ok("{a: {$slice: [10, 2]}}", doc, -1, "{_id: 1, a: [], b: 'x'}");
	proj_ok("{a: {$slice: [-2, 1]}}", doc, -1, "{_id: 1, a: [4], b: 'x'}");
	proj_ok("{a: {$slice: [-3, 2]}}", doc, -1, "{_id: 1, a: [3, 4], b: 'x'}");
	proj_ok("{a: {$slice: [-10, 2]}}", doc, -1, "{_id: 1, a: [1, 2], b: 'x'}");
	/* a non-array is returned as it is */
	proj_ok("{b: {$slice: 1}}", doc, -1, doc);
	proj_ok("{c: {$slice: 1}}", doc, -1, doc);
	/* with exclusions */
	proj_ok("{a: {$slice: 1}, b: 0}", doc, -1, "{_id: 1, a: [1]}");
	proj_ok("{_id: 0, a: {$slice: -1}}", doc, -1, "{a: [5], b: 'x'}");
	/* with inclusions: only the included fields, in document order */
	proj_ok("{b: 1, a: {$slice: 1}}", doc, -1, "{_id: 1, a: [1], b: 'x'}");
	proj_ok("{_id: 1, a: {$slice: 1}}", doc, -1, "{_id: 1, a: [1]}");
	/* the manual's embedded array: 4.4+ drops the other fields of details in inclusion */
	proj_ok("{qty: 1, 'details.colors': {$slice: 1}}",
		"{_id: 1, item: 'socks', qty: 100, details: {colors: ['blue', 'red'], "
		"sizes: ['S', 'M', 'L']}}",
		-1, "{_id: 1, qty: 100, details: {colors: ['blue']}}");
	proj_ok("{'details.colors': {$slice: 1}}",
		"{_id: 1, item: 'socks', qty: 100, details: {colors: ['blue', 'red'], "
		"sizes: ['S', 'M', 'L']}}",
		-1,
		"{_id: 1, item: 'socks', qty: 100, details: {colors: ['blue'], "
		"sizes: ['S', 'M', 'L']}}");
	/* through an array of documents */
	proj_ok("{'a.b': {$slice: -1}}", "{_id: 1, a: [{b: [1, 2], c: 1}, {b: 3}, 4]}", -1,
		"{_id: 1, a: [{b: [2], c: 1}, {b: 3}, 4]}");
	/* argument errors */
	proj_bad("{a: {$slice: 'x'}}", "$slice at 'a' takes a number or an array");
	proj_bad("{a: {$slice: [1]}}", "$slice at 'a' takes a number or an array");
	proj_bad("{a: {$slice: [1, 2, 3]}}", "$slice at 'a' takes a number or an array");
	proj_bad("{a: {$slice: [1, 0]}}", "$slice limit must be positive at 'a'");
	proj_bad("{a: {$slice: [1, -1]}}", "$slice limit must be positive");
}
END_TEST

/* ---- projection: $elemMatch -------------------------------------------------------- */

START_TEST(test_query_proj_apply_elemmatch)
{
	const char *d1 = "{_id: 1, zipcode: '63109', students: [{name: 'john', school: 102, "
			 "age: 10}, {name: 'jess', school: 102, age: 11}, {name: 'jeff', "
			 "school: 108, age: 15}]}";
	const char *d3 = "{_id: 3, zipcode: '63109', students: [{name: 'ajax', school: 100, "
			 "age: 7}, {name: 'achilles', school: 100, age: 8}]}";

	/* the manual's school example: the first match, as an array of one */
	proj_ok("{students: {$elemMatch: {school: 102}}}", d1, -1,
		"{_id: 1, students: [{name: 'john', school: 102, age: 10}]}");
	proj_ok("{students: {$elemMatch: {school: 102}}}", d3, -1, "{_id: 3}");
	proj_ok("{students: {$elemMatch: {school: 102, age: {$gt: 10}}}}", d1, -1,
		"{_id: 1, students: [{name: 'jess', school: 102, age: 11}]}");
	proj_ok("{_id: 0, students: {$elemMatch: {age: {$gte: 15}}}}", d1, -1,
		"{students: [{name: 'jeff', school: 108, age: 15}]}");
	/* the manual's field order note: after the other included fields */
	proj_ok("{games: {$elemMatch: {score: {$gt: 5}}}, joined: 1, lastLogin: 1}",
		"{_id: 7, name: 'player1', games: [{game: 'abc', score: 8}, {game: 'xyz', "
		"score: 5}], joined: 1, lastLogin: 2}",
		-1, "{_id: 7, joined: 1, lastLogin: 2, games: [{game: 'abc', score: 8}]}");
	/* scalar elements */
	proj_ok("{a: {$elemMatch: {$gt: 2}}}", "{_id: 1, a: [1, 5, 3], b: 1}", -1,
		"{_id: 1, a: [5]}");
	/* not an array, or missing: omitted */
	proj_ok("{a: {$elemMatch: {$gt: 2}}, b: 1}", "{_id: 1, a: 5, b: 1}", -1, "{_id: 1, b: 1}");
	proj_ok("{a: {$elemMatch: {$gt: 2}}}", "{_id: 1}", -1, "{_id: 1}");
	proj_bad("{'a.b': {$elemMatch: {x: 1}}}", "cannot use $elemMatch projection on a nested");
	proj_bad("{a: {$elemMatch: 1}}", "$elemMatch at 'a' needs an object");
	proj_bad("{a: {$elemMatch: {x: 1}}, 'b.$': 1}", "positional projection and $elemMatch");
}
END_TEST

/* ---- projection: positional ------------------------------------------------------- */

START_TEST(test_query_proj_apply_positional)
{
	/* the manual's students example: {semester: 1, grades: {$gte: 85}} matched at 1 */
	proj_ok("{'grades.$': 1}", "{_id: 1, semester: 1, grades: [70, 87, 90]}", 1,
		"{_id: 1, grades: [87]}");
	proj_ok("{'grades.$': true, semester: 1, _id: 0}",
		"{_id: 1, semester: 1, grades: [70, 87, 90]}", 2, "{semester: 1, grades: [90]}");
	/* the first array along the path is cut */
	proj_ok("{'a.b.$': 1}", "{_id: 1, a: [{b: 1, c: 1}, {b: 2, c: 2}]}", 1,
		"{_id: 1, a: [{b: 2}]}");
	proj_ok("{'a.b.$': 1}", "{_id: 1, a: {b: [5, 6, 7], c: 1}}", 2, "{_id: 1, a: {b: [7]}}");
	/* no array on the path: the value as it is */
	proj_ok("{'a.$': 1}", "{_id: 1, a: 5}", 0, "{_id: 1, a: 5}");
	proj_ok("{'a.$': 1}", "{_id: 1, b: 5}", 0, "{_id: 1}");
	proj_apply_bad("{'a.$': 1}", "{_id: 1, a: [1, 2]}", -1,
		       "positional operator '.$' needs a matching array element in the filter");
	proj_apply_bad("{'a.$': 1}", "{_id: 1, a: [1, 2]}", 5, "element mismatch");
	proj_bad("{'a.$': 1, 'b.$': 1}", "more than one positional");
	proj_bad("{'a.$.b': 1}", "'.$' must be at the end of the path");
	proj_bad("{'a.$': 0}", "must be an inclusion");
	proj_bad("{'a.$': {$slice: 1}}", "must be an inclusion");
	proj_bad("{'$': 1}", "starting with '$'");
}
END_TEST

/* ---- sort: parsing and concrete orders ---------------------------------------------- */

static struct query_sort *sort_new(const char *spec)
{
	bson_t s;
	struct query_sort *q = NULL;
	struct dfs_err err = {0};

	parse(spec, &s);
	if (query_sort_parse(&s, &q, &err))
		ck_abort_msg("sort %s: %s", spec, err.msg);
	bson_destroy(&s);
	return q;
}

static void sort_bad(const char *spec, const char *msg)
{
	bson_t s;
	struct query_sort *q = NULL;
	struct dfs_err err = {0};

	parse(spec, &s);
	ck_assert_int_eq(query_sort_parse(&s, &q, &err), DFS_EINVAL);
	ck_assert_ptr_null(q);
	ck_assert_msg(strstr(err.msg, msg), "sort %s: message '%s' lacks '%s'", spec, err.msg, msg);
	bson_destroy(&s);
}

struct keyed {
	struct dfs_buf key;
	bson_t *doc; /* Owned (a pointer: qsort moves these, and a bson_t cannot move) */
	int id;	     /* position of the document in the test's input */
};

static int keyed_cmp(const void *pa, const void *pb)
{
	const struct keyed *a = pa, *b = pb;
	size_t n = a->key.len < b->key.len ? a->key.len : b->key.len;
	int c = n ? memcmp(a->key.data, b->key.data, n) : 0;

	if (c)
		return c;
	return a->key.len < b->key.len ? -1 : a->key.len > b->key.len;
}

/* Sorts the documents (text, NULL-terminated list) by their keys and checks the _id order
 * (expect: the _id values as integers, in order). */
static void sort_order(const char *spec, const char *const *docs, const int *expect)
{
	struct query_sort *q = sort_new(spec);
	struct keyed k[32];
	struct dfs_err err = {0};
	size_t n, i;
	char got[256] = "", want[256] = "";

	for (n = 0; docs[n]; n++) {
		bson_iter_t it;
		bson_t tmp;

		parse(docs[n], &tmp);
		k[n].doc = bson_copy(&tmp);
		bson_destroy(&tmp);
		dfs_buf_init(&k[n].key);
		ck_assert_int_eq(query_sort_key(q, k[n].doc, &k[n].key, &err), 0);
		ck_assert(bson_iter_init_find(&it, k[n].doc, "_id"));
		k[n].id = bson_iter_int32(&it);
	}
	qsort(k, n, sizeof(k[0]), keyed_cmp);
	for (i = 0; i < n; i++) {
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%d ", k[i].id);
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "%d ", expect[i]);
		dfs_buf_release(&k[i].key);
		bson_destroy(k[i].doc);
	}
	ck_assert_msg(strcmp(got, want) == 0, "sort %s: got %s, want %s", spec, got, want);
	query_sort_free(q);
}

START_TEST(test_query_sort_parse_values)
{
	struct query_sort *q;

	query_sort_free(sort_new("{a: 1}"));
	query_sort_free(sort_new("{a: -1, 'b.c': 1.0, d: -1.0, e: NumberLong(-1)}"));
	query_sort_free(sort_new("{a: NumberLong(1), b: NumberDecimal('-1')}"));
	q = sort_new("{}");
	query_sort_free(q);
	sort_bad("{a: 2}", "bad sort value for 'a': 2");
	sort_bad("{a: 0}", "bad sort value for 'a'");
	sort_bad("{a: 'asc'}", "bad sort value for 'a'");
	sort_bad("{a: 1.5}", "bad sort value for 'a'");
	sort_bad("{a: true}", "bad sort value for 'a'");
	sort_bad("{a: {$meta: 'searchScore'}}", "unsupported $meta sort at 'a'");
	sort_bad("{'a..b': 1}", "empty path component");
	sort_bad("{'$a': 1}", "starting with '$'");
	query_sort_free(NULL);
}
END_TEST

START_TEST(test_query_sort_key_empty_spec)
{
	/* no fields: the key is the _id alone (natural order is the caller's business) */
	static const char *const docs[] = {"{_id: 3, a: 1}", "{_id: 1, a: 9}", "{_id: 2}", NULL};
	static const int want[] = {1, 2, 3};

	sort_order("{}", docs, want);
}
END_TEST

START_TEST(test_query_sort_key_arrays)
{
	static const char *const docs[] = {"{_id: 1, a: [1, 5]}", "{_id: 2, a: [3]}",
					   "{_id: 3, a: 2}", "{_id: 4, a: [4, 0.5, 6]}", NULL};
	static const int asc[] = {4, 1, 3, 2};
	static const int desc[] = {4, 1, 2, 3};
	/* nested arrays are values (array bracket, above numbers and strings) */
	static const char *const nested[] = {"{_id: 1, a: [[1], 'z']}", "{_id: 2, a: [[0]]}",
					     "{_id: 3, a: 'y'}", NULL};
	static const int nasc[] = {3, 1, 2};
	static const int ndesc[] = {1, 2, 3};

	sort_order("{a: 1}", docs, asc);
	sort_order("{a: -1}", docs, desc);
	sort_order("{a: 1}", nested, nasc);
	sort_order("{a: -1}", nested, ndesc);
}
END_TEST

START_TEST(test_query_sort_key_missing_null_empty)
{
	static const char *const docs[] = {"{_id: 1, a: null}",
					   "{_id: 2}",
					   "{_id: 3, a: []}",
					   "{_id: 4, a: MinKey}",
					   "{_id: 5, a: 0}",
					   "{_id: 6, a: undefined}",
					   "{_id: 7, a: [null, 1]}",
					   "{_id: 8, a: [[], 1]}",
					   NULL};
	/* MinKey < [] < null = missing = undefined < numbers; ties by _id */
	static const int asc[] = {4, 3, 1, 2, 6, 7, 5, 8};
	/* descending: [null, 1] and [[], 1] sort by 1 and by the array [] (above numbers) */
	static const int desc[] = {8, 7, 5, 1, 2, 6, 3, 4};

	sort_order("{a: 1}", docs, asc);
	sort_order("{a: -1}", docs, desc);
}
END_TEST

START_TEST(test_query_sort_key_types)
{
	/* the manual's order: MinKey, null, numbers, strings, objects, arrays (as elements
	 * here: [[1]] sorts as [1]), BinData, ObjectId, bool, Date, Timestamp, regex, MaxKey */
	static const char *const docs[] = {"{_id: 9, a: {$date: '2020-01-01T00:00:00Z'}}",
					   "{_id: 3, a: 'abc'}",
					   "{_id: 12, a: MaxKey}",
					   "{_id: 5, a: [[1]]}",
					   "{_id: 1, a: null}",
					   "{_id: 7, a: ObjectId('5ee92a6ec644acb6d13eedb1')}",
					   "{_id: 2, a: NumberDecimal('2.5')}",
					   "{_id: 4, a: {x: 1}}",
					   "{_id: 11, a: /re/}",
					   "{_id: 6, a: BinData(0, 'AAAA')}",
					   "{_id: 10, a: Timestamp(1, 1)}",
					   "{_id: 0, a: MinKey}",
					   "{_id: 8, a: false}",
					   NULL};
	static const int asc[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	static const int desc[] = {12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0};

	sort_order("{a: 1}", docs, asc);
	sort_order("{a: -1}", docs, desc);
}
END_TEST

START_TEST(test_query_sort_key_dotted)
{
	static const char *const docs[] = {"{_id: 1, a: [{b: 3}, {b: 1}]}",
					   "{_id: 2, a: [{b: 2}, {c: 1}]}",
					   "{_id: 3, a: {b: [0, 9]}}",
					   "{_id: 4, a: [{b: [5, 4]}, 7]}",
					   "{_id: 5, a: 5}",
					   "{_id: 6, a: [{b: []}]}",
					   NULL};
	/* {c: 1} and the scalar 7 give null; a scalar a gives null; [] gives the empty value */
	static const int asc[] = {6, 2, 4, 5, 3, 1};
	static const int desc[] = {3, 4, 1, 2, 5, 6};
	static const char *const idx[] = {"{_id: 1, a: [3, 1]}", "{_id: 2, a: [2, 9]}",
					  "{_id: 3, a: []}", "{_id: 4, a: [[0], 5]}", NULL};
	/* a numeric component picks the element (an array there is expanded: [0] gives 0) */
	static const int iasc[] = {3, 4, 2, 1};

	sort_order("{'a.b': 1}", docs, asc);
	sort_order("{'a.b': -1}", docs, desc);
	sort_order("{'a.0': 1}", idx, iasc);
}
END_TEST

START_TEST(test_query_sort_key_compound)
{
	static const char *const docs[] = {"{_id: 1, a: 1, b: 'x'}",	 "{_id: 2, a: 1, b: 'y'}",
					   "{_id: 3, a: 0, b: 'a'}",	 "{_id: 4, a: 1.0, b: 'y'}",
					   "{_id: 5, a: NumberLong(1)}", NULL};
	static const int asc_desc[] = {3, 2, 4, 1, 5};
	static const int desc_asc[] = {5, 1, 2, 4, 3};

	sort_order("{a: 1, b: -1}", docs, asc_desc);
	sort_order("{a: -1, b: 1}", docs, desc_asc);
}
END_TEST

/* ---- sort: property test ----------------------------------------------------------- */

static void seed_init(void)
{
	seed_start(UINT64_C(0x50f7ed), 0);
}


static void gen_value(bson_t *b, const char *key, int depth);

static void gen_scalar(bson_t *b, const char *key)
{
	static const char *const strs[] = {"", "a", "ab", "b", "B", "x\xc3\xa9"};
	bson_oid_t oid;
	uint8_t bytes[12] = {0};

	switch (rnd(14)) {
	case 0:
		bson_append_null(b, key, -1);
		break;
	case 1:
	case 2:
		bson_append_int32(b, key, -1, (int32_t)rnd(7) - 3);
		break;
	case 3:
		bson_append_int64(b, key, -1, (int64_t)rnd(7) - 3);
		break;
	case 4: {
		static const double ds[] = {-2.5, -0.0, 0.5, 1.0, 2.5, 1e300, -INFINITY, NAN};

		bson_append_double(b, key, -1, ds[rnd(8)]);
		break;
	}
	case 5:
	case 6:
		bson_append_utf8(b, key, -1, strs[rnd(6)], -1);
		break;
	case 7:
		bson_append_bool(b, key, -1, rnd(2));
		break;
	case 8:
		bytes[11] = (uint8_t)rnd(3);
		bson_oid_init_from_data(&oid, bytes);
		bson_append_oid(b, key, -1, &oid);
		break;
	case 9:
		bson_append_date_time(b, key, -1, (int64_t)rnd(5) * 1000 - 2000);
		break;
	case 10:
		bson_append_minkey(b, key, -1);
		break;
	case 11:
		bson_append_maxkey(b, key, -1);
		break;
	case 12:
		bson_append_undefined(b, key, -1);
		break;
	default: {
		bson_decimal128_t dec;

		bson_decimal128_from_string(rnd(2) ? "1.5" : "-3", &dec);
		bson_append_decimal128(b, key, -1, &dec);
		break;
	}
	}
}

static void gen_value(bson_t *b, const char *key, int depth)
{
	unsigned r = depth >= 3 ? 0 : rnd(10);
	bson_t child;
	char buf[16];
	const char *k;
	unsigned i, n;

	if (r < 5) {
		gen_scalar(b, key);
	} else if (r < 8) {
		n = rnd(4);
		bson_append_array_begin(b, key, -1, &child);
		for (i = 0; i < n; i++) {
			bson_uint32_to_string(i, &k, buf, sizeof(buf));
			gen_value(&child, k, depth + 1);
		}
		bson_append_array_end(b, &child);
	} else {
		bson_append_document_begin(b, key, -1, &child);
		if (rnd(4))
			gen_value(&child, "x", depth + 1);
		if (rnd(2))
			gen_value(&child, "y", depth + 1);
		bson_append_document_end(b, &child);
	}
}

/* The test's own reading of the manual: the values a path gives, collected in a list. */
#define MAXV 512
struct vals {
	bson_value_t v[MAXV]; /* v.value_type EOD means "empty array" */
	int n;
};

static void vals_add(struct vals *s, const bson_value_t *v)
{
	ck_assert_int_lt(s->n, MAXV);
	s->v[s->n++] = *v;
}

static void vals_add_type(struct vals *s, bson_type_t t)
{
	bson_value_t v = {.value_type = t};

	vals_add(s, &v);
}

static void collect(bson_iter_t *it, char *const *comp, int ncomp, struct vals *s)
{
	bson_iter_t sub, f;
	char *end;
	long idx;
	int count = 0;

	if (ncomp == 0) {
		if (BSON_ITER_HOLDS_ARRAY(it)) {
			bson_iter_recurse(it, &sub);
			while (bson_iter_next(&sub)) {
				vals_add(s, bson_iter_value(&sub));
				count++;
			}
			if (!count)
				vals_add_type(s, BSON_TYPE_EOD);
		} else {
			vals_add(s, bson_iter_value(it));
		}
		return;
	}
	if (BSON_ITER_HOLDS_DOCUMENT(it)) {
		bson_iter_recurse(it, &sub);
		if (bson_iter_find(&sub, comp[0]))
			collect(&sub, comp + 1, ncomp - 1, s);
		else
			vals_add_type(s, BSON_TYPE_NULL);
		return;
	}
	if (!BSON_ITER_HOLDS_ARRAY(it)) {
		vals_add_type(s, BSON_TYPE_NULL);
		return;
	}
	idx = strtol(comp[0], &end, 10);
	bson_iter_recurse(it, &sub);
	if (*end == '\0' && comp[0][0] >= '0' && comp[0][0] <= '9') {
		while (bson_iter_next(&sub))
			if (count++ == idx) {
				collect(&sub, comp + 1, ncomp - 1, s);
				return;
			}
		vals_add_type(s, BSON_TYPE_NULL);
		return;
	}
	while (bson_iter_next(&sub)) {
		count++;
		if (BSON_ITER_HOLDS_DOCUMENT(&sub)) {
			bson_iter_recurse(&sub, &f);
			if (bson_iter_find(&f, comp[0])) {
				collect(&f, comp + 1, ncomp - 1, s);
				continue;
			}
		}
		vals_add_type(s, BSON_TYPE_NULL);
	}
	if (!count)
		vals_add_type(s, BSON_TYPE_NULL);
}

/* MinKey < empty array < everything else; else store_value_compare. */
static int sv_cmp(const bson_value_t *a, const bson_value_t *b)
{
	int ra = a->value_type == BSON_TYPE_MINKEY ? 0 : a->value_type == BSON_TYPE_EOD ? 1 : 2;
	int rb = b->value_type == BSON_TYPE_MINKEY ? 0 : b->value_type == BSON_TYPE_EOD ? 1 : 2;

	if (ra != rb || ra < 2)
		return ra - rb;
	return store_value_compare(a, b);
}

struct pspec {
	int n;
	char *comp[3][3];
	int ncomp[3];
	bool desc[3];
};

static bson_value_t sort_value(const bson_t *doc, const struct pspec *ps, int f)
{
	struct vals *s = calloc(1, sizeof(*s));
	bson_iter_t it;
	bson_value_t best;
	int i;

	if (bson_iter_init(&it, doc) && bson_iter_find(&it, ps->comp[f][0]))
		collect(&it, ps->comp[f] + 1, ps->ncomp[f] - 1, s);
	else
		vals_add_type(s, BSON_TYPE_NULL);
	best = s->v[0];
	for (i = 1; i < s->n; i++) {
		int c = sv_cmp(&s->v[i], &best);

		if (ps->desc[f] ? c > 0 : c < 0)
			best = s->v[i];
	}
	free(s);
	return best;
}

static int direct_cmp(const bson_t *a, const bson_t *b, const struct pspec *ps)
{
	bson_iter_t ia, ib;
	int f, c;

	for (f = 0; f < ps->n; f++) {
		bson_value_t va = sort_value(a, ps, f), vb = sort_value(b, ps, f);

		c = sv_cmp(&va, &vb);
		if (c)
			return ps->desc[f] ? -c : c;
	}
	ck_assert(bson_iter_init_find(&ia, a, "_id") && bson_iter_init_find(&ib, b, "_id"));
	return store_iter_compare(&ia, &ib);
}

static int sgn(int c)
{
	return c < 0 ? -1 : c > 0;
}

START_TEST(test_query_sort_key_property)
{
	static const char *const paths[] = {"a", "b", "a.x", "b.y", "a.x.y", "a.1", "a.0.x"};
	enum { NDOCS = 12000, NSPECS = 8 };
	struct keyed *k = calloc(NDOCS, sizeof(*k));
	char buf[64], compbuf[3][32];
	int s, i, checked = 0;

	seed_init();
	for (s = 0; s < NSPECS; s++) {
		struct pspec ps = {0};
		bson_t spec;
		struct query_sort *q = NULL;
		struct dfs_err err = {0};
		char *text;
		int f, j;

		bson_init(&spec);
		ps.n = 1 + (int)rnd(3);
		for (f = 0; f < ps.n; f++) {
			char *save = NULL, *tok;

			snprintf(compbuf[f], sizeof(compbuf[f]), "%s", paths[rnd(7)]);
			ps.desc[f] = rnd(2);
			BSON_APPEND_INT32(&spec, compbuf[f], ps.desc[f] ? -1 : 1);
			ps.ncomp[f] = 0;
			for (tok = strtok_r(compbuf[f], ".", &save); tok;
			     tok = strtok_r(NULL, ".", &save))
				ps.comp[f][ps.ncomp[f]++] = tok;
		}
		text = bson_as_relaxed_extended_json(&spec, NULL);
		if (query_sort_parse(&spec, &q, &err))
			ck_abort_msg("sort %s: %s", text, err.msg);
		for (i = 0; i < NDOCS; i++) {
			k[i].doc = bson_new();
			k[i].id = i;
			BSON_APPEND_INT32(k[i].doc, "_id", i);
			if (rnd(6))
				gen_value(k[i].doc, "a", 0);
			if (rnd(6))
				gen_value(k[i].doc, "b", 0);
			dfs_buf_init(&k[i].key);
			ck_assert_int_eq(query_sort_key(q, k[i].doc, &k[i].key, &err), 0);
		}
		qsort(k, NDOCS, sizeof(*k), keyed_cmp);
		/* sorted by key: every neighbour pair in direct order, and random pairs agree */
		for (i = 0; i + 1 < NDOCS; i++) {
			int c = direct_cmp(k[i].doc, k[i + 1].doc, &ps);

			if (c >= 0) {
				char *x = render(k[i].doc), *y = render(k[i + 1].doc);

				ck_abort_msg("seed 0x%" PRIx64 " sort %s: %s sorted before %s",
					     seed_used, text, x, y);
			}
			checked++;
		}
		for (j = 0; j < 4000; j++) {
			int x = (int)rnd(NDOCS), y = (int)rnd(NDOCS);
			int want = sgn(direct_cmp(k[x].doc, k[y].doc, &ps));

			ck_assert_msg(sgn(keyed_cmp(&k[x], &k[y])) == want,
				      "seed 0x%" PRIx64 " sort %s: pair disagrees", seed_used,
				      text);
			checked++;
		}
		for (i = 0; i < NDOCS; i++) {
			bson_destroy(k[i].doc);
			dfs_buf_release(&k[i].key);
		}
		(void)buf;
		bson_free(text);
		bson_destroy(&spec);
		query_sort_free(q);
	}
	ck_assert_int_gt(checked, 10000);
	free(k);
}
END_TEST

static Suite *query_project_suite(void)
{
	Suite *s = suite_create("query_project");
	TCase *tp = tcase_create("projection");
	TCase *ts = tcase_create("sort");

	tcase_add_test(tp, test_query_proj_apply_inclusion);
	tcase_add_test(tp, test_query_proj_apply_id);
	tcase_add_test(tp, test_query_proj_apply_exclusion);
	tcase_add_test(tp, test_query_proj_parse_mixed);
	tcase_add_test(tp, test_query_proj_apply_dotted);
	tcase_add_test(tp, test_query_proj_parse_collision);
	tcase_add_test(tp, test_query_proj_parse_bad);
	tcase_add_test(tp, test_query_proj_apply_slice);
	tcase_add_test(tp, test_query_proj_apply_elemmatch);
	tcase_add_test(tp, test_query_proj_apply_positional);
	suite_add_tcase(s, tp);
	tcase_add_test(ts, test_query_sort_parse_values);
	tcase_add_test(ts, test_query_sort_key_empty_spec);
	tcase_add_test(ts, test_query_sort_key_arrays);
	tcase_add_test(ts, test_query_sort_key_missing_null_empty);
	tcase_add_test(ts, test_query_sort_key_types);
	tcase_add_test(ts, test_query_sort_key_dotted);
	tcase_add_test(ts, test_query_sort_key_compound);
	tcase_add_test(ts, test_query_sort_key_property);
	tcase_set_timeout(ts, 300);
	suite_add_tcase(s, ts);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(query_project_suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
