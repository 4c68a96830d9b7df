/* test_safefs.c — the rules of safefs.c and filewrite.c (issue 24): temporary names that cannot be
 * guessed; a link at a final name replaced, never written through; appended files that are links,
 * FIFOs (which would block an open for writing), hard-linked or another user's refused; directory
 * links followed only when they are this user's or root's; explicit modes whatever the umask; the
 * output_dir lock refusing a second holder. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ptrain/dirlock.h"
#include "ptrain/filewrite.h"
#include "ptrain/safefs.h"
#include "tmpdir.h"

static char dir[TMPDIR_SIZE];

static int setup(void **state)
{
    (void)state;
    return tmpdir_create(dir, sizeof dir, "ptrain-safefs");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove(dir);
}

static void at(char *out, size_t len, const char *name) { snprintf(out, len, "%s/%s", dir, name); }

static void spill(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_text(const char *path, const char *want)
{
    char got[256] = {0};
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    assert_string_equal(got, want);
}

static void expect_error(pt_status st, const char *part)
{
    assert_int_not_equal(st, PT_OK);
    if (!strstr(err_message(), part)) fail_msg("error \"%s\" lacks \"%s\"", err_message(), part);
}

/* Two writers of the same file get different names: .NAME.tmp. and twelve letters or digits. */
static void test_tmp_names_unpredictable(void **state)
{
    (void)state;
    char final[128];
    at(final, sizeof final, "a.json");
    pt_filewriter w1, w2;
    assert_int_equal(fw_open(&w1, final), PT_OK);
    assert_int_equal(fw_open(&w2, final), PT_OK);
    assert_string_not_equal(w1.tmp_name, w2.tmp_name);
    for (pt_filewriter *w = &w1; w; w = w == &w1 ? &w2 : NULL) {
        assert_int_equal(strlen(w->tmp_name), strlen(".a.json.tmp.") + 12);
        assert_memory_equal(w->tmp_name, ".a.json.tmp.", 12);
        for (const char *c = w->tmp_name + 12; *c; c++) assert_true(isalnum((unsigned char)*c));
    }
    fw_abort(&w1);
    fw_abort(&w2);
    DIR *d = opendir(dir);
    int left = 0;
    for (struct dirent *e; (e = readdir(d));) left += e->d_name[0] != '.' || strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    assert_int_equal(left, 0); /* aborted: nothing left behind */
}

/* A link planted at the final name is replaced by the new file; its target stays as it was. */
static void test_commit_replaces_link(void **state)
{
    (void)state;
    char final[128], victim[128];
    at(final, sizeof final, "adapter.h5");
    at(victim, sizeof victim, "victim");
    spill(victim, "untouched");
    assert_int_equal(symlink(victim, final), 0);
    assert_int_equal(fw_write_file(final, "new", 3), PT_OK);
    struct stat sb;
    assert_int_equal(lstat(final, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    expect_text(final, "new");
    expect_text(victim, "untouched");
    unlink(final);
    unlink(victim);
}

static void test_append_refusals(void **state)
{
    (void)state;
    char path[128], victim[128];
    int fd = -1;
    at(path, sizeof path, "metrics.jsonl");
    at(victim, sizeof victim, "victim");
    spill(victim, "untouched");
    assert_int_equal(symlink(victim, path), 0);
    expect_error(safefs_open_append(path, &fd), "it is a symbolic link");
    unlink(path);
    assert_int_equal(mkfifo(path, 0644), 0); /* opening a FIFO for writing would block forever */
    expect_error(safefs_open_append(path, &fd), "it is not a regular file");
    unlink(path);
    assert_int_equal(link(victim, path), 0);
    expect_error(safefs_open_append(path, &fd), "has other hard links");
    unlink(path);
    assert_int_equal(safefs_open_append(path, &fd), PT_OK);
    assert_int_equal(write(fd, "x\n", 2), 2);
    close(fd);
    expect_text(path, "x\n");
    expect_text(victim, "untouched");
    unlink(path);
    unlink(victim);
}

/* As root: a directory link of another user is refused, root's and one's own are followed. */
static void test_dir_links(void **state)
{
    (void)state;
    char real[128], mine[128], theirs[128], sub[160];
    at(real, sizeof real, "real");
    at(mine, sizeof mine, "mine");
    at(theirs, sizeof theirs, "theirs");
    assert_int_equal(mkdir(real, 0755), 0);
    assert_int_equal(symlink(real, mine), 0);
    snprintf(sub, sizeof sub, "%s/a/b", mine);
    assert_int_equal(safefs_mkdirs(sub), PT_OK);
    snprintf(sub, sizeof sub, "%s/a/b", real);
    struct stat sb;
    assert_int_equal(stat(sub, &sb), 0);
    assert_int_equal(symlink(real, theirs), 0);
    if (geteuid() != 0 || lchown(theirs, 65534, 65534) != 0) {
        print_message("# skip: a link owned by another user needs root to make (lchown)\n");
        skip();
        return;
    }
    snprintf(sub, sizeof sub, "%s/c", theirs);
    expect_error(safefs_mkdirs(sub), "is a symbolic link owned by another user (uid 65534)");
    snprintf(sub, sizeof sub, "%s/c", real);
    assert_int_equal(access(sub, F_OK), -1);
}

static void test_modes_ignore_umask(void **state)
{
    (void)state;
    char d[128], f[160];
    at(d, sizeof d, "m/n");
    mode_t old = umask(0);
    assert_int_equal(safefs_mkdirs(d), PT_OK);
    snprintf(f, sizeof f, "%s/x.json", d);
    assert_int_equal(fw_write_file(f, "{}", 2), PT_OK);
    umask(old);
    struct stat sb;
    assert_int_equal(stat(d, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0755);
    assert_int_equal(stat(f, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0644);
}

/* A second holder (another process) is refused with the first one's PID; it gets the lock once
 * the first has died. */
static void test_lock(void **state)
{
    (void)state;
    char out[128];
    at(out, sizeof out, "run");
    int ready[2], done[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(done), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pt_dirlock l;
        char c = dirlock_acquire(out, &l) == PT_OK ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(done[0], &c, 1) != 1) _exit(1);
        _exit(0); /* dies holding it: the kernel releases it */
    }
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    pt_dirlock l;
    char pid[64];
    snprintf(pid, sizeof pid, "PID %ld", (long)child);
    unsetenv("SLURM_JOB_ID");
    expect_error(dirlock_acquire(out, &l), pid);
    assert_int_equal(write(done[1], "x", 1), 1);
    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_int_equal(dirlock_acquire(out, &l), PT_OK);
    dirlock_release(&l);
    close(ready[0]), close(ready[1]), close(done[0]), close(done[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tmp_names_unpredictable), cmocka_unit_test(test_commit_replaces_link),
        cmocka_unit_test(test_append_refusals),         cmocka_unit_test(test_dir_links),
        cmocka_unit_test(test_modes_ignore_umask),      cmocka_unit_test(test_lock),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
