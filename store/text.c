/*
 * text.c - the text half of text indexes: languages, the tokenizer (Unicode delimiter classes,
 * case folding, diacritic stripping, stop words, Snowball stems through libstemmer), the
 * strings a text index reads from a document (weighted fields or "$**", language override),
 * MongoDB's per-document term scores, and the text options of an index spec (weights,
 * default_language, language_override, textIndexVersion) with the spec as MongoDB stores it.
 * It does not write index entries (index.c lays them out from store_text_score) nor parse
 * $search (query/text.c).
 *
 * Design notes
 * 1. The delimiters are the code points of the Unicode PropList classes White_Space, Dash,
 *    Hyphen, Quotation_Mark, Terminal_Punctuation and Pattern_Syntax that MongoDB's v3
 *    tokenizer splits on, kept as ranges (the whole BMP set for ASCII and Latin-1, the
 *    common general punctuation, dashes, quotes, arrows and CJK/fullwidth punctuation).
 * 2. Folding is simple case folding for Latin (Basic, Latin-1, Extended-A, most of
 *    Extended-B and Extended Additional), Greek, Cyrillic, Armenian and fullwidth Latin;
 *    Turkish folds I to dotless i. Diacritic stripping drops the combining marks U+0300..036F
 *    and maps the precomposed letters of Latin-1 and Latin Extended-A, Greek with tonos or
 *    dialytika and Cyrillic short i / io to their base letters.
 * 3. A word is a maximal run of non-delimiters. Its stop-word test uses the word case folded
 *    with its diacritics kept, whatever the flags, as MongoDB's tokenizer does: French
 *    "être" is a stop word, "etre" is not. The term is the word folded as the flags say,
 *    stemmed with Snowball (identity for "none"), cut to STORE_TEXT_MAX_TERM bytes.
 * 4. Stemmers are not thread-safe: each language has a pool of them under one mutex; a
 *    tokenizing call takes one and gives it back. The pools live until the process ends.
 * 5. Stop words are data (text_stop.c), case folded (diacritics kept) and sorted once at
 *    first use.
 */
#include "store_int.h"

#include <libstemmer.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- languages ------------------------------------------------------------------------ */

static const struct lang {
	const char *name, *code, *algo;
} langs[] = {
	{"none", "none", NULL},
	{"danish", "da", "danish"},
	{"dutch", "nl", "dutch"},
	{"english", "en", "english"},
	{"finnish", "fi", "finnish"},
	{"french", "fr", "french"},
	{"german", "de", "german"},
	{"hungarian", "hu", "hungarian"},
	{"italian", "it", "italian"},
	{"norwegian", "nb", "norwegian"},
	{"portuguese", "pt", "portuguese"},
	{"romanian", "ro", "romanian"},
	{"russian", "ru", "russian"},
	{"spanish", "es", "spanish"},
	{"swedish", "sv", "swedish"},
	{"turkish", "tr", "turkish"},
};
#define NLANGS ((int)(sizeof(langs) / sizeof(langs[0])))
#define LANG_TURKISH 15

int store_text_language(const char *name)
{
	for (int i = 0; i < NLANGS; i++)
		if (strcmp(name, langs[i].name) == 0 || strcmp(name, langs[i].code) == 0)
			return i;
	return -1;
}

const char *store_text_language_name(int lang)
{
	return lang >= 0 && lang < NLANGS ? langs[lang].name : "none";
}

/* ---- stemmer pools (note 4) ----------------------------------------------------------- */

#define POOL_MAX 16

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sb_stemmer *pool[NLANGS][POOL_MAX];
static int pool_n[NLANGS];

static struct sb_stemmer *stemmer_take(int lang)
{
	struct sb_stemmer *s = NULL;

	if (!langs[lang].algo)
		return NULL;
	pthread_mutex_lock(&pool_mu);
	if (pool_n[lang] > 0)
		s = pool[lang][--pool_n[lang]];
	pthread_mutex_unlock(&pool_mu);
	if (!s)
		s = sb_stemmer_new(langs[lang].algo, "UTF_8");
	return s;
}

static void stemmer_give(int lang, struct sb_stemmer *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&pool_mu);
	if (pool_n[lang] < POOL_MAX) {
		pool[lang][pool_n[lang]++] = s;
		s = NULL;
	}
	pthread_mutex_unlock(&pool_mu);
	if (s)
		sb_stemmer_delete(s);
}

