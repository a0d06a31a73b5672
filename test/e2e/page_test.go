package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"

	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testkit"
)

// pagePoll is the pull mode's poll period in the page tests, and pageBound how long a change
// takes to reach a page at most: a few polls or ticks, with room for a loaded machine.
const (
	pagePoll  = time.Second
	pageBound = 60 * pagePoll
	// pageLimit bounds a whole page test's browser.
	pageLimit = 5 * time.Minute
)

func pageConfig(cfg *bootstrap.Config) {
	pushConfig(0)(cfg)
	cfg.Queue.PollInterval = pagePoll
}

// pageURL is how a buyer is sent to an event's waiting page: the token in the fragment.
func (s *server) pageURL(eventID, token string) string {
	return s.url + "/events/" + url.PathEscape(eventID) + "/waiting-room#token=" + url.QueryEscape(token)
}

// checkSessionOnly checks the page's address keeps no token and its credential is the event's
// session cookie, which no script of the page can read.
func (p *tab) checkSessionOnly(s *server, eventID string) {
	p.t.Helper()
	if address := p.address(); address != s.url+"/events/"+eventID+"/waiting-room" {
		p.t.Fatalf("the address bar shows %q: the token must be gone", address)
	}
	script, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil || script != "" {
		p.t.Fatalf("a script reads the cookies %q (%v): the session must be HttpOnly", script, err)
	}
	cookies, err := chromedp.Run(p.ctx, func(ctx context.Context, target *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, target, network.GetCookies, network.GetCookiesParams{})
	})
	if err != nil {
		p.t.Fatal(err)
	}
	for _, c := range cookies.Cookies {
		if c.Name == rghttp.SessionCookie && c.Path == "/events/"+eventID && c.HTTPOnly && c.SameSite == network.CookieSameSiteStrict {
			return
		}
	}
	p.t.Fatalf("no HttpOnly, SameSite=Strict session cookie for /events/%s among %d cookies", eventID, len(cookies.Cookies))
}

// TestWaitingPage_PullInWords: in headless Chromium a buyer opens a pull event's page from a
// link with the token in its fragment, and the test reads what the page says at each state as
// the buyer would: the event's name, "2 people ahead of you", "1 person ahead of you", "You're
// next" and the wait in words while in line; once admitted a countdown that goes down; then the
// seat picked and reserved, and the turn given back for the next buyer. The address bar keeps
// no token, and the page's credential is a cookie no script reads.
func TestWaitingPage_PullInWords(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, pageConfig)
			eventID := s.createEvent(`{"name":"Pull sale","seats":3,"slots":1,"mode":"pull","tokenTtl":"3m"}`)
			s.admit(eventID, "pull-head")
			for _, user := range []string{"pull-a", "pull-b"} {
				if res := s.enter(eventID, user); res.status != http.StatusCreated {
					t.Fatalf("enter %s: %d %s", user, res.status, res.raw)
				}
			}
			page := newBrowser(t, pageLimit, "UTC", "en_GB").open(s.pageURL(eventID, s.token("pull-page")))
			page.until("event-name", "Pull sale", pageBound, nil)
			page.until("place", "2 people ahead of you", pageBound, nil)
			page.checkSessionOnly(s, eventID)
			if wait := page.read("wait"); !waitInWords.MatchString(wait) {
				t.Fatalf("wait %q, want words", wait)
			}
			page.screenshots("pull-waiting")

			// The holder of the slot gives it back and the next in line takes it: the page's
			// place goes down.
			for _, step := range []struct{ holder, next, place string }{
				{"pull-head", "pull-a", "1 person ahead of you"},
				{"pull-a", "pull-b", "You're next"},
			} {
				if res := s.giveBack(eventID, step.holder); res.status != http.StatusNoContent {
					t.Fatalf("give back %s: %d %s", step.holder, res.status, res.raw)
				}
				if res := s.claim(eventID, step.next); res.status != http.StatusCreated {
					t.Fatalf("claim %s: %d %s", step.next, res.status, res.raw)
				}
				page.until("place", step.place, pageBound, nil)
				if wait := page.read("wait"); !waitInWords.MatchString(wait) {
					t.Fatalf("wait %q, want words", wait)
				}
			}

			s.giveBack(eventID, "pull-b") // the page's buyer is ready: the page claims the slot
			page.countsDown(pageBound, 3*time.Minute)
			page.screenshots("pull-admitted")
			page.click(`#seats button[data-seat="2"]`)
			page.reserved("2", pageBound)
			page.screenshots("pull-reserved")
			if st := s.seatState(eventID, 3); st.reservations != 1 || st.reservedSeats != 1 {
				t.Fatalf("after the page's reservation: %+v", st)
			}
			testkit.Eventually(t, pageBound, "the page gave its turn back", func() error {
				return s.queueView(eventID).hasNums(map[string]int{"admitted": 0})
			})
		})
	}
}

