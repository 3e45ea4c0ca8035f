package health

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
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

const customizations = "../../integrations/argocd/aigw.io"

func kindDir(kind string) string { return filepath.Join(customizations, kind) }

func readScript(t *testing.T, kind string) string {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(kindDir(kind), "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(script)
}

// TestArgoCDHealthScripts runs every case of every health_test.yaml, both as an argocd-cm
// customization (base and table libraries only) and as Argo CD runs built-in scripts (all
// libraries), and checks that each kind's fixtures cover every status aigw can reach.
func TestArgoCDHealthScripts(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			script := readScript(t, k.kind)
			tests := readHealthTests(t, k.kind)
			seen := map[string]bool{}
			for _, c := range tests.Tests {
				obj := readFixture(t, k.kind, c.InputPath)
				for _, openLibs := range []bool{false, true} {
					got, err := RunHealthScript(obj, script, openLibs)
					if err != nil {
						t.Fatalf("%s (open libs %v): %v", c.InputPath, openLibs, err)
					}
					if got != c.HealthStatus {
						t.Errorf("%s (open libs %v): got %+v, want %+v", c.InputPath, openLibs, got, c.HealthStatus)
					}
				}
				seen[c.HealthStatus.Status] = true
				t.Logf("%s -> %s: %s", c.InputPath, c.HealthStatus.Status, c.HealthStatus.Message)
			}
			want := []string{"Healthy", "Progressing", "Degraded"}
			if k.managed {
				want = append(want, "Suspended")
			}
			for _, s := range want {
				if !seen[s] {
					t.Errorf("no fixture of %s is %s", k.kind, s)
				}
			}
		})
	}
}

// TestManagedScriptsAreOne keeps the managed kinds' scripts identical: they share one status
// contract, and Argo CD needs one copy per kind.
func TestManagedScriptsAreOne(t *testing.T) {
	config := readScript(t, "Config")
	for _, k := range kinds {
		if k.managed && readScript(t, k.kind) != config {
			t.Errorf("%s/health.lua differs from Config/health.lua", k.kind)
		}
	}
}

// TestArgoCDConfigMapInSync checks integrations/argocd/argocd-cm.yaml against the scripts
// (rewritten with -update) and that it parses back to exactly those scripts.
func TestArgoCDConfigMapInSync(t *testing.T) {
	path := filepath.Join("..", "..", "integrations", "argocd", "argocd-cm.yaml")
	scripts := map[string]string{}
	for _, k := range kinds {
		scripts[k.kind] = readScript(t, k.kind)
	}
	want := renderConfigMap(scripts)
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is out of date: run `cd hack/health && go test -run TestArgoCDConfigMapInSync -update`", path)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(got, &cm); err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != len(scripts) {
		t.Errorf("argocd-cm.yaml has %d keys, want %d", len(cm.Data), len(scripts))
	}
	for kind, script := range scripts {
		if cm.Data["resource.customizations.health.aigw.io_"+kind] != script {
			t.Errorf("the %s script does not parse back from argocd-cm.yaml unchanged", kind)
		}
	}
}

// renderConfigMap writes the argocd-cm keys that install the scripts, one literal block each.
func renderConfigMap(scripts map[string]string) string {
	var b strings.Builder
	b.WriteString(`# Generated from integrations/argocd/aigw.io/*/health.lua by hack/health
# (go test -run TestArgoCDConfigMapInSync -update); do not edit.
# Merge it into Argo CD's ConfigMap, keeping its other keys:
#   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file integrations/argocd/argocd-cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
  labels:
    app.kubernetes.io/name: argocd-cm
    app.kubernetes.io/part-of: argocd
data:
`)
	names := make([]string, 0, len(scripts))
	for kind := range scripts {
		names = append(names, kind)
	}
	sort.Strings(names)
	for _, kind := range names {
		b.WriteString("  resource.customizations.health.aigw.io_" + kind + ": |\n")
		for _, line := range strings.Split(strings.TrimSuffix(scripts[kind], "\n"), "\n") {
			if line == "" {
				b.WriteString("\n")
			} else {
				b.WriteString("    " + line + "\n")
			}
		}
	}
	return b.String()
}

func readHealthTests(t *testing.T, kind string) healthTests {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(kindDir(kind), "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests healthTests
	if err := yaml.UnmarshalStrict(text, &tests); err != nil {
		t.Fatalf("%s/health_test.yaml: %v", kind, err)
	}
	if len(tests.Tests) == 0 {
		t.Fatalf("%s/health_test.yaml has no tests", kind)
	}
	return tests
}

func readFixture(t *testing.T, kind, inputPath string) map[string]any {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(kindDir(kind), inputPath))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(text, &obj); err != nil {
		t.Fatalf("%s/%s: %v", kind, inputPath, err)
	}
	return obj
}

// writeFixture saves an object read from the apiserver, less the fields that change on every
// run without saying anything about health.
func writeFixture(t *testing.T, kind, name string, live *unstructured.Unstructured) {
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
	if err := os.WriteFile(filepath.Join(kindDir(kind), "testdata", name), append([]byte(header), text...), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeHealthTests(t *testing.T, kind string, cases []healthCase) {
	t.Helper()
	text, err := yaml.Marshal(healthTests{Tests: cases})
	if err != nil {
		t.Fatal(err)
	}
	header := "# Generated by hack/health (go test -update) with the fixtures under testdata/; do not edit.\n"
	if err := os.WriteFile(filepath.Join(kindDir(kind), "health_test.yaml"), append([]byte(header), text...), 0o644); err != nil {
		t.Fatal(err)
	}
}
