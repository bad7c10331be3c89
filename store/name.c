/*
 * name.c - the bijection between _id values and document file name stems (the name
 * without ".json"), in the forms store.h lists: ObjectIds as 24 lowercase hex digits,
 * integral numbers within int64 as decimal digits, plain strings as themselves (escaped),
 * anything else as '=' and its compact Extended JSON (escaped).
 *
 * Numbers are named by value, as a unique index sees them: an _id is first brought to a
 * canonical form (integral numbers in int64 range become int32/int64, other numbers a
 * double when one holds the value exactly, else a decimal128 without trailing zeros; NaN is
 * the double NaN; symbols become strings and undefined null; inside documents too), and
 * that form is named. Decoding accepts a stem only when encoding what it decodes to gives
 * back the same stem, which makes the mapping a bijection by construction.
 *
 * It does not know about ".json", scratch files or directories (fs/ does), and it trusts
 * the codec (codec_parse.c, codec_render.c) to be type-exact.
 */
#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* From compare.c; belongs in a private header of the non-SQL store files. */
enum store__dec_class { STORE__DEC_ZERO, STORE__DEC_FINITE, STORE__DEC_INF, STORE__DEC_NAN };
int store__dec_split(bson_decimal128_t dec, bool *neg, char *digits, int *exp10);

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_lower_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f');
}

static bool is_any_hex(char c)
{
	return is_lower_hex(c) || (c >= 'A' && c <= 'F');
}

static int hex_value(char c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return c - 'A' + 10;
}

/* True when s has the shape of a number name: digits with an optional leading '-'. */
static bool numeric_shape(const char *s, size_t n)
{
	size_t i = n && s[0] == '-' ? 1 : 0;

	if (i == n)
		return false;
	for (; i < n; i++)
		if (!is_digit(s[i]))
			return false;
	return true;
}

static bool oid_shape(const char *s, size_t n, bool lower_only)
{
	size_t i;

	if (n != 24)
		return false;
	for (i = 0; i < n; i++)
		if (!(lower_only ? is_lower_hex(s[i]) : is_any_hex(s[i])))
			return false;
	return true;
}

/* Appends s with '%', '/', control bytes and DEL as %XX, and the first byte too when asked. */
static void put_escaped(struct dfs_buf *out, const char *s, size_t n, bool escape_first)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '%' || c == '/' || c < 0x20 || c == 0x7f || (i == 0 && escape_first))
			dfs_buf_printf(out, "%%%02X", c);
		else
			dfs_buf_putc(out, (char)c);
	}
}

/* ---- canonical form ---------------------------------------------------------------- */

static bson_value_t int_value(int64_t i)
{
	bson_value_t v;

	if (i >= INT32_MIN && i <= INT32_MAX) {
		v.value_type = BSON_TYPE_INT32;
		v.value.v_int32 = (int32_t)i;
	} else {
		v.value_type = BSON_TYPE_INT64;
		v.value.v_int64 = i;
	}
	return v;
}

static bson_value_t double_value(double d)
{
	bson_value_t v;

	v.value_type = BSON_TYPE_DOUBLE;
	v.value.v_double = d;
	return v;
}

