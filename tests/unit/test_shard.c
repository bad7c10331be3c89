/*
 * test_shard.c - unit tests of query/shard.c: MongoDB's hash against MongoDB's own
 * hard-coded values, shard key patterns and extraction, chunk maps (lookup, splits,
 * checks), targeting (the three-zone seed, $in, $or, compound prefixes, hashed
 * keys) and the merge of sorted streams with sort, skip and limit. No store is used.
 */
#include "query.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bson_t *js(const char *text)
{
	struct dfs_err err = {0};
	bson_t *b = bson_new();

	ck_assert_msg(store_codec_parse_doc(text, strlen(text), b, &err) == 0, "%s: %s", text,
		      err.msg);
	return b;
}

/* The hash of the value of field "v" of the document text, with seed. */
static int64_t hash_of(const char *text, int32_t seed)
{
	bson_t *b = js(text);
	bson_iter_t it;
	int64_t h;

	ck_assert(bson_iter_init_find(&it, b, "v"));
	h = query_shard_hash_seed(bson_iter_value(&it), seed);
	bson_destroy(b);
	return h;
}

static void hash_is(const char *text, int64_t want)
{
	int64_t h = hash_of(text, 0);

	ck_assert_msg(h == want, "%s: %lld, want %lld", text, (long long)h, (long long)want);
}

/* MongoDB's src/mongo/db/hasher_test.cpp (seed 0; "determined experimentally" there). */
START_TEST(test_query_shard_hash_mongodb_values)
{
	hash_is("{v: 42}", -944302157085130861LL);
	hash_is("{v: 42.123}", -944302157085130861LL);
	hash_is("{v: NumberLong(42)}", -944302157085130861LL);
	hash_is("{v: 0}", 4854801880128277513LL);
	hash_is("{v: 0.456}", 4854801880128277513LL);
	hash_is("{v: NaN}", 4854801880128277513LL);
	hash_is("{v: 1}", 5902408780260971510LL);
	hash_is("{v: 1.987}", 5902408780260971510LL);
	hash_is("{v: -1}", 1140205862565771219LL);
	hash_is("{v: -1.789}", 1140205862565771219LL);
	hash_is("{v: -2147483648}", 6165898260261354870LL);
	hash_is("{v: -2147483648.0}", 6165898260261354870LL);
	hash_is("{v: 2147483647}", 1143184177162245883LL);
	hash_is("{v: 1.7976931348623157e308}", 921523596458303250LL);
	hash_is("{v: NumberLong('9223372036854775807')}", 921523596458303250LL);
	hash_is("{v: -1.7976931348623157e308}", 4532067210535695462LL);
	hash_is("{v: NumberLong('-9223372036854775808')}", 4532067210535695462LL);
	hash_is("{v: MinKey}", 7961148599568647290LL);
	hash_is("{v: MaxKey}", 5504842513779440750LL);
	hash_is("{v: undefined}", 40158834000849533LL);
	hash_is("{v: null}", 2338878944348059895LL);
	hash_is("{v: 'abc'}", 8478485326885698097LL);
	hash_is("{v: ''}", 2049396243249673340LL);
	hash_is("{v: {a: 'abc', b: NumberLong(123)}}", 4771603801758380216LL);
	hash_is("{v: {}}", 7980500913326740417LL);
	hash_is("{v: ['bar', 'baz', 'qux']}", -2938911267422831539LL);
	hash_is("{v: []}", 8849948234993459283LL);
	hash_is("{v: BinData(0, 'AAECAwQG')}", 7252465090394235301LL);
	hash_is("{v: BinData(128, 'AAECAwQG')}", 5736670452907618262LL);
	hash_is("{v: BinData(4, 'AAECAwQFBgcICQoLDA0ODw==')}", 6084661258071355978LL);
	hash_is("{v: ObjectId('010203040506070809101112')}", -5588663249627035708LL);
	hash_is("{v: ObjectId('000000000000000000000000')}", -4293118519463489418LL);
	hash_is("{v: true}", 6405873908747105701LL);
	hash_is("{v: false}", 6289544573401934092LL);
	hash_is("{v: {$date: {$numberLong: '6153737367135073092'}}}", 4476222765095560467LL);
	hash_is("{v: new Date(0)}", -1178696894582842035LL);
	hash_is("{v: /mongodb/}", -7275792090268217043LL);
	hash_is("{v: /.*/i}", 7095855029187981886LL);
	hash_is("{v: {$code: 'func f() { return 1; }'}}", 6861638109178014270LL);
	hash_is("{v: {$code: 'func f() { return 1; }', $scope: {c: true}}}", 501342939894575968LL);
}
END_TEST

