//! Whether the admission policies aigw ships in `crds/free-form-limits.yaml` are in force: as
//! `aigw crds` renders them, and run by the apiserver (a dry-run probe the Config policy must
//! refuse).
//!
//! Each kind with free-form fields or credential keys has a policy
//! ([`crate::resources::free_form::admission_policy`]) that bounds its documents and refuses a
//! credential written in plain text. Without it the apiserver stores what it would refuse: the
//! operator still refuses to send such a spec (its own check, as `aigw validate` does), but a
//! credential written in plain text stays in the object, for whoever may read it, and a
//! document past the bounds is refused only when reconciled. So the operator watches the
//! policies and their bindings ([`follow`]), exports `aigw_admission_policy_in_force{policy}`
//! (1 or 0; the chart's alert `AigwAdmissionPolicyNotInForce`) and warns when one goes missing
//! or is changed. The same watches keep the state of the guard of the installation claim
//! ([`super::claim_guard`]), whose check is [`enforces`] too.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::Value;
use tracing::{info, warn};

use super::claim_guard::{Guard, RECHECK};
use crate::controller::runtime::metrics::Metrics;

/// Whether `found` and one of `bindings` enforce `wanted` (a policy as `aigw crds` renders
/// it): the policy's whole spec as rendered, once what the apiserver defaults is taken out
/// (`matchPolicy: Equivalent`, empty selectors, `scope: "*"`), and a binding of it that denies
/// over every object, without parameters.
pub fn enforces<'a>(
    found: &ValidatingAdmissionPolicy,
    mut bindings: impl Iterator<Item = &'a ValidatingAdmissionPolicyBinding>,
    wanted: &Value,
) -> bool {
    let name = wanted["metadata"]["name"].as_str().unwrap_or_default();
    let mut spec = serde_json::to_value(&found.spec).unwrap_or_default();
    if let Some(constraints) = spec.get_mut("matchConstraints") {
        without_defaults(constraints);
    }
    let policy_ok = found.name_any() == name && spec == wanted["spec"];
    policy_ok && bindings.any(|bound| denies_everywhere(bound, name))
}

/// Whether `bound` binds the policy `name` to deny, over every object and without parameters
/// (a `matchResources` holding only what the apiserver defaults selects every object too).
fn denies_everywhere(bound: &ValidatingAdmissionPolicyBinding, name: &str) -> bool {
    let Some(spec) = &bound.spec else {
        return false;
    };
    let everywhere = spec.match_resources.as_ref().is_none_or(|resources| {
        let mut resources = serde_json::to_value(resources).unwrap_or_default();
        without_defaults(&mut resources);
        resources.as_object().is_some_and(|r| r.is_empty())
    });
    spec.policy_name.as_deref() == Some(name)
        && spec.param_ref.is_none()
        && everywhere
        && (spec.validation_actions.iter().flatten()).any(|a| a == "Deny")
}

