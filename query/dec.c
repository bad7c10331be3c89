/*
 * dec.c - exact decimal128 arithmetic for the aggregation expressions, the accumulators and
 * the update operators: +, -, * and / on IEEE 754-2008 decimal128 values with 34
 * significant digits, rounding half to even, keeping the exponents the standard prescribes
 * (1.10 + 1 = 2.10, 10 / 4 = 2.5), and rounding to a number of places ($round, $trunc,
 * $ceil, $floor). It does not parse or render text beyond libbson's own decimal strings, and
 * it does not decide when decimal arithmetic applies (expr.c and update.c do: when an
 * operand is a decimal).
 *
 * Design notes
 * 1. The arithmetic is the compiler's _Decimal128 (GCC on x86-64 and AArch64: libgcc's
 *    implementation of IEEE 754-2008 decimal floating point, in the BID encoding that BSON
 *    uses too, so a value moves between the two by copying its 16 bytes). It is exact to 34
 *    digits for every operand, infinities and NaN included: no intermediate is ever too
 *    large, as it was for the hand-written arithmetic this replaced (its products of two
 *    long coefficients and sums of far-apart exponents fell back to long double).
 * 2. Rounding to places works on (sign, coefficient < 10^34, exponent), the coefficient in
 *    an unsigned __int128 (10^34 < 2^113), read from libbson's decimal strings: dropping
 *    digits of an exact value needs no wider intermediate.
 * 3. A compiler without _Decimal128 (clang, for the fuzzing build) gets the hand-written
 *    arithmetic below DEC_NO_DFP, which returns -1 when an intermediate does not fit 128
 *    bits (the caller then uses long double). The test command builds with GCC.
 */
#include "agg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;

struct dnum {
	bool neg;
	u128 coef;
	int exp;
};

#define DEC_DIGITS 34
#define DEC_EMAX 6111
#define DEC_EMIN (-6176)

static u128 pow10u(int k)
{
	u128 r = 1;

	while (k-- > 0)
		r *= 10;
	return r;
}

static int digits(u128 c)
{
	int n = 1;

	while (c >= 10) {
		c /= 10;
		n++;
	}
	return n;
}

/* Reads a finite decimal; false for NaN and infinities. */
static bool dec_read(const bson_decimal128_t *d, struct dnum *out)
{
	char s[BSON_DECIMAL128_STRING];
	const char *p = s;
	int frac = 0, nd = 0;
	bool dot = false;

	bson_decimal128_to_string(d, s);
	memset(out, 0, sizeof(*out));
	if (*p == '-') {
		out->neg = true;
		p++;
	}
	if (!(*p >= '0' && *p <= '9'))
		return false;
	for (; (*p >= '0' && *p <= '9') || *p == '.'; p++) {
		if (*p == '.') {
			dot = true;
			continue;
		}
		if (nd || *p != '0')
			nd++;
		if (nd > DEC_DIGITS)
			return false;
		out->coef = out->coef * 10 + (u128)(*p - '0');
		if (dot)
			frac++;
	}
	if (*p == 'E' || *p == 'e')
		out->exp = (int)strtol(p + 1, NULL, 10);
	out->exp -= frac;
	return true;
}

/* Rounds to 34 digits (half to even) and writes out; false when the exponent is out of
 * range. */
static bool dec_write(struct dnum v, bson_decimal128_t *out)
{
	char s[80], *p;
	int n = digits(v.coef);

	if (n > DEC_DIGITS) {
		int k = n - DEC_DIGITS;
		u128 div = pow10u(k), q = v.coef / div, r = v.coef % div, half = div / 2;

		if (r > half || (r == half && (q & 1)))
			q++;
		v.exp += k;
		if (q == pow10u(DEC_DIGITS)) {
			q /= 10;
			v.exp++;
		}
		v.coef = q;
	}
	if (v.exp > DEC_EMAX || v.exp < DEC_EMIN)
		return false;
	/* the coefficient's digits, then the exponent */
	p = s + sizeof(s) - 1;
	*p = 0;
	do {
		*--p = (char)('0' + (int)(v.coef % 10));
		v.coef /= 10;
	} while (v.coef);
	if (v.neg)
		*--p = '-';
	{
		char t[100];

		snprintf(t, sizeof(t), "%sE%d", p, v.exp);
		return bson_decimal128_from_string(t, out);
	}
}

#if !defined(__DEC128_MANT_DIG__)
static bool dec_add(struct dnum a, struct dnum b, bool sub, struct dnum *r)
{
	int e = a.exp < b.exp ? a.exp : b.exp;
	u128 ca = a.coef, cb = b.coef;

	if (sub)
		b.neg = !b.neg;
	if (a.exp - e > 38 || b.exp - e > 38) {
		/* far apart: when the smaller operand is below half a unit of the larger one
		 * padded to 34 digits, the rounded sum is that padded larger operand */
		struct dnum *big = a.exp > b.exp ? &a : &b, *small = a.exp > b.exp ? &b : &a;
		int pad = DEC_DIGITS - digits(big->coef);

		if (big->coef == 0 || small->exp + digits(small->coef) > big->exp - pad - 1)
			return false;
		if (small->coef == 0) {
			*r = *big;
			return true;
		}
		r->neg = big->neg;
		r->coef = big->coef * pow10u(pad);
		r->exp = big->exp - pad;
		return true;
	}
	if (__builtin_mul_overflow(ca, pow10u(a.exp - e), &ca) ||
	    __builtin_mul_overflow(cb, pow10u(b.exp - e), &cb))
		return false;
	r->exp = e;
	if (a.neg == b.neg) {
		if (__builtin_add_overflow(ca, cb, &r->coef))
			return false;
		r->neg = a.neg;
	} else if (ca >= cb) {
		r->coef = ca - cb;
		r->neg = a.neg;
	} else {
		r->coef = cb - ca;
		r->neg = b.neg;
	}
	if (r->coef == 0)
		r->neg = a.neg && b.neg;
	return true;
}

