/*
 * replay.c - runs a fuzz target over its corpus without libFuzzer: every file named, or in a
 * directory named, is one input. So the corpora (seeds and every input that once failed)
 * replay as ordinary tests in every build, the sanitizer build included.
 */
#include "fuzz.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0, r;

	if (!f) {
		perror(path);
		return -1;
	}
	do {
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int files = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;

		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]))
				return 1;
			files++;
			continue;
		}
		if (!(d = opendir(argv[i]))) {
			perror(argv[i]);
			return 1;
		}
		while ((e = readdir(d))) {
			char path[4096];

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			if (run_file(path)) {
				closedir(d);
				return 1;
			}
			files++;
		}
		closedir(d);
	}
	printf("replayed %d inputs\n", files);
	/* An empty corpus checks nothing: fail rather than pass silently. */
	return files > 0 ? 0 : 1;
}
