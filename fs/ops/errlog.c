/*
 * errlog.c - the boundary where dfs_code values become errno values (fs_errno is the only
 * such mapping in docfs), the ring of recent error messages that the mount shows at
 * /.docfs/errors and appends to the log file, and the log file's other lines (progress of
 * index builds, TTL deletions), which are not errors and stay out of the ring.
 */
#include "fs_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ERRLOG_SLOTS 256

static pthread_mutex_t errlog_lock = PTHREAD_MUTEX_INITIALIZER;
static char errlog_ring[ERRLOG_SLOTS][352];
static unsigned errlog_next;  /* slot written next */
static unsigned errlog_count; /* slots in use */
static FILE *errlog_file;     /* Owned: the log file, or NULL */

int fs_errno(int code)
{
	switch (code) {
	case DFS_OK:
		return 0;
	case DFS_EINVAL:
	case DFS_EINCOMPLETE:
	case DFS_ETYPE:
		return EINVAL;
	case DFS_ENOENT:
		return ENOENT;
	case DFS_EEXIST:
		return EEXIST;
	case DFS_ENOMEM:
		return ENOMEM;
	case DFS_EFBIG:
		return EFBIG;
	case DFS_ENAMETOOLONG:
		return ENAMETOOLONG;
	case DFS_ENOTEMPTY:
		return ENOTEMPTY;
	case DFS_EBUSY:
		return EBUSY;
	case DFS_EPERM:
		return EPERM;
	case DFS_ENOTDIR:
		return ENOTDIR;
	case DFS_EISDIR:
		return EISDIR;
	case DFS_ERANGE:
		return ERANGE;
	case DFS_EINTR:
		return EINTR;
	case DFS_ETIMEDOUT:
		return ETIMEDOUT;
	case DFS_ESTALE:
		return ESTALE;
	case DFS_ENOSPC:
		return ENOSPC;
	case DFS_EXDEV:
		return EXDEV;
	case DFS_EACCES:
		return EACCES;
	case DFS_EROFS:
		return EROFS;
	default:
		return EIO;
	}
}

/* Writes one time-stamped line to the log file and, for errors, to the ring. */
static void log_line(bool ring, const char *fmt, va_list ap)
{
	char stamp[20], msg[288], line[352];
	struct timespec ts;
	struct tm tm;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(line, sizeof(line), "%s.%03ldZ %s", stamp, ts.tv_nsec / 1000000, msg);
	pthread_mutex_lock(&errlog_lock);
	if (errlog_file) {
		fprintf(errlog_file, "%s\n", line);
		fflush(errlog_file);
	}
	if (ring) {
		memcpy(errlog_ring[errlog_next], line, sizeof(line));
		errlog_next = (errlog_next + 1) % ERRLOG_SLOTS;
		if (errlog_count < ERRLOG_SLOTS)
			errlog_count++;
	}
	pthread_mutex_unlock(&errlog_lock);
}

void fs_errlog_add(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(true, fmt, ap);
	va_end(ap);
}

void fs_log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(false, fmt, ap);
	va_end(ap);
}

void fs_log_raw(const char *line)
{
	pthread_mutex_lock(&errlog_lock);
	if (errlog_file) {
		fprintf(errlog_file, "%s\n", line);
		fflush(errlog_file);
	}
	pthread_mutex_unlock(&errlog_lock);
}

void fs_errlog_render(struct dfs_buf *out)
{
	pthread_mutex_lock(&errlog_lock);
	for (unsigned i = 0; i < errlog_count; i++) {
		unsigned slot = (errlog_next + ERRLOG_SLOTS - errlog_count + i) % ERRLOG_SLOTS;

		dfs_buf_puts(out, errlog_ring[slot]);
		dfs_buf_putc(out, '\n');
	}
	pthread_mutex_unlock(&errlog_lock);
}

int fs_errlog_open(const char *path, struct dfs_err *err)
{
	FILE *f = NULL;

	if (path && !strcmp(path, "-")) {
		int fd = dup(2);

		f = fd >= 0 ? fdopen(fd, "a") : NULL;
		if (!f)
			return dfs_err_set(err, DFS_EIO, "cannot log to standard error: %s",
					   strerror(errno));
	} else if (path) {
		f = fopen(path, "a");
		if (!f)
			return dfs_err_set(err, DFS_EIO, "cannot open log '%s': %s", path,
					   strerror(errno));
	}
	pthread_mutex_lock(&errlog_lock);
	if (errlog_file)
		fclose(errlog_file);
	errlog_file = f;
	pthread_mutex_unlock(&errlog_lock);
	return 0;
}
