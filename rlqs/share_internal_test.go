package rlqs

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The shares of all clients add up to the limit, none is negative, a
// client that asks for less than an equal part gets at least what it asks
// (with the reserve beside it), and equal demands get equal shares.
func TestSharesAddUpToTheLimitAndServeSmallDemandsFirst(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		byPeer := i%2 == 1
		n := 1 + r.IntN(20)
		total := 1 + r.Float64()*1000
		reserve := r.Float64() * 0.5
		demand := make(map[string]float64, n)
		for i := range n {
			name := string(rune('a' + i))
			if byPeer && r.IntN(2) == 0 {
				name = withPeer(string(rune('a'+r.IntN(3))), name)
			}
			demand[name] = r.Float64() * total / float64(n) * 3
		}
		var sum float64
		for c, d := range demand {
			s, k := share(total, reserve, demand, c, d, byPeer)
			if s < 0 || k != n {
				t.Fatalf("share %v of %d clients, want ≥ 0 of %d", s, k, n)
			}
			if d <= total*(1-reserve)/float64(n) && s < d && !byPeer {
				t.Fatalf("a client asking %v below an equal part got %v", d, s)
			}
			sum += s
		}
		if math.Abs(sum-total) > 1e-6*total {
			t.Fatalf("shares add up to %v, want %v (%v)", sum, total, demand)
		}
	}
	eq := map[string]float64{"a": 50, "b": 50, "c": 50}
	for _, byPeer := range []bool{false, true} {
		a, _ := share(90, 0.1, eq, "a", 50, byPeer)
		if math.Abs(a-30) > 1e-9 {
			t.Errorf("equal demands over the limit (by peer %v): %v, want a third of 90", byPeer, a)
		}
	}
}

// By peer, the clients of one peer, whatever they ask, leave a client of
// another peer at least (1−reserve)×total/peers of what it asks; the
// clients of one peer share its part by max-min fairness.
func TestSharesByPeerKeepEachPeersFloor(t *testing.T) {
	demand := map[string]float64{withPeer("ip:10.0.0.1", "n:honest"): 100}
	for i := range 99 {
		demand[withPeer("ip:10.0.0.66", string(rune('a'+i)))] = 1e9
	}
	honest, n := share(100, 0.05, demand, withPeer("ip:10.0.0.1", "n:honest"), 100, true)
	if floor := 95.0 / 2; honest < floor || n != 100 {
		t.Errorf("the honest peer's client: %v of %d clients, want at least %v", honest, n, floor)
	}
	liar, _ := share(100, 0.05, demand, withPeer("ip:10.0.0.66", "a"), 1e9, true)
	if want := 0.05 + 47.5/99; math.Abs(liar-want) > 1e-9 {
		t.Errorf("a client of the peer of 99: %v, want %v (an equal part of its peer's half, and of the reserve)", liar, want)
	}
	if p, ok := peerOf(withPeer("x509:spiffe://a|b", "n:x")); !ok || p != "x509:spiffe://a|b" {
		t.Errorf("peerOf = %q, %v", p, ok)
	}
	for _, c := range []string{"n:x", "s:1/2/3", "p:x", "p9:x|y", "px:y"} {
		if _, ok := peerOf(c); ok {
			t.Errorf("peerOf(%q) found a peer, want none", c)
		}
	}
}

// A token bucket never gives more than its share, at most 1% less, in
// whole seconds; a share below one token per day is DENY_ALL.
func TestTokenBucketRoundsDownInWholeSeconds(t *testing.T) {
	for _, rate := range []float64{0.003, 0.5, 1, 3.3, 10, 99.9, 1e6} {
		tb := tokenBucket(rate, 10).GetTokenBucket()
		secs := tb.GetFillInterval().AsDuration().Seconds()
		got := float64(tb.GetTokensPerFill().GetValue()) / secs
		if secs != math.Trunc(secs) || secs < 1 || got > rate || got < 0.99*rate {
			t.Errorf("rate %v: %v tokens per %v s = %v", rate, tb.GetTokensPerFill().GetValue(), secs, got)
		}
	}
	if s := tokenBucket(1e-6, 1); s.GetBlanketRule().String() != "DENY_ALL" || s.GetTokenBucket() != nil {
		t.Errorf("a share of a token a week: %v, want DENY_ALL", s)
	}
}
