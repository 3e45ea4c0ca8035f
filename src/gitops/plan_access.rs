//! `aigw plan` for the credential kinds: an Integration (with its workspace and model access)
//! and a Provider.
//! A plan never reads a Secret: a write-only value shows where it comes from, `(secret
//! name/key)`, and whether the operator would send it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde_json::{Value, json};

use super::GitopsError;
use super::mask::{Masking, hide_unconfirmed};
use super::plan::{
    Action, Entry, Planner, compared, compared_unless_fixed, compared_unless_immutable,
    create_changes, creating, entry, field_changes, fixed_differs, live_object, plain_changes,
    read_recorded_or_slug, to_json, with_hidden,
};
use super::plan_claims::{Claimed, Own, claimed};
use crate::api;
use crate::resources::common::{Recorded, SendsSecretValues};
use crate::resources::config_document::{MarkedDocument, SecretDocument};
use crate::resources::{Integration, Provider, SecretReference};

impl Planner<'_> {
    /// An Integration: its counterpart is the live `status.id`, else `spec.slug` (which the operator
    /// creates when no integration has it). The key and credential configurations are write-only:
    /// they show as their Secret, and as a change when the operator would send them (a create, an
    /// adoption, or a live resource that never recorded what it sent).
    pub(super) async fn integration(self, integration: &Integration) -> Result<Entry, GitopsError> {
        let spec = &integration.spec;
        let mut desired = to_json(spec);
        let invalid = match MarkedDocument::new(spec) {
            Ok(marked) => {
                if let Some(configurations) = marked.document().get("configurations") {
                    desired["configurations"] = configurations.clone();
                }
                None
            }
            Err(why) => Some(format!(
                "{why}: the operator would stall (InvalidSpec) and write nothing"
            )),
        };
        if let Some(key) = &spec.key_secret_ref {
            desired["keySecretRef"] = json!(format!("(secret {}/{})", key.name, key.key));
        }
        let creation = || create_changes(&desired, &["slug", "secretRefs"]);
        let managed = live_object(self.live, integration).await?;
        // The live resource's Secret paths: the read holds their values where a PR moved or
        // dropped them.
        let earlier = managed
            .as_ref()
            .map(|m| SecretDocument::secret_refs(&m.spec).into_owned())
            .unwrap_or_default();
        // A PR that moves or drops a `secretRefs` path writes the configurations (the operator's
        // hash covers where the values go), though every field a read shows may match.
        let live_refs = managed.as_ref().map(|_| earlier.as_slice());
        let paths_moved =
            !super::plan::sources_moved(live_refs, &SecretDocument::secret_refs(spec)).is_empty();
        // A live spec not applied yet (held, stalled, not reconciled): the remote may still
        // hold a Secret's value at a path that spec no longer names, and an Integration records
        // no paths it applied, so none of the configurations' values show.
        let unapplied = managed.as_ref().is_some_and(|m| !applied(m));
        let status = managed.and_then(|m| m.status).unwrap_or_default();
        // The live resource's integration, else the one its slug names (adopted if it exists).
        let keys = (status.recorded_remote(), spec.slug.as_deref());
        let found = read_recorded_or_slug(keys, "integration", async |key| {
            self.api.integrations().get(key).await
        })
        .await?;
        let Some((counterpart, remote)) = found else {
            return Ok(match invalid {
                Some(reason) => entry(Action::Conflict, None, creation(), Some(reason)),
                None => entry(Action::Create, None, creation(), None),
            });
        };
        // Another live Integration that records the object (the operator answers AlreadyManaged),
        // else every Secret path any live Integration naming it took its values from.
        let own = Own {
            kind: Claimed::Integration,
            namespace: None,
            name: integration.metadata.name.as_deref().unwrap_or_default(),
            connection: spec.connection_name(),
        };
        let mut masking = Masking::default();
        if let Some(elsewhere) = claimed(
            self.live,
            &own,
            &counterpart,
            &mut masking,
            "/configurations",
        )
        .await
        {
            return Ok(elsewhere);
        }
        // The read as `aigw api integrations get` and `export` show it: a configuration that is
        // not a known public setting may hold a Secret's value (whoever wrote it), and a public
        // URL's userinfo may hold credentials.
        let shown = remote.clone().with_configurations_hidden();
        let mut current = json!({
            "name": remote.name,
            "aiProviderId": remote.ai_provider_id,
            "description": remote.description,
            "configurations": shown.configurations,
            "keySecretRef": remote.masked_key.as_ref().map(|_| "(write-only: not readable)"),
            "workspaceId": remote.workspace_id,
        });
        let conflicts = spec.immutable_conflicts(&remote);
        let mut fields = conflicts.clone();
        fields.extend(spec.diff(&remote));
        let writes_secrets = spec.key_secret_ref.is_some() || !spec.secret_refs.is_empty();
        if writes_secrets && status.secret_hash.is_none() {
            fields.push("keySecretRef");
        }
        if paths_moved && !fields.contains(&"configurations") {
            fields.push("configurations");
        }
        let client_rows = self.api.integrations().workspaces(&remote.id).await;
        let rows = client_rows.map_err(|e| {
            GitopsError::api(
                format!("failed to read the access of integration {}", remote.slug),
                e,
            )
        })?;
        if !spec.access_updates(&rows, &status.workspaces).is_empty() {
            fields.push("workspaces");
            current["workspaces"] = access_rows(&rows);
        }
        if spec.models.is_some() {
            let models = self
                .api
                .integrations()
                .models(&remote.id)
                .await
                .map_err(|e| {
                    GitopsError::api(
                        format!("failed to read the models of integration {}", remote.slug),
                        e,
                    )
                })?;
            if spec.model_updates(&models).is_some() {
                fields.push("models");
                current["models"] = serde_json::to_value(&models).unwrap_or_default();
            }
        }
        // What the spec takes from Secrets is never shown, on either side, whatever the read says.
        let hidden = hide_secret_paths(
            integration,
            &earlier,
            masking,
            counterpart.adopting || unapplied,
            &mut current,
            &mut desired,
        );
        if hidden {
            fields = with_hidden(fields, &["configurations"], &desired);
        }
        let changes = field_changes(&fields, &current, &desired);
        let reason = invalid.or_else(|| {
            let fixed = !conflicts.is_empty();
            fixed.then(|| fixed_differs("integration", &conflicts, "Integration"))
        });
        let planned = match reason {
            Some(reason) => entry(
                Action::Conflict,
                Some(counterpart.key),
                changes,
                Some(reason),
            ),
            None => compared(&counterpart, changes),
        };
        let planned = match (unapplied, &planned.reason) {
            (true, None) => planned.because(
                "the live Integration's spec is not applied yet (not Ready at its generation): the remote configurations may still hold a Secret's value where that spec no longer says, so none of their values show",
            ),
            _ => planned,
        };
        Ok(planned.with_values_hidden(hidden).identified(&remote.id))
    }
}

