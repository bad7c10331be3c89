/*
 * test_generate.c - unit tests of the template engine (fs/cli/generate.c): the example user
 * template, every operator form, determinism per seed, and the compile and run-time errors.
 *
 * Templates are written as JSON with single quotes; tmpl() reads them with libbson's JSON
 * reader, hiding every leading '$' from it (as '$', turned back afterwards) because it would
 * take {"$date": [...]} and {"$oid": {...}} for malformed Extended JSON. One test reads the
 * template through the docfs codec (store_codec_parse_doc) instead, as `docfs generate` does.
 */
#include "fs_int.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define USERS_TEMPLATE                                                                             \
	"{\"user\": {\"name\": {\"first\": {\"$choose\": [\"Liam\", \"Aubrey\", \"Zoey\", "        \
	"\"Aria\", \"Ellie\", \"Natalie\", \"Zoe\", \"Audrey\", \"Claire\", \"Nora\", "            \
	"\"Riley\", \"Leah\"]}, \"last\": {\"$choose\": [\"Smith\", \"Patel\", \"Young\", "        \
	"\"Allen\", \"Mitchell\", \"James\", \"Anderson\", \"Phillips\", \"Lee\", \"Bell\", "      \
	"\"Parker\", \"Davis\"]}}, \"gender\": {\"$choose\": [\"female\", \"male\"]}, \"age\": "   \
	"\"$number\", \"address\": {\"zip_code\": {\"$number\": [10000, 99999]}, \"city\": "       \
	"{\"$choose\": [\"Beijing\", \"ShangHai\", \"GuangZhou\", \"ShenZhen\"]}}, "               \
	"\"created_at\": {\"$date\": [\"2010-01-01\", \"2014-07-24\"]}}}"

#define MS_2010_01_01 INT64_C(1262304000000)
#define MS_2014_07_24 INT64_C(1406160000000)

static const char *const first_names[] = {"Liam",    "Aubrey", "Zoey",	 "Aria",   "Ellie",
					  "Natalie", "Zoe",    "Audrey", "Claire", "Nora",
					  "Riley",   "Leah",   NULL};
static const char *const last_names[] = {"Smith",  "Patel",    "Young",	   "Allen", "Mitchell",
					 "James",  "Anderson", "Phillips", "Lee",   "Bell",
					 "Parker", "Davis",    NULL};

/* Copies src into dst with every key and string starting with '$' turned back to '$'. */
static void rename_dollars(const bson_t *src, bson_t *dst)
{
	bson_iter_t it;

	ck_assert(bson_iter_init(&it, src));
	while (bson_iter_next(&it)) {
		char key[256];
		bson_t sub_src, sub_dst;
		const uint8_t *data;
		uint32_t len;

		snprintf(key, sizeof(key), "%s", bson_iter_key(&it));
		if (key[0] == '%')
			key[0] = '$';
		if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
			bool is_doc = BSON_ITER_HOLDS_DOCUMENT(&it);

			if (is_doc)
				bson_iter_document(&it, &len, &data);
			else
				bson_iter_array(&it, &len, &data);
			ck_assert(bson_init_static(&sub_src, data, len));
			if (is_doc)
				bson_append_document_begin(dst, key, -1, &sub_dst);
			else
				bson_append_array_begin(dst, key, -1, &sub_dst);
			rename_dollars(&sub_src, &sub_dst);
			if (is_doc)
				bson_append_document_end(dst, &sub_dst);
			else
				bson_append_array_end(dst, &sub_dst);
		} else if (BSON_ITER_HOLDS_UTF8(&it) && bson_iter_utf8(&it, &len)[0] == '%') {
			char *str = bson_strdup(bson_iter_utf8(&it, &len));

			str[0] = '$';
			bson_append_utf8(dst, key, -1, str, (int)len);
			bson_free(str);
		} else {
			bson_append_value(dst, key, -1, bson_iter_value(&it));
		}
	}
}

/* A template from JSON with ' for ". Owned: bson_destroy. */
static bson_t *tmpl(const char *json)
{
	char *text = strdup(json);
	bson_error_t error;
	bson_t *raw, *out = bson_new();

	for (char *p = text; *p; p++) {
		if (*p == '\'')
			*p = '"';
		if (*p == '"' && p[1] == '$')
			p[1] = '%'; /* turned back by rename_dollars */
	}
	raw = bson_new_from_json((const uint8_t *)text, -1, &error);
	ck_assert_msg(raw != NULL, "bad test template %s: %s", json, error.message);
	rename_dollars(raw, out);
	bson_destroy(raw);
	free(text);
	return out;
}

