//! [`TokenStore`]: what Satchel keeps about one remote server's OAuth
//! authorization, in memory or in a file only its owner can read.
//!
//! rmcp's [`CredentialStore`] holds the tokens; it has no place for the
//! client secret a dynamic registration returned, nor for the
//! authorization server's metadata, so after a restart it could neither
//! refresh against a confidential client nor check that the server still
//! uses the same issuer. A [`Record`] keeps all of that together, and the
//! store gives rmcp the token part of it.
//!
//! Files live in one directory (0700), one per server URL (named by its
//! SHA-256, so a URL never becomes a path), written 0600 through a
//! temporary file and a rename, so a reader never sees half a record. A
//! `.lock` file beside each one is `flock`ed around a refresh: two Satchel
//! processes never both spend the same refresh token.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rmcp::transport::auth::{
    AuthError, AuthorizationMetadata, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

/// The directory, under Satchel's data directory, that holds token files.
pub const DIR_NAME: &str = "mcp-oauth";

/// Largest record file read back; anything bigger is not ours.
const MAX_RECORD_BYTES: u64 = 1024 * 1024;

/// A client identity an authorization server issued to Satchel.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// The `client_id`.
    pub client_id: String,
    /// The `client_secret`, when the server issued one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The redirect URI registered with it.
    pub redirect_uri: String,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[REDACTED]"),
            )
            .field("redirect_uri", &self.redirect_uri)
            .finish()
    }
}

/// Everything kept about one server's authorization.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Record {
    /// The MCP server's URL, as configured.
    pub server_url: String,
    /// The authorization server's issuer the rest was obtained from.
    #[serde(default)]
    pub issuer: Option<String>,
    /// That authorization server's metadata (endpoints for refresh).
    #[serde(default)]
    pub metadata: Option<AuthorizationMetadata>,
    /// The client registration made there (dynamic registration only).
    #[serde(default)]
    pub registration: Option<Registration>,
    /// Tokens, granted scopes and when they came (rmcp's shape).
    #[serde(default)]
    pub credentials: Option<StoredCredentials>,
}

impl Record {
    /// Whether tokens are held.
    pub fn has_tokens(&self) -> bool {
        self.credentials
            .as_ref()
            .is_some_and(|c| c.token_response.is_some())
    }

    /// The scopes the last token was granted.
    pub fn granted_scopes(&self) -> Vec<String> {
        self.credentials
            .as_ref()
            .map(|c| c.granted_scopes.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug)]
enum Backend {
    Memory {
        record: Mutex<Option<Box<Record>>>,
        server_url: String,
    },
    File {
        path: PathBuf,
        server_url: String,
    },
}

/// One server's [`Record`], in memory or on disk; cheap to clone (clones
/// share it). Implements rmcp's [`CredentialStore`] over the record's
/// `credentials`.
#[derive(Debug, Clone)]
pub struct TokenStore {
    backend: Arc<Backend>,
}

impl TokenStore {
    /// A store that lives as long as the process (for `mcp connect
    /// --conformance` and tests).
    pub fn memory(server_url: &str) -> TokenStore {
        TokenStore {
            backend: Arc::new(Backend::Memory {
                record: Mutex::new(None),
                server_url: server_url.to_owned(),
            }),
        }
    }

    /// The file for `server_url` in `dir` (created 0700 on first write).
    pub fn file(dir: &Path, server_url: &str) -> TokenStore {
        TokenStore {
            backend: Arc::new(Backend::File {
                path: dir.join(format!("{}.json", file_stem(server_url))),
                server_url: server_url.to_owned(),
            }),
        }
    }

    /// The stored record; an empty one when nothing is stored.
    pub fn record(&self) -> Result<Record, AuthError> {
        let record = match &*self.backend {
            Backend::Memory { record, .. } => lock(record).clone().map(|r| *r),
            Backend::File { path, .. } => read_record(path)?,
        };
        Ok(record.unwrap_or_else(|| Record {
            server_url: self.server_url().to_owned(),
            ..Record::default()
        }))
    }

