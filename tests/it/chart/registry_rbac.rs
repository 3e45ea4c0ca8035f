//! The chart's RBAC as `helm template` renders it names exactly what the kind registry
//! (`aigw::registry`) says the operator needs, and the roles for a namespace's people name its
//! namespaced kinds. Rendering runs helm (built by `hack/chart-check.sh` when missing), which is
//! why these checks sit here and not among the registry's unit tests.

use std::collections::{BTreeMap, BTreeSet};

use aigw::registry::{GROUP, KINDS, Kind, grants};
use serde_json::Value;

use crate::support::chart::render_templates;

/// The operator's RBAC and the user roles, rendered with `sets`.
fn render(sets: &[&str]) -> Vec<Value> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let templates = ["templates/rbac.yaml", "templates/user-roles.yaml"];
    render_templates("aigw", "aigw-system", &templates, &sets)
}

/// The resources and verbs the registry grants for the kinds whose scope is `namespaced`.
fn expected(namespaced: bool) -> BTreeMap<String, BTreeSet<String>> {
    let mut expected = BTreeMap::<String, BTreeSet<String>>::new();
    for grant in grants(namespaced) {
        let verbs = grant.verbs.iter().map(|v| v.to_string());
        expected.entry(grant.resource).or_default().extend(verbs);
    }
    expected
}

/// The strings of a JSON array (none for anything else).
fn strings(value: &Value) -> Vec<String> {
    let items = value.as_array().into_iter().flatten();
    items
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// The aigw-group rules of the rendered objects of `kind` (ClusterRole or Role), as
/// resource -> verbs, and the CRD names granted by name.
fn aigw_rules(
    objects: &[Value],
    kind: &str,
) -> (BTreeMap<String, BTreeSet<String>>, BTreeSet<String>) {
    let mut rules = BTreeMap::<String, BTreeSet<String>>::new();
    let mut crd_names = BTreeSet::new();
    let operators = objects
        .iter()
        .filter(|o| o["kind"] == kind && !for_users(o) && !own_namespace(o));
    for rule in operators.flat_map(|o| o["rules"].as_array().into_iter().flatten()) {
        let resources = strings(&rule["resources"]);
        if strings(&rule["apiGroups"]).iter().any(|g| g == GROUP) {
            for resource in resources {
                let verbs = strings(&rule["verbs"]);
                rules.entry(resource).or_default().extend(verbs);
            }
        } else if resources == ["customresourcedefinitions"] {
            crd_names.extend(strings(&rule["resourceNames"]));
        }
    }
    (rules, crd_names)
}

/// The Role in the operator's own namespace (its hash key, and the dry-run probe of the
/// admission policies), not one of a watched namespace.
fn own_namespace(object: &Value) -> bool {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    object["kind"] == "Role" && name.ends_with("-hash-key")
}

/// One of the chart's roles for a namespace's people (`templates/user-roles.yaml`), which
/// Kubernetes aggregates into its user-facing roles: not the operator's.
fn for_users(object: &Value) -> bool {
    let labels = &object["metadata"]["labels"];
    ["edit", "view"]
        .iter()
        .any(|role| labels[format!("rbac.authorization.k8s.io/aggregate-to-{role}")] == "true")
}

/// The user roles name exactly the registry's namespaced kinds, without any subresource.
#[test]
fn the_user_roles_grant_the_namespaced_kinds_and_no_status() {
    let users: Vec<Value> = render(&[]).into_iter().filter(for_users).collect();
    assert_eq!(users.len(), 2, "an edit and a view ClusterRole");
    let namespaced: BTreeSet<String> = KINDS
        .iter()
        .filter(|k| k.namespaced)
        .map(|k| k.plural.to_string())
        .collect();
    for role in users {
        let resources: BTreeSet<String> = strings(&role["rules"][0]["resources"])
            .into_iter()
            .collect();
        assert_eq!(resources, namespaced, "{}", role["metadata"]["name"]);
        assert_eq!(role["rules"].as_array().map(Vec::len), Some(1));
    }
}

/// The chart's RBAC on the aigw group names exactly the registry's resources and subresources
/// with the verbs the registry gives them: cluster-wide (one ClusterRole) and with
/// `watchNamespaces` (the namespaced rules move to a Role per namespace).
#[test]
fn chart_rbac_grants_exactly_the_registrys_resources() {
    let crd_names: BTreeSet<String> = KINDS.iter().map(Kind::crd_name).collect();

    let cluster_wide = render(&[]);
    let (rules, names) = aigw_rules(&cluster_wide, "ClusterRole");
    let mut all = expected(false);
    all.extend(expected(true));
    assert_eq!(rules, all, "cluster-wide ClusterRole");
    assert_eq!(names, crd_names, "the CRDs the ClusterRole may get");

    let watched = render(&["watchNamespaces={team-a}"]);
    let (rules, names) = aigw_rules(&watched, "ClusterRole");
    assert_eq!(rules, expected(false), "ClusterRole with watchNamespaces");
    assert_eq!(names, crd_names);
    let (rules, _) = aigw_rules(&watched, "Role");
    assert_eq!(rules, expected(true), "the watched namespace's Role");

    // In its own namespace the operator may create Configs, for the dry-run probe of the
    // admission policies, and nothing else of the aigw group.
    for rendered in [&cluster_wide, &watched] {
        let own: Vec<&Value> = rendered.iter().filter(|o| own_namespace(o)).collect();
        assert_eq!(own.len(), 1, "one Role in the operator's own namespace");
        let aigw: Vec<&Value> = own[0]["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| strings(&r["apiGroups"]).iter().any(|g| g == GROUP))
            .collect();
        let granted: Vec<(Vec<String>, Vec<String>)> = aigw
            .iter()
            .map(|r| (strings(&r["resources"]), strings(&r["verbs"])))
            .collect();
        assert_eq!(
            granted,
            [(vec!["configs".to_string()], vec!["create".to_string()])]
        );
    }
}
