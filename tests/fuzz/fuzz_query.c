/*
 * fuzz_query.c - the query path grammar and the query parsers. Input as a query/ path
 * component: when fs_query_parse accepts it, its filter, sort and projection parse or fail
 * with an error (never crash), and a parsed filter matches a few fixed documents without
 * crashing. The same input as a saved query (.queries/<name>) goes through
 * fs_query_parse_saved.
 */
#include "fs_int.h"
#include "fuzz.h"
#include "query.h"

#include <string.h>

static const char *const docs_text[] = {
	"{_id: 1, a: 1, b: 'x', c: [1, 2, {d: 3}], e: {f: null, g: [[1], []]}}",
	"{_id: 'k', a: [{b: 2}, {b: [3, 'y']}], t: ISODate('2020-01-01T00:00:00Z'), n: NaN}",
	"{_id: ObjectId('5f0c6a4b9d1e8a3b2c1d0e0f'), a: NumberDecimal('1.5'), r: /ab+/i}",
	"{}",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bson_t docs[sizeof(docs_text) / sizeof(docs_text[0])];
	static bool ready;
	struct dfs_err err = {0};
	struct fs_query q;
	char *comp;

	if (!ready) {
		for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
			bson_init(&docs[i]);
			FUZZ_CHECK(store_codec_parse_doc(docs_text[i], strlen(docs_text[i]),
							 &docs[i], &err) == 0,
				   "fixed document %zu: %s", i, err.msg);
		}
		ready = true;
	}
	comp = fuzz_cstr(data, size);
	fs_query_init(&q);
	if (!memchr(data, '\0', size) && fs_query_parse(comp, &q, &err) == 0) {
		struct query_expr *e = NULL;
		struct query_sort *so = NULL;
		struct query_proj *p = NULL;

		if (query_filter_parse(&q.filter, &e, &err) == 0) {
			for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
				int elem = -1;

				(void)query_filter_match(e, &docs[i], &elem);
			}
			query_expr_free(e);
		}
		if (q.has_sort && query_sort_parse(&q.sort, &so, &err) == 0)
			query_sort_free(so);
		if (q.has_projection && query_proj_parse(&q.projection, &p, &err) == 0)
			query_proj_free(p);
	}
	fs_query_release(&q);
	fs_query_init(&q);
	(void)fs_query_parse_saved((const char *)data, size, &q, &err);
	fs_query_release(&q);
	free(comp);
	return 0;
}
