//! Reading manifests: files, directories (recursively: `*.yaml`, `*.yml`, `*.json`) and `-` for
//! stdin, each holding one or more YAML documents or one JSON value. A `kind: List` is expanded
//! into its items, as `kubectl apply` does.

use std::cell::RefCell;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::de::DeserializeSeed;
use serde_json::Value;

use super::GitopsError;

/// One manifest and where it came from.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file path as given (or found under a given directory), `-` for stdin.
    pub source: String,
    /// 0-based index of the document within its source.
    pub index: usize,
    /// Index within a `kind: List` document, when it came from one.
    pub item: Option<usize>,
    pub value: Value,
}

impl Document {
    /// `file.yaml#2` or `file.yaml#2.items[3]`: what a problem report points at.
    pub fn location(&self) -> String {
        match self.item {
            Some(item) => format!("{}#{}.items[{item}]", self.source, self.index),
            None => format!("{}#{}", self.source, self.index),
        }
    }
}

/// A document that is not valid YAML or JSON; reported like any other problem.
#[derive(Debug, Clone)]
pub struct ParseFailure {
    pub source: String,
    pub index: usize,
    pub message: String,
}

/// What [`load`] read: the documents, and the ones that could not be parsed.
#[derive(Debug, Default)]
pub struct Loaded {
    pub documents: Vec<Document>,
    pub failures: Vec<ParseFailure>,
}

/// Reads every path (a file, a directory, or `-` for stdin). Unreadable paths are errors;
/// unparsable documents are [`ParseFailure`]s so every other document is still checked.
pub fn load(paths: &[PathBuf]) -> Result<Loaded, GitopsError> {
    let mut loaded = Loaded::default();
    for path in paths {
        if path == Path::new("-") {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(GitopsError::Stdin)?;
            parse_into(&mut loaded, "-", &text, false);
            continue;
        }
        for file in files_under(path)? {
            let text = std::fs::read_to_string(&file).map_err(|error| GitopsError::Read {
                path: file.clone(),
                error,
            })?;
            let is_json = file.extension().is_some_and(|e| e == "json");
            parse_into(&mut loaded, &file.display().to_string(), &text, is_json);
        }
    }
    if loaded.documents.is_empty() && loaded.failures.is_empty() {
        let named: Vec<String> = paths
            .iter()
            .map(|p| match p == Path::new("-") {
                true => "standard input".to_string(),
                false => p.display().to_string(),
            })
            .collect();
        return Err(GitopsError::Empty(named.join(", ")));
    }
    Ok(loaded)
}

/// The path itself when it is a file; otherwise every manifest file below it, sorted so the
/// report order is stable.
fn files_under(path: &Path) -> Result<Vec<PathBuf>, GitopsError> {
    let read_error = |error| GitopsError::Read {
        path: path.to_path_buf(),
        error,
    };
    let meta = std::fs::metadata(path).map_err(read_error)?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(read_error)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_error)?;
    entries.sort();
    let mut files = Vec::new();
    for entry in entries {
        // A link to a directory is not followed (as `kubectl apply -R` walks): a link to `.` or
        // `..` would read the same files again, or forever.
        let link = std::fs::symlink_metadata(&entry).is_ok_and(|m| m.file_type().is_symlink());
        if entry.is_dir() {
            if !link {
                files.extend(files_under(&entry)?);
            }
        } else if entry
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            files.push(entry);
        }
    }
    Ok(files)
}

/// Parses one source's text, appending documents (empty ones skipped) and failures.
pub fn parse_into(loaded: &mut Loaded, source: &str, text: &str, is_json: bool) {
    // A byte-order mark some editors write, which kubectl reads past.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if is_json {
        let mut json = serde_json::Deserializer::from_str(text);
        let twice = RefCell::default();
        let read = Capped(READ_DEPTH, &twice)
            .deserialize(&mut json)
            .and_then(|value| json.end().map(|()| value));
        match read {
            Ok(value) => push_once(loaded, source, 0, value, twice),
            Err(e) => loaded.failures.push(ParseFailure {
                source: source.into(),
                index: 0,
                message: format!("invalid JSON: {e}"),
            }),
        }
        return;
    }
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let twice = RefCell::default();
        match Capped(READ_DEPTH, &twice).deserialize(document) {
            Ok(value) => push_once(loaded, source, index, value, twice),
            Err(e) => {
                loaded.failures.push(ParseFailure {
                    source: source.into(),
                    index,
                    // serde quotes the value a tag made the wrong type (`!!int <a token>`).
                    message: format!(
                        "invalid YAML: {}",
                        crate::api::secret_fields::without_decoded_values(&e.to_string())
                    ),
                });
                // The YAML stream cannot be resumed after a syntax error.
                break;
            }
        }
    }
}

/// How many levels of objects and arrays of a document are read; deeper ones are skipped (the
/// parsers skip with a loop, however deep) and read as `null`. Far past what any field may nest
/// (a free-form field at most [`crate::resources::free_form::MAX_DEPTH`] levels), so a document
/// that deep is refused by the check of the field it is in, which names it, instead of failing
/// to load at the parsers' recursion limit (128 levels), which names nothing.
const READ_DEPTH: usize = 100;

