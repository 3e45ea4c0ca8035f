//! Whether the admission policies aigw ships in `crds/free-form-limits.yaml` are in force as
//! `aigw crds` renders them.
//!
//! Each kind with free-form fields or credential keys has a policy
//! ([`crate::resources::free_form::admission_policy`]) that bounds its documents and refuses a
//! credential written in plain text. Without it the apiserver stores what it would refuse: the
//! operator still refuses to send such a spec (its own check, as `aigw validate` does), but a
//! credential written in plain text stays in the object, for whoever may read it, and a
//! document past the bounds is refused only when reconciled. So the operator watches the
//! policies and their bindings ([`follow`]), exports `aigw_admission_policy_in_force{policy}`
//! (1 or 0; the chart's alert `AigwAdmissionPolicyNotInForce`) and warns when one goes missing
//! or is changed. The guard of the installation claim is followed on its own
//! ([`super::claim_guard`]), whose check is [`enforces`] too.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::Value;
use tracing::{info, warn};

use crate::controller::runtime::metrics::Metrics;

/// Whether `found` and `bound` enforce `wanted` (a policy as `aigw crds` renders it): the
/// policy's rules, conditions and variables as rendered (with what the apiserver defaults:
/// `scope: "*"`, empty selectors), nothing narrowing it, failing closed, and a binding of it
/// that denies over every object.
pub fn enforces(
    found: &ValidatingAdmissionPolicy,
    bound: &ValidatingAdmissionPolicyBinding,
    wanted: &Value,
) -> bool {
    let name = wanted["metadata"]["name"].as_str().unwrap_or_default();
    let wanted = &wanted["spec"];
    let spec = serde_json::to_value(&found.spec).unwrap_or_default();
    let same = |field: &str| spec[field] == wanted[field];
    let empty = |v: &Value| v.is_null() || v.as_object().is_some_and(|m| m.is_empty());
    let constraints = &spec["matchConstraints"];
    let mut rules = constraints["resourceRules"].clone();
    for rule in rules.as_array_mut().into_iter().flatten() {
        if rule["scope"] == "*" {
            rule.as_object_mut().map(|r| r.remove("scope"));
        }
    }
    let policy_ok = found.name_any() == name
        && same("matchConditions")
        && same("validations")
        && same("variables")
        && rules == wanted["matchConstraints"]["resourceRules"]
        && empty(&constraints["namespaceSelector"])
        && empty(&constraints["objectSelector"])
        && constraints["excludeResourceRules"]
            .as_array()
            .is_none_or(Vec::is_empty)
        && spec["failurePolicy"] == "Fail";
    let binding_ok = bound.spec.as_ref().is_some_and(|b| {
        b.policy_name.as_deref() == Some(name)
            && b.param_ref.is_none()
            && b.match_resources.is_none()
            && b.validation_actions
                .as_ref()
                .is_some_and(|a| a.iter().any(|a| a == "Deny"))
    });
    policy_ok && binding_ok
}

/// The policies [`follow`] looks for, by name: every kind's free-form policy as `aigw crds`
/// renders it.
fn wanted() -> BTreeMap<String, Value> {
    crate::resources::crds()
        .iter()
        .filter_map(|(_, crd)| crate::resources::free_form::admission_policy(crd))
        .map(|[policy, _]| {
            let name = policy["metadata"]["name"].as_str().unwrap_or_default();
            (name.to_string(), policy)
        })
        .collect()
}

/// What one watch has shown, by name.
struct Listing<K> {
    objects: BTreeMap<String, K>,
    /// A listing under way (`Init` to `InitDone`): it replaces `objects` once complete.
    relisting: BTreeMap<String, K>,
    /// Whether a listing has completed.
    listed: bool,
}

impl<K> Default for Listing<K> {
    fn default() -> Self {
        Self {
            objects: BTreeMap::new(),
            relisting: BTreeMap::new(),
            listed: false,
        }
    }
}

impl<K: kube::Resource> Listing<K> {
    /// Applies one event of the watch; true when what it shows may have changed (not inside a
    /// listing).
    fn apply(&mut self, event: watcher::Event<K>) -> bool {
        match event {
            watcher::Event::Apply(object) => {
                self.objects.insert(object.name_any(), object);
            }
            watcher::Event::Delete(object) => {
                self.objects.remove(&object.name_any());
            }
            watcher::Event::Init => {
                self.relisting.clear();
                return false;
            }
            watcher::Event::InitApply(object) => {
                self.relisting.insert(object.name_any(), object);
                return false;
            }
            watcher::Event::InitDone => {
                self.objects = std::mem::take(&mut self.relisting);
                self.listed = true;
            }
        }
        true
    }
}

