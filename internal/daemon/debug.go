package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/envflag"
)

// debugWriteTimeout is the debug listener's write timeout: longer than
// the default 30-second CPU profile, which net/http/pprof refuses to take
// when it would outlast the write timeout; so a profile or trace may ask
// for up to two minutes.
const debugWriteTimeout = 2 * time.Minute

// debugMaxConns caps the debug listener's connections: it is for people
// and their tools, not for traffic.
const debugMaxConns = 64

// debugAddrFromEnv returns the debug listener's address from
// envoyproxy/ratelimit's DEBUG_HOST and DEBUG_PORT: "" (no debug listener)
// when neither is set, else DEBUG_HOST (default 127.0.0.1) and DEBUG_PORT
// (default 6070). Unlike envoyproxy/ratelimit, which serves pprof on
// 0.0.0.0:6070 whatever the settings, Sluice opens it only when asked,
// and on loopback unless DEBUG_HOST says otherwise: profiles and the
// rules are for the operator, not for the network.
func debugAddrFromEnv() string {
	host, port := os.Getenv("DEBUG_HOST"), os.Getenv("DEBUG_PORT")
	if host == "" && port == "" {
		return ""
	}
	return net.JoinHostPort(envflag.String("DEBUG_HOST", "127.0.0.1"), envflag.String("DEBUG_PORT", "6070"))
}

// debugEndpoints are the debug listener's paths and what they serve, as
// its index lists them.
var debugEndpoints = []struct{ path, help string }{
	{"/rlconfig", "the running rate limit rules, one line per rule"},
	{"/debug/pprof/", "pprof's profiles: heap, goroutine, allocs, block, mutex, threadcreate"},
	{"/debug/pprof/profile", "a CPU profile (?seconds=N, default 30, at most 119)"},
	{"/debug/pprof/trace", "an execution trace (?seconds=N, default 1, at most 119)"},
	{"/debug/pprof/symbol", "pprof's symbol lookup"},
}

// DebugHandler returns the debug listener's handler: an index at /, the
// running rules at /rlconfig (rules returns them, nil when none is
// loaded) and net/http/pprof's handlers, but not its cmdline, which would
// show -store's Redis password to anyone who reaches the port. It is its
// own mux: nothing of it is on the main listener.
func DebugHandler(rules func() *config.Config) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, e := range debugEndpoints {
			fmt.Fprintf(w, "%s: %s\n", e.path, e.help)
		}
	})
	mux.HandleFunc("GET /rlconfig", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		writeRLConfig(w, rules())
	})
	// pprof.Index serves runtime/pprof's profiles by name; cmdline is
	// not one of them, and pprof.Cmdline is not registered.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	return mux
}

// writeRLConfig writes c's rules (none when c is nil), one line each, in
// envoyproxy/ratelimit's /rlconfig form
//
//	<full key>: unit=<UNIT> requests_per_unit=<n>, shadow_mode: <bool>, quota_mode: <bool>
//
// (an unlimited rule has unit UNKNOWN and 0, as there), then Sluice's
// reading of the rule: ", sluice: " and its sluice.Limit, "unlimited" or
// "blocked". Domains come in name order, rules in config order.
func writeRLConfig(w io.Writer, c *config.Config) {
	if c == nil {
		return
	}
	var b strings.Builder
	for r := range c.RateLimits() {
		unit, n := r.Unit, r.RequestsPerUnit
		if r.Unlimited {
			unit, n = config.UnitUnknown, 0
		}
		b.WriteString(r.FullKey + ": unit=" + strings.ToUpper(unit.String()) +
			" requests_per_unit=" + strconv.FormatUint(uint64(n), 10) +
			", shadow_mode: " + strconv.FormatBool(r.ShadowMode) +
			", quota_mode: " + strconv.FormatBool(r.QuotaMode) + ", sluice: ")
		switch {
		case r.Unlimited:
			b.WriteString("unlimited")
		case r.BlocksAll():
			b.WriteString("blocked")
		default:
			b.WriteString(r.Limit.String())
		}
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

// DebugServer is the debug listener: its server and socket, served by
// Serve and stopped by Shutdown. The zero value is not usable: ListenDebug
// makes one.
type DebugServer struct {
	srv  *http.Server
	ln   net.Listener       // capped at debugMaxConns
	stop context.CancelFunc // ends the requests in flight (a profile)
}

// ListenDebug listens on addr for h, with o's HTTP header, read and idle
// timeouts and debugWriteTimeout, at most debugMaxConns connections. An
// empty addr is no debug listener (nil). An address that cannot be
// listened on is an error: the operator asked for it.
func ListenDebug(addr string, o *ListenerOptions, h http.Handler, log *slog.Logger) (*DebugServer, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug listener: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	srv := o.HTTPServer(h, log) // the HTTP listener's bounds, then:
	srv.WriteTimeout = max(o.write, debugWriteTimeout)
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	capped, connState := CapConns(ln, debugMaxConns)
	srv.ConnState = connState
	return &DebugServer{srv: srv, ln: capped, stop: stop}, nil
}

// Addr returns the address d listens on.
func (d *DebugServer) Addr() net.Addr { return d.ln.Addr() }

// Close closes d's listener (Shutdown closes it too).
func (d *DebugServer) Close() error { return d.ln.Close() }

// Serve serves until shutdown (then http.ErrServerClosed) or a failure.
func (d *DebugServer) Serve() error { return d.srv.Serve(d.ln) }

// Shutdown stops d: the requests in flight are ended (a profile or trace
// returns what it has), then the server drains until ctx ends and is
// closed.
func (d *DebugServer) Shutdown(ctx context.Context) {
	d.stop()
	if err := d.srv.Shutdown(ctx); err != nil {
		d.srv.Close()
	}
}

// DescribeDebug returns what serve's banner says of the debug listener d
// (nil: none): where it is, or that it is off and how to turn it on (it
// is off by default, unlike envoyproxy/ratelimit's, see debugAddrFromEnv).
func DescribeDebug(d *DebugServer) string {
	if d == nil {
		return "off (DEBUG_PORT, DEBUG_HOST or -debug-addr serve /rlconfig and pprof; loopback unless DEBUG_HOST says otherwise)"
	}
	where := "loopback only"
	if tcp, ok := d.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		where = "not loopback: pprof and the rules are open to whoever reaches it"
	}
	return "http://" + d.Addr().String() + "  (/rlconfig, /debug/pprof/; " + where + ")"
}
