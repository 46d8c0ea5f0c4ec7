// Package archtest holds the test that keeps Sluice's layers apart: the core
// (the vocabulary, the algorithms, the stores and the wrappers) never reaches
// an edge package (net/http, gRPC, Prometheus, a Redis or SQL client), and a
// face (httplimit, gateway, service, client, sim) never imports another face
// unless the table below says why. docs/architecture.md describes the same
// layers in prose; the two change together.
//
// The test reads the real import graph with one `go list -deps -json` call and
// checks it with a pure function, check, which the other tests feed synthetic
// graphs to show that each rule can fail.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// module is the import path of the module under test.
const module = "github.com/sluicehq/sluice"

// A layer is a ring of the architecture. Dependencies point inward.
type layer int

const (
	vocabulary layer = iota // package sluice: Limit, Result, Limiter, Clock, errors
	pure                    // pure state transitions and data structures: algorithm, calendar
	store                   // the Limiters that hold state: memstore, redisstore
	wrapper                 // Limiters around any Limiter: failsafe, relief, queue
	helper                  // shared edge helpers: request, clientip, rlheader, config
	support                 // internal/*: file reading, strict YAML, test servers
	face                    // what a user or a program talks to: httplimit, gateway, service, client, sim
	wiring                  // cmd/*, examples/*: main packages that pick concrete stores
)

var layerNames = map[layer]string{
	vocabulary: "the vocabulary",
	pure:       "a pure package",
	store:      "a store",
	wrapper:    "a wrapper",
	helper:     "a shared edge helper",
	support:    "an internal package",
	face:       "a face",
	wiring:     "wiring",
}

func (l layer) String() string { return layerNames[l] }

// mayImport lists, for each layer, the layers of this module its packages may
// import. A layer not listed for itself may not import its own kind: a store
// does not build on another store, a face does not build on another face.
var mayImport = map[layer][]layer{
	vocabulary: nil,
	pure:       {vocabulary},
	store:      {vocabulary, pure},
	wrapper:    {vocabulary, pure},
	helper:     {vocabulary, helper, support},
	support:    {vocabulary, support},
	face:       {vocabulary, wrapper, helper, support},
	wiring:     {vocabulary, pure, store, wrapper, helper, support, face, wiring},
}

// An edgeKind is a family of packages outside the module that only some
// layers may depend on, directly or through other packages.
type edgeKind struct {
	name      string
	prefixes  []string // an import path matches if it equals a prefix or lies under it
	forbidden []layer  // layers that may not depend on it without a grant
}

const (
	edgeHTTP       = "HTTP"
	edgeGRPC       = "gRPC/protobuf"
	edgeMetrics    = "Prometheus"
	edgeRedis      = "a Redis client"
	edgeSQL        = "an SQL driver"
	edgeTesting    = "package testing"
	edgeCharts     = "the chart library"
	edgeFileWatch  = "file watching"
	edgeYAMLParser = "the YAML parser"
	edgeTracing    = "OpenTelemetry"
	edgeStatsd     = "a statsd client"
)

var core = []layer{vocabulary, pure, store, wrapper, helper, support}

var edges = []edgeKind{
	{edgeHTTP, []string{"net/http"}, core},
	{edgeGRPC, []string{"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/envoyproxy/go-control-plane"}, core},
	{edgeMetrics, []string{"github.com/prometheus"}, core},
	// Only cmd/sluice knows the concrete stores; the faces see sluice.Limiter.
	{edgeRedis, []string{"github.com/redis", "github.com/valkey-io", "github.com/gomodule/redigo"}, []layer{vocabulary, pure, store, wrapper, helper, support, face}},
	{edgeSQL, []string{"database/sql", "github.com/jackc", "github.com/lib/pq", "github.com/go-sql-driver", "github.com/mattn/go-sqlite3", "modernc.org/sqlite"}, []layer{vocabulary, pure, store, wrapper, helper, support, face}},
	// A binary that links package testing registers its flags; only test helpers may.
	{edgeTesting, []string{"testing"}, []layer{vocabulary, pure, store, wrapper, helper, support, face, wiring}},
	{edgeCharts, []string{"gonum.org/v1/plot"}, core},
	{edgeFileWatch, []string{"github.com/fsnotify"}, core},
	// YAML is read in one place (internal/strictyaml) and by config, which compiles it.
	{edgeYAMLParser, []string{"go.yaml.in/yaml/v3", "go.yaml.in/yaml"}, []layer{vocabulary, pure, store, wrapper}},
	// Tracing is set up in one place (internal/tracing) and installed by
	// the wiring around a face's servers; no face or core package traces.
	{edgeTracing, []string{"go.opentelemetry.io"}, []layer{vocabulary, pure, store, wrapper, helper, support, face}},
	// The service's statsd sink; the core reports numbers, faces export them.
	{edgeStatsd, []string{"github.com/lyft/gostats"}, core},
}