// TestWaitingPage_PlainLanguageErrors: a link with a token that is not valid, one that has
// expired, a page opened with no token at all, and a link to an event that does not exist each
// show a sentence a buyer understands, never JSON, a code or a status number; and no token
// stays in the address bar.
func TestWaitingPage_PlainLanguageErrors(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, pageConfig)
			eventID := s.createEvent(`{"name":"Errors","seats":1,"mode":"pull"}`)
			browser := newBrowser(t, pageLimit, "UTC", "en_GB")
			for _, c := range []struct {
				name, url, problem string
			}{
				{"garbage", s.pageURL(eventID, "not-a-token"), sessionProblem},
				{"expired", s.pageURL(eventID, expiredToken(t, "late-buyer")), sessionProblem},
				{"forged", s.pageURL(eventID, forgedToken(t, "forger")), sessionProblem},
				{"no token", s.url + "/events/" + eventID + "/waiting-room", sessionProblem},
				{"unknown event", s.pageURL(absentID, s.token("lost-buyer")), notFoundProblem},
			} {
				page := browser.open(c.url)
				page.until("problem", c.problem, pageBound, nil)
				body := page.read("status") + "\n" + page.read("problem")
				if machineTalk.MatchString(body) {
					t.Fatalf("%s: the page talks like a machine:\n%s", c.name, body)
				}
				if address, _, _ := strings.Cut(c.url, "#"); page.address() != address {
					t.Fatalf("%s: the address bar shows %q, want %q", c.name, page.address(), address)
				}
				if c.name == "expired" {
					page.screenshots("error")
				}
			}
			if v := s.queueView(eventID); v.num("waiting") != 0 || v.num("admitted") != 0 {
				t.Fatalf("a refused page queued someone: %s", v.raw)
			}
		})
	}
}

// TestWaitingPage_LeaveButton: the leave button takes the buyer out: a waiting push buyer's
// stream closes and the queue loses them; an admitted pull buyer gives the slot back. Either
// way the page says so in words.
func TestWaitingPage_LeaveButton(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, pageConfig)
			browser := newBrowser(t, pageLimit, "UTC", "en_GB")

			push := s.createEvent(`{"name":"Push leave","seats":2,"slots":1,"mode":"push"}`)
			head := s.openStream(push, "leave-head")
			testkit.Eventually(t, pageBound, "head admitted", head.isAdmitted)
			page := browser.open(s.pageURL(push, s.token("leave-push")))
			page.until("place", "You're next", pageBound, nil)
			if v := s.queueView(push); v.num("waiting") != 1 {
				t.Fatalf("the page's buyer is not waiting: %s", v.raw)
			}
			page.click("#leave")
			page.until("left", leftText, pageBound, nil)
			testkit.Eventually(t, pageBound, "the push buyer left the queue", func() error {
				return s.queueView(push).hasNums(map[string]int{"waiting": 0, "admitted": 1})
			})
			page.screenshots("left")
			head.close()

			pull := s.createEvent(`{"name":"Pull leave","seats":2,"slots":1,"mode":"pull"}`)
			page = browser.open(s.pageURL(pull, s.token("leave-pull")))
			page.countsDown(pageBound, 5*time.Minute)
			if v := s.queueView(pull); v.num("admitted") != 1 {
				t.Fatalf("the page's buyer is not admitted: %s", v.raw)
			}
			page.click("#leave")
			page.until("left", leftText, pageBound, nil)
			if v := s.queueView(pull); v.num("admitted") != 0 {
				t.Fatalf("the slot was not given back: %s", v.raw)
			}
		})
	}
}

// expiredToken is a token of user signed with the server's secret whose expiry has passed.
func expiredToken(t *testing.T, user string) string {
	t.Helper()
	raw, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": user, "role": "user", "exp": time.Now().Add(-time.Minute).Unix(),
	}).SignedString([]byte(jwtSecret))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// forgedToken is a well-formed token of user signed with another secret.
