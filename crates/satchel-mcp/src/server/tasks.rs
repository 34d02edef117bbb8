//! Calls run as tasks (the tasks extension of 2026-07-28, SEP-2663): a
//! client that declared the extension gets a task, not a wait, for a call
//! its tool says runs long ([`Tool::runs_long`]: `code` generate, a `bash`
//! command with a long timeout, a tool marked `longRunningHint`). It polls
//! `tasks/get`, answers questions with `tasks/update`, stops the call with
//! `tasks/cancel`.
//!
//! The call goes through the same dispatch as any other: validated, judged
//! by the policy (an "ask" becomes the task's input request), recorded on
//! the audit trail under the call id `mcp-task-<task id>`. It runs with
//! `background` set, so a tool that would hand back a job finishes it.
//!
//! [`Tool::runs_long`]: satchel_tools::Tool::runs_long

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CreateTaskResult, JsonObject};
use rmcp::task_manager::{TaskContext, TaskExit, TaskOptions};
use satchel_tools::progress::{ProgressSink, ProgressUpdate};
use tokio_util::sync::CancellationToken;

use super::{CallFrom, SatchelServer};
use crate::consent::TaskConsent;
use crate::convert::to_call_tool_result;

/// How long a task is kept, running or finished: past it, rmcp fails a
/// task still running and forgets a finished one. An hour covers the
/// longest `bash` timeout (10 minutes) and a slow code generator.
const TASK_TTL: Duration = Duration::from_secs(60 * 60);

/// How often clients are told to poll.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Who started a task, for its call's record.
pub(super) struct TaskCall {
    pub(super) name: String,
    pub(super) arguments: Option<JsonObject>,
    pub(super) peer: Option<String>,
    /// Whether the client declared it can ask its user (elicitation).
    pub(super) can_ask: bool,
    /// The client's roots, when it declared them.
    pub(super) roots: Option<Arc<[std::path::PathBuf]>>,
}

/// Most tasks the server keeps at once, running or finished: rmcp keeps a
/// task up to two time-to-lives, so each start is counted that long.
const MAX_TASKS: usize = 256;

impl SatchelServer {
    /// Whether another task may be made now (counting it if so).
    pub(super) fn admit_task(&self) -> bool {
        let now = std::time::Instant::now();
        let mut starts = super::lock(&self.inner.task_starts);
        while starts
            .front()
            .is_some_and(|start| now.duration_since(*start) > TASK_TTL * 2)
        {
            starts.pop_front();
        }
        if starts.len() >= MAX_TASKS {
            tracing::warn!(
                max = MAX_TASKS,
                "task limit reached: a long call is answered in its request"
            );
            return false;
        }
        starts.push_back(now);
        true
    }

    /// Starts `call` as a task and answers with it at once.
    pub(super) fn start_task(&self, call: TaskCall) -> CreateTaskResult {
        let server = self.clone();
        let options = TaskOptions::new()
            .with_ttl_ms(u64::try_from(TASK_TTL.as_millis()).ok())
            .with_poll_interval_ms(u64::try_from(POLL_INTERVAL.as_millis()).unwrap_or(1_000))
            .with_status_message(format!("`{}` is starting", call.name));
        let task = self.inner.tasks.spawn(options, move |context| {
            Box::pin(async move { server.run_task(call, context).await })
        });
        CreateTaskResult::new(task)
    }

    /// The task's body: the call, stopped (process group and all) when
    /// `tasks/cancel` arrives, and recorded either way.
    async fn run_task(
        &self,
        call: TaskCall,
        context: TaskContext,
    ) -> Result<rmcp::model::CallToolResult, TaskExit> {
        let cancel = CancellationToken::new();
        let from = CallFrom {
            cancel: cancel.clone(),
            peer: call.peer,
            progress: Some(Arc::new(TaskStatus(context.clone()))),
            consent: TaskConsent::shared(context.clone(), call.can_ask),
            call_id: Some(format!("mcp-task-{}", context.task_id())),
            background: true,
            roots: call.roots,
        };
        let running = self.call(&call.name, call.arguments, from);
        tokio::pin!(running);
        tokio::select! {
            output = &mut running => Ok(to_call_tool_result(&output)),
            () = context.cancelled() => {
                cancel.cancel();
                // The call ends promptly once cancelled, and its record
                // is written before the task settles.
                let _ = running.await;
                Err(TaskExit::Cancelled)
            }
        }
    }
}

/// A task's progress: each report becomes its status message, which
/// `tasks/get` shows (elapsed time and output so far, a job's state).
struct TaskStatus(TaskContext);

impl fmt::Debug for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TaskStatus")
            .field(&self.0.task_id())
            .finish()
    }
}

impl ProgressSink for TaskStatus {
    fn report(&self, update: ProgressUpdate) {
        self.0.set_status_message(update.message);
    }
}
