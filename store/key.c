/*
 * key.c - the order-preserving key encoding of BSON values, for index tables: memcmp order
 * of two encodings is store_value_compare() order of the values. It does not decode keys
 * (nothing needs to: index entries point at documents), enforce DFS_MAX_KEY_SIZE (the index
 * code does, on the whole compound key), or know about multikey or hashed indexes.
 *
 * Design notes. "memcmp order" below means: compare the common prefix bytewise as unsigned
 * bytes, then the shorter string first. The invariants, checked by tests/unit/test_key.c:
 *
 *  1. Order: sign(memcmp order of enc(a), enc(b)) == sign(store_value_compare(a, b)) for
 *     every pair of values of every type.
 *  2. Equality is identity: values that compare equal have byte-identical encodings (5,
 *     5.0, NumberLong(5), NumberDecimal("5.00"); "x" as a string and as a symbol; null and
 *     undefined), so a unique index sees duplicates by value.
 *  3. Prefix-free: no encoding is a proper prefix of another; every encoding says where it
 *     ends. With 1 this gives the two properties the callers use: a concatenation of
 *     encodings compares field by field (the first differing byte lies inside the first
 *     differing field), and inverting every byte of an encoding reverses the order (the
 *     first differing byte decides and inversion flips it; a prefix would not flip). So a
 *     descending field is just the inverted ascending encoding, terminators included.
 *  4. Every encoding starts with one bracket byte, store_type_bracket() of its type, in
 *     1..127. Byte 0x00 never starts a value: it ends documents and arrays, so a shorter
 *     document sorts first.
 *  5. Numbers (bracket 10) are encoded by value, whatever their type, as a class byte
 *     (NaN 0x10 < -inf 0x20 < negative 0x30 < zero 0x40 < positive 0x50 < +inf 0x60),
 *     then for negative and positive numbers a magnitude, bytewise inverted for negative
 *     ones. The magnitude is |x| rounded toward zero to a double t (8 bytes, the IEEE bits
 *     big-endian, which order like the non-negative doubles), then 0x01 when |x| == t, or
 *     0x02 and a decimal continuation when |x| > t: |x| in scientific form, the adjusted
 *     exponent + 8192 in 2 bytes big-endian, then the significant digits two per byte
 *     (value 1 + 10 * d1 + d2, the last odd digit padded with 0) and 0x00. Every value in
 *     one truncation bucket [t, next(t)) with |x| > t is an int64 beyond 2^53 or a
 *     decimal128, both exactly decimal, so the continuation orders them exactly. This is
 *     exact for all int32, int64, double and decimal128 values, including decimal128
 *     values outside the double range (their t is 0 or DBL_MAX).
 *  6. Strings, symbols and code: the bytes with 0x00 written as 0x00 0xFF, then 0x00 0x00.
 *     Field names and regex parts (C strings, no NUL inside): the bytes, then 0x00.
 *
 * Thread-safe; no state.
 */
#include "store.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* From compare.c; belongs in a private header of the non-SQL store files. */
enum store__dec_class { STORE__DEC_ZERO, STORE__DEC_FINITE, STORE__DEC_INF, STORE__DEC_NAN };
int store__dec_split(bson_decimal128_t dec, bool *neg, char *digits, int *exp10);

enum num_class_byte {
	NUMB_NAN = 0x10,
	NUMB_NINF = 0x20,
	NUMB_NEG = 0x30,
	NUMB_ZERO = 0x40,
	NUMB_POS = 0x50,
	NUMB_PINF = 0x60,
};

#define MAG_EXACT 0x01
#define MAG_INEXACT 0x02
#define EXP_BIAS 8192 /* decimal128 adjusted exponents are -6176..6144 */

static void put_u16be(struct dfs_buf *out, unsigned v)
{
	unsigned char b[2] = {(unsigned char)(v >> 8), (unsigned char)v};

	dfs_buf_append(out, b, 2);
}

