/*
 * snap_int.h - private declarations shared by the git snapshot files (snapshot.c writes
 * snapshots and restores them, snapgit.c browses them). Only these two include git2.h.
 */
#ifndef DOCFS_SNAP_INT_H
#define DOCFS_SNAP_INT_H

#include "store_int.h"

#include <git2.h>

/* Sets err from git_error_last(), as "<what>: <libgit2 message>"; returns code. */
int store__git_err(struct dfs_err *err, int code, const char *what);

/*
 * Opens the snapshot repository at path (NULL: "<store>/snapshots.git"). When it does not
 * exist and create is true it is created bare with HEAD -> refs/heads/<branch>; when it does
 * not exist and create is false: DFS_ENOENT. A path that exists but is not a repository is
 * DFS_EINVAL "'<path>' is not a git repository". Calls git_libgit2_init (the caller pairs
 * it with store__git_close). *out Owned; *where (Owned, free()) the path as given or
 * defaulted, for messages.
 */
int store__git_open(struct store *s, const char *path, bool create, const char *branch,
		    git_repository **out, char **where, struct dfs_err *err);
/* Frees repo (NULL allowed) and drops the libgit2 reference taken by store__git_open. */
void store__git_close(git_repository *repo);

/*
 * Reads the bytes of a collection's ".attrs.json" (snapshot.c note 8): *duid and *dgid get
 * the owner of a document it does not list (whose mode is 0644), and cb each listed
 * document's name and attributes, in the blob's order (sorted by name); a nonzero return
 * from cb stops and is returned. Errors: DFS_EINVAL (not the blob's format).
 */
#define STORE__ATTRS_NAME ".attrs.json"
#define STORE__ATTRS_MODE 0644
int store__attrs_parse(const char *data, size_t len, uint32_t *duid, uint32_t *dgid,
		       int (*cb)(void *ctx, const char *name, uint32_t mode, uint32_t uid,
				 uint32_t gid),
		       void *ctx, struct dfs_err *err);

#endif