/// Takes out of a `matchConstraints` or `matchResources` what the apiserver sets by default:
/// `matchPolicy: Equivalent`, empty selectors, `scope: "*"` in its rules.
fn without_defaults(resources: &mut Value) {
    let Some(fields) = resources.as_object_mut() else {
        return;
    };
    if fields.get("matchPolicy").and_then(Value::as_str) == Some("Equivalent") {
        fields.remove("matchPolicy");
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        if (fields.get(selector)).is_some_and(|s| s.as_object().is_some_and(|s| s.is_empty())) {
            fields.remove(selector);
        }
    }
    let rules = fields
        .get_mut("resourceRules")
        .and_then(Value::as_array_mut);
    for rule in rules.into_iter().flatten() {
        if rule["scope"] == "*" {
            rule.as_object_mut().map(|r| r.remove("scope"));
        }
    }
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

/// Which watch.
#[derive(Clone, Copy, Debug)]
enum Side {
    Policies,
    Bindings,
}

/// One event of either watch.
enum Change {
    Policy(watcher::Event<ValidatingAdmissionPolicy>),
    Binding(watcher::Event<ValidatingAdmissionPolicyBinding>),
}

impl Seen {
    /// Whether both watches have listed.
    fn listed(&self) -> bool {
        self.policies.listed && self.bindings.listed
    }

    /// The watch of `side` failed: a listing under way is dropped (the next one starts
    /// afresh).
    fn interrupted(&mut self, side: Side) {
        match side {
            Side::Policies => self.policies.relisting.clear(),
            Side::Bindings => self.bindings.relisting.clear(),
        }
    }

    /// What the watch of `side` showed no longer counts until its next listing completes.
    fn forget(&mut self, side: Side) {
        self.interrupted(side);
        match side {
            Side::Policies => self.policies.listed = false,
            Side::Bindings => self.bindings.listed = false,
        }
    }

    /// Applies `change`; true when the answer may have changed, both watches having listed.
    fn apply(&mut self, change: Change) -> bool {
        let changed = match change {
            Change::Policy(event) => self.policies.apply(event),
            Change::Binding(event) => self.bindings.apply(event),
        };
        changed && self.listed()
    }
}

/// Whether each of `wanted` is as rendered and bound to deny, as `seen` shows (always `Some`:
/// [`Judge::judged`] leaves `None` for what is not proven enforced).
fn in_force(wanted: &BTreeMap<String, Value>, seen: &Seen) -> BTreeMap<String, Option<bool>> {
    let verdict = |(name, policy): (&String, &Value)| {
        let found = seen.policies.objects.get(name);
        let bindings = seen.bindings.objects.values();
        let ok = found.is_some_and(|found| enforces(found, bindings, policy));
        (name.clone(), Some(ok))
    };
    wanted.iter().map(verdict).collect()
}

/// Whether the claim guard ([`super::claim_guard`]) is in force, as `seen` shows.
fn claim_guarded(seen: &Seen) -> bool {
    let found = seen.policies.objects.get(super::claim_guard::NAME);
    let wanted = &super::claim_guard::policy()[0];
    found.is_some_and(|found| enforces(found, seen.bindings.objects.values(), wanted))
}

/// Watches the admission policies and their bindings for as long as the process runs, keeps
/// `aigw_admission_policy_in_force` up to date, and says when a policy goes out of force or
/// comes back (every policy missing or changed at the first listing is named once). With
/// `claims` (`--claims auto`), keeps the claim guard's state too, and tells a loss of it again
/// at the next [`RECHECK`] tick ([`Guard::look_again`]). `first_look` is told once the first
/// verdict stands.
///
/// A policy is in force when it is as rendered ([`enforces`]) *and* the apiserver is seen to
/// enforce policies (a dry-run probe, at every [`RECHECK`] and after each change): a
/// probe admitted, or answered otherwise, or impossible (the Config policy not as rendered)
/// leaves every policy out of force. So does what cannot be seen: a watch refused (403), of
/// policies the apiserver does not serve (404), or failing again in the listing that follows
/// an error. A lone error keeps what was seen; the next look lists again to make sure.
/// A change that could bring a policy or the claim guard into force is judged 2 seconds
/// later: the apiserver enforces a binding a moment after storing it.
pub async fn follow(
    kube: kube::Client,
    metrics: Arc<Metrics>,
    claims: Option<Guard>,
    own_namespace: Option<String>,
    first_look: tokio::sync::oneshot::Sender<()>,
) {
    let mut first_look = Some(first_look);
    let mut changes = watches(&kube);
    let mut judge = Judge {
        wanted: wanted(),
        kube: kube.clone(),
        own_namespace,
        probe: Probe::default(),
    };
    let mut seen = Seen::default();
    let mut told = BTreeMap::<String, bool>::new();
    // `erred`: an error since the last look; `relisting`: the listing that follows it;
    // `unseen`: the watches cannot show the policies.
    let (mut erred, mut relisting, mut unseen) = (false, false, false);
    let mut look = tokio::time::interval_at(tokio::time::Instant::now() + RECHECK, RECHECK);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut guarded_at_last_look = false;
    loop {
        // An event of either watch, or `None`: a look every [`RECHECK`].
        let step = tokio::select! {
            change = changes.next() => match change {
                Some(change) => Some(change),
                None => return,
            },
            _ = look.tick() => None,
        };
        let (verdict, claim_guarded) = match step {
            None => {
                if let Some(guard) = &claims {
                    guard.look_again(&mut guarded_at_last_look);
                }
                if erred {
                    // The watches resume after an error without listing: both list again
                    // (what they showed stands until both have), and count as unseen if that
                    // fails.
                    (erred, relisting) = (false, true);
                    seen.forget(Side::Policies);
                    seen.forget(Side::Bindings);
                    changes = watches(&kube);
                    continue;
                }
                if unseen || !seen.listed() {
                    continue;
                }
                // The apiserver may have restarted with other flags: probed again.
                judge.judged(&seen, true).await
            }
            Some((_, Ok(change))) => {
                if !seen.apply(change) {
                    continue;
                }
                (relisting, unseen) = (false, false);
                let gaining = in_force(&judge.wanted, &seen)
                    .iter()
                    .any(|(name, now)| *now == Some(true) && told.get(name) != Some(&true))
                    || claims
                        .as_ref()
                        .is_some_and(|guard| !guard.in_force() && claim_guarded(&seen));
                if gaining && !told.is_empty() {
                    tokio::time::sleep(SETTLE).await;
                }
                judge.judged(&seen, false).await
            }
            Some((side, Err(error))) => {
                seen.interrupted(side);
                let code = match &error {
                    watcher::Error::InitialListFailed(kube::Error::Api(status))
                    | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => {
                        Some(status.code)
                    }
                    _ => None,
                };
                warn!(%error, "cannot watch the admission policies");
                if !(matches!(code, Some(403 | 404)) || relisting) {
                    erred = true;
                    continue;
                }
                // Unseen until this watch lists again, whatever the other shows meanwhile.
                seen.forget(side);
                if !unseen {
                    warn!(
                        "the admission policies cannot be seen: counted as not in force until they can (new objects are taken by a status record first)"
                    );
                }
                unseen = true;
                let none = judge.wanted.keys().map(|name| (name.clone(), None));
                (none.collect(), false)
            }
        };
        if let Some(guard) = &claims {
            guard.set(claim_guarded);
        }
        if let Some(first_look) = first_look.take() {
            let _ = first_look.send(());
        }
        let mut back = Vec::new();
        for (name, seen_now) in verdict {
            let now = seen_now == Some(true);
            metrics.set_admission_policy_in_force(&name, now);
            if told.insert(name.clone(), now) == Some(now) {
                continue;
            }
            match seen_now {
                Some(true) => back.push(name),
                Some(false) => warn!(
                    policy = %name,
                    "the admission policy is not in force (it or its binding is missing, or changed from what `aigw crds` renders): the apiserver stores documents past the bounds and credentials written in plain text; aigw refuses to send them, but they stay in the objects. Apply crds/free-form-limits.yaml (`kubectl replace -f` if it was changed)"
                ),
                None => {}
            }
        }
        if !back.is_empty() {
            info!(policies = ?back, "the admission policies are in force");
        }
    }
}

/// How long after a change that could bring a policy into force it is judged.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// Both watches, their events and errors tagged with the watch.
fn watches(
    kube: &kube::Client,
) -> futures::stream::BoxStream<'static, (Side, Result<Change, watcher::Error>)> {
    let config = watcher::Config::default().any_semantic();
    let policies = watch::<ValidatingAdmissionPolicy>(kube, &config)
        .map(|event| (Side::Policies, event.map(Change::Policy)));
    let bindings = watch::<ValidatingAdmissionPolicyBinding>(kube, &config)
        .map(|event| (Side::Bindings, event.map(Change::Binding)));
    futures::stream::select(policies, bindings).boxed()
}