/// What the watches of the policies and of their bindings have shown.
#[derive(Default)]
struct Seen {
    policies: Listing<ValidatingAdmissionPolicy>,
    bindings: Listing<ValidatingAdmissionPolicyBinding>,
}

/// One event of either watch.
enum Change {
    Policy(watcher::Event<ValidatingAdmissionPolicy>),
    Binding(watcher::Event<ValidatingAdmissionPolicyBinding>),
}

impl Seen {
    /// Applies `change`; true when the answer may have changed, both watches having listed.
    fn apply(&mut self, change: Change) -> bool {
        let changed = match change {
            Change::Policy(event) => self.policies.apply(event),
            Change::Binding(event) => self.bindings.apply(event),
        };
        changed && self.policies.listed && self.bindings.listed
    }
}

/// Whether each of `wanted` is in force, as `seen` shows.
fn in_force(wanted: &BTreeMap<String, Value>, seen: &Seen) -> BTreeMap<String, bool> {
    let verdict = |(name, policy): (&String, &Value)| {
        let found = (seen.policies.objects.get(name)).zip(seen.bindings.objects.get(name));
        let ok = found.is_some_and(|(found, bound)| enforces(found, bound, policy));
        (name.clone(), ok)
    };
    wanted.iter().map(verdict).collect()
}

