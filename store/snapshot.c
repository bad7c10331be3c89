/*
 * snapshot.c - git snapshots of a database or collection (store_snapshot), their listing
 * (store_snapshot_list) and restoring a collection from one (store_restore). Read-only
 * browsing of snapshots is snapgit.c; this file writes.
 *
 * Design notes
 * 1. Consistency: one read transaction (WAL snapshot) covers every document of the
 *    snapshot; writers go on. The incremental cache is written afterwards in a separate,
 *    short write transaction, and only after the commit's objects are on disk.
 * 2. The cache lives in the database file: snap_docs(repo, docid) -> (ctime, blob oid) and
 *    snap_colls(repo, coll) -> (ndocs, max ctime, total of ids, .indexes.json oid, tree, seq,
 *    next_id). repo is a 63-bit hash of the repository's real path; seq is the change feed's
 *    last sequence number and next_id the database's id counter, both read in the
 *    snapshot's transaction, so the cached tree is the collection as of seq. The cache of a
 *    collection counts only when its cached tree exists in the odb (one lookup per
 *    collection, never one per blob): after the repository was replaced or pruned every
 *    document is rendered again.
 * 3. Objects are not written loose. Blobs go straight into a temporary pack file, staged a
 *    megabyte at a time (stored, i.e. uncompressed, zlib blocks: libz is not linked and
 *    deflating is most of the cost of `git add`; `git gc` compresses later). Collection
 *    trees are serialized here (flat_write, tree_merge: a git_treebuilder costs a hash-map
 *    insertion and an allocation per entry, a million of them for a large collection). The
 *    database and root trees and the commit go through libgit2 (git_treebuilder,
 *    git_commit_create) into a mempack backend and are then copied into the same pack. The
 *    pack's header and sum are written at the end (pack_flush reads the file back for the
 *    sum: the object count comes first), with its version 2 .idx (each object's id, offset
 *    and CRC-32 are known when it is added, so libgit2's indexer, which inflates and hashes
 *    every object again, is not needed); a new pack starts every PACK_FLUSH bytes.
 *    git_mempack_dump is not used: it packs everything reachable from the commit (all 1M
 *    blobs again, with a delta search) where only the new objects are wanted.
 * 4. Strict object creation is turned off (process-wide, libgit2 option): tree entries refer
 *    to blobs that are only in the pending pack, and checking each reused blob would cost
 *    one odb lookup per document. Strict hash verification is turned off around the one
 *    read of a cached collection tree (tree_read), which checks the id itself with
 *    obj_hash (note 7), several times faster than libgit2's SHA-1 on 57 MB.
 * 5. Refs move only after the pack is written: the branch with a compare-and-swap against
 *    the parent read at the start, the tag (checked before anything is written) without
 *    force.
 * 6. A collection's tree is, in this order of preference:
 *    a. patched (coll_patch): the change feed (db.c note 5) logs every put and delete of
 *       an entry id with its name and collection, so the records of the collection since
 *       the cached seq name every document that changed. Inserts are logged once per
 *       transaction without ids (STORE_CH_INSERTS), but a fresh id is >= the cached
 *       next_id, so one range scan finds them. The cached tree is read once and merged in
 *       name order with the changed entries: every name a changed id had is removed
 *       (names are unique at any instant, so no unchanged document had it), and the
 *       documents now behind those ids are rendered and put in. Nothing logged for the
 *       collection and the same index blob: the cached tree is reused as it is.
 *    b. walked (coll_walk), when the feed cannot tell: it was pruned past the cached seq
 *       (the first record after seq is not seq + 1; seqs have no gaps), the collection
 *       was created, emptied, dropped or renamed since (STORE_CH_COLL), the cached row
 *       predates seq/next_id, or an insert took back a vacated id (doc.c note 2; logged
 *       without its id: then the count of documents differs from the patched tree's, and
 *       the count is checked whenever inserts were logged). The walk compares each row's
 *       ctime with snap_docs, which reuses the blob of a document whose ctime is the
 *       cached one; a collection whose fingerprint (count, max ctime, total of ids, index
 *       blob) equals the cached one is reused without reading any document. A patched
 *       row has no fingerprint (NULL), so only a walked one can be reused that way.
 *    Both give the same tree a snapshot without any cache gives (tested). A patched
 *    snapshot writes snap_docs rows only for the documents inserted since (they append);
 *    rewriting the rows of changed documents would dirty most pages of that table, and a
 *    stale row only makes a later walk render the document again.
 * 7. Object ids and the pack and index sums are computed here (obj_hash, sha1_*), with the
 *    CPU's SHA instructions when it has them and they agree with the portable code on a
 *    self-test, else the portable code. The same bytes always give the same ids: only
 *    speed depends on the CPU.
 * 8. Git keeps no owners and no modes but 644/755, so each collection tree has a blob
 *    ".attrs.json": the collection's owner (the default owner of its documents), the default
 *    mode 0644, and every document whose mode or owner differs, by name in byte order, so
 *    a walk and a patch write the same bytes. A walk collects them as it reads the rows; a
 *    patch starts from the cached tree's blob (snap_colls.attrs), drops every name the feed
 *    names and adds the changed documents (a chmod or chown is in the feed: setattr logs a
 *    put). A cached tree without the blob, or made while the collection had another owner
 *    (snap_colls.owner), is walked again. /.snapshots shows these attributes (snapgit.c)
 *    and restore puts them back.
 */
#include "snap_int.h"

#include <assert.h>
#include <errno.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PACK_FLUSH (256u << 20) /* bytes of pending pack before it is written out */

/* ---- libgit2 edge ------------------------------------------------------------------- */

int store__git_err(struct dfs_err *err, int code, const char *what)
{
	const git_error *e = git_error_last();

	return dfs_err_set(err, code, "%s: %s", what,
			   e && e->message ? e->message : "unknown libgit2 error");
}

static pthread_once_t git_opts_once = PTHREAD_ONCE_INIT;

static void git_opts_init(void)
{
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0); /* note 4 */
}

int store__git_open(struct store *s, const char *path, bool create, const char *branch,
		    git_repository **out, char **where, struct dfs_err *err)
{
	git_repository *repo = NULL;
	struct stat st;
	char *p;
	int rc = 0;

	if (path)
		p = strdup(path);
	else if (asprintf(&p, "%s/snapshots.git", store_path(s)) < 0)
		p = NULL;
	if (!p)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	git_libgit2_init();
	pthread_once(&git_opts_once, git_opts_init);
	if (stat(p, &st) == 0) {
		if (git_repository_open_ext(&repo, p, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) != 0) {
			rc = dfs_err_set(err, DFS_EINVAL, "'%s' is not a git repository", p);
			goto done;
		}
	} else if (errno != ENOENT) {
		rc = dfs_err_set(err, DFS_EIO, "cannot access '%s': %s", p, strerror(errno));
		goto done;
	} else if (!create) {
		rc = dfs_err_set(err, DFS_ENOENT, "no snapshot repository '%s'", p);
		goto done;
	} else {
		git_repository_init_options io;
		char head[300];

		git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
		snprintf(head, sizeof(head), "refs/heads/%s", branch ? branch : "main");
		io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
		io.initial_head = head;
		if (git_repository_init_ext(&repo, p, &io) != 0) {
			rc = store__git_err(err, DFS_EIO, "cannot create snapshot repository");
			goto done;
		}
	}
done:
	if (rc) {
		git_repository_free(repo);
		git_libgit2_shutdown();
		free(p);
		return rc;
	}
	*out = repo;
	*where = p;
	return 0;
}

void store__git_close(git_repository *repo)
{
	git_repository_free(repo);
	git_libgit2_shutdown();
}

/* ---- SHA-1 (object ids, the pack and index sums; note 7) ---------------------------- */

struct sha1 {
	uint32_t h[5];
	uint64_t len;
	uint8_t buf[64];
	size_t n;
};

static uint32_t rol(uint32_t x, int k)
{
	return (x << k) | (x >> (32 - k));
}

/* Twenty rounds as one unrolled loop: a branch per round costs more than the round. */
#define SHA1_STAGE(from, F, K)                                                                     \
	_Pragma("GCC unroll 20") for (int i = (from); i < (from) + 20; i++)                        \
	{                                                                                          \
		uint32_t tmp = rol(a, 5) + (F) + e + (K) + w[i];                                   \
                                                                                                   \
		e = d;                                                                             \
		d = d3;                                                                            \
		d3 = rol(b, 30);                                                                   \
		b = a;                                                                             \
		a = tmp;                                                                           \
	}

static void sha1_block_c(struct sha1 *c, const uint8_t *p)
{
	uint32_t w[80], a = c->h[0], b = c->h[1], d3 = c->h[2], d = c->h[3], e = c->h[4];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	SHA1_STAGE(0, (b & d3) | (~b & d), 0x5a827999u)
	SHA1_STAGE(20, b ^ d3 ^ d, 0x6ed9eba1u)
	SHA1_STAGE(40, (b & d3) | (b & d) | (d3 & d), 0x8f1bbcdcu)
	SHA1_STAGE(60, b ^ d3 ^ d, 0xca62c1d6u)
	c->h[0] += a;
	c->h[1] += b;
	c->h[2] += d3;
	c->h[3] += d;
	c->h[4] += e;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define SHA1_NI 1

/* Eighty rounds with the SHA extensions: four rounds per sha1rnds4, the schedule four words
 * at a time (sha1msg1, xor, sha1msg2), e carried by sha1nexte. Lane 3 holds a (and w[i]). */
__attribute__((target("sha,ssse3,sse4.1"))) static void sha1_block_ni(struct sha1 *c,
								      const uint8_t *p)
{
	const __m128i swap = _mm_set_epi64x(0x0001020304050607LL, 0x08090a0b0c0d0e0fLL);
	__m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)c->h), 0x1b);
	__m128i e0 = _mm_set_epi32((int)c->h[4], 0, 0, 0);
	__m128i abcd0 = abcd, e00 = e0, prev = abcd, w[4];

#pragma GCC unroll 20
	for (int g = 0; g < 20; g++) {
		__m128i m, ew;

		if (g < 4)
			m = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), swap);
		else
			m = _mm_sha1msg2_epu32(
				_mm_xor_si128(_mm_sha1msg1_epu32(w[g % 4], w[(g + 1) % 4]),
					      w[(g + 2) % 4]),
				w[(g + 3) % 4]);
		w[g % 4] = m;
		ew = g ? _mm_sha1nexte_epu32(prev, m) : _mm_add_epi32(e0, m);
		prev = abcd;
		switch (g / 5) {
		case 0:
			abcd = _mm_sha1rnds4_epu32(abcd, ew, 0);
			break;
		case 1:
			abcd = _mm_sha1rnds4_epu32(abcd, ew, 1);
			break;
		case 2:
			abcd = _mm_sha1rnds4_epu32(abcd, ew, 2);
			break;
		default:
			abcd = _mm_sha1rnds4_epu32(abcd, ew, 3);
			break;
		}
	}
	e0 = _mm_sha1nexte_epu32(prev, e00);
	abcd = _mm_add_epi32(abcd, abcd0);
	_mm_storeu_si128((__m128i *)c->h, _mm_shuffle_epi32(abcd, 0x1b));
	c->h[4] = (uint32_t)_mm_extract_epi32(e0, 3);
}
#endif

static void (*sha1_block)(struct sha1 *c, const uint8_t *p) = sha1_block_c;
static pthread_once_t sha1_once = PTHREAD_ONCE_INIT;

static void sha1_start(struct sha1 *c);
static void sha1_update(struct sha1 *c, const void *data, size_t len);
static void sha1_final(struct sha1 *c, uint8_t out[20]);

/* Uses the SHA extensions when the CPU has them and they agree with the portable code. */
static void sha1_pick(void)
{
#ifdef SHA1_NI
	unsigned a, b, c, d;
	uint8_t data[200], x[20], y[20];
	struct sha1 h;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1) ||
	    !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & bit_SHA))
		return;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	sha1_start(&h);
	sha1_update(&h, data, sizeof(data));
	sha1_final(&h, x);
	sha1_block = sha1_block_ni;
	sha1_start(&h);
	sha1_update(&h, data, sizeof(data));
	sha1_final(&h, y);
	if (memcmp(x, y, sizeof(x)) != 0)
		sha1_block = sha1_block_c;
#endif
}

static void sha1_start(struct sha1 *c)
{
	static const uint32_t h0[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};

	memcpy(c->h, h0, sizeof(h0));
	c->len = 0;
	c->n = 0;
}

static void sha1_init(struct sha1 *c)
{
	pthread_once(&sha1_once, sha1_pick);
	sha1_start(c);
}

static void sha1_update(struct sha1 *c, const void *data, size_t len)
{
	const uint8_t *p = data;

	c->len += len;
	if (c->n) {
		size_t take = 64 - c->n < len ? 64 - c->n : len;

		memcpy(c->buf + c->n, p, take);
		c->n += take;
		p += take;
		len -= take;
		if (c->n < 64)
			return;
		sha1_block(c, c->buf);
		c->n = 0;
	}
	for (; len >= 64; p += 64, len -= 64)
		sha1_block(c, p);
	memcpy(c->buf, p, len);
	c->n = len;
}

