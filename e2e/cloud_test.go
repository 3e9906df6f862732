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
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// cloudGateway serves fakellm under the clouds' paths, as Vertex AI serves
// Anthropic's API (the model in the path, none in the body) and Azure
// OpenAI its deployments (an api-version query, an Api-Key header), and
// keeps the paths the proxy forwarded.
type cloudGateway struct {
	rp    *httputil.ReverseProxy
	mu    sync.Mutex
	paths []string
}

var vertexAnthropicPath = regexp.MustCompile(`/publishers/anthropic/models/([^/:]+):streamRawPredict$`)

func startCloudGateway(t *testing.T, fake string) (*cloudGateway, string) {
	t.Helper()
	target, err := url.Parse(fake)
	require.NoError(t, err)
	g := &cloudGateway{}
	g.rp = &httputil.ReverseProxy{
		FlushInterval: -1,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			p := r.In.URL.Path
			// The body is read whole before it is forwarded, as sse_capture
			// reads it: a ReverseProxy that streams it can lose the upstream
			// connection to net/http's race between the server closing the
			// request body once the response is flushed and the Transport's
			// last read of it (the go_bare path of the bench package).
			body, _ := io.ReadAll(r.Out.Body)
			if m := vertexAnthropicPath.FindStringSubmatch(p); m != nil {
				var fields map[string]any
				_ = json.Unmarshal(body, &fields)
				fields["model"] = m[1]
				body, _ = json.Marshal(fields)
				p = "/v1/messages"
			} else if _, op, ok := strings.Cut(p, "/openai/deployments/"); ok {
				_, op, _ = strings.Cut(op, "/")
				p = "/v1/" + op
			}
			r.Out.Body, r.Out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			r.Out.Header.Del("Content-Length")
			r.Out.URL.Path, r.Out.URL.RawPath, r.Out.URL.RawQuery = p, "", ""
		},
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv.URL
}

func (g *cloudGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.paths = append(g.paths, r.URL.Path+"?"+r.URL.RawQuery)
	g.mu.Unlock()
	g.rp.ServeHTTP(w, r)
}

func (g *cloudGateway) path(i int) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i >= len(g.paths) {
		return ""
	}
	return g.paths[i]
}

// TestCloudSDKsEndToEnd streams with anthropic-sdk-go's Vertex AI option
// and openai-go's azure package through the ocb-built collector's proxy to
// fakellm behind Vertex's and Azure's paths: the clients read fakellm's
// bytes unchanged, and the spans name the cloud's provider, the model the
// path gave, and the figures of fakellm's schedule.
func TestCloudSDKsEndToEnd(t *testing.T) {
	sink := startSink(t)
	fake := startFakellm(t)
	gateway, gatewayURL := startCloudGateway(t, fake)
	proxyPort := freePort(t)
	collector(t, fill(nativeConfig, "PROXY", proxyPort, "FAKELLM", gatewayURL, "SINK", sink.URL))
	proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const (
		claude     = "claude-sonnet-4-5@20250929"
		deployment = "gpt-4o-prod"
	)

	clients := []struct {
		name, span, provider, model, path string
		run                               func(tap *tapTransport) string
	}{
		{
			"anthropic on vertex ai", "chat " + claude, "gcp.vertex_ai", claude,
			"/v1/projects/e2e/locations/us-east5/publishers/anthropic/models/" + claude + ":streamRawPredict?",
			func(tap *tapTransport) string {
				creds := &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "ya29.e2e"})}
				client := anthropic.NewClient(anthropicoption.WithHTTPClient(&http.Client{Transport: tap}),
					vertex.WithCredentials(ctx, "us-east5", "e2e", creds),
					anthropicoption.WithBaseURL(proxy), anthropicoption.WithMaxRetries(0))
				stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
					Model: claude, MaxTokens: 256,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
				})
				var msg anthropic.Message
				for stream.Next() {
					require.NoError(t, msg.Accumulate(stream.Current()))
				}
				require.NoError(t, stream.Err())
				require.Len(t, msg.Content, 1)
				return msg.Content[0].Text
			},
		},
		{
			"azure openai", "chat " + deployment, "azure.ai.openai", deployment,
			"/openai/deployments/" + deployment + "/chat/completions?api-version=2024-10-21",
			func(tap *tapTransport) string {
				client := openai.NewClient(
					// On loopback the azure package sends through a transport
					// of its own: the tap is a middleware, the script a header.
					openaioption.WithMiddleware(func(req *http.Request, next openaioption.MiddlewareNext) (*http.Response, error) {
						resp, err := next(req)
						if err == nil {
							resp.Body = &tapBody{ReadCloser: resp.Body, tt: tap}
						}
						return resp, err
					}),
					openaioption.WithHeader(fakellm.HeaderScript, nativeScript), openaioption.WithMaxRetries(0),
					azure.WithEndpoint(proxy, "2024-10-21"), azure.WithAPIKey("azure-e2e-key"), azure.WithUnsafeAllowHTTP())
				stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
					Model:         deployment,
					Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
					StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
				})
				var acc openai.ChatCompletionAccumulator
				for stream.Next() {
					acc.AddChunk(stream.Current())
				}
				require.NoError(t, stream.Err())
				require.Len(t, acc.Choices, 1)
				return acc.Choices[0].Message.Content
			},
		},
	}
	for seq, c := range clients {
		tap := &tapTransport{}
		text := c.run(tap)
		assert.Equal(t, c.path, gateway.path(seq), "%s: the proxy forwarded the SDK's path", c.name)
		rec, sent := fakellmRequest(ctx, t, fake, seq)
		assert.Equal(t, sent, tap.bytes(), "%s: the client read exactly what fakellm sent", c.name)
		assert.Equal(t, rec.Text, text, c.name)

		attrs := sinkSpanAttrs(t, sink, c.span, c.name)
		assert.Equal(t, c.provider, attrs[semconv.AttrProviderName], c.name)
		assert.Equal(t, c.model, attrs[semconv.AttrRequestModel], c.name)
		assert.Equal(t, rec.ResponseID, attrs[semconv.AttrResponseID], c.name)
		assert.EqualValues(t, rec.OutputTokens, attrs[semconv.AttrUsageOutputTokens], c.name)
		assert.NotContains(t, attrs, semconv.AttrErrorType, c.name)

		assertScheduleFigures(t, attrs, rec, c.name)
	}
}
