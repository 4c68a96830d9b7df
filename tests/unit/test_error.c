/* test_error.c — the message a failure carries (src/core/error.c) and the values it echoes
 * (src/core/shown.c): a short value is shown whole on one line, a long one keeps its start, its end and
 * its length, never split inside a UTF-8 character, whatever its size (10 MB too); a message past
 * ERR_MESSAGE_MAX, by err_set or by err_context, ends after a whole line (or between characters)
 * with "…", never cut mid-line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ptrain/error.h"

/* Whether s is valid UTF-8 (a cut inside a character is not). */
static bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2 : (*p & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0) return false;
        p++;
        for (; n > 0; n--, p++)
            if ((*p & 0xc0) != 0x80) return false;
    }
    return true;
}

static void test_shown_short(void **state)
{
    (void)state;
    assert_string_equal(shown_text("models/x.gguf").s, "models/x.gguf");
    assert_string_equal(shown_text("").s, "");
    assert_string_equal(shown_text(NULL).s, "");
    assert_string_equal(shown_text("a\nb\tc\rd\x01\x7f").s, "a\\nb\\tc\\rd\\x01\\x7f");
    assert_string_equal(shown_bytes("a\0b", 3).s, "a\\x00b");
    assert_string_equal(shown_text("größe/模型.gguf").s, "größe/模型.gguf");
    /* SHOWN_MAX bytes are shown whole */
    char exact[SHOWN_MAX + 1];
    memset(exact, 'x', SHOWN_MAX);
    exact[SHOWN_MAX] = '\0';
    assert_string_equal(shown_text(exact).s, exact);
}

static void test_shown_long(void **state)
{
    (void)state;
    /* a 10 MB path: its start and end, its length, nothing more */
    size_t n = 10u << 20;
    char *path = malloc(n + 1);
    assert_non_null(path);
    memset(path, 'd', n);
    memcpy(path, "/very/long/path/", 16);
    memcpy(path + n - 11, "/model.gguf", 11);
    path[n] = '\0';
    char got[sizeof(pt_shown)];
    snprintf(got, sizeof got, "%s", shown_text(path).s); /* a copy lives on below */
    free(path);
    assert_true(strlen(got) <= SHOWN_MAX + 16);
    assert_memory_equal(got, "/very/long/path/", 16);
    assert_non_null(strstr(got, "…(10485760 bytes)…"));
    assert_string_equal(got + strlen(got) - 11, "/model.gguf");

    /* one byte over: shortened too */
    char over[SHOWN_MAX + 2];
    memset(over, 'x', SHOWN_MAX + 1);
    over[SHOWN_MAX + 1] = '\0';
    assert_non_null(strstr(shown_text(over).s, "…(161 bytes)…"));

    /* escapes count, and are never split: 100 control bytes */
    char ctl[101];
    memset(ctl, 1, 100);
    ctl[100] = '\0';
    snprintf(got, sizeof got, "%s", shown_text(ctl).s);
    assert_non_null(strstr(got, "…(100 bytes)…"));
    assert_int_equal(strncmp(got, "\\x01\\x01", 8), 0);
    assert_true(got[strlen(got) - 4] == '\\');
    /* multi-byte characters are never split, at either cut */
    char wide[3 * 100 + 2];
    wide[0] = 'a';
    for (int i = 0; i < 100; i++) memcpy(wide + 1 + 3 * i, "模", 3);
    wide[301] = '\0';
    snprintf(got, sizeof got, "%s", shown_text(wide).s);
    assert_true(valid_utf8(got));
    assert_non_null(strstr(got, "…(301 bytes)…"));
}

/* A message of lines of 100 bytes, past ERR_MESSAGE_MAX: it ends with the last line that fits,
 * then "…". */
static void test_message_cut_at_line(void **state)
{
    (void)state;
    int lines = ERR_MESSAGE_MAX / 100 + 10;
    char *text = malloc((size_t)lines * 100 + 1);
    assert_non_null(text);
    for (int i = 0; i < lines; i++) snprintf(text + i * 100, 101, "%-99d\n", i);
    text[lines * 100 - 1] = '\0';
    err_set(PT_ERR_USER, __FILE__, __LINE__, "%s", text);
    const char *msg = err_message();
    size_t len = strlen(msg);
    assert_true(len < ERR_MESSAGE_MAX);
    assert_string_equal(msg + len - 4, "\n…");
    assert_int_equal((len - 4 + 1) % 100, 0); /* whole lines, then the mark */
    assert_memory_equal(msg, text, len - 3);

    /* a message that fits until err_context puts a long prefix in front: still whole lines */
    text[163 * 100 - 1] = '\0';
    err_set(PT_ERR_USER, __FILE__, __LINE__, "%s", text);
    assert_string_equal(err_message(), text);
    char prefix[101];
    memset(prefix, 'p', 100);
    prefix[100] = '\0';
    err_context("%s", prefix);
    msg = err_message();
    len = strlen(msg);
    assert_true(len < ERR_MESSAGE_MAX);
    assert_memory_equal(msg, prefix, 100);
    assert_string_equal(msg + len - 4, "\n…");
    assert_int_equal((len - 4 + 1 - 102) % 100, 0);
    free(text);
    err_clear();
}

/* One line past ERR_MESSAGE_MAX is cut between characters, and says so. */
static void test_message_cut_in_line(void **state)
{
    (void)state;
    size_t n = ERR_MESSAGE_MAX * 2;
    char *text = malloc(n + 1);
    assert_non_null(text);
    for (size_t i = 0; i + 3 <= n; i += 3) memcpy(text + i, "模", 3);
    text[n - n % 3] = '\0';
    err_set(PT_ERR_USER, __FILE__, __LINE__, "%s", text);
    const char *msg = err_message();
    assert_true(strlen(msg) < ERR_MESSAGE_MAX);
    assert_true(valid_utf8(msg));
    assert_string_equal(msg + strlen(msg) - 3, "…");
    free(text);
    /* a message that fits is kept as it is */
    err_set(PT_ERR_USER, __FILE__, __LINE__, "a\nb");
    err_context("c");
    assert_string_equal(err_message(), "c: a\nb");
    err_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shown_short),
        cmocka_unit_test(test_shown_long),
        cmocka_unit_test(test_message_cut_at_line),
        cmocka_unit_test(test_message_cut_in_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
