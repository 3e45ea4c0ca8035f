package health

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the Argo CD fixtures and the health_test.yaml from the fixture kind's states")

// testNamespace holds the namespaced objects; the local apiserver never finishes deleting a
// namespace (no namespace controller), so it is reused across runs.
const testNamespace = "aigw-health"

// TestKstatusOnTheLiveAPIServer puts one object of every aigw kind through each state aigw
// reports, writing the status subresource as the operator does (server-side apply under its
// field manager), and checks what kstatus and the Argo CD health script say of the object read
// back. Every kind of crds/ goes through every state it can reach. With -update it saves the
// objects of fixtureKind as the Argo CD fixtures, one per state.
func TestKstatusOnTheLiveAPIServer(t *testing.T) {
	client := liveCluster(t)
	ensureNamespace(t, client)
	for _, k := range registry(t) {
		t.Run(k.kind, func(t *testing.T) {
			objects := resourceClient(client, k)
			name := createFromExample(t, objects, k)
			var cases []healthCase
			for _, s := range k.steps() {
				live := applyStep(t, objects, k, name, s)
				result, err := status.Compute(live)
				if err != nil {
					t.Fatalf("%s: kstatus: %v", s.fixture, err)
				}
				if result.Status != s.kstatus {
					t.Errorf("%s: kstatus %s (%s), want %s", s.fixture, result.Status, result.Message, s.kstatus)
				}
				health, err := RunHealthScript(live.Object, readScript(t), false)
				if err != nil {
					t.Fatalf("%s: %v", s.fixture, err)
				}
				if health != s.health {
					t.Errorf("%s: Argo CD health %+v, want %+v", s.fixture, health, s.health)
				}
				t.Logf("%s: kstatus %s, Argo CD %s: %s", s.fixture, result.Status, health.Status, health.Message)
				cases = append(cases, healthCase{HealthStatus: s.health, InputPath: "testdata/" + s.fixture})
				if *update && k.kind == fixtureKind {
					writeFixture(t, s.fixture, live)
				}
			}
			if *update && k.kind == fixtureKind {
				writeHealthTests(t, cases)
			}
			if err := objects.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete %s %s: %v", k.kind, name, err)
			}
		})
	}
}

func resourceClient(client dynamic.Interface, k kind) dynamic.ResourceInterface {
	gvr := schema.GroupVersionResource{Group: "aigw.io", Version: "v1alpha1", Resource: k.resource}
	if k.namespaced {
		return client.Resource(gvr).Namespace(testNamespace)
	}
	return client.Resource(gvr)
}

func ensureNamespace(t *testing.T, client dynamic.Interface) {
	t.Helper()
	namespaces := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": testNamespace},
	}}
	_, err := namespaces.Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", testNamespace, err)
	}
}

// createFromExample creates the object of examples/<file> afresh (no operator runs here, so
// nothing holds a finalizer and a leftover from an earlier run deletes at once).
func createFromExample(t *testing.T, objects dynamic.ResourceInterface, k kind) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", k.example))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(text, &obj.Object); err != nil {
		t.Fatalf("examples/%s: %v", k.example, err)
	}
	// Claimed by an installation of its own: an operator running meanwhile (`make demo`) leaves
	// the object, and for a Connection every object naming it, untouched.
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations["aigw.io/installation"] = "hack-health"
	obj.SetAnnotations(annotations)
	ctx := context.Background()
	name := obj.GetName()
	// A leftover may hold aigw's finalizer (e.g. the ClusterGuardrail of `make demo`, whose
	// operator is stopped): no operator runs here to release it.
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := objects.Patch(ctx, name, types.MergePatchType, unfinalize, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("release leftover %s %s: %v", k.kind, name, err)
	}
	if err := objects.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete leftover %s %s: %v", k.kind, name, err)
	}
	waitGone(t, objects, name)
	if _, err := objects.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s: %v", k.kind, name, err)
	}
	return name
}

// waitGone waits until a deleted object is no longer served (deletion is immediate without
// finalizers, but the watch cache the next create checks may lag for a moment).
func waitGone(t *testing.T, objects dynamic.ResourceInterface, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := objects.Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists 30 s after its deletion (err: %v)", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// applyStep brings the object into the state of s and returns it as the apiserver serves it.
func applyStep(t *testing.T, objects dynamic.ResourceInterface, k kind, name string, s step) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	paused := any(nil)
	if s.paused {
		paused = "true"
	}
	patch(t, objects, name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{"aigw.io/paused": paused}}})
	if s.write != nil {
		current, err := objects.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s %s: %v", k.kind, name, err)
		}
		body := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "aigw.io/v1alpha1", "kind": k.kind,
			"metadata": map[string]any{"name": name, "namespace": current.GetNamespace()},
			"status":   statusFor(k, s, current.GetGeneration()),
		}}
		if _, err := objects.ApplyStatus(ctx, name, body, metav1.ApplyOptions{FieldManager: k.manager, Force: true}); err != nil {
			t.Fatalf("write the status of %s %s: %v", k.kind, name, err)
		}
	}
	if s.bump {
		patch(t, objects, name, k.bump)
	}
	live, err := objects.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s %s: %v", k.kind, name, err)
	}
	return live
}

func patch(t *testing.T, objects dynamic.ResourceInterface, name string, body map[string]any) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := objects.Patch(context.Background(), name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch %s with %s: %v", name, data, err)
	}
}

// statusFor is the status aigw writes for s: the three kstatus conditions as record_outcome
// sets them, Paused and Drifted when they apply, and the kind's own fields once the remote
// object exists.
func statusFor(k kind, s step, generation int64) map[string]any {
	o := *s.write
	now := time.Now().UTC().Format(time.RFC3339)
	condition := func(kind string, on bool, message string) map[string]any {
		value := "False"
		if on {
			value = "True"
		}
		return map[string]any{
			"type": kind, "status": value, "reason": o.reason, "message": message,
			"observedGeneration": generation, "lastTransitionTime": now,
		}
	}
	messageIf := func(on bool) string {
		if on {
			return o.message
		}
		return ""
	}
	conditions := []any{
		condition("Ready", o.state == "Ready", o.message),
		condition("Reconciling", o.state == "Progressing", messageIf(o.state == "Progressing")),
		condition("Stalled", o.state == "Stalled", messageIf(o.state == "Stalled")),
	}
	if s.paused {
		paused := condition("Paused", true, pausedMessage)
		paused["reason"] = "Paused"
		conditions = append(conditions, paused)
	}
	if s.drifted {
		drifted := condition("Drifted", true, driftedMessage)
		drifted["reason"] = "Drifted"
		conditions = append(conditions, drifted)
	}
	if s.gated {
		conditions = append(conditions, condition("Promoted", false, o.message))
	}
	result := map[string]any{"observedGeneration": generation, "conditions": conditions}
	if !s.creating {
		for key, value := range k.settled {
			result[key] = value
		}
	}
	return result
}
