//go:build race

package integration

// raceEnabled builds the binaries under test with -race when the tests run with it.
const raceEnabled = true
