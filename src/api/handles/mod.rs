//! Resource handles: `client.configs().update(slug, &req)`. Each borrows the client.

mod api_keys;
mod collection;
mod configs;
mod deployments;
mod guardrails;
mod integrations;
mod mcp;
mod policies;
mod providers;
mod responses;
mod secret_references;
mod telemetry;
mod usage_limits;
mod vector_store_files;
mod workspaces;

pub use api_keys::ApiKeys;
pub use collection::{
    AnswerBody, Archives, DeletedByKey, Listed, ReadByKey, Receipt, Remote, Written,
};
pub use configs::Configs;
pub use deployments::Deployments;
pub use guardrails::{Guardrails, GuardrailsOn};
pub use integrations::Integrations;
pub use mcp::{GuardrailMcpServers, McpCapable, McpIntegrations, McpServers};
pub use policies::{PolicyKind, RateLimits, UsageLimits};
pub use providers::Providers;
pub use responses::Responses;
pub use secret_references::SecretReferences;
pub use telemetry::Telemetry;
pub use vector_store_files::VectorStoreFiles;
pub use workspaces::{IamScopes, Workspaces};

use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::client::{Call, Client};
use super::error::ApiError;
use super::models::{ListPage, Listing, Validate};
use super::routes::{Route, Verb};

/// A handle on one resource's calls, borrowing the client: `K` is the resource's read model,
/// which only names it (`Endpoint<'c, Deployment>` is [`Deployments`]). Each resource's module
/// adds the calls of its own `Endpoint`. A resource whose routes differ per plane (or, for API
/// keys, per kind) has its handle hold the plane or kind it calls, `P`.
pub struct Endpoint<'c, K, P = ()> {
    client: &'c Client,
    plane: P,
    resource: PhantomData<fn() -> K>,
}

impl<'c, K> Endpoint<'c, K> {
    pub(crate) fn new(client: &'c Client) -> Self {
        Self::on(client, ())
    }
}

impl<'c, K, P> Endpoint<'c, K, P> {
    /// A handle calling `plane`.
    pub(crate) fn on(client: &'c Client, plane: P) -> Self {
        Self {
            client,
            plane,
            resource: PhantomData,
        }
    }
}

// By hand: the derives would ask `K`, a name only, to be `Clone` and `Debug` too.
impl<K, P: Copy> Clone for Endpoint<'_, K, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, P: Copy> Copy for Endpoint<'_, K, P> {}

impl<K, P: std::fmt::Debug> std::fmt::Debug for Endpoint<'_, K, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(std::any::type_name::<Self>())
            .field("client", self.client)
            .field("plane", &self.plane)
            .finish()
    }
}

/// Safety stop for a server whose `total` never matches what it returns.
const MAX_PAGES: u32 = 10_000;

/// Every row of a paged collection (`current_page` from 0, `page_size`, `total`), saying
/// whether the pages prove the whole list: every page up to `total` arrived, every page
/// reported the same `total`, the last one did not say more rows follow (`has_more`), and no
/// row came twice (a row seen twice means rows shifted
/// between pages, so another may have been skipped). Anything else (an early empty page, a
/// changed total, shifted rows) leaves it incomplete: not proof of absence. Without a `total`
/// only an empty page ends the list: a short page may be the server's own page size (one the
/// query did not name, or smaller than it asked for), and taking it for the last would leave
/// the next page's rows out. A page of rows seen already (a server that ignores
/// `current_page`) ends the listing, incomplete; so does a row without a key (`id_of` empty),
/// which could be a row seen before.
///
/// Rows can also shift without a repeat or a changed count: a row already read leaves the list
/// while another joins it, and the row at a page boundary moves onto the page read before,
/// unseen. So a listing that took more than one request proves itself complete only when a
/// second reading, complete as well, reads the same set of keys. With a `total` each reading
/// counts, this holds for a server whose answers never go back in time (no answer older than one
/// before it), each counting the rows it returns from the same state, and whose keys are never
/// reused (a provider without an `id` is keyed by its slug, which a provider made again later
/// takes back): a reading complete by its count that left out a row listed throughout it has
/// read, in its place, a row that was gone when the reading ended; that row would be missing
/// from the second reading. Without a `total` nothing counts the rows, so such a listing never
/// proves itself complete (as an unpaged answer without one does not). A listing of one request
/// is one answer and needs no second reading. [`Reading::Once`] reads once, for a caller that
/// acts on every row it sees and proves nothing by a row's absence: its `complete` is that
/// reading's own count.
async fn paged<T: DeserializeOwned>(
    client: &Client,
    template: &'static str,
    params: &[&str],
    pairs: Vec<(&'static str, String)>,
    id_of: impl Fn(&T) -> &str,
    reading: Reading,
) -> Result<Listing<T>, ApiError> {
    require(template, params)?;
    let first = pass(client, template, params, &pairs, &id_of).await?;
    if reading == Reading::Once || !first.listing.complete || first.requests < 2 {
        return Ok(first.listing);
    }
    if !first.counted {
        return Ok(Listing {
            complete: false,
            ..first.listing
        });
    }
    let second = pass(client, template, params, &pairs, &id_of).await?;
    let keys = |listing: &Listing<T>| {
        let mut keys: Vec<String> = listing
            .items
            .iter()
            .map(|row| id_of(row).to_owned())
            .collect();
        keys.sort_unstable();
        keys
    };
    let same_rows = keys(&second.listing) == keys(&first.listing);
    let rows = match second.listing.complete {
        true => second.listing.items,
        // The first reading's rows, counted whole, over a second one's short of its count.
        false => first.listing.items,
    };
    Ok(Listing {
        items: rows,
        complete: second.listing.complete && same_rows,
    })
}

/// How a caller of a paged listing reads the collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// As proof: a listing is complete only when it proves that a row it lacks is absent.
    Proof,
    /// Once: for a caller that acts on each row it sees and proves nothing by a row's absence
    /// (a drift pass reads each object the list did not show; a usage reset resets each entity
    /// listed). A listing of more than one request then costs one reading, not two.
    Once,
}

