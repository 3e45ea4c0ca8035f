//! Which objects are this installation's. An installation is one release of the operator (its
//! flags, its Connections, its `default`); several may share a cluster, even a namespace. Each
//! acts only on objects that are its own:
//! - a namespaced object whose Connection it can see: a Connection its `--cluster-selector`
//!   selects and no other installation claimed, or, when no Connection of that name exists, its own `default` (its flags) or the
//!   missing Connection it reports;
//! - a cluster-scoped object its `--cluster-selector` selects (its watch lists no other);
//! - a Connection its `--cluster-selector` selects, unless another installation claimed it
//!   (Connections are not claimed by the operator; an `aigw.io/installation` annotation written
//!   on one by hand gives it, and every object naming it, to that installation);
//! - and, of those, only one that no other installation has claimed.
//!
//! An installation takes an object that nobody claimed with its first write about it, which
//! carries the resourceVersion the decision was made on, so of two installations racing for one
//! object exactly one takes it; the other sees the claim and backs off without a trace (a debug
//! log line). While the annotation is guarded at admission
//! ([`crate::controller::state::claim_guard`]), that write is the object's first metadata write
//! (the finalizer and create intent before a POST; `Cx::taking` in the driver)
//! carrying the annotation `aigw.io/installation: <id>` (as external-dns records its owner id
//! on a DNS record), and the first status write records the id in `status.installation` too.
//! Otherwise the installation records itself in status first ([`record`]), and the annotation
//! follows with the first metadata write (on its own at the end of a reconcile that
//! wrote no metadata, such as Observe, a pause or a wait). An annotation written by hand proposes the object to the installation it names. An
//! object made before claims existed has none: the first installation that would reconcile it
//! takes it. An object of someone else gets no finalizer, no status, no event and no API call,
//! and costs no apiserver read: the decision is made from the watch caches.
//!
//! Whoever may edit an object may rewrite its annotation, so the annotation only proposes. The
//! record is in the object's status (guarded by the resourceVersion),
//! which only the status subresource holds: the operator's RBAC writes it, a tenant's `edit`
//! role does not. From then on the status decides ([`Installation::claim_on`]): another
//! installation leaves the object alone whatever its annotation says (no second remote copy),
//! and the recorded one keeps it; while the annotation names another installation, the gate
//! refuses every call for it and reports `Stalled`/`ClaimChanged` with an event
//! ([`Installation::claim_changed`]); restoring the annotation resumes, and a removed one is
//! written again. A deletion is cleaned up by the recorded installation whatever the annotation
//! says, so a claim naming an installation nobody runs holds no deletion up.
//!
//! Each installation has its own finalizer ([`finalizer_of`]): `aigw.io/finalizer` for the
//! default id, `aigw.io/finalizer.<id>` for the others. The shared `aigw.io/finalizer` that
//! every installation used before stays the finalizer of the installation whose object it is
//! (the recorded one, or the claimant while none is recorded), which removes it on deletion.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{Expression, Selector, SelectorExt};
use kube::{Resource, ResourceExt};

use crate::controller::error::{Error, Halt, Wait};
use crate::controller::runtime::apiserver::written_by;
use crate::controller::state::claim_guard::Guard;
use crate::controller::state::claims::Claims;
use crate::resources::common::FINALIZER;

/// The annotation naming the installation that took an object.
pub const ANNOTATION: &str = "aigw.io/installation";

/// The field manager of the status write that records the installation
/// (`status.installation`): its own, so that it writes nothing else of the status.
pub const RECORDER: &str = "aigw/installation";

/// The reason of the `Stalled` condition of an object whose annotation names another
/// installation than the one its status records.
pub const CLAIM_CHANGED: &str = "ClaimChanged";

/// The longest installation id accepted.
const MAX_ID: usize = 253;

/// This installation: its id and what its `--cluster-selector` selects.
#[derive(Debug, Clone)]
pub struct Installation {
    id: String,
    selector: Option<Selector>,
    /// Its finalizer ([`finalizer_of`]).
    finalizer: String,
    /// Whether the admission guard of the claim annotation is in force
    /// ([`crate::controller::state::claim_guard`]).
    guard: Guard,
}

