package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// queue-push's streams are held by client processes of their own: rushgate-load started again
// as a stream client. One descriptor per stream, so a process holds at most
// streamsPerClient(hard limit) streams and every process stays under the open-files limit
// however many streams a run holds (these machines allow 20,000 per process and cannot raise
// it). Client k dials from its own loopback source address (127.0.0.2+k) when the servers are
// on loopback, so no (source, broker) pair runs out of ephemeral ports (28,232 by default).
//
// The run drives its clients over pipes, one line per message. To a client, on its stdin:
//
//	open <i> <url> <authorization>   open stream i (GET url with that Authorization header)
//	release                          admitted streams leave from now on
//	leave <i>                        admitted stream i leaves (its checkout is done)
//	files                            answer with the client's open descriptors
//	(end of input)                   end every stream, then exit
//
// From a client, on its stdout:
//
//	opened <i> <latency ns> <status> [<error or body>]   status 0: a transport error
//	admitted <i> <lag ns> <token> <promoted unix ms>
//	ranked <i> <tick unix ms> <rank> <received unix ns>   the stream's first position
//	soldout <i> <told unix ns> <ended unix ns>   the stream got event: soldout, then ended
//	ended <i> <rose>                 rose: 1 when a position's rank rose above the one before
//	files <n>
//	positions <lag ns>…              once every stream ended: every position event's lag
//
// Lags are taken by the client when the event arrives (receipt − the tick or promotion the
// event's id names), so the pipe adds nothing to them; a position (every stream, every tick) is
// kept by the client rather than sent, so the run's pipes carry openings and admissions only.

// streamClientCommand, as the first argument, runs rushgate-load as a stream client:
// `rushgate-load stream-client <k> <timeout>`. It is no scenario: only queue-push starts it.
const streamClientCommand = "stream-client"

const (
	// streamsPerClientMax keeps a client process well under the limit on machines that allow
	// more, so a crowd is spread over a few processes and their cores.
	streamsPerClientMax = 9000
	// clientFileReserve is what a client holds besides its streams: pipes, epoll, stdio.
	clientFileReserve = 256
	// clientFlushEvery bounds how long an event line waits in a client's output buffer.
	clientFlushEvery = 10 * time.Millisecond
	// positionsPerLine keeps the closing lines of lags short.
	positionsPerLine = 1024
)

// streamsPerClient is how many streams one client process holds under the hard open-files limit.
func streamsPerClient() (int, error) {
	hard := fileLimit()
	if hard <= clientFileReserve {
		return 0, fmt.Errorf("an open-files limit of %d leaves no room for streams", hard)
	}
	return int(min(streamsPerClientMax, hard-clientFileReserve)), nil
}

// fileLimit is this process's hard open-files limit, which its clients inherit.
func fileLimit() uint64 {
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return lim.Max
}

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard one: one descriptor per stream.
func raiseFileLimit() error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	lim.Cur = lim.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// streamEvents is what the run learns from its clients, in each stream's order.
type streamEvents interface {
	opened(i int)
	// admitted: the token, its delivery lag and when it was promoted (the event's id).
	admitted(i int, lag time.Duration, token string, promoted time.Time)
	// ranked: the stream's first position, its rank at the tick (the event's id), received at.
	ranked(i int, tick time.Time, rank int, at time.Time)
	// soldout: the stream was told sold out at told and the server ended it at ended.
	soldout(i int, told, ended time.Time)
	ended(i int, rose bool)
	positions(lags []time.Duration)
}

// streamClients are the run's client processes; stream i is held by client i mod n.
type streamClients struct {
	procs []*clientProcess
}

// clientProcess is one stream client as the run sees it.
type clientProcess struct {
	cmd  *exec.Cmd
	inMu sync.Mutex
	in   io.WriteCloser

	mu      sync.Mutex
	pending map[int]chan attempt
	files   chan int
	// exited is closed once the client's output ended: it holds no stream any more.
	exited chan struct{}
}

