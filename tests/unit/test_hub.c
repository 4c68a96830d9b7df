/* test_hub.c — the pure parts of the Hub client (src/hub), no network (tests/hub/test_hub.sh
 * drives the whole client against a local server):
 * - the commit's NDJSON: a header line (parentCommit when known), inline base64 for regular files,
 *   lfsFile lines with the sha256 oid and size, nothing for unchanged files, deletedFile lines
 *   except for paths the commit writes again;
 * - the create-repo body (organization split off, visibility only), the preupload answer (modes,
 *   remote oids, the head; server text in an error scrubbed of the token), the tree listing and
 *   the deletions it leads to (fnmatch patterns, never .gitattributes or a path sent again);
 * - the git blob id of a regular file; storage URLs shown without their signature;
 * - the token lookup in huggingface_hub's order (HF_TOKEN, HUGGING_FACE_HUB_TOKEN, HF_TOKEN_PATH,
 *   $HF_HOME/token, ~ expanded), cleaned as it cleans it, and an error without one that names the
 *   file but no token; hub_scrub;
 * - HF_ENDPOINT without trailing slashes;
 * - job directories: numbers past 999, job.json removed first, half-made ones cleaned, a bad
 *   repo_id refused;
 * - the model card: base_model and datasets in the front matter only for Hub ids, local paths
 *   shown by their last component; the `hf upload` command, quoted for a shell, with HF_ENDPOINT
 *   when it is not the default. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "hub/hub_internal.h"
#include "ptrain/config.h"
#include "ptrain/config_options.h"
#include "ptrain/filewrite.h"
#include "ptrain/safefs.h"
#include "tmpdir.h"

static char dir[TMPDIR_SIZE];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_commit_ndjson(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/a.txt", dir);
    write_file(path, "hello");
    hub_file files[3] = {{.path = path, .repo_path = "a.txt", .size = 5},
                         {.path = "/nonexistent", .repo_path = "w.bin", .size = 3, .lfs = true},
                         {.path = "/nonexistent", .repo_path = "same.bin", .size = 3, .lfs = true, .unchanged = true}};
    snprintf(files[1].sha256, sizeof files[1].sha256, "%064d", 7);
    const char *del[] = {"old/x.h5", "a.txt", NULL};
    strbuf out = {0};
    assert_int_equal(hub_json_commit("step 3", "abc123", files, 3, del, &out), PT_OK);
    char want[1024];
    snprintf(want, sizeof want,
             "{\"key\":\"header\",\"value\":{\"summary\":\"step 3\",\"description\":\"\",\"parentCommit\":\"abc123\"}}\n"
             "{\"key\":\"file\",\"value\":{\"content\":\"aGVsbG8=\",\"path\":\"a.txt\",\"encoding\":\"base64\"}}\n"
             "{\"key\":\"lfsFile\",\"value\":{\"path\":\"w.bin\",\"algo\":\"sha256\",\"oid\":\"%064d\",\"size\":3}}\n"
             "{\"key\":\"deletedFile\",\"value\":{\"path\":\"old/x.h5\"}}\n", 7);
    assert_string_equal(sb_text(&out), want);
    sb_free(&out);
    assert_int_equal(hub_json_commit("s", "", files, 0, NULL, &out), PT_OK);
    assert_string_equal(sb_text(&out), "{\"key\":\"header\",\"value\":{\"summary\":\"s\",\"description\":\"\"}}\n");
    sb_free(&out);
    char blob[41];
    assert_int_equal(hub_blob_sha1_file(path, 5, blob), PT_OK);
    assert_string_equal(blob, "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0"); /* git hash-object of "hello" */
}

static void test_bodies(void **state)
{
    (void)state;
    char *c = hub_json_create("me/lora", true);
    assert_string_equal(c, "{\"name\":\"lora\",\"organization\":\"me\",\"visibility\":\"private\",\"type\":\"model\"}");
    free(c);
    c = hub_json_create("me/lora", false);
    assert_non_null(strstr(c, "\"visibility\":\"public\""));
    assert_null(strstr(c, "\"private\""));
    free(c);
    hub_file f[2] = {{.repo_path = "README.md", .size = 10}, {.repo_path = "m.safetensors", .size = 10}};
    char head[65];
    assert_int_equal(hub_json_preupload_parse("{\"files\":[{\"path\":\"README.md\",\"uploadMode\":\"regular\","
                                              "\"oid\":\"b6fc\",\"shouldIgnore\":false},"
                                              "{\"path\":\"m.safetensors\",\"uploadMode\":\"lfs\",\"oid\":null,"
                                              "\"shouldIgnore\":true}],\"commitOid\":\"c0ffee\"}", f, 2, head, "tok"),
                     PT_OK);
    assert_false(f[0].lfs);
    assert_true(f[1].lfs);
    assert_string_equal(f[0].remote_oid, "b6fc");
    assert_string_equal(f[1].remote_oid, "");
    assert_false(f[0].ignore);
    assert_true(f[1].ignore);
    assert_string_equal(head, "c0ffee");
    assert_int_not_equal(hub_json_preupload_parse("[\"hf_secret_token\"]", f, 2, head, "hf_secret_token"), PT_OK);
    assert_null(strstr(err_message(), "hf_secret_token"));
    err_clear();
}

