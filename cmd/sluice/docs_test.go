package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
)

// docBlock is a fenced YAML block of a markdown file.
type docBlock struct {
	file string
	line int    // of the opening fence
	kind string // "proxy", "service" or "fragment"
	text string
}

// markerRE is the HTML comment that says what the next YAML block is:
// <!-- fragment --> (or <!-- fragment: why -->) for a block that is parsed
// as YAML only, <!-- proxy --> for a proxy config outside docs/proxy.md.
var markerRE = regexp.MustCompile(`^<!--\s*(fragment|proxy)\b.*-->$`)

// yamlBlocks returns the ```yaml blocks of the markdown file name. A block
// is a proxy config in docs/proxy.md, a service config elsewhere, unless
// the last non-blank line before it is a marker.
func yamlBlocks(t *testing.T, name string) []docBlock {
	t.Helper()
	var out []docBlock
	for _, f := range fences(t, name) {
		if f.lang != "yaml" && f.lang != "yml" {
			continue
		}
		kind := "service"
		if m := markerRE.FindStringSubmatch(f.before); m != nil {
			kind = m[1]
		} else if filepath.Base(name) == "proxy.md" {
			kind = "proxy"
		}
		out = append(out, docBlock{file: name, line: f.line, kind: kind, text: f.text})
	}
	return out
}

// fence is a fenced code block of a markdown file.
type fence struct {
	line   int    // of the opening fence, from 1
	lang   string // the word after the opening fence
	before string // the last non-blank line before it, trimmed; "" just after another block
	text   string // the lines between the fences, each ending in a newline
}

// fences returns the fenced code blocks of the markdown file name, in
// order; a block that is never closed fails the test. The YAML and the Go
// blocks' tests read the markdown through it, each with its own marker
// (an HTML comment on the last non-blank line before a block).
func fences(t *testing.T, name string) []fence {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []fence
	before := ""
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "```") {
			if l != "" {
				before = l
			}
			continue
		}
		start := i
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: a code block is never closed", name, start+1)
		}
		lang := strings.TrimSpace(strings.TrimPrefix(l, "```"))
		out = append(out, fence{line: start + 1, lang: lang, before: before, text: strings.Join(body, "\n") + "\n"})
		before = ""
	}
	return out
}

// docFiles are the markdown files whose configs must load.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, files...)
}

// Every YAML block of README.md and docs/*.md that shows a config loads:
// a proxy config as `sluice proxy -check` loads it (so that a reference
// config cannot fail its own -check), a service config through package
// config. A block marked <!-- fragment --> must still be YAML.
func TestDocsConfigsLoad(t *testing.T) {
	seen := map[string]int{}
	for _, name := range docFiles(t) {
		for _, b := range yamlBlocks(t, name) {
			seen[b.kind]++
			where := fmt.Sprintf("%s:%d", b.file, b.line)
			t.Run(strings.TrimPrefix(where, "../../"), func(t *testing.T) {
				switch b.kind {
				case "fragment":
					var v any
					if err := yaml.Unmarshal([]byte(b.text), &v); err != nil {
						t.Fatalf("%s: a fragment that is not YAML: %v", where, err)
					}
				case "proxy":
					f, err := gateway.ParseFile(where, []byte(b.text))
					if err != nil {
						t.Fatalf("the proxy config does not load: %v", err)
					}
					var out, errb bytes.Buffer
					if code := checkProxy(f, &out, &errb); code != 0 {
						t.Fatalf("proxy -check fails: %s", errb.String())
					}
				case "service":
					d, err := config.Parse(where, []byte(b.text))
					if err != nil {
						t.Fatalf("the service config does not load: %v", err)
					}
					if _, err := config.New(d); err != nil {
						t.Fatalf("the service config is refused: %v", err)
					}
				}
			})
		}
	}
	if seen["proxy"] == 0 || seen["service"] == 0 {
		t.Fatalf("found %v blocks: the docs lost their example configs, or this test its way to them", seen)
	}
}

// The test's reading of markdown: markers, languages and kinds.
func TestDocsYAMLBlocks(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "proxy.md")
	os.WriteFile(md, []byte("text\n\n```yaml\na: 1\n```\n\n<!-- fragment: only a part -->\n\n```yaml\nb: 2\n```\n\n<!-- fragment -->\nnot a block\n```yaml\nc: 3\n```\n```sh\nx\n```\n"), 0o644)
	got := yamlBlocks(t, md)
	if len(got) != 3 || got[0].kind != "proxy" || got[1].kind != "fragment" || got[2].kind != "proxy" || got[1].text != "b: 2\n" || got[0].line != 3 {
		t.Fatalf("blocks %+v", got)
	}
}
