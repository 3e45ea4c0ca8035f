//! What the ApiKey tests share: the resource, its readiness, and the emulator's view of the
//! keys (values in clear, the gateway handshake).

use std::time::Duration;

use aigw::resources::ApiKey;
use k8s_openapi::api::core::v1::Secret;
use kube::Resource;
use serde_json::{Value, json};

use super::harness::Harness;

pub const WAIT: Duration = Duration::from_secs(30);
pub const SERVICE_KEYS: &str = "/ai_gw/v2/api-keys/service";

pub fn ready(k: &ApiKey) -> bool {
    k.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == "Ready" && c.status == "True" && c.observed_generation == k.meta().generation
        })
    })
}

pub fn api_key(name: &str, spec: Value) -> ApiKey {
    serde_json::from_value(json!({"apiVersion": "aigw.io/v1alpha1", "kind": "ApiKey",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

pub fn service_key(name: &str, rotation: Value) -> Value {
    json!({"name": name, "kind": "service", "scopes": ["completions.write"],
           "secretRef": {"name": format!("{name}-key")}, "rotation": rotation})
}

pub async fn create(h: &Harness, name: &str, spec: Value) -> String {
    super::create(&h.env.api(), &api_key(name, spec)).await;
    let created = h.env.wait_for::<ApiKey>(name, WAIT, ready).await;
    created.status.unwrap().id.unwrap()
}

/// Every API key the emulator holds (with values, previous values and `rotations`).
pub async fn remote_keys(h: &Harness) -> Vec<Value> {
    h.state().await["api_keys"].as_array().unwrap().clone()
}

pub async fn remote(h: &Harness, id: &str) -> Value {
    remote_keys(h)
        .await
        .into_iter()
        .find(|k| k["id"] == id)
        .unwrap_or_else(|| panic!("no remote API key {id}"))
}

pub async fn secret_value(h: &Harness, name: &str) -> String {
    let secret = h.env.api::<Secret>().get(name).await.unwrap();
    String::from_utf8(secret.data.unwrap()["api_key"].0.clone()).unwrap()
}

/// Presents `key` for API key `id` as the gateway would: the HTTP status.
pub async fn handshake(h: &Harness, id: &str, key: &str) -> u16 {
    let http = reqwest::Client::new();
    super::gateway_handshake(&http, &h.url(""), ("api-keys", id), json!({ "key": key })).await
}
