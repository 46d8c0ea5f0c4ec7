package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/safefile"
)

// reloadDebounce is how long a burst of file-system events must be quiet
// before the config is reloaded; maxDebounce bounds the wait when events
// never stop.
const (
	reloadDebounce = 100 * time.Millisecond
	maxDebounce    = 10 * reloadDebounce
)

// Reloader reloads the config on SIGHUP and on file change, one reload at a
// time (its methods are called from the command's main loop only), and
// keeps the reload metrics. serve and proxy each give it their own load.
// The zero value is not usable: start with NewReloader.
type Reloader struct {
	path string
	// load loads the config at path and swaps it in; an error (a
	// *config.Error, ideally) fails the reload and keeps the running
	// config.
	load func(path string) error
	log  *slog.Logger

	// sum is the fingerprint of the config as last loaded or tried; known
	// is false when there is none, so that the next change always
	// reloads.
	sum   [sha256.Size]byte
	known bool

	reloads, failures prometheus.Counter
	lastSuccess, ok   prometheus.Gauge
}

// NewReloader returns the reloader of the config at path, which the command
// has just loaded with fingerprint sum (known says whether it could be
// taken) and reloads with load, and registers its metrics on reg:
//
//   - sluice_config_reloads_total: successful reloads;
//   - sluice_config_reload_failures_total: failed ones (the running config
//     is kept);
//   - sluice_config_last_reload_success_timestamp_seconds: when the running
//     config was loaded, at start-up or by a reload;
//   - sluice_config_last_reload_successful: 1 if the last load succeeded,
//     else 0.
func NewReloader(path string, load func(path string) error, log *slog.Logger, reg prometheus.Registerer, sum [sha256.Size]byte, known bool) (*Reloader, error) {
	r := &Reloader{
		path: path, load: load, log: log, sum: sum, known: known,
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_config_reloads_total",
			Help: "Successful config reloads (SIGHUP or file change).",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_config_reload_failures_total",
			Help: "Failed config reloads; the running config was kept.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_success_timestamp_seconds",
			Help: "Unix time at which the running config was loaded.",
		}),
		ok: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_successful",
			Help: "1 if the last config load succeeded, 0 if it failed.",
		}),
	}
	for _, c := range []prometheus.Collector{r.reloads, r.failures, r.lastSuccess, r.ok} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	r.lastSuccess.SetToCurrentTime()
	r.ok.Set(1)
	return r, nil
}

// reloadTimeout bounds the reading of the config files by one reload (and
// at start-up): a file that never ends or never opens fails the reload
// instead of holding it.
const reloadTimeout = 5 * time.Second

// reload loads the config and swaps it in; on failure it logs the error
// (file:line:col in its text, and as attributes), counts it and keeps the
// running config. Unless force, a config whose files are byte for byte
// those last loaded or tried is not reloaded, so that file-system noise
// (an editor's temporary file, a sibling's change) costs nothing and a
// broken config is reported once, not once per event. The config files
// are read as safefile reads them (regular files only, under a size cap)
// within reloadTimeout and ctx; a file that cannot be read so fails the
// reload before the config is loaded.
func (r *Reloader) reload(ctx context.Context, trigger string, force bool) {
	ctx, cancel := context.WithTimeout(ctx, reloadTimeout)
	defer cancel()
	sum, err := fingerprint(ctx, r.path)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return // shutting down
		}
		r.known = false
		r.failed(trigger, err)
		return
	}
	if !force && r.known && sum == r.sum {
		r.log.Debug("config unchanged; not reloaded", "config", r.path, "trigger", trigger)
		return
	}
	r.sum, r.known = sum, true
	if err := r.load(r.path); err != nil {
		r.failed(trigger, err)
		return
	}
	r.reloads.Inc()
	r.ok.Set(1)
	r.lastSuccess.SetToCurrentTime()
	r.log.Info("reloaded", "config", r.path, "trigger", trigger)
}

// failed counts and logs a failed reload.
func (r *Reloader) failed(trigger string, err error) {
	r.failures.Inc()
	r.ok.Set(0)
	attrs := []any{"trigger", trigger, "err", err}
	if ce, ok := errors.AsType[*config.Error](err); ok {
		attrs = append(attrs, "file", ce.File, "line", ce.Line)
	}
	r.log.Error("reload failed; keeping the running config", attrs...)
}

