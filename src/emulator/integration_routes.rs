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
//! an update naming another value is a 400.
//!
//! Workspace access PUTs merge per listed workspace; rows not listed are left alone unless
//! `override_existing_workspace_access: true`, which disables them. There is no DELETE for a
//! row. Model access PUTs merge per slug (a new slug must be `is_custom`); `DELETE …/models
//! ?slugs=a,b` removes custom models only (built-in ones can only be disabled).

use std::collections::{HashMap, HashSet};

use axum::{
    Json,
    body::Bytes,
    extract::{Path, Query, State},
    response::Response,
};
use serde_json::{Value, json};

use super::{
    errors::{ApiResult, EmulatorError},
    fields::{self, IdRule, Object},
    integrations::{AccessRow, IntegrationRecord, ModelRow, OBJECT},
    normalise, policy_fields, providers,
    state::{Shared, lock, now, touched},
};

fn missing(state: &Shared, key: &str) -> EmulatorError {
    state.missing(&format!("integration {key}"))
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

/// `secret_mappings`: `[{target_field, secret_reference_id, secret_key?, value_format?}]`.
fn secret_mappings(body: &Object) -> ApiResult<Option<Vec<Value>>> {
    let Some(items) = fields::opt_array(body, "secret_mappings")? else {
        return Ok(None);
    };
    for item in &items {
        let item = item
            .as_object()
            .ok_or_else(|| EmulatorError::validation("secret_mappings items must be objects"))?;
        for required in ["target_field", "secret_reference_id"] {
            fields::req_str(item, required).map_err(|_| {
                EmulatorError::validation(format!("secret_mappings[].{required} is required"))
            })?;
        }
    }
    Ok(Some(items))
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
pub async fn create(State(state): State<Shared>, body: Bytes) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let name = fields::req_str(&body, "name")?;
    let ai_provider_id = fields::req_str(&body, "ai_provider_id")?;
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;
    let workspace = IdRule::UuidOrSlug
        .opt_field(&body, "workspace_id")?
        .filter(|ws| !ws.is_empty());
    let slug = opt_slug(&body, "slug")?;
    let default_slug = opt_slug(&body, "default_provider_slug")?;
    let default_provider = fields::opt_bool(&body, "create_default_provider")?.unwrap_or(true);
    let key = key(&body)?;
    let configurations = fields::opt_object(&body, "configurations")?;
    let mappings = secret_mappings(&body)?;
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
    let slug = match slug {
        Some(slug) if store.slug_taken(&slug) => {
            return Err(EmulatorError::validation(format!(
                "an integration with slug {slug} already exists"
            )));
        }
        Some(slug) => slug,
        None => store.new_slug(&name),
    };
    let mut record = IntegrationRecord::created(&state, name, ai_provider_id, slug);
    record.description = description;
    record.key_writes = u64::from(key.is_some());
    record.key = key;
    record.configurations = configurations.unwrap_or_default();
    record.secret_mappings = mappings.unwrap_or_default();
    record.pricing_adjustments = pricing;
    let mut provider_id = Value::Null;
    if let Some(workspace) = workspace {
        record.workspace_id = Some(workspace.clone());
        if default_provider {
            provider_id = json!(providers::create_default(
                &state,
                &record,
                &workspace,
                default_slug
            ));
        }
    }
    let receipt = json!({
        "id": record.id, "slug": record.slug, "provider_id": provider_id, "object": OBJECT,
    });
    store.insert(record);
    Ok(Json(receipt))
}

/// `GET /ai_gw/admin/v2/integrations` → `{object: "list", total, data}` in creation order;
/// `type` (workspace|organisation|all) and `workspace_id` (integrations that workspace may use)
/// filter; pages like the policy lists; honours `list_lag_ms` and `normalise`.
pub async fn list(
    State(state): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    IdRule::UuidOrSlug.query(&query, "workspace_id")?;
    let kind = policy_fields::enum_filter(&query, "type", &["workspace", "organisation", "all"])?;
    let workspace = query.get("workspace_id").filter(|ws| !ws.is_empty());
    let (page_size, current_page) = policy_fields::policy_page(&query)?;
    let faults = state.faults();
    let store = lock(&state.integrations);
    let matching: Vec<&IntegrationRecord> = store
        .sorted()
        .into_iter()
        .filter(|r| faults.listed(r.api_created))
        .filter(|r| match kind.as_deref() {
            Some("workspace") => r.workspace_id.is_some(),
            Some("organisation") => r.workspace_id.is_none(),
            _ => true,
        })
        .filter(|r| workspace.is_none_or(|ws| r.enabled_for(ws)))
        .collect();
    let total = matching.len();
    let data: Vec<Value> = policy_fields::page(matching, page_size, current_page)
        .into_iter()
        .map(IntegrationRecord::list_row)
        .collect();
    let body = json!({ "object": "list", "total": total, "data": data });
    Ok(normalise::reply(&body, faults.normalise))
}

/// `GET /ai_gw/admin/v2/integrations/{id}` (UUID or slug) → the live detail, key masked.
pub async fn get(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Response> {
    let normalise = state.faults().normalise;
    let store = lock(&state.integrations);
    let record = store.find(&id).ok_or_else(|| missing(&state, &id))?;
    Ok(normalise::reply(&record.read(), normalise))
}

/// `PUT /ai_gw/admin/v2/integrations/{id}` → `{}`: `name`, `key`, `description`,
/// `configurations` (replaced whole), `secret_mappings`, `pricing_adjustments`.
pub async fn update(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;
    let name = fields::opt_str(&body, "name")?;
    if name.as_ref().is_some_and(|n| n.trim().is_empty()) {
        return Err(EmulatorError::validation("name must not be empty"));
    }
    let key = key(&body)?;
    let configurations = fields::opt_object(&body, "configurations")?;
    let mappings = secret_mappings(&body)?;
    let description = body
        .contains_key("description")
        .then(|| fields::opt_str(&body, "description"))
        .transpose()?;
    let pricing = body.get("pricing_adjustments").cloned();
    let changes = name.is_some()
        || key.is_some()
        || configurations.is_some()
        || mappings.is_some()
        || description.is_some()
        || pricing.is_some();
    if !changes {
        return Err(EmulatorError::validation(
            "request body must contain at least one field to update",
        ));
    }
    let mut store = lock(&state.integrations);
    let record = store.find_mut(&id).ok_or_else(|| missing(&state, &id))?;
    // Fixed at creation: an update naming another value is refused.
    let fixed = [
        ("ai_provider_id", json!(record.ai_provider_id)),
        ("slug", json!(record.slug)),
        ("workspace_id", json!(record.workspace_id)),
    ];
    for (field, value) in fixed {
        if body
            .get(field)
            .is_some_and(|sent| !sent.is_null() && *sent != value)
        {
            return Err(EmulatorError::validation(format!(
                "{field} cannot be changed; create a new integration"
            )));
        }
    }
    if let Some(name) = name {
        record.name = name;
    }
    if let Some(key) = key {
        record.key = Some(key);
        record.key_writes += 1;
    }
    if let Some(configurations) = configurations {
        record.configurations = configurations;
    }
    if let Some(mappings) = mappings {
        record.secret_mappings = mappings;
    }
    if let Some(description) = description {
        record.description = description;
    }
    if let Some(pricing) = pricing {
        record.pricing_adjustments = pricing;
    }
    let previous = record.last_updated_at.clone().unwrap_or_default();
    record.last_updated_at = Some(touched(&previous));
    Ok(Json(json!({})))
}

/// `DELETE /ai_gw/admin/v2/integrations/{id}?organisation_id=<TSG>` → `{}`; the integration is
/// gone and later calls answer 404.
pub async fn delete(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    IdRule::TsgOrUuid.query(&query, "organisation_id")?;
    lock(&state.integrations)
        .remove(&id)
        .ok_or_else(|| missing(&state, &id))?;
    Ok(Json(json!({})))
}

/// `GET …/integrations/{id}/workspaces` → `{total, workspaces, global_workspace_access, object}`.
pub async fn workspaces(
    State(state): State<Shared>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let normalise = state.faults().normalise;
    let store = lock(&state.integrations);
    let record = store.find(&id).ok_or_else(|| missing(&state, &id))?;
    Ok(normalise::reply(&record.workspaces_read(), normalise))
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
        let item = item
            .as_object()
            .ok_or_else(|| EmulatorError::validation("workspaces items must be objects"))?;
        let id = fields::req_str(item, "id")
            .map_err(|_| EmulatorError::validation("workspaces[].id is required"))?;
        IdRule::UuidOrSlug.check("workspace_id", &id)?;
        let enabled = fields::opt_bool(item, "enabled")?
            .ok_or_else(|| EmulatorError::validation("workspaces[].enabled is required"))?;
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
        let at = match rows.iter().position(|r| r.id == self.id) {
            Some(at) => at,
            None => {
                rows.push(AccessRow::new(self.id.clone()));
                rows.len() - 1
            }
        };
        let row = &mut rows[at];
        let newly_enabled = self.enabled && !row.enabled;
        row.enabled = self.enabled;
        if let Some(limits) = self.usage_limits {
            row.usage_limits = limits;
        }
        if let Some(limits) = self.rate_limits {
            row.rate_limits = limits;
        }
        if self.reset_usage {
            row.last_reset_at = Some(now());
        }
        row.last_updated_at = touched(&row.last_updated_at);
        row.writes += 1;
        newly_enabled
    }
}

/// `PUT …/integrations/{id}/workspaces` → `{}`: merges the listed rows (see the module
/// comment), sets `global_workspace_access` when given, and makes a default provider in each
/// workspace it newly enables unless told not to.
pub async fn update_workspaces(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
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
    let record = store.find_mut(&id).ok_or_else(|| missing(&state, &id))?;
    if overriding {
        let listed: HashSet<String> = rows.iter().map(|r| r.id.clone()).collect();
        for row in record
            .workspaces
            .iter_mut()
            .filter(|r| !listed.contains(&r.id))
        {
            if row.enabled {
                row.enabled = false;
                row.last_updated_at = touched(&row.last_updated_at);
                row.writes += 1;
            }
        }
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
        providers::create_default(&state, record, &workspace, slug);
    }
    Ok(Json(json!({})))
}

/// `GET …/integrations/{id}/models` → `{total, models, allow_all_models, object}`.
pub async fn models(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Response> {
    let normalise = state.faults().normalise;
    let store = lock(&state.integrations);
    let record = store.find(&id).ok_or_else(|| missing(&state, &id))?;
    Ok(normalise::reply(&record.models_read(), normalise))
}

/// `PUT …/integrations/{id}/models` → `{}`: merges per slug; a slug the integration lacks is
/// added only as a custom model (`is_custom: true`).
pub async fn update_models(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let models = fields::opt_array(&body, "models")?
        .ok_or_else(|| EmulatorError::validation("models is required"))?;
    let allow_all = fields::opt_bool(&body, "allow_all_models")?;
    let mut parsed = Vec::with_capacity(models.len());
    for item in &models {
        let item = item
            .as_object()
            .ok_or_else(|| EmulatorError::validation("models items must be objects"))?;
        let slug = fields::req_str(item, "slug")
            .map_err(|_| EmulatorError::validation("models[].slug is required"))?;
        let enabled = fields::opt_bool(item, "enabled")?
            .ok_or_else(|| EmulatorError::validation("models[].enabled is required"))?;
        // [pTF] reads these as bool, number or string: take every form.
        let flex = |field: &str| match item.get(field) {
            Some(Value::String(s)) => Ok(Some(s == "true" || s == "1")),
            _ => fields::opt_bool(item, field),
        };
        parsed.push((
            item.clone(),
            slug,
            enabled,
            flex("is_custom")?,
            flex("is_finetune")?,
        ));
    }
    let mut store = lock(&state.integrations);
    let record = store.find_mut(&id).ok_or_else(|| missing(&state, &id))?;
    if let Some((_, slug, ..)) = parsed.iter().find(|(_, slug, _, custom, _)| {
        *custom != Some(true) && !record.models.iter().any(|m| &m.slug == slug)
    }) {
        return Err(EmulatorError::validation(format!(
            "model {slug} is not offered by this integration; add it as a custom model (is_custom: true)"
        )));
    }
    for (item, slug, enabled, custom, finetune) in parsed {
        let at = match record.models.iter().position(|m| m.slug == slug) {
            Some(at) => at,
            None => {
                record.models.push(ModelRow::new(&slug, true));
                record.models.len() - 1
            }
        };
        let model = &mut record.models[at];
        model.enabled = enabled;
        if let Some(finetune) = finetune {
            model.is_finetune = finetune;
        }
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
    if let Some(allow_all) = allow_all {
        record.allow_all_models = allow_all;
    }
    Ok(Json(json!({})))
}

/// `DELETE …/integrations/{id}/models?slugs=a,b` → `{}`: custom models only.
pub async fn delete_models(
    State(state): State<Shared>,
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
    let record = store.find_mut(&id).ok_or_else(|| missing(&state, &id))?;
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
