/*
 * test_wire.c - unit tests of the wire protocol's framing and command dispatch (fs/wire/):
 * golden byte fixtures of real messages (an OP_QUERY isMaster as every driver's first
 * message, an OP_MSG insert with a kind-1 "documents" section), checksums (CRC-32C's test
 * vector, a good and a damaged trailer), moreToCome (no reply at all), the malformed
 * messages that must close a connection (truncated, oversized, 2 GB, bad section kind,
 * unknown opcode, bad BSON lengths, nesting), and replies: the handshake's fields, ping,
 * CommandNotFound, TypeMismatch and CursorNotFound, and a find and getMore over a store.
 */
#include "wire.h"
#include "fs_int.h"
#include "query.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* OP_QUERY {isMaster: 1} on admin.$cmd, requestID 1, numberToReturn -1. */
static const uint8_t op_query_ismaster[] = {
	0x3a, 0x00, 0x00, 0x00,					     /* messageLength 58 */
	0x01, 0x00, 0x00, 0x00,					     /* requestID 1 */
	0x00, 0x00, 0x00, 0x00,					     /* responseTo 0 */
	0xd4, 0x07, 0x00, 0x00,					     /* opCode 2004 */
	0x00, 0x00, 0x00, 0x00,					     /* flags */
	'a',  'd',  'm',  'i',	'n', '.', '$', 'c', 'm', 'd',  0x00, /* fullCollectionName */
	0x00, 0x00, 0x00, 0x00,					     /* numberToSkip */
	0xff, 0xff, 0xff, 0xff,					     /* numberToReturn -1 */
	0x13, 0x00, 0x00, 0x00,					     /* {isMaster: 1}: 19 bytes */
	0x10, 'i',  's',  'M',	'a', 's', 't', 'e', 'r', 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
};

/* OP_MSG {insert: "c", $db: "test"} with a kind-1 section "documents": [{_id: 1}]. */
static const uint8_t op_msg_insert[] = {
	0x53, 0x00, 0x00, 0x00, /* messageLength 83 */
	0x07, 0x00, 0x00, 0x00, /* requestID 7 */
	0x00, 0x00, 0x00, 0x00, /* responseTo */
	0xdd, 0x07, 0x00, 0x00, /* opCode 2013 */
	0x00, 0x00, 0x00, 0x00, /* flagBits */
	0x00,			/* kind 0 */
	0x21, 0x00, 0x00, 0x00, /* 33 bytes */
	0x02, 'i',  'n',  's',	'e',  'r',  't',  0x00, 0x02, 0x00, 0x00, 0x00,
	'c',  0x00, 0x02, '$',	'd',  'b',  0x00, 0x05, 0x00, 0x00, 0x00, 't',
	'e',  's',  't',  0x00, 0x00, 0x01, /* kind 1 */
	0x1c, 0x00, 0x00, 0x00,		    /* section size 28 */
	'd',  'o',  'c',  'u',	'm',  'e',  'n',  't',	's',  0x00, 0x0e, 0x00,
	0x00, 0x00, 0x10, '_',	'i',  'd',  0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
};

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static int32_t get32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
}

/* An OP_MSG of flags with body (kind 0), and a checksum when flags say so. */
static void build_msg(struct dfs_buf *out, uint32_t flags, const bson_t *body, int32_t id)
{
	uint8_t h[20];

	dfs_buf_reset(out);
	put32(h, 0);
	put32(h + 4, (uint32_t)id);
	put32(h + 8, 0);
	put32(h + 12, WIRE_OP_MSG);
	put32(h + 16, flags);
	dfs_buf_append(out, h, 20);
	dfs_buf_putc(out, 0);
	dfs_buf_append(out, bson_get_data(body), body->len);
	if (flags & WIRE_MSG_CHECKSUM) {
		uint8_t c[4];

		put32((uint8_t *)out->data, (uint32_t)out->len + 4);
		put32(c, wire_crc32c((const uint8_t *)out->data, out->len));
		dfs_buf_append(out, c, 4);
	}
	put32((uint8_t *)out->data, (uint32_t)out->len);
}