impl Default for Installation {
    fn default() -> Self {
        Self {
            id: DEFAULT_ID.to_string(),
            selector: None,
            finalizer: FINALIZER.to_string(),
            guard: Guard::default(),
        }
    }
}

/// The id of an installation when nothing names one (`Settings::default`).
pub const DEFAULT_ID: &str = "aigw";

impl Installation {
    /// `id` (see [`check_id`]) and the `--cluster-selector` text (see [`parse_selector`]).
    pub fn new(id: &str, selector: Option<&str>) -> Result<Self, String> {
        check_id(id)?;
        let selector = selector.map(parse_selector).transpose()?;
        Ok(Self {
            id: id.to_string(),
            selector,
            finalizer: finalizer_of(id),
            guard: Guard::default(),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the claim annotation is guarded at admission, shared by every copy of this
    /// installation ([`crate::controller::state::admission::follow`] keeps it).
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// True when this installation takes a new object in its first metadata write (the
    /// annotation is guarded at admission) rather than by a status record first.
    pub fn claims_by_annotation(&self) -> bool {
        self.guard.in_force()
    }

    /// The finalizer this installation puts on the objects it writes remotely for
    /// ([`finalizer_of`]).
    pub fn finalizer(&self) -> &str {
        &self.finalizer
    }

    /// The finalizers on `object` that wait for this installation: its own, and the one all
    /// installations shared before finalizers were per installation (`aigw.io/finalizer`) on an
    /// object that is this installation's. Empty when none does.
    pub fn finalizers_held<'o, K: Claims>(&self, object: &'o K) -> Vec<&'o str> {
        let ours = || self.claim_on(object) == Claim::Ours;
        object
            .finalizers()
            .iter()
            .filter(|f| **f == self.finalizer || (*f == FINALIZER && ours()))
            .map(String::as_str)
            .collect()
    }

    /// True when a finalizer on `object` waits for this installation ([`Self::finalizers_held`]).
    pub fn holds<K: Claims>(&self, object: &K) -> bool {
        !self.finalizers_held(object).is_empty()
    }

    /// Whether the `--cluster-selector` selects a cluster-scoped object with `labels`
    /// (everything, without one).
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.as_ref().is_none_or(|s| s.matches(labels))
    }

    /// Whether this installation acts on the Connection of `meta`: its `--cluster-selector`
    /// selects it and no other installation claimed it.
    pub fn sees_connection(&self, meta: &ObjectMeta) -> bool {
        let labels = meta.labels.clone().unwrap_or_default();
        self.selects(&labels) && !matches!(self.claim_in(meta), Claim::Theirs(_))
    }

    /// True when `object` is another installation's ([`Self::claim_on`]): nothing of it
    /// counts here (it names nothing this installation manages, and pins nothing of it).
    pub fn is_theirs<K: Claims>(&self, object: &K) -> bool {
        matches!(self.claim_on(object), Claim::Theirs(_))
    }

    /// Whose `object` is, and whether that is this installation: the installation its status
    /// records (`status.installation`, written only by an operator), or, while none is
    /// recorded, the one its annotation names.
    pub fn claim_on<K: Claims>(&self, object: &K) -> Claim {
        match object.recorded_installation() {
            Some(id) if id == self.id => Claim::Ours,
            Some(id) => Claim::Theirs(id.to_string()),
            None => self.claim_in(object.meta()),
        }
    }

    /// The installation the annotation of `object` names instead of this one, when its status
    /// records this installation (someone rewrote the claim): `None` when they agree, or when
    /// the annotation is gone (this installation writes it again).
    pub fn claim_changed<K: Claims>(&self, object: &K) -> Option<String> {
        if object.recorded_installation() != Some(self.id.as_str()) {
            return None;
        }
        match self.claim_in(object.meta()) {
            Claim::Theirs(named) => Some(named),
            Claim::None | Claim::Ours => None,
        }
    }

