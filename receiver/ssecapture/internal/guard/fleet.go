// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/internal/advice"
)

// fleetGapQuantile is the advisor's reported gap quantile that a learned
// stall timeout is a multiple of: the one the guard's own learner uses.
const fleetGapQuantile = "p999"

// FleetSettings configure the advice a guard takes from a hedge_advisor.
type FleetSettings struct {
	// URL is the advisor's advice URL (its base with advice.Path).
	URL    string
	Client *http.Client
	// Interval is the time between two fetches, Timeout bounds one.
	Interval time.Duration
	Timeout  time.Duration
	// MaxAge is how long a fetched advice is used: past it (the advisor
	// unreachable for that long) the guard falls back to its own learning.
	MaxAge time.Duration
	Clock  clockwork.Clock
	Logger *zap.Logger
}

// Fleet keeps a hedge_advisor's advice fresh for the guard: the fleet's
// hedge delays and gaps per provider and model, learned from the attempts
// of every client and proxy that reports to the advisor, so that a proxy
// has the fleet's values on a model's first call and after a restart. A
// fetch that fails keeps the last good advice until it is MaxAge old.
// Lookups are lock-free: the poller swaps in a whole new table.
type Fleet struct {
	set   FleetSettings
	table atomic.Pointer[fleetTable]

	cancel context.CancelFunc
	done   chan struct{}
	stop   sync.Once
	// failing is set from a failed fetch to the next good one; only the
	// poller (Start's first fetch, then its goroutine) touches it.
	failing bool
}

// fleetTable is one fetched advice, by provider (lower case) and model.
type fleetTable struct {
	at      int64 // when it was fetched, unix nanoseconds
	entries map[fleetKey]fleetEntry
}

type fleetKey struct{ provider, model string }

type fleetEntry struct {
	delay, gap       advice.Weighted
	hasDelay, hasGap bool
}

// NewFleet returns a fleet advice source; Start begins fetching.
func NewFleet(set FleetSettings) *Fleet {
	if set.Clock == nil {
		set.Clock = clockwork.NewRealClock()
	}
	if set.Logger == nil {
		set.Logger = zap.NewNop()
	}
	if set.Client == nil {
		set.Client = http.DefaultClient
	}
	return &Fleet{set: set}
}

// Start fetches the advice once, waiting at most Timeout, so that the
// first call already has it; then a goroutine fetches it every Interval
// until Shutdown. It never fails: an advisor that cannot be reached leaves
// the guard on its own learning.
func (f *Fleet) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done = make(chan struct{})
	f.refresh(ctx)
	ticker := f.set.Clock.NewTicker(f.set.Interval)
	go func() {
		defer close(f.done)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.Chan():
				f.refresh(ctx)
			}
		}
	}()
}

// Shutdown stops the fetches and waits for the goroutine; it is safe
// without Start and more than once.
func (f *Fleet) Shutdown() {
	f.stop.Do(func() {
		if f.cancel != nil {
			f.cancel()
			<-f.done
		}
	})
}

func (f *Fleet) refresh(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, f.set.Timeout)
	defer cancel()
	resp, err := advice.Fetch(ctx, f.set.Client, f.set.URL)
	if err != nil {
		if parent.Err() == nil {
			f.fetchFailed(err)
		}
		return
	}
	if f.failing {
		f.failing = false
		f.set.Logger.Info("hedge advice fetched again from the hedge_advisor")
	}
	// The entries of each key, gathered in one pass and combined once: the
	// advice holds up to max_series keys, and combining each key over
	// every entry would cost their square, outside the fetch's timeout.
	groups := make(map[fleetKey][]advice.Entry, len(resp.Advice))
	for i := range resp.Advice {
		k := fleetKey{strings.ToLower(resp.Advice[i].Provider), resp.Advice[i].Model}
		groups[k] = append(groups[k], resp.Advice[i])
	}
	t := &fleetTable{at: f.set.Clock.Now().UnixNano(), entries: make(map[fleetKey]fleetEntry, len(groups))}
	for k, entries := range groups {
		var e fleetEntry
		e.delay, e.hasDelay = advice.HedgeDelay(entries, k.provider, k.model)
		e.gap, e.hasGap = advice.Gap(entries, k.provider, k.model, fleetGapQuantile)
		if e.hasDelay || e.hasGap {
			t.entries[k] = e
		}
	}
	f.table.Store(t)
}

// fetchFailed logs a failed fetch: the first of an outage as a warning,
// for once the last advice is max_age old every client's auto hedge delay
// and stall timeout change (to the proxy's own learning, then the floor),
// and the next ones at debug level, so that an outage is one line and not
// one per interval. The error goes without its URL, whose query may carry
// a credential.
func (f *Fleet) fetchFailed(err error) {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if f.failing {
		f.set.Logger.Debug("hedge advice not fetched; the last good advice stands until max_age", zap.Error(err))
		return
	}
	f.failing = true
	f.set.Logger.Warn("hedge advice not fetched from the hedge_advisor; the last good advice stands until max_age, "+
		"then the proxy's own learning and the floors", zap.Duration("max_age", f.set.MaxAge), zap.Error(err))
}

// lookup is the fresh advice of provider and model at now; false when the
// advice is older than MaxAge or has no entry for them.
func (f *Fleet) lookup(now int64, provider, model string) (fleetEntry, bool) {
	if f == nil {
		return fleetEntry{}, false
	}
	t := f.table.Load()
	if t == nil || now-t.at > int64(f.set.MaxAge) {
		return fleetEntry{}, false
	}
	e, ok := t.entries[fleetKey{strings.ToLower(provider), model}]
	return e, ok
}

// HedgeDelay is the fleet's hedge delay for provider and model at now.
func (f *Fleet) HedgeDelay(now int64, provider, model string) (advice.Weighted, bool) {
	e, ok := f.lookup(now, provider, model)
	return e.delay, ok && e.hasDelay
}

// Gap is the fleet's p99.9 gap between content chunks for provider and
// model at now.
func (f *Fleet) Gap(now int64, provider, model string) (advice.Weighted, bool) {
	e, ok := f.lookup(now, provider, model)
	return e.gap, ok && e.hasGap
}
