package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/deploy/internal/kube"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/internal/testpki"
)

// repoRoot is the main module's directory, from this package's.
const repoRoot = "../.."

// testVersion is the version linked into the binary the test builds.
const testVersion = "v0.0.0-imagetest"

// buildSluice builds the static sluice binary as `make image` does and
// returns its path.
func buildSluice(t *testing.T) string {
	t.Helper()
	gobin := "go" // go test puts its own GOROOT/bin first in PATH
	out := filepath.Join(t.TempDir(), "sluice")
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags", "-s -w -X main.version="+testVersion, "-o", out, "./cmd/sluice")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, b)
	}
	return out
}

// caCerts returns a PEM bundle for the image: the machine's, or a fixture.
func caCerts(t *testing.T) string {
	t.Helper()
	const system = "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(system); err == nil {
		return system
	}
	t.Logf("%s not found (install ca-certificates): the image gets a test bundle instead", system)
	p := filepath.Join(t.TempDir(), "ca.pem")
	fixture := "-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n"
	if err := os.WriteFile(p, []byte(fixture), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The image `make image` writes is what the Dockerfile promises: read back
// from its OCI layout and its tarball, it starts the static binary as the
// non-root user with `serve`, carries the OCI labels, and its root
// filesystem holds the binary, CA certificates and a passwd entry, and no shell.
// Then, as root, chrooted into the unpacked filesystem as user 65532, it
// runs `sluice version`, `sluice check` of a rule with a time zone, a short
// `sluice serve` of the built-in example, and serve as the Kubernetes
// Deployment runs it, through a ConfigMap update. Not root: the running is
// skipped, and the test says so.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image is a Linux image; building and running it is tested on Linux only")
	}
	bin := buildSluice(t)
	dir := t.TempDir()
	lay, tb := filepath.Join(dir, "layout"), filepath.Join(dir, "sluice.tar")
	var out bytes.Buffer
	err := run([]string{"-binary", bin, "-ca-certs", caCerts(t), "-version", testVersion,
		"-revision", "0123abc", "-layout", lay, "-tarball", tb, "-tag", "sluice:test"}, &out)
	if err != nil {
		t.Fatalf("image: %v", err)
	}
	img := readLayout(t, lay)
	checkConfig(t, img)
	fromTar, err := tarball.ImageFromPath(tb, nil)
	if err != nil {
		t.Fatalf("reading the tarball back: %v", err)
	}
	// A docker tarball keeps the config and the layers, not the manifest.
	c1, _ := img.ConfigName()
	c2, _ := fromTar.ConfigName()
	if c1 != c2 {
		t.Errorf("the layout's image config is %s, the tarball's %s: want the same image", c1, c2)
	}
	d1, _ := img.Digest()
	if !strings.Contains(out.String(), d1.String()) {
		t.Errorf("image printed %q, want its digest %s", out.String(), d1)
	}

	root := unpack(t, img)
	checkRootFS(t, root)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED running the image: chroot needs root (the image was built, read back and unpacked)")
	}
	runVersion(t, root)
	runCalendarCheck(t, root)
	runServe(t, root)
	runAsDeployment(t, root)
	runAsRatelimit(t, root)
	runAsEnvoyGateway(t, root)
}

// startRedis starts a redis-server on a free loopback port for the rest of
// the test and returns its address; without redis-server the test is
// skipped, loudly.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("SKIPPED the image with Envoy Gateway's environment: redis-server not found (apt-get install redis-server)")
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) { // polling for start-up
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s within 10 s", addr)
		}
	}
}

// egDeploymentEnv is the environment of Envoy Gateway's rate limit
// Deployment, as the main module's Envoy Gateway tests keep it.
const egDeploymentEnv = repoRoot + "/cmd/sluice/testdata/envoygateway/deployment-env.yaml"

