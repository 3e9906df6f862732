// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/genai"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
	"github.com/streamstall/streamstall/internal/testbed/harness"
)

// The proxy alone before the stall processor, its spans at an OTLP sink.
const nativeConfig = `
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${FAKELLM}
processors:
  stall:
    stall_threshold: 500ms
exporters:
  otlp_http:
    endpoint: ${SINK}
    encoding: json
    compression: none
    retry_on_failure:
      enabled: false
    sending_queue:
      enabled: false
service:
  pipelines:
    traces:
      receivers: [sse_capture]
      processors: [stall]
      exporters: [otlp_http]
`

// nativeScript: a first chunk at 60 ms, then one 800 ms stall among 10 ms gaps.
const nativeScript = `{"ttft_ms":60,"gaps_ms":[10,10,800,10,10]}`

// tapTransport adds the fakellm script to every request and records the
// response bytes the client read.
type tapTransport struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (tt *tapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(fakellm.HeaderScript, nativeScript)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &tapBody{ReadCloser: resp.Body, tt: tt}
	return resp, nil
}

func (tt *tapTransport) bytes() []byte {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return bytes.Clone(tt.buf.Bytes())
}

type tapBody struct {
	io.ReadCloser
	tt *tapTransport
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.tt.mu.Lock()
	b.tt.buf.Write(p[:n])
	b.tt.mu.Unlock()
	return n, err
}

// fakellmRequest fetches fakellm's record of request seq and the bytes it sent.
func fakellmRequest(ctx context.Context, t *testing.T, fake string, seq int) (fakellm.Request, []byte) {
	t.Helper()
	get := func(path string) []byte {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fake+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return b
	}
	var reqs []fakellm.Request
	require.NoError(t, json.Unmarshal(get(fakellm.RequestsPath), &reqs))
	require.Greater(t, len(reqs), seq)
	return reqs[seq], get(fmt.Sprintf("%s/%d/body", fakellm.RequestsPath, seq))
}

// TestNativeSDKsEndToEnd streams with the official Gemini (Google AI Studio
// and Vertex AI) and Ollama Go clients through the ocb-built collector's
// proxy to fakellm: the clients read fakellm's bytes unchanged, and the
// spans carry the shapes' attributes and the figures of fakellm's schedule.
func TestNativeSDKsEndToEnd(t *testing.T) {
	sink := startSink(t)
	fake := startFakellm(t)
	proxyPort := freePort(t)
	collector(t, fill(nativeConfig, "PROXY", proxyPort, "FAKELLM", fake, "SINK", sink.URL))
	proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	clients := []struct {
		name, span, provider string
		run                  func(hc *http.Client) string
	}{
		{"gemini ai studio", "generate_content gemini-2.5-flash", "gcp.gemini", func(hc *http.Client) string {
			return geminiText(ctx, t, hc, proxy, &genai.ClientConfig{Backend: genai.BackendGeminiAPI, APIKey: "e2e-key"})
		}},
		{"gemini vertex", "generate_content gemini-2.5-pro", "gcp.vertex_ai", func(hc *http.Client) string {
			return geminiText(ctx, t, hc, proxy, &genai.ClientConfig{Backend: genai.BackendVertexAI, Project: "e2e", Location: "europe-west4"})
		}},
		{"ollama", "chat llama3.2", "ollama", func(hc *http.Client) string {
			u, err := url.Parse(proxy)
			require.NoError(t, err)
			var text strings.Builder
			require.NoError(t, api.NewClient(u, hc).Chat(ctx, &api.ChatRequest{
				Model:    "llama3.2",
				Messages: []api.Message{{Role: "user", Content: "hi"}},
			}, func(r api.ChatResponse) error {
				text.WriteString(r.Message.Content)
				return nil
			}))
			return text.String()
		}},
	}
	for seq, c := range clients {
		tap := &tapTransport{}
		text := c.run(&http.Client{Transport: tap})
		rec, sent := fakellmRequest(ctx, t, fake, seq)
		assert.Equal(t, sent, tap.bytes(), "%s: the client read exactly what fakellm sent", c.name)
		assert.Equal(t, rec.Text, text, c.name)

		attrs := sinkSpanAttrs(t, sink, c.span, c.name)
		assert.Equal(t, c.provider, attrs[semconv.AttrProviderName], c.name)
		assert.Equal(t, rec.Model, attrs[semconv.AttrRequestModel], c.name)
		assert.EqualValues(t, rec.OutputTokens, attrs[semconv.AttrUsageOutputTokens], c.name)
		assert.NotContains(t, attrs, semconv.AttrErrorType, c.name)

		assertScheduleFigures(t, attrs, rec, c.name)
		if c.provider == "ollama" {
			// What Ollama reports of its own work is fakellm's plan, to the ns.
			total, load, promptEval, eval := rec.Plan.ServerTimings()
			assert.Equal(t, float64(total)/1e6, attrs[semconv.AttrServerTotalMs])
			assert.Equal(t, float64(load)/1e6, attrs[semconv.AttrServerLoadMs])
			assert.Equal(t, float64(promptEval)/1e6, attrs[semconv.AttrServerPromptEvalMs])
			assert.Equal(t, float64(eval)/1e6, attrs[semconv.AttrServerEvalMs])
		} else {
			assert.Equal(t, rec.ResponseID, attrs[semconv.AttrResponseID], c.name)
		}
	}
	// Gemini names its model in the path: the Vertex call asked for gemini-2.5-pro.
	rec, _ := fakellmRequest(ctx, t, fake, 1)
	assert.Equal(t, "/v1beta1/projects/e2e/locations/europe-west4/publishers/google/models/gemini-2.5-pro:streamGenerateContent", rec.Path)
}

