/* logits_cmp.c — compare two float32 logits files (ptrain generate --logits): prints the largest
 * absolute difference over the largest absolute value of the reference and exits 0 when it is at
 * most TOL (and, with a MIN, at least MIN: proof that two runs really differ).
 * Usage: logits_cmp REF OTHER TOL [MIN] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float *slurp(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f) / (long)sizeof(float);
    fseek(f, 0, SEEK_SET);
    float *v = malloc(sizeof(float) * (size_t)(*n > 0 ? *n : 1));
    if (v && fread(v, sizeof(float), (size_t)*n, f) != (size_t)*n) {
        free(v);
        v = NULL;
    }
    fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s REF OTHER TOL [MIN]\n", argv[0]);
        return 2;
    }
    long n1 = 0, n2 = 0;
    float *a = slurp(argv[1], &n1), *b = slurp(argv[2], &n2);
    if (!a || !b || n1 != n2 || n1 == 0) {
        fprintf(stderr, "cannot compare %s (%ld values) with %s (%ld values)\n", argv[1], n1, argv[2], n2);
        return 1;
    }
    double diff = 0, scale = 0;
    for (long i = 0; i < n1; i++) {
        diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
        scale = fmax(scale, fabs((double)a[i]));
    }
    double rel = diff / (scale > 0 ? scale : 1), tol = atof(argv[3]), min = argc > 4 ? atof(argv[4]) : 0;
    printf("relative difference %.3e (at most %.1e%s%s)\n", rel, tol, argc > 4 ? ", at least " : "",
           argc > 4 ? argv[4] : "");
    free(a);
    free(b);
    return rel <= tol && rel >= min && !isnan(rel) ? 0 : 1;
}
