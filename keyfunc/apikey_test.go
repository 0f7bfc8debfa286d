package keyfunc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

func TestAPIKey(t *testing.T) {
	const secret = "sk_live_4f9a1c2e8b7d6a5f4e3d2c1b0a9f8e7d"
	tests := []struct {
		name    string
		header  string
		values  []string
		want    string
		wantErr error
	}{
		{name: "key hashed", header: "X-API-Key", values: []string{secret}, want: "key:" + HashAPIKey(secret)},
		{name: "header name any case", header: "x-api-key", values: []string{secret}, want: "key:" + HashAPIKey(secret)},
		{name: "longest accepted", header: "X-API-Key", values: []string{strings.Repeat("k", maxAPIKeyLen)},
			want: "key:" + HashAPIKey(strings.Repeat("k", maxAPIKeyLen))},
		{name: "missing", header: "X-API-Key", wantErr: ErrNoAPIKey},
		{name: "empty", header: "X-API-Key", values: []string{""}, wantErr: ErrNoAPIKey},
		{name: "too long", header: "X-API-Key", values: []string{secret + strings.Repeat("k", maxAPIKeyLen)}, wantErr: ErrInvalidAPIKey},
		{name: "sent twice", header: "X-API-Key", values: []string{secret, secret + "2"}, wantErr: ErrInvalidAPIKey},
		{name: "empty header name", header: "", values: []string{secret}, wantErr: algorithms.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRequest("203.0.113.7:1", nil)
			for _, v := range tt.values {
				r.Header.Add("X-Api-Key", v)
			}
			got, err := APIKey(tt.header)(r)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || got != "" {
					t.Fatalf("APIKey() = %q, %v; want %v", got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error text %q holds the key", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("APIKey() = %q, %v; want %q", got, err, tt.want)
			}
			if strings.Contains(got, tt.values[0]) {
				t.Errorf("key %q holds the raw API key", got)
			}
			if len(got) != len("key:")+32 {
				t.Errorf("key %q: want 32 hex digits after the namespace", got)
			}
		})
	}
}

func TestAPIKeyDistinct(t *testing.T) {
	kf := APIKey("X-API-Key")
	seen := map[string]string{}
	for _, k := range []string{"a", "b", "A", "a ", "key-1", "key-2", strings.Repeat("z", 256)} {
		r := newRequest("203.0.113.7:1", map[string][]string{"X-API-Key": {k}})
		got, err := kf(r)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("keys %q and %q both gave %q", prev, k, got)
		}
		seen[got] = k
	}
}

func TestHashAPIKey(t *testing.T) {
	// The first 16 bytes of SHA-256("abc"), a published test vector.
	if got, want := HashAPIKey("abc"), "ba7816bf8f01cfea414140de5dae2223"; got != want {
		t.Errorf("HashAPIKey(abc) = %s, want %s", got, want)
	}
}

// With KnownAPIKey, made-up keys are errors, so FirstOf goes on to the IP
// and a client cannot buy a fresh bucket with every new key.
func TestKnownAPIKey(t *testing.T) {
	known := map[string]bool{"k-live-1": true}
	kf := FirstOf(APIKey("X-API-Key", KnownAPIKey(func(raw string) bool { return known[raw] })), IP())
	tests := []struct {
		key, want string
	}{
		{"k-live-1", "key:" + HashAPIKey("k-live-1")},
		{"made-up-1", "ip:192.0.2.1"},
		{"made-up-2", "ip:192.0.2.1"},
		{"", "ip:192.0.2.1"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "192.0.2.1:1000"
		if tt.key != "" {
			r.Header.Set("X-API-Key", tt.key)
		}
		got, err := kf(r)
		if err != nil || got != tt.want {
			t.Errorf("key %q: (%q, %v), want %q", tt.key, got, err, tt.want)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-API-Key", "made-up-3")
	_, err := APIKey("X-API-Key", KnownAPIKey(func(string) bool { return false }))(r)
	if !errors.Is(err, ErrInvalidAPIKey) || strings.Contains(err.Error(), "made-up-3") {
		t.Fatalf("unknown key alone: %v, want ErrInvalidAPIKey without the key", err)
	}
}

// A nil KnownAPIKey function is a misconfiguration, not "every key": every
// request fails with algorithms.ErrInvalidOption, even alongside a valid option. A nil
// option configures nothing and is ignored.
func TestAPIKeyNilOptions(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "sk_any")
	if key, err := APIKey("X-API-Key", nil)(r); err != nil || key != "key:"+HashAPIKey("sk_any") {
		t.Errorf("nil option: %q %v", key, err)
	}
	for name, kf := range map[string]KeyFunc{
		"nil KnownAPIKey":           APIKey("X-API-Key", KnownAPIKey(nil)),
		"nil KnownAPIKey and a nil": APIKey("X-API-Key", nil, KnownAPIKey(nil)),
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", "sk_any")
		if key, err := kf(r); !errors.Is(err, algorithms.ErrInvalidOption) || key != "" {
			t.Errorf("%s: %q %v, want algorithms.ErrInvalidOption", name, key, err)
		}
	}
}