static void doc(const char *text, bson_t *out)
{
	struct dfs_err err = {0};

	bson_init(out);
	ck_assert_msg(store_codec_parse_doc(text, strlen(text), out, &err) == 0, "%s", err.msg);
}

/* The reply document of a reply message (OP_MSG or OP_REPLY) into out (a copy). */
static void reply_doc(const struct dfs_buf *r, bson_t *out)
{
	const uint8_t *p = (const uint8_t *)r->data;
	int32_t op;
	size_t off;
	bson_t view;

	ck_assert_uint_ge(r->len, 21);
	ck_assert_int_eq(get32(p), (int32_t)r->len);
	op = get32(p + 12);
	off = op == WIRE_OP_MSG ? 21 : 36;
	ck_assert(op == WIRE_OP_MSG || op == WIRE_OP_REPLY);
	ck_assert(bson_init_static(&view, p + off, r->len - off));
	bson_copy_to(&view, out);
}

static int64_t get_int(const bson_t *d, const char *path)
{
	bson_iter_t it, f;

	ck_assert_msg(bson_iter_init(&it, d) && bson_iter_find_descendant(&it, path, &f), "%s",
		      path);
	return bson_iter_as_int64(&f);
}

static const char *get_str(const bson_t *d, const char *path)
{
	bson_iter_t it, f;

	ck_assert_msg(bson_iter_init(&it, d) && bson_iter_find_descendant(&it, path, &f), "%s",
		      path);
	return bson_iter_utf8(&f, NULL);
}

/* Runs the message through the dispatch; the reply into out (reset first). */
static void dispatch(struct store *s, const struct dfs_buf *in, struct dfs_buf *out)
{
	struct dfs_err err = {0};
	struct wire_msg m;

	dfs_buf_reset(out);
	ck_assert_msg(wire_msg_parse((const uint8_t *)in->data, in->len, &m, &err) == 0, "%s",
		      err.msg);
	wire_dispatch(s, NULL, 42, &m, 99, out);
}

/* Expects wire_msg_parse to refuse p with a message containing what. */
static void refused(const uint8_t *p, size_t n, const char *what)
{
	struct dfs_err err = {0};
	struct wire_msg m;

	ck_assert_int_eq(wire_msg_parse(p, n, &m, &err), DFS_EINVAL);
	ck_assert_msg(strstr(err.msg, what), "'%s' does not say '%s'", err.msg, what);
}

START_TEST(test_wire_header_parse_limits)
{
	struct dfs_err err = {0};
	struct wire_header h;
	uint8_t b[16] = {0};

	ck_assert_int_eq(wire_header_parse(op_query_ismaster, sizeof(op_query_ismaster), &h, &err),
			 0);
	ck_assert_int_eq(h.len, 58);
	ck_assert_int_eq(h.request_id, 1);
	ck_assert_int_eq(h.opcode, WIRE_OP_QUERY);
	put32(b, 0x7fffffff); /* a 2 GB length prefix */
	ck_assert_int_eq(wire_header_parse(b, 16, &h, &err), DFS_EINVAL);
	ck_assert(strstr(err.msg, "over the limit"));
	dfs_err_clear(&err);
	put32(b, WIRE_MAX_MSG + 1);
	ck_assert_int_eq(wire_header_parse(b, 16, &h, &err), DFS_EINVAL);
	put32(b, WIRE_MAX_MSG);
	ck_assert_int_eq(wire_header_parse(b, 16, &h, &err), 0);
	put32(b, 0xfffffff0u); /* negative */
	ck_assert_int_eq(wire_header_parse(b, 16, &h, &err), DFS_EINVAL);
	put32(b, 16);
	ck_assert_int_eq(wire_header_parse(b, 16, &h, &err), DFS_EINVAL);
	ck_assert_int_eq(wire_header_parse(b, 15, &h, &err), DFS_EINVAL);
}
END_TEST

