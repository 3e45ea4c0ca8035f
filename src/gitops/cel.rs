//! The CRDs' `x-kubernetes-validations` rules, evaluated with the `cel` crate (the maintained
//! successor of `cel-interpreter`). Transition rules (those that read `oldSelf`) need the stored
//! object, which an offline check does not have: they are skipped, and the apiserver still runs
//! them on update.

use std::collections::HashMap;
use std::sync::Arc;

use cel::extractors::This;

use serde_json::Value;

/// What one rule said about one value.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Pass,
    Fail,
    /// A transition rule; only the apiserver can evaluate it.
    NeedsOldSelf,
    /// The rule did not compile or did not evaluate to a bool.
    Error(String),
}

/// Every rule compiled once, so a thousand resources do not parse the same rule a thousand times.
#[derive(Default)]
pub struct Rules {
    programs: HashMap<String, Result<cel::Program, String>>,
}

impl Rules {
    pub fn compile(&mut self, rule: &str) {
        if self.programs.contains_key(rule) || reads_old_self(rule) {
            return;
        }
        let program = cel::Program::compile(rule).map_err(|e| e.to_string());
        self.programs.insert(rule.to_owned(), program);
    }

    /// Evaluates `rule` with `self` bound to `value`.
    pub fn evaluate(&self, rule: &str, value: &Value) -> Outcome {
        if reads_old_self(rule) {
            return Outcome::NeedsOldSelf;
        }
        let program = match self.programs.get(rule) {
            Some(Ok(program)) => program,
            Some(Err(e)) => return Outcome::Error(format!("rule does not compile: {e}")),
            None => return Outcome::Error("rule was not compiled".into()),
        };
        let mut context = cel::Context::default();
        // Kubernetes' `duration('30m')` (Go's reading), as whole nanoseconds: enough to compare
        // durations.
        let duration = context.add_function("duration", |text: Arc<String>| {
            crate::resources::duration::parse(&text)
                .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
                .map_err(|e| cel::ExecutionError::function_error("duration", e.to_string()))
        });
        if let Err(e) = duration {
            return Outcome::Error(format!("duration() cannot be declared: {e}"));
        }
        // Kubernetes' list library: `list.isSorted()`, each element at least the one before.
        let is_sorted =
            context.add_function("isSorted", |This(list): This<Arc<Vec<cel::Value>>>| {
                list.windows(2)
                    .try_fold(true, |sorted, pair| match pair[0].partial_cmp(&pair[1]) {
                        Some(order) => Ok(sorted && order.is_le()),
                        None => Err(cel::ExecutionError::function_error(
                            "isSorted",
                            "the list holds values that do not compare",
                        )),
                    })
            });
        if let Err(e) = is_sorted {
            return Outcome::Error(format!("isSorted() cannot be declared: {e}"));
        }
        // Kubernetes' URL library: `isURL(string)`, `url(string)` and its `getHostname()` and
        // `getPort()`, read with the parser the operator's client uses (see [`parsed_url`]).
        let is_url = context.add_function("isURL", |text: Arc<String>| parsed_url(&text).is_some());
        // `url(s)` stays the text: its getters parse it.
        let url = context.add_function("url", |text: Arc<String>| text);
        let hostname = context.add_function("getHostname", |This(text): This<Arc<String>>| {
            let host = parsed_url(&text).and_then(|u| u.host_str().map(str::to_string));
            // Go's `Hostname()` leaves out an IPv6 address's brackets.
            host.unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string()
        });
        let port = context.add_function("getPort", |This(text): This<Arc<String>>| {
            // The port as written (the parser drops a scheme's default port, Go keeps it).
            let authority = text.split_once("://").map_or("", |(_, rest)| rest);
            let authority = authority.split(['/', '?', '#']).next().unwrap_or("");
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            let after_host = match host.strip_prefix('[') {
                Some(v6) => v6.split_once(']').map_or("", |(_, rest)| rest),
                None => host,
            };
            after_host
                .rsplit_once(':')
                .map_or(String::new(), |(_, port)| port.to_string())
        });
        for (name, declared) in [
            ("isURL", is_url),
            ("url", url),
            ("getHostname", hostname),
            ("getPort", port),
        ] {
            if let Err(e) = declared {
                return Outcome::Error(format!("{name}() cannot be declared: {e}"));
            }
        }
        // A field named like a CEL keyword is `__namespace__` in a rule, as Kubernetes reads it.
        let escaped;
        let value = match rule.contains("__") {
            true => {
                escaped = keywords_escaped(value);
                &escaped
            }
            false => value,
        };
        if let Err(e) = context.add_variable("self", value) {
            return Outcome::Error(format!("value cannot be bound to self: {e}"));
        }
        match program.execute(&context) {
            Ok(cel::Value::Bool(true)) => Outcome::Pass,
            Ok(cel::Value::Bool(false)) => Outcome::Fail,
            Ok(other) => Outcome::Error(format!("rule returned {other:?}, not a bool")),
            Err(e) => Outcome::Error(format!("rule failed to evaluate: {e}")),
        }
    }
}

