//! A free-form JSON object kept as its compact text.
//!
//! Every cached resource holds its spec for as long as it exists, and a routing document held as
//! a `serde_json::Map` costs a tree node of about 600 bytes per object level, plus a heap string
//! per key and value: a document of a few keys weighs kilobytes, its text a hundred bytes or so.
//! Reconciles read the document once per pass, so the text is parsed when it is read.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A JSON object as compact text, in the canonical form `serde_json` writes a `Map` (keys
/// sorted), so two equal objects are equal texts.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct JsonObject(Box<str>);

impl JsonObject {
    /// The object, parsed.
    pub fn to_map(&self) -> Map<String, Value> {
        // Only `From<Map>` makes one, so the text is always an object.
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    /// The object as a `Value::Object`.
    pub fn to_value(&self) -> Value {
        Value::Object(self.to_map())
    }

    /// Sets `key` to `value` (the text is written again).
    pub fn insert(&mut self, key: String, value: Value) {
        let mut map = self.to_map();
        map.insert(key, value);
        *self = map.into();
    }

    /// The compact text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for JsonObject {
    fn default() -> Self {
        Self("{}".into())
    }
}

impl From<Map<String, Value>> for JsonObject {
    fn from(map: Map<String, Value>) -> Self {
        Self::from(&map)
    }
}

impl From<&Map<String, Value>> for JsonObject {
    fn from(map: &Map<String, Value>) -> Self {
        // Writing a map of JSON values to a string cannot fail.
        Self(serde_json::to_string(map).unwrap_or_default().into())
    }
}

impl fmt::Debug for JsonObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for JsonObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::<String, Value>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_text_round_trips_and_equal_objects_are_equal_texts() {
        let a: JsonObject = serde_json::from_value(
            json!({"targets": [{"provider": "@a"}], "retry": {"attempts": 3}}),
        )
        .unwrap();
        let b: JsonObject = serde_json::from_str(
            r#"{ "retry": {"attempts": 3}, "targets": [ {"provider": "@a"} ] }"#,
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(
            a.as_str(),
            r#"{"retry":{"attempts":3},"targets":[{"provider":"@a"}]}"#
        );
        assert_eq!(a.to_value()["targets"][0]["provider"], "@a");
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"retry": {"attempts": 3}, "targets": [{"provider": "@a"}]})
        );
        assert!(serde_json::from_value::<JsonObject>(json!([1])).is_err());
        assert_eq!(JsonObject::default().to_map(), Map::new());
    }
}
