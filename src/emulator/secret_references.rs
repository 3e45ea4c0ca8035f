//! Secret references in memory (organisation level, admin plane; FACTS-more §6, FACTS-rest §3):
//! pointers to a secret in AWS Secrets Manager, Azure Key Vault or HashiCorp Vault, which
//! integrations and MCP integrations name in `secret_mappings`.
//!
//! - `manager_type` is `aws_sm`, `azure_kv` or `hashicorp_vault` (no GCP) and fixed; `auth_config`
//!   must be a variant of it (`aws_auth_type` accessKey|assumedRole|serviceRole, `azure_auth_mode`
//!   entra|managed|default, `vault_auth_type` token|approle|kubernetes, each with its required
//!   fields). `auth_config` is write-only: reads show its public fields and each credential as
//!   `masked_<field>`; an update's `auth_config` is merged into the stored one.
//! - `allow_all_workspaces` defaults to true and cannot be true beside `allowed_workspaces`
//!   (UUIDs or slugs, at least one); an update naming `allowed_workspaces` replaces them and sets
//!   `allow_all_workspaces` false, `allow_all_workspaces: true` purges them. **Reads omit
//!   `allowed_workspaces`** (the state dump shows them).
//! - Create takes `organisation_id` as the numeric TSG or a UUID (reads show the internal UUID)
//!   and answers `{id, slug, object: "secret-reference"}`; reads by UUID or slug; `status` reads
//!   lower-case `active`; update answers `{}`; delete answers `{}` and is hard (a GET then 404s).
//! - **Delete is refused while an integration or MCP integration maps a field to the
//!   reference**: `400 AB01` naming them, as [PK] documents ("in use by integrations").

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Json, Router,
    extract::{FromRef, Path, Query, State},
    response::Response,
};
use serde_json::{Value, json};

use super::{
    common::{
        clock::{now, touched},
        errors::{ApiResult, EmulatorError},
        fields::{self, IdRule, JsonObject, Object},
        policy_fields,
        records::{Key, Kind, Record, Records, Slug, reply_one},
        routes::crud,
        state::{Common, lock},
    },
    integrations::{IntegrationStore, masked, valid_slug},
    mcp_integrations::McpIntegrationStore,
};

pub const OBJECT: &str = "secret-reference";

const MANAGER_TYPES: &[&str] = &["aws_sm", "azure_kv", "hashicorp_vault"];

/// `auth_config` fields that are credentials: reads show them masked as `masked_<field>`.
const CREDENTIALS: &[&str] = &[
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_external_id",
    "azure_entra_client_secret",
    "vault_token",
    "vault_role_id",
    "vault_secret_id",
];

/// Per manager type: the discriminator and, per variant, the required fields.
fn variants(
    manager_type: &str,
) -> (
    &'static str,
    &'static [(&'static str, &'static [&'static str])],
) {
    match manager_type {
        "aws_sm" => (
            "aws_auth_type",
            &[
                (
                    "accessKey",
                    &["aws_access_key_id", "aws_secret_access_key", "aws_region"],
                ),
                ("assumedRole", &["aws_role_arn", "aws_region"]),
                ("serviceRole", &[]),
            ],
        ),
        "azure_kv" => (
            "azure_auth_mode",
            &[
                (
                    "entra",
                    &[
                        "azure_entra_tenant_id",
                        "azure_entra_client_id",
                        "azure_entra_client_secret",
                        "azure_vault_url",
                    ],
                ),
                ("managed", &["azure_vault_url"]),
                ("default", &["azure_vault_url"]),
            ],
        ),
        _ => (
            "vault_auth_type",
            &[
                ("token", &["vault_addr", "vault_token"]),
                (
                    "approle",
                    &["vault_addr", "vault_role_id", "vault_secret_id"],
                ),
                ("kubernetes", &["vault_addr", "vault_role"]),
            ],
        ),
    }
}

/// Checks `auth_config` against `manager_type`'s variants.
fn check_auth_config(manager_type: &str, config: &Object) -> ApiResult<()> {
    let (discriminator, variants) = variants(manager_type);
    let names: Vec<&str> = variants.iter().map(|(n, _)| *n).collect();
    let variant = fields::opt_str(config, discriminator)?;
    let Some((_, required)) = variants
        .iter()
        .find(|(name, _)| variant.as_deref() == Some(*name))
    else {
        return Err(EmulatorError::validation(format!(
            "auth_config.{discriminator} must be one of {} for manager_type {manager_type}",
            names.join(", ")
        )));
    };
    for field in *required {
        fields::req_str(config, field)
            .map_err(|_| EmulatorError::validation(format!("auth_config.{field} is required")))?;
    }
    Ok(())
}

