package config

import (
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/redisstore"
)

// storeSettings is everything a store is made from. Two configurations
// with equal settings share one store across a reload, and with it every
// count.
type storeSettings struct {
	redis        bool
	url          string // resolved from URL or URLEnv
	dialTimeout  time.Duration
	readTimeout  time.Duration
	writeTimeout time.Duration
	poolSize     int
	prefix       string
	timeout      time.Duration
	failureMode  string
	instances    int
	denialCache  int // -1: the default
	maxKeys      int
}

// settingsOf resolves c's store settings, reading URLEnv now.
func settingsOf(c *Config) storeSettings {
	s := storeSettings{maxKeys: c.Memory.MaxKeys, denialCache: -1}
	r := c.Redis
	if r == nil {
		return s
	}
	url := r.URL
	if r.URLEnv != "" {
		url = os.Getenv(r.URLEnv)
	}
	if url == "" {
		return s // url_env unset: the memory store
	}
	s.redis, s.url = true, url
	s.dialTimeout, s.readTimeout, s.writeTimeout, s.poolSize = r.DialTimeout, r.ReadTimeout, r.WriteTimeout, r.PoolSize
	s.prefix, s.timeout, s.failureMode, s.instances = r.Prefix, r.Timeout, r.FailureMode, r.Instances
	if r.DenialCache != nil {
		s.denialCache = *r.DenialCache
	}
	return s
}

// openStore is a store made from settings, with its client when it has one.
type openStore struct {
	settings storeSettings
	store    algorithms.Store
	client   *redis.Client // nil for the memory store
	desc     string        // names no password
}

// newStore makes the store that s describes.
func newStore(c *Config, s storeSettings, o *options) (*openStore, error) {
	if !s.redis {
		var opts []memstore.Option
		if s.maxKeys > 0 {
			opts = append(opts, memstore.WithMaxKeys(s.maxKeys))
		}
		st := memstore.New(append(opts, o.memOpts...)...)
		if err := probeStore(st); err != nil {
			return nil, fmt.Errorf("%w: %s: memory: %w", ErrInvalid, c.Name, err)
		}
		return &openStore{settings: s, store: st, desc: "memory (this process only)"}, nil
	}
	where := "redis.url"
	if c.Redis.URLEnv != "" {
		where = "redis.url_env (" + c.Redis.URLEnv + ")"
	}
	if err := checkRedisURL(s.url); err != nil {
		return nil, fmt.Errorf("%w: %s: %s: %w", ErrInvalid, c.Name, where, err)
	}
	ro, _ := redis.ParseURL(s.url) // checked above
	if s.dialTimeout > 0 {
		ro.DialTimeout = s.dialTimeout
	}
	if s.readTimeout > 0 {
		ro.ReadTimeout = s.readTimeout
	}
	if s.writeTimeout > 0 {
		ro.WriteTimeout = s.writeTimeout
	}
	if s.poolSize > 0 {
		ro.PoolSize = s.poolSize
	}
	// Commands bounded by their context's deadline: an idle store's
	// decisions go out on the caller's goroutine. (Retries are safe: a call
	// sent again returns its first run's answer.)
	ro.ContextTimeoutEnabled = true
	opts := []redisstore.Option{redisstore.WithLogger(o.logger), redisstore.WithInstances(s.instances)}
	if s.prefix != "" {
		opts = append(opts, redisstore.WithPrefix(s.prefix))
	}
	if s.timeout > 0 {
		opts = append(opts, redisstore.WithTimeout(s.timeout))
	}
	switch s.failureMode {
	case "open":
		opts = append(opts, redisstore.WithFailureMode(redisstore.FailOpen))
	case "closed":
		opts = append(opts, redisstore.WithFailureMode(redisstore.FailClosed))
	}
	if s.denialCache >= 0 {
		opts = append(opts, redisstore.WithDenialCache(s.denialCache))
	}
	if obs, ok := o.observer.(redisstore.Observer); ok {
		opts = append(opts, redisstore.WithObserver(obs))
	}
	client := redis.NewClient(ro)
	st := redisstore.New(client, append(opts, o.redisOpts...)...)
	if err := probeStore(st); err != nil {
		client.Close()
		return nil, fmt.Errorf("%w: %s: redis: %w", ErrInvalid, c.Name, err)
	}
	return &openStore{settings: s, store: st, client: client,
		desc: fmt.Sprintf("Redis at %s db %d", ro.Addr, ro.DB)}, nil
}

// probeStore reports the store's option errors, which algorithms.New
// returns.
func probeStore(st algorithms.Store) error {
	_, err := algorithms.New(st, algorithms.FixedWindow, algorithms.PerSecond(1))
	return err
}

// close closes the store's client, if any.
func (s *openStore) close() {
	if s.client != nil {
		_ = s.client.Close()
	}
}
