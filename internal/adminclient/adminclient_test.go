package adminclient

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/daemon"
)

// Each operation becomes its method, path and JSON body: paths escaped,
// queries encoded, LIMIT sent as the JSON given, an override's EXPIRES an
// RFC 3339 time or a duration counted from now.
func TestOperationMapsEachOperationToItsCall(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		args               []string
		method, path, body string
	}{
		{[]string{"peek", "k 1", `{"rate":3}`}, "POST", "/v1/keys/peek", `{"key":"k 1","limit":{"rate":3}}`},
		{[]string{"reset", "k", `{"rate":3}`}, "POST", "/v1/keys/reset", `{"key":"k","limit":{"rate":3}}`},
		{[]string{"peek", "-domain", "web", "-descriptor", "user=alice,path=/x", "-descriptor", "a=b"}, "POST", "/v1/descriptors/peek",
			`{"domain":"web","entries":[{"key":"user","value":"alice"},{"key":"path","value":"/x"},{"key":"a","value":"b"}]}`},
		{[]string{"reset", "-domain", "web", "-descriptor", "user="}, "POST", "/v1/descriptors/reset", `{"domain":"web","entries":[{"key":"user","value":""}]}`},
		{[]string{"set-plan", "pro/x", `{"a.b":{"rate":1}}`}, "PUT", "/v1/plans/pro%2Fx", `{"limits":{"a.b":{"rate":1}}}`},
		{[]string{"assign", "acme", ""}, "PUT", "/v1/tenants/acme/plan", `{"plan":""}`},
		{[]string{"override", "acme", "api.tenant", `{"rate":2}`}, "PUT", "/v1/tenants/acme/overrides/api.tenant", `{"limit":{"rate":2}}`},
		{[]string{"override", "acme", "n", `{"rate":2}`, "72h"}, "PUT", "/v1/tenants/acme/overrides/n", `{"expires":"2026-03-04T12:00:00Z","limit":{"rate":2}}`},
		{[]string{"override", "acme", "n", `{"rate":2}`, "2026-05-01T00:00:00+02:00"}, "PUT", "/v1/tenants/acme/overrides/n", `{"expires":"2026-04-30T22:00:00Z","limit":{"rate":2}}`},
		{[]string{"clear-override", "a b", "n"}, "DELETE", "/v1/tenants/a%20b/overrides/n", "null"},
		{[]string{"usage", "k&x"}, "GET", "/v1/usage?key=k%26x", "null"},
		{[]string{"ledger", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"}, "GET", "/v1/ledger?from=2026-01-01T00%3A00%3A00Z&to=2026-02-01T00%3A00%3A00Z", "null"},
		{[]string{"ledger", "f", "t", "csv"}, "GET", "/v1/ledger?format=csv&from=f&to=t", "null"},
		{[]string{"login"}, "POST", "/v1/login-links", "{}"},
	} {
		call, err := Operation(tt.args, now)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		body, err := json.Marshal(call.Body)
		if err != nil {
			t.Fatal(err)
		}
		if call.Method != tt.method || call.Path != tt.path || string(body) != tt.body {
			t.Errorf("%q: %s %s %s, want %s %s %s", tt.args, call.Method, call.Path, body, tt.method, tt.path, tt.body)
		}
	}
}

// Arguments that name no call are refused, each saying what is wrong.
func TestOperationRefusesArgumentsThatNameNoCall(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"delete", "k"}, `unknown operation "delete"`},
		{[]string{"peek", "k"}, "peek takes 2 to 2 arguments, got 1"},
		{[]string{"ledger", "a", "b", "c", "d"}, "ledger takes 2 to 3 arguments, got 4"},
		{[]string{"login", "x"}, "login takes 0 to 0 arguments"},
		{[]string{"peek", "k", "{rate: 3}"}, "peek: LIMIT is not JSON"},
		{[]string{"set-plan", "p", "["}, "set-plan: LIMITS is not JSON"},
		{[]string{"override", "t", "n", "{"}, "override: LIMIT is not JSON"},
		{[]string{"override", "t", "n", "{}", "-1h"}, `EXPIRES "-1h" is neither`},
		{[]string{"override", "t", "n", "{}", "tomorrow"}, `EXPIRES "tomorrow" is neither`},
		{[]string{"peek", "-domain", "web"}, "give -domain D and -descriptor"},
		{[]string{"peek", "-descriptor", "a=b"}, "give -domain D and -descriptor"},
		{[]string{"reset", "-domain", "web", "-descriptor", "novalue"}, `"novalue": want KEY=VALUE`},
		{[]string{"reset", "-domain", "web", "-descriptor", "=v"}, `"=v": want KEY=VALUE`},
		{[]string{"peek", "-domain", "web", "-descriptor", "a=b", "extra"}, `unexpected argument "extra"`},
		{[]string{"peek", "-nope"}, "peek: flag provided but not defined"},
	} {
		if _, err := Operation(tt.args, time.Now()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error saying %q", tt.args, err, tt.want)
		}
	}
}

