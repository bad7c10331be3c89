/*
 * test_text.c - unit tests of text search: the tokenizer (delimiters, folding, diacritics),
 * stop words, Snowball stems, the reading of $search (parsedTextQuery), MongoDB's scores
 * (the manual's weights example, ops.md 7.6), text index entries kept by insert, update and
 * delete and verified by check, and $text finds with textScore projection and sort. Each
 * test uses its own temporary store directory.
 */
#include "plan_int.h"
#include "store_int.h"
#include "test_problems.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];
static struct store *st;
static struct store_db *db;
static const struct store_attrs attrs = {0644, 1000, 1000, 0};

static void setup(void)
{
	struct dfs_err err = {0};

	query_init();
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-text-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "shop", true, &db, &err), 0);
}

static void teardown(void)
{
	char cmd[300];

	store_free(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static bson_t *parse(const char *text)
{
	struct dfs_err err = {0};
	bson_t *b = bson_new();

	ck_assert_msg(store_codec_parse_doc(text, strlen(text), b, &err) == 0, "%s: %s", text,
		      err.msg);
	return b;
}

/* ---- the tokenizer ---------------------------------------------------------------------- */

static void join_cb(void *ctx, const char *t, size_t n)
{
	struct dfs_buf *b = ctx;

	if (b->len)
		dfs_buf_putc(b, ' ');
	dfs_buf_append(b, t, n);
}

/* The terms of s in lang with flags, space-separated, into out (static buffer). */
static const char *toks(const char *lang, unsigned flags, const char *s)
{
	static char out[1024];
	struct dfs_buf b;

	dfs_buf_init(&b);
	store_text_tokens(store_text_language(lang), flags, s, strlen(s), join_cb, &b);
	snprintf(out, sizeof(out), "%s", b.data ? b.data : "");
	dfs_buf_release(&b);
	return out;
}

START_TEST(test_tokens_delimiters_and_folding)
{
	ck_assert_str_eq(toks("none", 0, "Hello, World!  foo-bar\tbaz.qux"),
			 "hello world foo bar baz qux");
	/* apostrophe, quotes, dashes and Unicode spaces split; '_' and digits do not */
	ck_assert_str_eq(toks("none", 0,
			      "don't \xe2\x80\x9cquoted\xe2\x80\x9d a\xe2\x80\x94"
			      "b c\xc2\xa0"
			      "d snake_case 42"),
			 "don t quoted a b c d snake_case 42");
	/* diacritics stripped and case folded: Latin-1, Latin Extended-A, Greek, Cyrillic */
	ck_assert_str_eq(toks("none", 0,
			      "Caf\xc3\xa9 \xc3\x85NGSTR\xc3\x96M \xc5\x81\xc3\xb3"
			      "d\xc5\xba"
			      " \xce\x86\xce\x9b\xce\xa6\xce\x91 \xd0\x9c\xd0\x9e\xd0\xa1"
			      "\xd0\x9a\xd0\x92\xd0\x90"),
			 "cafe angstrom \xc5\x82"
			 "odz \xce\xb1\xce\xbb\xcf\x86\xce\xb1 "
			 "\xd0\xbc\xd0\xbe\xd1\x81\xd0\xba\xd0\xb2\xd0\xb0");
	/* combining marks are dropped */
	ck_assert_str_eq(toks("none", 0, "cafe\xcc\x81"), "cafe");
	/* the sensitive forms keep case / diacritics */
	ck_assert_str_eq(toks("none", STORE_TEXT_CASE, "Caf\xc3\xa9"), "Cafe");
	ck_assert_str_eq(toks("none", STORE_TEXT_DIACRITIC, "Caf\xc3\xa9"), "caf\xc3\xa9");
}
END_TEST

START_TEST(test_tokens_stop_words_and_stems)
{
	ck_assert_str_eq(toks("english", 0, "coffee"), "coffe");
	ck_assert_str_eq(toks("english", 0, "blueberries blueberry baking shopping likes"),
			 "blueberri blueberri bake shop like");
	/* the stop words ops.md 7.6 relies on */
	ck_assert_str_eq(toks("english", 0, "Who likes chocolate ice cream for dessert?"),
			 "like chocol ice cream dessert");
	ck_assert_str_eq(toks("english", 0, "This morning I had a cup of coffee."),
			 "morn cup coffe");
	ck_assert_str_eq(toks("english", 0, "My favorite cake flavors are strawberry and coffee"),
			 "favorit cake flavor strawberri coffe");
	ck_assert_str_eq(toks("english", 0, "the an a and what"), "");
	ck_assert_str_eq(toks("english", STORE_TEXT_KEEP_STOP, "the cat"), "the cat");
	/* "none": no stems, no stop words */
	ck_assert_str_eq(toks("none", 0, "the coffee"), "the coffee");
	ck_assert_str_eq(toks("es", 0, "leche"), toks("spanish", 0, "leche"));
	ck_assert_int_eq(store_text_language("en"), store_text_language("english"));
	ck_assert_int_eq(store_text_language("klingon"), -1);
}
END_TEST

/* In each language a stop word (from MongoDB's list) goes and a content word stays: the text,
 * its terms, and the text's terms with stop words kept. */
START_TEST(test_tokens_stop_words_per_language)
{
	static const char *cases[][4] = {
		{"danish", "Og m\xc3\xa6lk", "m\xc3\xa6lk", "og m\xc3\xa6lk"},
		{"dutch", "de melk", "melk", "de melk"},
		{"finnish", "ja maito", "maito", "ja maito"},
		{"french", "Le fromage", "fromag", "le fromag"},
		{"german", "Und Kuchen", "kuch", "und kuch"},
		{"hungarian", "\xc3\x89S tej", "tej", "es tej"},
		{"italian", "il latte", "latt", "il latt"},
		{"norwegian", "og melk", "melk", "og melk"},
		{"portuguese", "N\xc3\x83O leite", "leit", "nao leit"},
		{"romanian", "de lapte", "lapt", "de lapt"},
		{"russian", "\xd0\x98 \xd0\xbc\xd0\xbe\xd0\xbb\xd0\xbe\xd0\xba\xd0\xbe",
		 "\xd0\xbc\xd0\xbe\xd0\xbb\xd0\xbe\xd0\xba",
		 "\xd0\xb8 \xd0\xbc\xd0\xbe\xd0\xbb\xd0\xbe\xd0\xba"},
		{"spanish", "de leche", "lech", "de lech"},
		{"swedish", "och mj\xc3\xb6lk", "mjolk", "och mjolk"},
		{"turkish", "ve s\xc3\xbct", "sut", "ve sut"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_msg(!strcmp(toks(cases[i][0], 0, cases[i][1]), cases[i][2]), "%s: %s",
			      cases[i][0], toks(cases[i][0], 0, cases[i][1]));
		ck_assert_msg(
			!strcmp(toks(cases[i][0], STORE_TEXT_KEEP_STOP, cases[i][1]), cases[i][3]),
			"%s kept: %s", cases[i][0],
			toks(cases[i][0], STORE_TEXT_KEEP_STOP, cases[i][1]));
	}
	/* German sharp s; English words are not French stop words and the reverse */
	ck_assert_str_eq(toks("german", 0, "da\xc3\x9f DA\xc3\x9f dass"), "");
	ck_assert_str_eq(toks("french", 0, "the cheese"), "the chees");
	ck_assert_str_eq(toks("english", 0, "le fromage"), "le fromag");
}
END_TEST

/* Stop words are matched case-insensitively but diacritic-sensitively, whatever the flags, as
 * in MongoDB's tokenizer: only the spelling in the list is dropped. */
START_TEST(test_tokens_stop_words_keep_diacritics)
{
	/* French "être" goes, "etre" stays; Spanish "más" goes, "mas" stays */
	ck_assert_str_eq(toks("french", 0, "\xc3\x8atre etre \xc3\xaatre"), "etre");
	ck_assert_str_eq(toks("french", STORE_TEXT_DIACRITIC, "\xc3\x8atre etre"), "etre");
	ck_assert_str_eq(toks("french", STORE_TEXT_CASE, "\xc3\x8atre Etre"), "Etre");
	ck_assert_str_eq(toks("spanish", 0, "m\xc3\xa1s mas"), "mas");
	/* Russian "Мой" goes; "мои" (what stripping the short i would give) is another word */
	ck_assert_str_eq(toks("russian", 0, "\xd0\x9c\xd0\xbe\xd0\xb9 \xd0\xbc\xd0\xbe\xd0\xb8"),
			 "\xd0\xbc\xd0\xbe");
	/* Turkish: the dotted capital I folds to i, so "İÇİN" is the stop word "için" */
	ck_assert_str_eq(toks("turkish", 0, "\xc4\xb0\xc3\x87\xc4\xb0N i\xc3\xa7in"), "");
}
END_TEST

/* ---- $search ---------------------------------------------------------------------------- */

static void parsed(const char *search, const char *lang, const char *want)
{
	struct dfs_err err = {0};
	struct query__text *t;
	struct store_index ix;
	bson_t *spec, out = BSON_INITIALIZER;
	bson_value_t v;
	bson_t *op = bson_new();
	struct dfs_buf b;
	char s[200];

	snprintf(s, sizeof(s), "{key: {c: \"text\"}, name: \"c_text\", default_language: \"%s\"}",
		 lang);
	spec = parse(s);
	memset(&ix, 0, sizeof(ix));
	ck_assert_msg(store__text_spec_parse(spec, &ix, true, &err) == 0, "%s", err.msg);
	BSON_APPEND_UTF8(op, "$search", search);
	v.value_type = BSON_TYPE_DOCUMENT;
	v.value.v_doc.data = (uint8_t *)bson_get_data(op);
	v.value.v_doc.data_len = op->len;
	ck_assert_int_eq(query__text_parse(&v, &t, &err), 0);
	ck_assert_msg(query__text_prepare(t, &ix, &err) == 0, "%s", err.msg);
	query__text_parsed(t, &out, "p");
	dfs_buf_init(&b);
	store_codec_render(&out, STORE_RENDER_COMPACT, &b, &err);
	ck_assert_str_eq(b.data, want);
	dfs_buf_release(&b);
	bson_destroy(&out);
	query__text_free(t);
	store__text_spec_free(ix.text);
	bson_destroy(op);
	bson_destroy(spec);
}

START_TEST(test_search_parsed_text_query)
{
	parsed("\"a\" -b -\"c\"", "none",
	       "{\"p\": {\"terms\": [\"a\"], \"negatedTerms\": [\"b\"], \"phrases\": [\"a\"], "
	       "\"negatedPhrases\": [\"c\"]}}");
	parsed("bake coffee cake", "english",
	       "{\"p\": {\"terms\": [\"bake\", \"cake\", \"coffe\"], \"negatedTerms\": [], "
	       "\"phrases\": [], \"negatedPhrases\": []}}");
	parsed("coffee -shop pre-market", "english",
	       "{\"p\": {\"terms\": [\"coffe\", \"market\", \"pre\"], \"negatedTerms\": "
	       "[\"shop\"], "
	       "\"phrases\": [], \"negatedPhrases\": []}}");
	parsed("\"coffee shop\" the", "english",
	       "{\"p\": {\"terms\": [\"coffe\", \"shop\"], \"negatedTerms\": [], "
	       "\"phrases\": [\"coffee shop\"], \"negatedPhrases\": []}}");
}
END_TEST

START_TEST(test_search_bad_operands)
{
	struct dfs_err err = {0};
	struct query_expr *e;
	const char *bad[][2] = {
		{"{$text: {$search: 1}}", "$search needs a String"},
		{"{$text: {}}", "$search required"},
		{"{$text: {$search: \"x\", $language: \"xx\"}}", "unsupported language"},
		{"{$text: {$search: \"x\", $foo: 1}}", "extra fields in $text"},
		{"{$nor: [{$text: {$search: \"x\"}}]}", "text expression not allowed in nor"},
		{"{a: {$elemMatch: {$text: {$search: \"x\"}}}}", "top-level document"},
		{"{$or: [{$and: [{$or: [{$text: {$search: \"x\"}}, {a: 1}]}, {b: 1}]}, {c: 1}]}",
		 "$text under a nested $or"},
		{"{a: {$elemMatch: {$or: [{$text: {$search: \"x\"}}, {b: 1}]}}}",
		 "top-level document"},
		{"{$nor: [{$or: [{$text: {$search: \"x\"}}, {b: 1}]}]}",
		 "text expression not allowed in nor"},
		{"{$and: [{$text: {$search: \"x\"}}, {$text: {$search: \"y\"}}]}",
		 "Too many text expressions"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bson_t *f = parse(bad[i][0]);

		dfs_err_clear(&err);
		ck_assert_msg(query_filter_parse(f, &e, &err) == DFS_EINVAL, "%s", bad[i][0]);
		ck_assert_msg(strstr(err.msg, bad[i][1]), "%s: %s", bad[i][0], err.msg);
		bson_destroy(f);
	}
}
END_TEST

/* ---- scores (ops.md 7.6) ---------------------------------------------------------------- */

static int64_t coll_with_index(const char *coll, const char *spec)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;
	bson_t *b = parse(spec);

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_coll_create(t, coll, 0755, 0, 0, &c, &err) == 0, "%s", err.msg);
	ck_assert_msg(store_index_create(t, c.id, b, NULL, 0, NULL, NULL, &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	bson_destroy(b);
	return c.id;
}

static void put(int64_t coll, const char *name, const char *json)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_doc_write_text(t, coll, name, json, strlen(json), &attrs, &e, &err) ==
			      0,
		      "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
}

/* The _id and score of each result of the find, "id:score" joined by spaces ("id:-" for a
 * result without a score). */
static const char *find(int64_t coll, const char *filter, const char *sort)
{
	static char out[2048];
	struct dfs_err err = {0};
	struct query_find_opts o = {0};
	struct query_cursor *c;
	struct store_txn *t;
	const bson_t *d;
	bson_t *f = parse(filter), *p = parse("{_id: 1, s: {$meta: \"textScore\"}}"), *s = NULL;
	size_t len = 0;
	int rc;

	o.filter = f;
	o.projection = p;
	if (sort)
		o.sort = s = parse(sort);
	out[0] = '\0';
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	rc = query_find_open(t, coll, &o, &c, &err);
	if (rc) {
		snprintf(out, sizeof(out), "error: %s", err.msg);
	} else {
		while ((rc = query_cursor_next(c, &d, &err)) == 0) {
			bson_iter_t it;
			char id[64] = "?";
			double sc = NAN;

			if (bson_iter_init_find(&it, d, "_id") && BSON_ITER_HOLDS_UTF8(&it))
				snprintf(id, sizeof(id), "%s", bson_iter_utf8(&it, NULL));
			else if (BSON_ITER_HOLDS_NUMBER(&it))
				snprintf(id, sizeof(id), "%lld",
					 (long long)bson_iter_as_int64(&it));
			if (bson_iter_init_find(&it, d, "s"))
				sc = bson_iter_double(&it);
			if (isnan(sc)) /* no score: MongoDB leaves the $meta field out */
				len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s:-",
							len ? " " : "", id);
			else
				len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s:%.4f",
							len ? " " : "", id, sc);
		}
		ck_assert_int_eq(rc, DFS_ENOENT);
		query_cursor_free(c);
	}
	store_txn_abort(t);
	bson_destroy(f);
	bson_destroy(p);
	if (s)
		bson_destroy(s);
	return out;
}

START_TEST(test_score_manual_vectors)
{
	int64_t c = coll_with_index("blog", "{key: {content: \"text\", keywords: \"text\", about: "
					    "\"text\"}, weights: {content: 10, keywords: 5}, "
					    "name: \"TextIndex\"}");

	put(c, "a.json",
	    "{_id: \"a\", content: \"This morning I had a cup of coffee.\", about: "
	    "\"beverage\", keywords: [\"coffee\"]}");
	put(c, "b.json",
	    "{_id: \"b\", content: \"Who likes chocolate ice cream for dessert?\", about: "
	    "\"food\", keywords: [\"poll\"]}");
	put(c, "c.json",
	    "{_id: \"c\", content: \"My favorite flavors are strawberry and cherry\", about: "
	    "\"ice cream\", keywords: [\"food\", \"dessert\"]}");
	put(c, "d.json",
	    "{_id: \"d\", content: \"My favorite cake flavors are strawberry and coffee\", about: "
	    "\"cake\", keywords: [\"dessert\"]}");
	/* b: content 12; c: about 1.5 */
	ck_assert_str_eq(find(c, "{$text: {$search: \"ice cream\"}}", NULL), "b:12.0000 c:1.5000");
	/* b: about 1.1; c: keywords element "food" 5.5 */
	ck_assert_str_eq(find(c, "{$text: {$search: \"food\"}}", NULL), "b:1.1000 c:5.5000");
	/* a: 10*(0.5/3+0.5) + 5 = 11.666...; the fields of one document add up */
	ck_assert_str_eq(find(c, "{$text: {$search: \"coffee\"}}", "{s: {$meta: \"textScore\"}}"),
			 "a:11.6667 d:6.0000");
	{
		/* the exact double */
		struct store_index *ixs;
		struct store_text_terms terms;
		struct store_txn *t;
		struct dfs_err err = {0};
		bson_t *doc = parse("{_id: \"a\", content: \"This morning I had a cup of "
				    "coffee.\", keywords: [\"coffee\"]}");
		int n;

		ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
		ck_assert_int_eq(store_index_list(t, c, &ixs, &n, &err), 0);
		store_text_terms_init(&terms);
		ck_assert_int_eq(store_text_score(&ixs[1], doc, &terms, &err), 0);
		ck_assert_str_eq(terms.buf.data + terms.off[0], "coffe");
		ck_assert(fabs(terms.score[0] - (10 * (0.5 / 3 + 0.5) + 5)) < 1e-12);
		store_text_terms_release(&terms);
		store_index_list_free(ixs, n);
		store_txn_abort(t);
		bson_destroy(doc);
	}
}
END_TEST

/* ---- the manual's $text examples -------------------------------------------------------- */

static int64_t articles(void)
{
	int64_t c = coll_with_index("articles", "{key: {subject: \"text\"}}");

	put(c, "1.json", "{_id: 1, subject: \"coffee\", author: \"xyz\", views: 50}");
	put(c, "2.json", "{_id: 2, subject: \"Coffee Shopping\", author: \"efg\", views: 5}");
	put(c, "3.json", "{_id: 3, subject: \"Baking a cake\", author: \"abc\", views: 90}");
	put(c, "4.json", "{_id: 4, subject: \"baking\", author: \"xyz\", views: 100}");
	put(c, "5.json",
	    "{_id: 5, subject: \"Caf\xc3\xa9 Con Leche\", author: \"abc\", views: 200}");
	put(c, "6.json",
	    "{_id: 6, subject: \"\xd0\xa1\xd1\x8b\xd1\x80\xd0\xbd\xd0\xb8\xd0\xba\xd0\xb8\", "
	    "author: \"jkl\", views: 80}");
	put(c, "7.json", "{_id: 7, subject: \"coffee and cream\", author: \"efg\", views: 10}");
	put(c, "8.json", "{_id: 8, subject: \"Cafe con Leche\", author: \"xyz\", views: 10}");
	return c;
}

static const char *ids(int64_t c, const char *filter)
{
	static char out[256];
	const char *r = find(c, filter, NULL);
	size_t k = 0;

	if (!strncmp(r, "error", 5))
		return r;
	for (const char *p = r; *p && k + 2 < sizeof(out); p++) {
		if (*p == ':')
			while (p[1] && p[1] != ' ')
				p++;
		else
			out[k++] = *p;
	}
	out[k] = '\0';
	return out;
}

START_TEST(test_find_manual_examples)
{
	int64_t c = articles();

	ck_assert_str_eq(ids(c, "{$text: {$search: \"coffee\"}}"), "1 2 7");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"bake coffee cake\"}}"), "1 2 3 4 7");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"\\\"coffee shop\\\"\"}}"), "2");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"coffee -shop\"}}"), "1 7");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"leche\", $language: \"es\"}}"), "5 8");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"caf\xc3\xa9\"}}"), "5 8");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"caf\xc3\xa9\", $diacriticSensitive: true}}"),
			 "5");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"Coffee\", $caseSensitive: true}}"), "2");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"-coffee\"}}"), "");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"coffee\"}, views: {$gt: 20}}"), "1");
	ck_assert_str_eq(ids(c, "{views: 1}"),
			 "error: query requires text score metadata, but it is not available");
}
END_TEST

