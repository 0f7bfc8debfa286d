package config

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redisurl"
)

// The dials of the clients connect makes: two attempts, 100 ms apart, each
// for at most defaultDialTimeout (a URL's dial_timeout, or the file's, says
// otherwise), where go-redis's defaults are five attempts of 5 s each. A
// refused dial costs a decision nothing (the store decides at once, see
// redisstore.New); these bound what go-redis spends in the background on
// dials that get no answer (a Redis behind a firewall that drops them),
// each holding one of its dialing slots. Proved by TestConnectDials.
const (
	dialAttempts       = 2
	defaultDialTimeout = time.Second
)

// connect makes the go-redis client that s describes and says where it
// connects, naming no password. Making a client does not dial: an
// unreachable Redis is the failure mode's to handle, not Build's.
func connect(c *Config, s storeSettings) (redis.UniversalClient, string, error) {
	tc, err := tlsConfig(s)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s: redis.tls: %w", ErrInvalid, c.Name, err)
	}
	// Commands bounded by their context's deadline: an idle store's
	// decisions go out on the caller's goroutine. (Retries are safe: a call
	// sent again returns its first run's answer.)
	switch s.kind {
	case storeURL, storeAddr:
		ro := &redis.Options{Addr: s.addrs, DB: s.db}
		if s.kind == storeURL {
			// The error names what is wrong, never the URL's text.
			if ro, err = redisurl.Parse(s.url); err != nil {
				return nil, "", fmt.Errorf("%w: %s: %s: %w", ErrInvalid, c.Name, urlField(c), err)
			}
		}
		if s.username != "" {
			ro.Username = s.username
		}
		if s.password != "" {
			ro.Password = s.password
		}
		if tc != nil {
			ro.TLSConfig = tc
		}
		ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.PoolSize = tune(s, ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.PoolSize)
		ro.DialerRetries = dialAttempts // (a URL cannot set it)
		ro.ContextTimeoutEnabled = true
		return redis.NewClient(ro), fmt.Sprintf("Redis at %s db %d%s", ro.Addr, ro.DB, overTLS(ro.TLSConfig)), nil
	case storeSentinel:
		fo := &redis.FailoverOptions{MasterName: s.master, SentinelAddrs: strings.Split(s.addrs, ","),
			SentinelUsername: s.sentUser, SentinelPassword: s.sentPassword,
			Username: s.username, Password: s.password, DB: s.db, TLSConfig: tc, ContextTimeoutEnabled: true,
			DialerRetries: dialAttempts}
		fo.DialTimeout, fo.ReadTimeout, fo.WriteTimeout, fo.PoolSize = tune(s, 0, 0, 0, 0)
		return redis.NewFailoverClient(fo), fmt.Sprintf("Redis Sentinel master %s via %s db %d%s",
			s.master, strings.ReplaceAll(s.addrs, ",", ", "), s.db, overTLS(tc)), nil
	case storeCluster:
		co := &redis.ClusterOptions{Addrs: strings.Split(s.addrs, ","), Username: s.username, Password: s.password,
			TLSConfig: tc, ContextTimeoutEnabled: true, DialerRetries: dialAttempts}
		co.DialTimeout, co.ReadTimeout, co.WriteTimeout, co.PoolSize = tune(s, 0, 0, 0, 0)
		return redis.NewClusterClient(co), fmt.Sprintf("Redis Cluster via %s%s",
			strings.ReplaceAll(s.addrs, ",", ", "), overTLS(tc)), nil
	}
	return nil, "", fmt.Errorf("%w: %s: redis: no connection", ErrInvalid, c.Name)
}

// urlField names where the URL came from, for errors.
func urlField(c *Config) string {
	if c.Redis.URLEnv != "" {
		return "redis.url_env (" + c.Redis.URLEnv + ")"
	}
	return "redis.url"
}

// tune returns the timeouts and pool size, those s gives in place of the
// ones passed (a URL's, or go-redis's defaults as zero), and
// defaultDialTimeout for a dial timeout neither gives.
func tune(s storeSettings, dial, read, write time.Duration, pool int) (time.Duration, time.Duration, time.Duration, int) {
	switch {
	case s.dialTimeout > 0:
		dial = s.dialTimeout
	case dial == 0:
		dial = defaultDialTimeout
	}
	if s.readTimeout > 0 {
		read = s.readTimeout
	}
	if s.writeTimeout > 0 {
		write = s.writeTimeout
	}
	if s.poolSize > 0 {
		pool = s.poolSize
	}
	return dial, read, write, pool
}

func overTLS(tc *tls.Config) string {
	if tc == nil {
		return ""
	}
	return " over TLS"
}

// tlsConfig reads the files of s's TLS settings; nil when TLS is off. Its
// error names the first field whose file fails (Build reports them all
// before, see secrets). Servers' certificates are always verified: there is
// no setting to skip it, which would let anyone on the path answer for
// Redis.
func tlsConfig(s storeSettings) (*tls.Config, error) {
	if !s.tlsOn {
		return nil, nil
	}
	pool, cert, problems := loadTLS(s.tls)
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: %w", problems[0].field, problems[0].err)
	}
	// An empty ServerName is the dialled host's: crypto/tls fills it in.
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.tls.ServerName, RootCAs: pool}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	return tc, nil
}
