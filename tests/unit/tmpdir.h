/* tmpdir.h — the unit tests' temporary directories, made and removed here rather than by each test:
 * a fresh directory /tmp/<prefix>-XXXXXX, and its removal with everything under it (links are
 * removed, never followed). */
#ifndef PTRAIN_TEST_TMPDIR_H
#define PTRAIN_TEST_TMPDIR_H

#include <stddef.h>

/* A buffer that holds any directory tmpdir_create makes with a prefix of up to 40 bytes. */
#define TMPDIR_SIZE 64

/* A fresh directory /tmp/<prefix>-XXXXXX (mkdtemp), its path in buf; 0, or -1 (errno set; also
 * when the path does not fit in size bytes). */
int tmpdir_create(char *buf, size_t size, const char *prefix);
/* Remove dir and everything under it, as rm -rf would; 0, or -1 when something stays. */
int tmpdir_remove(const char *dir);

#endif
