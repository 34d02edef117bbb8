//! Link-time settings for the `satchel` binary only.

fn main() {
    // Packed relative relocations (DT_RELR, glibc 2.36+, binutils 2.38+):
    // the binary's ~86,000 relative relocations take a few kilobytes
    // instead of 2 MB, so start-up reads far less before `main`
    // (issue #22's start-up target; `bench/startup.sh`).
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
}
