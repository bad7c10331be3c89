/*
 * query_int.h - private declarations of the filter engine shared by filter.c (parsing,
 * normalization, describe) and match.c (evaluation): the expression tree, split paths,
 * compiled regexes and $expr expression nodes. Nothing outside query/ includes it.
 */
#ifndef DOCFS_QUERY_INT_H
#define DOCFS_QUERY_INT_H

#include "query.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/*
 * Node kinds. The order is the canonical order MongoDB sorts the children of $and/$or by
 * (its MatchType enum), so that describe() prints children in the order explain shows.
 */
enum query__kind {
	QK_AND,
	QK_OR,
	QK_ELEM_OBJ, /* $elemMatch {a: .., b: ..}: kids[0] matched against each element */
	QK_ELEM_VAL, /* $elemMatch {$gt: .., ..}: every kid matches one element */
	QK_SIZE,
	QK_EQ,
	QK_LTE,
	QK_LT,
	QK_GT,
	QK_GTE,
	QK_REGEX,
	QK_MOD,
	QK_EXISTS,
	QK_IN,
	QK_NOT,
	QK_NOR,
	QK_TYPE,
	QK_EXPR,
	QK_NEVER,  /* $alwaysFalse */
	QK_ALWAYS, /* $alwaysTrue */
	QK_TEXT	   /* $text: matched by the text stages, true for match() (text.c) */
};

/* One component of a dotted path. */
struct query__comp {
	const char *s; /* Borrowed from the path's buffer: NUL-terminated component */
	uint32_t len;  /* strlen(s) */
	bool digits;   /* all ASCII digits: may also name an array element */
};

/* A dotted path split once at parse time. n == 0: the value itself (under $elemMatch). */
struct query__path {
	int n;			  /* components */
	struct query__comp *comp; /* Owned: n components */
	char *buf;		  /* Owned: the components, NUL-separated */
	char *dotted;		  /* Owned: the path as written ("" when n == 0) */
};

/* A compiled regular expression ($regex, /re/, inside $in/$all/$not). */
struct query__regex {
	pcre2_code *code; /* Owned */
	char *pattern;	  /* Owned: as written */
	char *options;	  /* Owned: the flags as written (validated: i m s x u) */
};

/* $expr expression operators. */
enum query__xop {
	QX_LIT,	 /* a constant */
	QX_PATH, /* "$a.b" (aggregation path semantics) */
	QX_ROOT, /* "$$ROOT", "$$CURRENT" */
	QX_OBJ,	 /* {a: <expr>, ...} */
	QX_ARR,	 /* [<expr>, ...] */
	QX_EQ,
	QX_NE,
	QX_GT,
	QX_GTE,
	QX_LT,
	QX_LTE,
	QX_CMP,
	QX_AND,
	QX_OR,
	QX_NOT,
	QX_ADD,
	QX_SUB,
	QX_MUL,
	QX_DIV,
	QX_MOD,
	QX_ABS,
	QX_GETFIELD /* {$getField: ..}: lit the field name, args[0] the input */
};

struct query__xnode {
	int op;			    /* enum query__xop */
	int n;			    /* arguments / fields / elements */
	struct query__xnode **args; /* Owned: n children */
	char **keys;		    /* Owned: QX_OBJ field names (n of them) */
	bson_value_t lit;	    /* QX_LIT: Owned copy */
	struct query__path path;    /* QX_PATH */
};