/// What the last probe of enforcement found, and when.
#[derive(Default)]
struct Probe {
    proof: Proof,
    at: Option<Instant>,
}

/// Whether the apiserver was seen to enforce the admission policies ([`enforced`]).
#[derive(Clone, Debug, Default, PartialEq)]
enum Proof {
    /// No probe made: no own namespace to make it in (a library caller that sets none); the
    /// specs alone decide.
    #[default]
    NotProbed,
    /// The Config policy refused the probe.
    Enforced,
    /// The probe was admitted: the apiserver stores the policies without running them.
    Admitted,
    /// The Config policy is not as rendered, so a probe could prove nothing.
    NoProbePolicy,
    /// Another answer (RBAC, another admission check, no answer): what it was.
    Unknown(String),
}

impl Proof {
    /// Says what a change of proof means, once per change of kind.
    fn tell(&self, before: &Proof, namespace: Option<&str>) {
        if std::mem::discriminant(self) == std::mem::discriminant(before) {
            return;
        }
        match self {
            Proof::Admitted => warn!(
                "the apiserver does not enforce the admission policies: a dry-run Config holding a credential in plain text was admitted (is the ValidatingAdmissionPolicy admission plugin off?); every policy counts as not in force, and new objects are taken by a status record first"
            ),
            Proof::NoProbePolicy => warn!(
                policy = PROBE_POLICY,
                "whether the apiserver enforces the admission policies cannot be told without the Config policy as rendered: every policy counts as not in force"
            ),
            Proof::Unknown(answer) => warn!(
                namespace,
                %answer,
                "cannot tell whether the apiserver enforces the admission policies (a dry-run create of a Config): every policy counts as not in force"
            ),
            Proof::Enforced | Proof::NotProbed => {}
        }
    }
}

