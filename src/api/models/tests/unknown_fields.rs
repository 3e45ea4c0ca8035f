//! Every read model keeps the fields it does not name: decoding an answer and serialising the
//! model again (what `aigw api` prints) gives back every field that came in, at every depth.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::api::models::*;

/// The field added to every object of a sample; no model names it.
const UNKNOWN: &str = "x_added_later";

/// Fields whose objects have no catch-all: request body parts the operator builds field by field.
const LEAN: &[&str] = &["conditions", "group_by"];

fn decode<T: DeserializeOwned>(sent: &Value) -> T {
    serde_json::from_value(sent.clone()).expect("sample decodes")
}

fn printed<T: Serialize>(model: &T) -> Value {
    serde_json::to_value(model).expect("model serialises")
}

/// Decodes as `T` and serialises again.
fn round_trip<T: DeserializeOwned + Serialize>(sent: &Value) -> Value {
    printed(&decode::<T>(sent))
}

/// Adds [`UNKNOWN`] to every object of `value`, except below the fields named in [`LEAN`].
fn with_unknown_fields(mut value: Value) -> Value {
    fn add(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.iter_mut()
                    .filter(|(key, _)| !LEAN.contains(&key.as_str()))
                    .for_each(|(_, child)| add(child));
                map.insert(UNKNOWN.to_owned(), json!("kept"));
            }
            Value::Array(items) => items.iter_mut().for_each(add),
            _ => {}
        }
    }
    add(&mut value);
    value
}

/// JSON Pointers of what `sent` has and `printed` lacks or shows differently.
fn lost(sent: &Value, printed: &Value, at: &str, out: &mut Vec<String>) {
    match (sent, printed) {
        (Value::Object(s), Value::Object(p)) => {
            for (key, value) in s {
                let at = format!("{at}/{key}");
                match p.get(key) {
                    Some(kept) => lost(value, kept, &at, out),
                    None => out.push(at),
                }
            }
        }
        (Value::Array(s), Value::Array(p)) if s.len() == p.len() => {
            for (i, (value, kept)) in s.iter().zip(p).enumerate() {
                lost(value, kept, &format!("{at}/{i}"), out);
            }
        }
        _ if sent != printed => out.push(at.to_owned()),
        _ => {}
    }
}

/// A response with every output item, content part, tool and option the seed names, in the form
/// the models write it (flags as booleans, whole numbers without a fraction).
fn response_sample() -> Value {
    json!({
        "id": "resp_1", "object": "response", "status": "completed", "created_at": 1741476542,
        "error": {"code": "server_error", "message": "m"},
        "incomplete_details": {"reason": "content_filter"},
        "output": [
            {"type": "reasoning", "id": "rs_1", "status": "completed",
             "summary": [{"type": "summary_text", "text": "Looked it up."}]},
            {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"],
             "results": [{"file_id": "f1", "text": "t", "filename": "a.md", "score": 0.5,
                          "attributes": {"lang": "en", "public": true}}]},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
             "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
            {"type": "computer_call", "id": "cc_1", "call_id": "call_2", "status": "completed",
             "action": {"type": "click", "button": "left", "x": 10, "y": 20},
             "pending_safety_checks": [{"id": "sc_1", "code": "malicious_instructions", "message": "m"}]},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [
                 {"type": "output_text", "text": "Sunny.", "annotations": [{"type": "file_citation", "index": 0}]},
                 {"type": "refusal", "refusal": "No."}
             ]},
            {"type": "image_generation_call", "id": "ig_1", "status": "completed"}
        ],
        "output_text": "Sunny.",
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 2},
                  "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 1},
                  "total_tokens": 15},
        "parallel_tool_calls": true, "metadata": {"team": "a"}, "temperature": 1.5, "top_p": 0.5,
        "user": "u-1", "previous_response_id": "resp_0", "model": "o1-pro",
        "reasoning": {"effort": "high", "generate_summary": "concise"},
        "max_output_tokens": 1000, "instructions": "Be brief.",
        "text": {"format": {"type": "json_schema", "name": "weather", "description": "d",
                            "schema": {"type": "object"}, "strict": true}},
        "tools": [
            {"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 20,
             "filters": {"type": "and", "filters": [
                 {"type": "eq", "key": "lang", "value": "en"},
                 {"type": "gte", "key": "year", "value": 2024.5}
             ]},
             "ranking_options": {"ranker": "auto", "score_threshold": 0.5}},
            {"type": "function", "name": "get_weather", "description": "d",
             "parameters": {"type": "object"}, "strict": true},
            {"type": "computer_use_preview", "display_width": 1024, "display_height": 768,
             "environment": "browser"},
            {"type": "web_search_preview", "search_context_size": "low",
             "user_location": {"type": "approximate", "country": "FR", "region": "IDF",
                               "city": "Paris", "timezone": "Europe/Paris"}},
            {"type": "mcp", "server_label": "x"}
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "truncation": "auto"
    })
}

