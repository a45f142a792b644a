/* The program examples/trace traces: two threads each fill and then sum a
   buffer of their own (8 MiB: past glibc's mmap threshold, so a mapping of
   its own, four 2 MiB blocks THP can back), then the main thread sums
   them. One store per 64-byte line, then one load per line. */
#include <pthread.h>
#include <stdlib.h>

#define SIZE (8u << 20)

static void *fill(void *arg) {
    volatile long *b = arg;
    for (size_t i = 0; i < SIZE / sizeof(long); i += 8) b[i] = (long)i;
    long s = 0;
    for (size_t i = 0; i < SIZE / sizeof(long); i += 8) s += b[i];
    return (void *)s;
}

int main(void) {
    pthread_t t[2];
    long *buf[2];
    for (int i = 0; i < 2; i++) {
        buf[i] = malloc(SIZE);
        pthread_create(&t[i], 0, fill, buf[i]);
    }
    long s = 0;
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(t[i], &r);
        s += (long)r + buf[i][0];
    }
    return (int)(s & 1);
}
