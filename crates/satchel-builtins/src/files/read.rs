//! The `read` tool: a text file's lines numbered as `cat -n` numbers
//! them, from `offset` (1-based), at most `limit`, each cut at
//! [`MAX_LINE_CHARS`] with a marker, under a header that says which lines
//! of how many were shown and how to read on. The file is read as a
//! stream, so a file of any size is read in pages in bounded memory
//! (besides one line). A PNG, JPEG, GIF or WebP comes back as an image
//! part; a PDF as its text (`super::pdf`), numbered and paged the same
//! way; other binary files are described, never dumped; a directory is
//! listed.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use satchel_core::{
    Capabilities, Content, ErrorCode, Resource, ToolAnnotations, ToolOutput, ToolResults, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use satchel_tools::format::{Style, markdown_fence, paint};
use satchel_tools::{Tool, ToolContext, ToolError};

use super::stamps::{FileStamps, Hasher64, Stamp};
use super::{io_failure, parse_input, paths};

/// Lines shown when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 2000;
/// Characters of one line shown; the rest is cut with a marker.
pub const MAX_LINE_CHARS: usize = 2000;
/// Largest image returned as an image part (providers refuse larger).
const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Entries of a directory listed at most.
const MAX_ENTRIES: usize = 1000;
/// Bytes looked at to tell text from binary.
const SNIFF_BYTES: usize = 8192;

/// Reads files; see the module docs.
pub struct ReadTool {
    spec: ToolSpec,
    stamps: Arc<FileStamps>,
}

impl ReadTool {
    /// The tool, sharing `stamps` with `write` and `edit`.
    pub fn new(stamps: Arc<FileStamps>) -> ReadTool {
        ReadTool {
            spec: spec(),
            stamps,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadInput {
    file_path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "read".into(),
        title: Some("Read file".into()),
        description: "Read a file: its lines numbered from `offset` (1-based), at most `limit` (default 2000), \
            long lines cut; a header says which lines of how many were shown and where to read on. Images come \
            back as images, other binary files are described, a directory is listed. Read a file before you \
            edit or replace it."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "minLength": 1, "description": "The file to read, absolute or relative to the project"},
                "offset": {"type": "integer", "minimum": 1, "description": "The line to start at (1-based); default 1"},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read; default 2000"}
            },
            "required": ["file_path"],
            "additionalProperties": false
        }),
        output_schema: None,
        annotations: ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
            long_running_hint: None,
        },
        capabilities: Capabilities {
            reads: vec![Resource::FILES],
            writes: Vec::new(),
        },
    }
}

/// What kind of file the first bytes show.
enum Kind {
    Text,
    Image(&'static str),
    Pdf,
    Binary(String),
}

fn sniff(head: &[u8]) -> Kind {
    if let Some(found) = infer::get(head) {
        match found.mime_type() {
            mime @ ("image/png" | "image/jpeg" | "image/gif" | "image/webp") => {
                return Kind::Image(mime);
            }
            "application/pdf" => return Kind::Pdf,
            mime if found.matcher_type() != infer::MatcherType::Text => {
                return Kind::Binary(format!("{mime} ({})", found.extension()));
            }
            _ => {}
        }
    }
    let text_like = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    if memchr::memchr(0, text_like).is_some() {
        Kind::Binary("binary data".to_owned())
    } else {
        Kind::Text
    }
}

#[async_trait]
impl Tool for ReadTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: ReadInput = parse_input("read", input)?;
        let path = paths::absolute(ctx, &input.file_path)?;
        let shown = paths::shown(ctx, &path);
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(ToolError::new(
                    ErrorCode::InvalidParams,
                    format!(
                        "`{shown}` does not exist (resolved to `{}`); find files with `glob`",
                        path.display()
                    ),
                ));
            }
            Err(error) => return Err(io_failure(&shown, "read", &error)),
        };
        if meta.is_dir() {
            return list_directory(&path, &shown);
        }
        let offset = input.offset.unwrap_or(1).max(1);
        let limit = input.limit.unwrap_or(DEFAULT_LIMIT).max(1);
        let stamps = self.stamps.clone();
        let conversation = ctx.owner().map(str::to_owned);
        let read_path = path.clone();
        let shown_in = shown.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            read_file(&read_path, &shown_in, &meta, offset, limit)
        })
        .await
        .map_err(|error| ToolError::new(ErrorCode::ToolCrashed, error.to_string()))??;
        if let Some(stamp) = outcome.stamp {
            stamps.remember(conversation.as_deref(), &path, stamp);
        }
        Ok(outcome.output)
    }

    fn format_use(&self, input: &Value, style: Style) -> String {
        let path = input
            .get("file_path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let range = match (
            input.get("offset").and_then(Value::as_u64),
            input.get("limit").and_then(Value::as_u64),
        ) {
            (None, None) => String::new(),
            (offset, limit) => {
                let from = offset.unwrap_or(1);
                format!(
                    " (lines {from}–{})",
                    from + limit.unwrap_or(DEFAULT_LIMIT as u64) - 1
                )
            }
        };
        match style {
            Style::Terminal { .. } => format!(
                "{} {}{}",
                paint(style, "2", "read"),
                paint(style, "1", path),
                paint(style, "2", &range)
            ),
            Style::Markdown => format!("read `{path}`{range}"),
        }
    }

    fn format_result(&self, output: &ToolOutput, style: Style) -> String {
        if output.is_error {
            return satchel_tools::format::generic_result(output, style);
        }
        match style {
            Style::Terminal { .. } => paint(style, "2", &output.user_message),
            Style::Markdown => {
                let text = match &output.results {
                    ToolResults::Text(text) => text.clone(),
                    ToolResults::Parts(_) => return output.user_message.clone(),
                };
                let preview = satchel_tools::format::truncate_chars(&text, 4000);
                format!(
                    "{}\n\n{}",
                    output.user_message,
                    markdown_fence(&preview, "text")
                )
            }
        }
    }
}