/* Compiles json (see tmpl) with seed, asserting success. Owned: fs_gen_free. */
static struct fs_gen *gen_from(const char *json, uint64_t seed)
{
	struct dfs_err err = {0};
	struct fs_gen *g = NULL;
	bson_t *t = tmpl(json);
	int rc = fs_gen_new(t, seed, &g, &err);

	ck_assert_msg(rc == DFS_OK, "template %s: %s", json, err.msg);
	ck_assert_ptr_nonnull(g);
	bson_destroy(t);
	return g;
}

/* Compiles json expecting failure; returns the message (static buffer). */
static const char *compile_error(const char *json)
{
	static struct dfs_err err;
	struct fs_gen *g = NULL;
	bson_t *t = tmpl(json);

	dfs_err_clear(&err);
	ck_assert_int_eq(fs_gen_new(t, 1, &g, &err), DFS_EINVAL);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(err.code, DFS_EINVAL);
	bson_destroy(t);
	return err.msg;
}

/* The next document into doc (reinitialised), asserting success. */
static void next_doc(struct fs_gen *g, bson_t *doc)
{
	struct dfs_err err = {0};

	bson_reinit(doc);
	ck_assert_msg(fs_gen_next(g, doc, &err) == DFS_OK, "%s", err.msg);
}

/* The value at a dotted path of doc, asserting it exists. */
static const bson_value_t *at(const bson_t *doc, const char *path, bson_iter_t *it)
{
	bson_iter_t root;

	ck_assert(bson_iter_init(&root, doc));
	ck_assert_msg(bson_iter_find_descendant(&root, path, it), "no '%s'", path);
	return bson_iter_value(it);
}

static bool in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return true;
	return false;
}

static int64_t int_at(const bson_t *doc, const char *path)
{
	bson_iter_t it;
	const bson_value_t *v = at(doc, path, &it);

	ck_assert_msg(v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64,
		      "'%s' is type %d", path, v->value_type);
	return v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
}

static char *json_of(const bson_t *doc)
{
	return bson_as_canonical_extended_json(doc, NULL);
}

/* ---- the example template ---------------------------------------------------------- */

START_TEST(test_fs_gen_new_user_template)
{
	struct dfs_err err = {0};
	struct fs_gen *g = NULL;
	bson_t *user = tmpl(USERS_TEMPLATE);

	ck_assert_int_eq(fs_gen_new(user, 42, &g, &err), DFS_OK);
	ck_assert_int_eq(err.code, DFS_OK);
	ck_assert_ptr_nonnull(g);
	fs_gen_free(g);
	fs_gen_free(NULL);
	bson_destroy(user);
}
END_TEST

START_TEST(test_fs_gen_next_user_shapes)
{
	struct fs_gen *g = gen_from(USERS_TEMPLATE, 7);
	bson_t doc = BSON_INITIALIZER;
	int age_seen[101] = {0}, genders[2] = {0};
	int64_t zip_min = INT64_MAX, zip_max = INT64_MIN;
	bson_iter_t it;

	for (int i = 0; i < 10000; i++) {
		const bson_value_t *v;

		next_doc(g, &doc);
		ck_assert_uint_eq(bson_count_keys(&doc), 1);
		v = at(&doc, "user.age", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_INT32);
		ck_assert(v->value.v_int32 >= 0 && v->value.v_int32 <= 100);
		age_seen[v->value.v_int32]++;
		v = at(&doc, "user.address.zip_code", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_INT32);
		ck_assert(v->value.v_int32 >= 10000 && v->value.v_int32 <= 99999);
		zip_min = v->value.v_int32 < zip_min ? v->value.v_int32 : zip_min;
		zip_max = v->value.v_int32 > zip_max ? v->value.v_int32 : zip_max;
		v = at(&doc, "user.created_at", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_DATE_TIME);
		ck_assert(v->value.v_datetime >= MS_2010_01_01 &&
			  v->value.v_datetime <= MS_2014_07_24);
		v = at(&doc, "user.name.first", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_UTF8);
		ck_assert(in_list(v->value.v_utf8.str, first_names));
		v = at(&doc, "user.name.last", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_UTF8);
		ck_assert(in_list(v->value.v_utf8.str, last_names));
		v = at(&doc, "user.gender", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_UTF8);
		ck_assert(!strcmp(v->value.v_utf8.str, "female") ||
			  !strcmp(v->value.v_utf8.str, "male"));
		genders[!strcmp(v->value.v_utf8.str, "male")]++;
		v = at(&doc, "user.address.city", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_UTF8);
		ck_assert_uint_eq(bson_count_keys(&doc), 1);
	}
	/* 10,000 draws over 101 ages: every age comes up, both ends included */
	for (int a = 0; a <= 100; a++)
		ck_assert_msg(age_seen[a] > 0, "age %d never generated", a);
	ck_assert(genders[0] > 4000 && genders[1] > 4000);
	ck_assert(zip_min < 11000 && zip_max > 98000);
	bson_destroy(&doc);
	fs_gen_free(g);
}
END_TEST

