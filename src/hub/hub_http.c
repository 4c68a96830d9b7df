/* hub_http.c — one HTTP exchange with the Hub over libcurl, made to survive a cluster's network:
 * a connect timeout, a stall timeout (below 1 byte/s for stall_s seconds) instead of a total one
 * so large files may take as long as they need, and tries again with exponential backoff on
 * connection errors (no answer, a reset, a timeout), 408, 429 and 5xx, waiting as long as a
 * Retry-After asks (bounded); never on other errors: those get one error saying what to do. The
 * token goes only with the Hub API's requests, never to the storage URLs the LFS batch hands out
 * (as huggingface_hub; S3 refuses a second credential), and messages show those URLs without their
 * query (a signature). Only http and https are spoken, redirects included. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hub_internal.h"
#include "ptrain/safefs.h"

pt_status hub_client_open(hub_client *c, atomic_int *cancel)
{
    memset(c, 0, sizeof *c);
    hub_endpoint(c->endpoint, sizeof c->endpoint);
    TRY(hub_token_find(&c->token, c->token_from, sizeof c->token_from));
    snprintf(c->user_agent, sizeof c->user_agent, "ptrain/%s; libcurl/%s", PACKAGE_VERSION,
             curl_version_info(CURLVERSION_NOW)->version);
    c->curl = curl_easy_init();
    if (!c->curl) {
        hub_client_close(c);
        return ERR(PT_ERR_INTERNAL, "cannot start libcurl");
    }
    c->cancel = cancel;
    atomic_init(&c->hurry, 0);
    atomic_init(&c->unreachable, 0);
    c->attempts = 6;
    c->backoff_s = 1.0;
    c->backoff_max_s = 30.0;
    c->retry_after_max_s = 60.0;
    c->connect_timeout_s = 30;
    c->stall_s = 60;
    return PT_OK;
}

void hub_client_close(hub_client *c)
{
    if (c->curl) curl_easy_cleanup(c->curl);
    if (c->token) memset(c->token, 0, strlen(c->token));
    free(c->token);
    for (int i = 0; i < c->n_repos; i++) free(c->repos[i]);
    free(c->repos);
    memset(c, 0, sizeof *c);
}

void hub_response_free(hub_response *rs)
{
    sb_free(&rs->body);
    memset(rs, 0, sizeof *rs);
}

bool hub_cancelled(const hub_client *c) { return c->cancel && atomic_load(c->cancel); }

/* The final wait began and the Hub does not answer: no point in waiting for the next try. */
static bool hurried(const hub_client *c) { return atomic_load(&c->hurry) && atomic_load(&c->unreachable); }

bool hub_sleep(const hub_client *c, double s)
{
    for (double left = s; left > 0 && !hurried(c); left -= 0.05) {
        if (hub_cancelled(c)) return false;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return !hub_cancelled(c);
}

void hub_shown_url(const hub_request *rq, char *out, size_t len)
{
    size_t n = rq->auth ? strlen(rq->url) : strcspn(rq->url, "?#");
    snprintf(out, len, "%.*s", (int)n, rq->url);
}

/* ---- curl callbacks ---- */

typedef struct {
    FILE *f;
    const unsigned char *mem;
    uint64_t base, len, off; /* the body: len bytes from base of f (or mem) */
} body_src;

static size_t on_read(char *buf, size_t size, size_t nitems, void *arg)
{
    body_src *b = arg;
    size_t want = size * nitems;
    if (b->off + want > b->len) want = (size_t)(b->len - b->off);
    size_t got = want;
    if (b->f) got = fread(buf, 1, want, b->f);
    else memcpy(buf, b->mem + b->off, want);
    if (b->f && got < want && ferror(b->f)) return CURL_READFUNC_ABORT;
    b->off += got;
    return got;
}

static int on_seek(void *arg, curl_off_t offset, int origin)
{
    body_src *b = arg;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > b->len) return CURL_SEEKFUNC_CANTSEEK;
    if (b->f && fseeko(b->f, (off_t)(b->base + (uint64_t)offset), SEEK_SET) != 0) return CURL_SEEKFUNC_FAIL;
    b->off = (uint64_t)offset;
    return CURL_SEEKFUNC_OK;
}

