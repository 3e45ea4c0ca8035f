//! What rate-limits and usage-limits policies share on the wire: the fields of [`PolicyHead`]
//! (`conditions`, `group_by`, `type`, where the policy lives, its lifecycle), the list filters
//! with the `status` default `active`, archiving ([`delete`]), 0-based paging,
//! immutable fields on update, and how the `normalise` fault reorders a read. Kept in one place
//! so the two siblings cannot drift. The paged list envelope and the `search` and `type` filters
//! serve the other kinds' lists too.

use std::collections::HashMap;

use axum::{
    Json,
    extract::{Path, State},
    response::Response,
};
use serde_json::{Value, json};

use super::{
    clock::{now, touched},
    errors::{ApiResult, EmulatorError},
    fields::{self, IdRule, JsonObject, Object},
    ids::new_id,
    normalise,
    records::{Key, Kind, Record, Records, missing},
    state::{Common, KindState, lock},
};

/// A policy's `status`; DELETE archives, the `status` filter picks one of them.
pub const STATUSES: &[&str] = &["active", "archived"];

/// Rows per page when a list names no (or a zero) `page_size`.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// A required field that must be one of `allowed`.
pub fn required_enum(body: &Object, field: &str, allowed: &[&str]) -> ApiResult<String> {
    fields::opt_enum(body, field, allowed)?.ok_or_else(|| fields::required(field))
}

/// Keys a condition or `group_by` may name: `api_key`, `organisation_id`, `workspace_id`, or
/// `metadata.<key>` (Portkey's published description of `Condition.key`).
fn valid_key(key: &str) -> bool {
    matches!(key, "api_key" | "organisation_id" | "workspace_id")
        || key
            .strip_prefix("metadata.")
            .is_some_and(|rest| !rest.is_empty())
}

fn check_keys(field: &str, items: &[Value]) -> ApiResult<()> {
    match items
        .iter()
        .filter_map(|item| item.get("key").and_then(Value::as_str))
        .find(|key| !valid_key(key))
    {
        Some(key) => Err(EmulatorError::validation(format!(
            "{field}: unknown key {key:?}; use api_key, organisation_id, workspace_id or metadata.<key>"
        ))),
        None => Ok(()),
    }
}

/// `conditions`: at least one `{key, value: string | string[], excludes?: string | string[]}`.
pub fn conditions(body: &Object, field: &str) -> ApiResult<Vec<Value>> {
    let items = fields::opt_array(body, field)?.unwrap_or_default();
    if items.is_empty() {
        return Err(EmulatorError::validation(format!(
            "{field} must have at least one item"
        )));
    }
    let string_or_list = |value: Option<&Value>| match value {
        Some(Value::String(_)) => true,
        Some(Value::Array(items)) => items.iter().all(Value::is_string),
        _ => false,
    };
    for item in &items {
        let valid = item.get("key").is_some_and(Value::is_string)
            && string_or_list(item.get("value"))
            && item
                .get("excludes")
                .is_none_or(|ex| ex.is_null() || string_or_list(Some(ex)));
        if !valid {
            return Err(EmulatorError::validation(format!(
                "{field} items need a string key and a string (or string array) value"
            )));
        }
    }
    check_keys(field, &items)?;
    Ok(items)
}

/// `conditions` on an update: absent or `null` leaves them as they are.
pub fn opt_conditions(body: &Object) -> ApiResult<Option<Vec<Value>>> {
    match body.get("conditions") {
        None | Some(Value::Null) => Ok(None),
        Some(_) => conditions(body, "conditions").map(Some),
    }
}

/// `group_by`: at least one `{key}`.
pub fn group_by(body: &Object) -> ApiResult<Vec<Value>> {
    let items = fields::opt_array(body, "group_by")?.unwrap_or_default();
    if items.is_empty() {
        return Err(EmulatorError::validation(
            "group_by must have at least one item",
        ));
    }
    if !items
        .iter()
        .all(|item| item.get("key").is_some_and(Value::is_string))
    {
        return Err(EmulatorError::validation(
            "group_by items need a string key",
        ));
    }
    check_keys("group_by", &items)?;
    Ok(items)
}

/// Refuses an update that sends an immutable field with a value other than the current one
/// (sending the current value, or `null`, is accepted): the API wants the policy recreated.
pub fn reject_changes(body: &Object, immutable: &[(&str, Value)]) -> ApiResult<()> {
    fields::reject_changes(body, immutable, "delete and recreate the policy")
}