static void put_u32be(struct dfs_buf *out, uint32_t v)
{
	unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
			      (unsigned char)(v >> 8), (unsigned char)v};

	dfs_buf_append(out, b, 4);
}

static void put_u64be(struct dfs_buf *out, uint64_t v)
{
	put_u32be(out, (uint32_t)(v >> 32));
	put_u32be(out, (uint32_t)v);
}

/* Invariant 6: escaped bytes and a two-byte terminator that sorts below every byte. */
static void put_string(struct dfs_buf *out, const char *s, size_t n)
{
	static const char esc_nul[2] = {0x00, (char)0xff};
	static const char term[2] = {0x00, 0x00};
	size_t i, run = 0;

	for (i = 0; i < n; i++) {
		if (s[i] != '\0')
			continue;
		dfs_buf_append(out, s + run, i - run);
		dfs_buf_append(out, esc_nul, 2);
		run = i + 1;
	}
	dfs_buf_append(out, s + run, n - run);
	dfs_buf_append(out, term, 2);
}

static void put_cstring(struct dfs_buf *out, const char *s)
{
	dfs_buf_append(out, s, strlen(s) + 1);
}

/* The decimal continuation of invariant 5: adjusted exponent, packed digits, 0x00. */
static void put_decimal(struct dfs_buf *out, const char *dig, int exp10)
{
	size_t n = strlen(dig), i;

	put_u16be(out, (unsigned)(exp10 + (int)n - 1 + EXP_BIAS));
	for (i = 0; i < n; i += 2) {
		int d1 = dig[i] - '0', d2 = i + 1 < n ? dig[i + 1] - '0' : 0;

		dfs_buf_putc(out, (char)(1 + 10 * d1 + d2));
	}
	dfs_buf_putc(out, 0x00);
}

static void put_double_bits(struct dfs_buf *out, double t)
{
	uint64_t bits;

	memcpy(&bits, &t, sizeof(bits));
	put_u64be(out, bits);
}

/* Compares the double t (>= 0) with the decimal value x exactly, through compare.c. */
static int cmp_dbl_value(double t, const bson_value_t *x)
{
	bson_value_t v;

	v.value_type = BSON_TYPE_DOUBLE;
	v.value.v_double = t;
	return store_value_compare(&v, x);
}

/*
 * Returns |x| rounded toward zero to a double, for a finite non-zero decimal128 x whose
 * magnitude is dig * 10^exp10; *exact tells whether the rounding lost nothing. strtod gives
 * the nearest double (or inf, or 0); exact comparisons then step it to the truncation.
 */
static double decimal_trunc(const bson_value_t *x, const char *dig, int exp10, bool *exact)
{
	bson_value_t mag = *x;
	char text[64];
	double t, up;

	mag.value.v_decimal128.high &= ~(UINT64_C(1) << 63);
	snprintf(text, sizeof(text), "%se%d", dig, exp10);
	t = strtod(text, NULL);
	if (isinf(t))
		t = DBL_MAX;
	while (t > 0 && cmp_dbl_value(t, &mag) > 0)
		t = nextafter(t, 0.0);
	while (t < DBL_MAX) {
		up = nextafter(t, INFINITY);
		if (cmp_dbl_value(up, &mag) > 0)
			break;
		t = up;
	}
	*exact = cmp_dbl_value(t, &mag) == 0;
	return t;
}

