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
}