// runAsEnvoyGateway runs the image as Envoy Gateway's generated Deployment
// does: /bin/ratelimit with no argument and that Deployment's environment
// (xDS config over mutual TLS, Redis, a TLS gRPC listener, Prometheus,
// FORCE_START_WITHOUT_INITIAL_CONFIG), its certificates at the paths it
// mounts them. The swaps are the cluster's addresses for the test's: a
// real Redis, an xDS server address nothing answers yet (the Deployment
// serves before Envoy Gateway's first push), free loopback ports for the
// listeners (HOST, PORT, GRPC_HOST and GRPC_PORT, which the Deployment
// leaves at 0.0.0.0:8080 and :8081). It must serve: /healthcheck 200,
// POST /json answered (no rules yet: 200), and gRPC over TLS with the
// mounted certificate.
func runAsEnvoyGateway(t *testing.T, root string) {
	t.Helper()
	b, err := os.ReadFile(egDeploymentEnv)
	if err != nil {
		t.Fatal(err)
	}
	var vars []struct{ Name, Value string }
	if err := yaml.Unmarshal(b, &vars); err != nil {
		t.Fatalf("%s: %v", egDeploymentEnv, err)
	}
	certs := filepath.Join(root, "certs")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		t.Fatal(err)
	}
	ca := testpki.NewCA(t, "envoy gateway CA")
	crt, key := ca.Issue(t, "envoy-ratelimit", false, "envoy-ratelimit.test").WriteFiles(t, certs, "tls")
	cafile := ca.WriteFile(t, certs, "ca.crt")
	for _, f := range []string{crt, key, cafile} {
		if err := os.Chmod(f, 0o644); err != nil { // readable by the image's user, as a Secret volume's files
			t.Fatal(err)
		}
	}
	redis := startRedis(t)
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	_, grpcPort, _ := net.SplitHostPort(grpcAddr)
	swap := map[string]string{
		"CONFIG_GRPC_XDS_SERVER_URL": freeAddr(t),
		"REDIS_URL":                  redis,
		"PROMETHEUS_ADDR":            freeAddr(t),
	}
	cmd := inImage(root)
	cmd.Path, cmd.Args = RatelimitPath, []string{RatelimitPath}
	for _, v := range vars {
		val := v.Value
		if s, ok := swap[v.Name]; ok {
			val = s
		}
		cmd.Env = append(cmd.Env, v.Name+"="+val)
	}
	cmd.Env = append(cmd.Env, "HOST=127.0.0.1", "PORT="+httpPort, "GRPC_HOST=127.0.0.1", "GRPC_PORT="+grpcPort)
	s := startServed(t, cmd, httpAddr, RatelimitPath+" with Envoy Gateway's environment")
	if got := s.codes(t, userBody("dave"), 2); !slices.Equal(got, []int{200, 200}) {
		t.Errorf("before Envoy Gateway's first push, dave's two calls answered %v, want [200 200] (no rules)", got)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", grpcAddr,
		&tls.Config{RootCAs: ca.Pool(), ServerName: "envoy-ratelimit.test", NextProtos: []string{"h2"}})
	if err != nil {
		t.Errorf("gRPC over TLS with the mounted certificate: %v", err)
	} else {
		if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
			t.Errorf("gRPC listener negotiated %q, want h2", p)
		}
		conn.Close()
	}
	s.stop(t)
}

// runAsRatelimit runs the image as Envoy Gateway's Deployment and
// envoyproxy/ratelimit's compose files do: /bin/ratelimit with no argument,
// configured by envoyproxy/ratelimit's variables alone (its runtime
// directory, ports, no statsd). It must serve that directory's rules, not
// print the help and exit 0 (a pod then restarts as "Completed").
func runAsRatelimit(t *testing.T, root string) {
	t.Helper()
	dir := filepath.Join(root, "srv/ratelimit/config") // not runAsDeployment's /data
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := "domain: example\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: 2\n"
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	_, grpcPort, _ := net.SplitHostPort(grpcAddr)
	cmd := inImage(root)
	cmd.Path, cmd.Args = RatelimitPath, []string{RatelimitPath}
	cmd.Env = append(cmd.Env, "RUNTIME_ROOT=/srv", "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"RUNTIME_IGNOREDOTFILES=true", "USE_STATSD=false", "LOG_LEVEL=info",
		"HOST=127.0.0.1", "PORT="+httpPort, "GRPC_HOST=127.0.0.1", "GRPC_PORT="+grpcPort, "DEBUG_PORT=0")
	s := startServed(t, cmd, httpAddr, RatelimitPath)
	if got := s.codes(t, userBody("carol"), 3); !slices.Equal(got, []int{200, 200, 429}) {
		t.Errorf("%s with the runtime directory's 2 per minute: carol's three calls answered %v, want [200 200 429]", RatelimitPath, got)
	}
	s.stop(t)
}

