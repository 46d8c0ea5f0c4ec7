package algorithm

import (
	"time"

	"github.com/sluicehq/sluice"
)

// SlidingLog is the exact sliding window: a ring of one timestamp per
// admitted unit, oldest first. A request of cost c at now is admitted when the
// units logged in (now−Period, now] plus c are at most Rate, so no window of
// length Period ever holds more than Rate units. The ring never holds more
// than Rate entries: memory is 8·Rate bytes per key at most, and a decision
// allocates only while the ring grows towards that size.
type SlidingLog struct {
	buf  []int64 // ring buffer of timestamps
	head int     // index of the oldest entry
	n    int     // number of entries
	// until is the instant the newest entry leaves the window.
	until int64
}

// Len returns the number of logged units.
func (s *SlidingLog) Len() int { return s.n }

func (s *SlidingLog) at(i int) int64 { return s.buf[(s.head+i)%len(s.buf)] }

// expire drops the entries at or before cut.
func (s *SlidingLog) expire(cut int64) {
	for s.n > 0 && s.buf[s.head] <= cut {
		s.head++
		if s.head == len(s.buf) {
			s.head = 0
		}
		s.n--
	}
	if s.n == 0 {
		s.head = 0
	}
}

// newest returns the latest logged timestamp; the log must not be empty.
func (s *SlidingLog) newest() int64 { return s.at(s.n - 1) }

// Take decides a request of cost units at now and logs them if admitted.
func (s *SlidingLog) Take(now int64, lim sluice.Limit, cost int) sluice.Result {
	p, rate := int64(lim.Period), lim.Rate
	at := now // the instant logged: never before the newest, so the log stays sorted if the clock steps back
	if s.n > 0 {
		at = max(now, s.newest())
	}
	s.expire(now - p)
	var res sluice.Result
	if s.n+cost > rate {
		// Wait until the k-th oldest entry leaves the window.
		k := s.n + cost - rate
		res.RetryAfter = time.Duration(s.at(k-1) + p - now)
		res.Remaining = max(rate-s.n, 0)
		res.ResetAfter = time.Duration(s.newest() + p - now)
		return res
	}
	s.push(at, cost, rate)
	s.until = at + p
	res.Allowed = true
	res.Remaining = rate - s.n
	res.ResetAfter = time.Duration(at + p - now)
	return res
}

// push appends cost copies of ts, growing the ring up to rate entries.
func (s *SlidingLog) push(ts int64, cost, rate int) {
	if s.n+cost > len(s.buf) {
		size := min(max(2*len(s.buf), s.n+cost, 4), rate)
		buf := make([]int64, size)
		for i := 0; i < s.n; i++ {
			buf[i] = s.at(i)
		}
		s.buf, s.head = buf, 0
	}
	for range cost {
		s.buf[(s.head+s.n)%len(s.buf)] = ts
		s.n++
	}
}

// Refund removes the cost newest entries, as if they had never been logged.
func (s *SlidingLog) Refund(now int64, lim sluice.Limit, cost int) {
	s.expire(now - int64(lim.Period))
	s.n = max(s.n-cost, 0)
	if s.n == 0 {
		s.head, s.until = 0, 0
	} else {
		s.until = s.newest() + int64(lim.Period)
	}
}

// Expires returns the instant at which the newest entry leaves the window.
func (s *SlidingLog) Expires() int64 { return s.until }