START_TEST(test_fs_gen_next_same_seed_same_output)
{
	struct fs_gen *a = gen_from(USERS_TEMPLATE, 99), *b = gen_from(USERS_TEMPLATE, 99);
	struct fs_gen *c = gen_from(USERS_TEMPLATE, 100);
	bson_t da = BSON_INITIALIZER, db = BSON_INITIALIZER, dc = BSON_INITIALIZER;
	int differ = 0;

	for (int i = 0; i < 1000; i++) {
		next_doc(a, &da);
		next_doc(b, &db);
		next_doc(c, &dc);
		ck_assert_uint_eq(da.len, db.len);
		ck_assert_mem_eq(bson_get_data(&da), bson_get_data(&db), da.len);
		if (da.len != dc.len || memcmp(bson_get_data(&da), bson_get_data(&dc), da.len))
			differ++;
	}
	ck_assert_int_gt(differ, 900);
	bson_destroy(&da);
	bson_destroy(&db);
	bson_destroy(&dc);
	fs_gen_free(a);
	fs_gen_free(b);
	fs_gen_free(c);
}
END_TEST

/* ---- each operator ----------------------------------------------------------------- */

START_TEST(test_fs_gen_next_choose_forms)
{
	struct fs_gen *g = gen_from("{'a': {'$choose': {'from': ['x', 'y', 'z'], "
				    "'weights': [0, 1, 0]}}, 'b': {'$choose': {'from': [1, 2]}}, "
				    "'c': {'$choose': [{'$number': [5, 6]}, {'k': '$bool'}]}, "
				    "'d': {'$choose': {'from': ['p', 'q'], 'weights': [3, 1]}}}",
				    3);
	bson_t doc = BSON_INITIALIZER;
	bson_iter_t it;
	int seen_b[3] = {0}, seen_c_doc = 0, p = 0;

	for (int i = 0; i < 4000; i++) {
		const bson_value_t *v;

		next_doc(g, &doc);
		v = at(&doc, "a", &it);
		ck_assert_str_eq(v->value.v_utf8.str, "y");
		seen_b[int_at(&doc, "b")]++;
		v = at(&doc, "c", &it);
		if (v->value_type == BSON_TYPE_DOCUMENT) {
			seen_c_doc++;
			ck_assert_int_eq(at(&doc, "c.k", &it)->value_type, BSON_TYPE_BOOL);
		} else {
			ck_assert(v->value.v_int32 == 5 || v->value.v_int32 == 6);
		}
		v = at(&doc, "d", &it);
		p += v->value.v_utf8.str[0] == 'p';
	}
	ck_assert(seen_b[1] > 1500 && seen_b[2] > 1500);
	ck_assert(seen_c_doc > 1500 && seen_c_doc < 2500);
	ck_assert_msg(p > 2800 && p < 3200, "weights 3:1 gave %d of 4000", p);
	bson_destroy(&doc);
	fs_gen_free(g);
}
END_TEST

