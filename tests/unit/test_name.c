/*
 * test_name.c - unit tests of name.c, the _id <-> file name stem bijection: concrete names
 * of every form, the canonical checks of decoding, and property tests (random _id values
 * round-trip to an equal value; equal values share one name and different values get
 * different names; random stems either fail to decode or encode back to themselves). The
 * PRNG seed is fixed; set DOCFS_SEED to try others.
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

static void seed_init(uint64_t salt)
{
	seed_start(UINT64_C(0xd0cf5a3e), salt);
}


/* Encodes the value of {"v": ...} given as canonical Extended JSON; returns the code. */
static int name_of_json(const char *json, struct dfs_buf *out, struct dfs_err *err)
{
	bson_error_t e;
	bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &e);
	bson_iter_t it;
	int rc;

	ck_assert_msg(doc != NULL, "json %s: %s", json, e.message);
	ck_assert(bson_iter_init_find(&it, doc, "v"));
	dfs_buf_reset(out);
	rc = store_name_from_id(bson_iter_value(&it), out, err);
	bson_destroy(doc);
	return rc;
}

static int name_of(const bson_value_t *v, struct dfs_buf *out, struct dfs_err *err)
{
	dfs_buf_reset(out);
	return store_name_from_id(v, out, err);
}

/* Checks that the value (canonical EJSON) is named stem, and that stem decodes to a value
 * equal to it. */
static void check_name(const char *json, const char *stem, int line)
{
	struct dfs_err err = {0};
	struct dfs_buf out;
	bson_t *want, got = BSON_INITIALIZER;
	bson_error_t e;
	bson_iter_t iw, ig;
	int rc;

	dfs_buf_init(&out);
	rc = name_of_json(json, &out, &err);
	ck_assert_msg(rc == 0, "line %d: %s: %s", line, json, err.msg);
	ck_assert_msg(strlen(stem) == out.len && memcmp(out.data, stem, out.len) == 0,
		      "line %d: %s named '%s', expected '%s'", line, json, out.data, stem);
	rc = store_name_to_id(stem, strlen(stem), &got, &err);
	ck_assert_msg(rc == 0, "line %d: decoding '%s': %s", line, stem, err.msg);
	want = bson_new_from_json((const uint8_t *)json, -1, &e);
	ck_assert(bson_iter_init_find(&iw, want, "v"));
	ck_assert(bson_iter_init_find(&ig, &got, "_id"));
	ck_assert_msg(store_iter_compare(&iw, &ig) == 0, "line %d: '%s' decodes to another value",
		      line, stem);
	bson_destroy(want);
	bson_destroy(&got);
	dfs_buf_release(&out);
}

/* Checks that decoding stem (n bytes) fails with code. */
static void check_bad_n(const char *stem, size_t n, int code, int line)
{
	struct dfs_err err = {0};
	bson_t got = BSON_INITIALIZER;
	int rc = store_name_to_id(stem, n, &got, &err);

	ck_assert_msg(rc == code, "line %d: decoding '%.*s' gave %d (%s), expected %d", line,
		      (int)n, stem, rc, err.msg, code);
	ck_assert_msg(got.len == 5, "line %d: out not left empty", line);
	ck_assert_msg(err.msg[0] != '\0', "line %d: no message", line);
	bson_destroy(&got);
}

#define NAME(json, stem) check_name("{\"v\": " json "}", stem, __LINE__)
#define BAD(stem) check_bad_n(stem, strlen(stem), DFS_EINVAL, __LINE__)

/* ---- concrete cases ---------------------------------------------------------------- */

START_TEST(test_store_name_from_id_objectid)
{
	NAME("{\"$oid\": \"507f1f77bcf86cd799439011\"}", "507f1f77bcf86cd799439011");
	NAME("{\"$oid\": \"000000000000000000000000\"}", "000000000000000000000000");
	NAME("{\"$oid\": \"FFFFFFFFFFFFFFFFFFFFFFFF\"}", "ffffffffffffffffffffffff");
}
END_TEST

