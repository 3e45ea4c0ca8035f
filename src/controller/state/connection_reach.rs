//! Which Connections are in this installation's reach (`--cluster-selector`, claims), as the
//! Connection cache holds them, and which of them changed reach. A relabel changes neither a
//! Connection's generation nor its readiness, so its own reconcile tells no one; an object
//! waiting for its Connection to come back (a deletion held while it was out of reach) is told
//! through this instead, once the cache holds the change.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::watcher;

use crate::resources::Connection;

/// Reach per Connection name, as last stored.
#[derive(Default)]
pub struct ConnectionReach {
    known: HashMap<String, bool>,
    /// A list in progress: the store swaps it in only at its end, so it is compared then.
    listing: HashMap<String, bool>,
    listed_once: bool,
}

impl ConnectionReach {
    /// The Connections whose reach `event` changed, once the cache holds it: one that came or
    /// went (but none of the first list's), or was relabelled in or out of reach (`sees`). A
    /// re-list's Connections are compared at its end, where one it no longer holds is gone.
    pub fn stored(
        &mut self,
        event: &watcher::Event<Connection>,
        sees: impl Fn(&ObjectMeta) -> bool,
    ) -> Vec<String> {
        match event {
            watcher::Event::Apply(c) => {
                let reach = sees(&c.metadata);
                let before = self.known.insert(c.name_any(), reach);
                match before == Some(reach) {
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
                self.listing.insert(c.name_any(), sees(&c.metadata));
                Vec::new()
            }
            watcher::Event::InitDone => {
                let listed = std::mem::take(&mut self.listing);
                let mut changed = Vec::new();
                if std::mem::replace(&mut self.listed_once, true) {
                    let gone = self.known.keys().filter(|n| !listed.contains_key(*n));
                    let moved = listed
                        .iter()
                        .filter(|(name, reach)| self.known.get(*name) != Some(*reach))
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
    }
}
