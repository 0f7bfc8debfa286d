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

// command sends one command to addr on a fresh connection and returns the
// reply as a string. It understands the reply types the harness needs
// (simple string, error, integer, bulk string). The harness speaks the
// protocol itself rather than through a client library so that polling a
// server that is still starting produces no client log noise and depends on
// no client's retry or reconnect behaviour.
func command(addr string, timeout time.Duration, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}

	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, req.String()); err != nil {
		return "", err
	}

	return readReply(bufio.NewReader(conn))
}

// readReply reads one reply. An array's elements are joined by newlines.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch kind, rest := line[0], line[1:]; kind {
	case '+', ':':
		return rest, nil
	case '-':
		return "", fmt.Errorf("redis error: %s", rest)
	case '$':
		n, err := strconv.Atoi(rest)
		if err != nil {
			return "", fmt.Errorf("bad bulk length %q", rest)
		}
		if n < 0 {
			return "", errors.New("nil reply")
		}
		buf := make([]byte, n+2) // the payload and its trailing CRLF
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(rest)
		if err != nil {
			return "", fmt.Errorf("bad array length %q", rest)
		}
		if n < 0 {
			return "", errors.New("nil reply")
		}
		parts := make([]string, n)
		for i := range parts {
			if parts[i], err = readReply(r); err != nil {
				return "", err
			}
		}
		return strings.Join(parts, "\n"), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}
