/* test_render.c - fs/paths/render.c: results rendered on a second thread are byte for byte what
 * rendering each document in turn gives, in every format, spilled or not; errors found on
 * the thread reach the caller; an abandoned result stops cleanly. */
#include "fs_int.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* Past this document number, documents are huge (test_..._huge_documents). */
static int huge_from = 1 << 30;

/* Document i: an int _id (unless without_id), a string whose length varies a lot (a few
 * documents are larger than a whole batch), a nested document. */
static void make_doc(int i, bool without_id, bson_t *d)
{
	size_t len = (size_t)(i * 37 % 300) + (i % 997 == 5 ? 200000 : 0) +
		     (i >= huge_from ? (size_t)(3 + i % 3) * 1024 * 1024 : 0);
	char *pad = malloc(len + 1);
	bson_t sub;

	memset(pad, 'a' + i % 26, len);
	pad[len] = '\0';
	bson_init(d);
	if (!without_id)
		BSON_APPEND_INT32(d, "_id", i);
	BSON_APPEND_UTF8(d, "pad", pad);
	BSON_APPEND_DOCUMENT_BEGIN(d, "sub", &sub);
	BSON_APPEND_DOUBLE(&sub, "x", i / 3.0);
	bson_append_document_end(d, &sub);
	free(pad);
}

/* What format gives for documents 0..n-1, rendered one by one. */
static void expected(int format, int n, struct dfs_buf *out)
{
	struct dfs_err err = {0};

	if (format == FSQ_JSON)
		dfs_buf_putc(out, '[');
	for (int i = 0; i < n; i++) {
		bson_t d;

		make_doc(i, false, &d);
		if (format == FSQ_JSON)
			dfs_buf_puts(out, i ? ",\n" : "\n");
		if (format == FSQ_IDS) {
			dfs_buf_printf(out, "%d.json\n", i);
		} else {
			ck_assert_int_eq(store_codec_render(&d,
							    format == FSQ_PRETTY
								    ? STORE_RENDER_PRETTY
								    : STORE_RENDER_COMPACT,
							    out, &err),
					 0);
			if (format == FSQ_JSONL)
				dfs_buf_putc(out, '\n');
		}
		bson_destroy(&d);
	}
	if (format == FSQ_JSON)
		dfs_buf_puts(out, n ? "\n]\n" : "]\n");
}

/* The bytes of r, from memory or its temporary file. */
static void result_bytes(struct fs_result *r, struct dfs_buf *out)
{
	char chunk[65536];
	size_t got;

	for (off_t off = 0;; off += (off_t)got) {
		ck_assert_int_eq(fs_result_read(r, chunk, sizeof(chunk), off, &got), 0);
		if (!got)
			break;
		dfs_buf_append(out, chunk, got);
	}
}

static void check_format(int format, int n)
{
	struct dfs_err err = {0};
	struct fs_render *p;
	struct fs_result r;
	struct dfs_buf want, got;

	fs_result_init(&r);
	dfs_buf_init(&want);
	dfs_buf_init(&got);
	ck_assert_int_eq(fs_render_new(&r, format, &p, &err), 0);
	for (int i = 0; i < n; i++) {
		bson_t d;

		make_doc(i, false, &d);
		ck_assert_int_eq(fs_render_put(p, &d, &err), 0);
		bson_destroy(&d);
	}
	ck_assert_int_eq(fs_render_finish(p, &err), 0);
	fs_render_free(p);
	expected(format, n, &want);
	result_bytes(&r, &got);
	ck_assert_uint_eq(r.size, want.len);
	ck_assert_uint_eq(got.len, want.len);
	ck_assert(want.len == 0 || memcmp(got.data, want.data, want.len) == 0);
	dfs_buf_release(&want);
	dfs_buf_release(&got);
	fs_result_release(&r);
}

START_TEST(test_fs_render_put_matches_one_by_one_in_every_format)
{
	static const int formats[] = {FSQ_JSONL, FSQ_JSON, FSQ_PRETTY, FSQ_IDS};
	static const int sizes[] = {0, 1, 255, 256, 257, 5000};

	for (size_t f = 0; f < sizeof(formats) / sizeof(*formats); f++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(*sizes); s++)
			check_format(formats[f], sizes[s]);
}
END_TEST

