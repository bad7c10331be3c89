/*
 * test_key.c - unit tests of compare.c (MongoDB's comparison order) and key.c (the
 * order-preserving key encoding). Concrete cases follow the manual's "Comparison/Sort
 * Order" page; the property tests check on random values of every BSON type that memcmp
 * order of the encodings equals store_value_compare order, ascending, descending and for
 * compound keys. The PRNG seed is fixed; set DOCFS_SEED to try others (a failure message
 * shows the seed and both values).
 */
#include "store.h"

#include <check.h>

#include "test_rand.h"
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ----------------------------------------------------------------------- */

static void seed_init(void)
{
	seed_start(UINT64_C(0x5eed0fd0c5), 0);
}


static int sign(int c)
{
	return c < 0 ? -1 : c > 0;
}

/* memcmp order: common prefix, then the shorter first */
static int key_cmp(const struct dfs_buf *a, const struct dfs_buf *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = n ? memcmp(a->data, b->data, n) : 0;

	if (c)
		return sign(c);
	return a->len < b->len ? -1 : a->len > b->len;
}

/* A value kept alive in its own document {"v": value}. */
struct val {
	bson_t *doc;
	bson_value_t v; /* Borrowed from doc */
};

static void val_take(struct val *x, bson_t *doc)
{
	bson_iter_t it;

	x->doc = doc;
	ck_assert(bson_iter_init_find(&it, doc, "v"));
	x->v = *bson_iter_value(&it);
}

static char *val_text(const struct val *x)
{
	return bson_as_canonical_extended_json(x->doc, NULL);
}

static void key_of(const bson_value_t *v, bool desc, struct dfs_buf *out)
{
	struct dfs_err err = {0};

	dfs_buf_reset(out);
	ck_assert_msg(store_key_append(out, v, desc, &err) == 0, "key: %s", err.msg);
}

static bson_value_t vint32(int32_t i)
{
	bson_value_t v;

	v.value_type = BSON_TYPE_INT32;
	v.value.v_int32 = i;
	return v;
}

static bson_value_t vint64(int64_t i)
{
	bson_value_t v;

	v.value_type = BSON_TYPE_INT64;
	v.value.v_int64 = i;
	return v;
}

static bson_value_t vdouble(double d)
{
	bson_value_t v;

	v.value_type = BSON_TYPE_DOUBLE;
	v.value.v_double = d;
	return v;
}

static bson_value_t vdec(const char *s)
{
	bson_value_t v;

	v.value_type = BSON_TYPE_DECIMAL128;
	ck_assert_msg(bson_decimal128_from_string(s, &v.value.v_decimal128), "decimal %s", s);
	return v;
}

static bson_value_t vstr(const char *s, size_t n)
{
	bson_value_t v;

	v.value_type = BSON_TYPE_UTF8;
	v.value.v_utf8.str = (char *)s;
	v.value.v_utf8.len = (uint32_t)n;
	return v;
}

static bson_value_t vtype(bson_type_t t)
{
	bson_value_t v;

	memset(&v, 0, sizeof(v));
	v.value_type = t;
	return v;
}

/* Checks compare(a, b) == expect and that both key encodings agree, in both directions. */
static void check_pair(const bson_value_t *a, const bson_value_t *b, int expect, int line)
{
	struct dfs_buf ka, kb;
	int c = sign(store_value_compare(a, b));
	int r = sign(store_value_compare(b, a));

	dfs_buf_init(&ka);
	dfs_buf_init(&kb);
	ck_assert_msg(c == expect, "line %d: compare gave %d, expected %d", line, c, expect);
	ck_assert_msg(r == -expect, "line %d: reversed compare gave %d", line, r);
	key_of(a, false, &ka);
	key_of(b, false, &kb);
	ck_assert_msg(key_cmp(&ka, &kb) == expect, "line %d: ascending keys disagree", line);
	key_of(a, true, &ka);
	key_of(b, true, &kb);
	ck_assert_msg(key_cmp(&ka, &kb) == -expect, "line %d: descending keys disagree", line);
	dfs_buf_release(&ka);
	dfs_buf_release(&kb);
}

#define LT(a, b)                                                                                   \
	do {                                                                                       \
		bson_value_t a_ = (a), b_ = (b);                                                   \
		check_pair(&a_, &b_, -1, __LINE__);                                                \
	} while (0)
#define EQ(a, b)                                                                                   \
	do {                                                                                       \
		bson_value_t a_ = (a), b_ = (b);                                                   \
		check_pair(&a_, &b_, 0, __LINE__);                                                 \
	} while (0)

/* Builds a value from canonical Extended JSON {"v": ...}, kept in x (which frees the one it
 * held, so the values of one check_pair must use two different x). */
static bson_value_t vjson(struct val *x, const char *json)
{
	bson_error_t e;
	bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &e);

	ck_assert_msg(doc != NULL, "json %s: %s", json, e.message);
	if (x->doc)
		bson_destroy(x->doc);
	val_take(x, doc);
	return x->v;
}

/* ---- concrete cases ---------------------------------------------------------------- */

