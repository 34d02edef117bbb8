#!/usr/bin/env bash
# The cost of a call, at the floor (issue #47): every figure as a ratio to
# its baseline measured in the same run, with the command that reproduces it.
#
#   (a) `mcp serve` stdio echo round trip p50 against the reference
#       TypeScript server (server-everything) and a bare responder;
#   (b) bash `true` over MCP against its floor: the bare responder's round
#       trip plus the sandboxed spawn measured alone; and, beside it,
#       against a bare responder that runs the same spawn before answering
#       (one round trip, the client cold after bash as in a real call);
#   (c) sandboxed against unsandboxed (`--mode trust`) bash `true` inside a
#       running `mcp serve`;
#   (d) one-shot `tools call bash`, `--version` and `tools list` against the
#       fork-and-wait floor `timeout 60 bash -c true`;
#   (e) PostgreSQL against SQLite: one recorded call p50 and batched calls/s;
#   (f) front ends under load: `mcp serve --http`'s memory after 10,000
#       sessions opened and abandoned, against its start and against its
#       memory after one session per connection; Telegram, 100
#       chats of 5 messages, against a bare bot on the same Bot API server
#       and model, and its memory once every chat is idle.
#
# Usage: bench/cost-per-call.sh [RUNS]     (RUNS for (d), default 50)
#   SATCHEL_BIN=/abs/path/to/satchel to measure another build (default: the
#   release build of this checkout, built first). CPU=N pins every measured
#   process to that CPU (default 1; CPU= to not pin). Needs the test peers
#   (scripts/install-test-peers.sh) and PostgreSQL (scripts/install-postgres.sh).
# Every part runs with temporary config, data and cache directories and
# databases: nothing of the user's is read or written.
set -euo pipefail

runs="${1:-50}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cpu="${CPU-1}"
pin=()
if [ -n "$cpu" ] && command -v taskset >/dev/null 2>&1; then
    pin=(taskset -c "$cpu")
fi
target="${CARGO_TARGET_DIR:-$root/target}"
if [ -z "${SATCHEL_BIN:-}" ]; then
    cargo build --release --quiet -p satchel-cli
    SATCHEL_BIN="$target/release/satchel"
fi
export SATCHEL_BIN
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

echo "satchel: $SATCHEL_BIN; $(uname -r), $(nproc) cores; pinned: ${pin[*]:-no}"

# (a), (b), (c): one rmcp client, servers running for the whole measurement.
cargo bench --quiet -p satchel-mcp --bench roundtrip --no-run 2>/dev/null
SATCHEL_ROUNDTRIP_ONLY=stdio "${pin[@]}" cargo bench --quiet -p satchel-mcp --bench roundtrip \
    2>/dev/null | tee "$out/mcp"

# (d): whole processes, in turn.
"${pin[@]}" bench/startup.sh "$runs" | tee "$out/startup"

# (e): the store's backends (LoCoMo recall left out: `cargo bench -p
# satchel-store --bench backends` runs it).
pg_bin="${SATCHEL_TEST_PG_BIN:-$(scripts/install-postgres.sh)}"
cargo bench --quiet -p satchel-store --bench backends --no-run 2>/dev/null
SATCHEL_TEST_PG_BIN="$pg_bin" SATCHEL_BENCH_LOCOMO=/nonexistent \
    "${pin[@]}" cargo bench --quiet -p satchel-store --bench backends 2>/dev/null | tee "$out/store"

# (f): front ends, not pinned (a hundred chats on one core would measure
# the pin): the flood against the same binary, the burst in its own bench.
python3 bench/mcp-http-flood.py --binary "$SATCHEL_BIN" -n 10000 --settle 20 \
    -- --session-idle 5s | tee "$out/flood"
cargo bench --quiet -p satchel-telegram --bench burst --no-run 2>/dev/null
cargo bench --quiet -p satchel-telegram --bench burst 2>/dev/null | tee "$out/burst"

