/* tap.h — a few lines of TAP output for test programs that are not cmocka suites (MPI tests). */
#ifndef PTRAIN_TAP_H
#define PTRAIN_TAP_H

#include <stdio.h>

static int tap_count, tap_failed;

#define TAP_PLAN(n) printf("1..%d\n", (n))
#define TAP_OK(cond, ...)                                                                          \
    do {                                                                                           \
        int ok_ = (cond);                                                                          \
        tap_failed += !ok_;                                                                        \
        printf("%sok %d - ", ok_ ? "" : "not ", ++tap_count);                                      \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        if (!ok_) printf("# failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);                    \
    } while (0)
#define TAP_SKIP(reason, ...)                                                                      \
    do {                                                                                           \
        printf("ok %d - ", ++tap_count);                                                           \
        printf(__VA_ARGS__);                                                                       \
        printf(" # SKIP %s\n", reason);                                                            \
    } while (0)

#endif
