// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"strings"
	"testing"
	"time"

	"github.com/streamstall/streamstall/internal/sse"
)

// benchStreams are streams of each framing cut into one read per frame,
// as an upstream writes them.
func benchStreams() map[string]struct {
	shape   Shape
	framing sse.Framing
	reads   [][]byte
} {
	frames := func(opener, sep string, n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = []byte(opener + sep)
		}
		return out
	}
	array := frames(geminiElement, "\n,", 200)
	array[0] = append([]byte("["), array[0]...)
	return map[string]struct {
		shape   Shape
		framing sse.Framing
		reads   [][]byte
	}{
		"chat":       {ShapeChatCompletions, sse.FramingSSE, frames(chatOpener, "\n\n", 200)},
		"responses":  {ShapeResponses, sse.FramingSSE, frames(strings.Replace(responsesOpener, "41", "4100", 1), "\n\n", 200)},
		"messages":   {ShapeMessages, sse.FramingSSE, frames(messagesOpener, "\n\n", 200)},
		"gemini":     {ShapeGemini, sse.FramingSSE, frames(geminiSSEOpener, "\r\n\r\n", 200)},
		"json_array": {ShapeGemini, sse.FramingJSONArray, array},
		"ollama":     {ShapeOllamaChat, sse.FramingNDJSON, frames(ollamaChatLine, "\n", 200)},
	}
}

// BenchmarkBoundary is what following the client's bytes costs per frame
// (track-ns/frame), beside what classifying the same frames costs
// (classify-ns/frame), as the proxy does for every stream, both timed in
// the same iterations: ratio is track over classify. The tracker
// allocates nothing (allocs/op counts both).
func BenchmarkBoundary(b *testing.B) {
	for name, s := range benchStreams() {
		b.Run(name, func(b *testing.B) {
			var track, classify time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				bd := NewBoundary(s.shape, s.framing)
				for _, r := range s.reads {
					bd.Track(r)
				}
				mid := time.Now()
				sp := sse.NewSplitter(s.framing, 0, func(ev *sse.Event) { _, _ = Classify(s.shape, ev) })
				for _, r := range s.reads {
					sp.Feed(r)
				}
				track, classify = track+mid.Sub(start), classify+time.Since(mid)
			}
			frames := float64(b.N) * float64(len(s.reads))
			b.ReportMetric(float64(track.Nanoseconds())/frames, "track-ns/frame")
			b.ReportMetric(float64(classify.Nanoseconds())/frames, "classify-ns/frame")
			b.ReportMetric(float64(track)/float64(classify), "ratio")
		})
	}
}
