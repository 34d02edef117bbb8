//! Multi round-trip requests (SEP-2322, 2026-07-28): instead of asking the
//! client mid-call, a fixture answers `InputRequiredResult` with the
//! questions (`inputRequests`) and, when it has something to remember, a
//! `requestState`; the client asks again with `inputResponses` and the
//! state echoed back.
//!
//! The state travels through the client, so it is untrusted: it is sealed
//! with rmcp's [`RequestStateCodec`] (HMAC, bound to the tool's name, with
//! an expiry), and a state that does not open is a `-32602` error. Answers
//! are checked too: a malformed answer to a question we asked is `-32602`,
//! a missing one is asked again, an unknown key is ignored.

use std::io::Read;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, RequestStateCodec, SealOptions,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::session::sampled_text;
use super::wire::{text, wire};

/// How long a sealed state stays good: far longer than a suite run.
const STATE_TTL: Duration = Duration::from_secs(600);

/// Seals and opens the fixtures' `requestState`, with a key drawn at start
/// (states do not survive a restart, nor should they).
pub(super) struct StateSeal(RequestStateCodec);

/// What a fixture remembers between rounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Progress {
    /// The round the client is answering (1 for the first questions).
    pub(super) round: u8,
    /// The name given in an earlier round, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) name: Option<String>,
}

impl StateSeal {
    /// A seal with a fresh random key.
    pub(super) fn random() -> std::io::Result<StateSeal> {
        let mut key = [0u8; RequestStateCodec::MIN_KEY_LENGTH];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
        Ok(StateSeal::with_key(&key))
    }

    fn with_key(key: &[u8; RequestStateCodec::MIN_KEY_LENGTH]) -> StateSeal {
        StateSeal(RequestStateCodec::new_unchecked(key.to_vec()))
    }

    /// `progress` sealed for `tool` only.
    pub(super) fn seal(&self, tool: &str, progress: &Progress) -> Result<String, ErrorData> {
        let payload = serde_json::to_vec(progress)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        let options = SealOptions::new()
            .associated_data(tool.as_bytes())
            .ttl(STATE_TTL);
        Ok(self.0.seal_with(&payload, &options))
    }

    /// The progress sealed in `state` for `tool`; `-32602` when `state` was
    /// altered, expired, or sealed for another tool.
    pub(super) fn open(&self, tool: &str, state: &str) -> Result<Progress, ErrorData> {
        let refused = |reason: String| {
            ErrorData::invalid_params(
                format!(
                    "requestState failed its integrity check ({reason}); call `{tool}` again without it"
                ),
                None,
            )
        };
        let payload = self
            .0
            .open_with(state, tool.as_bytes())
            .map_err(|error| refused(error.to_string()))?;
        serde_json::from_slice(&payload).map_err(|error| refused(error.to_string()))
    }
}

/// An answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Elicited {
    /// The user accepted and filled in the form.
    Accepted(serde_json::Map<String, Value>),
    /// The user declined or cancelled.
    Refused(String),
}

/// `value` read as the answer to the elicitation asked under `key`.
pub(super) fn elicited(key: &str, value: &Value) -> Result<Elicited, ErrorData> {
    let malformed = || {
        ErrorData::invalid_params(
            format!("inputResponses.{key} is not an elicitation result (action and content)"),
            None,
        )
    };
    let action = value
        .get("action")
        .and_then(Value::as_str)
        .ok_or_else(malformed)?;
    match action {
        "accept" => match value.get("content") {
            Some(Value::Object(content)) => Ok(Elicited::Accepted(content.clone())),
            None => Ok(Elicited::Accepted(serde_json::Map::new())),
            Some(_) => Err(malformed()),
        },
        "decline" | "cancel" => Ok(Elicited::Refused(action.to_owned())),
        _ => Err(malformed()),
    }
}

/// The string field `field` of an accepted elicitation, or why there is none.
fn elicited_text(key: &str, value: &Value, field: &str) -> Result<String, ErrorData> {
    Ok(match elicited(key, value)? {
        Elicited::Accepted(content) => content
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned(),
        Elicited::Refused(action) => format!("({action}d)"),
    })
}

/// The number of roots in a `roots/list` answer.
fn roots_count(key: &str, value: &Value) -> Result<usize, ErrorData> {
    value
        .get("roots")
        .and_then(Value::as_array)
        .map(Vec::len)
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!("inputResponses.{key} is not a roots/list result (no roots array)"),
                None,
            )
        })
}

