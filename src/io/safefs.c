/* safefs.c — directories walked with openat, symbolic links followed only when they are this
 * user's or root's, files opened without following links (see safefs.h for the rules and why). */
#include "ptrain/safefs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ptrain/util.h"

#define MAX_LINKS 40 /* as the kernel's ELOOP limit */

static pt_status walk_from(int fd, const char *path, bool create, int links, int *out);

/* A symbolic link met while walking: followed only when it is ours or root's, and its target is
 * walked under the same rules (never created through the link). */
static pt_status follow_link(int at, const char *name, const struct stat *sb, int links, const char *shown, int *out)
{
    if (sb->st_uid != geteuid() && sb->st_uid != 0)
        return ERR(PT_ERR_USER,
                   "%s is a symbolic link owned by another user (uid %u); ptrain follows only links of its "
                   "own user or root: remove it, or name the real directory",
                   shown_text(shown).s, (unsigned)sb->st_uid);
    if (links >= MAX_LINKS) return ERR(PT_ERR_USER, "%s: too many levels of symbolic links", shown_text(shown).s);
    char target[4096];
    ssize_t n = readlinkat(at, name, target, sizeof target - 1);
    if (n < 0) return ERR(PT_ERR_USER, "cannot read the symbolic link %s: %s", shown_text(shown).s, strerror(errno));
    target[n] = '\0';
    int start = target[0] == '/' ? open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                 : openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (start < 0) return ERR(PT_ERR_USER, "cannot open the directory of %s: %s", shown_text(shown).s, strerror(errno));
    pt_status st = walk_from(start, target, false, links + 1, out);
    if (st != PT_OK) err_context("%s (a link to %s)", shown_text(shown).s, shown_text(target).s);
    return st;
}

/* From directory at into its entry name (created when missing and create is set). */
static pt_status step_into(int at, const char *name, bool create, int links, const char *shown, int *out)
{
    struct stat sb;
    if (fstatat(at, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT || !create)
            return ERR(PT_ERR_USER, "cannot open directory %s: %s", shown_text(shown).s, strerror(errno));
        if (mkdirat(at, name, SAFEFS_DIR_MODE) != 0 && errno != EEXIST)
            return ERR(PT_ERR_USER, "cannot create directory %s: %s", shown_text(shown).s, strerror(errno));
        if (fstatat(at, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            return ERR(PT_ERR_USER, "cannot open directory %s: %s", shown_text(shown).s, strerror(errno));
    }
    if (S_ISLNK(sb.st_mode)) return follow_link(at, name, &sb, links, shown, out);
    if (!S_ISDIR(sb.st_mode))
        return ERR(PT_ERR_USER, "%s exists and is not a directory; remove it or choose another directory",
                   shown_text(shown).s);
    *out = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*out < 0) return ERR(PT_ERR_USER, "cannot open directory %s: %s", shown_text(shown).s, strerror(errno));
    return PT_OK;
}

/* Walk path's components from directory fd (which this takes over). */
static pt_status walk_from(int fd, const char *path, bool create, int links, int *out)
{
    char *copy = xstrdup(path), *save = NULL;
    pt_status st = PT_OK;
    for (char *c = strtok_r(copy, "/", &save); c && st == PT_OK; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, ".")) continue;
        char shown[4200];
        snprintf(shown, sizeof shown, "%.*s", (int)(c - copy + (ptrdiff_t)strlen(c)), path);
        int next = -1;
        st = step_into(fd, c, create, links, shown, &next);
        close(fd);
        fd = next;
    }
    free(copy);
    if (st != PT_OK) {
        if (fd >= 0) close(fd);
        return st;
    }
    *out = fd;
    return PT_OK;
}

