// Package kubernetes holds the tests of the plain manifests beside it.
package kubernetes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/deploy/internal/kube"
)

// Every manifest under deploy/kubernetes decodes strictly into the
// Kubernetes API's types, and together they deploy what docs/deploy.md
// describes: the pod shape, the config mount, graceful shutdown.
func TestManifests(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	optional, _ := filepath.Glob("optional/*.yaml")
	files = append(files, optional...)
	if len(files) < 7 {
		t.Fatalf("found %d manifests (%v), want the 7 the docs list", len(files), files)
	}
	var all []kube.Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := kube.Decode(f, data)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		all = append(all, objs...)
	}
	kube.CheckRelease(t, all, kube.Expect{
		Deployment: "sluice", ConfigMap: "sluice-config", Service: "sluice",
		RedisSecret: "sluice-redis", Redis: true, PDB: true, HPA: true, ServiceMonitor: true,
	})
}