/// What a verdict needs besides what the watches show.
struct Judge {
    /// The policies looked for ([`wanted`]).
    wanted: BTreeMap<String, Value>,
    kube: kube::Client,
    /// Where the probe is sent ([`enforced`]).
    own_namespace: Option<String>,
    probe: Probe,
}

impl Judge {
    /// Whether each policy looked for is in force (`None`: as rendered, but not proven
    /// enforced), as `seen` shows and the apiserver enforces ([`enforced`], probed when
    /// `force` or when the last probe is older than [`PROBE_GAP`]), and whether the claim
    /// guard is.
    async fn judged(&mut self, seen: &Seen, force: bool) -> (BTreeMap<String, Option<bool>>, bool) {
        let verdict = in_force(&self.wanted, seen);
        let renders = verdict.get(PROBE_POLICY) == Some(&Some(true));
        let probe = &mut self.probe;
        let stale = force || probe.at.is_none_or(|at| at.elapsed() >= PROBE_GAP);
        let namespace = self.own_namespace.as_deref();
        let proof = match (renders, namespace) {
            (false, _) => Proof::NoProbePolicy,
            (true, None) => Proof::NotProbed,
            (true, Some(namespace)) if stale => {
                probe.at = Some(Instant::now());
                enforced(&self.kube, namespace).await
            }
            (true, Some(_)) => probe.proof.clone(),
        };
        proof.tell(&probe.proof, namespace);
        probe.proof = proof;
        let proven = matches!(probe.proof, Proof::Enforced | Proof::NotProbed);
        let verdict = verdict
            .into_iter()
            .map(|(name, now)| match now {
                Some(true) if !proven => (name, None),
                now => (name, now),
            })
            .collect();
        (verdict, proven && claim_guarded(seen))
    }
}

/// The least time between two probes made for changes (a look always probes).
const PROBE_GAP: std::time::Duration = std::time::Duration::from_secs(5);

/// The policy the probe ([`enforced`]) runs into.
const PROBE_POLICY: &str = "aigw-free-form-limits.configs";

/// Whether the apiserver enforces the admission policies at all: a dry-run create (never
/// stored) of a Config in `namespace` holding a credential key in plain text, which the Config
/// policy refuses, naming itself. Admitted, it is sent again ([`PROBES`] times in all) before
/// it counts.
async fn enforced(kube: &kube::Client, namespace: &str) -> Proof {
    let name = "aigw-admission-probe";
    let probe = serde_json::json!({
        "apiVersion": format!("{}/v1alpha1", crate::resources::common::GROUP),
        "kind": "Config",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"name": name, "config": {"api_key": "not-a-credential"}},
    });
    let path = format!(
        "/apis/{}/v1alpha1/namespaces/{namespace}/configs",
        crate::resources::common::GROUP
    );
    let params = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    let refusal = format!("ValidatingAdmissionPolicy '{PROBE_POLICY}'");
    for attempt in 1..=PROBES {
        let request =
            kube::core::Request::new(&path).create(&params, probe.to_string().into_bytes());
        let answer = match request {
            Ok(request) => tokio::time::timeout(PROBE_TIMEOUT, kube.request_text(request)).await,
            Err(error) => Ok(Err(kube::Error::BuildRequest(error))),
        };
        let Ok(answer) = answer else {
            return Proof::Unknown(format!("no answer within {PROBE_TIMEOUT:?}"));
        };
        match answer {
            Ok(_) if attempt < PROBES => tokio::time::sleep(PROBE_PAUSE).await,
            Ok(_) => return Proof::Admitted,
            Err(kube::Error::Api(status)) if status.message.contains(&refusal) => {
                return Proof::Enforced;
            }
            Err(error) => return Proof::Unknown(error.to_string()),
        }
    }
    Proof::Admitted
}

/// How often an admitted probe is sent before it counts (the apiserver enforces a binding a
/// moment after storing it), and the pause between two.
const PROBES: u32 = 4;
const PROBE_PAUSE: std::time::Duration = std::time::Duration::from_secs(2);

/// How long one probe may wait for its answer (the verdict waits for it): past the 30 s an
/// admission webhook may take, so that a slow but healthy one is not taken for no answer.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(35);

