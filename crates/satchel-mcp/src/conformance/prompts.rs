//! Fixture prompts, their completions, and `test_trigger_prompt_change`,
//! which adds or removes a prompt and tells listeners:
//! `notifications/prompts/list_changed` to the peer of an `initialize`
//! session and on `subscriptions/listen` streams that asked for it.
//! Satchel itself has no prompts: they exist for the suite only.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, CompleteRequestParams, CompleteResult, CompletionInfo,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Prompt, PromptArgument,
    PromptMessage, Reference, Role,
};
use rmcp::service::{Peer, RoleServer, SubscriptionSink};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::input_required::{Elicited, ask_field, elicited, input_required};
use super::wire::{text, wire};

/// The prompt that comes and goes.
const DYNAMIC_PROMPT: &str = "test_dynamic_prompt";

/// How often a session's prompt notifier checks its client is still there.
const PEER_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// The prompt list's one variable part, and who hears of its changes.
pub(super) struct PromptBoard {
    dynamic_present: AtomicBool,
    /// Bumped at each change.
    changes: watch::Sender<u64>,
    /// The change count when the latest `subscriptions/listen` was
    /// accepted. rmcp acknowledges a subscription before it runs
    /// [`super::ConformanceServer::listen`], and a client may change the
    /// list as soon as it has the acknowledgement: a change made in between
    /// is still this subscription's to hear.
    count_at_accept: AtomicU64,
}

impl Default for PromptBoard {
    fn default() -> PromptBoard {
        PromptBoard {
            dynamic_present: AtomicBool::new(false),
            changes: watch::Sender::new(0),
            count_at_accept: AtomicU64::new(0),
        }
    }
}

/// A background task that ends when this is dropped.
pub(super) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn argument(name: &str, description: &str) -> PromptArgument {
    PromptArgument::new(name)
        .with_description(description)
        .with_required(true)
}

/// The fixed prompts, as `prompts/list` shows them.
fn fixed() -> Vec<Prompt> {
    vec![
        Prompt::new(
            "test_simple_prompt",
            Some("A prompt without arguments"),
            None,
        )
        .with_title("Simple Test Prompt"),
        Prompt::new(
            "test_prompt_with_arguments",
            Some("A prompt with required arguments"),
            Some(vec![
                argument("arg1", "First test argument"),
                argument("arg2", "Second test argument"),
            ]),
        )
        .with_title("Prompt With Arguments"),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            Some("A prompt that includes an embedded resource"),
            Some(vec![argument(
                "resourceUri",
                "URI of the resource to embed",
            )]),
        )
        .with_title("Prompt With Embedded Resource"),
        Prompt::new(
            "test_prompt_with_image",
            Some("A prompt that includes image content"),
            None,
        )
        .with_title("Prompt With Image"),
        Prompt::new(
            "test_input_required_result_prompt",
            Some("Asks for context through InputRequiredResult before answering (SEP-2322)"),
            None,
        ),
    ]
}

impl PromptBoard {
    /// The prompts as `prompts/list` shows them now.
    pub(super) fn specs(&self) -> Vec<Prompt> {
        let mut prompts = fixed();
        if self.dynamic_present.load(Ordering::SeqCst) {
            prompts.push(Prompt::new(
                DYNAMIC_PROMPT,
                Some("Added by test_trigger_prompt_change"),
                None,
            ));
        }
        prompts
    }

    /// Whether `name` is one of these prompts now.
    pub(super) fn serves(&self, name: &str) -> bool {
        self.specs().iter().any(|prompt| prompt.name == name)
    }

    /// Adds the dynamic prompt when absent, removes it when present, and
    /// tells listeners.
    pub(super) fn flip(&self) -> CallToolResponse {
        let now_present = !self.dynamic_present.fetch_xor(true, Ordering::SeqCst);
        self.changes.send_modify(|generation| *generation += 1);
        let what = if now_present { "added" } else { "removed" };
        text(format!("Mutation triggered: {DYNAMIC_PROMPT} {what}")).into()
    }