/* Invariant 5. */
static void put_number(struct dfs_buf *out, const bson_value_t *v)
{
	char dig[40];
	int exp10 = 0, shift;
	bool neg = false, exact = true;
	uint64_t u = 0, tu;
	double t = 0;
	size_t start;
	int64_t i;

	switch (v->value_type) {
	case BSON_TYPE_DOUBLE:
		t = v->value.v_double;
		if (isnan(t)) {
			dfs_buf_putc(out, NUMB_NAN);
			return;
		}
		if (isinf(t)) {
			dfs_buf_putc(out, t < 0 ? NUMB_NINF : NUMB_PINF);
			return;
		}
		if (t == 0) {
			dfs_buf_putc(out, NUMB_ZERO);
			return;
		}
		neg = t < 0;
		t = fabs(t);
		break;
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
		i = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
		if (i == 0) {
			dfs_buf_putc(out, NUMB_ZERO);
			return;
		}
		neg = i < 0;
		u = neg ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
		tu = u;
		for (shift = 0; (tu >> shift) >= (UINT64_C(1) << 53); shift++)
			;
		tu = (u >> shift) << shift;
		exact = tu == u;
		t = (double)tu;
		if (!exact) {
			int len = snprintf(dig, sizeof(dig), "%" PRIu64, u);

			while (dig[len - 1] == '0') {
				dig[--len] = '\0';
				exp10++;
			}
		}
		break;
	default: /* BSON_TYPE_DECIMAL128 */
		switch (store__dec_split(v->value.v_decimal128, &neg, dig, &exp10)) {
		case STORE__DEC_NAN:
			dfs_buf_putc(out, NUMB_NAN);
			return;
		case STORE__DEC_INF:
			dfs_buf_putc(out, neg ? NUMB_NINF : NUMB_PINF);
			return;
		case STORE__DEC_ZERO:
			dfs_buf_putc(out, NUMB_ZERO);
			return;
		default:
			t = decimal_trunc(v, dig, exp10, &exact);
			break;
		}
		break;
	}
	dfs_buf_putc(out, neg ? NUMB_NEG : NUMB_POS);
	start = out->len;
	put_double_bits(out, t);
	if (exact) {
		dfs_buf_putc(out, MAG_EXACT);
	} else {
		dfs_buf_putc(out, MAG_INEXACT);
		put_decimal(out, dig, exp10);
	}
	if (neg)
		for (; start < out->len; start++)
			out->data[start] = (char)~out->data[start];
}

static int put_value(struct dfs_buf *out, const bson_value_t *v, int depth, struct dfs_err *err);

/* The fields of a document (bracket, name, value) or the values of an array, then 0x00. */
static int put_doc(struct dfs_buf *out, const uint8_t *data, uint32_t len, bool array, int depth,
		   struct dfs_err *err)
{
	bson_iter_t it;
	bson_t b;
	int rc;

	if (depth > DFS_MAX_DEPTH)
		return dfs_err_set(err, DFS_EINVAL, "key value nested deeper than %d levels",
				   DFS_MAX_DEPTH);
	if (!bson_init_static(&b, data, len) || !bson_iter_init(&it, &b))
		return dfs_err_set(err, DFS_EINVAL, "key value holds invalid bson");
	while (bson_iter_next(&it)) {
		const bson_value_t *ev = bson_iter_value(&it);

		if (!array) {
			int br = store_type_bracket(ev->value_type);

			if (br == 0)
				return dfs_err_set(
					err, DFS_EINVAL,
					"bson type 0x%02x of field '%s' has no key encoding",
					(unsigned)ev->value_type, bson_iter_key(&it));
			dfs_buf_putc(out, (char)br);
			put_cstring(out, bson_iter_key(&it));
		}
		rc = put_value(out, ev, depth, err);
		if (rc)
			return rc;
	}
	if (it.err_off != 0)
		return dfs_err_set(err, DFS_EINVAL, "key value holds invalid bson at offset %u",
				   (unsigned)it.err_off);
	dfs_buf_putc(out, 0x00);
	return 0;
}

/* Writes the bytes of v that follow its bracket byte (invariants 5 and 6, and the layouts
 * of the other types: binary length, subtype, bytes; dates with the sign bit flipped; ...). */