func forgedToken(t *testing.T, user string) string {
	t.Helper()
	raw, err := rghttp.NewTokens([]byte("not-the-server-secret-not-the-server")).Mint(user, rghttp.RoleUser, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestWaitingPage_PrequeueInTheBuyersTime: before a sale opens, a buyer in Tokyo whose browser
// speaks British English reads when it opens in their own time and words, and that the place
// will be drawn, in both admission modes.
func TestWaitingPage_PrequeueInTheBuyersTime(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, pageConfig)
			opensAt := time.Now().Add(time.Hour).UTC().Truncate(time.Minute)
			// en-GB's medium date and short time, in Tokyo's zone (UTC+9, no summer time).
			want := "The sale opens at " + opensAt.In(time.FixedZone("JST", 9*3600)).Format("2 Jan 2006, 15:04") +
				"; your place will be drawn."
			browser := newBrowser(t, pageLimit, "Asia/Tokyo", "en_GB")
			for _, mode := range []string{"pull", "push"} {
				eventID := s.createEvent(`{"name":"Early ` + mode + `","seats":2,"mode":"` + mode + `","opensAt":"` +
					opensAt.Format(time.RFC3339) + `"}`)
				page := browser.open(s.pageURL(eventID, s.token("early-"+mode)))
				page.until("opens", want, pageBound, nil)
				page.until("event-name", "Early "+mode, pageBound, nil)
				if place := page.read("place"); place != "" {
					t.Fatalf("%s: a place %q shows before the sale opens", mode, place)
				}
				seedHash := s.do("GET", "/events/"+eventID, s.token("reader"), "").str("seedHash")
				page.click("#prequeue summary") // how the draw can be checked
				if shown := page.read("seed-hash"); seedHash == "" || shown != seedHash {
					t.Fatalf("%s: the page's commitment %q is not the event's %q", mode, shown, seedHash)
				}
				page.checkSessionOnly(s, eventID)
				page.screenshots("prequeue-" + mode)
			}
		})
	}
}

// TestWaitingPage_SoldOut: a buyer who opens the page of an event whose every seat is taken
// reads that it is sold out, in words, and is put in no queue (the page asks the event before
// entering, whatever its admission mode).
func TestWaitingPage_SoldOut(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, pageConfig)
			const name = "Sold out sale"
			eventID := s.createEvent(`{"name":"` + name + `","seats":1,"slots":1,"mode":"pull"}`)
			if res := s.reserve(eventID, "1", "last-buyer", s.admit(eventID, "last-buyer")); res.status != http.StatusCreated {
				t.Fatalf("reserve the last seat: %d %s", res.status, res.raw)
			}
			page := newBrowser(t, pageLimit, "UTC", "en_GB").open(s.pageURL(eventID, s.token("late-buyer")))
			page.until("soldout", soldOutText(name), pageBound, nil)
			page.until("event-name", name, pageBound, nil)
			if v := s.queueView(eventID); v.num("waiting") != 0 || v.num("admitted") != 1 {
				t.Fatalf("the sold-out page queued its buyer: %s", v.raw)
			}
			page.screenshots("soldout")
		})
	}
}

