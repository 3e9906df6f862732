//go:build !race

package main

// targetCalls is the number of calls the target tests simulate, as the
// README's table does.
const targetCalls = 20000