// fingerprint hashes the names and contents of the config files at path,
// each read with safefile.Read: a file that is not a regular file (a FIFO,
// a device such as /dev/zero, followed symlinks included) or is over
// config.MaxFileBytes (what the loader reads at most) is an error (a
// *config.Error naming it), as are files over config.MaxTotalBytes
// together (which the loader refuses too) and ctx ending.
func fingerprint(ctx context.Context, path string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	files, err := config.Files(path)
	if err != nil {
		return sum, &config.Error{File: path, Msg: "cannot read: " + err.Error(), Err: err}
	}
	h := sha256.New()
	total := 0
	for _, f := range files {
		b, err := safefile.Read(ctx, f, config.MaxFileBytes)
		if err != nil {
			return sum, &config.Error{File: f, Msg: "cannot read: " + strings.TrimPrefix(err.Error(), f+": "), Err: err}
		}
		if total += len(b); total > config.MaxTotalBytes {
			return sum, &config.Error{File: path, Msg: fmt.Sprintf("more than %d bytes in all (%d files, %d bytes up to %s): split the rules over fewer, smaller files",
				config.MaxTotalBytes, len(files), total, f)}
		}
		io.WriteString(h, f)
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	h.Sum(sum[:0])
	return sum, nil
}

// FingerprintBeforeLoad returns the fingerprint of the config at path,
// and whether it could be taken (not when path is empty), for
// NewReloader. A command takes it before loading the config, so that a
// change between the two makes the next file event reload.
func FingerprintBeforeLoad(path string) (sum [sha256.Size]byte, known bool) {
	sum, err := CheckConfigFiles(context.Background(), path)
	return sum, err == nil && path != ""
}

// CheckConfigFiles returns the fingerprint of the config at path, or the
// error of a file that cannot be read safely (see fingerprint), within
// reloadTimeout: serve checks its files with it before loading them. An
// empty path (the built-in example) has a zero fingerprint and no error.
func CheckConfigFiles(ctx context.Context, path string) (sum [sha256.Size]byte, err error) {
	if path == "" {
		return sum, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reloadTimeout)
	defer cancel()
	return fingerprint(ctx, path)
}

// configWatcher watches the directories that the config at path depends
// on and sends on C, which holds at most one pending signal, once a burst
// of changes has been quiet for reloadDebounce.
//
// It watches, by their resolved (symlink-free) paths: the config directory,
// or for a single file its parent directory; the parent of path, so that
// path itself being replaced is seen; the directory each config file's
// symlinks lead to (a Kubernetes ConfigMap's ..2026_… data directory); and
// the extra directories (RUNTIME_WATCH_ROOT). The set is recomputed after
// every burst, so watches follow a symlink swap: a ConfigMap update, which
// renames a new ..data symlink over the old one in the config directory
// and removes the old data directory, is one burst and one reload.
type configWatcher struct {
	path  string
	extra []string
	log   *slog.Logger
	w     *fsnotify.Watcher
	names []string // see relevant; set by refresh, read by run
	// C receives a value after each quiet burst.
	C    chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

// watchConfig starts watching the config at path and the extra
// directories; Close stops it.
func watchConfig(ctx context.Context, path string, extra []string, log *slog.Logger) (*configWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	cw := &configWatcher{path: path, extra: extra, log: log, w: w, C: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	cw.refresh()
	if len(w.WatchList()) == 0 {
		stop()
		w.Close()
		return nil, errors.New("no directory of the config could be watched")
	}
	go cw.run(ctx)
	return cw, nil
}

// Close stops the watcher and waits for its goroutines to end.
func (cw *configWatcher) Close() {
	cw.stop()
	<-cw.done
}

func (cw *configWatcher) run(ctx context.Context) {
	defer close(cw.done)
	defer cw.w.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var burst time.Time // start of the pending burst; zero when none
	arm := func() {
		now := time.Now()
		if burst.IsZero() {
			burst = now
		}
		timer.Reset(min(reloadDebounce, burst.Add(maxDebounce).Sub(now)))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-cw.w.Events:
			if !ok {
				return
			}
			if ev.Op&^fsnotify.Chmod == 0 {
				continue // metadata only: not a change of content
			}
			if !cw.relevant(ev.Name) {
				// A log file, an editor's swap file: no reload, and no
				// log line, which, written to a log in this directory,
				// would be the next event.
				continue
			}
			cw.log.Debug("config watch", "event", ev.String())
			arm()
		case err, ok := <-cw.w.Errors:
			if !ok {
				return
			}
			cw.log.Warn("config watch", "err", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				arm() // events were lost: reload to be sure
			}
		case <-timer.C:
			burst = time.Time{}
			cw.refresh()
			select {
			case cw.C <- struct{}{}:
			default: // one is pending already
			}
		}
	}
}

// relevant reports whether an event on name can change the config: a
// *.yaml or *.yml file that is not a dot file (what a config directory's
// loader reads), a ConfigMap's ..data symlink or its ..data_tmp, the
// config path, one of its ancestors (a swapped RUNTIME_ROOT) or the target
// of a config file's symlink. Anything else in a watched directory, such
// as a log file that a failed reload writes to, is not.
func (cw *configWatcher) relevant(name string) bool {
	base := filepath.Base(name)
	if strings.HasPrefix(base, "..data") {
		return true
	}
	if ext := filepath.Ext(base); (ext == ".yaml" || ext == ".yml") && !strings.HasPrefix(base, ".") {
		return true
	}
	return slices.Contains(cw.names, name)
}

// configNames returns the paths whose change is relevant to the config at
// path besides config-file names (see relevant): path and its ancestors,
// each also under its resolved parent, and the config files and their
// resolved targets.
func configNames(path string) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	for a := abs; ; a = filepath.Dir(a) {
		add(a)
		if d, err := filepath.EvalSymlinks(filepath.Dir(a)); err == nil {
			add(filepath.Join(d, filepath.Base(a)))
		}
		if filepath.Dir(a) == a {
			break
		}
	}
	files, _ := config.Files(abs)
	for _, f := range files {
		add(f)
		if r, err := filepath.EvalSymlinks(f); err == nil {
			add(r)
		}
	}
	return names
}

// refresh makes the watched set the one the file system now calls for.
func (cw *configWatcher) refresh() {
	cw.names = configNames(cw.path)
	want := watchDirs(cw.path, cw.extra)
	have := cw.w.WatchList()
	for _, d := range have {
		if !slices.Contains(want, d) {
			cw.w.Remove(d) // may be gone already; fsnotify then dropped it
		}
	}
	for _, d := range want {
		if !slices.Contains(have, d) {
			if err := cw.w.Add(d); err != nil {
				cw.log.Debug("config watch: cannot watch", "dir", d, "err", err)
			}
		}
	}
}

// watchDirs returns the resolved directories the config at path depends
// on; see configWatcher. Paths that do not resolve (mid-swap) are left out
// until the next refresh.
func watchDirs(path string, extra []string) []string {
	var dirs []string
	add := func(d string) {
		if r, err := filepath.EvalSymlinks(d); err == nil && !slices.Contains(dirs, r) {
			dirs = append(dirs, r)
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	add(filepath.Dir(abs))
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		add(abs)
	}
	files, _ := config.Files(abs)
	for _, f := range files {
		if r, err := filepath.EvalSymlinks(f); err == nil {
			add(filepath.Dir(r))
		}
	}
	for _, d := range extra {
		add(d)
	}
	return dirs
}

// reloadSignal is the first step of serve and proxy: it takes SIGHUP (a
// reload, see mainLoop) from the very start, since SIGHUP's default action
// would end the process while it loads its config, opens its store or
// listens; one that comes during start-up reloads once mainLoop runs. stop
// gives SIGHUP back.
func reloadSignal() (hup <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}

// reloadRequest is a reload asked of mainLoop's reload goroutine.
type reloadRequest struct {
	trigger string
	force   bool
}

// mainLoop is serve's and proxy's: it reloads on SIGHUP (hup) and on file
// change (changed) until ctx ends or a server fails (errc), and returns the
// exit code, 1 if a server failed (reported with fail, see ExitWith). rl is
// nil when there is no config file to reload (noReload says why, in the
// log).
//
// Reloads run one at a time on a goroutine of their own, never on this
// loop, so that a reload however slow never delays the end of ctx
// (SIGTERM): requests that come while one runs are merged into one pending
// reload (forced if any of them was). When ctx ends, a running reload is
// cancelled and waited for at most a second.
func mainLoop(ctx context.Context, log *slog.Logger, rl *Reloader, hup <-chan os.Signal, changed <-chan struct{}, errc <-chan error, noReload string, fail func(int, ...any) int) int {
	var reqs chan reloadRequest
	if rl != nil {
		reqs = make(chan reloadRequest, 1)
		done := make(chan struct{})
		rctx, cancel := context.WithCancel(ctx)
		go func() {
			defer close(done)
			for req := range reqs {
				rl.reload(rctx, req.trigger, req.force)
			}
		}()
		defer func() {
			close(reqs)
			cancel()
			select {
			case <-done:
			case <-time.After(time.Second):
				log.Warn("a config reload is still running at exit")
			}
		}()
	}
	// ask queues a reload; only this goroutine sends on reqs, so after
	// taking the pending request out, the send cannot block.
	ask := func(r reloadRequest) {
		select {
		case reqs <- r:
		default:
			select {
			case old := <-reqs:
				if old.force && !r.force {
					r = old
				}
			default:
			}
			reqs <- r
		}
	}
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-hup:
			if rl == nil {
				log.Info("reload: nothing to reload (" + noReload + ")")
				continue
			}
			ask(reloadRequest{"SIGHUP", true})
		case <-changed:
			ask(reloadRequest{"file change", false})
		case err := <-errc:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fail(1, err)
			}
			return 0
		}
	}
}
