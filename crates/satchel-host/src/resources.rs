//! [`HostResources`]: the host's record as MCP resources (what `satchel
//! mcp serve` offers besides tools): a conversation's log as markdown and
//! everything recorded about it as JSON, one tool call, the memories of a
//! layer, and the `code` tool's executions and their statistics. Read from
//! the host's store at each request.

use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use satchel_mcp::resources::{RecordResources, ResourceBody, ResourceEntry, ResourceTemplateEntry};
use satchel_store::{MemoryFilter, MemoryLayer, Store};
use serde_json::json;

use crate::Host;

/// Conversations listed by `resources/list`; the templates reach the rest.
const LISTED_CONVERSATIONS: usize = 20;
/// Memories of one layer in its resource, newest first.
const MEMORIES_PER_LAYER: usize = 500;
/// Code executions in `satchel://code/executions`, newest first.
const EXECUTIONS: usize = 200;
/// Days `satchel://code/stats` covers (as `/codestats`).
const STATS_DAYS: i64 = 7;

const MARKDOWN: &str = "text/markdown";
const JSON: &str = "application/json";

/// The record of a host, as resources.
pub struct HostResources {
    host: Arc<Host>,
}

impl HostResources {
    /// Resources over `host`'s store and memory namespace.
    pub fn new(host: Arc<Host>) -> HostResources {
        HostResources { host }
    }

    async fn store(&self) -> Result<Arc<dyn Store>, String> {
        self.host.store.records().await
    }

    async fn code_executions(
        &self,
        query: satchel_store::CodeQuery,
    ) -> Result<Vec<satchel_store::CodeExecution>, String> {
        let store =
            satchel_builtins::code::CodeStoreHandle::code_store(self.host.store.as_ref()).await?;
        store
            .code_executions(query)
            .await
            .map_err(|e| e.to_string())
    }
}

#[async_trait]
impl RecordResources for HostResources {
    async fn list(&self) -> Result<Vec<ResourceEntry>, String> {
        let store = self.store().await?;
        let conversations = store
            .list_conversations(LISTED_CONVERSATIONS)
            .await
            .map_err(|e| e.to_string())?;
        let mut entries: Vec<ResourceEntry> = conversations
            .into_iter()
            .map(|summary| {
                let conversation = summary.conversation;
                ResourceEntry {
                    uri: format!("satchel://conversations/{}", conversation.id),
                    name: conversation
                        .title
                        .clone()
                        .unwrap_or_else(|| conversation.id.clone()),
                    description: format!(
                        "the log of conversation {}{}",
                        conversation.id,
                        conversation
                            .goal
                            .as_deref()
                            .map(|goal| format!(" (goal: {goal})"))
                            .unwrap_or_default()
                    ),
                    mime_type: MARKDOWN.to_owned(),
                }
            })
            .collect();
        entries.push(ResourceEntry {
            uri: "satchel://code/stats".to_owned(),
            name: "code stats".to_owned(),
            description: format!(
                "the code tool's executions of the last {STATS_DAYS} days: counts by language and error category, recent failures"
            ),
            mime_type: JSON.to_owned(),
        });
        entries.push(ResourceEntry {
            uri: "satchel://code/executions".to_owned(),
            name: "code executions".to_owned(),
            description: format!("the code tool's last {EXECUTIONS} executions, newest first"),
            mime_type: JSON.to_owned(),
        });
        entries.extend(MemoryLayer::ALL.iter().map(|layer| ResourceEntry {
            uri: format!("satchel://memories/{}", layer.as_str()),
            name: format!("{} memories", layer.as_str()),
            description: format!("the memories of the {} layer, newest first", layer.as_str()),
            mime_type: JSON.to_owned(),
        }));
        Ok(entries)
    }

    fn templates(&self) -> Vec<ResourceTemplateEntry> {
        let template =
            |uri: &str, name: &str, description: &str, mime: &str| ResourceTemplateEntry {
                uri_template: uri.to_owned(),
                name: name.to_owned(),
                description: description.to_owned(),
                mime_type: mime.to_owned(),
            };
        vec![
            template(
                "satchel://conversations/{id}",
                "conversation",
                "a conversation's log as the user saw it, as markdown",
                MARKDOWN,
            ),
            template(
                "satchel://conversations/{id}/json",
                "conversation-record",
                "everything recorded about a conversation: statements, log, history, tool calls",
                JSON,
            ),
            template(
                "satchel://tool-calls/{id}",
                "tool-call",
                "one recorded tool call: input, results, note, timing",
                JSON,
            ),
            template(
                "satchel://code/{view}",
                "code",
                "the code tool's record: `stats` (last 7 days) or `executions` (newest first)",
                JSON,
            ),
            template(
                "satchel://memories/{layer}",
                "memories",
                "the memories of a layer (long, mid, short, session), newest first",
                JSON,
            ),
        ]
    }

