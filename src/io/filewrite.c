/* filewrite.c — atomic, streaming file output (see filewrite.h): temporary name next to the
 * target, buffered sequential writes, fsync, rename, directory fsync. */
#include "ptrain/filewrite.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptrain/util.h"

#define FW_BUF ((size_t)4 << 20)

/* The temporary file being written, for fw_cleanup_on_signals (one writer at a time). */
static char active_tmp[4200];
static volatile sig_atomic_t have_active;

static void on_signal(int sig)
{
    if (have_active) unlink(active_tmp); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

void fw_cleanup_on_signals(void)
{
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], on_signal);
}

static void set_active(const char *tmp)
{
    have_active = 0;
    if (!tmp) return;
    snprintf(active_tmp, sizeof active_tmp, "%s", tmp);
    have_active = 1;
}

static void dir_of(const char *path, char *dir, size_t len)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    snprintf(dir, len, "%s", dirname(copy));
}

pt_status fw_open(pt_filewriter *w, const char *final)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    char dir[4096], copy[4096];
    dir_of(final, dir, sizeof dir);
    snprintf(copy, sizeof copy, "%s", final);
    strbuf tmp = {0};
    sb_printf(&tmp, "%s/.%s.tmp.%d", dir, basename(copy), (int)getpid());
    w->final = xstrdup(final);
    w->tmp = tmp.data;
    w->buf = malloc(FW_BUF);
    if (!w->buf) {
        fw_abort(w);
        return ERR(PT_ERR_NOMEM, "out of memory for the write buffer of %s", final);
    }
    w->cap = FW_BUF;
    set_active(w->tmp);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        pt_status st = ERR(PT_ERR_USER, "cannot create %s: %s (is the directory %s writable?)", w->tmp,
                           strerror(errno), dir);
        fw_abort(w);
        return st;
    }
    return PT_OK;
}

static pt_status flush_buf(pt_filewriter *w)
{
    size_t off = 0;
    while (off < w->used) {
        ssize_t got = write(w->fd, w->buf + off, w->used - off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            return ERR(PT_ERR_USER, "cannot write %s: %s%s", w->tmp, got < 0 ? strerror(errno) : "no progress",
                       got < 0 && errno == ENOSPC ? " (free some space, or choose another output directory)" : "");
        off += (size_t)got;
    }
    w->used = 0;
    return PT_OK;
}

pt_status fw_write(pt_filewriter *w, const void *data, size_t n)
{
    if (w->fd < 0) return ERR(PT_ERR_INTERNAL, "write to a file that is not open");
    const unsigned char *p = data;
    w->written += n;
    while (n) {
        size_t take = w->cap - w->used < n ? w->cap - w->used : n;
        memcpy(w->buf + w->used, p, take);
        w->used += take, p += take, n -= take;
        if (w->used == w->cap) TRY(flush_buf(w));
    }
    return PT_OK;
}

pt_status fw_zeros(pt_filewriter *w, size_t n)
{
    static const unsigned char zero[64];
    while (n) {
        size_t take = n < sizeof zero ? n : sizeof zero;
        TRY(fw_write(w, zero, take));
        n -= take;
    }
    return PT_OK;
}

static pt_status sync_dir(const char *path)
{
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ERR(PT_ERR_USER, "cannot open directory %s: %s", dir, strerror(errno));
    int rc = fsync(fd);
    close(fd);
    if (rc != 0 && errno != EINVAL) return ERR(PT_ERR_USER, "cannot sync directory %s: %s", dir, strerror(errno));
    return PT_OK;
}

pt_status fw_commit(pt_filewriter *w)
{
    if (w->fd < 0) return ERR(PT_ERR_INTERNAL, "commit of a file that is not open");
    pt_status st = flush_buf(w);
    if (st == PT_OK && fsync(w->fd) != 0) st = ERR(PT_ERR_USER, "cannot sync %s: %s", w->tmp, strerror(errno));
    if (close(w->fd) != 0 && st == PT_OK) st = ERR(PT_ERR_USER, "cannot close %s: %s", w->tmp, strerror(errno));
    w->fd = -1;
    if (st == PT_OK && rename(w->tmp, w->final) != 0)
        st = ERR(PT_ERR_USER, "cannot move %s to %s: %s", w->tmp, w->final, strerror(errno));
    if (st == PT_OK) st = sync_dir(w->final);
    if (st == PT_OK) {
        set_active(NULL);
        free(w->tmp);
        w->tmp = NULL; /* nothing left to remove */
    }
    fw_abort(w);
    return st;
}

void fw_abort(pt_filewriter *w)
{
    if (w->tmp && have_active && !strcmp(active_tmp, w->tmp)) set_active(NULL);
    if (w->fd >= 0) close(w->fd);
    if (w->tmp) unlink(w->tmp);
    free(w->tmp);
    free(w->final);
    free(w->buf);
    memset(w, 0, sizeof *w);
    w->fd = -1;
}

pt_status fw_write_file(const char *final, const void *data, size_t n)
{
    pt_filewriter w;
    TRY(fw_open(&w, final));
    pt_status st = fw_write(&w, data, n);
    if (st != PT_OK) {
        fw_abort(&w);
        return st;
    }
    return fw_commit(&w);
}

pt_status fw_mkdirs(const char *dir)
{
    if (!dir || !*dir) return ERR(PT_ERR_USER, "no output directory given");
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return ERR(PT_ERR_USER, "cannot create directory %s: %s", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return ERR(PT_ERR_USER, "cannot create directory %s: %s", path, strerror(errno));
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return ERR(PT_ERR_USER, "%s exists and is not a directory; choose another output directory", path);
    return PT_OK;
}
