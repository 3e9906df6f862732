// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter // import "github.com/streamstall/streamstall/exporter/hedgeadvisorexporter"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/attempt"
	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/metadata"
	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/dimension"
	"github.com/streamstall/streamstall/internal/semconv"
)

// AdvicePath is where the advice is served.
const AdvicePath = "/v1/hedge/advice"

// windowSlots cuts every window into rotating slots: an estimate covers
// between three quarters of the window and all of it.
const windowSlots = 4

// maxFilterLength bounds a provider or model query filter.
const maxFilterLength = 1024

// answerTTL is how long a computed answer is served: merging the windows of
// every series costs far more than a poll, and clients poll every 30 s.
const answerTTL = time.Second

// maxCachedBodies bounds the encoded answers kept per computation, one per
// query filter: filters are the client's, so their number is bounded.
const maxCachedBodies = 256

// advisor aggregates attempt spans into the store and serves its advice.
type advisor struct {
	cfg       *Config
	set       exporter.Settings
	telemetry *metadata.TelemetryBuilder
	clock     clockwork.Clock
	store     *advice.Store
	reader    *attempt.Reader // guarded by the store's lock
	dims      []string
	key       advice.Key // guarded by the store's lock

	server *http.Server
	wg     sync.WaitGroup
	warned bool // the series bound was reported; guarded by the store's lock

	answerMu   sync.Mutex
	answer     advice.Response   // the whole advice, computed at answerAt
	answerAt   time.Time         // zero: none yet
	bodies     map[string][]byte // encoded answers of answer, by filter
	trustedRes map[string]map[string]bool
}

// counts are the outcomes of one batch of spans.
type counts struct {
	recorded, dropped, untrusted, capped, implausible int64
}

func newAdvisor(set exporter.Settings, cfg *Config, clock clockwork.Clock) (*advisor, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("creating the hedge_advisor telemetry: %w", err)
	}
	dims := dimension.Names(cfg.Dimensions)
	var trustedRes map[string]map[string]bool
	if len(cfg.Trust.ResourceAttributes) > 0 {
		trustedRes = make(map[string]map[string]bool, len(cfg.Trust.ResourceAttributes))
		for k, vs := range cfg.Trust.ResourceAttributes {
			trustedRes[k] = make(map[string]bool, len(vs))
			for _, v := range vs {
				trustedRes[k][v] = true
			}
		}
	}
	return &advisor{
		cfg:       cfg,
		set:       set,
		telemetry: tb,
		clock:     clock,
		store: advice.NewStore(advice.Config{
			Window: cfg.Window, Slots: windowSlots,
			TTFTQuantile: cfg.TTFTQuantile, GapQuantile: cfg.GapQuantile,
			MinSamples: cfg.MinSamples, MaxSeries: cfg.MaxSeries, MaxLabelLength: cfg.MaxLabelLength,
			MaxClientShare: cfg.MaxClientShare, MaxClients: cfg.MaxClientsPerSeries,
			HedgeDelay: advice.Range{Min: cfg.HedgeDelayRange.Min, Max: cfg.HedgeDelayRange.Max},
			StallAfter: advice.Range{Min: cfg.StallAfterRange.Min, Max: cfg.StallAfterRange.Max},
		}, dims),
		reader:     attempt.NewReader(cfg.ChunkEvents),
		dims:       dims,
		key:        advice.Key{Dims: make([]string, len(dims))},
		trustedRes: trustedRes,
	}, nil
}

// start opens the listener and serves the advice, as the core OTLP receiver
// serves: a fatal serve error is reported as the component's status.
func (a *advisor) start(ctx context.Context, host component.Host) error {
	ln, err := a.cfg.ServerConfig.ToListener(ctx)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc(AdvicePath, a.serveAdvice)
	srv, err := a.cfg.ServerConfig.ToServer(ctx, host.GetExtensions(), a.set.TelemetrySettings, mux)
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	// confighttp has no setting for it; Go answers 431 before the handler
	// chain, the authenticator included, sees the request.
	srv.MaxHeaderBytes = a.cfg.MaxRequestHeaderBytes
	a.server = srv
	a.set.Logger.Info("serving hedge advice", zap.String("endpoint", ln.Addr().String()+AdvicePath))
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	return nil
}

