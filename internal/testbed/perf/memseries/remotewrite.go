// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusremotewriteexporter"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// newRemoteWriteExporter is contrib's prometheusremotewrite exporter with
// its defaults (remote write 1.0, the only protocol Prometheus 2.x
// receives), writing to the Prometheus at promURL.
func newRemoteWriteExporter(ctx context.Context, promURL string) (exporter.Metrics, error) {
	if promURL == "" {
		return nil, errors.New("-exporter prometheusremotewrite needs -prometheus-url")
	}
	f := prometheusremotewriteexporter.NewFactory()
	cfg := f.CreateDefaultConfig()
	conf := map[string]any{"endpoint": strings.TrimSuffix(promURL, "/") + "/api/v1/write"}
	if err := confmap.NewFromStringMap(conf).Unmarshal(cfg); err != nil {
		return nil, err
	}
	return f.CreateMetrics(ctx, exportertest.NewNopSettings(f.Type()), cfg)
}

// exportedKinds records the kind of every metric the connector hands to
// the exporter (a few names: no memory per set), so that what Prometheus
// stored can be checked against what was sent.
type exportedKinds struct {
	mu    sync.Mutex // guards kinds
	kinds map[string]pmetric.MetricType
}

func (k *exportedKinds) wrap(next consumer.Metrics) (consumer.Metrics, error) {
	k.kinds = map[string]pmetric.MetricType{}
	return consumer.NewMetrics(func(ctx context.Context, md pmetric.Metrics) error {
		k.mu.Lock()
		for _, rm := range md.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					k.kinds[m.Name()] = m.Type()
				}
			}
		}
		k.mu.Unlock()
		return next.ConsumeMetrics(ctx, md)
	})
}

func (k *exportedKinds) count(t pmetric.MetricType) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, kind := range k.kinds {
		if kind == t {
			n++
		}
	}
	return n
}

// checkRemoteWrite asks Prometheus what it stored and fails unless every
// set's llm.stream.calls series arrived and every exponential histogram
// arrived as a native histogram, one series per set (no classic _bucket
// series).
func checkRemoteWrite(ctx context.Context, promURL string, o options, kinds *exportedKinds) error {
	p := &harness.Prometheus{URL: strings.TrimSuffix(promURL, "/")}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// Every push so far has been sent; the last may still be in flight.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := count(ctx, p, "count(llm_stream_calls_total)")
		if err != nil {
			return err
		}
		if n == o.series {
			break
		}
		if n > o.series || time.Now().After(deadline) {
			return fmt.Errorf("prometheus holds %d llm_stream_calls_total series, %d sets were pushed (a Prometheus of its own for each run, with --enable-feature=native-histograms: 2.x refuses a whole request holding a native histogram without it)", n, o.series)
		}
		time.Sleep(200 * time.Millisecond)
	}
	families, err := p.Query(ctx, `count by (__name__) ({__name__!=""})`)
	if err != nil {
		return err
	}
	var native, classic []string
	for _, s := range families.Result {
		name := s.Metric["__name__"]
		if strings.HasSuffix(name, "_bucket") {
			classic = append(classic, name)
		}
		n, err := count(ctx, p, fmt.Sprintf("count(histogram_count(%s))", name))
		if err != nil {
			return err
		}
		switch {
		case n == 0:
		case n != o.series:
			return fmt.Errorf("%s: %d native histogram series, want %d", name, n, o.series)
		default:
			native = append(native, name)
		}
	}
	slices.Sort(native)
	if want := kinds.count(pmetric.MetricTypeExponentialHistogram); len(classic) > 0 || len(native) != want {
		return fmt.Errorf("exponential histograms: %d sent, %d native histogram families stored (%s), classic bucket families %v",
			want, len(native), strings.Join(native, ", "), classic)
	}
	pushes, err := count(ctx, p, "max(count_over_time(llm_stream_calls_total[10m]))")
	if err != nil {
		return err
	}
	fmt.Printf("  prometheus: %d families, %d sets in llm_stream_calls_total (%d samples each), %d exponential histograms sent, each stored as a native histogram with one series per set\n",
		len(families.Result), o.series, pushes, len(native))
	return nil
}

// count is the one value of an instant query, 0 when the result is empty.
func count(ctx context.Context, p *harness.Prometheus, expr string) (int, error) {
	r, err := p.Query(ctx, expr)
	if err != nil {
		return 0, fmt.Errorf("query %s: %w", expr, err)
	}
	if len(r.Result) == 0 {
		return 0, nil
	}
	v, ok := r.Result[0].Float()
	if !ok {
		return 0, fmt.Errorf("query %s: not a number: %v", expr, r.Result[0].Value)
	}
	return int(v), nil
}
