//! Tasks extension fixtures (SEP-2663). The server decides which calls
//! become tasks: these fixtures do when the request declared the
//! `io.modelcontextprotocol/tasks` extension (at `initialize` or in its own
//! `_meta`). Tasks run on the inner server's [`TaskManager`], so
//! `tasks/get`, `tasks/update` and `tasks/cancel` see them like Satchel's own.
//!
//! - `slow_compute` may run either way: without the extension it runs in
//!   the call and answers at the end.
//! - `failing_job`, `confirm_delete`, `multi_input` and `test_tool_with_task`
//!   need a task: without the extension they are refused with `-32021`
//!   naming it, before doing anything.
//! - `protocol_error_job` fails with a protocol error either way (a
//!   `failed` task when run as one).

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    CreateTaskResult,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use serde_json::Value;

use super::input_required::{Elicited, ask_field, elicited, input_required};
use super::wire::text;

/// The longest `slow_compute` sleeps, whatever it is asked.
const LONGEST_COMPUTE: Duration = Duration::from_secs(300);

/// How long `failing_job` works before it fails.
const FAILING_AFTER: Duration = Duration::from_secs(1);

/// Serves one call of a [`super::tools::Serves::Task`] fixture.
pub(super) async fn call(
    tasks: &TaskManager,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let as_task = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks());
    let arguments = request.arguments.clone().unwrap_or_default();
    let name = request.name.as_ref();
    match (name, as_task) {
        ("slow_compute", true) => {
            let work = compute(&arguments);
            Ok(spawn(tasks, move |task| Box::pin(work.run(task))))
        }
        ("slow_compute", false) => {
            let work = compute(&arguments);
            tokio::select! {
                result = work.sleep() => Ok(result.into()),
                () = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled by the client", None)),
            }
        }
        ("protocol_error_job", true) => Ok(spawn(tasks, |_| {
            Box::pin(async { Err(TaskExit::Error(protocol_error())) })
        })),
        ("protocol_error_job", false) => Err(protocol_error()),
        (_, false) => Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        )),
        ("failing_job", true) => Ok(spawn(tasks, |_| {
            Box::pin(async {
                tokio::time::sleep(FAILING_AFTER).await;
                Ok(CallToolResult::error(vec![ContentBlock::text(
                    "failing_job failed, as it always does",
                )]))
            })
        })),
        ("confirm_delete", true) => {
            let filename = arguments
                .get("filename")
                .and_then(Value::as_str)
                .unwrap_or("file.txt")
                .to_owned();
            Ok(spawn(tasks, move |task| {
                Box::pin(confirm_delete(task, filename))
            }))
        }
        ("multi_input", true) => Ok(spawn(tasks, |task| Box::pin(multi_input(task)))),
        ("test_tool_with_task", true) => greet_in_task(tasks, &request),
        (other, true) => Err(ErrorData::internal_error(
            format!("`{other}` is not a task fixture"),
            None,
        )),
    }
}

/// Starts `work` as a task; the answer is the task, which `tasks/get`
/// finds from now on.
fn spawn(
    tasks: &TaskManager,
    work: impl FnOnce(TaskContext) -> rmcp::task_manager::TaskFuture,
) -> CallToolResponse {
    CallToolResponse::Task(CreateTaskResult::new(
        tasks.spawn(TaskOptions::default(), work),
    ))
}

fn protocol_error() -> ErrorData {
    ErrorData::internal_error(
        "protocol_error_job failed inside the server, on purpose",
        None,
    )
}

/// One `slow_compute`: how long, and the label to answer with.
struct Compute {
    seconds: Duration,
    label: String,
}

fn compute(arguments: &serde_json::Map<String, Value>) -> Compute {
    let seconds = arguments
        .get("seconds")
        .and_then(Value::as_f64)
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .unwrap_or(1.0);
    Compute {
        seconds: Duration::from_secs_f64(seconds).min(LONGEST_COMPUTE),
        label: arguments
            .get("label")
            .and_then(Value::as_str)
            .unwrap_or("slow_compute")
            .to_owned(),
    }
}

impl Compute {
    async fn sleep(self) -> CallToolResult {
        tokio::time::sleep(self.seconds).await;
        text(format!(
            "{}: computed after {:.1}s",
            self.label,
            self.seconds.as_secs_f64()
        ))
    }

    /// As a task: `tasks/cancel` ends it as `cancelled`.
    async fn run(self, task: TaskContext) -> Result<CallToolResult, TaskExit> {
        tokio::select! {
            result = self.sleep() => Ok(result),
            () = task.cancelled() => Err(TaskExit::Cancelled),
        }
    }
}

