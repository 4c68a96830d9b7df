/* filewrite.h — write a file so that it appears complete or not at all, and so that nobody else
 * can redirect it: bytes go to a temporary file created with O_CREAT|O_EXCL|O_NOFOLLOW under an
 * unpredictable name (.NAME.tmp.XXXXXXXXXXXX) inside the target's own directory, opened by safefs.c
 * (no link of another user followed); they are flushed and fsynced, and only then renamed to NAME
 * with renameat (replacing whatever NAME was, a link included, never writing through it) and the
 * directory synced. An error or a kill at any moment leaves at most the temporary file, never a
 * NAME that looks complete but is not. Writes are buffered and sequential (exporters stream tensor
 * after tensor through one of these); a caller may also pwrite to fd directly before fw_commit. */
#ifndef PTRAIN_FILEWRITE_H
#define PTRAIN_FILEWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"

typedef struct {
    char *final, *tmp;   /* the paths, for messages */
    char *name, *tmp_name; /* their last components, inside dir */
    int dir, fd;
    unsigned char *buf;
    size_t used, cap;
    uint64_t written; /* bytes handed to fw_write so far */
} pt_filewriter;

/* Create the temporary file for final (its directory must exist). */
pt_status fw_open(pt_filewriter *w, const char *final);
pt_status fw_write(pt_filewriter *w, const void *data, size_t n);
/* n zero bytes (padding). */
pt_status fw_zeros(pt_filewriter *w, size_t n);
/* Flush, fsync, rename to the final name, fsync the directory; the writer is closed either way. */
pt_status fw_commit(pt_filewriter *w);
/* Close and remove the temporary file (safe on a writer already committed or never opened). */
void fw_abort(pt_filewriter *w);
/* Write a whole small file (JSON, a Modelfile) the same way. */
pt_status fw_write_file(const char *final, const void *data, size_t n);
/* Remove the temporary file being written when SIGINT, SIGTERM or SIGHUP ends the process (for
 * commands without their own handlers: export). */
void fw_cleanup_on_signals(void);

#endif
