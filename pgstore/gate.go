package pgstore

import (
	"context"
	"crypto/sha256"
	"sync"
)

// gate is the per-key bulkhead of a Store's decisions: at most per
// decisions of one key hold a connection (and a statement in PostgreSQL)
// at once; the others wait here, in the process, for one of them to end.
//
// Decisions of one key serialize on its row's lock in PostgreSQL anyway,
// so more of them in flight buy no throughput: they only hold connections
// that other keys' decisions then wait for, and wait on the row where a
// caller that gives up cannot take its decision back. A decision that
// waits here sent nothing, so a caller that gives up while it waits
// (its context ends) leaves the count as it was.
//
// Its memory is one entry per key with a decision in flight: bounded by
// the decisions in flight, not by the keys ever seen.
type gate struct {
	per   int
	mu    sync.Mutex
	keys  map[[sha256.Size]byte]*slot
	spare []*slot // free slots, reused: a decision of a quiet key allocates none
}

// slot is one key's place in the gate: its decisions inside or waiting
// (n), and a semaphore of per places.
type slot struct {
	n   int
	sem chan struct{}
}

func newGate(per int) *gate {
	return &gate{per: per, keys: map[[sha256.Size]byte]*slot{}}
}

// enter waits until a decision of the key whose hash is h may go to the
// database, or ctx ends (then it returns ctx's error, and the decision must
// not be sent). The caller calls exit(h, sl) once its decision is over.
func (g *gate) enter(ctx context.Context, h [sha256.Size]byte) (*slot, error) {
	g.mu.Lock()
	sl := g.keys[h]
	if sl == nil {
		if n := len(g.spare); n > 0 {
			sl, g.spare = g.spare[n-1], g.spare[:n-1]
		} else {
			sl = &slot{sem: make(chan struct{}, g.per)}
		}
		g.keys[h] = sl
	}
	sl.n++
	g.mu.Unlock()
	select {
	case sl.sem <- struct{}{}:
		return sl, nil
	default:
	}
	select {
	case sl.sem <- struct{}{}:
		return sl, nil
	case <-ctx.Done():
		g.leave(h, sl)
		return nil, ctx.Err()
	}
}

// exit ends a decision that enter let in.
func (g *gate) exit(h [sha256.Size]byte, sl *slot) {
	<-sl.sem
	g.leave(h, sl)
}

// leave takes one decision off sl's count, and the slot off the map when
// it was the last.
func (g *gate) leave(h [sha256.Size]byte, sl *slot) {
	g.mu.Lock()
	sl.n--
	if sl.n == 0 {
		delete(g.keys, h)
		if len(g.spare) < 1024 {
			g.spare = append(g.spare, sl)
		}
	}
	g.mu.Unlock()
}
