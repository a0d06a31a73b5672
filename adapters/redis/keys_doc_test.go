package redis

import (
	"os"
	"strings"
	"testing"
)

// TestArchitecture_ListsEveryKeyOfAnEvent: docs/architecture.md's Redis keys table names each key
// an event's waiting room is kept in.
func TestArchitecture_ListsEveryKeyOfAnEvent(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	row := ""
	for line := range strings.Lines(string(doc)) {
		if strings.HasPrefix(line, "| `"+WaitingRoomKeyPrefix+"{<eventId>}:") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/architecture.md has no row of an event's keys")
	}
	w := &WaitingRoom{prefix: WaitingRoomKeyPrefix}
	for _, key := range w.keys("E") {
		_, suffix, _ := strings.Cut(key, "}")
		if !strings.Contains(row, "`"+suffix+"`") && !strings.Contains(row, "}"+suffix+"`") {
			t.Errorf("docs/architecture.md's Redis keys do not name an event's %s key", suffix)
		}
	}
}
