// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

var updateRequests = flag.Bool("update-requests", false, "rewrite internal/llmstream/testdata/requests from the SDKs")

// requestFixtures is where the cloud SDKs' requests are kept as golden
// files; internal/llmstream's tests classify them.
var requestFixtures = filepath.Join("..", "..", "internal", "llmstream", "testdata", "requests")

const (
	vertexProject   = "streamstall-test"
	vertexRegion    = "us-east5"
	vertexModel     = "claude-sonnet-4-5@20250929"
	vertexToken     = "ya29.vertex-test-secret-token"
	azureAPIKey     = "azure-test-secret-key"
	azureAPIVersion = "2024-10-21"
	azureDeployment = "gpt-4o-mini-prod"
)

// cloudFront serves fakellm under the clouds' paths: Anthropic's API as
// Vertex AI serves it (the model in the path, not the body) and Azure
// OpenAI's deployment and v1 paths. It records what the proxy forwarded.
type cloudFront struct {
	next http.Handler
	mu   sync.Mutex
	seen []*http.Request
}

var vertexModelPath = regexp.MustCompile(`^/v1/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/([^/:]+):(stream)?[rR]awPredict$`)

func (c *cloudFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.seen = append(c.seen, r.Clone(r.Context()))
	c.mu.Unlock()
	switch m := vertexModelPath.FindStringSubmatch(r.URL.Path); {
	case m != nil:
		var fields map[string]any
		if err := json.Unmarshal(body, &fields); err != nil || fields["model"] != nil || fields["anthropic_version"] == nil {
			http.Error(w, "not a Vertex AI Anthropic body", http.StatusBadRequest)
			return
		}
		fields["model"] = m[1]
		body, _ = json.Marshal(fields)
		r.URL.Path = "/v1/messages"
	case strings.HasPrefix(r.URL.Path, "/openai/deployments/"+azureDeployment+"/"):
		if r.URL.Query().Get("api-version") != azureAPIVersion || r.Header.Get("Api-Key") != azureAPIKey {
			http.Error(w, "not an Azure OpenAI request", http.StatusUnauthorized)
			return
		}
		r.URL.Path = "/v1/" + strings.TrimPrefix(r.URL.Path, "/openai/deployments/"+azureDeployment+"/")
	case strings.HasPrefix(r.URL.Path, "/openai/v1/"):
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/openai")
	}
	r.URL.RawPath, r.URL.RawQuery = "", ""
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	c.next.ServeHTTP(w, r)
}

func (c *cloudFront) last(t *testing.T) *http.Request {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.NotEmpty(t, c.seen)
	return c.seen[len(c.seen)-1]
}

// withCloudFront puts a cloudFront between the fixture's upstream and fakellm.
func withCloudFront(f *fixture) *cloudFront {
	c := &cloudFront{next: f.fake}
	f.log.next = c
	return c
}

func vertexCredentials() *google.Credentials {
	return &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: vertexToken})}
}

// vertexAnthropic streams with anthropic-sdk-go's Vertex AI option, its
// base URL moved to baseURL.
func vertexAnthropic(t *testing.T, baseURL, profile string, stream bool) sdkRun {
	hc, tap := tappedClient(t)
	client := anthropic.NewClient(anthropicoption.WithHTTPClient(hc),
		vertex.WithCredentials(testContext(t), vertexRegion, vertexProject, vertexCredentials()),
		anthropicoption.WithBaseURL(baseURL), anthropicoption.WithMaxRetries(0), anthropicoption.WithHeader(fakellm.HeaderProfile, profile))
	params := anthropic.MessageNewParams{
		Model:     vertexModel,
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Why do streams stall?"))},
	}
	var msg anthropic.Message
	if stream {
		s := client.Messages.NewStreaming(testContext(t), params)
		for s.Next() {
			require.NoError(t, msg.Accumulate(s.Current()))
		}
		require.NoError(t, s.Err())
		require.NoError(t, s.Close())
	} else {
		got, err := client.Messages.New(testContext(t), params)
		require.NoError(t, err)
		msg = *got
	}
	require.Len(t, msg.Content, 1)
	return sdkRun{text: msg.Content[0].Text, wire: tap.bytes(), model: msg.Model, id: msg.ID}
}

// tapMiddleware records the response bytes an openai-go client reads: on
// loopback, its azure package sends through a transport of its own.
func tapMiddleware(tap *wireTap) openaioption.Middleware {
	return func(req *http.Request, next openaioption.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err == nil {
			resp.Body = &tappedBody{ReadCloser: resp.Body, tap: tap}
		}
		return resp, err
	}
}

