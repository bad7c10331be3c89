/*
 * fs.h - the public interface of the fs layer: the docfs command line. Everything else in
 * fs/ (the FUSE namespace, the notifier, the generator) is reached through it.
 */
#ifndef DOCFS_FS_H
#define DOCFS_FS_H

/* Runs the docfs command line; returns the process exit status (0 ok, 1 error). */
int fs_main(int argc, char **argv);

#endif