START_TEST(test_store_type_bracket_order)
{
	static const bson_type_t order[] = {
	    BSON_TYPE_MINKEY,	 BSON_TYPE_NULL,      BSON_TYPE_INT32,	    BSON_TYPE_UTF8,
	    BSON_TYPE_DOCUMENT,	 BSON_TYPE_ARRAY,     BSON_TYPE_BINARY,	    BSON_TYPE_OID,
	    BSON_TYPE_BOOL,	 BSON_TYPE_DATE_TIME, BSON_TYPE_TIMESTAMP,  BSON_TYPE_REGEX,
	    BSON_TYPE_DBPOINTER, BSON_TYPE_CODE,      BSON_TYPE_CODEWSCOPE, BSON_TYPE_MAXKEY,
	};
	size_t i;

	for (i = 0; i + 1 < sizeof(order) / sizeof(order[0]); i++)
		ck_assert_int_lt(store_type_bracket(order[i]), store_type_bracket(order[i + 1]));
	ck_assert_int_gt(store_type_bracket(BSON_TYPE_MINKEY), 0);
	ck_assert_int_eq(store_type_bracket(BSON_TYPE_NULL),
			 store_type_bracket(BSON_TYPE_UNDEFINED));
	ck_assert_int_eq(store_type_bracket(BSON_TYPE_DOUBLE),
			 store_type_bracket(BSON_TYPE_DECIMAL128));
	ck_assert_int_eq(store_type_bracket(BSON_TYPE_INT64), store_type_bracket(BSON_TYPE_INT32));
	ck_assert_int_eq(store_type_bracket(BSON_TYPE_UTF8), store_type_bracket(BSON_TYPE_SYMBOL));
	ck_assert_int_eq(store_type_bracket(BSON_TYPE_EOD), 0);
}
END_TEST

START_TEST(test_store_value_compare_cross_type)
{
	struct val x[16] = {{0}};
	const char *json[] = {
	    "{\"v\": {\"$minKey\": 1}}",
	    "{\"v\": null}",
	    "{\"v\": {\"$numberInt\": \"1\"}}",
	    "{\"v\": \"a\"}",
	    "{\"v\": {}}",
	    "{\"v\": []}",
	    "{\"v\": {\"$binary\": {\"base64\": \"\", \"subType\": \"00\"}}}",
	    "{\"v\": {\"$oid\": \"000000000000000000000000\"}}",
	    "{\"v\": false}",
	    "{\"v\": {\"$date\": {\"$numberLong\": \"-5\"}}}",
	    "{\"v\": {\"$timestamp\": {\"t\": 0, \"i\": 0}}}",
	    "{\"v\": {\"$regularExpression\": {\"pattern\": \"\", \"options\": \"\"}}}",
	    "{\"v\": {\"$dbPointer\": {\"$ref\": \"a\", \"$id\": "
	    "{\"$oid\": \"000000000000000000000000\"}}}}",
	    "{\"v\": {\"$code\": \"\"}}",
	    "{\"v\": {\"$code\": \"\", \"$scope\": {}}}",
	    "{\"v\": {\"$maxKey\": 1}}",
	};
	size_t i, j, n = sizeof(json) / sizeof(json[0]);

	for (i = 0; i < n; i++)
		vjson(&x[i], json[i]);
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			check_pair(&x[i].v, &x[j].v, i < j ? -1 : i > j, __LINE__);
	/* the extremes of a bracket stay inside it */
	LT(vdouble(INFINITY), vstr("", 0));
	LT(vdec("Infinity"), vstr("", 0));
	LT(vtype(BSON_TYPE_NULL), vdouble(NAN));
	LT(vtype(BSON_TYPE_UNDEFINED), vdec("-Infinity"));
	EQ(vtype(BSON_TYPE_NULL), vtype(BSON_TYPE_UNDEFINED));
	EQ(vtype(BSON_TYPE_MINKEY), vtype(BSON_TYPE_MINKEY));
	for (i = 0; i < n; i++)
		bson_destroy(x[i].doc);
}
END_TEST

START_TEST(test_store_value_compare_numbers_across_types)
{
	/* equal values of all four types */
	EQ(vint32(5), vdouble(5.0));
	EQ(vint32(5), vint64(5));
	EQ(vint64(5), vdec("5"));
	EQ(vdouble(5.0), vdec("5.0"));
	EQ(vdec("5.00"), vdec("0.5E+1"));
	EQ(vdec("50E-1"), vint32(5));
	EQ(vint32(-7), vdec("-7.000"));
	EQ(vdouble(0.0), vdouble(-0.0));
	EQ(vdouble(-0.0), vint32(0));
	EQ(vdec("-0"), vint64(0));
	EQ(vdec("0E+300"), vdec("-0E-6000"));
	EQ(vdouble(1.5), vdec("1.5"));
	EQ(vdouble(0.125), vdec("1.25E-1"));
	EQ(vdouble(NAN), vdec("NaN"));
	EQ(vdouble(NAN), vdouble(-NAN));
	EQ(vdec("-NaN"), vdec("NaN"));
	EQ(vdouble(INFINITY), vdec("Infinity"));
	EQ(vdouble(-INFINITY), vdec("-Infinity"));
	EQ(vint64(INT64_MAX), vdec("9223372036854775807"));
	EQ(vint64(INT64_MIN), vdouble(-9223372036854775808.0));
	EQ(vint64(INT64_MIN), vdec("-9.223372036854775808E+18"));
	EQ(vdouble(9223372036854775808.0), vdec("9223372036854775808"));
	EQ(vdouble(1e22), vdec("1E+22")); /* 10^22 is a double, 10^23 is not */
	LT(vdouble(1e23), vdec("1E+23"));
}
END_TEST

