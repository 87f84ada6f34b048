//go:build !race

package it

const raceEnabled = false
