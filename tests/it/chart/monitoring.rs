//! Monitoring: the chart's alert rules and Grafana dashboard query what the operator exports, and
//! a running operator's `/metrics` counts resources by kind and condition.
//!
//! - Every metric, and every label, that the rules (charts/aigw/files/prometheus-rules.yaml, as
//!   `helm template` renders it) and the dashboard's queries (charts/aigw/files/grafana-dashboard.json)
//!   name is one the operator's registry exports: renaming a metric or a label in the operator,
//!   or misspelling one in a query, fails here. Queries are parsed by a PromQL parser, not
//!   searched for words. (`make alerts-test` tests the rules' firing with promtool.)
//! - Against the real apiserver and emulator: a Stalled Config, a paused Deployment whose
//!   rotation is due, counted on `/metrics` by kind, never by name; unpaused, it rotates and the
//!   count drops.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aigw::controller::Metrics;
use aigw::controller::runtime::{census, metrics};
use aigw::resources::{Config, Deployment};
use kube::api::{Patch, PatchParams};
use promql_parser::parser::{self, Expr};
use promql_parser::util::{ExprVisitor, walk_expr};
use serde_json::{Value, json};
use support::harness::Harness;
use support::objects::{Conditions, create, rotating_gateway, routing};
use support::repo_root;

const WAIT: Duration = Duration::from_secs(60);

/// Labels Prometheus gives every series it scrapes through the chart's ServiceMonitor (the
/// operator's own `endpoint` label wins over the target's: `honorLabels: true`).
const TARGET_LABELS: [&str; 6] = [
    "namespace",
    "job",
    "pod",
    "instance",
    "service",
    "container",
];

/// Sample names the operator exports, each with the label names its samples carry.
type Exported = BTreeMap<String, BTreeSet<String>>;

/// The operator's registry, every family given a sample so that its labels show, encoded and
/// read back as Prometheus would scrape it.
fn exported() -> Exported {
    let metrics = Metrics::default();
    metrics.observe_reconcile("Config", true, Duration::from_millis(5));
    metrics.drift_pass("Config", Duration::from_secs(2), 3);
    metrics.full_read_interval("Config", "default", Duration::from_secs(86_400));
    metrics.event_suppressed("Normal");
    metrics.would("Config", "WouldUpdate");
    metrics.drift_corrected("Config");
    metrics.observe_api_request(
        "PUT",
        "/ai_gw/v2/configs/{slug}",
        Some(200),
        Duration::from_millis(5),
    );
    metrics.set_leader(true);
    metrics.set_drift_interval(Duration::from_secs(600));
    metrics.set_lease_transitions(1);
    metrics.set_admission_policy_in_force("aigw-free-form-limits.configs", true);
    metrics.census("Config", &census::count(std::iter::empty::<&Config>()));

    let mut exported = Exported::new();
    for line in metrics.encode().lines() {
        if let Some(family) = line.strip_prefix("# TYPE ") {
            let (name, kind) = family.split_once(' ').expect("# TYPE name type");
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                "gauge" | "unknown" => &[""],
                other => panic!("a metric type this test does not know: {other} ({name})"),
            };
            for suffix in suffixes {
                exported.entry(format!("{name}{suffix}")).or_default();
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let (name, labels) = sample(line);
            exported.entry(name).or_default().extend(labels);
        }
    }
    exported
}

/// A sample line's metric name and label names (label values may hold `{`, `,` and `\"`).
fn sample(line: &str) -> (String, Vec<String>) {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    let name = line[..end].to_string();
    let mut labels = Vec::new();
    let Some(mut rest) = line[end..].strip_prefix('{') else {
        return (name, labels);
    };
    while let Some((label, after)) = rest.split_once("=\"") {
        labels.push(label.trim_start_matches(',').to_string());
        let mut chars = after.char_indices();
        let mut close = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    close = i;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[close + 1..];
        if rest.starts_with('}') {
            break;
        }
    }
    (name, labels)
}

/// What a query selects and groups by.
#[derive(Default)]
struct Names {
    /// Each selector's metric name (`None`: a selector without one) and matcher labels.
    selectors: Vec<(Option<String>, Vec<String>)>,
    /// Labels of `by`/`without`, `on`/`ignoring` and `group_left`/`group_right`.
    grouping: Vec<String>,
}