static void test_tree_and_deletions(void **state)
{
    (void)state;
    char **remote = NULL;
    int n = 0;
    assert_int_equal(hub_json_tree_files("[{\"type\":\"directory\",\"path\":\"last-checkpoint\"},"
                                         "{\"type\":\"file\",\"path\":\"last-checkpoint/checkpoint-3.h5\"},"
                                         "{\"type\":\"file\",\"path\":\"last-checkpoint/checkpoint-6.h5\"},"
                                         "{\"type\":\"file\",\"path\":\"last-checkpoint/sub/x\"}]", &remote, &n),
                     PT_OK);
    assert_int_equal(hub_json_tree_files("[{\"type\":\"file\",\"path\":\".gitattributes\"}]", &remote, &n), PT_OK);
    assert_int_equal(n, 4);
    assert_null(remote[4]);
    assert_int_not_equal(hub_json_tree_files("{\"error\":\"x\"}", &remote, &n), PT_OK);
    err_clear();
    hub_file sent[1] = {{.repo_path = "last-checkpoint/checkpoint-6.h5"}};
    const char *del[] = {"last-checkpoint/*", ".git*", NULL};
    char **gone = hub_deletions(del, remote, sent, 1);
    assert_string_equal(gone[0], "last-checkpoint/checkpoint-3.h5");
    assert_string_equal(gone[1], "last-checkpoint/sub/x"); /* '*' crosses '/', as huggingface_hub's fnmatch */
    assert_null(gone[2]);
    hub_paths_free(gone);
    hub_paths_free(remote);
    hub_request rq = {.url = "https://s3.example/bucket/oid?X-Amz-Signature=abc&x=1"};
    char shown[256];
    hub_shown_url(&rq, shown, sizeof shown);
    assert_string_equal(shown, "https://s3.example/bucket/oid");
    rq.auth = true;
    rq.url = "https://hub.example/api/models/me/x/tree/main?recursive=true";
    hub_shown_url(&rq, shown, sizeof shown);
    assert_string_equal(shown, rq.url);
}

static void test_token(void **state)
{
    (void)state;
    char *tok, where[4096], path[512];
    setenv("HF_TOKEN", " hf_env\r\n", 1);
    setenv("HUGGING_FACE_HUB_TOKEN", "hf_legacy", 1);
    assert_int_equal(hub_token_find(&tok, where, sizeof where), PT_OK);
    assert_string_equal(tok, "hf_env");
    assert_string_equal(where, "HF_TOKEN");
    free(tok);
    setenv("HF_TOKEN", "", 1); /* empty: the legacy name, as huggingface_hub's `or` */
    assert_int_equal(hub_token_find(&tok, where, sizeof where), PT_OK);
    assert_string_equal(tok, "hf_legacy");
    assert_string_equal(where, "HUGGING_FACE_HUB_TOKEN");
    free(tok);
    unsetenv("HF_TOKEN");
    unsetenv("HUGGING_FACE_HUB_TOKEN");
    snprintf(path, sizeof path, "%s/tokfile", dir);
    write_file(path, "  hf_file \n");
    setenv("HF_TOKEN_PATH", path, 1);
    assert_int_equal(hub_token_find(&tok, where, sizeof where), PT_OK);
    assert_string_equal(tok, "hf_file");
    assert_string_equal(where, path);
    free(tok);
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", dir, 1);
    setenv("HF_TOKEN_PATH", "~/tokfile", 1); /* ~ expanded, as os.path.expanduser */
    assert_int_equal(hub_token_find(&tok, where, sizeof where), PT_OK);
    assert_string_equal(tok, "hf_file");
    assert_string_equal(where, path);
    free(tok);
    unsetenv("HF_TOKEN_PATH");
    setenv("HF_HOME", "~", 1);
    snprintf(path, sizeof path, "%s/token", dir);
    write_file(path, "hf_home\n");
    assert_int_equal(hub_token_find(&tok, where, sizeof where), PT_OK);
    assert_string_equal(tok, "hf_home");
    free(tok);
    setenv("HF_HOME", dir, 1);
    if (home) setenv("HOME", home, 1);
    free(home);
    unlink(path);
    assert_int_equal(hub_token_find(&tok, where, sizeof where), PT_ERR_USER);
    assert_non_null(strstr(err_message(), path));
    assert_non_null(strstr(err_message(), "export HF_TOKEN"));
    char text[] = "bad token hf_secret1 in hf_secret1!";
    hub_scrub(text, "hf_secret1");
    assert_string_equal(text, "bad token *** in ***!");
}

