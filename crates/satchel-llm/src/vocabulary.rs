//! The embedded token vocabularies and the cache of their built form.
//!
//! Each vocabulary is embedded as OpenAI's tiktoken file, gzipped (2.5 MB
//! for both; see `data/README.md`), not as the `bpe` crate's built tables
//! (24.7 MB even gzipped: issue #44 keeps the shipped binary under 60 MB).
//! On its first use in a process it is built into a
//! [`BytePairEncoding`] exactly as `bpe-openai` builds it (same hash
//! factor), which takes a second or two; the built form is then written to
//! the token cache directory ([`set_token_cache_dir`]: the CLI names
//! `$XDG_CACHE_HOME/satchel/tokens`) so that later processes on the machine
//! load it in tens of milliseconds. A cached file is checked before it is
//! used (its build, its vocabulary and a CRC-32 of its contents) and built
//! again when it does not check out.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bpe::byte_pair_encoding::{BytePairEncoding, read_tiktoken};

/// `bpe-openai`'s hash factor for these vocabularies (a perfect hash over
/// their tokens).
const HASH_FACTOR: u64 = 17_846_336_922_010_275_747;

/// What a cached vocabulary file starts with.
const MAGIC: &[u8; 12] = b"satchel-bpe\n";

/// Magic, key (u32), CRC-32 of the payload (u32), payload length (u64).
const HEADER_LEN: usize = MAGIC.len() + 4 + 4 + 8;

/// Where built vocabularies are cached, when the process says.
static CACHE_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Caches built token vocabularies in `dir` (created when first written)
/// for the rest of the process; the first call wins. Without a call, each
/// process builds the vocabularies it uses in memory and writes nothing.
pub fn set_token_cache_dir(dir: PathBuf) {
    let _ = CACHE_DIR.set(dir);
}

/// A vocabulary embedded in the binary as its gzipped tiktoken file.
pub(crate) struct Embedded {
    /// The vocabulary's name, e.g. `o200k_base`.
    pub(crate) name: &'static str,
    /// `data/NAME.tiktoken.gz`.
    tiktoken_gz: &'static [u8],
}

/// `o200k_base`.
pub(crate) const O200K: Embedded = Embedded {
    name: "o200k_base",
    tiktoken_gz: include_bytes!("../data/o200k_base.tiktoken.gz"),
};

/// `cl100k_base`.
pub(crate) const CL100K: Embedded = Embedded {
    name: "cl100k_base",
    tiktoken_gz: include_bytes!("../data/cl100k_base.tiktoken.gz"),
};

