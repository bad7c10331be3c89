/*
 * wconcern.c - a write concern as the writer states it: a writeConcern document of a wire
 * command, or the path options w=, wtimeout=, j= of the mount's write paths, or the mount's
 * -o w= default for document files; and how a failure is said (MongoDB's writeConcernError,
 * the mount's message). It does not decide whether a concern is met: member.c does, from the
 * positions the members publish (member.c notes 6, 8).
 *
 * Thread-safety: pure, except the file default (set once at startup, before any thread).
 */
#include "replset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct rs_wc file_default = {1, "", false, 0, false};

/* A w value that is a string: "majority", a mode name, or digits (a path option). */
static int set_w_text(const char *v, struct rs_wc *out, struct dfs_err *err)
{
	char *end;
	long n;

	if (!v[0])
		return dfs_err_set(err, DFS_EINVAL,
				   "w needs a number, \"majority\" or a mode name");
	n = strtol(v, &end, 10);
	if (!*end) {
		if (n < 0 || n > RS_MAX_MEMBERS)
			return dfs_err_set(err, DFS_EINVAL,
					   "w has to be a non-negative number and not greater "
					   "than %d, not %ld",
					   RS_MAX_MEMBERS, n);
		out->w = (int)n;
		out->mode[0] = '\0';
		return 0;
	}
	if (strlen(v) >= sizeof(out->mode))
		return dfs_err_set(err, DFS_EINVAL, "w mode '%.40s...' is too long", v);
	snprintf(out->mode, sizeof(out->mode), "%s", v);
	out->w = -1;
	return 0;
}

int rs_wc_parse(const bson_t *doc, struct rs_wc *out, struct dfs_err *err)
{
	bson_iter_t it;
	int rc;

	*out = (struct rs_wc){1, "", false, 0, true};
	if (!bson_iter_init(&it, doc))
		return dfs_err_set(err, DFS_EINVAL, "writeConcern is not a document");
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!strcmp(k, "w")) {
			if (BSON_ITER_HOLDS_UTF8(&it)) {
				if ((rc = set_w_text(bson_iter_utf8(&it, NULL), out, err)))
					return rc;
				if (!out->mode[0]) /* "2" is a mode name to MongoDB */
					snprintf(out->mode, sizeof(out->mode), "%s",
						 bson_iter_utf8(&it, NULL));
			} else if (BSON_ITER_HOLDS_NUMBER(&it)) {
				double d = bson_iter_as_double(&it);

				if (d < 0 || d > RS_MAX_MEMBERS || d != (double)(int)d)
					return dfs_err_set(err, DFS_EINVAL,
							   "w has to be a non-negative number and "
							   "not greater than %d",
							   RS_MAX_MEMBERS);
				out->w = (int)d;
				out->mode[0] = '\0';
			} else {
				return dfs_err_set(err, DFS_EINVAL,
						   "w has to be a number or a string");
			}
		} else if (!strcmp(k, "j") || !strcmp(k, "fsync")) {
			if (!BSON_ITER_HOLDS_BOOL(&it) && !BSON_ITER_HOLDS_NUMBER(&it))
				return dfs_err_set(err, DFS_EINVAL, "%s must be a boolean", k);
			if (!strcmp(k, "j"))
				out->j = bson_iter_as_bool(&it);
		} else if (!strcmp(k, "wtimeout") || !strcmp(k, "wtimeoutMS")) {
			if (!BSON_ITER_HOLDS_NUMBER(&it))
				return dfs_err_set(err, DFS_EINVAL, "wtimeout must be a number");
			out->wtimeout_ms = bson_iter_as_int64(&it);
			if (out->wtimeout_ms < 0)
				out->wtimeout_ms = 0;
		} else if (strcmp(k, "provenance") && strcmp(k, "getLastError") &&
			   strcmp(k, "wOpTime") && strcmp(k, "wElectionId")) {
			return dfs_err_set(err, DFS_EINVAL, "unrecognized write concern field: %s",
					   k);
		}
	}
	return 0;
}

