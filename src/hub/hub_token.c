/* hub_token.c — where the Hub is (HF_ENDPOINT) and the token to talk to it with, looked up as
 * huggingface_hub 2.x looks it up (HF_TOKEN, HUGGING_FACE_HUB_TOKEN, then the token file `hf auth
 * login` writes, a leading ~ expanded), so a machine already logged in for the Python tools needs
 * nothing more. The token's value is never part of a message; hub_scrub removes it from any text
 * that might echo it (a server's error body). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub_internal.h"

#define DEFAULT_ENDPOINT "https://huggingface.co"

void hub_endpoint(char *out, size_t len)
{
    const char *e = getenv("HF_ENDPOINT");
    snprintf(out, len, "%s", e && *e ? e : DEFAULT_ENDPOINT);
    for (size_t n = strlen(out); n > 0 && out[n - 1] == '/'; n--) out[n - 1] = '\0';
}

bool hub_endpoint_custom(void)
{
    char ep[1024];
    hub_endpoint(ep, sizeof ep);
    return strcmp(ep, DEFAULT_ENDPOINT) != 0;
}

/* path with a leading ~ (alone or before '/') as $HOME, as Python's os.path.expanduser. */
static void expand_home(const char *path, char *out, size_t len)
{
    const char *home = getenv("HOME");
    if (path[0] == '~' && (path[1] == '/' || !path[1]) && home && *home) snprintf(out, len, "%s%s", home, path + 1);
    else snprintf(out, len, "%s", path);
}

void hub_token_path(char *out, size_t len)
{
    const char *p = getenv("HF_TOKEN_PATH"), *home = getenv("HF_HOME"), *xdg = getenv("XDG_CACHE_HOME");
    char raw[4096];
    if (p && *p) snprintf(raw, sizeof raw, "%s", p);
    else if (home && *home) snprintf(raw, sizeof raw, "%s/token", home);
    else if (xdg && *xdg) snprintf(raw, sizeof raw, "%s/huggingface/token", xdg);
    else snprintf(raw, sizeof raw, "~/.cache/huggingface/token");
    expand_home(raw, out, len);
}

/* A copy of s without \r and \n and surrounding blanks, as huggingface_hub cleans it; NULL if empty. */
static char *clean_token(const char *s)
{
    char *t = malloc(strlen(s) + 1);
    if (!t) return NULL;
    size_t n = 0;
    for (const char *p = s; *p; p++)
        if (*p != '\r' && *p != '\n') t[n++] = *p;
    t[n] = '\0';
    while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t')) t[--n] = '\0';
    size_t lead = strspn(t, " \t");
    memmove(t, t + lead, n - lead + 1);
    if (!*t) {
        free(t);
        return NULL;
    }
    return t;
}

static char *read_token_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *t = clean_token(buf);
    memset(buf, 0, sizeof buf);
    return t;
}

pt_status hub_token_find(char **token, char *where, size_t len)
{
    const char *names[] = {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}; /* the second: huggingface_hub's legacy name */
    for (int i = 0; i < 2; i++) {
        const char *env = getenv(names[i]);
        if (!env || !*env) continue; /* an empty HF_TOKEN falls through, as in huggingface_hub */
        *token = clean_token(env);
        snprintf(where, len, "%s", names[i]);
        if (*token) return PT_OK;
        break; /* set to blanks only: no token from the environment, as huggingface_hub */
    }
    char path[4096];
    hub_token_path(path, sizeof path);
    *token = read_token_file(path);
    if (*token) {
        snprintf(where, len, "%s", path);
        return PT_OK;
    }
    return ERR(PT_ERR_USER,
               "no Hugging Face token: HF_TOKEN is not set and %s does not exist; create a write token "
               "at https://huggingface.co/settings/tokens and export HF_TOKEN=... (or run `hf auth login`)",
               shown_text(path).s);
}

void hub_scrub(char *text, const char *token)
{
    size_t tl = token ? strlen(token) : 0;
    if (tl < 4) return; /* nothing worth hiding; avoids mangling text on a degenerate token */
    for (char *p = strstr(text, token); p; p = strstr(p, token)) {
        memcpy(p, "***", 3);
        memmove(p + 3, p + tl, strlen(p + tl) + 1);
        p += 3;
    }
}
