package docs

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/rushgate/rushgate/bootstrap"
	"github.com/rushgate/rushgate/test/testenv"
)

// quickstartFence opens a README block the quickstart test runs: ```sh quickstart, or
// ```sh quickstart once for a block that runs once per server.
const quickstartFence = "```sh quickstart"

// quickstartFlows is how many flows the README's quickstart walks; a block lost in an edit
// fails the test instead of passing by running less.
const quickstartFlows = 8

// quickstartBlock is one fenced block to run, with the heading it sits under; once marks a
// block a reader cannot paste a second time on the same server.
type quickstartBlock struct {
	heading, script string
	once            bool
}

// exportLine is a ready-to-paste line the embedded default prints on its console.
var exportLine = regexp.MustCompile(`^export (RUSHGATE_[A-Z0-9_]+_TOKEN)=(\S+)$`)

// TestReadme_QuickstartBlocksRun runs every ```sh quickstart block of the README, in order, with
// bash (set -euo pipefail) against one server on the embedded default, with the environment a
// reader has: the token lines `make run` prints and RUSHGATE_URL; then each block not marked
// once again, as a reader who pastes one twice does. A block fails on a non-zero exit, which
// its jq -e checks turn unexpected answers into.
func TestReadme_QuickstartBlocksRun(t *testing.T) {
	jq := testenv.Jq(t)
	blocks := quickstartBlocks(t, filepath.Join(repoRoot, "README.md"))
	if len(blocks) != quickstartFlows {
		t.Fatalf("README has %d quickstart blocks, want %d (one per flow)", len(blocks), quickstartFlows)
	}

	cfg := bootstrap.DefaultConfig()
	cfg.Server.Addr = "127.0.0.1:0"
	cfg.Server.LogLevel = "error"
	cfg.Storage.DataDir = t.TempDir()
	cfg.Auth.JWTSecret = "" // the generated secret and its printed tokens, as make run has them
	var (
		console bytes.Buffer
		srv     *bootstrap.Server
	)
	app := fxtest.New(t, bootstrap.Modules(cfg), fx.Replace(bootstrap.Console{Writer: &console}), fx.Populate(&srv))
	app.RequireStart()
	t.Cleanup(app.RequireStop)

	env := append(os.Environ(), "RUSHGATE_URL="+srv.URL(), "PATH="+filepath.Dir(jq)+":"+os.Getenv("PATH"))
	printed := 0
	for line := range strings.Lines(console.String()) {
		if m := exportLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			env = append(env, m[1]+"="+m[2])
			printed++
		}
	}
	if printed == 0 {
		t.Fatalf("the server printed no tokens to paste:\n%s", console.String())
	}

	dir := t.TempDir() // the blocks' working directory, for the files they write
	runs := blocks
	for _, block := range blocks {
		if !block.once {
			block.heading = "again: " + block.heading
			runs = append(runs, block)
		}
	}
	for i, block := range runs {
		ok := t.Run(block.heading, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+block.script)
			cmd.Env, cmd.Dir = env, dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("run %d, under %q, failed: %v\n--- script\n%s\n--- output\n%s", i+1, block.heading, err, block.script, out)
			}
		})
		if !ok {
			return // later blocks read what earlier ones made (the payment before the outbox)
		}
	}
}

// quickstartBlocks returns the ```sh quickstart blocks of the Markdown file at path, each with
// the last heading before it.
func quickstartBlocks(t *testing.T, path string) []quickstartBlock {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks  []quickstartBlock
		current *strings.Builder
		title   string
		once    bool
	)
	lines := bufio.NewScanner(bytes.NewReader(raw))
	for lines.Scan() {
		line := lines.Text()
		switch {
		case current != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, quickstartBlock{heading: title, script: current.String(), once: once})
			current = nil
		case current != nil:
			current.WriteString(line + "\n")
		case strings.TrimSpace(line) == quickstartFence, strings.TrimSpace(line) == quickstartFence+" once":
			current = &strings.Builder{}
			once = strings.HasSuffix(strings.TrimSpace(line), " once")
		default:
			if m := heading.FindStringSubmatch(line); m != nil {
				title = m[1]
			}
		}
	}
	if current != nil {
		t.Fatalf("%s: a quickstart block is not closed", path)
	}
	return blocks
}
