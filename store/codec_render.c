/*
 * codec_render.c - BSON to type-exact relaxed (or canonical) Extended JSON v2 text.
 *
 * Every value is written in the one form that codec_parse.c reads back as the same BSON
 * bytes (see store.h for the forms). This file does not parse and does not validate: it
 * renders any structurally valid BSON, passing string bytes through as they are (only '"',
 * '\\' and control characters are escaped), and fails only on malformed BSON.
 *
 * Speed matters (every document read and every bulk insert renders): elements are read
 * straight from the BSON bytes (next_elem, with libbson's bounds checks but not its calls),
 * output goes into the caller's buffer through inline appenders, integers use a small
 * formatter of their own, strings are scanned eight bytes at a time and copied in runs
 * between the bytes that need escaping.
 */
#include "store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Recursion bound: stored documents have at most DFS_MAX_DEPTH levels; anything deeper is
 * refused rather than allowed to exhaust the stack. */
#define RENDER_MAX_DEPTH 1000

/* Latest date written as an ISO string: 9999-12-31T23:59:59.999Z. */
#define ISO_MAX_MS INT64_C(253402300799999)

struct rnd {
	struct dfs_buf *out;
	enum store_render_style style;
	bool canonical; /* every number typed, dates as $numberLong */
	struct dfs_err *err;
};

static int render_value(struct rnd *r, const bson_value_t *v, int level, bool inline_only);

/* ---- output primitives ------------------------------------------------------------- */

static inline void put(struct dfs_buf *b, const char *s, size_t n)
{
	if (b->len + n >= b->cap)
		dfs_buf_reserve(b, n);
	memcpy(b->data + b->len, s, n);
	b->len += n;
}

#define PUTS(b, lit) put(b, lit, sizeof(lit) - 1)

static inline void putch(struct dfs_buf *b, char c)
{
	if (b->len + 1 >= b->cap)
		dfs_buf_reserve(b, 1);
	b->data[b->len++] = c;
}

static const char digit_pairs[] = "00010203040506070809101112131415161718192021222324252627282930"
				  "31323334353637383940414243444546474849505152535455565758596061"
				  "62636465666768697071727374757677787980818283848586878889909192"
				  "93949596979899";

/* Decimal digits of v into the end of buf[24]; returns the start. */
static char *fmt_u64(uint64_t v, char *end)
{
	char *p = end;

	while (v >= 100) {
		unsigned i = (unsigned)(v % 100) * 2;

		v /= 100;
		*--p = digit_pairs[i + 1];
		*--p = digit_pairs[i];
	}
	if (v >= 10) {
		*--p = digit_pairs[v * 2 + 1];
		*--p = digit_pairs[v * 2];
	} else {
		*--p = (char)('0' + v);
	}
	return p;
}

static void put_i64(struct dfs_buf *b, int64_t v)
{
	char buf[24], *end = buf + sizeof(buf), *p;

	if (v < 0) {
		p = fmt_u64(0 - (uint64_t)v, end);
		*--p = '-';
	} else {
		p = fmt_u64((uint64_t)v, end);
	}
	put(b, p, (size_t)(end - p));
}

/* Which bytes need escaping in a JSON string: 0 none, 'u' as \u00XX, else the letter. */
static const char esc[256] = {
	['\0'] = 'u', [1] = 'u',    [2] = 'u',	  [3] = 'u',	 [4] = 'u',    [5] = 'u',
	[6] = 'u',    [7] = 'u',    ['\b'] = 'b', ['\t'] = 't',	 ['\n'] = 'n', [11] = 'u',
	['\f'] = 'f', ['\r'] = 'r', [14] = 'u',	  [15] = 'u',	 [16] = 'u',   [17] = 'u',
	[18] = 'u',   [19] = 'u',   [20] = 'u',	  [21] = 'u',	 [22] = 'u',   [23] = 'u',
	[24] = 'u',   [25] = 'u',   [26] = 'u',	  [27] = 'u',	 [28] = 'u',   [29] = 'u',
	[30] = 'u',   [31] = 'u',   ['"'] = '"',  ['\\'] = '\\',
};