// A pkgRule places one package of the module in a layer and grants it the
// edge kinds its job needs, each with the reason.
type pkgRule struct {
	layer  layer
	grants map[string]string // edge kind name → why this package may reach it
	// testOnly marks a package only tests import: a test server, a fake, a
	// suite. A package that ships (every other) may not import one, and
	// the package's doc comment says which it is (TestPackagesSayWhetherTheyShip).
	testOnly bool
}

// packages is the layer table. Every package of the module must be in it, or
// match a prefix in prefixLayers; docs/architecture.md has the same table.
var packages = map[string]pkgRule{
	".":          {layer: vocabulary},
	"algorithm":  {layer: pure},
	"calendar":   {layer: pure},
	"memstore":   {layer: store},
	"redisstore": {layer: store, grants: map[string]string{edgeRedis: "it is the Redis store"}},
	"pgstore":    {layer: store, grants: map[string]string{edgeSQL: "it is the PostgreSQL store (pgx)"}},
	"failsafe":   {layer: wrapper},
	"relief":     {layer: wrapper},
	"queue":      {layer: wrapper},
	"adaptive":   {layer: wrapper},
	"request":    {layer: helper, grants: map[string]string{edgeHTTP: "it computes the canonical form of an *http.Request"}},
	"clientip":   {layer: helper, grants: map[string]string{edgeHTTP: "it reads an *http.Request's peer and forwarding headers"}},
	"rlheader":   {layer: helper},
	"config/configtest": {layer: helper, testOnly: true, grants: map[string]string{
		edgeTesting: "it compiles configurations for tests, failing the test on error",
		edgeHTTP:    "only through config",
	}},
	"httplimit/httplimittest": {layer: helper, testOnly: true, grants: map[string]string{
		edgeTesting: "it is the decision recorder and plans scenario httplimit's and gateway's tests share",
		edgeHTTP:    "it sends the plans scenario's requests to the handler under test",
	}},
	"config": {layer: helper, grants: map[string]string{
		edgeHTTP: "only through clientip and request: forward_auth's trusted proxies and canonical rule values",
	}},
	"internal/safefile":     {layer: support},
	"internal/strictyaml":   {layer: support},
	"internal/clocktest":    {layer: support, testOnly: true},
	"internal/testlog":      {layer: support, testOnly: true},
	"internal/eventq":       {layer: support},
	"internal/bodyrate":     {layer: support},
	"internal/redact":       {layer: support},
	"internal/envflag":      {layer: support},
	"internal/backoff":      {layer: support},
	"internal/ratelimitenv": {layer: support},
	"internal/progress":     {layer: support},
	"internal/promreg": {layer: support, grants: map[string]string{
		edgeMetrics: "it registers Prometheus collectors for the faces",
		edgeHTTP:    "only through Prometheus's client library",
		edgeGRPC:    "only protobuf, through Prometheus's client library",
	}},
	"internal/promtest": {layer: support, testOnly: true, grants: map[string]string{
		edgeTesting: "it reads the series of a test's Prometheus registry, failing the test on error",
		edgeMetrics: "it gathers the registry the package under test counts in",
		edgeHTTP:    "only through Prometheus's client library",
		edgeGRPC:    "only protobuf, through Prometheus's client library",
	}},
	"internal/storetest": {layer: support, testOnly: true, grants: map[string]string{edgeTesting: "it is the conformance suite tests call"}},
	"internal/redistest": {layer: support, testOnly: true, grants: map[string]string{edgeTesting: "it starts redis-server for tests"}},
	"internal/testpki":   {layer: support, testOnly: true, grants: map[string]string{edgeTesting: "it makes the certificates of TLS tests"}},
	"internal/pgtest": {layer: support, testOnly: true, grants: map[string]string{
		edgeTesting: "it starts PostgreSQL servers for tests",
		edgeSQL:     "it waits for a server, and makes schemas, with pgx",
	}},
	"internal/goldentest": {layer: support, testOnly: true, grants: map[string]string{edgeTesting: "it is the golden-file walker config's and gateway's tests call"}},
	"internal/archtest":   {layer: support, testOnly: true},
	"internal/topk":       {layer: support},
	"internal/keyhash":    {layer: support},
	"internal/loggate":    {layer: support},
	"internal/xdstest": {layer: support, testOnly: true, grants: map[string]string{
		edgeTesting: "it runs go-control-plane's xDS server and makes certificates for xDS tests",
		edgeGRPC:    "it is an xDS server (go-control-plane's server and snapshot cache)",
		edgeHTTP:    "only through gRPC",
	}},
	"internal/tracing": {layer: support, grants: map[string]string{
		edgeTracing: "it is the one place that sets up OpenTelemetry (exporter, sampler, propagators, otelgrpc)",
		edgeGRPC:    "the OTLP/gRPC exporter and otelgrpc's stats handler for the gRPC server",
		edgeHTTP:    "the OTLP/HTTP exporter and the span around the HTTP endpoints",
		edgeSQL:     "only database/sql/driver's interfaces, through github.com/google/uuid in OpenTelemetry's resource package",
	}},
	"internal/statsd": {layer: support},
	"internal/clip":   {layer: support},
	"internal/daemontest": {layer: support, testOnly: true, grants: map[string]string{
		edgeTesting: "it is the helpers the tests of internal/daemon and cmd/sluice share",
		edgeGRPC:    "it dials the servers under test and asks their health service",
		edgeHTTP:    "only through gRPC",
	}},
	"internal/rlqstest": {layer: support, testOnly: true, grants: map[string]string{
		edgeGRPC: "it is a simulated Envoy speaking RLQS (Envoy's generated types, gRPC's stream interfaces)",
		edgeHTTP: "only through gRPC",
	}},
	"internal/tracing/otlptest": {layer: support, testOnly: true, grants: map[string]string{
		edgeTracing: "only OTLP's protobuf messages (go.opentelemetry.io/proto/otlp), which it receives",
		edgeGRPC:    "it serves the OTLP collector's TraceService for tests",
		edgeHTTP:    "it serves OTLP's POST /v1/traces for tests",
	}},
	"httplimit": {layer: face},
	"gateway":   {layer: face},
	"service": {layer: face, grants: map[string]string{
		edgeStatsd: "its counters feed a statsd store beside Prometheus, with envoyproxy/ratelimit's names",
	}},
	"client": {layer: face},
	// gRPC server interceptors: rate limits through any Limiter, and
	// adaptive concurrency through package adaptive.
	"grpclimit": {layer: face},
	"sim":       {layer: face},
	// Envoy's rate limit quota service (RLQS) on the config's rules; the
	// store it divides limits through is passed in.
	"rlqs": {layer: face},
	// The admin API: peek, reset, plans, overrides, usage and the ledger,
	// behind a token or mTLS, every call audited; the stores behind it
	// are interfaces cmd/sluice fills in.
	"admin": {layer: face},
	// The admin listener's live page: decisions per rule, the most limited
	// keys, the latest refusals, the config and the store, and a form
	// that reads a descriptor without spending.
	"admin/page": {layer: face},
	// Plans, tenants' plans and overrides, read through a cache of bounded
	// staleness; the SQL that holds them is pgstore's PlanStore.
	"plans": {layer: wrapper},
	// The plans.Source over pgstore's PlanStore: a store and a wrapper may
	// not import each other, so the one adapter between them is wiring,
	// shared by cmd/sluice and the faces' tests.
	"pgstore/pgplans": {layer: wiring},
	// The table of store kinds -store names (memory, Redis, PostgreSQL):
	// how each opens, what it serves, what it makes moot. It knows the
	// concrete stores, as cmd/sluice does.
	"internal/stores": {layer: wiring},
	// The config's face toward an xDS control plane: a gRPC client that
	// compiles what it receives with config, as the file loader does.
	"xdsconfig": {layer: face},
	// What serve and proxy share: the app lifecycle and its exit codes,
	// the config reloader and watcher, the listeners' caps and deadlines,
	// gRPC TLS and Unix sockets, the debug and admin listeners, the log
	// format. It builds servers out of faces (gateway's HTTP server, the
	// admin API and its page), so it is wiring, which cmd/sluice imports.
	"internal/daemon": {layer: wiring},
	// The client side of the admin API that sluice admin runs: an
	// operation's arguments as one call, made with a token or a client
	// certificate. It speaks package admin's paths and types and reads
	// the token and CA as serve does (internal/daemon), so it is wiring.
	"internal/adminclient": {layer: wiring},
	// serve's tracing and statsd, set up from envoyproxy/ratelimit's
	// variables; it hands the service its statsd store, so it is wiring.
	"internal/telemetry": {layer: wiring},
}

