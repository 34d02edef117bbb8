#!/usr/bin/env bash
# Satchel's `grep` tool against ripgrep (`rg`, Debian's `ripgrep`) on the
# same tree with the same patterns, side by side in one run (issue #40):
# each search is run RUNS times, the two in turn (rg, satchel, rg, ...),
# so a drift of the machine's speed moves both; the median wall time of
# each and the ratio of medians are printed. Target: within 1.2x of rg.
#
# Both are whole processes: `rg -l PATTERN TREE` / `rg -n PATTERN TREE`
# against `satchel tools call grep '{"pattern":..., "path": TREE, ...}'`
# (which also starts, opens its database and records the call). The tree
# is the cargo registry's sources (~/.cargo/registry/src) unless TREE is
# given; it is not a git repository, so like rg the tool honours
# .ignore files there but not .gitignore ones.
#
# Usage: bench/grep.sh [RUNS] [TREE]     (default 10, the cargo registry)
#   SATCHEL_BIN=path/to/satchel to time another build; by default the
#   release binary is built (cargo build --release -p satchel-cli).
#
# Every run gets a temporary config, data and cache directory and
# database: nothing is read from or written to the user's own.
set -euo pipefail

runs="${1:-10}"
tree="${2:-$(echo "$HOME"/.cargo/registry/src)}"
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v rg >/dev/null || { echo "rg not found: apt-get install ripgrep" >&2; exit 1; }
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

# name | rg arguments | the tool's input (path added)
cases=(
    "files with a rare literal|-l|{\"pattern\":\"fn spawn_blocking\"}"
    "files with a regex|-l|{\"pattern\":\"struct [A-Z][a-z]+Builder\"}"
    "lines of a common word, numbered|-n|{\"pattern\":\"unsafe\",\"output_mode\":\"content\",\"head_limit\":100000}"
    "case-insensitive count|-ic|{\"pattern\":\"deprecated\",\"-i\":true,\"output_mode\":\"count\",\"head_limit\":100000}"
)

files="$(rg --files "$tree" | wc -l)"
echo "$(uname -r), $(nproc) cores; tree $tree ($files files rg searches); $runs runs each, in turn; median wall time"
printf '%-36s %10s %12s %8s\n' search "rg ms" "satchel ms" "ratio"
for case in "${cases[@]}"; do
    IFS='|' read -r name flags input <<<"$case"
    pattern="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["pattern"])' "$input")"
    tool_input="$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["path"]=sys.argv[2]; print(json.dumps(d))' "$input" "$tree")"
    # Same answers first: the files (or lines) each reports.
    a="$(rg "$flags" -- "$pattern" "$tree" | wc -l)"
    b="$("$SATCHEL_BIN" tools call grep "$tool_input" 2>"$work/note" | grep -vc '^… ' || true)"
    # An answer over exec.resultLimitBytes reaches the model cut, the
    # whole kept in a spill file: count that.
    spill="$(sed -n 's/.*The full result is in \([^;]*\);.*/\1/p' "$work/note" | head -1)"
    if [ -n "$spill" ]; then b="$(grep -vc '^… ' "$spill" || true)"; fi
    : >"$work/rg" ; : >"$work/satchel"
    time_once rg "$flags" -- "$pattern" "$tree" >/dev/null
    time_once "$SATCHEL_BIN" tools call grep "$tool_input" >/dev/null
    for _ in $(seq "$runs"); do
        time_once rg "$flags" -- "$pattern" "$tree" >>"$work/rg"
        time_once "$SATCHEL_BIN" tools call grep "$tool_input" >>"$work/satchel"
    done
    m_rg="$(median <"$work/rg")"; m_s="$(median <"$work/satchel")"
    awk -v n="$name ($a/$b)" -v a="$m_rg" -v b="$m_s" \
        'BEGIN {printf "%-36s %10.1f %12.1f %8.2f\n", n, a / 1000, b / 1000, b / a}'
done
echo "(in parentheses: lines rg printed / lines the tool printed)"
