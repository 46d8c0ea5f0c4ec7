package algorithm

import (
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// LogEntries is the ring a sliding log starts with and never shrinks below:
// a log of at most LogEntries entries is never reallocated once grown.
const LogEntries = 64

// logEntry is one entry of a sliding log: the units logged at instant at,
// stored as the running total of the units logged up to and including this
// entry, so that the count of any run of entries is a difference of two
// totals and the entry a wait ends at is a binary search.
type logEntry struct {
	at  int64 // Unix nanoseconds
	cum int64 // units logged up to and including this entry
}

// SlidingLog is the sliding log: a ring of (instant, running total) entries,
// oldest first, with strictly increasing instants. A request of cost c at
// now is admitted when the units logged in (now−Period, now] plus c are at
// most Rate, and is then logged as one entry of c units, or added to the
// newest entry if that has the same instant. So no window of length Period
// ever holds more than Rate units, and no request the exact definition
// admits is refused: the log is exact at every Rate, and holds at most Rate
// entries (each holds at least one unit), 16 bytes each, plus the ring's
// spare room (at most as many again, and none past Rate).
//
// A decision is O(log entries) work at worst, never O(cost) nor O(Rate):
// entries that have left the window are found by a binary search from the
// front, the entry a wait ends at by a binary search on the running totals,
// and a request adds at most one entry at the back. The ring doubles when
// full and shrinks to twice its entries when three quarters empty, so that its bytes follow the
// entries it holds and each reallocation is paid for by as many decisions.
//
// With a Precision, the units admitted within one epoch-aligned slot of
// Precision share an entry stamped with the latest of their instants, so
// that none of them leaves the window earlier than it would in the exact
// log: the log is conservative by at most one slot, and holds at most
// ⌈Period/Precision⌉+1 entries (MaxLogEntries).
//
// An entry leaves the window whole, when its latest unit does: RetryAfter is
// the time until enough of the oldest entries have left for the request to
// fit, Remaining is Rate minus the units logged, ResetAfter the time until
// the newest entry leaves; all three are exact for the log as it is kept. A
// Refund removes units from the oldest entries, which is conservative (see
// Refund). If the limit changes, or the clock steps back, and more than
// MaxLogEntries entries would meet, the two oldest are merged into one
// stamped with the later instant: still conservative, and the bound holds.
// A log held to fewer entries than MaxLogEntries (a store's memory budget;
// see TakeAtMost) coarsens its slot instead, to LogSlot: it stays
// conservative and each unit leaves less than one such slot late.
type SlidingLog struct {
	buf  []logEntry // ring of entries
	head int32      // index of the oldest entry
	n    int32      // number of entries
	base int64      // units logged before the oldest entry: the running total it starts from
	// until is the instant the newest entry leaves the window.
	until int64
}

// LogResolution returns the slot of time, in nanoseconds, within which a
// sliding log under lim merges the units it admits into one entry: 1 (only
// the same instant) without a Precision, else the Precision.
func LogResolution(lim sluice.Limit) int64 {
	return max(int64(lim.Precision), 1)
}

// LogSlot returns the slot of time, in nanoseconds, within which a sliding
// log under lim held to at most most entries merges the units it admits
// into one entry (see SlidingLog.TakeAtMost): LogResolution(lim) when most
// is at least MaxLogEntries(lim) (the log is held to nothing it would not
// hold anyway), else ⌈Period/(most−1)⌉ (Period when most is 1), or the
// resolution if that is coarser: no more than most slots, aligned to the
// Unix epoch, meet a window (now−Period, now].
func LogSlot(lim sluice.Limit, most int64) int64 {
	res := LogResolution(lim)
	if most >= MaxLogEntries(lim) {
		return res
	}
	p := int64(lim.Period)
	need := p
	if most > 1 {
		need = (p-1)/(most-1) + 1
	}
	return max(res, need)
}

// MaxLogEntries returns the most entries a sliding log under lim holds:
// lim.Rate (each entry holds at least one unit), or, with a Precision, no
// more than the slots that meet a window, ⌈Period/Precision⌉+1. It is
// lim.LogEntries.
func MaxLogEntries(lim sluice.Limit) int64 { return int64(lim.LogEntries()) }

// Len returns the number of logged units.
func (s *SlidingLog) Len() int { return int(s.sum()) }

// Entries returns the number of entries the log holds.
func (s *SlidingLog) Entries() int { return int(s.n) }

// Bytes returns the heap bytes the log holds now beyond the SlidingLog value
// itself: its ring of 16-byte entries, at most twice the entries it holds
// once it has grown past LogEntries.
func (s *SlidingLog) Bytes() int { return cap(s.buf) * int(unsafe.Sizeof(logEntry{})) }

// sum returns the units in the entries.
func (s *SlidingLog) sum() int64 {
	if s.n == 0 {
		return 0
	}
	return s.entry(s.n-1).cum - s.base
}

// entry returns the i-th entry, oldest first.
func (s *SlidingLog) entry(i int32) *logEntry {
	j := s.head + i
	if j >= int32(len(s.buf)) {
		j -= int32(len(s.buf))
	}
	return &s.buf[j]
}

// firstAfter returns the index of the first entry, from i on, whose
// instant is after cut, or s.n if there is none. The oldest entry is
// checked first, as most calls find it live; else a binary search.
func (s *SlidingLog) firstAfter(i int32, cut int64) int32 {
	if i >= s.n || s.entry(i).at > cut {
		return i
	}
	lo, hi := i+1, s.n // entry(lo-1) ≤ cut; the answer is in [lo, hi]
	for lo < hi {
		m := int32(uint32(lo+hi) >> 1)
		if s.entry(m).at <= cut {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// firstReaching returns the index of the first entry, from i on, whose
// running total is at least total; one exists (the caller checked the
// newest's).
func (s *SlidingLog) firstReaching(i int32, total int64) int32 {
	lo, hi := i, s.n-1
	for lo < hi {
		m := int32(uint32(lo+hi) >> 1)
		if s.entry(m).cum < total {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// drop removes the k oldest entries and their units.
func (s *SlidingLog) drop(k int32) {
	if k == 0 {
		return
	}
	s.base = s.entry(k - 1).cum
	s.head += k
	if s.head >= int32(len(s.buf)) {
		s.head -= int32(len(s.buf))
	}
	s.n -= k
	if s.n == 0 {
		s.head, s.base = 0, 0
	}
}

// expire drops the entries at or before cut, and shrinks the ring to twice
// its entries (at least LogEntries) if it is three quarters empty: the
// copy is paid for by the entries that left since the ring last changed.
func (s *SlidingLog) expire(cut int64) {
	s.drop(s.firstAfter(0, cut))
	if len(s.buf) > LogEntries && int(s.n) <= len(s.buf)/4 {
		s.resize(max(2*int(s.n), LogEntries))
	}
}

// resize moves the entries to a ring of size entries.
func (s *SlidingLog) resize(size int) {
	buf := make([]logEntry, size)
	k := copy(buf, s.buf[s.head:min(int(s.head+s.n), len(s.buf))])
	copy(buf[k:], s.buf[:int(s.n)-k])
	s.buf, s.head = buf, 0
}

// Take decides a request of cost units at now and logs them if admitted.
func (s *SlidingLog) Take(now int64, lim sluice.Limit, cost int) sluice.Result {
	return s.TakeAtMost(now, lim, cost, MaxLogEntries(lim))
}

// TakeAtMost is Take keeping at most most entries (at least one), fewer
// than MaxLogEntries(lim) when a store's memory budget allows no more. The
// log is then kept as with a coarser precision: the units admitted within
// one epoch-aligned slot of LogSlot(lim, most) share an entry stamped with
// the latest of their instants, so that no more than most slots meet a
// window and the ring never grows past most entries. The log stays
// conservative: every unit is counted and none leaves the window earlier
// than in the exact log, so no window of Period holds more than Rate
// units. Once the entries in the window were all logged at that slot, each
// unit leaves less than one slot late, so that at a steady rate a log held
// at one size admits at least Rate less the units of one slot per Period
// (1,000 a minute held to 64 entries: a slot of 952 ms, 16 units).
//
// Entries logged at a finer slot (before the log was held, or held to
// more entries) merge by slot when they fill the ring, before it grows: a
// pass over the ring, paid for by the entries that filled it, after which
// the ring grows anyway unless a quarter of it was freed. Past most
// entries (a log held to fewer than it holds, a change of limit, a clock
// that stepped back), each new entry merges two: the first pair among the
// 8 oldest that share a slot, else the two newest if they do, else the
// two oldest, which may keep units more than one slot late, still
// conservatively.
func (s *SlidingLog) TakeAtMost(now int64, lim sluice.Limit, cost int, most int64) sluice.Result {
	p, rate, c := int64(lim.Period), int64(lim.Rate), int64(cost)
	at := now // the instant logged: never before the newest, so the log stays sorted if the clock steps back
	if s.n > 0 {
		at = max(now, s.entry(s.n-1).at)
	}
	s.expire(now - p)
	var res sluice.Result
	if sum := s.sum(); sum+c > rate {
		// Wait until enough of the oldest entries have left the window:
		// the first whose running total passes base+sum+c−rate. It exists,
		// since cost ≤ rate.
		i := s.firstReaching(0, s.base+sum+c-rate)
		res.RetryAfter = time.Duration(s.entry(i).at + p - now)
		res.Remaining = int(max(rate-sum, 0))
		res.ResetAfter = time.Duration(s.entry(s.n-1).at + p - now)
		return res
	}
	r := LogResolution(lim)
	slot := r
	if most < MaxLogEntries(lim) { // held below its size: the call only then
		slot = LogSlot(lim, most)
	}
	s.add(at, c, slot, most, slot > r)
	s.until = at + p
	res.Allowed = true
	res.Remaining = int(rate - s.sum())
	res.ResetAfter = time.Duration(at + p - now)
	return res
}

// Peek reports the log at now without logging anything: the units in
// (now−Period, now] against Rate, and ResetAfter the time until the newest
// of them leaves the window, 0 for an empty log. It reads the ring and
// writes nothing, so it needs no copy of it.
func (s *SlidingLog) Peek(now int64, lim sluice.Limit) sluice.Result {
	p, rate := int64(lim.Period), int64(lim.Rate)
	// Skip the entries that have left the window, as expire would drop them.
	i := s.firstAfter(0, now-p)
	var res sluice.Result
	if i == s.n {
		res.Allowed, res.Remaining = true, int(rate)
		return res
	}
	from := s.base
	if i > 0 {
		from = s.entry(i - 1).cum
	}
	sum := s.entry(s.n-1).cum - from
	res.ResetAfter = time.Duration(s.entry(s.n-1).at + p - now)
	if sum > rate {
		// Over a limit lowered since: wait until enough old entries leave.
		// The entry that brings the sum to the limit leaves at its instant
		// plus p; the next one keeps it there.
		j := s.firstReaching(i, from+sum-rate)
		res.RetryAfter = time.Duration(s.entry(j).at + p - now)
		return res
	}
	res.Allowed = true
	res.Remaining = int(rate - sum)
	return res
}

// add logs c units at at, which is no earlier than the newest entry: into
// the newest entry if it has the same instant or lies in the same
// epoch-aligned slot of length slot, else as a new entry, growing the ring
// by doubling. most is the most entries the log may hold: past it two
// entries merge (see merge). coarse says slot is coarser than the limit's
// resolution (the log is held below its size): a full ring then first
// merges its entries by slot (see TakeAtMost).
func (s *SlidingLog) add(at, c, slot, most int64, coarse bool) {
	if s.n > 0 {
		last := s.entry(s.n - 1)
		if last.at == at || slot > 1 && floorDiv(last.at, slot) == floorDiv(at, slot) {
			last.at, last.cum = at, last.cum+c
			return
		}
	}
	total := s.base + c
	if s.n > 0 {
		total = s.entry(s.n-1).cum + c
	}
	if int64(s.n) >= max(most, 1) {
		s.merge(slot)
	}
	if n := int(s.n); n == len(s.buf) {
		if coarse {
			// Before growing, merge the entries that share the coarser
			// slot: entries logged before the log was held below its
			// size. The pass is paid for, as the copy is, by the entries
			// that filled the ring; the ring grows all the same unless a
			// quarter of it is freed, so that the next pass is paid for by
			// as many new entries.
			s.reslot(slot)
		}
		if int(s.n) == n || 4*(n-int(s.n)) < n {
			// Grow 4, 8, 16, ... but not past what the limit needs: a
			// full log of 1000 per period keeps a ring of 1000.
			s.resize(int(min(int64(max(2*len(s.buf), 4)), max(most, int64(s.n)+1))))
		}
	}
	s.n++
	*s.entry(s.n - 1) = logEntry{at: at, cum: total}
}

// reslot merges every run of entries in one slot into its newest entry.
func (s *SlidingLog) reslot(slot int64) {
	if s.n == 0 {
		return
	}
	w := int32(0)
	for i := int32(1); i < s.n; i++ {
		e := *s.entry(i)
		if floorDiv(e.at, slot) != floorDiv(s.entry(w).at, slot) {
			w++
		}
		*s.entry(w) = e
	}
	s.n = w + 1
}

// mergeScan is the most pairs of the oldest entries merge looks at for
// two that share a slot.
const mergeScan = 8

// merge merges two entries into one stamped with the later instant, to
// make room for a new one: the first pair of the mergeScan oldest that
// share a slot, else the two newest if they do, else the two oldest. Work
// is O(mergeScan): the entries before the pair move up by one.
func (s *SlidingLog) merge(slot int64) {
	i := int32(0) // merge entry i into entry i+1
	if s.n >= 2 {
		i = -1
		for j := range min(s.n-1, mergeScan) {
			if floorDiv(s.entry(j).at, slot) == floorDiv(s.entry(j+1).at, slot) {
				i = j
				break
			}
		}
		if i < 0 && floorDiv(s.entry(s.n-2).at, slot) == floorDiv(s.entry(s.n-1).at, slot) {
			*s.entry(s.n - 2) = *s.entry(s.n - 1)
			s.n--
			return
		}
		i = max(i, 0)
	}
	for j := i; j > 0; j-- {
		*s.entry(j) = *s.entry(j - 1)
	}
	s.head++
	if s.head == int32(len(s.buf)) {
		s.head = 0
	}
	s.n--
}

// Refund removes cost units from the oldest live entries, whichever
// requests they were logged for. It cannot know which entries the refunded
// units are in, so it removes the units that leave the window first: every
// unit it keeps then carries an instant no earlier than the real one it
// stands for, so no window ever holds more than Rate of the admitted units
// that were not refunded, and the log may admit a little less than if the
// refunded request had never been logged (its units give way at the oldest
// instants, not at its own). This holds for refunds of requests still in
// the window (now−Period, now]; a request that has left it has nothing left
// to give back. An entry that keeps some units keeps its instant. Refunding
// more than the log holds empties it.
func (s *SlidingLog) Refund(now int64, lim sluice.Limit, cost int) {
	s.expire(now - int64(lim.Period))
	if s.n == 0 {
		s.base, s.until = 0, 0
		return
	}
	if c := min(int64(cost), s.sum()); c > 0 {
		// Every entry whose running total the new base reaches is empty;
		// the next one, if any, starts from the new base.
		base := s.base + c
		k := s.firstReaching(0, base)
		if s.entry(k).cum == base {
			k++
		}
		s.drop(k)
		s.base = base
	}
	if s.n == 0 {
		s.base, s.until = 0, 0
	} else {
		s.until = s.entry(s.n-1).at + int64(lim.Period)
	}
}

// Expires returns the instant at which the newest entry leaves the window.
func (s *SlidingLog) Expires() int64 { return s.until }

// Prepare returns 0: the log's slot is one division it makes on admission
// only.
func (*SlidingLog) Prepare(sluice.Limit) int64 { return 0 }

// TakePrepared is Take; the log has nothing to prepare.
func (s *SlidingLog) TakePrepared(now int64, lim sluice.Limit, _ int64, cost int) sluice.Result {
	return s.Take(now, lim, cost)
}
