/* hub_internal.h — the pieces of the Hub client shared inside src/hub: the connection (endpoint,
 * token, curl handle, retry policy), one HTTP exchange, the files of a commit, the JSON bodies the
 * Hub API takes, and the job directories. Internal to src/hub (and its unit test). */
#ifndef PTRAIN_HUB_INTERNAL_H
#define PTRAIN_HUB_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ptrain/error.h"
#include "ptrain/hub.h"
#include "ptrain/util.h"

/* ---- hub_token.c: where to connect and with which token ---- */

/* HF_ENDPOINT without its trailing slashes, else https://huggingface.co. */
void hub_endpoint(char *out, size_t len);
/* Whether HF_ENDPOINT names another Hub than https://huggingface.co. */
bool hub_endpoint_custom(void);
/* The token huggingface_hub would use: HF_TOKEN, else HUGGING_FACE_HUB_TOKEN (its legacy name), else
 * the file HF_TOKEN_PATH, else $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token, else
 * ~/.cache/huggingface/token (a leading ~ expanded; the value trimmed). *token is malloc'd; where
 * names its source (never its value). No token: PT_ERR_USER saying how to set one. */
pt_status hub_token_find(char **token, char *where, size_t len);
/* The token file huggingface_hub reads (for messages). */
void hub_token_path(char *out, size_t len);
/* Replace every occurrence of token in text by "***" (messages never carry it). */
void hub_scrub(char *text, const char *token);

/* ---- hub_http.c: one request, with timeouts and retries ---- */

typedef struct {
    char endpoint[1024];
    char *token;
    char token_from[4096]; /* HF_TOKEN, HUGGING_FACE_HUB_TOKEN or the token file's path (for the 401 message) */
    char user_agent[160];
    void *curl;             /* CURL *, reused so connections stay open */
    atomic_int *cancel;     /* non-zero: abort the transfer, the hashing and the waits between attempts */
    atomic_int hurry;       /* the run's final wait began: while the Hub is unreachable, give up at once */
    atomic_int unreachable; /* the last try got no HTTP answer (a connection error) */
    int attempts;           /* tries per request on connection errors, 408, 429 and 5xx */
    double backoff_s;       /* first wait, doubled per try up to backoff_max_s */
    double backoff_max_s;
    double retry_after_max_s; /* the most a Retry-After makes it wait */
    long connect_timeout_s;   /* to open a connection */
    long stall_s;             /* a transfer below 1 byte/s for this long is dropped and retried */
    char **repos;             /* repositories created (or found to exist) by this process */
    int n_repos;
    char last_error[600]; /* what the last failed try met (for the report; never the token or a signature) */
} hub_client;

typedef struct {
    const char *method, *url;
    const char *content_type, *accept;
    const void *body; /* a body in memory, or */
    size_t body_len;
    const char *file; /* a body read from a file: file_len bytes from file_off */
    uint64_t file_off, file_len;
    const char *what; /* what the request does, for messages ("create the repository") */
    bool auth; /* send the token: the Hub API; never the storage URLs of LFS uploads */
} hub_request;

typedef struct {
    long status;
    strbuf body;
    char etag[256];
    char error_msg[512];   /* X-Error-Message, when the server sent one */
    double retry_after;    /* Retry-After in seconds, 0 if none */
    char next_url[2048];   /* Link: <...>; rel="next" (paginated listings), "" if none */
    bool too_large;        /* the body went past HUB_MAX_ANSWER: not read on */
} hub_response;

/* The largest answer of the Hub ptrain reads (a listing of a large repository is a few MB). */
#define HUB_MAX_ANSWER ((size_t)64 << 20)

/* Open the client: endpoint, token, user agent, curl handle. */
pt_status hub_client_open(hub_client *c, atomic_int *cancel);
void hub_client_close(hub_client *c);
/* Send rq. Tried again with exponential backoff (Retry-After honoured, bounded) on connection
 * errors (no answer, a reset, a timeout), 408, 429 and 5xx; never on other errors. Returns PT_OK
 * once a response arrived (rs->status may still be an error: see hub_http_check), an error when no
 * response came after every try or the client was cancelled. */
pt_status hub_http(hub_client *c, const hub_request *rq, hub_response *rs);
/* PT_OK for a 2xx status; else one error saying what failed and what to do (401: the token and
 * where it came from, 403: write access, 404: the repository id and HF_ENDPOINT). */
pt_status hub_http_check(const hub_client *c, const hub_request *rq, const hub_response *rs, const char *repo);
void hub_response_free(hub_response *rs);
/* Sleep s seconds unless the client is cancelled (false) or hurried while unreachable (true, early). */
bool hub_sleep(const hub_client *c, double s);
/* url as messages show it: a storage URL (no auth) without its query, which holds a signature. */
void hub_shown_url(const hub_request *rq, char *out, size_t len);
/* Whether the client was cancelled. */
bool hub_cancelled(const hub_client *c);

/* ---- hub_files.c: the files of a commit ---- */

#define HUB_SAMPLE 512

typedef struct {
    char *path;      /* on disk */
    char *repo_path; /* in the repository */
    uint64_t size;
    char sha256[65];
    unsigned char sample[HUB_SAMPLE];
    size_t sample_len;
    bool lfs;            /* the preupload said lfs */
    bool ignore;         /* the preupload said shouldIgnore */
    char remote_oid[65]; /* what the repository holds at repo_path (sha256 if LFS, git blob sha1), "" if none */
    bool unchanged;      /* remote_oid is this file's: nothing to send */
} hub_file;

