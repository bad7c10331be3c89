/*
 * snapgit.c - read-only browsing of a snapshot repository (for /.snapshots in the mount):
 * refs, resolving a ref to a commit, and stat/list/read of paths inside a commit's tree.
 * It never writes to the repository (snapshot.c does).
 *
 * A struct store_git is thread-safe: one mutex serializes every call (libgit2 objects of one
 * repository are not meant to be shared between threads). Directory trees looked up by
 * (commit, path) stay in a small round-robin cache, so stat and read of the files of one
 * directory (a million entries in a big collection) parse its tree once.
 */
#include "snap_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TREE_CACHE 32

struct tree_slot {
	char *key;	/* Owned: "<commit hex>:<path>" */
	git_tree *tree; /* Owned */
};

struct store_git {
	pthread_mutex_t lock;		    /* serializes every call */
	git_repository *repo;		    /* Owned */
	char *where;			    /* Owned: the repository path, for messages */
	struct tree_slot cache[TREE_CACHE]; /* directory trees by (commit, path) */
	unsigned next;			    /* next slot to replace */
	git_oid attrs_oid;		    /* the .attrs.json blob parsed last (zero: none) */
	uint32_t attrs_uid, attrs_gid;	    /*   its default owner */
	struct git_attr *attrs;		    /*   Owned: its entries, sorted by name */
	size_t nattrs, capattrs;
};

struct git_attr {
	char *name; /* Owned */
	uint32_t mode, uid, gid;
};

static void attrs_clear(struct store_git *g)
{
	for (size_t i = 0; i < g->nattrs; i++)
		free(g->attrs[i].name);
	g->nattrs = 0;
	memset(&g->attrs_oid, 0, sizeof(g->attrs_oid));
}

static int attr_take(void *ctx, const char *name, uint32_t mode, uint32_t uid, uint32_t gid)
{
	struct store_git *g = ctx;

	if (g->nattrs == g->capattrs) {
		g->capattrs = g->capattrs ? 2 * g->capattrs : 16;
		g->attrs = realloc(g->attrs, g->capattrs * sizeof(*g->attrs));
		if (!g->attrs)
			abort();
	}
	g->attrs[g->nattrs].name = strdup(name);
	if (!g->attrs[g->nattrs].name)
		abort();
	g->attrs[g->nattrs].mode = mode;
	g->attrs[g->nattrs].uid = uid;
	g->attrs[g->nattrs].gid = gid;
	g->nattrs++;
	return 0;
}

static int attr_cmp(const void *x, const void *y)
{
	return strcmp(((const struct git_attr *)x)->name, ((const struct git_attr *)y)->name);
}

/* Fills out's attributes from the .attrs.json of tree t, the tree holding it (none: the
 * snapshot predates them, and out says so). Under g->lock. */
static void entry_attrs(struct store_git *g, git_tree *t, struct store_git_entry *out)
{
	const git_tree_entry *ae = t ? git_tree_entry_byname(t, STORE__ATTRS_NAME) : NULL;
	struct git_attr key = {out->name, 0, 0, 0};
	const struct git_attr *a;

	out->has_attrs = false;
	if (!ae || out->is_dir)
		return;
	if (!git_oid_equal(&g->attrs_oid, git_tree_entry_id(ae))) {
		git_blob *b;
		int rc;

		attrs_clear(g);
		if (git_blob_lookup(&b, g->repo, git_tree_entry_id(ae)) != 0)
			return;
		rc = store__attrs_parse(git_blob_rawcontent(b), (size_t)git_blob_rawsize(b),
					&g->attrs_uid, &g->attrs_gid, attr_take, g, NULL);
		git_blob_free(b);
		if (rc) {
			attrs_clear(g);
			return;
		}
		if (g->nattrs)
			qsort(g->attrs, g->nattrs, sizeof(*g->attrs), attr_cmp);
		g->attrs_oid = *git_tree_entry_id(ae);
	}
	out->has_attrs = true;
	out->mode = STORE__ATTRS_MODE;
	out->uid = g->attrs_uid;
	out->gid = g->attrs_gid;
	a = g->nattrs ? bsearch(&key, g->attrs, g->nattrs, sizeof(*g->attrs), attr_cmp) : NULL;
	if (a) {
		out->mode = a->mode;
		out->uid = a->uid;
		out->gid = a->gid;
	}
}

int store_git_open(struct store *s, const char *repo, struct store_git **out, struct dfs_err *err)
{
	struct store_git *g = calloc(1, sizeof(*g));
	int rc;

	if (!g)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	if ((rc = store__git_open(s, repo, false, NULL, &g->repo, &g->where, err))) {
		free(g);
		return rc;
	}
	pthread_mutex_init(&g->lock, NULL);
	*out = g;
	return 0;
}

