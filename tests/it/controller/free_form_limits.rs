//! One tenant cannot stop the others (issue 27, review F1): the free-form fields are bounded at
//! admission, and a watch survives an object nested deeper than the client's JSON decoder reads
//! (one stored before the bounds, or written around them). Real apiserver, real emulator.

use crate::support;

use std::time::Duration;

use aigw::resources::{ADMISSION_POLICIES_FILE, Config};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::harness::Harness;
use support::objects::{Conditions, create, routing};

const WAIT: Duration = Duration::from_secs(60);
const DRIFT: Duration = Duration::from_secs(600);

/// The tests of this file switch the Config policy's binding off and on: one at a time.
static POLICIES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Creates the object of `body` (JSON text) in `namespace` with a raw POST, without decoding
/// the answer (kube-client could not decode an object this deep).
async fn create_raw(
    client: &kube::Client,
    plural: &str,
    namespace: &str,
    body: String,
) -> Result<(), kube::Error> {
    support::post_raw(client, plural, namespace, body, &PostParams::default()).await
}

fn refusal(error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} {}", status.code, status.message),
        other => panic!("expected the apiserver to refuse, got {other}"),
    }
}

/// Creates the object of `body` in `env`'s namespace: refused, naming `field` as nested
/// deeper than 32 levels; the refusal (`code message`).
async fn refused_too_deep(
    env: &support::TestEnv,
    plural: &str,
    body: String,
    field: &str,
) -> String {
    let error = create_raw(&env.client, plural, &env.namespace, body)
        .await
        .expect_err(&format!("a 150-deep {field} was accepted"));
    let message = refusal(error);
    assert!(
        message.contains(&format!("{field}: nested deeper than 32 levels")),
        "{message}"
    );
    message
}

#[tokio::test]
async fn free_form_fields_nested_150_levels_are_refused_at_admission_naming_the_field() {
    let _one_at_a_time = POLICIES.lock().await;
    let env = support::TestEnv::new("ff-admit").await;
    let ns = &env.namespace;

    let config = support::deep_config("deep", ns, 150);
    let message = refused_too_deep(&env, "configs", config, "spec.config").await;
    assert!(message.starts_with("422"), "{message}");

    // The second check's parameters: the message names the list field.
    let guardrail = json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Guardrail",
        "metadata": {"name": "deep", "namespace": ns},
        "spec": {"name": "deep", "workspaceId": "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c", "checks": [
            {"id": "default.regexMatch", "parameters": {"rule": "x"}},
            {"id": "default.regexMatch", "parameters": "DOC"},
        ]},
    });
    let guardrail = support::with_deep_doc(guardrail, 150);
    refused_too_deep(&env, "guardrails", guardrail, "spec.checks[].parameters").await;

    // ApiKey usageLimits.
    let api_key = json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "ApiKey",
        "metadata": {"name": "deep", "namespace": ns},
        "spec": {"name": "deep", "kind": "service", "scopes": ["completions.write"],
                 "secretRef": {"name": "deep"}, "usageLimits": "DOC"},
    });
    let api_key = support::with_deep_doc(api_key, 150);
    refused_too_deep(&env, "apikeys", api_key, "spec.usageLimits").await;

    // Within the bounds: spec.config (1) + metadata (1) + 30 = 32 levels, accepted.
    create_raw(
        &env.client,
        "configs",
        ns,
        support::deep_config("within", ns, 30),
    )
    .await
    .expect("a document 32 levels deep is within the bounds");
    env.cleanup().await;
}