/* The canonical form of a double: int32/int64 when integral within int64, else itself. */
static bson_value_t canon_double(double d)
{
	if (isnan(d))
		return double_value(NAN);
	if (d == floor(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
		return int_value((int64_t)d);
	return double_value(d);
}

/* The canonical form of a decimal128 (see the file comment). */
static bson_value_t canon_decimal(const bson_value_t *v)
{
	char digits[40], text[96];
	bson_value_t out;
	int exp10, len;
	bool neg;
	double d;

	switch (store__dec_split(v->value.v_decimal128, &neg, digits, &exp10)) {
	case STORE__DEC_NAN:
		return double_value(NAN);
	case STORE__DEC_INF:
		return double_value(neg ? -INFINITY : INFINITY);
	case STORE__DEC_ZERO:
		return int_value(0);
	default:
		break;
	}
	len = (int)strlen(digits);
	if (exp10 >= 0 && len + exp10 <= 19) {
		long long i;

		int at = snprintf(text, sizeof(text), "%s%s", neg ? "-" : "", digits);

		memset(text + at, '0', (size_t)exp10);
		text[at + exp10] = '\0';
		errno = 0;
		i = strtoll(text, NULL, 10);
		if (errno == 0)
			return int_value(i);
	}
	snprintf(text, sizeof(text), "%s%sE%d", neg ? "-" : "", digits, exp10);
	d = strtod(text, NULL);
	out = double_value(d);
	if (isfinite(d) && d != 0 && store_value_compare(&out, v) == 0)
		return canon_double(d);
	out.value_type = BSON_TYPE_DECIMAL128;
	if (!bson_decimal128_from_string(text, &out.value.v_decimal128))
		out = *v; /* cannot happen: text is the value itself */
	return out;
}

/* The canonical form of a number or a string-like value; other values are returned as is. */
static bson_value_t canon_scalar(const bson_value_t *v)
{
	bson_value_t out;

	switch (v->value_type) {
	case BSON_TYPE_INT32:
		return *v;
	case BSON_TYPE_INT64:
		return int_value(v->value.v_int64);
	case BSON_TYPE_DOUBLE:
		return canon_double(v->value.v_double);
	case BSON_TYPE_DECIMAL128:
		return canon_decimal(v);
	case BSON_TYPE_SYMBOL:
		out.value_type = BSON_TYPE_UTF8;
		out.value.v_utf8.str = v->value.v_symbol.symbol;
		out.value.v_utf8.len = v->value.v_symbol.len;
		return out;
	case BSON_TYPE_UNDEFINED:
		out.value_type = BSON_TYPE_NULL;
		return out;
	default:
		return *v;
	}
}

/* Appends to out the canonical copy of the document or array at data (see the file comment). */
static int canon_doc(const uint8_t *data, uint32_t len, bool array, bson_t *out, int depth,
		     struct dfs_err *err)
{
	bson_iter_t it;
	uint32_t index = 0;
	int rc = 0;

	if (depth > DFS_MAX_DEPTH)
		return dfs_err_set(err, DFS_EINVAL, "_id nested deeper than %d levels",
				   DFS_MAX_DEPTH);
	if (!bson_iter_init_from_data(&it, data, len))
		return dfs_err_set(err, DFS_EINVAL, "_id holds invalid bson");
	while (rc == 0 && bson_iter_next(&it)) {
		const bson_value_t *v = bson_iter_value(&it);
		char idx[16];
		const char *key = bson_iter_key(&it);
		bson_value_t cv;
		bson_t child, scope;

		if (array)
			bson_uint32_to_string(index++, &key, idx, sizeof(idx));
		else if (!bson_utf8_validate(key, strlen(key), false))
			return dfs_err_set(err, DFS_EINVAL,
					   "_id holds a field name that is not utf-8");
		switch (v->value_type) {
		case BSON_TYPE_UTF8:
		case BSON_TYPE_SYMBOL:
			cv = canon_scalar(v);
			if (!bson_utf8_validate(cv.value.v_utf8.str, cv.value.v_utf8.len, true))
				return dfs_err_set(err, DFS_EINVAL,
						   "_id string at '%s' is not valid utf-8", key);
			bson_append_value(out, key, -1, &cv);
			break;
		case BSON_TYPE_DOCUMENT:
		case BSON_TYPE_ARRAY:
			if (v->value_type == BSON_TYPE_ARRAY)
				bson_append_array_begin(out, key, -1, &child);
			else
				bson_append_document_begin(out, key, -1, &child);
			rc = canon_doc(v->value.v_doc.data, v->value.v_doc.data_len,
				       v->value_type == BSON_TYPE_ARRAY, &child, depth + 1, err);
			if (v->value_type == BSON_TYPE_ARRAY)
				bson_append_array_end(out, &child);
			else
				bson_append_document_end(out, &child);
			break;
		case BSON_TYPE_CODEWSCOPE:
			bson_init(&scope);
			rc = canon_doc(v->value.v_codewscope.scope_data,
				       v->value.v_codewscope.scope_len, false, &scope, depth + 1,
				       err);
			if (rc == 0)
				bson_append_code_with_scope(out, key, -1,
							    v->value.v_codewscope.code, &scope);
			bson_destroy(&scope);
			break;
		default:
			cv = canon_scalar(v);
			bson_append_value(out, key, -1, &cv);
			break;
		}
	}
	if (rc == 0 && it.err_off != 0)
		rc = dfs_err_set(err, DFS_EINVAL, "_id holds invalid bson");
	return rc;
}

/* ---- encoding ---------------------------------------------------------------------- */

/* '=' and the compact Extended JSON of v (already canonical at the top level). */
static int put_typed(struct dfs_buf *out, const bson_value_t *v, struct dfs_err *err)
{
	struct dfs_buf text;
	bson_t holder = BSON_INITIALIZER, child;
	bson_value_t cv = *v;
	bson_iter_t it;
	int rc = 0;

	dfs_buf_init(&text);
	if (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_CODEWSCOPE) {
		if (v->value_type == BSON_TYPE_DOCUMENT) {
			bson_append_document_begin(&holder, "_id", 3, &child);
			rc = canon_doc(v->value.v_doc.data, v->value.v_doc.data_len, false, &child,
				       2, err);
			bson_append_document_end(&holder, &child);
		} else {
			bson_t scope = BSON_INITIALIZER;

			rc = canon_doc(v->value.v_codewscope.scope_data,
				       v->value.v_codewscope.scope_len, false, &scope, 2, err);
			bson_append_code_with_scope(&holder, "_id", 3, v->value.v_codewscope.code,
						    &scope);
			bson_destroy(&scope);
		}
		if (rc == 0 && bson_iter_init_find(&it, &holder, "_id"))
			cv = *bson_iter_value(&it);
	}
	if (rc == 0)
		rc = store_codec_render_value(&cv, &text, err);
	if (rc == 0) {
		dfs_buf_putc(out, '=');
		put_escaped(out, text.data, text.len, false);
	}
	bson_destroy(&holder);
	dfs_buf_release(&text);
	return rc;
}

static int encode_id(const bson_value_t *id, struct dfs_buf *out, struct dfs_err *err)
{
	bson_value_t v = canon_scalar(id);
	char hex[25];
	const char *s;
	size_t n;

	switch (v.value_type) {
	case BSON_TYPE_OID:
		bson_oid_to_string(&v.value.v_oid, hex);
		dfs_buf_append(out, hex, 24);
		return 0;
	case BSON_TYPE_INT32:
		dfs_buf_printf(out, "%" PRId32, v.value.v_int32);
		return 0;
	case BSON_TYPE_INT64:
		dfs_buf_printf(out, "%" PRId64, v.value.v_int64);
		return 0;
	case BSON_TYPE_UTF8:
		s = v.value.v_utf8.str;
		n = v.value.v_utf8.len;
		if (n == 0)
			return put_typed(out, &v, err);
		if (!bson_utf8_validate(s, n, true))
			return dfs_err_set(err, DFS_EINVAL, "_id string is not valid utf-8");
		put_escaped(out, s, n,
			    s[0] == '.' || s[0] == '=' || numeric_shape(s, n) ||
				    oid_shape(s, n, false));
		return 0;
	case BSON_TYPE_ARRAY:
		return dfs_err_set(err, DFS_EINVAL, "_id must not be an array");
	case BSON_TYPE_REGEX:
		return dfs_err_set(err, DFS_EINVAL, "_id must not be a regular expression");
	case BSON_TYPE_NULL:
		if (id->value_type == BSON_TYPE_UNDEFINED)
			return dfs_err_set(err, DFS_EINVAL, "_id must not be undefined");
		return put_typed(out, &v, err);
	case BSON_TYPE_EOD:
		return dfs_err_set(err, DFS_EINVAL, "_id has no value");
	default:
		return put_typed(out, &v, err);
	}
}

/*
 * Appends the file name stem of id to out. Returns 0; DFS_EINVAL for values that cannot be
 * an _id (array, regex, undefined, a string that is not UTF-8, invalid BSON inside) or that
 * the codec cannot render; DFS_ENAMETOOLONG when the stem would exceed DFS_MAX_NAME_STEM
 * bytes. On error out is unchanged.
 */
int store_name_from_id(const bson_value_t *id, struct dfs_buf *out, struct dfs_err *err)
{
	size_t start = out->len;
	int rc = encode_id(id, out, err);

	if (rc == 0 && out->len - start > DFS_MAX_NAME_STEM)
		rc = dfs_err_set(err, DFS_ENAMETOOLONG,
				 "_id needs a file name of %zu bytes, over the limit of %d",
				 out->len - start, DFS_MAX_NAME_STEM);
	if (rc) {
		out->len = start;
		if (out->data)
			out->data[start] = '\0';
	}
	return rc;
}

/* ---- decoding ---------------------------------------------------------------------- */

/* Decodes the %XX escapes of s into out. */
static int unescape(const char *s, size_t n, struct dfs_buf *out, struct dfs_err *err)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] != '%') {
			dfs_buf_putc(out, s[i]);
			continue;
		}
		if (i + 2 >= n || !is_any_hex(s[i + 1]) || !is_any_hex(s[i + 2]))
			return dfs_err_set(err, DFS_EINVAL,
					   "'%%' at byte %zu is not followed by two "
					   "hex digits",
					   i);
		dfs_buf_putc(out, (char)(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2])));
		i += 2;
	}
	return 0;
}

