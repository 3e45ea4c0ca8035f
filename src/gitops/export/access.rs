//! `aigw export` of the organisation's integrations and a workspace's providers. A key or credential is never exported (the
//! API never returns one): each becomes a reference to a placeholder Secret, labelled for
//! cluster-scoped readers, whose empty values the user fills in (aigw refuses an empty value
//! rather than erase the live credential).

use serde_json::{Map, Value};

use super::{Builder, GitopsError, listed, placeholder_secret};
use crate::api::secret_fields::is_header_map;
use crate::api::{self, Client, IntegrationsListQuery, ProvidersListQuery};
use crate::resources::common::CLUSTER_READABLE;
use crate::resources::common::DeletionPolicy;
use crate::resources::config::{ConfigSecretRef, SecretKeyRef};
use crate::resources::integration::{
    Integration, IntegrationSpec, KeySecretRef, SecretMapping, WorkspaceAccess,
};
use crate::resources::limits::{RateLimit, UsageLimits};
use crate::resources::provider::{Provider, ProviderSpec};

/// The Secret key the exported `keySecretRef` names.
const KEY: &str = "api-key";

/// Every organisation integration, with its workspace access rows. Workspace-scoped ones are
/// left out: an Integration manages organisation integrations.
pub(super) async fn export_integrations(
    api: &Client,
    out: &mut Builder<'_>,
) -> Result<(), GitopsError> {
    let query = IntegrationsListQuery::default();
    for summary in listed("integrations", api.integrations().list(&query)).await? {
        if summary
            .workspace_id
            .as_deref()
            .is_some_and(|w| !w.is_empty())
        {
            out.export.skipped.push(format!(
                "integration {}: workspace-scoped (an Integration manages organisation integrations)",
                summary.slug
            ));
            continue;
        }
        let read = |e| GitopsError::api(format!("failed to read integration {}", summary.slug), e);
        let remote = api.integrations().get(&summary.id).await.map_err(read)?;
        let rows = api
            .integrations()
            .workspaces(&summary.id)
            .await
            .map_err(read)?;
        out.integration(&remote, &rows)?;
    }
    Ok(())
}

/// The providers of `--workspace-id` (the API's provider rows do not say their workspace, so
/// they are exported per workspace only), each adopting its provider by slug and binding its
/// integration by UUID (`integrationId`).
pub(super) async fn export_providers(
    api: &Client,
    workspace: Option<&str>,
    out: &mut Builder<'_>,
) -> Result<(), GitopsError> {
    let query = ProvidersListQuery {
        workspace_id: workspace.map(str::to_string),
        ..Default::default()
    };
    let providers = listed("providers", api.providers().list(&query)).await?;
    let what = "providers: exported per workspace only (their rows do not name it)";
    let Some(workspace) = out.per_workspace(workspace, providers.len(), what) else {
        return Ok(());
    };
    for remote in &providers {
        out.provider(remote, workspace)?;
    }
    Ok(())
}