START_TEST(test_find_needs_text_index)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll cc;
	int64_t c;

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_coll_create(t, "plain", 0755, 0, 0, &cc, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_str_eq(find(cc.id, "{$text: {$search: \"x\"}}", NULL),
			 "error: text index required for $text query");
	c = coll_with_index("comp", "{key: {author: 1, subject: \"text\"}}");
	put(c, "1.json", "{_id: 1, subject: \"coffee\", author: \"xyz\"}");
	put(c, "2.json", "{_id: 2, subject: \"coffee\", author: \"abc\"}");
	ck_assert_str_eq(find(c, "{$text: {$search: \"coffee\"}}", NULL),
			 "error: need have an equality filter on: author");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"coffee\"}, author: \"abc\"}"), "2");
	ck_assert_str_eq(find(c, "{author: \"abc\"}", NULL),
			 "error: query requires text score metadata, but it is not available");
}
END_TEST

/* ---- $text under $or (plan.c note 7) ---------------------------------------------------- */

static void add_index(int64_t coll, const char *spec)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	bson_t *b = parse(spec);

	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_index_create(t, coll, b, NULL, 0, NULL, NULL, &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	bson_destroy(b);
}

START_TEST(test_find_text_under_or)
{
	int64_t c = articles();

	add_index(c, "{key: {views: 1}}");
	add_index(c, "{key: {author: 1}}");
	/* the text branch first (entry order), then the other branch in index order; only
	 * the text branch's documents have a score (MongoDB leaves textScore out) */
	ck_assert_str_eq(
		find(c, "{$or: [{$text: {$search: \"coffee\"}}, {views: {$gt: 95}}]}", NULL),
		"1:1.0000 2:0.7500 7:0.7500 4:- 5:-");
	/* a document both branches find keeps its score (jstests/core/fts_projection.js) */
	ck_assert_str_eq(
		find(c, "{$or: [{$text: {$search: \"coffee\"}}, {views: {$lt: 20}}]}", NULL),
		"1:1.0000 2:0.7500 7:0.7500 8:-");
	/* sorted by score: the documents without one last (their key is null), by _id */
	ck_assert_str_eq(find(c, "{$or: [{views: {$gt: 95}}, {$text: {$search: \"coffee\"}}]}",
			      "{s: {$meta: \"textScore\"}}"),
			 "1:1.0000 2:0.7500 7:0.7500 4:- 5:-");
	/* an inexact branch (a regex's prefix bounds) is filtered before the union */
	ck_assert_str_eq(find(c, "{$or: [{$text: {$search: \"coffee\"}}, {author: /^ab/}]}", NULL),
			 "1:1.0000 2:0.7500 7:0.7500 3:- 5:-");
	/* the $or inside the top-level $and: the rest applies to both branches */
	ck_assert_str_eq(
		find(c,
		     "{author: \"xyz\", $or: [{$text: {$search: \"coffee\"}}, {views: {$gt: 95}}]}",
		     NULL),
		"1:1.0000 4:-");
	ck_assert_str_eq(find(c,
			      "{author: \"xyz\", views: {$gt: 60}, $or: [{$text: {$search: "
			      "\"coffee\"}}, {views: {$gt: 95}}]}",
			      NULL),
			 "4:-");
	/* the text branch's own predicates apply to it */
	ck_assert_str_eq(
		find(c, "{$or: [{$text: {$search: \"coffee\"}, views: {$gt: 20}}, {views: 100}]}",
		     NULL),
		"1:1.0000 4:-");
	/* MongoDB's refusal of an unindexed branch (also inside an $and) */
	ck_assert_str_eq(find(c, "{$or: [{$text: {$search: \"coffee\"}}, {subject: \"x\"}]}", NULL),
			 "error: Failed to produce a solution for TEXT under OR - other non-TEXT "
			 "clauses under OR have to be indexed as well");
	ck_assert_str_eq(find(c,
			      "{views: 5, $or: [{$text: {$search: \"coffee\"}}, {subject: \"x\"}]}",
			      NULL),
			 "error: Failed to produce a solution for TEXT under OR - other non-TEXT "
			 "clauses under OR have to be indexed as well");
	/* a compound text index: the prefix equality must be in the text branch */
	{
		int64_t cc = coll_with_index("compor", "{key: {author: 1, subject: \"text\"}}");

		add_index(cc, "{key: {views: 1}}");
		put(cc, "1.json", "{_id: 1, subject: \"coffee\", author: \"xyz\", views: 1}");
		put(cc, "2.json", "{_id: 2, subject: \"coffee\", author: \"abc\", views: 2}");
		put(cc, "3.json", "{_id: 3, subject: \"tea\", author: \"abc\", views: 3}");
		ck_assert_str_eq(find(cc,
				      "{$or: [{$text: {$search: \"coffee\"}, author: \"abc\"}, "
				      "{views: 3}]}",
				      NULL),
				 "2:1.0000 3:-");
		ck_assert_str_eq(find(cc,
				      "{author: \"abc\", $or: [{$text: {$search: \"coffee\"}}, "
				      "{views: 3}]}",
				      NULL),
				 "error: need have an equality filter on: author");
	}
}
END_TEST

