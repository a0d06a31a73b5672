//go:build !race

package http_test

// raceDetector is set in a -race build (race_on_test.go).
const raceDetector = false
