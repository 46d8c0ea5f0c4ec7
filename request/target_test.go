package request_test

import (
	"bufio"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/request"
)

// A "#" in a request target is malformed: a target has no fragment, and
// servers that parse the target as a URL (Node's, so Express's) route
// "/login#x" to /login, where the form would be "/login%23x", another
// resource, unlimited.
func TestFragmentInTargetIsMalformed(t *testing.T) {
	for _, target := range []string{"/login#x", "/login?a=b#x", "/#"} {
		r, err := http.ReadRequest(bufioString("POST " + target + " HTTP/1.1\r\nHost: h\r\n\r\n"))
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if c, err := request.FromRequest(r); !errors.Is(err, request.ErrMalformed) {
			t.Errorf("%s: %+v, %v; want malformed", target, c, err)
		}
	}
	r, _ := http.ReadRequest(bufioString("POST /login%23x HTTP/1.1\r\nHost: h\r\n\r\n"))
	if c, err := request.FromRequest(r); err != nil || c.Path != "/login%23x" {
		t.Errorf("/login%%23x: %+v, %v; want the path /login%%23x", c, err)
	}
}

func bufioString(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }
