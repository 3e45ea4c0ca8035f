//! Remote objects projected onto the spec shape: what a spec would say to match the remote
//! object exactly. `export` writes these specs; `plan` shows their fields as the "from" side.

use crate::api;
use crate::resources::common::DeletionPolicy;
use crate::resources::config::ConfigSpec;
use crate::resources::deployment::DeploymentSpec;
use crate::resources::guardrail::{
    Feedback, GuardrailActions, GuardrailCheck, GuardrailDefinition,
};
use crate::resources::policy::same_enum;
use serde_json::Value;

/// A spec that adopts `remote` (by slug) and matches it.
pub fn config_spec(remote: &api::ConfigDetail) -> ConfigSpec {
    ConfigSpec {
        slug: Some(remote.slug.clone()),
        name: remote.name.clone(),
        workspace_id: remote.workspace_id.clone().filter(|w| !w.is_empty()),
        workspace_ref: None,
        config: remote
            .config
            .as_object()
            .map(Into::into)
            .unwrap_or_default(),
        secret_refs: Vec::new(),
        resource_refs: Vec::new(),
        state: Some(remote.status.clone()).filter(|s| !s.is_empty()),
        deletion_policy: DeletionPolicy::Orphan,
        managed: Default::default(),
        promotion: None,
    }
}

/// A spec that adopts `remote` (by id) and matches it ([`DeploymentSpec::adopting`]).
pub fn deployment_spec(remote: &api::Deployment, secret_name: &str) -> DeploymentSpec {
    DeploymentSpec::adopting(remote, secret_name)
}

/// What a guardrail resource says to adopt `remote` (by slug) and match it: the checks and
/// actions as read, with 0/1 flags as booleans (its workspace is `remote.workspace_id`). Masked
/// parameters stay masked: `export` leaves such a guardrail out.
pub fn guardrail_definition(remote: &api::GuardrailDetails) -> GuardrailDefinition {
    let document = crate::resources::guardrail::remote_document(remote);
    let checks = document["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| GuardrailCheck {
            id: c["id"].as_str().unwrap_or_default().to_string(),
            parameters: c["parameters"].as_object().cloned().unwrap_or_default(),
            name: c["name"].as_str().map(str::to_string),
            is_enabled: c["is_enabled"].as_bool().filter(|enabled| !enabled),
        })
        .collect();
    let actions = &document["actions"];
    let feedback = |key: &str| {
        let f = actions.get(key)?.get("feedback")?;
        Some(Feedback {
            value: f["value"].as_f64()?,
            weight: f["weight"].as_f64().unwrap_or(1.0),
            metadata: match &f["metadata"] {
                Value::String(text) => text.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            },
        })
    };
    GuardrailDefinition {
        slug: Some(remote.slug.clone()).filter(|s| !s.is_empty()),
        name: remote.name.clone(),
        target: remote.target.as_ref().and_then(same_enum),
        checks,
        actions: GuardrailActions {
            deny: actions["deny"].as_bool().unwrap_or(false),
            r#async: actions["async"].as_bool().unwrap_or(false),
            sequential: actions["sequential"].as_bool(),
            on_success: feedback("on_success"),
            on_fail: feedback("on_fail"),
        },
        secret_refs: Vec::new(),
        deletion_policy: DeletionPolicy::Orphan,
        managed: Default::default(),
        promotion: None,
        // Absent: an adopted guardrail's MCP server mappings are left as they are.
        mcp_servers: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_projected_policy_has_no_difference_with_its_source() {
        let remote: api::RateLimitsPolicy = serde_json::from_value(json!({
            "id": "p1", "name": "per-key", "type": "tokens", "unit": "rph", "value": 5,
            "status": "active", "target": "mcp_tools",
            "conditions": [{"key": "workspace_id", "value": ["ws-1"]}], "group_by": [{"key": "api_key"}]
        }))
        .unwrap();
        let spec =
            crate::resources::rate_limits_policy::RateLimitsPolicySpec::adopting(&remote).unwrap();
        assert!(spec.diff(&remote).is_empty());
        assert!(spec.immutable_conflicts(&remote).is_empty());
    }

    #[test]
    fn a_projected_guardrail_has_no_difference_with_its_source() {
        let remote: api::GuardrailDetails = serde_json::from_value(json!({
            "id": "g1", "slug": "pg-pii-1a2b3c", "name": "pii", "workspace_id": "ws-1", "target": "mcp_tools",
            "checks": [{"id": "default.regexMatch", "parameters": {"rule": "x"}, "is_enabled": 0, "name": "rx"}],
            "actions": {"deny": 1, "async": 0, "sequential": true,
                        "on_fail": {"feedback": {"value": -5, "weight": 1, "metadata": "k=v"}},
                        "on_success": {"feedback": {"value": 5, "weight": 1}}},
            "version_id": "v1"
        }))
        .unwrap();
        let spec = guardrail_definition(&remote);
        assert!(spec.diff(&remote).is_empty(), "{:?}", spec.diff(&remote));
        assert!(spec.immutable_conflicts(&remote, Some("ws-1")).is_empty());
        assert_eq!(spec.checks[0].is_enabled, Some(false));
    }

    #[test]
    fn a_projected_deployment_has_no_difference_with_its_source() {
        let remote: api::Deployment = serde_json::from_value(json!({
            "id": "d1", "name": "edge", "slug": "dp-edge", "type": "non_production", "status": "active",
            "is_default": 0, "tags": {"team": "a"}, "deployment_config": {"replicas": 2},
            "auth_settings": {"gateway_base_url": "https://gw", "workspaces_allowed": ["ws-1"]},
            "client_auth": "****", "credentials": {"username": "u", "password": "****"}
        }))
        .unwrap();
        let spec = deployment_spec(&remote, "edge-credentials");
        assert!(spec.diff(&remote).is_empty());
        let text = serde_json::to_string(&spec).unwrap();
        assert!(!text.contains("****") && !text.contains("username"));
    }
}