fn deployment_sample() -> Value {
    json!({
        "id": "d-1", "name": "edge", "slug": "dp-edge-1", "type": "production", "status": "active",
        "is_default": true, "connection_status": "healthy", "created_by": "u-1",
        "created_at": "2026-09-01T10:00:00.000Z", "last_updated_at": "2026-09-02T10:00:00.000Z",
        "last_synced_at": "2026-09-03T10:00:00.000Z", "last_resynced_at": "2026-09-03T11:00:00.000Z",
        "tags": {"env": "prod"}, "object": "deployment",
        "auth_settings": {
            "gateway_base_url": "https://gw", "mcp_gateway_base_url": "https://mcp",
            "private_link_endpoint": "pl", "use_private_link_proxy": false,
            "is_dataservice_hosted": false, "is_playground_proxy_allowed": true,
            "disable_service_gateway": false, "workspaces_allowed": ["ws-1"],
            "jwt_subs_allowed": ["svc-a"], "jwt_sub_workspace_mapping": {"svc-a": "ws-1"},
            "allow_all_workspaces": false
        },
        "deployment_config": {"replicas": 2},
        "workspaces": [{"id": "w-1", "slug": "ws-1"}],
        "credentials": {"username": "edge", "password": "********"},
        "client_auth": "********"
    })
}

/// A deployment list row: the deployment without the fields only its detail read has.
fn deployment_row_sample() -> Value {
    let mut row = deployment_sample();
    let row_map = row.as_object_mut().unwrap();
    for detail_only in [
        "auth_settings",
        "deployment_config",
        "workspaces",
        "credentials",
        "client_auth",
    ] {
        row_map.remove(detail_only);
    }
    row
}

fn config_sample() -> Value {
    json!({
        "id": "c-1", "name": "routing", "slug": "pc-routing-1", "status": "active",
        "workspace_id": "w-1", "organisation_id": "o-1", "is_default": false, "owner_id": "u-1",
        "updated_by": "u-2", "created_at": "2026-09-01T10:00:00.000Z",
        "last_updated_at": "2026-09-02T10:00:00.000Z", "object": "config"
    })
}

fn config_detail_sample() -> Value {
    let mut detail = config_sample();
    let more = json!({"config": {"retry": {"attempts": 3}}, "version_id": "v-1", "format": "json",
                      "type": "ORG_CONFIG"});
    detail
        .as_object_mut()
        .unwrap()
        .extend(more.as_object().unwrap().clone());
    detail
}

/// Decodes a sample as one model and serialises it again.
type RoundTrip = fn(&Value) -> Value;

