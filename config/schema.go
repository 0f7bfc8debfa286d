package config

import (
	"errors"
	"net/netip"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// ErrInvalid is wrapped by every error about a configuration: a file that
// does not parse or validate, a name the code did not register, a reload
// that would change what only code can change.
var ErrInvalid = errors.New("config: invalid configuration")

// Config is a parsed and validated configuration. Its fields are what the
// file says, with defaults filled in; Build turns it into a Runtime.
type Config struct {
	// Name is the file's name, used in error messages.
	Name string
	// Redis is nil for the memory store.
	Redis *Redis
	// Memory configures the memory store (used when Redis is nil).
	Memory Memory
	// FailurePolicy is the middleware's answer when a limiter returns an
	// error: "closed" (503, the default) or "open".
	FailurePolicy string
	// TrustedProxies are the proxies whose forwarding headers are believed,
	// for keys by IP, for failed credentials and for Skip.
	TrustedProxies []netip.Prefix
	// Shadow is the default of every policy's shadow mode.
	Shadow bool
	// Skip lists the client networks exempt from every policy.
	Skip []netip.Prefix
	// Policies by name, and Routes in the file's order.
	Policies map[string]*Policy
	Routes   []Route

	lines map[string]int // each field's path to its line, for Build's errors
}

// Redis is the Redis store's settings. At most one of URL, URLEnv, Addr,
// Sentinel and Cluster names the connection; with none, the application
// gives the client (WithRedisClient). The client is made from the
// connection, then the credentials, TLS, timeouts and pool size given
// here, with commands bounded by their context's deadline
// (ContextTimeoutEnabled). Passwords never come from the file: only from
// the environment variables it names, read when the configuration is built.
type Redis struct {
	// URL is redis:// or rediss://, with the database if any; a password
	// in it is refused (use URLEnv or PasswordEnv).
	URL string
	// URLEnv names an environment variable holding the URL, read when the
	// configuration is built; when it is unset or empty the memory store is
	// used instead. A URL that does not parse, or holds a '#', fails Build
	// with what is wrong, never any part of the URL; a '/', '?', '#', '%'
	// or '@' in its password must be percent-escaped.
	URLEnv string
	// Addr is a standalone server's host:port.
	Addr string
	// Sentinel reaches the master that Sentinels name.
	Sentinel *Sentinel
	// Cluster reaches a Redis Cluster.
	Cluster *Cluster
	// Username is the ACL user; PasswordEnv names the environment variable
	// holding the password (it must be set when named). With a URL they
	// replace the URL's.
	Username    string
	PasswordEnv string
	// DB is the database of Addr and Sentinel (a URL gives its own;
	// a Cluster has only 0).
	DB int
	// TLS, when not nil, turns TLS on.
	TLS *TLS
	// DialTimeout, ReadTimeout, WriteTimeout and PoolSize override the
	// URL's (and go-redis's defaults) when not zero.
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	PoolSize     int
	// Prefix of every key (redisstore.WithPrefix); "" keeps the default.
	Prefix string
	// Timeout bounds each decision (redisstore.WithTimeout, and the
	// middleware's WithTimeout, which would otherwise cut it short at its
	// own default); 0 keeps the defaults.
	Timeout time.Duration
	// FailureMode is "local" (the default), "open" or "closed".
	FailureMode string
	// Instances is how many instances share the limits (WithInstances).
	Instances int
	// DenialCache is the size of the cache of Redis's denials; nil keeps
	// the default, 0 turns it off.
	DenialCache *int

	at position // the section, for Build's errors
}

// Sentinel is a master reached through Redis Sentinel (go-redis's
// FailoverClient): on a failover the client follows the new master.
type Sentinel struct {
	// MasterName is the name the Sentinels know the master by.
	MasterName string
	// Addrs are the Sentinels' host:port addresses.
	Addrs []string
	// Username and PasswordEnv authenticate to the Sentinels themselves,
	// when they require it; Redis.Username and Redis.PasswordEnv
	// authenticate to the master.
	Username    string
	PasswordEnv string
}

// Cluster is a Redis Cluster (go-redis's ClusterClient).
type Cluster struct {
	// Addrs are host:port addresses of some of its nodes; the client
	// learns the rest from them.
	Addrs []string
}

// TLS configures TLS to Redis (and to the Sentinels). The files are read
// when the configuration is built; relative paths are from the process's
// working directory. Certificates are always verified.
type TLS struct {
	// CAFile is a PEM file of the certificate authorities to trust instead
	// of the system's.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that require one; both or neither.
	CertFile string
	KeyFile  string
	// ServerName is the name to verify the server's certificate against;
	// by default the host being dialled.
	ServerName string
}

// Memory is the memory store's settings.
type Memory struct {
	// MaxKeys bounds the entries (memstore.WithMaxKeys); 0 keeps the
	// default.
	MaxKeys int
}

// Policy is one named set of limits and how requests are keyed for them.
type Policy struct {
	Name      string
	Algorithm algorithms.Algorithm
	Limits    []algorithms.Limit
	Key       Key
	// Cost is what each request consumes (default 1).
	Cost int
	// Shadow is this policy's shadow mode: Config.Shadow unless the
	// policy says otherwise.
	Shadow bool
	// Delay, above 0, holds a request the limit would admit within it for
	// its turn instead of refusing it (middleware.WithDelay); buckets only.
	Delay time.Duration
	// PlanResolver names the code's function (WithPlanResolver) that picks
	// one of Plans for a request; "" when there are no plans.
	PlanResolver string
	// Plans by name: other limits for the requests the resolver assigns
	// to them. A request of no plan, or of a plan not listed, gets the
	// policy's own limits.
	Plans map[string]Plan

	at         position // where the policy starts, for Build's errors
	resolverAt position
}

// Plan is one plan's algorithm and limits.
type Plan struct {
	Algorithm algorithms.Algorithm
	Limits    []algorithms.Limit
}

// Key kinds.
const (
	// KeyIP keys by client address (keyfunc.IP, behind TrustedProxies).
	KeyIP = "ip"
	// KeyAPIKey keys by a known API key (keyfunc.APIKey with KnownAPIKey).
	KeyAPIKey = "api_key"
	// KeyFunc keys by a key function registered in code (WithKeyFunc).
	KeyFunc = "func"
)

// Key says how a policy keys requests.
type Key struct {
	// Kind is KeyIP, KeyAPIKey or KeyFunc.
	Kind string
	// IPv6Prefix is the prefix IPv6 clients are keyed by (KeyIP): 32
	// (keyfunc.MinIPv6Prefix) to 128. Parse fills in
	// keyfunc.DefaultIPv6Prefix when the file gives none; in a Config made
	// in code it must be set, since Build refuses 0 like any length
	// outside 32..128.
	IPv6Prefix int
	// Header carries the API key (KeyAPIKey; default X-API-Key).
	Header string
	// KnownKeys names the check of API keys registered in code
	// (WithKnownKeys); required for KeyAPIKey, so made-up keys never get
	// fresh quotas.
	KnownKeys string
	// Func names the key function registered in code (KeyFunc).
	Func string

	at position
}

// Describe names the key kind as routes list it: "ip", "api_key", or the
// registered function's name.
func (k Key) Describe() string {
	if k.Kind == KeyFunc {
		return k.Func
	}
	return k.Kind
}

// Route assigns a policy to a method and chi pattern.
type Route struct {
	Method string
	Path   string
	Policy string

	at position
}

// ID is the route as Mount's handlers map names it: "GET /api/items".
func (r Route) ID() string { return r.Method + " " + r.Path }

// position is a place in the file, for errors found after parsing.
type position struct {
	line int
	path string
}