impl Builder<'_> {
    /// The provider as a Provider of `workspace` that adopts it by slug.
    fn provider(&mut self, remote: &api::Provider, workspace: &str) -> Result<(), GitopsError> {
        if self.left_as_managed("Provider", &remote.slug, &remote.id) {
            return Ok(());
        }
        let Some(integration) = remote.integration_id.clone() else {
            self.export.skipped.push(format!(
                "provider {}: its read names no integration",
                remote.slug
            ));
            return Ok(());
        };
        let Some(metadata) = self.meta("Provider", &remote.name, &remote.slug, &remote.id) else {
            return Ok(());
        };
        let spec = ProviderSpec {
            slug: Some(remote.slug.clone()),
            name: remote.name.clone(),
            workspace_id: Some(workspace.to_string()),
            workspace_ref: None,
            integration: None,
            integration_id: Some(integration),
            note: remote.note.clone(),
            usage_limits: None,
            expires_at: remote
                .expires_at
                .as_deref()
                .map(crate::resources::api_key::rfc3339),
            reset_usage: None,
            deletion_policy: DeletionPolicy::Orphan,
            managed: Default::default(),
        };
        let object = Provider {
            metadata,
            spec,
            status: None,
        };
        let header = format!("# Adopts provider {} as it is.\n", remote.slug);
        self.push("Provider", "provider", &object.metadata, &object, header)
            .map(drop)
    }

    /// The integration as an Integration that adopts it by slug, its key and masked
    /// configuration fields referenced from a placeholder Secret.
    fn integration(
        &mut self,
        remote: &api::Integration,
        rows: &api::IntegrationWorkspaces,
    ) -> Result<(), GitopsError> {
        let Some(mut metadata) = self.meta("Integration", &remote.name, &remote.slug, &remote.id)
        else {
            return Ok(());
        };
        metadata.namespace = None;
        let name = metadata.name.clone().unwrap_or_default();
        // Applied into the operator's namespace for Connection Secrets, which is not known here.
        let secret = self.placeholder_name(&format!("{name}-upstream"), None);
        let mut keys = Vec::new();
        let key_secret_ref = remote.masked_key.as_ref().map(|_| {
            keys.push(KEY.to_string());
            KeySecretRef {
                name: secret.clone(),
                key: KEY.into(),
                namespace: None,
            }
        });
        // The configurations a live Integration recording or naming it took from Secrets;
        // every one while such an Integration's spec is not applied yet (it records no paths
        // it applied, and the remote may hold a Secret's value where that spec no longer says).
        let options = self.options;
        let remote_keys = [&remote.slug, &remote.id];
        let live = &options.live_integration_refs;
        let from_secrets: Vec<&str> = (remote_keys.into_iter())
            .filter_map(|key| live.get(key))
            .flatten()
            .map(|reference| reference.path.as_str())
            .collect();
        let unapplied =
            (remote_keys.iter()).any(|k| options.live_unapplied_integrations.contains(*k));
        let from_secrets = if unapplied { &["/"][..] } else { &from_secrets };
        if options.live_recorded.is_some() && !remote_keys.iter().any(|k| live.contains_key(*k)) {
            (self.export.unrecognised).push(format!("integration {}", remote.slug));
        }
        let (configurations, secret_refs) = readable_configurations(
            remote.configurations.as_ref(),
            from_secrets,
            &secret,
            &mut keys,
        );
        let spec = IntegrationSpec {
            slug: Some(remote.slug.clone()),
            name: remote.name.clone(),
            ai_provider_id: remote.ai_provider_id.clone().unwrap_or_default(),
            description: remote.description.clone(),
            key_secret_ref,
            configurations,
            secret_refs,
            workspaces: rows
                .workspaces
                .iter()
                .map(|row| WorkspaceAccess {
                    id: row.id.clone(),
                    enabled: row.enabled,
                    usage_limits: UsageLimits::from_api(&row.usage_limits),
                    rate_limits: RateLimit::from_api(&row.rate_limits),
                })
                .collect(),
            models: None,
            secret_mappings: exported_mappings(remote.secret_mappings.as_deref()),
            deletion_policy: DeletionPolicy::Orphan,
            managed: Default::default(),
        };
        let object = Integration {
            metadata,
            spec,
            status: None,
        };
        if keys.is_empty() {
            let header = format!("# Adopts integration {} as it is.\n", remote.slug);
            return self
                .push(
                    "Integration",
                    "integration",
                    &object.metadata,
                    &object,
                    header,
                )
                .map(drop);
        }
        let header = format!(
            "# Adopts integration {}. Its key and credentials are never exported: they come from\n\
             # Secret {secret} (secret-{secret}.yaml), which must hold them before applying.\n",
            remote.slug
        );
        // An Integration left out leaves its placeholder out too.
        let written = self.push(
            "Integration",
            "integration",
            &object.metadata,
            &object,
            header,
        )?;
        if !written {
            return Ok(());
        }
        let mut placeholder = placeholder_secret(&secret, None, keys);
        placeholder.metadata.labels =
            Some([(CLUSTER_READABLE.to_string(), "true".to_string())].into());
        let header = format!(
            "# Placeholder for the credentials of integration {}: fill in every value and apply it\n\
             # into the namespace the operator reads Connection Secrets from (a cluster-scoped\n\
             # Integration reads Secrets only there, labelled as below).\n",
            remote.slug
        );
        let meta = placeholder.metadata.clone();
        if self.push("Secret", "secret", &meta, &placeholder, header)? {
            // Applied with the manifests, it would land in their namespace (or kubectl's).
            self.unlisted(
                format!("secret-{secret}.yaml"),
                "the namespace the operator reads Connection Secrets from",
            );
        }
        Ok(())
    }
}