/// Every read model with a sample answer, by the name of the model decoded.
fn samples() -> Vec<(&'static str, RoundTrip, Value)> {
    let mut version = config_detail_sample();
    version["version_created_at"] = json!("2026-09-02T10:00:00.000Z");
    version["version_owner_id"] = json!("u-1");
    vec![
        ("Response", round_trip::<Response>, response_sample()),
        (
            "ToolChoice (hosted)",
            round_trip::<ToolChoice>,
            json!({"type": "file_search"}),
        ),
        (
            "TextFormat (text)",
            round_trip::<TextFormat>,
            json!({"type": "text"}),
        ),
        (
            "TextFormat (json_object)",
            round_trip::<TextFormat>,
            json!({"type": "json_object"}),
        ),
        (
            "ComputerAction (double_click)",
            round_trip::<ComputerAction>,
            json!({"type": "double_click", "x": 1, "y": 2}),
        ),
        (
            "ComputerAction (drag)",
            round_trip::<ComputerAction>,
            json!({"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}),
        ),
        (
            "VectorStoreFile",
            round_trip::<VectorStoreFile>,
            json!({
                "id": "file-1", "object": "vector_store.file", "usage_bytes": 1024,
                "created_at": 1741476542, "vector_store_id": "vs_1", "status": "failed",
                "last_error": {"code": "internal_error", "message": "m"},
                "chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}},
                "attributes": {"lang": "en"}
            }),
        ),
        (
            "ChunkingStrategy (other)",
            round_trip::<ChunkingStrategy>,
            json!({"type": "other"}),
        ),
        ("Deployment", round_trip::<Deployment>, deployment_sample()),
        (
            "DeploymentSummary",
            round_trip::<DeploymentSummary>,
            deployment_row_sample(),
        ),
        (
            "DeploymentCreated",
            round_trip::<DeploymentCreated>,
            json!({"id": "d-1", "slug": "dp-edge-1", "organisation_id": "1234", "client_auth": "ca",
                   "credentials": {"username": "edge", "password": "pw"}, "object": "deployment"}),
        ),
        (
            "DeploymentUpdated",
            round_trip::<DeploymentUpdated>,
            json!({"id": "d-1", "client_auth": "ca2", "credentials": {"username": "edge", "password": "pw2"}}),
        ),
        (
            "ConfigSummary",
            round_trip::<ConfigSummary>,
            config_sample(),
        ),
        (
            "ConfigDetail",
            round_trip::<ConfigDetail>,
            config_detail_sample(),
        ),
        ("ConfigVersion", round_trip::<ConfigVersion>, version),
        (
            "ConfigCreated",
            round_trip::<ConfigCreated>,
            json!({"id": "c-1", "slug": "pc-routing-1", "version_id": "v-1", "object": "config"}),
        ),
        (
            "ConfigUpdated",
            round_trip::<ConfigUpdated>,
            json!({"version_id": "v-2", "id": "c-1", "slug": "pc-routing-1"}),
        ),
        (
            "GuardrailList",
            round_trip::<GuardrailList>,
            json!({"object": "list", "total": 1, "data": [{
                "id": "g-1", "name": "pii", "slug": "pii-1", "created_at": "2026-09-01T10:00:00.000Z",
                "last_updated_at": "2026-09-02T10:00:00.000Z", "owner_id": "u-1", "target": "llm",
                "organisation_id": "o-1", "workspace_id": "w-1", "status": "active", "updated_by": "u-2"
            }]}),
        ),
        (
            "RateLimitsPolicy",
            round_trip::<RateLimitsPolicy>,
            json!({
                "id": "p-1", "name": "per-key", "description": "d",
                "conditions": [{"key": "workspace_id", "value": "ws-1", "excludes": ["ws-2"]}],
                "group_by": [{"key": "api_key"}], "type": "requests", "unit": "rpm", "value": 100,
                "status": "active", "target": "llm", "workspace_id": "w-1", "organisation_id": "o-1",
                "created_at": "2026-09-01T10:00:00.000Z", "last_updated_at": "2026-09-02T10:00:00.000Z"
            }),
        ),
        (
            "UsageLimitsPolicy",
            round_trip::<UsageLimitsPolicy>,
            json!({
                "id": "u-1", "name": "budget", "description": "d",
                "conditions": [{"key": "workspace_id", "value": "ws-1"}], "group_by": [{"key": "api_key"}],
                "type": "cost", "credit_limit": 100, "alert_threshold": 80, "periodic_reset": "monthly",
                "periodic_reset_days": 30, "next_usage_reset_at": "2026-12-01T00:00:00.000Z",
                "last_reset_at": "2026-11-01T00:00:00.000Z", "status": "active", "workspace_id": "w-1",
                "organisation_id": "o-1", "created_at": "2026-09-01T10:00:00.000Z",
                "last_updated_at": "2026-09-02T10:00:00.000Z", "value_key_usage_map": {"k": {"current_usage": 3}}
            }),
        ),
        (
            "UsageEntity",
            round_trip::<UsageEntity>,
            json!({"id": "e-1", "value_key": "k", "current_usage": 3.5, "status": "active"}),
        ),
        (
            "GuardrailDetails",
            round_trip::<GuardrailDetails>,
            json!({
                "id": "g-1", "name": "pii", "slug": "pg-pii-1a2b3c", "target": "llm", "workspace_id": "w-1",
                "organisation_id": "o-1", "status": "active", "version_id": "v-1",
                "checks": [{"id": "default.regexMatch", "parameters": {"rule": "x"}, "is_enabled": true}],
                "actions": {"deny": true, "async": false, "sequential": false},
                "created_at": "2026-09-01T10:00:00.000Z", "last_updated_at": "2026-09-02T10:00:00.000Z"
            }),
        ),
        (
            "GuardrailWritten",
            round_trip::<GuardrailWritten>,
            json!({"id": "g-1", "slug": "pg-pii-1a2b3c", "version_id": "v-2"}),
        ),
        (
            "PolicyCreated",
            round_trip::<PolicyCreated>,
            json!({"id": "p-1", "object": "policy_rate_limits"}),
        ),
        (
            "ErrorEnvelope",
            round_trip::<ErrorEnvelope>,
            json!({"error": {"code": "c", "message": "m", "param": "p", "type": "invalid_request_error"}}),
        ),
    ]
}

#[test]
fn samples_round_trip_as_they_are() {
    for (model, round_trip, sample) in samples() {
        assert_eq!(round_trip(&sample), sample, "{model}");
    }
}

#[test]
fn every_model_keeps_unknown_fields_at_every_depth() {
    for (model, round_trip, sample) in samples() {
        let sent = with_unknown_fields(sample);
        let printed = round_trip(&sent);
        let mut missing = Vec::new();
        lost(&sent, &printed, "", &mut missing);
        assert!(missing.is_empty(), "{model} lost {missing:?}");
        assert_eq!(printed, sent, "{model} added fields");
    }
}

#[test]
fn web_search_call_keeps_its_action() {
    let sent = json!({
        "type": "web_search_call", "id": "ws_1", "status": "completed",
        "action": {"type": "search", "query": "weather paris",
                   "sources": [{"type": "url", "url": "https://example.com"}]}
    });
    let item: OutputItem = decode(&sent);
    let OutputItem::WebSearchCall(call) = &item else {
        panic!("a known kind stays typed: {item:?}")
    };
    assert_eq!(call.status, ItemStatus::Completed);
    assert_eq!(call.extra["action"]["query"], "weather paris");
    assert_eq!(printed(&item), sent);
}

#[test]
fn output_text_keeps_logprobs() {
    let sent = json!({
        "type": "output_text", "text": "Hi", "annotations": [],
        "logprobs": [{"token": "Hi", "logprob": -0.01, "bytes": [72, 105], "top_logprobs": []}]
    });
    let part: OutputContent = decode(&sent);
    let OutputContent::OutputText { text, extra, .. } = &part else {
        panic!("a known kind stays typed: {part:?}")
    };
    assert_eq!(text, "Hi");
    assert_eq!(extra["logprobs"][0]["logprob"], -0.01);
    assert_eq!(printed(&part), sent);
}

#[test]
fn usage_keeps_cache_write_tokens() {
    let sent = json!({
        "input_tokens": 10, "input_tokens_details": {"cached_tokens": 2, "cache_write_tokens": 5},
        "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 1}, "total_tokens": 13
    });
    let usage: ResponseUsage = decode(&sent);
    assert_eq!(usage.input_tokens_details.cached_tokens, 2);
    assert_eq!(usage.input_tokens_details.extra["cache_write_tokens"], 5);
    assert_eq!(printed(&usage), sent);
}

#[test]
fn unknown_item_kinds_are_kept_whole() {
    let sent = json!({"type": "code_interpreter_call", "id": "ci_1", "code": "print(1)"});
    let item: OutputItem = decode(&sent);
    assert!(matches!(&item, OutputItem::Other(v) if v == &sent));
    assert_eq!(printed(&item), sent);
}

#[test]
fn unknown_deployment_fields_are_printed_but_not_debugged() {
    let mut sent = deployment_sample();
    sent["gateway_token"] = json!("s3cr3t-token");
    sent["credentials"]["api_key"] = json!("s3cr3t-key");
    let deployment: Deployment = decode(&sent);
    let debug = format!("{deployment:?}");
    assert!(
        debug.contains("gateway_token") && debug.contains("api_key"),
        "{debug}"
    );
    assert!(!debug.contains("s3cr3t"), "{debug}");
    assert_eq!(printed(&deployment), sent);
}
