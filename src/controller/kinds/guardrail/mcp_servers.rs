//! A guardrail's MCP server mappings (`spec.mcpServers`), kept with it as a sub-resource
//! ([`Verbs::sync_sub_resources`]): the complete set the spec names, compared with what the API
//! lists for the guardrail (`GET …/guardrails/{id}/mcp-servers`) and, when they differ, sent
//! whole in one bulk write (`PUT …/guardrails/{id}/mcp-servers`, which replaces the set: a
//! mapping made outside aigw is removed). Absent, the mappings are the API's; read-only in
//! Observe ([`Verbs::sub_resources_differ`]). A guardrail that names them is read at every drift
//! check ([`crate::controller::driver::Managed::listed_whole`]): its list row does not show them.
//!
//! A workspace guardrail may name only servers of its own workspace, which the API's server
//! list proves before the write (a server's detail does not say its workspace): a namespace
//! cannot put its guardrail on another team's tools.
//!
//! [`Verbs::sync_sub_resources`]: crate::controller::driver::verbs::Verbs::sync_sub_resources
//! [`Verbs::sub_resources_differ`]: crate::controller::driver::verbs::Verbs::sub_resources_differ

use std::collections::BTreeMap;

use crate::api::{
    self, Client, McpServerMapping, McpServerMappingTarget, McpServersListQuery, Reading,
    SyncMcpServerMappingsRequest,
};
use kube::ResourceExt;

use crate::controller::driver::gate::{Op, tenant_peers};
use crate::controller::driver::referenced;
use crate::controller::driver::{Change, Cx};
use crate::controller::error::{Error, Halt};
use crate::controller::state::triggers::Triggers;
use crate::controller::{Context, spec_already_applied};
use crate::resources::McpServer;
use crate::resources::guardrail::{GuardrailMcpServer, GuardrailStatus};

use super::GuardrailObject;

/// Condition reason while `spec.mcpServers` names a server the guardrail's workspace does not
/// have (not yet, or another workspace's).
pub const MCP_SERVER_NOT_IN_WORKSPACE: &str = "McpServerNotInWorkspace";

/// Condition reason while `spec.mcpServers` names an McpServer resource that has no Ready
/// server to resolve to.
pub const MCP_SERVER_NOT_READY: &str = "McpServerNotReady";

/// One server's mapping as compared: its `run_on` and capability ids, sorted.
type Mapping = (Vec<String>, Vec<String>);

/// `servers` as they compare ([`GuardrailMcpServer::normalized`]), by server UUID.
fn mappings(servers: &[GuardrailMcpServer]) -> BTreeMap<String, Mapping> {
    GuardrailMcpServer::normalized(servers)
        .into_iter()
        .map(|s| {
            let run_on = s.run_on.iter().flatten().map(|r| r.as_str().to_string());
            (
                s.id.unwrap_or_default(),
                (run_on.collect(), s.capability_ids),
            )
        })
        .collect()
}

/// The mappings `spec.mcpServers` asks for, by server UUID.
fn desired(servers: &[GuardrailMcpServer]) -> BTreeMap<String, Mapping> {
    mappings(servers)
}

/// The mappings the API lists for the guardrail, by server UUID.
fn current(rows: &[McpServerMapping]) -> BTreeMap<String, Mapping> {
    let listed: Vec<GuardrailMcpServer> = rows.iter().map(GuardrailMcpServer::listed).collect();
    mappings(&listed)
}

/// The bulk write of `wanted`: every server, with what it runs on and its capabilities.
fn request(wanted: &BTreeMap<String, Mapping>) -> SyncMcpServerMappingsRequest {
    SyncMcpServerMappingsRequest {
        mcp_servers: wanted
            .iter()
            .map(|(id, (run_on, capabilities))| {
                let target = McpServerMappingTarget {
                    run_on: Some(run_on.clone()),
                    mcp_integration_capability_ids: capabilities.clone(),
                };
                (id.clone(), target)
            })
            .collect(),
    }
}

/// How the listed set differs from the wanted one, for messages: servers added, changed and
/// removed.
fn describe(wanted: &BTreeMap<String, Mapping>, listed: &BTreeMap<String, Mapping>) -> String {
    let added: Vec<&str> = wanted
        .keys()
        .filter(|id| !listed.contains_key(*id))
        .map(String::as_str)
        .collect();
    let changed: Vec<&str> = wanted
        .iter()
        .filter(|(id, m)| listed.get(*id).is_some_and(|l| l != *m))
        .map(|(id, _)| id.as_str())
        .collect();
    let removed: Vec<&str> = listed
        .keys()
        .filter(|id| !wanted.contains_key(*id))
        .map(String::as_str)
        .collect();
    let mut what = Vec::new();
    for (verb, ids) in [("added", added), ("changed", changed), ("removed", removed)] {
        if !ids.is_empty() {
            what.push(format!("{verb} {}", ids.join(", ")));
        }
    }
    what.join("; ")
}