static size_t on_write(char *data, size_t size, size_t n, void *arg)
{
    hub_response *rs = arg;
    size_t len = size * n;
    if (rs->body.len + len > HUB_MAX_ANSWER) { /* no Hub answer is that large */
        rs->too_large = true;
        return 0;
    }
    sb_printf(&rs->body, "%.*s", (int)len, data);
    return len;
}

/* Retry-After: seconds, or an HTTP date. */
static double retry_after(const char *v)
{
    char *end;
    double s = strtod(v, &end);
    if (end != v && s >= 0) return s;
    time_t when = curl_getdate(v, NULL);
    return when > 0 ? difftime(when, time(NULL)) : 0;
}

/* Link: <URL>; rel="next" of a paginated listing. */
static void next_link(hub_response *rs, const char *v)
{
    for (const char *lt = strchr(v, '<'); lt; lt = strchr(lt + 1, '<')) {
        const char *gt = strchr(lt, '>');
        if (!gt) return;
        const char *comma = strchr(gt, ','), *rel = strstr(gt, "rel=\"next\"");
        if (rel && (!comma || rel < comma)) {
            snprintf(rs->next_url, sizeof rs->next_url, "%.*s", (int)(gt - lt - 1), lt + 1);
            return;
        }
    }
}

/* Keep ETag (multipart LFS parts), X-Error-Message (the Hub's explanation of an error),
 * Retry-After and the next page's Link. */
static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    hub_response *rs = arg;
    size_t len = size * n;
    char line[3072];
    snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line - 1 ? len : sizeof line - 1), data);
    line[strcspn(line, "\r\n")] = '\0';
    const char *colon = strchr(line, ':');
    if (!colon) return len;
    const char *v = colon + 1 + strspn(colon + 1, " \t");
    size_t name = (size_t)(colon - line);
    if (name == 4 && !strncasecmp(line, "etag", 4)) snprintf(rs->etag, sizeof rs->etag, "%s", v);
    else if (name == 15 && !strncasecmp(line, "x-error-message", 15)) snprintf(rs->error_msg, sizeof rs->error_msg, "%s", v);
    else if (name == 11 && !strncasecmp(line, "retry-after", 11)) rs->retry_after = retry_after(v);
    else if (name == 4 && !strncasecmp(line, "link", 4)) next_link(rs, v);
    return len;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d)
{
    (void)a;
    (void)b;
    (void)c2;
    (void)d;
    return hub_cancelled(arg) ? 1 : 0;
}

/* ---- one try ---- */

static struct curl_slist *add_header(struct curl_slist *h, const char *name, const char *value)
{
    char line[4400];
    snprintf(line, sizeof line, "%s: %s", name, value);
    h = curl_slist_append(h, line);
    memset(line, 0, sizeof line); /* the token's line */
    return h;
}

static struct curl_slist *make_headers(const hub_client *c, const hub_request *rq)
{
    struct curl_slist *h = NULL;
    if (rq->auth && c->token) {
        char bearer[4200];
        snprintf(bearer, sizeof bearer, "Bearer %s", c->token);
        h = add_header(h, "Authorization", bearer);
        memset(bearer, 0, sizeof bearer);
    }
    if (rq->content_type) h = add_header(h, "Content-Type", rq->content_type);
    else h = curl_slist_append(h, "Content-Type:"); /* none: curl would add a form type to a POST */
    if (rq->accept) h = add_header(h, "Accept", rq->accept);
    return curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
}

static void set_body(CURL *e, const hub_request *rq, body_src *src)
{
    if (!rq->body && !rq->file) {
        if (!strcmp(rq->method, "POST")) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
        }
        return;
    }
    src->len = rq->file ? rq->file_len : rq->body_len;
    src->mem = rq->body;
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)src->len);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, src);
    curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(e, CURLOPT_SEEKDATA, src);
}

/* http and https only, also after a redirect; no waiting for a DNS thread at cleanup. */
static void set_safety(CURL *e)
{
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85.0 */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
#if LIBCURL_VERSION_NUM >= 0x075700 /* 7.87.0 */
    curl_easy_setopt(e, CURLOPT_QUICK_EXIT, 1L);
#endif
}

