/*
 * rsconf.c - a replica set's configuration (rs.conf()): parsed, checked and completed with
 * MongoDB's defaults, and compared with the one in force for a reconfig. Pure: it knows
 * nothing of ZooKeeper (zk.c keeps the document) or of the members that will run it.
 *
 * Design notes
 * 1. What is refused is what mongod refuses, with its codes: a malformed document or
 *    member 93 InvalidReplicaSetConfig, a configuration that cannot be the next one 103
 *    NewReplicaSetConfigurationIncompatible. Messages name the field as
 *    `members.<i>.<field>`, and the two clashing members for duplicates, as mongod's do.
 * 2. Defaults are filled in, so that what is stored is what rs.conf() shows: each member's
 *    arbiterOnly, buildIndexes, hidden, priority, tags, secondaryDelaySecs and votes, and
 *    the settings block. replicaSetId is an ObjectId made at initiate, kept by reconfigs.
 * 3. A reconfig (not forced) adds or removes at most one voting member, keeps the set's
 *    name and replicaSetId, and gets version = the version in force + 1 whatever it says
 *    (the shell's rs.reconfig does the same), so two reconfigs of one version cannot both
 *    be stored: zk.c writes with the znode's version as a compare-and-set.
 */
#include "replset.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int bad(bson_t *reply, int code, const char *name, struct dfs_err *err, const char *fmt,
	       ...) __attribute__((format(printf, 5, 6)));

/* {ok: 0, errmsg, code, codeName} into reply, the message into err; returns DFS_EINVAL. */
static int bad(bson_t *reply, int code, const char *name, struct dfs_err *err, const char *fmt,
	       ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (reply) {
		BSON_APPEND_DOUBLE(reply, "ok", 0.0);
		BSON_APPEND_UTF8(reply, "errmsg", msg);
		BSON_APPEND_INT32(reply, "code", code);
		BSON_APPEND_UTF8(reply, "codeName", name);
	}
	return dfs_err_set(err, DFS_EINVAL, "%s (%d %s)", msg, code, name);
}

#define INVALID 93, "InvalidReplicaSetConfig"
#define INCOMPATIBLE 103, "NewReplicaSetConfigurationIncompatible"

/* A view of the document or array it holds into out (no copy). */
static bool view_of(const bson_iter_t *it, bson_t *out)
{
	const uint8_t *data;
	uint32_t len;

	if (BSON_ITER_HOLDS_DOCUMENT(it))
		bson_iter_document(it, &len, &data);
	else if (BSON_ITER_HOLDS_ARRAY(it))
		bson_iter_array(it, &len, &data);
	else
		return false;
	return bson_init_static(out, data, len);
}

static bool is_number(const bson_iter_t *it)
{
	return BSON_ITER_HOLDS_INT32(it) || BSON_ITER_HOLDS_INT64(it) || BSON_ITER_HOLDS_DOUBLE(it);
}

/* One member, checked, with defaults, appended to out as a document. */
static int member(const bson_t *m, int i, bson_t *out, struct rs_member *mm, bson_t *reply,
		  struct dfs_err *err)
{
	static const char *const known[] = {"_id",	    "host",  "arbiterOnly",
					    "buildIndexes", "hidden", "priority",
					    "tags",	    "secondaryDelaySecs",
					    "votes",	    NULL};
	bool has_id = false, arbiter = false, hidden = false, build = true, has_priority = false;
	double priority = 1;
	int64_t id = 0, delay = 0, votes = 1;
	const char *host = NULL;
	bson_t tags = BSON_INITIALIZER, d;
	bson_iter_t it;
	int rc = 0;

