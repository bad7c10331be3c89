/*
 * stattop.c - `docfs stat` and `docfs top`: mongostat's and mongotop's live views of a
 * mount, computed from two samples of its `/.docfs/serverStatus` or `/.docfs/top` (curop.c
 * writes those). The formulas, units and layouts are mongo-tools' (DESIGN.md section 6,
 * reference/ops.md section 6); the sampling loops read files, so they work on any path
 * that holds those two files. The row and block builders are pure functions of the
 * samples, for the unit tests; only the loops sleep and print.
 *
 * Columns of `docfs stat`: mongostat's default set without its WiredTiger-only columns
 * (dirty, used) and without flushes (docfs has no checkpoint count to show): insert query
 * update delete getmore command vsize res qrw arw net_in net_out conn time.
 */
#include "fs_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const fs_stat_keys[FS_STAT_NCOLS] = {
	"insert", "query", "update", "delete", "getmore", "command", "vsize",
	"res",	  "qrw",   "arw",    "net_in", "net_out", "conn",    "time"};

/* The number at dotted path in doc (int32, int64 or double), or 0 when absent. */
static double num_at(const bson_t *doc, const char *path)
{
	bson_iter_t it, sub;

	if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &sub) ||
	    !BSON_ITER_HOLDS_NUMBER(&sub))
		return 0;
	return bson_iter_as_double(&sub);
}

/* v in units of base (1024 or 1000) with three significant digits: 253M, 82.0M, 1.01G. */
static void three_digits(double v, double base, const char *units, char *out, size_t cap)
{
	size_t u = 0;

	while (v >= base && units[u + 1]) {
		v /= base;
		u++;
	}
	snprintf(out, cap,
		 u == 0 || v >= 100 ? "%.0f%c"
		 : v >= 10	    ? "%.1f%c"
				    : "%.2f%c",
		 v, units[u]);
}

void fs_stat_size(double bytes, char *out, size_t cap)
{
	three_digits(bytes, 1024, "BKMGTP", out, cap);
}

void fs_stat_bits(double v, char *out, size_t cap)
{
	three_digits(v, 1000, "bkmgt", out, cap);
}

/* A per-second rate of the counter at path between the samples. */
static int64_t rate(const bson_t *prev, const bson_t *cur, const char *path, double secs)
{
	double d = num_at(cur, path) - num_at(prev, path);

	if (d < 0) /* the daemon restarted: its counters began again */
		d = num_at(cur, path);
	return (int64_t)(d / secs); /* mongostat truncates (integer division) */
}

void fs_stat_row(const bson_t *prev, const bson_t *cur, double secs, bool human, int64_t now_ms,
		 struct fs_stat_row *row)
{
	static const char *const ops[] = {"opcounters.insert", "opcounters.query",
					  "opcounters.update", "opcounters.delete"};
	struct tm tm;
	time_t t = (time_t)(now_ms / 1000);
	char stamp[32];
	int c = 0;

