//! Deployment records and their read shapes. Handlers live in `deployment_routes.rs`.
//!
//! Secrets: `client_auth` and `credentials.password` are random, returned in full only by create
//! and by a `rotate_auth: true` update; every read masks them. `GET /_emulator/state` shows them.

use std::{collections::HashMap, time::Instant};

use serde_json::{Value, json};

use super::{
    errors::{ApiResult, EmulatorError},
    fields::{self, Object},
    state::{Shared, make_slug, new_id, now, random_hex},
};

/// What reads show instead of a secret.
pub const MASK: &str = "****";
pub const TYPES: &[&str] = &["production", "non_production"];
pub const STATUSES: &[&str] = &["active", "archived"];
pub const CONNECTION_STATUSES: &[&str] = &["healthy", "unhealthy", "unknown"];

#[derive(Default)]
pub struct DeploymentStore {
    pub by_id: HashMap<String, DeploymentRecord>,
}

pub struct DeploymentRecord {
    pub seq: u64,
    /// When the API created it (`None` when seeded); lists lag behind it under `list_lag_ms`.
    pub api_created: Option<Instant>,
    /// How many `rotate_auth: true` updates it has seen (shown by `GET /_emulator/state`).
    pub rotations: u64,
    pub id: String,
    pub name: String,
    pub slug: String,
    pub kind: String,
    pub status: String,
    pub is_default: bool,
    pub connection_status: String,
    pub created_by: String,
    pub created_at: String,
    pub last_updated_at: String,
    pub last_synced_at: Option<String>,
    pub last_resynced_at: Option<String>,
    pub tags: Object,
    pub auth: AuthSettings,
    pub deployment_config: Value,
    pub workspaces: Vec<Value>,
    pub organisation_id: String,
    pub username: String,
    pub password: String,
    pub client_auth: String,
}

#[derive(Clone, Default)]
pub struct AuthSettings {
    pub gateway_base_url: String,
    pub mcp_gateway_base_url: String,
    pub private_link_endpoint: String,
    pub use_private_link_proxy: bool,
    pub is_dataservice_hosted: bool,
    pub is_playground_proxy_allowed: bool,
    pub disable_service_gateway: bool,
    pub workspaces_allowed: Vec<String>,
    pub jwt_subs_allowed: Vec<String>,
    pub jwt_sub_workspace_mapping: Object,
    pub allow_all_workspaces: bool,
}

/// Whether a secret is shown in full or masked.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Secrets {
    Masked,
    Revealed,
}

impl DeploymentStore {
    pub fn slug_taken(&self, slug: &str) -> bool {
        self.by_id.values().any(|record| record.slug == slug)
    }

    pub fn unique_slug(&self, name: &str) -> String {
        loop {
            let slug = make_slug("dp", name);
            if !self.slug_taken(&slug) {
                return slug;
            }
        }
    }

    /// Finds by id, or by slug (the CLI and tests sometimes hold only the slug).
    pub fn find_mut(&mut self, id: &str) -> Option<&mut DeploymentRecord> {
        if self.by_id.contains_key(id) {
            return self.by_id.get_mut(id);
        }
        self.by_id.values_mut().find(|record| record.slug == id)
    }

    pub fn sorted(&self) -> Vec<&DeploymentRecord> {
        let mut records: Vec<_> = self.by_id.values().collect();
        records.sort_by_key(|record| record.seq);
        records
    }

