/*
 * test_rand.h - the seeded generator of the property tests (splitmix64). Each test file
 * picks its default seed; DOCFS_SEED in the environment replaces it, so that a failure seen
 * once can be replayed and new seeds explored. Include it in one test file at a time.
 */
#ifndef DOCFS_TEST_RAND_H
#define DOCFS_TEST_RAND_H

#include <stdint.h>
#include <stdlib.h>

static uint64_t seed_state; /* the generator's state */
static uint64_t seed_used;  /* the seed of this run (printed by failing tests) */

/* Starts the generator at DOCFS_SEED, or dflt, mixed with salt. */
static inline void seed_start(uint64_t dflt, uint64_t salt)
{
	const char *env = getenv("DOCFS_SEED");

	seed_used = env && *env ? strtoull(env, NULL, 0) : dflt;
	seed_state = seed_used ^ salt;
}

static inline uint64_t rnd64(void)
{
	uint64_t z = (seed_state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* A number in [0, n). */
static inline unsigned rnd(unsigned n)
{
	return (unsigned)(rnd64() % n);
}

#endif
