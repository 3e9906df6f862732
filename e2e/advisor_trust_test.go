// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/advice"
	"github.com/streamstall/streamstall/internal/semconv"
)

// trustConfig feeds the advisor from an OTLP receiver (the trusted one of
// this test: the hedging clients' spans) and from sse_capture's ingest
// endpoint, whose spans the advisor does not learn from by default.
const trustConfig = `
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${OTLP}
  sse_capture:
    ingest:
      endpoint: 127.0.0.1:${INGEST}
processors:
  stall:
exporters:
  hedge_advisor:
    endpoint: 127.0.0.1:${ADVISOR}
    min_samples: 20
service:
  pipelines:
    traces:
      receivers: [otlp, sse_capture]
      processors: [stall]
      exporters: [hedge_advisor]
`

// forgedAttempt is one attempt span: a first chunk at ttft and further
// chunks gap apart, or (ttft 0) a loser cancelled after ran.
type forgedAttempt struct {
	ttft, ran time.Duration
	chunks    int
	gap       time.Duration
}

// otlpAttempts sends n attempts of instance over OTLP/HTTP; every attempt
// ends now.
func otlpAttempts(t *testing.T, otlpURL, instance string, n int, at forgedAttempt) {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, "hedging-client")
	rs.Resource().Attributes().PutStr(semconv.AttrServiceInstanceID, instance)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	now := time.Now()
	for i := range n {
		s := spans.AppendEmpty()
		s.SetName("chat " + clientModel)
		s.SetTraceID(pcommon.TraceID([16]byte{1, byte(i >> 8), byte(i), 2}))
		s.SetSpanID(pcommon.SpanID([8]byte{3, byte(i >> 8), byte(i), 4}))
		s.Attributes().PutStr(semconv.AttrProviderName, "openai")
		s.Attributes().PutStr(semconv.AttrRequestModel, clientModel)
		if at.ttft == 0 {
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-at.ran)))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
			s.Attributes().PutStr(semconv.AttrHedgeOutcome, semconv.HedgeOutcomeLoser)
			continue
		}
		span := at.ttft + time.Duration(at.chunks-1)*at.gap
		start := now.Add(-span)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
		for c := range at.chunks {
			ev := s.Events().AppendEmpty()
			ev.SetName(semconv.EventChunk)
			ev.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(at.ttft + time.Duration(c)*at.gap)))
		}
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	resp, err := http.Post(otlpURL+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// ingestAttempts posts n attempt records to sse_capture's ingest endpoint,
// as any client that reaches it can.
// ingestAttempts posts n forged records to the ingest endpoint. Records
// that ingest itself finds implausible in time (refused) get 400 there; the
// others are accepted, and only the advisor's trust keeps them out.
func ingestAttempts(t *testing.T, ingestURL string, n int, at forgedAttempt, refused bool) {
	t.Helper()
	var body bytes.Buffer
	now := time.Now()
	for range n {
		rec := map[string]any{"name": "chat " + clientModel, "attributes": map[string]any{
			semconv.AttrProviderName: "openai", semconv.AttrRequestModel: clientModel,
		}}
		if at.ttft == 0 {
			rec["start_time_unix_nano"] = strconv.FormatInt(now.Add(-at.ran).UnixNano(), 10)
			rec["end_time_unix_nano"] = strconv.FormatInt(now.UnixNano(), 10)
			rec["attributes"].(map[string]any)[semconv.AttrHedgeOutcome] = semconv.HedgeOutcomeLoser
		} else {
			span := at.ttft + time.Duration(at.chunks-1)*at.gap
			rec["start_time_unix_nano"] = strconv.FormatInt(now.Add(-span).UnixNano(), 10)
			offsets := make([]float64, at.chunks)
			for c := range offsets {
				offsets[c] = float64(at.ttft+time.Duration(c)*at.gap) / 1e6
			}
			rec["chunk_offsets_ms"] = offsets
		}
		line, err := json.Marshal(rec)
		require.NoError(t, err)
		body.Write(line)
		body.WriteByte('\n')
	}
	resp, err := http.Post(ingestURL+"/v1/streams", "application/x-ndjson", &body)
	require.NoError(t, err)
	_ = resp.Body.Close()
	if refused {
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "ingest refuses records implausible in time")
		return
	}
	require.Less(t, resp.StatusCode, 300, "ingest accepted the records: the advisor is what refuses them")
}