/* memcpy for the short strings most keys and values are: fixed-size (inlined) moves that
 * overlap, instead of a call. */
static inline void copy_short(char *o, const char *s, size_t n)
{
	if (n >= 8 && n <= 16) {
		memcpy(o, s, 8);
		memcpy(o + n - 8, s + n - 8, 8);
	} else if (n >= 4 && n < 8) {
		memcpy(o, s, 4);
		memcpy(o + n - 4, s + n - 4, 4);
	} else if (n < 4) {
		for (size_t i = 0; i < n; i++)
			o[i] = s[i];
	} else {
		memcpy(o, s, n);
	}
}

/* The length of the prefix of u[0..n) that needs no escaping: eight bytes at a time while
 * none is '"', '\\' or a control character. */
static inline size_t clean_prefix(const unsigned char *u, size_t n)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t x, q, bs;

		memcpy(&x, u + i, 8);
		q = x ^ (ones * '"');
		bs = x ^ (ones * '\\');
		if ((((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & highs)
			break;
	}
	while (i < n && !esc[u[i]])
		i++;
	return i;
}

/* Appends s as a JSON string, then tail (tlen bytes: ": " after a key, or nothing). Most
 * strings need no escape: one copy. */
static void put_str_tail(struct dfs_buf *b, const char *s, size_t n, const char *tail, size_t tlen)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t i = clean_prefix(u, n), run = 0;
	char *o;

	/* worst case 6 bytes per input byte; reserve the common case and grow on escapes */
	if (b->len + n + 2 + tlen >= b->cap)
		dfs_buf_reserve(b, n + 2 + tlen);
	o = b->data + b->len;
	*o = '"';
	if (i == n) {
		copy_short(o + 1, s, n);
		o[n + 1] = '"';
		copy_short(o + n + 2, tail, tlen);
		b->len += n + 2 + tlen;
		return;
	}
	b->len++;
	while (i < n) {
		char e = esc[u[i]];

		if (!e) {
			i++;
			continue;
		}
		put(b, s + run, i - run);
		if (e == 'u') {
			char x[6] = {'\\', 'u', '0', '0', hex[u[i] >> 4], hex[u[i] & 15]};

			put(b, x, 6);
		} else {
			char x[2] = {'\\', e};

			put(b, x, 2);
		}
		run = ++i;
		i += clean_prefix(u + i, n - i);
	}
	put(b, s + run, n - run);
	putch(b, '"');
	put(b, tail, tlen);
}

static void put_str(struct dfs_buf *b, const char *s, size_t n)
{
	put_str_tail(b, s, n, "", 0);
}

static void put_indent(struct dfs_buf *b, int level)
{
	static const char spaces[] =
		"                                                                ";
	size_t n = (size_t)level * 2;

	putch(b, '\n');
	while (n > sizeof(spaces) - 1) {
		put(b, spaces, sizeof(spaces) - 1);
		n -= sizeof(spaces) - 1;
	}
	put(b, spaces, n);
}

/* ---- numbers and dates ----------------------------------------------------------------- */

/*
 * The shortest of %.15g, %.16g, %.17g that reads back as d, with ".0" added when it would
 * otherwise read as an integer. d must be finite. Returns the length written into buf[40].
 */
static size_t fmt_double(double d, char *buf)
{
	size_t n;
	int prec;

	if (d == floor(d) && fabs(d) < 9007199254740992.0 && !(d == 0 && signbit(d))) {
		char tmp[24], *end = tmp + sizeof(tmp), *p;
		int64_t i = (int64_t)d;

		p = fmt_u64(i < 0 ? 0 - (uint64_t)i : (uint64_t)i, end);
		if (i < 0)
			*--p = '-';
		n = (size_t)(end - p);
		memcpy(buf, p, n);
		memcpy(buf + n, ".0", 3);
		return n + 2;
	}
	for (prec = 15;; prec++) {
		n = (size_t)snprintf(buf, 40, "%.*g", prec, d);
		if (prec == 17 || strtod(buf, NULL) == d)
			break;
	}
	if (!strpbrk(buf, ".e")) {
		memcpy(buf + n, ".0", 3);
		n += 2;
	}
	return n;
}

