#ifndef STATS_H
#define STATS_H

#include <stddef.h>

#define STATS_PRECISION 4

double stats_mean(const double *xs, size_t n);
double stats_stddev(const double *xs, size_t n);

#endif