/// An `elicitation/create` question for one string (or boolean) field.
pub(super) fn ask_field(message: &str, field: &str, kind: &str) -> Result<InputRequest, ErrorData> {
    wire(json!({
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {field: {"type": kind}},
                "required": [field],
            },
        },
    }))
}

fn ask_model(prompt: &str, max_tokens: u32) -> Result<InputRequest, ErrorData> {
    wire(json!({
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens,
        },
    }))
}

fn ask_roots() -> Result<InputRequest, ErrorData> {
    wire(json!({"method": "roots/list", "params": {}}))
}

/// An `InputRequiredResult` asking `questions`, with `state` when given.
pub(super) fn input_required(
    questions: Vec<(&str, InputRequest)>,
    state: Option<String>,
) -> InputRequiredResult {
    let requests: InputRequests = questions
        .into_iter()
        .map(|(key, question)| (key.to_owned(), question))
        .collect();
    InputRequiredResult::new(Some(requests), state)
}

/// One call of a multi round-trip fixture: what it received.
struct Round<'a> {
    tool: &'a str,
    answers: InputResponses,
    state: Option<String>,
    seal: &'a StateSeal,
}

impl Round<'_> {
    fn answer(&self, key: &str) -> Option<&Value> {
        self.answers.get(key)
    }

    /// The progress in the echoed state, if the client echoed one.
    fn progress(&self) -> Result<Option<Progress>, ErrorData> {
        self.state
            .as_deref()
            .map(|state| self.seal.open(self.tool, state))
            .transpose()
    }

    fn sealed(&self, progress: &Progress) -> Result<Option<String>, ErrorData> {
        self.seal.seal(self.tool, progress).map(Some)
    }
}

/// Serves one call of a [`super::tools::Serves::InputRequired`] fixture.
pub(super) fn call(
    seal: &StateSeal,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let round = Round {
        tool: request.name.as_ref(),
        answers: request.input_responses.clone().unwrap_or_default(),
        state: request.request_state.clone(),
        seal,
    };
    let declared = context.client_capabilities().unwrap_or_default();
    let can_elicit = declared.elicitation.is_some();
    #[allow(deprecated)] // Sampling is one of the things this fixture asks for.
    let can_sample = declared.sampling.is_some();
    match round.tool {
        "test_input_required_result_elicitation" => ask_name(&round),
        "test_input_required_result_sampling" => ask_capital(&round),
        "test_input_required_result_list_roots" => ask_roots_once(&round),
        "test_input_required_result_request_state" => confirm_with_state(&round),
        "test_input_required_result_tampered_state" => confirm_with_state(&round),
        "test_input_required_result_multiple_inputs" => ask_three(&round),
        "test_input_required_result_multi_round" => ask_twice(&round),
        "test_input_required_result_capabilities" => {
            ask_what_client_can(&round, can_elicit, can_sample)
        }
        other => Err(ErrorData::internal_error(
            format!("`{other}` is not an input-required fixture"),
            None,
        )),
    }
}

fn ask_name(round: &Round<'_>) -> Result<CallToolResponse, ErrorData> {
    match round.answer("user_name") {
        Some(answer) => {
            let name = elicited_text("user_name", answer, "name")?;
            Ok(text(format!("Hello, {name}!")).into())
        }
        None => Ok(input_required(
            vec![(
                "user_name",
                ask_field("What is your name?", "name", "string")?,
            )],
            None,
        )
        .into()),
    }
}

fn ask_capital(round: &Round<'_>) -> Result<CallToolResponse, ErrorData> {
    match round.answer("capital_question") {
        Some(answer) => Ok(text(format!("Sampling result: {}", sampled_text(answer))).into()),
        None => Ok(input_required(
            vec![(
                "capital_question",
                ask_model("What is the capital of France?", 100)?,
            )],
            None,
        )
        .into()),
    }
}

fn ask_roots_once(round: &Round<'_>) -> Result<CallToolResponse, ErrorData> {
    match round.answer("client_roots") {
        Some(answer) => {
            let count = roots_count("client_roots", answer)?;
            Ok(text(format!("Found {count} root(s)")).into())
        }
        None => Ok(input_required(vec![("client_roots", ask_roots()?)], None).into()),
    }
}

