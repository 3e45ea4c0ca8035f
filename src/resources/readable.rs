//! Objects decoded one at a time, so that one this build cannot read does not fail a whole list.
//!
//! kube-client decodes a list page, and each watch event, with `serde_json::from_str`, whose
//! recursion limit is 128 levels counted from the page's envelope, while the apiserver stores
//! JSON nested up to 10,000 levels deep. One object nested deeper than that (or of a shape this
//! build does not know, written under an older or looser CRD) failed its whole page: the kind's
//! watch could not list again, every cache of the kind stayed unlisted, and nothing of the kind
//! reconciled in any namespace.
//!
//! [`Readable<K>`] is what a watch or a list asks for instead of `K`. It takes each object as raw
//! text first — serde_json skips raw text with a loop, not recursion, and with no depth limit —
//! and then decodes that text as `K` on its own, with a recursion budget of its own. An object
//! that does not decode becomes [`Unreadable`]: its identity, why, and its text, for the caller
//! to report and leave out. This keeps kube-runtime's watcher (paging, resume, relist on 410,
//! bookmarks) as it is, and needs no unbounded-depth decoder: no nested value is ever built
//! deeper than serde_json's own limit. The price is one more copy of each object's text while
//! it is decoded.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::DynamicResourceScope;
use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The deepest nesting `K` can be decoded from: serde_json's recursion limit, counted from the
/// object itself.
pub const DECODABLE_DEPTH: usize = 127;

/// An object of kind `K` as a list or a watch gave it: decoded, or why it could not be.
#[derive(Clone, Debug)]
pub enum Readable<K> {
    Object(K),
    Unreadable(Box<Unreadable>),
}

/// An object that did not decode as its kind.
#[derive(Clone, Debug)]
pub struct Unreadable {
    /// Its namespace, name, uid and resourceVersion (whatever of them could be read).
    pub meta: ObjectMeta,
    /// Why it could not be read, naming the field where that is known.
    pub reason: String,
    /// The object's JSON text, for a caller that needs only part of it (see [`Unreadable::part`]).
    pub text: Arc<str>,
}

impl<K: DeserializeOwned> Readable<K> {
    /// Decodes one object's JSON text.
    pub fn from_text(text: &str) -> Self {
        match serde_json::from_str::<K>(text) {
            Ok(object) => Self::Object(object),
            Err(error) => Self::Unreadable(Box::new(Unreadable::new(text, &error))),
        }
    }
}

/// Splits decoded objects from unreadable ones.
pub fn partition<K>(items: impl IntoIterator<Item = Readable<K>>) -> (Vec<K>, Vec<Unreadable>) {
    let mut objects = Vec::new();
    let mut unreadable = Vec::new();
    for item in items {
        match item {
            Readable::Object(object) => objects.push(object),
            Readable::Unreadable(u) => unreadable.push(*u),
        }
    }
    (objects, unreadable)
}

impl Unreadable {
    /// An object whose handling panicked once it decoded (a bug in aigw), kept out of the watch
    /// cache as one that did not decode; `meta`, what of it identifies it, and `text`, its JSON
    /// (empty when even that failed).
    pub fn panicked(meta: ObjectMeta, text: &str) -> Self {
        Self {
            meta,
            reason: "aigw panicked while taking it into the watch cache (a bug in aigw: please \
                     report it with the operator's log)"
                .into(),
            text: Arc::from(text),
        }
    }

    fn new(text: &str, error: &serde_json::Error) -> Self {
        // Only the fields named here are decoded; serde_json skips the rest (however deep)
        // without recursing.
        #[derive(Deserialize, Default)]
        struct Identity {
            #[serde(default)]
            metadata: IdentityMeta,
            #[serde(default)]
            spec: BTreeMap<String, Box<RawValue>>,
        }
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct IdentityMeta {
            name: Option<String>,
            namespace: Option<String>,
            uid: Option<String>,
            resource_version: Option<String>,
            annotations: Option<BTreeMap<String, String>>,
        }
        let identity: Identity = serde_json::from_str(text).unwrap_or_default();
        let too_deep = identity
            .spec
            .iter()
            .map(|(field, raw)| (field, nesting_depth(raw.get())))
            .filter(|(_, depth)| *depth > DECODABLE_DEPTH - 2)
            .max_by_key(|(_, depth)| *depth);
        let reason = match too_deep {
            Some((field, depth)) => format!(
                "spec.{field} is nested {depth} levels deep, deeper than aigw can read ({DECODABLE_DEPTH} levels counted from the object); new objects are refused at admission past {} levels: make the field shallower, or delete the object",
                super::free_form::MAX_DEPTH
            ),
            None => format!(
                "it does not decode as this kind: {}",
                crate::api::secret_fields::without_decoded_values(&error.to_string())
            ),
        };
        let meta = identity.metadata;
        Self {
            meta: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                uid: meta.uid,
                resource_version: meta.resource_version,
                annotations: meta.annotations,
                ..Default::default()
            },
            reason,
            text: text.into(),
        }
    }

    /// `namespace/name`, or `name` for a cluster-scoped object.
    pub fn display_name(&self) -> String {
        let name = self.meta.name.as_deref().unwrap_or("?");
        match &self.meta.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        }
    }

    /// The fields of the object that `T` names (serde_json skips the others, however deep).
    pub fn part<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.text)
    }
}

/// How deeply objects and arrays nest in a JSON text (0 for a scalar), counted with a loop, so
/// any depth is measured without recursion. The text is assumed to be valid JSON.
pub fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Readable<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Ok(Self::from_text(raw.get()))
    }
}