/// A Config whose `spec.config` holds `values` values in all (itself included): `metadata`, a
/// map of maps of 100 numbers each, and one list of numbers for the rest.
fn config_of_values(name: &str, namespace: &str, values: usize) -> String {
    // spec.config, metadata and the list count 3; each inner map counts 1 + its numbers.
    let mut left = values - 3;
    let mut metadata = serde_json::Map::new();
    while left > 101 + 1 {
        let inner: serde_json::Map<String, Value> =
            (0..100).map(|i| (format!("n{i}"), json!(i))).collect();
        metadata.insert(format!("m{}", metadata.len()), Value::Object(inner));
        left -= 101;
    }
    let list: Vec<Value> = (0..left).map(|i| json!(i)).collect();
    metadata.insert("list".into(), Value::Array(list));
    let manifest = json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"name": name, "config": {"metadata": metadata}},
    });
    let config = &manifest["spec"]["config"];
    assert_eq!(aigw::resources::free_form::measure(config).1, values);
    manifest.to_string()
}

/// The value bound is enforced by the admission policy itself (within the apiserver's CEL cost
/// budget): a Config of exactly 25,000 values, maps and lists, is taken; one more is refused
/// naming the field.
#[tokio::test]
async fn a_free_form_field_of_25000_values_is_taken_and_one_more_is_refused() {
    let _one_at_a_time = POLICIES.lock().await;
    let env = support::TestEnv::new("ff-count").await;
    let ns = &env.namespace;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let at_bound = config_of_values("bound", ns, 25_000);
    support::post_raw(&env.client, "configs", ns, at_bound, &dry_run)
        .await
        .expect("a spec.config of 25,000 values is within the bounds");
    let over = config_of_values("over", ns, 25_001);
    let error = support::post_raw(&env.client, "configs", ns, over, &dry_run)
        .await
        .expect_err("a spec.config of 25,001 values was accepted");
    let message = refusal(error);
    assert!(
        message.contains("spec.config: more than 25000 values"),
        "{message}"
    );
    env.cleanup().await;
}

/// Lets `body` (a Config) past admission, as an object stored before the bounds existed: the
/// binding of the Config policy is removed until the apiserver takes the object, then put back.
async fn create_around_admission(client: &kube::Client, namespace: &str, body: String) {
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let binding = "aigw-free-form-limits.configs";
    // Absent on a build without the bounds: then there is nothing to go around.
    let _ = bindings.delete(binding, &Default::default()).await;
    let taken = support::wait_until(WAIT, || async {
        create_raw(client, "configs", namespace, body.clone())
            .await
            .ok()
    })
    .await;
    let policies = std::fs::read_to_string(
        support::repo_root()
            .join("crds")
            .join(ADMISSION_POLICIES_FILE),
    );
    if let Ok(text) = policies {
        // Waits until the binding is in force again: only then may the next test of this file
        // count on a refusal.
        support::install_admission_policies(client, &text).await;
    }
    taken.expect("the apiserver did not take the deep Config without its policy binding");
}

