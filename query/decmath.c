/*
 * decmath.c - the transcendental operators on decimal128 values, correctly rounded to 34
 * digits (half to even): $sqrt, $exp, $ln, $log10, $log and $pow. It holds a small
 * arbitrary-precision integer (base 10^9 limbs) and fixed-point arithmetic on it; it does not
 * do +, -, *, / of two decimals (dec.c does, with the compiler's decimal arithmetic) and it
 * does not decide when decimal arithmetic applies (expr.c does).
 *
 * Design notes
 * 1. Numbers are non-negative integers of up to BN_LIMBS base-10^9 limbs on the stack (no
 *    allocation); a fixed-point value is a sign and such an integer m meaning m / 10^W, W the
 *    working number of fraction digits of one attempt.
 * 2. Each function computes an approximation A and a bound E on its error (in units of the
 *    last place); the result is A rounded to 34 digits when A - E and A + E round to the same
 *    decimal128 (Ziv's strategy). When they do not, the attempt is repeated with W doubled, up
 *    to W_MAX digits. Square roots need no such loop: the integer square root and its
 *    remainder decide the rounding exactly.
 * 3. Exact results keep the exponent the standard prefers: sqrt(4.00) = 2.0, exp(0) = 1,
 *    ln(1) = 0, log10(1000) = 3 (what Python's decimal and MongoDB's library give). Inexact
 *    results have 34 digits. $pow's result is padded to 34 digits, as MongoDB pads it (it
 *    adds the zero of the least exponent to bid128_pow's result).
 * 4. Special values follow MongoDB's library (C99's pow rules for $pow: x^0 = 1, 1^y = 1, a
 *    negative base with a non-integer exponent is NaN); the caller raises MongoDB's errors for
 *    the arguments it refuses (a negative $sqrt, a $ln of 0), before calling here.
 * 5. A result that lies within 10^-W_MAX of a rounding midpoint after the last attempt is
 *    taken to be that midpoint and rounded half to even (only exact powers get there).
 */
#include "agg_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BN_BASE 1000000000u
#define BN_LIMBS 240	      /* 2,160 digits: twice W_MAX, and the exact integer powers */
#define W_FIRST 60	      /* fraction digits of the first attempt */
#define W_MAX 480	      /* and of the last */
#define POW_EXACT_DIGITS 1000 /* x^n computed exactly while it has at most this many digits */

struct bn {
	int n;		      /* limbs in use; 0 is the number zero */
	uint32_t d[BN_LIMBS]; /* little-endian limbs, each < BN_BASE */
};

/* ---- integers ------------------------------------------------------------------------- */

static void bn_trim(struct bn *a)
{
	while (a->n > 0 && a->d[a->n - 1] == 0)
		a->n--;
}

static void bn_set(struct bn *a, uint64_t v)
{
	a->n = 0;
	while (v) {
		a->d[a->n++] = (uint32_t)(v % BN_BASE);
		v /= BN_BASE;
	}
}

static int bn_cmp(const struct bn *a, const struct bn *b)
{
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	for (int i = a->n - 1; i >= 0; i--)
		if (a->d[i] != b->d[i])
			return a->d[i] < b->d[i] ? -1 : 1;
	return 0;
}

/* r = a + b (r may be a or b). False on overflow of BN_LIMBS. */
static bool bn_add(struct bn *r, const struct bn *a, const struct bn *b)
{
	int n = a->n > b->n ? a->n : b->n;
	uint32_t carry = 0;

	for (int i = 0; i < n; i++) {
		uint32_t s = (i < a->n ? a->d[i] : 0) + (i < b->n ? b->d[i] : 0) + carry;

		carry = s >= BN_BASE;
		r->d[i] = carry ? s - BN_BASE : s;
	}
	r->n = n;
	if (carry) {
		if (n == BN_LIMBS)
			return false;
		r->d[r->n++] = 1;
	}
	return true;
}

/* r = a - b, a >= b (r may be a or b). */
static void bn_sub(struct bn *r, const struct bn *a, const struct bn *b)
{
	int64_t borrow = 0;

	for (int i = 0; i < a->n; i++) {
		int64_t s = (int64_t)a->d[i] - (i < b->n ? b->d[i] : 0) - borrow;

		borrow = s < 0;
		r->d[i] = (uint32_t)(s < 0 ? s + BN_BASE : s);
	}
	r->n = a->n;
	bn_trim(r);
}

