/*
 * member.c - a daemon (mount or serve) that is a member of a replica set: it finds itself
 * in rs.conf() by its listen address, publishes its state and position in ZooKeeper, takes
 * part in elections there, holds the store's write gate closed unless it is the primary in
 * a live lease, follows the primary with an applier (apply.c), and answers hello,
 * replSetGetStatus and replSetGetConfig; waits for write concerns (notes 6, 8), and runs
 * replSetStepDown and replSetFreeze (note 7). It does not move documents itself (apply.c
 * does) and does not do read preference or rollback (not built yet).
 *
 * Design notes
 * 1. ZooKeeper holds, under /docfs/rs/<set>/: config (rs.conf(), zk.c), term ({term}: a
 *    counter raised by compare-and-set before each election), primary ({_id, host, term},
 *    EPHEMERAL: it lives with the primary's session), and members/<_id> (EPHEMERAL, one per
 *    live member: {_id, host, state, optime {ts, t}, syncSourceHost, infoMessage}). No
 *    document goes through ZooKeeper. ZooKeeper's own consensus decides who is primary: of
 *    two members creating the primary znode, one gets ZNODEEXISTS.
 * 2. A position (optime) is {ts, t}: for a secondary the clusterTime of the last event it
 *    applied from its primary's change stream and that primary's term; for a primary its
 *    term and the time of its last look at ZooKeeper. Positions compare by t, then ts.
 * 3. Elections: a member stands when no primary znode exists, it is electable (priority
 *    > 0, votes > 0, not an arbiter, not RECOVERING), and a majority of the voting members
 *    (itself included) have published positions no newer than its own. Among the
 *    electable live members, one with a newer position, or the same position and a higher
 *    priority (then a lower _id), goes first: the others wait for it up to
 *    STAND_WAIT_MS after the primary vanished. A candidate stops its applier first (what
 *    it had fetched is applied), raises the term (compare-and-set), then creates the
 *    primary znode with its own session.
 * 4. The lease. The ZooKeeper server expires a session only after hearing nothing from it
 *    for the session timeout S (= the set's settings.electionTimeoutMillis, within the
 *    server's 2..20 ticks), and only then can its ephemeral primary znode vanish and
 *    another member be elected. The primary reads its znode every tick; a read that
 *    succeeds proves the session was alive when the request was sent, at t0, so no other
 *    primary can exist before t0 + S. The lease is t0 + S/2 (the other half is margin for
 *    clock rates and a late reply): writes are accepted only while now < lease. A lost
 *    session, a primary znode that is not ours or a higher term close the gate at once;
 *    a ZooKeeper that does not answer lets the lease run out by itself. The gate is
 *    asked at the start and again at the commit of every write transaction (store.h), so
 *    a write that straddles the lease's end is not committed.
 * 5. The write gate (store_set_write_gate) refuses with DFS_EROFS and "not primary (10107
 *    NotWritablePrimary): the primary is member N at ADDR": EROFS on the mount, 10107 on
 *    the wire. The applier's thread passes it (store_thread_gate_pass).
 * 6. Write concern positions go through ZooKeeper, not a direct report: a secondary
 *    publishes, beside its optime, the clusterTime of the last event it applied in each
 *    database ("dbs", the RS_DBPOS most recently written), because clusterTimes grow only
 *    within a database (store/changes.c note 1): a global position would let an event of
 *    another database, made later with a smaller time, look applied. A write on database D
 *    is acknowledged by a member once that member follows us and its D position is at
 *    least the newest event of D when the write returned (later events make the wait a
 *    little longer, never shorter). A secondary publishes at once when its position moves
 *    (it pokes its loop, at most one look at ZooKeeper per MIN_TICK_MS), and the primary
 *    looks as often while a writer waits: a w: "majority" write costs a getMore's wake-up
 *    (the primary's stream polls every 100 ms) and two ZooKeeper round trips, not a
 *    replSetUpdatePosition exchange; fast enough for acknowledgements, and one way for
 *    positions to travel. A member whose table holds RS_DBPOS databases and not D counts
 *    for D by its global optime (an approximation only past that many databases).
 *    The table is emptied when the member starts following another primary: times of
 *    another history say nothing of this one.
 * 7. replSetStepDown: the primary closes its gate (stepping: writes are refused, and one
 *    that began before is refused at its commit) and publishes a round number. A
 *    secondary that sees the round notes when it saw it; the first time its applier then
 *    asks the primary for events and gets none (rs_node_idle with a start after that
 *    moment), it has applied everything the primary committed before the gate closed, and
 *    publishes caughtUp: round. No clocks are compared between hosts. Once an electable
 *    secondary is caught up (or force), the loop deletes the primary znode, the member
 *    steps down and is frozen for stepDownSecs: it does not stand, and the others do not
 *    wait for it (it publishes frozen), so the caught-up member is elected. None caught up
 *    within secondaryCatchUpPeriodSecs: 262 ExceededTimeLimit, the gate opens again.
 *    replSetFreeze sets the same frozen time on a secondary (0 unfreezes).
 * 8. Default write concern: over the wire MongoDB's implicit default, w: "majority"
 *    (provenance implicitDefault); for the mount's files -o w= (default w: 1, the file's
 *    close returns once it is met). w: N counts data-bearing members (the primary
 *    included), "majority" voting ones (writeMajorityCount), a custom mode of
 *    settings.getLastErrorModes {tag: k, ...} needs, for each tag, k distinct values of it
 *    among the members that have the write. j: true asks for nothing more: every
 *    acknowledged commit is in SQLite's journal already.
 *
 * Thread-safety: one thread runs the loop; the gate, hello and status take n->lock.
 */
#include "replset.h"

#include "fs_int.h"
#include "wire.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 100
#define MIN_TICK_MS 20	   /* note 6: the shortest time between two looks when poked */
#define STAND_WAIT_MS 2000 /* note 3 */

struct rs_node {
	struct store *s;	   /* Borrowed: the served store */
	char set[128];		   /* the set's name */
	char zkhosts[512];	   /* ZooKeeper's servers */
	char me[RS_HOST_MAX];	   /* our listen address, as rs.conf() names it */
	struct rs_zk *z;	   /* Owned: the session (loop thread only) */
	pthread_t th;		   /* the loop */
	bool stop;		   /* the loop should end (under lock) */
	pthread_mutex_t lock;	   /* guards what follows */
	struct rs_conf conf;	   /* the configuration in force */
	bool have_conf;		   /* conf is loaded */
	int my;			   /* our index in conf.m, -1: not a member */
	int state;		   /* enum rs_state */
	int64_t term;		   /* the term we are primary in, or follow */
	char primary[RS_HOST_MAX]; /* the primary's host ("": none known) */
	int primary_id;		   /* its _id */
	int64_t lease_until;	   /* monotonic ms: writes accepted before it (note 4) */
	struct rs_optime applied;  /* our position (note 2) */
	char why[200];		   /* RECOVERING's reason */
	struct rs_view view;	   /* what the last tick read of ZooKeeper */
	int64_t started;	   /* wall ms of the start */
	int64_t no_primary_since;  /* monotonic ms, 0: a primary is known */
	int64_t last_write_ms;	   /* wall ms of the last primary tick (lastWriteDate) */
	struct rs_apply *ap;	   /* Owned: the applier, NULL when none runs */
	char ap_host[RS_HOST_MAX]; /* whom it follows */
	int64_t ap_term;	   /*   in which term */
	pthread_cond_t seen;	   /* broadcast after each look at ZooKeeper (note 6) */
	pthread_cond_t wake;	   /* pokes the loop (note 6) */
	int pokes;		   /* pokes not yet answered */
	int waiters;		   /* writers waiting for a write concern */
	struct rs_dbpos dbs[RS_DBPOS]; /* our applied position per database (note 6) */
	int ndbs;
	int64_t frozen_until;  /* monotonic ms: we do not stand before it (note 7) */
	bool stepping;	       /* replSetStepDown runs: the gate is closed */
	bool hand_over;	       /* the loop should give up the primary znode */
	int64_t step_round;    /* the round we publish while stepping (0: none) */
	int64_t round_seen;    /* a secondary: the primary's round it saw, */
	int64_t round_seen_at; /*   when (monotonic ms), */
	int64_t caught_up;     /*   and the round it caught up in */
};

