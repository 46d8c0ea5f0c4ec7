package admin_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/admin"
)

// spec reads docs/admin-openapi.yaml: for each "METHOD /path", the status
// codes its responses document.
func spec(t *testing.T) map[string]map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/admin-openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string `yaml:"openapi"`
		Paths   map[string]map[string]yaml.Node
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("docs/admin-openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q, want 3.x", doc.OpenAPI)
	}
	out := map[string]map[string]bool{}
	for path, ops := range doc.Paths {
		for method, node := range ops {
			if method == "parameters" {
				continue
			}
			var op struct {
				Responses map[string]yaml.Node
			}
			if err := node.Decode(&op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			codes := map[string]bool{}
			for c := range op.Responses {
				codes[c] = true
			}
			out[strings.ToUpper(method)+" "+path] = codes
		}
	}
	return out
}

// The OpenAPI description and the handlers agree: every path and method of
// the spec is a route of the API and every route is in the spec.
func TestOpenAPIDescribesEveryRouteAndNoOther(t *testing.T) {
	s := spec(t)
	api := admin.New(admin.Config{})
	var routes, described []string
	for _, r := range api.Routes() {
		routes = append(routes, r)
		if s[r] == nil {
			t.Errorf("route %s is not in docs/admin-openapi.yaml", r)
		}
	}
	for r := range s {
		described = append(described, r)
	}
	sort.Strings(routes)
	sort.Strings(described)
	if strings.Join(routes, "\n") != strings.Join(described, "\n") {
		t.Errorf("routes:\n%s\nspec:\n%s", strings.Join(routes, "\n"), strings.Join(described, "\n"))
	}
}

// Every status a route answers, over calls that provoke each answer
// (refusals, malformed bodies, success, a missing plan or override, a part
// not configured), is documented for that operation.
func TestOpenAPIDocumentsEveryStatusTheHandlersAnswer(t *testing.T) {
	s := spec(t)
	full := newFixture(t, admin.Config{MaxBodyBytes: 512})
	bare := httptest.NewServer(admin.New(admin.Config{Token: []byte(token), Limiter: noPeek{}, Logger: slog.New(slog.DiscardHandler)}))
	defer bare.Close()
	seen := map[string]map[int]bool{}
	contentType := "application/json"
	send := func(base, op, method, path, auth, body string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if body != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if seen[op] == nil {
			seen[op] = map[int]bool{}
		}
		seen[op][resp.StatusCode] = true
	}
	ops := full.api.Routes()
	for i, c := range calls {
		op := ops[i]
		for _, auth := range []string{"", "Bearer nope", "Bearer " + token} {
			send(full.srv.URL, op, c.method, c.path, auth, c.body)
		}
		send(bare.URL, op, c.method, c.path, "Bearer "+token, c.body)
		if c.body != "" {
			send(full.srv.URL, op, c.method, c.path, "Bearer "+token, "{")
			send(full.srv.URL, op, c.method, c.path, "Bearer "+token, `{"x":"`+strings.Repeat("y", 600)+`"}`)
			contentType = "text/plain"
			send(full.srv.URL, op, c.method, c.path, "Bearer "+token, c.body)
			contentType = "application/json"
		}
	}
	send(full.srv.URL, ops[3], "PUT", "/v1/tenants/acme/plan", "Bearer "+token, `{"plan":"missing"}`)
	send(full.srv.URL, ops[5], "DELETE", "/v1/tenants/acme/overrides/missing", "Bearer "+token, "")
	send(full.srv.URL, ops[6], "GET", "/v1/usage", "Bearer "+token, "")
	send(full.srv.URL, ops[7], "GET", "/v1/ledger?from=x", "Bearer "+token, "")
	send(full.srv.URL, ops[8], "POST", "/v1/descriptors/peek", "Bearer "+token, `{"domain":"web","entries":[{"key":"nobody","value":"x"}]}`)
	send(full.srv.URL, ops[9], "POST", "/v1/descriptors/reset", "Bearer "+token, `{"domain":"web","entries":[]}`)
	for op, codes := range seen {
		for c := range codes {
			if !s[op][strconv.Itoa(c)] {
				t.Errorf("%s answers %d, which docs/admin-openapi.yaml does not document", op, c)
			}
		}
	}
	if len(seen) != len(ops) {
		t.Errorf("exercised %d routes of %d", len(seen), len(ops))
	}
}
