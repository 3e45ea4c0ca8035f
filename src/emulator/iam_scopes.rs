//! SCM IAM scopes in memory (`/iam/v1/scopes`, FACTS-rest §1): the first and last calls of the
//! three-call workspace create. A scope is keyed by its `name` (its `id`, `<name>:<tsg_id>`, is
//! not a valid path key); `PUT /iam/v1/scopes/{name}` replaces the whole scope (`description`
//! and `resources`), and binding a workspace is a resource `{resource_type: "workspace",
//! resource_id: <workspace slug>}` in it. `GET /iam/v1/scopes` answers `{count, items}`, not
//! paged. `workspaces` reads the store: a workspace create naming a scope that does not exist
//! is `400 AB01`, and the data plane shows a workspace only once its scope binds its slug.

use std::collections::BTreeMap;

use axum::{
    Json, Router,
    extract::{FromRef, Path, State},
    routing::get,
};
use serde_json::{Value, json};

use super::common::{
    errors::{ApiResult, EmulatorError},
    fields::{self, JsonObject, Object},
    state::{Common, KindState, lock},
};

pub type ScopesState = KindState<ScopeStore>;

/// The scopes by name, and the tenant's numeric TSG (`tsg_id` of every scope).
pub struct ScopeStore {
    tsg_id: String,
    by_name: BTreeMap<String, ScopeRecord>,
}

impl Default for ScopeStore {
    fn default() -> Self {
        Self {
            tsg_id: format!("1{:09}", rand::random::<u32>() % 1_000_000_000),
            by_name: BTreeMap::new(),
        }
    }
}

pub struct ScopeRecord {
    pub name: String,
    pub description: String,
    pub resources: Vec<Value>,
    /// Requests that wrote it (create and each full replacement).
    pub writes: u64,
}

impl ScopeStore {
    pub fn exists(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// True when scope `name` binds the workspace `slug` (what grants data-plane access).
    pub fn binds(&self, name: &str, slug: &str) -> bool {
        self.by_name.get(name).is_some_and(|scope| {
            scope.resources.iter().any(|r| {
                r["resource_type"] == "workspace" && r["resource_id"].as_str() == Some(slug)
            })
        })
    }

    fn read(&self, scope: &ScopeRecord) -> Value {
        json!({
            "name": scope.name,
            "description": scope.description,
            "resources": scope.resources,
            "tsg_id": self.tsg_id,
            "id": format!("{}:{}", scope.name, self.tsg_id),
        })
    }

    /// Every scope with its write count, for `GET /_emulator/state`.
    pub fn dump(&self) -> Vec<Value> {
        self.by_name
            .values()
            .map(|scope| {
                let mut value = self.read(scope);
                value["writes"] = json!(scope.writes);
                value
            })
            .collect()
    }

    /// Preloads a scope given in its read shape; answers its name.
    pub fn seed(&mut self, item: &Object) -> ApiResult<String> {
        let name = fields::req_str(item, "name")?;
        if self.exists(&name) {
            return Err(EmulatorError::validation(format!(
                "scope {name} already exists"
            )));
        }
        let record = ScopeRecord {
            name: name.clone(),
            description: fields::str_or(item, "description", ""),
            resources: resources(item)?,
            writes: 0,
        };
        self.by_name.insert(name.clone(), record);
        Ok(name)
    }
}

/// `resources`: an array of `{resource_type, resource_id, metadata?}` (absent: none).
fn resources(body: &Object) -> ApiResult<Vec<Value>> {
    let items = fields::opt_array(body, "resources")?.unwrap_or_default();
    fields::items("resources", &items, |item| {
        for field in ["resource_type", "resource_id"] {
            fields::item_str("resources", item, field)?;
        }
        let mut item = item.clone();
        item.entry("metadata").or_insert_with(|| json!([]));
        Ok(Value::Object(item))
    })
}

/// `description` as the scope keeps it: `""` when unset.
fn description(body: &Object) -> ApiResult<String> {
    Ok(fields::opt_str(body, "description")?.unwrap_or_default())
}

fn missing(state: &Common, name: &str) -> EmulatorError {
    state.missing(&format!("scope {name}"))
}

/// The routes under `/iam/v1/scopes`.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ScopesState: FromRef<S>,
{
    Router::new()
        .route("/iam/v1/scopes", get(list).post(create))
        .route(
            "/iam/v1/scopes/{name}",
            get(read).put(replace).delete(delete),
        )
}

/// `POST /iam/v1/scopes` `{name, description, resources}` → the scope.
async fn create(
    State(state): State<ScopesState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::req_str(&body, "name")?;
    let record = ScopeRecord {
        name: name.clone(),
        description: description(&body)?,
        resources: resources(&body)?,
        writes: 1,
    };
    let mut store = lock(&state.store);
    if store.exists(&name) {
        return Err(EmulatorError::validation(format!(
            "scope {name} already exists"
        )));
    }
    let read = store.read(&record);
    store.by_name.insert(name, record);
    Ok(Json(read))
}

/// `GET /iam/v1/scopes` → `{count, items}`.
async fn list(State(state): State<ScopesState>) -> Json<Value> {
    let store = lock(&state.store);
    let items: Vec<Value> = store.by_name.values().map(|s| store.read(s)).collect();
    Json(json!({ "count": items.len(), "items": items }))
}

async fn read(
    State(state): State<ScopesState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let store = lock(&state.store);
    let scope = store
        .by_name
        .get(&name)
        .ok_or_else(|| missing(&state, &name))?;
    Ok(Json(store.read(scope)))
}

/// `PUT /iam/v1/scopes/{name}`: a full replacement; what the body leaves out is gone
/// (`description` becomes `""`, `resources` empty). The body's `name`, when sent, must be the
/// path's.
async fn replace(
    State(state): State<ScopesState>,
    Path(name): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    if fields::opt_str(&body, "name")?.is_some_and(|sent| sent != name) {
        return Err(EmulatorError::validation(
            "name cannot be changed; it is the scope's key",
        ));
    }
    let (new_description, new_resources) = (description(&body)?, resources(&body)?);
    let mut store = lock(&state.store);
    let scope = store
        .by_name
        .get_mut(&name)
        .ok_or_else(|| missing(&state, &name))?;
    scope.description = new_description;
    scope.resources = new_resources;
    scope.writes += 1;
    let store = &*store;
    Ok(Json(store.read(&store.by_name[&name])))
}

async fn delete(
    State(state): State<ScopesState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    lock(&state.store)
        .by_name
        .remove(&name)
        .ok_or_else(|| missing(&state, &name))?;
    Ok(Json(json!({})))
}
