// Command redlimit-config checks redlimit configuration files, for CI
// pipelines: each file is parsed and built as config.Load and Build would,
// and its store and the limits of each route are printed.
//
//	redlimit-config [-store] file.yaml...
//
// The names a file leaves to code (key functions, checks of API keys, plan
// resolvers) are taken as registered: the application's Build checks them.
// The limiters are built on a memory store unless -store is given, which
// makes the store the file names as Build would, reading the environment
// variables it names and its TLS files, without connecting to Redis.
//
// The exit status is 0 when every file is valid, 1 when one is not, and 2
// on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/config"
	"github.com/redlimit/redlimit/memstore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run checks the files args names, printing to stdout what they build and
// to stderr what is wrong, and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redlimit-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.Bool("store", false, "also make the store the file names (reads its environment variables and TLS files; does not connect)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: redlimit-config [-store] file.yaml...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	status := 0
	for _, path := range fs.Args() {
		if err := check(path, *store, stdout); err != nil {
			fmt.Fprintf(stderr, "%s: invalid:\n%v\n", path, err)
			status = 1
		}
	}
	return status
}

// check loads and builds the file at path and prints what it builds.
func check(path string, useStore bool, w io.Writer) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	where := cfg.DescribeStore()
	opts := append(stubs(cfg), config.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if !useStore {
		cfg.Redis, cfg.Memory = nil, config.Memory{}
		store, err := memstore.New()
		if err != nil {
			return err
		}
		opts = append(opts, config.WithStore(store))
	}
	rt, err := cfg.Build(opts...)
	if err != nil {
		return err
	}
	defer rt.Close(context.Background()) // no request was served: nothing is owed
	if useStore {
		where = rt.Store()
	}
	fmt.Fprintf(w, "%s: valid\n  store: %s\n", path, where)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range cfg.Describe() {
		fmt.Fprintf(tw, "  %s %s\t%s\t%s\n", r.Method, r.Path, r.Policy, route(r))
		names := make([]string, 0, len(r.Plans))
		for name := range r.Plans {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := r.Plans[name]
			fmt.Fprintf(tw, "\t  plan %s\t%s %s\n", name, p.Algorithm, limits(p.Limits))
		}
	}
	return tw.Flush()
}

// route describes a route's policy in one line.
func route(r config.RouteInfo) string {
	s := fmt.Sprintf("%s %s, key %s", r.Algorithm, limits(r.Limits), r.Key)
	if r.Cost != 1 {
		s += fmt.Sprintf(", cost %d", r.Cost)
	}
	if r.Delay > 0 {
		s += ", delay up to " + period(r.Delay)
	}
	if r.Shadow {
		s += ", shadow (never refuses)"
	}
	return s
}

// limits formats limits as "5/1s, 100/1m burst 20".
func limits(ls []algorithms.Limit) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%d/%s", l.Rate, period(l.Period))
		if l.Burst > 0 {
			parts[i] += fmt.Sprintf(" burst %d", l.Burst)
		}
	}
	return strings.Join(parts, ", ")
}

// period drops a duration's zero minutes and seconds: "1m", not "1m0s".
func period(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// errStub is what the stand-ins for the application's functions return;
// they are built, never called.
var errStub = errors.New("redlimit-config: a stand-in for the application's function")

// stubs registers a stand-in for every name cfg leaves to code.
func stubs(cfg *config.Config) []config.Option {
	var opts []config.Option
	for _, p := range cfg.Policies {
		switch p.Key.Kind {
		case config.KeyFunc:
			opts = append(opts, config.WithKeyFunc(p.Key.Func, func(*http.Request) (string, error) { return "", errStub }))
		case config.KeyAPIKey:
			opts = append(opts, config.WithKnownKeys(p.Key.KnownKeys, func(string) bool { return false }))
		}
		if p.PlanResolver != "" {
			opts = append(opts, config.WithPlanResolver(p.PlanResolver, func(*http.Request, string) string { return "" }))
		}
	}
	return opts
}
