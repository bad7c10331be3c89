/*
 * rscli.c - `docfs rs ZK SET VERB [ARG]`: the shell's rs.initiate(cfg), rs.conf(),
 * rs.reconfig(cfg), rs.add(host|member), rs.remove(host) and rs.status() against what is
 * kept in ZooKeeper (the configuration; the members' published states), printing
 * MongoDB's replies; rs.stepDown() and rs.freeze(), which a member runs, as the commands
 * replSetStepDown (sent to the primary ZooKeeper names) and replSetFreeze (to the member
 * named), over the wire protocol (libmongoc as the client).
 */
#include "replset.h"

#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reply_err(bson_t *reply, int code, const char *name, const char *msg)
{
	BSON_APPEND_DOUBLE(reply, "ok", 0.0);
	BSON_APPEND_UTF8(reply, "errmsg", msg);
	BSON_APPEND_INT32(reply, "code", code);
	BSON_APPEND_UTF8(reply, "codeName", name);
}

/* The configuration in force, read and checked; errors as MongoDB names them in reply. */
static int current(struct rs_zk *z, const char *set, struct rs_conf *cur, int *version,
		   bson_t *reply, struct dfs_err *err)
{
	bson_t stored;
	int rc = rs_zk_get_conf(z, set, &stored, version, err);

	if (!rc)
		rc = rs_conf_load(&stored, cur, err);
	bson_destroy(&stored);
	if (rc == DFS_ENOENT)
		reply_err(reply, 94, "NotYetInitialized", "no replset config has been received");
	else if (rc)
		reply_err(reply, 1, "InternalError", err->msg);
	return rc;
}

/* Stores next as the successor of the configuration of that znode version. */
static int store_next(struct rs_zk *z, const struct rs_conf *next, int version, bson_t *reply,
		      struct dfs_err *err)
{
	int rc = rs_zk_put_conf(z, next->name, &next->doc, version, err);

	if (rc == DFS_EBUSY)
		reply_err(reply, 109, "ConfigurationInProgress",
			  "the configuration changed while this reconfig was made: run it again");
	else if (rc == DFS_EEXIST)
		reply_err(reply, 23, "AlreadyInitialized", "already initialized");
	else if (rc)
		reply_err(reply, 1, "InternalError", err->msg);
	else
		BSON_APPEND_DOUBLE(reply, "ok", 1.0);
	return rc;
}

/* cur's configuration with member m added (an _id past the largest when it has none) or
 * the member on host drop left out, into out (initialised here). */
static int edited(const struct rs_conf *cur, const bson_t *add, const char *drop, bson_t *out,
		  bson_t *reply)
{
	bson_t arr, m;
	bson_iter_t it;
	int n = 0, top = -1;
	bool found = false;
	char key[16];

	bson_init(out);
	bson_copy_to_excluding_noinit(&cur->doc, out, "members", NULL);
	BSON_APPEND_ARRAY_BEGIN(out, "members", &arr);
	bson_iter_init_find(&it, &cur->doc, "members");
	for (int i = 0; i < cur->n; i++) {
		if (cur->m[i].id > top)
			top = cur->m[i].id;
		if (drop && !strcmp(cur->m[i].host, drop)) {
			found = true;
			continue;
		}
		bson_iter_t a, e;
		const uint8_t *data;
		uint32_t len;
		bson_t view;

		bson_iter_init_find(&a, &cur->doc, "members");
		bson_iter_recurse(&a, &e);
		for (int j = 0; j <= i; j++)
			bson_iter_next(&e);
		bson_iter_document(&e, &len, &data);
		bson_init_static(&view, data, len);
		snprintf(key, sizeof(key), "%d", n++);
		BSON_APPEND_DOCUMENT(&arr, key, &view);
	}
	if (add) {
		snprintf(key, sizeof(key), "%d", n++);
		bson_append_document_begin(&arr, key, -1, &m);
		if (!bson_has_field(add, "_id"))
			BSON_APPEND_INT32(&m, "_id", top + 1);
		bson_concat(&m, add);
		bson_append_document_end(&arr, &m);
	}
	bson_append_array_end(out, &arr);
	if (drop && !found) {
		char msg[400];

		snprintf(msg, sizeof(msg), "couldn't find %s in the set's members", drop);
		reply_err(reply, 93, "InvalidReplicaSetConfig", msg);
		return DFS_ENOENT;
	}
	return 0;
}

