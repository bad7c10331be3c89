/*
 * ring.c - FUSE over io_uring (`docfs mount -o uring`): a request queue per CPU, served by a
 * thread pinned to that CPU. It carries requests and replies; what a request does is still
 * decided by libfuse and fsops.c, and forgets, interrupts and invalidations still go through
 * /dev/fuse (the kernel sends those there).
 *
 * Design notes
 * 1. Why: a request through /dev/fuse wakes the reader thread, usually on the other CPU.
 *    In a virtual machine whose idle CPUs halt at once, that wake-up and the one back to the
 *    caller cost most of a warm `grep -r` (one OPEN per file). With the ring, the kernel
 *    puts a request on the queue of the caller's CPU, so the pinned thread that serves it
 *    runs on the CPU the caller is about to leave, and the reply wakes the caller there.
 * 2. libfuse 3.14 knows neither io_uring nor a custom transport, so this file works around
 *    it in two places, both through writev(), which libfuse calls for every reply:
 *    - the FUSE_INIT reply gets FUSE_OVER_IO_URING added (fs_ring_init_reply marks it);
 *    - a reply written on a thread serving a ring request (fs_ring_bind) is copied into
 *      that request's ring entry instead of going to /dev/fuse.
 *    The writev() below takes every other call straight to the system call.
 * 3. A request arrives in an entry as three pieces: the in header, the op header and the
 *    payload. The first two are copied into the room left in front of the payload, which
 *    gives back the /dev/fuse layout libfuse parses, without copying the payload. The op
 *    header's size is the request's length less the header and the payload.
 * 4. Entries: RING_DEPTH per queue, each with a payload as large as the largest request or
 *    reply (max_write). Quick requests (fs_op_quick) are served on the ring thread; the rest
 *    go to the worker pool with a copy of the request, so a slow one holds only its entry.
 *    Only the ring thread submits to its ring: a worker's reply is put on the queue's done
 *    list and the thread is woken through its eventfd to commit it (it also looks at the
 *    list at every turn).
 * 5. An entry is in one of three states: with the kernel (registered or committed, waiting
 *    for a request), being served (its request in a handler), or replied (on the done list,
 *    or committed at the next submit). A commit both replies and waits for the next request.
 * 6. Ring threads run as SCHED_IDLE (idle.c): with normal ring threads every reply sent the
 *    caller to the other, halted CPU (a warm grep of 100,000 files: 8.3-9.7 s), while a CPU
 *    that runs only SCHED_IDLE tasks counts as idle, so the caller stays where it was
 *    (2.7-3.0 s). idle.c's watchdog raises a ring thread that starves next to busy tasks.
 * 7. The ring starts after FUSE_INIT (registration needs the negotiated sizes), and the
 *    kernel switches to it only when every CPU's queue has an entry; until then requests
 *    come through /dev/fuse. At unmount the kernel ends every entry with -ENOTCONN;
 *    fs_ring_stop also wakes the threads through their eventfds.
 */
#define FUSE_USE_VERSION 34
#include "fs_int.h"

#include <assert.h>
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* The kernel's FUSE-over-io_uring interface (uapi linux/fuse.h, protocol 7.42), which the
 * installed headers predate. */
#define RING_OVER_IO_URING (1ULL << 41) /* FUSE_INIT flag */
#define RING_CMD_REGISTER 1u
#define RING_CMD_COMMIT_AND_FETCH 2u
#define RING_HDR_IN_OUT 128 /* in or out header area */
#define RING_HDR_OP 128	    /* op header area */

struct ring_ent_io {
	uint64_t flags;
	uint64_t commit_id;  /* the request's, echoed in the commit */
	uint32_t payload_sz; /* bytes of payload, either way */
	uint32_t padding;
	uint64_t reserved;
};

struct ring_header {
	char in_out[RING_HDR_IN_OUT]; /* fuse_in_header, or our fuse_out_header */
	char op_in[RING_HDR_OP];      /* the op header (fuse_open_in, ...) */
	struct ring_ent_io io;
};