static void test_endpoint(void **state)
{
    (void)state;
    char ep[256];
    unsetenv("HF_ENDPOINT");
    hub_endpoint(ep, sizeof ep);
    assert_string_equal(ep, "https://huggingface.co");
    setenv("HF_ENDPOINT", "http://127.0.0.1:8080//", 1);
    hub_endpoint(ep, sizeof ep);
    assert_string_equal(ep, "http://127.0.0.1:8080");
    unsetenv("HF_ENDPOINT");
}

static void card(const char *model, const char *data, strbuf *out)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "model_name: %s\ndataset:\n  - name: %s\nlora_r: 8\ntags: [pirate, ptrain, v1.2+]\n", model,
             data);
    pt_config cfg;
    assert_int_equal(config_parse("c.yaml", yaml, strlen(yaml), &cfg, NULL), PT_OK);
    hub_card_info c = {.settings = hub_card_settings_from_config(&cfg), .repo_id = "me/lora", .what = "adapter", .step = 6, .total_steps = 6,
                       .world = 1, .final_loss = 1.25, .best_metric = 0.0 / 0.0};
    hub_card_text(&c, out);
    config_free(&cfg);
}

static void test_card(void **state)
{
    (void)state;
    strbuf a = {0}, b = {0};
    card("unsloth/Llama-3.2-1B", "yahma/alpaca-cleaned", &a);
    assert_true(!strncmp(sb_text(&a), "---\nbase_model: unsloth/Llama-3.2-1B\nlibrary_name: peft\n", 54));
    assert_non_null(strstr(sb_text(&a), "datasets:\n- yahma/alpaca-cleaned\n"));
    /* the config's tags after ptrain's own, each once (issue 46) */
    assert_non_null(strstr(sb_text(&a), "tags:\n- ptrain\n- lora\n- qlora\n- base_model:adapter:unsloth/Llama-3.2-1B\n"
                                        "- pirate\n- v1.2+\n"));
    assert_null(strstr(strstr(sb_text(&a), "- ptrain\n") + 1, "- ptrain\n"));
    assert_non_null(strstr(sb_text(&a), "- final training loss: 1.2500\n"));
    assert_non_null(strstr(sb_text(&a), "| lora_r | 8 |"));
    assert_non_null(strstr(sb_text(&a), "PeftModel.from_pretrained(base, \"me/lora\")"));
    assert_null(strstr(sb_text(&a), "- best "));
    card("/home/me/models/base.Q4_1.gguf", "/home/me/data/train.jsonl", &b);
    assert_null(strstr(sb_text(&b), "base_model:"));
    assert_null(strstr(sb_text(&b), "datasets:"));
    assert_null(strstr(sb_text(&b), "/home/me"));
    assert_non_null(strstr(sb_text(&b), "`base.Q4_1.gguf`"));
    sb_free(&a);
    sb_free(&b);
}

static void test_command(void **state)
{
    (void)state;
    char *del[] = {"last-checkpoint/*", NULL};
    hub_job j = {.dir = "out dir/hub/002-x", .repo_id = "me/lora", .message = "it's done", .private_repo = true,
                 .del = del};
    strbuf s = {0};
    unsetenv("HF_ENDPOINT");
    hub_job_command(&j, &s);
    assert_string_equal(sb_text(&s), "hf upload me/lora 'out dir/hub/002-x/files' . --private --commit-message "
                                     "'it'\\''s done' --delete 'last-checkpoint/*'");
    sb_free(&s);
    setenv("HF_ENDPOINT", "http://127.0.0.1:9/", 1);
    hub_job_command(&j, &s);
    assert_true(!strncmp(sb_text(&s), "HF_ENDPOINT=http://127.0.0.1:9 hf upload me/lora ", 48));
    sb_free(&s);
    unsetenv("HF_ENDPOINT");
}

static void stage_job(const char *out, const char *label, const char *repo)
{
    hub_stage s;
    assert_int_equal(hub_stage_begin(out, label, &s), PT_OK);
    assert_int_equal(hub_stage_write(&s, "a.txt", "x", 1), PT_OK);
    hub_job_meta m = {.repo_id = repo, .message = "m", .key = label, .what = label, .private_repo = true};
    assert_int_equal(hub_stage_commit(&s, &m), PT_OK);
    hub_stage_free(&s);
}

