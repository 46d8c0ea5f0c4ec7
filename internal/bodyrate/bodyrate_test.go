package bodyrate_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bodyrate"
)

// Deadline steps: a body that began at t0, read timeout 2 s, minimum rate
// 1 KiB/s.
func TestDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const d = 2 * time.Second
	for i, c := range []struct {
		now      time.Duration // since t0
		received int64
		minRate  int64
		want     time.Duration // since t0
	}{
		{0, 0, 1024, 2 * time.Second},                                  // nothing yet: the grace
		{time.Second, 0, 1024, 2 * time.Second},                        // still nothing: the grace, not now + d
		{time.Second, 512, 1024, 2500 * time.Millisecond},              // half a second of credit
		{time.Second, 4096, 1024, 3 * time.Second},                     // ahead of the rate: each read within d
		{10 * time.Second, 1 << 20, 1024, 12 * time.Second},            // far ahead: now + d
		{10 * time.Second, 0, 0, 12 * time.Second},                     // no minimum
		{10 * time.Second, 0, -1, 12 * time.Second},                    // off
		{10 * time.Second, 1 << 62, 1, 12 * time.Second},               // a credit past any duration
		{2 * time.Second, 3, 2, 2*time.Second + 1500*time.Millisecond}, // a fraction of a second
		{time.Second, -1, 1024, 3 * time.Second},                       // nonsense received: no credit taken
	} {
		got := bodyrate.Deadline(t0, t0.Add(c.now), d, c.received, c.minRate)
		if want := t0.Add(c.want); !got.Equal(want) {
			t.Errorf("step %d: Deadline(t0, t0+%v, %v, %d, %d) = t0+%v, want t0+%v", i, c.now, d, c.received, c.minRate, got.Sub(t0), c.want)
		}
	}
}

// Deadline is called for each read of a body: it must not allocate.
func TestDeadlineAllocations(t *testing.T) {
	t0 := time.Now()
	if n := testing.AllocsPerRun(100, func() { bodyrate.Deadline(t0, t0, time.Second, 100, 1024) }); n != 0 {
		t.Errorf("Deadline allocates %v times, want 0", n)
	}
}
