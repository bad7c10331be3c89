/*
 * compare.c - MongoDB's comparison order of BSON values (the manual's "Comparison/Sort
 * Order"): the type brackets, then a per-type comparison. Numbers of the four numeric types
 * compare exactly by value (no rounding through double: int64 against double and decimal128
 * against double are decided with exact integer arithmetic). Strings compare by bytes (the
 * "simple" collation).
 *
 * It does not do collations, the query language's type bracketing of $lt/$gt, the min/max
 * rule for sorting on arrays, or missing fields: those belong to query/. It never fails:
 * BSON that cannot be iterated compares as far as it can be read.
 *
 * It also owns the decimal128 decoder shared with key.c and name.c (store__dec_split).
 */
#include "store.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Shared with key.c and name.c; belongs in a private header of the non-SQL store files. */
enum store__dec_class { STORE__DEC_ZERO, STORE__DEC_FINITE, STORE__DEC_INF, STORE__DEC_NAN };
int store__dec_split(bson_decimal128_t dec, bool *neg, char *digits, int *exp10);

/* Nesting beyond this compares the remaining raw bytes (documents are limited to 100). */
#define CMP_MAX_DEPTH 200

enum bracket {
	BR_MINKEY = 1,
	BR_NULL = 5,
	BR_NUMBER = 10,
	BR_STRING = 15,
	BR_DOCUMENT = 20,
	BR_ARRAY = 25,
	BR_BINARY = 30,
	BR_OID = 35,
	BR_BOOL = 40,
	BR_DATE = 45,
	BR_TIMESTAMP = 47,
	BR_REGEX = 50,
	BR_DBPOINTER = 55,
	BR_CODE = 60,
	BR_CODEWSCOPE = 65,
	BR_MAXKEY = 127,
};

/*
 * Returns the rank of t in MongoDB's canonical type order, 1..127 (types of one bracket
 * share a rank), or 0 for BSON_TYPE_EOD and unknown types. key.c writes it as the first
 * byte of every key, so the values are part of the on-disk format.
 */
int store_type_bracket(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_MINKEY:
		return BR_MINKEY;
	case BSON_TYPE_UNDEFINED:
	case BSON_TYPE_NULL:
		return BR_NULL;
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DECIMAL128:
		return BR_NUMBER;
	case BSON_TYPE_UTF8:
	case BSON_TYPE_SYMBOL:
		return BR_STRING;
	case BSON_TYPE_DOCUMENT:
		return BR_DOCUMENT;
	case BSON_TYPE_ARRAY:
		return BR_ARRAY;
	case BSON_TYPE_BINARY:
		return BR_BINARY;
	case BSON_TYPE_OID:
		return BR_OID;
	case BSON_TYPE_BOOL:
		return BR_BOOL;
	case BSON_TYPE_DATE_TIME:
		return BR_DATE;
	case BSON_TYPE_TIMESTAMP:
		return BR_TIMESTAMP;
	case BSON_TYPE_REGEX:
		return BR_REGEX;
	case BSON_TYPE_DBPOINTER:
		return BR_DBPOINTER;
	case BSON_TYPE_CODE:
		return BR_CODE;
	case BSON_TYPE_CODEWSCOPE:
		return BR_CODEWSCOPE;
	case BSON_TYPE_MAXKEY:
		return BR_MAXKEY;
	default:
		return 0;
	}
}

/* ---- decimal128 -------------------------------------------------------------------- */

/*
 * Splits a decimal128 (BID encoding, as libbson stores it) into its exact value: *neg the
 * sign bit, and for STORE__DEC_FINITE the coefficient as decimal digits without leading or
 * trailing zeros (NUL-terminated, at most 34 digits; digits must hold 35 bytes) and *exp10,
 * so that |value| = digits * 10^exp10. Non-canonical coefficients (over 10^34 - 1) are zero,
 * as IEEE 754-2008 says. Returns the enum store__dec_class.
 */
