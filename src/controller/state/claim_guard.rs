//! The admission guard of the installation claim: a ValidatingAdmissionPolicy
//! (`aigw-installation-claims`, shipped with the CRDs) that refuses any change or removal of an
//! object's `aigw.io/installation` annotation by a requester who may not write that object's
//! status. With it in force the annotation is as safe from a tenant's `edit` role as
//! `status.installation`, whose subresource that role cannot write, so an installation takes a
//! new object in the metadata write it makes anyway (the finalizer and create intent before a
//! POST) instead of a status write of its own first: a create costs two apiserver writes, not
//! three ([`crate::controller::state::installation`]).
//!
//! The operator uses it only while it sees it in force (the watches of
//! [`crate::controller::state::admission::follow`], whose first look comes before any
//! controller starts): the policy exactly as
//! [`policy`] renders it, and its binding denying, over every object (no `matchResources`, no
//! parameters). Without it, or with `--claims status`, every new object is taken by its status
//! record first, as before. Removing the policy takes effect as soon as the watch shows it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tracing::{info, warn};

use super::installation::ANNOTATION;
use crate::resources::common::GROUP;

/// The name of the policy and of its binding.
pub const NAME: &str = "aigw-installation-claims";

/// How often a loss of the guard is looked at again ([`Guard::look_again`]).
pub const RECHECK: Duration = Duration::from_secs(30);

/// How an installation takes a new object (`--claims`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ClaimMode {
    /// In its first metadata write while the guard is in force; by a status record first
    /// otherwise.
    #[default]
    Auto,
    /// Always by a status record (`status.installation`) before any other write.
    Status,
}

/// Whether the guard is in force, as last seen; shared by every copy of the installation.
#[derive(Clone, Debug)]
pub struct Guard(Arc<GuardState>);

#[derive(Debug)]
struct GuardState {
    in_force: AtomicBool,
    /// Counts the times the guard went out of force, or a loss was told again ([`Guard::lost`]).
    lost: tokio::sync::watch::Sender<u64>,
    /// The count as of the last loss told again ([`Guard::look_again`]).
    retold: std::sync::atomic::AtomicU64,
}

impl Default for Guard {
    fn default() -> Self {
        Self(Arc::new(GuardState {
            in_force: AtomicBool::new(false),
            lost: tokio::sync::watch::channel(0).0,
            retold: Default::default(),
        }))
    }
}

impl Guard {
    /// True while the policy and its binding are in force: the claim annotation is the claim.
    pub fn in_force(&self) -> bool {
        self.0.in_force.load(Ordering::Relaxed)
    }

    /// Records whether it is in force (and says so when that changes).
    pub fn set(&self, in_force: bool) {
        if self.0.in_force.swap(in_force, Ordering::Relaxed) == in_force {
            return;
        }
        match in_force {
            true => info!(
                policy = NAME,
                "the claim annotation is guarded at admission: new objects are taken in their first metadata write"
            ),
            false => {
                warn!(
                    policy = NAME,
                    "the claim annotation is not guarded at admission (the policy or its binding is missing or changed): new objects are taken by a status record first"
                );
                self.0.lost.send_modify(|times| *times += 1);
            }
        }
    }

    /// Whether the guard went out of force since the last call (at most once a loss).
    fn lost_since_last_look(&self) -> bool {
        let told = *self.0.lost.borrow();
        self.0.retold.swap(told, Ordering::Relaxed) != told
    }

    /// Tells the loss again ([`Guard::look_again`]).
    fn tell_lost(&self) {
        self.0.lost.send_modify(|times| *times += 1);
        self.0.retold.fetch_add(1, Ordering::Relaxed);
    }

    /// A look at the guard every [`RECHECK`]: a loss seen since the previous look, with the
    /// guard out of force at both, is told again, for the reconciles that were taking an
    /// object by its annotation while it went. `guarded_before`: the state at the previous
    /// look, updated.
    pub fn look_again(&self, guarded_before: &mut bool) {
        let now = self.in_force();
        if !*guarded_before && !now && self.lost_since_last_look() {
            self.tell_lost();
        }
        *guarded_before = now;
    }

    /// A stream that yields each time the guard goes out of force: the objects claimed by their
    /// annotation alone (no `status.installation` yet) are reconciled then, which records them
    /// in status before a tenant could move them.
    pub fn lost(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        let mut changes = self.0.lost.subscribe();
        changes.mark_unchanged();
        futures::stream::unfold(changes, |mut changes| async move {
            changes.changed().await.ok()?;
            Some(((), changes))
        })
    }
}

/// The condition under which the policy applies: an update that changes or removes the
/// annotation an object already has.
fn changes_claim() -> String {
    let old = format!("oldObject.metadata.annotations['{ANNOTATION}']");
    format!(
        "has(oldObject.metadata.annotations) && '{ANNOTATION}' in oldObject.metadata.annotations \
         && !(has(object.metadata.annotations) && '{ANNOTATION}' in object.metadata.annotations \
         && object.metadata.annotations['{ANNOTATION}'] == {old})"
    )
}

