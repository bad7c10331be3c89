/*
 * inode.c - the table of nodes the kernel knows: nodeid -> node, and st_ino -> the node that
 * currently stands for that store object. It allocates nodeids and counts kernel lookups;
 * it does not read the store.
 *
 * Design notes
 * 1. Nodeids are allocated here and never reused while the mount lives; st_ino comes from
 *    the store. They differ so that a rename over a document (sed -i, mv t f) can re-point
 *    the kernel's inode for the renamed file at the document it replaced, whose st_ino then
 *    shows at once: the kernel re-reads attributes after a rename.
 * 2. At most one node per st_ino is in the ino table (the one the kernel reaches by name);
 *    a node displaced by a re-point stays in the nodeid table until the kernel forgets it.
 * 3. One mutex guards both tables. A node pointer stays valid while the kernel holds a
 *    reference, which it does for the length of every request naming the node.
 */
#include "fs_int.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIN_BUCKETS 65536

static pthread_mutex_t nodes_lock = PTHREAD_MUTEX_INITIALIZER;
/* Both tables have nbuckets chains (a power of two), doubled once the nodes outnumber them:
 * a listing of a million documents makes a million nodes, and fixed chains grew to 16. */
static struct fs_node **by_id;
static struct fs_node **by_ino;
static size_t nbuckets;
static uint64_t next_nodeid = 2;
static size_t live_nodes; /* nodes in by_id besides the root */
static struct fs_node root_node = {.nodeid = 1, .nlookup = 1, .kind = FSN_ROOT, .ino = FS_INO_ROOT};

static unsigned hash64(uint64_t v)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdULL;
	v ^= v >> 33;
	return (unsigned)(v & (nbuckets - 1));
}

static void ino_unlink(struct fs_node *n)
{
	struct fs_node **pp;

	if (!n->in_ino_table)
		return;
	for (pp = &by_ino[hash64(n->ino)]; *pp; pp = &(*pp)->next_ino) {
		if (*pp == n) {
			*pp = n->next_ino;
			break;
		}
	}
	n->in_ino_table = false;
}

static struct fs_node *ino_find(uint64_t ino)
{
	struct fs_node *n;

	for (n = by_ino[hash64(ino)]; n; n = n->next_ino)
		if (n->ino == ino)
			return n;
	return NULL;
}

static void ino_link(struct fs_node *n)
{
	struct fs_node *old = ino_find(n->ino);
	unsigned h = hash64(n->ino);

	if (old && old != n) {
		ino_unlink(old);
		/* Replaced (a rename over it): an open file of the old one must not write
		 * into what now has its st_ino. */
		if (old->kind == FSN_ENTRY)
			old->kind = FSN_DEAD;
	}
	if (old == n)
		return;
	n->next_ino = by_ino[h];
	by_ino[h] = n;
	n->in_ino_table = true;
}

static void attr_from_stat(struct fs_attr *a, const struct stat *st)
{
	const struct timespec *ts[3] = {&st->st_atim, &st->st_mtim, &st->st_ctim};

	a->ino = st->st_ino;
	a->size = st->st_size;
	a->blocks = st->st_blocks;
	for (int i = 0; i < 3; i++) {
		a->sec[i] = ts[i]->tv_sec;
		a->nsec[i] = (uint32_t)ts[i]->tv_nsec;
	}
	a->mode = st->st_mode;
	a->nlink = (uint32_t)st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->blksize = (uint32_t)st->st_blksize;
}

static void attr_to_stat(const struct fs_attr *a, struct stat *st)
{
	struct timespec *ts[3] = {&st->st_atim, &st->st_mtim, &st->st_ctim};

	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_size = a->size;
	st->st_blocks = a->blocks;
	for (int i = 0; i < 3; i++) {
		ts[i]->tv_sec = (time_t)a->sec[i];
		ts[i]->tv_nsec = (long)a->nsec[i];
	}
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_blksize = a->blksize;
}

static void attr_set_time(struct fs_attr *a, int which, int64_t sec, long nsec)
{
	a->sec[which] = sec;
	a->nsec[which] = (uint32_t)nsec;
}

