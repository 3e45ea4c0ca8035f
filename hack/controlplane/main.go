// Command aigw-controlplane runs a single-process local Kubernetes control
// plane for aigw development, integration tests, the demo and benchmarks:
//
//   - an embedded etcd (go.etcd.io/etcd/server/v3/embed) on loopback, and
//   - the real kube-apiserver (k8s.io/kubernetes/cmd/kube-apiserver/app),
//     in-process, on https://127.0.0.1:PORT with RBAC authorization.
//
// Everything it needs (CA, serving certificate, service-account keys, admin
// token, etcd data) lives under --state-dir. Once /readyz answers it writes
// --kubeconfig (context "aigw-dev", admin bearer token, CA data embedded) and
// the marker file STATE/ready. It runs until SIGTERM/SIGINT.
//
// There is no controller-manager and no scheduler: objects are stored and
// validated (CRDs, CEL rules, RBAC, admission) but nothing reconciles them.
// In particular a deleted Namespace stays Terminating forever (the namespace
// controller is what empties and finalizes it), Deployments never get
// ReplicaSets or Pods, and ServiceAccounts get no tokens automatically.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"golang.org/x/sys/unix"

	clientcmd "k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as in the upstream binary
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as in the upstream binary
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as in the upstream binary
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

const (
	contextName = "aigw-dev"
	adminUser   = "aigw-admin"
	serviceCIDR = "10.0.0.0/24"
	serviceIP   = "10.0.0.1" // first address of serviceCIDR: the "kubernetes" Service
	saIssuer    = "https://kubernetes.default.svc.cluster.local"
)

type options struct {
	stateDir      string
	kubeconfig    string
	apiserverPort int
	etcdPort      int
	etcdPeerPort  int
	readyTimeout  time.Duration
	stopTimeout   time.Duration
	noFsync       bool
	verbosity     int
	extraArgs     string
}

// ports are remembered in STATE/ports.json so a restart on the same state
// keeps the same server URL (and etcd member URLs) when they are still free.
type ports struct {
	APIServer int `json:"apiserver"`
	Etcd      int `json:"etcd"`
	EtcdPeer  int `json:"etcdPeer"`
}

