//! Output items of a response, told apart by `type`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::open_enum::open_enum;
use super::vector_store_file::VectorStoreFileAttributes;

/// One item of `output`. Item kinds this client does not know are kept whole as `Other`; a known
/// kind keeps the fields it does not model in its `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    Message(OutputMessage),
    FileSearchCall(FileSearchCall),
    FunctionCall(FunctionCall),
    WebSearchCall(WebSearchCall),
    ComputerCall(ComputerCall),
    Reasoning(ReasoningItem),
    #[serde(untagged)]
    Other(Value),
}

open_enum! {
    /// Status of an output item. Messages, function and computer calls and reasoning items use
    /// in_progress/completed/incomplete; search calls add searching and failed.
    pub enum ItemStatus {
        InProgress = "in_progress",
        Searching = "searching",
        Completed = "completed",
        Incomplete = "incomplete",
        Failed = "failed",
    }
}

/// An assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputMessage {
    pub id: String,
    /// Always `assistant`.
    #[serde(default = "assistant")]
    pub role: String,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub content: Vec<OutputContent>,
    pub status: ItemStatus,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn assistant() -> String {
    "assistant".to_owned()
}

/// A content part of a message. Unknown kinds are kept whole as `Other`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputContent {
    OutputText {
        text: String,
        /// The seed does not show an annotation's shape.
        #[serde(default, deserialize_with = "de::null_as_empty")]
        annotations: Vec<Value>,
        /// Fields not modelled here, kept as sent.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    Refusal {
        refusal: String,
        /// Fields not modelled here, kept as sent.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    #[serde(untagged)]
    Other(Value),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileSearchCall {
    pub id: String,
    pub status: ItemStatus,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub queries: Vec<String>,
    /// Present when the request included `file_search_call.results`.
    #[serde(default)]
    pub results: Option<Vec<FileSearchResult>>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FileSearchResult {
    pub file_id: Option<String>,
    pub text: Option<String>,
    pub filename: Option<String>,
    pub attributes: Option<VectorStoreFileAttributes>,
    /// 0 to 1.
    pub score: Option<f64>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub id: Option<String>,
    pub call_id: String,
    pub name: String,
    /// The arguments as a JSON string.
    pub arguments: String,
    pub status: Option<ItemStatus>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebSearchCall {
    pub id: String,
    pub status: ItemStatus,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputerCall {
    pub id: String,
    pub call_id: String,
    pub action: ComputerAction,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub pending_safety_checks: Vec<SafetyCheck>,
    pub status: ItemStatus,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SafetyCheck {
    pub id: String,
    pub code: String,
    pub message: String,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What a computer call does. The seed shows the fields of click, double_click and drag; the other
/// kinds (keypress, move, screenshot, scroll, type, wait, and any new one) are kept as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ComputerAction {
    Click {
        button: MouseButton,
        x: i64,
        y: i64,
        /// Fields not modelled here, kept as sent.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    DoubleClick {
        x: i64,
        y: i64,
        /// Fields not modelled here, kept as sent.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    Drag {
        path: Vec<Coordinate>,
        /// Fields beyond `path` are not shown by the seed; kept as sent.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    #[serde(untagged)]
    Other(Value),
}

impl ComputerAction {
    /// The action's `type`.
    pub fn kind(&self) -> &str {
        match self {
            ComputerAction::Click { .. } => "click",
            ComputerAction::DoubleClick { .. } => "double_click",
            ComputerAction::Drag { .. } => "drag",
            ComputerAction::Other(v) => v.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

open_enum! {
    pub enum MouseButton {
        Left = "left",
        Right = "right",
        Wheel = "wheel",
        Back = "back",
        Forward = "forward",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coordinate {
    pub x: i64,
    pub y: i64,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningItem {
    pub id: String,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub summary: Vec<SummaryText>,
    pub status: Option<ItemStatus>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A reasoning summary part; `type` is `summary_text`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryText {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
