/*
 * collation.c - MongoDB's collation option ({locale, strength, caseLevel, caseFirst,
 * numericOrdering, alternate, maxVariable, backwards, normalization}) on ICU's collators, for
 * the comparisons of a find, a count, a distinct, a write's filter and sort and an
 * aggregate's leading $match/$sort.
 *
 * It does not decide where a collation may be used: filter.c (query_filter_parse_collated)
 * refuses the operators it cannot honour, plan.c plans a collection scan (docfs's indexes
 * hold binary keys, so none can answer a collated comparison), agg.c refuses stages past
 * the find's.
 *
 * Design notes
 * 1. One representation for every comparison: a value with each string, at any depth, replaced
 *    by its ICU sort key (a byte string without NUL bytes, terminated by one). The store
 *    compares strings bytewise and keys them bytewise (store/compare.c, store/key.c), and
 *    two strings compare under the collation exactly as their sort keys compare bytewise, so
 *    the matcher and the sort keys need no change: the filter's operands are converted once,
 *    each document when it is matched or its sort key built. Field names are not strings in
 *    this sense and stay as they are, as MongoDB's do.
 * 2. {locale: "simple"} is binary comparison: query_collation_new gives NULL for it, and
 *    NULL means "no collation" everywhere.
 * 3. A collator is used through const functions only (ucol_getSortKey), which ICU allows
 *    from several threads at once; the struct is immutable after creation but for its
 *    reference count: a find cursor holds one (query__collation_ref), so it may outlive the
 *    command that made the collation (a wire cursor read by getMore).
 * 4. Built without ICU (meson finds no icu-i18n), every collation but "simple" is refused by
 *    name, and no query_collation ever exists.
 */
#include "query_int.h"

#include <stdlib.h>
#include <string.h>

/* {locale: "simple"} alone (note 2): 1; another collation: 0; not a valid spec: an error. */
static int simple_only(const bson_t *spec, struct dfs_err *err)
{
	bson_iter_t it;

	if (!bson_iter_init_find(&it, spec, "locale") || !BSON_ITER_HOLDS_UTF8(&it))
		return -dfs_err_set(err, DFS_EINVAL, "collation needs 'locale', a string");
	if (strcmp(bson_iter_utf8(&it, NULL), "simple"))
		return 0;
	bson_iter_init(&it, spec);
	while (bson_iter_next(&it))
		if (strcmp(bson_iter_key(&it), "locale"))
			return -dfs_err_set(err, DFS_EINVAL,
					    "collation: the simple locale takes no options ('%s')",
					    bson_iter_key(&it));
	return 1;
}

#ifndef DOCFS_HAVE_ICU
/* note 4 */
struct query_collation {
	int unused;
};

int query_collation_new(const bson_t *spec, struct query_collation **out, struct dfs_err *err)
{
	int r = simple_only(spec, err);

	*out = NULL;
	if (r < 0)
		return -r;
	if (r == 1)
		return 0;
	return dfs_err_set(err, DFS_EINVAL,
			   "collations need ICU, and this docfs was built without it (libicu-dev)");
}

void query_collation_free(struct query_collation *c)
{
	(void)c;
}

struct query_collation *query__collation_ref(const struct query_collation *c)
{
	return (struct query_collation *)c;
}

const char *query__collation_desc(const struct query_collation *c)
{
	(void)c;
	return "";
}

void query__collate_doc(const struct query_collation *c, const bson_t *doc, bson_t *out)
{
	(void)c;
	bson_concat(out, doc);
}

void query__collate_value(const struct query_collation *c, const bson_value_t *v, bson_value_t *out)
{
	(void)c;
	bson_value_copy(v, out);
}
#else
#include <unicode/ucol.h>
#include <unicode/ustring.h>

struct query_collation {
	int refs;      /* query__collation_ref adds one, query_collation_free drops one */
	UCollator *uc; /* Owned */
	char *desc;    /* Owned: the options as given, in one canonical text (plan cache keys) */
};

