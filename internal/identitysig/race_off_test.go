//go:build !race

package identitysig

const raceEnabled = false