static void sha1_final(struct sha1 *c, uint8_t out[20])
{
	uint64_t bits = c->len * 8;
	uint8_t pad[72] = {0x80};
	size_t padlen = (c->n < 56 ? 56 : 120) - c->n;

	for (int i = 0; i < 8; i++)
		pad[padlen + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
	sha1_update(c, pad, padlen + 8);
	for (int i = 0; i < 5; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
}

/* git's object id: the SHA-1 of "<type> <len>\0" and the bytes (git_odb_hash, faster). */
static void obj_hash(git_oid *oid, const void *data, size_t len, git_object_t type)
{
	char hdr[64];
	int n = snprintf(hdr, sizeof(hdr), "%s %zu", git_object_type2string(type), len);
	struct sha1 h;

	sha1_init(&h);
	sha1_update(&h, hdr, (size_t)n + 1);
	sha1_update(&h, data, len);
	sha1_final(&h, oid->id);
}

/* ---- a set of object ids (dedupes pack entries) ------------------------------------ */

struct oidset {
	git_oid *slots; /* Owned; an all-zero oid marks a free slot */
	size_t cap, n;
};

static uint64_t oid_hash(const git_oid *o)
{
	uint64_t h;

	memcpy(&h, o->id, sizeof(h));
	return h;
}

static bool oid_zero(const git_oid *o)
{
	static const git_oid zero;

	return memcmp(o, &zero, sizeof(zero)) == 0;
}

/* Adds o; returns false when it was there already. */
static bool oidset_add(struct oidset *s, const git_oid *o)
{
	size_t i;

	if (2 * (s->n + 1) > s->cap) {
		struct oidset g = {calloc(s->cap ? s->cap * 2 : 1024, sizeof(git_oid)),
				   s->cap ? s->cap * 2 : 1024, 0};

		if (!g.slots)
			abort();
		for (i = 0; i < s->cap; i++)
			if (!oid_zero(&s->slots[i]))
				oidset_add(&g, &s->slots[i]);
		free(s->slots);
		*s = g;
	}
	for (i = oid_hash(o) & (s->cap - 1); !oid_zero(&s->slots[i]); i = (i + 1) & (s->cap - 1))
		if (git_oid_equal(&s->slots[i], o))
			return false;
	s->slots[i] = *o;
	s->n++;
	return true;
}

/* ---- the pack being built (note 3) -------------------------------------------------- */

/* ---- CRC-32 (the .idx keeps one per object), eight bytes per step -------------------- */

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_tab[0][i] = c;
	}
	for (int t = 1; t < 8; t++)
		for (uint32_t i = 0; i < 256; i++)
			crc_tab[t][i] =
				(crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
}

/* The CRC-32 of some bytes (crc) followed by data (crc 0: of data alone). */
static uint32_t crc32_update(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t c = ~crc;

	pthread_once(&crc_once, crc_init);
	for (; len >= 8; p += 8, len -= 8) {
		uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				   (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
			      (uint32_t)p[7] << 24;

		c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		    crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^
		    crc_tab[2][(hi >> 8) & 0xff] ^ crc_tab[1][(hi >> 16) & 0xff] ^
		    crc_tab[0][hi >> 24];
	}
	for (; len; p++, len--)
		c = crc_tab[0][(c ^ *p) & 0xff] ^ (c >> 8);
	return ~c;
}

/* One object of the pending pack, for its .idx line. */
struct pack_ent {
	git_oid oid;
	uint64_t off; /* from the start of the .pack file */
	uint32_t crc; /* CRC-32 of its packed bytes (header and zlib stream) */
};

struct packw {
	git_odb *odb;	       /* Borrowed */
	char *dir;	       /* Owned: the objects/pack directory */
	int fd;		       /* the pack file being written, -1 before the first object */
	char *tmp;	       /* Owned: its temporary name */
	uint64_t written;      /* bytes in the file, the 12 of the header included */
	int werr;	       /* errno of a failed write (reported by pack_end, pack_flush) */
	struct dfs_buf stage;  /* bytes after those, not written yet */
	uint32_t crc;	       /* CRC-32 of the current entry so far */
	struct pack_ent *ents; /* Owned: the entries of the pack, in order */
	size_t count, cap;
	struct oidset seen; /* every oid put in a pack by this snapshot */
};

#define PACK_STAGE (1u << 20) /* bytes staged before a write(2) */

static int write_all(int fd, const void *data, size_t n)
{
	const char *d = data;

	while (n) {
		ssize_t k = write(fd, d, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? errno : EIO;
		d += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Writes the staged bytes out. */
static void pack_unstage(struct packw *p)
{
	if (!p->werr && p->stage.len)
		p->werr = write_all(p->fd, p->stage.data, p->stage.len);
	p->written += p->stage.len;
	dfs_buf_reset(&p->stage);
}

/* Appends bytes of the current entry (staged, written out a megabyte at a time). */
static void pack_append(struct packw *p, const void *data, size_t n)
{
	p->crc = crc32_update(p->crc, data, n);
	dfs_buf_append(&p->stage, data, n);
	if (p->stage.len >= PACK_STAGE)
		pack_unstage(p);
}

/* Starts a pack file: "<dir>/tmp_pack_XXXXXX", room for the header (written at the end). */
static int pack_open(struct packw *p, struct dfs_err *err)
{
	static const uint8_t room[12];

	if (asprintf(&p->tmp, "%s/tmp_pack_XXXXXX", p->dir) < 0) {
		p->tmp = NULL;
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	}
	p->fd = mkstemp(p->tmp);
	if (p->fd < 0) {
		int rc = dfs_err_set(err, DFS_EIO, "cannot create '%s': %s", p->tmp,
				     strerror(errno));

		free(p->tmp);
		p->tmp = NULL;
		return rc;
	}
	p->written = 0;
	p->werr = 0;
	dfs_buf_reset(&p->stage);
	dfs_buf_append(&p->stage, room, sizeof(room));
	return 0;
}

/* Drops the pack being written, if any (on errors; pack_flush has renamed a good one). */
static void pack_discard(struct packw *p)
{
	if (p->fd >= 0) {
		close(p->fd);
		unlink(p->tmp);
	}
	p->fd = -1;
	free(p->tmp);
	p->tmp = NULL;
	p->count = 0;
	dfs_buf_reset(&p->stage);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static int ent_cmp(const void *a, const void *b)
{
	return memcmp(((const struct pack_ent *)a)->oid.id, ((const struct pack_ent *)b)->oid.id,
		      GIT_OID_RAWSZ);
}

/* Writes parts into a new read-only file "<dir>/tmp_<what>_XXXXXX"; *path (Owned) its name. */
static int write_tmp(const char *dir, const char *what, const void *const *parts,
		     const size_t *lens, int nparts, char **path, struct dfs_err *err)
{
	char *p;
	int fd, rc = 0;

	if (asprintf(&p, "%s/tmp_%s_XXXXXX", dir, what) < 0)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	fd = mkstemp(p);
	if (fd < 0) {
		rc = dfs_err_set(err, DFS_EIO, "cannot create '%s': %s", p, strerror(errno));
		free(p);
		return rc;
	}
	for (int i = 0; i < nparts && !rc; i++) {
		const char *d = parts[i];
		size_t left = lens[i];

		while (left) {
			ssize_t n = write(fd, d, left);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				rc = dfs_err_set(err, DFS_EIO, "cannot write '%s': %s", p,
						 n < 0 ? strerror(errno) : "short write");
				break;
			}
			d += n;
			left -= (size_t)n;
		}
	}
	if (!rc && fchmod(fd, 0444) != 0)
		rc = dfs_err_set(err, DFS_EIO, "cannot chmod '%s': %s", p, strerror(errno));
	if (close(fd) != 0 && !rc)
		rc = dfs_err_set(err, DFS_EIO, "cannot write '%s': %s", p, strerror(errno));
	if (rc) {
		unlink(p);
		free(p);
		return rc;
	}
	*path = p;
	return 0;
}

/*
 * Finishes the pack file (header, sum) as pack-<sum>.pack and writes its version 2 index
 * pack-<sum>.idx (note 3): every object's id, offset and CRC-32 are known here, so no object
 * is inflated or hashed again. The .idx is renamed into place last: git and libgit2 find a
 * pack by its index.
 */
static int pack_flush(struct packw *p, struct dfs_err *err)
{
	uint8_t hdr[12] = {'P', 'A', 'C', 'K'}, sum[20], idxsum[20];
	char hex[GIT_OID_HEXSZ + 1], *tmppack = NULL, *tmpidx = NULL, *final = NULL;
	struct dfs_buf idx;
	size_t nlarge = 0;
	uint32_t fan[256] = {0};
	struct sha1 h;
	int rc = 0;

	if (!p->count) {
		pack_discard(p);
		return 0;
	}
	put_be32(hdr + 4, 2);
	put_be32(hdr + 8, (uint32_t)p->count);
	pack_unstage(p);
	/* The sum covers the header, known only now: the file is read back (from the page
	 * cache) rather than kept in memory. */
	if (!p->werr && pwrite(p->fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		p->werr = errno ? errno : EIO;
	sha1_init(&h);
	dfs_buf_reserve(&p->stage, PACK_STAGE);
	for (uint64_t off = 0; !p->werr && off < p->written;) {
		size_t want =
			p->written - off < PACK_STAGE ? (size_t)(p->written - off) : PACK_STAGE;
		ssize_t k = pread(p->fd, p->stage.data, want, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			p->werr = k < 0 ? errno : EIO;
			break;
		}
		sha1_update(&h, p->stage.data, (size_t)k);
		off += (uint64_t)k;
	}
	sha1_final(&h, sum);
	if (!p->werr && (lseek(p->fd, 0, SEEK_END) < 0 || (p->werr = write_all(p->fd, sum, 20)))) {
		if (!p->werr)
			p->werr = errno;
	}
	if (!p->werr && fchmod(p->fd, 0444) != 0)
		p->werr = errno;
	if (close(p->fd) != 0 && !p->werr)
		p->werr = errno;
	p->fd = -1;
	tmppack = p->tmp;
	p->tmp = NULL;
	dfs_buf_reset(&p->stage);
	if (p->werr) {
		rc = dfs_err_set(err, DFS_EIO, "cannot write '%s': %s", tmppack, strerror(p->werr));
		goto done;
	}

	/* The index: magic, version, fan-out, ids, CRCs, offsets, large offsets, sums. */
	if (p->count)
		qsort(p->ents, p->count, sizeof(*p->ents), ent_cmp);
	dfs_buf_init(&idx);
	dfs_buf_reserve(&idx, 8 + 1024 + p->count * (GIT_OID_RAWSZ + 8) + 40);
	dfs_buf_append(&idx, "\377tOc\0\0\0\2", 8);
	for (size_t i = 0; i < p->count; i++)
		fan[p->ents[i].oid.id[0]]++;
	for (int i = 0, total = 0; i < 256; i++) {
		uint8_t b[4];

		total += (int)fan[i];
		put_be32(b, (uint32_t)total);
		dfs_buf_append(&idx, b, 4);
	}
	for (size_t i = 0; i < p->count; i++)
		dfs_buf_append(&idx, p->ents[i].oid.id, GIT_OID_RAWSZ);
	for (size_t i = 0; i < p->count; i++) {
		uint8_t b[4];

		put_be32(b, p->ents[i].crc);
		dfs_buf_append(&idx, b, 4);
	}
	for (size_t i = 0; i < p->count; i++) {
		uint8_t b[4];

		put_be32(b, p->ents[i].off < 0x80000000u ? (uint32_t)p->ents[i].off
							 : 0x80000000u | (uint32_t)nlarge++);
		dfs_buf_append(&idx, b, 4);
	}
	for (size_t i = 0; i < p->count; i++) {
		uint8_t b[8];

		if (p->ents[i].off < 0x80000000u)
			continue;
		put_be32(b, (uint32_t)(p->ents[i].off >> 32));
		put_be32(b + 4, (uint32_t)p->ents[i].off);
		dfs_buf_append(&idx, b, 8);
	}
	dfs_buf_append(&idx, sum, sizeof(sum));
	sha1_init(&h);
	sha1_update(&h, idx.data, idx.len);
	sha1_final(&h, idxsum);
	dfs_buf_append(&idx, idxsum, sizeof(idxsum));
	{
		const void *parts[1] = {idx.data};
		size_t lens[1] = {idx.len};

		rc = write_tmp(p->dir, "idx", parts, lens, 1, &tmpidx, err);
	}
	dfs_buf_release(&idx);
	if (rc)
		goto done;

	for (int i = 0; i < 20; i++)
		snprintf(hex + 2 * i, 3, "%02x", sum[i]);
	if (asprintf(&final, "%s/pack-%s.pack", p->dir, hex) < 0) {
		final = NULL;
		rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
		goto done;
	}
	if (rename(tmppack, final) != 0) {
		rc = dfs_err_set(err, DFS_EIO, "cannot rename '%s': %s", tmppack, strerror(errno));
		goto done;
	}
	free(tmppack);
	tmppack = NULL;
	memcpy(final + strlen(final) - 4, "idx", 4);
	if (rename(tmpidx, final) != 0) {
		rc = dfs_err_set(err, DFS_EIO, "cannot rename '%s': %s", tmpidx, strerror(errno));
		goto done;
	}
	free(tmpidx);
	tmpidx = NULL;
	if (git_odb_refresh(p->odb) != 0)
		rc = store__git_err(err, DFS_EIO, "refresh object database");
done:
	if (tmppack)
		unlink(tmppack);
	if (tmpidx)
		unlink(tmpidx);
	free(tmppack);
	free(tmpidx);
	free(final);
	p->count = 0;
	return rc;
}

/* An object being appended to the pack: zlib stored blocks of at most 65535 bytes, each
 * block's header written when it starts (the object's length is known up front). */
struct packput {
	size_t start;  /* file offset of the entry */
	size_t left;   /* payload bytes still to come */
	size_t inblk;  /* payload bytes still to come in the current block */
	uint32_t a, b; /* Adler-32 of the payload so far */
};

static int pack_begin(struct packw *p, git_object_t type, size_t len, struct packput *w,
		      struct dfs_err *err)
{
	uint8_t hdr[16], *q = hdr;
	size_t n = len;
	int rc;

	if (p->fd < 0 && (rc = pack_open(p, err)))
		return rc;
	*q = (uint8_t)(((unsigned)type << 4) | (n & 15));
	n >>= 4;
	while (n) {
		*q++ |= 0x80;
		*q = n & 0x7f;
		n >>= 7;
	}
	q++;
	w->start = p->written + p->stage.len;
	w->left = len;
	w->inblk = 0;
	w->a = 1;
	w->b = 0;
	p->crc = 0;
	pack_append(p, hdr, (size_t)(q - hdr));
	pack_append(p, "\x78\x01", 2);
	if (!len)
		pack_append(p, "\x01\x00\x00\xff\xff", 5);
	return 0;
}

/* Appends n payload bytes (no more than announced to pack_begin). */
static void pack_put(struct packw *p, struct packput *w, const void *data, size_t n)
{
	const uint8_t *d = data;

	assert(n <= w->left);
	while (n) {
		size_t k;

		if (!w->inblk) {
			size_t take = w->left > 65535 ? 65535 : w->left;
			uint8_t blk[5] = {take == w->left ? 1 : 0, (uint8_t)take,
					  (uint8_t)(take >> 8), (uint8_t)~take,
					  (uint8_t)(~take >> 8)};

			pack_append(p, blk, 5);
			w->inblk = take;
		}
		k = n < w->inblk ? n : w->inblk;
		k = k < 5552 ? k : 5552; /* the Adler sums stay below 2^32 */
		pack_append(p, d, k);
		for (size_t i = 0; i < k; i++) {
			w->a += d[i];
			w->b += w->a;
		}
		w->a %= 65521;
		w->b %= 65521;
		w->inblk -= k;
		w->left -= k;
		d += k;
		n -= k;
	}
}

/* Ends the object: its Adler-32, its .idx line. With dedupe, an object this snapshot has
 * packed already is taken back out. */
static int pack_end(struct packw *p, struct packput *w, const git_oid *oid, bool dedupe,
		    struct dfs_err *err)
{
	uint8_t ad[4];

	if (w->left)
		return dfs_err_set(err, DFS_ECORRUPT, "object %s: %zu bytes missing",
				   git_oid_tostr_s(oid), w->left);
	if (dedupe && !oidset_add(&p->seen, oid)) {
		if (w->start >= p->written) {
			p->stage.len = (size_t)(w->start - p->written);
		} else {
			dfs_buf_reset(&p->stage);
			if (!p->werr && (ftruncate(p->fd, (off_t)w->start) != 0 ||
					 lseek(p->fd, (off_t)w->start, SEEK_SET) < 0))
				p->werr = errno;
			p->written = w->start;
		}
		return 0;
	}
	put_be32(ad, w->b << 16 | w->a);
	pack_append(p, ad, 4);
	if (p->werr)
		return dfs_err_set(err, DFS_EIO, "cannot write '%s': %s", p->tmp,
				   strerror(p->werr));
	if (p->count == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 1024;
		p->ents = realloc(p->ents, p->cap * sizeof(*p->ents));
		if (!p->ents)
			abort();
	}
	p->ents[p->count].oid = *oid;
	p->ents[p->count].off = w->start;
	p->ents[p->count].crc = p->crc;
	p->count++;
	if (p->written + p->stage.len >= PACK_FLUSH)
		return pack_flush(p, err);
	return 0;
}

/* Appends one object (not compressed: zlib stored blocks) unless this snapshot has it. */
static int pack_add(struct packw *p, git_object_t type, const void *data, size_t len,
		    const git_oid *oid, struct dfs_err *err)
{
	struct packput w;
	int rc;

	if (!oidset_add(&p->seen, oid))
		return 0;
	if ((rc = pack_begin(p, type, len, &w, err)))
		return rc;
	pack_put(p, &w, data, len);
	return pack_end(p, &w, oid, false, err);
}

/* Copies an object written by libgit2 into the mempack (trees, commit) into the pack. */
static int pack_from_mempack(struct packw *p, git_odb_backend *mp, const git_oid *oid,
			     struct dfs_err *err)
{
	void *data = NULL;
	size_t len = 0;
	git_object_t type = GIT_OBJECT_INVALID;
	int rc;

	if (mp->read(&data, &len, &type, mp, oid) != 0)
		return 0; /* not new: it was in the odb already */
	rc = pack_add(p, type, data, len, oid, err);
	git_odb_backend_data_free(mp, data);
	return rc;
}

/* ---- the cache tables (note 2) ------------------------------------------------------ */

static const char *const cache_sql =
	"CREATE TABLE IF NOT EXISTS snap_docs(repo INTEGER, docid INTEGER, ctime INTEGER,"
	" oid BLOB, PRIMARY KEY(repo, docid)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS snap_colls(repo INTEGER, coll INTEGER, ndocs INTEGER,"
	" max_ctime INTEGER, fp REAL, idx BLOB, tree BLOB, seq INTEGER, next_id INTEGER,"
	" PRIMARY KEY(repo, coll)) WITHOUT ROWID;";

/* Columns added after the first release of the cache (NULL in older rows: a full walk). */
static const char *const cache_sql_v2 = "ALTER TABLE snap_colls ADD COLUMN seq INTEGER;"
					"ALTER TABLE snap_colls ADD COLUMN next_id INTEGER;";
/* note 8: the .attrs.json blob and the collection's owner it was made for */
static const char *const cache_sql_v3 = "ALTER TABLE snap_colls ADD COLUMN attrs BLOB;"
					"ALTER TABLE snap_colls ADD COLUMN owner INTEGER;";

static int cache_ensure(struct store_db *db, struct dfs_err *err)
{
	struct store_txn *t;
	sqlite3_stmt *st = NULL;
	char *msg = NULL;
	int rc;

	if ((rc = store_txn_begin(db, false, &t, err)))
		return rc;
	rc = sqlite3_prepare_v2(
		t->c->h, "SELECT seq, next_id, attrs, owner FROM snap_colls, snap_docs LIMIT 0", -1,
		&st, NULL);
	sqlite3_finalize(st);
	st = NULL;
	store_txn_abort(t);
	if (rc == SQLITE_OK)
		return 0;
	if ((rc = store_txn_begin(db, true, &t, err)))
		return rc;
	if (sqlite3_exec(t->c->h, cache_sql, NULL, NULL, &msg) == SQLITE_OK &&
	    sqlite3_prepare_v2(t->c->h, "SELECT seq FROM snap_colls LIMIT 0", -1, &st, NULL) !=
		    SQLITE_OK)
		sqlite3_exec(t->c->h, cache_sql_v2, NULL, NULL, &msg);
	sqlite3_finalize(st);
	st = NULL;
	if (!msg && sqlite3_prepare_v2(t->c->h, "SELECT attrs FROM snap_colls LIMIT 0", -1, &st,
				       NULL) != SQLITE_OK)
		sqlite3_exec(t->c->h, cache_sql_v3, NULL, NULL, &msg);
	sqlite3_finalize(st);
	if (msg) {
		rc = dfs_err_set(err, DFS_EIO, "create snapshot cache: %s", msg ? msg : "?");
		sqlite3_free(msg);
		store_txn_abort(t);
		return rc;
	}
	return store_txn_commit(t, err);
}

/* A 63-bit FNV-1a hash of the repository's real path. */
static int64_t repo_key(git_repository *repo)
{
	char *rp = realpath(git_repository_path(repo), NULL);
	const char *p = rp ? rp : git_repository_path(repo);
	uint64_t h = 1469598103934665603ULL;
	size_t n = strlen(p);

	while (n > 1 && p[n - 1] == '/')
		n--;
	for (size_t i = 0; i < n; i++) {
		h ^= (uint8_t)p[i];
		h *= 1099511628211ULL;
	}
	free(rp);
	return (int64_t)(h & INT64_MAX);
}

/* ---- snapshot ----------------------------------------------------------------------- */

struct doc_row {
	int64_t docid, ctime;
	git_oid oid;
};

struct coll_row {
	int64_t coll, ndocs, max_ctime;
	double fp;
	bool have_fp;	      /* max_ctime and fp known (else NULL in the cache) */
	int64_t seq, next_id; /* the snapshot's struct snap seq and next_id */
	git_oid idx, tree;
	git_oid attrs; /* its .attrs.json blob (note 8) */
	int64_t owner; /* the collection's uid << 32 | gid it was made for */
};

struct snap {
	struct store_txn *t;  /* the read transaction */
	git_repository *repo; /* Borrowed */
	git_odb *odb;	      /* Owned reference */
	int64_t repokey;      /* repo_key */
	int64_t seq;	      /* the change feed's last seq in t */
	int64_t next_id;      /* the id counter in t: later inserts get ids >= this */
	struct packw pack;
	struct dfs_buf text;	/* rendering buffer */
	struct dfs_buf idxtext; /* the current collection's .indexes.json */
	struct doc_row *docs;	/* Owned: snap_docs rows to write */
	size_t ndocs, capdocs;
	struct coll_row *colls; /* Owned: snap_colls rows to write */
	size_t ncolls, capcolls;
	git_oid *trees; /* Owned: trees written through libgit2 */
	size_t ntrees, captrees;
	struct store_snap_result *r;
};

#define PUSH(arr, n, cap, v)                                                                       \
	do {                                                                                       \
		if ((n) == (cap)) {                                                                \
			(cap) = (cap) ? (cap)*2 : 64;                                              \
			(arr) = realloc((arr), (cap) * sizeof(*(arr)));                            \
			if (!(arr))                                                                \
				abort();                                                           \
		}                                                                                  \
		(arr)[(n)++] = (v);                                                                \
	} while (0)

static int sql_prepare(struct store_txn *t, const char *sql, sqlite3_stmt **st, struct dfs_err *err)
{
	int rc = sqlite3_prepare_v2(t->c->h, sql, -1, st, NULL);

	if (rc != SQLITE_OK)
		return store__sqlerr(t, rc, "snapshot", err);
	return 0;
}

/* Appends v pretty-rendered and indented by two spaces (no final newline). */
static int render_indented(const bson_t *v, struct dfs_buf *out, struct dfs_err *err)
{
	struct dfs_buf tmp;
	int rc;

	dfs_buf_init(&tmp);
	rc = store_codec_render(v, STORE_RENDER_PRETTY, &tmp, err);
	if (!rc) {
		size_t n = tmp.len;

		while (n && tmp.data[n - 1] == '\n')
			n--;
		dfs_buf_puts(out, "  ");
		for (size_t i = 0; i < n; i++) {
			dfs_buf_putc(out, tmp.data[i]);
			if (tmp.data[i] == '\n')
				dfs_buf_puts(out, "  ");
		}
	}
	dfs_buf_release(&tmp);
	return rc;
}

/* The bytes of "<coll>/.indexes.json": a JSON array of the index specs, _id_ first. */
static int render_indexes(struct store_txn *t, int64_t coll, struct dfs_buf *out,
			  struct dfs_err *err)
{
	sqlite3_stmt *st = NULL;
	bson_t id, key;
	int rc;

	bson_init(&id);
	bson_append_int32(&id, "v", 1, 2);
	bson_append_document_begin(&id, "key", 3, &key);
	bson_append_int32(&key, "_id", 3, 1);
	bson_append_document_end(&id, &key);
	bson_append_utf8(&id, "name", 4, "_id_", 4);
	dfs_buf_reset(out);
	dfs_buf_puts(out, "[\n");
	rc = render_indented(&id, out, err);
	bson_destroy(&id);
	if (rc)
		return rc;
	if ((rc = sql_prepare(t,
			      "SELECT name, spec FROM indexes WHERE coll = ?1 AND name <> '_id_'"
			      " ORDER BY name",
			      &st, err)))
		return rc;
	sqlite3_bind_int64(st, 1, coll);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const uint8_t *data = sqlite3_column_blob(st, 1);
		int n = sqlite3_column_bytes(st, 1);
		bson_t spec;

		if (n < 5 || !bson_init_static(&spec, data, (size_t)n)) {
			rc = dfs_err_set(err, DFS_ECORRUPT, "index '%s' has a bad spec",
					 (const char *)sqlite3_column_text(st, 0));
			goto done;
		}
		dfs_buf_puts(out, ",\n");
		if ((rc = render_indented(&spec, out, err)))
			goto done;
	}
	if (rc != SQLITE_DONE) {
		rc = store__sqlerr(t, rc, "read index definitions", err);
		goto done;
	}
	rc = 0;
	dfs_buf_puts(out, "\n]\n");
done:
	sqlite3_finalize(st);
	return rc;
}

static int tb_insert(git_treebuilder *tb, const char *name, const git_oid *oid, git_filemode_t mode,
		     struct dfs_err *err)
{
	if (git_treebuilder_insert(NULL, tb, name, oid, mode) != 0)
		return store__git_err(err, DFS_EIO, "tree entry");
	return 0;
}

/* A collection tree: blobs only, so git's entry order is plain byte order of the names.
 * Built flat (one arena of names, one array, one sort) rather than through a
 * git_treebuilder: a million entries cost a hash map insertion and an allocation each there. */
struct flat_ent {
	size_t off; /* name offset in the arena */
	size_t len; /* name length */
	git_oid oid;
};

struct flat_tree {
	struct dfs_buf names; /* arena: the names, NUL-separated */
	struct flat_ent *v;   /* Owned */
	size_t n, cap;
};

static const char *flat_arena;

static int flat_cmp(const void *a, const void *b)
{
	const struct flat_ent *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(flat_arena + x->off, flat_arena + y->off, n);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

static void flat_add(struct flat_tree *f, const char *name, size_t len, const git_oid *oid)
{
	struct flat_ent e = {f->names.len, len, *oid};

	dfs_buf_append(&f->names, name, len + 1);
	PUSH(f->v, f->n, f->cap, e);
}

/* Byte order of a flat entry's name against name/len (git's order for blob entries). */
static int flat_name_cmp(const struct flat_tree *f, size_t i, const char *name, size_t len)
{
	const struct flat_ent *e = &f->v[i];
	int c = memcmp(f->names.data + e->off, name, e->len < len ? e->len : len);

	return c ? c : (e->len > len) - (e->len < len);
}

/* Two entries of f by name (adjacent after flat_sort: equal means a duplicate). */
static int flat_cmp_names(const struct flat_tree *f, size_t i, size_t j)
{
	return flat_name_cmp(f, i, f->names.data + f->v[j].off, f->v[j].len);
}

/* Whether f (sorted by flat_sort) has an entry called name. */
static bool flat_has(const struct flat_tree *f, const char *name)
{
	size_t lo = 0, hi = f->n, len = strlen(name);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2, n = f->v[mid].len < len ? f->v[mid].len : len;
		int c = memcmp(f->names.data + f->v[mid].off, name, n);

		if (!c)
			c = f->v[mid].len < len ? -1 : f->v[mid].len > len;
		if (!c)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static void flat_sort(struct flat_tree *f)
{
	static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;

	pthread_mutex_lock(&sort_lock);
	flat_arena = f->names.data;
	if (f->n)
		qsort(f->v, f->n, sizeof(*f->v), flat_cmp);
	pthread_mutex_unlock(&sort_lock);
}

/* Sorts, serializes and packs the tree; *oid gets its id. */
static int flat_write(struct snap *sn, struct flat_tree *f, git_oid *oid, struct dfs_err *err)
{
	struct dfs_buf *out = &sn->text;

	flat_sort(f);
	dfs_buf_reset(out);
	dfs_buf_reserve(out, f->names.len + f->n * (7 + GIT_OID_RAWSZ));
	for (size_t i = 0; i < f->n; i++) {
		if (i && flat_cmp_names(f, i - 1, i) == 0)
			return dfs_err_set(err, DFS_ECORRUPT, "two entries named '%s'",
					   f->names.data + f->v[i].off);
		dfs_buf_append(out, "100644 ", 7);
		dfs_buf_append(out, f->names.data + f->v[i].off, f->v[i].len + 1);
		dfs_buf_append(out, f->v[i].oid.id, GIT_OID_RAWSZ);
	}
	obj_hash(oid, out->data, out->len, GIT_OBJECT_TREE);
	return pack_add(&sn->pack, GIT_OBJECT_TREE, out->data, out->len, oid, err);
}

/* The snap_colls row of one collection as the last snapshot left it (note 2). */
struct coll_cache {
	bool have;		  /* a row whose tree is in the odb */
	bool have_fp;		  /* max_ctime and fp are set (a full walk wrote the row) */
	bool have_seq;		  /* seq and next_id are set */
	int64_t ndocs, max_ctime; /* documents; the largest ctime */
	double fp;		  /* total of the ids */
	int64_t seq, next_id;	  /* the change feed's last seq and the id counter then */
	git_oid idx, tree;	  /* .indexes.json blob, collection tree */
	bool have_attrs;	  /* attrs and owner are set (note 8) */
	git_oid attrs;		  /* .attrs.json blob */
	int64_t owner;		  /* the collection's owner it was made for */
};

static int cache_read(struct snap *sn, int64_t coll, struct coll_cache *cc, struct dfs_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	memset(cc, 0, sizeof(*cc));
	if ((rc = sql_prepare(sn->t,
			      "SELECT ndocs, max_ctime, fp, idx, tree, seq, next_id, attrs, owner"
			      " FROM snap_colls"
			      " WHERE repo = ?1 AND coll = ?2",
			      &st, err)))
		return rc;
	sqlite3_bind_int64(st, 1, sn->repokey);
	sqlite3_bind_int64(st, 2, coll);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && sqlite3_column_bytes(st, 3) == GIT_OID_RAWSZ &&
	    sqlite3_column_bytes(st, 4) == GIT_OID_RAWSZ) {
		git_oid_fromraw(&cc->idx, sqlite3_column_blob(st, 3));
		git_oid_fromraw(&cc->tree, sqlite3_column_blob(st, 4));
		cc->have = git_odb_exists(sn->odb, &cc->tree) == 1;
		cc->ndocs = sqlite3_column_int64(st, 0);
		cc->have_fp = sqlite3_column_type(st, 1) != SQLITE_NULL &&
			      sqlite3_column_type(st, 2) != SQLITE_NULL;
		cc->max_ctime = sqlite3_column_int64(st, 1);
		cc->fp = sqlite3_column_double(st, 2);
		cc->have_seq = sqlite3_column_type(st, 5) != SQLITE_NULL &&
			       sqlite3_column_type(st, 6) != SQLITE_NULL;
		cc->seq = sqlite3_column_int64(st, 5);
		cc->next_id = sqlite3_column_int64(st, 6);
		cc->have_attrs = sqlite3_column_bytes(st, 7) == GIT_OID_RAWSZ &&
				 sqlite3_column_type(st, 8) != SQLITE_NULL;
		if (cc->have_attrs)
			git_oid_fromraw(&cc->attrs, sqlite3_column_blob(st, 7));
		cc->owner = sqlite3_column_int64(st, 8);
		rc = 0;
	} else if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
		rc = 0;
	} else {
		rc = store__sqlerr(sn->t, rc, "read snapshot cache", err);
	}
	sqlite3_finalize(st);
	return rc;
}

/* Renders document docid (its BSON: data, n bytes) as the mount shows it, packs the blob and,
 * when note, keeps it for snap_docs; *oid gets the blob id. */
static int doc_blob(struct snap *sn, int64_t docid, int64_t ctime, const void *data, int n,
		    bool note, git_oid *oid, struct dfs_err *err)
{
	struct doc_row d = {.docid = docid, .ctime = ctime};
	bson_t doc;
	int rc;

	if (n < 5 || !bson_init_static(&doc, data, (size_t)n))
		return dfs_err_set(err, DFS_ECORRUPT, "document %lld is not valid BSON",
				   (long long)docid);
	dfs_buf_reset(&sn->text);
	if ((rc = store_codec_render(&doc, STORE_RENDER_PRETTY, &sn->text, err)))
		return rc;
	obj_hash(&d.oid, sn->text.data, sn->text.len, GIT_OBJECT_BLOB);
	if ((rc = pack_add(&sn->pack, GIT_OBJECT_BLOB, sn->text.data, sn->text.len, &d.oid, err)))
		return rc;
	if (note)
		PUSH(sn->docs, sn->ndocs, sn->capdocs, d);
	*oid = d.oid;
	return 0;
}

/* The cached tree stands for the collection as it is now: nothing logged since. */
static void coll_reuse(struct snap *sn, const struct coll_cache *cc, struct coll_row *row,
		       git_oid *tree)
{
	*tree = cc->tree;
	row->tree = cc->tree;
	row->attrs = cc->attrs;
	row->ndocs = cc->ndocs;
	sn->r->colls_reused++;
	sn->r->docs += cc->ndocs;
	sn->r->blobs_reused += cc->ndocs;
	PUSH(sn->colls, sn->ncolls, sn->capcolls, *row);
}

/* ---- .attrs.json: the modes and owners of a collection's documents (note 8) --------- */

#define ATTRS_NAME STORE__ATTRS_NAME
#define ATTRS_MODE STORE__ATTRS_MODE /* the mode of a document not listed */

struct attr_ent {
	char *name; /* Owned: the file name */
	uint32_t mode, uid, gid;
};

struct attrs {
	uint32_t uid, gid;  /* the owner of a document not listed: the collection's */
	struct attr_ent *v; /* Owned: the documents that differ, by name once sorted */
	size_t n, cap;
};

static int64_t coll_owner(const struct store_coll *c)
{
	return (int64_t)c->uid << 32 | c->gid;
}

static void attrs_free(struct attrs *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i].name);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

/* Notes a document's attributes when they differ from the default. */
static void attrs_put(struct attrs *a, const char *name, size_t len, uint32_t mode, uint32_t uid,
		      uint32_t gid)
{
	struct attr_ent e = {strndup(name, len), mode & 07777, uid, gid};

	if (e.mode == ATTRS_MODE && uid == a->uid && gid == a->gid) {
		free(e.name);
		return;
	}
	if (!e.name)
		abort();
	PUSH(a->v, a->n, a->cap, e);
}

static int attr_cmp(const void *x, const void *y)
{
	return strcmp(((const struct attr_ent *)x)->name, ((const struct attr_ent *)y)->name);
}

/* The entry of name in a (sorted), or NULL. */
static const struct attr_ent *attrs_find(const struct attrs *a, const char *name)
{
	struct attr_ent key = {(char *)name, 0, 0, 0};

	return a->n ? bsearch(&key, a->v, a->n, sizeof(*a->v), attr_cmp) : NULL;
}

/* Packs the blob of a (sorted here) into *oid: {"owner": {uid, gid}, "mode": "0644",
 * "files": {name: {mode, uid, gid}, ...}}, names in byte order, so that a walk and a patch
 * write the same bytes. */
static int attrs_write(struct snap *sn, struct attrs *a, git_oid *oid, struct dfs_err *err)
{
	bson_t b, o, files, f;
	char mode[16];
	int rc;

	if (a->n)
		qsort(a->v, a->n, sizeof(*a->v), attr_cmp);
	bson_init(&b);
	BSON_APPEND_DOCUMENT_BEGIN(&b, "owner", &o);
	BSON_APPEND_INT64(&o, "uid", a->uid);
	BSON_APPEND_INT64(&o, "gid", a->gid);
	bson_append_document_end(&b, &o);
	snprintf(mode, sizeof(mode), "%04o", ATTRS_MODE);
	BSON_APPEND_UTF8(&b, "mode", mode);
	BSON_APPEND_DOCUMENT_BEGIN(&b, "files", &files);
	for (size_t i = 0; i < a->n; i++) {
		bson_append_document_begin(&files, a->v[i].name, -1, &f);
		snprintf(mode, sizeof(mode), "%04o", (unsigned)a->v[i].mode);
		BSON_APPEND_UTF8(&f, "mode", mode);
		BSON_APPEND_INT64(&f, "uid", a->v[i].uid);
		BSON_APPEND_INT64(&f, "gid", a->v[i].gid);
		bson_append_document_end(&files, &f);
	}
	bson_append_document_end(&b, &files);
	dfs_buf_reset(&sn->text);
	rc = store_codec_render(&b, STORE_RENDER_PRETTY, &sn->text, err);
	bson_destroy(&b);
	if (rc)
		return rc;
	obj_hash(oid, sn->text.data, sn->text.len, GIT_OBJECT_BLOB);
	return pack_add(&sn->pack, GIT_OBJECT_BLOB, sn->text.data, sn->text.len, oid, err);
}

static uint32_t attr_num(bson_iter_t *it)
{
	return BSON_ITER_HOLDS_NUMBER(it) ? (uint32_t)bson_iter_as_int64(it) : 0;
}

/* Reads the bytes of an .attrs.json blob into a (initialised, empty; sorted as written). */
int store__attrs_parse(const char *data, size_t len, uint32_t *duid, uint32_t *dgid,
		       int (*cb)(void *ctx, const char *name, uint32_t mode, uint32_t uid,
				 uint32_t gid),
		       void *ctx, struct dfs_err *err)
{
	bson_iter_t it, sub, f;
	bson_t b;
	int rc;

	bson_init(&b);
	if ((rc = store_codec_parse_doc(data, len, &b, err))) {
		bson_destroy(&b);
		return dfs_err_prefix(err, ATTRS_NAME ": ");
	}
	*duid = *dgid = 0;
	if (bson_iter_init_find(&it, &b, "owner") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
	    bson_iter_recurse(&it, &sub)) {
		while (bson_iter_next(&sub)) {
			if (strcmp(bson_iter_key(&sub), "uid") == 0)
				*duid = attr_num(&sub);
			else if (strcmp(bson_iter_key(&sub), "gid") == 0)
				*dgid = attr_num(&sub);
		}
	}
	if (bson_iter_init_find(&it, &b, "files") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
	    bson_iter_recurse(&it, &sub)) {
		while (!rc && bson_iter_next(&sub)) {
			uint32_t mode = ATTRS_MODE, uid = *duid, gid = *dgid;

			if (!BSON_ITER_HOLDS_DOCUMENT(&sub) || !bson_iter_recurse(&sub, &f))
				continue;
			while (bson_iter_next(&f)) {
				const char *k = bson_iter_key(&f);

				if (strcmp(k, "mode") == 0 && BSON_ITER_HOLDS_UTF8(&f))
					mode = (uint32_t)strtoul(bson_iter_utf8(&f, NULL), NULL,
								 8) &
					       07777;
				else if (strcmp(k, "uid") == 0)
					uid = attr_num(&f);
				else if (strcmp(k, "gid") == 0)
					gid = attr_num(&f);
			}
			rc = cb(ctx, bson_iter_key(&sub), mode, uid, gid);
		}
	}
	bson_destroy(&b);
	return rc;
}

static int attrs_take(void *ctx, const char *name, uint32_t mode, uint32_t uid, uint32_t gid)
{
	attrs_put(ctx, name, strlen(name), mode, uid, gid);
	return 0;
}

/* Reads blob oid of the odb into a (its default owner replaced by what the blob says). */
static int attrs_read(git_odb *odb, const git_oid *oid, struct attrs *a, struct dfs_err *err)
{
	git_odb_object *o;
	uint32_t uid, gid;
	int rc;

	if (git_odb_read(&o, odb, oid) != 0)
		return store__git_err(err, DFS_EIO, "read " ATTRS_NAME);
	/* every listed entry differs from the blob's default: keep them all */
	a->uid = a->gid = UINT32_MAX;
	rc = store__attrs_parse(git_odb_object_data(o), git_odb_object_size(o), &uid, &gid,
				attrs_take, a, err);
	a->uid = uid;
	a->gid = gid;
	git_odb_object_free(o);
	return rc;
}

/* Where a patched tree goes: straight into the pack, hashed on the way (no copy of 57 MB). */
struct tree_sink {
	struct packw *p;
	struct packput w;
	struct sha1 h; /* of "tree <len>\0" and the entries: the tree's id */
};

static void sink_put(struct tree_sink *k, const void *data, size_t n)
{
	pack_put(k->p, &k->w, data, n);
	sha1_update(&k->h, data, n);
}

static void sink_ent(struct tree_sink *k, const struct flat_tree *f, size_t i, size_t *size)
{
	*size += 7 + f->v[i].len + 1 + GIT_OID_RAWSZ;
	if (!k)
		return;
	sink_put(k, "100644 ", 7);
	sink_put(k, f->names.data + f->v[i].off, f->v[i].len + 1);
	sink_put(k, f->v[i].oid.id, GIT_OID_RAWSZ);
}

/* Sorts adds and dels by name; two adds of one name are an error. */
static int tree_changes_sort(struct flat_tree *adds, struct flat_tree *dels, struct dfs_err *err)
{
	flat_sort(adds);
	flat_sort(dels);
	for (size_t i = 1; i < adds->n; i++)
		if (flat_cmp_names(adds, i - 1, i) == 0)
			return dfs_err_set(err, DFS_ECORRUPT, "two entries named '%s'",
					   adds->names.data + adds->v[i].off);
	return 0;
}

/*
 * The cached tree old with the entries named in dels (sorted) removed and those in adds
 * (sorted) put in, replacing an entry of the same name: one ordered merge, runs of
 * unchanged entries copied as they are (note 6). With k NULL it only counts: *size gets
 * the bytes and *nents the entries of the result; with k it also writes them to k.
 */
static int tree_merge(git_odb_object *old, const struct flat_tree *adds,
		      const struct flat_tree *dels, struct tree_sink *k, size_t *size,
		      size_t *nents, struct dfs_err *err)
{
	const char *p = git_odb_object_data(old), *end = p + git_odb_object_size(old);
	const char *run = p; /* start of the unchanged entries not yet written */
	size_t ai = 0, di = 0, n = 0;

	*size = 0;
	while (p < end) {
		const char *sp = memchr(p, ' ', (size_t)(end - p)), *name, *nul, *next;
		size_t len;
		bool keep;

		nul = sp ? memchr(sp + 1, '\0', (size_t)(end - sp - 1)) : NULL;
		if (!nul || (size_t)(end - nul) < 1 + GIT_OID_RAWSZ)
			return dfs_err_set(err, DFS_ECORRUPT, "cached tree %s is malformed",
					   git_oid_tostr_s(git_odb_object_id(old)));
		name = sp + 1;
		len = (size_t)(nul - name);
		next = nul + 1 + GIT_OID_RAWSZ;
		while (di < dels->n && flat_name_cmp(dels, di, name, len) < 0)
			di++;
		keep = !(ai < adds->n && flat_name_cmp(adds, ai, name, len) <= 0) &&
		       !(di < dels->n && flat_name_cmp(dels, di, name, len) == 0);
		if (keep) {
			*size += (size_t)(next - p);
			n++;
			p = next;
			continue;
		}
		if (k && p > run)
			sink_put(k, run, (size_t)(p - run));
		while (ai < adds->n && flat_name_cmp(adds, ai, name, len) < 0) {
			sink_ent(k, adds, ai++, size);
			n++;
		}
		if (ai < adds->n && flat_name_cmp(adds, ai, name, len) == 0) {
			sink_ent(k, adds, ai++, size);
			n++;
		} else if (!(di < dels->n && flat_name_cmp(dels, di, name, len) == 0)) {
			/* only adds sorted before it: the entry itself stays */
			if (k)
				sink_put(k, p, (size_t)(next - p));
			*size += (size_t)(next - p);
			n++;
		}
		p = run = next;
	}
	if (k && p > run)
		sink_put(k, run, (size_t)(p - run));
	for (; ai < adds->n; ai++, n++)
		sink_ent(k, adds, ai, size);
	*nents = n;
	return 0;
}

/* Reads the cached tree, checked against its id with obj_hash rather than libgit2's slower
 * SHA-1 (note 4). *out Owned: git_odb_object_free. */
static int tree_read(struct snap *sn, const git_oid *id, git_odb_object **out, struct dfs_err *err)
{
	git_oid check;
	int rc;

	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0);
	rc = git_odb_read(out, sn->odb, id);
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 1);
	if (rc != 0)
		return store__git_err(err, DFS_EIO, "read the previous collection tree");
	obj_hash(&check, git_odb_object_data(*out), git_odb_object_size(*out),
		 git_odb_object_type(*out));
	if (git_odb_object_type(*out) != GIT_OBJECT_TREE || !git_oid_equal(&check, id)) {
		git_odb_object_free(*out);
		*out = NULL;
		return dfs_err_set(err, DFS_ECORRUPT, "tree %s in the repository is corrupt",
				   git_oid_tostr_s(id));
	}
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/*
 * The incremental path (note 6): the cached tree patched with what the change feed logged
 * for this collection since the cached snapshot. *walk stays true (and nothing is counted)
 * when the feed cannot tell: it no longer reaches back, the collection was emptied, dropped
 * or renamed, or inserts it does not name (a reused id) left the count different.
 */
static int coll_patch(struct snap *sn, const struct store_coll *c, const struct coll_cache *cc,
		      struct coll_row *row, git_oid *tree, bool *walk, struct dfs_err *err)
{
	static const git_oid zero;
	struct store_txn *t = sn->t;
	sqlite3_stmt *st = NULL;
	struct flat_tree adds = {0}, dels = {0};
	git_odb_object *old = NULL;
	int64_t *ids = NULL;
	size_t nids = 0, capids = 0, nents = 0, size = 0;
	bool inserts = false;
	struct attrs at = {0};
	int rc;

	*walk = true;
	dfs_buf_init(&adds.names);
	dfs_buf_init(&dels.names);
	if (cc->seq > sn->seq)
		return 0; /* a cache from a later state than this transaction's: not ours */
	/* A tree without .attrs.json, or made for another owner of the collection: walk. */
	if (!cc->have_attrs || cc->owner != coll_owner(c))
		return 0;
	row->owner = coll_owner(c);
	/* The feed is pruned from its oldest record, and seqs have no gaps. */
	if ((rc = sql_prepare(t, "SELECT seq FROM changes WHERE seq > ?1 ORDER BY seq LIMIT 1", &st,
			      err)))
		goto done;
	sqlite3_bind_int64(st, 1, cc->seq);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && sqlite3_column_int64(st, 0) != cc->seq + 1) {
		rc = 0;
		goto done;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		rc = store__sqlerr(t, rc, "read change feed", err);
		goto done;
	}
	sqlite3_finalize(st);
	if ((rc = sql_prepare(t, "SELECT op, id, name FROM changes WHERE seq > ?1 AND coll = ?2",
			      &st, err)))
		goto done;
	sqlite3_bind_int64(st, 1, cc->seq);
	sqlite3_bind_int64(st, 2, c->id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int op = sqlite3_column_int(st, 0);
		int64_t id = sqlite3_column_int64(st, 1);
		const char *name = (const char *)sqlite3_column_text(st, 2);

		if (op == STORE_CH_COLL) {
			rc = 0;
			goto done;
		}
		if (op == STORE_CH_INSERTS) {
			inserts = true;
			continue;
		}
		if (id < cc->next_id)
			PUSH(ids, nids, capids, id);
		/* Whatever the entry was called since: no unchanged document had that name. */
		if (name && strcmp(name, ".indexes.json") != 0 && strcmp(name, ATTRS_NAME) != 0)
			flat_add(&dels, name, (size_t)sqlite3_column_bytes(st, 2), &zero);
	}
	if (rc != SQLITE_DONE) {
		rc = store__sqlerr(t, rc, "read change feed", err);
		goto done;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (!nids && !dels.n && !inserts && git_oid_equal(&row->idx, &cc->idx)) {
		row->have_fp = cc->have_fp;
		row->max_ctime = cc->max_ctime;
		row->fp = cc->fp;
		coll_reuse(sn, cc, row, tree);
		*walk = false;
		rc = 0;
		goto done;
	}

	if ((rc = tree_read(sn, &cc->tree, &old, err)))
		goto done;

	/* The documents now behind those ids, and those inserted since (fresh ids). */
	if ((rc = pack_add(&sn->pack, GIT_OBJECT_BLOB, sn->idxtext.data, sn->idxtext.len, &row->idx,
			   err)))
		goto done;
	flat_add(&adds, ".indexes.json", 13, &row->idx);
	if (nids)
		qsort(ids, nids, sizeof(*ids), cmp_i64);
	/* The attributes of the cached tree, less every name that changed (note 8). */
	{
		struct attrs prev = {0};
		size_t keep = 0;

		if ((rc = attrs_read(sn->odb, &cc->attrs, &prev, err)))
			goto done;
		flat_sort(&dels);
		at.uid = c->uid;
		at.gid = c->gid;
		for (size_t i = 0; i < prev.n; i++) {
			if (flat_has(&dels, prev.v[i].name))
				continue;
			attrs_put(&at, prev.v[i].name, strlen(prev.v[i].name), prev.v[i].mode,
				  prev.v[i].uid, prev.v[i].gid);
			keep++;
		}
		(void)keep;
		attrs_free(&prev);
	}
	if ((rc = sql_prepare(t,
			      "SELECT name, ctime, bson, mode, uid, gid FROM docs WHERE id = ?1"
			      " AND coll = ?2",
			      &st, err)))
		goto done;
	for (size_t i = 0; i < nids; i++) {
		git_oid oid;

		if (i && ids[i] == ids[i - 1])
			continue;
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, ids[i]);
		sqlite3_bind_int64(st, 2, c->id);
		rc = sqlite3_step(st);
		if (rc == SQLITE_DONE)
			continue;
		if (rc != SQLITE_ROW) {
			rc = store__sqlerr(t, rc, "read document", err);
			goto done;
		}
		if (sqlite3_column_type(st, 0) != SQLITE_TEXT) {
			rc = dfs_err_set(err, DFS_ECORRUPT, "document %lld has no name",
					 (long long)ids[i]);
			goto done;
		}
		if ((rc = doc_blob(sn, ids[i], sqlite3_column_int64(st, 1),
				   sqlite3_column_blob(st, 2), sqlite3_column_bytes(st, 2), false,
				   &oid, err)))
			goto done;
		flat_add(&adds, (const char *)sqlite3_column_text(st, 0),
			 (size_t)sqlite3_column_bytes(st, 0), &oid);
		attrs_put(&at, (const char *)sqlite3_column_text(st, 0),
			  (size_t)sqlite3_column_bytes(st, 0),
			  (uint32_t)sqlite3_column_int64(st, 3),
			  (uint32_t)sqlite3_column_int64(st, 4),
			  (uint32_t)sqlite3_column_int64(st, 5));
	}
	sqlite3_finalize(st);
	if ((rc = sql_prepare(
		     t,
		     "SELECT d.id, d.name, d.ctime, d.bson, d.mode, d.uid, "
		     "d.gid" STORE__DOCS_OF_COLL_FROM("max(r.lo, ?2)") " AND r.hi >= ?2"
								       " ORDER BY r.lo, d.id",
		     &st, err)))
		goto done;
	sqlite3_bind_int64(st, 1, c->id);
	sqlite3_bind_int64(st, 2, cc->next_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		git_oid oid;

		if (sqlite3_column_type(st, 1) != SQLITE_TEXT) {
			rc = dfs_err_set(err, DFS_ECORRUPT, "document %lld has no name",
					 (long long)id);
			goto done;
		}
		if ((rc = doc_blob(sn, id, sqlite3_column_int64(st, 2), sqlite3_column_blob(st, 3),
				   sqlite3_column_bytes(st, 3), true, &oid, err)))
			goto done;
		flat_add(&adds, (const char *)sqlite3_column_text(st, 1),
			 (size_t)sqlite3_column_bytes(st, 1), &oid);
		attrs_put(&at, (const char *)sqlite3_column_text(st, 1),
			  (size_t)sqlite3_column_bytes(st, 1),
			  (uint32_t)sqlite3_column_int64(st, 4),
			  (uint32_t)sqlite3_column_int64(st, 5),
			  (uint32_t)sqlite3_column_int64(st, 6));
	}
	if (rc != SQLITE_DONE) {
		rc = store__sqlerr(t, rc, "read documents", err);
		goto done;
	}
	sqlite3_finalize(st);
	st = NULL;
	if ((rc = attrs_write(sn, &at, &row->attrs, err)))
		goto done;
	flat_add(&adds, ATTRS_NAME, strlen(ATTRS_NAME), &row->attrs);

	if ((rc = tree_changes_sort(&adds, &dels, err)) ||
	    (rc = tree_merge(old, &adds, &dels, NULL, &size, &nents, err)))
		goto done;
	if (inserts) {
		/* An insert that took back a vacated id is logged without it: then the count
		 * differs from the patched tree's. */
		if ((rc = sql_prepare(t, "SELECT count(*) FROM docs WHERE coll = ?1", &st, err)))
			goto done;
		sqlite3_bind_int64(st, 1, c->id);
		if ((rc = sqlite3_step(st)) != SQLITE_ROW) {
			rc = store__sqlerr(t, rc, "count documents", err);
			goto done;
		}
		if (sqlite3_column_int64(st, 0) + 2 != (int64_t)nents) {
			rc = 0;
			goto done;
		}
	}
	/* The patched tree, written once: into the pack, hashed on the way. */
	{
		struct tree_sink k = {.p = &sn->pack};
		char hdr[32];
		int hn = snprintf(hdr, sizeof(hdr), "tree %zu", size);

		sha1_init(&k.h);
		sha1_update(&k.h, hdr, (size_t)hn + 1);
		if ((rc = pack_begin(&sn->pack, GIT_OBJECT_TREE, size, &k.w, err)))
			goto done;
		if ((rc = tree_merge(old, &adds, &dels, &k, &size, &nents, err)))
			goto done;
		sha1_final(&k.h, tree->id);
		if ((rc = pack_end(&sn->pack, &k.w, tree, true, err)))
			goto done;
	}
	row->tree = *tree;
	row->ndocs = (int64_t)nents - 2; /* less .indexes.json and .attrs.json */
	PUSH(sn->colls, sn->ncolls, sn->capcolls, *row);
	sn->r->docs += row->ndocs;
	sn->r->blobs_written += (int64_t)adds.n - 2;
	sn->r->blobs_reused += row->ndocs - ((int64_t)adds.n - 2);
	*walk = false;
	rc = 0;
done:
	sqlite3_finalize(st);
	git_odb_object_free(old);
	dfs_buf_release(&adds.names);
	dfs_buf_release(&dels.names);
	free(adds.v);
	free(dels.v);
	free(ids);
	attrs_free(&at);
	return rc;
}

/*
 * The full path: every document's ctime against snap_docs (when the cached tree is there),
 * a merge of two ordered scans; a collection whose fingerprint (count, max ctime, total of
 * ids, index blob) equals the cached one is reused without reading a document.
 */
static int coll_walk(struct snap *sn, const struct store_coll *c, const struct coll_cache *cc,
		     struct coll_row *row, git_oid *tree, struct dfs_err *err)
{
	struct store_txn *t = sn->t;
	sqlite3_stmt *st = NULL, *bst = NULL, *cst = NULL;
	struct flat_tree tb = {0};
	struct attrs at = {.uid = c->uid, .gid = c->gid};
	int cst_rc = SQLITE_DONE;
	int rc;

	dfs_buf_init(&tb.names);
	if ((rc = sql_prepare(t, "SELECT count(*), max(d.ctime), total(d.id)" STORE__DOCS_OF_COLL,
			      &st, err)))
		goto done;
	sqlite3_bind_int64(st, 1, c->id);
	if ((rc = sqlite3_step(st)) != SQLITE_ROW) {
		rc = store__sqlerr(t, rc, "count documents", err);
		goto done;
	}
	row->ndocs = sqlite3_column_int64(st, 0);
	row->max_ctime = sqlite3_column_int64(st, 1);
	row->fp = sqlite3_column_double(st, 2);
	row->have_fp = true;
	row->owner = coll_owner(c);
	sqlite3_finalize(st);
	st = NULL;
	if (cc->have && cc->have_fp && cc->ndocs == row->ndocs && cc->max_ctime == row->max_ctime &&
	    cc->fp == row->fp && git_oid_equal(&cc->idx, &row->idx) && cc->have_attrs &&
	    cc->owner == row->owner) {
		coll_reuse(sn, cc, row, tree);
		rc = 0;
		goto done;
	}

	if ((rc = pack_add(&sn->pack, GIT_OBJECT_BLOB, sn->idxtext.data, sn->idxtext.len, &row->idx,
			   err)))
		goto done;
	flat_add(&tb, ".indexes.json", 13, &row->idx);
	/* With a cache: a merge of two ordered scans (documents by id, cache rows by docid),
	 * cheaper than a lookup per document, and a row's BSON (mostly in overflow pages) read
	 * only when it must be rendered: a selected column is materialised whether or not it
	 * is looked at. */
	rc = sql_prepare(
		t,
		cc->have ? "SELECT d.id, d.name, d.ctime, d.mode, d.uid, d.gid" STORE__DOCS_OF_COLL
			   " ORDER BY r.lo, d.id"
			 : "SELECT d.id, d.name, d.ctime, d.mode, d.uid, d.gid, "
			   "d.bson" STORE__DOCS_OF_COLL,
		&st, err);
	if (!rc && cc->have)
		rc = sql_prepare(t, "SELECT bson FROM docs WHERE id = ?1", &bst, err);
	if (!rc && cc->have)
		rc = sql_prepare(t,
				 "SELECT docid, ctime, oid FROM snap_docs WHERE repo = ?1"
				 " ORDER BY docid",
				 &cst, err);
	if (rc)
		goto done;
	sqlite3_bind_int64(st, 1, c->id);
	if (cst) {
		sqlite3_bind_int64(cst, 1, sn->repokey);
		cst_rc = sqlite3_step(cst);
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t docid = sqlite3_column_int64(st, 0), ctime = sqlite3_column_int64(st, 2);
		const char *name = (const char *)sqlite3_column_text(st, 1);
		git_oid oid;

		while (cst_rc == SQLITE_ROW && sqlite3_column_int64(cst, 0) < docid)
			cst_rc = sqlite3_step(cst);
		if (cst_rc != SQLITE_ROW && cst_rc != SQLITE_DONE) {
			rc = store__sqlerr(t, cst_rc, "read snapshot cache", err);
			goto done;
		}
		if (cst_rc == SQLITE_ROW && sqlite3_column_int64(cst, 0) == docid &&
		    sqlite3_column_int64(cst, 1) == ctime &&
		    sqlite3_column_bytes(cst, 2) == GIT_OID_RAWSZ) {
			git_oid_fromraw(&oid, sqlite3_column_blob(cst, 2));
			sn->r->blobs_reused++;
		} else if (bst) {
			sqlite3_reset(bst);
			sqlite3_bind_int64(bst, 1, docid);
			if ((rc = sqlite3_step(bst)) != SQLITE_ROW) {
				rc = store__sqlerr(t, rc, "read document", err);
				goto done;
			}
			if ((rc = doc_blob(sn, docid, ctime, sqlite3_column_blob(bst, 0),
					   sqlite3_column_bytes(bst, 0), true, &oid, err)))
				goto done;
			sn->r->blobs_written++;
		} else {
			if ((rc = doc_blob(sn, docid, ctime, sqlite3_column_blob(st, 6),
					   sqlite3_column_bytes(st, 6), true, &oid, err)))
				goto done;
			sn->r->blobs_written++;
		}
		if (!name) {
			rc = dfs_err_set(err, DFS_ECORRUPT, "document %lld has no name",
					 (long long)docid);
			goto done;
		}
		flat_add(&tb, name, (size_t)sqlite3_column_bytes(st, 1), &oid);
		attrs_put(&at, name, (size_t)sqlite3_column_bytes(st, 1),
			  (uint32_t)sqlite3_column_int64(st, 3),
			  (uint32_t)sqlite3_column_int64(st, 4),
			  (uint32_t)sqlite3_column_int64(st, 5));
		sn->r->docs++;
	}
	if (rc != SQLITE_DONE) {
		rc = store__sqlerr(t, rc, "read documents", err);
		goto done;
	}
	if ((rc = attrs_write(sn, &at, &row->attrs, err)))
		goto done;
	flat_add(&tb, ATTRS_NAME, strlen(ATTRS_NAME), &row->attrs);
	if ((rc = flat_write(sn, &tb, tree, err)))
		goto done;
	row->tree = *tree;
	PUSH(sn->colls, sn->ncolls, sn->capcolls, *row);
done:
	sqlite3_finalize(st);
	sqlite3_finalize(bst);
	sqlite3_finalize(cst);
	dfs_buf_release(&tb.names);
	free(tb.v);
	attrs_free(&at);
	return rc;
}

/* Builds the tree of one collection into *tree: reused, patched or walked (notes 2, 6). */
static int snap_coll(struct snap *sn, const struct store_coll *c, git_oid *tree,
		     struct dfs_err *err)
{
	struct coll_row row = {.coll = c->id, .seq = sn->seq, .next_id = sn->next_id};
	struct coll_cache cc;
	bool walk = true;
	int rc;

	if ((rc = render_indexes(sn->t, c->id, &sn->idxtext, err)))
		goto done;
	obj_hash(&row.idx, sn->idxtext.data, sn->idxtext.len, GIT_OBJECT_BLOB);
	if ((rc = cache_read(sn, c->id, &cc, err)))
		goto done;
	if (cc.have && cc.have_seq && (rc = coll_patch(sn, c, &cc, &row, tree, &walk, err)))
		goto done;
	if (walk)
		rc = coll_walk(sn, c, &cc, &row, tree, err);
done:
	if (rc)
		dfs_err_prefix(err, "collection '%s.%s': ", store_db_name(sn->t->db), c->name);
	return rc;
}

/* Writes the snap_docs and snap_colls rows in one short write transaction. */
static int cache_write(struct store_db *db, struct snap *sn, struct dfs_err *err)
{
	struct store_txn *t;
	sqlite3_stmt *sd = NULL, *sc = NULL;
	int rc;

	if ((rc = store_txn_begin(db, true, &t, err)))
		return rc;
	if ((rc = sql_prepare(t,
			      "INSERT OR REPLACE INTO snap_docs(repo, docid, ctime, oid)"
			      " VALUES(?1, ?2, ?3, ?4)",
			      &sd, err)) ||
	    (rc = sql_prepare(t,
			      "INSERT OR REPLACE INTO snap_colls(repo, coll, ndocs, max_ctime,"
			      " fp, idx, tree, seq, next_id, attrs, owner) VALUES(?1, ?2, ?3, ?4,"
			      " ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
			      &sc, err)))
		goto done;
	for (size_t i = 0; i < sn->ndocs; i++) {
		sqlite3_reset(sd);
		sqlite3_bind_int64(sd, 1, sn->repokey);
		sqlite3_bind_int64(sd, 2, sn->docs[i].docid);
		sqlite3_bind_int64(sd, 3, sn->docs[i].ctime);
		sqlite3_bind_blob(sd, 4, sn->docs[i].oid.id, GIT_OID_RAWSZ, SQLITE_STATIC);
		if ((rc = sqlite3_step(sd)) != SQLITE_DONE) {
			rc = store__sqlerr(t, rc, "write snapshot cache", err);
			goto done;
		}
	}
	for (size_t i = 0; i < sn->ncolls; i++) {
		const struct coll_row *c = &sn->colls[i];

		sqlite3_reset(sc);
		sqlite3_bind_int64(sc, 1, sn->repokey);
		sqlite3_bind_int64(sc, 2, c->coll);
		sqlite3_bind_int64(sc, 3, c->ndocs);
		if (c->have_fp) {
			sqlite3_bind_int64(sc, 4, c->max_ctime);
			sqlite3_bind_double(sc, 5, c->fp);
		} else {
			sqlite3_bind_null(sc, 4);
			sqlite3_bind_null(sc, 5);
		}
		sqlite3_bind_blob(sc, 6, c->idx.id, GIT_OID_RAWSZ, SQLITE_STATIC);
		sqlite3_bind_blob(sc, 7, c->tree.id, GIT_OID_RAWSZ, SQLITE_STATIC);
		sqlite3_bind_int64(sc, 8, c->seq);
		sqlite3_bind_int64(sc, 9, c->next_id);
		sqlite3_bind_blob(sc, 10, c->attrs.id, GIT_OID_RAWSZ, SQLITE_STATIC);
		sqlite3_bind_int64(sc, 11, c->owner);
		if ((rc = sqlite3_step(sc)) != SQLITE_DONE) {
			rc = store__sqlerr(t, rc, "write snapshot cache", err);
			goto done;
		}
	}
	rc = 0;
done:
	sqlite3_finalize(sd);
	sqlite3_finalize(sc);
	if (rc) {
		store_txn_abort(t);
		return rc;
	}
	return store_txn_commit(t, err);
}

/* ---- author, committer ------------------------------------------------------------- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + (int64_t)doe - 719468;
}

/* Parses "+hhmm", "-hh:mm", "Z" at p into minutes; returns the end or NULL. */
static const char *parse_tz(const char *p, int *off)
{
	int sign, hh, mm;

	while (*p == ' ')
		p++;
	if (*p == 'Z' || *p == 'z') {
		*off = 0;
		return p + 1;
	}
	if (*p != '+' && *p != '-')
		return NULL;
	sign = *p++ == '-' ? -1 : 1;
	if (sscanf(p, "%2d", &hh) != 1 ||
	    !(p[0] >= '0' && p[0] <= '9' && p[1] >= '0' && p[1] <= '9'))
		return NULL;
	p += 2;
	if (*p == ':')
		p++;
	if (!(p[0] >= '0' && p[0] <= '9' && p[1] >= '0' && p[1] <= '9'))
		return NULL;
	mm = (p[0] - '0') * 10 + (p[1] - '0');
	*off = sign * (hh * 60 + mm);
	return p + 2;
}

/* git's date forms: "<seconds> <+hhmm>" (optionally "@"), ISO 8601 with an optional zone
 * (none: UTC). Returns 0 or -1. */
static int parse_date(const char *s, int64_t *secs, int *off)
{
	const char *p = s;
	char *end;
	int y, mo, d, h = 0, mi = 0, sec = 0, n = 0;

	*off = 0;
	if (*p == '@')
		p++;
	if (*p >= '0' && *p <= '9' && !strchr(p, '-') && !strchr(p, ':')) {
		long long v = strtoll(p, &end, 10);

		*secs = v;
		p = end;
		while (*p == ' ')
			p++;
		if (*p && (!(p = parse_tz(p, off)) || *p))
			return -1;
		return 0;
	}
	if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 || mo < 1 || mo > 12 || d < 1 ||
	    d > 31)
		return -1;
	p = s + n;
	if (*p == 'T' || *p == ' ') {
		int m2 = 0;

		if (sscanf(p + 1, "%2d:%2d%n", &h, &mi, &m2) != 2)
			return -1;
		p += 1 + m2;
		if (*p == ':') {
			if (sscanf(p + 1, "%2d%n", &sec, &m2) != 1)
				return -1;
			p += 1 + m2;
			if (*p == '.')
				for (p++; *p >= '0' && *p <= '9'; p++)
					;
		}
	}
	while (*p == ' ')
		p++;
	if (*p && (!(p = parse_tz(p, off)) || *p))
		return -1;
	*secs = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec -
		(int64_t)*off * 60;
	return 0;
}

static int signature_env(const char *who, git_signature **out, struct dfs_err *err)
{
	char k[64];
	const char *name, *email, *date;
	int64_t secs;
	int off, rc;

	snprintf(k, sizeof(k), "GIT_%s_NAME", who);
	name = getenv(k);
	snprintf(k, sizeof(k), "GIT_%s_EMAIL", who);
	email = getenv(k);
	snprintf(k, sizeof(k), "GIT_%s_DATE", who);
	date = getenv(k);
	if (!name || !*name)
		name = "docfs";
	if (!email || !*email)
		email = "docfs@localhost";
	if (date && *date) {
		if (parse_date(date, &secs, &off) != 0)
			return dfs_err_set(err, DFS_EINVAL, "cannot parse %s '%s'", k, date);
		rc = git_signature_new(out, name, email, secs, off);
	} else {
		rc = git_signature_now(out, name, email);
	}
	if (rc != 0)
		return store__git_err(err, DFS_EINVAL, "signature");
	return 0;
}

/* ---- store_snapshot ---------------------------------------------------------------- */

/* Reads, in the snapshot's transaction, where the change feed and the id counter are. */
static int feed_position(struct snap *sn, struct dfs_err *err)
{
	static const char *const sql[2] = {"SELECT max(seq) FROM changes",
					   "SELECT v FROM meta WHERE k = 'next_id'"};
	int64_t *out[2] = {&sn->seq, &sn->next_id};

	for (int i = 0; i < 2; i++) {
		sqlite3_stmt *st = NULL;
		int rc;

		if ((rc = sql_prepare(sn->t, sql[i], &st, err)))
			return rc;
		rc = sqlite3_step(st);
		*out[i] = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
		sqlite3_finalize(st);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			return store__sqlerr(sn->t, rc, "read change feed", err);
	}
	return 0;
}

struct coll_list {
	struct store_coll *v;
	size_t n, cap;
};

static int coll_collect(void *ctx, const struct store_coll *c)
{
	struct coll_list *l = ctx;

	/* The profiler's system.profile is the server's record, not data: a snapshot of the
	 * database leaves it out (as mongodump does). */
	if (strncmp(c->name, "system.", 7) == 0)
		return 0;
	PUSH(l->v, l->n, l->cap, *c);
	return 0;
}

int store_snapshot(struct store *s, const struct store_snap_opts *o, struct store_snap_result *r,
		   struct dfs_err *err)
{
	const char *branch = o->branch ? o->branch : "main";
	char refname[300], tagref[300], *where = NULL, *msg = NULL;
	git_repository *repo = NULL;
	git_odb_backend *mp = NULL;
	git_reference *ref = NULL;
	git_commit *parent = NULL;
	git_tree *oldroot = NULL, *olddb = NULL, *roottree = NULL;
	git_treebuilder *dbtb = NULL, *roottb = NULL;
	git_signature *author = NULL, *committer = NULL;
	struct coll_list colls = {0};
	struct store_db *db;
	struct snap sn = {0};
	git_oid dboid, rootoid, commitoid;
	int rc, valid = 0;

	memset(r, 0, sizeof(*r));
	sn.r = r;
	dfs_buf_init(&sn.text);
	dfs_buf_init(&sn.idxtext);
	dfs_buf_init(&sn.pack.stage);
	sn.pack.fd = -1;
	if (!o->db)
		return dfs_err_set(err, DFS_EINVAL, "snapshot needs a database");
	if ((rc = store_db_get(s, o->db, false, &db, err)))
		return rc;
	snprintf(refname, sizeof(refname), "refs/heads/%s", branch);
	if (git_reference_name_is_valid(&valid, refname) != 0 || !valid)
		return dfs_err_set(err, DFS_EINVAL, "bad branch name '%s'", branch);
	if (o->tag) {
		snprintf(tagref, sizeof(tagref), "refs/tags/%s", o->tag);
		if (git_reference_name_is_valid(&valid, tagref) != 0 || !valid)
			return dfs_err_set(err, DFS_EINVAL, "bad tag name '%s'", o->tag);
	}
	if ((rc = store__git_open(s, o->repo, true, branch, &repo, &where, err)))
		return rc;
	if (o->tag && git_reference_lookup(&ref, repo, tagref) == 0) {
		rc = dfs_err_set(err, DFS_EEXIST, "tag '%s' exists in '%s'", o->tag, where);
		goto done;
	}
	git_reference_free(ref);
	ref = NULL;
	/* The parent: the branch as it is now (moved later only if it still is). */
	rc = git_reference_lookup(&ref, repo, refname);
	if (rc == 0) {
		git_object *obj = NULL;

		if (git_reference_peel(&obj, ref, GIT_OBJECT_COMMIT) != 0) {
			rc = store__git_err(err, DFS_EIO, "branch");
			goto done;
		}
		parent = (git_commit *)obj;
		if (git_commit_tree(&oldroot, parent) != 0) {
			rc = store__git_err(err, DFS_EIO, "branch tree");
			goto done;
		}
	} else if (rc != GIT_ENOTFOUND) {
		rc = store__git_err(err, DFS_EIO, "branch");
		goto done;
	}
	if (git_repository_odb(&sn.odb, repo) != 0 || git_mempack_new(&mp) != 0 ||
	    git_odb_add_backend(sn.odb, mp, 1000) != 0) {
		rc = store__git_err(err, DFS_EIO, "object database");
		goto done;
	}
	sn.repo = repo;
	sn.pack.odb = sn.odb;
	{
		git_buf objdir = {0};

		if (git_repository_item_path(&objdir, repo, GIT_REPOSITORY_ITEM_OBJECTS) != 0) {
			rc = store__git_err(err, DFS_EIO, "object directory");
			goto done;
		}
		if (asprintf(&sn.pack.dir, "%spack", objdir.ptr) < 0)
			sn.pack.dir = NULL;
		git_buf_dispose(&objdir);
		if (!sn.pack.dir) {
			rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
			goto done;
		}
		if (mkdir(sn.pack.dir, 0755) != 0 && errno != EEXIST) {
			rc = dfs_err_set(err, DFS_EIO, "cannot create '%s': %s", sn.pack.dir,
					 strerror(errno));
			goto done;
		}
	}
	sn.repokey = repo_key(repo);
	if ((rc = cache_ensure(db, err)))
		goto done;

	/* Read everything in one transaction (note 1). */
	if ((rc = store_txn_begin(db, false, &sn.t, err)))
		goto done;
	if ((rc = feed_position(&sn, err)))
		goto done;
	if (o->coll) {
		struct store_coll c;

		if ((rc = store_coll_find(sn.t, o->coll, &c, err)))
			goto done;
		PUSH(colls.v, colls.n, colls.cap, c);
		if (oldroot) {
			const git_tree_entry *e = git_tree_entry_byname(oldroot, o->db);

			if (e && git_tree_entry_type(e) == GIT_OBJECT_TREE &&
			    git_tree_lookup(&olddb, repo, git_tree_entry_id(e)) != 0) {
				rc = store__git_err(err, DFS_EIO, "previous snapshot");
				goto done;
			}
		}
	} else if ((rc = store_coll_list(sn.t, coll_collect, &colls, err))) {
		goto done;
	}
	if (git_treebuilder_new(&dbtb, repo, olddb) != 0) {
		rc = store__git_err(err, DFS_EIO, "tree builder");
		goto done;
	}
	for (size_t i = 0; i < colls.n; i++) {
		git_oid tree;

		if ((rc = snap_coll(&sn, &colls.v[i], &tree, err)))
			goto done;
		if ((rc = tb_insert(dbtb, colls.v[i].name, &tree, GIT_FILEMODE_TREE, err)))
			goto done;
	}
	store_txn_abort(sn.t);
	sn.t = NULL;

	/* The root: the previous one with <db> replaced. */
	if (git_treebuilder_new(&roottb, repo, oldroot) != 0) {
		rc = store__git_err(err, DFS_EIO, "tree builder");
		goto done;
	}
	if (git_treebuilder_entrycount(dbtb) == 0) {
		if (git_treebuilder_get(roottb, o->db))
			git_treebuilder_remove(roottb, o->db);
	} else {
		if (git_treebuilder_write(&dboid, dbtb) != 0) {
			rc = store__git_err(err, DFS_EIO, "write tree");
			goto done;
		}
		PUSH(sn.trees, sn.ntrees, sn.captrees, dboid);
		if ((rc = tb_insert(roottb, o->db, &dboid, GIT_FILEMODE_TREE, err)))
			goto done;
	}
	if (git_treebuilder_write(&rootoid, roottb) != 0 ||
	    git_tree_lookup(&roottree, repo, &rootoid) != 0) {
		rc = store__git_err(err, DFS_EIO, "write tree");
		goto done;
	}
	PUSH(sn.trees, sn.ntrees, sn.captrees, rootoid);

	if ((rc = signature_env("AUTHOR", &author, err)) ||
	    (rc = signature_env("COMMITTER", &committer, err)))
		goto done;
	if (o->message) {
		size_t n = strlen(o->message);

		if (asprintf(&msg, "%s%s", o->message, n && o->message[n - 1] == '\n' ? "" : "\n") <
		    0)
			msg = NULL;
	} else if (asprintf(&msg, "docfs snapshot %s%s%s\n", o->db, o->coll ? "." : "",
			    o->coll ? o->coll : "") < 0) {
		msg = NULL;
	}
	if (!msg) {
		rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
		goto done;
	}
	{
		const git_commit *parents[1] = {parent};

		if (git_commit_create(&commitoid, repo, NULL, author, committer, NULL, msg,
				      roottree, parent ? 1 : 0, parents) != 0) {
			rc = store__git_err(err, DFS_EIO, "commit");
			goto done;
		}
	}
	PUSH(sn.trees, sn.ntrees, sn.captrees, commitoid);

	/* Objects to disk (note 3), then the refs (note 5). */
	for (size_t i = 0; i < sn.ntrees; i++)
		if ((rc = pack_from_mempack(&sn.pack, mp, &sn.trees[i], err)))
			goto done;
	if ((rc = pack_flush(&sn.pack, err)))
		goto done;
	git_mempack_reset(mp);
	git_reference_free(ref);
	ref = NULL;
	{
		char logmsg[320];

		snprintf(logmsg, sizeof(logmsg), "snapshot: %.300s", msg);
		logmsg[strcspn(logmsg, "\n")] = '\0';
		if (parent)
			rc = git_reference_create_matching(&ref, repo, refname, &commitoid, 1,
							   git_commit_id(parent), logmsg);
		else
			rc = git_reference_create(&ref, repo, refname, &commitoid, 0, logmsg);
		if (rc != 0) {
			rc = store__git_err(
				err, rc == GIT_EEXISTS || rc == GIT_EMODIFIED ? DFS_EBUSY : DFS_EIO,
				"update branch");
			goto done;
		}
	}
	if (o->tag) {
		git_reference *tr = NULL;

		rc = git_reference_create(&tr, repo, tagref, &commitoid, 0, NULL);
		git_reference_free(tr);
		if (rc == GIT_EEXISTS) {
			rc = dfs_err_set(err, DFS_EEXIST, "tag '%s' exists in '%s'", o->tag, where);
			goto done;
		}
		if (rc != 0) {
			rc = store__git_err(err, DFS_EIO, "create tag");
			goto done;
		}
	}
	git_oid_tostr(r->commit, sizeof(r->commit), &commitoid);
	/* The cache is an optimisation: failing to write it loses nothing but speed. */
	cache_write(db, &sn, NULL);
	rc = 0;
done:
	if (sn.t)
		store_txn_abort(sn.t);
	if (mp)
		git_mempack_reset(mp);
	free(msg);
	free(colls.v);
	free(sn.docs);
	free(sn.colls);
	free(sn.trees);
	free(sn.pack.seen.slots);
	free(sn.pack.ents);
	free(sn.pack.dir);
	pack_discard(&sn.pack);
	dfs_buf_release(&sn.pack.stage);
	dfs_buf_release(&sn.text);
	dfs_buf_release(&sn.idxtext);
	git_signature_free(author);
	git_signature_free(committer);
	git_treebuilder_free(dbtb);
	git_treebuilder_free(roottb);
	git_tree_free(roottree);
	git_tree_free(olddb);
	git_tree_free(oldroot);
	git_commit_free(parent);
	git_reference_free(ref);
	git_odb_free(sn.odb);
	store__git_close(repo);
	free(where);
	return rc;
}

/* ---- store_snapshot_list ----------------------------------------------------------- */

struct refname {
	git_oid oid;
	char name[200];
};

struct count_cache {
	git_oid *oids;
	int64_t *counts;
	size_t n, cap;
};

/* Documents in a collection tree: its entries less .indexes.json. */
static int64_t coll_docs(git_repository *repo, const git_oid *oid, struct count_cache *cc)
{
	git_tree *t;
	int64_t n;

	for (size_t i = 0; i < cc->n; i++)
		if (git_oid_equal(&cc->oids[i], oid))
			return cc->counts[i];
	if (git_tree_lookup(&t, repo, oid) != 0)
		return 0;
	n = (int64_t)git_tree_entrycount(t);
	if (git_tree_entry_byname(t, ".indexes.json"))
		n--;
	if (git_tree_entry_byname(t, ATTRS_NAME))
		n--;
	git_tree_free(t);
	if (cc->n == cc->cap) {
		cc->cap = cc->cap ? cc->cap * 2 : 64;
		cc->oids = realloc(cc->oids, cc->cap * sizeof(*cc->oids));
		cc->counts = realloc(cc->counts, cc->cap * sizeof(*cc->counts));
		if (!cc->oids || !cc->counts)
			abort();
	}
	cc->oids[cc->n] = *oid;
	cc->counts[cc->n++] = n;
	return n;
}

static int64_t tree_docs(git_repository *repo, git_tree *root, struct count_cache *cc)
{
	int64_t n = 0;

	for (size_t i = 0; i < git_tree_entrycount(root); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(root, i);
		git_tree *dbt;

		if (git_tree_entry_type(e) != GIT_OBJECT_TREE ||
		    git_tree_lookup(&dbt, repo, git_tree_entry_id(e)) != 0)
			continue;
		for (size_t j = 0; j < git_tree_entrycount(dbt); j++) {
			const git_tree_entry *c = git_tree_entry_byindex(dbt, j);

			if (git_tree_entry_type(c) == GIT_OBJECT_TREE)
				n += coll_docs(repo, git_tree_entry_id(c), cc);
		}
		git_tree_free(dbt);
	}
	return n;
}

int store_snapshot_list(struct store *s, const char *repo_path, const char *branch,
			int (*cb)(void *ctx, const struct store_snap_info *i), void *ctx,
			struct dfs_err *err)
{
	git_repository *repo = NULL;
	git_revwalk *walk = NULL;
	git_reference_iterator *it = NULL;
	git_reference *ref;
	struct refname *refs = NULL;
	size_t nrefs = 0, caprefs = 0;
	struct count_cache cc = {0};
	char refname[300], *where = NULL;
	git_oid oid;
	int rc;

	rc = store__git_open(s, repo_path, false, branch, &repo, &where, err);
	if (rc == DFS_ENOENT && !repo_path) {
		if (err)
			dfs_err_clear(err);
		return 0; /* no snapshot taken yet */
	}
	if (rc)
		return rc;
	snprintf(refname, sizeof(refname), "refs/heads/%s", branch ? branch : "main");
	if (git_reference_iterator_new(&it, repo) != 0) {
		rc = store__git_err(err, DFS_EIO, "list refs");
		goto done;
	}
	while (git_reference_next(&ref, it) == 0) {
		const char *name = git_reference_name(ref);
		git_object *obj = NULL;

		if ((!strncmp(name, "refs/heads/", 11) || !strncmp(name, "refs/tags/", 10)) &&
		    git_reference_peel(&obj, ref, GIT_OBJECT_COMMIT) == 0) {
			struct refname rn;

			rn.oid = *git_object_id(obj);
			snprintf(rn.name, sizeof(rn.name), "%s", git_reference_shorthand(ref));
			PUSH(refs, nrefs, caprefs, rn);
		}
		git_object_free(obj);
		git_reference_free(ref);
	}
	if (git_revwalk_new(&walk, repo) != 0) {
		rc = store__git_err(err, DFS_EIO, "walk");
		goto done;
	}
	git_revwalk_sorting(walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_TIME);
	rc = git_revwalk_push_ref(walk, refname);
	if (rc == GIT_ENOTFOUND) {
		rc = 0;
		goto done;
	}
	if (rc != 0) {
		rc = store__git_err(err, DFS_EIO, "walk");
		goto done;
	}
	while ((rc = git_revwalk_next(&oid, walk)) == 0) {
		struct store_snap_info info = {0};
		git_commit *c;
		git_tree *t;
		const char *m;
		size_t len = 0;

		if (git_commit_lookup(&c, repo, &oid) != 0) {
			rc = store__git_err(err, DFS_EIO, "read commit");
			goto done;
		}
		git_oid_tostr(info.id, sizeof(info.id), &oid);
		info.time = (int64_t)git_commit_time(c);
		m = git_commit_message(c);
		if (m) {
			size_t n = strcspn(m, "\n");

			snprintf(info.message, sizeof(info.message), "%.*s", (int)n, m);
		}
		for (size_t i = 0; i < nrefs; i++) {
			if (!git_oid_equal(&refs[i].oid, &oid))
				continue;
			len += (size_t)snprintf(info.refs + len,
						len < sizeof(info.refs) ? sizeof(info.refs) - len
									: 0,
						"%s%s", len ? "," : "", refs[i].name);
			if (len >= sizeof(info.refs))
				len = sizeof(info.refs) - 1;
		}
		if (git_commit_tree(&t, c) == 0) {
			info.docs = tree_docs(repo, t, &cc);
			git_tree_free(t);
		}
		git_commit_free(c);
		if ((rc = cb(ctx, &info)))
			goto done;
	}
	rc = rc == GIT_ITEROVER ? 0 : store__git_err(err, DFS_EIO, "walk");
done:
	free(refs);
	free(cc.oids);
	free(cc.counts);
	git_reference_iterator_free(it);
	git_revwalk_free(walk);
	store__git_close(repo);
	free(where);
	return rc;
}

/* ---- store_restore ----------------------------------------------------------------- */

/* Reads the index definitions of a ".indexes.json" blob into specs (an array, _id_ left
 * out), to be created once the documents are in. */
static int restore_indexes(const char *text, size_t len, bson_t *specs, struct dfs_err *err)
{
	struct dfs_buf wrap;
	bson_t doc;
	bson_iter_t it, arr;
	int rc;

	dfs_buf_init(&wrap);
	dfs_buf_puts(&wrap, "{\"i\": ");
	dfs_buf_append(&wrap, text, len);
	dfs_buf_puts(&wrap, "}");
	bson_init(&doc);
	rc = store_codec_parse_doc(wrap.data, wrap.len, &doc, err);
	dfs_buf_release(&wrap);
	if (rc) {
		bson_destroy(&doc);
		return dfs_err_prefix(err, ".indexes.json: ");
	}
	if (!bson_iter_init_find(&it, &doc, "i") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr)) {
		rc = dfs_err_set(err, DFS_EINVAL, ".indexes.json is not an array");
		goto done;
	}
	bson_reinit(specs);
	while (bson_iter_next(&arr)) {
		const uint8_t *data;
		uint32_t n;
		bson_t spec;
		bson_iter_t f;
		const char *name;

		if (!BSON_ITER_HOLDS_DOCUMENT(&arr)) {
			rc = dfs_err_set(err, DFS_EINVAL, ".indexes.json holds a non-document");
			goto done;
		}
		bson_iter_document(&arr, &n, &data);
		if (!bson_init_static(&spec, data, n) || !bson_iter_init_find(&f, &spec, "name") ||
		    !BSON_ITER_HOLDS_UTF8(&f)) {
			rc = dfs_err_set(err, DFS_EINVAL, ".indexes.json: an index has no name");
			goto done;
		}
		name = bson_iter_utf8(&f, NULL);
		if (strcmp(name, "_id_") == 0)
			continue;
		bson_append_document(specs, name, -1, &spec);
	}
	rc = 0;
done:
	bson_destroy(&doc);
	return rc;
}

/* Inserts the document of blob "<stem>.json". */
static int restore_doc(struct store_txn *t, int64_t coll, const char *name, const void *text,
		       size_t len, const struct store_attrs *a, struct dfs_err *err)
{
	bson_t parsed, id, doc;
	bson_iter_t it;
	int rc;

	bson_init(&id);
	if ((rc = store_name_to_id(name, strlen(name) - 5, &id, err))) {
		bson_destroy(&id);
		return dfs_err_prefix(err, "'%s': ", name);
	}
	bson_init(&parsed);
	rc = store_codec_parse_doc(text, len, &parsed, err);
	if (rc == DFS_EINCOMPLETE)
		rc = dfs_err_set(err, DFS_EINVAL, "incomplete document");
	if (!rc) {
		bson_iter_init_find(&it, &id, "_id");
		rc = store_doc_prepare(&parsed, bson_iter_value(&it), &doc, err);
		if (!rc) {
			rc = store_doc_insert(t, coll, &doc, a, NULL, err);
			bson_destroy(&doc);
		}
	}
	bson_destroy(&parsed);
	bson_destroy(&id);
	if (rc)
		dfs_err_prefix(err, "'%s': ", name);
	return rc;
}

int store_restore(struct store *s, const char *repo_path, const char *ref, const char *db,
		  const char *coll, const char *into_db, const char *into_coll, bool force,
		  int64_t *ndocs, struct dfs_err *err)
{
	git_repository *repo = NULL;
	git_object *obj = NULL;
	git_commit *commit = NULL;
	git_tree *root = NULL, *ct = NULL;
	git_tree_entry *te = NULL;
	struct store_db *target;
	struct store_txn *t = NULL;
	struct store_coll c;
	struct store_attrs a = {0644, (uint32_t)getuid(), (uint32_t)getgid(), 0};
	struct attrs at = {0};
	bool have_at = false;
	char path[2 * DFS_MAX_NS_NAME + 2], *where = NULL;
	int64_t n = 0;
	bool created = false;
	bson_t specs = BSON_INITIALIZER;
	bson_iter_t si;
	int rc;

	if (ndocs)
		*ndocs = 0;
	if (!into_db)
		into_db = db;
	if (!into_coll)
		into_coll = coll;
	if ((rc = store_db_name_check(db, err)) || (rc = store_coll_name_check(coll, err)) ||
	    (rc = store_db_name_check(into_db, err)) ||
	    (rc = store_coll_name_check(into_coll, err)))
		return rc;
	rc = store__git_open(s, repo_path, false, NULL, &repo, &where, err);
	if (rc == DFS_ENOENT && err) {
		dfs_err_clear(err);
		rc = dfs_err_set(err, DFS_ENOENT, "no snapshot '%s' in '%s%s' (no repository)", ref,
				 repo_path ? repo_path : store_path(s),
				 repo_path ? "" : "/snapshots.git");
	}
	if (rc)
		return rc;
	if (git_revparse_single(&obj, repo, ref) != 0 ||
	    git_object_peel((git_object **)&commit, obj, GIT_OBJECT_COMMIT) != 0) {
		rc = dfs_err_set(err, DFS_ENOENT, "no snapshot '%s' in '%s'", ref, where);
		goto done;
	}
	snprintf(path, sizeof(path), "%s/%s", db, coll);
	if (git_commit_tree(&root, commit) != 0) {
		rc = store__git_err(err, DFS_EIO, "read snapshot");
		goto done;
	}
	if (git_tree_entry_bypath(&te, root, path) != 0 ||
	    git_tree_entry_type(te) != GIT_OBJECT_TREE) {
		rc = dfs_err_set(err, DFS_ENOENT, "no collection '%s.%s' in snapshot '%s'", db,
				 coll, ref);
		goto done;
	}
	if (git_tree_lookup(&ct, repo, git_tree_entry_id(te)) != 0) {
		rc = store__git_err(err, DFS_EIO, "read snapshot");
		goto done;
	}
	rc = store_db_get(s, into_db, false, &target, NULL);
	if (rc == DFS_ENOENT) {
		rc = store_db_get(s, into_db, true, &target, err);
		created = rc == 0;
	} else if (rc) {
		rc = store_db_get(s, into_db, false, &target, err);
	}
	if (rc)
		goto done;
	if ((rc = store_txn_begin(target, true, &t, err)))
		goto done;
	rc = store_coll_find(t, into_coll, &c, NULL);
	if (rc == 0) {
		if (!force) {
			rc = dfs_err_set(err, DFS_EEXIST,
					 "collection '%s.%s' exists (use --force to replace it)",
					 into_db, into_coll);
			goto done;
		}
		if ((rc = store_coll_empty(t, c.id, err)))
			goto done;
		a.uid = c.uid;
		a.gid = c.gid;
	} else if (rc == DFS_ENOENT) {
		if ((rc = store_coll_create(t, into_coll, 0755, a.uid, a.gid, &c, err)))
			goto done;
	} else {
		rc = store_coll_find(t, into_coll, &c, err);
		goto done;
	}
	/* The documents' modes and owners, when the snapshot kept them (note 8); else each
	 * restored document is the restoring user's, 0644, as before. */
	{
		const git_tree_entry *ae = git_tree_entry_byname(ct, ATTRS_NAME);

		if (ae) {
			git_odb *odb;

			if (git_repository_odb(&odb, repo) != 0) {
				rc = store__git_err(err, DFS_EIO, "read snapshot");
				goto done;
			}
			rc = attrs_read(odb, git_tree_entry_id(ae), &at, err);
			git_odb_free(odb);
			if (rc)
				goto done;
			if (at.n)
				qsort(at.v, at.n, sizeof(*at.v), attr_cmp);
			have_at = true;
		}
	}
	for (size_t i = 0; i < git_tree_entrycount(ct); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(ct, i);
		const char *name = git_tree_entry_name(e);
		size_t len = strlen(name);
		git_blob *b;

		if (git_tree_entry_type(e) != GIT_OBJECT_BLOB || len <= 5 ||
		    strcmp(name + len - 5, ".json") != 0 || strcmp(name, ATTRS_NAME) == 0)
			continue;
		if (git_blob_lookup(&b, repo, git_tree_entry_id(e)) != 0) {
			rc = store__git_err(err, DFS_EIO, "read snapshot");
			goto done;
		}
		if (strcmp(name, ".indexes.json") == 0)
			rc = restore_indexes(git_blob_rawcontent(b), (size_t)git_blob_rawsize(b),
					     &specs, err);
		else {
			struct store_attrs da = a;
			const struct attr_ent *ae = have_at ? attrs_find(&at, name) : NULL;

			if (have_at) {
				da.mode = ae ? ae->mode : ATTRS_MODE;
				da.uid = ae ? ae->uid : at.uid;
				da.gid = ae ? ae->gid : at.gid;
			}
			if ((rc = restore_doc(t, c.id, name, git_blob_rawcontent(b),
					      (size_t)git_blob_rawsize(b), &da, err)) == 0)
				n++;
		}
		git_blob_free(b);
		if (rc)
			goto done;
	}
	/* The indexes are built over the restored documents, in the same transaction. */
	if (bson_iter_init(&si, &specs)) {
		while (bson_iter_next(&si)) {
			const uint8_t *data;
			uint32_t len;
			bson_t spec;

			bson_iter_document(&si, &len, &data);
			if (!bson_init_static(&spec, data, len))
				continue;
			if ((rc = store_index_create(t, c.id, &spec, NULL, 0, NULL, NULL, err))) {
				dfs_err_prefix(err, "index '%s': ", bson_iter_key(&si));
				goto done;
			}
		}
	}
	rc = store_txn_commit(t, err);
	t = NULL;
	if (!rc && ndocs)
		*ndocs = n;
done:
	bson_destroy(&specs);
	store_txn_abort(t);
	if (rc && created)
		store_db_drop_db(target, NULL); /* nothing changed: not even a new database */
	git_tree_free(ct);
	git_tree_entry_free(te);
	git_tree_free(root);
	git_commit_free(commit);
	git_object_free(obj);
	store__git_close(repo);
	free(where);
	attrs_free(&at);
	return rc;
}