func geminiText(ctx context.Context, t *testing.T, hc *http.Client, proxy string, cfg *genai.ClientConfig) string {
	t.Helper()
	cfg.HTTPClient, cfg.HTTPOptions = hc, genai.HTTPOptions{BaseURL: proxy + "/"}
	client, err := genai.NewClient(ctx, cfg)
	require.NoError(t, err)
	model := "gemini-2.5-flash"
	if cfg.Backend == genai.BackendVertexAI {
		model = "gemini-2.5-pro"
	}
	var text strings.Builder
	for resp, err := range client.Models.GenerateContentStream(ctx, model, genai.Text("hi"), nil) {
		require.NoError(t, err)
		text.WriteString(resp.Text())
	}
	return text.String()
}

// sinkSpanAttrs waits for the span named span at the sink and returns its
// attributes.
func sinkSpanAttrs(t *testing.T, sink *harness.Sink, span, what string) map[string]any {
	t.Helper()
	var sp ptrace.Span
	eventually(t, 20*time.Second, what+": its span at the sink", func() error {
		var ok bool
		if sp, ok = sink.Span(span); !ok {
			return errNotYet
		}
		return nil
	})
	return sp.Attributes().AsRaw()
}

// assertScheduleFigures: the span's figures are fakellm's schedule of six
// chunks and one stall as the proxy saw it, every one within 25 ms of when
// fakellm flushed.
func assertScheduleFigures(t *testing.T, attrs map[string]any, rec fakellm.Request, what string) {
	t.Helper()
	offsets := rec.ChunkOffsetsMillis
	require.Len(t, offsets, 6, what)
	assert.EqualValues(t, 6, attrs[semconv.AttrChunkCount], what)
	assert.EqualValues(t, 1, attrs[semconv.AttrStallCount], what)
	assert.InDelta(t, offsets[3]-offsets[2], attrs[semconv.AttrStallMs], 25, what)
	assert.InDelta(t, offsets[0], attrs[semconv.AttrTTFTMs], 25, what)
	assert.InDelta(t, offsets[5]-offsets[0], attrs[semconv.AttrGenerationMs], 25, what)
}