struct query_expr {
	int kind;		       /* enum query__kind */
	struct query__path path;       /* leaf kinds (n == 0 under $elemMatch value form) */
	int nkids;		       /* logical kinds, QK_ELEM_OBJ (1), QK_ELEM_VAL */
	struct query_expr **kids;      /* Owned */
	bson_value_t val;	       /* comparison kinds: Owned copy of the operand */
	bson_value_t *vals;	       /* QK_IN: Owned, sorted in store_value_compare order */
	int nvals;		       /* QK_IN: entries of vals */
	bool has_null;		       /* QK_IN: null among vals (matches missing) */
	struct query__regex **res;     /* QK_IN: Owned regexes; QK_REGEX: res[0] */
	int nres;		       /* entries of res */
	uint32_t types_lo;	       /* QK_TYPE: bit t for BSON type codes 1..31 */
	bool type_number;	       /* QK_TYPE: "number" */
	bool type_minkey, type_maxkey; /* QK_TYPE: -1, 127 */
	bson_value_t types_orig;       /* QK_TYPE: the operand as written, for describe */
	int64_t mod_div, mod_rem;      /* QK_MOD */
	int64_t size;		       /* QK_SIZE */
	struct query__xnode *x;	       /* QK_EXPR: Owned */
	bson_value_t x_orig;	       /* QK_EXPR: the operand as written, for describe */
	struct query__text *text;      /* QK_TEXT: Owned */
	const struct query_collation *coll; /* root of a collated filter: Borrowed, else NULL */
	struct query_expr *orig;	    /* root of a collated filter: Owned, the tree with
					     * the operands as written (describe), else NULL */
};

/* collation.c: doc with every string at any depth replaced by its sort key under c (note 1)
 * into out (initialised); the same for one value into out (Owned copy). */
void query__collate_doc(const struct query_collation *c, const bson_t *doc, bson_t *out);
void query__collate_value(const struct query_collation *c, const bson_value_t *v,
			  bson_value_t *out);
/* Another reference to c (NULL: NULL), dropped by query_collation_free. */
struct query_collation *query__collation_ref(const struct query_collation *c);
/* The collation's options as one canonical text ("" for NULL): plan cache keys. */
const char *query__collation_desc(const struct query_collation *c);
/* sort.c: strings of s's fields compare under c (Borrowed; NULL: binary). */
void query__sort_set_collation(struct query_sort *s, const struct query_collation *c);

/* ---- $text (text.c) ----------------------------------------------------------------- */

/* A $text operand: what the filter gives, then (query__text_prepare) its terms and phrases
 * for the text index of the collection. */
struct query__text;
/* Parses {$search, $language, $caseSensitive, $diacriticSensitive}. *out Owned. */
int query__text_parse(const bson_value_t *v, struct query__text **out, struct dfs_err *err);
void query__text_free(struct query__text *t);
/* Reads $search for index ix (its default language unless $language): terms, negated
 * terms, phrases, negated phrases. Errors: DFS_EINVAL (unsupported $language). */
int query__text_prepare(struct query__text *t, const struct store_index *ix, struct dfs_err *err);
/* The terms an index scan looks up (folded, stemmed, distinct): n of them, term i Borrowed
 * (valid while t lives). */
size_t query__text_nscan(const struct query__text *t);
const char *query__text_scan_term(const struct query__text *t, size_t i);
/* TEXT_MATCH: doc (which some scanned term found) has no negated term or phrase, every
 * phrase, and a positive term in the case/diacritic-sensitive forms. */
bool query__text_match(const struct query__text *t, const struct store_index *ix,
		       const bson_t *doc);
/* {$text: {$search, $language, $caseSensitive, $diacriticSensitive}} into doc. */
void query__text_describe(const struct query__text *t, bson_t *doc);
/* parsedTextQuery {terms, negatedTerms, phrases, negatedPhrases} as key of out. */
void query__text_parsed(const struct query__text *t, bson_t *out, const char *key);

/* match.c: does the regex match the string s of len bytes (no allocation after the first
 * call of a thread)? */
bool query__regex_match(const struct query__regex *re, const char *s, size_t len);

/* ---- MD5 (shard.c) ---------------------------------------------------------------- */

/* A new MD5 context, ready for EVP_DigestUpdate: OpenSSL's, its implementation fetched once
 * per process. Owned, freed by EVP_MD_CTX_free. Aborts when OpenSSL has no MD5 (a FIPS-only
 * configuration), as on memory exhaustion: every hashed key would be wrong otherwise. Used
 * by the hashed shard key (shard.c) and dbHash (dbhash.c). */
struct evp_md_ctx_st *query__md5_new(void);

#endif