/// Asks for a confirmation with a sealed state; completes only when both
/// come back, the state intact.
fn confirm_with_state(round: &Round<'_>) -> Result<CallToolResponse, ErrorData> {
    let progress = round.progress()?;
    if let (Some(_), Some(answer)) = (progress, round.answer("confirm")) {
        let confirmed = match elicited("confirm", answer)? {
            Elicited::Accepted(content) => content.get("ok") == Some(&Value::Bool(true)),
            Elicited::Refused(_) => false,
        };
        let verdict = if confirmed {
            "confirmed"
        } else {
            "not confirmed"
        };
        return Ok(text(format!("state-ok: requestState validated, {verdict}")).into());
    }
    let state = round.sealed(&Progress {
        round: 1,
        name: None,
    })?;
    Ok(input_required(
        vec![("confirm", ask_field("Please confirm", "ok", "boolean")?)],
        state,
    )
    .into())
}

fn ask_three(round: &Round<'_>) -> Result<CallToolResponse, ErrorData> {
    let progress = round.progress()?;
    if let (Some(_), Some(name), Some(greeting), Some(roots)) = (
        progress,
        round.answer("user_name"),
        round.answer("greeting"),
        round.answer("client_roots"),
    ) {
        let name = elicited_text("user_name", name, "name")?;
        let count = roots_count("client_roots", roots)?;
        let greeting = sampled_text(greeting);
        return Ok(text(format!(
            "Name: {name}; Greeting: {greeting}; Roots: {count}"
        ))
        .into());
    }
    let state = round.sealed(&Progress {
        round: 1,
        name: None,
    })?;
    Ok(input_required(
        vec![
            (
                "user_name",
                ask_field("What is your name?", "name", "string")?,
            ),
            ("greeting", ask_model("Generate a greeting", 50)?),
            ("client_roots", ask_roots()?),
        ],
        state,
    )
    .into())
}

/// Round 1 asks a name, round 2 a colour (the name rides in the state),
/// then the answer uses both.
fn ask_twice(round: &Round<'_>) -> Result<CallToolResponse, ErrorData> {
    let first = || -> Result<CallToolResponse, ErrorData> {
        let state = round.sealed(&Progress {
            round: 1,
            name: None,
        })?;
        Ok(input_required(
            vec![(
                "step1",
                ask_field("Step 1: What is your name?", "name", "string")?,
            )],
            state,
        )
        .into())
    };
    let second = |name: String| -> Result<CallToolResponse, ErrorData> {
        let state = round.sealed(&Progress {
            round: 2,
            name: Some(name),
        })?;
        Ok(input_required(
            vec![(
                "step2",
                ask_field("Step 2: What is your favorite color?", "color", "string")?,
            )],
            state,
        )
        .into())
    };
    match round.progress()? {
        None => first(),
        Some(Progress { round: 1, .. }) => match round.answer("step1") {
            Some(answer) => second(elicited_text("step1", answer, "name")?),
            None => first(),
        },
        Some(Progress {
            round: 2,
            name: Some(name),
        }) => match round.answer("step2") {
            Some(answer) => {
                let color = elicited_text("step2", answer, "color")?;
                Ok(text(format!("Multi-round complete for {name} who likes {color}")).into())
            }
            None => second(name),
        },
        Some(_) => first(),
    }
}

