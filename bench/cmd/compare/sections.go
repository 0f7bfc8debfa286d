package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/bench/internal/subjects"
	"github.com/redlimit/redlimit/redisstore"
)

// session is what the sections of one run share.
type session struct {
	*runner
	out   io.Writer
	procs *procTable
	env   subjects.Env
	subs  []subjects.Subject // the subjects -only keeps
	ref   int                // the reference concurrency: the middle of -g
	metas []meta
	recs  []record // the measurements written to -csv so far
	took  []string // each section's time
}

// saveCSV adds the section's records to those of the sections before and
// rewrites the -csv file with them all, if there is one.
func (s *session) saveCSV(section string, rs []record) error {
	s.recs = append(s.recs, rs...)
	if s.cfg.csv == "" {
		return nil
	}
	if err := writeCSVFile(s.cfg.csv, s.metas, s.recs); err != nil {
		return err
	}
	s.log("compare: %s: %d rows written (%s)", section, len(s.recs), s.cfg.csv)
	return nil
}

// compare is the "nearly all allowed" section, every subject at every g.
func (s *session) compare(ctx context.Context) error {
	subs := append(slices.Clone(s.subs), filter(s.cfg.only, subjects.RedlimitLeased())...)
	t, rs, notes, err := s.compareTable(ctx, "compare", subs, s.env, s.cfg.clients, s.cfg.gs, 1, 204)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "**Nearly all allowed** (Go benchmark, httptest recorder, direct ServeHTTP):\n\n")
	t.write(s.out)
	writeNotes(s.out, append([]string{kindsNote(s.ref)}, notes...))
	s.writeTargets(rs)
	return s.saveCSV("compare", rs)
}

// tenantWarmPasses is how many times the per-tenant section serves each
// key before a measurement: 100, so that a busy key is measured as it
// runs once busy (on the leased store: holding a lease), and the warm-up
// serves as many requests (10,000) as the per-client sections' one pass
// over 10,000 clients.
const tenantWarmPasses = 100

// tenants is the per-tenant section: -tenants keys, each busy and below
// its limit, at the lowest and the reference g, for redlimit's leased
// store beside its exact Redis store, its memory store and the Redis peers
// of the leased targets.
func (s *session) tenants(ctx context.Context) error {
	gs := []int{lowest(s.cfg.gs)}
	if s.ref != gs[0] {
		gs = append(gs, s.ref)
	}
	t, rs, notes, err := s.compareTable(ctx, "tenants", filter(s.cfg.only, subjects.Tenants()), s.env, s.cfg.tenants, gs, tenantWarmPasses, 204)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "**Per-tenant keys** (%d keys, each busy and below its limit; Go benchmark, httptest recorder, direct ServeHTTP):\n\n", s.cfg.tenants)
	t.write(s.out)
	writeNotes(s.out, append([]string{kindsNote(s.ref), tenantsNote(s.cfg.tenants)}, notes...))
	s.writeTenantTargets(rs, gs)
	return s.saveCSV("tenants", rs)
}

// denied is the "nearly all denied" section, at the reference g, with
// redlimit's denial cache off as one more row. The bare handler and the
// floor, which deny nothing, sit it out.
func (s *session) denied(ctx context.Context) error {
	var denied []subjects.Subject
	for _, sub := range s.subs {
		if sub.Kind != subjects.None && !sub.Floor {
			denied = append(denied, sub)
		}
	}
	denied = append(denied, subjects.RedlimitRedisSubject(algorithms.SlidingWindowCounter, "denial cache off", redisstore.WithDenialCache(0)))
	denv := s.env
	denv.Rate, denv.Period = 1, time.Hour
	t, rs, notes, err := s.compareTable(ctx, "denied", denied, denv, s.cfg.clients, []int{s.ref}, 2, 429)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "**Nearly all denied** (1 per hour, every client already over it; g=%d):\n\n", s.ref)
	t.write(s.out)
	writeNotes(s.out, append([]string{kindsNote(s.ref)}, notes...))
	return s.saveCSV("denied", rs)
}

// sweep is redlimit's Redis store against the number of identities.
func (s *session) sweep(ctx context.Context) error {
	t, notes, err := s.sweepTable(ctx, s.cfg.sweepAlgs, s.env, s.cfg.sweepSizes, s.ref)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "**redlimit's Redis store against the number of identities** (g=%d; Redis used_memory growth per identity after each identity's first request):\n\n", s.ref)
	t.write(s.out)
	writeNotes(s.out, notes)
	return nil
}

// memory is Redis's memory per identity of every Redis subject but the
// floor, which stores nothing.
func (s *session) memory(ctx context.Context) error {
	var redisSubs []subjects.Subject
	for _, sub := range s.subs {
		if sub.Kind == subjects.Redis && !sub.Floor {
			redisSubs = append(redisSubs, sub)
		}
	}
	// A low limit, so that no algorithm's state expires while the
	// identities are added: a full bucket needs no state, and at the
	// high limit a bucket is full again within microseconds.
	menv := s.env
	menv.Rate, menv.Period = 100, time.Hour
	t, err := s.memoryTable(ctx, redisSubs, menv, s.cfg.memoryKeys)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "**Redis memory per identity** (%d identities, one request each, at %d per %v so that no state expires meanwhile; used_memory growth and keys added, divided by identities):\n\n",
		s.cfg.memoryKeys, menv.Rate, menv.Period)
	t.write(s.out)
	fmt.Fprintln(s.out)
	return nil
}

// http is a real net/http server under wrk.
func (s *session) http(ctx context.Context) error {
	t, notes, err := s.httpTable(ctx, httpSubjects(s.cfg.only), s.env, s.procs)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "**Real HTTP**: net/http on loopback, wrk -t%d -c%d -d%v, %d clients by X-Forwarded-For from a trusted loopback proxy:\n\n",
		s.cfg.wrkThreads, s.cfg.conns, s.cfg.httpDuration, s.cfg.clients)
	t.write(s.out)
	writeNotes(s.out, notes)
	return nil
}
