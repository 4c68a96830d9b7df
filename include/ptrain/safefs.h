/* safefs.h — opening the places ptrain writes (output_dir, final_model_dir, export and Hub staging
 * directories) so that nobody else can redirect a write or a read. On a cluster, output_dir often
 * sits on a shared scratch filesystem where other users can create names; a symbolic link planted
 * there must never make ptrain append to, overwrite or upload a file it did not mean to.
 *
 * The rules:
 * - Directories are opened one component at a time (openat). A component that is a symbolic link
 *   is followed only when the link belongs to the user running ptrain (or to root, as system links
 *   such as /scratch -> /lustre/scratch do); a link owned by anyone else is refused, naming it.
 *   Missing directories are created with mode 0755 (the umask may narrow it, never widen it).
 * - Files are never opened through a symbolic link (O_NOFOLLOW): temporary files are created with
 *   O_CREAT|O_EXCL and an unpredictable name inside a directory descriptor (filewrite.c), appended
 *   files must be regular files of this user with a single link, and files read back for upload
 *   must be regular files.
 * - Every failure says the path and the reason, with a hint for a full disk or quota. */
#ifndef PTRAIN_SAFEFS_H
#define PTRAIN_SAFEFS_H

#include <stdbool.h>
#include <stdio.h>

#include "ptrain/error.h"

#define SAFEFS_DIR_MODE 0755
#define SAFEFS_FILE_MODE 0644

/* Open directory dir (creating it and its parents when create is set) as above; *fd is an
 * O_DIRECTORY descriptor the caller closes. */
pt_status safefs_dir_open(const char *dir, bool create, int *fd);
/* mkdir -p under the same rules. */
pt_status safefs_mkdirs(const char *dir);
/* Open path for appending (created 0644 when missing): refused when it is a symbolic link, not a
 * regular file, not this user's, or has other hard links. */
pt_status safefs_open_append(const char *path, int *fd);
/* Open path for reading without following a symbolic link at its last component; it must be a
 * regular file. The FILE is the caller's. */
pt_status safefs_fopen_read(const char *path, FILE **f);
/* A unique, unpredictable temporary name for base: ".BASE.tmp.XXXXXXXXXXXX" (12 random letters). */
void safefs_tmp_name(const char *base, char *out, size_t len);
/* The error for a failed write/sync/close of path (errno err): the reason, and what to do about a
 * full disk, a quota or an I/O error. what: "write", "sync", ... */
pt_status safefs_write_error(const char *what, const char *path, int err);

#endif
