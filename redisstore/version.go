package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/redlimit/redlimit/algorithms"
)

// minRedisMajor is the oldest Redis major version the scripts run on. They
// read the server's clock (TIME) and then write, which a server replicates
// only by the commands' effects: the default from Redis 5.0 on. Older
// servers refuse such a write ("Write commands not allowed after non
// deterministic commands"); the scripts also use HSET with several fields
// and UNLINK (Redis 4.0).
const minRedisMajor = 5

// ErrVersion reports a Redis server older than 5.0, which the scripts
// need, found by CheckVersion or by a script call's error.
var ErrVersion = errors.New("redisstore: Redis server too old: redlimit needs Redis 5.0 or later")

// CheckVersion asks the server (every master of a Cluster) for its
// version and returns an error wrapping ErrVersion when it is older
// than 5.0, or Redis's error, wrapped, when it cannot tell. Call
// it at startup to fail early: a store on an older server otherwise fails
// each decision with ErrVersion and decides by its FailureMode.
func CheckVersion(ctx context.Context, client redis.UniversalClient) error {
	if client == nil {
		return fmt.Errorf("%w: nil Redis client", algorithms.ErrInvalidOption)
	}
	check := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("redisstore: version: %w", err)
		}
		return checkVersion(info)
	}
	switch c := client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, check)
	case *redis.Client:
		return check(ctx, c)
	}
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("redisstore: version: %w", err)
	}
	return checkVersion(info)
}

// checkVersion reads redis_version from the text of INFO server.
func checkVersion(info string) error {
	for line := range strings.Lines(info) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		major, _, _ := strings.Cut(v, ".")
		n, err := strconv.Atoi(major)
		if err != nil {
			return fmt.Errorf("%w: unreadable version %q", ErrVersion, v)
		}
		if n < minRedisMajor {
			return fmt.Errorf("%w: the server runs %s", ErrVersion, v)
		}
		return nil
	}
	return fmt.Errorf("%w: INFO server names no redis_version", ErrVersion)
}

// scriptError wraps the error of a script call, adding ErrVersion when
// it is what a server too old for the scripts answers.
func scriptError(alg algorithms.Algorithm, err error) error {
	msg := strings.ToLower(err.Error())
	var redisErr redis.Error
	if errors.As(err, &redisErr) && (strings.Contains(msg, "non deterministic commands") ||
		strings.Contains(msg, "unknown command") && (strings.Contains(msg, "eval") || strings.Contains(msg, "unlink")) ||
		strings.Contains(msg, "wrong number of arguments for 'hset'")) {
		return fmt.Errorf("redisstore: redis %s: %w: %w", alg, ErrVersion, err)
	}
	return fmt.Errorf("redisstore: redis %s: %w", alg, err)
}
