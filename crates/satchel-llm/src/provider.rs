//! The [`Provider`] trait every wire format implements, and nothing that
//! knows the formats: each provider module depends on this one, never the
//! reverse (`connect.rs` picks an implementation by configuration).

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::LlmError;
use crate::config::ModelConfig;
use crate::http::{EventStream, collect};
use crate::request::{ChatRequest, Mode, PreparedRequest};
use crate::response::Response;

/// A model behind one wire format.
///
/// A call is two steps so that what is counted is what is sent:
/// [`Provider::prepare`] serialises the request once and counts its tokens;
/// [`Provider::send`] posts exactly those bytes. [`Provider::stream`] and
/// [`Provider::complete`] do both.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// The configuration the provider runs with.
    fn config(&self) -> &ModelConfig;

    /// Serialises `request` into the body that [`Provider::send`] posts,
    /// with the token estimate counted on it.
    fn prepare(&self, request: &ChatRequest<'_>, mode: Mode) -> Result<PreparedRequest, LlmError>;

    /// Posts `prepared.body` and yields the answer's events, ending with
    /// [`StreamEvent::Done`](crate::StreamEvent::Done). A [`Mode::Whole`]
    /// request yields the same events once the whole answer is in.
    ///
    /// # Caveats
    /// Nothing happens until the stream is polled. Cancelling `cancel`, or
    /// dropping the stream, aborts the request at once, during a retry's
    /// backoff too.
    fn send(&self, prepared: &PreparedRequest, cancel: CancellationToken) -> EventStream;

    /// Prepares `request` for streaming and sends it.
    ///
    /// # Caveats
    /// As for [`Provider::send`].
    fn stream(
        &self,
        request: &ChatRequest<'_>,
        cancel: CancellationToken,
    ) -> Result<EventStream, LlmError> {
        let prepared = self.prepare(request, Mode::Stream)?;
        Ok(self.send(&prepared, cancel))
    }

    /// Prepares `request` without streaming, sends it and returns the answer.
    ///
    /// # Caveats
    /// Cancelling `cancel`, or dropping the future, aborts the request at once.
    fn complete(
        &self,
        request: &ChatRequest<'_>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Response, LlmError>> {
        match self.prepare(request, Mode::Whole) {
            Ok(prepared) => Box::pin(collect(self.send(&prepared, cancel))),
            Err(error) => Box::pin(async move { Err(error) }),
        }
    }
}