impl<K: Serialize> Serialize for Readable<K> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Object(object) => object.serialize(serializer),
            Self::Unreadable(unreadable) => {
                let raw: Box<RawValue> = RawValue::from_string(unreadable.text.to_string())
                    .map_err(serde::ser::Error::custom)?;
                raw.serialize(serializer)
            }
        }
    }
}

/// The kind of `K`; its scope is left to the `Api` it is used with ([`readable_api`]).
impl<K: kube::Resource<DynamicType = ()>> kube::Resource for Readable<K> {
    type DynamicType = ();
    type Scope = DynamicResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        K::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        K::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        K::version(&())
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        K::api_version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        K::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        match self {
            Self::Object(object) => object.meta(),
            Self::Unreadable(unreadable) => &unreadable.meta,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Self::Object(object) => object.meta_mut(),
            Self::Unreadable(unreadable) => &mut unreadable.meta,
        }
    }
}

/// The objects of kind `K` in `namespace` (all namespaces, or a cluster-scoped kind, for
/// `None`), read one by one.
pub fn readable_api<K: kube::Resource<DynamicType = ()>>(
    client: &kube::Client,
    namespace: Option<&str>,
) -> kube::Api<Readable<K>> {
    match namespace {
        Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &()),
        None => kube::Api::all_with(client.clone(), &()),
    }
}

/// Every object of kind `K` in `namespace` (see [`readable_api`]), and those that did not decode.
pub async fn list_readable<K>(
    client: &kube::Client,
    namespace: Option<&str>,
) -> Result<(Vec<K>, Vec<Unreadable>), kube::Error>
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned + Clone + std::fmt::Debug,
{
    let list = readable_api::<K>(client, namespace)
        .list(&Default::default())
        .await?;
    Ok(partition(list.items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Config;
    use kube::core::ObjectList;
    use kube::core::watch::WatchEvent;

    /// `{"a":{"a":…{"leaf":1}…}}`, `levels` objects deep.
    pub(crate) fn nested(levels: usize) -> serde_json::Value {
        let mut value = serde_json::json!(1);
        for _ in 0..levels {
            value = serde_json::json!({ "a": value });
        }
        value
    }

    fn config_text(name: &str, document: serde_json::Value) -> String {
        serde_json::json!({
            "apiVersion": "aigw.io/v1alpha1",
            "kind": "Config",
            "metadata": {"name": name, "namespace": "tenant-a", "uid": format!("uid-{name}"), "resourceVersion": "7"},
            "spec": {"name": name, "config": document},
        })
        .to_string()
    }

    /// The text of a deep document, written without building a deep `Value` (whose recursive
    /// `Drop` and serializer are what this module avoids).
    fn deep_config_text(name: &str, levels: usize) -> String {
        let document = format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels));
        config_text(name, serde_json::json!("PLACEHOLDER"))
            .replace("\"PLACEHOLDER\"", &format!("{{\"metadata\":{document}}}"))
    }

    #[test]
    fn a_page_with_one_object_too_deep_decodes_the_others_and_names_the_deep_one() {
        let page = format!(
            r#"{{"apiVersion":"aigw.io/v1alpha1","kind":"ConfigList","metadata":{{"resourceVersion":"9"}},"items":[{},{},{}]}}"#,
            config_text("before", nested(3)),
            deep_config_text("deep", 150),
            config_text("after", nested(20)),
        );
        // What kube-client does today with `ObjectList<Config>`: the whole page fails.
        let whole = serde_json::from_str::<ObjectList<Config>>(&page);
        assert!(whole.is_err(), "serde_json decoded a 150-deep page");

        let list: ObjectList<Readable<Config>> = serde_json::from_str(&page).unwrap();
        assert_eq!(list.metadata.resource_version.as_deref(), Some("9"));
        let (objects, unreadable) = partition(list.items);
        let names: Vec<_> = objects
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["before", "after"]);
        assert_eq!(unreadable.len(), 1);
        let bad = &unreadable[0];
        assert_eq!(bad.display_name(), "tenant-a/deep");
        assert_eq!(bad.meta.uid.as_deref(), Some("uid-deep"));
        assert_eq!(bad.meta.resource_version.as_deref(), Some("7"));
        let reason = &bad.reason;
        assert!(
            reason.contains("spec.config is nested 151 levels deep"),
            "{reason}"
        );
    }

    #[test]
    fn a_watch_event_of_an_object_too_deep_is_unreadable_not_an_error() {
        let line = format!(
            r#"{{"type":"MODIFIED","object":{}}}"#,
            deep_config_text("deep", 200)
        );
        let event: WatchEvent<Readable<Config>> = serde_json::from_str(&line).unwrap();
        let WatchEvent::Modified(Readable::Unreadable(bad)) = event else {
            panic!("expected an unreadable Modified event");
        };
        assert_eq!(bad.meta.name.as_deref(), Some("deep"));
    }

    #[test]
    fn an_object_of_another_shape_is_unreadable_with_the_decoder_s_reason() {
        let mut object: serde_json::Value =
            serde_json::from_str(&config_text("odd", nested(1))).unwrap();
        object["spec"]["name"] = serde_json::json!(7);
        let text = object.to_string();
        let Readable::<Config>::Unreadable(bad) = Readable::from_text(&text) else {
            panic!("decoded a Config with a numeric spec.name");
        };
        let reason = &bad.reason;
        assert!(
            reason.starts_with("it does not decode as this kind"),
            "{reason}"
        );
    }

    #[test]
    fn nesting_depth_ignores_brackets_inside_strings() {
        assert_eq!(nesting_depth("1"), 0);
        assert_eq!(nesting_depth(r#"{"a":[1,{"b":"{[[\"]"}]}"#), 3);
        assert_eq!(nesting_depth(&"[".repeat(5000)), 5000);
    }
}