	bson_iter_init(&it, m);
	while (!rc && bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		int j;

		for (j = 0; known[j] && strcmp(known[j], k); j++)
			;
		if (!known[j]) {
			rc = bad(reply, INVALID, err,
				 "Unexpected field %s in replica set member configuration "
				 "(members.%d)",
				 k, i);
		} else if (!strcmp(k, "_id")) {
			if (!is_number(&it) || bson_iter_as_int64(&it) < 0 ||
			    bson_iter_as_int64(&it) > 255)
				rc = bad(reply, INVALID, err,
					 "members.%d._id must be a number from 0 to 255", i);
			has_id = true;
			id = bson_iter_as_int64(&it);
		} else if (!strcmp(k, "host")) {
			if (!BSON_ITER_HOLDS_UTF8(&it) || !*bson_iter_utf8(&it, NULL))
				rc = bad(reply, INVALID, err,
					 "members.%d.host must be a non-empty string (HOST:PORT or "
					 "a Unix socket path)",
					 i);
			else
				host = bson_iter_utf8(&it, NULL);
		} else if (!strcmp(k, "arbiterOnly") || !strcmp(k, "hidden") ||
			   !strcmp(k, "buildIndexes")) {
			if (!BSON_ITER_HOLDS_BOOL(&it) && !is_number(&it))
				rc = bad(reply, INVALID, err, "members.%d.%s must be a boolean", i,
					 k);
			bool v = bson_iter_as_bool(&it);

			if (k[0] == 'a')
				arbiter = v;
			else if (k[0] == 'h')
				hidden = v;
			else
				build = v;
		} else if (!strcmp(k, "priority")) {
			if (!is_number(&it))
				rc = bad(reply, INVALID, err, "members.%d.priority must be a number",
					 i);
			priority = bson_iter_as_double(&it);
			has_priority = true;
		} else if (!strcmp(k, "votes")) {
			if (!is_number(&it))
				rc = bad(reply, INVALID, err, "members.%d.votes must be a number", i);
			votes = bson_iter_as_int64(&it);
		} else if (!strcmp(k, "secondaryDelaySecs")) {
			if (!is_number(&it) || bson_iter_as_int64(&it) < 0)
				rc = bad(reply, INVALID, err,
					 "members.%d.secondaryDelaySecs must be a non-negative number",
					 i);
			delay = bson_iter_as_int64(&it);
		} else if (!strcmp(k, "tags")) {
			bson_t t;
			bson_iter_t ti;

			if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !view_of(&it, &t)) {
				rc = bad(reply, INVALID, err, "members.%d.tags must be a document", i);
				continue;
			}
			bson_iter_init(&ti, &t);
			while (!rc && bson_iter_next(&ti))
				if (!BSON_ITER_HOLDS_UTF8(&ti))
					rc = bad(reply, INVALID, err,
						 "tags.%s field has non-string value in "
						 "members.%d",
						 bson_iter_key(&ti), i);
			if (!rc)
				bson_concat(&tags, &t);
		}
	}
	if (!rc && !has_id)
		rc = bad(reply, INVALID, err, "members.%d has no _id", i);
	if (!rc && !host)
		rc = bad(reply, INVALID, err, "members.%d has no host", i);
	if (!rc && arbiter && !has_priority)
		priority = 0;
	if (!rc && (priority < 0 || priority > 1000))
		rc = bad(reply, INVALID, err,
			 "members.%d.priority is %g: it must be between 0 and 1000 inclusive", i,
			 priority);
	if (!rc && votes != 0 && votes != 1)
		rc = bad(reply, INVALID, err, "members.%d.votes is %lld: it must be 0 or 1", i,
			 (long long)votes);
	if (!rc && arbiter && priority != 0)
		rc = bad(reply, INVALID, err, "members.%d: an arbiter must have priority 0", i);
	if (!rc && votes == 0 && priority != 0)
		rc = bad(reply, INVALID, err, "members.%d: priority must be 0 when non-voting (votes:0)",
			 i);
	if (!rc && hidden && priority != 0)
		rc = bad(reply, INVALID, err, "members.%d: priority must be 0 when hidden=true", i);
	if (!rc && delay > 0 && priority != 0)
		rc = bad(reply, INVALID, err,
			 "members.%d: priority must be 0 when secondaryDelaySecs is non-zero", i);
	if (!rc && !build && priority != 0)
		rc = bad(reply, INVALID, err,
			 "members.%d: priority must be 0 when buildIndexes=false", i);
	if (!rc) {
		char key[16];

		snprintf(key, sizeof(key), "%d", i);
		BSON_APPEND_DOCUMENT_BEGIN(out, key, &d);
		BSON_APPEND_INT32(&d, "_id", (int32_t)id);
		BSON_APPEND_UTF8(&d, "host", host);
		BSON_APPEND_BOOL(&d, "arbiterOnly", arbiter);
		BSON_APPEND_BOOL(&d, "buildIndexes", build);
		BSON_APPEND_BOOL(&d, "hidden", hidden);
		BSON_APPEND_DOUBLE(&d, "priority", priority);
		BSON_APPEND_DOCUMENT(&d, "tags", &tags);
		BSON_APPEND_INT64(&d, "secondaryDelaySecs", delay);
		BSON_APPEND_INT32(&d, "votes", (int32_t)votes);
		bson_append_document_end(out, &d);
		mm->id = (int)id;
		snprintf(mm->host, sizeof(mm->host), "%s", host);
		mm->votes = (int)votes;
		mm->priority = priority;
		mm->arbiter = arbiter;
		mm->hidden = hidden;
	}
	bson_destroy(&tags);
	return rc;
}