struct ring_cmd {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define RING_DEPTH 32  /* entries per queue (note 4) */
#define RING_ROOM 4096 /* in front of a payload: the rebuilt headers (note 3) */
#define RING_EV_TAG 1  /* user_data of the eventfd read */

struct ring_queue;

struct fs_ring_ent {
	struct ring_queue *q;	  /* owner */
	struct ring_header *hdr;  /* Owned: page-aligned */
	char *mem;		  /* Owned: RING_ROOM + payload */
	struct iovec iov[2];	  /* header, payload: what REGISTER gives the kernel */
	uint64_t commit_id;	  /* of the request being served */
	uint64_t unique;	  /* its unique: only its reply goes to this entry */
	uint32_t last_cmd;	  /* to resubmit after -EAGAIN */
	struct fs_ring_ent *next; /* on the done list */
};

struct ring_queue {
	int qid; /* the CPU */
	pthread_t th;
	bool started;		    /* th was created */
	struct fs_idle_thread idle; /* th at SCHED_IDLE (note 6) */
	struct io_uring ring;
	bool ring_ok;		  /* ring was set up */
	int evfd;		  /* wakes the thread: a done reply, or stop */
	uint64_t evbuf;		  /* the eventfd read's target */
	pthread_mutex_t lock;	  /* guards done */
	struct fs_ring_ent *done; /* replied by workers, to commit */
	struct fs_ring_ent ent[RING_DEPTH];
};

static struct {
	bool granted;	     /* the INIT reply asked for the ring; reader thread only */
	atomic_bool started; /* fs_ring_start succeeded: the ring serves */
	int fd;		     /* /dev/fuse */
	size_t payload_sz;
	int nq;
	struct ring_queue *q; /* Owned: nq queues */
	atomic_bool stop;
	atomic_int live;      /* queues with every entry registered */
	atomic_ullong served; /* requests that came through the ring */
	bool idle;	      /* ring threads run at SCHED_IDLE (note 6) */
} ring = {.fd = -1};

static _Thread_local struct fs_ring_ent *serving;  /* the entry a reply on this thread is for */
static _Thread_local bool init_reply;		   /* the next reply is FUSE_INIT's */
static _Thread_local struct ring_queue *own_queue; /* on a ring thread: its queue */

void fs_ring_want(int fd)
{
	ring.fd = fd;
}
void fs_ring_init_reply(void)
{
	if (ring.fd >= 0)
		init_reply = true;
}

void fs_ring_bind(struct fs_ring_ent *e)
{
	serving = e;
}

void fs_ring_status(struct dfs_buf *out)
{
	unsigned long long moves;
	bool follows;

	fs_mount_reader_status(&follows, &moves);
	dfs_buf_printf(out,
		       "{\"transport\": \"%s\", \"queues\": %d, \"queuesLive\": %d, "
		       "\"ringRequests\": %llu, \"readerFollows\": %s, \"readerMoves\": %llu, "
		       "\"starvedBoosts\": %llu}\n",
		       atomic_load(&ring.started) ? "io_uring" : "/dev/fuse",
		       atomic_load(&ring.started) ? ring.nq : 0, atomic_load(&ring.live),
		       (unsigned long long)atomic_load(&ring.served), follows ? "true" : "false",
		       moves, fs_idle_boosts());
}

/* ---- submitting (ring thread only) ------------------------------------------------- */

/* Queues a REGISTER or COMMIT_AND_FETCH of e; the next submit sends it. There is always a
 * free SQE: the ring has room for every entry's one command and the eventfd read. */
static void ring_cmd_prep(struct fs_ring_ent *e, uint32_t cmd)
{
	struct ring_queue *q = e->q;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct ring_cmd *c;

	assert(sqe);
	memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128: the command area is the second half */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = ring.fd;
	sqe->cmd_op = cmd;
	if (cmd == RING_CMD_REGISTER) {
		sqe->addr = (uintptr_t)e->iov;
		sqe->len = 2;
	}
	c = (struct ring_cmd *)(void *)sqe->cmd;
	c->qid = (uint16_t)q->qid;
	c->commit_id = cmd == RING_CMD_COMMIT_AND_FETCH ? e->commit_id : 0;
	io_uring_sqe_set_data(sqe, e);
	e->last_cmd = cmd;
}

static void ring_ev_prep(struct ring_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	assert(sqe);
	io_uring_prep_read(sqe, q->evfd, &q->evbuf, sizeof(q->evbuf), 0);
	io_uring_sqe_set_data64(sqe, RING_EV_TAG);
}

/* ---- replies ------------------------------------------------------------------------- */

/* Copies the reply in iov into e and hands it to the ring thread (note 4). Returns what
 * writev would. */
static ssize_t ring_reply(struct fs_ring_ent *e, const struct iovec *iov, int cnt)
{
	struct fuse_out_header oh;
	size_t total = 0, off = 0;

	if (cnt < 1 || iov[0].iov_len < sizeof(oh)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&oh, iov[0].iov_base, sizeof(oh));
	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	if (total - iov[0].iov_len > ring.payload_sz) {
		/* Never happens for replies libfuse builds within max_write/max_read; if it
		 * did, the caller gets an error rather than a cut reply. */
		fs_errlog_add("ring: a %zu-byte reply exceeds the %zu-byte payload", total,
			      ring.payload_sz);
		oh.error = -EIO;
		oh.len = sizeof(oh);
		e->hdr->io.payload_sz = 0;
	} else {
		char *p = e->mem + RING_ROOM;

		for (int i = 1; i < cnt; i++) {
			memmove(p + off, iov[i].iov_base, iov[i].iov_len); /* may be the request */
			off += iov[i].iov_len;
		}
		e->hdr->io.payload_sz = (uint32_t)off;
	}
	memcpy(e->hdr->in_out, &oh, sizeof(oh));
	serving = NULL; /* one reply per request */
	if (own_queue == e->q) {
		ring_cmd_prep(e, RING_CMD_COMMIT_AND_FETCH);
	} else {
		struct ring_queue *q = e->q;
		uint64_t one = 1;

		pthread_mutex_lock(&q->lock);
		e->next = q->done;
		q->done = e;
		pthread_mutex_unlock(&q->lock);
		if (write(q->evfd, &one, sizeof(one)) != sizeof(one))
			fs_errlog_add("ring: cannot wake queue %d: %s", q->qid, strerror(errno));
	}
	return (ssize_t)total;
}

/* Replaces libc's writev for the whole program (note 2): libfuse writes every reply with
 * it. Only a write to the FUSE device of a ring request's reply, or of the FUSE_INIT reply
 * when the ring is wanted, is handled here. */
ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	if (fd >= 0 && fd == ring.fd) {
		if (init_reply) {
			/* libfuse writes the FUSE_INIT reply right after the init handler returns;
			 * an error reply (no fuse_init_out) asks for nothing. */
			init_reply = false;
			if (cnt == 2 && iov[1].iov_len == sizeof(struct fuse_init_out) &&
			    iov[0].iov_len >= sizeof(struct fuse_out_header) &&
			    ((const struct fuse_out_header *)iov[0].iov_base)->error == 0) {
				struct fuse_init_out *o = iov[1].iov_base;

				o->flags |= FUSE_INIT_EXT;
				o->flags2 |= (uint32_t)(RING_OVER_IO_URING >> 32);
				ring.granted = true;
			}
		} else if (serving && cnt >= 1 &&
			   iov[0].iov_len >= sizeof(struct fuse_out_header) &&
			   ((const struct fuse_out_header *)iov[0].iov_base)->unique ==
				   serving->unique) {
			/* Anything else written meanwhile (the EAGAIN libfuse sends for an
			 * interrupt, a notification) goes to /dev/fuse. */
			return ring_reply(serving, iov, cnt);
		}
	}
	return syscall(SYS_writev, fd, iov, cnt);
}