int store__dec_split(bson_decimal128_t dec, bool *neg, char *digits, int *exp10)
{
	uint64_t hi = dec.high, lo = dec.low;
	uint32_t limb[4];
	char rev[40];
	int n = 0, skip = 0, e, i;
	bool more;

	*neg = (hi >> 63) != 0;
	digits[0] = '\0';
	*exp10 = 0;
	if (((hi >> 58) & 0x1f) == 0x1f)
		return STORE__DEC_NAN;
	if (((hi >> 58) & 0x1f) == 0x1e)
		return STORE__DEC_INF;
	if (((hi >> 61) & 3) == 3)
		return STORE__DEC_ZERO; /* the 2^113 form: always over 10^34 - 1 */
	e = (int)((hi >> 49) & 0x3fff) - 6176;
	limb[3] = (uint32_t)((hi >> 32) & 0x1ffff);
	limb[2] = (uint32_t)hi;
	limb[1] = (uint32_t)(lo >> 32);
	limb[0] = (uint32_t)lo;
	do {
		uint64_t r = 0;

		more = false;
		for (i = 3; i >= 0; i--) {
			uint64_t cur = (r << 32) | limb[i];

			limb[i] = (uint32_t)(cur / 10);
			r = cur % 10;
			more |= limb[i] != 0;
		}
		rev[n++] = (char)('0' + r);
	} while (more);
	if (n > 34)
		return STORE__DEC_ZERO;
	if (n == 1 && rev[0] == '0')
		return STORE__DEC_ZERO;
	while (rev[skip] == '0')
		skip++;
	for (i = 0; i < n - skip; i++)
		digits[i] = rev[n - 1 - i];
	digits[n - skip] = '\0';
	*exp10 = e + skip;
	return STORE__DEC_FINITE;
}

/* ---- exact big integers, only as large as double-vs-decimal comparison needs -------- */

#define BIG_LIMBS 64 /* 2048 bits; the comparison below needs at most about 1250 */

struct big {
	uint32_t l[BIG_LIMBS]; /* little-endian limbs */
	int n;		       /* limbs in use, no leading zero limb */
};

static void big_set_u64(struct big *b, uint64_t v)
{
	b->n = 0;
	while (v) {
		b->l[b->n++] = (uint32_t)v;
		v >>= 32;
	}
}

/* b = b * m + add */
static void big_mul_add(struct big *b, uint32_t m, uint32_t add)
{
	uint64_t carry = add;
	int i;

	for (i = 0; i < b->n; i++) {
		uint64_t cur = (uint64_t)b->l[i] * m + carry;

		b->l[i] = (uint32_t)cur;
		carry = cur >> 32;
	}
	if (carry) {
		assert(b->n < BIG_LIMBS);
		b->l[b->n++] = (uint32_t)carry;
	}
}

static void big_mul_pow10(struct big *b, int e)
{
	static const uint32_t p10[] = {1,      10,	100,	  1000,	     10000,
				       100000, 1000000, 10000000, 100000000, 1000000000};

	for (; e >= 9; e -= 9)
		big_mul_add(b, p10[9], 0);
	if (e > 0)
		big_mul_add(b, p10[e], 0);
}

static void big_shl(struct big *b, int bits)
{
	int words = bits / 32, rest = bits % 32, i;

	if (b->n == 0)
		return;
	assert(b->n + words + 1 <= BIG_LIMBS);
	b->l[b->n + words] = 0;
	for (i = b->n - 1; i >= 0; i--) {
		uint64_t cur = (uint64_t)b->l[i] << rest;

		b->l[i + words + 1] |= (uint32_t)(cur >> 32);
		b->l[i + words] = (uint32_t)cur;
	}
	for (i = 0; i < words; i++)
		b->l[i] = 0;
	b->n += words + 1;
	while (b->n > 0 && b->l[b->n - 1] == 0)
		b->n--;
}

static int big_cmp(const struct big *a, const struct big *b)
{
	int i;

	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	for (i = a->n - 1; i >= 0; i--)
		if (a->l[i] != b->l[i])
			return a->l[i] < b->l[i] ? -1 : 1;
	return 0;
}

/* ---- numbers ----------------------------------------------------------------------- */

enum num_class { NUM_NAN, NUM_NINF, NUM_NEG, NUM_ZERO, NUM_POS, NUM_PINF };
enum num_kind { KIND_INT, KIND_DBL, KIND_DEC };

/* A number split into a class and, for NEG and POS, an exact magnitude. */
struct num {
	int cls;      /* enum num_class */
	int kind;     /* enum num_kind of the magnitude */
	uint64_t u;   /* KIND_INT: |value| */
	double d;     /* KIND_DBL: |value| */
	char dig[40]; /* KIND_DEC: coefficient digits, no leading/trailing zeros */
	int exp10;    /* KIND_DEC: |value| = dig * 10^exp10 */
};

static void num_from_int(struct num *n, int64_t i)
{
	n->kind = KIND_INT;
	n->cls = i < 0 ? NUM_NEG : i > 0 ? NUM_POS : NUM_ZERO;
	n->u = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
}

