package request_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/request"
)

// canonCases are the spellings a client could try, and what each must
// come to. An empty want means malformed (400).
var canonCases = []struct {
	part, in, want string
}{
	// Methods: tokens, upper-cased.
	{"method", "GET", "GET"},
	{"method", "POST", "POST"},
	{"method", "post", "POST"},
	{"method", "pOsT", "POST"},
	{"method", "PROPFIND", "PROPFIND"},
	{"method", "m-search", "M-SEARCH"},
	{"method", "", ""},
	{"method", "PO ST", ""},
	{"method", "POST\r", ""},
	{"method", "GET(", ""},
	{"method", "PÖST", ""},

	// Paths: escapes.
	{"path", "/login", "/login"},
	{"path", "/%6Cogin", "/login"},
	{"path", "/%6cogin", "/login"},
	{"path", "/LOGIN", "/LOGIN"},
	{"path", "/log%69n", "/login"},
	{"path", "/%7Euser", "/~user"},
	{"path", "/a%28b%29", "/a(b)"},
	{"path", "/a(b)", "/a(b)"},
	{"path", "/caf%c3%a9", "/caf%C3%A9"},
	{"path", "/caf\xc3\xa9", "/caf%C3%A9"},
	{"path", "/a%20b", "/a%20b"},
	{"path", "/a b", "/a%20b"},
	{"path", "/a%2Fb", "/a%2Fb"},
	{"path", "/a%2fb", "/a%2Fb"},
	{"path", "/a%25b", "/a%25b"},
	{"path", "/a%3Fb", "/a%3Fb"},
	{"path", "/login%00", ""}, // C, PHP and NGINX stop at a NUL or refuse it
	{"path", "/login\x00", ""},
	{"path", "/%zz", ""},
	{"path", "/%4", ""},
	{"path", "/%", ""},
	// Paths: dot segments.
	{"path", "/./login", "/login"},
	{"path", "/foo/../login", "/login"},
	{"path", "/foo/bar/../../login", "/login"},
	{"path", "/../login", "/login"},
	{"path", "/../../..", "/"},
	{"path", "/%2E/login", "/login"},
	{"path", "/foo/%2e%2e/login", "/login"},
	{"path", "/foo/.%2E/login", "/login"},
	{"path", "/login/.", "/login"},
	{"path", "/login/..", "/"},
	{"path", "/a/.b/..c", "/a/.b/..c"},
	// Paths: slashes.
	{"path", "//login", "/login"},
	{"path", "/api//v1///users", "/api/v1/users"},
	{"path", "/login/", "/login"},
	{"path", "/login//", "/login"},
	{"path", "/", "/"},
	{"path", "//", "/"},
	{"path", "/%2F", "/"}, // ServeMux reads a last segment %2F as a trailing slash
	{"path", "/%2f/", "/"},
	{"path", "/login/%2F", "/login"},
	{"path", "/login/%2F/%2F", "/login"},
	{"path", "/login/%2F/x/..", "/login"},
	{"path", "/login%2F", "/login%2F"},
	{"path", "/%2F/login", "/%2F/login"},
	{"path", "", "/"},
	{"path", "login", ""},
	{"path", "*", ""},

	// Hosts.
	{"host", "api.example.com", "api.example.com"},
	{"host", "API.Example.COM", "api.example.com"},
	{"host", "api.example.com.", "api.example.com"},
	{"host", "api.example.com:8080", "api.example.com"},
	{"host", "api.example.com.:443", "api.example.com"},
	{"host", "api.example.com:", "api.example.com"},
	{"host", "my_host-1.internal", "my_host-1.internal"},
	{"host", "192.0.2.1:80", "192.0.2.1"},
	{"host", "[2001:db8::1]", "[2001:db8::1]"},
	{"host", "[2001:DB8:0::1]:8443", "[2001:db8::1]"},
	{"host", "[::1]", "[::1]"},
	{"host", "api.example.com..", ""},
	{"host", "api..example.com", ""},
	{"host", ".api.example.com", ""},
	{"host", ".", ""},
	{"host", "api.example.com:http", ""},
	{"host", "api.example.com:65536", ""},
	{"host", "api.example.com:123456", ""},
	{"host", "api example.com", ""},
	{"host", "api.example.com/x", ""},
	{"host", "api%2Eexample.com", ""},
	{"host", "::1", ""},
	{"host", "[::1", ""},
	{"host", "[fe80::1%25eth0]", ""},
	{"host", "[192.0.2.1]", ""},
	{"host", "[::1]x", ""},
}

