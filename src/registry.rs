//! The kinds aigw serves, in one list ([`KINDS`]). What is per kind elsewhere comes from it or
//! is checked against it: the CRDs (`aigw crds`, `crds/`), the census, the controllers, the
//! chart's RBAC (its templates make the rules from the CRDs' [`ROLE_ANNOTATION`] and
//! [`OWNS_SECRETS_ANNOTATION`]; `tests/it/chart/registry_rbac.rs` checks the rendering) and its
//! README table (tests below), `hack/image.sh` (which compares the image's `aigw crds` with `crds/`), `hack/health` (which reads
//! its kinds from `crds/`) and the per-kind Argo CD form (`aigw argocd-cm --per-kind`,
//! [`crate::argocd`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::controller::Context;
use crate::controller::kinds::{api_key, config_refs, guardrail, integration, provider};
use crate::controller::kinds::{mcp_integration, mcp_server, secret_reference, workspace};
use crate::controller::process::Spawner;
use crate::controller::runtime::census;
use crate::controller::state::claims::{StoreEntry, store_of};
use crate::resources::{
    ApiKey, ClusterGuardrail, Config, ConfigRollout, Connection, Deployment, Guardrail,
    Integration, McpIntegration, McpServer, Provider, RateLimitsPolicy, SecretReference,
    UsageLimitsPolicy, Workspace,
};

/// The API group of every kind.
pub const GROUP: &str = "aigw.io";

/// What the operator does with a kind's objects, which decides the RBAC it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Reconciled against the management API: read, watched, patched (the installation's
    /// finalizer `aigw.io/finalizer.<id>`, the create intent), status written.
    Managed,
    /// Read and watched, status written; never patched (a Connection).
    Read,
    /// Read, watched and patched (its finalizer), status written, and driving other kinds'
    /// objects rather than the management API (a ConfigRollout, which annotates ApiKeys and
    /// only reads telemetry).
    Driven,
}

/// One kind aigw serves.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// `kind`, e.g. `UsageLimitsPolicy`.
    pub kind: &'static str,
    /// The resource name, e.g. `usagelimitspolicies`.
    pub plural: &'static str,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
    /// Its file under `crds/` (and `charts/aigw/crds/`).
    pub file: &'static str,
    /// Its CRD as the Rust types define it.
    pub crd: fn() -> CustomResourceDefinition,
    pub role: Role,
    /// It owns Secrets through owner references with `blockOwnerDeletion`, which needs `update`
    /// on its `finalizers` subresource where OwnerReferencesPermissionEnforcement is on.
    pub owns_secrets: bool,
    /// Sets its resource gauges from the watch caches (a managed kind).
    pub census: Option<fn(&Context)>,
    /// Makes its watch caches and claim index in [`Stores`](crate::controller::state::claims::Stores)
    /// (a managed kind; the Connections' are `Stores::connections`).
    pub store: Option<fn() -> StoreEntry>,
    /// The spec field naming the remote object it takes, if one does: `aigw validate` refuses
    /// two manifests naming one.
    pub spec_id: Option<SpecId>,
    /// Starts its controllers (one per watched namespace, or one for a cluster-scoped kind).
    pub controllers: fn(&mut Spawner),
}

/// A spec field naming a remote object, and the kind among whose objects that name is unique
/// (itself, or the kind whose remote objects it shares: a ClusterGuardrail's slug is a
/// guardrail's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecId {
    /// The field under `spec`, e.g. `policyId`.
    pub field: &'static str,
    pub among: &'static str,
}

impl Kind {
    /// `<plural>.aigw.io`, the CRD's name.
    pub fn crd_name(&self) -> String {
        format!("{}.{GROUP}", self.plural)
    }
}

