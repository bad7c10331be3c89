/*
 * session.c - the server's logical sessions as $listLocalSessions shows them: the id of each
 * lsid a command carries is remembered with its user and its last use, until endSessions or
 * killSessions ends it or 30 minutes pass without a use (MongoDB's default
 * localLogicalSessionTimeoutMinutes). What a session owns (its cursors) is cursor.c's.
 *
 * It does not persist anything (sessions live in the server's memory, as a mongod's local
 * cache does) and keeps no transaction state (docfs has no transactions on the wire).
 * Thread-safe: one mutex over a small array; at most MAX_SESSIONS are kept, the least
 * recently used one giving way to a new one.
 */
#include "wire.h"

#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SESSIONS 10000
#define SESSION_TIMEOUT_MS (30 * 60 * 1000LL)

struct session {
	uint8_t id[16];	     /* the lsid's UUID */
	char user[300];	     /* "name@db" of the authenticated user, "" without one */
	int64_t last_use_ms; /* wall clock of the last command that carried it */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct session *sessions; /* Owned: n of them, in no order */
static size_t n, cap;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Drops the sessions unused for SESSION_TIMEOUT_MS. Under lock. */
static void expire(int64_t now)
{
	for (size_t i = 0; i < n;)
		if (now - sessions[i].last_use_ms > SESSION_TIMEOUT_MS)
			sessions[i] = sessions[--n];
		else
			i++;
}

void wire_session_touch(struct wire_ctx *c)
{
	const char *name = NULL, *db = NULL;
	struct session *s = NULL;
	uint8_t id[16];
	bson_t lsid;
	int64_t now = now_ms();

	if (!wire_sub_view(c->cmd, "lsid", false, &lsid) || !wire_lsid_id(&lsid, id))
		return;
	wire_auth_user(c, &name, &db);
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n && !s; i++)
		if (!memcmp(sessions[i].id, id, 16))
			s = &sessions[i];
	if (!s) {
		expire(now);
		if (n == MAX_SESSIONS) { /* the least recently used one gives way */
			size_t old = 0;

			for (size_t i = 1; i < n; i++)
				if (sessions[i].last_use_ms < sessions[old].last_use_ms)
					old = i;
			sessions[old] = sessions[--n];
		}
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			struct session *ns = realloc(sessions, nc * sizeof(*ns));

			if (!ns)
				abort();
			sessions = ns;
			cap = nc;
		}
		s = &sessions[n++];
		memcpy(s->id, id, 16);
		if (name)
			snprintf(s->user, sizeof(s->user), "%s@%s", name, db);
		else
			s->user[0] = '\0';
	}
	s->last_use_ms = now;
	pthread_mutex_unlock(&lock);
}

void wire_session_end(const bson_t *lsid)
{
	uint8_t id[16];

	if (!wire_lsid_id(lsid, id))
		return;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n; i++)
		if (!memcmp(sessions[i].id, id, 16)) {
			sessions[i] = sessions[--n];
			break;
		}
	pthread_mutex_unlock(&lock);
}

/* Whether a session of user ("name@db" or "") is among spec's users ([{user, db}]). */
static bool listed(const bson_iter_t *users, const char *user)
{
	bson_iter_t it = *users, one, f;
	char want[300];

	while (bson_iter_next(&it)) {
		const char *name = "", *db = "";

		if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &one))
			continue;
		while (bson_iter_next(&one)) {
			f = one;
			if (!strcmp(bson_iter_key(&f), "user") && BSON_ITER_HOLDS_UTF8(&f))
				name = bson_iter_utf8(&f, NULL);
			else if (!strcmp(bson_iter_key(&f), "db") && BSON_ITER_HOLDS_UTF8(&f))
				db = bson_iter_utf8(&f, NULL);
		}
		snprintf(want, sizeof(want), "%s@%s", name, db);
		if (!strcmp(want, user))
			return true;
	}
	return false;
}

int wire_session_list(struct wire_ctx *c, const bson_value_t *spec, bson_t *docs)
{
	const char *name = NULL, *db = NULL;
	char me[300] = "";
	bool all = false, has_users = false;
	bson_iter_t it, users;
	int64_t now = now_ms();
	uint32_t k = 0;

	if (spec->value_type != BSON_TYPE_DOCUMENT ||
	    !bson_iter_init_from_data(&it, spec->value.v_doc.data, spec->value.v_doc.data_len))
		return wire_fail(c, 14, "TypeMismatch",
				 "$listLocalSessions takes a document: {}, {allUsers: true} or "
				 "{users: [{user, db}]}");
	while (bson_iter_next(&it)) {
		if (!strcmp(bson_iter_key(&it), "allUsers") && BSON_ITER_HOLDS_BOOL(&it)) {
			all = bson_iter_bool(&it);
		} else if (!strcmp(bson_iter_key(&it), "users") && BSON_ITER_HOLDS_ARRAY(&it)) {
			has_users = bson_iter_recurse(&it, &users);
		} else {
			return wire_fail(
				c, 40415, "Location40415",
				"BSON field '$listLocalSessions.%s' is an unknown field or "
				"has the wrong type",
				bson_iter_key(&it));
		}
	}
	if (all && has_users)
		return wire_fail(c, 2, "BadValue",
				 "$listLocalSessions: allUsers and users cannot both be given");
	if (wire_auth_user(c, &name, &db))
		snprintf(me, sizeof(me), "%s@%s", name, db);
	pthread_mutex_lock(&lock);
	expire(now);
	for (size_t i = 0; i < n; i++) {
		const struct session *s = &sessions[i];
		uint8_t uid[SHA256_DIGEST_LENGTH];
		char key[16];
		bson_t d, idd, u;

		if (!all && (has_users ? !listed(&users, s->user) : strcmp(s->user, me)))
			continue;
		/* uid: the SHA-256 of the user's name, as MongoDB keys sessions by user */
		SHA256((const unsigned char *)s->user, strlen(s->user), uid);
		snprintf(key, sizeof(key), "%u", k++);
		BSON_APPEND_DOCUMENT_BEGIN(docs, key, &d);
		BSON_APPEND_DOCUMENT_BEGIN(&d, "_id", &idd);
		BSON_APPEND_BINARY(&idd, "id", BSON_SUBTYPE_UUID, s->id, 16);
		BSON_APPEND_BINARY(&idd, "uid", BSON_SUBTYPE_BINARY, uid, sizeof(uid));
		bson_append_document_end(&d, &idd);
		BSON_APPEND_DATE_TIME(&d, "lastUse", s->last_use_ms);
		if (s->user[0]) {
			BSON_APPEND_DOCUMENT_BEGIN(&d, "user", &u);
			BSON_APPEND_UTF8(&u, "name", s->user);
			bson_append_document_end(&d, &u);
		}
		bson_append_document_end(docs, &d);
	}
	pthread_mutex_unlock(&lock);
	return 0;
}
