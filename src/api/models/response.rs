//! A stored model response (`GET {base_url}/responses/{response_id}`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::open_enum::open_enum;
use super::output::OutputItem;
use super::tool::{TextFormat, Tool, ToolChoice};
use super::validate::{self, Validate};
use crate::api::error::ApiError;

/// String keys to string values: at most 16 pairs, keys ≤ 64 characters, values ≤ 512.
pub type Metadata = BTreeMap<String, String>;

/// A model response as the gateway stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: String,
    /// Always `response`.
    #[serde(default = "response_object")]
    pub object: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ResponseStatus>,
    /// Unix time in seconds.
    #[serde(serialize_with = "de::whole_f64")]
    pub created_at: f64,
    /// Set when generation failed.
    #[serde(default)]
    pub error: Option<ResponseError>,
    #[serde(default)]
    pub incomplete_details: Option<IncompleteDetails>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub output: Vec<OutputItem>,
    /// Only some client libraries produce it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ResponseUsage>,
    #[serde(default = "default_true", deserialize_with = "de::flag")]
    pub parallel_tool_calls: bool,
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// 0 to 2, default 1.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// 0 to 1, default 1.
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    #[serde(default)]
    pub instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextConfig>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncation: Option<Truncation>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn response_object() -> String {
    "response".to_owned()
}

fn default_true() -> bool {
    true
}

open_enum! {
    /// Status of a response.
    pub enum ResponseStatus {
        Completed = "completed",
        Failed = "failed",
        InProgress = "in_progress",
        Incomplete = "incomplete",
    }
}

open_enum! {
    /// `auto` drops middle input items when the context overflows; `disabled` fails with 400.
    pub enum Truncation {
        Auto = "auto",
        Disabled = "disabled",
    }
}

/// Why a response failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseError {
    pub code: ResponseErrorCode,
    pub message: String,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

open_enum! {
    /// The error codes of a failed response.
    pub enum ResponseErrorCode {
        ServerError = "server_error",
        RateLimitExceeded = "rate_limit_exceeded",
        InvalidPrompt = "invalid_prompt",
        VectorStoreTimeout = "vector_store_timeout",
        InvalidImage = "invalid_image",
        InvalidImageFormat = "invalid_image_format",
        InvalidBase64Image = "invalid_base64_image",
        InvalidImageUrl = "invalid_image_url",
        ImageTooLarge = "image_too_large",
        ImageTooSmall = "image_too_small",
        ImageParseError = "image_parse_error",
        ImageContentPolicyViolation = "image_content_policy_violation",
        InvalidImageMode = "invalid_image_mode",
        ImageFileTooLarge = "image_file_too_large",
        UnsupportedImageMediaType = "unsupported_image_media_type",
        EmptyImageFile = "empty_image_file",
        FailedToDownloadImage = "failed_to_download_image",
        ImageFileNotFound = "image_file_not_found",
    }
}

#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncompleteDetails {
    pub reason: Option<IncompleteReason>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

open_enum! {
    pub enum IncompleteReason {
        MaxOutputTokens = "max_output_tokens",
        ContentFilter = "content_filter",
    }
}

/// Token accounting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseUsage {
    pub input_tokens: u64,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: u64,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputTokensDetails {
    pub cached_tokens: u64,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: u64,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Reasoning options of reasoning models.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Reasoning {
    #[serde(default)]
    pub effort: Option<ReasoningEffort>,
    #[serde(default)]
    pub generate_summary: Option<ReasoningSummary>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

open_enum! {
    pub enum ReasoningEffort {
        Low = "low",
        Medium = "medium",
        High = "high",
    }
}

open_enum! {
    pub enum ReasoningSummary {
        Concise = "concise",
        Detailed = "detailed",
    }
}

/// The `text` field: how the model formats its text output.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TextConfig {
    pub format: Option<TextFormat>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

open_enum! {
    /// Extra data the `include` query parameter adds to a response.
    pub enum Includable {
        FileSearchCallResults = "file_search_call.results",
        MessageInputImageUrl = "message.input_image.image_url",
        ComputerCallOutputImageUrl = "computer_call_output.output.image_url",
    }
}

impl Validate for Response {
    fn validate(&self) -> Result<(), ApiError> {
        validate::range("temperature", self.temperature, 0.0, 2.0)?;
        validate::range("top_p", self.top_p, 0.0, 1.0)?;
        if let Some(metadata) = &self.metadata {
            validate::metadata("metadata", metadata)?;
        }
        for (i, tool) in self.tools.iter().enumerate() {
            tool.validate_at(&format!("tools[{i}]"))?;
        }
        if let Some(format) = self.text.as_ref().and_then(|t| t.format.as_ref()) {
            format.validate()?;
        }
        Ok(())
    }
}
