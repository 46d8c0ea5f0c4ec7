package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// flagNameRE matches a flag line of a command's -h: two spaces, the name.
var flagNameRE = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)

// TestEveryFlagIsDocumented: each flag a command accepts has a row (or at
// least a mention as `-name`) in the command's page, so that a flag added
// without its documentation fails here instead of going unnoticed.
func TestEveryFlagIsDocumented(t *testing.T) {
	for cmd, page := range map[string]string{
		"serve": "../../docs/serve.md",
		"proxy": "../../docs/proxy.md",
	} {
		var out, errb bytes.Buffer
		if code := run([]string{cmd, "-h"}, &out, &errb); code != 0 {
			t.Fatalf("sluice %s -h = %d: %s", cmd, code, errb.String())
		}
		help := out.String() + errb.String()
		names := flagNameRE.FindAllStringSubmatch(help, -1)
		if len(names) < 5 {
			t.Fatalf("sluice %s -h lists %d flags; the pattern no longer matches its help:\n%s", cmd, len(names), help)
		}
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range names {
			if !strings.Contains(string(doc), "`-"+m[1]) {
				t.Errorf("%s: sluice %s's flag -%s is not documented (no `-%s` in the page)", page, cmd, m[1], m[1])
			}
		}
	}
}
