// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ssecapture

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

// ownedBodyTransport gives net/http a request body of its own: smithy-go
// closes the body it hands a transport once the response headers are in,
// while net/http may still read it, and that failed read drops the
// connection, stream and all.
type ownedBodyTransport struct{ next http.RoundTripper }

func (o ownedBodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(b))
	return o.next.RoundTrip(req)
}

// TestBedrockSDKThroughProxy: aws-sdk-go-v2's ConverseStream, signed with
// SigV4 for the proxy's host, reaches the upstream without the client's
// signature (it could only be refused there), its stream unchanged; the
// span is Bedrock's, its chunks the stream's.
func TestBedrockSDKThroughProxy(t *testing.T) {
	f := newFixture(t, nil)
	hc, tap := tappedClient(t)
	hc.Transport = ownedBodyTransport{hc.Transport}
	client := bedrockruntime.New(bedrockruntime.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(f.proxyURL), HTTPClient: hc, RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDCLIENT", SecretAccessKey: "client-secret", SessionToken: "client-session"}, nil
		}),
	})
	out, err := client.ConverseStream(testContext(t), &bedrockruntime.ConverseStreamInput{
		ModelId:  aws.String("anthropic.claude-sonnet-4-20250514-v1:0"),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hi"}}}},
	})
	require.NoError(t, err)
	stream := out.GetStream()
	var text strings.Builder
	for ev := range stream.Events() {
		if d, ok := ev.(*types.ConverseStreamOutputMemberContentBlockDelta); ok {
			if tx, ok := d.Value.Delta.(*types.ContentBlockDeltaMemberText); ok {
				text.WriteString(tx.Value)
			}
		}
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())

	h, _ := f.log.last(t)
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"} {
		assert.Empty(t, h.Values(k), "%s of the client's signature goes no further", k)
	}
	rec := f.fake.Requests()[0]
	assert.Equal(t, rec.Text, text.String())
	assert.Equal(t, sentWhole(t, f.fake), tap.bytes(), "the client read the stream as sent")
	span := f.spans(t, 1)[0]
	attrs := span.Attributes().AsRaw()
	assert.Equal(t, "aws.bedrock", attrs[semconv.AttrProviderName])
	assert.Equal(t, "anthropic.claude-sonnet-4-20250514-v1:0", attrs[semconv.AttrRequestModel])
	assert.Equal(t, float64(rec.Plan.BedrockLatencyMs()), attrs[semconv.AttrServerTotalMs])
	assert.Equal(t, 12, eventCount(span, semconv.EventChunk))
	assert.NotContains(t, attrs, semconv.AttrErrorType)
}

// TestBedrockAPIKeyPassesThrough: a Bedrock API key is no signature: it
// goes on to the upstream as the client sent it.
func TestBedrockAPIKeyPassesThrough(t *testing.T) {
	f := newFixture(t, nil)
	resp, _ := post(t, testClient(t), f.proxyURL+"/model/amazon.nova-pro-v1:0/converse-stream", `{"messages":[]}`,
		http.Header{"Authorization": {"Bearer ABSK-test-key"}})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	h, _ := f.log.last(t)
	assert.Equal(t, "Bearer ABSK-test-key", h.Get("Authorization"))
	assert.Equal(t, "aws.bedrock", f.spans(t, 1)[0].Attributes().AsRaw()[semconv.AttrProviderName])
}

// TestBedrockFrameBudget: a large event stream message is held on the
// receiver's frame budget while it arrives and given back once it is done;
// the client gets every byte.
func TestBedrockFrameBudget(t *testing.T) {
	var msg bytes.Buffer
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("event"))
	h.Set(":event-type", eventstream.StringValue("contentBlockDelta"))
	require.NoError(t, eventstream.NewEncoder().Encode(&msg, eventstream.Message{
		Headers: h, Payload: []byte(`{"contentBlockIndex":0,"delta":{"text":"` + strings.Repeat("x", 2<<20) + `"}}`),
	}))
	wire := msg.Bytes()
	release := make(chan struct{})
	upstream := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(wire[:len(wire)/2])
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write(wire[len(wire)/2:])
	}))
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
		p.Upstream.Endpoint = upstream
		p.FrameBufferBytes = 8 << 20
	}))
	done := make(chan []byte)
	client := testClient(t)
	go func() {
		var got []byte
		// Only the test's goroutine may fail the test: a failed call shows as
		// bytes missing.
		if resp, err := client.Post(f.proxyURL+"/model/m/converse-stream", "application/json", strings.NewReader(`{}`)); err == nil {
			got, _ = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		done <- got
	}()
	require.Eventually(t, func() bool { return f.rcv.proxy.FrameBufferBytes() >= 2<<20 }, 10*time.Second, 10*time.Millisecond)
	close(release)
	assert.Equal(t, wire, <-done)
	span := f.spans(t, 1)[0]
	assert.Equal(t, 1, eventCount(span, semconv.EventChunk))
	assert.Zero(t, f.rcv.proxy.FrameBufferBytes(), "the stream gave its buffers back")
}

