//! The names the live resources of a cluster already have, for an export read with a kubeconfig.
//!
//! An exported manifest adopts its remote object. When a live resource already manages that
//! object, the manifest takes that resource's namespace and name, so applying it updates that
//! resource instead of adding a second claimant, which would stall `AlreadyManaged`. A name
//! made up for an object no live resource manages never reuses a live resource's name: applying
//! it would point that resource at another remote object.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::gitops::GitopsError;
use crate::resources::{
    ClusterGuardrail, Config, Deployment, Guardrail, Integration, McpIntegration, McpServer,
    Provider, RateLimitsPolicy, UsageLimitsPolicy, Workspace,
};

/// Where a live resource is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveName {
    pub namespace: Option<String>,
    pub name: String,
}

/// The live resources of each exported kind: by the remote objects they manage, and the names
/// they take.
#[derive(Debug, Clone, Default)]
pub struct LiveNames {
    /// (kind, remote id) to the resource whose status records it (its slug where it records no
    /// id), of those on the Connection `default`, the one an exported manifest names.
    owners: HashMap<(&'static str, String), LiveName>,
    /// Every live resource's (kind, namespace, name).
    taken: HashSet<(&'static str, Option<String>, String)>,
}

impl LiveNames {
    /// The live resource of `kind` that manages the remote object known by any of `keys`.
    pub fn owner(&self, kind: &str, keys: &[&str]) -> Option<&LiveName> {
        let kind = kind_of(kind)?;
        keys.iter()
            .filter(|key| !key.is_empty())
            .find_map(|key| self.owners.get(&(kind, key.to_string())))
    }

    /// True when a live resource of `kind` is called `name` in `namespace`: in any namespace
    /// when `namespace` is `None` (where kubectl applies it is not known).
    pub fn taken(&self, kind: &str, namespace: Option<&str>, name: &str) -> bool {
        let Some(kind) = kind_of(kind) else {
            return false;
        };
        self.taken.iter().any(|(k, ns, n)| {
            *k == kind
                && n == name
                && (namespace.is_none() || ns.is_none() || ns.as_deref() == namespace)
        })
    }

    /// Adds the live resource `live` of `kind`, whose status records the remote keys
    /// `recorded` (its id, else its slug; empty when it manages nothing yet) and which reaches
    /// the API through the Connection `connection`.
    ///
    /// Only a status counts: a spec that names a slug (an adoption) is a claim the operator may
    /// have refused, any tenant can write one, and a manifest exported under its name would
    /// hand the object to that tenant's namespace. Only the Connection `default` counts: an
    /// exported manifest names no Connection, and applying it under the name of a resource on
    /// another one would move that resource to `default`. Between two resources recording one
    /// key, the first by namespace and name, so the choice does not depend on the list's order.
    pub fn add(
        &mut self,
        kind: &'static str,
        live: LiveName,
        recorded: &[String],
        connection: &str,
    ) {
        self.taken
            .insert((kind, live.namespace.clone(), live.name.clone()));
        if connection != "default" {
            return;
        }
        for key in recorded.iter().filter(|key| !key.is_empty()) {
            self.owners
                .entry((kind, key.clone()))
                .and_modify(|held| {
                    if (&live.namespace, &live.name) < (&held.namespace, &held.name) {
                        *held = live.clone();
                    }
                })
                .or_insert_with(|| live.clone());
        }
    }
}

/// The kinds an export writes, by the name its manifests carry.
const KINDS: [&str; 11] = [
    "Config",
    "Deployment",
    "Guardrail",
    "ClusterGuardrail",
    "RateLimitsPolicy",
    "UsageLimitsPolicy",
    "Provider",
    "Integration",
    "McpIntegration",
    "McpServer",
    "Workspace",
];

fn kind_of(kind: &str) -> Option<&'static str> {
    KINDS.iter().copied().find(|k| *k == kind)
}

/// What identifies a live resource and the remote object it manages. Every field is optional:
/// a kind without one leaves it out.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Identity {
    metadata: IdentityMeta,
    spec: IdentitySpec,
    status: Keys,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct IdentitySpec {
    connection_ref: Option<crate::resources::common::ConnectionRef>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct IdentityMeta {
    name: String,
    namespace: Option<String>,
}

/// The remote keys a status records.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Keys {
    slug: Option<String>,
    id: Option<String>,
}

impl Keys {
    /// The id (an organisation's slugs may be another's too; its ids are unique), else the slug.
    fn recorded(self) -> Vec<String> {
        self.id.or(self.slug).into_iter().collect()
    }
}

/// Every live resource of the kinds an export writes. A resource too deep to decode whole is
/// read for these fields alone; it does not fail the list.
pub async fn live_names(kube: &kube::Client) -> Result<LiveNames, GitopsError> {
    let mut names = LiveNames::default();
    add_kind::<Config>(kube, "Config", &mut names).await?;
    add_kind::<Deployment>(kube, "Deployment", &mut names).await?;
    add_kind::<Guardrail>(kube, "Guardrail", &mut names).await?;
    add_kind::<ClusterGuardrail>(kube, "ClusterGuardrail", &mut names).await?;
    add_kind::<RateLimitsPolicy>(kube, "RateLimitsPolicy", &mut names).await?;
    add_kind::<UsageLimitsPolicy>(kube, "UsageLimitsPolicy", &mut names).await?;
    add_kind::<Provider>(kube, "Provider", &mut names).await?;
    add_kind::<Integration>(kube, "Integration", &mut names).await?;
    add_kind::<McpIntegration>(kube, "McpIntegration", &mut names).await?;
    add_kind::<McpServer>(kube, "McpServer", &mut names).await?;
    add_kind::<Workspace>(kube, "Workspace", &mut names).await?;
    Ok(names)
}

async fn add_kind<K>(
    kube: &kube::Client,
    kind: &'static str,
    names: &mut LiveNames,
) -> Result<(), GitopsError>
where
    K: kube::Resource<DynamicType = ()> + serde::Serialize + DeserializeOwned + Clone + Debug,
{
    let (objects, unreadable) = crate::resources::readable::list_readable::<K>(kube, None)
        .await
        .map_err(|e| GitopsError::kube(format!("failed to list {kind}s"), e))?;
    let decoded = objects
        .iter()
        .filter_map(|object| serde_json::from_value(serde_json::to_value(object).ok()?).ok());
    let read_in_part = unreadable.iter().filter_map(|u| u.part::<Identity>().ok());
    for found in decoded.chain(read_in_part) {
        let Identity {
            metadata,
            spec,
            status,
        } = found;
        let live = LiveName {
            namespace: metadata.namespace,
            name: metadata.name,
        };
        let connection = spec.connection_ref.unwrap_or_default().name;
        names.add(kind, live, &status.recorded(), &connection);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(namespace: Option<&str>, name: &str) -> LiveName {
        LiveName {
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    fn keys(keys: &[&str]) -> Vec<String> {
        keys.iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn a_status_on_the_default_connection_owns_what_it_records_whatever_the_order() {
        for order in [[0, 1, 2], [2, 1, 0]] {
            let mut names = LiveNames::default();
            let candidates = [
                (at(Some("b"), "x"), keys(&["id-1"]), "default"),
                (at(Some("a"), "y"), keys(&["id-1"]), "default"),
                (at(Some("0"), "z"), keys(&["id-1"]), "prod"),
            ];
            for i in order {
                let (live, recorded, connection) = candidates[i].clone();
                names.add("Config", live, &recorded, connection);
            }
            assert_eq!(
                names.owner("Config", &["pc-1", "id-1"]),
                Some(&at(Some("a"), "y"))
            );
            assert_eq!(names.owner("Deployment", &["id-1"]), None);
            assert_eq!(names.owner("Config", &["pc-1"]), None);
            // Another Connection's resource owns nothing, but its name is taken.
            assert!(names.taken("Config", Some("0"), "z"));
        }
    }

    #[test]
    fn a_spec_naming_a_slug_owns_nothing() {
        let mut names = LiveNames::default();
        // What `add_kind` passes for a resource whose status records nothing yet.
        names.add("Config", at(Some("a"), "intruder"), &[], "default");
        assert_eq!(names.owner("Config", &["pc-1"]), None);
        assert!(names.taken("Config", Some("a"), "intruder"));
    }

    #[test]
    fn a_status_records_its_id_rather_than_its_slug() {
        let both = Keys {
            slug: Some("pc-1".into()),
            id: Some("id-1".into()),
        };
        assert_eq!(both.recorded(), keys(&["id-1"]));
        let slug = Keys {
            slug: Some("ws-1".into()),
            id: None,
        };
        assert_eq!(slug.recorded(), keys(&["ws-1"]));
    }

    #[test]
    fn a_name_is_taken_in_its_namespace_or_anywhere_when_the_namespace_is_unknown() {
        let mut names = LiveNames::default();
        names.add("Config", at(Some("team-a"), "routing"), &[], "default");
        names.add("Workspace", at(None, "prod"), &[], "default");
        assert!(names.taken("Config", Some("team-a"), "routing"));
        assert!(!names.taken("Config", Some("team-b"), "routing"));
        assert!(names.taken("Config", None, "routing"));
        assert!(!names.taken("Deployment", None, "routing"));
        assert!(names.taken("Workspace", Some("team-b"), "prod"));
        assert!(!names.taken("Unknown", None, "routing"));
    }
}
