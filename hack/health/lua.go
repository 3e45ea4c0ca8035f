// Package health checks aigw's health signals with the code that reads them in clusters:
// the Argo CD health scripts under integrations/argocd run by gopher-lua the way Argo CD runs
// them, and the kstatus conditions read by sigs.k8s.io/cli-utils (Flux, kpt, kubectl wait).
package health

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
)

// HealthStatus is what an Argo CD health script returns (Argo CD's health.HealthStatus).
type HealthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// The statuses Argo CD accepts from a script; anything else it shows as Unknown.
var validStatuses = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true,
}

// RunHealthScript runs script against obj as Argo CD's util/lua does: a fresh LState with only
// the package, base and table libraries unless openLibs (Argo CD opens all libraries for its
// built-in scripts, but not for argocd-cm customizations, unless useOpenLibs is set there), obj as
// the global table `obj`, a one-second budget, and the returned table decoded through JSON.
// An invalid status is an error here, where Argo CD would show Unknown.
func RunHealthScript(obj map[string]any, script string, openLibs bool) (HealthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer l.Close()
	libraries := []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}}
	for _, lib := range libraries {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return HealthStatus{}, fmt.Errorf("open Lua library %q: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return HealthStatus{}, fmt.Errorf("run health script: %w", err)
	}
	returned := l.Get(-1)
	if returned.Type() != lua.LTTable {
		return HealthStatus{}, fmt.Errorf("health script returned %s, Argo CD expects a table", returned.Type())
	}
	encoded, err := luajson.Encode(returned)
	if err != nil {
		return HealthStatus{}, fmt.Errorf("encode the returned table: %w", err)
	}
	var hs HealthStatus
	if err := json.Unmarshal(encoded, &hs); err != nil {
		return HealthStatus{}, fmt.Errorf("decode the returned table %s: %w", encoded, err)
	}
	if !validStatuses[hs.Status] {
		return HealthStatus{}, fmt.Errorf("health script returned status %q, which Argo CD shows as Unknown", hs.Status)
	}
	return hs, nil
}

// toLua converts a decoded Kubernetes object as Argo CD's decodeValue does: numbers (float64
// from JSON or YAML, int64 from the apiserver's unstructured objects) become Lua numbers.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case json.Number:
		return lua.LString(v)
	case string:
		return lua.LString(v)
	case []any:
		array := l.CreateTable(len(v), 0)
		for _, item := range v {
			array.Append(toLua(l, item))
		}
		return array
	case map[string]any:
		table := l.CreateTable(0, len(v))
		for key, item := range v {
			table.RawSetH(lua.LString(key), toLua(l, item))
		}
		return table
	}
	return lua.LNil
}