/// What the policy asks of the requester: the right to write the object's status.
fn may_write_status() -> String {
    format!(
        "authorizer.group('{GROUP}').resource(request.resource.resource).subresource('status')\
         .namespace(has(request.namespace) ? request.namespace : '').name(request.name).check('patch').allowed()"
    )
}

/// The policy and its binding, as `aigw crds` prints them.
pub fn policy() -> [Value; 2] {
    let labels = json!({"app.kubernetes.io/part-of": "aigw"});
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": NAME, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [GROUP],
                "apiVersions": ["*"],
                "operations": ["UPDATE"],
                "resources": ["*"],
            }]},
            "matchConditions": [{"name": "changes-claim", "expression": changes_claim()}],
            "validations": [{
                "expression": may_write_status(),
                "messageExpression": format!(
                    "'metadata.annotations[{ANNOTATION}]: names the installation that manages this object (' \
                     + oldObject.metadata.annotations['{ANNOTATION}'] \
                     + '); only who may write the status of ' + request.resource.resource + ' may change or remove it'"
                ),
                "reason": "Forbidden",
            }],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": NAME, "labels": labels},
        "spec": {"policyName": NAME, "validationActions": ["Deny"]},
    });
    [policy, binding]
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };

    use super::*;

    #[tokio::test]
    async fn losing_the_guard_is_told_once_per_loss() {
        use futures::StreamExt;
        let guard = Guard::default();
        let mut lost = Box::pin(guard.lost());
        guard.set(true);
        guard.set(true);
        guard.set(false);
        guard.set(false);
        let told = tokio::time::timeout(Duration::from_secs(1), lost.next()).await;
        assert_eq!(told.ok().flatten(), Some(()));
        let again = tokio::time::timeout(Duration::from_millis(100), lost.next()).await;
        assert!(again.is_err(), "told twice for one loss");
        // A loss is told once more at the first look that follows one with the guard already
        // out of force, and only once.
        let mut guarded_before = true;
        guard.look_again(&mut guarded_before);
        assert!(!guarded_before);
        let early = tokio::time::timeout(Duration::from_millis(100), lost.next()).await;
        assert!(early.is_err(), "told again at the look that saw it go");
        guard.look_again(&mut guarded_before);
        let retold = tokio::time::timeout(Duration::from_secs(1), lost.next()).await;
        assert_eq!(retold.ok().flatten(), Some(()));
        guard.look_again(&mut guarded_before);
        let third = tokio::time::timeout(Duration::from_millis(100), lost.next()).await;
        assert!(third.is_err(), "told again twice for one loss");
    }

    #[test]
    fn the_guard_applies_to_updates_of_the_claim_and_asks_for_the_status_right() {
        let [policy, binding] = policy();
        assert_eq!(binding["spec"]["policyName"], NAME);
        let condition = policy["spec"]["matchConditions"][0]["expression"]
            .as_str()
            .unwrap();
        assert!(condition.contains("'aigw.io/installation' in oldObject.metadata.annotations"));
        let rule = policy["spec"]["validations"][0]["expression"]
            .as_str()
            .unwrap();
        assert!(rule.contains(".subresource('status')") && rule.contains("check('patch')"));
        assert_eq!(
            policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"],
            json!(["UPDATE"])
        );
    }

    /// Whether `found` and `bound` guard the claim ([`crate::controller::state::admission::enforces`]).
    fn guards(found: &ValidatingAdmissionPolicy, bound: &ValidatingAdmissionPolicyBinding) -> bool {
        crate::controller::state::admission::enforces(found, std::iter::once(bound), &policy()[0])
    }

    /// The guard as the apiserver serves it, changed by `edit`.
    fn served(
        edit: impl FnOnce(&mut Value, &mut Value),
    ) -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
        crate::controller::state::admission::tests::served(&policy()[0], edit)
    }

    #[test]
    fn only_the_policy_as_rendered_and_bound_to_deny_everywhere_guards_the_claim() {
        let (policy, binding) = served(|_, _| {});
        assert!(guards(&policy, &binding));
        type Edit = fn(&mut Value, &mut Value);
        let narrowed: [(&str, Edit); 6] = [
            ("a rule that always passes", |p, _| {
                p["spec"]["validations"][0]["expression"] = json!("true")
            }),
            ("a namespace selector", |p, _| {
                p["spec"]["matchConstraints"]["namespaceSelector"] =
                    json!({"matchLabels": {"x": "y"}})
            }),
            ("failurePolicy Ignore", |p, _| {
                p["spec"]["failurePolicy"] = json!("Ignore")
            }),
            ("a binding that only warns", |_, b| {
                b["spec"]["validationActions"] = json!(["Warn"])
            }),
            ("a binding limited to some objects", |_, b| {
                b["spec"]["matchResources"] =
                    json!({"namespaceSelector": {"matchLabels": {"x": "y"}}})
            }),
            ("only some kinds", |p, _| {
                p["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = json!(["configs"])
            }),
        ];
        for (what, edit) in narrowed {
            let (policy, binding) = served(edit);
            assert!(
                !guards(&policy, &binding),
                "{what} still counted as the guard"
            );
        }
    }
}