/* r = a * b (r must not be a or b). False when the product does not fit. */
static bool bn_mul(struct bn *r, const struct bn *a, const struct bn *b)
{
	if (a->n == 0 || b->n == 0) {
		r->n = 0;
		return true;
	}
	if (a->n + b->n > BN_LIMBS)
		return false;
	memset(r->d, 0, sizeof(uint32_t) * (size_t)(a->n + b->n));
	for (int i = 0; i < a->n; i++) {
		uint64_t carry = 0;

		for (int j = 0; j < b->n; j++) {
			uint64_t t = (uint64_t)a->d[i] * b->d[j] + r->d[i + j] + carry;

			r->d[i + j] = (uint32_t)(t % BN_BASE);
			carry = t / BN_BASE;
		}
		r->d[i + b->n] = (uint32_t)carry;
	}
	r->n = a->n + b->n;
	bn_trim(r);
	return true;
}

/* a = a * m + add, m and add below BN_BASE. False on overflow. */
static bool bn_muladd_small(struct bn *a, uint32_t m, uint32_t add)
{
	uint64_t carry = add;

	for (int i = 0; i < a->n; i++) {
		uint64_t t = (uint64_t)a->d[i] * m + carry;

		a->d[i] = (uint32_t)(t % BN_BASE);
		carry = t / BN_BASE;
	}
	if (carry) {
		if (a->n == BN_LIMBS)
			return false;
		a->d[a->n++] = (uint32_t)carry;
	}
	bn_trim(a);
	return true;
}

/* a = a / m, returns the remainder (m below BN_BASE, not 0). */
static uint32_t bn_div_small(struct bn *a, uint32_t m)
{
	uint64_t rem = 0;

	for (int i = a->n - 1; i >= 0; i--) {
		uint64_t t = rem * BN_BASE + a->d[i];

		a->d[i] = (uint32_t)(t / m);
		rem = t % m;
	}
	bn_trim(a);
	return (uint32_t)rem;
}

static const uint32_t pow10_small[10] = {1,	 10,	  100,	    1000,      10000,
					 100000, 1000000, 10000000, 100000000, 1000000000};

/* a = a * 10^k, k >= 0. False on overflow. */
static bool bn_shl10(struct bn *a, int k)
{
	int limbs = k / 9;

	if (a->n == 0)
		return true;
	if (a->n + limbs > BN_LIMBS)
		return false;
	memmove(a->d + limbs, a->d, sizeof(uint32_t) * (size_t)a->n);
	memset(a->d, 0, sizeof(uint32_t) * (size_t)limbs);
	a->n += limbs;
	return bn_muladd_small(a, pow10_small[k % 9], 0);
}

/* a = floor(a / 10^k), k >= 0; true when what was dropped is not zero. */
static bool bn_shr10(struct bn *a, int k)
{
	int limbs = k / 9;
	bool sticky = false;

	if (limbs >= a->n) {
		sticky = a->n > 0;
		a->n = 0;
		return sticky;
	}
	for (int i = 0; i < limbs; i++)
		sticky |= a->d[i] != 0;
	memmove(a->d, a->d + limbs, sizeof(uint32_t) * (size_t)(a->n - limbs));
	a->n -= limbs;
	if (k % 9)
		sticky |= bn_div_small(a, pow10_small[k % 9]) != 0;
	return sticky;
}

static int bn_digits(const struct bn *a)
{
	int n;
	uint32_t top;

	if (a->n == 0)
		return 1;
	n = (a->n - 1) * 9;
	for (top = a->d[a->n - 1]; top; top /= 10)
		n++;
	return n;
}

/* q = floor(a / b), r = a mod b (Knuth's algorithm D in base 10^9); b is not zero; q and r
 * are neither a nor b. */
static void bn_divmod(struct bn *q, struct bn *r, const struct bn *a, const struct bn *b)
{
	struct bn u, v;
	uint32_t f;
	int n = b->n, m;

	if (bn_cmp(a, b) < 0) {
		q->n = 0;
		*r = *a;
		return;
	}
	if (n == 1) {
		*q = *a;
		bn_set(r, bn_div_small(q, b->d[0]));
		return;
	}
	/* normalise: v's top limb at least BN_BASE / 2 */
	f = (uint32_t)(BN_BASE / ((uint64_t)b->d[n - 1] + 1));
	u = *a;
	v = *b;
	u.d[u.n] = 0; /* u gets one more limb */
	bn_muladd_small(&v, f, 0);
	{
		uint64_t carry = 0;

		for (int i = 0; i < u.n; i++) {
			uint64_t t = (uint64_t)u.d[i] * f + carry;

			u.d[i] = (uint32_t)(t % BN_BASE);
			carry = t / BN_BASE;
		}
		u.d[u.n] = (uint32_t)carry;
	}
	m = a->n - n;
	q->n = m + 1;
	for (int j = m; j >= 0; j--) {
		uint64_t num = (uint64_t)u.d[j + n] * BN_BASE + u.d[j + n - 1];
		uint64_t qh = num / v.d[n - 1], rh = num % v.d[n - 1];
		int64_t borrow = 0, t;
		uint64_t carry = 0;

		while (qh >= BN_BASE || qh * v.d[n - 2] > rh * BN_BASE + u.d[j + n - 2]) {
			qh--;
			rh += v.d[n - 1];
			if (rh >= BN_BASE)
				break;
		}
		/* u[j..j+n] -= qh * v */
		for (int i = 0; i < n; i++) {
			uint64_t p = qh * v.d[i] + carry;

			carry = p / BN_BASE;
			t = (int64_t)u.d[i + j] - (int64_t)(p % BN_BASE) - borrow;
			borrow = t < 0;
			u.d[i + j] = (uint32_t)(t < 0 ? t + BN_BASE : t);
		}
		t = (int64_t)u.d[j + n] - (int64_t)carry - borrow;
		borrow = t < 0;
		u.d[j + n] = (uint32_t)(t < 0 ? t + BN_BASE : t);
		if (borrow) { /* qh was one too large: add v back */
			uint32_t c = 0;

			qh--;
			for (int i = 0; i < n; i++) {
				uint32_t s = u.d[i + j] + v.d[i] + c;

				c = s >= BN_BASE;
				u.d[i + j] = c ? s - BN_BASE : s;
			}
			u.d[j + n] = (uint32_t)((u.d[j + n] + c) % BN_BASE);
		}
		q->d[j] = (uint32_t)qh;
	}
	bn_trim(q);
	u.n = n;
	bn_trim(&u);
	*r = u;
	bn_div_small(r, f);
}

