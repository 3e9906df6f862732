package hedgeadvisorexporter // import "github.com/streamstall/streamstall/exporter/hedgeadvisorexporter"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/attempt"
	"github.com/streamstall/streamstall/exporter/hedgeadvisorexporter/internal/metadata"
	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/dimension"
)

// AdvicePath is where the advice is served.
const AdvicePath = "/v1/hedge/advice"

// windowSlots cuts every window into rotating slots: an estimate covers
// between three quarters of the window and all of it.
const windowSlots = 4

// maxFilterLength bounds a provider or model query filter.
const maxFilterLength = 1024

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
}

func newAdvisor(set exporter.Settings, cfg *Config, clock clockwork.Clock) (*advisor, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("creating the hedge_advisor telemetry: %w", err)
	}
	dims := dimension.Names(cfg.Dimensions)
	return &advisor{
		cfg:       cfg,
		set:       set,
		telemetry: tb,
		clock:     clock,
		store: advice.NewStore(advice.Config{
			Window: cfg.Window, Slots: windowSlots,
			TTFTQuantile: cfg.TTFTQuantile, GapQuantile: cfg.GapQuantile,
			MinSamples: cfg.MinSamples, MaxSeries: cfg.MaxSeries, MaxLabelLength: cfg.MaxLabelLength,
		}, dims),
		reader: attempt.NewReader(cfg.ChunkEvents),
		dims:   dims,
		key:    advice.Key{Dims: make([]string, len(dims))},
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

// consumeTraces records every attempt span of the batch under one lock.
// Nothing is refused: a span that is not an attempt is skipped, and so is
// one whose times are implausible (counted).
func (a *advisor) consumeTraces(ctx context.Context, td ptrace.Traces) error {
	recorded, dropped, implausible := a.record(td)
	if implausible > 0 {
		a.telemetry.ExporterHedgeAdvisorAttemptsImplausible.Add(ctx, implausible)
	}
	if recorded > 0 {
		a.telemetry.ExporterHedgeAdvisorAttemptsRecorded.Add(ctx, recorded)
	}
	if dropped > 0 {
		a.telemetry.ExporterHedgeAdvisorAttemptsDropped.Add(ctx, dropped)
	}
	return nil
}

// record adds the attempts of td to the store and counts them.
func (a *advisor) record(td ptrace.Traces) (recorded, dropped, implausible int64) {
	now := a.clock.Now().UnixNano()
	a.store.Lock()
	defer a.store.Unlock()
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		rs := rss.At(i)
		sss := rs.ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				span := spans.At(k)
				at := a.reader.Read(span)
				if at.Kind == attempt.Implausible {
					implausible++
					a.set.Logger.Debug("Skipping an attempt with implausible times", zap.Error(a.reader.Problem), zap.String("span", span.Name()))
					continue
				}
				if at.Provider == "" || at.Kind == attempt.Skip && len(at.Gaps) == 0 {
					continue // not an attempt, or one that tells nothing
				}
				a.fillKey(at, span.Attributes(), rs.Resource().Attributes())
				smp := advice.Sample{Gaps: at.Gaps}
				switch at.Kind {
				case attempt.Exact:
					smp.TTFT = at.TTFT
				case attempt.Censored:
					smp.TTFT, smp.Censored = at.TTFT, true
				}
				if a.store.Record(now, a.key, smp) {
					recorded++
				} else {
					dropped++
				}
			}
		}
	}
	if dropped > 0 && !a.warned {
		a.warned = true
		a.set.Logger.Warn("max_series reached: attempts of new series are dropped until a series is idle for a window",
			zap.Int("max_series", a.cfg.MaxSeries), zap.Int64("dropped", dropped))
	}
	return recorded, dropped, implausible
}

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
// advice of the matching series.
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
	resp := a.store.Advice(a.clock.Now().UnixNano(), provider, model)
	body, err := json.Marshal(resp)
	if err != nil { // cannot happen: the response holds only finite numbers and strings
		http.Error(w, "encoding advice", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}
