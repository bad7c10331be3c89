/*
 * test_stattop.c - unit tests of `docfs stat` and `docfs top`'s rows (fs/ops/stattop.c): the
 * units and significant digits of sizes and rates, mongostat's "*0" and "N|0" forms, rates
 * from counter differences (truncated, and over a restart), widths that only grow, a
 * header every 10 rows, the JSON forms, and mongotop's blocks (sorted by total time, in
 * milliseconds, at most 10 namespaces, only namespaces of both samples).
 */
#include "fs_int.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* A document from shell-literal text. */
static void doc(const char *text, bson_t *out)
{
	struct dfs_err err = {0};

	bson_init(out);
	ck_assert_msg(store_codec_parse_doc(text, strlen(text), out, &err) == 0, "%s", err.msg);
}

START_TEST(test_stat_units)
{
	char s[32];

	fs_stat_size(1.01 * 1024 * 1024 * 1024, s, sizeof(s));
	ck_assert_str_eq(s, "1.01G");
	fs_stat_size(82.0 * 1024 * 1024, s, sizeof(s));
	ck_assert_str_eq(s, "82.0M");
	fs_stat_size(253.0 * 1024 * 1024, s, sizeof(s));
	ck_assert_str_eq(s, "253M");
	fs_stat_size(512, s, sizeof(s));
	ck_assert_str_eq(s, "512B");
	fs_stat_bits(262, s, sizeof(s));
	ck_assert_str_eq(s, "262b");
	fs_stat_bits(4520, s, sizeof(s));
	ck_assert_str_eq(s, "4.52k");
	fs_stat_bits(137000, s, sizeof(s));
	ck_assert_str_eq(s, "137k");
	fs_stat_bits(15300000, s, sizeof(s));
	ck_assert_str_eq(s, "15.3m");
}
END_TEST

static const char *const sample0 =
	"{host: 'h1', uptimeMillis: 1000, opcounters: {insert: 0, query: 10, update: 0, "
	"delete: 0, getmore: 0, command: 3}, mem: {virtual: 1034, resident: 82}, "
	"globalLock: {currentQueue: {readers: 0, writers: 0}, activeClients: {readers: 1, "
	"writers: 2}}, network: {bytesIn: 1000, bytesOut: 5000}, connections: {current: 4}}";
static const char *const sample1 =
	"{host: 'h1', uptimeMillis: 3000, opcounters: {insert: 5, query: 10, update: 2, "
	"delete: 0, getmore: 7, command: 9}, mem: {virtual: 1034, resident: 253}, "
	"globalLock: {currentQueue: {readers: 0, writers: 0}, activeClients: {readers: 1, "
	"writers: 2}}, network: {bytesIn: 1524, bytesOut: 14040}, connections: {current: 4}}";

START_TEST(test_stat_row)
{
	bson_t a, b;
	struct fs_stat_row r;

	doc(sample0, &a);
	doc(sample1, &b);
	/* 1765000000123: 2025-12-06T05:46:40.123Z */
	fs_stat_row(&a, &b, 2.0, true, 1765000000123, &r);
	ck_assert_str_eq(r.cell[0], "2"); /* 5 inserts in 2 s: 2.5, truncated */
	ck_assert_str_eq(r.cell[1], "*0");
	ck_assert_str_eq(r.cell[2], "1");
	ck_assert_str_eq(r.cell[3], "*0");
	ck_assert_str_eq(r.cell[4], "3");
	ck_assert_str_eq(r.cell[5], "3|0");
	ck_assert_str_eq(r.cell[6], "1.01G");
	ck_assert_str_eq(r.cell[7], "253M");
	ck_assert_str_eq(r.cell[8], "0|0");
	ck_assert_str_eq(r.cell[9], "1|2");
	ck_assert_str_eq(r.cell[10], "262b");
	ck_assert_str_eq(r.cell[11], "4.52k");
	ck_assert_str_eq(r.cell[12], "4");
	ck_assert_msg(strstr(r.cell[13], ".123") != NULL, "time %s", r.cell[13]);
	/* not human: bytes and whole rates, an ISO time */
	fs_stat_row(&a, &b, 2.0, false, 1765000000123, &r);
	ck_assert_str_eq(r.cell[7], "265289728");
	ck_assert_str_eq(r.cell[10], "262");
	ck_assert_str_eq(r.cell[13], "2025-12-06T05:46:40Z");
	/* the daemon restarted: the counters began again, the rate is of the new counts */
	fs_stat_row(&b, &a, 2.0, false, 1765000000123, &r);
	ck_assert_str_eq(r.cell[5], "1|0"); /* 3 commands since the restart, in 2 s */
	bson_destroy(&a);
	bson_destroy(&b);
}
END_TEST

