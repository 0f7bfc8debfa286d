package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DropRule decides which script calls a DropProxy loses the reply of.
type DropRule interface {
	// Drop is asked of every script call (EVAL or EVALSHA) forwarded:
	// whether its reply is to be lost. pipelined reports that more
	// commands followed it in the same write.
	Drop(pipelined bool) bool
	// Dropped is told each time a reply was lost after Redis answered.
	Dropped()
	// Hold is how long a dropped call's connection stays open after Redis
	// answered, so that a client can give up on a timeout rather than on
	// a closed connection.
	Hold() time.Duration
}

// DropProxy forwards TCP connections on a loopback port to a Redis server,
// command by command. It loses the replies of the script calls its rule
// picks, as a network that fails at the wrong moment does: it forwards the
// call, waits until Redis has answered (so the script has run), then closes
// the client's connection without passing the answer on.
type DropProxy struct {
	// Addr is the proxy's address, to give the client instead of Redis's.
	Addr   string
	target string
	rule   DropRule
	ln     net.Listener

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// NewDropProxy starts a proxy in front of target that drops replies as rule
// says; it stops when the test ends.
func NewDropProxy(t testing.TB, target string, rule DropRule) *DropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &DropProxy{Addr: ln.Addr().String(), target: target, rule: rule, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *DropProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *DropProxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *DropProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// serve forwards one client connection.
func (p *DropProxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, true) || !p.track(server, true) {
		client.Close()
		server.Close()
		return
	}
	defer func() {
		client.Close()
		server.Close()
		p.track(client, false)
		p.track(server, false)
	}()

	var dropping atomic.Bool
	replied := make(chan struct{}, 1)
	p.wg.Add(1)
	go p.answer(client, server, &dropping, replied)

	r := bufio.NewReader(client)
	for {
		raw, name, err := readCommand(r)
		if err != nil {
			return
		}
		drop := (name == "evalsha" || name == "eval") && p.rule.Drop(r.Buffered() > 0)
		if drop {
			dropping.Store(true)
		}
		if _, err := server.Write(raw); err != nil {
			return
		}
		if drop {
			select {
			case <-replied:
				p.rule.Dropped()
			case <-time.After(5 * time.Second):
			}
			time.Sleep(p.rule.Hold())
			return
		}
	}
}

// answer passes Redis's replies back to the client until dropping is set,
// then signals replied instead of passing them on.
func (p *DropProxy) answer(client, server net.Conn, dropping *atomic.Bool, replied chan<- struct{}) {
	defer p.wg.Done()
	defer client.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if dropping.Load() {
				select {
				case replied <- struct{}{}:
				default:
				}
			} else if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readCommand reads one command as clients send them, an array of bulk
// strings, and returns its bytes and its name in lower case.
func readCommand(r *bufio.Reader) (raw []byte, name string, err error) {
	var b bytes.Buffer
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, "", err
	}
	b.WriteString(line)
	if !strings.HasPrefix(line, "*") {
		return nil, "", fmt.Errorf("proxy: not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, "", err
	}
	for i := range n {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, "", err
		}
		b.WriteString(line)
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil {
			return nil, "", err
		}
		arg := make([]byte, size+2)
		if _, err := io.ReadFull(r, arg); err != nil {
			return nil, "", err
		}
		b.Write(arg)
		if i == 0 {
			name = strings.ToLower(string(arg[:size]))
		}
	}
	return b.Bytes(), name, nil
}

// DropCounts is a DropRule for most tests: Arm(n) loses the replies of the
// next n script calls; it counts the calls forwarded and the replies lost.
type DropCounts struct {
	armed, scripts, dropped atomic.Int32
}

// Arm makes the next n script calls lose their reply.
func (d *DropCounts) Arm(n int32) { d.armed.Store(n) }

// Scripts returns how many script calls were forwarded.
func (d *DropCounts) Scripts() int32 { return d.scripts.Load() }

// Lost returns how many replies were lost.
func (d *DropCounts) Lost() int32 { return d.dropped.Load() }

// Drop implements DropRule.
func (d *DropCounts) Drop(bool) bool {
	d.scripts.Add(1)
	return Take(&d.armed)
}

// Dropped implements DropRule.
func (d *DropCounts) Dropped() { d.dropped.Add(1) }

// Hold implements DropRule: none.
func (d *DropCounts) Hold() time.Duration { return 0 }

// Take reports whether armed was positive, and if so decrements it.
func Take(armed *atomic.Int32) bool {
	for {
		n := armed.Load()
		if n <= 0 {
			return false
		}
		if armed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
