package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/internal/redisurl/redisurltest"
)

// A -redis URL that go-redis would refuse (or read as another URL) stops
// the example with what is wrong, and neither the error nor the output
// repeats the password, three characters of it, the user or the host.
func TestRedisFlagNeverRepeated(t *testing.T) {
	for _, tt := range redisurltest.Malformed {
		t.Run(tt.Name, func(t *testing.T) {
			// Cancelled: should the URL be taken, the example stops at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out bytes.Buffer
			err := run(ctx, []string{"-addr", "127.0.0.1:0", "-redis", tt.URL}, &out)
			if err == nil || !strings.Contains(err.Error(), "-redis: not a valid Redis URL ("+tt.Want) {
				t.Errorf("error %v, want one saying %q", err, tt.Want)
			}
			if l := tt.Leak(fmt.Sprint(err) + out.String()); l != "" {
				t.Errorf("%v or the output\n%s\nrepeats %q", err, &out, l)
			}
		})
	}
}