/* Every regular file under dir, recursively, repo_path relative to dir, sorted; each with its
 * size, first 512 bytes and SHA-256. Stops (PT_ERR_USER) when *cancel is set (cancel may be NULL). */
pt_status hub_files_scan(const char *dir, hub_file **files, int *n, atomic_int *cancel);
void hub_files_free(hub_file *files, int n);
/* Standard base64 of data (malloc'd). */
char *hub_base64(const void *data, size_t n);
/* SHA-256 of a file as 64 hex digits; stops when *cancel is set (may be NULL). */
pt_status hub_sha256_file(const char *path, char hex[65], atomic_int *cancel);
/* The git blob id of a file (sha1 of "blob SIZE\0" and its bytes): a regular file's oid on the Hub. */
pt_status hub_blob_sha1_file(const char *path, uint64_t size, char hex[41]);

/* ---- hub_json.c: the bodies of the Hub API ---- */

/* POST /api/repos/create: {"name", "organization", "visibility", "type": "model"} */
char *hub_json_create(const char *repo_id, bool private_repo);
/* POST /api/models/{repo}/preupload/{rev}: {"files": [{path, sample (base64), size}]} */
char *hub_json_preupload(const hub_file *files, int n);
/* Mark files[i].lfs, .ignore and .remote_oid from the preupload answer; head gets its commitOid
 * ("" if none). Server text quoted in an error is scrubbed of token. */
pt_status hub_json_preupload_parse(const char *text, hub_file *files, int n, char head[65], const char *token);
/* POST /{repo}.git/info/lfs/objects/batch for the files marked lfs and not unchanged */
char *hub_json_lfs_batch(const hub_file *files, int n, const char *revision);
/* The commit as NDJSON: a header line (with parentCommit when parent is not ""), then per file not
 * unchanged or ignored a "file" line (content inline, base64) or an "lfsFile" line (sha256 oid and
 * size), then a "deletedFile" line per path of del (NULL-terminated, may be NULL) not written again. */
pt_status hub_json_commit(const char *summary, const char *parent, const hub_file *files, int n,
                          const char *const *del, strbuf *out);
/* The paths of the files in a tree listing (GET .../tree/...): appended to *paths (NULL-terminated). */
pt_status hub_json_tree_files(const char *text, char ***paths, int *n);

/* ---- hub_api.c: a whole push ---- */

/* Create repo_id once per process (409 or, after 401/402/403, a readable repository: it exists),
 * then commit every file under dir to main as huggingface_hub's upload_folder does: preupload,
 * LFS batch and uploads for large files, and a commit on the head the preupload saw
 * (parentCommit). The repository files matching the patterns of del (fnmatch, as `hf upload
 * --delete`; NULL-terminated, may be NULL) that this push does not send are deleted, as listed
 * from the repository at commit time. A 412 (the branch moved, e.g. a commit whose answer was
 * lost) looks again and commits what is still missing. *url: the commit's URL or NULL. */
pt_status hub_api_push(hub_client *c, const char *repo_id, bool private_repo, const char *message, const char *dir,
                       const char *const *del, char **url);
/* The repository paths of remote matching a pattern of del, not sent by files, not .gitattributes
 * (NULL-terminated, malloc'd). */
char **hub_deletions(const char *const *del, char *const *remote, const hub_file *files, int n);
void hub_paths_free(char **paths);

/* ---- hub_stage.c: job directories ---- */

typedef struct {
    char *dir; /* output_dir/hub/NNNNNN-label */
    char *repo_id, *message, *key, *what;
    bool private_repo;
    char **del; /* patterns of stale repository files this push deletes (NULL-terminated) */
    int seq;
    char *why; /* a failed job: what went wrong */
} hub_job;

/* Read dir/job.json (its repo_id checked as the config checks hub_model_id). */
pt_status hub_job_load(const char *dir, hub_job *j);
void hub_job_free(hub_job *j);
/* The complete jobs under output_dir/hub, in order (incomplete ones: *skipped counts them). */
pt_status hub_jobs_list(const char *output_dir, hub_job **jobs, int *n, int *skipped);
/* Remove what kills left under output_dir/hub: job directories without job.json (a stage that
 * never finished) and half-removed ones. Only where no other process stages (a run's start). */
void hub_jobs_clean(const char *output_dir);
/* The sequence number of a job directory's name (3 or more digits, then '-'), or -1. */
int hub_job_seq(const char *name);
/* The `hf upload` command that does what job j does (HF_ENDPOINT=... first when not the default). */
void hub_job_command(const hub_job *j, strbuf *out);
/* s quoted for a POSIX shell when it needs to be. */
void hub_shell_quote(strbuf *out, const char *s);

/* ---- hub_worker.c / hub_report.c: the upload queue ---- */

typedef struct {
    hub_job *v;
    int n, cap;
} hub_job_list;

void hub_job_list_add(hub_job_list *l, const hub_job *j);
/* Remove each job's directory and free the list. */
void hub_job_list_discard(hub_job_list *l);

struct hub_queue {
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t wake, idle;
    hub_job_list wait; /* waiting jobs, oldest first */
    hub_job_list fail; /* jobs that failed (kept on disk), each with its why */
    hub_job running;
    bool busy, closing, stopped; /* stopped: the worker left its loop */
    atomic_int cancel;
    hub_client client;
    bool online; /* a token was found: the worker runs */
    char *output_dir;
    int n_done, n_dropped;
    int signal; /* the signal that ended the final wait, or 0 */
};

#endif