// prefixLayers places packages the table does not name: every main package
// under cmd/ and examples/ is wiring, and a new internal package is held to
// the internal layer's rules until it gets a row of its own.
var prefixLayers = []struct {
	prefix string
	layer  layer
}{
	{"cmd/", wiring},
	{"examples/", wiring},
	{"internal/", support},
}

// An allowedEdge permits one import between two packages of the module that
// the layer rules forbid. debt marks a known exception that should go away;
// the test fails once such an edge is gone, so that the table stays true.
type allowedEdge struct {
	from, to string
	debt     bool
	why      string
}

var allowedEdges = []allowedEdge{
	{from: "gateway", to: "httplimit", why: "the proxy is httplimit's middleware plus routes and upstreams"},
	{from: "sim", to: "algorithm", why: "the simulator steps the pure algorithms on a simulated clock, with no store"},
	{from: "client", to: "algorithm", why: "a Pacer given no Limiter paces in process with the pure algorithms, so that the client stands alone and picks no store"},
	{from: "algorithm", to: "calendar", why: "a fixed window with a calendar takes its windows from the calendar math"},
	{from: "admin/page", to: "service", why: "the page is the service's Observer (service.Decision) and asks it check-only descriptors for its form"},
	{from: "redisstore", to: "internal/safefile", why: "LoadTLS reads the PEM files REDIS_TLS_* name as every file is read: a regular file under a cap, within a deadline"},
	{from: "redisstore", to: "internal/redact", why: "its URL errors mask the URL's secrets by the one rule every printed URL follows"},
	{from: "redisstore", to: "internal/backoff", why: "a Lazy store reconnects with the one back-off of the remote stores, which the PostgreSQL ping at start shares"},
	{from: "pgstore", to: "internal/clip", why: "a client's group name in its messages is cut by the one rule of every cut string: a bound in bytes, never inside a rune"},
	{from: "pgstore", to: "internal/redact", why: "Open's errors mask the connection string's secrets, whatever the driver echoes, by the one rule every printed URL follows"},
}

