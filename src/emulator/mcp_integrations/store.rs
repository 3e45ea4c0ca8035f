//! The MCP integrations' store and read shapes, which the routes (`crud`, `capabilities`) share.

use serde_json::{Map, Value, json};

use crate::emulator::{
    common::{
        access::{self, WorkspaceAccess},
        clock::now,
        errors::ApiResult,
        fields::{self, Object},
        records::{Key, Kind, Record, Records, Slug},
        state::{Common, KindState},
    },
    integrations::masked_configurations,
};

pub type McpIntegrationsState = KindState<McpIntegrationStore>;

/// The `object` of reads and receipts.
pub const OBJECT: &str = "mcp-integration";

/// Capability kinds, as `type` and as the `counts` keys.
pub(super) const KINDS: &[(&str, &str)] = &[
    ("tool", "tools"),
    ("prompt", "prompts"),
    ("resource", "resources"),
    ("resource_template", "resource_templates"),
];

pub type McpIntegrationStore = Records<McpIntegrationRecord>;

pub struct McpIntegrationRecord {
    pub key: Key,
    pub name: String,
    pub description: Option<String>,
    pub url: String,
    pub auth_type: String,
    pub transport: String,
    /// Write-only as a whole.
    pub configurations: Object,
    /// `None` reads `null`.
    pub secret_mappings: Option<Vec<Value>>,
    pub organisation_id: String,
    pub workspace_id: Option<String>,
    pub owner_id: String,
    pub created_at: String,
    pub last_updated_at: String,
    pub global_access: Option<Value>,
    pub rows: Vec<WorkspaceAccess>,
    pub capabilities: Vec<Capability>,
    pub metadata: Object,
    /// Requests that wrote `configurations`.
    pub configuration_writes: u64,
}

/// A discovered tool, prompt or resource.
#[derive(Clone)]
pub struct Capability {
    pub name: String,
    pub kind: String,
    pub description: Option<String>,
    pub input_schema: Value,
    pub enabled: bool,
    pub created_at: String,
    pub last_updated_at: String,
}

impl Capability {
    /// The live item.
    pub fn item(&self) -> Value {
        json!({
            "name": self.name, "type": self.kind, "title": self.name,
            "description": self.description, "icons": null, "enabled": self.enabled,
            "created_at": self.created_at, "last_updated_at": self.last_updated_at,
            "input_schema": self.input_schema, "output_schema": null, "execution": null,
            "annotations": null, "arguments": null, "uri": null, "uri_template": null,
            "mime_type": null, "size": null, "object": "mcp-capability",
        })
    }
}

/// `configurations` as reads show it: the integrations' masking plus `oauth_metadata`.
fn masked(configurations: &Object) -> Object {
    let mut plain = configurations.clone();
    let oauth = plain.remove("oauth_metadata");
    let mut shown = masked_configurations(&plain);
    if oauth.is_some() {
        shown.insert("masked_oauth_metadata".to_owned(), json!("****"));
    }
    shown
}

