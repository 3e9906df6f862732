// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package guard is the sse_capture proxy's guard: on streaming calls it
// races attempts on the primary and alternate upstreams before the first
// content chunk reaches the client (TTFT hedging, failover, a TTFT
// timeout), and watches the committed stream for stalls after it. Every
// decision is hedgecore's, the same code as the hedge client's: the guard
// only carries it out on HTTP requests and bodies.
package guard // import "github.com/streamstall/streamstall/receiver/ssecapture/internal/guard"

import (
	"net/http"
	"net/url"
	"path"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/streamstall/streamstall/internal/hedgecore"
)

// Upstream is an alternate upstream: where its requests go, how they are
// carried (confighttp's client, with its headers and TLS), what its
// attempts' spans say in server.address and server.port, and what it does
// with the client's credentials (credentials.go).
type Upstream struct {
	URL       *url.URL
	Transport http.RoundTripper
	Address   string
	Port      int64
	// ForwardClientCredentials sends it the client's credential headers;
	// without it they reach the primary only.
	ForwardClientCredentials bool
	// OwnCredential is set when its client settings carry a credential of
	// their own (a credential header, an authenticator, a TLS client
	// certificate): the operator's, not the client's.
	OwnCredential bool
	// ServeCredentialFailures lets it, with its own credential, take a
	// call whose client credential was refused for auth or quota.
	ServeCredentialFailures bool
}

// Rule is the guard's settings for the models it matches. Durations of
// zero are off.
type Rule struct {
	// Model is a path.Match glob on gen_ai.request.model; the default rule
	// has none.
	Model                 string
	StallTimeout          time.Duration
	ReasoningStallTimeout time.Duration
	// AutoStall learns the stall timeouts set to AutoTimeout from the
	// proxy's own streams.
	AutoStall   bool
	TTFTTimeout time.Duration
	// Delay is the fixed hedge delay; 0 without AutoDelay: no TTFT hedge.
	Delay         time.Duration
	AutoDelay     bool
	Quantile      float64
	FallbackDelay time.Duration
	MinSamples    int
	MaxAttempts   int
	// Budgets are the buckets the rule's calls draw on, one per client
	// (ClientOf) under a shared cap; shared with the rules that have none
	// of their own. nil: no budget.
	Budgets *hedgecore.ClientBudgets
	// IPv6Prefix is how many leading bits of an IPv6 client address name
	// its client for Budgets (ClientOf; 0: DefaultIPv6Prefix).
	IPv6Prefix int
	Alternates []Upstream
}

// AutoStall shapes learned stall timeouts.
type AutoStall struct {
	Multiple float64
	Floor    time.Duration
	// Ceiling bounds a learned timeout from above; 0: none.
	Ceiling    time.Duration
	MinSamples int
}

// Settings configure a Guard.
type Settings struct {
	Default   Rule
	Models    []Rule
	AutoStall AutoStall
	Clock     clockwork.Clock
	// Fleet, when set, is where the auto values come from first: a
	// hedge_advisor's advice for the call's provider and model.
	Fleet *Fleet
	// PrimaryCredential is what the primary upstream's own client settings
	// authenticate with.
	PrimaryCredential PrimaryCredential
}

// PrimaryCredential says whether the primary upstream's client settings
// carry a credential of their own (the operator's key in headers, an
// authenticator, a TLS client certificate) and the credential headers they
// set on every request (a client's credential under one of those names
// never reaches the primary). The primary's refusal of a credential is the
// client's (the call then ends with it, never served on an alternate's
// credential) unless the primary has its own and the client's did not
// reach it: then it is the operator's credential that was refused, an
// ordinary failure the alternates may answer.
type PrimaryCredential struct {
	Own     bool
	Headers []string
}

// maxLearnedModels bounds the models a rule learns delays and gaps for
// apart; the models past it learn together, in the rule's shared policy. A
// request names its model, so without a bound a client could make the
// proxy keep an estimator per name it invents; and a model is kept only
// once one of its calls brought content (Policy.admit), so that names a
// client invents, each answered with an error, cannot fill the bound and
// leave the models that come after them without a policy of their own, and
// without the fleet's advice for them.
const maxLearnedModels = 1000

// Guard holds the policies of every rule and the state calls share: the
// budgets and what the rules learn.
type Guard struct {
	def       *rule
	models    []*rule
	clock     clockwork.Clock
	autoStall AutoStall
	fleet     *Fleet
	primary   PrimaryCredential
}

type rule struct {
	Rule
	shared *Policy
	mu     sync.Mutex
	// perModel holds the policies of the models a learning rule has seen,
	// by provider and model (the key of the fleet's advice).
	perModel map[modelKey]*Policy
}

// Policy is what one call is guarded by: hedgecore's policy and the
// upstreams its attempts go to (source 0, the primary, is the proxy's own).
type Policy struct {
	hp         *hedgecore.Policy
	budgets    *hedgecore.ClientBudgets
	ipv6Prefix int
	alternates []Upstream
	ttft       bool // a TTFT timeout is set
	// gaps learns the stall timeouts set to auto; the policy's watchdog
	// takes its timeouts from it.
	gaps *gapLearner
	// fleet, provider and model are where an auto hedge delay is asked
	// for first (fleet nil: nowhere); minSamples is what the advice needs.
	fleet           *Fleet
	provider, model string
	minSamples      int
	autoDelay       bool
	// rl and key are the rule and the model of a per-model policy, kept in
	// rl.perModel once admitted; rl is nil for a shared policy.
	rl  *rule
	key modelKey
}