// startStreamClients starts enough clients for streams, each reporting to events.
func startStreamClients(streams int, timeout time.Duration, events streamEvents, stderr io.Writer) (*streamClients, error) {
	per, err := streamsPerClient()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find rushgate-load's own binary: %w", err)
	}
	c := &streamClients{}
	for k := range (streams + per - 1) / per {
		p, err := startClientProcess(self, k, timeout, events, stderr)
		if err != nil {
			c.close()
			return nil, err
		}
		c.procs = append(c.procs, p)
	}
	return c, nil
}

func startClientProcess(self string, k int, timeout time.Duration, events streamEvents, stderr io.Writer) (*clientProcess, error) {
	cmd := exec.Command(self, streamClientCommand, strconv.Itoa(k), timeout.String())
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start stream client %d: %w", k, err)
	}
	p := &clientProcess{cmd: cmd, in: in, pending: map[int]chan attempt{}, files: make(chan int, 1), exited: make(chan struct{})}
	go p.readOutput(out, events)
	return p, nil
}

// open opens stream i on its client and answers the opening as an attempt.
func (c *streamClients) open(i int, url, authorization string) attempt {
	p := c.procs[i%len(c.procs)]
	answer := make(chan attempt, 1)
	p.mu.Lock()
	p.pending[i] = answer
	p.mu.Unlock()
	if err := p.send("open %d %s %s", i, url, authorization); err != nil {
		return attempt{err: err}
	}
	select {
	case a := <-answer:
		return a
	case <-p.exited:
		return attempt{err: errors.New("its stream client exited")}
	}
}

// release lets every client's admitted streams leave.
func (c *streamClients) release() error {
	for _, p := range c.procs {
		if err := p.send("release"); err != nil {
			return err
		}
	}
	return nil
}

// leave lets admitted stream i leave, once it is admitted.
func (c *streamClients) leave(i int) error {
	return c.procs[i%len(c.procs)].send("leave %d", i)
}

// mostFiles is the most descriptors any client holds, and how many clients there are.
func (c *streamClients) mostFiles() (int, error) {
	most := 0
	for k, p := range c.procs {
		if err := p.send("files"); err != nil {
			return 0, err
		}
		select {
		case n := <-p.files:
			most = max(most, n)
		case <-p.exited:
			return 0, fmt.Errorf("stream client %d exited", k)
		}
	}
	return most, nil
}

// close ends every stream and waits until every client reported its streams ended and exited.
func (c *streamClients) close() {
	for _, p := range c.procs {
		p.inMu.Lock()
		_ = p.in.Close()
		p.inMu.Unlock()
	}
	for _, p := range c.procs {
		<-p.exited
		_ = p.cmd.Wait()
	}
}

func (p *clientProcess) send(format string, args ...any) error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if _, err := fmt.Fprintf(p.in, format+"\n", args...); err != nil {
		return fmt.Errorf("write to stream client: %w", err)
	}
	return nil
}

