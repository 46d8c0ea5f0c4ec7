package page

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
)

// Snapshot is the page's data at one moment, as GET /page/data.json and
// each event of the stream carry it.
type Snapshot struct {
	Time     time.Time   `json:"time"`
	RawKeys  bool        `json:"raw_keys"`
	Rules    []RuleRate  `json:"rules"`
	Top      []TopKey    `json:"top"`
	TopSpan  string      `json:"top_span"`
	Refusals []Refusal   `json:"refusals"`
	Config   *ConfigView `json:"config,omitempty"`
	Store    *StoreState `json:"store,omitempty"`
}

// RuleRate is one rule's decisions: totals since start and per second
// over the last interval.
type RuleRate struct {
	Rule          string  `json:"rule"`
	Allowed       uint64  `json:"allowed"`
	Limited       uint64  `json:"limited"`
	Shadow        uint64  `json:"shadow"`
	AllowedPerSec float64 `json:"allowed_per_sec"`
	LimitedPerSec float64 `json:"limited_per_sec"`
	ShadowPerSec  float64 `json:"shadow_per_sec"`
}

// TopKey is a key among the most limited, with its rule and estimated
// count of refusals over the top list's span (over by at most Error).
// Unless the page shows raw keys, a key is listed from its second refusal
// (the first then added, if from the same minute or the one before), so
// that Count may also be under the true count: by one for each refusal
// not followed by another within a minute or two, and rarely by more
// (see docs/page.md).
type TopKey struct {
	Rule  string `json:"rule"`
	Key   string `json:"key"`
	Count uint64 `json:"count"`
	Error uint64 `json:"error"`
}

// Refusal is one of the latest refusals (limited or shadow).
type Refusal struct {
	Time    time.Time `json:"time"`
	Domain  string    `json:"domain"`
	Rule    string    `json:"rule"`
	Outcome string    `json:"outcome"`
	// Key is the key as the top list shows it; empty for a key's first
	// refusal (none in the minute before) unless the page shows raw keys:
	// its keyed hash is made only at its second (a flood of keys refused
	// once each pays no HMAC).
	Key  string `json:"key"`
	Cost uint64 `json:"cost"`
}

// ConfigView is the running config as the page shows it: its domains and
// their rules.
type ConfigView struct {
	Source    string       `json:"source"`
	Loaded    time.Time    `json:"loaded"`
	Domains   []DomainView `json:"domains"`
	Truncated int          `json:"truncated,omitempty"` // rules not listed past maxConfigRules
}

// DomainView is one domain of the config.
type DomainView struct {
	Name  string     `json:"name"`
	File  string     `json:"file,omitempty"`
	Rules []RuleView `json:"rules"`
}

// RuleView is one rule of the config.
type RuleView struct {
	Key    string `json:"key"`
	Limit  string `json:"limit"`
	Shadow bool   `json:"shadow,omitempty"`
}

// maxConfigRules bounds the rules the page lists.
const maxConfigRules = 1000

// topShown is how many top keys the page lists.
const topShown = 20

// Snapshot returns the page's data now.
func (p *Page) Snapshot() Snapshot {
	now := p.cfg.Now()
	s := Snapshot{Time: now, RawKeys: p.cfg.RawKeys, Rules: p.rates(now)}
	for _, it := range p.top.Top(topShown) {
		rule, key, _ := strings.Cut(it.Key, "\x00")
		s.Top = append(s.Top, TopKey{Rule: rule, Key: key, Count: it.Count, Error: it.Error})
	}
	s.TopSpan = p.top.Span().String()
	s.Refusals = p.refusals()
	if p.cfg.Config != nil {
		s.Config = viewConfig(p.cfg.Config())
	}
	if p.cfg.Store != nil {
		st := p.cfg.Store()
		s.Store = &st
	}
	return s
}

// refusals returns the ring's refusals, newest first.
func (p *Page) refusals() []Refusal {
	p.ringMu.Lock()
	defer p.ringMu.Unlock()
	n := p.next
	if p.filled {
		n = len(p.ring)
	}
	out := make([]Refusal, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, p.ring[(p.next-i+len(p.ring))%len(p.ring)])
	}
	return out
}

// rates returns each rule's totals and its rates over the time since the
// previous sample, at least a second old (else that sample's rates).
func (p *Page) rates(now time.Time) []RuleRate {
	tot := map[string][3]uint64{}
	p.rules.Range(func(k, v any) bool {
		c := v.(*ruleCounts)
		tot[k.(string)] = [3]uint64{c.n[0].Load(), c.n[1].Load(), c.n[2].Load()}
		return true
	})
	p.rateMu.Lock()
	if dt := now.Sub(p.lastAt).Seconds(); p.lastTot == nil || dt >= 1 {
		rate := map[string][3]float64{}
		if p.lastTot != nil {
			for k, t := range tot {
				old := p.lastTot[k]
				rate[k] = [3]float64{float64(t[0]-old[0]) / dt, float64(t[1]-old[1]) / dt, float64(t[2]-old[2]) / dt}
			}
		}
		p.lastAt, p.lastTot, p.lastRate = now, tot, rate
	}
	rate := p.lastRate
	p.rateMu.Unlock()
	out := make([]RuleRate, 0, len(tot))
	for k, t := range tot {
		r := rate[k]
		out = append(out, RuleRate{Rule: k, Allowed: t[0], Limited: t[1], Shadow: t[2],
			AllowedPerSec: r[0], LimitedPerSec: r[1], ShadowPerSec: r[2]})
	}
	slices.SortFunc(out, func(a, b RuleRate) int { return cmp.Compare(a.Rule, b.Rule) })
	return out
}

// viewConfig lists lc's domains and rules, a bounded number.
func viewConfig(lc LoadedConfig) *ConfigView {
	v := &ConfigView{Source: lc.Source, Loaded: lc.Loaded}
	c := lc.Rules
	if c == nil {
		return v
	}
	at := map[string]int{}
	for _, d := range c.Domains() {
		at[d.Name] = len(v.Domains)
		v.Domains = append(v.Domains, DomainView{Name: d.Name, File: d.File})
	}
	n := 0
	for r := range c.RateLimits() {
		i, ok := domainOf(at, r.FullKey)
		if !ok {
			continue
		}
		if n >= maxConfigRules {
			v.Truncated++
			continue
		}
		n++
		v.Domains[i].Rules = append(v.Domains[i].Rules, RuleView{Key: r.FullKey, Limit: limitText(r), Shadow: r.ShadowMode})
	}
	return v
}

// domainOf finds the domain of a rule's full key: the longest domain name
// that prefixes it before a ".".
func domainOf(at map[string]int, fullKey string) (int, bool) {
	for i := len(fullKey) - 1; i > 0; i-- {
		if fullKey[i] == '.' {
			if d, ok := at[fullKey[:i]]; ok {
				return d, true
			}
		}
	}
	return 0, false
}

// limitText describes a rule's limit.
func limitText(r *config.RateLimit) string {
	switch {
	case r.Unlimited:
		return "unlimited"
	case r.BlocksAll():
		return "blocked"
	}
	return strconv.FormatUint(uint64(r.RequestsPerUnit), 10) + " per " + r.Unit.String() + " (" + r.Limit.String() + ")"
}