    /// Whose the `aigw.io/installation` annotation of `object` says it is, also when a cached
    /// copy dropped the annotation because it named the installation its status records
    /// ([`Claims::claim_annotated`]).
    pub fn annotated<K: Claims>(&self, object: &K) -> Claim {
        match object.recorded_installation() {
            Some(id) if object.claim_annotated() && id == self.id => Claim::Ours,
            Some(id) if object.claim_annotated() => Claim::Theirs(id.to_string()),
            _ => self.claim_in(object.meta()),
        }
    }

    /// Who the annotation of the object `meta` belongs to names (also for an object that could
    /// not be decoded, whose metadata is all that is known of it, and for a Connection, which
    /// has no recorded installation).
    pub fn claim_in(&self, meta: &ObjectMeta) -> Claim {
        match meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION)) {
            None => Claim::None,
            Some(id) if *id == self.id => Claim::Ours,
            Some(id) => Claim::Theirs(id.clone()),
        }
    }
}

/// The claim an object carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    None,
    Ours,
    Theirs(String),
}

/// What this installation does with an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Claimed by this installation: reconcile it.
    Ours,
    /// This installation's to take: claim it first (or, when its status records this
    /// installation and the annotation is gone, write the annotation again).
    Unclaimed,
    /// Another installation's: leave it untouched (the reason, for a debug line).
    NotOurs(String),
    /// Claimed by this installation, but its Connection is another installation's now and it
    /// holds nothing of this one (no finalizer): give the claim back so that one can take it.
    GiveBack(String),
    /// The Connection cache has not listed yet (or not yet the Connection a new object names):
    /// decide later.
    Undecided,
}

/// What this installation does with `object`, which uses Connection `connection`: from whose
/// the object is ([`Installation::claim_on`]) and the Connection watch cache (`cached`: the
/// Connection's metadata; `None` when that cache has not listed, `Some(None)` when no such
/// Connection exists), without an apiserver read. An object whose status records this
/// installation stays its own whatever the annotation says: the gate refuses every call for it
/// while the annotation names another (`ClaimChanged`), but its deletion is still cleaned up.
pub fn verdict<K: Claims>(
    installation: &Installation,
    object: &K,
    connection: &str,
    cached: Option<Option<&ObjectMeta>>,
    holds_finalizer: bool,
) -> Verdict {
    let claim = installation.claim_on(object);
    if let Claim::Theirs(id) = &claim {
        return Verdict::NotOurs(match object.recorded_installation() {
            Some(_) => format!("its status records installation {id}"),
            None => format!("claimed by installation {id}"),
        });
    }
    let visible = match cached {
        None => return Verdict::Undecided,
        // No such Connection: no installation sees it, and the one that takes the object reports
        // it (or uses its own `default`).
        Some(None) => true,
        Some(Some(meta)) => installation.sees_connection(meta),
    };
    let hidden = || {
        format!(
            "its Connection {connection} is not selected by --cluster-selector or is claimed by another installation"
        )
    };
    match (claim, visible) {
        (Claim::Ours, false) if !holds_finalizer => Verdict::GiveBack(hidden()),
        (_, false) => Verdict::NotOurs(hidden()),
        // Recorded here, and the annotation removed: written again before anything else.
        (Claim::Ours, true)
            if installation.annotated(object) == Claim::None
                && object.meta().deletion_timestamp.is_none() =>
        {
            Verdict::Unclaimed
        }
        (Claim::Ours, true) => Verdict::Ours,
        (_, true) => Verdict::Unclaimed,
    }
}

/// Takes `object` for installation `id`: adds the claim, on condition that the object is still
/// at the resourceVersion the decision was made on. `Err(Conflict)` when it changed (another
/// installation may have claimed it: the next reconcile sees).
pub async fn take<K>(objects: &Api<K>, object: &K, id: &str) -> Result<(), Halt>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let version = object.meta().resource_version.clone();
    write_claim(
        objects,
        object,
        version,
        serde_json::Value::String(id.into()),
    )
    .await
}

/// Removes this installation's claim from `object` (on the same condition as [`take`]): the
/// installation its status records first, then the annotation.
pub async fn give_back<K>(objects: &Api<K>, object: &K) -> Result<(), Halt>
where
    K: Claims + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    give_back_recorded(objects, object, object.recorded_installation().is_some()).await
}

