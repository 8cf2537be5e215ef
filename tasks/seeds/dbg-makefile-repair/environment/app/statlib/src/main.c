#include <stdio.h>
#include <stdlib.h>

#include "stats.h"

int main(void) {
    size_t n = 0, cap = 16;
    double *xs = malloc(cap * sizeof *xs), x;
    while (scanf("%lf", &x) == 1) {
        if (n == cap)
            xs = realloc(xs, (cap *= 2) * sizeof *xs);
        xs[n++] = x;
    }
    printf("n=%zu mean=%.*f sd=%.*f\n", n, STATS_PRECISION, stats_mean(xs, n),
           STATS_PRECISION, stats_stddev(xs, n));
    free(xs);
    return 0;
}