func (a *advisor) shutdown(ctx context.Context) error {
	var err error
	if a.server != nil {
		err = a.server.Shutdown(ctx)
		a.server = nil
	}
	a.wg.Wait()
	a.telemetry.Shutdown()
	return err
}

// consumeTraces records every trusted attempt span of the batch under one
// lock. Nothing is refused upstream: a span that is not an attempt is
// skipped, an untrusted, capped or implausible one counted.
func (a *advisor) consumeTraces(ctx context.Context, td ptrace.Traces) error {
	c := a.record(client.FromContext(ctx), td)
	for _, m := range []struct {
		n   int64
		add func(context.Context, int64, ...metric.AddOption)
	}{
		{c.recorded, a.telemetry.ExporterHedgeAdvisorAttemptsRecorded.Add},
		{c.dropped, a.telemetry.ExporterHedgeAdvisorAttemptsDropped.Add},
		{c.untrusted, a.telemetry.ExporterHedgeAdvisorAttemptsUntrusted.Add},
		{c.capped, a.telemetry.ExporterHedgeAdvisorAttemptsCapped.Add},
		{c.implausible, a.telemetry.ExporterHedgeAdvisorAttemptsImplausible.Add},
	} {
		if m.n > 0 {
			m.add(ctx, m.n)
		}
	}
	return nil
}

// record adds the trusted attempts of td, which came with the request info,
// to the store and counts them.
func (a *advisor) record(info client.Info, td ptrace.Traces) counts {
	var c counts
	now := a.clock.Now().UnixNano()
	authenticated := info.Auth != nil
	peer := ""
	if info.Addr != nil {
		peer = info.Addr.String()
	}
	a.store.Lock()
	defer a.store.Unlock()
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		rs := rss.At(i)
		res := rs.Resource().Attributes()
		trusted := (authenticated || !a.cfg.Trust.RequireAuth) && a.trustedResource(res)
		who := clientKey(res, peer)
		sss := rs.ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				span := spans.At(k)
				at := a.reader.Read(span)
				if at.Provider == "" || at.Kind == attempt.Skip && len(at.Gaps) == 0 {
					continue // not an attempt, or one that tells nothing
				}
				if !trusted || !a.cfg.Trust.Ingest && isIngest(span.Attributes()) {
					c.untrusted++ // refused whatever its times: trust is asked first
					continue
				}
				if at.Kind == attempt.Implausible {
					c.implausible++
					a.set.Logger.Debug("Skipping an attempt with implausible times", zap.Error(a.reader.Problem), zap.String("span", span.Name()))
					continue
				}
				a.fillKey(at, span.Attributes(), res)
				smp := advice.Sample{Gaps: at.Gaps, Client: who}
				if who == unknownClient && isCapture(span.Attributes(), semconv.CaptureProxy) {
					// This collector's own proxy measured it (no connection
					// brought it): a measurement, not a client's claim.
					smp.Client = advice.OwnMeasurement
				}
				switch at.Kind {
				case attempt.Exact:
					smp.TTFT = at.TTFT
				case attempt.Censored:
					smp.TTFT, smp.Censored = at.TTFT, true
				}
				switch a.store.Record(now, a.key, smp) {
				case advice.Recorded:
					c.recorded++
				case advice.Capped:
					c.capped++
				case advice.Dropped:
					c.dropped++
				}
			}
		}
	}
	if c.dropped > 0 && !a.warned {
		a.warned = true
		a.set.Logger.Warn("max_series reached: attempts of new series are dropped until a series is idle for a window",
			zap.Int("max_series", a.cfg.MaxSeries), zap.Int64("dropped", c.dropped))
	}
	return c
}

