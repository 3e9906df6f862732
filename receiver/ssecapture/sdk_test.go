// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// wireTap records the exact response bytes an SDK read off the wire.
type wireTap struct {
	next http.RoundTripper
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (w *wireTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &tappedBody{ReadCloser: resp.Body, tap: w}
	return resp, nil
}

func (w *wireTap) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes())
}

type tappedBody struct {
	io.ReadCloser
	tap *wireTap
}

func (b *tappedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.tap.mu.Lock()
	b.tap.buf.Write(p[:n])
	b.tap.mu.Unlock()
	return n, err
}

func tappedClient(t *testing.T) (*http.Client, *wireTap) {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	tap := &wireTap{next: tr}
	return &http.Client{Transport: tap}, tap
}

// sdkRun is what an SDK made of one streamed call.
type sdkRun struct {
	text  string
	wire  []byte
	model string
	id    string
}

func openAIChat(t *testing.T, baseURL string, profile string) sdkRun {
	hc, tap := tappedClient(t)
	client := openai.NewClient(openaioption.WithBaseURL(baseURL+"/v1/"), openaioption.WithAPIKey("sk-test-secret-key"),
		openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(hc), openaioption.WithHeader(fakellm.HeaderProfile, profile))
	stream := client.Chat.Completions.NewStreaming(testContext(t), openai.ChatCompletionNewParams{
		Model:         "gpt-4o-mini",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Why do streams stall?")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	require.Len(t, acc.Choices, 1)
	return sdkRun{text: acc.Choices[0].Message.Content, wire: tap.bytes(), model: acc.Model, id: acc.ID}
}

func anthropicMessages(t *testing.T, baseURL string, profile string) sdkRun {
	hc, tap := tappedClient(t)
	client := anthropic.NewClient(anthropicoption.WithBaseURL(baseURL), anthropicoption.WithAPIKey("sk-ant-test-secret-key"),
		anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(hc), anthropicoption.WithHeader(fakellm.HeaderProfile, profile))
	stream := client.Messages.NewStreaming(testContext(t), anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Why do streams stall?"))},
	})
	var msg anthropic.Message
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	require.Len(t, msg.Content, 1)
	return sdkRun{text: msg.Content[0].Text, wire: tap.bytes(), model: msg.Model, id: msg.ID}
}

func openAIResponses(t *testing.T, baseURL string, profile string) sdkRun {
	hc, tap := tappedClient(t)
	client := openai.NewClient(openaioption.WithBaseURL(baseURL+"/v1/"), openaioption.WithAPIKey("sk-test-secret-key"),
		openaioption.WithMaxRetries(0), openaioption.WithHTTPClient(hc), openaioption.WithHeader(fakellm.HeaderProfile, profile))
	stream := client.Responses.NewStreaming(testContext(t), responses.ResponseNewParams{
		Model: "gpt-4.1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Why do streams stall?")},
	})
	var completed responses.Response
	for stream.Next() {
		if e, ok := stream.Current().AsAny().(responses.ResponseCompletedEvent); ok {
			completed = e.Response
		}
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	return sdkRun{text: completed.OutputText(), wire: tap.bytes(), model: completed.Model, id: completed.ID}
}

// TestSDKsThroughProxy streams with the official SDKs directly from fakellm
// and through the proxy: the SDKs must read exactly the bytes fakellm sent
// (byte for byte; direct and proxied runs differ only in timestamps and
// keepalive counts, so each is compared with what fakellm recorded), decode
// the same answer, and the proxy must record a span that matches.
func TestSDKsThroughProxy(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, baseURL, profile string) sdkRun
		op   string
		prov string
	}{
		{"openai chat", openAIChat, "chat", "openai"},
		{"openai responses", openAIResponses, "chat", "openai"},
		{"anthropic messages", anthropicMessages, "chat", "anthropic"},
	}
	for _, tt := range tests {
		for _, profile := range []string{fakellm.ProfileSteady, fakellm.ProfileStallKeepalive, fakellm.ProfileBurst} {
			t.Run(tt.name+"/"+profile, func(t *testing.T) {
				f := newFixture(t, nil)
				direct := tt.run(t, f.upstream.URL, profile)
				recDirect := f.waitRequest(t, 0)
				assert.Equal(t, sentWhole(t, f.fake), direct.wire, "direct: the SDK read what fakellm sent")
				f.fake.Reset() // the proxied call is request 0 again: same seed, same answer

				proxied := tt.run(t, f.proxyURL, profile)
				rec := f.waitRequest(t, 0)
				assert.Equal(t, sentWhole(t, f.fake), proxied.wire, "proxied: the SDK read exactly what fakellm sent")
				assert.Equal(t, direct.text, proxied.text)
				assert.Equal(t, recDirect.Text, proxied.text)
				assert.Equal(t, rec.ResponseID, proxied.id)

				span := f.spans(t, 1)[0]
				assert.Equal(t, ptrace.SpanKindClient, span.Kind())
				assert.Equal(t, ptrace.StatusCodeUnset, span.Status().Code(), span.Status().Message())
				assert.Equal(t, tt.op, attr(t, span, semconv.AttrOperationName).Str())
				assert.Equal(t, tt.prov, attr(t, span, semconv.AttrProviderName).Str())
				assert.Equal(t, tt.op+" "+rec.Model, span.Name())
				assert.Equal(t, rec.Model, attr(t, span, semconv.AttrRequestModel).Str())
				assert.Equal(t, proxied.model, attr(t, span, semconv.AttrResponseModel).Str())
				assert.Equal(t, rec.ResponseID, attr(t, span, semconv.AttrResponseID).Str())
				assert.True(t, attr(t, span, semconv.AttrRequestStream).Bool())
				assert.Equal(t, int64(rec.OutputTokens), attr(t, span, semconv.AttrUsageOutputTokens).Int())
				assert.Equal(t, int64(rec.InputTokens), attr(t, span, semconv.AttrUsageInputTokens).Int())
				assert.Equal(t, int64(200), attr(t, span, semconv.AttrHTTPStatusCode).Int())
				assert.Equal(t, "127.0.0.1", attr(t, span, semconv.AttrServerAddress).Str())
				assert.Len(t, chunkTimes(span), len(rec.ChunkTimes), "one chunk event per content chunk")
				assert.Zero(t, eventCount(span, semconv.EventKeepalive), "keepalives are not recorded by default")
				assertNoSecrets(t, span, rec.Text, "sk-test-secret-key", "sk-ant-test-secret-key", "Why do streams stall?")
			})
		}
	}
}

// TestCurlThroughProxy streams with curl -N, as an operator would.
func TestCurlThroughProxy(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed: skipping the curl -N test (apt-get install curl to run it)")
	}
	f := newFixture(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, curl, "-sS", "-N", "--fail-with-body",
		"-H", "Content-Type: application/json", "-H", "Authorization: Bearer sk-curl-secret",
		"-H", fakellm.HeaderProfile+": "+fakellm.ProfileStall,
		"-d", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"curl prompt"}]}`,
		f.proxyURL+"/v1/chat/completions").Output()
	require.NoError(t, err, string(out))
	rec := f.waitRequest(t, 0)
	assert.Equal(t, sentWhole(t, f.fake), out, "curl read exactly what fakellm sent")
	assert.True(t, strings.HasSuffix(string(out), "data: [DONE]\n\n"))
	span := f.spans(t, 1)[0]
	assert.Len(t, chunkTimes(span), len(rec.ChunkTimes))
	assertNoSecrets(t, span, rec.Text, "sk-curl-secret", "curl prompt")
}