    /// Notes that a `subscriptions/listen` request is being accepted.
    pub(super) fn note_accepted(&self) {
        self.count_at_accept
            .store(*self.changes.borrow(), Ordering::SeqCst);
    }

    /// Whether the list changed since the latest subscription was accepted,
    /// `now` being the change count as its stream starts. A later accepted
    /// subscription can only raise the mark, so this never reports a change
    /// the stream's client could have seen before it subscribed.
    fn changed_since_accept(&self, now: u64) -> bool {
        self.count_at_accept.load(Ordering::SeqCst) < now
    }

    /// Sends each change since the subscription was accepted on its
    /// `subscriptions/listen` stream, until the stream closes or the
    /// returned guard is dropped.
    pub(super) fn forward_to(&self, sink: SubscriptionSink) -> AbortOnDrop {
        let mut changes = self.changes.subscribe();
        let missed = self.changed_since_accept(*changes.borrow_and_update());
        AbortOnDrop(tokio::spawn(async move {
            if missed && sink.notify_prompt_list_changed().await.is_err() {
                return;
            }
            while changes.changed().await.is_ok() {
                if sink.notify_prompt_list_changed().await.is_err() {
                    return;
                }
            }
        }))
    }

    /// Tells the peer of an `initialize` session of each later change,
    /// until its client goes away.
    pub(super) fn notify_peer(&self, peer: Peer<RoleServer>) {
        let mut changes = self.changes.subscribe();
        changes.mark_unchanged();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() || peer.notify_prompt_list_changed().await.is_err() {
                            return;
                        }
                    }
                    () = tokio::time::sleep(PEER_CHECK_INTERVAL) => {
                        if peer.is_transport_closed() {
                            return;
                        }
                    }
                }
            }
        });
    }
}

/// `prompts/get` for a fixture prompt.
pub(super) fn get(request: &GetPromptRequestParams) -> Result<GetPromptResponse, ErrorData> {
    let arguments = request.arguments.clone().unwrap_or_default();
    let required = |name: &str| {
        arguments
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("prompt `{}` needs the argument `{name}`", request.name),
                    None,
                )
            })
    };
    let messages = match request.name.as_str() {
        "test_simple_prompt" => vec![user_text("This is a simple prompt for testing.")],
        "test_prompt_with_arguments" => {
            let (first, second) = (required("arg1")?, required("arg2")?);
            vec![user_text(&format!(
                "Prompt with arguments: arg1='{first}', arg2='{second}'"
            ))]
        }
        "test_prompt_with_embedded_resource" => {
            let uri = required("resourceUri")?;
            vec![
                wire(json!({
                    "role": "user",
                    "content": {
                        "type": "resource",
                        "resource": {
                            "uri": uri,
                            "mimeType": "text/plain",
                            "text": "Embedded resource content for testing.",
                        },
                    },
                }))?,
                user_text("Please process the embedded resource above."),
            ]
        }
        "test_prompt_with_image" => vec![
            wire(json!({
                "role": "user",
                "content": {"type": "image", "data": super::content::PNG_BASE64, "mimeType": "image/png"},
            }))?,
            user_text("Please analyze the image above."),
        ],
        "test_input_required_result_prompt" => return prompt_with_context(request),
        DYNAMIC_PROMPT => vec![user_text(
            "This prompt was added by test_trigger_prompt_change.",
        )],
        other => {
            return Err(ErrorData::invalid_params(
                format!("no prompt named `{other}`"),
                None,
            ));
        }
    };
    Ok(GetPromptResult::new(messages).into())
}

fn user_text(text: &str) -> PromptMessage {
    PromptMessage::new_text(Role::User, text)
}