static void put_double(struct rnd *r, double d)
{
	char buf[48];

	if (isnan(d) || isinf(d) || (d == 0 && signbit(d)) || r->canonical) {
		PUTS(r->out, "{\"$numberDouble\": \"");
		if (isnan(d))
			PUTS(r->out, "NaN");
		else if (isinf(d))
			put(r->out, d < 0 ? "-Infinity" : "Infinity", d < 0 ? 9 : 8);
		else
			put(r->out, buf, fmt_double(d, buf));
		PUTS(r->out, "\"}");
		return;
	}
	put(r->out, buf, fmt_double(d, buf));
}

static void put_2(char *p, int v)
{
	p[0] = digit_pairs[v * 2];
	p[1] = digit_pairs[v * 2 + 1];
}

/* 2014-07-24T10:11:12.345Z for 0 <= ms <= ISO_MAX_MS. */
static void put_iso(struct dfs_buf *b, int64_t ms)
{
	int64_t days = ms / 86400000, z, era, doe, yoe, y, doy, mp, d, m;
	int t = (int)(ms % 86400000);
	char s[24];

	/* civil date of a day count (proleptic Gregorian, eras of 400 years) */
	z = days + 719468;
	era = z / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	y = yoe + era * 400;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y += m <= 2;
	put_2(s, (int)(y / 100));
	put_2(s + 2, (int)(y % 100));
	s[4] = '-';
	put_2(s + 5, (int)m);
	s[7] = '-';
	put_2(s + 8, (int)d);
	s[10] = 'T';
	put_2(s + 11, t / 3600000);
	s[13] = ':';
	put_2(s + 14, t / 60000 % 60);
	s[16] = ':';
	put_2(s + 17, t / 1000 % 60);
	s[19] = '.';
	s[20] = (char)('0' + t % 1000 / 100);
	put_2(s + 21, t % 100);
	s[23] = 'Z';
	put(b, s, 24);
}

static void put_b64(struct dfs_buf *b, const uint8_t *d, uint32_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	uint32_t i;
	char *o;

	dfs_buf_reserve(b, ((size_t)n + 2) / 3 * 4);
	o = b->data + b->len;
	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];

		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = tab[(v >> 6) & 63];
		*o++ = tab[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)d[i] << 16;

		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = '=';
		*o++ = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8;

		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = tab[(v >> 6) & 63];
		*o++ = '=';
	}
	b->len = (size_t)(o - b->data);
}

static void put_hex(struct dfs_buf *b, const uint8_t *d, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	dfs_buf_reserve(b, n * 2);
	for (i = 0; i < n; i++) {
		b->data[b->len++] = hex[d[i] >> 4];
		b->data[b->len++] = hex[d[i] & 15];
	}
}

/* ---- documents ----------------------------------------------------------------------- */

static int invalid(struct rnd *r)
{
	return dfs_err_set(r->err, DFS_EINVAL, "document is not valid BSON");
}

static inline uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* A string value at p (int32 length with its NUL, bytes, NUL) within n bytes: its length
 * without the NUL, or -1 when malformed. */
static int64_t str_len(const uint8_t *p, size_t n)
{
	uint32_t l;

	if (n < 4)
		return -1;
	l = le32(p);
	if (l < 1 || l > n - 4 || p[4 + l - 1] != '\0')
		return -1;
	return (int64_t)l - 1;
}

