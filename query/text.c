/*
 * text.c - the $text operator: its operand ({$search, $language, $caseSensitive,
 * $diacriticSensitive}), reading $search into terms, negated terms, phrases and negated
 * phrases for a text index (MongoDB's FTSQuery), what TEXT_MATCH checks on a document
 * (FTSMatcher), and their explain shapes. It does not tokenize or score (store/text.c) and
 * does not plan or run the text stages (plan.c, exec.c).
 *
 * Design notes
 * 1. $search is read as MongoDB reads it: whitespace separates; '"' opens and closes a
 *    phrase; '-' starts a negation when it follows whitespace or the start and is outside a
 *    phrase; everything else is text, tokenized with the language's tokenizer. The words of
 *    a positive phrase are positive terms too; those of a negated phrase are not terms.
 * 2. Terms are kept sorted and distinct (explain lists them so). The scan terms are the
 *    positive terms folded as the index stores them; with $caseSensitive or
 *    $diacriticSensitive the terms keep case/diacritics and TEXT_MATCH checks that a
 *    document holds one of them in that form.
 * 3. Phrases compare as substrings of each indexed string, both folded as the flags say.
 */
#include "query_int.h"

#include <stdlib.h>
#include <string.h>

struct strs {
	char **s; /* Owned strings */
	size_t n, cap;
};

struct query__text {
	char *search;		    /* Owned: $search */
	char *language;		    /* Owned: $language as given, or NULL */
	bool case_sensitive;	    /* $caseSensitive */
	bool diacritic_sensitive;   /* $diacriticSensitive */
	int lang;		    /* prepared: the language used */
	bool prepared;		    /* query__text_prepare ran */
	struct strs terms, negated; /* sorted, distinct */
	struct strs scan;	    /* the folded positive terms the index scans look up */
	struct strs phrases, negphrases;
};

static void strs_add(struct strs *a, const char *s, size_t n)
{
	char *c = malloc(n + 1);

	if (!c)
		abort();
	memcpy(c, s, n);
	c[n] = '\0';
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 8;
		a->s = realloc(a->s, a->cap * sizeof(*a->s));
		if (!a->s)
			abort();
	}
	a->s[a->n++] = c;
}

static void strs_release(struct strs *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->s[i]);
	free(a->s);
	memset(a, 0, sizeof(*a));
}

static int str_qsort(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts a and drops duplicates. */
static void strs_set(struct strs *a)
{
	size_t k = 0;

	if (!a->n)
		return;
	qsort(a->s, a->n, sizeof(*a->s), str_qsort);
	for (size_t i = 0; i < a->n; i++) {
		if (k && !strcmp(a->s[k - 1], a->s[i]))
			free(a->s[i]);
		else
			a->s[k++] = a->s[i];
	}
	a->n = k;
}

static bool strs_has(const struct strs *a, const char *s, size_t n)
{
	size_t lo = 0, hi = a->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strncmp(s, a->s[mid], n);

		if (!c && a->s[mid][n])
			c = -1;
		if (!c)
			return true;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return false;
}

void query__text_free(struct query__text *t)
{
	if (!t)
		return;
	free(t->search);
	free(t->language);
	strs_release(&t->terms);
	strs_release(&t->negated);
	strs_release(&t->scan);
	strs_release(&t->phrases);
	strs_release(&t->negphrases);
	free(t);
}

static char *dup_n(const char *s, size_t n)
{
	char *c = malloc(n + 1);

	if (!c)
		abort();
	memcpy(c, s, n);
	c[n] = '\0';
	return c;
}

int query__text_parse(const bson_value_t *v, struct query__text **out, struct dfs_err *err)
{
	struct query__text *t;
	bson_iter_t it;
	bson_t d;
	int rc = 0;

	*out = NULL;
	if (v->value_type != BSON_TYPE_DOCUMENT ||
	    !bson_init_static(&d, v->value.v_doc.data, v->value.v_doc.data_len) ||
	    !bson_iter_init(&it, &d))
		return dfs_err_set(err, DFS_EINVAL, "$text needs an object");
	t = calloc(1, sizeof(*t));
	if (!t)
		abort();
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		uint32_t n;

		if (!strcmp(k, "$search")) {
			if (!BSON_ITER_HOLDS_UTF8(&it)) {
				rc = dfs_err_set(err, DFS_EINVAL, "$search needs a String");
				goto done;
			}
			const char *str = bson_iter_utf8(&it, &n);

			free(t->search);
			t->search = dup_n(str, n);
		} else if (!strcmp(k, "$language")) {
			if (!BSON_ITER_HOLDS_UTF8(&it)) {
				rc = dfs_err_set(err, DFS_EINVAL, "$language needs a String");
				goto done;
			}
			const char *str = bson_iter_utf8(&it, &n);

			free(t->language);
			t->language = dup_n(str, n);
			if (store_text_language(t->language) < 0) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "unsupported language: \"%s\" for $language",
						 t->language);
				goto done;
			}
		} else if (!strcmp(k, "$caseSensitive") || !strcmp(k, "$diacriticSensitive")) {
			if (!BSON_ITER_HOLDS_BOOL(&it)) {
				rc = dfs_err_set(err, DFS_EINVAL, "%s needs a boolean", k);
				goto done;
			}
			if (k[1] == 'c')
				t->case_sensitive = bson_iter_bool(&it);
			else
				t->diacritic_sensitive = bson_iter_bool(&it);
		} else {
			rc = dfs_err_set(err, DFS_EINVAL, "extra fields in $text: '%s'", k);
			goto done;
		}
	}
	if (!t->search)
		rc = dfs_err_set(err, DFS_EINVAL, "$search required");