/* node's fs_node_more, made with its defaults when it has none (nodes_lock held). */
static struct fs_node_more *node_more(struct fs_node *node)
{
	if (!node->more) {
		node->more = calloc(1, sizeof(*node->more));
		if (!node->more)
			abort();
		node->more->pend_atime_ns = -1;
	}
	return node->more;
}

static struct fs_node **buckets_new(size_t n)
{
	struct fs_node **b = calloc(n, sizeof(*b));

	if (!b)
		abort();
	return b;
}

/* Doubles both tables (nodes_lock held). */
static void buckets_grow(void)
{
	struct fs_node **old_id = by_id, **old_ino = by_ino;
	size_t old_n = nbuckets;

	nbuckets *= 2;
	by_id = buckets_new(nbuckets);
	by_ino = buckets_new(nbuckets);
	for (size_t i = 0; i < old_n; i++) {
		struct fs_node *n, *next;

		for (n = old_id[i]; n; n = next) {
			unsigned h = hash64(n->nodeid);

			next = n->next_id;
			n->next_id = by_id[h];
			by_id[h] = n;
		}
		for (n = old_ino[i]; n; n = next) {
			unsigned h = hash64(n->ino);

			next = n->next_ino;
			n->next_ino = by_ino[h];
			by_ino[h] = n;
		}
	}
	free(old_id);
	free(old_ino);
}

void fs_nodes_init(void)
{
	if (!by_id) {
		nbuckets = MIN_BUCKETS;
		by_id = buckets_new(nbuckets);
		by_ino = buckets_new(nbuckets);
	}
	memset(by_id, 0, nbuckets * sizeof(*by_id));
	memset(by_ino, 0, nbuckets * sizeof(*by_ino));
	root_node.in_ino_table = false;
	by_id[hash64(1)] = &root_node;
	ino_link(&root_node);
}

void fs_nodes_release(void)
{
	pthread_mutex_lock(&nodes_lock);
	for (size_t i = 0; i < nbuckets; i++) {
		struct fs_node *n = by_id[i], *next;

		for (; n; n = next) {
			next = n->next_id;
			if (n != &root_node) {
				free(n->pending_name);
				free(n->more);
				free(n->name);
				free(n);
			}
		}
		by_id[i] = NULL;
		by_ino[i] = NULL;
	}
	live_nodes = 0;
	pthread_mutex_unlock(&nodes_lock);
}

size_t fs_node_count(void)
{
	size_t n;

	pthread_mutex_lock(&nodes_lock);
	n = live_nodes;
	pthread_mutex_unlock(&nodes_lock);
	return n;
}

struct fs_node *fs_node_get(uint64_t nodeid)
{
	struct fs_node *n;

	pthread_mutex_lock(&nodes_lock);
	for (n = by_id[hash64(nodeid)]; n; n = n->next_id)
		if (n->nodeid == nodeid)
			break;
	pthread_mutex_unlock(&nodes_lock);
	return n;
}

static struct fs_node *node_new(int kind, struct store_db *db, int64_t coll, int64_t id,
				uint64_t ino)
{
	struct fs_node *n = calloc(1, sizeof(*n));
	unsigned h;

	if (!n)
		abort();
	n->nodeid = next_nodeid++;
	n->kind = kind;
	n->db = db;
	n->coll = coll;
	n->id = id;
	n->ino = ino;
	n->nlookup = 1;
	n->data_gen = 1;
	if (++live_nodes > nbuckets)
		buckets_grow();
	h = hash64(n->nodeid);
	n->next_id = by_id[h];
	by_id[h] = n;
	return n;
}

struct fs_node *fs_node_ref(int kind, struct store_db *db, int64_t coll, int64_t id, uint64_t ino,
			    const char *name)
{
	struct fs_node *n;

	pthread_mutex_lock(&nodes_lock);
	n = ino_find(ino);
	if (n && n->kind == kind) {
		n->nlookup++;
		n->db = db;
		n->coll = coll;
		n->id = id;
	} else {
		n = node_new(kind, db, coll, id, ino);
		ino_link(n);
	}
	if (name && (!n->name || strcmp(n->name, name) != 0)) {
		free(n->name);
		n->name = strdup(name);
		if (!n->name)
			abort();
	}
	pthread_mutex_unlock(&nodes_lock);
	return n;
}

