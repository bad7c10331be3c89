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

#endif
