// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/hedgecore"
)

// Defaults of fleet advice.
const (
	DefaultAdviceInterval = 30 * time.Second
	DefaultAdviceTimeout  = 250 * time.Millisecond
)

// AdviceOption configures fleet advice.
type AdviceOption func(*adviceConfig)

type adviceConfig struct {
	url      string
	interval time.Duration
	timeout  time.Duration
	client   *http.Client
}

// AdviceInterval is the time between two fetches of the advice. Default 30 s.
func AdviceInterval(d time.Duration) AdviceOption {
	return func(c *adviceConfig) { c.interval = d }
}

// AdviceTimeout bounds one fetch, New's first one included. Default 250 ms.
func AdviceTimeout(d time.Duration) AdviceOption {
	return func(c *adviceConfig) { c.timeout = d }
}

// AdviceHTTPClient sends the fetches (TLS, auth headers through its
// transport); nil: http.DefaultClient.
func AdviceHTTPClient(client *http.Client) AdviceOption {
	return func(c *adviceConfig) { c.client = client }
}

// Advice takes hedge delays from a fleet advisor: the hedge_advisor
// component of the collector, which learns them from the spans of every
// hedging client (url is its base, e.g. http://collector:4320, or the full
// advice URL). New fetches the advice once, waiting at most the fetch
// timeout, so that the first call already uses it; then a goroutine fetches
// it every interval until Close. A fetch never blocks or fails a call: when
// it fails the last good advice is kept, and a source without advice uses
// its local learning (or the fallback). Sources are matched by provider and
// requested model; the fleet's delay is blended with the local estimate,
// weighted by their sample counts. A Hedger with Advice must be closed.
func Advice(url string, opts ...AdviceOption) Option {
	return func(c *config) {
		a := &adviceConfig{url: url, interval: DefaultAdviceInterval, timeout: DefaultAdviceTimeout}
		for _, o := range opts {
			o(a)
		}
		c.advice = a
	}
}

func (a *adviceConfig) validate() error {
	var errs []error
	u, err := url.Parse(a.url)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("advice url: %w", err))
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		errs = append(errs, fmt.Errorf("advice url %q must be http(s)://host[:port][/path]", a.url))
	}
	if a.interval <= 0 || a.timeout <= 0 {
		errs = append(errs, errors.New("advice interval and timeout must be positive"))
	}
	return errors.Join(errs...)
}

// adviceURL appends the advice path to a bare base URL and, when every
// source has one provider (and one model), asks only for their advice.
func (a *adviceConfig) adviceURL(sources []Source) string {
	u, _ := url.Parse(a.url) // validated
	if u.Path != "" && u.Path != "/" {
		return u.String() // a full advice URL, used as given
	}
	u.Path = advice.Path
	provider, model := sources[0].Provider(), sources[0].Model()
	for _, s := range sources[1:] {
		if s.Provider() != provider {
			provider = ""
		}
		if s.Model() != model {
			model = ""
		}
	}
	q := url.Values{}
	if provider != "" {
		q.Set("provider", provider)
		if model != "" {
			q.Set("model", model)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// adviceFetcher keeps the policy's fleet advice fresh.
type adviceFetcher struct {
	url     string
	cfg     *adviceConfig
	client  *http.Client
	policy  *hedgecore.Policy
	sources []Source
	clock   clockwork.Clock

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu        sync.Mutex
	lastErr   error
	refreshes int // fetches done, for tests
}

func newAdviceFetcher(cfg *adviceConfig, policy *hedgecore.Policy, sources []Source, clock clockwork.Clock) *adviceFetcher {
	client := cfg.client
	if client == nil {
		client = http.DefaultClient
	}
	return &adviceFetcher{url: cfg.adviceURL(sources), cfg: cfg, client: client, policy: policy, sources: sources, clock: clock}
}

// start fetches once, then every interval in a goroutine until stop.
func (f *adviceFetcher) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done = make(chan struct{})
	f.refresh(ctx)
	ticker := f.clock.NewTicker(f.cfg.interval)
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

func (f *adviceFetcher) stop() {
	f.once.Do(func() {
		f.cancel()
		<-f.done
	})
}

func (f *adviceFetcher) refresh(ctx context.Context) {
	resp, err := f.fetch(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastErr = err
	f.refreshes++
	if err != nil {
		return // keep the last good advice
	}
	for i, src := range f.sources {
		f.policy.SetFleet(i, match(resp.Advice, src.Provider(), src.Model()))
	}
}

func (f *adviceFetcher) fetch(ctx context.Context) (*advice.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.timeout)
	defer cancel()
	resp, err := advice.Fetch(ctx, f.client, f.url)
	if err != nil {
		return nil, fmt.Errorf("hedge: %w", err)
	}
	return resp, nil
}

// status returns the fetches done and the outcome of the last one.
func (f *adviceFetcher) status() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refreshes, f.lastErr
}

// match is the fleet's hedge delay for a provider and model (advice.HedgeDelay),
// nil when no entry recommends one.
func match(entries []advice.Entry, provider, model string) *hedgecore.FleetAdvice {
	w, ok := advice.HedgeDelay(entries, provider, model)
	if !ok {
		return nil
	}
	return &hedgecore.FleetAdvice{Delay: w.Nanos, Samples: w.Samples}
}