/* ---- code points (notes 1, 2) --------------------------------------------------------- */

/* Decodes one UTF-8 code point at s (n bytes left) into *cp; returns its length (an invalid
 * byte is itself, as U+FFFD, length 1). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	uint32_t c = s[0];
	size_t len;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if ((c & 0xE0) == 0xC0) {
		len = 2;
		c &= 0x1F;
	} else if ((c & 0xF0) == 0xE0) {
		len = 3;
		c &= 0x0F;
	} else if ((c & 0xF8) == 0xF0) {
		len = 4;
		c &= 0x07;
	} else {
		*cp = 0xFFFD;
		return 1;
	}
	if (len > n) {
		*cp = 0xFFFD;
		return 1;
	}
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80) {
			*cp = 0xFFFD;
			return 1;
		}
		c = c << 6 | (s[i] & 0x3F);
	}
	*cp = c;
	return len;
}

static void utf8_put(struct dfs_buf *b, uint32_t c)
{
	if (c < 0x80) {
		dfs_buf_putc(b, (char)c);
	} else if (c < 0x800) {
		dfs_buf_putc(b, (char)(0xC0 | c >> 6));
		dfs_buf_putc(b, (char)(0x80 | (c & 0x3F)));
	} else if (c < 0x10000) {
		dfs_buf_putc(b, (char)(0xE0 | c >> 12));
		dfs_buf_putc(b, (char)(0x80 | (c >> 6 & 0x3F)));
		dfs_buf_putc(b, (char)(0x80 | (c & 0x3F)));
	} else {
		dfs_buf_putc(b, (char)(0xF0 | c >> 18));
		dfs_buf_putc(b, (char)(0x80 | (c >> 12 & 0x3F)));
		dfs_buf_putc(b, (char)(0x80 | (c >> 6 & 0x3F)));
		dfs_buf_putc(b, (char)(0x80 | (c & 0x3F)));
	}
}

static const uint32_t delim_ranges[][2] = {
	{0x0009, 0x000D}, {0x0020, 0x002F}, {0x003A, 0x0040}, {0x005B, 0x005E}, {0x0060, 0x0060},
	{0x007B, 0x007E}, {0x0085, 0x0085}, {0x00A0, 0x00A7}, {0x00A9, 0x00A9}, {0x00AB, 0x00AE},
	{0x00B0, 0x00B1}, {0x00B6, 0x00B6}, {0x00BB, 0x00BB}, {0x00BF, 0x00BF}, {0x00D7, 0x00D7},
	{0x00F7, 0x00F7}, {0x037E, 0x037E}, {0x0387, 0x0387}, {0x0589, 0x058A}, {0x05BE, 0x05BE},
	{0x05C3, 0x05C3}, {0x060C, 0x060C}, {0x061B, 0x061B}, {0x061F, 0x061F}, {0x06D4, 0x06D4},
	{0x0964, 0x0965}, {0x0E5A, 0x0E5B}, {0x1361, 0x1368}, {0x1400, 0x1400}, {0x166D, 0x166E},
	{0x1680, 0x1680}, {0x1802, 0x1806}, {0x1808, 0x1809}, {0x2000, 0x200A}, {0x2010, 0x2029},
	{0x202F, 0x203E}, {0x2041, 0x2053}, {0x2055, 0x205F}, {0x207B, 0x207B}, {0x208B, 0x208B},
	{0x2190, 0x245F}, {0x2500, 0x2775}, {0x2794, 0x2BFF}, {0x2E00, 0x2E7F}, {0x3000, 0x3003},
	{0x3008, 0x3020}, {0x3030, 0x3030}, {0x30A0, 0x30A0}, {0x30FB, 0x30FB}, {0xFD3E, 0xFD3F},
	{0xFE31, 0xFE32}, {0xFE41, 0xFE46}, {0xFE50, 0xFE52}, {0xFE54, 0xFE58}, {0xFE63, 0xFE63},
	{0xFF01, 0xFF02}, {0xFF07, 0xFF07}, {0xFF0C, 0xFF0E}, {0xFF1A, 0xFF1B}, {0xFF1F, 0xFF1F},
	{0xFF61, 0xFF65},
};

static bool is_delim(uint32_t c)
{
	size_t lo = 0, hi = sizeof(delim_ranges) / sizeof(delim_ranges[0]);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (c < delim_ranges[mid][0])
			hi = mid;
		else if (c > delim_ranges[mid][1])
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

static uint32_t fold_cp(uint32_t c, bool turkish)
{
	if (c < 0x80)
		return (turkish && c == 'I') ? 0x131 : (c >= 'A' && c <= 'Z') ? c + 32 : c;
	if (c == 0xB5)
		return 0x3BC;
	if (c >= 0xC0 && c <= 0xDE && c != 0xD7)
		return c + 32;
	if (c < 0x100)
		return c;
	if (c == 0x130)
		return turkish ? 'i' : c;
	if ((c <= 0x12F || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) && !(c & 1))
		return c + 1;
	if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) && (c & 1))
		return c + 1;
	if (c == 0x178)
		return 0xFF;
	if (c == 0x17F)
		return 's';
	if (c == 0x1C4 || c == 0x1C5)
		return 0x1C6;
	if (c == 0x1C7 || c == 0x1C8)
		return 0x1C9;
	if (c == 0x1CA || c == 0x1CB)
		return 0x1CC;
	if (c == 0x1F1 || c == 0x1F2)
		return 0x1F3;
	if (c >= 0x1CD && c <= 0x1DC && (c & 1))
		return c + 1;
	if (((c >= 0x1DE && c <= 0x1EF) || (c >= 0x1F8 && c <= 0x21F) ||
	     (c >= 0x222 && c <= 0x233)) &&
	    !(c & 1))
		return c + 1;
	if (c == 0x386)
		return 0x3AC;
	if (c >= 0x388 && c <= 0x38A)
		return c + 37;
	if (c == 0x38C)
		return 0x3CC;
	if (c == 0x38E || c == 0x38F)
		return c + 63;
	if ((c >= 0x391 && c <= 0x3A1) || (c >= 0x3A3 && c <= 0x3AB))
		return c + 32;
	if (c == 0x3C2)
		return 0x3C3;
	if (c >= 0x3D8 && c <= 0x3EF && !(c & 1))
		return c + 1;
	if (c >= 0x400 && c <= 0x40F)
		return c + 80;
	if (c >= 0x410 && c <= 0x42F)
		return c + 32;
	if (((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) ||
	     (c >= 0x4D0 && c <= 0x52F)) &&
	    !(c & 1))
		return c + 1;
	if (c == 0x4C0)
		return 0x4CF;
	if (c >= 0x4C1 && c <= 0x4CE && (c & 1))
		return c + 1;
	if (c >= 0x531 && c <= 0x556)
		return c + 48;
	if (((c >= 0x1E00 && c <= 0x1E95) || (c >= 0x1EA0 && c <= 0x1EFF)) && !(c & 1))
		return c + 1;
	if (c == 0x1E9E)
		return 0xDF;
	if (c >= 0xFF21 && c <= 0xFF3A)
		return c + 32;
	return c;
}

/* Base letters of U+00C0..U+017F ('.': none). */
static const char latin_base[] =
	"AAAAAA.CEEEEIIII.NOOOOO..UUUUY..aaaaaa.ceeeeiiii.nooooo..uuuuy.y"
	"AaAaAaCcCcCcCcDd..EeEeEeEeEeGgGgGgGgHh..IiIiIiIiI...JjKk.LlLlLl....NnNnNn..."
	"OoOoOo..RrRrRrSsSsSsSsTtTt..UuUuUuUuUuUuWwYyYZzZzZz.";