/// `auth_config` as reads show it.
fn masked_auth_config(config: &Object) -> Object {
    config
        .iter()
        .map(|(key, value)| match CREDENTIALS.contains(&key.as_str()) {
            true => (
                format!("masked_{key}"),
                json!(masked(value.as_str().unwrap_or(""))),
            ),
            false => (key.clone(), value.clone()),
        })
        .collect()
}

#[derive(Clone)]
pub struct SecretReferencesState {
    pub common: Arc<Common>,
    pub store: Arc<Mutex<SecretReferenceStore>>,
    pub integrations: Arc<Mutex<IntegrationStore>>,
    pub mcp_integrations: Arc<Mutex<McpIntegrationStore>>,
}

pub type SecretReferenceStore = Records<SecretReferenceRecord>;

pub struct SecretReferenceRecord {
    pub key: Key,
    name: String,
    description: Option<String>,
    manager_type: String,
    auth_config: Object,
    secret_path: String,
    secret_key: Option<String>,
    allow_all_workspaces: bool,
    allowed_workspaces: Vec<String>,
    tags: Option<Object>,
    organisation_id: String,
    created_by: String,
    created_at: String,
    last_updated_at: String,
    /// Requests that wrote `auth_config`.
    auth_config_writes: u64,
}

impl Record for SecretReferenceRecord {
    const KIND: Kind = Kind::new("a", "secret reference", Slug::Named("secret"));

    fn key(&self) -> &Key {
        &self.key
    }
}

impl SecretReferenceRecord {
    fn row(&self) -> Value {
        json!({
            "id": self.key.id, "name": self.name, "slug": self.key.slug,
            "manager_type": self.manager_type, "status": "active",
            "created_at": self.created_at, "last_updated_at": self.last_updated_at,
            "object": OBJECT,
        })
    }

    /// The live detail: `auth_config` masked, no `allowed_workspaces`.
    fn detail(&self) -> Value {
        json!({
            "id": self.key.id, "organisation_id": self.organisation_id, "name": self.name,
            "slug": self.key.slug, "description": self.description,
            "manager_type": self.manager_type,
            "auth_config": masked_auth_config(&self.auth_config),
            "secret_path": self.secret_path, "secret_key": self.secret_key,
            "allow_all_workspaces": self.allow_all_workspaces, "tags": self.tags,
            "status": "active", "created_by": self.created_by,
            "created_at": self.created_at, "last_updated_at": self.last_updated_at,
            "object": OBJECT,
        })
    }
}

impl SecretReferenceStore {
    /// Every reference with `auth_config` in clear, `allowed_workspaces` and the write count.
    pub fn dump(&self) -> Vec<Value> {
        self.dump_with(|r| {
            let mut value = r.detail();
            value["auth_config"] = Value::Object(r.auth_config.clone());
            value["allowed_workspaces"] = json!(r.allowed_workspaces);
            value["auth_config_writes"] = json!(r.auth_config_writes);
            value
        })
    }

    /// Preloads a reference given in its read shape with `auth_config` in clear (checked
    /// against `manager_type`, default `aws_sm`) and `allowed_workspaces`; answers its id and
    /// slug.
    pub fn seed(&mut self, common: &Common, item: &Object) -> ApiResult<(String, String)> {
        let (key, name) = self.seed_key(common, item, "seeded secret reference")?;
        let manager_type = fields::str_or(item, "manager_type", "aws_sm");
        fields::check_enum("manager_type", Some(&manager_type), MANAGER_TYPES)?;
        let auth_config = fields::opt_object(item, "auth_config")?.unwrap_or_else(|| {
            serde_json::Map::from_iter([("aws_auth_type".to_owned(), json!("serviceRole"))])
        });
        check_auth_config(&manager_type, &auth_config)?;
        let allowed = fields::opt_str_list(item, "allowed_workspaces")?.unwrap_or_default();
        let at = now();
        let record = SecretReferenceRecord {
            key,
            name,
            description: fields::nullable_str(item, "description"),
            manager_type,
            auth_config,
            secret_path: fields::str_or(item, "secret_path", "seeded/path"),
            secret_key: fields::nullable_str(item, "secret_key"),
            allow_all_workspaces: fields::flag_or(item, "allow_all_workspaces", allowed.is_empty()),
            allowed_workspaces: allowed,
            tags: fields::opt_string_map(item, "tags")?,
            organisation_id: common.organisation_id.clone(),
            created_by: common.user_id.clone(),
            created_at: at.clone(),
            last_updated_at: at,
            auth_config_writes: 0,
        };
        Ok(self.insert_seeded(record))
    }
}