// TestWaitingPage_PullLeaveWhileWaiting: a buyer waiting in a pull line presses the leave
// button: the page says so in words, and the server has taken the buyer out (the page asks
// DELETE /events/{eventId}/queue): no place is left to ask about, the buyer behind moves up, and
// once the line moves on the page still says the buyer left and the buyer stays out.
func TestWaitingPage_PullLeaveWhileWaiting(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, pageConfig)
			eventID := s.createEvent(`{"name":"Pull line","seats":3,"slots":1,"mode":"pull"}`)
			s.admit(eventID, "line-head") // holds the only slot: the page's buyer waits
			page := newBrowser(t, pageLimit, "UTC", "en_GB").open(s.pageURL(eventID, s.token("line-page")))
			page.until("place", "You're next", pageBound, nil)
			if res := s.enter(eventID, "line-behind"); res.status != http.StatusCreated || res.num("rank") != 1 {
				t.Fatalf("enter behind the page's buyer: %d %s", res.status, res.raw)
			}

			page.click("#leave")
			page.until("left", leftText, pageBound, nil)
			if place := page.read("place"); place != "" {
				t.Fatalf("the page still shows a place %q after leaving", place)
			}
			assertError(t, s.queueStatus(eventID, "line-page"), http.StatusNotFound, "NOT_IN_QUEUE")
			assertPlace(t, s.queueStatus(eventID, "line-behind"), http.StatusOK, "waiting", 0, 1)
			if err := s.queueView(eventID).hasNums(map[string]int{"waiting": 1, "admitted": 1}); err != nil {
				t.Fatal(err)
			}
			page.screenshots("pull-left")

			// The line moves on: the buyer behind takes the slot; the page neither claims nor
			// enters again, and still says the buyer left.
			if res := s.giveBack(eventID, "line-head"); res.status != http.StatusNoContent {
				t.Fatalf("give back: %d %s", res.status, res.raw)
			}
			if res := s.claim(eventID, "line-behind"); res.status != http.StatusCreated {
				t.Fatalf("claim of the buyer behind: %d %s", res.status, res.raw)
			}
			if text := page.read("left"); text != leftText {
				t.Fatalf("after the line moved the page says %q; the page says:\n%s", text, page.read("body"))
			}
			assertError(t, s.queueStatus(eventID, "line-page"), http.StatusNotFound, "NOT_IN_QUEUE")
			if err := s.queueView(eventID).hasNums(map[string]int{"waiting": 0, "admitted": 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWaitingPage_SoldOutWhileWaiting: a page open while its buyer waits turns to the sold-out
// wording when others reserve the last seat, in both admission modes (pull: the next status
// poll says soldout; push: the stream's `event: soldout`), and no place shows any more.
func TestWaitingPage_SoldOutWhileWaiting(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, pageConfig)
			browser := newBrowser(t, pageLimit, "UTC", "en_GB")
			for _, mode := range []string{"pull", "push"} {
				name := "Last seat " + mode
				eventID := s.createEvent(`{"name":"` + name + `","seats":1,"slots":1,"mode":"` + mode + `"}`)
				// lastBuyer holds the only slot and reserves the only seat once the page waits.
				var lastBuyer func() string
				if mode == "pull" {
					token := s.admit(eventID, "last-"+mode)
					lastBuyer = func() string { return token }
				} else {
					head := s.openStream(eventID, "last-"+mode)
					testkit.Eventually(t, pageBound, "the head admitted", head.isAdmitted)
					lastBuyer = head.token
				}
				page := browser.open(s.pageURL(eventID, s.token("hopeful-"+mode)))
				page.until("place", "You're next", pageBound, nil)
				if res := s.reserve(eventID, "1", "last-"+mode, lastBuyer()); res.status != http.StatusCreated {
					t.Fatalf("%s: reserve the last seat: %d %s", mode, res.status, res.raw)
				}
				page.until("soldout", soldOutText(name), pageBound, nil)
				if place := page.read("place"); place != "" {
					t.Fatalf("%s: a place %q shows beside sold out", mode, place)
				}
				if v := s.queueView(eventID); v.num("waiting") != 0 || v.body["soldOut"] != true {
					t.Fatalf("%s: the queue after sold out: %s", mode, v.raw)
				}
				page.screenshots("soldout-while-waiting-" + mode)
			}
		})
	}
}

// TestWaitingPage_PushInASecondTab: a buyer who opens a push event's page in a second tab waits
// there: the first tab says so in words and stops, instead of reconnecting and taking the place
// back (the two would take turns, each flashing offline); the turn comes to the second tab.
// Pressing "Wait here instead" in the first brings the place, here the turn, back to it, and
// the second tab says so in turn.
func TestWaitingPage_PushInASecondTab(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s := startServer(t, b, pageConfig)
			eventID := s.createEvent(`{"name":"Two tabs","seats":3,"slots":1,"mode":"push"}`)
			head := s.openStream(eventID, "tabs-head") // holds the only slot: the page's buyer waits
			testkit.Eventually(t, pageBound, "the head admitted", head.isAdmitted)
			browser := newBrowser(t, pageLimit, "UTC", "en_GB")
			token := s.token("tabs-buyer")
			first := browser.open(s.pageURL(eventID, token))
			first.until("place", "You're next", pageBound, nil)
			second := browser.open(s.pageURL(eventID, token))
			second.until("place", "You're next", pageBound, nil)
			first.until("elsewhere", elsewhereText, pageBound, nil)
			if place := first.read("place"); place != "" {
				t.Fatalf("the first tab still shows a place %q", place)
			}
			first.screenshots("push-second-tab")

			head.close() // the slot comes back: the turn goes to the tab that holds the place
			second.countsDown(pageBound, 5*time.Minute)
			if text := first.read("elsewhere"); text != elsewhereText {
				t.Fatalf("the first tab took the place back by itself: it says %q", text)
			}

			first.click("#here")
			first.countsDown(pageBound, 5*time.Minute)
			second.until("elsewhere", elsewhereText, pageBound, nil)
			if v := s.queueView(eventID); v.num("admitted") != 1 || v.num("waiting") != 0 {
				t.Fatalf("after the turn moved between the tabs: %s", v.raw)
			}
		})
	}
}