START_TEST(test_fs_gen_next_number_forms)
{
	struct fs_gen *g =
	    gen_from("{'bare': '$number', 'pair': {'$number': [-3, 3]}, "
		     "'named': {'$number': {'min': 7, 'max': 9}}, "
		     "'min_only': {'$number': {'min': 99}}, "
		     "'one': {'$number': [4, 4]}, "
		     "'dbl': {'$number': [0.5, 2]}, "
		     "'big': {'$number': [3000000000, 3000000005]}, "
		     "'wide': {'$number': [-9223372036854775807, 9223372036854775807]}}",
		     11);
	bson_t doc = BSON_INITIALIZER;
	bson_iter_t it;
	bool seen_lo = false, seen_hi = false;

	for (int i = 0; i < 2000; i++) {
		const bson_value_t *v;
		int64_t x;

		next_doc(g, &doc);
		x = int_at(&doc, "bare");
		ck_assert(x >= 0 && x <= 100);
		x = int_at(&doc, "pair");
		ck_assert(x >= -3 && x <= 3);
		seen_lo |= x == -3;
		seen_hi |= x == 3;
		x = int_at(&doc, "named");
		ck_assert(x >= 7 && x <= 9);
		x = int_at(&doc, "min_only");
		ck_assert(x >= 99 && x <= 100);
		ck_assert_int_eq(int_at(&doc, "one"), 4);
		v = at(&doc, "dbl", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_DOUBLE);
		ck_assert(v->value.v_double >= 0.5 && v->value.v_double < 2);
		v = at(&doc, "big", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_INT64);
		ck_assert(v->value.v_int64 >= 3000000000 && v->value.v_int64 <= 3000000005);
		v = at(&doc, "wide", &it);
		ck_assert(v->value_type == BSON_TYPE_INT64 || v->value_type == BSON_TYPE_INT32);
	}
	ck_assert(seen_lo && seen_hi);
	bson_destroy(&doc);
	fs_gen_free(g);
}
END_TEST

START_TEST(test_fs_gen_next_date_forms)
{
	struct fs_gen *g = gen_from("{'a': {'$date': ['2014-07-24T10:00:00Z', "
				    "'2014-07-24T10:00:00.500Z']}, "
				    "'b': {'$date': {'min': '2000-02-29', 'max': '2000-03-01'}}, "
				    "'c': '$date', 'd': {'$date': ['2020-01-01T00:00:00+01:00', "
				    "'2020-01-01T00:00']}, 'e': {'$date': [0, 10]}}",
				    5);
	bson_t doc = BSON_INITIALIZER;
	bson_iter_t it;
	const int64_t t0 = INT64_C(1406196000000);  /* 2014-07-24T10:00:00Z */
	const int64_t leap = INT64_C(951782400000); /* 2000-02-29 */
	const int64_t y2020 = INT64_C(1577836800000);

	for (int i = 0; i < 1000; i++) {
		const bson_value_t *v;

		next_doc(g, &doc);
		v = at(&doc, "a", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_DATE_TIME);
		ck_assert(v->value.v_datetime >= t0 && v->value.v_datetime <= t0 + 500);
		v = at(&doc, "b", &it);
		ck_assert(v->value.v_datetime >= leap && v->value.v_datetime <= leap + 86400000);
		v = at(&doc, "c", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_DATE_TIME);
		ck_assert(v->value.v_datetime >= 0 &&
			  v->value.v_datetime <= INT64_C(1735689600000));
		v = at(&doc, "d", &it);
		ck_assert(v->value.v_datetime >= y2020 - 3600000 && v->value.v_datetime <= y2020);
		v = at(&doc, "e", &it);
		ck_assert(v->value.v_datetime >= 0 && v->value.v_datetime <= 10);
	}
	bson_destroy(&doc);
	fs_gen_free(g);
}
END_TEST

START_TEST(test_fs_gen_next_date_takes_date_values)
{
	struct dfs_err err = {0};
	struct fs_gen *g = NULL;
	bson_t doc = BSON_INITIALIZER, *t;
	bson_iter_t it;

	/* built by hand: ISODate values as the codec would produce them */
	t = BCON_NEW("when", "{", "$date", "[", BCON_DATE_TIME(1000), BCON_DATE_TIME(2000), "]",
		     "}");
	ck_assert_int_eq(fs_gen_new(t, 1, &g, &err), DFS_OK);
	for (int i = 0; i < 100; i++) {
		const bson_value_t *v;

		next_doc(g, &doc);
		v = at(&doc, "when", &it);
		ck_assert(v->value.v_datetime >= 1000 && v->value.v_datetime <= 2000);
	}
	bson_destroy(&doc);
	bson_destroy(t);
	fs_gen_free(g);
}
END_TEST

