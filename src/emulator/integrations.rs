//! Integrations in memory (the organisation's upstream credentials), with their workspace
//! access rows and model access: the read shapes and the write-only rules, and their routes.
//!
//! `key` and the credential fields of `configurations` are write-only (FACTS-more §0.5): a read
//! shows `masked_key` and each secret configuration field as `masked_<field>`; only
//! `GET /_emulator/state` shows the values, with how often the key was written. An integration
//! starts with `last_updated_at: null` (live: null until the first update). A workspace access
//! row is never deleted: disabling it keeps it listed with `enabled: false` and `status:
//! "archived"`; each row counts its writes (`writes` in the state dump), so a test can tell that
//! a PUT touched only the rows it named. DELETE removes the integration (a hard delete: FACTS
//! leaves hard vs archive open, and a `status: archived` read would satisfy the same rule).
//!
//! `/ai_gw/admin/v2/integrations` (FACTS-more §3): create, list, read by UUID or slug, update,
//! delete, and the workspace access (`…/workspaces`) and model access (`…/models`) of each. The
//! store and the read shapes are in `integrations`.
//!
//! Create takes `name` and `ai_provider_id` (required), a `slug` (`^[a-zA-Z0-9_-]+$`, made from
//! the name when absent), `organisation_id` as the numeric TSG or a UUID (reads show the
//! internal UUID), `key`, `configurations` and `workspace_id` (a workspace-scoped integration).
//! `create_default_provider` defaults to **true** as on the live API: a workspace-scoped create,
//! and every workspace access row a PUT enables, then gets a provider nobody asked for, unless
//! the request (or the row) says `false`. `ai_provider_id`, `slug` and `workspace_id` are fixed:
//! an update naming another value is a 400. `secret_mappings` entries target `key` or
//! `configurations.<field>`, each once (`common::mappings`); a secret reference they name cannot
//! be deleted (`secret_references`).
//!
//! Workspace access PUTs merge per listed workspace; rows not listed are left alone unless
//! `override_existing_workspace_access: true`, which disables them. There is no DELETE for a
//! row. Model access PUTs merge per slug (a new slug must be `is_custom`); `DELETE …/models
//! ?slugs=a,b` removes custom models only (built-in ones can only be disabled).

use std::{
    collections::{HashMap, HashSet},
    ops::Deref,
    sync::{Arc, Mutex},
};

use axum::{
    Json,
    extract::{Path, Query, State},
    response::Response,
};
use serde_json::{Map, Value, json};

use super::common::{
    access::{self, WorkspaceAccess},
    clock::{now, touched},
    errors::{ApiResult, EmulatorError},
    fields::{self, IdRule, JsonObject, Object},
    mappings, policy_fields,
    records::{self, Key, Kind, Record, Records, Slug, reply_one},
    state::{Common, lock},
};

/// What the integration routes reach: the state every route shares and the integrations.
#[derive(Clone)]
pub struct IntegrationsState {
    pub common: Arc<Common>,
    pub integrations: Arc<Mutex<IntegrationStore>>,
    /// Makes the provider the API makes by itself when an integration is enabled for a
    /// workspace (`providers::create_default`, wired by `control`): answers its id. Called with
    /// the integrations locked.
    pub default_provider: DefaultProvider,
}

/// `(integration, workspace, wanted slug) → provider id`; see [`IntegrationsState`].
pub type DefaultProvider =
    Arc<dyn Fn(&IntegrationRecord, &str, Option<String>) -> String + Send + Sync>;

impl Deref for IntegrationsState {
    type Target = Common;

    fn deref(&self) -> &Common {
        &self.common
    }
}

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

pub type IntegrationStore = Records<IntegrationRecord>;

pub struct IntegrationRecord {
    pub key: Key,
    pub name: String,
    pub ai_provider_id: String,
    pub description: Option<String>,
    /// The upstream key, write-only.
    pub upstream_key: Option<String>,
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

/// One workspace's access to an integration, with the limits that apply in it.
pub struct AccessRow {
    pub access: WorkspaceAccess,
    /// `null` or an array of at most one usage-limits object.
    pub usage_limits: Value,
    /// `null` or an array of at most one rate-limits object.
    pub rate_limits: Value,
    pub last_reset_at: Option<String>,
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
    pub fn new(id: String, enabled: bool) -> Self {
        Self {
            access: WorkspaceAccess::new(id, enabled),
            usage_limits: Value::Null,
            rate_limits: Value::Null,
            last_reset_at: None,
        }
    }