START_TEST(test_store_name_from_id_integers)
{
	NAME("{\"$numberInt\": \"42\"}", "42");
	NAME("{\"$numberInt\": \"-12\"}", "-12");
	NAME("{\"$numberInt\": \"0\"}", "0");
	NAME("{\"$numberInt\": \"-2147483648\"}", "-2147483648");
	NAME("{\"$numberLong\": \"5\"}", "5");
	NAME("{\"$numberLong\": \"9223372036854775807\"}", "9223372036854775807");
	NAME("{\"$numberLong\": \"-9223372036854775808\"}", "-9223372036854775808");
	NAME("{\"$numberDouble\": \"5.0\"}", "5");
	NAME("{\"$numberDouble\": \"-0.0\"}", "0");
	NAME("{\"$numberDouble\": \"-9223372036854775808\"}", "-9223372036854775808");
	NAME("{\"$numberDouble\": \"9007199254740992\"}", "9007199254740992");
	NAME("{\"$numberDecimal\": \"5.0\"}", "5");
	NAME("{\"$numberDecimal\": \"-0\"}", "0");
	NAME("{\"$numberDecimal\": \"1E+3\"}", "1000");
	NAME("{\"$numberDecimal\": \"-9223372036854775808\"}", "-9223372036854775808");
	NAME("{\"$numberDecimal\": \"9007199254740993\"}", "9007199254740993");
}
END_TEST

START_TEST(test_store_name_to_id_integer_types)
{
	bson_t got = BSON_INITIALIZER;
	bson_iter_t it;

	ck_assert_int_eq(store_name_to_id("2147483647", 10, &got, NULL), 0);
	ck_assert(bson_iter_init_find(&it, &got, "_id"));
	ck_assert_int_eq(bson_iter_type(&it), BSON_TYPE_INT32);
	bson_reinit(&got);
	ck_assert_int_eq(store_name_to_id("2147483648", 10, &got, NULL), 0);
	ck_assert(bson_iter_init_find(&it, &got, "_id"));
	ck_assert_int_eq(bson_iter_type(&it), BSON_TYPE_INT64);
	ck_assert_int_eq(bson_iter_int64(&it), INT64_C(2147483648));
	bson_reinit(&got);
	ck_assert_int_eq(store_name_to_id("-2147483649", 11, &got, NULL), 0);
	ck_assert(bson_iter_init_find(&it, &got, "_id"));
	ck_assert_int_eq(bson_iter_type(&it), BSON_TYPE_INT64);
	bson_destroy(&got);
}
END_TEST

START_TEST(test_store_name_from_id_strings)
{
	NAME("\"abc\"", "abc");
	NAME("\"a b\"", "a b");
	NAME("\"a/b\"", "a%2Fb");
	NAME("\"50%\"", "50%25");
	NAME("\".hidden\"", "%2Ehidden");
	NAME("\"..\"", "%2E.");
	NAME("\"=x\"", "%3Dx");
	NAME("\"a=x.\"", "a=x.");
	NAME("\"007\"", "%3007");
	NAME("\"5\"", "%35");
	NAME("\"-5\"", "%2D5");
	NAME("\"-0\"", "%2D0");
	NAME("\"-\"", "-");
	NAME("\"5-\"", "5-");
	NAME("\"1.5\"", "1.5");
	NAME("\"507f1f77bcf86cd799439011\"", "%3507f1f77bcf86cd799439011");
	NAME("\"507F1F77BCF86CD799439011\"", "%3507F1F77BCF86CD799439011");
	NAME("\"a07f1f77bcf86cd799439011\"", "%6107f1f77bcf86cd799439011");
	NAME("\"507f1f77bcf86cd79943901\"", "507f1f77bcf86cd79943901");
	NAME("\"tab\\there\"", "tab%09here");
	NAME("\"\\u007f\"", "%7F");
	NAME("\"a\\u0000b\"", "a%00b");
	NAME("\"\\u00e9t\\u00e9\"", "\xc3\xa9t\xc3\xa9");
	NAME("\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80");
	NAME("\"\"", "=\"\"");
	NAME("{\"$symbol\": \"sym\"}", "sym");
}
END_TEST