// The same inputs give the same image, digest for digest.
func TestImageReproducible(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sluice")
	if err := os.WriteFile(bin, []byte("\x7fELF fake"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := Options{Binary: bin, CACerts: caCerts(t), Version: "v1", Revision: "r", Arch: "amd64"}
	a, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two builds of the same inputs: %s and %s", da, db)
	}
	o.Revision = "other"
	c, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if dc, _ := c.Digest(); dc == da {
		t.Errorf("another revision label gave the same digest %s", dc)
	}
}

// A binary that is not an executable, or a CA file with no certificate, is
// refused: an image that cannot start is not written.
func TestImageRefusesBadInputs(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "script")
	noCert := filepath.Join(dir, "empty.pem")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(noCert, []byte("nothing"), 0o644)
	for name, o := range map[string]Options{
		"not ELF":        {Binary: notELF, CACerts: caCerts(t)},
		"no certificate": {Binary: "/proc/self/exe", CACerts: noCert},
		"missing binary": {Binary: filepath.Join(dir, "absent"), CACerts: caCerts(t)},
	} {
		if _, err := Build(o); err == nil {
			t.Errorf("%s: built an image, want an error", name)
		}
	}
	if err := run([]string{"-binary", "/proc/self/exe"}, io.Discard); err == nil {
		t.Error("image with neither -layout nor -tarball: want an error")
	}
}

// readLayout reads the only image of the OCI layout at dir and checks its
// reference annotation.
func readLayout(t *testing.T, dir string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the layout back: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("the layout holds %d images, want 1", len(m.Manifests))
	}
	desc := m.Manifests[0]
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != "sluice:test" {
		t.Errorf("ref.name annotation %q, want sluice:test", got)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// checkConfig checks what a runtime reads to start the container.
func checkConfig(t *testing.T, img v1.Image) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/sluice"}) || !slices.Equal(c.Cmd, []string{"serve"}) {
		t.Errorf("entrypoint %q cmd %q, want [/usr/local/bin/sluice] [serve]", c.Entrypoint, c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (numeric, not root)", c.User)
	}
	want := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/sluicehq/sluice",
		"org.opencontainers.image.revision": "0123abc",
		"org.opencontainers.image.version":  testVersion,
	}
	for k, v := range want {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	mt, _ := img.MediaType()
	if mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %s, want OCI's", mt)
	}
}

// unpack writes the image's flattened root filesystem to a new directory.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o755)
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatalf("unpacking: %v", err)
		}
		if err := unpackOne(root, h, tr); err != nil {
			t.Fatal(err)
		}
	}
}

// unpackOne writes one tar entry under root: directories, regular files and
// symbolic links only.
func unpackOne(root string, h *tar.Header, r io.Reader) error {
	clean := filepath.Clean("/" + h.Name)
	p := filepath.Join(root, clean)
	mode := os.FileMode(h.Mode & 0o777)
	if h.Mode&0o1000 != 0 {
		mode |= os.ModeSticky
	}
	switch h.Typeflag {
	case tar.TypeSymlink:
		return os.Symlink(h.Linkname, p)
	case tar.TypeDir:
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		return os.Chmod(p, mode)
	case tar.TypeReg:
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, b, mode); err != nil {
			return err
		}
		return os.Chmod(p, mode)
	}
	return fmt.Errorf("unpacking %s: unexpected entry type %c", h.Name, h.Typeflag)
}

// checkRootFS checks the unpacked image's files.
func checkRootFS(t *testing.T, root string) {
	t.Helper()
	for _, p := range []string{"/usr/local/bin/sluice", "/etc/ssl/certs/ca-certificates.crt", "/etc/passwd", "/etc/group"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("the image lacks %s: %v", p, err)
		}
	}
	for _, sh := range []string{"/bin/sh", "/bin/bash", "/usr/bin/sh"} {
		if _, err := os.Lstat(filepath.Join(root, sh)); err == nil {
			t.Errorf("the image has a shell, %s", sh)
		}
	}
	if l, err := os.Readlink(filepath.Join(root, RatelimitPath)); err != nil || l != BinaryPath {
		t.Errorf("%s: a link to %q, %v; want a link to %s (Envoy Gateway runs it)", RatelimitPath, l, err, BinaryPath)
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), "sluice:x:65532:65532:") {
		t.Errorf("/etc/passwd has no sluice user 65532: %q", passwd)
	}
	f, err := elf.Open(filepath.Join(root, "usr/local/bin/sluice"))
	if err != nil {
		t.Fatalf("the binary is not ELF: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader: it is not static (CGO_ENABLED=0)")
		}
	}
}

// inImage returns a command run chrooted into root as the image's user,
// with the image's environment.
func inImage(root string, args ...string) *exec.Cmd {
	cmd := exec.Command("/usr/local/bin/sluice", args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     root,
		Credential: &syscall.Credential{Uid: 65532, Gid: 65532},
	}
	return cmd
}

