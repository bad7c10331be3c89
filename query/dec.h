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

#endif