    /// Replaces the stored record.
    pub fn put(&self, mut record: Record) -> Result<(), AuthError> {
        record.server_url = self.server_url().to_owned();
        match &*self.backend {
            Backend::Memory { record: slot, .. } => {
                *lock(slot) = Some(Box::new(record));
                Ok(())
            }
            Backend::File { path, .. } => write_record(path, &record),
        }
    }

    /// Changes the stored record with `change`.
    pub fn update(&self, change: impl FnOnce(&mut Record)) -> Result<(), AuthError> {
        let mut record = self.record()?;
        change(&mut record);
        self.put(record)
    }

    /// Forgets everything about this server. Returns whether anything was stored.
    pub fn delete(&self) -> Result<bool, AuthError> {
        match &*self.backend {
            Backend::Memory { record, .. } => Ok(lock(record).take().is_some()),
            Backend::File { path, .. } => match std::fs::remove_file(path) {
                Ok(()) => {
                    let _ = std::fs::remove_file(path.with_extension("lock"));
                    Ok(true)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(store_error(path, "cannot remove", &e)),
            },
        }
    }

    /// The server URL the store is for.
    pub fn server_url(&self) -> &str {
        match &*self.backend {
            Backend::Memory { server_url, .. } | Backend::File { server_url, .. } => server_url,
        }
    }

    /// The file, for a file store.
    pub fn path(&self) -> Option<&Path> {
        match &*self.backend {
            Backend::Memory { .. } => None,
            Backend::File { path, .. } => Some(path),
        }
    }
}

#[async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.record()?.credentials)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.update(|record| {
            if credentials.issuer.is_some() {
                record.issuer = credentials.issuer.clone();
            }
            record.credentials = Some(credentials);
        })
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.update(|record| record.credentials = None)
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let Backend::File { path, .. } = &*self.backend else {
            return Ok(None);
        };
        let lock_path = path.with_extension("lock");
        let file = tokio::task::spawn_blocking(move || lock_file(&lock_path))
            .await
            .map_err(|e| AuthError::CredentialStoreError(format!("lock task failed: {e}")))??;
        Ok(Some(CredentialRefreshGuard::new(file)))
    }
}

/// The file name for a server URL: the SHA-256 of its canonical form.
fn file_stem(server_url: &str) -> String {
    use sha2::Digest;
    let canonical = url::Url::parse(server_url)
        .map(|mut url| {
            url.set_fragment(None);
            url.to_string()
        })
        .unwrap_or_else(|_| server_url.to_owned());
    sha2::Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn store_error(path: &Path, what: &str, error: &std::io::Error) -> AuthError {
    AuthError::CredentialStoreError(format!("{what} {}: {error}", path.display()))
}

fn ensure_dir(dir: &Path) -> Result<(), AuthError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| store_error(dir, "cannot create", &e))?;
    // A directory made earlier (by hand, by an older version) with looser
    // permissions is closed to others too.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(dir)
        .map_err(|e| store_error(dir, "cannot read", &e))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| store_error(dir, "cannot restrict", &e))?;
    }
    Ok(())
}

/// Opens (creating 0600) and exclusively locks `path`; blocks until the
/// lock is free. The lock goes with the returned file.
fn lock_file(path: &Path) -> Result<std::fs::File, AuthError> {
    if let Some(dir) = path.parent() {
        ensure_dir(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| store_error(path, "cannot open", &e))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| store_error(path, "cannot lock", &e.into()))?;
    Ok(file)
}