START_TEST(test_explain_text_under_or)
{
	int64_t c = articles();
	struct dfs_err err = {0};
	struct query_find_opts o = {0};
	struct store_txn *t;
	bson_t out = BSON_INITIALIZER,
	       *f = parse("{$or: [{$text: {$search: \"coffee\"}}, {views: {$lt: 20}}]}");
	struct dfs_buf b, tree;

	add_index(c, "{key: {views: 1}}");
	o.filter = f;
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_msg(query_find_explain(t, c, "shop.articles", &o, QUERY_VERB_EXEC, &out, &err) ==
			      0,
		      "%s", err.msg);
	store_txn_abort(t);
	dfs_buf_init(&tree);
	ck_assert_int_eq(query_explain_tree(&out, &tree, &err), 0);
	ck_assert_msg(!strncmp(tree.data,
			       "FETCH  nReturned=4 docsExamined=1\n"
			       "  OR  nReturned=4\n"
			       "    TEXT_MATCH  nReturned=3\n"
			       "      TEXT_OR  nReturned=3 docsExamined=3\n"
			       "        IXSCAN subject_text {_fts: \"text\", _ftsx: 1}  "
			       "keysExamined=3\n"
			       "    IXSCAN views_1 {views: 1} views: [-inf.0, 20)  "
			       "keysExamined=3\n",
			       tree.len),
		      "%s", tree.data);
	dfs_buf_init(&b);
	store_codec_render(&out, STORE_RENDER_COMPACT, &b, &err);
	/* the two documents both branches found are dropped once each; the top FETCH
	 * reads only the one document the index branch alone found */
	ck_assert_msg(strstr(b.data, "\"dupsTested\": 6, \"dupsDropped\": 2"), "%s", b.data);
	ck_assert_msg(strstr(b.data, "\"docsExamined\": 1, \"alreadyHasObj\": 3"), "%s", b.data);
	dfs_buf_release(&b);
	dfs_buf_release(&tree);
	bson_destroy(&out);
	bson_destroy(f);
}
END_TEST

