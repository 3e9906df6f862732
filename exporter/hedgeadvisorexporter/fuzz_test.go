// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedgeadvisorexporter

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/semconv"
)

// FuzzConsumeTraces: whatever spans arrive, recording never fails or
// panics, and the advice stays valid JSON (no NaN, no infinity) with
// quantiles that are not negative.
func FuzzConsumeTraces(f *testing.F) {
	seed := func(td ptrace.Traces) {
		b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(traces(
		attemptSpec{provider: "openai", model: "gpt-4o", ttft: time.Second, gaps: []time.Duration{time.Millisecond, 0}},
		attemptSpec{provider: "openai", model: "gpt-4o", ran: 3 * time.Second},
	))
	hostile := ptrace.NewTraces()
	sp := hostile.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.Attributes().PutStr(semconv.AttrProviderName, "p")
	sp.Attributes().PutStr(semconv.AttrRequestModel, "m")
	sp.Attributes().PutDouble(semconv.AttrTTFTMs, 1e-300)
	sp.Attributes().PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
	sp.SetStartTimestamp(1)
	sp.SetEndTimestamp(pcommon.Timestamp(1<<63 - 1))
	ev := sp.Events().AppendEmpty()
	ev.SetName(semconv.EventChunk)
	ev.SetTimestamp(pcommon.Timestamp(1<<64 - 1))
	seed(hostile)

	f.Fuzz(func(t *testing.T, data []byte) {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
		if err != nil {
			return
		}
		cfg := testConfig()
		cfg.MinSamples = 1
		a, _ := newTestAdvisor(t, cfg)
		if err := a.consumeTraces(context.Background(), td); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		a.serveAdvice(rec, httptest.NewRequest(http.MethodGet, AdvicePath, http.NoBody))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var resp advice.Response
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Advice {
			for q, v := range e.TTFTMs {
				if !(v >= 0) { // sub-microsecond values round to 0
					t.Fatalf("ttft %s = %v", q, v)
				}
			}
			if e.Censored > e.Samples || e.Samples < 0 {
				t.Fatalf("samples %d, censored %d", e.Samples, e.Censored)
			}
		}
	})
}