/// Every kind, in the order of `aigw crds` (by file name).
pub static KINDS: &[Kind] = &[
    Kind {
        kind: "ApiKey",
        plural: "apikeys",
        namespaced: true,
        file: "apikey.yaml",
        crd: ApiKey::crd,
        role: Role::Managed,
        owns_secrets: true,
        census: Some(census::record::<ApiKey>),
        store: Some(store_of::<ApiKey>),
        spec_id: None,
        controllers: |s| s.listed::<ApiKey>(Some(api_key::watch_inputs)),
    },
    Kind {
        kind: "ClusterGuardrail",
        plural: "clusterguardrails",
        namespaced: false,
        file: "clusterguardrail.yaml",
        crd: ClusterGuardrail::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<ClusterGuardrail>),
        store: Some(store_of::<ClusterGuardrail>),
        spec_id: Some(SpecId {
            field: "slug",
            among: "Guardrail",
        }),
        controllers: |s| {
            s.listed::<ClusterGuardrail>(Some(guardrail::watch_inputs::<ClusterGuardrail>))
        },
    },
    Kind {
        kind: "Config",
        plural: "configs",
        namespaced: true,
        file: "config.yaml",
        crd: Config::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<Config>),
        store: Some(store_of::<Config>),
        spec_id: Some(SpecId {
            field: "slug",
            among: "Config",
        }),
        controllers: |s| s.listed::<Config>(Some(config_refs::watch_inputs)),
    },
    Kind {
        kind: "ConfigRollout",
        plural: "configrollouts",
        namespaced: true,
        file: "configrollout.yaml",
        crd: ConfigRollout::crd,
        role: Role::Driven,
        owns_secrets: false,
        census: None,
        store: None,
        spec_id: None,
        controllers: |s| s.rollouts(),
    },
    Kind {
        kind: "Connection",
        plural: "connections",
        namespaced: false,
        file: "connection.yaml",
        crd: Connection::crd,
        role: Role::Read,
        owns_secrets: false,
        census: None,
        store: None,
        spec_id: None,
        controllers: |s| s.connections(),
    },
    Kind {
        kind: "Deployment",
        plural: "deployments",
        namespaced: true,
        file: "deployment.yaml",
        crd: Deployment::crd,
        role: Role::Managed,
        owns_secrets: true,
        census: Some(census::record::<Deployment>),
        store: Some(store_of::<Deployment>),
        spec_id: Some(SpecId {
            field: "deploymentId",
            among: "Deployment",
        }),
        controllers: |s| s.read::<Deployment>(true, None),
    },
    Kind {
        kind: "Guardrail",
        plural: "guardrails",
        namespaced: true,
        file: "guardrail.yaml",
        crd: Guardrail::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<Guardrail>),
        store: Some(store_of::<Guardrail>),
        spec_id: Some(SpecId {
            field: "slug",
            among: "Guardrail",
        }),
        controllers: |s| s.listed::<Guardrail>(Some(guardrail::watch_inputs::<Guardrail>)),
    },
    Kind {
        kind: "Integration",
        plural: "integrations",
        namespaced: false,
        file: "integration.yaml",
        crd: Integration::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<Integration>),
        store: Some(store_of::<Integration>),
        spec_id: Some(SpecId {
            field: "slug",
            among: "Integration",
        }),
        controllers: |s| s.read::<Integration>(false, Some(integration::watch_inputs)),
    },
    Kind {
        kind: "McpIntegration",
        plural: "mcpintegrations",
        namespaced: false,
        file: "mcpintegration.yaml",
        crd: McpIntegration::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<McpIntegration>),
        store: Some(store_of::<McpIntegration>),
        spec_id: Some(SpecId {
            field: "slug",
            among: "McpIntegration",
        }),
        controllers: |s| s.read::<McpIntegration>(false, Some(mcp_integration::watch_inputs)),
    },
    Kind {
        kind: "McpServer",
        plural: "mcpservers",
        namespaced: true,
        file: "mcpserver.yaml",
        crd: McpServer::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<McpServer>),
        store: Some(store_of::<McpServer>),
        spec_id: Some(SpecId {
            field: "slug",
            among: "McpServer",
        }),
        controllers: |s| s.read::<McpServer>(false, Some(mcp_server::watch_inputs)),
    },
    Kind {
        kind: "Provider",
        plural: "providers",
        namespaced: true,
        file: "provider.yaml",
        crd: Provider::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<Provider>),
        store: Some(store_of::<Provider>),
        spec_id: Some(SpecId {
            field: "slug",
            among: "Provider",
        }),
        controllers: |s| s.read::<Provider>(false, Some(provider::watch_inputs)),
    },
    Kind {
        kind: "RateLimitsPolicy",
        plural: "ratelimitspolicies",
        namespaced: true,
        file: "ratelimitspolicy.yaml",
        crd: RateLimitsPolicy::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<RateLimitsPolicy>),
        store: Some(store_of::<RateLimitsPolicy>),
        spec_id: Some(SpecId {
            field: "policyId",
            among: "RateLimitsPolicy",
        }),
        controllers: |s| s.listed::<RateLimitsPolicy>(None),
    },
    Kind {
        kind: "SecretReference",
        plural: "secretreferences",
        namespaced: false,
        file: "secretreference.yaml",
        crd: SecretReference::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<SecretReference>),
        store: Some(store_of::<SecretReference>),
        spec_id: Some(SpecId {
            field: "slug",
            among: "SecretReference",
        }),
        controllers: |s| s.read::<SecretReference>(false, Some(secret_reference::watch_inputs)),
    },
    Kind {
        kind: "UsageLimitsPolicy",
        plural: "usagelimitspolicies",
        namespaced: true,
        file: "usagelimitspolicy.yaml",
        crd: UsageLimitsPolicy::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<UsageLimitsPolicy>),
        store: Some(store_of::<UsageLimitsPolicy>),
        spec_id: Some(SpecId {
            field: "policyId",
            among: "UsageLimitsPolicy",
        }),
        controllers: |s| s.listed::<UsageLimitsPolicy>(None),
    },
    Kind {
        kind: "Workspace",
        plural: "workspaces",
        namespaced: false,
        file: "workspace.yaml",
        crd: Workspace::crd,
        role: Role::Managed,
        owns_secrets: false,
        census: Some(census::record::<Workspace>),
        store: Some(store_of::<Workspace>),
        spec_id: Some(SpecId {
            field: "slug",
            among: "Workspace",
        }),
        controllers: |s| s.read::<Workspace>(false, Some(workspace::watch_referrers)),
    },
];

