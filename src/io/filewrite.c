/* filewrite.c — atomic, streaming file output (see filewrite.h): a temporary file created with
 * O_EXCL under an unpredictable name inside the target's directory (opened by safefs.c, never
 * through someone else's link), buffered sequential writes, fsync, renameat, directory fsync. */
#include "ptrain/filewrite.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptrain/safefs.h"
#include "ptrain/util.h"

#define FW_BUF ((size_t)4 << 20)

/* The temporary file being written, for fw_cleanup_on_signals (one writer at a time per thread:
 * a thread of its own, such as the heartbeat's, keeps its own, and never disturbs the one of the
 * thread a signal reaches). */
static _Thread_local char active_name[512];
static _Thread_local volatile sig_atomic_t active_dir = -1;

static void on_signal(int sig)
{
    if (active_dir >= 0) unlinkat(active_dir, active_name, 0); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

void fw_cleanup_on_signals(void)
{
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], on_signal);
}

static void set_active(int dir, const char *name)
{
    active_dir = -1;
    if (dir < 0) return;
    snprintf(active_name, sizeof active_name, "%s", name);
    active_dir = dir;
}

/* final's directory and name; the directory opened under safefs's rules. */
static pt_status open_dir(pt_filewriter *w, const char *final)
{
    const char *slash = strrchr(final, '/');
    strbuf dir = {0};
    if (!slash) sb_printf(&dir, ".");
    else if (slash == final) sb_printf(&dir, "/");
    else sb_printf(&dir, "%.*s", (int)(slash - final), final);
    w->name = xstrdup(slash ? slash + 1 : final);
    pt_status st = *w->name ? safefs_dir_open(sb_text(&dir), false, &w->dir)
                            : ERR(PT_ERR_INTERNAL, "%s: a file name ends with '/'", shown_text(final).s);
    if (st != PT_OK) err_context("cannot write %s", shown_text(final).s);
    sb_free(&dir);
    return st;
}

/* The temporary file: O_EXCL and O_NOFOLLOW, so nothing planted at its name is ever written. */
static pt_status create_tmp(pt_filewriter *w)
{
    char name[512];
    for (int tries = 0; tries < 16; tries++) {
        safefs_tmp_name(w->name, name, sizeof name);
        set_active(w->dir, name);
        w->fd = openat(w->dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, SAFEFS_FILE_MODE);
        if (w->fd >= 0) break;
        set_active(-1, NULL);
        if (errno != EEXIST) break;
    }
    const char *slash = strrchr(w->final, '/');
    strbuf tmp = {0};
    sb_printf(&tmp, "%.*s%s", slash ? (int)(slash - w->final + 1) : 0, w->final, name);
    w->tmp = tmp.data, w->tmp_name = xstrdup(name);
    if (w->fd < 0)
        return ERR(PT_ERR_USER, "cannot create %s: %s (is the directory writable?)", shown_text(w->tmp).s,
                   strerror(errno));
    return PT_OK;
}

pt_status fw_open(pt_filewriter *w, const char *final)
{
    memset(w, 0, sizeof *w);
    w->fd = w->dir = -1;
    w->final = xstrdup(final);
    pt_status st = open_dir(w, final);
    if (st == PT_OK) st = create_tmp(w);
    if (st != PT_OK) fw_abort(w);
    return st;
}

static pt_status flush_buf(pt_filewriter *w)
{
    size_t off = 0;
    while (off < w->used) {
        ssize_t got = write(w->fd, w->buf + off, w->used - off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return safefs_write_error("write", w->tmp, got < 0 ? errno : 0);
        off += (size_t)got;
    }
    w->used = 0;
    return PT_OK;
}

pt_status fw_write(pt_filewriter *w, const void *data, size_t n)
{
    if (w->fd < 0) return ERR(PT_ERR_INTERNAL, "write to a file that is not open");
    if (!w->buf && n) {
        w->buf = malloc(FW_BUF);
        if (!w->buf) return ERR(PT_ERR_NOMEM, "out of memory for the write buffer of %s", shown_text(w->final).s);
        w->cap = FW_BUF;
    }
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

pt_status fw_commit(pt_filewriter *w)
{
    if (w->fd < 0) return ERR(PT_ERR_INTERNAL, "commit of a file that is not open");
    pt_status st = flush_buf(w);
    if (st == PT_OK && fsync(w->fd) != 0) st = safefs_write_error("sync", w->tmp, errno);
    if (close(w->fd) != 0 && st == PT_OK) st = safefs_write_error("close", w->tmp, errno);
    w->fd = -1;
    if (st == PT_OK && renameat(w->dir, w->tmp_name, w->dir, w->name) != 0)
        st =
            ERR(PT_ERR_USER, "cannot move %s to %s: %s", shown_text(w->tmp).s, shown_text(w->final).s, strerror(errno));
    if (st == PT_OK) {
        set_active(-1, NULL);
        free(w->tmp_name);
        w->tmp_name = NULL; /* nothing left to remove */
    }
    if (st == PT_OK && fsync(w->dir) != 0 && errno != EINVAL)
        st = safefs_write_error("sync the directory of", w->final, errno);
    fw_abort(w);
    return st;
}

void fw_abort(pt_filewriter *w)
{
    if (w->tmp_name && active_dir == w->dir && !strcmp(active_name, w->tmp_name)) set_active(-1, NULL);
    if (w->fd >= 0) close(w->fd);
    if (w->tmp_name && w->dir >= 0) unlinkat(w->dir, w->tmp_name, 0);
    if (w->dir >= 0) close(w->dir);
    free(w->tmp_name);
    free(w->tmp);
    free(w->name);
    free(w->final);
    free(w->buf);
    memset(w, 0, sizeof *w);
    w->fd = w->dir = -1;
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
