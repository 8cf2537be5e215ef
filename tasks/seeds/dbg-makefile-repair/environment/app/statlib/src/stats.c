#include <math.h>

#include "stats.h"

double stats_mean(const double *xs, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += xs[i];
    return n ? s / n : 0.0;
}

double stats_stddev(const double *xs, size_t n) {
    if (n < 2)
        return 0.0;
    double m = stats_mean(xs, n), ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (xs[i] - m) * (xs[i] - m);
    return sqrt(ss / (n - 1));
}