/* ---- {$meta: "textScore"} in aggregation (agg.c note 7) -------------------------------- */

/* The manual's $meta example ($meta (aggregation), "$meta: textScore"). */
static int64_t cakes(void)
{
	int64_t c = coll_with_index("cakes", "{key: {title: \"text\"}}");

	put(c, "1.json", "{_id: 1, title: \"cakes and ale\"}");
	put(c, "2.json", "{_id: 2, title: \"more cakes\"}");
	put(c, "3.json", "{_id: 3, title: \"bread\"}");
	put(c, "4.json", "{_id: 4, title: \"some cakes\"}");
	put(c, "5.json", "{_id: 5, title: \"two cakes to go\"}");
	put(c, "6.json", "{_id: 6, title: \"pie\"}");
	return c;
}

/* The results of pipeline (shell syntax) over coll, compact, one per line, or "error: ...". */
static const char *agg(int64_t coll, const char *pipeline)
{
	static char out[4096];
	struct dfs_err err = {0};
	struct query_pipeline *p = NULL;
	struct query_agg *a = NULL;
	struct store_txn *t;
	const bson_t *d;
	struct dfs_buf b;
	char wrapped[2048];
	bson_t *w, arr;
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;
	int rc;

	snprintf(wrapped, sizeof(wrapped), "{p: %s}", pipeline);
	w = parse(wrapped);
	ck_assert(bson_iter_init_find(&it, w, "p") && BSON_ITER_HOLDS_ARRAY(&it));
	bson_iter_array(&it, &len, &data);
	ck_assert(bson_init_static(&arr, data, len));
	dfs_buf_init(&b);
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	rc = query_pipeline_parse(&arr, &p, &err);
	if (!rc)
		rc = query_agg_open(t, coll, p, NULL, &a, &err);
	while (!rc && (rc = query_agg_next(a, &d, &err)) == 0) {
		if (b.len)
			dfs_buf_putc(&b, '\n');
		store_codec_render(d, STORE_RENDER_COMPACT, &b, &err);
	}
	if (rc != DFS_ENOENT)
		snprintf(out, sizeof(out), "error: %s", err.msg);
	else
		snprintf(out, sizeof(out), "%s", b.data ? b.data : "");
	query_agg_free(a);
	query_pipeline_free(p);
	store_txn_abort(t);
	dfs_buf_release(&b);
	bson_destroy(w);
	return out;
}

