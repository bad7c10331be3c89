/*
 * fuzz_wire.c - the wire protocol's frame and command parser (fs/wire/frame.c, dispatch.c)
 * on arbitrary bytes: a message is refused or parsed into sections that lie inside it and
 * hold valid BSON; a parsed message runs through the dispatch over a scratch store (made
 * once, removed at exit) and its reply is one whole message whose length field is its
 * size and whose document is valid BSON with "ok" (or "$err" for OP_QUERY), or nothing at
 * all when the request had moreToCome.
 */
#include "fuzz.h"
#include "query.h"
#include "wire.h"

#include <unistd.h>

static struct store *scratch;
static char scratch_dir[] = "/tmp/fuzz_wire_XXXXXX";

static void scratch_remove(void)
{
	char cmd[64];

	store_free(scratch);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", scratch_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_wire: cannot remove %s\n", scratch_dir);
}

static int32_t get32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
}

static int seq_doc(void *ctx, const bson_t *doc)
{
	size_t off;

	FUZZ_CHECK(bson_validate(doc, BSON_VALIDATE_NONE, &off), "a section document is invalid");
	(*(int *)ctx)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dfs_err err = {0};
	struct wire_msg m;
	struct dfs_buf out;
	size_t off;

	if (!scratch) {
		query_init();
		FUZZ_CHECK(mkdtemp(scratch_dir), "mkdtemp");
		FUZZ_CHECK(store_open(scratch_dir, true, &scratch, &err) == 0, "%s", err.msg);
		atexit(scratch_remove);
	}
	if (wire_msg_parse(data, size, &m, &err) != 0) {
		FUZZ_CHECK(err.code == DFS_EINVAL && err.msg[0], "a refusal without a reason");
		return 0;
	}
	FUZZ_CHECK((size_t)m.h.len == size, "parsed a message of another length");
	FUZZ_CHECK(bson_validate(&m.body, BSON_VALIDATE_NONE, &off), "the body is invalid BSON");
	for (int i = 0; i < m.nseq; i++) {
		int n = 0;

		FUZZ_CHECK(m.seq[i].data >= data && m.seq[i].data + m.seq[i].len <= data + size,
			   "section %d lies outside the message", i);
		FUZZ_CHECK(wire_seq_each(&m.seq[i], seq_doc, &n) == 0, "section %d", i);
	}
	dfs_buf_init(&out);
	wire_dispatch(scratch, NULL, 1, &m, 1, &out);
	if (m.h.opcode == WIRE_OP_MSG && (m.flags & WIRE_MSG_MORE)) {
		FUZZ_CHECK(out.len == 0, "a reply to a moreToCome message");
	} else {
		bson_t reply;
		size_t at = get32((const uint8_t *)out.data + 12) == WIRE_OP_MSG ? 21 : 36;

		FUZZ_CHECK(out.len > at && get32((const uint8_t *)out.data) == (int32_t)out.len,
			   "a reply of %zu bytes", out.len);
		FUZZ_CHECK(get32((const uint8_t *)out.data + 8) == m.h.request_id,
			   "responseTo is not the request's id");
		FUZZ_CHECK(bson_init_static(&reply, (const uint8_t *)out.data + at, out.len - at) &&
				   bson_validate(&reply, BSON_VALIDATE_NONE, &off),
			   "the reply is invalid BSON");
		FUZZ_CHECK(bson_has_field(&reply, "ok") || bson_has_field(&reply, "$err"),
			   "a reply without ok");
	}
	dfs_buf_release(&out);
	return 0;
}
