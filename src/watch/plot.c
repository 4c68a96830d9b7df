/* plot.c — drawing the picture of a run with cairo (plot.h says what goes where): a title band,
 * then per panel its grid and tick labels, the resume and best-checkpoint lines, the series, and a
 * legend above the data. The PNG goes through filewrite.h, so training.png is whole or absent. */
#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ptrain/filewrite.h"
#include "ptrain/plot.h"

static const char *const panel_title[PLOT_PANELS] = {"loss", "learning rate", "gradient norm",
                                                     "tokens/s (with a target)"};
static const char *const series_name[RUNLOG_SERIES] = {"train", "eval", "learning rate", "gradient norm", "tokens/s"};
static const int series_color[RUNLOG_SERIES] = {PLOT_COLOR_LOSS, PLOT_COLOR_EVAL, PLOT_COLOR_LR, PLOT_COLOR_GRAD,
                                                PLOT_COLOR_TOKENS};

static void set_color(cairo_t *cr, int rgb)
{
    cairo_set_source_rgb(cr, ((rgb >> 16) & 0xFF) / 255.0, ((rgb >> 8) & 0xFF) / 255.0, (rgb & 0xFF) / 255.0);
}

/* text with its left end (align 0), centre (0.5) or right end (1) at x, its baseline at y. */
static void text_at(cairo_t *cr, double x, double y, double align, const char *text)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, text, &e);
    cairo_move_to(cr, x - align * e.x_advance, y);
    cairo_show_text(cr, text);
}

/* A vertical line at step, covering whole pixel columns from floor(px) on (width: whole pixels). */
static void vertical(cairo_t *cr, const plot_axes *a, double step, double width)
{
    double x = floor(plot_px(a, step)) + width / 2;
    cairo_set_line_width(cr, width);
    cairo_move_to(cr, x, a->r.y);
    cairo_line_to(cr, x, a->r.y + a->r.h);
    cairo_stroke(cr);
}

/* Grid lines at the ticks of both axes, their values beside the axes. */
static void draw_grid(cairo_t *cr, const plot_axes *a)
{
    double t[16];
    char label[32];
    cairo_set_line_width(cr, 1);
    cairo_set_font_size(cr, 11);
    int n = plot_ticks(a->y0, a->y1, 5, t, 16);
    for (int i = 0; i < n; i++) {
        double y = plot_py(a, t[i]);
        set_color(cr, 0xe6e6e6), cairo_move_to(cr, a->r.x, y), cairo_line_to(cr, a->r.x + a->r.w, y), cairo_stroke(cr);
        snprintf(label, sizeof label, "%.4g", t[i]);
        set_color(cr, 0x333333), text_at(cr, a->r.x - 6, y + 4, 1, label);
    }
    n = plot_ticks(a->x0, a->x1, 6, t, 16);
    for (int i = 0; i < n; i++) {
        if (t[i] != floor(t[i])) continue; /* steps are whole */
        set_color(cr, 0xe6e6e6), vertical(cr, a, t[i], 1);
        snprintf(label, sizeof label, "%.0f", t[i]);
        set_color(cr, 0x333333), text_at(cr, plot_px(a, t[i]), a->r.y + a->r.h + 16, 0.5, label);
    }
    text_at(cr, a->r.x + a->r.w, a->r.y + a->r.h + 32, 1, "step");
}

/* Dashed grey lines where resumed runs began; a green one at the best checkpoint. */
static void draw_marks(cairo_t *cr, const plot_axes *a, const runlog *log, const plot_marks *m)
{
    static const double dash[] = {5, 4};
    set_color(cr, PLOT_COLOR_RESUME);
    cairo_set_dash(cr, dash, 2, 0);
    for (int i = 0; i < log->n_resumes; i++) vertical(cr, a, (double)log->resumes[i], 2);
    cairo_set_dash(cr, NULL, 0, 0);
    if (m->has_best) set_color(cr, PLOT_COLOR_BEST), vertical(cr, a, (double)m->best_step, 2);
}

/* A series as a line through its points; a point alone, and every evaluation, as a dot. */
static void draw_series(cairo_t *cr, const plot_axes *a, const runlog_series *s, int color, bool dots)
{
    set_color(cr, color);
    cairo_set_line_width(cr, PLOT_LINE_WIDTH);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    for (int i = 0; i < s->n; i++) {
        double x = plot_px(a, (double)s->p[i].step), y = plot_py(a, s->p[i].value);
        if (i == 0) cairo_move_to(cr, x, y);
        else cairo_line_to(cr, x, y);
    }
    cairo_stroke(cr);
    for (int i = 0; i < s->n && (dots || s->n == 1); i++) {
        cairo_arc(cr, plot_px(a, (double)s->p[i].step), plot_py(a, s->p[i].value), 3, 0, 2 * M_PI);
        cairo_fill(cr);
    }
}