done:
	if (rc)
		query__text_free(t);
	else
		*out = t;
	return rc;
}

static unsigned query_flags(const struct query__text *t)
{
	return (t->case_sensitive ? STORE_TEXT_CASE : 0) |
	       (t->diacritic_sensitive ? STORE_TEXT_DIACRITIC : 0);
}

static void add_term_cb(void *ctx, const char *term, size_t n)
{
	strs_add(ctx, term, n);
}

/* _addTerms: the tokens of s into the positive or negated set (and the scan terms). */
static void add_terms(struct query__text *t, const char *s, size_t n, bool negated)
{
	store_text_tokens(t->lang, query_flags(t), s, n, add_term_cb,
			  negated ? &t->negated : &t->terms);
	if (!negated)
		store_text_tokens(t->lang, 0, s, n, add_term_cb, &t->scan);
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int query__text_prepare(struct query__text *t, const struct store_index *ix, struct dfs_err *err)
{
	const char *q = t->search;
	size_t i = 0, len = strlen(q), quote = 0;
	bool in_neg = false, in_phrase = false, prev_space = true;

	strs_release(&t->terms);
	strs_release(&t->negated);
	strs_release(&t->scan);
	strs_release(&t->phrases);
	strs_release(&t->negphrases);
	if (!ix->text)
		return dfs_err_set(err, DFS_EINVAL, "text index required for $text query");
	t->lang = t->language ? store_text_language(t->language) : ix->text->lang;
	if (t->lang < 0)
		return dfs_err_set(err, DFS_EINVAL, "unsupported language: \"%s\" for $language",
				   t->language);
	while (i < len) {
		char c = q[i];

		if (is_space(c)) {
			prev_space = true;
			i++;
			continue;
		}
		if (c == '-') {
			if (!in_phrase && prev_space)
				in_neg = true;
			prev_space = false;
			i++;
			continue;
		}
		if (c == '"') {
			if (in_phrase) {
				const char *p = q + quote + 1;
				size_t pl = i - quote - 1;

				strs_add(in_neg ? &t->negphrases : &t->phrases, p, pl);
				in_neg = false;
				in_phrase = false;
			} else {
				in_phrase = true;
				quote = i;
			}
			prev_space = false;
			i++;
			continue;
		}
		{
			size_t start = i;

			while (i < len && !is_space(q[i]) && q[i] != '-' && q[i] != '"')
				i++;
			if (!(in_phrase && in_neg))
				add_terms(t, q + start, i - start, in_neg);
			if (in_neg && !in_phrase)
				in_neg = false;
			prev_space = false;
		}
	}
	strs_set(&t->terms);
	strs_set(&t->negated);
	strs_set(&t->scan);
	t->prepared = true;
	return 0;
}

size_t query__text_nscan(const struct query__text *t)
{
	return t->scan.n;
}

const char *query__text_scan_term(const struct query__text *t, size_t i)
{
	return t->scan.s[i];
}

/* ---- TEXT_MATCH ------------------------------------------------------------------------ */

struct mctx {
	const struct query__text *t;
	bool want_pos;	    /* look for a positive term (the sensitive forms) */
	bool pos, neg;	    /* found a positive / a negated term */
	bool *phrase_found; /* per positive phrase */
	bool negphrase;	    /* found a negated phrase */
	struct dfs_buf fold, pfold;
};

static void match_token(void *ctx, const char *term, size_t n)
{
	struct mctx *m = ctx;

	if (m->want_pos && !m->pos && strs_has(&m->t->terms, term, n))
		m->pos = true;
	if (!m->neg && strs_has(&m->t->negated, term, n))
		m->neg = true;
}

static bool contains(struct mctx *m, const char *phrase)
{
	dfs_buf_reset(&m->pfold);
	store_text_fold(phrase, strlen(phrase), query_flags(m->t), &m->pfold);
	dfs_buf_putc(&m->pfold, '\0');
	return strstr(m->fold.data, m->pfold.data) != NULL;
}

static int match_string(void *ctx, const char *s, size_t len, double weight, int lang)
{
	struct mctx *m = ctx;

	(void)weight;
	if (m->want_pos || m->t->negated.n)
		store_text_tokens(lang, query_flags(m->t), s, len, match_token, m);
	if (m->t->phrases.n || m->t->negphrases.n) {
		dfs_buf_reset(&m->fold);
		store_text_fold(s, len, query_flags(m->t), &m->fold);
		dfs_buf_putc(&m->fold, '\0');
		for (size_t i = 0; i < m->t->phrases.n; i++)
			if (!m->phrase_found[i] && contains(m, m->t->phrases.s[i]))
				m->phrase_found[i] = true;
		for (size_t i = 0; i < m->t->negphrases.n && !m->negphrase; i++)
			if (contains(m, m->t->negphrases.s[i]))
				m->negphrase = true;
	}
	return m->neg || m->negphrase; /* nothing more to learn */
}

bool query__text_match(const struct query__text *t, const struct store_index *ix, const bson_t *doc)
{
	struct mctx m = {.t = t, .want_pos = t->case_sensitive || t->diacritic_sensitive};
	struct dfs_err err = {0};
	bool ok;

	if (!t->prepared)
		return false;
	m.phrase_found = calloc(t->phrases.n + 1, sizeof(bool));
	if (!m.phrase_found)
		abort();
	dfs_buf_init(&m.fold);
	dfs_buf_init(&m.pfold);
	store_text_strings(ix, doc, match_string, &m, &err);
	ok = !m.neg && !m.negphrase && (!m.want_pos || m.pos);
	for (size_t i = 0; ok && i < t->phrases.n; i++)
		ok = m.phrase_found[i];
	free(m.phrase_found);
	dfs_buf_release(&m.fold);
	dfs_buf_release(&m.pfold);
	return ok;
}

/* ---- explain --------------------------------------------------------------------------- */

void query__text_describe(const struct query__text *t, bson_t *doc)
{
	bson_t sub;

	bson_append_document_begin(doc, "$text", 5, &sub);
	BSON_APPEND_UTF8(&sub, "$search", t->search);
	BSON_APPEND_UTF8(&sub, "$language",
			 t->language   ? t->language
			 : t->prepared ? store_text_language_name(t->lang)
				       : "english");
	BSON_APPEND_BOOL(&sub, "$caseSensitive", t->case_sensitive);
	BSON_APPEND_BOOL(&sub, "$diacriticSensitive", t->diacritic_sensitive);
	bson_append_document_end(doc, &sub);
}

static void append_strs(bson_t *d, const char *key, const struct strs *a)
{
	bson_t arr;
	char num[24];

	bson_append_array_begin(d, key, -1, &arr);
	for (size_t i = 0; i < a->n; i++) {
		snprintf(num, sizeof(num), "%zu", i);
		BSON_APPEND_UTF8(&arr, num, a->s[i]);
	}
	bson_append_array_end(d, &arr);
}

void query__text_parsed(const struct query__text *t, bson_t *out, const char *key)
{
	bson_t d;

	bson_append_document_begin(out, key, -1, &d);
	append_strs(&d, "terms", &t->terms);
	append_strs(&d, "negatedTerms", &t->negated);
	append_strs(&d, "phrases", &t->phrases);
	append_strs(&d, "negatedPhrases", &t->negphrases);
	bson_append_document_end(out, &d);
}