START_TEST(test_fs_gen_next_oid_string_bool)
{
	struct fs_gen *g = gen_from("{'id': '$oid', 'id2': {'$oid': {}}, 's': '$string', "
				    "'s3': {'$string': {'length': 3}}, "
				    "'s0': {'$string': {'length': 0}}, "
				    "'ab': {'$string': {'length': 20, 'pool': 'ab'}}, "
				    "'b': '$bool', 'never': {'$bool': {'likelihood': 0}}, "
				    "'always': {'$bool': {'likelihood': 100}}}",
				    8);
	bson_t doc = BSON_INITIALIZER;
	bson_iter_t it;
	bson_oid_t prev;
	int trues = 0;

	memset(&prev, 0, sizeof(prev));
	for (int i = 0; i < 2000; i++) {
		const bson_value_t *v;

		next_doc(g, &doc);
		v = at(&doc, "id", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_OID);
		ck_assert(memcmp(&prev, &v->value.v_oid, sizeof(prev)) != 0);
		prev = v->value.v_oid;
		ck_assert_int_eq(at(&doc, "id2", &it)->value_type, BSON_TYPE_OID);
		v = at(&doc, "s", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_UTF8);
		ck_assert_uint_eq(v->value.v_utf8.len, 8);
		ck_assert_uint_eq(
		    strspn(v->value.v_utf8.str, "abcdefghijklmnopqrstuvwxyz0123456789"), 8);
		ck_assert_uint_eq(at(&doc, "s3", &it)->value.v_utf8.len, 3);
		ck_assert_uint_eq(at(&doc, "s0", &it)->value.v_utf8.len, 0);
		v = at(&doc, "ab", &it);
		ck_assert_uint_eq(strspn(v->value.v_utf8.str, "ab"), 20);
		v = at(&doc, "b", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_BOOL);
		trues += v->value.v_bool;
		ck_assert(!at(&doc, "never", &it)->value.v_bool);
		ck_assert(at(&doc, "always", &it)->value.v_bool);
	}
	ck_assert(trues > 800 && trues < 1200);
	bson_destroy(&doc);
	fs_gen_free(g);
}
END_TEST

START_TEST(test_fs_gen_next_pick_array_inc)
{
	struct fs_gen *g =
	    gen_from("{'p': {'$pick': {'array': ['a', 'b', 'c'], 'element': 2}}, "
		     "'p0': {'$pick': {'array': [{'$number': [1, 1]}]}}, "
		     "'gone': {'$pick': {'array': [1], 'element': 5}}, "
		     "'arr': [1, {'$pick': {'array': [], 'element': 0}}, 3], "
		     "'tags': {'$array': {'of': {'$choose': ['x', 'y']}, 'number': 4}}, "
		     "'var': {'$array': {'of': '$bool', 'number': {'$number': [1, 3]}}}, "
		     "'n': {'$inc': {'start': 10, 'step': 5}}, 'i': '$inc', "
		     "'f': {'$inc': {'start': 0.5}}}",
		     2);
	bson_t doc = BSON_INITIALIZER;
	bson_iter_t it, el;

	for (int i = 0; i < 300; i++) {
		const bson_value_t *v;
		uint32_t count;

		next_doc(g, &doc);
		ck_assert_str_eq(at(&doc, "p", &it)->value.v_utf8.str, "c");
		ck_assert_int_eq(int_at(&doc, "p0"), 1);
		ck_assert(!bson_has_field(&doc, "gone"));
		at(&doc, "arr", &it);
		ck_assert(bson_iter_recurse(&it, &el));
		ck_assert(bson_iter_next(&el) && !strcmp(bson_iter_key(&el), "0"));
		ck_assert(bson_iter_next(&el) && !strcmp(bson_iter_key(&el), "1"));
		ck_assert_int_eq(bson_iter_int32(&el), 3);
		ck_assert(!bson_iter_next(&el));
		v = at(&doc, "tags", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_ARRAY);
		ck_assert(bson_iter_recurse(&it, &el));
		for (count = 0; bson_iter_next(&el); count++)
			ck_assert(BSON_ITER_HOLDS_UTF8(&el));
		ck_assert_uint_eq(count, 4);
		at(&doc, "var", &it);
		ck_assert(bson_iter_recurse(&it, &el));
		for (count = 0; bson_iter_next(&el); count++)
			ck_assert(BSON_ITER_HOLDS_BOOL(&el));
		ck_assert(count >= 1 && count <= 3);
		ck_assert_int_eq(int_at(&doc, "n"), 10 + 5 * i);
		ck_assert_int_eq(int_at(&doc, "i"), i);
		v = at(&doc, "f", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_DOUBLE);
		ck_assert(v->value.v_double == 0.5 + i);
	}
	bson_destroy(&doc);
	fs_gen_free(g);
}
END_TEST

