// Package page is the admin listener's live page: what the rate limit
// service decides right now, for an operator. It shows decisions per
// second per rule (allowed, limited, shadow), the keys limited most over
// the last minutes (a space-saving sketch of bounded memory,
// internal/topk), the latest refusals (a bounded ring), the loaded config
// with its source and load time, the store's health and circuit breaker,
// and a form that reads a descriptor's state without spending (a
// check-only request: hits_addend 0).
//
// The page is server-rendered HTML (html/template, embedded with embed)
// that works without JavaScript; a small hand-written script updates it
// from a server-sent event stream and sends the form without a reload.
// The same data is served as JSON for scripts. Keys are shown as a keyed
// hash (internal/keyhash: HMAC-SHA-256 under Config.KeySecret, or a
// random secret of the process) unless Config.RawKeys allows them.
//
// A Page is a service.Observer: give it to service.Config.Observer, and
// mount its routes behind the admin API's authentication with Mount.
package page

import (
	"cmp"
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/keyhash"
	"github.com/sluicehq/sluice/internal/topk"
	"github.com/sluicehq/sluice/service"
)

// Decider answers a rate limit request; *service.Service is one. The page
// sends it check-only requests (every descriptor's hits_addend 0), which
// spend nothing.
type Decider interface {
	ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error)
}

// LoadedConfig is the config that runs: its rules, where they came from
// and when they were loaded.
type LoadedConfig struct {
	Rules  *config.Config // nil: none loaded
	Source string
	Loaded time.Time
}

// StoreState is the store's health as the page shows it.
type StoreState struct {
	// Name names the store (its kind and address, never a password).
	Name string `json:"name"`
	// Connected is whether the store has answered at least once.
	Connected bool `json:"connected"`
	// Breaker is the circuit breaker's state: "closed" (the store is
	// asked), "open" (the failure mode answers), "partial" (the failure
	// mode answers the keys of OpenPartitions of its partitions, such as
	// a hot key's whose calls time out; the other keys are asked of the
	// store) or "none" (no breaker).
	Breaker string `json:"breaker"`
	// OpenPartitions is how many partitions of the breaker are open
	// while it is "partial"; 0 otherwise.
	OpenPartitions int `json:"open_partitions,omitempty"`
	// FailureMode is what answers while the breaker is open.
	FailureMode string `json:"failure_mode,omitempty"`
}

// Config configures a Page. Its zero value is a page of decisions only:
// no config, store or form.
type Config struct {
	// Decider answers the form's check-only requests. Nil: the form
	// answers 501. It may be set later with SetDecider.
	Decider Decider
	// Config returns the running config. Nil: none shown.
	Config func() LoadedConfig
	// Store returns the store's state. Nil: none shown.
	Store func() StoreState
	// RawKeys shows keys as they are; false shows them as a keyed hash
	// ("~" and the first 128 bits of HMAC-SHA-256 under KeySecret, in
	// hex), so that the page holds and shows no descriptor value, nor a
	// hash that could be reversed by hashing every likely value (every
	// IPv4 address, say) as a plain hash could.
	RawKeys bool
	// KeySecret is the secret of the keys' hash: pages (and the proxy's
	// logs) given the same secret show the same hash of a key. Empty: a
	// random secret drawn once per process, so that hashes differ from
	// one process to the next.
	KeySecret []byte
	// TopK is the number of counters of the heavy-hitters sketch of each
	// minute; 0 means DefaultTopK.
	TopK int
	// Minutes is how many minutes the top list covers; 0 means
	// DefaultMinutes.
	Minutes int
	// Refusals is how many latest refusals are kept; 0 means
	// DefaultRefusals.
	Refusals int
	// Interval is how often the event stream sends the page's data; 0
	// means DefaultInterval.
	Interval time.Duration
	// MaxStreams bounds the event streams open at once; one more is
	// answered 503. 0 means DefaultMaxStreams.
	MaxStreams int
	// Now tells the time. Nil: time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultTopK       = 64
	DefaultMinutes    = 5
	DefaultRefusals   = 50
	DefaultInterval   = time.Second
	DefaultMaxStreams = 16
	// MaxRules is the most rules counted apart; decisions of more rules
	// (after reloads that rename them) are counted under OtherRule.
	MaxRules = 256
)

// OtherRule is the row of the rules past MaxRules.
const OtherRule = "(other rules)"

