//! `aigw export` of the organisation's workspaces: each as a Workspace that adopts it by slug
//! and states the settings it has, so applying the export writes nothing.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Builder, GitopsError, listed};
use crate::api::{self, Client, WorkspacesListQuery};
use crate::resources::common::DeletionPolicy;
use crate::resources::limits::{RateLimit, UsageLimits};
use crate::resources::workspace::{Workspace, WorkspaceDefaults, WorkspaceSpec};

/// Every active workspace of the organisation, read in full, but the default one: it is the
/// organisation's own, never created or archived, and adopting it is a choice to make by hand.
pub(super) async fn export_workspaces(
    api: &Client,
    out: &mut Builder<'_>,
) -> Result<(), GitopsError> {
    let query = WorkspacesListQuery::default();
    let workspaces = listed("workspaces", api.workspaces().list(&query)).await?;
    for row in workspaces {
        if row.is_default == Some(true) {
            out.export.skipped.push(format!(
                "workspace {}: the organisation's default workspace (adopt it by hand with a Workspace whose spec.slug is {}; it is never archived)",
                row.slug, row.slug
            ));
            continue;
        }
        let remote =
            api.workspaces().get(&row.id).await.map_err(|e| {
                GitopsError::api(format!("failed to read workspace {}", row.slug), e)
            })?;
        out.workspace(&remote)?;
    }
    Ok(())
}

impl Builder<'_> {
    /// The workspace as a Workspace adopting it by slug, with every setting it reads back; a
    /// setting whose shape the spec cannot state is left unmanaged (absent), and said so.
    fn workspace(&mut self, remote: &api::Workspace) -> Result<(), GitopsError> {
        let Some(mut metadata) = self.meta("Workspace", &remote.slug, &remote.id, &remote.id)
        else {
            return Ok(());
        };
        metadata.namespace = None;
        let mut unmanaged = Vec::new();
        let usage_limits = usage_limits(remote.usage_limits.as_ref());
        if usage_limits.is_none() {
            unmanaged.push("usageLimits");
        }
        let rate_limits = rate_limits(remote.rate_limits.as_ref());
        if rate_limits.is_none() {
            unmanaged.push("rateLimits");
        }
        let spec = WorkspaceSpec {
            slug: Some(remote.slug.clone()),
            name: remote.plain_name().to_string(),
            description: remote.description.clone().filter(|d| !d.is_empty()),
            icon: remote.icon.clone().filter(|i| !i.is_empty()),
            defaults: defaults(remote.defaults.as_ref()),
            usage_limits,
            rate_limits,
            deletion_policy: DeletionPolicy::Orphan,
            managed: Default::default(),
        };
        let object = Workspace {
            metadata,
            spec,
            status: None,
        };
        let left = match unmanaged.is_empty() {
            true => String::new(),
            false => format!(
                "# Left as the API has them (a shape the spec does not state): {}.\n",
                unmanaged.join(", ")
            ),
        };
        let header = format!("# Adopts workspace {} as it is.\n{left}", remote.slug);
        self.push("Workspace", "workspace", &object.metadata, &object, header)
            .map(drop)
    }
}

/// `defaults` as read: the default config by UUID and the metadata (string values only).
fn defaults(read: Option<&Value>) -> Option<WorkspaceDefaults> {
    let read = read?.as_object()?;
    let metadata: Option<BTreeMap<String, String>> = match read.get("metadata") {
        None | Some(Value::Null) => Some(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect(),
        Some(_) => None,
    };
    Some(WorkspaceDefaults {
        config_ref: None,
        config_id: read
            .get("config_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        metadata: metadata?,
    })
}

/// The usage policy as the spec states it (`[]` for none); `None` when its shape is not one
/// the spec can state.
fn usage_limits(read: Option<&Value>) -> Option<Vec<UsageLimits>> {
    each(read, |policy| {
        let mut spec = serde_json::json!({
            "creditLimit": policy.get("credit_limit")?.as_f64()?.round() as u64,
            "type": policy.get("type")?,
        });
        for (from, to) in [
            ("alert_threshold", "alertThreshold"),
            ("periodic_reset", "periodicReset"),
            ("periodic_reset_days", "periodicResetDays"),
        ] {
            match policy.get(from) {
                None | Some(Value::Null) => {}
                Some(Value::Number(n)) => spec[to] = serde_json::json!(n.as_f64()?.round() as u64),
                Some(other) => spec[to] = other.clone(),
            }
        }
        serde_json::from_value(spec).ok()
    })
}

/// The rate limits as the spec states them; `None` when one has a shape the spec cannot state.
fn rate_limits(read: Option<&Value>) -> Option<Vec<RateLimit>> {
    each(read, |limit| {
        let spec = serde_json::json!({
            "type": limit.get("type")?,
            "unit": limit.get("unit")?,
            "value": limit.get("value")?.as_f64()?.round() as u64,
        });
        serde_json::from_value(spec).ok()
    })
}

/// Each item of a read list (absent or `null`: none) as the spec states it; `None` when the
/// read is no list, or `one` cannot state one of its items.
fn each<T>(read: Option<&Value>, one: impl Fn(&Value) -> Option<T>) -> Option<Vec<T>> {
    match read {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(one).collect(),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_read_becomes_a_spec_that_compares_equal_to_it() {
        let read: api::Workspace = serde_json::from_value(json!({
            "id": "w1", "slug": "ws-pay", "name": "💳 Payments", "icon": "💳",
            "description": "payments", "is_default": 0,
            "defaults": {"config_id": "c1", "metadata": {"team": "pay"}},
            "usage_limits": [{"id": "u1", "credit_limit": 500.0, "type": "cost",
                              "periodic_reset": "monthly", "alert_threshold": null}],
            "rate_limits": [{"type": "requests", "unit": "rpm", "value": 60}]
        }))
        .unwrap();
        let spec = WorkspaceSpec {
            slug: Some(read.slug.clone()),
            name: read.plain_name().into(),
            description: read.description.clone(),
            icon: read.icon.clone(),
            defaults: defaults(read.defaults.as_ref()),
            usage_limits: usage_limits(read.usage_limits.as_ref()),
            rate_limits: rate_limits(read.rate_limits.as_ref()),
            deletion_policy: DeletionPolicy::Orphan,
            managed: Default::default(),
        };
        assert_eq!(spec.name, "Payments");
        assert_eq!(spec.usage_limits.as_ref().map(Vec::len), Some(1));
        assert!(spec.settings(None).diff(&read).is_empty());
    }

    #[test]
    fn a_rate_limit_the_spec_cannot_state_is_left_unmanaged() {
        let read = json!([{"type": "requests", "unit": "rps", "value": 5}]);
        assert_eq!(rate_limits(Some(&read)), None);
        assert_eq!(rate_limits(Some(&Value::Null)), Some(Vec::new()));
        assert_eq!(usage_limits(None), Some(Vec::new()));
    }
}