/* The code point without its diacritic: 0 to drop it (a combining mark). */
static uint32_t strip_cp(uint32_t c)
{
	static const uint16_t greek[][2] = {
		{0x386, 0x391}, {0x388, 0x395}, {0x389, 0x397}, {0x38A, 0x399}, {0x38C, 0x39F},
		{0x38E, 0x3A5}, {0x38F, 0x3A9}, {0x390, 0x3B9}, {0x3AA, 0x399}, {0x3AB, 0x3A5},
		{0x3AC, 0x3B1}, {0x3AD, 0x3B5}, {0x3AE, 0x3B7}, {0x3AF, 0x3B9}, {0x3B0, 0x3C5},
		{0x3CA, 0x3B9}, {0x3CB, 0x3C5}, {0x3CC, 0x3BF}, {0x3CD, 0x3C5}, {0x3CE, 0x3C9},
		{0x401, 0x415}, {0x419, 0x418}, {0x439, 0x438}, {0x451, 0x435},
	};

	if (c < 0xC0)
		return c;
	if (c <= 0x17F) {
		char b = latin_base[c - 0xC0];

		return b == '.' ? c : (uint32_t)(unsigned char)b;
	}
	if (c >= 0x300 && c <= 0x36F)
		return 0;
	for (size_t i = 0; i < sizeof(greek) / sizeof(greek[0]); i++)
		if (greek[i][0] == c)
			return greek[i][1];
	return c;
}

