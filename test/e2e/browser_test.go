package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// screenshotDir is the test output folder CI keeps as an artifact (gitignored).
const screenshotDir = "testdata/output"

// The sizes every screenshot of the page is taken at: a phone's and a desktop's.
var screenSizes = []struct {
	name          string
	width, height int64
}{{"phone", 390, 844}, {"desktop", 1280, 800}}

var (
	// waitInWords is every wording of the page's wait estimate.
	waitInWords = regexp.MustCompile(`^(estimating…|less than a minute|about 1 minute|about [1-9][0-9]* minutes|about 1 hour|about [1-9][0-9]* hours)$`)
	// nonsense is what no page a person reads may show: a negative number (a minus that is
	// not inside a word or an id), or a number that is none.
	nonsense = regexp.MustCompile(`(^|[^0-9A-Za-z])-[0-9]|NaN|Infinity|undefined|null`)
	// machineTalk is what a person must never be shown instead of words: JSON, an error code,
	// a status number, a stack.
	machineTalk = regexp.MustCompile(`[{}]|[A-Z]{2,}_[A-Z]{2,}|\b[45][0-9][0-9]\b|Error:|at [a-zA-Z]+ \(`)
	// countdownText is the admitted page's countdown.
	countdownText = regexp.MustCompile(`^Time left to pick a seat: ([0-9]+):([0-5][0-9])$`)
)

// Messages the page shows; the tests compare them whole, as a person reads them.
const (
	sessionProblem  = "Your link to this waiting room has expired or is not valid. Please open the waiting room again from the link you were given."
	notFoundProblem = "We couldn't find this event. Please check the link you were given."
	leftText        = "You have left the line and your place has gone to the next person. You can close this page."
	elsewhereText   = "You opened this waiting room in another tab or window, and your place in line is kept there now, for as long as that page stays open. You can close this page, or wait here instead."
)

func soldOutText(name string) string {
	return "Sold out: every seat for " + name + " has been taken. We're sorry; there is nothing left to wait for."
}

// browser is one headless Chromium; each tab is a page a person has open.
type browser struct {
	t            *testing.T
	ctx          context.Context
	zone, locale string
}

// newBrowser starts Chromium for t, showing times in zone and formatting them for locale, as
// a person's browser there would; it stops when t ends, and its tabs fail after limit.
func newBrowser(t *testing.T, limit time.Duration, zone, locale string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(testenv.Chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(int(screenSizes[1].width), int(screenSizes[1].height)),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, limit)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, zone: zone, locale: locale}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// tab is one open page.
type tab struct {
	t   *testing.T
	ctx context.Context
}

// open opens pageURL in a new tab of b; scripts run in the page before its own.
func (b *browser) open(pageURL string, scripts ...string) *tab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	p := &tab{t: b.t, ctx: ctx}
	err := chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
			if _, err := cdp.Call(ctx, target, emulation.SetTimezoneOverride,
				emulation.SetTimezoneOverrideParams{TimezoneID: b.zone}); err != nil {
				return err
			}
			for _, script := range scripts {
				if _, err := cdp.Call(ctx, target, page.AddScriptToEvaluateOnNewDocument,
					page.AddScriptToEvaluateOnNewDocumentParams{Source: script}); err != nil {
					return err
				}
			}
			_, err := cdp.Call(ctx, target, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: b.locale})
			return err
		}),
		chromedp.Navigate(pageURL))
	if err != nil {
		b.t.Fatalf("open %s: %v", pageURL, err)
	}
	return p
}

// read answers what a person sees of the element id (the whole page for "body"): its text as
// rendered, or "" while it is hidden. The whole page must never show a negative or non-numeric number.
func (p *tab) read(id string) string {
	p.t.Helper()
	texts, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](
		`(() => { const el = document.getElementById("`+id+`") || document.body;
		  return [el.closest("[hidden]") ? "" : el.innerText, document.body.innerText]; })()`))
	if err != nil || len(texts) != 2 {
		p.t.Fatalf("read #%s: %v", id, err)
	}
	if nonsense.MatchString(texts[1]) {
		p.t.Fatalf("the page shows nonsense:\n%s", texts[1])
	}
	return texts[0]
}