/// Why a cached vocabulary was not used or not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheError {
    /// Reading or writing the file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The file is not a whole, intact cache of this vocabulary and build.
    #[error("{0}")]
    Mismatch(&'static str),
    /// The built vocabulary did not serialise.
    #[error("cannot serialise the vocabulary: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    /// An intact file of the right key did not deserialise.
    #[error("cannot deserialise the vocabulary: {0}")]
    Decode(#[from] rmp_serde::decode::Error),
}

impl Embedded {
    /// The built vocabulary: from the process's cache directory when a
    /// valid copy is there, otherwise built (and then cached there).
    pub(crate) fn load(&self) -> BytePairEncoding {
        self.load_cached_in(CACHE_DIR.get().map(PathBuf::as_path))
    }

    /// [`Embedded::load`] with the cache directory given (`None`: build
    /// in memory only).
    pub(crate) fn load_cached_in(&self, dir: Option<&Path>) -> BytePairEncoding {
        let Some(dir) = dir else {
            return self.build();
        };
        let path = self.cache_path(dir);
        match self.read_cached(&path) {
            Ok(bpe) => return bpe,
            Err(CacheError::Io(error)) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => tracing::info!(
                path = %path.display(),
                %error,
                "rebuilding the cached token vocabulary"
            ),
        }
        let bpe = self.build();
        if let Err(error) = self.write_cached(dir, &bpe) {
            tracing::warn!(
                dir = %dir.display(),
                %error,
                "cannot cache the built token vocabulary; the next process builds it again"
            );
        }
        bpe
    }

    /// Builds the vocabulary from the embedded tiktoken file.
    ///
    /// # Panics
    /// When the embedded file does not inflate or parse: a broken build, not
    /// anything a user or model can cause (as `bpe-openai` does for its own).
    fn build(&self) -> BytePairEncoding {
        let mut text = String::new();
        let tokens = flate2::read::GzDecoder::new(self.tiktoken_gz)
            .read_to_string(&mut text)
            .map_err(|error| error.to_string())
            .and_then(|_| read_tiktoken(&text).map_err(|error| error.to_string()));
        match tokens {
            Ok(tokens) => BytePairEncoding::from_dictionary(tokens, Some(HASH_FACTOR)),
            Err(error) => panic!(
                "the embedded token vocabulary {} does not load: {error}",
                self.name
            ),
        }
    }

    /// What a cache file must say it was built from: this vocabulary's
    /// embedded bytes and the `bpe` crate's serialised form (a tiny
    /// vocabulary's, so that a `bpe` whose format changed never reads
    /// another's file).
    fn key(&self) -> u32 {
        static FORMAT: OnceLock<Vec<u8>> = OnceLock::new();
        let format = FORMAT.get_or_init(|| {
            let bytes = (0..=255u8).map(|byte| vec![byte]);
            rmp_serde::to_vec(&BytePairEncoding::from_dictionary(bytes, Some(HASH_FACTOR)))
                .unwrap_or_default()
        });
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(format);
        hasher.update(self.tiktoken_gz);
        hasher.finalize()
    }

    /// `DIR/NAME-KEY.bpe`.
    pub(crate) fn cache_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}-{:08x}.bpe", self.name, self.key()))
    }

    /// The vocabulary cached at `path`, if the file is whole and is this
    /// vocabulary's for this build.
    pub(crate) fn read_cached(&self, path: &Path) -> Result<BytePairEncoding, CacheError> {
        let bytes = std::fs::read(path)?;
        let (header, payload) = bytes
            .split_at_checked(HEADER_LEN)
            .ok_or(CacheError::Mismatch("the file is shorter than its header"))?;
        let (magic, rest) = header.split_at(MAGIC.len());
        let word = |range: std::ops::Range<usize>| -> u64 {
            rest[range]
                .iter()
                .rev()
                .fold(0, |value, byte| value << 8 | u64::from(*byte))
        };
        if magic != MAGIC {
            return Err(CacheError::Mismatch("not a cached vocabulary"));
        }
        if word(0..4) != u64::from(self.key()) {
            return Err(CacheError::Mismatch(
                "cached from another vocabulary or build",
            ));
        }
        if word(8..16) != payload.len() as u64 {
            return Err(CacheError::Mismatch("the file is truncated or too long"));
        }
        // Checked before deserialising: the `bpe` crate trusts the bytes
        // of its automata.
        if word(4..8) != u64::from(crc32fast::hash(payload)) {
            return Err(CacheError::Mismatch("the contents fail their checksum"));
        }
        Ok(rmp_serde::from_slice(payload)?)
    }

    /// Writes `bpe` to its cache file in `dir` atomically (a temporary file
    /// renamed over it), and removes this vocabulary's files of other keys
    /// (older builds) and the temporary files of writers that died (older
    /// than [`ABANDONED_AFTER`]; a live writer renames its own in seconds).
    fn write_cached(&self, dir: &Path, bpe: &BytePairEncoding) -> Result<(), CacheError> {
        let payload = rmp_serde::to_vec(bpe)?;
        std::fs::create_dir_all(dir)?;
        let mut file = tempfile::Builder::new()
            .prefix(&format!(".{}-", self.name))
            .tempfile_in(dir)?;
        let mut header = Vec::with_capacity(HEADER_LEN);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&self.key().to_le_bytes());
        header.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        header.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        file.write_all(&header)?;
        file.write_all(&payload)?;
        let path = self.cache_path(dir);
        file.persist(&path).map_err(|error| error.error)?;
        let current = path.file_name();
        let prefix = format!("{}-", self.name);
        let temporary = format!(".{}-", self.name);
        let abandoned = |entry: &std::fs::DirEntry| {
            entry
                .metadata()
                .and_then(|metadata| metadata.modified())
                .ok()
                .and_then(|modified| modified.elapsed().ok())
                .is_some_and(|age| age > ABANDONED_AFTER)
        };
        for entry in std::fs::read_dir(dir)?.flatten() {
            let name = entry.file_name();
            let stale = Some(name.as_os_str()) != current
                && name.to_str().is_some_and(|name| {
                    (name.starts_with(&prefix) && name.ends_with(".bpe"))
                        || (name.starts_with(&temporary) && abandoned(&entry))
                });
            if stale {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }
}