START_TEST(test_wire_msg_parse_op_query_ismaster)
{
	struct dfs_err err = {0};
	struct wire_msg m;
	bson_iter_t it;

	ck_assert_int_eq(wire_msg_parse(op_query_ismaster, sizeof(op_query_ismaster), &m, &err), 0);
	ck_assert_str_eq(m.ns, "admin.$cmd");
	ck_assert_int_eq(m.nreturn, -1);
	ck_assert(bson_iter_init(&it, &m.body) && bson_iter_next(&it));
	ck_assert_str_eq(bson_iter_key(&it), "isMaster");
	ck_assert_int_eq(bson_iter_int32(&it), 1);
}
END_TEST

START_TEST(test_wire_msg_parse_kind1)
{
	struct dfs_err err = {0};
	struct wire_msg m;
	bson_iter_t it;
	int n = 0;

	ck_assert_int_eq(wire_msg_parse(op_msg_insert, sizeof(op_msg_insert), &m, &err), 0);
	ck_assert_uint_eq(m.flags, 0);
	ck_assert_str_eq(get_str(&m.body, "insert"), "c");
	ck_assert_str_eq(get_str(&m.body, "$db"), "test");
	ck_assert_int_eq(m.nseq, 1);
	ck_assert_str_eq(m.seq[0].id, "documents");
	ck_assert_uint_eq(m.seq[0].len, 14);
	{
		bson_t d;

		ck_assert(bson_init_static(&d, m.seq[0].data, m.seq[0].len));
		ck_assert(bson_iter_init_find(&it, &d, "_id"));
		ck_assert_int_eq(bson_iter_int32(&it), 1);
		n++;
	}
	ck_assert_int_eq(n, 1);
}
END_TEST

START_TEST(test_wire_msg_parse_malformed)
{
	uint8_t b[sizeof(op_msg_insert)];

	/* truncated: the length says more than there is */
	refused(op_msg_insert, sizeof(op_msg_insert) - 1, "message length 83 but 82");
	/* a kind-1 section whose size runs past the message */
	memcpy(b, op_msg_insert, sizeof(b));
	b[55] = 0x40;
	refused(b, sizeof(b), "section size 64");
	/* an unknown section kind */
	memcpy(b, op_msg_insert, sizeof(b));
	b[54] = 2;
	refused(b, sizeof(b), "unknown section kind 2");
	/* an unknown opcode (OP_COMPRESSED is never offered) */
	memcpy(b, op_msg_insert, sizeof(b));
	put32(b + 12, WIRE_OP_COMPRESSED);
	refused(b, sizeof(b), "unknown opcode 2012");
	/* a required flag bit docfs does not know */
	memcpy(b, op_msg_insert, sizeof(b));
	b[16] = 0x04;
	refused(b, sizeof(b), "unknown required flag bits");
	/* bits 16-31 (exhaustAllowed) are optional */
	memcpy(b, op_msg_insert, sizeof(b));
	b[18] = 0x01;
	{
		struct dfs_err err = {0};
		struct wire_msg m;

		ck_assert_int_eq(wire_msg_parse(b, sizeof(b), &m, &err), 0);
	}
	/* a document whose length does not fit */
	memcpy(b, op_msg_insert, sizeof(b));
	b[21] = 0x50;
	refused(b, sizeof(b), "does not fit");
	/* a document whose inner length is wrong: invalid BSON */
	memcpy(b, op_msg_insert, sizeof(b));
	b[34] = 0x09; /* the string length of "c" */
	refused(b, sizeof(b), "invalid BSON");
	/* a kind-1 document with a bad length */
	memcpy(b, op_msg_insert, sizeof(b));
	b[69] = 0x0f;
	refused(b, sizeof(b), "OP_MSG section");
}
END_TEST