// A graph is the import graph go list reports: every package reachable from
// the module, keyed by import path, with its direct imports.
type graph struct {
	imports map[string][]string
	local   []string // the module's own packages, relative to module ("." for the root)
}

// rel names a module package relative to the module: "." for the root.
func rel(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r, true
	}
	return "", false
}

func abs(r string) string {
	if r == "." {
		return module
	}
	return module + "/" + r
}

func matches(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// ruleFor returns the rule of module package r and whether the table knows it.
func ruleFor(r string) (pkgRule, bool) {
	if pr, ok := packages[r]; ok {
		return pr, true
	}
	for _, p := range prefixLayers {
		if strings.HasPrefix(r, p.prefix) {
			return pkgRule{layer: p.layer}, true
		}
	}
	return pkgRule{}, false
}

// check returns one message per broken rule in g, sorted.
func check(g graph) []string {
	var out []string
	exists := map[string]bool{}
	for _, r := range g.local {
		exists[r] = true
	}
	used := map[[2]string]bool{}

	for _, r := range g.local {
		pr, ok := ruleFor(r)
		if !ok {
			out = append(out, fmt.Sprintf("package %s is not in the layer table: add it to packages in internal/archtest/archtest_test.go and to docs/architecture.md, with its layer", r))
			continue
		}
		// Imports between the module's own packages.
		for _, imp := range g.imports[abs(r)] {
			to, ok := rel(imp)
			if !ok {
				continue
			}
			tr, ok := ruleFor(to)
			if !ok {
				continue // reported on its own
			}
			if tr.testOnly && !pr.testOnly {
				out = append(out, fmt.Sprintf("%s imports %s, which only tests may import: a package that ships may not import a test-only one. Move what they share into a package that ships, or mark %s test-only if only tests import it", r, to, r))
			}
			if slices.Contains(mayImport[pr.layer], tr.layer) {
				continue
			}
			if slices.ContainsFunc(allowedEdges, func(e allowedEdge) bool { return e.from == r && e.to == to }) {
				used[[2]string{r, to}] = true
				continue
			}
			out = append(out, fmt.Sprintf("%s imports %s: %s (%s) may not import %s (%s); it may import %s. Move what they share inward, or if the edge is part of the design add it to allowedEdges with its reason (docs/architecture.md)",
				r, to, r, pr.layer, to, tr.layer, layerList(mayImport[pr.layer])))
		}
		// Edge packages, reached directly or through other packages.
		for _, ek := range edges {
			if !slices.Contains(ek.forbidden, pr.layer) {
				continue
			}
			if _, granted := pr.grants[ek.name]; granted {
				continue
			}
			// A path through a module package that breaks the same rule is
			// reported there, not again at each of its importers.
			culprit := func(p string) bool {
				m, ok := rel(p)
				if !ok {
					return false
				}
				mr, ok := ruleFor(m)
				_, granted := mr.grants[ek.name]
				return ok && slices.Contains(ek.forbidden, mr.layer) && !granted
			}
			if chain := findPath(g, abs(r), ek.prefixes, culprit); chain != nil {
				out = append(out, fmt.Sprintf("%s depends on %s (%s), which %s may not reach: %s. Take it out, or if the package's job needs it grant it in the packages table with the reason (docs/architecture.md)",
					r, chain[len(chain)-1], ek.name, pr.layer, strings.Join(shorten(chain), " → ")))
			}
		}
	}
	// The tables must stay true.
	for r, pr := range packages {
		if !exists[r] {
			out = append(out, fmt.Sprintf("packages has a row for %s (%s), which is not in the module: delete its row here and in docs/architecture.md", r, pr.layer))
		}
	}
	for _, e := range allowedEdges {
		if e.debt && exists[e.from] && !used[[2]string{e.from, e.to}] {
			out = append(out, fmt.Sprintf("the known exception %s → %s (%s) is gone: delete its row from allowedEdges and from docs/architecture.md's known exceptions", e.from, e.to, e.why))
		}
	}
	sort.Strings(out)
	return out
}

// findPath returns the shortest import chain from start to a package matching
// one of prefixes that does not pass through a package for which skip is true,
// or nil.
func findPath(g graph, start string, prefixes []string, skip func(string) bool) []string {
	parent := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g.imports[p] {
			if _, seen := parent[imp]; seen || skip(imp) {
				continue
			}
			parent[imp] = p
			if slices.ContainsFunc(prefixes, func(pre string) bool { return matches(imp, pre) }) {
				var chain []string
				for q := imp; q != ""; q = parent[q] {
					chain = append(chain, q)
				}
				slices.Reverse(chain)
				return chain
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

// shorten writes the module's packages relative to the module.
func shorten(chain []string) []string {
	out := make([]string, len(chain))
	for i, p := range chain {
		if r, ok := rel(p); ok {
			p = r
		}
		out[i] = p
	}
	return out
}

func layerList(ls []layer) string {
	if len(ls) == 0 {
		return "nothing of the module"
	}
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = l.String()
	}
	return strings.Join(s, ", ")
}

// listedPackage is the part of go list's JSON the test reads.
type listedPackage struct {
	ImportPath string
	Dir        string
	Imports    []string
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// loadGraph runs go list once over the module and everything it imports.
// It also opens each of the module's package directories so that go test's
// cache notices a changed, added or removed file there.
func loadGraph(t *testing.T) graph {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH, so the import graph cannot be read: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-e", "-deps", "-json=ImportPath,Dir,Imports,Module,Error", module+"/...")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := graph{imports: map[string][]string{}}
	dirs := map[string]bool{}
	dec := json.NewDecoder(&stdout)
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: reading its JSON: %v", err)
		}
		g.imports[p.ImportPath] = p.Imports
		r, ok := rel(p.ImportPath)
		if !ok || p.Module == nil || p.Module.Path != module {
			continue
		}
		if p.Error != nil {
			t.Logf("go list: %s: %s (its imports may be incomplete)", r, p.Error.Err)
		}
		g.local = append(g.local, r)
		for d := p.Dir; d != "" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			if r == "." || filepath.Dir(d) == d {
				break
			}
		}
	}
	for d := range dirs {
		if f, err := os.Open(d); err == nil {
			_, _ = f.ReadDir(-1)
			_ = f.Close()
		}
	}
	return g
}

// TestLayers checks the module's real import graph against the layer table.
func TestLayers(t *testing.T) {
	g := loadGraph(t)
	if !slices.Contains(g.local, ".") {
		t.Fatalf("go list did not report the root package %s; got %d module packages", module, len(g.local))
	}
	for _, msg := range check(g) {
		t.Error(msg)
	}
}

// synthetic builds a graph from "from: to to ..." lines, where names without
// a dot in their first element are the module's packages.
func synthetic(lines ...string) graph {
	g := graph{imports: map[string][]string{}}
	for _, line := range lines {
		from, tos := splitLine(line)
		var imports []string
		for _, to := range strings.Fields(tos) {
			imports = append(imports, toPath(to))
		}
		g.imports[toPath(from)] = imports
		if r, ok := rel(toPath(from)); ok {
			g.local = append(g.local, r)
		}
	}
	return g
}

// splitLine splits "from: to to ..." at the first ": ", so that "std:net/rpc: std:net/http" works.
func splitLine(line string) (from, tos string) {
	from, tos, _ = strings.Cut(line+" ", ": ")
	return strings.TrimSpace(from), tos
}

// toPath turns "memstore" into the module's import path, and leaves standard
// ("net/http") and external ("github.com/...") paths as they are.
func toPath(s string) string {
	switch {
	case s == ".":
		return module
	case strings.HasPrefix(s, "std:"):
		return strings.TrimPrefix(s, "std:")
	case strings.Contains(strings.SplitN(s, "/", 2)[0], "."):
		return s
	default:
		return abs(s)
	}
}

// cleanGraph is the module as the table describes it, with every known
// exception present and no broken rule.
func cleanGraph() []string {
	return []string{
		".: std:time",
		"algorithm: . calendar std:time",
		"calendar: . std:time",
		"memstore: . algorithm std:sync",
		"redisstore: . algorithm internal/backoff github.com/redis/rueidis",
		"github.com/redis/rueidis: std:net",
		"pgstore: . github.com/jackc/pgx/v5",
		"failsafe: . std:log/slog",
		"relief: .",
		"plans: . std:log/slog",
		"pgstore/pgplans: pgstore plans",
		"internal/stores: memstore redisstore pgstore internal/redact",
		"internal/telemetry: service internal/tracing internal/statsd",
		"internal/adminclient: admin internal/daemon internal/safefile std:net/http",
		"admin: . plans std:net/http",
		"admin/page: . config service internal/topk internal/keyhash std:net/http",
		"internal/topk: std:sync",
		"internal/keyhash: std:crypto/sha256",
		"internal/loggate: std:sync/atomic std:time",
		"queue: . algorithm",
		"request: std:net/http",
		"clientip: std:net/http",
		"rlheader: std:strconv",
		"config: . clientip request internal/strictyaml internal/safefile",
		"internal/safefile: std:os",
		"internal/strictyaml: internal/safefile gopkg.in/yaml.v3",
		"internal/clocktest: std:sync",
		"internal/testlog: std:sync",
		"internal/eventq: std:time",
		"internal/bodyrate: std:time",
		"internal/redact: std:net/url std:strings",
		"internal/clip: std:unicode/utf8",
		"internal/envflag: std:flag std:os std:time",
		"internal/backoff: std:context std:time",
		"internal/ratelimitenv: internal/envflag std:os",
		"internal/progress: std:os",
		"config/configtest: config std:testing",
		"httplimit/httplimittest: internal/clocktest std:testing std:net/http",
		"internal/promtest: std:testing github.com/prometheus/client_golang/prometheus",
		"internal/promreg: github.com/prometheus/client_golang/prometheus",
		"github.com/prometheus/client_golang/prometheus: std:expvar google.golang.org/protobuf/proto",
		"std:expvar: std:net/http",
		"internal/storetest: . internal/clocktest std:testing",
		"internal/redistest: internal/testpki std:testing",
		"internal/testpki: std:testing",
		"internal/pgtest: std:testing github.com/jackc/pgx/v5",
		"internal/goldentest: std:testing",
		"internal/archtest:",
		"internal/tracing: go.opentelemetry.io/otel google.golang.org/grpc std:net/http std:database/sql/driver",
		"internal/tracing/otlptest: go.opentelemetry.io/proto/otlp google.golang.org/grpc std:net/http",
		"internal/statsd: std:net std:regexp",
		"internal/rlqstest: github.com/envoyproxy/go-control-plane google.golang.org/grpc",
		"internal/daemontest: google.golang.org/grpc std:testing",
		"rlqs: config internal/promreg github.com/envoyproxy/go-control-plane google.golang.org/grpc",
		"internal/xdstest: github.com/envoyproxy/go-control-plane google.golang.org/grpc std:net/http std:testing",
		"xdsconfig: config internal/promreg github.com/envoyproxy/go-control-plane google.golang.org/grpc",
		"httplimit: . clientip request rlheader queue internal/promreg internal/keyhash internal/loggate std:net/http",
		"gateway: . httplimit config std:net/http/httputil",
		"std:net/http/httputil: std:net/http",
		"service: . config failsafe rlheader google.golang.org/grpc github.com/lyft/gostats",
		"client: . algorithm rlheader std:net/http google.golang.org/grpc",
		"adaptive: .",
		"grpclimit: . adaptive google.golang.org/grpc",
		"sim: . algorithm internal/eventq gonum.org/v1/plot",
		"internal/daemon: config gateway admin admin/page internal/safefile internal/envflag std:net/http google.golang.org/grpc github.com/prometheus github.com/fsnotify",
		"cmd/sluice: . memstore redisstore gateway service internal/daemon",
		"examples/client: client gateway memstore",
	}
}

// replace returns lines with the line for from swapped for line.
func replace(lines []string, line string) []string {
	from, _ := splitLine(line)
	out := slices.Clone(lines)
	for i, l := range out {
		if f, _ := splitLine(l); f == from {
			out[i] = line
			return out
		}
	}
	return append(out, line)
}

// TestLayerRulesCanFail feeds check synthetic graphs, each breaking one rule,
// and wants the message that names the offending import and the rule.
func TestLayerRulesCanFail(t *testing.T) {
	if msgs := check(synthetic(cleanGraph()...)); len(msgs) != 0 {
		t.Fatalf("the clean graph breaks rules:\n%s", strings.Join(msgs, "\n"))
	}
	for _, tc := range []struct {
		name  string
		lines []string
		want  []string      // each is a substring of one of the messages
		n     int           // how many messages; 0 means 1
		debt  []allowedEdge // known exceptions added to allowedEdges for the case
	}{
		{
			name:  "core imports net/http",
			lines: replace(cleanGraph(), "memstore: . algorithm std:net/http"),
			want:  []string{"memstore depends on net/http (HTTP)", "a store may not reach", "memstore → net/http"},
		},
		{
			name:  "core reaches net/http through the standard library",
			lines: append(replace(cleanGraph(), "algorithm: . std:net/rpc"), "std:net/rpc: std:net/http"),
			want:  []string{"algorithm depends on net/http (HTTP)", "algorithm → net/rpc → net/http"},
		},
		{
			name:  "vocabulary imports Prometheus",
			lines: replace(cleanGraph(), ".: github.com/prometheus/client_golang/prometheus"),
			want: []string{
				". depends on github.com/prometheus/client_golang/prometheus (Prometheus), which the vocabulary may not reach",
				". depends on net/http (HTTP), which the vocabulary may not reach: . → github.com/prometheus/client_golang/prometheus → expvar → net/http",
				". depends on google.golang.org/protobuf/proto (gRPC/protobuf)",
			},
			n: 3,
		},
		{
			name:  "rlheader imports gRPC",
			lines: replace(cleanGraph(), "rlheader: google.golang.org/grpc/status"),
			want:  []string{"rlheader depends on google.golang.org/grpc/status (gRPC/protobuf)", "a shared edge helper"},
		},
		{
			name:  "the adaptive limiter imports gRPC",
			lines: replace(cleanGraph(), "adaptive: . google.golang.org/grpc"),
			want:  []string{"adaptive depends on google.golang.org/grpc (gRPC/protobuf)", "a wrapper may not reach"},
		},
		{
			name:  "the gRPC face imports another face",
			lines: replace(cleanGraph(), "grpclimit: . adaptive client google.golang.org/grpc"),
			want:  []string{"grpclimit imports client", "a face"},
		},
		{
			name:  "a face imports a Redis client",
			lines: replace(cleanGraph(), "httplimit: . rlheader github.com/redis/rueidis"),
			want:  []string{"httplimit depends on github.com/redis/rueidis (a Redis client)", "a face may not reach"},
		},
		{
			name:  "a face traces",
			lines: replace(cleanGraph(), "httplimit: . rlheader go.opentelemetry.io/otel"),
			want:  []string{"httplimit depends on go.opentelemetry.io/otel (OpenTelemetry)", "a face may not reach"},
		},
		{
			name:  "a store sends statsd",
			lines: replace(cleanGraph(), "memstore: . algorithm github.com/lyft/gostats"),
			want:  []string{"memstore depends on github.com/lyft/gostats (a statsd client)", "a store may not reach"},
		},
		{
			name:  "a wrapper imports a store",
			lines: replace(cleanGraph(), "failsafe: . memstore"),
			want:  []string{"failsafe imports memstore", "failsafe (a wrapper) may not import memstore (a store)"},
		},
		{
			name:  "a face imports another face",
			lines: replace(cleanGraph(), "httplimit: . rlheader gateway"),
			want:  []string{"httplimit imports gateway", "httplimit (a face) may not import gateway (a face)"},
		},
		{
			name:  "a face imports a store",
			lines: replace(cleanGraph(), "gateway: . httplimit memstore"),
			want:  []string{"gateway imports memstore", "gateway (a face) may not import memstore (a store)"},
		},
		{
			name:  "the vocabulary imports the module",
			lines: replace(cleanGraph(), ".: algorithm"),
			want:  []string{". imports algorithm", "it may import nothing of the module"},
		},
		{
			name:  "config reaches a store",
			lines: replace(cleanGraph(), "config: . clientip redisstore"),
			want: []string{
				"config imports redisstore: config (a shared edge helper) may not import redisstore (a store)",
				"config depends on github.com/redis/rueidis (a Redis client), which a shared edge helper may not reach: config → redisstore → github.com/redis/rueidis",
			},
			n: 2,
		},
		{
			name:  "wiring links package testing",
			lines: replace(cleanGraph(), "cmd/sluice: . memstore internal/storetest"),
			want:  []string{"cmd/sluice depends on testing (package testing)", "cmd/sluice → internal/storetest → testing", "cmd/sluice imports internal/storetest, which only tests may import"},
			n:     2,
		},
		{
			name:  "a shipped package imports a test-only one",
			lines: replace(cleanGraph(), "internal/eventq: std:time internal/clocktest"),
			want:  []string{"internal/eventq imports internal/clocktest, which only tests may import"},
		},
		{
			name:  "an unknown package",
			lines: append(cleanGraph(), "dashboard: ."),
			want:  []string{"package dashboard is not in the layer table"},
		},
		{
			name:  "a known exception is fixed",
			debt:  []allowedEdge{{from: "client", to: "memstore", debt: true, why: "pacer.go: a store inside a face"}},
			lines: cleanGraph(),
			want:  []string{"the known exception client → memstore (pacer.go", "is gone: delete its row"},
		},
		{
			name: "a package of the table is gone",
			lines: slices.DeleteFunc(cleanGraph(), func(l string) bool {
				return strings.HasPrefix(l, "relief:")
			}),
			want: []string{"packages has a row for relief (a wrapper), which is not in the module"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.debt != nil {
				saved := allowedEdges
				allowedEdges = append(slices.Clip(saved), tc.debt...)
				t.Cleanup(func() { allowedEdges = saved })
			}
			msgs := check(synthetic(tc.lines...))
			if n := max(tc.n, 1); len(msgs) != n {
				t.Fatalf("check reported %d messages, want %d:\n%s", len(msgs), n, strings.Join(msgs, "\n"))
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, w) }) {
					t.Errorf("no message contains %q; got:\n%s", w, strings.Join(msgs, "\n"))
				}
			}
		})
	}
}

