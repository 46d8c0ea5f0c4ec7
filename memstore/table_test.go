package memstore

import (
	"hash/maphash"
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// exp is a state for table tests: it expires at a chosen instant.
type exp struct{ at int64 }

func (e *exp) Expires() int64 { return e.at }

// TestTableModel drives a table and a Go map with the same random
// operations (insert, update, delete by sweep, evict-style deleteAt) and
// checks after each that the two hold exactly the same keys and values, that
// every key is found, and that the table's invariants hold. Keys are short
// (held in the slot) and of 18 to 22 bytes, on both sides of inlineKey.
func TestTableModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := maphash.MakeSeed()
		tb := newTable[exp](seed)
		model := map[string]int64{}
		keys := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z]{1,3}|x{16}[a-z]{2,6}`), 1, 200, rapid.ID[string]).Draw(t, "keys")
		ops := rapid.IntRange(1, 400).Draw(t, "ops")
		for op := range ops {
			k := keys[rapid.IntRange(0, len(keys)-1).Draw(t, "key")]
			h := maphash.String(seed, k)
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0: // sweep everything that expires at or before a cut
				cut := rapid.Int64Range(0, 100).Draw(t, "cut")
				want := 0
				for mk, v := range model {
					if v <= cut {
						delete(model, mk)
						want++
					}
				}
				if got := sweep(&tb, cut); got != want {
					t.Fatalf("op %d: sweep(%d) deleted %d, want %d", op, cut, got, want)
				}
			case 1: // delete a sampled entry, as eviction does
				i, _, ok := sample(&tb, h, 8)
				if ok != (len(model) > 0) {
					t.Fatalf("op %d: sample ok=%v with %d keys", op, ok, len(model))
				}
				if ok {
					delete(model, tb.keyAt(i))
					tb.deleteAt(i)
				}
			default: // get or insert, then set a value
				v := rapid.Int64Range(1, 100).Draw(t, "v")
				st := tb.get(h, k)
				if _, in := model[k]; in != (st != nil) {
					t.Fatalf("op %d: get(%q) found=%v, model has it=%v", op, k, st != nil, in)
				}
				if st == nil {
					st = tb.insert(h, k)
				}
				st.at = v
				model[k] = v
			}
			checkTable(t, &tb, model)
		}
	})
}

func checkTable(t *rapid.T, tb *table[exp], model map[string]int64) {
	if tb.n != len(model) {
		t.Fatalf("table holds %d, model %d", tb.n, len(model))
	}
	if tb.n*16 > len(tb.slots)*13 {
		t.Fatalf("table of %d slots holds %d, over 13/16", len(tb.slots), tb.n)
	}
	occupied := 0
	for i := range tb.slots {
		g := tb.slots[i].tag
		if g == 0 {
			if tb.slots[i] != (slot[exp]{}) {
				t.Fatalf("empty slot %d is not zero: %+v", i, tb.slots[i])
			}
			continue
		}
		occupied++
		k := tb.keyAt(uint64(i))
		if g != tagOf(maphash.String(tb.seed, k)) {
			t.Fatalf("slot %d: tag %x does not match key %q", i, g, k)
		}
	}
	if occupied != tb.n {
		t.Fatalf("%d occupied slots, n = %d", occupied, tb.n)
	}
	// Every long key is in the long keys once, at the index its slot
	// names, and the bytes counted are theirs and the array's spare
	// entries.
	var seen = make([]bool, len(tb.long))
	var want int64
	for i := range tb.slots {
		sl := &tb.slots[i]
		if sl.tag == 0 {
			continue
		}
		k := tb.keyAt(uint64(i))
		if (len(k) > inlineKey) != (sl.n == longKey) {
			t.Fatalf("slot %d: key of %d bytes with n = %d", i, len(k), sl.n)
		}
		want += keyCost(len(k))
		if sl.n == longKey {
			j := longIndex(sl)
			if seen[j] {
				t.Fatalf("slot %d: long key index %d named twice", i, j)
			}
			seen[j] = true
		}
	}
	for j, ok := range seen {
		if !ok {
			t.Fatalf("long key %d (%q) named by no slot", j, tb.long[j])
		}
	}
	want += int64(cap(tb.long)-len(tb.long)) * longEntryBytes
	if tb.keyBytes != want {
		t.Fatalf("keyBytes = %d, want %d", tb.keyBytes, want)
	}
	if cap(tb.long) > longCap(len(tb.long))*2 {
		t.Fatalf("%d long keys in an array of %d: it did not shrink", len(tb.long), cap(tb.long))
	}
	for k, v := range model {
		st := tb.get(maphash.String(tb.seed, k), k)
		if st == nil {
			t.Fatalf("key %q lost", k)
		}
		if st.at != v {
			t.Fatalf("key %q = %d, want %d", k, st.at, v)
		}
	}
}

// The table grows under many keys and gives memory back when they go.
func TestTableGrowShrink(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := newTable[exp](seed)
	for i := range 10000 {
		k := "k" + strconv.Itoa(i)
		tb.insert(maphash.String(seed, k), k).at = int64(i)
	}
	// Growing by half at 13/16 full keeps the load between 13/24 and 13/16.
	if load := float64(tb.n) / float64(len(tb.slots)); load < 13.0/24 || load > 13.0/16 {
		t.Errorf("10000 keys in %d slots: load %.3f outside [%.3f, %.3f]", len(tb.slots), load, 13.0/24, 13.0/16)
	}
	if d := sweep(&tb, 9899); d != 9900 {
		t.Fatalf("sweep deleted %d, want 9900", d)
	}
	if len(tb.slots) > 1024 {
		t.Errorf("100 keys left in %d slots: the table did not shrink", len(tb.slots))
	}
	for i := 9900; i < 10000; i++ {
		k := "k" + strconv.Itoa(i)
		if st := tb.get(maphash.String(seed, k), k); st == nil || st.at != int64(i) {
			t.Fatalf("key %q lost after shrinking", k)
		}
	}
}