/*
 * Reads the element at *pp (type byte, key, value) of a document whose terminating NUL is at
 * end, as bson_iter_next() and bson_iter_value() would, without their per-element calls:
 * rendering is most of what reading a document costs. Fills *key, *klen and *v (pointing
 * into the bytes) and moves *pp past it. Returns false when the element is malformed.
 */
static bool next_elem(const uint8_t **pp, const uint8_t *end, const char **key, size_t *klen,
		      bson_value_t *v)
{
	const uint8_t *p = *pp;
	size_t n;
	int64_t l;
	uint8_t type = *p++;

	n = (size_t)(end - p);
	*key = (const char *)p;
	for (*klen = 0; *klen < n && p[*klen]; (*klen)++)
		; /* keys are short: no call */
	if (*klen == n)
		return false;
	p += *klen + 1;
	n = (size_t)(end - p);
	v->value_type = (bson_type_t)type;
	switch (type) {
	case BSON_TYPE_DOUBLE: {
		uint64_t u;

		if (n < 8)
			return false;
		u = le64(p);
		memcpy(&v->value.v_double, &u, 8);
		p += 8;
		break;
	}
	case BSON_TYPE_UTF8:
	case BSON_TYPE_CODE:
	case BSON_TYPE_SYMBOL:
		if ((l = str_len(p, n)) < 0)
			return false;
		/* v_utf8, v_code and v_symbol are laid out alike; fill the one of the type */
		if (type == BSON_TYPE_UTF8) {
			v->value.v_utf8.str = (char *)p + 4;
			v->value.v_utf8.len = (uint32_t)l;
		} else if (type == BSON_TYPE_CODE) {
			v->value.v_code.code = (char *)p + 4;
			v->value.v_code.code_len = (uint32_t)l;
		} else {
			v->value.v_symbol.symbol = (char *)p + 4;
			v->value.v_symbol.len = (uint32_t)l;
		}
		p += 4 + l + 1;
		break;
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY: {
		uint32_t dl;

		if (n < 5 || (dl = le32(p)) < 5 || dl > n)
			return false;
		v->value.v_doc.data = (uint8_t *)p;
		v->value.v_doc.data_len = dl;
		p += dl;
		break;
	}
	case BSON_TYPE_BINARY: {
		uint32_t bl;

		if (n < 5 || (bl = le32(p)) > n - 5)
			return false;
		v->value.v_binary.subtype = (bson_subtype_t)p[4];
		v->value.v_binary.data = (uint8_t *)p + 5;
		v->value.v_binary.data_len = bl;
		if (p[4] == BSON_SUBTYPE_BINARY_DEPRECATED) {
			/* the old binary subtype repeats the length inside */
			if (bl < 4 || le32(p + 5) != bl - 4)
				return false;
			v->value.v_binary.data += 4;
			v->value.v_binary.data_len -= 4;
		}
		p += 5 + bl;
		break;
	}
	case BSON_TYPE_UNDEFINED:
	case BSON_TYPE_NULL:
	case BSON_TYPE_MINKEY:
	case BSON_TYPE_MAXKEY:
		break;
	case BSON_TYPE_OID:
		if (n < 12)
			return false;
		memcpy(v->value.v_oid.bytes, p, 12);
		p += 12;
		break;
	case BSON_TYPE_BOOL:
		if (n < 1 || p[0] > 1)
			return false;
		v->value.v_bool = p[0];
		p += 1;
		break;
	case BSON_TYPE_DATE_TIME:
	case BSON_TYPE_INT64:
		if (n < 8)
			return false;
		if (type == BSON_TYPE_DATE_TIME)
			v->value.v_datetime = (int64_t)le64(p);
		else
			v->value.v_int64 = (int64_t)le64(p);
		p += 8;
		break;
	case BSON_TYPE_REGEX: {
		size_t a, b;

		a = strnlen((const char *)p, n);
		if (a == n)
			return false;
		b = strnlen((const char *)p + a + 1, n - a - 1);
		if (b == n - a - 1)
			return false;
		v->value.v_regex.regex = (char *)p;
		v->value.v_regex.options = (char *)p + a + 1;
		p += a + 1 + b + 1;
		break;
	}
	case BSON_TYPE_DBPOINTER:
		if ((l = str_len(p, n)) < 0 || (size_t)l + 5 + 12 > n)
			return false;
		v->value.v_dbpointer.collection = (char *)p + 4;
		v->value.v_dbpointer.collection_len = (uint32_t)l;
		memcpy(v->value.v_dbpointer.oid.bytes, p + 4 + l + 1, 12);
		p += 4 + l + 1 + 12;
		break;
	case BSON_TYPE_CODEWSCOPE: {
		uint32_t total, sl;

		/* int32 total, the code as a string, the scope as a document */
		if (n < 14 || (total = le32(p)) < 14 || total > n)
			return false;
		if ((l = str_len(p + 4, total - 4)) < 0 || total - 4 - 4 - (size_t)l - 1 < 5)
			return false;
		sl = le32(p + 4 + 4 + l + 1);
		if (sl != total - 4 - 4 - (size_t)l - 1)
			return false;
		v->value.v_codewscope.code = (char *)p + 8;
		v->value.v_codewscope.code_len = (uint32_t)l;
		v->value.v_codewscope.scope_data = (uint8_t *)p + 8 + l + 1;
		v->value.v_codewscope.scope_len = sl;
		p += total;
		break;
	}
	case BSON_TYPE_INT32:
		if (n < 4)
			return false;
		v->value.v_int32 = (int32_t)le32(p);
		p += 4;
		break;
	case BSON_TYPE_TIMESTAMP:
		if (n < 8)
			return false;
		v->value.v_timestamp.increment = le32(p);
		v->value.v_timestamp.timestamp = le32(p + 4);
		p += 8;
		break;
	case BSON_TYPE_DECIMAL128:
		if (n < 16)
			return false;
		v->value.v_decimal128.low = le64(p);
		v->value.v_decimal128.high = le64(p + 8);
		p += 16;
		break;
	default:
		return false;
	}
	*pp = p;
	return true;
}