// TestPackagesSayWhetherTheyShip checks that the doc comment of every
// package under internal/, and of every test-only package, says whether it
// ships: "Test-only:" for a package the table marks testOnly, "Shipped:"
// for the others, so that a reader of internal/ tells them apart without
// the table.
func TestPackagesSayWhetherTheyShip(t *testing.T) {
	g := loadGraph(t)
	for _, r := range g.local {
		pr, ok := ruleFor(r)
		if !ok || !(pr.testOnly || strings.HasPrefix(r, "internal/")) {
			continue
		}
		doc := packageDoc(t, r)
		want, not := "Shipped:", "Test-only:"
		if pr.testOnly {
			want, not = not, want
		}
		if !strings.Contains(doc, want) || strings.Contains(doc, not) {
			t.Errorf("package %s: its doc comment should say %q (and not %q): %s", r, want, not, map[bool]string{true: "the table marks it test-only", false: "the table says it ships"}[pr.testOnly])
		}
	}
}

// packageDoc returns the doc comments of package r's files (its test files
// too, for a package of tests alone), joined.
func packageDoc(t *testing.T, r string) string {
	t.Helper()
	dir := filepath.Join("..", "..", filepath.FromSlash(r))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			b.WriteString(f.Doc.Text())
		}
	}
	return b.String()
}