/* A number argument: 0, or 2 after saying why. */
static int secs_arg(const char *verb, const char *s, int64_t *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	if (!s[0] || *end || v < 0) {
		fprintf(stderr, "docfs rs: %s: '%s' is not a number of seconds\n", verb, s);
		return 2;
	}
	*out = v;
	return 0;
}

/* rs.stepDown([secs [, catchUpSecs]]) on the primary, rs.freeze(secs) on member host:
 * runs the command over the wire and prints the member's reply. */
static int member_cli(int argc, char **argv)
{
	const char *verb = argv[3], *host = NULL;
	int64_t secs = 60, catch_s = -1;
	struct dfs_err err = {0};
	struct rs_view *v = NULL;
	struct rs_zk *z = NULL;
	bson_t cmd = BSON_INITIALIZER, reply = BSON_INITIALIZER;
	bson_error_t e;
	struct dfs_buf out;
	char uri[600];
	int rc = 0;

	if (!strcmp(verb, "stepDown")) {
		if (argc > 6 || (argc > 4 && secs_arg(verb, argv[4], &secs)) ||
		    (argc > 5 && secs_arg(verb, argv[5], &catch_s)))
			return 2;
		BSON_APPEND_INT64(&cmd, "replSetStepDown", secs);
		if (catch_s >= 0)
			BSON_APPEND_INT64(&cmd, "secondaryCatchUpPeriodSecs", catch_s);
		if ((rc = rs_zk_open(argv[1], 10000, &z, &err))) {
			fprintf(stderr, "docfs rs: %s\n", err.msg);
			return 1;
		}
		if (!(v = calloc(1, sizeof(*v))))
			abort();
		rc = rs_view_read(z, argv[2], v, &err);
		if (!rc && !v->has_primary) {
			fprintf(stderr, "docfs rs: stepDown: replica set %s has no primary now\n",
				argv[2]);
			rc = 1;
		} else if (rc) {
			fprintf(stderr, "docfs rs: %s\n", err.msg);
		}
		host = v->primary;
	} else {
		if (argc != 6) {
			fprintf(stderr, "docfs rs: usage: docfs rs ZK SET freeze HOST SECS\n");
			return 2;
		}
		if (secs_arg(verb, argv[5], &secs))
			return 2;
		host = argv[4];
		BSON_APPEND_INT64(&cmd, "replSetFreeze", secs);
	}
	if (!rc) {
		mongoc_client_t *cl;
		size_t o = (size_t)snprintf(uri, sizeof(uri), "mongodb://");

		for (const char *p = host; *p && o + 4 < sizeof(uri); p++) /* a socket's '/' */
			o += (size_t)snprintf(uri + o, sizeof(uri) - o, *p == '/' ? "%%2F" : "%c",
					      *p);
		snprintf(uri + o, sizeof(uri) - o,
			 "/?directConnection=true&serverSelectionTimeoutMS=5000&socketTimeoutMS=%"
			 "lld",
			 (long long)(secs + 30) * 1000);
		mongoc_init();
		cl = mongoc_client_new(uri);
		if (!cl) {
			fprintf(stderr, "docfs rs: '%s' is not a member's address\n", host);
			rc = 1;
		} else if (!mongoc_client_command_simple(cl, "admin", &cmd, NULL, &reply, &e)) {
			if (bson_empty(&reply)) {
				BSON_APPEND_DOUBLE(&reply, "ok", 0.0);
				BSON_APPEND_UTF8(&reply, "errmsg", e.message);
			}
			fprintf(stderr, "docfs rs: %s: %s\n", verb, e.message);
			rc = 1;
		}
		mongoc_client_destroy(cl);
		mongoc_cleanup();
		dfs_buf_init(&out);
		store_codec_render(&reply, STORE_RENDER_PRETTY, &out, NULL);
		fputs(out.data ? out.data : "", stdout);
		dfs_buf_release(&out);
	}
	free(v);
	rs_zk_close(z);
	bson_destroy(&cmd);
	bson_destroy(&reply);
	return rc;
}