static void set_options(hub_client *c, CURL *e, const hub_request *rq, hub_response *rs, char *errbuf)
{
    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_URL, rq->url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, rq->method);
    if (!strcmp(rq->method, "HEAD")) curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, c->connect_timeout_s);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, c->stall_s);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L); /* curl keeps Authorization to the first host */
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(e, CURLOPT_POSTREDIR, (long)CURL_REDIR_POST_ALL);
    set_safety(e);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, rs);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, rs);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, c);
}

/* One try: CURLE_OK and rs->status, or a curl error with errbuf filled. */
static CURLcode try_once(hub_client *c, const hub_request *rq, hub_response *rs, char *errbuf)
{
    CURL *e = c->curl;
    body_src src = {0};
    src.base = rq->file_off;
    if (rq->file && safefs_fopen_read(rq->file, &src.f) != PT_OK) {
        snprintf(errbuf, CURL_ERROR_SIZE, "%s", err_message());
        return CURLE_READ_ERROR;
    }
    if (src.f && fseeko(src.f, (off_t)src.base, SEEK_SET) != 0) {
        snprintf(errbuf, CURL_ERROR_SIZE, "cannot read %s: %s", rq->file, strerror(errno));
        fclose(src.f);
        return CURLE_READ_ERROR;
    }
    hub_response_free(rs);
    errbuf[0] = '\0';
    set_options(c, e, rq, rs, errbuf);
    set_body(e, rq, &src);
    struct curl_slist *h = make_headers(c, rq);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    CURLcode rc = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &rs->status);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    for (struct curl_slist *p = h; p; p = p->next) memset(p->data, 0, strlen(p->data)); /* the token line */
    curl_slist_free_all(h);
    if (src.f) fclose(src.f);
    if (rc == CURLE_WRITE_ERROR && rs->too_large)
        snprintf(errbuf, CURL_ERROR_SIZE, "the answer is larger than %d MiB, the most ptrain reads of one",
                 (int)(HUB_MAX_ANSWER >> 20));
    if (rc != CURLE_OK && !errbuf[0]) snprintf(errbuf, CURL_ERROR_SIZE, "%s", curl_easy_strerror(rc));
    return rc;
}