func main() {
	var o options
	flag.StringVar(&o.stateDir, "state-dir", ".aigw-dev", "directory for etcd data, PKI, log, pid and ready marker")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "where to write the admin kubeconfig (default STATE/kubeconfig)")
	flag.IntVar(&o.apiserverPort, "apiserver-port", 0, "kube-apiserver secure port on 127.0.0.1 (0: the one used last time if free, else any free port)")
	flag.IntVar(&o.etcdPort, "etcd-port", 0, "etcd client port on 127.0.0.1 (0: as for --apiserver-port)")
	flag.IntVar(&o.etcdPeerPort, "etcd-peer-port", 0, "etcd peer port on 127.0.0.1 (0: as for --apiserver-port)")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 3*time.Minute, "exit with an error if /readyz does not answer ok within this time")
	flag.DurationVar(&o.stopTimeout, "stop-timeout", 5*time.Second, "on SIGTERM/SIGINT, exit after this long even if kube-apiserver is still draining requests and watches (its own limit is --request-timeout, 60s)")
	flag.BoolVar(&o.noFsync, "etcd-unsafe-no-fsync", true, "run etcd without fsync (fast; a host crash may lose recent writes)")
	flag.IntVar(&o.verbosity, "v", 0, "kube-apiserver log verbosity")
	flag.StringVar(&o.extraArgs, "apiserver-extra-args", "", "extra kube-apiserver flags, space separated (e.g. \"--feature-gates=X=true\")")
	flag.Parse()

	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "aigw-controlplane: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	state, err := filepath.Abs(o.stateDir)
	if err != nil {
		return err
	}
	if o.kubeconfig == "" {
		o.kubeconfig = filepath.Join(state, "kubeconfig")
	}
	if o.kubeconfig, err = filepath.Abs(o.kubeconfig); err != nil {
		return err
	}
	pki := filepath.Join(state, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}

	// All output (ours, etcd's zap logger, klog) goes to STATE/controlplane.log.
	logPath := filepath.Join(state, "controlplane.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	for _, fd := range []int{1, 2} {
		if err := unix.Dup2(int(logFile.Fd()), fd); err != nil {
			return fmt.Errorf("redirect output to %s: %w", logPath, err)
		}
	}
	logf("starting (pid %d, state dir %s)", os.Getpid(), state)

	pidPath := filepath.Join(state, "controlplane.pid")
	readyPath := filepath.Join(state, "ready")
	_ = os.Remove(readyPath)
	if err := writeFileAtomic(pidPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	var etcd *embed.Etcd
	var etcdMu sync.Mutex
	var cleanupOnce sync.Once
	// etcdStopTimeout: a forced stop leaves the apiserver's etcd watch
	// streams open, which makes a graceful etcd stop hang; don't wait long.
	cleanup := func(etcdStopTimeout time.Duration) {
		cleanupOnce.Do(func() {
			_ = os.Remove(readyPath)
			etcdMu.Lock()
			defer etcdMu.Unlock()
			if etcd != nil {
				closeEtcd(etcd, etcdStopTimeout)
			}
			_ = os.Remove(pidPath)
		})
	}
	defer cleanup(10 * time.Second)

	// kube-apiserver handles SIGTERM/SIGINT itself (graceful shutdown, which
	// waits up to --request-timeout for open requests and watches). A local
	// dev cluster should stop promptly, so bound that.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-sigs
		logf("%v received; shutting down (at most %s)", sig, o.stopTimeout)
		time.Sleep(o.stopTimeout)
		logf("kube-apiserver still draining after %s; stopping etcd and exiting", o.stopTimeout)
		cleanup(2 * time.Second)
		os.Exit(0)
	}()

	p, err := choosePorts(state, o)
	if err != nil {
		return err
	}
	logf("ports: apiserver %d, etcd %d, etcd peer %d", p.APIServer, p.Etcd, p.EtcdPeer)

	creds, err := ensurePKI(pki)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}

	etcdMu.Lock()
	etcd, err = startEtcd(state, p, o.noFsync)
	etcdMu.Unlock()
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	logf("etcd ready on http://127.0.0.1:%d", p.Etcd)

	args := []string{
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", p.Etcd),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", p.APIServer),
		"--cert-dir=" + pki,
		"--tls-cert-file=" + filepath.Join(pki, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(pki, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--token-auth-file=" + filepath.Join(pki, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + saIssuer,
		"--service-account-key-file=" + filepath.Join(pki, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		// Endpoints may not point at loopback; with no real node network
		// there is nothing to publish for the "kubernetes" Service anyway.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
		fmt.Sprintf("--v=%d", o.verbosity),
	}
	if s := strings.TrimSpace(o.extraArgs); s != "" {
		args = append(args, strings.Fields(s)...)
	}
	logf("kube-apiserver %s", strings.Join(args, " "))

	// NewAPIServerCommand installs the SIGTERM/SIGINT handler; on a signal
	// the apiserver shuts down gracefully and cli.Run returns.
	cmd := app.NewAPIServerCommand()
	cmd.SetArgs(args)
	apiDone := make(chan int, 1)
	go func() { apiDone <- cli.Run(cmd) }()

	server := fmt.Sprintf("https://127.0.0.1:%d", p.APIServer)
	readyCtx, cancel := context.WithTimeout(context.Background(), o.readyTimeout)
	defer cancel()
	readyErr := make(chan error, 1)
	go func() { readyErr <- waitReady(readyCtx, server, creds) }()

	select {
	case code := <-apiDone:
		return fmt.Errorf("kube-apiserver exited before becoming ready (code %d)", code)
	case err := <-readyErr:
		if err != nil {
			return fmt.Errorf("kube-apiserver not ready: %w", err)
		}
	}

	if err := writeKubeconfig(o.kubeconfig, server, creds); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	marker, _ := json.MarshalIndent(map[string]any{
		"pid":        os.Getpid(),
		"server":     server,
		"kubeconfig": o.kubeconfig,
		"etcd":       fmt.Sprintf("http://127.0.0.1:%d", p.Etcd),
		"readyAt":    time.Now().UTC().Format(time.RFC3339),
	}, "", "  ")
	if err := writeFileAtomic(readyPath, append(marker, '\n'), 0o644); err != nil {
		return err
	}
	logf("ready: %s (kubeconfig %s)", server, o.kubeconfig)

	code := <-apiDone
	logf("kube-apiserver exited (code %d); stopping etcd", code)
	if code != 0 {
		return fmt.Errorf("kube-apiserver exited with code %d", code)
	}
	return nil
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s aigw-controlplane: %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), fmt.Sprintf(format, a...))
}

// ---------------------------------------------------------------- ports

func choosePorts(state string, o options) (ports, error) {
	var prev ports
	path := filepath.Join(state, "ports.json")
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &prev)
	}
	taken := map[int]bool{}
	pick := func(flagPort, prevPort int) (int, error) {
		if flagPort != 0 {
			taken[flagPort] = true
			return flagPort, nil // an explicit port is used as given; a clash fails loudly later
		}
		if prevPort != 0 && !taken[prevPort] && portFree(prevPort) {
			taken[prevPort] = true
			return prevPort, nil
		}
		for i := 0; i < 50; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return 0, err
			}
			port := l.Addr().(*net.TCPAddr).Port
			_ = l.Close()
			if !taken[port] {
				taken[port] = true
				return port, nil
			}
		}
		return 0, errors.New("no free loopback port")
	}
	var p ports
	var err error
	if p.APIServer, err = pick(o.apiserverPort, prev.APIServer); err != nil {
		return p, err
	}
	if p.Etcd, err = pick(o.etcdPort, prev.Etcd); err != nil {
		return p, err
	}
	if p.EtcdPeer, err = pick(o.etcdPeerPort, prev.EtcdPeer); err != nil {
		return p, err
	}
	b, _ := json.Marshal(p)
	return p, writeFileAtomic(path, append(b, '\n'), 0o644)
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// ---------------------------------------------------------------- etcd