static void fold_into(const char *s, size_t len, unsigned flags, bool turkish, struct dfs_buf *out)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		uint32_t c;
		size_t n = utf8_next(p + i, len - i, &c);

		if (c == 0xFFFD && n == 1 && p[i] >= 0x80) { /* an invalid byte: as is */
			dfs_buf_putc(out, (char)p[i]);
			i++;
			continue;
		}
		i += n;
		if (!(flags & STORE_TEXT_DIACRITIC) && !(c = strip_cp(c)))
			continue;
		if (!(flags & STORE_TEXT_CASE))
			c = fold_cp(c, turkish);
		utf8_put(out, c);
	}
}

void store_text_fold(const char *s, size_t len, unsigned flags, struct dfs_buf *out)
{
	fold_into(s, len, flags, false, out);
}

/* ---- stop words (note 5) -------------------------------------------------------------- */

static pthread_once_t stop_once = PTHREAD_ONCE_INIT;
static char **stop_sorted[NLANGS]; /* folded words, sorted */
static size_t stop_n[NLANGS];

static int str_qsort(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void stop_init(void)
{
	for (int l = 1; l < NLANGS; l++) {
		const char *list = store__text_stop_words(langs[l].name);
		const char *p = list;
		size_t n = 0, cap = 0;
		char **w = NULL;

		while (p && *p) {
			const char *e = p;
			struct dfs_buf b;

			while (*e && *e != ' ' && *e != '\n')
				e++;
			if (e > p) {
				dfs_buf_init(&b);
				fold_into(p, (size_t)(e - p), STORE_TEXT_DIACRITIC,
					  l == LANG_TURKISH, &b);
				if (n == cap) {
					cap = cap ? 2 * cap : 256;
					w = realloc(w, cap * sizeof(*w));
					if (!w)
						abort();
				}
				w[n++] = b.data; /* takes the buffer */
			}
			p = *e ? e + 1 : e;
		}
		if (n)
			qsort(w, n, sizeof(*w), str_qsort);
		stop_sorted[l] = w;
		stop_n[l] = n;
	}
}

static bool is_stop(int lang, const char *w)
{
	size_t lo = 0, hi;

	pthread_once(&stop_once, stop_init);
	hi = stop_n[lang];
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(w, stop_sorted[lang][mid]);

		if (!c)
			return true;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return false;
}

/* ---- the tokenizer (note 3) ----------------------------------------------------------- */

static size_t cut_term(const char *s, size_t n)
{
	if (n <= STORE_TEXT_MAX_TERM)
		return n;
	n = STORE_TEXT_MAX_TERM;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

void store_text_tokens(int lang, unsigned flags, const char *s, size_t len,
		       void (*cb)(void *ctx, const char *term, size_t tlen), void *ctx)
{
	const unsigned char *p = (const unsigned char *)s;
	struct sb_stemmer *st = NULL;
	struct dfs_buf word, key;
	bool turkish = lang == LANG_TURKISH;
	size_t i = 0;

	if (lang < 0 || lang >= NLANGS)
		lang = 0;
	dfs_buf_init(&word);
	dfs_buf_init(&key);
	while (i < len) {
		size_t start, end;
		uint32_t c;
		size_t n = utf8_next(p + i, len - i, &c);

		if (is_delim(c)) {
			i += n;
			continue;
		}
		start = i;
		while (i < len) {
			n = utf8_next(p + i, len - i, &c);
			if (is_delim(c))
				break;
			i += n;
		}
		end = i;
		dfs_buf_reset(&word);
		fold_into(s + start, end - start, flags, turkish, &word);
		if (!word.len)
			continue;
		if (lang != 0 && !(flags & STORE_TEXT_KEEP_STOP)) {
			/* the key is case folded with diacritics kept (note 3): the word itself
			 * when the flags folded it so */
			const char *k = word.data;

			if ((flags & (STORE_TEXT_CASE | STORE_TEXT_DIACRITIC)) !=
			    STORE_TEXT_DIACRITIC) {
				dfs_buf_reset(&key);
				fold_into(s + start, end - start, STORE_TEXT_DIACRITIC, turkish,
					  &key);
				k = key.data;
			}
			if (is_stop(lang, k))
				continue;
		}
		if (lang != 0 && !st)
			st = stemmer_take(lang);
		if (st) {
			const sb_symbol *r =
				sb_stemmer_stem(st, (const sb_symbol *)word.data, (int)word.len);

			if (r) {
				int rl = sb_stemmer_length(st);

				cb(ctx, (const char *)r, cut_term((const char *)r, (size_t)rl));
				continue;
			}
		}
		cb(ctx, word.data, cut_term(word.data, word.len));
	}
	stemmer_give(lang, st);
	dfs_buf_release(&word);
	dfs_buf_release(&key);
}

/* ---- the strings of a document -------------------------------------------------------- */

struct walk {
	const struct store_text_spec *ts;
	int (*cb)(void *ctx, const char *s, size_t len, double weight, int lang);
	void *ctx;
	struct dfs_err *err;
};

/* The weight of path, or 0 when it is not indexed. */
static double weight_of(const struct store_text_spec *ts, const char *path)
{
	size_t lo = 0, hi = (size_t)ts->nf;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(path, ts->f[mid].path);

		if (!c)
			return ts->f[mid].weight;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return ts->wildcard ? 1 : 0;
}

/* Some weighted path goes on below path. */
static bool below(const struct store_text_spec *ts, const char *path, size_t plen)
{
	if (ts->wildcard)
		return true;
	for (int i = 0; i < ts->nf; i++)
		if (strncmp(ts->f[i].path, path, plen) == 0 && ts->f[i].path[plen] == '.')
			return true;
	return false;
}

static int walk_doc(struct walk *w, const bson_t *d, char *path, size_t plen, int lang);

/* One value at path (an element of a document or an array). */
static int walk_value(struct walk *w, bson_iter_t *it, char *path, size_t plen, int lang)
{
	bson_t sub;
	const uint8_t *data;
	uint32_t len;

	if (BSON_ITER_HOLDS_UTF8(it)) {
		double wt = weight_of(w->ts, path);
		const char *s = bson_iter_utf8(it, &len);

		return wt > 0 ? w->cb(w->ctx, s, len, wt, lang) : 0;
	}
	if (BSON_ITER_HOLDS_DOCUMENT(it)) {
		if (!below(w->ts, path, plen))
			return 0;
		bson_iter_document(it, &len, &data);
		if (!bson_init_static(&sub, data, len))
			return 0;
		return walk_doc(w, &sub, path, plen, lang);
	}
	if (BSON_ITER_HOLDS_ARRAY(it)) {
		bson_iter_t el;
		int rc;

		if (!bson_iter_recurse(it, &el))
			return 0;
		while (bson_iter_next(&el))
			if ((rc = walk_value(w, &el, path, plen, lang)))
				return rc;
	}
	return 0;
}

static int walk_doc(struct walk *w, const bson_t *d, char *path, size_t plen, int lang)
{
	bson_iter_t it;
	int rc;

	/* The language override applies to this document and below. */
	if (bson_iter_init_find(&it, d, w->ts->override)) {
		const char *l;

		if (!BSON_ITER_HOLDS_UTF8(&it))
			return dfs_err_set(w->err, DFS_EINVAL,
					   "language override field '%s' must be a string",
					   w->ts->override);
		l = bson_iter_utf8(&it, NULL);
		if ((lang = store_text_language(l)) < 0)
			return dfs_err_set(w->err, DFS_EINVAL, "language override unsupported: %s",
					   l);
	}
	if (!bson_iter_init(&it, d))
		return 0;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		size_t kl = strlen(k), np = plen ? plen + 1 + kl : kl;

		if (np >= 1024)
			continue; /* deeper than any indexed path */
		if (plen)
			path[plen] = '.';
		memcpy(path + (plen ? plen + 1 : 0), k, kl + 1);
		rc = walk_value(w, &it, path, np, lang);
		path[plen] = '\0';
		if (rc)
			return rc;
	}
	return 0;
}

int store_text_strings(const struct store_index *ix, const bson_t *doc,
		       int (*cb)(void *ctx, const char *s, size_t len, double weight, int lang),
		       void *ctx, struct dfs_err *err)
{
	struct walk w = {ix->text, cb, ctx, err};
	char path[1024] = "";

	if (!ix->text)
		return dfs_err_set(err, DFS_EINVAL, "index '%s' is not a text index", ix->name);
	return walk_doc(&w, doc, path, 0, ix->text->lang);
}

/* ---- scores (ops.md 7.5) -------------------------------------------------------------- */

void store_text_terms_init(struct store_text_terms *t)
{
	memset(t, 0, sizeof(*t));
	dfs_buf_init(&t->buf);
}

void store_text_terms_release(struct store_text_terms *t)
{
	dfs_buf_release(&t->buf);
	free(t->off);
	free(t->score);
	memset(t, 0, sizeof(*t));
}

static void terms_add(struct store_text_terms *t, const char *s, size_t n, double score)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 32;
		t->off = realloc(t->off, t->cap * sizeof(*t->off));
		t->score = realloc(t->score, t->cap * sizeof(*t->score));
		if (!t->off || !t->score)
			abort();
	}
	t->off[t->n] = t->buf.len;
	t->score[t->n] = score;
	t->n++;
	dfs_buf_append(&t->buf, s, n);
	dfs_buf_putc(&t->buf, '\0');
}

