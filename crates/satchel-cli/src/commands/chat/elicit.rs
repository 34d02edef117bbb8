//! A server's question at the REPL's prompt (`elicitation/create`): its
//! message, then one line per value it asks for (typed as its schema says,
//! the default offered), then send, decline or cancel. Ctrl-C cancels.
//! A server's sampling request: what it asks the model, then yes or no.

use async_trait::async_trait;
use rustyline::error::ReadlineError;
use satchel_host::sampling::SamplingConsent;
use satchel_mcp::client::{ElicitationAsker, Elicited, Question, SampleRequest};
use serde_json::{Map, Value};

use super::LineEditor;
use super::screen::SharedScreen;

/// Asks at the terminal, one question at a time.
pub(crate) struct TerminalAsker {
    editor: LineEditor,
    screen: SharedScreen,
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl TerminalAsker {
    pub(crate) fn new(editor: LineEditor, screen: SharedScreen) -> TerminalAsker {
        TerminalAsker {
            editor,
            screen,
            one_at_a_time: tokio::sync::Mutex::new(()),
        }
    }

    /// One line from the user; `None` on Ctrl-C or Ctrl-D.
    async fn line(&self, prompt: String) -> Option<String> {
        let editor = self.editor.clone();
        let read = tokio::task::spawn_blocking(move || {
            editor
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .readline(&prompt)
        })
        .await;
        match read {
            Ok(Ok(line)) => Some(line),
            Ok(Err(ReadlineError::Interrupted | ReadlineError::Eof)) | Ok(Err(_)) | Err(_) => None,
        }
    }

    async fn ask_values(&self, schema: &Value) -> Option<Map<String, Value>> {
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut values = Map::new();
        let Some(properties) = schema["properties"].as_object() else {
            return Some(values);
        };
        for (name, field) in properties {
            let must = required.contains(&name.as_str());
            loop {
                let line = self.line(field_prompt(name, field, must)).await?;
                match parse_value(line.trim(), field) {
                    Ok(Some(value)) => {
                        values.insert(name.clone(), value);
                        break;
                    }
                    Ok(None) if !must => break,
                    Ok(None) => self.screen.lock().line("  a value is required"),
                    Err(problem) => self.screen.lock().line(&format!("  {problem}")),
                }
            }
        }
        Some(values)
    }
}

/// A server's text as it may reach the terminal: control characters (an
/// escape sequence could rewrite the lines around the question) shown as
/// `?`, line breaks kept.
pub(super) fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() && c != '\n' { '?' } else { c })
        .collect()
}

/// `  name (type; description) [default]: `
fn field_prompt(name: &str, field: &Value, required: bool) -> String {
    let kind = match field["enum"].as_array() {
        Some(options) => options
            .iter()
            .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join("|"),
        None => field["type"].as_str().unwrap_or("text").to_owned(),
    };
    let about = field["description"]
        .as_str()
        .or_else(|| field["title"].as_str())
        .map(|d| format!("; {d}"))
        .unwrap_or_default();
    let default = field
        .get("default")
        .map(|d| {
            format!(
                " [{}]",
                d.as_str().map_or_else(|| d.to_string(), str::to_owned)
            )
        })
        .unwrap_or_default();
    let optional = if required { "" } else { ", optional" };
    printable(&format!("  {name} ({kind}{optional}{about}){default}: ")).replace('\n', " ")
}

/// The typed value of an answer: `Ok(None)` for an empty line without a
/// default.
fn parse_value(text: &str, field: &Value) -> Result<Option<Value>, String> {
    if text.is_empty() {
        return Ok(field.get("default").cloned());
    }
    if let Some(options) = field["enum"].as_array() {
        return options
            .iter()
            .find(|o| o.as_str() == Some(text))
            .cloned()
            .map(Some)
            .ok_or_else(|| "choose one of the listed values".to_owned());
    }
    match field["type"].as_str() {
        Some("boolean") => match text.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Some(Value::Bool(true))),
            "n" | "no" | "false" => Ok(Some(Value::Bool(false))),
            _ => Err("answer yes or no".to_owned()),
        },
        Some("integer") => text
            .parse::<i64>()
            .map(|n| Some(Value::from(n)))
            .map_err(|_| "a whole number, please".to_owned()),
        Some("number") => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(|n| Some(Value::Number(n)))
            .ok_or_else(|| "a number, please".to_owned()),
        _ => Ok(Some(Value::String(text.to_owned()))),
    }
}

#[async_trait]
impl ElicitationAsker for TerminalAsker {
    async fn ask(&self, question: Question) -> Elicited {
        let _one = self.one_at_a_time.lock().await;
        self.screen.lock().pause();
        let mut intro = format!(
            "MCP server `{}` asks: {}",
            question.server,
            printable(&question.message)
        );
        if let Some(url) = &question.url {
            intro.push_str(&format!("\n  open: {}", printable(url).replace('\n', " ")));
        }
        self.screen.lock().line(&intro);
        let values = match &question.schema {
            Some(schema) => self.ask_values(schema).await,
            None => Some(Map::new()),
        };
        let answer = match values {
            None => Elicited::Cancel,
            Some(values) => match self
                .line("Send? [y] yes  [n] decline  [c] cancel: ".to_owned())
                .await
                .as_deref()
                .map(str::trim)
            {
                Some("y" | "Y" | "yes") => Elicited::Accept(Value::Object(values)),
                Some("n" | "N" | "no") => Elicited::Decline,
                _ => Elicited::Cancel,
            },
        };
        self.screen.lock().resume();
        answer
    }
}

/// A server's sampling request at the prompt: what it asks the model,
/// then whether the model may answer.
#[async_trait]
impl SamplingConsent for TerminalAsker {
    async fn agree(&self, request: &SampleRequest) -> bool {
        let _one = self.one_at_a_time.lock().await;
        self.screen.lock().pause();
        let mut intro = format!(
            "MCP server `{}` asks the model to answer (up to {} tokens):",
            request.server, request.max_tokens
        );
        if let Some(system) = &request.system_prompt {
            intro.push_str(&format!("\n  system: {}", printable(system)));
        }
        for message in &request.messages {
            intro.push_str(&format!(
                "\n  {}: {}",
                message.role,
                printable(&message.text)
            ));
        }
        self.screen.lock().line(&intro);
        let yes = matches!(
            self.line("Let the model answer? [y] yes  [n] no: ".to_owned())
                .await
                .as_deref()
                .map(str::trim),
            Some("y" | "Y" | "yes")
        );
        self.screen.lock().resume();
        yes
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn answers_are_typed_as_the_schema_says() {
        let number = json!({"type": "number"});
        assert_eq!(parse_value("2.5", &number), Ok(Some(json!(2.5))));
        assert!(parse_value("two", &number).is_err());
        let flag = json!({"type": "boolean", "default": false});
        assert_eq!(parse_value("yes", &flag), Ok(Some(json!(true))));
        assert_eq!(parse_value("", &flag), Ok(Some(json!(false))));
        let choice = json!({"type": "string", "enum": ["red", "blue"]});
        assert_eq!(parse_value("blue", &choice), Ok(Some(json!("blue"))));
        assert!(parse_value("green", &choice).is_err());
        assert_eq!(parse_value("", &json!({"type": "string"})), Ok(None));
        assert_eq!(field_prompt("color", &choice, true), "  color (red|blue): ");
        assert_eq!(printable("a\x1b[2Kb\r\nc"), "a?[2Kb?\nc");
    }
}
