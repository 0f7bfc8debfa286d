package middleware

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/storetest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
)

func TestSkip(t *testing.T) {
	clock := storetest.NewManualClock(epoch)
	lim, err := algorithms.New(must(memstore.New(memstore.WithClock(clock.Now))), algorithms.FixedWindow, algorithms.PerMinute(3))
	if err != nil {
		t.Fatal(err)
	}
	// Skip the office network, behind one trusted proxy, and /healthz.
	trust := keyfunc.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))
	office, err := keyfunc.ClientIPIn([]netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}, trust)
	if err != nil {
		t.Fatal(err)
	}
	skip := func(r *http.Request) bool { return r.URL.Path == "/healthz" || office(r) }
	obs := &recordingObserver{}
	next := &okHandler{}
	h := mustNew(t, lim, WithSkip(skip), WithObserver(obs), WithClock(clock.Now),
		WithKeyFunc(keyfunc.IP(trust)), WithRouteScope(false))(next)

	// Skipped requests: far more than the quota, all pass, bare.
	for i := range 10 {
		for _, rec := range []interface {
			Header() http.Header
		}{
			from(h, "/healthz", "192.0.2.1:1"),
			from(h, "/", "198.51.100.7:1"),
			from(h, "/", "10.0.0.1:1", "X-Forwarded-For", "198.51.100.8"),
		} {
			for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit", "RateLimit-Policy", "Retry-After"} {
				if v := rec.Header().Get(name); v != "" {
					t.Fatalf("skipped request %d carries %s: %q", i, name, v)
				}
			}
		}
	}
	if next.count() != 30 {
		t.Fatalf("next handler saw %d skipped requests, want 30", next.count())
	}
	// They consumed nothing: the skipped clients' keys, and a client who
	// shares an address with the health checker, look like a key never
	// seen (Peek answers as for one more request: 2 of 3 left).
	fresh, err := lim.Peek(context.Background(), "ip:203.0.113.250")
	if err != nil || fresh.Remaining != 2 {
		t.Fatalf("a fresh key peeks as %+v, %v", fresh, err)
	}
	for _, key := range []string{"ip:192.0.2.1", "ip:198.51.100.7", "ip:198.51.100.8"} {
		res, err := lim.Peek(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if res != fresh {
			t.Errorf("%s: %+v after skipped requests, want a fresh key's %+v", key, res, fresh)
		}
	}
	// An attacker who writes the office address into X-Forwarded-For from
	// outside the trusted proxies is limited as usual.
	var codes []int
	for range 4 {
		codes = append(codes, from(h, "/", "192.0.2.66:1", "X-Forwarded-For", "198.51.100.7").Code)
	}
	if want := []int{200, 200, 200, 429}; !slices.Equal(codes, want) {
		t.Fatalf("spoofing client got %v, want %v", codes, want)
	}
	// And so is a request behind the proxy whose leftmost, client-written,
	// entry names the office.
	if rec := from(h, "/", "10.0.0.1:1", "X-Forwarded-For", "198.51.100.7, 192.0.2.66"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("spoofed leftmost entry: %d, want 429 (the real client, 192.0.2.66, is spent)", rec.Code)
	}

	out := obs.outcomes()
	skipped := 0
	for _, o := range out[:30] {
		if o == OutcomeSkipped {
			skipped++
		}
	}
	if skipped != 30 || len(out) != 35 || out[30] != OutcomeAllowed || out[33] != OutcomeDenied {
		t.Fatalf("outcomes %v, want 30 × skipped, then allowed ×3, denied ×2", out)
	}
	for _, d := range obs.decisions[:30] {
		if d.Store != "" || d.Duration != 0 {
			t.Fatalf("skipped decision %+v names a store or a duration", d)
		}
	}
}

func TestSkipBeforeKeyFunc(t *testing.T) {
	// A health check without credentials is not refused by the key
	// function, and shadow mode does not change what is skipped.
	lim, err := algorithms.New(must(memstore.New()), algorithms.FixedWindow, algorithms.PerMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, shadow := range []bool{false, true} {
		obs := &recordingObserver{}
		h := mustNew(t, lim, WithShadow(shadow), WithObserver(obs),
			WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
			WithKeyFunc(keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(func(string) bool { return false }))))(&okHandler{})
		if rec := from(h, "/healthz", "192.0.2.1:1"); rec.Code != http.StatusOK {
			t.Fatalf("shadow %v: health check without a key: %d", shadow, rec.Code)
		}
		if got := obs.outcomes(); len(got) != 1 || got[0] != OutcomeSkipped {
			t.Fatalf("shadow %v: outcomes %v", shadow, got)
		}
	}
}

func TestSkipNilRefused(t *testing.T) {
	lim, err := algorithms.New(must(memstore.New()), algorithms.FixedWindow, algorithms.PerMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := New(lim, WithSkip(nil))
	checkRefused(t, mw, err, "WithSkip")
}