// Page is the live page. It is safe for concurrent use; make one with
// New. Observe is its hot path: a map read and an atomic add per allowed
// decision; a refusal also updates the ring under a short lock and, from
// a key's second refusal within a minute or two (doorkeeper), the sketch,
// hashing the key unless it was listed lately (shownCache). A key's first
// refusal makes no hash and allocates nothing.
type Page struct {
	cfg  Config
	keys *keyhash.Hasher // under cfg.KeySecret
	// hash appends the keyed hash of a key to dst: keys.Append, the
	// HMAC; tests replace it to count its calls.
	hash    func(dst []byte, key string) []byte
	shown   shownCache // the hashes of the keys listed lately
	door    doorkeeper // the keys refused once lately, and those let in
	decider atomic.Pointer[deciderBox]

	rules  sync.Map // rule → *ruleCounts
	nRules atomic.Int64

	top *topk.Window

	ringMu sync.Mutex
	ring   []Refusal
	next   int
	filled bool

	rateMu   sync.Mutex
	lastAt   time.Time
	lastTot  map[string][3]uint64
	lastRate map[string][3]float64

	streams   atomic.Int64
	done      chan struct{} // closed by Close: the streams end
	closeOnce sync.Once
}

type deciderBox struct{ d Decider }

// ruleCounts counts one rule's decisions: allowed, limited, shadow.
type ruleCounts struct{ n [3]atomic.Uint64 }

// New returns the page of cfg. It keeps a copy of cfg.KeySecret.
func New(cfg Config) *Page {
	cfg.TopK = cmp.Or(cfg.TopK, DefaultTopK)
	cfg.Minutes = cmp.Or(cfg.Minutes, DefaultMinutes)
	cfg.Refusals = cmp.Or(cfg.Refusals, DefaultRefusals)
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	cfg.MaxStreams = cmp.Or(cfg.MaxStreams, DefaultMaxStreams)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Page{cfg: cfg, keys: keyhash.New(cfg.KeySecret), ring: make([]Refusal, max(cfg.Refusals, 1)), done: make(chan struct{})}
	p.hash = p.keys.Append
	p.shown.seed = maphash.MakeSeed()
	p.top = topk.NewWindow(cfg.TopK, max(cfg.Minutes, 1), time.Minute, cfg.Now)
	if cfg.Decider != nil {
		p.SetDecider(cfg.Decider)
	}
	return p
}

// KeyHash returns the keyed hash the page shows of a store key (unless
// RawKeys): "~" and 32 hex digits, under Config.KeySecret.
func (p *Page) KeyHash(key string) string { return p.keys.Hash("", key) }

// Close ends the event streams open now and refuses new ones (503), so
// that a server's graceful shutdown is not held by them; give it to
// http.Server.RegisterOnShutdown. The rest of the page keeps working.
func (p *Page) Close() { p.closeOnce.Do(func() { close(p.done) }) }

// SetDecider sets the Decider the form asks (for a service built after
// the page).
func (p *Page) SetDecider(d Decider) { p.decider.Store(&deciderBox{d}) }

// Observe counts one decision; it is the page's service.Observer.
func (p *Page) Observe(d service.Decision) {
	c := p.counts(d.Rule)
	c.n[min(int(d.Outcome), 2)].Add(1)
	if d.Outcome == service.Allowed {
		return
	}
	now := p.cfg.Now()
	var top, key string
	if p.cfg.RawKeys {
		top, key = d.Rule+"\x00"+d.Key, d.Key
		p.top.Add(top, 1)
	} else {
		top = p.listed(d.Rule, d.Key, now)
		if top != "" {
			key = top[len(d.Rule)+1:]
		}
	}
	p.ringMu.Lock()
	p.ring[p.next] = Refusal{Time: now, Domain: d.Domain, Rule: d.Rule, Outcome: d.Outcome.String(), Key: key, Cost: d.Cost}
	p.next = (p.next + 1) % len(p.ring)
	p.filled = p.filled || p.next == 0
	p.ringMu.Unlock()
}

// listed counts a refusal of key under rule in the top list and returns
// its key there (the rule, a 0 byte and the key's keyed hash), or "" for
// the key's first refusal (none in the minute of now or the one before),
// which the doorkeeper remembers instead (no hash made, nothing counted
// yet).
func (p *Page) listed(rule, key string, now time.Time) string {
	sum := p.shown.sum(rule, key)
	top, ok := p.shown.lookup(sum, rule, key)
	w := uint64(1)
	minute := now.UnixNano() / int64(time.Minute)
	if ok {
		p.door.touch(sum, minute)
	} else {
		admit, remembered := p.door.admit(sum, minute)
		if !admit {
			return ""
		}
		top, w = p.shown.store(sum, rule, key, p.hash), w+remembered
	}
	p.top.Add(top, w)
	return top
}

// counts returns rule's counters, made on first use while fewer than
// MaxRules exist.
func (p *Page) counts(rule string) *ruleCounts {
	if c, ok := p.rules.Load(rule); ok {
		return c.(*ruleCounts)
	}
	if p.nRules.Load() >= MaxRules {
		rule = OtherRule
	}
	c, loaded := p.rules.LoadOrStore(rule, &ruleCounts{})
	if !loaded && rule != OtherRule {
		p.nRules.Add(1)
	}
	return c.(*ruleCounts)
}