static bool exists(const char *out, const char *name)
{
    char path[1024];
    struct stat sb;
    snprintf(path, sizeof path, "%s/hub/%s", out, name);
    return stat(path, &sb) == 0;
}

static void test_jobs(void **state)
{
    (void)state;
    char out[512], path[1024];
    snprintf(out, sizeof out, "%s/run", dir);
    assert_int_equal(hub_job_seq("000999-adapter"), 999);
    assert_int_equal(hub_job_seq("1000-adapter"), 1000);
    assert_int_equal(hub_job_seq("12-adapter"), -1);
    assert_int_equal(hub_job_seq(".gone-001-x"), -1);
    snprintf(path, sizeof path, "%s/hub/999-old/files", out); /* an earlier version's 3-digit job */
    assert_int_equal(safefs_mkdirs(path), PT_OK);
    stage_job(out, "a", "me/lora");
    assert_true(exists(out, "001000-a/job.json"));
    stage_job(out, "b", "me/lora");
    snprintf(path, sizeof path, "%s/hub/999-old/job.json", out);
    write_file(path, "{\"repo_id\":\"me/lora\",\"message\":\"m\",\"key\":\"k\",\"what\":\"w\",\"delete\":[]}");
    hub_job *jobs;
    int n, skipped;
    assert_int_equal(hub_jobs_list(out, &jobs, &n, &skipped), PT_OK);
    assert_int_equal(n, 3);
    assert_int_equal(jobs[0].seq, 999);
    assert_int_equal(jobs[2].seq, 1001);
    for (int i = 0; i < n; i++) hub_job_free(&jobs[i]);
    free(jobs);
    /* removal: job.json first, then the directory; what a kill leaves is cleaned */
    snprintf(path, sizeof path, "%s/hub/001001-b", out);
    hub_stage_remove(path);
    assert_false(exists(out, "001001-b"));
    snprintf(path, sizeof path, "%s/hub/.gone-001000-a/files", out);
    assert_int_equal(safefs_mkdirs(path), PT_OK);
    snprintf(path, sizeof path, "%s/hub/001000-a/job.json", out);
    unlink(path);
    hub_jobs_clean(out);
    assert_false(exists(out, ".gone-001000-a"));
    assert_false(exists(out, "001000-a"));
    assert_true(exists(out, "999-old/job.json"));
    /* a job.json with a repo_id the Hub would refuse is not loaded */
    snprintf(path, sizeof path, "%s/hub/999-old/job.json", out);
    write_file(path, "{\"repo_id\":\"me/bad--name\",\"message\":\"m\",\"key\":\"k\",\"what\":\"w\",\"delete\":[]}");
    hub_job j;
    snprintf(path, sizeof path, "%s/hub/999-old", out);
    assert_int_equal(hub_job_load(path, &j), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "not a Hub repository id"));
    err_clear();
}

static void test_repo_ids(void **state)
{
    (void)state;
    const char *good[] = {"me/lora", "Org-1/model_v2.5", "a/b", "_x/y_", NULL};
    const char *bad[] = {"lora", "a/b/c", "me/-lora", "me/lora.", ".me/lora", "me/lo--ra", "me/lo..ra",
                         "me/lora.git", "me/lo ra", "me/", "/lora", "me/caf\xc3\xa9", NULL};
    for (int i = 0; good[i]; i++)
        if (config_repo_id_problem(good[i])) fail_msg("%s refused: %s", good[i], config_repo_id_problem(good[i]));
    for (int i = 0; bad[i]; i++)
        if (!config_repo_id_problem(bad[i])) fail_msg("%s accepted", bad[i]);
    char long_name[128];
    memset(long_name, 'a', sizeof long_name);
    memcpy(long_name, "me/", 3);
    long_name[3 + 96] = '\0';
    assert_null(config_repo_id_problem(long_name));
    long_name[3 + 96] = 'a';
    long_name[3 + 97] = '\0';
    assert_non_null(config_repo_id_problem(long_name));
}

int main(void)
{
    if (tmpdir_create(dir, sizeof dir, "ptrain-test-hub")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commit_ndjson), cmocka_unit_test(test_bodies), cmocka_unit_test(test_tree_and_deletions),
        cmocka_unit_test(test_token),         cmocka_unit_test(test_endpoint), cmocka_unit_test(test_card),
        cmocka_unit_test(test_command),       cmocka_unit_test(test_jobs),     cmocka_unit_test(test_repo_ids),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (tmpdir_remove(dir) != 0) rc = rc ? rc : 1;
    return rc;
}