/// The events of a watch of every `K`, retried with backoff. Its `Init` events are left out:
/// one comes before each listing, and kube's backoff starts again from its shortest wait at
/// every event, so with them a watch refused for good would be retried every second
/// ([`Seen::interrupted`] does what `Init` would).
fn watch<K>(
    kube: &kube::Client,
    config: &watcher::Config,
) -> impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + use<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let not_init = |event: &Result<watcher::Event<K>, _>| {
        futures::future::ready(!matches!(event, Ok(watcher::Event::Init)))
    };
    watcher(Api::<K>::all(kube.clone()), config.clone())
        .filter(not_init)
        .default_backoff()
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
        assert!(all.values().all(|ok| *ok == Some(true)), "{all:?}");

        type Edit = fn(&mut Value, &mut Value);
        let changed: [(&str, Edit); 10] = [
            ("a parameter kind", |p, _| {
                p["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"})
            }),
            (
                "an audit annotation",
                |p, _| {
                    p["spec"]["auditAnnotations"] =
                        json!([{"key": "x", "valueExpression": "string(object.spec)"}])
                },
            ),
            ("matchPolicy Exact", |p, _| {
                p["spec"]["matchConstraints"]["matchPolicy"] = json!("Exact")
            }),
            ("a binding for some resources only", |_, b| {
                b["spec"]["matchResources"] = json!({"resourceRules": [{
                    "apiGroups": ["aigw.io"], "apiVersions": ["*"],
                    "operations": ["CREATE"], "resources": ["nothing"],
                }]})
            }),
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
            assert_eq!(verdict[configs], Some(false), "{what}");
            let others = verdict.iter().filter(|(name, _)| *name != configs);
            assert!(
                others.clone().all(|(_, ok)| *ok == Some(true)),
                "{what}: {verdict:?}"
            );
        }

        // What the apiserver defaults in a binding's matchResources, or a binding of another
        // name, still binds the policy everywhere.
        let still: [(&str, Edit); 2] = [
            ("matchResources as defaulted", |_, b| {
                b["spec"]["matchResources"] = json!({
                    "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                })
            }),
            ("a binding of another name", |_, b| {
                b["metadata"]["name"] = json!("my-binding")
            }),
        ];
        for (what, edit) in still {
            let mut seen = serve_all(&|name, p, b| {
                if name == configs {
                    edit(p, b)
                }
            });
            let renamed = seen.bindings.objects.remove(configs).unwrap();
            seen.bindings.objects.insert(renamed.name_any(), renamed);
            assert_eq!(in_force(&wanted, &seen)[configs], Some(true), "{what}");
        }

        let mut seen = serve_all(&|_, _, _| {});
        seen.bindings.objects.remove(configs);
        assert_eq!(
            in_force(&wanted, &seen)[configs],
            Some(false),
            "without its binding"
        );
        let mut seen = serve_all(&|_, _, _| {});
        seen.policies.objects.remove(configs);
        assert_eq!(
            in_force(&wanted, &seen)[configs],
            Some(false),
            "without its policy"
        );
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
        assert_eq!(in_force(&wanted, &seen)[configs], Some(true));
        assert!(seen.apply(Change::Binding(watcher::Event::Delete(bound.clone()))));
        assert_eq!(in_force(&wanted, &seen)[configs], Some(false));
        // A watch forgotten after a failure counts again only once it has listed again,
        // whatever the other shows meanwhile.
        seen.forget(Side::Bindings);
        assert!(!seen.apply(Change::Policy(watcher::Event::Apply(found.clone()))));
        assert!(!seen.apply(Change::Binding(watcher::Event::InitApply(bound.clone()))));
        assert!(seen.apply(Change::Binding(watcher::Event::InitDone)));
        assert_eq!(in_force(&wanted, &seen)[configs], Some(true));
        seen.apply(Change::Binding(watcher::Event::Delete(bound.clone())));
        // A new listing replaces what was seen only once complete.
        assert!(!seen.apply(Change::Binding(watcher::Event::Init)));
        assert!(!seen.apply(Change::Binding(watcher::Event::InitApply(bound))));
        assert_eq!(in_force(&wanted, &seen)[configs], Some(false));
        assert!(seen.apply(Change::Binding(watcher::Event::InitDone)));
        assert_eq!(in_force(&wanted, &seen)[configs], Some(true));
        seen.apply(Change::Policy(watcher::Event::Init));
        assert!(seen.apply(Change::Policy(watcher::Event::InitDone)));
        assert_eq!(in_force(&wanted, &seen)[configs], Some(false));
    }
}
