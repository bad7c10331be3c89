/*
 * mount.c - sets up and tears down a mount: the libfuse session, daemonizing so that
 * `docfs mount` returns once the mount is live, the notifier and TTL sweeper threads, and
 * the request loop. The request handlers themselves are in fsops.c.
 *
 * Design notes
 * 1. One reader thread reads every request. The quick ones (fs_op_quick: a document's
 *    getattr, read-only open, read and release) it serves itself; the others it copies to
 *    a queue served by worker threads. A warm `grep -r` costs one OPEN and one RELEASE per
 *    file, and the time is in the wake-ups, not in the handlers: with libfuse's
 *    multithreaded loop every request woke another idle thread blocked in read(), on
 *    whichever CPU it last ran, while a lone reader finds the RELEASE and the next OPEN
 *    queued back to back. Measured: about 2x fewer microseconds per file.
 * 2. A worker is started whenever a request is queued and none is idle (up to MAX_WORKERS),
 *    so a handler that waits (a flush waiting for the notifier, a write waiting for the
 *    SQLite lock) never holds up another request, as with libfuse's loop.
 * 3. The reader follows its callers. A request through /dev/fuse wakes the reader where it
 *    last ran, which the scheduler prefers to be the idle CPU, away from the caller; in a
 *    virtual machine whose idle CPUs halt at once, that wake-up and the one back to the
 *    caller made a warm `grep -r` of 100,000 files take 8.5 s, against 2.2 s with the
 *    reader and grep on one CPU. So the reader runs at SCHED_IDLE (idle.c: the woken caller
 *    then stays on the reader's CPU, and a starved reader is raised) and pins itself to the
 *    CPU of the caller of one quick request in FOLLOW_EVERY (read from /proc/<pid>/stat:
 *    the CPU it last ran on, where it now waits for the reply). Only quick requests count:
 *    those the reader serves itself are the ones whose wake-ups it can save, and a cold
 *    `grep -r`, whose opens go to workers, would move it at every look. Without a second
 *    CPU, without the right to leave SCHED_IDLE, or once requests come through io_uring
 *    (ring.c, which has a thread per CPU), the reader stays an ordinary thread. While
 *    workers have requests the reader runs at normal priority and on any CPU, as before,
 *    from before it hands one on (the woken worker may land on the reader's CPU) until a
 *    turn finds none: pinned at SCHED_IDLE it waited behind them to hand on the next one
 *    (a cold grep -r took 15.6 s instead of 14.0 on average). It does not follow then.
 */
#define FUSE_USE_VERSION 34
#include "fs_int.h"
#include "replset/replset.h"
#include "wire/wire.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <unistd.h>

#define MAX_WORKERS 64	/* libfuse's loop stops at 10 */
#define MAX_IDLE 16	/* idle workers kept; more exit */
#define FOLLOW_EVERY 16 /* quick requests per look at the caller's CPU (note 3) */

struct job {
	struct job *next;
	struct fs_ring_ent *ent; /* the ring entry the reply goes to, or NULL (/dev/fuse) */
	size_t size;
	char mem[]; /* the request as read from /dev/fuse */
};

static struct {
	struct fuse_session *se;
	pthread_mutex_t lock; /* guards the fields below */
	pthread_cond_t more;  /* a job was queued, or stop */
	pthread_cond_t gone;  /* a worker exited */
	struct job *head, *tail;
	int njobs;    /* queued */
	int nworkers; /* started, not yet exited */
	int nidle;    /* waiting for a job (some may be woken already) */
	bool stop;
	atomic_int busy; /* jobs queued or being served (read without the lock) */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
	  .more = PTHREAD_COND_INITIALIZER,
	  .gone = PTHREAD_COND_INITIALIZER};

/* Serves the request a job holds and frees the job. */
static void job_run(struct job *j)
{
	struct fuse_buf b = {.size = j->size, .mem = j->mem};

	fs_ring_bind(j->ent);
	fs_net_count(j->size, 0);
	fuse_session_process_buf(pool.se, &b);
	fs_ring_bind(NULL);
	free(j);
	atomic_fetch_sub(&pool.busy, 1);
}

static _Thread_local bool on_worker; /* this thread is a worker of the pool */

bool fs_mount_on_worker(void)
{
	return on_worker;
}

