package config

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/redisstore"
)

// Store kinds: where a store's state is.
const (
	storeMemory   = ""
	storeURL      = "url"      // Redis.URL or URLEnv
	storeAddr     = "addr"     // Redis.Addr
	storeSentinel = "sentinel" // Redis.Sentinel
	storeCluster  = "cluster"  // Redis.Cluster
	storeClient   = "client"   // WithRedisClient
	storeApp      = "store"    // WithStore
)

// storeSettings is everything a store is made from, with the environment
// read. Two configurations with equal settings share one store across a
// reload, and with it every count. It holds passwords: it is never
// printed.
type storeSettings struct {
	kind         string
	url          string // resolved from URL or URLEnv
	addrs        string // Addr, or the Sentinels' or Cluster's, comma-separated
	master       string
	username     string
	password     string
	sentUser     string
	sentPassword string
	db           int
	tls          TLS
	tlsOn        bool
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

// settingsOf resolves c's store settings under o, reading the
// environment variables c names now.
func settingsOf(c *Config, o *options) (storeSettings, error) {
	s := storeSettings{maxKeys: c.Memory.MaxKeys, denialCache: -1}
	r := c.Redis
	switch {
	case o.store != nil && r != nil:
		return s, errAt(c, r.at, "the application gives the store (config.WithStore): the file must not configure Redis")
	case o.store != nil && c.Memory != (Memory{}):
		return s, fmt.Errorf("%w: %s: memory: the application gives the store (config.WithStore): the file must not configure one", ErrInvalid, c.Name)
	case o.store != nil:
		return storeSettings{kind: storeApp}, nil
	case r == nil && o.client == nil:
		return s, nil
	case r == nil:
		return storeSettings{kind: storeClient, denialCache: -1, instances: 1, failureMode: "local"}, nil
	}
	given := r.fieldsGiven()
	switch {
	case o.client != nil && len(given) > 0:
		return s, errAt(c, position{r.at.line, join(r.at.path, given[0])},
			"the application gives the Redis client (config.WithRedisClient), which has its own: keep the connection in one place")
	case o.client != nil:
		s.kind = storeClient
	case r.URL != "" || r.URLEnv != "":
		url := r.URL
		if r.URLEnv != "" {
			if url = os.Getenv(r.URLEnv); url == "" {
				return s, nil // url_env unset: the memory store
			}
		}
		s.kind, s.url = storeURL, url
	case r.Addr != "":
		s.kind, s.addrs = storeAddr, r.Addr
	case r.Sentinel != nil:
		s.kind, s.master, s.addrs = storeSentinel, r.Sentinel.MasterName, strings.Join(r.Sentinel.Addrs, ",")
		s.sentUser = r.Sentinel.Username
	case r.Cluster != nil:
		s.kind, s.addrs = storeCluster, strings.Join(r.Cluster.Addrs, ",")
	default:
		return s, errAt(c, r.at, "no connection: give one of %s, or the client in code (config.WithRedisClient)",
			strings.Join(connections, ", "))
	}
	if err := secrets(c, r, &s); err != nil {
		return s, err
	}
	s.username, s.db = r.Username, r.DB
	if r.TLS != nil {
		s.tls, s.tlsOn = *r.TLS, true
	}
	s.dialTimeout, s.readTimeout, s.writeTimeout, s.poolSize = r.DialTimeout, r.ReadTimeout, r.WriteTimeout, r.PoolSize
	s.prefix, s.timeout, s.failureMode, s.instances = r.Prefix, r.Timeout, r.FailureMode, r.Instances
	if r.DenialCache != nil {
		s.denialCache = *r.DenialCache
	}
	return s, nil
}

// fieldsGiven lists the fields of r that only a client this package
// makes would use.
func (r *Redis) fieldsGiven() []string {
	var given []string
	add := func(name string, set bool) {
		if set {
			given = append(given, name)
		}
	}
	add("url", r.URL != "")
	add("url_env", r.URLEnv != "")
	add("addr", r.Addr != "")
	add("sentinel", r.Sentinel != nil)
	add("cluster", r.Cluster != nil)
	add("username", r.Username != "")
	add("password_env", r.PasswordEnv != "")
	add("db", r.DB != 0)
	add("tls", r.TLS != nil)
	add("dial_timeout", r.DialTimeout != 0)
	add("read_timeout", r.ReadTimeout != 0)
	add("write_timeout", r.WriteTimeout != 0)
	add("pool_size", r.PoolSize != 0)
	return given
}

// openStore is a store made from settings, with the client this package
// made for it, if any.
type openStore struct {
	settings storeSettings
	store    algorithms.Store
	client   redis.UniversalClient // nil for a memory store and the application's client or store
	desc     string                // names no password
}

// newStore makes the store that s describes.
func newStore(c *Config, s storeSettings, o *options) (*openStore, error) {
	switch s.kind {
	case storeApp:
		if err := probeStore(o.store); err != nil {
			return nil, fmt.Errorf("%w: WithStore: %w", ErrInvalid, err)
		}
		return &openStore{settings: s, store: o.store, desc: "the application's store"}, nil
	case storeMemory:
		var opts []memstore.Option
		if s.maxKeys > 0 {
			opts = append(opts, memstore.WithMaxKeys(s.maxKeys))
		}
		st, err := memstore.New(append(opts, o.memOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: memory: %w", ErrInvalid, c.Name, err)
		}
		return &openStore{settings: s, store: st, desc: "memory (this process only)"}, nil
	}
	open := &openStore{settings: s, client: o.client, desc: "Redis through the application's client"}
	if s.kind != storeClient {
		var err error
		if open.client, open.desc, err = connect(c, s); err != nil {
			return nil, err
		}
	}
	st, err := redisstore.New(open.client, append(redisStoreOptions(s, o), o.redisOpts...)...)
	if err != nil {
		if s.kind != storeClient {
			_ = open.client.Close() // made here: nothing else holds it
		}
		return nil, fmt.Errorf("%w: %s: redis: %w", ErrInvalid, c.Name, err)
	}
	open.store = st
	if s.kind == storeClient {
		open.client = nil // the application's to close
	}
	return open, nil
}

// redisStoreOptions are the Redis store's options that s gives.
func redisStoreOptions(s storeSettings, o *options) []redisstore.Option {
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
	return opts
}

// probeStore reports whether the application's store can make a limiter
// (a store not made by its New cannot).
func probeStore(st algorithms.Store) error {
	_, err := algorithms.New(st, algorithms.FixedWindow, algorithms.PerSecond(1))
	return err
}

// close ends what this package started for the store, and returns the
// store's Close error: the Redis store's background work, sending what it
// owes Redis until ctx ends (see redisstore.Store.Close), and then the
// client this package made. The application's client and store are left
// open.
func (s *openStore) close(ctx context.Context) error {
	if s.settings.kind == storeApp {
		return nil
	}
	var err error
	if rs, ok := s.store.(*redisstore.Store); ok {
		err = rs.Close(ctx)
	}
	if s.client != nil {
		_ = s.client.Close()
	}
	return err
}

// closeNow closes a store that served no request (its configuration was
// refused): it owes Redis nothing, so a short wait is enough.
func (s *openStore) closeNow() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = s.close(ctx)
}

// closeTimeout bounds how long closing a store that a reload retires (or
// that a refused configuration made) sends Redis what it owes.
const closeTimeout = 5 * time.Second
