#!/bin/bash
set -euo pipefail
cd /app/seqstat
cat > seqstat.c <<'C'
/* seqstat: statistics of an integer sequence.
 * Input (stdin): a count n, then n integers (each fits in a signed 32-bit int), whitespace
 * separated.
 * Output:
 *   lis <length of the longest strictly increasing subsequence>
 *   inversions <number of pairs i < j with a[i] > a[j]>
 *   distinct <number of distinct values>
 * All three in O(n log n): patience sorting, merge sort counting, sort + scan.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long merge_count(int *a, int *tmp, long n) {
    if (n < 2)
        return 0;
    long m = n / 2;
    long long c = merge_count(a, tmp, m) + merge_count(a + m, tmp, n - m);
    long i = 0, j = m, k = 0;
    while (i < m && j < n) {
        if (a[i] <= a[j]) {
            tmp[k++] = a[i++];
        } else {
            c += m - i;
            tmp[k++] = a[j++];
        }
    }
    while (i < m)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
    return c;
}

int main(void) {
    long n;
    if (scanf("%ld", &n) != 1 || n < 0)
        return 1;
    size_t sz = (n ? n : 1) * sizeof(int);
    int *a = malloc(sz), *tails = malloc(sz), *tmp = malloc(sz);
    for (long i = 0; i < n; i++)
        if (scanf("%d", &a[i]) != 1)
            return 1;

    long lis = 0;
    for (long i = 0; i < n; i++) {
        long lo = 0, hi = lis;  /* first tail >= a[i] */
        while (lo < hi) {
            long mid = (lo + hi) / 2;
            if (tails[mid] < a[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        tails[lo] = a[i];
        if (lo == lis)
            lis++;
    }

    long long inv = merge_count(a, tmp, n); /* leaves a sorted */
    long distinct = 0;
    for (long i = 0; i < n; i++)
        distinct += (i == 0 || a[i] != a[i - 1]);

    printf("lis %ld\ninversions %lld\ndistinct %ld\n", lis, inv, distinct);
    return 0;
}
C
make -s clean && make -s
./seqstat < data/sample.txt