static void *worker_main(void *arg)
{
	(void)arg;
	on_worker = true;
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		struct job *j;

		while (!pool.head && !pool.stop) {
			pool.nidle++;
			pthread_cond_wait(&pool.more, &pool.lock);
			pool.nidle--;
		}
		if (!pool.head)
			break; /* stopping, nothing left */
		j = pool.head;
		pool.njobs--;
		pool.head = j->next;
		if (!pool.head)
			pool.tail = NULL;
		pthread_mutex_unlock(&pool.lock);
		job_run(j);
		pthread_mutex_lock(&pool.lock);
		if (pool.nidle >= MAX_IDLE && !pool.head)
			break;
	}
	pool.nworkers--;
	pthread_cond_broadcast(&pool.gone);
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

static cpu_set_t mount_cpus; /* the daemon's CPU affinity before any ring thread pinned itself */
static bool mount_cpus_ok;

struct thread_start {
	void *(*fn)(void *);
	void *arg;
};

/* A new thread inherits its creator's CPU affinity, scheduling policy and name; one started
 * from a ring thread (ring.c note 6: pinned, SCHED_IDLE) gets the daemon's own back. */
static void *thread_main(void *p)
{
	struct thread_start st = *(struct thread_start *)p;
	struct sched_param sp = {0};

	free(p);
	if (sched_getscheduler(0) != SCHED_OTHER)
		sched_setscheduler(0, SCHED_OTHER, &sp);
	if (mount_cpus_ok)
		sched_setaffinity(0, sizeof(mount_cpus), &mount_cpus);
	pthread_setname_np(pthread_self(), "docfs");
	return st.fn(st.arg);
}

int fs_thread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	struct thread_start *st = malloc(sizeof(*st));
	sigset_t all, old;
	int rc;

	if (!st)
		return ENOMEM;
	st->fn = fn;
	st->arg = arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(th, attr, thread_main, st);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		free(st);
	return rc;
}

/* Starts a worker; pool.lock held. Returns false when no thread could be created. */
static bool worker_start(void)
{
	pthread_attr_t attr;
	pthread_t th;
	bool ok;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ok = fs_thread_create(&th, &attr, worker_main, NULL) == 0;
	if (ok)
		pool.nworkers++;
	pthread_attr_destroy(&attr);
	return ok;
}

/* Queues a copy of the request for a worker (note 2). */
static void job_submit(const void *mem, size_t size, struct fs_ring_ent *ent)
{
	struct job *j = malloc(sizeof(*j) + size);

	if (!j)
		abort();
	j->next = NULL;
	j->ent = ent;
	j->size = size;
	memcpy(j->mem, mem, size);
	atomic_fetch_add(&pool.busy, 1); /* job_run counts it off */
	pthread_mutex_lock(&pool.lock);
	if (pool.stop) {
		/* The pool is closing (only a ring thread submits now): serve it here. */
		pthread_mutex_unlock(&pool.lock);
		job_run(j);
		return;
	}
	if (pool.tail)
		pool.tail->next = j;
	else
		pool.head = j;
	pool.tail = j;
	pool.njobs++;
	/* Each queued job needs a worker of its own: one that is busy may wait for long. */
	if (pool.nidle >= pool.njobs) {
		pthread_cond_signal(&pool.more);
	} else if (pool.nworkers < MAX_WORKERS && !worker_start() && pool.nworkers == 0) {
		/* No worker and none can be started: the reader serves the job itself rather
		 * than leave it queued with nobody to take it. With no worker, nothing else is
		 * queued (workers exit only when the queue is empty). */
		pool.head = pool.tail = NULL;
		pool.njobs--;
		pthread_mutex_unlock(&pool.lock);
		job_run(j);
		return;
	}
	pthread_mutex_unlock(&pool.lock);
	/* With MAX_WORKERS busy the job waits for one of them to finish. */
}

/* Whether the reader serves the request in mem (size bytes) itself (note 1). */
static bool is_quick(const char *mem, size_t size)
{
	const struct fuse_in_header *ih = (const void *)mem;
	const char *arg = mem + sizeof(*ih);
	uint64_t fh = 0;
	uint32_t flags = 0;

	if (size < sizeof(*ih))
		return true; /* libfuse answers it with an error */
	switch (ih->opcode) {
	case FUSE_INIT:
	case FUSE_DESTROY:
		return true; /* nothing else is under way */
	case FUSE_OPEN:
		if (size < sizeof(*ih) + sizeof(struct fuse_open_in))
			return true;
		flags = ((const struct fuse_open_in *)(const void *)arg)->flags;
		break;
	case FUSE_READ:
		if (size < sizeof(*ih) + sizeof(struct fuse_read_in))
			return true;
		fh = ((const struct fuse_read_in *)(const void *)arg)->fh;
		break;
	case FUSE_RELEASE:
		if (size < sizeof(*ih) + sizeof(struct fuse_release_in))
			return true;
		fh = ((const struct fuse_release_in *)(const void *)arg)->fh;
		break;
	default:
		break;
	}
	return fs_op_quick(ih->opcode, ih->nodeid, fh, flags);
}