// until reads the element until it says want, failing after limit or as soon as check refuses
// a reading on the way.
func (p *tab) until(id, want string, limit time.Duration, check func(text string) error) {
	p.t.Helper()
	testkit.Eventually(p.t, limit, fmt.Sprintf("#%s reads %q", id, want), func() error {
		text := p.read(id)
		if text == want {
			return nil
		}
		if check != nil {
			if err := check(text); err != nil {
				p.t.Fatalf("#%s: %v", id, err)
			}
		}
		return fmt.Errorf("#%s reads %q; the page says:\n%s", id, text, p.read("body"))
	})
}

// address is the page's URL as the address bar shows it.
func (p *tab) address() string {
	p.t.Helper()
	href, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`location.href`))
	if err != nil {
		p.t.Fatal(err)
	}
	return href
}

// click presses the button the selector finds.
func (p *tab) click(selector string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.WaitVisible(selector), chromedp.Click(selector)); err != nil {
		p.t.Fatalf("click %s: %v", selector, err)
	}
}

// screenshots saves the page as it looks on a phone and on a desktop into screenshotDir, as
// name-phone.png and name-desktop.png.
func (p *tab) screenshots(name string) {
	p.t.Helper()
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	for _, size := range screenSizes {
		if err := chromedp.Do(p.ctx, chromedp.EmulateViewport(size.width, size.height)); err != nil {
			p.t.Fatal(err)
		}
		shot, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(screenshotDir, name+"-"+size.name+".png"), shot, 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
}

// countsDown waits for the admitted page's countdown, which must show at most ttl, and then for
// it to go down.
func (p *tab) countsDown(limit, ttl time.Duration) {
	p.t.Helper()
	var first int
	testkit.Eventually(p.t, limit, "a countdown", func() error {
		text := p.read("countdown")
		if text == "" {
			// What the page says instead tells a slow admission from a stream that went wrong.
			return fmt.Errorf("no countdown shown; status %q, place %q, problem %q",
				p.read("status"), p.read("place"), p.read("problem"))
		}
		first = countdownSeconds(p.t, text)
		return nil
	})
	if first <= 0 || first > int(ttl/time.Second) {
		p.t.Fatalf("the countdown shows %ds for a token of %v", first, ttl)
	}
	testkit.Eventually(p.t, limit, "the countdown goes down", func() error {
		now := countdownSeconds(p.t, p.read("countdown"))
		if now > first {
			p.t.Fatalf("the countdown went up from %ds to %ds", first, now)
		}
		if now == first {
			return fmt.Errorf("the countdown still shows %ds", now)
		}
		return nil
	})
}

// countdownSeconds reads the countdown's m:ss as seconds.
func countdownSeconds(t *testing.T, text string) int {
	t.Helper()
	m := countdownText.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("countdown %q", text)
	}
	minutes, _ := strconv.Atoi(m[1])
	seconds, _ := strconv.Atoi(m[2])
	return minutes*60 + seconds
}

// reserved waits for the page to confirm the reservation of seat.
func (p *tab) reserved(seat string, limit time.Duration) {
	p.t.Helper()
	want := regexp.MustCompile(`^Seat ` + regexp.QuoteMeta(seat) + ` is reserved for you\. Your reservation number is \S+\.$`)
	testkit.Eventually(p.t, limit, "seat "+seat+" confirmed", func() error {
		if text := p.read("confirmation"); !want.MatchString(text) {
			return fmt.Errorf("confirmation %q", text)
		}
		return nil
	})
}