START_TEST(test_fs_gen_next_template_arguments)
{
	/* min counts up, so the draw is always exactly min when max is min too */
	struct fs_gen *g = gen_from("{'a': {'$number': {'min': {'$inc': {'start': 1}}, "
				    "'max': {'$inc': {'start': 1}}}}, "
				    "'s': {'$string': {'length': {'$choose': [2, 5]}}}, "
				    "'d': {'$date': {'min': {'$choose': ['2001-01-01']}, "
				    "'max': '2001-01-01'}}}",
				    4);
	bson_t doc = BSON_INITIALIZER;
	bson_iter_t it;

	for (int i = 0; i < 100; i++) {
		uint32_t len;

		next_doc(g, &doc);
		ck_assert_int_eq(int_at(&doc, "a"), i + 1);
		len = at(&doc, "s", &it)->value.v_utf8.len;
		ck_assert(len == 2 || len == 5);
		ck_assert(at(&doc, "d", &it)->value.v_datetime == INT64_C(978307200000));
	}
	bson_destroy(&doc);
	fs_gen_free(g);
}
END_TEST

START_TEST(test_fs_gen_next_literals_copied)
{
	struct fs_gen *g =
	    gen_from("{'price': '$5', 'op_like': '$nothing', "
		     "'two': {'$number': 1, 'x': 2}, 'nested': {'a': [1, 'two', "
		     "{'b': null}], 'c': 1.5, 't': true}, 'mix': [{'k': '$bool'}, 'v']}",
		     1);
	bson_t doc = BSON_INITIALIZER;
	bson_t *want = tmpl("{'price': '$5', 'op_like': '$nothing', 'two': {'$number': 1, 'x': 2}, "
			    "'nested': {'a': [1, 'two', {'b': null}], 'c': 1.5, 't': true}}");
	bson_iter_t it, w;
	char *js;

	next_doc(g, &doc);
	ck_assert(bson_iter_init(&w, want));
	ck_assert(bson_iter_init(&it, &doc));
	while (bson_iter_next(&w)) {
		ck_assert(bson_iter_next(&it));
		ck_assert_str_eq(bson_iter_key(&it), bson_iter_key(&w));
		ck_assert_int_eq(bson_iter_type(&it), bson_iter_type(&w));
	}
	js = json_of(&doc);
	ck_assert_msg(strstr(js, "\"nested\" : { \"a\" : [ { \"$numberInt\" : \"1\" }, \"two\"") !=
			  NULL,
		      "%s", js);
	bson_free(js);
	ck_assert(bson_iter_next(&it));
	ck_assert_str_eq(bson_iter_key(&it), "mix");
	ck_assert_int_eq(at(&doc, "mix.0.k", &w)->value_type, BSON_TYPE_BOOL);
	ck_assert_str_eq(at(&doc, "mix.1", &w)->value.v_utf8.str, "v");
	bson_destroy(want);
	bson_destroy(&doc);
	fs_gen_free(g);
}
END_TEST

START_TEST(test_fs_gen_next_arg_error_at_run_time)
{
	struct fs_gen *g = gen_from("{'a': {'$number': {'min': {'$choose': ['x']}}}}", 1);
	bson_t doc = BSON_INITIALIZER;
	struct dfs_err err = {0};

	ck_assert_int_eq(fs_gen_next(g, &doc, &err), DFS_EINVAL);
	ck_assert_str_eq(err.msg, "$number min must be a number, not string at 'a'");
	ck_assert_uint_eq(bson_count_keys(&doc), 0);
	bson_destroy(&doc);
	fs_gen_free(g);
}
END_TEST

START_TEST(test_fs_gen_next_too_big)
{
	struct fs_gen *g = gen_from(
	    "{'big': {'$array': {'of': {'$string': {'length': 1000}}, 'number': 1000000}}}", 1);
	bson_t doc = BSON_INITIALIZER;
	struct dfs_err err = {0};

	ck_assert_int_eq(fs_gen_next(g, &doc, &err), DFS_EFBIG);
	ck_assert_str_eq(err.msg, "$array grew over 16777216 bytes at 'big'");
	ck_assert_uint_eq(bson_count_keys(&doc), 0);
	bson_destroy(&doc);
	fs_gen_free(g);
}
END_TEST

/* ---- compile errors ---------------------------------------------------------------- */

