//! Test-only control endpoints under `/_emulator/`: stats, faults, seed and state, over
//! [`AppState`], the whole emulator's state (every kind's store). They need no token, are not
//! counted in stats and never see injected faults.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use axum::{
    Json,
    body::Bytes,
    extract::{FromRef, State},
};
use rand::{SeedableRng, rngs::StdRng};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::{
    api_keys::{ApiKeyStore, ApiKeysState},
    common::{
        errors::{ApiResult, EmulatorError},
        faults::{Faults, RateWindow},
        fields::{self, JsonObject, Object},
        options::EmulatorOptions,
        state::{Common, KindState, lock},
    },
    configs::{ConfigStore, ConfigsState},
    deployments::{DeploymentStore, DeploymentsState},
    gateway::{self, GatewayState, Responses, VectorStoreFiles},
    guardrail_mcp::GuardrailMcpState,
    guardrails::{GuardrailStore, GuardrailsState},
    iam_scopes::{ScopeStore, ScopesState},
    inference::InferenceState,
    integrations::{DefaultProvider, IntegrationStore, IntegrationsState},
    mcp_integrations::{McpIntegrationStore, McpIntegrationsState},
    mcp_servers::{McpServerStore, McpServersState},
    providers::{self, ProviderStore, ProvidersState},
    rate_limits::{RateLimitStore, RateLimitsState},
    secret_references::{SecretReferenceStore, SecretReferencesState},
    telemetry::{TelemetryLog, TelemetryState},
    usage_limits::{UsageLimitStore, UsageLimitsState},
    workspaces::{WorkspaceStore, WorkspacesState},
};

/// The state of every route: what all share, and each kind's store. The router hands each
/// handler its kind's part (`FromRef`).
#[derive(Clone)]
pub struct AppState {
    pub common: Arc<Common>,
    configs: Arc<Mutex<ConfigStore>>,
    deployments: Arc<Mutex<DeploymentStore>>,
    rate_limits: Arc<Mutex<RateLimitStore>>,
    usage_limits: Arc<Mutex<UsageLimitStore>>,
    guardrails: Arc<Mutex<GuardrailStore>>,
    api_keys: Arc<Mutex<ApiKeyStore>>,
    /// Taken before `providers` when both are needed (a default provider is made while the
    /// integration is locked).
    integrations: Arc<Mutex<IntegrationStore>>,
    providers: Arc<Mutex<ProviderStore>>,
    default_provider: DefaultProvider,
    responses: Arc<Mutex<Responses>>,
    vector_store_files: Arc<Mutex<VectorStoreFiles>>,
    /// Taken after `scopes` and `configs` when a route needs them together.
    workspaces: Arc<Mutex<WorkspaceStore>>,
    scopes: Arc<Mutex<ScopeStore>>,
    /// The data plane's request log.
    telemetry: Arc<Mutex<TelemetryLog>>,
    /// The data plane's random draws (seeded by the `gateway_seed` fault).
    gateway_rng: Arc<Mutex<StdRng>>,
    /// Taken after `integrations` and `mcp_integrations` (a delete checks who maps to it).
    secret_references: Arc<Mutex<SecretReferenceStore>>,
    /// Taken after `workspaces`, before `mcp_servers`.
    mcp_integrations: Arc<Mutex<McpIntegrationStore>>,
    /// Taken after `guardrails` (mappings) and `mcp_integrations`.
    mcp_servers: Arc<Mutex<McpServerStore>>,
}

impl AppState {
    pub fn new(options: EmulatorOptions, shutdown: watch::Receiver<bool>) -> Self {
        let common = Arc::new(Common::new(options, shutdown));
        let providers: Arc<Mutex<ProviderStore>> = Arc::default();
        let default_provider: DefaultProvider = {
            let (common, providers) = (Arc::clone(&common), Arc::clone(&providers));
            Arc::new(move |integration, workspace, slug| {
                providers::create_default(&common, &providers, integration, workspace, slug)
            })
        };
        let workspaces = Arc::new(Mutex::new(WorkspaceStore::new(&common)));
        Self {
            common,
            workspaces,
            scopes: Arc::default(),
            secret_references: Arc::default(),
            mcp_integrations: Arc::default(),
            mcp_servers: Arc::default(),
            configs: Arc::default(),
            deployments: Arc::default(),
            rate_limits: Arc::default(),
            usage_limits: Arc::default(),
            guardrails: Arc::default(),
            api_keys: Arc::default(),
            integrations: Arc::default(),
            providers,
            default_provider,
            responses: Arc::default(),
            vector_store_files: Arc::default(),
            telemetry: Arc::default(),
            gateway_rng: Arc::new(Mutex::new(StdRng::from_os_rng())),
        }
    }