void fs_node_set_name(struct fs_node *node, const char *name)
{
	char *copy = strdup(name);

	if (!copy)
		abort();
	pthread_mutex_lock(&nodes_lock);
	free(node->name);
	node->name = copy;
	pthread_mutex_unlock(&nodes_lock);
}

size_t fs_nodes_of_coll(struct store_db *db, int64_t coll, uint64_t **ids, char ***names)
{
	size_t k = 0, cap = 0;

	*ids = NULL;
	*names = NULL;
	pthread_mutex_lock(&nodes_lock);
	for (size_t i = 0; i < nbuckets; i++) {
		for (struct fs_node *n = by_id[i]; n; n = n->next_id) {
			if (n->db != db || n->coll != coll || n->kind != FSN_ENTRY || !n->name)
				continue;
			n->data_gen++; /* whatever the kernel or the node cached is old */
			if (k == cap) {
				cap = cap ? cap * 2 : 64;
				*ids = realloc(*ids, cap * sizeof(**ids));
				*names = realloc(*names, cap * sizeof(**names));
				if (!*ids || !*names)
					abort();
			}
			(*ids)[k] = n->nodeid;
			(*names)[k] = strdup(n->name);
			if (!(*names)[k])
				abort();
			k++;
		}
	}
	pthread_mutex_unlock(&nodes_lock);
	return k;
}

struct fs_node *fs_node_pending(int kind, struct store_db *db, int64_t coll, const char *name)
{
	struct fs_node *n;

	pthread_mutex_lock(&nodes_lock);
	/* A pending node has no st_ino of its own yet: a private one above every store id. */
	n = node_new(kind, db, coll, 0, 0);
	n->ino = fs_ino_db(db) | (1ULL << 38) | (n->nodeid & ((1ULL << 38) - 1));
	n->pending_name = strdup(name);
	if (!n->pending_name)
		abort();
	ino_link(n);
	pthread_mutex_unlock(&nodes_lock);
	return n;
}

struct fs_node *fs_node_keyed(int kind, struct store_db *db, int64_t coll, const char *key,
			      uint64_t ino)
{
	struct fs_node *n;

	pthread_mutex_lock(&nodes_lock);
	n = ino_find(ino);
	if (n && n->kind == kind && n->pending_name && strcmp(n->pending_name, key) == 0) {
		n->nlookup++;
	} else {
		/* New, or a hash collision with another key: a node of its own. */
		n = node_new(kind, db, coll, 0, ino);
		n->pending_name = strdup(key);
		if (!n->pending_name)
			abort();
		if (!ino_find(ino))
			ino_link(n);
	}
	pthread_mutex_unlock(&nodes_lock);
	return n;
}

/* The st_ino of the query, explain or index file named name in collection coll. */
static uint64_t query_ino(int kind, struct store_db *db, int64_t coll, const char *name)
{
	uint64_t h = 1469598103934665603ULL;

	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h ^= (uint64_t)coll * 0x9e3779b97f4a7c15ULL;
	/* A query, an explain and an index of the same name are different files. */
	h ^= (uint64_t)(kind - FSN_QUERY) * 0xc2b2ae3d27d4eb4fULL;
	return fs_ino_db(db) | (3ULL << 37) | (h & ((1ULL << 37) - 1));
}

struct fs_node *fs_node_query(int kind, struct store_db *db, int64_t coll, const char *name)
{
	return fs_node_keyed(kind, db, coll, name, query_ino(kind, db, coll, name));
}

void fs_node_forget(uint64_t nodeid, uint64_t count)
{
	struct fs_node **pp, *n;

	if (nodeid == 1)
		return;
	pthread_mutex_lock(&nodes_lock);
	for (pp = &by_id[hash64(nodeid)]; (n = *pp); pp = &n->next_id) {
		if (n->nodeid != nodeid)
			continue;
		n->nlookup = count >= n->nlookup ? 0 : n->nlookup - count;
		if (n->nlookup == 0) {
			*pp = n->next_id;
			live_nodes--;
			ino_unlink(n);
			free(n->pending_name);
			free(n->more);
			free(n->name);
			free(n);
		}
		break;
	}
	pthread_mutex_unlock(&nodes_lock);
}

