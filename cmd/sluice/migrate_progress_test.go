package main

import (
	"bytes"
	"strings"
	"testing"
)

// Not on a terminal (a pipe, a file, a log), migrate and migrate prune
// write no bar: stderr holds the error alone.
func TestMigrateWritesNoProgressOffATerminal(t *testing.T) {
	for _, args := range [][]string{
		{"migrate", "-timeout", "5s", "postgres://sluice@127.0.0.1:1/sluice"},
		{"migrate", "prune", "-older-than", "90d", "-timeout", "5s", "postgres://sluice@127.0.0.1:1/sluice"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 1 {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
		if s := out.String() + errb.String(); strings.ContainsAny(s, "\r\033") || strings.Contains(s, "[") && strings.Contains(s, "%") {
			t.Errorf("%v wrote a bar off a terminal: %q", args, s)
		}
	}
}
