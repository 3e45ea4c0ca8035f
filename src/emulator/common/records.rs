//! The store most kinds keep: records by id, found by UUID or slug, listed in creation order,
//! with the API's answers for a record that is missing, a seed that is already there and a slug
//! that another record has. One implementation, so that the kinds cannot drift apart.

use std::{collections::HashMap, sync::Mutex, time::Instant};

use axum::response::Response;
use serde_json::{Value, json};

use super::{
    errors::{ApiResult, EmulatorError},
    faults::Faults,
    fields::{self, Object},
    ids::{free_slug, make_slug, new_id},
    normalise,
    state::{Common, lock},
};

/// How messages name a kind and how it makes slugs:
/// `Kind::new("a", "provider", Slug::Named("provider"))`.
pub struct Kind {
    /// `a` or `an`, before [`Self::what`].
    pub article: &'static str,
    /// The kind as messages name it (`secret reference`, `MCP server`).
    pub what: &'static str,
    pub slug: Slug,
}

impl Kind {
    pub const fn new(article: &'static str, what: &'static str, slug: Slug) -> Self {
        Self {
            article,
            what,
            slug,
        }
    }
}

/// The slugs the API makes for a kind.
pub enum Slug {
    /// `<name, dashed>-<6 hex>` ([`free_slug`]), with this stem for a name with nothing to keep.
    Named(&'static str),
    /// `<prefix>-<six name characters>-<6 hex>` ([`make_slug`]), like `pc-pplx-c-ca7a87`.
    Prefixed(&'static str),
}

/// A record's identity, what [`Records`] reads of it: its place in creation order, its UUID
/// and its slug (which never changes once the record is in).
pub struct Key {
    /// Orders lists by creation ([`Common::next_seq`]).
    pub seq: u64,
    /// When the API created it (`None` when seeded); lists lag behind it under `list_lag_ms`.
    pub api_created: Option<Instant>,
    pub id: String,
    pub slug: String,
}

impl Key {
    /// A record a create makes now: a new UUID, listed once `list_lag_ms` has passed.
    pub fn created(common: &Common, slug: String) -> Self {
        Self {
            seq: common.next_seq(),
            api_created: Some(Instant::now()),
            id: new_id(),
            slug,
        }
    }

    /// A seeded record, listed at once.
    pub fn seeded(common: &Common, id: String, slug: String) -> Self {
        Self {
            seq: common.next_seq(),
            api_created: None,
            id,
            slug,
        }
    }
}

/// What [`Records`] needs of a kind's record.
pub trait Record {
    const KIND: Kind;

    fn key(&self) -> &Key;
}

/// Records of one kind by id, with an index of their slugs (a slug never changes once the
/// record is in).
pub struct Records<R> {
    by_id: HashMap<String, R>,
    id_by_slug: HashMap<String, String>,
}

impl<R> Default for Records<R> {
    fn default() -> Self {
        Self {
            by_id: HashMap::new(),
            id_by_slug: HashMap::new(),
        }
    }
}

impl<R: Record> Records<R> {
    /// Every record in creation order.
    pub fn sorted(&self) -> Vec<&R> {
        let mut records: Vec<_> = self.by_id.values().collect();
        records.sort_by_key(|r| r.key().seq);
        records
    }

    /// Every record a list shows now, in creation order (`list_lag_ms` hides new ones).
    pub fn listed(&self, faults: &Faults) -> Vec<&R> {
        self.sorted()
            .into_iter()
            .filter(|r| faults.listed(r.key().api_created))
            .collect()
    }

    /// By UUID or slug.
    pub fn find(&self, key: &str) -> Option<&R> {
        self.by_id.get(key).or_else(|| {
            let id = self.id_by_slug.get(key)?;
            self.by_id.get(id)
        })
    }

    pub fn find_mut(&mut self, key: &str) -> Option<&mut R> {
        let id = self.find(key)?.key().id.clone();
        self.by_id.get_mut(&id)
    }

    /// By UUID or slug, or the API's answer for a missing one (404 `AB08`, or 403 `AB03` under
    /// `missing_as_ab03`).
    pub fn get(&self, common: &Common, key: &str) -> ApiResult<&R> {
        self.find(key).ok_or_else(|| missing::<R>(common, key))
    }

    /// [`Self::get`], mutably.
    pub fn get_mut(&mut self, common: &Common, key: &str) -> ApiResult<&mut R> {
        self.find_mut(key).ok_or_else(|| missing::<R>(common, key))
    }

    /// Removes the record `key` (UUID or slug) names.
    pub fn remove(&mut self, key: &str) -> Option<R> {
        let id = self.find(key)?.key().id.clone();
        let removed = self.by_id.remove(&id)?;
        self.id_by_slug.remove(&removed.key().slug);
        Some(removed)
    }

    /// Removes the record `key` names (a hard delete), or the API's answer for a missing one.
    pub fn take(&mut self, common: &Common, key: &str) -> ApiResult<R> {
        self.remove(key).ok_or_else(|| missing::<R>(common, key))
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut R> {
        self.by_id.values_mut()
    }

    pub fn insert(&mut self, record: R) {
        let key = record.key();
        self.id_by_slug.insert(key.slug.clone(), key.id.clone());
        self.by_id.insert(key.id.clone(), record);
    }

    pub fn slug_taken(&self, slug: &str) -> bool {
        self.id_by_slug.contains_key(slug)
    }

    /// A slug for `name` that no record has, in the kind's [`Slug`] style.
    pub fn new_slug(&self, name: &str) -> String {
        match R::KIND.slug {
            Slug::Named(fallback) => free_slug(name, fallback, |slug| self.slug_taken(slug)),
            Slug::Prefixed(prefix) => loop {
                let slug = make_slug(prefix, name);
                if !self.slug_taken(&slug) {
                    return slug;
                }
            },
        }
    }

    /// A create's slug: the one it asks for, refused when another record has it, or a new one.
    pub fn claim_slug(&self, wanted: Option<String>, name: &str) -> ApiResult<String> {
        match wanted {
            Some(slug) if self.slug_taken(&slug) => Err(EmulatorError::validation(format!(
                "{} {} with slug {slug} already exists",
                R::KIND.article,
                R::KIND.what
            ))),
            Some(slug) => Ok(slug),
            None => Ok(self.new_slug(name)),
        }
    }

    /// Adds a created record and answers the receipt the API gives: `{id, slug, object}`.
    pub fn insert_receipt(&mut self, record: R, object: &str) -> Value {
        let key = record.key();
        let receipt = json!({"id": key.id, "slug": key.slug, "object": object});
        self.insert(record);
        receipt
    }

    /// The key and `name` of a record to seed: `id` and `slug` as `item` gives them, else a new
    /// id and a slug made from the name, and `name`; refused when a record has that id or slug.
    pub fn seed_key(&self, common: &Common, item: &Object, name: &str) -> ApiResult<(Key, String)> {
        let name = fields::str_or(item, "name", name);
        let slug = fields::nullable_str(item, "slug").unwrap_or_else(|| self.new_slug(&name));
        let id = fields::str_or(item, "id", new_id());
        self.check_new(&id, &slug)?;
        Ok((Key::seeded(common, id, slug), name))
    }

    /// Adds a seeded record and answers its id and slug.
    pub fn insert_seeded(&mut self, record: R) -> (String, String) {
        let key = record.key();
        let names = (key.id.clone(), key.slug.clone());
        self.insert(record);
        names
    }

    /// Refuses to seed a record whose id or slug is already known.
    pub fn check_new(&self, id: &str, slug: &str) -> ApiResult<()> {
        if self.find(id).is_some() || self.find(slug).is_some() {
            return Err(EmulatorError::validation(format!(
                "{} {slug} already exists",
                R::KIND.what
            )));
        }
        Ok(())
    }

    /// A list route's `{object: "list", total, data}`: of the records a list shows now
    /// ([`Self::listed`]) those `admits` lets through, the 0-based page `(page_size,
    /// current_page)` of them, each shown by `row`.
    pub fn list_page(
        &self,
        faults: &Faults,
        (page_size, current_page): (usize, usize),
        admits: impl Fn(&R) -> bool,
        row: impl FnMut(&R) -> Value,
    ) -> Value {
        let matching: Vec<&R> = self
            .listed(faults)
            .into_iter()
            .filter(|r| admits(r))
            .collect();
        list_body(matching, page_size, current_page, row)
    }

    /// [`Self::list_page`] as the answer of a list route, shaped by the `normalise` fault.
    pub fn reply_page(
        &self,
        faults: &Faults,
        page: (usize, usize),
        admits: impl Fn(&R) -> bool,
        row: impl FnMut(&R) -> Value,
    ) -> Response {
        normalise::reply(&self.list_page(faults, page, admits, row), faults.normalise)
    }

    /// The answer of a list route the API does not page, `{object: "list", total, data}`: the
    /// records a list shows now that `admits` lets through, each shown by `row`, cut down to
    /// `list_cap` rows while `total` stays the true count, shaped by the `normalise` fault.
    pub fn reply_unpaged(
        &self,
        faults: &Faults,
        admits: impl Fn(&R) -> bool,
        row: impl FnMut(&R) -> Value,
    ) -> Response {
        let mut data: Vec<Value> = self
            .listed(faults)
            .into_iter()
            .filter(|r| admits(r))
            .map(row)
            .collect();
        let total = data.len();
        faults.cap(&mut data);
        let body = json!({ "object": "list", "total": total, "data": data });
        normalise::reply(&body, faults.normalise)
    }

    /// Every record in creation order, each as `dump` shows it (for `GET /_emulator/state`).
    pub fn dump_with(&self, dump: impl FnMut(&R) -> Value) -> Vec<Value> {
        self.sorted().into_iter().map(dump).collect()
    }
}

/// The row of `rows` that `is_it` picks, or, when none does, the one `new` makes, appended (rows
/// keep the order they were first written in).
pub fn upsert<T>(rows: &mut Vec<T>, is_it: impl Fn(&T) -> bool, new: impl FnOnce() -> T) -> &mut T {
    let at = match rows.iter().position(is_it) {
        Some(at) => at,
        None => {
            rows.push(new());
            rows.len() - 1
        }
    };
    &mut rows[at]
}

/// One 0-based page of `rows`.
pub fn page<T>(rows: Vec<T>, page_size: usize, current_page: usize) -> Vec<T> {
    rows.into_iter()
        .skip(current_page.saturating_mul(page_size))
        .take(page_size)
        .collect()
}

/// `{object: "list", total, data}`: the 0-based page of `matching`, each row shown by `row`.
fn list_body<T>(
    matching: Vec<T>,
    page_size: usize,
    current_page: usize,
    row: impl FnMut(T) -> Value,
) -> Value {
    let total = matching.len();
    let data: Vec<Value> = page(matching, page_size, current_page)
        .into_iter()
        .map(row)
        .collect();
    json!({"object": "list", "total": total, "data": data})
}

/// The API's answer for a record of `R` that `key` names but that does not exist (or that the
/// request may not see).
pub fn missing<R: Record>(common: &Common, key: &str) -> EmulatorError {
    common.missing(&format!("{} {key}", R::KIND.what))
}

/// `GET …/{id}`: one record, shown by `read`, as the `normalise` fault shapes it.
pub fn reply_one<R: Record>(
    common: &Common,
    store: &Mutex<Records<R>>,
    key: &str,
    read: impl FnOnce(&R) -> Value,
) -> ApiResult<Response> {
    try_reply_one(common, store, key, |record| Ok(read(record)))
}

/// Like [`reply_one`], for a `read` that may refuse (a bad query, say) once the record is found.
pub fn try_reply_one<R: Record>(
    common: &Common,
    store: &Mutex<Records<R>>,
    key: &str,
    read: impl FnOnce(&R) -> ApiResult<Value>,
) -> ApiResult<Response> {
    let normalise = common.faults().normalise;
    let store = lock(store);
    let record = store.get(common, key)?;
    Ok(normalise::reply(&read(record)?, normalise))
}