START_TEST(test_fs_gen_new_unknown_operator)
{
	ck_assert_str_eq(compile_error("{'user': {'age': {'$foo': 1}}}"),
			 "unknown template operator '$foo' at 'user.age'");
	ck_assert_str_eq(compile_error("{'l': [1, {'$nope': {}}]}"),
			 "unknown template operator '$nope' at 'l.1'");
	ck_assert_str_eq(compile_error("{'t': {'$array': {'of': {'$x': 1}, 'number': 1}}}"),
			 "unknown template operator '$x' at 't.$array.of'");
	ck_assert_str_eq(compile_error("{'$choose': [1]}"),
			 "template must be a document of fields, not the operator '$choose'");
}
END_TEST

START_TEST(test_fs_gen_new_bad_arguments)
{
	ck_assert_str_eq(compile_error("{'age': {'$number': [1]}}"),
			 "$number needs [min, max] at 'age'");
	ck_assert_str_eq(compile_error("{'age': {'$number': 'x'}}"),
			 "$number needs [min, max] at 'age'");
	ck_assert_str_eq(compile_error("{'age': {'$number': [1, 2, 3]}}"),
			 "$number needs [min, max] at 'age'");
	ck_assert_str_eq(compile_error("{'age': {'$number': [5, 3]}}"),
			 "$number min 5 is above max 3 at 'age'");
	ck_assert_str_eq(compile_error("{'age': {'$number': ['a', 3]}}"),
			 "$number min must be a number, not string at 'age'");
	ck_assert_str_eq(compile_error("{'age': {'$number': {'mn': 1}}}"),
			 "$number has no option 'mn' (it takes [min, max]) at 'age'");
	ck_assert_str_eq(compile_error("{'c': {'$choose': []}}"),
			 "$choose needs at least one choice at 'c'");
	ck_assert_str_eq(compile_error("{'c': {'$choose': 3}}"),
			 "$choose needs {from: [...]} or [...] at 'c'");
	ck_assert_str_eq(compile_error("{'c': {'$choose': {'from': [1, 2], 'weights': [1]}}}"),
			 "$choose needs one number per choice in weights at 'c'");
	ck_assert_str_eq(compile_error("{'c': {'$choose': {'from': [1], 'weights': [0]}}}"),
			 "$choose weights must not all be zero at 'c'");
	ck_assert_str_eq(compile_error("{'c': {'$choose': {'from': [1], 'weights': [-1]}}}"),
			 "$choose weights must not be negative at 'c'");
	ck_assert_str_eq(compile_error("{'c': {'$choose': '$oid'}}"),
			 "$choose needs {from: [...]} or [...] at 'c'");
	ck_assert_str_eq(compile_error("{'d': {'$date': ['2010-13-01', '2011-01-01']}}"),
			 "$date min '2010-13-01' is not an iso date like 2010-01-01 or "
			 "2014-07-24T10:00:00Z at 'd'");
	ck_assert_str_eq(compile_error("{'d': {'$date': ['2012-01-01', '2011-01-01']}}"),
			 "$date min is after max at 'd'");
	ck_assert_str_eq(compile_error("{'d': {'$date': [true, 1]}}"),
			 "$date min must be an iso date string, not bool at 'd'");
	ck_assert_str_eq(compile_error("{'s': {'$string': {'length': -1}}}"),
			 "$string length -1 is out of range 0..16777216 at 's'");
	ck_assert_str_eq(compile_error("{'s': {'$string': {'length': 1.5}}}"),
			 "$string length must be an integer, not double at 's'");
	ck_assert_str_eq(compile_error("{'s': {'$string': {'pool': ''}}}"),
			 "$string pool must be a non-empty string at 's'");
	ck_assert_str_eq(compile_error("{'b': {'$bool': {'likelihood': 101}}}"),
			 "$bool likelihood must be 0..100 at 'b'");
	ck_assert_str_eq(compile_error("{'p': {'$pick': {'element': 1}}}"),
			 "$pick needs {array: [...], element: i} at 'p'");
	ck_assert_str_eq(compile_error("{'p': {'$pick': {'array': 3}}}"),
			 "$pick array must be an array, not int32 at 'p'");
	ck_assert_str_eq(compile_error("{'a': {'$array': {'of': 1}}}"),
			 "$array needs {of: template, number: n} at 'a'");
	ck_assert_str_eq(compile_error("{'a': {'$array': {'of': 1, 'number': -2}}}"),
			 "$array number -2 is out of range 0..1000000 at 'a'");
	ck_assert_str_eq(compile_error("{'i': {'$inc': {'start': '$number'}}}"),
			 "$inc start and step must be plain numbers at 'i'");
	ck_assert_str_eq(compile_error("{'o': {'$oid': 1}}"), "$oid needs no arguments at 'o'");
	ck_assert_str_eq(compile_error("{'o': {'$oid': {'x': 1}}}"),
			 "$oid has no option 'x' (it takes no arguments) at 'o'");
	ck_assert_str_eq(compile_error("{'x': {'y': {'$number': {'min': {'$pick': 1}}}}}"),
			 "$pick needs {array: [...], element: i} at 'x.y.$number.min'");
}
END_TEST

