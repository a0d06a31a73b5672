package system

import (
	"runtime/debug"
	"testing"
)

func TestResolveBuild(t *testing.T) {
	t.Parallel()
	stamped := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0e2e154abc"}, {Key: "vcs.modified", Value: "false"}}
	cases := []struct {
		name                  string
		linkedVer, linkedRev  string
		info                  *debug.BuildInfo
		wantVersion, wantRevn string
	}{
		{"no build info", "", "", nil, UnknownVersion, UnknownRevision},
		{"checkout build without VCS stamp", "", "",
			&debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}},
			UnknownVersion, UnknownRevision},
		{"test binary: empty main module", "", "",
			&debug.BuildInfo{Main: debug.Module{}},
			UnknownVersion, UnknownRevision},
		{"tagged checkout", "", "",
			&debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v1.2.3"}, Settings: stamped},
			"v1.2.3", "0e2e154abc"},
		{"untagged checkout with changes", "", "",
			&debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v0.0.0-20261125062237-0e2e154abc+dirty"},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0e2e154abc"}, {Key: "vcs.modified", Value: "true"}}},
			"v0.0.0-20261125062237-0e2e154abc+dirty", "0e2e154abc+dirty"},
		{"go install from the module proxy", "", "",
			&debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v1.4.0"}},
			"v1.4.0", UnknownRevision},
		{"embedded as a dependency: the program's VCS is not rushgate's", "", "",
			&debug.BuildInfo{Main: debug.Module{Path: "example.com/shop", Version: "(devel)"}, Settings: stamped,
				Deps: []*debug.Module{{Path: "github.com/other/x", Version: "v9.9.9"}, {Path: ModulePath, Version: "v1.5.0"}}},
			"v1.5.0", UnknownRevision},
		{"embedded through a replace", "", "",
			&debug.BuildInfo{Main: debug.Module{Path: "example.com/shop"},
				Deps: []*debug.Module{{Path: ModulePath, Version: "v1.5.0", Replace: &debug.Module{Path: "../rushgate", Version: "(devel)"}}}},
			UnknownVersion, UnknownRevision},
		{"link-time values win", "v2.0.0", "feedbeef",
			&debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v1.2.3"}, Settings: stamped},
			"v2.0.0", "feedbeef"},
		{"link-time version alone keeps the stamped revision", "v2.0.0", "",
			&debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}, Settings: stamped},
			"v2.0.0", "0e2e154abc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := resolveBuild(tc.linkedVer, tc.linkedRev, tc.info)
			if got.Version != tc.wantVersion || got.Revision != tc.wantRevn {
				t.Fatalf("got %+v, want version %q revision %q", got, tc.wantVersion, tc.wantRevn)
			}
		})
	}
}
