//! What the organisation kinds that send values from Secrets no read shows (SecretReference,
//! McpIntegration, Integration) are written with ([`Written`]), and how a change of those
//! values is found: by the keyed hash of what was sent (`status.secretHash`), never by a read.

use kube::core::object::{HasSpec, HasStatus};

use crate::controller::driver::calls::{Bodies, Handle};
use crate::controller::driver::create::body_hash;
use crate::controller::driver::gate::tenant_id;
use crate::controller::driver::verbs::{Comparison, Verbs};
use crate::controller::driver::{Cx, Managed};
use crate::controller::kinds::keyed::SentHash;
use crate::resources::common::SendsSecretValues;

/// What a kind sends: `values` (Secret values filled in), the hash of what a read never shows,
/// and the tenant a create names; no `Debug`, so nothing prints the values. A kind's inputs are
/// `None` in Observe, which reads no Secret.
pub struct Written<T> {
    pub values: T,
    /// [`hash`]: what `status.secretHash` records; `None` when nothing is sent from a Secret.
    pub hash: Option<String>,
    /// The numeric tenant id the live API takes as `organisation_id`, when known.
    pub organisation: Option<String>,
}

impl<T> Written<T> {
    /// `values` for the object of `cx`, with their `hash` ([`hash`]) and the tenant of its
    /// Connection.
    pub fn new<K: Managed>(cx: &Cx<'_, K>, values: T, hash: Option<String>) -> Self {
        Self {
            values,
            hash,
            organisation: tenant_id(cx.ctx, cx.object.connection_name()),
        }
    }
}

/// What a read never shows of the object of `cx` (`unreadable`), hashed with the operator's key
/// and the object's uid ([`body_hash`]): what `status.secretHash` records.
pub fn hash<K: Managed>(cx: &Cx<'_, K>, unreadable: &impl serde::Serialize) -> Option<String> {
    body_hash(
        &cx.ctx.hash_key,
        cx.object.meta().uid.as_deref(),
        unreadable,
    )
}

/// The hash of what `desired` sends from Secrets, for `status.secretHash`.
pub fn sent_hash<T>(desired: &Option<Written<T>>) -> Option<String> {
    desired.as_ref().and_then(|w| w.hash.clone())
}

/// [`crate::controller::driver::verbs::Verbs::record`], `record_created` and `record_updated`
/// of a kind whose status keeps its keys ([`super::keyed`]) and the hash of what it sent
/// ([`sent_hash`]): a create or an update records the hash of the values it sent, and a remote
/// object gone takes the hash with it.
macro_rules! records_sent {
    () => {
        fn record(
            status: &mut Self::Status,
            remote: Option<&$crate::controller::driver::calls::Remote<Self>>,
        ) {
            $crate::controller::kinds::keyed::record(status, remote);
        }
        fn record_created(
            &self,
            status: &mut Self::Status,
            desired: &Self::Desired,
            created: $crate::controller::driver::verbs::Made<Self>,
        ) -> String {
            let hash = $crate::controller::kinds::secret_inputs::sent_hash(desired);
            $crate::controller::kinds::keyed::record_created(status, hash, created)
        }
        fn record_updated(
            &self,
            status: &mut Self::Status,
            desired: &Self::Desired,
            _: &$crate::controller::driver::calls::Remote<Self>,
            _: $crate::controller::driver::calls::Updated<Self>,
        ) {
            let hash = $crate::controller::kinds::secret_inputs::sent_hash(desired);
            $crate::controller::kinds::keyed::record_updated(status, hash);
        }
    };
}
pub(crate) use records_sent;

/// What a create sends besides the spec: the values (none in Observe, which never creates) and
/// the tenant.
pub fn create_parts<T: Clone + Default>(desired: &Option<Written<T>>) -> (T, Option<String>) {
    match desired {
        Some(w) => (w.values.clone(), w.organisation.clone()),
        None => Default::default(),
    }
}

/// The readable fields that differ (`differs`, `immutable`), and `field` besides when what is
/// sent from Secrets is not what `recorded` (`status.secretHash`) says was sent: an input, never
/// an outside edit.
pub fn compare<T>(
    desired: &Option<Written<T>>,
    recorded: Option<&String>,
    field: &'static str,
    (immutable, mut differs): (Vec<&'static str>, Vec<&'static str>),
) -> Comparison {
    let mut inputs = Vec::new();
    if desired
        .as_ref()
        .is_some_and(|w| w.hash.is_some() && w.hash.as_ref() != recorded)
    {
        differs.push(field);
        inputs.push(field);
    }
    Comparison {
        immutable,
        differs,
        inputs,
    }
}

/// [`Bodies`] of a kind whose spec sends the values of one Secret ([`SendsSecretValues`]): the
/// spec's bodies with the values [`Verbs::resolve`] read filled in, and the spec's comparison
/// with a read, a change of the values found by their hash ([`compare`]). Before a delete the
/// values are read once more through [`Verbs::resolve`], so that what a refusal may echo is
/// concealed (a Secret gone by now leaves nothing to conceal): such a kind's `resolve` reads
/// and conceals the Secret before anything else that may fail.
impl<K, H, V> Bodies<H> for K
where
    H: Handle,
    K: Verbs<Desired = Option<Written<V>>> + HasSpec + HasStatus<Status: SentHash>,
    K::Spec:
        SendsSecretValues<Values = V, Remote = H::Remote, Create = H::Create, Update = H::Update>,
    V: Clone + Default + Send + Sync,
{
    fn compare(&self, desired: &K::Desired, remote: &H::Remote, status: &K::Status) -> Comparison {
        let spec = self.spec();
        let readable = (spec.immutable_conflicts(remote), spec.diff(remote));
        let recorded = status.secret_hash();
        compare(desired, recorded, K::Spec::FROM_SECRET, readable)
    }
    fn create_request(&self, desired: &K::Desired) -> H::Create {
        let (values, organisation) = create_parts(desired);
        self.spec().create_request(values, organisation)
    }
    fn update_request(&self, desired: &K::Desired) -> H::Update {
        let values = desired.as_ref().map(|w| w.values.clone());
        self.spec().update_request(values)
    }
    async fn before_remote_delete(&self, cx: &Cx<'_, Self>) -> Option<String> {
        let mut status = self.status().cloned().unwrap_or_default();
        let _ = self.resolve(cx, &mut status).await;
        None
    }
}