/// The known public fields of a read's `configurations` ([`api::PUBLIC_CONFIGURATIONS`]), and
/// a Secret reference (to `secret`) for every other one: `masked_<field>`, the values of header
/// maps, any field that may have come from a Secret (an Integration's `secretRefs`), even
/// when the API reads it back unmasked, and a public one whose value is not
/// [`api::public_value`] (`custom_host: https://user:pass@host`, a `passWord` in an entry of
/// Azure's deployment list: credentials in a public setting). A field named by
/// `from_secrets` (the `secretRefs` paths of the live Integrations that record or name it, the
/// field or below; `/` names every field) is referenced whatever it holds.
fn readable_configurations(
    read: Option<&Map<String, Value>>,
    from_secrets: &[&str],
    secret: &str,
    keys: &mut Vec<String>,
) -> (Option<Map<String, Value>>, Vec<ConfigSecretRef>) {
    let Some(read) = read else {
        return (None, Vec::new());
    };
    let mut shown = Map::new();
    let mut refs = Vec::new();
    let mut reference = |path: String, key: String| {
        keys.push(key.clone());
        refs.push(ConfigSecretRef {
            path,
            secret_key_ref: SecretKeyRef {
                name: secret.to_string(),
                key,
            },
        });
    };
    for (field, value) in read {
        let escaped = field.replace('~', "~0").replace('/', "~1");
        // `/`: every field.
        let took_from_secret = from_secrets.iter().any(|path| {
            path.strip_prefix('/')
                .is_some_and(|p| p.is_empty() || p.split('/').next() == Some(escaped.as_str()))
        });
        if let Some(secret_field) = field.strip_prefix("masked_") {
            reference(format!("/{secret_field}"), secret_field.to_string());
        } else if let (true, Some(headers)) = (is_header_map(field), value.as_object()) {
            for header in headers.keys() {
                let escaped = header.replace('~', "~0").replace('/', "~1");
                reference(format!("/{field}/{escaped}"), format!("{field}.{header}"));
            }
        } else if api::shown_configuration(field)
            && !took_from_secret
            && api::public_value(field, value)
        {
            shown.insert(field.clone(), value.clone());
        } else {
            reference(format!("/{escaped}"), field.clone());
        }
    }
    (Some(shown).filter(|s| !s.is_empty()), refs)
}

