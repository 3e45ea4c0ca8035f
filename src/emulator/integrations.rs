//! Integrations in memory (the organisation's upstream credentials), with their workspace
//! access rows and model access: the read shapes and the write-only rules. The routes are in
//! `integration_routes`.
//!
//! `key` and the credential fields of `configurations` are write-only (FACTS-more §0.5): a read
//! shows `masked_key` and each secret configuration field as `masked_<field>`; only
//! `GET /_emulator/state` shows the values, with how often the key was written. An integration
//! starts with `last_updated_at: null` (live: null until the first update). A workspace access
//! row is never deleted: disabling it keeps it listed with `enabled: false` and `status:
//! "archived"`; each row counts its writes (`writes` in the state dump), so a test can tell that
//! a PUT touched only the rows it named. DELETE removes the integration (a hard delete: FACTS
//! leaves hard vs archive open, and a `status: archived` read would satisfy the same rule).

use std::{collections::HashMap, time::Instant};

use serde_json::{Map, Value, json};

use super::{
    errors::{ApiResult, EmulatorError},
    fields::{self, Object},
    state::{Shared, new_id, now},
};

/// The `object` of reads and receipts.
pub const OBJECT: &str = "integration";

/// What a masked value reads as: the last four characters of a long value, nothing of a short
/// one (`****wxyz`, `****`).
pub fn masked(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    match chars.len() {
        n if n >= 12 => format!("****{}", chars[n - 4..].iter().collect::<String>()),
        _ => "****".to_owned(),
    }
}

/// Models an integration offers from the start, by `ai_provider_id` (a catalogue slug such as
/// `open-ai`; a catalogue UUID offers none): enough to exercise enabling and disabling models
/// that cannot be deleted.
fn built_in_models(ai_provider_id: &str) -> &'static [&'static str] {
    let provider = ai_provider_id.to_ascii_lowercase();
    match provider.as_str() {
        p if p.contains("azure") => &["gpt-4o"],
        p if p.contains("openai") || p.contains("open-ai") => &["gpt-4o", "gpt-4o-mini"],
        p if p.contains("anthropic") => &["claude-3-5-sonnet", "claude-3-5-haiku"],
        p if p.contains("bedrock") => &["anthropic.claude-3-5-sonnet"],
        p if p.contains("vertex") => &["gemini-1.5-pro"],
        _ => &[],
    }
}

#[derive(Default)]
pub struct IntegrationStore {
    by_id: HashMap<String, IntegrationRecord>,
}

pub struct IntegrationRecord {
    pub seq: u64,
    /// When the API created it (`None` when seeded); lists lag behind it under `list_lag_ms`.
    pub api_created: Option<Instant>,
    pub id: String,
    pub slug: String,
    pub name: String,
    pub ai_provider_id: String,
    pub description: Option<String>,
    /// The upstream key, write-only.
    pub key: Option<String>,
    /// Provider settings, credential fields included, write-only as a whole.
    pub configurations: Object,
    pub organisation_id: String,
    /// The workspace of a workspace-scoped integration; `None` for an organisation one.
    pub workspace_id: Option<String>,
    pub status: String,
    pub created_at: String,
    pub last_updated_at: Option<String>,
    pub owner_id: String,
    pub secret_mappings: Vec<Value>,
    pub pricing_adjustments: Value,
    pub allow_all_models: bool,
    /// `global_workspace_access` as last set (`None`: never set).
    pub global_access: Option<Object>,
    pub workspaces: Vec<AccessRow>,
    pub models: Vec<ModelRow>,
    /// How many requests wrote `key` (create and updates that carried one).
    pub key_writes: u64,
}

/// One workspace's access to an integration.
pub struct AccessRow {
    /// The workspace as the request named it (UUID or slug; FACTS-more §8.4).
    pub id: String,
    pub enabled: bool,
    /// `null` or an array of at most one usage-limits object.
    pub usage_limits: Value,
    /// `null` or an array of at most one rate-limits object.
    pub rate_limits: Value,
    pub created_at: String,
    pub last_updated_at: String,
    pub last_reset_at: Option<String>,
    /// Requests that wrote this row.
    pub writes: u64,
}

/// One model the integration exposes.
pub struct ModelRow {
    pub slug: String,
    pub name: String,
    pub enabled: bool,
    pub is_custom: bool,
    pub is_finetune: bool,
    pub base_model_slug: Option<String>,
    pub configurations: Value,
    pub pricing_config: Value,
    pub description: Option<String>,
    pub created_at: String,
    pub last_updated_at: String,
}

impl AccessRow {
    pub fn new(id: String) -> Self {
        let at = now();
        Self {
            id,
            enabled: false,
            usage_limits: Value::Null,
            rate_limits: Value::Null,
            created_at: at.clone(),
            last_updated_at: at,
            last_reset_at: None,
            writes: 0,
        }
    }

    /// The live row: `status` follows `enabled` (`archived` once disabled).
    pub fn row(&self) -> Value {
        json!({
            "id": self.id,
            "enabled": self.enabled,
            "usage_limits": self.usage_limits,
            "rate_limits": self.rate_limits,
            "status": if self.enabled { "active" } else { "archived" },
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "last_reset_at": self.last_reset_at,
        })
    }
}

