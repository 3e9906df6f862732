// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"math/rand/v2"
	"strings"
)

const (
	base62    = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	base64URL = base62 + "-_"
	hexLow    = "0123456789abcdef"

	defaultToolName = "lookup"
)

// words make up the generated text: one word is one token is one content chunk.
var words = strings.Fields(`the stream went quiet while the scheduler served a long prefill for another request
and every token after that waited behind it so the client saw a fast first token and then a silence that no
header or first byte could reveal until decode resumed and the remaining tokens arrived at their usual pace`)

func randString(rng *rand.Rand, alphabet string, n int) string {
	var b strings.Builder
	b.Grow(n)
	for range n {
		b.WriteByte(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

// piece is the payload of one content chunk.
type piece struct {
	kind string // ContentText, ContentToolCall or ContentReasoning
	text string // the delta: text, reasoning text or a fragment of the tool arguments
}

// answer is the generated response of one request; every field is a function of the seed and
// the request sequence number, so two servers with the same seed answer the same bytes.
type answer struct {
	id          string // response id in the provider's format
	itemID      string // Responses API output item id, without its msg_ or fc_ prefix
	reasonID    string // Responses API reasoning item id
	toolCallID  string
	toolName    string
	fingerprint string
	pieces      []piece
	toolHeader  bool // the first piece is the OpenAI chat tool-call header (id and name, no arguments)
	inputTokens int
	signature   string // Anthropic thinking block signature
}

func (a *answer) text(kind string) string {
	var b strings.Builder
	for _, p := range a.pieces {
		if p.kind == kind {
			b.WriteString(p.text)
		}
	}
	return b.String()
}

func (a *answer) count(kind string) int {
	n := 0
	for _, p := range a.pieces {
		if p.kind == kind {
			n++
		}
	}
	return n
}

// outputTokens counts one token per content chunk, as real streams roughly do.
func (a *answer) outputTokens() int { return len(a.pieces) }

// newAnswer generates n content pieces of the given kind. headerChunk makes the first piece of a
// tool call the OpenAI chat header frame (it carries the call id and name, its arguments are empty).
// wholeCalls makes each tool-call piece the whole arguments of one call, for the APIs that do not
// stream arguments in fragments.
func newAnswer(rng *rand.Rand, n int, content, toolName string, headerChunk, wholeCalls bool, inputTokens int) *answer {
	a := &answer{
		toolCallID:  "call_" + randString(rng, base62, 24),
		itemID:      randString(rng, hexLow, 50),
		reasonID:    "rs_" + randString(rng, hexLow, 50),
		fingerprint: "fp_" + randString(rng, hexLow, 10),
		signature:   randString(rng, base62, 64),
		toolName:    toolName,
		inputTokens: max(1, inputTokens),
	}
	if a.toolName == "" {
		a.toolName = defaultToolName
	}
	wordAt := func() string { return words[rng.IntN(len(words))] }
	switch {
	case content == ContentToolCall && wholeCalls:
		for range n {
			a.pieces = append(a.pieces, piece{kind: ContentToolCall, text: `{"query":"` + wordAt() + `"}`})
		}
	case content == ContentToolCall:
		args := n
		if headerChunk {
			a.toolHeader = true
			a.pieces = append(a.pieces, piece{kind: ContentToolCall})
			args = max(0, n-1)
		}
		for i := range args {
			frag := " " + wordAt()
			if i == 0 {
				frag = `{"query":"` + frag[1:]
			}
			if i == args-1 {
				frag += `"}`
			}
			a.pieces = append(a.pieces, piece{kind: ContentToolCall, text: frag})
		}
		if args == 0 { // a single header chunk carries the whole arguments
			a.pieces[0].text = `{"query":"` + wordAt() + `"}`
		}
	default:
		reasoning := 0
		if content == ContentReasoning {
			reasoning = n / 2
		}
		for i := range n {
			kind, w := ContentText, wordAt()
			if i < reasoning {
				kind = ContentReasoning
			}
			if i != 0 && i != reasoning {
				w = " " + w
			}
			if i == 0 || i == reasoning {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			a.pieces = append(a.pieces, piece{kind: kind, text: w})
		}
	}
	return a
}

// arguments is the full tool-call argument string.
func (a *answer) arguments() string { return a.text(ContentToolCall) }
