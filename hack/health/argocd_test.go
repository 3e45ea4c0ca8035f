package health

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// healthCase is one entry of a health_test.yaml, in the layout of Argo CD's
// resource_customizations.
type healthCase struct {
	HealthStatus HealthStatus `json:"healthStatus"`
	InputPath    string       `json:"inputPath"`
}

type healthTests struct {
	Tests []healthCase `json:"tests"`
}

// customizations is the wildcard script's directory, in Argo CD's resource_customizations
// layout: <group>/<kind>, `_` standing for any kind (Argo CD's own `_.crossplane.io/_` does the
// same for the groups under crossplane.io). Its health_test.yaml holds one case per state, its
// fixtures are testdata/<state>.yaml: the script is the same for every kind, so the fixtures are
// per state, not per kind (the live test, kstatus_test.go, puts every kind through every state).
const customizations = "../../integrations/argocd/aigw.io/_"

func readScript(t *testing.T) string {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(customizations, "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(script)
}

// TestArgoCDHealthScript runs every case of the health_test.yaml, both as an argocd-cm
// customization (base and table libraries only) and as Argo CD runs built-in scripts (all
// libraries), and checks that the fixtures are the states of fixtureKind, one each: Healthy
// (drifted or not), Progressing (no status, reconciling, held by its promotion gate, a new
// generation), Degraded and Suspended.
func TestArgoCDHealthScript(t *testing.T) {
	script := readScript(t)
	tests := readHealthTests(t)
	want := map[string]HealthStatus{}
	for _, k := range registry(t) {
		if k.kind == fixtureKind {
			for _, s := range k.steps() {
				want["testdata/"+s.fixture] = s.health
			}
		}
	}
	if len(want) == 0 {
		t.Fatalf("the fixture kind %s is not among the kinds of crds/", fixtureKind)
	}
	for _, c := range tests.Tests {
		obj := readFixture(t, c.InputPath)
		if obj["kind"] != fixtureKind {
			t.Errorf("%s holds a %v, the fixtures are of %s", c.InputPath, obj["kind"], fixtureKind)
		}
		for _, openLibs := range []bool{false, true} {
			got, err := RunHealthScript(obj, script, openLibs)
			if err != nil {
				t.Fatalf("%s (open libs %v): %v", c.InputPath, openLibs, err)
			}
			if got != c.HealthStatus {
				t.Errorf("%s (open libs %v): got %+v, want %+v", c.InputPath, openLibs, got, c.HealthStatus)
			}
		}
		if health, ok := want[c.InputPath]; !ok {
			t.Errorf("%s is not a state of %s", c.InputPath, fixtureKind)
		} else if health != c.HealthStatus {
			t.Errorf("%s: the case says %+v, the state %+v", c.InputPath, c.HealthStatus, health)
		}
		delete(want, c.InputPath)
		t.Logf("%s -> %s: %s", c.InputPath, c.HealthStatus.Status, c.HealthStatus.Message)
	}
	for fixture := range want {
		t.Errorf("no case for the state %s", fixture)
	}
	files, err := filepath.Glob(filepath.Join(customizations, "testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(tests.Tests) {
		t.Errorf("testdata/ holds %d files, health_test.yaml %d cases", len(files), len(tests.Tests))
	}
}

// TestEveryKindHasItsHealthInputs derives what the health tests need of every kind of crds/
// (aigw's registry of kinds, src/registry.rs; a Rust test keeps crds/ equal to it) from its CRD
// and its example, so a new kind cannot miss its health checks and needs no edit here; and
// checks that the fixture kind reaches every state.
func TestEveryKindHasItsHealthInputs(t *testing.T) {
	kinds := registry(t)
	for _, k := range kinds {
		t.Logf("%s: %s, managed %v, promotion gate %v, spec bump %v, settled %v", k.kind, k.resource, k.managed, k.gated != nil, k.bump, k.settled)
		if k.kind == fixtureKind && (!k.managed || k.gated == nil) {
			t.Errorf("the fixture kind %s does not reach every state (managed %v, promotion gate %v)", k.kind, k.managed, k.gated != nil)
		}
	}
}

// registry is every kind of crds/, as registryKinds derives it.
func registry(t *testing.T) []kind {
	t.Helper()
	kinds, err := registryKinds(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

// TestArgoCDConfigMapInstallsTheScript checks that the wildcard argocd-cm form,
// integrations/argocd/argocd-cm.yaml, holds exactly the script under its one key. aigw renders
// it (`aigw argocd-cm`, and `aigw argocd-cm --per-kind` for the per-kind form), and a Rust test
// (argocd::tests) keeps the committed file equal to what it prints.
func TestArgoCDConfigMapInstallsTheScript(t *testing.T) {
	script := readScript(t)
	got, err := os.ReadFile(filepath.Join("..", "..", "integrations", "argocd", "argocd-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(got, &cm); err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 1 || cm.Data["resource.customizations.health.aigw.io_*"] != script {
		t.Errorf("argocd-cm.yaml does not hold the script under the one key resource.customizations.health.aigw.io_*: " +
			"run `cargo run -- argocd-cm > integrations/argocd/argocd-cm.yaml`")
	}
}

func readHealthTests(t *testing.T) healthTests {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(customizations, "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests healthTests
	if err := yaml.UnmarshalStrict(text, &tests); err != nil {
		t.Fatalf("health_test.yaml: %v", err)
	}
	if len(tests.Tests) == 0 {
		t.Fatalf("health_test.yaml has no tests")
	}
	return tests
}

func readFixture(t *testing.T, inputPath string) map[string]any {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(customizations, inputPath))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(text, &obj); err != nil {
		t.Fatalf("%s: %v", inputPath, err)
	}
	return obj
}

// writeFixture saves an object read from the apiserver as the fixture of a state, less the
// fields that change on every run without saying anything about health.
func writeFixture(t *testing.T, fixture string, live *unstructured.Unstructured) {
	t.Helper()
	obj := live.DeepCopy()
	obj.SetManagedFields(nil)
	obj.SetUID("")
	obj.SetResourceVersion("")
	text, err := yaml.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	header := "# Read back from the local apiserver by hack/health (go test -update): status written as aigw writes it.\n"
	if err := os.MkdirAll(filepath.Join(customizations, "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(customizations, "testdata", fixture)
	if err := os.WriteFile(path, append([]byte(header), text...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeHealthTests replaces the health_test.yaml with cases (sorted by fixture).
func writeHealthTests(t *testing.T, cases []healthCase) {
	t.Helper()
	sort.Slice(cases, func(i, j int) bool { return cases[i].InputPath < cases[j].InputPath })
	text, err := yaml.Marshal(healthTests{Tests: cases})
	if err != nil {
		t.Fatal(err)
	}
	header := "# Generated by hack/health (go test -update) with the fixtures under testdata/; do not edit.\n"
	if err := os.WriteFile(filepath.Join(customizations, "health_test.yaml"), append([]byte(header), text...), 0o644); err != nil {
		t.Fatal(err)
	}
}
