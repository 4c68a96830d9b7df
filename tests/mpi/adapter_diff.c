/* adapter_diff.c — compare two adapter files (final_model_dir/adapter.h5) tensor by tensor, for
 * the data-parallel equivalence test. For every float dataset of A it reads the same-named one of
 * B and prints the largest relative difference over all tensors, where a tensor's relative
 * difference is max|a - b| / max|b| (the max-norm error, which stays meaningful for B matrices
 * that start at zero), then the largest elementwise absolute difference:
 *   max_rel 0 tensor base_model...lora_B.weight max_abs 0
 * Exit status: 0 compared, 1 the files do not have the same tensors, 2 usage or read error. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    hid_t other;
    double max_rel, max_abs;
    char worst[256];
    int tensors, problems;
} diff_state;

/* all values of dataset `name` in file f as doubles; NULL when it is missing or unreadable */
static double *read_all(hid_t f, const char *name, hssize_t *n)
{
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) return NULL;
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0) return NULL;
    hid_t sp = H5Dget_space(ds);
    *n = H5Sget_simple_extent_npoints(sp);
    double *v = *n > 0 ? malloc(sizeof *v * (size_t)*n) : NULL;
    if (v && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) {
        free(v);
        v = NULL;
    }
    H5Sclose(sp);
    H5Dclose(ds);
    return v;
}

static herr_t compare_one(hid_t f, const char *name, const H5L_info_t *info, void *arg)
{
    (void)info;
    diff_state *s = arg;
    hssize_t na = 0, nb = 0;
    double *a = read_all(f, name, &na), *b = read_all(s->other, name, &nb);
    if (!a || !b || na != nb) {
        fprintf(stderr, "adapter_diff: %s: %s\n", name, !b ? "missing or unreadable in B" : "differs in size");
        s->problems++;
    } else {
        double diff = 0, scale = 0;
        for (hssize_t i = 0; i < na; i++) {
            diff = fmax(diff, fabs(a[i] - b[i]));
            scale = fmax(scale, fabs(b[i]));
        }
        double rel = scale > 0 ? diff / scale : diff;
        if (rel >= s->max_rel) {
            s->max_rel = rel;
            snprintf(s->worst, sizeof s->worst, "%s", name);
        }
        s->max_abs = fmax(s->max_abs, diff);
        s->tensors++;
    }
    free(a);
    free(b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: adapter_diff A.h5 B.h5\n");
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fa = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fa < 0 || fb < 0) {
        fprintf(stderr, "adapter_diff: cannot open %s\n", fa < 0 ? argv[1] : argv[2]);
        return 2;
    }
    diff_state s = {.other = fb};
    H5Literate(fa, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, compare_one, &s);
    H5Fclose(fa);
    H5Fclose(fb);
    if (s.tensors == 0 || s.problems) {
        fprintf(stderr, "adapter_diff: %d tensors compared, %d problems\n", s.tensors, s.problems);
        return 1;
    }
    printf("max_rel %.3g tensor %s max_abs %.3g tensors %d\n", s.max_rel, s.worst, s.max_abs, s.tensors);
    return 0;
}
