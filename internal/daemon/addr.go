package daemon

import (
	"net"
	"strings"
)

// LocalAddr turns a wildcard listen address into one a curl on this machine
// can reach.
func LocalAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// EveryInterface reports whether a is a wildcard address (0.0.0.0, [::]):
// a listener on every interface.
func EveryInterface(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && (tcp.IP == nil || tcp.IP.IsUnspecified())
}

// WhereBound is the banner's note on a listener bound to every interface,
// "every interface; ", else "".
func WhereBound(a net.Addr) string {
	if EveryInterface(a) {
		return "every interface; "
	}
	return ""
}

// AdminAddr returns the listen address of an admin listener's -admin-addr,
// and the host of sluice admin's -url given without a scheme: a port
// alone, or :port, means loopback (127.0.0.1); any other address is
// returned as it is.
func AdminAddr(addr string) string {
	if !strings.Contains(addr, ":") {
		return net.JoinHostPort("127.0.0.1", addr)
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
