// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/streamstall/streamstall/internal/semconv"
)

// TestGuardNativeEndToEnd runs the guard of the ocb-built collector on
// Gemini's and Ollama's APIs, with their official Go clients in front and
// fakellm behind, as TestGuardEndToEnd does on OpenAI's and Anthropic's: a
// slow primary loses to the alternate, a 503 fails over at once, and a
// stall after commit ends with the API's own error, which the client
// raises as such.
func TestGuardNativeEndToEnd(t *testing.T) {
	sink := startSink(t)
	primary, alternate := startFakellm(t), startFakellm(t)
	proxyPort, promPort := freePort(t), freePort(t)
	collector(t, fill(guardConfig, "PROXY", proxyPort, "PRIMARY", primary, "ALTERNATE", alternate, "ALTSCRIPT", altScript,
		"STALL", guardStall, "DELAY", guardDelay, "SINK", sink.URL, "PROM", promPort))
	proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	gemini := func(hc *http.Client, model string) (texts []string, err error) {
		client, cerr := genai.NewClient(ctx, &genai.ClientConfig{
			Backend: genai.BackendGeminiAPI, APIKey: "e2e-key", HTTPClient: hc, HTTPOptions: genai.HTTPOptions{BaseURL: proxy + "/"},
		})
		require.NoError(t, cerr)
		for resp, err := range client.Models.GenerateContentStream(ctx, model, genai.Text("hi"), nil) {
			if err != nil {
				return texts, err
			}
			texts = append(texts, resp.Text())
		}
		return texts, nil
	}
	ollama := func(hc *http.Client, model string) (texts []string, err error) {
		u, perr := url.Parse(proxy)
		require.NoError(t, perr)
		err = api.NewClient(u, hc).Chat(ctx, &api.ChatRequest{Model: model, Messages: []api.Message{{Role: "user", Content: "hi"}}},
			func(r api.ChatResponse) error {
				if r.Message.Content != "" {
					texts = append(texts, r.Message.Content)
				}
				return nil
			})
		return texts, err
	}

	t.Run("gemini: a slow primary loses to the alternate", func(t *testing.T) {
		const model = "e2e-guard-gemini-hedge"
		tap := &scriptedTap{script: `{"ttft_ms":3000,"gaps_ms":[5,5]}`}
		begin := time.Now()
		texts, err := gemini(&http.Client{Transport: tap}, model)
		require.NoError(t, err)
		assert.Less(t, time.Since(begin), 2*time.Second, "the alternate answered, not the primary 3 s late")
		alt := ended(ctx, t, alternate, model, 1)[0]
		assert.Equal(t, sentBody(ctx, t, alternate, alt.Seq), tap.rec.bytes(), "the client read exactly the alternate's bytes")
		assert.Equal(t, alt.Text, strings.Join(texts, ""))
		assert.True(t, ended(ctx, t, primary, model, 1)[0].Disconnected, "the primary's request was cancelled")
		sp := modelSpans(t, sink, model, 2)
		assert.Equal(t, semconv.HedgeOutcomeWinner, strAttr(sp[1], semconv.AttrHedgeOutcome))
		assert.Equal(t, semconv.HedgeTriggerTTFT, strAttr(sp[1], semconv.AttrHedgeTrigger))
		assert.Equal(t, semconv.HedgeOutcomeLoser, strAttr(sp[0], semconv.AttrHedgeOutcome))
	})

	t.Run("ollama: a 503 is replaced at once", func(t *testing.T) {
		const model = "e2e-guard-ollama-failover"
		tap := &scriptedTap{script: `{"status":503}`}
		texts, err := ollama(&http.Client{Transport: tap}, model)
		require.NoError(t, err, "the client never sees the 503")
		alt := ended(ctx, t, alternate, model, 1)[0]
		prim := ended(ctx, t, primary, model, 1)[0]
		assert.Equal(t, http.StatusServiceUnavailable, prim.Status)
		assert.Equal(t, alt.Text, strings.Join(texts, ""))
		assert.Less(t, alt.Start.Sub(prim.Start), guardDelay/2, "the failover did not wait for the hedge delay")
		sp := modelSpans(t, sink, model, 2)
		assert.Equal(t, semconv.HedgeTriggerError, strAttr(sp[1], semconv.AttrHedgeTrigger))
	})

	// Two content chunks, then a minute of silence.
	const stallScript = `{"ttft_ms":10,"gaps_ms":[10,60000]}`
	stallCase := func(t *testing.T, model string, run func(hc *http.Client) ([]string, error), typed func(t *testing.T, err error)) {
		t.Helper()
		begin := time.Now()
		texts, err := run(&http.Client{Transport: &scriptedTap{script: stallScript}})
		took := time.Since(begin)
		t.Logf("the stream ended %s after the request", took)
		assert.Len(t, texts, 2, "the content before the stall is delivered")
		require.ErrorContains(t, err, "stream stalled")
		typed(t, err)
		assert.Less(t, took, guardStall+time.Second, "at stall_timeout, not the upstream's minute")
		assert.True(t, ended(ctx, t, primary, model, 1)[0].Disconnected, "the upstream request was closed")
		sp := modelSpans(t, sink, model, 1)[0]
		assert.Equal(t, "stall_timeout", strAttr(sp, semconv.AttrErrorType))
	}
	t.Run("gemini: a stall ends with genai's APIError", func(t *testing.T) {
		const model = "e2e-guard-gemini-stall"
		stallCase(t, model, func(hc *http.Client) ([]string, error) { return gemini(hc, model) }, func(t *testing.T, err error) {
			ae, ok := errors.AsType[genai.APIError](err)
			if assert.True(t, ok, "%T %v", err, err) {
				assert.Equal(t, http.StatusGatewayTimeout, ae.Code)
				assert.Equal(t, "DEADLINE_EXCEEDED", ae.Status)
			}
		})
	})
	t.Run("ollama: a stall ends with the guard's message", func(t *testing.T) {
		const model = "e2e-guard-ollama-stall"
		stallCase(t, model, func(hc *http.Client) ([]string, error) { return ollama(hc, model) }, func(t *testing.T, err error) {
			assert.True(t, strings.HasPrefix(err.Error(), "stream stalled: "), "Ollama's error line, not a decoding error: %v", err)
		})
	})
	t.Run("gemini json array: a stall closes the array with the error", func(t *testing.T) {
		const model = "e2e-guard-gemini-array-stall"
		stallCase(t, model, func(hc *http.Client) ([]string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy+"/v1beta/models/"+model+":streamGenerateContent",
				strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
			require.NoError(t, err)
			resp, err := hc.Do(req)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err, "a clean end after the error")
			var elems []struct {
				Candidates []struct {
					Content struct{ Parts []struct{ Text string } }
				}
				Error *genai.APIError
			}
			require.NoError(t, json.Unmarshal(body, &elems), "the array is closed: %s", body)
			var texts []string
			for _, e := range elems {
				if e.Error != nil {
					return texts, *e.Error
				}
				for _, c := range e.Candidates {
					for _, p := range c.Content.Parts {
						texts = append(texts, p.Text)
					}
				}
			}
			return texts, nil
		}, func(t *testing.T, err error) {
			ae, ok := errors.AsType[genai.APIError](err)
			if assert.True(t, ok, "%T %v", err, err) {
				assert.Equal(t, "DEADLINE_EXCEEDED", ae.Status)
			}
		})
	})
}