static struct rs_node *the_node; /* the daemon's one membership (hello, status) */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t rs_mono_ms(void)
{
	return mono_ms();
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *rs_state_name(int state)
{
	switch (state) {
	case RS_PRIMARY:
		return "PRIMARY";
	case RS_SECONDARY:
		return "SECONDARY";
	case RS_RECOVERING:
		return "RECOVERING";
	case RS_STARTUP2:
		return "STARTUP2";
	case RS_DOWN:
		return "DOWN";
	case RS_REMOVED:
		return "REMOVED";
	default:
		return "STARTUP";
	}
}

int rs_optime_cmp(const struct rs_optime *a, const struct rs_optime *b)
{
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* Wakes the loop for an early look at ZooKeeper (note 6); n->lock held. */
static void poke(struct rs_node *n)
{
	n->pokes++;
	pthread_cond_signal(&n->wake);
}

/* Waits on cond (n->lock held, the conds use CLOCK_MONOTONIC) until the monotonic time
 * until (ms) at most. */
static void wait_cond(struct rs_node *n, pthread_cond_t *cond, int64_t until)
{
	struct timespec ts;
	int64_t d = until - mono_ms();

	if (d <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += d / 1000;
	ts.tv_nsec += (d % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(cond, &n->lock, &ts);
}

/* ---- the gate (note 5) --------------------------------------------------------------- */

static int gate(void *ctx, struct dfs_err *err)
{
	struct rs_node *n = ctx;
	int rc = 0;

	pthread_mutex_lock(&n->lock);
	if (n->state == RS_PRIMARY && n->stepping)
		rc = dfs_err_set(
			err, DFS_EROFS,
			"not primary (10107 NotWritablePrimary): member %d at %s is stepping "
			"down",
			n->primary_id, n->me);
	else if (n->state == RS_PRIMARY && mono_ms() < n->lease_until)
		rc = 0;
	else if (n->primary[0] && (n->state != RS_PRIMARY || strcmp(n->primary, n->me)))
		rc = dfs_err_set(err, DFS_EROFS,
				 "not primary (10107 NotWritablePrimary): the primary is member "
				 "%d at %s",
				 n->primary_id, n->primary);
	else
		rc = dfs_err_set(err, DFS_EROFS,
				 "not primary (10107 NotWritablePrimary): replica set %s has no "
				 "primary now",
				 n->set);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

/* ---- what ZooKeeper shows (note 1) ---------------------------------------------------- */

struct view_read {
	struct rs_zk *z;
	const char *set;
	struct rs_view *v;
};

static void read_optime(const bson_t *d, struct rs_optime *o)
{
	bson_iter_t it, f;

	o->ts = 0;
	o->t = 0;
	if (bson_iter_init(&it, d) && bson_iter_find_descendant(&it, "optime.ts", &f) &&
	    BSON_ITER_HOLDS_TIMESTAMP(&f)) {
		uint32_t t, i;

		bson_iter_timestamp(&f, &t, &i);
		o->ts = (uint64_t)t << 32 | i;
	}
	if (bson_iter_init(&it, d) && bson_iter_find_descendant(&it, "optime.t", &f))
		o->t = bson_iter_as_int64(&f);
}

static void read_str(const bson_t *d, const char *key, char *out, size_t cap)
{
	bson_iter_t it;

	out[0] = '\0';
	if (bson_iter_init_find(&it, d, key) && BSON_ITER_HOLDS_UTF8(&it))
		snprintf(out, cap, "%s", bson_iter_utf8(&it, NULL));
}

static int view_one(void *ctx, const char *name)
{
	struct view_read *r = ctx;
	struct rs_seen *m;
	char path[400];
	bson_t d;
	bson_iter_t it;

	if (r->v->n == RS_MAX_MEMBERS)
		return 0;
	snprintf(path, sizeof(path), "/docfs/rs/%s/members/%s", r->set, name);
	if (rs_zk_get(r->z, path, &d, NULL, NULL, NULL)) {
		bson_destroy(&d);
		return 0; /* gone meanwhile */
	}
	m = &r->v->m[r->v->n++];
	memset(m, 0, sizeof(*m));
	m->id = atoi(name);
	read_str(&d, "host", m->host, sizeof(m->host));
	read_str(&d, "syncSourceHost", m->sync, sizeof(m->sync));
	read_str(&d, "infoMessage", m->why, sizeof(m->why));
	if (bson_iter_init_find(&it, &d, "state"))
		m->state = (int)bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, &d, "lastHeartbeat") && BSON_ITER_HOLDS_DATE_TIME(&it))
		m->beat_ms = bson_iter_date_time(&it);
	read_optime(&d, &m->op);
	if (bson_iter_init_find(&it, &d, "frozen"))
		m->frozen = bson_iter_as_bool(&it);
	if (bson_iter_init_find(&it, &d, "stepDown"))
		m->step_down = bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, &d, "caughtUp"))
		m->caught_up = bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, &d, "dbs") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_t db;

		bson_iter_recurse(&it, &db);
		while (m->ndbs < RS_DBPOS && bson_iter_next(&db))
			if (BSON_ITER_HOLDS_TIMESTAMP(&db)) {
				struct rs_dbpos *p = &m->dbs[m->ndbs++];
				uint32_t t, i;

				snprintf(p->db, sizeof(p->db), "%s", bson_iter_key(&db));
				bson_iter_timestamp(&db, &t, &i);
				p->ts = (uint64_t)t << 32 | i;
			}
	}
	bson_destroy(&d);
	return 0;
}

int rs_view_read(struct rs_zk *z, const char *set, struct rs_view *v, struct dfs_err *err)
{
	struct view_read r = {z, set, v};
	char path[300];
	bson_t d;
	bson_iter_t it;
	int rc;

	memset(v, 0, sizeof(*v));
	snprintf(path, sizeof(path), "/docfs/rs/%s/primary", set);
	rc = rs_zk_get(z, path, &d, &v->primary_version, &v->primary_owner, err);
	if (!rc) {
		v->has_primary = true;
		read_str(&d, "host", v->primary, sizeof(v->primary));
		if (bson_iter_init_find(&it, &d, "term"))
			v->primary_term = bson_iter_as_int64(&it);
		if (bson_iter_init_find(&it, &d, "_id"))
			v->primary_id = (int)bson_iter_as_int64(&it);
	} else if (rc != DFS_ENOENT) {
		bson_destroy(&d);
		return rc;
	}
	bson_destroy(&d);
	if (err)
		dfs_err_clear(err);
	snprintf(path, sizeof(path), "/docfs/rs/%s/members", set);
	rc = rs_zk_children(z, path, view_one, &r, err);
	if (rc == DFS_ENOENT) {
		if (err)
			dfs_err_clear(err);
		rc = 0;
	}
	return rc;
}