START_TEST(test_store_value_compare_numbers_order)
{
	/* NaN below every number, then by value */
	LT(vdouble(NAN), vdouble(-INFINITY));
	LT(vdec("NaN"), vdec("-Infinity"));
	LT(vdouble(NAN), vint64(INT64_MIN));
	LT(vdouble(-INFINITY), vdec("-9.999999999999999999999999999999999E+6144"));
	LT(vdec("-1E+400"), vdouble(-DBL_MAX));
	LT(vdouble(-1.5), vint32(-1));
	LT(vint32(-1), vdec("-0.999999999999999999999999999999999"));
	LT(vdec("-1E-6176"), vdouble(0));
	LT(vdouble(0), vdec("1E-6176"));
	LT(vdec("1E-400"), vdouble(4.9406564584124654e-324));
	LT(vdouble(4.9406564584124654e-324), vdouble(DBL_MIN));
	LT(vint32(1), vdouble(1.0000000000000002));
	LT(vdouble(DBL_MAX), vdec("1E+400"));
	LT(vdec("1E+400"), vdouble(INFINITY));
	LT(vdec("9.999999999999999999999999999999999E+6144"), vdec("Infinity"));
	/* int64 against double exactly, beyond 2^53 */
	LT(vdouble(9007199254740992.0), vint64(9007199254740993));
	LT(vint64(9007199254740993), vdouble(9007199254740994.0));
	LT(vint64(INT64_MAX), vdouble(9223372036854775808.0));
	LT(vint64(INT64_MAX - 1), vint64(INT64_MAX));
	LT(vdouble(-9223372036854777856.0), vint64(INT64_MIN));
	LT(vint64(INT64_MIN), vint64(INT64_MIN + 1));
	LT(vdouble(4611686018427387904.5 - 0.5), vint64(4611686018427387905));
	LT(vint64(3), vdouble(3.5));
	LT(vdouble(-3.5), vint64(-3));
	/* decimal against double, exactly: double 0.1 is 0.10000000000000000555111512312578... */
	LT(vdec("0.1"), vdouble(0.1));
	LT(vdec("0.1000000000000000055511151231257827"), vdouble(0.1));
	LT(vdouble(0.1), vdec("0.1000000000000000055511151231257828"));
	LT(vdec("0.3"), vdouble(0.30000000000000004));
	LT(vdouble(0.3), vdec("0.3")); /* double 0.3 is 0.299999999999999988897769753748... */
	LT(vdec("9007199254740992.5"), vint64(9007199254740993));
	LT(vdouble(9007199254740992.0), vdec("9007199254740992.5"));
	LT(vint64(INT64_MAX), vdec("9223372036854775807.000000000000001"));
	LT(vdec("-9223372036854775808.5"), vint64(INT64_MIN));
	LT(vdec("1.000000000000000000000000000000001"), vdouble(1.0000000000000002));
	LT(vdouble(1), vdec("1.000000000000000000000000000000001"));
	LT(vdec("12345678901234567890123456789"), vdec("1.2345678901234567890123456790E+28"));
}
END_TEST

START_TEST(test_store_value_compare_strings_bytewise)
{
	LT(vstr("", 0), vstr("\0", 1));
	LT(vstr("\0", 1), vstr("\0\0", 2));
	LT(vstr("\0\xff", 2), vstr("\x01", 1));
	LT(vstr("A", 1), vstr("a", 1));
	LT(vstr("a", 1), vstr("ab", 2));
	LT(vstr("ab", 2), vstr("b", 1));
	LT(vstr("a\0", 2), vstr("a\x01", 2));
	LT(vstr("z", 1), vstr("\xc3\xa9", 2));
	EQ(vstr("x\0y", 3), vstr("x\0y", 3));
}
END_TEST

START_TEST(test_store_value_compare_documents_and_arrays)
{
	struct val a = {0}, b = {0};

	/* field by field: type bracket first, then the name, then the value */
	LT(vjson(&a, "{\"v\": {\"a\": 1}}"), vjson(&b, "{\"v\": {\"a\": 2}}"));
	LT(vjson(&a, "{\"v\": {\"a\": 1}}"), vjson(&b, "{\"v\": {\"b\": 0}}"));
	LT(vjson(&a, "{\"v\": {\"b\": 1}}"), vjson(&b, "{\"v\": {\"a\": \"x\"}}"));
	LT(vjson(&a, "{\"v\": {\"a\": 1}}"), vjson(&b, "{\"v\": {\"a\": 1, \"b\": null}}"));
	LT(vjson(&a, "{\"v\": {}}"), vjson(&b, "{\"v\": {\"\": {\"$minKey\": 1}}}"));
	EQ(vjson(&a, "{\"v\": {\"a\": {\"$numberLong\": \"1\"}}}"),
	   vjson(&b, "{\"v\": {\"a\": 1.0}}"));
	LT(vjson(&a, "{\"v\": {\"a\": 1, \"b\": 2}}"), vjson(&b, "{\"v\": {\"b\": 1, \"a\": 2}}"));
	LT(vjson(&a, "{\"v\": {\"a\": {\"b\": 1}}}"),
	   vjson(&b, "{\"v\": {\"a\": {\"b\": 1, \"c\": 0}}}"));
	/* arrays element by element, shorter first, after every document */
	LT(vjson(&a, "{\"v\": [1, 2]}"), vjson(&b, "{\"v\": [1, 3]}"));
	LT(vjson(&a, "{\"v\": [1]}"), vjson(&b, "{\"v\": [1, 0]}"));
	LT(vjson(&a, "{\"v\": []}"), vjson(&b, "{\"v\": [{\"$minKey\": 1}]}"));
	LT(vjson(&a, "{\"v\": [2]}"), vjson(&b, "{\"v\": [\"1\"]}"));
	LT(vjson(&a, "{\"v\": {\"z\": {\"$maxKey\": 1}}}"), vjson(&b, "{\"v\": []}"));
	LT(vjson(&a, "{\"v\": [[1, 2], [3]]}"), vjson(&b, "{\"v\": [[1, 2], [3, 4]]}"));
	EQ(vjson(&a, "{\"v\": [1, \"x\"]}"), vjson(&b, "{\"v\": [1.0, {\"$symbol\": \"x\"}]}"));
	EQ(vjson(&a, "{\"v\": [null]}"), vjson(&b, "{\"v\": [{\"$undefined\": true}]}"));
	bson_destroy(a.doc);
	bson_destroy(b.doc);
}
END_TEST

