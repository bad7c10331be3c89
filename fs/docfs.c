/* docfs.c - the program entry point; all of the work is in fs_main() (cli.c). */
#include "fs.h"
#include "query.h"

int main(int argc, char **argv)
{
	query_init(); /* the filter hooks partial indexes need, before any store opens */
	return fs_main(argc, argv);
}