/*
 * Renders the document or array of len bytes at data. inline_only forces the one-line form
 * (inside wrappers such as $scope, whatever the style).
 */
static int render_doc(struct rnd *r, const uint8_t *data, uint32_t len, bool array, int level,
		      bool inline_only)
{
	bool pretty = r->style == STORE_RENDER_PRETTY && !inline_only;
	struct dfs_buf *b = r->out;
	const uint8_t *p, *end;
	bool first = true;
	bson_value_t v;
	const char *key;
	size_t klen;
	int rc;

	if (level >= RENDER_MAX_DEPTH)
		return dfs_err_set(r->err, DFS_EINVAL, "document nested deeper than %d levels",
				   RENDER_MAX_DEPTH);
	if (len < 5 || le32(data) != len || data[len - 1] != '\0')
		return invalid(r);
	p = data + 4;
	end = data + len - 1;
	putch(b, array ? '[' : '{');
	while (p < end) {
		if (!next_elem(&p, end, &key, &klen, &v))
			return invalid(r);
		if (!first)
			putch(b, ',');
		if (pretty)
			put_indent(b, level + 1);
		else if (!first)
			putch(b, ' ');
		first = false;
		if (!array)
			put_str_tail(b, key, klen, ": ", 2);
		rc = render_value(r, &v, level + 1, inline_only);
		if (rc)
			return rc;
	}
	if (pretty && !first)
		put_indent(b, level);
	putch(b, array ? ']' : '}');
	return DFS_OK;
}

