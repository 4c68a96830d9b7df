/* plot_axes.c — where things go in the picture of a run (plot.h states the rules): the panels'
 * rectangles, the steps and values at their edges, the mapping to pixels and the tick values. */
#include <math.h>

#include "ptrain/plot.h"

plot_rect plot_panel_rect(int panel)
{
    double cell_w = PLOT_WIDTH / 2.0, cell_h = (PLOT_HEIGHT - PLOT_TITLE_H) / 2.0;
    plot_rect r = {(panel % 2) * cell_w + PLOT_LEFT, PLOT_TITLE_H + (panel / 2) * cell_h + PLOT_TOP,
                   cell_w - PLOT_LEFT - PLOT_RIGHT, cell_h - PLOT_TOP - PLOT_BOTTOM};
    return r;
}

int plot_panel_series(int panel, int out[2])
{
    switch (panel) {
    case PLOT_LOSS: out[0] = RUNLOG_LOSS, out[1] = RUNLOG_EVAL_LOSS; return 2;
    case PLOT_LR: out[0] = RUNLOG_LR; return 1;
    case PLOT_GRAD_NORM: out[0] = RUNLOG_GRAD_NORM; return 1;
    default: out[0] = RUNLOG_TOKENS; return 1;
    }
}

/* The values' range widened by PLOT_PAD on each side (a flat series by PLOT_PAD of its value). */
static void value_range(const runlog *log, int panel, double *y0, double *y1)
{
    int s[2], n = plot_panel_series(panel, s);
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < log->s[s[k]].n; i++) {
            double v = log->s[s[k]].p[i].value;
            lo = fmin(lo, v), hi = fmax(hi, v);
        }
    if (lo > hi) lo = 0, hi = 1; /* nothing logged yet */
    double pad = hi > lo ? (hi - lo) * PLOT_PAD : hi != 0 ? fabs(hi) * PLOT_PAD : 1.0;
    *y0 = lo - pad, *y1 = hi + pad;
}

void plot_axes_of(const runlog *log, int panel, plot_axes *a)
{
    a->r = plot_panel_rect(panel);
    double last = log->last_step > 0 ? (double)log->last_step : 1;
    a->x0 = -last * PLOT_PAD, a->x1 = last * (1 + PLOT_PAD);
    value_range(log, panel, &a->y0, &a->y1);
}

double plot_px(const plot_axes *a, double step) { return a->r.x + (step - a->x0) / (a->x1 - a->x0) * a->r.w; }

double plot_py(const plot_axes *a, double value)
{
    return a->r.y + a->r.h - (value - a->y0) / (a->y1 - a->y0) * a->r.h;
}

int plot_ticks(double lo, double hi, int n, double *ticks, int max)
{
    if (!(hi > lo) || n < 1) return 0;
    double raw = (hi - lo) / n, mag = pow(10, floor(log10(raw))), step = mag;
    if (raw / mag > 5) step = 10 * mag;
    else if (raw / mag > 2) step = 5 * mag;
    else if (raw / mag > 1) step = 2 * mag;
    double first = ceil(lo / step);
    int k = 0;
    for (double t = first * step; t <= hi + step * 1e-9 && k < max; t = (first + k) * step)
        ticks[k++] = fabs(t) < step * 1e-9 ? 0 : t;
    return k;
}
