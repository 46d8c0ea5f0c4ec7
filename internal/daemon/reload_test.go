package daemon

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/daemontest"
	"github.com/sluicehq/sluice/internal/testlog"
)

// A reload loads the config only when its files changed since the last
// load or try, unless it is forced (SIGHUP): file-system noise costs
// nothing, and a broken config is tried and reported once, not once per
// event. A failed load keeps the running config, is counted, and is logged
// with the file and line of its error.
func TestReloaderLoadsChangedFilesOnceUnlessForced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	daemontest.WriteFile(t, path, "domain: d\n")
	sum, known := FingerprintBeforeLoad(path)
	if !known {
		t.Fatal("no fingerprint of a readable config")
	}
	var (
		loads   int
		loadErr error
		logs    testlog.Buffer
	)
	r, err := NewReloader(path, func(string) error { loads++; return loadErr },
		slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry(), sum, known)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i, step := range []struct {
		write   string // the config's new content; "": unchanged
		loadErr error
		force   bool
		// what the counters and the load count are after the step
		loads, reloads, failures int
		ok                       float64
	}{
		{loads: 0, ok: 1},                          // unchanged: not loaded
		{force: true, loads: 1, reloads: 1, ok: 1}, // SIGHUP: loaded all the same
		{write: "domain: e\n", loadErr: &config.Error{File: path, Line: 1, Msg: "broken"}, loads: 2, reloads: 1, failures: 1},
		{loadErr: &config.Error{File: path, Line: 1, Msg: "broken"}, loads: 2, reloads: 1, failures: 1}, // tried once
		{write: "domain: f\n", loads: 3, reloads: 2, failures: 1, ok: 1},
	} {
		if step.write != "" {
			daemontest.WriteFile(t, path, step.write)
		}
		loadErr = step.loadErr
		r.reload(ctx, "test", step.force)
		got := []float64{float64(loads), testutil.ToFloat64(r.reloads), testutil.ToFloat64(r.failures), testutil.ToFloat64(r.ok)}
		want := []float64{float64(step.loads), float64(step.reloads), float64(step.failures), step.ok}
		for j, name := range []string{"loads", "reloads", "failures", "ok"} {
			if got[j] != want[j] {
				t.Errorf("step %d: %s = %v, want %v", i, name, got[j], want[j])
			}
		}
	}
	if s := logs.String(); strings.Count(s, "reload failed") != 1 || !strings.Contains(s, "line=1") {
		t.Errorf("want one failure logged with its line:\n%s", s)
	}
}

// The watcher reacts to what can change the config (a YAML file that is
// not a dot file, a ConfigMap's ..data, the config path itself) and not to
// the other files of its directories, such as a log file that a failed
// reload writes to, which would otherwise reload in a loop.
func TestConfigWatcherIgnoresFilesThatAreNotConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	cw := &configWatcher{names: configNames(path)}
	for name, want := range map[string]bool{
		filepath.Join(path, "rl.yaml"):      true,
		filepath.Join(path, "rl.yml"):       true,
		filepath.Join(path, "..data"):       true,
		filepath.Join(path, "..data_tmp"):   true,
		path:                                true,
		filepath.Join(path, ".rl.yaml.swp"): false,
		filepath.Join(path, ".rl.yaml"):     false,
		filepath.Join(dir, "sluice.log"):    false,
		filepath.Join(path, "notes.txt"):    false,
	} {
		if got := cw.relevant(name); got != want {
			t.Errorf("relevant(%s) = %v, want %v", name, got, want)
		}
	}
}
