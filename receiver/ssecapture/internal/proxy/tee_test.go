// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/llmstream"
	"github.com/streamstall/streamstall/internal/sse"
)

// scriptedBody returns one scripted read per Read call, advancing the fake
// clock by the read's delay first, as an upstream's frames arrive over time.
type scriptedBody struct {
	clock  *clockwork.FakeClock
	reads  []scriptedRead
	closed bool
}

type scriptedRead struct {
	after time.Duration
	data  string
}

func (s *scriptedBody) Read(p []byte) (int, error) {
	if len(s.reads) == 0 {
		return 0, io.EOF
	}
	r := s.reads[0]
	s.clock.Advance(r.after)
	n := copy(p, r.data)
	if n < len(r.data) {
		s.reads[0].after, s.reads[0].data = 0, r.data[n:]
	} else {
		s.reads = s.reads[1:]
	}
	return n, nil
}

func (s *scriptedBody) Close() error {
	s.closed = true
	return nil
}

// scriptStart is when a scripted body's fake clock starts.
var scriptStart = time.Unix(1_790_000_000, 0)

// newScriptedTee returns a chat-completions tee over a scripted body, its
// fake clock starting at scriptStart, and the bytes the body will yield.
func newScriptedTee(reads []scriptedRead) (*streamTee, *scriptedBody, string) {
	return newShapedTee(llmstream.ShapeChatCompletions, sse.FramingSSE, reads)
}

// newShapedTee is newScriptedTee for a stream of any shape and framing.
func newShapedTee(shape llmstream.Shape, framing sse.Framing, reads []scriptedRead) (*streamTee, *scriptedBody, string) {
	var want strings.Builder
	for _, r := range reads {
		want.WriteString(r.data)
	}
	clock := clockwork.NewFakeClockAt(scriptStart)
	c := &call{d: &callDeps{clock: clock, maxValueLen: 256}, shape: shape}
	body := &scriptedBody{clock: clock, reads: reads}
	tee := newStreamTee(c, body, framing, "", true)
	return tee, body, want.String()
}

func chatFrame(text string) string {
	return fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", text)
}

// TestTeeStampsEachFrameWithItsRead: every frame carries the arrival time
// of the read that completed it, also when a frame is split across reads,
// when one read brings two frames, and for a frame larger than the reader's
// buffer; the bytes pass through unchanged.
func TestTeeStampsEachFrameWithItsRead(t *testing.T) {
	big := chatFrame(strings.Repeat("x", 4<<10)) // over io.ReadAll's first buffer
	reads := []scriptedRead{
		{10 * time.Millisecond, chatFrame("a")},
		{5 * time.Millisecond, chatFrame("b")},
		{3 * time.Second, chatFrame("c")[:20]},      // a frame split across reads:
		{7 * time.Millisecond, chatFrame("c")[20:]}, // its time is the second read's
		{20 * time.Millisecond, big},
		{1 * time.Millisecond, chatFrame("d") + chatFrame("e")}, // two frames, one read
		{2 * time.Millisecond, "data: [DONE]\n\n"},
	}
	tee, body, want := newScriptedTee(reads)
	c := tee.c

	got, err := io.ReadAll(tee)
	require.NoError(t, err)
	require.NoError(t, tee.Close())
	assert.True(t, body.closed)
	assert.Equal(t, want, string(got))

	ms := func(d time.Duration) int64 { return scriptStart.Add(d).UnixNano() }
	var at []int64
	for _, ch := range c.chunks.Chunks() {
		at = append(at, ch.At)
	}
	assert.Equal(t, []int64{
		ms(10 * time.Millisecond),
		ms(15 * time.Millisecond),
		ms(3022 * time.Millisecond),
		ms(3042 * time.Millisecond),
		ms(3043 * time.Millisecond), ms(3043 * time.Millisecond),
	}, at)
	assert.True(t, c.terminal, "[DONE] was seen")
	assert.True(t, c.eof)
	assert.NoError(t, c.parseErr)
}