/// The guardrail's key for the mapping routes: its recorded UUID, else its slug.
fn key(status: &GuardrailStatus) -> Option<String> {
    status.id.clone().or(status.slug.clone())
}

async fn list(
    client: &Client,
    plane: api::GuardrailPlane,
    key: &str,
) -> Result<Vec<McpServerMapping>, Error> {
    client
        .guardrail_mcp_servers(plane)
        .list(key)
        .await
        .map_err(|e| Error::api(format!("read the MCP servers of guardrail {key}"), e))
}

/// Brings the guardrail's MCP server mappings in line with `spec.mcpServers`: one bulk write
/// when they differ, none otherwise.
pub(super) async fn sync<G: GuardrailObject>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    status: &mut GuardrailStatus,
) -> Result<Vec<Change>, Halt> {
    let (Some(servers), Some(key)) = (&guardrail.definition().mcp_servers, key(status)) else {
        return Ok(Vec::new());
    };
    let servers = resolved(guardrail, cx.ctx, servers).await?;
    let wanted = desired(&servers);
    let listed = current(&list(cx.api(Op::Read).await?, G::PLANE, &key).await?);
    if wanted == listed {
        return Ok(Vec::new());
    }
    in_workspace(guardrail, cx, &wanted).await?;
    let what = describe(&wanted, &listed);
    cx.gate.intend(format!(
        "would replace the MCP servers of guardrail {key}: {what}"
    ));
    cx.api(Op::Update)
        .await?
        .guardrail_mcp_servers(G::PLANE)
        .sync(&key, &request(&wanted))
        .await
        .map_err(|e| Error::api(format!("replace the MCP servers of guardrail {key}"), e))?;
    Ok(vec![Change::new(
        "McpServersSynced",
        format!("MCP servers of guardrail {key}: {what}"),
    )])
}

/// Observe: `mcpServers` when the listed mappings differ from the spec's, read without a write.
pub(super) async fn differ<G: GuardrailObject>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    status: &GuardrailStatus,
) -> Result<Vec<&'static str>, Halt> {
    let (Some(servers), Some(key)) = (&guardrail.definition().mcp_servers, key(status)) else {
        return Ok(Vec::new());
    };
    let servers = resolved(guardrail, cx.ctx, servers).await?;
    let listed = current(&list(cx.api(Op::Read).await?, G::PLANE, &key).await?);
    Ok(match desired(&servers) == listed {
        true => Vec::new(),
        false => vec!["mcpServers"],
    })
}

/// `servers` with every `mcpServerRef` resolved to the UUID its McpServer recorded, once that
/// McpServer is Ready on a Connection of the guardrail's tenant; else why the mappings wait
/// (`McpServerNotReady`, nothing written). A Guardrail names McpServers of its own namespace
/// only; a ClusterGuardrail must name the namespace.
async fn resolved<G: GuardrailObject>(
    guardrail: &G,
    ctx: &Context,
    servers: &[GuardrailMcpServer],
) -> Result<Vec<GuardrailMcpServer>, Error> {
    let own = guardrail.meta().namespace.as_deref();
    let mut out = Vec::with_capacity(servers.len());
    for server in servers {
        let Some(named) = &server.mcp_server_ref else {
            out.push(server.clone());
            continue;
        };
        let namespace = match (own, named.namespace.as_deref()) {
            (Some(own), None) => own,
            (Some(own), Some(given)) if own == given => own,
            (Some(own), Some(given)) => {
                return Err(Error::InvalidSpec(format!(
                    "spec.mcpServers names McpServer {given}/{}: a Guardrail names McpServers of its own namespace ({own}) only",
                    named.name
                )));
            }
            (None, Some(given)) => given,
            (None, None) => {
                return Err(Error::InvalidSpec(format!(
                    "spec.mcpServers names McpServer {} without a namespace: a ClusterGuardrail's mcpServerRef must set namespace",
                    named.name
                )));
            }
        };
        let id = ready_server(guardrail, ctx, namespace, &named.name).await?;
        out.push(GuardrailMcpServer {
            id: Some(id),
            mcp_server_ref: None,
            ..server.clone()
        });
    }
    Ok(out)
}