/// Whether `integration`'s spec was applied at its generation: Ready at it, and not merely
/// observed (`managementPolicy: Observe` is Ready, reason `Observed`, writing nothing).
fn applied(integration: &Integration) -> bool {
    let Some(status) = &integration.status else {
        return false;
    };
    spec_applied(
        integration.metadata.generation,
        status.managed.observed_generation,
        &status.managed.conditions,
    )
}

/// True when a resource at `generation` was applied: Ready at it, and not merely observed
/// (`managementPolicy: Observe` is Ready, reason `Observed`, writing nothing).
pub(super) fn spec_applied(
    generation: Option<i64>,
    observed_generation: Option<i64>,
    conditions: &[Condition],
) -> bool {
    let ready = crate::resources::common::find_condition(
        conditions,
        crate::resources::common::condition::READY,
    );
    crate::controller::spec_already_applied(generation, observed_generation, conditions)
        && ready.is_some_and(|c| c.reason != crate::controller::driver::OBSERVED)
}

/// Replaces, in `current` (the read) and `desired`, the value at every path the spec takes from
/// a Secret (`keySecretRef` at `/key`, each of `secretRefs` under `/configurations`): with the
/// Secret it comes from on the desired side, as unreadable on the read's. The paths the live
/// resource (`earlier`) took from Secrets are hidden too, with the values the read holds there
/// wherever else they show, and every value under their key names: a PR that moves or drops a
/// `secretRefs` entry leaves the Secret's value in the read at the old path. `masking` holds
/// what other live Integrations naming the object took from Secrets. For an adopted object
/// (`adopting`: no live resource of this manifest records it), none of the configurations'
/// strings show, whatever the manifest holds: any may be a Secret's, whoever wrote it, and
/// comparing them with the manifest's would tell whether a guess is right. True when anything
/// of an adopted object was hidden so.
fn hide_secret_paths(
    integration: &Integration,
    earlier: &[crate::resources::config::ConfigSecretRef],
    mut masking: Masking,
    adopting: bool,
    current: &mut Value,
    desired: &mut Value,
) -> bool {
    let refs = integration.spec.secret_refs();
    for reference in refs.iter().chain(earlier) {
        masking.reference(&reference.path, None);
    }
    masking.learn(current);
    *current = masking.masked(current);
    *desired = masking.masked_by_path(desired);
    let hidden = adopting && hide_unconfirmed(current, desired, "/configurations");
    for reference in refs.iter() {
        let shown = format!(
            "(secret {}/{})",
            reference.secret_key_ref.name, reference.secret_key_ref.key
        );
        if let Some(value) = current.pointer_mut(&reference.path) {
            *value = json!("(write-only: not shown)");
        }
        if let Some(value) = desired.pointer_mut(&reference.path) {
            *value = json!(shown);
        }
    }
    hidden
}

/// The access rows as a spec would say them.
fn access_rows(rows: &api::IntegrationWorkspaces) -> Value {
    rows.workspaces
        .iter()
        .map(|r| json!({"id": r.id, "enabled": r.enabled}))
        .collect()
}

