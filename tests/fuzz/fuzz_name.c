/*
 * fuzz_name.c - the file-name grammar of documents (store/name.c). A stem that names an _id
 * is that _id's one name: rendering the _id back gives the same stem, and the _id is a
 * valid _id (not an array, not a regex...).
 */
#include "fuzz.h"
#include "store.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dfs_err err = {0};
	struct dfs_buf name;
	bson_iter_t it;
	bson_t id;

	if (memchr(data, '\0', size))
		return 0; /* a file name holds no NUL */
	bson_init(&id);
	dfs_buf_init(&name);
	if (store_name_to_id((const char *)data, size, &id, &err) == 0) {
		FUZZ_CHECK(bson_iter_init(&it, &id) && bson_iter_next(&it),
			   "store_name_to_id gave no value");
		FUZZ_CHECK(store_name_from_id(bson_iter_value(&it), &name, &err) == 0,
			   "the _id of '%.*s' has no name: %s", (int)size, (const char *)data,
			   err.msg);
		FUZZ_CHECK(name.len == size && memcmp(name.data, data, size) == 0,
			   "'%.*s' names an _id whose name is '%s'", (int)size, (const char *)data,
			   name.data);
	}
	dfs_buf_release(&name);
	bson_destroy(&id);
	return 0;
}