/// [`give_back`] for a kind without claims (a ConfigRollout): `recorded` when its status
/// records an installation.
pub async fn give_back_recorded<K>(objects: &Api<K>, object: &K, recorded: bool) -> Result<(), Halt>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut version = object.meta().resource_version.clone();
    if recorded {
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": version},
            "status": {"installation": null},
        });
        let written = objects
            .patch_status(
                &object.name_any(),
                &written_by(RECORDER),
                &Patch::Merge(&patch),
            )
            .await;
        match claim_written(written, K::kind(&()).as_ref(), &object.name_any())? {
            Some(written) => version = written.meta().resource_version.clone(),
            None => return Ok(()),
        }
    }
    write_claim(objects, object, version, serde_json::Value::Null).await
}

/// Records installation `id` in the status of `object` (`status.installation`), on condition
/// that the object is still at the resourceVersion the decision was made on: a server-side
/// apply of that one field under its own field manager ([`RECORDER`]), so nothing else of the
/// status changes. Returns the object as written (`None`: it is gone). `Err(Conflict)` when it
/// changed meanwhile (its claim may have been rewritten: the next reconcile decides again).
pub async fn record<K>(objects: &Api<K>, object: &K, id: &str) -> Result<Option<K>, Halt>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"resourceVersion": object.meta().resource_version},
        "status": {"installation": id},
    });
    let written = objects
        .patch_status(
            &object.name_any(),
            &PatchParams::apply(RECORDER).force(),
            &Patch::Apply(&patch),
        )
        .await;
    let kind = K::kind(&());
    match written {
        // An older CRD has no `status.installation`: say what to do, not only what failed.
        Err(e) if let Some(outdated) = Error::crd_outdated(&kind, &object.name_any(), &e) => {
            Err(outdated.into())
        }
        written => claim_written(written, kind.as_ref(), &object.name_any()),
    }
}

async fn write_claim<K>(
    objects: &Api<K>,
    object: &K,
    version: Option<String>,
    value: serde_json::Value,
) -> Result<(), Halt>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object.name_any();
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": version,
        "annotations": {ANNOTATION: value},
    }});
    let written = objects
        .patch(&name, &written_by(RECORDER), &Patch::Merge(&patch))
        .await;
    claim_written(written, K::kind(&()).as_ref(), &name).map(|_| ())
}

/// The answer to a write of a claim: the object as written, `None` when it is gone,
/// `Err(Conflict)` when it changed since it was read.
fn claim_written<K>(written: kube::Result<K>, kind: &str, name: &str) -> Result<Option<K>, Halt> {
    match written {
        Ok(written) => Ok(Some(written)),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            Err(Wait::Conflict(format!("{kind} {name}: claimed meanwhile")).into())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(e) => Err(Error::kube(format!("claim {kind} {name}"), e).into()),
    }
}

/// The finalizer of installation `id`: `aigw.io/finalizer` for the default id (`aigw`, as
/// every installation had before finalizers were per installation), otherwise
/// `aigw.io/finalizer.<id>`, with an id that is not a valid finalizer name part (the chart's
/// `<namespace>/<release>` holds a `/`) spelled with dots for the other characters, cut to 44
/// characters, and followed by 8 hex digits of its SHA-256, so that two ids never share one.
pub fn finalizer_of(id: &str) -> String {
    // A finalizer's name part is at most 63 characters; `finalizer.` takes 10.
    const LONGEST: usize = 53;
    if id == DEFAULT_ID {
        return FINALIZER.to_string();
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if id.len() <= LONGEST
        && id.chars().all(allowed)
        && edge(id.chars().next())
        && edge(id.chars().last())
    {
        return format!("{FINALIZER}.{id}");
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
    let hash: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let spelled: String = id
        .chars()
        .map(|c| if allowed(c) { c } else { '.' })
        .take(44)
        .collect();
    match spelled.trim_matches(|c: char| !c.is_ascii_alphanumeric()) {
        "" => format!("{FINALIZER}.{hash}"),
        readable => format!("{FINALIZER}.{readable}-{hash}"),
    }
}

/// An installation id: 1 to 253 characters, none of them whitespace or control characters.
pub fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_ID {
        return Err(format!(
            "--installation-id must be 1 to {MAX_ID} characters long"
        ));
    }
    if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "--installation-id {id:?} holds whitespace or a control character"
        ));
    }
    Ok(())
}