START_TEST(test_store_value_compare_other_types)
{
	struct val a = {0}, b = {0};

#define J(x) "{\"v\": " x "}"
	/* binary: length, then subtype, then bytes */
	LT(vjson(&a, J("{\"$binary\": {\"base64\": \"/w==\", \"subType\": \"05\"}}")),
	   vjson(&b, J("{\"$binary\": {\"base64\": \"AAA=\", \"subType\": \"00\"}}")));
	LT(vjson(&a, J("{\"$binary\": {\"base64\": \"/w==\", \"subType\": \"00\"}}")),
	   vjson(&b, J("{\"$binary\": {\"base64\": \"AA==\", \"subType\": \"01\"}}")));
	LT(vjson(&a, J("{\"$binary\": {\"base64\": \"AA==\", \"subType\": \"80\"}}")),
	   vjson(&b, J("{\"$binary\": {\"base64\": \"AQ==\", \"subType\": \"80\"}}")));
	LT(vjson(&a, J("{\"$oid\": \"00000000000000000000000f\"}")),
	   vjson(&b, J("{\"$oid\": \"0000000000000000000000f0\"}")));
	LT(vjson(&a, J("false")), vjson(&b, J("true")));
	LT(vjson(&a, J("{\"$date\": {\"$numberLong\": \"-1\"}}")),
	   vjson(&b, J("{\"$date\": {\"$numberLong\": \"0\"}}")));
	LT(vjson(&a, J("{\"$date\": {\"$numberLong\": \"-9223372036854775808\"}}")),
	   vjson(&b, J("{\"$date\": {\"$numberLong\": \"9223372036854775807\"}}")));
	/* timestamps unsigned, time then increment */
	LT(vjson(&a, J("{\"$timestamp\": {\"t\": 1, \"i\": 4294967295}}")),
	   vjson(&b, J("{\"$timestamp\": {\"t\": 2, \"i\": 0}}")));
	LT(vjson(&a, J("{\"$timestamp\": {\"t\": 1, \"i\": 0}}")),
	   vjson(&b, J("{\"$timestamp\": {\"t\": 4294967295, \"i\": 0}}")));
	/* regex: pattern, then flags */
	LT(vjson(&a, J("{\"$regularExpression\": {\"pattern\": \"a\", \"options\": \"x\"}}")),
	   vjson(&b, J("{\"$regularExpression\": {\"pattern\": \"ab\", \"options\": \"\"}}")));
	LT(vjson(&a, J("{\"$regularExpression\": {\"pattern\": \"a\", \"options\": \"i\"}}")),
	   vjson(&b, J("{\"$regularExpression\": {\"pattern\": \"a\", \"options\": \"im\"}}")));
	LT(vjson(&a, J("{\"$code\": \"a\"}")), vjson(&b, J("{\"$code\": \"b\"}")));
	LT(vjson(&a, J("{\"$code\": \"a\", \"$scope\": {\"x\": 1}}")),
	   vjson(&b, J("{\"$code\": \"a\", \"$scope\": {\"x\": 2}}")));
	LT(vjson(&a, J("{\"$dbPointer\": {\"$ref\": \"b\", \"$id\": "
		       "{\"$oid\": \"ffffffffffffffffffffffff\"}}}")),
	   vjson(&b, J("{\"$dbPointer\": {\"$ref\": \"aa\", \"$id\": "
		       "{\"$oid\": \"000000000000000000000000\"}}}")));
	EQ(vjson(&a, J("{\"$symbol\": \"q\"}")), vstr("q", 1));
#undef J
	bson_destroy(a.doc);
	bson_destroy(b.doc);
}
END_TEST

START_TEST(test_store_doc_compare_and_iter_compare)
{
	bson_t *a = BCON_NEW("x", BCON_INT32(1), "y", BCON_UTF8("s"));
	bson_t *b = BCON_NEW("x", BCON_DOUBLE(1.0), "y", BCON_UTF8("t"));
	bson_t *c = BCON_NEW("x", BCON_INT64(1), "y", BCON_UTF8("s"));
	bson_iter_t ia, ib;

	ck_assert_int_lt(store_doc_compare(a, b), 0);
	ck_assert_int_gt(store_doc_compare(b, a), 0);
	ck_assert_int_eq(store_doc_compare(a, c), 0);
	ck_assert(bson_iter_init_find(&ia, a, "x"));
	ck_assert(bson_iter_init_find(&ib, b, "y"));
	ck_assert_int_lt(store_iter_compare(&ia, &ib), 0);
	ck_assert(bson_iter_init_find(&ib, b, "x"));
	ck_assert_int_eq(store_iter_compare(&ia, &ib), 0);
	bson_destroy(a);
	bson_destroy(b);
	bson_destroy(c);
}
END_TEST

START_TEST(test_store_key_append_equal_numbers_identical)
{
	const bson_value_t same[] = {vint32(5),	     vint64(5),
				     vdouble(5.0),   vdec("5"),
				     vdec("5.0"),    vdec("0.0005E+4"),
				     vdec("500E-2"), vdec("5.000000000000000000000000000000000")};
	const bson_value_t big[] = {vint64(9007199254740993), vdec("9007199254740993"),
				    vdec("9.007199254740993000E+15")};
	struct dfs_buf k0, k;
	size_t i;

	dfs_buf_init(&k0);
	dfs_buf_init(&k);
	key_of(&same[0], false, &k0);
	for (i = 1; i < sizeof(same) / sizeof(same[0]); i++) {
		key_of(&same[i], false, &k);
		ck_assert_uint_eq(k.len, k0.len);
		ck_assert_msg(memcmp(k.data, k0.data, k.len) == 0, "value %zu differs", i);
	}
	key_of(&big[0], false, &k0);
	for (i = 1; i < sizeof(big) / sizeof(big[0]); i++) {
		key_of(&big[i], false, &k);
		ck_assert_uint_eq(k.len, k0.len);
		ck_assert(memcmp(k.data, k0.data, k.len) == 0);
	}
	dfs_buf_release(&k0);
	dfs_buf_release(&k);
}
END_TEST

