package main

import (
	"strings"
	"testing"
)

func TestParseFlagsSections(t *testing.T) {
	for _, tc := range []struct {
		arg, wantErr string
		want         []string
	}{
		{arg: "compare, tenants", want: []string{"compare", "tenants"}},
		{arg: "compare,tenant", wantErr: `no section "tenant"`},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			cfg, err := parseFlags([]string{"-sections", tc.arg})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFlags(-sections %q): %v, want an error with %q", tc.arg, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.sections) != len(tc.want) {
				t.Errorf("sections %v, want %v", cfg.sections, tc.want)
			}
			for _, s := range tc.want {
				if !cfg.sections[s] {
					t.Errorf("sections %v lack %q", cfg.sections, s)
				}
			}
		})
	}
}