/// Parses a label selector as `kubectl -l` takes it: requirements joined by commas, each
/// `key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)` or
/// `key notin (a,b)`. The apiserver evaluates the same text for the cluster-scoped watches;
/// this evaluates it on Connections from the cache.
pub fn parse_selector(text: &str) -> Result<Selector, String> {
    let bad = |why: &str| format!("--cluster-selector {text:?}: {why}");
    let mut expressions = Vec::new();
    for requirement in split_requirements(text).map_err(|e| bad(&e))? {
        let requirement = requirement.trim();
        if requirement.is_empty() {
            return Err(bad("an empty requirement"));
        }
        expressions.push(parse_requirement(requirement).map_err(|e| bad(&e))?);
    }
    if expressions.is_empty() {
        return Err(bad("no requirement"));
    }
    Ok(Selector::from_iter(expressions))
}

/// The requirements of `text`: split at the commas outside parentheses.
fn split_requirements(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (at, c) in text.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err("nested parentheses".into()),
            ')' if depth == 1 => depth = 0,
            ')' => return Err("a ')' without its '('".into()),
            ',' if depth == 0 => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("a '(' without its ')'".into());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn parse_requirement(text: &str) -> Result<Expression, String> {
    if let Some(key) = text.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(label_key(key)?));
    }
    for (op, not) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((key, value)) = text.split_once(op) {
            let (key, value) = (label_key(key)?, label_value(value)?);
            return Ok(match not {
                true => Expression::NotEqual(key, value),
                false => Expression::Equal(key, value),
            });
        }
    }
    if let Some(open) = text.find('(') {
        let head: Vec<&str> = text[..open].split_whitespace().collect();
        let list = text[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| format!("{text:?}: text after ')'"))?;
        let values = list.split(',').map(label_value).collect::<Result<_, _>>()?;
        return match head.as_slice() {
            [key, "in"] => Ok(Expression::In(label_key(key)?, values)),
            [key, "notin"] => Ok(Expression::NotIn(label_key(key)?, values)),
            _ => Err(format!(
                "{text:?}: expected `key in (…)` or `key notin (…)`"
            )),
        };
    }
    Ok(Expression::Exists(label_key(text)?))
}

fn label_key(key: &str) -> Result<String, String> {
    label_part(key, (1, 316), "-_./", "label key")
}

fn label_value(value: &str) -> Result<String, String> {
    label_part(value, (0, 63), "-_.", "label value")
}

