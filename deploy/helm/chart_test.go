// Package helm holds the tests of the sluice chart beside it.
package helm

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/deploy/internal/kube"
)

// chartDir is the chart under test.
const chartDir = "sluice"

// release is the release name the tests render with.
const release = "rl"

// cases are the values the chart is rendered with, over values.yaml, and
// what each must deploy.
var cases = []struct {
	name   string
	values map[string]any
	expect kube.Expect
}{
	{"defaults", nil, kube.Expect{PDB: true}},
	{"redis, ServiceMonitor and HPA on", map[string]any{
		"redis":          map[string]any{"enabled": true},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"autoscaling":    map[string]any{"enabled": true},
	}, kube.Expect{RedisSecret: release + "-sluice-redis", Redis: true, PDB: true, HPA: true, ServiceMonitor: true}},
	{"external Redis URL, no PDB", map[string]any{
		"externalRedis":       map[string]any{"url": "rediss://redis.example:6380"},
		"podDisruptionBudget": map[string]any{"enabled": false},
	}, kube.Expect{RedisSecret: release + "-sluice-redis"}},
	{"existing Secret", map[string]any{
		"externalRedis": map[string]any{"existingSecret": "my-redis"},
	}, kube.Expect{RedisSecret: "my-redis", PDB: true}},
}

// Every template of the chart, rendered with its default values and with
// Redis, the ServiceMonitor and the HPA on (and with an external Redis),
// decodes strictly into the Kubernetes API's types and deploys what the
// values ask for. The chart is rendered by render (Go's text/template with
// the few Helm functions the chart uses); `helm template` and `helm lint`
// also run when helm is installed.
func TestChartRenders(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files, err := render(chartDir, release, c.values)
			if err != nil {
				t.Fatalf("rendering: %v", err)
			}
			if !strings.Contains(files["NOTES.txt"], release+"-sluice:8081") {
				t.Errorf("NOTES.txt does not name the gRPC Service:\n%s", files["NOTES.txt"])
			}
			delete(files, "NOTES.txt")
			var objs []kube.Object
			for _, name := range slices.Sorted(maps.Keys(files)) {
				o, err := kube.Decode(name, []byte(files[name]))
				if err != nil {
					t.Errorf("%v\n%s", err, files[name])
				}
				objs = append(objs, o...)
			}
			c.expect.Deployment, c.expect.ConfigMap, c.expect.Service = release+"-sluice", release+"-sluice", release+"-sluice"
			kube.CheckRelease(t, objs, c.expect)
		})
	}
}

// Values that would deploy something broken are refused at render time:
// an HPA over pods that count alone, a grace period shorter than the drain.
func TestChartRefuses(t *testing.T) {
	for name, v := range map[string]map[string]any{
		"HPA on the memory store":          {"autoscaling": map[string]any{"enabled": true}},
		"grace shorter than sleep + drain": {"terminationGracePeriodSeconds": 14},
	} {
		if _, err := render(chartDir, release, v); err == nil || !strings.Contains(err.Error(), "fail") {
			t.Errorf("%s: rendered (err %v), want the chart's fail", name, err)
		}
	}
}

// With helm installed, `helm lint` passes and `helm template` gives the
// same objects as render, for every case. Without it the test says it is
// skipped (and fails under SLUICE_REQUIRE_HELM=1).
func TestChartWithHelm(t *testing.T) {
	helm, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_HELM") == "1" {
			t.Fatal("helm not found and SLUICE_REQUIRE_HELM=1")
		}
		t.Skip("SKIPPED helm lint and helm template: helm is not installed (the chart is still rendered by TestChartRenders' own renderer)")
	}
	if out, err := exec.Command(helm, "lint", "--strict", chartDir).CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	for _, c := range cases {
		vf := filepath.Join(t.TempDir(), "values.yaml")
		b, _ := yaml.Marshal(c.values)
		os.WriteFile(vf, b, 0o644)
		out, err := exec.Command(helm, "template", release, chartDir, "-f", vf).Output()
		if err != nil {
			t.Fatalf("%s: helm template: %v", c.name, err)
		}
		got, err := kube.Decode("helm template", out)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		files, err := render(chartDir, release, c.values)
		if err != nil {
			t.Fatal(err)
		}
		delete(files, "NOTES.txt")
		var want []kube.Object
		for _, f := range files {
			o, _ := kube.Decode("render", []byte(f))
			want = append(want, o...)
		}
		if g, w := names(got), names(want); !slices.Equal(g, w) {
			t.Errorf("%s: helm template gives %v, render %v", c.name, g, w)
		}
	}
}

// names lists objs' kinds and names, sorted.
func names(objs []kube.Object) []string {
	var n []string
	for _, o := range objs {
		n = append(n, kube.Name(o))
	}
	slices.Sort(n)
	return n
}

// The renderer itself: toYaml, quote and include as Helm's.
func TestRenderFuncs(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "templates"), 0o755)
	os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("name: c\nversion: 1.0.0\nappVersion: \"2\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("m: {b: 1, a: [x]}\ns: 'say \"hi\"'\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "templates", "_h.tpl"), []byte(`{{- define "h" -}}{{ .Chart.Name }}-{{ .Chart.AppVersion }}{{- end -}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "templates", "t.yaml"), []byte(`x:{{ toYaml .Values.m | nindent 2 }}
q: {{ .Values.s | quote }}
i: {{ include "h" . }}
d: {{ .Values.missing | default "dflt" }}
`), 0o644)
	files, err := render(dir, "r", map[string]any{"missing": ""})
	if err != nil {
		t.Fatal(err)
	}
	want := "x:\n  a:\n  - x\n  b: 1\nq: \"say \\\"hi\\\"\"\ni: c-2\nd: dflt\n"
	if got := files["t.yaml"]; got != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
	if _, ok := files["_h.tpl"]; ok {
		t.Error("a partial (_*.tpl) was rendered as a manifest")
	}
}
