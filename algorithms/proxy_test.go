package algorithms

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

// dropCounts is what one or more dropProxies share: how many script calls'
// replies are still to be lost, and what happened.
type dropCounts struct {
	armed atomic.Int32 // replies of script calls still to drop
	// pipelined restricts the drops to script calls sent in one write
	// with more commands after them: a pipeline.
	pipelined atomic.Bool
	// hold keeps a dropped call's connection open this long after Redis
	// answered, so that the client gives up on a timeout rather than on a
	// closed connection.
	hold    atomic.Int64
	scripts atomic.Int32 // script calls forwarded to Redis
	dropped atomic.Int32 // script calls whose reply was dropped
}

// arm makes the next n script calls lose their reply.
func (d *dropCounts) arm(n int32) { d.armed.Store(n) }

// take reports whether the script call now forwarded is to lose its reply.
func (d *dropCounts) take() bool {
	for {
		n := d.armed.Load()
		if n <= 0 {
			return false
		}
		if d.armed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// dropProxy forwards TCP connections on a loopback port to a Redis server,
// command by command. While armed it loses the reply of a script call (EVAL
// or EVALSHA) as a network that fails at the wrong moment does: it forwards
// the call, waits until Redis has answered (so the script has run), then
// closes the client's connection without passing the answer on.
type dropProxy struct {
	addr   string
	target string
	counts *dropCounts
	ln     net.Listener

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// newDropProxy starts a proxy in front of target that drops replies as
// counts says; it stops when the test ends.
func newDropProxy(t testing.TB, target string, counts *dropCounts) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{addr: ln.Addr().String(), target: target, counts: counts, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *dropProxy) accept() {
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

func (p *dropProxy) track(c net.Conn, on bool) bool {
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

func (p *dropProxy) close() {
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
func (p *dropProxy) serve(client net.Conn) {
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
	go func() {
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
	}()

	r := bufio.NewReader(client)
	for {
		raw, name, err := readCommand(r)
		if err != nil {
			return
		}
		script := name == "evalsha" || name == "eval"
		drop := script && (!p.counts.pipelined.Load() || r.Buffered() > 0) && p.counts.take()
		if drop {
			dropping.Store(true)
		}
		if script {
			p.counts.scripts.Add(1)
		}
		if _, err := server.Write(raw); err != nil {
			return
		}
		if drop {
			select {
			case <-replied:
				p.counts.dropped.Add(1)
			case <-time.After(5 * time.Second):
			}
			time.Sleep(time.Duration(p.counts.hold.Load()))
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
