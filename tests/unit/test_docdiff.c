/*
 * test_docdiff.c - unit tests of store/docdiff.c, the linear-time updateDescription: on
 * random pairs of documents (wide embedded documents that take the hash tables, small ones
 * that scan, arrays that grow and shrink, fields removed, added and changed, number types
 * that compare equal but differ, names that repeat) its result must be exactly what the
 * definition gives (ref_diff below: every field looked up by name, quadratic, the code
 * the store used before docdiff.c), and an update event written by the store must carry it.
 */
#include "store.h"
#include "store_int.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];
static struct store *st;
static struct store_db *db;
static const struct store_attrs attrs = {0644, 0, 0, 0};

static void setup(void)
{
	struct dfs_err err = {0};

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/docfs-test-docdiff-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(store_open(tmpdir, false, &st, &err), 0);
	ck_assert_int_eq(store_db_get(st, "t", true, &db, &err), 0);
}

static void teardown(void)
{
	char cmd[300];

	store_free(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static uint64_t rng = 88172645463325252ull;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* A random scalar: equal numbers of different types on purpose. */
static void append_scalar(bson_t *d, const char *k)
{
	switch (rnd(5)) {
	case 0:
		BSON_APPEND_INT32(d, k, (int32_t)rnd(3));
		break;
	case 1:
		BSON_APPEND_INT64(d, k, (int64_t)rnd(3));
		break;
	case 2:
		BSON_APPEND_DOUBLE(d, k, (double)rnd(3));
		break;
	case 3:
		BSON_APPEND_UTF8(d, k, rnd(2) ? "x" : "y");
		break;
	default:
		BSON_APPEND_BOOL(d, k, rnd(2));
		break;
	}
}

static void append_array(bson_t *d, const char *k, int depth);

/* A random document of width up to wide fields named f0.. (some skipped). */
static void fill_doc(bson_t *d, uint32_t wide, int depth)
{
	char k[16];

	for (uint32_t i = 0; i < wide; i++) {
		uint32_t r = rnd(10);

		if (r == 0)
			continue;
		snprintf(k, sizeof(k), "f%u", rnd(4) == 0 ? rnd(wide) : i);
		if (bson_has_field(d, k) && rnd(8)) /* a repeated name now and then */
			continue;
		if (r == 1 && depth < 3) {
			bson_t sub;

			bson_append_document_begin(d, k, -1, &sub);
			fill_doc(&sub, rnd(2) ? 3 + rnd(4) : 20 + rnd(40), depth + 1);
			bson_append_document_end(d, &sub);
		} else if (r == 2 && depth < 3) {
			append_array(d, k, depth + 1);
		} else {
			append_scalar(d, k);
		}
	}
}

static void append_array(bson_t *d, const char *k, int depth)
{
	bson_t arr;
	uint32_t n = rnd(2) ? rnd(5) : 15 + rnd(10);
	char idx[16];

	bson_append_array_begin(d, k, -1, &arr);
	for (uint32_t i = 0; i < n; i++) {
		snprintf(idx, sizeof(idx), "%u", i);
		if (rnd(6) == 0 && depth < 3) {
			bson_t sub;

			bson_append_document_begin(&arr, idx, -1, &sub);
			fill_doc(&sub, 2 + rnd(20), depth + 1);
			bson_append_document_end(&arr, &sub);
		} else {
			append_scalar(&arr, idx);
		}
	}
	bson_append_array_end(d, &arr);
}

/* A second version of a: most fields kept, some changed, dropped or added, recursively. */
static void mutate(const bson_t *a, bson_t *b, int depth)
{
	bson_iter_t it;
	uint32_t extra = rnd(3);

	bson_iter_init(&it, a);
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		uint32_t r = rnd(20);

		if (r == 0 && strcmp(k, "_id") != 0)
			continue; /* removed */
		if (r == 1 && strcmp(k, "_id") != 0) {
			append_scalar(b, k);
		} else if (r < 8 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
			const uint8_t *data;
			uint32_t len;
			bson_t sa, sb;

			bson_iter_document(&it, &len, &data);
			ck_assert(bson_init_static(&sa, data, len));
			bson_append_document_begin(b, k, -1, &sb);
			mutate(&sa, &sb, depth + 1);
			bson_append_document_end(b, &sb);
		} else if (r < 8 && BSON_ITER_HOLDS_ARRAY(&it)) {
			append_array(b, k, depth + 1);
		} else {
			bson_append_iter(b, k, -1, &it);
		}
	}
	for (uint32_t i = 0; i < extra; i++) {
		char k[16];

		snprintf(k, sizeof(k), "n%u", rnd(50));
		if (!bson_has_field(b, k))
			append_scalar(b, k);
	}
}

/* ---- the definition (the store's code before docdiff.c): by name, quadratic ---------- */

static void ref_docs(const bson_t *a, const bson_t *b, bool arrays, const char *prefix,
		     bson_t *u, bson_t *rm, bson_t *tr, uint32_t *nrm, uint32_t *ntr);

static bool ref_same(const bson_iter_t *x, const bson_iter_t *y)
{
	const bson_value_t *a = bson_iter_value((bson_iter_t *)x);
	const bson_value_t *b = bson_iter_value((bson_iter_t *)y);

	if (a->value_type != b->value_type)
		return false;
	if (a->value_type == BSON_TYPE_DOCUMENT || a->value_type == BSON_TYPE_ARRAY)
		return a->value.v_doc.data_len == b->value.v_doc.data_len &&
		       memcmp(a->value.v_doc.data, b->value.v_doc.data, a->value.v_doc.data_len) == 0;
	return store_iter_compare(x, y) == 0 &&
	       (a->value_type != BSON_TYPE_UTF8 ||
		(a->value.v_utf8.len == b->value.v_utf8.len &&
		 memcmp(a->value.v_utf8.str, b->value.v_utf8.str, a->value.v_utf8.len) == 0));
}

static void ref_value(bson_iter_t *x, bson_iter_t *y, const char *path, bson_t *u, bson_t *rm,
		      bson_t *tr, uint32_t *nrm, uint32_t *ntr)
{
	bson_type_t tx = bson_iter_type(x), ty = bson_iter_type(y);

	if (ref_same(x, y))
		return;
	if (tx == ty && (tx == BSON_TYPE_DOCUMENT || tx == BSON_TYPE_ARRAY)) {
		const uint8_t *dx, *dy;
		uint32_t lx, ly;
		bson_t bx, by;

		if (tx == BSON_TYPE_DOCUMENT) {
			bson_iter_document(x, &lx, &dx);
			bson_iter_document(y, &ly, &dy);
		} else {
			bson_iter_array(x, &lx, &dx);
			bson_iter_array(y, &ly, &dy);
		}
		if (bson_init_static(&bx, dx, lx) && bson_init_static(&by, dy, ly)) {
			ref_docs(&bx, &by, tx == BSON_TYPE_ARRAY, path, u, rm, tr, nrm, ntr);
			return;
		}
	}
	bson_append_iter(u, path, -1, y);
}

static void ref_docs(const bson_t *a, const bson_t *b, bool arrays, const char *prefix,
		     bson_t *u, bson_t *rm, bson_t *tr, uint32_t *nrm, uint32_t *ntr)
{
	bson_iter_t x, y;
	char path[1024], idx[16];
	uint32_t na = 0, nb = 0;

	if (arrays) {
		bson_iter_init(&x, a);
		while (bson_iter_next(&x))
			na++;
		bson_iter_init(&y, b);
		while (bson_iter_next(&y)) {
			snprintf(path, sizeof(path), "%s.%u", prefix, nb);
			if (nb < na) {
				snprintf(idx, sizeof(idx), "%u", nb);
				if (bson_iter_init_find(&x, a, idx))
					ref_value(&x, &y, path, u, rm, tr, nrm, ntr);
			} else {
				bson_append_iter(u, path, -1, &y);
			}
			nb++;
		}
		if (nb < na) {
			bson_t t1;

			snprintf(idx, sizeof(idx), "%u", (*ntr)++);
			bson_append_document_begin(tr, idx, -1, &t1);
			BSON_APPEND_UTF8(&t1, "field", prefix);
			BSON_APPEND_INT32(&t1, "newSize", (int32_t)nb);
			bson_append_document_end(tr, &t1);
		}
		return;
	}
	bson_iter_init(&y, b);
	while (bson_iter_next(&y)) {
		const char *k = bson_iter_key(&y);

		if (!*prefix && strcmp(k, "_id") == 0)
			continue;
		snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", k);
		if (bson_iter_init_find(&x, a, k))
			ref_value(&x, &y, path, u, rm, tr, nrm, ntr);
		else
			bson_append_iter(u, path, -1, &y);
	}
	bson_iter_init(&x, a);
	while (bson_iter_next(&x)) {
		const char *k = bson_iter_key(&x);

		if (bson_iter_init_find(&y, b, k))
			continue;
		snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", k);
		snprintf(idx, sizeof(idx), "%u", (*nrm)++);
		BSON_APPEND_UTF8(rm, idx, path);
	}
}

/* "updateDescription": {...} of a -> b, by diff (store__doc_diff, or the definition). */
static void describe(const bson_t *a, const bson_t *b, bool reference, struct dfs_buf *out)
{
	struct dfs_err err = {0};
	bson_t ud, u, rm, tr;
	uint32_t nrm = 0, ntr = 0;

	bson_init(&ud);
	bson_init(&rm);
	bson_init(&tr);
	BSON_APPEND_DOCUMENT_BEGIN(&ud, "updatedFields", &u);
	if (reference)
		ref_docs(a, b, false, "", &u, &rm, &tr, &nrm, &ntr);
	else
		store__doc_diff(a, b, &u, &rm, &tr);
	bson_append_document_end(&ud, &u);
	bson_append_array(&ud, "removedFields", -1, &rm);
	bson_append_array(&ud, "truncatedArrays", -1, &tr);
	out->len = 0;
	dfs_buf_puts(out, "\"updateDescription\": ");
	ck_assert_int_eq(store_codec_render(&ud, STORE_RENDER_COMPACT, out, &err), 0);
	bson_destroy(&ud);
	bson_destroy(&rm);
	bson_destroy(&tr);
}

/* The updateDescription the store's event for the update a -> b carries. */
static int last_line(void *ctx, const struct store_event *e)
{
	struct dfs_buf *out = ctx;

	out->len = 0;
	dfs_buf_append(out, e->line, e->len);
	return 0;
}

START_TEST(test_store_doc_diff_matches_update_events)
{
	struct dfs_err err = {0};
	struct store_txn *t;
	struct store_coll c;
	struct dfs_buf line, want, got;

	dfs_buf_init(&line);
	dfs_buf_init(&want);
	dfs_buf_init(&got);
	ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
	ck_assert_msg(store_coll_create(t, "c", 0755, 0, 0, &c, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_txn_commit(t, &err), 0);
	for (int round = 0; round < 300; round++) {
		bson_t a, b, prepared;
		struct store_entry e;
		const char *text;
		size_t i;

		bson_init(&a);
		bson_init(&b);
		BSON_APPEND_INT32(&a, "_id", 1);
		fill_doc(&a, round % 3 == 0 ? 200 + rnd(300) : 5 + rnd(30), 0);
		mutate(&a, &b, 0);

		/* the store's event */
		ck_assert_int_eq(store_txn_begin(db, true, &t, &err), 0);
		ck_assert_msg(store_doc_insert(t, c.id, &a, &attrs, &e, &err) == 0, "%s", err.msg);
		ck_assert_msg(store_doc_prepare(&b, NULL, &prepared, &err) == 0, "%s", err.msg);
		ck_assert_msg(store_doc_update_op(t, e.id, &prepared, &err) == 0, "%s", err.msg);
		ck_assert_msg(store_events_list(t, "c", 0, last_line, &line, &err) == 0, "%s",
			      err.msg);
		store_txn_abort(t);

		/* the definition's, docdiff's, and the event's must be the same bytes */
		describe(&a, &prepared, true, &want);
		describe(&a, &prepared, false, &got);
		ck_assert_msg(got.len == want.len && !memcmp(got.data, want.data, want.len),
			      "round %d:\ndefinition: %.300s\ndocdiff:    %.300s", round, want.data,
			      got.data);
		text = strstr(line.data, "\"updateDescription\": ");
		ck_assert_msg(text, "round %d: no updateDescription", round);
		for (i = 0; i < want.len && text[i] == want.data[i]; i++)
			;
		ck_assert_msg(i == want.len, "round %d, byte %zu:\nevent: %.200s\ndefinition:  %.200s",
			      round, i, text + i, want.data + i);
		bson_destroy(&a);
		bson_destroy(&b);
		bson_destroy(&prepared);
	}
	dfs_buf_release(&line);
	dfs_buf_release(&want);
	dfs_buf_release(&got);
}
END_TEST

/* A change to one field of a wide embedded document is that one path. */
START_TEST(test_store_doc_diff_wide_level_one_path)
{
	bson_t a, b, m, u, rm, tr;
	struct dfs_buf out;
	struct dfs_err err = {0};
	char k[16];

	bson_init(&a);
	bson_init(&b);
	BSON_APPEND_INT32(&a, "_id", 1);
	BSON_APPEND_INT32(&b, "_id", 1);
	BSON_APPEND_DOCUMENT_BEGIN(&a, "m", &m);
	for (int i = 0; i < 1440; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		BSON_APPEND_INT32(&m, k, i);
	}
	bson_append_document_end(&a, &m);
	BSON_APPEND_DOCUMENT_BEGIN(&b, "m", &m);
	for (int i = 1439; i >= 0; i--) { /* another order: found by name, not position */
		snprintf(k, sizeof(k), "k%d", i);
		if (i != 7)
			BSON_APPEND_INT32(&m, k, i == 5 ? -1 : i);
	}
	bson_append_document_end(&b, &m);
	bson_init(&u);
	bson_init(&rm);
	bson_init(&tr);
	store__doc_diff(&a, &b, &u, &rm, &tr);
	dfs_buf_init(&out);
	ck_assert_int_eq(store_codec_render(&u, STORE_RENDER_COMPACT, &out, &err), 0);
	ck_assert_int_eq(store_codec_render(&rm, STORE_RENDER_COMPACT, &out, &err), 0);
	ck_assert_int_eq(store_codec_render(&tr, STORE_RENDER_COMPACT, &out, &err), 0);
	ck_assert_str_eq(out.data, "{\"m.k5\": -1}{\"0\": \"m.k7\"}{}");
	dfs_buf_release(&out);
	bson_destroy(&a);
	bson_destroy(&b);
	bson_destroy(&u);
	bson_destroy(&rm);
	bson_destroy(&tr);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("docdiff");
	TCase *tc = tcase_create("docdiff");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_store_doc_diff_matches_update_events);
	tcase_add_test(tc, test_store_doc_diff_wide_level_one_path);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