// TestPush_WaitingPageInChromium: in headless Chromium a person waits on the page behind two
// others through a sold-out minute, and the test reads what the page says, as that person
// would: how many are ahead and a wait in words while an admission is recent; "estimating…"
// once every slot stayed held for the rate's minute; "You're next" at the front; then
// the countdown and the seat map and the confirmation. No reading on the way may show a
// negative number. The rule's minute is real time here, so the test runs beside the others.
func TestPush_WaitingPageInChromium(t *testing.T) {
	t.Parallel()
	s := startServer(t, backends(t)[0], pushConfig(0))
	eventID := s.createEvent(`{"name":"browser","seats":4,"slots":1,"mode":"push"}`)
	// A page left waiting is told apart on failure: never promoted (the room's admitted count
	// and promotions), or promoted and not delivered. It once waited past its bound beside
	// another suite on the same Redis and Postgres.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the queue as operators see it: %s", s.do("GET", "/admin/events/"+eventID+"/queue", s.adminToken(), "").raw)
		}
	})
	// bound is how long a change takes to reach the page: a few ticks, with room for a loaded
	// machine.
	bound := 100 * pushTick
	head := s.openStream(eventID, "page-head")
	testkit.Eventually(t, bound, "head admitted", head.isAdmitted)
	second := s.openStream(eventID, "page-second")
	third := s.openStream(eventID, "page-third")
	testkit.Eventually(t, bound, "two waiting", func() error { return third.isAtRank(1) })

	// known checks the wait is an estimate in words, not "estimating…".
	known := func(text string) error {
		if !waitInWords.MatchString(text) || text == "estimating…" {
			return fmt.Errorf("wait %q, want an estimate in words", text)
		}
		return nil
	}

	page := newBrowser(t, waiting.RateWindow+2*time.Minute, "UTC", "en_GB").open(s.pageURL(eventID, s.token("page-user")))
	page.until("place", "2 people ahead of you", bound, nil)
	page.until("event-name", "browser", bound, nil)
	if address := page.address(); address != s.url+"/events/"+eventID+"/waiting-room" {
		t.Fatalf("the address bar shows %q: the token must be gone", address)
	}

	head.close() // the second user is admitted and holds the only slot from now on
	testkit.Eventually(t, bound, "second admitted", second.isAdmitted)
	admitted := time.Now()
	page.until("place", "1 person ahead of you", bound, nil)
	testkit.Eventually(t, bound, "an estimate in words after the admission", func() error { return known(page.read("wait")) })
	t.Logf("after an admission: %q, %q", page.read("place"), page.read("wait"))
	page.screenshots("push-waiting")

	// A minute with every slot held: the estimate goes from words to "estimating…", and the
	// place stays what it is.
	page.until("wait", "estimating…", waiting.RateWindow+bound, func(wait string) error {
		if place := page.read("place"); place != "1 person ahead of you" {
			return fmt.Errorf("place %q while the line stands still", place)
		}
		return known(wait)
	})
	// The admission left the window, not the estimate a test-sized while after it: the wait
	// was in words until then (bound allows for the admission reaching this test late).
	if held := time.Since(admitted); held < waiting.RateWindow-bound {
		t.Fatalf("estimating… after %v without admission, before the rate's minute had passed", held)
	}
	if place := page.read("place"); place != "1 person ahead of you" {
		t.Fatalf("place %q", place)
	}
	t.Logf("after %v with the slot held: %q, %q", time.Since(admitted).Round(time.Second), page.read("place"), page.read("wait"))
	page.screenshots("push-estimating")

	second.close() // the third user is admitted; nobody waits before the page's user
	page.until("place", "You're next", bound, nil)
	testkit.Eventually(t, bound, "an estimate in words after the new admission", func() error { return known(page.read("wait")) })
	t.Logf("at the front: %q, %q", page.read("place"), page.read("wait"))

	third.close() // the page's user is admitted
	page.countsDown(bound, waiting.DefaultTokenTTL)
	page.screenshots("push-admitted")
	page.click(`#seats button[data-seat="3"]`)
	page.reserved("3", bound)
	page.screenshots("push-reserved")
	seats := s.do("GET", "/events/"+eventID+"/seats", s.token("page-user"), "")
	items, _ := seats.body["items"].([]any)
	if len(items) != 4 || !items[2].(map[string]any)["reserved"].(bool) {
		t.Fatalf("seat 3 not reserved: %s", seats.raw)
	}
}
