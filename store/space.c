/*
 * space.c - a full disk: the store's reserve file, the low-space state that refuses what
 * would grow the store while deletes go on, and how it ends. It does not decide what an
 * error means elsewhere: db.c maps SQLite's "disk is full" to DFS_ENOSPC and tells it here.
 *
 * Design notes
 * 1. The reserve is a file "<store>/.reserve" of STORE_RESERVE bytes, allocated for real
 *    (posix_fallocate), made by the first write transaction of a process that commits while
 *    the file system has room for it. When a write first finds the disk full, the reserve
 *    is removed: its blocks are what a delete needs for the WAL frames and change events it
 *    writes, so rm, rmdir, delete/ and `docfs changes-keep` work on a full disk.
 * 2. From then until the store has room again, writes that add (inserting or replacing a
 *    document, writing a scratch file, creating a collection or an index) are refused at
 *    once with DFS_ENOSPC, before they touch SQLite: otherwise they would use up the space
 *    the reserve gave back. Deletes, drops, renames and attribute changes go on.
 * 3. Room again is STORE_RESERVE bytes free: in the file system, or inside the database
 *    file (its free pages, where deleted documents were, which SQLite reuses before it
 *    grows the file). Each refused write looks again (a statvfs and a pragma). Once there
 *    is room the reserve is made again when the file system has the bytes for it.
 * 4. The state is per process: another process that fills the disk removes the shared
 *    reserve file, and this one learns at its own first failure.
 * 5. Most of what a full disk holds may be WAL: frames of pages written again and again,
 *    which a checkpoint (at CKPT_PAGES, 32 MiB, db.c) would have copied back. So the write
 *    that finds the disk full, once rolled back, copies the WAL into the database file and
 *    truncates it (waiting 200 ms at most for readers), and from then on this process
 *    checkpoints every CKPT_TIGHT pages: deletes on a nearly full disk do not fill it with
 *    WAL again.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Bytes free to an unprivileged writer of the store's file system (or -1). */
static int64_t fs_free(struct store *s)
{
	struct statvfs v;

	if (statvfs(store_path(s), &v) != 0)
		return -1;
	return (int64_t)v.f_bavail * (int64_t)v.f_frsize;
}

static void reserve_path(struct store *s, char *out, size_t cap)
{
	snprintf(out, cap, "%s/.reserve", store_path(s));
}

/* note 1: makes the reserve when it is missing and the file system has room for it twice. */
void store__reserve_keep(struct store *s)
{
	char path[4096];
	struct stat st;
	int fd;

	if (atomic_load(&store__space_of(s)->reserve_known))
		return;
	atomic_store(&store__space_of(s)->reserve_known, true);
	reserve_path(s, path, sizeof(path));
	if (stat(path, &st) == 0 && st.st_size >= STORE_RESERVE)
		return;
	if (fs_free(s) < 2 * STORE_RESERVE)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (posix_fallocate(fd, 0, STORE_RESERVE) != 0) {
		close(fd);
		unlink(path);
		return;
	}
	close(fd);
}

/* note 1: the disk is full; gives the reserve back and enters the low-space state. */
void store__space_exhausted(struct store *s)
{
	char path[4096];

	atomic_store(&store__space_of(s)->low_space, true);
	atomic_store(&store__space_of(s)->tight, true);
	reserve_path(s, path, sizeof(path));
	unlink(path);
}

int store__space_check(struct store_txn *t, struct dfs_err *err)
{
	struct store *s = t->db->s;
	int64_t avail, pages = 0, psize = 0;
	sqlite3_stmt *st;

	/* s is NULL in the bare transactions of a schema migration (index.c) */
	if (!s || !atomic_load(&store__space_of(s)->low_space))
		return 0;
	avail = fs_free(s);
	if (sqlite3_prepare_v2(t->c->h, "PRAGMA freelist_count", -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			pages = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	if (sqlite3_prepare_v2(t->c->h, "PRAGMA page_size", -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			psize = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	if (avail + pages * psize >= STORE_RESERVE) {
		/* note 3: room again */
		atomic_store(&store__space_of(s)->low_space, false);
		atomic_store(&store__space_of(s)->reserve_known, false);
		return 0;
	}
	return dfs_err_set(err, DFS_ENOSPC,
			   "no space left for the store '%s' (%lld bytes free): delete documents "
			   "or free space until %d MiB are free",
			   store_path(s), (long long)(avail + pages * psize),
			   (int)(STORE_RESERVE >> 20));
}