fn read_record(path: &Path) -> Result<Option<Record>, AuthError> {
    use std::io::Read;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(store_error(path, "cannot open", &e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| store_error(path, "cannot stat", &e))?;
    if !meta.is_file() || meta.len() > MAX_RECORD_BYTES {
        return Err(AuthError::CredentialStoreError(format!(
            "{} is not a token file Satchel wrote; remove it with `satchel mcp logout`",
            path.display()
        )));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        tracing::warn!(path = %path.display(), "token file readable by others; tightening to 0600");
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
    let mut text = String::new();
    file.take(MAX_RECORD_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| store_error(path, "cannot read", &e))?;
    // The error names the place, never the content (it holds tokens).
    serde_json::from_str(&text).map(Some).map_err(|e| {
        AuthError::CredentialStoreError(format!(
            "{} is not a valid token file (line {}); log in again",
            path.display(),
            e.line()
        ))
    })
}

fn write_record(path: &Path, record: &Record) -> Result<(), AuthError> {
    let dir = path
        .parent()
        .ok_or_else(|| AuthError::CredentialStoreError("token file has no directory".into()))?;
    ensure_dir(dir)?;
    let text = serde_json::to_vec_pretty(record)
        .map_err(|e| AuthError::CredentialStoreError(format!("cannot encode tokens: {e}")))?;
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&tmp)?;
        file.write_all(&text)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(store_error(path, "cannot write", &e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(token: &str) -> StoredCredentials {
        let response: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(
            serde_json::json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600}),
        )
        .unwrap();
        StoredCredentials::new("client".into(), Some(response), vec!["a".into()], Some(1))
    }

    #[tokio::test]
    async fn file_store_round_trips_with_owner_only_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("mcp-oauth");
        let store = TokenStore::file(&tokens, "https://mcp.example.com/mcp");
        assert!(store.load().await.unwrap().is_none());
        store
            .put(Record {
                registration: Some(Registration {
                    client_id: "id".into(),
                    client_secret: Some("shh".into()),
                    redirect_uri: "http://127.0.0.1:1/callback".into(),
                }),
                ..Record::default()
            })
            .unwrap();
        store.save(credentials("tok-123")).await.unwrap();

        let again = TokenStore::file(&tokens, "https://mcp.example.com/mcp");
        let record = again.record().unwrap();
        assert_eq!(record.server_url, "https://mcp.example.com/mcp");
        assert_eq!(
            record
                .registration
                .as_ref()
                .unwrap()
                .client_secret
                .as_deref(),
            Some("shh")
        );
        assert!(record.has_tokens());
        assert_eq!(record.granted_scopes(), ["a"]);

        let path = again.path().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(path), 0o600);
        assert_eq!(mode(&tokens), 0o700);
        // No temporary file left behind.
        assert_eq!(std::fs::read_dir(&tokens).unwrap().count(), 1);

        // A refresh guard is a lock file; it is released when dropped.
        let guard = again.acquire_refresh_guard().await.unwrap();
        assert!(guard.is_some());
        drop(guard);

        assert!(again.delete().unwrap());
        assert!(!again.delete().unwrap());
        assert!(again.record().unwrap().credentials.is_none());
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let record = Record {
            registration: Some(Registration {
                client_id: "id".into(),
                client_secret: Some("very-secret".into()),
                redirect_uri: "http://127.0.0.1/cb".into(),
            }),
            credentials: Some(credentials("token-xyz")),
            ..Record::default()
        };
        let debug = format!("{record:?}");
        assert!(!debug.contains("very-secret"), "{debug}");
        assert!(!debug.contains("token-xyz"), "{debug}");
    }

    #[test]
    fn a_corrupt_or_huge_file_is_a_clear_error_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::file(dir.path(), "https://x.example/mcp");
        let path = store.path().unwrap().to_path_buf();
        std::fs::write(&path, "{\"server_url\": \"leak-me\", oops").unwrap();
        let error = store.record().unwrap_err().to_string();
        assert!(error.contains("not a valid token file"), "{error}");
        assert!(!error.contains("leak-me"), "{error}");
        std::fs::write(&path, vec![b' '; (MAX_RECORD_BYTES + 1) as usize]).unwrap();
        assert!(store.record().is_err());
    }

    #[test]
    fn urls_differing_only_in_fragment_share_a_file() {
        assert_eq!(
            file_stem("https://x.example/mcp#a"),
            file_stem("https://x.example/mcp")
        );
        assert_ne!(
            file_stem("https://x.example/mcp"),
            file_stem("https://x.example/other")
        );
    }
}