/// The UUID McpServer `namespace/name` recorded, once Ready and of the guardrail's tenant. A
/// ClusterGuardrail's server may be of another shard's namespace: then read from the apiserver.
async fn ready_server<G: GuardrailObject>(
    guardrail: &G,
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<String, Error> {
    let what = format!("McpServer {namespace}/{name} named by spec.mcpServers");
    let waiting = |why: &str| {
        Error::not_allowed(
            MCP_SERVER_NOT_READY,
            format!("{what} {why}; the guardrail's MCP servers are written once it is"),
        )
    };
    let Some(server) = referenced::find_in::<McpServer>(ctx, namespace, name).await? else {
        return Err(waiting("does not exist yet"));
    };
    let peers = tenant_peers(ctx, guardrail.connection_name());
    if !peers.iter().any(|p| p == server.spec.connection_name()) {
        return Err(Error::InvalidSpec(format!(
            "{what} uses Connection {}, which reaches another tenant than this guardrail's",
            server.spec.connection_name()
        )));
    }
    if server.metadata.deletion_timestamp.is_some() {
        return Err(waiting("is being deleted"));
    }
    let status = server.status.clone().unwrap_or_default();
    let ready = spec_already_applied(
        server.metadata.generation,
        status.observed_generation,
        &status.conditions,
    );
    match status.id.filter(|_| ready) {
        Some(id) => Ok(id),
        None => Err(waiting("is not Ready yet")),
    }
}

/// Requeues the guardrails whose `spec.mcpServers` names an McpServer resource whenever it
/// changes, so mappings waiting for it (`McpServerNotReady`) are written once it is Ready.
pub(super) fn watch_servers<G: GuardrailObject>(triggers: Triggers<'_, G>) -> Triggers<'_, G> {
    triggers.when(|g: &G, server: &McpServer| {
        let own = g.meta().namespace.as_deref();
        g.definition().mcp_servers.iter().flatten().any(|s| {
            s.mcp_server_ref.as_ref().is_some_and(|r| {
                r.name == server.name_any()
                    && r.namespace.as_deref().or(own) == server.metadata.namespace.as_deref()
            })
        })
    })
}

/// For a workspace guardrail, that every server `wanted` names is one of its workspace's, as a
/// complete server list of that workspace shows; an organisation guardrail may name any.
async fn in_workspace<G: GuardrailObject>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    wanted: &BTreeMap<String, Mapping>,
) -> Result<(), Halt> {
    let Some(workspace) = guardrail.workspace_id() else {
        return Ok(());
    };
    if wanted.is_empty() {
        return Ok(());
    }
    let query = McpServersListQuery {
        workspace_id: Some(workspace.to_string()),
        ids: wanted.keys().cloned().collect(),
        search: None,
    };
    let listing = cx
        .read(
            format!("list the MCP servers of workspace {workspace}"),
            |client| async move { client.mcp_servers().listing(&query, Reading::Proof).await },
        )
        .await?;
    let missing: Vec<&str> = wanted
        .keys()
        .filter(|id| !listing.items.iter().any(|s| &s.id == *id))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::not_allowed(
        MCP_SERVER_NOT_IN_WORKSPACE,
        format!(
            "spec.mcpServers names {}, which the guardrail's workspace {workspace} does not list as its MCP servers{}; nothing is written until it does",
            missing.join(", "),
            match listing.complete {
                true => "",
                false => " (its list was incomplete)",
            }
        ),
    ).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::guardrail::McpRunOn;

    fn server(
        id: &str,
        run_on: Option<Vec<McpRunOn>>,
        capabilities: &[&str],
    ) -> GuardrailMcpServer {
        GuardrailMcpServer {
            id: Some(id.into()),
            mcp_server_ref: None,
            run_on,
            capability_ids: capabilities.iter().map(|c| c.to_string()).collect(),
        }
    }

    fn row(server: &str, run_on: &[&str], capabilities: &[&str]) -> McpServerMapping {
        serde_json::from_value(serde_json::json!({
            "id": "m", "guardrail_id": "g", "mcp_server_id": server,
            "run_on": run_on, "capability_ids": capabilities,
        }))
        .unwrap()
    }

    /// The default `run_on` is both, and order does not count: the API's listing of what the
    /// spec asked for is no difference.
    #[test]
    fn the_listed_set_equals_the_spec_by_meaning() {
        let spec = [
            server("s1", None, &[]),
            server(
                "s2",
                Some(vec![McpRunOn::Output, McpRunOn::Input]),
                &["c2", "c1"],
            ),
        ];
        let rows = [
            row("s2", &["input", "output"], &["c1", "c2"]),
            row("s1", &["output", "input"], &[]),
        ];
        assert_eq!(desired(&spec), current(&rows));
    }

    /// A mapping added outside aigw, a changed one and a missing one all differ, and the bulk
    /// write carries exactly the spec's set.
    #[test]
    fn the_bulk_write_is_the_spec_and_says_what_it_changes() {
        let spec = [
            server("s1", Some(vec![McpRunOn::Input]), &[]),
            server("s3", None, &[]),
        ];
        let rows = [
            row("s1", &["input", "output"], &[]),
            row("s2", &["input"], &[]),
        ];
        let wanted = desired(&spec);
        let listed = current(&rows);
        assert_ne!(wanted, listed);
        assert_eq!(
            describe(&wanted, &listed),
            "added s3; changed s1; removed s2"
        );
        let body = serde_json::to_value(request(&wanted)).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"mcp_servers": {
                "s1": {"run_on": ["input"]},
                "s3": {"run_on": ["input", "output"]},
            }})
        );
        assert_eq!(
            serde_json::to_value(request(&desired(&[]))).unwrap(),
            serde_json::json!({"mcp_servers": {}})
        );
    }
}
