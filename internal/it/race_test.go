//go:build race

package it

// raceEnabled builds the binaries under test with -race when the tests run with it.
const raceEnabled = true
