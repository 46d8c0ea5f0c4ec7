//go:build !linux

package main

import "testing"

// openedOnce needs inotify: elsewhere the tests that use it are skipped.
func openedOnce(t *testing.T, path string) <-chan struct{} {
	t.Helper()
	t.Skip("needs inotify (Linux) to tell when the child process opens its config")
	return nil
}
