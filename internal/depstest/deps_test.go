package depstest

import (
	"os/exec"
	"strings"
	"testing"
)

// root is the module's root.
const root = "../.."

// deps returns the packages outside the standard library that pkgs
// compile, themselves included.
func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Fields(string(out))
}

// TestCoreDependencies: a net/http program limited on the memory store
// (algorithms, keyfunc, memstore, middleware, operator) compiles nothing
// outside the standard library but the module's own packages, and one on
// the Redis store go-redis besides; neither compiles chi or golang-jwt,
// which only middleware/chiroute and the jwtkey module bring, nor an
// integration's dependency (Prometheus, OpenTelemetry, YAML, httprate),
// which live in modules of their own.
func TestCoreDependencies(t *testing.T) {
	const self = "github.com/redlimit/redlimit/"
	for _, p := range deps(t, "./algorithms", "./keyfunc", "./memstore", "./middleware", "./operator") {
		if !strings.HasPrefix(p, self) {
			t.Errorf("the memory store's program compiles %s", p)
		}
	}
	forbidden := []string{
		"github.com/go-chi/", "github.com/golang-jwt/", "github.com/prometheus/",
		"go.opentelemetry.io/", "go.yaml.in/", "gopkg.in/yaml",
	}
	got := deps(t, "./algorithms", "./keyfunc", "./memstore", "./middleware", "./operator", "./redisstore")
	redis := false
	for _, p := range got {
		redis = redis || strings.HasPrefix(p, "github.com/redis/go-redis/")
		for _, f := range forbidden {
			if strings.HasPrefix(p, f) {
				t.Errorf("the Redis store's program compiles %s", p)
			}
		}
	}
	if !redis {
		t.Errorf("go-redis is not among the Redis store's dependencies %q: is the list right?", got)
	}
	chi := false
	for _, p := range deps(t, "./middleware/chiroute") {
		chi = chi || strings.HasPrefix(p, "github.com/go-chi/chi/")
	}
	if !chi {
		t.Error("middleware/chiroute compiles no chi: is the list right?")
	}
}