void store_git_free(struct store_git *g)
{
	if (!g)
		return;
	for (int i = 0; i < TREE_CACHE; i++) {
		free(g->cache[i].key);
		git_tree_free(g->cache[i].tree);
	}
	attrs_clear(g);
	free(g->attrs);
	pthread_mutex_destroy(&g->lock);
	store__git_close(g->repo);
	free(g->where);
	free(g);
}

int store_git_refs(struct store_git *g, int (*cb)(void *ctx, const char *name), void *ctx,
		   struct dfs_err *err)
{
	git_branch_iterator *it = NULL;
	git_reference *ref;
	git_branch_t type;
	git_strarray tags = {0};
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	/* Collect under the lock, call back outside it (cb may call into g). */
	pthread_mutex_lock(&g->lock);
	if (git_branch_iterator_new(&it, g->repo, GIT_BRANCH_LOCAL) != 0) {
		rc = store__git_err(err, DFS_EIO, "list branches");
	} else {
		while (git_branch_next(&ref, &type, it) == 0) {
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				names = realloc(names, cap * sizeof(*names));
				if (!names)
					abort();
			}
			names[n++] = strdup(git_reference_shorthand(ref));
			git_reference_free(ref);
		}
		git_branch_iterator_free(it);
		if (git_tag_list(&tags, g->repo) != 0)
			rc = store__git_err(err, DFS_EIO, "list tags");
		for (size_t i = 0; !rc && i < tags.count; i++) {
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				names = realloc(names, cap * sizeof(*names));
				if (!names)
					abort();
			}
			names[n++] = strdup(tags.strings[i]);
		}
		git_strarray_dispose(&tags);
	}
	pthread_mutex_unlock(&g->lock);
	for (size_t i = 0; i < n; i++) {
		if (!rc && names[i])
			rc = cb(ctx, names[i]);
		free(names[i]);
	}
	free(names);
	return rc;
}

int store_git_resolve(struct store_git *g, const char *ref, char commit[41], struct dfs_err *err)
{
	git_object *obj = NULL, *c = NULL;
	int rc = 0;

	pthread_mutex_lock(&g->lock);
	if (git_revparse_single(&obj, g->repo, ref) != 0 ||
	    git_object_peel(&c, obj, GIT_OBJECT_COMMIT) != 0)
		rc = dfs_err_set(err, DFS_ENOENT, "no snapshot '%s' in '%s'", ref, g->where);
	else
		git_oid_tostr(commit, 41, git_object_id(c));
	git_object_free(c);
	git_object_free(obj);
	pthread_mutex_unlock(&g->lock);
	return rc;
}

/* The tree of directory path ("" the root) in commit. Borrowed: valid until the next call
 * (under the lock). DFS_ENOENT, DFS_ENOTDIR. */
static int dir_tree(struct store_git *g, const char *commit, const char *path, git_tree **out,
		    struct dfs_err *err)
{
	git_oid oid;
	git_commit *c = NULL;
	git_tree *root = NULL, *t = NULL;
	git_tree_entry *e = NULL;
	struct tree_slot *slot;
	char *key;
	int rc = 0;

	while (*path == '/')
		path++;
	if (asprintf(&key, "%s:%s", commit, path) < 0)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	for (int i = 0; i < TREE_CACHE; i++) {
		if (g->cache[i].key && strcmp(g->cache[i].key, key) == 0) {
			*out = g->cache[i].tree;
			free(key);
			return 0;
		}
	}
	if (git_oid_fromstrp(&oid, commit) != 0 || git_commit_lookup(&c, g->repo, &oid) != 0) {
		rc = dfs_err_set(err, DFS_ENOENT, "no commit '%s' in '%s'", commit, g->where);
		goto done;
	}
	if (git_commit_tree(&root, c) != 0) {
		rc = store__git_err(err, DFS_EIO, "read snapshot");
		goto done;
	}
	if (!*path) {
		t = root;
		root = NULL;
	} else {
		size_t n = strlen(path);
		char *p = strndup(path, n);

		while (n && p[n - 1] == '/')
			p[--n] = '\0';
		if (git_tree_entry_bypath(&e, root, p) != 0) {
			rc = dfs_err_set(err, DFS_ENOENT, "no '%s' in snapshot %.12s", p, commit);
		} else if (git_tree_entry_type(e) != GIT_OBJECT_TREE) {
			rc = dfs_err_set(err, DFS_ENOTDIR, "'%s' is not a directory", p);
		} else if (git_tree_lookup(&t, g->repo, git_tree_entry_id(e)) != 0) {
			rc = store__git_err(err, DFS_EIO, "read snapshot");
		}
		free(p);
		if (rc)
			goto done;
	}
	slot = &g->cache[g->next++ % TREE_CACHE];
	free(slot->key);
	git_tree_free(slot->tree);
	slot->key = key;
	slot->tree = t;
	key = NULL;
	*out = t;
done:
	free(key);
	git_tree_entry_free(e);
	git_tree_free(root);
	git_commit_free(c);
	return rc;
}

