package e2e

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rushgate/rushgate/test/testenv"
)

// screenshotDir is the test output folder CI keeps as an artifact (gitignored).
const screenshotDir = "testdata/output"

// TestPush_WaitingPageInChromium: in headless Chromium, a user opens the waiting page behind two
// others, sees the position change as they leave, is admitted, picks a seat on the seat map
// and sees the confirmation; the reservation is in the store. The last screen is saved.
func TestPush_WaitingPageInChromium(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := startServer(t, backends(t)[0], pushConfig(0))
	eventID := s.createEvent(`{"name":"browser","seats":4,"slots":1,"mode":"push"}`)
	head := s.openStream(eventID, "page-head")
	eventually(t, 5*time.Second, "head admitted", func() bool { return head.token() != "" })
	second := s.openStream(eventID, "page-second")
	eventually(t, 3*time.Second, "second waiting", func() bool { return second.lastRank() == 0 })

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(900, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	page := s.url + "/events/" + eventID + "/waiting-room?access_token=" + url.QueryEscape(s.token("page-user"))
	// shows waits until the element id reads want.
	shows := func(id, want string) error {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("`+id+`").textContent === "`+want+`"`,
			chromedp.WithPollingTimeout(10*time.Second)))
		return err
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(shows("position", "2"), shows("size", "2")); err != nil {
		t.Fatalf("the page shows the user second in a line of two: %v", err)
	}
	head.close() // the second user is admitted; the page's user moves up
	if err := errors.Join(shows("position", "1"), shows("ahead", "1")); err != nil {
		t.Fatalf("the position changes: %v", err)
	}
	second.close() // the page's user is admitted
	err := chromedp.Do(ctx,
		chromedp.WaitVisible(`#seats button[data-seat="3"]`),
		chromedp.Click(`#seats button[data-seat="3"]`),
		chromedp.WaitVisible("#confirmation"),
	)
	if err != nil {
		t.Fatalf("admission, seat map, reservation: %v", err)
	}
	confirmation, err := chromedp.Run(ctx, chromedp.Text("#confirmation"))
	if err != nil || !contains(confirmation, "Seat 3 is reserved") {
		t.Fatalf("confirmation %q: %v", confirmation, err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, "waiting-room.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	seats := s.do("GET", "/events/"+eventID+"/seats", s.token("page-user"), "")
	items, _ := seats.body["items"].([]any)
	if len(items) != 4 || !items[2].(map[string]any)["reserved"].(bool) {
		t.Fatalf("seat 3 not reserved: %s", seats.raw)
	}
}
