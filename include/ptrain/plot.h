/* plot.h — the picture of a run (`ptrain plot`, output_dir/training.png): train and eval loss,
 * learning rate, gradient norm and tokens/s against the step, in four panels of one PNG drawn with
 * cairo; the steps where a resumed run began are dashed grey lines, the best checkpoint a green one.
 *
 * The geometry is fixed and stated here, so a test (or a script) can say where a value lands:
 * panel i (PLOT_LOSS, PLOT_LR, PLOT_GRAD_NORM, PLOT_TOKENS) sits in column i % 2 and row i / 2 of
 * a 2 x 2 grid below a title band of PLOT_TITLE_H; a cell is PLOT_WIDTH / 2 wide and
 * (PLOT_HEIGHT - PLOT_TITLE_H) / 2 high, and its data rectangle (plot_panel_rect) leaves PLOT_LEFT,
 * PLOT_RIGHT, PLOT_TOP and PLOT_BOTTOM inside it. The x axis of every panel runs from step 0 to
 * the last step logged (at least 1), a panel's y axis from the smallest to the largest value of
 * its series, each widened on both sides by PLOT_PAD of its span (a flat series: by PLOT_PAD of
 * its value, or by 1 at 0), so no point sits on the frame. A value v at step s is drawn at
 * plot_px(a, s), plot_py(a, v): pixel column floor(px), row floor(py). Lines are PLOT_LINE_WIDTH
 * wide, in the colors below (0xRRGGBB); the resume and best-checkpoint lines at step s fill pixel
 * columns floor(px) and floor(px) + 1 of the data rectangle. */
#ifndef PTRAIN_PLOT_H
#define PTRAIN_PLOT_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/error.h"
#include "ptrain/runlog.h"

#define PLOT_WIDTH 1200
#define PLOT_HEIGHT 860
#define PLOT_TITLE_H 40   /* the band with the title, above the grid */
#define PLOT_LEFT 80      /* in each cell: room for the y tick labels */
#define PLOT_RIGHT 24
#define PLOT_TOP 36       /* the panel's title and legend */
#define PLOT_BOTTOM 40    /* the x tick labels */
#define PLOT_PAD 0.05
#define PLOT_LINE_WIDTH 2.0

#define PLOT_COLOR_LOSS 0x1f77b4
#define PLOT_COLOR_EVAL 0xff7f0e
#define PLOT_COLOR_LR 0x2ca02c
#define PLOT_COLOR_GRAD 0xd62728
#define PLOT_COLOR_TOKENS 0x9467bd
#define PLOT_COLOR_RESUME 0x888888
#define PLOT_COLOR_BEST 0x006400

enum { PLOT_LOSS, PLOT_LR, PLOT_GRAD_NORM, PLOT_TOKENS, PLOT_PANELS };

typedef struct {
    double x, y, w, h; /* pixels: left, top, width, height */
} plot_rect;

/* A panel's mapping from (step, value) to pixels. */
typedef struct {
    plot_rect r;
    double x0, x1; /* steps at the left and right edges */
    double y0, y1; /* values at the bottom and top edges */
} plot_axes;

plot_rect plot_panel_rect(int panel);
/* The series (RUNLOG_*) panel draws into out: the loss panel two (train, eval), the others one. */
int plot_panel_series(int panel, int out[2]);
/* The axes of panel for log (as stated above). */
void plot_axes_of(const runlog *log, int panel, plot_axes *a);
double plot_px(const plot_axes *a, double step);
double plot_py(const plot_axes *a, double value);
/* Tick values for the range [lo, hi]: 1, 2 or 5 times a power of ten apart, about n of them;
 * returns how many were written to ticks (at most max). */
int plot_ticks(double lo, double hi, int n, double *ticks, int max);

/* What the picture marks besides the series. */
typedef struct {
    const char *title; /* the top line (the output directory, the run's name) */
    bool has_best;
    int64_t best_step;  /* the best checkpoint's step */
    const char *metric; /* its metric's name, and value */
    double best_value;
} plot_marks;

/* Draw log into a PNG at path, written as filewrite.h writes (complete or not at all). */
pt_status plot_write(const runlog *log, const plot_marks *m, const char *path);

#endif