/* Whether some member's tags have key tag. */
static bool tag_known(const bson_t *members, const char *tag)
{
	bson_iter_t it, m;

	if (!bson_iter_init(&it, members))
		return false;
	while (bson_iter_next(&it)) {
		if (bson_iter_recurse(&it, &m) && bson_iter_find(&m, "tags") &&
		    BSON_ITER_HOLDS_DOCUMENT(&m)) {
			bson_t t;
			bson_iter_t ti;

			if (view_of(&m, &t) && bson_iter_init_find(&ti, &t, tag))
				return true;
		}
	}
	return false;
}

/* The settings block, checked, with defaults, appended to out. */
static int settings(const bson_t *s, const bson_t *members, const bson_oid_t *set_id,
		    bson_t *out, bson_t *reply, struct dfs_err *err)
{
	static const struct {
		const char *name;
		int64_t def;
	} nums[] = {{"heartbeatIntervalMillis", 2000}, {"heartbeatTimeoutSecs", 10},
		    {"electionTimeoutMillis", 10000},	{"catchUpTimeoutMillis", -1},
		    {"catchUpTakeoverDelayMillis", 30000}};
	bson_t d, modes = BSON_INITIALIZER;
	bool chaining = true;
	bson_iter_t it;
	int rc = 0;

	if (s) {
		bson_iter_init(&it, s);
		while (!rc && bson_iter_next(&it)) {
			const char *k = bson_iter_key(&it);
			size_t j;

			for (j = 0; j < sizeof(nums) / sizeof(nums[0]) && strcmp(nums[j].name, k);
			     j++)
				;
			if (j < sizeof(nums) / sizeof(nums[0])) {
				if (!is_number(&it))
					rc = bad(reply, INVALID, err,
						 "settings.%s must be a number", k);
			} else if (!strcmp(k, "chainingAllowed")) {
				chaining = bson_iter_as_bool(&it);
			} else if (!strcmp(k, "getLastErrorModes")) {
				bson_t m;
				bson_iter_t mi, ti;

				if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !view_of(&it, &m)) {
					rc = bad(reply, INVALID, err,
						 "settings.getLastErrorModes must be a document");
					continue;
				}
				bson_iter_init(&mi, &m);
				while (!rc && bson_iter_next(&mi)) {
					const char *mode = bson_iter_key(&mi);

					if (!BSON_ITER_HOLDS_DOCUMENT(&mi) ||
					    !bson_iter_recurse(&mi, &ti)) {
						rc = bad(reply, INVALID, err,
							 "settings.getLastErrorModes.%s must be a "
							 "document of tag counts",
							 mode);
						continue;
					}
					while (!rc && bson_iter_next(&ti)) {
						if (!is_number(&ti) || bson_iter_as_int64(&ti) < 1)
							rc = bad(reply, INVALID, err,
								 "settings.getLastErrorModes.%s.%s "
								 "must be a positive number",
								 mode, bson_iter_key(&ti));
						else if (!tag_known(members, bson_iter_key(&ti)))
							rc = bad(reply, INVALID, err,
								 "No member of the set has tag key "
								 "\"%s\", which write concern mode "
								 "\"%s\" counts",
								 bson_iter_key(&ti), mode);
					}
				}
				if (!rc)
					bson_concat(&modes, &m);
			} else if (!strcmp(k, "getLastErrorDefaults") || !strcmp(k, "replicaSetId")) {
				/* kept as the defaults below: replicaSetId is the set's own */
			} else {
				rc = bad(reply, INVALID, err,
					 "Unexpected field settings.%s in replica set configuration",
					 k);
			}
		}
	}
	if (!rc) {
		bson_t wd;

		BSON_APPEND_DOCUMENT_BEGIN(out, "settings", &d);
		BSON_APPEND_BOOL(&d, "chainingAllowed", chaining);
		for (size_t j = 0; j < sizeof(nums) / sizeof(nums[0]); j++) {
			int64_t v = nums[j].def;

			if (s && bson_iter_init_find(&it, s, nums[j].name))
				v = bson_iter_as_int64(&it);
			BSON_APPEND_INT32(&d, nums[j].name, (int32_t)v);
		}
		BSON_APPEND_DOCUMENT(&d, "getLastErrorModes", &modes);
		BSON_APPEND_DOCUMENT_BEGIN(&d, "getLastErrorDefaults", &wd);
		BSON_APPEND_INT32(&wd, "w", 1);
		BSON_APPEND_INT32(&wd, "wtimeout", 0);
		bson_append_document_end(&d, &wd);
		BSON_APPEND_OID(&d, "replicaSetId", set_id);
		bson_append_document_end(out, &d);
	}
	bson_destroy(&modes);
	return rc;
}

