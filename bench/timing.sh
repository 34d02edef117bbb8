# Timing helpers the shell benches share (sourced, not run).

# Microseconds one command takes, as a whole process (its output dropped,
# its failure ignored: a bench times, the tests check).
time_once() {
    local start end
    start=${EPOCHREALTIME/./}
    "$@" >/dev/null 2>&1 || true
    end=${EPOCHREALTIME/./}
    echo $((end - start))
}

# The median of numbers on stdin, one a line.
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
