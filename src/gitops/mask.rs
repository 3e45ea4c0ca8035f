//! Masking of secrets in what `plan` prints and `export` writes. Config documents may carry
//! provider keys inline (`api_key`, `vertex_service_account_json`, `custom_headers` values, …);
//! a plan is posted as a pull request comment and an export is committed to Git, so those
//! values never appear in either. Which values are secrets is decided by
//! [`crate::api::secret_fields`], the list the operator and the emulator use too.

use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;

use crate::resources::config::ConfigSecretRef;

use crate::api::secret_fields::secret_pointers as pointers;

/// What a masked value reads as.
pub use crate::api::secret_fields::MASK;

/// What a masked value that differs from the other side of a diff reads as.
const MASK_CHANGED: &str = "<masked, changed>";

/// True for what needs no masking: the `(secret name/key)` a plan shows where
/// `spec.secretRefs` fills a value in (it names the value's source, not the value), and a value
/// masked already.
fn names_a_secret(value: &Value) -> bool {
    value.as_str().is_some_and(|s| {
        (s.starts_with("(secret ") && s.ends_with(')') && !s.contains('\n'))
            || s == MASK
            || s == MASK_CHANGED
            || s == HIDDEN
    })
}

/// What a value of a remote object reads as in a plan when nothing proves it is not a
/// Secret's ([`hide_unconfirmed`]).
pub const HIDDEN: &str = "(value hidden)";

/// Hides, in `current` (a remote object as a plan shows it) below `prefix`, every value a plan
/// may not compare with the manifest (`desired`): every string, and a number at a path where
/// the manifest holds no number. Each reads [`HIDDEN`]; its path still shows. True when it hid
/// anything.
///
/// For a remote object the manifest adopts (its `spec.slug` names it, and no live resource of
/// its own records it; without `--kubeconfig`, every object a spec names), a plan cannot know
/// which values some resource took from its Secrets: another namespace's resource, or an
/// earlier version at other paths. Nor may it compare them with the manifest's: a string shown
/// where it equals the manifest's and hidden where it does not (or "in sync" against a `-/+`
/// line, exit 0 against 2) tells the pull request's author whether a guess equals another
/// team's Secret. So every string reads hidden, whatever the manifest holds, and the plan says
/// the adoption may write ([`crate::gitops::plan::Entry::values_hidden`]). aigw sends a
/// Secret's value as a string, so a number the manifest also holds as a number at that path
/// (`retry.attempts: 2` → `3`) is shown.
pub fn hide_unconfirmed(current: &mut Value, desired: &Value, prefix: &str) -> bool {
    let Some(below) = current.pointer(prefix) else {
        return false;
    };
    let mut leaves = Vec::new();
    scalar_leaves(below, prefix, &mut leaves);
    let mut hidden = false;
    for pointer in leaves {
        let number_for_number = desired.pointer(&pointer).is_some_and(Value::is_number);
        let Some(slot) = current.pointer_mut(&pointer) else {
            continue;
        };
        if !(slot.is_number() && number_for_number) {
            *slot = Value::String(HIDDEN.into());
            hidden = true;
        }
    }
    hidden
}

/// `value` with every secret replaced by [`MASK`].
pub fn masked(value: &Value) -> Value {
    Masking::default().masked(value)
}

/// Paths (below `path`) of the secrets in `value`, e.g. `config/targets/0/api_key`.
pub fn secret_paths(value: &Value, path: &str) -> Vec<String> {
    pointers(value)
        .into_iter()
        .map(|pointer| format!("{path}{pointer}"))
        .collect()
}

/// JSON Pointers of the secrets in `value`, e.g. `/targets/0/api_key`, `/custom_headers/x-key`.
pub fn secret_pointers(value: &Value) -> Vec<String> {
    pointers(value)
}

