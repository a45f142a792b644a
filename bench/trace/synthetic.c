/* A synthetic lackey trace of about N bytes, for measuring what a large
   trace costs the host (docs/workloads.md, "Host cost"): a loop sweeping a
   512 MiB buffer at 0x10000000, a load and a store per 64-byte line, with a
   read-modify-write of a stack slot and instructions between, as a
   copy-and-sum loop's trace under valgrind would read.
     gcc -O2 -o synthetic bench/trace/synthetic.c
     ./synthetic 1000000000 > /tmp/big.lackey
     /usr/bin/time -v target/release/examples/runcfg big.toml   # kind = "trace", trace = "/tmp/big.lackey"
*/
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: synthetic BYTES > FILE\n");
        return 2;
    }
    unsigned long long want = strtoull(argv[1], 0, 10), done = 0;
    const unsigned long buf = 0x10000000UL, stack = 0x1ffefff000UL, pc = 0x108000UL;
    const unsigned long len = 512UL << 20;
    printf("==1== Lackey, synthetic\n");
    for (unsigned long i = 0; done < want; i++) {
        unsigned long a = buf + (i * 64) % len;
        int n = 0;
        n += printf("I  %08lx,4\n", pc);
        n += printf("I  %08lx,3\n", pc + 4);
        n += printf(" L %08lx,8\n", a);
        n += printf("I  %08lx,4\n", pc + 7);
        n += printf(" M %08lx,8\n", stack - 8 * (i % 16));
        n += printf("I  %08lx,4\n", pc + 11);
        n += printf(" S %08lx,8\n", a + 8);
        done += (unsigned long long)n;
    }
    return 0;
}
