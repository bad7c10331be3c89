/*
 * test_inode.c - unit tests of the node generations behind the kernel caches (fs/fuse/inode.c,
 * fsops.c notes 3 and 8): a node's content or listing counts as cached by the kernel only
 * while nothing changed since it was read, and a listing that overlapped an older one never
 * makes a collection's cached listing current.
 */
#include "fs_int.h"

#include <check.h>
#include <stdlib.h>

static struct fs_node *coll_node(void)
{
	return fs_node_ref(FSN_COLL, NULL, 7, 7, 4242, "c");
}

static void setup(void)
{
	fs_nodes_init();
}

static void teardown(void)
{
	fs_nodes_release();
}

START_TEST(test_fs_node_cache_ok_new_node_is_not_cached)
{
	ck_assert(!fs_node_cache_ok(coll_node()));
}
END_TEST

START_TEST(test_fs_node_cache_set_until_changed)
{
	struct fs_node *n = coll_node();
	uint64_t g = fs_node_gen(n);

	fs_node_cache_set(n, g);
	ck_assert(fs_node_cache_ok(n));
	ck_assert(fs_node_cache_is(n, g));
	fs_node_bump(n);
	ck_assert(!fs_node_cache_ok(n));
	ck_assert(!fs_node_cache_is(n, g));
	/* What was read before the change does not become current by being recorded late. */
	fs_node_cache_set(n, g);
	ck_assert(!fs_node_cache_ok(n));
}
END_TEST

START_TEST(test_fs_node_list_end_complete_makes_the_listing_current)
{
	struct fs_node *n = coll_node();

	fs_node_list_begin(n);
	ck_assert(!fs_node_cache_ok(n));
	fs_node_list_end(n, true);
	ck_assert(fs_node_cache_ok(n));
	fs_node_bump(n); /* a change: the next opendir must not keep it */
	ck_assert(!fs_node_cache_ok(n));
}
END_TEST

START_TEST(test_fs_node_list_end_incomplete_changes_nothing)
{
	struct fs_node *n = coll_node();

	fs_node_list_begin(n);
	fs_node_list_end(n, false);
	ck_assert(!fs_node_cache_ok(n));
}
END_TEST

START_TEST(test_fs_node_list_change_during_listing_is_not_kept)
{
	struct fs_node *n = coll_node();

	fs_node_list_begin(n);
	fs_node_bump(n); /* committed after the listing read the store */
	fs_node_list_end(n, true);
	ck_assert(!fs_node_cache_ok(n));
}
END_TEST

START_TEST(test_fs_node_list_overlap_keeps_the_oldest_generation)
{
	struct fs_node *n = coll_node();

	/* A reads the old state; a change; B reads the new one. Either may have filled the
	 * kernel's cache, so neither end makes it current. */
	fs_node_list_begin(n);
	fs_node_bump(n);
	fs_node_list_begin(n);
	fs_node_list_end(n, true);
	ck_assert(!fs_node_cache_ok(n));
	fs_node_list_end(n, true);
	ck_assert(!fs_node_cache_ok(n));
	/* A listing on its own afterwards does. */
	fs_node_list_begin(n);
	fs_node_list_end(n, true);
	ck_assert(fs_node_cache_ok(n));
}
END_TEST

START_TEST(test_fs_node_list_abandoned_listing_ends_the_overlap)
{
	struct fs_node *n = coll_node();

	fs_node_list_begin(n); /* `ls | head`: never reaches its end */
	fs_node_bump(n);
	fs_node_list_end(n, false); /* its directory is closed */
	fs_node_list_begin(n);
	fs_node_list_end(n, true);
	ck_assert(fs_node_cache_ok(n));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("inode");
	TCase *tc = tcase_create("gen");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_fs_node_cache_ok_new_node_is_not_cached);
	tcase_add_test(tc, test_fs_node_cache_set_until_changed);
	tcase_add_test(tc, test_fs_node_list_end_complete_makes_the_listing_current);
	tcase_add_test(tc, test_fs_node_list_end_incomplete_changes_nothing);
	tcase_add_test(tc, test_fs_node_list_change_during_listing_is_not_kept);
	tcase_add_test(tc, test_fs_node_list_overlap_keeps_the_oldest_generation);
	tcase_add_test(tc, test_fs_node_list_abandoned_listing_ends_the_overlap);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