    /// Empties every collection (control endpoint `DELETE /_emulator/state`).
    fn clear(&self) {
        *lock(&self.configs) = ConfigStore::default();
        *lock(&self.deployments) = DeploymentStore::default();
        *lock(&self.rate_limits) = RateLimitStore::default();
        *lock(&self.usage_limits) = UsageLimitStore::default();
        *lock(&self.guardrails) = GuardrailStore::default();
        *lock(&self.api_keys) = ApiKeyStore::default();
        *lock(&self.integrations) = IntegrationStore::default();
        *lock(&self.providers) = ProviderStore::default();
        lock(&self.responses).clear();
        lock(&self.vector_store_files).clear();
        *lock(&self.workspaces) = WorkspaceStore::new(&self.common);
        *lock(&self.scopes) = ScopeStore::default();
        *lock(&self.telemetry) = TelemetryLog::default();
        *lock(&self.secret_references) = SecretReferenceStore::default();
        *lock(&self.mcp_integrations) = McpIntegrationStore::default();
        *lock(&self.mcp_servers) = McpServerStore::default();
    }
}

impl AppState {
    /// The state of a kind's routes with one store.
    fn kind<S>(&self, store: &Arc<Mutex<S>>) -> KindState<S> {
        KindState {
            common: Arc::clone(&self.common),
            store: Arc::clone(store),
        }
    }
}

impl FromRef<AppState> for Arc<Common> {
    fn from_ref(app: &AppState) -> Self {
        Arc::clone(&app.common)
    }
}

impl FromRef<AppState> for ConfigsState {
    fn from_ref(app: &AppState) -> Self {
        app.kind(&app.configs)
    }
}

impl FromRef<AppState> for DeploymentsState {
    fn from_ref(app: &AppState) -> Self {
        app.kind(&app.deployments)
    }
}

impl FromRef<AppState> for RateLimitsState {
    fn from_ref(app: &AppState) -> Self {
        app.kind(&app.rate_limits)
    }
}

impl FromRef<AppState> for UsageLimitsState {
    fn from_ref(app: &AppState) -> Self {
        app.kind(&app.usage_limits)
    }
}

impl FromRef<AppState> for GuardrailsState {
    fn from_ref(app: &AppState) -> Self {
        app.kind(&app.guardrails)
    }
}

impl FromRef<AppState> for ApiKeysState {
    fn from_ref(app: &AppState) -> Self {
        app.kind(&app.api_keys)
    }
}

impl FromRef<AppState> for IntegrationsState {
    fn from_ref(app: &AppState) -> Self {
        Self {
            common: Arc::clone(&app.common),
            integrations: Arc::clone(&app.integrations),
            default_provider: Arc::clone(&app.default_provider),
        }
    }
}

impl FromRef<AppState> for ScopesState {
    fn from_ref(app: &AppState) -> Self {
        app.kind(&app.scopes)
    }
}

impl FromRef<AppState> for WorkspacesState {
    fn from_ref(app: &AppState) -> Self {
        Self {
            common: Arc::clone(&app.common),
            workspaces: Arc::clone(&app.workspaces),
            scopes: Arc::clone(&app.scopes),
            configs: Arc::clone(&app.configs),
        }
    }
}

impl FromRef<AppState> for SecretReferencesState {
    fn from_ref(app: &AppState) -> Self {
        Self {
            common: Arc::clone(&app.common),
            store: Arc::clone(&app.secret_references),
            integrations: Arc::clone(&app.integrations),
            mcp_integrations: Arc::clone(&app.mcp_integrations),
        }
    }
}

impl FromRef<AppState> for McpIntegrationsState {
    fn from_ref(app: &AppState) -> Self {
        app.kind(&app.mcp_integrations)
    }
}

impl FromRef<AppState> for McpServersState {
    fn from_ref(app: &AppState) -> Self {
        Self {
            common: Arc::clone(&app.common),
            store: Arc::clone(&app.mcp_servers),
            mcp_integrations: Arc::clone(&app.mcp_integrations),
            workspaces: Arc::clone(&app.workspaces),
        }
    }
}

impl FromRef<AppState> for GuardrailMcpState {
    fn from_ref(app: &AppState) -> Self {
        Self {
            common: Arc::clone(&app.common),
            guardrails: Arc::clone(&app.guardrails),
            servers: Arc::clone(&app.mcp_servers),
        }
    }
}

impl FromRef<AppState> for ProvidersState {
    fn from_ref(app: &AppState) -> Self {
        Self {
            common: Arc::clone(&app.common),
            providers: Arc::clone(&app.providers),
            integrations: Arc::clone(&app.integrations),
        }
    }
}

impl FromRef<AppState> for TelemetryState {
    fn from_ref(app: &AppState) -> Self {
        app.kind(&app.telemetry)
    }
}

