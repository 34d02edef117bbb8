//! Record and replay of model traffic at the HTTP edge: a [`Tape`] shared
//! by every provider of a run either writes each request posted and the
//! response read back to a cassette (JSON lines, `format.rs`), or answers
//! each request from one, after checking it against the recorded request
//! (`normalize.rs`: ids and times left out, the first difference named).
//!
//! What is recorded is what `http.rs` posts (the body of the
//! [`PreparedRequest`](crate::PreparedRequest), the headers less
//! credentials) and the bytes the server answered, so a replay goes through
//! the same decoders as a live call. Bodies pass through the run's
//! [`Redactor`] before they are written (and, on replay, before they are
//! compared), so no secret the redactor knows reaches a cassette.
//!
//! Each tool call that ran is written too (a `tool` line: the call and its
//! output, redacted); a replay runs tools for real unless it was opened
//! with tools replayed (`--replay-tools`), when the agent asks the tape
//! for each call's recorded output instead ([`Tape::tool_output`]).
//!
//! What does not live here: the command-line flags (the binary builds the
//! tape), anything about which requests the agent makes.

mod format;
mod normalize;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::header::HeaderMap;
use satchel_core::redact::Redactor;
use satchel_core::{ToolCall, ToolOutput};

pub use format::{Interaction, RecordedRequest, RecordedResponse, ServerLine, ToolLine};
pub use normalize::{first_difference, normalize_body};

use crate::server_report::ServerInfo;

