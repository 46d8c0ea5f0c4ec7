package sluice_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestBadInputErrorsMatchErrBadInput: every bad-input error, bare or
// wrapped, matches the one sentinel, keeps its own identity and message, and
// a store's failure does not match it.
func TestBadInputErrorsMatchErrBadInput(t *testing.T) {
	for _, e := range []error{sluice.ErrInvalidLimit, sluice.ErrInvalidCost, sluice.ErrCostExceedsCapacity, sluice.ErrInvalidKey} {
		w := fmt.Errorf("store: %w", e)
		if !errors.Is(e, sluice.ErrBadInput) || !errors.Is(w, sluice.ErrBadInput) || !errors.Is(w, e) {
			t.Errorf("%v: does not match ErrBadInput or itself when wrapped", e)
		}
	}
	if err := sluice.Check("", sluice.Limit{}, 1); !errors.Is(err, sluice.ErrBadInput) {
		t.Errorf("Check of an empty key: %v, want ErrBadInput", err)
	}
	if sluice.ErrInvalidKey.Error() != "sluice: invalid key" {
		t.Errorf("message %q changed", sluice.ErrInvalidKey.Error())
	}
	for _, e := range []error{sluice.ErrUnavailable, errors.New("connection refused"), nil} {
		if errors.Is(e, sluice.ErrBadInput) {
			t.Errorf("%v matches ErrBadInput", e)
		}
	}
}