// trustedResource reports whether res has an allowed value of every key of
// trust.resource_attributes.
func (a *advisor) trustedResource(res pcommon.Map) bool {
	for k, allowed := range a.trustedRes {
		v, ok := res.Get(k)
		if !ok || !allowed[v.AsString()] {
			return false
		}
	}
	return true
}

// isIngest reports whether sse_capture's ingest endpoint made the span. The
// mark cannot come from the ingest client: ingest refuses llm.stream.*.
func isIngest(attrs pcommon.Map) bool { return isCapture(attrs, semconv.CaptureIngest) }

// isCapture reports whether sse_capture's proxy or ingest (capture) made
// the span.
func isCapture(attrs pcommon.Map, capture string) bool {
	v, ok := attrs.Get(semconv.AttrCapture)
	return ok && v.Type() == pcommon.ValueTypeStr && v.Str() == capture
}

// clientKey names the client of a resource's spans for the share cap: its
// service.instance.id, else the connection's address, else one bucket for
// all the spans that tell neither. The prefixes keep one kind from posing
// as another.
func clientKey(res pcommon.Map, peer string) string {
	if v, ok := res.Get(semconv.AttrServiceInstanceID); ok {
		if id := v.AsString(); id != "" {
			return "id:" + id
		}
	}
	if peer != "" {
		return "addr:" + peer
	}
	return unknownClient
}

// unknownClient is the one bucket of the spans that tell no client.
const unknownClient = "unknown"

func (a *advisor) fillKey(at attempt.Attempt, span, resource pcommon.Map) {
	a.key.Provider, a.key.Model = at.Provider, at.Model
	for i, d := range a.cfg.Dimensions {
		v, ok := span.Get(d.Name)
		if !ok {
			v, ok = resource.Get(d.Name)
		}
		switch {
		case ok:
			a.key.Dims[i] = v.AsString()
		case d.Default != nil:
			a.key.Dims[i] = *d.Default
		default:
			a.key.Dims[i] = ""
		}
	}
}

// serveAdvice answers GET /v1/hedge/advice?provider=..&model=.. with the
// advice of the matching series, from an answer at most answerTTL old.
func (a *advisor) serveAdvice(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	provider, model := q.Get("provider"), q.Get("model")
	if len(provider) > maxFilterLength || len(model) > maxFilterLength {
		http.Error(w, "provider and model filters are limited to 1024 bytes", http.StatusBadRequest)
		return
	}
	body := a.answerBody(provider, model)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// answerBody returns the encoded advice of the series matching provider and
// model (empty: any). The whole advice is computed at most once per
// answerTTL; each filter's body is encoded once per computation.
func (a *advisor) answerBody(provider, model string) []byte {
	a.answerMu.Lock()
	defer a.answerMu.Unlock()
	// The clock is read under the lock: a poll that waited while another
	// computed would otherwise hold a time before the new answer's and,
	// taking the clock for stepped back, compute it again.
	now := a.clock.Now()
	if a.answerAt.IsZero() || now.Sub(a.answerAt) >= answerTTL || now.Before(a.answerAt) {
		a.answer = a.store.Advice(now.UnixNano(), "", "")
		a.answerAt = now
		clear(a.bodies)
	}
	filter := provider + "\x00" + model
	if b, ok := a.bodies[filter]; ok {
		return b
	}
	resp := advice.Response{WindowS: a.answer.WindowS, Advice: a.answer.Advice}
	if provider != "" || model != "" {
		resp.Advice = make([]advice.Entry, 0, len(a.answer.Advice))
		for _, e := range a.answer.Advice {
			if (provider == "" || e.Provider == provider) && (model == "" || e.Model == model) {
				resp.Advice = append(resp.Advice, e)
			}
		}
	}
	// The response holds only finite numbers and strings: encoding cannot fail.
	b, _ := json.Marshal(resp)
	if a.bodies == nil {
		a.bodies = make(map[string][]byte)
	}
	if len(a.bodies) < maxCachedBodies {
		a.bodies[filter] = b
	}
	return b
}
