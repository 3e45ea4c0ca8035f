//! What the kinds whose remote object is known by an id and a slug record of it in status
//! (Integration, McpIntegration, McpServer, Provider, SecretReference; Config and Guardrail with
//! the version it stands at ([`Versions`]); Workspace shares only its timestamp so far): its keys, when aigw
//! last wrote it, and for the kinds that write values from Secrets no read shows, the hash of
//! what was sent (`status.secretHash`).

use crate::api;
use crate::controller::driver::create::Created;
use crate::controller::driver::status::EmbedsManagedStatus;
use crate::controller::now_rfc3339;
use crate::resources::config::{AppliedHistory, AppliedVersion};
use crate::resources::{
    config::ConfigStatus, guardrail::GuardrailStatus, integration::IntegrationStatus,
    mcp_integration::McpIntegrationStatus, mcp_server::McpServerStatus, provider::ProviderStatus,
    secret_reference::SecretReferenceStatus, workspace::WorkspaceStatus,
};

/// A remote object, or a create's answer, known by its id and slug as the API gives them
/// (either may be empty).
pub trait Identified {
    fn id(&self) -> &str;
    fn slug(&self) -> &str;
}

/// [`Identified`] of API objects and answers with the fields `id` and `slug`.
macro_rules! identified {
    ($($remote:ty),+) => {$(
        impl Identified for $remote {
            fn id(&self) -> &str {
                &self.id
            }
            fn slug(&self) -> &str {
                &self.slug
            }
        }
    )+};
}

identified!(
    api::Created, // also `api::ProviderWritten`, its alias
    api::ConfigSummary,
    api::ConfigDetail,
    api::GuardrailSummary,
    api::GuardrailDetails,
    api::IntegrationCreated,
    api::SecretReference,
    api::McpIntegration,
    api::Integration,
    api::Provider,
    api::McpServer
);

/// The status fields this module keeps.
pub struct Record<'a> {
    id: &'a mut Option<String>,
    slug: &'a mut Option<String>,
    last_applied_at: &'a mut Option<String>,
    /// `None` for a kind that sends nothing from a Secret.
    secret_hash: Option<&'a mut Option<String>>,
}

impl<'a> Record<'a> {
    pub fn of(
        (id, slug): (&'a mut Option<String>, &'a mut Option<String>),
        last_applied_at: &'a mut Option<String>,
        secret_hash: Option<&'a mut Option<String>>,
    ) -> Self {
        Self {
            id,
            slug,
            last_applied_at,
            secret_hash,
        }
    }
}

/// A status that records a remote object by its id and slug ([`Identified`]).
pub trait Keyed {
    fn keyed(&mut self) -> Record<'_>;
}

/// A [`Keyed`] status that keeps the hash of what was last sent from Secrets
/// (`status.secretHash`): only those of kinds that send any implement it, so a kind that sends
/// Secret values cannot compare without the hash.
pub trait SentHash: Keyed {
    fn secret_hash(&self) -> Option<&String>;
}

/// A key recorded as given, an empty one as none.
fn key(key: &str) -> Option<String> {
    Some(key.to_string()).filter(|k| !k.is_empty())
}

/// The remote object as a read shows it; `None`: it is gone, and with it what was sent to it
/// (the next create sends the Secret values again).
pub fn record(status: &mut impl Keyed, remote: Option<&impl Identified>) {
    let record = status.keyed();
    *record.id = remote.and_then(|r| key(r.id()));
    *record.slug = remote.and_then(|r| key(r.slug()));
    if let (None, Some(hash)) = (remote, record.secret_hash) {
        *hash = None;
    }
}

/// A create's outcome; returns the slug its event names. Posted: written now, with `hash`.
/// Recovered: what the earlier POST sent may be an older spec or Secret, so no hash is
/// recorded and the next apply sends the values from Secrets once more.
pub fn record_created(
    status: &mut impl Keyed,
    hash: Option<String>,
    created: Created<impl Identified, impl Identified>,
) -> String {
    let record = status.keyed();
    let (id, slug, hash) = match &created {
        Created::Posted(posted) => {
            *record.last_applied_at = Some(now_rfc3339());
            (posted.id(), posted.slug(), hash)
        }
        Created::Recovered(found) => (found.id(), found.slug(), None),
    };
    if let Some(recorded) = record.secret_hash {
        *recorded = hash;
    }
    *record.id = key(id);
    *record.slug = key(slug);
    slug.to_string()
}

