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
// its buffer. The copy's buffer has the original's capacity, so that Bytes
// and every field but the pointer are equal.
func (s *SlidingMoments) Clone() SlidingMoments {
	c := *s
	if s.n != 0 {
		b := make([]byte, s.n, s.c)
		copy(b, s.buf())
		c.setBuf(b)
	}
	return c
}

// Contents returns the state as reflect.DeepEqual should compare it: its
// fields and its whole buffer. Compared as it is, a state's pointer
// stands for the first byte of its buffer only.
func (s *SlidingMoments) Contents() any {
	type contents struct {
		State SlidingMoments
		Buf   []byte
	}
	c := *s
	c.p = nil
	return contents{c, slices.Clone(s.buf())}
}