/// Why a cassette could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    /// The file could not be created, read or written.
    #[error("cassette {path}: {source}")]
    Io {
        /// The cassette.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not a cassette line.
    #[error("cassette {path}, line {line}: {message}")]
    Invalid {
        /// The cassette.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

/// The model requests of the cassette at `path`, in the order they were
/// sent (for tools that read a session, such as `satchel bench history`).
pub fn read_interactions(path: &Path) -> Result<Vec<Interaction>, CassetteError> {
    let text = std::fs::read_to_string(path).map_err(|source| CassetteError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok(format::parse(path, &text)?.interactions)
}

/// Record or replay of a run's model traffic; cheap to clone, one per run.
#[derive(Clone)]
pub struct Tape(Arc<Inner>);

struct Inner {
    path: PathBuf,
    redactor: Redactor,
    mode: Mode,
}

enum Mode {
    Record(Mutex<Recorder>),
    Replay(Mutex<Player>),
}

struct Recorder {
    out: BufWriter<File>,
    /// Requests started, for the next request's sequence number.
    started: u64,
    /// Servers already recorded, by base URL and model.
    servers: Vec<(String, String)>,
}

struct Player {
    interactions: Vec<Interaction>,
    servers: Vec<ServerLine>,
    used: Vec<bool>,
    /// Requests asked so far.
    asked: u64,
    /// Recorded tool calls; `None` when tools run for real.
    tools: Option<Vec<(ToolLine, bool)>>,
}

impl std::fmt::Debug for Tape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match self.0.mode {
            Mode::Record(_) => "record",
            Mode::Replay(_) => "replay",
        };
        write!(f, "Tape({mode} {})", self.0.path.display())
    }
}

/// Two tapes are equal when they are the same tape.
impl PartialEq for Tape {
    fn eq(&self, other: &Tape) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Tape {
    /// A tape that writes a new cassette at `path` (replacing any file
    /// there), every body redacted by `redactor`.
    pub fn record(path: &Path, redactor: Redactor) -> Result<Tape, CassetteError> {
        let io = |source| CassetteError::Io {
            path: path.to_owned(),
            source,
        };
        let mut out = BufWriter::new(File::create(path).map_err(io)?);
        format::write_line(&mut out, &format::header()).map_err(io)?;
        out.flush().map_err(io)?;
        Ok(Tape(Arc::new(Inner {
            path: path.to_owned(),
            redactor,
            mode: Mode::Record(Mutex::new(Recorder {
                out,
                started: 0,
                servers: Vec::new(),
            })),
        })))
    }

    /// A tape that answers from the cassette at `path`; live requests are
    /// redacted by `redactor` before they are compared. With `tools`, each
    /// tool call is answered from the cassette too (see
    /// [`tool_output`](Self::tool_output)).
    pub fn replay(path: &Path, redactor: Redactor, tools: bool) -> Result<Tape, CassetteError> {
        let text = std::fs::read_to_string(path).map_err(|source| CassetteError::Io {
            path: path.to_owned(),
            source,
        })?;
        let parsed = format::parse(path, &text)?;
        // (read_interactions reads the same lines for other tools.)
        let used = vec![false; parsed.interactions.len()];
        let tools = tools.then(|| parsed.tools.into_iter().map(|t| (t, false)).collect());
        Ok(Tape(Arc::new(Inner {
            path: path.to_owned(),
            redactor,
            mode: Mode::Replay(Mutex::new(Player {
                interactions: parsed.interactions,
                servers: parsed.servers,
                used,
                asked: 0,
                tools,
            })),
        })))
    }

    /// True when tool calls are answered from the cassette.
    pub fn replays_tools(&self) -> bool {
        match &self.0.mode {
            Mode::Replay(player) => player
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .tools
                .is_some(),
            Mode::Record(_) => false,
        }
    }

    /// Recording: writes `call` and the `output` it gave, redacted.
    pub fn record_tool(&self, call: &ToolCall, output: &ToolOutput) {
        if !matches!(self.0.mode, Mode::Record(_)) {
            return;
        }
        let mut value = serde_json::json!({
            "kind": format::TOOL,
            "call": call,
            "output": output,
        });
        self.0.redactor.redact_json(&mut value);
        self.write(&value);
    }

    /// Replaying tools: the output recorded for `call` (the same id, tool
    /// and input), or why there is none.
    pub fn tool_output(&self, call: &ToolCall) -> Result<ToolOutput, String> {
        let path = self.0.path.display();
        let Mode::Replay(player) = &self.0.mode else {
            return Err(format!("cassette {path} is being recorded, not replayed"));
        };
        let mut player = player.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(tools) = player.tools.as_mut() else {
            return Err(format!(
                "cassette {path} is replayed with tools run for real"
            ));
        };
        let Some((line, used)) = tools
            .iter_mut()
            .find(|(line, used)| !*used && line.call.id == call.id)
        else {
            return Err(format!(
                "cassette {path} holds no result for tool call `{}` ({}): it was recorded \
                 without it (an older Satchel, or the call never ended)",
                call.id, call.name
            ));
        };
        let mut asked = serde_json::to_value(&call.input).unwrap_or_default();
        self.0.redactor.redact_json(&mut asked);
        if line.call.name != call.name || line.call.input != asked {
            return Err(format!(
                "tool call `{}` differs from the one recorded in cassette {path}: recorded {} {}, \
                 asked {} {}",
                call.id, line.call.name, line.call.input, call.name, asked
            ));
        }
        *used = true;
        Ok(line.output.clone())
    }

    /// The cassette's path.
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// True when requests are answered from the cassette.
    pub fn is_replay(&self) -> bool {
        matches!(self.0.mode, Mode::Replay(_))
    }

    /// Recorded requests a replay has not been asked for (0 when recording).
    pub fn unused(&self) -> usize {
        match &self.0.mode {
            Mode::Record(_) => 0,
            Mode::Replay(player) => {
                let player = player.lock().unwrap_or_else(PoisonError::into_inner);
                player.used.iter().filter(|used| !**used).count()
            }
        }
    }

    /// What the server at `base_url` said about `model`: on replay the
    /// recorded answer (the network is not asked); when recording,
    /// `asked`, written down once per server and model.
    pub(crate) fn server_info(
        &self,
        base_url: &str,
        model: &str,
        asked: Option<ServerInfo>,
    ) -> Option<ServerInfo> {
        match &self.0.mode {
            Mode::Replay(player) => {
                let player = player.lock().unwrap_or_else(PoisonError::into_inner);
                player
                    .servers
                    .iter()
                    .find(|line| line.model == model)
                    .and_then(|line| line.info.clone())
            }
            Mode::Record(recorder) => {
                let mut recorder = recorder.lock().unwrap_or_else(PoisonError::into_inner);
                let key = (base_url.to_owned(), model.to_owned());
                if !recorder.servers.contains(&key) {
                    recorder.servers.push(key);
                    let line = ServerLine {
                        kind: format::SERVER.to_owned(),
                        model: model.to_owned(),
                        info: asked.clone(),
                    };
                    if let Err(error) = recorder.write(&line) {
                        tracing::warn!("cassette {}: {error}", self.0.path.display());
                    }
                }
                asked
            }
        }
    }

    /// The request as it would be written: the body redacted, headers
    /// without credentials.
    fn request(&self, url: &str, headers: &HeaderMap, body: &[u8]) -> RecordedRequest {
        RecordedRequest::new(url, headers, body, &self.0.redactor)
    }

    /// Replay: the recorded response to the request about to be posted,
    /// or why there is none (a message naming the request and the first
    /// difference).
    pub(crate) fn answer(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<reqwest::Response, String> {
        let Mode::Replay(player) = &self.0.mode else {
            return Err("the cassette is being recorded, not replayed".to_owned());
        };
        let sent = self.request(url, headers, body);
        let mut player = player.lock().unwrap_or_else(PoisonError::into_inner);
        player.asked += 1;
        let asked = player.asked;
        let path = self.0.path.display();
        let sent_norm = normalize_body(&sent.body);
        let next = player.used.iter().position(|used| !used);
        let Some(next) = next else {
            return Err(format!(
                "cassette {path} has no answer for model request {asked}: it holds {} and all \
                 were used",
                player.interactions.len()
            ));
        };
        // In order, except that requests made at the same time (side
        // requests beside a turn) may come in either order.
        let matching = (next..player.interactions.len()).find(|&i| {
            !player.used[i]
                && player.interactions[i].request.path() == sent.path()
                && normalize_body(&player.interactions[i].request.body) == sent_norm
        });
        let Some(index) = matching else {
            let expected = &player.interactions[next].request;
            let difference = if expected.path() == sent.path() {
                first_difference(&normalize_body(&expected.body), &sent_norm)
            } else {
                format!(
                    "the endpoint: recorded {}, sent {}",
                    expected.path(),
                    sent.path()
                )
            };
            return Err(format!(
                "model request {asked} differs from recorded request {} of cassette {path} at \
                 {difference}",
                next + 1
            ));
        };
        player.used[index] = true;
        player.interactions[index]
            .response
            .to_response()
            .map_err(|error| format!("cassette {path}, request {}: {error}", index + 1))
    }

    /// Recording: `response` with its body copied to the cassette as it
    /// is read; the interaction is written when the body ends or is
    /// dropped.
    pub(crate) fn tee(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        response: reqwest::Response,
    ) -> reqwest::Response {
        let Mode::Record(recorder) = &self.0.mode else {
            return response;
        };
        let seq = {
            let mut recorder = recorder.lock().unwrap_or_else(PoisonError::into_inner);
            recorder.started += 1;
            recorder.started
        };
        let request = self.request(url, headers, body);
        let status = response.status();
        let response_headers = response.headers().clone();
        let pending = Pending {
            tape: self.clone(),
            interaction: Some(Interaction {
                seq,
                request,
                response: RecordedResponse::new(status.as_u16(), &response_headers),
            }),
            body: Vec::new(),
        };
        let chunks = Teed {
            inner: Box::pin(response.bytes_stream()),
            pending,
        };
        let mut builder = http::Response::builder().status(status);
        if let Some(headers) = builder.headers_mut() {
            *headers = response_headers;
        }
        match builder.body(reqwest::Body::wrap_stream(chunks)) {
            Ok(rebuilt) => reqwest::Response::from(rebuilt),
            // Unreachable: the status and headers came from a response.
            Err(error) => {
                tracing::warn!("cassette {}: {error}", self.0.path.display());
                reqwest::Response::from(http::Response::new(reqwest::Body::from(Vec::new())))
            }
        }
    }

    fn write<T: serde::Serialize>(&self, line: &T) {
        if let Mode::Record(recorder) = &self.0.mode {
            let mut recorder = recorder.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(error) = recorder.write(line) {
                tracing::warn!("cassette {}: {error}", self.0.path.display());
            }
        }
    }
}

impl Recorder {
    fn write<T: serde::Serialize>(&mut self, line: &T) -> std::io::Result<()> {
        format::write_line(&mut self.out, line)?;
        self.out.flush()
    }
}

/// An interaction whose response body is still being read.
struct Pending {
    tape: Tape,
    interaction: Option<Interaction>,
    body: Vec<u8>,
}

impl Pending {
    fn finish(&mut self, cut: bool) {
        if let Some(mut interaction) = self.interaction.take() {
            interaction
                .response
                .set_body(&self.body, cut, &self.tape.0.redactor);
            self.tape.write(&interaction);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // A body dropped before its end (cancelled, timed out) is kept as
        // far as it was read.
        self.finish(true);
    }
}

/// A response body that copies each chunk into its [`Pending`] interaction.
struct Teed {
    inner: std::pin::Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    pending: Pending,
}

impl Stream for Teed {
    type Item = reqwest::Result<Bytes>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let polled = self.inner.poll_next_unpin(cx);
        match &polled {
            std::task::Poll::Ready(Some(Ok(chunk))) => self.pending.body.extend_from_slice(chunk),
            std::task::Poll::Ready(None) => self.pending.finish(false),
            std::task::Poll::Ready(Some(Err(_))) => self.pending.finish(true),
            std::task::Poll::Pending => {}
        }
        polled
    }
}