static void num_from_value(struct num *n, const bson_value_t *v)
{
	bool neg;
	double d;

	switch (v->value_type) {
	case BSON_TYPE_INT32:
		num_from_int(n, v->value.v_int32);
		return;
	case BSON_TYPE_INT64:
		num_from_int(n, v->value.v_int64);
		return;
	case BSON_TYPE_DOUBLE:
		d = v->value.v_double;
		n->kind = KIND_DBL;
		n->d = fabs(d);
		if (isnan(d))
			n->cls = NUM_NAN;
		else if (isinf(d))
			n->cls = d < 0 ? NUM_NINF : NUM_PINF;
		else if (d == 0)
			n->cls = NUM_ZERO;
		else
			n->cls = d < 0 ? NUM_NEG : NUM_POS;
		return;
	default: /* BSON_TYPE_DECIMAL128 */
		n->kind = KIND_DEC;
		switch (store__dec_split(v->value.v_decimal128, &neg, n->dig, &n->exp10)) {
		case STORE__DEC_NAN:
			n->cls = NUM_NAN;
			break;
		case STORE__DEC_INF:
			n->cls = neg ? NUM_NINF : NUM_PINF;
			break;
		case STORE__DEC_ZERO:
			n->cls = NUM_ZERO;
			break;
		default:
			n->cls = neg ? NUM_NEG : NUM_POS;
			break;
		}
		return;
	}
}

/* An integer magnitude as decimal digits without trailing zeros (u > 0). */
static void int_to_dec(uint64_t u, char *dig, int *exp10)
{
	int len = snprintf(dig, 24, "%" PRIu64, u);

	*exp10 = 0;
	while (len > 1 && dig[len - 1] == '0') {
		dig[--len] = '\0';
		(*exp10)++;
	}
}

static int cmp_dec_dec(const char *da, int ea, const char *db, int eb)
{
	int aa = ea + (int)strlen(da), ab = eb + (int)strlen(db); /* adjusted exponents + 1 */
	int c;

	if (aa != ab)
		return aa < ab ? -1 : 1;
	c = strcmp(da, db);
	return c < 0 ? -1 : c > 0;
}

static int cmp_u64_dbl(uint64_t u, double d)
{
	double t;
	uint64_t ti;

	if (d >= 18446744073709551616.0)
		return -1;
	t = floor(d);
	ti = (uint64_t)t;
	if (u != ti)
		return u < ti ? -1 : 1;
	return d > t ? -1 : 0;
}

/*
 * Compares a positive finite double with the positive decimal dig * 10^exp10, exactly.
 * Orders of magnitude decide most cases; the rest scale both sides to integers:
 * m * 2^e2 against c * 10^e10, with the negative powers moved to the other side.
 */
static int cmp_dbl_dec(double d, const char *dig, int exp10)
{
	static const double log10_2 = 0.30102999566398119521;
	int be, adj = exp10 + (int)strlen(dig) - 1; /* 10^adj <= x < 10^(adj+1) */
	double fr = frexp(d, &be);		    /* 2^(be-1) <= d < 2^be */
	struct big left, right;
	const char *p;

	if (adj + 1 <= (be - 1) * log10_2 - 0.001)
		return 1;
	if (be * log10_2 + 0.001 <= adj)
		return -1;
	big_set_u64(&left, (uint64_t)ldexp(fr, 53));
	big_set_u64(&right, 0);
	for (p = dig; *p; p++)
		big_mul_add(&right, 10, (uint32_t)(*p - '0'));
	if (be - 53 >= 0)
		big_shl(&left, be - 53);
	else
		big_shl(&right, 53 - be);
	if (exp10 >= 0)
		big_mul_pow10(&right, exp10);
	else
		big_mul_pow10(&left, -exp10);
	return big_cmp(&left, &right);
}

/* Compares two magnitudes of any kinds. */
static int cmp_magnitude(const struct num *a, const struct num *b)
{
	char da[40];
	int ea;

	if (a->kind > b->kind)
		return -cmp_magnitude(b, a);
	switch (a->kind * 3 + b->kind) {
	case KIND_INT * 3 + KIND_INT:
		return a->u < b->u ? -1 : a->u > b->u;
	case KIND_INT * 3 + KIND_DBL:
		return cmp_u64_dbl(a->u, b->d);
	case KIND_INT * 3 + KIND_DEC:
		int_to_dec(a->u, da, &ea);
		return cmp_dec_dec(da, ea, b->dig, b->exp10);
	case KIND_DBL * 3 + KIND_DBL:
		return a->d < b->d ? -1 : a->d > b->d;
	case KIND_DBL * 3 + KIND_DEC:
		return cmp_dbl_dec(a->d, b->dig, b->exp10);
	default: /* KIND_DEC, KIND_DEC */
		return cmp_dec_dec(a->dig, a->exp10, b->dig, b->exp10);
	}
}