    /// Every deployment with its secrets in clear and its rotation count (for
    /// `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.sorted()
            .into_iter()
            .map(|record| {
                let mut value = record.detail(Secrets::Revealed);
                value["rotations"] = json!(record.rotations);
                value
            })
            .collect()
    }

    /// Preloads a deployment given in its read shape; secrets given in clear are kept.
    pub fn seed(&mut self, state: &Shared, item: &Object) -> ApiResult<(String, String)> {
        let name = fields::str_or(item, "name", "seeded deployment");
        let created_at = fields::str_or(item, "created_at", now());
        let slug = fields::nullable_str(item, "slug").unwrap_or_else(|| self.unique_slug(&name));
        let kind = fields::str_or(item, "type", "production");
        fields::check_enum("type", Some(&kind), TYPES)?;
        let status = fields::str_or(item, "status", "active");
        fields::check_enum("status", Some(&status), STATUSES)?;
        let connection_status = fields::str_or(item, "connection_status", "unknown");
        fields::check_enum(
            "connection_status",
            Some(&connection_status),
            CONNECTION_STATUSES,
        )?;
        let credentials = item.get("credentials").and_then(Value::as_object);
        let secret = |field: &str, fresh: fn() -> String| {
            credentials
                .and_then(|c| c.get(field))
                .and_then(Value::as_str)
                .filter(|value| *value != MASK)
                .map_or_else(fresh, str::to_owned)
        };
        let mut auth = AuthSettings::default();
        if let Some(settings) = item.get("auth_settings").and_then(Value::as_object) {
            auth.apply_seed(settings);
        }
        let record = DeploymentRecord {
            seq: state.next_seq(),
            api_created: None,
            rotations: 0,
            id: fields::str_or(item, "id", new_id()),
            name,
            slug,
            kind,
            status,
            is_default: fields::flag_or(item, "is_default", false),
            connection_status,
            created_by: fields::str_or(item, "created_by", &state.user_id),
            last_updated_at: fields::str_or(item, "last_updated_at", &created_at),
            created_at,
            last_synced_at: fields::nullable_str(item, "last_synced_at"),
            last_resynced_at: fields::nullable_str(item, "last_resynced_at"),
            tags: item
                .get("tags")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            auth,
            deployment_config: item.get("deployment_config").cloned().unwrap_or(json!({})),
            workspaces: item
                .get("workspaces")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            organisation_id: fields::str_or(item, "organisation_id", &state.organisation_id),
            username: secret("username", new_username),
            password: secret("password", new_password),
            client_auth: item
                .get("client_auth")
                .and_then(Value::as_str)
                .filter(|value| *value != MASK)
                .map_or_else(new_client_auth, str::to_owned),
        };
        if self.by_id.contains_key(&record.id) || self.slug_taken(&record.slug) {
            return Err(EmulatorError::validation(format!(
                "deployment {} already exists",
                record.slug
            )));
        }
        let key = (record.id.clone(), record.slug.clone());
        self.by_id.insert(record.id.clone(), record);
        Ok(key)
    }
}

pub fn new_username() -> String {
    format!("aigw-{}", random_hex(6))
}

pub fn new_password() -> String {
    random_hex(24)
}

pub fn new_client_auth() -> String {
    format!("ca-{}", random_hex(32))
}

impl DeploymentRecord {
    /// The list row (`DeploymentListItem`).
    pub fn row(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "slug": self.slug,
            "type": self.kind,
            "status": self.status,
            "is_default": fields::flag(self.is_default),
            "connection_status": self.connection_status,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "last_synced_at": self.last_synced_at,
            "last_resynced_at": self.last_resynced_at,
            "tags": self.tags,
            "object": "deployment",
        })
    }

    /// The detail read shape; secrets masked unless `Secrets::Revealed`.
    pub fn detail(&self, secrets: Secrets) -> Value {
        let (password, client_auth) = match secrets {
            Secrets::Masked => (MASK, MASK),
            Secrets::Revealed => (self.password.as_str(), self.client_auth.as_str()),
        };
        let mut value = self.row();
        value["organisation_id"] = json!(self.organisation_id);
        value["auth_settings"] = self.auth.to_json();
        value["deployment_config"] = self.deployment_config.clone();
        value["workspaces"] = json!(self.workspaces);
        value["credentials"] = json!({ "username": self.username, "password": password });
        value["client_auth"] = json!(client_auth);
        value
    }

    /// The one-time receipt of create (and of a rotating update).
    pub fn receipt(&self) -> Value {
        json!({
            "id": self.id,
            "organisation_id": self.organisation_id,
            "client_auth": self.client_auth,
            "credentials": { "username": self.username, "password": self.password },
            "object": "deployment",
        })
    }

    /// Issues a new `client_auth` and registry password; the old ones stop being valid.
    pub fn rotate(&mut self) {
        self.client_auth = new_client_auth();
        self.password = new_password();
        self.rotations += 1;
    }
}

impl AuthSettings {
    pub fn to_json(&self) -> Value {
        json!({
            "gateway_base_url": self.gateway_base_url,
            "mcp_gateway_base_url": self.mcp_gateway_base_url,
            "private_link_endpoint": self.private_link_endpoint,
            "use_private_link_proxy": fields::flag(self.use_private_link_proxy),
            "is_dataservice_hosted": fields::flag(self.is_dataservice_hosted),
            "is_playground_proxy_allowed": fields::flag(self.is_playground_proxy_allowed),
            "disable_service_gateway": fields::flag(self.disable_service_gateway),
            "workspaces_allowed": self.workspaces_allowed,
            "jwt_subs_allowed": self.jwt_subs_allowed,
            "jwt_sub_workspace_mapping": self.jwt_sub_workspace_mapping,
            "allow_all_workspaces": fields::flag(self.allow_all_workspaces),
        })
    }