// TestWaitingPage_ATakenOverTurnStopsLoadingSeats: a buyer's turn comes while the page is
// loading the seat map, and the buyer opens the page in a second tab before the seats arrive;
// the seat load then fails as a busy server's would. The first tab says in words that the place
// is kept in the other tab, and stays so: it shows no problem and does not load the seats again.
// Its seat request is held in the browser (the Fetch domain) until the tab says it was taken
// over, so the failure lands after the take-over every run.
func TestWaitingPage_ATakenOverTurnStopsLoadingSeats(t *testing.T) {
	s := startServer(t, backends(t)[0], pageConfig)
	eventID := s.createEvent(`{"name":"Taken over","seats":3,"slots":1,"mode":"push"}`)
	head := s.openStream(eventID, "takeover-head") // holds the only slot until the page waits
	testkit.Eventually(t, pageBound, "the head admitted", head.isAdmitted)
	browser := newBrowser(t, pageLimit, "UTC", "en_GB")
	token := s.token("takeover-buyer")
	first := browser.open(s.pageURL(eventID, token))
	first.until("place", "You're next", pageBound, nil)

	seatLoads := make(chan fetch.RequestID, 8)
	if err := chromedp.Listen(first.ctx, func(ev any) {
		if paused, ok := ev.(*fetch.EventRequestPaused); ok {
			seatLoads <- paused.RequestID
		}
	}); err != nil {
		t.Fatal(err)
	}
	first.call(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
			{URLPattern: `*/seats\?limit=*`, RequestStage: fetch.RequestStageRequest}}})
		return err
	})
	head.close() // the turn goes to the page, which asks for the seats
	var held fetch.RequestID
	select {
	case held = <-seatLoads:
	case <-time.After(pageBound):
		t.Fatalf("the admitted page never asked for the seats; it says:\n%s", first.read("body"))
	}

	second := browser.open(s.pageURL(eventID, token))
	second.countsDown(pageBound, 5*time.Minute)
	first.until("elsewhere", elsewhereText, pageBound, nil)

	// The seat request fails as a busy server answers: 503, try again in a second.
	first.call(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: held,
			ResponseCode: http.StatusServiceUnavailable, Body: []byte(`{"error":"UNAVAILABLE","message":"busy"}`),
			ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}, {Name: "Retry-After", Value: "1"}}})
		return err
	})
	// A page that went on would show the busy problem at once and ask again within its shortest
	// retry wait (2 s); nothing the page does afterwards can be awaited, so it is watched for
	// three such waits.
	for watched := time.Now(); time.Since(watched) < 3*2*time.Second; {
		select {
		case <-seatLoads:
			t.Fatalf("the taken-over tab asked for the seats again; it says:\n%s", first.read("body"))
		case <-time.After(200 * time.Millisecond):
		}
		if problem, text := first.read("problem"), first.read("elsewhere"); problem != "" || text != elsewhereText {
			t.Fatalf("after the failed seat load the taken-over tab shows problem %q and %q", problem, text)
		}
	}
	first.screenshots("push-taken-over-while-loading-seats")
}

// call runs f on the tab's target, as a DevTools command needs.
func (p *tab) call(f func(ctx context.Context, target *chromedp.Target) error) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Func(f)); err != nil {
		p.t.Fatal(err)
	}
}