START_TEST(test_agg_meta_text_score)
{
	int64_t c = cakes();

	/* the manual's example: 0.75, 0.6666666666666666 and 1 (twice), in group key order */
	ck_assert_str_eq(agg(c, "[{$match: {$text: {$search: \"cake\"}}}, {$group: {_id: {$meta: "
				"\"textScore\"}, count: {$sum: 1}}}]"),
			 "{\"_id\": 0.6666666666666666, \"count\": 1}\n"
			 "{\"_id\": 0.75, \"count\": 1}\n"
			 "{\"_id\": 1.0, \"count\": 2}");
	/* $project: a $meta alone is an inclusion in aggregation */
	ck_assert_str_eq(
		agg(c, "[{$match: {$text: {$search: \"cake\"}}}, {$project: {score: {$meta: "
		       "\"textScore\"}}}]"),
		"{\"_id\": 1, \"score\": 0.75}\n{\"_id\": 2, \"score\": 1.0}\n"
		"{\"_id\": 4, \"score\": 1.0}\n{\"_id\": 5, \"score\": 0.6666666666666666}");
	ck_assert_str_eq(agg(c, "[{$match: {$text: {$search: \"cake\"}}}, {$project: {title: 1, "
				"_id: 0, score: {$meta: \"textScore\"}}}, {$limit: 1}]"),
			 "{\"title\": \"cakes and ale\", \"score\": 0.75}");
	/* an exclusion with a $meta: the score replaces a field of that name, after the rest */
	ck_assert_str_eq(agg(c,
			     "[{$match: {$text: {$search: \"ale\"}}}, {$addFields: {title: "
			     "\"x\", n: 1}}, {$project: {n: 0, title: {$meta: \"textScore\"}}}]"),
			 "{\"_id\": 1, \"title\": 0.75}");
	/* $addFields, then a $sort on the field holding it (stable: ties in input order) */
	ck_assert_str_eq(agg(c, "[{$match: {$text: {$search: \"cake\"}}}, {$addFields: {s: "
				"{$meta: \"textScore\"}}}, {$sort: {s: 1}}, {$project: {s: 1}}]"),
			 "{\"_id\": 5, \"s\": 0.6666666666666666}\n{\"_id\": 1, \"s\": 0.75}\n"
			 "{\"_id\": 2, \"s\": 1.0}\n{\"_id\": 4, \"s\": 1.0}");
	/* $sort by {$meta} after another stage (not the find's sort): highest first; the
	 * metadata passes $project, $unwind, $skip and $limit */
	ck_assert_str_eq(agg(c, "[{$match: {$text: {$search: \"cake\"}}}, {$project: {t: "
				"[\"$title\"]}}, {$unwind: \"$t\"}, {$sort: {x: {$meta: "
				"\"textScore\"}, _id: -1}}, {$skip: 1}, {$limit: 3}, {$project: "
				"{sc: {$meta: \"textScore\"}}}]"),
			 "{\"_id\": 2, \"sc\": 1.0}\n{\"_id\": 1, \"sc\": 0.75}\n"
			 "{\"_id\": 5, \"sc\": 0.6666666666666666}");
	/* the find's own sort ($sort right after the $match) */
	ck_assert_str_eq(agg(c, "[{$match: {$text: {$search: \"cake\"}}}, {$sort: {x: {$meta: "
				"\"textScore\"}}}, {$project: {_id: 1}}]"),
			 "{\"_id\": 2}\n{\"_id\": 4}\n{\"_id\": 1}\n{\"_id\": 5}");
	/* accumulators, $expr next to the $text, $facet sub-pipelines see the score */
	ck_assert_str_eq(agg(c, "[{$match: {$text: {$search: \"cake\"}}}, {$group: {_id: null, "
				"total: {$sum: {$meta: \"textScore\"}}, top: {$max: {$meta: "
				"\"textScore\"}}}}]"),
			 "{\"_id\": null, \"total\": 3.4166666666666665, \"top\": 1.0}");
	ck_assert_str_eq(agg(c, "[{$match: {$text: {$search: \"cake\"}, $expr: {$lt: [{$meta: "
				"\"textScore\"}, 0.8]}}}, {$project: {_id: 1}}]"),
			 "{\"_id\": 1}\n{\"_id\": 5}");
	ck_assert_str_eq(agg(c,
			     "[{$match: {$text: {$search: \"cake\"}}}, {$facet: {f: [{$match: "
			     "{$expr: {$eq: [{$meta: \"textScore\"}, 1]}}}, {$count: \"n\"}]}}]"),
			 "{\"f\": [{\"n\": 2}]}");
	/* after $group the documents are new: the score is missing (no error) */
	ck_assert_str_eq(agg(c, "[{$match: {$text: {$search: \"cake\"}}}, {$group: {_id: null}}, "
				"{$project: {s: {$meta: \"textScore\"}}}]"),
			 "{\"_id\": null}");
	/* text under $or: the documents of the other clause have no score */
	add_index(c, "{key: {title: 1}}");
	ck_assert_str_eq(agg(c, "[{$match: {$or: [{$text: {$search: \"ale\"}}, {title: "
				"\"pie\"}]}}, {$addFields: {s: {$meta: \"textScore\"}}}]"),
			 "{\"_id\": 1, \"title\": \"cakes and ale\", \"s\": 0.75}\n"
			 "{\"_id\": 6, \"title\": \"pie\"}");
}
END_TEST

