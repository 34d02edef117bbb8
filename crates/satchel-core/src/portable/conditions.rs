//! Conditions (`if`/`then`/`else`) in words: folded into descriptions for
//! the consumers that would drop them, and named in validation errors.
//!
//! The common shape, an action-based tool's "this field is required when
//! `action` is `store`", becomes exactly that sentence on the field. Any
//! other condition is written out as its JSON on the input's description,
//! so nothing the model should know is lost.

use serde_json::{Map, Value};

use super::notes::Notes;
use super::quoted;

/// One `if`/`then`/`else` taken out of a schema.
pub(super) struct Condition {
    when: Value,
    then: Option<Value>,
    otherwise: Option<Value>,
}

/// Removes and returns the schema's own `if`/`then`/`else`, if it has an `if`.
pub(super) fn take_condition(schema: &mut Map<String, Value>) -> Option<Condition> {
    let when = schema.remove("if");
    let then = schema.remove("then");
    let otherwise = schema.remove("else");
    Some(Condition {
        when: when?,
        then,
        otherwise,
    })
}

/// Folds the root's own condition and `not` into `notes`.
pub(super) fn fold_root(root: &mut Map<String, Value>, notes: &mut Notes) {
    if let Some(condition) = take_condition(root) {
        fold(&condition, notes);
    }
    if let Some(not) = root.remove("not") {
        notes.root(format!("The input must not match {not}."));
    }
}

/// The subject of a simple `if`: one property fixed to one or more values.
struct Subject {
    property: String,
    values: Vec<Value>,
}

impl Subject {
    fn of(when: &Value) -> Option<Subject> {
        let map = when.as_object()?;
        if map
            .keys()
            .any(|key| !matches!(key.as_str(), "properties" | "required" | "type"))
        {
            return None;
        }
        let properties = map.get("properties")?.as_object()?;
        let [(property, schema)] = properties.iter().collect::<Vec<_>>()[..] else {
            return None;
        };
        let schema = schema.as_object()?;
        if schema
            .keys()
            .any(|key| !matches!(key.as_str(), "const" | "enum" | "type"))
        {
            return None;
        }
        let values = match (schema.get("const"), schema.get("enum")) {
            (Some(value), None) => vec![value.clone()],
            (None, Some(Value::Array(values))) if !values.is_empty() => values.clone(),
            _ => return None,
        };
        Some(Subject {
            property: property.clone(),
            values,
        })
    }

    /// "`action` is `store`", "`action` is `store` or `recall`".
    fn words(&self) -> String {
        let values: Vec<String> = self.values.iter().map(quoted).collect();
        format!("`{}` is {}", self.property, values.join(" or "))
    }
}

/// The names a `then`/`else` requires, when requiring is all it does.
fn only_required(schema: &Value) -> Option<Vec<String>> {
    let map = schema.as_object()?;
    if map
        .keys()
        .any(|key| !matches!(key.as_str(), "required" | "description"))
    {
        return None;
    }
    Some(
        map.get("required")?
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
    )
}

/// Folds one condition (and an `else` chain under it) into `notes`.
pub(super) fn fold(condition: &Condition, notes: &mut Notes) {
    let Some(subject) = Subject::of(&condition.when) else {
        notes.root(generic(condition));
        return;
    };
    let words = subject.words();
    match condition
        .then
        .as_ref()
        .map(|then| (then, only_required(then)))
    {
        None => {}
        Some((_, Some(names))) => {
            for name in names {
                notes.property(&name, format!("Required when {words}."));
            }
        }
        Some((then, None)) => {
            notes.root(format!("When {words}, the input must also match {then}."));
        }
    }
    let Some(otherwise) = &condition.otherwise else {
        return;
    };
    // An `else` that is another condition: an if/else-if chain.
    if let Some(mut chained) = otherwise.as_object().cloned()
        && let Some(next) = take_condition(&mut chained)
        && chained.is_empty()
    {
        fold(&next, notes);
        return;
    }
    match only_required(otherwise) {
        Some(names) => {
            for name in names {
                notes.property(&name, format!("Required unless {words}."));
            }
        }
        None => notes.root(format!("Unless {words}, the input must match {otherwise}.")),
    }
}

fn generic(condition: &Condition) -> String {
    let mut text = format!("When the input matches {}", condition.when);
    if let Some(then) = &condition.then {
        text.push_str(&format!(", it must also match {then}"));
    }
    if let Some(otherwise) = &condition.otherwise {
        text.push_str(&format!("; otherwise it must match {otherwise}"));
    }
    text.push('.');
    text
}

/// The condition under which the keyword at `schema_path` (a JSON Pointer
/// into `schema`, as a validator reports it) applies, in words: "when
/// `action` is `store`" for a path through a `then`, "unless `action` is
/// `store`" through an `else`. `None` when the path passes no condition of
/// the simple kind.
pub fn condition_at(schema: &Value, schema_path: &str) -> Option<String> {
    let segments: Vec<&str> = schema_path.split('/').skip(1).collect();
    let position = segments
        .iter()
        .rposition(|segment| matches!(*segment, "then" | "else"))?;
    let parent = segments[..position]
        .iter()
        .map(|segment| format!("/{segment}"))
        .collect::<String>();
    let when = schema.pointer(&format!("{parent}/if"))?;
    let subject = Subject::of(when)?;
    let lead = if segments[position] == "then" {
        "when"
    } else {
        "unless"
    };
    Some(format!("{lead} {}", subject.words()))
}