struct score_ctx {
	struct store_text_terms all; /* every (term, score) of the document, unmerged */
	struct store_text_terms one; /* the tokens of one string */
};

static void token_cb(void *ctx, const char *term, size_t n)
{
	terms_add(ctx, term, n, 0);
}

static int idx_cmp(const void *a, const void *b, void *ctx)
{
	const struct store_text_terms *t = ctx;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int c = strcmp(t->buf.data + t->off[x], t->buf.data + t->off[y]);

	return c ? c : (x < y ? -1 : x > y);
}

/* Positions of the terms of t in term order (ties in insertion order). Owned (free). */
static size_t *sorted_idx(const struct store_text_terms *t)
{
	size_t *idx = malloc((t->n ? t->n : 1) * sizeof(*idx));

	if (!idx)
		abort();
	for (size_t i = 0; i < t->n; i++)
		idx[i] = i;
	qsort_r(idx, t->n, sizeof(*idx), idx_cmp, (void *)t);
	return idx;
}

static bool ascii_equal_ci(const char *a, size_t an, const char *b, size_t bn)
{
	if (an != bn)
		return false;
	for (size_t i = 0; i < an; i++) {
		unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];

		if (x >= 'A' && x <= 'Z')
			x += 32;
		if (y >= 'A' && y <= 'Z')
			y += 32;
		if (x != y)
			return false;
	}
	return true;
}

