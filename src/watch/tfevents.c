/* tfevents.c — TensorBoard event files (see tfevents.h): a TFRecord per Event (length, masked
 * CRC-32C of the length, the Event's bytes, their masked CRC-32C), the Event, Summary and
 * SessionLog messages written by hand with protobuf.c. The fields (tensorflow/core/util/event.proto,
 * tensorflow/core/framework/summary.proto): Event {double wall_time = 1; int64 step = 2; string
 * file_version = 3; Summary summary = 5; SessionLog session_log = 7}, Summary {repeated Value value
 * = 1}, Value {string tag = 1; float simple_value = 2}, SessionLog {SessionStatus status = 1},
 * START = 1. */
#include "ptrain/tfevents.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptrain/safefs.h"
#include "watch_internal.h"

enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_SUMMARY = 5, EV_SESSION_LOG = 7 };
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE = 2, SESSION_STATUS = 1, SESSION_START = 1 };

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The newest TIME among dir's event files (0: none), so a new file sorts after them. */
static long long newest_time(int dfd)
{
    int copy = dup(dfd);
    DIR *d = copy >= 0 ? fdopendir(copy) : NULL;
    long long newest = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, TFEVENTS_PREFIX, strlen(TFEVENTS_PREFIX))) {
            long long t = atoll(e->d_name + strlen(TFEVENTS_PREFIX));
            if (t > newest) newest = t;
        }
    if (d) closedir(d);
    else if (copy >= 0) close(copy);
    return newest;
}

/* The host name as a file name may hold it: letters, digits, '-', '_' and '.'. */
static void host_name(char *out, size_t len)
{
    if (gethostname(out, len) != 0) snprintf(out, len, "localhost");
    out[len - 1] = '\0';
    for (char *c = out; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", *c)) *c = '_';
}

/* The Event head every event has: its wall time and, when not 0, its step. */
static void event_head(pb_buf *ev, int64_t step)
{
    pb_double(ev, EV_WALL_TIME, wall_time());
    if (step) pb_int64(ev, EV_STEP, step);
}

static void put_u32(pb_buf *b, uint32_t v)
{
    unsigned char out[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    pb_raw(b, out, sizeof out);
}

/* ev framed as a TFRecord: length, its masked CRC-32C, the bytes, their masked CRC-32C. */
static void frame_record(const pb_buf *ev, pb_buf *rec)
{
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)ev->len >> (8 * i));
    pb_raw(rec, len, sizeof len);
    put_u32(rec, crc32c_masked(len, sizeof len));
    pb_raw(rec, ev->data, ev->len);
    put_u32(rec, crc32c_masked(ev->data, ev->len));
    if (ev->failed) rec->failed = true;
}

/* Append ev as one TFRecord with one write; a write cut short is taken back (ptrain is the file's
 * only writer: rank 0 of the run holding output_dir's lock). */
static pt_status append_record(tfevents *w, const pb_buf *ev)
{
    pb_buf rec = {0};
    frame_record(ev, &rec);
    pt_status st = rec.failed ? ERR(PT_ERR_NOMEM, "out of memory writing %s", shown_text(w->path).s) : PT_OK;
    off_t before = lseek(w->fd, 0, SEEK_END);
    size_t off = 0;
    while (st == PT_OK && off < rec.len) {
        ssize_t got = write(w->fd, rec.data + off, rec.len - off);
        if (got < 0 && errno == EINTR) continue;
        if (got > 0) {
            off += (size_t)got;
            continue;
        }
        int err = got < 0 ? errno : ENOSPC;
        if (before >= 0 && ftruncate(w->fd, before) != 0) { /* left torn: TensorBoard skips a torn last record */ }
        st = safefs_write_error("write", w->path, err);
    }
    pb_free(&rec);
    return st;
}

/* The new file: O_EXCL and O_NOFOLLOW inside the directory safefs opened, so nothing planted at
 * its name is ever written through. */
static pt_status create_file(tfevents *w, const char *dir, int dfd)
{
    char host[256], name[512];
    host_name(host, sizeof host);
    long long t = (long long)wall_time(), newest = newest_time(dfd);
    if (t <= newest) t = newest + 1;
    snprintf(name, sizeof name, "%s%010lld.%s.%ld.0", TFEVENTS_PREFIX, t, host, (long)getpid());
    snprintf(w->path, sizeof w->path, "%s/%s", dir, name);
    w->fd = openat(dfd, name, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, SAFEFS_FILE_MODE);
    if (w->fd < 0)
        return ERR(PT_ERR_USER, "cannot create the TensorBoard event file %s: %s%s",
                   shown_text(w->path).s, strerror(errno),
                   errno == EEXIST ? " (something else made a file of that name: remove it)" : "");
    return PT_OK;
}

pt_status tfevents_open(tfevents *w, const char *dir)
{
    w->fd = -1;
    int dfd;
    pt_status st = safefs_dir_open(dir, true, &dfd);
    if (st != PT_OK) {
        err_context("logging_dir (TensorBoard's event files)");
        return st;
    }
    st = create_file(w, dir, dfd);
    close(dfd);
    pb_buf ev = {0};
    event_head(&ev, 0);
    pb_bytes(&ev, EV_FILE_VERSION, TFEVENTS_VERSION, strlen(TFEVENTS_VERSION));
    if (st == PT_OK) st = append_record(w, &ev);
    pb_free(&ev);
    if (st != PT_OK) tfevents_close(w);
    return st;
}

pt_status tfevents_start(tfevents *w, int64_t step)
{
    pb_buf ev = {0}, log = {0};
    event_head(&ev, step);
    pb_int64(&log, SESSION_STATUS, SESSION_START);
    pb_message(&ev, EV_SESSION_LOG, &log);
    pt_status st = append_record(w, &ev);
    pb_free(&log);
    pb_free(&ev);
    return st;
}

pt_status tfevents_scalars(tfevents *w, int64_t step, const tfevents_value *v, int n)
{
    pb_buf ev = {0}, summary = {0};
    event_head(&ev, step);
    for (int i = 0; i < n; i++) {
        pb_buf value = {0};
        pb_bytes(&value, VALUE_TAG, v[i].tag, strlen(v[i].tag));
        pb_float(&value, VALUE_SIMPLE, (float)v[i].value);
        pb_message(&summary, SUMMARY_VALUE, &value);
        pb_free(&value);
    }
    pb_message(&ev, EV_SUMMARY, &summary);
    pt_status st = append_record(w, &ev);
    pb_free(&summary);
    pb_free(&ev);
    return st;
}

pt_status tfevents_sync(tfevents *w)
{
    if (w->fd >= 0 && fsync(w->fd) != 0 && errno != EINVAL) return safefs_write_error("sync", w->path, errno);
    return PT_OK;
}

void tfevents_close(tfevents *w)
{
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
}