/* Serves a request on this thread; its reply goes to ent (NULL: /dev/fuse). */
static void serve(const char *mem, size_t size, struct fs_ring_ent *ent)
{
	struct fuse_buf b = {.size = size, .mem = (void *)mem};

	fs_ring_bind(ent);
	fs_net_count(size, 0);
	fuse_session_process_buf(pool.se, &b);
	fs_ring_bind(NULL);
}

void fs_mount_dispatch(const char *mem, size_t size, struct fs_ring_ent *ent)
{
	if (is_quick(mem, size))
		serve(mem, size, ent);
	else
		job_submit(mem, size, ent);
}

/* The reader following its callers (note 3); reader thread only, but for the counters. */
static struct {
	bool on;		    /* it follows */
	struct fs_idle_thread idle; /* it, at SCHED_IDLE */
	unsigned quick;		    /* quick requests since the last look */
	int cpu;		    /* the CPU it is pinned to, or -1 */
	uint32_t pid;		    /* the caller whose stat fd is open */
	int fd;			    /* /proc/<pid>/stat, or -1 */
	atomic_ullong moves;	    /* times it pinned itself to another CPU */
} follow = {.cpu = -1, .fd = -1};

/* Closes the stat file of the last caller looked at. */
static void forget_caller(void)
{
	if (follow.fd >= 0)
		close(follow.fd);
	follow.fd = -1;
	follow.pid = 0;
}

/* The CPU thread pid last ran on, or -1. */
static int caller_cpu(uint32_t pid)
{
	char buf[512];
	const char *p;
	ssize_t n;
	int field = 3; /* the state, right after the name */

	if (pid != follow.pid) {
		char path[64];

		forget_caller();
		snprintf(path, sizeof(path), "/proc/%u/stat", pid);
		follow.fd = open(path, O_RDONLY | O_CLOEXEC);
		follow.pid = pid;
	}
	if (follow.fd < 0 || (n = pread(follow.fd, buf, sizeof(buf) - 1, 0)) <= 0) {
		forget_caller(); /* gone: a later process may have its pid */
		return -1;
	}
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold anything but ends before the last ')' */
	if (!p || p[1] != ' ')
		return -1;
	for (p += 2; *p && field < 39; p++) /* field 39: processor */
		if (*p == ' ')
			field++;
	return *p >= '0' && *p <= '9' ? atoi(p) : -1;
}

static void follow_start(void)
{
	follow.on = mount_cpus_ok && CPU_COUNT(&mount_cpus) > 1 && fs_idle_allowed();
	if (follow.on)
		fs_idle_begin(&follow.idle);
}

/* The reader stops following: normal priority, the daemon's CPUs. */
static void follow_stop(void)
{
	if (!follow.on)
		return;
	follow.on = false;
	fs_idle_end(&follow.idle, true);
	sched_setaffinity(0, sizeof(mount_cpus), &mount_cpus);
	follow.cpu = -1;
	forget_caller();
}

/* Workers have requests: the reader runs at normal priority, on any CPU (note 3). */
static void follow_workers(void)
{
	fs_idle_raise(&follow.idle);
	if (follow.cpu >= 0 && sched_setaffinity(0, sizeof(mount_cpus), &mount_cpus) == 0)
		follow.cpu = -1;
}

/* A quick request came from pid: now and then, the reader moves to its CPU (note 3). */
static void follow_caller(uint32_t pid)
{
	cpu_set_t one;
	int cpu;

	if (pid == 0 || ++follow.quick < FOLLOW_EVERY) /* 0: from the kernel (a release) */
		return;
	follow.quick = 0;
	cpu = caller_cpu(pid);
	if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mount_cpus) || cpu == follow.cpu)
		return;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one) == 0) {
		follow.cpu = cpu;
		atomic_fetch_add(&follow.moves, 1);
	}
}