static int render_value(struct rnd *r, const bson_value_t *v, int level, bool inline_only)
{
	struct dfs_buf *b = r->out;
	int64_t ms;

	switch (v->value_type) {
	case BSON_TYPE_DOUBLE:
		put_double(r, v->value.v_double);
		break;
	case BSON_TYPE_UTF8:
		put_str(b, v->value.v_utf8.str, v->value.v_utf8.len);
		break;
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		return render_doc(r, v->value.v_doc.data, v->value.v_doc.data_len,
				  v->value_type == BSON_TYPE_ARRAY, level, inline_only);
	case BSON_TYPE_BINARY: {
		char st[2] = {"0123456789abcdef"[v->value.v_binary.subtype >> 4 & 15],
			      "0123456789abcdef"[v->value.v_binary.subtype & 15]};

		PUTS(b, "{\"$binary\": {\"base64\": \"");
		put_b64(b, v->value.v_binary.data, v->value.v_binary.data_len);
		PUTS(b, "\", \"subType\": \"");
		put(b, st, 2);
		PUTS(b, "\"}}");
		break;
	}
	case BSON_TYPE_UNDEFINED:
		PUTS(b, "{\"$undefined\": true}");
		break;
	case BSON_TYPE_OID:
		PUTS(b, "{\"$oid\": \"");
		put_hex(b, v->value.v_oid.bytes, 12);
		PUTS(b, "\"}");
		break;
	case BSON_TYPE_BOOL:
		if (v->value.v_bool)
			PUTS(b, "true");
		else
			PUTS(b, "false");
		break;
	case BSON_TYPE_DATE_TIME:
		ms = v->value.v_datetime;
		if (!r->canonical && ms >= 0 && ms <= ISO_MAX_MS) {
			PUTS(b, "{\"$date\": \"");
			put_iso(b, ms);
			PUTS(b, "\"}");
		} else {
			PUTS(b, "{\"$date\": {\"$numberLong\": \"");
			put_i64(b, ms);
			PUTS(b, "\"}}");
		}
		break;
	case BSON_TYPE_NULL:
		PUTS(b, "null");
		break;
	case BSON_TYPE_REGEX:
		PUTS(b, "{\"$regularExpression\": {\"pattern\": ");
		put_str(b, v->value.v_regex.regex, strlen(v->value.v_regex.regex));
		PUTS(b, ", \"options\": ");
		put_str(b, v->value.v_regex.options, strlen(v->value.v_regex.options));
		PUTS(b, "}}");
		break;
	case BSON_TYPE_DBPOINTER:
		PUTS(b, "{\"$dbPointer\": {\"$ref\": ");
		put_str(b, v->value.v_dbpointer.collection, v->value.v_dbpointer.collection_len);
		PUTS(b, ", \"$id\": {\"$oid\": \"");
		put_hex(b, v->value.v_dbpointer.oid.bytes, 12);
		PUTS(b, "\"}}}");
		break;
	case BSON_TYPE_CODE:
		PUTS(b, "{\"$code\": ");
		put_str(b, v->value.v_code.code, v->value.v_code.code_len);
		putch(b, '}');
		break;
	case BSON_TYPE_SYMBOL:
		PUTS(b, "{\"$symbol\": ");
		put_str(b, v->value.v_symbol.symbol, v->value.v_symbol.len);
		putch(b, '}');
		break;
	case BSON_TYPE_CODEWSCOPE: {
		int rc;

		PUTS(b, "{\"$code\": ");
		put_str(b, v->value.v_codewscope.code, v->value.v_codewscope.code_len);
		PUTS(b, ", \"$scope\": ");
		rc = render_doc(r, v->value.v_codewscope.scope_data,
				v->value.v_codewscope.scope_len, false, level, true);
		if (rc)
			return rc;
		putch(b, '}');
		break;
	}
	case BSON_TYPE_INT32:
		if (r->canonical) {
			PUTS(b, "{\"$numberInt\": \"");
			put_i64(b, v->value.v_int32);
			PUTS(b, "\"}");
		} else {
			put_i64(b, v->value.v_int32);
		}
		break;
	case BSON_TYPE_TIMESTAMP:
		PUTS(b, "{\"$timestamp\": {\"t\": ");
		put_i64(b, v->value.v_timestamp.timestamp);
		PUTS(b, ", \"i\": ");
		put_i64(b, v->value.v_timestamp.increment);
		PUTS(b, "}}");
		break;
	case BSON_TYPE_INT64:
		if (r->canonical ||
		    (v->value.v_int64 >= INT32_MIN && v->value.v_int64 <= INT32_MAX)) {
			PUTS(b, "{\"$numberLong\": \"");
			put_i64(b, v->value.v_int64);
			PUTS(b, "\"}");
		} else {
			put_i64(b, v->value.v_int64);
		}
		break;
	case BSON_TYPE_DECIMAL128: {
		char s[BSON_DECIMAL128_STRING];

		bson_decimal128_to_string(&v->value.v_decimal128, s);
		PUTS(b, "{\"$numberDecimal\": \"");
		put(b, s, strlen(s));
		PUTS(b, "\"}");
		break;
	}
	case BSON_TYPE_MAXKEY:
		PUTS(b, "{\"$maxKey\": 1}");
		break;
	case BSON_TYPE_MINKEY:
		PUTS(b, "{\"$minKey\": 1}");
		break;
	default:
		return invalid(r);
	}
	return DFS_OK;
}