static const struct rs_seen *seen_of(const struct rs_view *v, int id)
{
	for (int i = 0; i < v->n; i++)
		if (v->m[i].id == id)
			return &v->m[i];
	return NULL;
}

static void append_optime(bson_t *b, const char *key, const struct rs_optime *o)
{
	bson_t sub;

	BSON_APPEND_DOCUMENT_BEGIN(b, key, &sub);
	BSON_APPEND_TIMESTAMP(&sub, "ts", (uint32_t)(o->ts >> 32), (uint32_t)o->ts);
	BSON_APPEND_INT64(&sub, "t", o->t);
	bson_append_document_end(b, &sub);
}

static int majority_of(const struct rs_conf *c)
{
	int voters = 0;

	for (int i = 0; i < c->n; i++)
		voters += c->m[i].votes > 0;
	return voters / 2 + 1;
}

void rs_status_build(const struct rs_conf *c, const struct rs_view *v, const char *self,
		     bson_t *out)
{
	const struct rs_seen *me = NULL;
	bson_t arr, opt;
	int my_state = RS_DOWN;

	for (int i = 0; i < c->n; i++)
		if (self && !strcmp(c->m[i].host, self))
			me = seen_of(v, c->m[i].id);
	if (me)
		my_state = me->state;
	BSON_APPEND_UTF8(out, "set", c->name);
	BSON_APPEND_DATE_TIME(out, "date", wall_ms());
	BSON_APPEND_INT32(out, "myState", my_state);
	BSON_APPEND_INT64(out, "term", v->primary_term);
	BSON_APPEND_UTF8(out, "syncSourceHost", me ? me->sync : "");
	BSON_APPEND_INT32(out, "heartbeatIntervalMillis", 2000);
	BSON_APPEND_INT32(out, "majorityVoteCount", majority_of(c));
	BSON_APPEND_INT32(out, "writeMajorityCount", majority_of(c));
	if (me) {
		BSON_APPEND_DOCUMENT_BEGIN(out, "optimes", &opt);
		append_optime(&opt, "appliedOpTime", &me->op);
		append_optime(&opt, "durableOpTime", &me->op);
		bson_append_document_end(out, &opt);
	}
	BSON_APPEND_ARRAY_BEGIN(out, "members", &arr);
	for (int i = 0; i < c->n; i++) {
		const struct rs_seen *m = seen_of(v, c->m[i].id);
		int state = m ? m->state : RS_DOWN;
		bson_t one;
		char key[16];

		if (m && state == RS_PRIMARY &&
		    (!v->has_primary || strcmp(v->primary, c->m[i].host)))
			state = RS_SECONDARY; /* a member that still says so but is not */
		snprintf(key, sizeof(key), "%d", i);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &one);
		BSON_APPEND_INT32(&one, "_id", c->m[i].id);
		BSON_APPEND_UTF8(&one, "name", c->m[i].host);
		BSON_APPEND_DOUBLE(&one, "health", m ? 1.0 : 0.0);
		BSON_APPEND_INT32(&one, "state", state);
		BSON_APPEND_UTF8(&one, "stateStr", rs_state_name(state));
		if (m) {
			append_optime(&one, "optime", &m->op);
			BSON_APPEND_DATE_TIME(&one, "optimeDate", (int64_t)(m->op.ts >> 32) * 1000);
			BSON_APPEND_DATE_TIME(&one, "lastHeartbeat", m->beat_ms);
			BSON_APPEND_UTF8(&one, "syncSourceHost", m->sync);
			BSON_APPEND_UTF8(&one, "infoMessage", m->why);
		}
		BSON_APPEND_INT64(&one, "configVersion", c->version);
		if (self && !strcmp(c->m[i].host, self))
			BSON_APPEND_BOOL(&one, "self", true);
		bson_append_document_end(&arr, &one);
	}
	bson_append_array_end(out, &arr);
}

/* ---- hello, replSetGetStatus, replSetGetConfig ---------------------------------------- */

static bool hello(bson_t *reply)
{
	struct rs_node *n = the_node;
	bool writable;

	pthread_mutex_lock(&n->lock);
	writable = n->state == RS_PRIMARY && !n->stepping && mono_ms() < n->lease_until;
	if (!n->have_conf) {
		BSON_APPEND_BOOL(reply, "secondary", false);
		BSON_APPEND_BOOL(reply, "isreplicaset", true);
		BSON_APPEND_UTF8(reply, "info", "Does not have a valid replica set config");
		pthread_mutex_unlock(&n->lock);
		return false;
	}
	const struct rs_conf *c = &n->conf;
	bson_t hosts, passives, arbiters, lw;
	int nh = 0, np = 0, na = 0;
	char key[16];

	BSON_APPEND_UTF8(reply, "setName", c->name);
	BSON_APPEND_INT32(reply, "setVersion", (int32_t)c->version);
	/* hosts: the electable members; passives: priority 0 (hidden ones in neither) */
	for (int pass = 0; pass < 2; pass++) {
		bson_t *arr = pass ? &passives : &hosts;
		int *k = pass ? &np : &nh;

		BSON_APPEND_ARRAY_BEGIN(reply, pass ? "passives" : "hosts", arr);
		for (int i = 0; i < c->n; i++) {
			if (c->m[i].hidden || c->m[i].arbiter || (c->m[i].priority > 0) == pass)
				continue;
			snprintf(key, sizeof(key), "%d", (*k)++);
			BSON_APPEND_UTF8(arr, key, c->m[i].host);
		}
		bson_append_array_end(reply, arr);
	}
	BSON_APPEND_ARRAY_BEGIN(reply, "arbiters", &arbiters);
	for (int i = 0; i < c->n; i++)
		if (c->m[i].arbiter) {
			snprintf(key, sizeof(key), "%d", na++);
			BSON_APPEND_UTF8(&arbiters, key, c->m[i].host);
		}
	bson_append_array_end(reply, &arbiters);
	if (n->primary[0])
		BSON_APPEND_UTF8(reply, "primary", n->primary);
	BSON_APPEND_UTF8(reply, "me", n->me);
	BSON_APPEND_BOOL(reply, "secondary", n->state == RS_SECONDARY);
	if (n->my >= 0 && c->m[n->my].hidden)
		BSON_APPEND_BOOL(reply, "hidden", true);
	if (writable) {
		/* MongoDB's electionId: 0x7fffffff then the term, so it grows with the term */
		uint8_t b[12] = {0x7f, 0xff, 0xff, 0xff};
		bson_oid_t oid;

		for (int i = 0; i < 8; i++)
			b[4 + i] = (uint8_t)((uint64_t)n->term >> (56 - 8 * i));
		bson_oid_init_from_data(&oid, b);
		BSON_APPEND_OID(reply, "electionId", &oid);
	}
	BSON_APPEND_DOCUMENT_BEGIN(reply, "lastWrite", &lw);
	append_optime(&lw, "opTime", &n->applied);
	BSON_APPEND_DATE_TIME(&lw, "lastWriteDate", (int64_t)(n->applied.ts >> 32) * 1000);
	bson_append_document_end(reply, &lw);
	pthread_mutex_unlock(&n->lock);
	return writable;
}

