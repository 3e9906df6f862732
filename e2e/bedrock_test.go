// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go/auth/bearer"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
)

// The proxy in front of Bedrock (here a verifying upstream before fakellm)
// with a Bedrock API key passed on; with SigV4 the config is the receiver
// README's, where the proxy signs every upstream request itself with the
// sigv4auth extension. Both go before the stall processor, their spans to
// an OTLP sink.
const (
	bedrockBearerConfig = `
receivers:
  sse_capture:
    proxy:
      endpoint: 127.0.0.1:${PROXY}
      upstream:
        endpoint: ${UPSTREAM}
`
	bedrockPipeline = `
processors:
  stall:
    stall_threshold: 500ms
exporters:
` + sinkExporter + `service:
  pipelines:
    traces:
      receivers: [sse_capture]
      processors: [stall]
      exporters: [otlp_http]
`
)

// bedrockConfig is the collector's config for a run with auth: bearer or
// sigv4 (the README's block, on a free port and the test's upstream).
func bedrockConfig(t *testing.T, auth string, proxyPort int, upstream, sink string) string {
	t.Helper()
	cfg := fill(bedrockBearerConfig, "PROXY", proxyPort, "UPSTREAM", upstream)
	if auth == "sigv4" {
		doc := docBlock(t, "../receiver/ssecapture/README.md", "The proxy", "yaml", 0).Text
		cfg = strings.NewReplacer("localhost:8787", fmt.Sprintf("127.0.0.1:%d", proxyPort),
			"https://bedrock-runtime.us-east-1.amazonaws.com", upstream).Replace(doc)
		require.Contains(t, cfg, upstream, "the README's upstream is Bedrock's")
	}
	return cfg + fill(bedrockPipeline, "SINK", sink)
}

// The credentials of the test: the proxy's, which sigv4auth reads from the
// environment, and the client's, which sign for the proxy's host only.
const (
	proxyKeyID      = "AKIDSTREAMSTALLPROXY"
	proxySecret     = "proxy-secret-for-e2e"
	clientKeyID     = "AKIDSTREAMSTALLCLIENT"
	bedrockAPIKey   = "ABSKQmVkcm9ja0FQSUtleS1lMmU="
	bedrockRegion   = "us-east-1"
	bedrockSigning  = "bedrock"
	sigV4HeaderName = "AWS4-HMAC-SHA256"
)

// upstreamAuth is what the upstream saw of one request's credentials.
type upstreamAuth struct {
	authorization string
	// signatureValid: a SigV4 signature that the SDK's signer computes
	// again, for this upstream's host, with the proxy's credentials.
	signatureValid bool
	credential     string
	securityToken  string
}

// verifyingUpstream stands where Bedrock would: it checks each request's
// credentials, as Bedrock does, then hands it to fakellm unchanged, and
// its answer back unchanged, each write flushed.
type verifyingUpstream struct {
	rp   *httputil.ReverseProxy
	mu   sync.Mutex
	seen []upstreamAuth
}

func newVerifyingUpstream(t *testing.T, fake string) (*httptest.Server, *verifyingUpstream) {
	u, err := url.Parse(fake)
	require.NoError(t, err)
	v := &verifyingUpstream{rp: &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = "" },
		FlushInterval: -1,
	}}
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)
	return srv, v
}

func (v *verifyingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	seen := upstreamAuth{authorization: r.Header.Get("Authorization"), securityToken: r.Header.Get("X-Amz-Security-Token")}
	if strings.HasPrefix(seen.authorization, sigV4HeaderName) {
		seen.credential, seen.signatureValid = verifySigV4(r, body)
	}
	v.mu.Lock()
	v.seen = append(v.seen, seen)
	v.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	v.rp.ServeHTTP(w, r)
}

func (v *verifyingUpstream) last() upstreamAuth {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seen[len(v.seen)-1]
}

