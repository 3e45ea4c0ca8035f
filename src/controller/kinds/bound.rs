//! The integration an object of a workspace binds (a Provider's Integration, an McpServer's
//! McpIntegration): named by a resource of kind `K` (`spec.integration`, `spec.integrationRef`)
//! or by a remote key (`spec.integrationId`), and what a read of the remote object may name it
//! by.

use crate::controller::Context;
use crate::controller::driver::Managed;
use crate::controller::driver::referenced::recorded_keys;
use crate::controller::error::{Error, Halt};

/// The integration an object binds: the UUID (or, unreadable, the key given) sent as its
/// integration id (`None` in Observe, which never writes), and what a read may name it by (its
/// UUID and slug).
pub struct Bound {
    pub id: Option<String>,
    pub keys: Vec<String>,
}

impl Bound {
    pub fn keys(&self) -> Vec<&str> {
        self.keys.iter().map(String::as_str).collect()
    }

    /// [`crate::controller::driver::verbs::Verbs::not_adoptable`]: a remote object of the slug
    /// binds another integration, or lives in another workspace (`conflicts` with these keys);
    /// `binder` says what binds ("this Provider binds").
    pub fn not_adoptable(
        &self,
        conflicts: impl FnOnce(&[&str]) -> Vec<&'static str>,
        binder: &str,
    ) -> Option<String> {
        let conflicts = match self.keys.is_empty() {
            // What this object binds is not known yet: nothing can be adopted.
            true => vec!["integration"],
            false => conflicts(&self.keys()),
        };
        (!conflicts.is_empty())
            .then(|| format!("a different {} than {binder}", conflicts.join(", ")))
    }

    /// [`crate::controller::driver::verbs::Verbs::record_compared`]: the UUID it was resolved
    /// to, into `status.integrationId`.
    pub fn record(&self, integration_id: &mut Option<String>) {
        if let Some(id) = &self.id {
            *integration_id = Some(id.clone());
        }
    }
}

/// What a read may name the integration by, without an API call: the UUID and slug the
/// resource of kind `K` named `by_name` recorded (that resource gone, the UUID it was resolved
/// to: `resolved`, `status.integrationId`), or the key given (`given`) and the UUID it was
/// resolved to. Never a resource name.
pub fn recorded_keys_of<K: Managed>(
    ctx: &Context,
    by_name: Option<&str>,
    given: Option<&String>,
    resolved: Option<&String>,
) -> Vec<String> {
    let mut keys = Vec::new();
    if let Some(id) = given {
        keys.push(id.clone());
        keys.extend(resolved.cloned());
    } else if let Some(recorded) = by_name.and_then(|name| recorded_keys::<K>(ctx, name)) {
        keys.extend(recorded);
    } else if by_name.is_some() {
        // The resource gone (orphaned first): the UUID it was resolved to still names it.
        keys.extend(resolved.cloned());
    }
    keys.retain(|k| !k.is_empty());
    keys.dedup();
    keys
}

/// [`crate::controller::driver::verbs::Verbs::release`] by whether the grants still let this
/// namespace bind the integration: refused, the remote object is released without a call (as
/// for a revoked workspace): a delete reaches the integration as much as an update.
pub fn released(granted: Result<(), Error>) -> Result<Option<String>, Halt> {
    match granted {
        Ok(()) => Ok(None),
        Err(refused @ Error::NotAllowed { .. }) => Ok(Some(refused.to_string())),
        Err(other) => Err(other.into()),
    }
}
