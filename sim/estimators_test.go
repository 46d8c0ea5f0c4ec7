//go:build accuracystudy

// The estimator study of docs/algorithms.md ("Where the error comes
// from"): on the accuracy study's arrivals and under its shared measure, the
// sliding window counter with k sub-windows and, for the oldest sub-window,
// estimators that know more than its count: the means of the first d
// shifted Legendre polynomials of its arrivals' offsets (d = 1 is the mean
// offset), optionally rounded to int8 or int16. It keeps every arrival, so
// it measures estimators before anyone builds them; it is not a limiter.
//
//	N=10000000 POP=abusers SPEC="1:-1,2b 8:0,4b 16:0" \
//	    go test -tags accuracystudy -run TestEstimatorStudy -timeout 0 -v ./sim/
//
// RATE sets the limit per minute (default 100). SPEC lists k:variants; a variant is d (0: the even share, rounded to the
// nearest; -1: rounded down, as the two-window counter does), with suffix b
// for int8 means and q for int16 ones. POP is zipf (the default) or abusers;
// BYE=1 adds the errors by tenth of the sub-window and by the exact count's
// distance from the limit.

package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

const maxDeg = 12

// legAt fills p[0..maxDeg+1] with P_n(z).
func legAt(z float64, p *[maxDeg + 2]float64) {
	p[0], p[1] = 1, z
	for j := 1; j+1 < len(p); j++ {
		p[j+1] = ((2*float64(j)+1)*z*p[j] - float64(j)*p[j-1]) / float64(j+1)
	}
}

type variant struct {
	deg   int
	q     float64 // quantize moment means to q levels (0 exact)
	floor bool
}

func TestEstimatorStudy(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("N"))
	if n == 0 {
		n = 1_000_000
	}
	pop := os.Getenv("POP")
	rateEnv, _ := strconv.Atoi(os.Getenv("RATE")) // per minute; 0 means 100
	cfg := Config{Rate: rateEnv, Period: time.Minute, Duration: time.Hour, Seed: 1}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	load := float64(n) / 3600
	var p Pattern = Zipf{Keys: 100_000, Load: load}
	if pop == "abusers" {
		p = Abusers{Keys: 100_000, Load: load}
	}
	p = withDefaults(p, &cfg)
	keys := p.keys(&cfg)
	type group struct {
		k  int
		vs []variant
	}
	var groups []group
	for _, spec := range strings.Fields(os.Getenv("SPEC")) { // k:deg,deg,deg  (deg -1 = floor plain)
		a, b, _ := strings.Cut(spec, ":")
		k, _ := strconv.Atoi(a)
		g := group{k: k}
		for _, d := range strings.Split(b, ",") {
			v := variant{}
			if strings.HasSuffix(d, "q") {
				v.q = 32767
				d = strings.TrimSuffix(d, "q")
			}
			if strings.HasSuffix(d, "b") {
				v.q = 127
				d = strings.TrimSuffix(d, "b")
			}
			v.deg, _ = strconv.Atoi(d)
			if v.deg < 0 {
				v.deg, v.floor = 0, true
			}
			g.vs = append(g.vs, v)
		}
		groups = append(groups, g)
	}
	rate := float64(cfg.Rate)
	hist := make([][]int64, keys)
	per := int64(cfg.Period)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5109ce))
	type tally struct {
		a, r   int64
		byE    [2][10]int64
		byLoad [2][8]int64 // by exact count bucket relative to rate
	}
	tal := make([][]tally, len(groups))
	for i := range groups {
		tal[i] = make([]tally, len(groups[i].vs))
	}
	var total int64
	var pz, px [maxDeg + 2]float64
	var S [maxDeg + 1]float64
	for ev := range p.events(&cfg, rng) {
		total++
		h := hist[ev.Key]
		t := ev.At
		cut := t - per
		i := sort.Search(len(h), func(i int) bool { return h[i] > cut-per })
		h = h[i:]
		exact := int64(len(h) - sort.Search(len(h), func(i int) bool { return h[i] > cut }))
		want := float64(exact)+1 <= rate
		for gi, gr := range groups {
			g := per / int64(gr.k)
			nb := t / g
			oldStart := (nb - int64(gr.k)) * g
			lo := sort.Search(len(h), func(i int) bool { return h[i] >= oldStart })
			mid := sort.Search(len(h), func(i int) bool { return h[i] >= oldStart+g })
			whole := float64(len(h) - mid)
			W := float64(mid - lo)
			if whole >= rate || whole+W+1 <= rate {
				continue // every variant decides as the exact count
			}
			e := float64(t-nb*g) / float64(g)
			S = [maxDeg + 1]float64{}
			for _, a := range h[lo:mid] {
				legAt(2*float64(a-oldStart)/float64(g)-1, &px)
				for d := 1; d <= maxDeg; d++ {
					S[d] += px[d]
				}
			}
			legAt(2*e-1, &pz)
			for vi, v := range gr.vs {
				b := W * (1 - e)
				if W > 0 {
					for d := 1; d <= v.deg; d++ {
						m := S[d] / W
						if v.q > 0 {
							m = math.Round(m*v.q) / v.q
						}
						b += (pz[d-1] - pz[d+1]) / 2 * m * W
					}
					b = math.Min(math.Max(b, 0), W)
				}
				if v.floor {
					b = math.Floor(b)
				} else {
					b = math.Floor(b + 0.5)
				}
				ok := whole+b+1 <= rate
				if ok != want {
					tl := &tal[gi][vi]
					j := 0
					if !ok {
						j = 1
						tl.r++
					} else {
						tl.a++
					}
					tl.byE[j][min(int(e*10), 9)]++
					d := int(float64(exact)-rate) + 4 // exact count − rate, clipped: <=-4..>=+3
					tl.byLoad[j][min(max(d/1, 0), 7)]++
				}
			}
		}
		hist[ev.Key] = append(h, t)
	}
	fmt.Printf("population %q, %d requests\n", pop, total)
	for gi, gr := range groups {
		for vi, v := range gr.vs {
			tl := tal[gi][vi]
			fmt.Printf("k=%-3d deg=%d q=%-6g floor=%-5v admitted %6d rejected %6d wrong %.4f%%\n", gr.k, v.deg, v.q, v.floor, tl.a, tl.r, 100*float64(tl.a+tl.r)/float64(total))
			if os.Getenv("BYE") != "" {
				fmt.Printf("   by e decile, wrongly admitted %v\n   by e decile, wrongly rejected %v\n", tl.byE[0], tl.byE[1])
				fmt.Printf("   by exact−rate (≤−4..≥+3), wrongly admitted %v\n   wrongly rejected %v\n", tl.byLoad[0], tl.byLoad[1])
			}
		}
	}
}
