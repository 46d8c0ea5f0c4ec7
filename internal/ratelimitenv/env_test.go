package ratelimitenv

import (
	"os"
	"testing"
)

// unsetenv unsets name for the rest of the test, restoring it after.
func unsetenv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "")
	os.Unsetenv(name)
}