START_TEST(test_store_key_append_descending_inverts)
{
	bson_value_t v = vstr("a\0b", 3);
	struct dfs_buf up, down;
	size_t i;

	dfs_buf_init(&up);
	dfs_buf_init(&down);
	key_of(&v, false, &up);
	key_of(&v, true, &down);
	ck_assert_uint_eq(up.len, down.len);
	for (i = 0; i < up.len; i++)
		ck_assert_uint_eq((unsigned char)up.data[i], (unsigned char)~down.data[i]);
	/* appends: the buffer keeps what it had */
	dfs_buf_reset(&up);
	dfs_buf_puts(&up, "pre");
	ck_assert_int_eq(store_key_append(&up, &v, true, NULL), 0);
	ck_assert_uint_eq(up.len, 3 + down.len);
	ck_assert(memcmp(up.data, "pre", 3) == 0);
	ck_assert(memcmp(up.data + 3, down.data, down.len) == 0);
	dfs_buf_release(&up);
	dfs_buf_release(&down);
}
END_TEST

START_TEST(test_store_key_append_rejects_bad_values)
{
	struct dfs_err err = {0};
	struct dfs_buf k;
	bson_t *doc = bson_new(), *cur;
	bson_t children[DFS_MAX_DEPTH + 2];
	bson_value_t v;
	bson_iter_t it;
	uint8_t bad[] = {12, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 1};	  /* must end in 0 */
	uint8_t bad2[] = {13, 0, 0, 0, 0x02, 'a', 0, 100, 0, 0, 0, 0, 0}; /* string overruns */
	int i;

	dfs_buf_init(&k);
	dfs_buf_puts(&k, "keep");
	/* nested one level too deep (the value itself is level 1) */
	cur = doc;
	for (i = 0; i <= DFS_MAX_DEPTH; i++) {
		bson_append_document_begin(cur, "d", -1, &children[i]);
		cur = &children[i];
	}
	for (i = DFS_MAX_DEPTH; i >= 0; i--)
		bson_append_document_end(i ? &children[i - 1] : doc, &children[i]);
	ck_assert(bson_iter_init_find(&it, doc, "d"));
	ck_assert_int_eq(store_key_append(&k, bson_iter_value(&it), false, &err), DFS_EINVAL);
	ck_assert_str_eq(k.data, "keep");
	ck_assert_ptr_nonnull(strstr(err.msg, "deeper"));
	/* invalid embedded bson */
	dfs_err_clear(&err);
	v.value_type = BSON_TYPE_DOCUMENT;
	v.value.v_doc.data = bad;
	v.value.v_doc.data_len = sizeof(bad);
	ck_assert_int_eq(store_key_append(&k, &v, false, &err), DFS_EINVAL);
	ck_assert_str_eq(k.data, "keep");
	dfs_err_clear(&err);
	v.value.v_doc.data = bad2;
	v.value.v_doc.data_len = sizeof(bad2);
	ck_assert_int_eq(store_key_append(&k, &v, false, &err), DFS_EINVAL);
	ck_assert_str_eq(k.data, "keep");
	/* an unknown type */
	dfs_err_clear(&err);
	v = vtype((bson_type_t)0x42);
	ck_assert_int_eq(store_key_append(&k, &v, false, &err), DFS_EINVAL);
	ck_assert_uint_eq(k.len, 4);
	bson_destroy(doc);
	dfs_buf_release(&k);
}
END_TEST

/* ---- random values ----------------------------------------------------------------- */

static const int64_t boundary_ints[] = {
    INT64_MIN,
    INT64_MIN + 1,
    INT64_MIN + 1024,
    INT64_MAX,
    INT64_MAX - 1,
    INT64_MAX - 511,
    INT64_MAX - 512,
    INT64_MAX - 1023,
    INT32_MIN,
    INT32_MAX,
    (int64_t)INT32_MAX + 1,
    (int64_t)INT32_MIN - 1,
    INT64_C(9007199254740992),
    INT64_C(9007199254740993),
    INT64_C(9007199254740991),
    INT64_C(9007199254740994),
    INT64_C(9007199254740995),
    -INT64_C(9007199254740992),
    -INT64_C(9007199254740993),
    INT64_C(4611686018427387904),
    INT64_C(4611686018427387905),
    INT64_C(1000000000000000000),
    INT64_C(999999999999999999),
    INT64_C(1) << 54,
    (INT64_C(1) << 54) + 2,
    0,
    1,
    -1,
};

static const double special_doubles[] = {
    0.0,
    -0.0,
    NAN,
    -NAN,
    INFINITY,
    -INFINITY,
    DBL_MAX,
    -DBL_MAX,
    DBL_MIN,
    -DBL_MIN,
    4.9406564584124654e-324,
    -4.9406564584124654e-324,
    2.2250738585072009e-308, /* largest subnormal */
    0.1,
    0.2,
    0.3,
    0.30000000000000004,
    0.5,
    1.5,
    -2.5,
    1e300,
    1e-300,
    1e22,
    1e23,
    9007199254740992.0,
    9007199254740994.0,
    9223372036854775808.0,
    -9223372036854775808.0,
    9223372036854774784.0,
    18446744073709551616.0,
    1.0000000000000002,
    0.9999999999999999,
};

