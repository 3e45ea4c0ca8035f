//! Tools, tool choice and text formats of a response.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::open_enum::open_enum;
use super::validate::{self, Validate};
use crate::api::error::ApiError;

/// A tool the model may call, told apart by `type`. Unknown tool kinds are kept whole as `Other`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Tool {
    #[serde(rename = "file_search")]
    FileSearch(FileSearchTool),
    #[serde(rename = "function")]
    Function(FunctionTool),
    #[serde(rename = "computer_use_preview")]
    ComputerUsePreview(ComputerTool),
    #[serde(rename = "web_search_preview")]
    WebSearchPreview(WebSearchTool),
    #[serde(rename = "web_search_preview_2025_03_11")]
    WebSearchPreview20250311(WebSearchTool),
    #[serde(untagged)]
    Other(Value),
}

impl Tool {
    pub(crate) fn validate_at(&self, field: &str) -> Result<(), ApiError> {
        let Tool::FileSearch(fs) = self else {
            return Ok(());
        };
        validate::range(
            &format!("{field}.max_num_results"),
            fs.max_num_results.map(u64::from),
            1,
            50,
        )?;
        let threshold = fs.ranking_options.as_ref().and_then(|r| r.score_threshold);
        validate::range(
            &format!("{field}.ranking_options.score_threshold"),
            threshold,
            0.0,
            1.0,
        )
    }
}

impl Validate for Tool {
    fn validate(&self) -> Result<(), ApiError> {
        self.validate_at("tool")
    }
}

#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FileSearchTool {
    pub vector_store_ids: Vec<String>,
    /// 1 to 50 inclusive.
    pub max_num_results: Option<u32>,
    pub filters: Option<Filter>,
    pub ranking_options: Option<RankingOptions>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RankingOptions {
    pub ranker: Option<Ranker>,
    /// 0 to 1, default 0.
    pub score_threshold: Option<f64>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

open_enum! {
    pub enum Ranker {
        Auto = "auto",
        Default20241115 = "default-2024-11-15",
    }
}

/// A file search filter: one comparison, or `and`/`or` over further filters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Filter {
    Comparison(ComparisonFilter),
    Compound(CompoundFilter),
    /// The seed allows generic objects inside compound filters.
    Other(Value),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonFilter {
    #[serde(rename = "type")]
    pub op: ComparisonOp,
    pub key: String,
    pub value: FilterValue,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonOp {
    #[default]
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
}

/// A string, number or boolean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FilterValue {
    Bool(bool),
    Number(f64),
    String(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompoundFilter {
    #[serde(rename = "type")]
    pub op: LogicalOp,
    pub filters: Vec<Filter>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogicalOp {
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionTool {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// A JSON Schema object.
    pub parameters: Value,
    #[serde(default = "default_true", deserialize_with = "de::flag")]
    pub strict: bool,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputerTool {
    #[serde(serialize_with = "de::whole_f64")]
    pub display_width: f64,
    #[serde(serialize_with = "de::whole_f64")]
    pub display_height: f64,
    pub environment: ComputerEnvironment,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

open_enum! {
    pub enum ComputerEnvironment {
        Mac = "mac",
        Windows = "windows",
        Ubuntu = "ubuntu",
        Browser = "browser",
    }
}

#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WebSearchTool {
    pub user_location: Option<UserLocation>,
    pub search_context_size: Option<SearchContextSize>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An approximate location; `type` is always `approximate`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserLocation {
    #[serde(rename = "type", default = "approximate")]
    pub kind: String,
    /// Two-letter ISO 3166-1 code.
    pub country: Option<String>,
    pub region: Option<String>,
    pub city: Option<String>,
    /// IANA time zone name.
    pub timezone: Option<String>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn approximate() -> String {
    "approximate".to_owned()
}

open_enum! {
    pub enum SearchContextSize {
        Low = "low",
        Medium = "medium",
        High = "high",
    }
}

/// `tool_choice`: a mode string, a hosted tool, or a named function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    Mode(ToolChoiceMode),
    Function(ToolChoiceFunction),
    Hosted(ToolChoiceHosted),
    Other(Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoiceMode {
    /// No tool call.
    None,
    /// The model decides.
    Auto,
    /// At least one tool call.
    Required,
}

/// `{"type": "function", "name": …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolChoiceFunction {
    #[serde(rename = "type")]
    pub kind: FunctionKind,
    pub name: String,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The literal `function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FunctionKind {
    #[default]
    #[serde(rename = "function")]
    Function,
}

/// `{"type": "file_search"}` and the other hosted tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolChoiceHosted {
    #[serde(rename = "type")]
    pub kind: HostedTool,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostedTool {
    FileSearch,
    WebSearchPreview,
    ComputerUsePreview,
    #[serde(rename = "web_search_preview_2025_03_11")]
    WebSearchPreview20250311,
}

/// A text response format configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TextFormat {
    /// The default.
    Text {
        /// Fields not modelled here, kept as sent.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    JsonSchema(JsonSchemaFormat),
    /// The older JSON mode.
    JsonObject {
        /// Fields not modelled here, kept as sent.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    #[serde(untagged)]
    Other(Value),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonSchemaFormat {
    /// Letters, digits, underscores and dashes; at most 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub schema: Value,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub strict: Option<bool>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Validate for TextFormat {
    fn validate(&self) -> Result<(), ApiError> {
        match self {
            TextFormat::JsonSchema(JsonSchemaFormat {
                name: Some(name), ..
            }) => validate::schema_name("text.format.name", name),
            _ => Ok(()),
        }
    }
}
