// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// hedgeuser is what a stranger writes against a published hedge module: it
// imports hedge and nothing else of streamstall. make rehearse builds it in
// an empty module from the rehearsal's tags alone and runs it: a primary that
// stays silent loses to the hedge started after 50 ms, whose answer is the
// one delivered.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/streamstall/streamstall/hedge"
)

func main() {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server notices a disconnect once the request is read
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasPrefix(r.URL.Path, "/slow/") {
			select {
			case <-time.After(10 * time.Second):
			case <-r.Context().Done(): // cancelled by the hedge that won
				return
			}
		}
		for _, text := range []string{"Hello", ", ", "world"} {
			fmt.Fprintf(w, "data: {\"model\":\"gpt-4.1\",\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", text)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer ts.Close()
	source := func(name string) hedge.Source {
		return hedge.NewOpenAIChatSource(hedge.Endpoint{Name: name, BaseURL: ts.URL + "/" + name, Model: "gpt-4.1"})
	}
	h, err := hedge.New([]hedge.Source{source("slow"), source("fast")}, hedge.Delay(50*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hedgeuser:", err)
		os.Exit(1)
	}
	defer h.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := h.Complete(ctx, hedge.Request{Messages: []hedge.Message{{Role: "user", Content: "Hi"}}})
	if err != nil || res.Text != "Hello, world" || res.Source != "fast" {
		fmt.Fprintf(os.Stderr, "hedgeuser: got %q from %q after %d attempts, err %v; want \"Hello, world\" from the hedge\n", res.Text, res.Source, res.Attempts, err)
		os.Exit(1)
	}
	fmt.Printf("hedgeuser: %q from %s, %d attempts\n", res.Text, res.Source, res.Attempts)
}