// recorded is a request the test server received.
type recorded struct {
	method, path, auth, contentType, body string
}

// apiServer starts a server that records each request and answers with
// status and body.
func apiServer(t *testing.T, status int, body string) (*httptest.Server, *[]recorded) {
	t.Helper()
	var got []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, recorded{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b)})
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

// A call carries the token from the file and its body as JSON; the
// answer's body is copied out as it came, and an answer with no content
// prints "ok".
func TestDoSendsTheTokenAndCopiesTheAnswer(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(" a-long-enough-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, got := apiServer(t, http.StatusOK, `{"remaining":3}`)
	c := &Client{URL: srv.URL + "/", URLSource: "-url", TokenFile: tokenFile, Timeout: 10 * time.Second}
	var out bytes.Buffer
	if err := c.Do(t.Context(), Call{"POST", "/v1/keys/peek", map[string]string{"key": "k"}}, &out); err != nil {
		t.Fatal(err)
	}
	want := recorded{"POST", "/v1/keys/peek", "Bearer a-long-enough-admin-token", "application/json", `{"key":"k"}`}
	if len(*got) != 1 || (*got)[0] != want {
		t.Errorf("the server received %+v, want %+v", *got, want)
	}
	if out.String() != `{"remaining":3}` {
		t.Errorf("printed %q, want the answer as it came", out.String())
	}

	srv, got = apiServer(t, http.StatusNoContent, "")
	t.Setenv(daemon.AdminTokenEnv, "")
	c = &Client{URL: srv.URL, Timeout: 10 * time.Second}
	out.Reset()
	if err := c.Do(t.Context(), Call{"DELETE", "/v1/tenants/a/overrides/n", nil}, &out); err != nil {
		t.Fatal(err)
	}
	want = recorded{"DELETE", "/v1/tenants/a/overrides/n", "", "", ""}
	if len(*got) != 1 || (*got)[0] != want || out.String() != "ok\n" {
		t.Errorf("no token, no body, 204: the server received %+v and %q was printed, want %+v and ok", *got, out.String(), want)
	}
}

// A refusal is an error with the call, the status and the API's message;
// a 404 that is not the API's own says which URL was tried and where it
// came from, as does a call that reached nothing.
func TestDoSaysWhyACallFailedAndWhereItWent(t *testing.T) {
	t.Setenv(daemon.AdminTokenEnv, "")
	srv, _ := apiServer(t, http.StatusBadRequest, `{"error":"rate must be positive"}`)
	c := &Client{URL: srv.URL, URLSource: "-url", Timeout: 10 * time.Second}
	err := c.Do(t.Context(), Call{"PUT", "/v1/plans/p", struct{}{}}, io.Discard)
	if err == nil || err.Error() != "PUT /v1/plans/p: 400 Bad Request: rate must be positive" {
		t.Errorf("a 400 of the API: %v", err)
	}
	if errors.As(err, new(UsageError)) {
		t.Errorf("the API's refusal is a usage error: %v", err)
	}

	srv, _ = apiServer(t, http.StatusNotFound, "404 page not found\n")
	c = &Client{URL: srv.URL, URLSource: URLEnv, Timeout: 10 * time.Second}
	err = c.Do(t.Context(), Call{"GET", "/v1/usage?key=k", nil}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "404 page not found (tried "+srv.URL+"/v1/usage?key=k, "+URLEnv+": no admin API there") {
		t.Errorf("a 404 of another listener: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c = &Client{URL: addr, URLSource: "the default", Timeout: 10 * time.Second}
	err = c.Do(t.Context(), Call{"GET", "/v1/usage?key=k", nil}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "(tried http://"+addr+"/v1/usage?key=k, the default; the admin API is at") {
		t.Errorf("nothing listening: %v", err)
	}
}

// -url takes a port alone (loopback) or host:port, meaning http://; any
// other scheme, or none with no host, is a usage error naming -url.
func TestURLIsAPortHostPortOrAnHTTPURL(t *testing.T) {
	for in, want := range map[string]string{
		"9901": "http://127.0.0.1:9901", ":9901": "http://127.0.0.1:9901", "sluice:9901": "http://sluice:9901",
		"https://sluice:9901/": "https://sluice:9901", "http://[::1]:9901": "http://[::1]:9901",
	} {
		u, err := (&Client{URL: in}).baseURL()
		if err != nil || u.String() != want {
			t.Errorf("-url %q: %v, %v; want %s", in, u, err, want)
		}
	}
	for _, in := range []string{"ftp://sluice:21", "http:///v1", "http://[::1"} {
		_, err := (&Client{URL: in}).baseURL()
		if !errors.As(err, new(UsageError)) || !strings.Contains(err.Error(), "-url") {
			t.Errorf("-url %q: %v, want a usage error naming -url", in, err)
		}
	}
}

// A URL with a scheme and no host, an empty or impossible port, or a query
// or fragment (which the operation's path would be appended after) is a
// usage error naming -url and the value; before, "http://" became
// http://http: (the "a port alone" rule read "http:" as host:port) and
// "http://sluice:" and "sluice:99999" were dialled.
func TestURLWithoutAHostOrAPortIsAUsageError(t *testing.T) {
	for _, in := range []string{"http://", "https://", "http:", "http:/", "http://:9901", "http://sluice:",
		"sluice:", "sluice:99999", "http://sluice:0", "http://sluice:9901?x=1", "http://sluice:9901#f", ""} {
		u, err := (&Client{URL: in}).baseURL()
		if !errors.As(err, new(UsageError)) || !strings.Contains(err.Error(), "-url") || !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("-url %q: %v, %v; want a usage error naming -url and the value", in, u, err)
		}
	}
	// A host without a port is the scheme's port, as URLs say.
	if u, err := (&Client{URL: "https://sluice"}).baseURL(); err != nil || u.String() != "https://sluice" {
		t.Errorf("-url https://sluice: %v, %v; want it as written", u, err)
	}
}

// A URL with a user name or password is refused: Go's client would send it
// as Basic authorization beside the bearer token, to a server that reads
// only the token, and the error does not repeat the password. Before,
// "http://user:pw@sluice:9901" was dialled with both.
func TestURLWithUserInfoIsAUsageErrorThatHidesThePassword(t *testing.T) {
	for _, in := range []string{"http://user@sluice:9901", "https://user:s3cret@sluice:9901", "http://:s3cret@sluice"} {
		u, err := (&Client{URL: in}).baseURL()
		if !errors.As(err, new(UsageError)) || !strings.Contains(err.Error(), "user") {
			t.Errorf("-url %q: %v, %v; want a usage error about the user info", in, u, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("-url %q: the error repeats the password: %v", in, err)
		}
	}
}

// TLS settings that cannot work are usage errors, found before any call:
// -cert without -key, a CA file that is missing or holds no certificate.
func TestDoRefusesTLSSettingsThatCannotWork(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Client{
		"cert without key":  {Cert: "c.pem"},
		"key without cert":  {Key: "k.pem"},
		"missing CA":        {CA: filepath.Join(dir, "none.pem")},
		"CA with no PEM":    {CA: notPEM},
		"missing key pair":  {Cert: filepath.Join(dir, "c.pem"), Key: filepath.Join(dir, "k.pem")},
		"unreadable token":  {TokenFile: filepath.Join(dir, "none")},
		"URL with a scheme": {URL: "ftp://x:1"},
	} {
		c.URL, c.Timeout = cmp.Or(c.URL, "http://127.0.0.1:1"), 10*time.Second
		err := c.Do(t.Context(), Call{"GET", "/v1/usage?key=k", nil}, io.Discard)
		if !errors.As(err, new(UsageError)) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

// serve and the admin command read the token the same way: from the file
// if one is named, else from SLUICE_ADMIN_TOKEN, white space around it
// removed; serve alone refuses a named file that holds nothing and a
// token shorter than 16 bytes.
func TestAdminTokenIsReadAlikeByServeAndTheCommand(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const tok = "0123456789abcdef-token"
	for _, tt := range []struct {
		name, file, env, want string
		serveErr              bool
	}{
		{"file, trimmed", write("tok", "  "+tok+"\n"), "", tok, false},
		{"environment, trimmed", "", "\t" + tok + " ", tok, false},
		{"none", "", "", "", false},
		{"empty file", write("empty", " \n"), "", "", true},
		{"short", write("short", "abc\n"), "", "abc", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(daemon.AdminTokenEnv, tt.env)
			got, err := (&Client{TokenFile: tt.file}).Token(ctx)
			if err != nil || got != tt.want {
				t.Errorf("admin command: %q, %v; want %q", got, err, tt.want)
			}
			b, err := (&daemon.AdminAuth{TokenFile: tt.file}).Token(ctx)
			if tt.serveErr != (err != nil) || err == nil && string(b) != tt.want {
				t.Errorf("serve: %q, %v; want %q (refused: %v)", b, err, tt.want, tt.serveErr)
			}
		})
	}
}

// A URL from SLUICE_ADMIN_URL is named so in its error, not as -url, which
// the caller never gave; and a host without a port (-url localhost) says
// it needs one, rather than "the port is not 1 to 65535".
func TestURLErrorsNameTheSourceAndAskABareHostForAPort(t *testing.T) {
	_, err := (&Client{URL: "http://", URLSource: URLEnv}).baseURL()
	if !errors.As(err, new(UsageError)) || !strings.HasPrefix(err.Error(), URLEnv+` "http://"`) {
		t.Errorf("a bad URL from %s: %v, want a usage error naming %s", URLEnv, err, URLEnv)
	}
	for _, in := range []string{"localhost", "sluice.example"} {
		_, err := (&Client{URL: in, URLSource: "-url"}).baseURL()
		if !errors.As(err, new(UsageError)) || !strings.HasPrefix(err.Error(), `-url "`+in+`"`) || !strings.Contains(err.Error(), "a host needs a port") {
			t.Errorf("-url %q: %v, want a usage error saying a host needs a port", in, err)
		}
	}
}

// -timeout 0 or negative is a usage error before any call, not a call
// that fails with "context deadline exceeded".
func TestDoRefusesATimeoutThatIsNotPositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		err := (&Client{URL: "9901", Timeout: d}).Do(context.Background(), Call{Method: "GET", Path: "/v1/usage"}, io.Discard)
		if !errors.As(err, new(UsageError)) || !strings.Contains(err.Error(), "-timeout") {
			t.Errorf("-timeout %v: %v, want a usage error naming -timeout", d, err)
		}
	}
}
