package main

import "testing"

func TestNamesSchedtrace_ReadsGODEBUGAsTheRuntimeDoes(t *testing.T) {
	for godebug, want := range map[string]bool{
		"":                           false,
		"schedtrace=0":               true,
		"http2client=0,schedtrace=1": true,
		"scheddetail=1":              false,
		"schedtraces=1":              false,
		// The runtime matches names exactly: a space makes another name, which it ignores.
		"http2client=0, schedtrace=1": false,
	} {
		if got := namesSchedtrace(godebug); got != want {
			t.Errorf("namesSchedtrace(%q) = %v, want %v", godebug, got, want)
		}
	}
}
