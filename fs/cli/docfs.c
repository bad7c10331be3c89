/* docfs.c - the program entry point; all of the work is in fs_main() (cli.c). */
#include "fs.h"
#include "query.h"

#include <malloc.h>

int main(int argc, char **argv)
{
	/* glibc gives the top of a thread's heap back to the kernel (madvise) once 128 KiB are
	 * free there, and serves 128 KiB and more with mmap: an update of a document with a
	 * large embedded document allocates and frees more than that each time, and each
	 * give-back flushed the TLBs of both CPUs (a fifth of such an update's time). Keep up
	 * to 8 MiB per heap, and mmap only from 2 MiB. */
	mallopt(M_TRIM_THRESHOLD, 8 << 20);
	mallopt(M_MMAP_THRESHOLD, 2 << 20);
	query_init(); /* the filter hooks partial indexes need, before any store opens */
	return fs_main(argc, argv);
}
