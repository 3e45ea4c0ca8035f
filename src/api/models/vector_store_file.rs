//! A vector store file (`GET {gateway_url}/vector_stores/{vs}/files/{file}`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::open_enum::open_enum;
use super::validate::{self, Validate};
use crate::api::error::ApiError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorStoreFile {
    pub id: String,
    /// Always `vector_store.file`.
    #[serde(default = "vector_store_file_object")]
    pub object: String,
    #[serde(default)]
    pub usage_bytes: u64,
    /// Unix time.
    pub created_at: i64,
    pub vector_store_id: String,
    pub status: VectorStoreFileStatus,
    #[serde(default)]
    pub last_error: Option<VectorStoreFileError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunking_strategy: Option<ChunkingStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<VectorStoreFileAttributes>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn vector_store_file_object() -> String {
    "vector_store.file".to_owned()
}

open_enum! {
    pub enum VectorStoreFileStatus {
        InProgress = "in_progress",
        Completed = "completed",
        Cancelled = "cancelled",
        Failed = "failed",
    }
}

/// Set on a file in `failed` state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VectorStoreFileError {
    /// `internal_error` appears; other codes are not shown.
    pub code: String,
    pub message: String,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// How the file was chunked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChunkingStrategy {
    Static {
        #[serde(rename = "static")]
        config: StaticChunking,
        /// Fields not modelled here, kept as sent.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// Files indexed before chunking strategies existed.
    Other {
        /// Fields not modelled here, kept as sent.
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    #[serde(untagged)]
    Unknown(Value),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticChunking {
    pub max_chunk_size_tokens: u32,
    pub chunk_overlap_tokens: u32,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// At most 16 entries; string values at most 512 characters.
pub type VectorStoreFileAttributes = BTreeMap<String, AttributeValue>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AttributeValue {
    Bool(bool),
    Number(f64),
    String(String),
}

/// Checks the attribute limits (a map type cannot implement [`Validate`] here).
pub fn validate_attributes(attributes: &VectorStoreFileAttributes) -> Result<(), ApiError> {
    if attributes.len() > 16 {
        return Err(ApiError::validation(
            "attributes",
            format!("must have at most 16 entries, got {}", attributes.len()),
        ));
    }
    for (key, value) in attributes {
        if let AttributeValue::String(s) = value {
            validate::max_chars(&format!("attributes.{key}"), Some(s), 512)?;
        }
    }
    Ok(())
}

impl Validate for VectorStoreFile {
    fn validate(&self) -> Result<(), ApiError> {
        self.attributes.as_ref().map_or(Ok(()), validate_attributes)
    }
}