	if (secs <= 0)
		secs = 1;
	for (int i = 0; i < 4; i++) {
		int64_t v = rate(prev, cur, ops[i], secs);

		/* mongostat: "*N" counts replicated operations only; none at all is "*0" */
		if (v)
			snprintf(row->cell[c++], sizeof(row->cell[0]), "%" PRId64, v);
		else
			snprintf(row->cell[c++], sizeof(row->cell[0]), "*0");
	}
	snprintf(row->cell[c++], sizeof(row->cell[0]), "%" PRId64,
		 rate(prev, cur, "opcounters.getmore", secs));
	snprintf(row->cell[c++], sizeof(row->cell[0]), "%" PRId64 "|0",
		 rate(prev, cur, "opcounters.command", secs));
	if (human) {
		fs_stat_size(num_at(cur, "mem.virtual") * 1024 * 1024, row->cell[c++],
			     sizeof(row->cell[0]));
		fs_stat_size(num_at(cur, "mem.resident") * 1024 * 1024, row->cell[c++],
			     sizeof(row->cell[0]));
	} else {
		snprintf(row->cell[c++], sizeof(row->cell[0]), "%.0f",
			 num_at(cur, "mem.virtual") * 1024 * 1024);
		snprintf(row->cell[c++], sizeof(row->cell[0]), "%.0f",
			 num_at(cur, "mem.resident") * 1024 * 1024);
	}
	snprintf(row->cell[c++], sizeof(row->cell[0]), "%.0f|%.0f",
		 num_at(cur, "globalLock.currentQueue.readers"),
		 num_at(cur, "globalLock.currentQueue.writers"));
	snprintf(row->cell[c++], sizeof(row->cell[0]), "%.0f|%.0f",
		 num_at(cur, "globalLock.activeClients.readers"),
		 num_at(cur, "globalLock.activeClients.writers"));
	if (human) {
		fs_stat_bits((double)rate(prev, cur, "network.bytesIn", secs), row->cell[c++],
			     sizeof(row->cell[0]));
		fs_stat_bits((double)rate(prev, cur, "network.bytesOut", secs), row->cell[c++],
			     sizeof(row->cell[0]));
	} else {
		snprintf(row->cell[c++], sizeof(row->cell[0]), "%" PRId64,
			 rate(prev, cur, "network.bytesIn", secs));
		snprintf(row->cell[c++], sizeof(row->cell[0]), "%" PRId64,
			 rate(prev, cur, "network.bytesOut", secs));
	}
	snprintf(row->cell[c++], sizeof(row->cell[0]), "%.0f", num_at(cur, "connections.current"));
	if (human) {
		/* Go's time.StampMilli: "Jan _2 15:04:05.000", local time */
		localtime_r(&t, &tm);
		strftime(stamp, sizeof(stamp), "%b %e %H:%M:%S", &tm);
		snprintf(row->cell[c++], sizeof(row->cell[0]), "%s.%03d", stamp,
			 (int)(now_ms % 1000));
	} else {
		gmtime_r(&t, &tm);
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
		snprintf(row->cell[c++], sizeof(row->cell[0]), "%s", stamp);
	}
}

void fs_stat_grid_print(struct fs_stat_grid *g, const struct fs_stat_row *r, struct dfs_buf *out)
{
	bool header = !g->noheaders && g->rows % 10 == 0;

	for (int i = 0; i < FS_STAT_NCOLS; i++) {
		int w = (int)strlen(r->cell[i]);

		if (header && (int)strlen(fs_stat_keys[i]) > w)
			w = (int)strlen(fs_stat_keys[i]);
		if (w > g->width[i]) /* widths only grow */
			g->width[i] = w;
	}
	if (header) {
		for (int i = 0; i < FS_STAT_NCOLS; i++)
			dfs_buf_printf(out, "%s%*s", i ? " " : "", g->width[i], fs_stat_keys[i]);
		dfs_buf_putc(out, '\n');
	}
	for (int i = 0; i < FS_STAT_NCOLS; i++)
		dfs_buf_printf(out, "%s%*s", i ? " " : "", g->width[i], r->cell[i]);
	dfs_buf_putc(out, '\n');
	g->rows++;
}

/* Appends s as a JSON string. */
static void json_str(struct dfs_buf *out, const char *s)
{
	dfs_buf_putc(out, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			dfs_buf_putc(out, '\\');
		if ((unsigned char)*s < 0x20)
			dfs_buf_printf(out, "\\u%04x", (unsigned char)*s);
		else
			dfs_buf_putc(out, *s);
	}
	dfs_buf_putc(out, '"');
}

/* The column indexes in the order of their keys' names (mongostat's JSON is a Go map). */
static int key_cmp(const void *a, const void *b)
{
	return strcmp(fs_stat_keys[*(const int *)a], fs_stat_keys[*(const int *)b]);
}

void fs_stat_json(const char *host, const struct fs_stat_row *r, struct dfs_buf *out)
{
	int order[FS_STAT_NCOLS];

	for (int i = 0; i < FS_STAT_NCOLS; i++)
		order[i] = i;
	qsort(order, FS_STAT_NCOLS, sizeof(order[0]), key_cmp);
	dfs_buf_putc(out, '{');
	json_str(out, host);
	dfs_buf_puts(out, ":{");
	for (int k = 0; k < FS_STAT_NCOLS; k++) {
		int i = order[k];
		const char *v = r->cell[i];

		if (k)
			dfs_buf_putc(out, ',');
		json_str(out, fs_stat_keys[i]);
		dfs_buf_putc(out, ':');
		/* the time as mongostat's JSON has it: "15:04:05" (a grid cell holds the date) */
		if (!strcmp(fs_stat_keys[i], "time") && strlen(v) >= 8) {
			const char *hms = strchr(v, ':');

			if (hms && hms - v >= 2) {
				char t[9];

				memcpy(t, hms - 2, 8);
				t[8] = 0;
				json_str(out, t);
				continue;
			}
		}
		json_str(out, v);
	}
	dfs_buf_puts(out, "}}\n");
}

