//go:build race

package identitysig

// raceEnabled: the race detector randomly drops sync.Pool items, so
// allocation counts are not the program's; the guards run without it
// (make test-unit).
const raceEnabled = true
