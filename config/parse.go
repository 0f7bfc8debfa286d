package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/redlimit/redlimit/keyfunc"
)

// MaxFileSize bounds a configuration file: real ones are a few kilobytes.
const MaxFileSize = 1 << 20

// Load reads and parses the file at path (see Parse). Errors name the
// file by its base name.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, filepath.Base(path), err)
	}
	return Parse(data, filepath.Base(path))
}

// Parse parses and validates a configuration; name (a file name) starts
// every error message. Every problem found is reported, each as
// "name:line: field: what is wrong", joined; each wraps ErrInvalid.
func Parse(data []byte, name string) (*Config, error) {
	d := &decoder{name: name}
	if len(data) > MaxFileSize {
		return nil, d.errAt(1, "", "larger than %d bytes", MaxFileSize)
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, d.errAt(1, "", "empty file")
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, d.errAt(extra.Line, "", "more than one YAML document")
	}
	if n := findAlias(&root); n != nil {
		return nil, d.errAt(n.Line, "", "YAML anchors and aliases are not supported: write each value out")
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	c := &Config{Name: name, FailurePolicy: "closed", Policies: map[string]*Policy{}}
	var policies, routes *yaml.Node
	var redis *Redis
	d.mapping(doc, "",
		field{"redis", func(n *yaml.Node, path string) { redis = d.redis(n, path) }},
		field{"memory", func(n *yaml.Node, path string) {
			d.mapping(n, path, field{"max_keys", d.integer(&c.Memory.MaxKeys, "max_keys")})
		}},
		field{"failure_policy", d.oneOf(&c.FailurePolicy, "closed", "open")},
		field{"trusted_proxies", d.prefixes(&c.TrustedProxies)},
		field{"shadow", d.boolean(&c.Shadow)},
		field{"skip", func(n *yaml.Node, path string) {
			d.mapping(n, path, field{"networks", d.prefixes(&c.Skip)})
		}},
		field{"policies", func(n *yaml.Node, _ string) { policies = n }},
		field{"routes", func(n *yaml.Node, _ string) { routes = n }},
	)
	c.Redis = redis
	c.lines = d.lines
	// Policies first: their shadow default is the file's, wherever it is.
	if policies == nil {
		d.fail(doc, "policies", "missing: name at least one policy")
	} else {
		d.entries(policies, "policies", func(k, v *yaml.Node, path string) {
			if p := d.policy(k, v, path, c.Shadow); p != nil {
				c.Policies[p.Name] = p
			}
		})
	}
	if policies != nil && policies.Kind == yaml.MappingNode && len(policies.Content) == 0 {
		d.fail(policies, "policies", "empty: name at least one policy")
	}
	if routes == nil {
		d.fail(doc, "routes", "missing: assign at least one route to a policy")
	} else if d.routes(routes, c); routes.Kind == yaml.SequenceNode && len(routes.Content) == 0 {
		d.fail(routes, "routes", "empty: assign at least one route to a policy")
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// findAlias returns the first node that is an alias or carries an anchor.
func findAlias(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return n
	}
	for _, c := range n.Content {
		if a := findAlias(c); a != nil {
			return a
		}
	}
	return nil
}

// key decodes a policy's key: "ip", or a mapping with a kind.
func (d *decoder) key(n *yaml.Node, path string) Key {
	k := Key{IPv6Prefix: keyfunc.DefaultIPv6Prefix, Header: "X-API-Key", at: position{n.Line, path}}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		d.fail(n, path, "missing: ip, {kind: api_key, ...} or {kind: func, name: ...}")
		return k
	}
	if n.Kind == yaml.ScalarNode {
		if n.Value != KeyIP {
			d.fail(n, path, "%q: only ip may be written alone; write {kind: api_key, ...} or {kind: func, name: ...}", n.Value)
		}
		k.Kind = KeyIP
		return k
	}
	d.mapping(n, path,
		field{"kind", d.oneOf(&k.Kind, KeyIP, KeyAPIKey, KeyFunc)},
		field{"ipv6_prefix", d.integer(&k.IPv6Prefix, "ipv6_prefix")},
		field{"header", d.str(&k.Header)},
		field{"known_keys", d.str(&k.KnownKeys)},
		field{"name", d.str(&k.Func)},
	)
	if n.Kind != yaml.MappingNode {
		return k
	}
	given := func(name string) bool {
		for i := 0; i < len(n.Content); i += 2 {
			if n.Content[i].Value == name {
				return true
			}
		}
		return false
	}
	allowed := map[string][]string{
		KeyIP:     {"kind", "ipv6_prefix"},
		KeyAPIKey: {"kind", "header", "known_keys"},
		KeyFunc:   {"kind", "name"},
	}
	switch {
	case !given("kind"):
		d.fail(n, join(path, "kind"), "missing: ip, api_key or func")
		return k
	case k.Kind == "":
		return k // reported
	}
	for _, f := range []string{"ipv6_prefix", "header", "known_keys", "name"} {
		if given(f) && !contains(allowed[k.Kind], f) {
			d.fail(n, join(path, f), "does not apply to kind %s", k.Kind)
		}
	}
	switch k.Kind {
	case KeyAPIKey:
		if !validHeaderName(k.Header) {
			d.fail(n, join(path, "header"), "%q is not a header name", k.Header)
		}
		if k.KnownKeys == "" {
			d.fail(n, join(path, "known_keys"), "missing: name the check of API keys registered with WithKnownKeys (otherwise made-up keys get fresh quotas)")
		}
	case KeyFunc:
		if k.Func == "" {
			d.fail(n, join(path, "name"), "missing: name the key function registered with WithKeyFunc")
		}
	}
	return k
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// validHeaderName reports whether s is an HTTP token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
