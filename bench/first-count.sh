#!/usr/bin/env bash
# What the first token count costs a process (issue #44): the token
# vocabularies are embedded as their tiktoken files and built on their
# first use on a machine, then cached in $XDG_CACHE_HOME/satchel/tokens.
# Three commands, each a whole process, started RUNS times in turn:
#   nothing   `satchel tools list`: the same start-up, counts nothing
#   cl100k    `satchel tools prompt --builtin --json`: counts with one
#             vocabulary (cl100k_base, the default model's)
#   both      `satchel tools prompt --builtin --compare`: counts with both
# each "cold" (an empty cache directory: the process builds and caches the
# vocabularies) and "warm" (the cache filled). Medians, and the ratio to
# "nothing" measured in the same run. With SATCHEL_BEFORE_BIN (a binary
# that embeds the built tables, e.g. main's before issue #44), its warm
# times are shown too. The outputs cold and warm are checked to be the
# same, counts included.
#
# Usage: bench/first-count.sh [RUNS]     (default 10)
#   SATCHEL_BIN: the binary [default: target/release/satchel, built when
#   missing]; SATCHEL_BEFORE_BIN: the optional reference binary.
set -euo pipefail

runs="${1:-10}"
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
bin="${SATCHEL_BIN:-$target/release/satchel}"
before="${SATCHEL_BEFORE_BIN:-}"
[ -x "$bin" ] || cargo build --release --quiet -p satchel-cli --manifest-path "$root/Cargo.toml"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/project"
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache"
export SATCHEL_DB="$work/data/satchel.db" SATCHEL_MODEL_FETCH=never NO_COLOR=1
unset RUST_LOG SATCHEL_LIBEXEC_DIR
cd "$work/project"

declare -A args=(
    [nothing]="tools list"
    [cl100k]="tools prompt --builtin --json"
    [both]="tools prompt --builtin --compare"
)

# shellcheck source=bench/timing.sh
. "$root/bench/timing.sh"
ms() { tr ' ' '\n' | grep -v '^$' | median | awk '{printf "%.1f", $1 / 1000}'; }

# The cold and warm outputs must be the same.
rm -rf "$XDG_CACHE_HOME"
# shellcheck disable=SC2086
"$bin" ${args[both]} > "$work/cold.txt"
cached=$(find "$XDG_CACHE_HOME/satchel/tokens" -name '*.bpe' 2>/dev/null | wc -l)
# shellcheck disable=SC2086
"$bin" ${args[both]} > "$work/warm.txt"
cmp -s "$work/cold.txt" "$work/warm.txt" || { echo "cold and warm outputs differ" >&2; diff "$work/cold.txt" "$work/warm.txt" >&2; exit 1; }
[ "$cached" -eq 2 ] || { echo "expected 2 cached vocabularies, found $cached" >&2; exit 1; }
cache_bytes=$(du -cb "$XDG_CACHE_HOME"/satchel/tokens/*.bpe | tail -1 | cut -f1)

declare -A samples
for _ in $(seq "$runs"); do
    for command in nothing cl100k both; do
        # shellcheck disable=SC2086
        {
            rm -rf "$XDG_CACHE_HOME"
            samples[cold-$command]+="$(time_once "$bin" ${args[$command]}) "
            samples[warm-$command]+="$(time_once "$bin" ${args[$command]}) "
            if [ -n "$before" ]; then
                samples[before-$command]+="$(time_once "$before" ${args[$command]}) "
            fi
        }
    done
done

base=$(echo "${samples[warm-nothing]}" | ms)
ratio() { awk -v a="$1" -v b="$base" 'BEGIN {printf "%.1fx", a / b}'; }
echo "First token count, $(uname -m), $(date -u +%Y-%m-%d), $runs runs each (medians, interleaved)"
echo "binary: $bin; cache written: 2 files, $(awk -v b="$cache_bytes" 'BEGIN {printf "%.1f MB", b / 1000000}')"
echo
echo "| command | cold (empty cache) | warm (cache filled) | cold/nothing | warm/nothing |"
echo "| --- | ---: | ---: | ---: | ---: |"
for command in nothing cl100k both; do
    cold=$(echo "${samples[cold-$command]}" | ms)
    warm=$(echo "${samples[warm-$command]}" | ms)
    echo "| ${args[$command]} ($command) | $cold ms | $warm ms | $(ratio "$cold") | $(ratio "$warm") |"
done
if [ -n "$before" ]; then
    echo
    echo "Reference: $before (the built tables embedded, nothing cached)"
    echo
    echo "| command | time | /nothing (this run's) |"
    echo "| --- | ---: | ---: |"
    for command in nothing cl100k both; do
        time=$(echo "${samples[before-$command]}" | ms)
        echo "| ${args[$command]} ($command) | $time ms | $(ratio "$time") |"
    done
fi