START_TEST(test_agg_meta_errors)
{
	int64_t c = cakes();
	const char *req = "query requires text score metadata, but it is not available";
	const char *bad[][2] = {
		/* no $text in the first $match: MongoDB's error 40218, at parse time */
		{"[{$project: {s: {$meta: \"textScore\"}}}]", req},
		{"[{$match: {title: \"pie\"}}, {$addFields: {s: {$meta: \"textScore\"}}}]", req},
		{"[{$sort: {s: {$meta: \"textScore\"}}}]", req},
		{"[{$group: {_id: null, s: {$sum: {$meta: \"textScore\"}}}}]", req},
		{"[{$facet: {f: [{$project: {s: {$meta: \"textScore\"}}}]}}]", req},
		{"[{$match: {$text: {$search: \"cake\"}}}, {$lookup: {from: \"cakes\", pipeline: "
		 "[{$project: {s: {$meta: \"textScore\"}}}], as: \"l\"}}]",
		 req},
		/* $text only in the first $match (MongoDB's 17313) */
		{"[{$limit: 5}, {$match: {$text: {$search: \"cake\"}}}]",
		 "stage 1: $match with $text is only allowed as the first pipeline stage"},
		{"[{$match: {$text: {$search: \"cake\"}}}, {$match: {$text: {$search: \"pie\"}}}]",
		 "$match with $text is only allowed as the first pipeline stage"},
		{"[{$facet: {f: [{$match: {$text: {$search: \"cake\"}}}]}}]",
		 "$match with $text is only allowed as the first pipeline stage"},
		/* $meta's own errors (MongoDB's 17307, 17308) */
		{"[{$match: {$text: {$search: \"cake\"}}}, {$project: {s: {$meta: 1}}}]",
		 "$meta only supports string arguments"},
		{"[{$match: {$text: {$search: \"cake\"}}}, {$project: {s: {$meta: \"x\"}}}]",
		 "Unsupported argument to $meta: x"},
		{"[{$match: {$text: {$search: \"cake\"}}}, {$project: {s: {$meta: \"indexKey\"}}}]",
		 "$meta \"indexKey\" is not supported"},
		{"[{$match: {$text: {$search: \"cake\"}}}, {$project: {a: 0, s: {$add: [1, 2]}}}]",
		 "exclusion"},
		{"[{$match: {$text: {$search: \"cake\"}}}, {$project: {a: 0, \"s.t\": {$meta: "
		 "\"textScore\"}}}]",
		 "$meta in an exclusion projection is supported at the top level only"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *r = agg(c, bad[i][0]);

		ck_assert_msg(!strncmp(r, "error: ", 7) && strstr(r, bad[i][1]), "%s: %s",
			      bad[i][0], r);
	}
}
END_TEST

/* ---- the index: spec, entries, check ---------------------------------------------------- */

static int64_t entries(const char *ixname, int64_t coll)
{
	struct dfs_err err = {0};
	struct store_index_stats s;
	struct store_txn *t;

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_index_stats(t, coll, ixname, &s, &err), 0);
	store_txn_abort(t);
	return s.entries;
}

