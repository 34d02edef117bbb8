"""Writes a wheel that carries the prebuilt `satchel` binary (PEP 427).

The layout is the one maturin's `bindings = "bin"` writes for ruff and uv:
the binary in `NAME-VERSION.data/scripts/`, which pip, pipx and uv install
as a command on PATH; no Python code. It packages the binary that
`scripts/dist` already built instead of letting maturin run cargo again.

Usage: build_wheel.py --binary PATH --version V --platform-tag TAG
                      --readme README.md --license FILE... --out DIR
Prints the wheel's path.
"""

import argparse
import base64
import hashlib
import os
import sys
import time
import zipfile

NAME = "satchel"
SUMMARY = "Satchel: tools, memory and MCP for LLM agents (the prebuilt satchel binary)."


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--platform-tag", required=True)
    parser.add_argument("--readme", required=True)
    parser.add_argument("--license", action="append", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    # Reproducible: every entry dated SOURCE_DATE_EPOCH when it is set.
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    date_time = time.gmtime(max(epoch, 315532800))[:6]  # zip starts at 1980

    tag = f"py3-none-{args.platform_tag}"
    data_dir = f"{NAME}-{args.version}.data"
    info_dir = f"{NAME}-{args.version}.dist-info"
    with open(args.readme, encoding="utf-8") as readme:
        description = readme.read()
    metadata = "".join(
        [
            "Metadata-Version: 2.1\n",
            f"Name: {NAME}\n",
            f"Version: {args.version}\n",
            f"Summary: {SUMMARY}\n",
            "Home-page: https://github.com/satchel-rs/satchel\n",
            "License: MIT OR Apache-2.0\n",
            "Requires-Python: >=3.8\n",
            "Classifier: Programming Language :: Rust\n",
            "Classifier: Operating System :: POSIX :: Linux\n",
            "Description-Content-Type: text/markdown\n",
            "\n",
            description,
        ]
    )
    wheel = "".join(
        [
            "Wheel-Version: 1.0\n",
            "Generator: satchel scripts/dist (packaging/python/build_wheel.py)\n",
            "Root-Is-Purelib: false\n",
            f"Tag: {tag}\n",
        ]
    )
    with open(args.binary, "rb") as binary:
        entries = [(f"{data_dir}/scripts/{NAME}", binary.read(), 0o755)]
    for path in args.license:
        with open(path, "rb") as license_file:
            entries.append((f"{info_dir}/{os.path.basename(path)}", license_file.read(), 0o644))
    entries.append((f"{info_dir}/METADATA", metadata.encode(), 0o644))
    entries.append((f"{info_dir}/WHEEL", wheel.encode(), 0o644))
    record = "".join(f"{name},{record_hash(data)},{len(data)}\n" for name, data, _ in entries)
    record += f"{info_dir}/RECORD,,\n"
    entries.append((f"{info_dir}/RECORD", record.encode(), 0o644))

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{NAME}-{args.version}-{tag}.whl")
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
