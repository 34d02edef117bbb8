//! Builds the token vocabularies from `data/*.tiktoken.gz` (see
//! `data/README.md`): each becomes a `bpe::BytePairEncoding`, exactly as
//! `bpe-openai` builds it (same hash factor), serialised with MessagePack
//! and gzipped into `OUT_DIR`, where `src/tokens.rs` includes it.

#![allow(
    clippy::disallowed_methods,
    reason = "a build script talks to cargo through the environment and runs tools"
)]

use std::io::{Read, Write};
use std::path::PathBuf;

use bpe::byte_pair_encoding::{BytePairEncoding, read_tiktoken};
use serde::Serialize;

/// `bpe-openai`'s hash factor for these vocabularies (a perfect hash over
/// their tokens).
const HASH_FACTOR: u64 = 17_846_336_922_010_275_747;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    for name in ["cl100k_base", "o200k_base"] {
        let source = format!("data/{name}.tiktoken.gz");
        println!("cargo::rerun-if-changed={source}");
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&source)?).read_to_string(&mut text)?;
        let tokens = read_tiktoken(&text)?;
        let bpe = BytePairEncoding::from_dictionary(tokens, Some(HASH_FACTOR));
        let mut serialized = Vec::new();
        bpe.serialize(&mut rmp_serde::Serializer::new(&mut serialized))?;
        let file = std::fs::File::create(out.join(format!("{name}.bpe.gz")))?;
        let mut encoder = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        encoder.write_all(&serialized)?;
        encoder.finish()?;
    }
    println!("cargo::rerun-if-changed=build.rs");
    Ok(())
}
