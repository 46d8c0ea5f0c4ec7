package algorithm

import "slices"

// Clone returns a deep copy of the log, so that a test can probe a state
// without disturbing it: a plain struct copy would share the ring buffer.
func (s *SlidingLog) Clone() SlidingLog {
	c := *s
	c.buf = slices.Clone(s.buf)
	return c
}

// BufLen returns the size of the log's ring buffer.
func (s *SlidingLog) BufLen() int { return len(s.buf) }

// ForgetRing makes the next decision recompute the current sub-window's
// index by division, as a state of unknown sub-window length does.
func (s *SlidingBuckets) ForgetRing() { s.tag = 0 }

// Clone returns a deep copy of the state: a plain struct copy would share
// its buffer.
func (s *SlidingMoments) Clone() SlidingMoments {
	c := *s
	if s.n != 0 {
		c.setBuf(slices.Clip(slices.Clone(s.buf())))
	}
	return c
}
