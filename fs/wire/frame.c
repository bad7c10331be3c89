/*
 * frame.c - MongoDB's messages as bytes: the 16-byte header, OP_MSG (flagBits, kind-0 and
 * kind-1 sections, the CRC-32C trailer of checksumPresent), OP_QUERY for the handshake, and
 * the replies (OP_MSG, OP_REPLY). Pure functions over buffers: no sockets, no store. Every
 * document is checked here (lengths, nesting, structure) so that nothing after it reads
 * past a message; what a command means is dispatch.c's.
 *
 * Not done here: OP_COMPRESSED (the handshake never offers compression, so clients never
 * send it: it is an unknown opcode), the legacy OP_INSERT/OP_UPDATE/OP_DELETE/OP_GET_MORE
 * (removed in MongoDB 6.0; unknown opcodes too).
 */
#include "wire.h"

#include <string.h>

#define MAX_DEPTH 200 /* nesting of a message's documents (MongoDB's BSONDepth limit) */

static int32_t get32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
}

static void put32(uint8_t *p, int32_t v)
{
	uint32_t u = (uint32_t)v;

	p[0] = (uint8_t)u;
	p[1] = (uint8_t)(u >> 8);
	p[2] = (uint8_t)(u >> 16);
	p[3] = (uint8_t)(u >> 24);
}

uint32_t wire_crc32c(const uint8_t *p, size_t n)
{
	static uint32_t table[256];
	static volatile int ready;
	uint32_t crc = 0xffffffffu;

	if (!ready) { /* idempotent: racing threads write the same values */
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
			table[i] = c;
		}
		ready = 1;
	}
	for (size_t i = 0; i < n; i++)
		crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return crc ^ 0xffffffffu;
}

int wire_header_parse(const uint8_t *p, size_t n, struct wire_header *h, struct dfs_err *err)
{
	if (n < WIRE_HEADER_LEN)
		return dfs_err_set(err, DFS_EINVAL, "message header truncated (%zu bytes)", n);
	h->len = get32(p);
	h->request_id = get32(p + 4);
	h->response_to = get32(p + 8);
	h->opcode = get32(p + 12);
	if (h->len < WIRE_HEADER_LEN + 5)
		return dfs_err_set(err, DFS_EINVAL, "message length %d is too small", h->len);
	if (h->len > WIRE_MAX_MSG)
		return dfs_err_set(err, DFS_EINVAL,
				   "message length %d is over the limit of %d bytes", h->len,
				   WIRE_MAX_MSG);
	return 0;
}

/* Walks doc's elements to depth MAX_DEPTH: 0 when its structure is sound. Bounded
 * recursion, before libbson's own (unbounded) validation is let near it. */
static int walk(const bson_t *doc, int depth)
{
	bson_iter_t it;

	if (depth > MAX_DEPTH || !bson_iter_init(&it, doc))
		return -1;
	while (bson_iter_next(&it)) {
		if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
			const uint8_t *data;
			uint32_t len;
			bson_t child;

			if (BSON_ITER_HOLDS_DOCUMENT(&it))
				bson_iter_document(&it, &len, &data);
			else
				bson_iter_array(&it, &len, &data);
			if (!data || !bson_init_static(&child, data, len) ||
			    walk(&child, depth + 1))
				return -1;
		}
	}
	return it.err_off ? -1 : 0;
}

/* Checks the document at p (at most n bytes): *len gets its length. */
static int doc_check(const uint8_t *p, size_t n, const char *what, bson_t *view, size_t *len,
		     struct dfs_err *err)
{
	int32_t l;
	size_t off;

	if (n < 5)
		return dfs_err_set(err, DFS_EINVAL, "%s: truncated document", what);
	l = get32(p);
	if (l < 5 || (size_t)l > n)
		return dfs_err_set(err, DFS_EINVAL,
				   "%s: document length %d does not fit in %zu bytes", what, l, n);
	if (!bson_init_static(view, p, (size_t)l) || walk(view, 1) ||
	    !bson_validate(view, BSON_VALIDATE_NONE, &off))
		return dfs_err_set(err, DFS_EINVAL, "%s: invalid BSON", what);
	*len = (size_t)l;
	return 0;
}