START_TEST(test_store_name_from_id_typed)
{
	NAME("{\"$numberDouble\": \"1.5\"}", "=1.5");
	NAME("{\"$numberDecimal\": \"1.50\"}", "=1.5");
	NAME("{\"$numberDouble\": \"-0.25\"}", "=-0.25");
	/* compact Extended JSON: a space after ':' and ',' (store.h) */
	NAME("{\"$numberDecimal\": \"0.1\"}", "={\"$numberDecimal\": \"0.1\"}");
	NAME("{\"$numberDecimal\": \"0.10\"}", "={\"$numberDecimal\": \"0.1\"}");
	NAME("{\"$numberDouble\": \"NaN\"}", "={\"$numberDouble\": \"NaN\"}");
	NAME("{\"$numberDecimal\": \"NaN\"}", "={\"$numberDouble\": \"NaN\"}");
	NAME("{\"$numberDecimal\": \"-Infinity\"}", "={\"$numberDouble\": \"-Infinity\"}");
	NAME("null", "=null");
	NAME("true", "=true");
	NAME("{\"$minKey\": 1}", "={\"$minKey\": 1}");
	NAME("{\"a\": 1}", "={\"a\": 1}");
	NAME("{\"a\": {\"$numberLong\": \"1\"}}", "={\"a\": 1}");
	NAME("{\"a\": {\"$numberDecimal\": \"1.0\"}}", "={\"a\": 1}");
	NAME("{\"a\": \"x/y%\"}", "={\"a\": \"x%2Fy%25\"}");
	NAME("{\"a\": [1, {\"$numberDouble\": \"2.0\"}, {\"$symbol\": \"s\"}]}",
	     "={\"a\": [1, 2, \"s\"]}");
	NAME("{\"a\": {\"$undefined\": true}}", "={\"a\": null}");
}
END_TEST

START_TEST(test_store_name_from_id_typed_forms_decode)
{
	struct dfs_buf out;
	struct dfs_err err = {0};
	static const char *const values[] = {
	    "{\"$date\": {\"$numberLong\": \"1700000000000\"}}",
	    "{\"$date\": {\"$numberLong\": \"-1\"}}",
	    "{\"$timestamp\": {\"t\": 1, \"i\": 2}}",
	    "{\"$binary\": {\"base64\": \"AQID\", \"subType\": \"04\"}}",
	    "{\"$maxKey\": 1}",
	    "{\"$code\": \"f()\"}",
	    "{\"$numberDouble\": \"1e300\"}",
	    "{\"$numberDouble\": \"9223372036854775808\"}",
	    "{\"$numberDecimal\": \"12345678901234567890123\"}",
	    "{\"$numberDecimal\": \"1E+6144\"}",
	    "{\"$numberDecimal\": \"-1E-6176\"}",
	    "false",
	    "{\"x\": {\"y\": [null, \"\"]}}",
	    "{}",
	};
	size_t i;

	dfs_buf_init(&out);
	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char json[256];

		snprintf(json, sizeof(json), "{\"v\": %s}", values[i]);
		ck_assert_msg(name_of_json(json, &out, &err) == 0, "%s: %s", json, err.msg);
		ck_assert_msg(out.data[0] == '=', "%s named '%s'", json, out.data);
		check_name(json, out.data, __LINE__);
	}
	dfs_buf_release(&out);
}
END_TEST

START_TEST(test_store_name_from_id_rejects)
{
	struct dfs_err err = {0};
	struct dfs_buf out;
	char json[400], s[300];

	dfs_buf_init(&out);
	dfs_buf_puts(&out, "x");
	ck_assert_int_eq(name_of_json("{\"v\": [1]}", &out, &err), DFS_EINVAL);
	ck_assert_uint_eq(out.len, 0);
	dfs_err_clear(&err);
	ck_assert_int_eq(name_of_json("{\"v\": {\"$regularExpression\": {\"pattern\": \"a\", "
				      "\"options\": \"\"}}}",
				      &out, &err),
			 DFS_EINVAL);
	dfs_err_clear(&err);
	ck_assert_int_eq(name_of_json("{\"v\": {\"$undefined\": true}}", &out, &err), DFS_EINVAL);
	/* strings must be utf-8, at the top and inside documents */
	{
		bson_t *doc = bson_new(), child;
		bson_value_t v;
		bson_iter_t it;

		v.value_type = BSON_TYPE_UTF8;
		v.value.v_utf8.str = (char *)"a\xff";
		v.value.v_utf8.len = 2;
		dfs_err_clear(&err);
		ck_assert_int_eq(name_of(&v, &out, &err), DFS_EINVAL);
		bson_append_document_begin(doc, "v", 1, &child);
		bson_append_utf8(&child, "s", 1, "\xc3(", 2);
		bson_append_document_end(doc, &child);
		ck_assert(bson_iter_init_find(&it, doc, "v"));
		dfs_err_clear(&err);
		ck_assert_int_eq(name_of(bson_iter_value(&it), &out, &err), DFS_EINVAL);
		ck_assert_ptr_nonnull(strstr(err.msg, "utf-8"));
		bson_destroy(doc);
	}
	/* the limit: 250 bytes pass, 251 do not */
	memset(s, 'x', sizeof(s));
	snprintf(json, sizeof(json), "{\"v\": \"%.*s\"}", DFS_MAX_NAME_STEM, s);
	dfs_err_clear(&err);
	ck_assert_int_eq(name_of_json(json, &out, &err), 0);
	ck_assert_uint_eq(out.len, DFS_MAX_NAME_STEM);
	snprintf(json, sizeof(json), "{\"v\": \"%.*s\"}", DFS_MAX_NAME_STEM + 1, s);
	ck_assert_int_eq(name_of_json(json, &out, &err), DFS_ENAMETOOLONG);
	ck_assert_uint_eq(out.len, 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "250"));
	/* escapes count: 100 slashes need 300 bytes */
	snprintf(json, sizeof(json), "{\"v\": \"%s\"}",
		 "//////////////////////////////////////////////////////////////////////////////"
		 "//////////////////////");
	dfs_err_clear(&err);
	ck_assert_int_eq(name_of_json(json, &out, &err), DFS_ENAMETOOLONG);
	dfs_buf_release(&out);
}
END_TEST

