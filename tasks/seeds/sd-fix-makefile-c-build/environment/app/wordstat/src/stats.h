#ifndef WORDSTAT_STATS_H
#define WORDSTAT_STATS_H
#include <stddef.h>

double mean_of(const size_t *xs, size_t n);
double stddev_of(const size_t *xs, size_t n); /* population standard deviation */
#endif