/// Like [`masked`], but a secret that differs from the one in `other` (the other side of a
/// diff) reads `<masked, changed>`, so the plan still shows *that* it changes.
pub fn masked_against(value: &Value, other: &Value) -> Value {
    Masking::default().masked_against(value, other)
}

/// What the reading tools (`plan`, `export`, `history --diff`) hide: every secret of the one
/// secret list ([`crate::api::secret_fields`]), and for a resource that takes values from
/// Secrets (`spec.secretRefs`), whatever any version of it took, wherever it sits now:
/// - every string that equals, contains or encodes a value of those Secrets (read with cluster
///   access) or a value found at one of its `secretRefs` paths, old or new, in any document
///   shown ([`Masking::learn`]): a moved value (a target prepended, a hook inserted) is
///   hidden at its new index too;
/// - the values at those paths themselves;
/// - for a path whose Secret could not be read, every value under the key its path ends in
///   (`aws_access_key_id`, anywhere), or every item of the list it indexes.
///
/// Its `Debug` shows no value.
#[derive(Clone, Default)]
pub struct Masking {
    pointers: Vec<String>,
    keys: Vec<String>,
    lists: Vec<String>,
    values: Vec<String>,
    /// Pointers whose source the manifest changes ([`Masking::source_moved`]).
    moved: Vec<String>,
}

impl Masking {
    /// Hides what `other` hides too (two live resources recording one remote key).
    pub fn absorb(&mut self, other: Masking) {
        self.pointers.extend(other.pointers);
        self.keys.extend(other.keys);
        self.lists.extend(other.lists);
        self.values.extend(other.values);
        self.moved.extend(other.moved);
    }
}

impl std::fmt::Debug for Masking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Masking")
            .field("pointers", &self.pointers)
            .field("keys", &self.keys)
            .field("lists", &self.lists)
            .field("values", &self.values.len())
            .field("moved", &self.moved)
            .finish()
    }
}

impl Masking {
    /// A `secretRefs` path (JSON Pointer into the document the tool shows) and the value of
    /// its Secret when it could be read; without one, every value under the path's key name
    /// is hidden, since a value that moved keeps its key.
    pub fn reference(&mut self, path: &str, value: Option<String>) {
        if !self.pointers.iter().any(|p| p == path) {
            self.pointers.push(path.to_string());
        }
        match value {
            Some(value) => self.value(value),
            None => {
                let Some((parent, last)) = path.rsplit_once('/') else {
                    return;
                };
                let unescape = |t: &str| t.replace("~1", "/").replace("~0", "~");
                let (into, key) = match last.parse::<usize>() {
                    Ok(_) => (&mut self.lists, parent.rsplit('/').next().map(unescape)),
                    Err(_) => (&mut self.keys, Some(unescape(last))),
                };
                if let Some(key) = key.filter(|k| !k.is_empty())
                    && !into.contains(&key)
                {
                    into.push(key);
                }
            }
        }
    }

    /// A value to hide wherever it shows.
    pub fn value(&mut self, value: String) {
        if !value.is_empty() && !self.values.contains(&value) {
            self.values.push(value);
        }
    }

    /// The value at `pointer` changes its source (a Secret's value made a literal, or a literal
    /// taken from a Secret): it reads `<masked, changed>` on both sides, whether the values are
    /// equal or not. A plan that showed it unchanged when a literal equals the remote value a
    /// Secret gave would tell the author that value.
    pub fn source_moved(&mut self, pointer: String) {
        if !self.moved.contains(&pointer) {
            self.moved.push(pointer);
        }
    }

    /// Learns the values `document` holds at the known `secretRefs` paths: an older version,
    /// or the remote object, holds there what a Secret gave it, which may show elsewhere in
    /// another document (a later version moved it).
    pub fn learn(&mut self, document: &Value) {
        let found: Vec<String> = self
            .pointers
            .iter()
            .filter_map(|pointer| document.pointer(pointer))
            .filter(|found| !names_a_secret(found))
            .filter_map(scalar_text)
            .collect();
        for value in found {
            self.value(value);
        }
    }