int rs_conf_check(const char *set, const bson_t *in, const struct rs_conf *cur, struct rs_conf *out,
		  bson_t *reply, struct dfs_err *err)
{
	const char *name = NULL;
	bson_t members, *s = NULL, arr, m, settings_view;
	bson_iter_t it;
	bson_oid_t set_id;
	int rc = 0, n = 0, voters = 0, electable = 0;

	memset(out, 0, sizeof(*out));
	bson_init(&out->doc);
	if (bson_iter_init_find(&it, in, "_id") && BSON_ITER_HOLDS_UTF8(&it))
		name = bson_iter_utf8(&it, NULL);
	if (!name)
		return bad(reply, INVALID, err, "the configuration needs _id, the set's name");
	if (strcmp(name, set))
		return bad(reply, INVALID, err,
			   "Attempting to use a configuration for set %s in set %s; rejecting", name,
			   set);
	bson_iter_init(&it, in);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "protocolVersion") &&
		    (!is_number(&it) || bson_iter_as_int64(&it) != 1))
			return bad(reply, INVALID, err, "Only protocolVersion 1 is supported");
		if (strcmp(k, "_id") && strcmp(k, "version") && strcmp(k, "term") &&
		    strcmp(k, "members") && strcmp(k, "settings") && strcmp(k, "protocolVersion") &&
		    strcmp(k, "writeConcernMajorityJournalDefault"))
			return bad(reply, INVALID, err,
				   "Unexpected field %s in replica set configuration", k);
	}
	if (!bson_iter_init_find(&it, in, "members") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !view_of(&it, &members))
		return bad(reply, INVALID, err, "the configuration needs members, an array");
	if (bson_iter_init_find(&it, in, "settings")) {
		if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !view_of(&it, &settings_view))
			return bad(reply, INVALID, err, "settings must be a document");
		s = &settings_view;
	}
	if (cur)
		set_id = cur->set_id;
	else
		bson_oid_init(&set_id, NULL);
	out->set_id = set_id;
	snprintf(out->name, sizeof(out->name), "%s", set);
	out->version = cur ? cur->version + 1 : 1;
	if (!cur && bson_iter_init_find(&it, in, "version") && is_number(&it) &&
	    bson_iter_as_int64(&it) > 0)
		out->version = bson_iter_as_int64(&it);
	BSON_APPEND_UTF8(&out->doc, "_id", set);
	BSON_APPEND_INT32(&out->doc, "version", (int32_t)out->version);
	BSON_APPEND_INT32(&out->doc, "term", (int32_t)(cur ? cur->term : 0));
	BSON_APPEND_INT32(&out->doc, "protocolVersion", 1);
	BSON_APPEND_BOOL(&out->doc, "writeConcernMajorityJournalDefault", true);
	BSON_APPEND_ARRAY_BEGIN(&out->doc, "members", &arr);
	bson_iter_init(&it, &members);
	while (!rc && bson_iter_next(&it)) {
		if (n == RS_MAX_MEMBERS) {
			rc = bad(reply, INVALID, err,
				 "Replica set configuration contains more than %d members",
				 RS_MAX_MEMBERS);
			break;
		}
		if (!view_of(&it, &m)) {
			rc = bad(reply, INVALID, err, "members.%d must be a document", n);
			break;
		}
		rc = member(&m, n, &arr, &out->m[n], reply, err);
		n++;
	}
	bson_append_array_end(&out->doc, &arr);
	out->n = n;
	if (!rc && n == 0)
		rc = bad(reply, INVALID, err, "Replica set configuration must have at least one member");
	for (int i = 0; !rc && i < n; i++) {
		voters += out->m[i].votes;
		electable += !out->m[i].arbiter && out->m[i].priority > 0;
		for (int j = i + 1; !rc && j < n; j++) {
			if (out->m[i].id == out->m[j].id)
				rc = bad(reply, INVALID, err,
					 "Found two member configurations with same _id field, "
					 "members.%d._id == members.%d._id == %d",
					 i, j, out->m[i].id);
			else if (!strcmp(out->m[i].host, out->m[j].host))
				rc = bad(reply, INVALID, err,
					 "Found two member configurations with same host field, "
					 "members.%d.host == members.%d.host == %s",
					 i, j, out->m[i].host);
		}
	}
	if (!rc && (voters < 1 || voters > RS_MAX_VOTERS))
		rc = bad(reply, INVALID, err,
			 "Replica set configuration contains %d voting members, but must be at "
			 "least 1 and no more than %d",
			 voters, RS_MAX_VOTERS);
	if (!rc && !electable)
		rc = bad(reply, INVALID, err,
			 "Replica set configuration must contain at least one non-arbiter member "
			 "with priority > 0");
	if (!rc)
		rc = settings(s, &members, &set_id, &out->doc, reply, err);
	if (!rc && cur) {
		/* note 3: at most one voting member in or out */
		int changed = 0;

		for (int i = 0; i < n; i++) {
			bool was = false;

			for (int j = 0; j < cur->n; j++)
				if (cur->m[j].id == out->m[i].id && cur->m[j].votes && out->m[i].votes &&
				    !strcmp(cur->m[j].host, out->m[i].host))
					was = true;
			changed += out->m[i].votes && !was;
		}
		for (int j = 0; j < cur->n; j++) {
			bool stays = false;

			for (int i = 0; i < n; i++)
				if (cur->m[j].id == out->m[i].id && cur->m[j].votes && out->m[i].votes &&
				    !strcmp(cur->m[j].host, out->m[i].host))
					stays = true;
			changed += cur->m[j].votes && !stays;
		}
		if (changed > 1)
			rc = bad(reply, INCOMPATIBLE, err,
				 "Non force replica set reconfig can only add or remove at most 1 "
				 "voting member.");
	}
	if (rc)
		rs_conf_release(out);
	return rc;
}