/// Asks (the task goes `input_required`) and ends when answered.
async fn confirm_delete(task: TaskContext, filename: String) -> Result<CallToolResult, TaskExit> {
    let question = ask_field(&format!("Delete {filename}?"), "confirm", "boolean")?;
    let answer = task.request_input("confirm", question).await?;
    let confirmed = matches!(
        elicited("confirm", &answer)?,
        Elicited::Accepted(content) if content.get("confirm") == Some(&Value::Bool(true))
    );
    Ok(text(if confirmed {
        format!("Deleted {filename} (not really: a conformance fixture)")
    } else {
        format!("Kept {filename}")
    }))
}

/// Two questions at once; the task stays `input_required` until both are
/// answered, in any order.
async fn multi_input(task: TaskContext) -> Result<CallToolResult, TaskExit> {
    let first = task.request_input("first", ask_field("First name?", "name", "string")?);
    let second = task.request_input("second", ask_field("Second name?", "name", "string")?);
    let (first, second) = tokio::try_join!(first, second)?;
    let name = |key: &str, answer: &Value| -> Result<String, TaskExit> {
        Ok(match elicited(key, answer)? {
            Elicited::Accepted(content) => content
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned(),
            Elicited::Refused(action) => action,
        })
    };
    Ok(text(format!(
        "Received {} and {}",
        name("first", &first)?,
        name("second", &second)?
    )))
}

/// SEP-2663 with SEP-2322: the first round asks a name
/// (`InputRequiredResult`, no task yet); the round that brings it starts
/// the task, whose result greets that name.
fn greet_in_task(
    tasks: &TaskManager,
    request: &CallToolRequestParams,
) -> Result<CallToolResponse, ErrorData> {
    let answers = request.input_responses.clone().unwrap_or_default();
    let Some(answer) = answers.get("user_name") else {
        let question = ask_field("What is your name?", "name", "string")?;
        return Ok(input_required(vec![("user_name", question)], None).into());
    };
    let name = match elicited("user_name", answer)? {
        Elicited::Accepted(content) => content
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("friend")
            .to_owned(),
        Elicited::Refused(_) => "friend".to_owned(),
    };
    Ok(spawn(tasks, move |_| {
        Box::pin(async move { Ok(text(format!("Hello, {name}! (from a task)"))) })
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly by design.

    use rmcp::model::TaskStatus;
    use serde_json::json;

    use super::*;

    async fn settle(tasks: &TaskManager, id: &str, wanted: TaskStatus) -> Value {
        for _ in 0..200 {
            let task = tasks.get_task(id).unwrap();
            if task.status() == wanted {
                return serde_json::to_value(task).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("task {id} never reached {wanted:?}");
    }

    #[tokio::test]
    async fn multi_input_waits_for_both_answers() {
        let tasks = TaskManager::new();
        let task = tasks.spawn(TaskOptions::default(), |task| Box::pin(multi_input(task)));
        let waiting = settle(&tasks, &task.task_id, TaskStatus::InputRequired).await;
        assert!(waiting["inputRequests"]["first"].is_object(), "{waiting}");
        // Both questions are asked at once.
        for _ in 0..200 {
            if tasks
                .get_task(&task.task_id)
                .map(|t| {
                    serde_json::to_value(t).unwrap()["inputRequests"]
                        .as_object()
                        .map_or(0, |m| m.len())
                })
                .unwrap()
                == 2
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let answer = |name: &str| json!({"action": "accept", "content": {"name": name}});
        tasks
            .update_task(&task.task_id, [("second".to_owned(), answer("B"))])
            .unwrap();
        let still = settle(&tasks, &task.task_id, TaskStatus::InputRequired).await;
        let pending: Vec<&String> = still["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(pending, ["first"]);
        tasks
            .update_task(&task.task_id, [("first".to_owned(), answer("A"))])
            .unwrap();
        let done = settle(&tasks, &task.task_id, TaskStatus::Completed).await;
        assert_eq!(done["result"]["content"][0]["text"], "Received A and B");
    }

    #[tokio::test]
    async fn a_cancelled_slow_compute_settles_as_cancelled() {
        let tasks = TaskManager::new();
        let work = compute(json!({"seconds": 60}).as_object().unwrap());
        let task = tasks.spawn(TaskOptions::default(), move |task| Box::pin(work.run(task)));
        tasks.cancel_task(&task.task_id).unwrap();
        settle(&tasks, &task.task_id, TaskStatus::Cancelled).await;
    }
}