/* Waits on n->seen (n->lock held) until the monotonic time until at most. */
static void wait_seen(struct rs_node *n, int64_t until)
{
	wait_cond(n, &n->seen, until);
}

/* An electable secondary that caught up in round (note 7); n->lock held. */
static bool caught_up(struct rs_node *n, int64_t round)
{
	for (int i = 0; i < n->conf.n; i++) {
		const struct rs_member *m = &n->conf.m[i];
		const struct rs_seen *s = seen_of(&n->view, m->id);

		if (i != n->my && s && s->caught_up == round && s->state == RS_SECONDARY &&
		    !s->frozen && m->priority > 0 && m->votes > 0 && !m->arbiter)
			return true;
	}
	return false;
}

/* A number argument of the command (def when absent): 0, or 2 BadValue / 14 TypeMismatch. */
static int arg_secs(struct wire_ctx *c, const char *key, int64_t def, int64_t *out)
{
	bson_iter_t it;

	*out = def;
	if (!bson_iter_init_find(&it, c->cmd, key))
		return 0;
	if (!BSON_ITER_HOLDS_NUMBER(&it))
		return wire_fail(c, 14, "TypeMismatch", "'%s' must be a number", key);
	*out = bson_iter_as_int64(&it);
	if (*out < 0)
		return wire_fail(c, 2, "BadValue", "'%s' must be non-negative", key);
	return 0;
}

/* replSetStepDown: {replSetStepDown: secs (60), secondaryCatchUpPeriodSecs (10), force}
 * (note 7). Called with n->lock held; returns with it held. */
static int step_down_cmd(struct rs_node *n, struct wire_ctx *c)
{
	int64_t secs, catch_s, until, round;
	bool force = false, found;
	bson_iter_t it;
	int rc;

	if (bson_iter_init_find(&it, c->cmd, c->name) && BSON_ITER_HOLDS_NUMBER(&it))
		secs = bson_iter_as_int64(&it);
	else if (bson_iter_init_find(&it, c->cmd, c->name) && !BSON_ITER_HOLDS_BOOL(&it))
		return wire_fail(c, 14, "TypeMismatch", "stepdown period must be a number");
	else
		secs = 60;
	if ((rc = arg_secs(c, "secondaryCatchUpPeriodSecs", 10, &catch_s)))
		return rc;
	if (bson_iter_init_find(&it, c->cmd, "force"))
		force = bson_iter_as_bool(&it);
	if (secs < 1)
		return wire_fail(c, 2, "BadValue", "stepdown period must be a positive integer");
	if (catch_s > secs)
		return wire_fail(c, 2, "BadValue",
				 "stepdown period must be longer than secondaryCatchUpPeriodSecs");
	if (n->state != RS_PRIMARY)
		return wire_fail(c, 10107, "NotWritablePrimary", "not primary so can't step down");
	if (n->stepping)
		return wire_fail(c, 117, "ConflictingOperationInProgress",
				 "a replSetStepDown is already running on %s", n->me);
	n->stepping = true;
	round = n->step_round = wall_ms(); /* distinct from any earlier round of ours */
	poke(n);
	until = mono_ms() + catch_s * 1000;
	while (!(found = caught_up(n, round)) && n->state == RS_PRIMARY && !n->stop &&
	       mono_ms() < until)
		wait_seen(n, until);
	if (n->state != RS_PRIMARY) { /* lost it meanwhile: stepped down all the same */
		n->stepping = false;
		n->frozen_until = mono_ms() + secs * 1000;
		return 0;
	}
	if (!found && !force) {
		char date[64];
		time_t now = time(NULL);
		struct tm tm;

		n->stepping = false;
		gmtime_r(&now, &tm);
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
		return wire_fail(c, 262, "ExceededTimeLimit",
				 "No electable secondaries caught up as of %s. Please use the "
				 "replSetStepDown command with the argument {force: true} to force "
				 "node to step down.",
				 date);
	}
	n->frozen_until = mono_ms() + secs * 1000;
	n->hand_over = true;
	poke(n);
	until = mono_ms() + 5000;
	while (n->state == RS_PRIMARY && !n->stop && mono_ms() < until)
		wait_seen(n, until);
	n->stepping = false;
	n->hand_over = false;
	if (n->state == RS_PRIMARY)
		return wire_fail(c, 262, "ExceededTimeLimit",
				 "could not give up the primary's place in ZooKeeper in time");
	return 0;
}

/* replSetFreeze: {replSetFreeze: secs}; 0 unfreezes (note 7). n->lock held. */
static int freeze_cmd(struct rs_node *n, struct wire_ctx *c, bson_t *reply)
{
	bson_iter_t it;
	int64_t secs;

	if (!bson_iter_init_find(&it, c->cmd, c->name) || !BSON_ITER_HOLDS_NUMBER(&it))
		return wire_fail(c, 14, "TypeMismatch", "replSetFreeze needs a number of seconds");
	secs = bson_iter_as_int64(&it);
	if (secs < 0)
		return wire_fail(c, 2, "BadValue", "replSetFreeze needs a non-negative number");
	if (n->state == RS_PRIMARY)
		return wire_fail(c, 95, "NotSecondary",
				 "cannot freeze node when primary or running for election. state: "
				 "Primary");
	if (secs == 0) {
		n->frozen_until = 0;
		BSON_APPEND_UTF8(reply, "info", "unfreezing");
	} else {
		n->frozen_until = mono_ms() + secs * 1000;
		if (secs == 1)
			BSON_APPEND_UTF8(reply, "warning",
					 "you really want to freeze for only 1 second?");
	}
	poke(n);
	return 0;
}

static int command(struct wire_ctx *c, bson_t *reply)
{
	struct rs_node *n = the_node;

	pthread_mutex_lock(&n->lock);
	if (!n->have_conf) {
		pthread_mutex_unlock(&n->lock);
		return wire_fail(c, 94, "NotYetInitialized", "no replset config has been received");
	}
	if (!strcmp(c->name, "replSetStepDown") || !strcmp(c->name, "replSetFreeze")) {
		int rc = !strcmp(c->name, "replSetFreeze") ? freeze_cmd(n, c, reply)
							   : step_down_cmd(n, c);

		pthread_mutex_unlock(&n->lock);
		return rc;
	}
	if (!strcmp(c->name, "replSetGetConfig")) {
		bson_t cfg;

		BSON_APPEND_DOCUMENT_BEGIN(reply, "config", &cfg);
		bson_copy_to_excluding_noinit(&n->conf.doc, &cfg, "term", NULL);
		BSON_APPEND_INT64(&cfg, "term", n->term);
		bson_append_document_end(reply, &cfg);
	} else {
		rs_status_build(&n->conf, &n->view, n->me, reply);
	}
	pthread_mutex_unlock(&n->lock);
	return 0;
}

bool rs_node_active(void)
{
	return the_node != NULL;
}

int rs_node_doc(const char *what, bson_t *out)
{
	struct wire_ctx c = {0};

	if (!the_node)
		return DFS_ENOENT;
	if (!strcmp(what, "hello")) {
		bool w;
		bson_t rest = BSON_INITIALIZER;

		w = hello(&rest);
		BSON_APPEND_BOOL(out, "isWritablePrimary", w);
		bson_concat(out, &rest);
		bson_destroy(&rest);
		return 0;
	}
	if (!strcmp(what, "conf")) { /* rs.conf(): the configuration itself */
		pthread_mutex_lock(&the_node->lock);
		if (the_node->have_conf)
			bson_concat(out, &the_node->conf.doc);
		pthread_mutex_unlock(&the_node->lock);
		return 0;
	}
	c.name = "replSetGetStatus";
	if (command(&c, out)) {
		BSON_APPEND_DOUBLE(out, "ok", 0.0);
		BSON_APPEND_UTF8(out, "errmsg", c.errmsg);
		BSON_APPEND_INT32(out, "code", c.code);
		BSON_APPEND_UTF8(out, "codeName", c.code_name);
	}
	return 0;
}