/* ---- the ring thread ----------------------------------------------------------------- */

/* Rebuilds e's request in the /dev/fuse layout and serves it (note 3). */
static void ring_serve(struct fs_ring_ent *e)
{
	struct fuse_in_header ih;
	uint32_t psz = e->hdr->io.payload_sz;
	size_t opsz;
	char *p;

	memcpy(&ih, e->hdr->in_out, sizeof(ih));
	e->commit_id = e->hdr->io.commit_id;
	e->unique = ih.unique;
	if (psz > ring.payload_sz || ih.len < sizeof(ih) + psz ||
	    (opsz = ih.len - sizeof(ih) - psz) > RING_HDR_OP) {
		struct fuse_out_header oh = {.len = sizeof(oh), .error = -EIO, .unique = ih.unique};

		fs_errlog_add("ring: malformed request (opcode %u, length %u, payload %u)",
			      ih.opcode, ih.len, psz);
		memcpy(e->hdr->in_out, &oh, sizeof(oh));
		e->hdr->io.payload_sz = 0;
		ring_cmd_prep(e, RING_CMD_COMMIT_AND_FETCH);
		return;
	}
	p = e->mem + RING_ROOM - opsz - sizeof(ih);
	memcpy(p, &ih, sizeof(ih));
	memcpy(p + sizeof(ih), e->hdr->op_in, opsz);
	atomic_fetch_add_explicit(&ring.served, 1, memory_order_relaxed);
	fs_mount_dispatch(p, ih.len, e);
}

