package algorithm_test

import "github.com/sluicehq/sluice/algorithm"

// logBytes is what a log holds on the heap.
func logBytes(s *algorithm.SlidingLog) int { return s.Bytes() }