START_TEST(test_stat_grid_headers_and_widths)
{
	bson_t a, b;
	struct fs_stat_row r;
	struct fs_stat_grid g = {0};
	struct dfs_buf out;
	int headers = 0, lines = 0;
	char *line, *save = NULL;
	size_t w0 = 0;

	doc(sample0, &a);
	doc(sample1, &b);
	fs_stat_row(&a, &b, 2.0, true, 1765000000123, &r);
	dfs_buf_init(&out);
	for (int i = 0; i < 21; i++) {
		if (i == 12) /* a wider cell: the column widens, and stays wide */
			snprintf(r.cell[0], sizeof(r.cell[0]), "123456789");
		fs_stat_grid_print(&g, &r, &out);
	}
	for (line = strtok_r(out.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		lines++;
		if (strstr(line, "insert"))
			headers++;
		if (lines == 1) {
			ck_assert_msg(strstr(line, "insert query update delete getmore command") !=
					      NULL,
				      "header: %s", line);
			w0 = strlen(line);
		}
		if (lines == 2)
			ck_assert_uint_eq(strlen(line), w0); /* a row lines up with its header */
	}
	ck_assert_int_eq(headers, 3); /* rows 0, 10 and 20 */
	ck_assert_int_eq(lines, 24);
	ck_assert_int_eq(g.width[0], 9);
	dfs_buf_release(&out);

	/* --noheaders: rows only */
	memset(&g, 0, sizeof(g));
	g.noheaders = true;
	dfs_buf_init(&out);
	for (int i = 0; i < 11; i++)
		fs_stat_grid_print(&g, &r, &out);
	ck_assert_ptr_null(strstr(out.data, "insert"));
	dfs_buf_release(&out);
	bson_destroy(&a);
	bson_destroy(&b);
}
END_TEST

START_TEST(test_stat_json)
{
	bson_t a, b, j;
	struct fs_stat_row r;
	struct dfs_buf out;
	bson_iter_t it, h;
	const char *prev = "";
	int keys = 0;

	doc(sample0, &a);
	doc(sample1, &b);
	fs_stat_row(&a, &b, 2.0, true, 1765000000123, &r);
	dfs_buf_init(&out);
	fs_stat_json("h\"1", &r, &out);
	ck_assert(out.len > 0 && out.data[out.len - 1] == '\n');
	doc(out.data, &j);
	ck_assert(bson_iter_init_find(&it, &j, "h\"1") && bson_iter_recurse(&it, &h));
	while (bson_iter_next(&h)) {
		ck_assert(BSON_ITER_HOLDS_UTF8(&h)); /* every value a string, as mongostat's */
		ck_assert_msg(strcmp(prev, bson_iter_key(&h)) < 0, "keys not sorted at %s",
			      bson_iter_key(&h));
		prev = bson_iter_key(&h);
		if (!strcmp(prev, "insert"))
			ck_assert_str_eq(bson_iter_utf8(&h, NULL), "2");
		if (!strcmp(prev, "time"))
			ck_assert_uint_eq(strlen(bson_iter_utf8(&h, NULL)), 8); /* 15:04:05 */
		keys++;
	}
	ck_assert_int_eq(keys, FS_STAT_NCOLS);
	dfs_buf_release(&out);
	bson_destroy(&j);
	bson_destroy(&a);
	bson_destroy(&b);
}
END_TEST

/* A top sample with namespaces ns0..ns<n-1>, ns<i> at total (i+1)*k ms. */
static void top_sample(int n, int k, bson_t *out)
{
	struct dfs_buf t;

	dfs_buf_init(&t);
	dfs_buf_puts(&t, "{totals: {note: 'all times in microseconds'");
	for (int i = 0; i < n; i++)
		dfs_buf_printf(&t,
			       ", 'db.ns%d': {total: {time: %d, count: %d}, readLock: {time: %d, "
			       "count: %d}, writeLock: {time: 0, count: 0}}",
			       i, (i + 1) * k * 1000, (i + 1) * k, (i + 1) * k * 1000, (i + 1) * k);
	dfs_buf_puts(&t, "}}");
	doc(t.data, out);
	dfs_buf_release(&t);
}

START_TEST(test_top_block)
{
	bson_t a, b, c;
	struct dfs_buf out;
	char *first, *p;
	int lines = 0;

	top_sample(12, 1, &a);
	top_sample(12, 3, &b);
	dfs_buf_init(&out);
	ck_assert_int_eq(fs_top_block(&a, &b, 1765000000123, false, &out), 0);
	first = strchr(out.data, '\n');
	ck_assert_ptr_nonnull(first);
	ck_assert_msg(strstr(out.data, "ns") < first && strstr(out.data, "total") < first &&
			      strstr(out.data, "2025-12-06T05:46:40Z") < first,
		      "header: %s", out.data);
	/* the busiest first: ns11 went from 12 ms to 36 ms, 24ms */
	ck_assert_msg(strncmp(first + 1 + strspn(first + 1, " "), "db.ns11", 7) == 0, "%s",
		      out.data);
	ck_assert_ptr_nonnull(strstr(first, "24ms"));
	for (p = out.data; *p; p++)
		lines += *p == '\n';
	ck_assert_int_eq(lines, 12); /* header, 10 namespaces, a blank line */
	/* 4 ms and 2 ms: the 11th and 12th, left out */
	ck_assert_ptr_null(strstr(out.data, "db.ns1 "));
	ck_assert_ptr_null(strstr(out.data, "db.ns0"));
	dfs_buf_release(&out);

	/* a namespace new since the last sample waits a round */
	bson_destroy(&a);
	top_sample(2, 1, &a);
	dfs_buf_init(&out);
	ck_assert_int_eq(fs_top_block(&a, &b, 1765000000123, false, &out), 0);
	ck_assert_ptr_nonnull(strstr(out.data, "db.ns1"));
	ck_assert_ptr_null(strstr(out.data, "db.ns2"));
	dfs_buf_release(&out);

	/* --json: one object a line, times in ms */
	dfs_buf_init(&out);
	ck_assert_int_eq(fs_top_block(&a, &b, 1765000000123, true, &out), 0);
	doc(out.data, &c);
	{
		bson_iter_t it, tot, sub;

		/* namespaces hold dots: found by key, not by a dotted path */
		ck_assert(bson_iter_init_find(&it, &c, "totals") && bson_iter_recurse(&it, &tot));
		ck_assert(bson_iter_find(&tot, "db.ns1"));
		ck_assert(bson_iter_recurse(&tot, &it));
		ck_assert(bson_iter_find_descendant(&it, "total.time", &sub));
		ck_assert_int_eq(bson_iter_as_int64(&sub), 4); /* 6 ms - 2 ms */
		bson_iter_init(&it, &c);
		ck_assert(bson_iter_find_descendant(&it, "time", &sub));
		ck_assert_str_eq(bson_iter_utf8(&sub, NULL), "2025-12-06T05:46:40.123Z");
	}
	bson_destroy(&c);
	dfs_buf_release(&out);
	bson_destroy(&a);
	bson_destroy(&b);
}
END_TEST

static Suite *stattop_suite(void)
{
	Suite *s = suite_create("stattop");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_stat_units);
	tcase_add_test(tc, test_stat_row);
	tcase_add_test(tc, test_stat_grid_headers_and_widths);
	tcase_add_test(tc, test_stat_json);
	tcase_add_test(tc, test_top_block);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(stattop_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