/* ---- top ------------------------------------------------------------------------------ */

struct top_line {
	const char *ns;					      /* Borrowed from the sample */
	int64_t total, read, write, total_n, read_n, write_n; /* Δ µs and Δ counts */
};

static int top_cmp(const void *a, const void *b)
{
	const struct top_line *x = a, *y = b;

	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(x->ns, y->ns);
}

/* The Δ lines of every namespace of cur (prev: the baseline). *out Owned (free). */
static int top_lines(const bson_t *prev, const bson_t *cur, struct top_line **out, size_t *n)
{
	bson_iter_t it, tot;
	size_t cap = 0;
	char path[300];

	*out = NULL;
	*n = 0;
	if (!bson_iter_init_find(&it, cur, "totals") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
	    !bson_iter_recurse(&it, &tot))
		return 0;
	while (bson_iter_next(&tot)) {
		const char *ns = bson_iter_key(&tot);
		struct top_line *l;
		static const char *const cols[] = {"total", "readLock", "writeLock"};
		int64_t v[6];
		bson_t one;
		const uint8_t *d;
		uint32_t len;

		if (!BSON_ITER_HOLDS_DOCUMENT(&tot))
			continue; /* the note */
		bson_iter_document(&tot, &len, &d);
		if (!bson_init_static(&one, d, len))
			continue;
		bool in_prev = !prev;

		for (int c = 0; c < 3; c++) {
			bson_t old;
			bson_iter_t pi, po;
			bool have = false;

			snprintf(path, sizeof(path), "%s.time", cols[c]);
			v[c] = (int64_t)num_at(&one, path);
			snprintf(path, sizeof(path), "%s.count", cols[c]);
			v[c + 3] = (int64_t)num_at(&one, path);
			if (prev && bson_iter_init_find(&pi, prev, "totals") &&
			    bson_iter_recurse(&pi, &po) && bson_iter_find(&po, ns) &&
			    BSON_ITER_HOLDS_DOCUMENT(&po)) {
				bson_iter_document(&po, &len, &d);
				have = bson_init_static(&old, d, len);
			}
			if (have) {
				snprintf(path, sizeof(path), "%s.time", cols[c]);
				v[c] -= (int64_t)num_at(&old, path);
				snprintf(path, sizeof(path), "%s.count", cols[c]);
				v[c + 3] -= (int64_t)num_at(&old, path);
				in_prev = true;
			}
		}
		if (!in_prev) /* mongotop: a namespace new since the last sample waits a round */
			continue;
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct top_line *p = realloc(*out, nc * sizeof(*p));

			if (!p)
				return DFS_ENOMEM;
			*out = p;
			cap = nc;
		}
		l = &(*out)[(*n)++];
		l->ns = ns;
		l->total = v[0];
		l->read = v[1];
		l->write = v[2];
		l->total_n = v[3];
		l->read_n = v[4];
		l->write_n = v[5];
	}
	qsort(*out, *n, sizeof(**out), top_cmp);
	return 0;
}

int fs_top_block(const bson_t *prev, const bson_t *cur, int64_t now_ms, bool json,
		 struct dfs_buf *out)
{
	char cells[11][4][160], stamp[64];
	int width[4] = {0};
	struct top_line *l;
	size_t n, rows;
	time_t t = (time_t)(now_ms / 1000);
	struct tm tm;