static void assert_check_passes(void)
{
	struct problems pr = {0};
	struct dfs_err err = {0};

	ck_assert_msg(store_check(st, on_problem, &pr, &err) == 0, "%d: %s", pr.n, pr.last);
}

START_TEST(test_index_entries_kept_by_writes)
{
	int64_t c = coll_with_index("w", "{key: {t: \"text\"}}");
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_entry e;

	put(c, "1.json", "{_id: 1, t: \"red apples and green apples\"}");
	put(c, "2.json", "{_id: 2, n: 5}"); /* sparse: no entries */
	ck_assert_int_eq(entries("t_text", c), 3);
	assert_check_passes();
	put(c, "1.json", "{_id: 1, t: \"red\"}");
	ck_assert_int_eq(entries("t_text", c), 1);
	assert_check_passes();
	ck_assert_str_eq(ids(c, "{$text: {$search: \"apples\"}}"), "");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"red\"}}"), "1");
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_int_eq(store_entry_lookup(t, c, "1.json", &e, &err), 0);
	ck_assert_int_eq(store_entry_delete(t, e.id, &err), 0);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	ck_assert_int_eq(entries("t_text", c), 0);
	assert_check_passes();
}
END_TEST

START_TEST(test_index_spec_forms)
{
	int64_t c =
		coll_with_index("s", "{key: {a: \"text\", b: \"text\"}, weights: {b: 3}, "
				     "default_language: \"es\", language_override: \"idioma\"}");
	struct dfs_err err = {0};
	struct store_index *ixs;
	struct store_txn *t;
	struct dfs_buf b;
	bson_t *spec;
	int n;

	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_int_eq(store_index_list(t, c, &ixs, &n, &err), 0);
	store_txn_abort(t);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(ixs[1].name, "a_text_b_text");
	dfs_buf_init(&b);
	store_codec_render(ixs[1].spec, STORE_RENDER_COMPACT, &b, &err);
	ck_assert_str_eq(b.data,
			 "{\"v\": 2, \"key\": {\"_fts\": \"text\", \"_ftsx\": 1}, "
			 "\"name\": \"a_text_b_text\", \"weights\": {\"a\": 1, \"b\": 3}, "
			 "\"default_language\": \"spanish\", \"language_override\": \"idioma\", "
			 "\"textIndexVersion\": 3}");
	dfs_buf_release(&b);
	store_index_list_free(ixs, n);
	/* a second text index is refused; so are bad options */
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	spec = parse("{key: {c: \"text\"}}");
	ck_assert_int_eq(store_index_create(t, c, spec, NULL, 0, NULL, NULL, &err), DFS_EINVAL);
	ck_assert_msg(strstr(err.msg, "only one text index per collection allowed"), "%s", err.msg);
	bson_destroy(spec);
	spec = parse("{key: {c: \"text\"}, default_language: \"klingon\"}");
	ck_assert_int_eq(store_index_create(t, c, spec, NULL, 0, NULL, NULL, &err), DFS_EINVAL);
	bson_destroy(spec);
	spec = parse("{key: {c: \"text\"}, weights: {c: 0}}");
	ck_assert_int_eq(store_index_create(t, c, spec, NULL, 0, NULL, NULL, &err), DFS_EINVAL);
	bson_destroy(spec);
	store_txn_abort(t);
	/* the language override picks the stemmer per document */
	put(c, "1.json", "{_id: 1, a: \"corriendo\"}");
	put(c, "2.json", "{_id: 2, a: \"running\", idioma: \"english\"}");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"corriendo\"}}"), "1");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"run\", $language: \"en\"}}"), "2");
	assert_check_passes();
	/* the wildcard form indexes every string */
	c = coll_with_index("wild", "{key: {\"$**\": \"text\"}}");
	put(c, "1.json", "{_id: 1, x: {y: [\"deep coffee\"]}}");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"coffee\"}}"), "1");
	assert_check_passes();
}
END_TEST