static bool dec_mul(struct dnum a, struct dnum b, struct dnum *r)
{
	if (__builtin_mul_overflow(a.coef, b.coef, &r->coef))
		return false;
	r->exp = a.exp + b.exp;
	r->neg = a.neg != b.neg;
	return true;
}

/* b's coefficient is not zero. */
static bool dec_div(struct dnum a, struct dnum b, struct dnum *r)
{
	int ideal = a.exp - b.exp, e = ideal;
	u128 q, rem, lim = pow10u(DEC_DIGITS - 1);

	r->neg = a.neg != b.neg;
	q = a.coef / b.coef;
	rem = a.coef % b.coef;
	while (rem && q < lim) {
		rem *= 10;
		q = q * 10 + rem / b.coef;
		rem %= b.coef;
		e--;
	}
	if (rem) {
		/* round half to even on the remainder */
		if (2 * rem > b.coef || (2 * rem == b.coef && (q & 1)))
			q++;
	}
	r->coef = q;
	r->exp = e;
	return true;
}

#endif /* !__DEC128_MANT_DIG__ */

#if defined(__DEC128_MANT_DIG__)
/* note 1: BSON's decimal128 and the compiler's are the same 16 bytes (BID, little-endian
 * words low then high on these machines). */
static _Decimal128 dfp_of(const bson_decimal128_t *d)
{
	uint64_t w[2] = {d->low, d->high};
	_Decimal128 x;

	memcpy(&x, w, sizeof(x));
	return x;
}

static void dfp_to(_Decimal128 x, bson_decimal128_t *out)
{
	uint64_t w[2];

	memcpy(w, &x, sizeof(w));
	out->low = w[0];
	out->high = w[1];
}
#endif

int agg__dec_op(char op, const bson_decimal128_t *a, const bson_decimal128_t *b,
		bson_decimal128_t *out)
{
#if defined(__DEC128_MANT_DIG__)
	_Decimal128 x = dfp_of(a), y = dfp_of(b);

	switch (op) {
	case '+':
		dfp_to(x + y, out);
		return 0;
	case '-':
		dfp_to(x - y, out);
		return 0;
	case '*':
		dfp_to(x * y, out);
		return 0;
	default:
		if (y == 0)
			return -1; /* the caller's error ($divide by zero) */
		dfp_to(x / y, out);
		return 0;
	}
#else
	struct dnum x, y, r;
	bool ok;

	if (!dec_read(a, &x) || !dec_read(b, &y))
		return -1;
	switch (op) {
	case '+':
	case '-':
		ok = dec_add(x, y, op == '-', &r);
		break;
	case '*':
		ok = dec_mul(x, y, &r);
		break;
	default:
		if (y.coef == 0)
			return -1;
		ok = dec_div(x, y, &r);
	}
	return ok && dec_write(r, out) ? 0 : -1;
#endif
}

int agg__dec_round(const bson_decimal128_t *a, int64_t place, char mode, bson_decimal128_t *out)
{
	struct dnum v;
	int64_t k;
	u128 div, q, rem;
	bool up;

	if (!dec_read(a, &v))
		return -1; /* NaN and infinities stay as they are */
	k = -place - v.exp; /* digits to drop */
	if (k <= 0) {
		*out = *a;
		return 0;
	}
	if (k > DEC_DIGITS) {
		q = 0;
		rem = v.coef;
		div = 0; /* rem is below any half of 10^k */
	} else {
		div = pow10u((int)k);
		q = v.coef / div;
		rem = v.coef % div;
	}
	switch (mode) {
	case 'r': /* half to even */
		up = div && (rem > div / 2 || (rem == div / 2 && rem && (q & 1)));
		break;
	case 'c': /* toward +infinity */
		up = rem && !v.neg;
		break;
	case 'f': /* toward -infinity */
		up = rem && v.neg;
		break;
	default: /* toward zero */
		up = false;
	}
	if (up)
		q++;
	v.coef = q;
	v.exp = (int)-place;
	/* places below zero keep the value's digits in an exponent 0 form (1234 -> 1200) */
	while (v.exp > 0 && v.coef && digits(v.coef) < DEC_DIGITS) {
		v.coef *= 10;
		v.exp--;
	}
	if (!v.coef && v.exp > 0)
		v.exp = 0;
	return dec_write(v, out) ? 0 : -1;
}

void agg__dec_from_value(const bson_value_t *v, bson_decimal128_t *out)
{
	char s[64];

	switch (v->value_type) {
	case BSON_TYPE_DECIMAL128:
		*out = v->value.v_decimal128;
		return;
	case BSON_TYPE_INT32:
		snprintf(s, sizeof(s), "%" PRId32, v->value.v_int32);
		break;
	case BSON_TYPE_INT64:
		snprintf(s, sizeof(s), "%" PRId64, v->value.v_int64);
		break;
	default:
		/* a double converts with 15 significant digits, as the server does */
		snprintf(s, sizeof(s), "%.15g", agg__num_ld(v) == 0 ? 0.0 : (double)agg__num_ld(v));
		if (strstr(s, "inf"))
			snprintf(s, sizeof(s), "%sInfinity", s[0] == '-' ? "-" : "");
		else if (strstr(s, "nan"))
			snprintf(s, sizeof(s), "NaN");
	}
	bson_decimal128_from_string(s, out);
}
