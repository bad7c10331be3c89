/* docfs.c - the program entry point; all of the work is in fs_main() (cli.c). */
#include "fs.h"

int main(int argc, char **argv)
{
	return fs_main(argc, argv);
}
