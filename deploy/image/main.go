// Command image writes sluice's container image without a container daemon:
// a static sluice binary, CA certificates and a non-root user on an empty
// base, as an OCI image layout (a directory) and, optionally, a tarball that
// `docker load` and `podman load` read. It is what `make image` runs:
//
//	CGO_ENABLED=0 go build -trimpath -o sluice ./cmd/sluice
//	go run ./image -binary ../sluice -version v1.2.3 -revision $(git rev-parse HEAD) \
//	    -layout ../build/image -tarball ../build/sluice.tar
//
// The image is the Dockerfile's: the binary at /usr/local/bin/sluice as the
// entrypoint with `serve` as its command, user 65532:65532, the OCI labels
// source, revision and version. Its one layer is deterministic (files owned
// by root, fixed times), so the same inputs give the same digest.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts, shared with the Dockerfile.
const (
	// BinaryPath is where the sluice binary is in the image.
	BinaryPath = "/usr/local/bin/sluice"
	// User is the image's user and group, numeric so that Kubernetes'
	// runAsNonRoot can check it without reading /etc/passwd.
	User = "65532:65532"
	// RatelimitPath is envoyproxy/ratelimit's binary path, which Envoy
	// Gateway's Deployment runs (command: [/bin/ratelimit]): a symbolic
	// link to BinaryPath, which serves when invoked by that name.
	RatelimitPath = "/bin/ratelimit"
	// CACertsPath is where the CA certificates are in the image.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// Source is the org.opencontainers.image.source label.
	Source = "https://github.com/sluicehq/sluice"
)

// Options are the inputs of one image. The zero value is not usable: Binary
// and CACerts must name readable files.
type Options struct {
	Binary   string // the static sluice binary (CGO off) to put at BinaryPath
	CACerts  string // a PEM bundle of CA certificates to put at CACertsPath
	Version  string // the org.opencontainers.image.version label ("devel" when empty)
	Revision string // the org.opencontainers.image.revision label ("unknown" when empty)
	Arch     string // the image's architecture (runtime.GOARCH when empty)
	// Created is the config's creation time and every file's modification
	// time; the zero value is the Unix epoch, for reproducible images.
	Created time.Time
}

// Build returns the image of o, or an error naming the input it could not read.
func Build(o Options) (v1.Image, error) {
	if o.Version == "" {
		o.Version = "devel"
	}
	if o.Revision == "" {
		o.Revision = "unknown"
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0).UTC()
	}
	files, err := rootFiles(o)
	if err != nil {
		return nil, err
	}
	tarBytes, err := tarOf(files, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("the layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	if err != nil {
		return nil, fmt.Errorf("appending the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("the config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = imageConfig(o)
	return mutate.ConfigFile(img, cf)
}

// imageConfig is what a runtime reads to start the image's container.
func imageConfig(o Options) v1.Config {
	return v1.Config{
		Entrypoint:   []string{BinaryPath},
		Cmd:          []string{"serve"},
		User:         User,
		WorkingDir:   "/",
		Env:          []string{"PATH=/usr/local/bin"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "8081/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.source":   Source,
			"org.opencontainers.image.revision": o.Revision,
			"org.opencontainers.image.version":  o.Version,
			"org.opencontainers.image.title":    "sluice",
		},
	}
}

// file is one entry of the image's root filesystem: a symbolic link to link
// when link is set, else a directory when body is nil.
type file struct {
	path string
	mode int64
	body []byte
	link string
}

// rootFiles lists the image's root filesystem, parents before children.
func rootFiles(o Options) ([]file, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("the sluice binary: %w", err)
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return nil, fmt.Errorf("the sluice binary %s: not an ELF executable", o.Binary)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("the CA certificates: %w", err)
	}
	if !bytes.Contains(certs, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, errors.New("the CA certificates: " + o.CACerts + " holds no PEM certificate")
	}
	return []file{
		{path: "bin/", mode: 0o755},
		{path: RatelimitPath[1:], mode: 0o777, link: BinaryPath},
		{path: "etc/", mode: 0o755},
		{path: "etc/passwd", mode: 0o644, body: []byte("sluice:x:65532:65532:sluice:/nonexistent:/sbin/nologin\n")},
		{path: "etc/group", mode: 0o644, body: []byte("sluice:x:65532:\n")},
		{path: "etc/ssl/", mode: 0o755},
		{path: "etc/ssl/certs/", mode: 0o755},
		{path: CACertsPath[1:], mode: 0o644, body: certs},
		// A writable /tmp for a pod that mounts nothing there; with a
		// read-only root filesystem it stays empty.
		{path: "tmp/", mode: 0o1777},
		{path: "usr/", mode: 0o755},
		{path: "usr/local/", mode: 0o755},
		{path: "usr/local/bin/", mode: 0o755},
		{path: BinaryPath[1:], mode: 0o755, body: bin},
	}, nil
}

// tarOf writes files as an uncompressed tar owned by root, every time mtime.
func tarOf(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, ModTime: mtime, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		switch {
		case f.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.link
		case f.body == nil:
			h.Typeflag = tar.TypeDir
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.path, err)
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img as the only image of a new OCI image layout at dir,
// its index entry annotated with ref (org.opencontainers.image.ref.name).
func WriteLayout(dir string, img v1.Image, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clearing %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("the layout %s: %w", dir, err)
	}
	ann := map[string]string{"org.opencontainers.image.ref.name": ref}
	if err := p.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
		return fmt.Errorf("the layout %s: %w", dir, err)
	}
	return nil
}

// WriteTarball writes img to path as a tarball that `docker load` reads, tagged ref.
func WriteTarball(path string, img v1.Image, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("the tag %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("the tarball %s: %w", path, err)
	}
	return nil
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run parses args, builds the image and writes what they ask for.
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var o Options
	fs.StringVar(&o.Binary, "binary", "sluice", "the static sluice binary (CGO_ENABLED=0)")
	fs.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates (PEM) to put in the image")
	fs.StringVar(&o.Version, "version", "devel", "the image's version label")
	fs.StringVar(&o.Revision, "revision", "unknown", "the image's revision label (a commit)")
	fs.StringVar(&o.Arch, "arch", runtime.GOARCH, "the architecture the binary is built for")
	dir := fs.String("layout", "", "write an OCI image layout to this directory (replaced)")
	tarPath := fs.String("tarball", "", "write a `docker load` tarball to this file")
	ref := fs.String("tag", "sluice:devel", "the image's name in the layout and the tarball")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" && *tarPath == "" {
		return errors.New("nothing to write: give -layout DIR, -tarball FILE or both")
	}
	img, err := Build(o)
	if err != nil {
		return err
	}
	if *dir != "" {
		if err := WriteLayout(*dir, img, *ref); err != nil {
			return err
		}
	}
	if *tarPath != "" {
		if err := WriteTarball(*tarPath, img, *ref); err != nil {
			return err
		}
	}
	d, err := img.Digest()
	if err != nil {
		return fmt.Errorf("the digest: %w", err)
	}
	fmt.Fprintf(stdout, "image %s %s\n", *ref, d)
	return nil
}