impl FromRef<AppState> for InferenceState {
    fn from_ref(app: &AppState) -> Self {
        Self {
            common: Arc::clone(&app.common),
            api_keys: Arc::clone(&app.api_keys),
            configs: Arc::clone(&app.configs),
            telemetry: Arc::clone(&app.telemetry),
            rng: Arc::clone(&app.gateway_rng),
            responses: Arc::clone(&app.responses),
            workspaces: Arc::clone(&app.workspaces),
        }
    }
}

impl FromRef<AppState> for GatewayState {
    fn from_ref(app: &AppState) -> Self {
        Self {
            responses: Arc::clone(&app.responses),
            vector_store_files: Arc::clone(&app.vector_store_files),
        }
    }
}

/// `GET /_emulator/stats` → `{"requests": {"PUT /ai_gw/v2/configs/{slug}": {"200": 3}}}`.
pub async fn get_stats(State(state): State<AppState>) -> Json<Value> {
    let stats = lock(&state.common.stats);
    let requests: BTreeMap<&String, BTreeMap<String, u64>> = stats
        .iter()
        .map(|(key, by_status)| {
            let counts = by_status
                .iter()
                .map(|(status, n)| (status.to_string(), *n))
                .collect();
            (key, counts)
        })
        .collect();
    Json(json!({ "requests": requests }))
}

/// `GET /_emulator/writes` → `{"writes": [{"object", "method", "writer", "status",
/// "started_ms", "ended_ms"}, ...]}`: every write request in the order they arrived.
pub async fn get_writes(State(state): State<AppState>) -> Json<Value> {
    let writes: Vec<_> = lock(&state.common.writes).iter().cloned().collect();
    Json(json!({ "writes": writes }))
}

/// `DELETE /_emulator/stats` resets the counters.
pub async fn reset_stats(State(state): State<AppState>) -> Json<Value> {
    lock(&state.common.stats).clear();
    lock(&state.common.writes).clear();
    Json(json!({ "requests": {} }))
}

pub async fn get_faults(State(state): State<AppState>) -> Json<Faults> {
    Json(lock(&state.common.faults).clone())
}

/// `PUT /_emulator/faults` replaces the fault settings; `{}` clears them.
pub async fn put_faults(State(state): State<AppState>, body: Bytes) -> ApiResult<Json<Faults>> {
    let faults: Faults = serde_json::from_slice(&body)
        .map_err(|err| EmulatorError::validation(format!("invalid faults: {err}")))?;
    faults.validate()?;
    if let Some(seed) = faults.gateway_seed {
        *lock(&state.gateway_rng) = StdRng::seed_from_u64(seed);
    }
    *lock(&state.common.faults) = faults.clone();
    *lock(&state.common.rate_window) = RateWindow::default();
    Ok(Json(faults))
}

/// `GET /_emulator/state`: every collection, with deployment secrets in clear, config
/// documents as objects (reads through the API return them as strings), each usage-limits
/// policy's entities and reset count, each API key's values in clear with its rotation count,
/// each integration's key and configurations in clear with its key writes and access rows (each
/// with its write count), every provider (those the API made by itself marked `default`), and
/// the API keys DELETE removed (`deleted_api_keys`: id, name, rotations), every workspace
/// (archived ones too, with its status and write count), every IAM scope (with its writes), every
/// secret reference (`auth_config` in clear, `allowed_workspaces`, `auth_config_writes`), every
/// MCP integration (`configurations` in clear, access rows with writes, capabilities, metadata),
/// every MCP server (with its `workspace_id` and `default_user_access`), and the data plane's
/// request log (`gateway_log`: one row per request, oldest first, with its config and version).
pub async fn get_state(State(state): State<AppState>) -> Json<Value> {
    let mut responses: Vec<Value> = lock(&state.responses).values().cloned().collect();
    responses.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let mut files: Vec<Value> = lock(&state.vector_store_files).values().cloned().collect();
    files.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    Json(json!({
        "organisation_id": state.common.organisation_id,
        "default_workspace_id": state.common.default_workspace_id,
        "configs": lock(&state.configs).dump(),
        "deployments": lock(&state.deployments).dump(),
        "rate_limits": lock(&state.rate_limits).dump(),
        "usage_limits": lock(&state.usage_limits).dump(),
        "guardrails": lock(&state.guardrails).dump(),
        "api_keys": lock(&state.api_keys).dump(),
        "deleted_api_keys": lock(&state.api_keys).deleted(),
        "integrations": lock(&state.integrations).dump(),
        "providers": lock(&state.providers).dump(),
        "workspaces": lock(&state.workspaces).dump(),
        "scopes": lock(&state.scopes).dump(),
        "secret_references": lock(&state.secret_references).dump(),
        "mcp_integrations": lock(&state.mcp_integrations).dump(),
        "mcp_servers": lock(&state.mcp_servers).dump(),
        "responses": responses,
        "vector_store_files": files,
        "gateway_log": lock(&state.telemetry).dump(),
    }))
}

