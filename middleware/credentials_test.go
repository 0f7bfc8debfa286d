package middleware

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
)

const knownKey = "sk_live_known_0123456789"

// knownKeys is an API key function that accepts knownKey alone.
var knownKeys = keyfunc.APIKey("X-API-Key", keyfunc.KnownAPIKey(func(raw string) bool { return raw == knownKey }))

// bearerSubject stands in for jwtkey.Subject, a module of its own whose
// tests send real tokens through the middleware: it fails as Subject does,
// with keyfunc.ErrNoToken without a bearer token and keyfunc.ErrInvalidToken
// for any token, since no test holds the server's secret.
var bearerSubject keyfunc.KeyFunc = func(r *http.Request) (string, error) {
	v := r.Header.Get("Authorization")
	if !strings.HasPrefix(v, "Bearer ") {
		return "", keyfunc.ErrNoToken
	}
	return "", fmt.Errorf("%w: signature is invalid", keyfunc.ErrInvalidToken)
}

func randomKey(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "sk_live_" + hex.EncodeToString(b[:])
}

func TestCredentialGuessingIsLimited(t *testing.T) {
	const guesses = 1000
	forged := func(t *testing.T) []string {
		// An HS256 token's header and claims {"sub":"alice"}, and a guess
		// at its signature.
		return []string{"Authorization", "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSJ9." + randomKey(t)}
	}
	tests := []struct {
		name    string
		kf      keyfunc.KeyFunc
		headers func(t *testing.T) []string // of one guess
		opts    []Option
		want401 int
	}{
		{"made-up API keys", knownKeys, func(t *testing.T) []string { return []string{"X-API-Key", randomKey(t)} }, nil, 3},
		{"no API key", knownKeys, func(*testing.T) []string { return nil }, nil, 3},
		{"forged bearer tokens", bearerSubject, forged, nil, 3},
		{"garbage bearer tokens", bearerSubject, func(t *testing.T) []string { return []string{"Authorization", "Bearer " + randomKey(t)} }, nil, 3},
		{"counting off", knownKeys, func(t *testing.T) []string { return []string{"X-API-Key", randomKey(t)} },
			[]Option{WithCountCredentialFailures(false)}, guesses},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			store := must(memstore.New(memstore.WithClock(clock.Now)))
			lim := newLimiter(t, store, algorithms.SlidingWindowCounter, algorithms.PerMinute(3))
			next := &okHandler{}
			h := mustNew(t, lim, append([]Option{WithKeyFunc(tt.kf), withClock(clock.Now)}, tt.opts...)...)(next)
			codes := map[int]int{}
			for range guesses {
				rec := from(h, "/", "198.51.100.7:1234", tt.headers(t)...)
				codes[rec.Code]++
				if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
					t.Fatal("429 without Retry-After")
				}
			}
			want := map[int]int{http.StatusUnauthorized: tt.want401}
			if tt.want401 < guesses {
				want[http.StatusTooManyRequests] = guesses - tt.want401
			}
			if len(codes) != len(want) || codes[401] != want[401] || codes[429] != want[429] || next.count() != 0 {
				t.Fatalf("statuses %v, handler ran %d times; want %v and 0", codes, next.count(), want)
			}

			// The owner of a valid key, from the same address, still has
			// its whole quota: failures are counted apart.
			if tt.kf != nil && tt.name != "forged bearer tokens" && tt.name != "garbage bearer tokens" {
				for i := range 3 {
					if rec := from(h, "/", "198.51.100.7:1234", "X-API-Key", knownKey); rec.Code != http.StatusOK {
						t.Fatalf("valid key, request %d: status %d", i, rec.Code)
					}
				}
			}
			// Another address has failures of its own to spend.
			if tt.want401 < guesses {
				if rec := from(h, "/", "198.51.100.8:1234", tt.headers(t)...); rec.Code != http.StatusUnauthorized {
					t.Fatalf("another address: status %d, want 401", rec.Code)
				}
			}
		})
	}
}

func TestCredentialFailureKey(t *testing.T) {
	// Failures are charged in their own namespace under the route, by the
	// key WithCredentialFailureKey derives, never by the credential.
	clock := newFakeClock()
	lim := newCounter(clock, 2, 60e9)
	byHeader := func(r *http.Request) (string, error) { return "client:" + r.Header.Get("X-Client"), nil }
	h := mustNew(t, lim, WithKeyFunc(knownKeys), WithCredentialFailureKey(byHeader))(&okHandler{})
	mux := http.NewServeMux()
	mux.Handle("GET /login", h)
	for range 3 {
		from(mux, "/login", "198.51.100.9:1", "X-Client", "c1", "X-API-Key", "sk_guess")
	}
	keys := lim.seenKeys()
	if len(keys) == 0 {
		t.Fatal("the limiter was not asked")
	}
	for _, k := range keys {
		if k != "route:GET /login|authfail|client:c1" {
			t.Errorf("key %q, want route:GET /login|authfail|client:c1", k)
		}
		if strings.Contains(k, "sk_guess") {
			t.Errorf("key %q holds the guessed credential", k)
		}
	}
}
