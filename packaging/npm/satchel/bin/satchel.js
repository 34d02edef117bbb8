#!/usr/bin/env node
// The `satchel` command of the npm package: finds the binary of this
// platform's package (an optional dependency, as esbuild and @openai/codex
// ship theirs) and runs it with the same arguments, standard streams,
// signals and exit status.
"use strict";

const { spawn } = require("node:child_process");
const path = require("node:path");

/** The platform package's name suffix for this machine, e.g. linux-x64-gnu. */
function platformKey() {
  const { platform, arch } = process;
  if (platform !== "linux") {
    return `${platform}-${arch}`;
  }
  const report = process.report && process.report.getReport();
  const glibc = report && report.header && report.header.glibcVersionRuntime;
  return `linux-${arch}-${glibc ? "gnu" : "musl"}`;
}

/** The binary's path, or a message saying why there is none. */
function findBinary() {
  if (process.env.SATCHEL_BINARY) {
    return { binary: process.env.SATCHEL_BINARY };
  }
  const key = platformKey();
  const name = `@satchel-rs/satchel-${key}`;
  try {
    const manifest = require.resolve(`${name}/package.json`);
    return { binary: path.join(path.dirname(manifest), "bin", "satchel") };
  } catch {
    const known = Object.keys(require("../package.json").optionalDependencies || {});
    return {
      error:
        `satchel: no prebuilt binary for ${key}: the package ${name} is not installed. ` +
        `Packages exist for: ${known.join(", ") || "none"}. ` +
        "If yours is listed, reinstall without --no-optional (or --omit=optional); " +
        "otherwise build Satchel from source (cargo) and set SATCHEL_BINARY to it.",
    };
  }
}

const found = findBinary();
if (found.error) {
  process.stderr.write(`${found.error}\n`);
  process.exit(1);
}

const child = spawn(found.binary, process.argv.slice(2), { stdio: "inherit" });
// Signals meant for satchel (an MCP client ending its server, Ctrl-C) reach it.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
    }
  });
}
child.on("error", (error) => {
  process.stderr.write(`satchel: cannot run ${found.binary}: ${error.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so the caller sees what the binary saw.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 1 : code);
});