/// `text` trimmed, when its length is within `(least, most)` and it holds only ASCII letters,
/// digits and `extra`; else why not, naming it a `what`.
fn label_part(
    text: &str,
    (least, most): (usize, usize),
    extra: &str,
    what: &str,
) -> Result<String, String> {
    let text = text.trim();
    let valid = (least..=most).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(c));
    match valid {
        true => Ok(text.to_string()),
        false => Err(format!("{text:?} is not a {what}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors_match_as_kubectl_reads_them() {
        let prod = labels(&[("aigw.io/environment", "prod"), ("team", "a")]);
        let staging = labels(&[("aigw.io/environment", "staging")]);
        let cases = [
            ("aigw.io/environment=prod", true, false),
            ("aigw.io/environment==prod", true, false),
            ("aigw.io/environment!=prod", false, true),
            ("aigw.io/environment in (prod, dev)", true, false),
            ("aigw.io/environment notin (prod,dev)", false, true),
            ("team", true, false),
            ("!team", false, true),
            ("aigw.io/environment=prod,team=a", true, false),
            ("aigw.io/environment in (prod,staging), !team", false, true),
        ];
        for (text, on_prod, on_staging) in cases {
            let installation = Installation::new("ns/aigw", Some(text)).unwrap();
            assert_eq!(installation.selects(&prod), on_prod, "{text} on prod");
            assert_eq!(
                installation.selects(&staging),
                on_staging,
                "{text} on staging"
            );
        }
        assert!(Installation::new("ns/aigw", None).unwrap().selects(&prod));
    }

    #[test]
    fn a_bad_selector_or_id_is_refused_naming_the_flag() {
        for text in [
            "",
            "a=b,",
            "a in (b",
            "a in b)",
            "a b",
            "a=b c",
            "x in (a,(b))",
        ] {
            let error = parse_selector(text).unwrap_err();
            assert!(error.starts_with("--cluster-selector"), "{text}: {error}");
        }
        for id in ["", "a b", &"x".repeat(254)] {
            let error = check_id(id).unwrap_err();
            assert!(error.starts_with("--installation-id"), "{id}: {error}");
        }
    }

    fn config(claim: Option<&str>) -> crate::resources::Config {
        let mut value = serde_json::json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": "c", "namespace": "n"},
            "spec": {"name": "c", "config": {}}
        });
        if let Some(id) = claim {
            value["metadata"]["annotations"] = serde_json::json!({ ANNOTATION: id });
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_an_unclaimed_or_own_object_whose_connection_is_visible_is_ours() {
        let me = Installation::new("a", Some("env=a")).unwrap();
        let meta = |labels: BTreeMap<String, String>, claim: Option<&str>| ObjectMeta {
            labels: Some(labels),
            annotations: claim.map(|id| BTreeMap::from([(ANNOTATION.to_string(), id.to_string())])),
            ..ObjectMeta::default()
        };
        let mine = meta(labels(&[("env", "a")]), None);
        let theirs = meta(labels(&[("env", "b")]), None);
        let claimed = meta(labels(&[("env", "a")]), Some("b"));
        let verdict =
            |claim, cached, finalizer| verdict(&me, &config(claim), "x", cached, finalizer);
        // Claimed by another: whatever the Connection.
        assert!(matches!(
            verdict(Some("b"), Some(Some(&mine)), false),
            Verdict::NotOurs(_)
        ));
        assert!(matches!(
            verdict(Some("b"), Some(None), true),
            Verdict::NotOurs(_)
        ));
        // Visible (selected, or no such Connection): ours, or to take.
        assert_eq!(verdict(Some("a"), Some(Some(&mine)), true), Verdict::Ours);
        assert_eq!(verdict(None, Some(Some(&mine)), false), Verdict::Unclaimed);
        assert_eq!(verdict(None, Some(None), false), Verdict::Unclaimed);
        assert_eq!(verdict(Some("a"), Some(None), false), Verdict::Ours);
        // A Connection another installation selects.
        assert!(matches!(
            verdict(None, Some(Some(&theirs)), false),
            Verdict::NotOurs(_)
        ));
        assert!(matches!(
            verdict(Some("a"), Some(Some(&theirs)), false),
            Verdict::GiveBack(_)
        ));
        assert!(matches!(
            verdict(Some("a"), Some(Some(&theirs)), true),
            Verdict::NotOurs(_)
        ));
        // A Connection it selects but another installation claimed.
        assert!(matches!(
            verdict(None, Some(Some(&claimed)), false),
            Verdict::NotOurs(_)
        ));
        // The cache has not listed.
        assert_eq!(verdict(None, None, false), Verdict::Undecided);
    }

    fn recorded(claim: Option<&str>, installation: &str) -> crate::resources::Config {
        let mut object = config(claim);
        object.status = Some(crate::resources::config::ConfigStatus {
            managed: crate::resources::managed_status::ManagedStatus {
                installation: Some(installation.into()),
                ..Default::default()
            },
            ..Default::default()
        });
        object
    }

    #[test]
    fn the_installation_a_status_records_outranks_the_annotation() {
        let me = Installation::new("a", Some("env=a")).unwrap();
        let absent = Some(None);
        // Recorded here, the annotation rewritten: still this one's (the gate refuses every
        // call for it), and the change is told.
        let moved = recorded(Some("b"), "a");
        assert_eq!(verdict(&me, &moved, "x", absent, true), Verdict::Ours);
        assert_eq!(me.claim_changed(&moved), Some("b".into()));
        assert_eq!(me.claim_on(&moved), Claim::Ours);
        // Recorded for another, whatever the annotation says: nothing of this one's.
        let theirs = recorded(Some("a"), "b");
        assert!(matches!(
            verdict(&me, &theirs, "x", absent, false),
            Verdict::NotOurs(_)
        ));
        assert!(me.is_theirs(&theirs));
        assert_eq!(me.claim_changed(&theirs), None);
        // Recorded here, the annotation removed: it is written again.
        assert_eq!(
            verdict(&me, &recorded(None, "a"), "x", absent, true),
            Verdict::Unclaimed
        );
        let agreeing = recorded(Some("a"), "a");
        assert_eq!(verdict(&me, &agreeing, "x", absent, true), Verdict::Ours);
        assert_eq!(me.claim_changed(&agreeing), None);
    }

    /// The cache drops an annotation that agrees with the status record
    /// ([`crate::controller::driver::Managed::prepare`]): every decision on the prepared copy is
    /// the one made on the copy as read, and one whose annotation is gone still owes it.
    #[test]
    fn a_prepared_copy_is_judged_as_the_copy_it_was_read_as() {
        use crate::controller::driver::Managed;
        let me = Installation::new("a", Some("env=a")).unwrap();
        let absent = Some(None);
        for (claim, record) in [
            (Some("a"), "a"),
            (Some("b"), "a"),
            (Some("a"), "b"),
            (Some("b"), "b"),
            (None, "a"),
            (None, "b"),
        ] {
            let read = recorded(claim, record);
            let mut prepared = read.clone();
            prepared.prepare();
            let dropped = claim == Some(record);
            assert_eq!(
                prepared.metadata.annotations.is_none(),
                claim.is_none() || dropped
            );
            assert_eq!(prepared.claim_annotated(), dropped, "{claim:?} {record}");
            assert_eq!(me.annotated(&prepared), me.claim_in(&read.metadata));
            assert_eq!(me.claim_on(&prepared), me.claim_on(&read));
            assert_eq!(me.claim_changed(&prepared), me.claim_changed(&read));
            assert_eq!(
                verdict(&me, &prepared, "x", absent, true),
                verdict(&me, &read, "x", absent, true)
            );
            // Equal statuses whatever the flag: a status read from an answer is not a change.
            assert_eq!(prepared.status, read.status);
        }
    }

    #[test]
    fn finalizers_are_per_installation_and_valid_names() {
        assert_eq!(finalizer_of(DEFAULT_ID), FINALIZER);
        assert_eq!(finalizer_of("inst-a"), "aigw.io/finalizer.inst-a");
        let chart = finalizer_of("aigw-system/aigw");
        let stem = "aigw.io/finalizer.aigw-system.aigw-";
        assert!(
            chart.starts_with(stem) && chart.len() == stem.len() + 8,
            "{chart}"
        );
        assert_ne!(finalizer_of("a/b"), finalizer_of("a.b"));
        let long = "x".repeat(253);
        for id in [
            "inst-a",
            "aigw-system/aigw",
            "ns/Ünïcode",
            "/",
            "-a-",
            &long,
        ] {
            let finalizer = finalizer_of(id);
            let name = finalizer.strip_prefix("aigw.io/").unwrap();
            let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
            assert!(
                name.len() <= 63
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                    && edge(name.chars().next())
                    && edge(name.chars().last()),
                "{id:?}: {finalizer}"
            );
        }
    }

    #[test]
    fn the_shared_finalizer_waits_only_for_the_installation_whose_object_it_is() {
        let a = Installation::new("inst-a", None).unwrap();
        let b = Installation::new("inst-b", None).unwrap();
        let mut object = recorded(Some("inst-b"), "inst-a");
        object.metadata.finalizers = Some(vec![FINALIZER.into(), "other.io/x".into()]);
        assert_eq!(a.finalizers_held(&object), vec![FINALIZER]);
        assert!(!b.holds(&object));
        object.metadata.finalizers = Some(vec![a.finalizer().into()]);
        assert!(a.holds(&object));
        assert!(!b.holds(&object));
    }
}