/* ---- what the applier reports (apply.c) ----------------------------------------------- */

void rs_node_applied(struct rs_node *n, const struct rs_optime *op)
{
	pthread_mutex_lock(&n->lock);
	if (rs_optime_cmp(op, &n->applied) > 0)
		n->applied = *op;
	pthread_mutex_unlock(&n->lock);
}

void rs_node_applied_db(struct rs_node *n, const char *db, uint64_t ts)
{
	int i, oldest = 0;

	if (!db || !db[0])
		return;
	pthread_mutex_lock(&n->lock);
	for (i = 0; i < n->ndbs && strcmp(n->dbs[i].db, db); i++)
		if (n->dbs[i].ts < n->dbs[oldest].ts)
			oldest = i;
	if (i == n->ndbs) {
		if (n->ndbs < RS_DBPOS)
			n->ndbs++;
		else
			i = oldest; /* the database written longest ago makes room */
		snprintf(n->dbs[i].db, sizeof(n->dbs[i].db), "%s", db);
		n->dbs[i].ts = 0;
	}
	if (ts > n->dbs[i].ts)
		n->dbs[i].ts = ts;
	poke(n);
	pthread_mutex_unlock(&n->lock);
}

void rs_node_idle(struct rs_node *n, int64_t t0)
{
	pthread_mutex_lock(&n->lock);
	if (n->round_seen && n->caught_up != n->round_seen && t0 > n->round_seen_at) {
		n->caught_up = n->round_seen;
		poke(n);
	}
	pthread_mutex_unlock(&n->lock);
}

void rs_node_recovering(struct rs_node *n, const char *why)
{
	pthread_mutex_lock(&n->lock);
	if (n->state != RS_PRIMARY) {
		n->state = RS_RECOVERING;
		snprintf(n->why, sizeof(n->why), "%s", why);
	}
	pthread_mutex_unlock(&n->lock);
	fs_errlog_add("replica set %s: RECOVERING: %s", n->set, why);
}

/* ---- write concern (notes 6, 8) --------------------------------------------------------- */

