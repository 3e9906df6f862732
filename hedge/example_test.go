// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/streamstall/streamstall/hedge"
)

// A primary that takes 5 s to say anything loses to the hedge started after
// 100 ms; its connection is closed as soon as the hedge delivers.
func ExampleHedger_Stream() {
	// Two OpenAI-compatible endpoints on one test server: /slow/ waits 5 s
	// before its first chunk, /fast/ answers at once.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server notices a disconnect once the request is read
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasPrefix(r.URL.Path, "/slow/") {
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done(): // the hedge won: the client went away
				return
			}
		}
		for _, text := range []string{"Hello", ", ", "world"} {
			_, _ = fmt.Fprintf(w, "data: {\"model\":\"gpt-4.1\",\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", text)
			w.(http.Flusher).Flush()
		}
		_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer ts.Close()
	source := func(name string) hedge.Source {
		return hedge.NewOpenAIChatSource(hedge.Endpoint{Name: name, BaseURL: ts.URL + "/" + name, Model: "gpt-4.1"})
	}

	h, err := hedge.New([]hedge.Source{source("slow"), source("fast")},
		hedge.Delay(100*time.Millisecond), hedge.StallTimeout(30*time.Second))
	if err != nil {
		panic(err)
	}
	defer h.Close()
	call, err := h.Stream(context.Background(), hedge.Request{Messages: []hedge.Message{{Role: "user", Content: "Hi"}}})
	if err != nil {
		panic(err)
	}
	defer call.Close()
	var text strings.Builder
	for call.Next() {
		text.WriteString(call.Chunk().Text) // goes to the user as it comes
	}
	var stall *hedge.StallError
	if errors.As(call.Err(), &stall) {
		fmt.Println("stalled after", stall.Chunks, "chunks; retry")
		return
	}
	res := call.Result()
	fmt.Println(res.Source, res.Attempts, text.String())
	// Output: fast 2 Hello, world
}