    async fn read(&self, uri: &str) -> Result<Option<ResourceBody>, String> {
        let Some(path) = uri.strip_prefix("satchel://") else {
            return Ok(None);
        };
        let store = self.store().await?;
        let error = |e: satchel_store::StoreError| e.to_string();
        let body = |mime: &str, text: String| {
            Some(ResourceBody {
                mime_type: mime.to_owned(),
                text,
            })
        };
        let parts: Vec<&str> = path.split('/').collect();
        Ok(match parts.as_slice() {
            ["conversations", id] => store
                .dump_conversation(id)
                .await
                .map_err(error)?
                .map(|dump| markdown(&dump))
                .and_then(|text| body(MARKDOWN, text)),
            ["conversations", id, "json"] => {
                match store.dump_conversation(id).await.map_err(error)? {
                    Some(dump) => body(
                        JSON,
                        serde_json::to_string_pretty(&json!({
                            "conversation": dump.conversation,
                            "statements": dump.statements,
                            "log": dump.log_entries,
                            "history": dump.messages,
                            "tool_calls": dump.tool_calls,
                        }))
                        .map_err(|e| e.to_string())?,
                    ),
                    None => None,
                }
            }
            ["tool-calls", id] => match store.tool_call(id).await.map_err(error)? {
                Some(record) => body(
                    JSON,
                    serde_json::to_string_pretty(&record).map_err(|e| e.to_string())?,
                ),
                None => None,
            },
            ["code", "stats"] => {
                let since = satchel_store::Timestamp::from_millis(
                    satchel_store::Clock::now(&satchel_store::SystemClock).as_millis()
                        - STATS_DAYS * 86_400_000,
                );
                let executions = self
                    .code_executions(satchel_store::CodeQuery {
                        since: Some(since),
                        ..satchel_store::CodeQuery::default()
                    })
                    .await?;
                let stats = satchel_builtins::code::code_stats(&executions);
                body(
                    JSON,
                    serde_json::to_string_pretty(&stats).map_err(|e| e.to_string())?,
                )
            }
            ["code", "executions"] => {
                let executions = self
                    .code_executions(satchel_store::CodeQuery {
                        limit: Some(EXECUTIONS),
                        ..satchel_store::CodeQuery::default()
                    })
                    .await?;
                body(
                    JSON,
                    serde_json::to_string_pretty(&executions).map_err(|e| e.to_string())?,
                )
            }
            ["memories", layer] => match MemoryLayer::parse(layer) {
                Some(layer) => {
                    let filter = MemoryFilter {
                        namespace: self.host.memory.config().namespace,
                        layers: vec![layer],
                        ..MemoryFilter::default()
                    };
                    let memories = store
                        .list_memories(filter, MEMORIES_PER_LAYER)
                        .await
                        .map_err(error)?;
                    body(
                        JSON,
                        serde_json::to_string_pretty(&memories).map_err(|e| e.to_string())?,
                    )
                }
                None => None,
            },
            _ => None,
        })
    }
}

/// A conversation's log as markdown: title and goal, then each entry as
/// the user saw it, side conversations marked.
fn markdown(dump: &satchel_store::ConversationDump) -> String {
    let conversation = &dump.conversation;
    let mut text = format!(
        "# {}\n\n",
        conversation.title.as_deref().unwrap_or(&conversation.id)
    );
    if let Some(goal) = &conversation.goal {
        let _ = writeln!(text, "Goal: {goal}\n");
    }
    for entry in &dump.log_entries {
        let side = entry
            .side_conversation
            .as_deref()
            .map(|side| format!(" ({side})"))
            .unwrap_or_default();
        let _ = writeln!(
            text,
            "**{}**{side}: {}\n",
            entry.kind.as_str(),
            entry.text.trim_end()
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use satchel_store::{LogKind, NewConversation, NewLogEntry};

    #[tokio::test]
    async fn a_conversation_reads_as_markdown_and_json_and_an_unknown_uri_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let host = Arc::new(
            Host::open(crate::HostOptions {
                root: dir.path().to_path_buf(),
                db: Some(dir.path().join("satchel.db")),
                ..crate::HostOptions::default()
            })
            .unwrap(),
        );
        let store = host.store.records().await.unwrap();
        let conversation = store
            .create_conversation(NewConversation::default())
            .await
            .unwrap();
        store
            .append_log_entry(NewLogEntry::new(
                &conversation.id,
                LogKind::User,
                "list the files",
            ))
            .await
            .unwrap();
        let resources = HostResources::new(host.clone());

        let listed = resources.list().await.unwrap();
        let uri = format!("satchel://conversations/{}", conversation.id);
        assert!(listed.iter().any(|entry| entry.uri == uri), "{listed:?}");
        assert!(
            listed
                .iter()
                .any(|entry| entry.uri == "satchel://memories/long")
        );

        let log = resources.read(&uri).await.unwrap().unwrap();
        assert_eq!(log.mime_type, "text/markdown");
        assert_eq!(
            log.text,
            format!("# {}\n\n**user**: list the files\n\n", conversation.id)
        );
        let record = resources
            .read(&format!("{uri}/json"))
            .await
            .unwrap()
            .unwrap();
        let value: serde_json::Value = serde_json::from_str(&record.text).unwrap();
        assert_eq!(value["log"][0]["text"], "list the files");
        assert_eq!(
            resources
                .read("satchel://memories/long")
                .await
                .unwrap()
                .unwrap()
                .text,
            "[]"
        );
        let stats = resources
            .read("satchel://code/stats")
            .await
            .unwrap()
            .unwrap();
        let stats: serde_json::Value = serde_json::from_str(&stats.text).unwrap();
        assert_eq!(stats["total"], 0, "{stats}");
        let executions = resources
            .read("satchel://code/executions")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(executions.text, "[]");

        for unknown in [
            "satchel://conversations/nope",
            "satchel://memories/forever",
            "satchel://code/everything",
            "satchel://elsewhere",
            "https://example.com/",
        ] {
            assert_eq!(resources.read(unknown).await.unwrap(), None, "{unknown}");
        }
        host.close().await;
    }
}