START_TEST(test_wire_msg_parse_sections)
{
	struct dfs_buf m;
	bson_t body;
	uint8_t two[21 + 2 * 5 + 1];

	dfs_buf_init(&m);
	/* no kind-0 section: a kind-1 alone */
	{
		uint8_t b[] = {0x00, 0x00, 0x00, 0x00, 1, 0,  0, 0, 0, 0,   0, 0, 0xdd, 0x07, 0, 0,
			       0,    0,	   0,	 0,    1, 11, 0, 0, 0, 'x', 0, 5, 0,	0,    0, 0};

		put32(b, sizeof(b));
		refused(b, sizeof(b), "no kind-0 section");
	}
	/* two kind-0 sections */
	memset(two, 0, sizeof(two));
	put32(two, sizeof(two));
	put32(two + 12, WIRE_OP_MSG);
	two[20] = 0;
	put32(two + 21, 5);
	two[26] = 0;
	put32(two + 27, 5);
	refused(two, sizeof(two), "two kind-0 sections");
	/* nesting deeper than 200 levels */
	{
		bson_t *inner = bson_new(); /* (a bson_t must not be copied by assignment) */

		for (int i = 0; i < 250; i++) {
			bson_t *outer = bson_new();

			BSON_APPEND_DOCUMENT(outer, "a", inner);
			bson_destroy(inner);
			inner = outer;
		}
		bson_init(&body);
		BSON_APPEND_DOCUMENT(&body, "ping", inner);
		BSON_APPEND_UTF8(&body, "$db", "admin");
		build_msg(&m, 0, &body, 1);
		refused((const uint8_t *)m.data, m.len, "invalid BSON");
		bson_destroy(inner);
		bson_destroy(&body);
	}
	dfs_buf_release(&m);
}
END_TEST

START_TEST(test_wire_crc32c_checksum)
{
	struct dfs_err err = {0};
	struct dfs_buf m;
	struct wire_msg msg;
	bson_t body;

	ck_assert_uint_eq(wire_crc32c((const uint8_t *)"123456789", 9), 0xe3069283u);
	dfs_buf_init(&m);
	doc("{ping: 1, $db: 'admin'}", &body);
	build_msg(&m, WIRE_MSG_CHECKSUM, &body, 5);
	ck_assert_int_eq(wire_msg_parse((const uint8_t *)m.data, m.len, &msg, &err), 0);
	ck_assert_uint_eq(msg.flags, WIRE_MSG_CHECKSUM);
	ck_assert_str_eq(get_str(&msg.body, "$db"), "admin");
	m.data[m.len - 1] ^= 0x55;
	refused((const uint8_t *)m.data, m.len, "checksum mismatch");
	bson_destroy(&body);
	dfs_buf_release(&m);
}
END_TEST

START_TEST(test_wire_dispatch_handshake_op_query)
{
	struct dfs_buf in, out;
	bson_t r;
	bson_iter_t it;

	dfs_buf_init(&in);
	dfs_buf_init(&out);
	dfs_buf_append(&in, op_query_ismaster, sizeof(op_query_ismaster));
	dispatch(NULL, &in, &out);
	ck_assert_int_eq(get32((const uint8_t *)out.data + 12), WIRE_OP_REPLY);
	ck_assert_int_eq(get32((const uint8_t *)out.data + 8), 1);  /* responseTo */
	ck_assert_int_eq(get32((const uint8_t *)out.data + 32), 1); /* numberReturned */
	reply_doc(&out, &r);
	ck_assert(bson_iter_init_find(&it, &r, "ismaster") && bson_iter_as_bool(&it));
	ck_assert_int_eq(get_int(&r, "maxWireVersion"), 21);
	ck_assert_int_eq(get_int(&r, "minWireVersion"), 0);
	ck_assert_int_eq(get_int(&r, "maxBsonObjectSize"), 16777216);
	ck_assert_int_eq(get_int(&r, "maxMessageSizeBytes"), 48000000);
	ck_assert_int_eq(get_int(&r, "maxWriteBatchSize"), 100000);
	ck_assert_int_eq(get_int(&r, "logicalSessionTimeoutMinutes"), 30);
	ck_assert_int_eq(get_int(&r, "connectionId"), 42);
	ck_assert(bson_iter_init_find(&it, &r, "localTime") && BSON_ITER_HOLDS_DATE_TIME(&it));
	ck_assert(!bson_has_field(&r, "topologyVersion"));
	ck_assert(!bson_has_field(&r, "compression"));
	ck_assert(!bson_has_field(&r, "isWritablePrimary"));
	ck_assert_int_eq(get_int(&r, "ok"), 1);
	bson_destroy(&r);
	/* anything but the handshake over OP_QUERY: $err */
	in.data[44] = 'x'; /* {xyMaster: 1} */
	in.data[45] = 'y';
	dispatch(NULL, &in, &out);
	reply_doc(&out, &r);
	ck_assert(bson_has_field(&r, "$err"));
	ck_assert_int_eq(get32((const uint8_t *)out.data + 16), 2); /* QueryFailure */
	bson_destroy(&r);
	dfs_buf_release(&in);
	dfs_buf_release(&out);
}
END_TEST

