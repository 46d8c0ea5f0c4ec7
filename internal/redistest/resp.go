package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// command sends args as one RESP2 command to addr on a new connection and
// returns the reply as Exec describes it. timeout bounds the whole exchange.
func command(addr string, timeout time.Duration, args ...string) (string, error) {
	return commandAuth(addr, "", timeout, args...)
}

// commandAuth is command on a server that requires a password: it sends
// AUTH password first when password is not empty.
func commandAuth(addr, password string, timeout time.Duration, args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("redistest: empty command")
	}
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("redistest: %s %s: %w", addr, strings.ToUpper(args[0]), err)
	}
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return fail(err)
	}
	var req []byte
	write := func(args ...string) {
		req = fmt.Appendf(req, "*%d\r\n", len(args))
		for _, a := range args {
			req = fmt.Appendf(req, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if password != "" {
		write("AUTH", password)
	}
	write(args...)
	if _, err := conn.Write(req); err != nil {
		return fail(err)
	}
	r := bufio.NewReader(conn)
	if password != "" {
		var ok []string
		if err := readReply(r, &ok); err != nil {
			return fail(fmt.Errorf("AUTH: %w", err))
		}
	}
	var out []string
	if err := readReply(r, &out); err != nil {
		return fail(err)
	}
	return strings.Join(out, "\n"), nil
}

// maxBulk bounds the length of a bulk string or array this reader accepts.
const maxBulk = 1 << 28

// readReply reads one RESP2 reply and appends its text to out: a scalar as
// one element, an array as its elements, flattened.
func readReply(r *bufio.Reader, out *[]string) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return errors.New("empty reply line")
	}
	kind, rest := line[0], line[1:]
	switch kind {
	case '+', ':':
		*out = append(*out, rest)
		return nil
	case '-':
		return errors.New(rest)
	case '$', '*':
		n, err := strconv.Atoi(rest)
		if err != nil || n < -1 || n > maxBulk {
			return fmt.Errorf("bad length in reply %q", line)
		}
		if n == -1 { // nil
			*out = append(*out, "")
			return nil
		}
		if kind == '*' {
			for range n {
				if err := readReply(r, out); err != nil {
					return err
				}
			}
			return nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return err
		}
		*out = append(*out, string(b[:n]))
		return nil
	}
	return fmt.Errorf("unexpected reply %q", line)
}
