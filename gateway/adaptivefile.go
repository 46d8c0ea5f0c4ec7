package gateway

import (
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/adaptive"
)

// adaptiveKeys are the keys of an adaptive block, beside
// max_in_flight: adaptive.
var adaptiveKeys = []string{"algorithm", "initial", "min", "max", "window", "min_samples", "latency_objective", "probe_interval", "priority_header"}

// maxInFlight reads a block's max_in_flight (a number, or "adaptive" with
// the block's adaptive settings) into fixed or *adaptive; an adaptive
// block without max_in_flight: adaptive is refused, not ignored.
func (p *fileParser) maxInFlight(m map[string]*yaml.Node, fixed *int, a **Adaptive) error {
	n, block := m["max_in_flight"], m["adaptive"]
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		if block != nil {
			return p.errf(block, "adaptive settings need max_in_flight: adaptive")
		}
		return p.optInt(m, "max_in_flight", 0, 1<<30, fixed)
	}
	if n.Value != "adaptive" {
		return p.errf(n, "max_in_flight %q: want a whole number or adaptive", n.Value)
	}
	ad, err := p.adaptive(block)
	if err != nil {
		return err
	}
	*a = ad
	return nil
}

// adaptive reads an adaptive block (n, nil when absent: the defaults).
func (p *fileParser) adaptive(n *yaml.Node) (*Adaptive, error) {
	a := &Adaptive{Limiter: adaptive.Config{Algorithm: adaptive.Gradient{}}}
	if n == nil {
		return a, nil
	}
	m, err := p.fields(n, "adaptive", adaptiveKeys)
	if err != nil {
		return nil, err
	}
	c := &a.Limiter
	var objective, probe time.Duration
	if err := p.optAll(
		p.optInt(m, "initial", 1, 1<<20, &c.Initial),
		p.optInt(m, "min", 1, 1<<20, &c.Min),
		p.optInt(m, "max", 1, 1<<20, &c.Max),
		p.optInt(m, "min_samples", 1, 1<<20, &c.MinSamples),
		p.optDuration(m, "window", true, &c.Window),
		p.optDuration(m, "latency_objective", true, &objective),
		p.optDuration(m, "probe_interval", true, &probe),
		p.optStr(m, "priority_header", &a.PriorityHeader),
	); err != nil {
		return nil, err
	}
	if h := m["priority_header"]; h != nil {
		if err := namedHeader(a.PriorityHeader); err != nil {
			return nil, p.errf(h, "priority_header: %v", err)
		}
	}
	if c.Min > 0 && c.Max > 0 && c.Min > c.Max {
		return nil, p.errf(m["min"], "adaptive min %d is above max %d", c.Min, c.Max)
	}
	algo := "gradient"
	if err := p.optStr(m, "algorithm", &algo); err != nil {
		return nil, err
	}
	switch algo {
	case "gradient":
		c.Algorithm = adaptive.Gradient{ProbeInterval: probe}
	case "gradient2":
		c.Algorithm = adaptive.Gradient2{}
	case "aimd":
		c.Algorithm = adaptive.AIMD{Timeout: objective}
	default:
		return nil, p.errf(m["algorithm"], "adaptive algorithm %q: want gradient, gradient2 or aimd", algo)
	}
	if v := m["latency_objective"]; v != nil && algo != "aimd" {
		return nil, p.errf(v, "latency_objective is aimd's; the %s algorithm has none", algo)
	}
	if v := m["probe_interval"]; v != nil && algo != "gradient" {
		return nil, p.errf(v, "probe_interval is gradient's; the %s algorithm has none", algo)
	}
	return a, nil
}

// optAll returns the first error of errs.
func (p *fileParser) optAll(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// routePriority reads a route's priority (n, nil when absent); a priority
// other than default needs an adaptive limit on the route's upstream or
// the gateway, as it acts on nothing else.
func (p *fileParser) routePriority(n *yaml.Node, upstream string) (adaptive.Priority, error) {
	if n == nil {
		return adaptive.Default, nil
	}
	s, err := p.str(n, "priority")
	if err != nil {
		return adaptive.Default, err
	}
	pr, err := adaptive.ParsePriority(s)
	if err != nil || s == "" {
		return adaptive.Default, p.errf(n, "priority %q: want sheddable, default or critical", s)
	}
	c := &p.f.Config
	if pr == adaptive.Default || c.Adaptive != nil {
		return pr, nil
	}
	for i, u := range c.Upstreams {
		if (u.Name == upstream || (upstream == "" && i == 0)) && u.Adaptive != nil {
			return pr, nil
		}
	}
	return adaptive.Default, p.errf(n, "priority %s: neither the route's upstream nor the proxy has max_in_flight: adaptive, so it would act on nothing", s)
}
