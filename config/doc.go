// Package config builds redlimit's middlewares from a YAML file: policies
// (an algorithm, its limits, how requests are keyed, a cost, plans), the
// routes they guard, the store (memory, or Redis standalone, through
// Sentinel or a Cluster, with TLS), trusted proxies, shadow mode and
// networks exempt from limits. The routes mount on chi (Mount) or on a
// net/http ServeMux (MountMux); the store can also be the application's
// go-redis client (WithRedisClient) or store (WithStore).
//
//	cfg, err := config.Load("redlimit.yaml")           // errors name file:line: field
//	rt, err := cfg.Build(config.WithKeyFunc("jwt", verifyJWT), config.WithLogger(logger))
//	r := chi.NewRouter()
//	err = rt.Mount(r, map[string]http.Handler{"GET /api/items": items, "POST /login": login})
//	// on SIGHUP:
//	err = rt.ReloadFile("redlimit.yaml")                // a bad file keeps the running set
//
// A file looks like this:
//
//	redis:
//	  url_env: REDIS_URL            # or url, addr, sentinel or cluster; no redis: memory store
//	  password_env: REDIS_PASSWORD  # passwords only from the environment
//	  tls: {ca_file: ca.pem}        # optional; servers are always verified
//	  timeout: 100ms                # per decision
//	  failure_mode: local           # local, open or closed
//	trusted_proxies: [10.0.0.0/8]
//	skip:
//	  networks: [192.0.2.0/24]      # never limited: a trust decision
//	policies:
//	  search:
//	    algorithm: sliding_window_counter
//	    limits:
//	      - {rate: 5, period: 1s}
//	      - {rate: 100, period: 1m}
//	    key: ip                     # or {kind: ip, ipv6_prefix: 48}
//	  reports:
//	    algorithm: token_bucket
//	    limits: [{rate: 30, period: 1m, burst: 5}]
//	    key: {kind: api_key, header: X-API-Key, known_keys: customers}
//	routes:
//	  - {method: GET, path: /api/search, policy: search}
//	  - {method: GET, path: /api/reports, policy: reports}
//
// What needs code is registered by name when building: key functions
// (WithKeyFunc, for JWTs or anything else), the checks of API keys
// (WithKnownKeys) and plan resolvers (WithPlanResolver). The file only
// names them, so secrets stay out of it.
//
// Every error Parse, Load, Build and the reloads return wraps ErrInvalid
// and, where it comes from the file, starts with the file's name, the line
// and the field: "redlimit.yaml:12: policies.search.limits[0].period: ...".
// Unknown fields, YAML anchors and aliases are refused, and so is a
// password written in the file. The command cmd/redlimit-config checks
// files the same way, for CI pipelines.
//
// A Runtime serves the mounted routes behind the policies of one
// configuration at a time and swaps to a new one atomically: a request
// runs wholly under the old set or wholly under the new one, and none
// fails for the swap. The store is kept when its settings did not change,
// so counts survive every reload that keeps a policy's algorithm and
// limits. Runtime.Operator serves the operator package's handler on the
// policies in force, and follows the swaps too.
//
// It is a module of its own, github.com/redlimit/redlimit/config, so that
// only the programs that use it compile the YAML parser.
package config