/* r = floor(sqrt(a)) by Newton's iteration from above; returns true when exact. */
static bool bn_isqrt(struct bn *r, const struct bn *a)
{
	struct bn y, q, rem, t;

	if (a->n == 0) {
		r->n = 0;
		return true;
	}
	bn_set(&y, 1);
	bn_shl10(&y, (bn_digits(a) + 1) / 2 + 1); /* above the root */
	for (;;) {
		bn_divmod(&q, &rem, a, &y);
		bn_add(&t, &y, &q);
		bn_div_small(&t, 2);
		if (bn_cmp(&t, &y) >= 0)
			break;
		y = t;
	}
	*r = y;
	bn_mul(&t, &y, &y);
	return bn_cmp(&t, a) == 0;
}

/* ---- decimal128 in and out ------------------------------------------------------------- */

/* A finite decimal: (-1)^neg * c * 10^e. */
struct dfin {
	bool neg;
	struct bn c;
	int e;
};

enum dkind { D_FINITE, D_INF, D_NAN };

static enum dkind dec_in(const bson_decimal128_t *d, struct dfin *out)
{
	char s[BSON_DECIMAL128_STRING];
	const char *p = s;
	int frac = 0;
	bool dot = false;

	bson_decimal128_to_string(d, s);
	memset(out, 0, sizeof(*out));
	if (*p == '-') {
		out->neg = true;
		p++;
	}
	if (*p == 'N')
		return D_NAN;
	if (*p == 'I')
		return D_INF;
	for (; (*p >= '0' && *p <= '9') || *p == '.'; p++) {
		if (*p == '.') {
			dot = true;
			continue;
		}
		bn_muladd_small(&out->c, 10, (uint32_t)(*p - '0'));
		if (dot)
			frac++;
	}
	if (*p == 'E' || *p == 'e')
		out->e = (int)strtol(p + 1, NULL, 10);
	out->e -= frac;
	return D_FINITE;
}

static void dec_special(const char *s, bson_decimal128_t *out)
{
	bson_decimal128_from_string(s, out);
}

/* Writes (-1)^neg * c * 10^e, c < 10^34 and e in decimal128's range (the rounding made
 * sure). */
static void dec_out(bool neg, const struct bn *c, int e, bson_decimal128_t *out)
{
	char s[80], *p = s + 60;
	struct bn t = *c;

	*p = 0;
	do {
		*--p = (char)('0' + bn_div_small(&t, 10));
	} while (t.n);
	if (neg)
		*--p = '-';
	snprintf(s + 60, sizeof(s) - 60, "E%d", e);
	memmove(s, p, strlen(p) + 1);
	bson_decimal128_from_string(s, out);
}

#define DEC_DIGITS 34
#define DEC_ETINY (-6176)
#define DEC_ETOP 6111 /* largest exponent of a 34-digit coefficient */

/* Rounds (m + f) * 10^e to decimal128 (34 digits, half to even, the least exponent
 * DEC_ETINY), where 0 <= f < 1 is a fraction below m's last digit that sticky says is not
 * zero (never exactly one half). Writes the coefficient and exponent to *c and *re; returns
 * false on overflow (the caller's infinity). */
