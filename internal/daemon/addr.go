package daemon

import "net"

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