/* Splits path into its directory (copied into dir) and its last name (pointer into path). */
static const char *split_path(const char *path, char *dir, size_t cap)
{
	const char *slash;
	size_t n;

	while (*path == '/')
		path++;
	slash = strrchr(path, '/');
	if (!slash) {
		dir[0] = '\0';
		return path;
	}
	n = (size_t)(slash - path);
	if (n >= cap)
		n = cap - 1;
	memcpy(dir, path, n);
	dir[n] = '\0';
	return slash + 1;
}

static void entry_fill(struct store_git *g, const git_tree_entry *e, struct store_git_entry *out)
{
	snprintf(out->name, sizeof(out->name), "%s", git_tree_entry_name(e));
	out->is_dir = git_tree_entry_type(e) == GIT_OBJECT_TREE;
	out->size = 0;
	git_oid_tostr(out->oid, sizeof(out->oid), git_tree_entry_id(e));
	if (!out->is_dir) {
		git_odb *odb;
		size_t len;
		git_object_t type;

		if (git_repository_odb(&odb, g->repo) == 0) {
			if (git_odb_read_header(&len, &type, odb, git_tree_entry_id(e)) == 0)
				out->size = (int64_t)len;
			git_odb_free(odb);
		}
	}
}

/* Finds path's entry under the lock; *e Borrowed from a cached tree, *in (may be NULL)
 * that tree. */
static int find_entry(struct store_git *g, const char *commit, const char *path,
		      const git_tree_entry **e, git_tree **in, struct dfs_err *err)
{
	char dir[4096];
	const char *base = split_path(path, dir, sizeof(dir));
	git_tree *t;
	int rc;

	if ((rc = dir_tree(g, commit, dir, &t, err)))
		return rc == DFS_ENOTDIR ? dfs_err_set(err, DFS_ENOENT, "no '%s' in snapshot", path)
					 : rc;
	*e = git_tree_entry_byname(t, base);
	if (in)
		*in = t;
	if (!*e)
		return dfs_err_set(err, DFS_ENOENT, "no '%s' in snapshot %.12s", path, commit);
	return 0;
}

int store_git_stat(struct store_git *g, const char *commit, const char *path,
		   struct store_git_entry *out, struct dfs_err *err)
{
	const git_tree_entry *e;
	git_tree *t;
	int rc;

	pthread_mutex_lock(&g->lock);
	while (*path == '/')
		path++;
	if (!*path) {
		rc = dir_tree(g, commit, "", &t, err);
		if (!rc) {
			memset(out, 0, sizeof(*out));
			out->is_dir = true;
			git_oid_tostr(out->oid, sizeof(out->oid), git_tree_id(t));
		}
	} else if ((rc = find_entry(g, commit, path, &e, &t, err)) == 0) {
		entry_fill(g, e, out);
		entry_attrs(g, t, out);
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

int store_git_list(struct store_git *g, const char *commit, const char *path,
		   int (*cb)(void *ctx, const struct store_git_entry *e), void *ctx,
		   struct dfs_err *err)
{
	git_tree *t, *own = NULL;
	struct store_git_entry ent;
	size_t n;
	int rc;

	pthread_mutex_lock(&g->lock);
	rc = dir_tree(g, commit, path, &t, err);
	if (!rc && git_tree_dup(&own, t) != 0)
		rc = store__git_err(err, DFS_EIO, "read snapshot");
	pthread_mutex_unlock(&g->lock);
	if (rc)
		return rc;
	/* The callback runs unlocked (it may stat or read through g); own keeps the tree. */
	n = git_tree_entrycount(own);
	for (size_t i = 0; i < n && !rc; i++) {
		pthread_mutex_lock(&g->lock);
		entry_fill(g, git_tree_entry_byindex(own, i), &ent);
		entry_attrs(g, own, &ent);
		pthread_mutex_unlock(&g->lock);
		rc = cb(ctx, &ent);
	}
	pthread_mutex_lock(&g->lock);
	git_tree_free(own);
	pthread_mutex_unlock(&g->lock);
	return rc;
}

int store_git_read(struct store_git *g, const char *commit, const char *path, struct dfs_buf *out,
		   struct dfs_err *err)
{
	const git_tree_entry *e;
	git_blob *b = NULL;
	int rc;

	pthread_mutex_lock(&g->lock);
	rc = find_entry(g, commit, path, &e, NULL, err);
	if (!rc && git_tree_entry_type(e) != GIT_OBJECT_BLOB)
		rc = dfs_err_set(err, DFS_EISDIR, "'%s' is a directory", path);
	if (!rc && git_blob_lookup(&b, g->repo, git_tree_entry_id(e)) != 0)
		rc = store__git_err(err, DFS_EIO, "read snapshot");
	if (!rc)
		dfs_buf_append(out, git_blob_rawcontent(b), (size_t)git_blob_rawsize(b));
	git_blob_free(b);
	pthread_mutex_unlock(&g->lock);
	return rc;
}
