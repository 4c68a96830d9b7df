/* tmpdir.c — the unit tests' temporary directories (tmpdir.h): mkdtemp under /tmp, and a removal
 * that walks the tree depth first without following links (nftw), so no shell and no quoting. */
#include "tmpdir.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int tmpdir_create(char *buf, size_t size, const char *prefix)
{
    int n = snprintf(buf, size, "/tmp/%s-XXXXXX", prefix);
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp(buf) ? 0 : -1;
}

static int remove_one(const char *path, const struct stat *sb, int type, struct FTW *at)
{
    (void)sb, (void)at;
    return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : -1;
}

int tmpdir_remove(const char *dir)
{
    return nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}