/// What every policy record holds besides its kind's own fields: its identity, what it applies
/// to, where it lives and its lifecycle.
pub struct PolicyHead {
    /// A policy has no slug: its id is its only name, and stands for the slug too.
    pub key: Key,
    pub name: Option<String>,
    pub conditions: Vec<Value>,
    pub group_by: Vec<Value>,
    /// The read's `type`, one of the kind's.
    pub kind: String,
    /// `active` or `archived`.
    pub status: String,
    pub workspace_id: String,
    pub organisation_id: String,
    pub created_at: String,
    pub last_updated_at: String,
}

impl PolicyHead {
    /// The head of a policy preloaded in its read shape; `types` are the kind's `type` values.
    fn seed(state: &Common, item: &Object, types: &[&str]) -> ApiResult<Self> {
        let created_at = fields::str_or(item, "created_at", now());
        Ok(Self {
            key: {
                let id = fields::str_or(item, "id", new_id());
                Key::seeded(state, id.clone(), id)
            },
            name: fields::nullable_str(item, "name"),
            conditions: conditions(item, "conditions")?,
            group_by: group_by(item)?,
            kind: required_enum(item, "type", types)?,
            status: fields::opt_enum(item, "status", STATUSES)?
                .unwrap_or_else(|| "active".to_owned()),
            workspace_id: fields::str_or(item, "workspace_id", &state.default_workspace_id),
            organisation_id: fields::str_or(item, "organisation_id", &state.organisation_id),
            last_updated_at: fields::str_or(item, "last_updated_at", &created_at),
            created_at,
        })
    }

    /// The head of the active policy a create body asks for: `organisation_id`, when sent, must
    /// be a UUID but the caller's organisation is kept; `workspace_id` (UUID or slug) defaults
    /// to the default workspace.
    fn create(state: &Common, body: &Object, types: &[&str]) -> ApiResult<Self> {
        IdRule::Uuid.opt_field(body, "organisation_id")?;
        let created_at = now();
        Ok(Self {
            key: {
                let mut key = Key::created(state, String::new());
                key.slug = key.id.clone();
                key
            },
            name: fields::opt_str_max(body, "name", 255)?,
            conditions: conditions(body, "conditions")?,
            group_by: group_by(body)?,
            kind: required_enum(body, "type", types)?,
            status: "active".to_owned(),
            workspace_id: IdRule::UuidOrSlug
                .opt_field(body, "workspace_id")?
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| state.default_workspace_id.clone()),
            organisation_id: state.organisation_id.clone(),
            created_at: created_at.clone(),
            last_updated_at: created_at,
        })
    }

    fn key(&self) -> &Key {
        &self.key
    }

    /// The read: the head's fields, the kind's `own` ones (an object) and the kind's `object`.
    fn read(&self, object: &str, own: Value) -> Value {
        let mut read = json!({
            "id": self.key.id,
            "name": self.name,
            "conditions": self.conditions,
            "group_by": self.group_by,
            "type": self.kind,
            "status": self.status,
            "workspace_id": self.workspace_id,
            "organisation_id": self.organisation_id,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "object": object,
        });
        if let (Some(read), Value::Object(own)) = (read.as_object_mut(), own) {
            read.extend(own);
        }
        read
    }

    /// What an update may not change (see [`reject_changes`]): `type`, `group_by`,
    /// `workspace_id` and the kind's `also`.
    fn reject_changes(&self, body: &Object, also: &[(&str, Value)]) -> ApiResult<()> {
        let mut immutable = vec![
            ("type", json!(self.kind)),
            ("group_by", json!(self.group_by)),
        ];
        immutable.extend(also.iter().cloned());
        immutable.push(("workspace_id", json!(self.workspace_id)));
        reject_changes(body, &immutable)
    }

    /// Stamps a change.
    fn touch(&mut self) {
        self.last_updated_at = touched(&self.last_updated_at);
    }
}

/// A policy kind's own fields, beside the [`PolicyHead`] of a [`Policy`].
pub trait PolicyKind: Sized {
    /// How messages name the kind (its policies' [`Record::KIND`]).
    const KIND: Kind;
    /// The `type` values of the kind.
    const TYPES: &'static [&'static str];
    /// The `object` of reads and create receipts.
    const OBJECT: &'static str;
    /// What an update body asks of the kind's own fields, validated before anything changes.
    type Changes;

    /// The kind's own fields of a policy preloaded in its read shape.
    fn seed(state: &Common, item: &Object) -> ApiResult<Self>;

    /// The kind's own fields of the policy a create body asks for.
    fn create(state: &Common, body: &Object) -> ApiResult<Self>;

    /// The kind's own fields of a read (an object).
    fn read(&self) -> Value;

    /// The [`Self::Changes`] an update body asks for.
    fn changes(body: &Object) -> ApiResult<Self::Changes>;

    /// Applies `changes`, or refuses them (changing nothing) when the policy cannot end up so.
    fn apply(&mut self, changes: Self::Changes) -> ApiResult<()>;

    /// The kind's fields an update may not change besides the head's (see
    /// [`PolicyHead::reject_changes`]).
    fn immutable(&self) -> Vec<(&'static str, Value)> {
        Vec::new()
    }

    /// How `GET /_emulator/state` shows a policy: its read.
    fn dump(policy: &Policy<Self>) -> Value {
        policy.read()
    }
}