void fs_mount_reader_status(bool *follows, unsigned long long *moves)
{
	*follows = follow.on;
	*moves = atomic_load(&follow.moves);
}

/* Serves requests until the session ends (unmount or signal); 0, or -errno of a failed
 * read. */
static int request_loop(struct fuse_session *se)
{
	struct fuse_buf fbuf = {.mem = NULL};
	int res = 0;

	pool.se = se;
	pool.stop = false;
	follow_start();
	while (!fuse_session_exited(se)) {
		/* Back to SCHED_IDLE once no job is left (follow_workers raised it). */
		if (follow.on)
			fs_idle_turn(&follow.idle, atomic_load(&pool.busy) > 0);
		res = fuse_session_receive_buf(se, &fbuf);
		if (res == -EINTR || res == -EAGAIN) {
			res = 0;
			continue;
		}
		if (res <= 0)
			break;
		if (fbuf.flags & FUSE_BUF_IS_FD) {
			fuse_session_process_buf(se, &fbuf);
		} else if (is_quick(fbuf.mem, (size_t)res)) {
			if (follow.on && atomic_load(&pool.busy) == 0)
				follow_caller(((const struct fuse_in_header *)fbuf.mem)->pid);
			serve(fbuf.mem, (size_t)res, NULL);
		} else {
			/* Raised and unpinned first: the woken worker may be put on this CPU,
			 * and would run ahead of a reader at SCHED_IDLE (note 3). */
			if (follow.on)
				follow_workers();
			job_submit(fbuf.mem, (size_t)res, NULL);
		}
		if (fs_ring_granted()) {
			struct dfs_err err = {0};

			/* The FUSE_INIT reply just asked for the ring (ring.c note 7). */
			if (fs_ring_start(FS_MAX_WRITE, &err))
				fs_errlog_add(
					"mount: no io_uring, requests go through /dev/fuse: %s",
					err.msg);
			else
				follow_stop(); /* the ring threads serve on each CPU */
		}
	}
	follow_stop();
	free(fbuf.mem);
	/* Workers finish what is queued, then exit; their replies to ring requests are
	 * committed by the ring threads, which stop next. A ring request that comes in
	 * meanwhile is served by its ring thread (job_submit). */
	pthread_mutex_lock(&pool.lock);
	pool.stop = true;
	pthread_cond_broadcast(&pool.more);
	while (pool.nworkers > 0)
		pthread_cond_wait(&pool.gone, &pool.lock);
	pthread_mutex_unlock(&pool.lock);
	fs_ring_stop();
	fs_ring_free();
	fs_idle_stop();
	fuse_session_reset(se);
	return res < 0 ? res : 0;
}

#define URING_PARAM "/sys/module/fuse/parameters/enable_uring"

/* 0 when the kernel offers FUSE over io_uring, else DFS_EINVAL saying how to enable it. */
static int uring_check(struct dfs_err *err)
{
	FILE *f = fopen(URING_PARAM, "r");
	int c = f ? fgetc(f) : EOF;

	if (f)
		fclose(f);
	if (!f)
		return dfs_err_set(
			err, DFS_EINVAL,
			"-o uring needs a kernel with FUSE over io_uring (6.14 or later, "
			"CONFIG_FUSE_IO_URING): no " URING_PARAM);
	if (c != 'Y' && c != 'y' && c != '1')
		return dfs_err_set(err, DFS_EINVAL,
				   "-o uring: FUSE over io_uring is disabled; as root: "
				   "echo Y > " URING_PARAM);
	return 0;
}

/* DFS_EEXIST when dir is a docfs mount already: a second mount would stack on it (and hide
 * the first one's files from everyone but its open descriptors). From /proc/self/mounts,
 * whose mount points have ' ', '\t', '\n' and '\\' written as octal escapes. */
