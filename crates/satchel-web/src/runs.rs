//! The statements run from the chat page, kept by id: each one's events
//! so far, its consent questions and its conversation, and which
//! conversations are busy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use satchel_tools::ConsentAnswer;
use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

/// One statement running (or run) from the page.
pub(crate) struct Run {
    /// Every event so far, as JSON, in order.
    pub(crate) events: Mutex<Vec<Value>>,
    /// Woken on every new event.
    pub(crate) changed: Notify,
    /// Cancelled by Stop.
    pub(crate) cancel: CancellationToken,
    /// Consent questions waiting for the page, by id.
    pub(crate) questions: Mutex<HashMap<String, oneshot::Sender<ConsentAnswer>>>,
    /// The conversation, once known.
    pub(crate) conversation: Mutex<Option<String>>,
}

impl Run {
    /// Adds an event and wakes whoever waits for one.
    pub(crate) fn push(&self, event: Value) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
        self.changed.notify_waiters();
    }

    /// Whether `done` was sent.
    pub(crate) fn finished(&self) -> bool {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .is_some_and(|event| event["type"] == "done")
    }
}

/// Runs by id, and which conversation is busy.
#[derive(Default)]
pub(crate) struct Runs {
    /// Runs by id.
    pub(crate) runs: Mutex<HashMap<String, Arc<Run>>>,
    /// Busy conversations, each with its run's id.
    pub(crate) busy: Mutex<HashMap<String, String>>,
}