static int parse_msg(const uint8_t *p, size_t n, struct wire_msg *m, struct dfs_err *err)
{
	size_t off = WIRE_HEADER_LEN + 4, end = n, dlen;
	bool body = false;

	m->flags = (uint32_t)get32(p + WIRE_HEADER_LEN);
	if (m->flags & 0xfffcu)
		return dfs_err_set(err, DFS_EINVAL, "OP_MSG: unknown required flag bits 0x%x",
				   m->flags & 0xffffu);
	if (m->flags & WIRE_MSG_CHECKSUM) {
		if (n < off + 4)
			return dfs_err_set(err, DFS_EINVAL, "OP_MSG: no room for the checksum");
		end = n - 4;
		if ((uint32_t)get32(p + end) != wire_crc32c(p, end))
			return dfs_err_set(err, DFS_EINVAL, "OP_MSG: checksum mismatch");
	}
	if (off >= end)
		return dfs_err_set(err, DFS_EINVAL, "OP_MSG: no sections");
	while (off < end) {
		uint8_t kind = p[off++];

		if (kind == 0) {
			if (body)
				return dfs_err_set(err, DFS_EINVAL, "OP_MSG: two kind-0 sections");
			if (doc_check(p + off, end - off, "OP_MSG body", &m->body, &dlen, err))
				return DFS_EINVAL;
			body = true;
			off += dlen;
		} else if (kind == 1) {
			struct wire_seq *s;
			int32_t size;
			size_t idlen, o, send;

			if (end - off < 4)
				return dfs_err_set(err, DFS_EINVAL, "OP_MSG: truncated section");
			size = get32(p + off);
			if (size < 5 || (size_t)size > end - off)
				return dfs_err_set(
					err, DFS_EINVAL,
					"OP_MSG: section size %d does not fit in %zu bytes", size,
					end - off);
			if (m->nseq == WIRE_MAX_SEQS)
				return dfs_err_set(err, DFS_EINVAL, "OP_MSG: more than %d sections",
						   WIRE_MAX_SEQS);
			send = off + (size_t)size;
			o = off + 4;
			idlen = strnlen((const char *)p + o, send - o);
			if (o + idlen == send)
				return dfs_err_set(err, DFS_EINVAL,
						   "OP_MSG: section identifier not terminated");
			s = &m->seq[m->nseq];
			if (idlen >= sizeof(s->id))
				return dfs_err_set(err, DFS_EINVAL,
						   "OP_MSG: section identifier too long");
			memcpy(s->id, p + o, idlen + 1);
			o += idlen + 1;
			s->data = p + o;
			s->len = send - o;
			while (o < send) {
				bson_t d;

				if (doc_check(p + o, send - o, "OP_MSG section", &d, &dlen, err))
					return DFS_EINVAL;
				o += dlen;
			}
			m->nseq++;
			off = send;
		} else {
			return dfs_err_set(err, DFS_EINVAL, "OP_MSG: unknown section kind %u",
					   kind);
		}
	}
	if (!body)
		return dfs_err_set(err, DFS_EINVAL, "OP_MSG: no kind-0 section");
	return 0;
}