	if (top_lines(prev, cur, &l, &n))
		return DFS_ENOMEM;
	gmtime_r(&t, &tm);
	if (json) {
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
		dfs_buf_puts(out, "{\"totals\":{");
		for (size_t i = 0; i < n; i++) {
			if (i)
				dfs_buf_putc(out, ',');
			json_str(out, l[i].ns);
			dfs_buf_printf(out,
				       ":{\"total\":{\"time\":%" PRId64 ",\"count\":%" PRId64
				       "},\"read\":{\"time\":%" PRId64 ",\"count\":%" PRId64
				       "},\"write\":{\"time\":%" PRId64 ",\"count\":%" PRId64 "}}",
				       l[i].total / 1000, l[i].total_n, l[i].read / 1000,
				       l[i].read_n, l[i].write / 1000, l[i].write_n);
		}
		dfs_buf_printf(out, "},\"time\":\"%s.%03dZ\"}\n", stamp, (int)(now_ms % 1000));
		free(l);
		return 0;
	}
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(cells[0][0], sizeof(cells[0][0]), "ns");
	snprintf(cells[0][1], sizeof(cells[0][1]), "total");
	snprintf(cells[0][2], sizeof(cells[0][2]), "read");
	snprintf(cells[0][3], sizeof(cells[0][3]), "write");
	rows = n < 10 ? n : 10;
	for (size_t i = 0; i < rows; i++) {
		snprintf(cells[i + 1][0], sizeof(cells[0][0]), "%s", l[i].ns);
		snprintf(cells[i + 1][1], sizeof(cells[0][0]), "%" PRId64 "ms", l[i].total / 1000);
		snprintf(cells[i + 1][2], sizeof(cells[0][0]), "%" PRId64 "ms", l[i].read / 1000);
		snprintf(cells[i + 1][3], sizeof(cells[0][0]), "%" PRId64 "ms", l[i].write / 1000);
	}
	for (size_t r = 0; r <= rows; r++)
		for (int c = 0; c < 4; c++)
			if ((int)strlen(cells[r][c]) > width[c])
				width[c] = (int)strlen(cells[r][c]);
	for (size_t r = 0; r <= rows; r++) {
		for (int c = 0; c < 4; c++)
			dfs_buf_printf(out, "%s%*s", c ? "    " : "", width[c], cells[r][c]);
		if (r == 0)
			dfs_buf_printf(out, "    %s", stamp);
		dfs_buf_putc(out, '\n');
	}
	dfs_buf_putc(out, '\n');
	free(l);
	return 0;
}

/* ---- the sampling loops ----------------------------------------------------------------- */

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads and parses path into doc (initialised here). */
static int sample(const char *path, bson_t *doc, struct dfs_err *err)
{
	struct dfs_buf b;
	char chunk[8192];
	size_t got;
	FILE *f = fopen(path, "r");
	int rc;

	bson_init(doc);
	if (!f)
		return dfs_err_set(err, DFS_EIO, "cannot read '%s': %s", path, strerror(errno));
	dfs_buf_init(&b);
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
		dfs_buf_append(&b, chunk, got);
	rc = ferror(f) ? dfs_err_set(err, DFS_EIO, "cannot read '%s': %s", path, strerror(errno))
		       : 0;
	fclose(f);
	if (!rc && (rc = store_codec_parse_doc(b.data ? b.data : "", b.len, doc, err)))
		dfs_err_prefix(err, "'%s': ", path);
	dfs_buf_release(&b);
	return rc;
}

static void sleep_s(long s)
{
	struct timespec ts = {.tv_sec = s};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The command line of either view. */
struct view {
	const char *cmd;  /* "stat" or "top" */
	const char *mnt;  /* MOUNTPOINT */
	const char *file; /* the sampled file under /.docfs */
	long interval, rows;
	bool json, human;
	struct fs_stat_grid grid; /* stat's rows */
};

/* The interval argument: a whole number of seconds, at least 1. */
static int interval_arg(const struct view *v, const char *s, long *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(s, &end, 10);
	if (errno || *end || end == s) {
		fprintf(stderr,
			"docfs %s: the interval must be a whole number of seconds, not '%s'\n",
			v->cmd, s);
		return 1;
	}
	if (n < 1) { /* each tool's own words */
		if (!strcmp(v->cmd, "stat"))
			fprintf(stderr, "docfs stat: sleep interval must be at least 1 second\n");
		else
			fprintf(stderr, "docfs top: sleep interval must be greater than 0\n");
		return 1;
	}
	*out = n;
	return 0;
}

/* Parses argv into v (cmd and file set by the caller); stat's own options only for stat. */
static int view_args(int argc, char **argv, struct view *v)
{
	bool stat = !strcmp(v->cmd, "stat");

	v->interval = 1;
	v->human = true;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if ((!strcmp(a, "-n") || !strcmp(a, "--rowcount")) && i + 1 < argc) {
			char *end;

			v->rows = strtol(argv[++i], &end, 10);
			if (*end || end == argv[i] || v->rows < 0) {
				fprintf(stderr, "docfs %s: -n needs a count >= 0, not '%s'\n",
					v->cmd, argv[i]);
				return 1;
			}
		} else if (!strcmp(a, "--json")) {
			v->json = true;
		} else if (stat && !strcmp(a, "--noheaders")) {
			v->grid.noheaders = true;
		} else if (stat && !strcmp(a, "--humanReadable=false")) {
			v->human = false;
		} else if (stat &&
			   (!strcmp(a, "--humanReadable=true") || !strcmp(a, "--humanReadable"))) {
			v->human = true;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "docfs %s: unknown option '%s'\n", v->cmd, a);
			return 1;
		} else if (!v->mnt) {
			v->mnt = a;
		} else if (interval_arg(v, a, &v->interval)) {
			return 1;
		}
	}
	if (!v->mnt) {
		fprintf(stderr, "usage: docfs %s [-n N] [--json]%s MOUNTPOINT [SECONDS]\n", v->cmd,
			stat ? " [--noheaders] [--humanReadable=false]" : "");
		return 1;
	}
	return 0;
}

