package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{nil, 0, "Usage:", ""},
		{[]string{"help"}, 0, "Commands:", ""},
		{[]string{"version"}, 0, "sluice ", ""},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(tt.args, &out, &errb)
		if code != tt.code {
			t.Errorf("run(%q) = %d, want %d", tt.args, code, tt.code)
		}
		if !strings.Contains(out.String(), tt.inStdout) {
			t.Errorf("run(%q) stdout = %q, want it to contain %q", tt.args, out.String(), tt.inStdout)
		}
		if !strings.Contains(errb.String(), tt.inStderr) {
			t.Errorf("run(%q) stderr = %q, want it to contain %q", tt.args, errb.String(), tt.inStderr)
		}
	}
}
