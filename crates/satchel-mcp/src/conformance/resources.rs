//! Fixture resources, all under `test://`: fixed text and binary ones, one
//! URI template (matched here, RFC 6570 level 1), and subscriptions to
//! them. Every other URI is the inner server's (Satchel's `satchel://`
//! record, and the not-found answer for the rest).

use std::collections::BTreeSet;
use std::sync::Mutex;

use rmcp::ErrorData;
use rmcp::model::{
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    SubscriptionFilter,
};
use serde_json::json;

use super::content::PNG_BASE64;

/// The scheme the fixtures own.
const SCHEME: &str = "test://";

/// The fixture template.
pub(super) const TEMPLATE: &str = "test://template/{id}/data";

/// A fixed resource: URI, name, title, MIME type, body.
struct Fixed {
    uri: &'static str,
    name: &'static str,
    title: &'static str,
    mime_type: &'static str,
    body: Body,
}

enum Body {
    Text(&'static str),
    Base64(&'static str),
}

const FIXED: &[Fixed] = &[
    Fixed {
        uri: "test://static-text",
        name: "static-text",
        title: "Static Text Resource",
        mime_type: "text/plain",
        body: Body::Text("This is the content of the static text resource."),
    },
    Fixed {
        uri: "test://static-binary",
        name: "static-binary",
        title: "Static Binary Resource",
        mime_type: "image/png",
        body: Body::Base64(PNG_BASE64),
    },
    Fixed {
        uri: "test://watched-resource",
        name: "watched-resource",
        title: "Watched Resource",
        mime_type: "text/plain",
        body: Body::Text("Watched resource content"),
    },
    Fixed {
        uri: "test://stateless-static-text",
        name: "stateless-static-text",
        title: "Stateless Static Text",
        mime_type: "text/plain",
        body: Body::Text("Static text content from the stateless draft path."),
    },
];

/// Whether `uri` is a fixture's (served here, never by the inner server).
pub(super) fn owns(uri: &str) -> bool {
    uri.starts_with(SCHEME)
}

/// The fixed resources as `resources/list` shows them.
pub(super) fn listed() -> Vec<Resource> {
    FIXED
        .iter()
        .map(|fixed| {
            let mut resource = Resource::new(fixed.uri, fixed.name)
                .with_description(format!("{} (a conformance fixture)", fixed.title));
            resource.title = Some(fixed.title.to_owned());
            resource.mime_type = Some(fixed.mime_type.to_owned());
            resource
        })
        .collect()
}

/// The fixture template as `resources/templates/list` shows it.
pub(super) fn templates() -> Vec<ResourceTemplate> {
    let mut template = ResourceTemplate::new(TEMPLATE, "template");
    template.title = Some("Resource Template".to_owned());
    template.description = Some("A resource template with parameter substitution".to_owned());
    template.mime_type = Some("application/json".to_owned());
    vec![template]
}

/// `resources/read` of a `test://` URI; `-32002` (sent as `-32602` to
/// 2026-07-28 clients by rmcp) with the URI in `data` when there is none.
pub(super) fn read(uri: &str) -> Result<ReadResourceResponse, ErrorData> {
    let contents = if let Some(fixed) = FIXED.iter().find(|fixed| fixed.uri == uri) {
        match fixed.body {
            Body::Text(text) => ResourceContents::text(text, uri),
            Body::Base64(blob) => ResourceContents::blob(blob, uri),
        }
        .with_mime_type(fixed.mime_type)
    } else if let Some(values) = match_template(TEMPLATE, uri) {
        let id = values
            .iter()
            .find(|(name, _)| name == "id")
            .map(|(_, value)| value.as_str())
            .unwrap_or_default();
        let body = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
        ResourceContents::text(body.to_string(), uri).with_mime_type("application/json")
    } else {
        return Err(ErrorData::resource_not_found(
            format!(
                "no resource at `{uri}`; resources/list and resources/templates/list show what exists"
            ),
            Some(json!({"uri": uri})),
        ));
    };
    Ok(ReadResourceResult::new(vec![contents]).into())
}

/// The variables of `template` that make it `uri`, or `None` when it
/// does not match. Each `{name}` matches one or more characters other than
/// `/`; the rest must match exactly.
pub(super) fn match_template(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let mut values = Vec::new();
    let mut rest_template = template;
    let mut rest_uri = uri;
    loop {
        let Some(open) = rest_template.find('{') else {
            return (rest_template == rest_uri).then_some(values);
        };
        let literal = &rest_template[..open];
        rest_uri = rest_uri.strip_prefix(literal)?;
        let close = open + rest_template[open..].find('}')?;
        let name = &rest_template[open + 1..close];
        rest_template = &rest_template[close + 1..];
        // The value runs to the next `/` (or the end), and must be followed
        // by the template's next literal.
        let end = rest_uri.find('/').unwrap_or(rest_uri.len());
        if end == 0 || name.is_empty() {
            return None;
        }
        values.push((name.to_owned(), rest_uri[..end].to_owned()));
        rest_uri = &rest_uri[end..];
    }
}

/// Which fixture resources 2025-11-25 sessions subscribed to. They never
/// change, so no `notifications/resources/updated` is ever due; the set
/// only answers `resources/subscribe` and `resources/unsubscribe` honestly.
#[derive(Default)]
pub(super) struct Subscriptions(Mutex<BTreeSet<String>>);

impl Subscriptions {
    /// Subscribes to `uri`; `-32602` when there is nothing there.
    pub(super) fn subscribe(&self, uri: &str) -> Result<(), ErrorData> {
        read(uri)?;
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(uri.to_owned());
        Ok(())
    }

    /// Forgets `uri` (nothing to do when it was not subscribed).
    pub(super) fn unsubscribe(&self, uri: &str) {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(uri);
    }
}

/// The resource subscriptions a `subscriptions/listen` request gets: what
/// the inner server accepted, plus the fixture resources it asked for.
pub(super) fn subscribable(
    requested: &SubscriptionFilter,
    inner: &SubscriptionFilter,
) -> Vec<String> {
    let mut accepted: Vec<String> = inner.resource_subscriptions.clone().unwrap_or_default();
    for uri in requested.resource_subscriptions.iter().flatten() {
        if owns(uri) && read(uri).is_ok() && !accepted.contains(uri) {
            accepted.push(uri.clone());
        }
    }
    accepted
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly by design.

    use rmcp::model::ErrorCode;
    use serde_json::Value;

    use super::*;

    fn pairs(values: &[(&str, &str)]) -> Vec<(String, String)> {
        values
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn templates_match_one_segment_per_variable() {
        assert_eq!(
            match_template(TEMPLATE, "test://template/123/data"),
            Some(pairs(&[("id", "123")]))
        );
        assert_eq!(
            match_template("a://{x}/b/{y}", "a://1/b/two"),
            Some(pairs(&[("x", "1"), ("y", "two")]))
        );
        for bad in [
            "test://template//data",
            "test://template/1/2/data",
            "test://template/1/data/more",
            "test://template/1",
            "other://template/1/data",
        ] {
            assert_eq!(match_template(TEMPLATE, bad), None, "{bad}");
        }
        assert_eq!(match_template("a://{unclosed", "a://x"), None);
    }

    #[test]
    fn reads_fixed_and_templated_resources_and_names_a_missing_uri() {
        let ReadResourceResponse::Complete(text) = read("test://static-text").unwrap() else {
            panic!("not complete");
        };
        let text = serde_json::to_value(&text).unwrap();
        assert!(text.to_string().contains("static text resource"), "{text}");

        let ReadResourceResponse::Complete(templated) = read("test://template/7/data").unwrap()
        else {
            panic!("not complete");
        };
        let body = serde_json::to_value(&templated.contents[0]).unwrap();
        let data: Value = serde_json::from_str(body["text"].as_str().unwrap()).unwrap();
        assert_eq!(data["id"], "7");

        let missing = read("test://nonexistent").unwrap_err();
        assert_eq!(missing.code, ErrorCode::RESOURCE_NOT_FOUND);
        assert_eq!(missing.data, Some(json!({"uri": "test://nonexistent"})));
    }
}