static void wc_fail(struct rs_wc_fail *f, int code, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void wc_fail(struct rs_wc_fail *f, int code, const char *name, const char *fmt, ...)
{
	va_list ap;

	f->code = code;
	f->code_name = name;
	f->wtimeout = false;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
}

/* The mode's document {tag: count, ...} in settings.getLastErrorModes into out (a view
 * into c->doc); false when there is no such mode. */
static bool find_mode(const struct rs_conf *c, const char *mode, bson_t *out)
{
	bson_iter_t it, f;
	const uint8_t *data;
	uint32_t len;
	char path[200];

	snprintf(path, sizeof(path), "settings.getLastErrorModes.%s", mode);
	if (strchr(mode, '.') || !bson_iter_init(&it, &c->doc) ||
	    !bson_iter_find_descendant(&it, path, &f) || !BSON_ITER_HOLDS_DOCUMENT(&f))
		return false;
	bson_iter_document(&f, &len, &data);
	return bson_init_static(out, data, len);
}

/* Member i's value of tag (NULL: none); Borrowed from c->doc. */
static const char *tag_of(const struct rs_conf *c, int i, const char *tag)
{
	bson_iter_t it, f;
	char path[300];

	snprintf(path, sizeof(path), "members.%d.tags.%s", i, tag);
	if (bson_iter_init(&it, &c->doc) && bson_iter_find_descendant(&it, path, &f) &&
	    BSON_ITER_HOLDS_UTF8(&f))
		return bson_iter_utf8(&f, NULL);
	return NULL;
}

/* Whether the members marked in has[] (indexes of c->m) meet wc (the mode checked). */
static bool wc_met(const struct rs_conf *c, const struct rs_wc *wc, const bool *has)
{
	int n = 0, voters = 0;
	bson_t mode;
	bson_iter_t it;

	if (!wc->mode[0]) {
		for (int i = 0; i < c->n; i++)
			n += has[i];
		return n >= wc->w;
	}
	if (!strcmp(wc->mode, "majority")) {
		for (int i = 0; i < c->n; i++)
			voters += has[i] && c->m[i].votes > 0;
		return voters >= majority_of(c);
	}
	if (!find_mode(c, wc->mode, &mode) || !bson_iter_init(&it, &mode))
		return false;
	while (bson_iter_next(&it)) { /* each tag: that many distinct values among has[] */
		const char *tag = bson_iter_key(&it);
		int64_t want = bson_iter_as_int64(&it), distinct = 0;

		for (int i = 0; i < c->n; i++) {
			const char *v = has[i] ? tag_of(c, i, tag) : NULL;
			bool before = false;

			for (int j = 0; v && j < i; j++) {
				const char *w = has[j] ? tag_of(c, j, tag) : NULL;

				before = before || (w && !strcmp(w, v));
			}
			distinct += v && !before;
		}
		if (distinct < want)
			return false;
	}
	return true;
}

int rs_wc_check(const struct rs_wc *wc, struct rs_wc_fail *f)
{
	struct rs_node *n = the_node;
	bool all[RS_MAX_MEMBERS];
	bson_t mode;
	int rc = 0;

	if (!n || !n->have_conf) { /* MongoDB's standalone answers */
		if (!wc->mode[0] && wc->w > 1) {
			wc_fail(f, 2, "BadValue", "cannot use 'w' > 1 on a standalone");
			return 2;
		}
		if (wc->mode[0] && strcmp(wc->mode, "majority")) {
			wc_fail(f, 2, "BadValue",
				"cannot use non-majority 'w' mode \"%s\" when a host is not a "
				"member of a replica set",
				wc->mode);
			return 2;
		}
		return 0;
	}
	pthread_mutex_lock(&n->lock);
	if (wc->mode[0] && strcmp(wc->mode, "majority") && !find_mode(&n->conf, wc->mode, &mode)) {
		wc_fail(f, 79, "UnknownReplWriteConcern",
			"No write concern mode named '%s' found in replica set configuration",
			wc->mode);
		rc = 79;
	} else {
		/* every data-bearing member having it must be enough */
		for (int i = 0; i < n->conf.n; i++)
			all[i] = !n->conf.m[i].arbiter;
		if (!wc_met(&n->conf, wc, all)) {
			wc_fail(f, 100, "UnsatisfiableWriteConcern",
				"Not enough data-bearing nodes");
			rc = 100;
		}
	}
	pthread_mutex_unlock(&n->lock);
	return rc;
}

static int newest_cb(void *ctx, const struct store_event *e)
{
	*(uint64_t *)ctx = e->ts;
	return 1;
}

/* The clusterTime of db's newest event (0: none). */
static uint64_t newest_ts(struct store_db *db)
{
	struct store_events_span sp;
	struct store_txn *t;
	uint64_t ts = 0;

	if (store_txn_begin(db, false, &t, NULL))
		return 0;
	if (!store_events_span(t, NULL, &sp, NULL) && sp.last_seq > 0)
		store_events_list(t, NULL, sp.last_seq - 1, newest_cb, &ts, NULL);
	store_txn_abort(t);
	return ts;
}

/* Whether member s has applied the event of dbname at ts (note 6); n->lock held. */
static bool has_write(struct rs_node *n, const struct rs_seen *s, const char *dbname, uint64_t ts)
{
	if (strcmp(s->sync, n->me) || (s->state != RS_SECONDARY && s->state != RS_RECOVERING))
		return false;
	for (int i = 0; i < s->ndbs; i++)
		if (!strcmp(s->dbs[i].db, dbname))
			return s->dbs[i].ts >= ts;
	return s->ndbs == RS_DBPOS && s->op.ts >= ts;
}

uint64_t rs_wc_mark(struct store_db *db)
{
	return db && the_node ? newest_ts(db) : 0;
}

int rs_wc_wait(struct store_db *db, uint64_t before, const struct rs_wc *wc,
	       struct rs_wc_fail *f)
{
	struct rs_node *n = the_node;
	const char *dbname = store_db_name(db);
	uint64_t ts;
	int64_t deadline;
	int rc = 0;

	if (!n || (!wc->mode[0] && wc->w <= 1))
		return 0;
	ts = newest_ts(db);
	if (ts == before)
		return 0; /* no event since: nothing of this write to replicate */
	deadline = wc->wtimeout_ms > 0 ? mono_ms() + wc->wtimeout_ms : 0;
	pthread_mutex_lock(&n->lock);
	n->waiters++;
	poke(n);
	for (;;) {
		bool has[RS_MAX_MEMBERS] = {0};
		int64_t now = mono_ms(), wake = now + 1000;

		if (n->state != RS_PRIMARY || !n->have_conf) {
			wc_fail(f, 11602, "InterruptedDueToReplStateChange",
				"operation was interrupted because a replica set state change "
				"(%s is not primary now) happened while waiting for replication",
				n->me);
			rc = 11602;
			break;
		}
		for (int i = 0; i < n->conf.n; i++) {
			const struct rs_seen *s = seen_of(&n->view, n->conf.m[i].id);

			has[i] = i == n->my ||
				 (s && !n->conf.m[i].arbiter && has_write(n, s, dbname, ts));
		}
		if (wc_met(&n->conf, wc, has))
			break;
		if (deadline && now >= deadline) {
			wc_fail(f, 64, "WriteConcernFailed", "waiting for replication timed out");
			f->wtimeout = true;
			rc = 64;
			break;
		}
		if (deadline && deadline < wake)
			wake = deadline;
		wait_cond(n, &n->seen, wake);
	}
	n->waiters--;
	pthread_mutex_unlock(&n->lock);
	return rc;
}

/* An initial sync's state (initsync.c): STARTUP2 while it copies, then SECONDARY. */
void rs_node_startup2(struct rs_node *n, const char *progress)
{
	bool first;

	pthread_mutex_lock(&n->lock);
	first = n->state != RS_STARTUP2;
	if (n->state != RS_PRIMARY) {
		n->state = RS_STARTUP2;
		snprintf(n->why, sizeof(n->why), "%s", progress);
	}
	pthread_mutex_unlock(&n->lock);
	if (first)
		fs_errlog_add("replica set %s: STARTUP2: %s", n->set, progress);
}

void rs_node_synced(struct rs_node *n)
{
	pthread_mutex_lock(&n->lock);
	if (n->state == RS_STARTUP2) {
		n->state = RS_SECONDARY;
		n->why[0] = '\0';
	}
	pthread_mutex_unlock(&n->lock);
	fs_errlog_add("replica set %s: initial sync done: SECONDARY", n->set);
}

/* ---- the loop ------------------------------------------------------------------------- */

static void zpath(const struct rs_node *n, char *out, size_t cap, const char *leaf)
{
	snprintf(out, cap, "/docfs/rs/%s/%s", n->set, leaf);
}

static void stop_applier(struct rs_node *n)
{
	struct rs_apply *ap;

	pthread_mutex_lock(&n->lock);
	ap = n->ap;
	n->ap = NULL;
	pthread_mutex_unlock(&n->lock);
	rs_apply_stop(ap);
}

static void step_down(struct rs_node *n, const char *why)
{
	bool was;

	pthread_mutex_lock(&n->lock);
	was = n->state == RS_PRIMARY;
	if (was) {
		n->state = RS_SECONDARY;
		n->lease_until = 0;
	}
	pthread_mutex_unlock(&n->lock);
	if (was)
		fs_errlog_add("replica set %s: stepped down in term %" PRId64 ": %s", n->set,
			      n->term, why);
}

/* Reads the configuration; finds us in it. */
static void load_conf(struct rs_node *n)
{
	struct rs_conf c;
	bson_t stored;
	int version, my = -1;
	struct dfs_err err = {0};

	if (rs_zk_get_conf(n->z, n->set, &stored, &version, &err) ||
	    rs_conf_load(&stored, &c, &err)) {
		bson_destroy(&stored);
		return;
	}
	bson_destroy(&stored);
	for (int i = 0; i < c.n; i++)
		if (!strcmp(c.m[i].host, n->me))
			my = i;
	pthread_mutex_lock(&n->lock);
	if (n->have_conf && n->conf.version == c.version) {
		pthread_mutex_unlock(&n->lock);
		rs_conf_release(&c);
		return;
	}
	/* a bson_t is not copied by assignment (its small documents live inside it) */
	bson_destroy(&n->conf.doc);
	n->conf = c;
	bson_copy_to(&c.doc, &n->conf.doc);
	bson_destroy(&c.doc);
	n->have_conf = true;
	n->my = my;
	if (my < 0)
		n->state = RS_REMOVED;
	else if (n->state == RS_REMOVED || n->state == RS_STARTUP)
		n->state = RS_SECONDARY;
	pthread_mutex_unlock(&n->lock);
	if (my < 0)
		fs_errlog_add("replica set %s: %s is not in the configuration (version %" PRId64
			      ")",
			      n->set, n->me, c.version);
}

/* Publishes our state and position (note 1). */
static void publish(struct rs_node *n)
{
	char path[400], leaf[64];
	bson_t d = BSON_INITIALIZER;
	struct dfs_err err = {0};

	pthread_mutex_lock(&n->lock);
	snprintf(leaf, sizeof(leaf), "members/%d", n->conf.m[n->my].id);
	BSON_APPEND_INT32(&d, "_id", n->conf.m[n->my].id);
	BSON_APPEND_UTF8(&d, "host", n->me);
	BSON_APPEND_INT32(&d, "state", n->state);
	BSON_APPEND_UTF8(&d, "stateStr", rs_state_name(n->state));
	append_optime(&d, "optime", &n->applied);
	BSON_APPEND_DATE_TIME(&d, "lastHeartbeat", wall_ms());
	BSON_APPEND_UTF8(&d, "syncSourceHost", n->state == RS_PRIMARY ? "" : n->primary);
	BSON_APPEND_UTF8(&d, "infoMessage",
			 n->state == RS_RECOVERING || n->state == RS_STARTUP2 ? n->why : "");
	BSON_APPEND_BOOL(&d, "frozen", n->frozen_until > mono_ms());
	if (n->state == RS_PRIMARY && n->stepping)
		BSON_APPEND_INT64(&d, "stepDown", n->step_round);
	if (n->caught_up)
		BSON_APPEND_INT64(&d, "caughtUp", n->caught_up);
	{
		bson_t dbs;

		BSON_APPEND_DOCUMENT_BEGIN(&d, "dbs", &dbs);
		for (int i = 0; i < n->ndbs; i++)
			BSON_APPEND_TIMESTAMP(&dbs, n->dbs[i].db, (uint32_t)(n->dbs[i].ts >> 32),
					      (uint32_t)n->dbs[i].ts);
		bson_append_document_end(&d, &dbs);
	}
	pthread_mutex_unlock(&n->lock);
	zpath(n, path, sizeof(path), leaf);
	if (rs_zk_set(n->z, path, &d, -1, &err) == DFS_ENOENT) {
		dfs_err_clear(&err);
		rs_zk_create(n->z, path, &d, true, &err);
	}
	bson_destroy(&d);
}

/* Follows the primary: an applier for (host, term) (note 2). */
static void follow(struct rs_node *n, const struct rs_view *v)
{
	struct rs_apply *ap = NULL;
	struct dfs_err err = {0};
	bool same;

	pthread_mutex_lock(&n->lock);
	snprintf(n->primary, sizeof(n->primary), "%s", v->primary);
	n->primary_id = v->primary_id;
	n->term = v->primary_term;
	same = !strcmp(n->ap_host, v->primary) && n->ap_term == v->primary_term;
	if (same && (n->ap || n->state == RS_RECOVERING)) {
		/* following it, or it failed with this primary: stay RECOVERING */
		pthread_mutex_unlock(&n->lock);
		return;
	}
	pthread_mutex_unlock(&n->lock);
	stop_applier(n);
	bool copy = rs_sync_needed(n->s); /* the applier copies first: STARTUP2 from now */

	pthread_mutex_lock(&n->lock);
	n->state = copy ? RS_STARTUP2 : RS_SECONDARY;
	snprintf(n->why, sizeof(n->why), "%s", copy ? "initial sync: starting" : "");
	n->ndbs = 0; /* positions of another history say nothing of this one (note 6) */
	snprintf(n->ap_host, sizeof(n->ap_host), "%s", v->primary);
	n->ap_term = v->primary_term;
	pthread_mutex_unlock(&n->lock);
	if (copy)
		fs_errlog_add("replica set %s: STARTUP2: initial sync from %s", n->set, v->primary);
	if (rs_apply_start(n, n->s, v->primary, v->primary_term, &ap, &err))
		fs_errlog_add("replica set %s: cannot follow %s: %s", n->set, v->primary, err.msg);
	pthread_mutex_lock(&n->lock);
	n->ap = ap;
	pthread_mutex_unlock(&n->lock);
}

/* Whether we may stand now (note 3). */
static bool may_stand(struct rs_node *n, const struct rs_view *v, int64_t now)
{
	const struct rs_member *me;
	int votes_behind = 0;
	bool wait = false;

	pthread_mutex_lock(&n->lock);
	me = &n->conf.m[n->my];
	if (me->priority <= 0 || me->votes <= 0 || me->arbiter || n->state == RS_RECOVERING ||
	    n->state == RS_STARTUP2 || n->frozen_until > now) {
		pthread_mutex_unlock(&n->lock);
		return false;
	}
	for (int i = 0; i < n->conf.n; i++) {
		const struct rs_member *m = &n->conf.m[i];
		const struct rs_seen *s = seen_of(v, m->id);
		struct rs_optime op;
		int cmp;

		if (i == n->my) {
			votes_behind += m->votes > 0;
			continue;
		}
		if (!s)
			continue;
		op = s->op;
		cmp = rs_optime_cmp(&op, &n->applied);
		if (cmp <= 0 && m->votes > 0)
			votes_behind++;
		if (m->priority > 0 && !m->arbiter && s->state != RS_RECOVERING && !s->frozen &&
		    s->state != RS_STARTUP2 &&
		    (cmp > 0 || (cmp == 0 && (m->priority > me->priority ||
					      (m->priority == me->priority && m->id < me->id)))))
			wait = true;
	}
	pthread_mutex_unlock(&n->lock);
	if (votes_behind < majority_of(&n->conf))
		return false;
	return !wait || now - n->no_primary_since >= STAND_WAIT_MS;
}

static void elect(struct rs_node *n, int64_t t0)
{
	char tpath[300], ppath[300];
	struct dfs_err err = {0};
	bson_t d, p = BSON_INITIALIZER, nt = BSON_INITIALIZER;
	bson_iter_t it;
	int64_t term = 0;
	int version = -1, rc;

	stop_applier(n); /* what it fetched is applied: our position is final */
	zpath(n, tpath, sizeof(tpath), "term");
	zpath(n, ppath, sizeof(ppath), "primary");
	rc = rs_zk_get(n->z, tpath, &d, &version, NULL, &err);
	if (!rc && bson_iter_init_find(&it, &d, "term"))
		term = bson_iter_as_int64(&it);
	bson_destroy(&d);
	if (rc && rc != DFS_ENOENT)
		goto done;
	pthread_mutex_lock(&n->lock);
	if (n->term > term)
		term = n->term;
	pthread_mutex_unlock(&n->lock);
	term++;
	BSON_APPEND_INT64(&nt, "term", term);
	dfs_err_clear(&err);
	rc = rc == DFS_ENOENT ? rs_zk_create(n->z, tpath, &nt, false, &err)
			      : rs_zk_set(n->z, tpath, &nt, version, &err);
	if (rc)
		goto done; /* another candidate raised it first */
	BSON_APPEND_INT32(&p, "_id", n->conf.m[n->my].id);
	BSON_APPEND_UTF8(&p, "host", n->me);
	BSON_APPEND_INT64(&p, "term", term);
	if (rs_zk_create(n->z, ppath, &p, true, &err))
		goto done;
	pthread_mutex_lock(&n->lock);
	n->state = RS_PRIMARY;
	n->term = term;
	n->lease_until = t0 + rs_zk_timeout(n->z) / 2;
	snprintf(n->primary, sizeof(n->primary), "%s", n->me);
	n->primary_id = n->conf.m[n->my].id;
	n->applied.t = term;
	n->no_primary_since = 0;
	pthread_mutex_unlock(&n->lock);
	fs_errlog_add("replica set %s: %s elected primary in term %" PRId64, n->set, n->me, term);
done:
	bson_destroy(&p);
	bson_destroy(&nt);
}

/* One look at ZooKeeper (notes 3, 4). */
static void tick(struct rs_node *n)
{
	struct rs_view v;
	struct dfs_err err = {0};
	int64_t t0 = mono_ms();
	int64_t session = rs_zk_session(n->z);

	load_conf(n);
	if (!n->have_conf || n->my < 0) {
		step_down(n, "not a member of the configuration");
		return;
	}
	if (rs_view_read(n->z, n->set, &v, &err))
		return; /* ZooKeeper did not answer: a primary's lease runs out by itself */
	pthread_mutex_lock(&n->lock);
	n->view = v;
	pthread_cond_broadcast(&n->seen);
	if (v.has_primary && strcmp(v.primary, n->me)) { /* the primary's step-down round */
		for (int i = 0; i < v.n; i++)
			if (!strcmp(v.m[i].host, v.primary) && v.m[i].step_down &&
			    v.m[i].step_down != n->round_seen) {
				n->round_seen = v.m[i].step_down;
				n->round_seen_at = mono_ms();
			}
	}
	bool hand_over = n->hand_over && n->state == RS_PRIMARY;
	pthread_mutex_unlock(&n->lock);
	if (hand_over && v.has_primary && v.primary_owner == session) {
		char ppath[300];

		/* note 7: a caught-up member takes over; we stay frozen meanwhile */
		zpath(n, ppath, sizeof(ppath), "primary");
		step_down(n, "replSetStepDown");
		rs_zk_delete(n->z, ppath, v.primary_version, NULL);
		pthread_mutex_lock(&n->lock);
		n->hand_over = false;
		n->stepping = false;
		n->primary[0] = '\0';
		pthread_cond_broadcast(&n->seen);
		pthread_mutex_unlock(&n->lock);
		n->no_primary_since = t0;
	} else if (v.has_primary && v.primary_owner == session && n->state == RS_PRIMARY &&
		   v.primary_term == n->term) {
		pthread_mutex_lock(&n->lock);
		n->lease_until = t0 + rs_zk_timeout(n->z) / 2;
		n->applied.t = n->term;
		n->applied.ts = (uint64_t)(wall_ms() / 1000) << 32;
		pthread_mutex_unlock(&n->lock);
	} else if (v.has_primary && !strcmp(v.primary, n->me) && v.primary_owner != session) {
		/* our own earlier life (a daemon killed before its session expired): its
		 * process is gone, since we hold its address, so its znode can go now */
		step_down(n, "the primary znode is an earlier session's");
		char ppath[300];

		zpath(n, ppath, sizeof(ppath), "primary");
		rs_zk_delete(n->z, ppath, v.primary_version, NULL);
	} else if (v.has_primary) {
		step_down(n, "another member is primary");
		n->no_primary_since = 0;
		follow(n, &v);
	} else {
		step_down(n, "the primary znode is gone");
		pthread_mutex_lock(&n->lock);
		n->primary[0] = '\0';
		pthread_mutex_unlock(&n->lock);
		if (!n->no_primary_since)
			n->no_primary_since = t0;
		if (may_stand(n, &v, t0))
			elect(n, t0);
	}
	publish(n);
}

/* The session timeout: settings.electionTimeoutMillis (note 4). */
static int session_ms(struct rs_node *n)
{
	bson_iter_t it, f;
	int ms = 10000;

	pthread_mutex_lock(&n->lock);
	if (n->have_conf && bson_iter_init(&it, &n->conf.doc) &&
	    bson_iter_find_descendant(&it, "settings.electionTimeoutMillis", &f))
		ms = (int)bson_iter_as_int64(&f);
	pthread_mutex_unlock(&n->lock);
	return ms > 0 ? ms : 10000;
}

static void *loop(void *arg)
{
	struct rs_node *n = arg;
	int timeout = 0;

	for (;;) {
		pthread_mutex_lock(&n->lock);
		bool stop = n->stop;
		pthread_mutex_unlock(&n->lock);

		if (stop)
			break;
		if (n->z && (rs_zk_expired(n->z) || timeout != session_ms(n))) {
			step_down(n, "its ZooKeeper session expired (or its timeout changed)");
			rs_zk_close(n->z);
			n->z = NULL;
		}
		if (!n->z) {
			struct dfs_err err = {0};

			timeout = session_ms(n);
			if (rs_zk_open(n->zkhosts, timeout, &n->z, &err)) {
				usleep(500 * 1000);
				continue;
			}
			char path[300];
			bson_t empty = BSON_INITIALIZER;

			zpath(n, path, sizeof(path), "members");
			rs_zk_create(n->z, "/docfs", &empty, false, NULL);
			rs_zk_create(n->z, "/docfs/rs", &empty, false, NULL);
			snprintf(path, sizeof(path), "/docfs/rs/%s", n->set);
			rs_zk_create(n->z, path, &empty, false, NULL);
			zpath(n, path, sizeof(path), "members");
			rs_zk_create(n->z, path, &empty, false, NULL);
			bson_destroy(&empty);
		}
		int64_t t0 = mono_ms();

		tick(n);
		/* the next look: after TICK_MS, or sooner when poked (note 6) */
		pthread_mutex_lock(&n->lock);
		while (!n->stop && !n->pokes && !n->waiters && mono_ms() < t0 + TICK_MS)
			wait_cond(n, &n->wake, t0 + TICK_MS);
		n->pokes = 0;
		pthread_mutex_unlock(&n->lock);
		if (mono_ms() < t0 + MIN_TICK_MS)
			usleep((useconds_t)(t0 + MIN_TICK_MS - mono_ms()) * 1000);
	}
	return NULL;
}

int rs_node_start(struct store *s, const char *set, const char *zk, const char *me,
		  struct rs_node **out, struct dfs_err *err)
{
	struct rs_node *n;
	struct rs_optime saved = {0};

	if (!set[0] || strlen(set) >= sizeof(n->set) || strchr(set, '/'))
		return dfs_err_set(err, DFS_EINVAL, "replset '%s': not a set name", set);
	if (!zk || !zk[0])
		return dfs_err_set(err, DFS_EINVAL, "replset=%s needs zk=HOST:PORT", set);
	if (!me || !me[0])
		return dfs_err_set(err, DFS_EINVAL,
				   "replset=%s needs a listen=ADDR: members are known by it", set);
	if (the_node)
		return dfs_err_set(err, DFS_EEXIST, "this daemon is a member already");
	if (!(n = calloc(1, sizeof(*n))))
		abort();
	n->s = s;
	snprintf(n->set, sizeof(n->set), "%s", set);
	snprintf(n->zkhosts, sizeof(n->zkhosts), "%s", zk);
	snprintf(n->me, sizeof(n->me), "%s", me);
	pthread_mutex_init(&n->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&n->wake, &ca);
		pthread_cond_init(&n->seen, &ca);
		pthread_condattr_destroy(&ca);
	}
	bson_init(&n->conf.doc);
	n->my = -1;
	n->started = wall_ms();
	rs_apply_saved(s, &saved);
	n->applied = saved;
	the_node = n;
	store_set_write_gate(s, gate, n);
	{
		char why[700];

		/* the command line, in other processes, bypasses this gate: it refuses too */
		snprintf(why, sizeof(why),
			 "not primary (10107 NotWritablePrimary): this store is served by member "
			 "%s of replica set %s (pid %d): write through the set's primary",
			 me, set, (int)getpid());
		if (store_mark_gate(s, why, err)) {
			store_set_write_gate(s, NULL, NULL);
			the_node = NULL;
			free(n);
			return DFS_EIO;
		}
	}
	wire_rs_hello = hello;
	wire_rs_command = command;
	if (pthread_create(&n->th, NULL, loop, n)) {
		store_set_write_gate(s, NULL, NULL);
		wire_rs_hello = NULL;
		wire_rs_command = NULL;
		the_node = NULL;
		free(n);
		return dfs_err_set(err, DFS_EIO, "cannot start the replica set thread");
	}
	*out = n;
	return 0;
}

void rs_node_stop(struct rs_node *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	n->stop = true;
	pthread_cond_signal(&n->wake);
	pthread_cond_broadcast(&n->seen);
	pthread_mutex_unlock(&n->lock);
	pthread_join(n->th, NULL);
	stop_applier(n);
	step_down(n, "the daemon is stopping");
	rs_zk_close(n->z); /* its ephemeral znodes go at once */
	n->z = NULL;
	store_unmark_gate(n->s);
	/* the configuration stays: a late hello still reads it */
	/* n itself is kept, and the hooks and the gate (closed) with it: a connection may
	 * still be answering a hello while the daemon ends */
}