/* The network failed (no answer, a reset, a timeout): worth another try. */
static bool connection_error(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY: case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT: case CURLE_SEND_ERROR: case CURLE_RECV_ERROR: case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE: case CURLE_HTTP2: case CURLE_HTTP2_STREAM: case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

static bool retryable_status(long s) { return s == 408 || s == 429 || (s >= 500 && s < 600); }

static pt_status stopped(const hub_request *rq)
{
    return ERR(PT_ERR_USER, "%s: stopped (the wait for uploads ended)", shown_text(rq->what).s);
}

/* Remember what this try met, for the report; a curl error text may quote the URL. */
static void note_failure(hub_client *c, const hub_request *rq, const hub_response *rs, CURLcode rc, char *errbuf)
{
    char url[2048];
    hub_shown_url(rq, url, sizeof url);
    if (!rq->auth && strchr(rq->url, '?')) {
        char *q = strstr(errbuf, strchr(rq->url, '?'));
        if (q) *q = '\0';
    }
    hub_scrub(errbuf, c->token);
    if (rc != CURLE_OK) snprintf(c->last_error, sizeof c->last_error, "%s %.300s: %.250s", rq->method, url, errbuf);
    else snprintf(c->last_error, sizeof c->last_error, "%s %.300s: HTTP %ld", rq->method, url, rs->status);
}

/* The wait before the next try: the backoff, or longer when the answer (429, 503, any status worth
 * another try, as huggingface_hub reads it) asked for it with Retry-After; bounded. */
static double next_wait(const hub_client *c, const hub_response *rs, CURLcode rc, double backoff)
{
    double w = backoff;
    if (rc == CURLE_OK && rs->retry_after > w) w = rs->retry_after;
    return w > c->retry_after_max_s ? c->retry_after_max_s : w;
}

pt_status hub_http(hub_client *c, const hub_request *rq, hub_response *rs)
{
    char errbuf[CURL_ERROR_SIZE];
    double backoff = c->backoff_s;
    memset(rs, 0, sizeof *rs);
    CURLcode rc = CURLE_OK;
    int attempt = 1, tries = atomic_load(&c->unreachable) ? 2 : c->attempts; /* unreachable before: fail fast */
    for (;; attempt++) {
        rc = try_once(c, rq, rs, errbuf);
        if (rc == CURLE_OK) atomic_store(&c->unreachable, 0);
        if (rc == CURLE_OK && !retryable_status(rs->status)) return PT_OK; /* even if cancelled meanwhile */
        if (hub_cancelled(c)) return stopped(rq);
        note_failure(c, rq, rs, rc, errbuf);
        if (rc != CURLE_OK && !connection_error(rc)) break;
        if (rc != CURLE_OK) atomic_store(&c->unreachable, 1);
        if (attempt >= tries || hurried(c)) break;
        if (!hub_sleep(c, next_wait(c, rs, rc, backoff))) return stopped(rq);
        backoff = backoff * 2 > c->backoff_max_s ? c->backoff_max_s : backoff * 2;
    }
    if (rc == CURLE_OK) return PT_OK; /* a retryable status every time: the caller's check names it */
    char url[2048];
    hub_shown_url(rq, url, sizeof url);
    if (!connection_error(rc))
        return ERR(PT_ERR_USER, "cannot %s: %s %s failed: %s", shown_text(rq->what).s, rq->method, shown_text(url).s,
                   errbuf);
    return ERR(PT_ERR_USER,
               "cannot %s: %s %s failed %d time%s: %s (is %s reachable from this machine? compute nodes "
               "often have no internet)",
               shown_text(rq->what).s, rq->method, shown_text(url).s, attempt, attempt > 1 ? "s" : "", errbuf,
               shown_text(c->endpoint).s);
}

/* The server's own explanation: X-Error-Message, else {"error": "..."} in the body, else the body. */
static void server_reason(const hub_client *c, const hub_response *rs, char *out, size_t len)
{
    const char *body = sb_text(&rs->body), *e = strstr(body, "\"error\"");
    const char *colon = e ? strchr(e + 7, ':') : NULL, *v = colon ? strchr(colon, '"') : NULL;
    if (rs->error_msg[0]) snprintf(out, len, "%s", rs->error_msg);
    else if (v) snprintf(out, len, "%.*s", (int)strcspn(v + 1, "\""), v + 1);
    else snprintf(out, len, "%.200s", body);
    out[strcspn(out, "\r\n")] = '\0';
    hub_scrub(out, c->token);
}

pt_status hub_http_check(const hub_client *c, const hub_request *rq, const hub_response *rs, const char *repo)
{
    if (rs->status >= 200 && rs->status < 300) return PT_OK;
    char why[600], url[2048];
    server_reason(c, rs, why, sizeof why);
    hub_shown_url(rq, url, sizeof url);
    const char *sep = why[0] ? ": " : "";
    long s = rs->status;
    if (s == 401)
        return ERR(PT_ERR_USER, "cannot %s: the Hub refused the token (HTTP 401%s%s): the token from %s is not valid "
                   "for hub_model_id %s; create a write token at https://huggingface.co/settings/tokens and export "
                   "HF_TOKEN=...", shown_text(rq->what).s, sep, shown_text(why).s, c->token_from, shown_text(repo).s);
    if (s == 403)
        return ERR(PT_ERR_USER, "cannot %s: the token (from %s) may not write to %s (HTTP 403%s%s); use a token with "
                   "write access to that namespace (a fine-grained token needs \"write\" on it), or a hub_model_id "
                   "under your own name", shown_text(rq->what).s, c->token_from, shown_text(repo).s, sep,
                   shown_text(why).s);
    if (s == 404)
        return ERR(PT_ERR_USER,
                   "cannot %s: %s %s answered 404 Not Found%s%s; check hub_model_id (%s) and HF_ENDPOINT "
                   "(%s)",
                   shown_text(rq->what).s, rq->method, shown_text(url).s, sep, shown_text(why).s, shown_text(repo).s,
                   shown_text(c->endpoint).s);
    return ERR(PT_ERR_USER, "cannot %s: %s %s answered HTTP %ld%s%s%s", shown_text(rq->what).s, rq->method,
               shown_text(url).s, s, sep, shown_text(why).s, retryable_status(s) ? " (after every retry)" : "");
}