/// `DELETE /_emulator/state` empties every collection (stats and faults are left alone).
pub async fn clear_state(State(state): State<AppState>) -> Json<Value> {
    state.clear();
    Json(json!({}))
}

/// `POST /_emulator/seed` preloads objects given in their read shapes, filling defaults.
/// Answers with the identifiers of what it stored, per collection. The key
/// `generate_guardrails` takes `{"count", "prefix", "workspace_id"}` instead of an array and makes
/// that many guardrails at once (see `GuardrailStore::generate`).
pub async fn seed(
    State(state): State<AppState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let mut created = Map::new();
    for (collection, items) in &body {
        if collection == "generate_guardrails" {
            let spec = items.as_object().ok_or_else(|| {
                EmulatorError::validation("generate_guardrails must be an object")
            })?;
            let made = lock(&state.guardrails).generate(&state.common, spec)?;
            created.insert(collection.clone(), made);
            continue;
        }
        let items = items.as_array().ok_or_else(|| {
            EmulatorError::validation(format!("{collection} must be an array of objects"))
        })?;
        let mut keys = Vec::with_capacity(items.len());
        for item in items {
            let item = item.as_object().ok_or_else(|| {
                EmulatorError::validation(format!("{collection} must be an array of objects"))
            })?;
            keys.push(seed_one(&state, collection, item)?);
        }
        created.insert(collection.clone(), Value::Array(keys));
    }
    Ok(Json(Value::Object(created)))
}

/// What a seed answers for a record known by id and slug.
fn id_and_slug((id, slug): (String, String)) -> Value {
    json!({ "id": id, "slug": slug })
}

fn seed_one(state: &AppState, collection: &str, item: &Object) -> ApiResult<Value> {
    match collection {
        "configs" => lock(&state.configs)
            .seed(&state.common, item)
            .map(id_and_slug),
        "deployments" => lock(&state.deployments)
            .seed(&state.common, item)
            .map(id_and_slug),
        "rate_limits" => {
            let id = lock(&state.rate_limits).seed(&state.common, item)?;
            Ok(json!({ "id": id }))
        }
        "usage_limits" => {
            let id = lock(&state.usage_limits).seed(&state.common, item)?;
            Ok(json!({ "id": id }))
        }
        "guardrails" => lock(&state.guardrails)
            .seed(&state.common, item)
            .map(id_and_slug),
        "api_keys" => {
            let (id, key) = lock(&state.api_keys).seed(&state.common, item)?;
            Ok(json!({ "id": id, "key": key }))
        }
        "integrations" => lock(&state.integrations)
            .seed(&state.common, item)
            .map(id_and_slug),
        "providers" => lock(&state.providers)
            .seed(&state.common, item)
            .map(id_and_slug),
        "workspaces" => lock(&state.workspaces)
            .seed(&state.common, item)
            .map(id_and_slug),
        "scopes" => {
            let name = lock(&state.scopes).seed(item)?;
            Ok(json!({ "name": name }))
        }
        "secret_references" => lock(&state.secret_references)
            .seed(&state.common, item)
            .map(id_and_slug),
        "mcp_integrations" => lock(&state.mcp_integrations)
            .seed(&state.common, item)
            .map(id_and_slug),
        "mcp_servers" => lock(&state.mcp_servers)
            .seed(&state.common, item)
            .map(id_and_slug),
        "responses" => {
            let id = fields::req_str(item, "id")
                .map_err(|_| EmulatorError::validation("responses items need an id"))?;
            let value = gateway::seeded_response(item);
            lock(&state.responses).insert(id.clone(), Value::Object(value));
            Ok(json!({ "id": id }))
        }
        "vector_store_files" => {
            let missing = |_| {
                EmulatorError::validation("vector_store_files items need id and vector_store_id")
            };
            let id = fields::req_str(item, "id").map_err(missing)?;
            let store = fields::req_str(item, "vector_store_id").map_err(missing)?;
            let value = gateway::seeded_vector_store_file(item);
            lock(&state.vector_store_files)
                .insert((store.clone(), id.clone()), Value::Object(value));
            Ok(json!({ "id": id, "vector_store_id": store }))
        }
        other => Err(EmulatorError::validation(format!(
            "unknown collection {other}; expected configs, deployments, rate_limits, usage_limits, guardrails, generate_guardrails, api_keys, integrations, providers, workspaces, scopes, secret_references, mcp_integrations, mcp_servers, responses or vector_store_files"
        ))),
    }
}
