// The names documentation fragments may use without declaring them: what a
// real program would have made earlier, given only its type here. Fragments
// are type-checked, never run, so none of these needs a value.

package docs

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/config"
)

var (
	ctx     context.Context
	client  *redis.Client
	store   algorithms.Store
	limiter algorithms.RateLimiter
	logger  *slog.Logger
	r       chi.Router
	rt      *config.Runtime
)

// staffOnly stands for the application's own authentication of its staff.
func staffOnly(next http.Handler) http.Handler { return next }

// Handlers of an application, by the names the documentation gives them.
var (
	search, searchHandler, loginHandler, export, items, login http.HandlerFunc
	uploadHandler                                             http.Handler
)
