// Package docs checks the repository's Markdown: every relative link leads to a file of the
// repository (and a #fragment to one of its headings), so the docs a clone ships never point at
// files it does not have.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's root, relative to this package.
const repoRoot = "../.."

var (
	// inlineLink matches [text](target) and ![alt](target), the target up to a space or ')'.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// referenceDefinition matches a reference-style link's definition: [name]: target.
	referenceDefinition = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	// codeSpan matches inline code, whose text is not a link.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// heading matches an ATX heading's text.
	heading = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	// externalScheme marks a target that leaves the repository on purpose.
	externalScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// TestMarkdown_RelativeLinksResolveInsideTheRepository fails on a relative link in any Markdown
// file of the repository that points outside it or to a file or heading that does not exist.
func TestMarkdown_RelativeLinksResolveInsideTheRepository(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t, root)
	if len(files) == 0 {
		t.Fatal("no Markdown files found: the test looks in the wrong place")
	}
	headings := map[string]map[string]bool{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, target := range links(string(raw)) {
			if problem := checkLink(root, file, target, headings); problem != "" {
				t.Errorf("%s: link %q %s", rel, target, problem)
			}
		}
	}
}

// TestMarkdown_CitesNothingOutsideTheRepository: a path that climbs out of the repository (even
// in code) or a section of a specification the repository does not ship is something a reader
// of a clone cannot follow.
func TestMarkdown_CitesNothingOutsideTheRepository(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range markdownFiles(t, root) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for n, line := range strings.Split(string(raw), "\n") {
			if leavesRepository(root, file, line) || strings.Contains(line, specSection) {
				t.Errorf("%s:%d names a document the repository does not ship: %s", rel, n+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestSource_CitesNoSpecificationTheRepositoryDoesNotShip: a comment in the Go source pointing
// to a numbered section of a specification the module does not ship tells a reader of the code
// nothing; it says what it means instead.
func TestSource_CitesNoSpecificationTheRepositoryDoesNotShip(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range filesEndingIn(t, root, ".go") {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for n, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, specSection) || strings.Contains(line, specFile) {
				t.Errorf("%s:%d cites a specification the repository does not ship: %s", rel, n+1, strings.TrimSpace(line))
			}
		}
	}
}

// specSection and specFile are how a citation of the project's design specification, which the
// repository does not ship, reads; spelled in two parts so that this file does not cite it.
const (
	specSection = "SP" + "EC §"
	specFile    = "SP" + "EC.md"
)

// parentPath matches a path that starts by climbing, "../name" or "../../name".
var parentPath = regexp.MustCompile(`(?:\.\./)+[A-Za-z0-9_.-]+`)

// leavesRepository reports whether line, in file, names a path that resolves outside root.
func leavesRepository(root, file, line string) bool {
	for _, path := range parentPath.FindAllString(line, -1) {
		rel, err := filepath.Rel(root, filepath.Join(filepath.Dir(file), path))
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func TestCheckLink(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# rushgate\n\n## The guard: idempotency, then a lane per lock key\n\n## Tests\n\n## Tests\n")
	write("docs/api.md", "# API\n\n## Errors\n")
	write("LICENSE", "text")
	from := filepath.Join(root, "docs", "api.md")
	cases := []struct {
		target string
		ok     bool
	}{
		{"../README.md", true},
		{"../LICENSE", true},
		{"../README.md#the-guard-idempotency-then-a-lane-per-lock-key", true},
		{"../README.md#tests-1", true},
		{"#errors", true},
		{"https://example.com/x.md", true},
		{"mailto:someone@example.com", true},
		{"../docs/", true},
		{"../README.md#no-such-heading", false},
		{"#missing", false},
		{"operations.md", false},
		{"../../sibling/NOTES.md", false},
		{"/etc/passwd", false},
	}
	for _, tc := range cases {
		problem := checkLink(root, from, tc.target, map[string]map[string]bool{})
		if (problem == "") != tc.ok {
			t.Errorf("%q: problem %q, want ok=%v", tc.target, problem, tc.ok)
		}
	}

	for line, leaves := range map[string]bool{
		"see `../README.md` and ../LICENSE": false,
		"notes in ../../sibling/NOTES.md":   true,
		"cd ../../.. && make":               true,
		"no path here":                      false,
	} {
		if got := leavesRepository(root, from, line); got != leaves {
			t.Errorf("leavesRepository(%q) = %v, want %v", line, got, leaves)
		}
	}

	got := links("see [a](a.md) and ![b](img/b.png \"title\")\n`[c](not-a-link.md)`\n```\n[d](in-code.md)\n```\n[e]: ref.md\n")
	want := []string{"a.md", "img/b.png", "ref.md"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("links = %q, want %q", got, want)
	}
}

// markdownFiles lists the repository's Markdown files, leaving out .git and test output.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	return filesEndingIn(t, root, ".md")
}

// filesEndingIn returns every file under root whose name ends in ext (in any letter case),
// outside .git, node_modules and output.
func filesEndingIn(t *testing.T, root, ext string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "output") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.EqualFold(filepath.Ext(path), ext) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// links returns the link targets of a Markdown text, outside code blocks and code spans.
func links(text string) []string {
	var targets []string
	for _, line := range prose(text) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range referenceDefinition.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
	}
	return targets
}

// prose returns the lines of text outside fenced code blocks.
func prose(text string) []string {
	var lines []string
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
		case fence != "" && strings.HasPrefix(trimmed, fence):
			fence = ""
		case fence == "":
			lines = append(lines, line)
		}
	}
	return lines
}

// checkLink returns what is wrong with target, linked from the file from, or "" when nothing
// is. headings caches each Markdown file's heading anchors.
func checkLink(root, from, target string, headings map[string]map[string]bool) string {
	if externalScheme.MatchString(target) {
		return ""
	}
	path, fragment, _ := strings.Cut(target, "#")
	path, _, _ = strings.Cut(path, "?")
	if strings.HasPrefix(path, "/") {
		return "is absolute; link relative to the file"
	}
	resolved := from
	if path != "" {
		resolved = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
	}
	if rel, err := filepath.Rel(root, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "points outside the repository"
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return "points to a missing file"
	}
	if fragment == "" || info.IsDir() || !strings.EqualFold(filepath.Ext(resolved), ".md") {
		return ""
	}
	anchors, ok := headings[resolved]
	if !ok {
		raw, err := os.ReadFile(resolved)
		if err != nil {
			return "points to an unreadable file"
		}
		anchors = headingAnchors(string(raw))
		headings[resolved] = anchors
	}
	if !anchors[fragment] {
		return "names a heading the file does not have"
	}
	return ""
}

// headingAnchors returns the anchors GitHub gives a Markdown file's headings: lower case,
// spaces as hyphens, punctuation but '-' and '_' dropped, "-1", "-2" … after repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(text) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var slug strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				slug.WriteRune(r)
			case r == ' ':
				slug.WriteRune('-')
			}
		}
		anchor := slug.String()
		if n := seen[anchor]; n > 0 {
			seen[anchor] = n + 1
			anchor += "-" + strconv.Itoa(n)
		} else {
			seen[anchor] = 1
		}
		anchors[anchor] = true
	}
	return anchors
}
