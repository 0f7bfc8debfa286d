package redisstore

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
)

// cutProxy forwards TCP connections to a Redis server and, while cut,
// loses every byte either way, keeping the connections open: a partition
// that drops packets, so that calls sent meanwhile never run and their
// clients wait out their deadlines.
type cutProxy struct {
	addr string
	cut  atomic.Bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { p.pipe(s, c) })
			wg.Go(func() { p.pipe(c, s) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// pipe copies from src to dst, losing what it reads while p is cut.
func (p *cutProxy) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// What the twin admits in place of requests whose calls decided several
// keys together is charged unless those calls counted them, so Redis
// counts each admission once. 60 clients send one request after another,
// so that their calls go out grouped in pipelines, and a fault begins:
// with a partition that drops every packet, the calls in flight never run
// and the twin admits their requests in their stead; with the replies
// lost instead, the calls ran. Once the calls have ended and the store
// has settled, Redis's count of every client is exactly what it was
// admitted: left uncharged, the partition's admissions were missing from
// it (a client then got up to 2L in all); charged, the lost replies'
// counted twice.
func TestGroupedCallsAreCharged(t *testing.T) {
	const clients, limit = 60, 1_000_000
	for _, fault := range []string{"partition", "replies lost"} {
		t.Run(fault, func(t *testing.T) {
			addr := redistest.Standalone(t)
			var begin, end func()
			switch fault {
			case "partition":
				proxy := newCutProxy(t, addr)
				addr = proxy.addr
				begin, end = func() { proxy.cut.Store(true) }, func() { proxy.cut.Store(false) }
			default:
				counts := &dropCounts{}
				counts.hold.Store(int64(3 * time.Second)) // the calls give up first
				addr = newDropProxy(t, addr, counts).addr
				begin, end = func() { counts.arm(1000) }, func() { counts.arm(0) }
			}
			// Reads and writes give up within the calls' own time, so that
			// every call has ended when the test looks.
			c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
			t.Cleanup(func() { _ = c.Close() })
			// A timeout of 200 ms keeps the calls' replies 4.4 s (onceTTL):
			// long past the fault, as the settler asks about them.
			store := must(New(c, WithTimeout(200*time.Millisecond), WithLogger(quietLogger()), WithDenialCache(0)))
			l, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerHour(limit))
			if err != nil {
				t.Fatal(err)
			}
			admitted := make([]atomic.Int32, clients)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var local atomic.Int32
			for i := range clients {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						res, _ := l.Allow(context.Background(), keyName(i), 1)
						if res.Allowed {
							admitted[i].Add(1)
						}
						if res.Decider == algorithms.DecidedLocally {
							local.Add(1)
						}
					}
				})
			}
			time.Sleep(200 * time.Millisecond)
			begin()
			time.Sleep(200 * time.Millisecond)
			close(stop)
			wg.Wait()
			if local.Load() == 0 {
				t.Fatal("nothing was decided locally")
			}
			time.Sleep(store.guard.callTimeout() + 200*time.Millisecond) // the calls end
			end()
			settled(t, store)
			for i := range clients {
				res, err := l.Peek(context.Background(), keyName(i))
				if err != nil || res.Decider != algorithms.DecidedByStore {
					t.Fatalf("client %d: %+v %v", i, res, err)
				}
				if counted := limit - 1 - res.Remaining; counted != int(admitted[i].Load()) { // Peek answers for a request of 1
					t.Errorf("client %d admitted %d, Redis counts %d", i, admitted[i].Load(), counted)
				}
			}
		})
	}
}

// settled waits until store owes Redis nothing, at most 10 s.
func settled(t *testing.T, store *Store) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); owedKeys(store) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d keys still owe 10 s after Redis came back", owedKeys(store))
		}
	}
}