    /// The live row: the access fields with the limits and `last_reset_at`.
    pub fn row(&self) -> Value {
        let mut row = self.access.row();
        row["usage_limits"] = self.usage_limits.clone();
        row["rate_limits"] = self.rate_limits.clone();
        row["last_reset_at"] = json!(self.last_reset_at);
        row
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
pub fn masked_configurations(configurations: &Object) -> Object {
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
    pub fn created(state: &Common, name: String, ai_provider_id: String, slug: String) -> Self {
        let at = now();
        let models = built_in_models(&ai_provider_id)
            .iter()
            .map(|slug| ModelRow::new(slug, false))
            .collect();
        Self {
            key: Key::created(state, slug),
            name,
            ai_provider_id,
            description: None,
            upstream_key: None,
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
        access::enabled_count(self.workspaces.iter().map(|row| &row.access))
    }

    /// A row of the list (FACTS-more §3: [PANW] `IntegrationList` plus the live extras).
    pub fn list_row(&self) -> Value {
        json!({
            "id": self.key.id,
            "organisation_id": self.organisation_id,
            "ai_provider_id": self.ai_provider_id,
            "name": self.name,
            "status": self.status,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "slug": self.key.slug,
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
        value["masked_key"] = json!(self.upstream_key.as_deref().map(masked));
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
                .any(|row| row.access.enabled && row.access.id == workspace)
    }

    /// The state dump: the read with the key and configurations in clear, the key write
    /// count, and each access row's write count.
    fn dump(&self) -> Value {
        let mut value = self.read();
        value["key"] = json!(self.upstream_key);
        value["configurations"] = Value::Object(self.configurations.clone());
        value["key_writes"] = json!(self.key_writes);
        value["workspaces"] = self
            .workspaces
            .iter()
            .map(|row| access::with_writes(row.row(), row.access.writes))
            .collect();
        value["models"] = self.models.iter().map(ModelRow::row).collect();
        value
    }
}

/// Found by UUID or slug (the SDK addresses integrations by UUID, [PANW] by slug).
impl Record for IntegrationRecord {
    const KIND: Kind = Kind::new("an", "integration", Slug::Named("integration"));

    fn key(&self) -> &Key {
        &self.key
    }
}

impl IntegrationStore {
    /// Every integration with its secrets in clear (for `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.dump_with(IntegrationRecord::dump)
    }

    /// Preloads an integration given in its read shape, with `key` and `configurations` in
    /// clear and `workspaces` as access rows (`{id, enabled}`); answers its id and slug.
    pub fn seed(&mut self, state: &Common, item: &Object) -> ApiResult<(String, String)> {
        let name = fields::str_or(item, "name", "seeded integration");
        let slug = fields::nullable_str(item, "slug").unwrap_or_else(|| self.new_slug(&name));
        let provider = fields::str_or(item, "ai_provider_id", "open-ai");
        let mut record = IntegrationRecord::created(state, name, provider, slug);
        record.key.api_created = None;
        record.key.id = fields::str_or(item, "id", record.key.id);
        self.check_new(&record.key.id, &record.key.slug)?;
        record.description = fields::nullable_str(item, "description");
        record.upstream_key = fields::nullable_str(item, "key");
        record.configurations = fields::opt_object(item, "configurations")?.unwrap_or_default();
        record.workspace_id = fields::nullable_str(item, "workspace_id");
        record.last_updated_at = fields::nullable_str(item, "last_updated_at");
        record.workspaces = fields::seeded_access(item)
            .map(|(id, enabled)| AccessRow::new(id, enabled))
            .collect();
        Ok(self.insert_seeded(record))
    }
}

/// `^[a-zA-Z0-9_-]+$`, at most 255 characters: integration and provider slugs.
pub fn valid_slug(text: &str) -> bool {
    (1..=255).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// An optional slug field, checked against [`valid_slug`].
pub fn opt_slug(body: &Object, field: &str) -> ApiResult<Option<String>> {
    let slug = fields::opt_str(body, field)?;
    if slug.as_deref().is_some_and(|s| !valid_slug(s)) {
        return Err(EmulatorError::validation(format!(
            "{field} must match ^[a-zA-Z0-9_-]+$ (at most 255 characters)"
        )));
    }
    Ok(slug)
}

/// One `UsageLimits` object: `credit_limit` (integer ≥ 1) and `type` (cost|tokens) required,
/// `alert_threshold` (integer ≥ 1), `periodic_reset` (monthly|weekly) or `periodic_reset_days`
/// (1–365), not both.
pub fn usage_limits(value: &Value, field: &str) -> ApiResult<Value> {
    let item = value
        .as_object()
        .ok_or_else(|| EmulatorError::validation(format!("{field} must be an object")))?;
    let positive = |name: &str, required: bool| match item.get(name) {
        None | Some(Value::Null) if !required => Ok(()),
        Some(v) if v.as_u64().is_some_and(|n| n >= 1) => Ok(()),
        _ => Err(EmulatorError::validation(format!(
            "{field}.{name} must be an integer of at least 1"
        ))),
    };
    positive("credit_limit", true)?;
    positive("alert_threshold", false)?;
    let prefixed = |e: EmulatorError| EmulatorError::validation(format!("{field}.{e}"));
    policy_fields::required_enum(item, "type", &["cost", "tokens"]).map_err(prefixed)?;
    let reset =
        fields::opt_enum(item, "periodic_reset", &["monthly", "weekly"]).map_err(prefixed)?;
    let days = match item.get("periodic_reset_days") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|d| (1..=365).contains(d))
                .ok_or_else(|| {
                    EmulatorError::validation(format!(
                        "{field}.periodic_reset_days must be 1 to 365"
                    ))
                })?,
        ),
    };
    if reset.is_some() && days.is_some() {
        return Err(EmulatorError::validation(format!(
            "{field}: periodic_reset and periodic_reset_days are mutually exclusive"
        )));
    }
    Ok(value.clone())
}

/// One `RateLimits` object: `type` (requests|tokens), `unit` (rpd|rph|rpm), `value` (integer).
pub fn rate_limits(value: &Value, field: &str) -> ApiResult<Value> {
    let item = value
        .as_object()
        .ok_or_else(|| EmulatorError::validation(format!("{field} must be an object")))?;
    let prefixed = |e: EmulatorError| EmulatorError::validation(format!("{field}.{e}"));
    policy_fields::required_enum(item, "type", &["requests", "tokens"]).map_err(prefixed)?;
    policy_fields::required_enum(item, "unit", &["rpd", "rph", "rpm"]).map_err(prefixed)?;
    if item.get("value").and_then(Value::as_u64).is_none() {
        return Err(EmulatorError::validation(format!(
            "{field}.value must be an integer"
        )));
    }
    Ok(value.clone())
}

/// `null`, or an array of at most one item checked by `check`.
fn one_or_none(
    item: &Object,
    field: &str,
    check: fn(&Value, &str) -> ApiResult<Value>,
) -> ApiResult<Option<Value>> {
    match item.get(field) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(Value::Null)),
        Some(Value::Array(items)) if items.len() <= 1 => {
            let checked: ApiResult<Vec<Value>> = items
                .iter()
                .map(|v| check(v, &format!("{field}[]")))
                .collect();
            Ok(Some(Value::Array(checked?)))
        }
        Some(_) => Err(EmulatorError::validation(format!(
            "{field} must be null or an array of at most one item"
        ))),
    }
}

/// `key`: a non-empty string (an empty one would erase the credential).
fn key(body: &Object) -> ApiResult<Option<String>> {
    match fields::opt_str(body, "key")? {
        Some(key) if key.is_empty() => Err(EmulatorError::validation("key must not be empty")),
        other => Ok(other),
    }
}

/// `POST /ai_gw/admin/v2/integrations` → `{id, slug, provider_id, object}`; `provider_id` is
/// the default provider's id when one was made.
pub async fn create(
    State(state): State<IntegrationsState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::req_str(&body, "name")?;
    let ai_provider_id = fields::req_str(&body, "ai_provider_id")?;
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;
    let workspace = IdRule::UuidOrSlug.opt_nonempty(&body, "workspace_id")?;
    let slug = opt_slug(&body, "slug")?;
    let default_slug = opt_slug(&body, "default_provider_slug")?;
    let default_provider = fields::opt_bool(&body, "create_default_provider")?.unwrap_or(true);
    let key = key(&body)?;
    let configurations = fields::opt_object(&body, "configurations")?;
    let mappings = mappings::secret_mappings(&body, &["key", "configurations."])?;
    let description = fields::opt_str(&body, "description")?;
    let pricing = match body.get("pricing_adjustments") {
        None | Some(Value::Null) => Value::Null,
        Some(value @ Value::Object(_)) => value.clone(),
        Some(_) => {
            return Err(EmulatorError::validation(
                "pricing_adjustments must be an object or null",
            ));
        }
    };
    let mut store = lock(&state.integrations);
    let slug = store.claim_slug(slug, &name)?;
    let mut record = IntegrationRecord::created(&state, name, ai_provider_id, slug);
    record.description = description;
    record.key_writes = u64::from(key.is_some());
    record.upstream_key = key;
    record.configurations = configurations.unwrap_or_default();
    record.secret_mappings = mappings.unwrap_or_default();
    record.pricing_adjustments = pricing;
    let mut provider_id = Value::Null;
    if let Some(workspace) = workspace {
        record.workspace_id = Some(workspace.clone());
        if default_provider {
            provider_id = json!((state.default_provider)(&record, &workspace, default_slug));
        }
    }
    let receipt = json!({
        "id": record.key.id, "slug": record.key.slug, "provider_id": provider_id, "object": OBJECT,
    });
    store.insert(record);
    Ok(Json(receipt))
}

/// `GET /ai_gw/admin/v2/integrations` → `{object: "list", total, data}` in creation order;
/// `type` (workspace|organisation|all) and `workspace_id` (integrations that workspace may use)
/// filter; pages like the policy lists; honours `list_lag_ms` and `normalise`.
pub async fn list(
    State(state): State<IntegrationsState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let workspace = IdRule::UuidOrSlug.filter(&query, "workspace_id")?;
    let scope = policy_fields::ScopeFilter::parse(&query)?;
    let page = policy_fields::policy_page(&query)?;
    let faults = state.faults();
    Ok(lock(&state.integrations).reply_page(
        &faults,
        page,
        |r| scope.admits(r.workspace_id.as_ref()) && workspace.is_none_or(|ws| r.enabled_for(ws)),
        IntegrationRecord::list_row,
    ))
}

/// `GET /ai_gw/admin/v2/integrations/{id}` (UUID or slug) → the live detail, key masked.
pub async fn get(state: State<IntegrationsState>, id: Path<String>) -> ApiResult<Response> {
    read_one(state, id, IntegrationRecord::read)
}

/// `GET` of one integration (or a part of it), as `read` shows it.
fn read_one(
    State(state): State<IntegrationsState>,
    Path(id): Path<String>,
    read: fn(&IntegrationRecord) -> Value,
) -> ApiResult<Response> {
    reply_one(&state, &state.integrations, &id, read)
}

/// `PUT /ai_gw/admin/v2/integrations/{id}` → `{}`: `name`, `key`, `description`,
/// `configurations` (replaced whole), `secret_mappings`, `pricing_adjustments`.
pub async fn update(
    State(state): State<IntegrationsState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;
    let name = fields::opt_name(&body)?;
    let key = key(&body)?;
    let configurations = fields::opt_object(&body, "configurations")?;
    let mappings = mappings::secret_mappings(&body, &["key", "configurations."])?;
    let description = fields::clearable_str(&body, "description", usize::MAX)?;
    let pricing = body.get("pricing_adjustments").cloned();
    let changes = name.is_some()
        || key.is_some()
        || configurations.is_some()
        || mappings.is_some()
        || description.is_some()
        || pricing.is_some();
    fields::require_update(changes)?;
    let mut store = lock(&state.integrations);
    let record = store.get_mut(&state, &id)?;
    fields::reject_changes(
        &body,
        &[
            ("ai_provider_id", json!(record.ai_provider_id)),
            ("slug", json!(record.key.slug)),
            ("workspace_id", json!(record.workspace_id)),
        ],
        "create a new integration",
    )?;
    fields::set(&mut record.name, name);
    if let Some(key) = key {
        record.upstream_key = Some(key);
        record.key_writes += 1;
    }
    fields::set(&mut record.configurations, configurations);
    fields::set(&mut record.secret_mappings, mappings);
    fields::set(&mut record.description, description);
    fields::set(&mut record.pricing_adjustments, pricing);
    let previous = record.last_updated_at.clone().unwrap_or_default();
    record.last_updated_at = Some(touched(&previous));
    Ok(Json(json!({})))
}

/// `DELETE /ai_gw/admin/v2/integrations/{id}?organisation_id=<TSG>` → `{}`; the integration is
/// gone and later calls answer 404.
pub async fn delete(
    State(state): State<IntegrationsState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    IdRule::TsgOrUuid.query(&query, "organisation_id")?;
    lock(&state.integrations).take(&state, &id)?;
    Ok(Json(json!({})))
}

/// `GET …/integrations/{id}/workspaces` → `{total, workspaces, global_workspace_access, object}`.
pub async fn workspaces(state: State<IntegrationsState>, id: Path<String>) -> ApiResult<Response> {
    read_one(state, id, IntegrationRecord::workspaces_read)
}

/// One row of a workspace access PUT, checked.
struct RowUpdate {
    id: String,
    enabled: bool,
    usage_limits: Option<Value>,
    rate_limits: Option<Value>,
    reset_usage: bool,
    default_provider: Option<bool>,
    default_slug: Option<String>,
}

impl RowUpdate {
    fn parse(item: &Value) -> ApiResult<Self> {
        let (item, id, enabled) = fields::access_item(item)?;
        Ok(Self {
            id,
            enabled,
            usage_limits: one_or_none(item, "usage_limits", usage_limits)?,
            rate_limits: one_or_none(item, "rate_limits", rate_limits)?,
            reset_usage: fields::opt_bool(item, "reset_usage")?.unwrap_or(false),
            default_provider: fields::opt_bool(item, "create_default_provider")?,
            default_slug: opt_slug(item, "default_provider_slug")?,
        })
    }