/// One reading of a paged collection: what [`paged`] makes of it, how many requests it took,
/// and whether its pages carried a `total`.
struct Pass<T> {
    listing: Listing<T>,
    requests: u32,
    counted: bool,
}

/// Reads the pages of a collection once, as [`paged`] describes.
async fn pass<T: DeserializeOwned>(
    client: &Client,
    template: &'static str,
    params: &[&str],
    pairs: &[(&'static str, String)],
    id_of: &impl Fn(&T) -> &str,
) -> Result<Pass<T>, ApiError> {
    let mut all: Vec<T> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut first_total = None;
    let mut consistent = true;
    let mut complete = false;
    let mut requests = 0;
    for page_no in 0..MAX_PAGES {
        let mut query = pairs.to_vec();
        query.push(("current_page", page_no.to_string()));
        let call = Call::new(Route::mgmt(Verb::Get, template, params)).query(query);
        let page: ListPage<T> = client.json(call).await?;
        requests += 1;
        let got = page.data.len();
        if page_no == 0 {
            first_total = page.total;
        } else if page.total != first_total {
            consistent = false;
        }
        let known = seen.len();
        for row in page.data {
            let id = id_of(&row);
            // A row without a key cannot be told from one seen before: the pages prove nothing.
            if id.is_empty() {
                consistent = false;
            } else if !seen.insert(id.to_string()) {
                consistent = false;
                continue;
            }
            all.push(row);
        }
        let done = match page.total {
            Some(total) => all.len() as u64 >= total,
            None => got == 0,
        };
        if done {
            // More rows than the `total` counts: the count is not of this list. A last page
            // that says more rows follow (`has_more`) contradicts its count: not whole either.
            complete = consistent
                && !page.has_more
                && page.total.is_none_or(|total| all.len() as u64 == total);
            break;
        }
        // No row told apart from those seen: an early empty page, or a server that ignores
        // `current_page`.
        if seen.len() == known {
            break;
        }
    }
    Ok(Pass {
        listing: Listing {
            items: all,
            complete,
        },
        requests,
        counted: first_total.is_some(),
    })
}

/// Every row of a list the API answers in one go (no paging), filtered by `pairs`, saying
/// whether the answer held every row (`total`): such a list may be capped, and an incomplete one
/// proves nothing about absence.
async fn unpaged<T: DeserializeOwned, K: Into<String>>(
    client: &Client,
    template: &'static str,
    pairs: Vec<(K, String)>,
) -> Result<Listing<T>, ApiError> {
    let call = Call::new(Route::mgmt(Verb::Get, template, &[])).query(pairs);
    let page: ListPage<T> = client.json(call).await?;
    Ok(Listing::from_page(page))
}

/// A query of the one parameter `key`: empty when `value` is not set.
fn optional_query(key: &'static str, value: Option<&str>) -> Vec<(&'static str, String)> {
    value.map(|v| (key, v.to_owned())).into_iter().collect()
}

/// Refuses an empty path key, which would silently address the collection (or another route)
/// instead: `keys` fill the placeholders of `template` in order, and an empty one is named by
/// its placeholder (`{slug}` refuses it as `slug`).
fn require(template: &str, keys: &[&str]) -> Result<(), ApiError> {
    for (name, key) in super::routes::placeholders(template).zip(keys) {
        super::models::validate::not_blank([(name, *key)])?;
    }
    Ok(())
}

/// A call on the route `template` with its placeholders filled by `keys` (see [`require`]).
fn at(verb: Verb, template: &'static str, keys: &[&str]) -> Result<Call, ApiError> {
    require(template, keys)?;
    Ok(Call::new(Route::mgmt(verb, template, keys)))
}

/// A call on the object `key` of the item route `template`.
fn on(verb: Verb, template: &'static str, key: &str) -> Result<Call, ApiError> {
    at(verb, template, &[key])
}

/// Like [`on`], sending `req` once it validates (a bad key is named before a bad body).
fn send<B: Validate + Serialize>(
    verb: Verb,
    template: &'static str,
    key: &str,
    req: &B,
) -> Result<Call, ApiError> {
    let call = on(verb, template, key)?;
    req.validate()?;
    call.json(req)
}

/// A create: `req` posted to the collection `template` once it validates.
fn post<B: Validate + Serialize>(template: &'static str, req: &B) -> Result<Call, ApiError> {
    req.validate()?;
    Call::new(Route::mgmt(Verb::Post, template, &[])).json(req)
}
