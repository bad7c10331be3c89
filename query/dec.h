/*
 * dec.h - exact decimal128 arithmetic (dec.c), shared by the aggregation expressions and
 * accumulators (expr.c, agg.c) and the update operators (update.c). Nothing outside query/
 * includes it.
 */
#ifndef DOCFS_DEC_H
#define DOCFS_DEC_H

#include <bson/bson.h>

/* a op b for op '+', '-', '*', '/' in IEEE 754-2008 decimal128 arithmetic (34 digits, half
 * to even; infinities and NaN as the standard has them). -1 for a zero divisor (the
 * caller's error), and, built without the compiler's _Decimal128 (dec.c note 3), when an
 * intermediate does not fit 128 bits (the caller then uses long double). */
int agg__dec_op(char op, const bson_decimal128_t *a, const bson_decimal128_t *b,
		bson_decimal128_t *out);
/* a rounded to place digits after the point (negative: before it), exactly: mode 'r' half
 * to even ($round), 't' toward zero ($trunc), 'c' up ($ceil), 'f' down ($floor). -1 for NaN
 * and infinities (they stay as they are). */
int agg__dec_round(const bson_decimal128_t *a, int64_t place, char mode, bson_decimal128_t *out);
/* A number as a decimal128: integers exactly, doubles with 15 significant digits. */
void agg__dec_from_value(const bson_value_t *v, bson_decimal128_t *out);

/* The transcendental operators on decimals, correctly rounded to 34 digits (decmath.c):
 * NaN gives NaN, infinities what the limits are. -1 when the argument is one MongoDB refuses
 * (the caller's error): a negative $sqrt, a $ln, $log10 or $log of a number <= 0, a $pow of
 * 0 to a negative power; $log returns -2 for a base <= 0, 1 or infinite. $pow's result has
 * 34 digits (MongoDB pads it); $log's base 10 and 2 are log10 and log2, any other base b
 * gives ln x / ln b. */
int agg__dec_sqrt(const bson_decimal128_t *a, bson_decimal128_t *out);
int agg__dec_exp(const bson_decimal128_t *a, bson_decimal128_t *out);
int agg__dec_ln(const bson_decimal128_t *a, bson_decimal128_t *out);
int agg__dec_log10(const bson_decimal128_t *a, bson_decimal128_t *out);
int agg__dec_log(const bson_decimal128_t *a, const bson_decimal128_t *base, bson_decimal128_t *out);
int agg__dec_pow(const bson_decimal128_t *a, const bson_decimal128_t *b, bson_decimal128_t *out);

#endif
