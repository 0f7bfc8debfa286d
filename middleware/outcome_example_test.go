package middleware_test

import (
	"fmt"
	"log"
	"net/http"
	"strconv"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
)

// A login route that counts only failed attempts: three per hour per
// client. Successful logins cost nothing, yet a burst of slow ones can
// never run more than three at a time, since each is reserved first.
func ExampleWithChargeIf() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerHour(3))
	if err != nil {
		log.Fatal(err)
	}
	limit, err := middleware.New(limiter, middleware.WithChargeIf(func(status int) bool { return status >= 400 }))
	if err != nil {
		log.Fatal(err)
	}
	login := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("password") != "right" {
			http.Error(w, "wrong password", http.StatusUnauthorized)
		}
	}))
	for _, pw := range []string{"right", "right", "a", "right", "b", "c", "right", "d"} {
		send(login, http.MethodPost, "/login?password="+pw, "192.0.2.1:1234")
	}
	// Output:
	// 200 "default";r=2;t=3600
	// 200 "default";r=2;t=3600
	// 401 "default";r=2;t=3600
	// 200 "default";r=1;t=3600
	// 401 "default";r=1;t=3600
	// 401 "default";r=0;t=3600
	// 429 "default";r=0;t=3600 3600
	// 429 "default";r=0;t=3600 3600
}

// An export charged by the rows it returned, known only once the handler
// has run: one unit is reserved before, and the handler settles the cost
// with SetCost.
func ExampleSetCost() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerHour(100))
	if err != nil {
		log.Fatal(err)
	}
	limit, err := middleware.New(limiter, middleware.WithCostAfter())
	if err != nil {
		log.Fatal(err)
	}
	export := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rows, _ := strconv.Atoi(r.URL.Query().Get("rows"))
		middleware.SetCost(r, rows)
		fmt.Fprintln(w, rows, "rows")
	}))
	// The headers come from the reservation, before the handler runs. The
	// fourth export costs more than is left: what is left is charged, and
	// the next request waits for the window to end.
	for _, rows := range []string{"40", "0", "55", "10", "1"} {
		send(export, http.MethodGet, "/export?rows="+rows, "192.0.2.1:1234")
	}
	// Output:
	// 200 "default";r=99;t=3600
	// 200 "default";r=59;t=3600
	// 200 "default";r=59;t=3600
	// 200 "default";r=4;t=3600
	// 429 "default";r=0;t=3600 3600
}