int rs_cli(int argc, char **argv)
{
	struct dfs_err err = {0};
	struct rs_zk *z = NULL;
	struct rs_conf cur, next;
	const char *set, *verb;
	bson_t reply = BSON_INITIALIZER, in = BSON_INITIALIZER;
	struct dfs_buf out;
	int rc = 0, version = -1;
	bool have_cur = false, have_next = false;

	if (argc >= 4 && (!strcmp(argv[3], "stepDown") || !strcmp(argv[3], "freeze")))
		return member_cli(argc, argv);
	if (argc < 4 || argc > 5) {
		fprintf(stderr, "docfs rs: usage: docfs rs ZK SET initiate CONF | conf | status | "
				"reconfig CONF | add HOST|MEMBER | remove HOST | stepDown [SECS "
				"[CATCHUP]] | freeze HOST SECS\n");
		return 2;
	}
	set = argv[2];
	verb = argv[3];
	if (strcmp(verb, "initiate") && strcmp(verb, "conf") && strcmp(verb, "reconfig") &&
	    strcmp(verb, "add") && strcmp(verb, "remove") && strcmp(verb, "status")) {
		fprintf(stderr,
			"docfs rs: unknown command '%s' (initiate, conf, status, reconfig, "
			"add, remove, stepDown, freeze)\n",
			verb);
		return 2;
	}
	bool bare = !strcmp(verb, "conf") || !strcmp(verb, "status");

	if ((bare && argc != 4) || (!bare && argc != 5)) {
		fprintf(stderr, "docfs rs: %s %s\n", verb,
			bare ? "takes no argument" : "needs its argument");
		return 2;
	}
	if (argc == 5 && (!strcmp(verb, "initiate") || !strcmp(verb, "reconfig") ||
			  (!strcmp(verb, "add") && argv[4][0] == '{'))) {
		if (store_codec_parse_doc(argv[4], strlen(argv[4]), &in, &err)) {
			fprintf(stderr, "docfs rs: %s: %s\n", verb, err.msg);
			bson_destroy(&in);
			return 2;
		}
	} else if (!strcmp(verb, "add")) {
		BSON_APPEND_UTF8(&in, "host", argv[4]);
	}
	if ((rc = rs_zk_open(argv[1], 10000, &z, &err))) {
		fprintf(stderr, "docfs rs: %s\n", err.msg);
		bson_destroy(&in);
		return 1;
	}
	dfs_buf_init(&out);
	if (!strcmp(verb, "initiate")) {
		rc = rs_conf_check(set, &in, NULL, &next, &reply, &err);
		have_next = !rc;
		if (!rc)
			rc = store_next(z, &next, -1, &reply, &err);
	} else {
		rc = current(z, set, &cur, &version, &reply, &err);
		have_cur = !rc;
	}
	if (!rc && !strcmp(verb, "conf")) {
		bson_concat(&reply, &cur.doc);
	} else if (!rc && !strcmp(verb, "status")) {
		/* rs.status() as ZooKeeper shows the set: the members' published states */
		struct rs_view *v = calloc(1, sizeof(*v));

		if (!v)
			abort();
		rc = rs_view_read(z, set, v, &err);
		if (!rc) {
			rs_status_build(&cur, v, NULL, &reply);
			BSON_APPEND_DOUBLE(&reply, "ok", 1.0);
		} else {
			reply_err(&reply, 1, "InternalError", err.msg);
		}
		free(v);
	} else if (!rc && strcmp(verb, "initiate")) {
		bson_t cfg;

		if (!strcmp(verb, "reconfig"))
			bson_copy_to(&in, &cfg);
		else
			rc = edited(&cur, !strcmp(verb, "add") ? &in : NULL,
				    !strcmp(verb, "remove") ? argv[4] : NULL, &cfg, &reply);
		if (!rc) {
			rc = rs_conf_check(set, &cfg, &cur, &next, &reply, &err);
			have_next = !rc;
		}
		if (!rc)
			rc = store_next(z, &next, version, &reply, &err);
		bson_destroy(&cfg);
	}
	store_codec_render(&reply, STORE_RENDER_PRETTY, &out, NULL);
	fputs(out.data ? out.data : "", stdout);
	if (rc) {
		bson_iter_t it;

		fprintf(stderr, "docfs rs: %s\n",
			bson_iter_init_find(&it, &reply, "errmsg") ? bson_iter_utf8(&it, NULL)
								  : err.msg);
	}
	if (have_cur)
		rs_conf_release(&cur);
	if (have_next)
		rs_conf_release(&next);
	dfs_buf_release(&out);
	bson_destroy(&reply);
	bson_destroy(&in);
	rs_zk_close(z);
	return rc ? 1 : 0;
}