void query_collation_free(struct query_collation *c)
{
	if (!c || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	if (c->uc)
		ucol_close(c->uc);
	free(c->desc);
	free(c);
}

struct query_collation *query__collation_ref(const struct query_collation *c)
{
	struct query_collation *m = (struct query_collation *)c; /* only refs changes */

	if (m)
		__atomic_add_fetch(&m->refs, 1, __ATOMIC_ACQ_REL);
	return m;
}

const char *query__collation_desc(const struct query_collation *c)
{
	return c ? c->desc : "";
}

/* Sets attribute a of c from a boolean option. */
static int set_bool(struct query_collation *c, UColAttribute a, const bson_iter_t *it,
		    const char *name, struct dfs_err *err)
{
	UErrorCode st = U_ZERO_ERROR;

	if (!BSON_ITER_HOLDS_BOOL(it))
		return dfs_err_set(err, DFS_EINVAL, "collation '%s' must be a boolean", name);
	ucol_setAttribute(c->uc, a, bson_iter_bool(it) ? UCOL_ON : UCOL_OFF, &st);
	return U_FAILURE(st)
		       ? dfs_err_set(err, DFS_EINVAL, "collation '%s': %s", name, u_errorName(st))
		       : 0;
}

/* Sets attribute a of c from a string option, one of names[i] meaning vals[i]. */
static int set_enum(struct query_collation *c, UColAttribute a, const bson_iter_t *it,
		    const char *name, const char *const *names, const UColAttributeValue *vals,
		    struct dfs_err *err)
{
	UErrorCode st = U_ZERO_ERROR;
	const char *s;

	if (!BSON_ITER_HOLDS_UTF8(it))
		return dfs_err_set(err, DFS_EINVAL, "collation '%s' must be a string", name);
	s = bson_iter_utf8(it, NULL);
	for (int i = 0; names[i]; i++)
		if (!strcmp(s, names[i])) {
			ucol_setAttribute(c->uc, a, vals[i], &st);
			return U_FAILURE(st) ? dfs_err_set(err, DFS_EINVAL, "collation '%s': %s",
							   name, u_errorName(st))
					     : 0;
		}
	return dfs_err_set(err, DFS_EINVAL, "collation '%s' cannot be '%s'", name, s);
}

/* Does ICU have collation data for locale, or for its language ("en" of "en_US"; ICU gives
 * a locale without data of its own the root collation, as English is)? */
static bool known_locale(const char *locale)
{
	size_t lang = strcspn(locale, "_@");

	if (!strcmp(locale, "root"))
		return true;
	for (int32_t i = 0, n = ucol_countAvailable(); i < n; i++) {
		const char *a = ucol_getAvailable(i);

		if (!strcmp(a, locale) || (strlen(a) == lang && !strncmp(a, locale, lang)))
			return true;
	}
	return false;
}

int query_collation_new(const bson_t *spec, struct query_collation **out, struct dfs_err *err)
{
	static const char *const first_names[] = {"upper", "lower", "off", NULL};
	static const UColAttributeValue first_vals[] = {UCOL_UPPER_FIRST, UCOL_LOWER_FIRST,
							UCOL_OFF};
	static const char *const alt_names[] = {"non-ignorable", "shifted", NULL};
	static const UColAttributeValue alt_vals[] = {UCOL_NON_IGNORABLE, UCOL_SHIFTED};
	struct query_collation *c = NULL;
	const char *locale = NULL;
	UErrorCode st = U_ZERO_ERROR;
	bson_iter_t it;
	struct dfs_buf d;
	int rc = 0;

	*out = NULL;
	if ((rc = simple_only(spec, err)) != 0)
		return rc < 0 ? -rc : 0; /* note 2 */
	bson_iter_init_find(&it, spec, "locale");
	locale = bson_iter_utf8(&it, NULL);
	c = calloc(1, sizeof(*c));
	if (!c)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	c->refs = 1;
	c->uc = ucol_open(locale, &st);
	if (U_FAILURE(st) || !known_locale(locale)) {
		/* MongoDB refuses a locale it does not list rather than fall back to root */
		rc = dfs_err_set(err, DFS_EINVAL, "collation: unsupported locale '%s'", locale);
		goto done;
	}
	bson_iter_init(&it, spec);
	while (!rc && bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "locale") || !strcmp(k, "version")) {
			continue;
		} else if (!strcmp(k, "strength")) {
			int64_t s = BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_int64(&it) : 0;
			static const UColAttributeValue lv[] = {UCOL_PRIMARY, UCOL_SECONDARY,
								UCOL_TERTIARY, UCOL_QUATERNARY,
								UCOL_IDENTICAL};

			if (s < 1 || s > 5) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "collation 'strength' must be 1 to 5");
				break;
			}
			ucol_setStrength(c->uc, lv[s - 1]);
		} else if (!strcmp(k, "caseLevel")) {
			rc = set_bool(c, UCOL_CASE_LEVEL, &it, k, err);
		} else if (!strcmp(k, "numericOrdering")) {
			rc = set_bool(c, UCOL_NUMERIC_COLLATION, &it, k, err);
		} else if (!strcmp(k, "backwards")) {
			rc = set_bool(c, UCOL_FRENCH_COLLATION, &it, k, err);
		} else if (!strcmp(k, "normalization")) {
			rc = set_bool(c, UCOL_NORMALIZATION_MODE, &it, k, err);
		} else if (!strcmp(k, "caseFirst")) {
			rc = set_enum(c, UCOL_CASE_FIRST, &it, k, first_names, first_vals, err);
		} else if (!strcmp(k, "alternate")) {
			rc = set_enum(c, UCOL_ALTERNATE_HANDLING, &it, k, alt_names, alt_vals, err);
		} else if (!strcmp(k, "maxVariable")) {
			UColReorderCode r;
			const char *s = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";

			if (!strcmp(s, "punct"))
				r = UCOL_REORDER_CODE_PUNCTUATION;
			else if (!strcmp(s, "space"))
				r = UCOL_REORDER_CODE_SPACE;
			else {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "collation 'maxVariable' must be \"punct\" or "
						 "\"space\"");
				break;
			}
			ucol_setMaxVariable(c->uc, r, &st);
			if (U_FAILURE(st))
				rc = dfs_err_set(err, DFS_EINVAL, "collation 'maxVariable': %s",
						 u_errorName(st));
		} else {
			rc = dfs_err_set(err, DFS_EINVAL, "collation: unknown field '%s'", k);
		}
	}
	if (rc)
		goto done;
	dfs_buf_init(&d);
	store_codec_render(spec, STORE_RENDER_CANONICAL, &d, NULL);
	c->desc = strdup(d.data ? d.data : "");
	dfs_buf_release(&d);
	if (!c->desc) {
		rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
		goto done;
	}
	*out = c;
	c = NULL;
