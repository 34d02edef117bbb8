//! What the end-to-end tests share: a temporary project, and a real model
//! server.

pub mod model_server;
pub mod project;