START_TEST(test_fs_render_put_matches_one_by_one_when_spilled)
{
	fs_result_mem = 4096;
	check_format(FSQ_JSONL, 3000);
	check_format(FSQ_JSON, 3000);
	fs_result_mem = 0;
}
END_TEST

/* Documents of several MiB each: batches of one document, more bytes than the thread may
 * have in flight (render.c note 3), buffers given back and grown again. */
START_TEST(test_fs_render_put_matches_one_by_one_with_huge_documents)
{
	huge_from = 300;
	fs_result_mem = 1024 * 1024;
	check_format(FSQ_JSONL, 330);
	fs_result_mem = 0;
	huge_from = 1 << 30;
}
END_TEST

START_TEST(test_fs_render_put_reports_an_error_found_on_the_thread)
{
	struct dfs_err err = {0};
	struct fs_render *p;
	struct fs_result r;
	int rc = 0;

	fs_result_init(&r);
	ck_assert_int_eq(fs_render_new(&r, FSQ_IDS, &p, &err), 0);
	/* The first 1000 documents have an _id: the error is found past the inline ones. */
	for (int i = 0; i < 20000 && !rc; i++) {
		bson_t d;

		make_doc(i, i >= 1000, &d);
		rc = fs_render_put(p, &d, &err);
		bson_destroy(&d);
	}
	if (!rc)
		rc = fs_render_finish(p, &err);
	ck_assert_int_eq(rc, DFS_EINVAL);
	ck_assert_str_eq(err.msg, "format=ids needs _id in the results");
	fs_render_free(p);
	fs_result_release(&r);
}
END_TEST

/* A caller whose source failed drains: it gets the rendering error of a document put before,
 * even one still in the batch being filled. */
START_TEST(test_fs_render_drain_reports_an_earlier_rendering_error)
{
	struct dfs_err err = {0};
	struct fs_render *p;
	struct fs_result r;
	int rc = 0, i;

	fs_result_init(&r);
	ck_assert_int_eq(fs_render_new(&r, FSQ_IDS, &p, &err), 0);
	for (i = 0; i < 300; i++) { /* the thread starts at 256; the last one has no _id */
		bson_t d;

		make_doc(i, i == 299, &d);
		rc = fs_render_put(p, &d, &err);
		bson_destroy(&d);
		ck_assert_int_eq(rc, 0); /* still in the batch being filled */
	}
	ck_assert_int_eq(fs_render_drain(p, &err), DFS_EINVAL);
	ck_assert_str_eq(err.msg, "format=ids needs _id in the results");
	fs_render_free(p);
	fs_result_release(&r);
}
END_TEST

START_TEST(test_fs_render_free_stops_an_unfinished_result)
{
	struct dfs_err err = {0};
	struct fs_render *p;
	struct fs_result r;

	fs_result_init(&r);
	ck_assert_int_eq(fs_render_new(&r, FSQ_JSONL, &p, &err), 0);
	for (int i = 0; i < 3000; i++) {
		bson_t d;

		make_doc(i, false, &d);
		ck_assert_int_eq(fs_render_put(p, &d, &err), 0);
		bson_destroy(&d);
	}
	fs_render_free(p);
	fs_render_free(NULL);
	fs_result_release(&r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("render");
	TCase *tc = tcase_create("render");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fs_render_put_matches_one_by_one_in_every_format);
	tcase_add_test(tc, test_fs_render_put_matches_one_by_one_when_spilled);
	tcase_add_test(tc, test_fs_render_put_matches_one_by_one_with_huge_documents);
	tcase_add_test(tc, test_fs_render_put_reports_an_error_found_on_the_thread);
	tcase_add_test(tc, test_fs_render_drain_reports_an_earlier_rendering_error);
	tcase_add_test(tc, test_fs_render_free_stops_an_unfinished_result);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
