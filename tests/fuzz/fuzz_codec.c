/*
 * fuzz_codec.c - the text codec. Input as Extended JSON / shell-literal text: when it parses,
 * its rendering in every style parses back to exactly the same BSON bytes (type-exact round
 * trip). Input as raw BSON: rendering it either works or fails with DFS_EINVAL, leaving the
 * output as it was.
 */
#include "fuzz.h"
#include "store.h"

#include <string.h>

static const enum store_render_style styles[] = {STORE_RENDER_PRETTY, STORE_RENDER_COMPACT,
						 STORE_RENDER_CANONICAL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dfs_err err = {0};
	struct dfs_buf text;
	bson_t doc, view;

	dfs_buf_init(&text);
	bson_init(&doc);
	if (store_codec_parse_doc((const char *)data, size, &doc, &err) == 0) {
		for (size_t s = 0; s < sizeof(styles) / sizeof(styles[0]); s++) {
			bson_t back;
			int rc;

			dfs_buf_reset(&text);
			rc = store_codec_render(&doc, styles[s], &text, &err);
			FUZZ_CHECK(rc == 0, "render of a parsed document failed: %s", err.msg);
			bson_init(&back);
			rc = store_codec_parse_doc(text.data, text.len, &back, &err);
			FUZZ_CHECK(rc == 0, "its rendering does not parse: %s: %s", err.msg,
				   text.data);
			FUZZ_CHECK(back.len == doc.len && memcmp(bson_get_data(&back),
								 bson_get_data(&doc), doc.len) == 0,
				   "the round trip changed the BSON: %s", text.data);
			bson_destroy(&back);
		}
	}
	bson_destroy(&doc);
	if (size >= 5 && bson_init_static(&view, data, size)) {
		dfs_buf_reset(&text);
		dfs_buf_puts(&text, "x");
		for (size_t s = 0; s < sizeof(styles) / sizeof(styles[0]); s++) {
			int rc = store_codec_render(&view, styles[s], &text, &err);

			FUZZ_CHECK(rc == 0 || rc == DFS_EINVAL, "render returned %d", rc);
			if (rc)
				FUZZ_CHECK(strcmp(text.data, "x") == 0,
					   "a failed render left output");
			dfs_buf_reset(&text);
			dfs_buf_puts(&text, "x");
		}
	}
	dfs_buf_release(&text);
	return 0;
}