static bool round34(const struct bn *m, bool sticky, int e, struct bn *c, int *re)
{
	int drop = bn_digits(m) - DEC_DIGITS;
	struct bn q = *m;

	if (e + drop < DEC_ETINY)
		drop = DEC_ETINY - e;
	if (drop > 0) {
		uint32_t r;
		bool below = bn_shr10(&q, drop - 1) || sticky, up;

		r = bn_div_small(&q, 10);
		up = r > 5 || (r == 5 && (below || (q.n && (q.d[0] & 1))));
		e += drop;
		if (up) {
			bn_muladd_small(&q, 1, 1);
			if (bn_digits(&q) > DEC_DIGITS) {
				bn_div_small(&q, 10);
				e++;
			}
		}
	}
	if (e > DEC_ETOP) {
		/* a short coefficient takes zeros for a lower exponent */
		if (q.n && e - (DEC_DIGITS - bn_digits(&q)) > DEC_ETOP)
			return false;
		if (q.n)
			bn_shl10(&q, e - DEC_ETOP);
		e = DEC_ETOP;
	}
	*c = q;
	*re = e;
	return true;
}

/* Pads a finite result to 34 digits (or to the least exponent), as adding the zero of the
 * least exponent does (note 3). */
static void pad34(struct bn *c, int *e)
{
	int room;

	if (!c->n) {
		*e = DEC_ETINY;
		return;
	}
	room = DEC_DIGITS - bn_digits(c);
	if (*e - room < DEC_ETINY)
		room = *e - DEC_ETINY;
	if (room > 0) {
		bn_shl10(c, room);
		*e -= room;
	}
}

/* Strips trailing zeros of an exact result while its exponent is below ideal (note 3). */
static void strip_to(struct bn *c, int *e, int ideal)
{
	while (*e < ideal && c->n && c->d[0] % 10 == 0) {
		bn_div_small(c, 10);
		(*e)++;
	}
	if (!c->n && *e < ideal)
		*e = ideal;
}

static void out_int(int64_t k, bson_decimal128_t *out)
{
	char s[32];

	snprintf(s, sizeof(s), "%lld", (long long)k);
	bson_decimal128_from_string(s, out);
}

/* ---- fixed point ----------------------------------------------------------------------- */

/* (-1)^neg * m / 10^w, w the attempt's fraction digits (note 1). */
struct fx {
	bool neg;    /* the sign (a zero is never negative) */
	struct bn m; /* the magnitude in units of 10^-w */
};

static void fx_add(struct fx *r, const struct fx *a, const struct fx *b)
{
	struct fx t;

	if (a->neg == b->neg) {
		t.neg = a->neg;
		bn_add(&t.m, &a->m, &b->m);
	} else if (bn_cmp(&a->m, &b->m) >= 0) {
		t.neg = a->neg;
		bn_sub(&t.m, &a->m, &b->m);
	} else {
		t.neg = b->neg;
		bn_sub(&t.m, &b->m, &a->m);
	}
	if (!t.m.n)
		t.neg = false;
	*r = t;
}

static void fx_sub(struct fx *r, const struct fx *a, const struct fx *b)
{
	struct fx nb = *b;

	nb.neg = nb.m.n ? !nb.neg : false;
	fx_add(r, a, &nb);
}

/* r = a * b, truncated (r may be a or b). */
static void fx_mul(struct fx *r, const struct fx *a, const struct fx *b, int w)
{
	struct bn p;

	bn_mul(&p, &a->m, &b->m);
	bn_shr10(&p, w);
	r->m = p;
	r->neg = p.n && a->neg != b->neg;
}

/* r = a / b, truncated; b is not zero (r may be a or b). */
static void fx_div(struct fx *r, const struct fx *a, const struct fx *b, int w)
{
	struct bn n = a->m, q, rem;

	bn_shl10(&n, w);
	bn_divmod(&q, &rem, &n, &b->m);
	r->neg = q.n && a->neg != b->neg;
	r->m = q;
}

static void fx_int(struct fx *r, int64_t k, int w)
{
	r->neg = k < 0;
	bn_set(&r->m, (uint64_t)(k < 0 ? -k : k));
	bn_shl10(&r->m, w);
}

/* A finite decimal in fixed point, truncated below 10^-w. */
static void fx_dec(struct fx *r, const struct dfin *d, int w)
{
	r->m = d->c;
	if (d->e + w >= 0)
		bn_shl10(&r->m, d->e + w);
	else
		bn_shr10(&r->m, -(d->e + w));
	r->neg = d->neg && r->m.n;
}

/* e^x by its Taylor series, |x| below about 3; the error is below 2 units per term. */
static void fx_exp_series(struct fx *r, const struct fx *x, int w)
{
	struct fx t, sum;

	fx_int(&sum, 1, w);
	t = sum;
	for (uint32_t n = 1; t.m.n; n++) {
		fx_mul(&t, &t, x, w);
		bn_div_small(&t.m, n);
		if (!t.m.n)
			t.neg = false;
		fx_add(&sum, &sum, &t);
	}
	*r = sum;
}