/// A finished read: what the model gets and the file's stamp, when the
/// whole file was seen.
struct Outcome {
    output: ToolOutput,
    stamp: Option<Stamp>,
}

fn read_file(
    path: &Path,
    shown: &str,
    meta: &std::fs::Metadata,
    offset: usize,
    limit: usize,
) -> Result<Outcome, ToolError> {
    let file = std::fs::File::open(path).map_err(|e| io_failure(shown, "read", &e))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let head = reader
        .fill_buf()
        .map_err(|e| io_failure(shown, "read", &e))?;
    let head = &head[..head.len().min(SNIFF_BYTES)];
    let size = meta.len();
    match sniff(head) {
        Kind::Image(mime) if size <= MAX_IMAGE_BYTES => {
            let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            reader
                .read_to_end(&mut bytes)
                .map_err(|e| io_failure(shown, "read", &e))?;
            let stamp = Stamp::of(&bytes, meta);
            let note = format!("{shown}: {mime} image, {} bytes", bytes.len());
            let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
            return Ok(Outcome {
                output: ToolOutput::success(
                    ToolResults::Parts(vec![
                        Content::Text { text: note.clone() },
                        Content::Image {
                            mime_type: mime.to_owned(),
                            data,
                        },
                    ]),
                    format!("read {note}"),
                ),
                stamp: Some(stamp),
            });
        }
        Kind::Image(mime) => {
            return Ok(described(
                shown,
                &format!(
                    "a {mime} image of {size} bytes, too large to show (at most {MAX_IMAGE_BYTES})"
                ),
            ));
        }
        Kind::Pdf if size <= super::pdf::MAX_PDF_BYTES => {
            let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            reader
                .read_to_end(&mut bytes)
                .map_err(|e| io_failure(shown, "read", &e))?;
            let stamp = Stamp::of(&bytes, meta);
            return match super::pdf::text(&bytes) {
                Ok(pdf) => {
                    let note = format!(
                        "Text extracted from a PDF of {} pages ({size} bytes): layout, tables and images are lost.",
                        pdf.pages
                    );
                    let (output, _) =
                        numbered(pdf.text.as_bytes(), shown, offset, limit, Some(&note))?;
                    Ok(Outcome {
                        output,
                        stamp: Some(stamp),
                    })
                }
                Err(why) => Ok(described(
                    shown,
                    &format!("a PDF of {size} bytes whose text cannot be extracted ({why})"),
                )),
            };
        }
        Kind::Pdf => {
            return Ok(described(
                shown,
                &format!(
                    "a PDF of {size} bytes, too large to extract (at most {} bytes)",
                    super::pdf::MAX_PDF_BYTES
                ),
            ));
        }
        Kind::Binary(kind) => {
            return Ok(described(
                shown,
                &format!("a binary file ({kind}), {size} bytes; its content is not shown"),
            ));
        }
        Kind::Text => {}
    }
    let (output, hash) = numbered(reader, shown, offset, limit, None)?;
    Ok(Outcome {
        output,
        stamp: Some(Stamp::from_parts(hash, meta)),
    })
}

