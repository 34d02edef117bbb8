#!/usr/bin/env bash
# Whole-process start-up of the `satchel` binary against `bash -c true`,
# side by side in one run (issue #22): each command is started RUNS times,
# the commands in turn (A B A B ...), so a drift of the machine's speed
# moves both; the median wall time of each and the ratio of medians are
# printed. Target: `satchel tools call bash '{"command":"true"}'` within
# 2.5x of `bash -c true`. The same call with `sandbox: "none"` (which
# `tools call` may ask for: the user typed it) shows Satchel's own share
# apart from the sandbox's (namespaces, Landlock, seccomp). The floor row,
# `timeout 60 bash -c true`, is what starting any supervisor that forks,
# runs the command and waits costs.
#
# Usage: bench/startup.sh [RUNS]      (default 50)
#   SATCHEL_BIN=path/to/satchel to time another build; by default the
#   release binary is built (cargo build --release -p satchel-cli).
#   SATCHEL_BASE_BIN=path/to/older/satchel adds the same rows for that
#   binary (e.g. a build of main), interleaved in the same run.
#
# Every run gets a temporary config, data and cache directory and
# database: nothing is read from or written to the user's own.
set -euo pipefail

runs="${1:-50}"
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${SATCHEL_BIN:-}" ]; then
    cargo build --release --quiet -p satchel-cli --manifest-path "$root/Cargo.toml"
    target="${CARGO_TARGET_DIR:-$root/target}"
    SATCHEL_BIN="$target/release/satchel"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/project"
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache"
export SATCHEL_DB="$work/data/satchel.db" SATCHEL_MODEL_FETCH=never NO_COLOR=1
unset RUST_LOG SATCHEL_LIBEXEC_DIR
cd "$work/project"

# shellcheck source=bench/timing.sh
. "$root/bench/timing.sh"

declare -a names commands
names+=("bash -c true");                            commands+=("bash -c true")
# The floor for any program that runs a command and waits for it: a small
# C supervisor (coreutils `timeout`) forking and running `bash -c true`.
names+=("  floor: timeout 60 bash -c true");         commands+=("timeout 60 bash -c true")
names+=("satchel tools call bash (command: true)"); commands+=("CALL")
names+=("  the same, sandbox: none");                commands+=("CALL_UNSANDBOXED")
names+=("satchel --version");                       commands+=("$SATCHEL_BIN --version")
names+=("satchel tools list");                      commands+=("$SATCHEL_BIN tools list")

if [ -n "${SATCHEL_BASE_BIN:-}" ]; then
    names+=("before: tools call bash (command: true)"); commands+=("CALL $SATCHEL_BASE_BIN")
    names+=("before:   the same, sandbox: none");      commands+=("CALL_UNSANDBOXED $SATCHEL_BASE_BIN")
    names+=("before: --version");                      commands+=("$SATCHEL_BASE_BIN --version")
    names+=("before: tools list");                     commands+=("$SATCHEL_BASE_BIN tools list")
fi

# The binary a command names: after CALL, or SATCHEL_BIN when none is
# named; else the command's first word.
binary_of() {
    case "$1" in
        CALL*\ *) echo "${1#* }" ;;
        CALL*) echo "$SATCHEL_BIN" ;;
        *) echo "${1%% *}" ;;
    esac
}

# Each binary its own database: a newer schema is refused by an older
# Satchel, which would then time a failure.
db_of() {
    if [ "$1" = "${SATCHEL_BASE_BIN:-}" ]; then
        echo "$work/data/before.db"
    else
        echo "$work/data/satchel.db"
    fi
}

run() {
    local bin
    bin="$(binary_of "$1")"
    local -x SATCHEL_DB
    SATCHEL_DB="$(db_of "$bin")"
    case "$1" in
        CALL|CALL\ *) time_once "$bin" tools call bash '{"command":"true"}' ;;
        CALL_UNSANDBOXED*) time_once "$bin" tools call bash \
            '{"command":"true","sandbox":"none","justification":"start-up benchmark"}' ;;
        *) read -r -a argv <<<"$1"; time_once "${argv[@]}" ;;
    esac
}

# One warm-up run of each (page cache, the database's creation), which
# must succeed: the timed runs ignore failures.
for command in "${commands[@]}"; do
    case "$command" in
        CALL*)
            bin="$(binary_of "$command")"
            SATCHEL_DB="$(db_of "$bin")" "$bin" tools call bash \
                '{"command":"true","sandbox":"none","justification":"start-up benchmark"}' >/dev/null 2>&1 ||
                { echo "warm-up failed: $bin tools call bash" >&2; exit 1; } ;;
    esac
    run "$command" >/dev/null
done
for i in "${!commands[@]}"; do : >"$work/times.$i"; done
for _ in $(seq "$runs"); do
    for i in "${!commands[@]}"; do run "${commands[$i]}" >>"$work/times.$i"; done
done

baseline="$(median <"$work/times.0")"
floor="$(median <"$work/times.1")"
echo "$(uname -r), $(nproc) cores; $runs runs each, in turn; median wall time"
printf '%-42s %10s %8s %8s\n' command "median ms" "x bash" "x floor"
for i in "${!commands[@]}"; do
    m="$(median <"$work/times.$i")"
    awk -v n="${names[$i]}" -v m="$m" -v b="$baseline" -v f="$floor" \
        'BEGIN {printf "%-42s %10.2f %8.2f %8.2f\n", n, m / 1000, m / b, m / f}'
done