/// The routes under `/ai_gw/admin/v2/secret-references`.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    SecretReferencesState: FromRef<S>,
{
    crud(
        "/ai_gw/admin/v2/secret-references",
        "secretReferenceId",
        (list, create),
        (read, update, delete),
    )
}

/// `allowed_workspaces`: at least one UUID or slug.
fn allowed_workspaces(body: &Object) -> ApiResult<Option<Vec<String>>> {
    let Some(list) = fields::opt_str_list(body, "allowed_workspaces")? else {
        return Ok(None);
    };
    if list.is_empty() {
        return Err(EmulatorError::validation(
            "allowed_workspaces must name at least one workspace",
        ));
    }
    for workspace in &list {
        IdRule::UuidOrSlug.check("allowed_workspaces", workspace)?;
    }
    Ok(Some(list))
}

/// `tags`: `null` or a map of strings.
fn tags(body: &Object) -> ApiResult<Option<Object>> {
    fields::opt_string_map(body, "tags")
}

/// `POST …/secret-references` → `{id, slug, object}`.
async fn create(
    State(state): State<SecretReferencesState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::req_str_max(&body, "name", 255)?;
    let manager_type = policy_fields::required_enum(&body, "manager_type", MANAGER_TYPES)?;
    let auth_config = fields::req_object(&body, "auth_config")?;
    check_auth_config(&manager_type, &auth_config)?;
    let secret_path = fields::req_str(&body, "secret_path")?;
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;
    let slug = fields::opt_str(&body, "slug")?;
    if slug.as_deref().is_some_and(|s| !valid_slug(s)) {
        return Err(EmulatorError::validation(
            "slug must match ^[a-zA-Z0-9_-]+$",
        ));
    }
    let allowed = allowed_workspaces(&body)?;
    let allow_all = fields::opt_bool(&body, "allow_all_workspaces")?;
    if allow_all == Some(true) && allowed.is_some() {
        return Err(EmulatorError::validation(
            "allow_all_workspaces cannot be true when allowed_workspaces is provided",
        ));
    }
    let record_tags = tags(&body)?;
    let description = fields::opt_str_max(&body, "description", 1024)?;
    let secret_key = fields::opt_str_max(&body, "secret_key", 255)?;
    let mut store = lock(&state.store);
    let slug = store.claim_slug(slug, &name)?;
    let at = now();
    let record = SecretReferenceRecord {
        key: Key::created(&state.common, slug),
        name,
        description,
        manager_type,
        auth_config,
        secret_path,
        secret_key,
        allow_all_workspaces: allow_all.unwrap_or(allowed.is_none()),
        allowed_workspaces: allowed.unwrap_or_default(),
        tags: record_tags,
        organisation_id: state.common.organisation_id.clone(),
        created_by: state.common.user_id.clone(),
        created_at: at.clone(),
        last_updated_at: at,
        auth_config_writes: 1,
    };
    Ok(Json(store.insert_receipt(record, OBJECT)))
}

/// `GET …/secret-references` → `{object: "list", total, data}`: `manager_type`, `search` (in the
/// name), `tags` (a JSON object every listed tag must match), `page_size` (1–100, default 20),
/// `current_page`.
async fn list(
    State(state): State<SecretReferencesState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let manager_type = policy_fields::enum_filter(&query, "manager_type", MANAGER_TYPES)?;
    let wanted_tags: Option<Object> = match query.get("tags") {
        None => None,
        Some(text) => Some(
            serde_json::from_str(text)
                .map_err(|_| EmulatorError::validation("tags must be a JSON object"))?,
        ),
    };
    let page_size = policy_fields::page_param(&query, "page_size", 20)?;
    if !(1..=100).contains(&page_size) {
        return Err(EmulatorError::validation("page_size must be 1 to 100"));
    }
    let current_page = policy_fields::page_param(&query, "current_page", 0)?;
    let faults = state.common.faults();
    let admits = |r: &SecretReferenceRecord| {
        manager_type.as_ref().is_none_or(|m| &r.manager_type == m)
            && policy_fields::searched(&query, &r.name)
            && wanted_tags.as_ref().is_none_or(|wanted| {
                wanted
                    .iter()
                    .all(|(k, v)| r.tags.as_ref().and_then(|t| t.get(k)) == Some(v))
            })
    };
    Ok(lock(&state.store).reply_page(
        &faults,
        (page_size, current_page),
        admits,
        SecretReferenceRecord::row,
    ))
}

