package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"time"
)

// requestTimeout bounds one request, response body included; a request that
// takes longer counts as an error.
const requestTimeout = 10 * time.Second

// clients sends requests as any number of clients, each from its own
// loopback source address, through one shared transport.
//
// A transport per client would cost 10,000 transports (each with its own
// pool and goroutines), and one transport dialing from an address taken
// from the request's context would hand a kept-alive connection of one
// client to the next. Instead each request names a made-up host per client
// and instance (hostFor), which the transport keys its connection pool by,
// and dial turns it back into the source address and the instance's real
// address. The pool is bounded in total (MaxIdleConns, oldest idle first
// out), so keep-alive costs no more than the flood needs, and a client of
// the spread, whose requests are few, asks for its connections to be closed
// with its last request to each instance.
type clients struct {
	instances []string // host:port of each instance
	client    *http.Client
	transport *http.Transport
}

// newClients returns clients for instances. maxIdlePerHost bounds the idle
// connections kept per client and instance, maxIdle all of them; with
// keepAlive false every request has a connection of its own.
func newClients(instances []string, maxIdle, maxIdlePerHost int, keepAlive bool) *clients {
	c := &clients{instances: slices.Clone(instances)}
	c.transport = &http.Transport{
		Proxy:               nil, // never a proxy from the environment: the source address must reach the server
		DialContext:         c.dial,
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: maxIdlePerHost,
		IdleConnTimeout:     30 * time.Second,
		DisableKeepAlives:   !keepAlive,
		DisableCompression:  true,
	}
	c.client = &http.Client{Transport: c.transport, Timeout: requestTimeout}
	return c
}

// dial connects from the source address that the made-up host names to the
// instance it names.
func (c *clients) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	src, inst, err := parseHost(host)
	if err != nil {
		return nil, err
	}
	if inst >= len(c.instances) {
		return nil, &net.AddrError{Err: "no such instance", Addr: host}
	}
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 5 * time.Second}
	return d.DialContext(ctx, "tcp4", c.instances[inst])
}

// do sends GET path to instance inst as the client at src, reads the whole
// response, and returns its status and the time it took. With closeConn the
// connection is closed afterwards instead of kept for the client's next
// request.
func (c *clients) do(ctx context.Context, src netip.Addr, inst int, path string, closeConn bool) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostFor(src, inst)+path, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Host = c.instances[inst] // the Host header names the real server
	req.Close = closeConn
	start := time.Now()
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, time.Since(start), err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), err
}

// closeIdle closes every idle connection, between scenarios.
func (c *clients) closeIdle() { c.transport.CloseIdleConnections() }