// scriptedStream replaces the page's EventSource with one the test drives: every stream the
// page opens is kept in window.streams, and the test sends its events with sendEvent.
const scriptedStream = `window.streams = [];
window.EventSource = class extends EventTarget {
  static CONNECTING = 0; static OPEN = 1; static CLOSED = 2;
  constructor(url) { super(); this.url = url; this.readyState = 1; window.streams.push(this); }
  close() { this.readyState = 2; }
};`

// streams is how many scripted streams the page opened.
func (p *tab) streams() int {
	p.t.Helper()
	n, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`window.streams.length`))
	if err != nil {
		p.t.Fatal(err)
	}
	return n
}

// sendEvent sends the page's nth scripted stream (from 0) the event name with data.
func (p *tab) sendEvent(n int, name, data string) {
	p.t.Helper()
	sent, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`(() => { const s = window.streams[%d]; if (!s || s.readyState === 2) { return false; }
		  s.dispatchEvent(new MessageEvent(%q, {data: %q})); return true; })()`, n, name, data)))
	if err != nil || !sent {
		p.t.Fatalf("send %s on stream %d: %v (no such open stream)", name, n, err)
	}
}

// TestWaitingPage_ARepeatedAdmissionLeavesNoCountdownBehind: a push buyer's stream drops while
// admitted and reconnects (EventSource does so by itself), and the server sends the admission
// again; the turn then runs out. The buyer joins the line again, and the page keeps the new
// place and stream: the first admission's countdown is not left ticking, which would end the
// new visit at its next second as "Your turn has ended". The page's stream is scripted, so the
// events come in this order every run.
func TestWaitingPage_ARepeatedAdmissionLeavesNoCountdownBehind(t *testing.T) {
	s := startServer(t, backends(t)[0], pageConfig)
	eventID := s.createEvent(`{"name":"Again","seats":3,"slots":1,"mode":"push"}`)
	tab := newBrowser(t, pageLimit, "UTC", "en_GB").open(s.pageURL(eventID, s.token("again-buyer")), scriptedStream)
	testkit.Eventually(t, pageBound, "the page's stream", func() error {
		if n := tab.streams(); n != 1 {
			return fmt.Errorf("%d streams", n)
		}
		return nil
	})
	admission := fmt.Sprintf(`{"token":"scripted","expiresAt":%q}`, time.Now().Add(3*time.Second).UTC().Format(time.RFC3339Nano))
	tab.sendEvent(0, "admitted", admission)
	tab.sendEvent(0, "admitted", admission) // the reconnect's
	tab.until("problem", "Your time to pick a seat has run out, so your turn went to the next person in line.", pageBound, nil)

	tab.click("#rejoin")
	testkit.Eventually(t, pageBound, "a new stream", func() error {
		if n := tab.streams(); n != 2 {
			return fmt.Errorf("%d streams", n)
		}
		return nil
	})
	tab.sendEvent(1, "position", `{"rank":2,"aheadCount":2,"queueSize":3,"estimatedWaitSeconds":null}`)
	tab.until("place", "2 people ahead of you", pageBound, nil)
	// A countdown left behind ticks every second: three of its ticks are watched for.
	for watched := time.Now(); time.Since(watched) < 3*time.Second; time.Sleep(200 * time.Millisecond) {
		if place := tab.read("place"); place != "2 people ahead of you" {
			t.Fatalf("back in line, the page reads place %q, status %q, problem %q", place, tab.read("status"), tab.read("problem"))
		}
	}
	tab.sendEvent(1, "position", `{"rank":1,"aheadCount":1,"queueSize":2,"estimatedWaitSeconds":null}`)
	tab.until("place", "1 person ahead of you", pageBound, nil)
}

// seatButtons is how many seat buttons the tab shows.
func (p *tab) seatButtons() int {
	p.t.Helper()
	n, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`document.querySelectorAll("#seats button").length`))
	if err != nil {
		p.t.Fatal(err)
	}
	return n
}

