package redisurl

import (
	"errors"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/internal/redisurl/redisurltest"
)

// Every malformed URL is refused with what is wrong, and neither the error
// nor any error it wraps repeats a part of the URL.
func TestParseRefusesWithoutRepeating(t *testing.T) {
	for _, tt := range redisurltest.Malformed {
		t.Run(tt.Name, func(t *testing.T) {
			o, err := Parse(tt.URL)
			if err == nil {
				t.Fatalf("parsed, to %s", o.Addr)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.Want) {
				t.Errorf("error %q, want %q wrapping ErrInvalid", err, tt.Want)
			}
			if l := tt.Leak(err.Error()); l != "" {
				t.Errorf("error %q repeats %q", err, l)
			}
			for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
				if l := tt.Leak(e.Error()); l != "" {
					t.Errorf("wrapped error %q repeats %q", e, l)
				}
			}
		})
	}
}

// Well-formed URLs, an escaped password among them, parse as go-redis
// parses them.
func TestParseAccepts(t *testing.T) {
	tests := []struct {
		url, addr, password string
		db                  int
	}{
		{"redis://cachehost:6379/2", "cachehost:6379", "", 2},
		{"redis://qzv:4471%2FXk9Wm%23%3F%25%40@cachehost", "cachehost:6379", "4471/Xk9Wm#?%@", 0},
		{"rediss://[::1]:6380/", "[::1]:6380", "", 0},
		{"redis://cachehost?dial_timeout=2s&db=3", "cachehost:6379", "", 3},
		{"unix:///run/redis.sock", "/run/redis.sock", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			o, err := Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if o.Addr != tt.addr || o.Password != tt.password || o.DB != tt.db {
				t.Errorf("addr %q, password %q, db %d; want %q, %q, %d", o.Addr, o.Password, o.DB, tt.addr, tt.password, tt.db)
			}
		})
	}
}