/*
 * Renders doc in style, appended to out (NUL-terminated). Returns 0, or DFS_EINVAL when doc is
 * not valid BSON; then out is back to its length before the call.
 */
int store_codec_render(const bson_t *doc, enum store_render_style style, struct dfs_buf *out,
		       struct dfs_err *err)
{
	struct rnd r = {out, style, style == STORE_RENDER_CANONICAL, err};
	size_t start = out->len;
	int rc;

	dfs_buf_reserve(out, doc->len + doc->len / 2 + 16);
	rc = render_doc(&r, bson_get_data(doc), doc->len, false, 0, false);
	if (!rc && style == STORE_RENDER_PRETTY)
		putch(out, '\n');
	if (rc)
		out->len = start;
	out->data[out->len] = '\0';
	return rc;
}

/* The whitespace that the pretty style adds to the document or array at data, level as in
 * render_doc: each field's "\n" and indent where the compact style has " " after its ",",
 * and the "\n" and indent before the closing bracket of a non-empty one. -1: invalid. */
static int64_t pretty_extra(const uint8_t *data, uint32_t len, int level)
{
	const uint8_t *p, *end;
	const char *key;
	size_t klen;
	bson_value_t v;
	int64_t n = 0, sub = 0, x;

	if (level >= RENDER_MAX_DEPTH || len < 5 || le32(data) != len || data[len - 1] != '\0')
		return -1;
	p = data + 4;
	end = data + len - 1;
	while (p < end) {
		if (!next_elem(&p, end, &key, &klen, &v))
			return -1;
		n++;
		if (v.value_type == BSON_TYPE_DOCUMENT || v.value_type == BSON_TYPE_ARRAY) {
			if ((x = pretty_extra(v.value.v_doc.data, v.value.v_doc.data_len,
					      level + 1)) < 0)
				return -1;
			sub += x;
		}
	}
	return n ? (n + 1) * (2 * (int64_t)level + 2) + sub : 0;
}

int64_t store_codec_compact_len(const bson_t *doc, int64_t pretty_len)
{
	int64_t x = pretty_extra(bson_get_data(doc), doc->len, 0);

	return x < 0 ? -1 : pretty_len - 1 - x;
}

/*
 * Renders one value in the compact style, appended to out (NUL-terminated). Returns 0, or
 * DFS_EINVAL for an invalid embedded document or an unknown type; then out is unchanged.
 */
int store_codec_render_value(const bson_value_t *v, struct dfs_buf *out, struct dfs_err *err)
{
	struct rnd r = {out, STORE_RENDER_COMPACT, false, err};
	size_t start = out->len;
	int rc;

	dfs_buf_reserve(out, 32);
	rc = render_value(&r, v, 0, false);
	if (rc)
		out->len = start;
	out->data[out->len] = '\0';
	return rc;
}