static int put_payload(struct dfs_buf *out, const bson_value_t *v, int depth, struct dfs_err *err)
{
	switch (v->value_type) {
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DECIMAL128:
		put_number(out, v);
		return 0;
	case BSON_TYPE_UTF8:
		put_string(out, v->value.v_utf8.str, v->value.v_utf8.len);
		return 0;
	case BSON_TYPE_SYMBOL:
		put_string(out, v->value.v_symbol.symbol, v->value.v_symbol.len);
		return 0;
	case BSON_TYPE_CODE:
		put_string(out, v->value.v_code.code, v->value.v_code.code_len);
		return 0;
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		return put_doc(out, v->value.v_doc.data, v->value.v_doc.data_len,
			       v->value_type == BSON_TYPE_ARRAY, depth + 1, err);
	case BSON_TYPE_CODEWSCOPE:
		put_string(out, v->value.v_codewscope.code, v->value.v_codewscope.code_len);
		return put_doc(out, v->value.v_codewscope.scope_data,
			       v->value.v_codewscope.scope_len, false, depth + 1, err);
	case BSON_TYPE_BINARY:
		put_u32be(out, v->value.v_binary.data_len);
		dfs_buf_putc(out, (char)v->value.v_binary.subtype);
		dfs_buf_append(out, v->value.v_binary.data, v->value.v_binary.data_len);
		return 0;
	case BSON_TYPE_OID:
		dfs_buf_append(out, v->value.v_oid.bytes, 12);
		return 0;
	case BSON_TYPE_BOOL:
		dfs_buf_putc(out, v->value.v_bool ? 1 : 0);
		return 0;
	case BSON_TYPE_DATE_TIME:
		put_u64be(out, (uint64_t)v->value.v_datetime ^ (UINT64_C(1) << 63));
		return 0;
	case BSON_TYPE_TIMESTAMP:
		put_u32be(out, v->value.v_timestamp.timestamp);
		put_u32be(out, v->value.v_timestamp.increment);
		return 0;
	case BSON_TYPE_REGEX:
		put_cstring(out, v->value.v_regex.regex);
		put_cstring(out, v->value.v_regex.options ? v->value.v_regex.options : "");
		return 0;
	case BSON_TYPE_DBPOINTER:
		put_u32be(out, v->value.v_dbpointer.collection_len);
		dfs_buf_append(out, v->value.v_dbpointer.collection,
			       v->value.v_dbpointer.collection_len);
		dfs_buf_append(out, v->value.v_dbpointer.oid.bytes, 12);
		return 0;
	case BSON_TYPE_MINKEY:
	case BSON_TYPE_MAXKEY:
	case BSON_TYPE_NULL:
	case BSON_TYPE_UNDEFINED:
		return 0; /* the bracket byte is the whole value */
	default:
		return dfs_err_set(err, DFS_EINVAL, "bson type 0x%02x has no key encoding",
				   (unsigned)v->value_type);
	}
}

/* Invariant 4: the bracket byte, then the type's own bytes. */
static int put_value(struct dfs_buf *out, const bson_value_t *v, int depth, struct dfs_err *err)
{
	int br = store_type_bracket(v->value_type);

	if (br == 0)
		return dfs_err_set(err, DFS_EINVAL, "bson type 0x%02x has no key encoding",
				   (unsigned)v->value_type);
	dfs_buf_putc(out, (char)br);
	return put_payload(out, v, depth, err);
}

/*
 * Appends the key encoding of v to out, every byte inverted when descending. Returns 0, or
 * DFS_EINVAL (unknown type, invalid embedded BSON, nesting over DFS_MAX_DEPTH) with out
 * unchanged.
 */
int store_key_append(struct dfs_buf *out, const bson_value_t *v, bool descending,
		     struct dfs_err *err)
{
	size_t start = out->len, i;
	int rc = put_value(out, v, 0, err);

	if (rc) {
		out->len = start;
		if (out->data)
			out->data[start] = '\0';
		return rc;
	}
	if (descending)
		for (i = start; i < out->len; i++)
			out->data[i] = (char)~out->data[i];
	return 0;
}