static int cmp_numbers(const bson_value_t *a, const bson_value_t *b)
{
	struct num na, nb;

	num_from_value(&na, a);
	num_from_value(&nb, b);
	if (na.cls != nb.cls)
		return na.cls < nb.cls ? -1 : 1;
	if (na.cls == NUM_POS)
		return cmp_magnitude(&na, &nb);
	if (na.cls == NUM_NEG)
		return cmp_magnitude(&nb, &na);
	return 0; /* NaN = NaN, -inf = -inf, 0 = -0, +inf = +inf */
}

/* ---- everything else --------------------------------------------------------------- */

static int cmp_bytes(const void *a, size_t la, const void *b, size_t lb)
{
	int c = memcmp(a, b, la < lb ? la : lb);

	if (c)
		return c < 0 ? -1 : 1;
	return la < lb ? -1 : la > lb;
}

static int cmp_value(const bson_value_t *a, const bson_value_t *b, int depth);

/*
 * Compares two documents (field by field: type bracket, name, value; the shorter one first
 * when one is a prefix of the other) or two arrays (element by element, names ignored).
 */
static int cmp_docs(const uint8_t *da, uint32_t la, const uint8_t *db, uint32_t lb, bool array,
		    int depth)
{
	bson_iter_t ia, ib;
	bool oka, okb, ha, hb;
	int c;

	if (depth > CMP_MAX_DEPTH)
		return cmp_bytes(da, la, db, lb);
	oka = bson_iter_init_from_data(&ia, da, la);
	okb = bson_iter_init_from_data(&ib, db, lb);
	for (;;) {
		ha = oka && bson_iter_next(&ia);
		hb = okb && bson_iter_next(&ib);
		if (!ha || !hb)
			return ha ? 1 : hb ? -1 : 0;
		if (!array) {
			int ta = store_type_bracket(bson_iter_type(&ia));
			int tb = store_type_bracket(bson_iter_type(&ib));

			if (ta != tb)
				return ta < tb ? -1 : 1;
			c = strcmp(bson_iter_key(&ia), bson_iter_key(&ib));
			if (c)
				return c < 0 ? -1 : 1;
		}
		c = cmp_value(bson_iter_value(&ia), bson_iter_value(&ib), depth);
		if (c)
			return c;
	}
}

