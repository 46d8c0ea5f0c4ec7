package pgstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
)

// TestGateBoundsAKeyAndForgetsIt: a key's third decision waits while two
// are inside, and gives up with its context (having been let in nowhere);
// another key goes in meanwhile; once every decision has left, the gate
// holds no entry, so its memory follows the decisions in flight, not the
// keys ever seen.
func TestGateBoundsAKeyAndForgetsIt(t *testing.T) {
	g := newGate(2)
	hot, other := sha256.Sum256([]byte("hot")), sha256.Sum256([]byte("other"))
	a, err := g.enter(context.Background(), hot)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.enter(context.Background(), hot)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.enter(ctx, hot); !errors.Is(err, context.Canceled) {
		t.Fatalf("a third decision of the key entered (%v); want it to wait, then give up with its context", err)
	}
	o, err := g.enter(ctx, other)
	if err != nil {
		t.Fatalf("another key's decision behind a full key: %v, want it let in at once", err)
	}
	g.exit(other, o)
	g.exit(hot, a)
	c, err := g.enter(context.Background(), hot)
	if err != nil {
		t.Fatal(err)
	}
	g.exit(hot, b)
	g.exit(hot, c)
	if n := len(g.keys); n != 0 {
		t.Errorf("the gate holds %d keys with nothing in flight, want 0", n)
	}
}