/// A temporary cache file untouched this long was left by a writer that
/// died (building and writing a vocabulary takes seconds).
const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;

    fn count(bpe: &BytePairEncoding) -> usize {
        bpe.count("Grüße, 世界! fn main() { println!(\"hi\"); }".as_bytes())
    }

    #[test]
    fn a_built_vocabulary_is_cached_and_loads_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let built = CL100K.load_cached_in(Some(dir.path()));
        let path = CL100K.cache_path(dir.path());
        assert!(path.is_file(), "nothing cached at {}", path.display());
        let cached = CL100K.read_cached(&path).unwrap();
        assert_eq!(cached.num_tokens(), built.num_tokens());
        assert_eq!(count(&cached), count(&built));
        for id in (0..built.num_tokens() as u32).step_by(97) {
            assert_eq!(cached.token_bytes(id), built.token_bytes(id));
        }
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, [path.file_name().unwrap().to_owned()]);
    }

    #[test]
    fn a_damaged_cache_file_is_refused_and_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let reference = count(&CL100K.load_cached_in(Some(dir.path())));
        let path = CL100K.cache_path(dir.path());
        let good = std::fs::read(&path).unwrap();

        let mut flipped = good.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x40;
        let mut wrong_key = good.clone();
        wrong_key[MAGIC.len()] ^= 1;
        let damaged: [(&str, Vec<u8>); 5] = [
            ("flipped", flipped),
            ("truncated", good[..good.len() - 1000].to_vec()),
            ("header only", good[..HEADER_LEN - 1].to_vec()),
            ("wrong key", wrong_key),
            ("empty", Vec::new()),
        ];
        for (what, bytes) in damaged {
            std::fs::write(&path, &bytes).unwrap();
            assert!(
                matches!(CL100K.read_cached(&path), Err(CacheError::Mismatch(_))),
                "{what} was not refused"
            );
            let rebuilt = CL100K.load_cached_in(Some(dir.path()));
            assert_eq!(count(&rebuilt), reference, "{what}");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                good,
                "{what} was not rewritten"
            );
        }
    }

    #[test]
    fn files_of_older_builds_are_removed_when_a_new_one_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("cl100k_base-00000000.bpe");
        let other = dir.path().join("o200k_base-00000000.bpe");
        std::fs::write(&old, b"old").unwrap();
        std::fs::write(&other, b"other").unwrap();
        CL100K.load_cached_in(Some(dir.path()));
        assert!(!old.exists());
        assert!(other.exists(), "another vocabulary's file was removed");
    }

    /// A crash between creating the temporary file and renaming it leaves
    /// the file behind: the next write removes it once it is old enough
    /// that no live writer can own it, and leaves a young one alone.
    #[test]
    fn temporary_files_of_a_dead_writer_are_removed_and_a_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir.path().join(".cl100k_base-dead01");
        let live = dir.path().join(".cl100k_base-live01");
        std::fs::write(&dead, b"half a vocabulary").unwrap();
        std::fs::write(&live, b"being written").unwrap();
        let long_ago = std::time::SystemTime::now() - 2 * ABANDONED_AFTER;
        std::fs::File::options()
            .write(true)
            .open(&dead)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        CL100K.load_cached_in(Some(dir.path()));
        assert!(!dead.exists(), "a dead writer's temporary file was left");
        assert!(live.exists(), "a live writer's temporary file was removed");
    }

    #[test]
    fn an_unwritable_cache_directory_still_gives_the_vocabulary() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"").unwrap();
        let bpe = CL100K.load_cached_in(Some(&file.join("tokens")));
        assert_eq!(bpe.count(b"hello world"), 2);
    }
}