/// Lines `offset..offset + limit` of `reader`'s text, numbered, under the
/// header; the hash of all of its bytes (the file's stamp). `note` is
/// added to the header (what the text was taken from).
fn numbered<R: BufRead>(
    mut reader: R,
    shown: &str,
    offset: usize,
    limit: usize,
    note: Option<&str>,
) -> Result<(ToolOutput, u64), ToolError> {
    let mut hasher = Hasher64::default();
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut shown_lines = String::new();
    let mut last_shown = 0usize;
    let mut cut_lines = 0usize;
    let mut crlf = false;
    let mut lossy = false;
    let end = offset.saturating_add(limit);
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_failure(shown, "read", &e))?;
        if read == 0 {
            break;
        }
        std::hash::Hasher::write(&mut hasher, &line);
        number += 1;
        if number < offset || number >= end {
            continue;
        }
        let mut body: &[u8] = &line;
        if number == 1 {
            body = body.strip_prefix(b"\xef\xbb\xbf").unwrap_or(body);
        }
        body = body.strip_suffix(b"\n").unwrap_or(body);
        if let Some(stripped) = body.strip_suffix(b"\r") {
            crlf = true;
            body = stripped;
        }
        let text = String::from_utf8_lossy(body);
        lossy |= matches!(text, std::borrow::Cow::Owned(_));
        let (text, cut) = cut_line(&text);
        cut_lines += usize::from(cut);
        shown_lines.push_str(&format!("{number:>6}\t{text}\n"));
        last_shown = number;
    }
    let total = number;
    let hash = std::hash::Hasher::finish(&hasher);
    if total == 0 {
        return Ok((
            ToolOutput::success(
                ToolResults::Text(format!("{shown} is empty (0 lines).")),
                format!("read {shown}: empty"),
            ),
            hash,
        ));
    }
    if offset > total {
        return Err(ToolError::new(
            ErrorCode::InvalidParams,
            format!(
                "`offset` {offset} is past the end: `{shown}` has {total} lines; read from an offset up to {total}"
            ),
        ));
    }
    let mut header = format!("{shown}: lines {offset}-{last_shown} of {total}");
    if last_shown < total {
        header.push_str(&format!(
            "; {} more lines: call again with offset {} to read on",
            total - last_shown,
            last_shown + 1
        ));
    } else if offset > 1 {
        header.push_str(" (to the end)");
    } else {
        header.push_str(" (the whole file)");
    }
    header.push('.');
    if let Some(note) = note {
        header.push(' ');
        header.push_str(note);
    }
    if cut_lines > 0 {
        header.push_str(&format!(
            " {cut_lines} long lines were cut at {MAX_LINE_CHARS} characters (marked)."
        ));
    }
    if crlf {
        header.push_str(" The file has CRLF line endings (shown without \\r; `edit` keeps them).");
    }
    if lossy {
        header.push_str(" It is not valid UTF-8: bytes that are not were shown as �.");
    }
    let user_message = format!("read {shown}: lines {offset}-{last_shown} of {total}");
    Ok((
        ToolOutput::success(
            ToolResults::Text(format!("{header}\n{shown_lines}")),
            user_message,
        ),
        hash,
    ))
}

/// A line cut at [`MAX_LINE_CHARS`] characters, with a marker; whether it
/// was cut.
fn cut_line(text: &str) -> (std::borrow::Cow<'_, str>, bool) {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => {
            let rest = text[at..].chars().count();
            (
                format!("{}… [line cut: {rest} more characters]", &text[..at]).into(),
                true,
            )
        }
        None => (text.into(), false),
    }
}

fn described(shown: &str, what: &str) -> Outcome {
    Outcome {
        output: ToolOutput::success(
            ToolResults::Text(format!("{shown} is {what}.")),
            format!("read {shown}: {what}"),
        ),
        stamp: None,
    }
}

fn list_directory(path: &Path, shown: &str) -> Result<ToolOutput, ToolError> {
    let entries = std::fs::read_dir(path).map_err(|e| io_failure(shown, "list", &e))?;
    let mut names: Vec<String> = entries
        .flatten()
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => format!("{name}/"),
                Ok(kind) if kind.is_symlink() => format!("{name}@"),
                _ => name,
            }
        })
        .collect();
    names.sort();
    let total = names.len();
    let mut text = format!(
        "{shown} is a directory of {total} entries (directories end in /, symlinks in @):\n"
    );
    for name in names.iter().take(MAX_ENTRIES) {
        text.push_str(name);
        text.push('\n');
    }
    if total > MAX_ENTRIES {
        text.push_str(&format!(
            "… {} more entries not shown; use `glob` to find files by name\n",
            total - MAX_ENTRIES
        ));
    }
    Ok(ToolOutput::success(
        ToolResults::Text(text),
        format!("listed {shown}: {total} entries"),
    ))
}