START_TEST(test_store_name_to_id_rejects_non_canonical)
{
	char s[300];

	BAD("");
	BAD("007");
	BAD("-0");
	BAD("-007");
	BAD("%2B5");
	BAD("99999999999999999999");
	BAD("9223372036854775808");
	BAD("-9223372036854775809");
	BAD("%41");   /* 'A' needs no escape */
	BAD("a%2fb"); /* lowercase hex */
	BAD("a%2");
	BAD("a%");
	BAD("a%zz");
	BAD("a/b");
	BAD(".hidden");
	BAD("%2E%2E");
	BAD("%FF"); /* not utf-8 once decoded */
	BAD("\xc3");
	BAD("a\tb");
	BAD("507F1F77BCF86CD799439011");
	BAD("%3507F1F77BCF86CD79943901"); /* 23 digits need no escape */
	BAD("=");
	BAD("=5");
	BAD("=\"abc\"");
	BAD("=\"5\"");
	BAD("={\"$numberLong\": \"5\"}");
	BAD("={\"$numberDecimal\": \"1.5\"}");
	BAD("={\"$numberDecimal\": \"0.10\"}");
	BAD("={\"a\": {\"$numberLong\": \"1\"}}");
	BAD("={\"a\":1}");
	BAD("={ \"a\": 1}");
	BAD("={a:1}");
	BAD("=[1]");
	BAD("=/a/");
	BAD("=undefined");
	BAD("=x");
	BAD("=nul");
	BAD("={\"a\": \"x/y\"}");
	check_bad_n("a\0b", 3, DFS_EINVAL, __LINE__);
	memset(s, 'x', sizeof(s));
	check_bad_n(s, DFS_MAX_NAME_STEM + 1, DFS_ENAMETOOLONG, __LINE__);
}
END_TEST

/* ---- random values ----------------------------------------------------------------- */

static const char *const str_tokens[] = {
    "a",
    "Z",
    "0",
    "9",
    "-",
    ".",
    "=",
    "%",
    "/",
    "\x01",
    "\x1f",
    "\x7f",
    " ",
    "f",
    "F",
    "\"",
    "\\",
    "{",
    "\xc3\xa9",
    "\xe2\x82\xac",
    "\xf0\x9f\x98\x80",
    "e",
    "~",
    "$",
    ":",
    ",",
    "null",
    "12",
};

static size_t gen_string(char *out, size_t cap)
{
	size_t n = 0, i, k;
	const char *t;

	switch (rnd(8)) {
	case 0: /* digits, maybe negative: must be escaped */
		if (rnd(2))
			out[n++] = '-';
		k = 1 + rnd(20);
		for (i = 0; i < k; i++)
			out[n++] = (char)('0' + rnd(10));
		return n;
	case 1: /* 24 hex digits of either case */
		for (i = 0; i < 24; i++)
			out[n++] = "0123456789abcdefABCDEF"[rnd(rnd(2) ? 16 : 22)];
		if (rnd(4) == 0)
			n -= 1 + rnd(2);
		return n;
	case 2:
		if (rnd(4) == 0)
			out[n++] = '\0';
		return n;
	default:
		k = rnd(12);
		for (i = 0; i < k; i++) {
			t = str_tokens[rnd(sizeof(str_tokens) / sizeof(str_tokens[0]))];
			if (n + strlen(t) >= cap)
				break;
			memcpy(out + n, t, strlen(t));
			n += strlen(t);
		}
		if (rnd(10) == 0)
			out[n++] = '\0';
		return n;
	}
}

