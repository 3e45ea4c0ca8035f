//! The resource gauges, counted from the watch caches each time `/metrics` is scraped: how many
//! resources of each kind there are, how many report each condition, and how many have a
//! credential rotation due that has not happened. Counted by kind, never named. Each replica
//! counts the objects it reconciles now: the leader all of them (a standby none, a dry run
//! none), with `--shards` its share. The replicas' counts are disjoint, so a total is their
//! `sum` in either mode (what the chart's alerts and dashboard take).

use crate::controller::Context;
use crate::controller::driver::Managed;
use crate::resources::common::condition::{DRIFTED, PAUSED, READY, RECONCILING, STALLED};
use crate::resources::common::{ManagementPolicy, find_condition};

/// The conditions counted, in the order they are exported.
const CONDITIONS: [&str; 5] = [READY, RECONCILING, STALLED, DRIFTED, PAUSED];

/// What the watch caches say of one kind's resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Census {
    pub resources: i64,
    /// Per condition type, the resources whose condition of that type is `True`.
    pub conditions: [(&'static str, i64); CONDITIONS.len()],
    /// Resources whose rotation is due (or in flight) and not done: counted while deletion is
    /// not under way and aigw may write (`managementPolicy: Observe` never rotates).
    pub rotations_due: i64,
}

/// Counts `objects`.
pub fn count<'a, K: Managed>(objects: impl IntoIterator<Item = &'a K>) -> Census {
    let mut census = Census {
        resources: 0,
        conditions: CONDITIONS.map(|c| (c, 0)),
        rotations_due: 0,
    };
    for object in objects {
        census.resources += 1;
        let conditions = object.conditions();
        for (condition, count) in &mut census.conditions {
            if find_condition(conditions, condition).is_some_and(|c| c.status == "True") {
                *count += 1;
            }
        }
        if rotation_due(object) {
            census.rotations_due += 1;
        }
    }
    census
}

fn rotation_due<K: Managed>(object: &K) -> bool {
    object.meta().deletion_timestamp.is_none()
        && object.management_policy() != ManagementPolicy::Observe
        && object.status().is_some_and(|status| object.due_now(status))
}

/// Sets the resource gauges of every kind, and the lease transitions, from what this replica
/// holds now.
pub fn refresh(ctx: &Context) {
    for kind in crate::registry::KINDS {
        if let Some(record) = kind.census {
            record(ctx);
        }
    }
    if let Some(transitions) = ctx.leadership.lease_transitions() {
        ctx.metrics.set_lease_transitions(transitions);
    }
    if let Some(shards) = ctx.leadership.shards() {
        ctx.metrics.set_shards(shards.members(), shards.handovers());
    }
}

/// Sets the resource gauges of kind `K` (what [`crate::registry::Kind::census`] holds).
pub fn record<K: Managed>(ctx: &Context) {
    let objects = K::stores(&ctx.stores).all();
    // Another installation's objects are counted by it, another replica's share by that one;
    // a dry run, which writes nothing, counts none (the real operator's sum stays its own).
    let ours = |o: &&K| {
        !ctx.dry_run
            && !matches!(
                ctx.installation.claim_on(*o),
                crate::controller::state::installation::Claim::Theirs(_)
            )
            && ctx.leadership.acts_on(o.meta())
    };
    let owned: Vec<&K> = objects.iter().map(AsRef::as_ref).filter(ours).collect();
    ctx.metrics.census(K::KIND, &count(owned.iter().copied()));
    if ctx.leadership.shards().is_some() {
        ctx.metrics
            .shard_objects(K::KIND, owned.len(), objects.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::Metrics;
    use crate::resources::{Config, Deployment};
    use serde_json::{Value, json};

    fn condition(type_: &str, status: &str) -> Value {
        json!({"type": type_, "status": status, "reason": "R", "message": "",
               "lastTransitionTime": "2026-01-01T00:00:00Z"})
    }

    fn config(name: &str, conditions: Vec<Value>) -> Config {
        serde_json::from_value(json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": name, "namespace": "team-a", "generation": 1},
            "spec": {"name": name, "config": {}},
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    /// A Deployment rotated every hour whose next rotation is at `next`, with `status` extra.
    fn rotating(name: &str, next: &str, extra: Value) -> Deployment {
        let mut status = json!({"id": "dep-1", "nextRotationAt": next,
                                "observedRotationTrigger": ""});
        if let (Some(status), Some(extra)) = (status.as_object_mut(), extra.as_object()) {
            status.extend(extra.clone());
        }
        serde_json::from_value(json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "team-a", "generation": 1},
            "spec": {"name": name, "credentialsSecretRef": {"name": format!("{name}-creds")},
                     "rotation": {"interval": "1h"}},
            "status": status
        }))
        .unwrap()
    }

    #[test]
    fn conditions_are_counted_by_type_when_true() {
        let configs = [
            config("ready", vec![condition(READY, "True")]),
            config(
                "stalled",
                vec![condition(READY, "False"), condition(STALLED, "True")],
            ),
            config(
                "drifted",
                vec![condition(READY, "True"), condition(DRIFTED, "True")],
            ),
            config("was-stalled", vec![condition(STALLED, "False")]),
            config("new", vec![]),
        ];
        let census = count(configs.iter());
        assert_eq!(census.resources, 5);
        assert_eq!(
            census.conditions,
            [
                (READY, 2),
                (RECONCILING, 0),
                (STALLED, 1),
                (DRIFTED, 1),
                (PAUSED, 0)
            ]
        );
        assert_eq!(census.rotations_due, 0, "a Config never rotates");
    }

    #[test]
    fn a_rotation_past_its_time_or_in_flight_is_due_unless_observed_or_deleted() {
        let past = "2020-01-01T00:00:00Z";
        let future = "2999-01-01T00:00:00Z";
        let due = rotating("due", past, json!({}));
        let not_yet = rotating("not-yet", future, json!({}));
        let in_flight = rotating("in-flight", future, json!({"pendingRotation": "r-1"}));
        let mut observed = rotating("observed", past, json!({}));
        observed.spec.management_policy = ManagementPolicy::Observe;
        let mut deleted = rotating("deleted", past, json!({}));
        deleted.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        let deployments = [due, not_yet, in_flight, observed, deleted];
        assert_eq!(count(deployments.iter()).rotations_due, 2);
    }

    #[test]
    fn the_gauges_carry_kind_and_condition_never_a_name() {
        let metrics = Metrics::default();
        let configs = [
            config("tenant-secret-name", vec![condition(STALLED, "True")]),
            config("other", vec![condition(READY, "True")]),
        ];
        metrics.census("Config", &count(configs.iter()));
        let text = metrics.encode();
        for line in [
            "aigw_resources{kind=\"Config\"} 2",
            "aigw_resource_conditions{kind=\"Config\",condition=\"Stalled\"} 1",
            "aigw_resource_conditions{kind=\"Config\",condition=\"Ready\"} 1",
            "aigw_resource_conditions{kind=\"Config\",condition=\"Paused\"} 0",
            "aigw_rotations_due{kind=\"Config\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        assert!(!text.contains("tenant-secret-name"));
        // A count that drops is exported as it is now, not as a maximum.
        metrics.census("Config", &count(configs[1..].iter()));
        let text = metrics.encode();
        assert!(
            text.lines()
                .any(|l| l == "aigw_resource_conditions{kind=\"Config\",condition=\"Stalled\"} 0")
        );
    }
}