/// CEL's keywords, which Kubernetes lets a rule select as a field only written `__name__`.
const CEL_KEYWORDS: [&str; 17] = [
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// `value` with every object key that is a CEL keyword written `__key__`, at any depth.
fn keywords_escaped(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| {
                    let key = match CEL_KEYWORDS.contains(&key.as_str()) {
                        true => format!("__{key}__"),
                        false => key.clone(),
                    };
                    (key, keywords_escaped(item))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(keywords_escaped).collect()),
        other => other.clone(),
    }
}

/// `text` as a URL, when Go's `url.ParseRequestURI` (Kubernetes' `isURL`) would take it too,
/// as far as the rules need: no control character, space or backslash, every `%` escape whole
/// (Go refuses what the WHATWG parser mends), and absolute.
fn parsed_url(text: &str) -> Option<reqwest::Url> {
    let bytes = text.as_bytes();
    let escapes_whole = bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    let clean = !text
        .chars()
        .any(|c| c.is_control() || c == ' ' || c == '\\');
    (escapes_whole && clean)
        .then(|| reqwest::Url::parse(text).ok())
        .flatten()
}

fn reads_old_self(rule: &str) -> bool {
    rule.contains("oldSelf")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The rules with `rule` compiled.
    fn compiled(rule: &str) -> Rules {
        let mut rules = Rules::default();
        rules.compile(rule);
        rules
    }

    #[test]
    fn a_field_named_like_a_keyword_is_selected_escaped() {
        let rule = "self.all(a, !has(a.__namespace__))";
        let rules = compiled(rule);
        assert_eq!(rules.evaluate(rule, &json!([{"name": "x"}])), Outcome::Pass);
        let named = json!([{"name": "x", "namespace": "team-a"}]);
        assert_eq!(rules.evaluate(rule, &named), Outcome::Fail);
    }

    #[test]
    fn durations_compare_as_kubernetes_does() {
        let rule = "duration(self) >= duration('30m')";
        let rules = compiled(rule);
        assert_eq!(rules.evaluate(rule, &json!("2h")), Outcome::Pass);
        assert_eq!(rules.evaluate(rule, &json!("1h30m")), Outcome::Pass);
        assert_eq!(rules.evaluate(rule, &json!("29m")), Outcome::Fail);
    }

    /// A Connection's URL rule, as the apiserver evaluates it (Kubernetes' URL library and
    /// `matches`), on the values an attack tried.
    #[test]
    fn urls_are_read_as_kubernetes_reads_them() {
        let rule = &crate::resources::connection::http_url("self");
        let rules = compiled(rule);
        for good in [
            "https://api.example",
            "http://127.0.0.1:8080",
            "HTTPS://api.example.com",
            "http://[::1]:8080/api",
            "https://bücher.example/v1",
            "http://my-svc.my-ns.svc.cluster.local:8080/",
        ] {
            assert_eq!(rules.evaluate(rule, &json!(good)), Outcome::Pass, "{good}");
        }
        for bad in [
            "not a url",
            "::::",
            "ftp://x y",
            "ftp://x",
            "https://",
            "http://:8080",
            "http://x:99999",
            "https://api.example.com/base?x=1",
            "https://api.example.com/#frag",
            "https:///path",
            "https://api.example.com\n",
            "https://api.example.com ",
            "http://x/%zz",
            "http://x\\y",
            "http://exa\tmple.com",
        ] {
            assert_eq!(rules.evaluate(rule, &json!(bad)), Outcome::Fail, "{bad:?}");
        }
    }

    /// The ConfigRollout's steps rule, as the apiserver evaluates it (Kubernetes' list library).
    #[test]
    fn lists_are_sorted_as_kubernetes_says() {
        let rule = "self.map(s, s.weight).isSorted() && self.all(s, self.exists_one(t, t.weight == s.weight))";
        let rules = compiled(rule);
        let steps = |weights: &[u32]| {
            json!(
                weights
                    .iter()
                    .map(|w| json!({"weight": w}))
                    .collect::<Vec<_>>()
            )
        };
        assert_eq!(rules.evaluate(rule, &steps(&[10, 50, 100])), Outcome::Pass);
        assert_eq!(rules.evaluate(rule, &steps(&[])), Outcome::Pass);
        assert_eq!(rules.evaluate(rule, &steps(&[50, 10])), Outcome::Fail);
        assert_eq!(rules.evaluate(rule, &steps(&[10, 10])), Outcome::Fail);
    }

    #[test]
    fn exactly_one_of_two_fields() {
        let rule = "has(self.bearerToken) != has(self.oauth2ClientCredentials)";
        let rules = compiled(rule);
        assert_eq!(
            rules.evaluate(rule, &json!({"bearerToken": {}})),
            Outcome::Pass
        );
        assert_eq!(rules.evaluate(rule, &json!({})), Outcome::Fail);
        assert_eq!(
            rules.evaluate(
                rule,
                &json!({"bearerToken": {}, "oauth2ClientCredentials": {}})
            ),
            Outcome::Fail
        );
    }

    #[test]
    fn transition_rules_are_left_to_the_apiserver() {
        let mut rules = Rules::default();
        rules.compile("self == oldSelf");
        assert_eq!(
            rules.evaluate("self == oldSelf", &json!("a")),
            Outcome::NeedsOldSelf
        );
    }
}