    /// Applies it; true when it enabled a row that was not enabled.
    fn apply(self, rows: &mut Vec<AccessRow>) -> bool {
        let row = records::upsert(
            rows,
            |r| r.access.id == self.id,
            || AccessRow::new(self.id.clone(), false),
        );
        let newly_enabled = self.enabled && !row.access.enabled;
        row.access.enabled = self.enabled;
        fields::set(&mut row.usage_limits, self.usage_limits);
        fields::set(&mut row.rate_limits, self.rate_limits);
        if self.reset_usage {
            row.last_reset_at = Some(now());
        }
        row.access.touch();
        newly_enabled
    }
}

/// `PUT …/integrations/{id}/workspaces` → `{}`: merges the listed rows (see the module
/// comment), sets `global_workspace_access` when given, and makes a default provider in each
/// workspace it newly enables unless told not to.
pub async fn update_workspaces(
    State(state): State<IntegrationsState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let rows: Vec<RowUpdate> = fields::opt_array(&body, "workspaces")?
        .unwrap_or_default()
        .iter()
        .map(RowUpdate::parse)
        .collect::<ApiResult<_>>()?;
    let mut seen = HashSet::new();
    if let Some(twice) = rows.iter().find(|r| !seen.insert(r.id.as_str())) {
        return Err(EmulatorError::validation(format!(
            "workspaces names {} twice",
            twice.id
        )));
    }
    let global = fields::opt_object(&body, "global_workspace_access")?;
    if global
        .as_ref()
        .is_some_and(|g| fields::opt_bool(g, "enabled").ok().flatten().is_none())
    {
        return Err(EmulatorError::validation(
            "global_workspace_access.enabled is required",
        ));
    }
    if rows.is_empty() && global.is_none() {
        return Err(EmulatorError::validation(
            "workspaces or global_workspace_access is required",
        ));
    }
    let overriding =
        fields::opt_bool(&body, "override_existing_workspace_access")?.unwrap_or(false);
    let default_provider = fields::opt_bool(&body, "create_default_provider")?.unwrap_or(true);
    let default_slug = opt_slug(&body, "default_provider_slug")?;
    let mut store = lock(&state.integrations);
    let record = store.get_mut(&state, &id)?;
    if overriding {
        access::disable_unlisted(record.workspaces.iter_mut().map(|r| &mut r.access), |id| {
            seen.contains(id)
        });
    }
    let mut enabled = Vec::new();
    for row in rows {
        let wants_provider = row.default_provider.unwrap_or(default_provider);
        let slug = row.default_slug.clone().or(default_slug.clone());
        let workspace = row.id.clone();
        if row.apply(&mut record.workspaces) && wants_provider {
            enabled.push((workspace, slug));
        }
    }
    if let Some(global) = global {
        record.global_access = Some(global);
    }
    for (workspace, slug) in enabled {
        (state.default_provider)(record, &workspace, slug);
    }
    Ok(Json(json!({})))
}

/// `GET …/integrations/{id}/models` → `{total, models, allow_all_models, object}`.
pub async fn models(state: State<IntegrationsState>, id: Path<String>) -> ApiResult<Response> {
    read_one(state, id, IntegrationRecord::models_read)
}

/// `PUT …/integrations/{id}/models` → `{}`: merges per slug; a slug the integration lacks is
/// added only as a custom model (`is_custom: true`).
pub async fn update_models(
    State(state): State<IntegrationsState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let models = fields::req_array(&body, "models")?;
    let allow_all = fields::opt_bool(&body, "allow_all_models")?;
    let parsed = fields::items("models", &models, |item| {
        let slug = fields::item_str("models", item, "slug")?;
        let enabled = fields::item_bool("models", item, "enabled")?;
        // [pTF] reads these as bool, number or string: take every form.
        let flex = |field: &str| match item.get(field) {
            Some(Value::String(s)) => Ok(Some(s == "true" || s == "1")),
            _ => fields::opt_bool(item, field),
        };
        Ok((
            item.clone(),
            slug,
            enabled,
            flex("is_custom")?,
            flex("is_finetune")?,
        ))
    })?;
    let mut store = lock(&state.integrations);
    let record = store.get_mut(&state, &id)?;
    if let Some((_, slug, ..)) = parsed.iter().find(|(_, slug, _, custom, _)| {
        *custom != Some(true) && !record.models.iter().any(|m| &m.slug == slug)
    }) {
        return Err(EmulatorError::validation(format!(
            "model {slug} is not offered by this integration; add it as a custom model (is_custom: true)"
        )));
    }
    for (item, slug, enabled, custom, finetune) in parsed {
        let model = records::upsert(
            &mut record.models,
            |m| m.slug == slug,
            || ModelRow::new(&slug, true),
        );
        model.enabled = enabled;
        fields::set(&mut model.is_finetune, finetune);
        if custom == Some(true) && !model.is_custom {
            model.is_custom = true;
        }
        if let Some(base) = fields::opt_str(&item, "base_model_slug")? {
            model.base_model_slug = Some(base);
        }
        for (field, slot) in [
            ("configurations", &mut model.configurations),
            ("pricing_config", &mut model.pricing_config),
        ] {
            if let Some(value) = item.get(field) {
                *slot = value.clone();
            }
        }
        model.last_updated_at = touched(&model.last_updated_at);
    }
    fields::set(&mut record.allow_all_models, allow_all);
    Ok(Json(json!({})))
}

/// `DELETE …/integrations/{id}/models?slugs=a,b` → `{}`: custom models only.
pub async fn delete_models(
    State(state): State<IntegrationsState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let slugs: Vec<String> = query
        .get("slugs")
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if slugs.is_empty() {
        return Err(EmulatorError::validation("slugs is required"));
    }
    let mut store = lock(&state.integrations);
    let record = store.get_mut(&state, &id)?;
    for slug in &slugs {
        match record.models.iter().find(|m| &m.slug == slug) {
            None => return Err(state.missing(&format!("model {slug}"))),
            Some(model) if !model.is_custom => {
                return Err(EmulatorError::validation(format!(
                    "model {slug} is a base model and cannot be deleted; disable it with enabled: false"
                )));
            }
            Some(_) => {}
        }
    }
    record.models.retain(|m| !slugs.contains(&m.slug));
    Ok(Json(json!({})))
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

    #[test]
    fn limits_follow_the_published_schemas() {
        assert!(usage_limits(&json!({"credit_limit": 10, "type": "cost"}), "u").is_ok());
        for bad in [
            json!({"credit_limit": 0, "type": "cost"}),
            json!({"credit_limit": 10}),
            json!({"credit_limit": 10, "type": "cost", "periodic_reset": "weekly", "periodic_reset_days": 3}),
        ] {
            assert!(usage_limits(&bad, "u").is_err(), "{bad}");
        }
        assert!(rate_limits(&json!({"type": "requests", "unit": "rpm", "value": 5}), "r").is_ok());
        assert!(rate_limits(&json!({"type": "requests", "unit": "rps", "value": 5}), "r").is_err());
        assert!(valid_slug("openai_prod-1") && !valid_slug("open ai") && !valid_slug(""));
    }
}