void fs_node_repoint(struct fs_node *node, int kind, int64_t coll, int64_t id, uint64_t ino)
{
	pthread_mutex_lock(&nodes_lock);
	ino_unlink(node);
	node->kind = kind;
	node->coll = coll;
	node->id = id;
	node->ino = ino;
	free(node->pending_name);
	node->pending_name = NULL;
	node->data_gen++;
	ino_link(node);
	pthread_mutex_unlock(&nodes_lock);
}

void fs_node_repoint_query(struct fs_node *node, int kind, int64_t coll, const char *name)
{
	char *copy = strdup(name);

	if (!copy)
		abort();
	pthread_mutex_lock(&nodes_lock);
	ino_unlink(node);
	node->kind = kind;
	node->coll = coll;
	node->id = 0;
	node->ino = query_ino(kind, node->db, coll, name);
	free(node->pending_name);
	node->pending_name = copy;
	node->data_gen++;
	ino_link(node);
	pthread_mutex_unlock(&nodes_lock);
}

struct store_attrs fs_node_pend_get(struct fs_node *node)
{
	struct store_attrs a;

	pthread_mutex_lock(&nodes_lock);
	a = node->more ? node->more->pend : (struct store_attrs){0};
	pthread_mutex_unlock(&nodes_lock);
	return a;
}

int64_t fs_node_pend_atime(struct fs_node *node)
{
	int64_t a;

	pthread_mutex_lock(&nodes_lock);
	a = node->more ? node->more->pend_atime_ns : -1;
	pthread_mutex_unlock(&nodes_lock);
	return a;
}

void fs_node_pend_set(struct fs_node *node, int mask, const struct store_attrs *a, int64_t atime_ns)
{
	pthread_mutex_lock(&nodes_lock);
	if (mask & STORE_SET_MODE)
		node_more(node)->pend.mode = a->mode & 07777;
	if (mask & STORE_SET_UID)
		node_more(node)->pend.uid = a->uid;
	if (mask & STORE_SET_GID)
		node_more(node)->pend.gid = a->gid;
	if (mask & STORE_SET_MTIME)
		node_more(node)->pend.mtime_ns = a->mtime_ns;
	if (atime_ns >= 0)
		node_more(node)->pend_atime_ns = atime_ns;
	pthread_mutex_unlock(&nodes_lock);
}

uint64_t fs_node_of_db(struct store_db *db)
{
	struct fs_node *n;
	uint64_t id = 0;

	pthread_mutex_lock(&nodes_lock);
	n = ino_find(fs_ino_db(db));
	if (n && n->kind == FSN_DB && n->db == db)
		id = n->nodeid;
	pthread_mutex_unlock(&nodes_lock);
	return id;
}

uint64_t fs_node_touch_ino(uint64_t ino)
{
	struct fs_node *n;
	uint64_t id = 0;

	pthread_mutex_lock(&nodes_lock);
	n = ino_find(ino);
	if (n) {
		n->data_gen++;
		id = n->nodeid;
	}
	pthread_mutex_unlock(&nodes_lock);
	return id;
}

bool fs_node_attr_get(struct fs_node *node, struct stat *st)
{
	bool ok;

	pthread_mutex_lock(&nodes_lock);
	ok = node->attr_gen != 0 && node->attr_gen == node->data_gen &&
	     node->ino == node->attr.ino;
	if (ok)
		attr_to_stat(&node->attr, st);
	pthread_mutex_unlock(&nodes_lock);
	return ok;
}

void fs_node_attr_put(struct fs_node *node, const struct stat *st, uint64_t gen)
{
	pthread_mutex_lock(&nodes_lock);
	/* Only if nothing changed since the caller read the store (gen taken before). */
	if (gen == node->data_gen) {
		attr_from_stat(&node->attr, st);
		node->attr_gen = gen;
	}
	pthread_mutex_unlock(&nodes_lock);
}

uint64_t fs_node_gen(struct fs_node *node)
{
	uint64_t g;

	pthread_mutex_lock(&nodes_lock);
	g = node->data_gen;
	pthread_mutex_unlock(&nodes_lock);
	return g;
}

void fs_node_cache_set(struct fs_node *node, uint64_t gen)
{
	pthread_mutex_lock(&nodes_lock);
	node->kernel_gen = gen;
	pthread_mutex_unlock(&nodes_lock);
}