/// A create of a kind that keeps the versions it applied (Config, Guardrail) recovered by a
/// lookup: `found`'s keys, and a version this resource published whose spec is not known (no
/// generation): it counts as written before, so creating it again waits for the promotion
/// gate. Returns the slug its event names.
pub fn record_recovered_version(
    status: &mut (impl Keyed + AppliedHistory),
    found: &impl Identified,
) -> String {
    let record = status.keyed();
    *record.id = Some(found.id().to_string());
    *record.slug = key(found.slug());
    status.record_applied(AppliedVersion {
        applied_at: now_rfc3339(),
        ..Default::default()
    });
    found.slug().to_string()
}

/// A status that records, besides the keys, the version a remote object that keeps versions
/// stands at (Config, Guardrail): `versionId` and `remoteUpdatedAt`.
pub trait Versions: Keyed {
    fn versions(&mut self) -> [&mut Option<String>; 2];
}

impl Versions for ConfigStatus {
    fn versions(&mut self) -> [&mut Option<String>; 2] {
        [&mut self.version_id, &mut self.remote_updated_at]
    }
}

impl Versions for GuardrailStatus {
    fn versions(&mut self) -> [&mut Option<String>; 2] {
        [&mut self.version_id, &mut self.remote_updated_at]
    }
}

/// A read of a remote object that keeps versions: its keys, and its `versionId` and
/// `last_updated_at` (`stamps`); `None`: it is gone, and every key and stamp with it. With
/// `keep_keys`, a key the read leaves empty keeps the one recorded.
pub fn record_version(
    status: &mut impl Versions,
    read: Option<(&impl Identified, [&Option<String>; 2])>,
    keep_keys: bool,
) {
    let stamps = read.map(|(_, stamps)| stamps.map(Clone::clone));
    for (recorded, stamp) in status
        .versions()
        .into_iter()
        .zip(stamps.unwrap_or_default())
    {
        *recorded = stamp;
    }
    let record = status.keyed();
    let Some((remote, _)) = read else {
        *record.id = None;
        *record.slug = None;
        return;
    };
    let kept = |read: Option<String>, recorded: &mut Option<String>| {
        read.or_else(|| keep_keys.then(|| recorded.take()).flatten())
    };
    *record.id = kept(key(remote.id()), record.id);
    *record.slug = kept(key(remote.slug()), record.slug);
}

/// An update was written now, with `hash`.
pub fn record_updated(status: &mut impl Keyed, hash: Option<String>) {
    let record = status.keyed();
    *record.last_applied_at = Some(now_rfc3339());
    if let Some(recorded) = record.secret_hash {
        *recorded = hash;
    }
}

/// [`Keyed`] and [`EmbedsManagedStatus`] of statuses whose keys are `id` and `slug`, written at `last_applied_at`, and
/// after `;` the field that keeps the hash of what was sent from Secrets.
macro_rules! keyed {
    (@impl $status:ty $(, $hash:ident)?) => {
        impl Keyed for $status {
            fn keyed(&mut self) -> Record<'_> {
                let hash = None$(.or(Some(&mut self.$hash)))?;
                Record::of((&mut self.id, &mut self.slug), &mut self.last_applied_at, hash)
            }
        }

        $(impl SentHash for $status {
            fn secret_hash(&self) -> Option<&String> {
                self.$hash.as_ref()
            }
        })?

        /// Its own timestamp is `lastAppliedAt`.
        impl EmbedsManagedStatus for $status {
            fn without_own_timestamps(&self) -> Self {
                Self {
                    last_applied_at: None,
                    ..self.clone()
                }
            }
        }
    };
    ($($status:ty),+ ; $hash:ident) => {
        $(keyed!(@impl $status, $hash);)+
    };
    ($($status:ty),+) => {
        $(keyed!(@impl $status);)+
    };
}

keyed!(IntegrationStatus, McpIntegrationStatus, SecretReferenceStatus, ConfigStatus, GuardrailStatus; secret_hash);
keyed!(McpServerStatus, ProviderStatus, WorkspaceStatus);