impl ExprVisitor for Names {
    type Error = std::convert::Infallible;

    fn pre_visit(&mut self, expr: &Expr) -> Result<bool, Self::Error> {
        let selector = match expr {
            Expr::VectorSelector(vs) => Some(vs),
            Expr::MatrixSelector(ms) => Some(&ms.vs),
            _ => None,
        };
        if let Some(vs) = selector {
            let mut labels: Vec<String> = vs
                .matchers
                .matchers
                .iter()
                .map(|m| m.name.clone())
                .collect();
            labels.extend(
                vs.matchers
                    .or_matchers
                    .iter()
                    .flatten()
                    .map(|m| m.name.clone()),
            );
            labels.retain(|l| l != "__name__");
            self.selectors.push((vs.name.clone(), labels));
        }
        match expr {
            Expr::Aggregate(aggregate) => {
                if let Some(modifier) = &aggregate.modifier {
                    self.grouping
                        .extend(modifier.labels().labels.iter().cloned());
                }
            }
            Expr::Binary(binary) => {
                if let Some(modifier) = &binary.modifier {
                    if let Some(matching) = &modifier.matching {
                        self.grouping
                            .extend(matching.labels().labels.iter().cloned());
                    }
                    if let Some(labels) = modifier.card.labels() {
                        self.grouping.extend(labels.labels.iter().cloned());
                    }
                }
            }
            _ => {}
        }
        Ok(true)
    }
}

/// Checks one query, adding what is wrong to `problems`; returns how many selectors it has.
fn check(query: &str, source: &str, exported: &Exported, problems: &mut Vec<String>) -> usize {
    // Grafana's interval macros stand where PromQL needs a duration.
    let promql = ["$__rate_interval", "$__interval", "$__range"]
        .iter()
        .fold(query.to_string(), |q, macro_| q.replace(macro_, "5m"));
    let expr = match parser::parse(&promql) {
        Ok(expr) => expr,
        Err(e) => {
            problems.push(format!("{source}: `{query}` is not PromQL: {e}"));
            return 0;
        }
    };
    let mut names = Names::default();
    let _ = walk_expr(&mut names, &expr);
    let all_labels: BTreeSet<&String> = exported.values().flatten().collect();
    for (name, labels) in &names.selectors {
        let Some(name) = name else {
            problems.push(format!(
                "{source}: a selector without a metric name in `{query}`"
            ));
            continue;
        };
        let Some(known) = exported.get(name) else {
            problems.push(format!(
                "{source}: {name} is not a metric aigw exports (in `{query}`)"
            ));
            continue;
        };
        for label in labels {
            if !known.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
                problems.push(format!(
                    "{source}: {name} has no label {label} (it has {known:?}; in `{query}`)"
                ));
            }
        }
    }
    for label in &names.grouping {
        if !all_labels.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
            problems.push(format!(
                "{source}: no aigw metric has the label {label} (in `{query}`)"
            ));
        }
    }
    names.selectors.len()
}

/// The PrometheusRule and the dashboard ConfigMap as `helm template` renders them with
/// `monitoring.enabled=true` (the helm of `hack/chart-check.sh`).
fn render() -> Vec<Value> {
    support::chart::render_templates(
        "aigw",
        "aigw-system",
        &[
            "templates/prometheusrule.yaml",
            "templates/grafana-dashboard.yaml",
        ],
        &["monitoring.enabled=true".to_string()],
    )
}

/// Every `expr` of a dashboard's panels and the metric queries of its variables
/// (`label_values(SELECTOR, LABEL)`: the selector, and the label it lists).
fn dashboard_queries(value: &Value, out: &mut Vec<(String, Option<String>)>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(expr)) = map.get("expr") {
                out.push((expr.clone(), None));
            }
            if map.get("type") == Some(&json!("query")) {
                let query = map["query"]
                    .as_str()
                    .or_else(|| map["query"]["query"].as_str())
                    .expect("a query variable's query");
                let (selector, label) = query
                    .strip_prefix("label_values(")
                    .and_then(|q| q.strip_suffix(')'))
                    .and_then(|q| q.rsplit_once(','))
                    .unwrap_or_else(|| panic!("a variable query this test does not read: {query}"));
                out.push((selector.trim().to_string(), Some(label.trim().to_string())));
            }
            map.values().for_each(|v| dashboard_queries(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| dashboard_queries(v, out)),
        _ => {}
    }
}