impl ModelRow {
    pub fn new(slug: &str, custom: bool) -> Self {
        let at = now();
        Self {
            slug: slug.to_owned(),
            name: slug.to_owned(),
            enabled: true,
            is_custom: custom,
            is_finetune: false,
            base_model_slug: None,
            configurations: Value::Null,
            pricing_config: Value::Null,
            description: None,
            created_at: at.clone(),
            last_updated_at: at,
        }
    }

    /// The live row: `enabled` a real boolean, `is_custom` and `is_finetune` 0/1 integers (the
    /// reason [pTF] decodes them flexibly).
    pub fn row(&self) -> Value {
        json!({
            "slug": self.slug,
            "name": self.name,
            "enabled": self.enabled,
            "is_custom": fields::flag(self.is_custom),
            "is_finetune": fields::flag(self.is_finetune),
            "base_model_slug": self.base_model_slug,
            "pricing_config": self.pricing_config,
            "description": self.description,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
        })
    }
}

/// `configurations` as reads show them: each secret field renamed `masked_<field>` with a
/// masked value, header maps' values masked in place.
fn masked_configurations(configurations: &Object) -> Object {
    let mut shown = Map::new();
    for (key, value) in configurations {
        let secret = crate::api::secret_fields::is_secret_key(key);
        match value {
            Value::String(text) if secret => {
                shown.insert(format!("masked_{key}"), json!(masked(text)));
            }
            Value::Object(headers) if crate::api::secret_fields::is_header_map(key) => {
                let headers: Map<String, Value> = headers
                    .iter()
                    .map(|(name, v)| (name.clone(), json!(masked(v.as_str().unwrap_or("")))))
                    .collect();
                shown.insert(key.clone(), Value::Object(headers));
            }
            _ if secret => {
                shown.insert(format!("masked_{key}"), json!("****"));
            }
            other => {
                shown.insert(key.clone(), other.clone());
            }
        }
    }
    shown
}

impl IntegrationRecord {
    /// A new organisation integration made by the API, before the request's fields are applied.
    pub fn created(state: &Shared, name: String, ai_provider_id: String, slug: String) -> Self {
        let at = now();
        let models = built_in_models(&ai_provider_id)
            .iter()
            .map(|slug| ModelRow::new(slug, false))
            .collect();
        Self {
            seq: state.next_seq(),
            api_created: Some(Instant::now()),
            id: new_id(),
            slug,
            name,
            ai_provider_id,
            description: None,
            key: None,
            configurations: Map::new(),
            organisation_id: state.organisation_id.clone(),
            workspace_id: None,
            status: "active".to_owned(),
            created_at: at,
            last_updated_at: None,
            owner_id: state.user_id.clone(),
            secret_mappings: Vec::new(),
            pricing_adjustments: Value::Null,
            allow_all_models: true,
            global_access: None,
            workspaces: Vec::new(),
            models,
            key_writes: 0,
        }
    }

    fn enabled_rows(&self) -> usize {
        self.workspaces.iter().filter(|row| row.enabled).count()
    }

    /// A row of the list (FACTS-more §3: [PANW] `IntegrationList` plus the live extras).
    pub fn list_row(&self) -> Value {
        json!({
            "id": self.id,
            "organisation_id": self.organisation_id,
            "ai_provider_id": self.ai_provider_id,
            "name": self.name,
            "status": self.status,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "slug": self.slug,
            "description": self.description,
            "owner_id": self.owner_id,
            "tags": {},
            "workspaces_count": self.enabled_rows(),
            "type": if self.workspace_id.is_some() { "workspace" } else { "organisation" },
            "workspace_id": self.workspace_id,
            "object": OBJECT,
        })
    }

    /// The live detail: the list row with `masked_key`, masked `configurations`,
    /// `global_workspace_access` (null until set), `allow_all_models` (a real boolean).
    pub fn read(&self) -> Value {
        let mut value = self.list_row();
        value["masked_key"] = json!(self.key.as_deref().map(masked));
        value["configurations"] = Value::Object(masked_configurations(&self.configurations));
        value["global_workspace_access"] = json!(self.global_access);
        value["allow_all_models"] = json!(self.allow_all_models);
        value["workspace_count"] = json!(self.enabled_rows());
        value["secret_mappings"] = json!(self.secret_mappings);
        value["pricing_adjustments"] = self.pricing_adjustments.clone();
        value
    }

    /// `GET …/workspaces`: the rows in creation order, with the live top-level extras.
    pub fn workspaces_read(&self) -> Value {
        let global = self
            .global_access
            .clone()
            .unwrap_or_else(|| Map::from_iter([("enabled".to_owned(), json!(false))]));
        json!({
            "total": self.workspaces.len(),
            "workspaces": self.workspaces.iter().map(AccessRow::row).collect::<Vec<_>>(),
            "global_workspace_access": global,
            "object": "list",
        })
    }