// verifySigV4 signs the request again with the SDK's own signer, with the
// proxy's credentials and the request's date, over the headers it says it
// signed and this server's own host, and compares the signatures.
func verifySigV4(r *http.Request, body []byte) (credential string, valid bool) {
	auth := r.Header.Get("Authorization")
	fields := map[string]string{}
	for _, part := range strings.Split(strings.TrimPrefix(auth, sigV4HeaderName+" "), ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = val
	}
	credential = fields["Credential"]
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return credential, false
	}
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return credential, false
	}
	again.ContentLength = int64(len(body))
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h == "host" || h == "content-length" {
			continue
		}
		again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: proxyKeyID, SecretAccessKey: proxySecret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), bedrockSigning, bedrockRegion, at); err != nil {
		return credential, false
	}
	return credential, again.Header.Get("Authorization") == auth
}

// bedrockTap is the client's transport: it adds fakellm's script, records
// the client's own Authorization and the bytes it read. It also gives
// net/http a request body of its own: smithy-go closes the body it hands a
// transport once the response headers are in, while net/http may still
// read it (its check for bytes past Content-Length), and a failed read
// drops the connection, stream and all.
type bedrockTap struct {
	tapTransport
	authorization string
}

func (bt *bedrockTap) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(b))
	bt.mu.Lock()
	bt.authorization = req.Header.Get("Authorization")
	bt.mu.Unlock()
	return bt.tapTransport.RoundTrip(req)
}

// plainHTTPBearer signs as the SDK's bearer signer does, without its
// refusal of plain HTTP: the proxy listens on plain HTTP here.
type plainHTTPBearer struct{}

func (plainHTTPBearer) SignWithBearerToken(_ context.Context, tok bearer.Token, m bearer.Message) (bearer.Message, error) {
	req, ok := m.(*smithyhttp.Request)
	if !ok {
		return nil, fmt.Errorf("unexpected message %T", m)
	}
	req = req.Clone()
	req.Header.Set("Authorization", "Bearer "+tok.Value)
	return req, nil
}

func newBedrockClient(proxy string, hc *http.Client, sigv4 bool) *bedrockruntime.Client {
	o := bedrockruntime.Options{Region: bedrockRegion, BaseEndpoint: aws.String(proxy), HTTPClient: hc, RetryMaxAttempts: 1}
	if sigv4 {
		o.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: clientKeyID, SecretAccessKey: "client-secret", SessionToken: "client-session"}, nil
		})
	} else {
		o.BearerAuthTokenProvider = bearer.StaticTokenProvider{Token: bearer.Token{Value: bedrockAPIKey}}
		o.BearerAuthSigner = plainHTTPBearer{}
		o.AuthSchemePreference = []string{"httpBearerAuth"}
	}
	return bedrockruntime.New(o)
}

// converseText streams a ConverseStream call and returns its text.
func converseText(ctx context.Context, t *testing.T, c *bedrockruntime.Client, model string) string {
	t.Helper()
	out, err := c.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{
		ModelId:  aws.String(model),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hi"}}}},
	})
	require.NoError(t, err)
	stream := out.GetStream()
	defer func() { _ = stream.Close() }()
	var text strings.Builder
	for ev := range stream.Events() {
		if d, ok := ev.(*types.ConverseStreamOutputMemberContentBlockDelta); ok {
			if tx, ok := d.Value.Delta.(*types.ContentBlockDeltaMemberText); ok {
				text.WriteString(tx.Value)
			}
		}
	}
	require.NoError(t, stream.Err())
	return text.String()
}