impl McpIntegrationRecord {
    pub fn integration_type(&self) -> &'static str {
        if self.workspace_id.is_some() {
            "workspace"
        } else {
            "organisation"
        }
    }

    /// The live detail.
    pub fn detail(&self) -> Value {
        json!({
            "id": self.key.id,
            "name": self.name,
            "description": self.description,
            "owner_id": self.owner_id,
            "status": "active",
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "configurations": masked(&self.configurations),
            "global_workspace_access": self.global_access,
            "workspace_id": self.workspace_id,
            "slug": self.key.slug,
            "url": self.url,
            "auth_type": self.auth_type,
            "transport": self.transport,
            "type": self.integration_type(),
            "secret_mappings": self.secret_mappings,
            "object": OBJECT,
        })
    }

    /// A list row: the detail with `configurations` as a JSON string, plus the organisation,
    /// the enabled workspace count and the metadata summary.
    pub fn row(&self) -> Value {
        let mut row = self.detail();
        row["configurations"] = json!(Value::Object(masked(&self.configurations)).to_string());
        row["organisation_id"] = json!(self.organisation_id);
        row["workspaces_count"] = json!(access::enabled_count(&self.rows));
        let summary: Map<String, Value> = [
            "title",
            "description",
            "icons",
            "server_name",
            "server_version",
            "protocol_version",
            "sync_status",
            "last_synced_at",
        ]
        .iter()
        .map(|k| {
            (
                (*k).to_owned(),
                self.metadata.get(*k).cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
        row["metadata"] = Value::Object(summary);
        row
    }

    /// Whether a server may be made in `workspace` (any of its names): its own workspace,
    /// global access, or an enabled row.
    pub fn enabled_for(&self, workspace: &[&str]) -> bool {
        self.workspace_id
            .as_deref()
            .is_some_and(|ws| workspace.contains(&ws))
            || self
                .global_access
                .as_ref()
                .is_some_and(|g| g["enabled"] == json!(true))
            || self
                .rows
                .iter()
                .any(|r| r.enabled && workspace.contains(&r.id.as_str()))
    }

    /// True when a mapping names the secret reference (by any of its names).
    pub fn maps_secret(&self, names: &[&str]) -> bool {
        self.secret_mappings.iter().flatten().any(|m| {
            m["secret_reference_id"]
                .as_str()
                .is_some_and(|r| names.contains(&r))
        })
    }

    fn dump(&self) -> Value {
        let mut value = self.detail();
        value["configurations"] = Value::Object(self.configurations.clone());
        value["configuration_writes"] = json!(self.configuration_writes);
        value["workspaces"] = self
            .rows
            .iter()
            .map(|r| access::with_writes(r.row(), r.writes))
            .collect();
        value["capabilities"] = self.capabilities.iter().map(Capability::item).collect();
        value["metadata"] = Value::Object(self.metadata.clone());
        value
    }
}

impl Record for McpIntegrationRecord {
    const KIND: Kind = Kind::new("an", "MCP integration", Slug::Named("mcp"));

    fn key(&self) -> &Key {
        &self.key
    }
}

impl McpIntegrationStore {
    pub fn dump(&self) -> Vec<Value> {
        self.dump_with(McpIntegrationRecord::dump)
    }

    /// Preloads an integration given in its read shape, with `configurations` in clear,
    /// `workspaces` as access rows (`{id, enabled}`) and `tools` as discovered tool names;
    /// answers its id and slug.
    pub fn seed(&mut self, common: &Common, item: &Object) -> ApiResult<(String, String)> {
        let (key, name) = self.seed_key(common, item, "seeded MCP integration")?;
        let at = now();
        let rows = fields::seeded_access(item)
            .map(|(id, enabled)| WorkspaceAccess::new(id, enabled))
            .collect();
        let capabilities = fields::opt_str_list(item, "tools")?
            .unwrap_or_default()
            .into_iter()
            .map(|name| Capability {
                name,
                kind: "tool".to_owned(),
                description: None,
                input_schema: json!({"type": "object"}),
                enabled: true,
                created_at: at.clone(),
                last_updated_at: at.clone(),
            })
            .collect::<Vec<_>>();
        let mut metadata = pending_metadata();
        if !capabilities.is_empty() {
            metadata.insert("sync_status".to_owned(), json!("synced"));
            metadata.insert("last_synced_at".to_owned(), json!(at));
        }
        let record = McpIntegrationRecord {
            key,
            name,
            description: fields::nullable_str(item, "description"),
            url: fields::str_or(item, "url", "https://mcp.example.invalid/mcp"),
            auth_type: fields::str_or(item, "auth_type", "none"),
            transport: fields::str_or(item, "transport", "http"),
            configurations: fields::opt_object(item, "configurations")?.unwrap_or_default(),
            secret_mappings: fields::opt_array(item, "secret_mappings")?,
            organisation_id: common.organisation_id.clone(),
            workspace_id: fields::nullable_str(item, "workspace_id"),
            owner_id: common.user_id.clone(),
            created_at: at.clone(),
            last_updated_at: at,
            global_access: item
                .get("global_workspace_access")
                .cloned()
                .filter(|g| !g.is_null()),
            rows,
            capabilities,
            metadata,
            configuration_writes: 0,
        };
        Ok(self.insert_seeded(record))
    }
}

pub(super) fn pending_metadata() -> Object {
    let mut metadata: Object = [
        "server_name",
        "server_version",
        "title",
        "description",
        "website_url",
        "icons",
        "protocol_version",
        "capability_flags",
        "instructions",
        "last_synced_at",
        "sync_error",
    ]
    .iter()
    .map(|k| ((*k).to_owned(), Value::Null))
    .collect();
    metadata.insert("sync_status".to_owned(), json!("pending"));
    metadata
}
