/* test_watch.c — the pieces of src/watch (issue 28): CRC-32C against published check values; the
 * protobuf writer's bytes; an event file read back record by record (framing, both CRCs, the
 * Event fields, the order of a second file); metrics.jsonl read back (torn last line, null values,
 * resumes, lines that are not records); the picture of a run decoded with cairo's own PNG reader:
 * its size, and the loss line's pixels where the first and last losses put them (computed here
 * from the geometry plot.h states, not from its functions), evaluations, resumes and the best
 * checkpoint in their colors; the heartbeat's writes, thread and staleness, and how it says the same
 * command goes on. (TensorBoard's own reader checks the event files in tests/cli/test_watch.sh.) */
#include <cairo.h>
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ptrain/heartbeat.h"
#include "ptrain/plot.h"
#include "ptrain/runlog.h"
#include "ptrain/tfevents.h"
#include "tmpdir.h"
#include "watch/watch_internal.h"

static char dir[TMPDIR_SIZE];

static int setup(void **state)
{
    (void)state;
    return tmpdir_create(dir, sizeof dir, "ptrain-watch");
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove(dir);
}

static void spill(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ---- CRC-32C and protobuf ---- */

static void test_crc32c(void **state)
{
    (void)state;
    unsigned char zeros[32] = {0}, ones[32];
    memset(ones, 0xFF, sizeof ones);
    assert_int_equal(crc32c("123456789", 9), 0xE3069283u); /* the CRC catalogue's check value */
    assert_int_equal(crc32c(zeros, 32), 0x8A9136AAu);      /* RFC 3720, B.4 */
    assert_int_equal(crc32c(ones, 32), 0x62A8AB43u);
    uint32_t c = crc32c("123456789", 9);
    assert_int_equal(crc32c_masked("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

static void expect_bytes(const pb_buf *b, const unsigned char *want, size_t n)
{
    assert_false(b->failed);
    assert_int_equal(b->len, n);
    assert_memory_equal(b->data, want, n);
}

static void test_protobuf(void **state)
{
    (void)state;
    pb_buf b = {0};
    pb_int64(&b, 2, 300); /* key 0x10, then 300 as 0xac 0x02 */
    expect_bytes(&b, (const unsigned char[]){0x10, 0xac, 0x02}, 3);
    pb_free(&b);
    pb_int64(&b, 1, -1); /* a negative int64: ten bytes */
    expect_bytes(&b, (const unsigned char[]){0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 11);
    pb_free(&b);
    pb_float(&b, 2, 1.5f); /* key 0x15, little-endian IEEE 754 */
    expect_bytes(&b, (const unsigned char[]){0x15, 0x00, 0x00, 0xc0, 0x3f}, 5);
    pb_free(&b);
    pb_double(&b, 1, 2.0);
    expect_bytes(&b, (const unsigned char[]){0x09, 0, 0, 0, 0, 0, 0, 0, 0x40}, 9);
    pb_free(&b);
    pb_bytes(&b, 3, "ab", 2);
    expect_bytes(&b, (const unsigned char[]){0x1a, 0x02, 'a', 'b'}, 4);
    pb_free(&b);
}

/* ---- event files ---- */

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint64_t varint(const unsigned char **p)
{
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
        unsigned char c = *(*p)++;
        v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) return v;
    }
}

/* One decoded Event: its step, file_version, session status, and its first scalar. */
typedef struct {
    int64_t step;
    char version[32], tag[32];
    int session;
    float value;
    int values;
} event;

static void decode_value(const unsigned char *p, const unsigned char *end, event *e)
{
    while (p < end) {
        uint64_t key = varint(&p);
        if (key == 0x0a) { /* tag */
            uint64_t n = varint(&p);
            if (!e->values) snprintf(e->tag, sizeof e->tag, "%.*s", (int)n, (const char *)p);
            p += n;
        } else {
            assert_int_equal(key, 0x15); /* simple_value */
            if (!e->values) memcpy(&e->value, p, 4);
            p += 4;
        }
    }
    e->values++;
}

static void decode_event(const unsigned char *p, const unsigned char *end, event *e)
{
    memset(e, 0, sizeof *e);
    while (p < end) {
        uint64_t key = varint(&p);
        if (key == 0x09) p += 8; /* wall_time */
        else if (key == 0x10) e->step = (int64_t)varint(&p);
        else {
            uint64_t n = varint(&p);
            const unsigned char *in = p, *stop = p + n;
            if (key == 0x1a) snprintf(e->version, sizeof e->version, "%.*s", (int)n, (const char *)p);
            else if (key == 0x3a) { /* session_log { status = 1 } */
                assert_int_equal(varint(&in), 0x08);
                e->session = (int)varint(&in);
            } else {
                assert_int_equal(key, 0x2a); /* summary { repeated value = 1 } */
                while (in < stop) {
                    assert_int_equal(varint(&in), 0x0a);
                    uint64_t m = varint(&in);
                    decode_value(in, in + m, e);
                    in += m;
                }
            }
            p = stop;
        }
    }
}

/* Read a whole event file, checking every record's framing; returns how many were read. */
static int read_events(const char *path, event *ev, int max)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f), off = 0;
    fclose(f);
    int n = 0;
    while (off < len) {
        assert_true(off + 12 <= len && n < max);
        uint64_t size = le(buf + off, 8);
        assert_int_equal(le(buf + off + 8, 4), crc32c_masked(buf + off, 8));
        assert_true(off + 16 + size <= len);
        assert_int_equal(le(buf + off + 12 + size, 4), crc32c_masked(buf + off + 12, size));
        decode_event(buf + off + 12, buf + off + 12 + size, &ev[n++]);
        off += 16 + size;
    }
    return n;
}

static void test_tfevents(void **state)
{
    (void)state;
    char logdir[128];
    snprintf(logdir, sizeof logdir, "%s/runs/x", dir);
    tfevents w, w2;
    assert_int_equal(tfevents_open(&w, logdir), PT_OK);
    assert_int_equal(tfevents_start(&w, 5), PT_OK);
    tfevents_value v[2] = {{"train/loss", 1.5}, {"train/epoch", 0.25}};
    assert_int_equal(tfevents_scalars(&w, 7, v, 2), PT_OK);
    assert_int_equal(tfevents_sync(&w), PT_OK);
    tfevents_close(&w);
    event ev[8];
    assert_int_equal(read_events(w.path, ev, 8), 3);
    assert_string_equal(ev[0].version, "brain.Event:2");
    assert_int_equal(ev[1].step, 5);
    assert_int_equal(ev[1].session, 1); /* START */
    assert_int_equal(ev[2].step, 7);
    assert_int_equal(ev[2].values, 2);
    assert_string_equal(ev[2].tag, "train/loss");
    assert_true(ev[2].value == 1.5f);
    /* a second file in the same second still sorts after the first */
    assert_int_equal(tfevents_open(&w2, logdir), PT_OK);
    tfevents_close(&w2);
    const char *a = strstr(w.path, TFEVENTS_PREFIX), *b = strstr(w2.path, TFEVENTS_PREFIX);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(strcmp(a, b) < 0);
    assert_int_equal(strspn(a + strlen(TFEVENTS_PREFIX), "0123456789"), 10);
}

/* ---- metrics.jsonl ---- */

static void test_runlog(void **state)
{
    (void)state;
    spill("metrics.jsonl",
          "{\"step\": 0, \"startup\": {\"ranks\": 1}}\n"
          "{\"step\": 1, \"epoch\": 0.1, \"loss\": 3.0, \"learning_rate\": 1e-4, \"grad_norm\": null, \"tokens_per_s\": 10}\n"
          "not a record\n"
          "{\"step\": 2, \"epoch\": 0.2, \"loss\": 2.0, \"learning_rate\": 2e-4, \"grad_norm\": 0.5, \"tokens_per_s\": 20, "
          "\"elapsed_s\": 3.0, \"eta_s\": 9.0}\n"
          "{\"step\": 2, \"eval_loss\": 2.5}\n"
          "{\"step\": 2, \"startup\": {\"ranks\": 1}}\n"
          "{\"step\": 3, \"loss\": 1.0"); /* a record being written */
    runlog log;
    bool found;
    assert_int_equal(runlog_read(dir, &log, &found), PT_OK);
    assert_true(found);
    assert_int_equal(log.s[RUNLOG_LOSS].n, 2);
    assert_int_equal(log.s[RUNLOG_GRAD_NORM].n, 1); /* null is left out */
    assert_int_equal(log.s[RUNLOG_EVAL_LOSS].n, 1);
    assert_int_equal(log.n_resumes, 1);
    assert_int_equal(log.resumes[0], 2);
    assert_int_equal(log.last_step, 2);
    assert_true(log.has_train && log.train_step == 2 && log.loss == 2.0 && log.eta_s == 9.0);
    assert_true(log.has_eval && log.eval_step == 2 && log.eval_loss == 2.5);
    runlog_free(&log);
    char empty[96];
    snprintf(empty, sizeof empty, "%s/none", dir);
    assert_int_equal(runlog_read(empty, &log, &found), PT_OK);
    assert_false(found);
}

/* ---- the picture ---- */

static void test_ticks(void **state)
{
    (void)state;
    double t[16];
    int n = plot_ticks(0.9, 3.1, 5, t, 16);
    assert_int_equal(n, 5); /* 1, 1.5, ... 3 */
    assert_true(fabs(t[0] - 1.0) < 1e-12 && fabs(t[4] - 3.0) < 1e-12);
    assert_int_equal(plot_ticks(1, 1, 5, t, 16), 0);
}

/* Pixel (x, y) of an RGB24 surface as 0xRRGGBB. */
static int pixel(cairo_surface_t *s, int x, int y)
{
    const unsigned char *row = cairo_image_surface_get_data(s) + (size_t)y * (size_t)cairo_image_surface_get_stride(s);
    uint32_t v;
    memcpy(&v, row + 4 * x, 4);
    return (int)(v & 0xFFFFFF);
}

static bool near_color(int a, int b)
{
    for (int shift = 0; shift < 24; shift += 8)
        if (abs(((a >> shift) & 0xFF) - ((b >> shift) & 0xFF)) > 24) return false;
    return true;
}

/* Whether a pixel of color sits within 2 pixels of (x, y). */
static bool color_near(cairo_surface_t *s, double x, double y, int color)
{
    for (int dy = -2; dy <= 2; dy++)
        for (int dx = -2; dx <= 2; dx++)
            if (near_color(pixel(s, (int)floor(x) + dx, (int)floor(y) + dy), color)) return true;
    return false;
}

/* Whether column x of the panel's data rectangle holds a pixel of color. */
static bool column_has(cairo_surface_t *s, double x, double top, double h, int color)
{
    for (int y = (int)top + 1; y < (int)(top + h) - 1; y++)
        if (near_color(pixel(s, (int)floor(x), y), color)) return true;
    return false;
}

/* Ten steps, the loss falling evenly from 3 to 1, evaluations at 4 and 8, a resume at step 5. */
static void write_run(void)
{
    FILE *f;
    char path[128];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    assert_non_null(f = fopen(path, "w"));
    for (int s = 1; s <= 10; s++) {
        fprintf(f, "{\"step\": %d, \"loss\": %.6f, \"learning_rate\": %g, \"grad_norm\": 1.0, \"tokens_per_s\": %d}\n", s,
                3.0 - 2.0 * (s - 1) / 9.0, 1e-4 * s, 100 * s);
        if (s == 4 || s == 8) fprintf(f, "{\"step\": %d, \"eval_loss\": %.1f}\n", s, s == 4 ? 2.5 : 1.5);
        if (s == 5) fprintf(f, "{\"step\": 5, \"startup\": {\"ranks\": 1}}\n");
    }
    fclose(f);
}

static void test_plot(void **state)
{
    (void)state;
    write_run();
    runlog log;
    bool found;
    assert_int_equal(runlog_read(dir, &log, &found), PT_OK);
    char png[128];
    snprintf(png, sizeof png, "%s/training.png", dir);
    plot_marks m = {.title = "test", .has_best = true, .best_step = 8, .metric = "eval_loss", .best_value = 1.5};
    assert_int_equal(plot_write(&log, &m, png), PT_OK);
    cairo_surface_t *s = cairo_image_surface_create_from_png(png);
    assert_int_equal(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    assert_int_equal(cairo_image_surface_get_width(s), PLOT_WIDTH);
    assert_int_equal(cairo_image_surface_get_height(s), PLOT_HEIGHT);
    cairo_surface_flush(s);
    /* the loss panel's rectangle and axes as plot.h states them */
    double left = PLOT_LEFT, top = PLOT_TITLE_H + PLOT_TOP, w = PLOT_WIDTH / 2.0 - PLOT_LEFT - PLOT_RIGHT,
           h = (PLOT_HEIGHT - PLOT_TITLE_H) / 2.0 - PLOT_TOP - PLOT_BOTTOM;
    double x0 = -10 * PLOT_PAD, x1 = 10 * (1 + PLOT_PAD), y0 = 1 - 2 * PLOT_PAD, y1 = 3 + 2 * PLOT_PAD;
#define PX(step) (left + ((step) - x0) / (x1 - x0) * w)
#define PY(v) (top + h - ((v) - y0) / (y1 - y0) * h)
    plot_axes a;
    plot_axes_of(&log, PLOT_LOSS, &a);
    assert_true(fabs(plot_px(&a, 1) - PX(1)) < 1e-9 && fabs(plot_py(&a, 3.0) - PY(3.0)) < 1e-9);
    assert_true(color_near(s, PX(1), PY(3.0), PLOT_COLOR_LOSS));   /* the first loss */
    assert_true(color_near(s, PX(10), PY(1.0), PLOT_COLOR_LOSS));  /* the last */
    assert_true(color_near(s, PX(5.5), PY(2.0), PLOT_COLOR_LOSS)); /* halfway along the line */
    assert_false(color_near(s, PX(1), PY(1.0), PLOT_COLOR_LOSS));  /* not where the last loss would be at step 1 */
    assert_false(color_near(s, PX(10), PY(3.0), PLOT_COLOR_LOSS));
    assert_true(color_near(s, PX(4), PY(2.5), PLOT_COLOR_EVAL));   /* the evaluations' dots */
    assert_true(color_near(s, PX(8), PY(1.5), PLOT_COLOR_EVAL));
    assert_true(column_has(s, PX(5), top, h, PLOT_COLOR_RESUME)); /* the resume */
    assert_true(column_has(s, PX(8), top, h, PLOT_COLOR_BEST));   /* the best checkpoint */
    assert_false(column_has(s, PX(3), top, h, PLOT_COLOR_BEST));
    cairo_surface_destroy(s);
    runlog_free(&log);
}

/* ---- the heartbeat ---- */

static void test_heartbeat(void **state)
{
    (void)state;
    setenv("PTRAIN_TEST_HEARTBEAT_S", "1", 1);
    heartbeat *hb;
    heartbeat_info info = {.state = HB_STARTING}, got;
    snprintf(info.run_name, sizeof info.run_name, "r1");
    bool found;
    assert_int_equal(heartbeat_start(dir, &info, &hb), PT_OK);
    assert_int_equal(heartbeat_read(dir, &got, &found), PT_OK);
    assert_true(found && got.state == HB_STARTING && got.pid == (long)getpid() && got.interval_s == 1);
    assert_string_equal(got.run_name, "r1");
    double first = got.updated;
    heartbeat_set(hb, HB_RUNNING, 3, 10);
    /* the thread writes again within its interval (a loaded machine gets a minute) */
    for (int i = 0; i < 600 && (got.updated == first || got.step != 3); i++) {
        struct timespec pause = {0, 100000000L};
        nanosleep(&pause, NULL);
        assert_int_equal(heartbeat_read(dir, &got, &found), PT_OK);
    }
    assert_true(got.state == HB_RUNNING && got.step == 3 && got.total == 10 && got.updated > first);
    assert_false(heartbeat_stale(&got, got.updated + HEARTBEAT_STALE_S - 1));
    assert_true(heartbeat_stale(&got, got.updated + HEARTBEAT_STALE_S + 1));
    heartbeat_stop(hb, HB_STOPPED, 75);
    assert_int_equal(heartbeat_read(dir, &got, &found), PT_OK);
    assert_true(got.state == HB_STOPPED && got.exit_status == 75);
    assert_false(heartbeat_stale(&got, got.updated + 1e6)); /* an ended run is never stale */
    spill(HEARTBEAT_NAME, "{\"state\": \"dancing\"}\n");
    assert_int_equal(heartbeat_read(dir, &got, &found), PT_ERR_USER);
    unsetenv("PTRAIN_TEST_HEARTBEAT_S");
}

/* How the same command goes on (issue 44): the config's resume_from_checkpoint and
 * overwrite_output_dir travel in the heartbeat, and "run the same command again to continue" is
 * said only of a config that resumes. */
static void test_heartbeat_continue(void **state)
{
    (void)state;
    heartbeat *hb;
    heartbeat_info info = {.state = HB_STARTING, .overwrite = true}, got;
    snprintf(info.resume, sizeof info.resume, "false");
    bool found;
    assert_int_equal(heartbeat_start(dir, &info, &hb), PT_OK);
    heartbeat_stop(hb, HB_STOPPED, 75);
    assert_int_equal(heartbeat_read(dir, &got, &found), PT_OK);
    assert_true(found && got.overwrite);
    assert_string_equal(got.resume, "false");
    char text[2048];
    heartbeat_continue_text("true", false, "c.yaml", text, sizeof text);
    assert_string_equal(text, "run the same command again to continue");
    heartbeat_continue_text("false", false, "c.yaml", text, sizeof text);
    assert_string_equal(text, "to continue, set resume_from_checkpoint: true in c.yaml, then run the same command "
                        "again (as it is, the config does not resume: the command would refuse to start over on top "
                        "of these checkpoints)");
    heartbeat_continue_text("false", true, "c.yaml", text, sizeof text);
    assert_string_equal(text, "to continue, set resume_from_checkpoint: true in c.yaml in place of "
                        "overwrite_output_dir: true (with which the same command removes these checkpoints and starts "
                        "over), then run the command again");
    heartbeat_continue_text("out/checkpoint-4", false, "c.yaml", text, sizeof text);
    assert_string_equal(text, "to continue from the newest checkpoint, set resume_from_checkpoint: true in c.yaml, "
                        "then run the same command again (as it is, the config names out/checkpoint-4: the command "
                        "would go back to that one)");
    spill(HEARTBEAT_NAME, "{\"state\": \"stopped\", \"config\": \"c.yaml\"}\n"); /* an older ptrain's */
    assert_int_equal(heartbeat_read(dir, &got, &found), PT_OK);
    assert_true(!got.overwrite && !got.resume[0]);
    heartbeat_continue_text(got.resume, got.overwrite, got.config, text, sizeof text);
    assert_string_equal(text, "run the same command again to continue when c.yaml says resume_from_checkpoint: true "
                        "(set it first otherwise)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_protobuf),
        cmocka_unit_test_setup_teardown(test_tfevents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_runlog, setup, teardown),
        cmocka_unit_test(test_ticks),
        cmocka_unit_test_setup_teardown(test_plot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heartbeat, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heartbeat_continue, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
