#include <math.h>
#include "stats.h"

double mean_of(const size_t *xs, size_t n)
{
    double sum = 0.0;
    if (n == 0)
        return 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)xs[i];
    return sum / (double)n;
}

double stddev_of(const size_t *xs, size_t n)
{
    double m = mean_of(xs, n), acc = 0.0;
    if (n == 0)
        return 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)xs[i] - m;
        acc += d * d;
    }
    return sqrt(acc / (double)n);
}
