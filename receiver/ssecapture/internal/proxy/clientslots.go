// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package proxy // import "github.com/streamstall/streamstall/receiver/ssecapture/internal/proxy"

import "sync"

// clientSlots counts the requests each client has in flight, for
// max_concurrent_requests_per_client. A client has an entry only while it
// has a request in flight, so the map holds at most as many entries as
// there are requests being served.
type clientSlots struct {
	max        int64
	ipv6Prefix int

	mu   sync.Mutex
	held map[string]int64
}

// take reports whether client may have one more request in flight, and
// counts it when it may.
func (s *clientSlots) take(client string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[client] >= s.max {
		return false
	}
	s.held[client]++
	return true
}

// give ends one of client's requests in flight.
func (s *clientSlots) give(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.held[client] - 1; n > 0 {
		s.held[client] = n
		return
	}
	delete(s.held, client)
}
