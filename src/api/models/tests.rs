//! Fixture tests: the seed's shapes and the live variants FACTS.md records
//! (`tests/fixtures/api/*.json`), decoded the way the client decodes answers.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::*;
use crate::api::error::ApiError;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../../tests/fixtures/api/", $name))
    };
}

/// Unwraps a `{success, data}` envelope and decodes, as the client does.
fn read<T: DeserializeOwned>(raw: &str) -> T {
    let value: Value = serde_json::from_str(raw).expect("fixture is JSON");
    let value = unwrap_success(value).expect("success envelope");
    serde_json::from_value(value).expect("fixture decodes")
}

fn field_of(err: ApiError) -> String {
    match err {
        ApiError::Validation { field, .. } => field,
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[test]
fn response_with_every_output_item_and_tool() {
    let r: Response = read(fixture!("response_completed.json"));
    assert_eq!(r.status, Some(ResponseStatus::Completed));
    assert_eq!(r.model, "o1-pro-2025-03-19");
    assert_eq!(r.output.len(), 6);
    assert!(
        matches!(&r.output[0], OutputItem::Reasoning(i) if i.summary[0].text == "Looked up the docs.")
    );
    let OutputItem::FileSearchCall(fs) = &r.output[1] else {
        panic!("{:?}", r.output[1])
    };
    let result = &fs.results.as_ref().unwrap()[0];
    assert_eq!(result.score, Some(0.92));
    assert_eq!(
        result.attributes.as_ref().unwrap()["version"],
        AttributeValue::Number(3.0)
    );
    assert!(
        matches!(&r.output[2], OutputItem::WebSearchCall(w) if w.status == ItemStatus::Completed)
    );
    assert!(
        matches!(&r.output[3], OutputItem::FunctionCall(f) if f.arguments == r#"{"city":"Paris"}"#)
    );
    let OutputItem::ComputerCall(cc) = &r.output[4] else {
        panic!()
    };
    assert!(matches!(
        cc.action,
        ComputerAction::Click {
            button: MouseButton::Left,
            x: 10,
            y: 20,
            ..
        }
    ));
    assert_eq!(cc.pending_safety_checks[0].code, "malicious_instructions");
    let OutputItem::Message(msg) = &r.output[5] else {
        panic!()
    };
    assert!(
        matches!(&msg.content[0], OutputContent::OutputText { annotations, .. } if annotations.len() == 1)
    );
    assert!(
        matches!(&msg.content[1], OutputContent::Refusal { refusal, .. } if refusal.contains("password"))
    );

    assert_eq!(r.tools.len(), 4);
    let Tool::FileSearch(fs) = &r.tools[0] else {
        panic!()
    };
    assert_eq!(fs.max_num_results, Some(20));
    assert!(
        matches!(&fs.filters, Some(Filter::Compound(c)) if c.op == LogicalOp::And && c.filters.len() == 2)
    );
    assert!(matches!(&r.tools[1], Tool::Function(f) if f.strict && f.description.is_none()));
    assert!(
        matches!(&r.tools[2], Tool::ComputerUsePreview(c) if c.environment == ComputerEnvironment::Browser)
    );
    assert!(matches!(&r.tools[3], Tool::WebSearchPreview20250311(w)
        if w.user_location.as_ref().unwrap().country.as_deref() == Some("FR")));
    assert!(matches!(&r.tool_choice, Some(ToolChoice::Function(f)) if f.name == "get_weather"));
    assert!(matches!(
        r.text.as_ref().unwrap().format,
        Some(TextFormat::JsonSchema(JsonSchemaFormat {
            strict: Some(true),
            ..
        }))
    ));
    assert_eq!(
        r.reasoning.as_ref().unwrap().effort,
        Some(ReasoningEffort::High)
    );
    assert_eq!(
        r.usage
            .as_ref()
            .unwrap()
            .output_tokens_details
            .reasoning_tokens,
        10
    );
    assert_eq!(r.truncation, Some(Truncation::Disabled));
    r.validate().unwrap();
}

#[test]
fn response_round_trips() {
    let r: Response = read(fixture!("response_completed.json"));
    let again: Response = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
    assert_eq!(r, again);
    let r: Response = read(fixture!("response_failed.json"));
    let again: Response = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
    assert_eq!(r, again);
}

#[test]
fn failed_response_keeps_unknown_kinds() {
    let r: Response = read(fixture!("response_failed.json"));
    let err = r.error.as_ref().unwrap();
    assert_eq!(err.code, ResponseErrorCode::VectorStoreTimeout);
    assert_eq!(
        r.incomplete_details.as_ref().unwrap().reason,
        Some(IncompleteReason::MaxOutputTokens)
    );
    assert!(!r.parallel_tool_calls, "0 reads as false");
    assert_eq!(r.created_at, 1741476800.5);
    let kinds: Vec<&str> = r
        .output
        .iter()
        .filter_map(|o| match o {
            OutputItem::ComputerCall(c) => Some(c.action.kind()),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["double_click", "drag", "keypress", "wait"]);
    let OutputItem::ComputerCall(drag) = &r.output[1] else {
        panic!()
    };
    assert!(
        matches!(&drag.action, ComputerAction::Drag { path, extra } if path.len() == 2 && extra["speed"] == "slow")
    );
    assert!(matches!(&r.output[4], OutputItem::Other(v) if v["type"] == "image_generation_call"));
    assert_eq!(r.extra["some_future_field"], json!({"nested": true}));
    assert!(matches!(&r.tools[0], Tool::WebSearchPreview(w) if w.user_location.is_none()));
    assert!(matches!(&r.tools[1], Tool::Other(v) if v["type"] == "mcp"));
    assert_eq!(r.tool_choice, Some(ToolChoice::Mode(ToolChoiceMode::Auto)));
    assert!(matches!(
        r.text.as_ref().unwrap().format,
        Some(TextFormat::Text { .. })
    ));
}

#[test]
fn tool_choice_forms() {
    let cases = [
        (json!("none"), ToolChoice::Mode(ToolChoiceMode::None)),
        (
            json!("required"),
            ToolChoice::Mode(ToolChoiceMode::Required),
        ),
        (
            json!({"type": "file_search"}),
            ToolChoice::Hosted(ToolChoiceHosted {
                kind: HostedTool::FileSearch,
                extra: Map::new(),
            }),
        ),
        (
            json!({"type": "web_search_preview_2025_03_11"}),
            ToolChoice::Hosted(ToolChoiceHosted {
                kind: HostedTool::WebSearchPreview20250311,
                extra: Map::new(),
            }),
        ),
        (
            json!({"type": "function", "name": "f"}),
            ToolChoice::Function(ToolChoiceFunction {
                kind: FunctionKind::Function,
                name: "f".into(),
                extra: Map::new(),
            }),
        ),
    ];
    for (wire, expected) in cases {
        let parsed: ToolChoice = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(parsed, expected);
        assert_eq!(serde_json::to_value(&parsed).unwrap(), wire);
    }
}

#[test]
fn text_formats_and_their_validation() {
    let f: TextFormat = serde_json::from_value(json!({"type": "json_object"})).unwrap();
    assert!(matches!(f, TextFormat::JsonObject { .. }));
    let bad: TextFormat =
        serde_json::from_value(json!({"type": "json_schema", "name": "has space", "schema": {}}))
            .unwrap();
    assert_eq!(field_of(bad.validate().unwrap_err()), "text.format.name");
    let long = "a".repeat(65);
    let bad: TextFormat =
        serde_json::from_value(json!({"type": "json_schema", "name": long, "schema": {}})).unwrap();
    assert!(bad.validate().is_err());
    let ok: TextFormat =
        serde_json::from_value(json!({"type": "json_schema", "name": "A-z_09", "schema": {}}))
            .unwrap();
    ok.validate().unwrap();
}

#[test]
fn response_limits_are_checked() {
    let base: Response = read(fixture!("response_completed.json"));
    let mut r = base.clone();
    r.temperature = Some(2.5);
    assert_eq!(field_of(r.validate().unwrap_err()), "temperature");
    let mut r = base.clone();
    r.top_p = Some(-0.1);
    assert_eq!(field_of(r.validate().unwrap_err()), "top_p");
    let mut r = base.clone();
    r.metadata = Some((0..17).map(|i| (format!("k{i}"), "v".into())).collect());
    assert_eq!(field_of(r.validate().unwrap_err()), "metadata");
    let mut r = base.clone();
    r.metadata = Some([("k".repeat(65), "v".into())].into());
    assert!(field_of(r.validate().unwrap_err()).starts_with("metadata."));
    let mut r = base.clone();
    r.metadata = Some([("k".into(), "v".repeat(513))].into());
    assert_eq!(field_of(r.validate().unwrap_err()), "metadata.k");
    let mut r = base.clone();
    let Tool::FileSearch(fs) = &mut r.tools[0] else {
        panic!()
    };
    fs.max_num_results = Some(51);
    assert_eq!(
        field_of(r.validate().unwrap_err()),
        "tools[0].max_num_results"
    );
    let mut r = base.clone();
    let Tool::FileSearch(fs) = &mut r.tools[0] else {
        panic!()
    };
    fs.max_num_results = Some(0);
    assert!(r.validate().is_err());
    let mut r = base;
    let Tool::FileSearch(fs) = &mut r.tools[0] else {
        panic!()
    };
    fs.ranking_options.as_mut().unwrap().score_threshold = Some(1.5);
    assert_eq!(
        field_of(r.validate().unwrap_err()),
        "tools[0].ranking_options.score_threshold"
    );
}

#[test]
fn vector_store_files() {
    let f: VectorStoreFile = read(fixture!("vector_store_file_static.json"));
    assert_eq!(f.status, VectorStoreFileStatus::Completed);
    assert_eq!(
        f.chunking_strategy,
        Some(ChunkingStrategy::Static {
            config: StaticChunking {
                max_chunk_size_tokens: 800,
                chunk_overlap_tokens: 400,
                extra: Map::new(),
            },
            extra: Map::new(),
        })
    );
    let f: VectorStoreFile = read(fixture!("vector_store_file_failed.json"));
    assert_eq!(f.last_error.as_ref().unwrap().code, "internal_error");
    assert!(matches!(
        f.chunking_strategy,
        Some(ChunkingStrategy::Other { .. })
    ));
    f.validate().unwrap();
    let odd: ChunkingStrategy =
        serde_json::from_value(json!({"type": "semantic", "x": 1})).unwrap();
    assert!(matches!(odd, ChunkingStrategy::Unknown(_)));

    let mut attrs: VectorStoreFileAttributes = (0..17)
        .map(|i| (format!("k{i}"), AttributeValue::Bool(true)))
        .collect();
    assert_eq!(
        field_of(validate_attributes(&attrs).unwrap_err()),
        "attributes"
    );
    attrs.clear();
    attrs.insert("s".into(), AttributeValue::String("x".repeat(513)));
    assert_eq!(
        field_of(validate_attributes(&attrs).unwrap_err()),
        "attributes.s"
    );
}

#[test]
fn deployment_read_with_int_flags() {
    let d: Deployment = read(fixture!("deployment_get.json"));
    assert_eq!(d.deployment_type, Some(DeploymentType::Production));
    assert_eq!(d.status, Some(DeploymentStatus::Active));
    assert_eq!(d.is_default, Some(true));
    assert_eq!(d.connection_status, Some(ConnectionStatus::Healthy));
    let auth = d.auth_settings.as_ref().unwrap();
    assert_eq!(auth.allow_all_workspaces, Some(false));
    assert_eq!(auth.is_playground_proxy_allowed, Some(true));
    assert_eq!(
        auth.workspaces_allowed.as_deref(),
        Some(&["ws-1".to_owned(), "ws-2".to_owned()][..])
    );
    assert_eq!(
        auth.jwt_sub_workspace_mapping.as_ref().unwrap()["svc-a"],
        "ws-1"
    );
    assert_eq!(d.workspaces[0].slug, "ws-1");
    assert_eq!(d.credentials.as_ref().unwrap().username, "edge-eu");
    assert!(
        !format!("{d:?}").contains("********"),
        "masked values are hidden too"
    );

    let wrapped = format!(
        r#"{{"success":true,"data":{}}}"#,
        fixture!("deployment_get.json")
    );
    let again: Deployment = read(&wrapped);
    assert_eq!(again, d);
}

#[test]
fn deployment_create_receipt_keeps_secrets_out_of_debug() {
    let c: DeploymentCreated = read(fixture!("deployment_create.json"));
    assert_eq!(c.client_auth.expose(), "ca_live_secret_value");
    assert_eq!(c.credentials.password.expose(), "registry-password-value");
    assert_eq!(c.slug, None);
    let debug = format!("{c:?}");
    assert!(!debug.contains("ca_live_secret_value") && !debug.contains("registry-password-value"));

    let rotated: DeploymentUpdated =
        read(r#"{"client_auth":"new-ca","credentials":{"username":"u","password":"new-pw"}}"#);
    assert_eq!(rotated.client_auth.as_ref().unwrap().expose(), "new-ca");
    let plain: DeploymentUpdated = read("{}");
    assert_eq!(plain, DeploymentUpdated::default());
    let masked: DeploymentUpdated = read(
        r#"{"id":"d1","client_auth":"****","credentials":{"username":"u","password":"********"}}"#,
    );
    assert_eq!((masked.client_auth, masked.credentials), (None, None));
}

#[test]
fn deployment_list_and_query() {
    let page: ListPage<DeploymentSummary> = read(fixture!("deployment_list.json"));
    assert_eq!(page.total, Some(2));
    assert_eq!(
        page.data[1].deployment_type,
        Some(DeploymentType::NonProduction)
    );
    assert_eq!(page.data[1].is_default, Some(false));
    assert_eq!(page.data[0].tags, None);
    let q = DeploymentListQuery {
        status: Some(DeploymentStatus::Archived),
        deployment_type: Some(DeploymentType::NonProduction),
        search: Some("edge".into()),
        workspace_slug: vec!["a".into(), "b".into()],
        organisation_id: None,
        tags: [("aigw.io/uid".to_string(), "u-1".to_string())].into(),
    };
    let pairs: Vec<(String, String)> = [
        ("status", "archived"),
        ("type", "non_production"),
        ("search", "edge"),
        ("workspace_slug", "a"),
        ("workspace_slug", "b"),
        ("tags[aigw.io/uid]", "u-1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(q.to_pairs(), pairs);
}

#[test]
fn deployment_requests_send_only_set_fields() {
    let req = UpdateDeploymentRequest {
        deployment_type: Some(DeploymentType::NonProduction),
        status: Some(DeploymentStatus::Archived),
        rotate_auth: Some(true),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&req).unwrap(),
        json!({"type": "non_production", "status": "archived", "rotate_auth": true})
    );
    req.validate().unwrap();
    assert_eq!(
        field_of(UpdateDeploymentRequest::default().validate().unwrap_err()),
        "body"
    );
    let bad: Result<UpdateDeploymentRequest, _> =
        serde_json::from_value(json!({"status": "deleted"}));
    assert!(bad.is_err(), "status is a closed enum");
    let create = CreateDeploymentRequest {
        name: "edge".into(),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&create).unwrap(),
        json!({"name": "edge"})
    );
    let bad = CreateDeploymentRequest {
        name: "x".into(),
        slug: Some("s".repeat(51)),
        ..Default::default()
    };
    assert_eq!(field_of(bad.validate().unwrap_err()), "slug");
}

#[test]
fn config_reads_in_both_shapes() {
    let flat: ConfigDetail = read(fixture!("config_get_flat.json"));
    assert_eq!(flat.slug, "pc-pplx-c-ca7a87");
    assert_eq!(flat.config["virtual_key"], "main-258f4d");
    assert_eq!(flat.config["retry"]["attempts"], 5);
    assert_eq!(flat.is_default, Some(false));
    assert_eq!(
        flat.version_id.as_deref(),
        Some("abe447e2-f6aa-4229-93b7-8ee3183b6667")
    );
    assert_eq!(flat.config_type.as_deref(), Some("ORG_CONFIG"));

    let wrapped: ConfigDetail = read(fixture!("config_get_envelope.json"));
    assert_eq!(wrapped.config["strategy"]["mode"], "fallback");
    assert_eq!(wrapped.id, "");

    let list: ListPage<ConfigSummary> = read(fixture!("config_list.json"));
    assert_eq!(list.data[0].slug, "pc-pplx-c-ca7a87");
    assert_eq!(list.total, None);

    let versions: ListPage<ConfigVersion> = read(fixture!("config_versions.json"));
    assert_eq!(
        versions.data[0].detail.config,
        json!({"virtual_key": "vk-1"})
    );
    assert_eq!(versions.data[0].version_owner_id.as_deref(), Some("u-1"));
}

#[test]
fn config_write_receipts_in_both_shapes() {
    let flat: ConfigCreated =
        read(r#"{"id":"c1","version_id":"v1","slug":"pc-1","object":"config"}"#);
    assert_eq!(flat.slug.as_deref(), Some("pc-1"));
    let wrapped: ConfigCreated = read(r#"{"success":true,"data":{"id":"c1","version_id":"v1"}}"#);
    assert_eq!(wrapped.slug, None);
    assert_eq!(wrapped.version_id.as_deref(), Some("v1"));
    let updated: ConfigUpdated = read(r#"{"success":true,"data":{"version_id":"v2"}}"#);
    assert_eq!(updated.version_id.as_deref(), Some("v2"));
    let updated: ConfigUpdated = read(r#"{"version_id":"v3"}"#);
    assert_eq!(updated.version_id.as_deref(), Some("v3"));
}

#[test]
fn config_requests() {
    let create = CreateConfigRequest {
        name: "c".into(),
        config: json!({"virtual_key": "vk"}),
        workspace_id: None,
        is_default: Some(true),
    };
    assert_eq!(
        serde_json::to_value(&create).unwrap(),
        json!({"name": "c", "config": {"virtual_key": "vk"}, "isDefault": 1})
    );
    let back: CreateConfigRequest =
        serde_json::from_value(serde_json::to_value(&create).unwrap()).unwrap();
    assert_eq!(back, create);
    let update = UpdateConfigRequest {
        status: Some("active".into()),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&update).unwrap(),
        json!({"status": "active"})
    );
    assert_eq!(
        field_of(UpdateConfigRequest::default().validate().unwrap_err()),
        "body"
    );
    let bad = UpdateConfigRequest {
        config: Some(json!("x")),
        ..Default::default()
    };
    assert_eq!(field_of(bad.validate().unwrap_err()), "config");
}

#[test]
fn guardrails_page() {
    let list: GuardrailList = read(fixture!("guardrails_list.json"));
    assert_eq!(list.total, 12);
    assert_eq!(list.data[0].target.as_deref(), Some("llm"));
    assert_eq!(list.data[1].workspace_id, None);
    for bad in [0, 1001] {
        let q = GuardrailListQuery {
            page_size: Some(bad),
            current_page: None,
        };
        assert_eq!(field_of(q.validate().unwrap_err()), "page_size");
    }
    GuardrailListQuery {
        page_size: Some(1000),
        current_page: Some(0),
    }
    .validate()
    .unwrap();
}

#[test]
fn rate_limits_policy_models() {
    let p: RateLimitsPolicy = read(fixture!("rate_limits_policy.json"));
    assert_eq!(p.limit.limit_type, RateLimitType::Requests);
    assert_eq!(p.limit.unit, RateLimitUnit::Rpm);
    assert_eq!(p.limit.value, 100.0);
    assert_eq!(
        p.conditions[1].value,
        OneOrMany::Many(vec!["a".into(), "b".into()])
    );
    assert_eq!(p.conditions[1].excludes, Some(OneOrMany::One("c".into())));
    assert_eq!(p.limit.target, Some(RateLimitTarget::Llm));

    let create = CreateRateLimitsPolicyRequest {
        name: Some("x".into()),
        description: None,
        conditions: vec![Condition {
            key: "workspace_id".into(),
            value: OneOrMany::One("ws".into()),
            excludes: None,
        }],
        group_by: vec![GroupBy {
            key: "api_key".into(),
        }],
        limit: RateLimit {
            limit_type: RateLimitType::Tokens,
            unit: RateLimitUnit::Rpw,
            value: 5.0,
            target: Some(RateLimitTarget::McpTools),
        },
        workspace_id: Some("ws".into()),
        organisation_id: None,
    };
    create.validate().unwrap();
    assert_eq!(
        serde_json::to_value(&create).unwrap(),
        json!({"name": "x", "conditions": [{"key": "workspace_id", "value": "ws"}], "group_by": [{"key": "api_key"}],
               "type": "tokens", "unit": "rpw", "value": 5, "target": "mcp_tools", "workspace_id": "ws"})
    );
    let mut bad = create.clone();
    bad.group_by.clear();
    assert_eq!(field_of(bad.validate().unwrap_err()), "group_by");
    let mut bad = create;
    bad.name = Some("n".repeat(256));
    assert_eq!(field_of(bad.validate().unwrap_err()), "name");

    let update = UpdateRateLimitsPolicyRequest {
        value: Some(10.0),
        ..Default::default()
    };
    assert_eq!(serde_json::to_value(&update).unwrap(), json!({"value": 10}));
    assert!(UpdateRateLimitsPolicyRequest::default().validate().is_err());

    let created: PolicyCreated = read(r#"{"id":"p1","object":"policy_rate_limits"}"#);
    assert_eq!(created.id, "p1");
    let q = RateLimitsListQuery {
        status: Some(PolicyStatus::Archived),
        page_size: Some(50),
        ..Default::default()
    };
    assert_eq!(
        q.to_pairs(),
        [
            ("status", "archived".to_owned()),
            ("page_size", "50".to_owned())
        ]
    );
}

#[test]
fn every_error_body_shape() {
    let all: Value = serde_json::from_str(fixture!("errors.json")).unwrap();
    let body = |k: &str| ApiErrorBody::from_value(&all[k]).unwrap();
    assert_eq!(body("seed_envelope").param.as_deref(), Some("page_size"));
    assert_eq!(body("rbac").code.as_deref(), Some("AB03"));
    assert_eq!(body("portkey").code.as_deref(), Some("AB08"));
    assert_eq!(body("opa").message.as_deref(), Some("Access denied"));
    assert_eq!(
        body("rate_limited").retry_after,
        Some(std::time::Duration::from_secs(2))
    );
    let typed: ErrorEnvelope = serde_json::from_value(all["seed_envelope"].clone()).unwrap();
    assert_eq!(typed.error.error_type, "invalid_request_error");
}

/// An update body that sets nothing is refused as the `body`, each kind with the wording it has
/// always had; one set field gets past that check.
#[test]
fn an_update_that_sets_nothing_is_refused() {
    fn reason<T: Validate + Default>() -> String {
        match T::default().validate() {
            Err(ApiError::Validation { field, reason }) if field == "body" => reason,
            other => panic!("expected a body validation error, got {other:?}"),
        }
    }
    let set = "must set at least one field";
    assert_eq!(reason::<UpdateConfigRequest>(), set);
    assert_eq!(reason::<UpdateDeploymentRequest>(), set);
    assert_eq!(reason::<UpdateIntegrationRequest>(), set);
    assert_eq!(reason::<UpdateProviderRequest>(), set);
    assert_eq!(reason::<UpdateRateLimitsPolicyRequest>(), set);
    assert_eq!(reason::<UpdateApiKeyRequest>(), set);
    let names = "names no field to update";
    assert_eq!(reason::<UpdateMcpIntegrationRequest>(), names);
    assert_eq!(reason::<UpdateMcpServerRequest>(), names);
    assert_eq!(reason::<UpdateSecretReferenceRequest>(), names);
    assert_eq!(reason::<UpdateWorkspaceRequest>(), names);
    let icon_cleared = UpdateWorkspaceRequest {
        icon: Some(String::new()),
        ..Default::default()
    };
    assert!(icon_cleared.validate().is_ok());
    let described = UpdateMcpServerRequest {
        description: Some("d".into()),
        ..Default::default()
    };
    assert!(described.validate().is_ok());
}

mod unknown_fields;