bool fs_node_cache_ok(struct fs_node *node)
{
	bool ok;

	pthread_mutex_lock(&nodes_lock);
	ok = node->kernel_gen == node->data_gen;
	pthread_mutex_unlock(&nodes_lock);
	return ok;
}

void fs_node_list_begin(struct fs_node *node)
{
	pthread_mutex_lock(&nodes_lock);
	if (node_more(node)->listings++ == 0)
		node->more->list_gen = node->data_gen;
	pthread_mutex_unlock(&nodes_lock);
}

void fs_node_list_end(struct fs_node *node, bool complete)
{
	pthread_mutex_lock(&nodes_lock);
	assert(node->more && node->more->listings > 0);
	node->more->listings--;
	if (complete)
		node->kernel_gen = node->more->list_gen;
	pthread_mutex_unlock(&nodes_lock);
}

bool fs_node_cache_is(struct fs_node *node, uint64_t gen)
{
	bool is;

	pthread_mutex_lock(&nodes_lock);
	is = node->kernel_gen == gen && node->data_gen == gen;
	pthread_mutex_unlock(&nodes_lock);
	return is;
}

void fs_node_bump(struct fs_node *node)
{
	pthread_mutex_lock(&nodes_lock);
	node->data_gen++;
	pthread_mutex_unlock(&nodes_lock);
}

void fs_node_written_set(struct fs_node *node, const void *owner, int64_t size)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	pthread_mutex_lock(&nodes_lock);
	node_more(node)->wowner = owner;
	node->more->wsize = size;
	node->more->wtime_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	pthread_mutex_unlock(&nodes_lock);
}

void fs_node_written_clear(struct fs_node *node, const void *owner)
{
	pthread_mutex_lock(&nodes_lock);
	if (node->more && node->more->wowner == owner)
		node->more->wowner = NULL;
	pthread_mutex_unlock(&nodes_lock);
}

void fs_node_written_apply(struct fs_node *node, struct stat *st)
{
	pthread_mutex_lock(&nodes_lock);
	if (node->more && node->more->wowner) {
		const struct fs_node_more *m = node->more;

		st->st_size = (off_t)m->wsize;
		st->st_blocks = (m->wsize + 511) / 512;
		st->st_mtim.tv_sec = st->st_ctim.tv_sec = (time_t)(m->wtime_ns / 1000000000);
		st->st_mtim.tv_nsec = st->st_ctim.tv_nsec = (long)(m->wtime_ns % 1000000000);
	}
	pthread_mutex_unlock(&nodes_lock);
}

void fs_node_orphan(struct fs_node *node, const struct stat *st)
{
	pthread_mutex_lock(&nodes_lock);
	ino_unlink(node); /* its st_ino names nothing in the store any more */
	node->kind = FSN_DEAD;
	attr_from_stat(&node->attr, st);
	node->attr.nlink = 0;
	node->attr_gen = 0;
	node->orphan = true;
	node->data_gen++;
	pthread_mutex_unlock(&nodes_lock);
}

bool fs_node_orphan_get(struct fs_node *node, struct stat *st)
{
	bool ok;

	pthread_mutex_lock(&nodes_lock);
	ok = node->kind == FSN_DEAD && node->orphan;
	if (ok)
		attr_to_stat(&node->attr, st);
	pthread_mutex_unlock(&nodes_lock);
	return ok;
}

void fs_node_orphan_set(struct fs_node *node, int mask, const struct store_attrs *a,
			int64_t atime_ns)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&nodes_lock);
	if (node->kind == FSN_DEAD && node->orphan) {
		if (mask & STORE_SET_MODE)
			node->attr.mode = (node->attr.mode & S_IFMT) | (a->mode & 07777);
		if (mask & STORE_SET_UID)
			node->attr.uid = a->uid;
		if (mask & STORE_SET_GID)
			node->attr.gid = a->gid;
		if (mask & STORE_SET_MTIME) {
			attr_set_time(&node->attr, 1, a->mtime_ns / 1000000000,
				      (long)(a->mtime_ns % 1000000000));
		}
		if (atime_ns >= 0) {
			attr_set_time(&node->attr, 0, atime_ns / 1000000000,
				      (long)(atime_ns % 1000000000));
		}
		attr_set_time(&node->attr, 2, now.tv_sec, now.tv_nsec);
	}
	pthread_mutex_unlock(&nodes_lock);
}