#[tokio::test]
async fn a_config_nested_150_levels_stops_no_other_config_after_a_restart() {
    let mut h = Harness::start_two_teams("ff-watch", DRIFT, None).await;
    let other = h.other.as_ref().unwrap();
    create::<Config>(&h.env, "before", routing("before")).await;
    h.wait_for::<Config>("before", WAIT, |c| c.ready()).await;

    {
        let _one_at_a_time = POLICIES.lock().await;
        let body = support::deep_config("deep", &other.namespace, 150);
        create_around_admission(&other.client, &other.namespace, body).await;
        // Another installation's deep object: reported in this one's log and metric only.
        let theirs = support::deep_config("theirs", &other.namespace, 150).replace(
            "\"metadata\":{\"name\"",
            "\"metadata\":{\"annotations\":{\"aigw.io/installation\":\"someone-else\"},\"name\"",
        );
        assert!(theirs.contains("someone-else"), "{theirs}");
        create_around_admission(&other.client, &other.namespace, theirs).await;
    }
    // A restart (a pod restart, a failover, a 410) lists every Config again.
    h.restart_operator().await;

    // Configs created after the restart, in both namespaces (the deep one's included), reconcile.
    h.ready_configs_in_both(("after", "neighbour"), WAIT).await;
    let other = h.other.as_ref().unwrap();

    // Ready (every cache listed: they list in turn, `--concurrent-lists`) and healthy (no
    // watch failing).
    let synced = support::wait_until(WAIT, || async { h.ctx.health.synced().then_some(()) });
    assert!(synced.await.is_some(), "a watch cache never listed");
    assert!(
        h.ctx.health.failing().is_empty(),
        "{:?}",
        h.ctx.health.failing()
    );

    // The deep object is reported: an Event on it naming the field, a metric, a log line.
    let events = support::wait_until(WAIT, || async {
        let text = other.events_text().await;
        text.contains("deep Unreadable").then_some(text)
    })
    .await;
    let Some(events) = events else {
        panic!(
            "no Unreadable event; events:\n{}",
            other.events_text().await
        );
    };
    assert!(
        events.contains("spec.config is nested 151 levels deep"),
        "{events}"
    );
    // Both were reported at the same relist; give a stray event on the other one time to land.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let events = other.events_text().await;
    assert!(
        !events.contains("theirs Unreadable"),
        "an event on another installation's object:\n{events}"
    );
    let metrics = h.ctx.metrics.encode();
    assert!(
        metrics.contains("aigw_unreadable_objects_total{kind=\"Config\"} 2"),
        "{metrics}"
    );
    let logs = support::harness::captured_logs();
    assert!(
        logs.contains(&format!("{}/deep", other.namespace))
            && logs.contains("cannot read this object"),
        "no log line names the deep object"
    );

    // With the bounds back in place, an update that leaves its spec alone (a label, or the
    // finalizer removed by hand) still passes, so the object can be cleaned up.
    let path = format!(
        "/apis/aigw.io/v1alpha1/namespaces/{}/configs",
        other.namespace
    );
    let label = json!({"metadata": {"labels": {"cleanup": "yes"}}});
    let request = kube::core::Request::new(path)
        .patch("deep", &PatchParams::default(), &Patch::Merge(label))
        .expect("request");
    other
        .client
        .request_text(request)
        .await
        .expect("a metadata-only update of the stored deep object was refused");
    // Gone, so that no later test of this cluster lists it (it has no finalizer: the operator
    // never read it).
    let path = format!(
        "/apis/aigw.io/v1alpha1/namespaces/{}/configs",
        other.namespace
    );
    for name in ["deep", "theirs"] {
        let request = kube::core::Request::new(path.clone())
            .delete(name, &Default::default())
            .expect("request");
        other
            .client
            .request_text(request)
            .await
            .expect("a deep Config could not be deleted");
    }
    h.stop().await;
}

