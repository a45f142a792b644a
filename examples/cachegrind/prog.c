/* A single-threaded program to set vmsim's user-mode L1 misses beside
 * cachegrind's (docs/workloads.md, "Beside cachegrind"): array sweeps
 * that miss, blocked loops that reuse the L1, and random loads. */
#include <stdint.h>
#include <stdlib.h>

#define N (1 << 16) /* 64 Ki words: 512 KiB an array */

volatile uint64_t sink; /* keeps the sums, and the exit status 0 */

int main(void)
{
    uint64_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    uint64_t s = 0, x = 1;
    if (!a || !b)
        return 1;
    for (long i = 0; i < N; i++) {
        a[i] = i;
        b[i] = 0;
    }
    for (int rep = 0; rep < 2; rep++) /* one word a line: every load misses */
        for (long i = 0; i < N; i += 8)
            s += a[i];
    for (long blk = 0; blk < N; blk += 1024) /* 8 KiB blocks of each array */
        for (int rep = 0; rep < 2; rep++)
            for (long i = blk; i < blk + 1024; i++)
                b[i] += a[i];
    for (int k = 0; k < 100000; k++) { /* random loads over both arrays */
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        s += a[(x >> 33) % N] + b[(x >> 17) % N];
    }
    sink = s;
    return 0;
}
