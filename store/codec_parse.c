/*
 * codec_parse.c - the shell-literal text parser: strict JSON, Extended JSON v2 (canonical and
 * relaxed), the legacy v1 wrappers and the mongo-shell literal forms, read straight into a
 * bson_t.
 *
 * It does not render (codec_render.c), does not check that a document may be stored
 * (validate.c: '$' field names, _id type, size) and does not use libbson's JSON reader,
 * which is neither type-exact nor shell syntax.
 *
 * Design notes:
 *  1. One pass of recursive descent with no token list: each value is appended to the output
 *     as soon as it is read; nested documents and arrays are written in place with
 *     bson_append_{document,array}_begin/end, so their bytes are written once.
 *  2. An object whose first key starts with '$' may be an Extended JSON wrapper ({"$oid": ..}).
 *     It is parsed into a temporary document, then converted to the typed value it spells, or
 *     appended as a plain document when its shape (the set of keys and the types of their
 *     values) is not exactly one of the wrapper shapes: query operators such as {"$gt": 5} and
 *     a lone {"$regex": ".."} stay documents. A wrapper of the right shape with a bad value
 *     ({"$oid": "12"}) is an error, not a document.
 *  3. Lines are counted only where whitespace and comments are skipped: no token may hold a raw
 *     newline, so the line and column of the current position are always at hand.
 *  4. Text that ends where more is needed is DFS_EINCOMPLETE, never DFS_EINVAL: the streaming
 *     bulk inserter waits for more bytes when it sees it.
 *  5. Depth counts documents and arrays of the text, the top-level document being 1. A
 *     wrapper object is counted when it turns out to be a plain document, so a typed value at
 *     the deepest allowed level ({"$date": {"$numberLong": ".."}}) parses; a hard limit of
 *     DFS_MAX_DEPTH + 2 text levels bounds the recursion whatever the text holds.
 */
#include "store.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct parser {
	const char *s;	    /* Borrowed: the text */
	size_t len;	    /* bytes of text */
	size_t pos;	    /* current byte */
	unsigned line;	    /* line of pos */
	size_t line_start;  /* byte offset where that line starts */
	int depth;	    /* documents and arrays open around pos */
	struct dfs_buf key; /* scratch: the current field name when it had to be decoded */
	struct dfs_buf str; /* scratch: a decoded string value */
	struct dfs_buf bin; /* scratch: decoded binary bytes */
	struct dfs_err *err;
};

static int parse_value(struct parser *p, bson_t *b, const char *key, int klen);

/* ---- errors ------------------------------------------------------------------------ */