/* ln m for a moderate m > 0 (here 1 <= m <= 10) by Newton's iteration on e^y, from the
 * double logarithm; the error is a few units. */
static void fx_ln_small(struct fx *r, const struct fx *m, int w)
{
	char s[64];
	double md, y0;
	struct fx y, ey, num, den, step;
	struct dfin d0;
	struct bn t = m->m;

	/* the double of m from its top digits */
	bn_shr10(&t, w > 15 ? w - 15 : 0);
	md = 0;
	for (int i = t.n - 1; i >= 0; i--)
		md = md * BN_BASE + t.d[i];
	md /= 1e15;
	y0 = log(md);
	snprintf(s, sizeof(s), "%.17e", y0);
	{
		bson_decimal128_t dd;

		bson_decimal128_from_string(s, &dd);
		dec_in(&dd, &d0);
	}
	fx_dec(&y, &d0, w);
	for (int i = 0; i < 12; i++) {
		fx_exp_series(&ey, &y, w);
		fx_sub(&num, m, &ey);
		fx_add(&den, m, &ey);
		fx_div(&step, &num, &den, w);
		bn_muladd_small(&step.m, 2, 0);
		fx_add(&y, &y, &step);
		if (bn_digits(&step.m) <= 2)
			break;
	}
	*r = y;
}

/* ln 10 and ln 2 to w digits, kept per thread for the last few w (each costs a few series
 * of e^y). */
static void fx_ln_const(struct fx *r, int k, int w)
{
	static _Thread_local struct {
		int k, w; /* 0: a free slot */
		struct fx v;
	} cache[6];
	static _Thread_local int next;
	struct fx m;

	for (int i = 0; i < 6; i++)
		if (cache[i].k == k && cache[i].w == w) {
			*r = cache[i].v;
			return;
		}
	fx_int(&m, k, w);
	fx_ln_small(r, &m, w);
	cache[next].k = k;
	cache[next].w = w;
	cache[next].v = *r;
	next = (next + 1) % 6;
}

/* ---- the functions ------------------------------------------------------------------- */

static int ndigits_dec(const struct dfin *d)
{
	return bn_digits(&d->c);
}

/* The adjusted exponent (of the leading digit) of a non-zero finite decimal. */
static int adj(const struct dfin *d)
{
	return d->e + ndigits_dec(d) - 1;
}

/* ln|x| of a finite non-zero decimal to w fraction digits, as ln m + E ln 10 for |x| =
 * m 10^E, 1 <= m < 10. Absolute error: below 10^7 units (E ln 10 brings most of it). */
static void fx_ln_dec(struct fx *r, const struct dfin *x, int w)
{
	struct fx m, l, l10;
	int nd = ndigits_dec(x), E = adj(x);
	struct dfin xm = *x;

	xm.neg = false;
	xm.e = -(nd - 1); /* the mantissa in [1, 10) */
	fx_dec(&m, &xm, w);
	fx_ln_small(&l, &m, w);
	if (E) {
		fx_ln_const(&l10, 10, w);
		bn_muladd_small(&l10.m, (uint32_t)(E < 0 ? -E : E), 0);
		l10.neg = E < 0;
		fx_add(&l, &l, &l10);
	}
	*r = l;
}

/* How many more fraction digits ln|x| needs to keep its relative accuracy: the leading
 * zeros of |x| - 1 after the point when |x| is near 1 (|ln x| >= |x - 1| / 4 there), else 0. */
static int ln_zeros(const struct dfin *x)
{
	struct fx one, v, d;
	struct dfin ax = *x;
	int w = DEC_DIGITS + 4, z;

	if (adj(x) != 0 && adj(x) != -1)
		return 0;
	ax.neg = false;
	w = -x->e > w ? -x->e : w;
	fx_dec(&v, &ax, w); /* exact: |x| has at most 34 digits */
	fx_int(&one, 1, w);
	fx_sub(&d, &v, &one);
	if (!d.m.n)
		return 0;
	z = w - bn_digits(&d.m) + 1;
	return z > 0 ? z : 0;
}

/* Rounds the approximation (-1)^a.neg * a.m * 10^(off - w) of a value whose top `trust`
 * significant digits are right within one unit of the last (note 2). 1: written; 0: the
 * bounds round differently (try again with more digits); -1: overflow. */