/// The integration's `secret_mappings` as `spec.secretMappings` naming each reference as the
/// API does (UUID or slug); `None` (left as it is) when it has none.
fn exported_mappings(remote: Option<&[Value]>) -> Option<Vec<SecretMapping>> {
    let mappings: Vec<SecretMapping> = remote
        .unwrap_or_default()
        .iter()
        .filter_map(|m| {
            let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
            Some(SecretMapping {
                target_field: text("target_field")?,
                secret_reference_ref: None,
                secret_reference: Some(text("secret_reference_id")?),
                secret_key: text("secret_key"),
                value_format: m
                    .get("value_format")
                    .and_then(|f| serde_json::from_value(f.clone()).ok()),
            })
        })
        .collect();
    (!mappings.is_empty()).then_some(mappings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gitops::export::ExportOptions;
    use serde_json::{Value, json};

    /// `remote` (with the workspace access `rows`) exported: the Integration, and the text of
    /// every file written.
    fn exported_integration(remote: Value, rows: Value) -> (Integration, Vec<String>) {
        let remote: api::Integration = serde_json::from_value(remote).unwrap();
        let rows: api::IntegrationWorkspaces = serde_json::from_value(rows).unwrap();
        let options = ExportOptions::default();
        let mut builder = Builder::new(&options);
        builder.integration(&remote, &rows).unwrap();
        let files: Vec<String> = (builder.finish().unwrap().files.into_iter())
            .map(|f| f.content)
            .collect();
        (serde_yaml::from_str(&files[0]).unwrap(), files)
    }

    /// The paths the exported Integration takes from its placeholder Secret.
    fn ref_paths(exported: &Integration) -> Vec<&str> {
        let refs = exported.spec.secret_refs.iter();
        refs.map(|r| r.path.as_str()).collect()
    }

    #[test]
    fn an_exported_integration_references_its_credentials_and_holds_none() {
        let (exported, files) = exported_integration(
            json!({
                "id": "i1", "slug": "bedrock-prod", "name": "Bedrock prod", "ai_provider_id": "bedrock",
                "masked_key": "****abcd",
                "configurations": {"aws_region": "eu-west-1", "masked_aws_secret_access_key": "****wxyz",
                                   "custom_headers": {"x-team": "****"}}
            }),
            json!({
                "total": 2, "workspaces": [
                    {"id": "ws-a", "enabled": true,
                     "usage_limits": [{"credit_limit": 500, "type": "cost", "periodic_reset": "monthly",
                                       "alert_threshold": null, "next_usage_reset_at": "2026-01-01T00:00:00Z"}]},
                    {"id": "ws-b", "enabled": false, "usage_limits": null,
                     "rate_limits": [{"type": "requests", "unit": "rpm", "value": 600}]}]
            }),
        );
        let text = files.concat();
        assert!(!text.contains("****"), "{text}");
        // Each row's budget and rate limit as the API has them: applying the export writes none.
        let rows = &exported.spec.workspaces;
        let budget = rows[0].usage_limits.as_ref().expect("ws-a's budget");
        assert_eq!(
            budget.to_api(),
            json!({"credit_limit": 500, "type": "cost", "periodic_reset": "monthly"})
        );
        assert_eq!(rows[0].rate_limits, None);
        assert_eq!(rows[1].usage_limits, None);
        let rate = rows[1].rate_limits.as_ref().expect("ws-b's rate limit");
        assert_eq!(
            rate.to_api(),
            json!({"type": "requests", "unit": "rpm", "value": 600})
        );
        let spec = &exported.spec;
        assert_eq!(spec.slug.as_deref(), Some("bedrock-prod"));
        assert_eq!(
            spec.key_secret_ref.as_ref().unwrap().name,
            "bedrock-prod-upstream"
        );
        assert_eq!(
            ref_paths(&exported),
            ["/custom_headers/x-team", "/aws_secret_access_key"]
        );
        assert_eq!(
            spec.configurations.as_ref().unwrap()["aws_region"],
            "eu-west-1"
        );
        assert_eq!(spec.workspaces.len(), 2);
        assert!(!spec.workspaces[1].enabled);
        assert_eq!(spec.deletion_policy, DeletionPolicy::Orphan);
        let secret = &files[1];
        assert!(secret.contains("aigw.io/cluster-readable"), "{secret}");
        assert!(secret.contains("api-key: ''"), "{secret}");
        // kustomize would apply the placeholder into the manifests' namespace, where the
        // cluster-scoped Integration does not read it: it is listed apart.
        let kustomization = files.last().unwrap();
        assert!(
            kustomization.contains("- integration-bedrock-prod.yaml")
                && !kustomization.contains("- secret-bedrock-prod-upstream.yaml")
                && kustomization.contains("Not listed: apply secret-bedrock-prod-upstream.yaml into the namespace the operator reads Connection Secrets from"),
            "{kustomization}"
        );
    }

    /// A public setting may carry credentials: a URL's userinfo (`custom_host:
    /// https://user:pass@host`), a key its schema does not have in a structured one (an
    /// `api_key` or a `passWord` in an entry of Azure's deployment list, which the API reads
    /// back as sent), a token in a query.
    /// The export references each from the placeholder Secret instead of writing it into Git
    /// (attack on issue 27; the second and third, attack of stop 82), and `aigw api` hides it.
    #[test]
    fn a_public_setting_holding_credentials_is_exported_as_a_secret_reference() {
        let remote = json!({
            "id": "i1", "slug": "bedrock-prod", "name": "Bedrock prod", "ai_provider_id": "bedrock",
            "configurations": {"aws_region": "eu-west-1",
                               "custom_host": "https://u:HostPassw0rd@bedrock.example",
                               "azure_foundry_url": "https://f.example/?access_token=QueryT0ken",
                               "azure_deployment_config": [{"azure_deployment_name": "d",
                                                            "api_key": "NestedK3y",
                                                            "passWord": "CamelPassw0rd"}],
                               "masked_note": "MaskedN0te", "masked_api_key": "****wxyz"}
        });
        let shown = serde_json::to_string(
            &serde_json::from_value::<api::Integration>(remote.clone())
                .unwrap()
                .with_configurations_hidden(),
        )
        .unwrap();
        let (exported, files) = exported_integration(remote, json!({"total": 0, "workspaces": []}));
        let text = files.concat();
        for secret in [
            "HostPassw0rd",
            "QueryT0ken",
            "NestedK3y",
            "CamelPassw0rd",
            "MaskedN0te",
        ] {
            assert!(!text.contains(secret), "{text}");
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(
            shown.contains("****wxyz"),
            "the API's own mask shows: {shown}"
        );
        assert_eq!(
            ref_paths(&exported),
            [
                "/azure_deployment_config",
                "/azure_foundry_url",
                "/custom_host",
                "/api_key",
                "/note"
            ]
        );
        assert_eq!(
            exported.spec.configurations.as_ref().unwrap()["aws_region"],
            "eu-west-1"
        );
    }

    /// Azure's deployment list is a public setting and stays as it is: referenced from a
    /// Secret, which holds a string, the operator would send it back as one (an export round
    /// trip found the array turned into a JSON string). A service account JSON, an object
    /// holding a private key, is referenced.
    #[test]
    fn structured_public_settings_are_exported_as_they_are() {
        let deployments = json!([{"azure_deployment_name": "gpt4o", "azure_api_version": "2024-06-01",
                                  "azure_model_slug": "gpt-4o", "is_default": true}]);
        let (exported, _) = exported_integration(
            json!({
                "id": "i1", "slug": "azure-eu", "name": "Azure EU", "ai_provider_id": "azure-openai",
                "configurations": {"azure_resource_name": "eu", "azure_auth_mode": "entra",
                                   "azure_deployment_config": deployments,
                                   "azure_entra_tenant_id": "t-1", "azure_entra_client_id": "c-1",
                                   "vertex_service_account_json": {"private_key": "PRIVATE"}}
            }),
            json!({"total": 0, "workspaces": []}),
        );
        let shown = exported.spec.configurations.as_ref().unwrap();
        assert_eq!(shown["azure_deployment_config"], deployments);
        assert_eq!(shown["azure_entra_client_id"], "c-1");
        assert_eq!(ref_paths(&exported), ["/vertex_service_account_json"]);
    }

    #[test]
    fn mappings_are_exported_as_the_api_names_them_and_none_are_left_alone() {
        let remote = [
            serde_json::json!({"target_field": "key", "secret_reference_id": "sr-1",
                             "secret_key": null, "value_format": "json"}),
        ];
        let exported = exported_mappings(Some(&remote)).expect("one mapping");
        assert_eq!(exported[0].target_field, "key");
        assert_eq!(exported[0].secret_reference.as_deref(), Some("sr-1"));
        assert_eq!(exported[0].secret_key, None);
        assert_eq!(
            exported[0].to_api("sr-1"),
            serde_json::json!({"target_field": "key", "secret_reference_id": "sr-1", "value_format": "json"})
        );
        assert!(crate::resources::integration::same_mappings(
            &[exported[0].to_api("sr-1")],
            Some(&remote)
        ));
        assert_eq!(exported_mappings(Some(&[])), None);
        assert_eq!(exported_mappings(None), None);
    }
}
