/*
 * tz.c - Olson time zones ("Europe/Paris") for the date expressions of expr.c: the UTC offset
 * of a zone at an instant, read from the system's compiled TZif files (/usr/share/zoneinfo,
 * or $TZDIR). It does not parse dates or format them (expr.c does), and it never touches the
 * process's TZ or calls localtime (neither is thread-safe).
 *
 * Design notes
 * 1. A zone is loaded once (the 64-bit data block of a version 2+ file, else the 32-bit one)
 *    into a transition table kept for the life of the process in a small cache under a
 *    mutex; a name that fails to load is not cached (the error says why).
 * 2. Instants before the first transition use the first standard-time type; instants after
 *    the last one keep the last offset (the files' footer rule for the far future is not
 *    evaluated: Debian's "fat" files list transitions through 2037).
 * 3. Names are checked before they reach the file system: letters, digits, '_', '-', '+'
 *    and '/' between non-empty components, no "." or ".." component.
 */
#include "agg_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TZ_CACHE 32 /* zones kept loaded */

struct zone {
	char name[64];	 /* Olson name */
	int64_t *trans;	 /* Owned: transition instants, seconds, ascending */
	int32_t *offs;	 /* Owned: UTC offset (seconds) from each transition on */
	size_t n;	 /* transitions */
	int32_t initial; /* offset before the first transition */
};

static struct zone cache[TZ_CACHE];
static size_t ncache;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static bool name_ok(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len >= sizeof(((struct zone *)0)->name) || s[0] == '/' || s[len - 1] == '/')
		return false;
	for (const char *p = s; *p; p++) {
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '+' || *p == '/'))
			return false;
		if (*p == '/' && p[1] == '/')
			return false;
	}
	/* no "." or ".." components: they cannot be written with the characters above */
	return true;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* Parses one data block of width 4 or 8 at p (len bytes left) into z. Returns the block's
 * size, or 0 when it is malformed. */
static size_t parse_block(const unsigned char *p, size_t len, int width, struct zone *z)
{
	uint32_t isut, isstd, leap, timecnt, typecnt, charcnt;
	size_t need;
	const unsigned char *times, *idx, *types;

	if (len < 44 || memcmp(p, "TZif", 4))
		return 0;
	isut = be32(p + 20);
	isstd = be32(p + 24);
	leap = be32(p + 28);
	timecnt = be32(p + 32);
	typecnt = be32(p + 36);
	charcnt = be32(p + 40);
	if (typecnt == 0 || typecnt > 256 || timecnt > 100000)
		return 0;
	need = 44 + (size_t)timecnt * (width + 1) + (size_t)typecnt * 6 + charcnt +
	       (size_t)leap * (width + 4) + isstd + isut;
	if (need > len)
		return 0;
	times = p + 44;
	idx = times + (size_t)timecnt * width;
	types = idx + timecnt;
	z->trans = calloc(timecnt + 1, sizeof(*z->trans));
	z->offs = calloc(timecnt + 1, sizeof(*z->offs));
	if (!z->trans || !z->offs)
		return 0;
	for (uint32_t i = 0; i < timecnt; i++) {
		if (idx[i] >= typecnt)
			return 0;
		z->trans[i] = width == 8 ? be64(times + 8 * (size_t)i)
					 : (int32_t)be32(times + 4 * (size_t)i);
		z->offs[i] = (int32_t)be32(types + 6 * (size_t)idx[i]);
	}
	z->n = timecnt;
	z->initial = (int32_t)be32(types); /* type 0 (first standard-time type in practice) */
	for (uint32_t t = 0; t < typecnt; t++)
		if (!types[6 * t + 4]) { /* not DST */
			z->initial = (int32_t)be32(types + 6 * t);
			break;
		}
	return need;
}

static int load(const char *name, struct zone *z, struct dfs_err *err)
{
	const char *dir = getenv("TZDIR");
	char path[512];
	unsigned char *buf = NULL;
	size_t len = 0, cap = 0, first;
	FILE *f;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir && *dir ? dir : "/usr/share/zoneinfo", name);
	f = fopen(path, "rb");
	if (!f)
		return dfs_err_set(err, DFS_EINVAL, "unrecognized time zone identifier '%s'", name);
	for (;;) {
		size_t got;

		if (len == cap) {
			unsigned char *nb;

			cap = cap ? 2 * cap : 8192;
			if (cap > (1u << 22) || !(nb = realloc(buf, cap))) {
				rc = dfs_err_set(err, DFS_EINVAL,
						 "time zone file of '%s' is too big", name);
				goto done;
			}
			buf = nb;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0)
			break;
	}
	memset(z, 0, sizeof(*z));
	snprintf(z->name, sizeof(z->name), "%s", name);
	first = parse_block(buf, len, 4, z);
	if (first && len > 4 && buf[4] >= '2') {
		/* version 2+: the 64-bit block follows the 32-bit one; use it instead */
		struct zone z64 = {0};

		if (parse_block(buf + first, len - first, 8, &z64)) {
			free(z->trans);
			free(z->offs);
			memcpy(z64.name, z->name, sizeof(z64.name));
			*z = z64;
		} else {
			free(z64.trans);
			free(z64.offs);
		}
	}
	if (!first) {
		free(z->trans);
		free(z->offs);
		rc = dfs_err_set(err, DFS_EINVAL, "'%s' is not a valid time zone file", name);
	}
done:
	fclose(f);
	free(buf);
	return rc;
}

int agg__tz_offset(const char *name, int64_t utc_ms, int64_t *off_ms, struct dfs_err *err)
{
	const struct zone *z = NULL;
	int64_t s = utc_ms / 1000 - (utc_ms % 1000 < 0);
	size_t lo, hi;
	int32_t off;
	int rc = 0;

	if (!name_ok(name))
		return dfs_err_set(err, DFS_EINVAL, "unrecognized time zone identifier '%s'", name);
	pthread_mutex_lock(&cache_mu);
	for (size_t i = 0; i < ncache; i++)
		if (!strcmp(cache[i].name, name)) {
			z = &cache[i];
			break;
		}
	if (!z) {
		struct zone nz;

		if (!(rc = load(name, &nz, err))) {
			if (ncache == TZ_CACHE) { /* full: drop the oldest */
				free(cache[0].trans);
				free(cache[0].offs);
				memmove(&cache[0], &cache[1], (TZ_CACHE - 1) * sizeof(cache[0]));
				ncache--;
			}
			cache[ncache] = nz;
			z = &cache[ncache++];
		}
	}
	if (!rc) {
		/* the last transition at or before s */
		lo = 0;
		hi = z->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (z->trans[mid] <= s)
				lo = mid + 1;
			else
				hi = mid;
		}
		off = lo == 0 ? z->initial : z->offs[lo - 1];
		*off_ms = (int64_t)off * 1000;
	}
	pthread_mutex_unlock(&cache_mu);
	return rc;
}