type modelKey struct{ provider, model string }

// New returns the guard of set.
func New(set Settings) *Guard {
	g := &Guard{clock: set.Clock, autoStall: set.AutoStall, fleet: set.Fleet, primary: set.PrimaryCredential}
	g.def = g.newRule(set.Default)
	for _, r := range set.Models {
		g.models = append(g.models, g.newRule(r))
	}
	return g
}

func (g *Guard) newRule(r Rule) *rule {
	rl := &rule{Rule: r}
	// The shared policy learns for models past maxLearnedModels together:
	// it stands for no model the fleet advises on.
	rl.shared = g.newPolicy(&rl.Rule, modelKey{})
	if r.AutoDelay || r.AutoStall {
		rl.perModel = map[modelKey]*Policy{}
	}
	return rl
}

func (g *Guard) newPolicy(r *Rule, k modelKey) *Policy {
	cfg := hedgecore.Config{
		Sources:               1 + len(r.Alternates),
		Delay:                 r.Delay,
		MaxAttempts:           r.MaxAttempts,
		StallTimeout:          max(r.StallTimeout, 0), // auto (< 0) is the gap learner's
		ReasoningStallTimeout: max(r.ReasoningStallTimeout, 0),
		TTFTTimeout:           r.TTFTTimeout,
		NoTTFTHedge:           r.Delay <= 0 && !r.AutoDelay,
	}
	if r.AutoDelay {
		cfg.Adaptive, cfg.Quantile, cfg.Delay, cfg.MinSamples = true, r.Quantile, r.FallbackDelay, r.MinSamples
	}
	p := &Policy{budgets: r.Budgets, ipv6Prefix: r.IPv6Prefix, alternates: r.Alternates, ttft: r.TTFTTimeout > 0}
	if k.model != "" {
		p.fleet, p.provider, p.model, p.minSamples, p.autoDelay = g.fleet, k.provider, k.model, r.MinSamples, r.AutoDelay
	}
	if r.AutoStall {
		p.gaps = newGapLearner(g.autoStall, r.StallTimeout, r.ReasoningStallTimeout,
			fleetGaps{fleet: p.fleet, provider: k.provider, model: k.model, clock: g.clock})
		cfg.StallTimeouts = p.gaps
	}
	p.hp = hedgecore.NewPolicy(cfg)
	return p
}

// Alternates are the upstreams other than the primary that the policy's
// calls may go to.
func (p *Policy) Alternates() []Upstream { return p.alternates }

// For returns the policy of a call to model of provider: the first rule
// whose glob matches the model, else the default one.
func (g *Guard) For(provider, model string) *Policy {
	r := g.def
	for _, m := range g.models {
		if ok, _ := path.Match(m.Model, model); ok {
			r = m
			break
		}
	}
	if r.perModel == nil {
		return r.shared
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := modelKey{provider, model}
	if p, ok := r.perModel[k]; ok {
		return p
	}
	if len(r.perModel) >= maxLearnedModels {
		return r.shared
	}
	// Not kept yet: the call learns in a policy of the model's own, kept
	// if the call brings content.
	p := g.newPolicy(&r.Rule, k)
	p.rl, p.key = r, k
	return p
}

// admit keeps a per-model policy for its model's later calls, once a call
// guarded by it brought content: the model exists upstream. A policy kept
// already, or one another call of the same model got kept first, or a
// rule at its bound, leaves things as they are.
func (p *Policy) admit() {
	r := p.rl
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.perModel[p.key]; !ok && len(r.perModel) < maxLearnedModels {
		r.perModel[p.key] = p
	}
}

// takeFleetDelay installs the fleet's hedge delay for the policy's model
// as every source's fleet advice (hedgecore blends it with the local
// estimate), or removes it when the advice is stale or has fewer attempts
// than min_samples: the local estimate, then the fallback, stand in.
func (p *Policy) takeFleetDelay(now int64) {
	if p.fleet == nil || !p.autoDelay {
		return
	}
	var fa *hedgecore.FleetAdvice
	if w, ok := p.fleet.HedgeDelay(now, p.provider, p.model); ok && w.Samples >= int64(p.minSamples) {
		fa = &hedgecore.FleetAdvice{Delay: w.Nanos, Samples: w.Samples}
	}
	for i := range 1 + len(p.alternates) {
		p.hp.SetFleet(i, fa)
	}
}

// StallTimeoutSource is where the stall timeout in force for a stream in
// that state comes from; StallConfigured when it is not learned.
func (p *Policy) StallTimeoutSource(answered bool) StallSource {
	if p.gaps == nil {
		return StallConfigured
	}
	_, src := p.gaps.timeout(answered)
	return src
}

// StallTimeout is the watchdog's timeout of a stream that has delivered an
// answer chunk, or only reasoning chunks; 0 when off.
func (p *Policy) StallTimeout(answered bool) time.Duration {
	return time.Duration(p.hp.StallTimeoutFor(answered))
}

// watches reports whether the committed streams of the policy are watched.
func (p *Policy) watches() bool {
	return p.StallTimeout(true) > 0 || p.StallTimeout(false) > 0
}