// azureChat streams with openai-go's azure package (deployment paths and
// an api-version), or, with v1, with the plain client on Azure's v1 API.
func azureChat(v1 bool) func(t *testing.T, baseURL, profile string) sdkRun {
	return func(t *testing.T, baseURL, profile string) sdkRun {
		hc, _ := tappedClient(t)
		tap := &wireTap{}
		opts := []openaioption.RequestOption{
			openaioption.WithMiddleware(tapMiddleware(tap)), openaioption.WithHTTPClient(hc), openaioption.WithMaxRetries(0),
			openaioption.WithHeader(fakellm.HeaderProfile, profile),
			// The azure package's own loopback transport is not the test's
			// to close: no connection is left idle in it.
			openaioption.WithHeader("Connection", "close"),
		}
		if v1 {
			opts = append(opts, openaioption.WithBaseURL(baseURL+"/openai/v1/"), openaioption.WithHeader("Api-Key", azureAPIKey))
		} else {
			opts = append(opts, azure.WithEndpoint(baseURL, azureAPIVersion), azure.WithAPIKey(azureAPIKey), azure.WithUnsafeAllowHTTP())
		}
		client := openai.NewClient(opts...)
		stream := client.Chat.Completions.NewStreaming(testContext(t), openai.ChatCompletionNewParams{
			Model:         azureDeployment,
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
}

// TestCloudSDKsThroughProxy: anthropic-sdk-go on Vertex AI and openai-go on
// Azure OpenAI stream through the proxy as they do directly, byte for
// byte, and the spans name the cloud's provider and the model the path (or
// the body) gave.
func TestCloudSDKsThroughProxy(t *testing.T) {
	tests := []struct {
		name     string
		run      func(t *testing.T, baseURL, profile string) sdkRun
		provider string // proxy.provider; empty infers it
		wantProv string
		path     string
		model    string
		secret   string
	}{
		{
			"vertex anthropic stream", func(t *testing.T, u, p string) sdkRun { return vertexAnthropic(t, u, p, true) }, "", "gcp.vertex_ai",
			"/v1/projects/" + vertexProject + "/locations/" + vertexRegion + "/publishers/anthropic/models/" + vertexModel + ":streamRawPredict", vertexModel, vertexToken,
		},
		{"azure deployment", azureChat(false), "", "azure.ai.openai", "/openai/deployments/" + azureDeployment + "/chat/completions", azureDeployment, azureAPIKey},
		{"azure v1 by proxy.provider", azureChat(true), "azure.ai.openai", "azure.ai.openai", "/openai/v1/chat/completions", azureDeployment, azureAPIKey},
	}
	for _, tt := range tests {
		for _, profile := range []string{fakellm.ProfileSteady, fakellm.ProfileStall} {
			t.Run(tt.name+"/"+profile, func(t *testing.T) {
				f := newFixture(t, nil, withProxy(func(p *ProxyConfig) { p.Provider = tt.provider }))
				front := withCloudFront(f)
				direct := tt.run(t, f.upstream.URL, profile)
				f.waitRequest(t, 0)
				assert.Equal(t, sentWhole(t, f.fake), direct.wire, "direct: the SDK read what fakellm sent")
				f.fake.Reset()

				proxied := tt.run(t, f.proxyURL, profile)
				rec := f.waitRequest(t, 0)
				assert.Equal(t, tt.path, front.last(t).URL.Path, "the proxy forwarded the SDK's path")
				assert.Equal(t, sentWhole(t, f.fake), proxied.wire, "proxied: the SDK read exactly what fakellm sent")
				assert.Equal(t, direct.text, proxied.text)
				assert.Equal(t, rec.Text, proxied.text)

				span := f.spans(t, 1)[0]
				assert.Equal(t, ptrace.StatusCodeUnset, span.Status().Code(), span.Status().Message())
				assert.Equal(t, "chat "+tt.model, span.Name())
				assert.Equal(t, tt.wantProv, attr(t, span, semconv.AttrProviderName).Str())
				assert.Equal(t, tt.model, attr(t, span, semconv.AttrRequestModel).Str())
				assert.Equal(t, proxied.model, attr(t, span, semconv.AttrResponseModel).Str())
				assert.Equal(t, rec.ResponseID, attr(t, span, semconv.AttrResponseID).Str())
				assert.True(t, attr(t, span, semconv.AttrRequestStream).Bool())
				assert.Equal(t, int64(rec.OutputTokens), attr(t, span, semconv.AttrUsageOutputTokens).Int())
				assert.Len(t, chunkTimes(span), len(rec.ChunkTimes), "one chunk event per content chunk")
				assertNoSecrets(t, span, rec.Text, tt.secret, "Why do streams stall?")
			})
		}
	}
}

// TestVertexAnthropicRawPredict: the unary call (":rawPredict") is a
// Messages call too, its usage read from the whole body.
func TestVertexAnthropicRawPredict(t *testing.T) {
	f := newFixture(t, nil)
	withCloudFront(f)
	run := vertexAnthropic(t, f.proxyURL, fakellm.ProfileSteady, false)
	rec := f.waitRequest(t, 0)
	assert.Equal(t, rec.Text, run.text)
	span := f.spans(t, 1)[0]
	assert.Equal(t, "chat "+vertexModel, span.Name())
	assert.Equal(t, "gcp.vertex_ai", attr(t, span, semconv.AttrProviderName).Str())
	assert.False(t, attr(t, span, semconv.AttrRequestStream).Bool())
	assert.Equal(t, int64(rec.OutputTokens), attr(t, span, semconv.AttrUsageOutputTokens).Int())
}

// sdkRequest is an SDK's request as the golden files keep it: the parts a
// proxy classifies by, and the credential headers it passes on.
type sdkRequest struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Query   string            `json:"query,omitempty"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

// capturedHeaders are the headers the golden files keep; the SDKs'
// X-Stainless-* headers name the SDK's version and platform.
var capturedHeaders = []string{"Authorization", "Api-Key", "Anthropic-Version", "Content-Type", "Accept"}

// TestCloudSDKRequests keeps the requests the cloud SDKs send, as they
// send them, in internal/llmstream/testdata/requests (rewritten with
// -update-requests), so that the classification tests there read what
// the real clients put on the wire.
func TestCloudSDKRequests(t *testing.T) {
	var mu sync.Mutex
	var got []sdkRequest
	srv := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := sdkRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Headers: map[string]string{}, Body: body}
		for _, h := range capturedHeaders {
			if v := r.Header.Get(h); v != "" {
				req.Headers[h] = v
			}
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		http.Error(w, `{"error":{"type":"fixture","message":"recorded"}}`, http.StatusTeapot)
	}))
	ctx := testContext(t)
	hc := testClient(t)
	msg := anthropic.MessageNewParams{
		Model: vertexModel, MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Why do streams stall?"))},
	}
	chat := openai.ChatCompletionNewParams{
		Model:    azureDeployment,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Why do streams stall?")},
	}
	vertexClient := anthropic.NewClient(anthropicoption.WithHTTPClient(hc),
		vertex.WithCredentials(ctx, vertexRegion, vertexProject, vertexCredentials()),
		anthropicoption.WithBaseURL(srv), anthropicoption.WithMaxRetries(0))
	azureClient := openai.NewClient(openaioption.WithHTTPClient(hc), openaioption.WithMaxRetries(0), openaioption.WithHeader("Connection", "close"),
		azure.WithEndpoint(srv, azureAPIVersion), azure.WithAPIKey(azureAPIKey), azure.WithUnsafeAllowHTTP())
	calls := []struct {
		file string
		call func()
	}{
		{"vertex_anthropic_stream.json", func() { _ = vertexClient.Messages.NewStreaming(ctx, msg).Err() }},
		{"vertex_anthropic_unary.json", func() { _, _ = vertexClient.Messages.New(ctx, msg) }},
		{"vertex_anthropic_count_tokens.json", func() {
			_, _ = vertexClient.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: vertexModel, Messages: msg.Messages})
		}},
		{"azure_openai_chat_stream.json", func() { _ = azureClient.Chat.Completions.NewStreaming(ctx, chat).Err() }},
		{"azure_openai_completions.json", func() {
			_, _ = azureClient.Completions.New(ctx, openai.CompletionNewParams{
				Model: openai.CompletionNewParamsModel(azureDeployment), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Why")},
			})
		}},
	}
	for i, c := range calls {
		c.call()
		mu.Lock()
		require.Len(t, got, i+1, c.file)
		req := got[i]
		mu.Unlock()
		var body bytes.Buffer
		require.NoError(t, json.Indent(&body, req.Body, "", "  "))
		req.Body = body.Bytes()
		b, err := json.MarshalIndent(req, "", "  ")
		require.NoError(t, err)
		b = append(b, '\n')
		path := filepath.Join(requestFixtures, c.file)
		if *updateRequests {
			require.NoError(t, os.MkdirAll(requestFixtures, 0o755))
			require.NoError(t, os.WriteFile(path, b, 0o600))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "run go test -run TestCloudSDKRequests -update-requests")
		assert.JSONEq(t, string(want), string(b), "%s: the SDK no longer sends what the golden file holds", c.file)
	}
}