async fn read(
    State(state): State<SecretReferencesState>,
    Path(key): Path<String>,
) -> ApiResult<Response> {
    reply_one(
        &state.common,
        &state.store,
        &key,
        SecretReferenceRecord::detail,
    )
}

/// `PUT …/secret-references/{id}` → `{}`.
async fn update(
    State(state): State<SecretReferencesState>,
    Path(key): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::opt_name(&body)?;
    let description = fields::clearable_str(&body, "description", 1024)?;
    let auth_config = fields::opt_object(&body, "auth_config")?;
    let secret_path = fields::opt_str_max(&body, "secret_path", 1024)?;
    let secret_key = fields::clearable_str(&body, "secret_key", 255)?;
    let allow_all = fields::opt_bool(&body, "allow_all_workspaces")?;
    let allowed = allowed_workspaces(&body)?;
    let new_tags = body.contains_key("tags").then(|| tags(&body)).transpose()?;
    let changes = name.is_some()
        || description.is_some()
        || auth_config.is_some()
        || secret_path.is_some()
        || secret_key.is_some()
        || allow_all.is_some()
        || allowed.is_some()
        || new_tags.is_some();
    if !changes {
        return Err(EmulatorError::validation("no valid fields to update"));
    }
    let mut store = lock(&state.store);
    let record = store.get_mut(&state.common, &key)?;
    fields::reject_changes(
        &body,
        &[
            ("manager_type", json!(record.manager_type)),
            ("slug", json!(record.key.slug)),
        ],
        "create another secret reference",
    )?;
    if let Some(sent) = auth_config {
        let mut merged = record.auth_config.clone();
        merged.extend(sent);
        check_auth_config(&record.manager_type, &merged)?;
        record.auth_config = merged;
        record.auth_config_writes += 1;
    }
    fields::set(&mut record.name, name);
    fields::set(&mut record.description, description);
    fields::set(&mut record.secret_path, secret_path);
    fields::set(&mut record.secret_key, secret_key);
    if let Some(allowed) = allowed {
        record.allowed_workspaces = allowed;
        record.allow_all_workspaces = false;
    }
    if allow_all == Some(true) {
        record.allow_all_workspaces = true;
        record.allowed_workspaces.clear();
    } else if allow_all == Some(false) {
        record.allow_all_workspaces = false;
    }
    fields::set(&mut record.tags, new_tags);
    record.last_updated_at = touched(&record.last_updated_at);
    Ok(Json(json!({})))
}

/// `DELETE …/secret-references/{id}` → `{}`, or `400 AB01` while something maps to it.
async fn delete(
    State(state): State<SecretReferencesState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let integrations = lock(&state.integrations);
    let mcp = lock(&state.mcp_integrations);
    let mut store = lock(&state.store);
    let record = store.get(&state.common, &key)?;
    let names = [record.key.id.as_str(), record.key.slug.as_str()];
    let mut users: Vec<String> = integrations
        .sorted()
        .into_iter()
        .filter(|i| {
            i.secret_mappings.iter().any(|m| {
                m["secret_reference_id"]
                    .as_str()
                    .is_some_and(|r| names.contains(&r))
            })
        })
        .map(|i| format!("integration {}", i.key.slug))
        .collect();
    users.extend(
        mcp.sorted()
            .into_iter()
            .filter(|i| i.maps_secret(&names))
            .map(|i| format!("MCP integration {}", i.key.slug)),
    );
    if !users.is_empty() {
        return Err(EmulatorError::validation(format!(
            "secret reference {} is in use by {}",
            record.key.slug,
            users.join(", ")
        )));
    }
    let id = record.key.id.clone();
    store.take(&state.common, &id)?;
    Ok(Json(json!({})))
}