func startEtcd(state string, p ports, noFsync bool) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = contextName
	cfg.Dir = filepath.Join(state, "etcd")
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p.Etcd)}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p.EtcdPeer)}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = noFsync
	cfg.LogLevel = "warn"
	quietCheapRequests(cfg)
	cfg.LogOutputs = []string{"stderr"} // stderr is already redirected to the log file

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		e.Close()
		return nil, errors.New("etcd did not become ready within 60s")
	}
}

func closeEtcd(e *embed.Etcd, timeout time.Duration) {
	done := make(chan struct{})
	go func() { e.Close(); close(done) }()
	select {
	case <-done:
		logf("etcd stopped")
	case <-time.After(timeout):
		logf("etcd did not stop within %s; exiting anyway", timeout)
	}
}

// ---------------------------------------------------------------- PKI

type credentials struct {
	caPEM []byte
	token string
}

// ensurePKI creates (once; kept across restarts on the same state dir) a CA,
// an apiserver serving certificate signed by it, an RSA service-account key
// pair and a static admin token in group system:masters.
func ensurePKI(dir string) (*credentials, error) {
	caCrt := filepath.Join(dir, "ca.crt")
	caKey := filepath.Join(dir, "ca.key")
	srvCrt := filepath.Join(dir, "apiserver.crt")
	srvKey := filepath.Join(dir, "apiserver.key")
	saKey := filepath.Join(dir, "sa.key")
	saPub := filepath.Join(dir, "sa.pub")
	tokenPath := filepath.Join(dir, "admin.token")
	tokensCSV := filepath.Join(dir, "tokens.csv")

	if !exists(caCrt, caKey, srvCrt, srvKey) {
		if err := generateCerts(caCrt, caKey, srvCrt, srvKey); err != nil {
			return nil, err
		}
	}
	if !exists(saKey, saPub) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return nil, err
		}
		if err := writePEM(saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), 0o600); err != nil {
			return nil, err
		}
		if err := writePEM(saPub, "PUBLIC KEY", pub, 0o644); err != nil {
			return nil, err
		}
	}
	if !exists(tokenPath, tokensCSV) {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		tok := hex.EncodeToString(b)
		// token,user,uid,"group1,group2"
		line := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", tok, adminUser, adminUser)
		if err := writeFileAtomic(tokensCSV, []byte(line), 0o600); err != nil {
			return nil, err
		}
		if err := writeFileAtomic(tokenPath, []byte(tok+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	ca, err := os.ReadFile(caCrt)
	if err != nil {
		return nil, err
	}
	tok, err := os.ReadFile(tokenPath)
	if err != nil {
		return nil, err
	}
	return &credentials{caPEM: ca, token: strings.TrimSpace(string(tok))}, nil
}

func generateCerts(caCrt, caKey, srvCrt, srvKey string) error {
	now := time.Now()
	caPriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "aigw-dev-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caPriv.PublicKey, caPriv)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}

	srvPriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP(serviceIP)},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvPriv.PublicKey, caPriv)
	if err != nil {
		return err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caPriv)
	if err != nil {
		return err
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvPriv)
	if err != nil {
		return err
	}
	if err := writePEM(caKey, "EC PRIVATE KEY", caKeyDER, 0o600); err != nil {
		return err
	}
	if err := writePEM(srvKey, "EC PRIVATE KEY", srvKeyDER, 0o600); err != nil {
		return err
	}
	if err := writePEM(srvCrt, "CERTIFICATE", srvDER, 0o644); err != nil {
		return err
	}
	return writePEM(caCrt, "CERTIFICATE", caDER, 0o644) // last: its presence means "all done"
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err)
	}
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func exists(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ---------------------------------------------------------------- readiness, kubeconfig

func waitReady(ctx context.Context, server string, c *credentials) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.caPEM) {
		return errors.New("bad CA PEM")
	}
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	last := "no answer yet"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %s)", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func writeKubeconfig(path, server string, c *credentials) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.caPEM}
	cfg.AuthInfos[adminUser] = &clientcmdapi.AuthInfo{Token: c.token}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: adminUser, Namespace: "default"}
	cfg.CurrentContext = contextName
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b, 0o600)
}