static int score_string(void *ctx, const char *s, size_t len, double weight, int lang)
{
	struct score_ctx *sc = ctx;
	struct store_text_terms *one = &sc->one;
	size_t *idx;

	dfs_buf_reset(&one->buf);
	one->n = 0;
	store_text_tokens(lang, 0, s, len, token_cb, one);
	if (!one->n)
		return 0;
	idx = sorted_idx(one);
	for (size_t i = 0; i < one->n;) {
		const char *term = one->buf.data + one->off[idx[i]];
		size_t j = i, count;
		double freq = 0, exp = 1, coeff, adj;

		while (j < one->n && !strcmp(one->buf.data + one->off[idx[j]], term)) {
			freq += 1 / exp;
			exp *= 2;
			j++;
		}
		count = j - i;
		coeff = 0.5 * (double)count / (double)one->n + 0.5;
		adj = ascii_equal_ci(s, len, term, strlen(term)) ? 1.1 : 1;
		terms_add(&sc->all, term, strlen(term), weight * freq * coeff * adj);
		i = j;
	}
	free(idx);
	return 0;
}

int store_text_score(const struct store_index *ix, const bson_t *doc, struct store_text_terms *out,
		     struct dfs_err *err)
{
	struct score_ctx sc;
	size_t *idx = NULL;
	int rc;

