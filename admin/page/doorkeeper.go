package page

import "sync/atomic"

// doorSlots is the number of slots of a doorkeeper: a power of two, in
// sets of two. At 8 bytes a slot it is 32 KiB, whatever the keys.
const doorSlots = 4096

// doorkeeper keeps a key out of the top list, and its keyed hash unmade,
// until the key's second refusal within a minute or two: a flood of keys
// refused once each (spoofed addresses, say) then costs no HMAC, no
// allocation and no counter of the top list, while a key refused again
// enters the list at its second refusal with the first added, so that it
// is counted from the start. It also remembers the keys it let in
// ("listed"), so that one whose hash left shownCache is let in again at
// its next refusal, without a refusal left out.
//
// It never holds a key. A key's set of two slots is found from the low
// bits of the page's seeded 64-bit hash/maphash sum of the rule and the
// key (shownCache's); a slot holds the sum's high 52 bits, the minute of
// the key's latest refusal (11 bits: minutes count modulo 2,048, about
// 34 hours) and whether the key was let in. Two keys are taken for one
// with odds of about 2^-63 a pair. Each slot is one atomic word: Observe
// takes no lock for it.
//
// What it does to the top list's counts (docs/page.md states it): it adds
// to a key's count only a refusal of that key in the same minute or the
// one before, and each once (whoever marks the slot listed adds it); it
// leaves out of a key's count at most:
//   - one refusal, for a key refused once in a minute and not again in the
//     next (it is not listed), and
//   - one more each time other keys' first refusals took both slots of its
//     set between two of its refusals (with g first refusals of other keys
//     in between, odds of about g/4096 each time for a key not yet listed;
//     a listed key's slot goes only to a flood in a minute when the other
//     slot of its set is listed too), the next of its refusals then being
//     taken for a first.
//
// Aging: a new key takes a slot of its set that is empty or of an older
// minute, else one not listed, else one of the two chosen by its sum; so a
// flood cannot fill it: it forgets at the rate new keys arrive, and a
// refusal remembered from two minutes ago or more is never added. A listed
// key's slot is kept young by its refusals, those served from shownCache
// too (touch), so a flood takes it only when both slots of its set are
// listed keys refused this minute.
type doorkeeper struct {
	slots [doorSlots]atomic.Uint64
}

// Layout of a slot: the sum's high bits, then the minute, then the listed
// bit. 0 is an empty slot.
const (
	doorListed     = 1
	doorMinuteMask = 1<<12 - 2 // bits 1 to 11
	doorKeyMask    = ^uint64(1<<12 - 1)
)

// doorSet returns the first slot of the set of the key of sum, and the
// key's bits in a slot.
func doorSet(sum uint64) (base, fp uint64) {
	base, fp = sum%doorSlots&^1, sum&doorKeyMask
	if fp == 0 {
		fp = 1 << 63 // keeps a slot of this key from reading as empty
	}
	return base, fp
}

// admit records a refusal of the key of sum in minute, and says whether
// the key is to be counted now: true when it was let in before, or at a
// refusal that follows one remembered from this minute or the one before,
// with the weight of the refusal remembered (1 then, else 0); false at
// its first refusal, remembered.
func (d *doorkeeper) admit(sum uint64, minute int64) (ok bool, remembered uint64) {
	base, fp := doorSet(sum)
	now, prev := uint64(minute)<<1&doorMinuteMask, uint64(minute-1)<<1&doorMinuteMask
	for i := range uint64(2) {
		slot := &d.slots[base+i]
		old := slot.Load()
		if old&doorKeyMask != fp {
			continue
		}
		switch {
		case old&doorListed != 0:
			if old&doorMinuteMask != now {
				slot.CompareAndSwap(old, fp|now|doorListed) // kept as young
			}
			return true, 0
		case old&doorMinuteMask == now || old&doorMinuteMask == prev:
			if slot.CompareAndSwap(old, fp|now|doorListed) {
				return true, 1
			}
			return true, 0 // another refusal of it got there first
		default:
			slot.Store(fp | now) // remembered from before: a first again
			return false, 0
		}
	}
	// The victim: an empty slot or one of an older minute, else an
	// unlisted one, else the one chosen by the sum.
	victim := base + sum>>63
	unlisted := false
	for i := range uint64(2) {
		v := d.slots[base+i].Load()
		if v == 0 || v&doorMinuteMask != now {
			victim = base + i
			break
		}
		if v&doorListed == 0 && !unlisted {
			victim, unlisted = base+i, true
		}
	}
	d.slots[victim].Store(fp | now)
	return false, 0
}

// touch marks the listed slot of the key of sum young in minute, for a
// refusal served from shownCache (which does not ask admit): without it a
// listed key whose hash stays cached would keep the minute it was let in,
// and a flood of first refusals would take its slot. One load per slot of
// the set, and a write at most once a minute.
func (d *doorkeeper) touch(sum uint64, minute int64) {
	base, fp := doorSet(sum)
	now := uint64(minute) << 1 & doorMinuteMask
	for i := range uint64(2) {
		slot := &d.slots[base+i]
		if old := slot.Load(); old&doorKeyMask == fp && old&doorListed != 0 {
			if old&doorMinuteMask != now {
				slot.CompareAndSwap(old, fp|now|doorListed)
			}
			return
		}
	}
}
