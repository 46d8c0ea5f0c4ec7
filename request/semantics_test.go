package request_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/request"
)

// upstreamReadsAsLogin says, for each spelling a client could try, which
// semantics' upstreams serve it as "/login" (see the PathSemantics
// constants for the servers each stands for).
var upstreamReadsAsLogin = []struct {
	target string
	as     []request.PathSemantics // the semantics under which it is /login
}{
	{"/login", all},
	{"/LOGIN", folding},
	{"/Login", folding},
	{"/login;x", []request.PathSemantics{request.PathServlet}},
	{"/login;jsessionid=ABC", []request.PathSemantics{request.PathServlet}},
	{"/login%3Bx", []request.PathSemantics{request.PathServlet}},
	{"/login%20", []request.PathSemantics{request.PathIIS, request.PathServlet}},
	{"/login%09", []request.PathSemantics{request.PathServlet}},
	{"/login.", []request.PathSemantics{request.PathIIS}},
	{"/login.%20.", []request.PathSemantics{request.PathIIS}},
	{"/x%5C..%5Clogin", []request.PathSemantics{request.PathIIS}},
	{"/x/..;y/login", []request.PathSemantics{request.PathServlet}},
	{"/LOGIN;x", nil}, // servlet mappings are case-sensitive
	{"/%4C%4fGIN", folding},
	{"/log%20in", nil},
	{"/login2", nil},
	{"/logi", nil},
	{"/;x/login", []request.PathSemantics{request.PathServlet}},
}

var (
	all     = []request.PathSemantics{request.PathStrict, request.PathCaseInsensitive, request.PathIIS, request.PathServlet}
	folding = []request.PathSemantics{request.PathCaseInsensitive, request.PathIIS}
)

func TestPathSemanticsFoldExactlyWhatTheUpstreamFolds(t *testing.T) {
	for _, tc := range upstreamReadsAsLogin {
		c, err := request.Path(tc.target)
		if err != nil {
			t.Fatalf("Path(%q): %v", tc.target, err)
		}
		for _, s := range all {
			got := s.Fold(c)
			want := false
			for _, w := range tc.as {
				want = want || w == s
			}
			if (got == "/login") != want {
				t.Errorf("%v.Fold(Path(%q)) = %q; want /login: %v", s, tc.target, got, want)
			}
			if again := s.Fold(got); again != got {
				t.Errorf("%v.Fold(%q) = %q: not idempotent", s, got, again)
			}
		}
	}
}

func TestPathSemanticsFoldUnicodeCase(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"/caf%C3%A9", "/CAF%C3%89"},
		{"/admin", "/adm%C4%B1n"}, // dotless i: .NET's ignore-case merges it with i through I
		{"/stra%C3%9Fe", "/STRA%E1%BA%9EE"},
	} {
		for _, s := range folding {
			if fa, fb := s.Fold(tc.a), s.Fold(tc.b); fa != fb {
				t.Errorf("%v: Fold(%q) = %q, Fold(%q) = %q; want equal", s, tc.a, fa, tc.b, fb)
			}
		}
	}
}

func TestParsePathSemantics(t *testing.T) {
	for _, s := range all {
		got, err := request.ParsePathSemantics(s.String())
		if err != nil || got != s {
			t.Errorf("ParsePathSemantics(%q) = %v, %v", s.String(), got, err)
		}
	}
	if s, err := request.ParsePathSemantics(""); s != request.PathStrict || err != nil {
		t.Errorf(`ParsePathSemantics("") = %v, %v; want strict`, s, err)
	}
	for _, n := range []string{"Strict", "tomcat", "case-insensitive"} {
		if _, err := request.ParsePathSemantics(n); !errors.Is(err, request.ErrPathSemantics) {
			t.Errorf("ParsePathSemantics(%q) = %v; want ErrPathSemantics", n, err)
		}
	}
}

func TestPathSemanticsFoldDoesNotAllocateWhenNothingFolds(t *testing.T) {
	for _, s := range all {
		allocs := testing.AllocsPerRun(100, func() {
			if s.Fold("/api/v1/users/42") != "/api/v1/users/42" {
				t.Fatal("folded")
			}
		})
		if allocs != 0 {
			t.Errorf("%v.Fold of a path with nothing to fold: %v allocations; want 0", s, allocs)
		}
	}
}

func BenchmarkPathSemanticsFold(b *testing.B) {
	for _, bc := range []struct {
		name string
		sem  request.PathSemantics
		path string
	}{
		{"strict", request.PathStrict, "/Account/Login;x"},
		{"case_insensitive/nothing", request.PathCaseInsensitive, "/api/v1/users/42"},
		{"case_insensitive/folds", request.PathCaseInsensitive, "/API/v1/Users/42"},
		{"iis/folds", request.PathIIS, "/Account/Login.%20"},
		{"servlet/nothing", request.PathServlet, "/api/v1/users/42"},
		{"servlet/folds", request.PathServlet, "/api/v1/users/42;jsessionid=ABCDEF"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = bc.sem.Fold(bc.path)
			}
		})
	}
}
