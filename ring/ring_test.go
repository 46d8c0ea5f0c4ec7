package ring_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/ring"
)

func nodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "node-" + strconv.Itoa(i)
	}
	return out
}

func TestBalanceAndStability(t *testing.T) {
	r, err := ring.New(nodes(5), 0)
	if err != nil {
		t.Fatal(err)
	}
	const keys = 100_000
	count := map[string]int{}
	owner := make([]string, keys)
	for i := range keys {
		owner[i] = r.Owner("user:" + strconv.Itoa(i))
		count[owner[i]]++
	}
	for n, c := range count {
		if c < keys/5*80/100 || c > keys/5*120/100 {
			t.Errorf("%s owns %d of %d keys, want within 20%% of %d", n, c, keys, keys/5)
		}
	}
	// A sixth node takes about a sixth of the keys, only from the others.
	r6, err := ring.New(nodes(6), 0)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i := range keys {
		o := r6.Owner("user:" + strconv.Itoa(i))
		if o != owner[i] {
			moved++
			if o != "node-5" {
				t.Fatalf("key %d moved from %s to %s, not to the new node", i, owner[i], o)
			}
		}
	}
	if moved < keys/6*70/100 || moved > keys/6*130/100 {
		t.Errorf("adding a sixth node moved %d keys, want about %d", moved, keys/6)
	}
	// Every process that builds the ring from the same nodes agrees.
	again, err := ring.New(nodes(5), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		k := "user:" + strconv.Itoa(i)
		if again.Owner(k) != r.Owner(k) {
			t.Fatalf("two rings of the same nodes disagree on %s", k)
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, err := ring.New([]string{"a", ""}, 0); err == nil {
		t.Error("empty node name: no error")
	}
	if _, err := ring.New([]string{"a", "a"}, 0); err == nil {
		t.Error("duplicate node: no error")
	}
	var empty *ring.Ring
	if o := empty.Owner("k"); o != "" {
		t.Errorf("nil ring Owner = %q", o)
	}
}

func ExampleRing_Owner() {
	r, err := ring.New([]string{"sluice-a:8081", "sluice-b:8081", "sluice-c:8081"}, 0)
	if err != nil {
		panic(err)
	}
	// Every server computes the same owner for a key, and sends the
	// decision there: the hash is stable across processes and builds.
	fmt.Println(r.Owner("user:42"))
	// Output: sluice-b:8081
}

func BenchmarkOwner(b *testing.B) {
	r, err := ring.New(nodes(10), 0)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Owner(keys[i%len(keys)])
		i++
	}
}