/* Commits what workers replied. */
static void ring_drain_done(struct ring_queue *q)
{
	struct fs_ring_ent *e;

	pthread_mutex_lock(&q->lock);
	e = q->done;
	q->done = NULL;
	pthread_mutex_unlock(&q->lock);
	while (e) {
		struct fs_ring_ent *next = e->next;

		ring_cmd_prep(e, RING_CMD_COMMIT_AND_FETCH);
		e = next;
	}
}

static void pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		fs_errlog_add("ring: cannot pin queue %d's thread to its CPU: %s", cpu,
			      strerror(errno));
}

static void *ring_main(void *arg)
{
	struct ring_queue *q = arg;
	int ndead = 0, nerr = 0, rc;
	char name[16];

	snprintf(name, sizeof(name), "docfs-ring%d", q->qid);
	pthread_setname_np(pthread_self(), name);
	own_queue = q;
	pin_to_cpu(q->qid);
	if (ring.idle)
		fs_idle_begin(&q->idle);
	for (int i = 0; i < RING_DEPTH; i++)
		ring_cmd_prep(&q->ent[i], RING_CMD_REGISTER);
	ring_ev_prep(q);
	atomic_fetch_add(&ring.live, 1);
	while (!atomic_load(&ring.stop) && ndead < RING_DEPTH) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		fs_idle_turn(&q->idle, io_uring_cq_ready(&q->ring) != 0);
		ring_drain_done(q); /* a worker's reply may come before its wake-up */
		rc = io_uring_submit_and_wait(&q->ring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			/* Leaving would strand the requests the kernel queues for this CPU:
			 * keep trying, and say so (once in a while). */
			if (nerr++ % 1000 == 0)
				fs_errlog_add("ring: queue %d: %s", q->qid, strerror(-rc));
			usleep(1000);
			continue;
		}
		io_uring_for_each_cqe(&q->ring, head, cqe)
		{
			struct fs_ring_ent *e;

			n++;
			if (cqe->user_data == RING_EV_TAG) {
				if (cqe->res < 0 && cqe->res != -EINTR && cqe->res != -EAGAIN &&
				    nerr++ % 1000 == 0)
					fs_errlog_add("ring: queue %d: eventfd read: %s", q->qid,
						      strerror(-cqe->res));
				ring_ev_prep(q); /* the stop comes this way too */
				continue;
			}
			e = io_uring_cqe_get_data(cqe);
			if (cqe->res == 0) {
				ring_serve(e);
			} else if (cqe->res == -EAGAIN || cqe->res == -EINTR) {
				ring_cmd_prep(e, e->last_cmd);
			} else {
				if (cqe->res != -ENOTCONN && cqe->res != -ECANCELED)
					fs_errlog_add("ring: queue %d: an entry ended: %s", q->qid,
						      strerror(-cqe->res));
				ndead++;
			}
		}
		io_uring_cq_advance(&q->ring, n);
	}
	ring_drain_done(q);	   /* replies workers finished before the stop */
	io_uring_submit(&q->ring); /* and the commits prepared last */
	if (ring.idle)
		fs_idle_end(&q->idle, false);
	atomic_fetch_sub(&ring.live, 1);
	return NULL;
}

/* ---- start and stop ------------------------------------------------------------------ */

