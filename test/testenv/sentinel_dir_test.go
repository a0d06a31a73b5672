package testenv

import (
	"os"
	"testing"
)

// TestRedisSentinels_LeaveNothingInTheWorkingDirectory: a replica's full sync stores its
// snapshot in the test's directory, not in the package's, where a test runs.
func TestRedisSentinels_LeaveNothingInTheWorkingDirectory(t *testing.T) {
	if _, err := os.Stat("dump.rdb"); err == nil {
		t.Fatal("dump.rdb is already in the working directory")
	}
	StartRedisSentinels(t) // the replica's first sync is a full one
	if _, err := os.Stat("dump.rdb"); err == nil {
		_ = os.Remove("dump.rdb")
		t.Fatal("a node of the deployment stored dump.rdb in the working directory")
	}
}
