//! `aigw plan` for a Workspace: the workspace its live resource recorded, else the one its slug
//! adopts, compared on the settings a read shows. A default config named by a Config resource
//! is compared only through the live Config's recorded id (without a kubeconfig, not at all).

use serde_json::{Value, json};

use super::GitopsError;
use super::plan::{
    Action, Entry, Live, Planner, compared, creating, entry, plain_changes, to_json,
};
use super::validate::Object;
use crate::api;
use crate::controller::state::claims::Claims;
use crate::resources::Config;
use crate::resources::workspace::{DefaultConfig, Workspace};

impl Planner<'_> {
    pub(super) async fn workspace(self, workspace: &Workspace) -> Result<Entry, GitopsError> {
        let spec = &workspace.spec;
        let desired = to_json(spec);
        let get = async |key: &str| self.api.workspaces().get(key).await;
        let (_, found) = self.counterpart(workspace, get).await?;
        let Some((counterpart, remote)) = found else {
            if let Some(slug) = &spec.slug {
                return Ok(entry(
                    Action::Conflict,
                    Some(slug.clone()),
                    Vec::new(),
                    Some(format!(
                        "spec.slug names workspace {slug}, which does not exist"
                    )),
                ));
            }
            return Ok(Entry {
                reason: Some("created in three calls: an IAM scope of its own, the workspace, the scope bound to its slug".into()),
                ..creating(&desired, &["slug"])
            });
        };
        let config = default_config(self.live, workspace).await?;
        let settings = spec.settings(config);
        let changes = plain_changes(settings.diff(&remote), &desired, |field| {
            read_field(&remote, field)
        });
        Ok(compared(&counterpart, changes))
    }
}

/// The value a read shows for the spec field `field`.
fn read_field(remote: &api::Workspace, field: &str) -> Value {
    match field {
        "name" => json!(remote.plain_name()),
        "description" => json!(remote.description),
        "icon" => json!(remote.icon),
        "defaults" => json!(remote.defaults),
        "usageLimits" => json!(remote.usage_limits),
        _ => json!(remote.rate_limits),
    }
}

/// The default config `spec.defaults.configRef` resolves to through the live Config (pending,
/// and not compared, without one).
async fn default_config(
    live: Option<&Live>,
    workspace: &Workspace,
) -> Result<Option<DefaultConfig>, GitopsError> {
    let Some(named) = workspace.spec.default_config_ref() else {
        return Ok(None);
    };
    let Some(live) = live else {
        return Ok(Some(DefaultConfig::Pending));
    };
    let configs = kube::Api::<Config>::namespaced(live.client.clone(), &named.namespace);
    let read = configs.get_opt(&named.name).await.map_err(|e| {
        GitopsError::kube(
            format!("failed to read {}/{}", named.namespace, named.name),
            e,
        )
    })?;
    let id = read.and_then(|c| c.status?.id);
    Ok(Some(id.map_or(DefaultConfig::Pending, DefaultConfig::Id)))
}

/// The manifest's object as the operator acts on it: the workspace its `spec.workspaceRef`
/// names resolved to the UUID that Workspace recorded, read with a kubeconfig as the operator
/// reads its watch cache (the Workspace Ready). `Err`: the entry saying the operator would wait
/// (`WorkspaceNotReady`) and write nothing: the Workspace is not Ready, or the plan has no
/// cluster access to read it.
pub(super) async fn reached(
    live: Option<&Live>,
    object: &Object,
) -> Result<Result<Object, Entry>, GitopsError> {
    macro_rules! reach {
        ($($variant:ident),*) => {
            match object {
                $(Object::$variant(o) => match o.workspace_ref() {
                    Some(name) => match recorded_id(live, name).await? {
                        Ok(id) => {
                            let mut reached = o.clone();
                            reached.reach_workspace(id);
                            Ok(Object::$variant(reached))
                        }
                        Err(why) => Err(why),
                    },
                    None => Ok(object.clone()),
                },)*
                _ => Ok(object.clone()),
            }
        };
    }
    let reached = reach!(
        Config,
        RateLimitsPolicy,
        UsageLimitsPolicy,
        Guardrail,
        ApiKey,
        Provider,
        McpServer
    );
    Ok(reached.map_err(|why| entry(Action::Conflict, None, Vec::new(), Some(why))))
}

/// The UUID Workspace `name` recorded, once Ready; else why the operator would wait.
async fn recorded_id(
    live: Option<&Live>,
    name: &str,
) -> Result<Result<String, String>, GitopsError> {
    let waits = |why: &str| {
        format!(
            "the operator waits for Workspace {name} named by spec.workspaceRef (WorkspaceNotReady) and writes nothing: {why}"
        )
    };
    let Some(live) = live else {
        return Ok(Err(waits(
            "without cluster access (--kubeconfig) the plan cannot read the workspace it recorded",
        )));
    };
    let found = kube::Api::<Workspace>::all(live.client.clone())
        .get_opt(name)
        .await
        .map_err(|e| GitopsError::kube(format!("failed to read Workspace {name}"), e))?;
    let Some(workspace) = found else {
        return Ok(Err(waits("it does not exist")));
    };
    let status = workspace.status.unwrap_or_default();
    let ready = crate::controller::spec_already_applied(
        workspace.metadata.generation,
        status.observed_generation,
        &status.conditions,
    );
    Ok(match status.id.filter(|id| !id.is_empty() && ready) {
        Some(id) => Ok(id),
        None => Err(waits("it is not Ready yet")),
    })
}
