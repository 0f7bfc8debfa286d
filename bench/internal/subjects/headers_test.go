package subjects

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"
)

// TestHeadersFloor checks that the header floor sends the five fields
// redlimit's middleware sends by default, under the same names, and passes
// every request on; and that the three-header variant sends three.
func TestHeadersFloor(t *testing.T) {
	env := Env{Rate: 1000, Period: time.Minute}
	floor, err := HeadersFloor().Build(env, Trivial)
	if err != nil {
		t.Fatal(err)
	}
	mw := RedlimitMemory()
	redl, err := mw[0].Build(env, Trivial)
	if err != nil {
		t.Fatal(err)
	}
	three, err := mw[len(mw)-1].Build(env, Trivial)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(h http.Handler) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "10.0.0.2:1234"
		h.ServeHTTP(rec, req)
		return rec
	}
	got, want := serve(floor.Handler), serve(redl.Handler)
	if got.Code != http.StatusNoContent {
		t.Fatalf("floor answered %d, want 204", got.Code)
	}
	if len(got.Header()) != len(want.Header()) {
		t.Errorf("floor sent %v, redlimit %v: want the same fields", got.Header(), want.Header())
	}
	for name := range want.Header() {
		if len(got.Header()[name]) != 1 {
			t.Errorf("floor's %s: %q, want one value (redlimit sends %q)", name, got.Header()[name], want.Header()[name])
		}
	}
	if r := got.Header().Get("RateLimit"); !regexp.MustCompile(`^"default";r=\d{1,3};t=60$`).MatchString(r) {
		t.Errorf("floor's RateLimit %q", r)
	}
	if h := serve(three.Handler).Header(); len(h) != 3 || h.Get("RateLimit") != "" || h.Get("X-RateLimit-Remaining") == "" {
		t.Errorf("three-header variant sent %v", h)
	}
}