impl Planner<'_> {
    /// A Provider: its counterpart is the live `status.id`, else `spec.slug` (created when no
    /// provider has it). A read's credential material is withheld by the client; only the fields
    /// the operator compares are shown.
    pub(super) async fn provider(self, provider: &Provider) -> Result<Entry, GitopsError> {
        let spec = &provider.spec;
        let desired = to_json(spec);
        let creation = || {
            create_changes(
                &desired,
                &["slug", "integration", "integrationId", "resetUsage"],
            )
        };
        let get = async |key: &str| self.api.providers().get(key, Some(spec.workspace())).await;
        let (status, found) = self.counterpart(provider, get).await?;
        let Some((counterpart, remote)) = found else {
            return Ok(entry(Action::Create, None, creation(), None));
        };
        let current = json!({
            "name": remote.name,
            "note": remote.note,
            "usageLimits": remote.usage_limits,
            "expiresAt": remote.expires_at,
            "integrationId": remote.integration_id,
        });
        // What the integration is known by: the spec's id, or what the live resource recorded.
        let known: Vec<String> = spec
            .integration_id
            .iter()
            .cloned()
            .chain(status.integration_id.clone())
            .collect();
        let keys: Vec<&str> = match known.is_empty() {
            true => remote.integration_id.iter().map(String::as_str).collect(),
            false => known.iter().map(String::as_str).collect(),
        };
        let conflicts = spec.immutable_conflicts(&remote, &keys);
        let reset = spec.reset_usage.is_some() && spec.reset_usage != status.observed_reset_usage;
        let fields = (conflicts, spec.update_for(&remote, reset).0);
        let what = ("provider", "Provider");
        let planned = compared_unless_fixed(counterpart, fields, (&current, &desired), what);
        Ok(planned.identified(&remote.id))
    }

    /// The plan of a SecretReference: the reference its live resource recorded, else the one its
    /// slug names (adopted if it exists), compared on the fields a read shows. `auth_config` (from a
    /// Secret of the operator's namespace) and the allowed workspaces are never read back, so a plan
    /// shows them as set on a create and cannot tell a change of them otherwise.
    pub(super) async fn secret_reference(
        self,
        reference: &SecretReference,
    ) -> Result<Entry, GitopsError> {
        let spec = &reference.spec;
        let mut desired = to_json(spec);
        desired["authConfigSecretRef"] = json!(format!(
            "(every key of secret {})",
            spec.auth_config_secret_ref.name
        ));
        let get = async |key: &str| self.api.secret_references().get(key).await;
        let (_, found) = self.counterpart(reference, get).await?;
        let Some((counterpart, remote)) = found else {
            return Ok(creating(&desired, &["slug"]));
        };
        let changes = plain_changes(spec.diff(&remote), &desired, |field| match field {
            "name" => json!(remote.name),
            "description" => json!(remote.description),
            "secretPath" => json!(remote.secret_path),
            "secretKey" => json!(remote.secret_key),
            "allowedWorkspaces" => match remote.allow_all_workspaces {
                Some(true) => json!("(every workspace)"),
                _ => json!("(a list the API does not show)"),
            },
            _ => json!(remote.tags),
        });
        let immutable = spec.immutable_conflicts(&remote);
        let planned =
            compared_unless_immutable(counterpart, "secret reference", &immutable, changes);
        Ok(planned.identified(&remote.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PR drops (or moves) an Integration's `secretRefs` entry for a configuration field the
    /// API reads back: the read still holds the Secret's value at the old path, and the plan
    /// printed it (attack on issue 27's masking by value).
    #[test]
    fn a_dropped_secret_path_of_the_live_integration_is_hidden_in_the_read() {
        let integration: Integration = serde_json::from_value(json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Integration",
            "metadata": {"name": "bedrock"},
            "spec": {"name": "Bedrock", "aiProviderId": "bedrock", "slug": "bedrock",
                     "configurations": {"aws_region": "eu-west-1", "endpoint_host": "https://h.example"}}
        }))
        .unwrap();
        let earlier: Vec<crate::resources::config::ConfigSecretRef> =
            serde_json::from_value(json!([{"path": "/configurations/endpoint_host",
                "secretKeyRef": {"name": "aws", "key": "host"}}]))
            .unwrap();
        const VALUE: &str = "https://tok-9f3a7c2e1b@bedrock.internal.example";
        let mut current = json!({"configurations": {"aws_region": "eu-west-1",
            "endpoint_host": VALUE, "fallback_host": VALUE}});
        let mut desired = json!({"configurations": {"aws_region": "eu-west-1",
            "endpoint_host": "https://h.example"}});
        hide_secret_paths(
            &integration,
            &earlier,
            Masking::default(),
            false,
            &mut current,
            &mut desired,
        );
        let shown = format!("{current} {desired}");
        assert!(!shown.contains("tok-9f3a7c2e1b"), "{shown}");
        assert!(shown.contains("eu-west-1"), "{shown}");
    }
}
