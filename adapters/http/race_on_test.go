//go:build race

package http_test

// raceDetector is set in a -race build, where sync.Pool drops some of what it is given, so a
// pooled state is built again now and then: allocation counts do not hold there.
const raceDetector = true