START_TEST(test_wire_dispatch_op_msg)
{
	struct dfs_buf in, out;
	bson_t body, r;
	bson_iter_t it;

	dfs_buf_init(&in);
	dfs_buf_init(&out);
	doc("{hello: 1, helloOk: true, $db: 'admin'}", &body);
	build_msg(&in, 0, &body, 11);
	bson_destroy(&body);
	dispatch(NULL, &in, &out);
	ck_assert_int_eq(get32((const uint8_t *)out.data + 8), 11);
	ck_assert_int_eq(get32((const uint8_t *)out.data + 12), WIRE_OP_MSG);
	ck_assert_int_eq(get32((const uint8_t *)out.data + 16), 0); /* no flags, no checksum */
	reply_doc(&out, &r);
	ck_assert(bson_iter_init_find(&it, &r, "isWritablePrimary") && bson_iter_as_bool(&it));
	ck_assert(bson_iter_init_find(&it, &r, "helloOk") && bson_iter_as_bool(&it));
	bson_destroy(&r);

	/* moreToCome: no reply at all */
	doc("{ping: 1, $db: 'admin'}", &body);
	build_msg(&in, WIRE_MSG_MORE, &body, 12);
	dispatch(NULL, &in, &out);
	ck_assert_uint_eq(out.len, 0);
	build_msg(&in, 0, &body, 12);
	bson_destroy(&body);
	dispatch(NULL, &in, &out);
	reply_doc(&out, &r);
	ck_assert_int_eq(get_int(&r, "ok"), 1);
	bson_destroy(&r);

	/* an unknown command, with generic arguments that are ignored */
	doc("{noSuchCommand: 1, lsid: {id: UUID('00112233-4455-6677-8899-aabbccddeeff')}, "
	    "$readPreference: {mode: 'primary'}, $db: 'admin'}",
	    &body);
	build_msg(&in, 0, &body, 13);
	bson_destroy(&body);
	dispatch(NULL, &in, &out);
	reply_doc(&out, &r);
	ck_assert_int_eq(get_int(&r, "ok"), 0);
	ck_assert_int_eq(get_int(&r, "code"), 59);
	ck_assert_str_eq(get_str(&r, "codeName"), "CommandNotFound");
	ck_assert(strstr(get_str(&r, "errmsg"), "noSuchCommand"));
	bson_destroy(&r);

	/* getMore: an int32 id is TypeMismatch, an unknown int64 one CursorNotFound */
	doc("{getMore: 5, collection: 'c', $db: 'test'}", &body);
	build_msg(&in, 0, &body, 14);
	bson_destroy(&body);
	dispatch(NULL, &in, &out);
	reply_doc(&out, &r);
	ck_assert_int_eq(get_int(&r, "code"), 14);
	bson_destroy(&r);
	doc("{getMore: NumberLong(123456789), collection: 'c', $db: 'test'}", &body);
	build_msg(&in, 0, &body, 15);
	bson_destroy(&body);
	dispatch(NULL, &in, &out);
	reply_doc(&out, &r);
	ck_assert_int_eq(get_int(&r, "code"), 43);
	ck_assert_str_eq(get_str(&r, "codeName"), "CursorNotFound");
	bson_destroy(&r);

	/* no $db */
	doc("{ping: 1}", &body);
	build_msg(&in, 0, &body, 16);
	bson_destroy(&body);
	dispatch(NULL, &in, &out);
	reply_doc(&out, &r);
	ck_assert_int_eq(get_int(&r, "ok"), 0);
	bson_destroy(&r);

	/* a standalone */
	doc("{replSetGetStatus: 1, $db: 'admin'}", &body);
	build_msg(&in, 0, &body, 17);
	bson_destroy(&body);
	dispatch(NULL, &in, &out);
	reply_doc(&out, &r);
	ck_assert_int_eq(get_int(&r, "code"), 76);
	bson_destroy(&r);
	dfs_buf_release(&in);
	dfs_buf_release(&out);
}
END_TEST