/* Decodes stem into tmp as {"_id": value}, without the canonical check. */
static int decode_stem(const char *stem, size_t len, bson_t *tmp, struct dfs_err *err)
{
	struct dfs_buf raw;
	bson_oid_t oid;
	bson_iter_t it;
	char text[32];
	long long i;
	int rc;

	if (oid_shape(stem, len, true)) {
		memcpy(text, stem, 24);
		text[24] = '\0';
		bson_oid_init_from_string(&oid, text);
		bson_append_oid(tmp, "_id", 3, &oid);
		return 0;
	}
	if (numeric_shape(stem, len)) {
		if (len > 20)
			return dfs_err_set(err, DFS_EINVAL, "number out of the int64 range");
		memcpy(text, stem, len);
		text[len] = '\0';
		errno = 0;
		i = strtoll(text, NULL, 10);
		if (errno)
			return dfs_err_set(err, DFS_EINVAL, "number out of the int64 range");
		if (i >= INT32_MIN && i <= INT32_MAX)
			bson_append_int32(tmp, "_id", 3, (int32_t)i);
		else
			bson_append_int64(tmp, "_id", 3, i);
		return 0;
	}
	dfs_buf_init(&raw);
	if (stem[0] == '=') {
		rc = unescape(stem + 1, len - 1, &raw, err);
		if (rc == 0)
			rc = store_codec_parse_value(raw.data ? raw.data : "", raw.len, tmp, "_id",
						     err);
		if (rc == DFS_EINCOMPLETE) { /* a name is complete: a cut value is just wrong */
			if (err)
				err->code = DFS_EINVAL;
			rc = DFS_EINVAL;
		}
		if (rc == 0 && bson_iter_init_find(&it, tmp, "_id")) {
			bson_type_t t = bson_iter_type(&it);

			if (t == BSON_TYPE_ARRAY)
				rc = dfs_err_set(err, DFS_EINVAL, "_id must not be an array");
			else if (t == BSON_TYPE_REGEX)
				rc = dfs_err_set(err, DFS_EINVAL,
						 "_id must not be a regular expression");
			else if (t == BSON_TYPE_UNDEFINED)
				rc = dfs_err_set(err, DFS_EINVAL, "_id must not be undefined");
		}
	} else {
		rc = unescape(stem, len, &raw, err);
		if (rc == 0 && !bson_utf8_validate(raw.data, raw.len, true))
			rc = dfs_err_set(err, DFS_EINVAL, "not valid utf-8 once decoded");
		if (rc == 0)
			bson_append_utf8(tmp, "_id", 3, raw.data, (int)raw.len);
	}
	dfs_buf_release(&raw);
	return rc;
}