// TestWaitingPage_ARepeatedAdmissionShowsEachSeatOnce: a push buyer's admission comes twice
// (the stream reconnected as the turn came, and both the join and the promotion send it) before
// the seat map of the first has arrived. The page shows each seat once: the first admission's
// seat load, answered after the second one started, adds nothing. Both admissions are sent in
// one task of the page's scripted stream, so both loads are on their way together every run.
func TestWaitingPage_ARepeatedAdmissionShowsEachSeatOnce(t *testing.T) {
	s := startServer(t, backends(t)[0], pageConfig)
	eventID := s.createEvent(`{"name":"Twice","seats":3,"slots":1,"mode":"push"}`)
	tab := newBrowser(t, pageLimit, "UTC", "en_GB").open(s.pageURL(eventID, s.token("twice-buyer")), scriptedStream)
	testkit.Eventually(t, pageBound, "the page's stream", func() error {
		if n := tab.streams(); n != 1 {
			return fmt.Errorf("%d streams", n)
		}
		return nil
	})
	admission := fmt.Sprintf(`{"token":"scripted","expiresAt":%q}`, time.Now().Add(5*time.Minute).UTC().Format(time.RFC3339Nano))
	if _, err := chromedp.Run(tab.ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`(() => { const s = window.streams[0];
		  s.dispatchEvent(new MessageEvent("admitted", {data: %q}));
		  s.dispatchEvent(new MessageEvent("admitted", {data: %q})); return true; })()`, admission, admission))); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, pageBound, "the seats shown", func() error {
		if n := tab.seatButtons(); n < 3 {
			return fmt.Errorf("%d seat buttons", n)
		}
		return nil
	})
	// The other load lands within milliseconds of the first: it is watched for two seconds.
	for watched := time.Now(); time.Since(watched) < 2*time.Second; time.Sleep(100 * time.Millisecond) {
		if n := tab.seatButtons(); n != 3 {
			t.Fatalf("the page shows %d seat buttons for 3 seats:\n%s", n, tab.read("body"))
		}
	}
}

// TestWaitingPage_LeavingWhileAClosedStreamIsCheckedStaysOut: a push buyer's stream is refused
// on a reconnect, and while the page asks the event why, the buyer leaves the line. The answer
// then changes nothing: the page neither shows a problem nor opens a stream again, which would
// put the buyer back in line after "You have left the line". The event's answer is held in the
// browser (the Fetch domain) until the buyer has left, so it lands after the leave every run.
func TestWaitingPage_LeavingWhileAClosedStreamIsCheckedStaysOut(t *testing.T) {
	s := startServer(t, backends(t)[0], pageConfig)
	eventID := s.createEvent(`{"name":"Gone","seats":3,"slots":1,"mode":"push"}`)
	tab := newBrowser(t, pageLimit, "UTC", "en_GB").open(s.pageURL(eventID, s.token("gone-buyer")), scriptedStream)
	testkit.Eventually(t, pageBound, "the page's stream", func() error {
		if n := tab.streams(); n != 1 {
			return fmt.Errorf("%d streams", n)
		}
		return nil
	})
	tab.sendEvent(0, "position", `{"rank":2,"aheadCount":2,"queueSize":3,"estimatedWaitSeconds":null}`)
	tab.until("place", "2 people ahead of you", pageBound, nil)

	eventReads := make(chan fetch.RequestID, 8)
	if err := chromedp.Listen(tab.ctx, func(ev any) {
		if paused, ok := ev.(*fetch.EventRequestPaused); ok {
			eventReads <- paused.RequestID
		}
	}); err != nil {
		t.Fatal(err)
	}
	tab.call(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
			{URLPattern: "*/events/" + eventID, RequestStage: fetch.RequestStageRequest}}})
		return err
	})
	// Refused: EventSource closes for good and says only that it failed.
	if _, err := chromedp.Run(tab.ctx, chromedp.Evaluate[bool](
		`(() => { const s = window.streams[0]; s.readyState = 2; s.onerror(new Event("error")); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	var held fetch.RequestID
	select {
	case held = <-eventReads:
	case <-time.After(pageBound):
		t.Fatalf("the page never asked the event why its stream closed; it says:\n%s", tab.read("body"))
	}
	tab.click("#leave")
	tab.until("left", leftText, pageBound, nil)
	tab.call(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: held})
		return err
	})
	// A page that went on would show the connection problem at once and open a stream again
	// after 2 s; nothing it does afterwards can be awaited, so it is watched for twice that.
	for watched := time.Now(); time.Since(watched) < 2*2*time.Second; time.Sleep(200 * time.Millisecond) {
		if n, problem, left := tab.streams(), tab.read("problem"), tab.read("left"); n != 1 || problem != "" || left != leftText {
			t.Fatalf("after leaving, the page opened %d streams and shows problem %q and %q", n, problem, left)
		}
	}
}