static int parse_query(const uint8_t *p, size_t n, struct wire_msg *m, struct dfs_err *err)
{
	size_t off = WIRE_HEADER_LEN + 4, nslen, dlen;
	bson_t fields;

	m->flags = (uint32_t)get32(p + WIRE_HEADER_LEN);
	nslen = off < n ? strnlen((const char *)p + off, n - off) : 0;
	if (off + nslen >= n)
		return dfs_err_set(err, DFS_EINVAL, "OP_QUERY: collection name not terminated");
	m->ns = (const char *)p + off;
	off += nslen + 1;
	if (n - off < 8)
		return dfs_err_set(err, DFS_EINVAL, "OP_QUERY: truncated");
	m->nskip = get32(p + off);
	m->nreturn = get32(p + off + 4);
	off += 8;
	if (doc_check(p + off, n - off, "OP_QUERY query", &m->body, &dlen, err))
		return DFS_EINVAL;
	off += dlen;
	if (off < n) {
		if (doc_check(p + off, n - off, "OP_QUERY returnFieldsSelector", &fields, &dlen,
			      err))
			return DFS_EINVAL;
		off += dlen;
	}
	if (off != n)
		return dfs_err_set(err, DFS_EINVAL, "OP_QUERY: %zu bytes after the documents",
				   n - off);
	return 0;
}

int wire_msg_parse(const uint8_t *p, size_t n, struct wire_msg *m, struct dfs_err *err)
{
	int rc;

	memset(m, 0, sizeof(*m));
	bson_init(&m->body);
	if ((rc = wire_header_parse(p, n, &m->h, err)))
		return rc;
	if ((size_t)m->h.len != n)
		return dfs_err_set(err, DFS_EINVAL, "message length %d but %zu bytes", m->h.len, n);
	if (m->h.opcode == WIRE_OP_MSG)
		rc = parse_msg(p, n, m, err);
	else if (m->h.opcode == WIRE_OP_QUERY)
		rc = parse_query(p, n, m, err);
	else
		rc = dfs_err_set(err, DFS_EINVAL, "unknown opcode %d", m->h.opcode);
	if (rc) {
		m->nseq = 0;
		m->ns = NULL;
		bson_init(&m->body);
	}
	return rc;
}

int wire_seq_each(const struct wire_seq *seq, int (*cb)(void *ctx, const bson_t *doc), void *ctx)
{
	size_t off = 0;

	while (off + 5 <= seq->len) {
		size_t l = (size_t)get32(seq->data + off);
		bson_t d;
		int rc;

		if (l < 5 || l > seq->len - off || !bson_init_static(&d, seq->data + off, l))
			return -1; /* cannot happen after wire_msg_parse */
		if ((rc = cb(ctx, &d)))
			return rc;
		off += l;
	}
	return 0;
}

/* Appends a header whose length the caller patches once the message is whole. */
static void header(struct dfs_buf *out, int32_t request_id, int32_t response_to, int32_t opcode)
{
	uint8_t h[WIRE_HEADER_LEN];

	put32(h, 0);
	put32(h + 4, request_id);
	put32(h + 8, response_to);
	put32(h + 12, opcode);
	dfs_buf_append(out, h, sizeof(h));
}

void wire_reply_msg(struct dfs_buf *out, int32_t request_id, int32_t response_to, const bson_t *doc)
{
	size_t at = out->len;
	uint8_t b[5] = {0, 0, 0, 0, 0};

	header(out, request_id, response_to, WIRE_OP_MSG);
	dfs_buf_append(out, b, 5); /* flagBits 0, then kind 0 */
	dfs_buf_append(out, bson_get_data(doc), doc->len);
	put32((uint8_t *)out->data + at, (int32_t)(out->len - at));
}

void wire_reply_op_reply(struct dfs_buf *out, int32_t request_id, int32_t response_to,
			 int32_t flags, const bson_t *doc)
{
	size_t at = out->len;
	uint8_t b[20];

	header(out, request_id, response_to, WIRE_OP_REPLY);
	put32(b, flags);
	memset(b + 4, 0, 8); /* cursorID */
	put32(b + 12, 0);    /* startingFrom */
	put32(b + 16, 1);    /* numberReturned */
	dfs_buf_append(out, b, sizeof(b));
	dfs_buf_append(out, bson_get_data(doc), doc->len);
	put32((uint8_t *)out->data + at, (int32_t)(out->len - at));
}
