package failsafe

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// learnedSlots is the size of a Group's table of learned allowances: 32
// KiB, made once, whatever the number of keys.
const learnedSlots = 4096

// An entry of the learned table packs, in one atomic word, a key's tag
// (20 bits of its hash), the Remaining the primary last reported for it
// (20 bits, capped) and until when that report holds (24 bits of Unix
// seconds, modulo 2^24).
const (
	learnedTagBits  = 20
	learnedRemBits  = 20
	learnedTimeBits = 24
	learnedRemMax   = 1<<learnedRemBits - 1
	learnedTimeMask = 1<<learnedTimeBits - 1
	// learnedMaxHold bounds how long a report holds (half the clock's
	// wrap, 97 days): past it, a longer reset is treated as expired.
	learnedMaxHold = 1 << (learnedTimeBits - 1)
)

// learned remembers, per key (a fixed table indexed by a hash of the key,
// a newer key taking an older one's slot), the allowance the primary last
// reported for it, so that Local mode spends at most a share of what was
// left rather than a share of the whole limit (see Limiter.degrade). Its
// zero value remembers nothing; a nil *learned is off.
type learned struct {
	slots [learnedSlots]atomic.Uint64
}

// learn records res, the primary's answer at now for the key whose hash
// (maphash.String with the Group's seed, Group.hash) is h. A report that
// holds longer than learnedMaxHold, or a Remaining at or above
// learnedRemMax, is recorded as no information (the slot is cleared when it
// was key's).
func (t *learned) learn(h uint64, res sluice.Result, now time.Time) {
	slot := &t.slots[h%learnedSlots]
	tag := h >> (64 - learnedTagBits)
	if res.Remaining >= learnedRemMax || res.ResetAfter <= 0 || res.ResetAfter >= learnedMaxHold*time.Second {
		if old := slot.Load(); old != 0 && old>>(64-learnedTagBits) == tag {
			slot.CompareAndSwap(old, 0)
		}
		return
	}
	until := uint64(now.Add(res.ResetAfter+time.Second-1).Unix()) & learnedTimeMask
	v := tag<<(64-learnedTagBits) | uint64(max(res.Remaining, 0))<<learnedTimeBits | until
	if slot.Load() != v {
		slot.Store(v)
	}
}

// remaining returns the allowance the primary last reported for the key
// whose hash is h, and
// how long that report holds from now; ok is false when there is none (never
// learned, taken by another key, or expired).
func (t *learned) remaining(h uint64, now time.Time) (rem int, hold time.Duration, ok bool) {
	v := t.slots[h%learnedSlots].Load()
	if v == 0 || v>>(64-learnedTagBits) != h>>(64-learnedTagBits) {
		return 0, 0, false
	}
	left := (v - uint64(now.Unix())) & learnedTimeMask
	if left == 0 || left >= learnedMaxHold {
		return 0, 0, false
	}
	return int(v >> learnedTimeBits & learnedRemMax), time.Duration(left) * time.Second, true
}
