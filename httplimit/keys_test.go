package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
)

// A header key is what the handler behind the limit sees, whatever the
// client sends: with two X-API-Key lines the key is the first and the
// handler sees only that one (an application that reads the last line, as
// a WSGI or PHP one may, would otherwise get a key the limit never
// counted), and a header whose name differs only by "_" for "-"
// (X_API_Key, which WSGI and CGI read as X-API-Key) is removed, keyed or
// not.
func TestHeaderKeyIsWhatTheHandlerSees(t *testing.T) {
	key := httplimit.Header("X-API-Key")
	cases := []struct {
		name  string
		lines [][2]string
		key   string
		ok    bool
		after []string // X-API-Key's values afterwards
	}{
		{"one", [][2]string{{"X-API-Key", "k1"}}, "k1", true, []string{"k1"}},
		{"two lines", [][2]string{{"X-API-Key", "rotating"}, {"X-API-Key", "k1"}}, "rotating", true, []string{"rotating"}},
		{"empty first", [][2]string{{"X-API-Key", ""}, {"X-API-Key", "k1"}}, "", false, []string{""}},
		{"underscore only", [][2]string{{"X_API_KEY", "k1"}}, "", false, nil},
		{"underscore beside", [][2]string{{"X-API-Key", "r1"}, {"X_Api_Key", "k1"}}, "r1", true, []string{"r1"}},
		{"underscore, mixed", [][2]string{{"X-Api_key", "k1"}}, "", false, nil},
	}
	// A configured name with "_" is kept, its "-" spelling removed.
	r := httptest.NewRequest("GET", "/", nil)
	r.Header["X_token"] = []string{"t1"}
	r.Header["X-Token"] = []string{"t2"}
	if k, ok := httplimit.Header("X_Token")(r); k != "t1" || !ok || len(r.Header) != 1 {
		t.Errorf("header:X_Token: key %q, %v, headers %v; want t1 and X_token alone", k, ok, r.Header)
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		for _, l := range c.lines {
			name := http.CanonicalHeaderKey(l[0]) // as the server stores it
			r.Header[name] = append(r.Header[name], l[1])
		}
		k, ok := key(r)
		if k != c.key || ok != c.ok {
			t.Errorf("%s: key %q, %v; want %q, %v", c.name, k, ok, c.key, c.ok)
		}
		if got := r.Header.Values("X-API-Key"); !slices.Equal(got, c.after) {
			t.Errorf("%s: the handler sees X-API-Key %q, want %q", c.name, got, c.after)
		}
		for name := range r.Header {
			if name != "X-Api-Key" {
				t.Errorf("%s: the handler still sees %s", c.name, name)
			}
		}
	}
}
