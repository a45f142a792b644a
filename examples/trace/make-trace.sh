#!/bin/sh
# Compiles prog.c and traces it with valgrind's lackey, scheduler lines
# included (one simulated thread per program thread): writes prog.lackey
# (about 45 MB) beside this script, or in the folder given.
#   examples/trace/make-trace.sh [OUT_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
gcc -O1 -pthread -o "$out/prog" "$here/prog.c"
valgrind --tool=lackey --trace-mem=yes --trace-sched=yes \
    --log-file="$out/prog.lackey" "$out/prog"
echo "wrote $out/prog.lackey ($(wc -l < "$out/prog.lackey") lines)"