// currentAdvice waits out the advisor's one-second answer and reads the
// advice of openai/gpt-4o.
func currentAdvice(t *testing.T, adviceURL string) advice.Entry {
	t.Helper()
	time.Sleep(1100 * time.Millisecond)
	resp, err := fetchAdvice(adviceURL)
	require.NoError(t, err)
	require.Len(t, resp.Advice, 1, "%+v", resp)
	e := resp.Advice[0]
	require.NotNil(t, e.HedgeDelayMs, "the advice is gone: %+v", e)
	require.NotNil(t, e.StallAfterMs, "the advice is gone: %+v", e)
	return e
}

// TestFleetAdviceCannotBeSteered: 200 honest attempts from a fleet of 50
// instances set the advice; forgeries from one untrusted client (the ingest
// endpoint) and then from one trusted client (an instance of the OTLP
// receiver's fleet) move hedge_delay_ms and stall_after_ms by at most 10 %,
// and 300 forged censored losers do not remove the advice.
func TestFleetAdviceCannotBeSteered(t *testing.T) {
	otlpPort, ingestPort, advisorPort := freePort(t), freePort(t), freePort(t)
	collector(t, fill(trustConfig, "OTLP", otlpPort, "INGEST", ingestPort, "ADVISOR", advisorPort))
	otlpURL := fmt.Sprintf("http://127.0.0.1:%d", otlpPort)
	ingestURL := fmt.Sprintf("http://127.0.0.1:%d", ingestPort)
	adviceURL := fmt.Sprintf("http://127.0.0.1:%d/v1/hedge/advice?provider=openai&model=%s", advisorPort, clientModel)

	honest := forgedAttempt{ttft: 400 * time.Millisecond, chunks: 5, gap: 50 * time.Millisecond}
	for i := range 50 {
		otlpAttempts(t, otlpURL, fmt.Sprintf("honest-%d", i), 4, honest)
	}
	base := currentAdvice(t, adviceURL)
	assert.Equal(t, int64(200), base.Samples)
	assert.InEpsilon(t, 400, *base.HedgeDelayMs, 0.02)
	assert.InEpsilon(t, 50, *base.StallAfterMs, 0.02)
	t.Logf("honest advice: hedge_delay_ms %.3f, stall_after_ms %.3f", *base.HedgeDelayMs, *base.StallAfterMs)

	// Past an hour (max_stream_duration, chunk_events::max_duration) ingest
	// and the advisor refuse a record for its times alone; the forgeries
	// within an hour are refused for who sent them.
	attacks := []struct {
		name    string
		n       int
		forge   forgedAttempt
		refused bool // by ingest, as implausible in time
	}{
		{"25 of TTFT 10 h", 25, forgedAttempt{ttft: 10 * time.Hour, chunks: 1}, true},
		{"25 of TTFT 50 min", 25, forgedAttempt{ttft: 50 * time.Minute, chunks: 1}, false},
		{"5000 of TTFT 1 us", 5000, forgedAttempt{ttft: time.Microsecond, chunks: 1}, false},
		{"300 censored losers of 50 min", 300, forgedAttempt{ran: 50 * time.Minute}, false},
		{"one record of 6 chunks 10 h apart", 1, forgedAttempt{ttft: 10 * time.Millisecond, chunks: 6, gap: 10 * time.Hour}, true},
		{"one record of 6 chunks 10 min apart", 1, forgedAttempt{ttft: 10 * time.Millisecond, chunks: 6, gap: 10 * time.Minute}, false},
	}
	check := func(who, attack string) {
		e := currentAdvice(t, adviceURL)
		t.Logf("after %s %s: hedge_delay_ms %.3f, stall_after_ms %.3f, samples %d", who, attack, *e.HedgeDelayMs, *e.StallAfterMs, e.Samples)
		assert.InEpsilon(t, *base.HedgeDelayMs, *e.HedgeDelayMs, 0.10, "%s %s: hedge_delay_ms", who, attack)
		assert.InEpsilon(t, *base.StallAfterMs, *e.StallAfterMs, 0.10, "%s %s: stall_after_ms", who, attack)
	}
	for _, a := range attacks {
		ingestAttempts(t, ingestURL, a.n, a.forge, a.refused)
		check("untrusted", a.name)
	}
	e := currentAdvice(t, adviceURL)
	assert.Equal(t, int64(200), e.Samples, "nothing of the ingest endpoint was learned")

	// The trusted client's forgeries of TTFT: its share of the window is
	// capped. (Its gaps at the p999 are bounded by stall_after_range only:
	// docs/security.md.)
	for _, a := range attacks[:4] {
		otlpAttempts(t, otlpURL, "mallory", a.n, a.forge)
		check("trusted", a.name)
	}
	otlpAttempts(t, otlpURL, "mallory", 1000, forgedAttempt{ttft: 400 * time.Millisecond, chunks: 6, gap: time.Microsecond})
	check("trusted", "1000 of gaps of 1 us")
}