/// A policy record: the [`PolicyHead`] every kind has and the kind's `own` fields. Reads filter
/// on its `status`, DELETE archives it.
pub struct Policy<K> {
    pub head: PolicyHead,
    pub own: K,
}

impl<K: PolicyKind> Record for Policy<K> {
    const KIND: Kind = K::KIND;

    fn key(&self) -> &Key {
        self.head.key()
    }
}

impl<K: PolicyKind> Policy<K> {
    pub fn read(&self) -> Value {
        self.head.read(K::OBJECT, self.own.read())
    }

    /// The read as a normalising server returns it: `conditions` and `group_by` reordered.
    pub fn read_as(&self, normalise: bool) -> Value {
        normalised(self.read(), normalise)
    }
}

impl<K: PolicyKind> Records<Policy<K>> {
    /// Every policy, archived ones included (for `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.dump_with(K::dump)
    }

    /// Preloads a policy given in its read shape; returns its id.
    pub fn seed(&mut self, state: &Common, item: &Object) -> ApiResult<String> {
        let policy = Policy {
            head: PolicyHead::seed(state, item, K::TYPES)?,
            own: K::seed(state, item)?,
        };
        let id = policy.head.key.id.clone();
        self.insert(policy);
        Ok(id)
    }
}

/// `POST` → `{id, object}`: adds the active policy the body asks for.
pub async fn create<K: PolicyKind>(
    State(state): State<KindState<Records<Policy<K>>>>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let policy = Policy {
        head: PolicyHead::create(&state, &body, K::TYPES)?,
        own: K::create(&state, &body)?,
    };
    let receipt = json!({ "id": policy.head.key.id, "object": K::OBJECT });
    lock(&state.store).insert(policy);
    Ok(Json(receipt))
}

/// The policy `id` names if its status is `status`, else the API's answer for a missing one.
pub fn in_status<'a, K: PolicyKind>(
    store: &'a Records<Policy<K>>,
    common: &Common,
    id: &str,
    status: &str,
) -> ApiResult<&'a Policy<K>> {
    store
        .find(id)
        .filter(|p| p.head.status == status)
        .ok_or_else(|| missing::<Policy<K>>(common, id))
}

/// The policy `id` names if it is active (only active policies take writes), else the API's
/// answer for a missing one.
pub fn active_mut<'a, K: PolicyKind>(
    store: &'a mut Records<Policy<K>>,
    common: &Common,
    id: &str,
) -> ApiResult<&'a mut Policy<K>> {
    store
        .find_mut(id)
        .filter(|p| p.head.status == "active")
        .ok_or_else(|| missing::<Policy<K>>(common, id))
}

/// `GET …/{id}` (`?status`, default `active`): the policy in that status, shown by `read`
/// (given the `normalise` fault).
pub fn reply_one<K: PolicyKind>(
    state: &KindState<Records<Policy<K>>>,
    id: &str,
    query: &HashMap<String, String>,
    read: impl FnOnce(&Policy<K>, bool) -> Value,
) -> ApiResult<Response> {
    let status = status_filter(query)?;
    let normalise = state.faults().normalise;
    let store = lock(&state.store);
    let policy = in_status(&store, state, id, &status)?;
    Ok(normalise::reply(&read(policy, normalise), normalise))
}

/// `PUT …/{id}` → `{}`: `name`, `conditions` and what the kind lets change, of an active policy;
/// `type`, `group_by`, `workspace_id` and the kind's immutable fields keep their values (a
/// differing one is a 400).
pub async fn update<K: PolicyKind>(
    State(state): State<KindState<Records<Policy<K>>>>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::opt_str_max(&body, "name", 255)?;
    IdRule::UuidOrSlug.opt_field(&body, "workspace_id")?;
    let conditions = opt_conditions(&body)?;
    let changes = K::changes(&body)?;
    let mut store = lock(&state.store);
    let policy = active_mut(&mut store, &state, &id)?;
    policy.head.reject_changes(&body, &policy.own.immutable())?;
    policy.own.apply(changes)?;
    if let Some(name) = name {
        policy.head.name = Some(name);
    }
    fields::set(&mut policy.head.conditions, conditions);
    policy.head.touch();
    Ok(Json(json!({})))
}

