package memstore

import (
	"fmt"
	"hash/maphash"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// states is one algorithm's table, behind the operations a shard makes on
// every algorithm alike. Its methods run under the shard's lock.
type states interface {
	// prepare returns the constant decide passes to TakePrepared for lim (see
	// algorithm.Decider's Prepare).
	prepare(lim sluice.Limit) int64
	// peek returns key's state at now without changing it; for a key the
	// table does not hold, a fresh key's, or the state a key created now
	// would be restored to from mem (see sluice.Peeker). prepared is
	// prepare(lim).
	peek(h uint64, key string, now int64, lim sluice.Limit, prepared int64, mem *sketch) sluice.Result
	// refund gives cost units back to key, if the table holds it, and
	// reports whether the key's heap grew (a moments counter laid out
	// anew for another k or d), for the shard to trim.
	refund(h uint64, key string, now int64, lim sluice.Limit, cost int) (grew bool)
	// sweep drops the keys that are fresh at now and returns how many.
	sweep(now int64) int
	// sample returns the slot and expiry of the key closest to fresh in a
	// sample of evictionSample keys taken at h.
	sample(h uint64) (idx uint64, exp int64, ok bool)
	// summaryAt returns the hash of the key in slot i and what it leaves
	// in the sketch if evicted.
	summaryAt(i uint64) (h uint64, until, units int64)
	// evictAt drops the key in slot i.
	evictAt(i uint64)
	// bytes returns the heap the table holds.
	bytes() int64
	// counts returns the table's byte counts, for a shard to sum without
	// calling bytes.
	counts() *tableBytes
}

// stateTable is the table of the algorithm whose state is S. fresh stays
// the zero state, a fresh key for peek to read (Peek writes nothing), so
// that a peek at a key the table does not hold allocates nothing.
type stateTable[S any, P algorithm.State[S]] struct {
	table[S]
	fresh S
}

// init makes t an empty table and returns it.
func (t *stateTable[S, P]) init(seed maphash.Seed) states {
	t.table = newTable[S](seed)
	t.heapOf = func(st *S) int64 { return int64(P(st).Bytes()) }
	t.summary, t.restore = evictionFuncs[S]()
	return t
}

func (t *stateTable[S, P]) counts() *tableBytes { return &t.tableBytes }

func (*stateTable[S, P]) prepare(lim sluice.Limit) int64 { return P(nil).Prepare(lim) }

func (t *stateTable[S, P]) peek(h uint64, key string, now int64, lim sluice.Limit, prepared int64, mem *sketch) sluice.Result {
	if st := t.get(h, key); st != nil {
		return P(st).Peek(now, lim)
	}
	if until, units, ok := mem.recall(h, now, false); ok {
		var st S // a sliding log's restore allocates its ring, a moments counter's its buffer: only here
		t.restore(&st, now, lim, prepared, until, units)
		return P(&st).Peek(now, lim)
	}
	return P(&t.fresh).Peek(now, lim)
}

func (t *stateTable[S, P]) refund(h uint64, key string, now int64, lim sluice.Limit, cost int) bool {
	if st := P(t.get(h, key)); st != nil {
		before := st.Bytes()
		st.Refund(now, lim, cost)
		t.heap += int64(st.Bytes() - before)
		return st.Bytes() > before
	}
	return false
}

func (t *stateTable[S, P]) sweep(now int64) int { return sweep[S, P](&t.table, now) }

func (t *stateTable[S, P]) sample(h uint64) (uint64, int64, bool) {
	return sample[S, P](&t.table, h, evictionSample)
}

// errNoTable is the error for an algorithm sluice accepts and the store has
// no table for: a new algorithm not yet registered in shard.
func errNoTable(a sluice.Algorithm) error {
	return fmt.Errorf("%w: memstore has no table for algorithm %v", sluice.ErrInvalidLimit, a)
}
