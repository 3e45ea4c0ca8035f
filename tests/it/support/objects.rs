//! Building aigw objects and reading their conditions, for the newer integration tests.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use serde_json::{Value, json};

/// Workspace ids the tests share (the emulator takes any UUID it is given).
pub const WS_A: &str = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";
pub const WS_B: &str = "0b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d";
pub const WS_OTHER: &str = "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c";
/// The user the API-key tests give user keys to.
pub const USER_ID: &str = "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c";

pub fn object<K: serde::de::DeserializeOwned>(kind: &str, name: &str, spec: Value) -> K {
    serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

/// The conditions of any aigw object.
pub trait Conditions: Resource {
    fn conditions(&self) -> &[Condition];

    /// `(status, reason, message)` of the condition `type_`.
    fn condition(&self, type_: &str) -> Option<(String, String, String)> {
        self.conditions()
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    }

    /// The condition `type_` is True, whatever its reason and generation.
    fn is_true(&self, type_: &str) -> bool {
        self.condition(type_)
            .is_some_and(|(status, _, _)| status == "True")
    }

    /// Ready=True for the current generation.
    fn ready(&self) -> bool {
        ready_at(self.conditions(), self.meta().generation)
    }

    /// Stalled=True with `reason`.
    fn stalled_with(&self, reason: &str) -> bool {
        self.condition("Stalled")
            .is_some_and(|(status, r, _)| status == "True" && r == reason)
    }

    /// Ready=False with `reason` (also the Reconciling or Stalled reason).
    fn not_ready_with(&self, reason: &str) -> bool {
        self.condition("Ready")
            .is_some_and(|(status, r, _)| status == "False" && r == reason)
    }

    /// The condition `type_` ("Stalled" or "Ready") says `reason`: Stalled=True, or Ready=False,
    /// with it.
    fn says(&self, (type_, reason): (&str, &str)) -> bool {
        match type_ {
            "Ready" => self.not_ready_with(reason),
            _ => self.stalled_with(reason),
        }
    }
}

/// Whether `conditions` say Ready=True for `generation` (also for kinds without claims, such as
/// Connection).
pub fn ready_at(conditions: &[Condition], generation: Option<i64>) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True" && c.observed_generation == generation)
}

/// Every managed kind: the conditions its claims are decided on (the operator's own reading).
impl<K: aigw::controller::state::claims::Claims> Conditions for K {
    fn conditions(&self) -> &[Condition] {
        aigw::controller::state::claims::Claims::conditions(self)
    }
}

pub fn routing(name: &str) -> Value {
    json!({"name": name, "config": {"retry": {"attempts": 3.0}, "strategy": {"mode": "fallback"},
           "targets": [{"provider": "@openai", "weight": 1.0}, {"provider": "@anthropic"}]}})
}

/// A rate-limits policy as the API takes it (a seed or a POST body), named `name`.
pub fn remote_limits(name: &str, value: u32) -> Value {
    json!({"name": name, "type": "requests", "unit": "rpm", "value": value,
           "conditions": [{"key": "api_key", "value": "k1"}],
           "group_by": [{"key": "api_key"}]})
}

pub fn limits(name: &str) -> Value {
    json!({"name": name, "type": "requests", "unit": "rpm", "value": 100,
           "conditions": [{"key": "api_key", "value": "k1"}, {"key": "metadata.user_id", "value": "u1"}],
           "groupBy": [{"key": "api_key"}]})
}

pub fn gateway(name: &str, secret: &str) -> Value {
    json!({"name": name, "type": "non_production", "credentialsSecretRef": {"name": secret}})
}

/// [`gateway`], rotated on demand: each new `trigger` rotates its credentials.
pub fn rotating_gateway(name: &str, secret: &str, trigger: &str) -> Value {
    let mut spec = gateway(name, secret);
    spec["rotation"] = json!({ "trigger": trigger });
    spec
}

/// The spec of an McpServer: the server `name` in `workspace`, of the McpIntegration resource
/// `integration`, its slug `slug` when given.
pub fn mcp_server(slug: Option<&str>, name: &str, workspace: &str, integration: &str) -> Value {
    let mut spec =
        json!({"name": name, "workspaceId": workspace, "integrationRef": {"name": integration}});
    if let Some(slug) = slug {
        spec["slug"] = json!(slug);
    }
    spec
}

/// Creates the aigw object `name` of kind `K` with `spec` in the test's namespace.
pub async fn create<K>(env: &super::TestEnv, name: &str, spec: Value) -> K
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let object: K = object(&K::kind(&()), name, spec);
    env.api::<K>()
        .create(&kube::api::PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("failed to create {name}: {e}"))
}

/// A Secret named `name` holding `pairs` (key, value).
pub fn secret(name: &str, pairs: &[(&str, &str)]) -> k8s_openapi::api::core::v1::Secret {
    let data: std::collections::BTreeMap<String, k8s_openapi::ByteString> = pairs
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                k8s_openapi::ByteString(v.as_bytes().to_vec()),
            )
        })
        .collect();
    k8s_openapi::api::core::v1::Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    }
}

/// The kinds whose credentials rotate (ApiKey, Deployment).
pub trait Rotates: Conditions {
    fn rotation(&self) -> Option<&aigw::resources::rotation::RotationStatus>;

    /// Ready, with no rotation in flight.
    fn settled(&self) -> bool {
        self.ready()
            && self
                .rotation()
                .is_some_and(|r| r.pending_rotation.is_none())
    }

    /// Ready, and the last rotation acted on `trigger`.
    fn rotated_for(&self, trigger: &str) -> bool {
        self.ready()
            && self
                .rotation()
                .is_some_and(|r| r.observed_rotation_trigger.as_deref() == Some(trigger))
    }

    /// Ready, no rotation in flight, and the last one acted on `trigger`.
    fn settled_at(&self, trigger: &str) -> bool {
        self.settled() && self.rotated_for(trigger)
    }
}

impl Rotates for aigw::resources::ApiKey {
    fn rotation(&self) -> Option<&aigw::resources::rotation::RotationStatus> {
        self.status.as_ref().map(|s| &s.rotation)
    }
}

impl Rotates for aigw::resources::Deployment {
    fn rotation(&self) -> Option<&aigw::resources::rotation::RotationStatus> {
        self.status.as_ref().map(|s| &s.rotation)
    }
}
