package gateway

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/rlheader"
)

// DefaultClientMaxBodySize is Config.ClientMaxBodySize's default, NGINX's
// client_max_body_size default: 1 MiB.
const DefaultClientMaxBodySize = 1 << 20

// capBody applies the body cap (Config.ClientMaxBodySize) to r once its
// route is known: a Content-Length over it is answered 413 at once, before
// any limit or body read, and capBody returns false; a body of unknown
// length is wrapped so that reading past the cap fails with
// *http.MaxBytesError, which readAhead and upstreamError answer 413. A
// body with a Content-Length needs no wrapper: net/http reads no more.
func (st *state) capBody(w http.ResponseWriter, r *http.Request, route string) bool {
	if st.maxBody <= 0 {
		return true
	}
	if r.ContentLength > st.maxBody {
		st.bodyTooLarge(w, r, route)
		return false
	}
	if r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, st.maxBody)
	}
	return true
}

// bodyTooLarge answers 413 to a request whose body is over the cap, and
// closes the connection (the rest of the body is not read).
func (st *state) bodyTooLarge(w http.ResponseWriter, r *http.Request, route string) {
	w.Header().Set("Connection", "close")
	status := http.StatusRequestEntityTooLarge
	n := writeProblem(w, rlheader.Problem{
		Title: http.StatusText(status), Status: status,
		Detail: "the request body is larger than client_max_body_size (" + strconv.FormatInt(st.maxBody, 10) + " bytes)",
	}, status)
	st.access(r, status, n, "BODY_TOO_LARGE", nil)
	st.cfg.Metrics.outcome(route, "body_too_large")
}

func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// ParseSizeOrOff is ParseSize for a bound whose 0 means none, as NGINX's
// client_max_body_size 0: it returns -1 (the Config fields' "off") for 0.
func ParseSizeOrOff(s string) (int64, error) {
	v, err := ParseSize(s)
	if err == nil && v == 0 {
		v = -1
	}
	return v, err
}

// ParseSize reads a size as NGINX writes one (client_max_body_size 1m): a
// whole number of bytes, or of KiB, MiB or GiB with the suffix k, m or g
// in either case. A negative number, an unknown suffix or a size over
// math.MaxInt64 bytes is an error. It is envflag.ParseSize, the one
// spelling of a size in the proxy's file and in the commands' flags.
func ParseSize(s string) (int64, error) { return envflag.ParseSize(s) }
