package health

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

// outcome is one reconcile conclusion as aigw's controller::status::record_outcome writes it.
type outcome struct {
	state   string // Ready, Progressing or Stalled
	reason  string
	message string
}

// kind is one aigw kind, read from its CRD under crds/ (which aigw generates from its registry
// of kinds, src/registry.rs) and its example under examples/: nothing here is kept per kind, so
// a new kind is covered by adding its CRD and its example.
type kind struct {
	kind     string
	resource string
	// namespaced: the kind's objects live in a namespace.
	namespaced bool
	// managed kinds (the CRD's aigw.io/operator-role is "managed") also have the aigw.io/paused
	// annotation and the Drifted condition.
	managed bool
	// manager is the field manager of the operator's status writes: aigw/<kind in lower case>.
	manager string
	// example is the file under examples/ whose object the test creates: <kind in lower case>.yaml.
	example string
	// bump is a merge patch of the spec that raises metadata.generation: one field of the
	// example's spec changed (see bumpOf).
	bump map[string]any
	// settled is what aigw records beside the conditions once the remote object is known: the
	// remote object's id and slug, where the kind's status has them.
	settled     map[string]any
	ready       outcome
	progressing outcome
	stalled     outcome
	// gated is what a kind with spec.promotion reports while its gate holds a change (nil:
	// the kind has no promotion gate).
	gated *outcome
}

// step is one state the test puts an object in, with what kstatus and Argo CD must say of it.
type step struct {
	fixture string // file name under testdata/ (the state)
	// write is the outcome written to the status subresource; nil leaves the status alone.
	write *outcome
	// creating: the remote object does not exist yet, so the kind's own fields are absent.
	creating bool
	paused   bool // sets the aigw.io/paused annotation and the Paused condition
	drifted  bool // adds Drifted=True (observe-only mode)
	gated    bool // adds Promoted=False with the outcome's reason (a promotion gate holds it)
	bump     bool // changes the spec after the status write
	kstatus  status.Status
	health   HealthStatus
}

const (
	pausedMessage  = `aigw.io/paused is "true": aigw makes no API calls`
	driftedMessage = "observe-only: the remote object differs from the spec (spec.name)"
)

// fixtureKind is the kind whose object, read back in each state, is saved as the Argo CD
// fixture of that state (testdata/<state>.yaml): the script reads only the conditions, the
// annotations and the generations, which every kind writes alike, so one kind's fixtures prove
// it for the group. Config reaches every state, its promotion gate's included.
const fixtureKind = "Config"

// steps walks an object through every state aigw can report, in an order the operator can
// reach them: created, reconciling, ready, drifted, stalled, paused, then a new spec.
func (k kind) steps() []step {
	var steps []step
	add := func(s step, managedOnly bool) {
		if k.managed || !managedOnly {
			steps = append(steps, s)
		}
	}
	add(step{fixture: "progressing_no_status.yaml", kstatus: status.CurrentStatus,
		health: HealthStatus{"Progressing", "Waiting for aigw to report a status"}}, false)
	add(step{fixture: "progressing_reconciling.yaml", write: &k.progressing, creating: true, kstatus: status.InProgressStatus,
		health: HealthStatus{"Progressing", k.progressing.message}}, false)
	add(step{fixture: "healthy.yaml", write: &k.ready, kstatus: status.CurrentStatus,
		health: HealthStatus{"Healthy", k.ready.message}}, false)
	add(step{fixture: "healthy_drifted.yaml", write: &k.ready, drifted: true, kstatus: status.CurrentStatus,
		health: HealthStatus{"Healthy", k.ready.message + "; drifted: " + driftedMessage}}, true)
	if k.gated != nil {
		steps = append(steps, step{fixture: "progressing_soaking.yaml", write: k.gated, gated: true, kstatus: status.InProgressStatus,
			health: HealthStatus{"Progressing", k.gated.message}})
	}
	add(step{fixture: "degraded_stalled.yaml", write: &k.stalled, kstatus: status.FailedStatus,
		health: HealthStatus{"Degraded", k.stalled.message}}, false)
	add(step{fixture: "suspended_paused.yaml", write: &k.ready, paused: true, kstatus: status.CurrentStatus,
		health: HealthStatus{"Suspended", pausedMessage}}, true)
	add(step{fixture: "progressing_new_generation.yaml", write: &k.ready, bump: true, kstatus: status.InProgressStatus,
		health: HealthStatus{"Progressing", "Waiting for aigw to observe generation 2"}}, false)
	return steps
}

// openAPISchema is the part of a CRD's OpenAPI schema this package reads.
type openAPISchema struct {
	Type                 string                    `json:"type"`
	Format               string                    `json:"format"`
	Pattern              string                    `json:"pattern"`
	Enum                 []any                     `json:"enum"`
	Maximum              *float64                  `json:"maximum"`
	MaxLength            *int64                    `json:"maxLength"`
	Properties           map[string]*openAPISchema `json:"properties"`
	AdditionalProperties *openAPISchema            `json:"additionalProperties"`
	Validations          []any                     `json:"x-kubernetes-validations"`
}

// crdKind is what a CRD of crds/ says of its kind.
type crdKind struct {
	Kind       string
	Plural     string
	Namespaced bool
	Role       string         // the aigw.io/operator-role annotation: managed, read or driven
	Spec       *openAPISchema // the schema of .spec
	Status     *openAPISchema // the schema of .status
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
			Kind     string `json:"kind"`
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Names struct {
					Kind   string `json:"kind"`
					Plural string `json:"plural"`
				} `json:"names"`
				Scope    string `json:"scope"`
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema openAPISchema `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(text, &crd); err != nil {
			// The admission policies file holds several documents; it names no kind.
			continue
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		if len(crd.Spec.Versions) != 1 {
			return nil, fmt.Errorf("%s: %d versions, this test reads one", file, len(crd.Spec.Versions))
		}
		root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		kinds = append(kinds, crdKind{
			Kind: crd.Spec.Names.Kind, Plural: crd.Spec.Names.Plural, Namespaced: crd.Spec.Scope == "Namespaced",
			Role: crd.Metadata.Annotations["aigw.io/operator-role"],
			Spec: root.Properties["spec"], Status: root.Properties["status"],
		})
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("no CRD under %s/crds", root)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].Kind < kinds[j].Kind })
	return kinds, nil
}

// registryKinds reads every kind of crds/ with its example: what the health tests put through
// each state.
func registryKinds(root string) ([]kind, error) {
	crds, err := crdKinds(root)
	if err != nil {
		return nil, err
	}
	var kinds []kind
	for _, c := range crds {
		k, err := kindOf(root, c)
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, k)
	}
	return kinds, nil
}

// kindOf derives what the test needs of a kind from its CRD and its example. The reasons and
// messages have the same shape for every kind: the health signals read only the conditions'
// types, statuses and generations, and pass the message through.
func kindOf(root string, c crdKind) (kind, error) {
	if c.Role == "" {
		return kind{}, fmt.Errorf("the CRD of %s has no aigw.io/operator-role annotation", c.Kind)
	}
	lower := strings.ToLower(c.Kind)
	k := kind{
		kind: c.Kind, resource: c.Plural, namespaced: c.Namespaced, managed: c.Role == "managed",
		manager: "aigw/" + lower, example: lower + ".yaml", settled: map[string]any{},
		ready:       outcome{"Ready", "Reconciled", c.Kind + " is in sync with the management API"},
		progressing: outcome{"Progressing", "ServerError", "failed to create " + lower + ": the management API returned HTTP 503: upstream unavailable"},
		stalled:     outcome{"Stalled", "InvalidSpec", "invalid spec: the management API refused the " + lower + " with HTTP 400: name: must not be empty"},
	}
	if c.Spec != nil && c.Spec.Properties["promotion"] != nil {
		k.gated = &outcome{"Progressing", "Soaking", "revision 9d4e7a21 becomes eligible at 2026-01-05T11:00:01Z: " + c.Kind +
			" has been proven at it since 2026-01-05T10:00:00Z and must stay so for 1h (spec.promotion.soak)"}
	}
	if c.Status != nil {
		if _, has := c.Status.Properties["id"]; has {
			k.settled["id"] = "5e0c8a4e-6d1f-4a7b-9c3e-2f1d0b7a8c91"
		}
		if _, has := c.Status.Properties["slug"]; has {
			k.settled["slug"] = lower + "-1a2b3c"
		}
	}
	example, err := readExample(root, k)
	if err != nil {
		return kind{}, err
	}
	spec, _ := example["spec"].(map[string]any)
	path, value, ok := bumpOf(spec, c.Spec, nil)
	if !ok {
		return kind{}, fmt.Errorf("examples/%s: no field of its spec this test can change to raise the generation "+
			"(a string without enum, pattern, format or validation rule, or a number with room below its maximum)", k.example)
	}
	k.bump = map[string]any{"spec": nested(path, value)}
	return k, nil
}

// readExample reads examples/<kind>.yaml and checks it holds an object of the kind.
func readExample(root string, k kind) (map[string]any, error) {
	text, err := os.ReadFile(filepath.Join(root, "examples", k.example))
	if err != nil {
		return nil, fmt.Errorf("every kind has an example, examples/<kind in lower case>.yaml: %w", err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(text, &obj); err != nil {
		return nil, fmt.Errorf("examples/%s: %w", k.example, err)
	}
	if obj["kind"] != k.kind {
		return nil, fmt.Errorf("examples/%s holds a %v, not a %s", k.example, obj["kind"], k.kind)
	}
	return obj, nil
}

// bumpOf finds the first field of the example's spec (depth first, by name; lists left alone)
// whose change the CRD accepts without a rule that could refuse it: a string without enum,
// pattern, format or validation rule and with room for "-v2" (appended to the value), else a
// number without validation rule whose value plus one stays within its maximum. It returns the
// field's path and new value.
func bumpOf(value map[string]any, s *openAPISchema, path []string) ([]string, any, bool) {
	if s == nil || len(s.Validations) > 0 && len(path) > 0 {
		return nil, nil, false
	}
	names := make([]string, 0, len(value))
	for name := range value {
		names = append(names, name)
	}
	sort.Strings(names)
	field := func(name string) *openAPISchema {
		if f := s.Properties[name]; f != nil {
			return f
		}
		return s.AdditionalProperties
	}
	plain := func(f *openAPISchema, text string) bool {
		return f != nil && f.Type == "string" && len(f.Enum) == 0 && f.Pattern == "" && f.Format == "" &&
			(f.MaxLength == nil || int64(len(text)+3) <= *f.MaxLength) && len(f.Validations) == 0
	}
	for _, name := range names {
		if text, ok := value[name].(string); ok && plain(field(name), text) {
			return append(append([]string{}, path...), name), text + "-v2", true
		}
	}
	for _, name := range names {
		if object, ok := value[name].(map[string]any); ok {
			if p, v, ok := bumpOf(object, field(name), append(append([]string{}, path...), name)); ok {
				return p, v, true
			}
		}
	}
	for _, name := range names {
		f := field(name)
		if f == nil || len(f.Validations) > 0 || (f.Type != "integer" && f.Type != "number") {
			continue
		}
		within := func(n float64) bool { return f.Maximum == nil || n <= *f.Maximum }
		switch n := value[name].(type) {
		case float64:
			if within(n + 1) {
				return append(append([]string{}, path...), name), n + 1, true
			}
		case int64:
			if within(float64(n + 1)) {
				return append(append([]string{}, path...), name), n + 1, true
			}
		}
	}
	return nil, nil, false
}

// nested makes {path[0]: {path[1]: … value}}.
func nested(path []string, value any) map[string]any {
	if len(path) == 1 {
		return map[string]any{path[0]: value}
	}
	return map[string]any{path[0]: nested(path[1:], value)}
}