static int settle(const struct fx *a, int off, int w, int trust, bool last, bson_decimal128_t *out)
{
	struct bn lo = a->m, hi = a->m, err, c1, c2;
	int e1, e2, drop = bn_digits(&a->m) - trust;

	bn_set(&err, 1);
	if (drop > 0)
		bn_shl10(&err, drop);
	bn_add(&hi, &hi, &err);
	if (bn_cmp(&lo, &err) <= 0) { /* too near zero to tell its digits yet */
		if (!last)
			return 0;
		round34(&a->m, false, off - w, &c1, &e1);
		dec_out(a->neg, &c1, e1, out);
		return 1;
	}
	bn_sub(&lo, &lo, &err);
	if (!round34(&hi, true, off - w, &c2, &e2)) {
		if (!round34(&lo, true, off - w, &c1, &e1))
			return -1;
		if (!last)
			return 0;
		if (!round34(&a->m, false, off - w, &c1, &e1))
			return -1;
		dec_out(a->neg, &c1, e1, out);
		return 1;
	}
	round34(&lo, true, off - w, &c1, &e1);
	if (e1 != e2 || bn_cmp(&c1, &c2)) {
		if (!last)
			return 0;
		/* note 5: the midpoint, half to even, from the centre */
		round34(&a->m, false, off - w, &c1, &e1);
	}
	dec_out(a->neg, &c1, e1, out);
	return 1;
}

int agg__dec_sqrt(const bson_decimal128_t *a, bson_decimal128_t *out)
{
	struct dfin x;
	struct bn n, r, c;
	int s, e, ideal;
	bool exact;

	switch (dec_in(a, &x)) {
	case D_NAN:
		*out = *a;
		return 0;
	case D_INF:
		if (x.neg)
			return -1;
		*out = *a;
		return 0;
	default:
		break;
	}
	ideal = x.e >= 0 ? x.e / 2 : -((-x.e + 1) / 2);
	if (!x.c.n) {
		bn_set(&c, 0);
		dec_out(x.neg, &c, ideal, out);
		return 0;
	}
	if (x.neg)
		return -1;
	s = 2 * (DEC_DIGITS + 2) - ndigits_dec(&x);
	s = s < 0 ? 0 : s;
	if ((x.e - s) % 2)
		s++;
	n = x.c;
	bn_shl10(&n, s);
	exact = bn_isqrt(&r, &n);
	e = (x.e - s) / 2;
	if (exact)
		strip_to(&r, &e, ideal);
	round34(&r, !exact, e, &c, &e);
	dec_out(false, &c, e, out);
	return 0;
}

/* e^x for a finite x, |x| < 10^5, at w digits; see settle() for the result. */
static int exp_try(const struct dfin *x, int w, bool last, bool pad, bson_decimal128_t *out)
{
	struct fx xf, l10, r, y;
	struct bn top = x->c;
	double xd = 0;
	int64_t k;
	int rc, cut = bn_digits(&top) > 17 ? bn_digits(&top) - 17 : 0;

	/* the double of x, for the multiple of ln 10 to take away */
	bn_shr10(&top, cut);
	for (int i = top.n - 1; i >= 0; i--)
		xd = xd * BN_BASE + top.d[i];
	xd *= pow(10, x->e + cut);
	if (x->neg)
		xd = -xd;
	k = (int64_t)floor(xd / 2.302585092994046 + 0.5);
	fx_dec(&xf, x, w);
	fx_ln_const(&l10, 10, w);
	bn_muladd_small(&l10.m, (uint32_t)(k < 0 ? -k : k), 0);
	l10.neg = k < 0 && l10.m.n;
	fx_sub(&r, &xf, &l10);
	fx_exp_series(&y, &r, w);
	rc = settle(&y, (int)k, w, w - 9, last, out);
	if (rc == 1 && pad) {
		struct dfin o;

		dec_in(out, &o);
		pad34(&o.c, &o.e);
		dec_out(false, &o.c, o.e, out);
	}
	return rc;
}

static void out_overflow(bool neg, bool big, bson_decimal128_t *out)
{
	if (big)
		dec_special(neg ? "-Infinity" : "Infinity", out);
	else
		dec_special(neg ? "-0E-6176" : "0E-6176", out);
}

/* e^t for a finite t with Ziv's loop; pad: $pow's 34 digits. */
static void exp_dec(const struct dfin *t, bool neg, bool pad, bson_decimal128_t *out)
{
	int rc = 0;

	if (t->c.n && adj(t) >= 5) { /* beyond 10^6145 or below 10^-6176 */
		out_overflow(neg, !t->neg, out);
		return;
	}
	for (int w = W_FIRST; rc == 0; w *= 2)
		rc = exp_try(t, w, w * 2 > W_MAX, pad, out);
	if (rc < 0)
		out_overflow(neg, true, out);
	else if (neg)
		out->high |= 1ULL << 63;
}

int agg__dec_exp(const bson_decimal128_t *a, bson_decimal128_t *out)
{
	struct dfin x;

	switch (dec_in(a, &x)) {
	case D_NAN:
		*out = *a;
		return 0;
	case D_INF:
		if (x.neg)
			dec_special("0", out);
		else
			*out = *a;
		return 0;
	default:
		break;
	}
	if (!x.c.n) {
		out_int(1, out);
		return 0;
	}
	exp_dec(&x, false, false, out);
	return 0;
}