	dfs_buf_reset(&out->buf);
	out->n = 0;
	store_text_terms_init(&sc.all);
	store_text_terms_init(&sc.one);
	if ((rc = store_text_strings(ix, doc, score_string, &sc, err)))
		goto done;
	idx = sorted_idx(&sc.all);
	for (size_t i = 0; i < sc.all.n;) {
		const char *term = sc.all.buf.data + sc.all.off[idx[i]];
		double score = 0;
		size_t j = i;

		/* summed in document order, as MongoDB's map adds them */
		while (j < sc.all.n && !strcmp(sc.all.buf.data + sc.all.off[idx[j]], term))
			score += sc.all.score[idx[j++]];
		terms_add(out, term, strlen(term), score);
		i = j;
	}
done:
	free(idx);
	store_text_terms_release(&sc.all);
	store_text_terms_release(&sc.one);
	return rc;
}

/* ---- the text options of an index spec ------------------------------------------------ */

void store__text_spec_free(struct store_text_spec *ts)
{
	if (!ts)
		return;
	free(ts->f);
	free(ts);
}

static int field_qsort(const void *a, const void *b)
{
	return strcmp(((const struct store_text_field *)a)->path,
		      ((const struct store_text_field *)b)->path);
}

static struct store_text_field *field_get(struct store_text_spec *ts, const char *path,
					  struct dfs_err *err)
{
	if (strlen(path) >= sizeof(ts->f[0].path)) {
		dfs_err_set(err, DFS_EINVAL, "text index field '%.40s...' is too long", path);
		return NULL;
	}
	for (int i = 0; i < ts->nf; i++)
		if (!strcmp(ts->f[i].path, path))
			return &ts->f[i];
	ts->f = realloc(ts->f, (size_t)(ts->nf + 1) * sizeof(*ts->f));
	if (!ts->f)
		abort();
	snprintf(ts->f[ts->nf].path, sizeof(ts->f[0].path), "%s", path);
	ts->f[ts->nf].weight = 1;
	return &ts->f[ts->nf++];
}

static bool number_of(const bson_iter_t *it, double *d)
{
	if (!BSON_ITER_HOLDS_NUMBER(it))
		return false;
	*d = bson_iter_as_double(it);
	return true;
}

int store__text_spec_parse(const bson_t *spec, struct store_index *ix, bool strict,
			   struct dfs_err *err)
{
	struct store_text_spec *ts = calloc(1, sizeof(*ts));
	bson_iter_t it, k;
	bool seen_text = false, ended = false;
	int nplain = 0, rc = 0;