/* A legend entry: a short line in the color (dashed for resumes), then the name; returns where the
 * next one starts. */
static double legend_entry(cairo_t *cr, double x, double y, int color, bool dashed, const char *name)
{
    static const double dash[] = {4, 3};
    set_color(cr, color);
    cairo_set_line_width(cr, 2);
    if (dashed) cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, x, y - 4), cairo_line_to(cr, x + 18, y - 4), cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    set_color(cr, 0x333333);
    cairo_text_extents_t e;
    cairo_text_extents(cr, name, &e);
    text_at(cr, x + 22, y, 0, name);
    return x + 22 + e.x_advance + 14;
}

/* The panel's title, and its legend to the right of it, above the data rectangle. */
static void draw_header(cairo_t *cr, const plot_axes *a, int panel, const runlog *log, const plot_marks *m)
{
    double y = a->r.y - 12;
    set_color(cr, 0x000000);
    cairo_set_font_size(cr, 14);
    text_at(cr, a->r.x, y, 0, panel_title[panel]);
    cairo_set_font_size(cr, 11);
    if (panel != PLOT_LOSS) return;
    double x = a->r.x + 60;
    for (int k = RUNLOG_LOSS; k <= RUNLOG_EVAL_LOSS; k++)
        if (log->s[k].n) x = legend_entry(cr, x, y, series_color[k], false, series_name[k]);
    if (log->n_resumes) x = legend_entry(cr, x, y, PLOT_COLOR_RESUME, true, "resumed");
    char best[128];
    snprintf(best, sizeof best, "best checkpoint (step %lld, %s %.4g)", (long long)m->best_step,
             m->metric ? m->metric : "metric", m->best_value);
    if (m->has_best) legend_entry(cr, x, y, PLOT_COLOR_BEST, false, best);
}

static void draw_panel(cairo_t *cr, const runlog *log, const plot_marks *m, int panel)
{
    plot_axes a;
    plot_axes_of(log, panel, &a);
    draw_grid(cr, &a);
    draw_header(cr, &a, panel, log, m);
    cairo_save(cr);
    cairo_rectangle(cr, a.r.x, a.r.y, a.r.w, a.r.h);
    cairo_clip(cr);
    draw_marks(cr, &a, log, m);
    int s[2], n = plot_panel_series(panel, s);
    for (int k = 0; k < n; k++) draw_series(cr, &a, &log->s[s[k]], series_color[s[k]], s[k] == RUNLOG_EVAL_LOSS);
    cairo_restore(cr);
    set_color(cr, 0x999999);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, a.r.x, a.r.y, a.r.w, a.r.h);
    cairo_stroke(cr);
}

static void draw(cairo_t *cr, const runlog *log, const plot_marks *m)
{
    set_color(cr, 0xffffff);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 16);
    set_color(cr, 0x000000);
    char title[600];
    snprintf(title, sizeof title, "%s: step %lld", m->title ? m->title : "ptrain", (long long)log->last_step);
    text_at(cr, PLOT_WIDTH / 2.0, 26, 0.5, title);
    for (int p = 0; p < PLOT_PANELS; p++) draw_panel(cr, log, m, p);
}

/* cairo's PNG writer hands its bytes to a filewriter; the first failure is kept, with its message. */
typedef struct {
    pt_filewriter w;
    pt_status st;
} png_sink;

static cairo_status_t png_out(void *closure, const unsigned char *data, unsigned int n)
{
    png_sink *sink = closure;
    if (sink->st == PT_OK) sink->st = fw_write(&sink->w, data, n);
    return sink->st == PT_OK ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* The surface as a PNG at path, through a temporary file and a rename. */
static pt_status write_png(cairo_surface_t *surface, const char *path)
{
    png_sink sink = {.st = PT_OK};
    TRY(fw_open(&sink.w, path));
    cairo_status_t written = cairo_surface_write_to_png_stream(surface, png_out, &sink);
    pt_status st = sink.st;
    if (st == PT_OK && written != CAIRO_STATUS_SUCCESS)
        st = ERR(PT_ERR_NOMEM, "cannot write %s: %s", shown_text(path).s, cairo_status_to_string(written));
    if (st != PT_OK) {
        fw_abort(&sink.w);
        return st;
    }
    return fw_commit(&sink.w);
}

pt_status plot_write(const runlog *log, const plot_marks *m, const char *path)
{
    cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, PLOT_WIDTH, PLOT_HEIGHT);
    cairo_t *cr = cairo_create(surface);
    draw(cr, log, m);
    cairo_status_t drawn = cairo_status(cr);
    cairo_destroy(cr);
    pt_status st = drawn == CAIRO_STATUS_SUCCESS
                       ? write_png(surface, path)
                       : ERR(PT_ERR_NOMEM, "cannot draw %s: %s", shown_text(path).s, cairo_status_to_string(drawn));
    cairo_surface_destroy(surface);
    return st;
}
