package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"
)

// ListenGRPC opens the gRPC listener: the Unix socket uds when it is not
// empty (envoyproxy/ratelimit's GRPC_UDS, which replaces the TCP
// listener), else TCP at addr.
func ListenGRPC(addr, uds string) (net.Listener, error) {
	if uds != "" {
		return listenUnix(uds)
	}
	return net.Listen("tcp", addr)
}

// listenUnix listens on the Unix socket at path, created with the
// process's umask (connecting needs write permission on it: with umask 022
// only its owner may connect), and removed when the listener closes. A
// socket file already there is removed first when nothing listens on it (a
// process that died left it); a live socket, or a path that is not a
// socket at all, is an error and is left alone.
func listenUnix(path string) (net.Listener, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%s exists and is not a socket: not replacing it", path)
	default:
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another process listens on it", path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%s: an existing socket, not known to be stale: %w", path, err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return net.Listen("unix", path)
}

// GRPCTarget returns the gRPC target a client dials for the listener
// address a: "unix:PATH" for a Unix socket, else a's host:port.
func GRPCTarget(a net.Addr) string {
	if u, ok := a.(*net.UnixAddr); ok {
		return "unix:" + u.Name
	}
	return a.String()
}