// readOutput hands the client's lines to events until its output ends; openings still
// unanswered then are failed by open.
func (p *clientProcess) readOutput(out io.Reader, events streamEvents) {
	defer close(p.exited)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 5)
		if len(f) < 2 {
			continue
		}
		i, _ := strconv.Atoi(f[1])
		switch {
		case f[0] == "opened" && len(f) >= 4:
			latency, _ := strconv.ParseInt(f[2], 10, 64)
			status, _ := strconv.Atoi(f[3])
			a := attempt{latency: time.Duration(latency), status: status, ok: status == http.StatusOK}
			if len(f) == 5 && status == 0 {
				a.err = errors.New(f[4])
			} else if len(f) == 5 {
				a.detail = f[4]
			}
			if a.ok {
				events.opened(i)
			}
			p.mu.Lock()
			answer := p.pending[i]
			delete(p.pending, i)
			p.mu.Unlock()
			if answer != nil {
				answer <- a
			}
		case f[0] == "admitted" && len(f) == 5:
			lag, _ := strconv.ParseInt(f[2], 10, 64)
			promoted, _ := strconv.ParseInt(f[4], 10, 64)
			events.admitted(i, time.Duration(lag), f[3], time.UnixMilli(promoted))
		case f[0] == "ranked" && len(f) == 5:
			tick, _ := strconv.ParseInt(f[2], 10, 64)
			rank, _ := strconv.Atoi(f[3])
			at, _ := strconv.ParseInt(f[4], 10, 64)
			events.ranked(i, time.UnixMilli(tick), rank, time.Unix(0, at))
		case f[0] == "soldout" && len(f) == 4:
			told, _ := strconv.ParseInt(f[2], 10, 64)
			ended, _ := strconv.ParseInt(f[3], 10, 64)
			events.soldout(i, time.Unix(0, told), time.Unix(0, ended))
		case f[0] == "ended" && len(f) == 3:
			events.ended(i, f[2] == "1")
		case f[0] == "positions":
			lags := make([]time.Duration, 0, len(f)-1)
			for _, v := range strings.Fields(sc.Text())[1:] {
				lag, _ := strconv.ParseInt(v, 10, 64)
				lags = append(lags, time.Duration(lag))
			}
			events.positions(lags)
		case f[0] == "files":
			p.files <- i
		}
	}
}

// runStreamClient is a stream client's whole life (see above): it serves the commands on in,
// writes its lines to out, and returns once its input ended and every stream it opened ended.
func runStreamClient(args []string, in io.Reader, out io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: rushgate-load %s <k> <timeout>", streamClientCommand)
	}
	k, err := strconv.Atoi(args[0])
	if err != nil || k < 0 {
		return fmt.Errorf("stream client number %q", args[0])
	}
	timeout, err := time.ParseDuration(args[1])
	if err != nil {
		return fmt.Errorf("stream client timeout: %w", err)
	}
	if err := raiseFileLimit(); err != nil {
		return fmt.Errorf("raise the open-files limit: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c := &streamClient{
		client:  &http.Client{Transport: streamTransport(k, timeout)},
		out:     bufio.NewWriterSize(out, 64<<10),
		release: make(chan struct{}),
		ctx:     ctx,
		leaving: map[int]chan struct{}{},
	}
	flushed := make(chan struct{})
	go c.flushEvery(clientFlushEvery, flushed)

	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 4) // the authorization is the rest of the line
		switch {
		case len(f) == 4 && f[0] == "open":
			i, err := strconv.Atoi(f[1])
			if err != nil {
				return fmt.Errorf("open: stream number %q", f[1])
			}
			c.streams.Add(1)
			go c.open(i, f[2], f[3])
		case len(f) == 1 && f[0] == "release":
			select {
			case <-c.release:
			default:
				close(c.release)
			}
		case len(f) == 2 && f[0] == "leave":
			i, err := strconv.Atoi(f[1])
			if err != nil {
				return fmt.Errorf("leave: stream number %q", f[1])
			}
			close(c.leaveSignal(i))
		case len(f) == 1 && f[0] == "files":
			entries, err := os.ReadDir("/proc/self/fd")
			if err != nil {
				return fmt.Errorf("count open files: %w", err)
			}
			c.write(true, "files %d", len(entries))
		default:
			return fmt.Errorf("unknown command %q", sc.Text())
		}
	}
	stop()
	c.streams.Wait()
	close(flushed)
	c.mu.Lock()
	defer c.mu.Unlock()
	for lags := range slices.Chunk(c.positionLags, positionsPerLine) {
		_, _ = c.out.WriteString("positions")
		for _, lag := range lags {
			_, _ = fmt.Fprintf(c.out, " %d", lag)
		}
		_ = c.out.WriteByte('\n')
	}
	return c.out.Flush()
}

// streamTransport holds a connection per stream, dialled from client k's own loopback source
// address when the server is on loopback.
func streamTransport(k int, timeout time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = -1
	t.ResponseHeaderTimeout = timeout
	plain := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	fromSource := *plain
	fromSource.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+k%250))}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() && ip.To4() != nil {
			return fromSource.DialContext(ctx, network, addr)
		}
		return plain.DialContext(ctx, network, addr)
	}
	return t
}