static int cmp_value(const bson_value_t *a, const bson_value_t *b, int depth)
{
	int ba = store_type_bracket(a->value_type), bb = store_type_bracket(b->value_type);
	const char *sa, *sb;
	uint32_t la, lb;
	int c;

	if (ba != bb)
		return ba < bb ? -1 : 1;
	switch (ba) {
	case BR_NUMBER:
		return cmp_numbers(a, b);
	case BR_STRING:
		sa = a->value_type == BSON_TYPE_UTF8 ? a->value.v_utf8.str
						     : a->value.v_symbol.symbol;
		la = a->value_type == BSON_TYPE_UTF8 ? a->value.v_utf8.len : a->value.v_symbol.len;
		sb = b->value_type == BSON_TYPE_UTF8 ? b->value.v_utf8.str
						     : b->value.v_symbol.symbol;
		lb = b->value_type == BSON_TYPE_UTF8 ? b->value.v_utf8.len : b->value.v_symbol.len;
		return cmp_bytes(sa, la, sb, lb);
	case BR_DOCUMENT:
	case BR_ARRAY:
		return cmp_docs(a->value.v_doc.data, a->value.v_doc.data_len, b->value.v_doc.data,
				b->value.v_doc.data_len, ba == BR_ARRAY, depth + 1);
	case BR_BINARY:
		if (a->value.v_binary.data_len != b->value.v_binary.data_len)
			return a->value.v_binary.data_len < b->value.v_binary.data_len ? -1 : 1;
		if (a->value.v_binary.subtype != b->value.v_binary.subtype)
			return a->value.v_binary.subtype < b->value.v_binary.subtype ? -1 : 1;
		return cmp_bytes(a->value.v_binary.data, a->value.v_binary.data_len,
				 b->value.v_binary.data, b->value.v_binary.data_len);
	case BR_OID:
		return cmp_bytes(a->value.v_oid.bytes, 12, b->value.v_oid.bytes, 12);
	case BR_BOOL:
		return (int)a->value.v_bool - (int)b->value.v_bool;
	case BR_DATE:
		return a->value.v_datetime < b->value.v_datetime   ? -1
		       : a->value.v_datetime > b->value.v_datetime ? 1
								   : 0;
	case BR_TIMESTAMP:
		if (a->value.v_timestamp.timestamp != b->value.v_timestamp.timestamp)
			return a->value.v_timestamp.timestamp < b->value.v_timestamp.timestamp ? -1
											       : 1;
		if (a->value.v_timestamp.increment != b->value.v_timestamp.increment)
			return a->value.v_timestamp.increment < b->value.v_timestamp.increment ? -1
											       : 1;
		return 0;
	case BR_REGEX:
		c = strcmp(a->value.v_regex.regex, b->value.v_regex.regex);
		if (!c)
			c = strcmp(a->value.v_regex.options, b->value.v_regex.options);
		return c < 0 ? -1 : c > 0;
	case BR_DBPOINTER:
		la = a->value.v_dbpointer.collection_len;
		lb = b->value.v_dbpointer.collection_len;
		if (la != lb)
			return la < lb ? -1 : 1;
		c = cmp_bytes(a->value.v_dbpointer.collection, la, b->value.v_dbpointer.collection,
			      lb);
		if (!c)
			c = cmp_bytes(a->value.v_dbpointer.oid.bytes, 12,
				      b->value.v_dbpointer.oid.bytes, 12);
		return c;
	case BR_CODE:
		return cmp_bytes(a->value.v_code.code, a->value.v_code.code_len,
				 b->value.v_code.code, b->value.v_code.code_len);
	case BR_CODEWSCOPE:
		c = cmp_bytes(a->value.v_codewscope.code, a->value.v_codewscope.code_len,
			      b->value.v_codewscope.code, b->value.v_codewscope.code_len);
		if (c)
			return c;
		return cmp_docs(a->value.v_codewscope.scope_data, a->value.v_codewscope.scope_len,
				b->value.v_codewscope.scope_data, b->value.v_codewscope.scope_len,
				false, depth + 1);
	default: /* MinKey, null/undefined, MaxKey, unknown types: one value per bracket */
		return 0;
	}
}

/* Returns <0, 0 or >0 as a sorts before, with or after b in MongoDB's order. */
int store_value_compare(const bson_value_t *a, const bson_value_t *b)
{
	return cmp_value(a, b, 0);
}

/* Compares the values of the elements the iterators stand on (their names are ignored). */
int store_iter_compare(const bson_iter_t *a, const bson_iter_t *b)
{
	bson_iter_t ca = *a, cb = *b;

	return cmp_value(bson_iter_value(&ca), bson_iter_value(&cb), 0);
}

/* Compares two documents as values of type document. */
int store_doc_compare(const bson_t *a, const bson_t *b)
{
	return cmp_docs(bson_get_data(a), a->len, bson_get_data(b), b->len, false, 0);
}

const char *store_type_alias(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_DOUBLE:
		return "double";
	case BSON_TYPE_UTF8:
		return "string";
	case BSON_TYPE_DOCUMENT:
		return "object";
	case BSON_TYPE_ARRAY:
		return "array";
	case BSON_TYPE_BINARY:
		return "binData";
	case BSON_TYPE_UNDEFINED:
		return "undefined";
	case BSON_TYPE_OID:
		return "objectId";
	case BSON_TYPE_BOOL:
		return "bool";
	case BSON_TYPE_DATE_TIME:
		return "date";
	case BSON_TYPE_NULL:
		return "null";
	case BSON_TYPE_REGEX:
		return "regex";
	case BSON_TYPE_DBPOINTER:
		return "dbPointer";
	case BSON_TYPE_CODE:
		return "javascript";
	case BSON_TYPE_SYMBOL:
		return "symbol";
	case BSON_TYPE_CODEWSCOPE:
		return "javascriptWithScope";
	case BSON_TYPE_INT32:
		return "int";
	case BSON_TYPE_TIMESTAMP:
		return "timestamp";
	case BSON_TYPE_INT64:
		return "long";
	case BSON_TYPE_DECIMAL128:
		return "decimal";
	case BSON_TYPE_MINKEY:
		return "minKey";
	case BSON_TYPE_MAXKEY:
		return "maxKey";
	default:
		return "unknown";
	}
}
