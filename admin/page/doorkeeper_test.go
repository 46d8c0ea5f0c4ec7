package page

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/keyhash"
	"github.com/sluicehq/sluice/service"
)

// hashCounter counts the page's keyed hashes (HMACs) per key.
type hashCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// countHashes makes p count its keyed hashes, each still the real one.
func countHashes(p *Page) *hashCounter {
	c := &hashCounter{n: map[string]int{}}
	real := p.hash
	p.hash = func(dst []byte, key string) []byte {
		c.mu.Lock()
		c.n[key]++
		c.mu.Unlock()
		return real(dst, key)
	}
	return c
}

func (c *hashCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := 0
	for _, n := range c.n {
		t += n
	}
	return t
}

func refusal(key string) service.Decision {
	return service.Decision{Domain: "d", Rule: "d.ip", Outcome: service.Limited, Cost: 1, Key: key}
}

func floodKey(i int) string {
	return "d|remote_address=10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
}

// A key refused once (a one-off key, such as a spoofed address) costs no
// keyed hash and no allocation: a flood of new keys pays neither.
func TestRefusingAKeyOnceHashesAndAllocatesNothing(t *testing.T) {
	p := New(Config{Now: clocktest.At(time.Unix(1_000_000, 0)).Now})
	hashes := countHashes(p)
	ds := make([]service.Decision, 2000)
	for i := range ds {
		ds[i] = refusal(floodKey(i))
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		p.Observe(ds[i])
		i++
	})
	if allocs != 0 || hashes.total() != 0 {
		t.Fatalf("%d keys refused once each: %v allocations and %d keyed hashes per refusal, want 0 and 0",
			i, allocs, hashes.total()/i)
	}
}

// A flood of 100,000 keys refused once each, among which two keys are
// refused 1,000 and 500 times, leaves both at the top of the page, in
// their order, with counts within the doorkeeper's bound; each is hashed
// once, and no key of the flood is hashed or listed.
func TestAFloodOfOneOffKeysLeavesTheHeavyHittersListed(t *testing.T) {
	c := clocktest.At(time.Unix(1_000_020, 0))
	p := New(Config{Now: c.Now})
	hashes := countHashes(p)
	const flood, heavy, second = 100_000, "d|remote_address=203.0.113.7", "d|remote_address=203.0.113.8"
	for i := range flood {
		p.Observe(refusal(floodKey(i)))
		if i%100 == 0 {
			p.Observe(refusal(heavy)) // 1,000 times
		}
		if i%200 == 50 {
			p.Observe(refusal(second)) // 500 times
		}
	}
	want := keyhash.New(nil) // the process's secret, as p's
	top := p.Snapshot().Top
	if len(top) != 2 || top[0].Key != want.Hash("", heavy) || top[1].Key != want.Hash("", second) {
		t.Fatalf("the top list after a flood (%d keyed hashes): %d keys, first %+v; want the two heavy keys, 1,000 then 500",
			hashes.total(), len(top), top[:min(len(top), 1)])
	}
	// The flood takes a heavy key's slot of the doorkeeper between two of
	// its refusals (100 flood keys) with odds of about 100/4096, and only
	// until its second refusal is counted: a few at most.
	for i, n := range []uint64{1000, 500} {
		if got := top[i]; got.Count > n || got.Count < n-5 || got.Error != 0 {
			t.Errorf("%s counted %d (error %d), want %d or a few less, error 0", got.Key, got.Count, got.Error, n)
		}
	}
	if hashes.n[heavy] != 1 || hashes.n[second] != 1 || hashes.total() != 2 {
		t.Errorf("keyed hashes: %d of the heavy key, %d of the second, %d in all; want 1, 1 and 2",
			hashes.n[heavy], hashes.n[second], hashes.total())
	}
}

// The doorkeeper forgets with the minutes: a key refused once every two
// minutes is never listed nor hashed (a refusal remembered from two
// minutes ago is not added), and one refused twice in a minute is listed
// with those two.
func TestAKeyRefusedOnceEveryTwoMinutesIsNeverListed(t *testing.T) {
	c := clocktest.At(time.Unix(1_000_020, 0))
	p := New(Config{Now: c.Now})
	hashes := countHashes(p)
	for range 5 {
		p.Observe(refusal(ipKey))
		c.Advance(2 * time.Minute)
	}
	if top := p.Snapshot().Top; len(top) != 0 || hashes.total() != 0 {
		t.Fatalf("a key refused once every 2 minutes for 10 minutes: top %+v, %d keyed hashes; want none", top, hashes.total())
	}
	p.Observe(refusal(ipKey))
	p.Observe(refusal(ipKey))
	if top := p.Snapshot().Top; len(top) != 1 || top[0].Count != 2 || hashes.total() != 1 {
		t.Fatalf("then twice in a minute: top %+v, %d keyed hashes; want it counted 2, hashed once", top, hashes.total())
	}
}

// Two refusals of a key across the turn of a minute list it with both:
// the first, remembered in the minute before, is added.
func TestTwoRefusalsAcrossAMinuteListTheKey(t *testing.T) {
	c := clocktest.At(time.Unix(1_000_079, 0)) // a second before a minute
	p := New(Config{Now: c.Now})
	p.Observe(refusal(ipKey))
	c.Advance(2 * time.Second)
	p.Observe(refusal(ipKey))
	if top := p.Snapshot().Top; len(top) != 1 || top[0].Count != 2 {
		t.Fatalf("two refusals a minute's turn apart: top %+v, want the key counted 2", top)
	}
}

// Refusals of one key racing from several goroutines, among a flood of
// one-off keys, are counted at most once each and at least all but a
// few: the remembered refusal is added by one of them only.
func TestRacingRefusalsOfAKeyAreNotCountedTwice(t *testing.T) {
	p := New(Config{Now: clocktest.At(time.Unix(1_000_020, 0)).Now})
	const workers, each = 4, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				p.Observe(refusal(ipKey))
				p.Observe(refusal(floodKey(w*each + i)))
			}
		})
	}
	wg.Wait()
	top := p.Snapshot().Top
	if len(top) != 1 || top[0].Count > workers*each || top[0].Count < workers*each-workers {
		t.Fatalf("top %+v, want one key counted %d or a few less", top, workers*each)
	}
}

// A listed key whose hash stays cached (so the doorkeeper is not asked at
// its refusals) keeps its slot through a flood of other keys' first
// refusals: a refusal served from the cache marks the slot young once a
// minute, and a new key takes an unlisted slot before a listed one. Before,
// the listed key's slot kept the minute it was let in, the flood took it,
// and once its hash left the cache its next refusal was taken for a first
// and left out.
func TestACachedListedKeyKeepsItsSlotThroughAFlood(t *testing.T) {
	var d doorkeeper
	const h = uint64(0x9e3779b97f4a7c15)
	d.admit(h, 100)
	if ok, _ := d.admit(h, 100); !ok {
		t.Fatal("the second refusal in a minute was not let in")
	}
	d.touch(h, 102) // refusals served from shownCache in minutes 101, 102
	r := rand.New(rand.NewPCG(1, 2))
	for range 4 * doorSlots {
		d.admit(r.Uint64(), 102)
	}
	base := h % doorSlots &^ 1
	for range 4 { // and some that fall in its own set
		d.admit(base|r.Uint64()&^(doorSlots-1), 102)
	}
	if ok, _ := d.admit(h, 102); !ok {
		t.Error("after a flood, the listed key's refusal was taken for a first and left out")
	}
}
