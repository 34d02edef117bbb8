//! Satchel's record as MCP resources: the server lists and reads what a
//! [`RecordResources`] (the host, over its store) offers, and declares the
//! `resources` capability only when it has one, so what it declares is
//! exactly what it serves.

use async_trait::async_trait;

/// One readable resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceEntry {
    /// Its URI, e.g. `satchel://conversations/ID`.
    pub uri: String,
    /// Its name for programs.
    pub name: String,
    /// What it holds, for a person.
    pub description: String,
    /// `text/markdown`, `application/json`...
    pub mime_type: String,
}

/// A family of resources by URI template (RFC 6570 level 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceTemplateEntry {
    /// E.g. `satchel://conversations/{id}`.
    pub uri_template: String,
    /// Its name for programs.
    pub name: String,
    /// What each member holds.
    pub description: String,
    /// The members' MIME type.
    pub mime_type: String,
}

/// What a read returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceBody {
    /// The text's MIME type.
    pub mime_type: String,
    /// The text.
    pub text: String,
}

/// The record, as resources.
#[async_trait]
pub trait RecordResources: Send + Sync {
    /// The resources worth listing now (recent conversations, memory
    /// layers...); the templates reach the rest.
    async fn list(&self) -> Result<Vec<ResourceEntry>, String>;

    /// The URI templates of every kind of resource served.
    fn templates(&self) -> Vec<ResourceTemplateEntry>;

    /// The resource at `uri`: `Ok(None)` when there is none.
    async fn read(&self, uri: &str) -> Result<Option<ResourceBody>, String>;

    /// Something that changes when the resource at `uri` does, for
    /// subscriptions: by default a hash of what [`read`](Self::read) gives
    /// (`None` when there is no such resource); implementations with a
    /// cheaper mark (an update time) can say so.
    async fn fingerprint(&self, uri: &str) -> Result<Option<u64>, String> {
        Ok(self.read(uri).await?.map(|body| hash_of(&body.text)))
    }

    /// Something that changes when the list of resources does.
    async fn list_fingerprint(&self) -> Result<u64, String> {
        let entries = self.list().await?;
        let uris: Vec<&str> = entries.iter().map(|entry| entry.uri.as_str()).collect();
        Ok(hash_of(&uris))
    }
}

/// A hash for change detection (compared within one process, never stored).
fn hash_of(value: &impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::hash::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}