/// [`push`] a document whose keys were each written once; one with a key written `twice` is
/// a failure naming them, as `kubectl apply` refuses it (strict field validation), and the
/// documents after it are still read.
fn push_once(
    loaded: &mut Loaded,
    source: &str,
    index: usize,
    value: Value,
    twice: RefCell<Vec<String>>,
) {
    let twice = twice.into_inner();
    if twice.is_empty() {
        return push(loaded, source, index, value);
    }
    loaded.failures.push(ParseFailure {
        source: source.into(),
        index,
        message: format!("mapping key defined twice: {}", twice.join(", ")),
    });
}

/// A JSON value read at most `.0` levels of objects and arrays deep (see [`READ_DEPTH`]); the
/// keys an object holds twice are added to `.1` (the last value is kept meanwhile).
struct Capped<'t>(usize, &'t RefCell<Vec<String>>);

impl<'de> serde::de::DeserializeSeed<'de> for Capped<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Capped<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.into()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let Some(levels) = self.0.checked_sub(1) else {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        };
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Capped(levels, self.1))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Some(levels) = self.0.checked_sub(1) else {
            while map
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            return Ok(Value::Null);
        };
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                self.1.borrow_mut().push(format!("{key:?}"));
            }
            let value = map.next_value_seed(Capped(levels, self.1))?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

fn push(loaded: &mut Loaded, source: &str, index: usize, mut value: Value) {
    if value.is_null() {
        return;
    }
    let is_list = value["kind"].as_str() == Some("List") && value["items"].is_array();
    if !is_list {
        namespace_unset_when_empty(&mut value);
        loaded.documents.push(Document {
            source: source.into(),
            index,
            item: None,
            value,
        });
        return;
    }
    if let Value::Array(items) = value["items"].clone() {
        for (item, mut value) in items.into_iter().enumerate() {
            namespace_unset_when_empty(&mut value);
            loaded.documents.push(Document {
                source: source.into(),
                index,
                item: Some(item),
                value,
            });
        }
    }
}

/// `metadata.namespace: ""` (or null) is no namespace, as kubectl reads it: the manifest goes
/// to `-n` or the context's namespace.
fn namespace_unset_when_empty(value: &mut Value) {
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut)
        && metadata
            .get("namespace")
            .is_some_and(|ns| ns.is_null() || ns.as_str() == Some(""))
    {
        metadata.remove("namespace");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_namespace_is_no_namespace() {
        let mut loaded = Loaded::default();
        let yaml = "apiVersion: v1\nkind: List\nitems:\n- {kind: A, metadata: {name: a, namespace: ''}}\n- {kind: B, metadata: {name: b, namespace: null}}\n- {kind: C, metadata: {name: c, namespace: team}}\n";
        parse_into(&mut loaded, "x.yaml", yaml, false);
        let namespaces: Vec<Option<&str>> = loaded
            .documents
            .iter()
            .map(|d| {
                d.value["metadata"]
                    .get("namespace")
                    .map(|n| n.as_str().unwrap())
            })
            .collect();
        assert_eq!(namespaces, [None, None, Some("team")]);
    }

    #[test]
    fn multi_document_yaml_keeps_indexes_and_skips_empty_documents() {
        let mut loaded = Loaded::default();
        parse_into(
            &mut loaded,
            "a.yaml",
            "---\nkind: A\n---\n---\nkind: B\n",
            false,
        );
        let found: Vec<(usize, &str)> = loaded
            .documents
            .iter()
            .map(|d| (d.index, d.value["kind"].as_str().unwrap()))
            .collect();
        assert_eq!(found, vec![(0, "A"), (2, "B")]);
    }

    #[test]
    fn a_list_is_expanded_and_bad_yaml_is_a_failure() {
        let mut loaded = Loaded::default();
        parse_into(
            &mut loaded,
            "l.yaml",
            "kind: List\nitems:\n- kind: A\n- kind: B\n---\nkey: [unclosed\n",
            false,
        );
        assert_eq!(loaded.documents[1].location(), "l.yaml#0.items[1]");
        assert_eq!(loaded.failures.len(), 1);
        assert_eq!(loaded.failures[0].index, 1);
    }

    /// A key written twice is a failure naming it, in YAML and in JSON; the last one does not
    /// silently win.
    #[test]
    fn a_key_written_twice_is_a_failure() {
        let mut loaded = Loaded::default();
        let yaml = "kind: A\nspec:\n  value: 10\n  value: 20\n";
        parse_into(&mut loaded, "d.yaml", yaml, false);
        parse_into(&mut loaded, "d.json", r#"{"kind": "A", "kind": "B"}"#, true);
        assert!(loaded.documents.is_empty(), "{:?}", loaded.documents);
        let messages: Vec<&str> = loaded.failures.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[0], r#"mapping key defined twice: "value""#);
        assert_eq!(messages[1], r#"mapping key defined twice: "kind""#);
        // The documents after one with a key twice are still read.
        parse_into(
            &mut loaded,
            "e.yaml",
            "kind: A\nkind: A\n---\nkind: B\n",
            false,
        );
        assert_eq!(loaded.documents.len(), 1, "{:?}", loaded.documents);
    }
}
