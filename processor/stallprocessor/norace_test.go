//go:build !race

package stallprocessor

const raceEnabled = false