// streamClient is a stream client process's state.
type streamClient struct {
	client  *http.Client
	ctx     context.Context // done once the input ended: every stream ends
	release chan struct{}
	streams sync.WaitGroup

	mu           sync.Mutex
	out          *bufio.Writer
	dirty        bool
	positionLags []time.Duration
	leaving      map[int]chan struct{} // closed once stream i may leave
}

// leaveSignal is stream i's leave channel, made on first use by the command or the stream.
func (c *streamClient) leaveSignal(i int) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.leaving[i]
	if !ok {
		ch = make(chan struct{})
		c.leaving[i] = ch
	}
	return ch
}

// write adds a line to the output; now flushes it at once (an answer someone waits for), else
// the next periodic flush sends it.
func (c *streamClient) write(now bool, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = fmt.Fprintf(c.out, format+"\n", args...)
	c.dirty = true
	if now {
		_ = c.out.Flush()
		c.dirty = false
	}
}

func (c *streamClient) flushEvery(d time.Duration, done <-chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		c.mu.Lock()
		if c.dirty {
			_ = c.out.Flush()
			c.dirty = false
		}
		c.mu.Unlock()
	}
}

// open opens stream i, answers how it went, and holds it until it ends.
func (c *streamClient) open(i int, url, authorization string) {
	defer c.streams.Done()
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		c.write(true, "opened %d 0 0 %s", i, oneLine(err.Error()))
		return
	}
	req.Header.Set("Authorization", authorization)
	start := time.Now()
	res, err := c.client.Do(req)
	latency := time.Since(start)
	if err != nil {
		c.write(true, "opened %d %d 0 %s", i, latency, oneLine(err.Error()))
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		c.write(true, "opened %d %d %d %s", i, latency, res.StatusCode, oneLine(snippet(raw)))
		return
	}
	c.write(true, "opened %d %d %d", i, latency, res.StatusCode)
	rose := 0
	roseAbove, told := c.hold(ctx, i, res.Body)
	if roseAbove {
		rose = 1
	}
	if !told.IsZero() {
		c.write(false, "soldout %d %d %d", i, told.UnixNano(), time.Now().UnixNano())
	}
	c.write(false, "ended %d %d", i, rose)
}

// hold reads stream i's events until it ends, or until its admission once released or let
// leave; it answers whether a position's rank rose above the one before, and when the stream
// was told sold out (zero: never).
func (c *streamClient) hold(ctx context.Context, i int, body io.Reader) (rose bool, told time.Time) {
	sc := bufio.NewScanner(body)
	var name, data string
	var id int64
	lastRank := -1
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && name != "":
			var lag time.Duration
			if id > 0 {
				lag = time.Since(time.UnixMilli(id))
			}
			switch name {
			case "position":
				var p struct {
					Rank int `json:"rank"`
				}
				_ = json.Unmarshal([]byte(data), &p)
				if lastRank < 0 {
					c.write(false, "ranked %d %d %d %d", i, id, p.Rank, time.Now().UnixNano())
				}
				rose = rose || (lastRank >= 0 && p.Rank > lastRank)
				lastRank = p.Rank
				c.mu.Lock()
				c.positionLags = append(c.positionLags, lag)
				c.mu.Unlock()
			case "admitted":
				var t struct {
					Token string `json:"token"`
				}
				_ = json.Unmarshal([]byte(data), &t)
				c.write(false, "admitted %d %d %s %d", i, lag, t.Token, id)
				// The simulated checkout: the admitted user leaves once released or let leave.
				select {
				case <-c.release:
				case <-c.leaveSignal(i):
				case <-ctx.Done():
				}
				return rose, told
			case "soldout":
				told = time.Now()
			}
			name, data, id = "", "", 0
		}
	}
	return rose, told
}

// oneLine keeps a message on its line of the protocol.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