static void gen_number(bson_t *b, const char *k)
{
	static const char *const decs[] = {"0.1",
					   "1.50",
					   "-0",
					   "5.0",
					   "1E+3",
					   "NaN",
					   "-Infinity",
					   "9223372036854775807",
					   "9223372036854775808",
					   "1E-6176",
					   "1.2345678901234567890123E+100",
					   "0.000",
					   "-12.5",
					   "1E+400"};
	static const double dbls[] = {0.5,     -0.0, 1e300, 9223372036854775808.0,   -1e-300,
				      DBL_MAX, 1.5,  -2.0,  4.9406564584124654e-324, 0.1};
	bson_decimal128_t d;
	char text[64];
	int64_t i;

	switch (rnd(7)) {
	case 0:
		bson_append_int32(b, k, -1, (int32_t)rnd64());
		break;
	case 1:
		i = (int64_t)(rnd64() >> rnd(64));
		bson_append_int64(b, k, -1, rnd(2) ? i : -i);
		break;
	case 2:
		bson_append_double(b, k, -1, dbls[rnd(sizeof(dbls) / sizeof(dbls[0]))]);
		break;
	case 3:
		bson_append_double(b, k, -1, ldexp((double)((int)rnd(2001) - 1000), -(int)rnd(5)));
		break;
	case 4:
		bson_decimal128_from_string(decs[rnd(sizeof(decs) / sizeof(decs[0]))], &d);
		bson_append_decimal128(b, k, -1, &d);
		break;
	case 5:
		snprintf(text, sizeof(text), "%dE%d", (int)rnd(20001) - 10000, (int)rnd(13) - 6);
		bson_decimal128_from_string(text, &d);
		bson_append_decimal128(b, k, -1, &d);
		break;
	default:
		bson_append_int32(b, k, -1, (int32_t)rnd(11) - 5);
		break;
	}
}

static void gen_value(bson_t *b, const char *k, int depth, bool top)
{
	char s[128];
	size_t n;
	bson_oid_t oid;
	bson_t child;
	uint8_t bin[3] = {1, 2, 0xff};
	unsigned i, cnt;

	switch (rnd(depth >= 2 ? 10 : 12)) {
	case 0:
	case 1:
	case 2:
		gen_number(b, k);
		break;
	case 3:
	case 4:
	case 5:
		n = gen_string(s, sizeof(s));
		if (rnd(8))
			bson_append_utf8(b, k, -1, s, (int)n);
		else
			bson_append_symbol(b, k, -1, s, (int)n);
		break;
	case 6:
		for (i = 0; i < 12; i++)
			oid.bytes[i] = (uint8_t)rnd64();
		bson_append_oid(b, k, -1, &oid);
		break;
	case 7:
		switch (rnd(6)) {
		case 0:
			bson_append_bool(b, k, -1, rnd(2));
			break;
		case 1:
			bson_append_null(b, k, -1);
			break;
		case 2:
			bson_append_minkey(b, k, -1);
			break;
		case 3:
			bson_append_maxkey(b, k, -1);
			break;
		case 4:
			if (!top) {
				bson_append_undefined(b, k, -1);
				break;
			}
			/* fall through */
		default:
			bson_append_date_time(b, k, -1, (int64_t)(rnd64() >> rnd(64)) - 1000);
			break;
		}
		break;
	case 8:
		bson_append_timestamp(b, k, -1, (uint32_t)rnd64(), rnd(3));
		break;
	case 9:
		bson_append_binary(b, k, -1, (bson_subtype_t)(rnd(2) ? 0 : 4), bin, rnd(4));
		break;
	case 10:
		bson_append_document_begin(b, k, -1, &child);
		cnt = rnd(3);
		for (i = 0; i < cnt; i++) {
			char key[4] = {(char)('a' + rnd(3)), 0};

			gen_value(&child, key, depth + 1, false);
		}
		bson_append_document_end(b, &child);
		break;
	default:
		if (top) { /* arrays cannot be _id values: nest one in a document */
			bson_append_document_begin(b, k, -1, &child);
			gen_value(&child, "arr", depth + 1, false);
			bson_append_document_end(b, &child);
			break;
		}
		bson_append_array_begin(b, k, -1, &child);
		cnt = rnd(3);
		for (i = 0; i < cnt; i++) {
			char key[12];

			snprintf(key, sizeof(key), "%u", i);
			gen_value(&child, key, depth + 1, false);
		}
		bson_append_array_end(b, &child);
		break;
	}
}

