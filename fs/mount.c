/*
 * mount.c - sets up and tears down a mount: the libfuse session, daemonizing so that
 * `docfs mount` returns once the mount is live, the notifier and TTL sweeper threads, and
 * the multithreaded request loop. The request handlers themselves are in fsops.c.
 */
#define FUSE_USE_VERSION 34
#include "fs_int.h"

#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fs_mount_run(const struct fs_mount_opts *o, struct dfs_err *err)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config cfg = {.clone_fd = 0, .max_idle_threads = 16};
	struct fuse_session *se = NULL;
	struct store *s = NULL;
	char *opts = NULL;
	int rc = 0;

	if ((rc = store_open(o->store, false, &s, err)))
		return rc;
	if (o->log && (rc = fs_errlog_open(o->log, err)))
		goto done;
	if (asprintf(&opts, "default_permissions,fsname=docfs:%s,subtype=docfs%s%s", store_path(s),
		     o->fuse_opts && o->fuse_opts[0] ? "," : "",
		     o->fuse_opts ? o->fuse_opts : "") < 0)
		abort();
	if (fuse_opt_add_arg(&args, "docfs") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opts) || (o->debug && fuse_opt_add_arg(&args, "-d"))) {
		rc = dfs_err_set(err, DFS_ENOMEM, "out of memory");
		goto done;
	}
	fs_store = s;
	fs_nodes_init();
	se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), NULL);
	if (!se) {
		rc = dfs_err_set(err, DFS_EINVAL, "cannot start a FUSE session (bad -o options?)");
		goto done;
	}
	if (fuse_set_signal_handlers(se) != 0) {
		rc = dfs_err_set(err, DFS_EIO, "cannot install signal handlers");
		goto done;
	}
	if (fuse_session_mount(se, o->mountpoint) != 0) {
		fuse_remove_signal_handlers(se);
		rc = dfs_err_set(err, DFS_EIO, "cannot mount on '%s'", o->mountpoint);
		goto done;
	}
	/* The mount is live: the parent returns now, the child serves. */
	if (fuse_daemonize(o->foreground) != 0) {
		rc = dfs_err_set(err, DFS_EIO, "cannot daemonize");
		goto unmount;
	}
	if ((rc = fs_notify_start(se, o->notify_ms, err)))
		goto unmount;
	if ((rc = fs_ttl_start(s, o->ttl_s, err))) {
		fs_notify_stop();
		goto unmount;
	}
	if (fuse_session_loop_mt(se, &cfg) != 0)
		fs_errlog_add("mount: request loop ended with an error");
	fs_ttl_stop();
	fs_notify_stop();
unmount:
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
done:
	if (se)
		fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	fs_snapshots_close();
	fs_nodes_release();
	fs_store = NULL;
	store_free(s);
	fs_errlog_open(NULL, NULL);
	free(opts);
	return rc;
}
