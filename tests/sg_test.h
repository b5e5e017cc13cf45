/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Minimal test helpers shared by every Sigma test program.
 *
 * A test program exits 0 when every check passed, 1 when any failed, and 77
 * (meson's "skipped") when it cannot run here, after printing why. Checks do
 * not abort: a failing check prints file:line and the message, and counts.
 */
#ifndef SG_TEST_H
#define SG_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <sys/mman.h>
#include <sys/stat.h>

/** Exit code that meson counts as a skipped test. */
#define SG_TEST_SKIP 77

/* Per-program counters: each test program is single-threaded where it counts. */
static unsigned long sg_test_checks, sg_test_failures;

/** Record a check; print the message when @p cond is false. Evaluates to cond. */
#define SG_CHECK(cond, ...)                                                                 \
	({                                                                                  \
		int sg_ok_ = !!(cond);                                                      \
		sg_test_checks++;                                                           \
		if (!sg_ok_) {                                                              \
			sg_test_failures++;                                                 \
			if (sg_test_failures <= 50) {                                       \
				fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__,     \
					#cond);                                             \
				fprintf(stderr, __VA_ARGS__);                               \
				fputc('\n', stderr);                                        \
			}                                                                   \
		}                                                                           \
		sg_ok_;                                                                     \
	})

/** Check two integers for equality. */
#define SG_CHECK_EQ(a, b)                                                                   \
	SG_CHECK((a) == (b), "%s = %" PRId64 ", %s = %" PRId64, #a, (int64_t)(a), #b,      \
		 (int64_t)(b))

/** Print that the whole program is skipped, and why, then exit 77. */
#define SG_TEST_SKIP_ALL(...)                                                               \
	do {                                                                                \
		printf("SKIP: ");                                                           \
		printf(__VA_ARGS__);                                                        \
		printf("\n");                                                               \
		exit(SG_TEST_SKIP);                                                         \
	} while (0)

/**
 * Pages of [@p p, @p p + @p len) resident now (mincore), or -1 if part of the range is
 * not mapped; *@p pages: the pages the range spans.
 */
static inline long sg_test_resident(const void *p, size_t len, long *pages)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)p & ~(page - 1);
	size_t n = ((uintptr_t)p + len - lo + page - 1) / page;
	unsigned char *vec = calloc(n ? n : 1, 1);
	long got = 0;

	*pages = (long)n;
	if (vec == NULL || mincore((void *)lo, n * page, vec) < 0) {
		free(vec);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		got += vec[i] & 1;
	free(vec);
	return got;
}

/** Write @p text to @p path (made or emptied), then give it @p mode. */
static inline void sg_test_write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
	chmod(path, mode);
}

/** Print the summary and return the exit status for main(). */
static inline int sg_test_finish(const char *name)
{
	printf("%s: %lu checks, %lu failed\n", name, sg_test_checks, sg_test_failures);
	return sg_test_failures == 0 && sg_test_checks > 0 ? 0 : 1;
}

#endif /* SG_TEST_H */