static const char *const special_decimals[] = {
    "NaN",
    "-NaN",
    "Infinity",
    "-Infinity",
    "0",
    "-0",
    "0E+300",
    "-0E-6000",
    "0.000",
    "1E+6144",
    "9.999999999999999999999999999999999E+6144",
    "-9.999999999999999999999999999999999E+6144",
    "1E-6176",
    "-1E-6176",
    "1E+400",
    "-1E+400",
    "1E-400",
    "1E-330",
    "4.9406564584124654E-324",
    "4.940656458412465441765687928682213E-324",
    "2.470328229206232720882538E-324",
    "1.797693134862315708145274237317044E+308",
    "1.797693134862315808E+308",
    "0.1",
    "0.10",
    "0.3",
    "1.5",
    "-12.345E+3",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "9007199254740993",
    "9007199254740992.5",
    "18446744073709551616",
    "1.000000000000000000000000000000001",
    "0.9999999999999999999999999999999999",
};

static void append_decimal_text(bson_t *b, const char *k, const char *text)
{
	bson_decimal128_t d;

	if (!bson_decimal128_from_string(text, &d))
		bson_decimal128_from_string("7", &d);
	bson_append_decimal128(b, k, -1, &d);
}

/* An integer as a random numeric type (doubles may round it, which is fine). */
static void append_int_any(bson_t *b, const char *k, int64_t n)
{
	char text[64];

	switch (rnd(6)) {
	case 0:
		if (n >= INT32_MIN && n <= INT32_MAX) {
			bson_append_int32(b, k, -1, (int32_t)n);
			break;
		}
		/* fall through */
	case 1:
		bson_append_int64(b, k, -1, n);
		break;
	case 2:
		bson_append_double(b, k, -1, (double)n);
		break;
	case 3:
		snprintf(text, sizeof(text), "%" PRId64, n);
		append_decimal_text(b, k, text);
		break;
	case 4:
		snprintf(text, sizeof(text), "%" PRId64 ".00", n);
		append_decimal_text(b, k, text);
		break;
	default:
		snprintf(text, sizeof(text), "%" PRId64 "0E-1", n);
		append_decimal_text(b, k, text);
		break;
	}
}

/* A double as itself or as a nearby or equal decimal. */
static void append_double_any(bson_t *b, const char *k, double d)
{
	static const char *const fmts[] = {"%.17g", "%.34g", "%.16g", "%.25g"};
	char text[64];

	if (rnd(2) || !isfinite(d)) {
		bson_append_double(b, k, -1, d);
		return;
	}
	snprintf(text, sizeof(text), fmts[rnd(4)], d);
	append_decimal_text(b, k, text);
}

static void gen_number(bson_t *b, const char *k)
{
	char text[96];
	uint64_t bits;
	double d;
	int i, n;

	switch (rnd(10)) {
	case 0:
	case 1:
		append_int_any(b, k, (int64_t)rnd(9) - 4);
		break;
	case 2:
		append_int_any(
		    b, k, boundary_ints[rnd(sizeof(boundary_ints) / sizeof(boundary_ints[0]))]);
		break;
	case 3:
		bits = rnd64() >> rnd(64);
		append_int_any(b, k, rnd(2) ? (int64_t)bits : -(int64_t)(bits >> 1));
		break;
	case 4:
		bits = rnd64();
		memcpy(&d, &bits, sizeof(d));
		append_double_any(b, k, d);
		break;
	case 5:
		append_double_any(
		    b, k,
		    special_doubles[rnd(sizeof(special_doubles) / sizeof(special_doubles[0]))]);
		break;
	case 6:
		/* simple decimals, and the same values as doubles when binary fractions */
		n = (int)rnd(2001) - 1000;
		if (rnd(2)) {
			snprintf(text, sizeof(text), "%dE%d", n, (int)rnd(9) - 4);
			append_decimal_text(b, k, text);
		} else {
			d = ldexp(n, -(int)rnd(6));
			if (rnd(2))
				bson_append_double(b, k, -1, d);
			else {
				snprintf(text, sizeof(text), "%.30g", d);
				append_decimal_text(b, k, text);
			}
		}
		break;
	case 7: {
		static const int ranges[] = {30, 400, 6200};
		int range = ranges[rnd(3)];

		n = 1 + (int)rnd(34);
		i = 0;
		if (rnd(2))
			text[i++] = '-';
		for (int j = 0; j < n; j++)
			text[i++] = (char)('0' + (j == 0 ? 1 + rnd(9) : rnd(10)));
		snprintf(text + i, sizeof(text) - (size_t)i, "E%d", (int)rnd(2 * range) - range);
		append_decimal_text(b, k, text);
		break;
	}
	case 8:
		if (rnd(8) == 0) {
			/* a non-canonical coefficient (over 10^34 - 1): zero */
			bson_decimal128_t dz;

			dz.high = UINT64_C(0x3041ed09bead87c0) | (rnd64() & 0x7fff);
			dz.low = rnd64() | UINT64_C(0x378d8e6400000000);
			if (rnd(2))
				dz.high =
				    UINT64_C(0x6000000000000000) | (rnd64() & 0x1fffffffffffffff);
			bson_append_decimal128(b, k, -1, &dz);
			break;
		}
		append_decimal_text(
		    b, k,
		    special_decimals[rnd(sizeof(special_decimals) / sizeof(special_decimals[0]))]);
		break;
	default:
		/* binary fractions as exact decimals: equal values across types */
		d = ldexp((double)(rnd64() >> (44 + rnd(20))), (int)rnd(40) - 20);
		if (rnd(2))
			d = -d;
		if (rnd(2)) {
			bson_append_double(b, k, -1, d);
		} else {
			snprintf(text, sizeof(text), "%.34g", d);
			append_decimal_text(b, k, text);
		}
		break;
	}
}

static void gen_bytes(char *out, size_t n)
{
	static const char alphabet[] = {0x00, 0x01, 'a', 'b', 0x7f, (char)0xc3, (char)0xff};
	size_t i;

	for (i = 0; i < n; i++)
		out[i] = alphabet[rnd(sizeof(alphabet))];
}

static void gen_value(bson_t *b, const char *k, int depth);