// Every spelling in the table comes to its canonical form, or is
// malformed with an error that wraps ErrMalformed; and the form is a fixed
// point.
func TestCanonicalForms(t *testing.T) {
	if len(canonCases) < 40 {
		t.Fatalf("%d cases, want at least 40", len(canonCases))
	}
	for _, tc := range canonCases {
		var f func(string) (string, error)
		switch tc.part {
		case "method":
			f = request.Method
		case "path":
			f = request.Path
		case "host":
			f = request.Host
		}
		got, err := f(tc.in)
		switch {
		case tc.want == "" && err == nil && !(tc.part == "host" && tc.in == ""):
			t.Errorf("%s %q = %q, want malformed", tc.part, tc.in, got)
		case tc.want == "" && err != nil && !errors.Is(err, request.ErrMalformed):
			t.Errorf("%s %q: error %v does not wrap ErrMalformed", tc.part, tc.in, err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%s %q = %q, %v; want %q", tc.part, tc.in, got, err, tc.want)
		case tc.want != "":
			if again, err := f(got); err != nil || again != got {
				t.Errorf("%s %q: canonicalising %q again gives %q, %v", tc.part, tc.in, got, again, err)
			}
		}
	}
}

// The login spellings of the issue all come to one form, so no spelling
// is a fresh allowance.
func TestLoginSpellingsAreOneRequest(t *testing.T) {
	want := request.Canonical{Method: "POST", Host: "api.example.com", Path: "/login"}
	for _, sp := range [][3]string{
		{"POST", "/login", "api.example.com"},
		{"post", "/login", "api.example.com"},
		{"pOsT", "/login", "API.example.com"},
		{"POST", "/%6Cogin", "api.example.com."},
		{"POST", "//login", "api.example.com:8080"},
		{"POST", "/./login", "api.example.com"},
		{"POST", "/login/", "api.example.com"},
		{"POST", "/foo/../login", "api.example.com"},
		{"POST", "/foo/%2e%2E/login//", "Api.Example.Com.:80"},
	} {
		got, err := request.New(sp[0], sp[1], sp[2])
		if err != nil || got != want {
			t.Errorf("New%q = %+v, %v; want %+v", sp, got, err, want)
		}
	}
	if _, err := request.New("POST", "/login", "api.example.com.."); err == nil {
		t.Error("two trailing dots: no error")
	}
}

// DecodeSlashes reads %2F as a slash, and the result is canonical.
func TestDecodeSlashes(t *testing.T) {
	for in, want := range map[string]string{
		"/login":            "/login",
		"/admin%2Fx":        "/admin/x",
		"/login%2F":         "/login",
		"/foo%2F..%2Flogin": "/login",
		"/%2F%2F":           "/",
		"/a%2Fb%20c":        "/a/b%20c",
	} {
		if got := request.DecodeSlashes(in); got != want {
			t.Errorf("DecodeSlashes(%q) = %q, want %q", in, got, want)
		}
	}
}

// Of finds the form stored in the context, and computes it otherwise.
func TestOfUsesTheStoredForm(t *testing.T) {
	r := httptest.NewRequest("post", "/a//b/", nil)
	r.Host = "X.example"
	c, err := request.Of(r)
	if want := (request.Canonical{Method: "POST", Host: "x.example", Path: "/a/b"}); err != nil || c != want {
		t.Fatalf("Of = %+v, %v; want %+v", c, err, want)
	}
	stored := request.Canonical{Method: "GET", Host: "h", Path: "/stored"}
	r = r.WithContext(request.NewContext(r.Context(), stored))
	if c, err := request.Of(r); err != nil || c != stored {
		t.Fatalf("Of with a stored form = %+v, %v", c, err)
	}
	if request.FromContext(httptest.NewRequest("GET", "/", nil).Context()) != nil {
		t.Fatal("FromContext of a plain request is not nil")
	}
}

// The form of a request that is already canonical costs no allocation.
func TestCanonicalFormDoesNotAllocate(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/api/v1/users/42", nil)
	r.Host = "api.example.com:8080"
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := request.FromRequest(r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per canonical request, want 0", allocs)
	}
}

func BenchmarkCanonical(b *testing.B) {
	for _, bc := range []struct{ name, method, path, host string }{
		{"canonical", "GET", "/api/v1/users/42", "api.example.com"},
		{"port", "GET", "/api/v1/users/42", "api.example.com:8080"},
		{"spelled", "post", "/api//v1/./users/%34%32/", "API.example.com."},
		{"ipv6", "GET", "/x", "[2001:db8::1]:443"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := request.New(bc.method, bc.path, bc.host); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
