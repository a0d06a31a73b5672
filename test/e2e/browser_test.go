package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// screenshotDir is the test output folder CI keeps as an artifact (gitignored).
const screenshotDir = "testdata/output"

// TestPush_WaitingPageInChromium: in headless Chromium a person waits on the page behind two
// others through a sold-out minute, and the test reads what the page says (its innerText), as
// that person would: how many are ahead and a wait in words while an admission is recent;
// "estimating…" once every slot stayed held for the rate's minute (SPEC §3); "You're next" at
// the front; then the seat map and the confirmation. No reading on the way may show a negative
// number. The rule's minute is real time here, so the test runs beside the others.
func TestPush_WaitingPageInChromium(t *testing.T) {
	t.Parallel()
	chromium := testenv.Chromium(t)
	s := startServer(t, backends(t)[0], pushConfig(0))
	eventID := s.createEvent(`{"name":"browser","seats":4,"slots":1,"mode":"push"}`)
	// bound is how long a change takes to reach the page: a few ticks, with room for a loaded
	// machine.
	bound := 100 * pushTick
	head := s.openStream(eventID, "page-head")
	testkit.Eventually(t, bound, "head admitted", head.isAdmitted)
	second := s.openStream(eventID, "page-second")
	third := s.openStream(eventID, "page-third")
	testkit.Eventually(t, bound, "two waiting", func() error { return third.isAtRank(1) })

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
	ctx, cancelTimeout := context.WithTimeout(ctx, waiting.RateWindow+2*time.Minute)
	defer cancelTimeout()

	// read answers what a person sees on the page: the element's text as rendered, and the
	// whole page's, which must never show a negative or non-numeric number.
	read := func(id string) string {
		t.Helper()
		texts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[document.getElementById("`+id+`").innerText, document.body.innerText]`))
		if err != nil || len(texts) != 2 {
			t.Fatalf("read #%s: %v", id, err)
		}
		if nonsense.MatchString(texts[1]) {
			t.Fatalf("the page shows nonsense:\n%s", texts[1])
		}
		return texts[0]
	}
	// until reads the element until it says want, failing after limit or as soon as check
	// refuses a reading on the way.
	until := func(id, want string, limit time.Duration, check func(text string) error) {
		t.Helper()
		testkit.Eventually(t, limit, fmt.Sprintf("#%s reads %q", id, want), func() error {
			text := read(id)
			if text == want {
				return nil
			}
			if check != nil {
				if err := check(text); err != nil {
					t.Fatalf("#%s: %v", id, err)
				}
			}
			return fmt.Errorf("#%s reads %q", id, text)
		})
	}
	// known checks the wait is an estimate in words, not "estimating…".
	known := func(text string) error {
		if !waitInWords.MatchString(text) || text == "estimating…" {
			return fmt.Errorf("wait %q, want an estimate in words", text)
		}
		return nil
	}

	page := s.url + "/events/" + eventID + "/waiting-room?access_token=" + url.QueryEscape(s.token("page-user"))
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	until("place", "2 people ahead of you", bound, nil)

	head.close() // the second user is admitted and holds the only slot from now on
	testkit.Eventually(t, bound, "second admitted", second.isAdmitted)
	admitted := time.Now()
	until("place", "1 person ahead of you", bound, nil)
	testkit.Eventually(t, bound, "an estimate in words after the admission", func() error { return known(read("wait")) })
	t.Logf("after an admission: %q, %q", read("place"), read("wait"))

	// A minute with every slot held: the estimate goes from words to "estimating…", and the
	// place stays what it is.
	until("wait", "estimating…", waiting.RateWindow+bound, func(wait string) error {
		if place := read("place"); place != "1 person ahead of you" {
			return fmt.Errorf("place %q while the line stands still", place)
		}
		return known(wait)
	})
	// The admission left the window, not the estimate a test-sized while after it: the wait
	// was in words until then (bound allows for the admission reaching this test late).
	if held := time.Since(admitted); held < waiting.RateWindow-bound {
		t.Fatalf("estimating… after %v without admission, before the rate's minute had passed", held)
	}
	if place := read("place"); place != "1 person ahead of you" {
		t.Fatalf("place %q", place)
	}
	t.Logf("after %v with the slot held: %q, %q", time.Since(admitted).Round(time.Second), read("place"), read("wait"))
	screenshot(t, ctx, "waiting-room-estimating.png")

	second.close() // the third user is admitted; nobody waits before the page's user
	until("place", "You're next", bound, nil)
	testkit.Eventually(t, bound, "an estimate in words after the new admission", func() error { return known(read("wait")) })
	t.Logf("at the front: %q, %q", read("place"), read("wait"))

	third.close() // the page's user is admitted
	err := chromedp.Do(ctx,
		chromedp.WaitVisible(`#seats button[data-seat="3"]`),
		chromedp.Click(`#seats button[data-seat="3"]`),
		chromedp.WaitVisible("#confirmation"),
	)
	if err != nil {
		t.Fatalf("admission, seat map, reservation: %v", err)
	}
	if confirmation := read("confirmation"); !contains(confirmation, "Seat 3 is reserved") {
		t.Fatalf("confirmation %q", confirmation)
	}
	screenshot(t, ctx, "waiting-room.png")
	seats := s.do("GET", "/events/"+eventID+"/seats", s.token("page-user"), "")
	items, _ := seats.body["items"].([]any)
	if len(items) != 4 || !items[2].(map[string]any)["reserved"].(bool) {
		t.Fatalf("seat 3 not reserved: %s", seats.raw)
	}
}

var (
	// waitInWords is every wording of the page's wait estimate (SPEC §8).
	waitInWords = regexp.MustCompile(`^(estimating…|less than a minute|about 1 minute|about [1-9][0-9]* minutes|about 1 hour|about [1-9][0-9]* hours)$`)
	// nonsense is what no page a person reads may show: a negative number (a minus that is
	// not inside a word or an id), or a number that is none.
	nonsense = regexp.MustCompile(`(^|[^0-9A-Za-z])-[0-9]|NaN|Infinity|undefined|null`)
)

// screenshot saves the page as it looks into screenshotDir.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, name), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}
