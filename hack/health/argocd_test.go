package health

import (
	"fmt"
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

// customizations is the wildcard script's directory, in Argo CD's resource_customizations
// layout: <group>/<kind>, `_` standing for any kind (Argo CD's own `_.crossplane.io/_` does the
// same for the groups under crossplane.io). One health_test.yaml holds every kind's cases, its
// fixtures are testdata/<kind>_<state>.yaml.
const customizations = "../../integrations/argocd/aigw.io/_"

// fixturePrefix is how a kind's fixtures are named under testdata/.
func fixturePrefix(kind string) string { return "testdata/" + strings.ToLower(kind) + "_" }

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
// libraries), and checks that the fixtures of every kind of the registry cover each state aigw
// can reach: Healthy, Progressing, Degraded, Suspended (a kind that can be paused) and no
// status at all.
func TestArgoCDHealthScript(t *testing.T) {
	script := readScript(t)
	tests := readHealthTests(t)
	seen := map[string]map[string]bool{}
	for _, c := range tests.Tests {
		obj := readFixture(t, c.InputPath)
		kind, _ := obj["kind"].(string)
		if !strings.HasPrefix(c.InputPath, fixturePrefix(kind)) {
			t.Errorf("%s holds a %s: its name does not say so", c.InputPath, kind)
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
		if seen[kind] == nil {
			seen[kind] = map[string]bool{}
		}
		seen[kind][c.HealthStatus.Status] = true
		if _, has := obj["status"]; !has {
			seen[kind]["no status"] = true
		}
		t.Logf("%s -> %s: %s", c.InputPath, c.HealthStatus.Status, c.HealthStatus.Message)
	}
	for _, k := range kinds {
		want := []string{"Healthy", "Progressing", "Degraded", "no status"}
		if k.managed {
			want = append(want, "Suspended")
		}
		for _, s := range want {
			if !seen[k.kind][s] {
				t.Errorf("no fixture of %s is %s", k.kind, s)
			}
		}
		delete(seen, k.kind)
	}
	for kind := range seen {
		t.Errorf("fixtures of %s, a kind the registry does not list", kind)
	}
}

// TestKindsAreTheRegistrys checks this module's table of kinds against crds/, which aigw
// generates from its registry of kinds (src/registry.rs; a Rust test keeps crds/ equal to it):
// the same kinds, resources and scopes, so a new kind cannot miss its health checks.
func TestKindsAreTheRegistrys(t *testing.T) {
	registry := registryKinds(t)
	table := map[string]crdKind{}
	for _, k := range kinds {
		table[k.kind] = crdKind{Kind: k.kind, Plural: k.resource, Namespaced: k.namespaced}
	}
	if len(table) != len(registry) {
		t.Errorf("the kinds table has %d kinds, crds/ %d", len(table), len(registry))
	}
	for _, want := range registry {
		if got, ok := table[want.Kind]; !ok || got != want {
			t.Errorf("kinds table: %+v, crds/: %+v", got, want)
		}
	}
}

// crdKind is what a CRD of crds/ says of its kind.
type crdKind struct {
	Kind       string
	Plural     string
	Namespaced bool
}

// registryKinds reads the kinds of crds/, sorted by kind.
func registryKinds(t *testing.T) []crdKind {
	t.Helper()
	kinds, err := crdKinds(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

// crdKinds reads the kinds of the CRDs under root/crds/, sorted by kind.
func crdKinds(root string) ([]crdKind, error) {
	files, err := filepath.Glob(filepath.Join(root, "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	var kinds []crdKind
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var crd struct {
			Kind string `json:"kind"`
			Spec struct {
				Names struct {
					Kind   string `json:"kind"`
					Plural string `json:"plural"`
				} `json:"names"`
				Scope string `json:"scope"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(text, &crd); err != nil {
			// The admission policies file holds several documents; it names no kind.
			continue
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		kinds = append(kinds, crdKind{Kind: crd.Spec.Names.Kind, Plural: crd.Spec.Names.Plural, Namespaced: crd.Spec.Scope == "Namespaced"})
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("no CRD under %s/crds", root)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].Kind < kinds[j].Kind })
	return kinds, nil
}

// TestArgoCDConfigMapsInSync checks the two argocd-cm forms against the script (rewritten with
// -update) and that each parses back to exactly the script: argocd-cm.yaml, one wildcard key
// for the group; argocd-cm-per-kind.yaml, one key per kind of crds/ (the registry), for an Argo
// CD that cannot take wildcard keys.
func TestArgoCDConfigMapsInSync(t *testing.T) {
	script := readScript(t)
	var perKind []string
	for _, k := range registryKinds(t) {
		perKind = append(perKind, k.Kind)
	}
	for file, keys := range map[string][]string{
		"argocd-cm.yaml":          {"*"},
		"argocd-cm-per-kind.yaml": perKind,
	} {
		path := filepath.Join("..", "..", "integrations", "argocd", file)
		want := renderConfigMap(file, keys, script)
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
			t.Fatalf("%s is out of date: run `cd hack/health && go test -run TestArgoCDConfigMapsInSync -update`", path)
		}
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(got, &cm); err != nil {
			t.Fatal(err)
		}
		if len(cm.Data) != len(keys) {
			t.Errorf("%s has %d keys, want %d", file, len(cm.Data), len(keys))
		}
		for _, key := range keys {
			if cm.Data["resource.customizations.health.aigw.io_"+key] != script {
				t.Errorf("%s: the script of key %s does not parse back unchanged", file, key)
			}
		}
	}
}

// renderConfigMap writes the argocd-cm keys (`resource.customizations.health.aigw.io_<key>`)
// that install the script, one literal block each.
func renderConfigMap(file string, keys []string, script string) string {
	var b strings.Builder
	b.WriteString("# Generated from integrations/argocd/aigw.io/_/health.lua")
	if len(keys) > 1 || keys[0] != "*" {
		b.WriteString(" and the kinds of crds/")
	}
	b.WriteString(` by hack/health
# (go test -run TestArgoCDConfigMapsInSync -update); do not edit.
`)
	if keys[0] == "*" {
		b.WriteString(`# One wildcard key for every aigw.io kind. Where Argo CD cannot take wildcard keys, use
# argocd-cm-per-kind.yaml (the same script under one key per kind) instead.
`)
	} else {
		b.WriteString(`# The same script as argocd-cm.yaml's wildcard key, under one key per kind, for an Argo CD
# that cannot take wildcard keys.
`)
	}
	b.WriteString(`# Merge it into Argo CD's ConfigMap, keeping its other keys:
#   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file integrations/argocd/` + file + `
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
	for _, key := range keys {
		b.WriteString("  resource.customizations.health.aigw.io_" + key + ": |\n")
		for _, line := range strings.Split(strings.TrimSuffix(script, "\n"), "\n") {
			if line == "" {
				b.WriteString("\n")
			} else {
				b.WriteString("    " + line + "\n")
			}
		}
	}
	return b.String()
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
	path := filepath.Join(customizations, fixturePrefix(kind)+name)
	if err := os.WriteFile(path, append([]byte(header), text...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeHealthTests replaces kind's cases in the health_test.yaml with cases, keeping the other
// kinds' (the cases sorted by fixture).
func writeHealthTests(t *testing.T, kind string, cases []healthCase) {
	t.Helper()
	var all []healthCase
	if text, err := os.ReadFile(filepath.Join(customizations, "health_test.yaml")); err == nil {
		var tests healthTests
		if err := yaml.UnmarshalStrict(text, &tests); err != nil {
			t.Fatal(err)
		}
		for _, c := range tests.Tests {
			if !strings.HasPrefix(c.InputPath, fixturePrefix(kind)) {
				all = append(all, c)
			}
		}
	}
	all = append(all, cases...)
	sort.Slice(all, func(i, j int) bool { return all[i].InputPath < all[j].InputPath })
	text, err := yaml.Marshal(healthTests{Tests: all})
	if err != nil {
		t.Fatal(err)
	}
	header := "# Generated by hack/health (go test -update) with the fixtures under testdata/; do not edit.\n"
	if err := os.WriteFile(filepath.Join(customizations, "health_test.yaml"), append([]byte(header), text...), 0o644); err != nil {
		t.Fatal(err)
	}
}