/// Watches the admission policies and their bindings for as long as the process runs, keeps
/// `aigw_admission_policy_in_force` up to date, and says when a policy goes out of force or
/// comes back (every policy missing or changed at the first listing is named once). A watch
/// that fails (the apiserver, or RBAC refusing `list`) is retried with backoff, and the gauges
/// keep their last value, absent until the first listing; an apiserver that does not serve
/// the policies at all (404) has none in force.
pub async fn follow(kube: kube::Client, metrics: Arc<Metrics>) {
    let wanted = wanted();
    let config = watcher::Config::default().any_semantic();
    let policies = watcher(
        Api::<ValidatingAdmissionPolicy>::all(kube.clone()),
        config.clone(),
    )
    .default_backoff()
    .map(|event| event.map(Change::Policy));
    let bindings = watcher(Api::<ValidatingAdmissionPolicyBinding>::all(kube), config)
        .default_backoff()
        .map(|event| event.map(Change::Binding));
    let mut changes = std::pin::pin!(futures::stream::select(policies, bindings));
    let mut seen = Seen::default();
    let mut told = BTreeMap::<String, bool>::new();
    while let Some(change) = changes.next().await {
        let verdict = match change {
            Ok(change) => match seen.apply(change) {
                true => in_force(&wanted, &seen),
                false => continue,
            },
            // The apiserver does not serve the policies (Kubernetes before 1.30, or the API
            // turned off): none can be in force.
            Err(watcher::Error::InitialListFailed(kube::Error::Api(status)))
                if status.code == 404 =>
            {
                let none = wanted.keys().map(|name| (name.clone(), false));
                none.collect()
            }
            Err(error) => {
                warn!(%error, "cannot watch the admission policies of the free-form fields");
                continue;
            }
        };
        let mut back = Vec::new();
        for (name, now) in verdict {
            metrics.set_admission_policy_in_force(&name, now);
            if told.insert(name.clone(), now) == Some(now) {
                continue;
            }
            match now {
                true => back.push(name),
                false => warn!(
                    policy = %name,
                    "the admission policy is not in force (it or its binding is missing, or changed from what `aigw crds` renders): the apiserver stores documents past the bounds and credentials written in plain text; aigw refuses to send them, but they stay in the objects. Apply crds/free-form-limits.yaml"
                ),
            }
        }
        if !back.is_empty() {
            info!(policies = ?back, "the admission policies are in force");
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;

    /// A policy and binding as the apiserver serves them (its defaults added), changed by
    /// `edit`.
    pub(crate) fn served(
        wanted: &Value,
        edit: impl FnOnce(&mut Value, &mut Value),
    ) -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
        let name = wanted["metadata"]["name"].clone();
        let mut policy = wanted.clone();
        let mut binding = json!({
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        });
        let constraints = &mut policy["spec"]["matchConstraints"];
        constraints["matchPolicy"] = json!("Equivalent");
        constraints["namespaceSelector"] = json!({});
        constraints["objectSelector"] = json!({});
        constraints["resourceRules"][0]["scope"] = json!("*");
        edit(&mut policy, &mut binding);
        (
            serde_json::from_value(policy).unwrap(),
            serde_json::from_value(binding).unwrap(),
        )
    }

    /// Every free-form policy as served is in force; one whose rules, variables, scope or
    /// binding differ, or whose binding or policy is missing, is not, and the others stay in
    /// force.
    #[test]
    fn a_policy_is_in_force_only_as_rendered_and_bound_to_deny() {
        let wanted = wanted();
        assert!(wanted.contains_key("aigw-free-form-limits.configs"));
        let serve_all = |edit: &dyn Fn(&str, &mut Value, &mut Value)| {
            let mut seen = Seen::default();
            for (name, policy) in &wanted {
                let (found, bound) = served(policy, |p, b| edit(name, p, b));
                seen.policies.objects.insert(name.clone(), found);
                seen.bindings.objects.insert(name.clone(), bound);
            }
            seen
        };
        let all = in_force(&wanted, &serve_all(&|_, _, _| {}));
        assert!(all.values().all(|ok| *ok), "{all:?}");

        type Edit = fn(&mut Value, &mut Value);
        let changed: [(&str, Edit); 6] = [
            ("a validation dropped", |p, _| {
                p["spec"]["validations"].as_array_mut().unwrap().pop();
            }),
            ("a validation added", |p, _| {
                let validations = p["spec"]["validations"].as_array_mut().unwrap();
                validations.push(json!({"expression": "true"}));
            }),
            ("the credential keys changed", |p, _| {
                p["spec"]["variables"] = json!([{"name": "credentialKeys", "expression": "[]"}]);
            }),
            ("an object selector", |p, _| {
                p["spec"]["matchConstraints"]["objectSelector"] = json!({"matchLabels": {"x": "y"}})
            }),
            ("failurePolicy Ignore", |p, _| {
                p["spec"]["failurePolicy"] = json!("Ignore")
            }),
            ("a binding that only audits", |_, b| {
                b["spec"]["validationActions"] = json!(["Audit"])
            }),
        ];
        let configs = "aigw-free-form-limits.configs";
        for (what, edit) in changed {
            let seen = serve_all(&|name, p, b| {
                if name == configs {
                    edit(p, b)
                }
            });
            let verdict = in_force(&wanted, &seen);
            assert!(!verdict[configs], "{what} still counted as in force");
            let others = verdict.iter().filter(|(name, _)| *name != configs);
            assert!(others.clone().all(|(_, ok)| *ok), "{what}: {verdict:?}");
        }

        let mut seen = serve_all(&|_, _, _| {});
        seen.bindings.objects.remove(configs);
        assert!(!in_force(&wanted, &seen)[configs], "without its binding");
        let mut seen = serve_all(&|_, _, _| {});
        seen.policies.objects.remove(configs);
        assert!(!in_force(&wanted, &seen)[configs], "without its policy");
    }

    /// A deletion seen by the watch takes the policy out of force; a re-listing replaces what
    /// was seen.
    #[test]
    fn the_watches_events_change_what_is_seen() {
        let wanted = wanted();
        let configs = "aigw-free-form-limits.configs";
        let (found, bound) = served(&wanted[configs], |_, _| {});
        let mut seen = Seen::default();
        let listing = [
            Change::Policy(watcher::Event::Init),
            Change::Policy(watcher::Event::InitApply(found.clone())),
            Change::Policy(watcher::Event::InitDone),
            Change::Binding(watcher::Event::Init),
            Change::Binding(watcher::Event::InitApply(bound.clone())),
        ];
        for change in listing {
            assert!(!seen.apply(change), "told before both watches listed");
        }
        assert!(seen.apply(Change::Binding(watcher::Event::InitDone)));
        assert!(in_force(&wanted, &seen)[configs]);
        assert!(seen.apply(Change::Binding(watcher::Event::Delete(bound.clone()))));
        assert!(!in_force(&wanted, &seen)[configs]);
        // A new listing replaces what was seen only once complete.
        assert!(!seen.apply(Change::Binding(watcher::Event::Init)));
        assert!(!seen.apply(Change::Binding(watcher::Event::InitApply(bound))));
        assert!(!in_force(&wanted, &seen)[configs]);
        assert!(seen.apply(Change::Binding(watcher::Event::InitDone)));
        assert!(in_force(&wanted, &seen)[configs]);
        seen.apply(Change::Policy(watcher::Event::Init));
        assert!(seen.apply(Change::Policy(watcher::Event::InitDone)));
        assert!(!in_force(&wanted, &seen)[configs]);
    }
}