// TestTeeStampsAcrossBatches: frames are parsed in batches of reads, and
// still every frame carries its own read's arrival time, on both sides of
// every batch boundary, with a frame larger than a whole batch among them
// and a frame split across the boundary.
func TestTeeStampsAcrossBatches(t *testing.T) {
	const frames = 5*parseBatchReads + 3
	huge := chatFrame(strings.Repeat("y", 2*parseBatchBytes))
	var reads []scriptedRead
	var wantAt []time.Duration
	elapsed := time.Duration(0)
	for i := range frames {
		gap := time.Duration(i+1) * time.Millisecond
		elapsed += gap
		frame := chatFrame(fmt.Sprint(i))
		switch i {
		case parseBatchReads + 1:
			frame = huge
		case 3*parseBatchReads - 1: // split: the frame ends in the next read
			half := len(frame) / 2
			reads = append(reads, scriptedRead{gap, frame[:half]})
			frame = frame[half:]
			gap = time.Millisecond
			elapsed += gap
		}
		reads = append(reads, scriptedRead{gap, frame})
		wantAt = append(wantAt, elapsed)
	}
	tee, _, want := newScriptedTee(reads)
	c := tee.c

	var got strings.Builder
	buf := make([]byte, 32<<10) // ReverseProxy's copy buffer
	for {
		n, err := tee.Read(buf)
		got.Write(buf[:n])
		// What waits to be parsed stays bounded by a batch and one read.
		require.LessOrEqual(t, len(tee.reads), parseBatchReads)
		require.LessOrEqual(t, len(tee.batch), parseBatchBytes+len(buf))
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	require.NoError(t, tee.Close())
	assert.Equal(t, want, got.String())
	require.Len(t, c.chunks.Chunks(), frames)
	for i, ch := range c.chunks.Chunks() {
		assert.Equal(t, scriptStart.Add(wantAt[i]).UnixNano(), ch.At, "frame %d", i)
	}
	assert.Empty(t, tee.batch, "everything parsed at close")
	assert.NoError(t, c.parseErr)
}

// TestTeeStampsNativeFramings: an Ollama NDJSON line and a Gemini array
// element carry the time of the read that completed them, when split across
// reads too; Ollama's last line, sent without its line feed, still counts
// once the body ends cleanly, and its timings reach the call.
func TestTeeStampsNativeFramings(t *testing.T) {
	ms := func(d time.Duration) int64 { return scriptStart.Add(d).UnixNano() }
	line := func(text string) string {
		return fmt.Sprintf("{\"model\":\"llama3.2\",\"message\":{\"role\":\"assistant\",\"content\":%q},\"done\":false}\n", text)
	}
	tee, _, want := newShapedTee(llmstream.ShapeOllamaChat, sse.FramingNDJSON, []scriptedRead{
		{10 * time.Millisecond, line("a")},
		{2 * time.Second, line("b")[:15]},
		{5 * time.Millisecond, line("b")[15:] + line("c")},
		{1 * time.Millisecond, `{"model":"llama3.2","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","eval_count":3,"eval_duration":4000000}`},
	})
	got, err := io.ReadAll(tee)
	require.NoError(t, err)
	require.NoError(t, tee.Close())
	assert.Equal(t, want, string(got))
	c := tee.c
	require.Len(t, keptChunks(c), 3)
	assert.Equal(t, []int64{ms(10 * time.Millisecond), ms(2015 * time.Millisecond), ms(2015 * time.Millisecond)},
		[]int64{keptChunks(c)[0].At, keptChunks(c)[1].At, keptChunks(c)[2].At})
	assert.True(t, c.terminal, "the done line without its line feed was read at the end")
	assert.Equal(t, int64(4000000), c.meta.Server.Eval)
	assert.Equal(t, []string{"stop"}, c.meta.FinishReasons)

	elem := func(text string) string {
		return fmt.Sprintf("{\n  \"candidates\": [{\"content\": {\"parts\": [{\"text\": %q}]}}]\n}\n", text)
	}
	tee, _, want = newShapedTee(llmstream.ShapeGemini, sse.FramingJSONArray, []scriptedRead{
		{10 * time.Millisecond, "[" + elem("a")},
		{3 * time.Second, "," + elem("b")[:12]},
		{4 * time.Millisecond, elem("b")[12:]},
		{1 * time.Millisecond, `,{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":2}}]`},
	})
	got, err = io.ReadAll(tee)
	require.NoError(t, err)
	require.NoError(t, tee.Close())
	assert.Equal(t, want, string(got))
	c = tee.c
	require.Len(t, keptChunks(c), 2)
	assert.Equal(t, []int64{ms(10 * time.Millisecond), ms(3014 * time.Millisecond)}, []int64{keptChunks(c)[0].At, keptChunks(c)[1].At})
	assert.Equal(t, []string{"STOP"}, c.meta.FinishReasons)
	assert.Equal(t, int64(2), c.meta.OutputTokens)
	assert.NoError(t, c.parseErr)
}