int rs_wc_opt(const char *name, const char *value, struct rs_wc *out, struct dfs_err *err)
{
	char *end;

	if (!strcmp(name, "w")) {
		out->given = true;
		return set_w_text(value, out, err);
	}
	if (!strcmp(name, "wtimeout") || !strcmp(name, "wtimeoutMS")) {
		long long ms = strtoll(value, &end, 10);

		if (!value[0] || *end || ms < 0)
			return dfs_err_set(err, DFS_EINVAL,
					   "wtimeout needs milliseconds (0: none), not '%s'",
					   value);
		out->wtimeout_ms = ms;
		out->given = true;
		return 0;
	}
	if (!strcmp(name, "j")) {
		if (!strcmp(value, "true") || !strcmp(value, "1") || !value[0])
			out->j = true;
		else if (!strcmp(value, "false") || !strcmp(value, "0"))
			out->j = false;
		else
			return dfs_err_set(err, DFS_EINVAL, "j needs true or false, not '%s'",
					   value);
		out->given = true;
		return 0;
	}
	return 1;
}

int rs_wc_set_file_default(const char *value, struct dfs_err *err)
{
	struct rs_wc wc = {1, "", false, 0, true};
	char copy[256], *save = NULL;
	int rc = 0;

	/* "-o w=majority" and, joined by ':', "w=2:wtimeout=2000:j=true" */
	snprintf(copy, sizeof(copy), "%s", value);
	for (char *tok = strtok_r(copy, ":", &save); tok && !rc; tok = strtok_r(NULL, ":", &save)) {
		char *eq = strchr(tok, '=');

		if (!eq && tok == copy) {
			rc = set_w_text(tok, &wc, err);
			continue;
		}
		if (!eq)
			return dfs_err_set(err, DFS_EINVAL, "w=%s: '%s' needs a value", value, tok);
		*eq = '\0';
		rc = rs_wc_opt(tok, eq + 1, &wc, err);
		if (rc == 1)
			return dfs_err_set(err, DFS_EINVAL, "w=%s: unknown part '%s' (wtimeout, j)",
					   value, tok);
	}
	if (rc)
		return rc;
	file_default = wc;
	return 0;
}

void rs_wc_default(bool wire, struct rs_wc *out)
{
	if (wire) /* MongoDB 5.0 on: w: "majority" unless the writer says otherwise */
		*out = (struct rs_wc){-1, "majority", false, 0, false};
	else
		*out = file_default;
}

int rs_wc_fail_err(const struct rs_wc_fail *f, struct dfs_err *err)
{
	return dfs_err_set(err, f->code == 64 ? DFS_ETIMEDOUT : DFS_EINVAL, "%s (%d %s)", f->msg,
			   f->code, f->code_name);
}

void rs_wc_fail_append(const struct rs_wc_fail *f, const struct rs_wc *wc, bson_t *reply)
{
	bson_t e, info, w;

	BSON_APPEND_DOCUMENT_BEGIN(reply, "writeConcernError", &e);
	BSON_APPEND_INT32(&e, "code", f->code);
	BSON_APPEND_UTF8(&e, "codeName", f->code_name);
	BSON_APPEND_UTF8(&e, "errmsg", f->msg);
	BSON_APPEND_DOCUMENT_BEGIN(&e, "errInfo", &info);
	if (f->wtimeout)
		BSON_APPEND_BOOL(&info, "wtimeout", true);
	BSON_APPEND_DOCUMENT_BEGIN(&info, "writeConcern", &w);
	if (wc->mode[0])
		BSON_APPEND_UTF8(&w, "w", wc->mode);
	else
		BSON_APPEND_INT32(&w, "w", wc->w);
	if (wc->j)
		BSON_APPEND_BOOL(&w, "j", true);
	BSON_APPEND_INT64(&w, "wtimeout", wc->wtimeout_ms);
	BSON_APPEND_UTF8(&w, "provenance", wc->given ? "clientSupplied" : "implicitDefault");
	bson_append_document_end(&info, &w);
	bson_append_document_end(&e, &info);
	bson_append_document_end(reply, &e);
}
