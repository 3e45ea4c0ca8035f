//! The live resources of a cluster, for an export read with a kubeconfig.
//!
//! An exported manifest adopts its remote object. An object a live resource manages already is
//! said (applied to that cluster, its manifest would be a second resource adopting it, which
//! stalls `AlreadyManaged`), or with `--skip-managed` left out: the live resource is its
//! manifest, and one exported under its name would overwrite what it says (its Secrets, its
//! management policy, its rotation) with what the API reads back. A name made up for a manifest
//! never reuses a live resource's name: applying it would change that resource instead of
//! adding one. Nor does a placeholder Secret take a live Secret's name: applied, its empty
//! values would overwrite what that Secret holds.

use std::collections::HashMap;
use std::fmt::Debug;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::read_as;
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

impl std::fmt::Display for LiveName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{namespace}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// The live resources of each exported kind: by the remote objects they manage, and the names
/// they take.
#[derive(Debug, Clone, Default)]
pub struct LiveNames {
    /// (kind, remote id) to a resource whose status records that id: the first by namespace
    /// and name, so the answer does not depend on the list's order. Ids, not slugs: an id is
    /// unique across organisations, so a resource on any Connection that records it manages
    /// this very object.
    managers: HashMap<(&'static str, String), LiveName>,
    /// (kind, name) to the namespaces of the live resources of that name (`None`:
    /// cluster-scoped).
    taken: HashMap<(&'static str, String), Vec<Option<String>>>,
}

impl LiveNames {
    /// A live resource of `kind` whose status records the remote id `id`.
    pub fn manager(&self, kind: &'static str, id: &str) -> Option<&LiveName> {
        self.managers.get(&(kind, id.to_string()))
    }

    /// True when a live resource of `kind` is called `name` in `namespace`: in any namespace
    /// when `namespace` is `None` (where kubectl applies it is not known).
    pub fn taken(&self, kind: &'static str, namespace: Option<&str>, name: &str) -> bool {
        let Some(namespaces) = self.taken.get(&(kind, name.to_string())) else {
            return false;
        };
        namespace.is_none()
            || namespaces
                .iter()
                .any(|ns| ns.is_none() || ns.as_deref() == namespace)
    }

    /// Adds the live resource `live` of `kind`, whose status records the remote id `id` (none
    /// yet: it manages nothing). A spec that names a slug to adopt does not count: the operator
    /// may have refused it, and any tenant can write one.
    pub fn add(&mut self, kind: &'static str, live: LiveName, id: Option<&str>) {
        self.taken
            .entry((kind, live.name.clone()))
            .or_default()
            .push(live.namespace.clone());
        let Some(id) = id.filter(|id| !id.is_empty()) else {
            return;
        };
        self.managers
            .entry((kind, id.to_string()))
            .and_modify(|held| {
                if (&live.namespace, &live.name) < (&held.namespace, &held.name) {
                    *held = live.clone();
                }
            })
            .or_insert(live);
    }
}

/// What identifies a live resource and the remote object it manages.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Identity {
    metadata: IdentityMeta,
    status: IdentityStatus,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct IdentityMeta {
    name: String,
    namespace: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct IdentityStatus {
    id: Option<String>,
}

/// The names of the cluster's Secrets, in every namespace, as kind `Secret`, so that no
/// placeholder Secret takes one. Their metadata is listed, not their data, and only names and
/// namespaces are kept (an annotation such as kubectl's last applied configuration may quote
/// a value: it is dropped unread).
pub async fn add_secret_names(
    kube: &kube::Client,
    names: &mut LiveNames,
) -> Result<(), GitopsError> {
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::all(kube.clone());
    let listed = secrets
        .list_metadata(&Default::default())
        .await
        .map_err(|e| GitopsError::kube("failed to list the names of Secrets".to_string(), e))?;
    for secret in listed.items {
        let live = LiveName {
            namespace: secret.metadata.namespace,
            name: secret.metadata.name.unwrap_or_default(),
        };
        names.add("Secret", live, None);
    }
    Ok(())
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
    for found in read_as::<K, Identity>(kube, &format!("{kind}s")).await? {
        let Identity { metadata, status } = found;
        let live = LiveName {
            namespace: metadata.namespace,
            name: metadata.name,
        };
        names.add(kind, live, status.id.as_deref());
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

    #[test]
    fn a_status_that_records_an_id_manages_it_whatever_the_order() {
        for order in [[0, 1, 2], [2, 1, 0]] {
            let mut names = LiveNames::default();
            let candidates = [
                (at(Some("b"), "x"), Some("id-1")),
                (at(Some("a"), "y"), Some("id-1")),
                (at(Some("a"), "intruder"), None),
            ];
            for i in order {
                let (live, id) = candidates[i].clone();
                names.add("Config", live, id);
            }
            assert_eq!(names.manager("Config", "id-1"), Some(&at(Some("a"), "y")));
            assert_eq!(names.manager("Deployment", "id-1"), None);
            assert_eq!(names.manager("Config", "id-2"), None);
            assert_eq!(names.manager("Config", ""), None);
            // One that manages nothing yet still takes its name.
            assert!(names.taken("Config", Some("a"), "intruder"));
        }
    }

    #[test]
    fn a_name_is_taken_in_its_namespace_or_anywhere_when_the_namespace_is_unknown() {
        let mut names = LiveNames::default();
        names.add("Config", at(Some("team-a"), "routing"), None);
        names.add("Workspace", at(None, "prod"), None);
        assert!(names.taken("Config", Some("team-a"), "routing"));
        assert!(!names.taken("Config", Some("team-b"), "routing"));
        assert!(names.taken("Config", None, "routing"));
        assert!(!names.taken("Deployment", None, "routing"));
        assert!(names.taken("Workspace", Some("team-b"), "prod"));
        assert!(!names.taken("Unknown", None, "routing"));
        assert_eq!(at(Some("a"), "y").to_string(), "a/y");
        assert_eq!(at(None, "prod").to_string(), "prod");
    }
}