// runVersion runs `sluice version` in the image.
func runVersion(t *testing.T, root string) {
	t.Helper()
	out, err := inImage(root, "version").CombinedOutput()
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("SKIPPED running the image: root, but chroot or setuid is not permitted here (%v)", err)
	}
	if err != nil {
		t.Fatalf("sluice version in the image: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "sluice "+testVersion {
		t.Errorf("sluice version printed %q, want %q", got, "sluice "+testVersion)
	}
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// served is a `sluice serve` running in the image.
type served struct {
	http    string // its HTTP address
	cmd     *exec.Cmd
	done    chan error
	logs    *testlog.Buffer
	stopped bool // by stop, which waited for it
}

// serveInImage starts `sluice serve` in the image with env added to the
// image's, on free loopback ports, and waits for /healthcheck. The process
// is killed when the test ends, unless stop stopped it.
func serveInImage(t *testing.T, root string, env []string, args ...string) *served {
	t.Helper()
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	cmd := inImage(root, append([]string{"serve", "-http-addr", httpAddr, "-grpc-addr", grpcAddr}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	return startServed(t, cmd, httpAddr, "sluice serve")
}

// startServed starts cmd, a serve in the image whose HTTP address is
// httpAddr, and waits for /healthcheck; name names it in the test's
// messages. The process is killed when the test ends, unless stop stopped
// it.
func startServed(t *testing.T, cmd *exec.Cmd, httpAddr, name string) *served {
	t.Helper()
	s := &served{http: httpAddr, cmd: cmd, done: make(chan error, 1), logs: new(testlog.Buffer)}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s in the image: %v", name, err)
	}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if !s.stopped {
			cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, s.logs.String())
		}
	})
	waitHealthy(t, "http://"+httpAddr+"/healthcheck", s.done)
	return s
}