# The summary: each ratio, its target, the command that reproduces it.
ratio_after() { grep -F "$1" "$2" | head -1 | sed -E 's/.*: ([0-9.]+).*/\1/'; }
startup_ratio() { grep -F "$1" "$out/startup" | head -1 | awk '{print $NF}'; }
store_cell() { grep -F "$1" "$out/store" | head -1 | awk -F'|' '{gsub(/[ x]/, "", $5); print $5}'; }
mcp="SATCHEL_ROUNDTRIP_ONLY=stdio cargo bench -p satchel-mcp --bench roundtrip"
one="SATCHEL_BIN=$SATCHEL_BIN bench/startup.sh $runs"
store="SATCHEL_BENCH_LOCOMO=/nonexistent cargo bench -p satchel-store --bench backends"
flood="python3 bench/mcp-http-flood.py --binary $SATCHEL_BIN -n 10000 --settle 20 -- --session-idle 5s"
burst="cargo bench -p satchel-telegram --bench burst"
flood_value() { grep -F "$1" "$out/flood" | head -1 | sed -E 's/^.{2,}  +([0-9.]+).*/\1/'; }
burst_match() { grep -F "$1" "$out/burst" | head -1 | sed -E "s/.*$2.*/\1/"; }
echo
echo "| figure | ratio | target | command |"
echo "|---|---:|---:|---|"
echo "| (a) mcp serve echo p50 / server-everything echo | $(ratio_after 'satchel echo / server-everything echo' "$out/mcp") | <= 1.0 | \`$mcp\` |"
echo "| (a) mcp serve echo p50 / bare responder | $(ratio_after 'satchel echo / bare responder' "$out/mcp") | | \`$mcp\` |"
echo "| (b) bash \`true\` over MCP / (bare responder + sandboxed spawn alone) | $(ratio_after 'satchel bash `true` / (bare' "$out/mcp") | <= 1.1 | \`$mcp\` |"
echo "| (b) the same / a bare responder whose \`bash\` runs the same spawn | $(ratio_after 'bare responder + spawn, one round trip' "$out/mcp") | | \`$mcp\` |"
echo "| (c) sandboxed / unsandboxed bash \`true\` in mcp serve | $(ratio_after 'sandboxed / unsandboxed' "$out/mcp") | <= 1.3 | \`$mcp\` |"
echo "| (d) \`tools call bash '{\"command\":\"true\"}'\` / \`timeout 60 bash -c true\` | $(startup_ratio 'satchel tools call bash') | <= 2.7 | \`$one\` |"
echo "| (d) the same, sandbox: none / floor | $(startup_ratio 'the same, sandbox: none') | | \`$one\` |"
echo "| (d) \`satchel --version\` / floor | $(startup_ratio 'satchel --version') | <= 1.5 | \`$one\` |"
echo "| (d) \`satchel tools list\` / floor | $(startup_ratio 'satchel tools list') | <= 1.5 | \`$one\` |"
echo "| (e) PostgreSQL / SQLite, one call p50 | $(store_cell 'single call p50') | <= 2.0 | \`$store\` |"
echo "| (e) PostgreSQL / SQLite, batched calls/s | $(store_cell 'batched, calls/s') | >= 0.5 | \`$store\` |"
echo "| (f) \`mcp serve --http\` RSS after 10,000 abandoned sessions, MiB | $(flood_value 'RSS after flood') | <= 100 MB | \`$flood\` |"
echo "| (f) the same, once they expired / its start | $(flood_value 'later ÷ before') | <= 1.20 | \`$flood\` |"
echo "| (f) the same / its RSS after one session per connection | $(flood_value 'later ÷ after 8 sessions') | <= 1.20 | \`$flood\` |"
echo "| (f) Telegram added p95 over the bare bot, ms | $(burst_match 'added latency' 'p95 ([0-9.]+) ms') | <= 50 | \`$burst\` |"
echo "| (f) Telegram p95 / the bare bot's | $(burst_match 'ratio to the bare bot' 'p95 ([0-9.]+)x') | | \`$burst\` |"
echo "| (f) Telegram memory with every chat idle / before the bot | $(burst_match 'once every chat was idle' '÷ before: ([0-9.]+)') | <= 1.20 | \`$burst\` |"
