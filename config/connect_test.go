package config

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The clients connect makes try a dial twice, for a second each, unless the
// file's dial_timeout or the URL's says otherwise: a single server, one from
// a URL, Sentinel's and Cluster's.
func TestConnectDials(t *testing.T) {
	tests := []struct {
		name     string
		s        storeSettings
		attempts int
		timeout  time.Duration
	}{
		{"addr", storeSettings{kind: storeAddr, addrs: "127.0.0.1:1"}, 2, time.Second},
		{"addr with dial_timeout", storeSettings{kind: storeAddr, addrs: "127.0.0.1:1", dialTimeout: 3 * time.Second}, 2, 3 * time.Second},
		{"url", storeSettings{kind: storeURL, url: "redis://127.0.0.1:1/0"}, 2, time.Second},
		{"url with its own", storeSettings{kind: storeURL, url: "redis://127.0.0.1:1/0?dial_timeout=4s"}, 2, 4 * time.Second},
		{"sentinel", storeSettings{kind: storeSentinel, master: "m", addrs: "127.0.0.1:1"}, 2, time.Second},
		{"cluster", storeSettings{kind: storeCluster, addrs: "127.0.0.1:1"}, 2, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, _, err := connect(&Config{Name: "t.yaml"}, tt.s)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			var attempts int
			var timeout time.Duration
			switch c := client.(type) {
			case *redis.Client:
				attempts, timeout = c.Options().DialerRetries, c.Options().DialTimeout
			case *redis.ClusterClient:
				attempts, timeout = c.Options().DialerRetries, c.Options().DialTimeout
			default:
				t.Fatalf("client %T", client)
			}
			if attempts != tt.attempts || timeout != tt.timeout {
				t.Errorf("%d dial attempts of %s each, want %d of %s", attempts, timeout, tt.attempts, tt.timeout)
			}
		})
	}
}
