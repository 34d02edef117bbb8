//! What every handler shares: the app state (the host and the chat
//! page's runs) and [`ApiError`], a failure answered as JSON.

use std::sync::Arc;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use satchel_host::Host;
use serde_json::json;

use crate::runs::Runs;

/// What the handlers share.
pub(crate) struct AppState {
    /// The project, its store, memory and tools.
    pub(crate) host: Arc<Host>,
    /// Statements run from the chat page.
    pub(crate) runs: Runs,
}

/// A failure as JSON, with the status that fits.
pub(crate) struct ApiError(pub(crate) StatusCode, pub(crate) String);

impl ApiError {
    /// A failure with its status.
    pub(crate) fn new(status: StatusCode, message: &str) -> ApiError {
        ApiError(status, message.to_owned())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

impl<E: std::fmt::Display> From<E> for ApiError {
    fn from(error: E) -> ApiError {
        ApiError(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
    }
}