START_TEST(test_fs_gen_new_too_deep)
{
	bson_t *levels[DFS_MAX_DEPTH + 2];
	struct dfs_err err = {0};
	struct fs_gen *g = NULL;

	/* {"a": {"a": ... {"x": "$bool"} ...}}: the top level and 101 more */
	levels[DFS_MAX_DEPTH + 1] = BCON_NEW("x", BCON_UTF8("$bool"));
	for (int i = DFS_MAX_DEPTH; i >= 0; i--) {
		levels[i] = bson_new();
		bson_append_document(levels[i], "a", 1, levels[i + 1]);
	}
	ck_assert_int_eq(fs_gen_new(levels[0], 1, &g, &err), DFS_EINVAL);
	ck_assert_ptr_null(g);
	ck_assert_msg(strstr(err.msg, "template nests deeper than 100 levels at 'a.a.a") == err.msg,
		      "%s", err.msg);
	dfs_err_clear(&err);
	ck_assert_msg(fs_gen_new(levels[2], 1, &g, &err) == DFS_OK, "%s", err.msg);
	fs_gen_free(g);
	for (int i = 0; i <= DFS_MAX_DEPTH + 1; i++)
		bson_destroy(levels[i]);
}
END_TEST

/* ---- through the codec ------------------------------------------------------------- */

START_TEST(test_fs_gen_new_from_codec_text)
{
	struct dfs_err err = {0};
	struct fs_gen *g = NULL;
	bson_t t = BSON_INITIALIZER, doc = BSON_INITIALIZER;
	bson_iter_t it;

	ck_assert_msg(store_codec_parse_doc(USERS_TEMPLATE, strlen(USERS_TEMPLATE), &t, &err) ==
			  DFS_OK,
		      "%s", err.msg);
	ck_assert_msg(fs_gen_new(&t, 1, &g, &err) == DFS_OK, "%s", err.msg);
	for (int i = 0; i < 100; i++) {
		const bson_value_t *v;

		next_doc(g, &doc);
		v = at(&doc, "user.created_at", &it);
		ck_assert_int_eq(v->value_type, BSON_TYPE_DATE_TIME);
		ck_assert(v->value.v_datetime >= MS_2010_01_01 &&
			  v->value.v_datetime <= MS_2014_07_24);
		ck_assert(int_at(&doc, "user.address.zip_code") >= 10000);
	}
	bson_destroy(&doc);
	bson_destroy(&t);
	fs_gen_free(g);
}
END_TEST

static Suite *generate_suite(void)
{
	Suite *s = suite_create("generate");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_fs_gen_new_user_template);
	tcase_add_test(tc, test_fs_gen_next_user_shapes);
	tcase_add_test(tc, test_fs_gen_next_same_seed_same_output);
	tcase_add_test(tc, test_fs_gen_next_choose_forms);
	tcase_add_test(tc, test_fs_gen_next_number_forms);
	tcase_add_test(tc, test_fs_gen_next_date_forms);
	tcase_add_test(tc, test_fs_gen_next_date_takes_date_values);
	tcase_add_test(tc, test_fs_gen_next_oid_string_bool);
	tcase_add_test(tc, test_fs_gen_next_pick_array_inc);
	tcase_add_test(tc, test_fs_gen_next_template_arguments);
	tcase_add_test(tc, test_fs_gen_next_literals_copied);
	tcase_add_test(tc, test_fs_gen_next_arg_error_at_run_time);
	tcase_add_test(tc, test_fs_gen_next_too_big);
	tcase_add_test(tc, test_fs_gen_new_unknown_operator);
	tcase_add_test(tc, test_fs_gen_new_bad_arguments);
	tcase_add_test(tc, test_fs_gen_new_too_deep);
	tcase_add_test(tc, test_fs_gen_new_from_codec_text);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(generate_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