/* A command through the dispatch over s: its reply into r. */
static void command(struct store *s, const char *text, const struct dfs_buf *seq, bson_t *r)
{
	struct dfs_buf in, out;
	bson_t body;

	dfs_buf_init(&in);
	dfs_buf_init(&out);
	doc(text, &body);
	build_msg(&in, 0, &body, 20);
	bson_destroy(&body);
	if (seq) {
		dfs_buf_append(&in, seq->data, seq->len);
		put32((uint8_t *)in.data, (uint32_t)in.len);
	}
	dispatch(s, &in, &out);
	reply_doc(&out, r);
	dfs_buf_release(&in);
	dfs_buf_release(&out);
}

START_TEST(test_wire_dispatch_find_get_more)
{
	char dir[] = "/tmp/test_wire_XXXXXX";
	struct dfs_err err = {0};
	struct store *s;
	struct dfs_buf seq;
	bson_t r;
	int64_t id;
	uint8_t hdr[4];

	ck_assert(mkdtemp(dir));
	ck_assert_int_eq(store_open(dir, true, &s, &err), 0);
	/* 250 documents in one kind-1 section */
	dfs_buf_init(&seq);
	dfs_buf_putc(&seq, 1);
	dfs_buf_append(&seq, "\0\0\0\0documents", 14);
	for (int i = 0; i < 250; i++) {
		bson_t d = BSON_INITIALIZER;

		BSON_APPEND_INT32(&d, "_id", i);
		BSON_APPEND_INT32(&d, "x", i % 10);
		dfs_buf_append(&seq, bson_get_data(&d), d.len);
		bson_destroy(&d);
	}
	put32(hdr, (uint32_t)seq.len - 1);
	memcpy(seq.data + 1, hdr, 4);
	command(s, "{insert: 'c', ordered: true, $db: 'test'}", &seq, &r);
	ck_assert_int_eq(get_int(&r, "n"), 250);
	bson_destroy(&r);
	/* a duplicate: writeErrors with ok 1, the documents before it kept (ordered) */
	command(s, "{insert: 'c', documents: [{_id: 1000}, {_id: 3}, {_id: 1001}], $db: 'test'}",
		NULL, &r);
	ck_assert_int_eq(get_int(&r, "ok"), 1);
	ck_assert_int_eq(get_int(&r, "n"), 1);
	ck_assert_int_eq(get_int(&r, "writeErrors.0.index"), 1);
	ck_assert_int_eq(get_int(&r, "writeErrors.0.code"), 11000);
	ck_assert_str_eq(get_str(&r, "writeErrors.0.errmsg"),
			 "E11000 duplicate key error collection: test.c index: _id_ dup key: "
			 "{ _id: 3 }");
	bson_destroy(&r);
	command(s, "{count: 'c', query: {x: 3}, $db: 'test'}", NULL, &r);
	ck_assert_int_eq(get_int(&r, "n"), 25);
	bson_destroy(&r);
	/* the first batch: 101 by default; then getMore by batchSize */
	command(s, "{find: 'c', filter: {}, sort: {_id: 1}, $db: 'test'}", NULL, &r);
	ck_assert_int_eq(get_int(&r, "cursor.firstBatch.100._id"), 100);
	ck_assert(!bson_has_field(&r, "cursor.firstBatch.101"));
	ck_assert_str_eq(get_str(&r, "cursor.ns"), "test.c");
	id = get_int(&r, "cursor.id");
	ck_assert_int_ne(id, 0);
	bson_destroy(&r);
	{
		char text[160];

		snprintf(
			text, sizeof(text),
			"{getMore: NumberLong(%lld), collection: 'c', batchSize: 100, $db: 'test'}",
			(long long)id);
		command(s, text, NULL, &r);
		ck_assert_int_eq(get_int(&r, "cursor.nextBatch.0._id"), 101);
		ck_assert_int_eq(get_int(&r, "cursor.nextBatch.99._id"), 200);
		ck_assert_int_eq(get_int(&r, "cursor.id"), id);
		bson_destroy(&r);
		command(s, text, NULL, &r);
		ck_assert_int_eq(get_int(&r, "cursor.nextBatch.0._id"), 201);
		ck_assert_int_eq(get_int(&r, "cursor.nextBatch.48._id"), 249);
		ck_assert_int_eq(get_int(&r, "cursor.nextBatch.49._id"), 1000);
		ck_assert_int_eq(get_int(&r, "cursor.id"), 0); /* exhausted, closed */
		bson_destroy(&r);
		command(s, text, NULL, &r);
		ck_assert_int_eq(get_int(&r, "code"), 43);
		bson_destroy(&r);
	}
	ck_assert_int_eq(wire_cursor_count(), 0);
	store_free(s);
	dfs_buf_release(&seq);
	{
		char cmd[64];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		ck_assert_int_eq(system(cmd), 0);
	}
}
END_TEST