/* stat's row of two samples, now_ms the second's time. */
static void stat_render(struct view *v, const bson_t *prev, const bson_t *cur, int64_t prev_ms,
			int64_t now_ms, struct dfs_buf *out)
{
	struct fs_stat_row r;
	/* the daemon's own clock, when both samples have it */
	double secs = (num_at(cur, "uptimeMillis") - num_at(prev, "uptimeMillis")) / 1000;

	if (secs <= 0)
		secs = (double)(now_ms - prev_ms) / 1000;
	fs_stat_row(prev, cur, secs, v->human, now_ms, &r);
	if (v->json) {
		bson_iter_t it;
		const char *host =
			bson_iter_init_find(&it, cur, "host") && BSON_ITER_HOLDS_UTF8(&it)
				? bson_iter_utf8(&it, NULL)
				: v->mnt;

		fs_stat_json(host, &r, out);
	} else {
		fs_stat_grid_print(&v->grid, &r, out);
	}
}

/* Samples the view's file every interval and prints what render makes of two samples. */
static int view_run(struct view *v, void (*render)(struct view *, const bson_t *, const bson_t *,
						   int64_t, int64_t, struct dfs_buf *))
{
	struct dfs_err err = {0};
	char path[4096];
	bson_t prev, cur;
	int64_t prev_ms;

	snprintf(path, sizeof(path), "%s/.docfs/%s", v->mnt, v->file);
	if (sample(path, &prev, &err)) {
		fprintf(stderr, "docfs %s: %s (is '%s' a docfs mount?)\n", v->cmd, err.msg, v->mnt);
		bson_destroy(&prev);
		return 1;
	}
	prev_ms = wall_ms();
	if (!strcmp(v->cmd, "top") && !v->json)
		printf("connected to: %s\n", v->mnt);
	for (long done = 0; !v->rows || done < v->rows; done++) {
		struct dfs_buf out;
		int64_t now;

		sleep_s(v->interval);
		dfs_err_clear(&err);
		now = wall_ms();
		dfs_buf_init(&out);
		if (sample(path, &cur, &err)) {
			bson_destroy(&cur);
			dfs_buf_printf(&out, "no data received: %s\n", err.msg);
		} else {
			render(v, &prev, &cur, prev_ms, now, &out);
			bson_destroy(&prev);
			bson_steal(&prev, &cur); /* a bson_t is not copied by assignment */
			prev_ms = now;
		}
		fwrite(out.data ? out.data : "", 1, out.len, stdout);
		fflush(stdout);
		dfs_buf_release(&out);
	}
	bson_destroy(&prev);
	return 0;
}

int fs_stat_main(int argc, char **argv)
{
	struct view v = {.cmd = "stat", .file = "serverStatus"};

	return view_args(argc, argv, &v) ? 1 : view_run(&v, stat_render);
}

static void top_render(struct view *v, const bson_t *prev, const bson_t *cur, int64_t prev_ms,
		       int64_t now_ms, struct dfs_buf *out)
{
	(void)prev_ms;
	fs_top_block(prev, cur, now_ms, v->json, out);
}

int fs_top_main(int argc, char **argv)
{
	struct view v = {.cmd = "top", .file = "top"};

	return view_args(argc, argv, &v) ? 1 : view_run(&v, top_render);
}
