//! The data plane (`/v1`): stored model responses and vector store files, preloaded through
//! `/_emulator/seed`. Errors use the OpenAI-style envelope.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Json,
    extract::{Path, Query, State},
};
use serde_json::{Value, json};

use super::common::{
    clock::unix_now,
    errors::{ApiResult, EmulatorError},
    fields::Object,
    state::lock,
};

/// Stored model responses, by id.
pub type Responses = HashMap<String, Value>;
/// Stored vector store files, by (vector store id, file id).
pub type VectorStoreFiles = HashMap<(String, String), Value>;

/// What the data-plane routes reach: what `/_emulator/seed` stored.
#[derive(Clone)]
pub struct GatewayState {
    pub responses: Arc<Mutex<Responses>>,
    pub vector_store_files: Arc<Mutex<VectorStoreFiles>>,
}

const INCLUDABLE: &[&str] = &[
    "file_search_call.results",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
];

/// Fills the required fields of a seeded response with the API's defaults.
pub fn seeded_response(item: &Object) -> Object {
    let mut value = item.clone();
    let defaults = [
        ("object", json!("response")),
        ("status", json!("completed")),
        ("created_at", json!(unix_now())),
        ("error", Value::Null),
        ("incomplete_details", Value::Null),
        ("output", json!([])),
        ("parallel_tool_calls", json!(true)),
        ("metadata", Value::Null),
        ("temperature", json!(1)),
        ("top_p", json!(1)),
        ("model", json!("o1-pro")),
        ("instructions", Value::Null),
        ("tools", json!([])),
        ("tool_choice", json!("auto")),
    ];
    for (field, default) in defaults {
        value.entry(field).or_insert(default);
    }
    value
}

/// Fills the fields of a seeded vector store file.
pub fn seeded_vector_store_file(item: &Object) -> Object {
    let mut value = item.clone();
    let defaults = [
        ("object", json!("vector_store.file")),
        ("usage_bytes", json!(0)),
        ("created_at", json!(unix_now())),
        ("status", json!("completed")),
        ("last_error", Value::Null),
        (
            "chunking_strategy",
            json!({"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}),
        ),
    ];
    for (field, default) in defaults {
        value.entry(field).or_insert(default);
    }
    value
}

/// Reads `include` given as repeated `include=`, `include[]=` or a comma-separated list.
fn includes(query: &[(String, String)]) -> ApiResult<Vec<String>> {
    let mut values = Vec::new();
    for (key, value) in query {
        if key != "include" && key != "include[]" {
            continue;
        }
        for item in value
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            if !INCLUDABLE.contains(&item) {
                return Err(EmulatorError::GatewayInvalid {
                    param: "include",
                    message: format!("include must be one of {}", INCLUDABLE.join(", ")),
                });
            }
            values.push(item.to_owned());
        }
    }
    Ok(values)
}

/// `GET /v1/responses/{response_id}`. File search results are only returned when
/// `include=file_search_call.results` asks for them, as with the upstream API.
pub async fn get_response(
    State(state): State<GatewayState>,
    Path(id): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> ApiResult<Json<Value>> {
    let include = includes(&query)?;
    let mut response = lock(&state.responses).get(&id).cloned().ok_or_else(|| {
        EmulatorError::GatewayNotFound(format!("no response found with id '{id}'"))
    })?;
    let wants_results = include
        .iter()
        .any(|item| item == "file_search_call.results");
    if !wants_results && let Some(output) = response.get_mut("output").and_then(Value::as_array_mut)
    {
        output
            .iter_mut()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("file_search_call"))
            .filter_map(Value::as_object_mut)
            .for_each(|item| {
                item.insert("results".to_owned(), Value::Null);
            });
    }
    Ok(Json(response))
}

/// `GET /v1/vector_stores/{vector_store_id}/files/{file_id}`.
pub async fn get_vector_store_file(
    State(state): State<GatewayState>,
    Path((vector_store_id, file_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    lock(&state.vector_store_files)
        .get(&(vector_store_id.clone(), file_id.clone()))
        .cloned()
        .map(Json)
        .ok_or_else(|| {
            EmulatorError::GatewayNotFound(format!(
                "no file found with id '{file_id}' in vector store '{vector_store_id}'"
            ))
        })
}
