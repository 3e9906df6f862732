// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package advice

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The client side of the advice: what a hedging client or a guarded proxy
// reads from hedge_advisor. Every value is checked, since an advisor's
// answer crosses the network like any other input.
const (
	// Path is where hedge_advisor serves the advice.
	Path = "/v1/hedge/advice"
	// MaxBody bounds the advice read: thousands of series fit.
	MaxBody = 4 << 20
	// maxSamples bounds the weight of one entry, so that a hostile count
	// cannot overflow a blend.
	maxSamples = 1 << 40
	// maxFigure is a day in milliseconds: anything above is no delay.
	maxFigureMs = 86_400_000
)

// Fetch GETs the advice at url with client and decodes it; a status other
// than 200 is an error. ctx bounds the whole fetch.
func Fetch(ctx context.Context, client *http.Client, url string) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	// A redirect is not followed: the client's transport (confighttp's)
	// adds its headers and auth to every request it sends, to whatever
	// host a redirect names, where Go's own rule would have dropped an
	// Authorization it set itself. The advisor answers at its URL.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("advice: the advisor answered %d", resp.StatusCode)
	}
	return Decode(resp.Body)
}

// Decode reads an advice body, at most MaxBody bytes of it.
func Decode(r io.Reader) (*Response, error) {
	var out Response
	if err := json.NewDecoder(io.LimitReader(r, MaxBody)).Decode(&out); err != nil {
		return nil, fmt.Errorf("advice: %w", err)
	}
	return &out, nil
}

// Weighted is a figure the fleet recommends, in nanoseconds, and the
// samples behind it.
type Weighted struct {
	Nanos   int64
	Samples int64
}

// HedgeDelay combines the hedge delays the entries of provider (matched
// without case) and model recommend, one per configured dimension value on
// the advisor: their delays weighted by their samples. false when none
// recommends one.
func HedgeDelay(entries []Entry, provider, model string) (Weighted, bool) {
	return combine(entries, provider, model, func(e *Entry) (float64, bool) {
		if e.HedgeDelayMs == nil {
			return 0, false
		}
		return *e.HedgeDelayMs, true
	})
}

// Gap combines the entries' gap between content chunks at the reported
// quantile named q ("p99", "p999"), weighted by their samples. false when
// no entry reports it.
func Gap(entries []Entry, provider, model, q string) (Weighted, bool) {
	return combine(entries, provider, model, func(e *Entry) (float64, bool) {
		v, ok := e.GapMs[q]
		return v, ok
	})
}

func combine(entries []Entry, provider, model string, figure func(*Entry) (float64, bool)) (Weighted, bool) {
	var weighted, samples float64
	for i := range entries {
		e := &entries[i]
		if e.Samples <= 0 || e.Samples > maxSamples || e.Model != model || !strings.EqualFold(e.Provider, provider) {
			continue
		}
		v, ok := figure(e)
		if !ok || !(v > 0 && v < maxFigureMs) {
			continue
		}
		weighted += float64(e.Samples) * v
		samples += float64(e.Samples)
	}
	if samples == 0 {
		return Weighted{}, false
	}
	return Weighted{Nanos: int64(weighted / samples * 1e6), Samples: int64(samples)}, true
}