	if (!ts)
		abort();
	ts->lang = store_text_language("english");
	snprintf(ts->override, sizeof(ts->override), "language");
	if (!bson_iter_init_find(&it, spec, "key") || !bson_iter_recurse(&it, &k)) {
		rc = dfs_err_set(err, DFS_EINVAL, "index 'key' must be a document");
		goto done;
	}
	while (bson_iter_next(&k)) {
		const char *p = bson_iter_key(&k);
		bool text = BSON_ITER_HOLDS_UTF8(&k) && !strcmp(bson_iter_utf8(&k, NULL), "text");

		if (!strcmp(p, "_ftsx"))
			continue; /* the second half of the stored "_fts" entry */
		if (!text) {
			ended = seen_text;
			nplain++;
			continue;
		}
		if (ended) {
			rc = dfs_err_set(err, DFS_EINVAL,
					 "text index fields must be next to each other in the key "
					 "pattern (field '%s')",
					 p);
			goto done;
		}
		if (!seen_text)
			ts->pos = nplain;
		seen_text = true;
		if (!strcmp(p, "_fts"))
			continue; /* the stored form: the fields are in "weights" */
		if (strlen(ts->keynames) + strlen(p) + 7 < sizeof(ts->keynames))
			snprintf(ts->keynames + strlen(ts->keynames),
				 sizeof(ts->keynames) - strlen(ts->keynames), "%s%s_text",
				 ts->keynames[0] ? "_" : "", p);
		if (!strcmp(p, "$**"))
			ts->wildcard = true;
		else if (!field_get(ts, p, err)) {
			rc = DFS_EINVAL;
			goto done;
		}
	}
	bson_iter_init(&it, spec);
	while (bson_iter_next(&it)) {
		const char *o = bson_iter_key(&it);
		double d;

		if (!strcmp(o, "weights")) {
			bson_iter_t wt;

			if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &wt)) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "text index weights must be a "
						 "document");
				goto done;
			}
			while (bson_iter_next(&wt)) {
				const char *p = bson_iter_key(&wt);
				struct store_text_field *f;

				if (!number_of(&wt, &d)) {
					rc = dfs_err_set(err, DFS_EINVAL,
							 "weight for text index needs numeric type "
							 "(field '%s')",
							 p);
					goto done;
				}
				if (!(d > 0 && d < 100000)) {
					rc = dfs_err_set(
						err, DFS_EINVAL,
						"text index weight must be in the exclusive "
						"interval (0,100000) but found: %g",
						d);
					goto done;
				}
				if (!strcmp(p, "$**")) {
					ts->wildcard = true;
					continue;
				}
				if (!(f = field_get(ts, p, err))) {
					rc = DFS_EINVAL;
					goto done;
				}
				f->weight = d;
			}
		} else if (!strcmp(o, "default_language")) {
			if (!BSON_ITER_HOLDS_UTF8(&it) ||
			    (ts->lang = store_text_language(bson_iter_utf8(&it, NULL))) < 0) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "default_language: can't find language '%s'",
						 BSON_ITER_HOLDS_UTF8(&it)
							 ? bson_iter_utf8(&it, NULL)
							 : "?");
				goto done;
			}
		} else if (!strcmp(o, "language_override")) {
			const char *s = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";

			if (!*s || strlen(s) >= sizeof(ts->override) || strchr(s, '.') ||
			    s[0] == '$') {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "language_override must be a field name");
				goto done;
			}
			snprintf(ts->override, sizeof(ts->override), "%s", s);
		} else if (!strcmp(o, "textIndexVersion")) {
			if (!number_of(&it, &d) || d != 3) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "currently only textIndexVersion 3 is supported");
				goto done;
			}
		}
	}
	if (!ts->nf && !ts->wildcard) {
		rc = dfs_err_set(err, DFS_EINVAL, "a text index needs a text field");
		goto done;
	}
	if (strict && ix->unique) {
		rc = dfs_err_set(err, DFS_EINVAL, "text indexes cannot be unique");
		goto done;
	}
	if (ts->nf)
		qsort(ts->f, (size_t)ts->nf, sizeof(*ts->f), field_qsort);
	ix->sparse = true; /* always */
	ix->text = ts;
	ts = NULL;
done:
	store__text_spec_free(ts);
	return rc;
}

bson_t *store__text_stored_spec(const struct store_index *ix, const bson_t *spec, const char *name)
{
	const struct store_text_spec *ts = ix->text;
	bson_t *out = bson_new(), key, w;
	bson_iter_t it;

	bson_append_int32(out, "v", 1, 2);
	bson_append_document_begin(out, "key", 3, &key);
	for (int i = 0; i < ix->nfields; i++) {
		if (ix->field[i].dir == STORE_IX_TEXT) {
			bson_append_utf8(&key, "_fts", 4, "text", 4);
			bson_append_int32(&key, "_ftsx", 5, 1);
		} else {
			bson_append_int32(&key, ix->field[i].path, -1, ix->field[i].dir);
		}
	}
	bson_append_document_end(out, &key);
	bson_append_utf8(out, "name", 4, name, -1);
	bson_iter_init(&it, spec);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (strcmp(k, "v") && strcmp(k, "key") && strcmp(k, "name") &&
		    strcmp(k, "background") && strcmp(k, "weights") &&
		    strcmp(k, "default_language") && strcmp(k, "language_override") &&
		    strcmp(k, "textIndexVersion") && strcmp(k, "sparse"))
			bson_append_iter(out, k, -1, &it);
	}
	bson_append_document_begin(out, "weights", 7, &w);
	if (ts->wildcard)
		bson_append_int32(&w, "$**", 3, 1);
	for (int i = 0; i < ts->nf; i++) {
		if (ts->f[i].weight == (double)(int32_t)ts->f[i].weight)
			bson_append_int32(&w, ts->f[i].path, -1, (int32_t)ts->f[i].weight);
		else
			bson_append_double(&w, ts->f[i].path, -1, ts->f[i].weight);
	}
	bson_append_document_end(out, &w);
	bson_append_utf8(out, "default_language", -1, store_text_language_name(ts->lang), -1);
	bson_append_utf8(out, "language_override", -1, ts->override, -1);
	bson_append_int32(out, "textIndexVersion", -1, 3);
	return out;
}