/* log_k|x| (k = 0: ln, 10, 2) or ln|x| / ln|b| of finite positive decimals, neither 1;
 * the logarithms have an absolute error below 10^7 units, so the digits of each past its
 * leading zeros, less 7, are right, and a quotient keeps the fewer of the two, less one. */
static void log_dec(const struct dfin *x, int k, const struct dfin *b, bson_decimal128_t *out)
{
	int zx = ln_zeros(x), zb = b ? ln_zeros(b) : 0, rc = 0;

	for (int w = W_FIRST; rc == 0; w *= 2) {
		int we = w + zx + zb, trust;
		struct fx l, d;

		fx_ln_dec(&l, x, we);
		trust = bn_digits(&l.m) - 8;
		if (k || b) {
			if (k)
				fx_ln_const(&d, k, we);
			else
				fx_ln_dec(&d, b, we);
			if (bn_digits(&d.m) - 8 < trust)
				trust = bn_digits(&d.m) - 8;
			trust--;
			fx_div(&l, &l, &d, we);
		}
		rc = settle(&l, 0, we, trust, w * 2 > W_MAX, out);
	}
}

/* Is |x| exactly 10^k (or 2^k when two)? Sets *k. */
static bool exact_power(const struct dfin *x, bool two, int64_t *k)
{
	struct bn c = x->c, p;
	int e = x->e;

	while (c.n && c.d[0] % 10 == 0) {
		bn_div_small(&c, 10);
		e++;
	}
	if (!two) {
		*k = e;
		return c.n == 1 && c.d[0] == 1;
	}
	/* no power of 2 or 5 is a multiple of 10: 2^j has e = 0, 2^-j = 5^j * 10^-j */
	if (e > 0 || e < -48)
		return false;
	bn_set(&p, 1);
	for (int j = 0; j <= 112; j++) {
		int cmp = bn_cmp(&c, &p);

		if (cmp == 0 && (e == 0 || e == -j)) {
			*k = e == 0 ? j : -j;
			return true;
		}
		if (cmp < 0)
			break;
		bn_muladd_small(&p, e == 0 ? 2 : 5, 0);
	}
	return false;
}

/* Is a finite decimal exactly one? */
static bool is_one(const struct dfin *x)
{
	int64_t k;

	return !x->neg && exact_power(x, false, &k) && k == 0;
}

/* k: 0 for ln, 10 or 2 for log10 and log2; b: another base (or NULL). */
static int log_any(const bson_decimal128_t *a, int k, const struct dfin *b, bson_decimal128_t *out)
{
	struct dfin x;
	int64_t p;

	switch (dec_in(a, &x)) {
	case D_NAN:
		*out = *a;
		return 0;
	case D_INF:
		if (x.neg)
			return -1;
		*out = *a;
		return 0;
	default:
		break;
	}
	if (x.neg || !x.c.n)
		return -1;
	if (is_one(&x)) {
		out_int(0, out);
		return 0;
	}
	if (k && exact_power(&x, k == 2, &p)) {
		out_int(p, out);
		return 0;
	}
	log_dec(&x, k, b, out);
	return 0;
}

int agg__dec_ln(const bson_decimal128_t *a, bson_decimal128_t *out)
{
	return log_any(a, 0, NULL, out);
}

int agg__dec_log10(const bson_decimal128_t *a, bson_decimal128_t *out)
{
	return log_any(a, 10, NULL, out);
}

int agg__dec_log(const bson_decimal128_t *a, const bson_decimal128_t *base, bson_decimal128_t *out)
{
	struct dfin b;

	switch (dec_in(base, &b)) {
	case D_NAN:
		*out = *base;
		return 0;
	case D_INF:
		return -2;
	default:
		break;
	}
	if (b.neg || !b.c.n || is_one(&b))
		return -2;
	{
		int64_t k;

		if (exact_power(&b, false, &k) && k == 1)
			return log_any(a, 10, NULL, out);
		if (exact_power(&b, true, &k) && k == 1)
			return log_any(a, 2, NULL, out);
	}
	return log_any(a, 0, &b, out);
}

/* Is a finite decimal an integer, and is it odd? */
static bool is_integer(const struct dfin *y, bool *odd)
{
	struct bn c = y->c;
	int e = y->e;

	while (e < 0 && c.n && c.d[0] % 10 == 0) {
		bn_div_small(&c, 10);
		e++;
	}
	*odd = e == 0 && c.n && (c.d[0] & 1);
	return e >= 0 || !c.n;
}

static void out_pad(bool neg, struct bn *c, int e, bson_decimal128_t *out)
{
	pad34(c, &e);
	dec_out(neg, c, e, out);
}