static void gen_doc(bson_t *b, bool array, int depth)
{
	static const char *const names[] = {"a", "b", "ab", "", "a\x7f"};
	unsigned n = rnd(4), i;
	char idx[16];

	for (i = 0; i < n; i++) {
		if (array)
			snprintf(idx, sizeof(idx), "%u", i);
		gen_value(b, array ? idx : names[rnd(5)], depth + 1);
	}
}

static void gen_oid(bson_oid_t *oid)
{
	size_t i;

	for (i = 0; i < 12; i++)
		oid->bytes[i] = (uint8_t)(rnd(3) == 0 ? 0xff : rnd(3));
}

static void gen_value(bson_t *b, const char *k, int depth)
{
	static const char *const pats[] = {"", "a", "ab", "b"};
	static const char *const opts[] = {"", "i", "im", "m"};
	static const int64_t dates[] = {INT64_MIN, -1, 0, 1, INT64_MAX, 1700000000000};
	static const uint32_t ts[] = {0, 1, 2, 0x7fffffff, 0x80000000, 0xffffffff};
	char s[8];
	uint8_t bin[4];
	bson_oid_t oid;
	bson_t child;
	size_t n;
	unsigned pick = rnd(depth >= 3 ? 20 : 24);

	switch (pick) {
	case 0:
	case 1:
	case 2:
	case 3:
	case 4:
	case 5:
		gen_number(b, k);
		break;
	case 6:
	case 7:
	case 8:
		n = rnd(5);
		gen_bytes(s, n);
		if (rnd(6))
			bson_append_utf8(b, k, -1, s, (int)n);
		else
			bson_append_symbol(b, k, -1, s, (int)n);
		break;
	case 9:
		n = rnd(4);
		for (size_t i = 0; i < n; i++)
			bin[i] = (uint8_t)(rnd(2) ? 0xff : rnd(2));
		bson_append_binary(b, k, -1,
				   rnd(3) == 0 ? BSON_SUBTYPE_USER : (bson_subtype_t)rnd(2), bin,
				   (uint32_t)n);
		break;
	case 10:
		gen_oid(&oid);
		bson_append_oid(b, k, -1, &oid);
		break;
	case 11:
		bson_append_bool(b, k, -1, rnd(2));
		break;
	case 12:
		bson_append_date_time(b, k, -1, dates[rnd(6)]);
		break;
	case 13:
		bson_append_timestamp(b, k, -1, ts[rnd(6)], ts[rnd(6)]);
		break;
	case 14:
		bson_append_regex(b, k, -1, pats[rnd(4)], opts[rnd(4)]);
		break;
	case 15:
		gen_oid(&oid);
		bson_append_dbpointer(b, k, -1, pats[rnd(4)], &oid);
		break;
	case 16:
		switch (rnd(5)) {
		case 0:
			bson_append_minkey(b, k, -1);
			break;
		case 1:
			bson_append_maxkey(b, k, -1);
			break;
		case 2:
			bson_append_undefined(b, k, -1);
			break;
		default:
			bson_append_null(b, k, -1);
			break;
		}
		break;
	case 17:
		bson_append_code(b, k, -1, pats[rnd(4)]);
		break;
	case 18: {
		bson_t scope = BSON_INITIALIZER;

		if (rnd(2))
			gen_value(&scope, "x", 3);
		bson_append_code_with_scope(b, k, -1, pats[rnd(2)], &scope);
		bson_destroy(&scope);
		break;
	}
	case 19:
		bson_append_null(b, k, -1);
		break;
	case 20:
	case 21:
		bson_append_document_begin(b, k, -1, &child);
		gen_doc(&child, false, depth);
		bson_append_document_end(b, &child);
		break;
	default:
		bson_append_array_begin(b, k, -1, &child);
		gen_doc(&child, true, depth);
		bson_append_array_end(b, &child);
		break;
	}
}

struct pool {
	struct val *v;
	struct dfs_buf *asc;
	struct dfs_buf *desc;
	size_t n;
};

static void pool_fill(struct pool *p, size_t n, bool numbers_only)
{
	size_t i;

	p->n = n;
	p->v = calloc(n, sizeof(*p->v));
	p->asc = calloc(n, sizeof(*p->asc));
	p->desc = calloc(n, sizeof(*p->desc));
	ck_assert(p->v && p->asc && p->desc);
	for (i = 0; i < n; i++) {
		bson_t *doc = bson_new();

		if (numbers_only)
			gen_number(doc, "v");
		else
			gen_value(doc, "v", 0);
		val_take(&p->v[i], doc);
		dfs_buf_init(&p->asc[i]);
		dfs_buf_init(&p->desc[i]);
		key_of(&p->v[i].v, false, &p->asc[i]);
		key_of(&p->v[i].v, true, &p->desc[i]);
	}
}

static void pool_free(struct pool *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		bson_destroy(p->v[i].doc);
		dfs_buf_release(&p->asc[i]);
		dfs_buf_release(&p->desc[i]);
	}
	free(p->v);
	free(p->asc);
	free(p->desc);
}

static void fail_pair(const struct pool *p, size_t a, size_t b, int c, int k, const char *what)
{
	char *ta = val_text(&p->v[a]), *tb = val_text(&p->v[b]);

	ck_abort_msg("seed %" PRIu64 ": %s: compare %d, keys %d\n  a = %s\n  b = %s", seed_used,
		     what, c, k, ta, tb);
	bson_free(ta);
	bson_free(tb);
}