/// The operator, holding the chart's RBAC, watches the admission policies of the free-form
/// fields: each one installed as `aigw crds` renders it reads as in force
/// (`aigw_admission_policy_in_force` 1, which also proves the comparison with what the
/// apiserver serves); a policy changed (here one rule added that refuses nothing, so that no
/// other test loses a refusal) goes to 0 with a warning that names it, and comes back when the
/// policies are applied again. The claim guard reads as in force from the same watches.
#[tokio::test]
async fn the_operator_tells_when_an_admission_policy_is_not_in_force() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
    let h = Harness::start("ff-guard").await;
    let _one_at_a_time = POLICIES.lock().await;
    let wanted: Vec<String> = aigw::resources::crds()
        .iter()
        .filter_map(|(_, crd)| aigw::resources::free_form::admission_policy(crd))
        .map(|[policy, _]| policy["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(wanted.len() >= 6, "{wanted:?}");
    let gauge = |metrics: &str, policy: &str| {
        let series = format!("aigw_admission_policy_in_force{{policy=\"{policy}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str())?.parse::<i64>().ok())
    };
    let all_in_force = support::wait_until(WAIT, || async {
        let metrics = h.ctx.metrics.encode();
        wanted
            .iter()
            .all(|p| gauge(&metrics, p) == Some(1))
            .then_some(())
    })
    .await;
    assert!(
        all_in_force.is_some(),
        "not every policy read as in force:\n{}",
        h.ctx.metrics.encode()
    );
    // The same watches keep the claim guard's state (`--claims auto`).
    assert!(h.ctx.installation.guard().in_force());
    // The dry-run probe (a Config holding a credential in plain text, in the operator's own
    // namespace, under the chart's RBAC) was refused by the Config policy: neither inconclusive
    // nor admitted.
    let logs = support::harness::captured_logs();
    for unwanted in [
        "cannot tell whether the apiserver enforces",
        "the apiserver does not enforce the admission policies",
    ] {
        assert!(!logs.contains(unwanted), "logged: {unwanted}");
    }

    let changed = "aigw-free-form-limits.apikeys";
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(h.env.client.clone());
    let add_rule =
        json!([{"op": "add", "path": "/spec/validations/-", "value": {"expression": "true"}}]);
    policies
        .patch(
            changed,
            &PatchParams::default(),
            &Patch::<Value>::Json(serde_json::from_value(add_rule).unwrap()),
        )
        .await
        .expect("the policy could not be changed");
    let out = support::wait_until(WAIT, || async {
        let metrics = h.ctx.metrics.encode();
        (gauge(&metrics, changed) == Some(0)).then_some(metrics)
    })
    .await;
    let restored = async {
        let text = std::fs::read_to_string(
            support::repo_root()
                .join("crds")
                .join(ADMISSION_POLICIES_FILE),
        )
        .unwrap();
        support::install_admission_policies(&h.env.client, &text).await;
    };
    let Some(metrics) = out else {
        restored.await;
        panic!("a changed policy still read as in force");
    };
    let others = wanted.iter().filter(|p| *p != changed);
    assert!(
        others.clone().all(|p| gauge(&metrics, p) == Some(1)),
        "{metrics}"
    );
    let logs = support::harness::captured_logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("the admission policy is not in force") && l.contains(changed)),
        "no warning names the policy"
    );

    restored.await;
    let back = support::wait_until(WAIT, || async {
        (gauge(&h.ctx.metrics.encode(), changed) == Some(1)).then_some(())
    })
    .await;
    assert!(
        back.is_some(),
        "the policy applied again never read as in force"
    );
    h.stop().await;
}

/// A guardrail's checks share the values bound of their `parameters` (25,000 in all), which
/// the admission policy counts in one expression: two checks of 12,500 values each (maps of
/// empty maps, the costliest shape to count) are admitted, not refused with "actual cost limit
/// exceeded" as two of 13,000 were when each check had a bound of its own; one value more is
/// refused naming the field.
#[tokio::test]
async fn a_guardrails_checks_share_the_values_bound() {
    let env = support::TestEnv::new("ff-checks").await;
    let guardrail = |each: usize| {
        let parameters: serde_json::Map<String, Value> =
            (1..each).map(|i| (format!("k{i}"), json!({}))).collect();
        let check = json!({"id": "default.regexMatch", "parameters": parameters});
        json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Guardrail",
            "metadata": {"name": "wide", "namespace": env.namespace},
            "spec": {"name": "wide", "workspaceId": "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c",
                     "checks": [check.clone(), check]},
        })
        .to_string()
    };
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    support::post_raw(
        &env.client,
        "guardrails",
        &env.namespace,
        guardrail(12_500),
        &dry_run,
    )
    .await
    .expect("two checks of 12,500 values each, 25,000 in all, are within the bound");
    let error = support::post_raw(
        &env.client,
        "guardrails",
        &env.namespace,
        guardrail(12_501),
        &dry_run,
    )
    .await
    .expect_err("25,002 values in all were admitted");
    let message = refusal(error);
    assert!(
        message
            .contains("spec.checks[].parameters: more than 25000 values, every entry's together"),
        "{message}"
    );
    env.cleanup().await;
}