/// The kind named `kind`.
pub fn find(kind: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.kind == kind)
}

/// One RBAC rule on the aigw group: resources and verbs, as the chart must grant them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// `<plural>` or `<plural>/<subresource>`.
    pub resource: String,
    pub verbs: Vec<&'static str>,
}

/// What the operator needs on the aigw group for the kinds whose scope is `namespaced`: the
/// ClusterRole grants the cluster-scoped ones always, the namespaced ones a Role per watched
/// namespace (or the ClusterRole without `watchNamespaces`).
pub fn grants(namespaced: bool) -> Vec<Grant> {
    let mut grants = Vec::new();
    for kind in KINDS.iter().filter(|k| k.namespaced == namespaced) {
        let verbs = match kind.role {
            Role::Managed | Role::Driven => vec!["get", "list", "watch", "patch"],
            Role::Read => vec!["get", "list", "watch"],
        };
        grants.push(Grant {
            resource: kind.plural.to_string(),
            verbs,
        });
        grants.push(Grant {
            resource: format!("{}/status", kind.plural),
            verbs: vec!["patch"],
        });
        if kind.owns_secrets {
            grants.push(Grant {
                resource: format!("{}/finalizers", kind.plural),
                verbs: vec!["update"],
            });
        }
    }
    grants.sort();
    grants
}

/// The annotation on a kind's CRD saying what the operator does with its objects
/// ([`Role`]: `managed` or `read`). The chart's RBAC is made from the CRDs under its `crds/`
/// with it, so a new kind needs no edit of the chart's templates.
pub const ROLE_ANNOTATION: &str = "aigw.io/operator-role";
/// The annotation on a kind's CRD whose objects own Secrets ([`Kind::owns_secrets`]): `"true"`.
pub const OWNS_SECRETS_ANNOTATION: &str = "aigw.io/owns-secrets";

