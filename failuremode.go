package sluice

import (
	"fmt"
	"strconv"
)

// FailureMode says what is done with a request while the store that
// decides it fails: the vocabulary of package failsafe (failsafe.Mode),
// of a rule's failure_mode (package config) and of the -failure-mode flag.
// The zero value is FailOpen.
type FailureMode uint8

const (
	// FailOpen admits the request.
	FailOpen FailureMode = iota
	// FailClosed denies the request with an error wrapping ErrUnavailable.
	FailClosed
	// FailLocal decides the request in the process, on a local store,
	// under a share of the limit.
	FailLocal
)

// failureModeNames are the modes' names, by value.
var failureModeNames = [...]string{FailOpen: "open", FailClosed: "closed", FailLocal: "local"}

// String returns "open", "closed" or "local".
func (m FailureMode) String() string {
	if int(m) < len(failureModeNames) {
		return failureModeNames[m]
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseFailureMode returns the FailureMode named s, "open", "closed" or
// "local" (in lower case, as written in configs and flags), or an error
// naming the three.
func ParseFailureMode(s string) (FailureMode, error) {
	for m, name := range failureModeNames {
		if s == name {
			return FailureMode(m), nil
		}
	}
	return 0, fmt.Errorf("unknown failure mode %q (want open, closed or local)", s)
}
