package operator_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/operator"
)

// An API limits GET /api/me per client IP; its operators unblock a
// client through the operator handler, mounted under /ops/ behind a
// check of their own.
func Example() {
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	limiter, _ := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(1))
	mw, _ := middleware.New(limiter, middleware.WithKeyFunc(keyfunc.IP()))
	ops, _ := operator.New([]operator.Policy{
		{Name: "me", Limiter: limiter, Routes: []string{"GET /api/me"}},
	})
	staffOnly := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Staff") != "yes" { // a real check authenticates
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("GET /api/me", mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	mux.Handle("/ops/", staffOnly(http.StripPrefix("/ops", ops)))

	do := func(method, target string) int {
		r := httptest.NewRequest(method, target, nil)
		r.RemoteAddr = "203.0.113.7:4321"
		r.Header.Set("X-Staff", "yes")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println("first request:", do("GET", "/api/me"))
	fmt.Println("second request:", do("GET", "/api/me"))
	fmt.Println("reset:", do("POST", "/ops/policies/me?identity=ip:203.0.113.7"))
	fmt.Println("after the reset:", do("GET", "/api/me"))
	// Output:
	// first request: 200
	// second request: 429
	// reset: 200
	// after the reset: 200
}