/// Every CRD aigw serves, with the file name it has under `crds/`, annotated with what the
/// chart's RBAC is made from ([`ROLE_ANNOTATION`], [`OWNS_SECRETS_ANNOTATION`]).
pub fn crds() -> Vec<(&'static str, CustomResourceDefinition)> {
    KINDS
        .iter()
        .map(|k| {
            let mut crd = (k.crd)();
            let annotations = crd
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            let role = match k.role {
                Role::Managed => "managed",
                Role::Read => "read",
                Role::Driven => "driven",
            };
            annotations.insert(ROLE_ANNOTATION.into(), role.into());
            if k.owns_secrets {
                annotations.insert(OWNS_SECRETS_ANNOTATION.into(), "true".into());
            }
            (k.file, crd)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    fn root() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    /// Each entry says of its kind what the kind's CRD says.
    #[test]
    fn every_entry_matches_its_crd() {
        let mut files = BTreeSet::new();
        for kind in KINDS {
            let crd = (kind.crd)();
            assert_eq!(crd.spec.names.kind, kind.kind);
            assert_eq!(crd.spec.names.plural, kind.plural, "{}", kind.kind);
            assert_eq!(crd.spec.group, GROUP, "{}", kind.kind);
            assert_eq!(crd.metadata.name.as_deref(), Some(&*kind.crd_name()));
            let scope = if kind.namespaced {
                "Namespaced"
            } else {
                "Cluster"
            };
            assert_eq!(crd.spec.scope, scope, "{}", kind.kind);
            assert_eq!(kind.file, format!("{}.yaml", kind.kind.to_lowercase()));
            assert_eq!(kind.census.is_some(), kind.role == Role::Managed);
            assert_eq!(kind.store.is_some(), kind.role == Role::Managed);
            assert!(files.insert(kind.file), "{} twice", kind.kind);
            if let Some(id) = kind.spec_id {
                let crd = serde_json::to_value(&crd).unwrap();
                let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                    ["properties"];
                assert!(
                    spec[id.field].is_object(),
                    "{}: spec.{} is not in its CRD",
                    kind.kind,
                    id.field
                );
                assert!(
                    find(id.among).is_some(),
                    "{}: among {}",
                    kind.kind,
                    id.among
                );
            }
        }
        let sorted: Vec<_> = files.iter().copied().collect();
        let listed: Vec<_> = KINDS.iter().map(|k| k.file).collect();
        assert_eq!(
            listed, sorted,
            "KINDS is kept in file order (the order of `aigw crds`)"
        );
    }

    /// `crds/` holds one file per kind of the registry, and nothing else but the admission
    /// policies.
    #[test]
    fn crds_dir_holds_the_registrys_kinds() {
        let mut on_disk: Vec<String> = std::fs::read_dir(root().join("crds"))
            .expect("crds/")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|f| f != crate::resources::ADMISSION_POLICIES_FILE)
            .collect();
        on_disk.sort();
        let listed: Vec<_> = KINDS.iter().map(|k| k.file.to_string()).collect();
        assert_eq!(on_disk, listed);
    }

    fn expected(namespaced: bool) -> BTreeMap<String, BTreeSet<String>> {
        grants(namespaced)
            .into_iter()
            .map(|g| (g.resource, g.verbs.iter().map(|v| v.to_string()).collect()))
            .collect()
    }

    /// The chart README's RBAC tables name, row by row, the registry's resources (a row of the
    /// aigw group lists resources, `…/status` standing for the status of each resource listed
    /// above it), and it counts no CRDs (it once said "the four CRDs" with ten of them).
    #[test]
    fn chart_readme_rbac_tables_match_the_registry() {
        let readme = std::fs::read_to_string(root().join("charts/aigw/README.md")).unwrap();
        for count in ["four", "five", "six", "seven", "eight", "nine", "ten"] {
            assert!(
                !readme.contains(&format!("the {count} CRDs"))
                    && !readme.contains(&format!("the {count} aigw CRDs")),
                "charts/aigw/README.md counts the CRDs (`the {count} …`): it goes stale with the next kind"
            );
        }
        let (cluster, namespaced) = readme
            .split_once("Namespaced rules")
            .expect("the README's namespaced rules table");
        for (text, namespaced) in [(cluster, false), (namespaced, true)] {
            let mut table = BTreeMap::<String, BTreeSet<String>>::new();
            let mut plain = Vec::new();
            for row in text.lines().filter(|l| l.starts_with("| `aigw.io` |")) {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                let verbs: BTreeSet<String> =
                    cells[3].split_whitespace().map(str::to_string).collect();
                let resources = cells[2].replace('`', "");
                for resource in resources.split(',').map(str::trim) {
                    let names: Vec<String> = match resource.strip_prefix('…') {
                        Some(sub) => plain.iter().map(|p| format!("{p}{sub}")).collect(),
                        None => vec![resource.to_string()],
                    };
                    for name in names {
                        if !name.contains('/') {
                            plain.push(name.clone());
                        }
                        table.entry(name).or_default().extend(verbs.clone());
                    }
                }
            }
            let scope = if namespaced { "namespaced" } else { "cluster" };
            assert_eq!(
                table,
                expected(namespaced),
                "charts/aigw/README.md, {scope} rules"
            );
        }
    }
}
