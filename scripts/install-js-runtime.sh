#!/usr/bin/env bash
# Installs the JavaScript/TypeScript runtime the `code` tool's tests use
# (bun, from the npm registry) into .runtimes/ in the project. Idempotent.
# Prints the path of the bun executable.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.runtimes/js
bun="$dir/node_modules/.bin/bun"
version=1.4.5
if [ -x "$bun" ] && [ "$("$bun" --version 2>/dev/null)" = "$version" ]; then
    echo "$PWD/$bun"
    exit 0
fi
command -v npm >/dev/null || { echo "npm is needed to install bun (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "bun@$version" >&2
"$bun" --version >/dev/null
echo "$PWD/$bun"