static char *text_of(const bson_t *doc)
{
	return bson_as_canonical_extended_json(doc, NULL);
}

START_TEST(test_store_name_property_round_trip)
{
	enum { POOL = 3000 };
	bson_t *pool[POOL];
	char *names[POOL];
	size_t i, named = 0, same = 0;
	struct dfs_buf out, again;
	struct dfs_err err;

	seed_init(1);
	dfs_buf_init(&out);
	dfs_buf_init(&again);
	for (i = 0; i < POOL; i++)
		pool[i] = NULL, names[i] = NULL;
	for (i = 0; i < 60000; i++) {
		bson_t *doc = bson_new(), got = BSON_INITIALIZER;
		bson_iter_t iv, ig;
		int rc;

		gen_value(doc, "v", 0, true);
		ck_assert(bson_iter_init_find(&iv, doc, "v"));
		memset(&err, 0, sizeof(err));
		rc = name_of(bson_iter_value(&iv), &out, &err);
		if (rc == DFS_ENAMETOOLONG) {
			bson_destroy(doc);
			continue;
		}
		if (rc) {
			char *t = text_of(doc);

			ck_abort_msg("seed %" PRIu64 ": %s has no name: %s", seed_used, t, err.msg);
		}
		named++;
		ck_assert_uint_le(out.len, DFS_MAX_NAME_STEM);
		ck_assert_msg(!memchr(out.data, '/', out.len) && !memchr(out.data, 0, out.len),
			      "name '%s' holds '/' or NUL", out.data);
		rc = store_name_to_id(out.data, out.len, &got, &err);
		if (rc) {
			char *t = text_of(doc);

			ck_abort_msg("seed %" PRIu64 ": %s named '%s', which does not decode: %s",
				     seed_used, t, out.data, err.msg);
		}
		ck_assert(bson_iter_init_find(&ig, &got, "_id"));
		if (store_iter_compare(&iv, &ig) != 0) {
			char *t = text_of(doc), *u = text_of(&got);

			ck_abort_msg("seed %" PRIu64 ": %s named '%s' decodes to %s", seed_used, t,
				     out.data, u);
		}
		if (bson_iter_type(&iv) == BSON_TYPE_OID || bson_iter_type(&iv) == BSON_TYPE_UTF8)
			ck_assert_int_eq(bson_iter_type(&ig), bson_iter_type(&iv));
		ck_assert_int_eq(name_of(bson_iter_value(&ig), &again, &err), 0);
		ck_assert_str_eq(again.data, out.data);
		bson_destroy(&got);
		/* keep a pool to check: equal values <=> equal names */
		{
			size_t slot = rnd(POOL), other = rnd(POOL);

			if (pool[slot]) {
				bson_destroy(pool[slot]);
				free(names[slot]);
			}
			pool[slot] = doc;
			names[slot] = strdup(out.data);
			if (pool[other] && other != slot) {
				bson_iter_t io;
				int c;

				ck_assert(bson_iter_init_find(&io, pool[other], "v"));
				c = store_iter_compare(&iv, &io);
				same += c == 0;
				if ((c == 0) != (strcmp(names[slot], names[other]) == 0)) {
					char *t = text_of(doc), *u = text_of(pool[other]);

					ck_abort_msg("seed %" PRIu64
						     ": %s named '%s', %s named '%s', "
						     "compare %d",
						     seed_used, t, names[slot], u, names[other], c);
				}
			}
		}
	}
	ck_assert_uint_gt(named, 50000);
	ck_assert_uint_gt(same, 10);
	for (i = 0; i < POOL; i++) {
		if (pool[i])
			bson_destroy(pool[i]);
		free(names[i]);
	}
	dfs_buf_release(&out);
	dfs_buf_release(&again);
}
END_TEST