    /// `value` with every secret replaced by [`MASK`].
    pub fn masked(&self, value: &Value) -> Value {
        self.masked_against(value, value)
    }

    /// Like [`Self::masked`], but a secret that differs from the one at the same place in
    /// `other` (the other side of a diff) reads `<masked, changed>`, so a change still shows.
    /// The userinfo of every URL reads `(hidden)` ([`without_userinfo`]).
    ///
    /// [`without_userinfo`]: crate::api::secret_fields::without_userinfo
    pub fn masked_against(&self, value: &Value, other: &Value) -> Value {
        self.masked_by(value, other, true)
    }

    /// [`Self::masked`] of a document the user wrote (the manifest a plan compares): hidden by
    /// the known paths, the key names of those not read, and the secret list, never by the
    /// values of the Secrets. Masking the user's own literals by a Secret's value would tell
    /// which of them equals it: an oracle for short values.
    pub fn masked_by_path(&self, value: &Value) -> Value {
        self.masked_by(value, value, false)
    }

    /// [`Self::masked_by_path`] against the other side of a diff (see [`Self::masked_against`]).
    pub fn masked_by_path_against(&self, value: &Value, other: &Value) -> Value {
        self.masked_by(value, other, false)
    }

    fn masked_by(&self, value: &Value, other: &Value, by_value: bool) -> Value {
        let mut copy = value.clone();
        for pointer in self.hidden(value, by_value) {
            let theirs = other.pointer(&pointer);
            if let Some(slot) = copy.pointer_mut(&pointer)
                && !names_a_secret(slot)
            {
                let mark = match Some(&*slot) == theirs && !self.moved.contains(&pointer) {
                    true => MASK,
                    false => MASK_CHANGED,
                };
                *slot = Value::String(mark.into());
            }
        }
        crate::api::secret_fields::userinfo_hidden(&copy)
    }

    /// Where `document` holds a Secret's value (or, for a Secret not read, a value under one of
    /// its paths' key names), whatever the path: what an export cannot write as it is outside
    /// the current `secretRefs` paths.
    pub fn stray(&self, document: &Value) -> Vec<String> {
        let mut found = Vec::new();
        self.walk(document, "", None, ByValue::Strays, &mut found);
        found
    }

    /// JSON Pointers of everything to hide in `value`, outermost first; `by_value`: also where
    /// it holds a Secret's value.
    fn hidden(&self, value: &Value, by_value: bool) -> Vec<String> {
        let mut found = pointers(value);
        let present = self.pointers.iter();
        found.extend(present.filter(|p| value.pointer(p).is_some()).cloned());
        let by_value = if by_value {
            ByValue::Shown
        } else {
            ByValue::No
        };
        self.walk(value, "", None, by_value, &mut found);
        found.sort();
        found.dedup();
        found
    }

    fn walk(
        &self,
        value: &Value,
        path: &str,
        key: Option<&str>,
        by_value: ByValue,
        found: &mut Vec<String>,
    ) {
        match value {
            Value::Object(map) => {
                for (name, item) in map {
                    let here = format!("{path}/{}", name.replace('~', "~0").replace('/', "~1"));
                    if !item.is_null() && self.keys.iter().any(|k| k == name) {
                        found.push(here);
                    } else {
                        self.walk(item, &here, Some(name), by_value, found);
                    }
                }
            }
            Value::Array(items) => {
                let listed = key.is_some_and(|k| self.lists.iter().any(|l| l == k));
                for (n, item) in items.iter().enumerate() {
                    let here = format!("{path}/{n}");
                    match listed && !item.is_null() && !item.is_object() && !item.is_array() {
                        true => found.push(here),
                        false => self.walk(item, &here, None, by_value, found),
                    }
                }
            }
            scalar if by_value.finds(scalar) && !names_a_secret(scalar) => {
                let held = scalar_text(scalar).is_some_and(|text| {
                    self.values
                        .iter()
                        .any(|v| crate::api::concealment::holds(&text, v))
                });
                if held {
                    found.push(path.to_string());
                }
            }
            _ => {}
        }
    }
}

