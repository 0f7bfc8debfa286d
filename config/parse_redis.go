package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redlimit/redlimit/internal/redisurl"
	"github.com/redlimit/redlimit/redisstore"
	"go.yaml.in/yaml/v3"
)

// connections are the fields that name where Redis is, at most one given.
var connections = []string{"url", "url_env", "addr", "sentinel", "cluster"}

// noPassword refuses a password written in the file.
const noPassword = "a password never goes in the file: name the environment variable holding it with password_env"

// redis decodes the redis section.
func (d *decoder) redis(n *yaml.Node, path string) *Redis {
	r := &Redis{FailureMode: "local", Instances: 1, at: position{n.Line, path}}
	d.mapping(n, path,
		field{"url", d.str(&r.URL)},
		field{"url_env", d.envName(&r.URLEnv)},
		field{"addr", d.addr(&r.Addr)},
		field{"sentinel", func(n *yaml.Node, path string) { r.Sentinel = d.sentinel(n, path) }},
		field{"cluster", func(n *yaml.Node, path string) { r.Cluster = d.cluster(n, path) }},
		field{"username", d.str(&r.Username)},
		field{"password_env", d.envName(&r.PasswordEnv)},
		field{"password", func(n *yaml.Node, path string) { d.fail(n, path, noPassword) }},
		field{"db", d.integer(&r.DB, "db")},
		field{"tls", func(n *yaml.Node, path string) { r.TLS = d.tls(n, path) }},
		field{"dial_timeout", d.duration(&r.DialTimeout)},
		field{"read_timeout", d.duration(&r.ReadTimeout)},
		field{"write_timeout", d.duration(&r.WriteTimeout)},
		field{"pool_size", d.integer(&r.PoolSize, "pool_size")},
		field{"prefix", d.str(&r.Prefix)},
		field{"timeout", d.duration(&r.Timeout)},
		field{"failure_mode", d.oneOf(&r.FailureMode, "local", "open", "closed")},
		field{"instances", d.integer(&r.Instances, "instances")},
		field{"denial_cache", func(n *yaml.Node, path string) {
			var size int
			d.integer(&size, "denial_cache")(n, path)
			r.DenialCache = &size
		}},
	)
	if n.Kind != yaml.MappingNode {
		return r
	}
	// None given: the application gives the client (WithRedisClient),
	// which Build checks.
	var given []string
	for _, c := range connections {
		if valueNode(n, c) != n {
			given = append(given, c)
		}
	}
	if len(given) > 1 {
		d.fail(n, path, "give one of %s, not %s", strings.Join(connections, ", "), strings.Join(given, " and "))
	}
	if r.URL != "" {
		if err := checkRedisURL(r.URL); err != nil {
			d.fail(valueNode(n, "url"), join(path, "url"), "%v", err)
		} else if u, _ := url.Parse(r.URL); u.User != nil {
			if _, has := u.User.Password(); has {
				d.fail(valueNode(n, "url"), join(path, "url"), "holds a password, which never goes in the file: "+
					"put the whole URL in an environment variable (url_env), or the password alone (password_env)")
			}
		}
	}
	if dn := valueNode(n, "db"); dn != n {
		switch {
		case r.URL != "" || r.URLEnv != "":
			d.fail(dn, join(path, "db"), "the URL gives the database")
		case r.Cluster != nil:
			d.fail(dn, join(path, "db"), "a Redis Cluster has only database 0")
		}
	}
	if r.Prefix != "" {
		if err := redisstore.CheckPrefix(r.Prefix); err != nil {
			d.fail(valueNode(n, "prefix"), join(path, "prefix"), "must be 1 to 64 bytes without braces")
		}
	}
	return r
}

// sentinel decodes redis.sentinel.
func (d *decoder) sentinel(n *yaml.Node, path string) *Sentinel {
	s := &Sentinel{}
	if !d.mapping(n, path,
		field{"master_name", d.str(&s.MasterName)},
		field{"addrs", d.addrs(&s.Addrs)},
		field{"username", d.str(&s.Username)},
		field{"password_env", d.envName(&s.PasswordEnv)},
		field{"password", func(n *yaml.Node, path string) { d.fail(n, path, noPassword) }},
	) {
		return s
	}
	if s.MasterName == "" {
		d.fail(n, join(path, "master_name"), "missing: the name the Sentinels know the master by")
	}
	if valueNode(n, "addrs") == n {
		d.fail(n, join(path, "addrs"), "missing: the Sentinels' host:port addresses")
	}
	return s
}

// cluster decodes redis.cluster.
func (d *decoder) cluster(n *yaml.Node, path string) *Cluster {
	c := &Cluster{}
	if d.mapping(n, path, field{"addrs", d.addrs(&c.Addrs)}) && valueNode(n, "addrs") == n {
		d.fail(n, join(path, "addrs"), "missing: host:port addresses of some of the cluster's nodes")
	}
	return c
}

// tls decodes redis.tls.
func (d *decoder) tls(n *yaml.Node, path string) *TLS {
	t := &TLS{}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return t // "tls:" alone: TLS with the system's authorities
	}
	if d.mapping(n, path,
		field{"ca_file", d.str(&t.CAFile)},
		field{"cert_file", d.str(&t.CertFile)},
		field{"key_file", d.str(&t.KeyFile)},
		field{"server_name", d.str(&t.ServerName)},
	) && (t.CertFile == "") != (t.KeyFile == "") {
		d.fail(n, path, "give cert_file and key_file together")
	}
	return t
}

// envName decodes the name of an environment variable.
func (d *decoder) envName(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path)
		if ok && (s == "" || strings.ContainsAny(s, "=\x00")) {
			d.fail(n, path, "%q is not the name of an environment variable", s)
			return
		}
		*dst = s
	}
}

// addr decodes a host:port address.
func (d *decoder) addr(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if err := checkAddr(s); err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		*dst = s
	}
}

// addrs decodes a non-empty list of host:port addresses.
func (d *decoder) addrs(dst *[]string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		d.list(n, path, func(item *yaml.Node, path string) {
			var a string
			d.addr(&a)(item, path)
			if a != "" {
				*dst = append(*dst, a)
			}
		})
		if n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
			d.fail(n, path, "empty: give at least one host:port")
		}
	}
}

// checkAddr reports whether s is host:port with a port number.
func checkAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return fmt.Errorf("want host:port, got %q", s)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: the port is not a number from 1 to 65535", s)
	}
	return nil
}

// checkRedisURL parses a Redis URL as the store will. Its errors never
// repeat any part of the URL, which may hold a password.
func checkRedisURL(s string) error {
	_, err := redisurl.Parse(s)
	return err
}