/// Asks only what the request's declared capabilities let the client
/// answer (SEP-2322: no elicitation for a client without elicitation).
fn ask_what_client_can(
    round: &Round<'_>,
    can_elicit: bool,
    can_sample: bool,
) -> Result<CallToolResponse, ErrorData> {
    if !round.answers.is_empty() {
        round.progress()?;
        let keys: Vec<&str> = round.answers.keys().map(String::as_str).collect();
        return Ok(text(format!("capabilities-ok: received {}", keys.join(","))).into());
    }
    let mut questions = Vec::new();
    if can_elicit {
        questions.push((
            "elicit_input",
            ask_field("Elicitation input", "value", "string")?,
        ));
    }
    if can_sample {
        questions.push(("sample_input", ask_model("Sample request", 50)?));
    }
    if questions.is_empty() {
        return Ok(text("No supported capabilities declared").into());
    }
    let state = round.sealed(&Progress {
        round: 1,
        name: None,
    })?;
    Ok(input_required(questions, state).into())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly by design.

    use super::*;

    fn seal() -> StateSeal {
        StateSeal::with_key(&[7; RequestStateCodec::MIN_KEY_LENGTH])
    }

    fn round<'a>(
        seal: &'a StateSeal,
        tool: &'a str,
        answers: Value,
        state: Option<String>,
    ) -> Round<'a> {
        Round {
            tool,
            answers: serde_json::from_value(answers).unwrap(),
            state,
            seal,
        }
    }

    fn result(response: CallToolResponse) -> Value {
        match response {
            CallToolResponse::Complete(result) => serde_json::to_value(result).unwrap(),
            CallToolResponse::InputRequired(result) => serde_json::to_value(result).unwrap(),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_sealed_state_opens_for_its_tool_only_and_not_once_altered() {
        let seal = seal();
        let progress = Progress {
            round: 2,
            name: Some("Alice".into()),
        };
        let sealed = seal.seal("multi", &progress).unwrap();
        assert_eq!(seal.open("multi", &sealed).unwrap(), progress);
        assert!(seal.open("other", &sealed).is_err());
        let error = seal
            .open("multi", &format!("{sealed}-TAMPERED"))
            .unwrap_err();
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        let other_key = StateSeal::with_key(&[8; RequestStateCodec::MIN_KEY_LENGTH]);
        assert!(other_key.open("multi", &sealed).is_err());
    }

    #[test]
    fn the_elicitation_fixture_asks_then_greets_and_ignores_extra_keys() {
        let seal = seal();
        let first = result(ask_name(&round(&seal, "t", json!({}), None)).unwrap());
        assert_eq!(first["resultType"], "input_required");
        assert_eq!(
            first["inputRequests"]["user_name"]["method"],
            "elicitation/create"
        );

        let answers = json!({
            "user_name": {"action": "accept", "content": {"name": "Alice"}},
            "unknown_extra_key": {"action": "accept", "content": {"foo": "bar"}},
        });
        let done = result(ask_name(&round(&seal, "t", answers, None)).unwrap());
        assert_eq!(done["content"][0]["text"], "Hello, Alice!");

        // A wrong key is asked again; a malformed answer is refused.
        let again = result(ask_name(&round(&seal, "t", json!({"wrong_key": {}}), None)).unwrap());
        assert_eq!(again["resultType"], "input_required");
        let error = ask_name(&round(&seal, "t", json!({"user_name": 12345}), None)).unwrap_err();
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn the_multi_round_fixture_carries_the_name_through_its_state() {
        let seal = seal();
        let tool = "test_input_required_result_multi_round";
        let first = result(ask_twice(&round(&seal, tool, json!({}), None)).unwrap());
        let state = first["requestState"].as_str().unwrap().to_owned();
        let answers = json!({"step1": {"action": "accept", "content": {"name": "Bob"}}});
        let second = result(ask_twice(&round(&seal, tool, answers, Some(state))).unwrap());
        assert!(second["inputRequests"]["step2"].is_object(), "{second}");
        let state = second["requestState"].as_str().unwrap().to_owned();
        let answers = json!({"step2": {"action": "accept", "content": {"color": "green"}}});
        let done = result(ask_twice(&round(&seal, tool, answers, Some(state))).unwrap());
        assert_eq!(
            done["content"][0]["text"],
            "Multi-round complete for Bob who likes green"
        );
    }

    #[test]
    fn a_tampered_state_is_an_error_not_a_result() {
        let seal = seal();
        let tool = "test_input_required_result_tampered_state";
        let first = result(confirm_with_state(&round(&seal, tool, json!({}), None)).unwrap());
        let tampered = format!("{}-TAMPERED", first["requestState"].as_str().unwrap());
        let answers = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
        assert!(confirm_with_state(&round(&seal, tool, answers.clone(), Some(tampered))).is_err());
        let state = first["requestState"].as_str().unwrap().to_owned();
        let done = result(confirm_with_state(&round(&seal, tool, answers, Some(state))).unwrap());
        assert!(
            done["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("state-ok")
        );
    }

    #[test]
    fn only_declared_capabilities_are_asked_for() {
        let seal = seal();
        let tool = "test_input_required_result_capabilities";
        let sampling_only =
            result(ask_what_client_can(&round(&seal, tool, json!({}), None), false, true).unwrap());
        let keys: Vec<&String> = sampling_only["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["sample_input"]);
        let nothing = result(
            ask_what_client_can(&round(&seal, tool, json!({}), None), false, false).unwrap(),
        );
        assert_eq!(
            nothing["content"][0]["text"],
            "No supported capabilities declared"
        );
    }
}