/// SEP-2322 on `prompts/get`: asks for context first, then uses it.
fn prompt_with_context(request: &GetPromptRequestParams) -> Result<GetPromptResponse, ErrorData> {
    let answers = request.input_responses.clone().unwrap_or_default();
    let Some(answer) = answers.get("user_context") else {
        let question = ask_field("What context should the prompt use?", "context", "string")?;
        return Ok(input_required(vec![("user_context", question)], None).into());
    };
    let context = match elicited("user_context", answer)? {
        Elicited::Accepted(content) => content
            .get("context")
            .and_then(Value::as_str)
            .unwrap_or("none")
            .to_owned(),
        Elicited::Refused(action) => format!("none ({action}d)"),
    };
    Ok(GetPromptResult::new(vec![user_text(&format!("Prompt with context: {context}"))]).into())
}

/// Values `completion/complete` offers for each fixture argument.
fn candidates(reference: &Reference, argument: &str) -> &'static [&'static str] {
    match (reference, argument) {
        (Reference::Prompt(prompt), "arg1" | "arg2")
            if prompt.name == "test_prompt_with_arguments" =>
        {
            &["test", "testing", "tested", "value"]
        }
        (Reference::Prompt(prompt), "resourceUri")
            if prompt.name == "test_prompt_with_embedded_resource" =>
        {
            &[
                "test://static-text",
                "test://static-binary",
                "test://watched-resource",
            ]
        }
        (Reference::Resource(template), "id") if template.uri == super::resources::TEMPLATE => {
            &["1", "2", "42"]
        }
        _ => &[],
    }
}

/// `completion/complete`: the candidates that start with what was typed.
pub(super) fn complete(request: &CompleteRequestParams) -> CompleteResult {
    let typed = request.argument.value.as_str();
    let values: Vec<String> = candidates(&request.r#ref, &request.argument.name)
        .iter()
        .filter(|value| value.starts_with(typed))
        .map(|value| (*value).to_owned())
        .collect();
    // Never more than the few candidates above, under the spec's limit.
    let completion = CompletionInfo::with_all_values(values).unwrap_or_default();
    CompleteResult::new(completion)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly by design.

    use super::*;

    fn complete_for(request: Value) -> Value {
        let request: CompleteRequestParams = serde_json::from_value(request).unwrap();
        serde_json::to_value(complete(&request)).unwrap()
    }

    #[test]
    fn completion_offers_matching_candidates_and_nothing_for_unknown_arguments() {
        let prompt = json!({
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "test"},
        });
        assert_eq!(
            complete_for(prompt)["completion"]["values"],
            json!(["test", "testing", "tested"])
        );
        let unknown = json!({
            "ref": {"type": "ref/prompt", "name": "nope"},
            "argument": {"name": "arg1", "value": ""},
        });
        assert_eq!(complete_for(unknown)["completion"]["values"], json!([]));
    }

    #[test]
    fn the_prompt_change_hook_adds_then_removes_the_dynamic_prompt() {
        let board = PromptBoard::default();
        let mut changes = board.changes.subscribe();
        assert!(!board.serves(DYNAMIC_PROMPT));
        board.flip();
        assert!(board.serves(DYNAMIC_PROMPT));
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        board.flip();
        assert!(!board.serves(DYNAMIC_PROMPT));
        assert!(changes.has_changed().unwrap());
    }

    #[test]
    fn a_change_between_acceptance_and_listening_is_not_lost() {
        let board = PromptBoard::default();
        board.note_accepted();
        assert!(!board.changed_since_accept(*board.changes.borrow()));
        board.flip();
        assert!(board.changed_since_accept(*board.changes.borrow()));
        // A subscription accepted after the change does not hear of it.
        board.note_accepted();
        assert!(!board.changed_since_accept(*board.changes.borrow()));
    }

    #[test]
    fn every_fixture_prompt_answers_with_its_arguments() {
        for prompt in fixed() {
            let arguments: serde_json::Map<String, Value> = prompt
                .arguments
                .iter()
                .flatten()
                .map(|argument| (argument.name.clone(), json!("x")))
                .collect();
            let mut request = GetPromptRequestParams::new(prompt.name.clone());
            request.arguments = Some(arguments);
            assert!(get(&request).is_ok(), "{}", prompt.name);
        }
        let missing = GetPromptRequestParams::new("test_prompt_with_arguments");
        assert!(get(&missing).is_err());
    }
}