#[test]
fn the_alert_rules_and_the_dashboard_query_only_what_aigw_exports() {
    let exported = exported();
    assert!(
        exported.contains_key("aigw_reconciles_total")
            && exported.contains_key("aigw_api_request_duration_seconds_bucket")
            && exported["aigw_api_requests_total"].contains("endpoint"),
        "the exposition was not read: {exported:?}"
    );
    let rendered = render();
    let mut problems = Vec::new();

    let rule = rendered
        .iter()
        .find(|d| d["kind"] == "PrometheusRule")
        .expect("a PrometheusRule with monitoring.enabled=true");
    let rules: Vec<&Value> = rule["spec"]["groups"]
        .as_array()
        .expect("spec.groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").iter())
        .collect();
    let alerts: BTreeSet<&str> = rules.iter().filter_map(|r| r["alert"].as_str()).collect();
    for alert in [
        "AigwResourcesStalled",
        "AigwDriftCorrectionsHigh",
        "AigwManagementApiErrors",
        "AigwManagementApiThrottled",
        "AigwNoLeader",
        "AigwLeaderFlapping",
        "AigwRotationOverdue",
        "AigwDriftPassSlow",
        "AigwConfigRolledBack",
        "AigwReconcilePanicked",
        "AigwAdmissionPolicyNotInForce",
    ] {
        assert!(alerts.contains(alert), "no alert {alert} in {alerts:?}");
    }
    let mut rule_selectors = 0;
    for rule in &rules {
        let name = rule["alert"]
            .as_str()
            .or(rule["record"].as_str())
            .unwrap_or("?");
        let expr = rule["expr"].as_str().expect("every rule has an expr");
        rule_selectors += check(expr, &format!("rule {name}"), &exported, &mut problems);
    }

    let configmap = rendered
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("the dashboard ConfigMap with monitoring.enabled=true");
    let text = configmap["data"]["aigw.json"]
        .as_str()
        .expect("data aigw.json");
    let file =
        std::fs::read_to_string(repo_root().join("charts/aigw/files/grafana-dashboard.json"))
            .expect("charts/aigw/files/grafana-dashboard.json");
    assert_eq!(
        text.trim(),
        file.trim(),
        "the ConfigMap holds the dashboard file"
    );
    assert_eq!(configmap["metadata"]["labels"]["grafana_dashboard"], "1");
    let dashboard: Value = serde_json::from_str(text).expect("the dashboard is JSON");
    let mut queries = Vec::new();
    dashboard_queries(&dashboard, &mut queries);
    let mut dashboard_selectors = 0;
    for (query, listed_label) in &queries {
        dashboard_selectors += check(query, "dashboard", &exported, &mut problems);
        if let Some(label) = listed_label {
            let all_labels: BTreeSet<&String> = exported.values().flatten().collect();
            if !all_labels.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
                problems.push(format!(
                    "dashboard: a variable lists the label {label}, which no series has"
                ));
            }
        }
    }

    assert!(
        problems.is_empty(),
        "queries naming what aigw does not export:\n{}",
        problems.join("\n")
    );
    assert!(
        rule_selectors >= rules.len(),
        "{rule_selectors} selectors in {} rules",
        rules.len()
    );
    assert!(
        queries.len() >= 20 && dashboard_selectors >= queries.len(),
        "{} dashboard queries, {dashboard_selectors} selectors",
        queries.len()
    );
    println!(
        "{} rules ({rule_selectors} selectors) and {} dashboard queries ({dashboard_selectors} selectors) name only exported metrics",
        rules.len(),
        queries.len()
    );
}

