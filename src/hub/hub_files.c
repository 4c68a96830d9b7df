/* hub_files.c — the files of one commit: every file under a job's files/ directory with what the
 * Hub asks about each (size, the first 512 bytes for the preupload, the SHA-256 that is a large
 * file's LFS object id; the git blob id of a regular one, to compare with the repository's), hashed
 * with OpenSSL's libcrypto (already on every machine with libcurl), a cancel flag watched. */
#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hub_internal.h"
#include "ptrain/safefs.h"

char *hub_base64(const void *data, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (out) EVP_EncodeBlock((unsigned char *)out, data, (int)n);
    return out;
}

/* The digest md of prefix and then the file's bytes; stops when *cancel is set (cancel may be NULL). */
static pt_status digest_file(const char *path, const EVP_MD *md, const void *prefix, size_t prefix_len,
                             atomic_int *cancel, unsigned char *out, unsigned *out_len)
{
    FILE *f;
    TRY(safefs_fopen_read(path, &f));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char *buf = malloc((size_t)1 << 20);
    bool ok = ctx && buf && EVP_DigestInit_ex(ctx, md, NULL) && EVP_DigestUpdate(ctx, prefix, prefix_len);
    bool stop = false;
    for (size_t got; ok && !stop && (got = fread(buf, 1, (size_t)1 << 20, f)) > 0;) {
        ok = EVP_DigestUpdate(ctx, buf, got);
        stop = cancel && atomic_load(cancel);
    }
    bool read_ok = !ferror(f);
    ok = ok && !stop && read_ok && EVP_DigestFinal_ex(ctx, out, out_len);
    fclose(f);
    free(buf);
    EVP_MD_CTX_free(ctx);
    if (stop) return ERR(PT_ERR_USER, "hashing %s: stopped (the wait for uploads ended)", shown_text(path).s);
    if (!read_ok) return ERR(PT_ERR_USER, "cannot read %s", shown_text(path).s);
    if (!ok) return ERR(PT_ERR_INTERNAL, "hashing %s failed", shown_text(path).s);
    return PT_OK;
}

static void hex_of(const unsigned char *md, unsigned n, char *hex)
{
    for (unsigned i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

pt_status hub_sha256_file(const char *path, char hex[65], atomic_int *cancel)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    TRY(digest_file(path, EVP_sha256(), "", 0, cancel, md, &n));
    hex_of(md, n < 32 ? n : 32, hex);
    return PT_OK;
}

pt_status hub_blob_sha1_file(const char *path, uint64_t size, char hex[41])
{
    char head[64];
    int len = snprintf(head, sizeof head, "blob %llu", (unsigned long long)size);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    TRY(digest_file(path, EVP_sha1(), head, (size_t)len + 1, NULL, md, &n)); /* the header's NUL too */
    hex_of(md, n < 20 ? n : 20, hex);
    return PT_OK;
}

static pt_status describe(hub_file *f, atomic_int *cancel)
{
    struct stat sb;
    FILE *in;
    TRY(safefs_fopen_read(f->path, &in));
    if (fstat(fileno(in), &sb) != 0) {
        fclose(in);
        return ERR(PT_ERR_USER, "cannot read %s: %s", shown_text(f->path).s, strerror(errno));
    }
    f->size = (uint64_t)sb.st_size;
    f->sample_len = fread(f->sample, 1, HUB_SAMPLE, in);
    fclose(in);
    return hub_sha256_file(f->path, f->sha256, cancel);
}

typedef struct {
    hub_file *v;
    int n, cap;
    atomic_int *cancel;
} file_list;

static pt_status add_file(file_list *l, const char *path, const char *repo_path)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        hub_file *v = realloc(l->v, (size_t)cap * sizeof *v);
        TRY_ALLOC(v);
        l->v = v;
        l->cap = cap;
    }
    hub_file *f = &l->v[l->n++];
    memset(f, 0, sizeof *f);
    f->path = xstrdup(path);
    f->repo_path = xstrdup(repo_path);
    return describe(f, l->cancel);
}

static pt_status walk(file_list *l, const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d) return ERR(PT_ERR_USER, "cannot read directory %s: %s", shown_text(dir).s, strerror(errno));
    pt_status st = PT_OK;
    for (struct dirent *e; st == PT_OK && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue; /* ., .., and filewrite's .NAME.tmp.XXXXXXXXXXXX */
        char path[4200], rel[4200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(rel, sizeof rel, "%s%s%s", prefix, *prefix ? "/" : "", e->d_name);
        if (lstat(path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) st = walk(l, path, rel);
        else st = add_file(l, path, rel); /* a link or a FIFO is refused there, never followed */
    }
    closedir(d);
    return st;
}

static int by_repo_path(const void *a, const void *b)
{
    return strcmp(((const hub_file *)a)->repo_path, ((const hub_file *)b)->repo_path);
}

pt_status hub_files_scan(const char *dir, hub_file **files, int *n, atomic_int *cancel)
{
    file_list l = {.cancel = cancel};
    pt_status st = walk(&l, dir, "");
    if (st != PT_OK) {
        hub_files_free(l.v, l.n);
        return st;
    }
    if (l.n) qsort(l.v, (size_t)l.n, sizeof *l.v, by_repo_path);
    *files = l.v, *n = l.n;
    return PT_OK;
}

void hub_files_free(hub_file *files, int n)
{
    for (int i = 0; i < n; i++) {
        free(files[i].path);
        free(files[i].repo_path);
    }
    free(files);
}
