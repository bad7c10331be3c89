/*
 * fuzz_key.c - the key encoding (store/key.c). Input as a document: for every pair of its
 * top-level values, the memcmp order of their encodings (then the shorter first, as SQLite
 * compares BLOBs) is store_value_compare's order, and the descending encodings order the
 * other way.
 */
#include "fuzz.h"
#include "store.h"

#include <string.h>

#define MAX_VALUES 24

static int sign(int v)
{
	return (v > 0) - (v < 0);
}

static int blob_cmp(const struct dfs_buf *a, const struct dfs_buf *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = n ? memcmp(a->data, b->data, n) : 0;

	if (c)
		return sign(c);
	return (a->len > b->len) - (a->len < b->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dfs_buf up[MAX_VALUES], down[MAX_VALUES];
	bson_value_t vals[MAX_VALUES];
	bool ok[MAX_VALUES];
	struct dfs_err err = {0};
	bson_iter_t it;
	bson_t doc;
	int n = 0;

	bson_init(&doc);
	if (store_codec_parse_doc((const char *)data, size, &doc, &err) != 0 ||
	    !bson_iter_init(&it, &doc)) {
		bson_destroy(&doc);
		return 0;
	}
	while (n < MAX_VALUES && bson_iter_next(&it)) {
		vals[n] = *bson_iter_value(&it); /* a view into doc */
		dfs_buf_init(&up[n]);
		dfs_buf_init(&down[n]);
		ok[n] = store_key_append(&up[n], &vals[n], false, &err) == 0 &&
			store_key_append(&down[n], &vals[n], true, &err) == 0;
		n++;
	}
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < n; j++) {
			int want, got;

			if (!ok[i] || !ok[j])
				continue;
			want = sign(store_value_compare(&vals[i], &vals[j]));
			got = blob_cmp(&up[i], &up[j]);
			FUZZ_CHECK(got == want, "values %d and %d compare %d, their keys %d", i, j,
				   want, got);
			got = blob_cmp(&down[i], &down[j]);
			FUZZ_CHECK(got == -want, "values %d and %d compare %d, descending keys %d",
				   i, j, want, got);
		}
	}
	for (int i = 0; i < n; i++) {
		dfs_buf_release(&up[i]);
		dfs_buf_release(&down[i]);
	}
	bson_destroy(&doc);
	return 0;
}