/* Exact comparison of int32/int64/double through long double (64-bit mantissa), or 2. */
static int oracle_numbers(const bson_value_t *a, const bson_value_t *b)
{
	long double x, y;

	if (LDBL_MANT_DIG < 64)
		return 2;
	switch (a->value_type) {
	case BSON_TYPE_INT32:
		x = a->value.v_int32;
		break;
	case BSON_TYPE_INT64:
		x = (long double)a->value.v_int64;
		break;
	case BSON_TYPE_DOUBLE:
		x = a->value.v_double;
		break;
	default:
		return 2;
	}
	switch (b->value_type) {
	case BSON_TYPE_INT32:
		y = b->value.v_int32;
		break;
	case BSON_TYPE_INT64:
		y = (long double)b->value.v_int64;
		break;
	case BSON_TYPE_DOUBLE:
		y = b->value.v_double;
		break;
	default:
		return 2;
	}
	if (isnan(x) || isnan(y))
		return isnan(x) && isnan(y) ? 0 : isnan(x) ? -1 : 1;
	return x < y ? -1 : x > y;
}

static size_t run_pairs(struct pool *p, size_t pairs)
{
	size_t i, equal = 0;

	for (i = 0; i < pairs; i++) {
		size_t a = rnd((unsigned)p->n), b = rnd((unsigned)p->n);
		int c = sign(store_value_compare(&p->v[a].v, &p->v[b].v));
		int o = oracle_numbers(&p->v[a].v, &p->v[b].v);

		if (c != -sign(store_value_compare(&p->v[b].v, &p->v[a].v)))
			fail_pair(p, a, b, c, 9, "compare is not antisymmetric");
		if (o != 2 && o != c)
			fail_pair(p, a, b, c, o, "compare disagrees with the long double oracle");
		if (key_cmp(&p->asc[a], &p->asc[b]) != c)
			fail_pair(p, a, b, c, key_cmp(&p->asc[a], &p->asc[b]), "ascending");
		if (key_cmp(&p->desc[a], &p->desc[b]) != -c)
			fail_pair(p, a, b, c, key_cmp(&p->desc[a], &p->desc[b]), "descending");
		equal += c == 0 && a != b;
	}
	return equal;
}

START_TEST(test_store_key_append_property_all_types)
{
	struct pool p;
	size_t equal;

	seed_init();
	pool_fill(&p, 6000, false);
	equal = run_pairs(&p, 200000);
	ck_assert_uint_gt(equal, 100); /* the generator must produce ties to test invariant 2 */
	pool_free(&p);
}
END_TEST

START_TEST(test_store_key_append_property_numbers)
{
	struct pool p;
	size_t equal;

	seed_init();
	seed_state ^= 0x1234;
	pool_fill(&p, 6000, true);
	equal = run_pairs(&p, 200000);
	ck_assert_uint_gt(equal, 100);
	pool_free(&p);
}
END_TEST

START_TEST(test_store_key_append_property_compound)
{
	struct pool p;
	struct dfs_buf ka, kb;
	size_t i;

	seed_init();
	seed_state ^= 0x5678;
	pool_fill(&p, 3000, false);
	dfs_buf_init(&ka);
	dfs_buf_init(&kb);
	for (i = 0; i < 100000; i++) {
		size_t a1 = rnd((unsigned)p.n), a2 = rnd((unsigned)p.n);
		size_t b1 = rnd(3) ? rnd((unsigned)p.n) : a1, b2 = rnd((unsigned)p.n);
		bool d1 = rnd(2), d2 = rnd(2);
		int c = sign(store_value_compare(&p.v[a1].v, &p.v[b1].v)) * (d1 ? -1 : 1);
		int k;

		if (c == 0)
			c = sign(store_value_compare(&p.v[a2].v, &p.v[b2].v)) * (d2 ? -1 : 1);
		dfs_buf_reset(&ka);
		dfs_buf_reset(&kb);
		ck_assert_int_eq(store_key_append(&ka, &p.v[a1].v, d1, NULL), 0);
		ck_assert_int_eq(store_key_append(&ka, &p.v[a2].v, d2, NULL), 0);
		ck_assert_int_eq(store_key_append(&kb, &p.v[b1].v, d1, NULL), 0);
		ck_assert_int_eq(store_key_append(&kb, &p.v[b2].v, d2, NULL), 0);
		k = key_cmp(&ka, &kb);
		if (k != c) {
			char *t1 = val_text(&p.v[a1]), *t2 = val_text(&p.v[a2]);
			char *t3 = val_text(&p.v[b1]), *t4 = val_text(&p.v[b2]);

			ck_abort_msg("seed %" PRIu64 ": compound (%d,%d): expected %d, keys %d\n"
				     "  a = %s, %s\n  b = %s, %s",
				     seed_used, d1, d2, c, k, t1, t2, t3, t4);
		}
	}
	dfs_buf_release(&ka);
	dfs_buf_release(&kb);
	pool_free(&p);
}
END_TEST

static Suite *key_suite(void)
{
	Suite *s = suite_create("key");
	TCase *tc = tcase_create("compare");
	TCase *tp = tcase_create("property");

	tcase_add_test(tc, test_store_type_bracket_order);
	tcase_add_test(tc, test_store_value_compare_cross_type);
	tcase_add_test(tc, test_store_value_compare_numbers_across_types);
	tcase_add_test(tc, test_store_value_compare_numbers_order);
	tcase_add_test(tc, test_store_value_compare_strings_bytewise);
	tcase_add_test(tc, test_store_value_compare_documents_and_arrays);
	tcase_add_test(tc, test_store_value_compare_other_types);
	tcase_add_test(tc, test_store_doc_compare_and_iter_compare);
	tcase_add_test(tc, test_store_key_append_equal_numbers_identical);
	tcase_add_test(tc, test_store_key_append_descending_inverts);
	tcase_add_test(tc, test_store_key_append_rejects_bad_values);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tp, 240);
	tcase_add_test(tp, test_store_key_append_property_all_types);
	tcase_add_test(tp, test_store_key_append_property_numbers);
	tcase_add_test(tp, test_store_key_append_property_compound);
	suite_add_tcase(s, tp);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(key_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