/// `DELETE …/{id}` → `{}`: archives the active policy `id` names (a second DELETE is a 404).
pub async fn delete<K: PolicyKind>(
    State(state): State<KindState<Records<Policy<K>>>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let mut store = lock(&state.store);
    let head = &mut active_mut(&mut store, &state, &id)?.head;
    head.status = "archived".to_owned();
    head.touch();
    Ok(Json(json!({})))
}

/// The list filters every policy kind takes: `workspace_id` (UUID or slug), `status` (default
/// `active`), `type` and the 0-based page.
pub struct PolicyFilter {
    workspace: Option<String>,
    status: String,
    kind: Option<String>,
    page_size: usize,
    current_page: usize,
}

impl PolicyFilter {
    /// `types` are the kind's `type` values.
    pub fn parse(query: &HashMap<String, String>, types: &[&str]) -> ApiResult<Self> {
        let workspace = IdRule::UuidOrSlug.filter(query, "workspace_id")?.cloned();
        let status = status_filter(query)?;
        let kind = enum_filter(query, "type", types)?;
        let (page_size, current_page) = policy_page(query)?;
        Ok(Self {
            workspace,
            status,
            kind,
            page_size,
            current_page,
        })
    }

    fn admits(&self, head: &PolicyHead) -> bool {
        head.status == self.status
            && self.kind.as_ref().is_none_or(|k| &head.kind == k)
            && self
                .workspace
                .as_ref()
                .is_none_or(|ws| &head.workspace_id == ws)
    }

    /// `{object: "list", data, total}`: the policies the filter and the kind's `admits` let
    /// through, as lists show them now, each shown by `read` (given the `normalise` fault).
    pub fn reply<K: PolicyKind>(
        &self,
        state: &KindState<Records<Policy<K>>>,
        admits: impl Fn(&Policy<K>) -> bool,
        read: impl Fn(&Policy<K>, bool) -> Value,
    ) -> Response {
        let faults = state.faults();
        lock(&state.store).reply_page(
            &faults,
            (self.page_size, self.current_page),
            |p| self.admits(&p.head) && admits(p),
            |policy| read(policy, faults.normalise),
        )
    }
}

/// Reads the `status` query filter (default `active`).
pub fn status_filter(query: &HashMap<String, String>) -> ApiResult<String> {
    match query.get("status") {
        None => Ok("active".to_owned()),
        Some(status) => fields::check_enum("status", Some(status), STATUSES),
    }
}

/// An optional enumerated query filter.
pub fn enum_filter(
    query: &HashMap<String, String>,
    name: &str,
    allowed: &[&str],
) -> ApiResult<Option<String>> {
    query
        .get(name)
        .map(|value| fields::check_enum(name, Some(value), allowed))
        .transpose()
}

/// The `type` list filter of integrations and MCP integrations: `workspace` or `organisation`
/// scoped ones, or `all` (also when absent).
pub struct ScopeFilter(Option<String>);

impl ScopeFilter {
    pub fn parse(query: &HashMap<String, String>) -> ApiResult<Self> {
        enum_filter(query, "type", &["workspace", "organisation", "all"]).map(Self)
    }

    /// Whether an object of that `workspace_id` (`None`: organisation scoped) is listed.
    pub fn admits<T>(&self, workspace_id: Option<&T>) -> bool {
        match self.0.as_deref() {
            Some("workspace") => workspace_id.is_some(),
            Some("organisation") => workspace_id.is_none(),
            _ => true,
        }
    }
}

/// A non-negative integer query parameter.
pub fn page_param(query: &HashMap<String, String>, name: &str, default: usize) -> ApiResult<usize> {
    match query.get(name) {
        None => Ok(default),
        Some(text) => text
            .parse::<usize>()
            .map_err(|_| EmulatorError::validation(format!("{name} must be an integer >= 0"))),
    }
}

/// A policy list's `(page_size, current_page)`: a `page_size` of 0 (or none) means the default.
pub fn policy_page(query: &HashMap<String, String>) -> ApiResult<(usize, usize)> {
    let page_size = match page_param(query, "page_size", DEFAULT_PAGE_SIZE)? {
        0 => DEFAULT_PAGE_SIZE,
        size => size,
    };
    Ok((page_size, page_param(query, "current_page", 0)?))
}

/// The `search` query filter: a case-insensitive part of `name` (absent: everything).
pub fn searched(query: &HashMap<String, String>, name: &str) -> bool {
    query
        .get("search")
        .is_none_or(|s| name.to_lowercase().contains(&s.to_lowercase()))
}

/// A read as a normalising server returns it: `conditions` and `group_by` in reverse order (the
/// rest of the reordering is [`super::normalise::reply`]'s).
pub fn normalised(mut read: Value, normalise: bool) -> Value {
    if normalise {
        for field in ["conditions", "group_by"] {
            if let Some(items) = read[field].as_array_mut() {
                items.reverse();
            }
        }
    }
    read
}
