package health

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// repoRoot is the aigw checkout this module lives in (hack/health).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("locate the repository root: %v", err)
	}
	return root
}

var (
	clusterOnce   sync.Once
	clusterClient dynamic.Interface
	clusterErr    error
)

// liveCluster starts the local control plane when it is not running (hack/cluster-up.sh is
// idempotent), installs the CRDs and returns a client for it. Skipped with -short.
func liveCluster(t *testing.T) dynamic.Interface {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the local kube-apiserver; runs without -short")
	}
	root := repoRoot(t)
	clusterOnce.Do(func() { clusterClient, clusterErr = startCluster(root) })
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return clusterClient
}

func startCluster(root string) (dynamic.Interface, error) {
	if err := command(root, "bash", "hack/cluster-up.sh"); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(devDir(root), "kubeconfig")
	kubectl := func(args ...string) error {
		return command(root, "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	}
	if err := kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "aigw-health-tests", "-f", "crds/"); err != nil {
		return nil, err
	}
	// Every CRD of crds/ (the registry's kinds).
	kinds, err := crdKinds(root)
	if err != nil {
		return nil, err
	}
	var crds []string
	for _, k := range kinds {
		crds = append(crds, "crd/"+k.Plural+".aigw.io")
	}
	if err := kubectl(append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, crds...)...); err != nil {
		return nil, err
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", kubeconfig, err)
	}
	// client-go's default of 5 requests per second would make this test wait on itself.
	config.QPS, config.Burst = 100, 200
	return dynamic.NewForConfig(config)
}

// devDir is the control plane's state dir, as hack/lib.sh resolves it.
func devDir(root string) string {
	dir := os.Getenv("AIGW_DEV_DIR")
	switch {
	case dir == "":
		return filepath.Join(root, ".aigw-dev")
	case filepath.IsAbs(dir):
		return dir
	default:
		return filepath.Join(root, dir)
	}
}

// command runs a program in dir; its output is returned in the error when it fails.
func command(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
	}
	return nil
}