/* A route hook as the router's: answers addShard itself, fails shardCollection, passes the
 * rest to the table. */
static int test_hook(struct wire_ctx *c, bson_t *reply)
{
	if (!strcmp(c->name, "addShard")) {
		BSON_APPEND_UTF8(reply, "shardAdded", c->db);
		return 0;
	}
	if (!strcmp(c->name, "shardCollection"))
		return wire_fail(c, 13, "Unauthorized", "only on admin");
	return WIRE_ROUTE_PASS;
}

START_TEST(test_wire_dispatch_route_hook)
{
	bson_t r;

	wire_route_hook = test_hook;
	/* answered by the hook, though the table refuses addShard (238) */
	command(NULL, "{addShard: '/x', $db: 'admin'}", NULL, &r);
	ck_assert_str_eq(get_str(&r, "shardAdded"), "admin");
	ck_assert_int_eq(get_int(&r, "ok"), 1);
	bson_destroy(&r);
	/* its error in MongoDB's shape */
	command(NULL, "{shardCollection: 'a.b', $db: 'test'}", NULL, &r);
	ck_assert_int_eq(get_int(&r, "ok"), 0);
	ck_assert_int_eq(get_int(&r, "code"), 13);
	ck_assert_str_eq(get_str(&r, "codeName"), "Unauthorized");
	bson_destroy(&r);
	/* passed: the table's handler, and its errors */
	command(NULL, "{ping: 1, $db: 'admin'}", NULL, &r);
	ck_assert_int_eq(get_int(&r, "ok"), 1);
	bson_destroy(&r);
	command(NULL, "{nosuch: 1, $db: 'admin'}", NULL, &r);
	ck_assert_int_eq(get_int(&r, "code"), 59);
	bson_destroy(&r);
	wire_route_hook = NULL;
	command(NULL, "{addShard: '/x', $db: 'admin'}", NULL, &r);
	ck_assert_int_eq(get_int(&r, "code"), 238);
	bson_destroy(&r);
}
END_TEST

static Suite *wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_wire_header_parse_limits);
	tcase_add_test(tc, test_wire_msg_parse_op_query_ismaster);
	tcase_add_test(tc, test_wire_msg_parse_kind1);
	tcase_add_test(tc, test_wire_msg_parse_malformed);
	tcase_add_test(tc, test_wire_msg_parse_sections);
	tcase_add_test(tc, test_wire_crc32c_checksum);
	tcase_add_test(tc, test_wire_dispatch_handshake_op_query);
	tcase_add_test(tc, test_wire_dispatch_op_msg);
	tcase_add_test(tc, test_wire_dispatch_find_get_more);
	tcase_add_test(tc, test_wire_dispatch_route_hook);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(wire_suite());
	int failed;

	query_init();
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