/* MongoDB's jstests hash_function_stability (seed 1), including the 2^63 special case. */
START_TEST(test_query_shard_hash_seed_one)
{
	const int64_t max = 1136124329541638701LL, low = 5744114172487291558LL,
		      zero = 5574369198691456941LL;

	ck_assert_int_eq(hash_of("{v: 'hashthis'}", 1), 6271151123721111923LL);
	ck_assert_int_eq(hash_of("{v: 9223372036854775808.0}", 1), low);
	ck_assert_int_eq(hash_of("{v: 9223372036854777856.0}", 1), max);
	ck_assert_int_eq(hash_of("{v: 1e300}", 1), max);
	ck_assert_int_eq(hash_of("{v: Infinity}", 1), max);
	ck_assert_int_eq(hash_of("{v: 9223372036854774784.0}", 1), -3954856262017896439LL);
	ck_assert_int_eq(hash_of("{v: -9223372036854775808.0}", 1), low);
	ck_assert_int_eq(hash_of("{v: -9223372036854774784.0}", 1), -1762411739488908479LL);
	ck_assert_int_eq(hash_of("{v: -9223372036854777856.0}", 1), low);
	ck_assert_int_eq(hash_of("{v: -Infinity}", 1), low);
	ck_assert_int_eq(hash_of("{v: 0}", 1), zero);
	ck_assert_int_eq(hash_of("{v: NumberLong(0)}", 1), zero);
	ck_assert_int_eq(hash_of("{v: NaN}", 1), zero);
	ck_assert_int_eq(hash_of("{v: {a: 1, b: 2}}", 1), -7076810813311352857LL);
	ck_assert_int_eq(hash_of("{v: {a: 9223372036854775808.0, b: NaN}}", 1),
			 1223292051903137684LL);
}
END_TEST

START_TEST(test_query_shard_hash_decimal_by_value)
{
	/* decimals hash as the int64 they round to (ties to even), like the other numbers */
	ck_assert_int_eq(hash_of("{v: NumberDecimal('42')}", 0), hash_of("{v: 42}", 0));
	ck_assert_int_eq(hash_of("{v: NumberDecimal('42.4')}", 0), hash_of("{v: 42}", 0));
	ck_assert_int_eq(hash_of("{v: NumberDecimal('42.5')}", 0), hash_of("{v: 42}", 0));
	ck_assert_int_eq(hash_of("{v: NumberDecimal('43.5')}", 0), hash_of("{v: 44}", 0));
	ck_assert_int_eq(hash_of("{v: NumberDecimal('-1.5')}", 0), hash_of("{v: -2}", 0));
	ck_assert_int_eq(hash_of("{v: NumberDecimal('4.2E+1')}", 0), hash_of("{v: 42}", 0));
	ck_assert_int_eq(hash_of("{v: NumberDecimal('NaN')}", 0), hash_of("{v: 0}", 0));
	ck_assert_int_eq(hash_of("{v: NumberDecimal('1E+30')}", 0),
			 hash_of("{v: NumberLong('9223372036854775807')}", 0));
	ck_assert_int_eq(hash_of("{v: NumberDecimal('-Infinity')}", 0),
			 hash_of("{v: NumberLong('-9223372036854775808')}", 0));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("shard");
	TCase *tc = tcase_create("hash");

	tcase_add_test(tc, test_query_shard_hash_mongodb_values);
	tcase_add_test(tc, test_query_shard_hash_seed_one);
	tcase_add_test(tc, test_query_shard_hash_decimal_by_value);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