#[test]
fn the_exposition_reader_takes_labels_whose_values_hold_braces_and_quotes() {
    let (name, labels) =
        sample(r#"aigw_api_requests_total{method="PUT",endpoint="/a/{slug}",status="x\"y,z"} 3"#);
    assert_eq!(name, "aigw_api_requests_total");
    assert_eq!(labels, ["method", "endpoint", "status"]);
    assert_eq!(sample("aigw_leader 1"), ("aigw_leader".to_string(), vec![]));
}

async fn scrape(addr: SocketAddr) -> String {
    let response = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("GET /metrics");
    assert_eq!(response.status(), 200);
    response.text().await.expect("/metrics body")
}

/// Scrapes until every line of `expected` is one of `/metrics`'s lines.
async fn scrape_until(addr: SocketAddr, expected: &[&str]) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let text = scrape(addr).await;
        let missing: Vec<&&str> = expected
            .iter()
            .filter(|line| !text.lines().any(|l| l == **line))
            .collect();
        if missing.is_empty() {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "/metrics still lacks {missing:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn metrics_count_stalled_resources_and_rotations_due_by_kind() {
    let h = Harness::start("monitoring").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(metrics::serve(listener, h.ctx.clone()));

    create::<Config>(&h.env, "mon-ready-cfg", routing("mon-ready-cfg")).await;
    // A blank name: refused before any call, Stalled until the spec changes.
    create::<Config>(&h.env, "mon-blank-cfg", routing("   ")).await;
    let spec = rotating_gateway("mon-edge-gw", "mon-edge-gw-creds", "a");
    create::<Deployment>(&h.env, "mon-edge-gw", spec).await;
    h.wait_for::<Config>("mon-ready-cfg", WAIT, |c| c.ready())
        .await;
    h.wait_for::<Config>("mon-blank-cfg", WAIT, |c| {
        c.condition("Stalled")
            .is_some_and(|(status, _, _)| status == "True")
    })
    .await;
    h.wait_for::<Deployment>("mon-edge-gw", WAIT, |d| d.ready())
        .await;

    // Paused, then its trigger changed: the rotation is due, and waits.
    let deployments = h.env.api::<Deployment>();
    let annotate = |paused: Value| json!({"metadata": {"annotations": {"aigw.io/paused": paused}}});
    deployments
        .patch(
            "mon-edge-gw",
            &PatchParams::default(),
            &Patch::Merge(&annotate(json!("true"))),
        )
        .await
        .unwrap();
    h.wait_for::<Deployment>("mon-edge-gw", WAIT, |d| {
        d.condition("Paused")
            .is_some_and(|(status, _, _)| status == "True")
    })
    .await;
    support::merge_patch(
        &deployments,
        "mon-edge-gw",
        json!({"spec": {"rotation": {"trigger": "b"}}}),
    )
    .await;

    let text = scrape_until(
        addr,
        &[
            r#"aigw_resources{kind="Config"} 2"#,
            r#"aigw_resource_conditions{kind="Config",condition="Ready"} 1"#,
            r#"aigw_resource_conditions{kind="Config",condition="Stalled"} 1"#,
            r#"aigw_resources{kind="Deployment"} 1"#,
            r#"aigw_resource_conditions{kind="Deployment",condition="Paused"} 1"#,
            r#"aigw_rotations_due{kind="Deployment"} 1"#,
            r#"aigw_rotations_due{kind="Config"} 0"#,
            r#"aigw_resources{kind="ApiKey"} 0"#,
            "aigw_drift_interval_seconds 600.0",
        ],
    )
    .await;
    for name in [
        "mon-ready-cfg",
        "mon-blank-cfg",
        "mon-edge-gw",
        h.env.namespace.as_str(),
    ] {
        assert!(!text.contains(name), "/metrics names {name}:\n{text}");
    }
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("aigw_leader_lease_transitions")),
        "no Lease without leader election, so no lease transitions: {text}"
    );

    // Unpaused, it rotates: nothing is due any more.
    deployments
        .patch(
            "mon-edge-gw",
            &PatchParams::default(),
            &Patch::Merge(&annotate(Value::Null)),
        )
        .await
        .unwrap();
    h.wait_for::<Deployment>("mon-edge-gw", WAIT, |d| {
        d.ready()
            && d.status
                .as_ref()
                .and_then(|s| s.rotation.observed_rotation_trigger.as_deref())
                == Some("b")
    })
    .await;
    scrape_until(
        addr,
        &[
            r#"aigw_rotations_due{kind="Deployment"} 0"#,
            r#"aigw_resource_conditions{kind="Deployment",condition="Paused"} 0"#,
        ],
    )
    .await;
    h.stop().await;
}