/*
 * Decodes the file name stem (len bytes, not NUL-terminated) into out as {"_id": value};
 * out must be initialised and empty. Returns 0; DFS_EINVAL when the stem is empty, malformed
 * or not the canonical name of what it decodes to; DFS_ENAMETOOLONG over DFS_MAX_NAME_STEM
 * bytes. On error out is left empty. Messages quote the stem.
 */
int store_name_to_id(const char *stem, size_t len, bson_t *out, struct dfs_err *err)
{
	struct dfs_buf again;
	bson_t tmp = BSON_INITIALIZER;
	bson_iter_t it;
	int rc = 0;

	dfs_buf_init(&again);
	if (len == 0) {
		rc = dfs_err_set(err, DFS_EINVAL, "empty file name");
		goto done;
	}
	if (len > DFS_MAX_NAME_STEM) {
		rc = dfs_err_set(err, DFS_ENAMETOOLONG,
				 "file name of %zu bytes is over the limit of %d", len,
				 DFS_MAX_NAME_STEM);
		goto done;
	}
	rc = decode_stem(stem, len, &tmp, err);
	if (rc == 0 && !bson_iter_init_find(&it, &tmp, "_id"))
		rc = dfs_err_set(err, DFS_EINVAL, "no value");
	if (rc == 0)
		rc = store_name_from_id(bson_iter_value(&it), &again, err);
	if (rc == 0 && (again.len != len || memcmp(again.data, stem, len) != 0))
		rc = dfs_err_set(err, DFS_EINVAL,
				 "not the canonical name of its _id, which is '%s'", again.data);
	if (rc)
		dfs_err_prefix(err, "file name '%.*s': ", (int)(len > 80 ? 80 : len), stem);
	else
		bson_concat(out, &tmp);
done:
	bson_destroy(&tmp);
	dfs_buf_release(&again);
	return rc;
}
