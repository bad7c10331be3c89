/*
 * err.c - the one error type of docfs: set once where a failure is found, prefixed with
 * context on the way up, never overwritten. It does not map codes to errno (fs/ does).
 */
#include "store.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int dfs_err_set(struct dfs_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err || err->code != DFS_OK)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

int dfs_err_prefix(struct dfs_err *err, const char *fmt, ...)
{
	char joined[sizeof(err->msg)];
	size_t n, m;
	va_list ap;
	int len;

	if (!err)
		return DFS_OK;
	va_start(ap, fmt);
	len = vsnprintf(joined, sizeof(joined), fmt, ap);
	va_end(ap);
	n = len < 0 ? 0 : ((size_t)len >= sizeof(joined) ? sizeof(joined) - 1 : (size_t)len);
	m = strnlen(err->msg, sizeof(err->msg) - 1);
	if (m > sizeof(joined) - 1 - n)
		m = sizeof(joined) - 1 - n;
	memcpy(joined + n, err->msg, m);
	joined[n + m] = '\0';
	memcpy(err->msg, joined, sizeof(joined));
	return err->code;
}

void dfs_err_clear(struct dfs_err *err)
{
	if (!err)
		return;
	err->code = DFS_OK;
	err->os_errno = 0;
	err->msg[0] = '\0';
}

const char *dfs_code_name(int code)
{
	static const char *const names[] = {
		[DFS_OK] = "ok",
		[DFS_EINVAL] = "invalid",
		[DFS_ENOENT] = "not found",
		[DFS_EEXIST] = "exists",
		[DFS_ENOMEM] = "out of memory",
		[DFS_EIO] = "i/o error",
		[DFS_EFBIG] = "too large",
		[DFS_ENAMETOOLONG] = "name too long",
		[DFS_ENOTEMPTY] = "not empty",
		[DFS_EBUSY] = "busy",
		[DFS_EINCOMPLETE] = "incomplete",
		[DFS_ECORRUPT] = "corrupt",
		[DFS_EPERM] = "not permitted",
		[DFS_ENOTDIR] = "not a directory",
		[DFS_EISDIR] = "is a directory",
		[DFS_ERANGE] = "out of range",
		[DFS_EINTR] = "interrupted",
		[DFS_ETIMEDOUT] = "timed out",
		[DFS_ESTALE] = "stale",
		[DFS_ENOSPC] = "no space",
		[DFS_ETYPE] = "type mismatch",
		[DFS_EXDEV] = "cross-device move",
		[DFS_EACCES] = "permission denied",
		[DFS_EROFS] = "not primary",
	};

	if (code < 0 || (size_t)code >= sizeof(names) / sizeof(names[0]) || !names[code])
		return "unknown";
	return names[code];
}
