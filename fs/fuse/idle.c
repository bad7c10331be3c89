/*
 * idle.c - threads that serve requests at SCHED_IDLE next to their callers (ring.c note 6,
 * mount.c note 3), and the watchdog that raises one that starves.
 *
 * Design notes
 * 1. When a request wakes the thread that serves it, and its reply wakes the caller, the
 *    scheduler puts each woken task on an idle CPU if the waker's is busy. In a virtual
 *    machine whose idle CPUs halt at once, those cross-CPU wake-ups cost most of a warm
 *    `grep -r`. A thread that serves on the caller's CPU at SCHED_IDLE avoids both: a CPU
 *    that runs only SCHED_IDLE tasks counts as idle, so the woken caller stays there.
 * 2. The price: such a thread gets next to no CPU while busy tasks of the same scheduling
 *    group share its CPU (the daemon is in a group of its own when it daemonizes, since the
 *    kernel groups by session, but not with -f): a 9.8 MB document read under two such
 *    hogs took 32 s. So the watchdog looks at each watched thread every WATCH_MS
 *    (IDLE_WATCH_MS while all of them slept at the last look); one that is runnable and has
 *    not finished a turn of its loop since the last look runs at normal priority for
 *    BOOST_NS, then goes back to SCHED_IDLE when it next has nothing to do. (Its run delay
 *    cannot tell: the kernel adds to it only once the thread runs.) It reads /proc only for
 *    a thread that has not turned.
 * 3. A thread that cannot leave SCHED_IDLE again (it takes CAP_SYS_NICE or an RLIMIT_NICE
 *    of 20, which root in a container often lacks) could not be raised, so fs_idle_allowed
 *    tries it on a throwaway thread, once, and says no; its users then stay at normal
 *    priority.
 */
#include "fs_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCH_MS 20	  /* note 2 */
#define IDLE_WATCH_MS 250 /* when every watched thread was asleep at the last look */
#define BOOST_NS (1000 * 1000000LL)
#define MAX_WATCHED 1024 /* a thread per CPU and the reader */

static struct {
	pthread_mutex_t lock; /* guards the fields below; the watchdog holds it while it looks */
	pthread_cond_t cond;  /* ends the watchdog's sleep: stop */
	struct fs_idle_thread *t[MAX_WATCHED]; /* Borrowed: unwatched before they go */
	int n;
	pthread_t th;
	bool running; /* th was created */
	bool stop;
	atomic_ullong boosts; /* times a starved thread was raised */
} w = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Puts the calling thread at SCHED_IDLE (idle) or normal priority. */
static void set_idle(bool idle)
{
	struct sched_param sp = {0};

	if (sched_setscheduler(0, idle ? SCHED_IDLE : SCHED_OTHER, &sp) != 0)
		fs_errlog_add("mount: cannot change a thread's priority: %s", strerror(errno));
}

/* Whether thread tid is runnable (state R: running, or waiting for a CPU). */
static bool runnable(int tid)
{
	char path[64], buf[256];
	const char *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	if (!(f = fopen(path, "r")))
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold anything but ends before the last ')' */
	return p && p[1] == ' ' && p[2] == 'R';
}

static void *watch_main(void *arg)
{
	int period_ms = WATCH_MS;

	(void)arg;
	pthread_setname_np(pthread_self(), "docfs-idlewatch");
	pthread_mutex_lock(&w.lock);
	while (!w.stop) {
		struct timespec until;
		bool busy = false;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += period_ms * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&w.cond, &w.lock, &until);
		for (int i = 0; i < w.n && !w.stop; i++) {
			struct fs_idle_thread *t = w.t[i];
			unsigned long long loops = atomic_load(&t->loops);
			struct sched_param sp = {0};

			if (loops != t->seen_loops) {
				busy = true; /* it turned: neither asleep nor starved */
			} else if (runnable(t->tid)) {
				/* Runnable through a whole period without finishing a turn:
				 * starved, or busy with one long request; either way not for
				 * SCHED_IDLE. */
				busy = true;
				atomic_store(&t->boost_until, mono_ns() + BOOST_NS);
				if (!atomic_load(&t->boosted) &&
				    sched_setscheduler(t->tid, SCHED_OTHER, &sp) == 0) {
					atomic_store(&t->boosted, true);
					atomic_fetch_add(&w.boosts, 1);
				}
			}
			t->seen_loops = loops;
		}
		period_ms = busy ? WATCH_MS : IDLE_WATCH_MS;
	}
	pthread_mutex_unlock(&w.lock);
	return NULL;
}

/* A throwaway thread goes to SCHED_IDLE and tries to come back (note 3): root in a
 * container often lacks CAP_SYS_NICE, and only the kernel knows. */
static void *try_leave_idle(void *arg)
{
	struct sched_param sp = {0};

	*(bool *)arg = sched_setscheduler(0, SCHED_IDLE, &sp) == 0 &&
		       sched_setscheduler(0, SCHED_OTHER, &sp) == 0;
	return NULL;
}

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool may_leave_idle; /* the probe's answer */

static void probe(void)
{
	pthread_t th;

	if (pthread_create(&th, NULL, try_leave_idle, &may_leave_idle) == 0)
		pthread_join(th, NULL);
}

bool fs_idle_allowed(void)
{
	pthread_once(&probe_once, probe);
	return may_leave_idle;
}

void fs_idle_begin(struct fs_idle_thread *t)
{
	t->tid = gettid();
	atomic_store(&t->boosted, false);
	t->seen_loops = atomic_load(&t->loops);
	pthread_mutex_lock(&w.lock);
	if (!w.running && !w.stop) {
		/* From a thread at SCHED_IDLE, a new one gets normal priority back
		 * (fs_thread_create). */
		if (fs_thread_create(&w.th, NULL, watch_main, NULL) == 0)
			w.running = true;
		else
			fs_errlog_add(
				"mount: cannot start the watchdog; a starved thread stays so");
	}
	if (w.n < MAX_WATCHED)
		w.t[w.n++] = t;
	pthread_mutex_unlock(&w.lock);
	set_idle(true);
}

void fs_idle_raise(struct fs_idle_thread *t)
{
	if (!atomic_load(&t->boosted)) {
		set_idle(false);
		atomic_store(&t->boosted, true);
	}
}

void fs_idle_turn(struct fs_idle_thread *t, bool more)
{
	if (!more && atomic_load(&t->boosted) && mono_ns() > atomic_load(&t->boost_until)) {
		set_idle(true); /* first: a boost meanwhile is then seen as needed again */
		atomic_store(&t->boosted, false);
	}
	atomic_fetch_add_explicit(&t->loops, 1, memory_order_relaxed);
}

void fs_idle_end(struct fs_idle_thread *t, bool normal)
{
	pthread_mutex_lock(&w.lock);
	for (int i = 0; i < w.n; i++) {
		if (w.t[i] == t) {
			w.t[i] = w.t[--w.n];
			break;
		}
	}
	pthread_mutex_unlock(&w.lock);
	if (normal)
		set_idle(false);
}

unsigned long long fs_idle_boosts(void)
{
	return atomic_load(&w.boosts);
}

void fs_idle_stop(void)
{
	pthread_mutex_lock(&w.lock);
	w.stop = true;
	pthread_cond_signal(&w.cond);
	pthread_mutex_unlock(&w.lock);
	if (w.running) {
		pthread_join(w.th, NULL);
		w.running = false;
	}
	pthread_mutex_lock(&w.lock);
	w.stop = false; /* a later mount in this process may watch again */
	pthread_mutex_unlock(&w.lock);
}