static const char *const stem_tokens[] = {
    "a",	   "Z",
    "0",	   "1",
    "5",	   "9",
    "-",	   ".",
    "=",	   "%",
    "%2F",	   "%25",
    "%3D",	   "%2E",
    "%00",	   "%41",
    "%2f",	   "%35",
    "%3",	   "%FF",
    "%C3",	   "%A9",
    "\"",	   "{",
    "}",	   ":",
    ",",	   "[",
    "]",	   "null",
    "true",	   "$numberDecimal",
    "$numberLong", "$numberDouble",
    "$date",	   "1.5",
    "e",	   "E+",
    "\xc3\xa9",	   "\xff",
    "\x80",	   "/",
    " ",	   "f",
    "\\u0041",	   "\\",
    "NaN",	   "$minKey",
    "\x01",
};

START_TEST(test_store_name_property_bijective)
{
	struct dfs_buf s, again, valid;
	struct dfs_err err;
	size_t i, decoded = 0;

	seed_init(2);
	dfs_buf_init(&s);
	dfs_buf_init(&again);
	dfs_buf_init(&valid);
	for (i = 0; i < 60000; i++) {
		bson_t got = BSON_INITIALIZER;
		bson_iter_t it;
		size_t k, j;

		dfs_buf_reset(&s);
		if (valid.len && rnd(2)) {
			/* a mutation of a valid name: one byte changed, inserted or removed */
			size_t at = rnd((unsigned)valid.len);

			dfs_buf_append(&s, valid.data, valid.len);
			switch (rnd(3)) {
			case 0:
				s.data[at] = (char)rnd64();
				break;
			case 1:
				dfs_buf_reserve(&s, 1);
				memmove(s.data + at + 1, s.data + at, valid.len - at);
				s.data[at] =
				    stem_tokens[rnd(sizeof(stem_tokens) / sizeof(stem_tokens[0]))]
					       [0];
				s.len++;
				s.data[s.len] = '\0';
				break;
			default:
				memmove(s.data + at, s.data + at + 1, valid.len - at - 1);
				s.len--;
				break;
			}
		} else {
			if (rnd(3) == 0)
				dfs_buf_putc(&s, '=');
			k = rnd(8);
			for (j = 0; j < k; j++)
				dfs_buf_puts(
				    &s,
				    stem_tokens[rnd(sizeof(stem_tokens) / sizeof(stem_tokens[0]))]);
		}
		memset(&err, 0, sizeof(err));
		if (store_name_to_id(s.data ? s.data : "", s.len, &got, &err) != 0) {
			ck_assert_msg(err.msg[0] != '\0', "no message for '%s'", s.data);
			ck_assert_uint_eq(got.len, 5);
			bson_destroy(&got);
			continue;
		}
		decoded++;
		ck_assert(bson_iter_init_find(&it, &got, "_id"));
		ck_assert_msg(name_of(bson_iter_value(&it), &again, &err) == 0, "'%s': %s", s.data,
			      err.msg);
		ck_assert_msg(again.len == s.len && memcmp(again.data, s.data, s.len) == 0,
			      "seed %" PRIu64 ": '%s' decodes, but its value is named '%s'",
			      seed_used, s.data, again.data);
		dfs_buf_reset(&valid);
		dfs_buf_append(&valid, s.data, s.len);
		bson_destroy(&got);
	}
	ck_assert_uint_gt(decoded, 2000);
	dfs_buf_release(&s);
	dfs_buf_release(&again);
	dfs_buf_release(&valid);
}
END_TEST

static Suite *name_suite(void)
{
	Suite *s = suite_create("name");
	TCase *tc = tcase_create("forms");
	TCase *tp = tcase_create("property");

	tcase_add_test(tc, test_store_name_from_id_objectid);
	tcase_add_test(tc, test_store_name_from_id_integers);
	tcase_add_test(tc, test_store_name_to_id_integer_types);
	tcase_add_test(tc, test_store_name_from_id_strings);
	tcase_add_test(tc, test_store_name_from_id_typed);
	tcase_add_test(tc, test_store_name_from_id_typed_forms_decode);
	tcase_add_test(tc, test_store_name_from_id_rejects);
	tcase_add_test(tc, test_store_name_to_id_rejects_non_canonical);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tp, 240);
	tcase_add_test(tp, test_store_name_property_round_trip);
	tcase_add_test(tp, test_store_name_property_bijective);
	suite_add_tcase(s, tp);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(name_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
