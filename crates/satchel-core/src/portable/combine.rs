//! The root's combinators merged into one object schema: `$ref`, `allOf`,
//! `anyOf`/`oneOf`; what the merge loses is kept as words in [`Notes`].
//!
//! Merging is looser than the combinator (the promise of the module):
//! `allOf` takes the union of the branches' properties and requirements;
//! alternatives keep only what every branch requires, and the rest is
//! described.

use serde_json::{Map, Value, json};

use super::notes::Notes;
use super::{Unportable, conditions, quoted};

/// Resolves a local `$ref` (`#/$defs/Args`, `#/definitions/Args`) against
/// the document `defs`; `None` for a remote or broken one.
pub(super) fn resolve_ref<'a>(reference: &str, defs: &'a Value) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    defs.pointer(pointer)
}

/// A branch with its own local `$ref` followed (one level), as an object.
fn resolved(branch: &Value, defs: &Value) -> Option<Map<String, Value>> {
    let mut map = match branch {
        Value::Object(map) => map.clone(),
        Value::Bool(true) => Map::new(),
        _ => return None,
    };
    if let Some(Value::String(reference)) = map.remove("$ref") {
        match resolve_ref(&reference, defs) {
            Some(Value::Object(target)) => {
                for (key, value) in target {
                    map.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
            _ => {
                map.insert("$ref".into(), Value::String(reference));
            }
        }
    }
    Some(map)
}

/// A root that is only a `$ref` (some generators write `{"$ref":
/// "#/$defs/Args", "$defs": {...}}`) takes the referenced schema's keys.
pub(super) fn inline_root_ref(root: &mut Map<String, Value>, defs: &Value) {
    let Some(Value::String(reference)) = root.get("$ref").cloned() else {
        return;
    };
    if let Some(Value::Object(target)) = resolve_ref(&reference, defs) {
        root.remove("$ref");
        for (key, value) in target {
            root.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
}

/// Root `allOf`: every branch's properties and requirements joined into the
/// root; a branch's conditions and alternatives handled as if at the root.
pub(super) fn merge_all_of(root: &mut Map<String, Value>, defs: &Value, notes: &mut Notes) {
    let Some(Value::Array(branches)) = root.remove("allOf") else {
        return;
    };
    for branch in &branches {
        let Some(mut branch) = resolved(branch, defs) else {
            continue;
        };
        if branch.contains_key("allOf") {
            merge_all_of(&mut branch, defs, notes);
        }
        if let Some(condition) = conditions::take_condition(&mut branch) {
            conditions::fold(&condition, notes);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alternatives) = branch.remove(key) {
                let mut holder = Map::new();
                holder.insert(key.into(), alternatives);
                holder.insert("type".into(), json!("object"));
                // A branch's alternatives that cannot be merged are dropped:
                // looser, and the others still apply.
                let _ = merge_alternatives(&mut holder, defs, notes);
                join_properties(root, &holder, Join::Both);
                union_required(root, &holder);
                if let Some(Value::String(text)) = holder.get("description") {
                    notes.root(text.clone());
                }
            }
        }
        join_properties(root, &branch, Join::Both);
        union_required(root, &branch);
        for (key, value) in branch {
            if matches!(
                key.as_str(),
                "properties" | "required" | "additionalProperties"
            ) {
                continue;
            }
            root.entry(key).or_insert(value);
        }
    }
}

/// How two schemas of one property combine.
#[derive(Clone, Copy)]
enum Join {
    /// The value must match both (from `allOf`).
    Both,
    /// The value must match either (from alternatives).
    Either,
}

fn join_properties(root: &mut Map<String, Value>, branch: &Map<String, Value>, join: Join) {
    let Some(Value::Object(theirs)) = branch.get("properties") else {
        return;
    };
    let ours = root
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    let Some(ours) = ours else {
        return;
    };
    for (name, schema) in theirs {
        match ours.get_mut(name) {
            None => {
                ours.insert(name.clone(), schema.clone());
            }
            Some(existing) if existing == schema => {}
            Some(existing) => *existing = joined(existing, schema, join),
        }
    }
}

fn joined(a: &Value, b: &Value, join: Join) -> Value {
    if let Join::Either = join
        && let (Some(mut values), Some(more)) = (choices(a), choices(b))
    {
        for value in more {
            if !values.contains(&value) {
                values.push(value);
            }
        }
        let mut merged = Map::new();
        if let Some(kind) = a.get("type").filter(|kind| b.get("type") == Some(*kind)) {
            merged.insert("type".into(), kind.clone());
        }
        let described = a.get("description").or_else(|| b.get("description"));
        if let Some(description) = described {
            merged.insert("description".into(), description.clone());
        }
        merged.insert("enum".into(), Value::Array(values));
        return Value::Object(merged);
    }
    let key = match join {
        Join::Both => "allOf",
        Join::Either => "anyOf",
    };
    json!({key: [a, b]})
}

/// The values a schema allows when it is only a `const` or an `enum` (with
/// a type and a description at most).
fn choices(schema: &Value) -> Option<Vec<Value>> {
    let map = schema.as_object()?;
    if map.keys().any(|key| {
        !matches!(
            key.as_str(),
            "const" | "enum" | "type" | "description" | "title"
        )
    }) {
        return None;
    }
    match (map.get("const"), map.get("enum")) {
        (Some(value), None) => Some(vec![value.clone()]),
        (None, Some(Value::Array(values))) => Some(values.clone()),
        _ => None,
    }
}

fn required_of(map: &Map<String, Value>) -> Vec<String> {
    map.get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn union_required(root: &mut Map<String, Value>, branch: &Map<String, Value>) {
    let mut required = required_of(root);
    for name in required_of(branch) {
        if !required.contains(&name) {
            required.push(name);
        }
    }
    if !required.is_empty() {
        root.insert("required".into(), json!(required));
    }
}

/// True when a schema may accept an object: no type, `object`, or a type
/// list that holds `object`.
fn may_be_object(schema: &Map<String, Value>) -> bool {
    match schema.get("type") {
        None => true,
        Some(Value::String(kind)) => kind == "object",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "object"),
        Some(_) => false,
    }
}

/// Root `anyOf`/`oneOf`: the alternatives joined into one object schema
/// that requires what every one requires; the rest described in words.
pub(super) fn merge_alternatives(
    root: &mut Map<String, Value>,
    defs: &Value,
    notes: &mut Notes,
) -> Result<(), Unportable> {
    for key in ["anyOf", "oneOf"] {
        let Some(alternatives) = root.remove(key) else {
            continue;
        };
        let Value::Array(branches) = alternatives else {
            continue;
        };
        let exactly_one = key == "oneOf";
        let mut objects = Vec::new();
        for branch in &branches {
            match resolved(branch, defs) {
                Some(map) if may_be_object(&map) => objects.push(map),
                // A branch that can never be an object cannot match an
                // object input: when the root says object, it is moot.
                _ if root.get("type") == Some(&json!("object")) => {}
                _ => {
                    return Err(Unportable(format!(
                        "its input schema's root `{key}` accepts input that is not an object"
                    )));
                }
            }
        }
        if objects.is_empty() || objects.iter().any(Map::is_empty) {
            // No object branch (nothing valid) or one that accepts anything.
            continue;
        }
        describe_alternatives(&objects, exactly_one, notes);
        let common = objects
            .iter()
            .map(required_of)
            .reduce(|a, b| a.into_iter().filter(|name| b.contains(name)).collect())
            .unwrap_or_default();
        let all_closed = objects
            .iter()
            .all(|map| map.get("additionalProperties") == Some(&Value::Bool(false)));
        for branch in &objects {
            join_properties(root, branch, Join::Either);
        }
        let mut holder = Map::new();
        holder.insert("required".into(), json!(common));
        union_required(root, &holder);
        if all_closed && !root.contains_key("additionalProperties") {
            root.insert("additionalProperties".into(), Value::Bool(false));
        }
    }
    Ok(())
}

/// A property that every branch fixes to one value: the discriminator of a
/// tagged union (zod's `discriminatedUnion` writes these).
fn discriminator(objects: &[Map<String, Value>]) -> Option<String> {
    let first = objects.first()?.get("properties")?.as_object()?;
    first
        .keys()
        .find(|name| {
            objects.iter().all(|branch| {
                branch
                    .get("properties")
                    .and_then(|properties| properties.get(name.as_str()))
                    .and_then(choices)
                    .is_some_and(|values| values.len() == 1)
            })
        })
        .cloned()
}

fn describe_alternatives(objects: &[Map<String, Value>], exactly_one: bool, notes: &mut Notes) {
    let requirement_only = objects.iter().all(|branch| {
        branch
            .keys()
            .all(|key| matches!(key.as_str(), "required" | "description" | "title" | "type"))
    });
    let listed = |branch: &Map<String, Value>| {
        let names = required_of(branch);
        if names.is_empty() {
            "nothing more".to_owned()
        } else {
            names
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        }
    };
    if requirement_only {
        let forms: Vec<String> = objects.iter().map(listed).collect();
        let how = if exactly_one {
            "exactly one of"
        } else {
            "at least one of"
        };
        notes.root(format!("Give {how}: {}.", forms.join("; ")));
        return;
    }
    if let Some(tag) = discriminator(objects) {
        for branch in objects {
            let value = branch
                .get("properties")
                .and_then(|properties| properties.get(&tag))
                .and_then(choices)
                .and_then(|values| values.into_iter().next());
            let Some(value) = value else { continue };
            for name in required_of(branch) {
                if name != tag {
                    notes.property(
                        &name,
                        format!("Required when `{tag}` is {}.", quoted(&value)),
                    );
                }
            }
        }
        return;
    }
    let forms: Vec<String> = objects
        .iter()
        .enumerate()
        .map(|(i, branch)| format!("({}) with {}", i + 1, listed(branch)))
        .collect();
    let how = if exactly_one { "exactly one" } else { "one" };
    notes.root(format!(
        "Input takes {how} of these forms: {}.",
        forms.join("; ")
    ));
}

/// The root's `type` made `object`: added when missing, narrowed from a
/// list that holds it; a root of another type cannot be a tool's input.
pub(super) fn ensure_object_type(root: &mut Map<String, Value>) -> Result<(), Unportable> {
    if may_be_object(root) {
        root.insert("type".into(), json!("object"));
        if root.get("properties").is_none() {
            root.insert("properties".into(), json!({}));
        }
        Ok(())
    } else {
        Err(Unportable(format!(
            "its input schema's root type is {}, not object",
            root.get("type").map_or_else(String::new, Value::to_string)
        )))
    }
}