static int already_mounted(const char *dir, struct dfs_err *err)
{
	char *real = realpath(dir, NULL), line[8192];
	FILE *f;
	int rc = 0;

	if (!real || !(f = fopen("/proc/self/mounts", "re"))) {
		free(real);
		return 0;
	}
	while (!rc && fgets(line, sizeof(line), f)) {
		char src[4096], mnt[4096], type[64], un[4096];
		size_t j = 0;

		if (sscanf(line, "%4095s %4095s %63s", src, mnt, type) != 3 ||
		    strcmp(type, "fuse.docfs") != 0)
			continue;
		for (size_t i = 0; mnt[i] && j + 1 < sizeof(un); i++) {
			if (mnt[i] == '\\' && mnt[i + 1] >= '0' && mnt[i + 1] <= '3' && mnt[i + 2] &&
			    mnt[i + 3]) {
				un[j++] = (char)((mnt[i + 1] - '0') * 64 + (mnt[i + 2] - '0') * 8 +
						 (mnt[i + 3] - '0'));
				i += 3;
			} else {
				un[j++] = mnt[i];
			}
		}
		un[j] = '\0';
		if (strcmp(un, real) == 0)
			rc = dfs_err_set(err, DFS_EEXIST,
					 "'%s' is a docfs mount already (of %s): unmount it first "
					 "(fusermount3 -u '%s')",
					 dir, strncmp(src, "docfs:", 6) == 0 ? src + 6 : src, dir);
	}
	fclose(f);
	free(real);
	return rc;
}

int fs_mount_run(const struct fs_mount_opts *o, struct dfs_err *err)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	struct store *s = NULL;
	struct wire_server *wire = NULL;
	struct rs_node *node = NULL;
	char *opts = NULL;
	int rc = 0;

	fs_sort_mem = o->sort_mem;
	fs_result_mem = o->result_mem;
	fs_dirplus_nodes = o->dirplus_nodes;
	if (o->uring && (rc = uring_check(err)))
		return rc;
	mount_cpus_ok = sched_getaffinity(0, sizeof(mount_cpus), &mount_cpus) == 0;
	if ((rc = already_mounted(o->mountpoint, err)))
		return rc;
	if ((rc = store_open(o->store, false, &s, err)))
		return rc;
	store_set_doc_cache(s, o->doc_cache);
	if (o->log && (rc = fs_errlog_open(o->log, err)))
		goto done;
	/* the wire protocol's listeners are bound now, so that a taken port fails the mount
	 * command; their threads start in the daemon (wire/server.c note 3) */
	if (o->cursor_timeout_s > 0)
		wire_cursor_timeout_s = o->cursor_timeout_s;
	if (o->nlisten && (rc = wire_server_bind(s, o->listen, o->nlisten, o->noauth, &wire, err)))
		goto done;
	if ((o->tls_cert || o->tls_key) && !o->nlisten) {
		rc = dfs_err_set(err, DFS_EINVAL, "tls_cert and tls_key need a listen= address");
		goto done;
	}
	if ((o->tls_cert || o->tls_key) &&
	    (rc = wire_server_tls(wire, o->tls_cert, o->tls_key, err)))
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
	if (o->uring)
		fs_ring_want(fuse_session_fd(se));
	/* The mount is live: the parent returns now, the child serves. */
	if (fuse_daemonize(o->foreground) != 0) {
		rc = dfs_err_set(err, DFS_EIO, "cannot daemonize");
		goto unmount;
	}
	fs_curop_start();
	if ((rc = fs_notify_start(se, o->notify_ms, err)))
		goto unmount;
	if ((rc = fs_ttl_start(s, o->ttl_s, err))) {
		fs_notify_stop();
		goto unmount;
	}
	/* a member's write gate is closed before anything is served (member.c note 5) */
	if (o->replset &&
	    (rc = rs_node_start(s, o->replset, o->zk, wire ? wire_server_addr(wire, 0) : NULL,
				&node, err))) {
		fs_errlog_add("mount: %s", err->msg);
		fs_ttl_stop();
		fs_notify_stop();
		goto unmount;
	}
	if (wire && (rc = wire_server_start(wire, err))) {
		fs_errlog_add("mount: %s", err->msg);
		rs_node_stop(node);
		fs_ttl_stop();
		fs_notify_stop();
		goto unmount;
	}
	if (request_loop(se) != 0)
		fs_errlog_add("mount: request loop ended with an error");
	{
		size_t open_files = fs_handles_release();

		if (open_files)
			fs_errlog_add("mount: ended with %zu files or directories open: what was "
				      "written to files after their last close is not kept",
				      open_files);
	}
	wire_server_stop(wire); /* its connections end before the store is freed */
	wire = NULL;
	rs_node_stop(node);
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
	wire_server_stop(wire);
	fs_nodes_release();
	fs_store = NULL;
	store_free(s);
	fs_errlog_open(NULL, NULL);
	free(opts);
	return rc;
}
