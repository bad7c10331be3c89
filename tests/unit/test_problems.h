/*
 * test_problems.h - collects what store_check reports (its problem callback), for the tests
 * that check a store they have damaged on purpose.
 */
#ifndef DOCFS_TEST_PROBLEMS_H
#define DOCFS_TEST_PROBLEMS_H

#include <stdio.h>

struct problems {
	int n;		/* problems reported */
	char last[512]; /* the last one */
};

/* store_check's callback; ctx is a struct problems. */
static void on_problem(void *ctx, const char *p)
{
	struct problems *pr = ctx;

	pr->n++;
	snprintf(pr->last, sizeof(pr->last), "%s", p);
}

#endif