START_TEST(test_explain_shape)
{
	int64_t c = articles();
	struct dfs_err err = {0};
	struct query_find_opts o = {0};
	struct store_txn *t;
	bson_t out = BSON_INITIALIZER, *f = parse("{$text: {$search: \"coffee -shop\"}}");
	struct dfs_buf b;

	o.filter = f;
	ck_assert_int_eq(store_txn_begin(db, false, &t, &err), 0);
	ck_assert_msg(query_find_explain(t, c, "shop.articles", &o, QUERY_VERB_EXEC, &out, &err) ==
			      0,
		      "%s", err.msg);
	store_txn_abort(t);
	dfs_buf_init(&b);
	store_codec_render(&out, STORE_RENDER_COMPACT, &b, &err);
	ck_assert_msg(strstr(b.data,
			     "\"winningPlan\": {\"stage\": \"TEXT_MATCH\", \"indexPrefix\": {}, "
			     "\"indexName\": \"subject_text\", \"parsedTextQuery\": {\"terms\": "
			     "[\"coffe\"], \"negatedTerms\": [\"shop\"], \"phrases\": [], "
			     "\"negatedPhrases\": []}, \"textIndexVersion\": 3, \"inputStage\": "
			     "{\"stage\": \"TEXT_OR\", \"inputStage\": {\"stage\": \"IXSCAN\", "
			     "\"keyPattern\": {\"_fts\": \"text\", \"_ftsx\": 1}"),
		      "%s", b.data);
	ck_assert_msg(strstr(b.data, "\"docsRejected\": 1"), "%s", b.data);
	dfs_buf_release(&b);
	bson_destroy(&out);
	bson_destroy(f);
}
END_TEST

/* A document's language (language_override) picks its stop words: numTokens counts only the
 * others, so "le fromage" scores 1 in French and 0.75 in English (ops.md 7.5). */
START_TEST(test_score_stop_words_by_document_language)
{
	int64_t c = coll_with_index("lang", "{key: {t: \"text\"}}");

	put(c, "1.json", "{_id: 1, t: \"le fromage\", language: \"french\"}");
	put(c, "2.json", "{_id: 2, t: \"le fromage\"}");
	put(c, "3.json", "{_id: 3, t: \"the cheese\", language: \"fr\"}");
	ck_assert_str_eq(find(c, "{$text: {$search: \"fromage\", $language: \"fr\"}}", NULL),
			 "1:1.0000 2:0.7500");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"le\"}}"), "2");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"the\"}}"), "");
	ck_assert_str_eq(ids(c, "{$text: {$search: \"the\", $language: \"french\"}}"), "3");
	assert_check_passes();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("text");
	TCase *tc = tcase_create("text");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_tokens_delimiters_and_folding);
	tcase_add_test(tc, test_tokens_stop_words_and_stems);
	tcase_add_test(tc, test_tokens_stop_words_per_language);
	tcase_add_test(tc, test_tokens_stop_words_keep_diacritics);
	tcase_add_test(tc, test_search_parsed_text_query);
	tcase_add_test(tc, test_search_bad_operands);
	tcase_add_test(tc, test_score_manual_vectors);
	tcase_add_test(tc, test_score_stop_words_by_document_language);
	tcase_add_test(tc, test_find_manual_examples);
	tcase_add_test(tc, test_find_needs_text_index);
	tcase_add_test(tc, test_find_text_under_or);
	tcase_add_test(tc, test_explain_text_under_or);
	tcase_add_test(tc, test_agg_meta_text_score);
	tcase_add_test(tc, test_agg_meta_errors);
	tcase_add_test(tc, test_index_entries_kept_by_writes);
	tcase_add_test(tc, test_index_spec_forms);
	tcase_add_test(tc, test_explain_shape);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
