//! Which Connections are in this installation's reach (`--cluster-selector`, claims), as the
//! Connection cache holds them, and which of them changed what their users wait on: their
//! reach, their spec (generation) or whether they work (`Ready`, written by the replica that
//! reconciles them). Told from every replica's cache, so with `--shards` the users on every
//! replica hear it, not only those beside the Connection's reconcile; a relabel changes neither
//! generation nor readiness, and an object waiting for its Connection to come back (a deletion
//! held while it was out of reach) is told through this too, once the cache holds the change.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::watcher;

use crate::resources::Connection;
use crate::resources::common::{condition::READY, find_condition};

/// What a Connection's users wait on: in reach, its generation, its `Ready` status.
type Shown = (bool, Option<i64>, Option<String>);

/// What each Connection showed, by name, as last stored.
#[derive(Default)]
pub struct ConnectionReach {
    known: HashMap<String, Shown>,
    /// A list in progress: the store swaps it in only at its end, so it is compared then.
    listing: HashMap<String, Shown>,
    listed_once: bool,
}

fn shown(c: &Connection, sees: &impl Fn(&ObjectMeta) -> bool) -> Shown {
    let ready = c
        .status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, READY))
        .map(|c| c.status.clone());
    (sees(&c.metadata), c.metadata.generation, ready)
}

impl ConnectionReach {
    /// The Connections whose reach, generation or readiness `event` changed, once the cache
    /// holds it: one that came or went (but none of the first list's), or changed what its
    /// users wait on (`sees`: in reach). A re-list's Connections are compared at its end, where
    /// one it no longer holds is gone.
    pub fn stored(
        &mut self,
        event: &watcher::Event<Connection>,
        sees: impl Fn(&ObjectMeta) -> bool,
    ) -> Vec<String> {
        match event {
            watcher::Event::Apply(c) => {
                let now = shown(c, &sees);
                let before = self.known.insert(c.name_any(), now.clone());
                match before == Some(now) {
                    true => Vec::new(),
                    false => vec![c.name_any()],
                }
            }
            watcher::Event::Delete(c) => match self.known.remove(&c.name_any()) {
                Some(_) => vec![c.name_any()],
                None => Vec::new(),
            },
            watcher::Event::Init => {
                self.listing.clear();
                Vec::new()
            }
            watcher::Event::InitApply(c) => {
                self.listing.insert(c.name_any(), shown(c, &sees));
                Vec::new()
            }
            watcher::Event::InitDone => {
                let listed = std::mem::take(&mut self.listing);
                let mut changed = Vec::new();
                if std::mem::replace(&mut self.listed_once, true) {
                    let gone = self.known.keys().filter(|n| !listed.contains_key(*n));
                    let moved = listed
                        .iter()
                        .filter(|(name, now)| self.known.get(*name) != Some(*now))
                        .map(|(name, _)| name);
                    changed.extend(gone.chain(moved).cloned());
                    changed.sort();
                }
                self.known = listed;
                changed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(name: &str, label: &str) -> Connection {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
            "metadata": {"name": name, "labels": {"team": label}},
            "spec": {"managementUrl": "http://m", "gatewayUrl": "http://g",
                     "auth": {"bearerToken": {"secretRef": {"namespace": "n", "name": "s", "key": "k"}}}}
        }))
        .unwrap()
    }

    fn ours(meta: &ObjectMeta) -> bool {
        meta.labels
            .as_ref()
            .and_then(|l| l.get("team"))
            .map(String::as_str)
            == Some("a")
    }

    #[test]
    fn changes_of_reach_are_told_and_a_relist_is_compared_at_its_end() {
        use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
        let mut reach = ConnectionReach::default();
        let mut told = |event| reach.stored(&event, ours);
        // The first list tells nothing.
        assert!(told(Init).is_empty());
        assert!(told(InitApply(connection("x", "a"))).is_empty());
        assert!(told(InitApply(connection("y", "a"))).is_empty());
        assert!(told(InitDone).is_empty());
        // A relabel out of reach and back; a change that keeps the reach tells nothing.
        assert_eq!(told(Apply(connection("x", "b"))), ["x"]);
        assert!(told(Apply(connection("x", "b"))).is_empty());
        assert_eq!(told(Apply(connection("x", "a"))), ["x"]);
        // A new Connection, and one deleted whatever its reach.
        assert_eq!(told(Apply(connection("z", "b"))), ["z"]);
        assert_eq!(told(Delete(connection("z", "b"))), ["z"]);
        // A re-list: nothing is told before its end; then y relabelled and x gone meanwhile.
        assert!(told(Init).is_empty());
        assert!(told(InitApply(connection("y", "b"))).is_empty());
        assert_eq!(told(InitDone), ["x", "y"]);
        // A spec change (generation) and a readiness change (written by whichever replica
        // reconciles it) are told; the same status again is not.
        let mut y = connection("y", "b");
        y.metadata.generation = Some(2);
        assert_eq!(told(Apply(y.clone())), ["y"]);
        y.status = serde_json::from_value(serde_json::json!({"conditions": [{
            "type": "Ready", "status": "True", "reason": "TokenObtained", "message": "",
            "lastTransitionTime": "2026-11-30T00:00:00Z"}]}))
        .unwrap();
        assert_eq!(told(Apply(y.clone())), ["y"]);
        assert!(told(Apply(y)).is_empty());
    }
}