// invokeText streams an InvokeModelWithResponseStream call to a Claude
// model and returns the text of its Anthropic events.
func invokeText(ctx context.Context, t *testing.T, c *bedrockruntime.Client, model string) string {
	t.Helper()
	out, err := c.InvokeModelWithResponseStream(ctx, &bedrockruntime.InvokeModelWithResponseStreamInput{
		ModelId: aws.String(model), ContentType: aws.String("application/json"),
		Body: []byte(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":256,"messages":[{"role":"user","content":"hi"}]}`),
	})
	require.NoError(t, err)
	stream := out.GetStream()
	defer func() { _ = stream.Close() }()
	var text strings.Builder
	for ev := range stream.Events() {
		c, ok := ev.(*types.ResponseStreamMemberChunk)
		require.True(t, ok, "%T", ev)
		var e struct {
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		require.NoError(t, json.Unmarshal(c.Value.Bytes, &e))
		text.WriteString(e.Delta.Text)
	}
	require.NoError(t, stream.Err())
	return text.String()
}

// TestBedrockSDKEndToEnd streams with aws-sdk-go-v2's bedrockruntime, both
// ConverseStream and InvokeModelWithResponseStream (Claude's events), through
// the ocb-built collector's proxy to fakellm, once with a Bedrock API key
// (passed on) and once signed with SigV4 (the client's signature dropped, the
// proxy signing for the upstream with sigv4auth): the clients read fakellm's
// bytes unchanged, the upstream gets the credential it can check, and the
// spans carry provider aws.bedrock, the model of the path and the figures of
// fakellm's schedule, with Bedrock's own latency.
func TestBedrockSDKEndToEnd(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", proxyKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", proxySecret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	fake := startFakellm(t)
	upstream, verifier := newVerifyingUpstream(t, fake)
	seq := 0
	for _, auth := range []string{"bearer", "sigv4"} {
		t.Run(auth, func(t *testing.T) {
			sink := startSink(t)
			proxyPort := freePort(t)
			var extensions []string
			if auth == "sigv4" {
				extensions = []string{"sigv4auth"}
			}
			collector(t, bedrockConfig(t, auth, proxyPort, upstream.URL, sink.URL), extensions...)
			proxy := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			for _, op := range []struct {
				name, model string
				run         func(c *bedrockruntime.Client, model string) string
			}{
				{"converse_stream", "anthropic.claude-sonnet-4-20250514-v1:0/" + auth, func(c *bedrockruntime.Client, model string) string {
					return converseText(ctx, t, c, model)
				}},
				{"invoke_with_response_stream", "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0/" + auth, func(c *bedrockruntime.Client, model string) string {
					return invokeText(ctx, t, c, model)
				}},
			} {
				name := auth + " " + op.name
				tap := &bedrockTap{}
				text := op.run(newBedrockClient(proxy, &http.Client{Transport: tap}, auth == "sigv4"), op.model)
				rec, sent := fakellmRequest(ctx, t, fake, seq)
				seq++
				assert.Equal(t, sent, tap.bytes(), "%s: the client read exactly what fakellm sent", name)
				assert.Equal(t, rec.Text, text, name)
				assert.Equal(t, op.model, rec.Model, "%s: the model id reached fakellm whole", name)

				seen := verifier.last()
				if auth == "bearer" {
					assert.Equal(t, "Bearer "+bedrockAPIKey, seen.authorization, "%s: the API key goes on", name)
				} else {
					assert.True(t, strings.HasPrefix(tap.authorization, sigV4HeaderName+" Credential="+clientKeyID+"/"), tap.authorization)
					assert.True(t, strings.HasPrefix(seen.credential, proxyKeyID+"/"), "%s: signed with the proxy's credentials: %s", name, seen.credential)
					assert.True(t, seen.signatureValid, "%s: a valid signature for the upstream's host", name)
					assert.Empty(t, seen.securityToken, "%s: the client's session token is dropped", name)
				}

				attrs := sinkSpanAttrs(t, sink, "chat "+op.model, name)
				assert.Equal(t, "aws.bedrock", attrs[semconv.AttrProviderName], name)
				assert.Equal(t, op.model, attrs[semconv.AttrRequestModel], name)
				assert.Equal(t, true, attrs[semconv.AttrRequestStream], name)
				assert.EqualValues(t, rec.OutputTokens, attrs[semconv.AttrUsageOutputTokens], name)
				assert.EqualValues(t, rec.InputTokens, attrs[semconv.AttrUsageInputTokens], name)
				assert.NotContains(t, attrs, semconv.AttrErrorType, name)
				assert.Equal(t, float64(rec.Plan.BedrockLatencyMs()), attrs[semconv.AttrServerTotalMs], "%s: Bedrock's own latency", name)

				assertScheduleFigures(t, attrs, rec, name)
			}
		})
	}
}