// TestBedrockErrorStatusType: an error status of Bedrock's names its type
// in a header, and error.type is that type.
func TestBedrockErrorStatusType(t *testing.T) {
	f := newFixture(t, nil)
	resp, _ := post(t, testClient(t), f.proxyURL+"/model/m/converse-stream", `{"messages":[]}`,
		http.Header{fakellm.HeaderProfile: {fakellm.ProfileHTTP429}})
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "ThrottlingException", f.spans(t, 1)[0].Attributes().AsRaw()[semconv.AttrErrorType])
}

// bedrockGuardClient is aws-sdk-go-v2's client of a guarded proxy, with
// fakellm's script for every request.
func bedrockGuardClient(t *testing.T, proxyURL, script string) *bedrockruntime.Client {
	t.Helper()
	hc := testClient(t)
	hc.Transport = ownedBodyTransport{scriptTransport{next: hc.Transport, script: script}}
	return bedrockruntime.New(bedrockruntime.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(proxyURL), HTTPClient: hc, RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDCLIENT", SecretAccessKey: "client-secret"}, nil
		}),
	})
}

type scriptTransport struct {
	next   http.RoundTripper
	script string
}

func (s scriptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req.Header.Set(fakellm.HeaderScript, s.script)
	return s.next.RoundTrip(req)
}

// TestGuardEndsBedrockStalls: a ConverseStream and an
// InvokeModelWithResponseStream that stall after their first chunks end,
// after stall_timeout, with the exception message the SDK raises as its
// typed error; the span says the guard ended them.
func TestGuardEndsBedrockStalls(t *testing.T) {
	f := newFixture(t, nil, withProxy(func(p *ProxyConfig) {
		g := p.Guard.GetOrInsertDefault()
		g.StallTimeout = AutoDuration(300 * time.Millisecond)
		g.Hedge.MaxAttempts = 1
	}))
	client := bedrockGuardClient(t, f.proxyURL, `{"ttft_ms":10,"gaps_ms":[5,20000]}`)
	msgs := []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hi"}}}}

	out, err := client.ConverseStream(testContext(t), &bedrockruntime.ConverseStreamInput{
		ModelId: aws.String("amazon.nova-pro-v1:0"), Messages: msgs,
	})
	require.NoError(t, err)
	stream := out.GetStream()
	deltas := 0
	for ev := range stream.Events() {
		if _, ok := ev.(*types.ConverseStreamOutputMemberContentBlockDelta); ok {
			deltas++
		}
	}
	var streamErr *types.ModelStreamErrorException
	require.ErrorAs(t, stream.Err(), &streamErr, "%T %v", stream.Err(), stream.Err())
	assert.Contains(t, aws.ToString(streamErr.Message), "stream stalled")
	assert.Equal(t, "stall_timeout", aws.ToString(streamErr.OriginalMessage))
	assert.Equal(t, 2, deltas, "the content before the stall is delivered")
	_ = stream.Close() // it returns the stream's error again

	inv, err := client.InvokeModelWithResponseStream(testContext(t), &bedrockruntime.InvokeModelWithResponseStreamInput{
		ModelId: aws.String("anthropic.claude-sonnet-4-20250514-v1:0"), ContentType: aws.String("application/json"),
		Body: []byte(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`),
	})
	require.NoError(t, err)
	istream := inv.GetStream()
	for range istream.Events() {
	}
	require.ErrorAs(t, istream.Err(), &streamErr, "%T %v", istream.Err(), istream.Err())
	_ = istream.Close()

	for _, span := range f.spans(t, 2) {
		assert.Equal(t, "stall_timeout", attr(t, span, semconv.AttrErrorType).Str(), span.Name())
		assert.Equal(t, 2, eventCount(span, semconv.EventChunk), span.Name())
	}
}