static int fail_lc(struct parser *p, unsigned line, size_t col, int code, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int fail_lc(struct parser *p, unsigned line, size_t col, int code, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dfs_err_set(p->err, code, "line %u, column %zu: %s", line, col, msg);
}

/* Fails at byte pos, which must lie on the current line. */
#define fail_at(p, pos, code, ...)                                                                 \
	fail_lc(p, (p)->line, (pos) - (p)->line_start + 1, code, __VA_ARGS__)

static bool is_ident(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '$';
}

/*
 * Length of the UTF-8 sequence at s (avail bytes there): 2..4, 0 when invalid (overlong,
 * surrogate, above U+10FFFF, bad continuation), -1 when avail ends inside a valid prefix.
 */
static int utf8_seq(const unsigned char *s, size_t avail)
{
	unsigned char c = s[0];
	uint32_t cp, min;
	int n, i;

	if (c >= 0xc2 && c <= 0xdf) {
		n = 2, cp = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3, cp = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4, cp = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	for (i = 1; i < n; i++) {
		if ((size_t)i >= avail)
			return -1;
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/*
 * "expected <what>, found <the text at pos>": DFS_EINCOMPLETE at the end of the text,
 * "invalid UTF-8" when the bytes at pos are not UTF-8, else DFS_EINVAL.
 */
static int expected_at(struct parser *p, size_t pos, const char *what)
{
	const unsigned char *s = (const unsigned char *)p->s;
	char found[48];
	size_t n = 0;

	if (pos >= p->len)
		return fail_at(p, pos, DFS_EINCOMPLETE, "expected %s, found end of input", what);
	if (is_ident(s[pos])) {
		while (pos + n < p->len && n < 24 && is_ident(s[pos + n]))
			n++;
		snprintf(found, sizeof(found), "'%.*s%s'", (int)n, p->s + pos,
			 pos + n < p->len && is_ident(s[pos + n]) ? "..." : "");
	} else if (s[pos] == '\n') {
		snprintf(found, sizeof(found), "newline");
	} else if (s[pos] < 0x20 || s[pos] == 0x7f) {
		snprintf(found, sizeof(found), "byte 0x%02x", s[pos]);
	} else if (s[pos] >= 0x80) {
		int l = utf8_seq(s + pos, p->len - pos);

		if (l < 0)
			return fail_at(p, pos, DFS_EINCOMPLETE, "expected %s, found end of input",
				       what);
		if (l == 0)
			return fail_at(p, pos, DFS_EINVAL, "invalid UTF-8");
		snprintf(found, sizeof(found), "'%.*s'", l, p->s + pos);
	} else {
		snprintf(found, sizeof(found), "'%c'", s[pos]);
	}
	return fail_at(p, pos, DFS_EINVAL, "expected %s, found %s", what, found);
}

static int expected(struct parser *p, const char *what)
{
	return expected_at(p, p->pos, what);
}

static int too_large(struct parser *p)
{
	return fail_at(p, p->pos, DFS_EFBIG, "document too large");
}

static int too_deep(struct parser *p, unsigned line, size_t col)
{
	return fail_lc(p, line, col, DFS_EINVAL, "nesting deeper than %d levels", DFS_MAX_DEPTH);
}

/* ---- whitespace and comments --------------------------------------------------------- */

static int skip_ws(struct parser *p)
{
	const unsigned char *s = (const unsigned char *)p->s;
	size_t n = p->len;

	while (p->pos < n) {
		unsigned char c = s[p->pos];

		if (c == ' ' || c == '\t' || c == '\r') {
			p->pos++;
		} else if (c == '\n') {
			p->pos++;
			p->line++;
			p->line_start = p->pos;
		} else if (c == '/' && p->pos + 1 == n) {
			/* the start of a comment or of a regex: either way more must follow */
			return expected_at(p, n, "a comment or a value");
		} else if (c == '/' && s[p->pos + 1] == '/') {
			p->pos += 2;
			while (p->pos < n && s[p->pos] != '\n') {
				if (s[p->pos] >= 0x80) {
					int l = utf8_seq(s + p->pos, n - p->pos);

					if (l <= 0)
						return l < 0 ? DFS_OK
							     : fail_at(p, p->pos, DFS_EINVAL,
								       "invalid UTF-8");
					p->pos += (size_t)l;
				} else {
					p->pos++;
				}
			}
		} else if (c == '/' && s[p->pos + 1] == '*') {
			p->pos += 2;
			for (;;) {
				if (p->pos >= n)
					return expected(p, "'*/'");
				c = s[p->pos];
				if (c == '*' && p->pos + 1 < n && s[p->pos + 1] == '/') {
					p->pos += 2;
					break;
				}
				if (c == '\n') {
					p->pos++;
					p->line++;
					p->line_start = p->pos;
				} else if (c >= 0x80) {
					int l = utf8_seq(s + p->pos, n - p->pos);

					if (l < 0)
						return expected_at(p, n, "'*/'");
					if (l == 0)
						return fail_at(p, p->pos, DFS_EINVAL,
							       "invalid UTF-8");
					p->pos += (size_t)l;
				} else {
					p->pos++;
				}
			}
		} else {
			break;
		}
	}
	return DFS_OK;
}

/* ---- strings ------------------------------------------------------------------------- */

static int hex_digit(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static void put_utf8(struct dfs_buf *b, uint32_t cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp, n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
	} else {
		u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), u[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
	}
	dfs_buf_append(b, u, n);
}

/* Reads the 4 hex digits of a \u escape at p->pos. */
static int read_hex4(struct parser *p, uint32_t *out)
{
	uint32_t v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		int d;

		if (p->pos >= p->len)
			return expected(p, "a hex digit");
		d = hex_digit((unsigned char)p->s[p->pos]);
		if (d < 0)
			return expected(p, "a hex digit");
		v = v << 4 | (uint32_t)d;
		p->pos++;
	}
	*out = v;
	return DFS_OK;
}

/* Decodes the escape sequence at p->pos (just after the backslash) into b. */
static int read_escape(struct parser *p, struct dfs_buf *b, bool is_key)
{
	size_t at = p->pos - 1;
	uint32_t cp, lo;
	int rc;
	char c;

	if (p->pos >= p->len)
		return expected(p, "an escape character");
	c = p->s[p->pos++];
	switch (c) {
	case '"':
	case '\'':
	case '\\':
	case '/':
		dfs_buf_putc(b, c);
		return DFS_OK;
	case 'b':
		dfs_buf_putc(b, '\b');
		return DFS_OK;
	case 'f':
		dfs_buf_putc(b, '\f');
		return DFS_OK;
	case 'n':
		dfs_buf_putc(b, '\n');
		return DFS_OK;
	case 'r':
		dfs_buf_putc(b, '\r');
		return DFS_OK;
	case 't':
		dfs_buf_putc(b, '\t');
		return DFS_OK;
	case 'u':
		break;
	default:
		p->pos--;
		return expected(p, "an escape character");
	}
	rc = read_hex4(p, &cp);
	if (rc)
		return rc;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return fail_at(p, at, DFS_EINVAL, "lone surrogate in \\u escape");
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (p->pos + 2 > p->len && memcmp(p->s + p->pos, "\\u", p->len - p->pos) == 0)
			return expected_at(p, p->len, "a low surrogate");
		if (p->pos + 2 > p->len || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
			return fail_at(p, at, DFS_EINVAL, "lone surrogate in \\u escape");
		p->pos += 2;
		rc = read_hex4(p, &lo);
		if (rc)
			return rc;
		if (lo < 0xdc00 || lo > 0xdfff)
			return fail_at(p, at, DFS_EINVAL, "lone surrogate in \\u escape");
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (cp == 0 && is_key)
		return fail_at(p, at, DFS_EINVAL, "NUL character in field name");
	put_utf8(b, cp);
	return DFS_OK;
}

/*
 * Reads the quoted string at p->pos (a '"' or '\''). *out points into the text when the
 * string had no escapes and cstr is false, else into scratch (then NUL-terminated). Valid
 * until the next use of scratch.
 */
static int parse_string(struct parser *p, struct dfs_buf *scratch, bool cstr, bool is_key,
			const char **out, size_t *out_len)
{
	const unsigned char *s = (const unsigned char *)p->s;
	unsigned char q = s[p->pos];
	size_t n = p->len, start = ++p->pos;
	bool copying = cstr;

	if (copying) {
		dfs_buf_reset(scratch);
		dfs_buf_reserve(scratch, 16);
	}
	for (;;) {
		size_t run = p->pos;
		unsigned char c = 0;

		while (p->pos < n) {
			c = s[p->pos];
			if (c == q || c == '\\' || c < 0x20 || c >= 0x80)
				break;
			p->pos++;
		}
		if (copying && p->pos > run)
			dfs_buf_append(scratch, s + run, p->pos - run);
		if (p->pos >= n)
			return expected(p, q == '"' ? "'\"'" : "\"'\"");
		if (c == q) {
			p->pos++;
			if (copying) {
				*out = scratch->data;
				*out_len = scratch->len;
			} else {
				*out = p->s + start;
				*out_len = p->pos - 1 - start;
			}
			return DFS_OK;
		}
		if (c >= 0x80) {
			int l = utf8_seq(s + p->pos, n - p->pos);

			if (l < 0)
				return expected_at(p, n, q == '"' ? "'\"'" : "\"'\"");
			if (l == 0)
				return fail_at(p, p->pos, DFS_EINVAL, "invalid UTF-8");
			if (copying)
				dfs_buf_append(scratch, s + p->pos, (size_t)l);
			p->pos += (size_t)l;
			continue;
		}
		if (c == '\t') {
			if (copying)
				dfs_buf_putc(scratch, '\t');
			p->pos++;
			continue;
		}
		if (c < 0x20)
			return expected(p, q == '"' ? "'\"'" : "\"'\"");
		/* a backslash */
		if (!copying) {
			copying = true;
			dfs_buf_reset(scratch);
			dfs_buf_append(scratch, s + start, p->pos - start);
		}
		p->pos++;
		int rc = read_escape(p, scratch, is_key);
		if (rc)
			return rc;
	}
}

/* Reads a field name: a quoted string or a run of [A-Za-z0-9_$.]. */
static int parse_key(struct parser *p, const char **k, size_t *klen)
{
	const unsigned char *s = (const unsigned char *)p->s;
	size_t start = p->pos;
	int rc;

	if (p->pos >= p->len)
		return expected(p, "a field name or '}'");
	if (s[p->pos] == '"' || s[p->pos] == '\'') {
		rc = parse_string(p, &p->key, false, true, k, klen);
		if (rc)
			return rc;
		if (!*k)
			*k = "";
		return DFS_OK;
	}
	while (p->pos < p->len && (is_ident(s[p->pos]) || s[p->pos] == '.'))
		p->pos++;
	if (p->pos == start)
		return expected(p, "a field name or '}'");
	*k = p->s + start;
	*klen = p->pos - start;
	return DFS_OK;
}

/* ---- numbers ------------------------------------------------------------------------- */

struct num {
	bool is_float; /* had '.', 'e' or 'E', or an integer beyond int64 */
	int64_t i;     /* the value when !is_float */
	double d;      /* the value when is_float */
	size_t start;  /* where the token starts in the text */
	size_t end;    /* where it ends */
};

static double strtod_span(const char *s, size_t n)
{
	char stack[64];
	char *buf = n < sizeof(stack) ? stack : malloc(n + 1);
	double d;

	if (!buf) {
		fprintf(stderr, "docfs: out of memory\n");
		abort();
	}
	memcpy(buf, s, n);
	buf[n] = '\0';
	d = strtod(buf, NULL);
	if (buf != stack)
		free(buf);
	return d;
}

/* Reads a JSON number at p->pos: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int scan_number(struct parser *p, struct num *out)
{
	const char *s = p->s;
	size_t n = p->len;
	uint64_t mag = 0;
	bool neg = false, overflow = false;

	out->start = p->pos;
	out->is_float = false;
	out->i = 0;
	out->d = 0;
	if (s[p->pos] == '-') {
		neg = true;
		p->pos++;
	}
	if (p->pos >= n || s[p->pos] < '0' || s[p->pos] > '9')
		return expected(p, "a digit");
	if (s[p->pos] == '0') {
		p->pos++;
	} else {
		while (p->pos < n && s[p->pos] >= '0' && s[p->pos] <= '9') {
			unsigned d = (unsigned)(s[p->pos] - '0');

			if (mag > (UINT64_MAX - d) / 10)
				overflow = true;
			else
				mag = mag * 10 + d;
			p->pos++;
		}
	}
	if (p->pos < n && s[p->pos] == '.') {
		out->is_float = true;
		p->pos++;
		if (p->pos >= n || s[p->pos] < '0' || s[p->pos] > '9')
			return expected(p, "a digit");
		while (p->pos < n && s[p->pos] >= '0' && s[p->pos] <= '9')
			p->pos++;
	}
	if (p->pos < n && (s[p->pos] == 'e' || s[p->pos] == 'E')) {
		out->is_float = true;
		p->pos++;
		if (p->pos < n && (s[p->pos] == '+' || s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= n || s[p->pos] < '0' || s[p->pos] > '9')
			return expected(p, "a digit");
		while (p->pos < n && s[p->pos] >= '0' && s[p->pos] <= '9')
			p->pos++;
	}
	out->end = p->pos;
	if (!out->is_float) {
		if (overflow || (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX))
			out->is_float = true;
		else
			out->i = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	}
	if (out->is_float)
		out->d = strtod_span(s + out->start, out->end - out->start);
	return DFS_OK;
}

static int parse_number(struct parser *p, bson_t *b, const char *key, int klen)
{
	struct num v;
	bool ok;
	int rc = scan_number(p, &v);

	if (rc)
		return rc;
	if (v.is_float)
		ok = bson_append_double(b, key, klen, v.d);
	else if (v.i >= INT32_MIN && v.i <= INT32_MAX)
		ok = bson_append_int32(b, key, klen, (int32_t)v.i);
	else
		ok = bson_append_int64(b, key, klen, v.i);
	return ok ? DFS_OK : too_large(p);
}

/* Strict decimal integer of a whole string (the $numberLong / NumberLong("..") forms). */
static bool int64_from_str(const char *s, size_t n, int64_t *out)
{
	uint64_t mag = 0;
	bool neg = false;
	size_t i = 0;

	if (n && s[0] == '-')
		neg = true, i = 1;
	if (i >= n)
		return false;
	for (; i < n; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (d > 9 || mag > (UINT64_MAX - d) / 10)
			return false;
		mag = mag * 10 + d;
	}
	if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	return true;
}

/* A $numberDouble string: Infinity, -Infinity, NaN or a plain decimal number. */
static bool double_from_str(const char *s, size_t n, double *out)
{
	char *end;
	size_t i;

	if (n == 8 && !memcmp(s, "Infinity", 8)) {
		*out = INFINITY;
		return true;
	}
	if (n == 9 && !memcmp(s, "-Infinity", 9)) {
		*out = -INFINITY;
		return true;
	}
	if (n == 3 && !memcmp(s, "NaN", 3)) {
		*out = NAN;
		return true;
	}
	if (n == 0 || n > 1000 || !((s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '.'))
		return false;
	for (i = 0; i < n; i++)
		if (!strchr("0123456789+-.eE", s[i]) || s[i] == '\0')
			return false;
	/* s is NUL-terminated here: it comes from a BSON string */
	errno = 0;
	*out = strtod(s, &end);
	return end == s + n;
}

/* ---- dates --------------------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static bool digits(const char *s, size_t n, size_t at, size_t count, int *out)
{
	int v = 0;
	size_t i;

	if (at + count > n)
		return false;
	for (i = 0; i < count; i++) {
		if (s[at + i] < '0' || s[at + i] > '9')
			return false;
		v = v * 10 + (s[at + i] - '0');
	}
	*out = v;
	return true;
}

/*
 * ISO-8601 as the shell writes it: YYYY-MM-DD[(T| )HH:MM[:SS[.fff...]]][Z|(+|-)HH[[:]MM]],
 * UTC when no zone is given; fractions beyond milliseconds are cut off.
 */
static bool iso_to_ms(const char *s, size_t n, int64_t *out)
{
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0, oh = 0, om = 0, sign = 0;
	size_t i = 10;
	bool leap;

	if (!digits(s, n, 0, 4, &y) || n < 10 || s[4] != '-' || !digits(s, n, 5, 2, &mo) ||
	    s[7] != '-' || !digits(s, n, 8, 2, &d))
		return false;
	if (i < n && (s[i] == 'T' || s[i] == ' ')) {
		if (!digits(s, n, i + 1, 2, &h) || i + 3 >= n || s[i + 3] != ':' ||
		    !digits(s, n, i + 4, 2, &mi))
			return false;
		i += 6;
		if (i < n && s[i] == ':') {
			if (!digits(s, n, i + 1, 2, &sec))
				return false;
			i += 3;
			if (i < n && (s[i] == '.' || s[i] == ',')) {
				int scale = 100;

				i++;
				if (i >= n || s[i] < '0' || s[i] > '9')
					return false;
				for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
					ms += (s[i] - '0') * scale;
					scale /= 10;
				}
			}
		}
	}
	if (i < n && s[i] == 'Z') {
		i++;
	} else if (i < n && (s[i] == '+' || s[i] == '-')) {
		sign = s[i] == '-' ? -1 : 1;
		if (!digits(s, n, i + 1, 2, &oh))
			return false;
		i += 3;
		if (i < n && s[i] == ':')
			i++;
		if (i < n) {
			if (!digits(s, n, i, 2, &om))
				return false;
			i += 2;
		}
	}
	if (i != n)
		return false;
	leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap) ||
	    h > 23 || mi > 59 || sec > 59 || oh > 23 || om > 59)
		return false;
	*out = (((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60 + sec) * 1000 + ms -
	       (int64_t)sign * (oh * 60 + om) * 60000;
	return true;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- binary helpers ------------------------------------------------------------------ */

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Standard (or URL-safe) base64, padding optional; into out (reset first). */
static bool b64_decode(const char *s, size_t n, struct dfs_buf *out)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t i, pad = 0;

	dfs_buf_reset(out);
	dfs_buf_reserve(out, n / 4 * 3 + 3);
	while (n && s[n - 1] == '=' && pad < 2)
		n--, pad++;
	if (pad && (n + pad) % 4)
		return false;
	if (n % 4 == 1)
		return false;
	for (i = 0; i < n; i++) {
		int v = b64_value((unsigned char)s[i]);

		if (v < 0)
			return false;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out->data[out->len++] = (char)(acc >> bits);
		}
	}
	/* leftover bits must be zero for the encoding to be canonical enough to round-trip */
	if (bits && (acc & ((1u << bits) - 1)))
		return false;
	out->data[out->len] = '\0';
	return true;
}

/* Hex digits (even count, dashes skipped when dashes is true) into out (reset first). */
static bool hex_decode(const char *s, size_t n, bool dashes, struct dfs_buf *out)
{
	int hi = -1;
	size_t i;

	dfs_buf_reset(out);
	dfs_buf_reserve(out, n / 2 + 1);
	for (i = 0; i < n; i++) {
		int v;

		if (dashes && s[i] == '-')
			continue;
		v = hex_digit((unsigned char)s[i]);
		if (v < 0)
			return false;
		if (hi < 0) {
			hi = v;
		} else {
			dfs_buf_putc(out, (char)(hi << 4 | v));
			hi = -1;
		}
	}
	return hi < 0;
}

static bool oid_from_str(const char *s, size_t n, bson_oid_t *oid)
{
	size_t i;

	if (n != 24)
		return false;
	for (i = 0; i < 12; i++) {
		int hi = hex_digit((unsigned char)s[2 * i]),
		    lo = hex_digit((unsigned char)s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		oid->bytes[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

static bool uuid_from_str(const char *s, size_t n, struct dfs_buf *out)
{
	if (n == 36 && (s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-'))
		return false;
	if (n != 32 && n != 36)
		return false;
	return hex_decode(s, n, n == 36, out) && out->len == 16;
}

/* Regex options MongoDB knows; libbson drops the others silently, so they are refused. */
static bool regex_options_ok(const char *o, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!o[i] || !strchr("ilmsux", o[i]))
			return false;
	return true;
}

/* ---- Extended JSON wrappers ---------------------------------------------------------- */

/* What converting an object that is not a wrapper returns: the caller keeps it a document. */
#define NOT_WRAPPER (-1)

/* Where a wrapper goes and where its text starts (for messages). */
struct wctx {
	struct parser *p;
	bson_t *b;
	const char *key;
	int klen;
	unsigned line;
	size_t col;
};

static int wbad(struct wctx *w, const char *what, const char *s, size_t n)
{
	return fail_lc(w->p, w->line, w->col, DFS_EINVAL, "invalid %s \"%.*s\"", what,
		       (int)(n > 60 ? 60 : n), s);
}

static int wok(struct wctx *w, bool ok)
{
	return ok ? DFS_OK : fail_lc(w->p, w->line, w->col, DFS_EFBIG, "document too large");
}

static bool is_int(const bson_iter_t *it, int64_t *v)
{
	if (BSON_ITER_HOLDS_INT32(it))
		*v = bson_iter_int32(it);
	else if (BSON_ITER_HOLDS_INT64(it))
		*v = bson_iter_int64(it);
	else
		return false;
	return true;
}

/* it (before its first field) has exactly the two fields a and b, in either order. */
static bool match2(bson_iter_t *it, const char *a, const char *b, bson_iter_t *ia, bson_iter_t *ib)
{
	bool ha = false, hb = false;

	while (bson_iter_next(it)) {
		const char *k = bson_iter_key(it);

		if (!ha && !strcmp(k, a)) {
			*ia = *it;
			ha = true;
		} else if (!hb && !strcmp(k, b)) {
			*ib = *it;
			hb = true;
		} else {
			return false;
		}
	}
	return ha && hb;
}

/* The subdocument of doc has exactly the two fields a and b. */
static bool two_fields(const bson_iter_t *doc, const char *a, const char *b, bson_iter_t *ia,
		       bson_iter_t *ib)
{
	bson_iter_t it;

	return bson_iter_recurse(doc, &it) && match2(&it, a, b, ia, ib);
}

/* A binary subtype written as one or two hex digits, or -1. */
static int subtype_from_hex(const char *s, size_t n)
{
	int hi, lo;

	if (n == 1)
		return hex_digit((unsigned char)s[0]);
	if (n != 2)
		return -1;
	hi = hex_digit((unsigned char)s[0]);
	lo = hex_digit((unsigned char)s[1]);
	return hi < 0 || lo < 0 ? -1 : hi << 4 | lo;
}

static int wrap_one(struct wctx *w, const bson_iter_t *it)
{
	const char *k = bson_iter_key(it) + 1;
	struct dfs_buf *bin = &w->p->bin;
	bson_iter_t a, c;
	const char *s = NULL, *s2;
	uint32_t n = 0, n2;
	int64_t i, j;

	if (*(k - 1) != '$')
		return NOT_WRAPPER;
	if (BSON_ITER_HOLDS_UTF8(it))
		s = bson_iter_utf8(it, &n);
	if (!strcmp(k, "oid")) {
		bson_oid_t oid;

		if (!s)
			return NOT_WRAPPER;
		if (!oid_from_str(s, n, &oid))
			return wbad(w, "ObjectId", s, n);
		return wok(w, bson_append_oid(w->b, w->key, w->klen, &oid));
	}
	if (!strcmp(k, "symbol"))
		return s ? wok(w, bson_append_symbol(w->b, w->key, w->klen, s, (int)n))
			 : NOT_WRAPPER;
	if (!strcmp(k, "numberInt")) {
		if (!s)
			return NOT_WRAPPER;
		if (!int64_from_str(s, n, &i) || i < INT32_MIN || i > INT32_MAX)
			return wbad(w, "$numberInt", s, n);
		return wok(w, bson_append_int32(w->b, w->key, w->klen, (int32_t)i));
	}
	if (!strcmp(k, "numberLong")) {
		if (!s)
			return NOT_WRAPPER;
		if (!int64_from_str(s, n, &i))
			return wbad(w, "$numberLong", s, n);
		return wok(w, bson_append_int64(w->b, w->key, w->klen, i));
	}
	if (!strcmp(k, "numberDouble")) {
		double d;

		if (!s)
			return NOT_WRAPPER;
		if (!double_from_str(s, n, &d))
			return wbad(w, "$numberDouble", s, n);
		return wok(w, bson_append_double(w->b, w->key, w->klen, d));
	}
	if (!strcmp(k, "numberDecimal")) {
		bson_decimal128_t dec;

		if (!s)
			return NOT_WRAPPER;
		if (strlen(s) != n || !bson_decimal128_from_string(s, &dec))
			return wbad(w, "$numberDecimal", s, n);
		return wok(w, bson_append_decimal128(w->b, w->key, w->klen, &dec));
	}
	if (!strcmp(k, "code")) {
		if (!s)
			return NOT_WRAPPER;
		if (strlen(s) != n)
			return wbad(w, "$code (holds NUL)", s, n);
		return wok(w, bson_append_code(w->b, w->key, w->klen, s));
	}
	if (!strcmp(k, "date")) {
		if (s) {
			if (!iso_to_ms(s, n, &i))
				return wbad(w, "$date", s, n);
		} else if (BSON_ITER_HOLDS_DOUBLE(it)) {
			double d = bson_iter_double(it);

			if (!(d >= -9.2e18 && d <= 9.2e18) || d != floor(d))
				return NOT_WRAPPER;
			i = (int64_t)d;
		} else if (!is_int(it, &i)) {
			return NOT_WRAPPER;
		}
		return wok(w, bson_append_date_time(w->b, w->key, w->klen, i));
	}
	if (!strcmp(k, "uuid")) {
		if (!s)
			return NOT_WRAPPER;
		if (!uuid_from_str(s, n, bin))
			return wbad(w, "$uuid", s, n);
		return wok(w, bson_append_binary(w->b, w->key, w->klen, BSON_SUBTYPE_UUID,
						 (const uint8_t *)bin->data, 16));
	}
	if (!strcmp(k, "minKey") || !strcmp(k, "maxKey")) {
		if (!is_int(it, &i) || i != 1)
			return NOT_WRAPPER;
		return wok(w, k[1] == 'i' ? bson_append_minkey(w->b, w->key, w->klen)
					  : bson_append_maxkey(w->b, w->key, w->klen));
	}
	if (!strcmp(k, "undefined")) {
		if (!BSON_ITER_HOLDS_BOOL(it) || !bson_iter_bool(it))
			return NOT_WRAPPER;
		return wok(w, bson_append_undefined(w->b, w->key, w->klen));
	}
	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return NOT_WRAPPER;
	if (!strcmp(k, "binary")) {
		int st;

		if (!two_fields(it, "base64", "subType", &a, &c) || !BSON_ITER_HOLDS_UTF8(&a) ||
		    !BSON_ITER_HOLDS_UTF8(&c))
			return NOT_WRAPPER;
		s = bson_iter_utf8(&a, &n);
		s2 = bson_iter_utf8(&c, &n2);
		if (!b64_decode(s, n, bin))
			return wbad(w, "base64", s, n);
		st = subtype_from_hex(s2, n2);
		if (st < 0)
			return wbad(w, "subType", s2, n2);
		return wok(w, bson_append_binary(w->b, w->key, w->klen, (bson_subtype_t)st,
						 (const uint8_t *)bin->data, (uint32_t)bin->len));
	}
	if (!strcmp(k, "timestamp")) {
		if (!two_fields(it, "t", "i", &a, &c) || !is_int(&a, &i) || !is_int(&c, &j))
			return NOT_WRAPPER;
		if (i < 0 || i > UINT32_MAX || j < 0 || j > UINT32_MAX)
			return fail_lc(w->p, w->line, w->col, DFS_EINVAL,
				       "invalid $timestamp: t and i must be 0..4294967295");
		return wok(w,
			   bson_append_timestamp(w->b, w->key, w->klen, (uint32_t)i, (uint32_t)j));
	}
	if (!strcmp(k, "regularExpression")) {
		if (!two_fields(it, "pattern", "options", &a, &c) || !BSON_ITER_HOLDS_UTF8(&a) ||
		    !BSON_ITER_HOLDS_UTF8(&c))
			return NOT_WRAPPER;
		s = bson_iter_utf8(&a, &n);
		s2 = bson_iter_utf8(&c, &n2);
		if (strlen(s) != n)
			return wbad(w, "regex pattern (holds NUL)", s, n);
		if (!regex_options_ok(s2, n2))
			return wbad(w, "regex options", s2, n2);
		return wok(w, bson_append_regex_w_len(w->b, w->key, w->klen, s, (int)n, s2));
	}
	if (!strcmp(k, "dbPointer")) {
		if (!two_fields(it, "$ref", "$id", &a, &c) || !BSON_ITER_HOLDS_UTF8(&a) ||
		    !BSON_ITER_HOLDS_OID(&c))
			return NOT_WRAPPER;
		s = bson_iter_utf8(&a, &n);
		if (strlen(s) != n)
			return wbad(w, "$dbPointer $ref (holds NUL)", s, n);
		return wok(w, bson_append_dbpointer(w->b, w->key, w->klen, s, bson_iter_oid(&c)));
	}
	return NOT_WRAPPER;
}

static int wrap_two(struct wctx *w, const bson_t *tmp)
{
	struct dfs_buf *bin = &w->p->bin;
	bson_iter_t it, a, c;
	const char *s, *s2;
	uint32_t n, n2;
	int st;

	if (bson_iter_init(&it, tmp) && match2(&it, "$code", "$scope", &a, &c)) {
		const uint8_t *sd;
		uint32_t sl;
		bson_t scope;

		if (!BSON_ITER_HOLDS_UTF8(&a) || !BSON_ITER_HOLDS_DOCUMENT(&c))
			return NOT_WRAPPER;
		s = bson_iter_utf8(&a, &n);
		if (strlen(s) != n)
			return wbad(w, "$code (holds NUL)", s, n);
		bson_iter_document(&c, &sl, &sd);
		if (!bson_init_static(&scope, sd, sl))
			return NOT_WRAPPER;
		return wok(w, bson_append_code_with_scope(w->b, w->key, w->klen, s, &scope));
	}
	if (bson_iter_init(&it, tmp) && match2(&it, "$binary", "$type", &a, &c)) {
		if (!BSON_ITER_HOLDS_UTF8(&a) || !BSON_ITER_HOLDS_UTF8(&c))
			return NOT_WRAPPER;
		s = bson_iter_utf8(&a, &n);
		s2 = bson_iter_utf8(&c, &n2);
		if (!b64_decode(s, n, bin))
			return wbad(w, "base64", s, n);
		st = subtype_from_hex(s2, n2);
		if (st < 0)
			return wbad(w, "$type", s2, n2);
		return wok(w, bson_append_binary(w->b, w->key, w->klen, (bson_subtype_t)st,
						 (const uint8_t *)bin->data, (uint32_t)bin->len));
	}
	if (bson_iter_init(&it, tmp) && match2(&it, "$regex", "$options", &a, &c)) {
		if (!BSON_ITER_HOLDS_UTF8(&a) || !BSON_ITER_HOLDS_UTF8(&c))
			return NOT_WRAPPER;
		s = bson_iter_utf8(&a, &n);
		s2 = bson_iter_utf8(&c, &n2);
		if (strlen(s) != n)
			return wbad(w, "regex pattern (holds NUL)", s, n);
		if (!regex_options_ok(s2, n2))
			return wbad(w, "regex options", s2, n2);
		return wok(w, bson_append_regex_w_len(w->b, w->key, w->klen, s, (int)n, s2));
	}
	return NOT_WRAPPER;
}

/*
 * Appends the typed value that the wrapper object tmp spells. Returns 0 when appended,
 * NOT_WRAPPER when tmp is not a wrapper, or an error (a wrapper of the right shape with a bad
 * value) reported at the object's '{'.
 */
static int convert_wrapper(struct wctx *w, const bson_t *tmp)
{
	uint32_t n = bson_count_keys(tmp);
	bson_iter_t it;

	if (n == 1) {
		bson_iter_init(&it, tmp);
		bson_iter_next(&it);
		return wrap_one(w, &it);
	}
	if (n == 2)
		return wrap_two(w, tmp);
	return NOT_WRAPPER;
}

/* ---- documents and arrays ------------------------------------------------------------ */

/* Parses the members of the object at p->pos ('{') into doc, through its closing '}'. */
static int parse_members(struct parser *p, bson_t *doc)
{
	const char *k;
	size_t klen;
	int rc;

	p->pos++;
	for (;;) {
		rc = skip_ws(p);
		if (rc)
			return rc;
		if (p->pos < p->len && p->s[p->pos] == '}') {
			p->pos++;
			return DFS_OK;
		}
		rc = parse_key(p, &k, &klen);
		if (rc)
			return rc;
		rc = skip_ws(p);
		if (rc)
			return rc;
		if (p->pos >= p->len || p->s[p->pos] != ':')
			return expected(p, "':'");
		p->pos++;
		rc = skip_ws(p);
		if (rc)
			return rc;
		rc = parse_value(p, doc, k, (int)klen);
		if (rc)
			return rc;
		rc = skip_ws(p);
		if (rc)
			return rc;
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == '}') {
			p->pos++;
			return DFS_OK;
		}
		return expected(p, "',' or '}'");
	}
}

/* True when the object at p->pos has a first key starting with '$' (may be a wrapper). */
static int first_key_is_dollar(struct parser *p, bool *yes)
{
	size_t pos = p->pos, line_start = p->line_start;
	unsigned line = p->line;
	int rc;

	p->pos++;
	rc = skip_ws(p);
	*yes = !rc && p->pos < p->len &&
	       (p->s[p->pos] == '$' || ((p->s[p->pos] == '"' || p->s[p->pos] == '\'') &&
					p->pos + 1 < p->len && p->s[p->pos + 1] == '$'));
	p->pos = pos;
	p->line = line;
	p->line_start = line_start;
	return rc;
}

static int parse_object_value(struct parser *p, bson_t *b, const char *key, int klen)
{
	unsigned line = p->line;
	size_t col = p->pos - p->line_start + 1;
	bool dollar;
	bson_t child;
	int rc;

	rc = first_key_is_dollar(p, &dollar);
	if (rc)
		return rc;
	if (dollar) {
		char stack[64];
		char *kcopy = (size_t)klen < sizeof(stack) ? stack : malloc((size_t)klen + 1);
		struct wctx w = {p, b, kcopy, klen, line, col};
		bson_t tmp;

		if (!kcopy)
			abort();
		memcpy(kcopy, key, (size_t)klen);
		kcopy[klen] = '\0';
		if (++p->depth > DFS_MAX_DEPTH + 2) {
			rc = too_deep(p, line, col);
		} else {
			bson_init(&tmp);
			rc = parse_members(p, &tmp);
			if (!rc)
				rc = convert_wrapper(&w, &tmp);
			if (rc == NOT_WRAPPER) {
				if (p->depth > DFS_MAX_DEPTH)
					rc = too_deep(p, line, col);
				else if (!bson_append_document(b, kcopy, klen, &tmp))
					rc = too_large(p);
				else
					rc = DFS_OK;
			}
			bson_destroy(&tmp);
		}
		p->depth--;
		if (kcopy != stack)
			free(kcopy);
		return rc;
	}
	if (++p->depth > DFS_MAX_DEPTH)
		return too_deep(p, line, col);
	if (!bson_append_document_begin(b, key, klen, &child))
		return too_large(p);
	rc = parse_members(p, &child);
	if (!bson_append_document_end(b, &child) && !rc)
		rc = too_large(p);
	p->depth--;
	return rc;
}

static int parse_array_value(struct parser *p, bson_t *b, const char *key, int klen)
{
	unsigned line = p->line;
	size_t col = p->pos - p->line_start + 1;
	uint32_t idx = 0;
	bson_t child;
	int rc = DFS_OK;

	if (++p->depth > DFS_MAX_DEPTH)
		return too_deep(p, line, col);
	if (!bson_append_array_begin(b, key, klen, &child))
		return too_large(p);
	p->pos++;
	for (;;) {
		char ibuf[16];
		const char *ikey;
		size_t iklen;

		rc = skip_ws(p);
		if (rc)
			break;
		if (p->pos < p->len && p->s[p->pos] == ']') {
			p->pos++;
			break;
		}
		iklen = bson_uint32_to_string(idx++, &ikey, ibuf, sizeof(ibuf));
		rc = parse_value(p, &child, ikey, (int)iklen);
		if (rc)
			break;
		rc = skip_ws(p);
		if (rc)
			break;
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == ']') {
			p->pos++;
			break;
		}
		rc = expected(p, "',' or ']'");
		break;
	}
	if (!bson_append_array_end(b, &child) && !rc)
		rc = too_large(p);
	p->depth--;
	return rc;
}

/* ---- regex literals ------------------------------------------------------------------ */

static int parse_regex(struct parser *p, bson_t *b, const char *key, int klen)
{
	const unsigned char *s = (const unsigned char *)p->s;
	size_t start = ++p->pos, pend, fstart;
	bool in_class = false;

	for (;;) {
		unsigned char c;

		if (p->pos >= p->len)
			return expected(p, "'/'");
		c = s[p->pos];
		if (c == '/' && !in_class)
			break;
		if (c < 0x20)
			return expected(p, "'/'");
		if (c >= 0x80) {
			int l = utf8_seq(s + p->pos, p->len - p->pos);

			if (l < 0)
				return expected_at(p, p->len, "'/'");
			if (l == 0)
				return fail_at(p, p->pos, DFS_EINVAL, "invalid UTF-8");
			p->pos += (size_t)l;
			continue;
		}
		if (c == '\\') {
			p->pos++;
			if (p->pos >= p->len || s[p->pos] < 0x20)
				return expected(p, "'/'");
			if (s[p->pos] < 0x80)
				p->pos++; /* a multibyte one is checked by the next round */
			continue;
		}
		if (c == '[')
			in_class = true;
		else if (c == ']')
			in_class = false;
		p->pos++;
	}
	pend = p->pos++;
	fstart = p->pos;
	while (p->pos < p->len &&
	       ((s[p->pos] >= 'a' && s[p->pos] <= 'z') || (s[p->pos] >= 'A' && s[p->pos] <= 'Z')))
		p->pos++;
	if (!regex_options_ok(p->s + fstart, p->pos - fstart))
		return fail_at(p, fstart, DFS_EINVAL, "invalid regex flags '%.*s'",
			       (int)(p->pos - fstart), p->s + fstart);
	dfs_buf_reset(&p->str);
	dfs_buf_append(&p->str, p->s + fstart, p->pos - fstart);
	return bson_append_regex_w_len(b, key, klen, p->s + start, (int)(pend - start), p->str.data)
		       ? DFS_OK
		       : too_large(p);
}

/* ---- shell literals and constructors ------------------------------------------------- */

static bool word_is(const char *w, size_t n, const char *name)
{
	return strlen(name) == n && memcmp(w, name, n) == 0;
}

/* Literal words, then (from index 6) the words that may be called like constructors. */
static const char *const known_words[] = {
	"true",		 "false",     "null",	  "undefined", "NaN",	  "Infinity",	"MinKey",
	"MaxKey",	 "new",	      "ObjectId", "ISODate",   "Date",	  "NumberLong", "NumberInt",
	"NumberDecimal", "Timestamp", "BinData",  "UUID",      "HexData",
};

/* The word w ends the text and is a prefix of a known word: more text may complete it. */
static bool word_may_grow(const struct parser *p, const char *w, size_t wn)
{
	size_t k;

	if (w + wn != p->s + p->len)
		return false;
	for (k = 0; k < sizeof(known_words) / sizeof(known_words[0]); k++)
		if (strlen(known_words[k]) > wn && !memcmp(known_words[k], w, wn))
			return true;
	return false;
}

/* Skips whitespace and requires the character c. */
static int expect_char(struct parser *p, char c, const char *what)
{
	int rc = skip_ws(p);

	if (rc)
		return rc;
	if (p->pos >= p->len || p->s[p->pos] != c)
		return expected(p, what);
	p->pos++;
	return skip_ws(p);
}

/* A quoted string argument, decoded into p->str (NUL-terminated). */
static int arg_string(struct parser *p, const char **s, size_t *n, const char *what)
{
	if (p->pos >= p->len || (p->s[p->pos] != '"' && p->s[p->pos] != '\''))
		return expected(p, what);
	return parse_string(p, &p->str, true, false, s, n);
}

/* An integer argument: a number literal without fraction or a string of digits. */
static int arg_int(struct parser *p, int64_t lo, int64_t hi, bool string_ok, int64_t *v)
{
	size_t at = p->pos;
	const char *s;
	size_t n;
	int rc;

	if (string_ok && p->pos < p->len && (p->s[p->pos] == '"' || p->s[p->pos] == '\'')) {
		rc = arg_string(p, &s, &n, "an integer");
		if (rc)
			return rc;
		if (!int64_from_str(s, n, v) || *v < lo || *v > hi)
			return fail_at(p, at, DFS_EINVAL,
				       "expected an integer in %lld..%lld, found \"%.*s\"",
				       (long long)lo, (long long)hi, (int)(n > 40 ? 40 : n), s);
		return DFS_OK;
	}
	if (p->pos < p->len &&
	    (p->s[p->pos] == '-' || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9'))) {
		struct num num;

		rc = scan_number(p, &num);
		if (rc)
			return rc;
		if (num.is_float || num.i < lo || num.i > hi)
			return fail_at(p, at, DFS_EINVAL,
				       "expected an integer in %lld..%lld, found '%.*s'",
				       (long long)lo, (long long)hi, (int)(num.end - num.start),
				       p->s + num.start);
		*v = num.i;
		return DFS_OK;
	}
	return expected(p, "an integer");
}

/* The arguments and closing ')' of a constructor call; p->pos is just after '('. */
static int parse_call(struct parser *p, const char *w, size_t wn, size_t wat, bson_t *b,
		      const char *key, int klen)
{
	size_t at = p->pos;
	const char *s = NULL;
	size_t n = 0;
	int64_t i, j;
	bool ok;
	int rc;

	if (word_is(w, wn, "ObjectId")) {
		bson_oid_t oid;

		if (p->pos < p->len && p->s[p->pos] == ')') {
			bson_oid_init(&oid, NULL);
		} else {
			rc = arg_string(p, &s, &n, "a string");
			if (rc)
				return rc;
			if (!oid_from_str(s, n, &oid))
				return fail_at(p, at, DFS_EINVAL,
					       "expected 24 hex digits, found \"%.*s\"",
					       (int)(n > 40 ? 40 : n), s);
		}
		rc = expect_char(p, ')', "')'");
		if (rc)
			return rc;
		ok = bson_append_oid(b, key, klen, &oid);
	} else if (word_is(w, wn, "ISODate") || word_is(w, wn, "Date")) {
		if (p->pos < p->len && p->s[p->pos] == ')') {
			i = now_ms();
		} else if (p->pos < p->len && (p->s[p->pos] == '"' || p->s[p->pos] == '\'')) {
			rc = arg_string(p, &s, &n, "a string");
			if (rc)
				return rc;
			if (!iso_to_ms(s, n, &i))
				return fail_at(p, at, DFS_EINVAL,
					       "expected an ISO-8601 date, found \"%.*s\"",
					       (int)(n > 40 ? 40 : n), s);
		} else if (w[0] == 'D') {
			rc = arg_int(p, INT64_MIN, INT64_MAX, false, &i);
			if (rc)
				return rc;
		} else {
			return expected(p, "a string");
		}
		rc = expect_char(p, ')', "')'");
		if (rc)
			return rc;
		ok = bson_append_date_time(b, key, klen, i);
	} else if (word_is(w, wn, "NumberLong") || word_is(w, wn, "NumberInt")) {
		bool is_long = w[6] == 'L';

		rc = arg_int(p, is_long ? INT64_MIN : INT32_MIN, is_long ? INT64_MAX : INT32_MAX,
			     true, &i);
		if (rc)
			return rc;
		rc = expect_char(p, ')', "')'");
		if (rc)
			return rc;
		ok = is_long ? bson_append_int64(b, key, klen, i)
			     : bson_append_int32(b, key, klen, (int32_t)i);
	} else if (word_is(w, wn, "NumberDecimal")) {
		bson_decimal128_t dec;

		if (p->pos < p->len &&
		    (p->s[p->pos] == '-' || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9'))) {
			struct num num;

			rc = scan_number(p, &num);
			if (rc)
				return rc;
			dfs_buf_reset(&p->str);
			dfs_buf_append(&p->str, p->s + num.start, num.end - num.start);
			s = p->str.data, n = p->str.len;
		} else {
			rc = arg_string(p, &s, &n, "a string");
			if (rc)
				return rc;
		}
		if (strlen(s) != n || !bson_decimal128_from_string(s, &dec))
			return fail_at(p, at, DFS_EINVAL,
				       "expected a decimal number, found \"%.*s\"",
				       (int)(n > 40 ? 40 : n), s);
		rc = expect_char(p, ')', "')'");
		if (rc)
			return rc;
		ok = bson_append_decimal128(b, key, klen, &dec);
	} else if (word_is(w, wn, "Timestamp")) {
		rc = arg_int(p, 0, UINT32_MAX, false, &i);
		if (rc)
			return rc;
		rc = expect_char(p, ',', "','");
		if (rc)
			return rc;
		rc = arg_int(p, 0, UINT32_MAX, false, &j);
		if (rc)
			return rc;
		rc = expect_char(p, ')', "')'");
		if (rc)
			return rc;
		ok = bson_append_timestamp(b, key, klen, (uint32_t)i, (uint32_t)j);
	} else if (word_is(w, wn, "BinData") || word_is(w, wn, "HexData")) {
		size_t sat;

		rc = arg_int(p, 0, 255, false, &i);
		if (rc)
			return rc;
		rc = expect_char(p, ',', "','");
		if (rc)
			return rc;
		sat = p->pos;
		rc = arg_string(p, &s, &n, "a string");
		if (rc)
			return rc;
		if (w[0] == 'B' ? !b64_decode(s, n, &p->bin) : !hex_decode(s, n, false, &p->bin))
			return fail_at(p, sat, DFS_EINVAL, "expected %s, found \"%.*s\"",
				       w[0] == 'B' ? "base64" : "hex digits",
				       (int)(n > 40 ? 40 : n), s);
		rc = expect_char(p, ')', "')'");
		if (rc)
			return rc;
		ok = bson_append_binary(b, key, klen, (bson_subtype_t)i,
					(const uint8_t *)p->bin.data, (uint32_t)p->bin.len);
	} else if (word_is(w, wn, "UUID")) {
		rc = arg_string(p, &s, &n, "a string");
		if (rc)
			return rc;
		if (!uuid_from_str(s, n, &p->bin))
			return fail_at(p, at, DFS_EINVAL, "expected a UUID, found \"%.*s\"",
				       (int)(n > 40 ? 40 : n), s);
		rc = expect_char(p, ')', "')'");
		if (rc)
			return rc;
		ok = bson_append_binary(b, key, klen, BSON_SUBTYPE_UUID,
					(const uint8_t *)p->bin.data, 16);
	} else if (word_is(w, wn, "MinKey") || word_is(w, wn, "MaxKey")) {
		rc = expect_char(p, ')', "')'");
		if (rc)
			return rc;
		ok = w[1] == 'i' ? bson_append_minkey(b, key, klen)
				 : bson_append_maxkey(b, key, klen);
	} else {
		return expected_at(p, wat, "a value");
	}
	return ok ? DFS_OK : too_large(p);
}

static int parse_word_value(struct parser *p, bson_t *b, const char *key, int klen)
{
	const unsigned char *s = (const unsigned char *)p->s;
	size_t wat = p->pos, wn, k;
	const char *w = p->s + p->pos;
	bool ok;
	int rc;

	while (p->pos < p->len && is_ident(s[p->pos]))
		p->pos++;
	wn = p->pos - wat;
	if (word_may_grow(p, w, wn))
		return expected_at(p, p->len, "a value");
	if (word_is(w, wn, "true") || word_is(w, wn, "false"))
		ok = bson_append_bool(b, key, klen, w[0] == 't');
	else if (word_is(w, wn, "null"))
		ok = bson_append_null(b, key, klen);
	else if (word_is(w, wn, "undefined"))
		ok = bson_append_undefined(b, key, klen);
	else if (word_is(w, wn, "NaN"))
		ok = bson_append_double(b, key, klen, NAN);
	else if (word_is(w, wn, "Infinity"))
		ok = bson_append_double(b, key, klen, INFINITY);
	else {
		size_t save = p->pos;
		unsigned sline = p->line;
		size_t sls = p->line_start;
		bool is_new = word_is(w, wn, "new");

		if (is_new) {
			rc = skip_ws(p);
			if (rc)
				return rc;
			wat = p->pos;
			w = p->s + p->pos;
			while (p->pos < p->len && is_ident(s[p->pos]))
				p->pos++;
			wn = p->pos - wat;
			if (!wn)
				return expected(p, "a constructor name");
			if (word_may_grow(p, w, wn))
				return expected_at(p, p->len, "a constructor name");
			save = p->pos, sline = p->line, sls = p->line_start;
		}
		rc = skip_ws(p);
		if (rc)
			return rc;
		if ((word_is(w, wn, "MinKey") || word_is(w, wn, "MaxKey")) &&
		    (p->pos >= p->len || p->s[p->pos] != '(')) {
			p->pos = save, p->line = sline, p->line_start = sls;
			ok = w[1] == 'i' ? bson_append_minkey(b, key, klen)
					 : bson_append_maxkey(b, key, klen);
			return ok ? DFS_OK : too_large(p);
		}
		for (k = 6; k < sizeof(known_words) / sizeof(known_words[0]); k++)
			if (word_is(w, wn, known_words[k]))
				break;
		if (k == sizeof(known_words) / sizeof(known_words[0]) || word_is(w, wn, "new"))
			return expected_at(p, wat, "a value");
		if (p->pos >= p->len || p->s[p->pos] != '(')
			return expected(p, "'('");
		p->pos++;
		rc = skip_ws(p);
		if (rc)
			return rc;
		return parse_call(p, w, wn, wat, b, key, klen);
	}
	return ok ? DFS_OK : too_large(p);
}

/* ---- values -------------------------------------------------------------------------- */

/* Parses the value at p->pos (whitespace already skipped) and appends it to b under key. */
static int parse_value(struct parser *p, bson_t *b, const char *key, int klen)
{
	const char *str;
	size_t slen;
	unsigned char c;
	int rc;

	if (p->pos >= p->len)
		return expected(p, "a value");
	c = (unsigned char)p->s[p->pos];
	switch (c) {
	case '{':
		return parse_object_value(p, b, key, klen);
	case '[':
		return parse_array_value(p, b, key, klen);
	case '"':
	case '\'':
		rc = parse_string(p, &p->str, false, false, &str, &slen);
		if (rc)
			return rc;
		return bson_append_utf8(b, key, klen, str ? str : "", (int)slen) ? DFS_OK
										 : too_large(p);
	case '/':
		return parse_regex(p, b, key, klen);
	case '-':
		if (p->pos + 1 < p->len && p->s[p->pos + 1] == 'I') {
			size_t at = p->pos;

			p->pos++;
			while (p->pos < p->len && is_ident((unsigned char)p->s[p->pos]))
				p->pos++;
			if (p->pos - at - 1 == 8 && !memcmp(p->s + at + 1, "Infinity", 8))
				return bson_append_double(b, key, klen, -INFINITY) ? DFS_OK
										   : too_large(p);
			if (p->pos >= p->len && p->pos - at - 1 <= 8 &&
			    !memcmp(p->s + at + 1, "Infinity", p->pos - at - 1))
				return expected_at(p, p->len, "a value");
			return expected_at(p, at, "a value");
		}
		return parse_number(p, b, key, klen);
	default:
		if (c >= '0' && c <= '9')
			return parse_number(p, b, key, klen);
		if (is_ident(c))
			return parse_word_value(p, b, key, klen);
		return expected(p, "a value");
	}
}

/* ---- entry points -------------------------------------------------------------------- */

static void parser_init(struct parser *p, const char *text, size_t len, unsigned first_line,
			struct dfs_err *err)
{
	p->s = text;
	p->len = text ? len : 0;
	p->pos = 0;
	p->line = first_line;
	p->line_start = 0;
	p->depth = 0;
	dfs_buf_init(&p->key);
	dfs_buf_init(&p->str);
	dfs_buf_init(&p->bin);
	p->err = err;
}

static void parser_release(struct parser *p)
{
	dfs_buf_release(&p->key);
	dfs_buf_release(&p->str);
	dfs_buf_release(&p->bin);
}

/*
 * True when the subdocument doc, rendered and read back, would not come back as a document:
 * its keys and value types spell one of the wrapper shapes above, so the parser would turn it
 * into a typed value or refuse it as a bad wrapper. validate.c refuses to store such shapes.
 * It runs the same conversion as the parser (into a scratch document), so the two cannot
 * disagree. Cheap when the first key does not start with '$'.
 */
bool store_codec_is_wrapper(const bson_t *doc)
{
	struct dfs_err err;
	struct parser p;
	struct wctx w;
	bson_iter_t it;
	bson_t scratch;
	int rc;

	if (!bson_iter_init(&it, doc) || !bson_iter_next(&it) || bson_iter_key(&it)[0] != '$' ||
	    bson_count_keys(doc) > 2)
		return false;
	parser_init(&p, "", 0, 1, &err);
	bson_init(&scratch);
	w = (struct wctx){&p, &scratch, "v", 1, 1, 1};
	rc = convert_wrapper(&w, doc);
	bson_destroy(&scratch);
	parser_release(&p);
	return rc != NOT_WRAPPER;
}

/* Parses the top-level document at p->pos ('{' expected) into out. */
static int parse_top(struct parser *p, bson_t *out)
{
	int rc;

	if (p->pos >= p->len || p->s[p->pos] != '{')
		return expected(p, "'{'");
	p->depth = 1;
	rc = parse_members(p, out);
	p->depth = 0;
	return rc;
}

/*
 * Parses exactly one document into out (initialised, empty). Returns 0, DFS_EINVAL with a
 * "line L, column C: ..." message, or DFS_EINCOMPLETE when the text ends inside it. On error
 * out is left empty.
 */
int store_codec_parse_doc(const char *text, size_t len, bson_t *out, struct dfs_err *err)
{
	struct parser p;
	int rc;

	parser_init(&p, text, len, 1, err);
	if (p.len >= 3 && !memcmp(p.s, "\xef\xbb\xbf", 3))
		p.pos = p.line_start = 3; /* a byte order mark some editors write */
	rc = skip_ws(&p);
	if (!rc)
		rc = parse_top(&p, out);
	if (!rc)
		rc = skip_ws(&p);
	if (!rc && p.pos < p.len)
		rc = expected(&p, "end of input");
	if (rc)
		bson_reinit(out);
	parser_release(&p);
	return rc;
}

/*
 * Parses the next document of a stream (concatenated documents or JSON Lines). *consumed is
 * set on success to the bytes used through the closing brace. Returns DFS_ENOENT (no message)
 * when only whitespace and comments remain, DFS_EINCOMPLETE when the text ends inside the
 * document; errors count lines from first_line. On error out is left empty.
 */
int store_codec_parse_next(const char *text, size_t len, unsigned first_line, size_t *consumed,
			   bson_t *out, struct dfs_err *err)
{
	struct parser p;
	int rc;

	parser_init(&p, text, len, first_line, err);
	*consumed = 0;
	rc = skip_ws(&p);
	if (!rc && p.pos >= p.len) {
		rc = DFS_ENOENT;
	} else if (!rc) {
		rc = parse_top(&p, out);
		if (!rc)
			*consumed = p.pos;
	}
	if (rc)
		bson_reinit(out);
	parser_release(&p);
	return rc;
}

/*
 * Parses any single value (whitespace and comments around it allowed) and appends it to out
 * under key. Documents that spell an Extended JSON wrapper become the typed value. Returns 0
 * or an error as store_codec_parse_doc; on error nothing is appended.
 */
int store_codec_parse_value(const char *text, size_t len, bson_t *out, const char *key,
			    struct dfs_err *err)
{
	struct parser p;
	bson_t tmp;
	int rc;

	parser_init(&p, text, len, 1, err);
	bson_init(&tmp);
	p.depth = 1;
	rc = skip_ws(&p);
	if (!rc)
		rc = parse_value(&p, &tmp, key, (int)strlen(key));
	if (!rc)
		rc = skip_ws(&p);
	if (!rc && p.pos < p.len)
		rc = expected(&p, "end of input");
	if (!rc && !bson_concat(out, &tmp))
		rc = too_large(&p);
	bson_destroy(&tmp);
	parser_release(&p);
	return rc;
}