pt_status safefs_dir_open(const char *dir, bool create, int *fd)
{
    *fd = -1;
    if (!dir || !*dir) return ERR(PT_ERR_USER, "no directory given");
    int start = open(dir[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (start < 0) return ERR(PT_ERR_USER, "cannot open directory %s: %s", dir[0] == '/' ? "/" : ".", strerror(errno));
    pt_status st = walk_from(start, dir, create, 0, fd);
    if (st != PT_OK && !strstr(err_message(), shown_text(dir).s))
        err_context("cannot use directory %s", shown_text(dir).s);
    return st;
}

pt_status safefs_mkdirs(const char *dir)
{
    int fd;
    TRY(safefs_dir_open(dir, true, &fd));
    close(fd);
    return PT_OK;
}

/* The directory and the last component of path ("." when it has no slash). */
static void split_path(const char *path, char *dir, size_t dlen, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash) snprintf(dir, dlen, ".");
    else if (slash == path) snprintf(dir, dlen, "/");
    else snprintf(dir, dlen, "%.*s", (int)(slash - path), path);
}

/* After open(O_NOFOLLOW | O_NONBLOCK) of path: a link, a FIFO or a device is refused. */
static pt_status check_opened(int fd, int err, const char *path, const char *doing)
{
    if (fd < 0 && err == ELOOP)
        return ERR(PT_ERR_USER, "refusing to %s %s: it is a symbolic link (ptrain never writes or uploads through a "
                   "link in its output directories); remove it", doing, shown_text(path).s);
    if (fd < 0 && (err == ENXIO || err == ENODEV)) /* a FIFO without a reader, a socket, a device */
        return ERR(PT_ERR_USER, "refusing to %s %s: it is not a regular file; remove it", doing, shown_text(path).s);
    if (fd < 0) return ERR(PT_ERR_USER, "cannot %s %s: %s", doing, shown_text(path).s, strerror(err));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ERR(PT_ERR_USER, "refusing to %s %s: it is not a regular file; remove it", doing, shown_text(path).s);
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return PT_OK;
}

pt_status safefs_open_append(const char *path, int *fd)
{
    char dir[4096];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    int dfd;
    TRY(safefs_dir_open(dir, false, &dfd));
    *fd = openat(dfd, base, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, SAFEFS_FILE_MODE);
    int err = errno;
    close(dfd);
    TRY(check_opened(*fd, err, path, "append to"));
    struct stat sb;
    if (fstat(*fd, &sb) == 0 && (sb.st_uid != geteuid() || sb.st_nlink != 1)) {
        close(*fd);
        *fd = -1;
        return ERR(PT_ERR_USER, "refusing to append to %s: it %s; remove it", shown_text(path).s,
                   sb.st_uid != geteuid() ? "belongs to another user" : "has other hard links");
    }
    return PT_OK;
}

pt_status safefs_fopen_read(const char *path, FILE **f)
{
    *f = NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    TRY(check_opened(fd, errno, path, "read"));
    *f = fdopen(fd, "rb");
    if (!*f) {
        close(fd);
        return ERR(PT_ERR_NOMEM, "out of memory opening %s", shown_text(path).s);
    }
    return PT_OK;
}

void safefs_tmp_name(const char *base, char *out, size_t len)
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[12];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) { /* no entropy source: still unique per call */
        static unsigned long n;
        unsigned long long x = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 20) ^ (++n * 0x9E3779B97F4A7C15ULL);
        for (size_t i = 0; i < sizeof r; i++) r[i] = (unsigned char)(x >> (i * 5 % 64)), x *= 0x100000001b3ULL;
    }
    char tail[sizeof r + 1];
    for (size_t i = 0; i < sizeof r; i++) tail[i] = abc[r[i] % (sizeof abc - 1)];
    tail[sizeof r] = '\0';
    snprintf(out, len, ".%s.tmp.%s", base, tail);
}

pt_status safefs_write_error(const char *what, const char *path, int err)
{
    const char *hint = err == ENOSPC   ? " (the disk is full: free some space, or choose another output directory)"
                       : err == EDQUOT ? " (over your disk quota: see `quota -s` or `lfs quota -u $USER`; free some "
                                         "space, or choose another output directory)"
                       : err == EIO    ? " (an I/O error from the storage: check the file system, then run again)"
                       : err == EFBIG  ? " (larger than the file system or `ulimit -f` allows)"
                       : err == EROFS  ? " (the file system is read-only: choose another output directory)"
                                       : "";
    return ERR(PT_ERR_USER, "cannot %s %s: %s%s", what, shown_text(path).s, err ? strerror(err) : "no progress", hint);
}