done:
	query_collation_free(c);
	return rc;
}

/* The sort key of the UTF-8 string s (len bytes) appended to b under key as a string. */
static void append_key(const struct query_collation *c, bson_t *b, const char *key, int klen,
		       const char *s, uint32_t len)
{
	UChar stack[256], *u = stack;
	uint8_t kstack[512], *k = kstack;
	int32_t ulen = 0, n;
	UErrorCode st = U_ZERO_ERROR;

	u_strFromUTF8Lenient(u, 256, &ulen, s, (int32_t)len, &st);
	if (st == U_BUFFER_OVERFLOW_ERROR) {
		u = malloc(sizeof(UChar) * ((size_t)ulen + 1));
		if (!u)
			abort();
		st = U_ZERO_ERROR;
		u_strFromUTF8Lenient(u, ulen + 1, &ulen, s, (int32_t)len, &st);
	}
	n = ucol_getSortKey(c->uc, u, ulen, k, sizeof(kstack));
	if (n > (int32_t)sizeof(kstack)) {
		k = malloc((size_t)n);
		if (!k)
			abort();
		n = ucol_getSortKey(c->uc, u, ulen, k, n);
	}
	/* n counts the terminating NUL: the key's bytes are the n - 1 before it */
	bson_append_utf8(b, key, klen, (const char *)k, n > 0 ? n - 1 : 0);
	if (u != stack)
		free(u);
	if (k != kstack)
		free(k);
}

static void collate_into(const struct query_collation *c, bson_iter_t *it, bson_t *out);

/* One element of it into out under its key (strings converted, containers recursed). */
static void collate_elem(const struct query_collation *c, bson_iter_t *it, bson_t *out)
{
	const char *key = bson_iter_key(it);
	int klen = (int)bson_iter_key_len(it);
	bson_iter_t sub;
	bson_t child;

	switch (bson_iter_type(it)) {
	case BSON_TYPE_UTF8: {
		uint32_t len;
		const char *s = bson_iter_utf8(it, &len);

		append_key(c, out, key, klen, s, len);
		return;
	}
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		if (!bson_iter_recurse(it, &sub))
			break;
		if (BSON_ITER_HOLDS_ARRAY(it))
			bson_append_array_begin(out, key, klen, &child);
		else
			bson_append_document_begin(out, key, klen, &child);
		collate_into(c, &sub, &child);
		if (BSON_ITER_HOLDS_ARRAY(it))
			bson_append_array_end(out, &child);
		else
			bson_append_document_end(out, &child);
		return;
	default:
		break;
	}
	bson_append_iter(out, key, klen, it);
}

static void collate_into(const struct query_collation *c, bson_iter_t *it, bson_t *out)
{
	while (bson_iter_next(it))
		collate_elem(c, it, out);
}

void query__collate_doc(const struct query_collation *c, const bson_t *doc, bson_t *out)
{
	bson_iter_t it;

	if (bson_iter_init(&it, doc))
		collate_into(c, &it, out);
}

void query__collate_value(const struct query_collation *c, const bson_value_t *v, bson_value_t *out)
{
	bson_t wrap = BSON_INITIALIZER, conv = BSON_INITIALIZER;
	bson_iter_t it;

	bson_append_value(&wrap, "v", 1, v);
	query__collate_doc(c, &wrap, &conv);
	if (bson_iter_init_find(&it, &conv, "v"))
		bson_value_copy(bson_iter_value(&it), out);
	else
		bson_value_copy(v, out);
	bson_destroy(&wrap);
	bson_destroy(&conv);
}
#endif
