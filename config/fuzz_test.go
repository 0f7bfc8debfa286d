package config

import (
	"errors"
	"strings"
	"testing"
)

// Whatever a file holds, Parse returns a Config or an error wrapping
// ErrInvalid, never a panic; and what it accepts, Build accepts on the
// memory store with every name registered, and describes.
func FuzzParse(f *testing.F) {
	f.Add(valid)
	f.Add(served)
	f.Add(minimal("    algorithm: fixed_window\n    limits: [{rate: 1, period: 1s}]\n"))
	f.Add("policies: {p: {key: ip, algorithm: token_bucket, limits: [{rate: 9007199254740993, period: 1ms, burst: 3}]}}\nroutes: [{method: GET, path: /, policy: p}]\n")
	f.Add("a: &x [*x, *x]\n")
	f.Add("policies:\n  p:\n    key: {kind: ip, ipv6_prefix: -1}\n")
	f.Fuzz(func(t *testing.T, file string) {
		c, err := Parse([]byte(file), "f.yaml")
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if c.Redis != nil {
			return // Build would dial out
		}
		if len(c.Describe()) != len(c.Routes) {
			t.Fatalf("Describe lists %d of %d routes", len(c.Describe()), len(c.Routes))
		}
		rt, err := c.Build(buildOpts(quiet())...)
		if err != nil {
			// Names the file may use that buildOpts does not register.
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "registered") {
				t.Fatalf("Build refused what Parse accepted: %v", err)
			}
			return
		}
		_ = rt.Close(closeCtx())
	})
}
