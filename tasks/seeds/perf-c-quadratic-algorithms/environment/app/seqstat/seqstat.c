/* seqstat: statistics of an integer sequence.
 * Input (stdin): a count n, then n integers (each fits in a signed 32-bit int), whitespace
 * separated.
 * Output:
 *   lis <length of the longest strictly increasing subsequence>
 *   inversions <number of pairs i < j with a[i] > a[j]>
 *   distinct <number of distinct values>
 */
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    long n;
    if (scanf("%ld", &n) != 1 || n < 0)
        return 1;
    int *a = malloc((n ? n : 1) * sizeof *a);
    for (long i = 0; i < n; i++)
        if (scanf("%d", &a[i]) != 1)
            return 1;

    /* longest strictly increasing subsequence: O(n^2) dynamic programming */
    int *best = malloc((n ? n : 1) * sizeof *best);
    long lis = 0;
    for (long i = 0; i < n; i++) {
        best[i] = 1;
        for (long j = 0; j < i; j++)
            if (a[j] < a[i] && best[j] + 1 > best[i])
                best[i] = best[j] + 1;
        if (best[i] > lis)
            lis = best[i];
    }

    /* inversions: O(n^2) pair scan */
    long long inv = 0;
    for (long i = 0; i < n; i++)
        for (long j = i + 1; j < n; j++)
            if (a[i] > a[j])
                inv++;

    /* distinct values: O(n^2) "seen before?" scan */
    long distinct = 0;
    for (long i = 0; i < n; i++) {
        int seen = 0;
        for (long j = 0; j < i && !seen; j++)
            if (a[j] == a[i])
                seen = 1;
        distinct += !seen;
    }

    printf("lis %ld\ninversions %lld\ndistinct %ld\n", lis, inv, distinct);
    return 0;
}