static int queue_init(struct ring_queue *q, int qid)
{
	struct io_uring_params p;
	long page = sysconf(_SC_PAGESIZE);
	int rc;

	q->qid = qid;
	q->evfd = -1;
	pthread_mutex_init(&q->lock, NULL);
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE;
	p.cq_entries = 2 * (RING_DEPTH + 1);
	if ((rc = io_uring_queue_init_params(RING_DEPTH + 1, &q->ring, &p)) < 0)
		return rc;
	q->ring_ok = true;
	if ((q->evfd = eventfd(0, EFD_CLOEXEC)) < 0)
		return -errno;
	for (int i = 0; i < RING_DEPTH; i++) {
		struct fs_ring_ent *e = &q->ent[i];
		void *h = NULL, *m = NULL;

		e->q = q;
		if (posix_memalign(&h, (size_t)page, sizeof(*e->hdr)) ||
		    posix_memalign(&m, (size_t)page, RING_ROOM + ring.payload_sz)) {
			free(h);
			return -ENOMEM;
		}
		e->hdr = h;
		e->mem = m;
		memset(e->hdr, 0, sizeof(*e->hdr));
		e->iov[0] = (struct iovec){.iov_base = e->hdr, .iov_len = sizeof(*e->hdr)};
		e->iov[1] =
			(struct iovec){.iov_base = e->mem + RING_ROOM, .iov_len = ring.payload_sz};
	}
	return 0;
}

bool fs_ring_granted(void)
{
	return ring.granted;
}

int fs_ring_start(size_t payload_sz, struct dfs_err *err)
{
	int rc = 0, i;

	ring.granted = false; /* one attempt: a failure leaves the mount on /dev/fuse */
	ring.payload_sz = payload_sz;
	ring.idle = fs_idle_allowed();
	if (!ring.idle)
		fs_errlog_add("ring: its threads run at normal priority: leaving SCHED_IDLE needs "
			      "CAP_SYS_NICE or RLIMIT_NICE 20");
	ring.nq = get_nprocs_conf();
	ring.q = calloc((size_t)ring.nq, sizeof(*ring.q));
	if (!ring.q)
		return dfs_err_set(err, DFS_ENOMEM, "out of memory");
	for (i = 0; i < ring.nq; i++)
		ring.q[i].evfd = -1;
	for (i = 0; i < ring.nq && !rc; i++) {
		if ((rc = queue_init(&ring.q[i], i)) < 0)
			rc = dfs_err_set(err, DFS_EIO, "cannot set up the io_uring of CPU %d: %s",
					 i, strerror(-rc));
	}
	for (i = 0; i < ring.nq && !rc; i++) {
		if (fs_thread_create(&ring.q[i].th, NULL, ring_main, &ring.q[i]) != 0)
			rc = dfs_err_set(err, DFS_EIO, "cannot start the thread of CPU %d", i);
		else
			ring.q[i].started = true;
	}
	if (rc) {
		/* Some queue has no entry, so the kernel never switched to the ring: closing
		 * the rings cancels what the others registered. */
		fs_ring_stop();
		fs_ring_free();
		return rc;
	}
	atomic_store(&ring.started, true);
	return 0;
}

void fs_ring_stop(void)
{
	atomic_store(&ring.stop, true);
	for (int i = 0; ring.q && i < ring.nq; i++) {
		struct ring_queue *q = &ring.q[i];
		uint64_t one = 1;

		if (!q->started)
			continue;
		if (write(q->evfd, &one, sizeof(one)) != sizeof(one))
			fs_errlog_add("ring: cannot wake queue %d: %s", q->qid, strerror(errno));
		pthread_join(q->th, NULL);
		q->started = false;
	}
}

void fs_ring_free(void)
{
	for (int i = 0; ring.q && i < ring.nq; i++) {
		struct ring_queue *q = &ring.q[i];

		if (q->ring_ok)
			io_uring_queue_exit(&q->ring);
		if (q->evfd >= 0)
			close(q->evfd);
		for (int j = 0; j < RING_DEPTH; j++) {
			free(q->ent[j].hdr);
			free(q->ent[j].mem);
		}
		pthread_mutex_destroy(&q->lock);
	}
	free(ring.q);
	ring.q = NULL;
	ring.nq = 0;
}