int rs_conf_load(const bson_t *stored, struct rs_conf *out, struct dfs_err *err)
{
	bson_iter_t it, s;
	const char *name = NULL;
	struct rs_conf tmp;
	bson_oid_t id;
	int rc;

	if (bson_iter_init_find(&it, stored, "_id") && BSON_ITER_HOLDS_UTF8(&it))
		name = bson_iter_utf8(&it, NULL);
	if (!name || !bson_iter_init(&it, stored) ||
	    !bson_iter_find_descendant(&it, "settings.replicaSetId", &s) ||
	    !BSON_ITER_HOLDS_OID(&s))
		return dfs_err_set(err, DFS_ECORRUPT, "the stored configuration has no _id or "
						      "settings.replicaSetId");
	bson_oid_copy(bson_iter_oid(&s), &id);
	/* a stored configuration passed these checks when it was stored */
	rc = rs_conf_check(name, stored, NULL, &tmp, NULL, err);
	if (rc)
		return dfs_err_prefix(err, "the stored configuration: ");
	bson_destroy(&tmp.doc);
	*out = tmp;
	bson_copy_to(stored, &out->doc);
	out->set_id = id;
	if (bson_iter_init_find(&it, stored, "version"))
		out->version = bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, stored, "term"))
		out->term = bson_iter_as_int64(&it);
	return 0;
}

void rs_conf_release(struct rs_conf *c)
{
	bson_destroy(&c->doc);
	bson_init(&c->doc);
}
