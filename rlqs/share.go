package rlqs

import (
	"math"
	"slices"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/config"
)

// share returns client's part of total (requests per second) given every
// client's demand, client's own being mine whatever demand says:
// reserve×total is divided equally among the clients, the rest by max-min
// fairness over demand (a client gets its demand or an equal part of what
// is left, whichever is less), and what demand leaves over is divided
// equally again. With byPeer, the rest is first divided so among the
// peers (see peerOf; a client without one is a peer of its own), over
// each peer's demand summed, then each peer's part among its clients: so
// the clients of one peer, whatever they report, leave every other peer
// at least (1−reserve)×total/peers when it asks for that much. The parts
// of all clients add up to total. It also returns the number of clients.
func share(total, reserve float64, demand map[string]float64, client string, mine float64, byPeer bool) (float64, int) {
	mine = max(mine, 0)
	if !byPeer {
		ds := make([]float64, 0, len(demand)+1)
		for c, d := range demand {
			if c != client {
				ds = append(ds, max(d, 0))
			}
		}
		ds = append(ds, mine)
		n := len(ds)
		return total*reserve/float64(n) + maxMin(total*(1-reserve), ds, mine), n
	}
	myPeer := peerKeyOf(client)
	sums := make(map[peerKey]float64, len(demand)+1)
	var peerDs []float64
	n := 1
	for c, d := range demand {
		if c == client {
			continue
		}
		n++
		p := peerKeyOf(c)
		sums[p] += max(d, 0)
		if p == myPeer {
			peerDs = append(peerDs, max(d, 0))
		}
	}
	sums[myPeer] += mine
	peerDs = append(peerDs, mine)
	ps := make([]float64, 0, len(sums))
	for _, d := range sums {
		ps = append(ps, d)
	}
	part := maxMin(total*(1-reserve), ps, sums[myPeer])
	return total*reserve/float64(n) + maxMin(part, peerDs, mine), n
}

// peerKey is the peer a client's share is first divided by: its peer
// (see peerOf), or for a client without one, the client itself (own).
type peerKey struct {
	name string
	own  bool
}

// peerKeyOf returns client's peerKey. It does not allocate: name is a
// part of client.
func peerKeyOf(client string) peerKey {
	if p, ok := peerOf(client); ok {
		return peerKey{name: p}
	}
	return peerKey{name: client, own: true}
}

// maxMin divides pool among demands ds (sorted in place), one of which is
// mine, by max-min fairness: each gets its demand or an equal part of
// what is left, whichever is less, and what is left over is divided
// equally. It returns mine's part.
func maxMin(pool float64, ds []float64, mine float64) float64 {
	slices.Sort(ds)
	left := pool
	mineGets := -1.0
	for i, d := range ds {
		give := min(d, left/float64(len(ds)-i))
		left -= give
		if mineGets < 0 && d >= mine {
			mineGets = give
		}
	}
	return mineGets + left/float64(len(ds))
}

// demandBound is how many times its rule's rate a client's reported
// demand counts at most: a report of more (a client cannot spend more than
// its share, and the denied requests of an honest one rarely reach ten
// times the whole limit) counts as that much.
const demandBound = 10

// ruleRate returns a rule's rate in requests per second and its burst: of
// a rate_limits list, the limit with the lowest rate. Windows become a
// token bucket holding one window's requests (see docs/rlqs.md).
func ruleRate(r *config.RateLimit) (rate, burst float64) {
	rate = math.Inf(1)
	for _, l := range r.Limits() {
		p := l.Period().Seconds()
		if p <= 0 {
			continue
		}
		if lr := float64(l.RequestsPerUnit) / p; lr < rate {
			rate = lr
			burst = float64(l.RequestsPerUnit)
			if l.Limit.Burst > 0 {
				burst = float64(l.Limit.Burst)
			}
		}
	}
	if math.IsInf(rate, 1) {
		return 0, 0
	}
	return rate, burst
}

// precision is the fewest tokens a fill adds, so that rounding a rate down
// to whole tokens per whole seconds loses at most 1/precision of it.
const precision = 100

// tokenBucket returns the strategy for a share of rate (requests per
// second) with burst tokens: a TokenBucket whose fill interval is whole
// seconds (Envoy divides by the interval's seconds), rounded down so that
// the shares of all clients never add up to more than the rule's rate; a
// share that rounds to no token at all is DENY_ALL.
func tokenBucket(rate, burst float64) *typev3.RateLimitStrategy {
	if rate <= 0 {
		return blanket(typev3.RateLimitStrategy_DENY_ALL)
	}
	secs := min(math.Ceil(precision/rate), 86400)
	tokens := math.Floor(min(rate*secs, math.MaxUint32))
	if tokens < 1 {
		return blanket(typev3.RateLimitStrategy_DENY_ALL)
	}
	maxTokens := math.Floor(min(max(burst, 1), math.MaxUint32))
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens:     uint32(maxTokens),
		TokensPerFill: wrapperspb.UInt32(uint32(tokens)),
		FillInterval:  durationpb.New(time.Duration(secs) * time.Second),
	}}}
}

// blanket returns a blanket rule strategy.
func blanket(b typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: b}}
}

// closeRates reports whether two rates differ by less than 5%, so
// that the server keeps sending the same strategy (an Envoy then only
// extends its time to live, and keeps its bucket's tokens).
func closeRates(a, b float64) bool {
	return math.Abs(a-b) <= 0.05*max(a, b)
}
