package httpratecounter_test

import (
	"log"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/httprate"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/httpratecounter"
	"github.com/redlimit/redlimit/keyfunc"
)

// httprate with its counts in Redis, shared by every instance of the
// service: 100 requests a minute per client IP. WithStrictLimit makes the
// check and the count one step in Redis, so instances cannot pass the
// limit together; its refusals are answered with 429, a Redis failure
// with 503.
func ExampleNew() {
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"localhost:6379"}})
	counter, err := httpratecounter.New(client,
		httpratecounter.WithPrefix("api"),
		httpratecounter.WithTimeout(50*time.Millisecond),
		httpratecounter.WithStrictLimit(),
	)
	if err != nil {
		log.Fatal(err)
	}
	r := chi.NewRouter()
	// Options is httprate.WithLimitCounter(counter) with the handlers that
	// answer the counter's errors without internals.
	r.Use(httprate.LimitBy(100, time.Minute, httprate.KeyFunc(keyfunc.IP()), counter.Options()...))
	if err := counter.Err(); err != nil { // a limit or window that cannot work
		log.Fatal(err)
	}
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) })
	_ = http.ListenAndServe(":8080", r)
}