/* |x|^n exactly for a small integer n, rounded; false when it would be too long. */
static bool pow_exact(const struct dfin *x, const struct dfin *y, bool neg, bson_decimal128_t *out)
{
	struct bn n = y->c, p, sq = x->c, t, c;
	int64_t ni, e;

	bn_shl10(&n, y->e > 0 ? y->e : 0);
	if (y->e < 0)
		bn_shr10(&n, -y->e);
	if (n.n > 1 || (int64_t)n.d[0] * ndigits_dec(x) > POW_EXACT_DIGITS)
		return false;
	ni = n.n ? n.d[0] : 0;
	bn_set(&p, 1);
	for (int64_t k = ni; k; k >>= 1) {
		if (k & 1) {
			bn_mul(&t, &p, &sq);
			p = t;
		}
		if (k > 1) {
			bn_mul(&t, &sq, &sq);
			sq = t;
		}
	}
	e = (int64_t)x->e * ni;
	if (!y->neg) {
		int re;

		if (e > 100000 || e < -100000 || !round34(&p, false, (int)e, &c, &re)) {
			out_overflow(neg, e > 0, out);
			return true;
		}
		out_pad(neg, &c, re, out);
		return true;
	}
	{
		/* 1 / (p * 10^e) = 10^K / p * 10^(-K - e), with 36 digits or more */
		struct bn one, q, r;
		int K = bn_digits(&p) + DEC_DIGITS + 2, re;

		bn_set(&one, 1);
		bn_shl10(&one, K);
		bn_divmod(&q, &r, &one, &p);
		if (-K - e > 100000 || -K - e < -100000 ||
		    !round34(&q, r.n != 0, (int)(-K - e), &c, &re)) {
			out_overflow(neg, -K - e > 0, out);
			return true;
		}
		out_pad(neg, &c, re, out);
	}
	return true;
}

int agg__dec_pow(const bson_decimal128_t *a, const bson_decimal128_t *b, bson_decimal128_t *out)
{
	struct dfin x, y;
	enum dkind kx = dec_in(a, &x), ky = dec_in(b, &y);
	bool odd = false, yint = ky == D_FINITE && is_integer(&y, &odd), neg;
	struct bn one;

	bn_set(&one, 1);
	/* note 4: C99's pow on the special values */
	if ((ky == D_FINITE && !y.c.n) || (kx == D_FINITE && is_one(&x))) {
		out_pad(false, &one, 0, out);
		return 0;
	}
	if (kx == D_NAN || ky == D_NAN) {
		dec_special("NaN", out);
		return 0;
	}
	neg = x.neg && yint && odd;
	if (ky == D_INF) {
		int c;
		struct dfin ax = x;

		if (kx == D_INF) {
			out_overflow(false, !y.neg, out);
			return 0;
		}
		ax.neg = false;
		c = is_one(&ax) ? 0 : (adj(&ax) >= 0 && ax.c.n ? 1 : -1);
		if (c == 0)
			out_pad(false, &one, 0, out);
		else
			out_overflow(false, (c > 0) != y.neg, out);
		return 0;
	}
	if (kx == D_INF) {
		out_overflow(neg, !y.neg, out);
		return 0;
	}
	if (!x.c.n) {
		if (y.neg)
			return -1; /* the caller's error */
		out_overflow(neg, false, out);
		return 0;
	}
	if (x.neg && !yint) {
		dec_special("NaN", out);
		return 0;
	}
	x.neg = false;
	if (yint && pow_exact(&x, &y, neg, out))
		return 0;
	{
		/* e^(y ln x): ln x to enough digits that y ln x has w right after the point */
		int zx = ln_zeros(&x), ay = adj(&y), rc = 0;

		if (ay - zx > 6) { /* |y ln x| beyond 10^5 */
			struct fx l;

			fx_ln_dec(&l, &x, W_FIRST + zx);
			out_overflow(neg, l.neg == y.neg, out);
			return 0;
		}
		for (int w = W_FIRST; rc == 0; w *= 2) {
			int we = w + zx + (ay > 0 ? ay + 1 : 0) + 8;
			struct fx l, yf, t;
			struct dfin td;

			fx_ln_dec(&l, &x, we);
			fx_dec(&yf, &y, we);
			fx_mul(&t, &l, &yf, we);
			/* t to w + 8 digits: its error is below one unit there */
			bn_shr10(&t.m, we - w - 8);
			td.neg = t.neg;
			td.c = t.m;
			td.e = -(w + 8);
			if (td.c.n && adj(&td) >= 5) {
				out_overflow(neg, !td.neg, out);
				return 0;
			}
			rc = exp_try(&td, w, w * 2 > W_MAX, true, out);
			if (rc < 0) {
				out_overflow(neg, true, out);
				return 0;
			}
		}
		if (neg)
			out->high |= 1ULL << 63;
	}
	return 0;
}