// codes posts body to /json n times and returns the status codes.
func (s *served) codes(t *testing.T, body string, n int) []int {
	t.Helper()
	var codes []int
	for range n {
		resp, err := http.Post("http://"+s.http+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST /json: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	return codes
}

// stop sends SIGTERM and wants exit status 0 within the drain and a margin.
func (s *served) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.stopped = true
		if err != nil {
			t.Errorf("serve after SIGTERM: %v, want exit status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20 s of SIGTERM (its drain is 10 s)")
	}
}

// userBody is a /json request for user u in domain example.
func userBody(u string) string {
	return `{"domain":"example","descriptors":[{"entries":[{"key":"user","value":"` + u + `"}]}]}`
}

// runServe starts `sluice serve` (the built-in example) in the image,
// spends user alice's 3 per minute and stops it with SIGTERM.
func runServe(t *testing.T, root string) {
	t.Helper()
	s := serveInImage(t, root, nil)
	if got := s.codes(t, userBody("alice"), 4); !slices.Equal(got, []int{200, 200, 200, 429}) {
		t.Errorf("alice's four calls answered %v, want [200 200 200 429]", got)
	}
	s.stop(t)
}

// runCalendarCheck runs `sluice check` in the image on a rule whose calendar
// names a time zone: it loads only if the binary carries the zone
// database, since the image has no /usr/share/zoneinfo.
func runCalendarCheck(t *testing.T, root string) {
	t.Helper()
	conf := "domain: tz\ndescriptors:\n  - key: plan\n    rate_limit:\n      unit: day\n      requests_per_unit: 5\n      calendar:\n        time_zone: Asia/Tokyo\n"
	if err := os.WriteFile(filepath.Join(root, "tmp/tz.yaml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := inImage(root, "check", "/tmp/tz.yaml").CombinedOutput(); err != nil {
		t.Errorf("sluice check of a rule in Asia/Tokyo, in an image without /usr/share/zoneinfo: %v\n%s", err, out)
	}
}

// waitHealthy polls url until it answers 200, the process ends, or 60 s pass.
func waitHealthy(t *testing.T, url string, done chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		select {
		case err := <-done:
			done <- err // for the caller's deferred wait
			t.Fatalf("serve in the image exited before it was healthy: %v", err)
		case <-ctx.Done():
			t.Fatal("serve in the image was not healthy within 60 s")
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := http.Get(url)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
	}
}

// The Dockerfile builds the image `make image` writes: the same entrypoint,
// command, user, environment, ports, labels and /etc/passwd, so that the
// tested image stands for both.
func TestDockerfileMatchesImage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	c := imageConfig(Options{})
	var ports []string
	for p := range c.ExposedPorts {
		ports = append(ports, strings.TrimSuffix(p, "/tcp"))
	}
	slices.Sort(ports)
	want := []string{
		"FROM scratch\n",
		fmt.Sprintf("ENTRYPOINT [%q]\n", c.Entrypoint[0]),
		fmt.Sprintf("CMD [%q]\n", c.Cmd[0]),
		"USER " + c.User + "\n",
		"ENV " + c.Env[0] + "\n",
		"EXPOSE " + strings.Join(ports, " ") + "\n",
		"-o /out" + BinaryPath + " ./cmd/sluice",
		"CGO_ENABLED=0",
		"cp " + CACertsPath + " /out/etc/ssl/certs/",
		"ln -s " + BinaryPath + " /out" + RatelimitPath,
	}
	for k := range c.Labels {
		want = append(want, k+"=")
	}
	files, err := rootFiles(Options{Binary: "/proc/self/exe", CACerts: caCerts(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.path == "etc/passwd" || f.path == "etc/group" {
			want = append(want, fmt.Sprintf("echo '%s' > /out/%s", strings.TrimSuffix(string(f.body), "\n"), f.path))
		}
	}
	for _, w := range want {
		if !strings.Contains(df, w) {
			t.Errorf("the Dockerfile lacks %q, which deploy/image writes", w)
		}
	}
}

// runAsDeployment runs the image as deploy/kubernetes/deployment.yaml does:
// its literal environment, and configmap.yaml's files where the Deployment
// mounts them, laid out as the kubelet does (timestamped directory, ..data
// symlink, a symlink per file). Sluice serves that config, and reloads it
// when the ..data symlink is swapped, as on a ConfigMap update.
func runAsDeployment(t *testing.T, root string) {
	t.Helper()
	dep, cm := deploymentObjects(t)
	c := dep.Spec.Template.Spec.Containers[0]
	var env []string
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	var mount string
	for _, m := range c.VolumeMounts {
		if m.Name == "config" {
			mount = filepath.Join(root, m.MountPath)
		}
	}
	if mount == "" {
		t.Fatal("the Deployment mounts no volume config")
	}
	kubeletWrite(t, mount, "..2026_01_01_00_00_00.1", cm.Data)
	s := serveInImage(t, root, env)
	if strings.Contains(s.logs.String(), "not acted on") {
		t.Errorf("serve names some of the Deployment's settings as not acted on:\n%s", s.logs.String())
	}
	if strings.Contains(s.logs.String(), "built-in example") {
		t.Fatalf("serve with the Deployment's environment serves the built-in example, not the ConfigMap:\n%s", s.logs.String())
	}
	if got := s.codes(t, userBody("alice"), 4); !slices.Equal(got, []int{200, 200, 200, 429}) {
		t.Errorf("with the ConfigMap's 3 per minute, alice's four calls answered %v, want [200 200 200 429]", got)
	}
	updated := map[string]string{}
	for k, v := range cm.Data {
		updated[k] = strings.Replace(v, "requests_per_unit: 3", "requests_per_unit: 1", 1)
	}
	kubeletWrite(t, mount, "..2026_01_01_00_01_00.2", updated)
	waitMetric(t, s, "sluice_config_reloads_total 1")
	if got := s.codes(t, userBody("bob"), 2); !slices.Equal(got, []int{200, 429}) {
		t.Errorf("after the ConfigMap update to 1 per minute, bob's two calls answered %v, want [200 429]", got)
	}
	s.stop(t)
}

// deploymentObjects reads the Deployment and the ConfigMap of deploy/kubernetes.
func deploymentObjects(t *testing.T) (*appsv1.Deployment, *corev1.ConfigMap) {
	t.Helper()
	var objs []kube.Object
	for _, f := range []string{"../kubernetes/deployment.yaml", "../kubernetes/configmap.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := kube.Decode(f, data)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	dep, ok1 := objs[0].(*appsv1.Deployment)
	cm, ok2 := objs[1].(*corev1.ConfigMap)
	if !ok1 || !ok2 {
		t.Fatalf("want a Deployment and a ConfigMap, have %T and %T", objs[0], objs[1])
	}
	return dep, cm
}

// kubeletWrite writes files into dir as the kubelet updates a ConfigMap
// volume: a new timestamped directory, a ..data_tmp symlink to it renamed
// over ..data, and a symlink ..data/NAME per file.
func kubeletWrite(t *testing.T, dir, stamp string, files map[string]string) {
	t.Helper()
	ts := filepath.Join(dir, stamp)
	if err := os.MkdirAll(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(ts, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(stamp, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// waitMetric polls serve's /metrics until a line is want, for up to 30 s.
func waitMetric(t *testing.T, s *served, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + s.http + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if slices.Contains(strings.Split(string(b), "\n"), want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve's /metrics had no line %q within 30 s", want)
		}
		time.Sleep(100 * time.Millisecond) // waiting for a real process, with a deadline
	}
}