    fn apply_seed(&mut self, settings: &Object) {
        let text = |field: &str| fields::str_or(settings, field, "");
        let list = |field: &str| -> Vec<String> {
            settings
                .get(field)
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        self.gateway_base_url = text("gateway_base_url");
        self.mcp_gateway_base_url = text("mcp_gateway_base_url");
        self.private_link_endpoint = text("private_link_endpoint");
        self.use_private_link_proxy = fields::flag_or(settings, "use_private_link_proxy", false);
        self.is_dataservice_hosted = fields::flag_or(settings, "is_dataservice_hosted", false);
        self.is_playground_proxy_allowed =
            fields::flag_or(settings, "is_playground_proxy_allowed", false);
        self.disable_service_gateway = fields::flag_or(settings, "disable_service_gateway", false);
        self.workspaces_allowed = list("workspaces_allowed");
        self.jwt_subs_allowed = list("jwt_subs_allowed");
        self.jwt_sub_workspace_mapping = settings
            .get("jwt_sub_workspace_mapping")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        self.allow_all_workspaces = fields::flag_or(settings, "allow_all_workspaces", false);
    }

    /// Applies a request's `auth_settings`. Lists and the JWT mapping merge into what is stored
    /// unless `override_existing` is set, in which case they replace it; the `remove_*` lists then
    /// take entries out.
    pub fn apply_request(&mut self, settings: &Object, override_existing: bool) -> ApiResult<()> {
        let url = |field: &str| {
            fields::opt_str(settings, field).map_err(|err| prefixed(err, "auth_settings."))
        };
        if let Some(value) = url("gateway_base_url")? {
            self.gateway_base_url = value;
        }
        if let Some(value) = url("mcp_gateway_base_url")? {
            self.mcp_gateway_base_url = value;
        }
        if let Some(value) = url("private_link_endpoint")? {
            self.private_link_endpoint = value;
        }
        let flags: [(&str, &mut bool); 5] = [
            ("use_private_link_proxy", &mut self.use_private_link_proxy),
            ("is_dataservice_hosted", &mut self.is_dataservice_hosted),
            (
                "is_playground_proxy_allowed",
                &mut self.is_playground_proxy_allowed,
            ),
            ("disable_service_gateway", &mut self.disable_service_gateway),
            ("allow_all_workspaces", &mut self.allow_all_workspaces),
        ];
        for (field, slot) in flags {
            if let Some(value) =
                fields::opt_bool(settings, field).map_err(|err| prefixed(err, "auth_settings."))?
            {
                *slot = value;
            }
        }
        let list = |field: &str| {
            fields::opt_str_list(settings, field).map_err(|err| prefixed(err, "auth_settings."))
        };
        if let Some(items) = list("workspaces_allowed")? {
            merge_list(&mut self.workspaces_allowed, items, override_existing);
        }
        if let Some(items) = list("jwt_subs_allowed")? {
            merge_list(&mut self.jwt_subs_allowed, items, override_existing);
        }
        if let Some(items) = list("remove_workspaces_allowed")? {
            self.workspaces_allowed.retain(|item| !items.contains(item));
        }
        if let Some(items) = list("remove_subs_allowed")? {
            self.jwt_subs_allowed.retain(|item| !items.contains(item));
        }
        let mapping = fields::opt_string_map(settings, "jwt_sub_workspace_mapping")
            .map_err(|err| prefixed(err, "auth_settings."))?;
        if let Some(mapping) = mapping {
            if override_existing {
                self.jwt_sub_workspace_mapping = mapping;
            } else {
                self.jwt_sub_workspace_mapping.extend(mapping);
            }
        }
        Ok(())
    }
}

fn merge_list(stored: &mut Vec<String>, items: Vec<String>, override_existing: bool) {
    if override_existing {
        *stored = items;
        return;
    }
    for item in items {
        if !stored.contains(&item) {
            stored.push(item);
        }
    }
}

/// Qualifies a validation message with the enclosing object (`auth_settings.x must be …`).
fn prefixed(err: EmulatorError, prefix: &str) -> EmulatorError {
    match err {
        EmulatorError::Validation(message) => {
            EmulatorError::Validation(format!("{prefix}{message}"))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_merge_unless_override() {
        let mut auth = AuthSettings {
            workspaces_allowed: vec!["a".into()],
            ..AuthSettings::default()
        };
        let body = json!({"workspaces_allowed": ["b"], "remove_workspaces_allowed": ["a"]});
        let body = body.as_object().cloned().unwrap_or_default();
        auth.apply_request(&body, false).expect("valid settings");
        assert_eq!(auth.workspaces_allowed, vec!["b".to_owned()]);
        let replace = json!({"workspaces_allowed": ["c"]});
        let replace = replace.as_object().cloned().unwrap_or_default();
        auth.apply_request(&replace, true).expect("valid settings");
        assert_eq!(auth.workspaces_allowed, vec!["c".to_owned()]);
    }
}
