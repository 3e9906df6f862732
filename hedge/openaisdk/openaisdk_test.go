// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package openaisdk

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/streamstall/streamstall/hedge"
	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var hello = hedge.Request{Messages: []hedge.Message{{Role: "user", Content: "hello"}}}

// fakeSources starts a fakellm and returns it with a maker of SDK sources
// in front of it, each scripted, its model "sdk-" and its name.
func fakeSources(t *testing.T) (*fakellm.Server, func(name string, s fakellm.Script) hedge.Source) {
	t.Helper()
	srv, err := fakellm.New(fakellm.Config{})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return srv, func(name string, s fakellm.Script) hedge.Source {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("sk-test"),
			option.WithHeader(fakellm.HeaderScript, string(b)), option.WithMaxRetries(0))
		return NewSource(name, client, openai.ChatCompletionNewParams{Model: "sdk-" + name})
	}
}

func TestSourceRacesLikeAnyOther(t *testing.T) {
	srv, newSource := fakeSources(t)
	slow := newSource("slow", fakellm.Script{TTFTMillis: 3000, GapsMillis: []float64{1, 1}})
	fast := newSource("fast", fakellm.Script{TTFTMillis: 5, GapsMillis: []float64{1, 1, 1}})
	assert.Equal(t, "openai", fast.Provider())
	assert.Equal(t, "sdk-fast", fast.Model())

	h, err := hedge.New([]hedge.Source{slow, fast}, hedge.Delay(50*time.Millisecond))
	require.NoError(t, err)
	res, err := h.Complete(context.Background(), hello)
	require.NoError(t, err)
	assert.Equal(t, "fast", res.Source)
	assert.Len(t, res.Chunks, 4)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	recs, err := srv.WaitFor(ctx, 2)
	require.NoError(t, err)
	byModel := map[string]fakellm.Request{}
	for _, r := range recs {
		byModel[r.Model] = r
	}
	assert.True(t, byModel["sdk-slow"].Disconnected)
	assert.Equal(t, byModel["sdk-fast"].Text, res.Text)
	assert.Equal(t, int64(byModel["sdk-fast"].OutputTokens), res.Usage.OutputTokens)

	// An HTTP refusal surfaces before commit, sorted like any other.
	h, err = hedge.New([]hedge.Source{newSource("bad", fakellm.Script{Status: 400})}, hedge.Delay(time.Hour))
	require.NoError(t, err)
	_, err = h.Complete(context.Background(), hello)
	var se *hedge.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 400, se.StatusCode)
	assert.True(t, se.Fatal())
}

func TestKindOf(t *testing.T) {
	assert.Equal(t, hedge.ChunkText, kindOf(semconv.ChunkKindText))
	assert.Equal(t, hedge.ChunkToolCall, kindOf(semconv.ChunkKindToolCall))
	assert.Equal(t, hedge.ChunkReasoning, kindOf(semconv.ChunkKindReasoning))
	assert.Equal(t, hedge.ChunkText, kindOf(""))
}

// TestRetryAfterOfTheSDKSource: the only source answers 429 with a
// Retry-After of 1.5 s. As for the HTTP sources
// (TestIntegrationRetryAfterEndsTheCallWithTheWait), the StatusError
// carries the wait, and the Hedger does not call the source again against
// its answer: hedge/README.md, "no attempt of the call goes to a source
// before its wait is over".
func TestRetryAfterOfTheSDKSource(t *testing.T) {
	srv, newSource := fakeSources(t)
	src := newSource("limited", fakellm.Script{Status: 429, RetryAfterMillis: 1500})

	h, err := hedge.New([]hedge.Source{src}, hedge.Delay(time.Hour), hedge.MaxAttempts(3))
	require.NoError(t, err)
	_, err = h.Complete(context.Background(), hello)
	var se *hedge.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 429, se.StatusCode)
	assert.Equal(t, 1500*time.Millisecond, se.RetryAfter, "the source's Retry-After is lost")
	time.Sleep(50 * time.Millisecond)
	assert.Len(t, srv.Requests(), 1, "the source that asked to wait is not asked again at once")
}
