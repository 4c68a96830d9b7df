/* dirlock.c — the output_dir lock (see dirlock.h): an fcntl write lock on output_dir/.ptrain.lock
 * (open file description locks where the kernel has them), the holder's host, PID, Slurm job and
 * start time written into the file for the message a second run gets. */
#include "ptrain/dirlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ptrain/log.h"
#include "ptrain/safefs.h"

typedef struct {
    char host[256], job[64], since[32];
    long pid;
} holder;

/* 0 when locked; else -1 with errno (EAGAIN/EACCES: held by someone else). */
static int try_lock(int fd)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
#ifdef F_OFD_SETLK
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return 0;
    if (errno != EINVAL) return -1;
    fl = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET};
#endif
    return fcntl(fd, F_SETLK, &fl);
}

static void holder_read(int fd, holder *h)
{
    char text[512] = {0};
    memset(h, 0, sizeof *h);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0) return;
    text[n] = '\0';
    if (sscanf(text, "host=%255s pid=%ld slurm_job=%63s since=%31s", h->host, &h->pid, h->job, h->since) < 2)
        h->host[0] = '\0';
    if (!strcmp(h->job, "-")) h->job[0] = '\0';
}

static void holder_write(int fd)
{
    char host[256] = "?", since[32] = "?";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *job = getenv("SLURM_JOB_ID");
    char text[512];
    int n = snprintf(text, sizeof text, "host=%s pid=%ld slurm_job=%s since=%s\n", host, (long)getpid(),
                     job && *job ? job : "-", since);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n)
        log_warn("could not record this run in the output_dir lock file: %s", strerror(errno));
}

static pt_status held_error(const char *dir, const holder *h)
{
    if (!h->host[0])
        return ERR(PT_ERR_USER,
                   "output_dir %s is in use by another ptrain run (it holds %s/%s); wait for it to end "
                   "or stop it, or give this run another output_dir",
                   shown_text(dir).s, shown_text(dir).s, DIRLOCK_NAME);
    return ERR(PT_ERR_USER,
               "output_dir %s is in use by another ptrain run: host %s, PID %ld%s%s, since %s; wait for "
               "it to end or stop it, or give this run another output_dir (the lock %s/%s is released when that "
               "process ends)",
               shown_text(dir).s, shown_text(h->host).s, h->pid, h->job[0] ? ", Slurm job " : "", shown_text(h->job).s,
               shown_text(h->since).s,
               shown_text(dir).s, DIRLOCK_NAME);
}

/* The lock is held: refuse, or wait when the holder is an earlier instance of this Slurm job. */
static pt_status wait_or_refuse(const char *dir, int fd)
{
    holder h;
    holder_read(fd, &h);
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job || strcmp(job, h.job)) return held_error(dir, &h);
    log_info("lock       output_dir %s is still held by an earlier run of Slurm job %s (host %s, PID %ld); waiting "
             "up to %d s for it to be released\n", shown_text(dir).s, shown_text(job).s, shown_text(h.host).s, h.pid,
             DIRLOCK_WAIT_S);
    for (int waited = 0; waited < DIRLOCK_WAIT_S; waited += 2) {
        sleep(2);
        if (try_lock(fd) == 0) return PT_OK;
    }
    holder_read(fd, &h);
    return held_error(dir, &h);
}

pt_status dirlock_acquire(const char *dir, pt_dirlock *l)
{
    l->fd = -1;
    int dfd;
    TRY(safefs_dir_open(dir, true, &dfd));
    int fd = openat(dfd, DIRLOCK_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, SAFEFS_FILE_MODE);
    int err = errno;
    close(dfd);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        if (fd >= 0) close(fd);
        return ERR(PT_ERR_USER, "cannot open the lock file %s/%s: %s; remove whatever is there", shown_text(dir).s,
                   DIRLOCK_NAME,
                   fd < 0 && err == ELOOP ? "it is a symbolic link"
                   : fd < 0               ? strerror(err)
                                          : "not a regular file");
    }
    pt_status st = PT_OK;
    if (try_lock(fd) != 0) {
        err = errno;
        if (err == EAGAIN || err == EACCES) {
            st = wait_or_refuse(dir, fd);
        } else { /* ENOLCK, ENOSYS, EOPNOTSUPP: a filesystem without (working) locks */
            log_warn("cannot lock output_dir %s (%s): this file system has no working locks, so a second run in the "
                     "same output_dir would not be stopped", shown_text(dir).s, strerror(err));
            close(fd);
            return PT_OK;
        }
    }
    if (st != PT_OK) {
        close(fd);
        return st;
    }
    holder_write(fd);
    l->fd = fd;
    return PT_OK;
}

pt_status dirlock_check(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, DIRLOCK_NAME);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return PT_OK; /* none yet, or not a file: dirlock_acquire says what is wrong */
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int rc = -1;
#ifdef F_OFD_GETLK
    rc = fcntl(fd, F_OFD_GETLK, &fl);
    if (rc != 0 && errno == EINVAL) fl = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET};
#endif
    if (rc != 0) rc = fcntl(fd, F_GETLK, &fl);
    pt_status st = PT_OK;
    const char *job = getenv("SLURM_JOB_ID");
    holder h;
    if (rc == 0 && fl.l_type != F_UNLCK) {
        holder_read(fd, &h);
        if (!job || !*job || strcmp(job, h.job)) st = held_error(dir, &h); /* an earlier instance: waited for */
    }
    close(fd);
    return st;
}

void dirlock_release(pt_dirlock *l)
{
    if (l->fd >= 0) close(l->fd); /* the file stays: removing it would race with a run taking it */
    l->fd = -1;
}
