package gateway

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every key the proxy file accepts appears in docs/proxy.md's reference
// config (as "key:"), so that no key is accepted and undocumented.
func TestEveryFileKeyDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/proxy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "```yaml\n")
	end := strings.Index(doc[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("docs/proxy.md has no reference config")
	}
	ref := doc[start : start+8+end]
	for what, keys := range map[string][]string{
		"the file": fileKeys, "an upstream": upstreamKeys, "a limit": limitKeys,
		"a conn limit": connKeys, "a route": routeKeys, "a route's limit": routeLimitKeys,
	} {
		for _, k := range keys {
			if !regexp.MustCompile(`[\s{,#]` + regexp.QuoteMeta(k) + `:`).MatchString(ref) {
				t.Errorf("key %q of %s is not in docs/proxy.md's reference config", k, what)
			}
		}
	}
}
