#!/usr/bin/env bash
# Installs cargo-zigbuild and the Zig toolchain it drives (both from PyPI:
# `cargo-zigbuild` depends on `ziglang`) into a virtual environment, by
# default .peers/zigbuild-venv (gitignored; SATCHEL_ZIGBUILD_VENV names
# another). `scripts/dist` uses it when it is there: Zig links the binary
# against an older glibc's symbols (`x86_64-unknown-linux-gnu.2.31`) with
# the Rust standard library already installed, so the artifacts run on
# glibc 2.31 and newer (Debian 11, Ubuntu 20.04) instead of only on the
# build machine's glibc.
# Re-running is cheap: what is already at its pinned version is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/venv.sh
. scripts/lib/venv.sh

CARGO_ZIGBUILD_VERSION="0.24.1"
ZIGLANG_VERSION="0.17.1"

venv="${SATCHEL_ZIGBUILD_VENV:-$PWD/.peers/zigbuild-venv}"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('cargo-zigbuild') != '$CARGO_ZIGBUILD_VERSION' or m.version('ziglang') != '$ZIGLANG_VERSION')" 2>/dev/null; then
    echo "installing cargo-zigbuild==$CARGO_ZIGBUILD_VERSION and ziglang==$ZIGLANG_VERSION into $venv"
    make_venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "cargo-zigbuild==$CARGO_ZIGBUILD_VERSION" "ziglang==$ZIGLANG_VERSION"
fi
"$venv/bin/cargo-zigbuild" --version
"$venv/bin/python" -m ziglang version
