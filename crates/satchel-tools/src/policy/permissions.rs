//! One agent.json layer's `permissions` section, checked ([`Permissions`]):
//! every problem in it is an error with its line and column. Read by
//! `config` when a file is parsed and by `policy` when rules are built.

use crate::config::layer::{ConfigError, Layer};
use crate::config::locate::JsonStep;
use crate::hints::{json_type, nearest};

use super::mode::Mode;
use super::rule::{Rule, RuleKind};

/// The keys of `permissions`.
const PERMISSION_KEYS: &[&str] = &["allow", "ask", "deny", "mode"];

/// One file's `permissions` section, checked: any problem in it is an
/// error, never a warning, because a rule left out could be a deny rule.
#[derive(Debug, Default)]
pub(crate) struct Permissions {
    /// Its rules, deny then ask then allow, each remembering the file.
    pub(super) rules: Vec<Rule>,
    /// Its mode, when it sets one.
    pub(super) mode: Option<Mode>,
}

impl Permissions {
    /// Reads `layer`'s `permissions`; every problem found is reported at
    /// once, with its line and column.
    pub(crate) fn from_layer(layer: &Layer) -> Result<Permissions, ConfigError> {
        let mut found = Permissions::default();
        let mut problems = Vec::new();
        let section = JsonStep::key("permissions");
        let Some(permissions) = layer.object.get("permissions") else {
            return Ok(found);
        };
        let Some(permissions) = permissions.as_object() else {
            problems.push((
                layer.locate(std::slice::from_ref(&section)),
                format!(
                    "`permissions` must be an object with `allow`, `ask`, `deny` or `mode`, not {}",
                    json_type(permissions)
                ),
            ));
            return Err(ConfigError::Permissions {
                path: layer.path.clone(),
                problems,
            });
        };
        for (key, value) in permissions {
            let at = |tail: &[JsonStep]| {
                let mut path = vec![section.clone(), JsonStep::key(key)];
                path.extend(tail.iter().cloned());
                layer.locate(&path)
            };
            let kind = match key.as_str() {
                "deny" => RuleKind::Deny,
                "ask" => RuleKind::Ask,
                "allow" => RuleKind::Allow,
                "mode" => {
                    match value.as_str().and_then(Mode::parse) {
                        Some(mode) => found.mode = Some(mode),
                        None => problems.push((
                            at(&[]),
                            format!(
                                "`permissions.mode` must be one of \"readonly\", \"workspace\", \"trust\", not {value}"
                            ),
                        )),
                    }
                    continue;
                }
                unknown => {
                    let hint = match nearest(unknown, PERMISSION_KEYS) {
                        Some(near) => format!("did you mean `{near}`?"),
                        None => "its keys are `allow`, `ask`, `deny` and `mode`".to_owned(),
                    };
                    problems.push((
                        at(&[]),
                        format!("`{unknown}` is not a key of `permissions`; {hint}"),
                    ));
                    continue;
                }
            };
            let Some(list) = value.as_array() else {
                problems.push((
                    at(&[]),
                    format!(
                        "`permissions.{key}` must be a list of rules like [\"bash(rm *)\"], not {}",
                        json_type(value)
                    ),
                ));
                continue;
            };
            for (index, item) in list.iter().enumerate() {
                let Some(text) = item.as_str() else {
                    problems.push((
                        at(&[JsonStep::Index(index)]),
                        format!(
                            "`permissions.{key}[{index}]` must be a rule (a string), not {}",
                            json_type(item)
                        ),
                    ));
                    continue;
                };
                match Rule::parse(kind, text, Some(layer.path.clone())) {
                    Ok(rule) => found.rules.push(rule),
                    Err(error) => problems.push((
                        at(&[JsonStep::Index(index)]),
                        format!("`permissions.{key}[{index}]`: {error}"),
                    )),
                }
            }
        }
        if problems.is_empty() {
            Ok(found)
        } else {
            Err(ConfigError::Permissions {
                path: layer.path.clone(),
                problems,
            })
        }
    }
}
