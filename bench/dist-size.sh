#!/usr/bin/env bash
# The shipped binary's size and start-up, before and after the `dist`
# profile (issue #44), in one run: "before" is the release profile's binary
# (target/release/satchel: line tables, no LTO; also shown stripped, which
# is what a plain `strip` would ship), "after" the dist profile's (thin LTO,
# one codegen unit per crate), stripped as scripts/dist ships it. Start-up: `satchel --version` and
# `satchel tools list`, each binary started RUNS times in turn (before,
# after, before, after ...) so a drift of the machine's speed moves both;
# the medians and the ratio after/before are printed. The peers' shipped
# binaries are given for reference (the sizes issue #44 quotes).
#
# Usage: bench/dist-size.sh [RUNS]      (default 30)
#   SATCHEL_RELEASE_BIN, SATCHEL_DIST_BIN: the two binaries [default:
#   target/release/satchel and target/dist/satchel, built when missing];
#   SATCHEL_DIST_LABEL: what the second is [default: dist profile], for a
#   run that measures another build in its place.
#
# Every run gets temporary config, data and cache directories and database.
set -euo pipefail

runs="${1:-30}"
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
before="${SATCHEL_RELEASE_BIN:-$target/release/satchel}"
after="${SATCHEL_DIST_BIN:-$target/dist/satchel}"
label="${SATCHEL_DIST_LABEL:-dist profile}"
[ -x "$before" ] || cargo build --release --quiet -p satchel-cli --manifest-path "$root/Cargo.toml"
[ -x "$after" ] || cargo build --profile dist --quiet -p satchel-cli --manifest-path "$root/Cargo.toml"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/project"
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache"
export SATCHEL_DB="$work/data/satchel.db" SATCHEL_MODEL_FETCH=never NO_COLOR=1
unset RUST_LOG SATCHEL_LIBEXEC_DIR
cd "$work/project"

mb() { awk -v b="$1" 'BEGIN {printf "%.1f MB", b / 1000000}'; }
size() { stat -c %s "$1"; }
strip -o "$work/release-stripped" "$before"
strip -o "$work/dist-stripped" "$after"
gzip -9 -c "$work/dist-stripped" > "$work/dist.gz"
dist_bytes=$(size "$work/dist-stripped")

# shellcheck source=bench/timing.sh
. "$root/bench/timing.sh"

# Warm the page cache and the database once for each binary.
after="$work/dist-stripped"
for bin in "$before" "$after"; do "$bin" tools list >/dev/null 2>&1 || true; done
declare -A samples
for _ in $(seq "$runs"); do
    for which in before after; do
        bin=$before
        [ $which = after ] && bin=$after
        samples[$which-version]+="$(time_once "$bin" --version) "
        samples[$which-list]+="$(time_once "$bin" tools list) "
    done
done
ms() { tr ' ' '\n' | grep -v '^$' | median | awk '{printf "%.1f", $1 / 1000}'; }

echo "Shipped binary, $(uname -m), $(date -u +%Y-%m-%d), $runs runs each (medians, interleaved)"
echo
echo "| binary | size | vs release stripped |"
echo "| --- | ---: | ---: |"
release_stripped=$(size "$work/release-stripped")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }
echo "| before: release profile, as built | $(mb "$(size "$before")") | $(ratio "$(size "$before")" "$release_stripped") |"
echo "| before: release profile, stripped | $(mb "$release_stripped") | 1.00x |"
echo "| **after: $label (shipped)** | **$(mb "$dist_bytes")** | $(ratio "$dist_bytes" "$release_stripped") |"
echo "| after, gzip -9 (download) | $(mb "$(size "$work/dist.gz")") | $(ratio "$(size "$work/dist.gz")" "$release_stripped") |"
echo "| peer: Codex musl binary (@openai/codex 0.169) | 315.0 MB | $(ratio 315000000 "$release_stripped") |"
echo "| peer: Claude Code native binary | 245.0 MB | $(ratio 245000000 "$release_stripped") |"
echo
limit=60000000
if [ "$dist_bytes" -le "$limit" ]; then verdict="within"; else verdict="OVER"; fi
echo "Shipped binary $(mb "$dist_bytes"): $verdict the 60 MB limit."
echo
echo "| start-up | before (release) | after ($label) | after/before |"
echo "| --- | ---: | ---: | ---: |"
for what in version list; do
    b=$(echo "${samples[before-$what]}" | ms)
    a=$(echo "${samples[after-$what]}" | ms)
    command="satchel --version"
    [ $what = list ] && command="satchel tools list"
    echo "| $command | $b ms | $a ms | $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a / b}') |"
done
