package algorithm

import (
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// LogEntries is K, the sliding log's entry budget: a log whose rate is above
// K keeps at most K+1 entries, whatever its rate and costs, by merging the
// units of one Period/K slot of time into one entry.
const LogEntries = 64

// maxLogEntries bounds the ring of every log, even across a change of limit
// or a clock that steps back (see SlidingLog).
const maxLogEntries = LogEntries + 1

// logEntry is one entry of a sliding log: n units, the latest logged at at.
type logEntry struct {
	at int64 // Unix nanoseconds
	n  int64
}

// SlidingLog is the sliding log: a ring of (instant, count) entries, oldest
// first, with strictly increasing instants. A request of cost c at now is
// admitted when the units logged in (now−Period, now] plus c are at most
// Rate, and is then logged as one entry of c units, or added to the newest
// entry. So no window of length Period ever holds more than Rate units, and
// a decision is O(entries) work, never O(cost).
//
// When Rate ≤ LogEntries the log is exact: only units of the same instant
// share an entry (there are at most Rate entries). Above, time is cut into
// epoch-aligned slots of LogResolution(lim) = ⌈Period/LogEntries⌉, and the
// units admitted within one slot share an entry stamped with the latest of
// their instants, so that none of them leaves the window earlier than it
// would in the exact log: the log is conservative, and holds a unit at most
// one slot (1/64 of the period) longer than the exact log would. At most
// LogEntries+1 slots meet a window, so a log holds at most LogEntries+1
// entries of 16 bytes, about 1 KB, whatever the rate and the costs.
//
// An entry leaves the window whole, when its latest unit does: RetryAfter is
// the time until enough of the oldest entries have left for the request to
// fit, Remaining is Rate minus the units logged, ResetAfter the time until
// the newest entry leaves; all three are exact for the log as it is kept. A
// Refund removes units from the oldest entries, which is conservative (see
// Refund). If the limit changes, or the clock steps back, and more than
// LogEntries+1 entries would meet, the two oldest are merged into one
// stamped with the later instant: still conservative, and the bound holds.
type SlidingLog struct {
	buf  []logEntry // ring of entries
	head int32      // index of the oldest entry
	n    int32      // number of entries
	sum  int64      // units in the entries
	// until is the instant the newest entry leaves the window.
	until int64
}

// LogResolution returns the slot of time, in nanoseconds, within which a
// sliding log under lim merges the units it admits into one entry: 1 (only
// the same instant) when lim.Rate ≤ LogEntries, else ⌈Period/LogEntries⌉.
func LogResolution(lim sluice.Limit) int64 {
	if lim.Rate <= LogEntries {
		return 1
	}
	return (int64(lim.Period)-1)/LogEntries + 1
}

// Len returns the number of logged units.
func (s *SlidingLog) Len() int { return int(s.sum) }

// Bytes returns the heap bytes the log holds now beyond the SlidingLog value
// itself: its ring of entries, at most (LogEntries+1)·16 bytes.
func (s *SlidingLog) Bytes() int { return cap(s.buf) * int(unsafe.Sizeof(logEntry{})) }

// entry returns the i-th entry, oldest first.
func (s *SlidingLog) entry(i int32) *logEntry {
	j := s.head + i
	if j >= int32(len(s.buf)) {
		j -= int32(len(s.buf))
	}
	return &s.buf[j]
}

// expire drops the entries at or before cut.
func (s *SlidingLog) expire(cut int64) {
	for s.n > 0 && s.buf[s.head].at <= cut {
		s.dropOldest()
	}
	if s.n == 0 {
		s.head, s.sum = 0, 0
	}
}

// dropOldest removes the oldest entry and its units; the log is not empty.
func (s *SlidingLog) dropOldest() {
	s.sum -= s.buf[s.head].n
	s.head++
	if s.head == int32(len(s.buf)) {
		s.head = 0
	}
	s.n--
}

// Take decides a request of cost units at now and logs them if admitted.
func (s *SlidingLog) Take(now int64, lim sluice.Limit, cost int) sluice.Result {
	p, rate, c := int64(lim.Period), int64(lim.Rate), int64(cost)
	at := now // the instant logged: never before the newest, so the log stays sorted if the clock steps back
	if s.n > 0 {
		at = max(now, s.entry(s.n-1).at)
	}
	s.expire(now - p)
	var res sluice.Result
	if s.sum+c > rate {
		// Wait until enough of the oldest entries have left the window.
		// need ≤ sum, since cost ≤ rate.
		need, i := s.sum+c-rate, int32(0)
		for ; need > s.entry(i).n; i++ {
			need -= s.entry(i).n
		}
		res.RetryAfter = time.Duration(s.entry(i).at + p - now)
		res.Remaining = int(max(rate-s.sum, 0))
		res.ResetAfter = time.Duration(s.entry(s.n-1).at + p - now)
		return res
	}
	s.add(at, c, LogResolution(lim), rate)
	s.until = at + p
	res.Allowed = true
	res.Remaining = int(rate - s.sum)
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
	i, sum := int32(0), s.sum
	for ; i < s.n && s.entry(i).at <= now-p; i++ {
		sum -= s.entry(i).n
	}
	var res sluice.Result
	if i == s.n {
		res.Allowed, res.Remaining = true, int(rate)
		return res
	}
	res.ResetAfter = time.Duration(s.entry(s.n-1).at + p - now)
	if sum > rate {
		// Over a limit lowered since: wait until enough old entries leave.
		need := sum - rate
		for ; need > s.entry(i).n; i++ {
			need -= s.entry(i).n
		}
		// The entry that brings the sum to the limit leaves at its instant
		// plus p; the next one keeps it there.
		res.RetryAfter = time.Duration(s.entry(i).at + p - now)
		return res
	}
	res.Allowed = true
	res.Remaining = int(rate - sum)
	return res
}

// add logs c units at at, which is no earlier than the newest entry: into
// the newest entry if it lies in the same slot of length res, else as a new
// entry, growing the ring up to maxLogEntries (up to rate entries for an
// exact log, which holds no more under its limit).
func (s *SlidingLog) add(at, c, res, rate int64) {
	s.sum += c
	if s.n > 0 {
		last := s.entry(s.n - 1)
		if last.at == at || res > 1 && floorDiv(last.at, res) == floorDiv(at, res) {
			last.at, last.n = at, last.n+c
			return
		}
	}
	if s.n == maxLogEntries {
		// Only after a change of limit or a clock that stepped back: merge
		// the two oldest entries, keeping the later instant.
		old := s.buf[s.head].n
		s.head++
		if s.head == int32(len(s.buf)) {
			s.head = 0
		}
		s.n--
		s.buf[s.head].n += old
	}
	if int(s.n) == len(s.buf) {
		size := min(max(2*len(s.buf), 4), maxLogEntries)
		if rate <= LogEntries {
			size = min(size, max(int(rate), int(s.n)+1))
		}
		buf := make([]logEntry, size)
		for i := range s.n {
			buf[i] = *s.entry(i)
		}
		s.buf, s.head = buf, 0
	}
	s.n++
	*s.entry(s.n - 1) = logEntry{at: at, n: c}
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
	c := int64(cost)
	for c > 0 && s.n > 0 {
		first := &s.buf[s.head]
		if first.n > c {
			first.n -= c
			s.sum -= c
			break
		}
		c -= first.n
		s.dropOldest()
	}
	if s.n == 0 {
		s.head, s.sum, s.until = 0, 0, 0
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
