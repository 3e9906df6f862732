// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package advice

// The client share cap. Every sample of a series comes from a client (the
// exporter names it: service.instance.id, else the connection's address,
// else one shared bucket). A quantile is set by its tail: at p95, whoever
// holds more than 5 % of the window can put the estimate anywhere. So no
// client may hold more than a share of a series' window, counted in the
// same rotating slots as the samples, for TTFT samples (exact and censored)
// and gaps apart:
//
//	admitted while held < max(share, 1/clients) * (window total + 1)
//
// where clients counts those with samples in the window, this one included.
// The even share 1/clients keeps a small fleet learning (a lone client holds
// the whole window, two hold half each); share takes over from 1/share
// clients on. The sample being admitted counts in the total (the + 1), so
// clients of equal rates are never refused.

// Sample kinds the cap counts apart.
const (
	kindTTFT = iota
	kindGap
	kinds
)

// OwnMeasurement is the client of a sample the collector measured itself
// (its own proxy's streams): no client sent it, so no share caps it, and it
// counts in the total every client's share is taken of.
const OwnMeasurement = ""

// overflowClient is the bucket of the clients past Config.MaxClients: it is
// capped as one client. No client key the exporter builds can equal it.
const overflowClient = "\x00overflow"

// tally is what one client holds of a window, per kind and slot.
type tally struct {
	counts [kinds][]int64
}

func (t *tally) sum(kind int) int64 {
	var n int64
	for _, c := range t.counts[kind] {
		n += c
	}
	return n
}

func (t *tally) empty() bool {
	for k := range t.counts {
		for _, c := range t.counts[k] {
			if c != 0 {
				return false
			}
		}
	}
	return true
}

// shareCap holds the tallies of one window's clients; nil: no cap.
type shareCap struct {
	share      float64
	maxClients int
	clients    map[string]*tally
	totals     [kinds][]int64 // admitted samples per kind and slot
}

func newShareCap(share float64, maxClients, slots int) *shareCap {
	if !(share > 0 && share < 1) {
		return nil
	}
	c := &shareCap{share: share, maxClients: max(maxClients, 1), clients: make(map[string]*tally)}
	for k := range c.totals {
		c.totals[k] = make([]int64, slots)
	}
	return c
}

// clearSlot forgets the samples of slot i, and the clients left with none.
func (c *shareCap) clearSlot(i int) {
	for k := range c.totals {
		c.totals[k][i] = 0
	}
	for key, t := range c.clients {
		for k := range t.counts {
			t.counts[k][i] = 0
		}
		if t.empty() {
			delete(c.clients, key)
		}
	}
}

func (c *shareCap) clearAll() {
	clear(c.clients)
	for k := range c.totals {
		clear(c.totals[k])
	}
}

// take counts one sample of kind from client in slot cur and reports
// whether it is within the cap; a refused sample is not counted.
func (c *shareCap) take(client string, kind, cur int) bool {
	if client == OwnMeasurement {
		c.totals[kind][cur]++ // it weighs in every client's share, and holds none
		return true
	}
	t := c.clients[client]
	clients := len(c.clients)
	if t == nil {
		if clients >= c.maxClients {
			client = overflowClient
			t = c.clients[client]
		}
		if t == nil {
			clients++
		}
	}
	var held, total int64
	if t != nil {
		held = t.sum(kind)
	}
	for _, n := range c.totals[kind] {
		total += n
	}
	share := max(c.share, 1/float64(clients))
	if float64(held) >= share*float64(total+1) {
		return false
	}
	if t == nil {
		t = &tally{}
		slots := len(c.totals[kind])
		for k := range t.counts {
			t.counts[k] = make([]int64, slots)
		}
		c.clients[client] = t
	}
	t.counts[kind][cur]++
	c.totals[kind][cur]++
	return true
}

// Clients is the number of clients with samples in the window (the
// overflow bucket counts as one); 0 without a cap.
func (w *Window) Clients() int {
	if w.cap == nil {
		return 0
	}
	return len(w.cap.clients)
}