/// JSON Pointers (below `path`) of the strings and numbers in `value`.
fn scalar_leaves(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (name, item) in map {
                let here = format!("{path}/{}", name.replace('~', "~0").replace('/', "~1"));
                scalar_leaves(item, &here, out);
            }
        }
        Value::Array(items) => {
            for (n, item) in items.iter().enumerate() {
                scalar_leaves(item, &format!("{path}/{n}"), out);
            }
        }
        Value::String(_) | Value::Number(_) => out.push(path.to_string()),
        _ => {}
    }
}

/// Whether [`Masking::walk`] also finds where a document holds a Secret's value.
#[derive(Clone, Copy, PartialEq)]
enum ByValue {
    /// By path and key name only.
    No,
    /// Also a string, number or boolean holding one: what is shown.
    Shown,
    /// Also a string or number holding one: a boolean equal to a Secret's `true` proves nothing
    /// of where the value went, and would refuse an export for every `true` of a document.
    Strays,
}

impl ByValue {
    fn finds(self, scalar: &Value) -> bool {
        match self {
            Self::No => false,
            Self::Shown => true,
            Self::Strays => !scalar.is_boolean(),
        }
    }
}

/// The text of a string, a number or a boolean: an API may keep a Secret's digits as a number,
/// and its `true` as a boolean.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// Adds each of `refs` (paths below `prefix` in the document shown) to `masking`, with the
/// value of its Secret in `namespace` when `kube` is given and the Secret can be read (as the
/// operator reads it); a Secret that cannot be read (absent, or refused to the user running the
/// tool) leaves the key-name fallback.
pub async fn add_references(
    masking: &mut Masking,
    kube: Option<(&kube::Client, &str)>,
    prefix: &str,
    refs: &[ConfigSecretRef],
) {
    let mut read: std::collections::HashMap<String, Option<Secret>> = Default::default();
    for reference in refs {
        let selector = &reference.secret_key_ref;
        let value = match kube {
            Some((client, namespace)) => {
                if !read.contains_key(&selector.name) {
                    let secrets = kube::Api::<Secret>::namespaced(client.clone(), namespace);
                    let secret = secrets.get_opt(&selector.name).await.ok().flatten();
                    read.insert(selector.name.clone(), secret);
                }
                read.get(&selector.name)
                    .and_then(Option::as_ref)
                    .and_then(|s| s.data.as_ref()?.get(&selector.key))
                    .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
                    .filter(|value| !value.is_empty())
            }
            None => None,
        };
        masking.reference(&format!("{prefix}{}", reference.path), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_masked_and_changes_still_show() {
        let old = json!({"targets": [{"provider": "@a", "api_key": "sk-old"}]});
        let new = json!({"targets": [{"provider": "@a", "api_key": "sk-new"}]});
        assert_eq!(masked(&old)["targets"][0]["api_key"], MASK);
        assert_eq!(
            masked_against(&new, &old)["targets"][0]["api_key"],
            "<masked, changed>"
        );
        assert_eq!(masked_against(&old, &old)["targets"][0]["api_key"], MASK);
        assert_eq!(masked(&old)["targets"][0]["provider"], "@a");
        assert_eq!(
            secret_paths(&old, "config"),
            vec!["config/targets/0/api_key"]
        );
    }

    #[test]
    fn vertex_service_accounts_and_header_values_are_masked() {
        let document = json!({
            "provider": "@vertex",
            "vertex_service_account_json": "{\"private_key\": \"pk-1\"}",
            "custom_headers": {"x-team": "hv-1", "x-source": "(secret keys/h)"},
            "forward_headers": {"x-forward": "hv-2"},
            "targets": [{"forward_headers": ["x-user"], "azure_entra_client_secret": "az-1"}]
        });
        let shown = masked(&document).to_string();
        for value in ["pk-1", "hv-1", "hv-2", "az-1"] {
            assert!(!shown.contains(value), "{value} in {shown}");
        }
        assert!(shown.contains("(secret keys/h)") && shown.contains("x-user"));
        let changed = json!({"custom_headers": {"x-team": "hv-9"}});
        let against = masked_against(&changed, &document);
        assert_eq!(against["custom_headers"]["x-team"], "<masked, changed>");
        let mut paths = secret_pointers(&document);
        paths.sort();
        assert_eq!(
            paths,
            vec![
                "/custom_headers/x-source",
                "/custom_headers/x-team",
                "/forward_headers/x-forward",
                "/targets/0/azure_entra_client_secret",
                "/vertex_service_account_json",
            ]
        );
    }

    /// A target prepended (or a hook inserted) moves a Secret-backed value to another index:
    /// the remote document and older versions hold it at the old one. Found in review F2.
    #[test]
    fn a_value_that_moved_index_is_masked_at_the_old_and_the_new_place() {
        const VALUE: &str = "AKIAPLANLEAK00000001";
        let old = json!({"targets": [{"provider": "@bedrock-a", "aws_access_key_id": VALUE}]});
        let new = json!({"targets": [{"provider": "@openai"},
                                     {"provider": "@bedrock-a", "aws_access_key_id": VALUE}]});
        // With cluster access: the Secret's value, wherever it sits, in every encoding.
        let mut masking = Masking::default();
        masking.reference("/targets/1/aws_access_key_id", Some(VALUE.into()));
        let echoed = json!({"metadata": {"note": format!("https://h/?k={VALUE}")}});
        for document in [&old, &new, &echoed] {
            let shown = masking.masked_against(document, &new).to_string();
            assert!(!shown.contains(VALUE), "{shown}");
        }
        // Without: the value an older version held at an old path, learned from it...
        let mut learned = Masking::default();
        learned.reference("/targets/0/aws_access_key_id", None);
        learned.reference("/targets/1/aws_access_key_id", None);
        learned.learn(&old);
        let shown = learned.masked_against(&new, &old).to_string();
        assert!(!shown.contains(VALUE), "{shown}");
        // ...and the key names of the paths, old and new.
        let mut keys = Masking::default();
        keys.reference("/targets/1/aws_access_key_id", None);
        let shown = keys.masked_against(&old, &new).to_string();
        assert!(!shown.contains(VALUE), "{shown}");
        assert!(shown.contains("@bedrock-a"), "{shown}");
        // A path ending in an index hides the items of that list, wherever it sits.
        let mut list = Masking::default();
        list.reference("/input_guardrails/1", None);
        let shown = list
            .masked(&json!({"targets": [{"input_guardrails": ["pg-x", "sekrit-id"]}]}))
            .to_string();
        assert!(!shown.contains("sekrit-id"), "{shown}");
        assert!(!format!("{list:?}").contains("sekrit"));
    }

    /// An API may keep a Secret's digits as a number: at a moved index, in a remote document,
    /// the number was printed (attack on issue 27's masking by value).
    #[test]
    fn a_secret_value_kept_as_a_number_is_masked_where_it_moved() {
        let old = json!({"targets": [{"provider": "@a", "account_pin": "90417735"}]});
        let moved = json!({"targets": [{"provider": "@b"},
                                       {"provider": "@a", "account_pin": 90417735_u64},
                                       {"note": 90417735_u64}]});
        let mut masking = Masking::default();
        masking.reference("/targets/0/account_pin", Some("90417735".into()));
        let shown = masking.masked_against(&moved, &old).to_string();
        assert!(!shown.contains("90417735"), "{shown}");
        assert_eq!(masking.stray(&moved).len(), 2);
        // Learned from an older version that held it as a number.
        let mut learned = Masking::default();
        learned.reference("/targets/1/account_pin", None);
        learned.learn(&moved);
        let shown = learned.masked(&json!({"note": "pin 90417735"})).to_string();
        assert!(!shown.contains("90417735"), "{shown}");
    }

    /// Likewise a Secret's `true`, which an API may keep as a boolean (attack on stop 69).
    #[test]
    fn a_secret_value_kept_as_a_boolean_is_masked_where_it_moved() {
        let old = json!({"targets": [{"provider": "@a", "strict": "true"}]});
        let moved = json!({"targets": [{"provider": "@b"},
                                       {"provider": "@a", "strict": true, "cache": false}]});
        let mut masking = Masking::default();
        masking.reference("/targets/0/strict", Some("true".into()));
        let shown = masking.masked_against(&moved, &old);
        assert_ne!(shown["targets"][1]["strict"], json!(true), "{shown}");
        assert_eq!(shown["targets"][1]["cache"], json!(false), "{shown}");
        // An export is not refused for every `true` of the document.
        assert!(
            masking.stray(&moved).is_empty(),
            "{:?}",
            masking.stray(&moved)
        );
    }

    /// A remote object a manifest adopts shows none of its strings, whatever the manifest holds
    /// at their place (attack on issue 27: a pull request naming another team's config by slug,
    /// with dummy values at its paths, printed that team's values; one with the right guess at
    /// a path then read "in sync", a guessing oracle).
    #[test]
    fn an_adopted_remote_object_shows_no_string_whatever_the_manifest_holds() {
        let mut current = json!({"name": "theirs", "config": {"retry": {"attempts": 2},
            "targets": [{"provider": "@openai", "custom_host": "https://u:pw@victim.example",
                         "account_pin": 90417735_u64, "weight": 1}]}});
        let desired = json!({"config": {"retry": {"attempts": 3},
            "targets": [{"provider": "@openai", "custom_host": "https://dummy.example",
                         "account_pin": "(secret pins/pin)"}]}});
        assert!(hide_unconfirmed(&mut current, &desired, "/config"));
        let target = &current["config"]["targets"][0];
        assert_eq!(target["custom_host"], HIDDEN);
        assert_eq!(
            target["account_pin"], HIDDEN,
            "a number where the manifest has none"
        );
        assert_eq!(target["weight"], HIDDEN, "a path the manifest lacks");
        assert_eq!(
            target["provider"], HIDDEN,
            "equal to the manifest's, hidden all the same"
        );
        assert_eq!(
            current["config"]["retry"]["attempts"], 2,
            "a number for a number"
        );
        assert_eq!(current["name"], "theirs", "outside the prefix");
        let mut numbers = json!({"config": {"retry": {"attempts": 2}}});
        assert!(!hide_unconfirmed(&mut numbers, &desired, "/config"));
    }

    /// With cluster access a plan knows the values of the Secrets a manifest names: masking the
    /// manifest's literals by them told which candidate equals one (attack on issue 27).
    #[test]
    fn the_manifest_is_masked_by_path_never_by_a_secret_value() {
        let mut masking = Masking::default();
        masking.reference("/targets/0/account_pin", Some("x7Q2".into()));
        let desired = json!({"targets": [{"account_pin": "(secret pins/pin)",
            "override_params": {"candidate": "x7Q2", "api_key": "sk-own"}}]});
        let shown = masking.masked_by_path(&desired);
        assert_eq!(shown["targets"][0]["override_params"]["candidate"], "x7Q2");
        assert_eq!(shown["targets"][0]["override_params"]["api_key"], MASK);
        // The remote side is still masked by value, wherever the value sits.
        let current = json!({"targets": [{"note": "pin x7Q2"}]});
        assert!(!masking.masked(&current).to_string().contains("x7Q2"));
    }
}