    /// `GET …/models`.
    pub fn models_read(&self) -> Value {
        json!({
            "total": self.models.len(),
            "models": self.models.iter().map(ModelRow::row).collect::<Vec<_>>(),
            "allow_all_models": self.allow_all_models,
            "object": "list",
        })
    }

    /// Whether a provider may bind it into `workspace`: an enabled access row, its own
    /// workspace, or global access.
    pub fn enabled_for(&self, workspace: &str) -> bool {
        self.workspace_id.as_deref() == Some(workspace)
            || self
                .global_access
                .as_ref()
                .is_some_and(|g| fields::flag_or(g, "enabled", false))
            || self
                .workspaces
                .iter()
                .any(|row| row.enabled && row.id == workspace)
    }

    /// The state dump: the read with the key and configurations in clear, the key write
    /// count, and each access row's write count.
    fn dump(&self) -> Value {
        let mut value = self.read();
        value["key"] = json!(self.key);
        value["configurations"] = Value::Object(self.configurations.clone());
        value["key_writes"] = json!(self.key_writes);
        value["workspaces"] = self
            .workspaces
            .iter()
            .map(|row| {
                let mut shown = row.row();
                shown["writes"] = json!(row.writes);
                shown
            })
            .collect();
        value["models"] = self.models.iter().map(ModelRow::row).collect();
        value
    }
}

impl IntegrationStore {
    /// Every integration in creation order.
    pub fn sorted(&self) -> Vec<&IntegrationRecord> {
        let mut records: Vec<_> = self.by_id.values().collect();
        records.sort_by_key(|record| record.seq);
        records
    }

    pub fn insert(&mut self, record: IntegrationRecord) {
        self.by_id.insert(record.id.clone(), record);
    }

    /// By UUID or slug (the SDK addresses integrations by UUID, [PANW] by slug).
    pub fn find(&self, key: &str) -> Option<&IntegrationRecord> {
        self.by_id
            .get(key)
            .or_else(|| self.by_id.values().find(|r| r.slug == key))
    }

    pub fn find_mut(&mut self, key: &str) -> Option<&mut IntegrationRecord> {
        let id = self.find(key)?.id.clone();
        self.by_id.get_mut(&id)
    }

    pub fn slug_taken(&self, slug: &str) -> bool {
        self.by_id.values().any(|r| r.slug == slug)
    }

    pub fn remove(&mut self, key: &str) -> Option<IntegrationRecord> {
        let id = self.find(key)?.id.clone();
        self.by_id.remove(&id)
    }

    /// A slug for `name` that no integration has: its name, dashed, with a random suffix.
    pub fn new_slug(&self, name: &str) -> String {
        super::state::free_slug(name, "integration", |slug| self.slug_taken(slug))
    }

    /// Every integration with its secrets in clear (for `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.sorted()
            .into_iter()
            .map(IntegrationRecord::dump)
            .collect()
    }

    /// Preloads an integration given in its read shape, with `key` and `configurations` in
    /// clear and `workspaces` as access rows (`{id, enabled}`); answers its id and slug.
    pub fn seed(&mut self, state: &Shared, item: &Object) -> ApiResult<(String, String)> {
        let name = fields::str_or(item, "name", "seeded integration");
        let slug = fields::nullable_str(item, "slug").unwrap_or_else(|| self.new_slug(&name));
        let provider = fields::str_or(item, "ai_provider_id", "open-ai");
        let mut record = IntegrationRecord::created(state, name, provider, slug);
        record.api_created = None;
        record.id = fields::str_or(item, "id", record.id);
        if self.by_id.contains_key(&record.id) || self.slug_taken(&record.slug) {
            return Err(EmulatorError::validation(format!(
                "integration {} already exists",
                record.slug
            )));
        }
        record.description = fields::nullable_str(item, "description");
        record.key = fields::nullable_str(item, "key");
        record.configurations = fields::opt_object(item, "configurations")?.unwrap_or_default();
        record.workspace_id = fields::nullable_str(item, "workspace_id");
        record.last_updated_at = fields::nullable_str(item, "last_updated_at");
        for row in item
            .get("workspaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
        {
            let mut access = AccessRow::new(fields::str_or(row, "id", ""));
            access.enabled = fields::flag_or(row, "enabled", true);
            record.workspaces.push(access);
        }
        let answer = (record.id.clone(), record.slug.clone());
        self.insert(record);
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_configuration_fields_read_masked_under_another_name() {
        let configurations = json!({
            "aws_region": "eu-west-1", "aws_access_key_id": "AKIAEXAMPLE",
            "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG", "custom_headers": {"x-api-key": "hdr-value-123456"}
        });
        let shown = masked_configurations(configurations.as_object().unwrap());
        let text = Value::Object(shown.clone()).to_string();
        assert!(
            !text.contains("wJalrXUtnFEMI") && !text.contains("hdr-value"),
            "{text}"
        );
        assert_eq!(shown["aws_region"], "eu-west-1");
        assert_eq!(shown["masked_aws_secret_access_key"], "****DENG");
        assert!(shown.get("aws_secret_access_key").is_none());
        assert_eq!(masked("short"), "****");
    }
}
